/*
 * mdsl_catchup.c -- catch-up of a returning MDSL from its peers
 * (mdsl_catchup.h; docs/mdsl-replicas.md "Catch-up of a returning MDSL").
 * Invariants in the header.
 */
#include "mdsl_catchup.h"

#include "xt_common.h"
#include "xt_ring.h"
#include "xt_rpc_mdsl.h"
#include "xt_time.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define NEED_MAX (1u << 20)      /* needed slices kept per pass (32 B each) */
#define BATCH_BYTES (8u << 20)   /* record bytes held for one local transaction:
                                    loading stops once past it */
#define RETRY_MIN_MS 1000
#define RETRY_MAX_MS 30000

struct mdsl_catchup {
    struct mdsl_catchup_opts o;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* CLOCK_MONOTONIC: stop or attach */
    r2_agent *agent;            /* protected by mu */
    _Atomic bool stop;
    _Atomic int64_t under;      /* invariant 2 */
    _Atomic uint64_t passes, pulled_slices, pulled_bytes;
};

/* One listing walked a page at a time: a peer's (pool) or this MDSL's. */
struct src {
    uint32_t id;                /* site id; 0 for this MDSL */
    xt_rpc_pool *pool;          /* NULL: the local store */
    struct xt_store_list page;
    size_t i;                   /* next entry of page */
    bool end, failed;
};

struct need {
    xt_slice_id id;
    uint64_t version;
    uint32_t peer;              /* index into the peer array */
};

/* Index order of the MDSL listing (mdsl_index.h keys: fsid, table, slice). */
static int id_cmp(xt_slice_id a, xt_slice_id b)
{
    if (a.fsid != b.fsid)
        return a.fsid < b.fsid ? -1 : 1;
    if (a.table != b.table)
        return a.table < b.table ? -1 : 1;
    return a.slice < b.slice ? -1 : a.slice > b.slice;
}

/* The head of s, refilling its page; NULL at its end or after an error
 * (s->failed: the pass is partial). */
static const struct xt_store_slice *head(mdsl_catchup *c, struct src *s)
{
    while (s->i == s->page.n) {
        if (s->end || s->failed)
            return NULL;
        uint8_t cur[XT_STORE_CURSOR_MAX];
        uint32_t clen = s->page.cursor_len;
        memcpy(cur, s->page.cursor, clen);
        xt_store_list_free(&s->page);
        s->i = 0;
        int rc;
        if (s->pool) {
            xt_rpc_call call = { .timeout_ms = c->o.call_timeout_ms };
            rc = xt_mdsl_list_slices(s->pool, &call, cur, clen, c->o.page, &s->page);
        } else {
            rc = mdsl_store_list_slices(c->o.store, cur, clen, c->o.page, &s->page);
        }
        if (rc < 0) {
            XT_WARN("catch-up: listing of MDSL %u failed: %s; the pass is partial", s->id,
                    strerror(-rc));
            s->failed = true;
            return NULL;
        }
        s->end = s->page.end || s->page.n == 0;
    }
    return &s->page.slices[s->i];
}

/* Whether this MDSL (self) should hold slice id: in its replica set, or
 * for fsid 0 among the r lowest ids of ring 1 (the decision sites). */
static bool should_hold(const xt_ring *ring, uint32_t r, uint32_t self, xt_slice_id id)
{
    uint32_t sites[XT_RING_CANDIDATES];
    uint32_t n = id.fsid == 0 ? 0 : xt_ring_replicas(ring, id.fsid, id.table, id.slice, r, sites);
    if (id.fsid == 0)
        for (uint32_t k = 0; k < r; k++)
            if (xt_ring_site_at(ring, k, &sites[n], NULL) == 0)
                n++;
    for (uint32_t k = 0; k < n; k++)
        if (sites[k] == self)
            return true;
    return false;
}

/* The merge (header "pass"): needed slices into *needs (at most NEED_MAX
 * kept; *found counts them all). *partial when a listing failed. */
