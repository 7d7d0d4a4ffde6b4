/*
 * test_xt_row.c -- tests of the row codec (xtable/xt_row.c).
 *
 * Property tests over seeded random rows (seed printed; set XT_TEST_SEED to
 * replay), every truncation and random corruption of valid encodings, a
 * hand-built corpus of hostile inputs carrying VALID checksums (so that the
 * structural checks, not the checksum, must reject them), update semantics
 * checked against a model (decode, edit the view, encode), the in-place
 * nlink delta (XT_ROW_SET_NLINK_ADD) against its model, the xattr
 * sub-codec against a model, and countdown allocation failure.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"
#include "xt_row.h"

/* ---- random inputs ---------------------------------------------------- */

static uint64_t rng;

static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

/* A value of random bit width, so every varint length shows up. */
static uint64_t wide(void)
{
    unsigned bits = (unsigned)below(65);
    return bits == 64 ? rnd() : rnd() & ((UINT64_C(1) << bits) - 1);
}

#define POOL_SIZE ((1u << 20) + (80u << 10))
#define BIG_GROUP (70u << 10)
static uint8_t pool[POOL_SIZE];

static const uint8_t *pool_at(size_t len)
{
    return pool + below(POOL_SIZE - len + 1);
}

static uint32_t rnd_group_len(uint32_t max)
{
    uint64_t r = below(100);
    if (r < 45)
        return (uint32_t)below(XT_MIN(65u, max + 1));
    if (r < 95)
        return (uint32_t)below(XT_MIN(4097u, max + 1));
    return (uint32_t)below(max + 1);
}

static void gen_row(xt_row *r, uint32_t max_group)
{
    xt_row_init(r);
    xt_row_attr *a = &r->attr;
    a->type = (uint8_t)(1 + below(XT_ROW_TYPE_MAX));
    a->uuid = wide();
    a->mode = (uint32_t)wide();
    a->uid = (uint32_t)wide();
    a->gid = (uint32_t)wide();
    a->nlink = (uint32_t)wide();
    a->size = wide();
    a->ctime_ns = wide();
    uint64_t *t[3] = { &a->atime_ns, &a->mtime_ns, &a->btime_ns };
    for (int i = 0; i < 3; i++) {
        uint64_t k = below(3);
        *t[i] = k == 0 ? a->ctime_ns : k == 1 ? a->ctime_ns + (wide() >> 40) - (wide() >> 40)
                                              : wide();
    }
    a->flags = (uint32_t)wide();
    a->generation = wide();
    a->version = wide();
    uint32_t nmax = a->type == XT_ROW_KV ? XT_ROW_KEY_MAX : XT_NAME_MAX;
    r->name_len = (uint32_t)(below(2) ? 1 + below(32) : 1 + below(nmax));
    r->name = pool_at(r->name_len);
    uint64_t k = below(10);
    unsigned ng = k < 3 ? 0 : k < 9 ? (unsigned)(1 + below(3)) : (unsigned)below(XT_ROW_GROUPS_MAX + 1);
    for (unsigned i = 0; i < ng; i++) {
        uint64_t c = below(4);
        uint16_t id = c == 0 ? XT_CG_DATA : c == 1 ? XT_CG_XATTR
                    : c == 2 ? (uint16_t)(XT_CG_USER0 + below(16)) : (uint16_t)(1 + below(65535));
        uint32_t len = rnd_group_len(max_group);
        assert_int_equal(xt_row_view_set_group(r, id, len ? pool_at(len) : NULL, len), 0);
    }
}

static void assert_attr_equal(const xt_row_attr *x, const xt_row_attr *y)
{
    assert_int_equal(x->type, y->type);
    assert_true(x->uuid == y->uuid && x->size == y->size);
    assert_true(x->atime_ns == y->atime_ns && x->mtime_ns == y->mtime_ns);
    assert_true(x->ctime_ns == y->ctime_ns && x->btime_ns == y->btime_ns);
    assert_true(x->generation == y->generation && x->version == y->version);
    assert_true(x->mode == y->mode && x->uid == y->uid && x->gid == y->gid);
    assert_true(x->nlink == y->nlink && x->flags == y->flags);
}

/* `want` and `got` are the same row; got's groups are NULL when meta_only. */
static void assert_row_equal(const xt_row *want, const xt_row *got, bool meta_only)
{
    assert_attr_equal(&want->attr, &got->attr);
    assert_int_equal(want->name_len, got->name_len);
    assert_memory_equal(want->name, got->name, want->name_len);
    assert_int_equal(want->ngroups, got->ngroups);
    for (uint32_t i = 0; i < want->ngroups; i++) {
        assert_int_equal(want->groups[i].id, got->groups[i].id);
        assert_int_equal(want->groups[i].len, got->groups[i].len);
        if (meta_only)
            assert_null(got->groups[i].ptr);
        else if (want->groups[i].len)
            assert_memory_equal(want->groups[i].ptr, got->groups[i].ptr, want->groups[i].len);
    }
}

static uint8_t *encode(const xt_row *r, size_t *len)
{
    uint8_t *buf;
    assert_int_equal(xt_row_encode_alloc(r, &buf, len), 0);
    return buf;
}

/* ---- round trip ------------------------------------------------------- */

static void test_round_trip(void **state)
{
    (void)state;
    enum { N = 100000 };
    size_t cap = XT_ROW_ENCODED_MAX;
    uint8_t *buf = malloc(cap), *again = malloc(cap);
    assert_non_null(buf);
    assert_non_null(again);
    uint64_t bytes = 0;
    for (int i = 0; i < N; i++) {
        xt_row r, d, m;
        gen_row(&r, BIG_GROUP);
        ssize_t need = xt_row_encoded_size(&r);
        assert_true(need > 0);
        assert_int_equal(xt_row_encode(&r, buf, (size_t)need - 1), -ENOBUFS);
        assert_int_equal(xt_row_encode(&r, buf, cap), need);
        bytes += (uint64_t)need;
        assert_int_equal(xt_row_decode(buf, (size_t)need, &d), 0);
        assert_row_equal(&r, &d, false);
        for (uint32_t g = 0; g < d.ngroups; g++) {  /* zero-copy: inside buf */
            assert_true(d.groups[g].ptr >= buf && d.groups[g].ptr + d.groups[g].len <= buf + need);
        }
        assert_true(d.name >= buf && d.name + d.name_len <= buf + need);
        assert_int_equal(xt_row_decode_meta(buf, (size_t)need, &m), 0);
        assert_row_equal(&r, &m, true);
        /* one encoding per row */
        assert_int_equal(xt_row_encode(&d, again, cap), need);
        assert_memory_equal(buf, again, (size_t)need);
        for (uint32_t g = 0; g < r.ngroups; g++) {
            const uint8_t *p;
            uint32_t len;
            assert_int_equal(xt_row_get_group(buf, (size_t)need, r.groups[g].id, &p, &len), 0);
            assert_int_equal(len, r.groups[g].len);
            if (len)
                assert_memory_equal(p, r.groups[g].ptr, len);
        }
        uint16_t absent = (uint16_t)(1 + below(65535));
        if (xt_row_view_group(&r, absent) == NULL) {
            const uint8_t *p;
            uint32_t len;
            assert_int_equal(xt_row_get_group(buf, (size_t)need, absent, &p, &len), -ENOENT);
        }
    }
    printf("round trip: %d rows, %" PRIu64 " encoded bytes\n", N, bytes);
    free(buf);
    free(again);
}

