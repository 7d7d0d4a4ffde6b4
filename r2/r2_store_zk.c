/*
 * r2_store_zk.c -- the R2 state store in ZooKeeper, on the asynchronous API
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
#include "r2_store_zk.h"

#include "r2_store_i.h"
#include "xt_common.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zookeeper/proto.h>
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
    pthread_t keeper;
    bool keeper_started;             /* immutable after open */
} zk_store;

/* ---- time and errors -------------------------------------------------- */

static void deadline_after(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static int zk_errno(int rc)
{
    switch (rc) {
    case ZOK: return 0;
    case ZNONODE: return -ENOENT;
    case ZNODEEXISTS: return -EEXIST;
    case ZBADVERSION: return -ESTALE;
    case ZNOTEMPTY: return -ENOTEMPTY;
    case ZNOCHILDRENFOREPHEMERALS: return -ENOTDIR;
    case ZBADARGUMENTS: return -EINVAL;
    case ZNOAUTH: case ZAUTHFAILED: return -EACCES;
    case ZMARSHALLINGERROR: return -ENOMEM;
    case ZCONNECTIONLOSS: case ZOPERATIONTIMEOUT: return -ETIMEDOUT;
    case ZSESSIONEXPIRED: case ZINVALIDSTATE: case ZCLOSING:
    case ZSESSIONMOVED: return -ENOTCONN;
    default:
        XT_WARN("r2_store_zk: ZooKeeper error %d (%s)", rc, zerror(rc));
        return -EIO;
    }
}

static void zk_log_cb(const char *message)
{
    XT_DBG("zookeeper: %s", message);
}

/* ---- calls: one asynchronous request waited for with a deadline ---------- */

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

static struct zk_call *call_new(void)
{
    struct zk_call *c = xt_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&c->mu, NULL);
    c->refs = 2;
    return c;
}

static void call_unref(struct zk_call *c)
{
    pthread_mutex_lock(&c->mu);
    int left = --c->refs;
    pthread_mutex_unlock(&c->mu);
    if (left > 0)
        return;
    xt_free(c->data);
    xt_free(c->path);
    for (int32_t i = 0; i < c->nnames; i++)
        xt_free(c->names[i]);
    xt_free(c->names);
    xt_free(c->ops);
    xt_free(c->res);
    xt_free(c->stats);
    xt_free(c->cpaths);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    xt_free(c);
}

/* Marks c done with rc and drops the completion's reference. */
static void call_finish(struct zk_call *c, int rc)
{
    pthread_mutex_lock(&c->mu);
    c->rc = rc;
    c->done = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    call_unref(c);
}

static void done_void(int rc, const void *data)
{
    call_finish((struct zk_call *)data, rc);
}

static void done_stat(int rc, const struct Stat *stat, const void *data)
{
    struct zk_call *c = (struct zk_call *)data;
    if (rc == ZOK && stat != NULL)
        c->stat = *stat;
    call_finish(c, rc);
}

static void done_data(int rc, const char *value, int value_len,
                      const struct Stat *stat, const void *data)
{
    struct zk_call *c = (struct zk_call *)data;
    if (rc == ZOK) {
        size_t n = value != NULL && value_len > 0 ? (size_t)value_len : 0;
        c->data = r2_store_dup_bytes(value, n);
        c->data_len = (int)n;
        if (c->data == NULL)
            rc = ZSYSTEMERROR;
        if (stat != NULL)
            c->stat = *stat;
    }
    call_finish(c, rc);
}

static void done_string(int rc, const char *value, const void *data)
{
    struct zk_call *c = (struct zk_call *)data;
    if (rc == ZOK && value != NULL) {
        c->path = xt_strdup(value);
        if (c->path == NULL)
            rc = ZSYSTEMERROR;
    }
    call_finish(c, rc);
}

static void done_strings(int rc, const struct String_vector *sv, const void *data)
{
    struct zk_call *c = (struct zk_call *)data;
    if (rc == ZOK && sv != NULL && sv->count > 0) {
        c->names = xt_calloc((size_t)sv->count, sizeof(char *));
        if (c->names == NULL) {
            rc = ZSYSTEMERROR;
        } else {
            for (int32_t i = 0; i < sv->count && rc == ZOK; i++) {
                c->names[i] = xt_strdup(sv->data[i]);
                if (c->names[i] == NULL)
                    rc = ZSYSTEMERROR;
                else
                    c->nnames = i + 1;
            }
        }
    }
    call_finish(c, rc);
}

/* Waits until the session is connected or the deadline passes, takes
 * hlock for reading and makes a call context. Returns the handle, or NULL
 * with *err = -ENOTCONN / -ENOMEM. REQUIRES: call_wait follows a non-NULL
 * return (it releases hlock). */
static zhandle_t *call_start(zk_store *z, const struct timespec *deadline,
                             struct zk_call **cp, int *err)
{
    pthread_mutex_lock(&z->mu);
    while (!z->connected && !z->stopping) {
        if (pthread_cond_timedwait(&z->cv, &z->mu, deadline) != 0)
            break;
    }
    bool ok = z->connected;
    pthread_mutex_unlock(&z->mu);
    if (!ok) {
        *err = -ENOTCONN;
        return NULL;
    }
    *cp = call_new();
    if (*cp == NULL) {
        *err = -ENOMEM;
        return NULL;
    }
    pthread_rwlock_rdlock(&z->hlock);
    if (z->zh == NULL) {
        pthread_rwlock_unlock(&z->hlock);
        call_unref(*cp);
        call_unref(*cp);
        *err = -ENOTCONN;
        return NULL;
    }
    return z->zh;
}

/* Releases hlock and waits for the answer to the request that zoo_a*
 * submitted with result zrc. *err = 0 or -errno. Returns true if the
 * caller still holds its reference to c (read results, then call_unref),
 * false if c is no longer the caller's (not submitted, or timed out). */
