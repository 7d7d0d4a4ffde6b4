/*
 * mds_ring1.h -- the running MDS follows R2's ring-1 changes
 * (docs/mdsl-scale.md "Phases"): from each view's ring-1 state it
 * adds participants, installs placements, starts and stops the mover, and
 * it fills the ring-1 fields of the heartbeats (acked seq, last walk).
 *
 *   PREPARE  the next ring's MDSL become commit participants, then ack
 *   MOVING   participants of both rings first, then placement = (next,
 *            previous kept) (mds_place_change), then ack; with `walk` the
 *            mover walks the losing MDSL
 *   DONE     previous placement dropped (mds_place_finish), mover idle, ack
 *   STABLE   the view's ring 1 installed if this MDS missed it, ack
 *
 * Views arrive on the agent thread from the start, before the commit group
 * exists: the follower keeps the latest ring-1 state and applies it when
 * attached (a restarted MDS installs it before it serves or owns anything).
 *
 * Invariants:
 *  (1) The seq acked is one whose state is installed: participants added
 *      before the placement that names them, placement before the ack.
 *  (2) f owns every ring it installed; a ring is freed only after the
 *      mds_place call that dropped it returned (mds_place.h invariant 2).
 *  (3) f->mu is held while applying (place and group calls are brief,
 *      no I/O); never across a call into the agent.
 */
#ifndef MDS_RING1_H
#define MDS_RING1_H

#include "mds_group.h"
#include "mds_mover.h"
#include "mds_place.h"
#include "mds_store_rpc.h"

#include "xt_ring.h"
#include "xt_rpc_r2.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mds_ring1 mds_ring1;

/* rpc (borrowed, outlives f) learns every MDSL address of the views.
 * *out: mds_ring1_free. -ENOMEM. */
int mds_ring1_new(mds_store_rpc *rpc, mds_ring1 **out);
/* REQUIRES: detached, or the place, group and mover still alive. */
void mds_ring1_free(mds_ring1 *f);

/* The locate function of a placement over ring 1 (arg: an xt_ring). */
uint32_t mds_ring1_locate(void *ring, uint32_t fsid, uint64_t table, uint32_t slice);

/* The replicas function of a placement over ring 1 (arg: an xt_ring): the
 * owner and the next distinct MDSL on the ring (xt_ring_replicas). */
uint32_t mds_ring1_replicas(void *ring, uint32_t fsid, uint64_t table, uint32_t slice,
                            uint32_t max, uint32_t *sites);

/* The MDSL of the view's previous and next ring 1 (a change in flight) not
 * yet in sites[0..*n), appended up to cap, their addresses given to rpc:
 * a starting MDS recovers with them as participants too. */
void mds_ring1_extra_sites(mds_ring1 *f, const struct xt_view *v, uint32_t *sites, size_t *n,
                           size_t cap);

/* A view (any thread; the agent's on_view): keeps its ring-1 state and
 * the MDSL addresses, and applies the state when attached. */
void mds_ring1_view(mds_ring1 *f, const struct xt_view *v);

/* From now on apply ring-1 states to place (whose current placement is
 * mds_ring1_locate over `ring`: f takes ownership of ring), group and mover
 * (may be NULL: nothing walks). Applies the latest state at once. */
void mds_ring1_attach(mds_ring1 *f, mds_place *place, xt_ring *ring, mds_group *group,
                      mds_mover *mover);
/* The mover to drive from now on (after the service started: a walk loads
 * slices through the route); applies the latest state. */
void mds_ring1_set_mover(mds_ring1 *f, mds_mover *mover);
/* Stop applying (before the place, group or mover are freed). */
void mds_ring1_detach(mds_ring1 *f);

/* r2_agent_opts.ring1 (arg: f): the acked seq and the last walk. */
void mds_ring1_heartbeat(void *f, struct xt_r2_hb_ring1 *r1);

/* For logs and tests: the seq acked and the installed versions. */
void mds_ring1_state(mds_ring1 *f, uint64_t *acked, uint64_t *cur_v, uint64_t *prev_v);

#ifdef __cplusplus
}
#endif
#endif /* MDS_RING1_H */
