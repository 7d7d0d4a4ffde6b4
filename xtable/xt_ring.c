/*
 * xt_ring.c -- consistent-hash rings with virtual nodes and balanced joins.
 *
 * State: the sites sorted by id, each with its weight and the candidate
 * number chosen by each of its vnodes; and, derived from those, the sorted
 * array of points that lookups binary-search.
 *
 * Invariants (of every xt_ring outside a function of this file):
 *  (1) sites[] is sorted by strictly ascending id; site k has
 *      xt_ring_vnodes(vps, weight) vnodes and as many choices, each below
 *      XT_RING_CANDIDATES.
 *  (2) pts[] holds exactly one point per (site, vnode), at
 *      point_pos(ring_id, site, vnode, choice), sorted by (pos, site, vnode).
 *  (3) npts <= XT_RING_MAX_POINTS, nsites <= XT_RING_MAX_SITES.
 *
 * Why the join is greedy and not optimal: an exact assignment would move
 * points of other sites, breaking header invariant (1). Choosing only among
 * the new site's own candidates keeps every existing point in place and
 * still lands every site within a few percent of its ideal share.
 */
#include "xt_ring.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"

#define TWO64 18446744073709551616.0 /* 2^64 as a double */
#define RING_REFINE_PASSES 4

typedef struct {
    uint32_t id;
    uint32_t weight;
    uint32_t nv;
    uint8_t *choice; /* nv entries; owned */
} ring_site;

typedef struct {
    uint64_t pos;
    uint32_t site;  /* site id */
    uint32_t vnode;
} ring_point;

struct xt_ring {
    uint32_t ring_id;
    unsigned vps;       /* vnodes per standard-weight site */
    uint64_t version;
    ring_site *sites;   /* nsites, ascending id */
    uint32_t nsites, sites_cap;
    ring_point *pts;    /* npts, sorted by (pos, site, vnode) */
    uint32_t npts, pts_cap;
};

static uint64_t point_pos(uint32_t ring_id, uint32_t site, uint32_t vnode, uint32_t cand)
{
    uint8_t b[16];
    xt_put_u32(b, ring_id);
    xt_put_u32(b + 4, site);
    xt_put_u32(b + 8, vnode);
    xt_put_u32(b + 12, cand);
    return xt_hash_bytes(b, sizeof(b), XT_RING_POINT_SEED);
}

static int point_cmp(const ring_point *a, const ring_point *b)
{
    if (a->pos != b->pos)
        return a->pos < b->pos ? -1 : 1;
    if (a->site != b->site)
        return a->site < b->site ? -1 : 1;
    return a->vnode < b->vnode ? -1 : a->vnode > b->vnode;
}

static int point_qsort_cmp(const void *a, const void *b)
{
    return point_cmp(a, b);
}

/* First point with pos >= key (npts when none). Branch-free halving (the
 * compare becomes a conditional move): every slice request does one, and
 * a mispredicted branch per level cost more than the search itself. */
static uint32_t pts_lower_pos(const xt_ring *r, uint64_t key)
{
    const ring_point *base = r->pts;
    uint32_t n = r->npts;
    if (n == 0)
        return 0;
    while (n > 1) {
        uint32_t half = n / 2;
        base = base[half - 1].pos < key ? base + half : base;
        n -= half;
    }
    return (uint32_t)(base - r->pts) + (base->pos < key);
}

