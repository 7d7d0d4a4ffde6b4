/*
 * xt_rpc_mdsl.cpp -- glue of the Storage service: C structs <-> Thrift
 * structs, nothing else. Validation of contents is the handler's job; the
 * glue only refuses what cannot be represented (lengths over 4 GiB).
 */
#include "xt_rpc_i.hpp"
#include "xt_rpc_mdsl.h"

#include "Storage.h"
#include "xt_common.h"

#include <cstring>
#include <vector>

using pom::glue::ProtoPtr;
using namespace pom::rpc;

/* A heap copy of s for C callers (xt_free); NULL only on ENOMEM. */
static void *dup_bytes(const std::string &s)
{
    void *p = xt_malloc(s.size());
    if (p && !s.empty())
        memcpy(p, s.data(), s.size());
    return p;
}

/* ---- client ------------------------------------------------------------ */

int xt_mdsl_prepare(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t txid,
                    const struct xt_store_rec *recs, size_t n)
{
    PrepareReq req;
    req.txid = (int64_t)txid;
    req.records.resize(n);
    for (size_t i = 0; i < n; i++) {
        StoreRecord &r = req.records[i];
        r.type = (int8_t)recs[i].type;
        r.flags = (int8_t)recs[i].flags;
        r.fsid = (int32_t)recs[i].id.fsid;
        r.table = (int64_t)recs[i].id.table;
        r.slice = (int32_t)recs[i].id.slice;
        r.version = (int64_t)recs[i].version;
        r.key = (int64_t)recs[i].key;
        r.group = (int32_t)recs[i].group;
        r.data.assign(static_cast<const char *>(recs[i].data), recs[i].len);
    }
    return pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        TxResp resp;
        req.hdr = h;
        cl.prepare(resp, req);
        return resp.status;
    });
}

static int tx_call(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t txid, bool commit)
{
    TxReq req;
    req.txid = (int64_t)txid;
    return pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        TxResp resp;
        req.hdr = h;
        if (commit)
            cl.commit(resp, req);
        else
            cl.abort(resp, req);
        return resp.status;
    });
}

int xt_mdsl_commit(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t txid)
{
    return tx_call(p, call, txid, true);
}

int xt_mdsl_abort(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t txid)
{
    return tx_call(p, call, txid, false);
}

int xt_mdsl_load_slice(xt_rpc_pool *p, const xt_rpc_call *call, xt_slice_id id,
                       struct xt_store_load *out)
{
    memset(out, 0, sizeof *out);
    LoadReq req;
    req.fsid = (int32_t)id.fsid;
    req.table = (int64_t)id.table;
    req.slice = (int32_t)id.slice;
    LoadResp resp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        req.hdr = h;
        cl.load_slice(resp, req);
        return resp.status;
    });
    if (rc < 0)
        return rc;
    if (resp.__isset.image) {
        out->has_image = true;
        out->image.version = (uint64_t)resp.image.version;
        out->image.flags = (uint8_t)resp.image.flags;
        out->image.len = (uint32_t)resp.image.data.size();
        if (!(out->image.data = dup_bytes(resp.image.data)))
            goto nomem;
    }
    if (!resp.deltas.empty()) {
        out->deltas = static_cast<struct xt_store_blob *>(
            xt_calloc(resp.deltas.size(), sizeof(struct xt_store_blob)));
        if (!out->deltas)
            goto nomem;
        for (const Blob &b : resp.deltas) {
            struct xt_store_blob *d = &out->deltas[out->ndeltas];
            d->version = (uint64_t)b.version;
            d->flags = (uint8_t)b.flags;
            d->len = (uint32_t)b.data.size();
            if (!(d->data = dup_bytes(b.data)))
                goto nomem;
            out->ndeltas++;
        }
    }
    return 0;
nomem:
    xt_store_load_free(out);
    return -ENOMEM;
}

