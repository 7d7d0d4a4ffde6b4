/*
 * xt_rpc_r2.h -- the R2 service of pom.thrift in C: registration, heart-
 * beats, views, file-system instances and site administration; the calls
 * daemons, clients and pomctl make, and the ops pom-r2 serves with.
 *
 * A view carries only the sections (sites, rings, fs) that changed after
 * the version the caller names; `sections` says which are present. A
 * non-leading R2 answers every call but get_view with -EREMOTE; its view
 * names the leader.
 */
#ifndef XT_RPC_R2_H
#define XT_RPC_R2_H

#include "xt_rpc.h"

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

enum xt_site_type { XT_SITE_MDS = 1, XT_SITE_MDSL = 2, XT_SITE_CLIENT = 3, XT_SITE_R2 = 4 };
enum xt_site_state {
    XT_SITE_UP = 1,
    XT_SITE_TRANSIENT = 2,
    XT_SITE_FAILED = 3,
    XT_SITE_DRAINING = 4,
    XT_SITE_REMOVED = 5,
};
enum { XT_VIEW_SITES = 1, XT_VIEW_RINGS = 2, XT_VIEW_FS = 4 };

#define XT_ADDR_MAX 256      /* "host:port" incl. NUL */
#define XT_FSNAME_MAX 64     /* fs name bytes, excl. NUL: [A-Za-z0-9._-] */
#define XT_PATH_MAX 1024

const char *xt_site_type_name(int type);   /* "mds", ... or "?" */
const char *xt_site_state_name(int state); /* "up", ... or "?" */

struct xt_site {
    uint32_t id;
    int type;                  /* enum xt_site_type */
    char addr[XT_ADDR_MAX];
    uint64_t capacity;
    int state;                 /* enum xt_site_state */
    uint64_t last_hb_ns;
    uint64_t uuid_lo, uuid_hi;
    char fs_name[XT_FSNAME_MAX + 1];
    double load;
};

struct xt_fs_info {
    uint32_t fsid;
    char name[XT_FSNAME_MAX + 1];
    uint64_t root_table, files, bytes;
    uint32_t mounts;
    char blob_backend[16];
    char blob_path[XT_PATH_MAX];
    uint64_t created_ns;
    void *root_bitmap;         /* xt_malloc'd xt_bitmap encoding, or NULL */
    uint32_t root_bitmap_len;
};

struct xt_ring_blob {
    uint32_t ring;             /* 0: MDS, 1: MDSL */
    uint64_t version;
    void *data;                /* xt_malloc'd xt_ring encoding */
    uint32_t len;
};

struct xt_view {
    uint64_t version;
    int sections;              /* XT_VIEW_* present */
    size_t nsites, nrings, nfs;
    struct xt_site *sites;     /* xt_malloc'd arrays */
    struct xt_ring_blob *rings;
    struct xt_fs_info *fs;
    char leader[XT_ADDR_MAX];
    char store[16];
};
/* Frees what the view owns and zeroes it. */
void xt_view_free(struct xt_view *v);
void xt_fs_info_free_array(struct xt_fs_info *fs, size_t n);

struct xt_fs_counter {
    uint32_t fsid;
    uint64_t files, bytes;
};

/* ---- client calls: 0 or -errno; outputs freed by the caller ------------ */

/* view may be NULL. */
int xt_r2_register(xt_rpc_pool *p, const xt_rpc_call *call, int type, const char *addr,
                   uint64_t capacity, uint32_t prev_id, const char *fs_name,
                   uint32_t *site_id, struct xt_view *view);
/* *has_view: whether the view changed after view_version (then *view is set). */
int xt_r2_heartbeat(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id,
                    uint64_t view_version, double load, const struct xt_fs_counter *c,
                    size_t n, bool *has_view, struct xt_view *view);
int xt_r2_get_view(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t since,
                   bool *has_view, struct xt_view *view);
/* out may be NULL. */
int xt_r2_fs_create(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                    const char *backend, const char *path, struct xt_fs_info *out);
/* *fs: free with xt_fs_info_free_array. name NULL or "": all. */
int xt_r2_fs_list(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                  struct xt_fs_info **fs, size_t *n);
int xt_r2_fs_drop(xt_rpc_pool *p, const xt_rpc_call *call, const char *name, bool force);
int xt_r2_site_drain(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id);
int xt_r2_site_remove(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id);
/* [*lo, *hi): count uuids for this MDS alone. */
int xt_r2_alloc_uuids(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id,
                      uint64_t count, uint64_t *lo, uint64_t *hi);

/* ---- server ------------------------------------------------------------ */

/* Handler ops. Outputs the handler fills (views, fs arrays) are freed by
 * the glue with xt_view_free / xt_fs_info_free_array. */
struct xt_r2_ops {
    struct xt_rpc_common_ops common;
    int (*register_site)(void *ctx, const xt_rpc_ctx *rc, int type, const char *addr,
                         uint64_t capacity, uint32_t prev_id, const char *fs_name,
                         uint32_t *site_id, struct xt_view *view);
    int (*heartbeat)(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id, uint64_t view_version,
                     double load, const struct xt_fs_counter *c, size_t n, bool *has_view,
                     struct xt_view *view);
    int (*get_view)(void *ctx, const xt_rpc_ctx *rc, uint64_t since, bool *has_view,
                    struct xt_view *view);
    int (*fs_create)(void *ctx, const xt_rpc_ctx *rc, const char *name, const char *backend,
                     const char *path, struct xt_fs_info *out);
    int (*fs_list)(void *ctx, const xt_rpc_ctx *rc, const char *name, struct xt_fs_info **fs,
                   size_t *n);
    int (*fs_drop)(void *ctx, const xt_rpc_ctx *rc, const char *name, bool force);
    int (*site_drain)(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id);
    int (*site_remove)(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id);
    int (*alloc_uuids)(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id, uint64_t count,
                       uint64_t *lo, uint64_t *hi);
};

int xt_rpc_serve_r2(const struct xt_rpc_server_opts *opts, const struct xt_r2_ops *ops,
                    void *ctx, xt_rpc_server **out);

#ifdef __cplusplus
}
#endif
#endif /* XT_RPC_R2_H */
