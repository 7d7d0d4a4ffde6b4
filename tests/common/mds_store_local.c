/*
 * mds_store_local.c -- real MDSL engines in process behind mds_store
 * (mds_store_local.h).
 *
 * Invariants:
 *  (1) m->mu protects the site table, the fault rules, the sever counter
 *      and the counts; it is never held across an engine call, except for
 *      a site's first open.
 *  (2) Every engine call holds m->life for reading; a crash (close and
 *      reopen) holds it for writing, so no call sees a closed engine.
 *  (3) A severed store (sever == 0) calls no engine and answers -ECONNRESET.
 */
#define _XOPEN_SOURCE 700
#include "mds_store_local.h"

#include <assert.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mdsl_io.h"
#include "mdsl_store.h"
#include "xt_common.h"

/* The in-memory device of a site: large enough never to fill, unless a test
 * brings it down to the reserve (mds_store_local_full). */
#define LOCAL_DEVICE (UINT64_C(1) << 40)
#define LOCAL_RESERVE (UINT64_C(1) << 20)
#define LOCAL_SEG_SIZE (UINT64_C(4) << 20)

struct lfault {
    unsigned mask;
    long after, times;
    int err;
    bool after_apply;
};

struct lsite {
    uint32_t id;
    mdsl_io *io;
    mdsl_store *store;      /* replaced under life held for writing */
    struct mdsl_store_opts o;
    char index[200];
    struct lfault fault;    /* protected by m->mu */
    struct mds_store_local_counts cnt; /* protected by m->mu (prepared_now
                                          and slices are read live) */
};

struct mds_store_local {
    pthread_mutex_t mu;
    pthread_rwlock_t life;
    struct lsite **sites;   /* protected by mu */
    size_t nsites;
    long sever;             /* -1 off; 0 severed; n: n more calls (mu) */
    char tmp[64];
};

mds_store_local *mds_store_local_new(void)
{
    mds_store_local *m = xt_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    snprintf(m->tmp, sizeof m->tmp, "/tmp/mds_store_local.XXXXXX");
    if (!mkdtemp(m->tmp)) {
        XT_ERR("mds_store_local: mkdtemp: %s", strerror(errno));
        xt_free(m);
        return NULL;
    }
    pthread_mutex_init(&m->mu, NULL);
    pthread_rwlock_init(&m->life, NULL);
    m->sever = -1;
    return m;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 ? -1 : 0;
}

void mds_store_local_free(mds_store_local *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nsites; i++) {
        mdsl_store_close(m->sites[i]->store);
        mdsl_io_destroy(m->sites[i]->io);
        xt_free(m->sites[i]);
    }
    xt_free(m->sites);
    (void)nftw(m->tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    pthread_rwlock_destroy(&m->life);
    pthread_mutex_destroy(&m->mu);
    xt_free(m);
}

/* REQUIRES: m->mu held. NULL on failure (logged). */
static struct lsite *site_get(mds_store_local *m, uint32_t id)
{
    for (size_t i = 0; i < m->nsites; i++)
        if (m->sites[i]->id == id)
            return m->sites[i];
    struct lsite *s = xt_calloc(1, sizeof *s);
    struct lsite **ns = xt_realloc(m->sites, (m->nsites + 1) * sizeof *ns);
    if (ns)
        m->sites = ns;
    if (!s || !ns || mdsl_io_mem_new(&s->io) < 0) {
        xt_free(s);
        return NULL;
    }
    mdsl_io_mem_set_capacity(s->io, LOCAL_DEVICE);
    snprintf(s->index, sizeof s->index, "%s/site.%u", m->tmp, id);
    s->id = id;
    s->o = (struct mdsl_store_opts){ .io = s->io, .dir = "/mdsl", .index_dir = s->index,
                                     .seg_size = LOCAL_SEG_SIZE,
                                     .reserve_bytes = LOCAL_RESERVE };
    int rc = mdsl_store_open(&s->o, &s->store);
    if (rc < 0) {
        XT_ERR("mds_store_local: site %u: open: %s", id, strerror(-rc));
        mdsl_io_destroy(s->io);
        xt_free(s);
        return NULL;
    }
    m->sites[m->nsites++] = s;
    return s;
}

/* Sever and fault checks, in that order, then the engine lock. 0 to call
 * the engine (*late: an error to answer after it did the work), else the
 * error to answer without calling it. */
