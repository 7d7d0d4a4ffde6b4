/*
 * test_r2_ring1.c -- ring-1 changes of the site manager (r2/r2_mgr_ring1.c,
 * docs/mdsl-scale.md "Phases") on a hand clock, built twice: R2_TEST_ZK=0
 * over the embedded store, R2_TEST_ZK=1 over a real ZooKeeper server
 * (tests/common/pom_zk.h; skipped, 77, when not installed). A
 * small simulated cluster heartbeats the ring-1 fields an MDS and an MDSL
 * would send (acks of the seq, walks, misplaced counts) and the test checks
 * each phase the manager's ticks reach, and when they must not advance.
 *
 *  - a join through PREPARE, MOVING (ack, then walk), DONE, STABLE; stale
 *    "misplaced 0" counted under a seq before the walk's and a non-zero
 *    count hold it back;
 *    the records survive a reload;
 *  - acks lost with the leader: a new manager over the same store advances
 *    only on heartbeats it received itself;
 *  - a FAILED MDS (out of ring 0) is not waited for;
 *  - an MDSL registering during a change waits OUT and joins in the next;
 *  - drain of a JOINING MDSL cancels its join, in PREPARE and in MOVING;
 *  - drain of a ring-1 MDSL, remove refused (-EBUSY) until DRAINED; drain
 *    of the lowest id (the home of the MDS decision records) refused;
 *  - an MDS without the ring-1 fields keeps ring 1 frozen (old refusals);
 *  - the /r2/ring1 codec refuses every corruption and truncation.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "pom_proc.h"
#include "pom_zk.h"
#include "r2_mgr.h"
#include "r2_rec.h"
#include "r2_store_embedded.h"
#include "r2_store_zk.h"
#include "xt_common.h"
#include "xt_ring.h"

#ifndef R2_TEST_ZK
#define R2_TEST_ZK 0
#endif
#if R2_TEST_ZK
static pom_zk zk; /* the server of the whole run */
#endif
static int test_no;

static uint64_t g_clock = 1000000000ull;
static uint64_t test_clock(void)
{
    return g_clock;
}

#define MS (1000000ull)
#define MAX_SIM 16

/* One simulated site: what its heartbeats carry. */
struct sim_site {
    uint32_t id;
    int type;
    bool alive;     /* heartbeats at all */
    bool fields;    /* with the ring-1 fields */
    bool follow;    /* MDS: acks the view's seq, walks when told */
    uint64_t acked; /* MDS when not following: the seq it acks */
    uint64_t misplaced, prepared; /* MDSL */
    bool stale_count; /* MDSL: its count is of a pass under the previous seq */
};

struct fixture {
    char dir[256];  /* embedded: the store's folder */
    char root[64];  /* ZooKeeper: the test's root znode */
    r2_store *store;
    r2_mgr *m;
    struct sim_site s[MAX_SIM];
    int n;
    int port;
};

/* Opens the store and a manager over it, and waits until it leads. */
static void fx_open(struct fixture *f)
{
#if R2_TEST_ZK
    r2_store_zk_options zo = { .hosts = zk.hosts, .root = f->root, .session_timeout_ms = 2000,
                               .call_timeout_ms = 3000 };
    assert_int_equal(r2_store_zk_open(&zo, &f->store), 0);
#else
    assert_int_equal(r2_store_embedded_open(f->dir, &f->store), 0);
#endif
    struct r2_mgr_opts o = { .store = f->store, .self_addr = "127.0.0.1:9", .hb_interval_ms = 100,
                             .fail_after = 3, .no_thread = true, .clock = test_clock,
                             .vnodes = 16 };
    assert_int_equal(r2_mgr_new(&o, &f->m), 0);
    assert_int_equal(r2_store_elect(f->store, "127.0.0.1:9", 11, r2_mgr_leader_cb, f->m), 0);
    for (int i = 0; i < 1000 && !r2_store_is_leader(f->store); i++)
        usleep(10000); /* ZooKeeper elects in the background */
    assert_true(r2_store_is_leader(f->store));
}

