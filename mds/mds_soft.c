/*
 * mds_soft.c -- the shown, not yet delivered count deltas (mds_soft.h).
 *
 * A fixed array of stripes, each a mutex over a short list: entries exist
 * only for parents with deltas in flight (a commit interval's worth), so
 * lists stay short; every visit to a stripe drops its expired entries.
 */
#include "mds_soft.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>


#include "xt_common.h"
#include "xt_hash.h"
#include "xt_row.h"

#define SOFT_STRIPES 256

struct soft_ent {
    struct soft_ent *next;
    uint32_t fsid;
    uint64_t table;
    int32_t delta;
    uint64_t touched;        /* xt_mono_ns of the last eager delta */
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

void mds_soft_free(mds_soft *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < SOFT_STRIPES; i++) {
        for (struct soft_ent *e = s->st[i].head, *n; e; e = n) {
            n = e->next;
            xt_free(e);
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
            *p = e->next;
            st->n--;
            xt_free(e);
            continue;
        }
        if (e->fsid == fsid && e->table == table && e->len == len &&
            memcmp(e->name, name, len) == 0) {
            *link = p;
            return e;
        }
        p = &e->next;
    }
    return NULL;
}

static void unlink_ent(struct stripe *st, struct soft_ent **link)
{
    assert(xt_mutex_held(&st->mu) && st->n > 0);
    struct soft_ent *e = *link;
    *link = e->next;
    st->n--;
    xt_free(e);
}

int mds_soft_add(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                 int32_t d)
{
    if (d == 0)
        return 0;
    struct stripe *st = stripe_of(s, table, name, len);
    pthread_mutex_lock(&st->mu);
    struct soft_ent **link, *e = find(s, st, fsid, table, name, len, &link);
    int rc = 0;
    if (e) {
        int64_t v = (int64_t)e->delta + d;
        e->delta = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
        e->touched = xt_mono_ns();
        if (e->delta == 0)
            unlink_ent(st, link);
    } else if ((e = xt_malloc(sizeof *e + len))) {
        assert(len <= XT_NAME_MAX);
        *e = (struct soft_ent){ .next = st->head, .fsid = fsid, .table = table, .delta = d,
                                .touched = xt_mono_ns(), .len = len };
        memcpy(e->name, name, len);
        st->head = e;
        st->n++;
    } else {
        rc = -ENOMEM;
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

void mds_soft_take(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                   int32_t d)
{
    if (d == 0)
        return;
    struct stripe *st = stripe_of(s, table, name, len);
    pthread_mutex_lock(&st->mu);
    struct soft_ent **link, *e = find(s, st, fsid, table, name, len, &link);
    if (e) {
        /* Exactly what was delivered: the entry sums deltas of both signs
         * (mkdirs and rmdirs), so a partial sum may pass 0 on the way. */
        int64_t v = (int64_t)e->delta - d;
        if (v == 0)
            unlink_ent(st, link);
        else
            e->delta = v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
    }
    pthread_mutex_unlock(&st->mu);
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
