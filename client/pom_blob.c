/*
 * pom_blob.c -- the generic layer of the blob tier (pom_blob.h; docs/
 * format-blob.md): cuts byte ranges into tracts, shares one open file per
 * uuid, keeps a failed fsync sticky, and calls the backend's ops table
 * (pom_blob_i.h). Built backends: `local` (pom_blob_local.c), `mdsl`
 * (pom_blob_mdsl.c) and `rados` (pom_blob_rados.c). Floor 3.1 of
 * libpomegranate: calls only its backends.
 *
 * Invariants (beyond pom_blob.h's):
 *  (1) After a failed fsync, writes, truncates, punches, allocations and
 *      fsyncs of that open file answer the error (sticky until every user
 *      closed it): the pages the host failed to write may be gone, so a
 *      later fsync must not report them durable.
 *  (2) Every per-tract call the backend gets lies inside one tract.
 */
#include "pom_blob_i.h"

#include "xt_common.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

void pom_blob_fault_after(pom_blob *b, uint64_t n, int err)
{
    atomic_store(&b->fault_err, err > 0 ? err : EIO);
    atomic_store(&b->fault_n, n);
}

/* ---- the generic layer ------------------------------------------------- */

int pom_blob_open(const struct pom_blob_conf *c, pom_blob **out)
{
    *out = NULL;
    const char *be = c->backend && *c->backend ? c->backend : "local";
    const struct blob_ops *ops = !strcmp(be, "local")   ? &pom_blob_local_ops
                                 : !strcmp(be, "mdsl")  ? &pom_blob_mdsl_ops
                                 : !strcmp(be, "rados") ? &pom_blob_rados_ops
                                                        : NULL;
    if (!ops) {
        XT_ERR("blob: unknown backend '%s' (local, mdsl, rados)", be);
        return -EINVAL;
    }
    uint64_t ts = c->tract_size ? c->tract_size : POM_BLOB_TRACT_SIZE;
    if (ts < (64u << 10) || ts > (UINT64_C(1) << 30) || (ts & (ts - 1))) {
        XT_ERR("blob: tract size %llu is not a power of two in 64 KiB..1 GiB",
               (unsigned long long)ts);
        return -EINVAL;
    }
    pom_blob *b = xt_calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    b->ops = ops;
    b->fsid = c->fsid;
    b->tract_size = ts;
    b->tract_shift = (unsigned)__builtin_ctzll(ts);
    pthread_mutex_init(&b->mu, NULL);
    int rc = b->ops->open(b, c);
    if (rc < 0) {
        pom_blob_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

void pom_blob_close(pom_blob *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < NBUCKETS; i++)
        assert(!b->buckets[i]); /* REQUIRES */
    b->ops->close(b);
    pthread_mutex_destroy(&b->mu);
    xt_free(b);
}

uint64_t pom_blob_tract_size(const pom_blob *b)
{
    return b->tract_size;
}

int pom_blob_file_open(pom_blob *b, uint64_t uuid, pom_blob_file **out)
{
    size_t k = uuid % NBUCKETS;
    pthread_mutex_lock(&b->mu);
    pom_blob_file *f = b->buckets[k];
    while (f && f->uuid != uuid)
        f = f->next;
    if (f) {
        f->refs++;
        pthread_mutex_unlock(&b->mu);
        *out = f;
        return 0;
    }
    pthread_mutex_unlock(&b->mu);
    pom_blob_file *nf = xt_calloc(1, sizeof *nf);
    if (!nf)
        return -ENOMEM;
    nf->b = b;
    nf->uuid = uuid;
    nf->h = pom_blob_hash(uuid);
    nf->refs = 1;
    pthread_mutex_init(&nf->mu, NULL);
    for (int i = 0; i < FD_SLOTS; i++)
        nf->slots[i].fd = -1;
    pthread_mutex_lock(&b->mu);
    for (f = b->buckets[k]; f && f->uuid != uuid;)
        f = f->next;
    if (f) { /* another thread opened it meanwhile */
        f->refs++;
    } else {
        nf->next = b->buckets[k];
        b->buckets[k] = nf;
        f = nf;
        nf = NULL;
    }
    pthread_mutex_unlock(&b->mu);
    if (nf) {
        pthread_mutex_destroy(&nf->mu);
        xt_free(nf);
    }
    *out = f;
    return 0;
}

void pom_blob_file_close(pom_blob_file *f)
{
    if (!f)
        return;
    pom_blob *b = f->b;
    pthread_mutex_lock(&b->mu);
    assert(f->refs > 0);
    bool last = --f->refs == 0;
    if (last) {
        pom_blob_file **pp = &b->buckets[f->uuid % NBUCKETS];
        while (*pp != f)
            pp = &(*pp)->next;
        *pp = f->next;
    }
    pthread_mutex_unlock(&b->mu);
    if (!last)
        return;
    b->ops->file_fini(f);
    pthread_mutex_destroy(&f->mu);
    xt_free(f->dirty);
    xt_free(f);
}

/* Walks [off, off+n) tract by tract: fn(f, tract, pos in buf, bytes, tract offset). */
#define FOR_TRACTS(f, off, n, t, boff, chunk, toff)                                      \
    for (uint64_t boff = 0, t, toff, chunk;                                               \
         boff < (n) && ((t = ((off) + boff) >> (f)->b->tract_shift),                      \
                        (toff = ((off) + boff) & ((f)->b->tract_size - 1)),               \
                        (chunk = XT_MIN((uint64_t)(n) - boff, (f)->b->tract_size - toff)), 1); \
         boff += chunk)

ssize_t pom_blob_pread(pom_blob_file *f, void *buf, size_t n, uint64_t off)
{
    assert(off <= POM_BLOB_FILE_MAX && n <= POM_BLOB_FILE_MAX - off); /* REQUIRES */
    if (off > POM_BLOB_FILE_MAX || n > POM_BLOB_FILE_MAX - off)
        return -EFBIG;
    FOR_TRACTS(f, off, n, t, boff, chunk, toff) {
        ssize_t r = f->b->ops->pread(f, (uint32_t)t, (char *)buf + boff, (size_t)chunk, toff);
        if (r < 0)
            return r;
    }
    atomic_fetch_add_explicit(&f->b->read, n, memory_order_relaxed);
    return (ssize_t)n;
}

void pom_blob_counters(pom_blob *b, uint64_t *written, uint64_t *read)
{
    *written = atomic_load_explicit(&b->written, memory_order_relaxed);
    *read = atomic_load_explicit(&b->read, memory_order_relaxed);
}

void pom_blob_space(pom_blob *b, const uint64_t *skip, size_t nskip, uint64_t *size,
                    uint64_t *avail)
{
    uint64_t seen[POM_BLOB_FOLDERS_MAX];
    size_t nseen = 0;
    for (size_t i = 0; i < b->rows && i < POM_BLOB_FOLDERS_MAX; i++) {
        struct stat st;
        struct statvfs sv;
        if (!b->folders[i] || stat(b->folders[i], &st) < 0 || statvfs(b->folders[i], &sv) < 0)
            continue;
        bool dup = false;
        for (size_t k = 0; k < nskip && !dup; k++)
            dup = skip[k] == (uint64_t)st.st_dev;
        for (size_t k = 0; k < nseen && !dup; k++)
            dup = seen[k] == (uint64_t)st.st_dev;
        if (dup)
            continue;
        seen[nseen++] = (uint64_t)st.st_dev;
        *size += (uint64_t)sv.f_blocks * sv.f_frsize;
        *avail += (uint64_t)sv.f_bavail * sv.f_frsize;
    }
}

/* Invariant (5): 0, or the error of a failed fsync. */
static int sticky(pom_blob_file *f)
{
    pthread_mutex_lock(&f->mu);
    int rc = f->error;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

ssize_t pom_blob_pwrite(pom_blob_file *f, const void *buf, size_t n, uint64_t off)
{
    int rc = sticky(f);
    if (rc < 0)
        return rc;
    if (off >= POM_BLOB_FILE_MAX && n)
        return -EFBIG;
    n = (size_t)XT_MIN((uint64_t)n, POM_BLOB_FILE_MAX - off);
    size_t done = 0;
    ssize_t err = 0;
    FOR_TRACTS(f, off, n, t, boff, chunk, toff) {
        ssize_t w = f->b->ops->pwrite(f, (uint32_t)t, (const char *)buf + boff, (size_t)chunk,
                                      toff);
        if (w < 0) {
            err = w;
            break;
        }
        done += (size_t)w;
        if ((uint64_t)w < chunk)
            break;
    }
    atomic_fetch_add_explicit(&f->b->written, done, memory_order_relaxed);
    return done || !err ? (ssize_t)done : err;
}

int pom_blob_truncate(pom_blob_file *f, uint64_t size)
{
    if (size > POM_BLOB_FILE_MAX)
        return -EFBIG;
    int rc = sticky(f);
    if (rc < 0)
        return rc;
    uint64_t t = size >> f->b->tract_shift, rest = size & (f->b->tract_size - 1);
    if (rest)
        rc = f->b->ops->cut(f, (uint32_t)t, rest);
    int r2 = f->b->ops->drop_from(f, (uint32_t)(rest ? t + 1 : t));
    return rc < 0 ? rc : r2;
}

int pom_blob_punch(pom_blob_file *f, uint64_t off, uint64_t len)
{
    if (off > POM_BLOB_FILE_MAX)
        return 0; /* nothing is stored there */
    len = XT_MIN(len, POM_BLOB_FILE_MAX - off);
    int rc = sticky(f);
    if (rc < 0)
        return rc;
    FOR_TRACTS(f, off, len, t, boff, chunk, toff) {
        rc = chunk == f->b->tract_size ? f->b->ops->drop(f, (uint32_t)t)
                                        : f->b->ops->punch(f, (uint32_t)t, toff, chunk);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Removes tract t that a failed pom_blob_allocate created. */
static void drop_made(pom_blob_file *f, uint32_t t)
{
    int e = f->b->ops->drop(f, t);
    if (e < 0)
        XT_WARN("blob %016llx: tract %u of a failed fallocate stays: %s",
                (unsigned long long)f->uuid, (unsigned)t, strerror(-e));
}

int pom_blob_allocate(pom_blob_file *f, uint64_t off, uint64_t len)
{
    if (off > POM_BLOB_FILE_MAX || len > POM_BLOB_FILE_MAX - off)
        return -EFBIG;
    int rc = sticky(f);
    if (rc < 0)
        return rc;
    /* The tracts this call creates, dropped again when it fails: a failed
     * fallocate leaves no allocation behind in a tract it made (space it
     * reserved in tracts that were there stays until the file goes). */
    uint32_t *made = NULL;
    size_t nmade = 0, cap = 0;
    FOR_TRACTS(f, off, len, t, boff, chunk, toff) {
        bool m = false;
        rc = f->b->ops->allocate(f, (uint32_t)t, toff, chunk, &m);
        if (m && nmade == cap) {
            size_t c = cap ? 2 * cap : 64;
            uint32_t *n = xt_realloc(made, c * sizeof *n);
            if (!n) {
                rc = rc < 0 ? rc : -ENOMEM;
                drop_made(f, (uint32_t)t);
                break;
            }
            made = n;
            cap = c;
        }
        if (m)
            made[nmade++] = (uint32_t)t;
        if (rc < 0)
            break;
    }
    for (size_t i = 0; rc < 0 && i < nmade; i++)
        drop_made(f, made[i]);
    xt_free(made);
    return rc;
}

int pom_blob_create(pom_blob_file *f)
{
    return f->b->ops->create(f);
}

int pom_blob_fsync(pom_blob_file *f)
{
    int rc = sticky(f);
    return rc < 0 ? rc : f->b->ops->fsync(f);
}

int pom_blob_flush(pom_blob_file *f)
{
    int rc = sticky(f);
    return rc < 0 || !f->b->ops->flush ? rc : f->b->ops->flush(f);
}

bool pom_blob_is_open(pom_blob *b, uint64_t uuid)
{
    pthread_mutex_lock(&b->mu);
    pom_blob_file *f = b->buckets[uuid % NBUCKETS];
    while (f && f->uuid != uuid)
        f = f->next;
    pthread_mutex_unlock(&b->mu);
    return f != NULL;
}

int pom_blob_delete(pom_blob *b, uint64_t uuid)
{
    assert(!pom_blob_is_open(b, uuid));
    return b->ops->remove(b, uuid);
}

int pom_blob_stat(pom_blob *b, uint64_t uuid, struct pom_blob_stat *st)
{
    return b->ops->stat(b, uuid, st);
}

int pom_blob_touch(pom_blob *b, uint64_t id)
{
    return b->ops->touch(b, id);
}

int pom_blob_reclaim_lock(pom_blob *b, int *token)
{
    return b->ops->lock(b, token);
}

void pom_blob_reclaim_unlock(pom_blob *b, int token)
{
    b->ops->unlock(b, token);
}

int pom_blob_list(pom_blob *b, pom_blob_list_fn fn, void *arg)
{
    return b->ops->list(b, fn, arg);
}

void pom_blob_view(pom_blob *b, const struct xt_view *v)
{
    if (b && b->ops->view)
        b->ops->view(b, v);
}
