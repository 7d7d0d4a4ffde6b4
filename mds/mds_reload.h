/*
 * mds_reload.h -- loads the slices that hold unfinished system rows (RMU
 * outbox rows, pending rows of transactions, count and decision rows) so
 * the transaction thread finishes them (docs/mds-xact.md "Reload").
 *
 * The RMU rounds and the resolver see only cached slices. After a restart
 * (or when ring 0 gives this MDS another MDS's slices) a slice nobody
 * reads again would keep its outbox rows for good: a parent's count
 * behind, a directory missing from the GDT. Each slice record says whether
 * the slice held system rows (XT_STORE_F_SYS), the MDSL
 * lists that flag, and this thread walks the listings of every MDSL and
 * loads the flagged slices ring 0 gives this MDS.
 *
 * Invariants:
 *  (1) A pass runs at start, after every ring-0 change, and every
 *      `period_ms` (an evicted slice whose rows are still there, a site
 *      that was down); a failed pass (an MDSL unreachable, a slice that
 *      does not load) is repeated after `retry_ms`, doubled for each
 *      failed pass in a row up to `period_ms`.
 *  (2) A loaded slice stays cached (the LRU may drop it like any other):
 *      its rows are finished by the RMU round and the resolver, and the
 *      next commit of the slice clears its flag.
 *  (3) Nothing is written here; loads go through the cache, so ring-0
 *      handovers and fences apply as for any load; a slice ring 0 gave
 *      away during its load is dropped again.
 */
#ifndef MDS_RELOAD_H
#define MDS_RELOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_stats.h"
#include "mds_store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mds_reload mds_reload;

struct mds_reload_opts {
    const mds_store *store;  /* borrowed: list_slices; outlives the reloader */
    mds_cache *cache;        /* borrowed */
    mds_stats *stats;        /* borrowed, may be NULL: sys_reloads,
                                reload_passes, reload_errors */
    mds_group *group;        /* borrowed: its participants are the MDSL
                                listed (every MDSL that may hold slices of
                                this MDS, ring-1 changes included) */
    /* Whether ring 0 gives (fsid, table, slice) to this MDS, and the ring-0
     * version now (NULL: one MDS owning everything, version 0). */
    bool (*owns)(void *arg, uint32_t fsid, uint64_t table, uint32_t slice);
    uint64_t (*ring0_version)(void *arg);
    void *route_arg;
    unsigned period_ms;      /* 0: 300000 (5 min) */
    unsigned retry_ms;       /* 0: 2000 */
};

/* Starts the thread (its first pass at once). *out: mds_reload_stop.
 * -EINVAL (no store/cache/group), -ENOMEM, pthread errors. */
int mds_reload_start(const struct mds_reload_opts *o, mds_reload **out);
/* Stops the thread (a pass stops at its next slice) and frees r. NULL: no-op. */
void mds_reload_stop(mds_reload *r);


#ifdef __cplusplus
}
#endif

#endif /* MDS_RELOAD_H */
