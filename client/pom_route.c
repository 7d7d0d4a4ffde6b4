/*
 * pom_route.c -- the client's MDS routing: view, pools, bitmap cache (see
 * pom_route.h for the invariants).
 *
 * Locks: `lk` (a rwlock) guards the ring, the MDS array and the bitmap
 * cache; picks take it shared, view updates and bitmap merges exclusive.
 * No RPC is ever made under it.
 *
 * Floor 1.0 of libpomegranate (pom_call_i.h): calls nothing of the library.
 */
#include "pom_route.h"

#include "xt_bitmap.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_ring.h"

#include <pthread.h>
#include <assert.h>
#include <string.h>

#define BUCKETS 4096u
#define MDS_MAX 1024u

struct tbm {
    struct tbm *next;
    uint64_t table;
    xt_bitmap *bm;
};

struct pom_route {
    pthread_rwlock_t lk;
    struct xt_rpc_pool_opts po;  /* host/port filled per MDS */
    struct xt_auth_cred cred;    /* po.cred points here when given */
                                 /* po.tls: a reference of the route's own */
    xt_ring *ring;               /* (lk) NULL: single MDS */
    struct pom_mds **mds;        /* (lk) never freed before pom_route_free */
    size_t nmds;                 /* (lk) */
    struct tbm *bucket[BUCKETS]; /* (lk) */
    size_t ntables;              /* (lk) */
    xt_rpc_pool **retired;       /* (lk) pools of moved MDS (invariant 3) */
    size_t nretired;             /* (lk) */
};

static unsigned bucket_of(uint64_t table)
{
    return (unsigned)((table * UINT64_C(0x9e3779b97f4a7c15)) >> 52) % BUCKETS;
}

static int pool_for(const struct xt_rpc_pool_opts *po, const char *addr, xt_rpc_pool **out)
{
    char host[256];
    int port = 0;
    if (strlen(addr) >= sizeof ((struct pom_mds *)0)->addr ||
        xt_rpc_parse_addr(addr, host, sizeof host, &port) || port <= 0)
        return -EINVAL;
    struct xt_rpc_pool_opts o = *po;
    o.host = host;
    o.port = port;
    return xt_rpc_pool_new(&o, out);
}

static struct pom_mds *mds_new(const struct xt_rpc_pool_opts *po, uint32_t id, const char *addr,
                               int state)
{
    struct pom_mds *m = xt_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->id = id;
    m->state = state;
    if (pool_for(po, addr, &m->pool)) {
        xt_free(m);
        return NULL;
    }
    strcpy(m->addr, addr);
    return m;
}

static pom_route *route_alloc(const struct xt_rpc_pool_opts *po)
{
    pom_route *r = xt_calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->mds = xt_calloc(MDS_MAX, sizeof *r->mds);
    if (!r->mds) {
        xt_free(r);
        return NULL;
    }
    r->po = *po;
    r->po.host = NULL;
    r->po.tls = xt_rpc_tls_ref(po->tls);
    if (po->cred) {
        r->cred = *po->cred;
        r->po.cred = &r->cred;
    }
    pthread_rwlock_init(&r->lk, NULL);
    return r;
}

int pom_route_new_single(const char *addr, const struct xt_rpc_pool_opts *po, pom_route **out)
{
    *out = NULL;
    pom_route *r = route_alloc(po);
    if (!r)
        return -ENOMEM;
    if (!(r->mds[0] = mds_new(po, 0, addr, XT_SITE_UP))) {
        pom_route_free(r);
        return -EINVAL;
    }
    r->nmds = 1;
    *out = r;
    return 0;
}

/* Whether v lists MDS site id (with an address). */
static bool view_has_mds(const struct xt_view *v, uint32_t id)
{
    for (size_t i = 0; i < v->nsites; i++)
        if (v->sites[i].type == XT_SITE_MDS && v->sites[i].addr[0] && v->sites[i].id == id)
            return true;
    return false;
}

