/*
 * mds_service.c -- xTable RPC handlers over mds_table.
 *
 * The MDS stores rows as xt_row encodings. This layer builds them from the
 * views that arrive (the name always comes from the request, so a row can
 * never be filed under a name it does not carry), applies updates with
 * xt_row_update under the slice lock (conditional on the version when asked),
 * filters column groups on the way out, and turns XT_F_SYNC into a wait for
 * the commit group holding the change.
 *
 * A create on a table that does not exist yet creates it: tables are named
 * by directory uuids that the client allocates, and a directory's first
 * entry is what brings its table into being. Lookups and lists of a table
 * that was never created answer -ENOENT.
 *
 * Many MDS (docs/mds-dist.md): a request for a slice this MDS does not
 * own (-EREMOTE from the table) is forwarded, same request id, hops + 1,
 * with this MDS's bitmap of the table, to the owner of the slice this
 * MDS's bitmap picks; a forwarded request's bitmap is merged before
 * routing. A request that would pass MDS_HOPS_MAX hops answers -ELOOP.
 * The answering MDS attaches its bitmap when the request was forwarded or
 * the client's slice_hint was not the slice that served it. An atomic
 * batch touching a slice owned elsewhere is coordinated here (mds_xact.h,
 * docs/mds-xact.md); without transactions it answers -EXDEV (the client
 * runs its ops one by one).
 *
 * XT_F_UPSERT (a key/value put): an update that finds no row creates it
 * from the whole row sent, exclusively, and updates the row another
 * client created in between (upsert_create); never in an atomic batch.
 *
 * An XT_BATCH_ATOMIC batch becomes one mds_table_atomic call (all rows or
 * none, in one commit group; docs/mds-commit.md "Atomic batches"): CREATE
 * -> MDS_AOP_CREATE (with XT_F_IF_VER a replace of the row at that
 * version), LOOKUP -> MDS_AOP_CHECK, UPDATE and DELETE as the single ops
 * do them.
 *
 * A directory's own row update that rides with a change of its entries
 * carries XT_ROW_SET_ENTRY_ADD/DEL (xt_row.h): it fails -EPERM, and with it
 * the batch, when the directory's inode flags (immutable, append-only)
 * forbid that change, so the rule holds for every client at once.
 *
 * System rows (names starting 00 FF, xt_hash.h, docs/mds-xact.md) hold
 * transaction state: a request naming one answers -EINVAL unless it carries
 * XT_F_SYS (MDS-to-MDS calls only), and lists return them only with
 * XT_F_SYS (read by pomctl fsck, which counts and checks them).
 */
#include "mds_service.h"
#include "mds_outbox.h"

#include "xt_common.h"
#include "xt_hash.h"
#include "xt_ns.h"

#include <string.h>

static uint64_t ms_since(uint64_t t0)
{
    return xt_mono_ns() - t0;
}

/* A copy of row keeping only the wanted groups (cols == NULL: all). */
static int filter_cols(const uint8_t *row, size_t len, const uint16_t *cols, uint32_t ncols,
                       uint8_t **out, size_t *out_len)
{
    if (!cols) {
        *out = xt_malloc(len);
        if (!*out)
            return -ENOMEM;
        memcpy(*out, row, len);
        *out_len = len;
        return 0;
    }
    xt_row v;
    int rc = xt_row_decode(row, len, &v);
    if (rc) {
        XT_ERR("mds: stored row does not decode: %s", xt_row_last_error());
        return -EIO;
    }
    xt_row keep = v;
    keep.ngroups = 0;
    for (uint32_t i = 0; i < v.ngroups; i++)
        for (uint32_t j = 0; j < ncols; j++)
            if (v.groups[i].id == cols[j])
                keep.groups[keep.ngroups++] = v.groups[i];
    return xt_row_encode_alloc(&keep, out, out_len);
}

/* -EINVAL when req's name_hash is not its name's: the row would be placed
 * in, or looked for in, another slice than its name's. Checked once, where
 * a request arrives (svc_op, svc_batch_atomic); everything below uses the
 * carried hash. Logged at DBG: any client can send it. */
static int hash_check(const struct xt_req *req)
{
    if (req->name_hash == xt_hash_name(req->name, req->name_len))
        return 0;
    XT_DBG("mds: refused op %d on fs %u table %llu: name hash %016llx is not its name's",
           req->op, req->t.fsid, (unsigned long long)req->t.table,
           (unsigned long long)req->name_hash);
    return -EINVAL;
}

/* -EINVAL when req names a system row without XT_F_SYS: only the MDS
 * write them. Logged at DBG: any client can send such a name. */
static int sys_check(const struct xt_req *req)
{
    if (!xt_hash_is_sys(req->name, req->name_len) || (req->flags & XT_F_SYS))
        return 0;
    XT_DBG("mds: refused op %d on a system row name (%u bytes) of fs %u table %llu "
           "without XT_F_SYS", req->op, req->name_len, req->t.fsid,
           (unsigned long long)req->t.table);
    return -EINVAL;
}

static int maybe_sync(struct mds_service *svc, const struct xt_req *req, uint64_t gen)
{
    if (!(req->flags & XT_F_SYNC))
        return 0;
    return mds_group_sync(svc->group, gen, svc->sync_timeout_ms ? svc->sync_timeout_ms : 60000);
}

