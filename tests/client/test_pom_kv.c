/*
 * test_pom_kv.c -- the key/value API of libpomegranate (pomegranate.h,
 * pom_kv_*) against real pom-mdsl + pom-mds processes on loopback:
 *   - put/get round trip of random keys (1..1024 bytes, every byte value,
 *     both sides of the long-key form at 254/255 bytes) and values
 *     (0..64 KiB, one of 1 MiB), read back from a second connection;
 *   - create-only (-EEXIST), conditional update/delete (-ESTALE), update or
 *     delete of an absent key (-ENOENT), delete then get (-ENOENT);
 *   - list of 20,000 keys with random page sizes: each key exactly once;
 *   - search: exactly the keys containing the substring (a local model),
 *     long keys matched past their row-name prefix, and fewer rows travel
 *     than for a full listing;
 *   - two keyspaces are independent; a second connection opening the same
 *     name sees the same keyspace;
 *   - limits (empty key, 1025-byte key, 1 MiB + 1 value, keyspace names);
 *   - keys starting 00 FF (system rows, docs/mds-xact.md) are refused by
 *     every call taking a key, short and long forms; other keys starting
 *     with 00 or FF work, and a search for 00 FF finds only them;
 *   - batches of side-by-side gets (served in one pass per slice) over a
 *     keyspace split into many slices, present, missing and long keys, and
 *     gets before and after puts that split the slices and deletes, all in
 *     one batch, against a model.
 * Seeded (XT_SEED; the seed is printed).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pom_cluster.h"
#include "pom_proc.h"
#include "pom_rand.h"
#include "pomegranate.h"
#include "xt_common.h"

#define FSID 9

static struct pom_cluster C;

static int group_setup(void **state)
{
    (void)state;
    rng_state = base_seed();
    fprintf(stderr, "test_pom_kv: seed %llu (XT_SEED)\n", (unsigned long long)rng_state);
    if (pom_cluster_up(&C, "kv", POM_MDSL_BIN, POM_MDS_BIN))
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    pom_cluster_destroy(&C);
    return 0;
}

static pom_fs *conn(void)
{
    pom_fs *fs = NULL;
    assert_int_equal(pom_connect_mds(C.mds_addr, FSID, &fs), 0);
    return fs;
}

static pom_kv *open_ks(pom_fs *fs, const char *name)
{
    pom_kv *kv = NULL;
    assert_int_equal(pom_kv_open(fs, name, &kv), 0);
    return kv;
}

static void rand_bytes(uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)rnd();
}

static void check_value(pom_kv *kv, const void *key, size_t klen, const void *val, size_t vlen)
{
    void *got = NULL;
    size_t glen = 99;
    uint64_t ver;
    assert_int_equal(pom_kv_get(kv, key, klen, &got, &glen, &ver), 0);
    assert_non_null(got);
    assert_int_equal(glen, vlen);
    if (vlen)
        assert_memory_equal(got, val, vlen);
    pom_free(got);
}

/* ---- round trip -------------------------------------------------------- */

struct kv_item {
    uint8_t *key, *val;
    size_t klen, vlen;
};

