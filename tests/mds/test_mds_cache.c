/*
 * test_mds_cache.c -- load-once under concurrency, load failures, eviction
 * under a small memory bound keeps every row reachable, pressure hook.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "mds_cache.h"
#include "mds_store_mem.h"
#include "mds_test_util.h"
#include "xt_slice.h"

static uint64_t g_seed;
static uint64_t g_txid = 1;

static uint32_t locate1(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    (void)arg; (void)fsid; (void)table; (void)slice;
    return 1;
}

static void row_name(char *buf, uint64_t table, uint32_t i)
{
    snprintf(buf, 64, "t%llu-row-%u", (unsigned long long)table, i);
}

/* Store table `table` slice 0 (depth 0) with `rows` rows as an image plus a
 * delta that rewrites the first half, committed directly in the store. */
static void store_slice(const mds_store *st, uint64_t table, uint32_t rows)
{
    xt_slice *s = xt_slice_new(0, 0, 8192);
    assert_non_null(s);
    char name[64];
    for (uint32_t i = 0; i < rows; i++) {
        size_t len;
        uint8_t *r = tu_row(table * 100000 + i, 1, i % 40, &len);
        row_name(name, table, i);
        assert_true(xt_slice_insert(s, name, strlen(name), xt_hash_name(name, strlen(name)),
                                    r, len, 0, 1) >= 0);
        free(r);
    }
    uint8_t *img;
    size_t ilen;
    assert_int_equal(xt_slice_encode(s, &img, &ilen), 0);
    for (uint32_t i = 0; i < rows / 2; i++) {
        size_t len;
        uint8_t *r = tu_row(table * 100000 + i, 2, i % 40, &len);
        row_name(name, table, i);
        assert_int_equal(xt_slice_update(s, name, strlen(name),
                                         xt_hash_name(name, strlen(name)), r, len, 2), 0);
        free(r);
    }
    uint8_t *dl;
    size_t dlen;
    assert_int_equal(xt_slice_encode_delta(s, 1, &dl, &dlen), 0);
    struct mds_rec rec = { 1, table, 0, 1, true, img, ilen };
    uint64_t tx = g_txid++;
    assert_int_equal(mds_store_prepare(st, 1, tx, &rec, 1), 0);
    assert_int_equal(mds_store_commit(st, 1, tx), 0);
    rec = (struct mds_rec){ 1, table, 0, 2, false, dl, dlen };
    tx = g_txid++;
    assert_int_equal(mds_store_prepare(st, 1, tx, &rec, 1), 0);
    assert_int_equal(mds_store_commit(st, 1, tx), 0);
    xt_free(img);
    xt_free(dl);
    xt_slice_free(s);
}

/* Check row i of table through the pinned slice. */
static void check_row(mds_cent *e, uint64_t table, uint32_t i, uint32_t rows)
{
    char name[64];
    row_name(name, table, i);
    xt_slice *s = mds_cent_slice(e);
    xt_slice_rdlock(s);
    const void *p;
    size_t len;
    int rc = xt_slice_lookup(s, name, strlen(name), xt_hash_name(name, strlen(name)), &p, &len);
    uint64_t id = 0, seq = 0;
    int ok = rc == 0 && tu_row_ok(p, len, &id, &seq);
    xt_slice_unlock(s);
    /* rows of the first half were rewritten by the delta (seq 2) */
    uint64_t want_seq = i < rows / 2 ? 2 : 1;
    if (!ok || id != table * 100000 + i || seq != want_seq)
        fail_msg("table %llu row %u: rc %d ok %d", (unsigned long long)table, i, rc, ok);
}

struct env {
    mds_store_mem *mem;
    struct tu_wrap w;
    mds_store st;
    mds_stats *stats;
};

static void env_init(struct env *v)
{
    memset(v, 0, sizeof *v);
    v->mem = mds_store_mem_new();
    mds_store_mem_bind(v->mem, &v->w.inner);
    v->st.ops = &tu_wrap_ops;
    v->st.ctx = &v->w;
    v->stats = mds_stats_new();
}

static void env_fini(struct env *v)
{
    mds_store_mem_free(v->mem);
    mds_stats_free(v->stats);
}

struct getter {
    mds_cache *c;
    struct mds_key k;
    int rc;
    mds_cent *e;
    pthread_barrier_t *bar;
};

static void *get_thread(void *p)
{
    struct getter *g = p;
    pthread_barrier_wait(g->bar);
    g->rc = mds_cache_get(g->c, &g->k, &g->e);
    return NULL;
}

