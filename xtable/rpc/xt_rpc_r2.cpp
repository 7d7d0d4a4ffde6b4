/*
 * xt_rpc_r2.cpp -- glue of the R2 service: C structs <-> Thrift structs.
 * Strings longer than the C fields are refused with -ENAMETOOLONG rather
 * than cut, so a name is never silently changed on its way.
 */
#include "xt_rpc_i.hpp"
#include "xt_rpc_r2.h"

#include "R2.h"
#include "xt_common.h"
#include "xt_ring.h"

#include <cstring>
#include <vector>

using pom::glue::ProtoPtr;
using namespace pom::rpc;

const char *xt_site_type_name(int type)
{
    switch (type) {
    case XT_SITE_MDS: return "mds";
    case XT_SITE_MDSL: return "mdsl";
    case XT_SITE_CLIENT: return "client";
    case XT_SITE_R2: return "r2";
    default: return "?";
    }
}

const char *xt_site_state_name(int state)
{
    switch (state) {
    case XT_SITE_UP: return "up";
    case XT_SITE_TRANSIENT: return "transient";
    case XT_SITE_FAILED: return "failed";
    case XT_SITE_DRAINING: return "draining";
    case XT_SITE_REMOVED: return "removed";
    default: return "?";
    }
}

const char *xt_ring1_phase_name(int phase)
{
    switch (phase) {
    case XT_RING1_STABLE: return "stable";
    case XT_RING1_PREPARE: return "prepare";
    case XT_RING1_MOVING: return "moving";
    case XT_RING1_DONE: return "done";
    default: return "?";
    }
}

const char *xt_ring1_role_name(int role)
{
    switch (role) {
    case XT_RING1_OUT: return "out";
    case XT_RING1_JOINING: return "joining";
    case XT_RING1_IN: return "in";
    case XT_RING1_DRAINED: return "drained";
    default: return "?";
    }
}

void xt_view_ring1_free(struct xt_view_ring1 *r)
{
    if (!r)
        return;
    xt_free(r->prev.data);
    xt_free(r->next.data);
    xt_free(r->sites);
    xt_free(r);
}

static int blob_dup(const struct xt_ring_blob &s, struct xt_ring_blob &d)
{
    d = s;
    d.data = NULL;
    if (!s.data)
        return 0;
    d.data = xt_malloc(s.len ? s.len : 1);
    if (!d.data)
        return -ENOMEM;
    memcpy(d.data, s.data, s.len);
    return 0;
}

int xt_view_ring1_dup(const struct xt_view_ring1 *src, struct xt_view_ring1 **dst)
{
    *dst = NULL;
    if (!src)
        return 0;
    struct xt_view_ring1 *r =
        static_cast<struct xt_view_ring1 *>(xt_calloc(1, sizeof(struct xt_view_ring1)));
    if (!r)
        return -ENOMEM;
    *r = *src;
    r->prev.data = r->next.data = NULL;
    r->sites = NULL;
    if (src->nsites) {
        r->sites = static_cast<struct xt_ring1_site *>(
            xt_malloc(src->nsites * sizeof(struct xt_ring1_site)));
        if (r->sites)
            memcpy(r->sites, src->sites, src->nsites * sizeof(struct xt_ring1_site));
    }
    if ((src->nsites && !r->sites) || blob_dup(src->prev, r->prev) < 0 ||
        blob_dup(src->next, r->next) < 0) {
        xt_view_ring1_free(r);
        return -ENOMEM;
    }
    *dst = r;
    return 0;
}

void xt_fs_info_free_array(struct xt_fs_info *fs, size_t n)
{
    if (!fs)
        return;
    for (size_t i = 0; i < n; i++)
        xt_free(fs[i].root_bitmap);
    xt_free(fs);
}

void xt_view_free(struct xt_view *v)
{
    if (!v)
        return;
    xt_free(v->sites);
    for (size_t i = 0; i < v->nrings; i++)
        xt_free(v->rings[i].data);
    xt_free(v->rings);
    xt_fs_info_free_array(v->fs, v->nfs);
    xt_view_ring1_free(v->ring1);
    memset(v, 0, sizeof *v);
}

int xt_view_ring(const struct xt_view *v, uint32_t ring, xt_ring **out)
{
    *out = NULL;
    for (size_t i = 0; i < v->nrings; i++)
        if (v->rings[i].ring == ring && v->rings[i].data) {
            int rc = xt_ring_decode(v->rings[i].data, v->rings[i].len, out);
            if (rc < 0)
                *out = NULL;
            return rc;
        }
    return -ENOENT;
}