int xt_mdsl_read_column(xt_rpc_pool *p, const xt_rpc_call *call, xt_slice_id id,
                        uint64_t key, uint32_t group, void **data, uint32_t *len,
                        uint64_t *version)
{
    ColumnReq req;
    req.fsid = (int32_t)id.fsid;
    req.table = (int64_t)id.table;
    req.slice = (int32_t)id.slice;
    req.key = (int64_t)key;
    req.group = (int32_t)group;
    ColumnResp resp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        req.hdr = h;
        cl.read_column(resp, req);
        return resp.status;
    });
    if (rc < 0)
        return rc;
    if (!(*data = dup_bytes(resp.value)))
        return -ENOMEM;
    *len = (uint32_t)resp.value.size();
    if (version)
        *version = (uint64_t)resp.version;
    return 0;
}

int xt_mdsl_set_md(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t table,
                   const void *md, uint32_t len)
{
    MdReq req;
    req.fsid = (int32_t)fsid;
    req.table = (int64_t)table;
    req.__set_md(std::string(static_cast<const char *>(md), len));
    return pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        MdResp resp;
        req.hdr = h;
        cl.set_md(resp, req);
        return resp.status;
    });
}

int xt_mdsl_get_md(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t table,
                   void **md, uint32_t *len)
{
    MdReq req;
    req.fsid = (int32_t)fsid;
    req.table = (int64_t)table;
    MdResp resp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        req.hdr = h;
        cl.get_md(resp, req);
        return resp.status;
    });
    if (rc < 0)
        return rc;
    if (!(*md = dup_bytes(resp.md)))
        return -ENOMEM;
    *len = (uint32_t)resp.md.size();
    return 0;
}

int xt_mdsl_stat(xt_rpc_pool *p, const xt_rpc_call *call, struct xt_store_stat *st)
{
    memset(st, 0, sizeof *st);
    StoreStatReq req;
    StoreStatResp resp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        req.hdr = h;
        cl.stat(resp, req);
        return resp.status;
    });
    if (rc < 0)
        return rc;
    st->tables = (uint64_t)resp.tables;
    st->segments = (uint64_t)resp.segments;
    st->bytes = (uint64_t)resp.bytes;
    st->live_bytes = (uint64_t)resp.live_bytes;
    st->commits = (uint64_t)resp.commits;
    st->aborts = (uint64_t)resp.aborts;
    st->gc_freed_segments = (uint64_t)resp.gc_freed_segments;
    st->corrupt_records = (uint64_t)resp.corrupt_records;
    st->gc_passes = (uint64_t)resp.gc_passes;
    st->gc_moved_bytes = (uint64_t)resp.gc_moved_bytes;
    st->gc_freed_bytes = (uint64_t)resp.gc_freed_bytes;
    st->dropped_folders = (uint64_t)resp.dropped_folders;
    st->dropped_bytes = (uint64_t)resp.dropped_bytes;
    st->rolled_segments = (uint64_t)resp.rolled_segments;
    st->sweeps = (uint64_t)resp.sweeps;
    st->sweep_owed = (uint64_t)resp.sweep_owed;
    st->failed = resp.failed;
    st->under_replicated = resp.under_replicated < 0 ? -1 : resp.under_replicated;
    st->pulled_slices = (uint64_t)resp.pulled_slices;
    st->pulled_bytes = (uint64_t)resp.pulled_bytes;
    if (!resp.prepared_txids.empty()) {
        st->prepared = static_cast<uint64_t *>(
            xt_calloc(resp.prepared_txids.size(), sizeof(uint64_t)));
        if (!st->prepared)
            return -ENOMEM;
        for (int64_t t : resp.prepared_txids)
            st->prepared[st->nprepared++] = (uint64_t)t;
    }
    return 0;
}

