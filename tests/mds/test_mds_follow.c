/*
 * test_mds_follow.c -- pom-mds following R2's ring-1 changes (mds/mds_ring1.c,
 * docs/mdsl-scale.md "Phases"), fed hand-made views: one MDS (commit group
 * over mds_store_local, placement over real rings), MDSL 1 and 2, then 3.
 *
 * Checked:
 *   test_phases: STABLE acks; PREPARE makes MDSL 3 a participant (settling
 *     lists prepared txids there) without changing the placement; MOVING
 *     installs (A,B,C current, A,B previous); MOVING+walk runs the mover
 *     on the losing MDSL, and the heartbeat carries its walk; DONE drops the
 *     previous placement and the walk; each acks its seq, and a view seen
 *     before attach is applied at attach (a starting MDS).
 *   test_restart_moving: an MDS whose placement is the new ring (as a
 *     start during MOVING finds it) rebuilds (current, previous) at attach.
 *   test_drained_leaves: at STABLE a DRAINED MDSL no longer is a
 *     participant; the home never is dropped.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "mds_ring1.h"
#include "mds_store_local.h"
#include "mds_test_util.h"

#include "pom_ring.h"
#include "xt_ring.h"

static xt_ring *ring_of(const uint32_t *ids, size_t n)
{
    return pom_ring_of(XT_RING_MDSL, 64, ids, n);
}

static struct xt_ring_blob blob_of(const xt_ring *r)
{
    struct xt_ring_blob b = { .ring = XT_RING_MDSL, .version = xt_ring_version(r) };
    size_t len = xt_ring_encoded_size(r);
    b.data = xt_malloc(len);
    assert_non_null(b.data);
    assert_int_equal(xt_ring_encode(r, b.data, len), (long)len);
    b.len = (uint32_t)len;
    return b;
}

/* A view with ring 1 = cur and the ring-1 state (prev/next may be NULL;
 * `losing`/`drained`: MDSL ids flagged, 0-terminated). Free: xt_view_free. */
static struct xt_view view_of(int phase, uint64_t seq, bool walk, const xt_ring *cur,
                              const xt_ring *prev, const xt_ring *next, const uint32_t *losing,
                              const uint32_t *drained)
{
    struct xt_view v = { .version = seq, .sections = XT_VIEW_RINGS | XT_VIEW_SITES };
    v.rings = xt_calloc(1, sizeof *v.rings);
    v.rings[0] = blob_of(cur);
    v.nrings = 1;
    v.sites = xt_calloc(3, sizeof *v.sites);
    for (uint32_t i = 0; i < 3; i++) {
        v.sites[i] = (struct xt_site){ .id = i + 1, .type = XT_SITE_MDSL, .state = XT_SITE_UP };
        snprintf(v.sites[i].addr, sizeof v.sites[i].addr, "127.0.0.1:%u", 1 + i);
    }
    v.nsites = 3;
    struct xt_view_ring1 *r1 = xt_calloc(1, sizeof *r1);
    *r1 = (struct xt_view_ring1){ .phase = phase, .seq = seq, .walk = walk,
                                  .to_version = xt_ring_version(cur) };
    if (prev)
        r1->prev = blob_of(prev);
    if (next)
        r1->next = blob_of(next);
    r1->sites = xt_calloc(3, sizeof *r1->sites);
    for (uint32_t i = 0; i < 3; i++) {
        struct xt_ring1_site *q = &r1->sites[i];
        q->id = i + 1;
        q->role = xt_ring_has_site(cur, i + 1) ? XT_RING1_IN : XT_RING1_OUT;
        for (size_t k = 0; losing && losing[k]; k++)
            q->losing |= losing[k] == i + 1;
        for (size_t k = 0; drained && drained[k]; k++)
            if (drained[k] == i + 1)
                q->role = XT_RING1_DRAINED;
    }
    r1->nsites = 3;
    v.ring1 = r1;
    return v;
}

struct fx {
    mds_store_local *mem;
    mds_store st;
    mds_store_rpc *rpc;
    mds_place *place;
    mds_cache *c;
    mds_group *g;
    mds_ring1 *f;
    xt_ring *ab, *abc, *ac;
};

static const uint32_t ids_ab[] = { 1, 2 }, ids_abc[] = { 1, 2, 3 };

