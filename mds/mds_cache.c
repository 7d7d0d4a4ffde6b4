/*
 * mds_cache.c -- striped slice cache with load-once and LRU eviction
 * (see mds_cache.h for the states and invariants).
 *
 * Each stripe is a chained hash table under its own mutex; its condition
 * variable wakes getters waiting for a LOADING entry of that stripe. The
 * LRU list holds exactly the READY entries with no pin (c->lru_mu). The
 * load itself (a store call and decoding) runs with no lock held.
 */
#include "mds_cache.h"

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "xt_common.h"

enum { CENT_LOADING = 0, CENT_READY = 1, CENT_FAILED = 2 };

struct mds_cent {
    struct mds_cent *hnext;              /* stripe chain (stripe mu) */
    struct mds_cent *lru_prev, *lru_next; /* (c->lru_mu) */
    bool in_lru;                         /* (c->lru_mu) */
    struct mds_key key;                  /* immutable */
    unsigned ref;                        /* pins (stripe mu) */
    int state;                           /* CENT_* (stripe mu) */
    int load_err;                        /* with CENT_FAILED (stripe mu) */
    xt_slice *slice;                     /* set before READY, then immutable */
    size_t bytes, rows;                  /* last measurement (slice lock) */
    struct mds_cent_commit cm;           /* (slice write lock), mds_group's */
    _Atomic uint64_t ring_ver;           /* mds_cent_ring_ver */
};

struct stripe {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* a LOADING entry of this stripe changed state */
    struct mds_cent **bucket; /* (mu) */
    size_t nbucket, n;       /* (mu) */
};

struct mds_cache {
    struct mds_cache_opts o;
    struct stripe *stripe;
    unsigned nstripe;
    pthread_mutex_t lru_mu;
    struct mds_cent *lru_head, *lru_tail; /* head = most recently unpinned */
    _Atomic size_t bytes, rows, entries, pinned;
    _Atomic uint64_t loads, evictions, pressure_calls;
};

static uint64_t key_hash(const struct mds_key *k)
{
    uint64_t h = k->table * UINT64_C(0x9e3779b97f4a7c15);
    h ^= ((uint64_t)k->fsid << 32 | k->slice) * UINT64_C(0xc2b2ae3d27d4eb4f);
    return h ^ (h >> 31);
}

static bool key_eq(const struct mds_key *a, const struct mds_key *b)
{
    return a->fsid == b->fsid && a->table == b->table && a->slice == b->slice;
}

static struct stripe *stripe_of(mds_cache *c, uint64_t h)
{
    return &c->stripe[h % c->nstripe];
}

int mds_cache_new(const struct mds_cache_opts *o, mds_cache **out)
{
    *out = NULL;
    if (!o || !o->store || !o->place)
        return -EINVAL;
    mds_cache *c = xt_calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    c->o = *o;
    c->nstripe = o->stripes ? o->stripes : 64;
    c->stripe = xt_calloc(c->nstripe, sizeof *c->stripe);
    if (!c->stripe) {
        xt_free(c);
        return -ENOMEM;
    }
    for (unsigned i = 0; i < c->nstripe; i++) {
        struct stripe *s = &c->stripe[i];
        pthread_mutex_init(&s->mu, NULL);
        pthread_cond_init(&s->cv, NULL);
    }
    pthread_mutex_init(&c->lru_mu, NULL);
    *out = c;
    return 0;
}

static void cent_free(struct mds_cent *e)
{
    xt_slice_free(e->slice);
    xt_free(e->cm.snap);
    xt_free(e);
}

void mds_cache_free(mds_cache *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->nstripe; i++) {
        struct stripe *s = &c->stripe[i];
        for (size_t b = 0; b < s->nbucket; b++)
            while (s->bucket[b]) {
                struct mds_cent *e = s->bucket[b];
                s->bucket[b] = e->hnext;
                cent_free(e);
            }
        xt_free(s->bucket);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
    xt_free(c->stripe);
    pthread_mutex_destroy(&c->lru_mu);
    xt_free(c);
}

/* REQUIRES: s->mu held. */
static struct mds_cent *stripe_find(struct stripe *s, const struct mds_key *k, uint64_t h)
{
    assert(xt_mutex_held(&s->mu));
    if (!s->nbucket)
        return NULL;
    for (struct mds_cent *e = s->bucket[(h >> 8) % s->nbucket]; e; e = e->hnext)
        if (key_eq(&e->key, k))
            return e;
    return NULL;
}

