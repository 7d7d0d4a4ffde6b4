/*
 * mdsl_ring1.c -- the ring-1 reporter of pom-mdsl (mdsl_ring1.h): follows
 * the R2 agent's views and runs the misplaced-count passes on its thread.
 * Invariants in the header.
 */
#include "mdsl_ring1.h"

#include "xt_common.h"
#include "xt_ring.h"
#include "xt_time.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* What a pass counts against, as the latest view says. */
struct r1_state {
    uint64_t seq;       /* ring-1 seq; 0 from an R2 without ring-1 state */
    int phase;          /* enum xt_ring1_phase */
    xt_ring *ring;      /* current ring 1, decoded; NULL: none in the view */
    xt_ring *prev;      /* MOVING: the ring before it, decoded; else NULL */
    uint32_t *losing;   /* ids R2 marks losing (xt_malloc'd) */
    size_t nlosing;
    struct mdsl_tmove_fs *fs;       /* the mdsl-backend fs (xt_malloc'd) */
    size_t nfs;
    struct mdsl_tmove_site *sites;  /* the MDSL of `ring` (xt_malloc'd) */
    size_t nsites;
};

struct mdsl_ring1 {
    struct mdsl_ring1_opts o;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* CLOCK_MONOTONIC: a new state or stop */
    _Atomic bool stop;
    _Atomic bool changed;   /* a new state since the running pass started */
    /* under mu */
    uint32_t self;          /* site id, 0 until registered */
    bool fresh;             /* `next` holds a state the thread has not taken */
    bool poke;              /* the site id changed */
    bool known;             /* a view came: known_seq/known_ver are its target */
    uint64_t known_seq, known_ver;
    struct r1_state next;
    bool has_report;
    struct mdsl_ring1_report rep;
    /* space back (docs/mdsl-scale.md "Space back"), under mu */
    bool final_seen;        /* a view past MOVING came since start */
    bool lost;              /* seen losing in MOVING, no final view since */
    uint64_t drops_asked, sweeps_asked;
    uint64_t tmove_done_ver; /* pass thread only: ring version whose tract
                                pass ended with nothing owed */
    struct mdsl_tmove_counters tm;
};

static void state_free(struct r1_state *s)
{
    xt_ring_free(s->ring);
    xt_ring_free(s->prev);
    xt_free(s->losing);
    xt_free(s->fs);
    xt_free(s->sites);
    memset(s, 0, sizeof *s);
}

static bool is_losing(const struct r1_state *s, uint32_t self)
{
    for (size_t i = 0; i < s->nlosing; i++)
        if (s->losing[i] == self)
            return true;
    return false;
}

/* The state of view v into *out (overwritten). 0 or -ENOMEM; a ring-1 blob
 * that does not decode leaves ring NULL (the pass then reports nothing). */
static int state_of(const struct xt_view *v, struct r1_state *out)
{
    memset(out, 0, sizeof *out);
    int rc = xt_view_ring(v, XT_RING_MDSL, &out->ring);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0 && rc != -ENOENT)
        XT_WARN("ring 1 in the view (view v%llu) does not decode: %s",
                (unsigned long long)v->version, strerror(-rc));
    if (out->ring && mdsl_tmove_of_view(v, out->ring, &out->fs, &out->nfs, &out->sites,
                                        &out->nsites) < 0) {
        state_free(out);
        return -ENOMEM;
    }
    const struct xt_view_ring1 *r1 = v->ring1;
    if (!r1)
        return 0;
    out->seq = r1->seq;
    out->phase = r1->phase;
    if (r1->prev.data && (rc = xt_ring_decode(r1->prev.data, r1->prev.len, &out->prev)) < 0) {
        if (rc == -ENOMEM) {
            state_free(out);
            return rc;
        }
        XT_WARN("the previous ring 1 in the view (view v%llu) does not decode: %s",
                (unsigned long long)v->version, strerror(-rc));
    }
    if (r1->nsites && !(out->losing = xt_malloc(r1->nsites * sizeof *out->losing))) {
        state_free(out);
        return -ENOMEM;
    }
    for (size_t i = 0; i < r1->nsites; i++)
        if (r1->sites[i].losing)
            out->losing[out->nlosing++] = r1->sites[i].id;
    return 0;
}

static bool same_target(const struct r1_state *a, const struct r1_state *b)
{
    uint64_t va = a->ring ? xt_ring_version(a->ring) : 0;
    uint64_t vb = b->ring ? xt_ring_version(b->ring) : 0;
    return a->seq == b->seq && va == vb;
}

void mdsl_ring1_id(void *arg, uint32_t site_id)
{
    mdsl_ring1 *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->self != site_id) {
        r->self = site_id;
        r->has_report = false; /* counted for another id */
        r->poke = true;
        atomic_store(&r->changed, true);
        pthread_cond_signal(&r->cv);
    }
    pthread_mutex_unlock(&r->mu);
}