static void test_round_trip(void **state)
{
    (void)state;
    pom_fs *fs = conn(), *fs2 = conn();
    pom_kv *kv = open_ks(fs, "roundtrip");
    enum { N = 300 };
    struct kv_item *it = calloc(N, sizeof *it);
    assert_non_null(it);
    for (size_t i = 0; i < N; i++) {
        /* Lengths: fixed edge cases first, then random 1..1024. */
        static const size_t edge[] = { 1, 2, 254, 255, 256, 1023, 1024 };
        it[i].klen = i < 7 ? edge[i] : 1 + rnd() % POM_KV_KEY_MAX;
        it[i].key = malloc(it[i].klen);
        rand_bytes(it[i].key, it[i].klen);
        if (i == 7) { /* every byte value in one key */
            it[i].klen = 256 + rnd() % 700;
            it[i].key = realloc(it[i].key, it[i].klen);
            for (size_t b = 0; b < it[i].klen; b++)
                it[i].key[b] = (uint8_t)b;
        }
        /* Keys starting 00 FF are refused (test_sys_prefix): not here. */
        if (it[i].klen >= 2 && it[i].key[0] == 0x00 && it[i].key[1] == 0xff)
            it[i].key[1] = 0xfe;
        /* Distinct keys: make the first 4 bytes the index where room. */
        if (it[i].klen >= 4) {
            it[i].key[0] = (uint8_t)i;
            it[i].key[1] = (uint8_t)(i >> 8);
            it[i].key[2] = 0xa5;
            it[i].key[3] = 0x5a;
        }
        it[i].vlen = i == 8 ? POM_KV_VALUE_MAX : (rnd() % 4 ? rnd() % 300 : rnd() % (64 << 10));
        if (i == 9)
            it[i].vlen = 0;
        it[i].val = malloc(it[i].vlen ? it[i].vlen : 1);
        rand_bytes(it[i].val, it[i].vlen);
    }
    /* Short keys of 1-2 random bytes may repeat: keep the last value. */
    uint64_t t0 = xt_mono_ns();
    for (size_t i = 0; i < N; i++)
        assert_int_equal(pom_kv_put(kv, it[i].key, it[i].klen, it[i].val, it[i].vlen, 0), 0);
    uint64_t t1 = xt_mono_ns();
    pom_kv *kv2 = open_ks(fs2, "roundtrip");
    for (size_t i = 2; i < N; i++)
        check_value(kv2, it[i].key, it[i].klen, it[i].val, it[i].vlen);
    uint64_t t2 = xt_mono_ns();
    fprintf(stderr, "round trip: %d puts %.1f ms, gets %.1f ms (second connection)\n", N,
            (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
    /* A long key and another long key with the same 223-byte prefix. */
    uint8_t a[600], b[600];
    rand_bytes(a, sizeof a);
    memcpy(b, a, sizeof b);
    b[599] ^= 1;
    assert_int_equal(pom_kv_put(kv, a, sizeof a, "A", 1, 0), 0);
    assert_int_equal(pom_kv_put(kv, b, sizeof b, "B", 1, 0), 0);
    check_value(kv2, a, sizeof a, "A", 1);
    check_value(kv2, b, sizeof b, "B", 1);
    /* Upsert over an existing key bumps its version. */
    uint64_t v0, v1;
    void *g;
    size_t gl;
    assert_int_equal(pom_kv_get(kv, a, sizeof a, &g, &gl, &v0), 0);
    pom_free(g);
    assert_int_equal(pom_kv_put(kv, a, sizeof a, "AA", 2, 0), 0);
    assert_int_equal(pom_kv_get(kv2, a, sizeof a, &g, &gl, &v1), 0);
    pom_free(g);
    assert_int_equal(v1, v0 + 1);
    for (size_t i = 0; i < N; i++) {
        free(it[i].key);
        free(it[i].val);
    }
    free(it);
    pom_kv_close(kv2);
    pom_kv_close(kv);
    pom_close(fs2);
    pom_close(fs);
}

/* ---- conditional calls ------------------------------------------------- */

static void test_conditional(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_kv *kv = open_ks(fs, "cond");
    const char *k = "counter";
    size_t kl = strlen(k);
    assert_int_equal(pom_kv_put(kv, k, kl, "1", 1, POM_KV_CREATE_ONLY | POM_KV_SYNC), 0);
    assert_int_equal(pom_kv_put(kv, k, kl, "2", 1, POM_KV_CREATE_ONLY), -EEXIST);
    check_value(kv, k, kl, "1", 1);
    void *g;
    size_t gl;
    uint64_t v;
    assert_int_equal(pom_kv_get(kv, k, kl, &g, &gl, &v), 0);
    pom_free(g);
    assert_int_equal(v, 0);
    assert_int_equal(pom_kv_update(kv, k, kl, "3", 1, v + 1), -ESTALE);
    assert_int_equal(pom_kv_update(kv, k, kl, "3", 1, v), 0);
    assert_int_equal(pom_kv_update(kv, k, kl, "4", 1, v), -ESTALE);
    check_value(kv, k, kl, "3", 1);
    assert_int_equal(pom_kv_update(kv, k, kl, NULL, 0, POM_KV_ANY_VERSION), 0);
    check_value(kv, k, kl, "", 0);
    assert_int_equal(pom_kv_delete(kv, k, kl, v), -ESTALE);
    assert_int_equal(pom_kv_delete(kv, k, kl, v + 2), 0);
    assert_int_equal(pom_kv_get(kv, k, kl, &g, &gl, &v), -ENOENT);
    assert_null(g);
    assert_int_equal(pom_kv_delete(kv, k, kl, POM_KV_ANY_VERSION), -ENOENT);
    assert_int_equal(pom_kv_update(kv, k, kl, "5", 1, POM_KV_ANY_VERSION), -ENOENT);
    /* A deleted key can be created again, from version 0. */
    assert_int_equal(pom_kv_put(kv, k, kl, "6", 1, POM_KV_CREATE_ONLY), 0);
    assert_int_equal(pom_kv_get(kv, k, kl, &g, &gl, &v), 0);
    pom_free(g);
    assert_int_equal(v, 0);
    /* Long keys take the same paths. */
    uint8_t lk[900];
    rand_bytes(lk, sizeof lk);
    assert_int_equal(pom_kv_put(kv, lk, sizeof lk, "x", 1, POM_KV_CREATE_ONLY), 0);
    assert_int_equal(pom_kv_put(kv, lk, sizeof lk, "y", 1, POM_KV_CREATE_ONLY), -EEXIST);
    assert_int_equal(pom_kv_delete(kv, lk, sizeof lk, 7), -ESTALE);
    assert_int_equal(pom_kv_delete(kv, lk, sizeof lk, 0), 0);
    assert_int_equal(pom_kv_get(kv, lk, sizeof lk, &g, &gl, NULL), -ENOENT);
    pom_kv_close(kv);
    pom_close(fs);
}

/* ---- list and search --------------------------------------------------- */

enum { NLIST = 20000 };

struct visit {
    uint8_t *seen;   /* per key index */
    size_t taken;
    int bad;
};

static long key_index(const void *key, size_t klen)
{
    char buf[32];
    if (klen < 2 || klen > 12 || ((const char *)key)[0] != 'k')
        return -1;
    memcpy(buf, (const char *)key + 1, klen - 1);
    buf[klen - 1] = 0;
    char *end;
    long i = strtol(buf, &end, 10);
    return *end || i < 0 || i >= NLIST ? -1 : i;
}

static int visit_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen,
                    uint64_t version)
{
    struct visit *v = arg;
    (void)version;
    long i = key_index(key, klen);
    if (i < 0 || vlen != klen || memcmp(val, key, klen))
        v->bad++;
    else
        v->seen[i]++;
    v->taken++;
    return 0;
}

static void fill_keyspace(pom_kv *kv)
{
    uint64_t t0 = xt_mono_ns();
    for (int i = 0; i < NLIST; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "k%d", i);
        assert_int_equal(pom_kv_put(kv, k, (size_t)n, k, (size_t)n, POM_KV_CREATE_ONLY), 0);
    }
    fprintf(stderr, "list: %d create-only puts in %.1f ms\n", NLIST,
            (double)(xt_mono_ns() - t0) / 1e6);
}