/* The store first: no election callback may reach a freed manager. */
static void fx_close(struct fixture *f)
{
    r2_store_close(f->store);
    r2_mgr_free(f->m);
    f->m = NULL;
    f->store = NULL;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (!f || pom_tmpdir("r2ring1", f->dir, sizeof f->dir) < 0)
        return -1;
    snprintf(f->root, sizeof f->root, "/ring1-%d-%d", (int)getpid(), ++test_no);
    f->port = 100;
    fx_open(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    fx_close(f);
    pom_rm_rf(f->dir);
    free(f);
    return 0;
}

/* Registers a site that heartbeats with the ring-1 fields and follows. */
static struct sim_site *add(struct fixture *f, int type)
{
    assert_true(f->n < MAX_SIM);
    char addr[32];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", f->port++);
    struct sim_site *s = &f->s[f->n++];
    *s = (struct sim_site){ .type = type, .alive = true, .fields = true, .follow = true };
    assert_int_equal(r2_mgr_register(f->m, type, addr, 0, 0, NULL, NULL, &s->id, NULL), 0);
    return s;
}

/* The ring-1 part of a full view, and ring versions; *v freed by caller. */
static void view(struct fixture *f, struct xt_view *v)
{
    bool has;
    assert_int_equal(r2_mgr_get_view(f->m, 0, &has, v), 0);
    assert_non_null(v->ring1);
    assert_int_equal(v->nrings, 2);
}

static uint64_t ring_version(const struct xt_view *v, int r)
{
    return v->rings[r].version;
}

static bool in_ring(const struct xt_ring_blob *b, uint32_t id)
{
    xt_ring *r = NULL;
    assert_int_equal(xt_ring_decode(b->data, b->len, &r), 0);
    bool in = xt_ring_has_site(r, id) == 1;
    xt_ring_free(r);
    return in;
}

static const struct xt_ring1_site *r1_site(const struct xt_view *v, uint32_t id)
{
    for (size_t i = 0; i < v->ring1->nsites; i++)
        if (v->ring1->sites[i].id == id)
            return &v->ring1->sites[i];
    fail_msg("site %u not in the ring-1 state", id);
    return NULL;
}

static int phase(struct fixture *f)
{
    struct xt_view v;
    view(f, &v);
    int p = v.ring1->phase;
    xt_view_free(&v);
    return p;
}

static int role(struct fixture *f, uint32_t id)
{
    struct xt_view v;
    view(f, &v);
    int r = r1_site(&v, id)->role;
    xt_view_free(&v);
    return r;
}

/* 20 ms pass; every live site heartbeats what it would send given the view
 * it holds (taken before the beats: the view of its last heartbeat); one
 * tick. */
static void pump(struct fixture *f)
{
    struct xt_view v;
    view(f, &v);
    g_clock += 20 * MS;
    for (int i = 0; i < f->n; i++) {
        struct sim_site *s = &f->s[i];
        if (!s->alive)
            continue;
        struct xt_r2_hb_ring1 r1;
        memset(&r1, 0, sizeof r1);
        if (s->type == XT_SITE_MDS) {
            r1.has_acked = true;
            r1.acked = s->follow ? v.ring1->seq : s->acked;
            if (s->follow && v.ring1->walk) {
                r1.has_walked = true;
                r1.walked_v = ring_version(&v, 1);
                r1.walked_w = ring_version(&v, 0);
            }
        } else {
            r1.has_counts = true;
            r1.misplaced = s->misplaced;
            r1.prepared = s->prepared;
            r1.counted_seq = v.ring1->seq - (s->stale_count ? 1 : 0);
        }
        bool has;
        struct xt_view d;
        assert_int_equal(r2_mgr_heartbeat(f->m, s->id, 0, 0, NULL, 0, s->fields ? &r1 : NULL, NULL,
                                          &has, &d, NULL),
                         0);
        xt_view_free(&d);
    }
    xt_view_free(&v);
    r2_mgr_tick(f->m);
}

/* Pumps until the phase is `want` (at most n pumps). */
static void pump_until(struct fixture *f, int want, int n)
{
    for (int i = 0; i < n && phase(f) != want; i++)
        pump(f);
    assert_int_equal(phase(f), want);
}

/* Pumps n times, the phase staying `want`. */
static void pump_stays(struct fixture *f, int want, int n)
{
    for (int i = 0; i < n; i++) {
        pump(f);
        assert_int_equal(phase(f), want);
    }
}

/* Two MDSL and two MDS, all following: ring 1 holds a and b and may hold
 * slices. */
static void cluster(struct fixture *f, struct sim_site **a, struct sim_site **b,
                    struct sim_site **x, struct sim_site **y)
{
    *a = add(f, XT_SITE_MDSL);
    *b = add(f, XT_SITE_MDSL);
    *x = add(f, XT_SITE_MDS);
    *y = add(f, XT_SITE_MDS);
    pump_stays(f, XT_RING1_STABLE, 2);
}

/* ---- a join through every phase -------------------------------------------------- */

static void test_join(void **state)
{
    struct fixture *f = *state;
    struct sim_site *a, *b, *x, *y;
    cluster(f, &a, &b, &x, &y);
    struct xt_view v;
    view(f, &v);
    uint64_t v1 = ring_version(&v, 1);
    xt_view_free(&v);

    /* c registers: OUT, then the next tick starts the change. */
    struct sim_site *c = add(f, XT_SITE_MDSL);
    x->follow = y->follow = false; /* they ack nothing yet */
    pump(f);
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_PREPARE);
    uint64_t seq = v.ring1->seq;
    assert_false(in_ring(&v.rings[1], c->id));
    assert_non_null(v.ring1->next.data);
    assert_true(in_ring(&v.ring1->next, c->id));
    assert_null(v.ring1->prev.data);
    assert_int_equal(v.ring1->from_version, v1);
    assert_int_equal(v.ring1->to_version, v1 + 1);
    assert_int_equal(r1_site(&v, c->id)->role, XT_RING1_JOINING);
    assert_true(r1_site(&v, a->id)->losing && r1_site(&v, b->id)->losing);
    assert_false(r1_site(&v, c->id)->losing);
    xt_view_free(&v);

    /* PREPARE waits for every MDS of ring 0. */
    x->acked = seq;
    pump_stays(f, XT_RING1_PREPARE, 3);
    y->acked = seq;
    pump(f);
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_MOVING);
    assert_false(v.ring1->walk);
    assert_true(in_ring(&v.rings[1], c->id));
    assert_int_equal(ring_version(&v, 1), v1 + 1);
    assert_non_null(v.ring1->prev.data);
    assert_false(in_ring(&v.ring1->prev, c->id));
    assert_null(v.ring1->next.data);
    xt_view_free(&v);

    /* MOVING: ack, then walk. A count of 0 from a pass under a seq before
     * the walk's, and a count above 0, hold it ("Completion"). */
    x->follow = y->follow = true;
    b->stale_count = true;
    pump(f);
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_MOVING);
    assert_true(v.ring1->walk);
    xt_view_free(&v);
    pump_stays(f, XT_RING1_MOVING, 3);
    b->stale_count = false;
    b->misplaced = 7;
    pump_stays(f, XT_RING1_MOVING, 4);
    view(f, &v);
    assert_int_equal(r1_site(&v, b->id)->misplaced, 7);
    assert_int_equal(r1_site(&v, x->id)->walked_v, v1 + 1);
    xt_view_free(&v);
    b->misplaced = 0;
    pump(f);
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_DONE);
    assert_null(v.ring1->prev.data);
    assert_int_equal(r1_site(&v, c->id)->role, XT_RING1_IN);
    xt_view_free(&v);
    pump_until(f, XT_RING1_STABLE, 3);

    /* The store agrees: a reload gives the same ring 1 and phase. */
    r2_mgr_leader_cb(f->m, false);
    r2_mgr_leader_cb(f->m, true);
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_STABLE);
    assert_true(in_ring(&v.rings[1], c->id));
    assert_int_equal(ring_version(&v, 1), v1 + 1);
    assert_int_equal(v.ring1->from_version, v1 + 1);
    xt_view_free(&v);
    pump_stays(f, XT_RING1_STABLE, 3);
}

