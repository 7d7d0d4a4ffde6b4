/*
 * mds_mover.c -- the background mover of a ring-1 change (mds_mover.h).
 *
 * One thread. A pass lists every losing MDSL page by page; each slice this
 * MDS owns by ring 0 (a meta slice goes with slice 0, as in mds_route.c)
 * that is live at the listed MDSL and placed elsewhere now is pinned through
 * the cache and handed to mds_group_move. Moves are batched (at most
 * MOVER_BATCH slices or MOVER_BATCH_BYTES of images, docs/mdsl-scale.md "Throttling":
 * the per-group cap) and one group sync commits the batch; then the slices the mover
 * loaded are dropped again (invariant 2).
 *
 * Why listings and not bitmaps: docs/mdsl-scale.md "The mover" (the index
 * lists exactly what is stored, meta slices included).
 *
 * Invariants (besides the header's):
 *  (a) m->mu protects the request (req, walk_v, losing), the last walk and
 *      the counters; it is never held across a store call, a cache load or
 *      a sync. The thread is an xt_worker: one step is one pass, or the
 *      wait when there is nothing to walk; mds_mover_walk wakes it.
 *  (b) A pass belongs to the request it started under (req); a new request
 *      or stop abandons it at the next slice, and its result is dropped.
 */
#include "mds_mover.h"

#include "mds_table.h"

#include "xt_common.h"
#include "xt_slice.h"

#include "xt_time.h"
#include "xt_worker.h"

#include <assert.h>
#include <string.h>

#define MOVER_MAX_LOSING 64
#define MOVER_PAGE 512
#define MOVER_BATCH 256
#define MOVER_BATCH_BYTES ((size_t)4 << 20)
#define MOVER_SYNC_MS 60000u

struct held {
    mds_cent *e;
    bool cached_before;
};

struct mds_mover {
    struct mds_mover_opts o;
    xt_worker *worker;
    pthread_mutex_t mu;
    uint64_t req;                      /* (mu) bumped by every mds_mover_walk */
    uint64_t walk_v;                   /* 0: no walk asked */
    uint32_t losing[MOVER_MAX_LOSING];
    size_t nlosing;
    bool has_walked;                   /* for req */
    uint64_t walked_v, walked_w;
    struct mds_mover_info info;
    /* Thread-only state of the running pass. */
    xt_worker *self;                   /* the worker, as its step sees it */
    struct held batch[MOVER_BATCH];
    size_t nbatch;
    size_t batch_bytes;
    uint64_t batch_gen;
    uint64_t rate_t0, rate_sent;       /* throttle: since the pass started */
};

static uint64_t ring0_now(mds_mover *m)
{
    return m->o.ring0_version ? m->o.ring0_version(m->o.route_arg) : 0;
}

static bool owns(mds_mover *m, const xt_slice_id *s)
{
    uint32_t owner = s->slice == MDS_META_SLICE ? 0 : s->slice;
    return !m->o.owns || m->o.owns(m->o.route_arg, s->fsid, s->table, owner);
}

/* Whether the pass started under request `req` must stop. */
static bool abandoned(mds_mover *m, uint64_t req)
{
    if (xt_worker_stopping(m->self))
        return true;
    pthread_mutex_lock(&m->mu);
    bool a = m->req != req;
    pthread_mutex_unlock(&m->mu);
    return a;
}

static void count(mds_mover *m, uint64_t *field, uint64_t by)
{
    pthread_mutex_lock(&m->mu);
    *field += by;
    pthread_mutex_unlock(&m->mu);
}

/* When the bytes sent since the pass started fit the rate. */
static uint64_t rate_due(const mds_mover *m)
{
    return m->rate_t0 + (uint64_t)((double)m->rate_sent * 1e9 / (double)m->o.rate);
}

/* Sleeps until the bytes sent since the pass started fit the rate
 * (invariant 3), in steps short enough to notice a stop. */
static void throttle(mds_mover *m, uint64_t req)
{
    for (;;) {
        uint64_t due = rate_due(m);
        uint64_t now = xt_mono_ns();
        if (now >= due || abandoned(m, req))
            return;
        xt_sleep_ms(XT_MIN(xt_deadline_left_ms(due), (uint64_t)100));
    }
}

/* Commits the batch (one sync) and lets its slices go. Returns whether
 * every slice of it reached its current placement. */
