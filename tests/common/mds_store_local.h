/*
 * mds_store_local.h -- an mds_store whose participants are real MDSL
 * engines (mdsl_store.h) in this process, each over the in-memory I/O
 * backend (mdsl_io_mem, LevelDB's memenv idea: swap the I/O, keep the
 * engine). The MDS unit tests run their commit groups, loads and listings
 * against it, so they check the MDS against the MDSL's own commit rules.
 *
 * A site is any uint32_t; its engine opens at its first use, with its
 * LevelDB index in a folder under one temporary directory (removed by
 * mds_store_local_free).
 *
 * Faults, for the tests (the engine itself is never changed):
 *  - mds_store_local_fail: countdown injection per site and operation
 *    (succeed `after` times, then fail `times` times with `err`),
 *    optionally after the engine did the work (an ambiguous error: the work
 *    was done, the reply lost).
 *  - mds_store_local_sever: the coordinator dies. After `after` more calls
 *    (all sites), every call fails with -ECONNRESET and has no effect,
 *    until disarmed: a SIGKILL of the MDS between any two of its calls.
 *  - mds_store_local_crash: a participant restarts: its engine is closed
 *    and opened again over the same in-memory files (recovery runs).
 *  - mds_store_local_wipe: a participant loses its disk: its engine is
 *    closed, its files and index removed, and it opens again empty (an
 *    MDSL restarted on a new disk with its old site id).
 *  - mds_store_local_full: the site's device is down to the MDSL's space
 *    reserve (docs/format-mdsl.md "A full disk"): the engine answers a
 *    prepare -ENOSPC unless every record carries XT_STORE_F_RESERVE.
 *
 * Thread-safe: the calls of the engines run without the wrapper's lock;
 * a crash waits for the calls in flight.
 */
#ifndef MDS_STORE_LOCAL_H
#define MDS_STORE_LOCAL_H

#include <stdbool.h>
#include <stdint.h>

#include "mds_store.h"

typedef struct mds_store_local mds_store_local;

/* Operation bits for fault injection. */
#define MDS_LOCAL_PREPARE 0x01u
#define MDS_LOCAL_COMMIT  0x02u
#define MDS_LOCAL_ABORT   0x04u
#define MDS_LOCAL_LOAD    0x08u
#define MDS_LOCAL_LIST    0x10u

/* NULL on failure (logged). Free with mds_store_local_free once no
 * mds_store bound to it is used any more. */
mds_store_local *mds_store_local_new(void);
void mds_store_local_free(mds_store_local *m);
/* Fill *out with the ops and m as context. */
void mds_store_local_bind(mds_store_local *m, mds_store *out);

/* Arm (times != 0) or disarm (times == 0) the fault of `site`: the calls in
 * `ops_mask` succeed `after` more times, then fail `times` times (-1:
 * forever) with `err` (negative). With after_apply, prepare/commit/abort do
 * their work before failing. One rule per site; arming replaces it. */
void mds_store_local_fail(mds_store_local *m, uint32_t site, unsigned ops_mask, long after,
                          long times, int err, bool after_apply);
/* after >= 0 arms, -1 disarms (see the file comment). */
void mds_store_local_sever(mds_store_local *m, long after);
/* Restart `site`'s engine (no-op for a site never used). 0 or -errno. */
int mds_store_local_crash(mds_store_local *m, uint32_t site);
/* `site` loses its disk and restarts empty (no-op for a site never used).
 * 0 or -errno. */
int mds_store_local_wipe(mds_store_local *m, uint32_t site);
/* Bring `site`'s device down to its reserve, or give it room again. */
void mds_store_local_full(mds_store_local *m, uint32_t site, bool full);

struct mds_store_local_counts {
    uint64_t prepares, commits, aborts, loads, lists; /* calls that succeeded */
    uint64_t failed;                                  /* injected failures */
    uint64_t prepared_now;                            /* undecided txids */
    uint64_t slices;                                  /* slices stored */
};
/* Counts of one site (zeros for a site never used). */
void mds_store_local_counts(mds_store_local *m, uint32_t site,
                            struct mds_store_local_counts *out);

/* Every slice `site` stores (tombstones included), in index order: *out a
 * new array (xt_free; NULL when *n is 0). No fault injection. -ENOMEM or
 * the engine's error. */
int mds_store_local_slices(mds_store_local *m, uint32_t site, struct xt_store_slice **out,
                           size_t *n);

#endif /* MDS_STORE_LOCAL_H */
