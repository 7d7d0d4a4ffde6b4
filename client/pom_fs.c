/*
 * pom_fs.c -- connecting to a file system, the RPC helpers with retries,
 * row helpers, the uuid allocator and statfs/sync of libpomegranate.
 *
 * Invariants:
 *  (1) A call that failed in transport (-ECONNREFUSED, -ECONNRESET,
 *      -ETIMEDOUT, -EIO, -EPIPE) is retried with the same request id, with
 *      a growing pause, until fs->retry_ms have passed (hard) or, soft,
 *      fs->soft_ms (then it answers -EIO): an MDS that is restarted under a
 *      mount is waited for, not reported. A wait is never silent: past 10 s
 *      it is logged, and so is its end (retry_again).
 *  (2) uuids: the counter row "alloc" of the super table holds in `size` the
 *      first uuid never handed out. A client claims [size, size + CHUNK)
 *      with an update conditional on the row's version and with XT_F_SYNC,
 *      so a claim is durable before any uuid of it is used, and two claims
 *      never overlap (the loser of a race gets -ESTALE and reads again).
 *      A range a client did not use up is lost, never reused.
 *  (3) The root row is created (exclusively) at the first connect, by
 *      whichever client gets there first.
 */
#include "pom_client_i.h"
#include "pom_blob.h"
#include "pom_route.h"
#include "r2_agent.h"
#include "xt_hash.h"
#include "xt_rpc_r2.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
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

void pom_pause_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
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
    uint64_t now = xt_mono_ns();
    int window = fs->soft_ms > 0 ? fs->soft_ms : fs->retry_ms;
    return (struct retry){ .fs = fs, .what = what, .t0 = now,
                           .deadline = now + (uint64_t)window * 1000000u,
                           .warn_at = now + (uint64_t)WAIT_WARN_FIRST_MS * 1000000u,
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
        r->warn_at = now + (uint64_t)WAIT_WARN_EVERY_MS * 1000000u;
    }
    pom_pause_ms(r->delay);
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
    pom_ino_mark_stale(fs);
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

/* Records the incarnation `epoch` of MDS m in a reply (invariant (5) of
 * pom_client_i.h, kept per MDS); reqs[0..n): the changes the reply
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

int pom_call(pom_fs *fs, struct xt_req *req, struct xt_resp *resp, bool *retried)
{
    xt_rpc_call call = { .req_id = xt_rpc_new_req_id() };
    struct retry rt = retry_begin(fs, op_class(req));
    req->t.fsid = fs->fsid;
    uint64_t h = xt_hash_name(req->name, req->name_len);
    for (;;) {
        xt_rpc_pool *pool;
        struct pom_mds *m = pom_route_pick(fs->route, fs->fsid, req->t.table, h,
                                           &req->t.slice_hint, &pool);
        atomic_fetch_add_explicit(&fs->rpcs, 1, memory_order_relaxed);
        call.timeout_ms = retry_timeout_ms(&rt, fs->call_ms);
        int rc = m ? xt_mds_call(pool, &call, req, resp) : -EHOSTUNREACH;
        if (!m)
            memset(resp, 0, sizeof *resp);
        if (resp->bitmap)
            pom_route_learn(fs->route, req->t.table, resp->bitmap, resp->bitmap_len);
        if (rc == 0 || rc == -ENOENT || rc == -EEXIST || rc == -ESTALE) {
            /* A forward answered: the change sits at the owner it names
             * (docs/mds-dist.md "Epochs through forwards"). */
            struct pom_mds *at = m;
            if (m && resp->epoch_site && resp->epoch_site != m->id)
                at = pom_route_find(fs->route, resp->epoch_site);
            if (at) /* (an owner not in our view yet: its epoch means nothing to m's) */
                note_epoch(fs, at, resp->epoch, req,
                           rc == 0 && req->op != XT_OP_LOOKUP ? 1 : 0);
        }
        if (!retry_again(&rt, m, &rc))
            return rc;
        xt_resp_free(resp);
        if (retried)
            *retried = true;
    }
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
 * dropped before it stay: pom_gone_finish). */
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
    struct pom_gone *gone;
    size_t ngone = pom_gone_take(fs, &gone); /* before: these syncs cover them */
    int rc = sync_all(fs, true);
    /* A restart (or a failed MDS) that lost changes is counted, so the sets
     * it concerns no longer match their mark and stay; an error (a soft
     * timeout's -EIO) vouches for nothing: they wait for the next sync. */
    pom_gone_finish(fs, gone, ngone, rc, pom_restart_count(fs));
    return rc;
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
    uint64_t h = xt_hash_name(reqs[0].name, reqs[0].name_len);
    for (;;) {
        memset(resps, 0, sizeof resps);
        xt_rpc_pool *pool = NULL;
        int32_t hint;
        struct pom_mds *m = pom_route_pick(fs->route, fs->fsid, reqs[0].t.table, h, &hint,
                                           &pool);
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
                                           xt_hash_name(reqs[i].name, reqs[i].name_len),
                                           &hint, &pool);
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

