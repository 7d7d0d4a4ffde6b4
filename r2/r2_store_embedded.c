/*
 * r2_store_embedded.c -- the R2 state store on LevelDB in one folder.
 *
 * Every mutating call runs as a small transaction: the ops are checked and
 * applied, in order, to an in-memory overlay of pending records that sits
 * on top of the database (so a later op of a multi sees an earlier one, as
 * in ZooKeeper's multi), and the overlay is then written as one synced
 * LevelDB write batch. A failed op discards the overlay: nothing is written.
 *
 * Invariants:
 *  (1) All reads and writes of the database happen under e->mu, so a
 *      transaction's checks and its batch are atomic with respect to every
 *      other call of this store; LevelDB's own LOCK file keeps other
 *      processes out of the folder.
 *  (2) The tree rule of r2_store.h (3) holds in the database after every
 *      batch: a record's ancestors exist, ephemerals have no children.
 *  (3) Ephemeral records exist only while the session that wrote them is
 *      open: close deletes them, and open deletes those a crashed session
 *      left.
 *  (4) Callbacks (watches, leadership) run with e->cb_mu held and e->mu not
 *      held; cb_mu is recursive so a callback may call the store again.
 *      Lock order: cb_mu before mu.
 *  (5) A failed write (a full disk) closes the database and opens it again:
 *      LevelDB refuses every write after one failed until it is reopened,
 *      so without this R2 could never write its state again once space is
 *      back. Until an open succeeds e->db is NULL and every call answers
 *      -EIO (reads included); each call tries the open again.
 */
#include "r2_store_embedded.h"

#include "r2_store_i.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_ldb.h"

#include <assert.h>
#include <leveldb/c.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct emb_watch {
    int id;
    char *key;
    r2_store_watch_fn fn;
    void *arg;
};

typedef struct emb_store {
    struct r2_store base;
    pthread_mutex_t mu;       /* invariant (1) */
    pthread_mutex_t cb_mu;    /* invariant (4); recursive */
    leveldb_t *db;            /* protected by mu; NULL after a failed reopen (5) */
    char *dir;                /* the folder, for opening again (5) */
    uint64_t reopen_said_ns;  /* last "opening again" failure logged (mu) */
    leveldb_options_t *opt;
    leveldb_readoptions_t *ropt;
    leveldb_writeoptions_t *wopt;
    struct emb_watch *watches; /* protected by mu */
    size_t nwatches;           /* protected by mu */
    int next_watch_id;         /* protected by mu */
    bool elected;              /* protected by mu */
    void *leader_id;           /* protected by mu */
    size_t leader_id_len;      /* protected by mu */
    r2_store_leader_fn leader_fn; /* protected by mu */
    void *leader_arg;             /* protected by mu */
} emb_store;

/* One pending record of a transaction. val is borrowed from the caller's
 * arguments and must stay valid until commit. */
struct emb_pending {
    char *key;
    bool present;
    uint64_t version;
    uint8_t flags;
    const void *val;
    size_t len;
};

struct emb_txn {
    struct emb_pending *ent;
    size_t n, cap;
};

/* ---- record codec ------------------------------------------------------ */

static uint32_t rec_checksum(const char *key, const uint8_t *rec, size_t len)
{
    uint64_t seed = xt_hash_bytes(key, strlen(key), 0);
    return (uint32_t)xt_hash_bytes(rec + R2_EMB_OFF_VER, len - R2_EMB_OFF_VER, seed);
}

/* Encodes into a fresh buffer of R2_EMB_HDR + len bytes (xt_free). */
static uint8_t *rec_encode(const char *key, uint64_t version, uint8_t flags,
                           const void *val, size_t len)
{
    uint8_t *rec = xt_malloc(R2_EMB_HDR + len);
    if (rec == NULL)
        return NULL;
    rec[0] = R2_EMB_FORMAT;
    rec[R2_EMB_OFF_FLAGS] = flags;
    xt_put_u16(rec + R2_EMB_OFF_RSVD, 0);
    xt_put_u64(rec + R2_EMB_OFF_VER, version);
    if (len > 0)
        memcpy(rec + R2_EMB_HDR, val, len);
    xt_put_u32(rec + R2_EMB_OFF_CSUM, rec_checksum(key, rec, R2_EMB_HDR + len));
    return rec;
}