int xt_mdsl_list_slices(xt_rpc_pool *p, const xt_rpc_call *call, const void *cursor,
                        uint32_t cursor_len, uint32_t max, struct xt_store_list *out)
{
    memset(out, 0, sizeof *out);
    if (cursor_len > XT_STORE_CURSOR_MAX || (cursor_len && !cursor) || max > INT32_MAX)
        return -EINVAL;
    ListSlicesReq req;
    if (cursor_len)
        req.cursor.assign(static_cast<const char *>(cursor), cursor_len);
    req.max = (int32_t)max;
    ListSlicesResp resp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        req.hdr = h;
        cl.list_slices(resp, req);
        return resp.status;
    });
    if (rc < 0)
        return rc;
    if (resp.cursor.size() > XT_STORE_CURSOR_MAX)
        return -EPROTO;
    if (!resp.slices.empty()) {
        out->slices = static_cast<struct xt_store_slice *>(
            xt_calloc(resp.slices.size(), sizeof(struct xt_store_slice)));
        if (!out->slices)
            return -ENOMEM;
        for (const SliceInfo &si : resp.slices)
            out->slices[out->n++] = { { (uint32_t)si.fsid, (uint32_t)si.slice, (uint64_t)si.table },
                                      (uint64_t)si.version, si.moved, si.sys, si.image };
    }
    memcpy(out->cursor, resp.cursor.data(), resp.cursor.size());
    out->cursor_len = (uint32_t)resp.cursor.size();
    out->end = resp.at_end;
    return 0;
}

/* One tract call: req filled but for hdr; resp answers. */
template <class Fn> static int tract_call(xt_rpc_pool *p, const xt_rpc_call *call, TractReq &req,
                                          TractResp &resp, Fn fn)
{
    return pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        req.hdr = h;
        fn(cl);
        return resp.status;
    });
}

int xt_mdsl_tract_put(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t set,
                      uint32_t tract, const void *data, uint32_t len)
{
    TractReq req;
    TractResp resp;
    req.fsid = (int32_t)fsid;
    req.set_id = (int64_t)set;
    req.tract = (int32_t)tract;
    req.__set_data(len ? std::string(static_cast<const char *>(data), len) : std::string());
    return tract_call(p, call, req, resp, [&](StorageClient &cl) { cl.tract_put(resp, req); });
}

int xt_mdsl_tract_get(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t set,
                      uint32_t tract, uint32_t off, uint32_t want, void **data, uint32_t *len)
{
    *data = nullptr;
    *len = 0;
    if (off > INT32_MAX || want > INT32_MAX)
        return -EINVAL;
    TractReq req;
    TractResp resp;
    req.fsid = (int32_t)fsid;
    req.set_id = (int64_t)set;
    req.tract = (int32_t)tract;
    req.offset = (int32_t)off;
    req.length = (int32_t)want;
    int rc = tract_call(p, call, req, resp, [&](StorageClient &cl) { cl.tract_get(resp, req); });
    if (rc < 0)
        return rc;
    if (resp.data.size() > UINT32_MAX || (want && resp.data.size() > want))
        return -EPROTO;
    if (!resp.data.empty() && !(*data = dup_bytes(resp.data)))
        return -ENOMEM;
    *len = (uint32_t)resp.data.size();
    return 0;
}

int xt_mdsl_tract_remove(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid,
                         uint64_t set, uint32_t first, uint32_t end)
{
    TractReq req;
    TractResp resp;
    req.fsid = (int32_t)fsid;
    req.set_id = (int64_t)set;
    req.tract = (int32_t)first;
    req.tract_end = (int32_t)end;
    return tract_call(p, call, req, resp, [&](StorageClient &cl) { cl.tract_remove(resp, req); });
}

