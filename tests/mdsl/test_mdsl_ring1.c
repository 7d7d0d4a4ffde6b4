/*
 * test_mdsl_ring1.c -- the MDSL side of a ring-1 change (docs/mdsl-scale.md
 * "Completion"), over the in-memory store:
 *   - mdsl_store_count_misplaced: a store holding what ring {1,2} placed on
 *     MDSL 1, counted against the ring after MDSL 3 joined; the expected
 *     count comes from xt_ring_owner_changed (not the lookup the count
 *     uses); tombstoned slices and fsid 0 (decision records, placed by no
 *     ring) are not counted; deltas do not count a slice twice; every page
 *     size gives the same count; stop, empty ring and bad page refused;
 *   - the reporter (mdsl_ring1.c) fed hand-made views: counts only while
 *     this site is losing in MOVING, nothing while losing in PREPARE, 0
 *     otherwise, prepared = undecided
 *     prepares, and never a report about an older seq once a view with a
 *     new one was handed to it (header invariant 1); a count while losing
 *     comes after the sweep-owed mark, and a reporter started on a store
 *     that owes a sweep asks it at the first view past MOVING.
 */
#include "mdsl_test_util.h"

#include "mdsl_ring1.h"
#include "pom_ring.h"
#include "xt_ring.h"

#include <stdatomic.h>
#include <time.h>

static uint8_t payload[64];

static xt_ring *ring_of(const uint32_t *ids, size_t n)
{
    return pom_ring_of(XT_RING_MDSL, 0, ids, n);
}

static uint32_t owner(const xt_ring *r, uint32_t fsid, uint64_t table, uint32_t slice)
{
    uint32_t s = 0;
    assert_int_equal(xt_ring_lookup(r, xt_ring_key(fsid, table, slice), &s), 0);
    return s;
}

/* The fixture: what MDSL 1 holds under ring {1,2}, plus decision records. */
struct fixture {
    struct tu_env e;
    xt_ring *a, *b;            /* {1,2} and {1,2,3} */
    uint64_t txid;
    uint64_t misplaced;        /* expected against b */
    uint64_t fsid0_foreign;    /* fsid-0 records b places elsewhere */
};

enum { NTABLES = 12, NSLICES = 300 };

static void fixture_init(struct fixture *f)
{
    static const uint32_t ab[3] = { 1, 2, 3 };
    memset(f, 0, sizeof *f);
    tu_env_init(&f->e, 3, 1u << 20);
    assert_int_equal(tu_open(&f->e), 0);
    f->a = ring_of(ab, 2);
    f->b = ring_of(ab, 3);
    f->txid = 1;
    static struct xt_store_rec r[NSLICES];
    for (uint64_t t = 1; t <= NTABLES; t++) {
        size_t n = 0;
        uint32_t fsid = (uint32_t)(1 + t % 2);
        for (uint32_t sl = 0; sl < NSLICES; sl++) {
            uint32_t slice = sl == NSLICES - 1 ? 0xffffffffu : sl; /* the meta slice too */
            if (owner(f->a, fsid, t, slice) != 1)
                continue;
            r[n++] = (struct xt_store_rec){ .type = XT_STORE_IMAGE, .id = { .fsid = fsid, .slice = slice, .table = t }, .version = 5, .data = payload,
                                        .len = sizeof payload };
            f->misplaced += (uint64_t)xt_ring_owner_changed(f->a, f->b,
                                                            xt_ring_key(fsid, t, slice));
        }
        assert_int_equal(tu_commit(f->e.s, f->txid++, r, n), 0);
    }
    /* Decision records: fsid 0, table 1, slice = an MDS id; at the home
     * whatever either ring says. */
    size_t n = 0;
    for (uint32_t mds = 1; mds <= 40; mds++) {
        r[n++] = (struct xt_store_rec){ .type = XT_STORE_IMAGE, .id = { .fsid = 0, .slice = mds, .table = 1 }, .version = 9, .data = payload, .len = 8 };
        f->fsid0_foreign += owner(f->b, 0, 1, mds) != 1;
    }
    assert_int_equal(tu_commit(f->e.s, f->txid++, r, n), 0);
    /* the fixture means something only if both kinds exist */
    assert_true(f->misplaced > 50);
    assert_true(f->fsid0_foreign > 0);
}