void mdsl_ring1_view(void *arg, const struct xt_view *v, int changed)
{
    mdsl_ring1 *r = arg;
    /* fs and sites too: the tract moves need the fs created and the MDSL
     * addresses known during a change (same target: no count dropped) */
    if (!(changed & (XT_VIEW_RINGS | XT_VIEW_FS | XT_VIEW_SITES)))
        return;
    struct r1_state s;
    if (state_of(v, &s) < 0) {
        XT_WARN("ring-1 reporter: no memory for the view; keeping the last one");
        return;
    }
    /* read before r->mu: the store's lock is never taken under it */
    bool owed = mdsl_store_sweep_owed(r->o.store) != 0;
    pthread_mutex_lock(&r->mu);
    /* Space back (mdsl_ring1.h): once no change is moving slices, the
     * tombstones here are final. A sweep still owed at the first such view
     * since start is one a restart interrupted. */
    bool final = s.phase == XT_RING1_DONE || s.phase == XT_RING1_STABLE;
    if (s.phase == XT_RING1_MOVING && r->self && is_losing(&s, r->self))
        r->lost = true;
    bool drop = final && (!r->final_seen || r->lost);
    bool sweep = final && (r->lost || (!r->final_seen && owed));
    if (final) {
        r->final_seen = true;
        r->lost = false;
        r->drops_asked += drop;
        r->sweeps_asked += sweep;
    }
    uint64_t ver = s.ring ? xt_ring_version(s.ring) : 0;
    if (!r->known || r->known_seq != s.seq || r->known_ver != ver) {
        r->known = true;
        r->known_seq = s.seq;
        r->known_ver = ver;
        /* invariant (1): the last count is not about this ring */
        r->has_report = false;
        atomic_store(&r->changed, true);
    }
    state_free(&r->next);
    r->next = s;
    r->fresh = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (drop || sweep) /* sets flags for the store's GC thread: no I/O here */
        mdsl_store_space_request(r->o.store, drop, sweep);
}

void mdsl_ring1_fill(void *arg, struct xt_r2_hb_ring1 *r1)
{
    mdsl_ring1 *r = arg;
    pthread_mutex_lock(&r->mu);
    if (r->has_report) {
        r1->has_counts = true;
        r1->misplaced = r->rep.misplaced;
        r1->prepared = r->rep.prepared;
        r1->counted_seq = r->rep.seq;
    }
    pthread_mutex_unlock(&r->mu);
}

void mdsl_ring1_tracts(mdsl_ring1 *r, uint64_t *moved, uint64_t *bytes, uint64_t *dropped,
                       uint64_t *owed)
{
    *moved = r ? atomic_load(&r->tm.tracts) : 0;
    *bytes = r ? atomic_load(&r->tm.bytes) : 0;
    *dropped = r ? atomic_load(&r->tm.dropped) : 0;
    *owed = r ? atomic_load(&r->tm.owed) : 0;
}

