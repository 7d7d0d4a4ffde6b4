/*
 * test_mds_move.c -- ring-0 changes move slices (mds_table.h invariant 8,
 * mds_cache.h invariant 6; docs/mds-dist.md stage 2) at the table/cache
 * level: up to four MDS (each its own cache, commit group and table layer)
 * over one in-memory store, slices owned by a seeded rendezvous map over
 * the MDS that are "in ring 0" (g_members; slice 0 may be forced to one MDS
 * with g_home), which a test changes mid-run.
 *
 * mds_route (the RPC side) is not used; its protocol is done here with
 * direct calls, step by step as mds_route.c does it:
 *   - release(j, k) = mds_route_release at MDS j: refused (-EAGAIN) while
 *     j owns k; else mds_table_let_go, sync the group to the gen it gives,
 *     drop the entry (not a meta slice);
 *   - every cache's before_load = mds_route_before_load: an owner first
 *     releases the slice at every other running MDS (-EAGAIN if one
 *     refuses);
 *   - sweep(j) = the sweep of mds_route.c: mds_table_rehome, let_go every
 *     cached key j no longer owns, sync to the max gen, drop them.
 * Commit groups close only on sync (commit interval 60 s), so every row
 * that moved while dirty reaches its new owner only through the release.
 *
 * Checked, seeds printed:
 *   test_move: 3 MDS; names created; ring 0 changes (a 4th MDS joins, or
 *     one's share goes to the others) while two threads keep creating;
 *     every row (before, during, after) is found at its owner, a writer
 *     that passed the ownership check before the change and a write at the
 *     old owner after its let_go answer -EREMOTE (then served at the new
 *     owner), a writer inside the slice is waited out by let_go, no MDS
 *     holds a data slice it does not own after the sweeps, and after a
 *     restart of every MDS every row is still there.
 *   test_home_move: slice 0 moves; the new home cannot take the role while
 *     the old home refuses to release; once released it takes it with the
 *     old home's last (never gossiped) split bits from the store; the old
 *     home never writes the meta slice again; after a restart of every MDS
 *     the new home's stored bitmap names every slice and no lookup needs a
 *     repair.
 *   test_dead_holder: an MDS dies unsynced; the new owners cannot ask it,
 *     so their loads are fenced (versions above MDS_CACHE_FENCE_GAP); every
 *     row it had synced is found, also after a restart.
 *   test_foreign_child: a split child the home made for the other MDS,
 *     changed there, comes back to the home when the other MDS leaves
 *     ring 0: the home loads the other MDS's rows instead of serving the
 *     copy it split off (fails without the MDS_CENT_FOREIGN mark). The
 *     stamp/owned_since hooks mirror mds_route's over a ring history
 *     (ring_set); clean versions as release answers teach them.
 * MDS_MOVE_NOHOOK=1 runs without before_load: a negative control, the
 * first three tests must then fail (rows lost, the home taken without the
 * release).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_store_local.h"
#include "mds_table.h"
#include "mds_test_bits.h"
#include "mds_test_util.h"
#include "xt_bitmap.h"

#define NMAX     4
#define TABLE    91u
#define FSID     1u
#define MAX_HOPS 8

static uint64_t g_salt;
static atomic_uint g_members = 7; /* bit k: MDS k is in ring 0 */
static atomic_int g_home = -1;     /* >= 0: slice 0 forced to this MDS */
/* MDS_MOVE_NOHOOK=1: no before_load (a negative control: must fail). */
static bool g_nohook;
/* Ring versions for the stamp / owned_since hooks: ring_set() bumps g_ver
 * and records the members; tests that store g_members directly keep one
 * version (nothing is ever "lost and regained"). */
#define VMAX 64
static atomic_uint g_ver;
static unsigned g_hist[VMAX];
/* routed() syncs every MDS while it waits out -EAGAIN (a split child not
 * committed yet: the commit interval is 60 s here). */
static bool g_sync_on_wait;

/* Rendezvous hashing over the members: a change moves only the slices of
 * the MDS that joined or left, as a ring would. */
static unsigned owner_in(unsigned members, uint32_t slice)
{
    unsigned best = 0;
    uint64_t bw = 0;
    for (unsigned k = 0; k < NMAX; k++) {
        if (!(members & (1u << k)))
            continue;
        uint64_t s = g_salt ^ ((uint64_t)slice * UINT64_C(0x9e3779b97f4a7c15)) ^ (k + 1);
        uint64_t w = tu_rand(&s);
        if (w >= bw) {
            bw = w;
            best = k;
        }
    }
    return best;
}

static unsigned owner_of(uint32_t slice)
{
    int h = atomic_load(&g_home);
    if (slice == 0 && h >= 0)
        return (unsigned)h;
    return owner_in(atomic_load(&g_members), slice);
}

struct cluster;
static void ring_set(struct cluster *cl, unsigned members);

struct mds1 {
    unsigned me;
    struct cluster *cl;
    mds_cache *c;
    mds_group *g;
    mds_table *t;
    atomic_uint splits;    /* on_bit from a split here */
    atomic_uint repairs;   /* on_bit from a repair at load (gen 0) */
    atomic_uint foreign;   /* on_bit from a split here, child not ours */
    _Atomic uint64_t kick; /* newest group holding such a split (the route
                              closes it early: routed() syncs it) */
    atomic_uint releases;  /* release() answered 0 here */
    atomic_bool refuse;    /* release() answers -EAGAIN (not done yet) */
    /* mds_route's clean versions (versioned rings only, g_ver > 0): swept,
     * this MDS's after a sweep with nothing left; clean[j], MDS j's as its
     * last release answer said. An MDS known clean is not asked. */
    atomic_uint swept;
    atomic_uint clean[NMAX];
    /* The ring version this MDS uses (0: unversioned, g_members); lag: it
     * misses ring_set's changes (a heartbeat late) until catch_up. */
    atomic_uint ver;
    atomic_bool lag;
    struct tu_bits bits; /* split bits not told yet (mds_table.h (9)) */
};

