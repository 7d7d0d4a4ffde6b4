/*
 * pom_call.c -- floor 1 of libpomegranate, the transport: one xTable call,
 * an atomic batch, many independent calls in one batch RPC per MDS
 * (pom_multi_call), a listing page and a sync of every MDS, each with
 * retries, routing (pom_route.c) and the MDS epochs it saw (pom_errseq.c).
 * Calls only pom_route.c, pom_errseq.c and xtable/; tells the floors
 * above of an MDS restart through fs->up (pom_call_i.h), never by name.
 *
 * Invariants:
 *  (1) A call that failed in transport (-ECONNREFUSED, -ECONNRESET,
 *      -ETIMEDOUT, -EIO, -EPIPE) is retried with the same request id, with
 *      a growing pause, until fs->retry_ms have passed (hard) or, soft,
 *      fs->soft_ms (then it answers -EIO): an MDS that is restarted under a
 *      mount is waited for, not reported. A wait is never silent: past 10 s
 *      it is logged, and so is its end (retry_again).
 *  (2) A sync vouches only for changes acknowledged by the MDS incarnation
 *      that answers it (pom_call_i.h invariant 2).
 *  (3) A round of pom_multi_call carries at most one op of each key, the
 *      first one not answered yet: the ops of a key apply in their order
 *      whatever is retried.
 */
#include "pom_call_i.h"
#include "pom_route.h"
#include "xt_hash.h"
#include "pom_blob.h"

#include <assert.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* -EAGAIN: the MDS owning a new split slice waits for the splitter's
 * commit before it can load it (docs/mds-dist.md): transient too. So is
 * -ELOOP: MDS whose bitmaps disagree in a split storm can pass a request
 * on past the hop limit (seen once in 2,000,000 storm creates); gossip
 * converges them, so the retry window (not a hang) bounds it. */
static bool transient(int rc)
{
    return rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -ETIMEDOUT || rc == -EIO ||
           rc == -EPIPE || rc == -EAGAIN || rc == -EHOSTUNREACH || rc == -ELOOP;
}

/* The retry window of one call (every attempt carries the same request
 * id): a transient error is tried again after a pause doubling from 10 ms
 * to 500 ms, until the window has passed: fs->retry_ms (hard, the
 * default) or fs->soft_ms (soft: then the call answers -EIO, whatever the
 * transient error was). A call still waiting after WAIT_WARN_FIRST_MS says
 * so in the log, naming the MDS and the operation, and again every
 * WAIT_WARN_EVERY_MS; once it warned, the answer that ends the stall is
 * said too (docs/client.md "Waiting"). So that a stall is said while it
 * lasts, no attempt waits past the next warning: a longer attempt (a
 * sync) is cut there and sent again with the same request id. */
#define WAIT_WARN_FIRST_MS 10000
#define WAIT_WARN_EVERY_MS 60000
#define ATTEMPT_MIN_MS     100

struct retry {
    pom_fs *fs;
    const char *what;     /* the operation class, for the log */
    uint64_t t0, deadline, warn_at;
    int delay;
    bool warned;
};

static struct retry retry_begin(pom_fs *fs, const char *what)
{
    int window = fs->soft_ms > 0 ? fs->soft_ms : fs->retry_ms;
    assert(window > 0);
    return (struct retry){ .fs = fs, .what = what, .t0 = xt_mono_ns(),
                           .deadline = xt_deadline_ms((uint64_t)window),
                           .warn_at = xt_deadline_ms(WAIT_WARN_FIRST_MS),
                           .delay = 10 };
}

/* The timeout of the next attempt: its own (base_ms), cut at the next
 * warning and, when soft, at the end of the window. */
static int retry_timeout_ms(const struct retry *r, int base_ms)
{
    uint64_t now = xt_mono_ns(), lim = r->warn_at;
    if (r->fs->soft_ms > 0 && r->deadline < lim)
        lim = r->deadline;
    uint64_t left = lim > now ? (lim - now) / 1000000u : 0;
    left = XT_MAX(left, (uint64_t)ATTEMPT_MIN_MS);
    return base_ms > 0 && (uint64_t)base_ms < left ? base_ms : (int)left;
}

/* MDS m answered (not a transient error): the end of a stall that was
 * said is said too. */
static void retry_end(const struct retry *r, const struct pom_mds *m)
{
    if (r->warned)
        XT_WARN("fs %u: site %u (MDS %s) answers again after %.0f s (%s)", r->fs->fsid,
                m ? m->id : 0, m ? m->addr : "?", (double)(xt_mono_ns() - r->t0) / 1e9,
                r->what);
}

