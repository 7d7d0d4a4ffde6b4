/*
 * mds_xact.c -- the coordinator of atomic batches across MDS (mds_xact.h,
 * docs/mds-xact.md), its finish, and the module's thread. The participant
 * (prepare, resolver) is mds_xact_part.c; the outbox rows (RMUs, copies)
 * are mds_outbox.c.
 *
 * The thread runs, in this order of priority: the finish of decided
 * transactions (pending rows deleted at their holders, then the decision
 * row), an outbox round every RMU_ROUND_MS (mds_outbox_round), and a
 * sweep of the resolver every resolve_ms / 2 (mds_xact_sweep).
 *
 * The parents' times and counts in a batch are *loose* ops, run around
 * it, not in it (xt_req_loose); the rest are strict. When the strict ops
 * sit at one MDS, they are one atomic batch there and no transaction.
 * A count (a loose op with NLINK_ADD: mkdir, rmdir) becomes an RMU: an
 * outbox row in the strict ops' atomic batch, shown at once at the
 * parent's MDS (XT_F_SOFT) and delivered later (mds_outbox.c).
 * A transaction, seen from the MDS A that received the client's batch:
 *   1. owners: each op's slice by A's bitmap, its MDS by ring 0; the
 *      decider D is the first strict op's owner;
 *   2. prepare: to every other owner, its ops plus a descriptor (an XT_F_SYS
 *      check of the decision row, which names the transaction), synced;
 *   3. decide: D runs its own ops and the EXCL create of the decision row
 *      COMMIT as one atomic batch;
 *   4. answer, and queue the finish (below).
 * A failure after a prepare creates ABORT (or finds COMMIT: then the
 * transaction did commit) and has every prepared part settled (rolled
 * back) before it answers; what it cannot reach is left to the
 * participants' resolvers.
 */
#include "mds_xact.h"
#include "mds_xact_i.h"
#include "mds_outbox.h"
#include "mds_soft.h"

#include <assert.h>
#include <string.h>

#include "xt_common.h"
#include "xt_crash.h"
#include "xt_time.h"
#include "xt_worker.h"
#include "xt_hash.h"

/* ---- the module ------------------------------------------------------------- */

#define RMU_ROUND_MS 100u

void mds_xact_txn_add(struct txn *t, const struct xt_req *req, uint32_t site)
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

void mds_xact_txn_free(struct txn *t)
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
    if (x->o.rmu_hold)
        XT_WARN("--rmu-hold: TEST-ONLY, RMU outbox rows are not delivered");
    if (!x->o.abort_gc_ms)
        x->o.abort_gc_ms = 60000;
    if (!x->o.resolve_ms)
        x->o.resolve_ms = 2000;
    if (!x->o.call_timeout_ms)
        x->o.call_timeout_ms = 10000;
    pthread_mutex_init(&x->mu, NULL);
    *out = x;
    return 0;
}

void mds_xact_bind(mds_xact *x, const struct mds_xact_io *io)
{
    assert(!x->worker); /* REQUIRES: before mds_xact_start */
    assert(io->op && io->batch);
    x->io = *io;
}

/* ---- coordinator ----------------------------------------------------------- */

/* A copy of a client's request to send on to another MDS: without the
 * client's slice hint and any forwarded bitmap (borrowed pointers kept). */
static struct xt_req onward(const struct xt_req *q)
{
    struct xt_req c = *q;
    c.fwd_bitmap = NULL;
    c.fwd_bitmap_len = 0;
    c.t.slice_hint = -1;
    return c;
}

int mds_xact_owners(mds_xact *x, const struct xt_req *reqs, size_t n, uint32_t *site)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t slice = 0;
        int rc = mds_table_pick(x->o.table, reqs[i].t.fsid, reqs[i].t.table,
                                reqs[i].name_hash, &slice);
        if (rc == -ENOENT)
            slice = 0; /* a table not created yet: its only slice */
        else if (rc < 0)
            return rc;
        rc = mds_route_owner(x->o.route, reqs[i].t.fsid, reqs[i].t.table, slice, &site[i]);
        if (rc == -ENOENT)
            site[i] = mds_route_self(x->o.route);
        else if (rc < 0)
            return rc;
    }
    return 0;
}

