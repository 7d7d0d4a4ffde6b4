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
    char metrics[XT_ADDR_MAX]; /* HOST:PORT of its /metrics; "": none */
};

struct xt_fs_info {
    uint32_t fsid;
    char name[XT_FSNAME_MAX + 1];
    uint64_t root_table, files, bytes;
    uint32_t mounts;
    char blob_backend[16];
    char blob_path[XT_PATH_MAX];
    uint64_t created_ns;
    uint64_t key_gen;          /* generation of the fs's client key (pomctl fs key) */
    uint64_t quota_files;      /* 0: no quota (docs/r2.md "Capacity and quotas") */
    uint64_t quota_bytes;
    void *root_bitmap;         /* xt_malloc'd xt_bitmap encoding, or NULL */
    uint32_t root_bitmap_len;
};

struct xt_ring_blob {
    uint32_t ring;             /* 0: MDS, 1: MDSL */
    uint64_t version;
    void *data;                /* xt_malloc'd xt_ring encoding */
    uint32_t len;
};

/* Ring-1 change (docs/mdsl-scale.md "R2 and pomctl"): one at a time,
 * STABLE -> PREPARE (next ring published; MDS add its MDSL as commit
 * participants and ack) -> MOVING (current = next, previous kept; MDS ack,
 * then walk once `walk` is set) -> DONE (previous dropped, leavers DRAINED)
 * -> STABLE. `seq` grows at every phase change: it is what an MDS acks. */
enum xt_ring1_phase { XT_RING1_STABLE = 0, XT_RING1_PREPARE = 1, XT_RING1_MOVING = 2,
                      XT_RING1_DONE = 3 };
/* Role of an MDSL in ring 1 (liveness stays in the site state). */
enum xt_ring1_role { XT_RING1_OUT = 0, XT_RING1_JOINING = 1, XT_RING1_IN = 2,
                     XT_RING1_DRAINED = 3 };
const char *xt_ring1_phase_name(int phase); /* "stable", ... or "?" */
const char *xt_ring1_role_name(int role);   /* "out", ... or "?" */

/* One MDS or MDSL as the ring-1 state sees it: an MDSL's role, and what
 * the site last reported in its heartbeats (leader's memory only). */
struct xt_ring1_site {
    uint32_t id;
    int role;                  /* MDSL: enum xt_ring1_role; MDS: XT_RING1_OUT */
    bool leaving;              /* MDSL leaving ring 1 in the running change */
    bool losing;               /* MDSL whose slices must move away (it reports misplaced) */
    bool reports;              /* heartbeats carry the ring-1 fields */
    uint64_t acked;            /* MDS: the ring-1 seq it installed */
    uint64_t walked_v, walked_w; /* MDS: last full walk (ring-1 v, ring-0 w); 0: none */
    bool has_counts;           /* MDSL: misplaced/prepared below are reported */
    uint64_t misplaced, prepared;
};

struct xt_view_ring1 {
    int phase;                 /* enum xt_ring1_phase */
    uint64_t seq;
    bool walk;                 /* MOVING acked by every MDS of ring 0: walk now */
    uint64_t from_version;     /* ring-1 version before the change (= to when STABLE) */
    uint64_t to_version;       /* ring-1 version after it */
    uint64_t started_ns;       /* wall clock the change started; 0 when STABLE */
    struct xt_ring_blob prev;  /* MOVING: the previous ring 1 (data NULL otherwise) */
    struct xt_ring_blob next;  /* PREPARE: the next ring 1 (data NULL otherwise) */
    struct xt_ring1_site *sites; /* xt_malloc'd: every MDS and MDSL, by id */
    size_t nsites;
};
/* Deep copy (*dst freed by the caller with xt_view_ring1_free); 0 or -ENOMEM. */
int xt_view_ring1_dup(const struct xt_view_ring1 *src, struct xt_view_ring1 **dst);
void xt_view_ring1_free(struct xt_view_ring1 *r);

/* Optional ring-1 fields of a heartbeat (NULL: the site sends none, as
 * every site did before ring-1 changes). */
