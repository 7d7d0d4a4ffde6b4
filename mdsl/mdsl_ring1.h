/*
 * mdsl_ring1.h -- what pom-mdsl tells R2 about a running ring-1 change
 * (docs/mdsl-scale.md "Completion"): how many live slices the current ring
 * 1 places on another MDSL (`misplaced`) and how many prepared txids are
 * undecided (`prepared`), from a background pass over the index.
 *
 * Fed by the R2 agent: mdsl_ring1_view is its on_view callback,
 * mdsl_ring1_id its on_id, mdsl_ring1_fill its ring1 callback (all three
 * take the reporter as arg). One thread runs the passes:
 *
 *   - losing (R2's ring-1 state marks this site `losing`) in MOVING: count
 *     against the view's current ring 1 through the listing, in pages,
 *     paused between pages (mdsl_store_count_misplaced), once the
 *     sweep-owed mark is durable (below); then move the blob tracts the
 *     ring places elsewhere (mdsl_tmove_pass) and add those still owed to
 *     `misplaced`;
 *   - losing in PREPARE: no counts (the current ring is still the old one:
 *     a 0 would mean nothing, yet R2 could take it for the new ring's if
 *     it arrived after the walks);
 *   - otherwise: misplaced 0 at once (a new leader learns every MDSL's
 *     counts within a heartbeat);
 *   - `prepared` is the store's count of undecided prepares, at the end of
 *     the pass.
 *
 * A pass starts when the ring-1 seq or the ring's version changes, or when
 * the previous pass ended, at most once per interval.
 *
 * Space back (docs/mdsl-scale.md "Space back"): the view callback asks the
 * store (mdsl_store_space_request; its GC thread does the work) for
 *   - a drop pass of all-MOVED folders at the first view past MOVING (DONE
 *     or STABLE) after start, and at each such view after one that showed
 *     this MDSL losing in MOVING: no change moves slices then, so every
 *     tombstone here is final and no MDS writes at its old placement;
 *   - one sweep at MDSL_SWEEP_THRESHOLD with the latter (this MDSL lost
 *     slices in a change that is now past MOVING: a join, or a drain).
 * The sweep survives a restart: a pass counting for a change this MDSL
 * loses in first marks the change's sweep owed in the store
 * (mdsl_store_sweep_owe, synced), and a sweep still owed at the first view
 * past MOVING after start is asked with that view's drop pass.
 *
 * Invariants:
 *  (1) A report is only ever the result of a pass that started under the
 *      ring-1 seq and ring version the reporter knows now: a change drops
 *      the last report (heartbeats then carry no counts) and cancels the
 *      running pass, so a zero counted against an older ring is never sent.
 *  (2) No lock is held during a pass or a store call; the lock guards the
 *      state handed from the agent thread and the last report only.
 *  (3) The pass thread owns the ring it counts against (a private decoded
 *      copy): views never share memory with it.
 */
#ifndef MDSL_RING1_H
#define MDSL_RING1_H

#include "mdsl_store.h"
#include "mdsl_tmove.h"
#include "xt_rpc_r2.h"

#include <stdint.h>

typedef struct mdsl_ring1 mdsl_ring1;

struct mdsl_ring1_opts {
    mdsl_store *store;      /* borrowed; outlives the reporter */
    mdsl_blob *blob;        /* borrowed, or NULL: no tract moves (mdsl_tmove.h) */
    uint64_t tract_move_rate; /* bytes/s of tract moves; 0: unpaced */
    unsigned interval_ms;   /* least time between pass starts; 0: 1000 */
    uint32_t page;          /* slices per listing page; 0: 1024 */
    unsigned pause_ms;      /* sleep between pages; 0: none */
};

/* Starts the pass thread; *out freed by mdsl_ring1_stop. 0, -EINVAL,
 * -ENOMEM or a pthread error. */
int mdsl_ring1_start(const struct mdsl_ring1_opts *o, mdsl_ring1 **out);
/* Stops the thread (a running pass ends at its next page) and frees r.
 * NULL is a no-op. */
void mdsl_ring1_stop(mdsl_ring1 *r);

/* r2_agent callbacks; arg is the reporter. */
void mdsl_ring1_id(void *arg, uint32_t site_id);
void mdsl_ring1_view(void *arg, const struct xt_view *v, int changed);
void mdsl_ring1_fill(void *arg, struct xt_r2_hb_ring1 *r1);

/* The last report, for tests and logs: 0, or -EAGAIN when none is held. */
struct mdsl_ring1_report {
    uint64_t seq, ring_version; /* what the pass counted against */
    bool counted;               /* losing in MOVING: a real index pass */
    uint64_t misplaced, prepared; /* misplaced counts tracts_owed too */
    uint64_t tracts_owed;       /* tracts not yet on their whole new set */
    uint64_t passes;            /* passes completed since start */
    uint64_t drops_asked;       /* drop passes asked of the store */
    uint64_t sweeps_asked;      /* sweeps asked of the store */
};
int mdsl_ring1_report(mdsl_ring1 *r, struct mdsl_ring1_report *out);
/* Tract moves since start (mdsl_tmove_counters) and the last pass's owed
 * tracts; all 0 for a NULL r. */
void mdsl_ring1_tracts(mdsl_ring1 *r, uint64_t *moved, uint64_t *bytes, uint64_t *dropped,
                       uint64_t *owed);

#endif /* MDSL_RING1_H */
