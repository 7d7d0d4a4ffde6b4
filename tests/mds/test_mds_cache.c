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
#include <stdatomic.h>

#include "mds_cache.h"
#include "mds_store_local.h"
#include "mds_test_util.h"
#include "xt_hash.h"
#include "xt_slice.h"

static uint64_t g_seed;
static uint64_t g_txid = 1;

static uint32_t locate1(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    (void)arg; (void)fsid; (void)table; (void)slice;
    return 1;
}

static pthread_once_t place1_once = PTHREAD_ONCE_INIT;
static mds_place *place1_p;
static void place1_init(void)
{
    assert_int_equal(mds_place_new(locate1, NULL, &place1_p), 0);
}
/* locate1 as a placement (one for the process, reachable until exit). */
static mds_place *place1(void)
{
    pthread_once(&place1_once, place1_init);
    return place1_p;
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
    struct xt_store_rec rec = { .type = XT_STORE_IMAGE, .id = { .fsid = 1, .table = table },
                                .version = 1, .data = img, .len = (uint32_t)ilen };
    uint64_t tx = g_txid++;
    assert_int_equal(mds_store_prepare(st, 1, tx, &rec, 1), 0);
    assert_int_equal(mds_store_commit(st, 1, tx), 0);
    rec = (struct xt_store_rec){ .type = XT_STORE_DELTA, .id = { .fsid = 1, .table = table },
                                 .version = 2, .data = dl, .len = (uint32_t)dlen };
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
    mds_store_local *mem;
    struct tu_wrap w;
    mds_store st;
    mds_stats *stats;
};

static void env_init(struct env *v)
{
    memset(v, 0, sizeof *v);
    v->mem = mds_store_local_new();
    mds_store_local_bind(v->mem, &v->w.inner);
    v->st.ops = &tu_wrap_ops;
    v->st.ctx = &v->w;
    v->stats = mds_stats_new();
}

static void env_fini(struct env *v)
{
    mds_store_local_free(v->mem);
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
    struct mds_cache_opts o = { .store = &v.st, .place = place1(), .stats = v.stats };
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
    struct mds_cache_opts o = { .store = &v.st, .place = place1() };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&o, &c), 0);
    mds_store_local_fail(v.mem, 1, MDS_LOCAL_LOAD, 0, 1, -EIO, false);
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
    struct mds_cache_opts o = { .store = &v.st, .place = place1(), .stats = v.stats };
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
    struct mds_cache_opts o = { .store = &v.st, .place = place1() };
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
    /* The rows of the info leave system rows out (invariant 5). */
    for (uint32_t i = 0; i < 5; i++) {
        uint64_t h = (uint64_t)(i * 4 + 1) << 32 | i; /* V_h mod 4 == 1: slice (1, 2) */
        char nm[8];
        snprintf(nm, sizeof nm, "r%u", i);
        assert_int_equal(xt_slice_insert(s, nm, strlen(nm), h, "x", 1, 0, 1), 0);
        uint8_t sn[XT_SYS_HEAD + 8] = { 0 };
        xt_hash_sys_head(sn, XT_SYS_PENDING, h);
        if (i < 3)
            assert_int_equal(xt_slice_insert(s, sn, sizeof sn, h, "p", 1, 0, 1), 0);
    }
    mds_cache_resize(c, e);
    struct mds_cache_info info;
    mds_cache_info(c, &info);
    assert_int_equal(info.rows, 5);
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

/* ---- stage 2: before_load, fence, find, keys, reread (invariant 6) ---- */

struct hook {
    atomic_int calls;
    int rc;              /* what the hook answers */
    bool fence;          /* what it sets */
    atomic_bool block;   /* wait while set (a load held in LOADING) */
    atomic_bool entered;
};

