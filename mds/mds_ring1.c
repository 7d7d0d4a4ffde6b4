/*
 * mds_ring1.c -- the running MDS follows R2's ring-1 changes (mds_ring1.h).
 *
 * Each view brings R2's ring-1 state (phase, seq, walk, previous and next
 * rings, per-MDSL flags) and the current ring 1; the latest is kept, and
 * applied whenever a view arrives once attached. Applying is idempotent:
 * every step compares ring versions with what is installed, so the same
 * state seen twice (a resent view, attach after views) changes nothing.
 */
#include "mds_ring1.h"

#include "xt_common.h"

#include <assert.h>
#include <pthread.h>
#include <string.h>

struct mds_ring1 {
    mds_store_rpc *rpc;
    pthread_mutex_t mu;
    /* Latest state from the views (protected by mu). */
    struct xt_view_ring1 *r1; /* NULL: none seen (an R2 without it) */
    xt_ring *view_cur;        /* ring 1 of that view, decoded */
    /* Attached targets and what is installed (protected by mu). */
    mds_place *place;
    mds_group *group;
    mds_mover *mover;
    xt_ring *cur, *prev;      /* installed placements (invariant 2) */
    uint64_t acked;           /* seq installed (invariant 1) */
    uint64_t walk_v;          /* ring-1 version the mover walks for; 0: none */
};

uint32_t mds_ring1_locate(void *ring, uint32_t fsid, uint64_t table, uint32_t slice)
{
    uint32_t site = 1;
    xt_ring_lookup(ring, xt_ring_key(fsid, table, slice), &site);
    return site;
}

uint32_t mds_ring1_replicas(void *ring, uint32_t fsid, uint64_t table, uint32_t slice,
                            uint32_t max, uint32_t *sites)
{
    return xt_ring_replicas(ring, fsid, table, slice, max, sites);
}

int mds_ring1_new(mds_store_rpc *rpc, mds_ring1 **out)
{
    mds_ring1 *f = xt_calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->rpc = rpc;
    pthread_mutex_init(&f->mu, NULL);
    *out = f;
    return 0;
}

void mds_ring1_free(mds_ring1 *f)
{
    if (!f)
        return;
    xt_view_ring1_free(f->r1);
    xt_ring_free(f->view_cur);
    xt_ring_free(f->cur);
    xt_ring_free(f->prev);
    pthread_mutex_destroy(&f->mu);
    xt_free(f);
}

static xt_ring *decode_blob(const struct xt_ring_blob *b)
{
    xt_ring *r = NULL;
    if (b->data && xt_ring_decode(b->data, b->len, &r))
        r = NULL;
    return r;
}

static xt_ring *view_ring1(const struct xt_view *v)
{
    xt_ring *r;
    return xt_view_ring(v, XT_RING_MDSL, &r) == 0 ? r : NULL;
}

/* Appends the sites of r missing from sites[0..*n), up to cap. */
static void add_ring_sites(const xt_ring *r, uint32_t *sites, size_t *n, size_t cap)
{
    uint32_t id, w;
    for (uint32_t k = 0; r && xt_ring_site_at(r, k, &id, &w) == 0; k++) {
        bool have = false;
        for (size_t i = 0; i < *n && !have; i++)
            have = sites[i] == id;
        if (!have && *n < cap)
            sites[(*n)++] = id;
    }
}

static void learn_addresses(mds_ring1 *f, const struct xt_view *v)
{
    for (size_t i = 0; i < v->nsites; i++)
        if (v->sites[i].type == XT_SITE_MDSL && v->sites[i].addr[0])
            (void)mds_store_rpc_set_site(f->rpc, v->sites[i].id, v->sites[i].addr);
}

void mds_ring1_extra_sites(mds_ring1 *f, const struct xt_view *v, uint32_t *sites, size_t *n,
                           size_t cap)
{
    if (!v->ring1)
        return;
    learn_addresses(f, v);
    xt_ring *p = decode_blob(&v->ring1->prev), *x = decode_blob(&v->ring1->next);
    add_ring_sites(p, sites, n, cap);
    add_ring_sites(x, sites, n, cap);
    xt_ring_free(p);
    xt_ring_free(x);
}