static int merge(mdsl_catchup *c, const xt_ring *ring, uint32_t r, uint32_t self,
                 struct src *peers, size_t np, struct need **needs, size_t *nneeds,
                 uint64_t *found, bool *partial)
{
    struct src local = { 0 };
    size_t cap = 0;
    int rc = 0;
    *found = 0;
    while (!atomic_load(&c->stop)) {
        const struct xt_store_slice *min = NULL;
        for (size_t p = 0; p < np; p++) {
            const struct xt_store_slice *h = head(c, &peers[p]);
            if (h && (!min || id_cmp(h->id, min->id) < 0))
                min = h;
        }
        if (!min)
            break;
        xt_slice_id id = min->id;
        long best = -1;
        uint64_t bestv = 0;
        for (size_t p = 0; p < np; p++) {
            const struct xt_store_slice *h = head(c, &peers[p]);
            if (!h || !xt_slice_id_eq(h->id, id))
                continue;
            if (h->image && !h->moved && (best < 0 || h->version > bestv)) {
                best = (long)p;
                bestv = h->version;
            }
            peers[p].i++;
        }
        if (best < 0 || !should_hold(ring, r, self, id))
            continue;
        const struct xt_store_slice *l;
        while ((l = head(c, &local)) && id_cmp(l->id, id) < 0)
            local.i++;
        if (local.failed) {
            rc = -EIO;
            break;
        }
        if (l && xt_slice_id_eq(l->id, id) && l->image && l->version >= bestv)
            continue; /* whole here, as new as any peer */
        (*found)++;
        if (*nneeds == NEED_MAX)
            continue; /* counted; the next pass takes it */
        if (*nneeds == cap) {
            size_t nc = cap ? cap * 2 : 256;
            struct need *nv = xt_realloc(*needs, nc * sizeof *nv);
            if (!nv) {
                rc = -ENOMEM;
                break;
            }
            *needs = nv;
            cap = nc;
        }
        (*needs)[(*nneeds)++] = (struct need){ id, bestv, (uint32_t)best };
    }
    xt_store_list_free(&local.page);
    for (size_t p = 0; p < np; p++)
        *partial |= peers[p].failed;
    *partial |= *found > *nneeds;
    return rc;
}

