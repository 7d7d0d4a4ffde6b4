/*
 * mds_store_mem.c -- in-memory two-phase-commit participants (mds_store_mem.h).
 *
 * Invariants (all under m->mu):
 *  (1) A slice's committed state is an image and the deltas after it, in
 *      commit order; a committed image replaces the image and drops the
 *      deltas, as an MDSL load would return them.
 *  (2) A txid is in at most one of: a site's prepared list, its decided
 *      list. Once decided, the decision never changes.
 *  (3) A severed store (sever == 0) changes nothing and answers -ECONNRESET.
 *  (4) The MDSL index rules (mdsl_apply.c 1-3) decide what a committed
 *      record does: an image replaces everything unless a newer image is
 *      there (equal versions replace); a delta is ignored under an image at
 *      its version or newer. A MOVED tombstone is an image like any other
 *      (docs/mdsl-scale.md "Tombstones"): it stays the slice's head until a
 *      newer image, loads of it answer -ESTALE, deltas on it are refused.
 */
#include "mds_store_mem.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "xt_common.h"

#define MEM_BUCKETS 256

struct mslice {
    struct mslice *next;
    uint32_t fsid, slice;
    uint64_t table;
    uint64_t version; /* of the last committed record */
    bool has_image;
    bool moved;       /* the head image is a MOVED tombstone (image empty) */
    bool sys;         /* the last committed record's `sys` */
    struct mds_blob image;
    struct mds_blob *deltas;
    size_t nd;
};

struct mtx {
    struct mtx *next;
    uint64_t txid;
    struct mds_rec *recs; /* bytes owned (cast away const on free) */
    size_t n;
};

struct mdec {
    uint64_t txid;
    bool committed;
};

struct mfault {
    unsigned mask;
    long after, times;
    int err;
    bool after_apply;
};

struct msite {
    uint32_t id;
    struct mslice *bucket[MEM_BUCKETS];
    struct mtx *prepared;
    struct mdec *dec;
    size_t ndec, capdec;
    struct mfault fault;
    bool full;            /* mds_store_mem_full */
    struct mds_store_mem_counts cnt;
};

struct mds_store_mem {
    pthread_mutex_t mu;
    struct msite **sites; /* protected by mu, as everything */
    size_t nsites;
    long sever;           /* -1 off; 0 severed; n: n more calls */
};

mds_store_mem *mds_store_mem_new(void)
{
    mds_store_mem *m = xt_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    pthread_mutex_init(&m->mu, NULL);
    m->sever = -1;
    return m;
}

static void recs_free(struct mds_rec *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        xt_free((void *)r[i].bytes);
    xt_free(r);
}

static void mslice_free(struct mslice *s)
{
    xt_free(s->image.bytes);
    for (size_t i = 0; i < s->nd; i++)
        xt_free(s->deltas[i].bytes);
    xt_free(s->deltas);
    xt_free(s);
}

static void tx_free(struct mtx *t)
{
    recs_free(t->recs, t->n);
    xt_free(t);
}

static void site_drop_prepared(struct msite *s)
{
    while (s->prepared) {
        struct mtx *t = s->prepared;
        s->prepared = t->next;
        tx_free(t);
    }
    s->cnt.prepared_now = 0;
}

void mds_store_mem_free(mds_store_mem *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->nsites; i++) {
        struct msite *s = m->sites[i];
        for (unsigned b = 0; b < MEM_BUCKETS; b++)
            while (s->bucket[b]) {
                struct mslice *sl = s->bucket[b];
                s->bucket[b] = sl->next;
                mslice_free(sl);
            }
        site_drop_prepared(s);
        xt_free(s->dec);
        xt_free(s);
    }
    xt_free(m->sites);
    pthread_mutex_destroy(&m->mu);
    xt_free(m);
}

/* REQUIRES: mu held. NULL on ENOMEM (or when !create and absent). */
static struct msite *site_get(mds_store_mem *m, uint32_t id, bool create)
{
    for (size_t i = 0; i < m->nsites; i++)
        if (m->sites[i]->id == id)
            return m->sites[i];
    if (!create)
        return NULL;
    struct msite *s = xt_calloc(1, sizeof *s);
    struct msite **ns = xt_realloc(m->sites, (m->nsites + 1) * sizeof *ns);
    if (!s || !ns) {
        xt_free(s);
        if (ns)
            m->sites = ns;
        return NULL;
    }
    s->id = id;
    m->sites = ns;
    m->sites[m->nsites++] = s;
    return s;
}