/* Every MDSL of r becomes a participant (mds_group.h invariant 9). */
static int add_participants(mds_ring1 *f, const xt_ring *r)
{
    uint32_t id, w;
    for (uint32_t k = 0; r && xt_ring_site_at(r, k, &id, &w) == 0; k++) {
        int rc = mds_group_add_participant(f->group, id);
        if (rc)
            return rc;
    }
    return 0;
}

/* Rings of ring 1 are told apart by version: R2 bumps it with every
 * change of the ring and never reuses one. */
static bool same_ring(const xt_ring *a, const xt_ring *b)
{
    return a && b && xt_ring_version(a) == xt_ring_version(b);
}

/* Installs placement (c, p) (p NULL: no previous); takes ownership of both
 * (freed when equal to what is installed). REQUIRES: f->mu, attached. */
static void install(mds_ring1 *f, xt_ring *c, xt_ring *p)
{
    assert(xt_mutex_held(&f->mu) && f->place); /* REQUIRES: f->mu, attached */
    assert(c);
    bool have = same_ring(f->cur, c) && (p ? same_ring(f->prev, p) : f->prev == NULL);
    if (have) {
        xt_ring_free(c);
        xt_ring_free(p);
        return;
    }
    xt_ring *old_cur = f->cur, *old_prev = f->prev;
    if (p && same_ring(f->cur, p)) {
        /* The usual step: current becomes previous. */
        mds_place_change(f->place, mds_ring1_locate, c);
        xt_ring_free(old_prev);
        xt_ring_free(p);
        f->prev = old_cur;
        f->cur = c;
    } else if (p) {
        /* A restart or a missed phase: rebuild the pair, previous first. */
        mds_place_change(f->place, mds_ring1_locate, p);
        xt_ring_free(old_prev);
        mds_place_change(f->place, mds_ring1_locate, c);
        xt_ring_free(old_cur);
        f->prev = p;
        f->cur = c;
    } else {
        if (!same_ring(f->cur, c)) {
            mds_place_change(f->place, mds_ring1_locate, c);
            f->cur = c;
        } else {
            xt_ring_free(c);
            old_cur = NULL;
        }
        mds_place_finish(f->place);
        xt_ring_free(old_prev);
        xt_ring_free(old_cur);
        f->prev = NULL;
    }
    if (f->prev)
        XT_INFO("ring 1: placement v%llu installed, previous v%llu",
                (unsigned long long)xt_ring_version(f->cur),
                (unsigned long long)xt_ring_version(f->prev));
    else
        XT_INFO("ring 1: placement v%llu installed, no previous",
                (unsigned long long)xt_ring_version(f->cur));
}

/* The mover's losing MDSL of the state (at most cap). */
static size_t losing_sites(const struct xt_view_ring1 *r1, uint32_t *out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < r1->nsites && n < cap; i++)
        if (r1->sites[i].losing)
            out[n++] = r1->sites[i].id;
    return n;
}

/* DRAINED MDSL stop being participants once no placement names them (the
 * previous ring is gone): R2 saw them clear, nothing prepared (decision
 * 12), and a removed one must not stall settling. REQUIRES: f->mu. */
static void drop_drained(mds_ring1 *f, const struct xt_view_ring1 *r1)
{
    assert(xt_mutex_held(&f->mu));
    for (size_t i = 0; i < r1->nsites; i++)
        if (r1->sites[i].role == XT_RING1_DRAINED && !xt_ring_has_site(f->cur, r1->sites[i].id))
            (void)mds_group_drop_participant(f->group, r1->sites[i].id);
}