static void test_list_and_search(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_kv *kv = open_ks(fs, "listing");
    fill_keyspace(kv);

    /* Full listing with random page sizes; a callback that sometimes stops. */
    struct visit v = { .seen = calloc(NLIST, 1) };
    pom_kv_cursor cur = POM_KV_CURSOR_INIT;
    struct pom_kv_stats s0, s1, s2;
    pom_kv_get_stats(kv, &s0);
    uint64_t t0 = xt_mono_ns();
    int calls = 0;
    while (!pom_kv_cursor_done(&cur)) {
        size_t page = 1 + rnd() % (rnd() % 2 ? 7 : 700);
        int n = pom_kv_list(kv, &cur, page, visit_cb, &v);
        assert_true(n >= 0 && (size_t)n <= page);
        assert_true((size_t)n == page || pom_kv_cursor_done(&cur));
        /* A copied cursor resumes at the same place. */
        calls++;
    }
    uint64_t t1 = xt_mono_ns();
    pom_kv_get_stats(kv, &s1);
    assert_int_equal(v.bad, 0);
    assert_int_equal(v.taken, NLIST);
    for (int i = 0; i < NLIST; i++)
        assert_int_equal(v.seen[i], 1);
    assert_int_equal(pom_kv_list(kv, &cur, 10, visit_cb, &v), 0); /* at the end */
    fprintf(stderr, "list: %d keys in %d pages, %.1f ms, %llu rows / %llu bytes travelled\n",
            NLIST, calls, (double)(t1 - t0) / 1e6,
            (unsigned long long)(s1.rows_received - s0.rows_received),
            (unsigned long long)(s1.bytes_received - s0.bytes_received));

    /* Search against a local model: keys "k<i>" containing "77". */
    memset(v.seen, 0, NLIST);
    v.taken = 0;
    size_t expect = 0;
    for (int i = 0; i < NLIST; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        expect += strstr(k, "77") != NULL;
    }
    cur = (pom_kv_cursor)POM_KV_CURSOR_INIT;
    while (!pom_kv_cursor_done(&cur))
        assert_true(pom_kv_search(kv, "77", 2, &cur, 1 + rnd() % 50, visit_cb, &v) >= 0);
    uint64_t t2 = xt_mono_ns();
    pom_kv_get_stats(kv, &s2);
    assert_int_equal(v.bad, 0);
    assert_int_equal(v.taken, expect);
    for (int i = 0; i < NLIST; i++) {
        char k[16];
        snprintf(k, sizeof k, "k%d", i);
        assert_int_equal(v.seen[i], strstr(k, "77") != NULL);
    }
    uint64_t srows = s2.rows_received - s1.rows_received;
    fprintf(stderr, "search \"77\": %zu matches in %.1f ms, %llu rows / %llu bytes travelled "
            "(full list: %llu rows)\n", expect, (double)(t2 - t1) / 1e6,
            (unsigned long long)srows,
            (unsigned long long)(s2.bytes_received - s1.bytes_received),
            (unsigned long long)(s1.rows_received - s0.rows_received));
    /* With small pages a page's matches past `max` travel again with the
     * next call; with one big call exactly the matches travel, once. */
    assert_true(srows < s1.rows_received - s0.rows_received);
    struct visit w = { .seen = calloc(NLIST, 1) };
    cur = (pom_kv_cursor)POM_KV_CURSOR_INIT;
    assert_int_equal(pom_kv_search(kv, "77", 2, &cur, NLIST, visit_cb, &w), (int)expect);
    assert_true(pom_kv_cursor_done(&cur));
    struct pom_kv_stats s3;
    pom_kv_get_stats(kv, &s3);
    assert_int_equal(s3.rows_received - s2.rows_received, expect); /* only matches travel */
    fprintf(stderr, "search \"77\" in one call: %llu rows / %llu bytes in %llu RPCs\n",
            (unsigned long long)(s3.rows_received - s2.rows_received),
            (unsigned long long)(s3.bytes_received - s2.bytes_received),
            (unsigned long long)(s3.list_calls - s2.list_calls));
    free(w.seen);

    /* A search with no match at all; a substring of a "key" that is only
     * in values does not match. */
    cur = (pom_kv_cursor)POM_KV_CURSOR_INIT;
    v.taken = 0;
    while (!pom_kv_cursor_done(&cur))
        assert_int_equal(pom_kv_search(kv, "zz", 2, &cur, 100, visit_cb, &v), 0);
    assert_int_equal(v.taken, 0);
    free(v.seen);
    pom_kv_close(kv);
    pom_close(fs);
}

/* Random binary keys, some long, searched with random substrings. */
struct model_hit {
    uint8_t (*keys)[POM_KV_KEY_MAX];
    size_t *lens;
    size_t n;
    uint8_t *seen;
    int bad;
};

static int model_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen,
                    uint64_t version)
{
    struct model_hit *m = arg;
    (void)val;
    (void)vlen;
    (void)version;
    for (size_t i = 0; i < m->n; i++)
        if (m->lens[i] == klen && !memcmp(m->keys[i], key, klen)) {
            m->seen[i]++;
            return 0;
        }
    m->bad++;
    return 0;
}

