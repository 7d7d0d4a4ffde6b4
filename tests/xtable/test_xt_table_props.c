/*
 * test_xt_table_props.c -- a whole table, simulated: a GIGA+ bitmap plus the
 * slices it names, driven with millions of random names.
 *
 * Properties checked (docs/architecture.md "Locating a row"):
 *  (P1) Every present name is found in the slice the bitmap picks, and in no
 *       other: every row of every slice is owned by that slice by the bitmap,
 *       is a present name, and is seen exactly once over all slices.
 *  (P2) A removed name is never found.
 *  (P3) A slice split and a bitmap split agree (index, depth of both halves).
 *  (P4) A cursor walk over the whole table -- one list call at a time, the
 *       only state between calls being the cookie, the slice re-derived from
 *       the cookie and the current bitmap, moving to the next slice at
 *       xt_hash_slice_cookie_hi -- returns cookies in strictly increasing
 *       order and every row that was present for the whole walk exactly
 *       once, even though inserts split slices between the calls; rows
 *       inserted or removed during the walk are returned at most once.
 *
 * Scale: 2M names in total by default. POM_TEST_SCALE=<x> multiplies that
 * (e.g. 0.25 for a quick run); XT_SEED=<n> replays a run (seed printed).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt_bitmap.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_slice.h"

#define ROUNDS      8
#define TOTAL_NAMES 2000000.0
#define NAME_STRIDE 32
#define MAX_SPAN    (1u << 22) /* the test's dense slice map; far above what it needs */

#include "pom_rand.h"

static double scale(void)
{
    const char *s = getenv("POM_TEST_SCALE");
    double x = s ? strtod(s, NULL) : 1.0;
    return x > 0 ? x : 1.0;
}

/* Name states in the model. */
enum { ST_NEVER = 0, ST_PRESENT = 1, ST_REMOVED = 2 };
/* Walk flags. */
enum { W_AT_START = 1, W_TOUCHED = 2 };

typedef struct {
    xt_bitmap *bm;
    xt_slice **map;   /* slice index -> slice; map_len entries */
    uint32_t map_len;
    uint32_t capacity;
    uint64_t gen;
    /* model */
    uint32_t n;       /* names generated */
    char *names;      /* n * NAME_STRIDE bytes */
    uint8_t *len;
    uint64_t *hash;
    uint8_t *state;
    uint8_t *wflag;
    uint8_t *seen;
    uint32_t present;
    uint64_t splits;
} table;

static void table_init(table *t, uint32_t n, uint32_t capacity)
{
    memset(t, 0, sizeof(*t));
    t->bm = xt_bitmap_new();
    assert_non_null(t->bm);
    t->map_len = 1024;
    t->map = calloc(t->map_len, sizeof(xt_slice *));
    assert_non_null(t->map);
    t->map[0] = xt_slice_new(0, 0, capacity);
    assert_non_null(t->map[0]);
    t->capacity = capacity;
    t->gen = 1;
    t->names = malloc((size_t)n * NAME_STRIDE);
    t->len = malloc(n);
    t->hash = malloc((size_t)n * sizeof(uint64_t));
    t->state = calloc(n, 1);
    t->wflag = calloc(n, 1);
    t->seen = calloc(n, 1);
    assert_true(t->names && t->len && t->hash && t->state && t->wflag && t->seen);
    /* Random printable names of 8..30 bytes; the index keeps them unique. */
    for (uint32_t i = 0; i < n; i++) {
        char *p = t->names + (size_t)i * NAME_STRIDE;
        int k = snprintf(p, NAME_STRIDE, "%x.", i);
        int extra = 6 + (int)(rnd() % 20);
        for (int j = 0; j < extra && k < NAME_STRIDE - 1; j++)
            p[k++] = "abcdefghijklmnopqrstuvwxyz0123456789_-"[rnd() % 38];
        t->len[i] = (uint8_t)k;
        t->hash[i] = xt_hash_name(p, (size_t)k);
    }
    t->n = n;
}

static void table_free(table *t)
{
    for (uint32_t i = 0; i < t->map_len; i++)
        xt_slice_free(t->map[i]);
    free(t->map);
    xt_bitmap_free(t->bm);
    free(t->names);
    free(t->len);
    free(t->hash);
    free(t->state);
    free(t->wflag);
    free(t->seen);
}

