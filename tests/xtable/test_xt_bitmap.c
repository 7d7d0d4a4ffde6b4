/*
 * test_xt_bitmap.c -- the GIGA+ bitmap against a brute-force model.
 *
 * The model is the list of leaves (index, depth) of the split tree: a split
 * of leaf (i, d) gives (i, d+1) and (i + 2^d, d+1), and the owner of V_h is
 * the one leaf whose index equals V_h mod 2^depth, found by scanning them
 * all. Every property test is seeded; the seed is printed, and
 * XT_SEED=<n> replays one run.
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

/* ---- helpers --------------------------------------------------------- */

#include "pom_rand.h"

static void seed_rng(const char *test, uint64_t k)
{
    rng_state = base_seed() + k * UINT64_C(0x100000001b3);
    if (k == 0)
        printf("[ %s ] seed %llu (XT_SEED to replay)\n", test,
               (unsigned long long)base_seed());
}

typedef struct {
    uint32_t idx;
    unsigned depth;
} leaf;

typedef struct {
    leaf *v;
    size_t n, cap;
} model;

static void model_init(model *m)
{
    m->cap = 64;
    m->n = 1;
    m->v = calloc(m->cap, sizeof(leaf));
    assert_non_null(m->v);
}

static void model_free(model *m)
{
    free(m->v);
}

static size_t model_owner(const model *m, uint32_t vh)
{
    size_t found = SIZE_MAX;
    for (size_t k = 0; k < m->n; k++) {
        uint32_t mask = m->v[k].depth >= 32 ? UINT32_MAX
                                            : (UINT32_C(1) << m->v[k].depth) - 1;
        if ((vh & mask) == m->v[k].idx) {
            assert_true(found == SIZE_MAX); /* the leaves partition V_h */
            found = k;
        }
    }
    assert_true(found != SIZE_MAX);
    return found;
}

static int model_has(const model *m, uint32_t i)
{
    for (size_t k = 0; k < m->n; k++)
        if (m->v[k].idx == i)
            return 1;
    return 0;
}