int mds_xact_send(mds_xact *x, uint32_t site, const struct xt_req *reqs, size_t n,
                  struct xt_resp *resps, size_t *failed, uint64_t *gen)
{
    assert(n > 0);
    *failed = 0;
    if (site == mds_route_self(x->o.route)) {
        if (mds_xact_is_prepare(reqs, n)) {
            int rc = mds_xact_prepare(x, reqs, n, resps, failed);
            *gen = rc == 0 ? resps[n - 1].commit_group : 0;
            return rc;
        }
        return x->io.batch(x->io.ctx, reqs, n, NULL, 0, resps, failed, gen);
    }
    xt_rpc_pool *pool = mds_route_pool(x->o.route, site);
    if (!pool)
        return -EHOSTUNREACH;
    xt_rpc_call call = { .req_id = xt_rpc_new_req_id(), .timeout_ms = (int)x->o.call_timeout_ms,
                         .ring_version = (int64_t)mds_route_ring_version(x->o.route) };
    int rc = xt_mds_batch_atomic(pool, &call, reqs, n, resps, failed);
    *gen = rc == 0 ? resps[0].commit_group : 0;
    if (*failed == SIZE_MAX)
        *failed = 0;
    return rc;
}

/* Whether rc leaves the outcome of a remote call unknown (it may have
 * been applied). */
static bool unknown(int rc)
{
    return rc == -ETIMEDOUT || rc == -ECONNRESET || rc == -EPIPE || rc == -EIO ||
           rc == -EPROTO || rc == -ENOMEM;
}

/* What the client hears when a step failed for a reason of the MDS, not
 * of its rows (a peer down, a slice moving, an outcome unknown): try again. */
static int client_rc(int rc)
{
    return unknown(rc) || rc == -EREMOTE || rc == -ECONNREFUSED || rc == -EHOSTUNREACH
               ? -EAGAIN
               : rc;
}

static void free_resps(struct xt_resp *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        xt_resp_free(&r[i]);
}

/* After a failure with participants prepared: ABORT, unless the decision
 * is already COMMIT (a decide whose answer was lost). Returns 1 when the
 * transaction committed, 0 when it is aborted, < 0 when unknown. */
static int abort_txn(mds_xact *x, const struct xt_req *r0, const uint8_t *dname)
{
    static const uint8_t verdict = MDS_XACT_ABORT;
    xt_row v;
    mds_xact_decision_view(&v, dname, &verdict);
    struct xt_req q = { .op = XT_OP_CREATE, .t = { r0->t.fsid, r0->t.table, -1 }, .name = dname,
                        .name_len = MDS_XACT_DNAME_LEN,
                        .name_hash = xt_hash_name(dname, MDS_XACT_DNAME_LEN), .row = &v,
                        .flags = XT_F_SYS | XT_F_EXCL | XT_F_SYNC };
    /* The decision's slice may be moving (a split handed to another MDS,
     * loadable once committed): try for a few seconds, not at once. */
    for (int tries = 0, ms = 10; tries < 12; tries++, ms = XT_MIN(ms * 2, 500)) {
        if (tries > 0)
            xt_sleep_ms(ms); /* a slice moving: a pause between two tries */
        struct xt_resp resp = { 0 };
        int rc = x->io.op(x->io.ctx, &q, &resp);
        xt_resp_free(&resp);
        if (rc == 0)
            return 0;
        if (rc != -EEXIST)
            continue;
        int d = mds_xact_read_decision(x, r0->t.fsid, r0->t.table, dname, NULL, NULL);
        if (d == MDS_XACT_COMMIT)
            return 1;
        if (d == MDS_XACT_ABORT)
            return 0;
    }
    return -EAGAIN;
}

/* The coordinator's own ABORT row, once nothing can still try to COMMIT
 * over it: only this coordinator writes COMMIT, it has decided ABORT, and
 * no decide batch of it is in flight (the caller knows). A participant
 * whose pending row is still there then finds no decision and writes
 * ABORT itself (mds_xact_part.c), so the row is not needed; it was kept for
 * good before (docs/mds-xact.md "ABORT rows"). Unsynced: a lost delete
 * leaves the row, as before. */