static void test_load_once(void **state)
{
    (void)state;
    struct env v;
    env_init(&v);
    store_slice(&v.st, 7, 300);
    struct mds_cache_opts o = { .store = &v.st, .locate = locate1, .stats = v.stats };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&o, &c), 0);
    v.w.load_delay_ms = 50;
    enum { N = 8 };
    pthread_t t[N];
    struct getter g[N];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, N);
    for (int i = 0; i < N; i++) {
        g[i] = (struct getter){ c, { 1, 0, 7 }, 0, NULL, &bar };
        pthread_create(&t[i], NULL, get_thread, &g[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&v.w.loads), 1);
    for (int i = 0; i < N; i++) {
        assert_int_equal(g[i].rc, 0);
        assert_ptr_equal(g[i].e, g[0].e);
    }
    for (uint32_t i = 0; i < 300; i++)
        check_row(g[0].e, 7, i, 300);
    /* The delta was replayed: version 2, seq 2 for the first half. */
    assert_int_equal(mds_cent_commit(g[0].e)->version, 2);
    struct mds_cache_info info;
    mds_cache_info(c, &info);
    assert_int_equal(info.entries, 1);
    assert_int_equal(info.pinned, 1);
    assert_int_equal(info.rows, 300);
    for (int i = 0; i < N; i++)
        mds_cache_put(c, g[i].e);
    mds_cache_info(c, &info);
    assert_int_equal(info.pinned, 0);
    assert_true(mds_stats_counter(v.stats, MDS_CTR_CACHE_LOAD_WAITS) +
                mds_stats_counter(v.stats, MDS_CTR_CACHE_HITS) == N - 1);
    pthread_barrier_destroy(&bar);
    mds_cache_free(c);
    env_fini(&v);
}

static void test_load_failure_shared_then_retried(void **state)
{
    (void)state;
    struct env v;
    env_init(&v);
    store_slice(&v.st, 9, 10);
    struct mds_cache_opts o = { .store = &v.st, .locate = locate1 };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&o, &c), 0);
    mds_store_mem_fail(v.mem, 1, MDS_MEM_LOAD, 0, 1, -EIO, false);
    v.w.load_delay_ms = 30;
    enum { N = 4 };
    pthread_t t[N];
    struct getter g[N];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, N);
    for (int i = 0; i < N; i++) {
        g[i] = (struct getter){ c, { 1, 0, 9 }, 0, NULL, &bar };
        pthread_create(&t[i], NULL, get_thread, &g[i]);
    }
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    int failed = 0;
    for (int i = 0; i < N; i++) {
        if (g[i].rc == -EIO)
            failed++;
        else
            mds_cache_put(c, g[i].e);
    }
    assert_true(failed >= 1);
    v.w.load_delay_ms = 0;
    mds_cent *e;
    assert_int_equal(mds_cache_get(c, &(struct mds_key){ 1, 0, 9 }, &e), 0);
    check_row(e, 9, 3, 10);
    mds_cache_put(c, e);
    assert_int_equal(mds_cache_get(c, &(struct mds_key){ 1, 0, 10 }, &e), -ENOENT);
    struct mds_cache_info info;
    mds_cache_info(c, &info);
    assert_int_equal(info.entries, 1);
    pthread_barrier_destroy(&bar);
    mds_cache_free(c);
    env_fini(&v);
}

struct reader {
    mds_cache *c;
    uint64_t seed;
    unsigned tables, rows;
    int iters;
};

static void *read_thread(void *p)
{
    struct reader *r = p;
    for (int i = 0; i < r->iters; i++) {
        uint64_t table = 100 + tu_rand(&r->seed) % r->tables;
        mds_cent *e;
        int rc = mds_cache_get(r->c, &(struct mds_key){ 1, 0, table }, &e);
        if (rc != 0) {
            fprintf(stderr, "get %llu: %d\n", (unsigned long long)table, rc);
            abort();
        }
        check_row(e, table, (uint32_t)(tu_rand(&r->seed) % r->rows), r->rows);
        mds_cache_put(r->c, e);
    }
    return NULL;
}

static int g_pressure;
static void pressure(void *arg)
{
    (void)arg;
    __atomic_add_fetch(&g_pressure, 1, __ATOMIC_RELAXED);
}

/* 120 slices of 200 rows; the bound holds ~15 of them. Four threads read
 * random rows: every row stays reachable, memory stays near the bound. */
