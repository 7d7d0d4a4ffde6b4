/*
 * r2_agent.h -- the side of R2 that every other process runs (pom-mdsl,
 * later pom-mds and clients): register with R2, send heartbeats, keep the
 * latest view, follow the leading R2 across failovers.
 *
 * One background thread per agent:
 *
 *   start -> REGISTERING --xt_r2_register ok--> REGISTERED --heartbeat every
 *              ^   |  (retry with back-off over      |        interval; delta
 *              |   |   every address; -EREMOTE:      |        views merged)
 *              |   +-- ask get_view for the leader)  |
 *              +------ -ENOENT (site unknown: removed, store lost):
 *                      register again with prev_id = the old id
 *
 * A heartbeat that fails for any other reason (connection refused, a
 * timeout, -EREMOTE from a deposed leader) makes the agent look for the
 * leader among the addresses (and the leader a view names) and go on there;
 * it never gives up.
 *
 * Invariants:
 *  (1) The agent's view is always one full view: a delta reply replaces
 *      exactly the sections it carries (r2_mgr.h (3)).
 *  (2) Callbacks run on the agent thread without any agent lock held; they
 *      may call the getters, never r2_agent_stop.
 *  (3) Getters return copies; nothing they return shares memory with the
 *      agent.
 */
#ifndef R2_AGENT_H
#define R2_AGENT_H

#include "xt_rpc_r2.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct r2_agent r2_agent;

#define R2_AGENT_MAX_ADDRS    16
#define R2_AGENT_MAX_COUNTERS 256

/* Fills the next heartbeat: *load, and up to cap per-fs counters into c;
 * returns how many. */
typedef size_t (*r2_agent_stats_fn)(void *arg, double *load, struct xt_fs_counter *c,
                                    size_t cap);
/* The view changed: `changed` has the XT_VIEW_* sections that changed;
 * *v is the full view, valid during the call only. */
typedef void (*r2_agent_view_fn)(void *arg, const struct xt_view *v, int changed);
/* Fills the ring-1 fields of the next heartbeat into *r1 (zeroed before;
 * docs/mdsl-scale.md "Completion"): an MDS its acked seq and last walk, an
 * MDSL its misplaced and prepared counts. */
typedef void (*r2_agent_ring1_fn)(void *arg, struct xt_r2_hb_ring1 *r1);
/* Fills the capacity fields of the next heartbeat into *u (zeroed before;
 * docs/r2.md "Capacity and quotas"): an MDS its usage incarnation (the
 * counts come from the stats callback), an MDSL its storage. */
typedef void (*r2_agent_usage_fn)(void *arg, struct xt_r2_hb_usage *u);
/* A heartbeat reply's capacity of the cluster; *c valid during the call only. */
typedef void (*r2_agent_capacity_fn)(void *arg, const struct xt_capacity *c);
/* The site was registered with id (the first time, or again). */
typedef void (*r2_agent_id_fn)(void *arg, uint32_t site_id);

struct r2_agent_opts {
    const char *r2_addrs;     /* "host:port[,host:port...]" (copied), 1..16 */
    int type;                 /* XT_SITE_MDS, _MDSL, _CLIENT or _R2 (R2 itself) */
    const char *addr;         /* this site's service address (clients: a label) */
    uint64_t capacity;        /* bytes */
    const char *fs_name;      /* clients: the fs mounted; NULL: none */
    const char *metrics;      /* HOST:PORT of its /metrics (copied); NULL: none */
    uint32_t prev_id;         /* rejoin under this id; 0: none (see id_file) */
    const char *id_file;      /* optional: holds the site id across restarts.
                                 Read for prev_id when prev_id is 0, written
                                 (atomically) after each registration. */
    unsigned hb_interval_ms;  /* 0: 1000; must match pom-r2's --hb-interval-ms */
    unsigned call_timeout_ms; /* 0: max(3 intervals, 2000) */
    r2_agent_stats_fn stats;  /* NULL: load 0, no counters */
    void *stats_arg;
    r2_agent_view_fn on_view; /* may be NULL */
    void *view_arg;
    r2_agent_id_fn on_id;     /* may be NULL */
    void *id_arg;
    r2_agent_ring1_fn ring1;  /* NULL: heartbeats carry no ring-1 field, so
                                 (an MDS) ring 1 stays frozen */
    void *ring1_arg;
    r2_agent_usage_fn usage;  /* NULL: heartbeats carry no capacity field */
    void *usage_arg;
    r2_agent_capacity_fn on_capacity; /* may be NULL */
    void *capacity_arg;
    const struct xt_auth_cred *cred; /* what its connections prove (copied);
                                        NULL: the process's (xt_rpc_set_cred) */
    struct xt_rpc_tls *tls;   /* TLS of its connections (the agent takes a
                                 reference); NULL: the process's (xt_rpc_set_tls) */
};

/* Starts the agent thread (it registers in the background). *out is freed
 * by r2_agent_stop. Returns 0, -EINVAL (bad addresses or options), -ENOMEM. */
int r2_agent_start(const struct r2_agent_opts *o, r2_agent **out);
/* Stops the thread and frees a. A registered client site leaves R2's
 * view (one site_leave call, best effort: R2 expires a client it does not
 * hear from); nothing is sent for a server (R2 notices the silence and
 * marks it failed). NULL is a no-op. */
void r2_agent_stop(r2_agent *a);

/* Waits until the site is registered (and holds the view its registration
 * brought). Returns 0 or -ETIMEDOUT. */
int r2_agent_wait_registered(r2_agent *a, int timeout_ms);
/* The site id, 0 until registered. */
uint32_t r2_agent_site_id(r2_agent *a);
/* A deep copy of the latest full view into *out (caller frees with
 * xt_view_free). Returns 0, -EAGAIN (no view yet) or -ENOMEM. */
int r2_agent_view_copy(r2_agent *a, struct xt_view *out);

/* A deep copy of the capacity the last heartbeat reply carried into *out
 * (caller frees with xt_capacity_free). Returns 0, -EAGAIN (none yet) or
 * -ENOMEM. */
int r2_agent_capacity(r2_agent *a, struct xt_capacity *out);

struct r2_agent_stats {
    uint64_t registrations, heartbeats, hb_failures, views, leader_searches;
};
void r2_agent_stats(r2_agent *a, struct r2_agent_stats *st);

/* A deep copy of a view (dst is overwritten; caller frees it with
 * xt_view_free). Returns 0 or -ENOMEM (dst then empty). */
int r2_view_dup(const struct xt_view *src, struct xt_view *dst);

#ifdef __cplusplus
}
#endif
#endif /* R2_AGENT_H */
