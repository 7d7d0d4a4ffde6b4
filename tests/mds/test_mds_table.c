/*
 * test_mds_table.c -- the row operations: exclusive create, conditional
 * update/delete, argument errors, listing with cookies that neither repeats
 * nor skips a row while slices split under the reader, splits persisted
 * with their bitmap, allocation-failure countdown on create.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "mds_test_env.h"
#include "xt_bitmap.h"

static uint64_t g_seed;

static void key(char *buf, unsigned i)
{
    snprintf(buf, 64, "entry-%u", i);
}

/* Conditional update: the row's seq must be the expected one. */
struct cond {
    uint64_t expect, id, next;
};

static int cond_update(void *arg, const void *old, size_t old_len, uint8_t **out,
                       size_t *out_len)
{
    struct cond *c = arg;
    uint64_t id, seq;
    if (!tu_row_ok(old, old_len, &id, &seq))
        return -EBADMSG;
    if (seq != c->expect)
        return -ESTALE;
    size_t len;
    uint8_t *r = tu_row(c->id, c->next, 3, &len);
    *out = xt_malloc(len);
    memcpy(*out, r, len);
    *out_len = len;
    free(r);
    return 0;
}

static int cond_delete(void *arg, const void *row, size_t len)
{
    struct cond *c = arg;
    uint64_t id, seq;
    if (!tu_row_ok(row, len, &id, &seq))
        return -EBADMSG;
    return seq == c->expect ? 0 : -ESTALE;
}

static void test_row_ops(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 5, .split = 8 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen;
    char big[300];
    memset(big, 'a', sizeof big);
    assert_int_equal(tenv_put(&v, 1, "x", 1, 1, &gen), -ENOENT); /* no table */
    assert_int_equal(mds_table_mktable(v.t, 1, 1, &gen), 0);
    assert_int_equal(mds_table_create(v.t, 1, 1, big, 256, xt_hash_name(big, 256), "r", 1, 0, &gen),
                     -EINVAL);
    assert_int_equal(mds_table_create(v.t, 1, 1, big, 0, xt_hash_name(big, 0), "r", 1, 0, &gen),
                     -EINVAL);
    assert_int_equal(mds_table_create(v.t, 1, 1, big, 255, xt_hash_name(big, 255), "r", 1, 0, &gen),
                     0);
    assert_int_equal(tenv_put(&v, 1, "x", 1, 1, &gen), 0);
    size_t len;
    uint8_t *r = tu_row(1, 2, 0, &len);
    assert_int_equal(
        mds_table_create(v.t, 1, 1, "x", 1, xt_hash_name("x", 1), r, len, MDS_TABLE_EXCL, &gen),
        -EEXIST);
    free(r);
    struct cond c = { .expect = 5, .id = 1, .next = 2 };
    assert_int_equal(
        mds_table_update(v.t, 1, 1, "x", 1, xt_hash_name("x", 1), cond_update, &c, &gen), -ESTALE);
    c.expect = 1;
    assert_int_equal(
        mds_table_update(v.t, 1, 1, "x", 1, xt_hash_name("x", 1), cond_update, &c, &gen), 0);
    assert_int_equal(
        mds_table_update(v.t, 1, 1, "nope", 4, xt_hash_name("nope", 4), cond_update, &c, &gen),
        -ENOENT);
    uint64_t id, seq;
    assert_int_equal(tenv_get(&v, 1, "x", &id, &seq), 1);
    assert_int_equal(seq, 2);
    c.expect = 1;
    assert_int_equal(
        mds_table_delete(v.t, 1, 1, "x", 1, xt_hash_name("x", 1), cond_delete, &c, &gen), -ESTALE);
    c.expect = 2;
    assert_int_equal(
        mds_table_delete(v.t, 1, 1, "x", 1, xt_hash_name("x", 1), cond_delete, &c, &gen), 0);
    assert_int_equal(mds_table_delete(v.t, 1, 1, "x", 1, xt_hash_name("x", 1), NULL, NULL, &gen),
                     -ENOENT);
    assert_int_equal(tenv_get(&v, 1, "x", &id, &seq), 0);
    /* Many rows through many splits; then a restart sees the same bitmap. */
    char name[64];
    for (unsigned i = 0; i < 500; i++) {
        key(name, i);
        assert_int_equal(tenv_put(&v, 1, name, i, 1, &gen), 0);
    }
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    uint8_t *bm1, *bm2;
    size_t l1, l2;
    assert_int_equal(mds_table_bitmap(v.t, 1, 1, &bm1, &l1), 0);
    xt_bitmap *b;
    assert_int_equal(xt_bitmap_decode(bm1, l1, &b), 0);
    assert_true(xt_bitmap_count(b) >= 500 / 8);
    xt_bitmap_free(b);
    tenv_crash(&v);
    assert_int_equal(tenv_start(&v), 0);
    assert_int_equal(mds_table_bitmap(v.t, 1, 1, &bm2, &l2), 0);
    assert_int_equal(l1, l2);
    assert_memory_equal(bm1, bm2, l1);
    xt_free(bm1);
    xt_free(bm2);
    for (unsigned i = 0; i < 500; i++) {
        key(name, i);
        assert_int_equal(tenv_get(&v, 1, name, &id, &seq), 1);
        assert_int_equal(id, i);
    }
    tenv_fini(&v);
}