static int hook_fn(void *arg, const struct mds_key *k, bool *fence)
{
    (void)k;
    struct hook *h = arg;
    atomic_fetch_add(&h->calls, 1);
    atomic_store(&h->entered, true);
    while (atomic_load(&h->block))
        tu_sleep_ms(1);
    *fence = h->fence;
    return h->rc;
}

/* One record committed directly in the store (what a commit group writes). */
static int store_rec(const mds_store *st, uint64_t table, uint64_t version, bool image,
                     const xt_slice *s)
{
    uint8_t *b;
    size_t len;
    int rc = image ? xt_slice_encode(s, &b, &len) : xt_slice_encode_delta(s, 1, &b, &len);
    assert_int_equal(rc, 0);
    struct xt_store_rec rec = { .type = image ? XT_STORE_IMAGE : XT_STORE_DELTA,
                                .id = { .fsid = 1, .table = table }, .version = version,
                                .data = b, .len = (uint32_t)len };
    uint64_t tx = g_txid++;
    rc = mds_store_prepare(st, 1, tx, &rec, 1);
    if (rc == 0)
        assert_int_equal(mds_store_commit(st, 1, tx), 0);
    xt_free(b);
    return rc;
}

static void test_fence_and_hook(void **state)
{
    (void)state;
    struct env v;
    env_init(&v);
    store_slice(&v.st, 7, 50); /* versions 1 (image) and 2 (delta) */
    struct hook h = { .fence = true };
    struct mds_cache_opts o = { .store = &v.st, .place = place1(), .before_load = hook_fn,
                                .before_load_arg = &h };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&o, &c), 0);
    struct mds_key k = { 1, 0, 7 };
    mds_cent *e;
    /* A refusing hook: -EAGAIN, nothing cached, the store not read. */
    h.rc = -EAGAIN;
    assert_int_equal(mds_cache_get(c, &k, &e), -EAGAIN);
    assert_int_equal(atomic_load(&v.w.loads), 0);
    assert_int_equal(mds_cache_find(c, &k, &e), -ENOENT);
    struct mds_cache_info info;
    mds_cache_info(c, &info);
    assert_int_equal(info.entries, 0);
    /* The next get asks again and loads; fenced: versions above the gap
     * and the next record an image. */
    h.rc = 0;
    assert_int_equal(mds_cache_get(c, &k, &e), 0);
    assert_int_equal(atomic_load(&h.calls), 2);
    assert_int_equal(mds_cent_commit(e)->version, 2 + MDS_CACHE_FENCE_GAP);
    assert_true(mds_cent_commit(e)->force_image);
    for (uint32_t i = 0; i < 50; i++)
        check_row(e, 7, i, 50);
    mds_cache_put(c, e);
    /* A hit does not ask. */
    assert_int_equal(mds_cache_get(c, &k, &e), 0);
    assert_int_equal(atomic_load(&h.calls), 2);
    mds_cache_put(c, e);
    /* Unfenced: the stored version, no forced image. */
    h.fence = false;
    struct mds_key k2 = { 1, 0, 8 };
    store_slice(&v.st, 8, 10);
    assert_int_equal(mds_cache_get(c, &k2, &e), 0);
    assert_int_equal(mds_cent_commit(e)->version, 2);
    assert_false(mds_cent_commit(e)->force_image);
    mds_cache_put(c, e);
    /* reread: the stored slice and version, the hook asked, nothing cached. */
    store_slice(&v.st, 9, 20);
    mds_cache_info(c, &info);
    size_t entries = info.entries;
    xt_slice *s;
    uint64_t ver;
    uint32_t site = 0;
    bool fenced;
    h.fence = true;
    int calls = atomic_load(&h.calls);
    assert_int_equal(mds_cache_reread(c, &(struct mds_key){ 1, 0, 9 }, &s, &ver, &site, &fenced), 0);
    assert_int_equal(atomic_load(&h.calls), calls + 1);
    assert_true(fenced);
    assert_int_equal(ver, 2);
    assert_int_equal(site, 1);
    assert_int_equal(xt_slice_count(s), 20);
    xt_slice_free(s);
    mds_cache_info(c, &info);
    assert_int_equal(info.entries, entries);
    assert_int_equal(mds_cache_find(c, &(struct mds_key){ 1, 0, 9 }, &e), -ENOENT);
    assert_int_equal(mds_cache_reread(c, &(struct mds_key){ 1, 0, 99 }, &s, &ver, &site, &fenced),
                     -ENOENT);
    assert_null(s);
    assert_int_equal(ver, 0);
    h.rc = -EAGAIN;
    assert_int_equal(mds_cache_reread(c, &(struct mds_key){ 1, 0, 9 }, &s, &ver, &site, &fenced),
                     -EAGAIN);
    assert_null(s);
    h.rc = 0;
    mds_cache_free(c);
    env_fini(&v);
}