static void fixture_free(struct fixture *f)
{
    xt_ring_free(f->a);
    xt_ring_free(f->b);
    tu_env_free(&f->e);
}

static uint64_t count(struct fixture *f, const xt_ring *ring, uint32_t page)
{
    uint64_t n = UINT64_MAX;
    assert_int_equal(mdsl_store_count_misplaced(f->e.s, ring, 1, page, 0, NULL, &n), 0);
    return n;
}

/* Tombstones (or deltas, when delta) every k-th slice b places elsewhere;
 * returns how many. */
static uint64_t touch_misplaced(struct fixture *f, unsigned k, bool delta)
{
    static struct xt_store_rec r[NSLICES];
    uint64_t done = 0, seen = 0;
    for (uint64_t t = 1; t <= NTABLES; t++) {
        size_t n = 0;
        uint32_t fsid = (uint32_t)(1 + t % 2);
        for (uint32_t sl = 0; sl < NSLICES; sl++) {
            uint32_t slice = sl == NSLICES - 1 ? 0xffffffffu : sl;
            if (owner(f->a, fsid, t, slice) != 1 || owner(f->b, fsid, t, slice) == 1 ||
                seen++ % k)
                continue;
            r[n] = (struct xt_store_rec){ .type = XT_STORE_IMAGE, .flags = XT_STORE_F_MOVED,
                                      .id = { .fsid = fsid, .slice = slice, .table = t }, .version = 7 };
            if (delta)
                r[n] = (struct xt_store_rec){ .type = XT_STORE_DELTA, .id = { .fsid = fsid, .slice = slice, .table = t }, .version = 6, .data = payload,
                                          .len = 16 };
            n++;
        }
        if (n)
            assert_int_equal(tu_commit(f->e.s, f->txid++, r, n), 0);
        done += n;
    }
    return done;
}

static void test_count(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f);
    /* under the ring that placed them nothing is misplaced (fsid 0 aside) */
    assert_int_equal(count(&f, f.a, 1024), 0);
    assert_int_equal(count(&f, f.b, 1024), f.misplaced);
    /* deltas keep a slice live and listed once */
    assert_true(touch_misplaced(&f, 3, true) > 0);
    static const uint32_t pages[] = { 1, 7, 100, MDSL_LIST_MAX };
    for (size_t i = 0; i < sizeof pages / sizeof *pages; i++)
        assert_int_equal(count(&f, f.b, pages[i]), f.misplaced);
    /* tombstoned slices have moved: no longer counted */
    uint64_t moved = touch_misplaced(&f, 2, false);
    assert_true(moved > 0 && moved < f.misplaced);
    assert_int_equal(count(&f, f.b, 64), f.misplaced - moved);
    /* as seen from MDSL 2 (it holds none of these, so all of its own count
     * is what its ring places on 1 and 3): the self id matters */
    uint64_t n2 = 0;
    assert_int_equal(mdsl_store_count_misplaced(f.e.s, f.b, 2, 64, 0, NULL, &n2), 0);
    assert_true(n2 > f.misplaced - moved);
    /* stop, empty ring, bad page */
    _Atomic bool stop = true;
    uint64_t n = 1;
    assert_int_equal(mdsl_store_count_misplaced(f.e.s, f.b, 1, 64, 0, &stop, &n), -ECANCELED);
    xt_ring *empty = xt_ring_new(XT_RING_MDSL, 0);
    assert_int_equal(mdsl_store_count_misplaced(f.e.s, empty, 1, 64, 0, NULL, &n), -ENOENT);
    xt_ring_free(empty);
    assert_int_equal(mdsl_store_count_misplaced(f.e.s, f.b, 1, 0, 0, NULL, &n), -EINVAL);
    assert_int_equal(mdsl_store_count_misplaced(f.e.s, f.b, 1, MDSL_LIST_MAX + 1, 0, NULL, &n),
                     -EINVAL);
    /* the same after a restart (the index is rebuilt from the TSS) */
    tu_close(&f.e);
    assert_int_equal(tu_open(&f.e), 0);
    assert_int_equal(count(&f, f.b, 1024), f.misplaced - moved);
    fixture_free(&f);
}