static const char *name_of(const table *t, uint32_t i)
{
    return t->names + (size_t)i * NAME_STRIDE;
}

/* The slice the bitmap picks for hash h. */
static xt_slice *pick(const table *t, uint64_t h)
{
    uint32_t idx = xt_bitmap_lookup(t->bm, xt_hash_vh(h));
    assert_true(idx < t->map_len);
    xt_slice *s = t->map[idx];
    assert_non_null(s);
    assert_int_equal(xt_slice_index(s), idx);
    assert_true(xt_slice_owns(s, h));
    return s;
}

/* Split slice s in both the bitmap and the slice layer (P3). */
static void split(table *t, xt_slice *s)
{
    uint32_t idx = xt_slice_index(s), child_idx;
    unsigned d = xt_slice_depth(s);
    assert_int_equal(xt_bitmap_depth(t->bm, idx), d);
    xt_slice *child = NULL;
    assert_int_equal(xt_slice_split(s, &child), 0);
    assert_int_equal(xt_bitmap_split(t->bm, idx, &child_idx), 0);
    assert_int_equal(xt_slice_index(child), child_idx);
    assert_int_equal(child_idx, idx + (UINT32_C(1) << d));
    assert_int_equal(xt_slice_depth(s), d + 1);
    assert_int_equal(xt_slice_depth(child), d + 1);
    assert_int_equal(xt_bitmap_depth(t->bm, idx), d + 1);
    assert_int_equal(xt_bitmap_depth(t->bm, child_idx), d + 1);
    assert_true(child_idx < MAX_SPAN);
    if (child_idx >= t->map_len) {
        uint32_t nl = t->map_len;
        while (nl <= child_idx)
            nl *= 2;
        t->map = realloc(t->map, nl * sizeof(xt_slice *));
        assert_non_null(t->map);
        memset(t->map + t->map_len, 0, (nl - t->map_len) * sizeof(xt_slice *));
        t->map_len = nl;
    }
    assert_null(t->map[child_idx]);
    t->map[child_idx] = child;
    t->splits++;
}

static void insert(table *t, uint32_t i)
{
    assert_int_equal(t->state[i], ST_NEVER);
    uint8_t row[4];
    xt_put_u32(row, i);
    for (;;) {
        xt_slice *s = pick(t, t->hash[i]);
        int rc = xt_slice_insert(s, name_of(t, i), t->len[i], t->hash[i], row, sizeof(row),
                                 XT_SLICE_EXCL, t->gen);
        if (rc == -ENOSPC) { /* full: split, then retry in the slice now picked */
            split(t, s);
            continue;
        }
        assert_int_equal(rc, 0);
        break;
    }
    t->state[i] = ST_PRESENT;
    t->present++;
}

static void remove_name(table *t, uint32_t i)
{
    assert_int_equal(t->state[i], ST_PRESENT);
    xt_slice *s = pick(t, t->hash[i]);
    assert_int_equal(xt_slice_delete(s, name_of(t, i), t->len[i], t->hash[i], t->gen), 0);
    t->state[i] = ST_REMOVED;
    t->present--;
}

/* ---- P1 / P2 ----------------------------------------------------------- */

typedef struct {
    table *t;
    uint32_t slice;
} scan_ctx;

static uint32_t row_index(const table *t, const xt_slice_entry *e)
{
    assert_int_equal(e->row_len, 4);
    uint32_t i = xt_get_u32(e->row);
    assert_true(i < t->n);
    assert_int_equal(e->name_len, t->len[i]);
    assert_memory_equal(e->name, name_of(t, i), e->name_len);
    assert_true(e->hash == t->hash[i]);
    return i;
}

static int scan_cb(void *arg, const xt_slice_entry *e)
{
    scan_ctx *c = arg;
    uint32_t i = row_index(c->t, e);
    assert_int_equal(c->t->state[i], ST_PRESENT); /* P2: no removed name anywhere */
    assert_int_equal(xt_bitmap_lookup(c->t->bm, xt_hash_vh(e->hash)), c->slice);
    assert_int_equal(c->t->seen[i], 0);            /* P1: in one slice only */
    c->t->seen[i] = 1;
    return 0;
}

