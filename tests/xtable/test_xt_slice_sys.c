/*
 * test_xt_slice_sys.c -- system rows in a slice (xt_slice.h invariant 4,
 * xt_slice_sys_count; docs/mds-xact.md): the count against a brute-force
 * count after random insert/update/delete/tombstone-drop/split sequences
 * and image and delta round trips; the listing order (system rows last in
 * their 55-bit prefix group) and a resumed listing that neither repeats
 * nor skips an ordinary row while system rows sharing listed names'
 * hashes come and go. Kept apart from test_xt_slice.c, which is at the
 * file size limit.
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

#include "xt_common.h"
#include "pom_rand.h"
#include "xt_hash.h"
#include "xt_slice.h"

static uint64_t seed;
static uint32_t rndn(uint32_t n) { return (uint32_t)(rnd() % n); }

static int setup_seed(void **state)
{
    (void)state;
    rng_state = seed;
    return 0;
}

/* ---- names ------------------------------------------------------------ */

struct nm {
    uint8_t name[XT_NAME_MAX];
    size_t len;
    uint64_t hash;
    bool sys;
};

/* Name i: ordinary (4..40 bytes starting with i) or, for odd i, the
 * pending row of ordinary name i - 1 (same hash) or a decision row with a
 * random carried hash. A few short 00 FF names (system, hashed by XXH3). */
static void make_names(struct nm *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct nm *x = &v[i];
        if (i % 2 == 0 || i % 7 == 1) {
            x->len = 4 + rndn(37);
            for (size_t k = 0; k < x->len; k++)
                x->name[k] = (uint8_t)rnd();
            memcpy(x->name, &i, 4);
            if (x->name[0] == XT_SYS_B0 && x->name[1] == XT_SYS_B1)
                x->name[1] = 0;
        } else if (i % 3 == 0) {
            x->len = xt_hash_pend_name(v[i - 1].name, v[i - 1].len, x->name);
        } else if (i % 5 == 0) {
            x->len = 4; /* short: XXH3, still a system row */
            x->name[0] = XT_SYS_B0;
            x->name[1] = XT_SYS_B1;
            memcpy(x->name + 2, &i, 2);
        } else {
            xt_hash_sys_head(x->name, XT_SYS_DECISION,
                             rndn(4) ? rnd() : xt_hash_name(v[i - 1].name, v[i - 1].len));
            memcpy(x->name + XT_SYS_HEAD, &i, 8);
            x->len = XT_SYS_HEAD + 8;
        }
        x->hash = xt_hash_name(x->name, x->len);
        x->sys = xt_hash_is_sys(x->name, x->len);
    }
}

/* ---- a table of slices -------------------------------------------------- */

#define MAXSL 512

struct table {
    xt_slice *sl[MAXSL];
    int n;
};

static xt_slice *slice_of(struct table *t, uint64_t h)
{
    for (int i = 0; i < t->n; i++)
        if (xt_slice_owns(t->sl[i], h))
            return t->sl[i];
    fail_msg("no slice owns %llx", (unsigned long long)h);
    return NULL;
}

static int cb_brute(void *arg, const xt_slice_entry *e)
{
    uint32_t *n = arg;
    *n += (uint32_t)xt_hash_is_sys(e->name, e->name_len);
    return 0;
}

static uint32_t brute_sys(const xt_slice *s)
{
    uint32_t n = 0;
    assert_int_equal(xt_slice_foreach(s, cb_brute, &n), (int)xt_slice_count(s));
    return n;
}

static void check_counts(struct table *t, const bool *present, const struct nm *v, size_t n)
{
    uint32_t want = 0, got = 0;
    for (size_t i = 0; i < n; i++)
        want += present[i] && v[i].sys;
    for (int i = 0; i < t->n; i++) {
        uint32_t b = brute_sys(t->sl[i]);
        assert_int_equal(xt_slice_sys_count(t->sl[i]), b);
        assert_true(b <= xt_slice_count(t->sl[i]));
        got += b;
    }
    assert_int_equal(got, want);
}