int pom_batch_call(pom_fs *fs, struct xt_req *reqs, size_t n, size_t *failed, bool *retried)
{
    if (n == 0 || n > XT_BATCH_ATOMIC_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        reqs[i].t.fsid = fs->fsid;
        reqs[i].t.slice_hint = -1;
    }
    return loose_apart(fs, reqs, n) ? batch_split(fs, reqs, n, failed, retried)
                                    : batch_send(fs, reqs, n, failed, retried);
}

int pom_row_get(pom_fs *fs, uint64_t table, const char *name, int group,
                struct xt_resp *resp, xt_row *row)
{
    uint16_t want[1] = { (uint16_t)(group > 0 ? group : 0) };
    bool with_groups = group != POM_ROW_META;
    struct xt_req q = { .op = XT_OP_LOOKUP, .t = { .table = table }, .name = name,
                        .name_len = (uint32_t)strlen(name), .flags = XT_F_INLINE,
                        .cols = group == POM_ROW_ALL ? NULL : want,
                        .ncols = group > 0 ? 1 : 0 };
    int rc = pom_call(fs, &q, resp, NULL);
    if (rc < 0) {
        xt_resp_free(resp); /* (an answer may carry a bitmap: -ENOENT does) */
        return rc;
    }
    if (!resp->row) {
        xt_resp_free(resp);
        return -EPROTO;
    }
    rc = with_groups ? xt_row_decode(resp->row, resp->row_len, row)
                     : xt_row_decode_meta(resp->row, resp->row_len, row);
    if (rc < 0) {
        XT_ERR("row %s of table %llu does not decode: %s", name,
               (unsigned long long)table, xt_row_last_error());
        xt_resp_free(resp);
        return -EIO;
    }
    return 0;
}

static mode_t type_bits(uint8_t type)
{
    switch (type) {
    case XT_ROW_DIR: return S_IFDIR;
    case XT_ROW_SYMLINK: return S_IFLNK;
    case XT_ROW_CHR: return S_IFCHR;
    case XT_ROW_BLK: return S_IFBLK;
    case XT_ROW_FIFO: return S_IFIFO;
    case XT_ROW_SOCK: return S_IFSOCK;
    default: return S_IFREG;
    }
}

static void ns_to_ts(uint64_t ns, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ns / 1000000000u);
    ts->tv_nsec = (long)(ns % 1000000000u);
}

uint64_t pom_ts_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

void pom_row_stat(const xt_row_attr *a, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = a->uuid;
    st->st_mode = type_bits(a->type) | (a->mode & 07777);
    st->st_nlink = xt_row_nlink_shown(a); /* (a count below 2 for now shows 2) */
    st->st_uid = a->uid;
    st->st_gid = a->gid;
    st->st_size = (off_t)a->size;
    st->st_blksize = 4096;
    st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
    ns_to_ts(a->atime_ns, &st->st_atim);
    ns_to_ts(a->mtime_ns, &st->st_mtim);
    ns_to_ts(a->ctime_ns, &st->st_ctim);
}

