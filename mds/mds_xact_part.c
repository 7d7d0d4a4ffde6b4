/*
 * mds_xact_part.c -- the participant of cross-MDS transactions
 * (mds_xact.h, docs/mds-xact.md): the pending rows (their format is
 * mds_xact_i.h's) and decision rows read and written here, the prepare,
 * and the resolver, which settles every pending row of this MDS's cached
 * slices older than resolve_ms, whatever became of its coordinator
 * (mds_xact.h (2), (3)), and removes the ABORT rows of gone incarnations.
 *
 * The resolver runs on the module's thread (mds_xact.c). It looks only at
 * slices holding system rows (xt_slice_sys_count), so its sweep costs a
 * walk of the cache's keys when no transaction is open. A pending row is
 * settled by its holder alone: a rollback is a local atomic batch (the
 * pre-image restored, the pending row deleted), and a slice that moves
 * meanwhile takes its pending rows to the new holder's resolver.
 *
 * A count row (an RMU's delta at the parent, mds_xact_i.h) is resolved
 * only after COUNT_AGE_MULT x resolve_ms: it blocks nobody, and its
 * transaction is finished when the sender's group commits by itself
 * (mds_outbox.c (4)); resolving it sooner would force that commit.
 */
#include "mds_xact.h"
#include "mds_xact_i.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xt_common.h"
#include "xt_crash.h"

#define COUNT_AGE_MULT 15 /* 30 s with the default resolve_ms */

/* ---- rows ---------------------------------------------------------------- */

int mds_xact_pend_parse(const void *row, size_t len, struct mds_xact_pend *p)
{
    xt_row v;
    if (xt_row_decode(row, len, &v) < 0 || v.ngroups == 0)
        return -EBADMSG;
    /* The record is the concatenation of the row's groups (chunks of at
     * most XT_ROW_GROUP_MAX bytes); a single chunk is used in place. */
    size_t total = 0;
    for (uint32_t i = 0; i < v.ngroups; i++)
        total += v.groups[i].len;
    memset(p, 0, sizeof *p);
    const uint8_t *r = v.groups[0].ptr;
    if (v.ngroups > 1) {
        if (!(p->buf = xt_malloc(total)))
            return -ENOMEM;
        size_t off = 0;
        for (uint32_t i = 0; i < v.ngroups; i++) {
            memcpy(p->buf + off, v.groups[i].ptr, v.groups[i].len);
            off += v.groups[i].len;
        }
        r = p->buf;
    }
    size_t at = PEND_OFF_NAME;
    if (total < at || (r[PEND_OFF_FMT] != PEND_FMT && r[PEND_OFF_FMT] != PEND_FMT_COUNT) ||
        r[PEND_OFF_EXISTED] > 1 || r[PEND_OFF_DLEN] != MDS_XACT_DNAME_LEN)
        goto bad;
    p->fmt = r[PEND_OFF_FMT];
    p->existed = r[PEND_OFF_EXISTED];
    p->dfsid = xt_get_u32(r + PEND_OFF_DFSID);
    p->dtable = xt_get_u64(r + PEND_OFF_DTABLE);
    memcpy(p->dname, r + PEND_OFF_DNAME, MDS_XACT_DNAME_LEN);
    p->name_len = xt_get_u16(r + PEND_OFF_NLEN);
    if (p->name_len == 0 || p->name_len > XT_NAME_MAX || total < at + p->name_len)
        goto bad;
    p->name = r + at;
    at += p->name_len;
    p->old = r + at;
    p->old_len = total - at;
    if (p->fmt == PEND_FMT_COUNT) {
        if (p->existed || p->old_len != 4)
            goto bad;
        p->delta = (int32_t)xt_get_u32(p->old);
        p->old = NULL;
        p->old_len = 0;
    } else if (!p->existed && p->old_len) {
        goto bad;
    }
    p->uuid = v.attr.uuid;
    p->ctime_ns = v.attr.ctime_ns;
    return 0;
bad:
    xt_free(p->buf);
    p->buf = NULL;
    return -EBADMSG;
}

uint64_t mds_xact_tag(const uint8_t *dname)
{
    return xt_hash_bytes(dname, MDS_XACT_DNAME_LEN, UINT64_C(0x706f6d2d78616374)) | 1;
}

