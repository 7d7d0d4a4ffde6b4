/*
 * xt_rpc_mds.cpp -- glue of the xTable service: xt_req/xt_resp and xt_row
 * views and encodings <-> XtReq/XtResp and Row. A Row arriving from the
 * network becomes a zero-copy view after xt_row_view_set_group has checked
 * every column id and size; anything it refuses is -EINVAL to the sender.
 * An XT_BATCH_ATOMIC batch is checked op by op here (flags, names, rows)
 * and handed to the server's batch_atomic whole; every result of a failed
 * atomic batch but the failing op's says -ECANCELED.
 */
#include "xt_rpc_i.hpp"
#include "xt_rpc_mds.h"

#include "XTable.h"
#include "xt_common.h"

#include <cstring>
#include <vector>

using pom::glue::ProtoPtr;
using namespace pom::rpc;

/* An empty column list must stay distinguishable from "no list" (NULL). */
static const uint16_t kNoCols[1] = { 0 };

void xt_resp_free(struct xt_resp *r)
{
    if (!r)
        return;
    xt_free(r->row);
    xt_free(r->bitmap);
    memset(r, 0, sizeof *r);
    r->ring_version = -1;
}

void xt_list_resp_free(struct xt_list_resp *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        xt_free(r->rows[i]);
    xt_free(r->rows);
    xt_free(r->lens);
    xt_free(r->cookies);
    xt_free(r->bitmap);
    memset(r, 0, sizeof *r);
    r->ring_version = -1;
}

int xt_list_resp_add(struct xt_list_resp *r, const void *row, size_t len, uint64_t cookie)
{
    if ((r->n & (r->n - 1)) == 0) { /* grow at powers of two */
        size_t cap = r->n ? r->n * 2 : 16;
        auto *rows = static_cast<uint8_t **>(xt_realloc(r->rows, cap * sizeof(uint8_t *)));
        if (!rows)
            return -ENOMEM;
        r->rows = rows;
        auto *lens = static_cast<size_t *>(xt_realloc(r->lens, cap * sizeof(size_t)));
        if (!lens)
            return -ENOMEM;
        r->lens = lens;
        auto *cookies = static_cast<uint64_t *>(xt_realloc(r->cookies, cap * sizeof(uint64_t)));
        if (!cookies)
            return -ENOMEM;
        r->cookies = cookies;
    }
    auto *copy = static_cast<uint8_t *>(xt_malloc(len));
    if (!copy)
        return -ENOMEM;
    memcpy(copy, row, len);
    r->rows[r->n] = copy;
    r->lens[r->n] = len;
    r->cookies[r->n] = cookie;
    r->n++;
    return 0;
}

/* ---- rows -------------------------------------------------------------- */

static void view_to_thrift(const xt_row &v, Row &t)
{
    t.name.assign(reinterpret_cast<const char *>(v.name), v.name_len);
    Attr &a = t.attr;
    a.uuid = (int64_t)v.attr.uuid;
    a.type = (int8_t)v.attr.type;
    a.mode = (int32_t)v.attr.mode;
    a.uid = (int32_t)v.attr.uid;
    a.gid = (int32_t)v.attr.gid;
    a.nlink = (int32_t)v.attr.nlink;
    a.size = (int64_t)v.attr.size;
    a.atime_ns = (int64_t)v.attr.atime_ns;
    a.mtime_ns = (int64_t)v.attr.mtime_ns;
    a.ctime_ns = (int64_t)v.attr.ctime_ns;
    a.btime_ns = (int64_t)v.attr.btime_ns;
    a.flags = (int32_t)v.attr.flags;
    a.generation = (int64_t)v.attr.generation;
    a.version = (int64_t)v.attr.version;
    t.columns.resize(v.ngroups);
    for (uint32_t i = 0; i < v.ngroups; i++) {
        t.columns[i].id = (int16_t)v.groups[i].id;
        t.columns[i].value.assign(reinterpret_cast<const char *>(v.groups[i].ptr),
                                  v.groups[i].len);
    }
}

