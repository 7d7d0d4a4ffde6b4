/*
 * fuzz_rpc.cpp -- libFuzzer target for the request decoders of the three
 * RPC services (xtable/rpc: XTable on pom-mds, Storage on pom-mdsl, R2 on
 * pom-r2): the generated Thrift processors and the C++ glue that turns
 * each request into the C structs the daemons' handlers receive.
 *
 * Narrowest entry point that covers what a server does with a frame: the
 * glue's xt_rpc_serve_{mds,mdsl,r2} builds the handler and processor and
 * hands them to pom::glue::serve(). This file defines pom::glue::serve()
 * itself (so xt_rpc_server.o, the socket loop, is not linked) and keeps the
 * processor; each input then runs through it exactly as handle_frame() in
 * xt_rpc_server.cpp does: a TMemoryBuffer observing the frame body, string
 * and container limits set to the body length, one process() call, a
 * TException meaning "close the connection". No socket, no thread.
 *
 * The C handlers here are stubs that read every byte the glue hands them
 * (so ASan sees a bad pointer or length at once) and answer with rows,
 * blobs and views built from the request, so the reply encoders run too.
 *
 * Built a second time as fuzz_rpc_svc (POM_FUZZ_REAL_SERVICES): there the
 * XTable and Storage frames go to the real pom-mds and pom-mdsl handlers
 * (mds_service over an mds_table, mdsl_service over an mdsl_store; both on
 * in-memory stores, see fuzz_rpc_env.c) instead of the stubs.
 *
 * Input: byte 0 picks the service (0 mds, 1 mdsl, 2 r2; mod 3), the rest is
 * a frame body (a TBinaryProtocol message). Seed corpus:
 * tests/fuzz/corpus/rpc (gen_rpc_corpus.cpp), shared by both binaries.
 */
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <thrift/TConfiguration.h>
#include <thrift/TProcessor.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>

#include "xt_common.h"
#include "xt_rpc_i.hpp"
#include "xt_rpc_mds.h"
#include "xt_rpc_mdsl.h"
#include "xt_rpc_r2.h"
#include "xt_row.h"

using apache::thrift::TProcessor;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TMemoryBuffer;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

/* ---- the server, minus the sockets ---------------------------------- */

struct xt_rpc_server {
    std::shared_ptr<TProcessor> proc;
};

int pom::glue::serve(const xt_rpc_server_opts *, const std::shared_ptr<TProcessor> &proc,
                     xt_rpc_server **out)
{
    *out = new xt_rpc_server{ proc };
    return 0;
}

int xt_rpc_server_port(const xt_rpc_server *) { return 0; }
void xt_rpc_server_stop(xt_rpc_server *s) { delete s; }

/* Sum of bytes, so reads of handed-in memory cannot be optimised away. */
static volatile uint64_t sink;
static void touch(const void *p, size_t n)
{
    const uint8_t *b = static_cast<const uint8_t *>(p);
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++)
        x += b[i];
    sink = sink + x;
}

/* ---- MDS stubs ------------------------------------------------------- */

static int mds_op(void *, const xt_rpc_ctx *, const struct xt_req *q, struct xt_resp *r)
{
    CHECK(q->name_len >= 1 && q->name_len <= XT_ROW_KEY_MAX);
    touch(q->name, q->name_len);
    if (q->cols)
        touch(q->cols, q->ncols * sizeof *q->cols);
    if (q->ndrop)
        touch(q->drop, q->ndrop * sizeof *q->drop);
    if (q->row) {
        touch(q->row->name, q->row->name_len);
        for (uint32_t i = 0; i < q->row->ngroups; i++)
            touch(q->row->groups[i].ptr, q->row->groups[i].len);
        size_t len;
        if (xt_row_encode_alloc(q->row, &r->row, &len) == 0)
            r->row_len = len;
    }
    if (q->flags & XT_F_BITMAP) {
        r->bitmap = static_cast<uint8_t *>(xt_malloc(q->name_len));
        if (r->bitmap) {
            memcpy(r->bitmap, q->name, q->name_len);
            r->bitmap_len = q->name_len;
        }
    }
    r->commit_group = 7;
    return 0;
}

static int mds_list(void *, const xt_rpc_ctx *, const struct xt_list_req *q,
                    struct xt_list_resp *r)
{
    CHECK(q->max >= 1 && q->max <= 4096);
    if (q->cols)
        touch(q->cols, q->ncols * sizeof *q->cols);
    if (q->substr_len)
        touch(q->substr, q->substr_len);
    xt_row row;
    xt_row_init(&row);
    row.name = reinterpret_cast<const uint8_t *>(q->substr_len ? q->substr : "x");
    row.name_len = q->substr_len ? (uint32_t)XT_MIN(q->substr_len, (uint32_t)XT_ROW_KEY_MAX) : 1;
    uint8_t *enc;
    size_t len;
    if (xt_row_encode_alloc(&row, &enc, &len) == 0) {
        (void)xt_list_resp_add(r, enc, len, q->cookie);
        xt_free(enc);
    }
    r->next_cookie = q->cookie + 1;
    return 0;
}

