/*
 * r2_zk_i.h -- internals of the R2 state store in ZooKeeper (r2_store_zk.c:
 * records and multi; r2_zk_call.c: calls with deadlines; r2_zk_keeper.c:
 * sessions, election, watches). It runs on the asynchronous API
 * of the multithreaded C client (zookeeper_mt), with our own deadline on
 * every call.
 *
 * Threads: callers; the client's I/O and completion threads (they run our
 * completions and watchers, which only copy results, set flags and signal:
 * they never call ZooKeeper, never take hlock and never run user code);
 * and one keeper thread of ours, which does all the slow background work:
 * replacing an expired session, re-creating ephemerals, the election, and
 * re-arming watches and calling the user's callbacks.
 *
 *   session states (z->connected / z->expired, set by session_watcher):
 *
 *     open --> CONNECTED <--> CONNECTING          (client reconnects itself)
 *                  |              |
 *                  +--> EXPIRED <-+  --keeper: replace_session()--> CONNECTING
 *
 * Invariants:
 *  (1) A caller blocks at most call_timeout_ms: waiting for a connection
 *      (then -ENOTCONN) plus waiting for the answer (then -ETIMEDOUT), all
 *      before one deadline. An abandoned call's context stays alive until
 *      its completion runs (two references: caller and completion).
 *  (2) z->zh is replaced only by the keeper, under hlock held for writing;
 *      callers submit under hlock held for reading and wait without it.
 *  (3) This store believes it leads only while its session is connected
 *      and its election node is the lowest: any connection loss clears
 *      z->leader at once (the server expires the session only later).
 *  (4) Every ephemeral this store created and did not delete is in z->eph
 *      with its latest value, so a new session can re-create it.
 *  (5) Watch entries are freed only at close: a ZooKeeper watcher may still
 *      hold a pointer to one after r2_store_unwatch (it is then ignored).
 *  (6) User callbacks run on the keeper with cb_mu held and mu not held.
 */
#ifndef R2_ZK_I_H
#define R2_ZK_I_H

#include "r2_store_i.h"
#include "r2_store_zk.h"
#include "xt_worker.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <zookeeper/zookeeper.h>

#define ZK_ROOT_MAX 256
#define ZK_PATH_MAX (ZK_ROOT_MAX + 16 + R2_STORE_KEY_MAX)
#define ZK_RETRIES 8

struct zk_eph {
    char *key;
    void *val;
    size_t len;
};

struct zk_watch {
    struct zk_store *z;
    int id;
    char *key;
    r2_store_watch_fn fn;
    void *arg;
    bool removed, armed, fired; /* protected by z->mu */
};

/* Context of one client handle: lets the session watcher ignore events of
 * a handle that was already replaced. */
struct zk_hctx {
    struct zk_store *z;
    uint64_t gen;
};

typedef struct zk_store {
    struct r2_store base;
    char *hosts, *root;              /* immutable */
    int session_ms, call_ms;         /* immutable */

    pthread_rwlock_t hlock;
    zhandle_t *zh;                   /* invariant (2) */
    struct zk_hctx *hctx;            /* protected by hlock */

    pthread_mutex_t mu;
    pthread_cond_t cv;               /* state changes below; CLOCK_MONOTONIC */
    uint64_t gen;                    /* protected by mu: handle generation */
    bool connected, expired, stopping;  /* protected by mu */
    int64_t session;                 /* protected by mu */
    bool need_eph;                   /* protected by mu: re-create ephemerals */
    struct zk_eph *eph;              /* protected by mu; invariant (4) */
    size_t neph;                     /* protected by mu */
    struct zk_watch **watches;       /* protected by mu */
    size_t nwatches;                 /* protected by mu */
    bool joined, leader, told_leader;  /* protected by mu */
    bool need_elect;                 /* protected by mu */
    void *elect_id;                  /* protected by mu */
    size_t elect_id_len;             /* protected by mu */
    char my_node[64];                /* protected by mu: "" = none */
    r2_store_leader_fn leader_fn;    /* protected by mu */
    void *leader_arg;                /* protected by mu */

    pthread_mutex_t cb_mu;           /* invariant (6); recursive */
    xt_worker *keeper;               /* protected by mu; NULL before open ends */
} zk_store;

