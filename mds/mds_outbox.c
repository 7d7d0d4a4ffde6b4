/*
 * mds_outbox.c -- the outbox: changes of rows at other MDS that an atomic
 * batch makes without waiting for them, written as outbox rows
 * (XT_SYS_OUTBOX, their formats in mds_xact_i.h) in the batch itself and
 * delivered later by rounds on the transaction thread (mds_xact.c). Two
 * kinds: the RMU of a parent's count (exactly once, by a transaction) and
 * copies (at least once, newest wins).
 *
 * ---- RMU ----
 * RMU, the reliable asynchronous update of another MDS's row
 * (docs/mds-xact.md "RMU: a parent's subdirectory count"): a parent's
 * subdirectory count after a mkdir or rmdir whose parent row sits at
 * another MDS, and its mtime/ctime
 * (max-merged: the eager op set them already, unless a crash lost that).
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
 *
 * ---- copies ----
 * Copies (XT_F_RMU; docs/mds-xact.md "Copies"): a change of another table's row that the caller does not wait for and
 * that converges by "newest wins" (the rows' ctime_ns), such as the GDT
 * row of a directory made, moved or removed (docs/client.md "The GDT"). The RMU of a
 * whole op, where the RMU above is a count delta.
 *
 *  (1) Placement, at the MDS a client's atomic batch reaches: a copy whose
 *      row this MDS places with op 0's row stays in the batch and applies
 *      with it (MDS_AOP_COPY, mds_table.h); one placed elsewhere becomes an
 *      outbox row (the count RMU's name, placed with op 0's row) holding
 *      the whole op, committed with the batch or lost with it. A copy
 *      therefore never adds a participant to a transaction.
 *  (2) Delivery, on the transaction thread with the count RMUs' round,
 *      at least once -- not the count's exactly once: a copy applied
 *      twice is a copy applied once (newest wins), so it needs no
 *      transaction. Copies whose rows are here apply with their outbox
 *      rows' deletes in one local batch. The others are *sent* (one
 *      atomic batch of up to XT_BATCH_ATOMIC_MAX per MDS, no sync) and
 *      their outbox rows kept, marked in flight, until the receiver's
 *      group holding them committed: *confirmed* at the next round by one
 *      sync at each receiver (at most one commit a round forced there, for
 *      all the copies sent to it) answered by the same incarnation; then
 *      the outbox rows are deleted here. A receiver restarted meanwhile, a
 *      failed send or sync, or this MDS's restart: the rows are sent
 *      again.
 *  (3) Copies of one row in one batch are merged (the newest sent, every
 *      outbox row kept or deleted with it): newest wins makes that the
 *      same.
 *  (4) No minimum age: a copy has no eager half to overtake.
 * Order between copies of one row held by different MDS is the stamps'
 * (clocks): a reader of a copy checks it against the row it points at.
 */
#include "mds_outbox.h"
#include "mds_xact_i.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "xt_common.h"

_Static_assert(RMU_NAME_LEN == MDS_XACT_DNAME_LEN, "an outbox row's name is a txid's");

/* One copy's outbox row found in the cache, parsed and copied out. */
struct copy_rec {
    uint32_t fsid;           /* where the outbox row is */
    uint64_t table;
    uint8_t name[RMU_NAME_LEN];
    uint8_t op;              /* XT_OP_CREATE, XT_OP_DELETE */
    uint32_t tfsid;          /* the row it changes */
    uint64_t ttable;
    uint16_t tname_len;
    uint64_t stamp;
    uint8_t *buf;            /* xt_malloc'd: name || stamp || encoding */
    size_t enc_len;
    xt_row row;              /* CREATE: view of the encoding (into buf) */
    uint32_t site;           /* its row's MDS (delivery) */
};
/* A copy sent to another MDS whose outbox row waits for its confirmation
 * ((2) above). */
struct copy_sent {
    uint32_t fsid;           /* the outbox row */
    uint64_t table;
    uint8_t name[RMU_NAME_LEN];
    uint32_t site, epoch;    /* the receiver, its incarnation */
    uint64_t gen;            /* its group holding the copy */
    uint8_t state;           /* settle: 0 waiting, 1 confirmed, 2 send again */
};

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