static void drop_abort(mds_xact *x, const struct xt_req *r0, const uint8_t *dname)
{
    struct xt_req q = { .op = XT_OP_DELETE, .t = { r0->t.fsid, r0->t.table, -1 }, .name = dname,
                        .name_len = MDS_XACT_DNAME_LEN,
                        .name_hash = xt_hash_name(dname, MDS_XACT_DNAME_LEN), .flags = XT_F_SYS };
    struct xt_resp resp = { 0 };
    int rc = x->io.op(x->io.ctx, &q, &resp);
    xt_resp_free(&resp);
    if (rc < 0 && rc != -ENOENT)
        XT_DBG("xact: ABORT row left (%s)", strerror(-rc));
    else
        mds_stats_add(x->o.stats, MDS_CTR_XACT_ABORTS_DROPPED, 1);
}

/* After an ABORT: each prepared part rolled back at its holder now (a
 * synced lookup of its pending rows, mds_xact_settle), not after
 * resolve_ms: the client's retry, and its reads, must find the rows as
 * they were. A failure leaves that row to its resolver. */
static void settle_all(mds_xact *x, const struct txn *t)
{
    for (size_t i = 0; i < t->nops; i++) {
        const struct txn_op *o = &t->ops[i];
        uint8_t pn[PEND_NAME_MAX];
        size_t pl = mds_xact_pend_row_name(o->name, o->name_len, o->count, t->dname, pn);
        struct xt_req q = { .op = XT_OP_LOOKUP, .t = { o->fsid, o->table, -1 }, .name = pn,
                            .name_len = (uint32_t)pl, .name_hash = xt_hash_name(pn, pl),
                            .flags = XT_F_SYS | XT_F_SYNC };
        int rc = -EAGAIN;
        for (int ms = 10; rc == -EAGAIN && ms <= 640; ms *= 2) { /* a slice moving */
            struct xt_resp r = { 0 };
            rc = x->io.op(x->io.ctx, &q, &r);
            xt_resp_free(&r);
            if (rc == -EAGAIN)
                xt_sleep_ms(ms); /* a slice moving: a pause between two tries */
        }
        char id[48];
        mds_xact_txid_str(t->dname, id, sizeof id);
        if (rc < 0 && rc != -ENOENT)
            XT_WARN("xact %s: rollback of a prepared part failed (%s): left to its resolver",
                    id, strerror(-rc));
        else
            XT_DBG("xact %s: prepared part %.*s settled: %d", id, (int)o->name_len,
                   (const char *)o->name, rc);
    }
}

/* Steps 2-4 above (mds_xact_i.h); each op an onward() copy. */
int mds_xact_txn_run(mds_xact *x, const struct xt_req *reqs, size_t n, const uint32_t *site,
                     struct xt_resp *resps, size_t *failed, struct txn **held)
{
    assert(n >= 1 && n <= XT_BATCH_ATOMIC_MAX);
    uint32_t self = mds_route_self(x->o.route), dsite = site[0];
    int rc = 0;
    if (held)
        *held = NULL;
    if (n == 0 || n >= MDS_ATOMIC_MAX)
        return -EINVAL;
    struct txn *t = xt_calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->dfsid = reqs[0].t.fsid;
    t->dtable = reqs[0].t.table;
    t->dsite = dsite;
    xt_hash_sys_head(t->dname, XT_SYS_DECISION, reqs[0].name_hash);
    xt_put_u32(t->dname + XT_SYS_HEAD, self);
    xt_put_u32(t->dname + XT_SYS_HEAD + 4, x->o.epoch);
    xt_put_u64(t->dname + XT_SYS_HEAD + 8,
               atomic_fetch_add_explicit(&x->seq, 1, memory_order_relaxed) + 1);