/* Merge a forwarding MDS's bitmap (mds_table_merge) before routing. */
static void merge_fwd(struct mds_service *svc, const xt_rpc_ctx *rc, const struct xt_tref *t,
                      const uint8_t *bm, uint32_t len)
{
    if (rc) /* (no rc: the transaction layer's own routed op, not a request) */
        mds_stats_add(svc->stats, MDS_CTR_REQUESTS, 1);
    if (rc && rc->hops >= 2)
        mds_stats_add(svc->stats, MDS_CTR_FORWARDS_LOOPED, 1);
    if (rc && rc->hops >= 1)
        mds_stats_add(svc->stats, MDS_CTR_REMOTE_ANSWERS, 1);
    if (!svc->route || !bm)
        return;
    int n = mds_table_merge(svc->table, t->fsid, t->table, bm, len);
    if (n > 0)
        mds_route_changed(svc->route, t->fsid, t->table);
}

static void merge_fwd_reply(struct mds_service *svc, const struct xt_tref *t, const uint8_t *bm,
                            uint32_t len)
{
    if (mds_table_merge(svc->table, t->fsid, t->table, bm, len) > 0)
        mds_route_changed(svc->route, t->fsid, t->table);
}

/* Whether the reply must carry the bitmap (forwarded, or a wrong hint). */
static bool want_bitmap(struct mds_service *svc, const xt_rpc_ctx *rc, const struct xt_tref *t,
                        uint64_t h)
{
    if (!svc->route)
        return false;
    if (rc && rc->hops > 0)
        return true;
    uint32_t slice;
    return mds_table_pick(svc->table, t->fsid, t->table, h, &slice) == 0 &&
           (int64_t)slice != (int64_t)t->slice_hint;
}

/* Where to forward a request for hash h: 0 and *pool, or -errno (-ELOOP
 * past the hop limit, -EAGAIN when the ring says the slice is ours after
 * all -- the ring changed meanwhile -- or when the slice's split has not
 * committed). *bm gets this MDS's bitmap (xt_free). */
static int forward_to(struct mds_service *svc, const xt_rpc_ctx *rc, const struct xt_tref *t,
                      uint64_t h, xt_rpc_pool **pool, uint32_t *slice, uint32_t *site_out,
                      uint8_t **bm, size_t *bm_len)
{
    *bm = NULL;
    if (!svc->route)
        return -EIO;
    uint32_t site;
    int r = mds_table_pick(svc->table, t->fsid, t->table, h, slice);
    if (r == 0)
        r = mds_route_owner(svc->route, t->fsid, t->table, *slice, &site);
    if (r < 0)
        return r == -ENOENT ? -EAGAIN : r;
    if (site == mds_route_self(svc->route))
        return -EAGAIN;
    /* A split child whose group has not committed: its owner could not
     * load it yet, and must not learn of it from us before (mds_table.h
     * invariant 9). The client retries. */
    if (!mds_table_told(svc->table, t->fsid, t->table, *slice))
        return -EAGAIN;
    /* A forwarding MDS with a newer ring 0 than ours sent it here: ours is
     * about to change (the next heartbeat); sending it back would bounce
     * until the hop limit. The client retries. */
    if (rc && rc->hops > 0 && rc->ring_version > 0 &&
        (uint64_t)rc->ring_version > mds_route_ring_version(svc->route))
        return -EAGAIN;
    int hops = rc ? rc->hops : 0;
    if (hops + 1 > MDS_HOPS_MAX) {
        XT_ERR("forward loop: fs %u table %llu slice %u (ring 0 v%llu): %d hops, giving up",
               t->fsid, (unsigned long long)t->table, *slice,
               (unsigned long long)mds_route_ring_version(svc->route), hops);
        mds_stats_add(svc->stats, MDS_CTR_FORWARD_ERRORS, 1);
        return -ELOOP;
    }
    if (!(*pool = mds_route_pool(svc->route, site)))
        return -EHOSTUNREACH;
    *site_out = site;
    r = mds_table_bitmap(svc->table, t->fsid, t->table, bm, bm_len);
    if (r < 0)
        return r;
    if (rc)
        mds_stats_add(svc->stats, MDS_CTR_FORWARDS, 1);
    return 0;
}

/* The call of a forward: same id, one more hop, the caller's budget left. */
static xt_rpc_call forward_call(struct mds_service *svc, const xt_rpc_ctx *rc)
{
    xt_rpc_call c = { .req_id = rc ? rc->req_id : 0, .hops = (rc ? rc->hops : 0) + 1,
                      .ring_version = (int64_t)mds_route_ring_version(svc->route) };
    if (rc && rc->deadline_ns) {
        uint64_t now = xt_mono_ns();
        uint64_t left = rc->deadline_ns > now ? (rc->deadline_ns - now) / 1000000u : 1;
        c.timeout_ms = (int)XT_MIN(XT_MAX(left, (uint64_t)1), (uint64_t)600000);
    }
    return c;
}

static int forward_op(struct mds_service *svc, const xt_rpc_ctx *rc, const struct xt_req *req,
                      struct xt_resp *resp)
{
    xt_rpc_pool *pool;
    uint32_t slice, site;
    uint8_t *bm;
    size_t bm_len;
    int r = forward_to(svc, rc, &req->t, req->name_hash, &pool, &slice, &site, &bm, &bm_len);
    if (r < 0)
        return r;
    struct xt_req fw = *req;
    fw.t.slice_hint = (int32_t)slice;
    fw.fwd_bitmap = bm;
    fw.fwd_bitmap_len = (uint32_t)bm_len;
    xt_rpc_call call = forward_call(svc, rc);
    xt_resp_free(resp);
    r = xt_mds_call(pool, &call, &fw, resp);
    xt_free(bm);
    if (r < 0 && resp->status == 0) /* transport: the client retries */
        mds_stats_add(svc->stats, MDS_CTR_FORWARD_ERRORS, 1);
    if (resp->bitmap) /* learn what the owner knows */
        merge_fwd_reply(svc, &req->t, resp->bitmap, resp->bitmap_len);
    /* The change sits at the owner: the client must track its epoch (an
     * owner restart that loses it must fail the client's next sync). */
    if (resp->epoch && !resp->epoch_site)
        resp->epoch_site = site;
    return r;
}

