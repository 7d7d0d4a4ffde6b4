/*
 * mds_route.c -- ring 0 ownership, peer connections, handovers, bits to
 * the home and adaptive gossip (see mds_route.h for the invariants and
 * docs/mds-dist.md for the protocol).
 *
 * The background thread ticks every few milliseconds:
 *   1. pending bits whose group committed (invariant 4): drop handed-over
 *      children from the cache, send the table's bitmap to its home when
 *      this MDS is not the home; a pending handover whose group is still
 *      open closes it early (once), so the new owner waits one commit.
 *   2. gossip, when due: the full bitmaps of recently changed tables to one
 *      random peer of ring 0; the interval adapts (invariant 5).
 *   3. after a ring change, the sweep (invariant 6), again every SWEEP_MS
 *      until it finds nothing left to let go (below).
 * A table stays "recently changed" for 2 rounds per peer after its last
 * change, so with random peers every one of them very likely hears of it;
 * forwarding carries bitmaps anyway, gossip only makes loops rarer.
 *
 * What ring 0 changes add (mds_route.h invariants 6 and 7;
 * docs/mds-dist.md decisions 9-15): the sweep that writes back and drops
 * the slices another MDS now owns, the release a new owner asks for before
 * it loads, the fence after a dead holder and the settling of its
 * transactions.
 *
 * Locks: `mu` is never held across an RPC, a group sync or a cache call.
 */
#include "mds_route.h"

#include "xt_common.h"
#include "xt_rpc_mds.h"
#include "xt_time.h"
#include "xt_worker.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#define TICK_MS          5
#define GOSSIP_MAX_TABLES 256  /* bitmaps per gossip message */
#define CHG_MAX          4096  /* recently changed tables remembered */
#define ADDR_CAP         256
#define SWEEP_MS         100   /* a sweep that left work retries after this */
#define DEAD_MS          2000  /* refusing connections this long: dead (7) */
#define RELEASE_MS       5000  /* one release call's timeout */

struct peer {
    uint32_t id;
    char addr[ADDR_CAP];
    xt_rpc_pool *pool;   /* NULL until first used */
    uint64_t clean_ver;  /* its clean_version, as it last told us (7) */
    uint64_t down_since; /* xt_mono_ns of the first refusal in a row; 0: up */
    uint64_t settled;    /* down_since of the spell its transactions were
                            settled in (mds_group_settle_site) */
};

struct pending {
    struct pending *next;
    uint32_t fsid, slice;
    uint64_t table, gen;
    bool owned, home, kicked, told;
    unsigned tries;
};

struct chg {
    uint32_t fsid;
    uint64_t table;
    unsigned rounds;     /* gossip rounds it still goes out in */
};

struct mds_route {
    uint32_t self;
    mds_stats *stats;
    pthread_mutex_t mu;
    xt_ring *ring;               /* (mu) */
    struct peer *peers;          /* (mu) */
    size_t npeers, cap;          /* (mu) */
    xt_rpc_pool **retired;       /* (mu) invariant 3 */
    size_t nretired;             /* (mu) */
    struct pending *pend;        /* (mu) */
    struct chg *chg;             /* (mu) */
    size_t nchg;                 /* (mu) */
    bool started;                /* (mu) the thread runs */
    xt_worker *worker;           /* (mu) the thread; NULL: not running */
    uint64_t next_gossip, next_sweep; /* thread only: deadlines (xt_time.h) */
    mds_table *table;
    mds_group *group;
    mds_cache *cache;
    unsigned gossip_ms;
    unsigned interval;           /* (mu) current gossip interval */
    uint64_t rng;                /* thread only */
    uint64_t swept_ver;          /* (mu) clean_version, invariant 6 */
    xt_ring *hist[MDS_ROUTE_HISTORY]; /* (mu) rings installed before `ring`,
                                        newest first (mds_route_owned_since) */
    uint64_t drained_ver;        /* (mu) ring version "drained" was logged at */
};

/* REQUIRES: mu. */
static struct peer *mds_route_peer_find(mds_route *r, uint32_t id);