/* Copies s into a C field of cap bytes; -ENAMETOOLONG if it does not fit. */
static int copy_str(char *dst, size_t cap, const std::string &s)
{
    if (s.size() >= cap || memchr(s.data(), 0, s.size()))
        return -ENAMETOOLONG;
    memcpy(dst, s.data(), s.size());
    dst[s.size()] = '\0';
    return 0;
}

/* The raw value of a Thrift enum field. A peer may send any i32, and the
 * generated reader stores it in the enum as is; loading an enum with a value
 * outside its range is undefined behaviour (UBSan aborts on it), so the
 * value is copied out as bytes and checked by the handler. */
template <class E> static int enum_value(const E &e)
{
    static_assert(sizeof(E) == sizeof(int32_t), "Thrift enums are i32");
    int32_t v;
    memcpy(&v, &e, sizeof v);
    return (int)v;
}

/* ---- conversions -------------------------------------------------------- */

static void site_to_thrift(const struct xt_site &c, Site &t)
{
    t.id = (int32_t)c.id;
    t.type = (SiteType::type)c.type;
    t.address = c.addr;
    t.capacity = (int64_t)c.capacity;
    t.state = (SiteState::type)c.state;
    t.last_heartbeat_ns = (int64_t)c.last_hb_ns;
    t.uuid_lo = (int64_t)c.uuid_lo;
    t.uuid_hi = (int64_t)c.uuid_hi;
    t.fs_name = c.fs_name;
    t.load = c.load;
    t.metrics_address = c.metrics;
}

static int site_from_thrift(const Site &t, struct xt_site &c)
{
    memset(&c, 0, sizeof c);
    c.id = (uint32_t)t.id;
    c.type = enum_value(t.type);
    c.capacity = (uint64_t)t.capacity;
    c.state = enum_value(t.state);
    c.last_hb_ns = (uint64_t)t.last_heartbeat_ns;
    c.uuid_lo = (uint64_t)t.uuid_lo;
    c.uuid_hi = (uint64_t)t.uuid_hi;
    c.load = t.load;
    int rc = copy_str(c.addr, sizeof c.addr, t.address);
    if (rc == 0)
        rc = copy_str(c.metrics, sizeof c.metrics, t.metrics_address);
    return rc ? rc : copy_str(c.fs_name, sizeof c.fs_name, t.fs_name);
}

static void fs_to_thrift(const struct xt_fs_info &c, FsInfo &t)
{
    t.fsid = (int32_t)c.fsid;
    t.name = c.name;
    t.root_table = (int64_t)c.root_table;
    t.files = (int64_t)c.files;
    t.bytes = (int64_t)c.bytes;
    t.mounts = (int32_t)c.mounts;
    t.blob_backend = c.blob_backend;
    t.blob_path = c.blob_path;
    t.created_ns = (int64_t)c.created_ns;
    t.key_gen = (int64_t)c.key_gen;
    t.quota_files = (int64_t)c.quota_files;
    t.quota_bytes = (int64_t)c.quota_bytes;
    if (c.root_bitmap) {
        t.root_bitmap.assign(static_cast<const char *>(c.root_bitmap), c.root_bitmap_len);
        t.__isset.root_bitmap = true;
    }
}

static int fs_from_thrift(const FsInfo &t, struct xt_fs_info &c)
{
    memset(&c, 0, sizeof c);
    c.fsid = (uint32_t)t.fsid;
    c.root_table = (uint64_t)t.root_table;
    c.files = (uint64_t)t.files;
    c.bytes = (uint64_t)t.bytes;
    c.mounts = (uint32_t)t.mounts;
    c.created_ns = (uint64_t)t.created_ns;
    c.key_gen = (uint64_t)t.key_gen;
    c.quota_files = (uint64_t)t.quota_files;
    c.quota_bytes = (uint64_t)t.quota_bytes;
    int rc = copy_str(c.name, sizeof c.name, t.name);
    if (!rc)
        rc = copy_str(c.blob_backend, sizeof c.blob_backend, t.blob_backend);
    if (!rc)
        rc = copy_str(c.blob_path, sizeof c.blob_path, t.blob_path);
    if (!rc && t.__isset.root_bitmap) {
        c.root_bitmap = xt_malloc(t.root_bitmap.size());
        if (!c.root_bitmap)
            return -ENOMEM;
        memcpy(c.root_bitmap, t.root_bitmap.data(), t.root_bitmap.size());
        c.root_bitmap_len = (uint32_t)t.root_bitmap.size();
    }
    return rc;
}