/* REQUIRES: s->mu held; e not in the stripe. -ENOMEM leaves it unchanged. */
static int stripe_insert(mds_cache *c, struct stripe *s, struct mds_cent *e)
{
    assert(xt_mutex_held(&s->mu));
    if (s->n + 1 > s->nbucket * 2) {
        size_t nb = s->nbucket ? s->nbucket * 2 : 16;
        struct mds_cent **nbk = xt_calloc(nb, sizeof *nbk);
        if (!nbk)
            return -ENOMEM;
        for (size_t b = 0; b < s->nbucket; b++)
            while (s->bucket[b]) {
                struct mds_cent *x = s->bucket[b];
                s->bucket[b] = x->hnext;
                size_t nbi = (key_hash(&x->key) >> 8) % nb;
                x->hnext = nbk[nbi];
                nbk[nbi] = x;
            }
        xt_free(s->bucket);
        s->bucket = nbk;
        s->nbucket = nb;
    }
    size_t bi = (key_hash(&e->key) >> 8) % s->nbucket;
    e->hnext = s->bucket[bi];
    s->bucket[bi] = e;
    s->n++;
    atomic_fetch_add(&c->entries, 1);
    return 0;
}

/* REQUIRES: s->mu held; e in the stripe. */
static void stripe_remove(mds_cache *c, struct stripe *s, struct mds_cent *e)
{
    assert(xt_mutex_held(&s->mu));
    assert(s->n > 0 && s->nbucket > 0);
    struct mds_cent **pp = &s->bucket[(key_hash(&e->key) >> 8) % s->nbucket];
    while (*pp != e)
        pp = &(*pp)->hnext;
    *pp = e->hnext;
    s->n--;
    atomic_fetch_sub(&c->entries, 1);
}

/* REQUIRES: c->lru_mu held. */
static void lru_unlink(mds_cache *c, struct mds_cent *e)
{
    assert(xt_mutex_held(&c->lru_mu));
    assert(e->in_lru);
    if (e->lru_prev)
        e->lru_prev->lru_next = e->lru_next;
    else
        c->lru_head = e->lru_next;
    if (e->lru_next)
        e->lru_next->lru_prev = e->lru_prev;
    else
        c->lru_tail = e->lru_prev;
    e->lru_prev = e->lru_next = NULL;
    e->in_lru = false;
}

/* REQUIRES: stripe mu held. A pin on an entry with no pin takes it off the LRU. */
static void pin_locked(mds_cache *c, struct mds_cent *e)
{
    assert(xt_mutex_held(&stripe_of(c, key_hash(&e->key))->mu));
    if (e->ref++ == 0) {
        atomic_fetch_add(&c->pinned, 1);
        pthread_mutex_lock(&c->lru_mu);
        if (e->in_lru)
            lru_unlink(c, e);
        pthread_mutex_unlock(&c->lru_mu);
    }
}

/* Account e's slice. REQUIRES: e's slice lock held or e not yet published. */
static void measure(mds_cache *c, struct mds_cent *e)
{
    size_t nb = sizeof *e + xt_slice_mem_bytes(e->slice) + e->cm.snap_len;
    /* Users' rows: system rows (transaction state) are not counted. */
    size_t nr = xt_slice_count(e->slice) - xt_slice_sys_count(e->slice);
    atomic_fetch_add(&c->bytes, nb - e->bytes);  /* modular arithmetic */
    atomic_fetch_add(&c->rows, nr - e->rows);
    e->bytes = nb;
    e->rows = nr;
}

void mds_cache_resize(mds_cache *c, mds_cent *e)
{
    measure(c, e);
}

/* Load k's records from the first place that holds a live copy (invariant
 * 7): the current placement's replicas in order, then the previous
 * placement. *site: the place (the first replica of the set, where its
 * records are written), whichever replica answered. *degraded: a replica
 * before the one that answered had no usable copy (docs/mdsl-replicas.md
 * "Reads"). With one replica a record set without an image is handed on as
 * loaded (read_slice refuses it); with more it is a damaged replica. */