/* Step 3 of the thread's tick (below). */
static void mds_route_run_sweep(mds_route *r, uint64_t *next_sweep);

/* Wakes the thread for a tick now. REQUIRES: mu. */
static void wake_locked(mds_route *r)
{
    assert(xt_mutex_held(&r->mu));
    if (r->worker)
        xt_worker_wake(r->worker);
}

int mds_route_new(uint32_t self, mds_stats *stats, mds_route **out)
{
    *out = NULL;
    mds_route *r = xt_calloc(1, sizeof *r);
    if (!r || !(r->chg = xt_calloc(CHG_MAX, sizeof *r->chg))) {
        xt_free(r);
        return -ENOMEM;
    }
    r->self = self;
    r->stats = stats;
    r->rng = xt_mono_ns() ^ ((uint64_t)self << 32) ^ UINT64_C(0x9e3779b97f4a7c15);
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return 0;
}

static void stop_thread(mds_route *r)
{
    pthread_mutex_lock(&r->mu);
    xt_worker *w = r->worker;
    r->worker = NULL;
    r->started = false;
    pthread_mutex_unlock(&r->mu);
    xt_worker_stop(w); /* NULL: never started, or stopped already */
}

void mds_route_free(mds_route *r)
{
    if (!r)
        return;
    stop_thread(r);
    for (size_t i = 0; i < r->npeers; i++)
        xt_rpc_pool_free(r->peers[i].pool);
    for (size_t i = 0; i < r->nretired; i++)
        xt_rpc_pool_free(r->retired[i]);
    while (r->pend) {
        struct pending *p = r->pend;
        r->pend = p->next;
        xt_free(p);
    }
    xt_free(r->retired);
    xt_free(r->peers);
    xt_free(r->chg);
    xt_ring_free(r->ring);
    for (size_t i = 0; i < MDS_ROUTE_HISTORY; i++)
        xt_ring_free(r->hist[i]);
    pthread_mutex_destroy(&r->mu);
    xt_free(r);
}

/* REQUIRES: mu. */
static struct peer *mds_route_peer_find(mds_route *r, uint32_t id)
{
    assert(xt_mutex_held(&r->mu));
    for (size_t i = 0; i < r->npeers; i++)
        if (r->peers[i].id == id)
            return &r->peers[i];
    return NULL;
}

int mds_route_update(mds_route *r, xt_ring *ring0, const struct mds_route_site *sites,
                     size_t n)
{
    int rc = 0;
    pthread_mutex_lock(&r->mu);
    if (ring0 && (!r->ring || xt_ring_version(ring0) > xt_ring_version(r->ring))) {
        if (r->ring)
            XT_INFO("route: ring 0 v%llu -> v%llu (%u MDS)",
                    (unsigned long long)xt_ring_version(r->ring),
                    (unsigned long long)xt_ring_version(ring0), xt_ring_nsites(ring0));
        xt_ring_free(r->hist[MDS_ROUTE_HISTORY - 1]);
        memmove(r->hist + 1, r->hist, (MDS_ROUTE_HISTORY - 1) * sizeof *r->hist);
        r->hist[0] = r->ring;
        r->ring = ring0;
        ring0 = NULL;
        wake_locked(r); /* the sweep (invariant 6) */
    }
    xt_ring_free(ring0);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!sites[i].addr || strlen(sites[i].addr) >= ADDR_CAP)
            continue;
        struct peer *p = mds_route_peer_find(r, sites[i].id);
        if (p && strcmp(p->addr, sites[i].addr) == 0)
            continue;
        if (p) { /* moved: retire the old pool (invariant 3) */
            if (p->pool) {
                xt_rpc_pool **nr = xt_realloc(r->retired, (r->nretired + 1) * sizeof *nr);
                if (!nr) {
                    rc = -ENOMEM;
                    break;
                }
                r->retired = nr;
                r->retired[r->nretired++] = p->pool;
                p->pool = NULL;
            }
            strcpy(p->addr, sites[i].addr);
            continue;
        }
        if (r->npeers == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 8;
            struct peer *np = xt_realloc(r->peers, cap * sizeof *np);
            if (!np) {
                rc = -ENOMEM;
                break;
            }
            r->peers = np;
            r->cap = cap;
        }
        p = &r->peers[r->npeers++];
        memset(p, 0, sizeof *p);
        p->id = sites[i].id;
        strcpy(p->addr, sites[i].addr);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