static int fs_array_from_thrift(const std::vector<FsInfo> &v, struct xt_fs_info **out,
                                size_t *n)
{
    *out = nullptr;
    *n = 0;
    if (v.empty())
        return 0;
    auto *a = static_cast<struct xt_fs_info *>(xt_calloc(v.size(), sizeof(struct xt_fs_info)));
    if (!a)
        return -ENOMEM;
    for (size_t i = 0; i < v.size(); i++) {
        int rc = fs_from_thrift(v[i], a[i]);
        if (rc) {
            xt_fs_info_free_array(a, i + 1);
            return rc;
        }
    }
    *out = a;
    *n = v.size();
    return 0;
}

static void blob_to_thrift(const struct xt_ring_blob &c, RingInfo &t)
{
    t.ring = (int32_t)c.ring;
    t.version = (int64_t)c.version;
    t.encoded.assign(static_cast<const char *>(c.data), c.len);
}

static int blob_from_thrift(const RingInfo &t, struct xt_ring_blob &b)
{
    b.ring = (uint32_t)t.ring;
    b.version = (uint64_t)t.version;
    b.len = (uint32_t)t.encoded.size();
    b.data = xt_malloc(b.len ? b.len : 1);
    if (!b.data)
        return -ENOMEM;
    memcpy(b.data, t.encoded.data(), b.len);
    return 0;
}

static void ring1_to_thrift(const struct xt_view_ring1 &c, Ring1State &t)
{
    t.phase = (int8_t)c.phase;
    t.seq = (int64_t)c.seq;
    t.walk = c.walk;
    t.from_version = (int64_t)c.from_version;
    t.to_version = (int64_t)c.to_version;
    t.started_ns = (int64_t)c.started_ns;
    if (c.prev.data) {
        blob_to_thrift(c.prev, t.prev_ring);
        t.__isset.prev_ring = true;
    }
    if (c.next.data) {
        blob_to_thrift(c.next, t.next_ring);
        t.__isset.next_ring = true;
    }
    t.sites.resize(c.nsites);
    for (size_t i = 0; i < c.nsites; i++) {
        const struct xt_ring1_site &s = c.sites[i];
        Ring1Site &o = t.sites[i];
        o.id = (int32_t)s.id;
        o.role = (int8_t)s.role;
        o.leaving = s.leaving;
        o.losing = s.losing;
        o.reports = s.reports;
        o.acked = (int64_t)s.acked;
        o.walked_ring1 = (int64_t)s.walked_v;
        o.walked_ring0 = (int64_t)s.walked_w;
        o.has_counts = s.has_counts;
        o.misplaced = (int64_t)s.misplaced;
        o.prepared = (int64_t)s.prepared;
    }
}