/* The create of a new outbox row of (fsid, table) placed with the row of
 * hash near_hash and holding record rec[0..len) into *out: its name (unique per MDS
 * incarnation, RMU_NAME_LEN bytes) is written to name and its row to
 * *row, which *out points into with rec (the caller keeps all three
 * while *out is used). */
static void outbox_req(mds_xact *x, uint32_t fsid, uint64_t table, uint64_t near_hash,
                       const uint8_t *rec, uint32_t len, uint8_t *name, xt_row *row,
                       struct xt_req *out)
{
    xt_hash_sys_head(name, XT_SYS_OUTBOX, near_hash);
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
                            .name_len = RMU_NAME_LEN, .name_hash = near_hash, .row = row,
                            .flags = XT_F_SYS | XT_F_EXCL };
}

int mds_outbox_count(mds_xact *x, const struct xt_req *q, const struct xt_req *near,
                     struct rmu_buf *b, struct xt_req *out)
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
    outbox_req(x, near->t.fsid, near->t.table, near->name_hash, r,
               (uint32_t)(RMU_OFF_NAME + q->name_len), b->name, &b->row, out);
    /* The time the change set on the parent (the client's clock, as the
     * eager op), delivered again max-merged; 0: none. */
    b->row.attr.mtime_ns = (q->set_mask & XT_ROW_SET_MTIME) ? q->row->attr.mtime_ns : 0;
    return 0;
}

/* ==== copies ================================================================ */

/* Outbox record of a copy (XT_CG_USER0 of the outbox row):
 *   0 fmt COPY_FMT | 1 op (XT_OP_CREATE/XT_OP_DELETE) | 2 tfsid u32 |
 *   6 ttable u64 | 14 name_len u16 | 16 name | 16+n stamp u64 |
 *   24+n the row's encoding (CREATE only; to the end). */
#define COPY_OFF_OP     1
#define COPY_OFF_TFSID  2
#define COPY_OFF_TTABLE 6
#define COPY_OFF_NLEN   14
#define COPY_OFF_NAME   16
/* Copies per local batch (each with its outbox row's delete). */
#define COPY_LOCAL      (MDS_ATOMIC_MAX / 2)

struct mds_outbox_place {
    struct xt_req reqs[XT_BATCH_ATOMIC_MAX];
    uint8_t name[XT_BATCH_ATOMIC_MAX][RMU_NAME_LEN];
    uint8_t *rec[XT_BATCH_ATOMIC_MAX];  /* xt_malloc'd records */
    xt_row row[XT_BATCH_ATOMIC_MAX];
};

bool mds_outbox_has_copy(const struct xt_req *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (reqs[i].flags & XT_F_RMU)
            return true;
    return false;
}

/* The outbox record of copy q into *out (xt_malloc'd), *len. */
static int copy_record(const struct xt_req *q, uint8_t **out, size_t *len)
{
    uint8_t *enc = NULL;
    size_t elen = 0;
    if (q->op == XT_OP_CREATE) {
        int rc = xt_row_encode_new(q->row, q->name, q->name_len, &enc, &elen);
        if (rc < 0)
            return rc;
    }
    size_t n = COPY_OFF_NAME + q->name_len + 8 + elen;
    uint8_t *r = xt_malloc(n);
    if (!r) {
        xt_free(enc);
        return -ENOMEM;
    }
    r[0] = RMU_FMT_COPY;
    r[COPY_OFF_OP] = (uint8_t)q->op;
    xt_put_u32(r + COPY_OFF_TFSID, q->t.fsid);
    xt_put_u64(r + COPY_OFF_TTABLE, q->t.table);
    xt_put_u16(r + COPY_OFF_NLEN, (uint16_t)q->name_len);
    memcpy(r + COPY_OFF_NAME, q->name, q->name_len);
    xt_put_u64(r + COPY_OFF_NAME + q->name_len, q->row->attr.ctime_ns);
    if (elen)
        memcpy(r + COPY_OFF_NAME + q->name_len + 8, enc, elen);
    xt_free(enc);
    *out = r;
    *len = n;
    return 0;
}