static void test_search_binary(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_kv *kv = open_ks(fs, "binsearch");
    enum { N = 400 };
    struct model_hit m = { .keys = calloc(N, POM_KV_KEY_MAX), .lens = calloc(N, sizeof(size_t)),
                           .n = N, .seen = calloc(N, 1) };
    /* Alphabet of 4 byte values (incl. 0 and 255) so substrings match often. */
    static const uint8_t abc[4] = { 0x00, 0xff, 'a', '/' };
    for (size_t i = 0; i < N; i++) {
        m.lens[i] = i % 3 == 0 ? 255 + rnd() % 770 : 8 + rnd() % 60;
        for (size_t b = 0; b < m.lens[i]; b++)
            m.keys[i][b] = abc[rnd() % 4];
        /* Unique: an index tag at the start. */
        m.keys[i][0] = 'T';
        m.keys[i][1] = (uint8_t)(i & 0x7f) | 0x80;
        m.keys[i][2] = (uint8_t)(i >> 7) | 0x80;
        assert_int_equal(pom_kv_put(kv, m.keys[i], m.lens[i], "v", 1, POM_KV_CREATE_ONLY), 0);
    }
    /* A needle only at the end of a long key (beyond the name's prefix). */
    memcpy(m.keys[0] + m.lens[0] - 5, "NEEDL", 5);
    assert_int_equal(pom_kv_put(kv, m.keys[0], m.lens[0], "v", 1, POM_KV_CREATE_ONLY), 0);
    /* The edited key 0 is a new key: its old form stays in the keyspace,
     * outside the model (counted in m.bad below). */
    for (size_t r = 0; r < 20; r++) {
        uint8_t sub[8];
        size_t sl = 1 + rnd() % 6;
        if (r == 0) {
            memcpy(sub, "NEEDL", 5);
            sl = 5;
        } else {
            for (size_t b = 0; b < sl; b++)
                sub[b] = abc[rnd() % 4];
        }
        memset(m.seen, 0, N);
        m.bad = 0;
        pom_kv_cursor cur = POM_KV_CURSOR_INIT;
        while (!pom_kv_cursor_done(&cur))
            assert_true(pom_kv_search(kv, sub, sl, &cur, 1 + rnd() % 100, model_cb, &m) >= 0);
        for (size_t i = 0; i < N; i++)
            assert_int_equal(m.seen[i], memmem(m.keys[i], m.lens[i], sub, sl) != NULL);
        /* m.bad counts rows not in the model: only the pre-edit key 0. */
        assert_true(m.bad <= 1);
    }
    free(m.keys);
    free(m.lens);
    free(m.seen);
    pom_kv_close(kv);
    pom_close(fs);
}

/* ---- keyspaces and limits ---------------------------------------------- */

static void test_keyspaces(void **state)
{
    (void)state;
    pom_fs *fs = conn(), *fs2 = conn();
    pom_kv *a = open_ks(fs, "ks-a"), *b = open_ks(fs, "ks-b");
    pom_kv *a2 = open_ks(fs2, "ks-a");
    assert_int_equal(pom_kv_put(a, "same", 4, "in a", 4, 0), 0);
    assert_int_equal(pom_kv_put(b, "same", 4, "in b", 4, 0), 0);
    check_value(a2, "same", 4, "in a", 4);
    check_value(b, "same", 4, "in b", 4);
    assert_int_equal(pom_kv_delete(a2, "same", 4, POM_KV_ANY_VERSION), 0);
    void *g;
    size_t gl;
    assert_int_equal(pom_kv_get(a, "same", 4, &g, &gl, NULL), -ENOENT);
    check_value(b, "same", 4, "in b", 4);
    /* Listing a keyspace never written: empty, done at once. */
    pom_kv *e = open_ks(fs2, "ks-empty");
    struct visit v = { .seen = calloc(NLIST, 1) };
    pom_kv_cursor cur = POM_KV_CURSOR_INIT;
    assert_int_equal(pom_kv_list(e, &cur, 100, visit_cb, &v), 0);
    assert_true(pom_kv_cursor_done(&cur));
    free(v.seen);
    /* Keyspaces are not in the namespace: the root lists none of them. */
    struct stat st;
    assert_int_equal(pom_lookup(fs, POM_ROOT_INO, "ks-a", &st), -ENOENT);
    pom_kv_close(e);
    pom_kv_close(a2);
    pom_kv_close(b);
    pom_kv_close(a);
    pom_close(fs2);
    pom_close(fs);
}