/* The MDS keeps millions of rows: an empty file must stay small. */
static void test_compact_size(void **state)
{
    (void)state;
    xt_row r;
    xt_row_init(&r);
    uint64_t now = xt_now_ns();
    r.attr = (xt_row_attr){ .uuid = UINT64_C(1) << 40, .type = XT_ROW_REG, .mode = 0100644,
                            .uid = 1000, .gid = 1000, .nlink = 1, .size = 0,
                            .atime_ns = now, .mtime_ns = now, .ctime_ns = now, .btime_ns = now,
                            .flags = XT_ROW_F_INLINE, .generation = 1, .version = 1 };
    r.name = (const uint8_t *)"file-0000000000000001";
    r.name_len = 20;
    ssize_t n = xt_row_encoded_size(&r);
    printf("empty file row, 20-byte name: %zd bytes\n", n);
    assert_true(n > 0 && n <= 100);
    /* worst case of every fixed column */
    r.attr = (xt_row_attr){ .uuid = UINT64_MAX, .type = XT_ROW_REG, .mode = UINT32_MAX,
                            .uid = UINT32_MAX, .gid = UINT32_MAX, .nlink = UINT32_MAX,
                            .size = UINT64_MAX, .atime_ns = 0, .mtime_ns = UINT64_MAX,
                            .ctime_ns = UINT64_C(1) << 63, .btime_ns = 1,
                            .flags = UINT32_MAX, .generation = UINT64_MAX, .version = UINT64_MAX };
    n = xt_row_encoded_size(&r);
    printf("worst-case fixed columns, 20-byte name: %zd bytes\n", n);
    size_t len;
    uint8_t *buf = encode(&r, &len);
    xt_row d;
    assert_int_equal(xt_row_decode(buf, len, &d), 0);
    assert_row_equal(&r, &d, false);
    xt_free(buf);
}

/* ---- hostile inputs ---------------------------------------------------- */

static void test_truncations(void **state)
{
    (void)state;
    uint8_t *ext = malloc(XT_ROW_ENCODED_MAX + 1);
    assert_non_null(ext);
    for (int i = 0; i < 1500; i++) {
        xt_row r, d;
        gen_row(&r, i < 40 ? BIG_GROUP : 4096);
        size_t len;
        uint8_t *buf = encode(&r, &len);
        for (size_t cut = 0; cut < len; cut++) {
            /* Cuts inside the meta part (always in the first 2 KiB) get an
             * exact-size heap copy so ASan sees any read past the cut;
             * longer prefixes are passed in place (copying each would be
             * quadratic). */
            uint8_t *t = buf;
            if (cut < 2048) {
                t = malloc(cut ? cut : 1);
                memcpy(t, buf, cut);
            }
            assert_int_equal(xt_row_decode(t, cut, &d), -EBADMSG);
            assert_int_equal(xt_row_decode_meta(t, cut, &d), -EBADMSG);
            if (t != buf)
                free(t);
        }
        memcpy(ext, buf, len);
        ext[len] = (uint8_t)rnd();
        assert_int_equal(xt_row_decode(ext, len + 1, &d), -EBADMSG);
        assert_string_equal(xt_row_last_error(), "trailing bytes after the row");
        xt_free(buf);
    }
    free(ext);
}

static void test_corruptions(void **state)
{
    (void)state;
    unsigned long trials = 0;
    for (int i = 0; i < 4000; i++) {
        xt_row r, d;
        gen_row(&r, i < 200 ? BIG_GROUP : 2048);
        size_t len;
        uint8_t *buf = encode(&r, &len);
        uint8_t *copy = malloc(len);
        for (int k = 0; k < 40; k++, trials++) {
            memcpy(copy, buf, len);
            int nbytes = k < 20 ? 1 : (int)(2 + below(8));
            for (int b = 0; b < nbytes; b++) {
                size_t at = below(len);
                copy[at] ^= (uint8_t)(1 + below(255));   /* never a no-op */
            }
            if (memcmp(copy, buf, len) == 0)
                continue;                               /* two flips cancelled */
            assert_int_equal(xt_row_decode(copy, len, &d), -EBADMSG);
        }
        free(copy);
        xt_free(buf);
    }
    /* every single-bit flip of small rows */
    for (int i = 0; i < 300; i++) {
        xt_row r, d;
        gen_row(&r, 64);
        size_t len;
        uint8_t *buf = encode(&r, &len);
        for (size_t at = 0; at < len; at++) {
            for (int bit = 0; bit < 8; bit++, trials++) {
                buf[at] ^= (uint8_t)(1u << bit);
                assert_int_equal(xt_row_decode(buf, len, &d), -EBADMSG);
                buf[at] ^= (uint8_t)(1u << bit);
            }
        }
        assert_int_equal(xt_row_decode(buf, len, &d), 0);
        xt_free(buf);
    }
    printf("corruptions: %lu rejected\n", trials);
}

/* Builds hostile encodings byte by byte, with valid checksums. */
struct bld {
    uint8_t b[4096];
    size_t n;
};

