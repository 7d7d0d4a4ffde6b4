/*
 * mds_test_ring1.h -- one MDS over three in-memory MDSL sites whose ring 1
 * is a seeded rendezvous map over a set of sites (struct pmap), so a change
 * moves only the slices of the sites that joined or left, as a ring would
 * (docs/mdsl-scale.md "Placement with history"). Shared by test_mds_ring1.c and
 * test_mds_mover.c. Sites: 1 = A (the home), 2 = B, 3 = C. Include after
 * cmocka.h (the helpers assert).
 */
#ifndef MDS_TEST_RING1_H
#define MDS_TEST_RING1_H

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_place.h"
#include "mds_store_local.h"
#include "mds_table.h"
#include "mds_test_util.h"

#define SA 1u /* the home */
#define SB 2u
#define SC 3u
#define MDS_ID 7u

static uint64_t g_salt;

/* A placement: rendezvous hashing over the sites whose bit is set. */
struct pmap {
    unsigned mask; /* bit s: site s */
};
static const struct pmap P_AB = { (1u << SA) | (1u << SB) };
static const struct pmap P_ABC = { (1u << SA) | (1u << SB) | (1u << SC) };
static const struct pmap P_BC = { (1u << SB) | (1u << SC) };
static const struct pmap P_B = { 1u << SB };
static const struct pmap P_A = { 1u << SA };

static inline uint32_t locate_map(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    const struct pmap *m = arg;
    uint32_t best = 0;
    uint64_t bw = 0;
    for (uint32_t s = SA; s <= SC; s++) {
        if (!(m->mask & (1u << s)))
            continue;
        uint64_t x = g_salt ^ (table * UINT64_C(0x9e3779b97f4a7c15)) ^
                     (((uint64_t)fsid << 32 | slice) * UINT64_C(0xc2b2ae3d27d4eb4f)) ^ s;
        uint64_t w = tu_rand(&x);
        if (!best || w > bw) {
            bw = w;
            best = s;
        }
    }
    return best;
}

static inline uint32_t place_of(const struct pmap *m, uint32_t fsid, uint64_t table, uint32_t slice)
{
    return locate_map((void *)m, fsid, table, slice);
}

/* A ring-1 placement that is current (and, with prev, changing). */
static inline mds_place *place_new(const struct pmap *cur, const struct pmap *prev)
{
    mds_place *p;
    assert_int_equal(mds_place_new(locate_map, (void *)(prev ? prev : cur), &p), 0);
    if (prev)
        mds_place_change(p, locate_map, (void *)cur);
    return p;
}

/* ---- one MDS over the store -------------------------------------------- */

struct env {
    mds_store_local *mem; /* survives MDS crashes */
    mds_store st;
    mds_stats *stats;
    mds_place *place;
    mds_cache *c;
    mds_group *g;
    mds_table *t;
    unsigned interval_ms;
};

static const uint32_t parts_ab[] = { SA, SB };
static const uint32_t parts_abc[] = { SA, SB, SC };

static inline void env_start(struct env *v, const struct pmap *cur, const struct pmap *prev,
                      const uint32_t *parts, size_t np)
{
    if (!v->mem) {
        v->mem = mds_store_local_new();
        mds_store_local_bind(v->mem, &v->st);
        v->stats = mds_stats_new();
    }
    v->place = place_new(cur, prev);
    struct mds_cache_opts co = { .store = &v->st, .place = v->place, .stats = v->stats };
    assert_int_equal(mds_cache_new(&co, &v->c), 0);
    struct mds_group_opts go = {
        .store = &v->st, .cache = v->c, .place = v->place, .site_id = MDS_ID,
        .home_site = SA, .participants = parts, .nparticipants = np,
        .commit_interval_ms = v->interval_ms, .retry_ms = 2, .stats = v->stats,
    };
    assert_int_equal(mds_group_open(&go, &v->g), 0);
    struct mds_table_opts to = { .cache = v->c, .group = v->g, .stats = v->stats,
                                 .split_threshold = 16 };
    assert_int_equal(mds_table_new(&to, &v->t), 0);
}

/* Drop the MDS as a SIGKILL would. */
static inline void env_crash(struct env *v)
{
    mds_table_free(v->t);
    mds_group_close(v->g, false);
    mds_cache_free(v->c);
    mds_place_free(v->place);
    v->t = NULL;
    v->g = NULL;
    v->c = NULL;
    v->place = NULL;
}