static int copy_check(const struct xt_req *q)
{
    if (!q->row || (q->op != XT_OP_CREATE && q->op != XT_OP_DELETE) || q->name_len == 0 ||
        q->name_len > XT_ROW_KEY_MAX || xt_hash_is_sys(q->name, q->name_len) ||
        (q->flags & (XT_F_EXCL | XT_F_IF_VER | XT_F_IF_UUID | XT_F_SYS | XT_F_SOFT)))
        return -EINVAL;
    return 0;
}

int mds_outbox_place(mds_xact *x, const struct xt_req *reqs, size_t n,
                     const struct xt_req **out, struct mds_outbox_place **hold,
                     size_t *failed)
{
    *out = reqs;
    *hold = NULL;
    *failed = 0;
    if (n == 0 || n > XT_BATCH_ATOMIC_MAX)
        return -EINVAL;
    /* Op 0 places the batch and its outbox rows: a copy there stays. */
    for (size_t i = 0; i < n; i++)
        if ((reqs[i].flags & XT_F_RMU) && copy_check(&reqs[i]) < 0) {
            *failed = i;
            return -EINVAL;
        }
    if (!x)
        return 0; /* one MDS: every copy's row is here */
    uint32_t site[XT_BATCH_ATOMIC_MAX];
    int rc = mds_xact_owners(x, reqs, n, site);
    if (rc < 0)
        return rc == -ENOMEM ? rc : -EAGAIN;
    struct mds_outbox_place *c = NULL;
    for (size_t i = 1; i < n; i++) {
        if (!(reqs[i].flags & XT_F_RMU) || site[i] == site[0])
            continue;
        if (!c) {
            if (!(c = xt_calloc(1, sizeof *c)))
                return -ENOMEM;
            memcpy(c->reqs, reqs, n * sizeof *reqs);
            *hold = c;
            *out = c->reqs;
        }
        size_t len;
        if ((rc = copy_record(&reqs[i], &c->rec[i], &len)) < 0) {
            *failed = i;
            return rc;
        }
        outbox_req(x, reqs[0].t.fsid, reqs[0].t.table, reqs[0].name_hash, c->rec[i],
                   (uint32_t)len, c->name[i], &c->row[i], &c->reqs[i]);
        mds_stats_add(x->o.stats, MDS_CTR_RMU_QUEUED, 1);
    }
    return 0;
}

void mds_outbox_place_free(struct mds_outbox_place *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < XT_BATCH_ATOMIC_MAX; i++)
        xt_free(c->rec[i]);
    xt_free(c);
}

/* ---- delivery ---------------------------------------------------------------- */

static int copy_parse(const struct mds_key *k, const xt_slice_entry *e, const uint8_t *g,
                        uint32_t glen, struct copy_rec *c)
{
    if (glen < COPY_OFF_NAME + 8 || g[0] != RMU_FMT_COPY)
        return -EBADMSG;
    uint16_t nl = xt_get_u16(g + COPY_OFF_NLEN);
    uint8_t op = g[COPY_OFF_OP];
    if (nl == 0 || nl > XT_ROW_KEY_MAX || glen < COPY_OFF_NAME + nl + 8u ||
        (op != XT_OP_CREATE && op != XT_OP_DELETE) ||
        (op == XT_OP_DELETE) != (glen == COPY_OFF_NAME + nl + 8u))
        return -EBADMSG;
    memset(c, 0, sizeof *c);
    c->fsid = k->fsid;
    c->table = k->table;
    memcpy(c->name, e->name, RMU_NAME_LEN);
    c->op = op;
    c->tfsid = xt_get_u32(g + COPY_OFF_TFSID);
    c->ttable = xt_get_u64(g + COPY_OFF_TTABLE);
    c->tname_len = nl;
    c->stamp = xt_get_u64(g + COPY_OFF_NAME + nl);
    /* Copied: the slice may change once its lock is dropped. */
    if (!(c->buf = xt_malloc(glen - COPY_OFF_NAME)))
        return -ENOMEM;
    memcpy(c->buf, g + COPY_OFF_NAME, glen - COPY_OFF_NAME);
    c->enc_len = glen - (COPY_OFF_NAME + nl + 8u);
    if (op == XT_OP_CREATE && xt_row_decode(c->buf + nl + 8, c->enc_len, &c->row) < 0) {
        xt_free(c->buf);
        c->buf = NULL;
        return -EBADMSG;
    }
    return 0;
}

