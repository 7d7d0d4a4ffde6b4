/*
 * xt_bitmap.h -- the GIGA+ extendible-hash bitmap of one table.
 *
 * Bit i is set when slice i exists. Slice 0 always exists (depth 0). Slice i
 * at depth d splits into i (depth d+1) and i + 2^d (depth d+1). The slice of
 * a hash is found from the deepest depth up: the largest d such that bit
 * (V_h mod 2^d) is set. A slice's depth is derived, never stored: the
 * smallest d with 2^d > i such that bit i + 2^d is clear.
 *
 * Invariants:
 *  (1) Bits are only ever set, never cleared: merging two views of the same
 *      table is a bitwise OR, commutative and idempotent, so gossip can
 *      deliver deltas in any order, any number of times.
 *  (2) A child has its parent, and a parent split in depth order. Precisely:
 *      every present slice c > 0 has pred(c) present, where, with e the top
 *      set bit of c, pred(1) = 0 and pred(c) = c with bit e cleared and bit
 *      e-1 set. (For c = p + 2^e, pred(c) is p itself when p >= 2^(e-1),
 *      else p + 2^(e-1): the split of p that had to happen before c.) A set
 *      closed under pred is exactly a set reachable by splits from {0}, and
 *      it is what makes the lookup and depth rules above correct.
 *  (3) Depth is bounded by XT_BITMAP_MAX_DEPTH (V_h is 32 bits) and the
 *      number of slices by XT_BITMAP_MAX_SLICES.
 *
 * Memory is proportional to the slices present, not to 2^depth: a dense bit
 * array covers the low indices, and indices far above the dense part (a deep
 * split of a skewed table) sit in a sorted list (see xt_bitmap.c).
 *
 * Not thread-safe: the owner (an MDS table entry, a client cache) locks it.
 *
 * Wire formats (little-endian; docs/format-bitmap.md). Full image:
 *
 *   off  size  field
 *   0    4     magic XT_BITMAP_MAGIC ("XTBM")
 *   4    2     format version (1)
 *   6    2     flags (0)
 *   8    4     count: present slices (1 .. XT_BITMAP_MAX_SLICES)
 *   12   4     highest present index
 *   16   4     L: body length in bytes
 *   20   L     body: runs over the 64-bit words 0 .. highest/64 of the bit
 *              array, each run { u8 kind, u32 n >= 1 } then, for kind 2,
 *              n u64 words. kind 0 = n zero words, 1 = n all-ones words,
 *              2 = n literal words (none 0 or all-ones). Runs are maximal
 *              (two adjacent runs never share a kind), so the encoding of a
 *              bitmap is unique.
 *   20+L 8     checksum: xt_hash_bytes(bytes [0, 20+L), XT_BITMAP_CSUM_SEED)
 *
 * Delta (gossip):
 *
 *   off  size  field
 *   0    4     magic XT_BITMAP_DELTA_MAGIC ("XTBD")
 *   4    2     format version (1)
 *   6    2     flags (0)
 *   8    4     n: number of indices (0 .. XT_BITMAP_MAX_SLICES)
 *   12   4     L: body length in bytes
 *   16   L     n LEB128 varints (canonical, <= 5 bytes): the first index
 *              (>= 1), then the gap (>= 1) to each next one; ascending
 *   16+L 8     checksum: xt_hash_bytes(bytes [0, 16+L), XT_BITMAP_CSUM_SEED)
 */
#ifndef XT_BITMAP_H
#define XT_BITMAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XT_BITMAP_MAX_DEPTH 32
/* 16M slices of 8192 rows is 137G entries in one directory; the bound keeps
 * a hostile or corrupt peer from making decode allocate without limit. */
#define XT_BITMAP_MAX_SLICES (UINT32_C(1) << 24)

#define XT_BITMAP_MAGIC        UINT32_C(0x4d425458) /* "XTBM" little-endian */
#define XT_BITMAP_DELTA_MAGIC  UINT32_C(0x44425458) /* "XTBD" little-endian */
#define XT_BITMAP_FORMAT_V1    1
#define XT_BITMAP_HDR_SIZE     20
#define XT_BITMAP_DELTA_HDR_SIZE 16
#define XT_BITMAP_CSUM_SIZE    8
#define XT_BITMAP_CSUM_SEED    UINT64_C(0x6269746d61702b31) /* "bitmap+1" */

typedef struct xt_bitmap xt_bitmap;