/* The MDS over placement `start` (a dup is handed to the follower). */
static void fx_open(struct fx *x, const xt_ring *start)
{
    memset(x, 0, sizeof *x);
    x->mem = mds_store_local_new();
    mds_store_local_bind(x->mem, &x->st);
    assert_int_equal(mds_store_rpc_new(1000, &x->rpc), 0);
    x->ab = ring_of(ids_ab, 2);
    x->abc = ring_of(ids_abc, 3);
    x->ac = xt_ring_dup(x->abc); /* A,B,C -> A,C: a later version, as at R2 */
    assert_non_null(x->ac);
    assert_int_equal(xt_ring_remove_site(x->ac, 2), 0);
    xt_ring *mine = xt_ring_dup(start ? start : x->ab);
    assert_int_equal(mds_place_new(mds_ring1_locate, mine, &x->place), 0);
    struct mds_cache_opts co = { .store = &x->st, .place = x->place };
    assert_int_equal(mds_cache_new(&co, &x->c), 0);
    struct mds_group_opts go = { .store = &x->st, .cache = x->c, .place = x->place,
                                 .site_id = 9, .home_site = 1, .participants = ids_ab,
                                 .nparticipants = 2, .commit_interval_ms = 5, .retry_ms = 2 };
    assert_int_equal(mds_group_open(&go, &x->g), 0);
    assert_int_equal(mds_ring1_new(x->rpc, &x->f), 0);
    mds_ring1_attach(x->f, x->place, mine, x->g, NULL);
}

static void fx_close(struct fx *x, mds_mover *m)
{
    mds_ring1_detach(x->f);
    mds_mover_stop(m);
    mds_group_close(x->g, true);
    mds_cache_free(x->c);
    mds_place_free(x->place);
    mds_ring1_free(x->f);
    mds_store_rpc_free(x->rpc);
    mds_store_local_free(x->mem);
    xt_ring_free(x->ab);
    xt_ring_free(x->abc);
    xt_ring_free(x->ac);
}

static void feed(struct fx *x, struct xt_view v)
{
    mds_ring1_view(x->f, &v);
    xt_view_free(&v);
}

static uint64_t acked(struct fx *x)
{
    struct xt_r2_hb_ring1 hb = { .has_acked = false };
    mds_ring1_heartbeat(x->f, &hb);
    assert_true(hb.has_acked);
    return hb.acked;
}

/* Whether settling lists prepared txids at `site` (it is a participant). */
static bool participant(struct fx *x, uint32_t site)
{
    struct mds_store_local_counts a, b;
    mds_store_local_counts(x->mem, site, &a);
    assert_int_equal(mds_group_settle_site(x->g, 77), 0);
    mds_store_local_counts(x->mem, site, &b);
    return b.lists > a.lists;
}

/* A key A,B and A,B,C place differently, and how many such keys of 64. */
static unsigned moved_key(const struct fx *x, uint32_t *slice)
{
    unsigned n = 0;
    for (uint32_t s = 0; s < 64; s++) {
        uint32_t a = mds_ring1_locate(x->ab, 1, 5, s), b = mds_ring1_locate(x->abc, 1, 5, s);
        if (a != b) {
            *slice = s;
            n++;
        }
    }
    return n;
}

/* current and previous of (1, 5, slice) as the placement answers. */
static void where(struct fx *x, uint32_t slice, uint32_t *cur, uint32_t *prev)
{
    mds_place_locate(x->place, 1, 5, slice, cur, prev);
}