static void b_u8(struct bld *b, uint8_t v) { b->b[b->n++] = v; }
static void b_var(struct bld *b, uint64_t v)
{
    while (v >= 0x80) {
        b_u8(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    b_u8(b, (uint8_t)v);
}
static void b_raw(struct bld *b, const void *p, size_t n)
{
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void b_u32(struct bld *b, uint32_t v)
{
    xt_put_u32(b->b + b->n, v);
    b->n += 4;
}
static void b_meta_csum(struct bld *b)
{
    b_u32(b, (uint32_t)xt_hash_bytes(b->b, b->n, XT_ROW_SEED_META));
}
static uint32_t gsum(uint16_t id, const void *p, size_t n)
{
    return (uint32_t)xt_hash_bytes(p, n, XT_ROW_SEED_GROUP ^ id);
}
/* Header and fixed columns of a plain regular file. */
static void b_fixed(struct bld *b, uint8_t type)
{
    b->n = 0;
    b_u8(b, XT_ROW_FMT_V1);
    b_u8(b, type);
    for (int i = 0; i < 13; i++)
        b_var(b, (uint64_t)i);
}

/* `why` must be the reason of the rejection. Only a bad group checksum
 * passes the stat path, which never reads group bytes. */
static void expect_bad(const struct bld *b, const char *why)
{
    xt_row d;
    uint8_t *t = malloc(b->n ? b->n : 1);   /* exact-size heap copy for ASan */
    memcpy(t, b->b, b->n);
    int rc = xt_row_decode(t, b->n, &d);
    const char *reason = xt_row_last_error();
    int rc_meta = xt_row_decode_meta(t, b->n, &d);
    const uint8_t *p;
    uint32_t l;
    int rc_get = xt_row_get_group(t, b->n, 1, &p, &l);
    free(t);
    if (rc != -EBADMSG)
        fail_msg("case '%s': decode returned %d", why, rc);
    if (strstr(reason, why) == NULL)
        fail_msg("case '%s': rejected for '%s'", why, reason);
    bool group_only = strcmp(why, "group checksum mismatch") == 0;
    assert_int_equal(rc_meta, group_only ? 0 : -EBADMSG);
    assert_int_equal(rc_get, -EBADMSG);
}

static void test_hostile_corpus(void **state)
{
    (void)state;
    struct bld b;
    xt_row d;
    static const uint8_t nm[] = "name";
    static const uint8_t g1[] = "group-one";

    /* the well-formed base case must pass, or the others prove nothing */
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 1);
    b_var(&b, 1); b_var(&b, 9); b_u32(&b, gsum(1, g1, 9)); b_meta_csum(&b); b_raw(&b, g1, 9);
    assert_int_equal(xt_row_decode(b.b, b.n, &d), 0);
    assert_int_equal(d.attr.nlink, 4);
    assert_int_equal(d.attr.ctime_ns, 6);
    assert_int_equal(d.attr.atime_ns, 2);         /* zigzag 7 is -4 */
    assert_int_equal(d.attr.mtime_ns, 10);        /* zigzag 8 is +4 */

    b.n = 0; expect_bad(&b, "shorter than the header");
    b.n = 0; b_u8(&b, 1); expect_bad(&b, "shorter than the header");
    b_fixed(&b, XT_ROW_REG); b.b[0] = 0; expect_bad(&b, "unknown format version");
    b_fixed(&b, XT_ROW_REG); b.b[0] = 2; expect_bad(&b, "unknown format version");
    b_fixed(&b, 0); expect_bad(&b, "unknown row type");
    b_fixed(&b, XT_ROW_TYPE_MAX + 1); expect_bad(&b, "unknown row type");
    b_fixed(&b, 255); expect_bad(&b, "unknown row type");

    /* varints: 11 bytes, bits past 64, overlong, u32 overflow */
    /* (each case is a complete row but for the one bad field) */
    b.n = 0; b_u8(&b, 1); b_u8(&b, 1);
    for (int i = 0; i < 10; i++) b_u8(&b, 0xff);
    b_u8(&b, 0x01);
    for (int i = 0; i < 12; i++) b_var(&b, 0);
    b_var(&b, 1); b_u8(&b, 'x'); b_var(&b, 0); b_meta_csum(&b); expect_bad(&b, "fixed columns");
    b.n = 0; b_u8(&b, 1); b_u8(&b, 1);
    for (int i = 0; i < 9; i++) b_u8(&b, 0xff);
    b_u8(&b, 0x02);                                   /* bit 64 */
    for (int i = 0; i < 12; i++) b_var(&b, 0);
    b_var(&b, 1); b_u8(&b, 'x'); b_var(&b, 0); b_meta_csum(&b); expect_bad(&b, "fixed columns");
    b.n = 0; b_u8(&b, 1); b_u8(&b, 1);
    for (int i = 0; i < 9; i++) b_u8(&b, 0xff);
    b_u8(&b, 0x01);                                   /* UINT64_MAX: fine */
    for (int i = 0; i < 12; i++) b_var(&b, 0);
    b_var(&b, 1); b_u8(&b, 'x'); b_var(&b, 0); b_meta_csum(&b);
    assert_int_equal(xt_row_decode(b.b, b.n, &d), 0);
    assert_true(d.attr.uuid == UINT64_MAX);
    b.n = 0; b_u8(&b, 1); b_u8(&b, 1); b_u8(&b, 0x80); b_u8(&b, 0x00); /* uuid 0, overlong */
    for (int i = 0; i < 12; i++) b_var(&b, 0);
    b_var(&b, 1); b_u8(&b, 'x'); b_var(&b, 0); b_meta_csum(&b); expect_bad(&b, "fixed columns");
    b.n = 0; b_u8(&b, 1); b_u8(&b, 1); b_var(&b, 7); b_var(&b, UINT64_C(1) << 32); /* mode */
    for (int i = 0; i < 11; i++) b_var(&b, 0);
    b_var(&b, 1); b_u8(&b, 'x'); b_var(&b, 0); b_meta_csum(&b); expect_bad(&b, "fixed columns");

    /* names */
    b_fixed(&b, XT_ROW_REG); b_var(&b, 0); b_var(&b, 0); b_meta_csum(&b);
    expect_bad(&b, "empty name");
    uint8_t big[1100];
    memset(big, 'n', sizeof big);
    b_fixed(&b, XT_ROW_REG); b_var(&b, 256); b_raw(&b, big, 256); b_var(&b, 0); b_meta_csum(&b);
    expect_bad(&b, "name longer");
    b_fixed(&b, XT_ROW_DIR); b_var(&b, 1024); b_raw(&b, big, 1024); b_var(&b, 0); b_meta_csum(&b);
    expect_bad(&b, "name longer");
    b_fixed(&b, XT_ROW_KV); b_var(&b, 1024); b_raw(&b, big, 1024); b_var(&b, 0); b_meta_csum(&b);
    assert_int_equal(xt_row_decode(b.b, b.n, &d), 0);          /* KV keys may be long */
    b_fixed(&b, XT_ROW_KV); b_var(&b, 1025); b_raw(&b, big, 1025); b_var(&b, 0); b_meta_csum(&b);
    expect_bad(&b, "name longer");
    b_fixed(&b, XT_ROW_KV); b_var(&b, UINT64_MAX); b_meta_csum(&b); expect_bad(&b, "name longer");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 200); b_raw(&b, big, 10); expect_bad(&b, "truncated name");

    /* group directory */
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, XT_ROW_GROUPS_MAX + 1);
    b_meta_csum(&b); expect_bad(&b, "more than XT_ROW_GROUPS_MAX");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, UINT64_MAX);
    b_meta_csum(&b); expect_bad(&b, "more than XT_ROW_GROUPS_MAX");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 1);
    b_var(&b, 0); b_var(&b, 0); b_u32(&b, gsum(0, "", 0)); b_meta_csum(&b);
    expect_bad(&b, "group id out of range");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 1);
    b_var(&b, 65536); b_var(&b, 0); b_u32(&b, 0); b_meta_csum(&b);
    expect_bad(&b, "group id out of range");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 2);
    b_var(&b, 5); b_var(&b, 0); b_u32(&b, gsum(5, "", 0));
    b_var(&b, 5); b_var(&b, 0); b_u32(&b, gsum(5, "", 0)); b_meta_csum(&b);
    expect_bad(&b, "not strictly increasing");                 /* duplicate */
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 2);
    b_var(&b, 7); b_var(&b, 0); b_u32(&b, gsum(7, "", 0));
    b_var(&b, 3); b_var(&b, 0); b_u32(&b, gsum(3, "", 0)); b_meta_csum(&b);
    expect_bad(&b, "not strictly increasing");                 /* unsorted */
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 1);
    b_var(&b, 1); b_var(&b, XT_ROW_GROUP_MAX + 1); b_u32(&b, 0); b_meta_csum(&b);
    expect_bad(&b, "group longer");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 1);
    b_var(&b, 1); b_var(&b, UINT64_MAX); b_u32(&b, 0); b_meta_csum(&b);
    expect_bad(&b, "group longer");
    /* lengths that would overflow a 32-bit sum: 32 groups of the maximum */
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, XT_ROW_GROUPS_MAX);
    for (int i = 1; i <= XT_ROW_GROUPS_MAX; i++) {
        b_var(&b, (uint64_t)i); b_var(&b, XT_ROW_GROUP_MAX); b_u32(&b, 0);
    }
    b_meta_csum(&b); b_raw(&b, g1, 9); expect_bad(&b, "truncated group bytes");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 1);
    b_var(&b, 1); b_var(&b, 9); b_u32(&b, gsum(1, g1, 9)); b_meta_csum(&b); b_raw(&b, g1, 8);
    expect_bad(&b, "truncated group bytes");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 1);
    b_var(&b, 1); b_var(&b, 8); b_u32(&b, gsum(1, g1, 8)); b_meta_csum(&b); b_raw(&b, g1, 9);
    expect_bad(&b, "trailing bytes");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 1);
    b_var(&b, 1); b_var(&b, 9); b_u32(&b, gsum(2, g1, 9)); b_meta_csum(&b); b_raw(&b, g1, 9);
    expect_bad(&b, "group checksum mismatch");                 /* bytes of group 2 under id 1 */
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 0); b_meta_csum(&b);
    b.b[b.n - 1] ^= 1; expect_bad(&b, "meta checksum mismatch");
    b_fixed(&b, XT_ROW_REG); b_var(&b, 4); b_raw(&b, nm, 4); b_var(&b, 0); b_u8(&b, 0);
    expect_bad(&b, "truncated meta checksum");

    /* longer than any row may be */
    uint8_t *huge = calloc(XT_ROW_ENCODED_MAX + 1, 1);
    huge[0] = XT_ROW_FMT_V1;
    huge[1] = XT_ROW_REG;
    assert_int_equal(xt_row_decode(huge, XT_ROW_ENCODED_MAX + 1, &d), -EBADMSG);
    assert_int_equal(xt_row_decode(huge, SIZE_MAX, &d), -EBADMSG);
    free(huge);
    assert_int_equal(xt_row_decode(NULL, 0, &d), -EBADMSG);
}

