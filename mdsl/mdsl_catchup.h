/*
 * mdsl_catchup.h -- catch-up of a returning MDSL from its peers
 * (docs/mdsl-replicas.md "Catch-up of a returning MDSL"): an MDSL that lost
 * its disk, or holds a slice without its image, copies what its replica
 * sets give it from the MDSL that hold it.
 *
 * One thread, started before the server and attached to the R2 agent once
 * that runs, checks every interval whether a pass is due:
 *
 *   pass: the listings of every UP peer of ring 1 (Storage.list_slices,
 *   paged, index order) merged with this MDSL's own, one slice at a time.
 *   A slice is *needed* when this MDSL should hold it -- it is in the
 *   slice's replica set (xt_ring_replicas over ring 1 with r = min(R, MDSL
 *   of ring 1)), or, for fsid 0 (the decision records), among the r lowest
 *   ids of ring 1 -- and some peer holds it whole (an image, not MOVED) at
 *   a version above this MDSL's, or this MDSL holds no image of it. Then
 *   each needed slice is loaded from the peer with the newest whole copy
 *   (Storage.load_slice, one in flight) and stored with its records'
 *   versions and flags, `batch` slices per local transaction
 *   (mdsl_store_apply_local).
 *
 * A pass runs at the first chance after start (looked for every 100 ms
 * until then), again while slices are left
 * (a peer failed to answer, a load or a store failed: after 1 s, doubling
 * to 30 s), and whenever the set of UP MDSL of ring 1 changes (a peer came
 * back). With R <= 1 or outside ring 1 it never runs and reports nothing.
 *
 * Invariants:
 *  (1) A copied record never hides a newer one: it is applied by the
 *      store's rules (mdsl_apply.c: an image older than the slice's newest
 *      is ignored, a delta at or under it too), so a commit that arrives
 *      meanwhile at a higher version stays current whatever the order.
 *  (2) under_replicated is the needed slices of the last merge less those
 *      stored since; -1 (not reported) until the first merge has ended. A
 *      merge counts against the peers whose listing answered (one that
 *      failed makes the pass partial: a retry is due).
 *  (3) No lock is held across an RPC or a store call; the lock guards the
 *      agent pointer and the stop flag (the counters are atomics).
 *  (4) The thread stops at its next page or slice once asked to.
 */
#ifndef MDSL_CATCHUP_H
#define MDSL_CATCHUP_H

#include "mdsl_store.h"
#include "r2_agent.h"

#include <stdint.h>

typedef struct mdsl_catchup mdsl_catchup;

struct mdsl_catchup_opts {
    mdsl_store *store;      /* borrowed; outlives the catch-up */
    uint32_t replicas;      /* R, the cluster's --mdsl-replicas */
    unsigned interval_ms;   /* how often a pass is considered; 0 = 1000 */
    uint32_t page;          /* listing page, 1..MDSL_LIST_MAX; 0 = 1024 */
    uint32_t batch;         /* slices per local transaction; 0 = 16 */
    int call_timeout_ms;    /* of each peer call; 0 = 30000 */
};

/* Starts the thread (idle until attached). *out: mdsl_catchup_stop.
 * -EINVAL, -ENOMEM or a pthread error. */
int mdsl_catchup_start(const struct mdsl_catchup_opts *o, mdsl_catchup **out);
/* The agent (borrowed; stopped only after c) gives the site id and views. */
void mdsl_catchup_attach(mdsl_catchup *c, r2_agent *agent);
/* Stops the thread (a running pass ends at its next page or slice): the
 * agent is no longer read. mdsl_catchup_stat keeps answering until
 * mdsl_catchup_free. NULL is a no-op for both. */
void mdsl_catchup_stop(mdsl_catchup *c);
void mdsl_catchup_free(mdsl_catchup *c);

struct mdsl_catchup_stat {
    int64_t under_replicated;   /* invariant 2; -1 not counted */
    uint64_t passes;            /* merges ended */
    uint64_t pulled_slices;     /* slices stored from peers since start */
    uint64_t pulled_bytes;      /* their record bytes */
};
/* Any thread; c may be NULL (all zero, under_replicated -1). */
void mdsl_catchup_stat(mdsl_catchup *c, struct mdsl_catchup_stat *st);

#endif /* MDSL_CATCHUP_H */
