/*
 * fuzz_xt_slice.c -- libFuzzer target for the slice image and delta
 * decoders (xtable/xt_slice_codec.c: xt_slice_decode, xt_slice_apply_delta), the
 * bytes an MDS loads back from MDSL.
 *
 * Every input is tried as an image and as a delta, once as it is and once
 * with magic, version, reserved fields and trailer checksum rewritten to
 * match (so mutations reach the record parser behind the checksum). What
 * is accepted must hold, checked here:
 *  (1) a decoded image re-encodes to an image that decodes to a slice with
 *      the same rows (count, index, depth, capacity);
 *  (2) a delta applies to a slice of its own (index, depth), and the result
 *      still encodes and decodes (a failed apply may leave a partial slice,
 *      which is freed, never used);
 *  (3) a delta for another (index, depth) is -EINVAL and changes nothing.
 * A violation traps; the sanitizers catch the rest.
 *
 * Seed corpus: tests/fuzz/corpus/xt_slice (gen_fuzz_corpus.c).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"
#include "xt_slice.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

/* Offsets and constants of the format (docs/format-slice.md). */
#define F_HDR 40u
#define F_TRAILER 8u
#define F_IMAGE_MAGIC 0x494C5358u
#define F_DELTA_MAGIC 0x444C5358u
#define F_SEED UINT64_C(0x536c696365763031)

/* A slice must survive its own round trip. */
static void check_roundtrip(const xt_slice *s)
{
    uint8_t *img;
    size_t n;
    CHECK(xt_slice_encode(s, &img, &n) == 0);
    xt_slice *t;
    CHECK(xt_slice_decode(img, n, &t) == 0);
    CHECK(xt_slice_count(t) == xt_slice_count(s));
    CHECK(xt_slice_index(t) == xt_slice_index(s) && xt_slice_depth(t) == xt_slice_depth(s));
    CHECK(xt_slice_capacity(t) == xt_slice_capacity(s));
    uint8_t *img2;
    size_t n2;
    CHECK(xt_slice_encode(t, &img2, &n2) == 0);
    CHECK(n2 == n);
    xt_free(img2);
    xt_free(img);
    xt_slice_free(t);
}

static xt_slice *try_image(const uint8_t *p, size_t n)
{
    xt_slice *s;
    int rc = xt_slice_decode(p, n, &s);
    CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOMEM);
    if (rc != 0)
        return NULL;
    CHECK(xt_slice_count(s) <= xt_slice_capacity(s));
    check_roundtrip(s);
    return s;
}

static void try_delta(const uint8_t *p, size_t n, const xt_slice *image)
{
    if (n < F_HDR + F_TRAILER)
        return;
    unsigned depth = p[6];
    uint32_t index = xt_get_u32(p + 8);
    if (depth > XT_SLICE_MAX_DEPTH || (depth < 32 && (index >> depth)))
        return;
    /* a slice of the delta's own (index, depth), and one of another */
    xt_slice *s = xt_slice_new(index, depth, 64);
    CHECK(s != NULL);
    int rc = xt_slice_apply_delta(s, p, n);
    CHECK(rc == 0 || rc == -EBADMSG || rc == -ENOSPC || rc == -EOVERFLOW || rc == -ENOMEM);
    if (rc == 0) {
        CHECK(xt_slice_count(s) <= 64);
        check_roundtrip(s);
    }
    xt_slice_free(s);
    if (depth < 32) {
        xt_slice *o = xt_slice_new(index, depth + 1, 64);
        CHECK(o != NULL);
        rc = xt_slice_apply_delta(o, p, n);
        CHECK(rc == -EINVAL || rc == -EBADMSG);
        CHECK(xt_slice_count(o) == 0);
        xt_slice_free(o);
    }
    if (image && xt_slice_index(image) == index && xt_slice_depth(image) == depth) {
        uint8_t *img;
        size_t in;
        CHECK(xt_slice_encode(image, &img, &in) == 0);
        xt_slice *t;
        CHECK(xt_slice_decode(img, in, &t) == 0);
        xt_free(img);
        if (xt_slice_apply_delta(t, p, n) == 0)
            check_roundtrip(t);
        xt_slice_free(t);
    }
}

/* p with magic, version, reserved fields and checksum made valid. */
static uint8_t *fixed_copy(const uint8_t *p, size_t n, uint32_t magic)
{
    if (n < F_HDR + F_TRAILER)
        return NULL;
    uint8_t *c = malloc(n);
    CHECK(c != NULL);
    memcpy(c, p, n);
    xt_put_u32(c, magic);
    xt_put_u16(c + 4, 1);
    c[7] = 0;
    xt_put_u32(c + 20, 0);
    if (magic == F_DELTA_MAGIC)
        xt_put_u32(c + 16, 0);
    xt_put_u64(c + n - F_TRAILER, xt_hash_bytes(c, n - F_TRAILER, F_SEED));
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    xt_slice *img = try_image(data, size);
    try_delta(data, size, NULL);
    xt_slice_free(img);

    uint8_t *c = fixed_copy(data, size, F_IMAGE_MAGIC);
    if (c == NULL)
        return 0;
    /* a capacity of millions makes each run slow without finding more */
    if (xt_get_u32(c + 16) > 4096) {
        xt_put_u32(c + 16, xt_get_u32(c + 16) % 4096 + 1);
        xt_put_u64(c + size - F_TRAILER, xt_hash_bytes(c, size - F_TRAILER, F_SEED));
    }
    img = try_image(c, size);
    free(c);
    c = fixed_copy(data, size, F_DELTA_MAGIC);
    try_delta(c, size, img);
    free(c);
    xt_slice_free(img);
    return 0;
}