/* Encoders refuse views that break the invariants. */
static void test_encode_rejects(void **state)
{
    (void)state;
    xt_row r;
    uint8_t buf[4096];
    xt_row_init(&r);
    r.attr.type = XT_ROW_REG;
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -EINVAL);       /* no name */
    r.name = (const uint8_t *)"x";
    r.name_len = 1;
    assert_true(xt_row_encode(&r, buf, sizeof buf) > 0);
    r.attr.type = 0;
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -EINVAL);
    r.attr.type = XT_ROW_TYPE_MAX + 1;
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -EINVAL);
    static uint8_t longname[XT_ROW_KEY_MAX + 1];
    r.attr.type = XT_ROW_REG;
    r.name = longname;
    r.name_len = XT_NAME_MAX + 1;
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -ENAMETOOLONG);
    r.attr.type = XT_ROW_KV;
    r.name_len = XT_ROW_KEY_MAX;
    assert_true(xt_row_encode(&r, buf, sizeof buf) > 0);
    r.name_len = XT_ROW_KEY_MAX + 1;
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -ENAMETOOLONG);
    r.name_len = 5;
    r.ngroups = 2;
    r.groups[0] = (xt_row_group){ .id = 4, .ptr = pool, .len = 1 };
    r.groups[1] = (xt_row_group){ .id = 4, .ptr = pool, .len = 1 };
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -EINVAL);       /* duplicate */
    r.groups[1].id = 3;
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -EINVAL);       /* unsorted */
    r.groups[1] = (xt_row_group){ .id = 5, .ptr = NULL, .len = 1 };
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -EINVAL);       /* NULL bytes */
    r.groups[1] = (xt_row_group){ .id = 5, .ptr = pool, .len = XT_ROW_GROUP_MAX + 1 };
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -E2BIG);
    r.groups[0].id = 0;
    r.ngroups = 1;
    assert_int_equal(xt_row_encode(&r, buf, sizeof buf), -EINVAL);       /* id 0 */
    /* the whole row over XT_ROW_ENCODED_MAX */
    xt_row_init(&r);
    r.attr.type = XT_ROW_REG;
    r.name = (const uint8_t *)"x";
    r.name_len = 1;
    uint8_t *blob = calloc(XT_ROW_GROUP_MAX, 1);
    for (uint16_t id = 1; id <= 4; id++)
        assert_int_equal(xt_row_view_set_group(&r, id, blob, XT_ROW_GROUP_MAX), 0);
    assert_int_equal(xt_row_encoded_size(&r), -E2BIG);
    free(blob);
    /* view helpers */
    xt_row_init(&r);
    for (int i = XT_ROW_GROUPS_MAX; i >= 1; i--)
        assert_int_equal(xt_row_view_set_group(&r, (uint16_t)(i * 3), pool, (uint32_t)i), 0);
    assert_int_equal(xt_row_view_set_group(&r, 1, pool, 1), -E2BIG);
    assert_int_equal(xt_row_view_set_group(&r, 3, pool, 77), 0);         /* replace */
    assert_int_equal(r.groups[0].len, 77);
    for (uint32_t i = 1; i < r.ngroups; i++)
        assert_true(r.groups[i - 1].id < r.groups[i].id);
    assert_int_equal(xt_row_view_del_group(&r, 4), -ENOENT);
    assert_int_equal(xt_row_view_del_group(&r, 3), 0);
    assert_null(xt_row_view_group(&r, 3));
    assert_non_null(xt_row_view_group(&r, 6));
    assert_int_equal(xt_row_view_set_group(&r, 0, pool, 1), -EINVAL);
}

/* ---- update ----------------------------------------------------------- */

/* The model of xt_row_update: decode, edit the view, encode. */
static void model_update(const xt_row *old, const xt_row_patch *p, xt_row *n)
{
    *n = *old;
    const xt_row_attr *a = &p->attr;
    uint32_t s = p->set;
    if (s & XT_ROW_SET_TYPE) n->attr.type = a->type;
    if (s & XT_ROW_SET_UUID) n->attr.uuid = a->uuid;
    if (s & XT_ROW_SET_MODE) n->attr.mode = a->mode;
    if (s & XT_ROW_SET_UID) n->attr.uid = a->uid;
    if (s & XT_ROW_SET_GID) n->attr.gid = a->gid;
    if (s & XT_ROW_SET_NLINK) { /* an absolute count: not below 2 for now */
        n->attr.nlink = a->nlink;
        n->attr.flags &= ~XT_ROW_F_NLINK_LOW;
    }
    if (s & XT_ROW_SET_SIZE) n->attr.size = a->size;
    if (s & XT_ROW_SET_ATIME) n->attr.atime_ns = a->atime_ns;
    if (s & XT_ROW_SET_MTIME) n->attr.mtime_ns = a->mtime_ns;
    if (s & XT_ROW_SET_CTIME) n->attr.ctime_ns = a->ctime_ns;
    if (s & XT_ROW_SET_BTIME) n->attr.btime_ns = a->btime_ns;
    if (s & XT_ROW_SET_FLAGS) /* the count's sign stays the row's */
        n->attr.flags = (a->flags & ~XT_ROW_F_NLINK_LOW) | (n->attr.flags & XT_ROW_F_NLINK_LOW);
    if (s & XT_ROW_SET_GENERATION) n->attr.generation = a->generation;
    if (s & XT_ROW_SET_NAME) {
        n->name = p->name;
        n->name_len = p->name_len;
    }
    n->attr.version++;
    for (uint32_t i = 0; i < p->ndel; i++)
        xt_row_view_del_group(n, p->del[i]);
    for (uint32_t i = 0; i < p->nput; i++)
        assert_int_equal(xt_row_view_set_group(n, p->put[i].id, p->put[i].ptr, p->put[i].len), 0);
}