static unsigned slice_bucket(uint32_t fsid, uint64_t table, uint32_t slice)
{
    uint64_t h = table * UINT64_C(0x9e3779b97f4a7c15) ^ ((uint64_t)fsid << 32 | slice);
    h ^= h >> 29;
    return (unsigned)(h % MEM_BUCKETS);
}

static struct mslice *slice_find(struct msite *s, uint32_t fsid, uint64_t table,
                                 uint32_t slice)
{
    for (struct mslice *sl = s->bucket[slice_bucket(fsid, table, slice)]; sl; sl = sl->next)
        if (sl->fsid == fsid && sl->table == table && sl->slice == slice)
            return sl;
    return NULL;
}

static struct mdec *dec_find(struct msite *s, uint64_t txid)
{
    for (size_t i = s->ndec; i-- > 0;)
        if (s->dec[i].txid == txid)
            return &s->dec[i];
    return NULL;
}

static int dec_add(struct msite *s, uint64_t txid, bool committed)
{
    if (s->ndec == s->capdec) {
        size_t nc = s->capdec ? s->capdec * 2 : 64;
        struct mdec *nd = xt_realloc(s->dec, nc * sizeof *nd);
        if (!nd)
            return -ENOMEM;
        s->dec = nd;
        s->capdec = nc;
    }
    s->dec[s->ndec++] = (struct mdec){ txid, committed };
    return 0;
}

static struct mtx *tx_find(struct msite *s, uint64_t txid, bool unlink)
{
    for (struct mtx **pp = &s->prepared; *pp; pp = &(*pp)->next)
        if ((*pp)->txid == txid) {
            struct mtx *t = *pp;
            if (unlink) {
                *pp = t->next;
                s->cnt.prepared_now--;
            }
            return t;
        }
    return NULL;
}

/* Sever and per-site fault checks, in that order. Returns 0 to proceed
 * (with *late_err set when the call must fail after doing its work). */
static int gate(mds_store_mem *m, struct msite *s, unsigned op, int *late_err)
{
    *late_err = 0;
    if (m->sever == 0)
        return -ECONNRESET;
    if (m->sever > 0)
        m->sever--;
    struct mfault *f = &s->fault;
    if (!f->times || !(f->mask & op))
        return 0;
    if (f->after > 0) {
        f->after--;
        return 0;
    }
    if (f->times > 0)
        f->times--;
    s->cnt.failed++;
    if (f->after_apply && (op & (MDS_MEM_PREPARE | MDS_MEM_COMMIT | MDS_MEM_ABORT))) {
        *late_err = f->err;
        return 0;
    }
    return f->err;
}

/* Apply one committed record (invariants 1, 4). Takes ownership of r->bytes
 * on 0 unless the record is ignored (then they stay with r). */
static int apply_rec(struct msite *s, struct mds_rec *r)
{
    struct mslice *sl = slice_find(s, r->fsid, r->table, r->slice);
    if (sl && sl->has_image &&
        (r->full_image ? sl->image.version > r->version : sl->image.version >= r->version))
        return 0; /* under a newer image: the index ignores it */
    if (!sl) {
        sl = xt_calloc(1, sizeof *sl);
        if (!sl)
            return -ENOMEM;
        sl->fsid = r->fsid;
        sl->table = r->table;
        sl->slice = r->slice;
        unsigned b = slice_bucket(r->fsid, r->table, r->slice);
        sl->next = s->bucket[b];
        s->bucket[b] = sl;
        s->cnt.slices++;
    }
    struct mds_blob blob = { r->version, (void *)r->bytes, r->len };
    if (r->full_image) {
        xt_free(sl->image.bytes);
        for (size_t i = 0; i < sl->nd; i++)
            xt_free(sl->deltas[i].bytes);
        sl->nd = 0;
        sl->image = blob;
        sl->has_image = true;
        sl->moved = r->moved;
    } else {
        struct mds_blob *nd = xt_realloc(sl->deltas, (sl->nd + 1) * sizeof *nd);
        if (!nd)
            return -ENOMEM;
        sl->deltas = nd;
        sl->deltas[sl->nd++] = blob;
    }
    sl->version = r->version;
    sl->sys = r->sys;
    r->bytes = NULL;
    return 0;
}