/* The count change a delta makes on row attributes a, as xt_row_update
 * applies it: rows not counted (xt_row_count_of) take none; a counted one
 * takes all of it but at the ends of its range. */
static int32_t count_applied(const xt_row_attr *a, int32_t delta)
{
    int64_t was = xt_row_count_of(a);
    if (was == INT64_MIN)
        return 0;
    xt_row_attr b = *a;
    xt_row_count_set(&b, was + delta);
    return (int32_t)(xt_row_count_of(&b) - was);
}

/* derive of a prepare: the pending row of op `of`, from its pre-image. A
 * count row records the delta the op applies to that pre-image, so its
 * rollback undoes exactly that, whatever other deltas came since. */
static int pend_derive(void *arg, bool existed, const void *old, size_t old_len, uint8_t **out,
                       size_t *out_len)
{
    const struct pend_arg *pa = arg;
    uint8_t applied[4];
    if (pa->count) {
        xt_row o;
        if (!existed || xt_row_decode_meta(old, old_len, &o) < 0)
            return -ENOENT; /* (the update itself fails the same way) */
        xt_put_u32(applied, (uint32_t)count_applied(&o.attr, pa->delta));
        old = applied;
        old_len = sizeof applied;
    }
    size_t head = PEND_OFF_NAME + pa->name_len;
    size_t total = head + (existed ? old_len : 0);
    uint8_t *rec = xt_malloc(total);
    if (!rec)
        return -ENOMEM;
    rec[PEND_OFF_FMT] = pa->count ? PEND_FMT_COUNT : PEND_FMT;
    rec[PEND_OFF_EXISTED] = existed && !pa->count ? 1 : 0;
    xt_put_u32(rec + PEND_OFF_DFSID, pa->dfsid);
    xt_put_u64(rec + PEND_OFF_DTABLE, pa->dtable);
    rec[PEND_OFF_DLEN] = MDS_XACT_DNAME_LEN;
    memcpy(rec + PEND_OFF_DNAME, pa->dname, MDS_XACT_DNAME_LEN);
    xt_put_u16(rec + PEND_OFF_NLEN, (uint16_t)pa->name_len);
    memcpy(rec + PEND_OFF_NAME, pa->name, pa->name_len);
    if (existed && old_len)
        memcpy(rec + head, old, old_len);
    xt_row v;
    xt_row_init(&v);
    v.attr.type = XT_ROW_KV;
    v.attr.uuid = mds_xact_tag(pa->dname);
    v.attr.ctime_ns = xt_now_ns();
    v.name = pa->pname;
    v.name_len = pa->pname_len;
    int rc = 0;
    for (size_t off = 0; off < total && rc == 0; off += XT_ROW_GROUP_MAX) {
        uint32_t len = (uint32_t)XT_MIN(total - off, (size_t)XT_ROW_GROUP_MAX);
        rc = xt_row_view_set_group(&v, (uint16_t)(XT_CG_USER0 + off / XT_ROW_GROUP_MAX),
                                   rec + off, len);
    }
    if (rc == 0)
        rc = xt_row_encode_alloc(&v, out, out_len);
    xt_free(rec);
    /* Too big to keep a pre-image of (a row near XT_ROW_ENCODED_MAX): the
     * coordinator answers -EXDEV and the client runs the batch op by op. */
    return rc == -E2BIG ? -EXDEV : rc;
}

void mds_xact_decision_view(xt_row *v, const uint8_t *dname, const uint8_t *verdict)
{
    assert(*verdict == MDS_XACT_COMMIT || *verdict == MDS_XACT_ABORT);
    assert(xt_hash_is_sys(dname, MDS_XACT_DNAME_LEN) && dname[2] == XT_SYS_DECISION);
    xt_row_init(v);
    v->attr.type = XT_ROW_KV;
    v->attr.uuid = mds_xact_tag(dname);
    v->attr.ctime_ns = xt_now_ns();
    v->name = dname;
    v->name_len = MDS_XACT_DNAME_LEN;
    xt_row_view_set_group(v, XT_CG_USER0, verdict, 1);
}