static void test_update_model(void **state)
{
    (void)state;
    for (int i = 0; i < 20000; i++) {
        xt_row r, o, want, got;
        gen_row(&r, 4096);
        r.ngroups = XT_MIN(r.ngroups, 8u);
        if (r.attr.version == UINT64_MAX)
            r.attr.version--;
        size_t len;
        uint8_t *old = encode(&r, &len);
        assert_int_equal(xt_row_decode(old, len, &o), 0);
        xt_row_patch p;
        xt_row_patch_init(&p);
        xt_row tmp;
        gen_row(&tmp, 4096);
        p.set = (uint32_t)below(1u << 14) & ~XT_ROW_SET_TYPE;   /* keep the name limit */
        p.attr = tmp.attr;
        p.name = tmp.name;
        p.name_len = XT_MIN(tmp.name_len, (uint32_t)XT_NAME_MAX);
        for (uint32_t k = 0; k < XT_MIN(tmp.ngroups, 6u); k++)
            p.put[p.nput++] = tmp.groups[k];          /* sorted; shuffle below */
        for (uint32_t k = 0; p.nput > 1 && k < p.nput; k++) {
            uint32_t j = (uint32_t)below(p.nput);
            xt_row_group t = p.put[k];
            p.put[k] = p.put[j];
            p.put[j] = t;
        }
        for (uint32_t k = 0; k < o.ngroups; k++)
            if (below(3) == 0 && !xt_row_view_group(&tmp, o.groups[k].id))
                p.del[p.ndel++] = o.groups[k].id;
        if (below(4) == 0 && !xt_row_view_group(&tmp, 999))
            p.del[p.ndel++] = 999;                    /* absent: ignored */
        if (below(2)) {
            p.set |= XT_ROW_SET_IF_VERSION;
            p.if_version = o.attr.version;
        }
        model_update(&o, &p, &want);
        uint8_t *out, *exp;
        size_t out_len, exp_len;
        int rc = xt_row_update(old, len, &p, &out, &out_len);
        ssize_t need = xt_row_encoded_size(&want);
        if (need < 0) {                              /* e.g. more than 32 groups */
            assert_int_equal(rc, need);
            assert_null(out);
        } else {
            assert_int_equal(rc, 0);
            exp = encode(&want, &exp_len);
            assert_int_equal(out_len, exp_len);
            assert_memory_equal(out, exp, exp_len);
            assert_int_equal(xt_row_decode(out, out_len, &got), 0);
            assert_int_equal(got.attr.version, o.attr.version + 1);
            xt_free(exp);
            xt_free(out);
        }
        xt_free(old);
    }
}

static void test_update_semantics(void **state)
{
    (void)state;
    xt_row r, d;
    xt_row_init(&r);
    r.attr = (xt_row_attr){ .type = XT_ROW_REG, .uuid = 77, .mode = 0100600, .nlink = 1,
                            .size = 5, .mtime_ns = 1000, .ctime_ns = 1000, .version = 41 };
    r.name = (const uint8_t *)"f";
    r.name_len = 1;
    xt_row_view_set_group(&r, XT_CG_DATA, "hello", 5);
    xt_row_view_set_group(&r, XT_CG_XATTR, "xattrs", 6);
    size_t len;
    uint8_t *old = encode(&r, &len), *out;
    size_t out_len;

    xt_row_patch p;
    xt_row_patch_init(&p);
    p.set = XT_ROW_SET_SIZE | XT_ROW_SET_MTIME | XT_ROW_SET_IF_VERSION;
    p.attr.size = 11;
    p.attr.mtime_ns = 2000;
    p.attr.uuid = 999;                    /* not in `set`: must not change */
    p.if_version = 41;
    p.put[p.nput++] = (xt_row_group){ .id = XT_CG_DATA, .ptr = (const uint8_t *)"hello world", .len = 11 };
    p.put[p.nput++] = (xt_row_group){ .id = XT_CG_USER0, .ptr = (const uint8_t *)"u", .len = 1 };
    p.del[p.ndel++] = XT_CG_XATTR;
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), 0);
    assert_int_equal(xt_row_decode(out, out_len, &d), 0);
    assert_int_equal(d.attr.version, 42);
    assert_int_equal(d.attr.size, 11);
    assert_int_equal(d.attr.mtime_ns, 2000);
    assert_int_equal(d.attr.uuid, 77);
    assert_int_equal(d.attr.ctime_ns, 1000);
    assert_int_equal(d.ngroups, 2);
    assert_int_equal(d.groups[0].id, XT_CG_DATA);
    assert_memory_equal(d.groups[0].ptr, "hello world", 11);
    assert_int_equal(d.groups[1].id, XT_CG_USER0);
    xt_free(out);

    /* conditional update on a stale version */
    p.if_version = 40;
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), -ESTALE);
    assert_null(out);
    /* contradictory patches */
    p.set &= ~XT_ROW_SET_IF_VERSION;
    p.del[p.ndel++] = XT_CG_DATA;
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), -EINVAL);
    p.ndel = 0;
    p.put[p.nput++] = (xt_row_group){ .id = XT_CG_USER0, .ptr = NULL, .len = 0 };
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), -EINVAL);
    xt_row_patch_init(&p);
    p.put[p.nput++] = (xt_row_group){ .id = 0 };
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), -EINVAL);
    /* rename in place, and a name over the limit */
    xt_row_patch_init(&p);
    p.set = XT_ROW_SET_NAME;
    p.name = (const uint8_t *)"renamed";
    p.name_len = 7;
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), 0);
    assert_int_equal(xt_row_decode(out, out_len, &d), 0);
    assert_memory_equal(d.name, "renamed", 7);
    assert_int_equal(d.ngroups, 2);
    xt_free(out);
    static uint8_t longname[300];
    p.name = longname;
    p.name_len = 256;
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), -ENAMETOOLONG);
    /* a malformed old row */
    old[0] ^= 0xff;
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), -EBADMSG);
    old[0] ^= 0xff;
    /* a corrupt kept group stays detectable: its checksum is carried over */
    old[len - 1] ^= 0x10;                        /* a byte of the xattr group */
    xt_row_patch_init(&p);
    p.set = XT_ROW_SET_NLINK;
    p.attr.nlink = 2;
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), 0);
    assert_int_equal(xt_row_decode_meta(out, out_len, &d), 0);
    assert_int_equal(d.attr.nlink, 2);
    assert_int_equal(xt_row_decode(out, out_len, &d), -EBADMSG);
    assert_string_equal(xt_row_last_error(), "group checksum mismatch");
    const uint8_t *gp;
    uint32_t gl;
    assert_int_equal(xt_row_get_group(out, out_len, XT_CG_DATA, &gp, &gl), 0);
    assert_int_equal(xt_row_get_group(out, out_len, XT_CG_XATTR, &gp, &gl), -EBADMSG);
    xt_free(out);
    xt_free(old);
    /* the version cannot wrap */
    r.attr.version = UINT64_MAX;
    old = encode(&r, &len);
    assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), -EOVERFLOW);
    xt_free(old);
}