/* After an attempt at MDS m (NULL: none known) that answered *rc: true,
 * having paused, when the call should be tried again; else *rc is the
 * call's answer (-EIO when a soft window ran out). */
static bool retry_again(struct retry *r, const struct pom_mds *m, int *rc)
{
    uint64_t now = xt_mono_ns();
    double waited = (double)(now - r->t0) / 1e9;
    const char *addr = m ? m->addr : "(none known)";
    unsigned id = m ? m->id : 0;
    if (!transient(*rc)) {
        retry_end(r, m);
        return false;
    }
    if (now > r->deadline) {
        XT_WARN("fs %u: %s gives up on site %u (MDS %s) after %.0f s: %s", r->fs->fsid, r->what,
                id, addr, waited, r->fs->soft_ms > 0 ? "soft timeout, EIO" : strerror(-*rc));
        if (r->fs->soft_ms > 0)
            *rc = -EIO;
        return false;
    }
    if (now >= r->warn_at) {
        XT_WARN("fs %u: %s waiting on site %u (MDS %s) for %.0f s: no answer (%s); still "
                "waiting (pomctl status names a site that stopped)",
                r->fs->fsid, r->what, id, addr, waited, strerror(-*rc));
        r->warned = true;
        r->warn_at = xt_deadline_ms(WAIT_WARN_EVERY_MS);
    }
    xt_sleep_ms((uint64_t)r->delay);
    r->delay = XT_MIN(r->delay * 2, 500);
    return true;
}

static const char *op_class(const struct xt_req *q)
{
    switch (q->op) {
    case XT_OP_CREATE: return "a create";
    case XT_OP_LOOKUP: return "a lookup";
    case XT_OP_UPDATE: return "an update";
    case XT_OP_DELETE: return "a delete";
    default: return "a call";
    }
}

/* After a restart was counted (fs->restarts, under epoch_mu): what this
 * client and the kernel cached from the gone incarnation is suspect.
 * REQUIRES: epoch_mu not held (the callback may call back into fs). */
static void restart_seen(pom_fs *fs)
{
    if (fs->up.restarted)
        fs->up.restarted(fs);
    if (fs->restart_cb)
        fs->restart_cb(fs->restart_arg);
}

/* The keys a change touches (pom_errseq.c): its table (a directory's, a
 * keyspace's) and the inode its row is (a create's row, the uuid it is
 * conditional on). None for reads and for XT_F_SYNC changes (committed
 * when answered). keys: room for 3. */
static size_t req_keys(const struct xt_req *q, uint64_t *keys)
{
    size_t n = 0;
    if (q->op == XT_OP_LOOKUP || (q->flags & XT_F_SYNC))
        return 0;
    keys[n++] = q->t.table;
    if (q->row && q->row->attr.uuid)
        keys[n++] = q->row->attr.uuid;
    if (q->flags & XT_F_IF_UUID)
        keys[n++] = q->expect_uuid;
    return n;
}

static void say_lost(pom_fs *fs, const struct pom_mds *m, uint32_t epoch)
{
    XT_WARN("fs %u: the MDS %s restarted (epoch %u) before changes acknowledged by its "
            "previous run were committed: some may be lost", fs->fsid, m->addr, epoch);
}

/* Records the incarnation `epoch` of MDS m in a reply (invariant (2) of
 * pom_call_i.h, kept per MDS); reqs[0..n): the changes the reply
 * acknowledged (n 0: none). A change acknowledged by an earlier
 * incarnation and not yet synced may have died with it (pom_es_lose); and
 * whatever this client (or the kernel above it) cached from that
 * incarnation may show such changes, so a new epoch marks the open
 * buffers stale, counts a restart and tells pom_set_restart_cb's
 * callback. */
static void note_epoch(pom_fs *fs, struct pom_mds *m, uint32_t epoch, const struct xt_req *reqs,
                       size_t n)
{
    if (!epoch || !m)
        return;
    pthread_mutex_lock(&fs->epoch_mu);
    bool lost = m->ack_epoch && m->ack_epoch != epoch && pom_es_lose(fs, m);
    if (n) {
        m->ack_epoch = epoch;
        m->ack_seq++;
        for (size_t i = 0; i < n; i++) {
            uint64_t keys[3];
            pom_es_acked(fs, m, keys, req_keys(&reqs[i], keys));
        }
    }
    bool restarted = m->seen_epoch && m->seen_epoch != epoch;
    m->seen_epoch = epoch;
    if (restarted)
        fs->restarts++;
    pthread_mutex_unlock(&fs->epoch_mu);
    if (lost)
        say_lost(fs, m, epoch);
    if (restarted)
        restart_seen(fs);
}