/* Checks a stored record; 0 or -EIO (logged). */
static int rec_check(const char *key, const uint8_t *rec, size_t len)
{
    const char *why = NULL;
    if (len < R2_EMB_HDR)
        why = "short";
    else if (rec[0] != R2_EMB_FORMAT)
        why = "unknown format";
    else if ((rec[R2_EMB_OFF_FLAGS] & ~R2_EMB_EPHEMERAL) != 0 ||
             xt_get_u16(rec + R2_EMB_OFF_RSVD) != 0)
        why = "bad flags";
    else if (len - R2_EMB_HDR > R2_STORE_VALUE_MAX)
        why = "too long";
    else if (xt_get_u32(rec + R2_EMB_OFF_CSUM) != rec_checksum(key, rec, len))
        why = "checksum mismatch";
    if (why == NULL)
        return 0;
    XT_ERR("r2_store_embedded: corrupt record %s (%zu bytes): %s", key, len, why);
    return -EIO;
}

/* ---- database access (REQUIRES: e->mu held) ------------------------------ */

/* Invariant (5): the database, opened again if a failed write closed it;
 * NULL (logged) when it cannot be opened yet. REQUIRES: e->mu held. */
static leveldb_t *db_handle(emb_store *e)
{
    assert(xt_mutex_held(&e->mu)); /* invariant (1) */
    if (e->db == NULL) {
        char *err = NULL;
        leveldb_t *db = leveldb_open(e->opt, e->dir, &err);
        if (err != NULL) {
            uint64_t now = xt_mono_ns(); /* each call tries: say it once a minute */
            if (!e->reopen_said_ns || now - e->reopen_said_ns >= UINT64_C(60) * 1000000000u) {
                XT_ERR("r2_store_embedded: opening %s again: %s", e->dir, err);
                e->reopen_said_ns = now;
            }
            leveldb_free(err);
            return NULL;
        }
        e->reopen_said_ns = 0;
        XT_INFO("r2_store_embedded: %s opened again: writes resume", e->dir);
        e->db = db;
    }
    return e->db;
}

/* Reads key from the database. *rec is LevelDB's buffer (leveldb_free) or
 * NULL when absent. Returns 0 (present or absent), -EIO. */
static int db_read(emb_store *e, const char *key, char **rec, size_t *len)
{
    *rec = NULL;
    if (db_handle(e) == NULL)
        return -EIO;
    char *err = NULL;
    *rec = leveldb_get(e->db, e->ropt, key, strlen(key), len, &err);
    if (err != NULL) {
        XT_ERR("r2_store_embedded: get %s: %s", key, err);
        leveldb_free(err);
        return -EIO;
    }
    if (*rec != NULL) {
        int rc = rec_check(key, (const uint8_t *)*rec, *len);
        if (rc < 0) {
            leveldb_free(*rec);
            *rec = NULL;
            return rc;
        }
    }
    return 0;
}

static struct emb_pending *txn_find(struct emb_txn *t, const char *key)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->ent[i].key, key) == 0)
            return &t->ent[i];
    return NULL;
}

/* The record at key as the transaction sees it: 1 present (version and
 * flags set), 0 absent, or -errno. */
static int txn_lookup(emb_store *e, struct emb_txn *t, const char *key,
                      uint64_t *version, uint8_t *flags)
{
    struct emb_pending *p = txn_find(t, key);
    if (p != NULL) {
        *version = p->version;
        *flags = p->flags;
        return p->present ? 1 : 0;
    }
    char *rec;
    size_t len;
    int rc = db_read(e, key, &rec, &len);
    if (rc < 0 || rec == NULL)
        return rc;
    *version = xt_get_u64((const uint8_t *)rec + R2_EMB_OFF_VER);
    *flags = (uint8_t)rec[R2_EMB_OFF_FLAGS];
    leveldb_free(rec);
    return 1;
}

/* The key prefix of the children of dir: "dir/" ("/" for the root), in buf
 * of at least strlen(dir) + 2 bytes; returns its length. */