static void test_phases(void **state)
{
    (void)state;
    struct fx x;
    fx_open(&x, NULL);
    uint32_t s = 0, cur, prev;
    assert_true(moved_key(&x, &s) > 0);
    const uint32_t lose_ab[] = { 1, 2, 0 };

    feed(&x, view_of(XT_RING1_STABLE, 1, false, x.ab, NULL, NULL, NULL, NULL));
    assert_int_equal(acked(&x), 1);
    assert_false(participant(&x, 3));

    feed(&x, view_of(XT_RING1_PREPARE, 2, false, x.ab, NULL, x.abc, NULL, NULL));
    assert_int_equal(acked(&x), 2);
    assert_true(participant(&x, 3)); /* before any placement names it */
    where(&x, s, &cur, &prev);
    assert_int_equal(cur, mds_ring1_locate(x.ab, 1, 5, s));
    assert_int_equal(prev, cur);

    feed(&x, view_of(XT_RING1_MOVING, 3, false, x.abc, x.ab, NULL, lose_ab, NULL));
    assert_int_equal(acked(&x), 3);
    where(&x, s, &cur, &prev);
    assert_int_equal(cur, mds_ring1_locate(x.abc, 1, 5, s));
    assert_int_equal(prev, mds_ring1_locate(x.ab, 1, 5, s));
    assert_int_not_equal(cur, prev);

    /* The mover (nothing stored: its first pass is a walk). */
    struct mds_mover_opts mo = { .store = &x.st, .cache = x.c, .group = x.g, .place = x.place,
                                 .poll_ms = 10 };
    mds_mover *m;
    assert_int_equal(mds_mover_start(&mo, &m), 0);
    mds_ring1_set_mover(x.f, m);
    struct xt_r2_hb_ring1 hb = { .has_walked = false };
    mds_ring1_heartbeat(x.f, &hb);
    assert_false(hb.has_walked); /* no walk asked yet */
    feed(&x, view_of(XT_RING1_MOVING, 4, true, x.abc, x.ab, NULL, lose_ab, NULL));
    assert_int_equal(acked(&x), 4);
    for (int i = 0; i < 500 && !hb.has_walked; i++) {
        tu_sleep_ms(10);
        mds_ring1_heartbeat(x.f, &hb);
    }
    assert_true(hb.has_walked);
    assert_int_equal(hb.walked_v, xt_ring_version(x.abc));
    assert_int_equal(hb.walked_w, 0);
    struct mds_mover_info mi;
    mds_mover_info(m, &mi);
    assert_true(mi.passes >= 1);

    feed(&x, view_of(XT_RING1_DONE, 5, false, x.abc, NULL, NULL, NULL, NULL));
    assert_int_equal(acked(&x), 5);
    where(&x, s, &cur, &prev);
    assert_int_equal(cur, mds_ring1_locate(x.abc, 1, 5, s));
    assert_int_equal(prev, cur);
    memset(&hb, 0, sizeof hb);
    mds_ring1_heartbeat(x.f, &hb);
    assert_false(hb.has_walked);
    uint64_t a, cv, pv;
    mds_ring1_state(x.f, &a, &cv, &pv);
    assert_int_equal(cv, xt_ring_version(x.abc));
    assert_int_equal(pv, 0);
    fx_close(&x, m);
}

static void test_restart_moving(void **state)
{
    (void)state;
    struct fx x;
    xt_ring *abc = ring_of(ids_abc, 3);
    /* A view before attach is kept and applied at attach. */
    mds_ring1 *early;
    mds_store_rpc *rpc;
    assert_int_equal(mds_store_rpc_new(1000, &rpc), 0);
    assert_int_equal(mds_ring1_new(rpc, &early), 0);
    xt_ring *ab = ring_of(ids_ab, 2);
    struct xt_view v = view_of(XT_RING1_MOVING, 7, false, abc, ab, NULL, NULL, NULL);
    mds_ring1_view(early, &v);
    uint64_t a, cv, pv;
    mds_ring1_state(early, &a, &cv, &pv);
    assert_int_equal(a, 0); /* not attached: nothing installed */
    mds_ring1_free(early);
    mds_store_rpc_free(rpc);
    xt_ring_free(ab);

    fx_open(&x, abc); /* a start during MOVING takes the view's current ring */
    uint32_t s = 0, cur, prev;
    assert_true(moved_key(&x, &s) > 0);
    mds_ring1_view(x.f, &v);
    xt_view_free(&v);
    assert_int_equal(acked(&x), 7);
    where(&x, s, &cur, &prev);
    assert_int_equal(cur, mds_ring1_locate(x.abc, 1, 5, s));
    assert_int_equal(prev, mds_ring1_locate(x.ab, 1, 5, s));
    mds_ring1_state(x.f, &a, &cv, &pv);
    assert_int_equal(cv, xt_ring_version(abc));
    assert_int_equal(pv, xt_ring_version(x.ab));
    assert_true(participant(&x, 3));
    fx_close(&x, NULL);
    xt_ring_free(abc);
}

static void test_drained_leaves(void **state)
{
    (void)state;
    struct fx x;
    fx_open(&x, NULL);
    feed(&x, view_of(XT_RING1_PREPARE, 2, false, x.ab, NULL, x.abc, NULL, NULL));
    assert_true(participant(&x, 3));
    assert_true(participant(&x, 2));
    /* 2 drained (A,B,C -> A,C done): it leaves the participants, 1 stays. */
    const uint32_t drained[] = { 2, 0 };
    feed(&x, view_of(XT_RING1_STABLE, 9, false, x.ac, NULL, NULL, NULL, drained));
    assert_int_equal(acked(&x), 9);
    assert_false(participant(&x, 2));
    assert_true(participant(&x, 1));
    assert_true(participant(&x, 3));
    assert_int_equal(mds_group_drop_participant(x.g, 1), -EBUSY);
    fx_close(&x, NULL);
}

int main(void)
{
    xt_log_set_level(XT_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phases),
        cmocka_unit_test(test_restart_moving),
        cmocka_unit_test(test_drained_leaves),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
