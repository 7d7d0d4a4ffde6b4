/*
 * mds_route.h -- which MDS owns which slice, the connections to the other
 * MDS, and the background work that keeps their bitmaps converging
 * (docs/mds-dist.md): split children handed to their owner,
 * split bits sent to the table's home, adaptive bitmap gossip.
 *
 * Ownership: slice (fsid, table, s) belongs to xt_ring_lookup(ring 0,
 * xt_ring_key(fsid, table, s)); a table's home is the owner of its slice 0.
 *
 * Invariants:
 *  (1) With no ring 0, or one without sites, this MDS owns every slice (one
 *      MDS, no R2: exactly the behaviour before many MDS).
 *  (2) A ring is only replaced by a higher version (xt_ring.h (2)).
 *  (3) Peer pools are never freed before mds_route_free: a pool returned by
 *      mds_route_pool stays valid while the route lives (a peer whose
 *      address changes gets a new pool; the old one is retired, not freed).
 *  (4) A handed-over split child (mds_route_on_bit with owned false) is
 *      dropped from the cache only after the group holding the split
 *      committed (mds_group_info.committed_gen >= its gen), and the split's
 *      bit goes to the home only then: the home never names a slice that
 *      is not on its MDSL. Nor does any peer: every split's bit (owned or
 *      not) waits in the pending list for its commit before gossip or a
 *      forward may carry it (mds_table_settle_bit, mds_table.h (9)).
 *  (5) Gossip interval: starts at gossip_ms, halves (min 20 ms) after a
 *      round whose peer learnt new bits, doubles (max 2 s) after a quiet
 *      round. gossip_ms 0: no gossip (bits still go home, as (4) says).
 *  (6) Ring 0 changes move slices (stage 2, docs/mds-dist.md): after a new
 *      ring, the thread sweeps the cache: every slice ring 0 now gives to
 *      another MDS is let go (mds_table_let_go), its group committed, and
 *      dropped; home roles move (mds_table_rehome). When a sweep finds
 *      nothing left, `clean_version` becomes the ring's version: this MDS
 *      holds nothing another owns under it.
 *  (7) Before this MDS loads a slice it owns (mds_route_before_load), every
 *      other MDS whose clean_version is below our ring's is asked to release
 *      it (xt_mds_release). A release answers only once the asked MDS runs
 *      the same ring or a newer one and holds no change of the slice that is
 *      not committed. An MDS that refuses connections for DEAD_MS is taken
 *      as dead: its prepared transactions are settled first as its own
 *      recovery would (mds_group_settle_site), then the load goes on,
 *      fenced (mds_cache.h invariant 6) as a second guard against a commit
 *      of its landing late.
 *
 * Locks: `mu` guards the ring, the peers and the pending lists; it is never
 * held across an RPC or a call into the table/group/cache. mds_route_owns
 * and mds_route_on_bit are called under slice locks: they only take `mu`.
 */
#ifndef MDS_ROUTE_H
#define MDS_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_stats.h"
#include "mds_table.h"
#include "xt_ring.h"
#include "xt_rpc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MDS_HOPS_MAX        4    /* a request is forwarded at most this often */
#define MDS_GOSSIP_MIN_MS   20
#define MDS_GOSSIP_MAX_MS   2000

typedef struct mds_route mds_route;

/* self: this MDS's R2 site id. *out: mds_route_free. -ENOMEM. */
int mds_route_new(uint32_t self, mds_stats *stats, mds_route **out);
/* Sets this MDS's site id (known only once R2 registered it).
 * REQUIRES: before mds_route_start and before any request is served. */
void mds_route_set_self(mds_route *r, uint32_t self);
/* Stops the thread (mds_route_start) first. NULL is a no-op. */
void mds_route_free(mds_route *r);
/* A clean stop: stops the thread, then tells the homes the split bits
 * whose commit is done (the thread's tick would have, a moment later). The
 * caller commits first (mds_group_sync). Without it a split made just
 * before a SIGTERM reached its home only as a repair at the next load. */
void mds_route_flush(mds_route *r);

/* One MDS site of the view. */
struct mds_route_site {
    uint32_t id;
    const char *addr;  /* host:port */
};
/* Installs ring (taken over; freed when not newer, invariant 2; may be
 * NULL: keep the current one) and the MDS addresses (copied). 0, -ENOMEM. */
int mds_route_update(mds_route *r, xt_ring *ring0, const struct mds_route_site *sites,
                     size_t n);
/* The ring version in use (0: none). Whether the ring holds this MDS. */
uint64_t mds_route_ring_version(mds_route *r);
bool mds_route_ring_has_self(mds_route *r);

/* mds_table's owns hook (arg: the route). */
bool mds_route_owns(void *r, uint32_t fsid, uint64_t table, uint32_t slice);
/* The owner of a slice: 0, -ENOENT (no ring: this MDS). */
int mds_route_owner(mds_route *r, uint32_t fsid, uint64_t table, uint32_t slice,
                    uint32_t *site);
uint32_t mds_route_self(const mds_route *r);
/* The pool to site (invariant 3), or NULL (unknown address, -ENOMEM). */
xt_rpc_pool *mds_route_pool(mds_route *r, uint32_t site);

/* mds_table's on_bit hook (arg: the route): queues the work of (4). */
void mds_route_on_bit(void *r, uint32_t fsid, uint64_t table, uint32_t slice, uint64_t gen,
                      bool owned, bool home);
/* The table's bitmap gained bits here (a merge): gossip it again. */
void mds_route_changed(mds_route *r, uint32_t fsid, uint64_t table);

/* Starts the background thread: handovers, bits home, gossip every
 * gossip_ms (0: off). The table, group and cache are borrowed and must
 * outlive the thread (mds_route_free stops it). 0, -EINVAL, -ENOMEM. */
int mds_route_start(mds_route *r, mds_table *table, mds_group *group, mds_cache *cache,
                    unsigned gossip_ms);
/* mds_table's owned_since hook (arg: the route): whether every ring 0 this
 * MDS installed after version `since` gives it k (since 0: yes). Rings
 * older than the last MDS_ROUTE_HISTORY are forgotten: an older `since`
 * answers no. *now: the current version. */
#define MDS_ROUTE_HISTORY 16
bool mds_route_owned_since(void *r, const struct mds_key *k, uint64_t since, uint64_t *now);
/* mds_table's ring_unsettled hook (arg: the route): whether an MDS that
 * may still use an older ring 0 than ours (alive, not known clean for our
 * version) could take k as its own under that ring (invariant 7). */
bool mds_route_unsettled(void *r, const struct mds_key *k);
/* mds_cache's stamp hook (arg: the route): the ring version in use. */
uint64_t mds_route_stamp(void *r);
/* mds_cache's before_load hook (arg: the route): invariant 7. 0, -EAGAIN
 * (an old holder has not let go yet: the client retries), -ENOMEM. */
int mds_route_before_load(void *r, const struct mds_key *k, bool *fence);
/* The server side of xt_mds_release (invariant 7): 0 when slice k is not
 * held here any more (written back and dropped, or the home role given
 * up), -EAGAIN when our ring is older than ring_version, ring 0 gives us
 * the slice, or the write-back has not finished. *clean_version: (6). */
int mds_route_release(mds_route *r, uint32_t from_site, const struct mds_key *k,
                      uint64_t ring_version, uint64_t *clean_version);

/* The current gossip interval in ms (0: off). */
unsigned mds_route_gossip_interval(mds_route *r);

#ifdef __cplusplus
}
#endif
#endif /* MDS_ROUTE_H */
