/*
 * fuzz_xt_row.c -- libFuzzer target for the row codec (xtable/xt_row.c).
 *
 * Every input is used four ways:
 *  1. decoded as a row as it is (checksums make most mutations fail early);
 *  2. decoded after this file's own lenient walker recomputed its group and
 *     meta checksums, so mutations reach every structural check behind them;
 *  3. parsed as an xattr group (which has no checksum of its own);
 *  4. read as a stream of choices that builds a row view and a patch, which
 *     are encoded, decoded and applied.
 * Whatever the codec accepts must satisfy its invariants, checked here:
 * encode(decode(b)) == b, the stat path agrees with the full decode, every
 * group is reachable by id, and updates bump the version. A violation
 * traps; sanitizers catch the rest.
 *
 * Build (the seed corpus is in tests/fuzz/corpus/xt_row/):
 *   clang -fsanitize=fuzzer,address -I xtable tests/fuzz/fuzz_xt_row.c \
 *     xtable/xt_row.c xtable/xt_hash.c xtable/xt_alloc.c xtable/xt_log.c -lxxhash
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"
#include "xt_row.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

/* ---- invariants of an accepted row ----------------------------------- */

static void check_xattr_group(const uint8_t *g, size_t len);

static void check_row(const uint8_t *buf, size_t len)
{
    xt_row d, m;
    if (xt_row_decode(buf, len, &d) != 0)
        return;
    CHECK(d.name_len >= 1 && d.name >= buf && d.name + d.name_len <= buf + len);
    uint8_t *again = malloc(len);
    CHECK(again != NULL);
    CHECK(xt_row_encode(&d, again, len) == (ssize_t)len);
    CHECK(memcmp(again, buf, len) == 0);
    free(again);
    CHECK(xt_row_decode_meta(buf, len, &m) == 0);
    CHECK(m.ngroups == d.ngroups && m.attr.version == d.attr.version);
    for (uint32_t i = 0; i < d.ngroups; i++) {
        const uint8_t *p;
        uint32_t gl;
        CHECK(xt_row_get_group(buf, len, d.groups[i].id, &p, &gl) == 0);
        CHECK(p == d.groups[i].ptr && gl == d.groups[i].len);
        if (d.groups[i].id == XT_CG_XATTR)
            check_xattr_group(p, gl);
    }
    xt_row_patch patch;
    xt_row_patch_init(&patch);
    uint8_t *out;
    size_t out_len;
    int rc = xt_row_update(buf, len, &patch, &out, &out_len);
    if (d.attr.version == UINT64_MAX) {
        CHECK(rc == -EOVERFLOW);
        return;
    }
    if (rc == -E2BIG) {              /* the longer version passed the limit */
        CHECK(len + 9 > XT_ROW_ENCODED_MAX);
        return;
    }
    CHECK(rc == 0);
    xt_row n;
    CHECK(xt_row_decode(out, out_len, &n) == 0);
    CHECK(n.attr.version == d.attr.version + 1 && n.ngroups == d.ngroups);
    xt_free(out);
}

/* ---- a lenient walker that repairs checksums -------------------------- */

static bool walk_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (*p >= end)
            return false;
        uint8_t b = *(*p)++;
        if (shift < 64)
            *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* Recompute every checksum of b[0..n) where this walker can find it. */
static void fix_checksums(uint8_t *b, size_t n)
{
    const uint8_t *p = b + 2, *end = b + n;
    uint64_t v, ng;
    if (n < 2)
        return;
    for (int i = 0; i < 13; i++)
        if (!walk_varint(&p, end, &v))
            return;
    if (!walk_varint(&p, end, &v) || v > (uint64_t)(end - p))
        return;
    p += v;
    if (!walk_varint(&p, end, &ng) || ng > 64)
        return;
    uint64_t ids[64], lens[64];
    uint8_t *csum[64];
    for (uint64_t i = 0; i < ng; i++) {
        if (!walk_varint(&p, end, &ids[i]) || !walk_varint(&p, end, &lens[i]) || end - p < 4)
            return;
        csum[i] = (uint8_t *)p;
        p += 4;
    }
    if (end - p < 4)
        return;
    uint8_t *meta_csum = (uint8_t *)p;
    size_t off = (size_t)(p + 4 - b);
    for (uint64_t i = 0; i < ng; i++) {
        if (lens[i] > n - off)
            break;
        uint32_t c = (uint32_t)xt_hash_bytes(b + off, (size_t)lens[i],
                                             XT_ROW_SEED_GROUP ^ (uint16_t)ids[i]);
        xt_put_u32(csum[i], c);
        off += (size_t)lens[i];
    }
    xt_put_u32(meta_csum, (uint32_t)xt_hash_bytes(b, (size_t)(meta_csum - b), XT_ROW_SEED_META));
}

/* ---- xattr groups ----------------------------------------------------- */

