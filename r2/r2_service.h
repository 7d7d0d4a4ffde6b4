/*
 * r2_service.h -- the R2 RPC service (xt_rpc_r2.h) over an r2_mgr: each
 * handler checks what came from the network (types, addresses, names,
 * counts) and calls the manager. Followers answer -EREMOTE (r2_mgr.h).
 */
#ifndef R2_SERVICE_H
#define R2_SERVICE_H

#include "r2_mgr.h"
#include "xt_rpc_r2.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Starts serving m with opts (copied). m must outlive the server, which is
 * stopped with xt_rpc_server_stop. Returns 0 or -errno (-EADDRINUSE...). */
int r2_service_start(r2_mgr *m, const struct xt_rpc_server_opts *opts, xt_rpc_server **out);

#ifdef __cplusplus
}
#endif
#endif /* R2_SERVICE_H */