/* A zero-copy view of t (valid while t lives). -EINVAL on a bad column. */
static int thrift_to_view(const Row &t, xt_row *v)
{
    xt_row_init(v);
    const Attr &a = t.attr;
    v->attr.uuid = (uint64_t)a.uuid;
    v->attr.type = (uint8_t)a.type;
    v->attr.mode = (uint32_t)a.mode;
    v->attr.uid = (uint32_t)a.uid;
    v->attr.gid = (uint32_t)a.gid;
    v->attr.nlink = (uint32_t)a.nlink;
    v->attr.size = (uint64_t)a.size;
    v->attr.atime_ns = (uint64_t)a.atime_ns;
    v->attr.mtime_ns = (uint64_t)a.mtime_ns;
    v->attr.ctime_ns = (uint64_t)a.ctime_ns;
    v->attr.btime_ns = (uint64_t)a.btime_ns;
    v->attr.flags = (uint32_t)a.flags;
    v->attr.generation = (uint64_t)a.generation;
    v->attr.version = (uint64_t)a.version;
    if (t.name.size() > XT_ROW_KEY_MAX)
        return -ENAMETOOLONG;
    v->name = reinterpret_cast<const uint8_t *>(t.name.data());
    v->name_len = (uint32_t)t.name.size();
    for (const Column &c : t.columns) {
        if (c.id <= 0 || c.value.size() > XT_ROW_GROUP_MAX)
            return -EINVAL;
        int rc = xt_row_view_set_group(v, (uint16_t)c.id, c.value.data(),
                                       (uint32_t)c.value.size());
        if (rc)
            return rc == -E2BIG ? -E2BIG : -EINVAL;
    }
    return 0;
}

/* Encoding (from an MDS handler) -> Row; -EIO if it does not decode. */
static int enc_to_thrift(const uint8_t *buf, size_t len, Row &t)
{
    xt_row v;
    if (xt_row_decode(buf, len, &v) != 0) {
        XT_ERR("rpc: handler produced an undecodable row: %s", xt_row_last_error());
        return -EIO;
    }
    view_to_thrift(v, t);
    return 0;
}

/* Row (from a reply) -> a fresh encoding for the C caller. */
static int thrift_to_enc(const Row &t, uint8_t **out, size_t *len)
{
    xt_row v;
    int rc = thrift_to_view(t, &v);
    if (rc)
        return -EPROTO;
    rc = xt_row_encode_alloc(&v, out, len);
    return rc == -ENOMEM ? rc : (rc ? -EPROTO : 0);
}

static void pb_from_thrift(const Piggyback &pb, uint8_t **bitmap, uint32_t *blen,
                           int64_t *ring_version)
{
    if (pb.__isset.bitmap && !pb.bitmap.empty()) {
        *bitmap = static_cast<uint8_t *>(xt_malloc(pb.bitmap.size()));
        if (*bitmap) {
            memcpy(*bitmap, pb.bitmap.data(), pb.bitmap.size());
            *blen = (uint32_t)pb.bitmap.size();
        }
    }
    if (pb.__isset.ring_version)
        *ring_version = pb.ring_version;
}

static bool pb_to_thrift(const uint8_t *bitmap, uint32_t blen, int64_t ring_version,
                         Piggyback &pb)
{
    bool any = false;
    if (bitmap) {
        pb.__set_bitmap(std::string(reinterpret_cast<const char *>(bitmap), blen));
        any = true;
    }
    if (ring_version >= 0) {
        pb.__set_ring_version(ring_version);
        any = true;
    }
    return any;
}

/* ---- client ------------------------------------------------------------ */

