/*
 * mds_xact_bg.c -- the background half of cross-MDS transactions
 * (mds_xact.h): the finish of decided transactions (pending rows deleted
 * at their holders, then the decision row) and the resolver, which
 * settles every pending row of this MDS's cached slices older than
 * resolve_ms, whatever became of its coordinator (mds_xact.h (2), (3)).
 *
 * Both run on one thread. The resolver looks only at slices holding
 * system rows (xt_slice_sys_count), so its sweep costs a walk of the
 * cache's keys when no transaction is open. A pending row is settled by
 * its holder alone: a rollback is a local atomic batch (the pre-image
 * restored, the pending row deleted), and a slice that moves meanwhile
 * takes its pending rows to the new holder's resolver. The same thread
 * delivers the RMU outbox rows (mds_xact_rmu.c) once per commit group.
 *
 * A count row (an RMU's delta at the parent, mds_xact_i.h) is resolved
 * only after COUNT_AGE_MULT x resolve_ms: it blocks nobody, and its
 * transaction is finished when the sender's group commits by itself
 * (mds_xact_rmu.c (4)); resolving it sooner would force that commit.
 */
#include "mds_xact.h"
#include "mds_xact_i.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xt_common.h"

#define COUNT_AGE_MULT 15 /* 30 s with the default resolve_ms */
#define RMU_ROUND_NS   (100u * 1000000u)

void txn_add_op(struct txn *t, const struct xt_req *req, uint32_t site)
{
    if (t->nops == XT_BATCH_ATOMIC_MAX || req->name_len > XT_NAME_MAX)
        return;
    struct txn_op *o = &t->ops[t->nops++];
    o->fsid = req->t.fsid;
    o->table = req->t.table;
    memcpy(o->name, req->name, req->name_len);
    o->name_len = req->name_len;
    o->site = site;
    o->count = mds_xact_is_count(req);
}

void txn_free(struct txn *t)
{
    xt_free(t);
}

int mds_xact_new(const struct mds_xact_opts *o, mds_xact **out)
{
    if (!o->table || !o->group || !o->cache || !o->route)
        return -EINVAL;
    mds_xact *x = xt_calloc(1, sizeof *x);
    if (!x)
        return -ENOMEM;
    x->o = *o;
    x->crash = getenv("POM_MDS_XACT_CRASH");
    if (x->o.rmu_hold)
        XT_WARN("--rmu-hold: TEST-ONLY, RMU outbox rows are not delivered");
    if (!x->o.abort_gc_ms)
        x->o.abort_gc_ms = 60000;
    if (!x->o.resolve_ms)
        x->o.resolve_ms = 2000;
    if (!x->o.call_timeout_ms)
        x->o.call_timeout_ms = 10000;
    pthread_mutex_init(&x->mu, NULL);
    pthread_cond_init(&x->cv, NULL);
    *out = x;
    return 0;
}

void mds_xact_bind(mds_xact *x, const struct mds_xact_io *io)
{
    x->io = *io;
}

/* ---- reading and settling ---------------------------------------------- */