static bool call_wait(zk_store *z, struct zk_call *c, int zrc,
                      const struct timespec *deadline, int *err)
{
    pthread_rwlock_unlock(&z->hlock);
    if (zrc != ZOK) {
        /* Not submitted: the completion will never run. */
        call_unref(c);
        call_unref(c);
        *err = zk_errno(zrc);
        return false;
    }
    pthread_mutex_lock(&c->mu);
    while (!c->done) {
        if (pthread_cond_timedwait(&c->cv, &c->mu, deadline) != 0)
            break;
    }
    bool done = c->done;
    pthread_mutex_unlock(&c->mu);
    if (!done) {
        call_unref(c);
        *err = -ETIMEDOUT;
        return false;
    }
    *err = zk_errno(c->rc);
    return true;
}

/* ---- paths ---------------------------------------------------------------- */

/* <root>/data<key>, "/" mapping to <root>/data. */
static void data_path(const zk_store *z, const char *key, char *buf)
{
    snprintf(buf, ZK_PATH_MAX, "%s/data%s", z->root, key[1] == '\0' ? "" : key);
}

/* ---- synchronous primitives on one path: 0 or -errno ----------------------- */

static int zk_create(zk_store *z, const char *path, const void *val, size_t len,
                     int mode, const struct timespec *dl, char **created)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_acreate(zh, path, len ? val : NULL, len ? (int)len : -1,
                          &ZOO_OPEN_ACL_UNSAFE, mode, done_string, c);
    if (call_wait(z, c, zrc, dl, &err)) {
        if (err == 0 && created != NULL) {
            *created = c->path;
            c->path = NULL;
        }
        call_unref(c);
    }
    return err;
}

static int zk_set(zk_store *z, const char *path, const void *val, size_t len,
                  int version, const struct timespec *dl, int64_t *new_version)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_aset(zh, path, len ? val : NULL, len ? (int)len : -1, version,
                       done_stat, c);
    if (call_wait(z, c, zrc, dl, &err)) {
        if (err == 0 && new_version != NULL)
            *new_version = c->stat.version;
        call_unref(c);
    }
    return err;
}

static int zk_get(zk_store *z, const char *path, const struct timespec *dl,
                  void **val, size_t *len, int64_t *version)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_aget(zh, path, 0, done_data, c);
    if (call_wait(z, c, zrc, dl, &err)) {
        if (err == 0) {
            if (val != NULL) {
                *val = c->data;
                c->data = NULL;
            }
            if (len != NULL)
                *len = (size_t)c->data_len;
            if (version != NULL)
                *version = c->stat.version;
        }
        call_unref(c);
    }
    return err;
}

static int zk_children(zk_store *z, const char *path, const struct timespec *dl,
                       char ***names, size_t *count)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_aget_children(zh, path, 0, done_strings, c);
    if (call_wait(z, c, zrc, dl, &err)) {
        if (err == 0) {
            *names = c->names;
            *count = (size_t)c->nnames;
            c->names = NULL;
            c->nnames = 0;
        }
        call_unref(c);
    }
    return err;
}

/* Whether path exists, optionally leaving watcher w on it: 0, -ENOENT or
 * -errno; *version (if not NULL) gets its data version. */
static int zk_exists(zk_store *z, const char *path, watcher_fn w, void *wctx,
                     const struct timespec *dl, int64_t *version)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = w != NULL ? zoo_awexists(zh, path, w, wctx, done_stat, c)
                        : zoo_aexists(zh, path, 0, done_stat, c);
    if (call_wait(z, c, zrc, dl, &err)) {
        if (err == 0 && version != NULL)
            *version = c->stat.version;
        call_unref(c);
    }
    return err;
}

static int zk_delete(zk_store *z, const char *path, int version,
                     const struct timespec *dl)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_adelete(zh, path, version, done_void, c);
    if (call_wait(z, c, zrc, dl, &err))
        call_unref(c);
    return err;
}

/* Creates the missing ancestors of path below <root>/data as persistent
 * empty znodes. Returns 0, -ENOTDIR (an ancestor is ephemeral) or -errno. */
static int make_parents(zk_store *z, const char *path, const struct timespec *dl)
{
    char buf[ZK_PATH_MAX];
    size_t base = strlen(z->root) + 5; /* "<root>/data" */
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + base + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        int rc = zk_create(z, buf, NULL, 0, ZOO_PERSISTENT, dl, NULL);
        *p = '/';
        if (rc < 0 && rc != -EEXIST)
            return rc;
    }
    return 0;
}

/* ---- owned ephemerals (invariant 4) ------------------------------------ */

/* Remembers (add = true) or updates the value of a remembered ephemeral.
 * A failed allocation is logged: that ephemeral would not come back after
 * a session loss. */
static void eph_note(zk_store *z, const char *key, const void *val, size_t len,
                     bool add)
{
    void *copy = r2_store_dup_bytes(val, len);
    pthread_mutex_lock(&z->mu);
    size_t i;
    for (i = 0; i < z->neph; i++)
        if (strcmp(z->eph[i].key, key) == 0)
            break;
    if (i == z->neph && add && copy != NULL) {
        char *k = xt_strdup(key);
        struct zk_eph *v = k ? xt_realloc(z->eph, (z->neph + 1) * sizeof *v) : NULL;
        if (v != NULL) {
            z->eph = v;
            v[z->neph++] = (struct zk_eph){ k, NULL, 0 };
        } else {
            xt_free(k);
        }
    }
    if (i < z->neph && copy != NULL) {
        xt_free(z->eph[i].val);
        z->eph[i].val = copy;
        z->eph[i].len = len;
        copy = NULL;
    } else if (i < z->neph || add) {
        XT_ERR("r2_store_zk: out of memory remembering ephemeral %s", key);
    }
    pthread_mutex_unlock(&z->mu);
    xt_free(copy);
}

static void eph_forget(zk_store *z, const char *key)
{
    pthread_mutex_lock(&z->mu);
    for (size_t i = 0; i < z->neph; i++) {
        if (strcmp(z->eph[i].key, key) == 0) {
            xt_free(z->eph[i].key);
            xt_free(z->eph[i].val);
            z->eph[i] = z->eph[--z->neph];
            break;
        }
    }
    pthread_mutex_unlock(&z->mu);
}

/* ---- record ops ------------------------------------------------------------ */