static size_t child_prefix(const char *dir, char *buf)
{
    size_t n = strlen(dir);
    if (n == 1) {
        buf[0] = '/';
        buf[1] = '\0';
        return 1;
    }
    memcpy(buf, dir, n);
    buf[n] = '/';
    buf[n + 1] = '\0';
    return n + 1;
}

/* Whether key has a child, as the transaction sees it: 1, 0, -errno. */
static int txn_has_children(emb_store *e, struct emb_txn *t, const char *key)
{
    char prefix[R2_STORE_KEY_MAX + 2];
    assert(strlen(key) <= R2_STORE_KEY_MAX); /* checked by r2_store_key_valid */
    size_t plen = child_prefix(key, prefix);
    for (size_t i = 0; i < t->n; i++)
        if (t->ent[i].present && strncmp(t->ent[i].key, prefix, plen) == 0)
            return 1;
    int found = 0;
    if (db_handle(e) == NULL)
        return -EIO;
    leveldb_iterator_t *it = leveldb_create_iterator(e->db, e->ropt);
    for (leveldb_iter_seek(it, prefix, plen); !found && leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t klen;
        const char *k = leveldb_iter_key(it, &klen);
        if (klen < plen || memcmp(k, prefix, plen) != 0 || klen > R2_STORE_KEY_MAX)
            break;
        char name[R2_STORE_KEY_MAX + 1];
        memcpy(name, k, klen);
        name[klen] = '\0';
        struct emb_pending *p = txn_find(t, name);
        if (p == NULL || p->present)
            found = 1;
    }
    leveldb_iter_destroy(it);
    return found;
}

/* Adds or replaces the pending record of key. */
static int txn_set(struct emb_txn *t, const char *key, bool present,
                   uint64_t version, uint8_t flags, const void *val, size_t len)
{
    struct emb_pending *p = txn_find(t, key);
    if (p == NULL) {
        if (t->n == t->cap) {
            size_t cap = t->cap ? 2 * t->cap : 8;
            struct emb_pending *ent = xt_realloc(t->ent, cap * sizeof *ent);
            if (ent == NULL)
                return -ENOMEM;
            t->ent = ent;
            t->cap = cap;
        }
        char *k = xt_strdup(key);
        if (k == NULL)
            return -ENOMEM;
        p = &t->ent[t->n++];
        p->key = k;
    }
    p->present = present;
    p->version = version;
    p->flags = flags;
    p->val = val;
    p->len = len;
    return 0;
}

static void txn_free(struct emb_txn *t)
{
    for (size_t i = 0; i < t->n; i++)
        xt_free(t->ent[i].key);
    xt_free(t->ent);
}

/* Creates the missing ancestors of key (persistent, empty, version 0). */
static int txn_make_parents(emb_store *e, struct emb_txn *t, const char *key)
{
    char parent[R2_STORE_KEY_MAX + 1];
    r2_store_key_parent(key, parent);
    if (parent[1] == '\0')
        return 0;
    uint64_t ver;
    uint8_t flags;
    int rc = txn_lookup(e, t, parent, &ver, &flags);
    if (rc < 0)
        return rc;
    if (rc == 1)
        return (flags & R2_EMB_EPHEMERAL) ? -ENOTDIR : 0;
    rc = txn_make_parents(e, t, parent);
    if (rc < 0)
        return rc;
    return txn_set(t, parent, true, 0, 0, NULL, 0);
}

static int txn_put(emb_store *e, struct emb_txn *t, const char *key,
                   const void *val, size_t len, int64_t expected,
                   unsigned flags, int64_t *new_version)
{
    uint64_t ver = 0;
    uint8_t rflags = 0;
    int rc = txn_lookup(e, t, key, &ver, &rflags);
    if (rc < 0)
        return rc;
    if (rc == 1) {
        if (expected == R2_VER_CREATE)
            return -EEXIST;
        if (expected >= 0 && (uint64_t)expected != ver)
            return -ESTALE;
        ver++;
    } else {
        if (expected >= 0)
            return -ENOENT;
        rc = txn_make_parents(e, t, key);
        if (rc < 0)
            return rc;
        ver = 0;
        rflags = (flags & R2_PUT_EPHEMERAL) ? R2_EMB_EPHEMERAL : 0;
    }
    rc = txn_set(t, key, true, ver, rflags, val, len);
    if (rc == 0 && new_version != NULL)
        *new_version = (int64_t)ver;
    return rc;
}