    /* (n <= MDS_ATOMIC_MAX - 1: an RMU delivery decides here with up to
     * that many ops; a client's batch has at most XT_BATCH_ATOMIC_MAX) */
    struct xt_req sub[MDS_ATOMIC_MAX];
    struct xt_resp sr[MDS_ATOMIC_MAX];
    size_t idx[MDS_ATOMIC_MAX], sf;
    uint64_t gen = 0;
    /* 2. Prepare every owner but the decider, in op order. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (site[i] == dsite)
            continue;
        bool seen = false;
        for (size_t j = 0; j < i; j++)
            seen = seen || site[j] == site[i];
        if (seen)
            continue;
        size_t k = 0;
        for (size_t j = i; j < n; j++)
            if (site[j] == site[i]) {
                idx[k] = j;
                sub[k] = reqs[j];
                sub[k++].flags |= XT_F_SYNC;
            }
        sub[k] = (struct xt_req){ .op = XT_OP_LOOKUP, .t = { t->dfsid, t->dtable, -1 },
                                  .name = t->dname, .name_len = MDS_XACT_DNAME_LEN,
                                  .name_hash = xt_hash_name(t->dname, MDS_XACT_DNAME_LEN),
                                  .flags = XT_F_SYS };
        memset(sr, 0, sizeof sr);
        rc = mds_xact_send(x, site[i], sub, k + 1, sr, &sf, &gen);
        free_resps(sr, k + 1);
        if (rc == 0 || unknown(rc)) {
            /* (unknown: it may be prepared; its resolver settles it) */
            for (size_t j = 0; j < k; j++)
                mds_xact_txn_add(t, &reqs[idx[j]], site[i]);
        }
        if (rc < 0)
            *failed = sf < k ? idx[sf] : idx[0];
    }
    if (rc == 0)
        XT_CRASH_POINT("xact.prepared");

    /* 3. Decide at op 0's owner: its ops and COMMIT, one atomic batch. */
    uint64_t dgen = 0;
    uint32_t depoch = 0;
    bool decide_sent = false; /* and its outcome unknown: it may land later */
    if (rc == 0) {
        static const uint8_t verdict = MDS_XACT_COMMIT;
        xt_row v;
        mds_xact_decision_view(&v, t->dname, &verdict);
        size_t k = 0;
        for (size_t j = 0; j < n; j++)
            if (site[j] == dsite) {
                idx[k] = j;
                sub[k++] = reqs[j];
            }
        /* A remote decision is synced before it answers: the finish must
         * not delete pending rows of a decision its holder could lose. */
        sub[k] = (struct xt_req){ .op = XT_OP_CREATE, .t = { t->dfsid, t->dtable, -1 },
                                  .name = t->dname, .name_len = MDS_XACT_DNAME_LEN,
                                  .name_hash = xt_hash_name(t->dname, MDS_XACT_DNAME_LEN),
                                  .row = &v,
                                  .flags = XT_F_SYS | XT_F_EXCL |
                                           (dsite == self ? 0u : (uint32_t)XT_F_SYNC) };
        memset(sr, 0, sizeof sr);
        rc = mds_xact_send(x, dsite, sub, k + 1, sr, &sf, &dgen);
        depoch = sr[0].epoch;
        free_resps(sr, k + 1);
        decide_sent = unknown(rc);
        if (rc < 0) {
            *failed = sf < k ? idx[sf] : 0;
            if (sf == k && rc == -EEXIST)
                rc = -EAGAIN; /* a resolver aborted it first */
        }
    }
    if (rc == 0)
        XT_CRASH_POINT("xact.decided");

    if (rc < 0 && t->nops > 0) {
        int a = abort_txn(x, &reqs[0], t->dname);
        XT_DBG("xact: abort after %d: %d", rc, a);
        if (a == 1) {
            rc = 0; /* the decide did land: the transaction committed */
            dgen = 0;
        } else if (a == 0) {
            mds_stats_add(x->o.stats, MDS_CTR_XACT_ABORTS, 1);
            settle_all(x, t); /* before the answer: a retry must find the rows as before */
            if (!decide_sent)
                drop_abort(x, &reqs[0], t->dname);
        } else {
            rc = -EAGAIN; /* undecided: the resolvers settle it; the client retries */
        }
    }
    char id[48];
    mds_xact_txid_str(t->dname, id, sizeof id);
    XT_DBG("xact %s: %zu ops, decider %u, %zu prepared: %s (%d)", id, n, dsite, t->nops,
           rc == 0 ? "committed" : "aborted", rc);
    if (rc < 0) {
        mds_xact_txn_free(t);
        return rc; /* raw: mds_xact_run tells a stale view (-EREMOTE) from the rest */
    }
    for (size_t i = 0; i < n; i++) {
        resps[i].commit_group = dgen;
        if (dsite != self) {
            resps[i].epoch = depoch;
            resps[i].epoch_site = dsite;
        }
    }
    mds_stats_add(x->o.stats, MDS_CTR_XACT_COMMITS, 1);
    /* 4. The finish runs on the thread once the decision is durable. */
    t->dgen = dsite == self ? dgen : 0;
    if (held)
        *held = t;
    else
        mds_xact_queue_finish(x, t);
    return 0;
}

