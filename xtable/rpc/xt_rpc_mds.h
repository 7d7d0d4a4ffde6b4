/*
 * xt_rpc_mds.h -- the xTable service of pom.thrift in C (docs/architecture.md
 * "The xTable API"): the calls a client makes to an MDS, and the ops pom-mds serves with.
 *
 * Rows cross this interface as xt_row views (xt_row.h) on the way in and as
 * xt_row encodings on the way out, so a caller decodes a reply zero-copy and
 * an MDS stores what it built without another conversion. On the wire they
 * are the Row struct of pom.thrift.
 */
#ifndef XT_RPC_MDS_H
#define XT_RPC_MDS_H

#include <stdbool.h>

#include "xt_rpc.h"
#include "xt_row.h"

#ifdef __cplusplus
extern "C" {
#endif

enum xt_op { XT_OP_CREATE = 1, XT_OP_LOOKUP = 2, XT_OP_UPDATE = 3, XT_OP_DELETE = 4 };

/* Flags of a request (pom.thrift XT_F_*). */
#define XT_F_EXCL   0x01 /* create: -EEXIST if present */
#define XT_F_INLINE 0x02 /* reply with inline data */
#define XT_F_IF_VER 0x04 /* update/delete: only if version == expect_version */
#define XT_F_BITMAP 0x08 /* reply carries the table's bitmap */
#define XT_F_SYNC   0x10 /* reply once the change is committed */
#define XT_F_IF_UUID 0x20 /* update/delete (and, in an atomic batch, a replacing
                             create or a check): only if uuid == expect_uuid.
                             Versions restart at 0 when a name is created
                             again; (uuid, version) does not. */
#define XT_F_SYS    0x40 /* the request may name system rows (names starting
                             00 FF, xt_hash.h); set only by MDS-to-MDS calls:
                             without it such a name answers -EINVAL */
#define XT_F_SOFT   0x80 /* update, with XT_F_SYS: an MDS's eager count delta of
                             an RMU (mds_soft.h): the times are applied, the
                             NLINK_ADD only shown until the RMU delivers it */
#define XT_F_RMU    0x100 /* a *copy* op (CREATE with its row, or DELETE with a
                             row whose attr.ctime_ns is the stamp): applied
                             newest-wins by the rows' ctime_ns -- a create
                             replaces the row unless that holds a ctime as
                             new, a delete removes it unless it holds a newer
                             one, a delete of no row does nothing -- so it
                             never fails on the row's state. In a client's
                             atomic batch (never op 0, never alone) the MDS
                             applies it with the batch when its row sits
                             with op 0's, else commits it as an RMU outbox
                             record and delivers it later (docs/mds-xact.md
                             "RMU: copies (the GDT)"). Used for the GDT (client.md). */
#define XT_F_UPSERT 0x200 /* update of an absent row: create it from row (whole,
                             version 0) instead of -ENOENT; never with
                             XT_F_IF_VER/XT_F_IF_UUID, never in an atomic
                             batch. A key/value put in one round trip. */
#define XT_F_ALL    0x3ff

/* Which table a request addresses. */
struct xt_tref {
    uint32_t fsid;
    uint64_t table;
    int32_t slice_hint;          /* the caller's bitmap pick; -1 unknown */
};

/* One xTable operation. Pointers are borrowed for the call. */
struct xt_req {
    int op;                      /* enum xt_op */
    struct xt_tref t;
    const void *name;
    uint32_t name_len;
    uint64_t name_hash;          /* xt_hash_name(name, name_len): filled once by
                                    whoever builds the request (the client's
                                    transport, an MDS for its own rows); an MDS
                                    refuses a request where it is not (-EINVAL)
                                    and places the row by it without rehashing */
    uint32_t flags;              /* XT_F_* */
    const xt_row *row;           /* CREATE: the row; UPDATE: new values */
    uint32_t set_mask;           /* UPDATE: XT_ROW_SET_* taken from row->attr;
                                    row->groups are added or replaced;
                                    XT_ROW_SET_NLINK_ADD: row->attr.nlink is a
                                    signed delta (xt_row.h) */
    const uint16_t *drop;        /* UPDATE: groups to remove */
    uint32_t ndrop;
    const uint16_t *cols;        /* LOOKUP: groups wanted. cols == NULL: all;
                                    ncols == 0 with cols != NULL: none */
    uint32_t ncols;
    uint64_t expect_version;     /* with XT_F_IF_VER */
    uint64_t expect_uuid;        /* with XT_F_IF_UUID */
    const uint8_t *fwd_bitmap;   /* MDS -> MDS forward: the sender's bitmap
                                    encoding of the table, or NULL */
    uint32_t fwd_bitmap_len;
};