int mds_xact_decision_parse(const void *row, size_t len)
{
    const uint8_t *g;
    uint32_t glen;
    if (xt_row_get_group(row, len, XT_CG_USER0, &g, &glen) < 0 || glen != 1 ||
        (g[0] != MDS_XACT_COMMIT && g[0] != MDS_XACT_ABORT))
        return -EBADMSG;
    return g[0];
}

/* ---- participant ----------------------------------------------------------- */

bool mds_xact_is_prepare(const struct xt_req *reqs, size_t n)
{
    const struct xt_req *d = n >= 2 ? &reqs[n - 1] : NULL;
    return d && d->op == XT_OP_LOOKUP && (d->flags & XT_F_SYS) &&
           d->name_len == MDS_XACT_DNAME_LEN && xt_hash_is_sys(d->name, d->name_len) &&
           ((const uint8_t *)d->name)[2] == XT_SYS_DECISION;
}

int mds_xact_prepare(mds_xact *x, const struct xt_req *reqs, size_t n, struct xt_resp *resps,
                     size_t *failed)
{
    *failed = 0;
    if (!mds_xact_is_prepare(reqs, n) || n - 1 > MDS_ATOMIC_MAX / 2)
        return -EINVAL;
    size_t k = n - 1;
    const struct xt_req *d = &reqs[k];
    struct pend_arg pa[MDS_ATOMIC_MAX / 2];
    struct mds_aop extra[MDS_ATOMIC_MAX / 2];
    /* A count's delta ids (mds_soft.h) are taken here, never stored: the
     * ops applied are copies without them. */
    struct xt_req ops[MDS_ATOMIC_MAX / 2];
    xt_row orow[MDS_ATOMIC_MAX / 2];
    const uint8_t *ids[MDS_ATOMIC_MAX / 2];
    size_t nids[MDS_ATOMIC_MAX / 2];
    for (size_t i = 0; i < k; i++) {
        if (xt_hash_is_sys(reqs[i].name, reqs[i].name_len))
            return -EINVAL; /* a transaction's ops are user rows */
        bool count = mds_xact_is_count(&reqs[i]);
        ops[i] = reqs[i];
        nids[i] = 0;
        if (count && mds_soft_ids(reqs[i].row, &ids[i], &nids[i]) == 0) {
            orow[i] = *reqs[i].row;
            (void)xt_row_view_del_group(&orow[i], XT_CG_RMU_IDS);
            ops[i].row = &orow[i];
        } else if (count && reqs[i].row->ngroups) {
            *failed = i;
            return -EBADMSG; /* an ids group that is not whole ids */
        }
        pa[i] = (struct pend_arg){ .dfsid = d->t.fsid, .dtable = d->t.table,
                                   .name = reqs[i].name, .name_len = reqs[i].name_len,
                                   .count = count,
                                   .delta = count ? (int32_t)reqs[i].row->attr.nlink : 0 };
        memcpy(pa[i].dname, d->name, MDS_XACT_DNAME_LEN);
        pa[i].pname_len = mds_xact_pend_row_name(reqs[i].name, reqs[i].name_len, count,
                                                 pa[i].dname, pa[i].pname);
        extra[i] = (struct mds_aop){ .type = MDS_AOP_CREATE, .fsid = reqs[i].t.fsid,
                                     .table = reqs[i].t.table, .name = pa[i].pname,
                                     .name_len = pa[i].pname_len, .h = reqs[i].name_hash,
                                     .flags = MDS_TABLE_EXCL,
                                     .derive = pend_derive, .arg = &pa[i], .of = i };
    }
    uint64_t gen = 0;
    int rc = x->io.batch(x->io.ctx, ops, k, extra, k, resps, failed, &gen);
    if (rc < 0 && *failed >= k) {
        /* A pending row already there: the row is in another transaction. */
        *failed -= k;
        rc = rc == -EEXIST ? -EAGAIN : rc;
    }
    if (rc == 0) {
        resps[k].commit_group = gen;
        /* An RMU's delta is now in the row: no longer shown apart. */
        for (size_t i = 0; i < k && x->o.soft; i++)
            if (pa[i].count)
                (void)mds_soft_take(x->o.soft, reqs[i].t.fsid, reqs[i].t.table, reqs[i].name,
                                    reqs[i].name_len, ids[i], nids[i]);
        mds_stats_add(x->o.stats, MDS_CTR_XACT_PREPARES, 1);
        XT_CRASH_POINT("xact.participant");
    }
    return rc;
}

