/*
 * mds_store_mem.h -- an in-memory mds_store: any number of participant
 * sites in one process, for unit tests of the cache and the commit groups.
 *
 * It keeps the promises of mds_store.h (prepared records invisible until
 * commit, idempotent commit, abort/commit answers that reveal the outcome)
 * and is stricter than a real MDSL where that finds coordinator bugs:
 * prepare refuses (-EINVAL) a record whose version is not above the slice's
 * committed version, a delta of a slice without an image, and a txid that
 * was seen before. Committed records follow the MDSL index rules, MOVED
 * tombstones included (docs/mdsl-scale.md "Tombstones"): a load of a slice
 * whose head is a tombstone answers -ESTALE, a prepared delta on one is
 * refused -ESTALE, a newer image revives the slice.
 *
 * Faults, for the tests:
 *  - mds_store_mem_fail: countdown injection per site and operation (succeed
 *    `after` times, then fail `times` times with `err`), optionally after
 *    applying the call (an ambiguous error: the work was done, the reply lost).
 *  - mds_store_mem_sever: the coordinator dies. After `after` more calls
 *    (all sites), every call fails with -ECONNRESET and has no effect, until
 *    disarmed: a SIGKILL of the MDS between any two of its store calls.
 *  - mds_store_mem_crash: a participant restarts. Committed data survives;
 *    prepared-undecided transactions survive too (a real MDSL makes them
 *    durable) unless lose_prepared, which models a participant that had not
 *    yet made its prepare durable: they vanish, and a later commit of them
 *    answers -ENOENT.
 *
 *  - mds_store_mem_full: a site whose disk is down to the MDSL's reserve
 *    (docs/format-mdsl.md "A full disk"): a prepare answers -ENOSPC unless
 *    every record carries `reserve`.
 *
 * Thread-safe: one mutex around everything.
 */
#ifndef MDS_STORE_MEM_H
#define MDS_STORE_MEM_H

#include <stdbool.h>
#include <stdint.h>

#include "mds_store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mds_store_mem mds_store_mem;

/* Operation bits for fault injection. */
#define MDS_MEM_PREPARE 0x01u
#define MDS_MEM_COMMIT  0x02u
#define MDS_MEM_ABORT   0x04u
#define MDS_MEM_LOAD    0x08u
#define MDS_MEM_LIST    0x10u
#define MDS_MEM_ALL     0x1fu

/* NULL on ENOMEM. Free with mds_store_mem_free once no mds_store bound to
 * it is used any more. */
mds_store_mem *mds_store_mem_new(void);
void mds_store_mem_free(mds_store_mem *m);
/* Fill *out with the ops and m as context. */
void mds_store_mem_bind(mds_store_mem *m, mds_store *out);

/* Arm (times != 0) or disarm (times == 0) the fault of `site`: the calls in
 * `ops_mask` succeed `after` more times, then fail `times` times (-1:
 * forever) with `err` (negative). With after_apply, prepare/commit/abort do
 * their work before failing. One rule per site; arming replaces it. */
void mds_store_mem_fail(mds_store_mem *m, uint32_t site, unsigned ops_mask, long after,
                        long times, int err, bool after_apply);
/* after >= 0 arms, -1 disarms (see the file comment). */
void mds_store_mem_sever(mds_store_mem *m, long after);
void mds_store_mem_crash(mds_store_mem *m, uint32_t site, bool lose_prepared);
/* Mark `site`'s disk full (down to the reserve) or not. */
void mds_store_mem_full(mds_store_mem *m, uint32_t site, bool full);

struct mds_store_mem_counts {
    uint64_t prepares, commits, aborts, loads, lists; /* calls that succeeded */
    uint64_t failed;                                  /* injected failures */
    uint64_t prepared_now;                            /* undecided txids */
    uint64_t slices;                                  /* slices with data */
};
/* Counts of one site (zeros for a site never used). */
void mds_store_mem_counts(mds_store_mem *m, uint32_t site, struct mds_store_mem_counts *out);

/* What a site stores of one slice (the MDSL index's `S` key). */
struct mds_store_mem_slice {
    uint32_t fsid, slice;
    uint64_t table;
    uint64_t version; /* of the last committed record */
    bool moved;       /* the head is a MOVED tombstone */
    bool sys;         /* the last record's `sys` */
};
/* Every slice `site` holds a committed record of, in no order: *out a new
 * array (xt_free; NULL when *n is 0). -ENOMEM. No fault injection. */
int mds_store_mem_slices(mds_store_mem *m, uint32_t site, struct mds_store_mem_slice **out,
                         size_t *n);

#ifdef __cplusplus
}
#endif
#endif /* MDS_STORE_MEM_H */
