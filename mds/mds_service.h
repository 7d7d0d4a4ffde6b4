/*
 * mds_service.h -- the xTable RPC service of pom-mds: binds the handler
 * ops of xt_rpc_mds.h to an mds_table and its commit group.
 */
#ifndef MDS_SERVICE_H
#define MDS_SERVICE_H

#include "mds_group.h"
#include "mds_route.h"
#include "mds_stats.h"
#include "mds_table.h"
#include "mds_soft.h"
#include "mds_xact.h"
#include "xt_rpc_mds.h"

struct mds_service {
    mds_table *table;      /* borrowed */
    mds_group *group;      /* borrowed */
    mds_stats *stats;      /* borrowed, may be NULL */
    mds_route *route;      /* borrowed; NULL: the only MDS (no forwarding) */
    mds_xact *xact;        /* borrowed; NULL: no transactions across MDS
                              (such a batch answers -EXDEV) */
    mds_soft *soft;        /* borrowed; RMU deltas shown in lookups (mds_soft.h);
                              NULL: XT_F_SOFT updates apply their times only */
    unsigned sync_timeout_ms; /* bound of a sync; 0: 60000 */
    uint32_t epoch;        /* set by mds_service_start: stamped on replies */
};

/* Serves svc (borrowed; must outlive the server and svc->xact's thread);
 * binds svc->xact to the service's handlers. 0 or -errno. */
int mds_service_start(struct mds_service *svc, const struct xt_rpc_server_opts *opts,
                      xt_rpc_server **out);

#endif
