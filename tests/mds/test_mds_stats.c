/*
 * test_mds_stats.c -- histogram percentiles against a sorted model, bucket
 * geometry, concurrent recording, text/JSON dumps, the bucket dump, the
 * cumulative counts and error counts /metrics shows.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mds_stats.h"
#include "mds_test_util.h"

static uint64_t g_seed;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Every value lies in its bucket's range; buckets are contiguous and grow
 * at most by 1/16 of their lower bound. */
static void test_bucket_geometry(void **state)
{
    (void)state;
    uint64_t prev_hi = 0;
    for (unsigned b = 0; b < MDS_STATS_BUCKETS; b++) {
        uint64_t lo, hi;
        mds_stats_bucket_range(b, &lo, &hi);
        if (b)
            assert_int_equal(lo, prev_hi + 1);
        assert_true(hi >= lo);
        assert_true((hi - lo) * 16 <= lo || lo < 16);
        assert_int_equal(mds_stats_bucket(lo), b);
        assert_int_equal(mds_stats_bucket(hi), b);
        prev_hi = hi;
    }
    assert_int_equal(prev_hi, UINT64_MAX);
    uint64_t s = g_seed;
    for (int i = 0; i < 100000; i++) {
        uint64_t v = tu_rand(&s) >> (tu_rand(&s) % 64);
        uint64_t lo, hi;
        mds_stats_bucket_range(mds_stats_bucket(v), &lo, &hi);
        assert_true(lo <= v && v <= hi);
    }
}

/* Percentiles of random log-spread samples vs the sorted model: the
 * estimate is in the same bucket as the model's sample of that rank. */
static void test_percentiles_vs_model(void **state)
{
    (void)state;
    uint64_t s = g_seed + 1;
    for (int round = 0; round < 40; round++) {
        mds_stats *st = mds_stats_new();
        assert_non_null(st);
        size_t n = 1 + tu_rand(&s) % 5000;
        uint64_t *v = malloc(n * sizeof *v);
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++) {
            unsigned bits = (unsigned)(tu_rand(&s) % 34);
            v[i] = bits ? tu_rand(&s) & ((UINT64_C(1) << bits) - 1) : 0;
            sum += v[i];
            mds_stats_record(st, MDS_OP_LOOKUP, v[i], (i % 7) ? 0 : -EIO);
        }
        qsort(v, n, sizeof *v, cmp_u64);
        const double qs[] = { 0.001, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0 };
        for (size_t k = 0; k < XT_ARRAY_SIZE(qs); k++) {
            double r = qs[k] * (double)n;
            size_t rank = (size_t)r;
            if ((double)rank < r)
                rank++;
            if (rank < 1)
                rank = 1;
            uint64_t want = v[rank - 1];
            uint64_t got = mds_stats_percentile(st, MDS_OP_LOOKUP, qs[k]);
            if (mds_stats_bucket(got) != mds_stats_bucket(want))
                fail_msg("round %d n %zu q %.3f: got %llu want %llu", round, n, qs[k],
                         (unsigned long long)got, (unsigned long long)want);
            uint64_t diff = got > want ? got - want : want - got;
            assert_true(diff * 16 <= want || diff <= 16);
        }
        struct mds_stats_summary sm;
        mds_stats_summary(st, MDS_OP_LOOKUP, &sm);
        assert_int_equal(sm.count, n);
        assert_int_equal(sm.errors, (n + 6) / 7);
        assert_int_equal(sm.mean_ns, sum / n);
        assert_int_equal(sm.min_ns, v[0]);
        assert_int_equal(sm.max_ns, v[n - 1]);
        free(v);
        mds_stats_free(st);
    }
}

struct rec_arg {
    mds_stats *st;
    uint64_t seed;
};

static void *recorder(void *p)
{
    struct rec_arg *a = p;
    for (int i = 0; i < 50000; i++) {
        mds_stats_record(a->st, MDS_OP_COMMIT, tu_rand(&a->seed) % 1000000, 0);
        mds_stats_add(a->st, MDS_CTR_CACHE_HITS, 1);
    }
    return NULL;
}