static int load_placed(mds_cache *c, const struct mds_key *k, struct xt_store_load *ld,
                       uint32_t *site, bool *degraded)
{
    uint32_t at[2], rs[MDS_REPLICAS_MAX];
    mds_place_locate(c->o.place, k->fsid, k->table, k->slice, &at[0], &at[1]);
    uint32_t nr = mds_place_replicas(c->o.place, k->fsid, k->table, k->slice, rs);
    if (rs[0] != at[0]) { /* the placement changed in between: its owner alone */
        rs[0] = at[0];
        nr = 1;
    }
    const xt_slice_id id = { .fsid = k->fsid, .slice = k->slice, .table = k->table };
    bool moved = false;
    *degraded = false;
    int rc = -ENOENT;
    for (int i = 0; i < (at[1] == at[0] ? 1 : 2); i++) {
        const uint32_t *cand = i == 0 ? rs : &at[1];
        uint32_t n = i == 0 ? nr : 1;
        int unknown = 0;
        for (uint32_t j = 0; j < n; j++) {
            rc = mds_store_load(c->o.store, cand[j], id, ld);
            if (rc == 0 && (ld->has_image || n == 1)) {
                *site = at[i];
                *degraded = j > 0;
                if (j > 0) {
                    XT_INFO("cache: fs %u table %llu slice %u read from replica %u",
                            k->fsid, (unsigned long long)k->table, k->slice, cand[j]);
                    mds_stats_add(c->o.stats, MDS_CTR_REPLICA_FALLBACKS, 1);
                }
                return 0;
            }
            if (rc == 0) {
                xt_store_load_free(ld);
                rc = -EBADMSG; /* deltas without their image: a replica that lost it */
            }
            if (rc == -ESTALE)
                moved = true;
            else if (rc != -ENOENT && !unknown)
                unknown = rc;
            if (n > 1 && rc != -ENOENT && rc != -ESTALE)
                XT_WARN("cache: fs %u table %llu slice %u: replica %u answers %s",
                        k->fsid, (unsigned long long)k->table, k->slice, cand[j],
                        strerror(-rc));
        }
        if (unknown)
            return unknown; /* unknown: the live copy may be there */
    }
    if (moved) /* between a move's two COMMITs, or our view is behind */
        mds_stats_add(c->o.stats, MDS_CTR_MOVED_WAITS, 1);
    return moved ? -EAGAIN : -ENOENT;
}

/* Build the slice of k from its stored records (no lock held): *out, the
 * last record's version, the image and delta bytes, the site holding them.
 * Asks before_load first (invariant 6). */
static int read_slice(mds_cache *c, const struct mds_key *k, xt_slice **out, uint64_t *version,
                      size_t *image_bytes, size_t *delta_bytes, uint32_t *site, bool *fenced,
                      bool *degraded)
{
    *out = NULL;
    *fenced = false;
    *degraded = false;
    int rc = c->o.before_load ? c->o.before_load(c->o.before_load_arg, k, fenced) : 0;
    if (rc < 0)
        return rc;
    struct xt_store_load ld;
    uint64_t t0 = xt_mono_ns();
    rc = load_placed(c, k, &ld, site, degraded);
    if (rc < 0) {
        mds_stats_record(c->o.stats, MDS_OP_LOAD, xt_mono_ns() - t0, rc);
        return rc;
    }
    xt_slice *s = NULL;
    if (!ld.has_image) {
        XT_ERR("cache: fs %u table %llu slice %u: deltas without an image", k->fsid,
               (unsigned long long)k->table, k->slice);
        rc = -EBADMSG;
        goto out;
    }
    rc = xt_slice_decode(ld.image.data, ld.image.len, &s);
    if (rc < 0) {
        XT_ERR("cache: fs %u table %llu slice %u: image v%llu does not decode (%d)",
               k->fsid, (unsigned long long)k->table, k->slice,
               (unsigned long long)ld.image.version, rc);
        goto out;
    }
    *version = ld.image.version;
    *image_bytes = ld.image.len;
    *delta_bytes = 0;
    for (size_t i = 0; i < ld.ndeltas; i++) {
        rc = xt_slice_apply_delta(s, ld.deltas[i].data, ld.deltas[i].len);
        if (rc < 0) {
            XT_ERR("cache: fs %u table %llu slice %u: delta v%llu does not apply (%d)",
                   k->fsid, (unsigned long long)k->table, k->slice,
                   (unsigned long long)ld.deltas[i].version, rc);
            xt_slice_free(s);
            s = NULL;
            goto out;
        }
        *version = ld.deltas[i].version;
        *delta_bytes += ld.deltas[i].len;
    }
    *out = s;
out:
    mds_stats_record(c->o.stats, MDS_OP_LOAD, xt_mono_ns() - t0, rc);
    xt_store_load_free(&ld);
    return rc;
}

uint64_t mds_cache_stamp(mds_cache *c)
{
    return c->o.stamp ? c->o.stamp(c->o.before_load_arg) : 0;
}