/* ---- reading and settling ---------------------------------------------- */

int mds_xact_read_decision(mds_xact *x, uint32_t dfsid, uint64_t dtable, const uint8_t *dname,
                           uint32_t *holder, uint32_t *epoch)
{
    struct xt_req q = { .op = XT_OP_LOOKUP, .t = { dfsid, dtable, -1 }, .name = dname,
                        .name_len = MDS_XACT_DNAME_LEN,
                        .name_hash = xt_hash_name(dname, MDS_XACT_DNAME_LEN), .flags = XT_F_SYS };
    struct xt_resp r = { 0 };
    int rc = x->io.op(x->io.ctx, &q, &r);
    if (rc == 0)
        rc = r.row ? mds_xact_decision_parse(r.row, r.row_len) : -EPROTO;
    if (holder)
        *holder = r.epoch_site ? r.epoch_site : mds_route_self(x->o.route);
    if (epoch)
        *epoch = r.epoch;
    xt_resp_free(&r);
    return rc;
}

/* The decision, creating ABORT when there is none (mds_xact.h (2)). */
static int decide_or_abort(mds_xact *x, const struct mds_xact_pend *p, uint32_t *holder,
                           uint32_t *epoch)
{
    static const uint8_t verdict = MDS_XACT_ABORT;
    for (int tries = 0; tries < 3; tries++) {
        int d = mds_xact_read_decision(x, p->dfsid, p->dtable, p->dname, holder, epoch);
        if (d != -ENOENT)
            return d;
        xt_row v;
        mds_xact_decision_view(&v, p->dname, &verdict);
        struct xt_req q = { .op = XT_OP_CREATE, .t = { p->dfsid, p->dtable, -1 },
                            .name = p->dname, .name_len = MDS_XACT_DNAME_LEN,
                            .name_hash = xt_hash_name(p->dname, MDS_XACT_DNAME_LEN), .row = &v,
                            .flags = XT_F_SYS | XT_F_EXCL | XT_F_SYNC };
        struct xt_resp r = { 0 };
        int rc = x->io.op(x->io.ctx, &q, &r);
        xt_resp_free(&r);
        if (rc == 0)
            return MDS_XACT_ABORT; /* synced: (3) holds for the rollback */
        if (rc != -EEXIST)
            return rc;
    }
    return -EAGAIN;
}

/* xt_mds_sync at another MDS up to its group gen; *epoch: the incarnation
 * that answered. */
static int remote_sync(mds_xact *x, uint32_t site, uint64_t gen, uint32_t *epoch)
{
    xt_rpc_pool *pool = mds_route_pool(x->o.route, site);
    if (!pool)
        return -EHOSTUNREACH;
    xt_rpc_call call = { .req_id = xt_rpc_new_req_id(), .timeout_ms = (int)x->o.call_timeout_ms };
    uint64_t committed;
    return xt_mds_sync(pool, &call, gen, &committed, epoch);
}

/* Everything MDS `holder` acknowledged up to its group gen (0: all) is
 * durable (3), by the same incarnation that showed it (epoch; 0: any):
 * one that restarted meanwhile may have lost it (-EAGAIN: read it again
 * later). */
int mds_xact_sync_holder(mds_xact *x, uint32_t holder, uint32_t epoch, uint64_t gen)
{
    if (holder == mds_route_self(x->o.route))
        return mds_group_sync(x->o.group, gen, x->o.call_timeout_ms);
    uint32_t now = 0;
    int rc = remote_sync(x, holder, gen, &now);
    return rc == 0 && epoch && now != epoch ? -EAGAIN : rc;
}

/* The rollback's row: the pre-image, with a version above every version
 * the row showed meanwhile (cur, may be NULL), so no reader that saw the
 * undone change can take the restored row for it. *out: xt_free. */
