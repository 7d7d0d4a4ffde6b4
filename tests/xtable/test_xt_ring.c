/*
 * test_xt_ring.c -- consistent-hash rings: balance, minimal movement,
 * versions, serialisation, corruption, allocation failures.
 *
 * Seeded (seed printed; XT_SEED=<n> replays). Balance is checked two
 * ways: the exact share of each site (xt_ring_share, no sampling noise) over
 * several random site-id sets, and 1M sampled slice keys.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"
#include "xt_ring.h"

#define NKEYS 1000000
#define MAX_N 16
#define BALANCE_TOL 0.10 /* the requirement */
/* Exact shares are held tighter: the refined placement measured <= 0.6%
 * off over 100 id sets; without refinement the lightest site drifts to
 * ~0.93, so 3% catches a placement that lost it. */
#define EXACT_TOL 0.03

/* Local helpers so the test needs no libm. */
static double dmax(double a, double b) { return a > b ? a : b; }
static double dmin(double a, double b) { return a < b ? a : b; }
static double dabs(double a) { return a < 0 ? -a : a; }

#include "pom_rand.h"

static void seed_rng(const char *test, uint64_t k)
{
    rng_state = base_seed() + k * UINT64_C(0x100000001b3);
    if (k == 0)
        printf("[ %s ] seed %llu (XT_SEED to replay)\n", test,
               (unsigned long long)base_seed());
}

/* Slice keys as the system makes them: a few file systems, many tables,
 * slices 0..n of each. */
static uint64_t *make_keys(size_t n)
{
    uint64_t *k = malloc(n * sizeof(uint64_t));
    assert_non_null(k);
    for (size_t i = 0; i < n; i++)
        k[i] = xt_ring_key((uint32_t)(i % 3) + 1, 1000 + i / 256 * 7919, (uint32_t)(i % 256));
    return k;
}

static void distinct_ids(uint32_t *ids, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        uint32_t v;
        int dup;
        do {
            v = (uint32_t)rnd() % 100000;
            dup = 0;
            for (unsigned j = 0; j < i; j++)
                dup |= ids[j] == v;
        } while (dup);
        ids[i] = v;
    }
}

/* max and min of share / ideal over the sites (weights equal). */
static void exact_balance(const xt_ring *r, double *max, double *min)
{
    uint32_t n = xt_ring_nsites(r);
    double total = 0;
    *max = 0;
    *min = INFINITY;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id;
        assert_int_equal(xt_ring_site_at(r, k, &id, NULL), 0);
        double s = xt_ring_share(r, id) * n;
        total += s / n;
        *max = dmax(*max, s);
        *min = dmin(*min, s);
    }
    assert_true(dabs(total - 1.0) < 1e-9); /* shares partition the ring */
}

static int site_index(const uint32_t *ids, unsigned n, uint32_t id)
{
    for (unsigned i = 0; i < n; i++)
        if (ids[i] == id)
            return (int)i;
    fail_msg("lookup returned unknown site %u", id);
    return -1;
}

static void sampled_balance(const xt_ring *r, const uint64_t *keys, const uint32_t *ids,
                            unsigned n, double *max, double *min)
{
    size_t cnt[MAX_N] = {0};
    for (size_t i = 0; i < NKEYS; i++) {
        uint32_t s;
        assert_int_equal(xt_ring_lookup(r, keys[i], &s), 0);
        cnt[site_index(ids, n, s)]++;
    }
    *max = 0;
    *min = INFINITY;
    for (unsigned i = 0; i < n; i++) {
        double q = (double)cnt[i] * n / NKEYS;
        *max = dmax(*max, q);
        *min = dmin(*min, q);
    }
}

