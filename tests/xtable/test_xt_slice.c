/*
 * test_xt_slice.c -- property tests of xtable/xt_slice.c against a simple
 * reference model (an array of named records), with crafted hashes for
 * cookie-prefix collisions, split/list interleavings, image truncation and
 * corruption corpora, image + delta replay, and countdown allocation faults.
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
#include <pthread.h>
#include <time.h>

#include "xt_common.h"
#include "xt_hash.h"
#include "xt_slice.h"

static uint64_t seed;
static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}
static uint32_t rndn(uint32_t n) { return (uint32_t)(rnd() % n); }

static int setup_seed(void **state)
{
    (void)state;
    rng_state = seed;
    return 0;
}

/* ---- reference model ------------------------------------------------------ */

#define ROW_MAX 320

typedef struct mrec {
    uint8_t name[XT_NAME_MAX];
    size_t nlen;
    uint64_t hash;
    bool present;
    uint8_t row[ROW_MAX];
    size_t rlen;
    uint64_t gen;
} mrec;

typedef struct model {
    mrec *r;
    size_t n;
    uint32_t live;
} model;

/* n distinct random names (lengths 1..255, any bytes). When `vh_mask` is
 * nonzero, hashes are forced to have (V_h & vh_mask) == vh_val. */
static void model_init(model *m, size_t n)
{
    m->r = calloc(n, sizeof(*m->r));
    assert_non_null(m->r);
    m->n = n;
    m->live = 0;
    for (size_t i = 0; i < n; i++) {
        mrec *x = &m->r[i];
        /* Names of 4+ bytes start with the index (3 bytes): distinct. The
         * first 40 are 1-byte names; a few others are 2-3 random bytes,
         * redrawn while they repeat an earlier short name. */
        if (i < 40) {
            x->nlen = 1;
            x->name[0] = (uint8_t)(0xC0 + i);
        } else if (rndn(64) == 0) {
            for (bool dup = true; dup;) {
                x->nlen = 2 + rndn(2);
                for (size_t k = 0; k < x->nlen; k++)
                    x->name[k] = (uint8_t)rnd();
                dup = false;
                for (size_t j = 0; j < i && !dup; j++)
                    dup = m->r[j].nlen == x->nlen &&
                          memcmp(m->r[j].name, x->name, x->nlen) == 0;
            }
        } else {
            x->nlen = 4 + rndn(XT_NAME_MAX - 3);
            for (size_t k = 0; k < x->nlen; k++)
                x->name[k] = (uint8_t)rnd();
            memcpy(x->name, &i, 3);
        }
        x->hash = xt_hash_name(x->name, x->nlen);
    }
}

static void model_free(model *m) { free(m->r); }

static void rand_row(mrec *x)
{
    /* Mostly small rows; some past the tombstone shrink threshold. */
    x->rlen = rndn(4) == 0 ? 0 : rndn(16) == 0 ? 200 + rndn(ROW_MAX - 199) : rndn(81);
    for (size_t k = 0; k < x->rlen; k++)
        x->row[k] = (uint8_t)rnd();
}