static void *get_bg(void *p)
{
    struct getter *g = p;
    g->rc = mds_cache_get(g->c, &g->k, &g->e);
    return NULL;
}

static int key_cmp(const void *a, const void *b)
{
    const struct mds_key *x = a, *y = b;
    return x->table < y->table ? -1 : x->table > y->table;
}

static void test_find_and_keys(void **state)
{
    (void)state;
    struct env v;
    env_init(&v);
    store_slice(&v.st, 40, 10);
    struct hook h = { 0 };
    struct mds_cache_opts o = { .store = &v.st, .place = place1(), .before_load = hook_fn,
                                .before_load_arg = &h };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&o, &c), 0);
    struct mds_key *keys;
    size_t n;
    assert_int_equal(mds_cache_keys(c, &keys, &n), 0);
    assert_int_equal(n, 0);
    assert_null(keys);
    /* 300 READY entries (more than one growth of the array). */
    mds_cent *e;
    for (uint64_t t = 1000; t < 1300; t++) {
        assert_int_equal(mds_cache_add(c, &(struct mds_key){ 1, 0, t }, xt_slice_new(0, 0, 16),
                                       &e), 0);
        mds_cache_put(c, e);
    }
    /* One LOADING entry: its load held inside the hook. */
    atomic_store(&h.block, true);
    struct getter g = { c, { 1, 0, 40 }, 0, NULL, NULL };
    pthread_t th;
    pthread_create(&th, NULL, get_bg, &g);
    while (!atomic_load(&h.entered))
        tu_sleep_ms(1);
    assert_int_equal(mds_cache_find(c, &g.k, &e), -EBUSY);
    assert_int_equal(mds_cache_peek(c, &g.k, &e), -ENOENT);
    assert_int_equal(mds_cache_keys(c, &keys, &n), 0);
    assert_int_equal(n, 301); /* READY and LOADING (mds_cache.h) */
    qsort(keys, n, sizeof *keys, key_cmp);
    assert_int_equal(keys[0].table, 40);
    for (size_t i = 1; i < n; i++) {
        assert_int_equal(keys[i].table, 1000 + i - 1);
        assert_int_equal(keys[i].fsid, 1);
        assert_int_equal(keys[i].slice, 0);
    }
    xt_free(keys);
    atomic_store(&h.block, false);
    pthread_join(th, NULL);
    assert_int_equal(g.rc, 0);
    /* READY: find pins it (drop refuses while pinned). */
    assert_int_equal(mds_cache_find(c, &g.k, &e), 0);
    assert_ptr_equal(e, g.e);
    assert_int_equal(mds_cache_drop(c, &g.k), -EBUSY);
    mds_cache_put(c, e);
    mds_cache_put(c, g.e);
    assert_int_equal(mds_cache_drop(c, &g.k), 0);
    assert_int_equal(mds_cache_find(c, &g.k, &e), -ENOENT);
    /* Allocation failures of keys: -ENOMEM and nothing leaked, or all. */
    for (long f = 0; f < 4; f++) {
        xt_alloc_fail_after(f);
        int rc = mds_cache_keys(c, &keys, &n);
        xt_alloc_fail_after(-1);
        if (rc == 0) {
            assert_int_equal(n, 300);
            xt_free(keys);
        } else {
            assert_int_equal(rc, -ENOMEM);
            assert_null(keys);
        }
    }
    mds_cache_free(c);
    env_fini(&v);
}

