/*
 * r2_service.h -- the R2 RPC service (xt_rpc_r2.h) over an r2_mgr: each
 * handler checks what came from the network (types, addresses, names,
 * counts) and calls the manager. Followers answer -EREMOTE (r2_mgr.h).
 */
#ifndef R2_SERVICE_H
#define R2_SERVICE_H

#include "r2_mgr.h"
#include "xt_metrics.h"
#include "xt_rpc_r2.h"

#include <stdatomic.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The R2 requests, timed from the handler's call to its return (ping,
 * answered by the glue, is not among them). */
enum r2_svc_request {
    R2_SVC_REGISTER = 0,
    R2_SVC_HEARTBEAT,
    R2_SVC_GET_VIEW,
    R2_SVC_FS_CREATE,
    R2_SVC_FS_LIST,
    R2_SVC_FS_DROP,
    R2_SVC_FS_ROTATE_KEY,
    R2_SVC_FS_QUOTA,
    R2_SVC_FS_SET_USAGE,
    R2_SVC_SITE_DRAIN,
    R2_SVC_SITE_REMOVE,
    R2_SVC_SITE_LEAVE,
    R2_SVC_ALLOC_UUIDS,
    R2_SVC__COUNT
};

/* The handlers' context: the manager and what they count (relaxed atomics;
 * zeroed before the start). */
struct r2_service {
    r2_mgr *mgr;                                /* borrowed */
    struct xt_metrics_hist req[R2_SVC__COUNT];  /* latency */
    _Atomic uint64_t errors[R2_SVC__COUNT];     /* requests answered < 0 */
};

/* "register", "heartbeat", ... (the /metrics label request=). */
extern const char *const r2_service_request_names[R2_SVC__COUNT];

/* Starts serving svc->mgr with opts (copied). svc (borrowed, its counters
 * zeroed) and the manager must outlive the server, which is stopped with
 * xt_rpc_server_stop. Returns 0 or -errno (-EADDRINUSE...). */
int r2_service_start(struct r2_service *svc, const struct xt_rpc_server_opts *opts,
                     xt_rpc_server **out);

#ifdef __cplusplus
}
#endif
#endif /* R2_SERVICE_H */