/* ---- a new leader learns the acks from heartbeats -------------------------------- */

static void test_acks_lost_with_leader(void **state)
{
    struct fixture *f = *state;
    struct sim_site *a, *b, *x, *y;
    cluster(f, &a, &b, &x, &y);
    add(f, XT_SITE_MDSL);
    x->follow = y->follow = false;
    pump_until(f, XT_RING1_PREPARE, 2);
    struct xt_view v;
    view(f, &v);
    x->acked = y->acked = v.ring1->seq;
    xt_view_free(&v);
    /* Both acks reach the old leader, which dies before its next tick. */
    bool has;
    struct xt_r2_hb_ring1 r1 = { .has_acked = true, .acked = x->acked };
    assert_int_equal(r2_mgr_heartbeat(f->m, x->id, 0, 0, NULL, 0, &r1, NULL, &has, &v, NULL), 0);
    xt_view_free(&v);
    assert_int_equal(r2_mgr_heartbeat(f->m, y->id, 0, 0, NULL, 0, &r1, NULL, &has, &v, NULL), 0);
    xt_view_free(&v);
    fx_close(f);
    fx_open(f);
    /* The new manager loads PREPARE; it knows no ack: ticks do nothing. */
    r2_mgr_tick(f->m);
    r2_mgr_tick(f->m);
    assert_int_equal(phase(f), XT_RING1_PREPARE);
    /* One MDS's heartbeat is not enough; both are. */
    assert_int_equal(r2_mgr_heartbeat(f->m, x->id, 0, 0, NULL, 0, &r1, NULL, &has, &v, NULL), 0);
    xt_view_free(&v);
    r2_mgr_tick(f->m);
    assert_int_equal(phase(f), XT_RING1_PREPARE);
    assert_int_equal(r2_mgr_heartbeat(f->m, y->id, 0, 0, NULL, 0, &r1, NULL, &has, &v, NULL), 0);
    xt_view_free(&v);
    r2_mgr_tick(f->m);
    assert_int_equal(phase(f), XT_RING1_MOVING);
    x->follow = y->follow = true;
    pump_until(f, XT_RING1_STABLE, 10);
}