static int restore_row(const struct mds_xact_pend *p, const uint8_t *cur, size_t cur_len,
                       uint8_t **out, size_t *out_len)
{
    xt_row v, c;
    if (xt_row_decode(p->old, p->old_len, &v) < 0)
        return -EBADMSG;
    if (cur && xt_row_decode_meta(cur, cur_len, &c) == 0)
        v.attr.version = XT_MAX(v.attr.version, c.attr.version) + 1;
    return xt_row_encode_alloc(&v, out, out_len);
}

/* The pending row must still be this transaction's. */
static int tag_check(void *arg, const void *row, size_t len)
{
    xt_row v;
    if (xt_row_decode_meta(row, len, &v) < 0)
        return -EIO;
    return v.attr.uuid == *(const uint64_t *)arg ? 0 : -ESTALE;
}

/* UPDATE fn of a count row's rollback: the inverse of the delta applied. */
static int uncount_fn(void *arg, const void *old, size_t old_len, uint8_t **out, size_t *out_len)
{
    xt_row_patch p;
    xt_row_patch_init(&p);
    p.set = XT_ROW_SET_NLINK_ADD;
    p.attr.nlink = (uint32_t)-*(const int32_t *)arg;
    return xt_row_update(old, old_len, &p, out, out_len);
}

/* Settle the pending (or count) row pname of (fsid, table) held here.
 * force: do not wait for it to age. 0 settled (or none), -EREMOTE (not
 * held here: it moved with its slice), -errno: try later. */
static int resolve_one(mds_xact *x, uint32_t fsid, uint64_t table, const uint8_t *pname,
                       size_t pname_len, bool force)
{
    uint8_t *row, *cur = NULL, *rrow = NULL;
    size_t len, cur_len = 0, rlen = 0;
    /* A pending or count row's head carries its row's hash (xt_hash.h). */
    uint64_t h = xt_hash_name(pname, pname_len);
    int rc = mds_table_lookup(x->o.table, fsid, table, pname, pname_len, h, &row, &len);
    if (rc < 0)
        return rc == -ENOENT ? 0 : rc;
    struct mds_xact_pend p;
    if ((rc = mds_xact_pend_parse(row, len, &p)) < 0) {
        XT_ERR("xact: pending row of table %llu does not parse: left for fsck",
               (unsigned long long)table);
        xt_free(row);
        return rc;
    }
    uint64_t age = (uint64_t)x->o.resolve_ms * 1000000u;
    if (p.fmt == PEND_FMT_COUNT)
        age *= COUNT_AGE_MULT;
    if (!force && xt_now_ns() - p.ctime_ns < age) {
        rc = -EAGAIN;
        goto out;
    }
    uint32_t holder = 0, epoch = 0;
    int d = decide_or_abort(x, &p, &holder, &epoch);
    if (d < 0) {
        rc = d;
        goto out;
    }
    if (d == MDS_XACT_COMMIT && (rc = mds_xact_sync_holder(x, holder, epoch, 0)) < 0)
        goto out;
    struct mds_aop ops[2];
    size_t nops = 0;
    if (d == MDS_XACT_ABORT && p.fmt == PEND_FMT_COUNT) {
        int l = mds_table_lookup_ex(x->o.table, fsid, table, p.name, p.name_len, h, true, &cur,
                                    &cur_len);
        if (l < 0 && l != -ENOENT) {
            rc = l;
            goto out;
        }
        if (l == 0 && p.delta) /* (a parent removed since: nothing to undo) */
            ops[nops++] = (struct mds_aop){ .type = MDS_AOP_UPDATE, .fsid = fsid, .table = table,
                                            .name = p.name, .name_len = p.name_len, .h = h,
                                            .fn = uncount_fn, .arg = &p.delta };
    } else if (d == MDS_XACT_ABORT) {
        int l = mds_table_lookup_ex(x->o.table, fsid, table, p.name, p.name_len, h, true, &cur,
                                    &cur_len);
        if (l < 0 && l != -ENOENT) {
            rc = l;
            goto out;
        }
        if (p.existed && (rc = restore_row(&p, l == 0 ? cur : NULL, cur_len, &rrow, &rlen)) < 0)
            goto out;
        if (p.existed)
            ops[nops++] = (struct mds_aop){ .type = MDS_AOP_CREATE, .fsid = fsid, .table = table,
                                            .name = p.name, .name_len = p.name_len, .h = h,
                                            .row = rrow, .row_len = rlen };
        else if (l == 0)
            ops[nops++] = (struct mds_aop){ .type = MDS_AOP_DELETE, .fsid = fsid, .table = table,
                                            .name = p.name, .name_len = p.name_len, .h = h };
    }
    ops[nops++] = (struct mds_aop){ .type = MDS_AOP_DELETE, .fsid = fsid, .table = table,
                                    .name = pname, .name_len = pname_len, .h = h,
                                    .check = tag_check, .arg = &p.uuid };
    size_t failed;
    uint64_t gen;
    rc = mds_table_atomic(x->o.table, ops, nops, &failed, &gen);
    if (rc == -ENOENT && failed == nops - 1)
        rc = 0; /* settled meanwhile (the finish, or a forced resolve) */
    if (rc == 0) {
        mds_stats_add(x->o.stats, MDS_CTR_XACT_RESOLVED, 1);
        if (d == MDS_XACT_ABORT)
            mds_stats_add(x->o.stats, MDS_CTR_XACT_ROLLBACKS, 1);
        char id[48];
        mds_xact_txid_str(p.dname, id, sizeof id);
        XT_DBG("xact %s: pending row of %.*s (table %llu) settled: %s%s", id,
               (int)p.name_len, (const char *)p.name, (unsigned long long)table,
               d == MDS_XACT_ABORT ? "rolled back" : "committed", force ? " (asked)" : "");
    }
out:
    xt_free(rrow);
    xt_free(cur);
    xt_free(p.buf);
    xt_free(row);
    return rc;
}