uint64_t mds_route_ring_version(mds_route *r)
{
    pthread_mutex_lock(&r->mu);
    uint64_t v = r->ring ? xt_ring_version(r->ring) : 0;
    pthread_mutex_unlock(&r->mu);
    return v;
}

bool mds_route_ring_has_self(mds_route *r)
{
    pthread_mutex_lock(&r->mu);
    bool has = r->ring && xt_ring_has_site(r->ring, r->self);
    pthread_mutex_unlock(&r->mu);
    return has;
}

void mds_route_set_self(mds_route *r, uint32_t self)
{
    pthread_mutex_lock(&r->mu);
    r->self = self;
    pthread_mutex_unlock(&r->mu);
}

uint32_t mds_route_self(const mds_route *r)
{
    return r->self;
}

int mds_route_owner(mds_route *r, uint32_t fsid, uint64_t table, uint32_t slice,
                    uint32_t *site)
{
    pthread_mutex_lock(&r->mu);
    int rc = -ENOENT;
    if (r->ring && xt_ring_nsites(r->ring) > 0)
        rc = xt_ring_lookup(r->ring, xt_ring_key(fsid, table, slice), site);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

bool mds_route_owns(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    mds_route *r = arg;
    uint32_t site;
    return mds_route_owner(r, fsid, table, slice, &site) < 0 || site == r->self;
}

xt_rpc_pool *mds_route_pool(mds_route *r, uint32_t site)
{
    pthread_mutex_lock(&r->mu);
    struct peer *p = mds_route_peer_find(r, site);
    xt_rpc_pool *pool = p ? p->pool : NULL;
    if (p && !pool) {
        char host[ADDR_CAP];
        int port = 0;
        if (xt_rpc_parse_addr(p->addr, host, sizeof host, &port) == 0) {
            struct xt_rpc_pool_opts po = { .host = host, .port = port, .max_idle = 32,
                                           .call_timeout_ms = 10000, .backoff_min_ms = 10,
                                           .backoff_max_ms = 200 };
            if (xt_rpc_pool_new(&po, &p->pool) == 0)
                pool = p->pool;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return pool;
}

/* REQUIRES: mu. */
static void changed_locked(mds_route *r, uint32_t fsid, uint64_t table)
{
    assert(xt_mutex_held(&r->mu));
    unsigned rounds = 2 * (unsigned)(r->ring ? XT_MAX(xt_ring_nsites(r->ring), 1u) : 1u);
    size_t free_slot = CHG_MAX;
    for (size_t i = 0; i < r->nchg; i++) {
        if (r->chg[i].fsid == fsid && r->chg[i].table == table) {
            r->chg[i].rounds = rounds;
            return;
        }
        if (r->chg[i].rounds == 0 && free_slot == CHG_MAX)
            free_slot = i;
    }
    if (free_slot == CHG_MAX && r->nchg < CHG_MAX)
        free_slot = r->nchg++;
    if (free_slot == CHG_MAX)
        return; /* full: forwarding still carries the bits */
    r->chg[free_slot] = (struct chg){ fsid, table, rounds };
}

void mds_route_changed(mds_route *r, uint32_t fsid, uint64_t table)
{
    pthread_mutex_lock(&r->mu);
    changed_locked(r, fsid, table);
    pthread_mutex_unlock(&r->mu);
}

void mds_route_on_bit(void *arg, uint32_t fsid, uint64_t table, uint32_t slice, uint64_t gen,
                      bool owned, bool home)
{
    mds_route *r = arg;
    pthread_mutex_lock(&r->mu);
    /* Every bit waits for its commit before anyone hears of it
     * (mds_table.h invariant 9): gossip starts in run_pending. */
    struct pending *p = xt_calloc(1, sizeof *p);
    if (p) {
        *p = (struct pending){ .next = r->pend, .fsid = fsid, .slice = slice,
                               .table = table, .gen = gen, .owned = owned, .home = home };
        r->pend = p;
    } else {
        /* Lost: a handed-over child stays cached (clean); peers learn the
         * bit from the repair at load. */
        XT_WARN("route: out of memory noting slice %u of table %llu", slice,
                (unsigned long long)table);
    }
    wake_locked(r);
    pthread_mutex_unlock(&r->mu);
}

unsigned mds_route_gossip_interval(mds_route *r)
{
    pthread_mutex_lock(&r->mu);
    unsigned v = r->gossip_ms ? r->interval : 0;
    pthread_mutex_unlock(&r->mu);
    return v;
}

/* Sends the table's bitmap to site. 0 or -errno. */
static int send_bitmap(mds_route *r, uint32_t site, uint32_t fsid, uint64_t table,
                       uint32_t *new_bits)
{
    xt_rpc_pool *pool = mds_route_pool(r, site);
    if (!pool)
        return -EHOSTUNREACH;
    uint8_t *bm = NULL;
    size_t len = 0;
    int rc = mds_table_bitmap(r->table, fsid, table, &bm, &len);
    if (rc < 0)
        return rc;
    struct xt_table_bitmap tb = { fsid, table, bm, (uint32_t)len };
    xt_rpc_call call = { .timeout_ms = 5000 };
    rc = xt_mds_gossip(pool, &call, r->self, &tb, 1, new_bits);
    xt_free(bm);
    return rc;
}

/* Step 1 of the tick (invariant 4). */
static void run_pending(mds_route *r)
{
    struct mds_group_info gi;
    mds_group_info(r->group, &gi);
    pthread_mutex_lock(&r->mu);
    struct pending *ready = NULL, **pp = &r->pend;
    bool kick = false;
    while (*pp) {
        struct pending *p = *pp;
        if (p->gen == 0 || p->gen <= gi.committed_gen) {
            *pp = p->next;
            p->next = ready;
            ready = p;
            continue;
        }
        if (!p->owned && !p->kicked) {
            p->kicked = true;
            kick = true;
        }
        pp = &p->next;
    }
    pthread_mutex_unlock(&r->mu);
    if (kick)
        mds_group_kick(r->group); /* the new owner waits for this commit */
    while (ready) {
        struct pending *p = ready;
        ready = p->next;
        bool again = false;
        if (!p->told) {
            int rc = mds_table_settle_bit(r->table, p->fsid, p->table, p->slice);
            if (rc < 0)
                XT_WARN("route: fs %u table %llu: slice %u stays untold (%s)", p->fsid,
                        (unsigned long long)p->table, p->slice, strerror(-rc));
            p->told = true;
            mds_route_changed(r, p->fsid, p->table); /* gossip it */
        }
        if (!p->owned) {
            struct mds_key k = { p->fsid, p->slice, p->table };
            int rc = mds_cache_drop(r->cache, &k);
            if (rc == -EBUSY && p->tries < 200) {
                again = true; /* a reader still pins it: try next tick */
            } else {
                if (rc == 0) /* (a repaired bit has nothing cached here) */
                    mds_stats_add(r->stats, MDS_CTR_HANDOVERS, 1);
                else if (rc == -EBUSY) /* harmless: the copy is never trusted */
                    XT_DBG("route: fs %u table %llu: handed-over slice %u stays cached (pinned)",
                           p->fsid, (unsigned long long)p->table, p->slice);
                p->owned = true; /* done with the handover part */
            }
        }
        if (!again && !p->home) {
            uint32_t home;
            int rc = mds_route_owner(r, p->fsid, p->table, 0, &home);
            if (rc == 0 && home != r->self)
                rc = send_bitmap(r, home, p->fsid, p->table, NULL);
            if (rc == 0) {
                mds_stats_add(r->stats, MDS_CTR_BITS_HOME, 1);
                p->home = true;
            } else if (p->tries < 1000) {
                again = true; /* the home is down or restarting: keep trying */
            } else {
                XT_WARN("route: could not send slice %u of table %llu home (%s); gossip "
                        "and the repair at load will", p->slice,
                        (unsigned long long)p->table, strerror(-rc));
            }
        }
        if (again) {
            p->tries++;
            p->gen = 0;
            pthread_mutex_lock(&r->mu);
            p->next = r->pend;
            r->pend = p;
            pthread_mutex_unlock(&r->mu);
        } else {
            xt_free(p);
        }
    }
}

/* Step 2: one gossip round. Returns whether the peer learnt new bits, or
 * -1 when there was nothing to say. */
static int gossip_round(mds_route *r)
{
    struct { uint32_t fsid; uint64_t table; } keys[GOSSIP_MAX_TABLES];
    size_t nk = 0;
    uint32_t peer = 0;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nchg && nk < GOSSIP_MAX_TABLES; i++)
        if (r->chg[i].rounds > 0) {
            r->chg[i].rounds--;
            keys[nk].fsid = r->chg[i].fsid;
            keys[nk].table = r->chg[i].table;
            nk++;
        }
    uint32_t nsites = r->ring ? xt_ring_nsites(r->ring) : 0;
    bool have_peer = false;
    if (nk && nsites > 1) {
        r->rng = r->rng * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
        uint32_t k = (uint32_t)((r->rng >> 33) % (nsites - 1)), seen = 0;
        for (uint32_t i = 0; i < nsites; i++) {
            uint32_t id, w;
            if (xt_ring_site_at(r->ring, i, &id, &w) < 0 || id == r->self)
                continue;
            if (seen++ == k) {
                peer = id;
                have_peer = true;
                break;
            }
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (!nk || !have_peer)
        return -1;
    xt_rpc_pool *pool = mds_route_pool(r, peer);
    if (!pool)
        return -1;
    struct xt_table_bitmap tb[GOSSIP_MAX_TABLES];
    uint8_t *bufs[GOSSIP_MAX_TABLES];
    size_t n = 0;
    for (size_t i = 0; i < nk; i++) {
        size_t len;
        if (mds_table_bitmap(r->table, keys[i].fsid, keys[i].table, &bufs[n], &len) < 0)
            continue;
        tb[n] = (struct xt_table_bitmap){ keys[i].fsid, keys[i].table, bufs[n], (uint32_t)len };
        n++;
    }
    uint32_t new_bits = 0;
    xt_rpc_call call = { .timeout_ms = 5000 };
    int rc = n ? xt_mds_gossip(pool, &call, r->self, tb, n, &new_bits) : -ENOENT;
    for (size_t i = 0; i < n; i++)
        xt_free(bufs[i]);
    if (rc < 0)
        return 0;
    mds_stats_add(r->stats, MDS_CTR_GOSSIP_ROUNDS, 1);
    if (new_bits)
        mds_stats_add(r->stats, MDS_CTR_GOSSIP_SENT_BITS, 1);
    return new_bits > 0;
}

void mds_route_flush(mds_route *r)
{
    if (!r || !r->table)
        return;
    stop_thread(r);
    run_pending(r); /* (each bit once: one that fails stays for the repair) */
}

/* One tick of the thread (the file comment's steps 1-3); the next in
 * TICK_MS, or at once after a wake. */
static uint64_t route_step(xt_worker *w, void *arg)
{
    mds_route *r = arg;
    (void)w;
    run_pending(r);
    mds_route_run_sweep(r, &r->next_sweep);
    if (r->gossip_ms && xt_deadline_passed(r->next_gossip)) {
        int learnt = gossip_round(r);
        pthread_mutex_lock(&r->mu);
        if (learnt > 0)
            r->interval = XT_MAX(r->interval / 2, (unsigned)MDS_GOSSIP_MIN_MS);
        else
            r->interval = XT_MIN(r->interval * 2, (unsigned)MDS_GOSSIP_MAX_MS);
        unsigned iv = r->interval;
        pthread_mutex_unlock(&r->mu);
        r->next_gossip = xt_deadline_ms(iv);
    }
    return TICK_MS;
}

int mds_route_start(mds_route *r, mds_table *table, mds_group *group, mds_cache *cache,
                    unsigned gossip_ms)
{
    if (!table || !group || !cache)
        return -EINVAL;
    r->table = table;
    r->group = group;
    r->cache = cache;
    r->gossip_ms = gossip_ms;
    r->interval = gossip_ms ? XT_MIN(XT_MAX(gossip_ms, (unsigned)MDS_GOSSIP_MIN_MS),
                                     (unsigned)MDS_GOSSIP_MAX_MS)
                            : 0;
    r->next_gossip = xt_mono_ns();
    struct xt_worker_opts wo = { .name = "mds-route", .step = route_step, .arg = r,
                                 .first_ms = TICK_MS };
    pthread_mutex_lock(&r->mu);
    assert(!r->worker);
    int rc = xt_worker_start(&wo, &r->worker);
    r->started = rc == 0;
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* ==== ring 0 changes: sweep, release, fence, settling ======================= */

static bool is_transport_down(int rc)
{
    return rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ENETUNREACH ||
           rc == -ECONNRESET || rc == -EPIPE;
}

/* The slice whose owner owns key k: a meta slice goes with slice 0. */
static uint32_t owner_slice(const struct mds_key *k)
{
    return k->slice == MDS_META_SLICE ? 0 : k->slice;
}

/* Whether ring 0 gives key k to this MDS. */
static bool owns_key(mds_route *r, const struct mds_key *k)
{
    return mds_route_owns(r, k->fsid, k->table, owner_slice(k));
}

uint64_t mds_route_stamp(void *arg)
{
    return mds_route_ring_version(arg);
}

bool mds_route_owned_since(void *arg, const struct mds_key *k, uint64_t since, uint64_t *now)
{
    mds_route *r = arg;
    uint64_t key = xt_ring_key(k->fsid, k->table, owner_slice(k));
    pthread_mutex_lock(&r->mu);
    *now = r->ring ? xt_ring_version(r->ring) : 0;
    bool ok = true;
    if (since && since < *now) {
        /* The rings after `since` are the current one (checked by the
         * caller) and the history down to `since` exclusive. */
        size_t i = 0;
        for (; i < MDS_ROUTE_HISTORY && r->hist[i] && xt_ring_version(r->hist[i]) > since; i++) {
            uint32_t site;
            if (xt_ring_lookup(r->hist[i], key, &site) == 0 && site != r->self)
                ok = false;
        }
        if (i == MDS_ROUTE_HISTORY)
            ok = false; /* rings between `since` and the oldest kept are forgotten */
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

bool mds_route_unsettled(void *arg, const struct mds_key *k)
{
    mds_route *r = arg;
    uint64_t key = xt_ring_key(k->fsid, k->table, owner_slice(k));
    pthread_mutex_lock(&r->mu);
    uint64_t cur = r->ring ? xt_ring_version(r->ring) : 0;
    bool unsettled = false;
    for (size_t i = 0; r->started && i < r->npeers && !unsettled; i++) {
        const struct peer *p = &r->peers[i];
        if (p->id == r->self || p->clean_ver >= cur)
            continue; /* on our ring (or newer) and swept: takes nothing of ours */
        if (p->down_since && p->settled == p->down_since)
            continue; /* dead, its transactions settled: loads nothing */
        /* p may still use any ring from its clean version up to ours: one
         * of them giving it k, or one we never saw or forgot, is enough. */
        uint64_t floor = XT_MAX(p->clean_ver, 1), next = cur - 1;
        for (size_t h = 0; next >= floor && !unsettled; h++, next--) {
            uint32_t site;
            if (h == MDS_ROUTE_HISTORY || !r->hist[h] || xt_ring_version(r->hist[h]) != next)
                unsettled = true;
            else if (xt_ring_lookup(r->hist[h], key, &site) == 0 && site == p->id)
                unsettled = true;
        }
    }
    pthread_mutex_unlock(&r->mu);
    return unsettled;
}

/* A peer dead for DEAD_MS: settle the transactions it left prepared
 * before anything of its is loaded (once per down spell), so that none
 * of its commits lands later. 0 or the store's error. */
static int settle_dead(mds_route *r, uint32_t id)
{
    pthread_mutex_lock(&r->mu);
    struct peer *p = mds_route_peer_find(r, id);
    uint64_t spell = p ? p->down_since : 0;
    bool done = !p || p->settled == spell;
    pthread_mutex_unlock(&r->mu);
    if (done)
        return 0;
    int rc = mds_group_settle_site(r->group, id);
    if (rc < 0) {
        XT_WARN("route: cannot settle the transactions of dead MDS %u: %s", id, strerror(-rc));
        return rc;
    }
    XT_INFO("route: MDS %u is dead: its prepared transactions are settled", id);
    pthread_mutex_lock(&r->mu);
    if ((p = mds_route_peer_find(r, id)) && p->down_since == spell)
        p->settled = spell;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* Asks MDS id to release k (one step of ask_release). */
static int ask_one(mds_route *r, const struct mds_key *k, uint32_t id, uint64_t ver, bool *fence)
{
    xt_rpc_pool *pool = mds_route_pool(r, id);
    if (!pool)
        return 0; /* no address: it never was reachable */
    xt_rpc_call call = { .timeout_ms = RELEASE_MS };
    uint64_t clean = 0;
    int rc = xt_mds_release(pool, &call, r->self, k->fsid, k->table, k->slice, ver, &clean);
    uint64_t now = xt_mono_ns();
    bool dead = false;
    pthread_mutex_lock(&r->mu);
    struct peer *p = mds_route_peer_find(r, id);
    if (p && (rc == 0 || rc == -EAGAIN)) {
        p->down_since = 0;
        p->clean_ver = XT_MAX(p->clean_ver, clean);
    } else if (p && is_transport_down(rc)) {
        if (!p->down_since)
            p->down_since = now;
        dead = now - p->down_since >= (uint64_t)DEAD_MS * 1000000u;
    }
    pthread_mutex_unlock(&r->mu);
    if (rc == 0)
        return 0;
    if (dead && settle_dead(r, id) == 0) {
        *fence = true;
        return 0;
    }
    XT_DBG("route: fs %u table %llu slice %u: MDS %u has not released it (%d)", k->fsid,
           (unsigned long long)k->table, k->slice, id, rc);
    mds_stats_add(r->stats, MDS_CTR_RELEASE_WAITS, 1);
    return -EAGAIN;
}

/* Asks every other MDS whose clean version is below our ring's to release
 * k (invariant 7). 0, or -EAGAIN when one has not let go. *fence: a dead
 * one was skipped (after its transactions were settled). */
static int ask_release(mds_route *r, const struct mds_key *k, bool *fence)
{
    pthread_mutex_lock(&r->mu);
    uint64_t ver = r->ring ? xt_ring_version(r->ring) : 0;
    size_t na = 0;
    for (size_t i = 0; r->started && ver && i < r->npeers; i++)
        na += r->peers[i].id != r->self && r->peers[i].clean_ver < ver;
    /* Every MDS not known clean, however many (usually none: no copy). */
    uint32_t *ask = na ? xt_malloc(na * sizeof *ask) : NULL;
    size_t n = 0;
    for (size_t i = 0; ask && i < r->npeers; i++)
        if (r->peers[i].id != r->self && r->peers[i].clean_ver < ver)
            ask[n++] = r->peers[i].id;
    pthread_mutex_unlock(&r->mu);
    if (na && !ask)
        return -ENOMEM;
    na = n;
    int rc = 0;
    for (size_t i = 0; i < na && rc == 0; i++)
        rc = ask_one(r, k, ask[i], ver, fence);
    xt_free(ask);
    return rc;
}

int mds_route_before_load(void *arg, const struct mds_key *k, bool *fence)
{
    mds_route *r = arg;
    *fence = false;
    /* Only an owner changes what it loads; a non-home MDS reading a meta
     * slice takes whatever is stored (bitmaps only grow). */
    if (!owns_key(r, k))
        return 0;
    return ask_release(r, k, fence);
}

/* Lets k go and commits it: 0, or -EAGAIN (loading, or the commit did not
 * finish in time: ask again). */
static int let_go_commit(mds_route *r, const struct mds_key *k, unsigned timeout_ms)
{
    uint64_t gen = 0;
    if (mds_table_let_go(r->table, k, &gen) < 0)
        return -EAGAIN;
    struct mds_group_info gi;
    mds_group_info(r->group, &gi);
    if (gen > gi.committed_gen && mds_group_sync(r->group, gen, timeout_ms) < 0)
        return -EAGAIN;
    return 0;
}

int mds_route_release(mds_route *r, uint32_t from_site, const struct mds_key *k,
                      uint64_t ring_version, uint64_t *clean_version)
{
    pthread_mutex_lock(&r->mu);
    uint64_t ver = r->ring ? xt_ring_version(r->ring) : 0;
    bool started = r->started;
    *clean_version = r->swept_ver;
    /* The asker holds it from now on: before it is let go here, so that a
     * load of ours that could miss the asker's copy is already loading
     * (and refuses below) or asks the asker first. An asker on our own
     * ring owns k under it, so it stays as clean as it was for that ring
     * (clean_ver is about slices held but not owned): resetting it then
     * made every load of both ask each other from the first ask on, K - 1
     * release calls per cache miss for good. */
    struct peer *p = mds_route_peer_find(r, from_site);
    if (p && started && ver > ring_version)
        p->clean_ver = 0;
    pthread_mutex_unlock(&r->mu);
    if (!started || ver < ring_version || owns_key(r, k))
        return -EAGAIN; /* our ring is older, or the asker's */
    int rc = let_go_commit(r, k, RELEASE_MS / 2);
    if (rc == 0 && k->slice != MDS_META_SLICE)
        rc = mds_table_drop_let_go(r->table, k);
    if (rc == 0)
        mds_stats_add(r->stats, MDS_CTR_RELEASES, 1);
    XT_DBG("route: fs %u table %llu slice %u: released to MDS %u (ring 0 v%llu): %d", k->fsid,
           (unsigned long long)k->table, k->slice, from_site, (unsigned long long)ring_version,
           rc);
    return rc;
}

static bool owns_key_fn(void *r, const struct mds_key *k)
{
    return owns_key(r, k);
}

/* One sweep (invariant 6): the number of slices (and home roles) still to
 * let go. */
static int sweep(mds_route *r)
{
    size_t dropped;
    int todo = mds_table_sweep(r->table, owns_key_fn, r, &dropped);
    if (dropped)
        mds_stats_add(r->stats, MDS_CTR_SLICES_MOVED, dropped);
    return todo;
}

/* Step 3 of the tick (the file comment). */
static void mds_route_run_sweep(mds_route *r, uint64_t *next_sweep)
{
    pthread_mutex_lock(&r->mu);
    uint64_t ver = r->ring ? xt_ring_version(r->ring) : 0;
    bool due = ver > r->swept_ver && xt_mono_ns() >= *next_sweep;
    pthread_mutex_unlock(&r->mu);
    if (!due)
        return;
    uint64_t t0 = xt_mono_ns();
    int todo = sweep(r);
    pthread_mutex_lock(&r->mu);
    uint64_t now_ver = r->ring ? xt_ring_version(r->ring) : 0;
    bool done = todo == 0 && now_ver == ver;
    if (done)
        r->swept_ver = ver;
    bool drained = done && !xt_ring_has_site(r->ring, r->self) && r->drained_ver != ver;
    if (drained)
        r->drained_ver = ver;
    pthread_mutex_unlock(&r->mu);
    if (done)
        XT_INFO("route: ring 0 v%llu: swept in %.1f ms, nothing held for another MDS",
                (unsigned long long)ver, (double)(xt_mono_ns() - t0) / 1e6);
    if (drained)
        XT_INFO("route: drained (ring 0 v%llu): this MDS owns no slice and holds none",
                (unsigned long long)ver);
    *next_sweep = done ? 0 : xt_mono_ns() + (uint64_t)SWEEP_MS * 1000000u;
}