static void req_to_thrift(const struct xt_req *r, XtReq &t)
{
    t.table.fsid = (int32_t)r->t.fsid;
    t.table.table = (int64_t)r->t.table;
    t.table.slice_hint = r->t.slice_hint;
    t.name.assign(static_cast<const char *>(r->name), r->name_len);
    t.name_hash = (int64_t)r->name_hash;
    t.flags = (int32_t)r->flags;
    if (r->row) {
        view_to_thrift(*r->row, t.row);
        t.__isset.row = true;
    }
    if (r->cols) {
        t.__isset.columns = true;
        t.columns.assign(r->cols, r->cols + r->ncols);
    }
    if (r->flags & XT_F_IF_VER)
        t.__set_expect_version((int64_t)r->expect_version);
    if (r->flags & XT_F_IF_UUID)
        t.__set_expect_uuid((int64_t)r->expect_uuid);
    if (r->fwd_bitmap) {
        t.pb.__set_bitmap(std::string(reinterpret_cast<const char *>(r->fwd_bitmap),
                                      r->fwd_bitmap_len));
        t.__isset.pb = true;
    }
    if (r->op == XT_OP_UPDATE) {
        t.__set_set_mask((int32_t)r->set_mask);
        if (r->ndrop) {
            t.__isset.drop_columns = true;
            t.drop_columns.assign(r->drop, r->drop + r->ndrop);
        }
    }
}

static int resp_from_thrift(const XtResp &t, struct xt_resp *r)
{
    memset(r, 0, sizeof *r);
    r->ring_version = -1;
    r->status = t.status;
    r->commit_group = (uint64_t)t.commit_group;
    r->epoch = (uint32_t)t.epoch;
    r->epoch_site = (uint32_t)t.epoch_site;
    if (t.__isset.pb)
        pb_from_thrift(t.pb, &r->bitmap, &r->bitmap_len, &r->ring_version);
    if (t.status == 0 && t.__isset.row) {
        int rc = thrift_to_enc(t.row, &r->row, &r->row_len);
        if (rc) {
            xt_resp_free(r);
            return rc;
        }
    }
    return t.status;
}

int xt_mds_call(xt_rpc_pool *p, const xt_rpc_call *call, const struct xt_req *req,
                struct xt_resp *resp)
{
    memset(resp, 0, sizeof *resp);
    resp->ring_version = -1;
    XtReq treq;
    req_to_thrift(req, treq);
    XtResp tresp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        XTableClient cl(proto);
        treq.hdr = h;
        switch (req->op) {
        case XT_OP_CREATE: cl.create(tresp, treq); break;
        case XT_OP_LOOKUP: cl.lookup(tresp, treq); break;
        case XT_OP_UPDATE: cl.update(tresp, treq); break;
        case XT_OP_DELETE: cl.remove(tresp, treq); break;
        default: return -EINVAL;
        }
        return 0;
    });
    if (rc < 0)
        return rc;
    return resp_from_thrift(tresp, resp);
}

/* Fills treq.ops from reqs. Returns the index of the first op that is not
 * one of enum xt_op, or -1 when all are. */
static long batch_ops_to_thrift(const struct xt_req *reqs, size_t n, BatchReq &treq)
{
    treq.ops.resize(n);
    for (size_t i = 0; i < n; i++) {
        if (reqs[i].op < XT_OP_CREATE || reqs[i].op > XT_OP_DELETE)
            return (long)i;
        treq.ops[i].op = (XtOp::type)reqs[i].op;
        req_to_thrift(&reqs[i], treq.ops[i].req);
    }
    return -1;
}

int xt_mds_batch(xt_rpc_pool *p, const xt_rpc_call *call, const struct xt_req *reqs,
                 size_t n, struct xt_resp *resps)
{
    struct xt_mds_batch_to b = { p, call, reqs, n, resps, 0 };
    xt_mds_batch_each(&b, 1);
    return b.rc;
}