int pom_name_check(const char *name)
{
    if (!name || !name[0] || strchr(name, '/') || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return -EINVAL;
    if (strlen(name) > XT_NAME_MAX)
        return -ENAMETOOLONG;
    return 0;
}

/* Claims a new range (invariant 2). REQUIRES: fs->alloc_mu held. */
static int claim_range(pom_fs *fs, uint64_t *lo)
{
    /* A claim that needed retries (the MDS failing to commit, e.g. on a
     * full disk) answers -ESTALE to its retry, which would loop here: past
     * the retry window, give up as pom_call does. */
    uint64_t deadline = retry_begin(fs, "a uuid claim").deadline;
    for (int attempt = 0; attempt < 1000; attempt++) {
        struct xt_resp r;
        xt_row row;
        int rc = pom_row_get(fs, POM_TABLE_SUPER, POM_ALLOC_ROW, POM_ROW_META, &r, &row);
        if (rc == -ENOENT) {
            /* First claim of this fs: create the counter past our range. */
            xt_row init;
            xt_row_init(&init);
            init.attr.type = XT_ROW_KV;
            init.attr.size = POM_UUID_BASE + POM_UUID_CHUNK;
            struct xt_req q = { .op = XT_OP_CREATE, .t = { .table = POM_TABLE_SUPER },
                                .name = POM_ALLOC_ROW, .name_len = 5,
                                .flags = XT_F_EXCL | XT_F_SYNC, .row = &init };
            bool retried = false;
            rc = pom_call(fs, &q, &r, &retried);
            xt_resp_free(&r);
            if (rc == 0) {
                *lo = POM_UUID_BASE;
                return 0;
            }
            if (rc == -EEXIST)
                continue; /* someone else (or a lost reply of ours): read again */
            return rc;
        }
        if (rc < 0)
            return rc;
        uint64_t next = row.attr.size, ver = row.attr.version;
        xt_resp_free(&r);
        if (next < POM_UUID_BASE || next > UINT64_MAX - POM_UUID_CHUNK) {
            XT_ERR("uuid counter holds %llu: out of range", (unsigned long long)next);
            return -EOVERFLOW;
        }
        xt_row upd;
        xt_row_init(&upd);
        upd.attr.size = next + POM_UUID_CHUNK;
        struct xt_req q = { .op = XT_OP_UPDATE, .t = { .table = POM_TABLE_SUPER },
                            .name = POM_ALLOC_ROW, .name_len = 5,
                            .flags = XT_F_IF_VER | XT_F_SYNC, .row = &upd,
                            .set_mask = XT_ROW_SET_SIZE, .expect_version = ver };
        bool retried = false;
        rc = pom_call(fs, &q, &r, &retried);
        xt_resp_free(&r);
        if (rc == 0 && !retried) {
            *lo = next;
            return 0;
        }
        /* -ESTALE: lost a race. After a retry we cannot tell whether our
         * first attempt won, so that range is abandoned (never reused). */
        if (rc < 0 && rc != -ESTALE)
            return rc;
        if (retried && xt_mono_ns() > deadline)
            return -EIO;
    }
    return -EAGAIN;
}

int pom_uuid_alloc(pom_fs *fs, uint64_t *uuid)
{
    pthread_mutex_lock(&fs->mu);
    if (fs->uuid_next < fs->uuid_end) {
        *uuid = fs->uuid_next++;
        pthread_mutex_unlock(&fs->mu);
        return 0;
    }
    pthread_mutex_unlock(&fs->mu);

    pthread_mutex_lock(&fs->alloc_mu);
    int rc = 0;
    pthread_mutex_lock(&fs->mu);
    bool have = fs->uuid_next < fs->uuid_end; /* another thread claimed */
    pthread_mutex_unlock(&fs->mu);
    if (!have) {
        uint64_t lo = 0;
        rc = claim_range(fs, &lo);
        if (rc == 0) {
            pthread_mutex_lock(&fs->mu);
            fs->uuid_next = lo;
            fs->uuid_end = lo + POM_UUID_CHUNK;
            pthread_mutex_unlock(&fs->mu);
        }
    }
    pthread_mutex_unlock(&fs->alloc_mu);
    if (rc < 0)
        return rc;
    return pom_uuid_alloc(fs, uuid);
}

/* Creates the root row unless it exists (invariant 3). */
static int ensure_root(pom_fs *fs)
{
    struct xt_resp r;
    xt_row row;
    int rc = pom_row_get(fs, POM_TABLE_SUPER, POM_ROOT_ROW, POM_ROW_META, &r, &row);
    if (rc == 0) {
        xt_resp_free(&r);
        return 0;
    }
    if (rc != -ENOENT)
        return rc;
    xt_row root;
    xt_row_init(&root);
    uint64_t now = xt_now_ns();
    root.attr.uuid = POM_ROOT_INO;
    root.attr.type = XT_ROW_DIR;
    root.attr.mode = 0755;
    root.attr.uid = (uint32_t)geteuid();
    root.attr.gid = (uint32_t)getegid();
    root.attr.nlink = 2; /* 2 + subdirectories (docs/client.md "nlink") */
    root.attr.atime_ns = root.attr.mtime_ns = root.attr.ctime_ns = root.attr.btime_ns = now;
    struct xt_req q = { .op = XT_OP_CREATE, .t = { .table = POM_TABLE_SUPER },
                        .name = POM_ROOT_ROW, .name_len = 4, .flags = XT_F_EXCL | XT_F_SYNC,
                        .row = &root };
    rc = pom_call(fs, &q, &r, NULL);
    xt_resp_free(&r);
    return rc == -EEXIST ? 0 : rc;
}

static struct xt_rpc_pool_opts pool_opts(const struct pom_opts *opts)
{
    return (struct xt_rpc_pool_opts){
        .max_idle = 32,
        .call_timeout_ms = opts && opts->call_timeout_ms > 0 ? opts->call_timeout_ms : 10000,
        .backoff_min_ms = 10, .backoff_max_ms = 500,
    };
}

/* A connected fs over route (taken over, also on error). */
static int fs_new(uint32_t fsid, const struct pom_opts *opts, pom_route *route, pom_fs **out)
{
    pom_fs *fs = xt_calloc(1, sizeof *fs);
    if (!fs) {
        pom_route_free(route);
        return -ENOMEM;
    }
    fs->fsid = fsid;
    fs->route = route;
    fs->retry_ms = opts && opts->retry_ms > 0 ? opts->retry_ms : 30000;
    fs->soft_ms = opts && opts->soft_ms > 0 ? opts->soft_ms : 0;
    fs->call_ms = pool_opts(opts).call_timeout_ms;
    pthread_mutex_init(&fs->mu, NULL);
    pthread_mutex_init(&fs->alloc_mu, NULL);
    pthread_mutex_init(&fs->epoch_mu, NULL);
    pthread_mutex_init(&fs->gone_mu, NULL);
    int rc = pom_ino_init(fs);
    if (rc == 0)
        rc = pom_es_init(fs);
    if (rc == 0)
        rc = ensure_root(fs);
    if (rc == 0)
        rc = pom_ino_ref(fs, POM_ROOT_INO, POM_TABLE_SUPER, POM_ROOT_ROW, XT_ROW_DIR, 1);
    if (rc < 0) {
        pom_close(fs);
        return rc;
    }
    *out = fs;
    return 0;
}

int pom_connect_mds_opts(const char *mds_addr, uint32_t fsid, const struct pom_opts *opts,
                         pom_fs **out)
{
    *out = NULL;
    if (!mds_addr)
        return -EINVAL;
    struct xt_rpc_pool_opts po = pool_opts(opts);
    pom_route *route;
    int rc = pom_route_new_single(mds_addr, &po, &route);
    return rc < 0 ? rc : fs_new(fsid, opts, route, out);
}

int pom_connect_mds(const char *mds_addr, uint32_t fsid, pom_fs **out)
{
    return pom_connect_mds_opts(mds_addr, fsid, NULL, out);
}

/* Asks the R2s in r2_addrs (comma-separated) for fs `fsname` and for the
 * view (MDS sites, ring 0): *v (xt_view_free) when 0. Followers answer
 * get_view and fs_list too, so any R2 will do. */
static int r2_locate(const char *r2_addrs, const char *fsname, uint32_t *fsid,
                     struct xt_view *view, struct xt_fs_info *info)
{
    char list[1024];
    if (strlen(r2_addrs) >= sizeof list)
        return -EINVAL;
    strcpy(list, r2_addrs);
    int rc = -EINVAL;
    char *save = NULL;
    for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        char host[256];
        int port;
        if (xt_rpc_parse_addr(a, host, sizeof host, &port))
            return -EINVAL;
        struct xt_rpc_pool_opts po = { .host = host, .port = port, .call_timeout_ms = 5000 };
        xt_rpc_pool *p = NULL;
        if ((rc = xt_rpc_pool_new(&po, &p)))
            return rc;
        struct xt_fs_info *fs = NULL;
        size_t nfs = 0;
        rc = xt_r2_fs_list(p, NULL, fsname, &fs, &nfs);
        if (rc == 0) {
            rc = -ENOENT;
            for (size_t i = 0; i < nfs; i++)
                if (!strcmp(fs[i].name, fsname)) {
                    *fsid = fs[i].fsid;
                    memcpy(info->blob_backend, fs[i].blob_backend, sizeof info->blob_backend);
                    memcpy(info->blob_path, fs[i].blob_path, sizeof info->blob_path);
                    rc = 0;
                }
            xt_fs_info_free_array(fs, nfs);
        }
        if (rc == 0) {
            struct xt_view v;
            bool has = false;
            rc = xt_r2_get_view(p, NULL, 0, &has, &v);
            if (rc == 0) {
                rc = -EHOSTUNREACH;
                for (size_t i = 0; has && i < v.nsites && rc; i++)
                    if (v.sites[i].type == XT_SITE_MDS && v.sites[i].state == XT_SITE_UP)
                        rc = 0;
                if (rc == 0)
                    *view = v;
                else
                    xt_view_free(&v);
            }
        }
        xt_rpc_pool_free(p);
        if (rc == 0 || rc == -ENOENT || rc == -EHOSTUNREACH)
            return rc;
    }
    return rc;
}