int xt_mdsl_tract_list(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t cookie,
                       uint32_t max, bool one, uint64_t set, struct xt_tract_list *out)
{
    memset(out, 0, sizeof *out);
    if (max == 0 || max > INT32_MAX)
        return -EINVAL;
    TractListReq req;
    req.fsid = (int32_t)fsid;
    req.cookie = (int64_t)cookie;
    req.max = (int32_t)max;
    if (one)
        req.__set_set_id((int64_t)set);
    TractListResp resp;
    int rc = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) {
        StorageClient cl(proto);
        req.hdr = h;
        cl.tract_list(resp, req);
        return resp.status;
    });
    if (rc < 0)
        return rc;
    if (!resp.sets.empty()) {
        out->sets = static_cast<struct xt_tract_set *>(
            xt_calloc(resp.sets.size(), sizeof(struct xt_tract_set)));
        if (!out->sets)
            return -ENOMEM;
        for (const TractSetInfo &si : resp.sets)
            out->sets[out->n++] = { (uint64_t)si.set_id, (uint64_t)si.tracts,
                                    (uint64_t)si.bytes, si.mtime_ns };
    }
    out->cookie = (uint64_t)resp.cookie;
    out->end = resp.at_end;
    return 0;
}

int xt_mdsl_tract_touch(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t fsid, uint64_t set)
{
    TractReq req;
    TractResp resp;
    req.fsid = (int32_t)fsid;
    req.set_id = (int64_t)set;
    return tract_call(p, call, req, resp, [&](StorageClient &cl) { cl.tract_touch(resp, req); });
}

/* ---- server ------------------------------------------------------------ */

namespace {

static TractSetInfo make_set_info(const struct xt_tract_set &s)
{
    TractSetInfo si;
    si.set_id = (int64_t)s.set;
    si.tracts = (int64_t)s.tracts;
    si.bytes = (int64_t)s.bytes;
    si.mtime_ns = s.mtime_ns;
    return si;
}

/* The slice a load or column request names. */
template <class Req> xt_slice_id slice_id(const Req &req)
{
    return { (uint32_t)req.fsid, (uint32_t)req.slice, (uint64_t)req.table };
}

class StorageGlue : virtual public StorageIf, public pom::glue::CommonGlue {
public:
    StorageGlue(const xt_mdsl_ops *ops, void *ctx, int budget)
        : CommonGlue(&ops->common, ctx, budget), mops_(ops) {}

