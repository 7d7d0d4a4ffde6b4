/*
 * mdsl_apply.c -- the rules by which COMMIT and GCMOVE entries change the
 * index, shared by live commits, restart replay, rebuild and GC (so that
 * replaying a folder's TSS in order reproduces the live index exactly).
 *
 * Rules (one entry asserts "this record of version v is current"):
 *  (1) IMAGE v of a slice: ignored if the slice has an image newer than v;
 *      otherwise it replaces any entry at v and deletes every entry older
 *      than v (an image contains everything before it).
 *  (2) DELTA v: ignored if the slice has an image at v or newer; otherwise
 *      it replaces any entry at v.
 *  (3) COLUMN (slice, key, group) v: ignored if the current pointer has a
 *      newer version; otherwise it replaces it. Tombstones stay as pointers
 *      so an older version can never come back.
 *  A MOVED tombstone (an empty IMAGE, docs/mdsl-scale.md "Tombstones") is an
 *  image for these rules: it drops the older pointers and stays as the
 *  slice's newest image until a newer image replaces it.
 *  Equal versions replace, so re-asserting a record at a new place (GC) and
 *  replaying an already applied TSS tail (restart) are both idempotent.
 *
 * Live bytes: a pointer charges its record's length to the record's segment
 * and MDSL_EVIDENCE_COST to its evidence segment; c->ld collects the deltas.
 *
 * Cost: a commit must not read every pointer of its slices (a slice may
 * hold thousands of deltas, and LevelDB deletion markers of the older ones).
 *  (4) s->slices caches per slice the newest image version and bounds
 *      [lo, hi] on the versions present (mdsl_sltab.h). It is read from the
 *      index on a slice's first touch, and each batch's new states are
 *      installed only once the batch is written (mdsl_apply_done); a context
 *      freed without that forgets them, so the cache never runs ahead of the
 *      index. Rebuild and restart start from an empty cache.
 *  (5) Rule (1) leaves no pointer older than the newest image, so an image
 *      needs the pointers in [lo, v] only (one seek to lo: no walk over the
 *      deletion markers below it), and an entry at version v can only meet
 *      an existing pointer when lo <= v <= hi: a new delta (v > hi) reads
 *      nothing. These reads give exactly the pointers the rules can change,
 *      so the puts and deletes are the same as with a full read of the slice.
 */
#include "mdsl_handle_i.h"
#include "mdsl_apply_i.h"

#include <stdlib.h>
#include <string.h>

uint8_t *mdsl_entries_encode(const struct mdsl_entry *e, size_t n)
{
    uint8_t *p = xt_malloc(n ? n * MDSL_ENTRY_SIZE : 1);
    if (p)
        for (size_t i = 0; i < n; i++)
            mdsl_seg_entry_put(p + i * MDSL_ENTRY_SIZE, &e[i]);
    return p;
}

int mdsl_entries_decode(const uint8_t *payload, uint32_t len, struct mdsl_entry **e, size_t *n)
{
    if (len % MDSL_ENTRY_SIZE)
        return -EBADMSG;
    size_t k = len / MDSL_ENTRY_SIZE;
    struct mdsl_entry *v = xt_malloc((k ? k : 1) * sizeof *v);
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < k; i++) {
        mdsl_seg_entry_get(payload + i * MDSL_ENTRY_SIZE, &v[i]);
        uint8_t t = v[i].type;
        if ((t != XT_STORE_IMAGE && t != XT_STORE_DELTA && t != XT_STORE_COLUMN) ||
            v[i].len < MDSL_HDR_SIZE) {
            xt_free(v);
            return -EBADMSG;
        }
    }
    *e = v;
    *n = k;
    return 0;
}

