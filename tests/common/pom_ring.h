/*
 * pom_ring.h -- the rings the unit tests build by hand: every listed site at
 * unit weight, any failure a test failure (CMocka). Header-only, as
 * pom_rand.h: each test binary gets its own copy.
 */
#ifndef POM_RING_H
#define POM_RING_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "xt_ring.h"

/* A ring of `type` (XT_RING_MDS or XT_RING_MDSL) with `vnodes` per site (0:
 * the default) over ids[0..n). Caller frees with xt_ring_free. */
static inline xt_ring *pom_ring_of(uint32_t type, unsigned vnodes, const uint32_t *ids, size_t n)
{
    xt_ring *r = xt_ring_new(type, vnodes);
    assert_non_null(r);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(xt_ring_add_site(r, ids[i], XT_RING_WEIGHT_UNIT), 0);
    return r;
}

#endif /* POM_RING_H */