/* Teach this MDS the bitmap of q's table as q's owner knows it: a routed
 * lookup of q's row, forwarded to the owner, whose answer carries its
 * bitmap, merged on the way back (mds_service's forward). */
void mds_xact_learn(mds_xact *x, const struct xt_req *q)
{
    static const uint16_t none[1] = { 0 };
    struct xt_req l = { .op = XT_OP_LOOKUP, .t = { q->t.fsid, q->t.table, -1 }, .name = q->name,
                        .name_len = q->name_len, .name_hash = q->name_hash, .cols = none,
                        .ncols = 0 };
    struct xt_resp r = { 0 };
    x->io.op(x->io.ctx, &l, &r);
    xt_resp_free(&r);
}

/* A loose op, routed to its owner, with flags added (XT_F_SOFT: the eager
 * half of an RMU). */
static int run_loose(mds_xact *x, const struct xt_req *q, uint32_t flags, struct xt_resp *resp)
{
    struct xt_req c = onward(q);
    c.flags |= flags;
    xt_resp_free(resp);
    memset(resp, 0, sizeof *resp);
    return x->io.op(x->io.ctx, &c, resp);
}

/* Whether the batch carries a parent's count (the client leaves it to
 * us: an RMU when the parent's row sits elsewhere). */
static bool has_count(const struct xt_req *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (xt_req_loose_after(&reqs[i]))
            return true;
    return false;
}

bool mds_xact_count_apart(mds_xact *x, const struct xt_req *reqs, size_t n)
{
    uint32_t self = mds_route_self(x->o.route), site;
    for (size_t i = 0; i < n; i++)
        if (xt_req_loose_after(&reqs[i]) && mds_xact_owners(x, &reqs[i], 1, &site) == 0 &&
            site != self)
            return true;
    return false;
}