/* Replace slice k by decode(encode(slice k)). */
static void image_roundtrip(struct table *t, int k)
{
    uint8_t *buf;
    size_t len;
    assert_int_equal(xt_slice_encode(t->sl[k], &buf, &len), 0);
    xt_slice *d;
    assert_int_equal(xt_slice_decode(buf, len, &d), 0);
    xt_free(buf);
    assert_int_equal(xt_slice_sys_count(d), xt_slice_sys_count(t->sl[k]));
    xt_slice_free(t->sl[k]);
    t->sl[k] = d;
}

/* The counts over random operations; every slice is periodically replaced
 * by image + delta replay (the MDS's load path). */
static void test_sys_count_props(void **state)
{
    (void)state;
    enum { N = 6000, OPS = 200000 };
    struct nm *v = calloc(N, sizeof *v);
    bool *present = calloc(N, sizeof *present);
    assert_non_null(v);
    assert_non_null(present);
    make_names(v, N);
    struct table t = { .n = 1 };
    t.sl[0] = xt_slice_new(0, 0, 64);
    uint64_t gen = 1;
    /* Per slice, the image taken at gen `base` (deltas apply on top). */
    for (int op = 0; op < OPS; op++) {
        size_t i = rndn(N);
        xt_slice *s = slice_of(&t, v[i].hash);
        uint32_t r = rndn(100);
        uint8_t row[8];
        memcpy(row, &op, 4);
        int rc;
        if (r < 50) {
            rc = xt_slice_insert(s, v[i].name, v[i].len, v[i].hash, row, 1 + rndn(8),
                                 rndn(4) ? 0 : XT_SLICE_EXCL, gen);
            if (rc == -ENOSPC && t.n < MAXSL) {
                xt_slice *c;
                if (xt_slice_split(s, &c) == 0)
                    t.sl[t.n++] = c;
                continue;
            }
            if (rc >= 0)
                present[i] = true;
            else
                assert_true(rc == -EEXIST || rc == -ENOSPC || rc == -EOVERFLOW);
        } else if (r < 60) {
            rc = xt_slice_update(s, v[i].name, v[i].len, v[i].hash, row, 3, gen);
            assert_int_equal(rc, present[i] ? 0 : -ENOENT);
        } else if (r < 90) {
            rc = xt_slice_delete(s, v[i].name, v[i].len, v[i].hash, gen);
            assert_int_equal(rc, present[i] ? 0 : -ENOENT);
            present[i] = false;
        } else if (r < 95) {
            xt_slice_drop_tombstones(s, gen);
            gen++;
        } else if (r < 97) {
            image_roundtrip(&t, rndn((uint32_t)t.n));
        } else {
            /* Image at gen g, more changes, delta since g applied to the
             * decoded image: the same rows, the same count. */
            int k = (int)rndn((uint32_t)t.n);
            uint8_t *img, *dl;
            size_t ilen, dlen;
            uint64_t g = gen++;
            xt_slice_drop_tombstones(t.sl[k], g);
            assert_int_equal(xt_slice_encode(t.sl[k], &img, &ilen), 0);
            for (int m = 0; m < 40; m++) {
                size_t j = rndn(N);
                if (!xt_slice_owns(t.sl[k], v[j].hash))
                    continue;
                if (rndn(2)) {
                    rc = xt_slice_insert(t.sl[k], v[j].name, v[j].len, v[j].hash, "d", 1, 0,
                                         gen);
                    if (rc >= 0)
                        present[j] = true;
                } else if (xt_slice_delete(t.sl[k], v[j].name, v[j].len, v[j].hash, gen) == 0) {
                    present[j] = false;
                }
            }
            assert_int_equal(xt_slice_encode_delta(t.sl[k], g, &dl, &dlen), 0);
            xt_slice *d;
            assert_int_equal(xt_slice_decode(img, ilen, &d), 0);
            assert_int_equal(xt_slice_apply_delta(d, dl, dlen), 0);
            assert_int_equal(xt_slice_count(d), xt_slice_count(t.sl[k]));
            assert_int_equal(xt_slice_sys_count(d), xt_slice_sys_count(t.sl[k]));
            assert_int_equal(xt_slice_sys_count(d), brute_sys(d));
            /* Apply the same delta again: idempotent for the count. */
            assert_int_equal(xt_slice_apply_delta(d, dl, dlen), 0);
            assert_int_equal(xt_slice_sys_count(d), brute_sys(d));
            xt_free(img);
            xt_free(dl);
            xt_slice_free(t.sl[k]);
            t.sl[k] = d;
            gen++;
        }
        if (op % 2000 == 0)
            check_counts(&t, present, v, N);
    }
    check_counts(&t, present, v, N);
    printf("test_sys_count_props: %d slices\n", t.n);
    for (int i = 0; i < t.n; i++)
        xt_slice_free(t.sl[i]);
    free(v);
    free(present);
}

