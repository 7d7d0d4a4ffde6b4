/*
 * test_mds_mover.c -- the background mover of a ring-1 change
 * (mds/mds_mover.c; docs/mdsl-scale.md "The mover") and the
 * in-memory store's list_slices, over mds_test_ring1.h's three sites.
 *
 * Checked, seeds printed:
 *   test_list_slices_mem: paging over mds_store_local: every stored slice
 *     once, in key order, tombstones flagged, `end` on the last page, a
 *     bad cursor refused.
 *   test_mover_join: an MDS restarted during the move A,B -> A,B,C (so
 *     nothing is cached but one table) owns the even tables only: the
 *     walk moves exactly the even tables' slices the new placement puts
 *     elsewhere, loads them and drops them again (the cached table stays
 *     cached), and reports walked (v, w); a ring-0 change makes a new pass
 *     that moves nothing; once it owns everything the next ring-0 version
 *     moves the odd tables too; every slice ends live once at its place,
 *     and a restart that knows only A,B,C finds every row. The first walk
 *     runs under a small --move-rate and must take at least the time the
 *     rate allows for the bytes it moved.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>

#include "mds_mover.h"
#include "mds_test_ring1.h"

/* ---- list_slices of the in-memory store ---------------------------------- */

static void test_list_slices_mem(void **state)
{
    (void)state;
    mds_store_local *mem = mds_store_local_new();
    mds_store st;
    mds_store_local_bind(mem, &st);
    uint64_t txid = 1;
    const uint64_t tables[] = { 900, 5, 77, 5, 1ull << 40 };
    const uint32_t slices[] = { 0, 3, MDS_META_SLICE, 0, 2 };
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(put_rec(&st, SA, txid++,
                                 (struct xt_store_rec){ .id = { .fsid = 1, .slice = slices[i], .table = tables[i] }, .version = 1,
                                                   .type = XT_STORE_IMAGE, .data = "x",
                                                   .len = 1 }), 0);
    assert_int_equal(put_rec(&st, SA, txid++,
                             (struct xt_store_rec){ .id = { .fsid = 1, .slice = MDS_META_SLICE, .table = 77 },
                                               .version = 2, .type = XT_STORE_IMAGE, .data = "",
                                               .len = 0, .flags = XT_STORE_F_MOVED }), 0);
    assert_int_equal(put_rec(&st, SA, txid++,
                             (struct xt_store_rec){ .id = { .fsid = 0, .slice = 1, .table = 9 }, .version = 4,
                                               .type = XT_STORE_IMAGE, .data = "d", .len = 1 }), 0);
    /* Expected order: (fsid, table, slice) ascending. */
    const struct xt_store_slice want[] = {
        { { 0, 1, 9 }, 4, false, false, true },   { { 1, 0, 5 }, 1, false, false, true },
        { { 1, 3, 5 }, 1, false, false, true },   { { 1, MDS_META_SLICE, 77 }, 2, true, false, true },
        { { 1, 0, 900 }, 1, false, false, true }, { { 1, 2, 1ull << 40 }, 1, false, false, true },
    };
    struct xt_store_list pg;
    uint8_t cur[XT_STORE_CURSOR_MAX];
    uint32_t clen = 0;
    size_t seen = 0, pages = 0;
    for (bool end = false; !end; pages++) {
        assert_int_equal(mds_store_list_slices(&st, SA, cur, clen, 2, &pg), 0);
        assert_true(pg.n <= 2);
        for (size_t i = 0; i < pg.n; i++, seen++) {
            assert_true(seen < XT_ARRAY_SIZE(want));
            assert_int_equal(pg.slices[i].id.fsid, want[seen].id.fsid);
            assert_int_equal(pg.slices[i].id.table, want[seen].id.table);
            assert_int_equal(pg.slices[i].id.slice, want[seen].id.slice);
            assert_int_equal(pg.slices[i].version, want[seen].version);
            assert_int_equal(pg.slices[i].moved, want[seen].moved);
            assert_int_equal(pg.slices[i].image, want[seen].image);
        }
        end = pg.end;
        memcpy(cur, pg.cursor, pg.cursor_len);
        clen = pg.cursor_len;
        xt_store_list_free(&pg);
    }
    assert_int_equal(seen, XT_ARRAY_SIZE(want));
    assert_int_equal(pages, 3);
    /* After the end: nothing, still the end. */
    assert_int_equal(mds_store_list_slices(&st, SA, cur, clen, 2, &pg), 0);
    assert_int_equal(pg.n, 0);
    assert_true(pg.end);
    xt_store_list_free(&pg);
    /* A site with nothing; a cursor of a wrong length. */
    assert_int_equal(mds_store_list_slices(&st, SC, NULL, 0, 8, &pg), 0);
    assert_int_equal(pg.n, 0);
    assert_true(pg.end);
    assert_int_equal(mds_store_list_slices(&st, SA, cur, 3, 8, &pg), -EINVAL);
    mds_store_local_free(mem);
}