void pom_set_restart_cb(pom_fs *fs, pom_restart_fn fn, void *arg)
{
    fs->restart_cb = fn;
    fs->restart_arg = arg;
}

/* MDS m (NULL: none) answered req with rc and resp: its bitmap is
 * learnt, the epoch of the MDS holding the change noted. */
static void answered(pom_fs *fs, struct pom_mds *m, const struct xt_req *req,
                     const struct xt_resp *resp, int rc)
{
    if (resp->bitmap)
        pom_route_learn(fs->route, req->t.table, resp->bitmap, resp->bitmap_len);
    if (rc == 0 || rc == -ENOENT || rc == -EEXIST || rc == -ESTALE) {
        /* A forward answered: the change sits at the owner it names
         * (docs/mds-dist.md "Epochs through forwards"). */
        struct pom_mds *at = m;
        if (m && resp->epoch_site && resp->epoch_site != m->id)
            at = pom_route_find(fs->route, resp->epoch_site);
        if (at) /* (an owner not in our view yet: its epoch means nothing to m's) */
            note_epoch(fs, at, resp->epoch, req, rc == 0 && req->op != XT_OP_LOOKUP ? 1 : 0);
    }
}

int pom_call(pom_fs *fs, struct xt_req *req, struct xt_resp *resp, bool *retried)
{
    assert(req->name_len == 0 || req->name); /* a row key, or none (a table op) */
    xt_rpc_call call = { .req_id = xt_rpc_new_req_id() };
    struct retry rt = retry_begin(fs, op_class(req));
    req->t.fsid = fs->fsid;
    /* Hashed once: it routes here and travels in the request (the MDS
     * checks it and places the row by it). */
    req->name_hash = xt_hash_name(req->name, req->name_len);
    for (;;) {
        xt_rpc_pool *pool;
        struct pom_mds *m = pom_route_pick(fs->route, fs->fsid, req->t.table, req->name_hash,
                                           &req->t.slice_hint, &pool);
        atomic_fetch_add_explicit(&fs->rpcs, 1, memory_order_relaxed);
        call.timeout_ms = retry_timeout_ms(&rt, fs->call_ms);
        int rc = m ? xt_mds_call(pool, &call, req, resp) : -EHOSTUNREACH;
        if (!m)
            memset(resp, 0, sizeof *resp);
        answered(fs, m, req, resp, rc);
        if (!retry_again(&rt, m, &rc))
            return rc;
        xt_resp_free(resp);
        if (retried)
            *retried = true;
    }
}

/* ---- many independent ops (pom_multi_call) ------------------------------ */

/* One batch RPC carries at most MULTI_RPC_OPS ops and about
 * MULTI_RPC_BYTES of names and values, far under the MDS's frame limit. */
#define MULTI_RPC_OPS   512
#define MULTI_RPC_BYTES (8u << 20)

/* The work space of pom_multi_call, each array sized for n ops (a round
 * has at most one batch per op). */
struct multi_round {
    struct xt_req *sub;           /* the round's requests, batch after batch */
    struct xt_resp *sresp;        /* their results */
    size_t *idx;                  /* sub[k] is reqs[idx[k]] */
    size_t *sel, *grp;            /* op sel[k] of the round goes in batch grp[k] */
    struct xt_mds_batch_to *to;   /* the round's batches */
    xt_rpc_call *calls;           /* to[g].call */
    struct pom_mds **at;          /* the MDS of to[g] */
    size_t *bytes;                /* payload of to[g] */
    uint64_t *seen;               /* nseen slots: the keys of the round (0: free) */
    size_t nseen;
};

static void round_free(struct multi_round *r)
{
    xt_free(r->sub);
    xt_free(r->sresp);
    xt_free(r->idx);
    xt_free(r->sel);
    xt_free(r->grp);
    xt_free(r->to);
    xt_free(r->calls);
    xt_free(r->at);
    xt_free(r->bytes);
    xt_free(r->seen);
}

static int round_alloc(struct multi_round *r, size_t n)
{
    memset(r, 0, sizeof *r);
    r->nseen = 16;
    while (r->nseen < 2 * n)
        r->nseen *= 2;
    r->sub = xt_calloc(n, sizeof *r->sub);
    r->sresp = xt_calloc(n, sizeof *r->sresp);
    r->idx = xt_calloc(n, sizeof *r->idx);
    r->sel = xt_calloc(n, sizeof *r->sel);
    r->grp = xt_calloc(n, sizeof *r->grp);
    r->to = xt_calloc(n, sizeof *r->to);
    r->calls = xt_calloc(n, sizeof *r->calls);
    r->at = xt_calloc(n, sizeof *r->at);
    r->bytes = xt_calloc(n, sizeof *r->bytes);
    r->seen = xt_calloc(r->nseen, sizeof *r->seen);
    if (r->sub && r->sresp && r->idx && r->sel && r->grp && r->to && r->calls && r->at &&
        r->bytes && r->seen)
        return 0;
    round_free(r);
    return -ENOMEM;
}