struct cluster {
    mds_store_local *mem;
    mds_store st;
    struct mds1 m[NMAX];
    atomic_bool up[NMAX];
    atomic_bool dead[NMAX]; /* died holding slices: loads are fenced */
};

/* The owner of slice by the ring MDS m uses. */
static unsigned owner_at(struct mds1 *m, uint32_t slice)
{
    unsigned v = atomic_load(&m->ver);
    if (!v || (slice == 0 && atomic_load(&g_home) >= 0))
        return owner_of(slice);
    return owner_in(g_hist[v], slice);
}

static unsigned key_owner_at(struct mds1 *m, const struct mds_key *k)
{
    return owner_at(m, k->slice == MDS_META_SLICE ? 0 : k->slice);
}

static void ring_set(struct cluster *cl, unsigned members)
{
    unsigned v = atomic_load(&g_ver) + 1;
    assert_true(v < VMAX);
    g_hist[v] = members;
    atomic_store(&g_members, members);
    atomic_store(&g_ver, v);
    for (unsigned k = 0; cl && k < NMAX; k++)
        if (!atomic_load(&cl->m[k].lag))
            atomic_store(&cl->m[k].ver, v);
}

static void catch_up(struct cluster *cl, unsigned k)
{
    atomic_store(&cl->m[k].lag, false);
    atomic_store(&cl->m[k].ver, atomic_load(&g_ver));
}

static bool t_owns(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    (void)fsid;
    (void)table;
    struct mds1 *m = arg;
    return owner_at(m, slice) == m->me;
}

static void t_on_bit(void *arg, uint32_t fsid, uint64_t table, uint32_t slice, uint64_t gen,
                     bool owned, bool home)
{
    (void)home;
    struct mds1 *m = arg;
    tu_bits_note(&m->bits, fsid, table, slice, gen);
    if (gen && !owned) {
        atomic_fetch_add(&m->foreign, 1);
        uint64_t k = atomic_load(&m->kick);
        while (k < gen && !atomic_compare_exchange_weak(&m->kick, &k, gen))
            ;
    }
    if (gen)
        atomic_fetch_add(&m->splits, 1);
    else
        atomic_fetch_add(&m->repairs, 1);
}

/* mds_route_stamp and mds_route_owned_since over g_hist (slice 0 is not
 * forced with g_home in the tests that change versions). */
static uint64_t t_stamp(void *arg)
{
    return atomic_load(&((struct mds1 *)arg)->ver);
}

static bool t_owned_since(void *arg, const struct mds_key *k, uint64_t since, uint64_t *now)
{
    struct mds1 *m = arg;
    *now = atomic_load(&m->ver);
    uint32_t slice = k->slice == MDS_META_SLICE ? 0 : k->slice;
    for (uint64_t v = since + 1; v <= *now; v++)
        if (owner_in(g_hist[v], slice) != m->me)
            return false;
    return true;
}

/* mds_route_unsettled at MDS arg: a live MDS not known clean for our
 * ring that owns k under a ring it may still use. */
static bool t_unsettled(void *arg, const struct mds_key *k)
{
    struct mds1 *m = arg;
    unsigned v = atomic_load(&m->ver);
    uint32_t slice = k->slice == MDS_META_SLICE ? 0 : k->slice;
    for (unsigned j = 0; v && j < NMAX; j++) {
        unsigned c = atomic_load(&m->clean[j]);
        if (j == m->me || !atomic_load(&m->cl->up[j]) || c >= v)
            continue;
        for (unsigned w = c ? c : 1; w < v; w++)
            if (owner_in(g_hist[w], slice) == j)
                return true;
    }
    return false;
}

/* mds_route_release at MDS j, asked by MDS a. */
static int release(struct cluster *cl, unsigned a, unsigned j, const struct mds_key *k)
{
    struct mds1 *m = &cl->m[j];
    atomic_store(&cl->m[a].clean[j], atomic_load(&m->swept));
    if (atomic_load(&m->ver) < atomic_load(&cl->m[a].ver))
        return -EAGAIN; /* our ring is older than the asker's */
    atomic_store(&m->clean[a], 0); /* a holds k from now on */
    if (atomic_load(&m->refuse) || key_owner_at(m, k) == j)
        return -EAGAIN;
    uint64_t gen = 0;
    if (mds_table_let_go(m->t, k, &gen) < 0)
        return -EAGAIN;
    struct mds_group_info gi;
    mds_group_info(m->g, &gi);
    if (gen > gi.committed_gen && mds_group_sync(m->g, gen, 10000) < 0)
        return -EAGAIN;
    for (int i = 0; k->slice != MDS_META_SLICE; i++) {
        int rc = mds_cache_drop(m->c, k);
        if (rc != -EBUSY)
            break;
        if (i == 200)
            return -EAGAIN;
        tu_sleep_ms(1);
    }
    atomic_fetch_add(&m->releases, 1);
    return 0;
}

/* mds_route_before_load at MDS arg. */
static int t_before_load(void *arg, const struct mds_key *k, bool *fence)
{
    struct mds1 *m = arg;
    *fence = false;
    if (key_owner_at(m, k) != m->me)
        return 0;
    for (unsigned j = 0; j < NMAX; j++) {
        if (j == m->me)
            continue;
        unsigned v = atomic_load(&m->ver);
        if (!atomic_load(&m->cl->up[j]))
            *fence |= atomic_load(&m->cl->dead[j]); /* could not be asked */
        else if (v && atomic_load(&m->clean[j]) >= v)
            continue; /* known clean: holds nothing of ours */
        else if (release(m->cl, m->me, j, k) < 0)
            return -EAGAIN;
    }
    return 0;
}

static bool owns_here(void *m, const struct mds_key *k)
{
    return key_owner_at(m, k) == ((struct mds1 *)m)->me;
}

/* The sweep of mds_route.c at MDS j: the number of things still to do. */
static int sweep(struct cluster *cl, unsigned j)
{
    size_t dropped;
    return mds_table_sweep(cl->m[j].t, owns_here, &cl->m[j], &dropped);
}