/* New views (MDS added or moved, ring 0 changed) re-route at once; while
 * R2 is unreachable the last view stays (pom_route.h (2)). */
static void client_view(void *arg, const struct xt_view *v, int changed)
{
    if (changed & (XT_VIEW_SITES | XT_VIEW_RINGS))
        pom_route_update(arg, v);
}

int pom_open(const char *r2_addrs, const char *fsname, pom_fs **out)
{
    return pom_open_opts(r2_addrs, fsname, NULL, out);
}

int pom_open_opts(const char *r2_addrs, const char *fsname, const struct pom_opts *opts,
                  pom_fs **out)
{
    *out = NULL;
    if (!r2_addrs || !fsname || !*fsname)
        return -EINVAL;
    uint32_t fsid = 0;
    struct xt_view view;
    memset(&view, 0, sizeof view);
    struct xt_fs_info *info = xt_calloc(1, sizeof *info); /* blob backend and path */
    if (!info)
        return -ENOMEM;
    int rc = r2_locate(r2_addrs, fsname, &fsid, &view, info);
    if (rc == -ENOENT)
        XT_ERR("no file system named '%s' at R2 %s (create it: pomctl fs create %s)", fsname,
               r2_addrs, fsname);
    else if (rc == -EHOSTUNREACH)
        XT_ERR("R2 %s knows no MDS that is up", r2_addrs);
    else if (rc)
        XT_ERR("cannot reach R2 at %s: %s", r2_addrs, strerror(-rc));
    if (rc == 0) {
        /* Every MDS of the view, requests routed by ring 0 (pom_route.h). */
        struct xt_rpc_pool_opts po = pool_opts(opts);
        pom_route *route;
        rc = pom_route_new_view(&view, &po, &route);
        if (rc == 0)
            rc = fs_new(fsid, opts, route, out);
        xt_view_free(&view);
    }
    if (rc == 0 && info->blob_path[0]) {
        /* The fs record's blob tier. Not reaching it leaves the small files
         * usable (large ones answer EFBIG); pomfs -o blob=DIR overrides. */
        int brc = pom_set_blob(*out, info->blob_backend, info->blob_path);
        if (brc < 0)
            XT_ERR("fs %s: blob tier %s %s not usable (%s): files over %u bytes answer EFBIG",
                   fsname, info->blob_backend, info->blob_path, strerror(-brc), POM_INLINE_MAX);
    } else if (rc == 0) {
        XT_WARN("fs %s has no blob path: files over %u bytes answer EFBIG (pomfs -o blob=DIR)",
                fsname, POM_INLINE_MAX);
    }
    xt_free(info);
    if (rc)
        return rc;
    /* Register the mount: R2 counts it (fs drop is refused while mounted)
     * and sees it fail when the heartbeats stop. */
    char label[64];
    snprintf(label, sizeof label, "client-%d", (int)getpid());
    struct r2_agent_opts ao = { .r2_addrs = r2_addrs, .type = XT_SITE_CLIENT, .addr = label,
                                .fs_name = fsname, .on_view = client_view,
                                .view_arg = (*out)->route };
    if ((rc = r2_agent_start(&ao, &(*out)->agent)))
        XT_WARN("cannot register the mount with R2: %s", strerror(-rc));
    return 0;
}

