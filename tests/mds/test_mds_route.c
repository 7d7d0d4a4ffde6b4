/*
 * test_mds_route.c -- ownership and peers of mds_route (mds_route.h):
 * without a ring every slice is ours; with one, ownership is exactly
 * xt_ring_lookup of xt_ring_key for random keys (seeded); an older ring
 * never replaces a newer one; peer pools are stable while the address is,
 * replaced (not freed) when it moves, absent for unknown sites.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "mds_route.h"
#include "mds_test_util.h"
#include "pom_ring.h"
#include "xt_ring.h"

static xt_ring *ring_of(const uint32_t *ids, size_t n)
{
    return pom_ring_of(XT_RING_MDS, 64, ids, n);
}

static void test_ownership(void **state)
{
    (void)state;
    uint64_t seed = tu_seed("test_ownership");
    mds_route *r;
    assert_int_equal(mds_route_new(3, NULL, &r), 0);
    uint32_t site;
    /* No ring: the only MDS (invariant 1). */
    assert_true(mds_route_owns(r, 1, 42, 7));
    assert_int_equal(mds_route_owner(r, 1, 42, 7, &site), -ENOENT);
    assert_int_equal(mds_route_ring_version(r), 0);
    assert_false(mds_route_ring_has_self(r));

    static const uint32_t three[] = { 3, 5, 9 }, two[] = { 5, 9 };
    xt_ring *ring = ring_of(three, 3); /* version 3 */
    xt_ring *copy = xt_ring_dup(ring);
    assert_int_equal(mds_route_update(r, ring, NULL, 0), 0);
    assert_int_equal(mds_route_ring_version(r), 3);
    assert_true(mds_route_ring_has_self(r));
    unsigned mine = 0;
    for (int i = 0; i < 5000; i++) {
        uint32_t fsid = (uint32_t)(tu_rand(&seed) % 4);
        uint64_t table = tu_rand(&seed);
        uint32_t slice = (uint32_t)(tu_rand(&seed) % 4096);
        uint32_t want;
        assert_int_equal(xt_ring_lookup(copy, xt_ring_key(fsid, table, slice), &want), 0);
        assert_int_equal(mds_route_owner(r, fsid, table, slice, &site), 0);
        assert_int_equal(site, want);
        assert_int_equal(mds_route_owns(r, fsid, table, slice), want == 3);
        mine += want == 3;
    }
    /* A third of the keys, give or take the ring's balance. */
    assert_in_range(mine, 5000 / 3 - 400, 5000 / 3 + 400);

    /* An older ring (version 2) is ignored (invariant 2). */
    assert_int_equal(mds_route_update(r, ring_of(two, 2), NULL, 0), 0);
    assert_int_equal(mds_route_ring_version(r), 3);
    assert_true(mds_route_ring_has_self(r));
    /* A newer one without us: nothing is ours any more. */
    xt_ring *newer = ring_of(two, 2);
    assert_int_equal(xt_ring_add_site(newer, 11, XT_RING_WEIGHT_UNIT), 0);
    assert_int_equal(xt_ring_add_site(newer, 12, XT_RING_WEIGHT_UNIT), 0);
    assert_int_equal(xt_ring_version(newer), 4);
    assert_int_equal(mds_route_update(r, newer, NULL, 0), 0);
    assert_int_equal(mds_route_ring_version(r), 4);
    assert_false(mds_route_ring_has_self(r));
    for (int i = 0; i < 200; i++)
        assert_false(mds_route_owns(r, 1, tu_rand(&seed), (uint32_t)i));
    xt_ring_free(copy);
    mds_route_free(r);
}

static void test_peers(void **state)
{
    (void)state;
    mds_route *r;
    assert_int_equal(mds_route_new(1, NULL, &r), 0);
    assert_null(mds_route_pool(r, 2)); /* unknown */
    struct mds_route_site s[] = { { 2, "127.0.0.1:40001" }, { 3, "127.0.0.1:40002" },
                                  { 4, NULL } };
    assert_int_equal(mds_route_update(r, NULL, s, 3), 0);
    xt_rpc_pool *p2 = mds_route_pool(r, 2), *p3 = mds_route_pool(r, 3);
    assert_non_null(p2);
    assert_non_null(p3);
    assert_ptr_not_equal(p2, p3);
    assert_null(mds_route_pool(r, 4)); /* no address */
    assert_string_equal(xt_rpc_pool_addr(p2), "127.0.0.1:40001");
    assert_int_equal(mds_route_update(r, NULL, s, 2), 0); /* same addresses */
    assert_ptr_equal(mds_route_pool(r, 2), p2);
    struct mds_route_site moved = { 2, "127.0.0.1:40009" };
    assert_int_equal(mds_route_update(r, NULL, &moved, 1), 0);
    xt_rpc_pool *p2b = mds_route_pool(r, 2);
    assert_non_null(p2b);
    assert_string_equal(xt_rpc_pool_addr(p2b), "127.0.0.1:40009");
    /* The old pool is retired, still valid (invariant 3). */
    assert_string_equal(xt_rpc_pool_addr(p2), "127.0.0.1:40001");
    assert_int_equal(mds_route_self(r), 1);
    mds_route_set_self(r, 7);
    assert_int_equal(mds_route_self(r), 7);
    mds_route_free(r);
    mds_route_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ownership),
        cmocka_unit_test(test_peers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