static int mds_batch_atomic(void *ctx, const xt_rpc_ctx *rc, const struct xt_req *reqs,
                            size_t n, struct xt_resp *resps, size_t *failed)
{
    CHECK(n >= 1 && n <= XT_BATCH_ATOMIC_MAX);
    for (size_t i = 0; i < n; i++) {
        int r = mds_op(ctx, rc, &reqs[i], &resps[i]);
        if (r < 0) {
            *failed = i;
            return r;
        }
    }
    return 0;
}

static int mds_sync(void *, const xt_rpc_ctx *, uint64_t group, uint64_t *committed)
{
    *committed = group;
    return 0;
}

/* ---- MDSL stubs ------------------------------------------------------ */

static int mdsl_prepare(void *, const xt_rpc_ctx *, uint64_t, const struct xt_store_rec *recs,
                        size_t n)
{
    for (size_t i = 0; i < n; i++)
        touch(recs[i].data, recs[i].len);
    return 0;
}
static int mdsl_decide(void *, const xt_rpc_ctx *, uint64_t) { return 0; }

static void *dup_bytes(const void *p, uint32_t n)
{
    void *d = xt_malloc(n ? n : 1);
    if (d && n)
        memcpy(d, p, n);
    return d;
}

static int mdsl_load(void *, const xt_rpc_ctx *, xt_slice_id id, struct xt_store_load *out)
{
    memset(out, 0, sizeof *out);
    uint8_t b[16];
    xt_put_u32(b, id.fsid);
    xt_put_u64(b + 4, id.table);
    xt_put_u32(b + 12, id.slice);
    out->has_image = id.slice & 1;
    out->image = { 1, dup_bytes(b, sizeof b), sizeof b, 0 };
    out->deltas = static_cast<xt_store_blob *>(xt_calloc(2, sizeof *out->deltas));
    if (out->deltas) {
        out->ndeltas = 2;
        out->deltas[0] = { 2, dup_bytes(b, 4), 4, 0 };
        out->deltas[1] = { 3, dup_bytes(b, 0), 0, 0 };
    }
    return 0;
}

static int mdsl_column(void *, const xt_rpc_ctx *, xt_slice_id, uint64_t key, uint32_t group,
                       void **data, uint32_t *len, uint64_t *version)
{
    *len = group % 64;
    *data = dup_bytes(&key, 0);
    if (*len) {
        xt_free(*data);
        *data = xt_calloc(1, *len);
    }
    *version = key;
    return *data ? 0 : -ENOMEM;
}

static int mdsl_set_md(void *, const xt_rpc_ctx *, uint32_t, uint64_t, const void *md,
                       uint32_t len)
{
    touch(md, len);
    return 0;
}

static int mdsl_get_md(void *, const xt_rpc_ctx *, uint32_t fsid, uint64_t, void **md,
                       uint32_t *len)
{
    *len = fsid % 32;
    *md = xt_calloc(1, *len ? *len : 1);
    return *md ? 0 : -ENOMEM;
}

static int mdsl_tract_put(void *, const xt_rpc_ctx *, uint32_t, uint64_t, uint32_t,
                          const void *data, uint32_t len)
{
    touch(data, len);
    return 0;
}

static int mdsl_tract_get(void *, const xt_rpc_ctx *, uint32_t fsid, uint64_t, uint32_t, uint32_t,
                          uint32_t, void **data, uint32_t *len)
{
    *len = fsid % 64;
    *data = *len ? xt_calloc(1, *len) : nullptr;
    return *len && !*data ? -ENOMEM : 0;
}

static int mdsl_tract_remove(void *, const xt_rpc_ctx *, uint32_t, uint64_t, uint32_t, uint32_t)
{
    return 0;
}

static int mdsl_tract_list(void *, const xt_rpc_ctx *, uint32_t fsid, uint64_t cookie, uint32_t max,
                           bool one, uint64_t set, struct xt_tract_list *out)
{
    out->n = one ? 1 : XT_MIN((size_t)max, (size_t)(fsid % 8));
    out->sets = out->n ? static_cast<struct xt_tract_set *>(
                             xt_calloc(out->n, sizeof(struct xt_tract_set)))
                       : nullptr;
    if (out->n && !out->sets)
        return -ENOMEM;
    for (size_t i = 0; i < out->n; i++)
        out->sets[i] = { set + i, i, cookie, (int64_t)i };
    out->cookie = cookie + 1;
    out->end = one || cookie % 2;
    return 0;
}