/* One target row's copies sort together, newest last. */
static int copy_cmp(const void *a, const void *b)
{
    const struct copy_rec *p = a, *q = b;
    if (p->site != q->site)
        return p->site < q->site ? -1 : 1;
    if (p->tfsid != q->tfsid)
        return p->tfsid < q->tfsid ? -1 : 1;
    if (p->ttable != q->ttable)
        return p->ttable < q->ttable ? -1 : 1;
    if (p->tname_len != q->tname_len)
        return p->tname_len < q->tname_len ? -1 : 1;
    int c = memcmp(p->buf, q->buf, p->tname_len);
    if (c)
        return c;
    return p->stamp < q->stamp ? -1 : p->stamp > q->stamp;
}

static bool same_row(const struct copy_rec *p, const struct copy_rec *q)
{
    return p->tfsid == q->tfsid && p->ttable == q->ttable && p->tname_len == q->tname_len &&
           memcmp(p->buf, q->buf, p->tname_len) == 0;
}

/* The copy op of record c (its row's name and row point into c). */
static struct xt_req copy_op(struct copy_rec *c)
{
    struct xt_req q = { .op = c->op, .t = { c->tfsid, c->ttable, -1 }, .name = c->buf,
                        .name_len = c->tname_len, .name_hash = xt_hash_name(c->buf, c->tname_len),
                        .flags = XT_F_SYS | XT_F_RMU };
    if (c->op == XT_OP_DELETE) {
        xt_row_init(&c->row);
        c->row.attr.type = XT_ROW_KV;
    }
    c->row.attr.ctime_ns = c->stamp;
    q.row = &c->row;
    return q;
}

static struct xt_req outbox_delete(const struct copy_rec *c)
{
    return (struct xt_req){ .op = XT_OP_DELETE, .t = { c->fsid, c->table, -1 },
                            .name = c->name, .name_len = RMU_NAME_LEN,
                            .name_hash = xt_hash_name(c->name, RMU_NAME_LEN), .flags = XT_F_SYS };
}

/* ---- in flight: sent, not confirmed (on the thread) ---------------------- */

static int sent_cmp(const void *a, const void *b)
{
    const struct copy_sent *p = a, *q = b;
    if (p->fsid != q->fsid)
        return p->fsid < q->fsid ? -1 : 1;
    if (p->table != q->table)
        return p->table < q->table ? -1 : 1;
    return memcmp(p->name, q->name, RMU_NAME_LEN);
}

static bool copy_in_flight(const mds_xact *x, uint32_t fsid, uint64_t table,
                             const uint8_t *name)
{
    struct copy_sent k = { .fsid = fsid, .table = table };
    memcpy(k.name, name, RMU_NAME_LEN);
    return x->csent_n &&
           bsearch(&k, x->csent, x->csent_n, sizeof k, sent_cmp) != NULL;
}