int mds_xact_settle(mds_xact *x, uint32_t fsid, uint64_t table, const void *pname,
                    size_t len)
{
    if (!mds_xact_pend_row_is(pname, len))
        return 0;
    return resolve_one(x, fsid, table, pname, len, true);
}


/* ---- the resolver's sweep (on the thread) ---------------------------------- */

struct pend_key {
    uint32_t fsid;
    uint64_t table;
    uint8_t pname[PEND_NAME_MAX];
    size_t pname_len;
};

struct scan {
    struct pend_key *v;      /* pending rows */
    size_t n, cap;
    uint64_t gc_age_ns;      /* > 0: collect ABORT rows this old (abort_gc) */
    struct pend_key *ab;     /* those ABORT rows */
    size_t nab, abcap;
};

struct sys_walk {
    const struct mds_key *k;
    mds_xact_sys_cb cb;
    void *arg;
};

static int sys_walk_cb(void *arg, const xt_slice_entry *e)
{
    struct sys_walk *w = arg;
    return w->cb(w->arg, w->k, e);
}

int mds_xact_sys_rows(mds_xact *x, mds_xact_sys_cb cb, void *arg)
{
    struct mds_key *keys;
    size_t nk;
    int rc = mds_cache_keys(x->o.cache, &keys, &nk);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < nk && rc == 0; i++) {
        mds_cent *e;
        if (keys[i].slice == MDS_META_SLICE || mds_cache_peek(x->o.cache, &keys[i], &e) < 0)
            continue;
        xt_slice *sl = mds_cent_slice(e);
        xt_slice_rdlock(sl);
        if (xt_slice_sys_count(sl) > 0) {
            struct sys_walk w = { &keys[i], cb, arg };
            int r = xt_slice_foreach(sl, sys_walk_cb, &w); /* (rows visited, or -errno) */
            rc = r < 0 ? r : 0;
        }
        xt_slice_unlock(sl);
        mds_cache_put(x->o.cache, e);
    }
    xt_free(keys);
    return rc;
}

/* Whether e is an ABORT decision row at least age_ns old. */
static bool old_abort(const xt_slice_entry *e, uint64_t age_ns)
{
    const uint8_t *nm = e->name;
    xt_row v;
    return e->name_len == MDS_XACT_DNAME_LEN && nm[2] == XT_SYS_DECISION && e->row &&
           mds_xact_decision_parse(e->row, e->row_len) == MDS_XACT_ABORT &&
           xt_row_decode_meta(e->row, e->row_len, &v) == 0 &&
           xt_now_ns() - v.attr.ctime_ns >= age_ns;
}

