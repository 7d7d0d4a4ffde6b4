/*
 * mds_mover.h -- the background mover of a ring-1 change (docs/mdsl-scale.md
 * "The mover", "Throttling", "Completion"): one thread that walks the slice listing of every
 * losing MDSL and moves, through the commit group, each slice this MDS owns
 * by ring 0 that is live there and placed elsewhere by the current ring 1.
 *
 * The mover never writes a record itself: it pins the slice through the
 * cache (so the ring-0 release, settle and fence run as for any load) and
 * asks the group to move it (mds_group_move: image at the current place,
 * MOVED tombstone at the old one, one txid). A pass that found nothing to
 * move is a *walk*: (ring-1 version, ring-0 version at the pass's start),
 * which the MDS heartbeats and R2 waits for before DONE.
 *
 * Invariants:
 *  (1) A walk is reported only for a pass that listed every losing MDSL to
 *      its end, found no slice of this MDS to move, and ran entirely under
 *      one ring-0 version; any ring-0 change starts a new pass.
 *  (2) A slice the mover loaded (it was not cached) is dropped again after
 *      its move committed; one that was cached stays as it was.
 *  (3) Move images go out at no more than `rate` bytes/s on average.
 */
#ifndef MDS_MOVER_H
#define MDS_MOVER_H

#include <stdbool.h>
#include <stdint.h>

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_place.h"
#include "mds_stats.h"
#include "mds_store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mds_mover mds_mover;

#define MDS_MOVE_RATE_DEFAULT ((uint64_t)16 << 20) /* bytes/s (docs/mdsl-scale.md "Throttling") */

struct mds_mover_opts {
    const mds_store *store; /* borrowed: list_slices; outlives the mover */
    mds_cache *cache;       /* borrowed */
    mds_group *group;       /* borrowed (the cache's) */
    mds_place *place;       /* borrowed (the cache's and the group's) */
    mds_stats *stats;       /* borrowed, may be NULL: move_loads, walk_passes */
    /* Whether ring 0 gives (fsid, table, slice) to this MDS, and the ring-0
     * version now (NULL: one MDS owning everything, version 0). */
    bool (*owns)(void *arg, uint32_t fsid, uint64_t table, uint32_t slice);
    uint64_t (*ring0_version)(void *arg);
    void *route_arg;
    uint64_t rate;          /* bytes/s of move images; 0: MDS_MOVE_RATE_DEFAULT */
    unsigned poll_ms;       /* an idle walk checks ring 0 this often; 0: 500 */
};

/* Starts the thread, idle until mds_mover_walk. *out: mds_mover_stop.
 * -EINVAL (missing store/cache/group/place), -ENOMEM, pthread errors. */
int mds_mover_start(const struct mds_mover_opts *o, mds_mover **out);
/* Stops the thread (a move in flight finishes its sync or times out) and
 * frees m. NULL is a no-op. */
void mds_mover_stop(mds_mover *m);

/* Walk for ring-1 version v over the losing MDSL `losing` (copied, n <=
 * 64): replaces the walk asked before (a pass in progress restarts).
 * v == 0 or n == 0: stop walking and forget the last walk. 0, -EINVAL. */
int mds_mover_walk(mds_mover *m, uint64_t v, const uint32_t *losing, size_t n);
/* The last walk (invariant 1) of the walk asked now: true and (*v, *w), or
 * false when there is none yet. */
bool mds_mover_walked(mds_mover *m, uint64_t *v, uint64_t *w);

struct mds_mover_info {
    uint64_t passes;     /* passes finished (listed every losing MDSL) */
    uint64_t moves;      /* slices whose move this mover saw committed */
    uint64_t move_bytes; /* their image bytes */
    uint64_t move_loads; /* of them, loaded for the move (not cached) */
    uint64_t errors;     /* listing, load or sync failures (the pass repeats) */
};
void mds_mover_info(mds_mover *m, struct mds_mover_info *out);

#ifdef __cplusplus
}
#endif
#endif /* MDS_MOVER_H */