static int ring1_from_thrift(const Ring1State &t, struct xt_view_ring1 **out)
{
    struct xt_view_ring1 *c =
        static_cast<struct xt_view_ring1 *>(xt_calloc(1, sizeof(struct xt_view_ring1)));
    if (!c)
        return -ENOMEM;
    c->phase = t.phase;
    c->seq = (uint64_t)t.seq;
    c->walk = t.walk;
    c->from_version = (uint64_t)t.from_version;
    c->to_version = (uint64_t)t.to_version;
    c->started_ns = (uint64_t)t.started_ns;
    int rc = 0;
    if (t.__isset.prev_ring)
        rc = blob_from_thrift(t.prev_ring, c->prev);
    if (!rc && t.__isset.next_ring)
        rc = blob_from_thrift(t.next_ring, c->next);
    if (!rc && !t.sites.empty()) {
        c->sites = static_cast<struct xt_ring1_site *>(
            xt_calloc(t.sites.size(), sizeof(struct xt_ring1_site)));
        if (!c->sites)
            rc = -ENOMEM;
        for (size_t i = 0; !rc && i < t.sites.size(); i++) {
            const Ring1Site &o = t.sites[i];
            struct xt_ring1_site &s = c->sites[i];
            s.id = (uint32_t)o.id;
            s.role = o.role;
            s.leaving = o.leaving;
            s.losing = o.losing;
            s.reports = o.reports;
            s.acked = (uint64_t)o.acked;
            s.walked_v = (uint64_t)o.walked_ring1;
            s.walked_w = (uint64_t)o.walked_ring0;
            s.has_counts = o.has_counts;
            s.misplaced = (uint64_t)o.misplaced;
            s.prepared = (uint64_t)o.prepared;
            c->nsites++;
        }
    }
    if (rc) {
        xt_view_ring1_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void view_to_thrift(const struct xt_view &c, View &t)
{
    t.version = (int64_t)c.version;
    t.sections = c.sections;
    t.sites.resize(c.nsites);
    for (size_t i = 0; i < c.nsites; i++)
        site_to_thrift(c.sites[i], t.sites[i]);
    t.rings.resize(c.nrings);
    for (size_t i = 0; i < c.nrings; i++)
        blob_to_thrift(c.rings[i], t.rings[i]);
    if (c.ring1) {
        ring1_to_thrift(*c.ring1, t.ring1);
        t.__isset.ring1 = true;
    }
    t.fs.resize(c.nfs);
    for (size_t i = 0; i < c.nfs; i++)
        fs_to_thrift(c.fs[i], t.fs[i]);
    t.leader = c.leader;
    t.store = c.store;
    if (c.has_repl) {
        t.__set_under_replicated((int64_t)c.under_replicated);
        t.repl_counted = (int32_t)c.repl_counted;
    }
}

static int view_from_thrift(const View &t, struct xt_view &c)
{
    memset(&c, 0, sizeof c);
    c.version = (uint64_t)t.version;
    c.sections = t.sections;
    int rc = copy_str(c.leader, sizeof c.leader, t.leader);
    if (!rc)
        rc = copy_str(c.store, sizeof c.store, t.store);
    if (!rc && !t.sites.empty()) {
        c.sites = static_cast<struct xt_site *>(xt_calloc(t.sites.size(), sizeof(struct xt_site)));
        if (!c.sites)
            rc = -ENOMEM;
        for (size_t i = 0; !rc && i < t.sites.size(); i++, c.nsites++)
            rc = site_from_thrift(t.sites[i], c.sites[i]);
    }
    if (!rc && !t.rings.empty()) {
        c.rings = static_cast<struct xt_ring_blob *>(
            xt_calloc(t.rings.size(), sizeof(struct xt_ring_blob)));
        if (!c.rings)
            rc = -ENOMEM;
        for (size_t i = 0; !rc && i < t.rings.size(); i++) {
            rc = blob_from_thrift(t.rings[i], c.rings[i]);
            if (!rc)
                c.nrings++;
        }
    }
    if (!rc && t.__isset.ring1)
        rc = ring1_from_thrift(t.ring1, &c.ring1);
    c.has_repl = t.__isset.under_replicated && t.under_replicated >= 0 && t.repl_counted > 0;
    if (c.has_repl) {
        c.under_replicated = (uint64_t)t.under_replicated;
        c.repl_counted = (uint32_t)t.repl_counted;
    }
    if (!rc)
        rc = fs_array_from_thrift(t.fs, &c.fs, &c.nfs);
    if (rc)
        xt_view_free(&c);
    return rc;
}

/* ---- capacity ---------------------------------------------------------- */

void xt_capacity_free(struct xt_capacity *c)
{
    if (!c)
        return;
    xt_free(c->fs);
    memset(c, 0, sizeof *c);
}

int xt_capacity_dup(const struct xt_capacity *src, struct xt_capacity *dst)
{
    *dst = *src;
    dst->fs = nullptr;
    if (src->nfs) {
        dst->fs = static_cast<struct xt_fs_usage *>(xt_malloc(src->nfs * sizeof *src->fs));
        if (!dst->fs) {
            memset(dst, 0, sizeof *dst);
            return -ENOMEM;
        }
        memcpy(dst->fs, src->fs, src->nfs * sizeof *src->fs);
    }
    return 0;
}

const struct xt_fs_usage *xt_capacity_fs(const struct xt_capacity *c, uint32_t fsid)
{
    for (size_t i = 0; c && i < c->nfs; i++)
        if (c->fs[i].fsid == fsid)
            return &c->fs[i];
    return nullptr;
}

static void capacity_to_thrift(const struct xt_capacity &c, Capacity &t)
{
    t.size = (int64_t)c.size;
    t.avail = (int64_t)c.avail;
    t.fs.resize(c.nfs);
    for (size_t i = 0; i < c.nfs; i++) {
        t.fs[i].fsid = (int32_t)c.fs[i].fsid;
        t.fs[i].files = (int64_t)c.fs[i].files;
        t.fs[i].bytes = (int64_t)c.fs[i].bytes;
        t.fs[i].quota_files = (int64_t)c.fs[i].quota_files;
        t.fs[i].quota_bytes = (int64_t)c.fs[i].quota_bytes;
    }
    t.devs.resize(c.ndevs);
    for (size_t i = 0; i < c.ndevs; i++)
        t.devs[i] = (int64_t)c.devs[i];
}

/* Negative counts from a peer read as 0. */
static uint64_t nonneg(int64_t v)
{
    return v < 0 ? 0 : (uint64_t)v;
}

static int capacity_from_thrift(const Capacity &t, struct xt_capacity &c)
{
    memset(&c, 0, sizeof c);
    if (t.devs.size() > XT_CAPACITY_DEVS_MAX)
        return -EPROTO;
    if (!t.fs.empty()) {
        c.fs = static_cast<struct xt_fs_usage *>(xt_calloc(t.fs.size(), sizeof *c.fs));
        if (!c.fs)
            return -ENOMEM;
    }
    c.nfs = t.fs.size();
    for (size_t i = 0; i < c.nfs; i++)
        c.fs[i] = { (uint32_t)t.fs[i].fsid, nonneg(t.fs[i].files), nonneg(t.fs[i].bytes),
                    nonneg(t.fs[i].quota_files), nonneg(t.fs[i].quota_bytes) };
    c.ndevs = t.devs.size();
    for (size_t i = 0; i < c.ndevs; i++)
        c.devs[i] = (uint64_t)t.devs[i];
    c.size = nonneg(t.size);
    c.avail = nonneg(t.avail);
    c.valid = true;
    return 0;
}

/* ---- client ------------------------------------------------------------ */

#define R2_CALL(method, ReqT, RespT, fill, after)                                              \
    do {                                                                                       \
        ReqT req;                                                                              \
        RespT resp;                                                                            \
        fill;                                                                                  \
        int rc_ = pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const ReqHeader &h) { \
            R2Client cl(proto);                                                                \
            req.hdr = h;                                                                       \
            cl.method(resp, req);                                                              \
            return resp.status;                                                                \
        });                                                                                    \
        if (rc_ < 0)                                                                           \
            return rc_;                                                                        \
        after;                                                                                 \
        return 0;                                                                              \
    } while (0)