/* Splits leaf k in the model and in b, checking they agree. */
static int split_both(model *m, xt_bitmap *b, size_t k)
{
    leaf l = m->v[k];
    uint32_t child = 0;
    int rc = xt_bitmap_split(b, l.idx, &child);
    if (l.depth >= 32) {
        assert_int_equal(rc, -ERANGE);
        return rc;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(child, l.idx + (UINT32_C(1) << l.depth));
    if (m->n == m->cap) {
        m->cap *= 2;
        m->v = realloc(m->v, m->cap * sizeof(leaf));
        assert_non_null(m->v);
    }
    m->v[k].depth++;
    m->v[m->n++] = (leaf){child, l.depth + 1};
    return 0;
}

/* Random growth: mostly even (split the owner of a random V_h), sometimes
 * skewed (split the owner of one fixed V_h, driving one branch deep). */
static void grow(model *m, xt_bitmap *b, unsigned splits, uint32_t hot, unsigned skew_pct)
{
    for (unsigned s = 0; s < splits; s++) {
        uint32_t vh = (unsigned)(rnd() % 100) < skew_pct ? hot : (uint32_t)rnd();
        split_both(m, b, model_owner(m, vh));
    }
}

static void check_against_model(const model *m, const xt_bitmap *b, unsigned probes)
{
    assert_int_equal(xt_bitmap_count(b), m->n);
    uint32_t highest = 0;
    for (size_t k = 0; k < m->n; k++) {
        assert_true(xt_bitmap_test(b, m->v[k].idx));
        assert_int_equal(xt_bitmap_depth(b, m->v[k].idx), m->v[k].depth);
        if (m->v[k].idx > highest)
            highest = m->v[k].idx;
    }
    assert_int_equal(xt_bitmap_span(b), highest == UINT32_MAX ? UINT32_MAX : highest + 1);
    for (unsigned p = 0; p < probes; p++) {
        uint32_t vh = (uint32_t)rnd();
        assert_int_equal(xt_bitmap_lookup(b, vh), m->v[model_owner(m, vh)].idx);
        uint32_t i = (uint32_t)rnd() % (highest + 2);
        assert_int_equal(xt_bitmap_test(b, i), model_has(m, i));
    }
    /* every leaf's own V_h range maps to it */
    for (size_t k = 0; k < m->n; k++) {
        uint32_t high = (uint32_t)rnd();
        uint32_t vh = m->v[k].depth >= 32 ? m->v[k].idx
                                          : (high << m->v[k].depth) | m->v[k].idx;
        assert_int_equal(xt_bitmap_lookup(b, vh), m->v[k].idx);
    }
    /* next() enumerates exactly the model's indices */
    size_t seen = 0;
    for (int64_t i = xt_bitmap_next(b, 0); i >= 0; i = xt_bitmap_next(b, (uint64_t)i + 1)) {
        assert_true(model_has(m, (uint32_t)i));
        seen++;
    }
    assert_int_equal(seen, m->n);
}

static uint8_t *encode_alloc(const xt_bitmap *b, size_t *len)
{
    *len = xt_bitmap_encoded_size(b);
    uint8_t *buf = malloc(*len);
    assert_non_null(buf);
    assert_int_equal(xt_bitmap_encode(b, buf, *len), (long)*len);
    return buf;
}

/* decode(encode(b)) == b, and re-encoding gives the same bytes. */
static void check_round_trip(const xt_bitmap *b)
{
    size_t len;
    uint8_t *buf = encode_alloc(b, &len);
    xt_bitmap *d = NULL;
    assert_int_equal(xt_bitmap_decode(buf, len, &d), 0);
    assert_true(xt_bitmap_equal(b, d));
    size_t len2;
    uint8_t *buf2 = encode_alloc(d, &len2);
    assert_int_equal(len, len2);
    assert_memory_equal(buf, buf2, len);
    free(buf2);
    free(buf);
    xt_bitmap_free(d);
}

/* An independent writer of the documented format (xt_bitmap.h), for inputs
 * that encode() cannot produce. idx: present indices, ascending; out must
 * hold 28 + 18 * n bytes. Works from the words that hold bits, so a sparse
 * set near 2^32 costs nothing. */
typedef struct {
    uint8_t *out;
    size_t pos, hdr;
    int kind;
} ref_writer;

static void ref_emit(ref_writer *r, int kind, uint64_t n, const uint64_t *word)
{
    if (kind == r->kind) {
        xt_put_u32(r->out + r->hdr + 1, xt_get_u32(r->out + r->hdr + 1) + (uint32_t)n);
    } else {
        r->hdr = r->pos;
        r->out[r->pos] = (uint8_t)kind;
        xt_put_u32(r->out + r->pos + 1, (uint32_t)n);
        r->pos += 5;
        r->kind = kind;
    }
    if (kind == 2) {
        xt_put_u64(r->out + r->pos, *word);
        r->pos += 8;
    }
}

static size_t ref_encode(const uint32_t *idx, size_t n, uint8_t *out)
{
    ref_writer r = {out, 20, 0, -1};
    uint64_t next = 0; /* first word not yet described */
    for (size_t i = 0; i < n;) {
        uint64_t no = idx[i] / 64, w = 0;
        for (; i < n && idx[i] / 64 == no; i++)
            w |= UINT64_C(1) << (idx[i] % 64);
        if (no > next)
            ref_emit(&r, 0, no - next, NULL);
        ref_emit(&r, w == ~UINT64_C(0) ? 1 : 2, 1, &w);
        next = no + 1;
    }
    xt_put_u32(out, XT_BITMAP_MAGIC);
    xt_put_u16(out + 4, 1);
    xt_put_u16(out + 6, 0);
    xt_put_u32(out + 8, (uint32_t)n);
    xt_put_u32(out + 12, idx[n - 1]);
    xt_put_u32(out + 16, (uint32_t)(r.pos - 20));
    xt_put_u64(out + r.pos, xt_hash_bytes(out, r.pos, XT_BITMAP_CSUM_SEED));
    return r.pos + 8;
}

static void fix_checksum(uint8_t *buf, size_t len)
{
    xt_put_u64(buf + len - 8, xt_hash_bytes(buf, len - 8, XT_BITMAP_CSUM_SEED));
}

/* ---- tests ----------------------------------------------------------- */

static void test_new_is_slice0(void **state)
{
    (void)state;
    xt_bitmap *b = xt_bitmap_new();
    assert_non_null(b);
    assert_int_equal(xt_bitmap_count(b), 1);
    assert_int_equal(xt_bitmap_span(b), 1);
    assert_true(xt_bitmap_test(b, 0));
    assert_false(xt_bitmap_test(b, 1));
    assert_int_equal(xt_bitmap_depth(b, 0), 0);
    assert_int_equal(xt_bitmap_lookup(b, 0xdeadbeef), 0);
    assert_int_equal(xt_bitmap_split(b, 5, NULL), -EINVAL);
    check_round_trip(b);
    xt_bitmap_free(b);
    xt_bitmap_free(NULL);
}

static void test_lookup_matches_model(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 300; seed++) {
        seed_rng(__func__, seed);
        model m;
        model_init(&m);
        xt_bitmap *b = xt_bitmap_new();
        assert_non_null(b);
        uint32_t hot = (uint32_t)rnd();
        unsigned skew = (unsigned)(seed % 4) * 20; /* 0, 20, 40, 60 % */
        unsigned rounds = 1 + (unsigned)(rnd() % 8);
        for (unsigned r = 0; r < rounds; r++) {
            grow(&m, b, (unsigned)(rnd() % 64), hot, skew);
            check_against_model(&m, b, 64);
        }
        check_round_trip(b);
        xt_bitmap_free(b);
        model_free(&m);
    }
}

