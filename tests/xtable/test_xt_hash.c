/*
 * test_xt_hash.c -- the name hash and its system-row rule (xt_hash.h,
 * docs/mds-xact.md): a system row's hash is the one it carries, every other
 * name (a short 00 FF name included) hashes with plain XXH3_64; pending-row
 * names (length, placement, distinctness); cookies stay inside their
 * slice's range, for system rows too.
 *
 * Seeded: XT_SEED=<n> in the environment repeats a run; the seed is printed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "xt_common.h"
#include "pom_rand.h"
#include "xt_hash.h"

static uint64_t seed;

static int setup_seed(void **state)
{
    (void)state;
    rng_state = seed;
    return 0;
}

/* A random name of 1..XT_NAME_MAX bytes, any bytes. */
static size_t rand_name(uint8_t *out)
{
    size_t len = 1 + (size_t)(rnd() % XT_NAME_MAX);
    for (size_t i = 0; i < len; i++)
        out[i] = (uint8_t)rnd();
    return len;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* Ordinary names hash with XXH3_64 (no seed); so do 00 FF names shorter
 * than the head, and names that only start with 00 or with FF. */
static void test_plain_names(void **state)
{
    (void)state;
    uint8_t name[XT_NAME_MAX];
    for (int i = 0; i < 100000; i++) {
        size_t len = rand_name(name);
        if (i % 4 == 1)
            name[0] = XT_SYS_B0; /* 00 then anything but FF */
        if (i % 4 == 1 && len > 1 && name[1] == XT_SYS_B1)
            name[1] = 0xfe;
        if (i % 4 == 2)
            name[0] = XT_SYS_B1; /* FF 00: the bytes reversed */
        if (i % 4 == 2 && len > 1)
            name[1] = XT_SYS_B0;
        bool sys = xt_hash_is_sys(name, len);
        if (i % 4 == 1 || i % 4 == 2)
            assert_false(sys);
        if (!sys)
            assert_true(xt_hash_name(name, len) == XXH3_64bits(name, len));
    }
    /* 00 FF names of 2..10 bytes are system names too short to carry a
     * hash: XXH3, never a read past their end (ASan). */
    for (size_t len = 2; len < XT_SYS_HEAD; len++) {
        uint8_t b[XT_SYS_HEAD] = { XT_SYS_B0, XT_SYS_B1 };
        for (size_t k = 2; k < len; k++)
            b[k] = (uint8_t)rnd();
        uint8_t *p = malloc(len); /* exactly len: ASan sees a read past it */
        assert_non_null(p);
        memcpy(p, b, len);
        assert_true(xt_hash_is_sys(p, len));
        assert_true(xt_hash_name(p, len) == XXH3_64bits(p, len));
        free(p);
    }
    uint8_t one = XT_SYS_B0;
    assert_false(xt_hash_is_sys(&one, 1));
    assert_true(xt_hash_name(&one, 1) == XXH3_64bits(&one, 1));
}

/* A system name of >= XT_SYS_HEAD bytes hashes to the 8 LE bytes at 3,
 * whatever follows; xt_hash_sys_head writes exactly that layout. */
static void test_sys_names(void **state)
{
    (void)state;
    uint8_t name[XT_NAME_MAX];
    for (int i = 0; i < 100000; i++) {
        uint64_t h = rnd();
        int tag = i % 3 == 0 ? XT_SYS_PENDING : i % 3 == 1 ? XT_SYS_DECISION : (int)(rnd() & 0xff);
        memset(name, 0xaa, sizeof name);
        assert_int_equal(xt_hash_sys_head(name, tag, h), XT_SYS_HEAD);
        assert_int_equal(name[0], XT_SYS_B0);
        assert_int_equal(name[1], XT_SYS_B1);
        assert_int_equal(name[2], (uint8_t)tag);
        assert_true(le64(name + 3) == h);
        assert_int_equal(name[XT_SYS_HEAD], 0xaa); /* nothing past the head */
        size_t len = XT_SYS_HEAD + (size_t)(rnd() % (XT_NAME_MAX - XT_SYS_HEAD + 1));
        for (size_t k = XT_SYS_HEAD; k < len; k++)
            name[k] = (uint8_t)rnd();
        assert_true(xt_hash_is_sys(name, len));
        assert_true(xt_hash_name(name, len) == h);
    }
    /* Exactly the head: the carried hash. */
    uint8_t head[XT_SYS_HEAD];
    xt_hash_sys_head(head, XT_SYS_DECISION, UINT64_C(0x0123456789abcdef));
    assert_true(xt_hash_name(head, sizeof head) == UINT64_C(0x0123456789abcdef));
}

/* Pending names: XT_SYS_PEND_LEN bytes, placed with the name they are
 * about, the tail a seeded hash of the name; distinct names give distinct
 * pending names. */
struct pend {
    uint8_t p[XT_SYS_PEND_LEN];
};

static int cmp_pend(const void *a, const void *b)
{
    return memcmp(a, b, XT_SYS_PEND_LEN);
}

static void test_pend_names(void **state)
{
    (void)state;
    enum { N = 200000 };
    struct pend *v = calloc(N, sizeof *v);
    assert_non_null(v);
    uint8_t name[XT_NAME_MAX];
    for (int i = 0; i < N; i++) {
        size_t len = rand_name(name);
        if (len < 4)
            len = 4;
        memcpy(name, &i, 4); /* distinct names */
        uint8_t out[XT_SYS_PEND_LEN + 8];
        memset(out, 0x5a, sizeof out);
        assert_int_equal(xt_hash_pend_name(name, len, out), XT_SYS_PEND_LEN);
        assert_int_equal(out[XT_SYS_PEND_LEN], 0x5a); /* wrote exactly its length */
        assert_true(xt_hash_is_sys(out, XT_SYS_PEND_LEN));
        assert_int_equal(out[2], XT_SYS_PENDING);
        uint64_t h = xt_hash_name(name, len);
        assert_true(xt_hash_name(out, XT_SYS_PEND_LEN) == h); /* placed with name */
        assert_true(xt_hash_order(h) == xt_hash_order(xt_hash_name(out, XT_SYS_PEND_LEN)));
        assert_true(le64(out + XT_SYS_HEAD) == xt_hash_bytes(name, len, XT_SYS_SEED));
        memcpy(v[i].p, out, XT_SYS_PEND_LEN);
    }
    /* A pending name of a system name is placed with it too. */
    uint8_t dn[XT_SYS_HEAD + 8], pn[XT_SYS_PEND_LEN];
    xt_hash_sys_head(dn, XT_SYS_DECISION, UINT64_C(42));
    memset(dn + XT_SYS_HEAD, 7, 8);
    xt_hash_pend_name(dn, sizeof dn, pn);
    assert_true(xt_hash_name(pn, sizeof pn) == 42);
    qsort(v, N, sizeof *v, cmp_pend);
    for (int i = 1; i < N; i++)
        assert_true(memcmp(v[i].p, v[i - 1].p, XT_SYS_PEND_LEN) != 0);
    free(v);
}

/* Every hash's cookie (any seq) lies in its slice's [lo, hi) at every
 * depth, and below XT_COOKIE_END; the ranges of one depth tile the space
 * (lo of the next index in order is hi). Hashes carried by system names
 * are ordinary 64-bit values: included. */
static void test_cookie_ranges(void **state)
{
    (void)state;
    uint8_t name[XT_NAME_MAX];
    for (int i = 0; i < 200000; i++) {
        uint64_t h;
        if (i % 2) {
            h = rnd();
        } else {
            size_t len = rand_name(name);
            if (i % 4 == 0 && len >= XT_SYS_HEAD)
                xt_hash_sys_head(name, XT_SYS_PENDING, rnd());
            h = xt_hash_name(name, len);
        }
        unsigned depth = (unsigned)(rnd() % 33);
        uint32_t mask = depth >= 32 ? UINT32_MAX : (UINT32_C(1) << depth) - 1;
        uint32_t index = xt_hash_vh(h) & mask;
        unsigned seq = (unsigned)(rnd() % (XT_COOKIE_SEQ_MAX + 1));
        uint64_t c = xt_hash_cookie(h, seq);
        uint64_t lo = xt_hash_slice_cookie_lo(index, depth);
        uint64_t hi = xt_hash_slice_cookie_hi(index, depth);
        assert_true(c < XT_COOKIE_END);
        assert_true(lo <= c && c < hi);
        assert_true(c >> XT_COOKIE_SEQ_BITS == xt_hash_order(h) >> 9);
        /* Siblings after a split cover the parent's range, child 0 first. */
        if (depth < 32) {
            uint32_t bit = UINT32_C(1) << depth;
            assert_true(xt_hash_slice_cookie_lo(index, depth + 1) == lo);
            assert_true(xt_hash_slice_cookie_hi(index, depth + 1) ==
                        xt_hash_slice_cookie_lo(index + bit, depth + 1));
            assert_true(xt_hash_slice_cookie_hi(index + bit, depth + 1) == hi);
        }
    }
    assert_true(xt_hash_slice_cookie_lo(0, 0) == 0);
    assert_true(xt_hash_slice_cookie_hi(0, 0) == XT_COOKIE_END);
}

int main(void)
{
    const char *env = getenv("XT_SEED");
    seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_xt_hash: XT_SEED=%llu\n", (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_plain_names, setup_seed),
        cmocka_unit_test_setup(test_sys_names, setup_seed),
        cmocka_unit_test_setup(test_pend_names, setup_seed),
        cmocka_unit_test_setup(test_cookie_ranges, setup_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