/* Sweep every running MDS until none has anything left (bounded). */
static void sweep_all(struct cluster *cl)
{
    for (int pass = 0;; pass++) {
        int todo = 0;
        for (unsigned j = 0; j < NMAX; j++) {
            if (!atomic_load(&cl->up[j]))
                continue;
            unsigned v = atomic_load(&cl->m[j].ver);
            int left = sweep(cl, j);
            if (left == 0)
                atomic_store(&cl->m[j].swept, v);
            todo += left;
        }
        if (!todo)
            return;
        assert_true(pass < 500);
        tu_sleep_ms(2);
    }
}

static const uint32_t parts[] = { 1, 2 };

static void mds_start(struct cluster *cl, unsigned k)
{
    struct mds1 *m = &cl->m[k];
    m->me = k;
    m->cl = cl;
    tu_bits_init(&m->bits);
    atomic_store(&m->ver, atomic_load(&g_ver));
    struct mds_cache_opts co = { .store = &cl->st, .place = tu_place2(),
                                 .before_load = g_nohook ? NULL : t_before_load,
                                 .stamp = t_stamp, .before_load_arg = m };
    assert_int_equal(mds_cache_new(&co, &m->c), 0);
    struct mds_group_opts go = { .store = &cl->st, .cache = m->c, .place = tu_place2(),
                                 .site_id = 10 + k, .home_site = 1, .participants = parts,
                                 .nparticipants = 2, .commit_interval_ms = 60000,
                                 .retry_ms = 2 };
    assert_int_equal(mds_group_open(&go, &m->g), 0);
    mds_cache_set_pressure(m->c, mds_group_kick, m->g);
    struct mds_table_opts to = { .cache = m->c, .group = m->g, .split_threshold = 16,
                                 .owns = t_owns, .on_bit = t_on_bit,
                                 .owned_since = t_owned_since,
                                 .ring_unsettled = t_unsettled, .route_arg = m };
    assert_int_equal(mds_table_new(&to, &m->t), 0);
    atomic_store(&cl->up[k], true);
}

static void mds_stop(struct cluster *cl, unsigned k)
{
    struct mds1 *m = &cl->m[k];
    atomic_store(&cl->up[k], false);
    mds_table_free(m->t);
    mds_group_close(m->g, false);
    mds_cache_free(m->c);
    tu_bits_fini(&m->bits);
    m->t = NULL;
    m->g = NULL;
    m->c = NULL;
}

/* The route's part of invariant 9: every running MDS tells the split
 * bits its group committed. */
static void tell_all(struct cluster *cl)
{
    for (unsigned k = 0; k < NMAX; k++)
        if (atomic_load(&cl->up[k]))
            tu_bits_tell(&cl->m[k].bits, cl->m[k].t, cl->m[k].g);
}

static void cluster_sync(struct cluster *cl)
{
    for (unsigned k = 0; k < NMAX; k++)
        if (atomic_load(&cl->up[k]))
            assert_int_equal(mds_group_sync(cl->m[k].g, 0, 10000), 0);
    tell_all(cl);
}

static void cluster_stop(struct cluster *cl)
{
    for (unsigned k = 0; k < NMAX; k++)
        if (cl->m[k].t)
            mds_stop(cl, k);
}

static void cluster_fini(struct cluster *cl)
{
    cluster_stop(cl);
    mds_store_local_free(cl->mem);
    cl->mem = NULL;
}

static void cluster_init(struct cluster *cl, unsigned nstart)
{
    memset(cl, 0, sizeof *cl);
    cl->mem = mds_store_local_new();
    mds_store_local_bind(cl->mem, &cl->st);
    for (unsigned k = 0; k < nstart; k++)
        mds_start(cl, k);
    uint64_t gen;
    assert_int_equal(mds_table_mktable(cl->m[owner_of(0)].t, FSID, TABLE, &gen), 0);
    assert_int_equal(mds_group_sync(cl->m[owner_of(0)].g, gen, 10000), 0);
}

/* What a forward carries: the sender's bitmap, merged at the receiver. */
static void carry(struct cluster *cl, unsigned from, unsigned to)
{
    uint8_t *bm;
    size_t len;
    tell_all(cl);
    if (mds_table_bitmap(cl->m[from].t, FSID, TABLE, &bm, &len) < 0)
        return;
    int rc = mds_table_merge(cl->m[to].t, FSID, TABLE, bm, len);
    assert_true(rc >= 0 || rc == -ENOENT);
    xt_free(bm);
}

enum op { OP_CREATE, OP_LOOKUP };

static void name_of(char *buf, unsigned i)
{
    snprintf(buf, 64, "mv-%u", i);
}

/* What mds_route's run_pending does for a split whose child this MDS
 * does not keep: close its group early (the child's owner waits for it). */
static void kick_all(struct cluster *cl)
{
    for (unsigned k = 0; k < NMAX; k++) {
        if (!atomic_load(&cl->up[k]))
            continue;
        uint64_t g = atomic_load(&cl->m[k].kick);
        struct mds_group_info gi;
        mds_group_info(cl->m[k].g, &gi);
        if (g > gi.committed_gen)
            assert_int_equal(mds_group_sync(cl->m[k].g, g, 10000), 0);
    }
}

/* One operation routed like mds_service: start at `at`, forward on
 * -EREMOTE to the owner of the slice the answering MDS's bitmap picks,
 * wait out -EAGAIN. Returns the result; *served: the MDS that answered. */