static int txn_check(emb_store *e, struct emb_txn *t, const char *key,
                     int64_t expected)
{
    uint64_t ver;
    uint8_t flags;
    int rc = txn_lookup(e, t, key, &ver, &flags);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return -ENOENT;
    return (expected >= 0 && (uint64_t)expected != ver) ? -ESTALE : 0;
}

static int txn_del(emb_store *e, struct emb_txn *t, const char *key,
                   int64_t expected)
{
    int rc = txn_check(e, t, key, expected);
    if (rc < 0)
        return rc;
    rc = txn_has_children(e, t, key);
    if (rc != 0)
        return rc < 0 ? rc : -ENOTEMPTY;
    return txn_set(t, key, false, 0, 0, NULL, 0);
}

/* Writes the overlay as one synced batch. */
static int txn_commit(emb_store *e, struct emb_txn *t)
{
    assert(xt_mutex_held(&e->mu)); /* invariant (1) */
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    int rc = 0;
    for (size_t i = 0; i < t->n && rc == 0; i++) {
        struct emb_pending *p = &t->ent[i];
        if (!p->present) {
            leveldb_writebatch_delete(wb, p->key, strlen(p->key));
            continue;
        }
        uint8_t *rec = rec_encode(p->key, p->version, p->flags, p->val, p->len);
        if (rec == NULL) {
            rc = -ENOMEM;
            break;
        }
        leveldb_writebatch_put(wb, p->key, strlen(p->key), (const char *)rec,
                               R2_EMB_HDR + p->len);
        xt_free(rec);
    }
    if (rc == 0 && db_handle(e) == NULL)
        rc = -EIO;
    if (rc == 0) {
        char *err = NULL;
        leveldb_write(e->db, e->wopt, wb, &err);
        if (err != NULL) {
            XT_ERR("r2_store_embedded: write: %s; the database is opened again", err);
            rc = strstr(err, "No space left") ? -ENOSPC : -EIO;
            leveldb_free(err);
            leveldb_close(e->db); /* invariant (5) */
            e->db = NULL;
            (void)db_handle(e);
        }
    }
    leveldb_writebatch_destroy(wb);
    return rc;
}

/* ---- watches ---------------------------------------------------------- */

struct emb_fire {
    r2_store_watch_fn fn;
    void *arg;
    int id;
    char *key;
};

/* Runs the watches touched by the committed transaction t: a watch on a
 * changed key or on the parent of one. REQUIRES: e->mu not held. */
static void fire_watches(emb_store *e, const struct emb_txn *t)
{
    assert(!xt_mutex_held(&e->mu)); /* invariant (4): cb_mu before mu */
    pthread_mutex_lock(&e->cb_mu);
    pthread_mutex_lock(&e->mu);
    size_t nf = 0;
    struct emb_fire *f = e->nwatches ? xt_calloc(e->nwatches, sizeof *f) : NULL;
    for (size_t w = 0; f != NULL && w < e->nwatches; w++) {
        const char *wk = e->watches[w].key;
        bool hit = false;
        for (size_t i = 0; i < t->n && !hit; i++) {
            char parent[R2_STORE_KEY_MAX + 1];
            r2_store_key_parent(t->ent[i].key, parent);
            hit = strcmp(t->ent[i].key, wk) == 0 || strcmp(parent, wk) == 0;
        }
        if (hit) {
            f[nf].fn = e->watches[w].fn;
            f[nf].arg = e->watches[w].arg;
            f[nf].id = e->watches[w].id;
            f[nf].key = xt_strdup(wk);
            if (f[nf].key != NULL)
                nf++;
        }
    }
    pthread_mutex_unlock(&e->mu);
    for (size_t i = 0; i < nf; i++) {
        /* A callback may have removed a later watch: recheck it exists. */
        bool live = false;
        pthread_mutex_lock(&e->mu);
        for (size_t w = 0; w < e->nwatches && !live; w++)
            live = e->watches[w].id == f[i].id;
        pthread_mutex_unlock(&e->mu);
        assert(xt_mutex_held(&e->cb_mu) && !xt_mutex_held(&e->mu)); /* invariant (4) */
        if (live)
            f[i].fn(f[i].arg, f[i].key);
        xt_free(f[i].key);
    }
    xt_free(f);
    pthread_mutex_unlock(&e->cb_mu);
}