/* Appends (k, e's name) to *v (*n used of *cap). 0 or -ENOMEM. */
static int key_add(struct pend_key **v, size_t *n, size_t *cap, const struct mds_key *k,
                   const xt_slice_entry *e)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        struct pend_key *nv = xt_realloc(*v, c * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        *v = nv;
        *cap = c;
    }
    struct pend_key *p = &(*v)[(*n)++];
    p->fsid = k->fsid;
    p->table = k->table;
    memcpy(p->pname, e->name, e->name_len);
    p->pname_len = e->name_len;
    return 0;
}

static int scan_cb(void *arg, const struct mds_key *k, const xt_slice_entry *e)
{
    struct scan *s = arg;
    if (s->gc_age_ns && old_abort(e, s->gc_age_ns))
        return key_add(&s->ab, &s->nab, &s->abcap, k, e);
    if (!mds_xact_pend_row_is(e->name, e->name_len))
        return 0;
    return key_add(&s->v, &s->n, &s->cap, k, e);
}

/* ABORT rows held here whose coordinator incarnation is gone: the site in
 * the txid answers with another epoch (it restarted). Only the
 * coordinator writes COMMIT, and a dead incarnation sends nothing more
 * (the row's age covers a decide it sent just before dying), so nothing
 * can COMMIT over the row: it goes (docs/mds-xact.md "ABORT rows"). A
 * pending row of the transaction still somewhere then finds no decision
 * and gets ABORT again from its resolver. A site that does not answer
 * keeps its rows until it does. */
static void abort_gc(mds_xact *x, const struct scan *s)
{
    struct { uint32_t site, epoch; int rc; } seen[16];
    size_t ns = 0;
    for (size_t i = 0; i < s->nab; i++) {
        const struct pend_key *p = &s->ab[i];
        uint32_t site = xt_get_u32(p->pname + XT_SYS_HEAD);
        uint32_t epoch = xt_get_u32(p->pname + XT_SYS_HEAD + 4);
        size_t j = 0;
        while (j < ns && seen[j].site != site)
            j++;
        if (j == ns) {
            if (ns == XT_ARRAY_SIZE(seen))
                continue; /* the next pass */
            seen[ns].site = site;
            seen[ns].epoch = x->o.epoch;
            seen[ns].rc = site == mds_route_self(x->o.route)
                              ? 0
                              : remote_sync(x, site, 1, &seen[ns].epoch);
            ns++;
        }
        if (seen[j].rc < 0 || seen[j].epoch == epoch)
            continue; /* unknown, or the incarnation that may still decide */
        struct xt_req q = { .op = XT_OP_DELETE, .t = { p->fsid, p->table, -1 },
                            .name = p->pname, .name_len = (uint32_t)p->pname_len,
                            .name_hash = xt_hash_name(p->pname, p->pname_len),
                            .flags = XT_F_SYS };
        struct xt_resp r = { 0 };
        int rc = x->io.op(x->io.ctx, &q, &r);
        xt_resp_free(&r);
        char id[48];
        mds_xact_txid_str(p->pname, id, sizeof id);
        XT_DBG("xact %s: ABORT row of a gone incarnation (site %u now at epoch %u): %d", id,
               site, seen[j].epoch, rc);
        if (rc == 0)
            mds_stats_add(x->o.stats, MDS_CTR_XACT_ABORTS_GC, 1);
    }
}

/* One sweep of the resolver over the cached slices holding system rows;
 * every abort_gc_ms also a pass of abort_gc. */
void mds_xact_sweep(mds_xact *x)
{
    struct scan s = { 0 };
    uint64_t now = xt_mono_ns();
    uint64_t age = (uint64_t)x->o.abort_gc_ms * 1000000u;
    s.gc_age_ns = now >= x->abort_gc_next ? age : 0;
    (void)mds_xact_sys_rows(x, scan_cb, &s); /* (-ENOMEM: settle what was found) */
    for (size_t i = 0; i < s.n; i++)
        resolve_one(x, s.v[i].fsid, s.v[i].table, s.v[i].pname, s.v[i].pname_len, false);
    if (s.gc_age_ns) {
        abort_gc(x, &s);
        x->abort_gc_next = now + age / 2;
    }
    xt_free(s.v);
    xt_free(s.ab);
}