void pom_close(pom_fs *fs)
{
    if (!fs)
        return;
    r2_agent_stop(fs->agent);
    pom_reclaim_stop(fs); /* before the blob tier and the inode map go */
    if (fs->route && fs->ngone)
        pom_tracts_reap(fs);
    pom_route_free(fs->route);
    pom_ino_destroy(fs);
    pom_es_free(fs);
    pom_blob_close(fs->blob);
    pthread_mutex_destroy(&fs->mu);
    pthread_mutex_destroy(&fs->alloc_mu);
    pthread_mutex_destroy(&fs->epoch_mu);
    pthread_mutex_destroy(&fs->gone_mu);
    xt_free(fs->gone);
    xt_free(fs);
}

uint32_t pom_fsid(const pom_fs *fs)
{
    return fs->fsid;
}

int pom_sync(pom_fs *fs)
{
    int rc = pom_sync_call(fs);
    return rc < 0 ? rc : pom_es_check_fs(fs);
}

int pom_statfs(pom_fs *fs, struct statvfs *sv)
{
    (void)fs;
    /* No capacity accounting yet (R2's per-fs counters will feed it):
     * report a large, constant, mostly free file system so tools that
     * check free space proceed. */
    memset(sv, 0, sizeof *sv);
    sv->f_bsize = 4096;
    sv->f_frsize = 4096;
    sv->f_blocks = UINT64_C(1) << 32;
    sv->f_bfree = sv->f_bavail = UINT64_C(1) << 31;
    sv->f_files = UINT64_C(1) << 32;
    sv->f_ffree = sv->f_favail = UINT64_C(1) << 31;
    sv->f_fsid = fs->fsid;
    sv->f_namemax = XT_NAME_MAX;
    return 0;
}