static int zkst_get(r2_store *s, const char *key, void **val, size_t *len,
                    int64_t *version)
{
    zk_store *z = (zk_store *)s;
    char path[ZK_PATH_MAX];
    struct timespec dl;
    data_path(z, key, path);
    deadline_after(&dl, z->call_ms);
    return zk_get(z, path, &dl, val, len, version);
}

static int zkst_put(r2_store *s, const char *key, const void *val, size_t len,
                    int64_t expected, unsigned flags, int64_t *new_version)
{
    zk_store *z = (zk_store *)s;
    char path[ZK_PATH_MAX];
    struct timespec dl;
    data_path(z, key, path);
    deadline_after(&dl, z->call_ms);
    if (expected > INT32_MAX)
        return -ESTALE; /* ZooKeeper versions are 32-bit */
    bool eph = (flags & R2_PUT_EPHEMERAL) != 0;
    int64_t ver = 0;
    for (int tries = 0; tries < ZK_RETRIES; tries++) {
        int rc;
        if (expected != R2_VER_CREATE) {
            rc = zk_set(z, path, val, len, expected >= 0 ? (int)expected : -1,
                        &dl, &ver);
            if (rc == 0) {
                eph_note(z, key, val, len, false);
                if (new_version != NULL)
                    *new_version = ver;
                return 0;
            }
            if (rc != -ENOENT || expected >= 0)
                return rc;
        }
        rc = zk_create(z, path, val, len, eph ? ZOO_EPHEMERAL : ZOO_PERSISTENT,
                       &dl, NULL);
        if (rc == -ENOENT) {
            rc = make_parents(z, path, &dl);
            if (rc < 0)
                return rc;
            continue;
        }
        if (rc == -EEXIST && expected == R2_VER_ANY)
            continue; /* created under us: overwrite it */
        if (rc == 0) {
            if (eph)
                eph_note(z, key, val, len, true);
            if (new_version != NULL)
                *new_version = 0;
        }
        return rc;
    }
    return -EAGAIN;
}

static int zkst_del(r2_store *s, const char *key, int64_t expected)
{
    zk_store *z = (zk_store *)s;
    char path[ZK_PATH_MAX];
    struct timespec dl;
    data_path(z, key, path);
    deadline_after(&dl, z->call_ms);
    if (expected > INT32_MAX)
        return -ESTALE;
    int rc = zk_delete(z, path, expected >= 0 ? (int)expected : -1, &dl);
    if (rc == 0)
        eph_forget(z, key);
    return rc;
}

static int zkst_list(r2_store *s, const char *dir, char ***names, size_t *count)
{
    zk_store *z = (zk_store *)s;
    char path[ZK_PATH_MAX];
    struct timespec dl;
    data_path(z, dir, path);
    deadline_after(&dl, z->call_ms);
    return zk_children(z, path, &dl, names, count);
}

/* ---- multi ----------------------------------------------------------------- */

/* What the planner knows of a path while it builds one ZooKeeper multi. */
struct plan_ent {
    char path[ZK_PATH_MAX];
    bool exists;
};

struct plan {
    struct plan_ent *ent;
    size_t n, cap;
};

static struct plan_ent *plan_find(struct plan *p, const char *path)
{
    for (size_t i = 0; i < p->n; i++)
        if (strcmp(p->ent[i].path, path) == 0)
            return &p->ent[i];
    return NULL;
}

static int plan_set(struct plan *p, const char *path, bool exists)
{
    struct plan_ent *e = plan_find(p, path);
    if (e == NULL) {
        if (p->n == p->cap) {
            size_t cap = p->cap ? 2 * p->cap : 16;
            struct plan_ent *v = xt_realloc(p->ent, cap * sizeof *v);
            if (v == NULL)
                return -ENOMEM;
            p->ent = v;
            p->cap = cap;
        }
        e = &p->ent[p->n++];
        snprintf(e->path, sizeof e->path, "%s", path);
    }
    e->exists = exists;
    return 0;
}

/* Whether path exists as the multi so far leaves it: 1, 0, -errno. */
static int plan_exists(zk_store *z, struct plan *p, const char *path,
                       const struct timespec *dl)
{
    struct plan_ent *e = plan_find(p, path);
    if (e != NULL)
        return e->exists;
    int rc = zk_exists(z, path, NULL, NULL, dl, NULL);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    int ex = rc == 0;
    rc = plan_set(p, path, ex);
    return rc < 0 ? rc : ex;
}

struct zmulti {
    zoo_op_t *ops;
    char (*paths)[ZK_PATH_MAX];  /* the path of each op (ops point into it) */
    size_t *user;                /* ops[k] belongs to user op user[k] */
    bool *planned;               /* ops[k] was chosen from a guess that can race */
    size_t n, cap;
};

/* Appends one ZooKeeper op; returns its index or -ENOMEM. */
static int zm_add(struct zmulti *m, size_t user, const char *path, bool planned)
{
    if (m->n == m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 16;
        zoo_op_t *ops = xt_realloc(m->ops, cap * sizeof *ops);
        if (ops != NULL)
            m->ops = ops;
        char (*paths)[ZK_PATH_MAX] = xt_realloc(m->paths, cap * sizeof *paths);
        if (paths != NULL)
            m->paths = paths;
        size_t *u = xt_realloc(m->user, cap * sizeof *u);
        if (u != NULL)
            m->user = u;
        bool *pl = xt_realloc(m->planned, cap * sizeof *pl);
        if (pl != NULL)
            m->planned = pl;
        if (ops == NULL || paths == NULL || u == NULL || pl == NULL)
            return -ENOMEM;
        m->cap = cap;
    }
    snprintf(m->paths[m->n], ZK_PATH_MAX, "%s", path);
    m->user[m->n] = user;
    m->planned[m->n] = planned;
    return (int)m->n++;
}

static void zm_free(struct zmulti *m)
{
    xt_free(m->ops);
    xt_free(m->paths);
    xt_free(m->user);
    xt_free(m->planned);
}

/* Translates the user's ops into ZooKeeper ops: missing ancestors become
 * creates, R2_VER_ANY puts become a set or a create after a lookup. */