static int mdsl_tract_touch(void *, const xt_rpc_ctx *, uint32_t, uint64_t)
{
    return 0;
}

static int mdsl_stat(void *, const xt_rpc_ctx *, struct xt_store_stat *st)
{
    memset(st, 0, sizeof *st);
    st->nprepared = 2;
    st->prepared = static_cast<uint64_t *>(xt_calloc(2, sizeof(uint64_t)));
    return st->prepared ? 0 : -ENOMEM;
}

/* A few slices named after the cursor, so the reply encoder runs too. */
static int mdsl_list(void *, const xt_rpc_ctx *, const void *cursor, uint32_t cursor_len,
                     uint32_t max, struct xt_store_list *out)
{
    touch(cursor, cursor_len);
    size_t n = XT_MIN(max, 3u);
    out->slices = static_cast<xt_store_slice *>(xt_calloc(n ? n : 1, sizeof *out->slices));
    if (!out->slices)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        out->slices[i] = { { (uint32_t)i, (uint32_t)max, cursor_len }, i, (i & 1) != 0,
                           (i & 2) != 0, i != 1 };
    out->n = n;
    out->cursor_len = XT_MIN(cursor_len, (uint32_t)XT_STORE_CURSOR_MAX);
    if (out->cursor_len)
        memcpy(out->cursor, cursor, out->cursor_len);
    out->end = max > 3;
    return 0;
}

/* ---- R2 stubs -------------------------------------------------------- */

static void fill_view(struct xt_view *v, const char *addr)
{
    v->version = 3;
    v->sections = XT_VIEW_SITES | XT_VIEW_FS | XT_VIEW_RINGS;
    v->sites = static_cast<xt_site *>(xt_calloc(1, sizeof *v->sites));
    v->fs = static_cast<xt_fs_info *>(xt_calloc(1, sizeof *v->fs));
    v->rings = static_cast<xt_ring_blob *>(xt_calloc(1, sizeof *v->rings));
    if (v->sites) {
        v->nsites = 1;
        v->sites[0].id = 1;
        v->sites[0].type = XT_SITE_MDS;
        v->sites[0].state = XT_SITE_UP;
        snprintf(v->sites[0].addr, sizeof v->sites[0].addr, "%s", addr);
    }
    if (v->fs) {
        v->nfs = 1;
        snprintf(v->fs[0].name, sizeof v->fs[0].name, "%s", addr);
        v->fs[0].root_bitmap = dup_bytes(addr, 1);
        v->fs[0].root_bitmap_len = 1;
    }
    if (v->rings) {
        v->nrings = 1;
        v->rings[0].data = dup_bytes(addr, 1);
        v->rings[0].len = 1;
    }
}

static int r2_register(void *, const xt_rpc_ctx *, int, const char *addr, uint64_t, uint32_t,
                       const char *fs_name, const char *metrics, uint32_t *site_id,
                       struct xt_view *view)
{
    touch(addr, strlen(addr));
    touch(fs_name, strlen(fs_name));
    if (metrics)
        touch(metrics, strlen(metrics));
    *site_id = 9;
    fill_view(view, addr);
    return 0;
}

static int r2_heartbeat(void *, const xt_rpc_ctx *, uint32_t, uint64_t version, double,
                        const struct xt_fs_counter *c, size_t n,
                        const struct xt_r2_hb_ring1 *r1, const struct xt_r2_hb_usage *u,
                        bool *has_view, struct xt_view *view, struct xt_capacity *cap)
{
    touch(c, n * sizeof *c);
    if (r1)
        touch(r1, sizeof *r1);
    if (u)
        touch(u, sizeof *u);
    if (version & 2) {
        cap->fs = static_cast<struct xt_fs_usage *>(xt_calloc(1, sizeof *cap->fs));
        cap->nfs = cap->fs ? 1 : 0;
        cap->valid = true;
    }
    *has_view = version & 1;
    if (*has_view)
        fill_view(view, "127.0.0.1:1");
    return 0;
}

static int r2_get_view(void *, const xt_rpc_ctx *, uint64_t since, bool *has_view,
                       struct xt_view *view)
{
    *has_view = since == 0;
    if (*has_view)
        fill_view(view, "h:2");
    return 0;
}

static int r2_fs_create(void *, const xt_rpc_ctx *, const char *name, const char *backend,
                        const char *path, struct xt_fs_info *out)
{
    touch(name, strlen(name));
    touch(backend, strlen(backend));
    touch(path, strlen(path));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    snprintf(out->blob_path, sizeof out->blob_path, "%s", path);
    return 0;
}

static int r2_fs_list(void *, const xt_rpc_ctx *, const char *name, struct xt_fs_info **fs,
                      size_t *n)
{
    touch(name, strlen(name));
    *fs = static_cast<xt_fs_info *>(xt_calloc(1, sizeof **fs));
    if (!*fs)
        return -ENOMEM;
    *n = 1;
    snprintf((*fs)[0].name, sizeof(*fs)[0].name, "%s", name);
    return 0;
}