/* ---- the mover ------------------------------------------------------------ */

enum { NTAB = 8, ROWS = 70, TAB0 = 600 };

static atomic_bool g_owns_all;
static atomic_uint_fast64_t g_ring0;

static bool owns_even(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    (void)arg;
    assert_int_not_equal(slice, MDS_META_SLICE); /* meta goes with slice 0 */
    return fsid == 1 && (atomic_load(&g_owns_all) || table % 2 == 0);
}

static uint64_t ring0(void *arg)
{
    (void)arg;
    return atomic_load(&g_ring0);
}

/* Waits (up to 30 s) for a walk (v, w). */
static void wait_walked(mds_mover *m, uint64_t v, uint64_t w)
{
    uint64_t gv = 0, gw = 0;
    for (int i = 0; i < 3000; i++) {
        if (mds_mover_walked(m, &gv, &gw) && gv == v && gw == w)
            return;
        tu_sleep_ms(10);
    }
    fail_msg("no walk (%llu, %llu); last (%llu, %llu)", (unsigned long long)v,
             (unsigned long long)w, (unsigned long long)gv, (unsigned long long)gw);
}

/* Live slices of fsid 1 whose place differs between the two placements,
 * of the even tables only when `even`. */
static size_t count_to_move(mds_store_local *mem, bool even)
{
    size_t n = 0;
    for (uint32_t site = SA; site <= SB; site++) {
        struct xt_store_slice *v;
        size_t k;
        assert_int_equal(mds_store_local_slices(mem, site, &v, &k), 0);
        for (size_t i = 0; i < k; i++)
            n += v[i].id.fsid == 1 && !v[i].moved && (!even || v[i].id.table % 2 == 0) &&
                 place_of(&P_ABC, 1, v[i].id.table, v[i].id.slice) != site;
        xt_free(v);
    }
    return n;
}

/* Every live slice of fsid 1 is where P_ABC puts it, for the even tables,
 * or P_AB, for the odd ones. */
static void check_even_moved(mds_store_local *mem)
{
    for (uint32_t site = SA; site <= SC; site++) {
        struct xt_store_slice *v;
        size_t k;
        assert_int_equal(mds_store_local_slices(mem, site, &v, &k), 0);
        for (size_t i = 0; i < k; i++) {
            if (v[i].id.fsid != 1 || v[i].moved)
                continue;
            const struct pmap *at = v[i].id.table % 2 == 0 ? &P_ABC : &P_AB;
            if (place_of(at, 1, v[i].id.table, v[i].id.slice) != site)
                fail_msg("table %llu slice %u live at %u", (unsigned long long)v[i].id.table,
                         v[i].id.slice, site);
        }
        xt_free(v);
    }
}