/* Balance within 10% of the ideal for N = 2..16 sites joined one by one. */
static void test_balance(void **state)
{
    (void)state;
    uint64_t *keys = make_keys(NKEYS);
    double worst_exact[MAX_N + 1] = {0}, worst_min[MAX_N + 1];
    for (int i = 0; i <= MAX_N; i++)
        worst_min[i] = INFINITY;
    for (uint64_t trial = 0; trial < 8; trial++) {
        seed_rng(__func__, trial);
        uint32_t ids[MAX_N];
        distinct_ids(ids, MAX_N);
        xt_ring *r = xt_ring_new(XT_RING_MDS, 0);
        assert_non_null(r);
        for (unsigned n = 1; n <= MAX_N; n++) {
            assert_int_equal(xt_ring_add_site(r, ids[n - 1], XT_RING_WEIGHT_UNIT), 0);
            double mx, mn;
            exact_balance(r, &mx, &mn);
            worst_exact[n] = dmax(worst_exact[n], mx);
            worst_min[n] = dmin(worst_min[n], mn);
            if (n < 2)
                continue;
            assert_true(mx <= 1 + EXACT_TOL);
            assert_true(mn >= 1 - EXACT_TOL);
            if (trial == 0) {
                double smx, smn;
                sampled_balance(r, keys, ids, n, &smx, &smn);
                printf("  N=%2u  1M keys: max/ideal %.4f min/ideal %.4f\n", n, smx, smn);
                assert_true(smx <= 1 + BALANCE_TOL);
                assert_true(smn >= 1 - BALANCE_TOL);
            }
        }
        xt_ring_free(r);
    }
    for (unsigned n = 2; n <= MAX_N; n++)
        printf("  N=%2u  exact, worst of 8 id sets: max/ideal %.4f min/ideal %.4f\n", n,
               worst_exact[n], worst_min[n]);
    free(keys);
}

/* Plain hashed points (candidate 0 only) cannot do it: documents why the
 * placement chooses among candidates. Computed here from the same hash. */
static void test_plain_hash_is_worse(void **state)
{
    (void)state;
    seed_rng(__func__, 0);
    double worst = 0;
    for (int trial = 0; trial < 8; trial++) {
        uint32_t ids[MAX_N];
        distinct_ids(ids, MAX_N);
        uint64_t *pos = malloc(MAX_N * 128 * sizeof(uint64_t));
        for (unsigned s = 0; s < MAX_N; s++)
            for (uint32_t v = 0; v < 128; v++) {
                uint8_t b[16];
                xt_put_u32(b, XT_RING_MDS);
                xt_put_u32(b + 4, ids[s]);
                xt_put_u32(b + 8, v);
                xt_put_u32(b + 12, 0);
                pos[s * 128 + v] = xt_hash_bytes(b, 16, XT_RING_POINT_SEED);
            }
        /* share of site s: sum over its points of the gap to the previous point */
        for (unsigned s = 0; s < MAX_N; s++) {
            double share = 0;
            for (unsigned v = 0; v < 128; v++) {
                uint64_t p = pos[s * 128 + v], best = UINT64_MAX;
                for (unsigned q = 0; q < MAX_N * 128; q++) {
                    uint64_t gap = p - pos[q];
                    if (gap && gap < best)
                        best = gap;
                }
                share += (double)best / 18446744073709551616.0;
            }
            worst = dmax(worst, share * MAX_N);
        }
        free(pos);
    }
    printf("  plain hashing, 16 sites x 128 vnodes: worst max/ideal %.4f\n", worst);
}

