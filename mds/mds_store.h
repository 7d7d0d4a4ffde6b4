/*
 * mds_store.h -- how the MDS reaches its MDSLs: an ops struct called through
 * thin wrappers (STYLE: swappable backends). The daemon binds it to the
 * Storage Thrift service (pom.thrift); the tests bind it to real MDSL
 * engines in process on in-memory I/O (tests/common/mds_store_local.h),
 * which also injects faults.
 *
 * A participant is named by its site id (an MDSL of ring 1). Per site it is
 * a two-phase-commit participant and a slice loader:
 *
 *   (none) --prepare(txid, recs)--> PREPARED --commit(txid)--> COMMITTED
 *                                       \-------abort(txid)---> ABORTED
 *
 * Promises a participant must keep (mdsl_store.h promises the same):
 *  (1) prepare returns 0 only once its records are durable; prepared records
 *      are invisible to load until commit.
 *  (2) commit of a committed txid returns 0 (idempotent retry); commit of an
 *      unknown txid returns -ENOENT, of an aborted one -EINVAL.
 *  (3) abort of a prepared or aborted txid returns 0; of an unknown one
 *      -ENOENT; of a committed one -EINVAL (so an abort after an ambiguous
 *      commit error tells the coordinator which way it went).
 *  (4) list_prepared lists every prepared, undecided txid, also after a
 *      restart of the participant.
 *  (5) A committed transaction is all-or-nothing at that participant.
 * Any other negative errno (-ECONNRESET, -ETIMEDOUT, -EIO, ...) means "the
 * outcome of this call is unknown": the caller may retry.
 *
 * Records, loads and listings are the storage contract's types (xt_store.h,
 * shared with the Thrift glue and the MDSL engine): an IMAGE or DELTA
 * record carries the slice's xt_slice encoding (opaque here) tagged with
 * the slice's version (every commit of a slice writes version + 1; the
 * loader reports the version of the last record). The MDS writes IMAGE and
 * DELTA records only; XT_STORE_F_MOVED marks the empty image a move leaves
 * behind, XT_STORE_F_SYS a slice with system rows (listed: mds_reload.h),
 * XT_STORE_F_RESERVE (on every record of a transaction alike) one that
 * frees at least what it adds.
 */
#ifndef MDS_STORE_H
#define MDS_STORE_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xt_store.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mds_store_ops {
    /* REQUIRES: txid != 0, n >= 1. recs and their bytes are borrowed. */
    int (*prepare)(void *ctx, uint32_t site, uint64_t txid, const struct xt_store_rec *recs,
                   size_t n);
    int (*commit)(void *ctx, uint32_t site, uint64_t txid);
    int (*abort)(void *ctx, uint32_t site, uint64_t txid);
    /* -ENOENT when the slice has no record, -ESTALE when its newest image
     * is MOVED. On 0 *out is filled (caller frees with xt_store_load_free);
     * on error *out is zeroed. */
    int (*load)(void *ctx, uint32_t site, xt_slice_id id, struct xt_store_load *out);
    /* *txids: a new array the caller frees with xt_free (NULL when *n == 0). */
    int (*list_prepared)(void *ctx, uint32_t site, uint64_t **txids, size_t *n);
    /* The slices `site` stores, in the site's index order, after `cursor`
     * (cursor_len 0: from the start), at most max (>= 1) of them. On 0
     * *out is filled (xt_store_list_free), on error zeroed. Tombstones
     * are listed (moved). The store's error, -ENOMEM. */
    int (*list_slices)(void *ctx, uint32_t site, const void *cursor, uint32_t cursor_len,
                       uint32_t max, struct xt_store_list *out);
};

/* A bound backend. The ops and ctx must outlive every user of the handle. */
typedef struct mds_store {
    const struct mds_store_ops *ops;
    void *ctx;
} mds_store;

static inline int mds_store_prepare(const mds_store *s, uint32_t site, uint64_t txid,
                                    const struct xt_store_rec *recs, size_t n)
{
    assert(txid != 0 && n >= 1 && recs);
    return s->ops->prepare(s->ctx, site, txid, recs, n);
}
static inline int mds_store_commit(const mds_store *s, uint32_t site, uint64_t txid)
{
    return s->ops->commit(s->ctx, site, txid);
}
static inline int mds_store_abort(const mds_store *s, uint32_t site, uint64_t txid)
{
    return s->ops->abort(s->ctx, site, txid);
}
static inline int mds_store_load(const mds_store *s, uint32_t site, xt_slice_id id,
                                 struct xt_store_load *out)
{
    return s->ops->load(s->ctx, site, id, out);
}
static inline int mds_store_list_prepared(const mds_store *s, uint32_t site,
                                          uint64_t **txids, size_t *n)
{
    return s->ops->list_prepared(s->ctx, site, txids, n);
}

static inline int mds_store_list_slices(const mds_store *s, uint32_t site, const void *cursor,
                                        uint32_t cursor_len, uint32_t max,
                                        struct xt_store_list *out)
{
    return s->ops->list_slices(s->ctx, site, cursor, cursor_len, max, out);
}

/* Which MDSL site holds (fsid, table, slice) under one placement: ring 1
 * in the daemon, a fixed function in tests. A given (fn, arg) must answer
 * alike while in use; ring 1 changes by installing another one
 * (mds_place.h). Must be quick and must not block. */
typedef uint32_t (*mds_locate_fn)(void *arg, uint32_t fsid, uint64_t table, uint32_t slice);

/* At most this many MDSL hold a slice's records (docs/mdsl-replicas.md). */
#define MDS_REPLICAS_MAX 5u

/* The replica set of (fsid, table, slice) under the placement whose locate
 * argument is arg: the site the locate function answers first, then the
 * next distinct MDSL, at most max (>= 1) into sites[]. Returns how many.
 * Same rules as mds_locate_fn: quick, non-blocking, a pure function of arg. */
typedef uint32_t (*mds_replicas_fn)(void *arg, uint32_t fsid, uint64_t table, uint32_t slice,
                                    uint32_t max, uint32_t *sites);

#ifdef __cplusplus
}
#endif
#endif /* MDS_STORE_H */