/* XT_ROW_SET_NLINK_ADD (a directory's subdirectory count changed in place
 * by the MDS) against its model over random counts, flags and deltas: a
 * counted row (>= 2, or any value with XT_ROW_F_NLINK_LOW read as signed)
 * gets count + d exactly (kept in [INT32_MIN, UINT32_MAX]), below 2 with
 * the flag set and shown as 2, from 2 up without it; a 0 or 1 without the
 * flag stays; nothing else changes but the version; with
 * XT_ROW_SET_NLINK: -EINVAL. */
static void test_update_nlink_add(void **state)
{
    (void)state;
    static const uint32_t edge[] = { 0, 1, 2, 3, UINT32_MAX - 1, UINT32_MAX, 0x80000000u };
    static const int32_t dedge[] = { 0, 1, -1, -2, -3, INT32_MAX, INT32_MIN };
    for (int i = 0; i < 5000; i++) {
        xt_row r, got;
        gen_row(&r, 256);
        if (r.attr.version == UINT64_MAX)
            r.attr.version--;
        r.attr.nlink = below(2) ? edge[below(7)] : (uint32_t)rnd();
        r.attr.flags = (r.attr.flags & ~XT_ROW_F_NLINK_LOW) |
                       (below(4) == 0 ? XT_ROW_F_NLINK_LOW : 0);
        int32_t d = below(2) ? dedge[below(7)] : (int32_t)(below(9) - 4);
        size_t len;
        uint8_t *old = encode(&r, &len), *out;
        size_t out_len;
        xt_row_patch p;
        xt_row_patch_init(&p);
        p.set = XT_ROW_SET_NLINK_ADD | (below(2) ? XT_ROW_SET_MTIME | XT_ROW_SET_CTIME : 0);
        p.attr.nlink = (uint32_t)d;
        p.attr.mtime_ns = p.attr.ctime_ns = 12345;
        assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), 0);
        assert_int_equal(xt_row_decode_meta(out, out_len, &got), 0);
        bool low = r.attr.flags & XT_ROW_F_NLINK_LOW;
        uint32_t want = r.attr.nlink, want_low = low;
        if (low || want >= 2) {
            int64_t v = (low ? (int64_t)(int32_t)r.attr.nlink : (int64_t)r.attr.nlink) + d;
            if (v < INT32_MIN)
                v = INT32_MIN;
            if (v > (int64_t)UINT32_MAX)
                v = UINT32_MAX;
            want_low = v < 2;
            want = v < 2 ? (uint32_t)(int32_t)v : (uint32_t)v;
        }
        assert_int_equal(got.attr.nlink, want);
        assert_int_equal((got.attr.flags & XT_ROW_F_NLINK_LOW) != 0, want_low);
        assert_int_equal(got.attr.flags & ~XT_ROW_F_NLINK_LOW,
                         r.attr.flags & ~XT_ROW_F_NLINK_LOW);
        assert_int_equal(xt_row_nlink_shown(&got.attr), want_low ? 2 : want);
        assert_int_equal(got.attr.version, r.attr.version + 1);
        assert_int_equal(got.attr.uuid, r.attr.uuid);
        assert_int_equal(got.attr.size, r.attr.size);
        assert_int_equal(got.attr.mtime_ns,
                         (p.set & XT_ROW_SET_MTIME) ? 12345 : r.attr.mtime_ns);
        xt_free(out);
        p.set |= XT_ROW_SET_NLINK; /* contradictory */
        assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), -EINVAL);
        assert_null(out);
        xt_free(old);
    }
}

/* XT_ROW_SET_TIMES_MAX: each time set only where the new one is later
 * (an RMU's late delivery); the times not in `set` never change. */
static void test_update_times_max(void **state)
{
    (void)state;
    for (int i = 0; i < 3000; i++) {
        xt_row r, got;
        gen_row(&r, 64);
        if (r.attr.version == UINT64_MAX)
            r.attr.version--;
        size_t len, out_len;
        uint8_t *old = encode(&r, &len), *out;
        xt_row_patch p;
        xt_row_patch_init(&p);
        p.set = XT_ROW_SET_TIMES_MAX | (below(2) ? XT_ROW_SET_ATIME : 0) |
                (below(2) ? XT_ROW_SET_MTIME : 0) | (below(2) ? XT_ROW_SET_CTIME : 0);
        /* Around the old values: earlier, equal, later. */
        p.attr.atime_ns = r.attr.atime_ns + (uint64_t)(int64_t)(below(3) - 1);
        p.attr.mtime_ns = below(4) ? r.attr.mtime_ns + (uint64_t)(int64_t)(below(3) - 1) : rnd();
        p.attr.ctime_ns = rnd();
        assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), 0);
        assert_int_equal(xt_row_decode_meta(out, out_len, &got), 0);
#define WANT_T(f, bit) ((p.set & (bit)) && p.attr.f > r.attr.f ? p.attr.f : r.attr.f)
        assert_int_equal(got.attr.atime_ns, WANT_T(atime_ns, XT_ROW_SET_ATIME));
        assert_int_equal(got.attr.mtime_ns, WANT_T(mtime_ns, XT_ROW_SET_MTIME));
        assert_int_equal(got.attr.ctime_ns, WANT_T(ctime_ns, XT_ROW_SET_CTIME));
#undef WANT_T
        assert_int_equal(got.attr.btime_ns, r.attr.btime_ns);
        assert_int_equal(got.attr.nlink, r.attr.nlink);
        assert_int_equal(got.attr.version, r.attr.version + 1);
        xt_free(out);
        /* Without the bit the times are set as given, earlier or not. */
        p.set &= ~XT_ROW_SET_TIMES_MAX;
        assert_int_equal(xt_row_update(old, len, &p, &out, &out_len), 0);
        assert_int_equal(xt_row_decode_meta(out, out_len, &got), 0);
        assert_int_equal(got.attr.ctime_ns,
                         (p.set & XT_ROW_SET_CTIME) ? p.attr.ctime_ns : r.attr.ctime_ns);
        xt_free(out);
        xt_free(old);
    }
}

/* ---- xattr ------------------------------------------------------------ */

#define XA_MODEL_MAX 40
struct xa_model {
    int n;
    char name[XA_MODEL_MAX][16];
    const uint8_t *val[XA_MODEL_MAX];
    uint32_t vlen[XA_MODEL_MAX];
};

static int model_find(const struct xa_model *m, const char *name)
{
    for (int i = 0; i < m->n; i++)
        if (strcmp(m->name[i], name) == 0)
            return i;
    return -1;
}