static bool flush(mds_mover *m)
{
    if (m->nbatch == 0)
        return true;
    int rc = mds_group_sync(m->o.group, m->batch_gen, MOVER_SYNC_MS);
    bool all = rc == 0;
    uint64_t moved = 0, bytes = 0, loads = 0;
    for (size_t i = 0; i < m->nbatch; i++) {
        mds_cent *e = m->batch[i].e;
        const struct mds_key k = *mds_cent_key(e);
        xt_slice *s = mds_cent_slice(e);
        xt_slice_rdlock(s); /* cm fields change under the write lock only */
        const struct mds_cent_commit *cm = mds_cent_commit(e);
        bool there = cm->site == mds_place_current(m->o.place, k.fsid, k.table, k.slice);
        size_t ib = cm->image_bytes;
        xt_slice_unlock(s);
        if (there) {
            moved++;
            bytes += ib;
            loads += !m->batch[i].cached_before;
        } else {
            all = false;
        }
        mds_cache_put(m->o.cache, e);
        if (!m->batch[i].cached_before)
            (void)mds_cache_drop(m->o.cache, &k); /* -EBUSY: someone uses it now */
    }
    if (rc)
        XT_WARN("mover: a sync of %zu moves failed: %s (the pass repeats)", m->nbatch,
                strerror(-rc));
    pthread_mutex_lock(&m->mu);
    m->info.moves += moved;
    m->info.move_bytes += bytes;
    m->info.move_loads += loads;
    m->info.errors += rc != 0;
    pthread_mutex_unlock(&m->mu);
    if (m->o.stats)
        mds_stats_add(m->o.stats, MDS_CTR_MOVE_LOADS, loads);
    m->nbatch = 0;
    m->batch_bytes = 0;
    m->batch_gen = 0;
    return all;
}

/* One listed slice of site `at`. Returns 1 when it is (or may be) this
 * MDS's to move, 0 when not, a negative errno on a failure. */
static int consider(mds_mover *m, uint32_t at, const struct xt_store_slice *info, uint64_t req)
{
    const xt_slice_id *s = &info->id;
    if (s->fsid == 0 || info->moved || !owns(m, s) ||
        mds_place_current(m->o.place, s->fsid, s->table, s->slice) == at)
        return 0;
    const struct mds_key k = { .fsid = s->fsid, .slice = s->slice, .table = s->table };
    mds_cent *e = NULL;
    bool cached = mds_cache_peek(m->o.cache, &k, &e) == 0;
    if (!cached) {
        int rc = mds_cache_get(m->o.cache, &k, &e);
        if (rc == -ENOENT || rc == -EAGAIN)
            return 1; /* moved or in flight meanwhile: the next pass tells */
        if (rc)
            return rc;
    }
    xt_slice *sl = mds_cent_slice(e);
    xt_slice_rdlock(sl);
    size_t est = mds_cent_commit(e)->image_bytes;
    xt_slice_unlock(sl);
    uint64_t gen = 0;
    int rc = mds_group_move(m->o.group, e, &gen);
    if (rc || gen == 0) {
        /* Already at its place (a foreground commit moved it), or no memory. */
        mds_cache_put(m->o.cache, e);
        if (!cached)
            (void)mds_cache_drop(m->o.cache, &k);
        return rc ? rc : 1;
    }
    assert(m->nbatch < MOVER_BATCH); /* flushed when full, before this */
    m->batch[m->nbatch++] = (struct held){ e, cached };
    m->batch_bytes += est;
    if (gen > m->batch_gen)
        m->batch_gen = gen;
    m->rate_sent += est;
    /* A full batch commits; over the rate budget, what is marked commits
     * before the wait (invariant 3), so a slow rate never holds moves. */
    if (m->nbatch == MOVER_BATCH || m->batch_bytes >= MOVER_BATCH_BYTES ||
        xt_mono_ns() < rate_due(m)) {
        flush(m);
        throttle(m, req);
    }
    return 1;
}

/* One pass over every losing MDSL. Returns the number of slices found to
 * move (0: a walk), or a negative errno (the pass did not finish). */
static long pass(mds_mover *m, uint64_t req, const uint32_t *losing, size_t n)
{
    long found = 0;
    int err = 0;
    m->rate_t0 = xt_mono_ns();
    m->rate_sent = 0;
    for (size_t i = 0; i < n && !err; i++) {
        struct xt_store_list pg;
        uint8_t cursor[XT_STORE_CURSOR_MAX];
        uint32_t clen = 0;
        bool end = false;
        while (!end && !err) {
            if (abandoned(m, req)) {
                err = -ECANCELED;
                break;
            }
            int rc = mds_store_list_slices(m->o.store, losing[i], cursor, clen, MOVER_PAGE, &pg);
            if (rc) {
                XT_WARN("mover: listing MDSL %u: %s", losing[i], strerror(-rc));
                err = rc;
                break;
            }
            for (size_t j = 0; j < pg.n && !err; j++) {
                if (abandoned(m, req)) {
                    err = -ECANCELED;
                    break;
                }
                rc = consider(m, losing[i], &pg.slices[j], req);
                if (rc < 0) {
                    XT_WARN("mover: slice %u/%llu/%u at MDSL %u: %s", pg.slices[j].id.fsid,
                            (unsigned long long)pg.slices[j].id.table, pg.slices[j].id.slice, losing[i],
                            strerror(-rc));
                    count(m, &m->info.errors, 1);
                    found++; /* not moved: the pass must not count as a walk */
                } else {
                    found += rc;
                }
            }
            memcpy(cursor, pg.cursor, pg.cursor_len);
            clen = pg.cursor_len;
            end = pg.end || pg.n == 0;
            xt_store_list_free(&pg);
        }
    }
    if (!flush(m) && !err)
        found += found == 0;
    if (err) {
        if (err != -ECANCELED)
            count(m, &m->info.errors, 1);
        return err;
    }
    return found;
}