/* ---- a FAILED MDS is not waited for ------------------------------------------------ */

static void test_failed_mds(void **state)
{
    struct fixture *f = *state;
    struct sim_site *a, *b, *x, *y;
    cluster(f, &a, &b, &x, &y);
    add(f, XT_SITE_MDSL);
    y->follow = false; /* y acks nothing, then dies */
    pump_until(f, XT_RING1_PREPARE, 2);
    pump_stays(f, XT_RING1_PREPARE, 3);
    y->alive = false;
    /* TRANSIENT y is still in ring 0 and waited for; FAILED y is not. */
    int n = 0;
    while (phase(f) == XT_RING1_PREPARE && n++ < 40)
        pump(f);
    struct xt_view v;
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_MOVING);
    for (size_t i = 0; i < v.nsites; i++)
        if (v.sites[i].id == y->id)
            assert_int_equal(v.sites[i].state, XT_SITE_FAILED);
    xt_view_free(&v);
    pump_until(f, XT_RING1_STABLE, 10);
}

/* ---- one change at a time ------------------------------------------------------------ */

static void test_queued_join(void **state)
{
    struct fixture *f = *state;
    struct sim_site *a, *b, *x, *y;
    cluster(f, &a, &b, &x, &y);
    struct sim_site *c = add(f, XT_SITE_MDSL);
    pump_until(f, XT_RING1_MOVING, 3);
    struct sim_site *d = add(f, XT_SITE_MDSL); /* during MOVING: waits OUT */
    struct xt_view v;
    view(f, &v);
    uint64_t to = v.ring1->to_version;
    assert_int_equal(r1_site(&v, d->id)->role, XT_RING1_OUT);
    assert_false(in_ring(&v.rings[1], d->id));
    xt_view_free(&v);
    pump_until(f, XT_RING1_DONE, 10);
    view(f, &v);
    assert_int_equal(ring_version(&v, 1), to); /* the running change was not widened */
    assert_false(in_ring(&v.rings[1], d->id));
    xt_view_free(&v);
    pump_until(f, XT_RING1_STABLE, 3);
    pump(f); /* the next tick starts the second change */
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_PREPARE);
    assert_int_equal(r1_site(&v, d->id)->role, XT_RING1_JOINING);
    assert_int_equal(r1_site(&v, c->id)->role, XT_RING1_IN);
    assert_true(r1_site(&v, c->id)->losing); /* c gives up its share too */
    xt_view_free(&v);
    pump_until(f, XT_RING1_STABLE, 12);
    view(f, &v);
    assert_true(in_ring(&v.rings[1], c->id) && in_ring(&v.rings[1], d->id));
    xt_view_free(&v);
}