/* The records of load l of slice id, appended to *recs (grown). */
static int add_records(xt_slice_id id, const struct xt_store_load *l, struct xt_store_rec **recs,
                       size_t *n, size_t *cap, uint64_t *bytes)
{
    size_t want = *n + 1 + l->ndeltas;
    if (want > *cap) {
        size_t nc = XT_MAX(want, *cap * 2);
        struct xt_store_rec *nv = xt_realloc(*recs, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        *recs = nv;
        *cap = nc;
    }
    for (size_t k = 0; k <= l->ndeltas; k++) {
        const struct xt_store_blob *b = k == 0 ? &l->image : &l->deltas[k - 1];
        (*recs)[(*n)++] = (struct xt_store_rec){
            .type = k == 0 ? XT_STORE_IMAGE : XT_STORE_DELTA,
            .flags = b->flags & XT_STORE_F_SYS, .id = id, .version = b->version,
            .data = b->data, .len = b->len,
        };
        *bytes += b->len;
    }
    return 0;
}

/* Loads needs[0..n) until about BATCH_BYTES are held (*took: how many
 * were tried, at least one) and stores them: one local transaction for the
 * batch, or slice by slice when the batch is refused. Returns the slices
 * stored. */
static uint64_t pull_batch(mdsl_catchup *c, struct src *peers, const struct need *needs,
                           size_t n, size_t *took)
{
    *took = n;
    struct xt_store_load *loads = xt_calloc(n, sizeof *loads);
    bool *ok = xt_calloc(n, sizeof *ok);
    struct xt_store_rec *recs = NULL;
    size_t nrecs = 0, cap = 0, have = 0;
    uint64_t bytes = 0, stored = 0;
    if (!loads || !ok)
        goto out;
    for (size_t k = 0; k < n && !atomic_load(&c->stop); k++) {
        if (bytes >= BATCH_BYTES) {
            *took = k;
            break;
        }
        xt_rpc_call call = { .timeout_ms = c->o.call_timeout_ms };
        const struct need *d = &needs[k];
        int rc = xt_mdsl_load_slice(peers[d->peer].pool, &call, d->id, &loads[k]);
        if (rc == 0 && !loads[k].has_image)
            rc = -ENODATA; /* the peer lost its image since it listed */
        if (rc == 0)
            rc = add_records(d->id, &loads[k], &recs, &nrecs, &cap, &bytes);
        if (rc < 0) {
            XT_WARN("catch-up: fs %u table %llu slice %u from MDSL %u: %s", d->id.fsid,
                    (unsigned long long)d->id.table, d->id.slice, peers[d->peer].id,
                    strerror(-rc));
            xt_store_load_free(&loads[k]);
            continue;
        }
        ok[k] = true;
        have++;
    }
    if (have == 0)
        goto out;
    int rc = mdsl_store_apply_local(c->o.store, recs, nrecs);
    if (rc == 0) {
        stored = have;
    } else {
        XT_WARN("catch-up: storing %zu slices at once failed (%s); one by one", have,
                strerror(-rc));
        bytes = 0;
        for (size_t k = 0; k < *took && !atomic_load(&c->stop); k++) {
            size_t one = 0;
            uint64_t b = 0;
            if (!ok[k] || add_records(needs[k].id, &loads[k], &recs, &one, &cap, &b) < 0)
                continue;
            rc = mdsl_store_apply_local(c->o.store, recs, one);
            if (rc < 0)
                XT_WARN("catch-up: storing fs %u table %llu slice %u failed: %s",
                        needs[k].id.fsid, (unsigned long long)needs[k].id.table,
                        needs[k].id.slice, strerror(-rc));
            else
                stored++, bytes += b;
        }
    }
    atomic_fetch_add(&c->pulled_slices, stored);
    atomic_fetch_add(&c->pulled_bytes, bytes);
    atomic_fetch_sub(&c->under, (int64_t)stored);
out:
    for (size_t k = 0; loads && k < n; k++)
        xt_store_load_free(&loads[k]);
    xt_free(loads);
    xt_free(ok);
    xt_free(recs);
    return stored;
}

/* One pass against the view v (ring 1 decoded as ring). Returns whether
 * slices are left (a retry is due). */
static bool one_pass(mdsl_catchup *c, const struct xt_view *v, const xt_ring *ring, uint32_t r,
                     uint32_t self)
{
    uint64_t t0 = xt_mono_ns();
    struct src *peers = xt_calloc(v->nsites ? v->nsites : 1, sizeof *peers);
    size_t np = 0;
    for (size_t i = 0; peers && i < v->nsites; i++) {
        const struct xt_site *s = &v->sites[i];
        if (s->type != XT_SITE_MDSL || s->state != XT_SITE_UP || s->id == self ||
            !xt_ring_has_site(ring, s->id))
            continue;
        char host[XT_ADDR_MAX];
        int port;
        struct xt_rpc_pool_opts po = { .host = host, .max_idle = 1,
                                       .call_timeout_ms = c->o.call_timeout_ms };
        if (xt_rpc_parse_addr(s->addr, host, sizeof host, &port) < 0)
            continue;
        po.port = port;
        if (xt_rpc_pool_new(&po, &peers[np].pool) == 0)
            peers[np++].id = s->id;
    }
    struct need *needs = NULL;
    size_t nneeds = 0;
    uint64_t found = 0, stored = 0;
    bool partial = !peers;
    int rc = peers ? merge(c, ring, r, self, peers, np, &needs, &nneeds, &found, &partial) : 0;
    if (rc < 0) {
        XT_WARN("catch-up: pass failed: %s", strerror(-rc));
        partial = true;
    } else if (!atomic_load(&c->stop)) {
        /* invariant 2: the count of this merge replaces the last one */
        atomic_store(&c->under, (int64_t)found);
        atomic_fetch_add(&c->passes, 1);
        if (found)
            XT_INFO("catch-up: %llu slices to copy from %zu peers (r = %u)",
                    (unsigned long long)found, np, r);
    }
    uint64_t b0 = atomic_load(&c->pulled_bytes);
    for (size_t k = 0; rc == 0 && k < nneeds && !atomic_load(&c->stop);) {
        size_t n = 0;
        while (k + n < nneeds && n < c->o.batch)
            n++;
        size_t took;
        stored += pull_batch(c, peers, needs + k, n, &took);
        k += took;
    }
    if (found)
        XT_INFO("catch-up: copied %llu of %llu slices (%llu bytes) in %.1f s%s",
                (unsigned long long)stored, (unsigned long long)found,
                (unsigned long long)(atomic_load(&c->pulled_bytes) - b0),
                (double)(xt_mono_ns() - t0) / 1e9, partial ? "; a listing failed" : "");
    xt_free(needs);
    for (size_t p = 0; p < np; p++) {
        xt_store_list_free(&peers[p].page);
        xt_rpc_pool_free(peers[p].pool);
    }
    xt_free(peers);
    return partial || stored < found;
}

/* The UP MDSL of ring 1 in v, as a signature: a change runs a pass. */
static uint64_t up_signature(const struct xt_view *v, const xt_ring *ring)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < v->nsites; i++) {
        const struct xt_site *s = &v->sites[i];
        if (s->type == XT_SITE_MDSL && s->state == XT_SITE_UP && xt_ring_has_site(ring, s->id))
            h = (h ^ s->id) * 1099511628211ull;
    }
    return h;
}