/* The GIGA+ order is exact: slice s at depth d holds exactly the V_h whose
 * low d bits are s, checked exhaustively over a 16-bit V_h space. */
static void test_lookup_exhaustive_small(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 20; seed++) {
        seed_rng(__func__, seed);
        model m;
        model_init(&m);
        xt_bitmap *b = xt_bitmap_new();
        grow(&m, b, 200, 0, 0);
        for (uint32_t vh = 0; vh < 65536; vh++) {
            uint32_t s = xt_bitmap_lookup(b, vh);
            unsigned d = xt_bitmap_depth(b, s);
            assert_int_equal(s, vh & ((UINT32_C(1) << d) - 1));
        }
        xt_bitmap_free(b);
        model_free(&m);
    }
}

static void test_max_depth(void **state)
{
    (void)state;
    /* Slice 0 split 32 times: 1, 2, 4, ..., 2^31; then -ERANGE. */
    xt_bitmap *b = xt_bitmap_new();
    for (unsigned d = 0; d < 32; d++) {
        uint32_t child;
        assert_int_equal(xt_bitmap_split(b, 0, &child), 0);
        assert_int_equal(child, UINT32_C(1) << d);
        assert_int_equal(xt_bitmap_depth(b, 0), d + 1);
    }
    assert_int_equal(xt_bitmap_split(b, 0, NULL), -ERANGE);
    assert_int_equal(xt_bitmap_count(b), 33);
    assert_int_equal(xt_bitmap_span(b), (UINT32_C(1) << 31) + 1);
    assert_int_equal(xt_bitmap_lookup(b, 0), 0);
    assert_int_equal(xt_bitmap_lookup(b, UINT32_C(1) << 31), UINT32_C(1) << 31);
    assert_int_equal(xt_bitmap_lookup(b, (UINT32_C(1) << 31) | 4), 4);
    assert_true(xt_bitmap_encoded_size(b) < 1024); /* zero runs, not 2^25 words */
    check_round_trip(b);
    xt_bitmap_free(b);

    /* The owner of V_h = ~0 split to the bottom reaches slice 0xffffffff. */
    b = xt_bitmap_new();
    uint32_t s = 0;
    for (unsigned d = 0; d < 32; d++) {
        s = xt_bitmap_lookup(b, UINT32_MAX);
        assert_int_equal(xt_bitmap_split(b, s, NULL), 0);
    }
    s = xt_bitmap_lookup(b, UINT32_MAX);
    assert_int_equal(s, UINT32_MAX);
    assert_int_equal(xt_bitmap_depth(b, s), 32);
    assert_int_equal(xt_bitmap_split(b, s, NULL), -ERANGE);
    assert_int_equal(xt_bitmap_span(b), UINT32_MAX); /* saturated */
    assert_int_equal(xt_bitmap_next(b, UINT32_C(1) << 31), (int64_t)(UINT32_C(1) << 31) + 0x7fffffff);
    assert_int_equal(xt_bitmap_next(b, UINT64_C(1) << 32), -1);
    /* present: 0 and 2^k - 1 for k = 1..32 */
    assert_int_equal(xt_bitmap_lookup(b, UINT32_MAX - 1), 0);
    assert_int_equal(xt_bitmap_lookup(b, 0x7fffffff), 0x7fffffff);
    assert_int_equal(xt_bitmap_lookup(b, 0xfffeffff), 0xffff);
    assert_int_equal(xt_bitmap_depth(b, 0xffff), 17);
    check_round_trip(b);
    xt_bitmap_free(b);
}

static xt_bitmap *random_bitmap(model *m, unsigned splits, unsigned skew)
{
    model_init(m);
    xt_bitmap *b = xt_bitmap_new();
    assert_non_null(b);
    grow(m, b, splits, (uint32_t)rnd(), skew);
    return b;
}

/* A copy of b split further along its own random path. */
static xt_bitmap *diverge(const xt_bitmap *b, unsigned splits)
{
    xt_bitmap *c = xt_bitmap_dup(b);
    assert_non_null(c);
    for (unsigned k = 0; k < splits; k++) {
        uint32_t s = xt_bitmap_lookup(c, (uint32_t)rnd());
        int rc = xt_bitmap_split(c, s, NULL);
        assert_true(rc == 0 || rc == -ERANGE);
    }
    return c;
}