int mds_xact_run(mds_xact *x, const struct xt_req *reqs, size_t n, struct xt_resp *resps,
                 size_t *failed)
{
    *failed = 0;
    if (n == 0 || n > XT_BATCH_ATOMIC_MAX)
        return -EINVAL;
    /* The strict ops (the transaction) and the loose ones. */
    struct xt_req sreq[XT_BATCH_ATOMIC_MAX];
    struct xt_resp sresp[XT_BATCH_ATOMIC_MAX];
    size_t sidx[XT_BATCH_ATOMIC_MAX], ns = 0;
    for (size_t i = 0; i < n; i++)
        if (!xt_req_loose(&reqs[i])) {
            sidx[ns] = i;
            sreq[ns++] = onward(&reqs[i]);
        }
    bool all_strict = ns == 0;
    if (all_strict) /* nothing but parents' updates: keep them atomic */
        for (size_t i = 0; i < n; i++) {
            sidx[ns] = i;
            sreq[ns++] = onward(&reqs[i]);
        }
    else if (ns < n && !has_count(reqs, n))
        mds_stats_add(x->o.stats, MDS_CTR_XACT_SPLITS, 1); /* (a count is ours to split) */
    /* Each count becomes an RMU: its outbox row joins the strict ops'
     * batch, placed with op 0's row (so at the decider when there is a
     * transaction), and is committed with them or not at all. */
    struct rmu_buf rb[XT_BATCH_ATOMIC_MAX];
    size_t nuser = ns, nrmu = 0;
    int rc;
    for (size_t i = 0; i < n && !all_strict; i++)
        if (xt_req_loose_after(&reqs[i])) {
            if ((rc = mds_outbox_count(x, &reqs[i], &sreq[0], &rb[nrmu], &sreq[ns])) < 0) {
                *failed = i;
                return rc;
            }
            nrmu++;
            mds_stats_add(x->o.stats, MDS_CTR_RMU_QUEUED, 1);
            sidx[ns++] = SIZE_MAX; /* (not the client's: its answer is dropped) */
        }
    /* Times first: a parent removed or moved meanwhile stops the batch
     * before anything else changed (a create answers -ENOENT), and so does
     * one whose inode flags forbid the change (XT_ROW_SET_ENTRY_ADD/DEL,
     * -EPERM). A count's parent is checked so by its times alone: its
     * delta goes later, as an RMU that cannot fail the batch. */
    for (size_t i = 0; i < n && !all_strict; i++) {
        struct xt_req t = reqs[i];
        if (!xt_req_loose(&t))
            continue;
        if (xt_req_loose_after(&t)) {
            if (!(t.set_mask & (XT_ROW_SET_ENTRY_ADD | XT_ROW_SET_ENTRY_DEL)))
                continue;
            t.set_mask &= ~XT_ROW_SET_NLINK_ADD;
        }
        if ((rc = run_loose(x, &t, 0, &resps[i])) < 0) {
            *failed = i;
            return client_rc(rc);
        }
    }
    uint32_t self = mds_route_self(x->o.route), site[XT_BATCH_ATOMIC_MAX];
    size_t sf = 0;
    /* Owners by this MDS's bitmap, which may be behind the owner's (a split
     * made there, gossip not yet arrived): a step that finds a row is not
     * where it was sent (-EREMOTE) teaches this MDS the owner's bitmap
     * (learn) and the batch is placed again. */
    for (int attempt = 0;; attempt++) {
        if ((rc = mds_xact_owners(x, sreq, ns, site)) < 0)
            return rc == -ENOMEM ? rc : -EAGAIN;
        bool one = true;
        for (size_t i = 1; i < ns; i++)
            one = one && site[i] == site[0];
        uint64_t gen = 0;
        memset(sresp, 0, sizeof sresp);
        if (!one) {
            rc = mds_xact_txn_run(x, sreq, ns, site, sresp, &sf, NULL);
        } else {
            /* One owner: one atomic batch there, no transaction. Sent as
             * an MDS's own (XT_F_SYS): it is never coordinated again. */
            for (size_t i = 0; i < ns && site[0] != self; i++)
                sreq[i].flags |= XT_F_SYS;
            rc = mds_xact_send(x, site[0], sreq, ns, sresp, &sf, &gen);
            for (size_t i = 0; i < ns && rc == 0 && site[0] != self; i++)
                if (!sresp[i].epoch_site)
                    sresp[i].epoch_site = site[0];
        }
        if (rc != -EREMOTE || attempt == 3)
            break;
        free_resps(sresp, ns);
        mds_xact_learn(x, &sreq[sf < ns ? sf : 0]);
    }
    /* Still placed apart (-EREMOTE): the client hears -EAGAIN and retries,
     * never -EXDEV, whose op-by-op fallback is not atomic (an MDS crash or
     * a failed check between two of its ops leaves half a rename or
     * exchange). It is a split child not told yet: its owner by ring 0
     * sends the rows back to the splitter and learn finds nothing new,
     * until the splitter's group commits (docs/mds-dist.md "Splits handed
     * to another MDS"). */
    for (size_t i = 0; i < ns; i++) {
        if (sidx[i] == SIZE_MAX) {
            xt_resp_free(&sresp[i]);
            continue;
        }
        xt_resp_free(&resps[sidx[i]]);
        resps[sidx[i]] = sresp[i];
        memset(&sresp[i], 0, sizeof sresp[i]);
    }
    if (rc < 0) {
        *failed = sf < nuser ? sidx[sf] : sidx[0];
        if (rc == -EXDEV) /* a row too big for a pending row's pre-image */
            mds_stats_add(x->o.stats, MDS_CTR_XACT_OP_BY_OP, 1);
        return client_rc(rc);
    }
    /* Counts after, never for an entry that was not made: shown at once
     * at the parent's MDS; the outbox row delivers them for good. A
     * failure here (the parent removed meanwhile) only hides the delta
     * until then. */
    for (size_t i = 0, k = 0; i < n && nrmu; i++) {
        if (!xt_req_loose_after(&reqs[i]))
            continue;
        /* Named by its outbox row: the delivery takes that id (mds_soft.h). */
        uint8_t id[8];
        xt_put_u64(id, mds_soft_id(rb[k++].name, RMU_NAME_LEN));
        struct xt_req e = reqs[i];
        xt_row er = *reqs[i].row;
        e.row = &er;
        if ((rc = xt_row_view_set_group(&er, XT_CG_RMU_IDS, id, sizeof id)) < 0 ||
            (rc = run_loose(x, &e, XT_F_SYS | XT_F_SOFT, &resps[i])) < 0)
            XT_DBG("xact: a parent's count not shown before its RMU: %s", strerror(-rc));
    }
    /* The client tracks the epoch of the MDS holding op 0's change. */
    if (!resps[0].epoch && resps[sidx[0]].epoch) {
        resps[0].epoch = resps[sidx[0]].epoch;
        resps[0].epoch_site = resps[sidx[0]].epoch_site;
    }
    return 0;
}