int xt_r2_register(xt_rpc_pool *p, const xt_rpc_call *call, int type, const char *addr,
                   uint64_t capacity, uint32_t prev_id, const char *fs_name,
                   const char *metrics, uint32_t *site_id, struct xt_view *view)
{
    if (view)
        memset(view, 0, sizeof *view);
    R2_CALL(register_site, RegisterReq, RegisterResp,
            {
                req.type = (SiteType::type)type;
                req.address = addr ? addr : "";
                req.capacity = (int64_t)capacity;
                req.prev_id = (int32_t)prev_id;
                req.fs_name = fs_name ? fs_name : "";
                req.metrics_address = metrics ? metrics : "";
            },
            {
                *site_id = (uint32_t)resp.site_id;
                if (view && resp.__isset.view) {
                    int rc = view_from_thrift(resp.view, *view);
                    if (rc)
                        return rc;
                }
            });
}

int xt_r2_heartbeat(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id,
                    uint64_t view_version, double load, const struct xt_fs_counter *c,
                    size_t n, bool *has_view, struct xt_view *view)
{
    return xt_r2_heartbeat_ex(p, call, site_id, view_version, load, c, n, NULL, NULL, has_view,
                              view, NULL);
}

int xt_r2_heartbeat_ex(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id,
                       uint64_t view_version, double load, const struct xt_fs_counter *c,
                       size_t n, const struct xt_r2_hb_ring1 *r1,
                       const struct xt_r2_hb_usage *u, bool *has_view, struct xt_view *view,
                       struct xt_capacity *cap)
{
    *has_view = false;
    memset(view, 0, sizeof *view);
    if (cap)
        memset(cap, 0, sizeof *cap);
    R2_CALL(heartbeat, HeartbeatReq, ViewResp,
            {
                req.site_id = (int32_t)site_id;
                req.view_version = (int64_t)view_version;
                req.load = load;
                req.counters.resize(n);
                for (size_t i = 0; i < n; i++) {
                    req.counters[i].fsid = (int32_t)c[i].fsid;
                    req.counters[i].files = (int64_t)c[i].files;
                    req.counters[i].bytes = (int64_t)c[i].bytes;
                }
                if (r1 && r1->has_acked)
                    req.__set_ring1_acked((int64_t)r1->acked);
                if (r1 && r1->has_walked) {
                    req.__set_walked_ring1((int64_t)r1->walked_v);
                    req.__set_walked_ring0((int64_t)r1->walked_w);
                }
                if (r1 && r1->has_counts) {
                    req.__set_misplaced((int64_t)r1->misplaced);
                    req.__set_prepared((int64_t)r1->prepared);
                    req.__set_counted_seq((int64_t)r1->counted_seq);
                }
                if (u && u->has_epoch)
                    req.__set_usage_epoch((int64_t)u->epoch);
                if (u && u->has_storage) {
                    StorageReport sr;
                    sr.size = (int64_t)u->storage.size;
                    sr.avail = (int64_t)u->storage.avail;
                    sr.used = (int64_t)u->storage.used;
                    sr.dev = (int64_t)u->storage.dev;
                    req.__set_storage(sr);
                }
                if (u && u->has_repl)
                    req.__set_under_replicated((int64_t)u->under_replicated);
            },
            {
                if (cap && resp.__isset.capacity) {
                    int rc = capacity_from_thrift(resp.capacity, *cap);
                    if (rc)
                        return rc;
                }
                if (resp.__isset.view) {
                    int rc = view_from_thrift(resp.view, *view);
                    if (rc) {
                        if (cap)
                            xt_capacity_free(cap);
                        return rc;
                    }
                    *has_view = true;
                }
            });
}