static int zm_plan(zk_store *z, const r2_store_op *ops, size_t n,
                   struct zmulti *m, const struct timespec *dl, size_t *failed)
{
    struct plan p = { 0 };
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const r2_store_op *op = &ops[i];
        char path[ZK_PATH_MAX];
        data_path(z, op->key, path);
        *failed = i;
        if (op->expected > INT32_MAX) {
            rc = -ESTALE;
            break;
        }
        int ver = op->expected >= 0 ? (int)op->expected : -1;
        if (op->type == R2_OP_CHECK) {
            rc = zm_add(m, i, path, false);
            if (rc >= 0)
                zoo_check_op_init(&m->ops[rc], m->paths[rc], ver);
            continue;
        }
        if (op->type == R2_OP_DELETE) {
            rc = zm_add(m, i, path, false);
            if (rc >= 0) {
                zoo_delete_op_init(&m->ops[rc], m->paths[rc], ver);
                rc = plan_set(&p, path, false);
            }
            continue;
        }
        bool create = op->expected == R2_VER_CREATE;
        bool planned = false;
        if (op->expected == R2_VER_ANY) {
            rc = plan_exists(z, &p, path, dl);
            if (rc < 0)
                break;
            create = rc == 0;
            planned = true;
        }
        if (!create) {
            rc = zm_add(m, i, path, planned);
            if (rc >= 0) {
                zoo_set_op_init(&m->ops[rc], m->paths[rc], op->len ? op->val : NULL,
                                op->len ? (int)op->len : -1, ver, NULL);
                rc = 0;
            }
            continue;
        }
        /* Ancestors top-down, each created here if missing. */
        size_t base = strlen(z->root) + 5;
        for (char *s = path + base + 1; rc == 0 && (s = strchr(s, '/')) != NULL; s++) {
            *s = '\0';
            rc = plan_exists(z, &p, path, dl);
            if (rc == 0) {
                rc = zm_add(m, i, path, true);
                if (rc >= 0) {
                    zoo_create_op_init(&m->ops[rc], m->paths[rc], NULL, -1,
                                       &ZOO_OPEN_ACL_UNSAFE, ZOO_PERSISTENT, NULL, 0);
                    rc = plan_set(&p, path, true);
                }
            } else if (rc == 1) {
                rc = 0;
            }
            *s = '/';
        }
        if (rc < 0)
            break;
        rc = zm_add(m, i, path, planned);
        if (rc >= 0) {
            int mode = (op->flags & R2_PUT_EPHEMERAL) ? ZOO_EPHEMERAL : ZOO_PERSISTENT;
            zoo_create_op_init(&m->ops[rc], m->paths[rc], op->len ? op->val : NULL,
                               op->len ? (int)op->len : -1, &ZOO_OPEN_ACL_UNSAFE,
                               mode, NULL, 0);
            rc = plan_set(&p, path, true);
        }
    }
    xt_free(p.ent);
    return rc < 0 ? rc : 0;
}

/* One attempt: plan, submit, wait. Returns 0, -errno, or 1 to retry (an
 * op chosen by the planner lost a race). */
static int zm_try(zk_store *z, const r2_store_op *ops, size_t n,
                  int64_t *new_versions, size_t *failed, const struct timespec *dl)
{
    struct zmulti m = { 0 };
    int err = zm_plan(z, ops, n, &m, dl, failed);
    if (err < 0) {
        zm_free(&m);
        return err;
    }
    struct zk_call *c;
    zhandle_t *zh = call_start(z, dl, &c, &err);
    if (zh == NULL) {
        zm_free(&m);
        return err;
    }
    /* The client writes results and set stats at completion: they belong
     * to the call (invariant 1), not to this frame. */
    c->res = xt_calloc(m.n, sizeof *c->res);
    c->stats = xt_calloc(m.n, sizeof *c->stats);
    c->cpaths = xt_calloc(m.n, sizeof *c->cpaths);
    if (c->res == NULL || c->stats == NULL || c->cpaths == NULL) {
        pthread_rwlock_unlock(&z->hlock);
        call_unref(c);
        call_unref(c);
        zm_free(&m);
        return -ENOMEM;
    }
    for (size_t k = 0; k < m.n; k++) {
        if (m.ops[k].type == ZOO_SETDATA_OP) {
            m.ops[k].set_op.stat = &c->stats[k];
        } else if (m.ops[k].type == ZOO_CREATE_OP) {
            m.ops[k].create_op.buf = c->cpaths[k];
            m.ops[k].create_op.buflen = ZK_PATH_MAX;
        }
    }
    int zrc = zoo_amulti(zh, (int)m.n, m.ops, c->res, done_void, c);
    int result = 0;
    if (call_wait(z, c, zrc, dl, &err)) {
        result = err;
        if (err == 0) {
            if (new_versions != NULL)
                for (size_t i = 0; i < n; i++)
                    new_versions[i] = -1;
            for (size_t k = 0; k < m.n; k++) {
                size_t i = m.user[k];
                if (new_versions != NULL && ops[i].type == R2_OP_PUT)
                    new_versions[i] = m.ops[k].type == ZOO_SETDATA_OP
                                          ? c->stats[k].version : 0;
            }
            for (size_t i = 0; i < n; i++) {
                if (ops[i].type == R2_OP_DELETE)
                    eph_forget(z, ops[i].key);
                else if (ops[i].type == R2_OP_PUT)
                    eph_note(z, ops[i].key, ops[i].val, ops[i].len,
                             (ops[i].flags & R2_PUT_EPHEMERAL) != 0 &&
                                 new_versions != NULL && new_versions[i] == 0);
            }
        } else {
            for (size_t k = 0; k < m.n; k++) {
                int e = c->res[k].err;
                if (e == ZOK || e == ZRUNTIMEINCONSISTENCY)
                    continue;
                *failed = m.user[k];
                result = zk_errno(e);
                if (m.planned[k] && (e == ZNONODE || e == ZNODEEXISTS))
                    result = 1;
                break;
            }
        }
        call_unref(c);
    } else {
        result = err;
    }
    zm_free(&m);
    return result;
}

