/*
 * r2_mgr_ring1.c -- ring-1 changes run by the R2 leader (docs/mdsl-scale.md
 * "Participants", "One change at a time", "Completion", "Phases"): which MDSL join or leave
 * ring 1, in phases the MDS follow, one change at a time.
 *
 *   STABLE --a change may start--> PREPARE: /r2/ring1 names the joining and
 *     leaving MDSL; the view carries the next ring (derived, not stored);
 *     MDS add the new MDSL as commit participants and ack the seq.
 *   PREPARE --every MDS of ring 0 acked--> MOVING: /r2/rings/1 = next,
 *     /r2/rings/1p = the previous ring; MDS ack again, then `walk` is set
 *     and they move their slices.
 *   MOVING+walk --every MDS of ring 0 walked (current ring-1 v, ring-0 w),
 *     every losing MDSL reported misplaced 0 (leavers also prepared 0)
 *     from a pass counted under the walk's seq or later--> DONE: /r2/rings/1p
 *     deleted, leavers DRAINED, joiners IN.
 *   DONE --every MDS of ring 0 acked--> STABLE.
 *
 * Invariants:
 *  (1) Every phase change is one r2_txn_commit with the view (r2_mgr.h
 *      invariant 1) and bumps seq, so an ack names one phase of one change.
 *  (2) Acks, walks and counts live in memory only (r2_mgr.h invariant 6);
 *      a new leader waits for the next heartbeats: it never advances on
 *      reports it did not receive itself.
 *  (3) A change starts, and drain of a ring-1 MDSL is accepted, only while
 *      every MDS of ring 0 sends the ring-1 heartbeat fields (PHASED): an
 *      MDS that does not would never follow ring 1, so for it ring 1 stays
 *      frozen exactly as before (FROZEN: old refusals and WARN).
 *  (4) History depth is two: a running change is never widened; MDSL that
 *      register or are drained meanwhile wait for the next one. Only a
 *      drain of a JOINING MDSL changes it (its join is cancelled).
 *  (5) Ring 0 follows failures, so a FAILED MDS is not waited for; a
 *      failed MDSL is (its slices are only on its disk: the change stalls).
 */
#include "r2_mgr_i.h"

#include "xt_common.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* ---- lookups ------------------------------------------------------------------ */

static const struct r2_rec_ring1_ent *ent_of(const struct r2_rec_ring1 *r, uint32_t id)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->ent[i].id == id)
            return &r->ent[i];
    return NULL;
}

static bool in(const xt_ring *r, uint32_t id)
{
    return r && xt_ring_has_site(r, id) == 1;
}

static int role_of(const struct r2_state *st, uint32_t id)
{
    const struct r2_rec_ring1_ent *e = ent_of(&st->r1, id);
    if (e && e->role != XT_RING1_OUT)
        return e->role;
    return in(st->ring[XT_RING_MDSL], id) || in(st->prev1, id) ? XT_RING1_IN : XT_RING1_OUT;
}

static bool has_joiners(const struct r2_rec_ring1 *r)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->ent[i].role == XT_RING1_JOINING)
            return true;
    return false;
}

/* The ring the running change moves slices away from: PREPARE the current,
 * MOVING the previous; NULL when none runs. */
static const xt_ring *base_ring(const struct r2_state *st)
{
    return st->r1.phase == XT_RING1_PREPARE ? st->ring[XT_RING_MDSL]
           : st->r1.phase == XT_RING1_MOVING ? st->prev1
                                               : NULL;
}

/* An MDSL whose slices the running change moves away: a leaver, or with a
 * join every MDSL of the base ring (each gives up its share). */
static bool losing(const struct r2_state *st, uint32_t id)
{
    const xt_ring *b = base_ring(st);
    if (!b)
        return false;
    const struct r2_rec_ring1_ent *e = ent_of(&st->r1, id);
    return (e && e->leaving) || (has_joiners(&st->r1) && in(b, id));
}

