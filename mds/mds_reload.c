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
 * The thread is an xt_worker: a step runs a pass when one is due (the
 * period, a backoff after a failure, or a ring-0 change seen by a poll),
 * and the pass polls xt_worker_stopping between slices.
 */
#include "mds_reload.h"

#include "mds_table.h"

#include "xt_common.h"

#include "xt_time.h"
#include "xt_worker.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#define RELOAD_PAGE 512

/* A ring-0 change is looked for this often between passes. */
#define RELOAD_POLL_MS 500u

struct mds_reload {
    struct mds_reload_opts o;
    xt_worker *worker;
    /* The thread's own (xt_worker invariant 1: one step at a time): */
    uint64_t due;       /* deadline of the next pass; 0: at once */
    uint64_t ring0_at;  /* ring-0 version when the last pass started */
    unsigned backoff;   /* the wait after the next failed pass */
};

static uint64_t ring0_now(mds_reload *r)
{
    return r->o.ring0_version ? r->o.ring0_version(r->o.route_arg) : 0;
}

/* One listed slice: 1 loaded, 0 nothing to do, -EAGAIN not loadable yet
 * (a handover or split in flight), or another negative errno. */
static int consider(mds_reload *r, const struct xt_store_slice *info)
{
    const xt_slice_id *s = &info->id;
    if (!info->sys || info->moved || s->fsid == 0 || s->slice == MDS_META_SLICE ||
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
static int pass(mds_reload *r, xt_worker *w)
{
    int err = 0;
    bool again = false;
    uint32_t *sites;
    size_t nsites;
    if ((err = mds_group_participants(r->o.group, &sites, &nsites)) < 0)
        return err;
    for (size_t i = 0; i < nsites && !xt_worker_stopping(w); i++) {
        uint8_t cursor[XT_STORE_CURSOR_MAX];
        uint32_t clen = 0;
        bool end = false;
        while (!end && !xt_worker_stopping(w)) {
            struct xt_store_list pg;
            int rc = mds_store_list_slices(r->o.store, sites[i], cursor, clen, RELOAD_PAGE,
                                           &pg);
            if (rc < 0) {
                XT_WARN("reload: listing MDSL %u: %s", sites[i], strerror(-rc));
                err = err ? err : rc;
                break;
            }
            for (size_t j = 0; j < pg.n && !xt_worker_stopping(w); j++) {
                rc = consider(r, &pg.slices[j]);
                if (rc > 0) {
                    XT_DBG("reload: slice %u of table %llu (fs %u) holds system rows: loaded",
                           pg.slices[j].id.slice, (unsigned long long)pg.slices[j].id.table,
                           pg.slices[j].id.fsid);
                    mds_stats_add(r->o.stats, MDS_CTR_SYS_RELOADS, 1);
                } else if (rc == -EAGAIN) {
                    again = true;
                } else if (rc < 0) {
                    XT_WARN("reload: slice %u of table %llu (fs %u): %s",
                            pg.slices[j].id.slice, (unsigned long long)pg.slices[j].id.table,
                            pg.slices[j].id.fsid, strerror(-rc));
                    err = err ? err : rc;
                }
            }
            memcpy(cursor, pg.cursor, pg.cursor_len);
            clen = pg.cursor_len;
            end = pg.end || pg.n == 0;
            xt_store_list_free(&pg);
        }
    }
    xt_free(sites);
    return err ? err : again ? -EAGAIN : 0;
}

/* One step: a pass when due, then the wait until the next poll. */
static uint64_t reload_step(xt_worker *w, void *arg)
{
    mds_reload *r = arg;
    uint64_t ring0 = ring0_now(r);
    if (r->due && !xt_deadline_passed(r->due) && ring0 == r->ring0_at)
        return XT_MIN(xt_deadline_left_ms(r->due), (uint64_t)RELOAD_POLL_MS);
    r->ring0_at = ring0;
    int rc = pass(r, w);
    mds_stats_add(r->o.stats, rc < 0 && rc != -EAGAIN ? MDS_CTR_RELOAD_ERRORS
                                                      : MDS_CTR_RELOAD_PASSES, 1);
    /* Next: at a ring-0 change, or after the period; after a failed pass
     * sooner, but twice as late each time in a row (an MDSL that stays
     * down, a slice that never loads: invariant 1). */
    unsigned wait = r->o.period_ms;
    if (rc < 0) {
        wait = XT_MIN(r->backoff, r->o.period_ms);
        r->backoff = r->backoff < r->o.period_ms / 2 ? r->backoff * 2 : r->o.period_ms;
    } else {
        r->backoff = r->o.retry_ms;
    }
    assert(wait > 0);
    r->due = xt_deadline_ms(wait);
    return XT_MIN((uint64_t)wait, (uint64_t)RELOAD_POLL_MS);
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
    r->backoff = r->o.retry_ms;
    struct xt_worker_opts wo = { .name = "mds-reload", .step = reload_step, .arg = r };
    int rc = xt_worker_start(&wo, &r->worker);
    if (rc < 0) {
        xt_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void mds_reload_stop(mds_reload *r)
{
    if (!r)
        return;
    xt_worker_stop(r->worker);
    xt_free(r);
}