static int piggyback(struct mds_service *svc, const struct xt_tref *t, uint32_t flags,
                     uint8_t **bitmap, uint32_t *len)
{
    if (!(flags & XT_F_BITMAP))
        return 0;
    size_t blen = 0;
    int rc = mds_table_bitmap(svc->table, t->fsid, t->table, bitmap, &blen);
    *len = (uint32_t)blen;
    return rc == -ENOENT ? 0 : rc;
}

/* The encoding of a create's new row (name from the request, version 0):
 * -EINVAL for a missing or malformed row, -ENAMETOOLONG, -ENOMEM.
 * *enc is xt_malloc'd. */
static int encode_new_row(const struct xt_req *req, uint8_t **enc, size_t *len)
{
    return req->row ? xt_row_encode_new(req->row, req->name, req->name_len, enc, len) : -EINVAL;
}

/* A full MDSL disk (mds_group_space_short): a client's write that adds
 * data is refused at once, so the groups that follow shrink and commit from
 * the MDSL's reserve; deletes, truncates, renames, attribute changes and the
 * system's own rows (transactions in flight) go on. */
static bool refuse_growth(mds_group *g, const struct xt_req *req)
{
    return g && !(req->flags & XT_F_SYS) && mds_group_space_short(g);
}

static int do_create(struct mds_service *svc, const struct xt_req *req, struct xt_resp *resp)
{
    if (refuse_growth(svc->group, req))
        return -ENOSPC;
    uint8_t *enc;
    size_t len;
    int rc = encode_new_row(req, &enc, &len);
    if (rc)
        return rc;
    unsigned flags = (req->flags & XT_F_EXCL) ? MDS_TABLE_EXCL : 0;
    uint64_t gen = 0;
    rc = mds_table_create(svc->table, req->t.fsid, req->t.table, req->name, req->name_len,
                          req->name_hash, enc, len, flags, &gen);
    if (rc == -ENOENT) {
        uint64_t g2 = 0;
        int mk = mds_table_mktable(svc->table, req->t.fsid, req->t.table, &g2);
        if (mk && mk != -EEXIST)
            rc = mk;
        else
            rc = mds_table_create(svc->table, req->t.fsid, req->t.table, req->name,
                                  req->name_len, req->name_hash, enc, len, flags, &gen);
        if (g2 > gen)
            gen = g2;
    }
    xt_free(enc);
    if (rc < 0)
        return rc;
    resp->commit_group = gen;
    return maybe_sync(svc, req, gen);
}

struct upd_arg {
    const struct xt_req *req;
    mds_group *group;
};

/* XT_F_IF_UUID: the row must still be the same file (a name created
 * again restarts its version at 0, so the version alone can repeat). */
static int uuid_check(const struct xt_req *req, const void *row, size_t len)
{
    if (!(req->flags & XT_F_IF_UUID))
        return 0;
    xt_row v;
    if (xt_row_decode_meta(row, len, &v))
        return -EIO;
    return v.attr.uuid == req->expect_uuid ? 0 : -ESTALE;
}

/* XT_ROW_SET_ENTRY_ADD/DEL: a directory's entries change only while its
 * inode flags allow it (xt_row.h). Checked here, under the slice lock
 * with the update, so every client sees a chattr of the directory at once. */
static int entry_check(const struct xt_req *req, const void *row, size_t len)
{
    uint32_t deny = 0;
    if (req->set_mask & XT_ROW_SET_ENTRY_ADD)
        deny |= XT_NS_ROW_F_IMMUTABLE;
    if (req->set_mask & XT_ROW_SET_ENTRY_DEL)
        deny |= XT_NS_ROW_F_FIXED;
    if (!deny)
        return 0;
    xt_row v;
    if (xt_row_decode_meta(row, len, &v))
        return -EIO;
    return v.attr.flags & deny ? -EPERM : 0;
}

static int update_fn(void *arg, const void *old, size_t old_len, uint8_t **out, size_t *out_len)
{
    const struct xt_req *req = ((struct upd_arg *)arg)->req;
    mds_group *g = ((struct upd_arg *)arg)->group;
    int rc = uuid_check(req, old, old_len);
    if (rc == 0)
        rc = entry_check(req, old, old_len);
    if (rc < 0)
        return rc;
    xt_row_patch p;
    memset(&p, 0, sizeof p);
    /* Name and type changes are not updates: rename is its own operation.
     * NLINK_ADD is applied here, under the slice's write lock, so
     * concurrent mkdirs in one directory need not read its version. */
    p.set = req->set_mask & (XT_ROW_SET_ALL_ATTR | XT_ROW_SET_NLINK_ADD | XT_ROW_SET_TIMES_MAX) &
            ~(XT_ROW_SET_TYPE | XT_ROW_SET_UUID);
    if (req->row) {
        p.attr = req->row->attr;
        p.nput = req->row->ngroups;
        memcpy(p.put, req->row->groups, sizeof(xt_row_group) * p.nput);
    }
    if (req->ndrop > XT_ROW_GROUPS_MAX)
        return -EINVAL;
    p.ndel = req->ndrop;
    if (req->ndrop)
        memcpy(p.del, req->drop, sizeof(uint16_t) * req->ndrop);
    if (req->flags & XT_F_IF_VER) {
        p.set |= XT_ROW_SET_IF_VERSION;
        p.if_version = req->expect_version;
    }
    rc = xt_row_update(old, old_len, &p, out, out_len);
    /* Growth is data a group puts: attributes alone may re-encode a byte
     * or two longer (times are varints relative to ctime), and a truncate's
     * ctime update that follows its size must not answer ENOSPC. */
    if (rc == 0 && p.nput > 0 && *out_len > old_len && refuse_growth(g, req)) {
        xt_free(*out);
        *out = NULL;
        rc = -ENOSPC;
    }
    return rc;
}

