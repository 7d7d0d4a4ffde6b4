/*
 * test_mds_replicas.c -- slices on r = 3 MDSL (docs/mdsl-replicas.md) over
 * three in-process MDSL engines (mds_store_local):
 *  - every replica stores the same slices at the same versions, and every
 *    decision copy the MDS's record;
 *  - a replica that loses its disk (wiped, restarted empty) costs nothing:
 *    a restarted MDS loads every slice from the others, counting the
 *    fallbacks; the home losing its disk keeps the epochs going up (the
 *    decision copies);
 *  - the image a degraded load forces repairs the wiped replica: after
 *    every slice was written once more, the slices the wiped site leads
 *    are whole there again, and another site may lose its disk next;
 *  - a coordinator crash between any two store calls of a replicated
 *    group leaves the group all-or-nothing at every replica, also when the
 *    home then loses its disk (four sites: the decision copies commit
 *    before the participants that are no copy).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_place.h"
#include "mds_store_local.h"
#include "mds_table.h"
#include "mds_test_util.h"

enum { TABLE = 700, ROWS = 400 };

/* Placements over sites 1..N (arg: N). */
static uint32_t locn(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    return 1 + (uint32_t)((table + slice + fsid) % (uintptr_t)arg);
}

/* Three replicas in site order from the owner: 1 -> 2 -> ... -> N -> 1. */
static uint32_t repn(void *arg, uint32_t fsid, uint64_t table, uint32_t slice, uint32_t max,
                     uint32_t *sites)
{
    uint32_t n = max < 3 ? max : 3, ns = (uint32_t)(uintptr_t)arg;
    uint32_t o = locn(arg, fsid, table, slice);
    for (uint32_t i = 0; i < n; i++)
        sites[i] = 1 + (o - 1 + i) % ns;
    return n;
}

static uint32_t loc3(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    (void)arg;
    return locn((void *)(uintptr_t)3, fsid, table, slice);
}

static const uint32_t parts[] = { 1, 2, 3, 4 };
static const uint32_t copies[] = { 2, 3 };

struct renv {
    uint32_t nsites; /* 0: 3 */
    mds_store_local *mem;
    mds_store st;
    mds_stats *stats;
    mds_place *place;
    mds_cache *c;
    mds_group *g;
    mds_table *t;
};

static int renv_start(struct renv *v)
{
    if (!v->mem) {
        v->mem = mds_store_local_new();
        mds_store_local_bind(v->mem, &v->st);
        if (!v->nsites)
            v->nsites = 3;
        if (mds_place_new(locn, (void *)(uintptr_t)v->nsites, &v->place) < 0)
            return -ENOMEM;
        mds_place_set_replicas(v->place, 3, repn);
    }
    v->stats = mds_stats_new(); /* per start: counts what this start did */
    struct mds_cache_opts co = { .store = &v->st, .place = v->place, .stats = v->stats };
    int rc = mds_cache_new(&co, &v->c);
    if (rc < 0)
        return rc;
    struct mds_group_opts go = {
        .store = &v->st, .cache = v->c, .place = v->place, .site_id = 9,
        .home_site = 1, .participants = parts, .nparticipants = v->nsites,
        .decision_copies = copies, .ndecision_copies = 2,
        .commit_interval_ms = 5, .retry_ms = 2, .stats = v->stats,
    };
    if ((rc = mds_group_open(&go, &v->g)) < 0) {
        mds_cache_free(v->c);
        v->c = NULL;
        return rc;
    }
    struct mds_table_opts to = { .cache = v->c, .group = v->g, .stats = v->stats,
                                 .split_threshold = 32 };
    return mds_table_new(&to, &v->t);
}

static void renv_crash(struct renv *v)
{
    mds_table_free(v->t);
    mds_group_close(v->g, false);
    mds_cache_free(v->c);
    mds_stats_free(v->stats);
    v->t = NULL;
    v->g = NULL;
    v->c = NULL;
    v->stats = NULL;
}

static void renv_fini(struct renv *v)
{
    if (v->g)
        renv_crash(v);
    mds_store_local_free(v->mem);
    mds_place_free(v->place);
}

static void key_of(char *buf, unsigned k)
{
    snprintf(buf, 64, "replicated-%u", k);
}

