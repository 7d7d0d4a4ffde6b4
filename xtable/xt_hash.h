/*
 * xt_hash.h -- name hashing and the split-stable order of a table.
 *
 *   h   = XXH3_64(name)
 *   V_h = high 32 bits of h: picks the slice (GIGA+ bitmap, low d bits of V_h)
 *   V_l = low 32 bits of h:  picks the bucket inside a slice
 *
 * Readdir order (docs/format-slice.md "Listing order and cookies").
 * order(h) = bitreverse32(V_h) << 32 | V_l puts the
 * slice-selecting bits (V_h bit 0, bit 1, ...) at the top, so every slice at
 * any depth is one contiguous range of `order`, and a split cuts a range in
 * two. A cookie (the readdir/list offset) is the top 55 bits of `order`
 * followed by a 7-bit collision sequence: 62 bits, so cookie + 1 still fits
 * FUSE's signed 63-bit off_t. Entries sharing the same 55-bit prefix always
 * live in the same slice (d <= 32 < 55) and are numbered 0..127 by
 * (full hash, name); more than 128 such names in one table is an -EOVERFLOW.
 *
 * System rows (docs/mds-xact.md). A name that starts with the two bytes
 * 00 FF is a *system row*, written only by the MDS themselves (transaction
 * state). No POSIX name contains NUL, and key/value keys starting with
 * 00 FF are refused, so the two never meet. Layout:
 *
 *   off  size  field
 *   0    2     00 FF            XT_SYS_B0, XT_SYS_B1
 *   2    1     tag              XT_SYS_PENDING, XT_SYS_DECISION, ...
 *   3    8     hash             u64 little-endian: the row's placement hash
 *   11   ...   rest (tag-specific)
 *
 * xt_hash_name of a system row of at least XT_SYS_HEAD bytes is the 8
 * bytes at offset 3, not XXH3: a system row is placed in the slice of the
 * row it concerns, so it splits, moves, is fenced and committed with it.
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

#define XT_SYS_B0       0x00
#define XT_SYS_B1       0xff
#define XT_SYS_HEAD     11   /* prefix, tag and hash */
#define XT_SYS_PENDING  'P'  /* head || xt_hash_bytes(name, XT_SYS_SEED): a
                                transaction's pending change of `name` */
#define XT_SYS_DECISION 'D'  /* head || txid: a transaction's decision */
#define XT_SYS_COUNT    'C'  /* head || txid's 16 bytes: a transaction's count
                                delta on `name` (one per transaction: deltas
                                commute, so they do not block each other) */
#define XT_SYS_OUTBOX   'R'  /* head || sender site, epoch, seq (16 bytes): an
                                RMU not yet delivered (mds_outbox.c), placed
                                with the row whose change it follows */
#define XT_SYS_PEND_LEN (XT_SYS_HEAD + 8)
#define XT_SYS_SEED     UINT64_C(0x706f6d2d70656e64) /* "pom-pend" */

/* Hash of an entry name (any bytes; the name need not be NUL-terminated).
 * A system row's is the hash it carries (above). */
uint64_t xt_hash_name(const void *name, size_t len);

/* Whether name is a system row's (starts with 00 FF). */
static inline int xt_hash_is_sys(const void *name, size_t len)
{
    const unsigned char *p = (const unsigned char *)name;
    return len >= 2 && p[0] == XT_SYS_B0 && p[1] == XT_SYS_B1;
}

/* Writes the head of a system row (tag, placement hash h) into out, which
 * has room for XT_SYS_HEAD bytes. Returns XT_SYS_HEAD. */
size_t xt_hash_sys_head(unsigned char *out, int tag, uint64_t h);
/* The pending row's name for `name` (XT_SYS_PEND_LEN bytes into out):
 * placed with name; two names share one only if both 64-bit hashes collide. */
size_t xt_hash_pend_name(const void *name, size_t len, unsigned char *out);
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
