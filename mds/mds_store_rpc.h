/*
 * mds_store_rpc.h -- the mds_store backend of the daemon: each MDSL site
 * is reached through a connection pool of the Storage RPC service.
 *
 * Sites are learned from the R2 view (ring 1 members and their addresses)
 * or given on the command line; mds_store_rpc_set_site may be called at any
 * time from any thread, also while calls are in flight.
 */
#ifndef MDS_STORE_RPC_H
#define MDS_STORE_RPC_H

#include "mds_store.h"

typedef struct mds_store_rpc mds_store_rpc;

/* A backend with no sites yet; call_timeout_ms 0: 10 s. Free with
 * mds_store_rpc_free after every user of its mds_store is gone. */
int mds_store_rpc_new(int call_timeout_ms, mds_store_rpc **out);
void mds_store_rpc_free(mds_store_rpc *r);
/* The mds_store handle (valid while r lives). */
mds_store mds_store_rpc_handle(mds_store_rpc *r);
/* Names (or renames) site `site` as "host:port" (copied). 0, -EINVAL, -ENOMEM. */
int mds_store_rpc_set_site(mds_store_rpc *r, uint32_t site, const char *addr);

#endif
