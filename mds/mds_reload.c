/*
 * mds_reload.c -- the reload of slices holding system rows (mds_reload.h).
 *
 * One thread. A pass lists every MDSL page by page and loads, through the
 * cache, each flagged slice (`sys`, not a MOVED tombstone, not a meta
 * slice) that ring 0 gives this MDS and that is not cached. A slice listed
 * at two MDSL (a ring-1 move in flight) is loaded once: the second finds
 * it cached. Loading is all it does; the transaction thread finishes the
 * rows (its RMU round and resolver walk the cached slices).
 *
 * Invariant (besides the header's): r->mu protects `stop` only and is
 * never held across a listing or a load.
 */
#include "mds_reload.h"

#include "mds_table.h"

#include "xt_common.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#define RELOAD_PAGE 512

struct mds_reload {
    struct mds_reload_opts o;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop; /* protected by mu */
};

static bool stopping(mds_reload *r)
{
    pthread_mutex_lock(&r->mu);
    bool s = r->stop;
    pthread_mutex_unlock(&r->mu);
    return s;
}

static uint64_t ring0_now(mds_reload *r)
{
    return r->o.ring0_version ? r->o.ring0_version(r->o.route_arg) : 0;
}

/* One listed slice: 1 loaded, 0 nothing to do, -EAGAIN not loadable yet
 * (a handover or split in flight), or another negative errno. */
static int consider(mds_reload *r, const struct mds_slice_info *s)
{
    if (!s->sys || s->moved || s->fsid == 0 || s->slice == MDS_META_SLICE ||
        (r->o.owns && !r->o.owns(r->o.route_arg, s->fsid, s->table, s->slice)))
        return 0;
    const struct mds_key k = { .fsid = s->fsid, .slice = s->slice, .table = s->table };
    mds_cent *e;
    if (mds_cache_peek(r->o.cache, &k, &e) == 0) {
        mds_cache_put(r->o.cache, e);
        return 0;
    }
    uint64_t w = ring0_now(r);
    int rc = mds_cache_get(r->o.cache, &k, &e);
    if (rc == -ENOENT || rc == -ESTALE)
        return 0; /* removed or moved meanwhile: its new place lists it */
    if (rc < 0)
        return rc;
    mds_cache_put(r->o.cache, e); /* stays cached (invariant 2) */
    if (ring0_now(r) != w && r->o.owns &&
        !r->o.owns(r->o.route_arg, s->fsid, s->table, s->slice)) {
        /* Ring 0 gave it away during the load (which then skipped the
         * handover): not ours to keep. */
        (void)mds_cache_drop(r->o.cache, &k);
        return 0;
    }
    return 1;
}

/* One pass over every MDSL. 0, the first error (the pass went on with the
 * other sites), or -EAGAIN (a slice to try again soon). */
static int pass(mds_reload *r)
{
    int err = 0;
    bool again = false;
    uint32_t *sites;
    size_t nsites;
    if ((err = mds_group_participants(r->o.group, &sites, &nsites)) < 0)
        return err;
    for (size_t i = 0; i < nsites && !stopping(r); i++) {
        uint8_t cursor[MDS_LIST_CURSOR_MAX];
        uint32_t clen = 0;
        bool end = false;
        while (!end && !stopping(r)) {
            struct mds_slice_page pg;
            int rc = mds_store_list_slices(r->o.store, sites[i], cursor, clen, RELOAD_PAGE,
                                           &pg);
            if (rc < 0) {
                XT_WARN("reload: listing MDSL %u: %s", sites[i], strerror(-rc));
                err = err ? err : rc;
                break;
            }
            for (size_t j = 0; j < pg.n && !stopping(r); j++) {
                rc = consider(r, &pg.v[j]);
                if (rc > 0) {
                    XT_DBG("reload: slice %u of table %llu (fs %u) holds system rows: loaded",
                           pg.v[j].slice, (unsigned long long)pg.v[j].table, pg.v[j].fsid);
                    mds_stats_add(r->o.stats, MDS_CTR_SYS_RELOADS, 1);
                } else if (rc == -EAGAIN) {
                    again = true;
                } else if (rc < 0) {
                    XT_WARN("reload: slice %u of table %llu (fs %u): %s", pg.v[j].slice,
                            (unsigned long long)pg.v[j].table, pg.v[j].fsid, strerror(-rc));
                    err = err ? err : rc;
                }
            }
            memcpy(cursor, pg.cursor, pg.cursor_len);
            clen = pg.cursor_len;
            end = pg.end || pg.n == 0;
            mds_slice_page_free(&pg);
        }
    }
    xt_free(sites);
    return err ? err : again ? -EAGAIN : 0;
}

static void *run(void *arg)
{
    mds_reload *r = arg;
    const unsigned poll_ms = 500;
    unsigned backoff = r->o.retry_ms;
    for (;;) {
        uint64_t w = ring0_now(r);
        int rc = pass(r);
        mds_stats_add(r->o.stats, rc < 0 && rc != -EAGAIN ? MDS_CTR_RELOAD_ERRORS
                                                          : MDS_CTR_RELOAD_PASSES, 1);
        /* Next: at a ring-0 change, or after the period; after a failed
         * pass sooner, but twice as late each time in a row (an MDSL that
         * stays down, a slice that never loads: invariant 1). */
        unsigned wait = r->o.period_ms;
        if (rc < 0) {
            wait = XT_MIN(backoff, r->o.period_ms);
            backoff = backoff < r->o.period_ms / 2 ? backoff * 2 : r->o.period_ms;
        } else {
            backoff = r->o.retry_ms;
        }
        uint64_t due = xt_mono_ns() + (uint64_t)wait * 1000000u;
        pthread_mutex_lock(&r->mu);
        while (!r->stop && xt_mono_ns() < due && ring0_now(r) == w)
            xt_cond_timedwait_ms(&r->cv, &r->mu, poll_ms);
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            return NULL;
    }
}

int mds_reload_start(const struct mds_reload_opts *o, mds_reload **out)
{
    *out = NULL;
    if (!o->store || !o->cache || !o->group)
        return -EINVAL;
    mds_reload *r = xt_calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->o = *o;
    if (!r->o.period_ms)
        r->o.period_ms = 300000;
    if (!r->o.retry_ms)
        r->o.retry_ms = 2000;
    pthread_mutex_init(&r->mu, NULL);
    xt_cond_init_mono(&r->cv); /* xt_cond_timedwait_ms waits on the monotonic clock */
    int rc = pthread_create(&r->th, NULL, run, r);
    if (rc) {
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mu);
        xt_free(r);
        return -rc;
    }
    *out = r;
    return 0;
}

void mds_reload_stop(mds_reload *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->th, NULL);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    xt_free(r);
}
