/*
 * mdsl_gc.c -- lazy garbage collection of segments (DirectLoad/Atlas
 * style): a closed segment whose live bytes fall under gc_threshold of its
 * size has its live records copied to the active segments, and is deleted.
 *
 * One pass over a candidate segment:
 *   1. pick (under mu): not active, not holding records of a pending
 *      transaction, and for TSS before the folder's resume position;
 *   2. list the index pointers whose record is in it (or, for TSS, whose
 *      evidence is in it) -- no lock;
 *   3. in chunks of <= GC_CHUNK bytes: read and verify the records (no
 *      lock, throttled to gc_bytes_per_sec), then take the writer token,
 *      drop the pointers that changed meanwhile, append the copies and one
 *      GCMOVE record, fsync, apply the index batch (synced), give the token
 *      back. A commit therefore waits at most one chunk for GC;
 *   4. once nothing live remains, forget the segment and unlink it.
 *
 * Invariants:
 *  (1) A segment is unlinked only after the index batch that moved its last
 *      live pointer was synced (LevelDB sync write), so no durable pointer
 *      names a deleted segment.
 *  (2) Collecting a TSS segment always writes a GCMOVE (possibly empty),
 *      whose low-water mark lets a rebuild forget PREPAREs whose decision
 *      lived in the deleted segment (mdsl_recover.c invariant 3).
 *  (3) No lock is held while reading, sleeping or unlinking.
 *  (4) A segment leaves its array only under the writer token, after
 *      re-checking (live 0, not pinned by a pending transaction, before the
 *      resume position) what step 1 checked without it.
 */
#include "mdsl_handle_i.h"
#include "mdsl_apply_i.h"
#include "mdsl_gc_i.h"
#include "mdsl_space_i.h"

#include "xt_time.h"

#include <assert.h>

#include <stdio.h>
#include <string.h>

#define GC_CHUNK (1u << 20)
#define GC_MAX_ITEMS 16384 /* bounds one GCMOVE record */

struct cand {
    struct folder *fo;
    bool is_cs;
    uint32_t group;
    struct seg *sg;
};

struct item {
    struct mdsl_ikey k;
    struct mdsl_ptr p;
    bool has_data;          /* the record itself is in the candidate */
};

struct items {
    struct cand *c;
    struct item *v;
    size_t n, cap;
};

static bool pinned(mdsl_store *s, struct folder *fo, bool is_cs, uint32_t group, uint32_t no)
{
    for (struct ptx *t = s->pending; t; t = t->next)
        for (size_t i = 0; i < t->nparts; i++) {
            struct ptx_part *p = &t->parts[i];
            if (p->fo != fo)
                continue;
            if (!is_cs && p->man_segno == no)
                return true;
            for (size_t j = 0; j < p->n; j++)
                if ((p->e[j].type == XT_STORE_COLUMN) == is_cs && p->e[j].segno == no &&
                    (!is_cs || p->e[j].group == group))
                    return true;
        }
    return false;
}

static void consider(mdsl_store *s, struct folder *fo, struct segarr *a, bool is_cs,
                     uint32_t group, uint32_t below, double threshold, uint64_t room,
                     struct cand *best, double *best_ratio)
{
    for (size_t i = 0; i + 1 < a->n; i++) { /* never the active (last) one */
        struct seg *sg = a->v[i];
        if (sg->no >= below)
            continue;
        double ratio = sg->size ? (double)sg->live / (double)sg->size : 0.0;
        if (ratio >= threshold || ratio >= *best_ratio ||
            (sg->live > 0 && (uint64_t)sg->live > room) ||
            pinned(s, fo, is_cs, group, sg->no))
            continue;
        *best = (struct cand){ fo, is_cs, group, sg };
        *best_ratio = ratio;
    }
}

/* REQUIRES: mu held. Pins the chosen segment, one whose live bytes (the
 * copies to write) fit in `room`. */