static int put(struct renv *v, unsigned k, uint64_t seq, uint64_t *gen)
{
    char name[64];
    key_of(name, k);
    size_t len;
    uint8_t *r = tu_row(k, seq, (size_t)(seq % 40), &len);
    int rc = mds_table_create(v->t, 1, TABLE, name, strlen(name),
                              xt_hash_name(name, strlen(name)), r, len, 0, gen); /* replaces */
    free(r);
    return rc;
}

/* Every row k in [0, ROWS) is there with seq `seq`. */
static void check_rows(struct renv *v, uint64_t seq)
{
    char name[64];
    for (unsigned k = 0; k < ROWS; k++) {
        key_of(name, k);
        uint8_t *row;
        size_t len;
        int rc = mds_table_lookup(v->t, 1, TABLE, name, strlen(name),
                                  xt_hash_name(name, strlen(name)), &row, &len);
        if (rc != 0)
            fail_msg("row %u: lookup %d", k, rc);
        uint64_t id = 0, s = 0;
        assert_true(tu_row_ok(row, len, &id, &s));
        assert_int_equal(id, k);
        assert_int_equal(s, seq);
        xt_free(row);
    }
}

static void write_all(struct renv *v, uint64_t seq)
{
    uint64_t gen = 0, g;
    if (seq == 1)
        assert_int_equal(mds_table_mktable(v->t, 1, TABLE, &gen), 0);
    for (unsigned k = 0; k < ROWS; k++) {
        assert_int_equal(put(v, k, seq, &g), 0);
        gen = g > gen ? g : gen;
    }
    assert_int_equal(mds_group_sync(v->g, gen, 10000), 0);
}

/* The slices of fsid 1 at site, as (table, slice, version) triples. */
static size_t user_slices(struct renv *v, uint32_t site, struct xt_store_slice *out, size_t cap)
{
    struct xt_store_slice *sl;
    size_t n, k = 0;
    assert_int_equal(mds_store_local_slices(v->mem, site, &sl, &n), 0);
    for (size_t i = 0; i < n; i++)
        if (sl[i].id.fsid == 1 && k < cap)
            out[k++] = sl[i];
    xt_free(sl);
    return k;
}

static bool holds_decision(struct renv *v, uint32_t site)
{
    struct xt_store_slice *sl;
    size_t n;
    bool found = false;
    assert_int_equal(mds_store_local_slices(v->mem, site, &sl, &n), 0);
    for (size_t i = 0; i < n; i++)
        found |= sl[i].id.fsid == MDS_COORD_FSID && sl[i].id.table == MDS_COORD_TABLE &&
                 sl[i].id.slice == 9;
    xt_free(sl);
    return found;
}

static void test_every_replica_same(void **state)
{
    (void)state;
    struct renv v = { 0 };
    assert_int_equal(renv_start(&v), 0);
    write_all(&v, 1);
    write_all(&v, 2);
    static struct xt_store_slice a[4096], b[4096];
    size_t na = user_slices(&v, 1, a, 4096);
    assert_true(na > 3); /* the table split: slices owned by every site */
    for (uint32_t site = 2; site <= 3; site++) {
        size_t nb = user_slices(&v, site, b, 4096);
        assert_int_equal(nb, na);
        for (size_t i = 0; i < na; i++) {
            assert_int_equal(b[i].id.table, a[i].id.table);
            assert_int_equal(b[i].id.slice, a[i].id.slice);
            assert_int_equal(b[i].version, a[i].version);
        }
    }
    for (uint32_t site = 1; site <= 3; site++)
        assert_true(holds_decision(&v, site));
    renv_fini(&v);
}