/* ---- listing while splitting ------------------------------------------------ */

enum { BASE = 1500, EXTRA = 1500 };

struct seen {
    uint8_t *count; /* per id */
    uint64_t last;
    bool first;
};

static int seen_cb(void *arg, const xt_slice_entry *e)
{
    struct seen *s = arg;
    uint64_t id, seq;
    if (!tu_row_ok(e->row, e->row_len, &id, &seq) || id >= BASE + EXTRA)
        return -EBADMSG;
    if (!s->first && e->cookie <= s->last)
        return -EILSEQ;
    s->first = false;
    s->last = e->cookie;
    s->count[id]++;
    return 0;
}

struct inserter {
    struct tenv *v;
    atomic_bool done;
};

static void *insert_main(void *p)
{
    struct inserter *in = p;
    char name[64];
    for (unsigned i = BASE; i < BASE + EXTRA; i++) {
        key(name, i);
        uint64_t gen;
        if (tenv_put(in->v, 2, name, i, 1, &gen) != 0)
            abort();
    }
    atomic_store(&in->done, true);
    return NULL;
}

static void test_list_while_splitting(void **state)
{
    (void)state;
    uint64_t s = g_seed;
    for (int round = 0; round < 3; round++) {
        struct tenv v = { .interval_ms = 2, .split = 16 };
        assert_int_equal(tenv_start(&v), 0);
        uint64_t gen;
        assert_int_equal(mds_table_mktable(v.t, 1, 2, &gen), 0);
        char name[64];
        for (unsigned i = 0; i < BASE; i++) {
            key(name, i);
            assert_int_equal(tenv_put(&v, 2, name, i, 1, &gen), 0);
        }
        struct inserter in = { &v, false };
        pthread_t th;
        pthread_create(&th, NULL, insert_main, &in);
        struct seen sn = { calloc(BASE + EXTRA, 1), 0, true };
        uint64_t cookie = 0;
        unsigned pages = 0;
        do {
            uint64_t next;
            size_t page = 1 + tu_rand(&s) % 40;
            int n = mds_table_list(v.t, 1, 2, cookie, page, seen_cb, &sn, &next);
            assert_true(n >= 0);
            assert_true((size_t)n <= page);
            cookie = next;
            pages++;
        } while (cookie != XT_COOKIE_END);
        pthread_join(th, NULL);
        for (unsigned i = 0; i < BASE + EXTRA; i++) {
            if (sn.count[i] > 1)
                fail_msg("row %u listed %u times", i, sn.count[i]);
            if (i < BASE && sn.count[i] != 1)
                fail_msg("row %u (there before the listing) skipped", i);
        }
        struct mds_stats_summary sp;
        mds_stats_summary(v.stats, MDS_OP_SPLIT, &sp);
        fprintf(stderr, "round %d: %u pages, %llu splits\n", round, pages,
                (unsigned long long)sp.count);
        assert_true(sp.count > 50);
        free(sn.count);
        tenv_fini(&v);
    }
}

/* Every allocation of a create may fail: the call then fails cleanly
 * (-ENOMEM) and the row is there iff the call succeeded. */
static void test_create_alloc_countdown(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 100000, .split = 8192 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen;
    assert_int_equal(mds_table_mktable(v.t, 1, 3, &gen), 0);
    char name[64];
    int failures = 0;
    for (long n = 0; n < 40; n++) {
        key(name, (unsigned)n);
        size_t len;
        uint8_t *r = tu_row((uint64_t)n, 1, 10, &len);
        xt_alloc_fail_after(n);
        int rc = mds_table_create(v.t, 1, 3, name, strlen(name), xt_hash_name(name, strlen(name)),
                                  r, len, 0, &gen);
        xt_alloc_fail_after(-1);
        free(r);
        assert_true(rc == 0 || rc == -ENOMEM);
        failures += rc != 0;
        uint64_t id, seq;
        assert_int_equal(tenv_get(&v, 3, name, &id, &seq) == 1 ? 0 : -ENOMEM, rc);
    }
    assert_true(failures > 0);
    assert_int_equal(mds_group_sync(v.g, 0, 5000), 0);
    tenv_fini(&v);
}

