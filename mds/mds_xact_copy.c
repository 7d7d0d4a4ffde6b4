/*
 * mds_xact_copy.c -- copies (XT_F_RMU; docs/mds-xact.md "Copies"): a
 * change of another table's row that the caller does not wait for and
 * that converges by "newest wins" (the rows' ctime_ns), such as the GDT
 * row of a directory made, moved or removed (DESIGN 2). The RMU of a
 * whole op, where mds_xact_rmu.c's is a count delta.
 *
 *  (1) Placement, at the MDS a client's atomic batch reaches: a copy whose
 *      row this MDS places with op 0's row stays in the batch and applies
 *      with it (MDS_AOP_COPY, mds_table.h); one placed elsewhere becomes an
 *      outbox row (the count RMU's name, placed with op 0's row) holding
 *      the whole op, committed with the batch or lost with it. A copy
 *      therefore never adds a participant to a transaction.
 *  (2) Delivery, on the transaction thread with the count RMUs' round:
 *      the outbox rows of the cached slices, in chunks; a chunk is one
 *      transaction (or one batch, all here) of the outbox rows' deletes
 *      and the copies, applied newest-wins at their rows' MDS. So a copy
 *      reaches its row iff its outbox row is deleted: exactly once, as the
 *      count's (mds_xact_rmu.c (1)-(4) hold for copies too). Copies never
 *      fail on their row's state; a chunk that fails (a row pending in
 *      another transaction, a slice moving) waits for the next round.
 *  (3) Copies of one row in one chunk are merged (their outbox rows all
 *      deleted, the newest copy sent): newest wins makes that the same.
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
/* Records per delivery: their deletes, at most as many copies and the
 * decision fit the decider's batch, and a participant's copies with
 * their pending rows fit its prepare (the wire's XT_BATCH_ATOMIC_MAX). */
#define COPY_CHUNK      (XT_BATCH_ATOMIC_MAX - 1)

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
        xt_row v = *q->row;
        v.name = q->name;
        v.name_len = q->name_len;
        v.attr.version = 0;
        int rc = xt_row_encode_alloc(&v, &enc, &elen);
        if (rc < 0)
            return rc == -ENOMEM ? rc : -EINVAL;
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
        mds_xact_rmu_name(x, reqs[0].name, reqs[0].name_len, c->name[i]);
        xt_row_init(&c->row[i]);
        c->row[i].attr.type = XT_ROW_KV;
        c->row[i].attr.ctime_ns = xt_now_ns();
        c->row[i].name = c->name[i];
        c->row[i].name_len = RMU_NAME_LEN;
        xt_row_view_set_group(&c->row[i], XT_CG_USER0, c->rec[i], (uint32_t)len);
        c->reqs[i] = (struct xt_req){ .op = XT_OP_CREATE, .t = reqs[0].t, .name = c->name[i],
                                      .name_len = RMU_NAME_LEN, .row = &c->row[i],
                                      .flags = XT_F_SYS | XT_F_EXCL };
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

/* Delivers v[0..n) (n <= COPY_CHUNK, sorted): 0, or < 0 (left for a
 * later round). */
static int deliver_chunk(mds_xact *x, struct copy_rec *v, size_t n)
{
    struct xt_req reqs[2 * COPY_CHUNK];
    struct xt_resp resps[2 * COPY_CHUNK];
    uint32_t site[2 * COPY_CHUNK];
    size_t nr = 0;
    if (n == 0 || n > COPY_CHUNK)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        reqs[nr++] = (struct xt_req){ .op = XT_OP_DELETE, .t = { v[i].fsid, v[i].table, -1 },
                                      .name = v[i].name, .name_len = RMU_NAME_LEN,
                                      .flags = XT_F_SYS };
    for (size_t i = 0; i < n; i++)
        if (i + 1 == n || !same_row(&v[i], &v[i + 1])) /* (3): the newest of a run */
            reqs[nr++] = copy_op(&v[i]);
    int rc = mds_xact_owners(x, reqs, nr, site);
    if (rc < 0)
        return rc;
    uint32_t self = mds_route_self(x->o.route);
    bool here = true;
    for (size_t i = 0; i < nr; i++) {
        if (i < n && site[i] != self)
            return -EREMOTE; /* the slice moved meanwhile: its new holder delivers */
        here = here && site[i] == self;
    }
    size_t failed = 0;
    struct txn *held = NULL;
    memset(resps, 0, sizeof resps);
    if (here) {
        uint64_t gen;
        rc = mds_xact_send(x, self, reqs, nr, resps, &failed, &gen);
    } else {
        rc = mds_xact_txn_run(x, reqs, nr, site, resps, &failed, &held);
    }
    for (size_t i = 0; i < nr; i++)
        xt_resp_free(&resps[i]);
    if (rc < 0) {
        XT_DBG("copy: delivery of %zu copies: %s (op %zu): next round", n, strerror(-rc),
               failed);
        return rc;
    }
    mds_stats_add(x->o.stats, MDS_CTR_RMU_DELIVERED, n);
    if (held)
        mds_xact_rmu_hold(x, held);
    return 0;
}

size_t mds_xact_copy_deliver(mds_xact *x, struct copy_rec *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, copy_cmp);
    size_t left = 0;
    for (size_t i = 0; i < n;) {
        size_t j = XT_MIN(i + COPY_CHUNK, n);
        if (deliver_chunk(x, &v[i], j - i) < 0)
            left += j - i;
        i = j;
    }
    return left;
}

void mds_xact_copy_recs_free(struct copy_rec *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        xt_free(v[i].buf);
    xt_free(v);
}