int mds_xact_read_decision(mds_xact *x, uint32_t dfsid, uint64_t dtable, const uint8_t *dname,
                           uint32_t *holder, uint32_t *epoch)
{
    struct xt_req q = { .op = XT_OP_LOOKUP, .t = { dfsid, dtable, -1 }, .name = dname,
                        .name_len = MDS_XACT_DNAME_LEN, .flags = XT_F_SYS };
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
                            .name = p->dname, .name_len = MDS_XACT_DNAME_LEN, .row = &v,
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
static int sync_holder(mds_xact *x, uint32_t holder, uint32_t epoch, uint64_t gen)
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
    int rc = mds_table_lookup(x->o.table, fsid, table, pname, pname_len, &row, &len);
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
    if (d == MDS_XACT_COMMIT && (rc = sync_holder(x, holder, epoch, 0)) < 0)
        goto out;
    struct mds_aop ops[2];
    size_t nops = 0;
    if (d == MDS_XACT_ABORT && p.fmt == PEND_FMT_COUNT) {
        int l = mds_table_lookup_ex(x->o.table, fsid, table, p.name, p.name_len, true, &cur,
                                    &cur_len);
        if (l < 0 && l != -ENOENT) {
            rc = l;
            goto out;
        }
        if (l == 0 && p.delta) /* (a parent removed since: nothing to undo) */
            ops[nops++] = (struct mds_aop){ .type = MDS_AOP_UPDATE, .fsid = fsid, .table = table,
                                            .name = p.name, .name_len = p.name_len,
                                            .fn = uncount_fn, .arg = &p.delta };
    } else if (d == MDS_XACT_ABORT) {
        int l = mds_table_lookup_ex(x->o.table, fsid, table, p.name, p.name_len, true, &cur,
                                    &cur_len);
        if (l < 0 && l != -ENOENT) {
            rc = l;
            goto out;
        }
        if (p.existed && (rc = restore_row(&p, l == 0 ? cur : NULL, cur_len, &rrow, &rlen)) < 0)
            goto out;
        if (p.existed)
            ops[nops++] = (struct mds_aop){ .type = MDS_AOP_CREATE, .fsid = fsid, .table = table,
                                            .name = p.name, .name_len = p.name_len,
                                            .row = rrow, .row_len = rlen };
        else if (l == 0)
            ops[nops++] = (struct mds_aop){ .type = MDS_AOP_DELETE, .fsid = fsid, .table = table,
                                            .name = p.name, .name_len = p.name_len };
    }
    ops[nops++] = (struct mds_aop){ .type = MDS_AOP_DELETE, .fsid = fsid, .table = table,
                                    .name = pname, .name_len = pname_len,
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

/* ---- the thread ------------------------------------------------------------ */

/* Transactions finished together (xact_main takes up to this many). */
#define FINISH_BATCH 64

/* An MDS incarnation that deleted pending rows of a batch: synced once to
 * the newest group it answered with before any decision row goes. */
struct holder {
    uint32_t site, epoch;    /* epoch 0: this MDS (a local op) */
    uint64_t gen;
    uint64_t txns;           /* bit i: v[i] deleted a row here */
};

/* Record a delete answered by (site, epoch) in group gen for v[i]; false
 * when hs is full (the caller gives up on v[i]). */
static bool note_holder(struct holder *hs, size_t *nh, size_t cap, uint32_t site,
                        uint32_t epoch, uint64_t gen, size_t i)
{
    for (size_t k = 0; k < *nh; k++)
        if (hs[k].site == site && hs[k].epoch == epoch) {
            hs[k].gen = XT_MAX(hs[k].gen, gen);
            hs[k].txns |= UINT64_C(1) << i;
            return true;
        }
    if (*nh == cap)
        return false;
    hs[(*nh)++] = (struct holder){ site, epoch, gen, UINT64_C(1) << i };
    return true;
}

/* Finish v[0..n) (n <= FINISH_BATCH) together: their decisions durable
 * (one sync of our group), every pending row deleted -- unsynced, then
 * each MDS that deleted some synced once -- and only then each decision
 * row: a decision row may go only once no pending row can come back
 * without it (mds_xact.h (2)). One transaction at a time cost a sync per
 * participant each, and a rename storm outran the thread. A transaction
 * whose delete or sync failed keeps its decision row; the resolvers
 * settle the rest. Frees v's transactions. */
static void finish_batch(mds_xact *x, struct txn **v, size_t n)
{
    uint32_t self = mds_route_self(x->o.route);
    uint64_t dgen = 0;
    bool mine = false;
    for (size_t i = 0; i < n; i++)
        if (v[i]->dsite == self) {
            mine = true;
            dgen = XT_MAX(dgen, v[i]->dgen);
        }
    int err[FINISH_BATCH]; /* non-zero: why v[i] cannot finish now */
    int src = mine ? mds_group_sync(x->o.group, dgen, x->o.call_timeout_ms) : 0;
    for (size_t i = 0; i < n; i++)
        err[i] = src;
    struct holder hs[FINISH_BATCH];
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) {
        struct txn *t = v[i];
        uint64_t tag = mds_xact_tag(t->dname);
        for (size_t j = 0; j < t->nops && !err[i]; j++) {
            const struct txn_op *o = &t->ops[j];
            uint8_t pn[PEND_NAME_MAX];
            size_t pl = mds_xact_pend_row_name(o->name, o->name_len, o->count, t->dname, pn);
            struct xt_req q = { .op = XT_OP_DELETE, .t = { o->fsid, o->table, -1 }, .name = pn,
                                .name_len = (uint32_t)pl, .expect_uuid = tag,
                                .flags = XT_F_SYS | XT_F_IF_UUID };
            struct xt_resp r = { 0 };
            int rc = x->io.op(x->io.ctx, &q, &r);
            if (rc == 0 && !note_holder(hs, &nh, FINISH_BATCH, r.epoch_site ? r.epoch_site : self,
                                        r.epoch_site ? r.epoch : 0, r.commit_group, i))
                rc = -ENOSPC;
            xt_resp_free(&r);
            if (rc < 0 && rc != -ENOENT && rc != -ESTALE) /* (a resolver was first) */
                err[i] = rc;
        }
    }
    for (size_t k = 0; k < nh; k++) {
        bool todo = false; /* a transaction still finishing deleted here */
        for (size_t i = 0; i < n && !todo; i++)
            todo = (hs[k].txns >> i & 1) && !err[i];
        int rc = todo ? sync_holder(x, hs[k].site, hs[k].epoch, hs[k].gen) : 0;
        for (size_t i = 0; rc < 0 && i < n; i++)
            if ((hs[k].txns >> i & 1) && !err[i])
                err[i] = rc;
    }
    for (size_t i = 0; i < n; i++) {
        struct txn *t = v[i];
        int rc = err[i];
        if (rc == 0) {
            struct xt_req q = { .op = XT_OP_DELETE, .t = { t->dfsid, t->dtable, -1 },
                                .name = t->dname, .name_len = MDS_XACT_DNAME_LEN,
                                .expect_uuid = mds_xact_tag(t->dname),
                                .flags = XT_F_SYS | XT_F_IF_UUID };
            struct xt_resp r = { 0 };
            rc = x->io.op(x->io.ctx, &q, &r);
            xt_resp_free(&r);
            rc = rc == -ENOENT ? 0 : rc;
        }
        char id[48];
        mds_xact_txid_str(t->dname, id, sizeof id);
        if (rc < 0)
            XT_WARN("xact %s: finish stopped (%s): pending rows left to the resolvers", id,
                    strerror(-rc));
        else
            XT_DBG("xact %s: finished (batch of %zu, %zu syncs)", id, n, nh + mine);
        txn_free(t);
    }
}

void mds_xact_queue_finish(mds_xact *x, struct txn *t)
{
    pthread_mutex_lock(&x->mu);
    t->next = x->finish;
    x->finish = t;
    pthread_cond_signal(&x->cv);
    pthread_mutex_unlock(&x->mu);
}

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
static void sweep(mds_xact *x)
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

static void *xact_main(void *arg)
{
    mds_xact *x = arg;
    uint64_t next_sweep = 0, next_rmu = 0;
    pthread_mutex_lock(&x->mu);
    while (!x->stop) {
        if (x->finish) {
            struct txn *v[FINISH_BATCH];
            size_t n = 0;
            while (x->finish && n < FINISH_BATCH) {
                v[n++] = x->finish;
                x->finish = x->finish->next;
            }
            pthread_mutex_unlock(&x->mu);
            finish_batch(x, v, n);
            pthread_mutex_lock(&x->mu);
            continue;
        }
        uint64_t now = xt_mono_ns();
        if (now >= next_rmu) {
            pthread_mutex_unlock(&x->mu);
            mds_xact_rmu_round(x);
            next_rmu = xt_mono_ns() + RMU_ROUND_NS;
            pthread_mutex_lock(&x->mu);
            continue;
        }
        if (now >= next_sweep) {
            pthread_mutex_unlock(&x->mu);
            sweep(x);
            next_sweep = xt_mono_ns() + (uint64_t)x->o.resolve_ms * 500000u;
            pthread_mutex_lock(&x->mu);
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t wait = XT_MIN(next_sweep, next_rmu) - now;
        ts.tv_sec += (time_t)(wait / 1000000000u);
        ts.tv_nsec += (long)(wait % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&x->cv, &x->mu, &ts);
    }
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

int mds_xact_start(mds_xact *x)
{
    if (!x->io.op || !x->io.batch)
        return -EINVAL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_destroy(&x->cv);
    pthread_cond_init(&x->cv, &ca);
    pthread_condattr_destroy(&ca);
    int rc = pthread_create(&x->thread, NULL, xact_main, x);
    if (rc)
        return -rc;
    x->started = true;
    return 0;
}

void mds_xact_free(mds_xact *x)
{
    if (!x)
        return;
    if (x->started) {
        pthread_mutex_lock(&x->mu);
        x->stop = true;
        pthread_cond_signal(&x->cv);
        pthread_mutex_unlock(&x->mu);
        pthread_join(x->thread, NULL);
    }
    while (x->finish) {
        struct txn *t = x->finish;
        x->finish = t->next;
        txn_free(t);
    }
    mds_xact_rmu_free(x);
    pthread_cond_destroy(&x->cv);
    pthread_mutex_destroy(&x->mu);
    xt_free(x);
}