static void check_against_model(const uint8_t *g, size_t len, const struct xa_model *m)
{
    assert_int_equal(xt_row_xattr_count(g, len), m->n);
    size_t need = 0;
    for (int i = 0; i < m->n; i++) {
        const uint8_t *v;
        uint32_t vl;
        assert_int_equal(xt_row_xattr_get(g, len, m->name[i], strlen(m->name[i]), &v, &vl), 0);
        assert_int_equal(vl, m->vlen[i]);
        if (vl)
            assert_memory_equal(v, m->val[i], vl);
        need += strlen(m->name[i]) + 1;
    }
    assert_int_equal(xt_row_xattr_list(g, len, NULL, 0), (ssize_t)need);
    char list[XA_MODEL_MAX * 17];
    assert_int_equal(xt_row_xattr_list(g, len, list, sizeof list), (ssize_t)need);
    if (need > 0)
        assert_int_equal(xt_row_xattr_list(g, len, list, need - 1), -ERANGE);
    /* canonical: encoding the model in reverse order gives the same bytes */
    xt_row_xattr arr[XA_MODEL_MAX];
    for (int i = 0; i < m->n; i++)
        arr[m->n - 1 - i] = (xt_row_xattr){ (const uint8_t *)m->name[i], (uint32_t)strlen(m->name[i]),
                                            m->val[i], m->vlen[i] };
    uint8_t *enc;
    size_t enc_len;
    assert_int_equal(xt_row_xattr_encode(arr, (size_t)m->n, &enc, &enc_len), 0);
    assert_int_equal(enc_len, len);
    if (len)
        assert_memory_equal(enc, g, len);
    xt_free(enc);
}

static void test_xattr_model(void **state)
{
    (void)state;
    for (int round = 0; round < 200; round++) {
        struct xa_model m = { 0 };
        uint8_t *g = NULL;
        size_t len = 0;
        for (int step = 0; step < 60; step++) {
            char name[16];
            snprintf(name, sizeof name, "user.%u", (unsigned)below(XA_MODEL_MAX));
            int at = model_find(&m, name);
            uint8_t *out;
            size_t out_len;
            if (below(3) == 0) {
                int rc = xt_row_xattr_remove(g, len, name, strlen(name), &out, &out_len);
                if (at < 0) {
                    assert_int_equal(rc, -ENODATA);
                    continue;
                }
                assert_int_equal(rc, 0);
                m.n--;
                memmove(&m.name[at], &m.name[at + 1], sizeof m.name[0] * (size_t)(m.n - at));
                memmove(&m.val[at], &m.val[at + 1], sizeof m.val[0] * (size_t)(m.n - at));
                memmove(&m.vlen[at], &m.vlen[at + 1], sizeof m.vlen[0] * (size_t)(m.n - at));
            } else {
                uint32_t vl = below(10) == 0 ? (uint32_t)below(1u << 12) : (uint32_t)below(40);
                const uint8_t *v = pool_at(vl);
                int how = (int)below(3);
                int rc = xt_row_xattr_set(g, len, name, strlen(name), v, vl, how, &out, &out_len);
                if (how == XT_ROW_XATTR_CREATE && at >= 0) {
                    assert_int_equal(rc, -EEXIST);
                    continue;
                }
                if (how == XT_ROW_XATTR_REPLACE && at < 0) {
                    assert_int_equal(rc, -ENODATA);
                    continue;
                }
                if (rc == -ENOSPC)
                    continue;
                assert_int_equal(rc, 0);
                if (at < 0) {
                    at = m.n++;
                    strcpy(m.name[at], name);
                }
                m.val[at] = v;
                m.vlen[at] = vl;
            }
            xt_free(g);
            g = out;
            len = out_len;
            assert_true((len == 0) == (m.n == 0));
            check_against_model(g, len, &m);
        }
        xt_free(g);
    }
}

static void test_xattr_limits_and_corruption(void **state)
{
    (void)state;
    uint8_t *g, *out;
    size_t len, out_len;
    static uint8_t val[XT_ROW_XATTR_VALUE_MAX + 1];
    char longname[XT_ROW_XATTR_NAME_MAX + 2];
    memset(longname, 'a', sizeof longname);
    assert_int_equal(xt_row_xattr_set(NULL, 0, "user.a", 6, "1", 1, 0, &g, &len), 0);
    assert_int_equal(xt_row_xattr_set(g, len, longname, XT_ROW_XATTR_NAME_MAX + 1, "v", 1, 0,
                                      &out, &out_len), -ERANGE);
    assert_int_equal(xt_row_xattr_set(g, len, "", 0, "v", 1, 0, &out, &out_len), -EINVAL);
    assert_int_equal(xt_row_xattr_set(g, len, "a\0b", 3, "v", 1, 0, &out, &out_len), -EINVAL);
    assert_int_equal(xt_row_xattr_set(g, len, "user.b", 6, val, sizeof val, 0, &out, &out_len),
                     -E2BIG);
    assert_int_equal(xt_row_xattr_set(g, len, "user.b", 6, val, XT_ROW_XATTR_VALUE_MAX, 0,
                                      &out, &out_len), 0);
    xt_free(g);
    g = out;
    len = out_len;
    assert_int_equal(xt_row_xattr_set(g, len, "user.c", 6, val, 8192, 0, &out, &out_len), -ENOSPC);
    assert_int_equal(xt_row_xattr_set(g, len, longname, XT_ROW_XATTR_NAME_MAX, val, 100, 0,
                                      &out, &out_len), 0);
    xt_free(g);
    g = out;
    len = out_len;
    assert_int_equal(xt_row_xattr_count(g, len), 3);
    xt_row_xattr arr[3];
    assert_int_equal(xt_row_xattr_decode(g, len, arr, 2), -ERANGE);
    assert_int_equal(xt_row_xattr_decode(g, len, arr, 3), 3);
    assert_true(arr[0].name_len == XT_ROW_XATTR_NAME_MAX);      /* "aaa..." sorts first */
    xt_row_xattr dup[2] = { { (const uint8_t *)"x", 1, NULL, 0 }, { (const uint8_t *)"x", 1, NULL, 0 } };
    assert_int_equal(xt_row_xattr_encode(dup, 2, &out, &out_len), -EINVAL);
    assert_null(out);

    xt_free(g);

    /* every truncation but the empty one is rejected; so is a trailing byte */
    for (int i = 0; i < 300; i++) {
        xt_row_xattr e[6];
        char names[6][8];
        size_t n = 1 + below(6);
        for (size_t k = 0; k < n; k++) {
            snprintf(names[k], sizeof names[k], "t%u", (unsigned)(k % 10));
            e[k] = (xt_row_xattr){ (const uint8_t *)names[k], (uint32_t)strlen(names[k]),
                                   pool_at(300), (uint32_t)below(300) };
        }
        assert_int_equal(xt_row_xattr_encode(e, n, &g, &len), 0);
        for (size_t cut = 1; cut < len; cut++) {
            uint8_t *t = malloc(cut);
            memcpy(t, g, cut);
            assert_int_equal(xt_row_xattr_count(t, cut), -EBADMSG);
            free(t);
        }
        uint8_t *t = malloc(len + 1);
        memcpy(t, g, len);
        t[len] = (uint8_t)rnd();
        assert_int_equal(xt_row_xattr_count(t, len + 1), -EBADMSG);
        free(t);
        xt_free(g);
    }

    /* hand-made malformed groups */
    static const struct { const char *why; uint8_t b[12]; size_t n; } bad[] = {
        { "fmt 0", { 0, 1, 1, 'a', 0 }, 5 },
        { "fmt 2", { 2, 1, 1, 'a', 0 }, 5 },
        { "count 0", { 1, 0 }, 2 },
        { "count huge", { 1, 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 'a', 0 }, 9 },
        { "count > entries", { 1, 2, 1, 'a', 0 }, 5 },
        { "count < entries", { 1, 1, 1, 'a', 0, 1, 'b', 0 }, 8 },
        { "empty name", { 1, 1, 0, 0 }, 4 },
        { "NUL in name", { 1, 1, 2, 'a', 0, 0 }, 6 },
        { "name len huge", { 1, 1, 0xff, 0xff, 0xff, 0xff, 0x0f }, 7 },
        { "value len huge", { 1, 1, 1, 'a', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f }, 12 },
        { "value truncated", { 1, 1, 1, 'a', 3, 'x' }, 6 },
        { "duplicate", { 1, 2, 1, 'a', 0, 1, 'a', 0 }, 8 },
        { "unsorted", { 1, 2, 1, 'b', 0, 1, 'a', 0 }, 8 },
        { "prefix after", { 1, 2, 2, 'a', 'b', 0, 1, 'a', 0 }, 9 },
        { "overlong varint", { 1, 1, 0x81, 0x00, 'a', 0 }, 6 },
    };
    for (size_t i = 0; i < XT_ARRAY_SIZE(bad); i++) {
        uint8_t *c = malloc(bad[i].n);
        memcpy(c, bad[i].b, bad[i].n);
        if (xt_row_xattr_count(c, bad[i].n) != -EBADMSG)
            fail_msg("xattr case '%s' accepted", bad[i].why);
        const uint8_t *v;
        uint32_t vl;
        assert_int_equal(xt_row_xattr_get(c, bad[i].n, "a", 1, &v, &vl), -EBADMSG);
        assert_int_equal(xt_row_xattr_set(c, bad[i].n, "a", 1, "v", 1, 0, &out, &out_len), -EBADMSG);
        assert_int_equal(xt_row_xattr_list(c, bad[i].n, NULL, 0), -EBADMSG);
        free(c);
    }

    /* random mutations: rejected, or accepted bytes that are canonical */
    for (int i = 0; i < 20000; i++) {
        xt_row_xattr e[8];
        char names[8][8];
        size_t n = 1 + below(8);
        for (size_t k = 0; k < n; k++) {
            snprintf(names[k], sizeof names[k], "n%u", (unsigned)(k % 10));
            e[k] = (xt_row_xattr){ (const uint8_t *)names[k], (uint32_t)strlen(names[k]),
                                   pool_at(40), (uint32_t)below(40) };
        }
        assert_int_equal(xt_row_xattr_encode(e, n, &g, &len), 0);
        for (int f = (int)(1 + below(3)); f > 0; f--)
            g[below(len)] ^= (uint8_t)(1 + below(255));
        size_t l2 = below(4) == 0 ? below(len + 1) : len;
        int cnt = xt_row_xattr_count(g, l2);
        if (cnt >= 0) {
            xt_row_xattr d[128];   /* > any count a 352-byte group can hold */
            assert_int_equal(xt_row_xattr_decode(g, l2, d, 128), cnt);
            assert_int_equal(xt_row_xattr_encode(d, (size_t)cnt, &out, &out_len), 0);
            assert_int_equal(out_len, l2);
            if (l2)
                assert_memory_equal(out, g, l2);
            xt_free(out);
        } else {
            assert_int_equal(cnt, -EBADMSG);
        }
        xt_free(g);
    }
}