/* ---- the reporter ---------------------------------------------------------------- */

/* A view with ring 1 = ring, ring-1 state (phase, seq) and the losing ids. */
struct fake_view {
    struct xt_view v;
    struct xt_ring_blob blob;
    struct xt_view_ring1 r1;
    struct xt_ring1_site sites[3];
};

static void fake_view(struct fake_view *fv, const xt_ring *ring, int phase, uint64_t seq,
                      bool losing1)
{
    memset(fv, 0, sizeof *fv);
    size_t len = xt_ring_encoded_size(ring);
    fv->blob = (struct xt_ring_blob){ .ring = XT_RING_MDSL, .version = xt_ring_version(ring),
                                      .data = xt_malloc(len), .len = (uint32_t)len };
    assert_non_null(fv->blob.data);
    assert_int_equal(xt_ring_encode(ring, fv->blob.data, len), (long)len);
    for (uint32_t i = 0; i < 3; i++)
        fv->sites[i] = (struct xt_ring1_site){ .id = i + 1, .role = XT_RING1_IN,
                                               .losing = (i == 0 && losing1) };
    fv->r1 = (struct xt_view_ring1){ .phase = phase, .seq = seq, .sites = fv->sites,
                                     .nsites = 3 };
    fv->v = (struct xt_view){ .version = seq, .sections = XT_VIEW_RINGS, .nrings = 1,
                              .rings = &fv->blob, .ring1 = &fv->r1 };
}

static void fake_view_free(struct fake_view *fv)
{
    xt_free(fv->blob.data);
}

/* Waits (5 s at most) for a report of seq; returns it. */
static struct mdsl_ring1_report wait_report(mdsl_ring1 *r, uint64_t seq, uint64_t prepared)
{
    struct mdsl_ring1_report rep = { 0 };
    for (int i = 0; i < 500; i++) {
        if (mdsl_ring1_report(r, &rep) == 0 && rep.seq == seq && rep.prepared == prepared)
            return rep;
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    fail_msg("no report of seq %llu with %llu prepared (last: seq %llu, %llu prepared)",
             (unsigned long long)seq, (unsigned long long)prepared,
             (unsigned long long)rep.seq, (unsigned long long)rep.prepared);
    return rep;
}

static void hand_view(mdsl_ring1 *r, const xt_ring *ring, int phase, uint64_t seq, bool losing)
{
    struct fake_view fv;
    fake_view(&fv, ring, phase, seq, losing);
    mdsl_ring1_view(r, &fv.v, XT_VIEW_RINGS);
    fake_view_free(&fv);
    /* invariant (1): from now on no report about another seq */
    struct mdsl_ring1_report rep;
    if (mdsl_ring1_report(r, &rep) == 0)
        assert_int_equal(rep.seq, seq);
    struct xt_r2_hb_ring1 hb = { 0 };
    mdsl_ring1_fill(r, &hb);
    if (hb.has_counts)
        assert_int_equal(mdsl_ring1_report(r, &rep), 0);
}

static void test_reporter(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f);
    struct mdsl_ring1_opts o = { .store = f.e.s, .interval_ms = 20, .page = 50 };
    mdsl_ring1 *r = NULL;
    assert_int_equal(mdsl_ring1_start(&o, &r), 0);
    struct mdsl_ring1_report rep;
    struct xt_r2_hb_ring1 hb = { 0 };
    /* nothing before an id and a view */
    assert_int_equal(mdsl_ring1_report(r, &rep), -EAGAIN);
    mdsl_ring1_fill(r, &hb);
    assert_false(hb.has_counts);

