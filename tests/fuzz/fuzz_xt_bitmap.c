/*
 * fuzz_xt_bitmap.c -- libFuzzer target for the bitmap codecs
 * (xtable/xt_bitmap.c): the full image (xt_bitmap_decode) and the gossip
 * delta (xt_bitmap_delta_apply), both of which take bytes from peers.
 *
 * Every input is tried four ways: as an image and as a delta, each once as
 * it is and once after this file rewrote its length field and checksum to
 * match (so mutations get past the checksum to the run and varint parsers).
 * What the decoder accepts must hold the bitmap invariants, checked here:
 *  (1) an accepted image encodes back to the same bytes;
 *  (2) every present slice but 0 has its pred (xt_bitmap.h invariant 2):
 *      checked through lookup/depth agreeing, and by re-decoding;
 *  (3) a delta applied twice sets no new bit the second time (idempotent
 *      OR), and the merged bitmap still encodes and decodes.
 * A violation traps; the sanitizers catch the rest.
 *
 * Seed corpus: tests/fuzz/corpus/xt_bitmap (gen_fuzz_corpus.c).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xt_bitmap.h"
#include "xt_common.h"
#include "xt_hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

/* Whatever b is, it must serialise and come back equal. */
static void check_bitmap(const xt_bitmap *b)
{
    size_t n = xt_bitmap_encoded_size(b);
    uint8_t *buf = malloc(n);
    CHECK(buf != NULL);
    CHECK(xt_bitmap_encode(b, buf, n) == (long)n);
    xt_bitmap *again;
    CHECK(xt_bitmap_decode(buf, n, &again) == 0);
    CHECK(xt_bitmap_equal(b, again));
    free(buf);
    /* every hash lands on a present slice whose depth covers it */
    for (uint32_t vh = 0; vh < 64; vh++) {
        uint32_t h = vh * UINT32_C(0x9e3779b9);
        uint32_t s = xt_bitmap_lookup(b, h);
        CHECK(xt_bitmap_test(b, s));
        unsigned d = xt_bitmap_depth(b, s);
        CHECK(d <= XT_BITMAP_MAX_DEPTH);
        CHECK(d == 32 || (h & ((UINT64_C(1) << d) - 1)) == s);
    }
    CHECK(xt_bitmap_count(b) >= 1 && xt_bitmap_test(b, 0));
    xt_bitmap_free(again);
}

static void try_image(const uint8_t *p, size_t n)
{
    xt_bitmap *b;
    int rc = xt_bitmap_decode(p, n, &b);
    CHECK(rc == 0 || rc == -EBADMSG || rc == -EINVAL || rc == -ENOMEM);
    if (rc != 0) {
        CHECK(b == NULL);
        return;
    }
    size_t en = xt_bitmap_encoded_size(b);
    CHECK(en == n);
    uint8_t *buf = malloc(en);
    CHECK(buf != NULL);
    CHECK(xt_bitmap_encode(b, buf, en) == (long)en);
    CHECK(memcmp(buf, p, n) == 0);
    free(buf);
    check_bitmap(b);
    xt_bitmap_free(b);
}

static void try_delta(const uint8_t *p, size_t n, const xt_bitmap *base)
{
    xt_bitmap *b = base ? xt_bitmap_dup(base) : xt_bitmap_new();
    CHECK(b != NULL);
    uint32_t before = xt_bitmap_count(b);
    int rc = xt_bitmap_delta_apply(b, p, n);
    CHECK(rc >= 0 || rc == -EBADMSG || rc == -ENOSPC || rc == -ENOMEM);
    if (rc >= 0) {
        CHECK(xt_bitmap_count(b) == before + (uint32_t)rc);
        CHECK(xt_bitmap_delta_apply(b, p, n) == 0); /* invariant 3 */
        check_bitmap(b);
        /* a delta of b against the base carries it to an empty peer */
        xt_bitmap *peer = xt_bitmap_new();
        CHECK(peer != NULL);
        size_t dn = xt_bitmap_delta_size(b, NULL);
        uint8_t *d = malloc(dn ? dn : 1);
        CHECK(d != NULL);
        CHECK(xt_bitmap_delta_encode(b, NULL, d, dn) == (long)dn);
        CHECK(xt_bitmap_delta_apply(peer, d, dn) >= 0);
        CHECK(xt_bitmap_equal(peer, b));
        free(d);
        xt_bitmap_free(peer);
    } else if (rc == -EBADMSG) {
        CHECK(xt_bitmap_count(b) == before); /* validated before touching b */
    }
    xt_bitmap_free(b);
}

/* Copy of p with the body length and checksum made to match; hdr is the
 * header size, lenoff the offset of the body length. NULL when too short. */
static uint8_t *fixed_copy(const uint8_t *p, size_t n, size_t hdr, size_t lenoff)
{
    if (n < hdr + XT_BITMAP_CSUM_SIZE)
        return NULL;
    uint8_t *c = malloc(n);
    CHECK(c != NULL);
    memcpy(c, p, n);
    xt_put_u32(c + lenoff, (uint32_t)(n - hdr - XT_BITMAP_CSUM_SIZE));
    xt_put_u64(c + n - XT_BITMAP_CSUM_SIZE,
               xt_hash_bytes(c, n - XT_BITMAP_CSUM_SIZE, XT_BITMAP_CSUM_SEED));
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20))
        return 0;
    try_image(data, size);
    try_delta(data, size, NULL);

    uint8_t *c = fixed_copy(data, size, XT_BITMAP_HDR_SIZE, 16);
    xt_bitmap *base = NULL;
    if (c) {
        /* an image needs its magic and version too; force them so the run
         * parser sees every input */
        xt_put_u32(c, XT_BITMAP_MAGIC);
        xt_put_u16(c + 4, XT_BITMAP_FORMAT_V1);
        xt_put_u16(c + 6, 0);
        xt_put_u64(c + size - XT_BITMAP_CSUM_SIZE,
                   xt_hash_bytes(c, size - XT_BITMAP_CSUM_SIZE, XT_BITMAP_CSUM_SEED));
        try_image(c, size);
        if (xt_bitmap_decode(c, size, &base) != 0)
            base = NULL;
        free(c);
    }
    c = fixed_copy(data, size, XT_BITMAP_DELTA_HDR_SIZE, 12);
    if (c) {
        xt_put_u32(c, XT_BITMAP_DELTA_MAGIC);
        xt_put_u16(c + 4, XT_BITMAP_FORMAT_V1);
        xt_put_u16(c + 6, 0);
        xt_put_u64(c + size - XT_BITMAP_CSUM_SIZE,
                   xt_hash_bytes(c, size - XT_BITMAP_CSUM_SIZE, XT_BITMAP_CSUM_SEED));
        try_delta(c, size, NULL);
        if (base)
            try_delta(c, size, base);
        free(c);
    }
    xt_bitmap_free(base);
    return 0;
}