void xt_mds_batch_each(struct xt_mds_batch_to *b, size_t nb)
{
    std::vector<BatchReq> treqs(nb);
    std::vector<BatchResp> tresps(nb);
    std::vector<pom::glue::Each> each;
    std::vector<size_t> idx;
    std::vector<int> rcs(nb);
    for (size_t i = 0; i < nb; i++) {
        b[i].rc = 0;
        if (batch_ops_to_thrift(b[i].reqs, b[i].n, treqs[i]) >= 0) {
            b[i].rc = -EINVAL;
            continue;
        }
        BatchReq *tq = &treqs[i];
        BatchResp *tr = &tresps[i];
        each.push_back({ b[i].pool, b[i].call,
                         [tq](const ProtoPtr &proto, const ReqHeader &h) {
                             XTableClient cl(proto);
                             tq->hdr = h;
                             cl.send_batch(*tq);
                         },
                         [tr](const ProtoPtr &proto) {
                             XTableClient cl(proto);
                             cl.recv_batch(*tr);
                             return (int)tr->status;
                         } });
        idx.push_back(i);
    }
    pom::glue::invoke_each(each.size(), each.data(), rcs.data());
    for (size_t k = 0; k < idx.size(); k++) {
        struct xt_mds_batch_to *t = &b[idx[k]];
        const BatchResp &tr = tresps[idx[k]];
        t->rc = rcs[k];
        if (t->rc == 0 && tr.results.size() != t->n)
            t->rc = -EPROTO;
        for (size_t i = 0; t->rc == 0 && i < t->n; i++)
            resp_from_thrift(tr.results[i], &t->resps[i]);
    }
}

int xt_mds_batch_atomic(xt_rpc_pool *p, const xt_rpc_call *call, const struct xt_req *reqs,
                        size_t n, struct xt_resp *resps, size_t *failed)
{
    *failed = SIZE_MAX;
    if (n == 0 || n > XT_BATCH_ATOMIC_MAX)
        return -EINVAL;
    BatchReq treq;
    treq.flags = XT_BATCH_ATOMIC;
    long bad = batch_ops_to_thrift(reqs, n, treq);
    if (bad >= 0) {
        *failed = (size_t)bad;
        return -EINVAL;
    }
    BatchResp tresp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        XTableClient cl(proto);
        treq.hdr = h;
        cl.batch(tresp, treq);
        return 0;
    });
    if (rc < 0)
        return rc;
    if (tresp.results.size() != n ||
        (tresp.status != 0 && (tresp.failed < 0 || (size_t)tresp.failed >= n)))
        return tresp.status != 0 && tresp.results.empty() ? tresp.status : -EPROTO;
    for (size_t i = 0; i < n; i++)
        resp_from_thrift(tresp.results[i], &resps[i]);
    if (tresp.status != 0)
        *failed = (size_t)tresp.failed;
    return tresp.status;
}

int xt_mds_list(xt_rpc_pool *p, const xt_rpc_call *call, const struct xt_list_req *req,
                struct xt_list_resp *resp)
{
    memset(resp, 0, sizeof *resp);
    resp->ring_version = -1;
    ListReq treq;
    treq.table.fsid = (int32_t)req->t.fsid;
    treq.table.table = (int64_t)req->t.table;
    treq.table.slice_hint = req->t.slice_hint;
    treq.cookie = (int64_t)req->cookie;
    treq.max_entries = (int32_t)req->max;
    treq.flags = (int32_t)req->flags;
    if (req->cols) {
        treq.__isset.columns = true;
        treq.columns.assign(req->cols, req->cols + req->ncols);
    }
    if (req->substr)
        treq.__set_substring(std::string(static_cast<const char *>(req->substr),
                                         req->substr_len));
    if (req->fwd_bitmap) {
        treq.pb.__set_bitmap(std::string(reinterpret_cast<const char *>(req->fwd_bitmap),
                                         req->fwd_bitmap_len));
        treq.__isset.pb = true;
    }
    ListResp tresp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        XTableClient cl(proto);
        treq.hdr = h;
        cl.list_rows(tresp, treq);
        return tresp.status;
    });
    if (rc < 0)
        return rc;
    if (tresp.rows.size() != tresp.cookies.size())
        return -EPROTO;
    for (size_t i = 0; i < tresp.rows.size(); i++) {
        uint8_t *enc = nullptr;
        size_t len = 0;
        rc = thrift_to_enc(tresp.rows[i], &enc, &len);
        if (rc == 0) {
            rc = xt_list_resp_add(resp, enc, len, (uint64_t)tresp.cookies[i]);
            xt_free(enc);
        }
        if (rc) {
            xt_list_resp_free(resp);
            return rc;
        }
    }
    resp->next_cookie = (uint64_t)tresp.next_cookie;
    if (tresp.__isset.pb)
        pb_from_thrift(tresp.pb, &resp->bitmap, &resp->bitmap_len, &resp->ring_version);
    return 0;
}