static int call_begin(mds_store_local *m, uint32_t site, unsigned op, struct lsite **out,
                      int *late)
{
    *late = 0;
    pthread_mutex_lock(&m->mu);
    if (m->sever == 0) {
        pthread_mutex_unlock(&m->mu);
        return -ECONNRESET;
    }
    if (m->sever > 0)
        m->sever--;
    struct lsite *s = site_get(m, site);
    int rc = s ? 0 : -EIO;
    struct lfault *f = s ? &s->fault : NULL;
    if (f && f->times && (f->mask & op)) {
        if (f->after > 0) {
            f->after--;
        } else {
            if (f->times > 0)
                f->times--;
            s->cnt.failed++;
            if (f->after_apply && (op & (MDS_LOCAL_PREPARE | MDS_LOCAL_COMMIT | MDS_LOCAL_ABORT)))
                *late = f->err;
            else
                rc = f->err;
        }
    }
    pthread_mutex_unlock(&m->mu);
    if (rc == 0)
        pthread_rwlock_rdlock(&m->life);
    *out = s;
    return rc;
}

static int call_end(mds_store_local *m, struct lsite *s, unsigned op, int rc, int late)
{
    pthread_rwlock_unlock(&m->life);
    if (rc == 0 && late)
        return late;
    if (rc == 0) {
        pthread_mutex_lock(&m->mu);
        s->cnt.prepares += op == MDS_LOCAL_PREPARE;
        s->cnt.commits += op == MDS_LOCAL_COMMIT;
        s->cnt.aborts += op == MDS_LOCAL_ABORT;
        s->cnt.loads += op == MDS_LOCAL_LOAD;
        s->cnt.lists += op == MDS_LOCAL_LIST;
        pthread_mutex_unlock(&m->mu);
    }
    return rc;
}

static int local_prepare(void *ctx, uint32_t site, uint64_t txid,
                         const struct xt_store_rec *recs, size_t n)
{
    struct lsite *s;
    int late, rc = call_begin(ctx, site, MDS_LOCAL_PREPARE, &s, &late);
    if (rc)
        return rc;
    rc = mdsl_store_prepare(s->store, txid, recs, n);
    return call_end(ctx, s, MDS_LOCAL_PREPARE, rc, late);
}

static int local_commit(void *ctx, uint32_t site, uint64_t txid)
{
    struct lsite *s;
    int late, rc = call_begin(ctx, site, MDS_LOCAL_COMMIT, &s, &late);
    if (rc)
        return rc;
    rc = mdsl_store_commit(s->store, txid);
    return call_end(ctx, s, MDS_LOCAL_COMMIT, rc, late);
}

static int local_abort(void *ctx, uint32_t site, uint64_t txid)
{
    struct lsite *s;
    int late, rc = call_begin(ctx, site, MDS_LOCAL_ABORT, &s, &late);
    if (rc)
        return rc;
    rc = mdsl_store_abort(s->store, txid);
    return call_end(ctx, s, MDS_LOCAL_ABORT, rc, late);
}

static int local_load(void *ctx, uint32_t site, xt_slice_id id, struct xt_store_load *out)
{
    memset(out, 0, sizeof *out);
    struct lsite *s;
    int late, rc = call_begin(ctx, site, MDS_LOCAL_LOAD, &s, &late);
    if (rc)
        return rc;
    rc = mdsl_store_load_slice(s->store, id, out);
    return call_end(ctx, s, MDS_LOCAL_LOAD, rc, late);
}

static int local_list_prepared(void *ctx, uint32_t site, uint64_t **txids, size_t *n)
{
    *txids = NULL;
    *n = 0;
    struct lsite *s;
    int late, rc = call_begin(ctx, site, MDS_LOCAL_LIST, &s, &late);
    if (rc)
        return rc;
    rc = mdsl_store_prepared(s->store, txids, n);
    return call_end(ctx, s, MDS_LOCAL_LIST, rc, late);
}

static int local_list_slices(void *ctx, uint32_t site, const void *cursor, uint32_t cursor_len,
                             uint32_t max, struct xt_store_list *out)
{
    memset(out, 0, sizeof *out);
    struct lsite *s;
    int late, rc = call_begin(ctx, site, MDS_LOCAL_LIST, &s, &late);
    if (rc)
        return rc;
    rc = mdsl_store_list_slices(s->store, cursor, cursor_len, max, out);
    return call_end(ctx, s, MDS_LOCAL_LIST, rc, late);
}

static const struct mds_store_ops local_ops = {
    .prepare = local_prepare,
    .commit = local_commit,
    .abort = local_abort,
    .load = local_load,
    .list_prepared = local_list_prepared,
    .list_slices = local_list_slices,
};

void mds_store_local_bind(mds_store_local *m, mds_store *out)
{
    out->ops = &local_ops;
    out->ctx = m;
}

void mds_store_local_fail(mds_store_local *m, uint32_t site, unsigned ops_mask, long after,
                          long times, int err, bool after_apply)
{
    assert(times == 0 || err < 0);
    pthread_mutex_lock(&m->mu);
    struct lsite *s = site_get(m, site);
    if (s)
        s->fault = (struct lfault){ ops_mask, after, times, err, after_apply };
    pthread_mutex_unlock(&m->mu);
}