/* A join moves only keys to the new site, about 1/(N+1) of them. */
static void test_join_moves_to_new_site(void **state)
{
    (void)state;
    seed_rng(__func__, 0);
    uint64_t *keys = make_keys(NKEYS);
    uint32_t ids[MAX_N];
    distinct_ids(ids, MAX_N);
    xt_ring *r = xt_ring_new(XT_RING_MDSL, 0);
    assert_int_equal(xt_ring_add_site(r, ids[0], XT_RING_WEIGHT_UNIT), 0);
    for (unsigned n = 1; n < MAX_N; n++) {
        xt_ring *old = xt_ring_dup(r);
        assert_non_null(old);
        assert_int_equal(xt_ring_add_site(r, ids[n], XT_RING_WEIGHT_UNIT), 0);
        assert_int_equal(xt_ring_version(r), xt_ring_version(old) + 1);
        size_t moved = 0;
        for (size_t i = 0; i < NKEYS; i++) {
            uint32_t a, b;
            assert_int_equal(xt_ring_lookup(old, keys[i], &a), 0);
            assert_int_equal(xt_ring_lookup(r, keys[i], &b), 0);
            assert_int_equal(xt_ring_owner_changed(old, r, keys[i]), a != b);
            if (a != b) {
                assert_int_equal(b, ids[n]); /* only TO the new site */
                moved++;
            }
            if (b == ids[n])
                assert_int_not_equal(a, b);
        }
        double ideal = 1.0 / (n + 1), frac = (double)moved / NKEYS;
        double exact = xt_ring_moved_share(old, r);
        /* Every moved key went to the new site and the new site had no keys,
         * so the moved share IS the new site's share: bounded by the balance
         * bound (1 + 10%) x ideal. The sample adds binomial noise, 3 sigma
         * of which is < 0.0015 for 1M keys. */
        assert_true(dabs(exact - xt_ring_share(r, ids[n])) < 1e-9);
        assert_true(exact <= ideal * (1 + BALANCE_TOL));
        assert_true(frac <= ideal * (1 + BALANCE_TOL) + 0.0015);
        printf("  join %2u -> %2u: moved %.4f (exact %.4f) of keys, ideal %.4f, ratio %.3f\n",
               n, n + 1, frac, exact, ideal, exact / ideal);
        xt_ring_free(old);
    }
    xt_ring_free(r);
    free(keys);
}

/* A removal moves exactly the removed site's keys. */
static void test_remove_moves_only_its_keys(void **state)
{
    (void)state;
    uint64_t *keys = make_keys(NKEYS / 4);
    double worst_after = 0;
    for (uint64_t trial = 0; trial < 15; trial++) {
        seed_rng(__func__, trial);
        unsigned n = 2 + (unsigned)trial % 15;
        uint32_t ids[MAX_N];
        distinct_ids(ids, n);
        xt_ring *r = xt_ring_new(XT_RING_MDS, 0);
        for (unsigned i = 0; i < n; i++)
            assert_int_equal(xt_ring_add_site(r, ids[i], XT_RING_WEIGHT_UNIT), 0);
        xt_ring *old = xt_ring_dup(r);
        uint32_t gone = ids[rnd() % n];
        double gone_share = xt_ring_share(r, gone);
        assert_int_equal(xt_ring_remove_site(r, gone), 0);
        assert_int_equal(xt_ring_remove_site(r, gone), -ENOENT);
        assert_int_equal(xt_ring_version(r), xt_ring_version(old) + 1);
        assert_false(xt_ring_has_site(r, gone));
        assert_int_equal(xt_ring_nsites(r), n - 1);
        for (size_t i = 0; i < NKEYS / 4; i++) {
            uint32_t a, b;
            assert_int_equal(xt_ring_lookup(old, keys[i], &a), 0);
            assert_int_equal(xt_ring_lookup(r, keys[i], &b), 0);
            assert_int_equal(a != b, a == gone);
        }
        assert_true(dabs(xt_ring_moved_share(old, r) - gone_share) < 1e-9);
        double mx, mn;
        exact_balance(r, &mx, &mn);
        worst_after = dmax(worst_after, mx);
        /* Rejoining a site rebalances (its points go where they help). */
        assert_int_equal(xt_ring_add_site(r, gone, XT_RING_WEIGHT_UNIT), 0);
        exact_balance(r, &mx, &mn);
        assert_true(mx <= 1 + BALANCE_TOL && mn >= 1 - BALANCE_TOL);
        xt_ring_free(old);
        xt_ring_free(r);
    }
    printf("  after a removal (N-1 = 1..15 sites): worst max/ideal %.4f\n", worst_after);
    free(keys);
}

