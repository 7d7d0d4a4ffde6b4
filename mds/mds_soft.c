/*
 * mds_soft.c -- the shown, not yet delivered count deltas (mds_soft.h).
 *
 * A fixed array of stripes, each a mutex over a short list: entries exist
 * only for parents with deltas in flight (a commit interval's worth), so
 * lists stay short; every visit to a stripe drops its expired entries.
 * An entry keeps its deltas by id in a small array (a delivery round's
 * worth per parent), searched linearly: d != 0 is a delta shown, d == 0 a
 * tombstone (taken before its add came; eager deltas are never 0).
 */
#include "mds_soft.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>


#include "xt_common.h"
#include "xt_hash.h"
#include "xt_row.h"

#define SOFT_STRIPES 256

struct soft_id {
    uint64_t id;
    int32_t d;               /* 0: a tombstone */
    uint64_t at;             /* xt_mono_ns of its add or take */
};

struct soft_ent {
    struct soft_ent *next;
    uint32_t fsid;
    uint64_t table;
    int32_t delta;           /* the sum of ids[].d */
    uint64_t touched;        /* xt_mono_ns of the last add or take */
    struct soft_id *ids;     /* xt_malloc'd */
    size_t nids, cap;
    size_t len;
    uint8_t name[];
};

struct stripe {
    pthread_mutex_t mu;
    struct soft_ent *head;
    size_t n;
};

struct mds_soft {
    uint64_t ttl_ns;
    struct stripe st[SOFT_STRIPES];
};

int mds_soft_new(unsigned ttl_ms, mds_soft **out)
{
    mds_soft *s = xt_calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    s->ttl_ns = (uint64_t)(ttl_ms ? ttl_ms : 30000) * 1000000u;
    for (size_t i = 0; i < SOFT_STRIPES; i++)
        pthread_mutex_init(&s->st[i].mu, NULL);
    *out = s;
    return 0;
}

static void ent_free(struct soft_ent *e)
{
    xt_free(e->ids);
    xt_free(e);
}

void mds_soft_free(mds_soft *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < SOFT_STRIPES; i++) {
        for (struct soft_ent *e = s->st[i].head, *n; e; e = n) {
            n = e->next;
            ent_free(e);
        }
        pthread_mutex_destroy(&s->st[i].mu);
    }
    xt_free(s);
}

static struct stripe *stripe_of(mds_soft *s, uint64_t table, const void *name, size_t len)
{
    uint64_t h = xt_hash_name(name, len) ^ (table * UINT64_C(0x9e3779b97f4a7c15));
    return &s->st[h % SOFT_STRIPES];
}