static int delete_check(void *arg, const void *row, size_t len)
{
    const struct xt_req *req = arg;
    int rc = uuid_check(req, row, len);
    if (rc < 0 || !(req->flags & XT_F_IF_VER))
        return rc;
    xt_row v;
    if (xt_row_decode_meta(row, len, &v))
        return -EIO;
    return v.attr.version == req->expect_version ? 0 : -ESTALE;
}

/* XT_F_UPSERT: an unconditional update carrying a whole row. */
static int upsert_check(const struct xt_req *req)
{
    if (!(req->flags & XT_F_UPSERT))
        return 0;
    return req->row && !(req->flags & (XT_F_IF_VER | XT_F_IF_UUID | XT_F_SOFT)) ? 0 : -EINVAL;
}

/* The update of an XT_F_UPSERT found no row: create it (exclusive, so a
 * row's version still counts every change since its creation), and when
 * another client created it meanwhile, update that one. *gen as the
 * update's; a create's own group is in resp->commit_group. */
static int upsert_create(struct mds_service *svc, const struct xt_req *req,
                         struct upd_arg *ua, struct xt_resp *resp, uint64_t *gen)
{
    struct xt_req c = *req;
    c.op = XT_OP_CREATE;
    c.flags |= XT_F_EXCL;
    int rc = -ENOENT;
    for (int attempt = 0; attempt < 100 && rc == -ENOENT; attempt++) {
        rc = do_create(svc, &c, resp);
        if (rc == -EEXIST)
            rc = mds_table_update(svc->table, req->t.fsid, req->t.table, req->name,
                                  req->name_len, req->name_hash, update_fn, ua, gen);
        else if (rc == 0)
            *gen = resp->commit_group;
    }
    return rc;
}

static int svc_op(void *ctx, const xt_rpc_ctx *rc_ctx, const struct xt_req *req,
                  struct xt_resp *resp)
{
    struct mds_service *svc = ctx;
    uint64_t t0 = xt_mono_ns(), gen = 0;
    /* A request (rc_ctx) is checked here; the MDS's own ops (op_here) are
     * built with their hash (REQUIRES). */
    int rc = rc_ctx ? hash_check(req) : 0;
    assert(rc_ctx || req->name_hash == xt_hash_name(req->name, req->name_len));
    if (rc < 0)
        return rc;
    merge_fwd(svc, rc_ctx, &req->t, req->fwd_bitmap, req->fwd_bitmap_len);
    rc = sys_check(req);
    if (rc < 0)
        return rc;
    if (req->flags & XT_F_RMU)
        return -EINVAL; /* a copy only travels in an atomic batch */
    enum mds_op op;
    switch (req->op) {
    case XT_OP_CREATE:
        op = MDS_OP_CREATE;
        rc = do_create(svc, req, resp);
        break;
    case XT_OP_LOOKUP: {
        op = MDS_OP_LOOKUP;
        uint8_t *row;
        size_t len;
        /* A synced lookup of a pending row settles it first (mds_xact_settle). */
        if (svc->xact && (req->flags & (XT_F_SYS | XT_F_SYNC)) == (XT_F_SYS | XT_F_SYNC) &&
            (rc = mds_xact_settle(svc->xact, req->t.fsid, req->t.table, req->name,
                                  req->name_len)) < 0 && rc != -EREMOTE)
            break;
        rc = mds_table_lookup(svc->table, req->t.fsid, req->t.table, req->name, req->name_len,
                              req->name_hash, &row, &len);
        /* A parent's count shows the RMU deltas not delivered yet (not to
         * the transactions' own reads, XT_F_SYS). */
        if (rc == 0 && svc->soft && !(req->flags & XT_F_SYS) &&
            (rc = mds_soft_show(svc->soft, req->t.fsid, req->t.table, req->name,
                                req->name_len, &row, &len)) < 0)
            xt_free(row);
        if (rc == 0) {
            if (req->cols) {
                rc = filter_cols(row, len, req->cols, req->ncols, &resp->row, &resp->row_len);
                xt_free(row);
            } else {
                resp->row = row;
                resp->row_len = len;
            }
        }
        break;
    }
    case XT_OP_UPDATE: {
        op = MDS_OP_UPDATE;
        struct upd_arg ua = { req, svc->group };
        /* The eager half of an RMU (mds_soft.h): the times are stored, the
         * count only shown, until the sender's outbox row delivers it. */
        struct xt_req times = *req;
        xt_row trow;
        bool soft = (req->flags & XT_F_SOFT) != 0;
        uint64_t soft_id = 0;
        if (soft) {
            /* One delta, named by its outbox row's id (mds_soft.h (2)),
             * which is never stored. */
            const uint8_t *ids;
            size_t nids;
            if (!(req->flags & XT_F_SYS) || !(req->set_mask & XT_ROW_SET_NLINK_ADD) ||
                mds_soft_ids(req->row, &ids, &nids) < 0 || nids != 1 ||
                (soft_id = xt_get_u64(ids)) == 0) {
                rc = -EINVAL;
                break;
            }
            trow = *req->row;
            (void)xt_row_view_del_group(&trow, XT_CG_RMU_IDS);
            times.row = &trow;
            times.set_mask &= ~XT_ROW_SET_NLINK_ADD;
            ua.req = &times;
        }
        rc = upsert_check(req);
        if (rc == 0)
            rc = mds_table_update(svc->table, req->t.fsid, req->t.table, req->name,
                                  req->name_len, req->name_hash, update_fn, &ua, &gen);
        if (rc == -ENOENT && (req->flags & XT_F_UPSERT))
            rc = upsert_create(svc, req, &ua, resp, &gen);
        if (rc == 0 && soft && svc->soft)
            rc = mds_soft_add(svc->soft, req->t.fsid, req->t.table, req->name, req->name_len,
                              soft_id, (int32_t)req->row->attr.nlink);
        if (soft)
            XT_DBG("rmu: %.*s of table %llu: %+d shown: %d", (int)req->name_len,
                   (const char *)req->name, (unsigned long long)req->t.table,
                   (int32_t)req->row->attr.nlink, rc);
        if (rc == 0) {
            resp->commit_group = gen;
            rc = maybe_sync(svc, req, gen);
        }
        break;
    }
    case XT_OP_DELETE:
        op = MDS_OP_DELETE;
        rc = mds_table_delete(svc->table, req->t.fsid, req->t.table, req->name, req->name_len,
                              req->name_hash, delete_check, (void *)req, &gen);
        if (rc == 0) {
            resp->commit_group = gen;
            rc = maybe_sync(svc, req, gen);
        }
        break;
    default:
        return -EINVAL;
    }
    if (rc > 0)
        rc = 0;
    if (rc == -EREMOTE) {
        rc = forward_op(svc, rc_ctx, req, resp);
        mds_stats_record(svc->stats, op, ms_since(t0), rc);
        return rc;
    }
    if (rc == 0 || rc == -ENOENT || rc == -EEXIST) {
        uint32_t fl = req->flags;
        if (want_bitmap(svc, rc_ctx, &req->t, req->name_hash))
            fl |= XT_F_BITMAP;
        int prc = piggyback(svc, &req->t, fl, &resp->bitmap, &resp->bitmap_len);
        if (prc < 0 && rc == 0)
            rc = prc;
    }
    mds_stats_record(svc->stats, op, ms_since(t0), rc);
    return rc;
}