    void prepare(TxResp &resp, const PrepareReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        std::vector<xt_store_rec> recs(req.records.size());
        for (size_t i = 0; i < recs.size(); i++) {
            const StoreRecord &r = req.records[i];
            if (r.data.size() > UINT32_MAX) {
                resp.status = -E2BIG;
                return;
            }
            recs[i] = { (uint8_t)r.type, (uint8_t)r.flags,
                        { (uint32_t)r.fsid, (uint32_t)r.slice, (uint64_t)r.table },
                        (uint64_t)r.version, (uint64_t)r.key,
                        (uint32_t)r.group, r.data.data(), (uint32_t)r.data.size() };
        }
        resp.status = mops_->prepare ? mops_->prepare(ctx_, &rc, (uint64_t)req.txid,
                                                      recs.data(), recs.size())
                                     : -ENOSYS;
    }
    void commit(TxResp &resp, const TxReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        resp.status = mops_->commit ? mops_->commit(ctx_, &rc, (uint64_t)req.txid) : -ENOSYS;
    }
    void abort(TxResp &resp, const TxReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        resp.status = mops_->abort ? mops_->abort(ctx_, &rc, (uint64_t)req.txid) : -ENOSYS;
    }
    void load_slice(LoadResp &resp, const LoadReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        struct xt_store_load l;
        memset(&l, 0, sizeof l);
        resp.status = mops_->load_slice ? mops_->load_slice(ctx_, &rc, slice_id(req), &l)
                                        : -ENOSYS;
        if (resp.status == 0) {
            if (l.has_image) {
                resp.image.version = (int64_t)l.image.version;
                resp.image.flags = (int8_t)l.image.flags;
                resp.image.data.assign(static_cast<const char *>(l.image.data), l.image.len);
                resp.__isset.image = true;
            }
            resp.deltas.resize(l.ndeltas);
            for (size_t i = 0; i < l.ndeltas; i++) {
                resp.deltas[i].version = (int64_t)l.deltas[i].version;
                resp.deltas[i].flags = (int8_t)l.deltas[i].flags;
                resp.deltas[i].data.assign(static_cast<const char *>(l.deltas[i].data),
                                           l.deltas[i].len);
            }
        }
        xt_store_load_free(&l);
    }
    void read_column(ColumnResp &resp, const ColumnReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        void *data = nullptr;
        uint32_t len = 0;
        uint64_t version = 0;
        resp.status = mops_->read_column
                          ? mops_->read_column(ctx_, &rc, slice_id(req), (uint64_t)req.key,
                                               (uint32_t)req.group, &data, &len, &version)
                          : -ENOSYS;
        if (resp.status == 0) {
            resp.value.assign(static_cast<const char *>(data), len);
            resp.version = (int64_t)version;
        }
        xt_free(data);
    }
    void set_md(MdResp &resp, const MdReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        if (!req.__isset.md || req.md.size() > UINT32_MAX) {
            resp.status = -EINVAL;
            return;
        }
        resp.status = mops_->set_md ? mops_->set_md(ctx_, &rc, (uint32_t)req.fsid,
                                                    (uint64_t)req.table, req.md.data(),
                                                    (uint32_t)req.md.size())
                                    : -ENOSYS;
    }
    void get_md(MdResp &resp, const MdReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        void *md = nullptr;
        uint32_t len = 0;
        resp.status = mops_->get_md ? mops_->get_md(ctx_, &rc, (uint32_t)req.fsid,
                                                    (uint64_t)req.table, &md, &len)
                                    : -ENOSYS;
        if (resp.status == 0)
            resp.md.assign(static_cast<const char *>(md), len);
        xt_free(md);
    }
    void stat(StoreStatResp &resp, const StoreStatReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        struct xt_store_stat st;
        memset(&st, 0, sizeof st);
        resp.status = mops_->stat ? mops_->stat(ctx_, &rc, &st) : -ENOSYS;
        if (resp.status == 0) {
            resp.tables = (int64_t)st.tables;
            resp.segments = (int64_t)st.segments;
            resp.bytes = (int64_t)st.bytes;
            resp.live_bytes = (int64_t)st.live_bytes;
            resp.commits = (int64_t)st.commits;
            resp.aborts = (int64_t)st.aborts;
            resp.gc_freed_segments = (int64_t)st.gc_freed_segments;
            resp.corrupt_records = (int64_t)st.corrupt_records;
            resp.gc_passes = (int64_t)st.gc_passes;
            resp.gc_moved_bytes = (int64_t)st.gc_moved_bytes;
            resp.gc_freed_bytes = (int64_t)st.gc_freed_bytes;
            resp.dropped_folders = (int64_t)st.dropped_folders;
            resp.dropped_bytes = (int64_t)st.dropped_bytes;
            resp.rolled_segments = (int64_t)st.rolled_segments;
            resp.sweeps = (int64_t)st.sweeps;
            resp.sweep_owed = (int64_t)st.sweep_owed;
            resp.failed = st.failed;
            resp.under_replicated = st.under_replicated;
            resp.pulled_slices = (int64_t)st.pulled_slices;
            resp.pulled_bytes = (int64_t)st.pulled_bytes;
            for (size_t i = 0; i < st.nprepared; i++)
                resp.prepared_txids.push_back((int64_t)st.prepared[i]);
        }
        xt_free(st.prepared);
    }
    void list_slices(ListSlicesResp &resp, const ListSlicesReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        if (req.max < 0 || req.cursor.size() > UINT32_MAX) {
            resp.status = -EINVAL;
            return;
        }
        struct xt_store_list l;
        memset(&l, 0, sizeof l);
        resp.status = mops_->list_slices
                          ? mops_->list_slices(ctx_, &rc, req.cursor.data(),
                                               (uint32_t)req.cursor.size(), (uint32_t)req.max, &l)
                          : -ENOSYS;
        if (resp.status == 0) {
            resp.slices.resize(l.n);
            for (size_t i = 0; i < l.n; i++) {
                SliceInfo &si = resp.slices[i];
                si.fsid = (int32_t)l.slices[i].id.fsid;
                si.table = (int64_t)l.slices[i].id.table;
                si.slice = (int32_t)l.slices[i].id.slice;
                si.version = (int64_t)l.slices[i].version;
                si.moved = l.slices[i].moved;
                si.sys = l.slices[i].sys;
                si.image = l.slices[i].image;
            }
            resp.cursor.assign(reinterpret_cast<const char *>(l.cursor),
                               XT_MIN(l.cursor_len, (uint32_t)XT_STORE_CURSOR_MAX));
            resp.at_end = l.end;
        }
        xt_store_list_free(&l);
    }