static int routed(struct cluster *cl, unsigned at, enum op op, unsigned id, unsigned *served)
{
    char name[64];
    name_of(name, id);
    uint64_t h = xt_hash_name(name, strlen(name));
    unsigned hops = 0;
    for (int attempt = 0; attempt < 2000; attempt++) {
        int rc;
        uint64_t gen;
        if (op == OP_CREATE) {
            size_t len;
            uint8_t *r = tu_row(id, 1, 4, &len);
            rc = mds_table_create(cl->m[at].t, FSID, TABLE, name, strlen(name),
                                  xt_hash_name(name, strlen(name)), r, len, MDS_TABLE_EXCL, &gen);
            free(r);
        } else {
            uint8_t *row;
            size_t len;
            rc = mds_table_lookup(cl->m[at].t, FSID, TABLE, name, strlen(name),
                                  xt_hash_name(name, strlen(name)), &row, &len);
            if (rc == 0) {
                uint64_t rid = 0, seq = 0;
                assert_true(tu_row_ok(row, len, &rid, &seq));
                assert_int_equal(rid, id);
                xt_free(row);
            }
        }
        if (rc == -EAGAIN) { /* an old holder not done yet: the client retries */
            if (g_nohook || g_sync_on_wait) /* the negative control: stage 1's wait */
                cluster_sync(cl);
            kick_all(cl);
            tu_sleep_ms(1);
            continue;
        }
        if (rc != -EREMOTE) {
            if (served)
                *served = at;
            return rc;
        }
        uint32_t slice;
        assert_int_equal(mds_table_pick(cl->m[at].t, FSID, TABLE, h, &slice), 0);
        tell_all(cl);
        if (!mds_table_told(cl->m[at].t, FSID, TABLE, slice)) {
            /* forward_to: -EAGAIN until the split commits (the route
             * kicks a handed-over child's group; an owned one's commits
             * with the interval) */
            uint64_t g = tu_bits_gen(&cl->m[at].bits, slice);
            assert_int_equal(mds_group_sync(cl->m[at].g, g, 10000), 0);
            continue;
        }
        unsigned next = owner_of(slice);
        if (next != at) { /* equal: ring 0 changed under us, ask again */
            carry(cl, at, next);
            at = next;
            hops++;
        }
        if (hops > MAX_HOPS)
            fail_msg("%s: more than %d hops", name, MAX_HOPS);
    }
    fail_msg("%s: no answer after 2000 attempts", name);
    return -EIO;
}

static unsigned first_mds(uint64_t *seed)
{
    unsigned mem = atomic_load(&g_members);
    for (;;) {
        unsigned k = (unsigned)(tu_rand(seed) % NMAX);
        if (mem & (1u << k))
            return k;
    }
}

static void create_range(struct cluster *cl, unsigned lo, unsigned hi, uint64_t *seed)
{
    for (unsigned i = lo; i < hi; i++)
        assert_int_equal(routed(cl, first_mds(seed), OP_CREATE, i, NULL), 0);
}

static void lookup_range(struct cluster *cl, unsigned lo, unsigned hi, uint64_t *seed)
{
    for (unsigned i = lo; i < hi; i++) {
        unsigned served;
        int rc = routed(cl, first_mds(seed), OP_LOOKUP, i, &served);
        if (rc != 0)
            fail_msg("row %u: %d", i, rc);
        char name[64];
        name_of(name, i);
        uint32_t slice;
        assert_int_equal(mds_table_pick(cl->m[served].t, FSID, TABLE,
                                        xt_hash_name(name, strlen(name)), &slice), 0);
        assert_int_equal(owner_of(slice), served);
    }
}

struct creator {
    struct cluster *cl;
    unsigned lo, hi;
    uint64_t seed;
};

static void *creator_main(void *p)
{
    struct creator *c = p;
    create_range(c->cl, c->lo, c->hi, &c->seed);
    return NULL;
}

struct upd {
    struct cluster *cl;
    unsigned at, id;
    unsigned sleep_ms;   /* inside fn, under the slice lock */
    atomic_bool inside;
    int rc;
    uint64_t gen;
};

static int upd_fn(void *arg, const void *old, size_t old_len, uint8_t **out, size_t *out_len)
{
    struct upd *u = arg;
    uint64_t id = 0, seq = 0;
    assert_true(tu_row_ok(old, old_len, &id, &seq));
    atomic_store(&u->inside, true);
    if (u->sleep_ms)
        tu_sleep_ms(u->sleep_ms);
    uint8_t *r = tu_row(id, seq + 1, 4, out_len);
    *out = xt_malloc(*out_len);
    memcpy(*out, r, *out_len);
    free(r);
    return 0;
}

static void *upd_main(void *p)
{
    struct upd *u = p;
    char name[64];
    name_of(name, u->id);
    u->rc = mds_table_update(u->cl->m[u->at].t, FSID, TABLE, name, strlen(name),
                             xt_hash_name(name, strlen(name)), upd_fn, u, &u->gen);
    return NULL;
}

/* The row's seq as the routed lookup finds it. */
static uint64_t row_seq(struct cluster *cl, unsigned id)
{
    char name[64];
    name_of(name, id);
    unsigned at = owner_of(0);
    for (int hop = 0; hop < 2 * MAX_HOPS; hop++) {
        uint8_t *row;
        size_t len;
        int rc = mds_table_lookup(cl->m[at].t, FSID, TABLE, name, strlen(name),
                                  xt_hash_name(name, strlen(name)), &row, &len);
        if (rc == 0) {
            uint64_t rid = 0, seq = 0;
            assert_true(tu_row_ok(row, len, &rid, &seq));
            xt_free(row);
            return seq;
        }
        assert_int_equal(rc, -EREMOTE);
        uint32_t s;
        assert_int_equal(mds_table_pick(cl->m[at].t, FSID, TABLE,
                                        xt_hash_name(name, strlen(name)), &s), 0);
        carry(cl, at, owner_of(s));
        at = owner_of(s);
    }
    fail_msg("%s: not found", name);
    return 0;
}

/* Invariant 8 at the old owner, with a ring change of `newmem`:
 *  (a) a writer inside the slice when the change comes is waited out by
 *      let_go, whose gen covers its change;
 *  (b) a writer that passed slice_get's ownership check and waits for the
 *      slice lock answers -EREMOTE once it gets it;
 *  (c) a write at the old owner after its let_go answers -EREMOTE and is
 *      served at the new owner.
 * Returns false when no slice of [0, n) moves away from a holder. */