/* Whether lookup req may be answered by svc_lookups' one pass: a plain
 * client lookup of table (t) here, its hash checked; anything else (a
 * forward, a system row, a settle, a bitmap asked for) goes through svc_op. */
static bool plain_lookup(const xt_rpc_ctx *rc_ctx, const struct xt_req *req,
                         const struct xt_tref *t)
{
    return req->op == XT_OP_LOOKUP && req->t.fsid == t->fsid && req->t.table == t->table &&
           !req->fwd_bitmap && !(rc_ctx && rc_ctx->hops > 0) &&
           !(req->flags & (XT_F_SYS | XT_F_RMU | XT_F_BITMAP)) &&
           !xt_hash_is_sys(req->name, req->name_len) && hash_check(req) == 0;
}

/* Lookups reqs[0..n) (xt_mds_ops.lookups): the plain ones of reqs[0]'s
 * table in one mds_table_lookup_many pass; each answer that pass cannot
 * give as svc_op would (another MDS's slice, a pending row, a wrong slice
 * hint that wants the bitmap, another table) is svc_op's. */
static void svc_lookups(void *ctx, const xt_rpc_ctx *rc_ctx, const struct xt_req *reqs,
                        size_t n, struct xt_resp *resps, int *status)
{
    struct mds_service *svc = ctx;
    uint64_t t0 = xt_mono_ns();
    struct mds_table_get *g = n ? xt_calloc(n, sizeof *g) : NULL;
    bool *fast = n ? xt_calloc(n, sizeof *fast) : NULL;
    size_t nf = 0;
    for (size_t i = 0; g && fast && i < n; i++)
        if ((fast[i] = plain_lookup(rc_ctx, &reqs[i], &reqs[0].t))) {
            g[nf++] = (struct mds_table_get){ .name = reqs[i].name,
                                              .name_len = reqs[i].name_len,
                                              .h = reqs[i].name_hash };
        }
    if (nf)
        mds_table_lookup_many(svc->table, reqs[0].t.fsid, reqs[0].t.table, g, nf);
    uint64_t each = nf ? (xt_mono_ns() - t0) / nf : 0;
    for (size_t i = 0, k = 0; i < n; i++) {
        struct mds_table_get *q = fast && fast[i] ? &g[k++] : NULL;
        const struct xt_req *req = &reqs[i];
        /* Served from the slice the client named: no bitmap to piggyback
         * (want_bitmap), as svc_op would answer. */
        bool done = q && (q->rc == 0 || q->rc == -ENOENT) && q->slice != UINT32_MAX &&
                    (!svc->route || (int64_t)q->slice == (int64_t)req->t.slice_hint);
        if (!done) {
            if (q)
                xt_free(q->row);
            status[i] = svc_op(ctx, rc_ctx, req, &resps[i]);
            continue;
        }
        merge_fwd(svc, rc_ctx, &req->t, NULL, 0); /* counts the request */
        int rc = q->rc;
        uint8_t *row = q->row;
        size_t len = q->row_len;
        /* A parent's count shows the RMU deltas not delivered yet. */
        if (rc == 0 && svc->soft &&
            (rc = mds_soft_show(svc->soft, req->t.fsid, req->t.table, req->name,
                                req->name_len, &row, &len)) < 0)
            xt_free(row);
        if (rc == 0 && req->cols) {
            rc = filter_cols(row, len, req->cols, req->ncols, &resps[i].row,
                             &resps[i].row_len);
            xt_free(row);
        } else if (rc == 0) {
            resps[i].row = row;
            resps[i].row_len = len;
        }
        mds_stats_record(svc->stats, MDS_OP_LOOKUP, each, rc);
        status[i] = rc;
    }
    xt_free(g);
    xt_free(fast);
}

