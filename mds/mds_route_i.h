/*
 * mds_route_i.h -- the routing state shared by mds_route.c (ring, peers,
 * handovers, gossip, the thread) and mds_route_move.c (what ring changes
 * add: sweep, release, settling a dead MDS's transactions). Not for other
 * callers; the invariants are mds_route.h's.
 */
#ifndef MDS_ROUTE_I_H
#define MDS_ROUTE_I_H

#include "mds_route.h"

#include <pthread.h>

#define TICK_MS          5
#define GOSSIP_MAX_TABLES 256  /* bitmaps per gossip message */
#define CHG_MAX          4096  /* recently changed tables remembered */
#define ADDR_CAP         256
#define SWEEP_MS         100   /* a sweep that left work retries after this */
#define DEAD_MS          2000  /* refusing connections this long: dead (7) */
#define RELEASE_MS       5000  /* one release call's timeout */

struct peer {
    uint32_t id;
    char addr[ADDR_CAP];
    xt_rpc_pool *pool;   /* NULL until first used */
    uint64_t clean_ver;  /* its clean_version, as it last told us (7) */
    uint64_t down_since; /* xt_mono_ns of the first refusal in a row; 0: up */
    uint64_t settled;    /* down_since of the spell its transactions were
                            settled in (mds_group_settle_site) */
};

struct pending {
    struct pending *next;
    uint32_t fsid, slice;
    uint64_t table, gen;
    bool owned, home, kicked, told;
    unsigned tries;
};

struct chg {
    uint32_t fsid;
    uint64_t table;
    unsigned rounds;     /* gossip rounds it still goes out in */
};

struct mds_route {
    uint32_t self;
    mds_stats *stats;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    xt_ring *ring;               /* (mu) */
    struct peer *peers;          /* (mu) */
    size_t npeers, cap;          /* (mu) */
    xt_rpc_pool **retired;       /* (mu) invariant 3 */
    size_t nretired;             /* (mu) */
    struct pending *pend;        /* (mu) */
    struct chg *chg;             /* (mu) */
    size_t nchg;                 /* (mu) */
    bool stop, started;          /* (mu) */
    pthread_t th;
    mds_table *table;
    mds_group *group;
    mds_cache *cache;
    unsigned gossip_ms;
    unsigned interval;           /* (mu) current gossip interval */
    uint64_t rng;                /* thread only */
    uint64_t swept_ver;          /* (mu) clean_version, invariant 6 */
    xt_ring *hist[MDS_ROUTE_HISTORY]; /* (mu) rings installed before `ring`,
                                        newest first (mds_route_owned_since) */
    uint64_t drained_ver;        /* (mu) ring version "drained" was logged at */
};

/* REQUIRES: mu. */
struct peer *mds_route_peer_find(mds_route *r, uint32_t id);

/* Step 3 of the thread's tick (mds_route_move.c). */
void mds_route_run_sweep(mds_route *r, uint64_t *next_sweep);

#endif /* MDS_ROUTE_I_H */