/* Calls fn for every MDS of ring 0 until it returns false; false then. */
static bool every_mds(const struct r2_state *st, bool (*fn)(const struct r2_site_ent *, void *),
                      void *arg)
{
    const xt_ring *r0 = st->ring[XT_RING_MDS];
    uint32_t n = xt_ring_nsites(r0);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id = 0, w = 0;
        xt_ring_site_at(r0, k, &id, &w);
        const struct r2_site_ent *e = r2_state_site(st, id);
        if (!e || !fn(e, arg))
            return false;
    }
    return true;
}

static bool follows(const struct r2_site_ent *e, void *arg)
{
    (void)arg;
    return e->r1.reports && e->r1.hb.has_acked;
}

static bool acked(const struct r2_site_ent *e, void *arg)
{
    return follows(e, NULL) && e->r1.hb.acked >= *(const uint64_t *)arg;
}

int r2_ring1_mode(const struct r2_state *st)
{
    if (!r2_state_ring1_stored(st))
        return R2_RING1_OPEN;
    if (xt_ring_nsites(st->ring[XT_RING_MDS]) == 0 || !every_mds(st, follows, NULL))
        return R2_RING1_FROZEN;
    return R2_RING1_PHASED;
}

int r2_ring1_mode_of(r2_mgr *m)
{
    pthread_mutex_lock(&m->mu);
    int mode = r2_ring1_mode(&m->st);
    pthread_mutex_unlock(&m->mu);
    return mode;
}

/* ---- heartbeats and derived state ---------------------------------------------- */

void r2_ring1_beat(r2_mgr *m, struct r2_site_ent *e, const struct xt_r2_hb_ring1 *r1)
{
    assert(xt_mutex_held(&m->mu));
    struct r2_r1_report *p = &e->r1;
    if (!r1) {
        memset(p, 0, sizeof *p);
        return;
    }
    p->hb = *r1;
    p->reports = true;
}