/* A new bitmap with only slice 0. Caller frees with xt_bitmap_free. NULL on ENOMEM. */
xt_bitmap *xt_bitmap_new(void);
void xt_bitmap_free(xt_bitmap *b); /* NULL is a no-op */
/* A deep copy; caller frees. NULL on ENOMEM. */
xt_bitmap *xt_bitmap_dup(const xt_bitmap *b);

/* The slice that holds names with this V_h. At most 33 probes. */
uint32_t xt_bitmap_lookup(const xt_bitmap *b, uint32_t vh);
/* Is slice i present? 1 or 0. */
int xt_bitmap_test(const xt_bitmap *b, uint32_t i);
/* Depth of present slice i: the number of low V_h bits that select it.
 * REQUIRES: xt_bitmap_test(b, i). */
unsigned xt_bitmap_depth(const xt_bitmap *b, uint32_t i);
/* Split slice i (present, at depth d): sets bit i + 2^d. Returns the new
 * slice's index in *child (may be NULL). -EINVAL if i is absent, -ERANGE if
 * i is at XT_BITMAP_MAX_DEPTH, -ENOSPC at XT_BITMAP_MAX_SLICES, -ENOMEM. On
 * error b is unchanged. */
int xt_bitmap_split(xt_bitmap *b, uint32_t i, uint32_t *child);
/* Record that slice i exists (learnt from a remote split). A slice implies
 * its whole pred chain (invariant 2), so the chain is set too, lowest first.
 * Returns the number of bits newly set (0 if i was present), -ENOSPC or
 * -ENOMEM; on error b holds a valid bitmap between the old and the new. */
int xt_bitmap_set(xt_bitmap *b, uint32_t i);
/* b |= other. Returns the number of bits newly set, -ENOSPC or -ENOMEM; on
 * error b holds a valid bitmap between b and b|other (bits are added in
 * ascending order, so every prefix keeps invariant 2), and a retry
 * completes the merge. */
int xt_bitmap_merge(xt_bitmap *b, const xt_bitmap *other);
/* Number of present slices; highest present index + 1. The span saturates
 * at UINT32_MAX when slice 0xffffffff exists (xt_bitmap_next is exact). */
uint32_t xt_bitmap_count(const xt_bitmap *b);
uint32_t xt_bitmap_span(const xt_bitmap *b);
/* The smallest present index >= from, or -1 when there is none. */
int64_t xt_bitmap_next(const xt_bitmap *b, uint64_t from);
/* 1 when a and b hold the same slices, else 0. */
int xt_bitmap_equal(const xt_bitmap *a, const xt_bitmap *b);

/* Serialisation of the full bitmap (format above). encode writes exactly
 * xt_bitmap_encoded_size(b) bytes into buf (cap must be >= it) and returns
 * the count or -ENOSPC. decode returns a new bitmap in *out (caller frees;
 * *out is NULL on error): -EBADMSG when buf is not a well-formed encoding
 * (truncated, bad magic/version/flags/length/checksum, run structure, count
 * or highest not matching the bits), -EINVAL when it is well-formed but the
 * bitmap breaks an invariant (slice 0 absent, a slice without its pred,
 * more than XT_BITMAP_MAX_SLICES), -ENOMEM. It never reads outside
 * [buf, buf+len), and a bitmap it accepts encodes back to the same bytes. */
size_t xt_bitmap_encoded_size(const xt_bitmap *b);
long xt_bitmap_encode(const xt_bitmap *b, void *buf, size_t cap);
int xt_bitmap_decode(const void *buf, size_t len, xt_bitmap **out);

/* Gossip deltas. A delta carries the slices of b that are not in base (base
 * is what the peers are known to have, e.g. a copy of b taken at the last
 * gossip round; NULL means "nothing but slice 0"). Only the tops of pred
 * chains are sent: applying sets each index with its chain, so a peer
 * holding R ends with R | (b minus base), which is R | b whenever R holds
 * base; since merge is OR (invariant 1) deltas may be applied in any order,
 * twice, or to a stale peer, which always stays a valid bitmap.
 * delta_size is the exact encoded size; delta_encode writes it or returns
 * -ENOSPC; delta_apply validates the whole message before touching b
 * (-EBADMSG on any malformed input, never reading outside [buf, buf+len)),
 * then merges it and returns the number of bits newly set, -ENOSPC or
 * -ENOMEM (b then valid, partly merged; re-applying completes it). */
size_t xt_bitmap_delta_size(const xt_bitmap *b, const xt_bitmap *base);
long xt_bitmap_delta_encode(const xt_bitmap *b, const xt_bitmap *base, void *buf,
                            size_t cap);
int xt_bitmap_delta_apply(xt_bitmap *b, const void *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* XT_BITMAP_H */