struct list_arg {
    const struct xt_list_req *req;
    struct xt_list_resp *resp;
};

/* A key/value key longer than a row name is kept whole in group XT_CG_KEY
 * of a row whose name is a prefix-and-digest form of XT_NAME_MAX bytes
 * (docs/client.md); the search predicate must see the whole key. */
static int long_key_has(const xt_slice_entry *e, const void *sub, size_t sub_len)
{
    const uint8_t *key;
    uint32_t klen;
    if (e->name_len != XT_NAME_MAX ||
        xt_row_get_group(e->row, e->row_len, XT_CG_KEY, &key, &klen) < 0)
        return 0;
    return memmem(key, klen, sub, sub_len) != NULL;
}

static int list_cb(void *arg, const xt_slice_entry *e)
{
    struct list_arg *la = arg;
    const struct xt_list_req *req = la->req;
    /* Transaction state, not an entry (it still counts in max); only an
     * XT_F_SYS list (another MDS, pomctl fsck) sees it. */
    if (!(req->flags & XT_F_SYS) && xt_hash_is_sys(e->name, e->name_len))
        return 0;
    /* The search predicate runs here, at the storage edge: only matching
     * rows travel. */
    if (req->substr && req->substr_len &&
        !memmem(e->name, e->name_len, req->substr, req->substr_len) &&
        !long_key_has(e, req->substr, req->substr_len))
        return 0;
    uint8_t *out;
    size_t out_len;
    int rc = filter_cols(e->row, e->row_len, req->cols, req->ncols, &out, &out_len);
    if (rc == 0) {
        rc = xt_list_resp_add(la->resp, out, out_len, e->cookie);
        xt_free(out);
    }
    return rc;
}

static int svc_list(void *ctx, const xt_rpc_ctx *rc_ctx, const struct xt_list_req *req,
                    struct xt_list_resp *resp)
{
    struct mds_service *svc = ctx;
    uint64_t t0 = xt_mono_ns();
    merge_fwd(svc, rc_ctx, &req->t, req->fwd_bitmap, req->fwd_bitmap_len);
    struct list_arg la = { req, resp };
    uint64_t next = XT_COOKIE_END;
    int rc = mds_table_list(svc->table, req->t.fsid, req->t.table, req->cookie, req->max,
                            list_cb, &la, &next);
    if (rc == -EREMOTE) {
        xt_rpc_pool *pool;
        uint32_t slice, site;
        uint8_t *bm;
        size_t bm_len;
        rc = forward_to(svc, rc_ctx, &req->t, mds_table_cookie_hash(next), &pool, &slice,
                        &site, &bm, &bm_len);
        if (rc == 0) {
            struct xt_list_req fw = *req;
            fw.cookie = next; /* empty slices of ours were skipped */
            fw.t.slice_hint = (int32_t)slice;
            fw.fwd_bitmap = bm;
            fw.fwd_bitmap_len = (uint32_t)bm_len;
            xt_rpc_call call = forward_call(svc, rc_ctx);
            xt_list_resp_free(resp);
            rc = xt_mds_list(pool, &call, &fw, resp);
            xt_free(bm);
            if (rc == 0 && resp->bitmap)
                merge_fwd_reply(svc, &req->t, resp->bitmap, resp->bitmap_len);
        }
        mds_stats_record(svc->stats, MDS_OP_LIST, ms_since(t0), rc < 0 ? rc : 0);
        return rc < 0 ? rc : 0;
    }
    if (rc >= 0) {
        resp->next_cookie = next;
        uint32_t fl = req->flags;
        if (want_bitmap(svc, rc_ctx, &req->t, mds_table_cookie_hash(req->cookie)))
            fl |= XT_F_BITMAP;
        rc = piggyback(svc, &req->t, fl, &resp->bitmap, &resp->bitmap_len);
    }
    mds_stats_record(svc->stats, MDS_OP_LIST, ms_since(t0), rc < 0 ? rc : 0);
    return rc < 0 ? rc : 0;
}

static int svc_sync(void *ctx, const xt_rpc_ctx *rc_ctx, uint64_t group, uint64_t *committed)
{
    (void)rc_ctx;
    struct mds_service *svc = ctx;
    int rc = mds_group_sync(svc->group, group, svc->sync_timeout_ms ? svc->sync_timeout_ms
                                                                    : 60000);
    struct mds_group_info gi;
    mds_group_info(svc->group, &gi);
    *committed = gi.committed_gen;
    return rc;
}

/* ---- atomic batches ---------------------------------------------------- */

/* A CREATE with XT_F_IF_VER (and/or XT_F_IF_UUID) replaces only the row
 * at that version (of that uuid); the same for a LOOKUP check. */
static int version_check(void *arg, const void *row, size_t len)
{
    const struct xt_req *req = arg;
    xt_row v;
    if (xt_row_decode_meta(row, len, &v))
        return -EIO;
    if ((req->flags & XT_F_IF_UUID) && v.attr.uuid != req->expect_uuid)
        return -ESTALE;
    if ((req->flags & XT_F_IF_VER) && v.attr.version != req->expect_version)
        return -ESTALE;
    return 0;
}