    void tract_put(TractResp &resp, const TractReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        if (!req.__isset.data || req.data.size() > UINT32_MAX) {
            resp.status = -EINVAL;
            return;
        }
        resp.status = mops_->tract_put
                          ? mops_->tract_put(ctx_, &rc, (uint32_t)req.fsid, (uint64_t)req.set_id,
                                             (uint32_t)req.tract, req.data.data(),
                                             (uint32_t)req.data.size())
                          : -ENOSYS;
    }
    void tract_get(TractResp &resp, const TractReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        void *data = nullptr;
        uint32_t len = 0;
        if (req.offset < 0 || req.length < 0) {
            resp.status = -EINVAL;
            return;
        }
        resp.status = mops_->tract_get
                          ? mops_->tract_get(ctx_, &rc, (uint32_t)req.fsid, (uint64_t)req.set_id,
                                             (uint32_t)req.tract, (uint32_t)req.offset,
                                             (uint32_t)req.length, &data, &len)
                          : -ENOSYS;
        if (resp.status == 0 && len)
            resp.data.assign(static_cast<const char *>(data), len);
        xt_free(data);
    }
    void tract_remove(TractResp &resp, const TractReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        resp.status = mops_->tract_remove
                          ? mops_->tract_remove(ctx_, &rc, (uint32_t)req.fsid,
                                                (uint64_t)req.set_id, (uint32_t)req.tract,
                                                (uint32_t)req.tract_end)
                          : -ENOSYS;
    }
    void tract_list(TractListResp &resp, const TractListReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        if (req.max <= 0) {
            resp.status = -EINVAL;
            return;
        }
        struct xt_tract_list l;
        memset(&l, 0, sizeof l);
        resp.status = mops_->tract_list
                          ? mops_->tract_list(ctx_, &rc, (uint32_t)req.fsid,
                                              (uint64_t)req.cookie, (uint32_t)req.max,
                                              req.__isset.set_id, (uint64_t)req.set_id, &l)
                          : -ENOSYS;
        if (resp.status == 0) {
            resp.sets.resize(l.n);
            for (size_t i = 0; i < l.n; i++)
                resp.sets[i] = make_set_info(l.sets[i]);
            resp.cookie = (int64_t)l.cookie;
            resp.at_end = l.end;
        }
        xt_free(l.sets);
    }
    void tract_touch(TractResp &resp, const TractReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        resp.status = mops_->tract_touch
                          ? mops_->tract_touch(ctx_, &rc, (uint32_t)req.fsid,
                                               (uint64_t)req.set_id)
                          : -ENOSYS;
    }

private:
    const xt_mdsl_ops *mops_;
};

} // namespace

int xt_rpc_serve_mdsl(const struct xt_rpc_server_opts *opts, const struct xt_mdsl_ops *ops,
                      void *ctx, xt_rpc_server **out)
{
    if (!ops)
        return -EINVAL;
    try {
        auto h = std::make_shared<StorageGlue>(ops, ctx, pom::glue::server_budget_ms(opts));
        auto proc = std::make_shared<StorageProcessor>(h);
        return pom::glue::serve(opts, proc, out);
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    }
}