int xt_mds_sync(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t group, uint64_t *committed,
                uint32_t *epoch)
{
    SyncReq treq;
    treq.commit_group = (int64_t)group;
    SyncResp tresp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        XTableClient cl(proto);
        treq.hdr = h;
        cl.sync(tresp, treq);
        return tresp.status;
    });
    if (rc == 0 && committed)
        *committed = (uint64_t)tresp.committed_group;
    if (rc == 0 && epoch)
        *epoch = (uint32_t)tresp.epoch;
    return rc;
}

int xt_mds_gossip(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t from_site,
                  const struct xt_table_bitmap *t, size_t n, uint32_t *new_bits)
{
    GossipReq treq;
    treq.from_site = (int32_t)from_site;
    treq.tables.resize(n);
    for (size_t i = 0; i < n; i++) {
        treq.tables[i].fsid = (int32_t)t[i].fsid;
        treq.tables[i].table = (int64_t)t[i].table;
        treq.tables[i].bitmap.assign(reinterpret_cast<const char *>(t[i].bitmap), t[i].len);
    }
    GossipResp tresp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        XTableClient cl(proto);
        treq.hdr = h;
        cl.gossip(tresp, treq);
        return tresp.status;
    });
    if (rc == 0 && new_bits)
        *new_bits = (uint32_t)tresp.new_bits;
    return rc;
}

int xt_mds_release(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t from_site, uint32_t fsid,
                   uint64_t table, uint32_t slice, uint64_t ring_version,
                   uint64_t *clean_version)
{
    ReleaseReq treq;
    treq.from_site = (int32_t)from_site;
    treq.fsid = (int32_t)fsid;
    treq.table = (int64_t)table;
    treq.slice = (int32_t)slice;
    treq.ring_version = (int64_t)ring_version;
    ReleaseResp tresp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        XTableClient cl(proto);
        treq.hdr = h;
        cl.release(tresp, treq);
        return tresp.status;
    });
    if (clean_version)
        *clean_version = rc == 0 || rc == -EAGAIN ? (uint64_t)tresp.clean_version : 0;
    return rc;
}

/* ---- server ------------------------------------------------------------ */

namespace {

class XTableGlue : virtual public XTableIf, public pom::glue::CommonGlue {
public:
    XTableGlue(const xt_mds_ops *ops, void *ctx, int budget)
        : CommonGlue(&ops->common, ctx, budget), ops_(ops) {}

    void create(XtResp &r, const XtReq &q) override { one(XT_OP_CREATE, q, q.hdr, r); }
    void lookup(XtResp &r, const XtReq &q) override { one(XT_OP_LOOKUP, q, q.hdr, r); }
    void update(XtResp &r, const XtReq &q) override { one(XT_OP_UPDATE, q, q.hdr, r); }
    void remove(XtResp &r, const XtReq &q) override { one(XT_OP_DELETE, q, q.hdr, r); }

    void batch(BatchResp &r, const BatchReq &q) override
    {
        if (q.flags & ~XT_BATCH_ATOMIC) {
            r.status = -EINVAL;
            return;
        }
        if (q.flags & XT_BATCH_ATOMIC) {
            atomic(r, q);
            return;
        }
        r.results.resize(q.ops.size());
        /* One deadline for the whole batch; side-by-side lookups together
         * (they change nothing, so their order among themselves is free). */
        size_t n = q.ops.size();
        for (size_t i = 0, j; i < n; i = j) {
            for (j = i + 1; ops_->lookups && q.ops[i].op == XtOp::LOOKUP && j < n &&
                            q.ops[j].op == XtOp::LOOKUP;)
                j++;
            if (j - i >= 2)
                lookups(q, i, j, r);
            else
                one((int)q.ops[i].op, q.ops[i].req, q.hdr, r.results[i]);
        }
    }