/* Check one record of the model against the slice. */
static void check_rec(const xt_slice *s, const mrec *x)
{
    const void *row;
    size_t len;
    int rc = xt_slice_lookup(s, x->name, x->nlen, x->hash, &row, &len);
    if (!x->present) {
        assert_int_equal(rc, -ENOENT);
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(len, x->rlen);
    if (len)
        assert_memory_equal(row, x->row, len);
}

struct seen {
    const model *m;
    uint32_t n;
};

static int cb_count_known(void *arg, const xt_slice_entry *e)
{
    struct seen *sn = arg;
    assert_false(e->deleted);
    sn->n++;
    return 0;
}

/* Full equality: every model record, count, and foreach total. */
static void check_all(xt_slice *s, const model *m, const mrec *only, size_t n)
{
    uint32_t live = 0;
    for (size_t i = 0; i < n; i++) {
        check_rec(s, &only[i]);
        live += only[i].present;
    }
    assert_int_equal(xt_slice_count(s), live);
    struct seen sn = {m, 0};
    assert_int_equal(xt_slice_foreach(s, cb_count_known, &sn), (int)live);
    assert_int_equal(sn.n, live);
}

/* ---- list checker ------------------------------------------------------- */

struct listed {
    uint64_t *cookies;
    uint64_t *hashes;
    size_t n, cap;
    uint64_t last;
    bool any;
    int stop_after; /* return 1 (stop) when n reaches this, -1 never */
};

static int cb_list(void *arg, const xt_slice_entry *e)
{
    struct listed *l = arg;
    if (l->stop_after >= 0 && l->n == (size_t)l->stop_after)
        return 1;
    assert_true(l->n < l->cap);
    if (l->any)
        assert_true(e->cookie > l->last);
    assert_int_equal(e->cookie >> XT_COOKIE_SEQ_BITS, xt_hash_order(e->hash) >> 9);
    l->last = e->cookie;
    l->any = true;
    l->cookies[l->n] = e->cookie;
    l->hashes[l->n] = xt_hash_bytes(e->name, e->name_len, e->hash);
    l->n++;
    return 0;
}

static void listed_init(struct listed *l, size_t cap)
{
    memset(l, 0, sizeof(*l));
    l->cookies = calloc(cap ? cap : 1, 8);
    l->hashes = calloc(cap ? cap : 1, 8);
    l->cap = cap;
    l->stop_after = -1;
}

static void listed_free(struct listed *l)
{
    free(l->cookies);
    free(l->hashes);
}

/* Every live row exactly once: sort the per-entry identity values listed
 * (name hash ^ stored hash, plus distinct cookies) and compare multisets. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void check_listed_set(struct listed *l, const mrec *r, size_t n)
{
    size_t live = 0;
    uint64_t *want = calloc(n ? n : 1, 8);
    for (size_t i = 0; i < n; i++)
        if (r[i].present)
            want[live++] = xt_hash_bytes(r[i].name, r[i].nlen, r[i].hash);
    assert_int_equal(l->n, live);
    qsort(want, live, 8, cmp_u64);
    qsort(l->hashes, l->n, 8, cmp_u64);
    if (live)
        assert_memory_equal(want, l->hashes, live * 8);
    qsort(l->cookies, l->n, 8, cmp_u64);
    for (size_t i = 1; i < l->n; i++)
        assert_true(l->cookies[i] != l->cookies[i - 1]);
    free(want);
}

/* List a whole slice in chunks of `chunk`. */
static void list_all(xt_slice *s, size_t chunk, struct listed *l)
{
    uint64_t c = 0;
    int guard = 0;
    while (c != XT_COOKIE_END) {
        uint64_t next;
        int got = xt_slice_list(s, c, chunk, cb_list, l, &next);
        assert_true(got >= 0);
        assert_true(next == XT_COOKIE_END || next > c || (got == 0 && next >= c));
        c = next;
        assert_true(++guard < 10000000);
    }
}

/* ---- tests ------------------------------------------------------------- */

/* >= 1M random operations against the model, with periodic full checks. */
static void test_random_vs_model(void **state)
{
    (void)state;
    const struct { size_t names; uint32_t cap; long ops; } rounds[] = {
        {6000, 4096, 700000}, {300, 64, 200000}, {3000, 0, 150000}};
    for (size_t rd = 0; rd < XT_ARRAY_SIZE(rounds); rd++) {
        model m;
        model_init(&m, rounds[rd].names);
        xt_slice *s = xt_slice_new(0, 0, rounds[rd].cap);
        assert_non_null(s);
        uint32_t cap = xt_slice_capacity(s);
        for (long op = 0; op < rounds[rd].ops; op++) {
            mrec *x = &m.r[rndn((uint32_t)m.n)];
            uint64_t gen = (uint64_t)op / 1000 + 1;
            int rc;
            switch (rndn(11)) {
            case 0: case 1: case 2: { /* insert / replace */
                bool excl = rndn(2);
                mrec nx = *x;
                rand_row(&nx);
                rc = xt_slice_insert(s, nx.name, nx.nlen, nx.hash, nx.row, nx.rlen,
                                     excl ? XT_SLICE_EXCL : 0, gen);
                if (x->present && excl) {
                    assert_int_equal(rc, -EEXIST);
                } else if (!x->present && m.live >= cap) {
                    assert_int_equal(rc, -ENOSPC);
                } else {
                    assert_int_equal(rc, x->present ? 1 : 0);
                    m.live += !x->present;
                    *x = nx;
                    x->present = true;
                    x->gen = gen;
                }
                break;
            }
            case 3: { /* update */
                mrec nx = *x;
                rand_row(&nx);
                rc = xt_slice_update(s, nx.name, nx.nlen, nx.hash, nx.row, nx.rlen, gen);
                if (!x->present) {
                    assert_int_equal(rc, -ENOENT);
                } else {
                    assert_int_equal(rc, 0);
                    *x = nx;
                    x->gen = gen;
                }
                break;
            }
            case 4: case 5: /* delete */
                rc = xt_slice_delete(s, x->name, x->nlen, x->hash, gen);
                assert_int_equal(rc, x->present ? 0 : -ENOENT);
                if (x->present) {
                    x->present = false;
                    x->gen = gen;
                    m.live--;
                }
                break;
            case 6: { /* copy-out lookup */
                uint8_t buf[ROW_MAX];
                size_t len = 0;
                size_t bsz = rndn(ROW_MAX + 1);
                rc = xt_slice_get(s, x->name, x->nlen, x->hash, buf, bsz, &len);
                if (!x->present) {
                    assert_int_equal(rc, -ENOENT);
                } else if (bsz < x->rlen) {
                    assert_int_equal(rc, -ERANGE);
                    assert_int_equal(len, x->rlen);
                } else {
                    assert_int_equal(rc, 0);
                    assert_int_equal(len, x->rlen);
                    if (len)
                        assert_memory_equal(buf, x->row, len);
                }
                break;
            }
            case 7: { /* a short listing from the cookie of a random name:
                       * keeps sorted[] valid across later changes */
                struct listed l;
                listed_init(&l, 8);
                uint64_t next;
                int got = xt_slice_list(s, xt_hash_cookie(x->hash, 0), 1 + rndn(8), cb_list,
                                        &l, &next);
                assert_true(got >= 0 && got <= 8);
                if (x->present && got > 0)
                    assert_int_equal(l.cookies[0], xt_hash_cookie(x->hash, 0));
                listed_free(&l);
                break;
            }
            default:
                check_rec(s, x);
                break;
            }
            assert_int_equal(xt_slice_count(s), m.live);
            if (op % 5000 == 4999) {
                struct listed l;
                listed_init(&l, m.n);
                list_all(s, 1 + rndn(5000), &l);
                check_listed_set(&l, m.r, m.n);
                listed_free(&l);
            }
            if (op % 50000 == 49999) {
                check_all(s, &m, m.r, m.n);
                /* Tombstones: exactly the absent names deleted at some gen. */
                int dropped = xt_slice_drop_tombstones(s, gen);
                assert_true(dropped >= 0);
                assert_int_equal(xt_slice_tombstones(s), 0);
                check_all(s, &m, m.r, m.n);
                struct listed l;
                listed_init(&l, m.n);
                list_all(s, 1 + rndn(700), &l);
                check_listed_set(&l, m.r, m.n);
                listed_free(&l);
            }
        }
        check_all(s, &m, m.r, m.n);
        xt_slice_free(s);
        model_free(&m);
    }
}

static void test_exclusive_and_args(void **state)
{
    (void)state;
    xt_slice *s = xt_slice_new(0, 0, 16);
    assert_non_null(s);
    uint64_t h = xt_hash_name("a", 1);
    assert_int_equal(xt_slice_insert(s, "a", 1, h, "x", 1, XT_SLICE_EXCL, 1), 0);
    assert_int_equal(xt_slice_insert(s, "a", 1, h, "y", 1, XT_SLICE_EXCL, 1), -EEXIST);
    assert_int_equal(xt_slice_insert(s, "a", 1, h, "zz", 2, 0, 2), 1);
    uint8_t buf[4];
    size_t len;
    assert_int_equal(xt_slice_get(s, "a", 1, h, buf, sizeof(buf), &len), 0);
    assert_int_equal(len, 2);
    assert_memory_equal(buf, "zz", 2);
    /* Same name, different hash: a different key (the caller owns hashing). */
    assert_int_equal(xt_slice_lookup(s, "a", 1, h ^ 1, (const void **)&buf, &len), -ENOENT);
    /* Names: 1..255 bytes; NUL bytes are fine. */
    char big[XT_NAME_MAX + 1];
    memset(big, 0, sizeof(big));
    assert_int_equal(xt_slice_insert(s, big, 0, h, NULL, 0, 0, 1), -EINVAL);
    assert_int_equal(xt_slice_insert(s, big, XT_NAME_MAX + 1, h, NULL, 0, 0, 1), -EINVAL);
    assert_int_equal(xt_slice_insert(s, big, XT_NAME_MAX, h, NULL, 0, 0, 1), 0);
    /* Delete then exclusive insert revives the tombstone. */
    assert_int_equal(xt_slice_delete(s, "a", 1, h, 3), 0);
    assert_int_equal(xt_slice_delete(s, "a", 1, h, 3), -ENOENT);
    assert_int_equal(xt_slice_update(s, "a", 1, h, "q", 1, 3), -ENOENT);
    assert_int_equal(xt_slice_tombstones(s), 1);
    assert_int_equal(xt_slice_insert(s, "a", 1, h, "w", 1, XT_SLICE_EXCL, 4), 0);
    assert_int_equal(xt_slice_tombstones(s), 0);
    assert_int_equal(xt_slice_count(s), 2);
    assert_int_equal(xt_slice_last_gen(s), 4);
    /* A slice at depth 1 index 1 owns only odd V_h. */
    xt_slice *o = xt_slice_new(1, 1, 0);
    assert_non_null(o);
    uint64_t even = UINT64_C(0x0000000200000005), odd = UINT64_C(0x0000000300000005);
    assert_int_equal(xt_slice_insert(o, "e", 1, even, NULL, 0, 0, 1), -EINVAL);
    assert_int_equal(xt_slice_insert(o, "o", 1, odd, NULL, 0, 0, 1), 0);
    assert_null(xt_slice_new(2, 1, 0));
    assert_null(xt_slice_new(0, 33, 0));
    assert_null(xt_slice_new(0, 0, XT_SLICE_MAX_CAPACITY + 1));
    xt_slice_free(o);
    xt_slice_free(s);
}

static void test_capacity(void **state)
{
    (void)state;
    model m;
    model_init(&m, 300);
    xt_slice *s = xt_slice_new(0, 0, 200);
    for (int i = 0; i < 200; i++)
        assert_int_equal(xt_slice_insert(s, m.r[i].name, m.r[i].nlen, m.r[i].hash, "r", 1,
                                         0, 1), 0);
    uint64_t mods = xt_slice_mod_count(s);
    for (int i = 200; i < 300; i++)
        assert_int_equal(xt_slice_insert(s, m.r[i].name, m.r[i].nlen, m.r[i].hash, "r", 1,
                                         0, 1), -ENOSPC);
    assert_int_equal(xt_slice_mod_count(s), mods); /* failed calls change nothing */
    assert_int_equal(xt_slice_insert(s, m.r[5].name, m.r[5].nlen, m.r[5].hash, "rr", 2, 0,
                                     1), 1); /* replace in a full slice is fine */
    assert_int_equal(xt_slice_delete(s, m.r[5].name, m.r[5].nlen, m.r[5].hash, 2), 0);
    /* The tombstone uses no capacity. */
    assert_int_equal(xt_slice_insert(s, m.r[250].name, m.r[250].nlen, m.r[250].hash, "r",
                                     1, 0, 2), 0);
    assert_int_equal(xt_slice_insert(s, m.r[5].name, m.r[5].nlen, m.r[5].hash, "r", 1, 0,
                                     2), -ENOSPC);
    assert_int_equal(xt_slice_count(s), 200);
    xt_slice_free(s);
    model_free(&m);
}

/* A mini table: slices that split when full. */
struct table {
    xt_slice *sl[4096];
    int n;
};

static xt_slice *table_slice_of_hash(struct table *t, uint64_t h)
{
    xt_slice *best = NULL;
    for (int i = 0; i < t->n; i++)
        if (xt_slice_owns(t->sl[i], h))
            best = best ? (xt_slice_depth(t->sl[i]) > xt_slice_depth(best) ? t->sl[i] : best)
                        : t->sl[i];
    return best;
}

static xt_slice *table_slice_of_cookie(struct table *t, uint64_t c)
{
    for (int i = 0; i < t->n; i++) {
        uint32_t ix = xt_slice_index(t->sl[i]);
        unsigned d = xt_slice_depth(t->sl[i]);
        if (c >= xt_hash_slice_cookie_lo(ix, d) && c < xt_hash_slice_cookie_hi(ix, d))
            return t->sl[i];
    }
    fail_msg("no slice holds cookie %llx", (unsigned long long)c);
    return NULL;
}

static void table_split(struct table *t, xt_slice *s)
{
    uint32_t before = xt_slice_count(s);
    unsigned d = xt_slice_depth(s);
    xt_slice *c = NULL;
    assert_int_equal(xt_slice_split(s, &c), 0);
    assert_int_equal(xt_slice_depth(s), d + 1);
    assert_int_equal(xt_slice_depth(c), d + 1);
    assert_int_equal(xt_slice_index(c), xt_slice_index(s) + (UINT32_C(1) << d));
    assert_int_equal(xt_slice_count(s) + xt_slice_count(c), before);
    assert_true(xt_slice_needs_image(s) && xt_slice_needs_image(c));
    assert_true(t->n < 4096);
    t->sl[t->n++] = c;
}

static int cb_owned(void *arg, const xt_slice_entry *e)
{
    const xt_slice *s = arg;
    assert_true(xt_slice_owns(s, e->hash));
    return 0;
}

/* Crafted hashes: `n` names sharing one 55-bit cookie prefix. */
static void craft_group(mrec *r, size_t n, uint64_t prefix_hash)
{
    for (size_t i = 0; i < n; i++) {
        r[i].nlen = 6;
        r[i].name[0] = 'g';
        for (size_t k = 0, v = i; k < 5; k++, v /= 10)
            r[i].name[5 - k] = (uint8_t)('0' + v % 10);
        /* Low 9 bits vary (few values, so equal full hashes happen too). */
        r[i].hash = (prefix_hash & ~UINT64_C(0x1FF)) | rndn(8);
        r[i].present = false;
    }
}

static void test_split_and_list(void **state)
{
    (void)state;
    model m;
    model_init(&m, 20000);
    /* Add two crafted collision groups of 128 names (the maximum). */
    size_t ncraft = 256;
    m.r = realloc(m.r, (m.n + ncraft + 1) * sizeof(*m.r));
    memset(m.r + m.n, 0, (ncraft + 1) * sizeof(*m.r));
    uint64_t g1 = rnd(), g2 = rnd();
    craft_group(m.r + m.n, 128, g1);
    craft_group(m.r + m.n + 128, 128, g2);
    for (size_t i = 128; i < 256; i++)
        m.r[m.n + i].name[0] = 'h';
    m.n += ncraft;
    struct table t = {.n = 1};
    t.sl[0] = xt_slice_new(0, 0, 512);
    uint64_t gen = 1;
    /* Insert everything; split when full; start a listing midway and
     * continue it across later splits and inserts. */
    struct listed early;
    listed_init(&early, m.n + 256); /* group seqs may shift under it */
    uint64_t early_c = 0;
    for (size_t i = 0; i < m.n; i++) {
        mrec *x = &m.r[i];
        for (;;) {
            xt_slice *s = table_slice_of_hash(&t, x->hash);
            int rc = xt_slice_insert(s, x->name, x->nlen, x->hash, "v", 1, XT_SLICE_EXCL,
                                     gen);
            if (rc == -ENOSPC) {
                table_split(&t, s);
                continue;
            }
            assert_int_equal(rc, 0);
            x->present = true;
            x->row[0] = 'v';
            x->rlen = 1;
            break;
        }
        if (i >= 5000 && early_c != XT_COOKIE_END && rndn(16) == 0) {
            xt_slice *s = table_slice_of_cookie(&t, early_c);
            uint64_t next;
            assert_true(xt_slice_list(s, early_c, 1 + rndn(40), cb_list, &early, &next) >= 0);
            early_c = next == XT_COOKIE_END
                          ? xt_hash_slice_cookie_hi(xt_slice_index(s), xt_slice_depth(s))
                          : next;
        }
    }
    /* One more row in a full group: -EOVERFLOW. */
    {
        mrec extra;
        craft_group(&extra, 1, g1);
        extra.name[0] = 'x';
        xt_slice *s = table_slice_of_hash(&t, extra.hash);
        assert_int_equal(xt_slice_insert(s, extra.name, extra.nlen, extra.hash, NULL, 0, 0, 1),
                         -EOVERFLOW);
    }
    /* Every row is in exactly the slice that owns it, and findable there. */
    uint32_t total = 0;
    for (int i = 0; i < t.n; i++) {
        total += xt_slice_count(t.sl[i]);
        assert_int_equal(xt_slice_foreach(t.sl[i], cb_owned, t.sl[i]),
                         (int)xt_slice_count(t.sl[i]));
    }
    assert_int_equal(total, m.n);
    for (size_t i = 0; i < m.n; i++)
        check_rec(table_slice_of_hash(&t, m.r[i].hash), &m.r[i]);
    /* Finish the early listing with splits in between calls. */
    while (early_c != XT_COOKIE_END) {
        xt_slice *s = table_slice_of_cookie(&t, early_c);
        if (rndn(8) == 0 && xt_slice_depth(s) < 32 && t.n < 4000) {
            table_split(&t, s);
            continue;
        }
        uint64_t next;
        assert_true(xt_slice_list(s, early_c, 1 + rndn(300), cb_list, &early, &next) >= 0);
        early_c = next == XT_COOKIE_END
                      ? xt_hash_slice_cookie_hi(xt_slice_index(s), xt_slice_depth(s))
                      : next;
    }
    /* The early listing started at cookie 0 while rows were still being
     * added: it saw a subset of the final rows, each once, increasing. A
     * fresh full listing sees all. */
    struct listed full;
    listed_init(&full, m.n);
    uint64_t c = 0;
    while (c != XT_COOKIE_END) {
        xt_slice *s = table_slice_of_cookie(&t, c);
        uint64_t next;
        full.stop_after = rndn(4) == 0 ? (int)(full.n + rndn(5)) : -1;
        assert_true(xt_slice_list(s, c, 1 + rndn(1000), cb_list, &full, &next) >= 0);
        c = next == XT_COOKIE_END
                ? xt_hash_slice_cookie_hi(xt_slice_index(s), xt_slice_depth(s))
                : next;
    }
    check_listed_set(&full, m.r, m.n);
    /* The crafted group's cookies are seq 0..127 of one prefix. */
    uint64_t p1 = xt_hash_cookie(g1, 0);
    int in_group = 0;
    for (size_t i = 0; i < full.n; i++)
        if (full.cookies[i] >> XT_COOKIE_SEQ_BITS == p1 >> XT_COOKIE_SEQ_BITS) {
            assert_int_equal(full.cookies[i] & XT_COOKIE_SEQ_MAX, in_group);
            in_group++;
        }
    assert_int_equal(in_group, 128);
    /* Resuming inside the group from every seq returns the rest of it. */
    xt_slice *gs = table_slice_of_hash(&t, g1);
    for (unsigned q = 0; q < 128; q += 1 + rndn(9)) {
        struct listed l;
        listed_init(&l, m.n);
        uint64_t next;
        assert_int_equal(xt_slice_list(gs, p1 | q, 128 - q, cb_list, &l, &next),
                         (int)(128 - q));
        assert_int_equal(l.cookies[0], p1 | q);
        assert_true(next > (p1 | 127));
        listed_free(&l);
    }
    /* Splitting past depth 32 is refused. */
    xt_slice *deep = xt_slice_new(0, 32, 4);
    xt_slice *child = NULL;
    assert_int_equal(xt_slice_split(deep, &child), -ERANGE);
    xt_slice_free(deep);
    listed_free(&early);
    listed_free(&full);
    for (int i = 0; i < t.n; i++)
        xt_slice_free(t.sl[i]);
    model_free(&m);
}

/* ---- images ---------------------------------------------------------- */

struct cmp_ctx {
    const xt_slice *other;
    int n;
};

static int cb_same(void *arg, const xt_slice_entry *e)
{
    struct cmp_ctx *c = arg;
    const void *row;
    size_t len;
    assert_int_equal(xt_slice_lookup(c->other, e->name, e->name_len, e->hash, &row, &len), 0);
    assert_int_equal(len, e->row_len);
    if (len)
        assert_memory_equal(row, e->row, len);
    c->n++;
    return 0;
}

/* Same live rows (and for images the same gens: checked via collect). */
static void assert_same(const xt_slice *a, const xt_slice *b)
{
    assert_int_equal(xt_slice_count(a), xt_slice_count(b));
    struct cmp_ctx c = {b, 0};
    assert_int_equal(xt_slice_foreach(a, cb_same, &c), (int)xt_slice_count(a));
}

static xt_slice *random_slice(model *m, uint32_t index, unsigned depth, size_t n)
{
    xt_slice *s = xt_slice_new(index, depth, 0);
    assert_non_null(s);
    for (size_t i = 0; i < m->n && xt_slice_count(s) < n; i++) {
        mrec *x = &m->r[i];
        if (!xt_slice_owns(s, x->hash))
            continue;
        rand_row(x);
        x->gen = 1 + rndn(9);
        assert_int_equal(xt_slice_insert(s, x->name, x->nlen, x->hash, x->row, x->rlen, 0,
                                         x->gen), 0);
        x->present = true;
    }
    return s;
}

static uint64_t sum_of(const uint8_t *b, size_t len)
{
    return xt_hash_bytes(b, len, UINT64_C(0x536c696365763031)); /* docs/format-slice.md */
}

static void test_image_roundtrip_and_corruption(void **state)
{
    (void)state;
    model m;
    model_init(&m, 2000);
    xt_slice *s = random_slice(&m, 1, 2, 300);
    for (size_t i = 0; i < m.n; i++) /* one tombstone: not in the image */
        if (m.r[i].present) {
            assert_int_equal(xt_slice_delete(s, m.r[i].name, m.r[i].nlen, m.r[i].hash, 12), 0);
            m.r[i].present = false;
            break;
        }
    assert_int_equal(xt_slice_tombstones(s), 1);
    uint8_t *img;
    size_t len;
    assert_int_equal(xt_slice_encode(s, &img, &len), 0);
    xt_slice *d = NULL;
    assert_int_equal(xt_slice_decode(img, len, &d), 0);
    assert_same(s, d);
    assert_same(d, s);
    assert_int_equal(xt_slice_index(d), 1);
    assert_int_equal(xt_slice_depth(d), 2);
    assert_int_equal(xt_slice_capacity(d), xt_slice_capacity(s));
    assert_int_equal(xt_slice_last_gen(d), xt_slice_last_gen(s));
    assert_int_equal(xt_slice_tombstones(d), 0);
    assert_false(xt_slice_needs_image(d));
    /* Re-encoding the decoded slice gives an image that decodes the same. */
    uint8_t *img2;
    size_t len2;
    assert_int_equal(xt_slice_encode(d, &img2, &len2), 0);
    assert_int_equal(len2, len);
    xt_free(img2);
    xt_slice_free(d);

    /* Every truncation is rejected. */
    for (size_t cut = 0; cut < len; cut++) {
        uint8_t *t = malloc(cut ? cut : 1); /* exact size: ASan sees overreads */
        memcpy(t, img, cut);
        d = NULL;
        assert_int_equal(xt_slice_decode(t, cut, &d), -EBADMSG);
        assert_null(d);
        free(t);
    }
    /* Random corruption is rejected (checksum). */
    uint8_t *c = malloc(len);
    for (int k = 0; k < 3000; k++) {
        memcpy(c, img, len);
        int flips = 1 + rndn(3);
        for (int f = 0; f < flips; f++)
            c[rndn((uint32_t)len)] ^= (uint8_t)(1 + rndn(255));
        assert_int_equal(xt_slice_decode(c, len, &d), -EBADMSG);
    }
    /* Corruption with a recomputed checksum exercises structural checks:
     * decode either rejects it or yields a consistent slice, never reads
     * out of bounds (ASan) and never accepts a row the slice does not own. */
    int rejected = 0;
    for (int k = 0; k < 3000; k++) {
        memcpy(c, img, len);
        size_t at = rndn(k % 2 ? 64 : (uint32_t)len - 8);
        c[at] ^= (uint8_t)(1 + rndn(255));
        xt_put_u64(c + len - 8, sum_of(c, len - 8));
        d = NULL;
        int rc = xt_slice_decode(c, len, &d);
        if (rc == 0) {
            assert_int_equal(xt_slice_foreach(d, cb_owned, d), (int)xt_slice_count(d));
            xt_slice_free(d);
        } else {
            assert_int_equal(rc, -EBADMSG);
            rejected++;
        }
    }
    assert_true(rejected > 0);
    /* Targeted structural damage, checksum fixed. */
    struct { size_t off; uint8_t val; } bad[] = {
        {6, 33},  /* depth > 32 */
        {8, 4},   /* index >= 2^depth */
        {7, 1},   /* reserved byte */
        {12, 0},  /* count too small: trailing bytes */
        {40, 2},  /* image record kind delete */
        {40 + 21, 0}, /* name_len 0 */
        {40 + 20, 0x7f}, /* row_len huge */
    };
    for (size_t k = 0; k < XT_ARRAY_SIZE(bad); k++) {
        memcpy(c, img, len);
        c[bad[k].off] = bad[k].val;
        xt_put_u64(c + len - 8, sum_of(c, len - 8));
        assert_int_equal(xt_slice_decode(c, len, &d), -EBADMSG);
    }
    free(c);
    xt_free(img);
    /* Empty slice round trip. */
    xt_slice *e = xt_slice_new(0, 0, 7);
    assert_int_equal(xt_slice_encode(e, &img, &len), 0);
    assert_int_equal(xt_slice_decode(img, len, &d), 0);
    assert_int_equal(xt_slice_count(d), 0);
    assert_int_equal(xt_slice_capacity(d), 7);
    xt_free(img);
    xt_slice_free(d);
    xt_slice_free(e);
    xt_slice_free(s);
    model_free(&m);
}

/* ---- deltas ------------------------------------------------------------ */

static int cb_gen_le(void *arg, const xt_slice_entry *e)
{
    assert_true(e->gen <= *(uint64_t *)arg);
    return 0;
}

static void test_image_plus_deltas(void **state)
{
    (void)state;
    model m;
    model_init(&m, 1500);
    for (int round = 0; round < 20; round++) {
        for (size_t i = 0; i < m.n; i++)
            m.r[i].present = false;
        xt_slice *s = random_slice(&m, 0, 0, 400);
        uint8_t *img;
        size_t len;
        assert_int_equal(xt_slice_encode(s, &img, &len), 0);
        uint64_t committed = xt_slice_last_gen(s);
        assert_int_equal(xt_slice_drop_tombstones(s, committed), 0);
        xt_slice_clear_needs_image(s);
        uint8_t *deltas[41];
        size_t dlen[41];
        int nd = 0;
        for (uint64_t g = committed + 1; g < committed + 1 + 30; g++) {
            int ops = rndn(60);
            for (int k = 0; k < ops; k++) {
                mrec *x = &m.r[rndn(600)];
                if (rndn(3) == 0) {
                    int rc = xt_slice_delete(s, x->name, x->nlen, x->hash, g);
                    assert_int_equal(rc, x->present ? 0 : -ENOENT);
                    x->present = false;
                } else {
                    rand_row(x);
                    assert_true(xt_slice_insert(s, x->name, x->nlen, x->hash, x->row,
                                                x->rlen, 0, g) >= 0);
                    x->present = true;
                }
            }
            if (rndn(3) == 0 && nd < 40) { /* this group commits: take a delta */
                assert_int_equal(xt_slice_encode_delta(s, committed, &deltas[nd], &dlen[nd]),
                                 0);
                nd++;
                committed = g;
                assert_int_equal(xt_slice_collect_changes(s, g, cb_gen_le, &g), 0);
                xt_slice_drop_tombstones(s, committed);
                assert_int_equal(xt_slice_tombstones(s), 0);
            }
        }
        /* Final delta of anything still uncommitted. */
        assert_int_equal(xt_slice_encode_delta(s, committed, &deltas[nd], &dlen[nd]), 0);
        nd++;
        xt_slice *r = NULL;
        assert_int_equal(xt_slice_decode(img, len, &r), 0);
        for (int k = 0; k < nd; k++) {
            /* A corrupt or foreign delta is refused and changes nothing. */
            if (k == 0 && dlen[k] > 48) {
                uint8_t *bad = malloc(dlen[k]);
                memcpy(bad, deltas[k], dlen[k]);
                bad[40 + rndn((uint32_t)dlen[k] - 48)] ^= 0x10;
                uint64_t mods = xt_slice_mod_count(r);
                assert_int_equal(xt_slice_apply_delta(r, bad, dlen[k]), -EBADMSG);
                for (size_t cut = 0; cut < dlen[k]; cut += 1 + rndn(7))
                    assert_int_equal(xt_slice_apply_delta(r, deltas[k], cut), -EBADMSG);
                assert_int_equal(xt_slice_mod_count(r), mods);
                free(bad);
                xt_slice *other = xt_slice_new(1, 1, 0);
                assert_int_equal(xt_slice_apply_delta(other, deltas[k], dlen[k]), -EINVAL);
                xt_slice_free(other);
            }
            assert_int_equal(xt_slice_apply_delta(r, deltas[k], dlen[k]), 0);
            xt_free(deltas[k]);
        }
        assert_same(s, r);
        assert_same(r, s);
        for (size_t i = 0; i < 600; i++)
            check_rec(r, &m.r[i]);
        assert_int_equal(xt_slice_last_gen(r), xt_slice_last_gen(s));
        xt_free(img);
        xt_slice_free(r);
        xt_slice_free(s);
    }
    model_free(&m);
}

/* ---- allocation failure countdown ----------------------------------------- */

static int cb_nop(void *arg, const xt_slice_entry *e)
{
    (void)arg;
    (void)e;
    return 0;
}

/* One scenario; every -ENOMEM must leave the slice equal to the model. */
static long scenario(model *m, long countdown)
{
    bool failed = false;
    xt_alloc_fail_after(countdown);
    xt_slice *s = xt_slice_new(0, 0, 256);
    xt_slice *c = NULL, *d = NULL;
    uint8_t *img = NULL, *del = NULL;
    size_t len, dl;
    if (!s) {
        failed = true;
        goto out;
    }
    for (size_t i = 0; i < m->n; i++)
        m->r[i].present = false;
    for (size_t i = 0; i < 200; i++) {
        mrec *x = &m->r[i];
        int rc = xt_slice_insert(s, x->name, x->nlen, x->hash, "row", 3, 0, 1);
        if (rc == -ENOMEM) {
            failed = true;
            continue;
        }
        assert_int_equal(rc, 0);
        x->present = true;
        memcpy(x->row, "row", 3);
        x->rlen = 3;
    }
    for (size_t i = 0; i < 200; i += 3) {
        mrec *x = &m->r[i];
        int rc = xt_slice_insert(s, x->name, x->nlen, x->hash, "replaced", 8, 0, 2);
        if (rc == -ENOMEM) {
            failed = true;
            continue;
        }
        assert_int_equal(rc, x->present ? 1 : 0);
        x->present = true;
        memcpy(x->row, "replaced", 8);
        x->rlen = 8;
    }
    for (size_t i = 1; i < 200; i += 5) {
        mrec *x = &m->r[i];
        assert_int_equal(xt_slice_delete(s, x->name, x->nlen, x->hash, 3),
                         x->present ? 0 : -ENOENT);
        x->present = false;
    }
    check_all(s, m, m->r, 200);
    uint64_t next;
    int rc = xt_slice_list(s, 0, 1000, cb_nop, NULL, &next);
    if (rc == -ENOMEM)
        failed = true;
    else
        assert_int_equal(rc, (int)xt_slice_count(s));
    if (xt_slice_encode(s, &img, &len) == -ENOMEM) {
        failed = true;
    } else {
        rc = xt_slice_decode(img, len, &d);
        if (rc == -ENOMEM)
            failed = true;
        else
            assert_int_equal(rc, 0);
    }
    if (xt_slice_encode_delta(s, 2, &del, &dl) == -ENOMEM) {
        failed = true;
    } else if (d) {
        rc = xt_slice_apply_delta(d, del, dl);
        if (rc == -ENOMEM)
            failed = true; /* d is partial now: discard, as documented */
        else
            assert_int_equal(rc, 0);
    }
    uint32_t before = xt_slice_count(s);
    rc = xt_slice_split(s, &c);
    if (rc == -ENOMEM) {
        failed = true;
        assert_null(c);
        assert_int_equal(xt_slice_depth(s), 0);
        check_all(s, m, m->r, 200);
    } else {
        assert_int_equal(rc, 0);
        assert_int_equal(xt_slice_count(s) + xt_slice_count(c), before);
    }
out:;
    long nfail = xt_alloc_fail_after(-1);
    /* A failed allocation is reported by some call, except the tombstone
     * shrink of a delete, which keeps the larger block instead. */
    assert_true(failed || nfail == 0 || !s || xt_slice_tombstones(s) > 0);
    xt_free(img);
    xt_free(del);
    xt_slice_free(d);
    xt_slice_free(c);
    xt_slice_free(s);
    return nfail;
}

static void test_alloc_failure(void **state)
{
    (void)state;
    model m;
    model_init(&m, 200);
    long n = 0;
    while (scenario(&m, n) > 0)
        n++;
    assert_true(n > 200); /* every allocation point was failed once */
    print_message("alloc countdown: %ld failure points\n", n);
    model_free(&m);
}

/* ---- concurrency (meaningful under -fsanitize=thread) ------------------- */

struct conc {
    xt_slice *s;
    model *m;
    int stop;
    pthread_mutex_t mu;
};

static int cb_conc(void *arg, const xt_slice_entry *e)
{
    uint64_t *last = arg;
    if (*last != UINT64_MAX && e->cookie <= *last)
        return -EILSEQ;
    *last = e->cookie;
    return 0;
}

static void *reader(void *arg)
{
    struct conc *c = arg;
    uint64_t r = (uint64_t)(uintptr_t)&r;
    for (long i = 0;; i++) {
        pthread_mutex_lock(&c->mu);
        int stop = c->stop;
        pthread_mutex_unlock(&c->mu);
        if (stop)
            break;
        r = r * 6364136223846793005u + 1442695040888963407u;
        const mrec *x = &c->m->r[(r >> 33) % c->m->n];
        xt_slice_rdlock(c->s);
        if (i % 64 == 0) {
            uint64_t last = UINT64_MAX, next;
            int got = xt_slice_list(c->s, 0, 200, cb_conc, &last, &next);
            xt_slice_unlock(c->s);
            if (got < 0)
                return (void *)1;
            continue;
        }
        const void *row;
        size_t len;
        int rc = xt_slice_lookup(c->s, x->name, x->nlen, x->hash, &row, &len);
        /* The writer only ever stores rows equal to the name's first byte. */
        bool bad = rc == 0 && len > 0 && *(const uint8_t *)row != x->name[0];
        xt_slice_unlock(c->s);
        if (bad || (rc != 0 && rc != -ENOENT))
            return (void *)1;
    }
    return NULL;
}

static void test_concurrent_readers(void **state)
{
    (void)state;
    model m;
    model_init(&m, 3000);
    struct conc c = {.s = xt_slice_new(0, 0, 0), .m = &m};
    pthread_mutex_init(&c.mu, NULL);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, reader, &c), 0);
    for (int op = 0; op < 40000; op++) {
        mrec *x = &m.r[rndn((uint32_t)m.n)];
        xt_slice_wrlock(c.s);
        if (rndn(3) == 0)
            xt_slice_delete(c.s, x->name, x->nlen, x->hash, 1);
        else
            assert_true(xt_slice_insert(c.s, x->name, x->nlen, x->hash, x->name, 1 + rndn(9),
                                        0, 1) >= 0);
        if (op % 1000 == 999)
            xt_slice_drop_tombstones(c.s, 1);
        xt_slice_unlock(c.s);
    }
    pthread_mutex_lock(&c.mu);
    c.stop = 1;
    pthread_mutex_unlock(&c.mu);
    for (int i = 0; i < 2; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        assert_null(ret);
    }
    pthread_mutex_destroy(&c.mu);
    xt_slice_free(c.s);
    model_free(&m);
}

int main(void)
{
    const char *env = getenv("XT_SEED");
    seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_xt_slice: XT_SEED=%llu\n", (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_exclusive_and_args, setup_seed),
        cmocka_unit_test_setup(test_capacity, setup_seed),
        cmocka_unit_test_setup(test_random_vs_model, setup_seed),
        cmocka_unit_test_setup(test_split_and_list, setup_seed),
        cmocka_unit_test_setup(test_image_roundtrip_and_corruption, setup_seed),
        cmocka_unit_test_setup(test_image_plus_deltas, setup_seed),
        cmocka_unit_test_setup(test_alloc_failure, setup_seed),
        cmocka_unit_test_setup(test_concurrent_readers, setup_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