static int zkst_multi(r2_store *s, const r2_store_op *ops, size_t n,
                      int64_t *new_versions, size_t *failed)
{
    zk_store *z = (zk_store *)s;
    struct timespec dl;
    deadline_after(&dl, z->call_ms);
    int64_t local[R2_STORE_MULTI_MAX];
    /* new versions are needed to tell a created ephemeral from an update */
    int64_t *nv = new_versions != NULL ? new_versions : local;
    for (int tries = 0; tries < ZK_RETRIES; tries++) {
        int rc = zm_try(z, ops, n, nv, failed, &dl);
        if (rc <= 0)
            return rc;
    }
    return -EAGAIN;
}

/* ---- watches ------------------------------------------------------------- */

/* ZooKeeper watcher of a user watch (client thread): flag and wake. */
static void watch_event(zhandle_t *zh, int type, int state, const char *path,
                        void *ctx)
{
    struct zk_watch *w = ctx;
    if (type == ZOO_SESSION_EVENT)
        return; /* the session watcher handles those */
    pthread_mutex_lock(&w->z->mu);
    w->armed = false;
    w->fired = true;
    pthread_cond_broadcast(&w->z->cv);
    pthread_mutex_unlock(&w->z->mu);
}

static int zkst_watch(r2_store *s, const char *key, r2_store_watch_fn fn, void *arg)
{
    zk_store *z = (zk_store *)s;
    struct zk_watch *w = xt_calloc(1, sizeof *w);
    char *k = xt_strdup(key);
    if (w == NULL || k == NULL) {
        xt_free(w);
        xt_free(k);
        return -ENOMEM;
    }
    pthread_mutex_lock(&z->mu);
    struct zk_watch **v = xt_realloc(z->watches, (z->nwatches + 1) * sizeof *v);
    if (v == NULL) {
        pthread_mutex_unlock(&z->mu);
        xt_free(w);
        xt_free(k);
        return -ENOMEM;
    }
    z->watches = v;
    *w = (struct zk_watch){ z, (int)z->nwatches + 1, k, fn, arg, false, false, false };
    v[z->nwatches++] = w;
    pthread_cond_broadcast(&z->cv); /* the keeper arms it */
    pthread_mutex_unlock(&z->mu);
    return w->id;
}

static void zkst_unwatch(r2_store *s, int id)
{
    zk_store *z = (zk_store *)s;
    pthread_mutex_lock(&z->cb_mu); /* waits out a running callback */
    pthread_mutex_lock(&z->mu);
    if (id >= 1 && (size_t)id <= z->nwatches)
        z->watches[id - 1]->removed = true;
    pthread_mutex_unlock(&z->mu);
    pthread_mutex_unlock(&z->cb_mu);
}

/* Keeper: arms the watches that are not armed. */
static void arm_watches(zk_store *z)
{
    pthread_mutex_lock(&z->mu);
    size_t n = z->nwatches;
    pthread_mutex_unlock(&z->mu);
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&z->mu);
        struct zk_watch *w = z->watches[i];
        bool todo = !w->removed && !w->armed && z->connected;
        if (todo)
            w->armed = true;
        pthread_mutex_unlock(&z->mu);
        if (!todo)
            continue;
        char path[ZK_PATH_MAX];
        struct timespec dl;
        data_path(z, w->key, path);
        deadline_after(&dl, z->call_ms);
        int rc = zk_exists(z, path, watch_event, w, &dl, NULL);
        if (rc == 0 || rc == -ENOENT) {
            int crc = 0;
            /* A child watch also needs the node; a missing node's creation
             * fires the exists watch, and we re-arm then. */
            if (rc == 0) {
                int err;
                struct zk_call *c;
                zhandle_t *zh = call_start(z, &dl, &c, &err);
                crc = err;
                if (zh != NULL) {
                    int zrc = zoo_awget_children(zh, path, watch_event, w,
                                                 done_strings, c);
                    if (call_wait(z, c, zrc, &dl, &crc))
                        call_unref(c);
                }
            }
            if (crc == 0 || crc == -ENOENT)
                continue;
            rc = crc;
        }
        XT_DBG("r2_store_zk: arming watch on %s: %d", w->key, rc);
        pthread_mutex_lock(&z->mu);
        w->armed = false;
        pthread_mutex_unlock(&z->mu);
    }
}

/* Keeper: runs the callbacks of fired watches. */
static void run_watches(zk_store *z)
{
    pthread_mutex_lock(&z->cb_mu);
    pthread_mutex_lock(&z->mu);
    for (size_t i = 0; i < z->nwatches; i++) {
        struct zk_watch *w = z->watches[i];
        if (!w->fired || w->removed)
            continue;
        w->fired = false;
        pthread_mutex_unlock(&z->mu);
        w->fn(w->arg, w->key);
        pthread_mutex_lock(&z->mu);
    }
    pthread_mutex_unlock(&z->mu);
    pthread_mutex_unlock(&z->cb_mu);
}

/* ---- election --------------------------------------------------------------- */

static void elect_event(zhandle_t *zh, int type, int state, const char *path,
                        void *ctx)
{
    zk_store *z = ctx;
    if (type == ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&z->mu);
    z->need_elect = true;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
}

/* The sequence part of an election node name ("...-n_0000000042"). */
static const char *node_seq(const char *name)
{
    const char *u = strrchr(name, '_');
    return u != NULL ? u + 1 : name;
}

static int cmp_nodes(const void *a, const void *b)
{
    const char *x = *(char *const *)a, *y = *(char *const *)b;
    int c = strcmp(node_seq(x), node_seq(y));
    return c != 0 ? c : strcmp(x, y);
}

/* The sorted candidates: *names (r2_store_names_free) of *count. */
static int elect_list(zk_store *z, char ***names, size_t *count,
                      const struct timespec *dl)
{
    char path[ZK_PATH_MAX];
    snprintf(path, sizeof path, "%s/election", z->root);
    int rc = zk_children(z, path, dl, names, count);
    if (rc == 0 && *count > 1)
        qsort(*names, *count, sizeof(char *), cmp_nodes);
    return rc;
}

/* Keeper: one round of the election recipe. Returns 0 when settled (a
 * leader, or a watch on the predecessor), or -errno to retry later. */
