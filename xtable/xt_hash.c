/*
 * xt_hash.c -- XXH3 for names, placement and checksums; slice cookie ranges.
 */
#include "xt_hash.h"

#include <xxhash.h>

uint64_t xt_hash_name(const void *name, size_t len)
{
    return XXH3_64bits(name, len);
}

uint64_t xt_hash_bytes(const void *p, size_t len, uint64_t seed)
{
    return XXH3_64bits_withSeed(p, len, seed);
}

/* A slice (index, depth) owns the hashes whose low `depth` bits of V_h equal
 * `index`; in order space those bits are the top `depth` bits, reversed. */
uint64_t xt_hash_slice_cookie_lo(uint32_t index, unsigned depth)
{
    if (depth == 0)
        return 0;
    uint64_t top = (uint64_t)(xt_bitrev32(index) >> (32 - depth)); /* depth bits */
    return top << (62 - depth);
}

uint64_t xt_hash_slice_cookie_hi(uint32_t index, unsigned depth)
{
    if (depth == 0)
        return XT_COOKIE_END;
    uint64_t top = (uint64_t)(xt_bitrev32(index) >> (32 - depth));
    return (top + 1) << (62 - depth);
}