struct xt_r2_hb_ring1 {
    bool has_acked, has_walked, has_counts;
    uint64_t acked;              /* MDS: ring-1 seq installed */
    uint64_t walked_v, walked_w; /* MDS: last full walk that found nothing to move */
    uint64_t misplaced, prepared; /* MDSL: from its last index pass */
    uint64_t counted_seq;        /* MDSL: the ring-1 seq that pass counted under */
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
    struct xt_view_ring1 *ring1; /* with XT_VIEW_RINGS from an R2 that has it; else NULL */
    /* With XT_VIEW_SITES from the leader: the under-replicated slices the
     * MDSL report (docs/mdsl-replicas.md "Catch-up"), summed; repl_counted
     * MDSL report (0: none, has_repl false). */
    bool has_repl;
    uint64_t under_replicated;
    uint32_t repl_counted;
};
/* Frees what the view owns and zeroes it. */
void xt_view_free(struct xt_view *v);
/* The ring of type `ring` (0: MDS, 1: MDSL) in v, decoded into *out (free
 * with xt_ring_free; NULL on error). -ENOENT: v carries no such ring (or an
 * empty blob); -ENOMEM; another negative errno: the blob does not decode. */
struct xt_ring;
int xt_view_ring(const struct xt_view *v, uint32_t ring, struct xt_ring **out);
void xt_fs_info_free_array(struct xt_fs_info *fs, size_t n);

/* An MDS's per-fs counts: what its committed changes added (negative:
 * removed) since its incarnation xt_r2_hb_usage.epoch began. */
struct xt_fs_counter {
    uint32_t fsid;
    int64_t files, bytes;
};

/* The statvfs of the folder an MDSL stores in. */
struct xt_storage_report {
    uint64_t size, avail;      /* bytes of its file system; free to unprivileged writers */
    uint64_t used;             /* bytes of the site's own files */
    uint64_t dev;              /* st_dev of the folder */
};

/* Optional capacity fields of a heartbeat (docs/r2.md "Capacity and quotas"). */
struct xt_r2_hb_usage {
    bool has_epoch;            /* MDS: the counters are since this incarnation */
    uint64_t epoch;
    bool has_storage;          /* MDSL */
    struct xt_storage_report storage;
    bool has_repl;             /* MDSL with replicas: its catch-up counted */
    uint64_t under_replicated; /* slices it should hold and does not yet */
};

struct xt_fs_usage {
    uint32_t fsid;
    uint64_t files, bytes;             /* the cluster's totals */
    uint64_t quota_files, quota_bytes; /* 0: none */
};

#define XT_CAPACITY_DEVS_MAX 64

/* What a heartbeat reply tells of the cluster's capacity. */
struct xt_capacity {
    bool valid;                /* the reply carried it */
    uint64_t size, avail;      /* summed over distinct (host, dev) of the MDSL */
    struct xt_fs_usage *fs;    /* xt_malloc'd */
    size_t nfs;
    uint64_t devs[XT_CAPACITY_DEVS_MAX]; /* the devs summed */
    size_t ndevs;
};
/* Frees what c owns and zeroes it. */
void xt_capacity_free(struct xt_capacity *c);
/* Deep copy (dst overwritten); 0 or -ENOMEM (dst then empty). */
int xt_capacity_dup(const struct xt_capacity *src, struct xt_capacity *dst);
/* The usage of fsid in c, or NULL. */
const struct xt_fs_usage *xt_capacity_fs(const struct xt_capacity *c, uint32_t fsid);

/* ---- client calls: 0 or -errno; outputs freed by the caller ------------ */

/* view may be NULL. */
int xt_r2_register(xt_rpc_pool *p, const xt_rpc_call *call, int type, const char *addr,
                   uint64_t capacity, uint32_t prev_id, const char *fs_name,
                   const char *metrics, uint32_t *site_id, struct xt_view *view);
/* *has_view: whether the view changed after view_version (then *view is set). */
int xt_r2_heartbeat(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id,
                    uint64_t view_version, double load, const struct xt_fs_counter *c,
                    size_t n, bool *has_view, struct xt_view *view);