/* ---- listing order ------------------------------------------------------ */

struct seen {
    uint64_t cookies[4096];
    uint8_t names[4096][XT_SYS_PEND_LEN + 8];
    size_t lens[4096];
    bool sys[4096];
    size_t n;
};

static int cb_seen(void *arg, const xt_slice_entry *e)
{
    struct seen *s = arg;
    assert_true(s->n < 4096);
    s->cookies[s->n] = e->cookie;
    assert_true(e->name_len <= sizeof s->names[0]);
    memcpy(s->names[s->n], e->name, e->name_len);
    s->lens[s->n] = e->name_len;
    s->sys[s->n] = xt_hash_is_sys(e->name, e->name_len);
    s->n++;
    return 0;
}

/* Collision groups of ordinary names (one 55-bit prefix, different low
 * bits) with system rows of the same full hashes: the whole listing shows
 * every group's ordinary rows first, at seqs 0..k-1. */
static void test_sys_rank_last(void **state)
{
    (void)state;
    xt_slice *s = xt_slice_new(0, 0, 4096);
    assert_non_null(s);
    uint64_t gen = 1;
    for (int g = 0; g < 50; g++) {
        uint64_t base = rnd() & ~UINT64_C(0x1ff);
        int k = 1 + (int)rndn(6);
        for (int j = 0; j < k; j++) {
            uint64_t h = base | rndn(512);
            uint8_t nm[12] = { 'n', (uint8_t)g, (uint8_t)j };
            memcpy(nm + 3, &h, 8);
            int rc = xt_slice_insert(s, nm, 11, h, "r", 1, 0, gen);
            assert_true(rc >= 0);
            if (rndn(2)) {
                uint8_t pn[XT_SYS_PEND_LEN];
                xt_hash_pend_name(nm, 11, pn);
                /* The slice takes the caller's hash: the crafted one. */
                xt_hash_sys_head(pn, XT_SYS_PENDING, h);
                assert_true(xt_slice_insert(s, pn, sizeof pn, h, "p", 1, 0, gen) >= 0);
            }
        }
    }
    /* Listed with a fresh sort, and again with sorted[] kept up to date
     * through changes (a sys row inserted after the first listing). */
    for (int pass = 0; pass < 2; pass++) {
        struct seen *sn = calloc(1, sizeof *sn);
        uint64_t next;
        assert_true(xt_slice_list(s, 0, SIZE_MAX, cb_seen, sn, &next) >= 0);
        assert_int_equal(sn->n, xt_slice_count(s));
        for (size_t i = 1; i < sn->n; i++) {
            assert_true(sn->cookies[i] > sn->cookies[i - 1]);
            bool same = sn->cookies[i] >> XT_COOKIE_SEQ_BITS ==
                        sn->cookies[i - 1] >> XT_COOKIE_SEQ_BITS;
            if (same)
                assert_false(sn->sys[i - 1] && !sn->sys[i]); /* no ordinary after sys */
        }
        free(sn);
        uint8_t d[XT_SYS_HEAD + 8] = { 0 };
        uint64_t h = rnd();
        xt_hash_sys_head(d, XT_SYS_DECISION, h);
        assert_true(xt_slice_insert(s, d, sizeof d, h, "D", 1, 0, gen) >= 0);
    }
    xt_slice_free(s);
}