static void test_limits(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_kv *kv = NULL;
    assert_int_equal(pom_kv_open(fs, "", &kv), -EINVAL);
    char longname[POM_KV_KEYSPACE_MAX + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    assert_int_equal(pom_kv_open(fs, longname, &kv), -ENAMETOOLONG);
    longname[POM_KV_KEYSPACE_MAX] = 0;
    kv = open_ks(fs, longname);
    pom_kv_close(kv);
    kv = open_ks(fs, "limits");
    static uint8_t big[POM_KV_VALUE_MAX + 1];
    uint8_t key[POM_KV_KEY_MAX + 1];
    memset(key, 'x', sizeof key);
    assert_int_equal(pom_kv_put(kv, key, 0, "v", 1, 0), -EINVAL);
    assert_int_equal(pom_kv_put(kv, key, POM_KV_KEY_MAX + 1, "v", 1, 0), -ENAMETOOLONG);
    assert_int_equal(pom_kv_put(kv, key, POM_KV_KEY_MAX, big, POM_KV_VALUE_MAX + 1, 0), -EFBIG);
    assert_int_equal(pom_kv_put(kv, key, 3, "v", 1, 0x80), -EINVAL);
    assert_int_equal(pom_kv_update(kv, key, 3, big, POM_KV_VALUE_MAX + 1, 0), -EFBIG);
    assert_int_equal(pom_kv_put(kv, key, POM_KV_KEY_MAX, big, POM_KV_VALUE_MAX, 0), 0);
    check_value(kv, key, POM_KV_KEY_MAX, big, POM_KV_VALUE_MAX);
    void *g;
    size_t gl;
    assert_int_equal(pom_kv_get(kv, key, POM_KV_KEY_MAX + 1, &g, &gl, NULL), -ENAMETOOLONG);
    assert_int_equal(pom_kv_delete(kv, key, 0, POM_KV_ANY_VERSION), -EINVAL);
    pom_kv_cursor cur = POM_KV_CURSOR_INIT;
    assert_int_equal(pom_kv_search(kv, "x", 0, &cur, 10, model_cb, NULL), -EINVAL);
    pom_kv_close(kv);
    pom_close(fs);
}

/* ---- batches ------------------------------------------------------------ */

/* Each operation of a batch has the single call's result: an -ENOENT get,
 * an -EEXIST create-only put, an -ESTALE conditional delete fail only
 * themselves; ops of one key apply in their order (put, get, put, get,
 * delete, get); long keys (both forms) and empty values; then the results
 * agree with single gets from a second connection. */
static void test_batch_results(void **state)
{
    (void)state;
    pom_fs *fs = conn(), *fs2 = conn();
    pom_kv *kv = open_ks(fs, "batch"), *kv2 = open_ks(fs2, "batch");
    assert_int_equal(pom_kv_put(kv, "old", 3, "o1", 2, 0), 0);
    assert_int_equal(pom_kv_put(kv, "old", 3, "o2", 2, 0), 0); /* version 1 */
    uint8_t lkey[600];
    rand_bytes(lkey, sizeof lkey);
    lkey[0] = 'L';
    pom_kv_batch *b = NULL;
    assert_int_equal(pom_kv_batch_new(kv, &b), 0);
    assert_int_equal(pom_kv_batch_result(b, 0, NULL, NULL, NULL), -EBUSY);
    assert_int_equal(pom_kv_batch_get(b, "absent", 6), 0);               /* 0 */
    assert_int_equal(pom_kv_batch_put(b, "k", 1, "a", 1, 0), 0);          /* 1 */
    assert_int_equal(pom_kv_batch_get(b, "k", 1), 0);                     /* 2 */
    assert_int_equal(pom_kv_batch_put(b, "k", 1, "bb", 2, 0), 0);         /* 3 */
    assert_int_equal(pom_kv_batch_get(b, "k", 1), 0);                     /* 4 */
    assert_int_equal(pom_kv_batch_put(b, "old", 3, "x", 1, POM_KV_CREATE_ONLY), 0); /* 5 */
    assert_int_equal(pom_kv_batch_delete(b, "old", 3, 0), 0);             /* 6: -ESTALE */
    assert_int_equal(pom_kv_batch_get(b, "old", 3), 0);                   /* 7 */
    assert_int_equal(pom_kv_batch_put(b, lkey, sizeof lkey, "", 0, 0), 0); /* 8 */
    assert_int_equal(pom_kv_batch_get(b, lkey, sizeof lkey), 0);          /* 9 */
    assert_int_equal(pom_kv_batch_delete(b, "k", 1, POM_KV_ANY_VERSION), 0); /* 10 */
    assert_int_equal(pom_kv_batch_get(b, "k", 1), 0);                     /* 11 */
    assert_int_equal(pom_kv_batch_delete(b, "gone", 4, POM_KV_ANY_VERSION), 0); /* 12 */
    assert_int_equal(pom_kv_batch_put(b, "n", 1, "new", 3, POM_KV_SYNC), 0); /* 13 */
    assert_int_equal(pom_kv_batch_count(b), 14);
    assert_int_equal(pom_kv_batch_submit(b), 0);
    assert_int_equal(pom_kv_batch_submit(b), -EBUSY);
    assert_int_equal(pom_kv_batch_put(b, "z", 1, "z", 1, 0), -EBUSY);
    const void *v;
    size_t vl;
    uint64_t ver;
    assert_int_equal(pom_kv_batch_result(b, 0, &v, &vl, &ver), -ENOENT);
    assert_int_equal(pom_kv_batch_result(b, 1, NULL, NULL, NULL), 0);
    assert_int_equal(pom_kv_batch_result(b, 2, &v, &vl, &ver), 0);
    assert_int_equal(vl, 1);
    assert_memory_equal(v, "a", 1);
    assert_int_equal(ver, 0);
    assert_int_equal(pom_kv_batch_result(b, 3, NULL, NULL, NULL), 0);
    assert_int_equal(pom_kv_batch_result(b, 4, &v, &vl, &ver), 0);
    assert_int_equal(vl, 2);
    assert_memory_equal(v, "bb", 2);
    assert_int_equal(ver, 1);
    assert_int_equal(pom_kv_batch_result(b, 5, NULL, NULL, NULL), -EEXIST);
    assert_int_equal(pom_kv_batch_result(b, 6, NULL, NULL, NULL), -ESTALE);
    assert_int_equal(pom_kv_batch_result(b, 7, &v, &vl, &ver), 0);
    assert_int_equal(vl, 2);
    assert_memory_equal(v, "o2", 2);
    assert_int_equal(ver, 1);
    assert_int_equal(pom_kv_batch_result(b, 8, NULL, NULL, NULL), 0);
    assert_int_equal(pom_kv_batch_result(b, 9, &v, &vl, NULL), 0);
    assert_int_equal(vl, 0);
    assert_non_null(v);
    assert_int_equal(pom_kv_batch_result(b, 10, NULL, NULL, NULL), 0);
    assert_int_equal(pom_kv_batch_result(b, 11, NULL, NULL, NULL), -ENOENT);
    assert_int_equal(pom_kv_batch_result(b, 12, NULL, NULL, NULL), -ENOENT);
    assert_int_equal(pom_kv_batch_result(b, 13, NULL, NULL, NULL), 0);
    assert_int_equal(pom_kv_batch_result(b, 14, NULL, NULL, NULL), -ERANGE);
    check_value(kv2, "n", 1, "new", 3);
    check_value(kv2, lkey, sizeof lkey, "", 0);
    check_value(kv2, "old", 3, "o2", 2);
    void *g;
    size_t gl;
    assert_int_equal(pom_kv_get(kv2, "k", 1, &g, &gl, NULL), -ENOENT);
    /* Reused after a reset: a long key's delete, then the key is gone. */
    pom_kv_batch_reset(b);
    assert_int_equal(pom_kv_batch_count(b), 0);
    assert_int_equal(pom_kv_batch_delete(b, lkey, sizeof lkey, POM_KV_ANY_VERSION), 0);
    assert_int_equal(pom_kv_batch_get(b, lkey, sizeof lkey), 0);
    assert_int_equal(pom_kv_batch_submit(b), 0);
    assert_int_equal(pom_kv_batch_result(b, 0, NULL, NULL, NULL), 0);
    assert_int_equal(pom_kv_batch_result(b, 1, NULL, NULL, NULL), -ENOENT);
    pom_kv_batch_free(b);
    assert_int_equal(pom_kv_sync(kv), 0);
    pom_kv_close(kv2);
    pom_kv_close(kv);
    pom_close(fs2);
    pom_close(fs);
}

/* Bad input is refused when added, with the single calls' errors, and
 * adds nothing; a batch stops at POM_KV_BATCH_MAX operations and at
 * POM_KV_BATCH_BYTES (-E2BIG); an empty batch submits. One RPC carries a
 * batch of 64 puts on one MDS. */
static void test_batch_limits(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_kv *kv = open_ks(fs, "batchlim");
    pom_kv_batch *b = NULL;
    assert_int_equal(pom_kv_batch_new(NULL, &b), -EINVAL);
    assert_int_equal(pom_kv_batch_new(kv, &b), 0);
    static uint8_t big[POM_KV_VALUE_MAX + 1];
    uint8_t key[POM_KV_KEY_MAX + 1];
    memset(key, 'x', sizeof key);
    assert_int_equal(pom_kv_batch_put(b, key, 0, "v", 1, 0), -EINVAL);
    assert_int_equal(pom_kv_batch_put(b, key, POM_KV_KEY_MAX + 1, "v", 1, 0), -ENAMETOOLONG);
    assert_int_equal(pom_kv_batch_put(b, key, 3, big, POM_KV_VALUE_MAX + 1, 0), -EFBIG);
    assert_int_equal(pom_kv_batch_put(b, key, 3, NULL, 1, 0), -EINVAL);
    assert_int_equal(pom_kv_batch_put(b, key, 3, "v", 1, 0x80), -EINVAL);
    assert_int_equal(pom_kv_batch_put(b, "\x00\xff", 2, "v", 1, 0), -EINVAL);
    assert_int_equal(pom_kv_batch_get(b, key, POM_KV_KEY_MAX + 1), -ENAMETOOLONG);
    assert_int_equal(pom_kv_batch_delete(b, key, 0, POM_KV_ANY_VERSION), -EINVAL);
    assert_int_equal(pom_kv_batch_count(b), 0);
    assert_int_equal(pom_kv_batch_submit(b), 0);
    pom_kv_batch_reset(b);
    for (int i = 0; i < POM_KV_BATCH_MAX; i++)
        assert_int_equal(pom_kv_batch_get(b, "k", 1), 0);
    assert_int_equal(pom_kv_batch_get(b, "k", 1), -E2BIG);
    assert_int_equal(pom_kv_batch_count(b), POM_KV_BATCH_MAX);
    pom_kv_batch_reset(b);
    size_t fit = POM_KV_BATCH_BYTES / (POM_KV_VALUE_MAX + 3);
    for (size_t i = 0; i < fit; i++)
        assert_int_equal(pom_kv_batch_put(b, "big", 3, big, POM_KV_VALUE_MAX, 0), 0);
    assert_int_equal(pom_kv_batch_put(b, "big", 3, big, POM_KV_VALUE_MAX, 0), -E2BIG);
    pom_kv_batch_reset(b);
    char keys[64][16];
    for (int i = 0; i < 64; i++) {
        snprintf(keys[i], sizeof keys[i], "p%d", i);
        assert_int_equal(pom_kv_batch_put(b, keys[i], strlen(keys[i]), keys[i],
                                          strlen(keys[i]), 0), 0);
    }
    struct pom_fs_stats st0, st1;
    pom_get_stats(fs, &st0);
    assert_int_equal(pom_kv_batch_submit(b), 0);
    pom_get_stats(fs, &st1);
    assert_int_equal(st1.mds_rpcs - st0.mds_rpcs, 1);
    for (int i = 0; i < 64; i++)
        assert_int_equal(pom_kv_batch_result(b, (size_t)i, NULL, NULL, NULL), 0);
    for (int i = 0; i < 64; i += 7)
        check_value(kv, keys[i], strlen(keys[i]), keys[i], strlen(keys[i]));
    pom_kv_batch_free(b);
    pom_kv_close(kv);
    pom_close(fs);
}

/* Keys starting 00 FF are the MDS's system rows: -EINVAL from every call
 * taking a key, whatever the key's length (both row-name forms), and
 * nothing is written. */
static void test_sys_prefix(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_kv *kv = open_ks(fs, "sysprefix");
    static const size_t lens[] = { 2, 3, 11, 19, 254, 255, 600, POM_KV_KEY_MAX };
    uint8_t key[POM_KV_KEY_MAX];
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        rand_bytes(key, sizeof key);
        key[0] = 0x00;
        key[1] = 0xff;
        if (lens[i] >= 3)
            key[2] = i % 2 ? 'P' : 'D';
        size_t kl = lens[i];
        assert_int_equal(pom_kv_put(kv, key, kl, "v", 1, 0), -EINVAL);
        assert_int_equal(pom_kv_put(kv, key, kl, "v", 1, POM_KV_CREATE_ONLY), -EINVAL);
        assert_int_equal(pom_kv_put(kv, key, kl, "v", 1, POM_KV_SYNC), -EINVAL);
        assert_int_equal(pom_kv_update(kv, key, kl, "w", 1, POM_KV_ANY_VERSION), -EINVAL);
        assert_int_equal(pom_kv_update(kv, key, kl, "w", 1, 0), -EINVAL);
        assert_int_equal(pom_kv_delete(kv, key, kl, POM_KV_ANY_VERSION), -EINVAL);
        void *g = NULL;
        size_t gl;
        uint64_t ver;
        assert_int_equal(pom_kv_get(kv, key, kl, &g, &gl, &ver), -EINVAL);
        assert_null(g);
        /* Neighbours of the reserved prefix are ordinary keys. */
        key[1] = 0xfe;
        assert_int_equal(pom_kv_put(kv, key, kl, "n", 1, 0), 0);
        check_value(kv, key, kl, "n", 1);
        key[0] = 0xff;
        key[1] = 0x00;
        assert_int_equal(pom_kv_put(kv, key, kl, "r", 1, 0), 0);
        check_value(kv, key, kl, "r", 1);
    }
    pom_kv_close(kv);
    /* A 1-byte key 00 is fine; an 00 FF search substring is allowed and
     * matches only ordinary keys containing 00 FF (none at their start). */
    kv = open_ks(fs, "sysprefix-search");
    assert_int_equal(pom_kv_put(kv, "\0", 1, "z", 1, 0), 0);
    assert_int_equal(pom_kv_put(kv, "plain", 5, "p", 1, 0), 0);
    check_value(kv, "\0", 1, "z", 1);
    assert_int_equal(pom_kv_put(kv, "a\0\xff", 3, "m", 1, 0), 0);
    struct model_hit m = { .keys = calloc(1, POM_KV_KEY_MAX), .lens = calloc(1, sizeof(size_t)),
                           .n = 1, .seen = calloc(1, 1) };
    memcpy(m.keys[0], "a\0\xff", 3);
    m.lens[0] = 3;
    pom_kv_cursor cur = POM_KV_CURSOR_INIT;
    while (!pom_kv_cursor_done(&cur))
        assert_true(pom_kv_search(kv, "\0\xff", 2, &cur, 50, model_cb, &m) >= 0);
    assert_int_equal(m.seen[0], 1);
    assert_int_equal(m.bad, 0);
    free(m.keys);
    free(m.lens);
    free(m.seen);
    pom_kv_close(kv);
    pom_close(fs);
}