static void test_versions_and_membership(void **state)
{
    (void)state;
    xt_ring *r = xt_ring_new(XT_RING_MDS, 0);
    uint32_t s;
    assert_int_equal(xt_ring_version(r), 0);
    assert_int_equal(xt_ring_lookup(r, 42, &s), -ENOENT);
    assert_int_equal(xt_ring_vnodes_per_site(r), XT_RING_VNODES_DEFAULT);
    assert_int_equal(xt_ring_add_site(r, 7, XT_RING_WEIGHT_UNIT), 0);
    assert_int_equal(xt_ring_version(r), 1);
    assert_int_equal(xt_ring_lookup(r, 42, &s), 0);
    assert_int_equal(s, 7);
    assert_true(dabs(xt_ring_share(r, 7) - 1.0) < 1e-12);
    assert_int_equal(xt_ring_add_site(r, 7, XT_RING_WEIGHT_UNIT), -EEXIST);
    assert_int_equal(xt_ring_add_site(r, 8, 0), -EINVAL);
    assert_int_equal(xt_ring_add_site(r, 8, XT_RING_WEIGHT_MAX + 1), -EINVAL);
    assert_int_equal(xt_ring_version(r), 1); /* failures do not bump */
    assert_int_equal(xt_ring_add_site(r, 3, XT_RING_WEIGHT_UNIT), 0);
    assert_int_equal(xt_ring_version(r), 2);
    uint32_t id, w;
    assert_int_equal(xt_ring_site_at(r, 0, &id, &w), 0);
    assert_int_equal(id, 3);
    assert_int_equal(xt_ring_site_at(r, 1, &id, &w), 0);
    assert_int_equal(id, 7);
    assert_int_equal(xt_ring_site_at(r, 2, &id, &w), -ENOENT);
    assert_int_equal(xt_ring_remove_site(r, 9), -ENOENT);
    assert_int_equal(xt_ring_version(r), 2);
    assert_int_equal(xt_ring_remove_site(r, 7), 0);
    assert_int_equal(xt_ring_remove_site(r, 3), 0);
    assert_int_equal(xt_ring_version(r), 4);
    assert_int_equal(xt_ring_lookup(r, 42, &s), -ENOENT);
    xt_ring *e = xt_ring_new(XT_RING_MDS, 0);
    assert_int_equal(xt_ring_owner_changed(r, e, 42), 0);
    assert_int_equal(xt_ring_add_site(e, 1, 100), 0);
    assert_int_equal(xt_ring_owner_changed(r, e, 42), 1);
    assert_true(xt_ring_moved_share(r, e) == 1.0);
    xt_ring_free(e);
    xt_ring_free(r);
}

/* A site of weight 2x gets twice the vnodes and twice the share. */
static void test_weights(void **state)
{
    (void)state;
    seed_rng(__func__, 0);
    uint32_t ids[8];
    distinct_ids(ids, 8);
    xt_ring *r = xt_ring_new(XT_RING_MDS, 0);
    uint32_t weights[8] = {100, 200, 100, 50, 100, 300, 100, 150};
    double total = 0;
    for (int i = 0; i < 8; i++) {
        assert_int_equal(xt_ring_add_site(r, ids[i], weights[i]), 0);
        total += weights[i];
    }
    for (int i = 0; i < 8; i++) {
        double ratio = xt_ring_share(r, ids[i]) / (weights[i] / total);
        printf("  weight %3u: share/ideal %.4f\n", weights[i], ratio);
        assert_true(dabs(ratio - 1) <= BALANCE_TOL);
    }
    assert_int_equal(xt_ring_vnodes(128, 50), 64);
    assert_int_equal(xt_ring_vnodes(128, 1), 1);
    xt_ring_free(r);
}

/* Keys: deterministic, and the slices of one table spread over the sites;
 * ring 0 and ring 1 place the same sites differently. */