/* The point of the fence, checked against the MDSL's own commit rules
 * (mdsl_apply.c rules 1 and 2, run by mds_store_local). An earlier holder
 * that loaded version 2 may have records 3 and 4 in flight: prepared before
 * the new owner's first record, committed after it. Unfenced, the new
 * owner writes 3 and the holder's 4 lands on top of it; fenced, the new
 * owner's image sits above the gap and every record of the holder is
 * ignored at commit. */
static void test_fence_point(void **state)
{
    (void)state;
    for (int fenced = 0; fenced < 2; fenced++) {
        struct env v;
        env_init(&v);
        store_slice(&v.st, 7, 20);
        struct hook h = { .fence = fenced };
        struct mds_cache_opts o = { .store = &v.st, .place = place1(),
                                    .before_load = hook_fn, .before_load_arg = &h };
        mds_cache *c;
        assert_int_equal(mds_cache_new(&o, &c), 0);
        mds_cent *e;
        assert_int_equal(mds_cache_get(c, &(struct mds_key){ 1, 0, 7 }, &e), 0);
        struct mds_cent_commit *cm = mds_cent_commit(e);
        /* The earlier holder's in-flight records 3 and 4 (deltas), prepared. */
        uint8_t *d;
        size_t dlen;
        assert_int_equal(xt_slice_encode_delta(mds_cent_slice(e), 1, &d, &dlen), 0);
        uint64_t held_tx[2];
        for (int i = 0; i < 2; i++) {
            struct xt_store_rec r = { .type = XT_STORE_DELTA, .id = { .fsid = 1, .table = 7 },
                                      .version = 3 + (uint64_t)i, .data = d,
                                      .len = (uint32_t)dlen };
            held_tx[i] = g_txid++;
            assert_int_equal(mds_store_prepare(&v.st, 1, held_tx[i], &r, 1), 0);
        }
        /* The new owner's first record, as mds_group writes it. */
        uint64_t owner_v = cm->version + 1;
        assert_int_equal(store_rec(&v.st, 7, owner_v, cm->force_image || cm->image_bytes == 0,
                                   mds_cent_slice(e)), 0);
        for (int i = 0; i < 2; i++)
            assert_int_equal(mds_store_commit(&v.st, 1, held_tx[i]), 0);
        xt_free(d);
        struct xt_store_load ld;
        assert_int_equal(mds_store_load(&v.st, 1, (xt_slice_id){ .fsid = 1, .table = 7 }, &ld),
                         0);
        uint64_t top = ld.ndeltas ? ld.deltas[ld.ndeltas - 1].version : ld.image.version;
        if (fenced) {
            assert_true(owner_v > 4);
            assert_true(ld.has_image);
            assert_int_equal(ld.image.version, owner_v); /* the holder's records ignored */
            assert_int_equal(ld.ndeltas, 0);
        } else {
            assert_int_equal(owner_v, 3);
            assert_int_equal(top, 4); /* lands on top: what the fence prevents */
        }
        xt_store_load_free(&ld);
        mds_cache_put(c, e);
        mds_cache_free(c);
        env_fini(&v);
    }
}

int main(void)
{
    g_seed = tu_seed("test_mds_cache");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_once),
        cmocka_unit_test(test_load_failure_shared_then_retried),
        cmocka_unit_test(test_eviction_keeps_rows_reachable),
        cmocka_unit_test(test_add_and_peek),
        cmocka_unit_test(test_fence_and_hook),
        cmocka_unit_test(test_find_and_keys),
        cmocka_unit_test(test_fence_point),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