    /* stable: 0 at once, whatever the index holds against a ring */
    mdsl_ring1_id(r, 1);
    hand_view(r, f.b, XT_RING1_STABLE, 4, false);
    rep = wait_report(r, 4, 0);
    assert_false(rep.counted);
    assert_int_equal(rep.misplaced, 0);
    /* the first view past MOVING asks the store for a drop pass, no sweep */
    assert_int_equal(rep.drops_asked, 1);
    assert_int_equal(rep.sweeps_asked, 0);

    /* MOVING but another MDSL is the losing one: still 0, no sweep owed */
    hand_view(r, f.b, XT_RING1_MOVING, 5, false);
    rep = wait_report(r, 5, 0);
    assert_false(rep.counted);
    assert_int_equal(rep.misplaced, 0);
    assert_int_equal(mdsl_store_sweep_owed(f.e.s), 0);

    /* losing in PREPARE (the current ring still the one that placed
     * everything here): no counts at all, not a meaningless 0 */
    hand_view(r, f.a, XT_RING1_PREPARE, 6, true);
    for (int i = 0; i < 20; i++) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        assert_int_equal(mdsl_ring1_report(r, &rep), -EAGAIN);
        memset(&hb, 0, sizeof hb);
        mdsl_ring1_fill(r, &hb);
        assert_false(hb.has_counts);
    }

    /* losing in MOVING: the count against the view's ring */
    hand_view(r, f.b, XT_RING1_MOVING, 7, true);
    rep = wait_report(r, 7, 0);
    assert_true(rep.counted);
    assert_int_equal(rep.ring_version, xt_ring_version(f.b));
    assert_int_equal(rep.misplaced, f.misplaced);
    /* the count came after the change's sweep was marked owed, durably */
    assert_int_equal(mdsl_store_sweep_owed(f.e.s), 7);
    memset(&hb, 0, sizeof hb);
    mdsl_ring1_fill(r, &hb);
    assert_true(hb.has_counts && !hb.has_acked && !hb.has_walked);
    assert_int_equal(hb.misplaced, f.misplaced);

    /* passes go on: moves and an undecided prepare show in later reports */
    uint64_t moved = touch_misplaced(&f, 1, false);
    assert_int_equal(moved, f.misplaced);
    struct xt_store_rec pr = { .type = XT_STORE_IMAGE, .id = { .fsid = 1, .slice = 0, .table = 99 },
                           .version = 1, .data = payload, .len = 8 };
    assert_int_equal(mdsl_store_prepare(f.e.s, 1000, &pr, 1), 0);
    rep = wait_report(r, 7, 1);
    for (int i = 0; i < 500 && rep.misplaced; i++) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        assert_int_equal(mdsl_ring1_report(r, &rep), 0);
    }
    assert_int_equal(rep.misplaced, 0);
    assert_true(rep.counted);
    /* the table-99 slice placed elsewhere only counts once committed */
    assert_int_equal(mdsl_store_commit(f.e.s, 1000), 0);
    rep = wait_report(r, 7, 0);
    uint64_t want = owner(f.b, 1, 99, 0) != 1;
    for (int i = 0; i < 500 && rep.misplaced != want; i++) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        assert_int_equal(mdsl_ring1_report(r, &rep), 0);
    }
    assert_int_equal(rep.misplaced, want);

    /* not past MOVING yet: nothing asked since the first view (the MOVING
     * of v5 did not make this MDSL lose anything) */
    assert_int_equal(mdsl_ring1_report(r, &rep), 0);
    assert_int_equal(rep.drops_asked, 1);
    assert_int_equal(rep.sweeps_asked, 0);

    /* the change ends: 0, not counted */
    hand_view(r, f.b, XT_RING1_DONE, 8, true);
    rep = wait_report(r, 8, 0);
    assert_false(rep.counted);
    assert_int_equal(rep.misplaced, 0);
    /* it lost slices in it: a drop pass and one sweep ("Space back") */
    assert_int_equal(rep.drops_asked, 2);
    assert_int_equal(rep.sweeps_asked, 1);
    hand_view(r, f.b, XT_RING1_STABLE, 9, false);
    rep = wait_report(r, 9, 0);
    assert_int_equal(rep.drops_asked, 2);
    assert_int_equal(rep.sweeps_asked, 1);
    assert_true(rep.passes >= 5);
    mdsl_ring1_stop(r);
    fixture_free(&f);
}