/* Slices split by bytes too (split_bytes): by creates of big rows, and by
 * updates that grow small rows (a file's bytes come after its create).
 * Without it, 8192 rows of 64 KiB inline data made one 512 MiB image,
 * over the MDSL's record limit: no commit could carry it. */
static int grow_fn(void *arg, const void *old, size_t old_len, uint8_t **out, size_t *out_len)
{
    uint64_t id, seq;
    if (!tu_row_ok(old, old_len, &id, &seq))
        return -EIO;
    size_t len;
    uint8_t *r = tu_row(id, seq + 1, *(const size_t *)arg, &len);
    *out = xt_malloc(len);
    if (*out)
        memcpy(*out, r, len);
    *out_len = len;
    free(r);
    return *out ? 0 : -ENOMEM;
}

static uint32_t slices_of(struct tenv *v, uint64_t table)
{
    uint8_t *enc;
    size_t len;
    xt_bitmap *bm = NULL;
    assert_int_equal(mds_table_bitmap(v->t, 1, table, &enc, &len), 0);
    assert_int_equal(xt_bitmap_decode(enc, len, &bm), 0);
    uint32_t n = xt_bitmap_count(bm);
    xt_bitmap_free(bm);
    xt_free(enc);
    return n;
}

static void test_split_bytes(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 5, .split_bytes = 256u << 10 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen, id, seq;
    const uint64_t TB = 0x0100000000000077ull, TU = 0x0100000000000078ull;
    assert_int_equal(mds_table_mktable(v.t, 1, TB, &gen), 0);
    assert_int_equal(mds_table_mktable(v.t, 1, TU, &gen), 0);
    char name[32];
    size_t big = 16u << 10;
    for (unsigned i = 0; i < 96; i++) { /* 1.5 MiB of rows by creates */
        size_t len;
        uint8_t *r = tu_row(i, 0, big, &len);
        snprintf(name, sizeof name, "b%u", i);
        assert_int_equal(mds_table_create(v.t, 1, TB, name, strlen(name),
                                          xt_hash_name(name, strlen(name)), r, len, 0, &gen),
                         0);
        free(r);
    }
    for (unsigned i = 0; i < 96; i++) { /* small rows, grown by updates */
        snprintf(name, sizeof name, "u%u", i);
        assert_int_equal(tenv_put(&v, TU, name, i, 0, &gen), 0);
    }
    assert_int_equal(slices_of(&v, TU), 1);
    for (unsigned i = 0; i < 96; i++) {
        snprintf(name, sizeof name, "u%u", i);
        assert_int_equal(mds_table_update(v.t, 1, TU, name, strlen(name),
                                          xt_hash_name(name, strlen(name)), grow_fn, &big, &gen),
                         0);
    }
    /* 1.5 MiB over 256 KiB slices: at least 4 each (hash halves are uneven). */
    uint32_t nb = slices_of(&v, TB), nu = slices_of(&v, TU);
    print_message("split by bytes: %u slices (creates), %u slices (updates)\n", nb, nu);
    assert_true(nb >= 4);
    assert_true(nu >= 4);
    /* Committed, the MDS restarted: every slice loads, every row is whole. */
    assert_int_equal(mds_group_sync(v.g, 0, 10000), 0);
    tenv_crash(&v);
    assert_int_equal(tenv_start(&v), 0);
    assert_int_equal(slices_of(&v, TB), nb);
    for (unsigned i = 0; i < 96; i++) {
        snprintf(name, sizeof name, "b%u", i);
        assert_int_equal(tenv_get(&v, TB, name, &id, &seq), 1);
        assert_int_equal(id, i);
        snprintf(name, sizeof name, "u%u", i);
        assert_int_equal(tenv_get(&v, TU, name, &id, &seq), 1);
        assert_int_equal(seq, 1);
    }
    tenv_fini(&v);
}

int main(void)
{
    g_seed = tu_seed("test_mds_table");
    xt_log_set_level(XT_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_ops),
        cmocka_unit_test(test_split_bytes),
        cmocka_unit_test(test_list_while_splitting),
        cmocka_unit_test(test_create_alloc_countdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