static int mem_prepare(void *ctx, uint32_t site, uint64_t txid, const struct mds_rec *recs,
                       size_t n)
{
    mds_store_mem *m = ctx;
    if (txid == 0 || n == 0 || !recs)
        return -EINVAL;
    pthread_mutex_lock(&m->mu);
    int late, rc;
    struct msite *s = site_get(m, site, true);
    if (!s) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = gate(m, s, MDS_MEM_PREPARE, &late)) < 0)
        goto out;
    for (size_t i = 0; i < n && s->full; i++)
        if (!recs[i].reserve) {
            rc = -ENOSPC; /* only the reserve is left */
            goto out;
        }
    if (tx_find(s, txid, false)) {
        rc = -EEXIST;
        goto out;
    }
    if (dec_find(s, txid)) {
        rc = -EINVAL;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct mslice *sl = slice_find(s, recs[i].fsid, recs[i].table, recs[i].slice);
        if (!recs[i].full_image && sl && sl->moved) {
            rc = -ESTALE; /* a delta on a MOVED head: the writer must send an image */
            goto out;
        }
        if ((recs[i].moved && (!recs[i].full_image || recs[i].len)) ||
            (!recs[i].full_image && (!sl || !sl->has_image)) ||
            (sl && recs[i].version <= sl->version) || (recs[i].len && !recs[i].bytes)) {
            XT_WARN("mem store site %u: txid %llx refused: table %llu slice %u version "
                    "%llu (have %llu, %s)", site, (unsigned long long)txid,
                    (unsigned long long)recs[i].table, recs[i].slice,
                    (unsigned long long)recs[i].version,
                    (unsigned long long)(sl ? sl->version : 0),
                    recs[i].full_image ? "image" : "delta");
            rc = -EINVAL;
            goto out;
        }
    }
    struct mtx *t = xt_calloc(1, sizeof *t);
    struct mds_rec *copy = xt_calloc(n, sizeof *copy);
    if (!t || !copy) {
        xt_free(t);
        xt_free(copy);
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        copy[i] = recs[i];
        copy[i].bytes = NULL;
        void *b = xt_malloc(recs[i].len ? recs[i].len : 1);
        if (!b) {
            recs_free(copy, i);
            xt_free(t);
            rc = -ENOMEM;
            goto out;
        }
        if (recs[i].len)
            memcpy(b, recs[i].bytes, recs[i].len);
        copy[i].bytes = b;
    }
    t->txid = txid;
    t->recs = copy;
    t->n = n;
    t->next = s->prepared;
    s->prepared = t;
    s->cnt.prepared_now++;
    s->cnt.prepares++;
    rc = late;
out:
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static int mem_commit(void *ctx, uint32_t site, uint64_t txid)
{
    mds_store_mem *m = ctx;
    pthread_mutex_lock(&m->mu);
    int late, rc;
    struct msite *s = site_get(m, site, true);
    if (!s) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = gate(m, s, MDS_MEM_COMMIT, &late)) < 0)
        goto out;
    struct mtx *t = tx_find(s, txid, false);
    if (!t) {
        struct mdec *d = dec_find(s, txid);
        rc = !d ? -ENOENT : d->committed ? late : -EINVAL;
        goto out;
    }
    /* Reserve the decision slot first: after it nothing can fail but
     * apply_rec's -ENOMEM, which a real participant would not have. */
    if ((rc = dec_add(s, txid, true)) < 0)
        goto out;
    tx_find(s, txid, true);
    for (size_t i = 0; i < t->n; i++)
        if (apply_rec(s, &t->recs[i]) < 0)
            XT_ERR("mem store site %u: out of memory applying txid %llx", site,
                   (unsigned long long)txid);
    tx_free(t);
    s->cnt.commits++;
    rc = late;
out:
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static int mem_abort(void *ctx, uint32_t site, uint64_t txid)
{
    mds_store_mem *m = ctx;
    pthread_mutex_lock(&m->mu);
    int late, rc;
    struct msite *s = site_get(m, site, true);
    if (!s) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = gate(m, s, MDS_MEM_ABORT, &late)) < 0)
        goto out;
    struct mdec *d = dec_find(s, txid);
    if (d) {
        rc = d->committed ? -EINVAL : late;
        goto out;
    }
    struct mtx *t = tx_find(s, txid, false);
    /* Remember the abort even of an unknown txid: a late prepare of it is
     * then refused (presumed abort fences stragglers). */
    if ((rc = dec_add(s, txid, false)) < 0)
        goto out;
    if (t) {
        tx_find(s, txid, true);
        tx_free(t);
        s->cnt.aborts++;
        rc = late;
    } else {
        rc = -ENOENT;
    }