static bool pick(mdsl_store *s, double threshold, uint64_t room, struct cand *c)
{
    assert(xt_mutex_held(&s->mu));
    assert(threshold > 0 && threshold <= 1);
    double best = 2.0;
    c->sg = NULL;
    for (size_t i = 0; i < s->ht_cap; i++)
        for (struct folder *fo = s->ht[i]; fo; fo = fo->hnext) {
            uint32_t rseg;
            uint64_t roff;
            mdsl_st_resume_pos(s, fo, &rseg, &roff);
            consider(s, fo, &fo->tss, false, 0, rseg, threshold, room, c, &best);
            for (size_t g = 0; g < fo->ncs; g++)
                consider(s, fo, &fo->cs[g].segs, true, fo->cs[g].group, UINT32_MAX, threshold,
                         room, c, &best);
        }
    if (c->sg)
        c->sg->refs++;
    return c->sg != NULL;
}

static int collect(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    struct items *it = arg;
    struct cand *c = it->c;
    bool cs = k->kind == MDSL_IK_COLUMN;
    bool data = cs == c->is_cs && (!cs || k->group == c->group) && p->segno == c->sg->no;
    bool evid = !c->is_cs && p->evidence == c->sg->no;
    if (!data && !evid)
        return 0;
    if (it->n == it->cap) {
        size_t nc = it->cap ? it->cap * 2 : 64;
        struct item *nv = xt_realloc(it->v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        it->v = nv;
        it->cap = nc;
    }
    it->v[it->n++] = (struct item){ *k, *p, data };
    return 0;
}

static bool ptr_same(const struct mdsl_ptr *a, const struct mdsl_ptr *b)
{
    return a->segno == b->segno && a->off == b->off && a->csum == b->csum &&
           a->version == b->version && a->evidence == b->evidence && a->len == b->len &&
           a->type == b->type && a->flags == b->flags;
}

/* Sleep so that `bytes` since `t0` respect the budget; false if stopping. */
static bool throttle(mdsl_store *s, uint64_t t0, uint64_t bytes)
{
    if (!s->o.gc_bytes_per_sec)
        return true;
    uint64_t due = t0 + bytes * UINT64_C(1000000000) / s->o.gc_bytes_per_sec;
    pthread_mutex_lock(&s->mu);
    while (!s->gc_stop && xt_cond_wait_until(&s->gc_cv, &s->mu, due) == 0)
        ; /* woken: stop, or spurious */
    bool go = !s->gc_stop;
    pthread_mutex_unlock(&s->mu);
    return go;
}

/* Steps 3's write half for items [a, b): token held by the caller. */
static int move_chunk(mdsl_store *s, struct cand *c, struct item *v, uint8_t **recs, size_t n,
                      uint64_t *moved)
{
    struct folder *fo = c->fo;
    struct mdsl_entry *e = xt_malloc((n ? n : 1) * sizeof *e);
    struct wbatch wb = { 0 };
    struct apply_ctx ac = { .s = s, .fo = fo, .b = mdsl_index_batch_new() };
    int rc = e && ac.b ? 0 : -ENOMEM;
    size_t ne = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct mdsl_ptr now;
        int g = mdsl_index_get(s->idx, &v[i].k, &now);
        if (g == -ENOENT || (g == 0 && !ptr_same(&now, &v[i].p)))
            continue; /* superseded meanwhile: nothing to keep */
        if (g < 0) {
            rc = g;
            break;
        }
        bool cs = v[i].k.kind == MDSL_IK_COLUMN;
        struct mdsl_entry x = { .type = v[i].p.type, .flags = v[i].p.flags,
                                .group = cs ? v[i].k.group : 0, .segno = v[i].p.segno,
                                .len = v[i].p.len, .off = v[i].p.off, .csum = v[i].p.csum,
                                .version = v[i].p.version, .slice = v[i].k.id.slice,
                                .key = cs ? v[i].k.key : 0 };
        if (v[i].has_data) {
            rc = mdsl_st_stage_raw(s, &wb, fo, cs, x.group, recs[i], x.len, &x.segno, &x.off);
            *moved += x.len;
        }
        e[ne++] = x;
    }
    uint32_t gseg = 0;
    if (rc == 0 && (ne || !c->is_cs)) {
        uint8_t *pl = mdsl_entries_encode(e, ne);
        uint32_t lw_seg;
        uint64_t lw_off, off;
        pthread_mutex_lock(&s->mu);
        mdsl_st_resume_pos(s, fo, &lw_seg, &lw_off);
        pthread_mutex_unlock(&s->mu);
        struct mdsl_rec_hdr h = { .type = MDSL_REC_GCMOVE, .fsid = fo->fsid, .table = fo->table,
                                  .version = lw_seg, .key = lw_off,
                                  .payload_len = (uint32_t)(ne * MDSL_ENTRY_SIZE) };
        rc = pl ? mdsl_st_stage(s, &wb, fo, false, 0, &h, pl, &gseg, &off) : -ENOMEM;
        xt_free(pl);
    }
    if (rc == 0)
        rc = mdsl_st_flush(s, &wb);
    if (rc == 0 && gseg) {
        rc = mdsl_apply_entries(&ac, e, ne, gseg);
        if (rc == 0) {
            uint32_t sn;
            uint64_t off;
            pthread_mutex_lock(&s->mu);
            mdsl_st_resume_pos(s, fo, &sn, &off);
            pthread_mutex_unlock(&s->mu);
            mdsl_index_batch_resume(ac.b, fo->fsid, fo->table, sn, off);
            rc = mdsl_index_write(s->idx, ac.b, true); /* invariant 1 */
            if (rc == 0)
                mdsl_apply_done(&ac);
        }
        if (rc < 0)
            mdsl_st_fail(s, rc, "applying a GC move");
        else {
            pthread_mutex_lock(&s->mu);
            mdsl_apply_live(&ac);
            pthread_mutex_unlock(&s->mu);
        }
    }
    mdsl_st_wbatch_free(&wb);
    mdsl_apply_ctx_free(&ac);
    xt_free(e);
    return rc;
}

