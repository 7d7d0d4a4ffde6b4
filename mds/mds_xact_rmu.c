/*
 * mds_xact_rmu.c -- RMU, the reliable asynchronous update of another
 * MDS's row (docs/mds-xact.md "RMU: a parent's subdirectory count"): a parent's
 * subdirectory count after a mkdir or rmdir whose parent row sits at
 * another MDS, and its mtime/ctime (max-merged: the eager op set them
 * already, unless a crash lost that). The round below also
 * delivers the other kind of outbox row, copies (mds_xact_copy.c).
 *
 * The sender (the MDS that makes the entry) writes an outbox row in the
 * entry's own atomic batch: committed with the entry or lost with it. It
 * also sends the delta at once to the parent's MDS, which shows it
 * (mds_soft.h) without storing it. Delivery, on the transaction thread
 * once per commit group and at least every second: the outbox rows of
 * the cached slices, summed per
 * parent, each sum one transaction whose ops are the outbox rows' deletes
 * (here: the decider) and the parent's NLINK_ADD (prepared there with a
 * count row, which blocks nobody, and taken out of the shown delta). So:
 *  (1) a delta reaches the parent's stored nlink iff its outbox row is
 *      deleted, in one transaction: exactly once, whoever crashes when;
 *  (2) an outbox row lives in the slice of the entry it follows, so it is
 *      committed, moved and reloaded with it, and delivered by whoever
 *      holds that slice (after a restart: once the slice is cached again);
 *  (3) delivering rows of the open group is safe: the decision is stamped
 *      in this MDS's group no earlier than the outbox rows it deletes, so
 *      a crash that loses them loses the decision too, and the parent's
 *      count row rolls back (aborted) when its resolver gets to it;
 *  (4) a delivered transaction is finished only once its decision's group
 *      committed by itself: a delivery never forces a commit here;
 *  (5) a row is delivered once it is RMU_MIN_AGE old: its eager delta has
 *      reached the parent's MDS by then, so the delivery takes out of the
 *      shown delta what it stores (a delivery first would leave that
 *      delta shown twice until the view's ttl, mds_soft.h).
 */
#include "mds_xact.h"
#include "mds_xact_i.h"

#include <stdlib.h>
#include <string.h>

#include "xt_common.h"

#define RMU_OFF_TFSID  1
#define RMU_OFF_TTABLE 5
#define RMU_OFF_UUID   13
#define RMU_OFF_DELTA  21
#define RMU_OFF_NLEN   25
/* Outbox rows per delivery transaction: their deletes, the parent's
 * update and the decision row fit one atomic batch here (the decider is
 * always this MDS, so the wire's smaller XT_BATCH_ATOMIC_MAX does not
 * bound it; the parent's MDS gets only the update). */
#define RMU_CHUNK      (MDS_ATOMIC_MAX - 2)
/* A round runs when a group committed here, and at least this often: an
 * idle MDS delivers rows left over, and rows of slices it loaded (after a
 * restart, a handover from another MDS). */
#define RMU_RETRY_NS   (1000u * 1000000u)
#define RMU_MIN_AGE_NS (1000u * 1000000u)

void mds_xact_outbox_req(mds_xact *x, uint32_t fsid, uint64_t table, const void *near,
                         size_t near_len, const uint8_t *rec, uint32_t len, uint8_t *name,
                         xt_row *row, struct xt_req *out)
{
    xt_hash_sys_head(name, XT_SYS_OUTBOX, xt_hash_name(near, near_len));
    xt_put_u32(name + XT_SYS_HEAD, mds_route_self(x->o.route));
    xt_put_u32(name + XT_SYS_HEAD + 4, x->o.epoch);
    xt_put_u64(name + XT_SYS_HEAD + 8,
               atomic_fetch_add_explicit(&x->rmu_seq, 1, memory_order_relaxed) + 1);
    xt_row_init(row);
    row->attr.type = XT_ROW_KV;
    row->attr.ctime_ns = xt_now_ns();
    row->name = name;
    row->name_len = RMU_NAME_LEN;
    xt_row_view_set_group(row, XT_CG_USER0, rec, len);
    *out = (struct xt_req){ .op = XT_OP_CREATE, .t = { fsid, table, -1 }, .name = name,
                            .name_len = RMU_NAME_LEN, .row = row,
                            .flags = XT_F_SYS | XT_F_EXCL };
}

