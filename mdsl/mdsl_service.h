/*
 * mdsl_service.h -- the Storage service of pom-mdsl: binds the RPC handler
 * ops (xt_rpc_mdsl.h) to one mdsl_store, counting each operation and its
 * latency for /metrics (docs/metrics.md "pom-mdsl").
 */
#ifndef MDSL_SERVICE_H
#define MDSL_SERVICE_H

#include "mdsl_catchup.h"
#include "mdsl_blob.h"
#include "mdsl_store.h"
#include "xt_metrics.h"
#include "xt_rpc_mdsl.h"

#include <stdatomic.h>

/* The Storage operations, timed from the handler's call to its return. */
enum mdsl_svc_op {
    MDSL_SVC_PREPARE = 0,
    MDSL_SVC_COMMIT,
    MDSL_SVC_ABORT,
    MDSL_SVC_LOAD,
    MDSL_SVC_READ_COLUMN,
    MDSL_SVC_SET_MD,
    MDSL_SVC_GET_MD,
    MDSL_SVC_STAT,
    MDSL_SVC_LIST,
    MDSL_SVC_TRACT_PUT,
    MDSL_SVC_TRACT_GET,
    MDSL_SVC_TRACT_REMOVE,
    MDSL_SVC_TRACT_LIST,
    MDSL_SVC_TRACT_TOUCH,
    MDSL_SVC__COUNT
};

/* The handlers' context: the store and what they count (relaxed atomics;
 * zeroed before the start). */
struct mdsl_service {
    mdsl_store *store;                              /* borrowed */
    mdsl_catchup *catchup;                          /* borrowed, may be NULL; set
                                                       before the start */
    mdsl_blob *blob;      /* borrowed; NULL: the tract calls answer -ENOTSUP */
    struct xt_metrics_hist op[MDSL_SVC__COUNT];     /* latency */
    _Atomic uint64_t errors[MDSL_SVC__COUNT];       /* calls that returned < 0 */
};

/* "prepare", "commit", ... (the /metrics label op=). */
extern const char *const mdsl_service_op_names[MDSL_SVC__COUNT];

/* Serves svc->store with opts; svc (borrowed, its counters zeroed) and the
 * store must outlive the server. *out is stopped with xt_rpc_server_stop.
 * Returns 0 or -errno. */
int mdsl_service_start(struct mdsl_service *svc, const struct xt_rpc_server_opts *opts,
                       xt_rpc_server **out);

#endif