static int32_t sat(int64_t v)
{
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

static void unlink_ent(struct stripe *st, struct soft_ent **link)
{
    assert(xt_mutex_held(&st->mu) && st->n > 0);
    struct soft_ent *e = *link;
    *link = e->next;
    st->n--;
    ent_free(e);
}

/* The entry of (fsid, table, name) in st, dropping expired ones on the way
 * (st->mu held). *link: the pointer to it, for unlinking. */
static struct soft_ent *find(mds_soft *s, struct stripe *st, uint32_t fsid, uint64_t table,
                             const void *name, size_t len, struct soft_ent ***link)
{
    assert(xt_mutex_held(&st->mu));
    uint64_t now = xt_mono_ns();
    for (struct soft_ent **p = &st->head; *p;) {
        struct soft_ent *e = *p;
        if (now - e->touched > s->ttl_ns) {
            unlink_ent(st, p);
            continue;
        }
        if (e->fsid == fsid && e->table == table && e->len == len &&
            memcmp(e->name, name, len) == 0) {
            /* Each delta and tombstone lives ttl on its own (invariant
             * 1): a parent busy for hours keeps only the last ttl's. */
            size_t k = 0;
            for (size_t i = 0; i < e->nids; i++) {
                if (now - e->ids[i].at > s->ttl_ns)
                    e->delta = sat((int64_t)e->delta - e->ids[i].d);
                else
                    e->ids[k++] = e->ids[i];
            }
            e->nids = k;
            if (k == 0) {
                unlink_ent(st, p);
                return NULL;
            }
            *link = p;
            return e;
        }
        p = &e->next;
    }
    return NULL;
}


uint64_t mds_soft_id(const uint8_t *outbox_name, size_t len)
{
    /* Not xt_hash_name: a system row's name hashes to its entry's. */
    uint64_t id = xt_hash_bytes(outbox_name, len, 0);
    return id ? id : 1;
}

int mds_soft_ids(const xt_row *row, const uint8_t **ids, size_t *n)
{
    const xt_row_group *g = row ? xt_row_view_group(row, XT_CG_RMU_IDS) : NULL;
    if (!g)
        return -ENOENT;
    if (g->len == 0 || g->len % 8)
        return -EBADMSG;
    *ids = g->ptr;
    *n = g->len / 8;
    return 0;
}

/* The entry of (fsid, table, name), made when absent (st->mu held). */
static struct soft_ent *get_ent(mds_soft *s, struct stripe *st, uint32_t fsid, uint64_t table,
                                const void *name, size_t len, struct soft_ent ***link)
{
    struct soft_ent *e = find(s, st, fsid, table, name, len, link);
    if (e || !(e = xt_malloc(sizeof *e + len)))
        return e;
    assert(len <= XT_NAME_MAX);
    *e = (struct soft_ent){ .next = st->head, .fsid = fsid, .table = table, .len = len };
    memcpy(e->name, name, len);
    st->head = e;
    st->n++;
    *link = &st->head;
    return e;
}

static struct soft_id *id_find(struct soft_ent *e, uint64_t id)
{
    for (size_t i = 0; i < e->nids; i++)
        if (e->ids[i].id == id)
            return &e->ids[i];
    return NULL;
}

static int id_push(struct soft_ent *e, uint64_t id, int32_t d)
{
    if (e->nids == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 4;
        struct soft_id *v = xt_realloc(e->ids, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        e->ids = v;
        e->cap = cap;
    }
    e->ids[e->nids++] = (struct soft_id){ id, d, xt_mono_ns() };
    return 0;
}

/* Removes *i from e (order does not matter). */
static void id_del(struct soft_ent *e, struct soft_id *i)
{
    assert(i >= e->ids && i < e->ids + e->nids);
    *i = e->ids[--e->nids];
}

int mds_soft_add(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                 uint64_t id, int32_t d)
{
    if (id == 0)
        return -EINVAL;
    if (d == 0)
        return 0;
    struct stripe *st = stripe_of(s, table, name, len);
    pthread_mutex_lock(&st->mu);
    struct soft_ent **link, *e = get_ent(s, st, fsid, table, name, len, &link);
    int rc = e ? 0 : -ENOMEM;
    struct soft_id *i = e ? id_find(e, id) : NULL;
    if (i && i->d == 0) {
        id_del(e, i); /* delivered already (2) */
    } else if (e && !i && (rc = id_push(e, id, d)) == 0) {
        e->delta = sat((int64_t)e->delta + d);
    }
    if (e) {
        e->touched = xt_mono_ns();
        if (e->nids == 0)
            unlink_ent(st, link);
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int mds_soft_take(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                  const uint8_t *ids, size_t n)
{
    if (n == 0)
        return 0;
    struct stripe *st = stripe_of(s, table, name, len);
    pthread_mutex_lock(&st->mu);
    struct soft_ent **link, *e = get_ent(s, st, fsid, table, name, len, &link);
    int rc = e ? 0 : -ENOMEM;
    for (size_t k = 0; e && k < n; k++) {
        uint64_t id = xt_get_u64(ids + 8 * k);
        struct soft_id *i = id_find(e, id);
        if (i && i->d != 0) {
            e->delta = sat((int64_t)e->delta - i->d);
            id_del(e, i);
        } else if (!i && id_push(e, id, 0) < 0) {
            rc = -ENOMEM; /* its add, if it comes, is shown until the ttl */
        }
    }
    if (e) {
        e->touched = xt_mono_ns();
        if (e->nids == 0)
            unlink_ent(st, link);
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

int32_t mds_soft_get(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len)
{
    struct stripe *st = stripe_of(s, table, name, len);
    pthread_mutex_lock(&st->mu);
    struct soft_ent **link, *e = find(s, st, fsid, table, name, len, &link);
    int32_t d = e ? e->delta : 0;
    pthread_mutex_unlock(&st->mu);
    return d;
}

int mds_soft_show(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                  uint8_t **row, size_t *row_len)
{
    int32_t d = mds_soft_get(s, fsid, table, name, len);
    if (d == 0)
        return 0;
    xt_row v;
    if (xt_row_decode(*row, *row_len, &v) < 0)
        return -EBADMSG;
    int64_t count = xt_row_count_of(&v.attr);
    if (count == INT64_MIN)
        return 0; /* not a counted directory row (xt_row.h NLINK_ADD) */
    xt_row_count_set(&v.attr, count + d);
    uint8_t *out;
    size_t out_len;
    int rc = xt_row_encode_alloc(&v, &out, &out_len); /* v points into *row: free after */
    if (rc < 0)
        return rc;
    xt_free(*row);
    *row = out;
    *row_len = out_len;
    return 0;
}

size_t mds_soft_count(mds_soft *s)
{
    size_t n = 0;
    for (size_t i = 0; i < SOFT_STRIPES; i++) {
        pthread_mutex_lock(&s->st[i].mu);
        n += s->st[i].n;
        pthread_mutex_unlock(&s->st[i].mu);
    }
    return n;
}
