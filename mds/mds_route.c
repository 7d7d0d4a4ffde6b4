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
 *      until it finds nothing left to let go (mds_route_move.c).
 * A table stays "recently changed" for 2 rounds per peer after its last
 * change, so with random peers every one of them very likely hears of it;
 * forwarding carries bitmaps anyway, gossip only makes loops rarer.
 */
#include "mds_route.h"
#include "mds_route_i.h"

#include "xt_common.h"
#include "xt_rpc_mds.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

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
    pthread_cond_init(&r->cv, NULL);
    *out = r;
    return 0;
}

static void stop_thread(mds_route *r)
{
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    bool started = r->started;
    r->started = false;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    if (started)
        pthread_join(r->th, NULL);
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
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mu);
    xt_free(r);
}

/* REQUIRES: mu. */
struct peer *mds_route_peer_find(mds_route *r, uint32_t id)
{
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
        pthread_cond_broadcast(&r->cv); /* the sweep (invariant 6) */
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
    pthread_cond_broadcast(&r->cv);
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

static void *route_main(void *arg)
{
    mds_route *r = arg;
    uint64_t next_gossip = xt_mono_ns(), next_sweep = 0;
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->cv, &r->mu, &ts);
        if (r->stop)
            break;
        pthread_mutex_unlock(&r->mu);
        run_pending(r);
        mds_route_run_sweep(r, &next_sweep);
        if (r->gossip_ms && xt_mono_ns() >= next_gossip) {
            int learnt = gossip_round(r);
            pthread_mutex_lock(&r->mu);
            if (learnt > 0)
                r->interval = XT_MAX(r->interval / 2, (unsigned)MDS_GOSSIP_MIN_MS);
            else
                r->interval = XT_MIN(r->interval * 2, (unsigned)MDS_GOSSIP_MAX_MS);
            unsigned iv = r->interval;
            pthread_mutex_unlock(&r->mu);
            next_gossip = xt_mono_ns() + (uint64_t)iv * 1000000u;
        }
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
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
    pthread_mutex_lock(&r->mu);
    int rc = pthread_create(&r->th, NULL, route_main, r);
    r->started = rc == 0;
    pthread_mutex_unlock(&r->mu);
    return rc ? -ENOMEM : 0;
}