static size_t req_bytes(const struct xt_req *q)
{
    size_t b = 64 + q->name_len;
    for (uint32_t i = 0; q->row && i < q->row->ngroups; i++)
        b += q->row->groups[i].len;
    return b;
}

/* An answer after which the op may or may not have been applied: the
 * request or its reply (or a forward's) was lost on the way. The other
 * transient answers (-EAGAIN, -ELOOP, -ECONNREFUSED, -EHOSTUNREACH) come
 * before anything changed. */
static bool unknown_outcome(int rc)
{
    return rc == -ECONNRESET || rc == -ETIMEDOUT || rc == -EIO || rc == -EPIPE;
}

/* Adds key (table, hash) to the round's set: false when it is there
 * already (two keys with one 64-bit hash just wait a round). */
static bool round_key_add(struct multi_round *r, uint64_t table, uint64_t h)
{
    uint64_t k = (h ^ (table * UINT64_C(0x9e3779b97f4a7c15))) | 1;
    size_t mask = r->nseen - 1;
    for (size_t j = (size_t)(k >> 7) & mask;; j = (j + 1) & mask) {
        if (r->seen[j] == k)
            return false;
        if (!r->seen[j]) {
            r->seen[j] = k;
            return true;
        }
    }
}

/* Picks the ops of the next round among the pending ones (rcs[i] == 1)
 * and lays them out in r as batches, one per MDS (more where one is
 * full): only the first pending op of each key goes, so the others wait
 * for its answer and per-key order holds across retries. Returns the
 * number of batches; *unrouted tells of ops no MDS was known for. */
static size_t round_build(pom_fs *fs, struct multi_round *r, struct xt_req *reqs, size_t n,
                          const int *rcs, bool *unrouted)
{
    memset(r->seen, 0, r->nseen * sizeof *r->seen);
    size_t ng = 0, ns = 0;
    *unrouted = false;
    for (size_t i = 0; i < n; i++) {
        if (rcs[i] != 1 || !round_key_add(r, reqs[i].t.table, reqs[i].name_hash))
            continue;
        xt_rpc_pool *pool;
        struct pom_mds *m = pom_route_pick(fs->route, fs->fsid, reqs[i].t.table,
                                           reqs[i].name_hash, &reqs[i].t.slice_hint, &pool);
        if (!m) {
            *unrouted = true;
            continue;
        }
        size_t b = req_bytes(&reqs[i]), g = ng;
        while (g > 0 && !(r->at[g - 1] == m && r->to[g - 1].n < MULTI_RPC_OPS &&
                          r->bytes[g - 1] + b <= MULTI_RPC_BYTES))
            g--;
        if (g == 0) {
            g = ng++;
            r->at[g] = m;
            r->bytes[g] = 0;
            r->to[g] = (struct xt_mds_batch_to){ .pool = pool };
        } else {
            g--;
        }
        r->bytes[g] += b;
        r->to[g].n++;
        r->sel[ns] = i;
        r->grp[ns++] = g;
    }
    size_t off = 0;
    for (size_t g = 0; g < ng; g++) {
        r->to[g].reqs = &r->sub[off];
        r->to[g].resps = &r->sresp[off];
        off += r->to[g].n;
        r->to[g].n = 0; /* counted again as they are placed */
    }
    for (size_t k = 0; k < ns; k++) {
        struct xt_mds_batch_to *t = &r->to[r->grp[k]];
        size_t pos = (size_t)(t->reqs - r->sub) + t->n++;
        r->sub[pos] = reqs[r->sel[k]];
        r->idx[pos] = r->sel[k];
        memset(&r->sresp[pos], 0, sizeof r->sresp[pos]);
    }
    return ng;
}