static void test_merge_properties(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 200; seed++) {
        seed_rng(__func__, seed);
        model m;
        xt_bitmap *base = random_bitmap(&m, (unsigned)(rnd() % 200), (unsigned)(seed % 3) * 30);
        xt_bitmap *a = diverge(base, (unsigned)(rnd() % 100));
        xt_bitmap *b = diverge(base, (unsigned)(rnd() % 100));
        xt_bitmap *ab = xt_bitmap_dup(a), *ba = xt_bitmap_dup(b);
        int n1 = xt_bitmap_merge(ab, b), n2 = xt_bitmap_merge(ba, a);
        assert_true(n1 >= 0 && n2 >= 0);
        assert_true(xt_bitmap_equal(ab, ba));                        /* commutative */
        assert_int_equal(xt_bitmap_count(ab), xt_bitmap_count(a) + (uint32_t)n1);
        assert_int_equal(xt_bitmap_merge(ab, b), 0);                 /* idempotent */
        assert_int_equal(xt_bitmap_merge(ab, a), 0);
        assert_int_equal(xt_bitmap_merge(ab, ab), 0);
        assert_true(xt_bitmap_equal(ab, ba));
        /* union, exactly */
        for (int64_t i = xt_bitmap_next(ab, 0); i >= 0; i = xt_bitmap_next(ab, (uint64_t)i + 1))
            assert_true(xt_bitmap_test(a, (uint32_t)i) || xt_bitmap_test(b, (uint32_t)i));
        for (int64_t i = xt_bitmap_next(a, 0); i >= 0; i = xt_bitmap_next(a, (uint64_t)i + 1))
            assert_true(xt_bitmap_test(ab, (uint32_t)i));
        check_round_trip(ab); /* decode re-checks the pred closure */
        /* associative with a third view */
        xt_bitmap *c = diverge(base, (unsigned)(rnd() % 50));
        xt_bitmap *l = xt_bitmap_dup(ab), *r = xt_bitmap_dup(c);
        assert_true(xt_bitmap_merge(l, c) >= 0);
        assert_true(xt_bitmap_merge(r, a) >= 0 && xt_bitmap_merge(r, b) >= 0);
        assert_true(xt_bitmap_equal(l, r));
        xt_bitmap_free(l);
        xt_bitmap_free(r);
        xt_bitmap_free(c);
        xt_bitmap_free(ab);
        xt_bitmap_free(ba);
        xt_bitmap_free(a);
        xt_bitmap_free(b);
        xt_bitmap_free(base);
        model_free(&m);
    }
}

static void test_set_implies_chain(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 100; seed++) {
        seed_rng(__func__, seed);
        model m;
        xt_bitmap *full = random_bitmap(&m, 50 + (unsigned)(rnd() % 300), (unsigned)(seed % 3) * 30);
        /* Setting every leaf index, in random order, rebuilds the bitmap. */
        xt_bitmap *b = xt_bitmap_new();
        for (size_t k = m.n; k > 1; k--) {
            size_t j = (size_t)(rnd() % k);
            leaf t = m.v[j];
            m.v[j] = m.v[k - 1];
            m.v[k - 1] = t;
        }
        int total = 0;
        for (size_t k = 0; k < m.n; k++) {
            int rc = xt_bitmap_set(b, m.v[k].idx);
            assert_true(rc >= 0);
            total += rc;
            check_round_trip(b); /* closed after every set */
        }
        assert_int_equal(total + 1, (int)m.n);
        assert_true(xt_bitmap_equal(b, full));
        assert_int_equal(xt_bitmap_set(b, m.v[0].idx), 0);
        xt_bitmap_free(b);
        xt_bitmap_free(full);
        model_free(&m);
    }
}

static void test_encode_round_trip(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 300; seed++) {
        seed_rng(__func__, seed);
        model m;
        xt_bitmap *b = random_bitmap(&m, (unsigned)(rnd() % 1500), (unsigned)(seed % 4) * 25);
        size_t len;
        uint8_t *buf = encode_alloc(b, &len);
        /* the documented format, written independently, gives the same bytes */
        uint32_t *idx = malloc(m.n * 4);
        size_t n = 0;
        for (int64_t i = xt_bitmap_next(b, 0); i >= 0; i = xt_bitmap_next(b, (uint64_t)i + 1))
            idx[n++] = (uint32_t)i;
        uint8_t *ref = malloc(28 + 18 * n);
        assert_int_equal(ref_encode(idx, n, ref), len);
        assert_memory_equal(ref, buf, len);
        assert_int_equal(xt_bitmap_encode(b, buf, len - 1), -ENOSPC);
        check_round_trip(b);
        free(ref);
        free(idx);
        free(buf);
        xt_bitmap_free(b);
        model_free(&m);
    }
}