/* Its result. Buffers are xt_malloc'd; free with xt_resp_free. */
struct xt_resp {
    int status;                  /* 0 or -errno */
    uint8_t *row;                /* the row's xt_row encoding, or NULL */
    size_t row_len;
    uint8_t *bitmap;             /* piggybacked bitmap encoding, or NULL */
    uint32_t bitmap_len;
    int64_t ring_version;        /* piggybacked; -1 when absent */
    uint64_t commit_group;       /* the group holding this change */
    uint32_t epoch;              /* incarnation of the MDS that answered; 0:
                                    unknown. Commit groups count per epoch. */
    uint32_t epoch_site;         /* the R2 site id of that MDS when a forward
                                    answered (the change sits there); 0: the
                                    MDS called. A server handler that sets
                                    epoch passes it through (the glue stamps
                                    its own only when epoch is 0). */
};
void xt_resp_free(struct xt_resp *r);

struct xt_list_req {
    struct xt_tref t;
    uint64_t cookie;             /* resume point (xt_hash.h) */
    uint32_t max;                /* entries wanted, 1..4096 */
    uint32_t flags;              /* XT_F_BITMAP; XT_F_SYS: system rows too */
    const uint16_t *cols;        /* as xt_req.cols */
    uint32_t ncols;
    const void *substr;          /* key/value search: keys containing it */
    uint32_t substr_len;
    const uint8_t *fwd_bitmap;   /* as xt_req.fwd_bitmap */
    uint32_t fwd_bitmap_len;
};

struct xt_list_resp {
    size_t n;
    uint8_t **rows;              /* n encodings; xt_malloc'd */
    size_t *lens;
    uint64_t *cookies;
    uint64_t next_cookie;        /* XT_COOKIE_END at the end of the table */
    uint8_t *bitmap;
    uint32_t bitmap_len;
    int64_t ring_version;
};
void xt_list_resp_free(struct xt_list_resp *r);
/* Appends one row (copied) with its cookie. Returns 0 or -ENOMEM. */
int xt_list_resp_add(struct xt_list_resp *r, const void *row, size_t len, uint64_t cookie);

/* ---- client calls ------------------------------------------------------ */

/* One operation. Returns resp->status (0 or -errno), or a transport error
 * (then resp holds nothing). */
int xt_mds_call(xt_rpc_pool *p, const xt_rpc_call *call, const struct xt_req *req,
                struct xt_resp *resp);
/* n operations in one round trip, applied one after the other in their
 * order; each is atomic on its row, and resps[i] gets each result.
 * Returns 0 if the batch travelled, or -errno. */
int xt_mds_batch(xt_rpc_pool *p, const xt_rpc_call *call, const struct xt_req *reqs,
                 size_t n, struct xt_resp *resps);
/* One batch of xt_mds_batch_each: its destination and ops (borrowed for
 * the call), its results (filled when rc is 0) and its answer rc. */
struct xt_mds_batch_to {
    xt_rpc_pool *pool;
    const xt_rpc_call *call;
    const struct xt_req *reqs;
    size_t n;
    struct xt_resp *resps;
    int rc;                      /* out: as xt_mds_batch's */
};
/* nb batches at once, each on its own connection (to one MDS or several):
 * every request is sent before any reply is read, so the MDS apply them
 * together and the caller waits about one round trip for all. */
void xt_mds_batch_each(struct xt_mds_batch_to *b, size_t nb);
/* XT_BATCH_ATOMIC (pom.thrift): n (1..XT_BATCH_ATOMIC_MAX) operations on
 * different rows that all apply, in one commit group, or none does. Inside
 * it a CREATE with XT_F_IF_VER replaces an existing row only at version
 * expect_version (-ENOENT absent, -ESTALE other), and a LOOKUP checks that
 * the row exists (at expect_version with XT_F_IF_VER) and returns no row.
 * Returns 0 (every resps[i] filled: commit_group), the first failing op's
 * -errno with *failed = its index (nothing applied; resps[i].status tell
 * which), or a transport error (*failed = SIZE_MAX; resps hold nothing). */
#define XT_BATCH_ATOMIC     0x1
#define XT_BATCH_ATOMIC_MAX 16
int xt_mds_batch_atomic(xt_rpc_pool *p, const xt_rpc_call *call, const struct xt_req *reqs,
                        size_t n, struct xt_resp *resps, size_t *failed);
/* A *loose* op of an atomic batch (docs/mds-xact.md "Loose and strict ops"): a
 * parent's times and/or subdirectory count -- an UPDATE conditioned on
 * nothing but the row's identity, commutative with every other such update
 * of the row, which every create in the directory makes. Whoever splits a
 * batch whose rows sit at several MDS (the coordinating MDS, or a client
 * whose view already places them apart) runs these around the rest, not
 * in it: times-only updates before (a parent removed meanwhile stops the
 * batch), count deltas after (never for an entry that was not made). */
static inline bool xt_req_loose(const struct xt_req *q)
{
    const uint32_t ok = XT_ROW_SET_ATIME | XT_ROW_SET_MTIME | XT_ROW_SET_CTIME |
                        XT_ROW_SET_NLINK_ADD | XT_ROW_SET_ENTRY_ADD | XT_ROW_SET_ENTRY_DEL;
    return q->op == XT_OP_UPDATE && !(q->flags & (XT_F_IF_VER | XT_F_SYS)) &&
           !(q->set_mask & ~ok) && q->ndrop == 0 && (!q->row || q->row->ngroups == 0);
}
/* The two sides of that rule: a loose op that runs before the rest (times
 * only) and one that runs after it (a count delta). */