static void test_eviction_keeps_rows_reachable(void **state)
{
    (void)state;
    struct env v;
    env_init(&v);
    enum { TABLES = 120, ROWS = 200 };
    for (unsigned t = 0; t < TABLES; t++)
        store_slice(&v.st, 100 + t, ROWS);
    /* Measure one slice to size the bound. */
    struct mds_cache_opts o = { .store = &v.st, .locate = locate1, .stats = v.stats };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&o, &c), 0);
    mds_cent *e;
    assert_int_equal(mds_cache_get(c, &(struct mds_key){ 1, 0, 100 }, &e), 0);
    struct mds_cache_info info;
    mds_cache_info(c, &info);
    size_t one = info.bytes;
    fprintf(stderr, "one slice of %u rows: %zu bytes, %.1f bytes/row\n", ROWS, one,
            info.bytes_per_row);
    mds_cache_put(c, e);
    mds_cache_free(c);

    o.mem_bound = one * 15;
    assert_int_equal(mds_cache_new(&o, &c), 0);
    mds_cache_set_pressure(c, pressure, NULL);
    enum { T = 4 };
    pthread_t t[T];
    struct reader r[T];
    for (int i = 0; i < T; i++) {
        r[i] = (struct reader){ c, g_seed + (uint64_t)i, TABLES, ROWS, 3000 };
        pthread_create(&t[i], NULL, read_thread, &r[i]);
    }
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    mds_cache_info(c, &info);
    fprintf(stderr, "bound %zu: bytes %zu entries %zu loads %llu evictions %llu\n",
            info.bound, info.bytes, info.entries, (unsigned long long)info.loads,
            (unsigned long long)info.evictions);
    assert_true(info.bytes <= o.mem_bound);
    assert_true(info.evictions > 0);
    assert_int_equal(info.pinned, 0);
    /* Every row of every table, sequentially. */
    for (unsigned tb = 0; tb < TABLES; tb++) {
        assert_int_equal(mds_cache_get(c, &(struct mds_key){ 1, 0, 100 + tb }, &e), 0);
        for (uint32_t i = 0; i < ROWS; i++)
            check_row(e, 100 + tb, i, ROWS);
        mds_cache_put(c, e);
    }
    mds_cache_info(c, &info);
    assert_true(info.bytes <= o.mem_bound);

    /* Pinned beyond the bound: nothing to evict, the pressure hook fires. */
    g_pressure = 0;
    mds_cent *pins[20];
    for (int i = 0; i < 20; i++)
        assert_int_equal(mds_cache_get(c, &(struct mds_key){ 1, 0, 100 + (uint64_t)i }, &pins[i]),
                         0);
    assert_true(g_pressure > 0);
    mds_cache_info(c, &info);
    assert_true(info.bytes > o.mem_bound);
    for (int i = 0; i < 20; i++)
        mds_cache_put(c, pins[i]);
    mds_cache_info(c, &info);
    assert_true(info.bytes <= o.mem_bound);
    mds_cache_free(c);
    env_fini(&v);
}

static void test_add_and_peek(void **state)
{
    (void)state;
    struct env v;
    env_init(&v);
    struct mds_cache_opts o = { .store = &v.st, .locate = locate1 };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&o, &c), 0);
    struct mds_key k = { 2, 5, 77 };
    mds_cent *e, *e2;
    assert_int_equal(mds_cache_peek(c, &k, &e), -ENOENT);
    xt_slice *s = xt_slice_new(1, 2, 64);
    assert_int_equal(mds_cache_add(c, &k, s, &e), 0);
    xt_slice *s2 = xt_slice_new(1, 2, 64);
    assert_int_equal(mds_cache_add(c, &k, s2, &e2), -EEXIST);
    xt_slice_free(s2);
    assert_int_equal(mds_cache_peek(c, &k, &e2), 0);
    assert_ptr_equal(e, e2);
    assert_ptr_equal(mds_cent_slice(e), s);
    mds_cache_put(c, e2);
    mds_cache_put(c, e);
    /* Allocation failures: every countdown fails cleanly or succeeds. */
    for (long n = 0; n < 10; n++) {
        struct mds_key k2 = { 3, 0, (uint64_t)n };
        xt_slice *s3 = xt_slice_new(0, 0, 16);
        xt_alloc_fail_after(n);
        int rc = mds_cache_add(c, &k2, s3, &e);
        xt_alloc_fail_after(-1);
        if (rc == 0)
            mds_cache_put(c, e);
        else {
            assert_int_equal(rc, -ENOMEM);
            xt_slice_free(s3);
        }
    }
    mds_cache_free(c);
    env_fini(&v);
}

int main(void)
{
    g_seed = tu_seed("test_mds_cache");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_once),
        cmocka_unit_test(test_load_failure_shared_then_retried),
        cmocka_unit_test(test_eviction_keeps_rows_reachable),
        cmocka_unit_test(test_add_and_peek),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
