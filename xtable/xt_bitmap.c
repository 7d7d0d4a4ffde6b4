/*
 * xt_bitmap.c -- the GIGA+ bitmap: which slices of a table exist.
 *
 * Representation. A table split evenly has its slices packed in [0, span);
 * a skewed one (many names sharing low V_h bits) splits one slice over and
 * over and reaches indices near 2^31 with a handful of slices. So the bits
 * live in two parts: a dense bit array for [0, 64 * dense_words) and a
 * sorted array of the present indices above it. The dense part doubles
 * whenever at least 1 in XB_DENSITY of the indices below the doubled bound
 * are present: at that density a bit per index costs no more than a u32 per
 * present slice, so memory stays within ~2 x 4 bytes per present slice
 * whatever the shape, and lookups of an even table stay one load per probe.
 *
 * Invariants (of every xt_bitmap outside a function of this file):
 *  (1) count == number of present indices, highest == the largest one,
 *      slice 0 is present, count <= XT_BITMAP_MAX_SLICES.
 *  (2) dense_words is a power of two in [1, XB_MAX_DENSE_WORDS]; sparse[]
 *      holds exactly the present indices >= 64 * dense_words, strictly
 *      ascending; dense bits above `highest` are clear.
 *  (3) The set is closed under pred() (header invariant 2). Every mutation
 *      adds indices in ascending order and each after its pred, so (3) holds
 *      after every single insertion, which is why a failed merge or set can
 *      stop half-way without leaving an invalid bitmap.
 */
#include "xt_bitmap.h"

#include <assert.h>
#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"

#define XB_DENSITY          32                  /* see file comment */
#define XB_MAX_DENSE_WORDS  (UINT32_C(1) << 26) /* 2^32 bits */

enum { XB_RUN_ZERO = 0, XB_RUN_ONES = 1, XB_RUN_LIT = 2 };
#define XB_RUN_HDR 5 /* u8 kind + u32 n */

struct xt_bitmap {
    uint64_t *dense;      /* dense_words words: bits [0, 64 * dense_words) */
    uint32_t dense_words;
    uint32_t *sparse;     /* present indices >= 64 * dense_words, ascending */
    uint32_t nsparse;
    uint32_t sparse_cap;
    uint32_t count;
    uint32_t highest;
};

/* REQUIRES: x != 0. */
static inline unsigned msb32(uint32_t x)
{
    assert(x != 0);
    return 31u - (unsigned)__builtin_clz(x);
}

/* Number of significant bits: 0 for 0, msb + 1 otherwise. */
static inline unsigned bitlen64(uint64_t x)
{
    return x ? 64u - (unsigned)__builtin_clzll(x) : 0u;
}

static inline uint64_t dense_bits(const xt_bitmap *b)
{
    return (uint64_t)b->dense_words * 64;
}

/* pred(c) of header invariant (2). REQUIRES: c > 0. */
static uint32_t bm_pred(uint32_t c)
{
    assert(c > 0);
    unsigned e = msb32(c);
    if (e == 0)
        return 0;
    return (c & ~(UINT32_C(1) << e)) | (UINT32_C(1) << (e - 1));
}