static bool check_races(struct cluster *cl, unsigned n, unsigned newmem)
{
    unsigned oldmem = atomic_load(&g_members);
    unsigned holder = NMAX, id = 0;
    struct mds_key k;
    for (unsigned j = 0; j < NMAX && holder == NMAX; j++) {
        if (!atomic_load(&cl->up[j]))
            continue;
        for (unsigned i = 0; i < n; i++) {
            char name[64];
            name_of(name, i);
            uint32_t s;
            assert_int_equal(mds_table_pick(cl->m[j].t, FSID, TABLE,
                                            xt_hash_name(name, strlen(name)), &s), 0);
            struct mds_key key = { FSID, s, TABLE };
            mds_cent *e;
            if (owner_in(oldmem, s) != j || owner_in(newmem, s) == j ||
                mds_cache_peek(cl->m[j].c, &key, &e) < 0)
                continue;
            mds_cache_put(cl->m[j].c, e);
            holder = j;
            id = i;
            k = key;
            break;
        }
    }
    if (holder == NMAX)
        return false;
    uint64_t seq0 = row_seq(cl, id);
    /* (a) A writer inside the slice (fn sleeps under its lock). */
    struct upd u1 = { .cl = cl, .at = holder, .id = id, .sleep_ms = 150 };
    pthread_t t1;
    pthread_create(&t1, NULL, upd_main, &u1);
    while (!atomic_load(&u1.inside))
        tu_sleep_ms(1);
    /* (b) A second writer: past slice_get, queued on the slice lock behind
     * the first (it cannot see the change before it holds the lock). */
    struct upd u2 = { .cl = cl, .at = holder, .id = id };
    pthread_t t2;
    pthread_create(&t2, NULL, upd_main, &u2);
    tu_sleep_ms(50);
    atomic_store(&g_members, newmem); /* ring 0 changes */
    uint64_t gen = 0;
    assert_int_equal(mds_table_let_go(cl->m[holder].t, &k, &gen), 0);
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    assert_int_equal(u1.rc, 0);
    assert_true(gen >= u1.gen); /* the inside writer's change is covered */
    if (u2.rc != -EREMOTE)
        fail_msg("writer queued on the lock across the ring change: %d, not -EREMOTE",
                 u2.rc);
    /* (c) After let_go, at the old owner: -EREMOTE; then at the new one. */
    struct upd u3 = { .cl = cl, .at = holder, .id = id };
    upd_main(&u3);
    assert_int_equal(u3.rc, -EREMOTE);
    assert_int_equal(mds_group_sync(cl->m[holder].g, gen, 10000), 0);
    u3.at = owner_of(k.slice);
    carry(cl, holder, u3.at);
    upd_main(&u3); /* the new owner's load releases the holder first */
    assert_int_equal(u3.rc, 0);
    assert_int_equal(row_seq(cl, id), seq0 + 2);
    print_message("  races: slice %u from MDS %u to %u, writer waited out, queued writer "
                  "-EREMOTE\n", k.slice, holder, owner_of(k.slice));
    return true;
}

static void check_no_foreign(struct cluster *cl)
{
    for (unsigned j = 0; j < NMAX; j++) {
        if (!atomic_load(&cl->up[j]))
            continue;
        struct mds_key *keys;
        size_t n;
        assert_int_equal(mds_cache_keys(cl->m[j].c, &keys, &n), 0);
        for (size_t i = 0; i < n; i++)
            if (keys[i].slice != MDS_META_SLICE && owner_of(keys[i].slice) != j)
                fail_msg("MDS %u still holds slice %u of MDS %u after the sweeps", j,
                         keys[i].slice, owner_of(keys[i].slice));
        xt_free(keys);
    }
}

static void test_move(void **state)
{
    (void)state;
    uint64_t seed = tu_seed("test_move");
    for (int round = 0; round < 4; round++) {
        g_salt = tu_rand(&seed);
        atomic_store(&g_members, 7u);
        atomic_store(&g_home, -1);
        struct cluster cl;
        cluster_init(&cl, 3);
        unsigned n1 = 300 + (unsigned)(tu_rand(&seed) % 300), n2 = 300, n3 = 200;
        create_range(&cl, 0, n1, &seed);
        /* Even rounds: MDS 3 joins. Odd: one MDS's share goes to the others. */
        bool join = round % 2 == 0;
        unsigned gone = (unsigned)(tu_rand(&seed) % 3);
        unsigned newmem = join ? 15u : 7u & ~(1u << gone);
        if (join)
            mds_start(&cl, 3);
        bool raced = check_races(&cl, n1, newmem);
        atomic_store(&g_members, newmem);
        lookup_range(&cl, 0, n1, &seed);
        /* Two creators run while every MDS sweeps. */
        struct creator cr[2] = { { &cl, n1, n1 + n2 / 2, tu_rand(&seed) },
                                 { &cl, n1 + n2 / 2, n1 + n2, tu_rand(&seed) } };
        pthread_t th[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&th[i], NULL, creator_main, &cr[i]);
        tu_sleep_ms(5);
        sweep_all(&cl);
        for (int i = 0; i < 2; i++)
            pthread_join(th[i], NULL);
        sweep_all(&cl);
        check_no_foreign(&cl);
        create_range(&cl, n1 + n2, n1 + n2 + n3, &seed);
        unsigned n = n1 + n2 + n3;
        lookup_range(&cl, 0, n, &seed);
        unsigned rel = 0;
        for (unsigned k = 0; k < NMAX; k++)
            rel += atomic_load(&cl.m[k].releases);
        print_message("round %d (%s MDS %u): %u rows, %u releases, races %s\n", round,
                      join ? "join of" : "share of", join ? 3 : gone, n, rel,
                      raced ? "checked" : "not reached (no slice moved)");
        /* Restart: everything synced, every MDS freed and reopened. */
        cluster_sync(&cl);
        cluster_stop(&cl);
        for (unsigned k = 0; k < (join ? 4u : 3u); k++)
            mds_start(&cl, k);
        lookup_range(&cl, 0, n, &seed);
        cluster_fini(&cl);
    }
}

/* An MDS dies (no sync; its share goes to the others): the new owners
 * cannot ask it, so their loads are fenced (mds_cache.h invariant 6):
 * versions above MDS_CACHE_FENCE_GAP, first record an image. Every row it
 * had synced is found at the new owners, also after a restart. */