int pom_multi_call(pom_fs *fs, struct xt_req *reqs, size_t n, struct xt_resp *resps, int *rcs,
                   bool *retried)
{
    struct multi_round r;
    if (round_alloc(&r, n ? n : 1) < 0)
        return -ENOMEM;
    size_t pending = n;
    for (size_t i = 0; i < n; i++) {
        reqs[i].t.fsid = fs->fsid;
        reqs[i].name_hash = xt_hash_name(reqs[i].name, reqs[i].name_len); /* as pom_call */
        memset(&resps[i], 0, sizeof resps[i]);
        rcs[i] = 1; /* pending */
        if (retried)
            retried[i] = false;
    }
    struct retry rt = retry_begin(fs, "a batch");
    while (pending) {
        bool unrouted;
        size_t ng = round_build(fs, &r, reqs, n, rcs, &unrouted);
        int fail = unrouted ? -EHOSTUNREACH : 0; /* a transient error of the round */
        struct pom_mds *fail_at = NULL;
        for (size_t g = 0; g < ng; g++) {
            r.calls[g] = (xt_rpc_call){ .req_id = xt_rpc_new_req_id(),
                                        .timeout_ms = retry_timeout_ms(&rt, fs->call_ms) };
            r.to[g].call = &r.calls[g];
        }
        atomic_fetch_add_explicit(&fs->rpcs, ng, memory_order_relaxed);
        xt_mds_batch_each(r.to, ng);
        for (size_t g = 0; g < ng; g++) {
            struct xt_mds_batch_to *t = &r.to[g];
            size_t base = (size_t)(t->reqs - r.sub);
            for (size_t k = base; k < base + t->n; k++) {
                size_t i = r.idx[k];
                int st = t->rc < 0 ? t->rc : r.sresp[k].status;
                if (t->rc == 0)
                    answered(fs, r.at[g], &reqs[i], &r.sresp[k], st);
                if (transient(st)) {
                    xt_resp_free(&r.sresp[k]);
                    fail = st;
                    fail_at = r.at[g];
                    if (retried && unknown_outcome(st))
                        retried[i] = true;
                    continue;
                }
                if (st == 0 || t->rc == 0) {
                    resps[i] = r.sresp[k];
                    memset(&r.sresp[k], 0, sizeof r.sresp[k]);
                }
                rcs[i] = st;
                pending--;
            }
        }
        if (pending && fail && !retry_again(&rt, fail_at, &fail)) {
            for (size_t i = 0; i < n; i++) /* the window ran out */
                if (rcs[i] == 1)
                    rcs[i] = fail;
            pending = 0;
        }
    }
    round_free(&r);
    return 0;
}

int pom_list_call(pom_fs *fs, const struct xt_list_req *req, struct xt_list_resp *resp)
{
    xt_rpc_call call = { .req_id = xt_rpc_new_req_id() };
    struct retry rt = retry_begin(fs, "a listing");
    struct xt_list_req q = *req;
    uint64_t h = pom_route_cookie_hash(q.cookie);
    for (;;) {
        xt_rpc_pool *pool;
        struct pom_mds *m = pom_route_pick(fs->route, fs->fsid, q.t.table, h, &q.t.slice_hint,
                                           &pool);
        atomic_fetch_add_explicit(&fs->rpcs, 1, memory_order_relaxed);
        call.timeout_ms = retry_timeout_ms(&rt, fs->call_ms);
        int rc = m ? xt_mds_list(pool, &call, &q, resp) : -EHOSTUNREACH;
        if (!m)
            memset(resp, 0, sizeof *resp);
        if (rc == 0 && resp->bitmap)
            pom_route_learn(fs->route, q.t.table, resp->bitmap, resp->bitmap_len);
        if (!retry_again(&rt, m, &rc))
            return rc;
        xt_list_resp_free(resp);
    }
}

/* A sync vouches only for changes the same MDS incarnation acknowledged:
 * those up to seq0 are committed when the answer comes from the epoch
 * that acknowledged them. Another epoch lost them (note_epoch, before). */
static void sync_verdict(pom_fs *fs, struct pom_mds *m, uint64_t seq0, uint32_t epoch)
{
    pthread_mutex_lock(&fs->epoch_mu);
    if (!epoch || m->ack_epoch == epoch)
        pom_es_committed(fs, m, seq0);
    pthread_mutex_unlock(&fs->epoch_mu);
}

uint64_t pom_restart_count(pom_fs *fs)
{
    pthread_mutex_lock(&fs->epoch_mu);
    uint64_t c = fs->restarts;
    pthread_mutex_unlock(&fs->epoch_mu);
    return c;
}

/* One attempt at an MDS that left ring 0 (drained, removed): its call
 * timeout. A drained MDS wrote back everything before it stopped, so
 * finding it gone is no error. */
#define SYNC_LEFT_TIMEOUT_MS 2000

