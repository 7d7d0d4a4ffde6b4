/*
 * r2_zk_call.c -- requests to ZooKeeper that never block past a deadline:
 * each is submitted with the asynchronous API and waited for on a condition
 * variable; a context abandoned at the deadline is freed by its completion
 * (r2_zk_i.h, invariant 1). On top: the synchronous one-path primitives the
 * rest of the backend uses.
 */
#include "r2_zk_i.h"

#include "xt_common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zookeeper/proto.h>

/* ---- time and errors -------------------------------------------------- */

int r2_zk_errno(int rc)
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

void r2_zk_log_cb(const char *message)
{
    XT_DBG("zookeeper: %s", message);
}

/* ---- calls: one asynchronous request waited for with a deadline ---------- */


static struct zk_call *call_new(void)
{
    struct zk_call *c = xt_calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    xt_cond_init_mono(&c->cv);
    pthread_mutex_init(&c->mu, NULL);
    c->refs = 2;
    return c;
}

void r2_zk_call_unref(struct zk_call *c)
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
    r2_zk_call_unref(c);
}

void r2_zk_done_void(int rc, const void *data)
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

void r2_zk_done_strings(int rc, const struct String_vector *sv, const void *data)
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
 * with *err = -ENOTCONN / -ENOMEM. REQUIRES: r2_zk_call_wait follows a non-NULL
 * return (it releases hlock). */
zhandle_t *r2_zk_call_start(zk_store *z, uint64_t deadline,
                             struct zk_call **cp, int *err)
{
    pthread_mutex_lock(&z->mu);
    while (!z->connected && !z->stopping) {
        if (xt_cond_wait_until(&z->cv, &z->mu, deadline) != 0)
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
        r2_zk_call_unref(*cp);
        r2_zk_call_unref(*cp);
        *err = -ENOTCONN;
        return NULL;
    }
    return z->zh;
}

/* Releases hlock and waits for the answer to the request that zoo_a*
 * submitted with result zrc. *err = 0 or -errno. Returns true if the
 * caller still holds its reference to c (read results, then r2_zk_call_unref),
 * false if c is no longer the caller's (not submitted, or timed out). */
bool r2_zk_call_wait(zk_store *z, struct zk_call *c, int zrc,
                      uint64_t deadline, int *err)
{
    pthread_rwlock_unlock(&z->hlock);
    if (zrc != ZOK) {
        /* Not submitted: the completion will never run. */
        r2_zk_call_unref(c);
        r2_zk_call_unref(c);
        *err = r2_zk_errno(zrc);
        return false;
    }
    pthread_mutex_lock(&c->mu);
    while (!c->done) {
        if (xt_cond_wait_until(&c->cv, &c->mu, deadline) != 0)
            break;
    }
    bool done = c->done;
    pthread_mutex_unlock(&c->mu);
    if (!done) {
        r2_zk_call_unref(c);
        *err = -ETIMEDOUT;
        return false;
    }
    *err = r2_zk_errno(c->rc);
    return true;
}

/* ---- paths ---------------------------------------------------------------- */

/* <root>/data<key>, "/" mapping to <root>/data. */
void r2_zk_data_path(const zk_store *z, const char *key, char *buf)
{
    snprintf(buf, ZK_PATH_MAX, "%s/data%s", z->root, key[1] == '\0' ? "" : key);
}

/* ---- synchronous primitives on one path: 0 or -errno ----------------------- */

int r2_zk_create(zk_store *z, const char *path, const void *val, size_t len,
                     int mode, uint64_t dl, char **created)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = r2_zk_call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_acreate(zh, path, len ? val : NULL, len ? (int)len : -1,
                          &ZOO_OPEN_ACL_UNSAFE, mode, done_string, c);
    if (r2_zk_call_wait(z, c, zrc, dl, &err)) {
        if (err == 0 && created != NULL) {
            *created = c->path;
            c->path = NULL;
        }
        r2_zk_call_unref(c);
    }
    return err;
}

int r2_zk_set(zk_store *z, const char *path, const void *val, size_t len,
                  int version, uint64_t dl, int64_t *new_version)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = r2_zk_call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_aset(zh, path, len ? val : NULL, len ? (int)len : -1, version,
                       done_stat, c);
    if (r2_zk_call_wait(z, c, zrc, dl, &err)) {
        if (err == 0 && new_version != NULL)
            *new_version = c->stat.version;
        r2_zk_call_unref(c);
    }
    return err;
}

int r2_zk_get(zk_store *z, const char *path, uint64_t dl,
                  void **val, size_t *len, int64_t *version)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = r2_zk_call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_aget(zh, path, 0, done_data, c);
    if (r2_zk_call_wait(z, c, zrc, dl, &err)) {
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
        r2_zk_call_unref(c);
    }
    return err;
}

int r2_zk_children(zk_store *z, const char *path, uint64_t dl,
                       char ***names, size_t *count)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = r2_zk_call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_aget_children(zh, path, 0, r2_zk_done_strings, c);
    if (r2_zk_call_wait(z, c, zrc, dl, &err)) {
        if (err == 0) {
            *names = c->names;
            *count = (size_t)c->nnames;
            c->names = NULL;
            c->nnames = 0;
        }
        r2_zk_call_unref(c);
    }
    return err;
}

/* Whether path exists, optionally leaving watcher w on it: 0, -ENOENT or
 * -errno; *version (if not NULL) gets its data version. */
int r2_zk_exists(zk_store *z, const char *path, watcher_fn w, void *wctx,
                     uint64_t dl, int64_t *version)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = r2_zk_call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = w != NULL ? zoo_awexists(zh, path, w, wctx, done_stat, c)
                        : zoo_aexists(zh, path, 0, done_stat, c);
    if (r2_zk_call_wait(z, c, zrc, dl, &err)) {
        if (err == 0 && version != NULL)
            *version = c->stat.version;
        r2_zk_call_unref(c);
    }
    return err;
}

int r2_zk_delete(zk_store *z, const char *path, int version,
                     uint64_t dl)
{
    int err;
    struct zk_call *c;
    zhandle_t *zh = r2_zk_call_start(z, dl, &c, &err);
    if (zh == NULL)
        return err;
    int zrc = zoo_adelete(zh, path, version, r2_zk_done_void, c);
    if (r2_zk_call_wait(z, c, zrc, dl, &err))
        r2_zk_call_unref(c);
    return err;
}

/* Creates the missing ancestors of path below <root>/data as persistent
 * empty znodes. Returns 0, -ENOTDIR (an ancestor is ephemeral) or -errno. */
int r2_zk_make_parents(zk_store *z, const char *path, uint64_t dl)
{
    char buf[ZK_PATH_MAX];
    size_t base = strlen(z->root) + 5; /* "<root>/data" */
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + base + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        int rc = r2_zk_create(z, buf, NULL, 0, ZOO_PERSISTENT, dl, NULL);
        *p = '/';
        if (rc < 0 && rc != -EEXIST)
            return rc;
    }
    return 0;
}