static void *catchup_thread(void *arg)
{
    mdsl_catchup *c = arg;
    bool done_once = false, left = false;
    uint64_t sig = 0, next_try = 0;
    unsigned retry_ms = RETRY_MIN_MS;
    for (;;) {
        /* until the first pass ran, look every 100 ms: a returning MDSL
         * starts copying as soon as it has an id and a view */
        uint64_t wait_ms = done_once ? c->o.interval_ms : XT_MIN(c->o.interval_ms, 100u);
        pthread_mutex_lock(&c->mu);
        if (!atomic_load(&c->stop))
            (void)xt_cond_wait_until(&c->cv, &c->mu, xt_mono_ns() + wait_ms * 1000000u);
        r2_agent *agent = c->agent;
        pthread_mutex_unlock(&c->mu);
        if (atomic_load(&c->stop))
            break;
        uint32_t self = agent ? r2_agent_site_id(agent) : 0;
        struct xt_view v;
        if (!self || r2_agent_view_copy(agent, &v) < 0)
            continue;
        xt_ring *ring = NULL;
        uint32_t r = 0;
        if (xt_view_ring(&v, XT_RING_MDSL, &ring) == 0 && xt_ring_has_site(ring, self))
            r = XT_MIN(XT_MIN(c->o.replicas, xt_ring_nsites(ring)), XT_RING_CANDIDATES);
        uint64_t now = xt_mono_ns(), s = r > 1 ? up_signature(&v, ring) : 0;
        bool due = r > 1 && (!done_once || s != sig || (left && now >= next_try));
        if (due) {
            sig = s;
            left = one_pass(c, &v, ring, r, self);
            done_once = atomic_load(&c->passes) > 0;
            retry_ms = left ? XT_MIN(retry_ms * 2, RETRY_MAX_MS) : RETRY_MIN_MS;
            next_try = xt_mono_ns() + (uint64_t)(left ? retry_ms / 2 : 0) * 1000000u;
        }
        xt_ring_free(ring);
        xt_view_free(&v);
    }
    return NULL;
}

int mdsl_catchup_start(const struct mdsl_catchup_opts *o, mdsl_catchup **out)
{
    *out = NULL;
    if (!o->store || o->page > MDSL_LIST_MAX)
        return -EINVAL;
    mdsl_catchup *c = xt_calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->o = *o;
    if (!c->o.interval_ms)
        c->o.interval_ms = 1000;
    if (!c->o.page)
        c->o.page = 1024;
    if (!c->o.batch)
        c->o.batch = 16;
    if (!c->o.call_timeout_ms)
        c->o.call_timeout_ms = 30000;
    atomic_init(&c->under, -1);
    pthread_mutex_init(&c->mu, NULL);
    int rc = xt_cond_init_mono(&c->cv);
    if (rc == 0) {
        rc = -pthread_create(&c->th, NULL, catchup_thread, c);
        if (rc < 0)
            pthread_cond_destroy(&c->cv);
    }
    if (rc < 0) {
        pthread_mutex_destroy(&c->mu);
        xt_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void mdsl_catchup_attach(mdsl_catchup *c, r2_agent *agent)
{
    pthread_mutex_lock(&c->mu);
    c->agent = agent;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

void mdsl_catchup_stop(mdsl_catchup *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    bool was = atomic_exchange(&c->stop, true);
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (!was)
        pthread_join(c->th, NULL);
}

void mdsl_catchup_free(mdsl_catchup *c)
{
    if (!c)
        return;
    mdsl_catchup_stop(c);
    pthread_cond_destroy(&c->cv);
    pthread_mutex_destroy(&c->mu);
    xt_free(c);
}

void mdsl_catchup_stat(mdsl_catchup *c, struct mdsl_catchup_stat *st)
{
    memset(st, 0, sizeof *st);
    st->under_replicated = -1;
    if (!c)
        return;
    st->under_replicated = atomic_load(&c->under);
    st->passes = atomic_load(&c->passes);
    st->pulled_slices = atomic_load(&c->pulled_slices);
    st->pulled_bytes = atomic_load(&c->pulled_bytes);
}
