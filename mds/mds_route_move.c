/*
 * mds_route_move.c -- what ring 0 changes add to the routing (mds_route.h
 * invariants 6 and 7; docs/mds-dist.md "Ring 0 changes move slices"): the sweep
 * that writes back and drops the slices another
 * MDS now owns, the release a new owner asks for before it loads, the
 * fence after a dead holder and the settling of its transactions.
 *
 * Locks: as mds_route.c; `mu` is never held across an RPC, a group sync or
 * a cache call.
 */
#include "mds_route.h"
#include "mds_route_i.h"

#include "xt_common.h"
#include "xt_rpc_mds.h"

#include <string.h>
#include <time.h>

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

/* Drop a let-go slice, waiting out short pins (a reader finishing). */
static int drop_let_go(mds_route *r, const struct mds_key *k)
{
    for (int i = 0;; i++) {
        int rc = mds_cache_drop(r->cache, k);
        if (rc != -EBUSY)
            return 0;
        if (i == 200)
            return -EAGAIN;
        struct timespec ts = { 0, 1000000L };
        nanosleep(&ts, NULL);
    }
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
        rc = drop_let_go(r, k);
    if (rc == 0)
        mds_stats_add(r->stats, MDS_CTR_RELEASES, 1);
    XT_DBG("route: fs %u table %llu slice %u: released to MDS %u (ring 0 v%llu): %d", k->fsid,
           (unsigned long long)k->table, k->slice, from_site, (unsigned long long)ring_version,
           rc);
    return rc;
}

/* One sweep (invariant 6): the number of slices (and home roles) still to
 * let go. */
static int sweep(mds_route *r)
{
    int todo = mds_table_rehome(r->table);
    if (todo < 0)
        return 1;
    struct mds_key *keys;
    size_t n, let = 0;
    if (mds_cache_keys(r->cache, &keys, &n) < 0)
        return 1;
    uint64_t maxgen = 0;
    for (size_t i = 0; i < n; i++) {
        if (owns_key(r, &keys[i]))
            continue;
        uint64_t gen;
        if (mds_table_let_go(r->table, &keys[i], &gen) < 0) {
            todo++;
            continue;
        }
        maxgen = XT_MAX(maxgen, gen);
        if (keys[i].slice != MDS_META_SLICE)
            keys[let++] = keys[i];
    }
    struct mds_group_info gi;
    mds_group_info(r->group, &gi);
    if (maxgen > gi.committed_gen && mds_group_sync(r->group, maxgen, 10000) < 0)
        todo++;
    size_t dropped = 0;
    for (size_t i = 0; i < let; i++) {
        if (drop_let_go(r, &keys[i]) < 0) {
            todo++;
        } else {
            dropped++;
            XT_DBG("route: fs %u table %llu slice %u: let go and dropped", keys[i].fsid,
                   (unsigned long long)keys[i].table, keys[i].slice);
        }
    }
    if (dropped)
        mds_stats_add(r->stats, MDS_CTR_SLICES_MOVED, dropped);
    xt_free(keys);
    return todo;
}

/* Step 3 of the tick (mds_route_i.h). */
void mds_route_run_sweep(mds_route *r, uint64_t *next_sweep)
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