/* ---- drain of a JOINING MDSL cancels its join -------------------------------------- */

static void test_cancel_in_prepare(void **state)
{
    struct fixture *f = *state;
    struct sim_site *a, *b, *x, *y;
    cluster(f, &a, &b, &x, &y);
    struct sim_site *c = add(f, XT_SITE_MDSL);
    x->follow = false;
    pump_until(f, XT_RING1_PREPARE, 2);
    assert_int_equal(r2_mgr_site_remove(f->m, c->id), -EBUSY);
    assert_int_equal(r2_mgr_site_drain(f->m, c->id), 0);
    struct xt_view v;
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_STABLE); /* nothing else changed */
    assert_false(in_ring(&v.rings[1], c->id));
    assert_int_equal(r1_site(&v, c->id)->role, XT_RING1_OUT);
    xt_view_free(&v);
    pump_stays(f, XT_RING1_STABLE, 3);
    assert_int_equal(r2_mgr_site_remove(f->m, c->id), 0); /* in no ring-1 version */
}

static void test_cancel_in_moving(void **state)
{
    struct fixture *f = *state;
    struct sim_site *a, *b, *x, *y;
    cluster(f, &a, &b, &x, &y);
    struct sim_site *c = add(f, XT_SITE_MDSL);
    pump_until(f, XT_RING1_MOVING, 3);
    pump(f);
    struct xt_view v;
    view(f, &v);
    assert_true(v.ring1->walk);
    uint64_t from = v.ring1->from_version, seq = v.ring1->seq;
    xt_view_free(&v);
    c->misplaced = 3; /* slices reached c and must move back */
    assert_int_equal(r2_mgr_site_drain(f->m, c->id), 0);
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_MOVING);
    assert_false(v.ring1->walk); /* a new placement: ack it before walking */
    assert_true(v.ring1->seq > seq);
    assert_false(in_ring(&v.rings[1], c->id));
    assert_int_equal(v.ring1->from_version, from);
    assert_true(r1_site(&v, c->id)->leaving && r1_site(&v, c->id)->losing);
    assert_false(r1_site(&v, a->id)->losing); /* a and b only gain */
    xt_view_free(&v);
    pump_stays(f, XT_RING1_MOVING, 4);
    assert_int_equal(r2_mgr_site_remove(f->m, c->id), -EBUSY);
    c->misplaced = 0;
    c->prepared = 1; /* a leaver also needs no prepared transaction */
    pump_stays(f, XT_RING1_MOVING, 3);
    c->prepared = 0;
    pump_until(f, XT_RING1_DONE, 3);
    assert_int_equal(role(f, c->id), XT_RING1_DRAINED);
    assert_int_equal(r2_mgr_site_remove(f->m, c->id), 0);
    c->alive = false;
    pump_until(f, XT_RING1_STABLE, 3);
}

