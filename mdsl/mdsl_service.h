/*
 * mdsl_service.h -- the Storage service of pom-mdsl: binds the RPC handler
 * ops (xt_rpc_mdsl.h) to one mdsl_store.
 */
#ifndef MDSL_SERVICE_H
#define MDSL_SERVICE_H

#include "mdsl_store.h"
#include "xt_rpc_mdsl.h"

/* Serves `store` (borrowed; must outlive the server) with opts. *out is
 * stopped with xt_rpc_server_stop. Returns 0 or -errno. */
int mdsl_service_start(mdsl_store *store, const struct xt_rpc_server_opts *opts,
                       xt_rpc_server **out);

#endif
