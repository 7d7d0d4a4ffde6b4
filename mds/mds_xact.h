/*
 * mds_xact.h -- atomic batches whose rows sit at several MDS
 * (docs/mds-xact.md): the coordinator, the participant's prepare, the
 * finish and the resolver. All transaction state is system rows
 * (xt_hash.h) in the slices of the rows it concerns, so it moves, splits,
 * is fenced and committed with them; no RPC is added: every step is a
 * row op or an atomic batch between MDS.
 *
 * Invariants:
 *  (1) A participant's part (its ops and one pending row per op, made from
 *      the row's pre-image in the same atomic batch) is durable before the
 *      coordinator decides: prepares carry XT_F_SYNC.
 *  (2) The decision is the decision row, created EXCL: COMMIT by the
 *      coordinator in the same atomic batch as the ops of the decider (the
 *      owner of op 0), ABORT by whoever finds it absent when resolving. The
 *      first creation wins. An ABORT row lives while a late COMMIT could
 *      still land: the coordinator drops its own only once no decide batch
 *      can arrive, a holder collects a dead incarnation's after
 *      abort_gc_ms (docs/mds-xact.md "ABORT rows"). A COMMIT row is deleted
 *      only after every pending row.
 *  (3) A pending row is deleted (COMMIT) or rolled back (ABORT: the
 *      pre-image restored and the pending row deleted in one batch) only
 *      after its decision is durable at the decision row's holder.
 *  (4) A pending row blocks every other write and every lookup of its row
 *      (mds_table.h invariant 9) until (3) removed it: nobody acts on an
 *      undecided state.
 *  (5) A batch with any XT_F_SYS request is MDS-to-MDS: it is never
 *      coordinated again (-EREMOTE when a row moved: the sender retries).
 */
#ifndef MDS_XACT_H
#define MDS_XACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_route.h"
#include "mds_soft.h"
#include "mds_stats.h"
#include "mds_table.h"
#include "xt_rpc_mds.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mds_xact mds_xact;

/* How the transactions reach rows: the service's handlers. */
struct mds_xact_io {
    void *ctx;
    /* One row op, served here or forwarded to its owner. resp as
     * xt_mds_call's (the caller frees it). */
    int (*op)(void *ctx, const struct xt_req *req, struct xt_resp *resp);
    /* An atomic batch run here, never coordinated: reqs[0..n) then the
     * table ops extra[0..nextra) (a derive's `of` indexes reqs). *failed
     * indexes reqs then extra; *gen: its group. Syncs when a req asks. */
    int (*batch)(void *ctx, const struct xt_req *reqs, size_t n, const struct mds_aop *extra,
                 size_t nextra, struct xt_resp *resps, size_t *failed, uint64_t *gen);
};

struct mds_xact_opts {
    mds_table *table;          /* borrowed (all of these) */
    mds_group *group;
    mds_cache *cache;
    mds_route *route;
    mds_stats *stats;          /* may be NULL */
    mds_soft *soft;            /* RMU deltas shown here (mds_soft.h); may be NULL */
    uint32_t epoch;            /* this incarnation (part of every txid) */
    unsigned resolve_ms;       /* age of a pending row before it is resolved; 0: 2000 */
    unsigned call_timeout_ms;  /* MDS-to-MDS calls; 0: 10000 */
    unsigned abort_gc_ms;      /* age of the ABORT rows the sweep removes; 0: 60000 */
    bool rmu_hold;             /* tests only: outbox rows stay undelivered */
};

/* *out: mds_xact_free. -EINVAL, -ENOMEM. */
int mds_xact_new(const struct mds_xact_opts *o, mds_xact **out);
/* io is copied. REQUIRES: before mds_xact_start and before any call. */
void mds_xact_bind(mds_xact *x, const struct mds_xact_io *io);
/* Starts the thread that finishes decided transactions and resolves
 * pending rows found in the cache. 0, -errno. */
int mds_xact_start(mds_xact *x);
/* Stops the thread; unfinished transactions are left to the resolvers.
 * NULL is a no-op. */
void mds_xact_free(mds_xact *x);

/* Whether reqs[0..n) is a prepare (its last request is the transaction's
 * descriptor: an XT_F_SYS check of a decision row). */
bool mds_xact_is_prepare(const struct xt_req *reqs, size_t n);

/* Coordinator: reqs[0..n) (a client's atomic batch) touches rows owned by
 * other MDS. Runs the parents' times first (loose ops) and makes their
 * counts RMUs (an outbox row in the batch, the delta shown at the
 * parent's MDS: mds_outbox.c); prepares each other owner's part of the
 * rest, decides at the owner of its first op, answers, and finishes in
 * the background (or, when one MDS owns all of the rest, runs it there). Returns 0 (resps filled:
 * commit_group/epoch/epoch_site of the decider) or the first failing op's
 * -errno with *failed (nothing applied anywhere once the resolvers ran);
 * -EAGAIN for a conflict or a moved row (the client retries), -EXDEV when
 * the batch cannot be coordinated (the client runs it op by op). */
int mds_xact_run(mds_xact *x, const struct xt_req *reqs, size_t n, struct xt_resp *resps,
                 size_t *failed);

/* Whether a client's batch carries a parent's count whose row another MDS
 * owns (by this MDS's view): mds_xact_run makes it an RMU, and an atomic
 * attempt here first would only fail. */
bool mds_xact_count_apart(mds_xact *x, const struct xt_req *reqs, size_t n);

/* Participant: applies a prepare (mds_xact_is_prepare) with a pending row
 * per op, synced when asked. 0 or the first failing op's -errno
 * (-EAGAIN: a row is pending in another transaction). */
int mds_xact_prepare(mds_xact *x, const struct xt_req *reqs, size_t n, struct xt_resp *resps,
                     size_t *failed);

/* Settles the pending row pname of (fsid, table) now, if it is one held
 * here (its decision read, ABORT created when there is none, rolled back
 * or kept): what a synced lookup of a pending row asks (XT_F_SYS |
 * XT_F_SYNC), so a coordinator that aborted rolls its participants back
 * before it answers. 0 (settled, or nothing to settle), -EREMOTE (held
 * elsewhere: forward), -errno. */
int mds_xact_settle(mds_xact *x, uint32_t fsid, uint64_t table, const void *pname,
                    size_t len);

#ifdef __cplusplus
}
#endif
#endif /* MDS_XACT_H */
