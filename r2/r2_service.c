/*
 * r2_service.c -- handlers of the R2 service: check every input from the
 * network, then call r2_mgr.
 *
 * Invariants:
 *  (1) Nothing from the network reaches the manager unchecked: site types
 *      are MDS/MDSL/CLIENT, addresses parse (r2_rec_addr_valid), fs names
 *      are [A-Za-z0-9._-]{1,64}, backends and paths are known and printable,
 *      counts are bounded. The glue already refused strings too long for
 *      the C fields and strings with NUL bytes.
 *  (2) A handler never crashes on a value: every refusal is -EINVAL.
 *  (3) A connection that proved a client key (role client) may register
 *      only as a client and call nothing that administers the cluster
 *      (fs create/drop/rotate, site drain/remove, uuid ranges): -EACCES.
 *      It may end a client site's registration (site leave): that removes
 *      no server, and a client removed by another comes back with its next
 *      heartbeat (-ENOENT makes its agent register again).
 */
#include "r2_service.h"

#include "r2_rec.h"
#include "xt_common.h"
#include "xt_time.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <string.h>

const char *const r2_service_request_names[R2_SVC__COUNT] = {
    "register", "heartbeat", "get_view", "fs_create", "fs_list", "fs_drop",
    "fs_rotate_key", "fs_quota", "fs_set_usage", "site_drain", "site_remove", "site_leave", "alloc_uuids",
};

/* Counts one request of kind op that began at t0 and returns rc. */
static int done(struct r2_service *sv, enum r2_svc_request op, uint64_t t0, int rc)
{
    xt_metrics_hist_record(&sv->req[op], xt_mono_ns() - t0);
    if (rc < 0)
        atomic_fetch_add_explicit(&sv->errors[op], 1, memory_order_relaxed);
    return rc;
}

/* A client key administers nothing (docs/security.md "Roles"). */
static bool client_role(const xt_rpc_ctx *rc)
{
    return rc->auth_role == XT_AUTH_CLIENT;
}

static int h_register(void *ctx, const xt_rpc_ctx *rc, int type, const char *addr,
                      uint64_t capacity, uint32_t prev_id, const char *fs_name,
                      const char *metrics, uint32_t *site_id, struct xt_view *view)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (client_role(rc) && type != XT_SITE_CLIENT)
        return done(sv, R2_SVC_REGISTER, t0, -EACCES);
    if (type != XT_SITE_MDS && type != XT_SITE_MDSL && type != XT_SITE_CLIENT &&
        type != XT_SITE_R2)
        return done(sv, R2_SVC_REGISTER, t0, -EINVAL);
    if (!r2_rec_addr_valid(type, addr) || capacity > (UINT64_C(1) << 62) ||
        prev_id > INT32_MAX)
        return done(sv, R2_SVC_REGISTER, t0, -EINVAL);
    if (fs_name && fs_name[0] && !r2_rec_fs_name_valid(fs_name))
        return done(sv, R2_SVC_REGISTER, t0, -EINVAL);
    return done(sv, R2_SVC_REGISTER, t0,
                r2_mgr_register(sv->mgr, type, addr, capacity, prev_id, fs_name, metrics,
                                site_id, view));
}

static int h_heartbeat(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id, uint64_t view_version,
                       double load, const struct xt_fs_counter *c, size_t n,
                       const struct xt_r2_hb_ring1 *r1, const struct xt_r2_hb_usage *u,
                       bool *has_view, struct xt_view *view, struct xt_capacity *cap)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    (void)rc;
    *has_view = false;
    if (site_id == 0 || site_id > INT32_MAX || view_version > INT64_MAX || !isfinite(load) ||
        load < 0 || n > R2_MGR_MAX_COUNTERS)
        return done(sv, R2_SVC_HEARTBEAT, t0, -EINVAL);
    for (size_t i = 0; i < n; i++)
        if (c[i].fsid == 0)
            return done(sv, R2_SVC_HEARTBEAT, t0, -EINVAL);
    if (r1 && (r1->acked > INT64_MAX || r1->walked_v > INT64_MAX || r1->walked_w > INT64_MAX ||
               r1->misplaced > INT64_MAX || r1->prepared > INT64_MAX ||
               r1->counted_seq > INT64_MAX))
        return done(sv, R2_SVC_HEARTBEAT, t0, -EINVAL);
    if (u && u->has_storage && (u->storage.size > INT64_MAX || u->storage.avail > u->storage.size))
        return done(sv, R2_SVC_HEARTBEAT, t0, -EINVAL);
    return done(sv, R2_SVC_HEARTBEAT, t0,
                r2_mgr_heartbeat(sv->mgr, site_id, view_version, load, c, n, r1, u, has_view,
                                 view, cap));
}

static int h_get_view(void *ctx, const xt_rpc_ctx *rc, uint64_t since, bool *has_view,
                      struct xt_view *view)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    (void)rc;
    *has_view = false;
    if (since > INT64_MAX)
        return done(sv, R2_SVC_GET_VIEW, t0, -EINVAL);
    return done(sv, R2_SVC_GET_VIEW, t0, r2_mgr_get_view(sv->mgr, since, has_view, view));
}

static int h_fs_create(void *ctx, const xt_rpc_ctx *rc, const char *name, const char *backend,
                       const char *path, struct xt_fs_info *out)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (client_role(rc))
        return done(sv, R2_SVC_FS_CREATE, t0, -EACCES);
    if (!r2_rec_fs_name_valid(name) || (backend[0] && !r2_rec_backend_valid(backend)) ||
        !r2_rec_path_valid(path))
        return done(sv, R2_SVC_FS_CREATE, t0, -EINVAL);
    return done(sv, R2_SVC_FS_CREATE, t0, r2_mgr_fs_create(sv->mgr, name, backend, path, out));
}