static void test_lost_disks(void **state)
{
    (void)state;
    struct renv v = { 0 };
    assert_int_equal(renv_start(&v), 0);
    write_all(&v, 1);
    struct mds_group_info gi;
    mds_group_info(v.g, &gi);
    uint32_t epoch = gi.epoch;

    /* The home loses its disk while the MDS is down. */
    renv_crash(&v);
    assert_int_equal(mds_store_local_wipe(v.mem, 1), 0);
    assert_int_equal(renv_start(&v), 0);
    mds_group_info(v.g, &gi);
    assert_int_equal(gi.epoch, epoch + 1); /* the copies held the decision */
    check_rows(&v, 1);
    assert_true(mds_stats_counter(v.stats, MDS_CTR_REPLICA_FALLBACKS) > 0);

    /* Every slice written once more: those whose load fell back (site 1
     * first in their set) as images, which puts them back whole on site 1. */
    write_all(&v, 2);
    static struct xt_store_slice b[4096];
    size_t nb = user_slices(&v, 2, b, 4096), repaired = 0;
    for (size_t i = 0; i < nb; i++) {
        if (loc3(NULL, 1, b[i].id.table, b[i].id.slice) != 1)
            continue;
        struct xt_store_load ld;
        assert_int_equal(mds_store_load(&v.st, 1, b[i].id, &ld), 0);
        assert_true(ld.has_image);
        uint64_t last = ld.ndeltas ? ld.deltas[ld.ndeltas - 1].version : ld.image.version;
        assert_int_equal(last, b[i].version);
        xt_store_load_free(&ld);
        repaired++;
    }
    assert_true(repaired > 0);
    renv_crash(&v);
    /* Now site 2, a primary too, loses its disk: still every row. */
    assert_int_equal(mds_store_local_wipe(v.mem, 2), 0);
    assert_int_equal(renv_start(&v), 0);
    check_rows(&v, 2);
    renv_fini(&v);
}

/* A coordinator crash between any two store calls while replicated
 * groups commit: after recovery every replica holds the same slices at
 * the same versions (each group all-or-nothing at every replica), every
 * row is whole, and an acknowledged sync is there. */
static void crash_sweep(uint32_t nsites, bool wipe_home)
{
    static struct xt_store_slice a[4096], b[4096];
    for (long after = 0;; after++) {
        struct renv v = { .nsites = nsites };
        assert_int_equal(renv_start(&v), 0);
        write_all(&v, 1);
        mds_store_local_sever(v.mem, after);
        uint64_t gen = 0, g;
        for (unsigned k = 0; k < ROWS; k++) {
            assert_int_equal(put(&v, k, 2, &g), 0);
            gen = g > gen ? g : gen;
        }
        int rc = mds_group_sync(v.g, gen, 300);
        renv_crash(&v);
        mds_store_local_sever(v.mem, -1);
        if (wipe_home)
            assert_int_equal(mds_store_local_wipe(v.mem, 1), 0);
        assert_int_equal(renv_start(&v), 0);
        /* Every replica that kept its disk holds each slice at one version. */
        for (uint32_t x = wipe_home ? 2 : 1; x <= nsites; x++) {
            size_t na = user_slices(&v, x, a, 4096);
            for (uint32_t y = x + 1; y <= nsites; y++) {
                size_t nb = user_slices(&v, y, b, 4096);
                for (size_t i = 0; i < na; i++)
                    for (size_t j = 0; j < nb; j++)
                        if (b[j].id.table == a[i].id.table && b[j].id.slice == a[i].id.slice &&
                            b[j].version != a[i].version)
                            fail_msg("sever after %ld: slice %u at v%llu on site %u, v%llu on "
                                     "site %u", after, a[i].id.slice,
                                     (unsigned long long)b[j].version, y,
                                     (unsigned long long)a[i].version, x);
            }
        }
        char name[64];
        for (unsigned k = 0; k < ROWS; k++) {
            key_of(name, k);
            uint8_t *row;
            size_t len;
            assert_int_equal(mds_table_lookup(v.t, 1, TABLE, name, strlen(name),
                                              xt_hash_name(name, strlen(name)), &row, &len),
                             0);
            uint64_t id = 0, s = 0;
            assert_true(tu_row_ok(row, len, &id, &s));
            xt_free(row);
            assert_int_equal(id, k);
            assert_true(s == 1 || s == 2);
            if (rc == 0)
                assert_int_equal(s, 2); /* acknowledged: durable */
        }
        renv_fini(&v);
        if (rc == 0)
            break; /* the sever came after every call of the groups */
    }
}

static void test_crash_sweep(void **state)
{
    (void)state;
    crash_sweep(3, false);
}

/* Four sites, decision copies on 2 and 3, slices on three of four: the
 * coordinator crashes between any two store calls and then the home loses
 * its disk. The copies commit before the other participants, so recovery
 * finds the decision whenever any participant committed: replicas agree,
 * and an acknowledged sync survives the home's disk. */
static void test_crash_sweep_home_lost(void **state)
{
    (void)state;
    crash_sweep(4, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_replica_same),
        cmocka_unit_test(test_lost_disks),
        cmocka_unit_test(test_crash_sweep),
        cmocka_unit_test(test_crash_sweep_home_lost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
