/*
 * pom_blob_rados.c -- the `rados` backend of the blob tier (pom_blob.h,
 * pom_blob_i.h struct blob_ops): tracts as RADOS objects in one pool of a
 * Ceph cluster, through librados, for users who already run Ceph. Floor
 * 3.0 of libpomegranate: below the generic layer (pom_blob.c), which calls
 * it through pom_blob_rados_ops only. Format: docs/format-blob.md "rados".
 *
 * Object names (the default namespace of the pool; fsid, id, tract in hex):
 *   pom.<fsid %08x>.<id %016x>.<tract %08x>   tract t of set id
 *   pom.<fsid %08x>.<id %016x>.map            the set's map: byte t = 1,
 *                                             tract t may exist
 *   pom.<fsid %08x>.reclaim                   the reclaimer lock (cls lock)
 * Placement is RADOS's (CRUSH): the locator table of `local` plays no part.
 *
 * Invariants (beyond pom_blob.h's):
 *  (1) The map lists a superset of the tract objects: byte t is set before
 *      tract t is first written (or created) and cleared after it is
 *      removed. So a tract object whose read answers -ENOENT while its byte
 *      is 1, and any tract of a set without a map, is lost data (-EIO); a
 *      byte 0 (or past the map's end) is a hole. Removals find every
 *      object through the map, never by listing the pool.
 *  (2) Every write, truncate, zero and remove is synchronous: it returns
 *      once RADOS acknowledged it, i.e. once every replica of the object's
 *      placement group holds it durably. So fsync has nothing left to make
 *      durable (it answers the sticky error of the generic layer only).
 *  (3) No lock is held across a librados call; f->mu covers the file's
 *      `known` bytes only (a cache of map bytes this process saw set).
 */
#include "pom_blob_i.h"

#include "xt_common.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <rados/librados.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define OID_MAX         64
#define LOCK_NAME       "reclaim"
#define LOCK_SECONDS    900   /* a reclaimer that dies frees the lock after this */
#define OP_TIMEOUT      "60"  /* seconds before a RADOS call gives up (-ETIMEDOUT) */

struct rados_store {
    rados_t cluster;
    rados_ioctx_t io;
    bool connected;
    char pool[128];
    char cookie[48];      /* this store's lock cookie */
};

/* The per-file state: which map bytes this process set or saw set. */
struct rados_file {
    uint8_t *known;       /* protected by f->mu */
    size_t nknown;        /* protected by f->mu */
};

static struct rados_store *store(const pom_blob *b)
{
    return b->be;
}

static void oid_tract(const pom_blob *b, uint64_t id, uint32_t t, char *o)
{
    snprintf(o, OID_MAX, "pom.%08" PRIx32 ".%016" PRIx64 ".%08" PRIx32, b->fsid, id, t);
}

static void oid_map(const pom_blob *b, uint64_t id, char *o)
{
    snprintf(o, OID_MAX, "pom.%08" PRIx32 ".%016" PRIx64 ".map", b->fsid, id);
}

/* ---- settings: "pool=P[,conf=FILE][,id=NAME][,keyring=FILE]" ---------- */

struct rados_conf {
    char *pool, *conf, *id, *keyring; /* point into buf */
    char buf[];
};

