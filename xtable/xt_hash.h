/*
 * xt_hash.h -- name hashing and the split-stable order of a table.
 *
 *   h   = XXH3_64(name)
 *   V_h = high 32 bits of h: picks the slice (GIGA+ bitmap, low d bits of V_h)
 *   V_l = low 32 bits of h:  picks the bucket inside a slice
 *
 * Readdir order (DESIGN 3.5). order(h) = bitreverse32(V_h) << 32 | V_l puts the
 * slice-selecting bits (V_h bit 0, bit 1, ...) at the top, so every slice at
 * any depth is one contiguous range of `order`, and a split cuts a range in
 * two. A cookie (the readdir/list offset) is the top 55 bits of `order`
 * followed by a 7-bit collision sequence: 62 bits, so cookie + 1 still fits
 * FUSE's signed 63-bit off_t. Entries sharing the same 55-bit prefix always
 * live in the same slice (d <= 32 < 55) and are numbered 0..127 by
 * (full hash, name); more than 128 such names in one table is an -EOVERFLOW.
 */
#ifndef XT_HASH_H
#define XT_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XT_COOKIE_SEQ_BITS 7
#define XT_COOKIE_SEQ_MAX  ((1u << XT_COOKIE_SEQ_BITS) - 1)
#define XT_COOKIE_END      (UINT64_C(1) << 62) /* no entry has this cookie */

/* Hash of an entry name (any bytes; the name need not be NUL-terminated). */
uint64_t xt_hash_name(const void *name, size_t len);
/* Hash of arbitrary bytes with a seed: placement, record checksums. */
uint64_t xt_hash_bytes(const void *p, size_t len, uint64_t seed);

static inline uint32_t xt_hash_vh(uint64_t h) { return (uint32_t)(h >> 32); }
static inline uint32_t xt_hash_vl(uint64_t h) { return (uint32_t)h; }

static inline uint32_t xt_bitrev32(uint32_t x)
{
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
    return (x >> 16) | (x << 16);
}

/* Position of hash h in the split-stable order of its table. */
static inline uint64_t xt_hash_order(uint64_t h)
{
    return ((uint64_t)xt_bitrev32(xt_hash_vh(h)) << 32) | xt_hash_vl(h);
}

/* Cookie of an entry: 55-bit order prefix, then its collision sequence. */
static inline uint64_t xt_hash_cookie(uint64_t h, unsigned seq)
{
    return ((xt_hash_order(h) >> 9) << XT_COOKIE_SEQ_BITS) | (seq & XT_COOKIE_SEQ_MAX);
}

/* The first cookie of slice `index` at depth `depth` (0 <= depth <= 32):
 * every entry of that slice has cookie >= this and < the range end. */
uint64_t xt_hash_slice_cookie_lo(uint32_t index, unsigned depth);
/* One past the last cookie of that slice (XT_COOKIE_END for the last range). */
uint64_t xt_hash_slice_cookie_hi(uint32_t index, unsigned depth);

#ifdef __cplusplus
}
#endif
#endif /* XT_HASH_H */