static void test_keys_and_ring_ids(void **state)
{
    (void)state;
    assert_true(xt_ring_key(1, 2, 3) == xt_ring_key(1, 2, 3));
    assert_true(xt_ring_key(1, 2, 3) != xt_ring_key(1, 2, 4));
    assert_true(xt_ring_key(1, 2, 3) != xt_ring_key(2, 2, 3));
    assert_true(xt_ring_key(1, 2, 3) != xt_ring_key(1, 3, 3));
    xt_ring *mds = xt_ring_new(XT_RING_MDS, 0), *mdsl = xt_ring_new(XT_RING_MDSL, 0);
    for (uint32_t s = 1; s <= 8; s++) {
        assert_int_equal(xt_ring_add_site(mds, s, XT_RING_WEIGHT_UNIT), 0);
        assert_int_equal(xt_ring_add_site(mdsl, s, XT_RING_WEIGHT_UNIT), 0);
    }
    size_t cnt[9] = {0}, same = 0;
    for (uint32_t slice = 0; slice < 65536; slice++) {
        uint64_t k = xt_ring_key(1, 12345, slice);
        uint32_t a, b;
        assert_int_equal(xt_ring_lookup(mds, k, &a), 0);
        assert_int_equal(xt_ring_lookup(mdsl, k, &b), 0);
        cnt[a]++;
        same += a == b;
    }
    for (int s = 1; s <= 8; s++)
        assert_true(dabs(cnt[s] / 8192.0 - 1) < BALANCE_TOL + 0.05);
    assert_true(same < 65536 / 8 * 1.3); /* independent placements */
    xt_ring_free(mds);
    xt_ring_free(mdsl);
}

static xt_ring *random_ring(unsigned n)
{
    xt_ring *r = xt_ring_new((uint32_t)(rnd() % 2), 8 + (unsigned)(rnd() % 64));
    uint32_t ids[MAX_N];
    distinct_ids(ids, n);
    for (unsigned i = 0; i < n; i++)
        assert_int_equal(xt_ring_add_site(r, ids[i], 1 + (uint32_t)(rnd() % 300)), 0);
    if (n && rnd() % 2)
        assert_int_equal(xt_ring_remove_site(r, ids[rnd() % n]), 0);
    return r;
}

static uint8_t *encode_alloc(const xt_ring *r, size_t *len)
{
    *len = xt_ring_encoded_size(r);
    uint8_t *buf = malloc(*len);
    assert_non_null(buf);
    assert_int_equal(xt_ring_encode(r, buf, *len), (long)*len);
    return buf;
}

static void check_same_ring(const xt_ring *a, const xt_ring *b)
{
    assert_int_equal(xt_ring_version(a), xt_ring_version(b));
    assert_int_equal(xt_ring_id(a), xt_ring_id(b));
    assert_int_equal(xt_ring_nsites(a), xt_ring_nsites(b));
    for (int i = 0; i < 2000; i++) {
        uint64_t k = rnd();
        assert_int_equal(xt_ring_owner_changed(a, b, k), 0);
    }
    assert_true(xt_ring_moved_share(a, b) == 0.0);
}

static void fix_checksum(uint8_t *buf, size_t len)
{
    xt_put_u64(buf + len - 8, xt_hash_bytes(buf, len - 8, XT_RING_CSUM_SEED));
}

static void test_encode_round_trip(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 50; seed++) {
        seed_rng(__func__, seed);
        xt_ring *r = random_ring((unsigned)(seed % MAX_N));
        size_t len;
        uint8_t *buf = encode_alloc(r, &len);
        assert_int_equal(xt_ring_encode(r, buf, len - 1), -ENOSPC);
        xt_ring *d;
        assert_int_equal(xt_ring_decode(buf, len, &d), 0);
        check_same_ring(r, d);
        size_t len2;
        uint8_t *buf2 = encode_alloc(d, &len2);
        assert_int_equal(len, len2);
        assert_memory_equal(buf, buf2, len);
        /* a decoded ring keeps growing the same way as the original */
        assert_int_equal(xt_ring_add_site(r, 4000000000u, 100), 0);
        assert_int_equal(xt_ring_add_site(d, 4000000000u, 100), 0);
        check_same_ring(r, d);
        free(buf2);
        free(buf);
        xt_ring_free(d);
        xt_ring_free(r);
    }
}