/* One asynchronous request waited for with a deadline (r2_zk_call.c). */
struct zk_call {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;            /* protected by mu; invariant (1) */
    bool done;           /* protected by mu */
    int rc;              /* the ZooKeeper rc, once done */
    struct Stat stat;
    char *data;          /* get: value (xt_malloc), data_len bytes */
    int data_len;
    char *path;          /* create: the created path */
    char **names;        /* children */
    int32_t nnames;
    /* multi: owned arrays, written by the client until completion */
    zoo_op_t *ops;
    zoo_op_result_t *res;
    struct Stat *stats;
    char (*cpaths)[ZK_PATH_MAX];
};

/* ---- r2_zk_call.c: calls and one-path primitives -------------------------- */

/* A ZooKeeper rc as 0 or -errno (the table of r2_store.h). */
int r2_zk_errno(int rc);
/* The client's log lines, routed to XT_DBG. */
void r2_zk_log_cb(const char *message);
/* Waits (until deadline) for a connected session, takes hlock for reading
 * and makes *cp. NULL with *err set when not connected. REQUIRES: a
 * non-NULL return is followed by one zoo_a* call and r2_zk_call_wait. */
zhandle_t *r2_zk_call_start(zk_store *z, uint64_t deadline,
                            struct zk_call **cp, int *err);
/* Releases hlock, waits for the answer of the request submitted with
 * result zrc. *err = 0 or -errno. True if the caller still holds c (read
 * the results, then r2_zk_call_unref), false if c is no longer its own. */
bool r2_zk_call_wait(zk_store *z, struct zk_call *c, int zrc,
                     uint64_t deadline, int *err);
void r2_zk_call_unref(struct zk_call *c);
/* void_completion_t (data = the call). */
void r2_zk_done_void(int rc, const void *data);
/* strings_completion_t filling c->names (data = the call). */
void r2_zk_done_strings(int rc, const struct String_vector *sv, const void *data);
/* The znode path of key into buf[ZK_PATH_MAX]: <root>/data<key>. */
void r2_zk_data_path(const zk_store *z, const char *key, char *buf);

/* Synchronous one-path primitives, each bounded by dl: 0 or -errno. */
int r2_zk_create(zk_store *z, const char *path, const void *val, size_t len,
                 int mode, uint64_t dl, char **created);
int r2_zk_set(zk_store *z, const char *path, const void *val, size_t len,
              int version, uint64_t dl, int64_t *new_version);
int r2_zk_get(zk_store *z, const char *path, uint64_t dl,
              void **val, size_t *len, int64_t *version);
int r2_zk_children(zk_store *z, const char *path, uint64_t dl,
                   char ***names, size_t *count);
int r2_zk_exists(zk_store *z, const char *path, watcher_fn w, void *wctx,
                 uint64_t dl, int64_t *version);
int r2_zk_delete(zk_store *z, const char *path, int version,
                 uint64_t dl);
/* Creates the missing ancestors of path below <root>/data (persistent,
 * empty); -ENOTDIR if one is ephemeral. */
int r2_zk_make_parents(zk_store *z, const char *path, uint64_t dl);

/* ---- r2_zk_keeper.c: sessions, the keeper thread, election, watches ------- */

/* Creates a client handle of a new generation. REQUIRES: hlock held for
 * writing. Leaves z->zh NULL on failure (the keeper retries). */
void r2_zk_handle_open(zk_store *z, const clientid_t *cid);
/* Closes the handle (its pending completions run). REQUIRES: hlock held
 * for writing. */
void r2_zk_handle_close(zk_store *z);
/* One round of the keeper's worker (arg = the store): replaces an expired
 * session, re-creates ephemerals, runs the election, arms and runs watches.
 * Returns the ms until the next round (0: more work is waiting). */
uint64_t r2_zk_keeper_step(xt_worker *wk, void *arg);
/* Wakes the keeper and whoever waits on z->cv (a connection, a change to
 * act on). REQUIRES: z->mu held. */
void r2_zk_kick(zk_store *z);
/* The ops of r2_store_i.h for watches and the election. */
int r2_zk_watch(r2_store *s, const char *key, r2_store_watch_fn fn, void *arg);
void r2_zk_unwatch(r2_store *s, int id);
int r2_zk_elect(r2_store *s, const void *id, size_t id_len,
                r2_store_leader_fn fn, void *arg);
int r2_zk_resign(r2_store *s);
bool r2_zk_is_leader(r2_store *s);
int r2_zk_leader(r2_store *s, void **id, size_t *len);

#endif /* R2_ZK_I_H */