    void list_rows(ListResp &r, const ListReq &q) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(q.hdr, budget_ms_);
        if (!ops_->list) {
            r.status = -ENOSYS;
            return;
        }
        if (q.max_entries <= 0 || q.max_entries > 4096) {
            r.status = -EINVAL;
            return;
        }
        if ((r.status = scope(rc, q.table.fsid, 0)) != 0)
            return;
        std::vector<uint16_t> cols(q.columns.begin(), q.columns.end());
        struct xt_list_req lr = {};
        lr.t = { (uint32_t)q.table.fsid, (uint64_t)q.table.table, q.table.slice_hint };
        lr.cookie = (uint64_t)q.cookie;
        lr.max = (uint32_t)q.max_entries;
        lr.flags = (uint32_t)q.flags;
        if (q.__isset.columns) {
            lr.cols = cols.empty() ? kNoCols : cols.data();
            lr.ncols = (uint32_t)cols.size();
        }
        if (q.__isset.substring) {
            lr.substr = q.substring.data();
            lr.substr_len = (uint32_t)q.substring.size();
        }
        if (q.__isset.pb && q.pb.__isset.bitmap && !q.pb.bitmap.empty()) {
            lr.fwd_bitmap = reinterpret_cast<const uint8_t *>(q.pb.bitmap.data());
            lr.fwd_bitmap_len = (uint32_t)q.pb.bitmap.size();
        }
        struct xt_list_resp out;
        memset(&out, 0, sizeof out);
        out.ring_version = -1;
        r.status = ops_->list(ctx_, &rc, &lr, &out);
        if (r.status == 0) {
            r.rows.resize(out.n);
            r.cookies.resize(out.n);
            for (size_t i = 0; i < out.n && r.status == 0; i++) {
                r.status = enc_to_thrift(out.rows[i], out.lens[i], r.rows[i]);
                r.cookies[i] = (int64_t)out.cookies[i];
            }
            r.next_cookie = (int64_t)out.next_cookie;
            if (pb_to_thrift(out.bitmap, out.bitmap_len, out.ring_version, r.pb))
                r.__isset.pb = true;
        }
        if (r.status != 0) {
            r.rows.clear();
            r.cookies.clear();
        }
        xt_list_resp_free(&out);
    }

    void sync(SyncResp &r, const SyncReq &q) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(q.hdr, budget_ms_);
        uint64_t committed = 0;
        r.status = ops_->sync ? ops_->sync(ctx_, &rc, (uint64_t)q.commit_group, &committed)
                              : -ENOSYS;
        r.committed_group = (int64_t)committed;
        r.epoch = epoch();
    }

    void gossip(GossipResp &r, const GossipReq &q) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(q.hdr, budget_ms_);
        if (!ops_->gossip || rc.auth_role == XT_AUTH_CLIENT) { /* MDS to MDS only */
            r.status = rc.auth_role == XT_AUTH_CLIENT ? -EACCES : -ENOSYS;
            return;
        }
        std::vector<struct xt_table_bitmap> t(q.tables.size());
        for (size_t i = 0; i < t.size(); i++) {
            t[i].fsid = (uint32_t)q.tables[i].fsid;
            t[i].table = (uint64_t)q.tables[i].table;
            t[i].bitmap = reinterpret_cast<const uint8_t *>(q.tables[i].bitmap.data());
            t[i].len = (uint32_t)q.tables[i].bitmap.size();
        }
        int n = ops_->gossip(ctx_, &rc, (uint32_t)q.from_site, t.data(), t.size());
        r.status = n < 0 ? n : 0;
        r.new_bits = n < 0 ? 0 : n;
    }

    void release(ReleaseResp &r, const ReleaseReq &q) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(q.hdr, budget_ms_);
        uint64_t clean = 0;
        r.status = rc.auth_role == XT_AUTH_CLIENT ? -EACCES /* MDS to MDS only */
                   : ops_->release
                       ? ops_->release(ctx_, &rc, (uint32_t)q.from_site, (uint32_t)q.fsid,
                                       (uint64_t)q.table, (uint32_t)q.slice,
                                       (uint64_t)q.ring_version, &clean)
                       : -ENOSYS;
        r.clean_version = (int64_t)clean;
    }