static inline bool xt_req_loose_before(const struct xt_req *q)
{
    return xt_req_loose(q) && !(q->set_mask & XT_ROW_SET_NLINK_ADD);
}
static inline bool xt_req_loose_after(const struct xt_req *q)
{
    return xt_req_loose(q) && (q->set_mask & XT_ROW_SET_NLINK_ADD);
}
int xt_mds_list(xt_rpc_pool *p, const xt_rpc_call *call, const struct xt_list_req *req,
                struct xt_list_resp *resp);
/* Returns when commit group `group` (0: everything acknowledged so far) has
 * committed; *committed gets the newest committed group, *epoch (may be
 * NULL) the incarnation of the MDS that answered: a sync only vouches for
 * changes acknowledged by that same incarnation. */
int xt_mds_sync(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t group, uint64_t *committed,
                uint32_t *epoch);

/* One table's bitmap in a gossip message (pointers borrowed). */
struct xt_table_bitmap {
    uint32_t fsid;
    uint64_t table;
    const uint8_t *bitmap;       /* xt_bitmap encoding */
    uint32_t len;
};
/* Bitmap gossip (MDS -> MDS): *new_bits (may be NULL) gets the bits the
 * receiver did not have. 0 or -errno. */
int xt_mds_gossip(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t from_site,
                  const struct xt_table_bitmap *t, size_t n, uint32_t *new_bits);

/* Slice handover (MDS -> MDS, docs/mds-dist.md stage 2): asks the MDS
 * behind p to write back and drop slice (fsid, table, slice) (MDS_META_SLICE:
 * stop writing the table's bitmap) because ring 0 of ring_version gives it
 * to from_site. 0: not held there any more; -EAGAIN: its ring is older or
 * the write-back is still running (ask again). *clean_version (may be NULL)
 * gets the ring version up to which that MDS holds no slice of another. */
int xt_mds_release(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t from_site, uint32_t fsid,
                   uint64_t table, uint32_t slice, uint64_t ring_version,
                   uint64_t *clean_version);

/* ---- server ------------------------------------------------------------ */

struct xt_mds_ops {
    struct xt_rpc_common_ops common;
    /* Fills resp (its buffers xt_malloc'd; the glue frees them). Returns
     * the status, which is also the reply's. req->name_hash is as sent:
     * the server checks it against the name. */
    int (*op)(void *ctx, const xt_rpc_ctx *rc, const struct xt_req *req,
              struct xt_resp *resp);
    /* n XT_OP_LOOKUP requests of one non-atomic batch, side by side in it
     * (n >= 1): resps[i] and status[i] exactly as op(reqs[i]) would give,
     * served in one pass where it can. NULL: op, one by one. */
    void (*lookups)(void *ctx, const xt_rpc_ctx *rc, const struct xt_req *reqs, size_t n,
                    struct xt_resp *resps, int *status);
    int (*list)(void *ctx, const xt_rpc_ctx *rc, const struct xt_list_req *req,
                struct xt_list_resp *resp);
    int (*sync)(void *ctx, const xt_rpc_ctx *rc, uint64_t group, uint64_t *committed);
    /* The server's incarnation, stamped on every XtResp and SyncResp (may
     * be NULL: 0). Must not block. */
    uint32_t (*epoch)(void *ctx);
    /* An XT_BATCH_ATOMIC batch (checked: 1..XT_BATCH_ATOMIC_MAX ops, valid
     * flags and names). Fills resps[0..n) as op does; returns 0 or the
     * first failing op's -errno with *failed = its index. NULL: -ENOSYS. */
    int (*batch_atomic)(void *ctx, const xt_rpc_ctx *rc, const struct xt_req *reqs, size_t n,
                        struct xt_resp *resps, size_t *failed);
    /* Bitmap gossip: merge t[0..n) (views valid during the call); returns
     * the number of new bits or -errno. NULL: -ENOSYS. */
    int (*gossip)(void *ctx, const xt_rpc_ctx *rc, uint32_t from_site,
                  const struct xt_table_bitmap *t, size_t n);
    /* Slice handover (xt_mds_release): 0 or -errno; *clean_version as
     * there. NULL: -ENOSYS. */
    int (*release)(void *ctx, const xt_rpc_ctx *rc, uint32_t from_site, uint32_t fsid,
                   uint64_t table, uint32_t slice, uint64_t ring_version,
                   uint64_t *clean_version);
};

int xt_rpc_serve_mds(const struct xt_rpc_server_opts *opts, const struct xt_mds_ops *ops,
                     void *ctx, xt_rpc_server **out);

#ifdef __cplusplus
}
#endif
#endif /* XT_RPC_MDS_H */