int mds_xact_rmu_outbox(mds_xact *x, const struct xt_req *q, uint32_t fsid, uint64_t table,
                        const void *near, size_t near_len, struct rmu_buf *b,
                        struct xt_req *out)
{
    if (!q->row || q->name_len == 0 || q->name_len > XT_NAME_MAX)
        return -EINVAL;
    uint8_t *r = b->rec;
    r[0] = RMU_FMT;
    xt_put_u32(r + RMU_OFF_TFSID, q->t.fsid);
    xt_put_u64(r + RMU_OFF_TTABLE, q->t.table);
    xt_put_u64(r + RMU_OFF_UUID, (q->flags & XT_F_IF_UUID) ? q->expect_uuid : 0);
    xt_put_u32(r + RMU_OFF_DELTA, q->row->attr.nlink);
    xt_put_u16(r + RMU_OFF_NLEN, (uint16_t)q->name_len);
    memcpy(r + RMU_OFF_NAME, q->name, q->name_len);
    mds_xact_outbox_req(x, fsid, table, near, near_len, r,
                        (uint32_t)(RMU_OFF_NAME + q->name_len), b->name, &b->row, out);
    /* The time the change set on the parent (the client's clock, as the
     * eager op), delivered again max-merged; 0: none. */
    b->row.attr.mtime_ns = (q->set_mask & XT_ROW_SET_MTIME) ? q->row->attr.mtime_ns : 0;
    return 0;
}

/* ---- delivery ---------------------------------------------------------------- */

/* One outbox row found in the cache, parsed. */
struct ob {
    uint32_t fsid;           /* where it is */
    uint64_t table;
    uint8_t name[RMU_NAME_LEN];
    uint32_t tfsid;          /* what it asks */
    uint64_t ttable, uuid;
    int32_t delta;
    uint64_t born;           /* the time the change set on the parent (0: none) */
    uint16_t tname_len;
    uint8_t tname[XT_NAME_MAX];
};

struct ob_scan {
    const mds_xact *x;
    uint64_t born_before;    /* xt_now_ns: younger rows wait (5) */
    struct ob *v;
    size_t n, cap;
    struct copy_rec *c;      /* copies' rows (mds_xact_copy.c) */
    size_t nc, ccap;
};

/* Room for one more element in *v (n used of *cap, each size bytes). */
static int grow(void **v, size_t n, size_t *cap, size_t size)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? *cap * 2 : 16;
    void *nv = xt_realloc(*v, c * size);
    if (!nv)
        return -ENOMEM;
    *v = nv;
    *cap = c;
    return 0;
}

static int ob_parse(const xt_slice_entry *e, struct ob *o)
{
    const uint8_t *g;
    uint32_t glen;
    if (xt_row_get_group(e->row, e->row_len, XT_CG_USER0, &g, &glen) < 0 ||
        glen < RMU_OFF_NAME || g[0] != RMU_FMT)
        return -EBADMSG;
    o->tname_len = xt_get_u16(g + RMU_OFF_NLEN);
    if (o->tname_len == 0 || o->tname_len > XT_NAME_MAX ||
        glen != (uint32_t)(RMU_OFF_NAME + o->tname_len))
        return -EBADMSG;
    memcpy(o->name, e->name, RMU_NAME_LEN);
    o->tfsid = xt_get_u32(g + RMU_OFF_TFSID);
    o->ttable = xt_get_u64(g + RMU_OFF_TTABLE);
    o->uuid = xt_get_u64(g + RMU_OFF_UUID);
    o->delta = (int32_t)xt_get_u32(g + RMU_OFF_DELTA);
    memcpy(o->tname, g + RMU_OFF_NAME, o->tname_len);
    return 0;
}

static int ob_cb(void *arg, const struct mds_key *k, const xt_slice_entry *e)
{
    struct ob_scan *s = arg;
    const uint8_t *nm = e->name;
    const uint8_t *g;
    uint32_t glen;
    xt_row meta;
    if (e->name_len != RMU_NAME_LEN || !e->row || !xt_hash_is_sys(nm, e->name_len) ||
        nm[2] != XT_SYS_OUTBOX || xt_row_decode_meta(e->row, e->row_len, &meta) < 0)
        return 0;
    int rc;
    if (xt_row_get_group(e->row, e->row_len, XT_CG_USER0, &g, &glen) == 0 && glen &&
        g[0] == RMU_FMT_COPY) {
        if (mds_xact_copy_in_flight(s->x, k->fsid, k->table, e->name))
            return 0;
        if ((rc = grow((void **)&s->c, s->nc, &s->ccap, sizeof *s->c)) < 0)
            return rc;
        if ((rc = mds_xact_copy_parse(k, e, g, glen, &s->c[s->nc])) == 0)
            s->nc++;
        else if (rc == -ENOMEM)
            return rc;
        else
            XT_ERR("rmu: a copy's outbox row of table %llu does not parse: left for fsck",
                   (unsigned long long)k->table);
        return 0;
    }
    if (meta.attr.ctime_ns > s->born_before)
        return 0;
    if ((rc = grow((void **)&s->v, s->n, &s->cap, sizeof *s->v)) < 0)
        return rc;
    struct ob *o = &s->v[s->n];
    if (ob_parse(e, o) < 0) {
        XT_ERR("rmu: an outbox row of table %llu does not parse: left for fsck",
               (unsigned long long)k->table);
        return 0;
    }
    o->fsid = k->fsid;
    o->table = k->table;
    o->born = meta.attr.mtime_ns;
    s->n++;
    return 0;
}