static int load_slice(mds_cache *c, const struct mds_key *k, struct mds_cent *e)
{
    atomic_store(&e->ring_ver, mds_cache_stamp(c));
    bool fenced, degraded;
    int rc = read_slice(c, k, &e->slice, &e->cm.version, &e->cm.image_bytes,
                        &e->cm.delta_bytes, &e->cm.site, &fenced, &degraded);
    if (rc < 0)
        return rc;
    if (degraded) /* the next record rewrites every replica whole */
        e->cm.force_image = true;
    if (fenced) {
        e->cm.version += MDS_CACHE_FENCE_GAP;
        e->cm.force_image = true;
    }
    e->cm.durable_mem = xt_slice_mem_bytes(e->slice);
    e->cm.image_mem = e->cm.durable_mem;
    e->cm.durable_rows = xt_slice_count(e->slice);
    XT_DBG("cache: fs %u table %llu slice %u loaded from site %u at v%llu (ring v%llu%s)",
           k->fsid, (unsigned long long)k->table, k->slice, e->cm.site,
           (unsigned long long)e->cm.version,
           (unsigned long long)atomic_load(&e->ring_ver), fenced ? ", fenced" : "");
    measure(c, e);
    return 0;
}

int mds_cache_reread(mds_cache *c, const struct mds_key *k, xt_slice **out, uint64_t *version,
                     uint32_t *site, bool *fenced)
{
    size_t ib, db;
    bool degraded;
    int rc = read_slice(c, k, out, version, &ib, &db, site, fenced, &degraded);
    if (rc < 0)
        *version = 0; /* (a delta that failed may have set it) */
    return rc;
}