static int sent_add(mds_xact *x, const struct copy_rec *c, uint32_t site, uint32_t epoch,
                    uint64_t gen)
{
    if (x->csent_n == x->csent_cap) {
        size_t cap = x->csent_cap ? x->csent_cap * 2 : 64;
        struct copy_sent *v = xt_realloc(x->csent, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        x->csent = v;
        x->csent_cap = cap;
    }
    struct copy_sent *e = &x->csent[x->csent_n++];
    *e = (struct copy_sent){ .fsid = c->fsid, .table = c->table, .site = site, .epoch = epoch,
                             .gen = gen };
    memcpy(e->name, c->name, RMU_NAME_LEN);
    return 0;
}

/* Whether the receiver `site` committed group `gen` of incarnation
 * `epoch` (a sync there: it commits first if it has not yet). */
static bool confirmed(mds_xact *x, uint32_t site, uint32_t epoch, uint64_t gen)
{
    xt_rpc_pool *pool = mds_route_pool(x->o.route, site);
    if (!pool)
        return false;
    xt_rpc_call call = { .req_id = xt_rpc_new_req_id(), .timeout_ms = (int)x->o.call_timeout_ms };
    uint64_t committed = 0;
    uint32_t at = 0;
    return xt_mds_sync(pool, &call, gen, &committed, &at) == 0 && at == epoch &&
           committed >= gen;
}

static void copy_settle(mds_xact *x)
{
    size_t keep = 0, done = 0, again = 0;
    /* Each receiver once: the newest group sent to it of its epoch. */
    for (size_t i = 0; i < x->csent_n; i++) {
        struct copy_sent *e = &x->csent[i];
        if (e->state != 0)
            continue;
        uint64_t gen = e->gen;
        for (size_t j = i + 1; j < x->csent_n; j++)
            if (x->csent[j].site == e->site && x->csent[j].epoch == e->epoch)
                gen = XT_MAX(gen, x->csent[j].gen);
        bool ok = confirmed(x, e->site, e->epoch, gen);
        for (size_t j = i; j < x->csent_n; j++) {
            struct copy_sent *f = &x->csent[j];
            if (f->state == 0 && f->site == e->site)
                f->state = ok && f->epoch == e->epoch && f->gen <= gen ? 1 : 2;
        }
    }
    for (size_t i = 0; i < x->csent_n; i++) {
        struct copy_sent *e = &x->csent[i];
        if (e->state == 1) {
            /* Durable there: the outbox row goes (a local op; a row that
             * moved or went meanwhile is its new holder's to send again). */
            struct xt_req q = { .op = XT_OP_DELETE, .t = { e->fsid, e->table, -1 },
                                .name = e->name, .name_len = RMU_NAME_LEN,
                                .name_hash = xt_hash_name(e->name, RMU_NAME_LEN),
                                .flags = XT_F_SYS };
            struct xt_resp r;
            memset(&r, 0, sizeof r);
            if (x->io.op(x->io.ctx, &q, &r) == 0)
                done++;
            xt_resp_free(&r);
        } else if (e->state == 2) {
            again++; /* not confirmed: sent again (it is still an outbox row) */
        } else {
            x->csent[keep++] = *e;
        }
    }
    x->csent_n = keep;
    if (done || again)
        XT_DBG("copy: %zu sent copies confirmed, %zu to send again", done, again);
    if (done)
        mds_stats_add(x->o.stats, MDS_CTR_RMU_DELIVERED, done);
}

/* Copies v[0..n) (sorted, all for `site`, n <= XT_BATCH_ATOMIC_MAX once
 * merged): one local batch with their outbox rows' deletes, or one batch
 * sent there (the rows kept in flight). */
static int deliver_batch(mds_xact *x, uint32_t site, struct copy_rec *v, size_t n)
{
    struct xt_req reqs[2 * COPY_LOCAL];
    struct xt_resp resps[2 * COPY_LOCAL];
    size_t nr = 0, failed = 0;
    bool here = site == mds_route_self(x->o.route);
    for (size_t i = 0; i < n; i++)
        if (i + 1 == n || !same_row(&v[i], &v[i + 1])) /* (3): the newest of a run */
            reqs[nr++] = copy_op(&v[i]);
    for (size_t i = 0; here && i < n; i++)
        reqs[nr++] = outbox_delete(&v[i]);
    memset(resps, 0, sizeof resps);
    uint64_t gen = 0;
    int rc = mds_xact_send(x, site, reqs, nr, resps, &failed, &gen);
    uint32_t epoch = (uint32_t)resps[0].epoch, at = resps[0].epoch_site;
    for (size_t i = 0; i < nr; i++)
        xt_resp_free(&resps[i]);
    if (rc == -EREMOTE)
        mds_xact_learn(x, &reqs[failed < nr ? failed : 0]); /* our view was stale */
    if (rc < 0) {
        XT_DBG("copy: %zu copies to MDS %u: %s (op %zu): next round", nr, site, strerror(-rc),
               failed);
        return rc;
    }
    if (here) {
        mds_stats_add(x->o.stats, MDS_CTR_RMU_DELIVERED, n);
        return 0;
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = sent_add(x, &v[i], at ? at : site, epoch, gen);
    return rc;
}

static size_t copy_deliver(mds_xact *x, struct copy_rec *v, size_t n)
{
    if (n == 0)
        return 0;
    /* The receiver of each copy (this MDS's view; a stale one is
     * corrected by the batch's answer next round). */
    size_t left = 0;
    for (size_t i = 0; i < n; i++) {
        struct xt_req q = copy_op(&v[i]);
        if (mds_xact_owners(x, &q, 1, &v[i].site) < 0)
            v[i].site = 0;
    }
    qsort(v, n, sizeof *v, copy_cmp);
    uint32_t self = mds_route_self(x->o.route);
    for (size_t i = 0; i < n;) {
        if (v[i].site == 0) {
            left++;
            i++;
            continue;
        }
        /* Here: COPY_LOCAL records (copies and deletes fit a batch);
         * there: XT_BATCH_ATOMIC_MAX rows (copies merged), any records. */
        bool here = v[i].site == self;
        size_t j = i, rows = 0;
        while (j < n && v[j].site == v[i].site) {
            bool new_row = j == i || !same_row(&v[j - 1], &v[j]);
            if (here ? j - i == COPY_LOCAL : new_row && rows == XT_BATCH_ATOMIC_MAX)
                break;
            rows += new_row;
            j++;
        }
        if (deliver_batch(x, v[i].site, &v[i], j - i) < 0)
            left += j - i;
        i = j;
    }
    if (x->csent_n > 1)
        qsort(x->csent, x->csent_n, sizeof *x->csent, sent_cmp);
    /* copy_in_flight's bsearch: sorted by outbox row. */
    for (size_t i = 1; i < x->csent_n; i++)
        assert(sent_cmp(&x->csent[i - 1], &x->csent[i]) <= 0);
    return left;
}

static void copy_recs_free(struct copy_rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        xt_free(v[i].buf);
    xt_free(v);
}

/* ==== RMU delivery and the round ============================================== */

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
    struct copy_rec *c;      /* copies' rows (copies, above) */
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
        if (copy_in_flight(s->x, k->fsid, k->table, e->name))
            return 0;
        if ((rc = grow((void **)&s->c, s->nc, &s->ccap, sizeof *s->c)) < 0)
            return rc;
        if ((rc = copy_parse(k, e, g, glen, &s->c[s->nc])) == 0)
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
 * copies (s->v: xt_free; s->c: copy_recs_free). */
static int ob_collect(mds_xact *x, struct ob_scan *s)
{
    *s = (struct ob_scan){ .x = x, .born_before = xt_now_ns() - RMU_MIN_AGE_NS };
    int rc = mds_xact_sys_rows(x, ob_cb, s);
    if (rc < 0) {
        xt_free(s->v);
        copy_recs_free(s->c, s->nc);
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
    uint8_t ids[RMU_CHUNK * 8]; /* the deltas' ids (mds_soft.h) */
    for (size_t i = 0; i < n; i++) {
        xt_put_u64(ids + 8 * i, mds_soft_id(v[i].name, RMU_NAME_LEN));
        reqs[i] = (struct xt_req){ .op = XT_OP_DELETE, .t = { v[i].fsid, v[i].table, -1 },
                                   .name = v[i].name, .name_len = RMU_NAME_LEN,
                                   .name_hash = xt_hash_name(v[i].name, RMU_NAME_LEN),
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
                               .name_hash = xt_hash_name(v[0].tname, v[0].tname_len),
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
            (void)mds_soft_take(x->o.soft, v[0].tfsid, v[0].ttable, v[0].tname,
                                v[0].tname_len, ids, n);
    } else {
        /* The ids travel with the count; the parent's MDS takes them when
         * it prepares it (mds_xact_part.c) and never stores them. */
        if ((rc = xt_row_view_set_group(&up, XT_CG_RMU_IDS, ids, (uint32_t)(8 * n))) < 0)
            return rc;
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

void mds_outbox_round(mds_xact *x)
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
    copy_settle(x);
    if (x->o.rmu_hold)
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
    size_t cleft = copy_deliver(x, s.c, s.nc);
    copy_recs_free(s.c, s.nc);
    if (n || s.nc)
        XT_DBG("rmu: round: %zu counts, %zu copies; %zu, %zu left for a later round", n, s.nc,
               left, cleft);
    x->rmu_retry = now + RMU_RETRY_NS;
}

void mds_outbox_free(mds_xact *x)
{
    xt_free(x->csent); /* (their outbox rows are sent again after a restart) */
    x->csent = NULL;
    x->csent_n = x->csent_cap = 0;
    while (x->rmu_held) {
        struct txn *t = x->rmu_held;
        x->rmu_held = t->next;
        mds_xact_txn_free(t); /* (its participants' resolvers finish it) */
    }
}