static int r2_fs_drop(void *, const xt_rpc_ctx *, const char *name, bool)
{
    touch(name, strlen(name));
    return -ENOENT;
}
static int r2_fs_quota(void *, const xt_rpc_ctx *, const char *name, uint64_t, uint64_t,
                       struct xt_fs_info *out)
{
    touch(name, strlen(name));
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", name);
    return 0;
}
static int r2_fs_set_usage(void *, const xt_rpc_ctx *, const char *name, uint64_t, uint64_t)
{
    touch(name, strlen(name));
    return 0;
}
static int r2_site(void *, const xt_rpc_ctx *, uint32_t) { return 0; }
static int r2_alloc(void *, const xt_rpc_ctx *, uint32_t, uint64_t count, uint64_t *lo,
                    uint64_t *hi)
{
    *lo = 100;
    *hi = 100 + count;
    return 0;
}

/* ---- driver ---------------------------------------------------------- */

static xt_rpc_server *servers[3];

#ifdef POM_FUZZ_REAL_SERVICES
extern "C" int fuzz_env_start(xt_rpc_server **mds, xt_rpc_server **mdsl);
#endif

static void setup()
{
    /* Assigned by name: ops structs grow new members (NULL: -ENOSYS). */
    static xt_mds_ops mds = {};
    mds.op = mds_op;
    mds.list = mds_list;
    mds.sync = mds_sync;
    mds.batch_atomic = mds_batch_atomic;
    static xt_mdsl_ops mdsl = {};
    mdsl.prepare = mdsl_prepare;
    mdsl.commit = mdsl_decide;
    mdsl.abort = mdsl_decide;
    mdsl.load_slice = mdsl_load;
    mdsl.read_column = mdsl_column;
    mdsl.set_md = mdsl_set_md;
    mdsl.get_md = mdsl_get_md;
    mdsl.stat = mdsl_stat;
    mdsl.list_slices = mdsl_list;
    mdsl.tract_put = mdsl_tract_put;
    mdsl.tract_get = mdsl_tract_get;
    mdsl.tract_remove = mdsl_tract_remove;
    mdsl.tract_list = mdsl_tract_list;
    mdsl.tract_touch = mdsl_tract_touch;
    static xt_r2_ops r2 = {};
    r2.register_site = r2_register;
    r2.heartbeat = r2_heartbeat;
    r2.get_view = r2_get_view;
    r2.fs_create = r2_fs_create;
    r2.fs_list = r2_fs_list;
    r2.fs_drop = r2_fs_drop;
    r2.fs_quota = r2_fs_quota;
    r2.fs_set_usage = r2_fs_set_usage;
    r2.site_drain = r2_site;
    r2.site_remove = r2_site;
    r2.site_leave = r2_site;
    r2.alloc_uuids = r2_alloc;
    xt_log_set_level(XT_LOG_ERROR);
#ifdef POM_FUZZ_REAL_SERVICES
    (void)mds;
    (void)mdsl;
    CHECK(fuzz_env_start(&servers[0], &servers[1]) == 0);
#else
    CHECK(xt_rpc_serve_mds(nullptr, &mds, nullptr, &servers[0]) == 0);
    CHECK(xt_rpc_serve_mdsl(nullptr, &mdsl, nullptr, &servers[1]) == 0);
#endif
    CHECK(xt_rpc_serve_r2(nullptr, &r2, nullptr, &servers[2]) == 0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!servers[0])
        setup();
    if (size < 1 || size > (1u << 20))
        return 0;
    xt_rpc_server *s = servers[data[0] % 3];
    uint32_t len = (uint32_t)(size - 1);
    static const auto cfg =
        std::make_shared<apache::thrift::TConfiguration>(XT_RPC_MAX_FRAME, XT_RPC_MAX_FRAME);
    auto ibuf = std::make_shared<TMemoryBuffer>(cfg);
    auto obuf = std::make_shared<TMemoryBuffer>(cfg);
    auto iprot = std::make_shared<TBinaryProtocol>(ibuf);
    auto oprot = std::make_shared<TBinaryProtocol>(obuf);
    try {
        /* as handle_frame() in xt_rpc_server.cpp */
        ibuf->resetBuffer(const_cast<uint8_t *>(data + 1), len, TMemoryBuffer::OBSERVE);
        ibuf->updateKnownMessageSize(len);
        iprot->setStringSizeLimit((int32_t)len);
        iprot->setContainerSizeLimit((int32_t)len);
        s->proc->process(iprot, oprot, nullptr);
    } catch (const std::exception &) {
        return 0; /* the server closes the connection */
    }
    return 0;
}