/* Parses the settings string; *out: xt_free. -EINVAL with a log line. */
static int conf_parse(const char *s, struct rados_conf **out)
{
    size_t n = strlen(s ? s : "");
    struct rados_conf *c = xt_calloc(1, sizeof *c + n + 1);
    if (!c)
        return -ENOMEM;
    memcpy(c->buf, s ? s : "", n + 1);
    char *save = NULL;
    for (char *kv = strtok_r(c->buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *v = strchr(kv, '=');
        char **dst = NULL;
        if (v) {
            *v++ = '\0';
            dst = !strcmp(kv, "pool")      ? &c->pool
                  : !strcmp(kv, "conf")    ? &c->conf
                  : !strcmp(kv, "id")      ? &c->id
                  : !strcmp(kv, "keyring") ? &c->keyring
                                           : NULL;
        }
        if (!dst || !*v) {
            XT_ERR("blob: rados setting '%s' is not one of pool=, conf=, id=, keyring= "
                   "with a value",
                   kv);
            xt_free(c);
            return -EINVAL;
        }
        *dst = v;
    }
    if (!c->pool) {
        XT_ERR("blob: backend rados needs a pool (pool=NAME[,conf=FILE,id=NAME,keyring=FILE]; "
               "pomctl fs create --rados-pool)");
        xt_free(c);
        return -EINVAL;
    }
    *out = c;
    return 0;
}

static int rados_open_(pom_blob *b, const struct pom_blob_conf *c)
{
    struct rados_conf *rc_ = NULL;
    int rc = conf_parse(c->path, &rc_);
    if (rc < 0)
        return rc;
    struct rados_store *s = xt_calloc(1, sizeof *s);
    if (!s) {
        xt_free(rc_);
        return -ENOMEM;
    }
    b->be = s;
    snprintf(s->pool, sizeof s->pool, "%s", rc_->pool);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(s->cookie, sizeof s->cookie, "pom-%ld-%ld", (long)getpid(), (long)now.tv_nsec);
    const char *step = "rados_create";
    rc = rados_create(&s->cluster, rc_->id);
    if (rc == 0) {
        step = "reading the ceph.conf";
        rc = rados_conf_read_file(s->cluster, rc_->conf); /* NULL: Ceph's search path */
        if (rc < 0 && !rc_->conf)
            rc = 0; /* no file: the defaults and the environment (CEPH_ARGS) */
        if (rc == 0 && rc_->keyring) {
            step = "setting the keyring";
            rc = rados_conf_set(s->cluster, "keyring", rc_->keyring);
        }
        /* A cluster that does not answer gives an error, not a hang. */
        if (rc == 0)
            rc = rados_conf_set(s->cluster, "client_mount_timeout", "30");
        if (rc == 0)
            rc = rados_conf_set(s->cluster, "rados_osd_op_timeout", OP_TIMEOUT);
        if (rc == 0)
            rc = rados_conf_set(s->cluster, "rados_mon_op_timeout", OP_TIMEOUT);
        if (rc == 0) {
            step = "connecting";
            rc = rados_connect(s->cluster);
            s->connected = rc == 0;
        }
        if (rc == 0) {
            step = "opening the pool";
            rc = rados_ioctx_create(s->cluster, rc_->pool, &s->io);
        }
    }
    if (rc < 0)
        XT_ERR("blob: rados (pool %s, conf %s, id %s): %s failed: %s", rc_->pool,
               rc_->conf ? rc_->conf : "default", rc_->id ? rc_->id : "admin", step,
               strerror(-rc));
    xt_free(rc_);
    return rc;
}

static void rados_close_(pom_blob *b)
{
    struct rados_store *s = store(b);
    if (!s)
        return;
    if (s->io)
        rados_ioctx_destroy(s->io);
    if (s->cluster)
        rados_shutdown(s->cluster);
    xt_free(s);
    b->be = NULL;
}

/* ---- the set's map (invariant (1)) ------------------------------------- */

/* Whether this process knows map byte t is set. */
static bool known(pom_blob_file *f, uint32_t t)
{
    pthread_mutex_lock(&f->mu);
    struct rados_file *rf = f->be;
    bool k = rf && t < rf->nknown && rf->known[t];
    pthread_mutex_unlock(&f->mu);
    return k;
}

/* Records in the cache that byte t is v. A failure to grow only costs a
 * map write later. */
static void know(pom_blob_file *f, uint32_t t, uint8_t v)
{
    pthread_mutex_lock(&f->mu);
    struct rados_file *rf = f->be;
    if (!rf && v && (rf = xt_calloc(1, sizeof *rf)))
        f->be = rf;
    if (rf && t >= rf->nknown && v) {
        size_t n = XT_MAX((size_t)t + 1, rf->nknown * 2);
        uint8_t *k = xt_realloc(rf->known, n);
        if (k) {
            memset(k + rf->nknown, 0, n - rf->nknown);
            rf->known = k;
            rf->nknown = n;
        }
    }
    if (rf && t < rf->nknown)
        rf->known[t] = v;
    pthread_mutex_unlock(&f->mu);
}

/* Forgets the cache from tract `first` on. */
static void forget_from(pom_blob_file *f, uint32_t first)
{
    pthread_mutex_lock(&f->mu);
    struct rados_file *rf = f->be;
    if (rf && first < rf->nknown)
        memset(rf->known + first, 0, rf->nknown - first);
    pthread_mutex_unlock(&f->mu);
}

/* Sets map byte t to 1 (before tract t is first written: invariant (1)). */
static int map_mark(pom_blob_file *f, uint32_t t)
{
    if (known(f, t))
        return 0;
    char o[OID_MAX];
    oid_map(f->b, f->uuid, o);
    static const uint8_t one = 1;
    int rc = rados_write(store(f->b)->io, o, (const char *)&one, 1, t);
    if (rc < 0) {
        XT_ERR("blob: rados: cannot record tract %u of set %016" PRIx64 " in %s: %s",
               (unsigned)t, f->uuid, o, strerror(-rc));
        return rc;
    }
    know(f, t, 1);
    return 0;
}

/* The whole map of set id into *out (xt_free; *n bytes). -ENOENT: no map. */
static int map_read(pom_blob *b, uint64_t id, uint8_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    char o[OID_MAX];
    oid_map(b, id, o);
    uint64_t size = 0;
    time_t mt;
    int rc = rados_stat(store(b)->io, o, &size, &mt);
    if (rc < 0)
        return rc;
    if (size > POM_BLOB_FILE_MAX / (64u << 10))
        return -EBADMSG; /* more bytes than tracts of the smallest size */
    uint8_t *m = xt_malloc(size ? size : 1);
    if (!m)
        return -ENOMEM;
    rc = size ? rados_read(store(b)->io, o, (char *)m, size, 0) : 0;
    if (rc < 0) {
        xt_free(m);
        return rc;
    }
    *out = m;
    *n = (size_t)rc; /* shorter if it was cut meanwhile */
    return 0;
}

/* What the map says of tract t: 1 written, 0 a hole, -ENOENT no map, -errno. */
static int map_get(pom_blob_file *f, uint32_t t)
{
    char o[OID_MAX];
    oid_map(f->b, f->uuid, o);
    uint8_t v = 0;
    int rc = rados_read(store(f->b)->io, o, (char *)&v, 1, t);
    return rc < 0 ? rc : rc == 1 && v != 0;
}

static int rados_create_(pom_blob_file *f)
{
    char o[OID_MAX];
    oid_map(f->b, f->uuid, o);
    rados_write_op_t op = rados_create_write_op();
    if (!op)
        return -ENOMEM;
    rados_write_op_create(op, LIBRADOS_CREATE_IDEMPOTENT, NULL);
    int rc = rados_write_op_operate(op, store(f->b)->io, o, NULL, 0);
    rados_release_write_op(op);
    return rc;
}

/* ---- tracts ------------------------------------------------------------- */

static ssize_t rados_pread_(pom_blob_file *f, uint32_t t, void *buf, size_t n, uint64_t toff)
{
    char o[OID_MAX];
    oid_tract(f->b, f->uuid, t, o);
    int r = rados_read(store(f->b)->io, o, buf, n, toff);
    if (r == -ENOENT) {
        int w = map_get(f, t);
        if (w == 1) /* a write may have made it since our read */
            r = rados_read(store(f->b)->io, o, buf, n, toff);
        if (w == 0) {
            memset(buf, 0, n); /* a hole */
            return (ssize_t)n;
        }
        if (w == -ENOENT || (w == 1 && r == -ENOENT)) {
            XT_ERR("blob: tract %u of set %016" PRIx64 " in pool %s is lost (%s): EIO, not "
                   "zeros",
                   (unsigned)t, f->uuid, store(f->b)->pool,
                   w == -ENOENT ? "the set has no map" : "written, its object is missing");
            return -EIO;
        }
        if (w < 0)
            r = w;
    }
    if (r < 0) {
        XT_ERR("blob: rados read of %s: %s", o, strerror(-r));
        return r;
    }
    memset((char *)buf + r, 0, n - (size_t)r); /* past the object's end */
    return (ssize_t)n;
}

static ssize_t rados_pwrite_(pom_blob_file *f, uint32_t t, const void *buf, size_t n,
                             uint64_t toff)
{
    int rc = map_mark(f, t);
    if (rc < 0)
        return rc;
    char o[OID_MAX];
    oid_tract(f->b, f->uuid, t, o);
    rc = rados_write(store(f->b)->io, o, buf, n, toff);
    if (rc < 0) {
        XT_ERR("blob: rados write of %s: %s", o, strerror(-rc));
        return rc;
    }
    return (ssize_t)n;
}

static int rados_cut_(pom_blob_file *f, uint32_t t, uint64_t len)
{
    char o[OID_MAX];
    oid_tract(f->b, f->uuid, t, o);
    uint64_t size;
    time_t mt;
    int rc = rados_stat(store(f->b)->io, o, &size, &mt);
    if (rc == -ENOENT)
        return 0; /* nothing stored: nothing to cut */
    if (rc == 0 && size > len)
        rc = rados_trunc(store(f->b)->io, o, len);
    return rc;
}

/* Removes tract object o: a missing one is fine. */
static int remove_obj(pom_blob *b, const char *o)
{
    int rc = rados_remove(store(b)->io, o);
    if (rc < 0 && rc != -ENOENT) {
        XT_ERR("blob: rados remove of %s: %s", o, strerror(-rc));
        return rc;
    }
    return 0;
}

/* Removes every tract >= first the map m[0..n) lists. The first -errno. */
static int remove_listed(pom_blob *b, uint64_t id, const uint8_t *m, size_t n, uint32_t first)
{
    int rc = 0;
    for (size_t t = first; t < n; t++) {
        if (!m[t])
            continue;
        char o[OID_MAX];
        oid_tract(b, id, (uint32_t)t, o);
        int e = remove_obj(b, o);
        if (e < 0 && rc == 0)
            rc = e;
    }
    return rc;
}

static int rados_drop_from_(pom_blob_file *f, uint32_t first)
{
    forget_from(f, first);
    uint8_t *m;
    size_t n;
    int rc = map_read(f->b, f->uuid, &m, &n);
    if (rc == -ENOENT)
        return 0; /* no map: no tract (invariant (1)) */
    if (rc < 0)
        return rc;
    rc = remove_listed(f->b, f->uuid, m, n, first);
    xt_free(m);
    if (rc == 0 && n > first) { /* invariant (1): the bytes after the objects */
        char o[OID_MAX];
        oid_map(f->b, f->uuid, o);
        rc = rados_trunc(store(f->b)->io, o, first);
    }
    return rc;
}

static int rados_drop_(pom_blob_file *f, uint32_t t)
{
    know(f, t, 0);
    char o[OID_MAX];
    oid_tract(f->b, f->uuid, t, o);
    int rc = remove_obj(f->b, o);
    if (rc < 0)
        return rc;
    /* Invariant (1): cleared after the object went; a byte past the map's
     * end is 0 already, so the map never grows here. */
    oid_map(f->b, f->uuid, o);
    uint64_t size;
    time_t mt;
    rc = rados_stat(store(f->b)->io, o, &size, &mt);
    if (rc == -ENOENT)
        return 0;
    static const uint8_t zero = 0;
    if (rc == 0 && size > t)
        rc = rados_write(store(f->b)->io, o, (const char *)&zero, 1, t);
    return rc;
}

/* Runs a write op on o that applies only to an existing object: -ENOENT
 * (nothing stored) answers 0. */
static int on_existing(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len)
{
    char o[OID_MAX];
    oid_tract(f->b, f->uuid, t, o);
    rados_write_op_t op = rados_create_write_op();
    if (!op)
        return -ENOMEM;
    rados_write_op_assert_exists(op);
    rados_write_op_zero(op, toff, len);
    int rc = rados_write_op_operate(op, store(f->b)->io, o, NULL, 0);
    rados_release_write_op(op);
    return rc == -ENOENT ? 0 : rc;
}

static int rados_punch_(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len)
{
    return on_existing(f, t, toff, len);
}

/* RADOS reserves no space ahead: an allocation makes the tract exist
 * (so it is counted and listed), nothing more. */
static int rados_allocate_(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len,
                           bool *made)
{
    (void)toff;
    (void)len;
    int rc = map_mark(f, t);
    if (rc < 0)
        return rc;
    char o[OID_MAX];
    oid_tract(f->b, f->uuid, t, o);
    rados_write_op_t op = rados_create_write_op();
    if (!op)
        return -ENOMEM;
    rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
    rc = rados_write_op_operate(op, store(f->b)->io, o, NULL, 0);
    rados_release_write_op(op);
    if (rc == 0)
        *made = true;
    return rc == -EEXIST ? 0 : rc;
}

static int rados_fsync_(pom_blob_file *f)
{
    (void)f;
    return 0; /* invariant (2) */
}

static int rados_remove_(pom_blob *b, uint64_t id)
{
    uint8_t *m;
    size_t n;
    int rc = map_read(b, id, &m, &n);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    rc = remove_listed(b, id, m, n, 0);
    xt_free(m);
    if (rc == 0) { /* the map last: an interrupted removal can be done again */
        char o[OID_MAX];
        oid_map(b, id, o);
        rc = remove_obj(b, o);
    }
    return rc;
}

static int rados_stat_(pom_blob *b, uint64_t id, struct pom_blob_stat *st)
{
    memset(st, 0, sizeof *st);
    uint8_t *m;
    size_t n;
    int rc = map_read(b, id, &m, &n);
    if (rc == -ENOENT)
        return 0;
    for (size_t t = 0; rc == 0 && t < n; t++) {
        if (!m[t])
            continue;
        char o[OID_MAX];
        oid_tract(b, id, (uint32_t)t, o);
        uint64_t size;
        time_t mt;
        int e = rados_stat(store(b)->io, o, &size, &mt);
        if (e == 0) {
            st->tracts++;
            st->alloc_bytes += size;
        } else if (e != -ENOENT) {
            rc = e;
        }
    }
    xt_free(m);
    return rc;
}

/* ---- listing, lease, reclaimer lock ------------------------------------ */

struct obj {
    uint64_t id;
    bool tract;
    uint64_t size;
    int64_t mtime_ns;
};

static int cmp_obj(const void *a, const void *b)
{
    uint64_t x = ((const struct obj *)a)->id, y = ((const struct obj *)b)->id;
    return x < y ? -1 : x > y;
}

/* Collects every object of b's fsid (with its size and mtime) into *out. */
static int list_objs(pom_blob *b, struct obj **out, size_t *nout)
{
    *out = NULL;
    *nout = 0;
    rados_list_ctx_t ctx;
    int rc = rados_nobjects_list_open(store(b)->io, &ctx);
    if (rc < 0)
        return rc;
    struct obj *v = NULL;
    size_t n = 0, cap = 0;
    const char *name;
    char prefix[24];
    snprintf(prefix, sizeof prefix, "pom.%08" PRIx32 ".", b->fsid);
    while ((rc = rados_nobjects_list_next(ctx, &name, NULL, NULL)) == 0) {
        if (strncmp(name, prefix, strlen(prefix)))
            continue;
        const char *p = name + strlen(prefix);
        char *end;
        uint64_t id = strtoull(p, &end, 16);
        if (end != p + 16 || *end != '.')
            continue; /* the reclaimer lock */
        bool tract = strcmp(end + 1, "map") != 0;
        uint64_t size = 0;
        time_t mt = 0;
        int e = rados_stat(store(b)->io, name, &size, &mt);
        if (e == -ENOENT)
            continue; /* removed meanwhile */
        if (e < 0) {
            rc = e;
            break;
        }
        if (n == cap) {
            size_t c = cap ? 2 * cap : 256;
            struct obj *nv = xt_realloc(v, c * sizeof *nv);
            if (!nv) {
                rc = -ENOMEM;
                break;
            }
            v = nv;
            cap = c;
        }
        v[n++] = (struct obj){ id, tract, size, (int64_t)mt * 1000000000 };
    }
    rados_nobjects_list_close(ctx);
    if (rc != -ENOENT) { /* -ENOENT: the end of the listing */
        xt_free(v);
        return rc;
    }
    qsort(v, n, sizeof *v, cmp_obj);
    *out = v;
    *nout = n;
    return 0;
}

static int rados_list_(pom_blob *b, pom_blob_list_fn fn, void *arg)
{
    struct obj *v;
    size_t n;
    int rc = list_objs(b, &v, &n);
    for (size_t i = 0; rc == 0 && i < n;) {
        struct pom_blob_set s = { .id = v[i].id };
        for (; i < n && v[i].id == s.id; i++) {
            if (v[i].tract) {
                s.tracts++;
                s.bytes += v[i].size;
                s.alloc_bytes += v[i].size;
            }
            s.mtime_ns = XT_MAX(s.mtime_ns, v[i].mtime_ns);
        }
        rc = fn(arg, &s);
    }
    xt_free(v);
    return rc;
}

/* The set's age counts from its map's mtime: a write op that sets an
 * xattr on the map (only when it exists: a set without one stays so). */
static int rados_touch_(pom_blob *b, uint64_t id)
{
    char o[OID_MAX];
    oid_map(b, id, o);
    rados_write_op_t op = rados_create_write_op();
    if (!op)
        return -ENOMEM;
    rados_write_op_assert_exists(op);
    static const char v[] = "1";
    rados_write_op_setxattr(op, "pom.lease", v, 1);
    int rc = rados_write_op_operate(op, store(b)->io, o, NULL, 0);
    rados_release_write_op(op);
    return rc == -ENOENT ? 0 : rc;
}

static void oid_lock(const pom_blob *b, char *o)
{
    snprintf(o, OID_MAX, "pom.%08" PRIx32 ".reclaim", b->fsid);
}

static int rados_lock_(pom_blob *b, int *token)
{
    char o[OID_MAX];
    oid_lock(b, o);
    struct timeval d = { .tv_sec = LOCK_SECONDS };
    int rc = rados_lock_exclusive(store(b)->io, o, LOCK_NAME, store(b)->cookie,
                                  "pomegranate reclaimer", &d, 0);
    if (rc == -EBUSY || rc == -EEXIST)
        return 0;
    if (rc < 0)
        return rc;
    *token = 0;
    return 1;
}

static void rados_unlock_(pom_blob *b, int token)
{
    (void)token;
    char o[OID_MAX];
    oid_lock(b, o);
    int rc = rados_unlock(store(b)->io, o, LOCK_NAME, store(b)->cookie);
    if (rc < 0)
        XT_WARN("blob: rados unlock of %s: %s (it expires in %d s)", o, strerror(-rc),
                LOCK_SECONDS);
}

static void rados_file_fini_(pom_blob_file *f)
{
    struct rados_file *rf = f->be;
    if (rf)
        xt_free(rf->known);
    xt_free(rf);
    f->be = NULL;
}

const struct blob_ops pom_blob_rados_ops = {
    .name = "rados", .open = rados_open_, .close = rados_close_,
    .pread = rados_pread_, .pwrite = rados_pwrite_, .cut = rados_cut_,
    .drop_from = rados_drop_from_, .drop = rados_drop_, .punch = rados_punch_,
    .allocate = rados_allocate_, .fsync = rados_fsync_, .create = rados_create_,
    .remove = rados_remove_, .stat = rados_stat_, .list = rados_list_,
    .touch = rados_touch_, .lock = rados_lock_, .unlock = rados_unlock_,
    .file_fini = rados_file_fini_,
};