static int emb_watch(r2_store *s, const char *key, r2_store_watch_fn fn, void *arg)
{
    emb_store *e = (emb_store *)s;
    char *k = xt_strdup(key);
    if (k == NULL)
        return -ENOMEM;
    pthread_mutex_lock(&e->mu);
    struct emb_watch *w = xt_realloc(e->watches, (e->nwatches + 1) * sizeof *w);
    if (w == NULL) {
        pthread_mutex_unlock(&e->mu);
        xt_free(k);
        return -ENOMEM;
    }
    e->watches = w;
    int id = ++e->next_watch_id;
    w[e->nwatches++] = (struct emb_watch){ id, k, fn, arg };
    pthread_mutex_unlock(&e->mu);
    return id;
}

static void emb_unwatch(r2_store *s, int id)
{
    emb_store *e = (emb_store *)s;
    pthread_mutex_lock(&e->cb_mu); /* waits out a running callback */
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < e->nwatches; i++) {
        if (e->watches[i].id == id) {
            xt_free(e->watches[i].key);
            e->watches[i] = e->watches[--e->nwatches];
            break;
        }
    }
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_unlock(&e->cb_mu);
}

/* ---- ops ------------------------------------------------------------------ */

static int emb_get(r2_store *s, const char *key, void **val, size_t *len,
                   int64_t *version)
{
    emb_store *e = (emb_store *)s;
    char *rec;
    size_t rlen;
    pthread_mutex_lock(&e->mu);
    int rc = db_read(e, key, &rec, &rlen);
    pthread_mutex_unlock(&e->mu);
    if (rc < 0)
        return rc;
    if (rec == NULL)
        return -ENOENT;
    if (val != NULL) {
        *val = r2_store_dup_bytes(rec + R2_EMB_HDR, rlen - R2_EMB_HDR);
        if (*val == NULL) {
            leveldb_free(rec);
            return -ENOMEM;
        }
    }
    *len = rlen - R2_EMB_HDR;
    if (version != NULL)
        *version = (int64_t)xt_get_u64((const uint8_t *)rec + R2_EMB_OFF_VER);
    leveldb_free(rec);
    return 0;
}

/* Runs ops in one transaction; see r2_store_multi. */
static int emb_multi(r2_store *s, const r2_store_op *ops, size_t n,
                     int64_t *new_versions, size_t *failed)
{
    emb_store *e = (emb_store *)s;
    struct emb_txn t = { 0 };
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const r2_store_op *op = &ops[i];
        int64_t v = -1;
        if (op->type == R2_OP_PUT)
            rc = txn_put(e, &t, op->key, op->val, op->len, op->expected,
                         op->flags, &v);
        else if (op->type == R2_OP_DELETE)
            rc = txn_del(e, &t, op->key, op->expected);
        else
            rc = txn_check(e, &t, op->key, op->expected);
        if (rc < 0)
            *failed = i;
        else if (new_versions != NULL)
            new_versions[i] = v;
    }
    if (rc == 0)
        rc = txn_commit(e, &t);
    pthread_mutex_unlock(&e->mu);
    if (rc == 0)
        fire_watches(e, &t);
    txn_free(&t);
    return rc;
}

static int emb_put(r2_store *s, const char *key, const void *val, size_t len,
                   int64_t expected, unsigned flags, int64_t *new_version)
{
    r2_store_op op = { R2_OP_PUT, key, val, len, expected, flags };
    size_t failed;
    return emb_multi(s, &op, 1, new_version, &failed);
}

static int emb_del(r2_store *s, const char *key, int64_t expected)
{
    r2_store_op op = { R2_OP_DELETE, key, NULL, 0, expected, 0 };
    size_t failed;
    return emb_multi(s, &op, 1, NULL, &failed);
}