/* First point not ordered before p. */
static uint32_t pts_lower(const xt_ring *r, const ring_point *p)
{
    uint32_t lo = 0, hi = r->npts;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (point_cmp(&r->pts[mid], p) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Index of the first site with id >= id. */
static uint32_t site_lower(const xt_ring *r, uint32_t id)
{
    uint32_t lo = 0, hi = r->nsites;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->sites[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

unsigned xt_ring_vnodes(unsigned vnodes_per_site, uint32_t weight)
{
    uint64_t v = ((uint64_t)vnodes_per_site * weight + XT_RING_WEIGHT_UNIT / 2) /
                 XT_RING_WEIGHT_UNIT;
    return v ? (unsigned)v : 1;
}

xt_ring *xt_ring_new(uint32_t ring_id, unsigned vnodes_per_site)
{
    xt_ring *r = xt_calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->ring_id = ring_id;
    r->vps = vnodes_per_site == 0 ? XT_RING_VNODES_DEFAULT
                                  : XT_MIN(vnodes_per_site, (unsigned)XT_RING_VNODES_MAX);
    return r;
}

void xt_ring_free(xt_ring *r)
{
    if (!r)
        return;
    for (uint32_t k = 0; k < r->nsites; k++)
        xt_free(r->sites[k].choice);
    xt_free(r->sites);
    xt_free(r->pts);
    xt_free(r);
}

xt_ring *xt_ring_dup(const xt_ring *r)
{
    xt_ring *c = xt_calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->ring_id = r->ring_id;
    c->vps = r->vps;
    c->version = r->version;
    if (r->nsites) {
        c->sites = xt_calloc(r->nsites, sizeof(ring_site));
        c->pts = xt_malloc((size_t)r->npts * sizeof(ring_point));
        if (!c->sites || !c->pts)
            goto fail;
        c->sites_cap = r->nsites;
        c->pts_cap = r->npts;
        for (uint32_t k = 0; k < r->nsites; k++) {
            c->sites[k] = r->sites[k];
            c->sites[k].choice = xt_malloc(r->sites[k].nv);
            if (!c->sites[k].choice)
                goto fail;
            c->nsites = k + 1;
            memcpy(c->sites[k].choice, r->sites[k].choice, r->sites[k].nv);
        }
        memcpy(c->pts, r->pts, (size_t)r->npts * sizeof(ring_point));
        c->npts = r->npts;
    }
    return c;
fail:
    xt_ring_free(c);
    return NULL;
}

uint32_t xt_ring_id(const xt_ring *r)
{
    return r->ring_id;
}

uint64_t xt_ring_version(const xt_ring *r)
{
    return r->version;
}

unsigned xt_ring_vnodes_per_site(const xt_ring *r)
{
    return r->vps;
}

uint32_t xt_ring_nsites(const xt_ring *r)
{
    return r->nsites;
}

int xt_ring_site_at(const xt_ring *r, uint32_t k, uint32_t *site, uint32_t *weight)
{
    if (k >= r->nsites)
        return -ENOENT;
    if (site)
        *site = r->sites[k].id;
    if (weight)
        *weight = r->sites[k].weight;
    return 0;
}

int xt_ring_has_site(const xt_ring *r, uint32_t site)
{
    uint32_t k = site_lower(r, site);
    return k < r->nsites && r->sites[k].id == site;
}

/* Arc owned by point k: from the previous point (exclusive) to it. */
static double arc_share(const xt_ring *r, uint32_t k)
{
    assert(k < r->npts);
    if (r->npts == 1)
        return 1.0;
    uint64_t prev = r->pts[k ? k - 1 : r->npts - 1].pos;
    return (double)(r->pts[k].pos - prev) / TWO64;
}

/* The candidate for vnode v of site index ni that most lowers the sum of
 * squared excess shares (excess[k] = share - ideal share of site k).
 * Returns the candidate; *owner and *gain tell whose arc it cuts and how
 * much of the ring it takes. REQUIRES: npts > 0. */
static uint32_t best_candidate(const xt_ring *r, uint32_t ni, uint32_t v,
                               const double *excess, uint32_t *owner, double *gain)
{
    assert(r->npts > 0 && ni < r->nsites);
    const ring_site *ns = &r->sites[ni];
    uint32_t best = 0;
    double best_cost = INFINITY;
    *owner = ni;
    *gain = 0;
    for (uint32_t c = 0; c < XT_RING_CANDIDATES; c++) {
        uint64_t p = point_pos(r->ring_id, ns->id, v, c);
        uint32_t s = pts_lower_pos(r, p);
        double cost, g = 0;
        uint32_t o = ni;
        if (s < r->npts && r->pts[s].pos == p) {
            cost = HUGE_VAL; /* on an existing point: only as a last resort */
        } else {
            if (s == r->npts)
                s = 0;
            g = (double)(p - r->pts[s ? s - 1 : r->npts - 1].pos) / TWO64;
            o = site_lower(r, r->pts[s].site);
            /* Taking g from site o changes the sum of squared excess by
             * 2g(g + e_new - e_o); cutting an own arc changes nothing. */
            cost = o == ni ? 0.0 : 2 * g * (g + excess[ni] - excess[o]);
        }
        if (cost < best_cost) {
            best_cost = cost;
            best = c;
            *owner = o;
            *gain = g;
        }
    }
    assert(best < XT_RING_CANDIDATES); /* invariant (1) */
    return best;
}

static void insert_point(xt_ring *r, ring_point pt)
{
    assert(r->npts < r->pts_cap); /* room made by xt_ring_add_site */
    uint32_t at = pts_lower(r, &pt);
    assert(at == r->npts || point_cmp(&pt, &r->pts[at]) < 0); /* invariant (2): unique */
    memmove(r->pts + at + 1, r->pts + at, (size_t)(r->npts - at) * sizeof(ring_point));
    r->pts[at] = pt;
    r->npts++;
}

/* Places vnode v of site index ni at its best candidate. */
static void place_vnode(xt_ring *r, uint32_t ni, uint32_t v, double *excess)
{
    assert(ni < r->nsites && v < r->sites[ni].nv);
    ring_site *ns = &r->sites[ni];
    uint32_t owner = ni, c = 0;
    double gain = 0;
    if (r->npts == 0) /* the very first point owns the whole ring */
        excess[ni] += 1.0;
    else
        c = best_candidate(r, ni, v, excess, &owner, &gain);
    if (owner != ni) {
        excess[owner] -= gain;
        excess[ni] += gain;
    }
    ns->choice[v] = (uint8_t)c;
    insert_point(r, (ring_point){point_pos(r->ring_id, ns->id, v, c), ns->id, v});
}

/* Takes vnode v of site index ni off the ring, giving its arc back to the
 * owner of the next point. REQUIRES: the site has another point or there
 * are other sites. */
static void unplace_vnode(xt_ring *r, uint32_t ni, uint32_t v, double *excess)
{
    ring_site *ns = &r->sites[ni];
    ring_point pt = {point_pos(r->ring_id, ns->id, v, ns->choice[v]), ns->id, v};
    uint32_t at = pts_lower(r, &pt);
    assert(at < r->npts && point_cmp(&r->pts[at], &pt) == 0 && r->npts > 1);
    uint64_t prev = r->pts[at ? at - 1 : r->npts - 1].pos;
    double gain = (double)(pt.pos - prev) / TWO64;
    memmove(r->pts + at, r->pts + at + 1, (size_t)(r->npts - at - 1) * sizeof(ring_point));
    r->npts--;
    uint32_t owner = site_lower(r, r->pts[at == r->npts ? 0 : at].site);
    if (owner != ni) {
        excess[owner] += gain;
        excess[ni] -= gain;
    }
}

/* Places all vnodes of the new site index ni, greedily in vnode order, then
 * refines: each vnode in turn is lifted and re-placed given all the others
 * (coordinate descent on the same cost), which undoes early greedy choices
 * made before the site had most of its share. Only this site's points move,
 * so header invariant (1) holds. */
static void place_site(xt_ring *r, uint32_t ni, double *excess)
{
    ring_site *ns = &r->sites[ni];
    int alone = r->npts == 0;
    for (uint32_t v = 0; v < ns->nv; v++)
        place_vnode(r, ni, v, excess);
    if (alone)
        return;
    for (int pass = 0; pass < RING_REFINE_PASSES; pass++) {
        int changed = 0;
        for (uint32_t v = 0; v < ns->nv; v++) {
            uint8_t before = ns->choice[v];
            unplace_vnode(r, ni, v, excess);
            place_vnode(r, ni, v, excess);
            changed |= ns->choice[v] != before;
        }
        if (!changed)
            break;
    }
}

int xt_ring_add_site(xt_ring *r, uint32_t site, uint32_t weight)
{
    if (weight == 0 || weight > XT_RING_WEIGHT_MAX)
        return -EINVAL;
    uint32_t at = site_lower(r, site);
    if (at < r->nsites && r->sites[at].id == site)
        return -EEXIST;
    unsigned nv = xt_ring_vnodes(r->vps, weight);
    if (r->nsites >= XT_RING_MAX_SITES || (uint64_t)r->npts + nv > XT_RING_MAX_POINTS)
        return -ENOSPC;

    /* Allocate everything first so that a failure leaves the ring as it was. */
    if (r->nsites == r->sites_cap) {
        uint32_t cap = r->sites_cap ? r->sites_cap * 2 : 8;
        ring_site *s = xt_realloc(r->sites, (size_t)cap * sizeof(ring_site));
        if (!s)
            return -ENOMEM;
        r->sites = s;
        r->sites_cap = cap;
    }
    if (r->npts + nv > r->pts_cap) {
        uint32_t cap = XT_MAX(r->pts_cap * 2, r->npts + nv);
        ring_point *p = xt_realloc(r->pts, (size_t)cap * sizeof(ring_point));
        if (!p)
            return -ENOMEM;
        r->pts = p;
        r->pts_cap = cap;
    }
    uint8_t *choice = xt_malloc(nv);
    double *excess = xt_calloc((size_t)r->nsites + 1, sizeof(double));
    if (!choice || !excess) {
        xt_free(choice);
        xt_free(excess);
        return -ENOMEM;
    }

    memmove(r->sites + at + 1, r->sites + at, (size_t)(r->nsites - at) * sizeof(ring_site));
    r->sites[at] = (ring_site){site, weight, nv, choice};
    r->nsites++;

    uint64_t total_nv = 0;
    for (uint32_t k = 0; k < r->nsites; k++)
        total_nv += r->sites[k].nv;
    for (uint32_t k = 0; k < r->nsites; k++)
        excess[k] = -(double)r->sites[k].nv / (double)total_nv;
    for (uint32_t k = 0; k < r->npts; k++)
        excess[site_lower(r, r->pts[k].site)] += arc_share(r, k);

    place_site(r, at, excess);
    xt_free(excess);
    assert(r->npts <= XT_RING_MAX_POINTS && r->nsites <= XT_RING_MAX_SITES); /* (3) */
    r->version++;
    return 0;
}

int xt_ring_remove_site(xt_ring *r, uint32_t site)
{
    uint32_t at = site_lower(r, site);
    if (at >= r->nsites || r->sites[at].id != site)
        return -ENOENT;
    uint32_t w = 0;
    for (uint32_t k = 0; k < r->npts; k++)
        if (r->pts[k].site != site)
            r->pts[w++] = r->pts[k];
    assert(r->npts - w == r->sites[at].nv); /* invariant (2): one point per vnode */
    r->npts = w;
    xt_free(r->sites[at].choice);
    memmove(r->sites + at, r->sites + at + 1, (size_t)(r->nsites - at - 1) * sizeof(ring_site));
    r->nsites--;
    r->version++;
    return 0;
}

uint64_t xt_ring_key(uint32_t fsid, uint64_t table, uint32_t slice)
{
    uint8_t b[16];
    xt_put_u32(b, fsid);
    xt_put_u64(b + 4, table);
    xt_put_u32(b + 12, slice);
    return xt_hash_bytes(b, sizeof(b), XT_RING_KEY_SEED);
}

int xt_ring_lookup(const xt_ring *r, uint64_t key, uint32_t *site)
{
    if (r->npts == 0)
        return -ENOENT;
    uint32_t k = pts_lower_pos(r, key);
    assert(k <= r->npts);
    *site = r->pts[k == r->npts ? 0 : k].site;
    return 0;
}

uint32_t xt_ring_successors(const xt_ring *r, uint64_t key, uint32_t n, uint32_t *sites)
{
    uint32_t got = 0;
    if (r->npts == 0)
        return 0;
    uint32_t k = pts_lower_pos(r, key);
    /* A site has many points: walk until n distinct or once around. */
    for (uint32_t step = 0; step < r->npts && got < n && got < r->nsites; step++) {
        uint32_t site = r->pts[(k + step) % r->npts].site;
        bool seen = false;
        for (uint32_t i = 0; i < got && !seen; i++)
            seen = sites[i] == site;
        if (!seen)
            sites[got++] = site;
    }
    return got;
}

uint32_t xt_ring_replicas(const xt_ring *r, uint32_t fsid, uint64_t table, uint32_t slice,
                          uint32_t n, uint32_t *sites)
{
    return xt_ring_successors(r, xt_ring_key(fsid, table, slice), n, sites);
}

#define XT_TRACT_SEED UINT64_C(0x504f4d5452414354) /* "POMTRACT" */

uint32_t xt_ring_tract_sites(const xt_ring *r, uint64_t set, uint32_t t, uint32_t copies,
                             uint32_t *sites)
{
    uint8_t k[12];
    for (int i = 0; i < 8; i++)
        k[i] = (uint8_t)(set >> (8 * i));
    for (int i = 0; i < 4; i++)
        k[8 + i] = (uint8_t)(t >> (8 * i));
    return xt_ring_successors(r, xt_hash_bytes(k, sizeof k, XT_TRACT_SEED), copies, sites);
}

int xt_ring_tract_copies(const xt_ring *r, const char *setting, uint32_t *copies)
{
    const char *p = setting ? setting : "";
    if (!*p) {
        *copies = XT_MIN(3u, xt_ring_nsites(r));
        return 0;
    }
    char *end = NULL;
    unsigned long n = 0;
    if (strncmp(p, "copies=", 7) || (n = strtoul(p + 7, &end, 10)) < 1 ||
        n > XT_TRACT_COPIES_MAX || *end)
        return -EINVAL;
    *copies = (uint32_t)n;
    return 0;
}

int xt_ring_owner_changed(const xt_ring *from, const xt_ring *to, uint64_t key)
{
    uint32_t a = 0, b = 0;
    int ra = xt_ring_lookup(from, key, &a), rb = xt_ring_lookup(to, key, &b);
    if (ra < 0 || rb < 0)
        return ra != rb;
    return a != b;
}

double xt_ring_share(const xt_ring *r, uint32_t site)
{
    double s = 0;
    for (uint32_t k = 0; k < r->npts; k++)
        if (r->pts[k].site == site)
            s += arc_share(r, k);
    return s;
}

/* Walks the union of both rings' positions: keys in (previous, x] have, in
 * each ring, the owner of that ring's first point at or after x. */
double xt_ring_moved_share(const xt_ring *from, const xt_ring *to)
{
    const xt_ring *a = from, *b = to;
    if (a->npts == 0 || b->npts == 0)
        return a->npts == b->npts ? 0.0 : 1.0;
    uint64_t last = XT_MAX(a->pts[a->npts - 1].pos, b->pts[b->npts - 1].pos);
    uint64_t prev = last;
    uint32_t ia = 0, ib = 0;
    double moved = 0;
    int first = 1;
    while (ia < a->npts || ib < b->npts) {
        uint64_t x = UINT64_MAX;
        if (ia < a->npts)
            x = a->pts[ia].pos;
        if (ib < b->npts && b->pts[ib].pos < x)
            x = b->pts[ib].pos;
        double len = (double)(x - prev) / TWO64;
        if (first && x == last)
            len = 1.0; /* every point at one position: one arc, the whole ring */
        first = 0;
        uint32_t oa = a->pts[ia < a->npts ? ia : 0].site;
        uint32_t ob = b->pts[ib < b->npts ? ib : 0].site;
        if (oa != ob)
            moved += len;
        while (ia < a->npts && a->pts[ia].pos == x)
            ia++;
        while (ib < b->npts && b->pts[ib].pos == x)
            ib++;
        prev = x;
    }
    return moved;
}

/* ---- serialisation ---------------------------------------------------- */

size_t xt_ring_encoded_size(const xt_ring *r)
{
    size_t n = XT_RING_HDR_SIZE + XT_RING_CSUM_SIZE;
    for (uint32_t k = 0; k < r->nsites; k++)
        n += 8 + r->sites[k].nv;
    return n;
}

long xt_ring_encode(const xt_ring *r, void *buf, size_t cap)
{
    size_t total = xt_ring_encoded_size(r);
    if (cap < total)
        return -ENOSPC;
    uint8_t *p = buf;
    xt_put_u32(p, XT_RING_MAGIC);
    xt_put_u16(p + 4, XT_RING_FORMAT_V1);
    xt_put_u16(p + 6, 0);
    xt_put_u32(p + 8, r->ring_id);
    xt_put_u32(p + 12, r->vps);
    xt_put_u64(p + 16, r->version);
    xt_put_u32(p + 24, r->nsites);
    size_t pos = XT_RING_HDR_SIZE;
    for (uint32_t k = 0; k < r->nsites; k++) {
        xt_put_u32(p + pos, r->sites[k].id);
        xt_put_u32(p + pos + 4, r->sites[k].weight);
        memcpy(p + pos + 8, r->sites[k].choice, r->sites[k].nv);
        pos += 8 + r->sites[k].nv;
    }
    xt_put_u64(p + pos, xt_hash_bytes(p, pos, XT_RING_CSUM_SEED));
    return (long)total;
}

/* Checks the site records of an encoding; returns the point count. */
static long ring_check_sites(const uint8_t *p, size_t end, unsigned vps, uint32_t nsites)
{
    size_t pos = XT_RING_HDR_SIZE;
    uint64_t npts = 0;
    uint32_t prev_id = 0;
    for (uint32_t k = 0; k < nsites; k++) {
        if (end - pos < 8)
            return -EBADMSG;
        uint32_t id = xt_get_u32(p + pos), weight = xt_get_u32(p + pos + 4);
        if ((k > 0 && id <= prev_id) || weight == 0 || weight > XT_RING_WEIGHT_MAX)
            return -EBADMSG;
        prev_id = id;
        unsigned nv = xt_ring_vnodes(vps, weight);
        npts += nv;
        if (npts > XT_RING_MAX_POINTS || end - pos - 8 < nv)
            return -EBADMSG;
        for (unsigned v = 0; v < nv; v++)
            if (p[pos + 8 + v] >= XT_RING_CANDIDATES)
                return -EBADMSG;
        pos += 8 + nv;
    }
    return pos == end ? (long)npts : -EBADMSG;
}

int xt_ring_decode(const void *buf, size_t len, xt_ring **out)
{
    const uint8_t *p = buf;
    *out = NULL;
    if (!buf || len < XT_RING_HDR_SIZE + XT_RING_CSUM_SIZE)
        return -EBADMSG;
    size_t end = len - XT_RING_CSUM_SIZE;
    unsigned vps = xt_get_u32(p + 12);
    uint32_t nsites = xt_get_u32(p + 24);
    if (xt_get_u32(p) != XT_RING_MAGIC || xt_get_u16(p + 4) != XT_RING_FORMAT_V1 ||
        xt_get_u16(p + 6) != 0 || vps == 0 || vps > XT_RING_VNODES_MAX ||
        nsites > XT_RING_MAX_SITES)
        return -EBADMSG;
    if (xt_get_u64(p + end) != xt_hash_bytes(p, end, XT_RING_CSUM_SEED))
        return -EBADMSG;
    long npts = ring_check_sites(p, end, vps, nsites);
    if (npts < 0)
        return (int)npts;

    xt_ring *r = xt_ring_new(xt_get_u32(p + 8), vps);
    if (!r)
        return -ENOMEM;
    r->version = xt_get_u64(p + 16);
    if (nsites) {
        r->sites = xt_calloc(nsites, sizeof(ring_site));
        r->pts = xt_malloc((size_t)npts * sizeof(ring_point));
        if (!r->sites || !r->pts)
            goto nomem;
        r->sites_cap = nsites;
        r->pts_cap = (uint32_t)npts;
    }
    size_t pos = XT_RING_HDR_SIZE;
    for (uint32_t k = 0; k < nsites; k++) {
        ring_site *s = &r->sites[k];
        s->id = xt_get_u32(p + pos);
        s->weight = xt_get_u32(p + pos + 4);
        s->nv = xt_ring_vnodes(vps, s->weight);
        s->choice = xt_malloc(s->nv);
        if (!s->choice)
            goto nomem;
        r->nsites = k + 1;
        memcpy(s->choice, p + pos + 8, s->nv);
        for (uint32_t v = 0; v < s->nv; v++)
            r->pts[r->npts++] = (ring_point){
                point_pos(r->ring_id, s->id, v, s->choice[v]), s->id, v};
        pos += 8 + s->nv;
    }
    if (r->npts)
        qsort(r->pts, r->npts, sizeof(ring_point), point_qsort_cmp);
    *out = r;
    return 0;
nomem:
    xt_ring_free(r);
    return -ENOMEM;
}
