/*
 * mds_xact_copy.c -- copies (XT_F_RMU; docs/mds-xact.md "RMU: copies (the GDT)"): a
 * change of another table's row that the caller does not wait for and
 * that converges by "newest wins" (the rows' ctime_ns), such as the GDT
 * row of a directory made, moved or removed (docs/client.md "The GDT"). The RMU of a
 * whole op, where mds_xact_rmu.c's is a count delta.
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
#include "mds_xact.h"
#include "mds_xact_i.h"

#include <stdlib.h>
#include <string.h>

#include "xt_common.h"

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

struct copy_place {
    struct xt_req reqs[XT_BATCH_ATOMIC_MAX];
    uint8_t name[XT_BATCH_ATOMIC_MAX][RMU_NAME_LEN];
    uint8_t *rec[XT_BATCH_ATOMIC_MAX];  /* xt_malloc'd records */
    xt_row row[XT_BATCH_ATOMIC_MAX];
};

bool mds_xact_has_copy(const struct xt_req *reqs, size_t n)
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

int mds_xact_copy_place(mds_xact *x, const struct xt_req *reqs, size_t n,
                        const struct xt_req **out, struct copy_place **hold, size_t *failed)
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
    struct copy_place *c = NULL;
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
        mds_xact_outbox_req(x, reqs[0].t.fsid, reqs[0].t.table, reqs[0].name,
                            reqs[0].name_len, c->rec[i], (uint32_t)len, c->name[i],
                            &c->row[i], &c->reqs[i]);
        mds_stats_add(x->o.stats, MDS_CTR_RMU_QUEUED, 1);
    }
    return 0;
}

void mds_xact_copy_place_free(struct copy_place *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < XT_BATCH_ATOMIC_MAX; i++)
        xt_free(c->rec[i]);
    xt_free(c);
}

/* ---- delivery ---------------------------------------------------------------- */

int mds_xact_copy_parse(const struct mds_key *k, const xt_slice_entry *e, const uint8_t *g,
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
                        .name_len = c->tname_len, .flags = XT_F_SYS | XT_F_RMU };
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
                            .name = c->name, .name_len = RMU_NAME_LEN, .flags = XT_F_SYS };
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

bool mds_xact_copy_in_flight(const mds_xact *x, uint32_t fsid, uint64_t table,
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

void mds_xact_copy_settle(mds_xact *x)
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
                                .name = e->name, .name_len = RMU_NAME_LEN, .flags = XT_F_SYS };
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

size_t mds_xact_copy_deliver(mds_xact *x, struct copy_rec *v, size_t n)
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
    return left;
}

void mds_xact_copy_recs_free(struct copy_rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        xt_free(v[i].buf);
    xt_free(v);
}