/* First position in sparse[] whose value is >= v. */
static uint32_t sparse_lower(const xt_bitmap *b, uint64_t v)
{
    uint32_t lo = 0, hi = b->nsparse;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (b->sparse[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int xt_bitmap_test(const xt_bitmap *b, uint32_t i)
{
    if (i < dense_bits(b))
        return (int)((b->dense[i >> 6] >> (i & 63)) & 1);
    if (i > b->highest)
        return 0;
    uint32_t p = sparse_lower(b, i);
    return p < b->nsparse && b->sparse[p] == i;
}

/* The density rule: should a dense part of dense_words words double, given
 * that below_doubled present indices lie under the doubled bound? Shared by
 * the incremental path and decode so both settle on the same shape. */
static int dense_should_double(uint64_t dense_words, uint64_t below_doubled)
{
    uint64_t nbits = dense_words * 128;
    return dense_words < XB_MAX_DENSE_WORDS && below_doubled * XB_DENSITY >= nbits;
}

/* Move sparse indices into the dense array while the density rule says so.
 * An allocation failure here is harmless (sparse is correct, just slower). */
static void bm_grow_dense(xt_bitmap *b)
{
    for (;;) {
        uint64_t nbits = dense_bits(b) * 2;
        uint32_t moving = sparse_lower(b, nbits);
        uint64_t below = (uint64_t)(b->count - b->nsparse) + moving;
        if (!dense_should_double(b->dense_words, below))
            return;
        uint64_t *d = xt_realloc(b->dense, (size_t)(nbits / 8));
        if (!d)
            return;
        memset(d + b->dense_words, 0, (size_t)b->dense_words * 8);
        b->dense = d;
        b->dense_words *= 2;
        for (uint32_t k = 0; k < moving; k++) {
            uint32_t i = b->sparse[k];
            b->dense[i >> 6] |= UINT64_C(1) << (i & 63);
        }
        if (moving) {
            memmove(b->sparse, b->sparse + moving,
                    (size_t)(b->nsparse - moving) * sizeof(uint32_t));
            b->nsparse -= moving;
        }
    }
}

/* Add absent index i. REQUIRES: !test(b, i), pred(i) present (i > 0). */
static int bm_insert(xt_bitmap *b, uint32_t i)
{
    assert(!xt_bitmap_test(b, i));
    assert(i > 0 && xt_bitmap_test(b, bm_pred(i)));
    if (b->count >= XT_BITMAP_MAX_SLICES)
        return -ENOSPC;
    if (i < dense_bits(b)) {
        b->dense[i >> 6] |= UINT64_C(1) << (i & 63);
    } else {
        if (b->nsparse == b->sparse_cap) {
            uint32_t cap = b->sparse_cap ? b->sparse_cap * 2 : 8;
            uint32_t *s = xt_realloc(b->sparse, (size_t)cap * sizeof(uint32_t));
            if (!s)
                return -ENOMEM;
            b->sparse = s;
            b->sparse_cap = cap;
        }
        uint32_t p = sparse_lower(b, i);
        memmove(b->sparse + p + 1, b->sparse + p,
                (size_t)(b->nsparse - p) * sizeof(uint32_t));
        b->sparse[p] = i;
        b->nsparse++;
    }
    b->count++;
    if (i > b->highest)
        b->highest = i;
    bm_grow_dense(b);
    return 0;
}

xt_bitmap *xt_bitmap_new(void)
{
    xt_bitmap *b = xt_calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    b->dense = xt_calloc(1, sizeof(uint64_t));
    if (!b->dense) {
        xt_free(b);
        return NULL;
    }
    b->dense_words = 1;
    b->dense[0] = 1;
    b->count = 1;
    return b;
}

void xt_bitmap_free(xt_bitmap *b)
{
    if (!b)
        return;
    xt_free(b->dense);
    xt_free(b->sparse);
    xt_free(b);
}

xt_bitmap *xt_bitmap_dup(const xt_bitmap *b)
{
    xt_bitmap *c = xt_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    *c = *b;
    c->sparse = NULL;
    c->sparse_cap = c->nsparse;
    c->dense = xt_malloc((size_t)b->dense_words * 8);
    if (b->nsparse)
        c->sparse = xt_malloc((size_t)b->nsparse * sizeof(uint32_t));
    if (!c->dense || (b->nsparse && !c->sparse)) {
        xt_bitmap_free(c);
        return NULL;
    }
    memcpy(c->dense, b->dense, (size_t)b->dense_words * 8);
    if (b->nsparse)
        memcpy(c->sparse, b->sparse, (size_t)b->nsparse * sizeof(uint32_t));
    return c;
}

/* Deepest first: V_h mod 2^d for d going down only changes when a set bit
 * of V_h drops out, so clear V_h's top bits one at a time; bits at or above
 * the length of `highest` can only name absent slices. The first present
 * one is the owner (invariant 3 makes it a leaf). */
uint32_t xt_bitmap_lookup(const xt_bitmap *b, uint32_t vh)
{
    if (b->highest == 0)
        return 0;
    uint32_t x = vh & (UINT32_MAX >> (31 - msb32(b->highest)));
    while (x && !xt_bitmap_test(b, x))
        x &= ~(UINT32_C(1) << msb32(x));
    assert(xt_bitmap_test(b, x)); /* slice 0 is always present */
    return x;
}

unsigned xt_bitmap_depth(const xt_bitmap *b, uint32_t i)
{
    assert(xt_bitmap_test(b, i));
    unsigned d = (unsigned)bitlen64(i);
    while (d < XT_BITMAP_MAX_DEPTH && xt_bitmap_test(b, i + (UINT32_C(1) << d)))
        d++;
    return d;
}

int xt_bitmap_split(xt_bitmap *b, uint32_t i, uint32_t *child)
{
    if (!xt_bitmap_test(b, i))
        return -EINVAL;
    unsigned d = xt_bitmap_depth(b, i);
    if (d >= XT_BITMAP_MAX_DEPTH)
        return -ERANGE;
    uint32_t c = i + (UINT32_C(1) << d);
    int rc = bm_insert(b, c);
    if (rc < 0)
        return rc;
    if (child)
        *child = c;
    return 0;
}

int xt_bitmap_set(xt_bitmap *b, uint32_t i)
{
    uint32_t chain[XT_BITMAP_MAX_DEPTH + 1];
    int n = 0;
    /* A pred chain strictly decreases to 0 through at most one index per
     * bit length, so it has at most 33 members, the last one present. */
    while (!xt_bitmap_test(b, i)) {
        assert(n < (int)XT_ARRAY_SIZE(chain));
        chain[n++] = i;
        i = bm_pred(i);
    }
    for (int k = n - 1; k >= 0; k--) {
        int rc = bm_insert(b, chain[k]);
        if (rc < 0)
            return rc;
    }
    return n;
}

int64_t xt_bitmap_next(const xt_bitmap *b, uint64_t from)
{
    if (from > b->highest)
        return -1;
    if (from < dense_bits(b)) {
        uint64_t k = from >> 6;
        uint64_t w = b->dense[k] & (~UINT64_C(0) << (from & 63));
        for (;;) {
            if (w)
                return (int64_t)(k * 64 + (uint64_t)__builtin_ctzll(w));
            if (++k == b->dense_words || k * 64 > b->highest)
                break;
            w = b->dense[k];
        }
        from = dense_bits(b);
    }
    uint32_t p = sparse_lower(b, from);
    return p < b->nsparse ? (int64_t)b->sparse[p] : -1;
}

int xt_bitmap_merge(xt_bitmap *b, const xt_bitmap *other)
{
    int added = 0;
    /* Ascending order keeps invariant (3) after every insertion: the pred of
     * an index of `other` is smaller and already present or just added. */
    for (int64_t i = xt_bitmap_next(other, 1); i >= 0;
         i = xt_bitmap_next(other, (uint64_t)i + 1)) {
        if (xt_bitmap_test(b, (uint32_t)i))
            continue;
        int rc = bm_insert(b, (uint32_t)i);
        if (rc < 0)
            return rc;
        added++;
    }
    return added;
}

uint32_t xt_bitmap_count(const xt_bitmap *b)
{
    return b->count;
}

uint32_t xt_bitmap_span(const xt_bitmap *b)
{
    return b->highest == UINT32_MAX ? UINT32_MAX : b->highest + 1;
}

int xt_bitmap_equal(const xt_bitmap *a, const xt_bitmap *b)
{
    if (a->count != b->count || a->highest != b->highest)
        return 0;
    for (int64_t i = xt_bitmap_next(a, 0); i >= 0;
         i = xt_bitmap_next(a, (uint64_t)i + 1))
        if (!xt_bitmap_test(b, (uint32_t)i))
            return 0;
    return 1;
}

/* ---- full image ------------------------------------------------------ */

/* Word k of the logical bit array. */
static uint64_t bm_word(const xt_bitmap *b, uint64_t k)
{
    if (k < b->dense_words)
        return b->dense[k];
    uint64_t w = 0;
    for (uint32_t p = sparse_lower(b, k * 64);
         p < b->nsparse && b->sparse[p] < (k + 1) * 64; p++)
        w |= UINT64_C(1) << (b->sparse[p] & 63);
    return w;
}

/* Writes the body into out (NULL: only measure); returns its length. */
static size_t bm_encode_body(const xt_bitmap *b, uint8_t *out)
{
    uint64_t nwords = (uint64_t)b->highest / 64 + 1;
    size_t pos = 0;
    for (uint64_t k = 0; k < nwords;) {
        uint64_t w = bm_word(b, k), n = 1, v;
        uint8_t kind;
        if (w == 0) {
            /* Not the last word (it holds `highest`), so a set bit follows. */
            kind = XB_RUN_ZERO;
            n = (uint64_t)xt_bitmap_next(b, (k + 1) * 64) / 64 - k;
        } else if (w == ~UINT64_C(0)) {
            kind = XB_RUN_ONES;
            while (k + n < nwords && bm_word(b, k + n) == ~UINT64_C(0))
                n++;
        } else {
            kind = XB_RUN_LIT;
            while (k + n < nwords && (v = bm_word(b, k + n)) != 0 && v != ~UINT64_C(0))
                n++;
        }
        if (out) {
            out[pos] = kind;
            xt_put_u32(out + pos + 1, (uint32_t)n);
        }
        pos += XB_RUN_HDR;
        if (kind == XB_RUN_LIT) {
            for (uint64_t j = 0; j < n; j++, pos += 8)
                if (out)
                    xt_put_u64(out + pos, bm_word(b, k + j));
        }
        k += n;
    }
    return pos;
}

size_t xt_bitmap_encoded_size(const xt_bitmap *b)
{
    return XT_BITMAP_HDR_SIZE + bm_encode_body(b, NULL) + XT_BITMAP_CSUM_SIZE;
}

long xt_bitmap_encode(const xt_bitmap *b, void *buf, size_t cap)
{
    size_t body = bm_encode_body(b, NULL);
    size_t total = XT_BITMAP_HDR_SIZE + body + XT_BITMAP_CSUM_SIZE;
    if (cap < total)
        return -ENOSPC;
    uint8_t *p = buf;
    xt_put_u32(p + 0, XT_BITMAP_MAGIC);
    xt_put_u16(p + 4, XT_BITMAP_FORMAT_V1);
    xt_put_u16(p + 6, 0);
    xt_put_u32(p + 8, b->count);
    xt_put_u32(p + 12, b->highest);
    xt_put_u32(p + 16, (uint32_t)body);
    bm_encode_body(b, p + XT_BITMAP_HDR_SIZE);
    xt_put_u64(p + XT_BITMAP_HDR_SIZE + body,
               xt_hash_bytes(p, XT_BITMAP_HDR_SIZE + body, XT_BITMAP_CSUM_SEED));
    return (long)total;
}

/* hist[l] += number of indices of bit length l in [lo, hi). */
static void hist_add_range(uint64_t hist[33], uint64_t lo, uint64_t hi)
{
    while (lo < hi) {
        unsigned l = bitlen64(lo);
        uint64_t end = lo ? UINT64_C(1) << l : 1; /* first index of length l+1 */
        if (end > hi)
            end = hi;
        hist[l] += end - lo;
        lo = end;
    }
}

/* Appends the set bits of word k (value w) to the bitmap being decoded. */
static void fill_word(xt_bitmap *b, uint64_t k, uint64_t w)
{
    if (k < b->dense_words) {
        b->dense[k] = w;
        return;
    }
    while (w) {
        b->sparse[b->nsparse++] = (uint32_t)(k * 64 + (uint64_t)__builtin_ctzll(w));
        w &= w - 1;
    }
}

/* Walks the runs of a body. Pass 1 (fill == NULL) checks the structure
 * against count and highest and builds the bit-length histogram; pass 2
 * writes the bits into fill, whose arrays were sized from that histogram. */
static int bm_parse_body(const uint8_t *body, size_t blen, uint32_t count,
                         uint32_t highest, uint64_t hist[33], xt_bitmap *fill)
{
    uint64_t nwords = (uint64_t)highest / 64 + 1, k = 0, total = 0, last = 0;
    size_t pos = 0;
    int prev = -1;
    while (pos < blen) {
        if (blen - pos < XB_RUN_HDR)
            return -EBADMSG;
        unsigned kind = body[pos];
        uint64_t n = xt_get_u32(body + pos + 1);
        pos += XB_RUN_HDR;
        if (kind > XB_RUN_LIT || (int)kind == prev || n == 0 || n > nwords - k)
            return -EBADMSG;
        prev = (int)kind;
        if (kind == XB_RUN_ZERO) {
            last = 0;
        } else if (kind == XB_RUN_ONES) {
            total += n * 64;
            if (total > count)
                return -EBADMSG;
            if (fill) {
                for (uint64_t j = 0; j < n; j++)
                    fill_word(fill, k + j, ~UINT64_C(0));
            } else {
                hist_add_range(hist, k * 64, (k + n) * 64);
            }
            last = ~UINT64_C(0);
        } else {
            if ((blen - pos) / 8 < n)
                return -EBADMSG;
            for (uint64_t j = 0; j < n; j++, pos += 8) {
                uint64_t w = xt_get_u64(body + pos);
                if (w == 0 || w == ~UINT64_C(0))
                    return -EBADMSG;
                total += (uint64_t)__builtin_popcountll(w);
                if (total > count)
                    return -EBADMSG;
                if (fill) {
                    fill_word(fill, k + j, w);
                } else {
                    for (uint64_t r = w; r; r &= r - 1)
                        hist[bitlen64((k + j) * 64 + (uint64_t)__builtin_ctzll(r))]++;
                }
                last = w;
            }
        }
        k += n;
    }
    if (k != nwords || total != count || (last >> (highest & 63)) != 1)
        return -EBADMSG;
    return 0;
}

int xt_bitmap_decode(const void *buf, size_t len, xt_bitmap **out)
{
    const uint8_t *p = buf;
    *out = NULL;
    if (!buf || len < XT_BITMAP_HDR_SIZE + XT_BITMAP_CSUM_SIZE)
        return -EBADMSG;
    size_t blen = len - XT_BITMAP_HDR_SIZE - XT_BITMAP_CSUM_SIZE;
    if (xt_get_u32(p) != XT_BITMAP_MAGIC || xt_get_u16(p + 4) != XT_BITMAP_FORMAT_V1 ||
        xt_get_u16(p + 6) != 0 || xt_get_u32(p + 16) != blen)
        return -EBADMSG;
    if (xt_get_u64(p + len - XT_BITMAP_CSUM_SIZE) !=
        xt_hash_bytes(p, len - XT_BITMAP_CSUM_SIZE, XT_BITMAP_CSUM_SEED)) {
        XT_DBG("bitmap decode: checksum mismatch (%zu bytes)", len);
        return -EBADMSG;
    }
    uint32_t count = xt_get_u32(p + 8), highest = xt_get_u32(p + 12);
    if (count == 0)
        return -EBADMSG;
    if (count > XT_BITMAP_MAX_SLICES)
        return -EINVAL;
    const uint8_t *body = p + XT_BITMAP_HDR_SIZE;
    uint64_t hist[33] = {0};
    int rc = bm_parse_body(body, blen, count, highest, hist, NULL);
    if (rc < 0)
        return rc;

    /* Same shape as the incremental path would reach (bm_grow_dense). */
    uint64_t dw = 1, below = hist[0];
    for (unsigned l = 1; l <= 6; l++)
        below += hist[l];                 /* indices < 64 */
    for (unsigned l = 7; dw < XB_MAX_DENSE_WORDS; l++) {
        uint64_t below2 = below + hist[l]; /* indices < 2 * 64 * dw */
        if (!dense_should_double(dw, below2))
            break;
        dw *= 2;
        below = below2;
    }
    xt_bitmap *b = xt_calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    b->dense_words = (uint32_t)dw;
    b->sparse_cap = (uint32_t)(count - below);
    b->dense = xt_calloc((size_t)dw, sizeof(uint64_t));
    if (b->sparse_cap)
        b->sparse = xt_malloc((size_t)b->sparse_cap * sizeof(uint32_t));
    if (!b->dense || (b->sparse_cap && !b->sparse)) {
        xt_bitmap_free(b);
        return -ENOMEM;
    }
    rc = bm_parse_body(body, blen, count, highest, hist, b);
    assert(rc == 0 && b->nsparse == b->sparse_cap);
    b->count = count;
    b->highest = highest;

    if (!xt_bitmap_test(b, 0))
        rc = -EINVAL;
    for (int64_t i = xt_bitmap_next(b, 1); rc == 0 && i >= 0;
         i = xt_bitmap_next(b, (uint64_t)i + 1))
        if (!xt_bitmap_test(b, bm_pred((uint32_t)i)))
            rc = -EINVAL;
    if (rc < 0) {
        XT_DBG("bitmap decode: not closed under pred (%u slices)", count);
        xt_bitmap_free(b);
        return rc;
    }
    *out = b;
    return 0;
}

/* ---- gossip deltas --------------------------------------------------- */

/* Is i in b and not in base (NULL base: not slice 0)? */
static int in_delta(const xt_bitmap *b, const xt_bitmap *base, uint64_t i)
{
    if (i == 0 || i > UINT32_MAX || !xt_bitmap_test(b, (uint32_t)i))
        return 0;
    return !base || !xt_bitmap_test(base, (uint32_t)i);
}

/* The delta sends c only when no index of the delta has c as its pred: the
 * two indices whose pred is c > 0 (top bit m) are c + 2^m and c + 2^(m+1). */
static int delta_top(const xt_bitmap *b, const xt_bitmap *base, uint32_t c)
{
    uint64_t m = UINT64_C(1) << msb32(c);
    return !in_delta(b, base, c + m) && !in_delta(b, base, c + 2 * m);
}

static size_t varint_put(uint8_t *out, uint32_t v)
{
    size_t n = 0;
    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        if (out)
            out[n] = byte | (v ? 0x80 : 0);
        n++;
    } while (v);
    return n;
}

/* Writes the delta body into out (NULL: only measure); returns its length
 * and the number of indices in *n. */
static size_t delta_body(const xt_bitmap *b, const xt_bitmap *base, uint8_t *out,
                         uint32_t *n)
{
    size_t pos = 0;
    uint32_t prev = 0;
    *n = 0;
    for (int64_t i = xt_bitmap_next(b, 1); i >= 0;
         i = xt_bitmap_next(b, (uint64_t)i + 1)) {
        uint32_t c = (uint32_t)i;
        if (!in_delta(b, base, c) || !delta_top(b, base, c))
            continue;
        pos += varint_put(out ? out + pos : NULL, c - prev);
        prev = c;
        (*n)++;
    }
    return pos;
}

size_t xt_bitmap_delta_size(const xt_bitmap *b, const xt_bitmap *base)
{
    uint32_t n;
    return XT_BITMAP_DELTA_HDR_SIZE + delta_body(b, base, NULL, &n) + XT_BITMAP_CSUM_SIZE;
}

long xt_bitmap_delta_encode(const xt_bitmap *b, const xt_bitmap *base, void *buf,
                            size_t cap)
{
    uint32_t n;
    size_t body = delta_body(b, base, NULL, &n);
    size_t total = XT_BITMAP_DELTA_HDR_SIZE + body + XT_BITMAP_CSUM_SIZE;
    if (cap < total)
        return -ENOSPC;
    uint8_t *p = buf;
    xt_put_u32(p + 0, XT_BITMAP_DELTA_MAGIC);
    xt_put_u16(p + 4, XT_BITMAP_FORMAT_V1);
    xt_put_u16(p + 6, 0);
    xt_put_u32(p + 8, n);
    xt_put_u32(p + 12, (uint32_t)body);
    delta_body(b, base, p + XT_BITMAP_DELTA_HDR_SIZE, &n);
    xt_put_u64(p + XT_BITMAP_DELTA_HDR_SIZE + body,
               xt_hash_bytes(p, XT_BITMAP_DELTA_HDR_SIZE + body, XT_BITMAP_CSUM_SEED));
    return (long)total;
}

/* Reads one canonical LEB128 u32 at body[*pos]; -EBADMSG when truncated,
 * longer than 5 bytes, overflowing or overlong (a needless 0 final byte). */
static int varint_get(const uint8_t *body, size_t blen, size_t *pos, uint32_t *v)
{
    uint64_t acc = 0;
    for (unsigned k = 0; k < 5; k++) {
        if (*pos >= blen)
            return -EBADMSG;
        uint8_t byte = body[(*pos)++];
        acc |= (uint64_t)(byte & 0x7f) << (7 * k);
        if (!(byte & 0x80)) {
            if ((k > 0 && byte == 0) || acc > UINT32_MAX)
                return -EBADMSG;
            *v = (uint32_t)acc;
            return 0;
        }
    }
    return -EBADMSG;
}

/* Checks (b == NULL) or applies a delta body of n indices. */
static int delta_walk(const uint8_t *body, size_t blen, uint32_t n, xt_bitmap *b)
{
    size_t pos = 0;
    uint64_t idx = 0;
    int added = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t gap;
        if (varint_get(body, blen, &pos, &gap) < 0 || gap == 0)
            return -EBADMSG;
        idx += gap;
        if (idx > UINT32_MAX)
            return -EBADMSG;
        if (b) {
            int rc = xt_bitmap_set(b, (uint32_t)idx);
            if (rc < 0)
                return rc;
            added += rc;
        }
    }
    return pos == blen ? added : -EBADMSG;
}

int xt_bitmap_delta_apply(xt_bitmap *b, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    if (!buf || len < XT_BITMAP_DELTA_HDR_SIZE + XT_BITMAP_CSUM_SIZE)
        return -EBADMSG;
    size_t blen = len - XT_BITMAP_DELTA_HDR_SIZE - XT_BITMAP_CSUM_SIZE;
    if (xt_get_u32(p) != XT_BITMAP_DELTA_MAGIC ||
        xt_get_u16(p + 4) != XT_BITMAP_FORMAT_V1 || xt_get_u16(p + 6) != 0 ||
        xt_get_u32(p + 12) != blen || xt_get_u32(p + 8) > XT_BITMAP_MAX_SLICES)
        return -EBADMSG;
    if (xt_get_u64(p + len - XT_BITMAP_CSUM_SIZE) !=
        xt_hash_bytes(p, len - XT_BITMAP_CSUM_SIZE, XT_BITMAP_CSUM_SEED))
        return -EBADMSG;
    const uint8_t *body = p + XT_BITMAP_DELTA_HDR_SIZE;
    uint32_t n = xt_get_u32(p + 8);
    int rc = delta_walk(body, blen, n, NULL);
    if (rc < 0)
        return rc;
    return delta_walk(body, blen, n, b);
}
