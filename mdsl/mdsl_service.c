/*
 * mdsl_service.c -- Storage RPC handlers over mdsl_store.
 *
 * The handlers validate what arrives from the network before the store
 * sees it (record types, sizes, txid 0), so that a malformed request is an
 * -EINVAL to its sender and never an assertion in the engine. Records,
 * loads and listings pass through untouched: the glue and the engine both
 * speak the storage contract (xt_store.h).
 *
 * Roles (docs/security.md "Roles"): a connection with a client key of fs N
 * may make the tract calls for fs N only; every other call of a client
 * key answers -EACCES (slices and metadata are the sites' business).
 */
#include "mdsl_service.h"

#include "xt_common.h"
#include "xt_time.h"

#include "xt_auth.h"

#include <assert.h>
#include <string.h>

/* Largest record accepted from the network. The MDS writes no COLUMN
 * records yet: inline file bytes ride in slice images, which it keeps
 * far under this by splitting slices past --split-bytes (32 MiB). */
#define MDSL_SVC_MAX_REC (256u << 20)

const char *const mdsl_service_op_names[MDSL_SVC__COUNT] = {
    "prepare", "commit", "abort", "load", "read_column", "set_md", "get_md", "stat", "list",
    "tract_put", "tract_get", "tract_remove", "tract_list", "tract_touch",
};

/* Counts one call of op that began at t0 and returns rc. */
static int done(struct mdsl_service *sv, enum mdsl_svc_op op, uint64_t t0, int rc)
{
    xt_metrics_hist_record(&sv->op[op], xt_mono_ns() - t0);
    if (rc < 0)
        atomic_fetch_add_explicit(&sv->errors[op], 1, memory_order_relaxed);
    return rc;
}

/* -EACCES for a client key: the slice calls are for sites and pomctl. */
static int sites_only(const xt_rpc_ctx *rc)
{
    return rc->auth_role == XT_AUTH_CLIENT ? -EACCES : 0;
}

static int svc_prepare(void *ctx, const xt_rpc_ctx *rc, uint64_t txid,
                       const struct xt_store_rec *recs, size_t n)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (sites_only(rc) < 0)
        return done(sv, MDSL_SVC_PREPARE, t0, -EACCES);
    /* MDSL_TXID_LOCAL is the MDSL's own (mdsl_store_apply_local) */
    if (txid == 0 || (txid & MDSL_TXID_LOCAL) || n == 0)
        return done(sv, MDSL_SVC_PREPARE, t0, -EINVAL);
    for (size_t i = 0; i < n; i++) {
        const struct xt_store_rec *r = &recs[i];
        /* flags are the store's rule (rec_check: TOMBSTONE on an empty
         * COLUMN, MOVED on an empty IMAGE), refused there with a log line */
        if (r->type < XT_STORE_IMAGE || r->type > XT_STORE_COLUMN || r->len > MDSL_SVC_MAX_REC)
            return done(sv, MDSL_SVC_PREPARE, t0, -EINVAL);
    }
    return done(sv, MDSL_SVC_PREPARE, t0, mdsl_store_prepare(sv->store, txid, recs, n));
}

static int svc_commit(void *ctx, const xt_rpc_ctx *rc, uint64_t txid)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (sites_only(rc) < 0)
        return done(sv, MDSL_SVC_COMMIT, t0, -EACCES);
    return done(sv, MDSL_SVC_COMMIT, t0, txid ? mdsl_store_commit(sv->store, txid) : -EINVAL);
}

static int svc_abort(void *ctx, const xt_rpc_ctx *rc, uint64_t txid)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (sites_only(rc) < 0)
        return done(sv, MDSL_SVC_ABORT, t0, -EACCES);
    return done(sv, MDSL_SVC_ABORT, t0, txid ? mdsl_store_abort(sv->store, txid) : -EINVAL);
}

static int svc_load(void *ctx, const xt_rpc_ctx *rc, xt_slice_id id, struct xt_store_load *out)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (sites_only(rc) < 0)
        return done(sv, MDSL_SVC_LOAD, t0, -EACCES);
    return done(sv, MDSL_SVC_LOAD, t0, mdsl_store_load_slice(sv->store, id, out));
}

static int svc_read_column(void *ctx, const xt_rpc_ctx *rc, xt_slice_id id, uint64_t key,
                           uint32_t group, void **data, uint32_t *len, uint64_t *version)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (sites_only(rc) < 0)
        return done(sv, MDSL_SVC_READ_COLUMN, t0, -EACCES);
    return done(sv, MDSL_SVC_READ_COLUMN, t0, mdsl_store_read_column(sv->store, id, key, group, data, len, version));
}

static int svc_set_md(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t table,
                      const void *md, uint32_t len)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (sites_only(rc) < 0)
        return done(sv, MDSL_SVC_SET_MD, t0, -EACCES);
    return done(sv, MDSL_SVC_SET_MD, t0, mdsl_store_set_md(sv->store, fsid, table, md, len));
}

static int svc_get_md(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t table,
                      void **md, uint32_t *len)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (sites_only(rc) < 0)
        return done(sv, MDSL_SVC_GET_MD, t0, -EACCES);
    return done(sv, MDSL_SVC_GET_MD, t0, mdsl_store_get_md(sv->store, fsid, table, md, len));
}

static int stat_of(const struct mdsl_service *sv, struct xt_store_stat *st)
{
    struct mdsl_stat ms;
    struct mdsl_catchup_stat cs;
    mdsl_catchup_stat(sv->catchup, &cs);
    st->under_replicated = cs.under_replicated;
    st->pulled_slices = cs.pulled_slices;
    st->pulled_bytes = cs.pulled_bytes;
    mdsl_store *store = sv->store;
    int ret = mdsl_store_stat(store, &ms);
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
    return mdsl_store_prepared(store, &st->prepared, &st->nprepared);
}