/* ---- drain and remove of a ring-1 MDSL ---------------------------------------------- */

static void test_drain_remove(void **state)
{
    struct fixture *f = *state;
    struct sim_site *a, *b, *x, *y;
    cluster(f, &a, &b, &x, &y);
    struct sim_site *c = add(f, XT_SITE_MDSL);
    pump_until(f, XT_RING1_PREPARE, 1);
    pump_until(f, XT_RING1_STABLE, 12); /* c joined */
    assert_int_equal(role(f, c->id), XT_RING1_IN);
    /* a, the lowest id, holds the MDS decision records, which do not move
     * (docs/mdsl-scale.md "Decision records"): its drain is refused. */
    assert_true(a->id < b->id && a->id < c->id);
    assert_int_equal(r2_mgr_site_drain(f->m, a->id), -EBUSY);
    assert_int_equal(r2_mgr_site_remove(f->m, b->id), -EBUSY);
    x->follow = false;
    assert_int_equal(r2_mgr_site_drain(f->m, b->id), 0);
    assert_int_equal(r2_mgr_site_drain(f->m, b->id), 0); /* idempotent */
    assert_int_equal(r2_mgr_site_remove(f->m, b->id), -EBUSY);
    pump(f);
    struct xt_view v;
    view(f, &v);
    assert_int_equal(v.ring1->phase, XT_RING1_PREPARE);
    assert_true(r1_site(&v, b->id)->leaving);
    assert_true(r1_site(&v, b->id)->losing);
    assert_false(r1_site(&v, a->id)->losing); /* a drain alone: a and c only gain */
    assert_false(in_ring(&v.ring1->next, b->id));
    xt_view_free(&v);
    assert_int_equal(r2_mgr_site_remove(f->m, b->id), -EBUSY);
    x->follow = true;
    pump_until(f, XT_RING1_MOVING, 3);
    assert_int_equal(r2_mgr_site_remove(f->m, b->id), -EBUSY);
    pump_until(f, XT_RING1_DONE, 10);
    view(f, &v);
    assert_int_equal(r1_site(&v, b->id)->role, XT_RING1_DRAINED);
    assert_false(in_ring(&v.rings[1], b->id));
    xt_view_free(&v);
    assert_int_equal(r2_mgr_site_remove(f->m, b->id), 0);
    b->alive = false;
    pump_until(f, XT_RING1_STABLE, 3);
    /* The last MDSL may not drain: its slices would have nowhere to go. */
    assert_int_equal(r2_mgr_site_drain(f->m, c->id), 0);
    pump_until(f, XT_RING1_PREPARE, 1);
    pump_until(f, XT_RING1_STABLE, 14);
    assert_int_equal(r2_mgr_site_drain(f->m, a->id), -EBUSY);
}

/* ---- an MDS that does not follow ring 1 keeps it frozen --------------------------- */

static void test_old_mds_keeps_frozen(void **state)
{
    struct fixture *f = *state;
    struct sim_site *a = add(f, XT_SITE_MDSL), *b = add(f, XT_SITE_MDSL);
    add(f, XT_SITE_MDS);
    struct sim_site *old = add(f, XT_SITE_MDS);
    old->fields = false; /* today's pom-mds */
    struct sim_site *c = add(f, XT_SITE_MDSL);
    pump_stays(f, XT_RING1_STABLE, 5);
    assert_int_equal(role(f, c->id), XT_RING1_OUT);
    assert_int_equal(r2_mgr_site_drain(f->m, a->id), -EOPNOTSUPP);
    assert_int_equal(r2_mgr_site_remove(f->m, b->id), -EOPNOTSUPP);
    struct xt_view v;
    view(f, &v);
    assert_false(r1_site(&v, old->id)->reports);
    assert_false(in_ring(&v.rings[1], c->id));
    xt_view_free(&v);
    /* Once it sends them, the change starts. */
    old->fields = true;
    pump_until(f, XT_RING1_PREPARE, 2);
    pump_until(f, XT_RING1_STABLE, 12);
    assert_int_equal(role(f, c->id), XT_RING1_IN);
}

