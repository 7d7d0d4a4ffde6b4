/*
 * mds_stats.h -- counters and latency histograms of one MDS, per operation.
 *
 * Recording is lock-free (relaxed atomics), so every request thread and the
 * commit thread record without contention beyond the cache line; readers
 * (heartbeats, `pomctl status`, the tests) get a summary that is exact for
 * counts and within one histogram bucket for percentiles.
 *
 * Histogram: log-linear buckets. Values 0..15 ns have a bucket each; above,
 * every power of two [2^e, 2^(e+1)) is cut into MDS_STATS_SUB (16) equal
 * buckets, so a bucket is at most 1/16 of its lower bound wide and a
 * percentile is reported within 6.25% of the true sample value (the
 * midpoint of the bucket, clamped to the observed min/max).
 *
 * Invariants:
 *  (1) count(op) == sum of the op's buckets once recording threads are quiet;
 *      while they run, a summary may lag by the samples in flight.
 *  (2) Percentile q is defined on the samples as in the sorted model: the
 *      value of rank ceil(q * n) (1-based, at least 1); the reported value
 *      lies in the same bucket as that sample.
 */
#ifndef MDS_STATS_H
#define MDS_STATS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Operations with a latency histogram. */
enum mds_op {
    MDS_OP_CREATE = 0,
    MDS_OP_LOOKUP,
    MDS_OP_UPDATE,
    MDS_OP_DELETE,
    MDS_OP_LIST,
    MDS_OP_SYNC,        /* mds_group_sync: wait for a commit */
    MDS_OP_LOAD,        /* a slice load from MDSL (image + deltas) */
    MDS_OP_PREPARE,     /* one prepare call to one participant */
    MDS_OP_COMMIT,      /* one commit call to one participant */
    MDS_OP_GROUP,       /* a whole group: close -> committed/aborted */
    MDS_OP_SPLIT,
    MDS_OP_BATCH,       /* one XT_BATCH_ATOMIC batch (all its rows) */
    MDS_OP__COUNT
};

/* Plain counters. */
enum mds_ctr {
    MDS_CTR_GROUPS_COMMITTED = 0,
    MDS_CTR_GROUPS_ABORTED,
    MDS_CTR_GROUPS_EMPTY,     /* closed with nothing to write */
    MDS_CTR_RECORDS_IMAGE,
    MDS_CTR_RECORDS_DELTA,
    MDS_CTR_BYTES_IMAGE,
    MDS_CTR_BYTES_DELTA,
    MDS_CTR_SYNC_CALLS,
    MDS_CTR_EARLY_CLOSES,     /* closed by sync or the dirty-bytes bound */
    MDS_CTR_LAZY_SNAPSHOTS,   /* copy-on-write taken by a next-group writer */
    MDS_CTR_CACHE_HITS,
    MDS_CTR_CACHE_MISSES,
    MDS_CTR_CACHE_LOAD_WAITS, /* a getter waited for another's load */
    MDS_CTR_CACHE_EVICTIONS,
    MDS_CTR_CACHE_PRESSURE,   /* eviction asked the group for a commit */
    MDS_CTR_RECOVER_COMMITS,  /* in-doubt txids committed by recovery */
    MDS_CTR_RECOVER_ABORTS,
    /* many MDS (docs/mds-dist.md) */
    MDS_CTR_REQUESTS,         /* xTable requests received (ops, lists) */
    MDS_CTR_FORWARDS,         /* requests this MDS forwarded to another (not
                                 the routed ops of its own transactions) */
    MDS_CTR_FORWARDS_LOOPED,  /* requests that arrived with hops >= 2 */
    MDS_CTR_FORWARD_ERRORS,   /* forwards that failed (transport, -ELOOP) */
    MDS_CTR_REMOTE_ANSWERS,   /* answered here for a forwarding MDS (hops >= 1) */
    MDS_CTR_GOSSIP_ROUNDS,    /* gossip messages sent */
    MDS_CTR_GOSSIP_SENT_BITS, /* of them, rounds the peer learnt something from */
    MDS_CTR_GOSSIP_NEW_BITS,  /* bits this MDS learnt from gossip */
    MDS_CTR_HANDOVERS,        /* split children handed to their owner */
    MDS_CTR_BITS_HOME,        /* split bits sent to a table's home */
    MDS_CTR_RELEASES,         /* slices released here to their new owner */
    MDS_CTR_RELEASE_WAITS,    /* loads told -EAGAIN: an old holder not done */
    MDS_CTR_SLICES_MOVED,     /* slices let go by the sweep after a ring change */
    MDS_CTR_XACT_COMMITS,     /* cross-MDS batches committed (coordinator) */
    MDS_CTR_XACT_ABORTS,      /* cross-MDS batches aborted after a prepare */
    MDS_CTR_XACT_PREPARES,    /* prepares applied here (participant) */
    MDS_CTR_XACT_RESOLVED,    /* pending rows settled by the resolver */
    MDS_CTR_XACT_ROLLBACKS,   /* of them, rolled back (ABORT) */
    MDS_CTR_XACT_ABORTS_DROPPED, /* ABORT rows the coordinator removed again */
    MDS_CTR_XACT_ABORTS_GC,   /* ABORT rows of gone coordinator incarnations removed */
    MDS_CTR_XACT_SPLITS,      /* batches this MDS split because their parents'
                                 times sat elsewhere (the client's view had
                                 them together: stale, or no client split);
                                 a batch with a count is not counted (the
                                 client leaves counts to the MDS: RMU) */
    MDS_CTR_SLICE_ABSENT,     /* loads of a slice the bitmap names that its
                                 MDSL lacks (-EAGAIN: a split not committed
                                 yet; one that never ends is a lost split) */
    MDS_CTR_MOVES,            /* ring-1 moves committed (image + tombstone) */
    MDS_CTR_MOVE_BYTES,       /* image bytes of those moves */
    MDS_CTR_MOVED_WAITS,      /* loads told -EAGAIN: only a MOVED tombstone */
    MDS_CTR_MOVE_LOADS,       /* slices the mover loaded to move (not cached) */
    MDS_CTR_WALK_PASSES,      /* full passes of the mover over the losing MDSL */
    MDS_CTR_MOVE_ABORTS,      /* ring-1 moves in a group that aborted (retried
                                 by a later group: each try counts) */
    MDS_CTR_RMU_QUEUED,       /* RMU outbox rows written (a parent's count elsewhere) */
    MDS_CTR_RMU_DELIVERED,    /* outbox rows delivered (their delta stored) */
    MDS_CTR_RMU_DROPPED,      /* outbox rows dropped: their parent was gone */
    MDS_CTR_SYS_RELOADS,      /* slices with system rows loaded by mds_reload */
    MDS_CTR_RELOAD_PASSES,    /* its passes over every MDSL's listing */
    MDS_CTR_RELOAD_ERRORS,    /* its listing or load failures */
    MDS_CTR_FOLDS,            /* idle slices given a fold image (mds_group.c) */
    MDS_CTR_REPLICA_FALLBACKS, /* loads answered by a later replica: an earlier
                                  one lacked or damaged the slice's records */
    MDS_CTR_XACT_OP_BY_OP,    /* client batches answered -EXDEV (a row too big
                                 for a pending row's pre-image): the client
                                 runs them op by op, not atomically */
    MDS_CTR__COUNT
};