static int svc_stat(void *ctx, const xt_rpc_ctx *rc, struct xt_store_stat *st)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (sites_only(rc) < 0)
        return done(sv, MDSL_SVC_STAT, t0, -EACCES);
    return done(sv, MDSL_SVC_STAT, t0, stat_of(sv, st));
}

static int svc_list_slices(void *ctx, const xt_rpc_ctx *rc, const void *cursor,
                           uint32_t cursor_len, uint32_t max, struct xt_store_list *out)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (sites_only(rc) < 0)
        return done(sv, MDSL_SVC_LIST, t0, -EACCES);
    return done(sv, MDSL_SVC_LIST, t0, mdsl_store_list_slices(sv->store, cursor, cursor_len, max, out));
}

/* The tract calls' checks: a store, a real fs, a client key's own fs. */
static int tract_scope(const struct mdsl_service *sv, const xt_rpc_ctx *rc, uint32_t fsid)
{
    if (!sv->blob)
        return -ENOTSUP;
    if (fsid == 0 || fsid > INT32_MAX)
        return -EINVAL;
    if (rc->auth_role == XT_AUTH_CLIENT && (int32_t)fsid != rc->auth_fsid)
        return -EACCES;
    return 0;
}

static int svc_tract_put(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t set,
                         uint32_t tract, const void *data, uint32_t len)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    int ret = tract_scope(sv, rc, fsid);
    if (ret == 0 && len > MDSL_BLOB_TRACT_MAX) {
        XT_WARN_RL(1000, "tract_put: %u bytes for tract %u of set %016llx is over the "
                   "%u-byte limit: refused", (unsigned)len, (unsigned)tract,
                   (unsigned long long)set, MDSL_BLOB_TRACT_MAX);
        ret = -EFBIG;
    }
    if (ret == 0)
        ret = mdsl_blob_put(sv->blob, fsid, set, tract, data, len);
    return done(sv, MDSL_SVC_TRACT_PUT, t0, ret);
}

/* The whole tract is read and its checksum checked (mdsl_blob_get), then
 * only the range asked for goes back: a 4 KiB random read crosses the
 * network as 4 KiB, not as a tract. */
static int svc_tract_get(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t set,
                         uint32_t tract, uint32_t off, uint32_t want, void **data,
                         uint32_t *len)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    int ret = tract_scope(sv, rc, fsid);
    if (ret == 0)
        ret = mdsl_blob_get(sv->blob, fsid, set, tract, data, len);
    if (ret == 0 && (off || want)) {
        uint32_t n = off < *len ? *len - off : 0;
        if (want && want < n)
            n = want;
        if (n)
            memmove(*data, (char *)*data + off, n);
        else {
            xt_free(*data);
            *data = NULL;
        }
        *len = n;
    }
    /* A missing tract is a question clients ask (holes), not an error. */
    done(sv, MDSL_SVC_TRACT_GET, t0, ret == -ENOENT ? 0 : ret);
    return ret;
}

static int svc_tract_remove(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t set,
                            uint32_t first, uint32_t end)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    int ret = tract_scope(sv, rc, fsid);
    if (ret == 0 && end && end <= first)
        ret = -EINVAL;
    if (ret == 0)
        ret = mdsl_blob_remove(sv->blob, fsid, set, first, end);
    return done(sv, MDSL_SVC_TRACT_REMOVE, t0, ret);
}

/* Largest page of tract_list: ~32 bytes a set on the wire. */
#define MDSL_SVC_TRACT_LIST_MAX 65536u

static int svc_tract_list(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t cookie,
                          uint32_t max, bool one, uint64_t set, struct xt_tract_list *out)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    int ret = tract_scope(sv, rc, fsid);
    if (ret < 0)
        return done(sv, MDSL_SVC_TRACT_LIST, t0, ret);
    if (!one) {
        ret = mdsl_blob_list(sv->blob, fsid, cookie, XT_MIN(max, MDSL_SVC_TRACT_LIST_MAX), out);
        return done(sv, MDSL_SVC_TRACT_LIST, t0, ret);
    }
    struct xt_tract_set st;
    ret = mdsl_blob_set_stat(sv->blob, fsid, set, &st);
    if (ret == 0 && !(out->sets = xt_malloc(sizeof st)))
        ret = -ENOMEM;
    if (ret == 0) {
        out->sets[0] = st;
        out->n = 1;
        out->end = true;
    }
    /* A set absent here is a question clients ask (it lies elsewhere). */
    done(sv, MDSL_SVC_TRACT_LIST, t0, ret == -ENOENT ? 0 : ret);
    return ret;
}

static int svc_tract_touch(void *ctx, const xt_rpc_ctx *rc, uint32_t fsid, uint64_t set)
{
    struct mdsl_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    int ret = tract_scope(sv, rc, fsid);
    if (ret == 0)
        ret = mdsl_blob_touch(sv->blob, fsid, set);
    return done(sv, MDSL_SVC_TRACT_TOUCH, t0, ret);
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
    .tract_put = svc_tract_put,
    .tract_get = svc_tract_get,
    .tract_remove = svc_tract_remove,
    .tract_list = svc_tract_list,
    .tract_touch = svc_tract_touch,
};

int mdsl_service_start(struct mdsl_service *svc, const struct xt_rpc_server_opts *opts,
                       xt_rpc_server **out)
{
    assert(svc->store);
    return xt_rpc_serve_mdsl(opts, &mdsl_ops, svc, out);
}