/* ---- the record ---------------------------------------------------------------------- */

static void test_ring1_codec(void **state)
{
    (void)state;
    struct r2_rec_ring1_ent ent[3] = { { .id = 2, .role = XT_RING1_JOINING },
                                       { .id = 5, .role = XT_RING1_OUT, .leaving = true },
                                       { .id = 9, .role = XT_RING1_DRAINED } };
    struct r2_rec_ring1 r = { .phase = XT_RING1_MOVING, .walk = true, .seq = 7,
                              .from_version = 3, .to_version = 5, .started_ns = 99,
                              .ent = ent, .n = 3 },
                        d;
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(r2_rec_ring1_encode(&r, &buf, &len), 0);
    assert_int_equal(r2_rec_ring1_decode(buf, len, &d), 0);
    assert_int_equal(d.phase, XT_RING1_MOVING);
    assert_true(d.walk);
    assert_int_equal(d.seq, 7);
    assert_int_equal(d.to_version, 5);
    assert_int_equal(d.n, 3);
    assert_memory_equal(d.ent, ent, sizeof ent);
    r2_rec_ring1_clear(&d);
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            p[i] ^= (unsigned char)(1u << bit);
            assert_int_equal(r2_rec_ring1_decode(p, len, &d), -EBADMSG);
            assert_null(d.ent);
            p[i] ^= (unsigned char)(1u << bit);
        }
    for (size_t l = 0; l < len; l++)
        assert_int_equal(r2_rec_ring1_decode(p, l, &d), -EBADMSG);
    xt_free(buf);
    /* What the encoder refuses: entries out of order, a JOINING entry
     * while STABLE, walk outside MOVING. */
    ent[1].id = 1;
    assert_int_equal(r2_rec_ring1_encode(&r, &buf, &len), -EINVAL);
    ent[1].id = 5;
    r.phase = XT_RING1_STABLE;
    r.to_version = r.from_version;
    r.walk = false;
    r.started_ns = 0;
    assert_int_equal(r2_rec_ring1_encode(&r, &buf, &len), -EINVAL);
    r.ent = &ent[2];
    r.n = 1;
    assert_int_equal(r2_rec_ring1_encode(&r, &buf, &len), 0);
    xt_free(buf);
    r.phase = XT_RING1_PREPARE;
    r.walk = true;
    r.to_version = 4;
    assert_int_equal(r2_rec_ring1_encode(&r, &buf, &len), -EINVAL);
}

int main(void)
{
    xt_log_set_level(XT_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ring1_codec),
        cmocka_unit_test_setup_teardown(test_join, setup, teardown),
        cmocka_unit_test_setup_teardown(test_acks_lost_with_leader, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_mds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queued_join, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_in_prepare, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_in_moving, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_old_mds_keeps_frozen, setup, teardown),
    };
#if R2_TEST_ZK
    if (!pom_zk_available()) {
        printf("SKIP: java or /usr/share/java/zookeeper.jar missing "
               "(apt-get install zookeeper)\n");
        return 77;
    }
    int rc = pom_zk_start(&zk);
    if (rc < 0) {
        fprintf(stderr, "cannot start ZooKeeper: %s\n", strerror(-rc));
        return 1;
    }
    int failed = cmocka_run_group_tests_name("r2_ring1_zk", tests, NULL, NULL);
    pom_zk_destroy(&zk);
    return failed;
#else
    return cmocka_run_group_tests_name("r2_ring1_embedded", tests, NULL, NULL);
#endif
}