/* The mds_aop of one request; *enc gets a CREATE's encoding (xt_free). */
static int to_aop(const struct xt_req *req, struct upd_arg *ua, struct mds_aop *o,
                  uint8_t **enc)
{
    memset(o, 0, sizeof *o);
    o->fsid = req->t.fsid;
    o->table = req->t.table;
    o->name = req->name;
    o->name_len = req->name_len;
    o->h = req->name_hash;
    bool if_ver = (req->flags & (XT_F_IF_VER | XT_F_IF_UUID)) != 0;
    if (req->flags & (XT_F_SOFT | XT_F_UPSERT))
        return -EINVAL; /* a view, never part of an atomic change; an upsert: single ops */
    if (req->flags & XT_F_RMU) {
        /* A copy (newest wins by ctime): the row's, or a delete's stamp. */
        if (!req->row || (req->op != XT_OP_CREATE && req->op != XT_OP_DELETE) ||
            (req->flags & (XT_F_EXCL | XT_F_IF_VER | XT_F_IF_UUID)))
            return -EINVAL;
        o->type = MDS_AOP_COPY;
        o->stamp = req->row->attr.ctime_ns;
        if (req->op == XT_OP_DELETE)
            return 0;
        int rc = encode_new_row(req, enc, &o->row_len);
        o->row = *enc;
        return rc;
    }
    switch (req->op) {
    case XT_OP_CREATE: {
        size_t len;
        int rc = encode_new_row(req, enc, &len);
        if (rc)
            return rc;
        o->type = MDS_AOP_CREATE;
        o->row = *enc;
        o->row_len = len;
        o->flags = (req->flags & XT_F_EXCL) ? MDS_TABLE_EXCL : 0;
        if (if_ver) {
            o->check = version_check;
            o->arg = (void *)req;
        }
        return 0;
    }
    case XT_OP_LOOKUP:
    case XT_OP_DELETE:
        o->type = req->op == XT_OP_LOOKUP ? MDS_AOP_CHECK : MDS_AOP_DELETE;
        o->check = if_ver ? version_check : NULL; /* DELETE: delete_check's rule */
        o->arg = (void *)req;
        return 0;
    case XT_OP_UPDATE:
        /* No space check: an atomic batch moves names and links (renames,
         * mkdir's counts); what adds data comes as a single update. */
        *ua = (struct upd_arg){ req, NULL };
        o->type = MDS_AOP_UPDATE;
        o->fn = update_fn;
        o->arg = ua;
        return 0;
    default:
        return -EINVAL;
    }
}

/* mds_table_atomic; a create into a table that does not exist yet creates
 * the table (as a single create does), then the batch runs again; at most
 * once per op. */
static int atomic_run(struct mds_service *svc, const struct mds_aop *ops, size_t n,
                      size_t *failed, uint64_t *gen)
{
    int rc = 0;
    for (size_t tries = 0; tries <= n; tries++) {
        rc = mds_table_atomic(svc->table, ops, n, failed, gen);
        const struct mds_aop *o = &ops[*failed];
        if (rc != -ENOENT ||
            !((o->type == MDS_AOP_CREATE && !o->check) || o->type == MDS_AOP_COPY))
            break;
        uint64_t g2 = 0;
        int mk = mds_table_mktable(svc->table, ops[*failed].fsid, ops[*failed].table, &g2);
        if (mk < 0 && mk != -EEXIST)
            break; /* answer the -ENOENT */
    }
    return rc;
}

/* reqs[0..n) and the table ops extra[0..nextra) as one atomic batch here,
 * never coordinated (mds_xact_io.batch). */
static int batch_here(void *ctx, const struct xt_req *reqs, size_t n,
                      const struct mds_aop *extra, size_t nextra, struct xt_resp *resps,
                      size_t *failed, uint64_t *gen)
{
    struct mds_service *svc = ctx;
    struct mds_aop ops[MDS_ATOMIC_MAX];
    struct upd_arg ua[MDS_ATOMIC_MAX];
    uint8_t *enc[MDS_ATOMIC_MAX] = { 0 };
    *failed = 0;
    *gen = 0;
    if (n == 0 || n + nextra > MDS_ATOMIC_MAX)
        return -EINVAL;
    int rc = 0;
    bool sync = false;
    for (size_t i = 0; i < n && rc == 0; i++) {
        *failed = i;
        assert(reqs[i].name_hash == xt_hash_name(reqs[i].name, reqs[i].name_len));
        rc = sys_check(&reqs[i]);
        if (rc == 0)
            rc = to_aop(&reqs[i], &ua[i], &ops[i], &enc[i]);
        sync = sync || (reqs[i].flags & XT_F_SYNC);
    }
    for (size_t i = 0; i < nextra; i++)
        ops[n + i] = extra[i];
    if (rc == 0)
        rc = atomic_run(svc, ops, n + nextra, failed, gen);
    for (size_t i = 0; i < n; i++)
        xt_free(enc[i]);
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            resps[i].commit_group = *gen;
        if (sync)
            rc = mds_group_sync(svc->group, *gen,
                                svc->sync_timeout_ms ? svc->sync_timeout_ms : 60000);
        if (rc < 0)
            *failed = 0;
    }
    return rc;
}

/* mds_xact_io.op: a row op served here or forwarded (no caller context). */
static int op_here(void *ctx, const struct xt_req *req, struct xt_resp *resp)
{
    return svc_op(ctx, NULL, req, resp);
}