/* Restarted between a change's end and its sweep: the store still owes
 * it, so the first view past MOVING asks the sweep with the drop pass
 * (once); a store that owes nothing gets the drop pass only. */
static void test_reporter_restart(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f);
    for (int owed = 1; owed >= 0; owed--) {
        if (owed) /* what the pass in MOVING left before the kill */
            assert_int_equal(mdsl_store_sweep_owe(f.e.s, 7), 0);
        tu_close(&f.e);
        assert_int_equal(tu_open(&f.e), 0);
        assert_int_equal(mdsl_store_sweep_owed(f.e.s), owed ? 7 : 0);
        struct mdsl_ring1_opts o = { .store = f.e.s, .interval_ms = 20, .page = 50 };
        mdsl_ring1 *r = NULL;
        assert_int_equal(mdsl_ring1_start(&o, &r), 0);
        mdsl_ring1_id(r, 1);
        hand_view(r, f.b, XT_RING1_DONE, 7, true);
        struct mdsl_ring1_report rep = wait_report(r, 7, 0);
        assert_int_equal(rep.drops_asked, 1);
        assert_int_equal(rep.sweeps_asked, owed);
        hand_view(r, f.b, XT_RING1_STABLE, 8, false);
        rep = wait_report(r, 8, 0);
        assert_int_equal(rep.drops_asked, 1);
        assert_int_equal(rep.sweeps_asked, owed);
        mdsl_ring1_stop(r);
        if (owed) { /* what the asked sweep does at its end */
            assert_true(mdsl_store_sweep(f.e.s, MDSL_SWEEP_THRESHOLD) >= 0);
            assert_int_equal(mdsl_store_sweep_owed(f.e.s), 0);
        }
    }
    fixture_free(&f);
}

/* A pass over a large index is cancelled by a new view and by stop, not
 * finished first: a slow pass (1 slice per page, 1 ms apart) still
 * answers within a few pages. */
static void test_reporter_cancel(void **state)
{
    (void)state;
    struct fixture f;
    fixture_init(&f);
    struct mdsl_ring1_opts o = { .store = f.e.s, .interval_ms = 10, .page = 1,
                                 .pause_ms = 1 };
    mdsl_ring1 *r = NULL;
    assert_int_equal(mdsl_ring1_start(&o, &r), 0);
    mdsl_ring1_id(r, 1);
    hand_view(r, f.b, XT_RING1_MOVING, 6, true);
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    struct mdsl_ring1_report rep;
    assert_int_equal(mdsl_ring1_report(r, &rep), -EAGAIN); /* ~1,800 pages to go */
    uint64_t t0 = xt_mono_ns();
    hand_view(r, f.b, XT_RING1_DONE, 7, true);
    rep = wait_report(r, 7, 0);
    assert_false(rep.counted);
    assert_true(xt_mono_ns() - t0 < UINT64_C(500000000));
    hand_view(r, f.b, XT_RING1_MOVING, 8, true);
    nanosleep(&ts, NULL);
    t0 = xt_mono_ns();
    mdsl_ring1_stop(r);
    assert_true(xt_mono_ns() - t0 < UINT64_C(500000000));
    fixture_free(&f);
}

int main(void)
{
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 7 + 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count),
        cmocka_unit_test(test_reporter),
        cmocka_unit_test(test_reporter_restart),
        cmocka_unit_test(test_reporter_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