static int emb_list(r2_store *s, const char *dir, char ***names, size_t *count)
{
    emb_store *e = (emb_store *)s;
    char prefix[R2_STORE_KEY_MAX + 2];
    size_t plen = child_prefix(dir, prefix);
    size_t n = 0, cap = 0;
    char **v = NULL;
    int rc = 0;
    pthread_mutex_lock(&e->mu);
    if (dir[1] != '\0') {
        char *rec;
        size_t rlen;
        rc = db_read(e, dir, &rec, &rlen);
        if (rc == 0 && rec == NULL)
            rc = -ENOENT;
        if (rec != NULL)
            leveldb_free(rec);
    }
    if (rc == 0 && db_handle(e) == NULL)
        rc = -EIO;
    if (rc < 0) {
        pthread_mutex_unlock(&e->mu);
        return rc;
    }
    leveldb_iterator_t *it = leveldb_create_iterator(e->db, e->ropt);
    leveldb_iter_seek(it, prefix, plen);
    while (rc == 0 && leveldb_iter_valid(it)) {
        size_t klen;
        const char *k = leveldb_iter_key(it, &klen);
        if (klen <= plen || memcmp(k, prefix, plen) != 0)
            break;
        const char *c = k + plen;
        const char *slash = memchr(c, '/', klen - plen);
        size_t clen = slash ? (size_t)(slash - c) : klen - plen;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nv = xt_realloc(v, cap * sizeof *nv);
            if (nv == NULL) {
                rc = -ENOMEM;
                break;
            }
            v = nv;
        }
        v[n] = r2_store_dup_bytes(c, clen);
        if (v[n] == NULL) {
            rc = -ENOMEM;
            break;
        }
        n++;
        /* Skip the child's subtree: "<prefix><child>0" follows every
         * "<prefix><child>/..." since '0' == '/' + 1. */
        char next[R2_STORE_KEY_MAX + 2];
        memcpy(next, k, plen + clen);
        next[plen + clen] = '0';
        leveldb_iter_seek(it, next, plen + clen + 1);
    }
    leveldb_iter_destroy(it);
    pthread_mutex_unlock(&e->mu);
    if (rc < 0) {
        r2_store_names_free(v, n);
        return rc;
    }
    *names = v;
    *count = n;
    return 0;
}

/* ---- election: the only session of the folder always leads ------------- */

static int emb_elect(r2_store *s, const void *id, size_t id_len,
                     r2_store_leader_fn fn, void *arg)
{
    emb_store *e = (emb_store *)s;
    void *copy = r2_store_dup_bytes(id, id_len);
    if (copy == NULL)
        return -ENOMEM;
    pthread_mutex_lock(&e->cb_mu);
    pthread_mutex_lock(&e->mu);
    if (e->elected) {
        pthread_mutex_unlock(&e->mu);
        pthread_mutex_unlock(&e->cb_mu);
        xt_free(copy);
        return -EALREADY;
    }
    e->elected = true;
    e->leader_id = copy;
    e->leader_id_len = id_len;
    e->leader_fn = fn;
    e->leader_arg = arg;
    pthread_mutex_unlock(&e->mu);
    assert(xt_mutex_held(&e->cb_mu) && !xt_mutex_held(&e->mu)); /* invariant (4) */
    if (fn != NULL)
        fn(arg, true);
    pthread_mutex_unlock(&e->cb_mu);
    return 0;
}

static int emb_resign(r2_store *s)
{
    emb_store *e = (emb_store *)s;
    pthread_mutex_lock(&e->cb_mu);
    pthread_mutex_lock(&e->mu);
    bool was = e->elected;
    r2_store_leader_fn fn = e->leader_fn;
    void *arg = e->leader_arg;
    e->elected = false;
    xt_free(e->leader_id);
    e->leader_id = NULL;
    e->leader_fn = NULL;
    pthread_mutex_unlock(&e->mu);
    assert(xt_mutex_held(&e->cb_mu) && !xt_mutex_held(&e->mu)); /* invariant (4) */
    if (was && fn != NULL)
        fn(arg, false);
    pthread_mutex_unlock(&e->cb_mu);
    return 0;
}

static bool emb_is_leader(r2_store *s)
{
    emb_store *e = (emb_store *)s;
    pthread_mutex_lock(&e->mu);
    bool v = e->elected;
    pthread_mutex_unlock(&e->mu);
    return v;
}

