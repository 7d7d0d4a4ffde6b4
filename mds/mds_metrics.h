/*
 * mds_metrics.h -- the families of pom-mds's /metrics (docs/metrics.md
 * "pom-mds"): its per-operation histograms and counters (mds_stats, whose
 * names the SIGHUP report shares), the slice cache, the commit group and
 * the RPC server.
 */
#ifndef MDS_METRICS_H
#define MDS_METRICS_H

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_stats.h"

#include "xt_metrics.h"
#include "xt_rpc.h"

#include <stdatomic.h>
#include <stdbool.h>

/* What a scrape reads; every pointer outlives the metrics server. The
 * server starts before the rest exists: the pointers are set, then ready
 * (release); a scrape before that is empty. */
struct mds_metrics_src {
    mds_stats *stats;
    mds_cache *cache;
    mds_group *group;
    xt_rpc_server *srv;
    _Atomic bool ready;
};

/* xt_metrics_collect_fn; arg is a struct mds_metrics_src. */
void mds_metrics_collect(void *arg, xt_metrics_buf *b);

#endif /* MDS_METRICS_H */