/* A FAILED MDS is not called: R2 took it out of ring 0, its slices are
 * loaded by their new owners from the MDSL, so what it acknowledged and
 * did not commit is lost as by a restart (pom_es_lose). The first sync of
 * a FAILED spell counts it as a restart (open buffers stale, tract sets
 * dropped before it stay: pom_gone_sync). */
static void sync_failed(pom_fs *fs, struct pom_mds *m)
{
    pthread_mutex_lock(&fs->epoch_mu);
    bool first = !m->fail_noted;
    m->fail_noted = true;
    if (first)
        fs->restarts++;
    bool lost = pom_es_lose(fs, m);
    pthread_mutex_unlock(&fs->epoch_mu);
    if (first)
        restart_seen(fs);
    if (lost)
        XT_WARN("fs %u: the MDS %s (site %u) failed before changes it acknowledged were "
                "committed: some may be lost", fs->fsid, m->addr, m->id);
}

/* An MDS that left ring 0 (DRAINING, removed) could not be reached: it
 * wrote back everything before it stopped, so the changes it acknowledged
 * up to seq0 count as committed. */
static void sync_left(pom_fs *fs, struct pom_mds *m, uint64_t seq0)
{
    pthread_mutex_lock(&fs->epoch_mu);
    pom_es_committed(fs, m, seq0);
    pthread_mutex_unlock(&fs->epoch_mu);
}

/* Syncs one MDS by its site state (pom_route.h invariant 5):
 *  - UP, TRANSIENT: until it answers, within the retry window (loud) or
 *    one attempt (quiet);
 *  - DRAINING, removed: one attempt, SYNC_LEFT_TIMEOUT_MS; unreachable is
 *    no error (sync_left);
 *  - FAILED: no call (sync_failed).
 * A view arriving during the retries that moves the MDS to another state
 * ends them the way that state says. Changes lost on the way are not this
 * call's error: the handles that cover them say it (pom_errseq.c). */
static int sync_one(pom_fs *fs, struct pom_mds *m, xt_rpc_pool *pool, int state, bool loud)
{
    if (state == XT_SITE_FAILED) {
        sync_failed(fs, m);
        return 0;
    }
    bool serving = state == XT_SITE_UP || state == XT_SITE_TRANSIENT;
    int timeout_ms = serving ? 120000 : SYNC_LEFT_TIMEOUT_MS;
    xt_rpc_call call = { .req_id = xt_rpc_new_req_id() };
    struct retry rt = retry_begin(fs, "a sync");
    pthread_mutex_lock(&fs->epoch_mu);
    uint64_t seq0 = m->ack_seq;
    if (serving)
        m->fail_noted = false; /* back from a FAILED spell */
    pthread_mutex_unlock(&fs->epoch_mu);
    for (;;) {
        uint64_t committed = 0;
        uint32_t epoch = 0;
        atomic_fetch_add_explicit(&fs->rpcs, 1, memory_order_relaxed);
        call.timeout_ms = loud ? retry_timeout_ms(&rt, timeout_ms) : timeout_ms;
        int rc = xt_mds_sync(pool, &call, 0, &committed, &epoch);
        if (!transient(rc))
            retry_end(&rt, m);
        if (rc == 0) {
            note_epoch(fs, m, epoch, NULL, 0);
            sync_verdict(fs, m, seq0, epoch);
            return 0;
        }
        if (!transient(rc))
            return rc;
        if (serving)
            state = pom_route_state(fs->route, m);
        if (state == XT_SITE_FAILED) {
            sync_failed(fs, m);
            return 0;
        }
        if (state != XT_SITE_UP && state != XT_SITE_TRANSIENT) {
            sync_left(fs, m, seq0);
            return 0;
        }
        if (!loud || !retry_again(&rt, m, &rc))
            return rc;
    }
}

/* With many MDS a change may sit at any of them (a forwarded request is
 * applied by the owner, not by the MDS the client called): every MDS of
 * the view is synced, each as its site state says (sync_one). The first
 * error is returned. */