out:
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static int blob_copy(struct mds_blob *dst, const struct mds_blob *src)
{
    dst->version = src->version;
    dst->len = src->len;
    dst->bytes = xt_malloc(src->len ? src->len : 1);
    if (!dst->bytes)
        return -ENOMEM;
    memcpy(dst->bytes, src->bytes, src->len);
    return 0;
}

static int mem_load(void *ctx, uint32_t site, uint32_t fsid, uint64_t table, uint32_t slice,
                    struct mds_load *out)
{
    mds_store_mem *m = ctx;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&m->mu);
    int late, rc;
    struct msite *s = site_get(m, site, true);
    if (!s) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = gate(m, s, MDS_MEM_LOAD, &late)) < 0)
        goto out;
    struct mslice *sl = slice_find(s, fsid, table, slice);
    if (!sl) {
        rc = -ENOENT;
        goto out;
    }
    if (sl->moved) {
        rc = -ESTALE;
        goto out;
    }
    out->has_image = sl->has_image;
    if (sl->has_image && (rc = blob_copy(&out->image, &sl->image)) < 0)
        goto fail;
    if (sl->nd) {
        out->deltas = xt_calloc(sl->nd, sizeof *out->deltas);
        if (!out->deltas) {
            rc = -ENOMEM;
            goto fail;
        }
        for (size_t i = 0; i < sl->nd; i++, out->ndeltas++)
            if ((rc = blob_copy(&out->deltas[i], &sl->deltas[i])) < 0)
                goto fail;
    }
    s->cnt.loads++;
    rc = 0;
    goto out;
fail:
    mds_load_free(out);
out:
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static int mem_list_prepared(void *ctx, uint32_t site, uint64_t **txids, size_t *n)
{
    mds_store_mem *m = ctx;
    *txids = NULL;
    *n = 0;
    pthread_mutex_lock(&m->mu);
    int late, rc;
    struct msite *s = site_get(m, site, true);
    if (!s) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = gate(m, s, MDS_MEM_LIST, &late)) < 0)
        goto out;
    size_t cnt = 0;
    for (struct mtx *t = s->prepared; t; t = t->next)
        cnt++;
    if (cnt) {
        uint64_t *a = xt_malloc(cnt * sizeof *a);
        if (!a) {
            rc = -ENOMEM;
            goto out;
        }
        size_t i = 0;
        for (struct mtx *t = s->prepared; t; t = t->next)
            a[i++] = t->txid;
        *txids = a;
        *n = cnt;
    }
    s->cnt.lists++;
out:
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* list_slices cursor: the last (fsid, table, slice) returned, big-endian,
 * so that memcmp order is the listing order. */
#define MEM_CURSOR_LEN 16