/* The same with the ring-1 fields (r1 may be NULL: none sent) and the
 * capacity fields (u may be NULL: none sent); cap (may be NULL) gets the
 * reply's capacity (cap->valid false when it has none; caller frees with
 * xt_capacity_free). */
int xt_r2_heartbeat_ex(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id,
                       uint64_t view_version, double load, const struct xt_fs_counter *c,
                       size_t n, const struct xt_r2_hb_ring1 *r1,
                       const struct xt_r2_hb_usage *u, bool *has_view, struct xt_view *view,
                       struct xt_capacity *cap);
int xt_r2_get_view(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t since,
                   bool *has_view, struct xt_view *view);
/* out may be NULL. */
int xt_r2_fs_create(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                    const char *backend, const char *path, struct xt_fs_info *out);
/* *fs: free with xt_fs_info_free_array. name NULL or "": all. */
int xt_r2_fs_list(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                  struct xt_fs_info **fs, size_t *n);
int xt_r2_fs_drop(xt_rpc_pool *p, const xt_rpc_call *call, const char *name, bool force);
/* Bumps fs `name`'s key generation; out (may be NULL) gets its record. */
int xt_r2_fs_rotate_key(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                        struct xt_fs_info *out);
/* Sets fs `name`'s quotas (0: none); out (may be NULL) gets its record. */
int xt_r2_fs_quota(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                   uint64_t quota_files, uint64_t quota_bytes, struct xt_fs_info *out);
/* Sets fs `name`'s inode and byte totals (what `pomctl fsck` counted). */
int xt_r2_fs_set_usage(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                       uint64_t files, uint64_t bytes);
int xt_r2_site_drain(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id);
int xt_r2_site_remove(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id);
/* A client site leaves the view (its mount ends); servers use drain/remove. */
int xt_r2_site_leave(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id);
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
                         const char *metrics, uint32_t *site_id, struct xt_view *view);
    /* r1, u: the request's ring-1 and capacity fields, NULL when it carries
     * none; the handler fills *cap (zeroed before) or leaves it invalid. */
    int (*heartbeat)(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id, uint64_t view_version,
                     double load, const struct xt_fs_counter *c, size_t n,
                     const struct xt_r2_hb_ring1 *r1, const struct xt_r2_hb_usage *u,
                     bool *has_view, struct xt_view *view, struct xt_capacity *cap);
    int (*get_view)(void *ctx, const xt_rpc_ctx *rc, uint64_t since, bool *has_view,
                    struct xt_view *view);
    int (*fs_create)(void *ctx, const xt_rpc_ctx *rc, const char *name, const char *backend,
                     const char *path, struct xt_fs_info *out);
    int (*fs_list)(void *ctx, const xt_rpc_ctx *rc, const char *name, struct xt_fs_info **fs,
                   size_t *n);
    int (*fs_drop)(void *ctx, const xt_rpc_ctx *rc, const char *name, bool force);
    int (*fs_rotate_key)(void *ctx, const xt_rpc_ctx *rc, const char *name,
                         struct xt_fs_info *out);
    int (*fs_quota)(void *ctx, const xt_rpc_ctx *rc, const char *name, uint64_t quota_files,
                    uint64_t quota_bytes, struct xt_fs_info *out);
    int (*fs_set_usage)(void *ctx, const xt_rpc_ctx *rc, const char *name, uint64_t files,
                        uint64_t bytes);
    int (*site_drain)(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id);
    int (*site_remove)(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id);
    int (*site_leave)(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id);
    int (*alloc_uuids)(void *ctx, const xt_rpc_ctx *rc, uint32_t site_id, uint64_t count,
                       uint64_t *lo, uint64_t *hi);
};

int xt_rpc_serve_r2(const struct xt_rpc_server_opts *opts, const struct xt_r2_ops *ops,
                    void *ctx, xt_rpc_server **out);

#ifdef __cplusplus
}
#endif
#endif /* XT_RPC_R2_H */