int mdsl_ring1_report(mdsl_ring1 *r, struct mdsl_ring1_report *out)
{
    pthread_mutex_lock(&r->mu);
    int rc = r->has_report ? 0 : -EAGAIN;
    *out = r->rep;
    out->drops_asked = r->drops_asked;
    out->sweeps_asked = r->sweeps_asked;
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* REQUIRES: r->mu. Waits until stop, a fresh state, a new id, or `due`
 * (mono ns). */
static void wait_until(mdsl_ring1 *r, uint64_t due)
{
    /* the cv runs on CLOCK_MONOTONIC (xt_cond_init_mono): due is a deadline */
    while (!atomic_load(&r->stop) && !r->fresh && !r->poke) {
        if (due == UINT64_MAX)
            pthread_cond_wait(&r->cv, &r->mu);
        else if (xt_cond_wait_until(&r->cv, &r->mu, due) < 0)
            return;
    }
}

/* One pass over `cur` for site self. 0 with *rep filled, -EAGAIN when there
 * is nothing to say yet (losing in PREPARE: the current ring is still the
 * old one, under which a 0 means nothing), -ECANCELED when the state changed
 * or the reporter stops meanwhile, or the count's error. */
static int one_pass(mdsl_ring1 *r, const struct r1_state *cur, uint32_t self,
                    struct mdsl_ring1_report *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->seq = cur->seq;
    rep->ring_version = cur->ring ? xt_ring_version(cur->ring) : 0;
    bool losing = self && is_losing(cur, self);
    if (losing && cur->phase == XT_RING1_PREPARE)
        return -EAGAIN;
    if (losing && cur->ring && cur->phase == XT_RING1_MOVING) {
        /* Before any count R2 could end the change on: its sweep is owed,
         * durably, so a restart past the end still sweeps. */
        int rc = mdsl_store_sweep_owe(r->o.store, cur->seq ? cur->seq : 1);
        if (rc < 0)
            return rc;
        rc = mdsl_store_count_misplaced(r->o.store, cur->ring, self, r->o.page, r->o.pause_ms,
                                        &r->changed, &rep->misplaced);
        if (rc < 0)
            return rc;
        if (r->o.blob) {
            /* The tracts follow too (mdsl_tmove.h): those still owed keep
             * the change from ending like slices not yet moved. */
            uint64_t ver = xt_ring_version(cur->ring), owed = 0;
            struct mdsl_tmove_target t = { .ring = cur->ring, .prev = cur->prev, .self = self,
                                           .sites = cur->sites, .nsites = cur->nsites,
                                           .fs = cur->fs, .nfs = cur->nfs,
                                           .skip_kept = r->tmove_done_ver == ver };
            rc = mdsl_tmove_pass(r->o.blob, &t, r->o.tract_move_rate, 10000, &r->changed,
                                 &r->tm, &owed);
            if (rc < 0)
                return rc;
            if (owed == 0)
                r->tmove_done_ver = ver;
            rep->tracts_owed = owed;
            rep->misplaced += owed;
        }
        rep->counted = true;
    }
    /* Not mdsl_store_stat: it walks every folder under the store lock
     * prepares take; this holds it for the pending list only. */
    uint64_t *txids = NULL;
    size_t n = 0;
    int rc = mdsl_store_prepared(r->o.store, &txids, &n);
    if (rc < 0)
        return rc;
    xt_free(txids);
    rep->prepared = n;
    return 0;
}

static void *pass_thread(void *arg)
{
    mdsl_ring1 *r = arg;
    struct r1_state cur = { 0 };
    uint64_t interval = (uint64_t)r->o.interval_ms * 1000000u;
    uint64_t last_start = 0, passes = 0;
    bool first = true;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        /* Nothing to count for until registered and a view came. */
        wait_until(r, first || !r->self ? UINT64_MAX : last_start + interval);
        if (atomic_load(&r->stop))
            break;
        if (r->poke) {
            r->poke = false;
            last_start = 0;
        }
        if (r->fresh) {
            bool keep = !first && same_target(&cur, &r->next) && r->has_report;
            state_free(&cur);
            cur = r->next;
            memset(&r->next, 0, sizeof r->next);
            r->fresh = false;
            first = false;
            /* a view that changes nothing counted waits for the interval */
            if (keep && xt_mono_ns() < last_start + interval)
                continue;
        }
        if (!r->self || first)
            continue;
        uint32_t self = r->self;
        atomic_store(&r->changed, false);
        pthread_mutex_unlock(&r->mu);

        last_start = xt_mono_ns();
        struct mdsl_ring1_report rep;
        int rc = one_pass(r, &cur, self, &rep);

        pthread_mutex_lock(&r->mu);
        if (rc == 0 && !atomic_load(&r->changed)) {
            rep.passes = ++passes;
            /* INFO at a change's first count and when it reaches 0; the
             * counts in between (one a second) at debug level */
            bool first_count = !r->has_report || !r->rep.counted || r->rep.seq != rep.seq;
            bool loud = rep.counted && (first_count || (rep.misplaced == 0 && r->rep.misplaced));
            r->rep = rep;
            r->has_report = true;
            if (rep.counted) {
                pthread_mutex_unlock(&r->mu); /* no log write under the lock */
                xt_log(loud ? XT_LOG_INFO : XT_LOG_DEBUG,
                       "ring 1 v%llu (seq %llu): %llu slices here belong elsewhere, "
                       "%llu tracts owed, %llu prepared",
                       (unsigned long long)rep.ring_version, (unsigned long long)rep.seq,
                       (unsigned long long)(rep.misplaced - rep.tracts_owed),
                       (unsigned long long)rep.tracts_owed, (unsigned long long)rep.prepared);
                pthread_mutex_lock(&r->mu);
            }
        } else if (rc == -EAGAIN) {
            r->has_report = false;
        } else if (rc == -ECANCELED || (rc == 0 && atomic_load(&r->changed))) {
            last_start = 0; /* the state moved on: count again at once */
        } else {
            /* no count rather than an old one: R2 waits for the next pass */
            r->has_report = false;
            pthread_mutex_unlock(&r->mu);
            XT_WARN("ring-1 pass failed: %s; next in %u ms", strerror(-rc), r->o.interval_ms);
            pthread_mutex_lock(&r->mu);
        }
    }
    pthread_mutex_unlock(&r->mu);
    state_free(&cur);
    return NULL;
}

int mdsl_ring1_start(const struct mdsl_ring1_opts *o, mdsl_ring1 **out)
{
    *out = NULL;
    if (!o->store || o->page > MDSL_LIST_MAX)
        return -EINVAL;
    mdsl_ring1 *r = xt_calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->o = *o;
    if (!r->o.interval_ms)
        r->o.interval_ms = 1000;
    if (!r->o.page)
        r->o.page = 1024;
    pthread_mutex_init(&r->mu, NULL);
    int rc = xt_cond_init_mono(&r->cv);
    if (rc < 0) {
        pthread_mutex_destroy(&r->mu);
        xt_free(r);
        return rc;
    }
    rc = pthread_create(&r->th, NULL, pass_thread, r);
    if (rc) {
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        xt_free(r);
        return -rc;
    }
    *out = r;
    return 0;
}

void mdsl_ring1_stop(mdsl_ring1 *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    atomic_store(&r->stop, true);
    atomic_store(&r->changed, true); /* ends a running pass at its next page */
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->th, NULL);
    state_free(&r->next);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    xt_free(r);
}