int xt_r2_get_view(xt_rpc_pool *p, const xt_rpc_call *call, uint64_t since, bool *has_view,
                   struct xt_view *view)
{
    *has_view = false;
    memset(view, 0, sizeof *view);
    R2_CALL(get_view, ViewReq, ViewResp, { req.since_version = (int64_t)since; },
            {
                if (resp.__isset.view) {
                    int rc = view_from_thrift(resp.view, *view);
                    if (rc)
                        return rc;
                    *has_view = true;
                }
            });
}

int xt_r2_fs_create(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                    const char *backend, const char *path, struct xt_fs_info *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    R2_CALL(fs_create, FsReq, FsResp,
            {
                req.name = name ? name : "";
                req.blob_backend = backend ? backend : "";
                req.blob_path = path ? path : "";
            },
            {
                if (out && !resp.fs.empty()) {
                    int rc = fs_from_thrift(resp.fs[0], *out);
                    if (rc)
                        return rc;
                }
            });
}

int xt_r2_fs_list(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                  struct xt_fs_info **fs, size_t *n)
{
    *fs = nullptr;
    *n = 0;
    R2_CALL(fs_list, FsReq, FsResp, { req.name = name ? name : ""; },
            {
                int rc = fs_array_from_thrift(resp.fs, fs, n);
                if (rc)
                    return rc;
            });
}

int xt_r2_fs_rotate_key(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                        struct xt_fs_info *out)
{
    R2_CALL(fs_rotate_key, FsReq, FsResp, { req.name = name ? name : ""; },
            {
                if (out && !resp.fs.empty()) {
                    int rc = fs_from_thrift(resp.fs[0], *out);
                    if (rc)
                        return rc;
                }
            });
}

int xt_r2_fs_quota(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                   uint64_t quota_files, uint64_t quota_bytes, struct xt_fs_info *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    R2_CALL(fs_quota, FsReq, FsResp,
            {
                req.name = name ? name : "";
                req.quota_files = (int64_t)quota_files;
                req.quota_bytes = (int64_t)quota_bytes;
            },
            {
                if (out && !resp.fs.empty()) {
                    int rc = fs_from_thrift(resp.fs[0], *out);
                    if (rc)
                        return rc;
                }
            });
}

int xt_r2_fs_set_usage(xt_rpc_pool *p, const xt_rpc_call *call, const char *name,
                       uint64_t files, uint64_t bytes)
{
    R2_CALL(fs_set_usage, FsReq, FsResp,
            {
                req.name = name ? name : "";
                req.usage_files = (int64_t)files;
                req.usage_bytes = (int64_t)bytes;
            },
            {});
}

int xt_r2_fs_drop(xt_rpc_pool *p, const xt_rpc_call *call, const char *name, bool force)
{
    R2_CALL(fs_drop, FsReq, FsResp,
            {
                req.name = name ? name : "";
                req.force = force;
            },
            {});
}

int xt_r2_site_drain(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id)
{
    R2_CALL(site_drain, SiteReq, SiteResp, { req.site_id = (int32_t)site_id; }, {});
}

int xt_r2_site_remove(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id)
{
    R2_CALL(site_remove, SiteReq, SiteResp, { req.site_id = (int32_t)site_id; }, {});
}

int xt_r2_site_leave(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id)
{
    R2_CALL(site_leave, SiteReq, SiteResp, { req.site_id = (int32_t)site_id; }, {});
}