#define MDS_STATS_SUB_BITS 4
#define MDS_STATS_SUB      (1u << MDS_STATS_SUB_BITS)
#define MDS_STATS_BUCKETS  (MDS_STATS_SUB + (64 - MDS_STATS_SUB_BITS) * MDS_STATS_SUB)

typedef struct mds_stats mds_stats;

struct mds_stats_summary {
    uint64_t count;   /* samples */
    uint64_t errors;  /* samples recorded with rc < 0 */
    uint64_t mean_ns; /* exact: sum / count */
    uint64_t min_ns, max_ns;
    uint64_t p50_ns, p90_ns, p99_ns;
};

/* A zeroed set of statistics. Caller frees with mds_stats_free. NULL on ENOMEM. */
mds_stats *mds_stats_new(void);
void mds_stats_free(mds_stats *st); /* NULL is a no-op */

/* Record one sample of op taking `ns`; rc < 0 also counts an error.
 * NULL st is a no-op, so modules may run without statistics. */
void mds_stats_record(mds_stats *st, enum mds_op op, uint64_t ns, int rc);
void mds_stats_add(mds_stats *st, enum mds_ctr ctr, uint64_t n);
uint64_t mds_stats_counter(const mds_stats *st, enum mds_ctr ctr);

/* Bucket of a value and the [lo, hi] range (inclusive) a bucket covers:
 * exposed for the tests. */
unsigned mds_stats_bucket(uint64_t v);
void mds_stats_bucket_range(unsigned b, uint64_t *lo, uint64_t *hi);

/* Value at quantile q (0 < q <= 1) of op's samples; 0 when there are none. */
uint64_t mds_stats_percentile(const mds_stats *st, enum mds_op op, double q);
void mds_stats_summary(const mds_stats *st, enum mds_op op, struct mds_stats_summary *out);

const char *mds_stats_op_name(enum mds_op op);
/* The counter's name, as the SIGHUP report and /metrics (pom_mds_NAME_total)
 * spell it. */
const char *mds_stats_ctr_name(enum mds_ctr ctr);
/* Its one-line description (the /metrics HELP). */
const char *mds_stats_ctr_help(enum mds_ctr ctr);

/* op's histogram on the upper bounds le[0..n) (ascending, ns): cum[i] the
 * samples whose bucket lies wholly at or under le[i] (so within one bucket,
 * 6.25%, of the exact count), *count and *sum_ns of every sample. For
 * /metrics, whose buckets are fixed decimal bounds. */
void mds_stats_cumulative(const mds_stats *st, enum mds_op op, const uint64_t *le, size_t n,
                          uint64_t *cum, uint64_t *count, uint64_t *sum_ns);
/* Samples of op recorded with rc < 0. */
uint64_t mds_stats_errors(const mds_stats *st, enum mds_op op);

/* Human text (one line per op with samples, then the non-zero counters) or
 * JSON ({"ops":{name:{count,errors,mean_ns,p50_ns,p90_ns,p99_ns,max_ns}},
 * "counters":{name:n}}) into buf[0..cap). Returns the length the full dump
 * needs, without the NUL (snprintf's contract: truncated when >= cap). */
size_t mds_stats_dump_text(const mds_stats *st, char *buf, size_t cap);
size_t mds_stats_dump_json(const mds_stats *st, char *buf, size_t cap);

/* The non-empty buckets of op as "LO:COUNT" pairs, LO the bucket's lower
 * bound in ns, separated by single spaces, ascending, into buf[0..cap):
 * enough for a reader to take the histogram of an interval as the
 * difference of two dumps (bench_dist's windows). Returns the length the
 * full dump needs, without the NUL (snprintf's contract). */
size_t mds_stats_dump_hist(const mds_stats *st, enum mds_op op, char *buf, size_t cap);

/* Zero everything (not atomic with respect to concurrent recorders). */
void mds_stats_reset(mds_stats *st);

#ifdef __cplusplus
}
#endif
#endif /* MDS_STATS_H */