static void test_concurrent_counts(void **state)
{
    (void)state;
    mds_stats *st = mds_stats_new();
    pthread_t t[4];
    struct rec_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (struct rec_arg){ st, g_seed + 10 + (uint64_t)i };
        pthread_create(&t[i], NULL, recorder, &a[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    struct mds_stats_summary sm;
    mds_stats_summary(st, MDS_OP_COMMIT, &sm);
    assert_int_equal(sm.count, 200000);
    assert_int_equal(mds_stats_counter(st, MDS_CTR_CACHE_HITS), 200000);
    assert_true(sm.p50_ns > 400000 && sm.p50_ns < 600000);
    mds_stats_free(st);
}

static void test_dumps(void **state)
{
    (void)state;
    mds_stats *st = mds_stats_new();
    mds_stats_record(st, MDS_OP_CREATE, 1500, 0);
    mds_stats_record(st, MDS_OP_SYNC, 2000000, 0);
    mds_stats_add(st, MDS_CTR_GROUPS_COMMITTED, 3);
    char buf[4096];
    size_t n = mds_stats_dump_text(st, buf, sizeof buf);
    assert_true(n < sizeof buf && n == strlen(buf));
    assert_non_null(strstr(buf, "create"));
    assert_non_null(strstr(buf, "groups_committed 3"));
    assert_null(strstr(buf, "lookup"));
    n = mds_stats_dump_json(st, buf, sizeof buf);
    assert_true(n < sizeof buf && n == strlen(buf));
    assert_non_null(strstr(buf, "\"create\":{\"count\":1,"));
    assert_non_null(strstr(buf, "\"groups_committed\":3"));
    assert_int_equal(buf[0], '{');
    assert_int_equal(buf[n - 1], '}');
    /* Truncation keeps snprintf's contract. */
    char small[16];
    size_t m = mds_stats_dump_json(st, small, sizeof small);
    assert_int_equal(m, n);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, buf, sizeof small - 1);
    mds_stats_reset(st);
    struct mds_stats_summary sm;
    mds_stats_summary(st, MDS_OP_CREATE, &sm);
    assert_int_equal(sm.count, 0);
    mds_stats_free(st);
}

/* The bucket dump gives back every sample's bucket: the lower bounds are
 * those of the samples' buckets, ascending, and the counts add up; the
 * difference of two dumps is the histogram of what came between. */
static void test_dump_hist(void **state)
{
    (void)state;
    mds_stats *st = mds_stats_new();
    char buf[8192];
    assert_int_equal(mds_stats_dump_hist(st, MDS_OP_GROUP, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    uint64_t s = g_seed + 7;
    static uint64_t want[MDS_STATS_BUCKETS];
    memset(want, 0, sizeof want);
    for (int i = 0; i < 3000; i++) {
        uint64_t v = 1000 + tu_rand(&s) % 50000000;
        mds_stats_record(st, MDS_OP_GROUP, v, 0);
        want[mds_stats_bucket(v)]++;
    }
    mds_stats_record(st, MDS_OP_CREATE, 5, 0); /* another op: not in the dump */
    size_t n = mds_stats_dump_hist(st, MDS_OP_GROUP, buf, sizeof buf);
    assert_true(n < sizeof buf && n == strlen(buf));
    uint64_t total = 0, prev = 0;
    unsigned pairs = 0;
    for (char *p = buf; *p;) {
        char *end;
        unsigned long long lo = strtoull(p, &end, 10);
        assert_int_equal(*end, ':');
        unsigned long long cnt = strtoull(end + 1, &end, 10);
        unsigned b = mds_stats_bucket(lo);
        uint64_t blo, bhi;
        mds_stats_bucket_range(b, &blo, &bhi);
        assert_int_equal(blo, lo);
        assert_int_equal(want[b], cnt);
        assert_true(pairs == 0 || lo > prev);
        want[b] = 0;
        prev = lo;
        total += cnt;
        pairs++;
        assert_true(*end == ' ' || *end == '\0');
        p = *end ? end + 1 : end;
    }
    assert_int_equal(total, 3000);
    for (unsigned b = 0; b < MDS_STATS_BUCKETS; b++)
        assert_int_equal(want[b], 0);
    /* Truncation keeps snprintf's contract. */
    char small[10];
    assert_int_equal(mds_stats_dump_hist(st, MDS_OP_GROUP, small, sizeof small), n);
    assert_memory_equal(small, buf, sizeof small - 1);
    assert_int_equal(small[sizeof small - 1], '\0');
    mds_stats_free(st);
}

/* mds_stats_cumulative (/metrics): on fixed bounds, each count lies
 * between the samples wholly under the bound's bucket and those at or
 * under the bound (one bucket, 6.25%, of slack), ascending, the total
 * exact; the names /metrics uses come from the same table. */
static void test_cumulative(void **state)
{
    (void)state;
    mds_stats *st = mds_stats_new();
    assert_non_null(st);
    enum { N = 5000 };
    static uint64_t v[N];
    uint64_t sum = 0, seed = 7;
    for (int i = 0; i < N; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (seed >> 20) % 20000000; /* 0..20 ms */
        sum += v[i];
        mds_stats_record(st, MDS_OP_LOOKUP, v[i], 0);
    }
    static const uint64_t le[] = { 1000, 10000, 100000, 1000000, 10000000, 15000000 };
    enum { NLE = sizeof le / sizeof le[0] };
    uint64_t cum[NLE], count, got_sum;
    mds_stats_cumulative(st, MDS_OP_LOOKUP, le, NLE, cum, &count, &got_sum);
    assert_int_equal(count, N);
    assert_int_equal(got_sum, sum);
    for (int i = 0; i < NLE; i++) {
        uint64_t at_most = 0, well_under = 0;
        for (int k = 0; k < N; k++) {
            at_most += v[k] <= le[i];
            well_under += v[k] <= le[i] - le[i] / 16 - 1;
        }
        assert_true(cum[i] <= at_most);
        assert_true(cum[i] >= well_under);
        assert_true(i == 0 || cum[i - 1] <= cum[i]);
    }
    assert_int_equal(mds_stats_errors(st, MDS_OP_LOOKUP), 0);
    mds_stats_record(st, MDS_OP_LOOKUP, 5, -ENOENT);
    assert_int_equal(mds_stats_errors(st, MDS_OP_LOOKUP), 1);
    mds_stats_cumulative(st, MDS_OP_SPLIT, le, NLE, cum, &count, &got_sum);
    assert_int_equal(count, 0);
    assert_int_equal(cum[NLE - 1], 0);
    assert_string_equal(mds_stats_ctr_name(MDS_CTR_GROUPS_COMMITTED), "groups_committed");
    assert_string_equal(mds_stats_ctr_name(MDS_CTR_FOLDS), "folds");
    assert_string_equal(mds_stats_ctr_name(MDS_CTR__COUNT), "?");
    mds_stats_free(st);
}

int main(void)
{
    g_seed = tu_seed("test_mds_stats");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bucket_geometry),
        cmocka_unit_test(test_percentiles_vs_model),
        cmocka_unit_test(test_concurrent_counts),
        cmocka_unit_test(test_dumps),
        cmocka_unit_test(test_dump_hist),
        cmocka_unit_test(test_cumulative),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