private:
    int64_t epoch() const { return ops_->epoch ? (int64_t)ops_->epoch(ctx_) : 0; }

    /* A connection that proved a client key reaches only its own fs and no
     * system rows (docs/security.md "Roles"). */
    static int scope(const xt_rpc_ctx &rc, int32_t fsid, int32_t flags)
    {
        if (rc.auth_role != XT_AUTH_CLIENT)
            return 0;
        return fsid == rc.auth_fsid && !(flags & XT_F_SYS) ? 0 : -EACCES;
    }

    /* The C request of q; its pointers borrow q and hold (which must not
     * move while req is used). 0 or the status to answer. */
    struct Hold {
        xt_row view;
        std::vector<uint16_t> cols, drop;
    };
    static int to_req(int op, const XtReq &q, Hold &h, struct xt_req &req)
    {
        if (q.flags & ~XT_F_ALL)
            return -EINVAL;
        if (q.name.empty() || q.name.size() > XT_ROW_KEY_MAX)
            return q.name.empty() ? -EINVAL : -ENAMETOOLONG;
        req = {};
        req.op = op;
        req.t = { (uint32_t)q.table.fsid, (uint64_t)q.table.table, q.table.slice_hint };
        req.name = q.name.data();
        req.name_len = (uint32_t)q.name.size();
        req.name_hash = (uint64_t)q.name_hash; /* checked by the server (xt_mds_ops.op) */
        req.flags = (uint32_t)q.flags;
        if (q.__isset.row) {
            int vrc = thrift_to_view(q.row, &h.view);
            if (vrc)
                return vrc;
            req.row = &h.view;
        }
        h.cols.assign(q.columns.begin(), q.columns.end());
        if (q.__isset.columns) {
            req.cols = h.cols.empty() ? kNoCols : h.cols.data();
            req.ncols = (uint32_t)h.cols.size();
        }
        h.drop.assign(q.drop_columns.begin(), q.drop_columns.end());
        req.drop = h.drop.data();
        req.ndrop = (uint32_t)h.drop.size();
        req.set_mask = q.__isset.set_mask ? (uint32_t)q.set_mask : 0;
        req.expect_version = q.__isset.expect_version ? (uint64_t)q.expect_version : 0;
        req.expect_uuid = q.__isset.expect_uuid ? (uint64_t)q.expect_uuid : 0;
        if (q.__isset.pb && q.pb.__isset.bitmap && !q.pb.bitmap.empty()) {
            req.fwd_bitmap = reinterpret_cast<const uint8_t *>(q.pb.bitmap.data());
            req.fwd_bitmap_len = (uint32_t)q.pb.bitmap.size();
        }
        return 0;
    }

    void from_resp(int status, struct xt_resp &out, XtResp &r) const
    {
        r.status = status;
        r.commit_group = (int64_t)out.commit_group;
        r.epoch = out.epoch ? (int64_t)out.epoch : epoch();
        r.epoch_site = out.epoch ? (int32_t)out.epoch_site : 0;
        if (r.status == 0 && out.row) {
            r.status = enc_to_thrift(out.row, out.row_len, r.row);
            r.__isset.row = r.status == 0;
        }
        if (pb_to_thrift(out.bitmap, out.bitmap_len, out.ring_version, r.pb))
            r.__isset.pb = true;
        xt_resp_free(&out);
    }

    /* q as op, under header hdr (its own, or its batch's). */
    void one(int op, const XtReq &q, const ReqHeader &hdr, XtResp &r)
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(hdr, budget_ms_);
        if (!ops_->op) {
            r.status = -ENOSYS;
            return;
        }
        Hold h;
        struct xt_req req;
        if ((r.status = scope(rc, q.table.fsid, q.flags)) != 0 ||
            (r.status = to_req(op, q, h, req)) != 0)
            return;
        struct xt_resp out;
        memset(&out, 0, sizeof out);
        out.ring_version = -1;
        from_resp(ops_->op(ctx_, &rc, &req, &out), out, r);
    }

    /* Ops [i, j) of q, all lookups, through ops_->lookups: what one() would
     * answer each, the valid ones served together. */
    void lookups(const BatchReq &q, size_t i, size_t j, BatchResp &r)
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(q.hdr, budget_ms_);
        size_t n = j - i, m = 0;
        std::vector<Hold> holds(n); /* sized once: views must not move */
        std::vector<struct xt_req> reqs(n);
        std::vector<struct xt_resp> outs(n);
        std::vector<int> status(n);
        std::vector<size_t> at(n);
        for (size_t k = 0; k < n; k++) {
            const XtReq &x = q.ops[i + k].req;
            XtResp &res = r.results[i + k];
            if ((res.status = scope(rc, x.table.fsid, x.flags)) == 0 &&
                (res.status = to_req(XT_OP_LOOKUP, x, holds[m], reqs[m])) == 0)
                at[m++] = i + k;
        }
        for (auto &o : outs) {
            memset(&o, 0, sizeof o);
            o.ring_version = -1;
        }
        if (m)
            ops_->lookups(ctx_, &rc, reqs.data(), m, outs.data(), status.data());
        for (size_t k = 0; k < m; k++)
            from_resp(status[k], outs[k], r.results[at[k]]);
    }

    void atomic(BatchResp &r, const BatchReq &q)
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(q.hdr, budget_ms_);
        size_t n = q.ops.size();
        if (!ops_->batch_atomic) {
            r.status = -ENOSYS;
            return;
        }
        if (n == 0 || n > XT_BATCH_ATOMIC_MAX) {
            r.status = -EINVAL;
            return;
        }
        std::vector<Hold> holds(n); /* sized once: views must not move */
        std::vector<struct xt_req> reqs(n);
        std::vector<struct xt_resp> outs(n);
        r.results.resize(n);
        size_t failed = SIZE_MAX;
        int st = 0;
        for (size_t i = 0; i < n && st == 0; i++) {
            int op = (int)q.ops[i].op;
            if (op < XT_OP_CREATE || op > XT_OP_DELETE)
                st = -EINVAL;
            else if ((st = scope(rc, q.ops[i].req.table.fsid, q.ops[i].req.flags)) == 0)
                st = to_req(op, q.ops[i].req, holds[i], reqs[i]);
            failed = i;
        }
        for (auto &o : outs) {
            memset(&o, 0, sizeof o);
            o.ring_version = -1;
        }
        if (st == 0)
            st = ops_->batch_atomic(ctx_, &rc, reqs.data(), n, outs.data(), &failed);
        for (size_t i = 0; i < n; i++)
            from_resp(st == 0 ? 0 : i == failed ? st : -ECANCELED, outs[i], r.results[i]);
        r.status = st;
        r.failed = st == 0 ? -1 : (int32_t)failed;
    }

    const xt_mds_ops *ops_;
};

} // namespace

int xt_rpc_serve_mds(const struct xt_rpc_server_opts *opts, const struct xt_mds_ops *ops,
                     void *ctx, xt_rpc_server **out)
{
    if (!ops)
        return -EINVAL;
    try {
        auto h = std::make_shared<XTableGlue>(ops, ctx, pom::glue::server_budget_ms(opts));
        auto proc = std::make_shared<XTableProcessor>(h);
        return pom::glue::serve(opts, proc, out);
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    }
}