static int elect_round(zk_store *z)
{
    struct timespec dl;
    deadline_after(&dl, z->call_ms);
    char prefix[40], mine[64];
    pthread_mutex_lock(&z->mu);
    bool joined = z->joined;
    snprintf(prefix, sizeof prefix, "%016" PRIx64 "-n_", (uint64_t)z->session);
    snprintf(mine, sizeof mine, "%s", z->my_node);
    void *id = joined ? r2_store_dup_bytes(z->elect_id, z->elect_id_len) : NULL;
    size_t id_len = z->elect_id_len;
    pthread_mutex_unlock(&z->mu);
    if (joined && id == NULL)
        return -ENOMEM;

    char **names = NULL;
    size_t count = 0;
    int rc = elect_list(z, &names, &count, &dl);
    for (int round = 0; rc == 0 && round < 4; round++) {
        /* Find our node (by session prefix: also one whose create reply
         * was lost), or make one. */
        mine[0] = '\0';
        for (size_t i = 0; i < count && mine[0] == '\0'; i++)
            if (strncmp(names[i], prefix, strlen(prefix)) == 0)
                snprintf(mine, sizeof mine, "%s", names[i]);
        if (!joined) {
            if (mine[0] != '\0') {
                char path[ZK_PATH_MAX];
                snprintf(path, sizeof path, "%s/election/%s", z->root, mine);
                rc = zk_delete(z, path, -1, &dl);
                if (rc == -ENOENT)
                    rc = 0;
            }
            break;
        }
        if (mine[0] == '\0') {
            char path[ZK_PATH_MAX];
            snprintf(path, sizeof path, "%s/election/%s", z->root, prefix);
            rc = zk_create(z, path, id, id_len, ZOO_EPHEMERAL_SEQUENTIAL, &dl, NULL);
            r2_store_names_free(names, count);
            names = NULL;
            count = 0;
            if (rc == 0)
                rc = elect_list(z, &names, &count, &dl);
            continue;
        }
        size_t me = 0;
        while (strcmp(names[me], mine) != 0)
            me++;
        bool lead = me == 0;
        if (!lead) {
            char path[ZK_PATH_MAX];
            snprintf(path, sizeof path, "%s/election/%s", z->root, names[me - 1]);
            rc = zk_exists(z, path, elect_event, z, &dl, NULL);
            if (rc == -ENOENT) {
                /* The predecessor left meanwhile: look again. */
                r2_store_names_free(names, count);
                names = NULL;
                count = 0;
                rc = elect_list(z, &names, &count, &dl);
                continue;
            }
            if (rc < 0)
                break;
        }
        pthread_mutex_lock(&z->mu);
        if (z->joined && z->connected) {
            snprintf(z->my_node, sizeof z->my_node, "%s", mine);
            z->leader = lead;
        }
        pthread_mutex_unlock(&z->mu);
        r2_store_names_free(names, count);
        xt_free(id);
        return 0;
    }
    pthread_mutex_lock(&z->mu);
    if (!joined)
        z->my_node[0] = '\0';
    pthread_mutex_unlock(&z->mu);
    r2_store_names_free(names, count);
    xt_free(id);
    return rc < 0 ? rc : (joined ? -EAGAIN : 0);
}

static int zkst_elect(r2_store *s, const void *id, size_t id_len,
                      r2_store_leader_fn fn, void *arg)
{
    zk_store *z = (zk_store *)s;
    void *copy = r2_store_dup_bytes(id, id_len);
    if (copy == NULL)
        return -ENOMEM;
    pthread_mutex_lock(&z->mu);
    if (z->joined) {
        pthread_mutex_unlock(&z->mu);
        xt_free(copy);
        return -EALREADY;
    }
    xt_free(z->elect_id);
    z->elect_id = copy;
    z->elect_id_len = id_len;
    z->leader_fn = fn;
    z->leader_arg = arg;
    z->joined = true;
    z->need_elect = true;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
    return 0;
}

static int zkst_resign(r2_store *s)
{
    zk_store *z = (zk_store *)s;
    pthread_mutex_lock(&z->mu);
    z->joined = false;
    z->leader = false;
    z->need_elect = true; /* the keeper deletes our node */
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
    return 0;
}

static bool zkst_is_leader(r2_store *s)
{
    zk_store *z = (zk_store *)s;
    pthread_mutex_lock(&z->mu);
    bool v = z->leader && z->connected;
    pthread_mutex_unlock(&z->mu);
    return v;
}

static int zkst_leader(r2_store *s, void **id, size_t *len)
{
    zk_store *z = (zk_store *)s;
    struct timespec dl;
    deadline_after(&dl, z->call_ms);
    for (int tries = 0; tries < ZK_RETRIES; tries++) {
        char **names = NULL;
        size_t count = 0;
        int rc = elect_list(z, &names, &count, &dl);
        if (rc < 0)
            return rc;
        if (count == 0) {
            r2_store_names_free(names, count);
            return -ENOENT;
        }
        char path[ZK_PATH_MAX];
        snprintf(path, sizeof path, "%s/election/%s", z->root, names[0]);
        r2_store_names_free(names, count);
        rc = zk_get(z, path, &dl, id, len, NULL);
        if (rc != -ENOENT)
            return rc;
    }
    return -EAGAIN;
}

/* Keeper: tells the user about a change of leadership. */
static void tell_leader(zk_store *z)
{
    pthread_mutex_lock(&z->cb_mu);
    pthread_mutex_lock(&z->mu);
    bool now = z->leader && z->connected;
    bool changed = now != z->told_leader;
    z->told_leader = now;
    r2_store_leader_fn fn = z->leader_fn;
    void *arg = z->leader_arg;
    pthread_mutex_unlock(&z->mu);
    if (changed && fn != NULL)
        fn(arg, now);
    pthread_mutex_unlock(&z->cb_mu);
}

/* ---- sessions --------------------------------------------------------------- */