/* A copy of cur with the change of r applied (leavers out, joiners in). */
static int apply_change(const xt_ring *cur, const struct r2_rec_ring1 *r, xt_ring **out)
{
    *out = NULL;
    xt_ring *c = xt_ring_dup(cur);
    if (!c)
        return -ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < r->n && rc == 0; i++) {
        const struct r2_rec_ring1_ent *e = &r->ent[i];
        if (e->leaving && in(c, e->id))
            rc = xt_ring_remove_site(c, e->id);
        else if (e->role == XT_RING1_JOINING && !in(c, e->id))
            rc = xt_ring_add_site(c, e->id, XT_RING_WEIGHT_UNIT);
    }
    if (rc < 0) {
        xt_ring_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int r2_ring1_derive(struct r2_state *st)
{
    assert(st->ring[XT_RING_MDSL] != NULL);
    xt_ring_free(st->next1);
    st->next1 = NULL;
    const struct r2_rec_ring1 *r = &st->r1;
    uint64_t v = xt_ring_version(st->ring[XT_RING_MDSL]);
    bool moving = r->phase == XT_RING1_MOVING;
    if (moving != (st->prev1 != NULL) ||
        (moving && (r->to_version != v || r->from_version != xt_ring_version(st->prev1)))) {
        XT_ERR("ring-1 change record (%s) does not match rings 1/1p",
               xt_ring1_phase_name(r->phase));
        return -EIO;
    }
    if (r->phase != XT_RING1_PREPARE)
        return 0;
    int rc = apply_change(st->ring[XT_RING_MDSL], r, &st->next1);
    if (rc == 0 && (r->from_version != v || xt_ring_version(st->next1) != r->to_version)) {
        XT_ERR("ring-1 change record (prepare v%llu -> v%llu) does not match ring 1 v%llu",
               (unsigned long long)r->from_version, (unsigned long long)r->to_version,
               (unsigned long long)v);
        rc = -EIO;
    }
    return rc;
}

int r2_ring1_view(const struct r2_state *st, struct xt_view *v)
{
    struct xt_view_ring1 *o = xt_calloc(1, sizeof *o);
    if (!o)
        return -ENOMEM;
    v->ring1 = o;
    const struct r2_rec_ring1 *r = &st->r1;
    o->phase = r->phase;
    o->seq = r->seq;
    o->walk = r->walk;
    o->started_ns = r->started_ns;
    o->from_version = o->to_version = xt_ring_version(st->ring[XT_RING_MDSL]);
    if (r->phase != XT_RING1_STABLE) {
        o->from_version = r->from_version;
        o->to_version = r->to_version;
    }
    int rc = 0;
    if (st->prev1)
        rc = r2_state_ring_blob(st->prev1, &o->prev);
    if (rc == 0 && st->next1)
        rc = r2_state_ring_blob(st->next1, &o->next);
    if (rc < 0)
        return rc; /* the caller frees the view, o with it */
    size_t n = 0;
    for (size_t i = 0; i < st->nsites; i++)
        n += st->sites[i].s.type == XT_SITE_MDS || st->sites[i].s.type == XT_SITE_MDSL;
    if (n && !(o->sites = xt_calloc(n, sizeof *o->sites)))
        return -ENOMEM;
    for (size_t i = 0; i < st->nsites; i++) {
        const struct r2_site_ent *e = &st->sites[i];
        if (e->s.type != XT_SITE_MDS && e->s.type != XT_SITE_MDSL)
            continue;
        struct xt_ring1_site *q = &o->sites[o->nsites++];
        const struct r2_rec_ring1_ent *re = ent_of(r, e->s.id);
        bool mdsl = e->s.type == XT_SITE_MDSL;
        q->id = e->s.id;
        q->role = mdsl ? role_of(st, e->s.id) : XT_RING1_OUT;
        q->leaving = mdsl && re && re->leaving;
        q->losing = mdsl && losing(st, e->s.id);
        q->reports = e->r1.reports;
        q->acked = e->r1.hb.acked;
        if (e->r1.hb.has_walked) {
            q->walked_v = e->r1.hb.walked_v;
            q->walked_w = e->r1.hb.walked_w;
        }
        q->has_counts = e->r1.hb.has_counts;
        q->misplaced = e->r1.hb.misplaced;
        q->prepared = e->r1.hb.prepared;
    }
    return 0;
}

/* ---- writing a phase change ------------------------------------------------------ */

/* REQUIRES: m->wmu. Stages rec, ring 1 = cur (NULL: unchanged) and
 * /r2/rings/1p = prev (NULL: deleted when del_prev) in t (which may hold
 * more, e.g. a site record), commits, and installs them in m->st. Takes
 * rec->ent, cur and prev in every case. */
static int commit_change(r2_mgr *m, struct r2_txn *t, struct r2_rec_ring1 *rec, xt_ring *cur,
                         xt_ring *prev, bool del_prev, int sections)
{
    assert(xt_mutex_held(&m->wmu) && m->st_valid);
    assert(!cur || xt_ring_id(cur) == XT_RING_MDSL);
    int rc = r2_txn_ring1(t, rec);
    if (rc == 0 && cur)
        rc = r2_txn_ring(t, cur);
    if (rc == 0 && prev)
        rc = r2_txn_ring_at(t, R2_KEY_RING1_PREV, prev);
    else if (rc == 0 && del_prev)
        rc = r2_txn_del(t, R2_KEY_RING1_PREV);
    if (rc == 0)
        rc = r2_txn_commit(m, t, sections | XT_VIEW_RINGS);
    if (rc < 0) {
        r2_rec_ring1_clear(rec);
        xt_ring_free(cur);
        xt_ring_free(prev);
        return rc;
    }
    pthread_mutex_lock(&m->mu);
    struct r2_state *st = &m->st;
    r2_rec_ring1_clear(&st->r1);
    st->r1 = *rec;
    memset(rec, 0, sizeof *rec);
    if (cur) {
        xt_ring_free(st->ring[XT_RING_MDSL]);
        st->ring[XT_RING_MDSL] = cur;
    }
    if (prev || del_prev) {
        xt_ring_free(st->prev1);
        st->prev1 = prev;
    }
    if (r2_ring1_derive(st) < 0)
        m->need_reload = true; /* the store has it; memory does not */
    pthread_mutex_unlock(&m->mu);
    XT_INFO("ring 1: %s (seq %llu, v%llu -> v%llu%s)", xt_ring1_phase_name(st->r1.phase),
            (unsigned long long)st->r1.seq, (unsigned long long)st->r1.from_version,
            (unsigned long long)st->r1.to_version, st->r1.walk ? ", walk" : "");
    return 0;
}

/* A copy of r's entries into *out, keeping those keep() accepts, each
 * passed through edit() (may be NULL). */
static int copy_rec(const struct r2_state *st, struct r2_rec_ring1 *out,
                    bool (*keep)(const struct r2_state *, const struct r2_rec_ring1_ent *,
                                 uint32_t),
                    uint32_t arg, void (*edit)(struct r2_rec_ring1_ent *))
{
    const struct r2_rec_ring1 *r = &st->r1;
    *out = *r;
    out->ent = NULL;
    out->n = 0;
    out->seq = r->seq + 1;
    if (r->n && !(out->ent = xt_calloc(r->n, sizeof *out->ent)))
        return -ENOMEM;
    for (size_t i = 0; i < r->n; i++)
        if (!keep || keep(st, &r->ent[i], arg)) {
            out->ent[out->n] = r->ent[i];
            if (edit)
                edit(&out->ent[out->n]);
            out->n++;
        }
    return 0;
}

/* Adds an entry, keeping the entries by id (room: the caller's calloc). */
static void rec_insert(struct r2_rec_ring1 *r, struct r2_rec_ring1_ent e)
{
    size_t i = r->n;
    while (i > 0 && r->ent[i - 1].id > e.id) {
        r->ent[i] = r->ent[i - 1];
        i--;
    }
    r->ent[i] = e;
    r->n++;
}

/* ---- the state machine ----------------------------------------------------------- */

/* DRAINED entries of sites that still exist (removed ones are pruned). */
static bool keep_drained(const struct r2_state *st, const struct r2_rec_ring1_ent *e,
                         uint32_t arg)
{
    (void)arg;
    return e->role == XT_RING1_DRAINED && r2_state_site(st, e->id);
}

/* STABLE: joiners are MDSL UP and OUT, leavers MDSL DRAINING in ring 1. */
static int start_change(r2_mgr *m)
{
    const struct r2_state *st = &m->st;
    const xt_ring *cur = st->ring[XT_RING_MDSL];
    size_t cand = 0;
    for (size_t i = 0; i < st->nsites; i++)
        cand += st->sites[i].s.type == XT_SITE_MDSL;
    struct r2_rec_ring1 rec;
    memset(&rec, 0, sizeof rec);
    rec.seq = st->r1.seq + 1;
    rec.phase = XT_RING1_PREPARE;
    if (cand + st->r1.n && !(rec.ent = xt_calloc(cand + st->r1.n, sizeof *rec.ent)))
        return -ENOMEM;
    size_t moves = 0;
    for (size_t i = 0; i < st->nsites; i++) {
        const struct xt_site *s = &st->sites[i].s;
        const struct r2_rec_ring1_ent *old = ent_of(&st->r1, s->id);
        if (s->type != XT_SITE_MDSL || (old && old->role == XT_RING1_DRAINED))
            continue;
        bool joins = s->state == XT_SITE_UP && !in(cur, s->id);
        bool leaves = s->state == XT_SITE_DRAINING && in(cur, s->id);
        if (joins || leaves) {
            rec_insert(&rec, (struct r2_rec_ring1_ent){
                                 .id = s->id, .role = joins ? XT_RING1_JOINING : XT_RING1_OUT,
                                 .leaving = leaves });
            moves++;
        }
    }
    for (size_t i = 0; i < st->r1.n; i++)
        if (keep_drained(st, &st->r1.ent[i], 0))
            rec_insert(&rec, st->r1.ent[i]);
    xt_ring *next = NULL;
    int rc = moves ? apply_change(cur, &rec, &next) : 0;
    if (rc == 0 && moves && xt_ring_nsites(next) == 0)
        moves = 0; /* every MDSL draining: the drains wait for a new MDSL */
    if (rc < 0 || moves == 0) {
        xt_ring_free(next);
        r2_rec_ring1_clear(&rec);
        return rc;
    }
    rec.from_version = xt_ring_version(cur);
    rec.to_version = xt_ring_version(next);
    rec.started_ns = xt_now_ns();
    xt_ring_free(next); /* derived again on install */
    struct r2_txn t = { .n = 0 };
    rc = commit_change(m, &t, &rec, NULL, NULL, false, 0);
    r2_txn_free(&t);
    return rc;
}

static bool walked(const struct r2_site_ent *e, void *arg)
{
    const uint64_t *vw = arg; /* ring-1 v, ring-0 w */
    return e->r1.hb.has_walked && e->r1.hb.walked_v == vw[0] && e->r1.hb.walked_w == vw[1];
}

/* MOVING with walk: docs/mdsl-scale.md "Completion". A losing MDSL's zero
 * counts only from a pass counted under the seq that set `walk` (or a later
 * one): by then every MDS of ring 0 acked MOVING, so nothing writes at an
 * old placement and the misplaced set only shrinks; a zero counted earlier
 * (say, under STABLE, delivered in the heartbeat that fetched the walk's
 * view) says nothing about the moves. */
static bool moves_done(const struct r2_state *st)
{
    uint64_t vw[2] = { xt_ring_version(st->ring[XT_RING_MDSL]),
                       xt_ring_version(st->ring[XT_RING_MDS]) };
    if (!every_mds(st, walked, vw))
        return false;
    for (size_t i = 0; i < st->nsites; i++) {
        const struct r2_site_ent *e = &st->sites[i];
        if (e->s.type != XT_SITE_MDSL || !losing(st, e->s.id))
            continue;
        const struct r2_rec_ring1_ent *re = ent_of(&st->r1, e->s.id);
        if (!e->r1.reports || !e->r1.hb.has_counts || e->r1.hb.misplaced != 0 ||
            e->r1.hb.counted_seq < st->r1.seq || (re && re->leaving && e->r1.hb.prepared != 0))
            return false;
    }
    return true;
}

static bool not_joining(const struct r2_state *st, const struct r2_rec_ring1_ent *e,
                        uint32_t arg)
{
    (void)st;
    (void)arg;
    return e->role != XT_RING1_JOINING;
}

static void leaver_drained(struct r2_rec_ring1_ent *e)
{
    if (e->leaving) {
        e->leaving = false;
        e->role = XT_RING1_DRAINED;
    }
}

/* REQUIRES: m->mu (the reports change under it alone). Whether the
 * running phase's condition holds, or (STABLE) a change may start. */
static bool may_advance(const struct r2_state *st)
{
    uint64_t seq = st->r1.seq;
    if (r2_ring1_mode(st) != R2_RING1_PHASED)
        return false; /* FROZEN: a running change stalls (invariant 3) */
    switch (st->r1.phase) {
    case XT_RING1_STABLE:
        return true;
    case XT_RING1_MOVING:
        return st->r1.walk ? moves_done(st) : every_mds(st, acked, &seq);
    default:
        return every_mds(st, acked, &seq);
    }
}

void r2_ring1_tick(r2_mgr *m)
{
    assert(xt_mutex_held(&m->wmu) && m->st_valid);
    pthread_mutex_lock(&m->mu);
    bool go = may_advance(&m->st);
    pthread_mutex_unlock(&m->mu);
    if (!go)
        return;
    /* From here on only what changes under m->wmu (held) is read. */
    const struct r2_state *st = &m->st;
    struct r2_rec_ring1 rec;
    struct r2_txn t = { .n = 0 };
    int rc = 0;
    switch (st->r1.phase) {
    case XT_RING1_STABLE:
        rc = start_change(m);
        break;
    case XT_RING1_PREPARE:
        if ((rc = copy_rec(st, &rec, NULL, 0, NULL)) < 0)
            break;
        rec.phase = XT_RING1_MOVING;
        {
            xt_ring *cur = xt_ring_dup(st->next1), *prev = xt_ring_dup(st->ring[XT_RING_MDSL]);
            if (!cur || !prev) {
                xt_ring_free(cur);
                xt_ring_free(prev);
                r2_rec_ring1_clear(&rec);
                rc = -ENOMEM;
                break;
            }
            rc = commit_change(m, &t, &rec, cur, prev, false, 0);
        }
        break;
    case XT_RING1_MOVING:
        if (!st->r1.walk) {
            if ((rc = copy_rec(st, &rec, NULL, 0, NULL)) == 0) {
                rec.walk = true;
                rc = commit_change(m, &t, &rec, NULL, NULL, false, 0);
            }
        } else if ((rc = copy_rec(st, &rec, not_joining, 0, leaver_drained)) == 0) {
            rec.phase = XT_RING1_DONE;
            rec.walk = false;
            rc = commit_change(m, &t, &rec, NULL, NULL, true, 0);
        }
        break;
    case XT_RING1_DONE:
        if ((rc = copy_rec(st, &rec, keep_drained, 0, NULL)) < 0)
            break;
        rec.phase = XT_RING1_STABLE;
        rec.from_version = rec.to_version = xt_ring_version(st->ring[XT_RING_MDSL]);
        rec.started_ns = 0;
        rc = commit_change(m, &t, &rec, NULL, NULL, false, 0);
        break;
    }
    r2_txn_free(&t);
    if (rc < 0 && rc != -EREMOTE)
        XT_WARN("ring 1: phase change failed: %s (retried)", strerror(-rc));
}

/* ---- drain and remove -------------------------------------------------------------- */

static bool not_site(const struct r2_state *st, const struct r2_rec_ring1_ent *e, uint32_t id)
{
    (void)st;
    return e->id != id;
}

/* Drain of a JOINING MDSL: its join is cancelled (invariant 4). PREPARE:
 * it leaves the change (which ends if nothing else changes); MOVING: the
 * current ring drops it, what reached it moves back, it leaves. */
static int cancel_join(r2_mgr *m, const struct xt_site *s)
{
    const struct r2_state *st = &m->st;
    struct r2_rec_ring1 rec;
    struct r2_txn t = { .n = 0 };
    xt_ring *cur = NULL;
    int rc = copy_rec(st, &rec, not_site, s->id, NULL);
    struct xt_site d = *s;
    d.state = XT_SITE_DRAINING;
    if (rc == 0)
        rc = r2_txn_site(&t, &d);
    if (rc == 0 && st->r1.phase == XT_RING1_PREPARE) {
        xt_ring *next = NULL;
        rc = apply_change(st->ring[XT_RING_MDSL], &rec, &next);
        if (rc == 0 && xt_ring_version(next) == rec.from_version) {
            rec.phase = XT_RING1_STABLE;
            rec.started_ns = 0;
        }
        if (rc == 0)
            rec.to_version = xt_ring_version(next);
        xt_ring_free(next);
    } else if (rc == 0) {
        cur = xt_ring_dup(st->ring[XT_RING_MDSL]);
        rc = cur ? xt_ring_remove_site(cur, s->id) : -ENOMEM;
        if (rc == 0) {
            rec_insert(&rec, (struct r2_rec_ring1_ent){ .id = s->id, .role = XT_RING1_OUT,
                                                        .leaving = true });
            rec.walk = false;
            rec.to_version = xt_ring_version(cur);
        }
    }
    if (rc < 0) {
        xt_ring_free(cur);
        r2_rec_ring1_clear(&rec);
    } else {
        rc = commit_change(m, &t, &rec, cur, NULL, false, XT_VIEW_SITES);
    }
    r2_txn_free(&t);
    if (rc == 0) {
        pthread_mutex_lock(&m->mu);
        r2_state_site(&m->st, s->id)->s.state = XT_SITE_DRAINING;
        pthread_mutex_unlock(&m->mu);
        XT_INFO("site %u (mdsl %s) draining: its join to ring 1 is cancelled", s->id, s->addr);
    }
    return rc;
}

/* The lowest id of ring 1: the MDSL every MDS keeps its decision records at
 * (mds_main.c; ids only grow, so joins keep it). 0 when ring 1 is empty. */
static uint32_t home_mdsl(const xt_ring *r)
{
    uint32_t id, w;
    return r && xt_ring_site_at(r, 0, &id, &w) == 0 ? id : 0; /* ascending ids */
}

int r2_ring1_admin(r2_mgr *m, const struct xt_site *s, bool remove)
{
    assert(xt_mutex_held(&m->wmu) && m->st_valid);
    assert(s->type == XT_SITE_MDSL);
    const struct r2_state *st = &m->st;
    int mode = r2_ring1_mode_of(m);
    /* Not OPEN, as the caller saw: the sites that close ring 1 change only
     * under wmu, which the caller holds. */
    assert(mode != R2_RING1_OPEN);
    const struct r2_rec_ring1_ent *e = ent_of(&st->r1, s->id);
    bool cur = in(st->ring[XT_RING_MDSL], s->id);
    bool used = cur || in(st->prev1, s->id) || in(st->next1, s->id) ||
                (e && (e->leaving || e->role == XT_RING1_JOINING));
    const char *what = remove ? "remove" : "drain";
    if (!used)
        return 1; /* OUT or DRAINED: in no ring-1 version in use */
    if (mode == R2_RING1_FROZEN) {
        XT_WARN("site %u (mdsl %s): %s refused: ring 1 is frozen: it holds slices and not "
                "every MDS of ring 0 follows ring-1 changes (docs/mdsl-scale.md)",
                s->id, s->addr, what);
        return -EOPNOTSUPP;
    }
    if (remove) {
        XT_WARN("site %u (mdsl %s): remove refused: ring 1 is %s and it is %s; drain it and "
                "wait for DRAINED",
                s->id, s->addr, xt_ring1_phase_name(st->r1.phase),
                e && e->leaving ? "leaving" : xt_ring1_role_name(role_of(st, s->id)));
        return -EBUSY;
    }
    if (e && e->role == XT_RING1_JOINING)
        return cancel_join(m, s);
    if (cur && xt_ring_nsites(st->ring[XT_RING_MDSL]) == 1)
        return -EBUSY; /* its slices would have nowhere to go */
    if (cur && s->id == home_mdsl(st->ring[XT_RING_MDSL])) {
        /* Its slices could move, but not the decision records: once it was
         * removed no MDS could commit or recover ("Decision records" of
         * docs/mdsl-scale.md, not built). */
        XT_WARN("site %u (mdsl %s): drain refused: it holds the MDS decision records (the "
                "lowest MDSL id of ring 1), which do not move yet (docs/mdsl-scale.md "
                "\"Decision records\")", s->id, s->addr);
        return -EBUSY;
    }
    XT_INFO("site %u (mdsl %s): drain %s", s->id, s->addr,
            st->r1.phase == XT_RING1_STABLE ? "starts with the next tick"
                                            : "queued behind the running ring-1 change");
    return 1;
}
