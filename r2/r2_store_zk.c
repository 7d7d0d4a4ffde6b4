/*
 * r2_store_zk.c -- the R2 state store in ZooKeeper: records, the multi-op,
 * open and close. A put is a set (with the expected version) falling back
 * to a create whose missing ancestors are created first; a multi is planned
 * into ZooKeeper ops (ancestors become creates, R2_VER_ANY becomes set or
 * create after a lookup) and retried when a planned guess lost a race.
 * Design, threads and invariants: r2_zk_i.h.
 */
#include "r2_zk_i.h"

#include "xt_common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zookeeper/proto.h>

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
    r2_zk_data_path(z, key, path);
    uint64_t dl = xt_deadline_ms(z->call_ms);
    return r2_zk_get(z, path, dl, val, len, version);
}

static int zkst_put(r2_store *s, const char *key, const void *val, size_t len,
                    int64_t expected, unsigned flags, int64_t *new_version)
{
    zk_store *z = (zk_store *)s;
    char path[ZK_PATH_MAX];
    r2_zk_data_path(z, key, path);
    uint64_t dl = xt_deadline_ms(z->call_ms);
    if (expected > INT32_MAX)
        return -ESTALE; /* ZooKeeper versions are 32-bit */
    bool eph = (flags & R2_PUT_EPHEMERAL) != 0;
    int64_t ver = 0;
    for (int tries = 0; tries < ZK_RETRIES; tries++) {
        int rc;
        if (expected != R2_VER_CREATE) {
            rc = r2_zk_set(z, path, val, len, expected >= 0 ? (int)expected : -1,
                        dl, &ver);
            if (rc == 0) {
                eph_note(z, key, val, len, false);
                if (new_version != NULL)
                    *new_version = ver;
                return 0;
            }
            if (rc != -ENOENT || expected >= 0)
                return rc;
        }
        rc = r2_zk_create(z, path, val, len, eph ? ZOO_EPHEMERAL : ZOO_PERSISTENT,
                       dl, NULL);
        if (rc == -ENOENT) {
            rc = r2_zk_make_parents(z, path, dl);
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
    r2_zk_data_path(z, key, path);
    uint64_t dl = xt_deadline_ms(z->call_ms);
    if (expected > INT32_MAX)
        return -ESTALE;
    int rc = r2_zk_delete(z, path, expected >= 0 ? (int)expected : -1, dl);
    if (rc == 0)
        eph_forget(z, key);
    return rc;
}

static int zkst_list(r2_store *s, const char *dir, char ***names, size_t *count)
{
    zk_store *z = (zk_store *)s;
    char path[ZK_PATH_MAX];
    r2_zk_data_path(z, dir, path);
    uint64_t dl = xt_deadline_ms(z->call_ms);
    return r2_zk_children(z, path, dl, names, count);
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
                       uint64_t dl)
{
    struct plan_ent *e = plan_find(p, path);
    if (e != NULL)
        return e->exists;
    int rc = r2_zk_exists(z, path, NULL, NULL, dl, NULL);
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
                   struct zmulti *m, uint64_t dl, size_t *failed)
{
    struct plan p = { 0 };
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const r2_store_op *op = &ops[i];
        char path[ZK_PATH_MAX];
        r2_zk_data_path(z, op->key, path);
        *failed = i;
        if (op->expected > INT32_MAX) {
            rc = -ESTALE;
            break;
        }
        int ver = op->expected >= 0 ? (int)op->expected : -1;
        if (op->type == R2_OP_CHECK) {
            rc = zm_add(m, i, path, false);
            if (rc >= 0) {
                zoo_check_op_init(&m->ops[rc], NULL, ver);
                rc = 0;
            }
            continue;
        }
        if (op->type == R2_OP_DELETE) {
            rc = zm_add(m, i, path, false);
            if (rc >= 0) {
                zoo_delete_op_init(&m->ops[rc], NULL, ver);
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
                zoo_set_op_init(&m->ops[rc], NULL, op->len ? op->val : NULL,
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
                    zoo_create_op_init(&m->ops[rc], NULL, NULL, -1,
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
            zoo_create_op_init(&m->ops[rc], NULL, op->len ? op->val : NULL,
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
                  int64_t *new_versions, size_t *failed, uint64_t dl)
{
    struct zmulti m = { 0 };
    int err = zm_plan(z, ops, n, &m, dl, failed);
    if (err < 0) {
        zm_free(&m);
        return err;
    }
    struct zk_call *c;
    zhandle_t *zh = r2_zk_call_start(z, dl, &c, &err);
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
        r2_zk_call_unref(c);
        r2_zk_call_unref(c);
        zm_free(&m);
        return -ENOMEM;
    }
    for (size_t k = 0; k < m.n; k++) {
        /* Paths are pointed at only now: m.paths moved while it grew. */
        switch (m.ops[k].type) {
        case ZOO_CREATE_OP: m.ops[k].create_op.path = m.paths[k]; break;
        case ZOO_DELETE_OP: m.ops[k].delete_op.path = m.paths[k]; break;
        case ZOO_SETDATA_OP: m.ops[k].set_op.path = m.paths[k]; break;
        default: m.ops[k].check_op.path = m.paths[k]; break;
        }
        if (m.ops[k].type == ZOO_SETDATA_OP) {
            m.ops[k].set_op.stat = &c->stats[k];
        } else if (m.ops[k].type == ZOO_CREATE_OP) {
            m.ops[k].create_op.buf = c->cpaths[k];
            m.ops[k].create_op.buflen = ZK_PATH_MAX;
        }
    }
    int zrc = zoo_amulti(zh, (int)m.n, m.ops, c->res, r2_zk_done_void, c);
    int result = 0;
    if (r2_zk_call_wait(z, c, zrc, dl, &err)) {
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
                result = r2_zk_errno(e);
                if (m.planned[k] && (e == ZNONODE || e == ZNODEEXISTS))
                    result = 1;
                break;
            }
        }
        r2_zk_call_unref(c);
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
    uint64_t dl = xt_deadline_ms(z->call_ms);
    int64_t local[R2_STORE_MULTI_MAX];
    /* new versions are needed to tell a created ephemeral from an update */
    int64_t *nv = new_versions != NULL ? new_versions : local;
    for (int tries = 0; tries < ZK_RETRIES; tries++) {
        int rc = zm_try(z, ops, n, nv, failed, dl);
        if (rc <= 0)
            return rc;
    }
    return -EAGAIN;
}

static void zkst_close(r2_store *s)
{
    zk_store *z = (zk_store *)s;
    pthread_mutex_lock(&z->mu);
    z->stopping = true;
    pthread_cond_broadcast(&z->cv);
    xt_worker *keeper = z->keeper; /* taken out under mu: r2_zk_kick sees NULL */
    z->keeper = NULL;
    pthread_mutex_unlock(&z->mu);
    xt_worker_stop(keeper);
    pthread_rwlock_wrlock(&z->hlock);
    r2_zk_handle_close(z); /* the server deletes our ephemerals and election node */
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
    .watch = r2_zk_watch,
    .unwatch = r2_zk_unwatch,
    .elect = r2_zk_elect,
    .resign = r2_zk_resign,
    .is_leader = r2_zk_is_leader,
    .leader = r2_zk_leader,
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
    uint64_t dl = xt_deadline_ms(z->call_ms);
    char path[ZK_PATH_MAX];
    snprintf(path, sizeof path, "%s/election", z->root);
    for (char *p = path + 1;; p++) {
        p = strchr(p, '/');
        if (p != NULL)
            *p = '\0';
        int rc = r2_zk_create(z, path, NULL, 0, ZOO_PERSISTENT, dl, NULL);
        if (rc < 0 && rc != -EEXIST)
            return rc;
        if (p == NULL)
            break;
        *p = '/';
    }
    snprintf(path, sizeof path, "%s/data", z->root);
    int rc = r2_zk_create(z, path, NULL, 0, ZOO_PERSISTENT, dl, NULL);
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
    xt_cond_init_mono(&z->cv);
    if (z->hosts == NULL || z->root == NULL) {
        zkst_close(&z->base);
        return -ENOMEM;
    }
    pthread_rwlock_wrlock(&z->hlock);
    r2_zk_handle_open(z, NULL);
    bool have = z->zh != NULL;
    pthread_rwlock_unlock(&z->hlock);
    if (!have) {
        zkst_close(&z->base);
        return -EINVAL;
    }
    int rc = make_layout(z); /* waits for the first connection */
    if (rc == 0) {
        struct xt_worker_opts wo = { .name = "r2-zk-keeper", .step = r2_zk_keeper_step,
                                     .arg = z };
        xt_worker *w = NULL;
        rc = xt_worker_start(&wo, &w);
        pthread_mutex_lock(&z->mu);
        z->keeper = w;
        pthread_mutex_unlock(&z->mu);
    }
    if (rc < 0) {
        XT_ERR("r2_store_zk: open %s%s: %s", z->hosts, z->root, strerror(-rc));
        zkst_close(&z->base);
        return rc;
    }
    *out = &z->base;
    return 0;
}