static void session_watcher(zhandle_t *zh, int type, int state, const char *path,
                            void *ctx)
{
    struct zk_hctx *h = ctx;
    zk_store *z = h->z;
    if (type != ZOO_SESSION_EVENT)
        return;
    pthread_mutex_lock(&z->mu);
    if (h->gen == z->gen) {
        if (state == ZOO_CONNECTED_STATE) {
            const clientid_t *cid = zoo_client_id(zh);
            if (z->session != cid->client_id) {
                z->session = cid->client_id;
                z->need_eph = true;
            }
            z->connected = true;
            z->need_elect = true; /* settle joined or resigned state */
        } else if (state == ZOO_EXPIRED_SESSION_STATE ||
                   state == ZOO_AUTH_FAILED_STATE) {
            XT_WARN("r2_store_zk: session %" PRIx64 " %s", (uint64_t)z->session,
                    state == ZOO_EXPIRED_SESSION_STATE ? "expired" : "auth failed");
            z->connected = false;
            z->expired = true;
            z->leader = false; /* invariant (3) */
        } else {
            z->connected = false;
            z->leader = false; /* invariant (3) */
        }
        pthread_cond_broadcast(&z->cv);
    }
    pthread_mutex_unlock(&z->mu);
}

/* Creates a client handle for the current generation. REQUIRES: hlock
 * held for writing. A NULL z->zh (hosts unusable) is retried by the keeper. */
static void handle_open(zk_store *z, const clientid_t *cid)
{
    struct zk_hctx *h = xt_calloc(1, sizeof *h);
    if (h == NULL)
        return;
    pthread_mutex_lock(&z->mu);
    h->z = z;
    h->gen = ++z->gen;
    z->connected = false;
    z->expired = false;
    pthread_mutex_unlock(&z->mu);
    z->zh = zookeeper_init2(z->hosts, session_watcher, z->session_ms, cid, h, 0,
                            zk_log_cb);
    if (z->zh == NULL) {
        XT_ERR("r2_store_zk: cannot create a ZooKeeper handle for %s: %s",
               z->hosts, strerror(errno));
        xt_free(h);
        return;
    }
    z->hctx = h;
}

/* REQUIRES: hlock held for writing. */
static void handle_close(zk_store *z)
{
    if (z->zh != NULL)
        zookeeper_close(z->zh); /* runs the pending completions */
    z->zh = NULL;
    xt_free(z->hctx);
    z->hctx = NULL;
}

/* Keeper: the session expired; start a new one. Ephemerals, election node
 * and watches of the old one are gone: mark them for the keeper to redo. */
static void replace_session(zk_store *z)
{
    pthread_rwlock_wrlock(&z->hlock);
    handle_close(z);
    /* Reset before the new handle exists: its first events must not be
     * overwritten. */
    pthread_mutex_lock(&z->mu);
    z->session = 0;
    z->my_node[0] = '\0';
    for (size_t i = 0; i < z->nwatches; i++) {
        z->watches[i]->armed = false;
        z->watches[i]->fired = true; /* changes may have been missed */
    }
    pthread_mutex_unlock(&z->mu);
    handle_open(z, NULL);
    pthread_rwlock_unlock(&z->hlock);
}

/* Keeper: re-creates this store's ephemerals in a new session. */
static int recreate_ephemerals(zk_store *z)
{
    pthread_mutex_lock(&z->mu);
    size_t n = z->neph;
    pthread_mutex_unlock(&z->mu);
    int result = 0;
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&z->mu);
        if (i >= z->neph) {
            pthread_mutex_unlock(&z->mu);
            break;
        }
        char *key = xt_strdup(z->eph[i].key);
        void *val = r2_store_dup_bytes(z->eph[i].val, z->eph[i].len);
        size_t len = z->eph[i].len;
        pthread_mutex_unlock(&z->mu);
        char path[ZK_PATH_MAX];
        struct timespec dl;
        int rc = -ENOMEM;
        if (key != NULL && val != NULL) {
            data_path(z, key, path);
            deadline_after(&dl, z->call_ms);
            rc = zk_create(z, path, val, len, ZOO_EPHEMERAL, &dl, NULL);
            if (rc == -ENOENT) {
                rc = make_parents(z, path, &dl);
                if (rc == 0)
                    rc = zk_create(z, path, val, len, ZOO_EPHEMERAL, &dl, NULL);
            }
            if (rc == -EEXIST) {
                XT_WARN("r2_store_zk: ephemeral %s was re-created by someone else",
                        key);
                rc = 0;
            }
        }
        if (rc < 0 && result == 0)
            result = rc;
        xt_free(key);
        xt_free(val);
    }
    return result;
}

static void *keeper_main(void *arg)
{
    zk_store *z = arg;
    pthread_mutex_lock(&z->mu);
    while (!z->stopping) {
        if (z->expired) {
            pthread_mutex_unlock(&z->mu);
            replace_session(z);
            pthread_mutex_lock(&z->mu);
            continue;
        }
        bool missing_handle = false;
        bool eph = z->need_eph && z->connected;
        bool elect = z->need_elect && z->connected;
        bool arm = false, fired = false;
        for (size_t i = 0; i < z->nwatches; i++) {
            struct zk_watch *w = z->watches[i];
            arm = arm || (!w->removed && !w->armed && z->connected);
            fired = fired || (!w->removed && w->fired);
        }
        bool tell = (z->leader && z->connected) != z->told_leader;
        if (eph)
            z->need_eph = false;
        if (elect)
            z->need_elect = false;
        pthread_mutex_unlock(&z->mu);
        pthread_rwlock_rdlock(&z->hlock);
        missing_handle = z->zh == NULL;
        pthread_rwlock_unlock(&z->hlock);

        bool retry = false;
        if (missing_handle) {
            replace_session(z);
        } else {
            if (eph && recreate_ephemerals(z) < 0)
                retry = true;
            if (eph && retry) {
                pthread_mutex_lock(&z->mu);
                z->need_eph = true;
                pthread_mutex_unlock(&z->mu);
            }
            if (elect && elect_round(z) < 0) {
                retry = true;
                pthread_mutex_lock(&z->mu);
                z->need_elect = true;
                pthread_mutex_unlock(&z->mu);
            }
            if (arm)
                arm_watches(z);
            if (tell || elect)
                tell_leader(z);
            if (fired)
                run_watches(z);
        }
        pthread_mutex_lock(&z->mu);
        bool work = z->expired || (z->need_eph && z->connected) ||
                    (z->need_elect && z->connected) ||
                    (z->leader && z->connected) != z->told_leader;
        for (size_t i = 0; i < z->nwatches && !work; i++)
            work = !z->watches[i]->removed && z->watches[i]->fired;
        if (!work || retry) {
            struct timespec dl;
            deadline_after(&dl, retry ? 200 : 1000);
            pthread_cond_timedwait(&z->cv, &z->mu, &dl);
        }
    }
    pthread_mutex_unlock(&z->mu);
    return NULL;
}