/* A client's atomic batch whose rows were not all here: it was placed by a
 * bitmap older than ours (a directory that split since the client last
 * asked: an atomic reply carried none until now), so its reply carries
 * our bitmap of each table the batch names, as a forwarded op's does
 * (docs/mds-dist.md "Client routing"): the client's next batches go straight to
 * the right MDS, and it can split off the parents' times itself. */
static void teach_bitmaps(struct mds_service *svc, const struct xt_req *reqs, size_t n,
                          struct xt_resp *resps)
{
    for (size_t i = 0; i < n; i++) {
        bool seen = resps[i].bitmap != NULL;
        for (size_t j = 0; j < i && !seen; j++)
            seen = reqs[j].t.fsid == reqs[i].t.fsid && reqs[j].t.table == reqs[i].t.table;
        if (!seen)
            (void)piggyback(svc, &reqs[i].t, XT_F_BITMAP, &resps[i].bitmap,
                            &resps[i].bitmap_len);
    }
}

static int svc_batch_atomic(void *ctx, const xt_rpc_ctx *rc_ctx, const struct xt_req *reqs,
                            size_t n, struct xt_resp *resps, size_t *failed)
{
    (void)rc_ctx;
    struct mds_service *svc = ctx;
    uint64_t t0 = xt_mono_ns(), gen;
    int rc;
    for (size_t i = 0; i < n; i++)
        if ((rc = hash_check(&reqs[i])) < 0) {
            *failed = i;
            return rc;
        }
    if (mds_xact_is_prepare(reqs, n)) {
        rc = svc->xact ? mds_xact_prepare(svc->xact, reqs, n, resps, failed) : -EXDEV;
    } else {
        /* Rows owned by other MDS: a client's batch is coordinated here; an
         * MDS's own batch (XT_F_SYS) never is (mds_xact.h (5)). A parent's
         * count owned elsewhere goes there at once (an RMU). */
        bool internal = false;
        for (size_t i = 0; i < n; i++)
            internal = internal || (reqs[i].flags & XT_F_SYS);
        /* Copies whose rows sit elsewhere become outbox rows (an RMU). */
        struct mds_outbox_place *hold = NULL;
        const struct xt_req *placed = reqs;
        if (!internal && mds_outbox_has_copy(reqs, n) &&
            (rc = mds_outbox_place(svc->xact, reqs, n, &placed, &hold, failed)) < 0) {
            mds_stats_record(svc->stats, MDS_OP_BATCH, ms_since(t0), rc);
            return rc;
        }
        reqs = placed;
        bool rmu = !internal && svc->xact && mds_xact_count_apart(svc->xact, reqs, n);
        rc = rmu ? -EREMOTE : batch_here(svc, reqs, n, NULL, 0, resps, failed, &gen);
        if (rc == -EREMOTE && !internal) {
            rc = svc->xact ? mds_xact_run(svc->xact, reqs, n, resps, failed) : -EXDEV;
            if (!rmu) /* (sent to the right MDS: the client's view is right) */
                teach_bitmaps(svc, reqs, n, resps);
        }
        mds_outbox_place_free(hold);
    }
    mds_stats_record(svc->stats, MDS_OP_BATCH, ms_since(t0), rc);
    return rc;
}

/* Fixed once the group is open (a new epoch per start, mds_group.h (5)). */
static uint32_t svc_epoch(void *ctx)
{
    return ((struct mds_service *)ctx)->epoch;
}

/* Bitmap gossip and split bits sent home: merge each (the home persists). */
static int svc_gossip(void *ctx, const xt_rpc_ctx *rc_ctx, uint32_t from_site,
                      const struct xt_table_bitmap *t, size_t n)
{
    (void)rc_ctx;
    (void)from_site;
    struct mds_service *svc = ctx;
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        int r = mds_table_merge(svc->table, t[i].fsid, t[i].table, t[i].bitmap, t[i].len);
        if (r == -EBADMSG)
            return r;
        if (r > 0) {
            total += r;
            if (svc->route)
                mds_route_changed(svc->route, t[i].fsid, t[i].table);
        }
    }
    mds_stats_add(svc->stats, MDS_CTR_GOSSIP_NEW_BITS, (uint64_t)total);
    return total;
}

/* Slice handover (docs/mds-dist.md stage 2): mds_route_release. */
static int svc_release(void *ctx, const xt_rpc_ctx *rc_ctx, uint32_t from_site, uint32_t fsid,
                       uint64_t table, uint32_t slice, uint64_t ring_version,
                       uint64_t *clean_version)
{
    (void)rc_ctx;
    struct mds_service *svc = ctx;
    *clean_version = 0;
    if (!svc->route)
        return -ENOSYS;
    struct mds_key k = { fsid, slice, table };
    return mds_route_release(svc->route, from_site, &k, ring_version, clean_version);
}

static const struct xt_mds_ops mds_ops = {
    .common = { .ping = NULL },
    .op = svc_op,
    .lookups = svc_lookups,
    .list = svc_list,
    .sync = svc_sync,
    .epoch = svc_epoch,
    .batch_atomic = svc_batch_atomic,
    .gossip = svc_gossip,
    .release = svc_release,
};

int mds_service_start(struct mds_service *svc, const struct xt_rpc_server_opts *opts,
                      xt_rpc_server **out)
{
    struct mds_group_info gi;
    mds_group_info(svc->group, &gi);
    svc->epoch = gi.epoch;
    if (svc->xact) {
        struct mds_xact_io io = { .ctx = svc, .op = op_here, .batch = batch_here };
        mds_xact_bind(svc->xact, &io);
    }
    return xt_rpc_serve_mds(opts, &mds_ops, svc, out);
}