static void check_xattr_group(const uint8_t *g, size_t len)
{
    int n = xt_row_xattr_count(g, len);
    if (n < 0)
        return;
    xt_row_xattr *arr = malloc(((size_t)n + 1) * sizeof *arr);
    CHECK(arr != NULL);
    CHECK(xt_row_xattr_decode(g, len, arr, (size_t)n) == n);
    uint8_t *out;
    size_t out_len;
    CHECK(xt_row_xattr_encode(arr, (size_t)n, &out, &out_len) == 0);
    CHECK(out_len == len && (len == 0 || memcmp(out, g, len) == 0));
    xt_free(out);
    ssize_t need = xt_row_xattr_list(g, len, NULL, 0);
    CHECK(need >= 0);
    char *list = malloc((size_t)need + 1);
    CHECK(list != NULL);
    CHECK(need == 0 || xt_row_xattr_list(g, len, list, (size_t)need) == need);
    free(list);
    for (int i = 0; i < n; i++) {
        const uint8_t *v;
        uint32_t vl;
        CHECK(xt_row_xattr_get(g, len, arr[i].name, arr[i].name_len, &v, &vl) == 0);
        CHECK(v == arr[i].value && vl == arr[i].value_len);
    }
    if (n > 0) {
        CHECK(xt_row_xattr_remove(g, len, arr[0].name, arr[0].name_len, &out, &out_len) == 0);
        CHECK(xt_row_xattr_count(out, out_len) == n - 1);
        xt_free(out);
        int rc = xt_row_xattr_set(g, len, arr[0].name, arr[0].name_len, g, len % 97, 0,
                                  &out, &out_len);
        CHECK(rc == 0 || rc == -ENOSPC);
        if (rc == 0) {
            CHECK(xt_row_xattr_count(out, out_len) == n);
            xt_free(out);
        }
    }
    free(arr);
}

/* ---- rows built from a stream of choices ------------------------------ */

struct src {
    const uint8_t *p;
    size_t n;
};

static uint64_t take(struct src *s, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes && s->n > 0; i++, s->n--)
        v = (v << 8) | *s->p++;
    return v;
}

/* take() capped at `max` (XT_MIN would call take twice). */
static uint64_t take_max(struct src *s, unsigned bytes, uint64_t max)
{
    uint64_t v = take(s, bytes);
    return v < max ? v : max;
}

static void build_and_check(const uint8_t *data, size_t size)
{
    struct src s = { data, size };
    xt_row r;
    xt_row_init(&r);
    xt_row_attr *a = &r.attr;
    a->type = (uint8_t)(take(&s, 1) % (XT_ROW_TYPE_MAX + 2));
    a->uuid = take(&s, 8);
    a->mode = (uint32_t)take(&s, 4);
    a->nlink = (uint32_t)take(&s, 1);
    a->size = take(&s, 3);
    a->ctime_ns = take(&s, 8);
    a->mtime_ns = a->ctime_ns + take(&s, 2);
    a->atime_ns = take(&s, 8);
    a->version = take(&s, 8);
    uint32_t nl = (uint32_t)take(&s, 2) % (XT_ROW_KEY_MAX + 2);
    r.name_len = nl;
    r.name = data;
    if (nl > size)
        r.name_len = (uint32_t)size;
    unsigned ng = (unsigned)take(&s, 1) % 8;
    for (unsigned i = 0; i < ng; i++) {
        uint16_t id = (uint16_t)take(&s, 2);
        uint32_t len = (uint32_t)take_max(&s, 2, size);
        int rc = xt_row_view_set_group(&r, id, data, len);
        CHECK(rc == 0 || (rc == -EINVAL && id == 0) || rc == -E2BIG);
    }
    ssize_t need = xt_row_encoded_size(&r);
    uint8_t *out;
    size_t out_len;
    int rc = xt_row_encode_alloc(&r, &out, &out_len);
    if (need < 0) {
        CHECK(rc == need && out == NULL);
        return;
    }
    CHECK(rc == 0 && out_len == (size_t)need);
    xt_row d;
    CHECK(xt_row_decode(out, out_len, &d) == 0);
    CHECK(d.attr.uuid == a->uuid && d.attr.mtime_ns == a->mtime_ns &&
          d.attr.atime_ns == a->atime_ns && d.name_len == r.name_len && d.ngroups == r.ngroups);
    check_row(out, out_len);

    /* a patch from the rest of the stream */
    xt_row_patch p;
    xt_row_patch_init(&p);
    p.set = (uint32_t)take(&s, 2);
    p.attr.type = (uint8_t)(take(&s, 1) % (XT_ROW_TYPE_MAX + 2));
    p.attr.size = take(&s, 8);
    p.name = data;
    p.name_len = (uint32_t)take_max(&s, 1, size);
    p.if_version = take(&s, 1) ? a->version : a->version ^ 1;
    p.nput = (uint32_t)take(&s, 1) % 4;
    for (uint32_t i = 0; i < p.nput; i++)
        p.put[i] = (xt_row_group){ .id = (uint16_t)take(&s, 1), .ptr = data,
                                   .len = (uint32_t)take_max(&s, 1, size) };
    p.ndel = (uint32_t)take(&s, 1) % 4;
    for (uint32_t i = 0; i < p.ndel; i++)
        p.del[i] = (uint16_t)take(&s, 1);
    uint8_t *upd;
    size_t upd_len;
    rc = xt_row_update(out, out_len, &p, &upd, &upd_len);
    if (rc == 0) {
        CHECK(xt_row_decode(upd, upd_len, &d) == 0);
        CHECK(d.attr.version == a->version + 1);
        if (p.set & XT_ROW_SET_SIZE)
            CHECK(d.attr.size == p.attr.size);
        for (uint32_t i = 0; i < p.nput; i++)
            CHECK(xt_row_view_group(&d, p.put[i].id) != NULL);
        xt_free(upd);
    } else {
        CHECK(upd == NULL);
    }
    xt_free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_row(data, size);
    uint8_t *copy = malloc(size ? size : 1);
    CHECK(copy != NULL);
    if (size)
        memcpy(copy, data, size);
    fix_checksums(copy, size);
    check_row(copy, size);
    free(copy);
    check_xattr_group(data, size);
    build_and_check(data, size);
    return 0;
}