/* Every proper prefix, and the buffer with a byte appended, is rejected. */
static void test_truncation_rejected(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 20; seed++) {
        seed_rng(__func__, seed);
        model m;
        xt_bitmap *b = random_bitmap(&m, (unsigned)(rnd() % 400), (unsigned)(seed % 2) * 50);
        size_t len;
        uint8_t *buf = encode_alloc(b, &len);
        for (size_t cut = 0; cut < len; cut++) {
            uint8_t *p = malloc(cut ? cut : 1); /* exact size: ASan sees overreads */
            memcpy(p, buf, cut);
            xt_bitmap *d = (xt_bitmap *)1;
            assert_int_equal(xt_bitmap_decode(p, cut, &d), -EBADMSG);
            assert_null(d);
            free(p);
        }
        uint8_t *longer = malloc(len + 1);
        memcpy(longer, buf, len);
        longer[len] = 0;
        xt_bitmap *d;
        assert_int_equal(xt_bitmap_decode(longer, len + 1, &d), -EBADMSG);
        free(longer);
        free(buf);
        xt_bitmap_free(b);
        model_free(&m);
    }
}

static void test_corruption_rejected(void **state)
{
    (void)state;
    unsigned crafted = 0, crafted_accepted = 0;
    for (uint64_t seed = 0; seed < 100; seed++) {
        seed_rng(__func__, seed);
        model m;
        xt_bitmap *b = random_bitmap(&m, (unsigned)(rnd() % 600), (unsigned)(seed % 3) * 30);
        size_t len;
        uint8_t *buf = encode_alloc(b, &len);
        uint8_t *p = malloc(len);
        for (int trial = 0; trial < 200; trial++) {
            memcpy(p, buf, len);
            int flips = 1 + (int)(rnd() % 3);
            for (int f = 0; f < flips; f++)
                p[rnd() % len] ^= (uint8_t)(1 + rnd() % 255);
            if (!memcmp(p, buf, len))
                continue;
            xt_bitmap *d = NULL;
            int rc = xt_bitmap_decode(p, len, &d);
            assert_int_equal(rc, -EBADMSG); /* the checksum catches it */
            /* Same damage with a valid checksum: the structure checks must
             * reject it, or it is another valid bitmap that round-trips. */
            fix_checksum(p, len);
            rc = xt_bitmap_decode(p, len, &d);
            crafted++;
            if (rc == 0) {
                crafted_accepted++;
                size_t len2;
                uint8_t *again = encode_alloc(d, &len2);
                assert_int_equal(len2, len);
                assert_memory_equal(again, p, len);
                free(again);
                xt_bitmap_free(d);
            } else {
                assert_true(rc == -EBADMSG || rc == -EINVAL);
                assert_null(d);
            }
        }
        free(p);
        free(buf);
        xt_bitmap_free(b);
        model_free(&m);
    }
    printf("[ %s ] %u re-checksummed corruptions, %u decoded to another valid bitmap\n",
           __func__, crafted, crafted_accepted);
}