static int collect_segment(mdsl_store *s, struct cand *c, uint64_t t0, uint64_t *budget_bytes)
{
    struct items it = { .c = c };
    int rc = mdsl_index_scan_table(s->idx, c->fo->fsid, c->fo->table, collect, &it);
    size_t i = 0;
    uint64_t moved = 0;
    do {
        /* a chunk: up to GC_CHUNK bytes of records to copy */
        size_t j = i;
        uint64_t bytes = 0;
        while (j < it.n && bytes < GC_CHUNK && j - i < GC_MAX_ITEMS) {
            if (it.v[j].has_data)
                bytes += it.v[j].p.len;
            j++;
        }
        uint8_t **recs = rc == 0 ? xt_calloc(j - i + 1, sizeof *recs) : NULL;
        if (rc == 0 && !recs)
            rc = -ENOMEM;
        for (size_t k = i; k < j && rc == 0; k++) {
            if (!it.v[k].has_data)
                continue;
            struct mdsl_rec_hdr h;
            rc = mdsl_seg_read(s->io, c->sg->f, it.v[k].p.off, it.v[k].p.len, it.v[k].p.csum, &h,
                               &recs[k - i]);
            if (rc == -EBADMSG) {
                XT_ERR("mdsl gc: corrupt record in %s segment %u at %llu: segment kept",
                       c->fo->path, c->sg->no, (unsigned long long)it.v[k].p.off);
                pthread_mutex_lock(&s->mu);
                s->st.corrupt_records++;
                pthread_mutex_unlock(&s->mu);
            }
        }
        *budget_bytes += 2 * bytes; /* read once, written once */
        if (rc == 0 && !throttle(s, t0, *budget_bytes))
            rc = -ECANCELED;
        if (rc == 0) {
            mdsl_st_token_take(s);
            pthread_mutex_lock(&s->mu);
            rc = s->failed;
            pthread_mutex_unlock(&s->mu);
            if (rc == 0)
                rc = move_chunk(s, c, it.v + i, recs, j - i, &moved);
            mdsl_st_token_put(s);
        }
        for (size_t k = 0; recs && k < j - i; k++)
            xt_free(recs[k]);
        xt_free(recs);
        i = j;
    } while (rc == 0 && i < it.n);
    xt_free(it.v);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        s->st.gc_moved_bytes += moved;
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

/* Step 4: forget and unlink a segment with nothing live.
 *
 * The choice made by pick() is checked again here under the writer token
 * (invariant 4): pick() runs without the token, so it can see the segments
 * that a prepare in flight has just rolled past (registered by
 * mdsl_st_seg_add, still empty or short) before that prepare puts its
 * transaction on s->pending at the end of its token hold. Such a segment
 * holds only not-yet-indexed records of the transaction (live 0), and
 * deleting it lost them once the commit pointed the index at them. With the
 * token held no prepare is in flight, every finished one is pending (or
 * decided, and then its pointers are charged to live), and no later append
 * can reach a segment that is not the active one. */
static int drop_segment(mdsl_store *s, struct cand *c)
{
    char path[4096];
    mdsl_st_seg_path(c->fo, c->is_cs, c->group, c->sg->no, path, sizeof path);
    mdsl_st_token_take(s);
    pthread_mutex_lock(&s->mu);
    struct segarr *a = mdsl_st_segarr(c->fo, c->is_cs, c->group, false);
    uint32_t rseg = UINT32_MAX;
    uint64_t roff;
    if (!c->is_cs)
        mdsl_st_resume_pos(s, c->fo, &rseg, &roff);
    bool gone = c->sg->live <= 0 && a && c->sg->no < rseg &&
                !pinned(s, c->fo, c->is_cs, c->group, c->sg->no);
    if (gone) {
        size_t k = 0;
        for (size_t i = 0; i < a->n; i++)
            if (a->v[i] != c->sg)
                a->v[k++] = a->v[i];
        a->n = k;
        c->sg->dead = true;
    } else {
        XT_WARN("mdsl gc: %s still has %lld live bytes or pending records; kept", path,
                (long long)c->sg->live);
    }
    if (gone) {
        s->st.gc_freed_segments++;
        s->st.gc_freed_bytes += c->sg->size;
    }
    mdsl_st_seg_unpin(s, c->sg);
    pthread_mutex_unlock(&s->mu);
    mdsl_st_token_put(s);
    if (!gone)
        return 0;
    int rc = mdsl_io_unlink(s->io, path);
    if (rc < 0)
        XT_WARN("mdsl gc: unlink %s: %s", path, strerror(-rc));
    return 1;
}

int mdsl_gc_pass(mdsl_store *s, unsigned max_segments, double threshold)
{
    assert(s->bg_busy && !xt_mutex_held(&s->mu));
    int freed = 0;
    uint64_t t0 = xt_mono_ns(), budget = 0;
    for (unsigned n = 0; n < max_segments; n++) {
        struct cand c;
        uint64_t room = mdsl_space_gc_room(s);
        pthread_mutex_lock(&s->mu);
        bool ok = !s->failed && !s->gc_stop && pick(s, threshold, room, &c);
        if (ok)
            s->st.gc_passes++;
        pthread_mutex_unlock(&s->mu);
        if (!ok)
            break;
        int rc = collect_segment(s, &c, t0, &budget);
        if (rc < 0) {
            pthread_mutex_lock(&s->mu);
            mdsl_st_seg_unpin(s, c.sg);
            pthread_mutex_unlock(&s->mu);
            if (rc != -ECANCELED)
                XT_WARN("mdsl gc: pass stopped: %s", strerror(-rc));
            return freed ? freed : rc;
        }
        freed += drop_segment(s, &c);
    }
    return freed;
}

/* One background pass (the worker's step): GC, then the space tasks. Woken
 * early by mdsl_gc_wake (a sweep or drop asked, free space short). */
static uint64_t gc_step(xt_worker *w, void *arg)
{
    (void)w;
    mdsl_store *s = arg;
    mdsl_st_bg_take(s);
    bool pressed;
    double thr = mdsl_space_gc_threshold(s, &pressed);
    if (pressed) /* the emptied active segments too, at once */
        (void)mdsl_space_roll(s, thr);
    (void)mdsl_gc_pass(s, pressed ? 64 : 4, thr);
    mdsl_space_tick(s); /* drops, sweeps and idle rolls share the thread */
    mdsl_st_bg_put(s);
    return s->o.gc_interval_ms;
}

int mdsl_gc_start(mdsl_store *s)
{
    assert(!s->gc);
    struct xt_worker_opts wo = { .name = "mdsl-gc", .step = gc_step, .arg = s,
                                 .first_ms = s->o.gc_interval_ms };
    return xt_worker_start(&wo, &s->gc);
}

void mdsl_gc_wake(mdsl_store *s)
{
    if (s->gc)
        xt_worker_wake(s->gc);
}

void mdsl_gc_stop(mdsl_store *s)
{
    pthread_mutex_lock(&s->mu);
    s->gc_stop = true;
    pthread_cond_broadcast(&s->gc_cv); /* a throttled pass returns at once */
    pthread_mutex_unlock(&s->mu);
    xt_worker_stop(s->gc);
    s->gc = NULL;
}