static void test_corruption_rejected(void **state)
{
    (void)state;
    unsigned crafted = 0, accepted = 0;
    for (uint64_t seed = 0; seed < 20; seed++) {
        seed_rng(__func__, seed);
        xt_ring *r = random_ring(1 + (unsigned)(seed % 6));
        size_t len;
        uint8_t *buf = encode_alloc(r, &len);
        xt_ring *d = (xt_ring *)1;
        for (size_t cut = 0; cut < len; cut++) {
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, buf, cut);
            assert_int_equal(xt_ring_decode(p, cut, &d), -EBADMSG);
            assert_null(d);
            free(p);
        }
        uint8_t *p = malloc(len + 1);
        memcpy(p, buf, len);
        p[len] = 0;
        assert_int_equal(xt_ring_decode(p, len + 1, &d), -EBADMSG);
        for (int t = 0; t < 300; t++) {
            memcpy(p, buf, len);
            int flips = 1 + (int)(rnd() % 3);
            for (int f = 0; f < flips; f++)
                p[rnd() % len] ^= (uint8_t)(1 + rnd() % 255);
            if (!memcmp(p, buf, len))
                continue;
            assert_int_equal(xt_ring_decode(p, len, &d), -EBADMSG);
            fix_checksum(p, len);
            crafted++;
            int rc = xt_ring_decode(p, len, &d);
            if (rc == 0) { /* another valid ring: must round-trip */
                accepted++;
                size_t l2;
                uint8_t *again = encode_alloc(d, &l2);
                assert_int_equal(l2, len);
                assert_memory_equal(again, p, len);
                free(again);
                xt_ring_free(d);
            } else {
                assert_int_equal(rc, -EBADMSG);
            }
        }
        free(p);
        free(buf);
        xt_ring_free(r);
    }
    printf("  %u re-checksummed corruptions, %u decoded to another valid ring\n", crafted,
           accepted);
}

static void test_malformed_rejected(void **state)
{
    (void)state;
    xt_ring *r = xt_ring_new(XT_RING_MDS, 4);
    assert_int_equal(xt_ring_add_site(r, 10, 100), 0);
    assert_int_equal(xt_ring_add_site(r, 20, 100), 0);
    size_t len;
    uint8_t *good = encode_alloc(r, &len);
    assert_int_equal(len, 28 + 2 * (8 + 4) + 8);
    uint8_t *p = malloc(len);
    xt_ring *d;
#define MUTATE(stmt)                                        \
    do {                                                    \
        memcpy(p, good, len);                               \
        stmt;                                               \
        fix_checksum(p, len);                               \
        assert_int_equal(xt_ring_decode(p, len, &d), -EBADMSG); \
    } while (0)
    MUTATE(xt_put_u32(p, 0));                       /* magic */
    MUTATE(xt_put_u16(p + 4, 2));                   /* format version */
    MUTATE(xt_put_u16(p + 6, 1));                   /* flags */
    MUTATE(xt_put_u32(p + 12, 0));                  /* vnodes per site */
    MUTATE(xt_put_u32(p + 12, XT_RING_VNODES_MAX + 1));
    MUTATE(xt_put_u32(p + 24, 3));                  /* more sites than bytes */
    MUTATE(xt_put_u32(p + 24, 1));                  /* fewer: trailing bytes */
    MUTATE(xt_put_u32(p + 24, UINT32_MAX));
    MUTATE(xt_put_u32(p + 40, 10));                 /* duplicate id */
    MUTATE(xt_put_u32(p + 40, 5));                  /* descending ids */
    MUTATE(xt_put_u32(p + 32, 0));                  /* weight 0 */
    MUTATE(xt_put_u32(p + 32, XT_RING_WEIGHT_MAX + 1));
    MUTATE(xt_put_u32(p + 32, 200));                /* weight says 8 vnodes, 4 present */
    MUTATE(p[36] = XT_RING_CANDIDATES);             /* candidate out of range */
#undef MUTATE
    assert_int_equal(xt_ring_decode(NULL, 0, &d), -EBADMSG);
    memcpy(p, good, len);
    assert_int_equal(xt_ring_decode(p, len, &d), 0);
    xt_ring_free(d);
    free(p);
    free(good);
    xt_ring_free(r);
}

