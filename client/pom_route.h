/*
 * pom_route.h -- where libpomegranate sends each xTable request when many
 * MDS share the tables (docs/mds-dist.md "Client routing").
 *
 * The client keeps the MDS sites and ring 0 of the R2 view, one connection
 * pool per MDS, and a bitmap cache per table learnt from the bitmaps MDS
 * replies piggyback (a table it knows nothing of is slice 0 only). A
 * request goes to the owner of the slice its bitmap picks, with that slice
 * as slice_hint; a stale bitmap costs a forward at the MDS, never a wrong
 * answer.
 *
 * Invariants:
 *  (1) Without a ring (pom_connect_mds: one MDS address, no R2) every
 *      request goes to that one MDS: exactly the one-MDS client.
 *  (2) Bitmaps only gain bits (OR merge); a ring is replaced only by a
 *      higher version; when R2 is unreachable the last view stays.
 *  (3) A struct pom_mds, once handed out, lives until pom_route_free (its
 *      pool too): callers use it without holding any lock.
 *  (4) The bitmap cache is bounded (POM_ROUTE_TABLES_MAX tables); past it
 *      it is emptied (a forgotten table costs forwards, not errors).
 *  (5) Each MDS carries its site state from the latest view that listed
 *      the sites (UP, TRANSIENT, FAILED, DRAINING; XT_SITE_REMOVED once it
 *      vanished from the view). pom_sync decides per state how to sync it
 *      (pom_call.c); the record stays (invariant 3), a site that comes back
 *      takes its new state.
 */
#ifndef POM_ROUTE_H
#define POM_ROUTE_H

#include "xt_rpc.h"
#include "xt_rpc_r2.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POM_ROUTE_TABLES_MAX 65536

/* One MDS and this client's record of what it acknowledged (pom_call_i.h
 * invariant 1, kept per MDS: each has its own epochs). */
struct pom_mds {
    uint32_t id;            /* R2 site id; 0: the only MDS (no R2) */
    char addr[256];         /* (the route's lock) */
    xt_rpc_pool *pool;      /* (the route's lock): read it through the calls
                               below, which hand out a pool that stays valid */
    int state;              /* (the route's lock): enum xt_site_state as the
                               view says, XT_SITE_REMOVED when gone from it
                               (invariant 5); read it with pom_route_state */
    /* protected by the fs's epoch_mu */
    uint32_t ack_epoch;     /* of the latest acknowledged change */
    uint64_t ack_seq;       /* changes acknowledged */
    size_t nuns;            /* its entries in the unsynced table (pom_errseq.c) */
    uint64_t over_seq;      /* the latest change the full table did not take, 0:
                               none (pom_errseq.c invariant 2) */
    uint32_t seen_epoch;    /* of the latest reply of any kind (restarts) */
    bool fail_noted;        /* its current FAILED spell was counted as a
                               restart (pom_call.c sync_failed) */
};

typedef struct pom_route pom_route;

/* A route to the one MDS at addr (invariant 1). po: the pool options
 * (host/port are taken from addr). *out: pom_route_free. -EINVAL, -ENOMEM. */
int pom_route_new_single(const char *addr, const struct xt_rpc_pool_opts *po,
                         pom_route **out);
/* A route from an R2 view (MDS sites and ring 0). -EHOSTUNREACH (no MDS in
 * the view), -ENOMEM. */
int pom_route_new_view(const struct xt_view *v, const struct xt_rpc_pool_opts *po,
                       pom_route **out);
void pom_route_free(pom_route *r);

/* Takes a newer view's MDS sites and ring 0 (invariant 2). */
void pom_route_update(pom_route *r, const struct xt_view *v);

/* The MDS for hash h of table (xt_hash_name of the row name), its pool in
 * *pool, and the slice the client's bitmap picks in *slice. NULL when no
 * MDS is known. */
struct pom_mds *pom_route_pick(pom_route *r, uint32_t fsid, uint64_t table, uint64_t h,
                               int32_t *slice, xt_rpc_pool **pool);
/* The hash a list from cookie starts at (as the MDS computes it). */
uint64_t pom_route_cookie_hash(uint64_t cookie);
/* Merges a piggybacked bitmap encoding of table (ignored if malformed). */
void pom_route_learn(pom_route *r, uint64_t table, const uint8_t *bm, uint32_t len);
/* Every MDS known, into out[0..cap) with their pools and site states
 * (invariant 5) as of now; returns how many there are (more than cap:
 * only cap were copied; cap 0 with NULL arrays counts). */
size_t pom_route_all(pom_route *r, struct pom_mds **out, xt_rpc_pool **pools, int *states,
                     size_t cap);
/* The MDS of site id (a forwarded reply names the owner that applied the
 * change: pom_call_i.h invariant 2), or NULL when unknown. */
struct pom_mds *pom_route_find(pom_route *r, uint32_t id);
/* The site state of m now (invariant 5). */
int pom_route_state(pom_route *r, const struct pom_mds *m);

#endif /* POM_ROUTE_H */