int xt_r2_alloc_uuids(xt_rpc_pool *p, const xt_rpc_call *call, uint32_t site_id,
                      uint64_t count, uint64_t *lo, uint64_t *hi)
{
    R2_CALL(alloc_uuids, RangeReq, RangeResp,
            {
                req.site_id = (int32_t)site_id;
                req.count = (int64_t)count;
            },
            {
                *lo = (uint64_t)resp.lo;
                *hi = (uint64_t)resp.hi;
            });
}

/* ---- server ------------------------------------------------------------ */

namespace {

/* Runs a handler that fills a C view and converts it into the reply. */
template <class Fn> void reply_view(ViewResp &resp, Fn &&fn)
{
    struct xt_view v;
    memset(&v, 0, sizeof v);
    bool has = false;
    resp.status = fn(&has, &v);
    if (resp.status == 0 && has) {
        view_to_thrift(v, resp.view);
        resp.__isset.view = true;
    }
    xt_view_free(&v);
}

class R2Glue : virtual public R2If, public pom::glue::CommonGlue {
public:
    R2Glue(const xt_r2_ops *ops, void *ctx, int budget)
        : CommonGlue(&ops->common, ctx, budget), ops_(ops) {}

    void register_site(RegisterResp &resp, const RegisterReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        if (!ops_->register_site) {
            resp.status = -ENOSYS;
            return;
        }
        struct xt_view v;
        memset(&v, 0, sizeof v);
        uint32_t id = 0;
        resp.status = ops_->register_site(ctx_, &rc, enum_value(req.type), req.address.c_str(),
                                          (uint64_t)req.capacity, (uint32_t)req.prev_id,
                                          req.fs_name.c_str(), req.metrics_address.c_str(),
                                          &id, &v);
        if (resp.status == 0) {
            resp.site_id = (int32_t)id;
            view_to_thrift(v, resp.view);
            resp.__isset.view = true;
        }
        xt_view_free(&v);
    }
    void heartbeat(ViewResp &resp, const HeartbeatReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        std::vector<xt_fs_counter> c(req.counters.size());
        for (size_t i = 0; i < c.size(); i++)
            c[i] = { (uint32_t)req.counters[i].fsid, req.counters[i].files,
                     req.counters[i].bytes };
        /* Negative counts and versions are refused by the handler: they
         * arrive as huge unsigned values. */
        struct xt_r2_hb_ring1 r1;
        memset(&r1, 0, sizeof r1);
        r1.has_acked = req.__isset.ring1_acked;
        r1.acked = (uint64_t)req.ring1_acked;
        r1.has_walked = req.__isset.walked_ring1 && req.__isset.walked_ring0;
        r1.walked_v = (uint64_t)req.walked_ring1;
        r1.walked_w = (uint64_t)req.walked_ring0;
        r1.has_counts = req.__isset.misplaced && req.__isset.prepared;
        r1.misplaced = (uint64_t)req.misplaced;
        r1.prepared = (uint64_t)req.prepared;
        r1.counted_seq = req.__isset.counted_seq ? (uint64_t)req.counted_seq : 0;
        bool any = r1.has_acked || r1.has_walked || r1.has_counts;
        struct xt_r2_hb_usage u;
        memset(&u, 0, sizeof u);
        u.has_epoch = req.__isset.usage_epoch;
        u.epoch = (uint64_t)req.usage_epoch;
        u.has_storage = req.__isset.storage;
        u.storage = { nonneg(req.storage.size), nonneg(req.storage.avail),
                      nonneg(req.storage.used), (uint64_t)req.storage.dev };
        u.has_repl = req.__isset.under_replicated && req.under_replicated >= 0;
        u.under_replicated = u.has_repl ? (uint64_t)req.under_replicated : 0;
        struct xt_capacity cap;
        memset(&cap, 0, sizeof cap);
        reply_view(resp, [&](bool *has, struct xt_view *v) {
            return ops_->heartbeat
                       ? ops_->heartbeat(ctx_, &rc, (uint32_t)req.site_id,
                                         (uint64_t)req.view_version, req.load, c.data(),
                                         c.size(), any ? &r1 : NULL,
                                         u.has_epoch || u.has_storage || u.has_repl ? &u : NULL,
                                         has, v, &cap)
                       : -ENOSYS;
        });
        if (resp.status == 0 && cap.valid) {
            capacity_to_thrift(cap, resp.capacity);
            resp.__isset.capacity = true;
        }
        xt_capacity_free(&cap);
    }
    void get_view(ViewResp &resp, const ViewReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        reply_view(resp, [&](bool *has, struct xt_view *v) {
            return ops_->get_view
                       ? ops_->get_view(ctx_, &rc, (uint64_t)req.since_version, has, v)
                       : -ENOSYS;
        });
    }
    void fs_create(FsResp &resp, const FsReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        struct xt_fs_info f;
        memset(&f, 0, sizeof f);
        resp.status = ops_->fs_create ? ops_->fs_create(ctx_, &rc, req.name.c_str(),
                                                        req.blob_backend.c_str(),
                                                        req.blob_path.c_str(), &f)
                                      : -ENOSYS;
        if (resp.status == 0) {
            resp.fs.resize(1);
            fs_to_thrift(f, resp.fs[0]);
        }
        xt_free(f.root_bitmap);
    }
    void fs_list(FsResp &resp, const FsReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        struct xt_fs_info *fs = nullptr;
        size_t n = 0;
        resp.status = ops_->fs_list ? ops_->fs_list(ctx_, &rc, req.name.c_str(), &fs, &n)
                                    : -ENOSYS;
        if (resp.status == 0) {
            resp.fs.resize(n);
            for (size_t i = 0; i < n; i++)
                fs_to_thrift(fs[i], resp.fs[i]);
        }
        xt_fs_info_free_array(fs, n);
    }
    void fs_drop(FsResp &resp, const FsReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        resp.status = ops_->fs_drop ? ops_->fs_drop(ctx_, &rc, req.name.c_str(), req.force)
                                    : -ENOSYS;
    }
    void fs_rotate_key(FsResp &resp, const FsReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        struct xt_fs_info f;
        memset(&f, 0, sizeof f);
        resp.status = ops_->fs_rotate_key
                          ? ops_->fs_rotate_key(ctx_, &rc, req.name.c_str(), &f)
                          : -ENOSYS;
        if (resp.status == 0) {
            resp.fs.resize(1);
            fs_to_thrift(f, resp.fs[0]);
        }
        xt_free(f.root_bitmap);
    }
    void fs_quota(FsResp &resp, const FsReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        struct xt_fs_info f;
        memset(&f, 0, sizeof f);
        resp.status = req.quota_files < 0 || req.quota_bytes < 0 ? -EINVAL
                      : ops_->fs_quota
                          ? ops_->fs_quota(ctx_, &rc, req.name.c_str(),
                                           (uint64_t)req.quota_files,
                                           (uint64_t)req.quota_bytes, &f)
                          : -ENOSYS;
        if (resp.status == 0) {
            resp.fs.resize(1);
            fs_to_thrift(f, resp.fs[0]);
        }
        xt_free(f.root_bitmap);
    }
    void fs_set_usage(FsResp &resp, const FsReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        resp.status = req.usage_files < 0 || req.usage_bytes < 0 ? -EINVAL
                      : ops_->fs_set_usage
                          ? ops_->fs_set_usage(ctx_, &rc, req.name.c_str(),
                                               (uint64_t)req.usage_files,
                                               (uint64_t)req.usage_bytes)
                          : -ENOSYS;
    }
    void site_drain(SiteResp &resp, const SiteReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        resp.status = ops_->site_drain ? ops_->site_drain(ctx_, &rc, (uint32_t)req.site_id)
                                       : -ENOSYS;
    }
    void site_remove(SiteResp &resp, const SiteReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        resp.status = ops_->site_remove ? ops_->site_remove(ctx_, &rc, (uint32_t)req.site_id)
                                        : -ENOSYS;
    }
    void site_leave(SiteResp &resp, const SiteReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        resp.status = ops_->site_leave ? ops_->site_leave(ctx_, &rc, (uint32_t)req.site_id)
                                       : -ENOSYS;
    }
    void alloc_uuids(RangeResp &resp, const RangeReq &req) override
    {
        xt_rpc_ctx rc = pom::glue::make_ctx(req.hdr, budget_ms_);
        uint64_t lo = 0, hi = 0;
        resp.status = ops_->alloc_uuids ? ops_->alloc_uuids(ctx_, &rc, (uint32_t)req.site_id,
                                                            (uint64_t)req.count, &lo, &hi)
                                        : -ENOSYS;
        resp.lo = (int64_t)lo;
        resp.hi = (int64_t)hi;
    }

private:
    const xt_r2_ops *ops_;
};

} // namespace

int xt_rpc_serve_r2(const struct xt_rpc_server_opts *opts, const struct xt_r2_ops *ops,
                    void *ctx, xt_rpc_server **out)
{
    if (!ops)
        return -EINVAL;
    try {
        auto h = std::make_shared<R2Glue>(ops, ctx, pom::glue::server_budget_ms(opts));
        auto proc = std::make_shared<R2Processor>(h);
        return pom::glue::serve(opts, proc, out);
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    }
}