/* Well-formed encodings of sets that are not bitmaps. */
static void test_invariant_violations_rejected(void **state)
{
    (void)state;
    uint8_t buf[4096];
    xt_bitmap *d;
    static const uint32_t no_zero[] = {1};
    static const uint32_t gap[] = {0, 2};             /* 2 without 1 */
    static const uint32_t orphan[] = {0, 1, 5};       /* 5 needs 3 */
    static const uint32_t far[] = {0, 1, 1000000};    /* no chain */
    static const uint32_t ok[] = {0, 1, 2, 3, 5, 7};
    size_t n = ref_encode(no_zero, 1, buf);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), -EINVAL);
    n = ref_encode(gap, 2, buf);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), -EINVAL);
    n = ref_encode(orphan, 3, buf);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), -EINVAL);
    n = ref_encode(far, 3, buf);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), -EINVAL);
    n = ref_encode(ok, 6, buf);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), 0);
    assert_int_equal(xt_bitmap_lookup(d, 0x0f), 7);
    assert_int_equal(xt_bitmap_lookup(d, 0x0d), 5);
    assert_int_equal(xt_bitmap_lookup(d, 0x09), 1);
    xt_bitmap_free(d);

    /* Structure errors with valid checksums: count off, highest off,
     * non-maximal runs, literal that should be a run, bad kind, n = 0. */
    n = ref_encode(ok, 6, buf);
    xt_put_u32(buf + 8, 5);
    fix_checksum(buf, n);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), -EBADMSG);
    n = ref_encode(ok, 6, buf);
    xt_put_u32(buf + 12, 6);
    fix_checksum(buf, n);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), -EBADMSG);
    n = ref_encode(ok, 6, buf);
    buf[20] = 3;
    fix_checksum(buf, n);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), -EBADMSG);
    n = ref_encode(ok, 6, buf);
    xt_put_u32(buf + 21, 0);
    fix_checksum(buf, n);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), -EBADMSG);
    /* a literal that holds all ones instead of a ones run */
    {
        uint32_t all[64];
        for (uint32_t i = 0; i < 64; i++)
            all[i] = i;
        n = ref_encode(all, 64, buf);
        assert_int_equal(buf[20], 1);
        uint8_t lit[64];
        memcpy(lit, buf, 20);
        lit[20] = 2;
        xt_put_u32(lit + 21, 1);
        xt_put_u64(lit + 25, ~UINT64_C(0));
        xt_put_u32(lit + 16, 13);
        fix_checksum(lit, 20 + 13 + 8);
        assert_int_equal(xt_bitmap_decode(lit, 20 + 13 + 8, &d), -EBADMSG);
        assert_int_equal(xt_bitmap_decode(buf, n, &d), 0);
        xt_bitmap_free(d);
    }
    /* two zero runs in a row (non-canonical) */
    {
        static const uint32_t deep[] = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
        /* canonical: lit(3) zero(1) lit(1) zero(3) lit(1) */
        n = ref_encode(deep, 11, buf);
        assert_int_equal(n, 20 + 5 + 24 + 5 + 5 + 8 + 5 + 5 + 8 + 8);
        assert_int_equal(buf[20 + 5 + 24 + 5 + 5 + 8], 0);
        assert_int_equal(xt_get_u32(buf + 20 + 5 + 24 + 5 + 5 + 8 + 1), 3);
        assert_int_equal(xt_bitmap_decode(buf, n, &d), 0);
        xt_bitmap_free(d);
        uint8_t two[160];
        size_t at = 20 + 5 + 24 + 5 + 5 + 8; /* the zero(3) run */
        memcpy(two, buf, at);
        two[at] = 0;
        xt_put_u32(two + at + 1, 1);
        two[at + 5] = 0;
        xt_put_u32(two + at + 6, 2);
        memcpy(two + at + 10, buf + at + 5, n - 8 - at - 5);
        size_t n2 = n + 5;
        xt_put_u32(two + 16, (uint32_t)(n2 - 28));
        fix_checksum(two, n2);
        assert_int_equal(xt_bitmap_decode(two, n2, &d), -EBADMSG);
        /* a zero run running past the end, and one ending early */
        memcpy(two, buf, n);
        xt_put_u32(two + at + 1, 4);
        fix_checksum(two, n);
        assert_int_equal(xt_bitmap_decode(two, n, &d), -EBADMSG);
        xt_put_u32(two + at + 1, 2);
        fix_checksum(two, n);
        assert_int_equal(xt_bitmap_decode(two, n, &d), -EBADMSG);
    }
    /* A huge count is refused before any allocation. */
    n = ref_encode(ok, 6, buf);
    xt_put_u32(buf + 8, XT_BITMAP_MAX_SLICES + 1);
    fix_checksum(buf, n);
    assert_int_equal(xt_bitmap_decode(buf, n, &d), -EINVAL);
    assert_int_equal(xt_bitmap_decode(NULL, 0, &d), -EBADMSG);
}

