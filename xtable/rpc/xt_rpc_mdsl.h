/*
 * xt_rpc_mdsl.h -- the Storage service of pom.thrift in C: the calls an MDS
 * (or a tool) makes to an MDSL, and the handler ops a pom-mdsl serves with.
 *
 * Records, loads and listings are the storage contract's types (xt_store.h),
 * which the MDS and the MDSL engine speak too: no reshaping on either side.
 */
#ifndef XT_RPC_MDSL_H
#define XT_RPC_MDSL_H

#include "xt_rpc.h"
#include "xt_store.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct xt_store_stat {
    uint64_t tables, segments, bytes, live_bytes, commits, aborts;
    uint64_t gc_freed_segments, corrupt_records;
    /* GC and space back */
    uint64_t gc_passes, gc_moved_bytes, gc_freed_bytes;
    uint64_t dropped_folders, dropped_bytes, rolled_segments, sweeps;
    uint64_t sweep_owed;   /* ring-1 seq of a sweep still owed, 0 none */
    int failed;            /* sticky write error, or 0 */
    int64_t under_replicated; /* catch-up: -1 not counted (yet, or no replicas) */
    uint64_t pulled_slices, pulled_bytes;
    size_t nprepared;
    uint64_t *prepared;    /* xt_malloc'd; caller frees with xt_free */
};

/* ---- client calls: 0 or -errno (xt_rpc.h invariant 1) ------------------ */

int xt_mdsl_prepare(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t txid,
                    const struct xt_store_rec *recs, size_t n);
int xt_mdsl_commit(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t txid);
int xt_mdsl_abort(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t txid);
/* *out: free with xt_store_load_free. -ENOENT if the slice has nothing,
 * -ESTALE if it moved to another MDSL (its newest image is MOVED). */
int xt_mdsl_load_slice(xt_rpc_pool *p, const xt_rpc_call *call, xt_slice_id id,
                       struct xt_store_load *out);
/* *data: caller frees with xt_free. */
int xt_mdsl_read_column(xt_rpc_pool *p, const xt_rpc_call *call, xt_slice_id id,
                        uint64_t key, uint32_t group, void **data, uint32_t *len,
                        uint64_t *version);
int xt_mdsl_set_md(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t table,
                   const void *md, uint32_t len);
/* *md: caller frees with xt_free. -ENOENT if none. */
int xt_mdsl_get_md(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t table,
                   void **md, uint32_t *len);
/* st->prepared: caller frees with xt_free. */
int xt_mdsl_stat(xt_rpc_pool *p, const xt_rpc_call *call, struct xt_store_stat *st);
/* Up to `max` stored slices after `cursor` (borrowed; cursor_len 0: from the
 * first), in index order; the MDSL caps max. *out: xt_store_list_free. Walk
 * by passing out->cursor back until out->end. -EINVAL for max 0 or over
 * INT32_MAX, or a bad cursor; -EPROTO from a peer without the call. */
int xt_mdsl_list_slices(xt_rpc_pool *p, const xt_rpc_call *call, const void *cursor,
                        uint32_t cursor_len, uint32_t max, struct xt_store_list *out);

/* Tracts of the mdsl blob backend (mdsl/mdsl_blob.h): put stores the whole
 * tract (durable when 0); get answers its bytes [off, off + want) (want 0:
 * to its end; fewer where the tract ends) in *data (caller frees with
 * xt_free; NULL when *len is 0), -ENOENT, -EBADMSG (checksum mismatch: the
 * MDSL checks the whole tract whatever the range);
 * remove drops tracts first..end-1 of the set (end 0: all from first). */
int xt_mdsl_tract_put(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t set,
                      uint32_t tract, const void *data, uint32_t len);
int xt_mdsl_tract_get(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t set,
                      uint32_t tract, uint32_t off, uint32_t want, void **data, uint32_t *len);
int xt_mdsl_tract_remove(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid,
                         uint64_t set, uint32_t first, uint32_t end);
/* A page of about `max` tract sets of fsid the MDSL holds, from `cookie`
 * (0: the first; else out->cookie of the page before) until out->end; with
 * `one`, the set `set` alone (-ENOENT: none there). out->sets: caller frees
 * with xt_free. -EINVAL for max 0 or over INT32_MAX; -EPROTO from a peer
 * without the call. */
int xt_mdsl_tract_list(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t cookie,
                       uint32_t max, bool one, uint64_t set, struct xt_tract_list *out);
/* Starts the age of set again on the MDSL (0 also when it holds none). */
int xt_mdsl_tract_touch(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t set);

/* ---- server ------------------------------------------------------------ */

/* Handler ops; each returns 0 or -errno, which the caller receives. Output
 * memory the handler allocates (xt_malloc) is freed by the glue. */
struct xt_mdsl_ops {
    struct xt_rpc_common_ops common;
    int (*prepare)(void *ctx, const xt_rpc_ctx *rc, uint64_t txid,
                   const struct xt_store_rec *recs, size_t n);
    int (*commit)(void *ctx, const xt_rpc_ctx *rc, uint64_t txid);
    int (*abort)(void *ctx, const xt_rpc_ctx *rc, uint64_t txid);
    int (*load_slice)(void *ctx, const xt_rpc_ctx *rc, xt_slice_id id,
                      struct xt_store_load *out);
    int (*read_column)(void *ctx, const xt_rpc_ctx *rc, xt_slice_id id, uint64_t key,
                       uint32_t group, void **data, uint32_t *len, uint64_t *version);
    int (*set_md)(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t table,
                  const void *md, uint32_t len);
    int (*get_md)(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t table,
                  void **md, uint32_t *len);
    int (*stat)(void *ctx, const xt_rpc_ctx *rc, struct xt_store_stat *st);
    /* out is zeroed by the glue; the handler fills it (slices xt_malloc'd). */
    int (*list_slices)(void *ctx, const xt_rpc_ctx *rc, const void *cursor,
                       uint32_t cursor_len, uint32_t max, struct xt_store_list *out);
    int (*tract_put)(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t set,
                     uint32_t tract, const void *data, uint32_t len);
    /* *data: xt_malloc'd by the handler (NULL when *len is 0): the bytes
     * [off, off + want) of the tract (want 0: to its end). */
    int (*tract_get)(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t set,
                     uint32_t tract, uint32_t off, uint32_t want, void **data, uint32_t *len);
    int (*tract_remove)(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t set,
                        uint32_t first, uint32_t end);
    /* out is zeroed by the glue; the handler fills it (sets xt_malloc'd).
     * one: the set `set` alone. */
    int (*tract_list)(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t cookie,
                      uint32_t max, bool one, uint64_t set, struct xt_tract_list *out);
    int (*tract_touch)(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t set);
};

/* Serves the Storage service; see xt_rpc_serve_common for the contract. */
int xt_rpc_serve_mdsl(const struct xt_rpc_server_opts *opts, const struct xt_mdsl_ops *ops,
                      void *ctx, xt_rpc_server **out);

#ifdef __cplusplus
}
#endif
#endif /* XT_RPC_MDSL_H */