/* Rows with one target sort together. */
static int ob_cmp(const void *a, const void *b)
{
    const struct ob *p = a, *q = b;
    if (p->tfsid != q->tfsid)
        return p->tfsid < q->tfsid ? -1 : 1;
    if (p->ttable != q->ttable)
        return p->ttable < q->ttable ? -1 : 1;
    if (p->uuid != q->uuid)
        return p->uuid < q->uuid ? -1 : 1;
    if (p->tname_len != q->tname_len)
        return p->tname_len < q->tname_len ? -1 : 1;
    return memcmp(p->tname, q->tname, p->tname_len);
}

static bool same_target(const struct ob *p, const struct ob *q)
{
    return p->tfsid == q->tfsid && p->ttable == q->ttable && p->uuid == q->uuid &&
           p->tname_len == q->tname_len && memcmp(p->tname, q->tname, p->tname_len) == 0;
}

/* The outbox rows of every cached slice: the counts old enough (5), the
 * copies (s->v: xt_free; s->c: mds_xact_copy_recs_free). */
static int ob_collect(mds_xact *x, struct ob_scan *s)
{
    *s = (struct ob_scan){ .x = x, .born_before = xt_now_ns() - RMU_MIN_AGE_NS };
    int rc = mds_xact_sys_rows(x, ob_cb, s);
    if (rc < 0) {
        xt_free(s->v);
        mds_xact_copy_recs_free(s->c, s->nc);
    }
    return rc;
}

/* The outbox rows v[0..n) deleted here without delivery: their parent is
 * gone (removed, or replaced by another row of that name). */
static void drop_rows(mds_xact *x, const struct ob *v, size_t n, struct xt_req *reqs,
                      struct xt_resp *resps)
{
    size_t failed;
    uint64_t gen;
    memset(resps, 0, n * sizeof *resps);
    int rc = mds_xact_send(x, mds_route_self(x->o.route), reqs, n, resps, &failed, &gen);
    for (size_t i = 0; i < n; i++)
        xt_resp_free(&resps[i]);
    XT_DBG("rmu: %zu outbox rows for %.*s of table %llu dropped (the parent is gone): %d", n,
           (int)v[0].tname_len, (const char *)v[0].tname, (unsigned long long)v[0].ttable, rc);
    if (rc == 0)
        mds_stats_add(x->o.stats, MDS_CTR_RMU_DROPPED, n);
}

/* Delivers v[0..n) (n <= RMU_CHUNK rows with one target). 0: delivered
 * or dropped; < 0: left for a later round. */