static inline void env_fini(struct env *v)
{
    if (v->g)
        env_crash(v);
    mds_store_local_free(v->mem);
    mds_stats_free(v->stats);
    memset(v, 0, sizeof *v);
}

static inline void row_name(char *buf, const char *tag, unsigned w, unsigned k)
{
    snprintf(buf, 64, "%s%u-%u", tag, w, k);
}

static inline int put_row(struct env *v, uint64_t table, const char *name, uint64_t id,
                   uint64_t *gen)
{
    size_t len;
    uint8_t *r = tu_row(id, 1, (size_t)(id % 40), &len);
    int rc;
    while ((rc = mds_table_create(v->t, 1, table, name, strlen(name),
                                  xt_hash_name(name, strlen(name)), r, len, 0, gen)) == -EAGAIN)
        tu_sleep_ms(1);
    free(r);
    return rc;
}

/* 1: the row is there and whole with this id; 0: absent; -1 otherwise. */
static inline int row_state(struct env *v, uint64_t table, const char *name, uint64_t id)
{
    uint8_t *row;
    size_t len;
    int rc;
    for (int tries = 0;
         (rc = mds_table_lookup(v->t, 1, table, name, strlen(name),
                                xt_hash_name(name, strlen(name)), &row, &len)) == -EAGAIN &&
         tries < 200;
         tries++)
        tu_sleep_ms(1);
    if (rc == -ENOENT)
        return 0;
    if (rc != 0) {
        fprintf(stderr, "lookup %s in %llu: %d\n", name, (unsigned long long)table, rc);
        return -1;
    }
    uint64_t rid, seq;
    int ok = tu_row_ok(row, len, &rid, &seq) && rid == id;
    xt_free(row);
    return ok ? 1 : -1;
}

/* ---- what the sites hold ------------------------------------------------- */

struct held {
    struct xt_store_slice s;
    uint32_t site;
};

static inline int held_cmp(const void *a, const void *b)
{
    const struct xt_store_slice *x = &((const struct held *)a)->s,
                                     *y = &((const struct held *)b)->s;
    if (x->id.fsid != y->id.fsid)
        return x->id.fsid < y->id.fsid ? -1 : 1;
    if (x->id.table != y->id.table)
        return x->id.table < y->id.table ? -1 : 1;
    if (x->id.slice != y->id.slice)
        return x->id.slice < y->id.slice ? -1 : 1;
    return 0;
}

/* Every slice of the file system (fsid 1) is live at exactly one site, and
 * at the site `at` places it when at != NULL; the others hold a tombstone
 * or nothing. Returns the number of slices; *moved the tombstones seen. */
static inline size_t check_live_once(mds_store_local *mem, const struct pmap *at, size_t *moved)
{
    struct held *all = NULL;
    size_t n = 0, tomb = 0;
    for (uint32_t site = SA; site <= SC; site++) {
        struct xt_store_slice *v;
        size_t k;
        assert_int_equal(mds_store_local_slices(mem, site, &v, &k), 0);
        all = realloc(all, (n + k + 1) * sizeof *all);
        for (size_t i = 0; i < k; i++)
            if (v[i].id.fsid == 1)
                all[n++] = (struct held){ v[i], site };
        xt_free(v);
    }
    qsort(all, n, sizeof *all, held_cmp);
    size_t slices = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i, live = 0;
        uint32_t live_at = 0;
        for (; j < n && held_cmp(&all[i], &all[j]) == 0; j++) {
            if (all[j].s.moved) {
                tomb++;
            } else {
                live++;
                live_at = all[j].site;
            }
        }
        if (live != 1 || (at && live_at != place_of(at, 1, all[i].s.id.table, all[i].s.id.slice)))
            fail_msg("table %llu slice %u: live at %zu sites (last %u)",
                     (unsigned long long)all[i].s.id.table, all[i].s.id.slice, live, live_at);
        slices++;
        i = j;
    }
    free(all);
    if (moved)
        *moved = tomb;
    return slices;
}

static inline void assert_nothing_prepared(mds_store_local *mem)
{
    for (uint32_t site = SA; site <= SC; site++) {
        struct mds_store_local_counts c;
        mds_store_local_counts(mem, site, &c);
        assert_int_equal(c.prepared_now, 0);
    }
}

/* One record prepared and committed at site as its own transaction. */
static inline int put_rec(mds_store *st, uint32_t site, uint64_t txid, struct xt_store_rec r)
{
    int rc = mds_store_prepare(st, site, txid, &r, 1);
    return rc < 0 ? rc : mds_store_commit(st, site, txid);
}

#endif