static void test_alloc_failure_countdown(void **state)
{
    (void)state;
    seed_rng(__func__, 0);
    xt_ring *base = random_ring(6);
    size_t len;
    uint8_t *img = encode_alloc(base, &len);
    long failures = 0;
    for (long n = 0;; n++) {
        xt_alloc_fail_after(n);
        xt_ring *a = xt_ring_new(0, 0);
        xt_ring *c = a ? xt_ring_dup(base) : NULL;
        failures += xt_alloc_fail_after(-1);
        xt_ring_free(a);
        if (c) {
            check_same_ring(c, base);
            xt_ring_free(c);
            break;
        }
    }
    for (long n = 0;; n++) {
        xt_ring *d = NULL;
        xt_alloc_fail_after(n);
        int rc = xt_ring_decode(img, len, &d);
        failures += xt_alloc_fail_after(-1);
        if (rc == 0) {
            check_same_ring(d, base);
            xt_ring_free(d);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_null(d);
    }
    for (long n = 0;; n++) {
        xt_ring *c = xt_ring_dup(base);
        xt_alloc_fail_after(n);
        int rc = xt_ring_add_site(c, 99999999, 100);
        failures += xt_alloc_fail_after(-1);
        if (rc == 0) {
            assert_int_equal(xt_ring_version(c), xt_ring_version(base) + 1);
            xt_ring_free(c);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        check_same_ring(c, base); /* unchanged */
        xt_ring_free(c);
    }
    assert_true(failures > 0);
    free(img);
    xt_ring_free(base);
}

/* xt_ring_successors: the owner first, then distinct sites, as many as
 * asked or as the ring holds, each answer a prefix of a longer one; and
 * one site's keys have their second replica on every other site (the
 * spread docs/mdsl-replicas.md "Replica sets" relies on). */
/* The tract placement of the mdsl blob backend: copies parsed from the fs
 * setting; a join moves a tract's copy set only by taking the new site in
 * (the others stay), a removal only by dropping the removed one. */
static void test_tract_sites(void **state)
{
    (void)state;
    xt_ring *r = xt_ring_new(1, 0);
    for (uint32_t id = 1; id <= 3; id++)
        assert_int_equal(xt_ring_add_site(r, id, XT_RING_WEIGHT_UNIT), 0);
    uint32_t c = 0;
    assert_int_equal(xt_ring_tract_copies(r, "", &c), 0);
    assert_int_equal(c, 3);
    assert_int_equal(xt_ring_tract_copies(r, NULL, &c), 0);
    assert_int_equal(c, 3);
    assert_int_equal(xt_ring_tract_copies(r, "copies=2", &c), 0);
    assert_int_equal(c, 2);
    const char *bad[] = { "copies=0", "copies=9", "copies=2x", "copies=", "copy=2", "2" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(xt_ring_tract_copies(r, bad[i], &c), -EINVAL);
    xt_ring *j = xt_ring_dup(r);
    assert_non_null(j);
    assert_int_equal(xt_ring_add_site(j, 4, XT_RING_WEIGHT_UNIT), 0);
    unsigned moved = 0;
    for (uint64_t set = 1; set <= 200; set++)
        for (uint32_t t = 0; t < 20; t++) {
            uint32_t tr = t == 19 ? XT_TRACT_MAP : t;
            uint32_t a[2], b[2], again[2];
            assert_int_equal(xt_ring_tract_sites(r, set, tr, 2, a), 2);
            assert_int_equal(xt_ring_tract_sites(r, set, tr, 2, again), 2);
            assert_memory_equal(a, again, sizeof a); /* a pure function */
            assert_int_equal(xt_ring_tract_sites(j, set, tr, 2, b), 2);
            for (int k = 0; k < 2; k++)
                if (b[k] != 4)
                    assert_true(b[k] == a[0] || b[k] == a[1]);
            moved += b[0] == 4 || b[1] == 4;
        }
    assert_true(moved > 0 && moved < 4000);
    xt_ring_free(j);
    xt_ring_free(r);
}

static void test_successors(void **state)
{
    (void)state;
    seed_rng(__func__, 0);
    uint32_t out[MAX_N + 2], longer[MAX_N + 2];
    xt_ring *empty = xt_ring_new(1, 0);
    assert_int_equal(xt_ring_successors(empty, 7, 3, out), 0);
    xt_ring_free(empty);
    for (unsigned n = 1; n <= 8; n++) {
        xt_ring *r = random_ring(n);
        uint32_t ns = xt_ring_nsites(r);
        for (int k = 0; k < 500 && ns > 0; k++) {
            uint64_t key = xt_ring_key((uint32_t)rnd(), rnd(), (uint32_t)rnd());
            uint32_t owner;
            assert_int_equal(xt_ring_lookup(r, key, &owner), 0);
            uint32_t nl = xt_ring_successors(r, key, ns + 1, longer);
            assert_int_equal(nl, ns);
            for (uint32_t m = 1; m <= ns + 1; m++) {
                uint32_t got = xt_ring_successors(r, key, m, out);
                assert_int_equal(got, m < ns ? m : ns);
                assert_int_equal(out[0], owner);
                for (uint32_t i = 0; i < got; i++) {
                    assert_true(xt_ring_has_site(r, out[i]));
                    assert_int_equal(out[i], longer[i]);
                    for (uint32_t j = 0; j < i; j++)
                        assert_int_not_equal(out[i], out[j]);
                }
            }
        }
        xt_ring_free(r);
    }
    /* Six standard sites: the keys of site 1 have their second replica on
     * each of the five others. */
    xt_ring *r = xt_ring_new(1, 0);
    for (uint32_t id = 1; id <= 6; id++)
        assert_int_equal(xt_ring_add_site(r, id, XT_RING_WEIGHT_UNIT), 0);
    unsigned second[7] = { 0 }, owned = 0;
    for (uint32_t slice = 0; slice < 60000; slice++) {
        uint32_t got = xt_ring_successors(r, xt_ring_key(1, 42, slice), 2, out);
        assert_int_equal(got, 2);
        if (out[0] != 1)
            continue;
        owned++;
        second[out[1]]++;
    }
    for (uint32_t id = 2; id <= 6; id++)
        assert_true(second[id] * 20 > owned); /* each above 5% (ideal 20%) */
    xt_ring_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balance),
        cmocka_unit_test(test_plain_hash_is_worse),
        cmocka_unit_test(test_join_moves_to_new_site),
        cmocka_unit_test(test_remove_moves_only_its_keys),
        cmocka_unit_test(test_versions_and_membership),
        cmocka_unit_test(test_weights),
        cmocka_unit_test(test_keys_and_ring_ids),
        cmocka_unit_test(test_encode_round_trip),
        cmocka_unit_test(test_corruption_rejected),
        cmocka_unit_test(test_malformed_rejected),
        cmocka_unit_test(test_alloc_failure_countdown),
        cmocka_unit_test(test_successors),
        cmocka_unit_test(test_tract_sites),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
