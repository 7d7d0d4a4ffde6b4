/*
 * mds_metrics.c -- pom-mds's /metrics families, read from the counters
 * (relaxed atomics) and the cache's and group's info snapshots (a brief
 * lock each, no I/O).
 */
#include "mds_metrics.h"

#include <stdio.h>

void mds_metrics_collect(void *arg, xt_metrics_buf *b)
{
    struct mds_metrics_src *src = arg;
    char labels[64], name[128];
    if (!atomic_load_explicit(&src->ready, memory_order_acquire))
        return;

    xt_metrics_put_family(b, "pom_mds_op_duration_seconds", "histogram",
                          "Latency of MDS operations: requests (create, lookup, update, "
                          "delete, list, batch) and internal steps (sync, load, prepare, "
                          "commit, group, split).");
    for (unsigned i = 0; i < MDS_OP__COUNT; i++) {
        uint64_t cum[XT_METRICS_NLE], count, sum;
        mds_stats_cumulative(src->stats, (enum mds_op)i, xt_metrics_le_ns, XT_METRICS_NLE, cum,
                             &count, &sum);
        snprintf(labels, sizeof labels, "op=\"%s\"", mds_stats_op_name((enum mds_op)i));
        xt_metrics_put_hist_cum(b, "pom_mds_op_duration_seconds", labels, cum, count, sum);
    }
    xt_metrics_put_family(b, "pom_mds_op_errors_total", "counter",
                          "MDS operations that returned an error.");
    for (unsigned i = 0; i < MDS_OP__COUNT; i++) {
        snprintf(labels, sizeof labels, "op=\"%s\"", mds_stats_op_name((enum mds_op)i));
        xt_metrics_put_u64(b, "pom_mds_op_errors_total", labels,
                           mds_stats_errors(src->stats, (enum mds_op)i));
    }
    for (unsigned i = 0; i < MDS_CTR__COUNT; i++) {
        const char *ctr = mds_stats_ctr_name((enum mds_ctr)i);
        snprintf(name, sizeof name, "pom_mds_%s_total", ctr);
        xt_metrics_put_counter(b, name, mds_stats_ctr_help((enum mds_ctr)i),
                               mds_stats_counter(src->stats, (enum mds_ctr)i));
    }

    struct mds_cache_info ci;
    mds_cache_info(src->cache, &ci);
    xt_metrics_put_gauge(b, "pom_mds_cache_slices", "Slices in the cache (ready or loading).",
                         (double)ci.entries);
    xt_metrics_put_gauge(b, "pom_mds_cache_rows", "Rows of the cached slices.", (double)ci.rows);
    xt_metrics_put_gauge(b, "pom_mds_cache_bytes", "Memory the cached slices are charged.",
                         (double)ci.bytes);
    xt_metrics_put_gauge(b, "pom_mds_cache_bound_bytes", "The cache's bound (--mem-bound).",
                         (double)ci.bound);
    struct mds_group_info gi;
    mds_group_info(src->group, &gi);
    xt_metrics_put_gauge(b, "pom_mds_group_committed_generation",
                         "Every change of this generation or older is durable.",
                         (double)gi.committed_gen);
    xt_metrics_put_gauge(b, "pom_mds_group_dirty_bytes", "Bytes the open commit group holds.",
                         (double)gi.dirty_bytes);
    xt_rpc_metrics_put(b, "pom_mds", src->srv);
}