/* A listing resumed at cookies while system rows with the hashes of
 * listed and unlisted names come and go: every ordinary row exactly once,
 * with the cookie it had before. */
static void test_resume_with_sys_rows(void **state)
{
    (void)state;
    for (int round = 0; round < 40; round++) {
        xt_slice *s = xt_slice_new(0, 0, 4096);
        uint64_t gen = 1;
        enum { NG = 30, K = 5 };
        uint8_t names[NG * K][11];
        uint64_t hs[NG * K];
        int nn = 0;
        for (int g = 0; g < NG; g++) {
            uint64_t base = rnd() & ~UINT64_C(0x1ff);
            int k = 1 + (int)rndn(K);
            for (int j = 0; j < k; j++) {
                uint64_t h = base | rndn(512);
                names[nn][0] = 'f';
                names[nn][1] = (uint8_t)g;
                names[nn][2] = (uint8_t)j;
                memcpy(names[nn] + 3, &h, 8);
                if (xt_slice_insert(s, names[nn], 11, h, "r", 1, XT_SLICE_EXCL, gen) == 0)
                    hs[nn++] = h;
            }
        }
        /* Cookies of the ordinary rows before any system row. */
        struct seen *ref = calloc(1, sizeof *ref);
        uint64_t next;
        assert_int_equal(xt_slice_list(s, 0, SIZE_MAX, cb_seen, ref, &next), nn);
        /* Resume in small chunks; between chunks add or remove pending rows
         * of random names (listed or not). */
        struct seen *got = calloc(1, sizeof *got);
        uint8_t pend[NG * K][XT_SYS_PEND_LEN];
        bool has[NG * K] = { false };
        uint64_t c = 0;
        int guard = 0;
        while (c != XT_COOKIE_END) {
            assert_true(xt_slice_list(s, c, 1 + rndn(4), cb_seen, got, &next) >= 0);
            c = next;
            for (int m = (int)rndn(4); m > 0; m--) {
                int j = (int)rndn((uint32_t)nn);
                if (!has[j]) {
                    xt_hash_pend_name(names[j], 11, pend[j]);
                    xt_hash_sys_head(pend[j], XT_SYS_PENDING, hs[j]);
                    assert_true(xt_slice_insert(s, pend[j], XT_SYS_PEND_LEN, hs[j], "p", 1,
                                                0, gen) >= 0);
                } else {
                    assert_int_equal(xt_slice_delete(s, pend[j], XT_SYS_PEND_LEN, hs[j], gen),
                                     0);
                }
                has[j] = !has[j];
            }
            assert_true(++guard < 10000);
        }
        /* Ordinary rows: exactly ref, same order, same cookies. */
        size_t k = 0;
        for (size_t i = 0; i < got->n; i++) {
            if (got->sys[i])
                continue;
            assert_true(k < ref->n);
            assert_int_equal(got->lens[i], ref->lens[k]);
            assert_memory_equal(got->names[i], ref->names[k], ref->lens[k]);
            assert_true(got->cookies[i] == ref->cookies[k]);
            k++;
        }
        assert_int_equal(k, ref->n);
        free(ref);
        free(got);
        xt_slice_free(s);
    }
}

int main(void)
{
    const char *env = getenv("XT_SEED");
    seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_xt_slice_sys: XT_SEED=%llu\n", (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_sys_count_props, setup_seed),
        cmocka_unit_test_setup(test_sys_rank_last, setup_seed),
        cmocka_unit_test_setup(test_resume_with_sys_rows, setup_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
