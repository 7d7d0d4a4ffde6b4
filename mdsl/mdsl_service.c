/*
 * mdsl_service.c -- Storage RPC handlers over mdsl_store.
 *
 * The handlers validate what arrives from the network before the store
 * sees it (record types, sizes, txid 0), so that a malformed request is an
 * -EINVAL to its sender and never an assertion in the engine. Records pass
 * through without copies: xt_store_rec and mdsl_rec carry the same fields.
 */
#include "mdsl_service.h"

#include "xt_common.h"

#include <string.h>

_Static_assert(XT_STORE_F_TOMBSTONE == MDSL_F_TOMBSTONE && XT_STORE_F_MOVED == MDSL_F_MOVED &&
                   XT_STORE_F_SYS == MDSL_F_SYS && XT_STORE_F_RESERVE == MDSL_F_RESERVE,
               "record flags pass through unchanged");

/* Largest record accepted from the network. The MDS writes no COLUMN
 * records yet: inline file bytes ride in slice images, which it keeps
 * far under this by splitting slices past --split-bytes (32 MiB). */
#define MDSL_SVC_MAX_REC (256u << 20)

static int svc_prepare(void *ctx, const xt_rpc_ctx *rc, uint64_t txid,
                       const struct xt_store_rec *recs, size_t n)
{
    (void)rc;
    if (txid == 0 || n == 0)
        return -EINVAL;
    struct mdsl_rec *mr = xt_calloc(n, sizeof *mr);
    if (!mr)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const struct xt_store_rec *r = &recs[i];
        /* flags are the store's rule (rec_check: TOMBSTONE on an empty
         * COLUMN, MOVED on an empty IMAGE), refused there with a log line */
        if (r->type < XT_STORE_IMAGE || r->type > XT_STORE_COLUMN || r->len > MDSL_SVC_MAX_REC) {
            xt_free(mr);
            return -EINVAL;
        }
        mr[i] = (struct mdsl_rec){ .type = r->type, .flags = r->flags, .fsid = r->fsid,
                                   .table = r->table, .slice = r->slice,
                                   .version = r->version, .key = r->key, .group = r->group,
                                   .data = r->data, .len = r->len };
    }
    int ret = mdsl_store_prepare(ctx, txid, mr, n);
    xt_free(mr);
    return ret;
}

static int svc_commit(void *ctx, const xt_rpc_ctx *rc, uint64_t txid)
{
    (void)rc;
    return txid ? mdsl_store_commit(ctx, txid) : -EINVAL;
}

static int svc_abort(void *ctx, const xt_rpc_ctx *rc, uint64_t txid)
{
    (void)rc;
    return txid ? mdsl_store_abort(ctx, txid) : -EINVAL;
}

static int svc_load(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t table,
                    uint32_t slice, struct xt_store_load *out)
{
    (void)rc;
    struct mdsl_slice_load l;
    int ret = mdsl_store_load_slice(ctx, fsid, table, slice, &l);
    if (ret < 0)
        return ret;
    /* Same layout, same allocator: hand the buffers over. */
    out->has_image = l.has_image;
    out->image.version = l.image.version;
    out->image.data = l.image.data;
    out->image.len = l.image.len;
    out->ndeltas = l.ndeltas;
    _Static_assert(sizeof(struct xt_store_blob) == sizeof(struct mdsl_blob),
                   "blob layouts differ");
    out->deltas = (struct xt_store_blob *)(void *)l.deltas;
    return 0;
}

static int svc_read_column(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t table,
                           uint32_t slice, uint64_t key, uint32_t group, void **data,
                           uint32_t *len, uint64_t *version)
{
    (void)rc;
    return mdsl_store_read_column(ctx, fsid, table, slice, key, group, data, len, version);
}

static int svc_set_md(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t table,
                      const void *md, uint32_t len)
{
    (void)rc;
    return mdsl_store_set_md(ctx, fsid, table, md, len);
}

static int svc_get_md(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t table,
                      void **md, uint32_t *len)
{
    (void)rc;
    return mdsl_store_get_md(ctx, fsid, table, md, len);
}

static int svc_stat(void *ctx, const xt_rpc_ctx *rc, struct xt_store_stat *st)
{
    (void)rc;
    struct mdsl_stat ms;
    int ret = mdsl_store_stat(ctx, &ms);
    if (ret < 0)
        return ret;
    st->tables = ms.tables;
    st->segments = ms.segments;
    st->bytes = ms.bytes;
    st->live_bytes = ms.live_bytes;
    st->commits = ms.commits;
    st->aborts = ms.aborts;
    st->gc_freed_segments = ms.gc_freed_segments;
    st->corrupt_records = ms.corrupt_records;
    st->gc_passes = ms.gc_passes;
    st->gc_moved_bytes = ms.gc_moved_bytes;
    st->gc_freed_bytes = ms.gc_freed_bytes;
    st->dropped_folders = ms.dropped_folders;
    st->dropped_bytes = ms.dropped_bytes;
    st->rolled_segments = ms.rolled_segments;
    st->sweeps = ms.sweeps;
    st->sweep_owed = ms.sweep_owed;
    st->failed = ms.failed;
    return mdsl_store_prepared(ctx, &st->prepared, &st->nprepared);
}

static int svc_list_slices(void *ctx, const xt_rpc_ctx *rc, const void *cursor,
                           uint32_t cursor_len, uint32_t max, struct xt_store_list *out)
{
    (void)rc;
    _Static_assert(MDSL_LIST_CURSOR <= XT_STORE_CURSOR_MAX, "cursor does not fit the wire");
    struct mdsl_slice_list l;
    int ret = mdsl_store_list_slices(ctx, cursor, cursor_len, max, &l);
    if (ret < 0)
        return ret;
    if (l.n && !(out->slices = xt_malloc(l.n * sizeof *out->slices))) {
        mdsl_slice_list_free(&l);
        return -ENOMEM;
    }
    for (size_t i = 0; i < l.n; i++)
        out->slices[i] = (struct xt_store_slice){ .fsid = l.v[i].fsid, .table = l.v[i].table,
                                                  .slice = l.v[i].slice,
                                                  .version = l.v[i].version,
                                                  .moved = l.v[i].moved,
                                                  .sys = l.v[i].sys };
    out->n = l.n;
    memcpy(out->cursor, l.cursor, l.cursor_len);
    out->cursor_len = l.cursor_len;
    out->end = l.end;
    mdsl_slice_list_free(&l);
    return 0;
}

static const struct xt_mdsl_ops mdsl_ops = {
    .common = { .ping = NULL },
    .prepare = svc_prepare,
    .commit = svc_commit,
    .abort = svc_abort,
    .load_slice = svc_load,
    .read_column = svc_read_column,
    .set_md = svc_set_md,
    .get_md = svc_get_md,
    .stat = svc_stat,
    .list_slices = svc_list_slices,
};

int mdsl_service_start(mdsl_store *store, const struct xt_rpc_server_opts *opts,
                       xt_rpc_server **out)
{
    return xt_rpc_serve_mdsl(opts, &mdsl_ops, store, out);
}