static int deliver(mds_xact *x, const struct ob *v, size_t n)
{
    struct xt_req reqs[RMU_CHUNK + 1];
    struct xt_resp resps[RMU_CHUNK + 1];
    uint32_t site[RMU_CHUNK + 1];
    xt_row up;
    xt_row_init(&up);
    int64_t sum = 0;
    uint64_t born = 0;
    for (size_t i = 0; i < n; i++) {
        reqs[i] = (struct xt_req){ .op = XT_OP_DELETE, .t = { v[i].fsid, v[i].table, -1 },
                                   .name = v[i].name, .name_len = RMU_NAME_LEN,
                                   .flags = XT_F_SYS };
        sum += v[i].delta;
        born = XT_MAX(born, v[i].born);
    }
    /* (n <= RMU_CHUNK deltas of one op each: no overflow.) The times went
     * with the eager op; delivered again max-merged (never back behind a
     * later change of the parent), they survive a crash that lost it. */
    up.attr.nlink = (uint32_t)(int32_t)sum;
    up.attr.mtime_ns = up.attr.ctime_ns = born;
    uint32_t times = born ? XT_ROW_SET_MTIME | XT_ROW_SET_CTIME | XT_ROW_SET_TIMES_MAX : 0;
    reqs[n] = (struct xt_req){ .op = XT_OP_UPDATE, .t = { v[0].tfsid, v[0].ttable, -1 },
                               .name = v[0].tname, .name_len = v[0].tname_len,
                               .set_mask = XT_ROW_SET_NLINK_ADD | times,
                               .row = &up,
                               .expect_uuid = v[0].uuid,
                               .flags = XT_F_SYS | (v[0].uuid ? XT_F_IF_UUID : 0u) };
    int rc = mds_xact_owners(x, reqs, n + 1, site);
    if (rc < 0)
        return rc;
    uint32_t self = mds_route_self(x->o.route);
    for (size_t i = 0; i < n; i++)
        if (site[i] != self) {
            XT_DBG("rmu: outbox rows of table %llu are MDS %u's now: left to it",
                   (unsigned long long)v[i].table, site[i]);
            return -EREMOTE; /* the slice moved meanwhile: its new holder delivers */
        }
    size_t failed = 0;
    memset(resps, 0, sizeof resps);
    struct txn *held = NULL;
    if (site[n] == self) {
        /* The parent's row is here too: one atomic batch, no transaction. */
        uint64_t gen;
        rc = mds_xact_send(x, self, reqs, n + 1, resps, &failed, &gen);
        if (rc == 0 && x->o.soft)
            mds_soft_take(x->o.soft, v[0].tfsid, v[0].ttable, v[0].tname, v[0].tname_len,
                          (int32_t)sum);
    } else {
        rc = mds_xact_txn_run(x, reqs, n + 1, site, resps, &failed, &held);
    }
    for (size_t i = 0; i <= n; i++)
        xt_resp_free(&resps[i]);
    if (rc == 0) {
        XT_DBG("rmu: %zu outbox rows delivered to %.*s of table %llu: %+lld (%s)", n,
               (int)v[0].tname_len, (const char *)v[0].tname, (unsigned long long)v[0].ttable,
               (long long)sum, held ? "transaction" : "one batch");
        mds_stats_add(x->o.stats, MDS_CTR_RMU_DELIVERED, n);
        if (held) {
            held->next = x->rmu_held;
            x->rmu_held = held;
        }
        return 0;
    }
    if (failed == n && (rc == -ENOENT || rc == -ESTALE)) {
        drop_rows(x, v, n, reqs, resps);
        return 0;
    }
    XT_DBG("rmu: delivery of %zu rows for %.*s of table %llu: %s (op %zu): next round", n,
           (int)v[0].tname_len, (const char *)v[0].tname, (unsigned long long)v[0].ttable,
           strerror(-rc), failed);
    return rc;
}

void mds_xact_rmu_round(mds_xact *x)
{
    struct mds_group_info gi;
    mds_group_info(x->o.group, &gi);
    uint64_t now = xt_mono_ns();
    if (gi.committed_gen == x->rmu_committed && now < x->rmu_retry)
        return;
    x->rmu_committed = gi.committed_gen;
    /* (4): the transactions whose decision is durable now are finished. */
    for (struct txn **p = &x->rmu_held; *p;) {
        struct txn *t = *p;
        if (t->dgen <= gi.committed_gen) {
            *p = t->next;
            mds_xact_queue_finish(x, t);
        } else {
            p = &t->next;
        }
    }
    mds_xact_copy_settle(x);
    if (x->rmu_hold)
        return;
    struct ob_scan s;
    if (ob_collect(x, &s) < 0) {
        x->rmu_retry = now + RMU_RETRY_NS;
        return;
    }
    struct ob *v = s.v;
    size_t n = s.n;
    if (n > 1)
        qsort(v, n, sizeof *v, ob_cmp);
    size_t left = 0; /* (for the log) */
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && j - i < RMU_CHUNK && same_target(&v[i], &v[j]))
            j++;
        if (deliver(x, &v[i], j - i) < 0)
            left += j - i;
        i = j;
    }
    xt_free(v);
    size_t cleft = mds_xact_copy_deliver(x, s.c, s.nc);
    mds_xact_copy_recs_free(s.c, s.nc);
    if (n || s.nc)
        XT_DBG("rmu: round: %zu counts, %zu copies; %zu, %zu left for a later round", n, s.nc,
               left, cleft);
    x->rmu_retry = now + RMU_RETRY_NS;
}

void mds_xact_rmu_free(mds_xact *x)
{
    xt_free(x->csent); /* (their outbox rows are sent again after a restart) */
    x->csent = NULL;
    x->csent_n = x->csent_cap = 0;
    while (x->rmu_held) {
        struct txn *t = x->rmu_held;
        x->rmu_held = t->next;
        txn_free(t); /* (its participants' resolvers finish it) */
    }
}