void mds_store_local_sever(mds_store_local *m, long after)
{
    pthread_mutex_lock(&m->mu);
    m->sever = after < 0 ? -1 : after;
    pthread_mutex_unlock(&m->mu);
}

/* The site if it was ever used, else NULL. */
static struct lsite *site_find(mds_store_local *m, uint32_t site)
{
    pthread_mutex_lock(&m->mu);
    struct lsite *s = NULL;
    for (size_t i = 0; i < m->nsites; i++)
        if (m->sites[i]->id == site)
            s = m->sites[i];
    pthread_mutex_unlock(&m->mu);
    return s;
}

/* Close site's engine and open it again (its recovery runs); with wipe,
 * over a new empty device and index (a lost disk). 0 or -errno. */
static int site_reopen(mds_store_local *m, uint32_t site, bool wipe)
{
    struct lsite *s = site_find(m, site);
    if (!s)
        return 0;
    pthread_rwlock_wrlock(&m->life);
    mdsl_store_close(s->store);
    s->store = NULL;
    int rc = 0;
    if (wipe) {
        mdsl_io_destroy(s->io);
        (void)nftw(s->index, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        if ((rc = mdsl_io_mem_new(&s->io)) == 0)
            mdsl_io_mem_set_capacity(s->io, LOCAL_DEVICE);
        s->o.io = s->io;
    }
    if (rc == 0)
        rc = mdsl_store_open(&s->o, &s->store);
    pthread_rwlock_unlock(&m->life);
    if (rc < 0)
        XT_ERR("mds_store_local: site %u: reopen%s: %s", site, wipe ? " after a wipe" : "",
               strerror(-rc));
    return rc;
}

int mds_store_local_crash(mds_store_local *m, uint32_t site)
{
    return site_reopen(m, site, false);
}

int mds_store_local_wipe(mds_store_local *m, uint32_t site)
{
    return site_reopen(m, site, true);
}

void mds_store_local_full(mds_store_local *m, uint32_t site, bool full)
{
    pthread_mutex_lock(&m->mu);
    struct lsite *s = site_get(m, site);
    pthread_mutex_unlock(&m->mu);
    if (!s)
        return;
    uint64_t avail = 0, total = 0;
    mdsl_io_mem_set_capacity(s->io, LOCAL_DEVICE);
    if (full && mdsl_io_space(s->io, s->o.dir, &avail, &total) == 0)
        mdsl_io_mem_set_capacity(s->io, total - avail + LOCAL_RESERVE / 2);
}

int mds_store_local_slices(mds_store_local *m, uint32_t site, struct xt_store_slice **out,
                           size_t *n)
{
    *out = NULL;
    *n = 0;
    struct lsite *s = site_find(m, site);
    if (!s)
        return 0;
    struct xt_store_slice *v = NULL;
    size_t nv = 0;
    uint8_t cursor[XT_STORE_CURSOR_MAX];
    uint32_t clen = 0;
    int rc = 0;
    pthread_rwlock_rdlock(&m->life);
    for (bool end = false; !end && rc == 0;) {
        struct xt_store_list l;
        rc = mdsl_store_list_slices(s->store, cursor, clen, MDSL_LIST_MAX, &l);
        if (rc < 0)
            break;
        struct xt_store_slice *nw = l.n ? xt_realloc(v, (nv + l.n) * sizeof *nw) : v;
        if (l.n && !nw) {
            rc = -ENOMEM;
        } else {
            v = nw;
            if (l.n)
                memcpy(v + nv, l.slices, l.n * sizeof *v);
            nv += l.n;
            memcpy(cursor, l.cursor, l.cursor_len);
            clen = l.cursor_len;
            end = l.end || l.n == 0;
        }
        xt_store_list_free(&l);
    }
    pthread_rwlock_unlock(&m->life);
    if (rc < 0) {
        xt_free(v);
        return rc;
    }
    *out = v;
    *n = nv;
    return 0;
}

void mds_store_local_counts(mds_store_local *m, uint32_t site,
                            struct mds_store_local_counts *out)
{
    memset(out, 0, sizeof *out);
    struct lsite *s = site_find(m, site);
    if (!s)
        return;
    pthread_mutex_lock(&m->mu);
    *out = s->cnt;
    pthread_mutex_unlock(&m->mu);
    uint64_t *txids = NULL;
    size_t np = 0;
    pthread_rwlock_rdlock(&m->life);
    if (mdsl_store_prepared(s->store, &txids, &np) == 0)
        out->prepared_now = np;
    pthread_rwlock_unlock(&m->life);
    xt_free(txids);
    struct xt_store_slice *v;
    size_t nv;
    if (mds_store_local_slices(m, site, &v, &nv) == 0)
        out->slices = nv;
    xt_free(v);
}