/* ---- the finish (on the thread) --------------------------------------------- */

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
    assert(n >= 1 && n <= FINISH_BATCH);
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
                                .name_len = (uint32_t)pl, .name_hash = xt_hash_name(pn, pl),
                                .expect_uuid = tag, .flags = XT_F_SYS | XT_F_IF_UUID };
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
        int rc = todo ? mds_xact_sync_holder(x, hs[k].site, hs[k].epoch, hs[k].gen) : 0;
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
                                .name_hash = xt_hash_name(t->dname, MDS_XACT_DNAME_LEN),
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
        mds_xact_txn_free(t);
    }
}

void mds_xact_queue_finish(mds_xact *x, struct txn *t)
{
    pthread_mutex_lock(&x->mu);
    t->next = x->finish;
    x->finish = t;
    xt_worker *w = x->worker; /* NULL before mds_xact_start: its first step finishes it */
    pthread_mutex_unlock(&x->mu);
    if (w)
        xt_worker_wake(w);
}

/* ---- the thread ------------------------------------------------------------ */

/* One step of the thread: a batch of finishes first, else an outbox round
 * or a sweep when due. Returns the ms until the next is due. */
static uint64_t xact_step(xt_worker *w, void *arg)
{
    mds_xact *x = arg;
    (void)w;
    struct txn *v[FINISH_BATCH];
    size_t n = 0;
    pthread_mutex_lock(&x->mu);
    while (x->finish && n < FINISH_BATCH) {
        v[n++] = x->finish;
        x->finish = x->finish->next;
    }
    pthread_mutex_unlock(&x->mu);
    if (n) {
        finish_batch(x, v, n);
        return 0;
    }
    if (xt_deadline_passed(x->next_rmu)) {
        mds_outbox_round(x);
        x->next_rmu = xt_deadline_ms(RMU_ROUND_MS);
        return 0;
    }
    if (xt_deadline_passed(x->next_sweep)) {
        mds_xact_sweep(x);
        x->next_sweep = xt_deadline_ms((x->o.resolve_ms + 1) / 2);
        return 0;
    }
    return XT_MIN(xt_deadline_left_ms(x->next_rmu), xt_deadline_left_ms(x->next_sweep));
}

int mds_xact_start(mds_xact *x)
{
    assert(!x->worker);
    if (!x->io.op || !x->io.batch)
        return -EINVAL;
    struct xt_worker_opts wo = { .name = "mds-xact", .step = xact_step, .arg = x };
    xt_worker *w;
    int rc = xt_worker_start(&wo, &w);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&x->mu);
    x->worker = w;
    pthread_mutex_unlock(&x->mu);
    return 0;
}

void mds_xact_free(mds_xact *x)
{
    if (!x)
        return;
    xt_worker_stop(x->worker); /* NULL: never started */
    while (x->finish) {
        struct txn *t = x->finish;
        x->finish = t->next;
        mds_xact_txn_free(t);
    }
    mds_outbox_free(x);
    pthread_mutex_destroy(&x->mu);
    xt_free(x);
}