/* ---- lifetime ------------------------------------------------------------- */

int64_t r2_store_zk_session(r2_store *s)
{
    zk_store *z = (zk_store *)s;
    pthread_mutex_lock(&z->mu);
    int64_t v = z->connected ? z->session : 0;
    pthread_mutex_unlock(&z->mu);
    return v;
}

static void ignore_event(zhandle_t *zh, int type, int state, const char *path,
                         void *ctx)
{
}

int r2_store_zk_expire_session(r2_store *s)
{
    zk_store *z = (zk_store *)s;
    clientid_t cid;
    pthread_rwlock_rdlock(&z->hlock);
    bool ok = z->zh != NULL;
    if (ok)
        cid = *zoo_client_id(z->zh);
    pthread_rwlock_unlock(&z->hlock);
    if (!ok || cid.client_id == 0)
        return -ENOTCONN;
    zhandle_t *other = zookeeper_init2(z->hosts, ignore_event, z->session_ms, &cid, NULL,
                                       0, zk_log_cb);
    if (other == NULL)
        return -errno;
    int rc = -ETIMEDOUT;
    for (int i = 0; i < z->call_ms / 10; i++) {
        if (zoo_state(other) == ZOO_CONNECTED_STATE) {
            rc = 0;
            break;
        }
        usleep(10000);
    }
    zookeeper_close(other); /* closes the shared session on the server */
    return rc;
}

static void zkst_close(r2_store *s)
{
    zk_store *z = (zk_store *)s;
    pthread_mutex_lock(&z->mu);
    z->stopping = true;
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
    if (z->keeper_started)
        pthread_join(z->keeper, NULL);
    pthread_rwlock_wrlock(&z->hlock);
    handle_close(z); /* the server deletes our ephemerals and election node */
    pthread_rwlock_unlock(&z->hlock);
    for (size_t i = 0; i < z->neph; i++) {
        xt_free(z->eph[i].key);
        xt_free(z->eph[i].val);
    }
    xt_free(z->eph);
    for (size_t i = 0; i < z->nwatches; i++) {
        xt_free(z->watches[i]->key);
        xt_free(z->watches[i]);
    }
    xt_free(z->watches);
    xt_free(z->elect_id);
    xt_free(z->hosts);
    xt_free(z->root);
    pthread_rwlock_destroy(&z->hlock);
    pthread_cond_destroy(&z->cv);
    pthread_mutex_destroy(&z->mu);
    pthread_mutex_destroy(&z->cb_mu);
    xt_free(z);
}

static const r2_store_ops zk_ops = {
    .name = "zookeeper",
    .get = zkst_get,
    .put = zkst_put,
    .del = zkst_del,
    .list = zkst_list,
    .multi = zkst_multi,
    .watch = zkst_watch,
    .unwatch = zkst_unwatch,
    .elect = zkst_elect,
    .resign = zkst_resign,
    .is_leader = zkst_is_leader,
    .leader = zkst_leader,
    .close = zkst_close,
};

static pthread_once_t zk_log_once = PTHREAD_ONCE_INIT;

static void zk_log_init(void)
{
    zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
}

/* Creates root/data and root/election (and root's own ancestors). */
static int make_layout(zk_store *z)
{
    struct timespec dl;
    deadline_after(&dl, z->call_ms);
    char path[ZK_PATH_MAX];
    snprintf(path, sizeof path, "%s/election", z->root);
    for (char *p = path + 1;; p++) {
        p = strchr(p, '/');
        if (p != NULL)
            *p = '\0';
        int rc = zk_create(z, path, NULL, 0, ZOO_PERSISTENT, &dl, NULL);
        if (rc < 0 && rc != -EEXIST)
            return rc;
        if (p == NULL)
            break;
        *p = '/';
    }
    snprintf(path, sizeof path, "%s/data", z->root);
    int rc = zk_create(z, path, NULL, 0, ZOO_PERSISTENT, &dl, NULL);
    return rc == -EEXIST ? 0 : rc;
}

int r2_store_zk_open(const r2_store_zk_options *opt, r2_store **out)
{
    const char *root = opt->root != NULL ? opt->root : "/pomegranate";
    if (opt->hosts == NULL || opt->hosts[0] == '\0' || strlen(root) > ZK_ROOT_MAX ||
        !r2_store_key_valid(root) || root[1] == '\0' ||
        opt->session_timeout_ms < 0 || opt->call_timeout_ms < 0)
        return -EINVAL;
    pthread_once(&zk_log_once, zk_log_init);
    zk_store *z = xt_calloc(1, sizeof *z);
    if (z == NULL)
        return -ENOMEM;
    z->base.ops = &zk_ops;
    z->hosts = xt_strdup(opt->hosts);
    z->root = xt_strdup(root);
    z->session_ms = opt->session_timeout_ms ? opt->session_timeout_ms : 10000;
    z->call_ms = opt->call_timeout_ms ? opt->call_timeout_ms : 5000;
    pthread_rwlock_init(&z->hlock, NULL);
    pthread_mutex_init(&z->mu, NULL);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&z->cb_mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&z->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (z->hosts == NULL || z->root == NULL) {
        zkst_close(&z->base);
        return -ENOMEM;
    }
    pthread_rwlock_wrlock(&z->hlock);
    handle_open(z, NULL);
    bool have = z->zh != NULL;
    pthread_rwlock_unlock(&z->hlock);
    if (!have) {
        zkst_close(&z->base);
        return -EINVAL;
    }
    int rc = make_layout(z); /* waits for the first connection */
    if (rc == 0) {
        if (pthread_create(&z->keeper, NULL, keeper_main, z) == 0)
            z->keeper_started = true;
        else
            rc = -EAGAIN;
    }
    if (rc < 0) {
        XT_ERR("r2_store_zk: open %s%s: %s", z->hosts, z->root, strerror(-rc));
        zkst_close(&z->base);
        return rc;
    }
    *out = &z->base;
    return 0;
}