static void test_delta(void **state)
{
    (void)state;
    for (uint64_t seed = 0; seed < 200; seed++) {
        seed_rng(__func__, seed);
        model m;
        xt_bitmap *old = random_bitmap(&m, (unsigned)(rnd() % 100), (unsigned)(seed % 3) * 30);
        xt_bitmap *base = diverge(old, (unsigned)(rnd() % 200));
        xt_bitmap *now = diverge(base, (unsigned)(rnd() % 200));

        size_t len = xt_bitmap_delta_size(now, base);
        uint8_t *buf = malloc(len);
        assert_int_equal(xt_bitmap_delta_encode(now, base, buf, len), (long)len);
        assert_int_equal(xt_bitmap_delta_encode(now, base, buf, len - 1), -ENOSPC);

        /* a peer at base reaches now; again is a no-op */
        xt_bitmap *peer = xt_bitmap_dup(base);
        int added = xt_bitmap_delta_apply(peer, buf, len);
        assert_int_equal(added, (int)(xt_bitmap_count(now) - xt_bitmap_count(base)));
        assert_true(xt_bitmap_equal(peer, now));
        assert_int_equal(xt_bitmap_delta_apply(peer, buf, len), 0);
        /* a stale peer (old) gets base|now minus what only base implied:
         * a valid bitmap within now, and together with base exactly now */
        xt_bitmap *stale = xt_bitmap_dup(old);
        assert_true(xt_bitmap_delta_apply(stale, buf, len) >= 0);
        check_round_trip(stale);
        for (int64_t i = xt_bitmap_next(stale, 0); i >= 0; i = xt_bitmap_next(stale, (uint64_t)i + 1))
            assert_true(xt_bitmap_test(now, (uint32_t)i));
        assert_true(xt_bitmap_merge(stale, base) >= 0);
        assert_true(xt_bitmap_equal(stale, now));
        /* the full delta (base NULL) rebuilds now from scratch */
        size_t flen = xt_bitmap_delta_size(now, NULL);
        uint8_t *fbuf = malloc(flen);
        assert_int_equal(xt_bitmap_delta_encode(now, NULL, fbuf, flen), (long)flen);
        xt_bitmap *fresh = xt_bitmap_new();
        assert_true(xt_bitmap_delta_apply(fresh, fbuf, flen) >= 0);
        assert_true(xt_bitmap_equal(fresh, now));

        /* truncations and corruptions never change the target */
        xt_bitmap *victim = xt_bitmap_dup(base);
        for (size_t cut = 0; cut < flen; cut++) {
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, fbuf, cut);
            assert_int_equal(xt_bitmap_delta_apply(victim, p, cut), -EBADMSG);
            free(p);
        }
        uint8_t *p = malloc(flen);
        for (int t = 0; t < 50; t++) {
            memcpy(p, fbuf, flen);
            p[rnd() % flen] ^= (uint8_t)(1 + rnd() % 255);
            assert_int_equal(xt_bitmap_delta_apply(victim, p, flen), -EBADMSG);
            /* with a fixed checksum: rejected or a valid merge */
            fix_checksum(p, flen);
            xt_bitmap *v2 = xt_bitmap_dup(base);
            int rc = xt_bitmap_delta_apply(v2, p, flen);
            assert_true(rc == -EBADMSG || rc >= 0);
            if (rc >= 0)
                check_round_trip(v2);
            xt_bitmap_free(v2);
        }
        assert_true(xt_bitmap_equal(victim, base));
        free(p);
        xt_bitmap_free(victim);
        xt_bitmap_free(fresh);
        free(fbuf);
        xt_bitmap_free(stale);
        xt_bitmap_free(peer);
        free(buf);
        xt_bitmap_free(now);
        xt_bitmap_free(base);
        xt_bitmap_free(old);
        model_free(&m);
    }
}

static void test_delta_malformed(void **state)
{
    (void)state;
    xt_bitmap *b = xt_bitmap_new();
    uint8_t buf[64];
    /* n = 1, body = one overlong varint 0x81 0x00 (value 1) */
    xt_put_u32(buf, XT_BITMAP_DELTA_MAGIC);
    xt_put_u16(buf + 4, 1);
    xt_put_u16(buf + 6, 0);
    xt_put_u32(buf + 8, 1);
    xt_put_u32(buf + 12, 2);
    buf[16] = 0x81;
    buf[17] = 0x00;
    fix_checksum(buf, 26);
    assert_int_equal(xt_bitmap_delta_apply(b, buf, 26), -EBADMSG);
    buf[16] = 0x01; /* canonical 1, then a stray byte */
    buf[17] = 0x01;
    fix_checksum(buf, 26);
    assert_int_equal(xt_bitmap_delta_apply(b, buf, 26), -EBADMSG);
    /* varint beyond u32 */
    xt_put_u32(buf + 12, 5);
    memcpy(buf + 16, "\xff\xff\xff\xff\x1f", 5);
    fix_checksum(buf, 29);
    assert_int_equal(xt_bitmap_delta_apply(b, buf, 29), -EBADMSG);
    /* two indices summing past 2^32 */
    xt_put_u32(buf + 8, 2);
    xt_put_u32(buf + 12, 10);
    memcpy(buf + 16, "\xff\xff\xff\xff\x0f\xff\xff\xff\xff\x0f", 10);
    fix_checksum(buf, 34);
    assert_int_equal(xt_bitmap_delta_apply(b, buf, 34), -EBADMSG);
    /* a zero gap */
    xt_put_u32(buf + 12, 2);
    buf[16] = 0x05;
    buf[17] = 0x00;
    fix_checksum(buf, 26);
    assert_int_equal(xt_bitmap_delta_apply(b, buf, 26), -EBADMSG);
    /* fine: 5 implies 3 and 1, 6 implies 2 */
    buf[17] = 0x01;
    fix_checksum(buf, 26);
    assert_int_equal(xt_bitmap_delta_apply(b, buf, 26), 5); /* 1 2 3 5 6 */
    assert_int_equal(xt_bitmap_count(b), 6);
    xt_bitmap_free(b);
}