/* ---- runs of gets in a batch -------------------------------------------- */

#define RUN_KEYS 700

/* Key i of the run test: short, or (every 7th) a long key of 300 bytes. */
static size_t run_key(int i, char *k)
{
    int n = snprintf(k, 301, "r%d.", i);
    if (i % 7 == 0) {
        memset(k + n, 'x', 300 - (size_t)n);
        return 300;
    }
    return (size_t)n;
}

/* Checks batch result j, a get of key i, against model (value length of
 * key i, -1: absent). */
static void run_check(pom_kv_batch *b, size_t j, int i, const int *model)
{
    const void *v;
    size_t vl;
    int rc = pom_kv_batch_result(b, j, &v, &vl, NULL);
    if (model[i] < 0) {
        assert_int_equal(rc, -ENOENT);
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(vl, (size_t)model[i]);
    for (size_t k = 0; k < vl; k++)
        assert_int_equal(((const uint8_t *)v)[k], (uint8_t)(i + k));
}

/* Side-by-side gets of a batch, which the MDS serves in one pass per slice
 * (docs/client.md "Key/value batches"), against a model on an MDS
 * whose slices split at 64 rows: hundreds of gets spread over many slices,
 * present and missing keys and long keys mixed; then one batch of gets,
 * puts that split the slices under it, gets of the new keys and old ones,
 * deletes, gets; each get answers as a single get would. */
static void test_batch_get_runs(void **state)
{
    (void)state;
    struct pom_cluster c;
    static const char *const extra[] = { "--split-threshold", "64", NULL };
    assert_int_equal(pom_cluster_init(&c, "kvrun"), 0);
    assert_int_equal(pom_cluster_start_mdsl(&c, POM_MDSL_BIN), 0);
    assert_int_equal(pom_cluster_start_mds(&c, POM_MDS_BIN, 200, extra), 0);
    pom_fs *fs = NULL, *fs2 = NULL;
    assert_int_equal(pom_connect_mds(c.mds_addr, FSID, &fs), 0);
    assert_int_equal(pom_connect_mds(c.mds_addr, FSID, &fs2), 0);
    pom_kv *kv = open_ks(fs, "runs"), *kv2 = open_ks(fs2, "runs");
    static int model[RUN_KEYS];
    static uint8_t val[2000];
    static char keys[RUN_KEYS][301];
    static size_t klens[RUN_KEYS];
    static int order[1024];
    for (int i = 0; i < RUN_KEYS; i++) {
        model[i] = -1;
        klens[i] = run_key(i, keys[i]);
    }
    pom_kv_batch *b = NULL;
    assert_int_equal(pom_kv_batch_new(kv, &b), 0);
    /* Half the keys, values of 0..1999 bytes (byte k of key i: i + k). */
    for (int i = 0; i < RUN_KEYS / 2; i++) {
        int k = (int)(rnd() % RUN_KEYS);
        size_t vl = rnd() % sizeof val;
        for (size_t j = 0; j < vl; j++)
            val[j] = (uint8_t)(k + j);
        assert_int_equal(pom_kv_put(kv, keys[k], klens[k], val, vl, 0), 0);
        model[k] = (int)vl;
    }
    /* One run of 600 gets (repeats included) from a second connection. */
    pom_kv_batch *b2 = NULL;
    assert_int_equal(pom_kv_batch_new(kv2, &b2), 0);
    for (int j = 0; j < 600; j++) {
        order[j] = (int)(rnd() % RUN_KEYS);
        assert_int_equal(pom_kv_batch_get(b2, keys[order[j]], klens[order[j]]), 0);
    }
    assert_int_equal(pom_kv_batch_submit(b2), 0);
    for (int j = 0; j < 600; j++)
        run_check(b2, (size_t)j, order[j], model);
    pom_kv_batch_free(b2);
    /* Gets, puts of 200 keys (the slices split under them), gets of those
     * and others, deletes of some, gets of those: in batch order. */
    size_t n = 0;
    int what[1024]; /* key of get n; -1 a put; -2 - j delete j */
    int pre[RUN_KEYS], shown[RUN_KEYS], after_del[RUN_KEYS];
    memcpy(pre, model, sizeof pre);
    for (int j = 0; j < 100; j++, n++) {
        what[n] = (int)(rnd() % RUN_KEYS);
        assert_int_equal(pom_kv_batch_get(b, keys[what[n]], klens[what[n]]), 0);
    }
    static uint8_t vals[200][64];
    for (int j = 0; j < 200; j++, n++) {
        int k = (int)(rnd() % RUN_KEYS);
        size_t vl = 1 + rnd() % 63;
        for (size_t x = 0; x < vl; x++)
            vals[j][x] = (uint8_t)(k + x);
        assert_int_equal(pom_kv_batch_put(b, keys[k], klens[k], vals[j], vl, 0), 0);
        model[k] = (int)vl;
        what[n] = -1;
    }
    memcpy(shown, model, sizeof shown);
    for (int j = 0; j < 300; j++, n++) {
        what[n] = (int)(rnd() % RUN_KEYS);
        assert_int_equal(pom_kv_batch_get(b, keys[what[n]], klens[what[n]]), 0);
    }
    int del[50];
    for (int j = 0; j < 50; j++, n++) {
        del[j] = (int)(rnd() % RUN_KEYS);
        assert_int_equal(pom_kv_batch_delete(b, keys[del[j]], klens[del[j]],
                                             POM_KV_ANY_VERSION), 0);
        what[n] = -2 - j;
    }
    for (int j = 0; j < 50; j++, n++) {
        what[n] = del[j];
        assert_int_equal(pom_kv_batch_get(b, keys[del[j]], klens[del[j]]), 0);
    }
    assert_int_equal(pom_kv_batch_submit(b), 0);
    memcpy(after_del, shown, sizeof after_del);
    for (size_t j = 0; j < n; j++) {
        if (what[j] <= -2) { /* 0, or -ENOENT for a key deleted before */
            int k = del[-2 - what[j]];
            assert_int_equal(pom_kv_batch_result(b, j, NULL, NULL, NULL),
                             after_del[k] < 0 ? -ENOENT : 0);
            after_del[k] = -1;
        } else if (what[j] >= 0) {
            run_check(b, j, what[j], j < 100 ? pre : j < 600 ? shown : after_del);
        }
    }
    pom_kv_batch_free(b);
    /* A second connection's gets agree. */
    for (int i = 0; i < RUN_KEYS; i++) {
        void *g = NULL;
        size_t gl = 0;
        int rc = pom_kv_get(kv2, keys[i], klens[i], &g, &gl, NULL);
        assert_int_equal(rc, after_del[i] < 0 ? -ENOENT : 0);
        if (rc == 0)
            assert_int_equal(gl, (size_t)after_del[i]);
        pom_free(g);
    }
    pom_kv_close(kv2);
    pom_kv_close(kv);
    pom_close(fs2);
    pom_close(fs);
    pom_cluster_destroy(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_conditional),
        cmocka_unit_test(test_list_and_search),
        cmocka_unit_test(test_search_binary),
        cmocka_unit_test(test_keyspaces),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_sys_prefix),
        cmocka_unit_test(test_batch_results),
        cmocka_unit_test(test_batch_limits),
        cmocka_unit_test(test_batch_get_runs),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