static void test_dead_holder(void **state)
{
    (void)state;
    uint64_t seed = tu_seed("test_dead_holder");
    for (int round = 0; round < 2; round++) {
        g_salt = tu_rand(&seed);
        atomic_store(&g_members, 7u);
        atomic_store(&g_home, -1);
        struct cluster cl;
        cluster_init(&cl, 3);
        unsigned n = 600;
        create_range(&cl, 0, n, &seed);
        cluster_sync(&cl);
        /* mds_route drops committed children handed to their owner (stage
         * 1); the sweep does that here, so what is cached below was loaded
         * after the death. */
        sweep_all(&cl);
        unsigned gone = (unsigned)(tu_rand(&seed) % 3);
        atomic_store(&cl.dead[gone], true);
        mds_stop(&cl, gone);
        atomic_store(&g_members, 7u & ~(1u << gone));
        lookup_range(&cl, 0, n, &seed);
        /* Every data slice loaded since is fenced; none is the dead one's. */
        unsigned fenced = 0;
        for (unsigned k = 0; k < NMAX; k++) {
            if (!atomic_load(&cl.up[k]))
                continue;
            struct mds_key *keys;
            size_t nk;
            assert_int_equal(mds_cache_keys(cl.m[k].c, &keys, &nk), 0);
            for (size_t i = 0; i < nk; i++) {
                mds_cent *e;
                if (keys[i].slice == MDS_META_SLICE ||
                    owner_in(7u, keys[i].slice) != gone ||
                    mds_cache_peek(cl.m[k].c, &keys[i], &e) < 0)
                    continue;
                xt_slice_rdlock(mds_cent_slice(e));
                assert_true(mds_cent_commit(e)->version > MDS_CACHE_FENCE_GAP);
                xt_slice_unlock(mds_cent_slice(e));
                mds_cache_put(cl.m[k].c, e);
                fenced++;
            }
            xt_free(keys);
        }
        assert_true(fenced > 0);
        create_range(&cl, n, n + 300, &seed);
        cluster_sync(&cl);
        cluster_stop(&cl);
        for (unsigned k = 0; k < 3; k++)
            if (k != gone)
                mds_start(&cl, k);
        lookup_range(&cl, 0, n + 300, &seed);
        print_message("round %d: MDS %u died, %u slices loaded fenced, %u rows found\n",
                      round, gone, fenced, n + 300);
        cluster_fini(&cl);
    }
}

static xt_bitmap *bitmap_of(struct cluster *cl, unsigned k)
{
    uint8_t *bm;
    size_t len;
    xt_bitmap *b;
    tell_all(cl);
    assert_int_equal(mds_table_bitmap(cl->m[k].t, FSID, TABLE, &bm, &len), 0);
    assert_int_equal(xt_bitmap_decode(bm, len, &b), 0);
    xt_free(bm);
    return b;
}

/* The stored meta slice: its bitmap and version. */
static xt_bitmap *stored_bitmap(struct cluster *cl, uint64_t *version)
{
    struct xt_store_load ld;
    uint32_t site = tu_locate2(NULL, FSID, TABLE, MDS_META_SLICE);
    assert_int_equal(mds_store_load(&cl->st, site, (xt_slice_id){ .fsid = FSID, .slice = MDS_META_SLICE, .table = TABLE }, &ld), 0);
    assert_true(ld.has_image);
    xt_slice *s;
    assert_int_equal(xt_slice_decode(ld.image.data, ld.image.len, &s), 0);
    *version = ld.image.version;
    for (size_t i = 0; i < ld.ndeltas; i++) {
        assert_int_equal(xt_slice_apply_delta(s, ld.deltas[i].data, ld.deltas[i].len), 0);
        *version = ld.deltas[i].version;
    }
    xt_store_load_free(&ld);
    const void *row;
    size_t len;
    assert_int_equal(xt_slice_lookup(s, MDS_META_BITMAP, sizeof MDS_META_BITMAP - 1,
                                     xt_hash_name(MDS_META_BITMAP, sizeof MDS_META_BITMAP - 1),
                                     &row, &len), 0);
    xt_bitmap *b;
    assert_int_equal(xt_bitmap_decode(row, len, &b), 0);
    xt_slice_free(s);
    return b;
}

/* After a split at a non-home MDS (docs/mds-dist.md "Splits handed to another MDS"): commit,
 * then send the bitmap home. */
static void bits_home(struct cluster *cl)
{
    unsigned home = owner_of(0);
    for (unsigned k = 0; k < NMAX; k++)
        if (k != home && atomic_load(&cl->up[k])) {
            assert_int_equal(mds_group_sync(cl->m[k].g, 0, 10000), 0);
            carry(cl, k, home);
        }
}

/* Create names (from `*next`) until MDS k has split once more. */
static void split_at(struct cluster *cl, unsigned k, unsigned *next, uint64_t *seed)
{
    unsigned s0 = atomic_load(&cl->m[k].splits);
    while (atomic_load(&cl->m[k].splits) == s0) {
        assert_true(*next < 100000);
        assert_int_equal(routed(cl, first_mds(seed), OP_CREATE, (*next)++, NULL), 0);
    }
}