int mds_cache_get(mds_cache *c, const struct mds_key *k, mds_cent **out)
{
    *out = NULL;
    uint64_t h = key_hash(k);
    struct stripe *s = stripe_of(c, h);
    pthread_mutex_lock(&s->mu);
    struct mds_cent *e = stripe_find(s, k, h);
    if (e) {
        pin_locked(c, e);
        if (e->state == CENT_LOADING)
            mds_stats_add(c->o.stats, MDS_CTR_CACHE_LOAD_WAITS, 1);
        else
            mds_stats_add(c->o.stats, MDS_CTR_CACHE_HITS, 1);
        while (e->state == CENT_LOADING)
            pthread_cond_wait(&s->cv, &s->mu);
        assert(e->state == CENT_READY || e->state == CENT_FAILED);
        if (e->state == CENT_FAILED) {
            int rc = e->load_err;
            bool last = --e->ref == 0;
            atomic_fetch_sub(&c->pinned, 1);
            pthread_mutex_unlock(&s->mu);
            if (last)
                cent_free(e);
            return rc;
        }
        pthread_mutex_unlock(&s->mu);
        *out = e;
        return 0;
    }
    /* Miss: publish a LOADING placeholder so that other getters wait. */
    mds_stats_add(c->o.stats, MDS_CTR_CACHE_MISSES, 1);
    e = xt_calloc(1, sizeof *e);
    if (!e) {
        pthread_mutex_unlock(&s->mu);
        return -ENOMEM;
    }
    e->key = *k;
    e->ref = 1;
    e->state = CENT_LOADING;
    int rc = stripe_insert(c, s, e);
    if (rc < 0) {
        pthread_mutex_unlock(&s->mu);
        xt_free(e);
        return rc;
    }
    atomic_fetch_add(&c->pinned, 1);
    pthread_mutex_unlock(&s->mu);

    rc = load_slice(c, k, e);
    atomic_fetch_add(&c->loads, 1);

    pthread_mutex_lock(&s->mu);
    bool last = false;
    assert(e->state == CENT_LOADING && e->ref > 0);
    if (rc == 0) {
        assert(e->slice); /* set before READY, then immutable */
        e->state = CENT_READY;
    } else {
        /* Off the table at once, so the next getter retries the load;
         * waiters still hold pins and read load_err. */
        e->state = CENT_FAILED;
        e->load_err = rc;
        stripe_remove(c, s, e);
        last = --e->ref == 0;
        atomic_fetch_sub(&c->pinned, 1);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (rc < 0) {
        if (last)
            cent_free(e);
        return rc;
    }
    *out = e;
    if (c->o.mem_bound && atomic_load(&c->bytes) > c->o.mem_bound)
        mds_cache_evict(c);
    return 0;
}

int mds_cache_peek(mds_cache *c, const struct mds_key *k, mds_cent **out)
{
    *out = NULL;
    uint64_t h = key_hash(k);
    struct stripe *s = stripe_of(c, h);
    pthread_mutex_lock(&s->mu);
    struct mds_cent *e = stripe_find(s, k, h);
    if (e && e->state == CENT_READY) {
        assert(e->slice);
        pin_locked(c, e);
        *out = e;
    }
    pthread_mutex_unlock(&s->mu);
    return *out ? 0 : -ENOENT;
}

int mds_cache_find(mds_cache *c, const struct mds_key *k, mds_cent **out)
{
    *out = NULL;
    uint64_t h = key_hash(k);
    struct stripe *s = stripe_of(c, h);
    pthread_mutex_lock(&s->mu);
    struct mds_cent *e = stripe_find(s, k, h);
    int rc = !e ? -ENOENT : e->state != CENT_READY ? -EBUSY : 0;
    if (rc == 0) {
        pin_locked(c, e);
        *out = e;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int mds_cache_keys(mds_cache *c, struct mds_key **keys, size_t *n)
{
    size_t cap = 0, k = 0;
    struct mds_key *v = NULL;
    *keys = NULL;
    *n = 0;
    for (unsigned i = 0; i < c->nstripe; i++) {
        struct stripe *s = &c->stripe[i];
        pthread_mutex_lock(&s->mu);
        if (k + s->n > cap) {
            size_t ncap = XT_MAX(cap * 2, k + s->n + 64);
            struct mds_key *nv = xt_realloc(v, ncap * sizeof *nv);
            if (!nv) {
                pthread_mutex_unlock(&s->mu);
                xt_free(v);
                return -ENOMEM;
            }
            v = nv;
            cap = ncap;
        }
        for (size_t b = 0; b < s->nbucket; b++)
            for (struct mds_cent *e = s->bucket[b]; e; e = e->hnext)
                v[k++] = e->key;
        assert(k <= cap);
        pthread_mutex_unlock(&s->mu);
    }
    if (k == 0) {
        xt_free(v);
        v = NULL;
    }
    *keys = v;
    *n = k;
    return 0;
}

int mds_cache_add(mds_cache *c, const struct mds_key *k, xt_slice *sl, mds_cent **out)
{
    *out = NULL;
    uint64_t h = key_hash(k);
    struct stripe *s = stripe_of(c, h);
    struct mds_cent *e = xt_calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->key = *k;
    e->ref = 1;
    e->state = CENT_READY;
    e->slice = sl;
    e->cm.site = MDS_SITE_NONE;
    e->ring_ver = mds_cache_stamp(c);
    pthread_mutex_lock(&s->mu);
    int rc = stripe_find(s, k, h) ? -EEXIST : stripe_insert(c, s, e);
    if (rc == 0) {
        atomic_fetch_add(&c->pinned, 1);
        measure(c, e);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc < 0) {
        e->slice = NULL;
        xt_free(e);
        return rc;
    }
    *out = e;
    return 0;
}

void mds_cache_ref(mds_cache *c, mds_cent *e)
{
    struct stripe *s = stripe_of(c, key_hash(&e->key));
    pthread_mutex_lock(&s->mu);
    assert(e->ref > 0); /* REQUIRES: the caller holds a pin */
    pin_locked(c, e);
    pthread_mutex_unlock(&s->mu);
}

void mds_cache_put(mds_cache *c, mds_cent *e)
{
    if (!e)
        return;
    struct stripe *s = stripe_of(c, key_hash(&e->key));
    pthread_mutex_lock(&s->mu);
    assert(e->ref > 0); /* REQUIRES: the caller holds a pin */
    if (--e->ref == 0) {
        /* Only a READY entry is ever unpinned to 0 by a caller: a failed
         * load drops its last pin in mds_cache_get. */
        assert(e->state == CENT_READY);
        atomic_fetch_sub(&c->pinned, 1);
        pthread_mutex_lock(&c->lru_mu);
        assert(!e->in_lru);
        e->lru_prev = NULL;
        e->lru_next = c->lru_head;
        if (c->lru_head)
            c->lru_head->lru_prev = e;
        c->lru_head = e;
        if (!c->lru_tail)
            c->lru_tail = e;
        e->in_lru = true;
        pthread_mutex_unlock(&c->lru_mu);
    }
    pthread_mutex_unlock(&s->mu);
    if (c->o.mem_bound && atomic_load(&c->bytes) > c->o.mem_bound)
        mds_cache_evict(c);
}

void mds_cache_set_pressure(mds_cache *c, void (*fn)(void *arg), void *arg)
{
    c->o.pressure = fn;
    c->o.pressure_arg = arg;
}

int mds_cache_drop(mds_cache *c, const struct mds_key *k)
{
    uint64_t h = key_hash(k);
    struct stripe *s = stripe_of(c, h);
    pthread_mutex_lock(&s->mu);
    struct mds_cent *e = stripe_find(s, k, h);
    int rc = -ENOENT;
    if (e && (e->ref != 0 || e->state != CENT_READY))
        rc = -EBUSY;
    if (e && rc == -ENOENT) {
        pthread_mutex_lock(&c->lru_mu);
        if (e->in_lru) {
            lru_unlink(c, e);
            rc = 0;
        } else {
            rc = -EBUSY;
        }
        pthread_mutex_unlock(&c->lru_mu);
    }
    if (rc == 0) {
        assert(e->ref == 0 && !e->in_lru);
        stripe_remove(c, s, e);
    }
    pthread_mutex_unlock(&s->mu);
    if (rc == 0) {
        atomic_fetch_sub(&c->bytes, e->bytes);
        atomic_fetch_sub(&c->rows, e->rows);
        cent_free(e);
    }
    return rc;
}

int mds_cache_evict(mds_cache *c)
{
    int dropped = 0;
    while (c->o.mem_bound && atomic_load(&c->bytes) > c->o.mem_bound) {
        pthread_mutex_lock(&c->lru_mu);
        struct mds_cent *victim = c->lru_tail;
        struct mds_key k;
        if (victim)
            k = victim->key;
        pthread_mutex_unlock(&c->lru_mu);
        if (!victim) {
            /* Everything left is pinned: mostly dirty slices. Ask the
             * commit group to write them back (invariant 4). */
            atomic_fetch_add(&c->pressure_calls, 1);
            mds_stats_add(c->o.stats, MDS_CTR_CACHE_PRESSURE, 1);
            if (c->o.pressure)
                c->o.pressure(c->o.pressure_arg);
            break;
        }
        /* Retake in lock order, then recheck: the entry may have been pinned
         * or dropped meanwhile (never dereference `victim` before the find). */
        uint64_t h = key_hash(&k);
        struct stripe *s = stripe_of(c, h);
        pthread_mutex_lock(&s->mu);
        struct mds_cent *e = stripe_find(s, &k, h);
        bool take = false;
        if (e && e->ref == 0 && e->state == CENT_READY) {
            pthread_mutex_lock(&c->lru_mu);
            if (e->in_lru) {
                lru_unlink(c, e);
                take = true;
            }
            pthread_mutex_unlock(&c->lru_mu);
        }
        if (take) {
            assert(e->ref == 0 && !e->in_lru);
            stripe_remove(c, s, e);
        }
        pthread_mutex_unlock(&s->mu);
        if (take) {
            atomic_fetch_sub(&c->bytes, e->bytes);
            atomic_fetch_sub(&c->rows, e->rows);
            atomic_fetch_add(&c->evictions, 1);
            mds_stats_add(c->o.stats, MDS_CTR_CACHE_EVICTIONS, 1);
            cent_free(e);
            dropped++;
        }
    }
    return dropped;
}

uint64_t mds_cent_ring_ver(const mds_cent *e)
{
    return atomic_load(&((mds_cent *)e)->ring_ver);
}

void mds_cent_set_ring_ver(mds_cent *e, uint64_t v)
{
    atomic_store(&e->ring_ver, v);
}

xt_slice *mds_cent_slice(mds_cent *e)
{
    return e->slice;
}

const struct mds_key *mds_cent_key(const mds_cent *e)
{
    return &e->key;
}

struct mds_cent_commit *mds_cent_commit(mds_cent *e)
{
    return &e->cm;
}

void mds_cache_info(mds_cache *c, struct mds_cache_info *out)
{
    memset(out, 0, sizeof *out);
    out->entries = atomic_load(&c->entries);
    out->pinned = atomic_load(&c->pinned);
    out->bytes = atomic_load(&c->bytes);
    out->rows = atomic_load(&c->rows);
    out->bound = c->o.mem_bound;
    out->bytes_per_row = out->rows ? (double)out->bytes / (double)out->rows : 0;
    out->loads = atomic_load(&c->loads);
    out->evictions = atomic_load(&c->evictions);
    out->pressure_calls = atomic_load(&c->pressure_calls);
}