static int ld_add(struct apply_ctx *c, bool is_cs, uint32_t group, uint32_t segno, int64_t d)
{
    for (size_t i = 0; i < c->nld; i++) {
        struct live_delta *x = &c->ld[i];
        if (x->fo == c->fo && x->is_cs == is_cs && x->group == group && x->segno == segno) {
            x->delta += d;
            return 0;
        }
    }
    if (c->nld == c->capld) {
        size_t nc = c->capld ? c->capld * 2 : 16;
        struct live_delta *nv = xt_realloc(c->ld, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        c->ld = nv;
        c->capld = nc;
    }
    c->ld[c->nld++] = (struct live_delta){ c->fo, is_cs, group, segno, d };
    return 0;
}

/* Charge (sign +1) or refund (-1) the live bytes of one pointer. */
static int charge(struct apply_ctx *c, bool is_cs, uint32_t group, const struct mdsl_ptr *p, int sign)
{
    int rc = ld_add(c, is_cs, group, p->segno, sign * (int64_t)p->len);
    return rc ? rc : ld_add(c, false, 0, p->evidence, sign * (int64_t)MDSL_EVIDENCE_COST);
}

static bool ptr_eq(const struct mdsl_ptr *a, const struct mdsl_ptr *b)
{
    return a->segno == b->segno && a->len == b->len && a->off == b->off && a->csum == b->csum &&
           a->version == b->version && a->evidence == b->evidence && a->type == b->type &&
           a->flags == b->flags;
}

static struct mdsl_ptr entry_ptr(const struct mdsl_entry *e, uint32_t evidence)
{
    return (struct mdsl_ptr){ .segno = e->segno, .len = e->len, .off = e->off, .csum = e->csum,
                              .version = e->version, .evidence = evidence, .type = e->type,
                              .flags = e->flags };
}

static int slice_assert(struct mdsl_ptr_list *w, struct mdsl_slstate *ns,
                        const struct mdsl_ptr *np)
{
    uint64_t v = np->version;
    bool image = np->type == XT_STORE_IMAGE;
    if (ns->has_img && (image ? ns->img > v : ns->img >= v))
        return 0;
    size_t k = 0;
    for (size_t i = 0; i < w->n; i++) {
        bool drop = w->p[i].version == v || (image && w->p[i].version < v);
        if (!drop)
            w->p[k++] = w->p[i];
    }
    w->n = k;
    int rc = mdsl_ptr_list_add(&(struct mdsl_ikey){ .version = v }, np, w);
    if (rc < 0)
        return rc;
    for (size_t i = w->n - 1; i > 0 && w->p[i - 1].version > w->p[i].version; i--) {
        struct mdsl_ptr t = w->p[i];
        w->p[i] = w->p[i - 1];
        w->p[i - 1] = t;
    }
    if (image) {
        ns->has_img = true;
        ns->img = v;
        ns->img_moved = (np->flags & XT_STORE_F_MOVED) != 0;
        ns->lo = v; /* everything older is gone: w held all of it */
    } else if (!ns->any || v < ns->lo) {
        ns->lo = v;
    }
    if (!ns->any || v > ns->hi)
        ns->hi = v;
    ns->any = true;
    return 0;
}

/* ---- slice states (mdsl_sltab.h) ---------------------------------------- */

static int state_collect(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    struct mdsl_slstate *st = arg;
    uint64_t v = k->version; /* the key is the truth */
    if (!st->any || v < st->lo)
        st->lo = v;
    if (!st->any || v > st->hi)
        st->hi = v;
    st->any = true;
    if (p->type == XT_STORE_IMAGE && (!st->has_img || v > st->img)) {
        st->has_img = true;
        st->img = v;
        st->img_moved = (p->flags & XT_STORE_F_MOVED) != 0;
    }
    return 0;
}

static xt_slice_id slice_of(const struct folder *fo, uint32_t slice)
{
    return (xt_slice_id){ .fsid = fo->fsid, .slice = slice, .table = fo->table };
}

int mdsl_apply_slice_state(mdsl_store *s, xt_slice_id id, struct mdsl_slstate *st)
{
    assert(!xt_mutex_held(&s->mu));
    if (mdsl_sltab_get(s->slices, id, st))
        return 0;
    *st = (struct mdsl_slstate){ 0 };
    int rc = mdsl_index_scan_slice(s->idx, id, state_collect, st);
    if (rc == 0)
        (void)mdsl_sltab_put(s->slices, id, st); /* a cache */
    return rc;
}

static int slice_state(struct apply_ctx *c, uint32_t slice, struct mdsl_slstate *st)
{
    return mdsl_apply_slice_state(c->s, slice_of(c->fo, slice), st);
}

static int su_add(struct apply_ctx *c, uint32_t slice, const struct mdsl_slstate *st)
{
    if (c->nsu == c->capsu) {
        size_t nc = c->capsu ? c->capsu * 2 : 8;
        struct slice_upd *nv = xt_realloc(c->su, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        c->su = nv;
        c->capsu = nc;
    }
    c->su[c->nsu++] = (struct slice_upd){ slice_of(c->fo, slice), *st };
    return 0;
}

static int cmp_version(const void *a, const void *b)
{
    uint64_t x = ((const struct mdsl_ptr *)a)->version, y = ((const struct mdsl_ptr *)b)->version;
    return x < y ? -1 : x > y;
}

/* Into cur (ascending versions): every pointer that entries e[idx[0..n))
 * can change -- those at their versions (rules 1, 2) and, when one is an
 * image the slice does not outdate, all those up to it (rule 1). With the
 * slice state that is a bounded scan from st->lo plus point reads of the
 * versions inside [lo, hi]: a new delta (version past hi) reads nothing. */
static int read_affected(struct apply_ctx *c, uint32_t slice, const struct mdsl_slstate *st,
                         const struct mdsl_entry *e, const size_t *idx, size_t n,
                         struct mdsl_ptr_list *cur)
{
    struct folder *fo = c->fo;
    bool scan = false;
    uint64_t to = 0;
    for (size_t i = 0; i < n; i++) {
        const struct mdsl_entry *f = &e[idx[i]];
        if (f->type == XT_STORE_IMAGE && (!st->has_img || f->version >= st->img) &&
            f->version >= st->lo && (!scan || f->version > to))
            scan = true, to = f->version;
    }
    if (!st->any)
        return 0;
    int rc = 0;
    if (scan)
        rc = mdsl_index_scan_slice_from(c->s->idx, slice_of(fo, slice), st->lo, to,
                                        mdsl_ptr_list_add, cur);
    size_t scanned = cur->n;
    struct mdsl_ikey k = { .kind = MDSL_IK_SLICE, .id = slice_of(fo, slice) };
    for (size_t i = 0; i < n && rc == 0; i++) {
        k.version = e[idx[i]].version;
        if (k.version < st->lo || k.version > st->hi || (scan && k.version <= to))
            continue;
        bool dup = false;
        for (size_t j = scanned; j < cur->n && !dup; j++)
            dup = cur->p[j].version == k.version;
        struct mdsl_ptr p;
        int g = dup ? -ENOENT : mdsl_index_get(c->s->idx, &k, &p);
        if (g == 0)
            rc = mdsl_ptr_list_add(&k, &p, cur);
        else if (g != -ENOENT)
            rc = g;
    }
    if (rc == 0 && cur->n > scanned)
        qsort(cur->p, cur->n, sizeof *cur->p, cmp_version);
    return rc;
}

static int apply_slice(struct apply_ctx *c, uint32_t slice, const struct mdsl_entry *e,
                       const size_t *idx, size_t n, uint32_t evidence)
{
    struct folder *fo = c->fo;
    struct mdsl_ptr_list cur = { 0 }, w = { 0 };
    struct mdsl_slstate st;
    int rc = slice_state(c, slice, &st);
    if (rc == 0)
        rc = read_affected(c, slice, &st, e, idx, n, &cur);
    if (rc == 0 && cur.n && !(w.p = xt_malloc(cur.n * sizeof *w.p)))
        rc = -ENOMEM;
    if (rc == 0 && cur.n) {
        memcpy(w.p, cur.p, cur.n * sizeof *w.p);
        w.n = w.cap = cur.n;
    }
    struct mdsl_slstate ns = st;
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct mdsl_ptr np = entry_ptr(&e[idx[i]], evidence);
        rc = slice_assert(&w, &ns, &np);
    }
    struct mdsl_ikey k = { .kind = MDSL_IK_SLICE, .id = slice_of(fo, slice) };
    /* diff the two version-sorted lists into puts and deletes; pointers
     * outside cur are untouched by the rules, so this is the whole change */
    size_t i = 0, j = 0;
    while (rc == 0 && (i < cur.n || j < w.n)) {
        if (j == w.n || (i < cur.n && cur.p[i].version < w.p[j].version)) {
            k.version = cur.p[i].version;
            mdsl_index_batch_del(c->b, &k);
            rc = charge(c, false, 0, &cur.p[i++], -1);
        } else if (i == cur.n || w.p[j].version < cur.p[i].version) {
            k.version = w.p[j].version;
            mdsl_index_batch_put(c->b, &k, &w.p[j]);
            rc = charge(c, false, 0, &w.p[j++], +1);
        } else {
            if (!ptr_eq(&cur.p[i], &w.p[j])) {
                k.version = w.p[j].version;
                mdsl_index_batch_put(c->b, &k, &w.p[j]);
                rc = charge(c, false, 0, &cur.p[i], -1);
                if (rc == 0)
                    rc = charge(c, false, 0, &w.p[j], +1);
            }
            i++, j++;
        }
    }
    if (rc == 0)
        rc = su_add(c, slice, &ns);
    xt_free(cur.p);
    xt_free(w.p);
    return rc;
}

static int apply_column(struct apply_ctx *c, const struct mdsl_entry *e, const size_t *idx,
                        size_t n, uint32_t evidence)
{
    struct folder *fo = c->fo;
    const struct mdsl_entry *f = &e[idx[0]];
    struct mdsl_ikey k = { .kind = MDSL_IK_COLUMN, .id = slice_of(fo, f->slice),
                           .key = f->key, .group = f->group };
    struct mdsl_ptr old, cur;
    int rc = mdsl_index_get(c->s->idx, &k, &old);
    if (rc < 0 && rc != -ENOENT)
        return rc;
    bool had = rc == 0, has = had;
    cur = old;
    for (size_t i = 0; i < n; i++) {
        struct mdsl_ptr np = entry_ptr(&e[idx[i]], evidence);
        if (!has || cur.version <= np.version) {
            cur = np;
            has = true;
        }
    }
    if (!has || (had && ptr_eq(&old, &cur)))
        return 0;
    mdsl_index_batch_put(c->b, &k, &cur);
    rc = had ? charge(c, true, k.group, &old, -1) : 0;
    return rc ? rc : charge(c, true, k.group, &cur, +1);
}

static const struct mdsl_entry *sort_base;

/* Slices first, then columns; within a key, manifest order. */
static int cmp_entry(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    const struct mdsl_entry *p = &sort_base[x], *q = &sort_base[y];
    int pc = p->type == XT_STORE_COLUMN, qc = q->type == XT_STORE_COLUMN;
    if (pc != qc)
        return pc - qc;
    if (p->slice != q->slice)
        return p->slice < q->slice ? -1 : 1;
    if (pc && p->key != q->key)
        return p->key < q->key ? -1 : 1;
    if (pc && p->group != q->group)
        return p->group < q->group ? -1 : 1;
    return x < y ? -1 : x > y;
}

static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;

int mdsl_apply_entries(struct apply_ctx *c, const struct mdsl_entry *e, size_t n, uint32_t evidence)
{
    assert(c && c->s && c->fo && c->b);
    assert(!xt_mutex_held(&c->s->mu)); /* reads the index */
    if (n == 0)
        return 0;
    size_t *idx = xt_malloc(n * sizeof *idx);
    if (!idx)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    pthread_mutex_lock(&sort_mu); /* qsort has no context argument in C11 */
    sort_base = e;
    qsort(idx, n, sizeof *idx, cmp_entry);
    pthread_mutex_unlock(&sort_mu);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        const struct mdsl_entry *f = &e[idx[i]];
        bool col = f->type == XT_STORE_COLUMN;
        size_t j = i + 1;
        while (j < n) {
            const struct mdsl_entry *g = &e[idx[j]];
            if ((g->type == XT_STORE_COLUMN) != col || g->slice != f->slice ||
                (col && (g->key != f->key || g->group != f->group)))
                break;
            j++;
        }
        rc = col ? apply_column(c, e, idx + i, j - i, evidence)
                 : apply_slice(c, f->slice, e, idx + i, j - i, evidence);
        i = j;
    }
    xt_free(idx);
    return rc;
}