/* REQUIRES: lk exclusive. */
static void take_view(pom_route *r, const struct xt_view *v)
{
    assert(xt_rwlock_wrheld(&r->lk));
    /* Invariant 5: a view that carries the site list says which MDS are
     * gone (site remove); one without it (a delta of other sections)
     * says nothing about them. */
    if (v->sections & XT_VIEW_SITES)
        for (size_t k = 0; k < r->nmds; k++)
            if (!view_has_mds(v, r->mds[k]->id))
                r->mds[k]->state = XT_SITE_REMOVED;
    for (size_t i = 0; i < v->nsites; i++) {
        const struct xt_site *s = &v->sites[i];
        if (s->type != XT_SITE_MDS || !s->addr[0])
            continue;
        size_t k = 0;
        while (k < r->nmds && r->mds[k]->id != s->id)
            k++;
        if (k < r->nmds)
            r->mds[k]->state = s->state;
        if (k < r->nmds && strcmp(r->mds[k]->addr, s->addr) == 0)
            continue;
        if (k == MDS_MAX)
            continue;
        if (k < r->nmds) {
            /* Moved (a restart on another port): a new pool, the old one
             * retired (invariant 3); the record and its epochs stay. */
            xt_rpc_pool *p = NULL, **nr;
            if (strlen(s->addr) >= sizeof r->mds[k]->addr || pool_for(&r->po, s->addr, &p))
                continue;
            if (!(nr = xt_realloc(r->retired, (r->nretired + 1) * sizeof *nr))) {
                xt_rpc_pool_free(p);
                continue;
            }
            r->retired = nr;
            r->retired[r->nretired++] = r->mds[k]->pool;
            r->mds[k]->pool = p;
            strcpy(r->mds[k]->addr, s->addr);
            continue;
        }
        struct pom_mds *m = mds_new(&r->po, s->id, s->addr, s->state);
        if (m)
            r->mds[r->nmds++] = m;
    }
    for (size_t i = 0; i < v->nrings; i++) {
        if (v->rings[i].ring != XT_RING_MDS)
            continue;
        xt_ring *ring = NULL;
        if (xt_ring_decode(v->rings[i].data, v->rings[i].len, &ring) < 0)
            continue;
        if (xt_ring_nsites(ring) > 0 &&
            (!r->ring || xt_ring_version(ring) > xt_ring_version(r->ring))) {
            xt_ring_free(r->ring);
            r->ring = ring;
        } else {
            xt_ring_free(ring);
        }
    }
}

int pom_route_new_view(const struct xt_view *v, const struct xt_rpc_pool_opts *po,
                       pom_route **out)
{
    *out = NULL;
    pom_route *r = route_alloc(po);
    if (!r)
        return -ENOMEM;
    pthread_rwlock_wrlock(&r->lk); /* not shared yet: take_view's contract, uncontended */
    take_view(r, v);
    pthread_rwlock_unlock(&r->lk);
    if (r->nmds == 0) {
        pom_route_free(r);
        return -EHOSTUNREACH;
    }
    *out = r;
    return 0;
}

void pom_route_free(pom_route *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nmds; i++) {
        xt_rpc_pool_free(r->mds[i]->pool);
        xt_free(r->mds[i]);
    }
    for (unsigned b = 0; b < BUCKETS; b++)
        while (r->bucket[b]) {
            struct tbm *t = r->bucket[b];
            r->bucket[b] = t->next;
            xt_bitmap_free(t->bm);
            xt_free(t);
        }
    for (size_t i = 0; i < r->nretired; i++)
        xt_rpc_pool_free(r->retired[i]);
    xt_free(r->retired);
    xt_ring_free(r->ring);
    xt_free(r->mds);
    pthread_rwlock_destroy(&r->lk);
    xt_rpc_tls_free(r->po.tls);
    xt_free(r);
}

void pom_route_update(pom_route *r, const struct xt_view *v)
{
    pthread_rwlock_wrlock(&r->lk);
    take_view(r, v);
    pthread_rwlock_unlock(&r->lk);
}

/* REQUIRES: lk held. */
static struct pom_mds *mds_by_id(pom_route *r, uint32_t id)
{
    assert(xt_rwlock_held(&r->lk));
    for (size_t i = 0; i < r->nmds; i++)
        if (r->mds[i]->id == id)
            return r->mds[i];
    return NULL;
}

