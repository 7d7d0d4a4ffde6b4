/*
 * r2_zk_keeper.c -- the background side of the ZooKeeper store: the session
 * watcher, the keeper thread that replaces expired sessions and re-creates
 * ephemerals, the election (lowest ephemeral sequential node under
 * <root>/election leads; the others watch their predecessor), and the
 * persistent watches built on ZooKeeper's one-shot ones. Invariants: r2_zk_i.h.
 */
#include "r2_zk_i.h"

#include "xt_common.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zookeeper/proto.h>

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

int r2_zk_watch(r2_store *s, const char *key, r2_store_watch_fn fn, void *arg)
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
    r2_zk_kick(z); /* the keeper arms it */
    pthread_mutex_unlock(&z->mu);
    return w->id;
}

void r2_zk_unwatch(r2_store *s, int id)
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
        r2_zk_data_path(z, w->key, path);
        uint64_t dl = xt_deadline_ms(z->call_ms);
        int rc = r2_zk_exists(z, path, watch_event, w, dl, NULL);
        if (rc == 0 || rc == -ENOENT) {
            int crc = 0;
            /* A child watch also needs the node; a missing node's creation
             * fires the exists watch, and we re-arm then. */
            if (rc == 0) {
                int err;
                struct zk_call *c;
                zhandle_t *zh = r2_zk_call_start(z, dl, &c, &err);
                crc = err;
                if (zh != NULL) {
                    int zrc = zoo_awget_children(zh, path, watch_event, w,
                                                 r2_zk_done_strings, c);
                    if (r2_zk_call_wait(z, c, zrc, dl, &crc))
                        r2_zk_call_unref(c);
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
        assert(xt_mutex_held(&z->cb_mu)); /* invariant (6) */
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
    r2_zk_kick(z);
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
                      uint64_t dl)
{
    char path[ZK_PATH_MAX];
    snprintf(path, sizeof path, "%s/election", z->root);
    int rc = r2_zk_children(z, path, dl, names, count);
    if (rc == 0 && *count > 1)
        qsort(*names, *count, sizeof(char *), cmp_nodes);
    return rc;
}

/* Keeper: one round of the election recipe. Returns 0 when settled (a
 * leader, or a watch on the predecessor), or -errno to retry later. */
static int elect_round(zk_store *z)
{
    uint64_t dl = xt_deadline_ms(z->call_ms);
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
    int rc = elect_list(z, &names, &count, dl);
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
                rc = r2_zk_delete(z, path, -1, dl);
                if (rc == -ENOENT)
                    rc = 0;
            }
            break;
        }
        if (mine[0] == '\0') {
            char path[ZK_PATH_MAX];
            snprintf(path, sizeof path, "%s/election/%s", z->root, prefix);
            rc = r2_zk_create(z, path, id, id_len, ZOO_EPHEMERAL_SEQUENTIAL, dl, NULL);
            r2_store_names_free(names, count);
            names = NULL;
            count = 0;
            if (rc == 0)
                rc = elect_list(z, &names, &count, dl);
            continue;
        }
        size_t me = 0;
        while (strcmp(names[me], mine) != 0)
            me++;
        bool lead = me == 0;
        if (!lead) {
            char path[ZK_PATH_MAX];
            snprintf(path, sizeof path, "%s/election/%s", z->root, names[me - 1]);
            rc = r2_zk_exists(z, path, elect_event, z, dl, NULL);
            if (rc == -ENOENT) {
                /* The predecessor left meanwhile: look again. */
                r2_store_names_free(names, count);
                names = NULL;
                count = 0;
                rc = elect_list(z, &names, &count, dl);
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

int r2_zk_elect(r2_store *s, const void *id, size_t id_len,
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
    r2_zk_kick(z);
    pthread_mutex_unlock(&z->mu);
    return 0;
}

int r2_zk_resign(r2_store *s)
{
    zk_store *z = (zk_store *)s;
    pthread_mutex_lock(&z->mu);
    z->joined = false;
    z->leader = false;
    z->need_elect = true; /* the keeper deletes our node */
    r2_zk_kick(z);
    pthread_mutex_unlock(&z->mu);
    return 0;
}

bool r2_zk_is_leader(r2_store *s)
{
    zk_store *z = (zk_store *)s;
    pthread_mutex_lock(&z->mu);
    bool v = z->leader && z->connected;
    pthread_mutex_unlock(&z->mu);
    return v;
}

int r2_zk_leader(r2_store *s, void **id, size_t *len)
{
    zk_store *z = (zk_store *)s;
    uint64_t dl = xt_deadline_ms(z->call_ms);
    for (int tries = 0; tries < ZK_RETRIES; tries++) {
        char **names = NULL;
        size_t count = 0;
        int rc = elect_list(z, &names, &count, dl);
        if (rc < 0)
            return rc;
        if (count == 0) {
            r2_store_names_free(names, count);
            return -ENOENT;
        }
        char path[ZK_PATH_MAX];
        snprintf(path, sizeof path, "%s/election/%s", z->root, names[0]);
        r2_store_names_free(names, count);
        rc = r2_zk_get(z, path, dl, id, len, NULL);
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
    assert(xt_mutex_held(&z->cb_mu) && !xt_mutex_held(&z->mu)); /* invariant (6) */
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
        r2_zk_kick(z);
    }
    pthread_mutex_unlock(&z->mu);
}

/* Creates a client handle for the current generation. REQUIRES: hlock
 * held for writing. A NULL z->zh (hosts unusable) is retried by the keeper. */
void r2_zk_handle_open(zk_store *z, const clientid_t *cid)
{
    assert(xt_rwlock_wrheld(&z->hlock));
    assert(z->zh == NULL); /* the previous handle was closed first */
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
                            r2_zk_log_cb);
    if (z->zh == NULL) {
        XT_ERR("r2_store_zk: cannot create a ZooKeeper handle for %s: %s",
               z->hosts, strerror(errno));
        xt_free(h);
        return;
    }
    z->hctx = h;
}

/* REQUIRES: hlock held for writing. */
void r2_zk_handle_close(zk_store *z)
{
    assert(xt_rwlock_wrheld(&z->hlock));
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
    r2_zk_handle_close(z);
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
    r2_zk_handle_open(z, NULL);
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
        uint64_t dl;
        int rc = -ENOMEM;
        if (key != NULL && val != NULL) {
            r2_zk_data_path(z, key, path);
            dl = xt_deadline_ms(z->call_ms);
            rc = r2_zk_create(z, path, val, len, ZOO_EPHEMERAL, dl, NULL);
            if (rc == -ENOENT) {
                rc = r2_zk_make_parents(z, path, dl);
                if (rc == 0)
                    rc = r2_zk_create(z, path, val, len, ZOO_EPHEMERAL, dl, NULL);
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

void r2_zk_kick(zk_store *z)
{
    assert(xt_mutex_held(&z->mu));
    pthread_cond_broadcast(&z->cv);
    if (z->keeper)
        xt_worker_wake(z->keeper);
}

uint64_t r2_zk_keeper_step(xt_worker *wk, void *arg)
{
    zk_store *z = arg;
    (void)wk;
    pthread_mutex_lock(&z->mu);
    if (z->expired) {
        pthread_mutex_unlock(&z->mu);
        replace_session(z);
        return 0;
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
    pthread_mutex_unlock(&z->mu);
    return retry ? 200 : work ? 0 : 1000;
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
                                       0, r2_zk_log_cb);
    if (other == NULL)
        return -errno;
    int rc = -ETIMEDOUT;
    for (int i = 0; i < z->call_ms / 10; i++) {
        if (zoo_state(other) == ZOO_CONNECTED_STATE) {
            rc = 0;
            break;
        }
        xt_sleep_ms(10);
    }
    zookeeper_close(other); /* closes the shared session on the server */
    return rc;
}