static void cursor_put(uint8_t *c, const struct mds_store_mem_slice *s)
{
    for (int i = 0; i < 4; i++)
        c[i] = (uint8_t)(s->fsid >> (24 - 8 * i));
    for (int i = 0; i < 8; i++)
        c[4 + i] = (uint8_t)(s->table >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        c[12 + i] = (uint8_t)(s->slice >> (24 - 8 * i));
}

static int slice_cmp(const void *a, const void *b)
{
    uint8_t ca[MEM_CURSOR_LEN], cb[MEM_CURSOR_LEN];
    cursor_put(ca, a);
    cursor_put(cb, b);
    return memcmp(ca, cb, sizeof ca);
}

/* Paged over a sorted snapshot of the site (the MDSL lists its index in
 * key order): each call sorts everything, fine for test sizes. A severed
 * store answers -ECONNRESET; no other fault is injected here. */
static int mem_list_slices(void *ctx, uint32_t site, const void *cursor, uint32_t cursor_len,
                           uint32_t max, struct mds_slice_page *out)
{
    mds_store_mem *m = ctx;
    memset(out, 0, sizeof *out);
    if ((cursor_len != 0 && cursor_len != MEM_CURSOR_LEN) || max == 0)
        return -EINVAL;
    pthread_mutex_lock(&m->mu);
    bool severed = m->sever == 0;
    pthread_mutex_unlock(&m->mu);
    if (severed)
        return -ECONNRESET;
    struct mds_store_mem_slice *all;
    size_t n;
    int rc = mds_store_mem_slices(m, site, &all, &n);
    if (rc)
        return rc;
    if (n)
        qsort(all, n, sizeof *all, slice_cmp);
    size_t i = 0;
    uint8_t c[MEM_CURSOR_LEN];
    while (cursor_len && i < n && (cursor_put(c, &all[i]), memcmp(c, cursor, sizeof c) <= 0))
        i++;
    size_t take = n - i < max ? n - i : max;
    if (take && !(out->v = xt_calloc(take, sizeof *out->v))) {
        xt_free(all);
        return -ENOMEM;
    }
    for (size_t j = 0; j < take; j++) {
        const struct mds_store_mem_slice *sl = &all[i + j];
        out->v[j] = (struct mds_slice_info){ .fsid = sl->fsid, .slice = sl->slice,
                                             .table = sl->table, .version = sl->version,
                                             .moved = sl->moved, .sys = sl->sys };
    }
    out->n = take;
    out->end = i + take == n;
    if (take) {
        cursor_put(out->cursor, &all[i + take - 1]);
        out->cursor_len = MEM_CURSOR_LEN;
    } else if (cursor_len) {
        memcpy(out->cursor, cursor, cursor_len);
        out->cursor_len = cursor_len;
    }
    xt_free(all);
    return 0;
}

static const struct mds_store_ops mem_ops = {
    .prepare = mem_prepare,
    .commit = mem_commit,
    .abort = mem_abort,
    .load = mem_load,
    .list_prepared = mem_list_prepared,
    .list_slices = mem_list_slices,
};

void mds_store_mem_bind(mds_store_mem *m, mds_store *out)
{
    out->ops = &mem_ops;
    out->ctx = m;
}

void mds_store_mem_fail(mds_store_mem *m, uint32_t site, unsigned ops_mask, long after,
                        long times, int err, bool after_apply)
{
    pthread_mutex_lock(&m->mu);
    struct msite *s = site_get(m, site, true);
    if (s)
        s->fault = (struct mfault){ ops_mask, after, times, err, after_apply };
    pthread_mutex_unlock(&m->mu);
}

void mds_store_mem_sever(mds_store_mem *m, long after)
{
    pthread_mutex_lock(&m->mu);
    m->sever = after < 0 ? -1 : after;
    pthread_mutex_unlock(&m->mu);
}

void mds_store_mem_full(mds_store_mem *m, uint32_t site, bool full)
{
    pthread_mutex_lock(&m->mu);
    struct msite *s = site_get(m, site, true);
    if (s)
        s->full = full;
    pthread_mutex_unlock(&m->mu);
}

void mds_store_mem_crash(mds_store_mem *m, uint32_t site, bool lose_prepared)
{
    pthread_mutex_lock(&m->mu);
    struct msite *s = site_get(m, site, false);
    if (s && lose_prepared)
        site_drop_prepared(s);
    pthread_mutex_unlock(&m->mu);
}

int mds_store_mem_slices(mds_store_mem *m, uint32_t site, struct mds_store_mem_slice **out,
                         size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    struct msite *s = site_get(m, site, false);
    size_t cnt = s ? (size_t)s->cnt.slices : 0, i = 0;
    struct mds_store_mem_slice *v = cnt ? xt_calloc(cnt, sizeof *v) : NULL;
    if (cnt && !v)
        rc = -ENOMEM;
    for (unsigned b = 0; v && b < MEM_BUCKETS; b++)
        for (struct mslice *sl = s->bucket[b]; sl; sl = sl->next)
            v[i++] = (struct mds_store_mem_slice){ sl->fsid, sl->slice, sl->table,
                                                   sl->version, sl->moved, sl->sys };
    pthread_mutex_unlock(&m->mu);
    *out = v;
    *n = i;
    return rc;
}

void mds_store_mem_counts(mds_store_mem *m, uint32_t site, struct mds_store_mem_counts *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&m->mu);
    struct msite *s = site_get(m, site, false);
    if (s)
        *out = s->cnt;
    pthread_mutex_unlock(&m->mu);
}