struct pom_mds *pom_route_find(pom_route *r, uint32_t id)
{
    pthread_rwlock_rdlock(&r->lk);
    struct pom_mds *m = mds_by_id(r, id);
    pthread_rwlock_unlock(&r->lk);
    return m; /* records live until pom_route_free (invariant 3) */
}

struct pom_mds *pom_route_pick(pom_route *r, uint32_t fsid, uint64_t table, uint64_t h,
                               int32_t *slice, xt_rpc_pool **pool)
{
    pthread_rwlock_rdlock(&r->lk);
    uint32_t idx = 0;
    for (struct tbm *t = r->bucket[bucket_of(table)]; t; t = t->next)
        if (t->table == table) {
            idx = xt_bitmap_lookup(t->bm, xt_hash_vh(h));
            break;
        }
    *slice = (int32_t)idx;
    struct pom_mds *m = NULL;
    uint32_t site;
    if (!r->ring)
        m = r->nmds ? r->mds[0] : NULL;
    else if (xt_ring_lookup(r->ring, xt_ring_key(fsid, table, idx), &site) == 0)
        m = mds_by_id(r, site);
    /* An owner we have no address for yet: any serving MDS forwards (one
     * that failed or left would only time out). */
    for (size_t i = 0; !m && i < r->nmds; i++)
        if (r->mds[i]->state == XT_SITE_UP || r->mds[i]->state == XT_SITE_TRANSIENT)
            m = r->mds[i];
    if (!m && r->nmds)
        m = r->mds[0];
    *pool = m ? m->pool : NULL;
    pthread_rwlock_unlock(&r->lk);
    return m;
}

uint64_t pom_route_cookie_hash(uint64_t cookie)
{
    return (uint64_t)xt_bitrev32((uint32_t)(cookie >> 30)) << 32;
}

void pom_route_learn(pom_route *r, uint64_t table, const uint8_t *bm, uint32_t len)
{
    if (!bm || !len)
        return;
    xt_bitmap *in;
    if (xt_bitmap_decode(bm, len, &in) < 0)
        return;
    pthread_rwlock_wrlock(&r->lk);
    unsigned b = bucket_of(table);
    struct tbm *t = r->bucket[b];
    while (t && t->table != table)
        t = t->next;
    if (t) {
        xt_bitmap_merge(t->bm, in); /* on -ENOMEM: a valid, smaller bitmap */
        xt_bitmap_free(in);
    } else if (xt_bitmap_count(in) > 1) { /* slice 0 only is the default */
        if (r->ntables >= POM_ROUTE_TABLES_MAX) { /* invariant 4 */
            for (unsigned k = 0; k < BUCKETS; k++)
                while (r->bucket[k]) {
                    struct tbm *x = r->bucket[k];
                    r->bucket[k] = x->next;
                    xt_bitmap_free(x->bm);
                    xt_free(x);
                }
            r->ntables = 0;
        }
        t = xt_calloc(1, sizeof *t);
        if (t) {
            t->table = table;
            t->bm = in;
            t->next = r->bucket[b];
            r->bucket[b] = t;
            r->ntables++;
        } else {
            xt_bitmap_free(in);
        }
    } else {
        xt_bitmap_free(in);
    }
    pthread_rwlock_unlock(&r->lk);
}

size_t pom_route_all(pom_route *r, struct pom_mds **out, xt_rpc_pool **pools, int *states,
                     size_t cap)
{
    pthread_rwlock_rdlock(&r->lk);
    size_t n = r->nmds;
    for (size_t i = 0; i < n && i < cap; i++) {
        out[i] = r->mds[i];
        pools[i] = r->mds[i]->pool;
        states[i] = r->mds[i]->state;
    }
    pthread_rwlock_unlock(&r->lk);
    return n;
}

int pom_route_state(pom_route *r, const struct pom_mds *m)
{
    pthread_rwlock_rdlock(&r->lk);
    int st = m->state;
    pthread_rwlock_unlock(&r->lk);
    return st;
}