void mdsl_apply_live(struct apply_ctx *c)
{
    assert(xt_mutex_held(&c->s->mu));
    for (size_t i = 0; i < c->nld; i++) {
        struct live_delta *d = &c->ld[i];
        struct seg *sg = mdsl_st_seg_find(mdsl_st_segarr(d->fo, d->is_cs, d->group, false), d->segno);
        if (sg)
            sg->live += d->delta;
    }
    c->nld = 0;
}

void mdsl_apply_done(struct apply_ctx *c)
{
    for (size_t i = 0; i < c->nsu; i++) {
        struct slice_upd *u = &c->su[i];
        (void)mdsl_sltab_put(c->s->slices, u->id, &u->st);
    }
    c->nsu = 0;
}

void mdsl_apply_ctx_free(struct apply_ctx *c)
{
    /* not done: the batch may or may not be in the index; forget those
     * slices so that their next commit re-reads them (invariant 4) */
    for (size_t i = 0; i < c->nsu; i++)
        mdsl_sltab_del(c->s->slices, c->su[i].id);
    mdsl_index_batch_free(c->b);
    xt_free(c->ld);
    xt_free(c->su);
    c->b = NULL;
    c->ld = NULL;
    c->su = NULL;
    c->nld = c->capld = c->nsu = c->capsu = 0;
}