static void test_home_move(void **state)
{
    (void)state;
    uint64_t seed = tu_seed("test_home_move");
    for (int round = 0; round < 3; round++) {
        g_salt = tu_rand(&seed);
        atomic_store(&g_members, 7u);
        atomic_store(&g_home, -1);
        struct cluster cl;
        cluster_init(&cl, 3);
        unsigned a = owner_of(0), b = (a + 1 + (unsigned)(tu_rand(&seed) % 2)) % 3;
        atomic_store(&g_home, (int)a);
        unsigned n = 0;
        while (n < 400)
            assert_int_equal(routed(&cl, first_mds(&seed), OP_CREATE, n++, NULL), 0);
        bits_home(&cl);
        /* The old home splits once more and commits nothing: its last
         * bits are only in its dirty meta slice. */
        split_at(&cl, a, &n, &seed);
        /* B has the table open as a non-home MDS. */
        xt_bitmap_free(bitmap_of(&cl, b));
        atomic_store(&g_home, (int)b); /* ring 0 moves slice 0 from A to B */
        /* The old home does not release yet: B cannot take the role. */
        uint64_t v0;
        xt_bitmap *s0 = stored_bitmap(&cl, &v0);
        atomic_store(&cl.m[a].refuse, true);
        assert_true(mds_table_rehome(cl.m[b].t) >= 1);
        assert_int_equal(mds_group_sync(cl.m[b].g, 0, 10000), 0);
        uint64_t v1;
        xt_bitmap *s1 = stored_bitmap(&cl, &v1);
        assert_int_equal(v1, v0); /* B wrote no meta record */
        assert_true(xt_bitmap_equal(s0, s1));
        xt_bitmap_free(s1);
        /* Released: B takes the role with A's last bits from the store. */
        atomic_store(&cl.m[a].refuse, false);
        assert_int_equal(mds_table_rehome(cl.m[b].t), 0);
        /* (A's last split is told now: its release committed it.) */
        xt_bitmap *abm = bitmap_of(&cl, a);
        xt_bitmap *bbm = bitmap_of(&cl, b), *u = xt_bitmap_dup(bbm);
        assert_int_equal(xt_bitmap_merge(u, abm), 0); /* B knew all of A's */
        xt_bitmap_free(u);
        assert_int_equal(mds_group_sync(cl.m[b].g, 0, 10000), 0);
        uint64_t v2;
        xt_bitmap *s2 = stored_bitmap(&cl, &v2);
        assert_true(v2 > v0);
        assert_true(xt_bitmap_equal(s2, bbm));
        xt_bitmap_free(s2);
        xt_bitmap_free(bbm);
        xt_bitmap_free(s0);
        xt_bitmap_free(abm);
        sweep_all(&cl);
        /* The old home never writes the meta slice again. */
        struct mds_key mk = { FSID, MDS_META_SLICE, TABLE };
        mds_cent *me;
        assert_int_equal(mds_cache_peek(cl.m[a].c, &mk, &me), 0);
        uint64_t adirty = mds_cent_commit(me)->dirty_gen;
        mds_cache_put(cl.m[a].c, me);
        /* Splits everywhere after the move; bits go home (to B now). */
        for (unsigned k = 0; k < 3; k++)
            split_at(&cl, k, &n, &seed);
        while (n < 1500)
            assert_int_equal(routed(&cl, first_mds(&seed), OP_CREATE, n++, NULL), 0);
        bits_home(&cl);
        assert_int_equal(mds_cache_peek(cl.m[a].c, &mk, &me), 0);
        assert_int_equal(mds_cent_commit(me)->dirty_gen, adirty);
        mds_cache_put(cl.m[a].c, me);
        cluster_sync(&cl); /* (and every split told) */
        xt_bitmap *all = xt_bitmap_new();
        for (unsigned k = 0; k < 3; k++) {
            xt_bitmap *x = bitmap_of(&cl, k);
            assert_true(xt_bitmap_merge(all, x) >= 0);
            xt_bitmap_free(x);
        }
        /* Restart of every MDS: the new home's stored bitmap names every
         * slice, so no lookup needs a repair. */
        cluster_stop(&cl);
        for (unsigned k = 0; k < 3; k++)
            mds_start(&cl, k);
        xt_bitmap *hb = bitmap_of(&cl, b);
        uint64_t v3;
        xt_bitmap *s3 = stored_bitmap(&cl, &v3);
        print_message("round %d: home %u -> %u, %u slices, the new home stores %u (v%llu)\n",
                      round, a, b, xt_bitmap_count(all), xt_bitmap_count(s3),
                      (unsigned long long)v3);
        assert_true(xt_bitmap_equal(hb, all));
        assert_true(xt_bitmap_equal(s3, all));
        xt_bitmap_free(s3);
        xt_bitmap_free(hb);
        xt_bitmap_free(all);
        lookup_range(&cl, 0, n, &seed);
        for (unsigned k = 0; k < 3; k++)
            assert_int_equal(atomic_load(&cl.m[k].repairs), 0);
        cluster_fini(&cl);
    }
}

/* A split at MDS 0 makes a child that ring 0 gives MDS 1, which loads it
 * once committed and adds rows; then MDS 1 leaves ring 0 and the child
 * comes to MDS 0, which still caches the copy it split off: it must load
 * MDS 1's rows, not serve that copy (mds_table.h invariant 8; split_slice
 * marks it MDS_CENT_FOREIGN: without the mark this test fails). */
static void test_foreign_child(void **state)
{
    (void)state;
    uint64_t seed = tu_seed("test_foreign_child");
    g_sync_on_wait = true;
    for (int round = 0; round < 4; round++) {
        g_salt = tu_rand(&seed);
        atomic_store(&g_home, -1);
        atomic_store(&g_ver, 0);
        ring_set(NULL, 3u);
        unsigned home = owner_of(0);
        struct cluster cl;
        cluster_init(&cl, 2);
        /* Both swept ring v1 and told each other so (an earlier release
         * answer would have): the other MDS does not ask the home before
         * it loads a child. */
        sweep_all(&cl);
        for (unsigned j = 0; j < 2; j++)
            atomic_store(&cl.m[j].clean[1 - j], 1);
        unsigned n = 0;
        while (atomic_load(&cl.m[home].foreign) == 0 && n < 4000)
            assert_int_equal(routed(&cl, home, OP_CREATE, n++, NULL), 0);
        assert_true(atomic_load(&cl.m[home].foreign) > 0);
        cluster_sync(&cl);
        /* Rows into every slice, the other MDS's children included. */
        create_range(&cl, n, n + 400, &seed);
        n += 400;
        cluster_sync(&cl);
        /* The other MDS leaves; its slices (and their rows) come home. */
        ring_set(&cl, 1u << home);
        sweep_all(&cl);
        lookup_range(&cl, 0, n, &seed);
        /* And it comes back: its share moves to it again. */
        ring_set(&cl, 3u);
        sweep_all(&cl);
        create_range(&cl, n, n + 200, &seed);
        n += 200;
        lookup_range(&cl, 0, n, &seed);
        print_message("round %d: %u rows, %u splits at the home (%u of them another MDS's)\n",
                      round, n, atomic_load(&cl.m[home].splits),
                      atomic_load(&cl.m[home].foreign));
        cluster_fini(&cl);
    }
    g_sync_on_wait = false;
    atomic_store(&g_ver, 0);
}

