/*
 * xt_hash.c -- XXH3 for names, placement and checksums; slice cookie ranges.
 */
#include "xt_hash.h"

#include <xxhash.h>

static uint64_t get_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

uint64_t xt_hash_name(const void *name, size_t len)
{
    if (len >= XT_SYS_HEAD && xt_hash_is_sys(name, len))
        return get_le64((const unsigned char *)name + 3);
    return XXH3_64bits(name, len);
}

size_t xt_hash_sys_head(unsigned char *out, int tag, uint64_t h)
{
    out[0] = XT_SYS_B0;
    out[1] = XT_SYS_B1;
    out[2] = (unsigned char)tag;
    for (int i = 0; i < 8; i++)
        out[3 + i] = (unsigned char)(h >> (8 * i));
    return XT_SYS_HEAD;
}

size_t xt_hash_pend_name(const void *name, size_t len, unsigned char *out)
{
    xt_hash_sys_head(out, XT_SYS_PENDING, xt_hash_name(name, len));
    uint64_t h2 = XXH3_64bits_withSeed(name, len, XT_SYS_SEED);
    for (int i = 0; i < 8; i++)
        out[XT_SYS_HEAD + i] = (unsigned char)(h2 >> (8 * i));
    return XT_SYS_PEND_LEN;
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