static int emb_leader(r2_store *s, void **id, size_t *len)
{
    emb_store *e = (emb_store *)s;
    int rc = -ENOENT;
    pthread_mutex_lock(&e->mu);
    if (e->elected) {
        *id = r2_store_dup_bytes(e->leader_id, e->leader_id_len);
        *len = e->leader_id_len;
        rc = *id != NULL ? 0 : -ENOMEM;
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* ---- lifetime --------------------------------------------------------------- */

/* Deletes every ephemeral record (invariant 3). REQUIRES: e->mu held or
 * no other thread. */
static int purge_ephemerals(emb_store *e)
{
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    leveldb_iterator_t *it = leveldb_create_iterator(e->db, e->ropt);
    size_t purged = 0;
    int rc = 0;
    for (leveldb_iter_seek_to_first(it); leveldb_iter_valid(it); leveldb_iter_next(it)) {
        size_t klen, vlen;
        const char *k = leveldb_iter_key(it, &klen);
        const char *v = leveldb_iter_value(it, &vlen);
        if (vlen >= R2_EMB_HDR && (v[R2_EMB_OFF_FLAGS] & R2_EMB_EPHEMERAL)) {
            leveldb_writebatch_delete(wb, k, klen);
            purged++;
        }
    }
    leveldb_iter_destroy(it);
    if (purged > 0) {
        char *err = NULL;
        leveldb_write(e->db, e->wopt, wb, &err);
        if (err != NULL) {
            XT_ERR("r2_store_embedded: purging ephemerals: %s", err);
            leveldb_free(err);
            rc = -EIO;
        }
    }
    leveldb_writebatch_destroy(wb);
    return rc;
}

static void emb_close(r2_store *s)
{
    emb_store *e = (emb_store *)s;
    if (e->db != NULL) {
        purge_ephemerals(e);
        leveldb_close(e->db);
    }
    leveldb_writeoptions_destroy(e->wopt);
    leveldb_readoptions_destroy(e->ropt);
    leveldb_options_destroy(e->opt);
    for (size_t i = 0; i < e->nwatches; i++)
        xt_free(e->watches[i].key);
    xt_free(e->watches);
    xt_free(e->leader_id);
    xt_free(e->dir);
    pthread_mutex_destroy(&e->mu);
    pthread_mutex_destroy(&e->cb_mu);
    xt_free(e);
}

static const r2_store_ops emb_ops = {
    .name = "embedded",
    .get = emb_get,
    .put = emb_put,
    .del = emb_del,
    .list = emb_list,
    .multi = emb_multi,
    .watch = emb_watch,
    .unwatch = emb_unwatch,
    .elect = emb_elect,
    .resign = emb_resign,
    .is_leader = emb_is_leader,
    .leader = emb_leader,
    .close = emb_close,
};

int r2_store_embedded_open(const char *dir, r2_store **out)
{
    if (dir == NULL || dir[0] == '\0')
        return -EINVAL;
    if (mkdir(dir, 0755) < 0 && errno != EEXIST)
        return -errno;
    emb_store *e = xt_calloc(1, sizeof *e);
    if (e == NULL)
        return -ENOMEM;
    e->base.ops = &emb_ops;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&e->cb_mu, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_mutex_init(&e->mu, NULL);
    e->opt = leveldb_options_create();
    leveldb_options_set_create_if_missing(e->opt, 1);
    leveldb_options_set_paranoid_checks(e->opt, 1);
    e->ropt = leveldb_readoptions_create();
    leveldb_readoptions_set_verify_checksums(e->ropt, 1);
    e->wopt = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(e->wopt, 1);
    e->dir = xt_strdup(dir);
    if (e->dir == NULL) {
        emb_close(&e->base);
        return -ENOMEM;
    }
    char *err = NULL;
    e->db = xt_ldb_open(e->opt, dir, 10000, &err);
    if (err != NULL) {
        int rc = xt_ldb_is_lock_error(err) ? -EBUSY : -EIO;
        XT_ERR("r2_store_embedded: open %s: %s", dir, err);
        leveldb_free(err);
        e->db = NULL;
        emb_close(&e->base);
        return rc;
    }
    int rc = purge_ephemerals(e);
    if (rc < 0) {
        emb_close(&e->base);
        return rc;
    }
    *out = &e->base;
    return 0;
}