static int sync_all(pom_fs *fs, bool loud)
{
    struct pom_mds **ms = NULL;
    xt_rpc_pool **pools = NULL;
    int *states = NULL, rc = 0;
    size_t cap = 0, n;
    /* The view may grow between the count and the copy: until it fits. */
    while ((n = pom_route_all(fs->route, ms, pools, states, cap)) > cap) {
        xt_free(ms);
        xt_free(pools);
        xt_free(states);
        cap = n + 8;
        ms = xt_malloc(cap * sizeof *ms);
        pools = xt_malloc(cap * sizeof *pools);
        states = xt_malloc(cap * sizeof *states);
        if (!ms || !pools || !states) {
            n = 0;
            rc = -ENOMEM;
            break;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int r = sync_one(fs, ms[i], pools[i], states[i], loud);
        if (r < 0 && rc == 0)
            rc = r;
    }
    xt_free(ms);
    xt_free(pools);
    xt_free(states);
    return rc;
}

int pom_sync_quiet(pom_fs *fs)
{
    return sync_all(fs, false);
}

int pom_sync_call(pom_fs *fs)
{
    return sync_all(fs, true);
}

uint64_t pom_call_deadline(pom_fs *fs)
{
    return retry_begin(fs, "").deadline;
}

/* When an MDS cannot run a batch whose rows sit at several MDS (it
 * answers -EXDEV: a row too big for a pending row's pre-image, or an MDS
 * without transactions), its ops run one by one, in order, with no
 * atomicity; a failing op stops the rest (*failed its index). In-batch
 * semantics are kept per op: a LOOKUP is a check (version/uuid compared
 * here), a CREATE with XT_F_IF_VER/XT_F_IF_UUID replaces only a row
 * that passes the same check. */
static int batch_send(pom_fs *fs, struct xt_req *reqs, size_t n, size_t *failed, bool *retried);

static int batch_fallback(pom_fs *fs, struct xt_req *reqs, size_t n, size_t *failed,
                          bool *retried)
{
    for (size_t i = 0; i < n; i++) {
        *failed = i;
        struct xt_req q = reqs[i];
        if (q.flags & XT_F_RMU) {
            /* A copy travels in a batch only: alone, it applies at its
             * row's MDS (newest wins). */
            size_t f;
            int rc = batch_send(fs, &q, 1, &f, retried);
            if (rc < 0)
                return rc;
            continue;
        }
        bool check = q.op == XT_OP_LOOKUP ||
                     (q.op == XT_OP_CREATE && (q.flags & (XT_F_IF_VER | XT_F_IF_UUID)));
        struct xt_resp r;
        int rc = 0;
        if (check) {
            static const uint16_t none[1] = { 0 };
            struct xt_req l = { .op = XT_OP_LOOKUP, .t = q.t, .name = q.name,
                                .name_len = q.name_len, .cols = none, .ncols = 0 };
            rc = pom_call(fs, &l, &r, retried);
            xt_row v;
            if (rc == 0 && (!r.row || xt_row_decode_meta(r.row, r.row_len, &v) < 0))
                rc = -EIO;
            if (rc == 0 && (((q.flags & XT_F_IF_VER) && v.attr.version != q.expect_version) ||
                            ((q.flags & XT_F_IF_UUID) && v.attr.uuid != q.expect_uuid)))
                rc = -ESTALE;
            xt_resp_free(&r);
            if (rc < 0)
                return rc;
            if (q.op == XT_OP_LOOKUP)
                continue;
            q.flags &= ~(uint32_t)(XT_F_IF_VER | XT_F_IF_UUID | XT_F_EXCL);
        }
        rc = pom_call(fs, &q, &r, retried);
        xt_resp_free(&r);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* The batch as one XT_BATCH_ATOMIC to the owner of its first op (decision
 * 7 of docs/mds-dist.md), which coordinates it when other MDS own some of
 * its rows (docs/mds-xact.md). */
static int batch_send(pom_fs *fs, struct xt_req *reqs, size_t n, size_t *failed, bool *retried)
{
    xt_rpc_call call = { .req_id = xt_rpc_new_req_id() };
    struct retry rt = retry_begin(fs, "a batch");
    struct xt_resp resps[XT_BATCH_ATOMIC_MAX];
    for (;;) {
        memset(resps, 0, sizeof resps);
        xt_rpc_pool *pool = NULL;
        int32_t hint;
        struct pom_mds *m = pom_route_pick(fs->route, fs->fsid, reqs[0].t.table,
                                           reqs[0].name_hash, &hint, &pool);
        atomic_fetch_add_explicit(&fs->rpcs, 1, memory_order_relaxed);
        call.timeout_ms = retry_timeout_ms(&rt, fs->call_ms);
        int rc = m ? xt_mds_batch_atomic(pool, &call, reqs, n, resps, failed) : -EHOSTUNREACH;
        if (!m)
            *failed = SIZE_MAX;
        for (size_t i = 0; m && i < n; i++) /* the MDS's bitmaps, when ours were stale */
            if (resps[i].bitmap)
                pom_route_learn(fs->route, reqs[i].t.table, resps[i].bitmap,
                                resps[i].bitmap_len);
        if (rc == 0) {
            /* A coordinated batch was decided at its first row's owner
             * (epoch_site), which holds the decision: track its epoch. */
            struct pom_mds *at = m;
            if (resps[0].epoch_site && resps[0].epoch_site != m->id)
                at = pom_route_find(fs->route, resps[0].epoch_site);
            if (at)
                note_epoch(fs, at, resps[0].epoch, reqs, n);
        }
        for (size_t i = 0; i < n; i++)
            xt_resp_free(&resps[i]);
        if (rc == -EXDEV)
            return batch_fallback(fs, reqs, n, failed, retried);
        if (!retry_again(&rt, m, &rc))
            return rc;
        if (retried)
            *retried = true;
    }
}

/* Whether this client's view places a loose op of the batch (a parent's
 * times, xt_req_loose) at another MDS than its strict ops, which all sit
 * at one MDS: every create or unlink whose parent row is elsewhere. The
 * client then splits the batch itself (batch_split) instead of having the
 * strict ops' MDS fail its atomic attempt and route the loose ops onward.
 * A stale view only costs that detour: the MDS splits by its own (newer)
 * bitmap, or coordinates a transaction. A parent's subdirectory count
 * (mkdir, rmdir) is never split off here: the MDS makes it an RMU, whose
 * outbox row commits with the entry (docs/mds-xact.md "RMU: a parent's subdirectory count"). */
static bool loose_apart(pom_fs *fs, const struct xt_req *reqs, size_t n)
{
    uint32_t strict = 0, loose[XT_BATCH_ATOMIC_MAX];
    size_t nloose = 0;
    for (size_t i = 0; i < n; i++) {
        xt_rpc_pool *pool;
        int32_t hint;
        struct pom_mds *m = pom_route_pick(fs->route, fs->fsid, reqs[i].t.table,
                                           reqs[i].name_hash, &hint, &pool);
        if (!m || xt_req_loose_after(&reqs[i]))
            return false;
        if (reqs[i].flags & XT_F_RMU)
            continue; /* a copy goes wherever the MDS sends it (an RMU) */
        if (xt_req_loose(&reqs[i]))
            loose[nloose++] = m->id;
        else if (strict && strict != m->id)
            return false; /* a transaction: its coordinator runs the loose ops */
        else
            strict = m->id;
    }
    for (size_t i = 0; i < nloose && strict; i++)
        if (loose[i] != strict)
            return true;
    return false;
}

/* One loose op on its own; an error is the op's. */
static int loose_call(pom_fs *fs, const struct xt_req *q, bool *retried)
{
    struct xt_req c = *q;
    struct xt_resp r;
    int rc = pom_call(fs, &c, &r, retried);
    xt_resp_free(&r);
    return rc;
}

/* The split the coordinating MDS makes (mds_xact_run), made here for a
 * batch without a count: the parents' times first (a parent removed
 * meanwhile stops the batch before anything changed), then the strict ops
 * as one atomic batch at their MDS. A crash between them loses a time, as
 * the MDS's own split does. */
static int batch_split(pom_fs *fs, struct xt_req *reqs, size_t n, size_t *failed, bool *retried)
{
    struct xt_req sreq[XT_BATCH_ATOMIC_MAX];
    size_t sidx[XT_BATCH_ATOMIC_MAX], ns = 0;
    int rc;
    for (size_t i = 0; i < n; i++)
        if (!xt_req_loose(&reqs[i])) {
            sidx[ns] = i;
            sreq[ns++] = reqs[i];
        } else if ((rc = loose_call(fs, &reqs[i], retried)) < 0) {
            *failed = i;
            return rc;
        }
    size_t sf = SIZE_MAX;
    if ((rc = batch_send(fs, sreq, ns, &sf, retried)) < 0)
        *failed = sf < ns ? sidx[sf] : sf;
    return rc;
}

void pom_conflict_pause(int attempt)
{
    assert(attempt >= 0);
    if (attempt < 4)
        return;
    int shift = XT_MIN(attempt - 4, 7);
    xt_sleep_ms(XT_MIN(UINT64_C(1) << shift, 100));
}

int pom_batch_call(pom_fs *fs, struct xt_req *reqs, size_t n, size_t *failed, bool *retried)
{
    if (n == 0 || n > XT_BATCH_ATOMIC_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        reqs[i].t.fsid = fs->fsid;
        reqs[i].t.slice_hint = -1;
        reqs[i].name_hash = xt_hash_name(reqs[i].name, reqs[i].name_len); /* as pom_call */
    }
    return loose_apart(fs, reqs, n) ? batch_split(fs, reqs, n, failed, retried)
                                    : batch_send(fs, reqs, n, failed, retried);
}