/* The bug the storm found (fixed by opts.ring_unsettled): MDS X is still
 * on ring v1, where slice 1 is X's; the home H is on v2 (X drained),
 * where slice 1 is H's. H splits slice 0: without the release round
 * (no load) H would serve its child 1 while X, once H committed it, loads
 * it as its own under v1 (not asking H: clean for v1) and adds rows: two
 * holders, one set of rows lost. H must hold the child back (-EAGAIN)
 * until it can load it through the round, which waits for X to have v2
 * and let go; then every row of both is at H, also after a restart. */
static void test_stale_ring(void **state)
{
    (void)state;
    uint64_t seed = tu_seed("test_stale_ring");
    for (int round = 0; round < 4; round++) {
        unsigned H = 0, X = 0, tries = 0;
        for (;; tries++) { /* a salt where slice 1 goes X -> H and slice 0 stays H's */
            assert_true(tries < 100000);
            g_salt = tu_rand(&seed);
            H = owner_in(7u, 0);
            X = owner_in(7u, 1);
            if (X != H && owner_in(7u & ~(1u << X), 1) == H)
                break;
        }
        atomic_store(&g_home, -1);
        atomic_store(&g_ver, 0);
        ring_set(NULL, 7u);
        struct cluster cl;
        cluster_init(&cl, 3);
        sweep_all(&cl);
        for (unsigned a = 0; a < 3; a++) /* as earlier release answers told */
            for (unsigned b = 0; b < 3; b++)
                atomic_store(&cl.m[a].clean[b], 1);
        /* Ring v2 without X; X has not heard of it. */
        atomic_store(&cl.m[X].lag, true);
        ring_set(&cl, 7u & ~(1u << X));
        for (unsigned k = 0; k < 3; k++)
            if (k != X)
                assert_int_equal(sweep(&cl, k), 0);
        /* H splits slice 0; rows for its child wait. */
        bool done[400] = { false };
        unsigned n = 0, held = 0;
        while (n < 400 && (atomic_load(&cl.m[H].splits) == 0 || n % 40 != 0)) {
            char name[64];
            name_of(name, n);
            size_t len;
            uint8_t *r = tu_row(n, 1, 4, &len);
            uint64_t gen;
            int rc =
                mds_table_create(cl.m[H].t, FSID, TABLE, name, strlen(name),
                                 xt_hash_name(name, strlen(name)), r, len, MDS_TABLE_EXCL, &gen);
            free(r);
            if (rc == 0)
                done[n] = true;
            else if (rc == -EAGAIN)
                held++;
            else
                fail_msg("create %s at H: %d", name, rc);
            n++;
        }
        assert_true(atomic_load(&cl.m[H].splits) > 0);
        assert_true(held > 0);
        cluster_sync(&cl);
        /* X, on v1, learns bit 1 and adds rows to slice 1 (its own there). */
        carry(&cl, H, X);
        unsigned xs = 0, xid[5];
        for (unsigned id = 10000; xs < 5 && id < 20000; id++) {
            char name[64];
            name_of(name, id);
            uint32_t slice;
            assert_int_equal(mds_table_pick(cl.m[X].t, FSID, TABLE,
                                            xt_hash_name(name, strlen(name)), &slice), 0);
            if (slice != 1)
                continue;
            size_t len;
            uint8_t *r = tu_row(id, 1, 4, &len);
            uint64_t gen;
            assert_int_equal(mds_table_create(cl.m[X].t, FSID, TABLE, name, strlen(name),
                                              xt_hash_name(name, strlen(name)), r, len,
                                              MDS_TABLE_EXCL, &gen),
                             0);
            free(r);
            assert_int_equal(mds_group_sync(cl.m[X].g, gen, 10000), 0);
            xid[xs++] = id;
        }
        assert_int_equal(xs, 5);
        /* Meanwhile H still holds slice 1 back: X has not let go. */
        char name[64];
        for (unsigned i = 0; i < n; i++) {
            if (done[i])
                continue;
            name_of(name, i);
            size_t len;
            uint8_t *r = tu_row(i, 1, 4, &len);
            uint64_t gen;
            assert_int_equal(mds_table_create(cl.m[H].t, FSID, TABLE, name, strlen(name),
                                              xt_hash_name(name, strlen(name)), r, len,
                                              MDS_TABLE_EXCL, &gen),
                             -EAGAIN);
            free(r);
            break;
        }
        /* X hears of v2 and lets go; every row of both is found at H. */
        catch_up(&cl, X);
        sweep_all(&cl);
        for (unsigned i = 0; i < n; i++)
            if (!done[i])
                assert_int_equal(routed(&cl, H, OP_CREATE, i, NULL), 0);
        lookup_range(&cl, 0, n, &seed);
        for (unsigned i = 0; i < xs; i++)
            if (routed(&cl, H, OP_LOOKUP, xid[i], NULL) != 0)
                fail_msg("round %d: row %u that X added to slice 1 is lost", round, xid[i]);
        print_message("round %d: H=%u X=%u: %u rows at H (%u held back), %u at X\n", round, H,
                      X, n, held, xs);
        cluster_sync(&cl);
        cluster_stop(&cl);
        for (unsigned k = 0; k < 3; k++)
            mds_start(&cl, k);
        lookup_range(&cl, 0, n, &seed);
        for (unsigned i = 0; i < xs; i++)
            assert_int_equal(routed(&cl, H, OP_LOOKUP, xid[i], NULL), 0);
        cluster_fini(&cl);
    }
    atomic_store(&g_ver, 0);
}

int main(void)
{
    g_nohook = getenv("MDS_MOVE_NOHOOK") != NULL;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_move),
        cmocka_unit_test(test_home_move),
        cmocka_unit_test(test_dead_holder),
        cmocka_unit_test(test_foreign_child),
        cmocka_unit_test(test_stale_ring),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