/* ---- allocation failure ------------------------------------------------ */

/* Run `op` with the n-th allocation failing, n = 0, 1, ... until it
 * succeeds; every failure must be a clean -ENOMEM with no output. */
#define COUNTDOWN(op, outp)                                               \
    do {                                                                  \
        long n_;                                                          \
        int rc_ = -ENOMEM;                                                \
        for (n_ = 0; n_ < 100; n_++) {                                    \
            xt_alloc_fail_after(n_);                                      \
            rc_ = (op);                                                   \
            xt_alloc_fail_after(-1);                                      \
            if (rc_ == 0)                                                 \
                break;                                                    \
            assert_int_equal(rc_, -ENOMEM);                               \
            assert_null(outp);                                            \
        }                                                                 \
        assert_int_equal(rc_, 0);                                         \
        assert_true(n_ > 0); /* the first allocation did fail once */     \
        xt_free(outp);                                                    \
    } while (0)

static void test_alloc_failure(void **state)
{
    (void)state;
    for (int i = 0; i < 50; i++) {
        xt_row r;
        gen_row(&r, 1024);
        size_t len, out_len;
        uint8_t *out = NULL, *old = encode(&r, &len);
        COUNTDOWN(xt_row_encode_alloc(&r, &out, &out_len), out);
        xt_row_patch p;
        xt_row_patch_init(&p);
        p.set = XT_ROW_SET_MTIME;
        p.put[p.nput++] = (xt_row_group){ .id = XT_CG_DATA, .ptr = pool, .len = 10 };
        COUNTDOWN(xt_row_update(old, len, &p, &out, &out_len), out);
        xt_free(old);

        xt_row_xattr e[3] = { { (const uint8_t *)"c", 1, pool, 3 },
                              { (const uint8_t *)"a", 1, pool, 0 },
                              { (const uint8_t *)"b", 1, NULL, 0 } };
        uint8_t *g;
        size_t glen;
        COUNTDOWN(xt_row_xattr_encode(e, 3, &out, &out_len), out);
        assert_int_equal(xt_row_xattr_encode(e, 3, &g, &glen), 0);
        COUNTDOWN(xt_row_xattr_set(g, glen, "d", 1, "v", 1, 0, &out, &out_len), out);
        COUNTDOWN(xt_row_xattr_remove(g, glen, "a", 1, &out, &out_len), out);
        xt_free(g);
    }
}

/* Per-test wall time, so a slow test shows up before it hits the timeout. */
static uint64_t t_start;
static int timer_start(void **state)
{
    (void)state;
    t_start = xt_mono_ns();
    return 0;
}
static int timer_stop(void **state)
{
    (void)state;
    printf("  (%.2f s)\n", (double)(xt_mono_ns() - t_start) / 1e9);
    return 0;
}
#define T(f) cmocka_unit_test_setup_teardown(f, timer_start, timer_stop)

int main(void)
{
    const char *env = getenv("XT_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : UINT64_C(0x5eed20240601);
    printf("test_xt_row: seed 0x%" PRIx64 " (replay with XT_TEST_SEED)\n", seed);
    rng = seed;
    for (size_t i = 0; i < POOL_SIZE; i++)
        pool[i] = (uint8_t)rnd();
    const struct CMUnitTest tests[] = {
        T(test_compact_size),
        T(test_round_trip),
        T(test_truncations),
        T(test_corruptions),
        T(test_hostile_corpus),
        T(test_encode_rejects),
        T(test_update_model),
        T(test_update_semantics),
        T(test_update_nlink_add),
        T(test_update_times_max),
        T(test_xattr_model),
        T(test_xattr_limits_and_corruption),
        T(test_alloc_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