static int h_fs_list(void *ctx, const xt_rpc_ctx *rc, const char *name, struct xt_fs_info **fs,
                     size_t *n)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    (void)rc;
    *fs = NULL;
    *n = 0;
    if (name[0] && !r2_rec_fs_name_valid(name))
        return done(sv, R2_SVC_FS_LIST, t0, -EINVAL);
    return done(sv, R2_SVC_FS_LIST, t0, r2_mgr_fs_list(sv->mgr, name, fs, n));
}

static int h_fs_drop(void *ctx, const xt_rpc_ctx *rc, const char *name, bool force)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (client_role(rc))
        return done(sv, R2_SVC_FS_DROP, t0, -EACCES);
    if (!r2_rec_fs_name_valid(name))
        return done(sv, R2_SVC_FS_DROP, t0, -EINVAL);
    return done(sv, R2_SVC_FS_DROP, t0, r2_mgr_fs_drop(sv->mgr, name, force));
}

static int h_fs_rotate_key(void *ctx, const xt_rpc_ctx *rc, const char *name,
                           struct xt_fs_info *out)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (client_role(rc))
        return done(sv, R2_SVC_FS_ROTATE_KEY, t0, -EACCES);
    if (!r2_rec_fs_name_valid(name))
        return done(sv, R2_SVC_FS_ROTATE_KEY, t0, -EINVAL);
    return done(sv, R2_SVC_FS_ROTATE_KEY, t0, r2_mgr_fs_rotate_key(sv->mgr, name, out));
}

static int h_fs_quota(void *ctx, const xt_rpc_ctx *rc, const char *name, uint64_t quota_files,
                      uint64_t quota_bytes, struct xt_fs_info *out)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (client_role(rc))
        return done(sv, R2_SVC_FS_QUOTA, t0, -EACCES);
    if (!r2_rec_fs_name_valid(name) || quota_files > INT64_MAX || quota_bytes > INT64_MAX)
        return done(sv, R2_SVC_FS_QUOTA, t0, -EINVAL);
    return done(sv, R2_SVC_FS_QUOTA, t0,
                r2_mgr_fs_quota(sv->mgr, name, quota_files, quota_bytes, out));
}

static int h_fs_set_usage(void *ctx, const xt_rpc_ctx *rc, const char *name, uint64_t files,
                          uint64_t bytes)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (client_role(rc))
        return done(sv, R2_SVC_FS_SET_USAGE, t0, -EACCES);
    if (!r2_rec_fs_name_valid(name) || files > INT64_MAX || bytes > INT64_MAX)
        return done(sv, R2_SVC_FS_SET_USAGE, t0, -EINVAL);
    return done(sv, R2_SVC_FS_SET_USAGE, t0, r2_mgr_fs_set_usage(sv->mgr, name, files, bytes));
}

static int h_site_drain(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (client_role(rc))
        return done(sv, R2_SVC_SITE_DRAIN, t0, -EACCES);
    if (site_id == 0 || site_id > INT32_MAX)
        return done(sv, R2_SVC_SITE_DRAIN, t0, -EINVAL);
    return done(sv, R2_SVC_SITE_DRAIN, t0, r2_mgr_site_drain(sv->mgr, site_id));
}

static int h_site_remove(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (client_role(rc))
        return done(sv, R2_SVC_SITE_REMOVE, t0, -EACCES);
    if (site_id == 0 || site_id > INT32_MAX)
        return done(sv, R2_SVC_SITE_REMOVE, t0, -EINVAL);
    return done(sv, R2_SVC_SITE_REMOVE, t0, r2_mgr_site_remove(sv->mgr, site_id));
}

static int h_site_leave(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    (void)rc;
    if (site_id == 0 || site_id > INT32_MAX)
        return done(sv, R2_SVC_SITE_LEAVE, t0, -EINVAL);
    return done(sv, R2_SVC_SITE_LEAVE, t0, r2_mgr_site_leave(sv->mgr, site_id));
}

static int h_alloc_uuids(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id, uint64_t count,
                         uint64_t *lo, uint64_t *hi)
{
    struct r2_service *sv = ctx;
    uint64_t t0 = xt_mono_ns();
    if (client_role(rc))
        return done(sv, R2_SVC_ALLOC_UUIDS, t0, -EACCES);
    *lo = *hi = 0;
    if (site_id == 0 || site_id > INT32_MAX || count == 0 || count > (UINT64_C(1) << 40))
        return done(sv, R2_SVC_ALLOC_UUIDS, t0, -EINVAL);
    return done(sv, R2_SVC_ALLOC_UUIDS, t0, r2_mgr_alloc_uuids(sv->mgr, site_id, count, lo, hi));
}

static const struct xt_r2_ops ops = {
    .common = { .ping = NULL },
    .register_site = h_register,
    .heartbeat = h_heartbeat,
    .get_view = h_get_view,
    .fs_create = h_fs_create,
    .fs_list = h_fs_list,
    .fs_drop = h_fs_drop,
    .fs_rotate_key = h_fs_rotate_key,
    .fs_quota = h_fs_quota,
    .fs_set_usage = h_fs_set_usage,
    .site_drain = h_site_drain,
    .site_remove = h_site_remove,
    .site_leave = h_site_leave,
    .alloc_uuids = h_alloc_uuids,
};

int r2_service_start(struct r2_service *svc, const struct xt_rpc_server_opts *opts,
                     xt_rpc_server **out)
{
    assert(svc->mgr);
    struct xt_rpc_server_opts o = *opts;
    o.key_gen = r2_mgr_fs_key_gen;
    o.key_ctx = svc->mgr;
    return xt_rpc_serve_r2(&o, &ops, svc, out);
}