static void test_mover_join(void **state)
{
    (void)state;
    g_salt = tu_seed("test_mover_join");
    atomic_store(&g_owns_all, false);
    atomic_store(&g_ring0, 1);
    struct env v = { .interval_ms = 3 };
    env_start(&v, &P_AB, NULL, parts_ab, 2);
    char name[64];
    uint64_t gen = 0;
    for (unsigned t = 0; t < NTAB; t++) {
        assert_int_equal(mds_table_mktable(v.t, 1, TAB0 + t, &gen), 0);
        for (unsigned k = 0; k < ROWS; k++) {
            row_name(name, "m", t, k);
            assert_int_equal(put_row(&v, TAB0 + t, name, (uint64_t)t << 32 | k, &gen), 0);
        }
    }
    assert_int_equal(mds_group_sync(v.g, gen, 10000), 0);

    /* Restarted during the change: nothing cached but what it reads. */
    env_crash(&v);
    env_start(&v, &P_ABC, &P_AB, parts_abc, 3);
    row_name(name, "m", 0, 1);
    assert_int_equal(row_state(&v, TAB0, name, 1), 1);
    struct mds_key *cached;
    size_t ncached;
    assert_int_equal(mds_cache_keys(v.c, &cached, &ncached), 0);
    assert_true(ncached >= 2); /* the meta slice and the row's */
    for (size_t i = 0; i < ncached; i++)
        assert_int_equal(cached[i].table, TAB0);

    size_t want = count_to_move(v.mem, true), want_all = count_to_move(v.mem, false);
    fprintf(stderr, "%zu slices of even tables to move, %zu in all\n", want, want_all);
    assert_true(want > 0 && want_all > want);

    const uint64_t rate = 4 << 10;
    struct mds_mover_opts mo = { .store = &v.st, .cache = v.c, .group = v.g, .place = v.place,
                                 .stats = v.stats, .owns = owns_even, .ring0_version = ring0,
                                 .rate = rate, .poll_ms = 20 };
    mds_mover *m;
    assert_int_equal(mds_mover_start(&mo, &m), 0);
    uint64_t vv, ww;
    assert_false(mds_mover_walked(m, &vv, &ww));
    const uint32_t losing[] = { SA, SB };
    uint64_t t0 = xt_mono_ns();
    assert_int_equal(mds_mover_walk(m, 9, losing, 2), 0);
    wait_walked(m, 9, 1);
    double secs = (double)(xt_mono_ns() - t0) / 1e9;
    struct mds_mover_info mi;
    mds_mover_info(m, &mi);
    fprintf(stderr, "walk 1: %llu moves, %llu bytes, %llu loads, %llu passes in %.2f s\n",
            (unsigned long long)mi.moves, (unsigned long long)mi.move_bytes,
            (unsigned long long)mi.move_loads, (unsigned long long)mi.passes, secs);
    assert_int_equal(mi.moves, want);
    assert_true(mi.move_loads > 0 && mi.move_loads <= mi.moves);
    assert_true(mi.passes >= 2); /* one that moved, one that found nothing */
    assert_int_equal(mds_stats_counter(v.stats, MDS_CTR_MOVE_LOADS), mi.move_loads);
    /* Rate (invariant 3): the mover sleeps after each slice until the bytes
     * so far fit, counting the image loaded (the new image may differ a
     * little in size). */
    assert_true(mi.move_bytes > 2048);
    assert_true(secs >= ((double)mi.move_bytes * 0.9 - 512) / (double)rate);
    check_live_once(v.mem, NULL, NULL);
    check_even_moved(v.mem);
    /* Invariant 2: what was cached stays, what the mover loaded went. */
    struct mds_key *after;
    size_t nafter;
    assert_int_equal(mds_cache_keys(v.c, &after, &nafter), 0);
    for (size_t i = 0; i < ncached; i++) {
        mds_cent *e;
        assert_int_equal(mds_cache_peek(v.c, &cached[i], &e), 0);
        mds_cache_put(v.c, e);
    }
    for (size_t i = 0; i < nafter; i++)
        assert_int_equal(after[i].table, TAB0);
    xt_free(after);
    xt_free(cached);

    /* A ring-0 change: a new pass, nothing to move. */
    atomic_store(&g_ring0, 2);
    wait_walked(m, 9, 2);
    struct mds_mover_info mi2;
    mds_mover_info(m, &mi2);
    assert_int_equal(mi2.moves, mi.moves);
    assert_true(mi2.passes > mi.passes);

    /* Ring 0 gives this MDS the odd tables too. */
    atomic_store(&g_owns_all, true);
    atomic_store(&g_ring0, 3);
    wait_walked(m, 9, 3);
    mds_mover_info(m, &mi2);
    assert_int_equal(mi2.moves, want_all);
    size_t slices = check_live_once(v.mem, &P_ABC, NULL);
    fprintf(stderr, "%zu slices live at their place after %llu moves\n", slices,
            (unsigned long long)mi2.moves);

    /* No walk asked: none reported. */
    assert_int_equal(mds_mover_walk(m, 0, NULL, 0), 0);
    assert_false(mds_mover_walked(m, &vv, &ww));
    mds_mover_stop(m);

    env_crash(&v);
    env_start(&v, &P_ABC, NULL, parts_abc, 3);
    for (unsigned t = 0; t < NTAB; t++)
        for (unsigned k = 0; k < ROWS; k++) {
            row_name(name, "m", t, k);
            assert_int_equal(row_state(&v, TAB0 + t, name, (uint64_t)t << 32 | k), 1);
        }
    assert_nothing_prepared(v.mem);
    env_fini(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_slices_mem),
        cmocka_unit_test(test_mover_join),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