/* REQUIRES: f->mu. Applies the latest state (invariant 1). */
static void apply(mds_ring1 *f)
{
    assert(xt_mutex_held(&f->mu));
    const struct xt_view_ring1 *r1 = f->r1;
    if (!f->place || !r1 || !f->view_cur)
        return;
    xt_ring *cur = xt_ring_dup(f->view_cur);
    xt_ring *prev = r1->phase == XT_RING1_MOVING ? decode_blob(&r1->prev) : NULL;
    xt_ring *next = r1->phase == XT_RING1_PREPARE ? decode_blob(&r1->next) : NULL;
    if (!cur || (r1->phase == XT_RING1_MOVING && !prev) ||
        (r1->phase == XT_RING1_PREPARE && !next)) {
        XT_WARN("ring 1: state seq %llu unusable (out of memory or a bad ring)",
                (unsigned long long)r1->seq);
        goto fail;
    }
    /* Participants first (invariant 1; docs/mdsl-scale.md "Participants"). */
    int rc = add_participants(f, cur);
    if (rc == 0)
        rc = add_participants(f, prev);
    if (rc == 0)
        rc = add_participants(f, next);
    if (rc) {
        XT_WARN("ring 1: adding participants: %s", strerror(-rc));
        goto fail;
    }
    xt_ring_free(next);
    install(f, cur, prev); /* MOVING: (next, previous); else (current, none) */
    if (r1->phase == XT_RING1_DONE || r1->phase == XT_RING1_STABLE)
        drop_drained(f, r1);
    uint64_t walk_v = 0;
    uint32_t losing[64];
    size_t nl = 0;
    if (r1->phase == XT_RING1_MOVING && r1->walk) {
        walk_v = r1->to_version;
        nl = losing_sites(r1, losing, 64);
    }
    if (f->mover && (walk_v != f->walk_v || walk_v))
        mds_mover_walk(f->mover, walk_v, losing, nl);
    if (walk_v != f->walk_v)
        XT_INFO("ring 1: %s (v%llu, %zu losing MDSL)", walk_v ? "walking" : "not walking",
                (unsigned long long)walk_v, nl);
    f->walk_v = walk_v;
    if (f->acked != r1->seq)
        XT_INFO("ring 1: %s seq %llu installed", xt_ring1_phase_name(r1->phase),
                (unsigned long long)r1->seq);
    f->acked = r1->seq;
    return;
fail:
    xt_ring_free(cur);
    xt_ring_free(prev);
    xt_ring_free(next);
}

void mds_ring1_view(mds_ring1 *f, const struct xt_view *v)
{
    learn_addresses(f, v);
    if (!(v->sections & XT_VIEW_RINGS) || !v->ring1)
        return;
    struct xt_view_ring1 *r1 = NULL;
    xt_ring *cur = view_ring1(v);
    if (!cur || xt_view_ring1_dup(v->ring1, &r1) < 0) {
        XT_WARN("ring 1: cannot take the view's state (out of memory or a bad ring)");
        xt_ring_free(cur);
        return;
    }
    pthread_mutex_lock(&f->mu);
    xt_view_ring1_free(f->r1);
    xt_ring_free(f->view_cur);
    f->r1 = r1;
    f->view_cur = cur;
    apply(f);
    pthread_mutex_unlock(&f->mu);
}

void mds_ring1_attach(mds_ring1 *f, mds_place *place, xt_ring *ring, mds_group *group,
                      mds_mover *mover)
{
    pthread_mutex_lock(&f->mu);
    f->place = place;
    f->cur = ring;
    f->group = group;
    f->mover = mover;
    apply(f);
    pthread_mutex_unlock(&f->mu);
}

void mds_ring1_set_mover(mds_ring1 *f, mds_mover *mover)
{
    pthread_mutex_lock(&f->mu);
    f->mover = mover;
    f->walk_v = 0; /* a new mover is told the walk again */
    apply(f);
    pthread_mutex_unlock(&f->mu);
}

void mds_ring1_detach(mds_ring1 *f)
{
    pthread_mutex_lock(&f->mu);
    f->place = NULL;
    f->group = NULL;
    f->mover = NULL;
    pthread_mutex_unlock(&f->mu);
}

void mds_ring1_heartbeat(void *arg, struct xt_r2_hb_ring1 *r1)
{
    mds_ring1 *f = arg;
    pthread_mutex_lock(&f->mu);
    r1->has_acked = true;
    r1->acked = f->acked;
    uint64_t v, w;
    if (f->mover && f->walk_v && mds_mover_walked(f->mover, &v, &w) && v == f->walk_v) {
        r1->has_walked = true;
        r1->walked_v = v;
        r1->walked_w = w;
    }
    pthread_mutex_unlock(&f->mu);
}

void mds_ring1_state(mds_ring1 *f, uint64_t *acked, uint64_t *cur_v, uint64_t *prev_v)
{
    pthread_mutex_lock(&f->mu);
    *acked = f->acked;
    *cur_v = f->cur ? xt_ring_version(f->cur) : 0;
    *prev_v = f->prev ? xt_ring_version(f->prev) : 0;
    pthread_mutex_unlock(&f->mu);
}