/* One step: a pass when a walk is asked and not done, else the wait for
 * a request (or a ring-0 change, polled every poll_ms). */
static uint64_t mover_step(xt_worker *w, void *arg)
{
    mds_mover *m = arg;
    m->self = w;
    pthread_mutex_lock(&m->mu);
    bool idle = m->walk_v == 0 ||
                (m->has_walked && m->walked_v == m->walk_v && m->walked_w == ring0_now(m));
    if (idle) {
        pthread_mutex_unlock(&m->mu);
        return m->o.poll_ms;
    }
    uint64_t req = m->req, v = m->walk_v;
    uint32_t losing[MOVER_MAX_LOSING];
    size_t n = m->nlosing;
    assert(n <= MOVER_MAX_LOSING);
    memcpy(losing, m->losing, n * sizeof *losing);
    pthread_mutex_unlock(&m->mu);

    uint64_t w0 = ring0_now(m);
    long found = pass(m, req, losing, n);
    assert(m->nbatch == 0); /* a pass flushes what it holds */
    bool same_ring0 = ring0_now(m) == w0;
    if (found >= 0 && m->o.stats)
        mds_stats_add(m->o.stats, MDS_CTR_WALK_PASSES, 1);

    pthread_mutex_lock(&m->mu);
    if (found >= 0)
        m->info.passes++;
    if (found == 0 && same_ring0 && m->req == req) {
        m->has_walked = true; /* invariant 1 */
        m->walked_v = v;
        m->walked_w = w0;
    }
    bool again = found != 0 && found != -ECANCELED && m->req == req;
    pthread_mutex_unlock(&m->mu);
    /* Something moved or failed: pass again, after a breath (an MDSL down
     * or a slice in flight must not make this spin); a new request wakes
     * the worker sooner. */
    return again ? (found < 0 ? 500 : 100) : 0;
}

int mds_mover_start(const struct mds_mover_opts *o, mds_mover **out)
{
    *out = NULL;
    if (!o->store || !o->cache || !o->group || !o->place)
        return -EINVAL;
    mds_mover *m = xt_calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->o = *o;
    if (!m->o.rate)
        m->o.rate = MDS_MOVE_RATE_DEFAULT;
    if (!m->o.poll_ms)
        m->o.poll_ms = 500;
    pthread_mutex_init(&m->mu, NULL);
    struct xt_worker_opts wo = { .name = "mds-mover", .step = mover_step, .arg = m };
    int rc = xt_worker_start(&wo, &m->worker);
    if (rc < 0) {
        pthread_mutex_destroy(&m->mu);
        xt_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void mds_mover_stop(mds_mover *m)
{
    if (!m)
        return;
    xt_worker_stop(m->worker);
    pthread_mutex_destroy(&m->mu);
    xt_free(m);
}

int mds_mover_walk(mds_mover *m, uint64_t v, const uint32_t *losing, size_t n)
{
    if (n > MOVER_MAX_LOSING)
        return -EINVAL;
    pthread_mutex_lock(&m->mu);
    bool same = v && n && m->walk_v == v && m->nlosing == n &&
                !memcmp(m->losing, losing, n * sizeof *losing);
    if (!same) {
        m->req++;
        m->walk_v = n ? v : 0;
        m->nlosing = v ? n : 0;
        if (m->nlosing)
            memcpy(m->losing, losing, n * sizeof *losing);
        m->has_walked = false;
    }
    pthread_mutex_unlock(&m->mu);
    if (!same)
        xt_worker_wake(m->worker);
    return 0;
}

bool mds_mover_walked(mds_mover *m, uint64_t *v, uint64_t *w)
{
    pthread_mutex_lock(&m->mu);
    bool ok = m->has_walked;
    *v = m->walked_v;
    *w = m->walked_w;
    pthread_mutex_unlock(&m->mu);
    return ok;
}

void mds_mover_info(mds_mover *m, struct mds_mover_info *out)
{
    pthread_mutex_lock(&m->mu);
    *out = m->info;
    pthread_mutex_unlock(&m->mu);
}