/* An even table of 64K slices: dense, compact, fast. */
static void test_large_even_table(void **state)
{
    (void)state;
    seed_rng(__func__, 0);
    xt_bitmap *b = xt_bitmap_new();
    while (xt_bitmap_count(b) < 65536)
        assert_int_equal(xt_bitmap_split(b, xt_bitmap_lookup(b, (uint32_t)rnd()), NULL), 0);
    size_t len = xt_bitmap_encoded_size(b);
    size_t dlen = xt_bitmap_delta_size(b, NULL);
    printf("[ %s ] 65536 slices, span %u: image %zu bytes, full delta %zu bytes\n",
           __func__, xt_bitmap_span(b), len, dlen);
    assert_true(len <= (xt_bitmap_span(b) / 64 + 1) * 13 + 28);
    check_round_trip(b);
    uint64_t t0 = xt_mono_ns();
    uint32_t acc = 0;
    for (int i = 0; i < 1000000; i++)
        acc += xt_bitmap_lookup(b, (uint32_t)rnd());
    printf("[ %s ] lookup %.1f ns (acc %u)\n", __func__, (xt_mono_ns() - t0) / 1e6, acc);
    xt_bitmap_free(b);
}

/* Countdown allocation failures: every operation either succeeds or returns
 * -ENOMEM leaving a valid bitmap, and leaks nothing (ASan). */
static void test_alloc_failure_countdown(void **state)
{
    (void)state;
    seed_rng(__func__, 0);
    model m;
    xt_bitmap *src = random_bitmap(&m, 300, 50); /* has a sparse tail */
    xt_bitmap *other = diverge(src, 300);
    size_t len;
    uint8_t *img = encode_alloc(other, &len);
    size_t dlen = xt_bitmap_delta_size(other, NULL);
    uint8_t *delta = malloc(dlen);
    xt_bitmap_delta_encode(other, NULL, delta, dlen);
    long failures = 0;

    for (long n = 0;; n++) { /* new + dup */
        xt_alloc_fail_after(n);
        xt_bitmap *a = xt_bitmap_new();
        xt_bitmap *c = a ? xt_bitmap_dup(src) : NULL;
        failures += xt_alloc_fail_after(-1);
        xt_bitmap_free(a);
        if (c) {
            assert_true(xt_bitmap_equal(c, src));
            xt_bitmap_free(c);
            break;
        }
    }
    for (long n = 0;; n++) { /* decode */
        xt_bitmap *d = NULL;
        xt_alloc_fail_after(n);
        int rc = xt_bitmap_decode(img, len, &d);
        failures += xt_alloc_fail_after(-1);
        if (rc == 0) {
            assert_true(xt_bitmap_equal(d, other));
            xt_bitmap_free(d);
            break;
        }
        assert_int_equal(rc, -ENOMEM);
        assert_null(d);
    }
    /* merge, set (delta apply), split: a fresh copy each time */
    for (int op = 0; op < 3; op++) {
        for (long n = 0;; n++) {
            xt_bitmap *t = xt_bitmap_new();
            xt_bitmap *ref = xt_bitmap_new();
            assert_true(xt_bitmap_merge(ref, other) >= 0);
            xt_alloc_fail_after(n);
            int rc;
            if (op == 0) {
                rc = xt_bitmap_merge(t, other);
            } else if (op == 1) {
                rc = xt_bitmap_delta_apply(t, delta, dlen);
            } else {
                rc = 0;
                while (rc == 0 && xt_bitmap_count(t) < 500)
                    rc = xt_bitmap_split(t, xt_bitmap_lookup(t, 0x12345678u), NULL);
                if (rc == -ERANGE)
                    rc = 0;
            }
            failures += xt_alloc_fail_after(-1);
            check_round_trip(t); /* valid either way */
            if (op < 2) {
                for (int64_t i = xt_bitmap_next(t, 0); i >= 0;
                     i = xt_bitmap_next(t, (uint64_t)i + 1))
                    assert_true(xt_bitmap_test(other, (uint32_t)i));
                if (rc == -ENOMEM) /* retrying completes it */
                    assert_true(xt_bitmap_merge(t, other) >= 0);
                assert_true(xt_bitmap_equal(t, ref));
            }
            xt_bitmap_free(t);
            xt_bitmap_free(ref);
            if (rc >= 0)
                break;
            assert_int_equal(rc, -ENOMEM);
        }
    }
    assert_true(failures > 0);
    free(delta);
    free(img);
    xt_bitmap_free(other);
    xt_bitmap_free(src);
    model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_is_slice0),
        cmocka_unit_test(test_lookup_matches_model),
        cmocka_unit_test(test_lookup_exhaustive_small),
        cmocka_unit_test(test_max_depth),
        cmocka_unit_test(test_merge_properties),
        cmocka_unit_test(test_set_implies_chain),
        cmocka_unit_test(test_encode_round_trip),
        cmocka_unit_test(test_truncation_rejected),
        cmocka_unit_test(test_corruption_rejected),
        cmocka_unit_test(test_invariant_violations_rejected),
        cmocka_unit_test(test_delta),
        cmocka_unit_test(test_delta_malformed),
        cmocka_unit_test(test_large_even_table),
        cmocka_unit_test(test_alloc_failure_countdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