static void check_table(table *t)
{
    memset(t->seen, 0, t->n);
    uint64_t rows = 0, nslices = 0;
    for (int64_t k = xt_bitmap_next(t->bm, 0); k >= 0;
         k = xt_bitmap_next(t->bm, (uint64_t)k + 1)) {
        xt_slice *s = t->map[k];
        assert_non_null(s);
        scan_ctx c = {t, (uint32_t)k};
        int n = xt_slice_foreach(s, scan_cb, &c);
        assert_int_equal(n, xt_slice_count(s));
        assert_true(xt_slice_count(s) <= t->capacity);
        rows += (uint64_t)n;
        nslices++;
    }
    assert_int_equal(nslices, xt_bitmap_count(t->bm));
    for (uint32_t k = 0; k < t->map_len; k++) /* no slice the bitmap does not know */
        assert_true(!t->map[k] || xt_bitmap_test(t->bm, k));
    assert_int_equal(rows, t->present);
    for (uint32_t i = 0; i < t->n; i++) {
        const void *row;
        size_t row_len;
        int rc = xt_slice_lookup(pick(t, t->hash[i]), name_of(t, i), t->len[i], t->hash[i],
                                 &row, &row_len);
        if (t->state[i] == ST_PRESENT) {
            assert_int_equal(rc, 0);
            assert_int_equal(row_len, 4);
            assert_int_equal(xt_get_u32(row), i);
            assert_int_equal(t->seen[i], 1);
        } else {
            assert_int_equal(rc, -ENOENT);
        }
    }
}

/* ---- P4 ---------------------------------------------------------------- */

typedef struct {
    table *t;
    uint64_t last_cookie;
    int any;
    uint32_t returned;
} walk_ctx;

static int walk_cb(void *arg, const xt_slice_entry *e)
{
    walk_ctx *w = arg;
    uint32_t i = row_index(w->t, e);
    assert_true(!w->any || e->cookie > w->last_cookie); /* split-stable order */
    assert_int_equal(e->cookie, xt_hash_cookie(e->hash, (unsigned)(e->cookie & XT_COOKIE_SEQ_MAX)));
    w->last_cookie = e->cookie;
    w->any = 1;
    assert_true(w->t->wflag[i] & (W_AT_START | W_TOUCHED));
    assert_int_equal(w->t->seen[i], 0); /* at most once */
    w->t->seen[i] = 1;
    w->returned++;
    return 0;
}

/* V_h of the slices that can hold a cookie: its top 32 order bits, reversed. */
static uint32_t cookie_vh(uint64_t cookie)
{
    return xt_bitrev32((uint32_t)(cookie >> 30));
}

/* One readdir of the whole table while `*next_new` names are inserted and
 * some present ones removed between list calls. */
static void walk(table *t, uint32_t *next_new, uint32_t new_limit, int churn,
                 uint64_t *calls, uint64_t *splits_during)
{
    for (uint32_t i = 0; i < t->n; i++)
        t->wflag[i] = t->state[i] == ST_PRESENT ? W_AT_START : 0;
    memset(t->seen, 0, t->n);
    walk_ctx w = {t, 0, 0, 0};
    uint64_t cookie = 0, splits0 = t->splits;
    int moved_to_next = 1;
    for (;;) {
        uint32_t idx = xt_bitmap_lookup(t->bm, cookie_vh(cookie));
        assert_true(idx < t->map_len && t->map[idx]);
        xt_slice *s = t->map[idx];
        assert_int_equal(xt_slice_index(s), idx);
        unsigned d = xt_slice_depth(s);
        uint64_t lo = xt_hash_slice_cookie_lo(idx, d), hi = xt_hash_slice_cookie_hi(idx, d);
        assert_true(lo <= cookie && cookie < hi);
        if (moved_to_next) /* slice ranges tile the cookie space */
            assert_true(lo == cookie);
        uint64_t next;
        int n = xt_slice_list(s, cookie, 1 + (size_t)(rnd() % 200), walk_cb, &w, &next);
        assert_true(n >= 0);
        (*calls)++;
        if (next == XT_COOKIE_END) {
            if (hi == XT_COOKIE_END)
                break;
            cookie = hi;
            moved_to_next = 1;
        } else {
            assert_true(next > cookie && next < hi);
            cookie = next;
            moved_to_next = 0;
        }
        /* Between calls: inserts (which split), a few removals. */
        unsigned ins = (unsigned)(rnd() % 120);
        for (unsigned k = 0; k < ins && *next_new < new_limit; k++) {
            uint32_t i = (*next_new)++;
            insert(t, i);
            t->wflag[i] |= W_TOUCHED;
        }
        unsigned del = churn ? (unsigned)(rnd() % 8) : 0;
        for (unsigned k = 0; k < del; k++) {
            uint32_t i = (uint32_t)(rnd() % *next_new);
            if (t->state[i] == ST_PRESENT) {
                remove_name(t, i);
                t->wflag[i] |= W_TOUCHED;
            }
        }
        t->gen++;
    }
    for (uint32_t i = 0; i < t->n; i++)
        if (t->wflag[i] == W_AT_START) /* present throughout: exactly once */
            assert_int_equal(t->seen[i], 1);
    *splits_during += t->splits - splits0;
}

/* ---- the test ----------------------------------------------------------- */

static void test_table_properties(void **state)
{
    (void)state;
    uint32_t per_round = (uint32_t)(TOTAL_NAMES * scale() / ROUNDS);
    if (per_round < 1000)
        per_round = 1000;
    printf("[ table_props ] seed %llu, %u rounds x %u names (XT_SEED, POM_TEST_SCALE)\n",
           (unsigned long long)base_seed(), ROUNDS, per_round);
    uint64_t total_names = 0, total_splits = 0, list_calls = 0, walk_splits = 0;
    uint64_t t0 = xt_mono_ns();
    for (unsigned r = 0; r < ROUNDS; r++) {
        rng_state = base_seed() + r * UINT64_C(0x100000001b3);
        uint32_t capacity = r % 2 ? 1024 : 64 + (uint32_t)(rnd() % 512);
        table t;
        table_init(&t, per_round, capacity);
        /* 70% of the names up front, then removals, then a walk during which
         * the remaining 30% arrive, then another walk with no changes. */
        uint32_t first = per_round / 10 * 7, next_new = first;
        for (uint32_t i = 0; i < first; i++) {
            insert(&t, i);
            if (i % 4096 == 0)
                t.gen++;
        }
        check_table(&t);
        for (uint32_t k = 0; k < first / 4; k++) {
            uint32_t i = (uint32_t)(rnd() % first);
            if (t.state[i] == ST_PRESENT)
                remove_name(&t, i);
        }
        t.gen++;
        check_table(&t);
        walk(&t, &next_new, per_round, 1, &list_calls, &walk_splits);
        check_table(&t);
        uint32_t limit = next_new; /* a quiet walk: everything exactly once */
        walk(&t, &next_new, limit, 0, &list_calls, &walk_splits);
        for (uint32_t i = 0; i < t.n; i++)
            assert_int_equal(t.seen[i], t.state[i] == ST_PRESENT);
        check_table(&t);
        total_names += next_new;
        total_splits += t.splits;
        printf("[ table_props ] round %u: capacity %u, %u names, %u present, %u slices, "
               "span %u\n",
               r, capacity, next_new, t.present, xt_bitmap_count(t.bm), xt_bitmap_span(t.bm));
        table_free(&t);
    }
    printf("[ table_props ] %llu names, %llu splits (%llu during walks), %llu list calls, "
           "%.1f s\n",
           (unsigned long long)total_names, (unsigned long long)total_splits,
           (unsigned long long)walk_splits, (unsigned long long)list_calls,
           (double)(xt_mono_ns() - t0) / 1e9);
    if (walk_splits == 0) /* say which run, should it ever happen again (seen once) */
        fprintf(stderr, "[ table_props ] no split during a walk with seed %llu\n",
                (unsigned long long)base_seed());
    fflush(stdout);
    assert_true(walk_splits > 0); /* the walks did run under splits */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_properties),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
