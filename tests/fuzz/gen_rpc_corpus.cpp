/*
 * gen_rpc_corpus.cpp -- writes the seed corpus of fuzz_rpc: one valid
 * request message of every call of the XTable, Storage and R2 services
 * (and ping on each), as the generated Thrift clients serialise them, into
 * the folder given as argv[1]. Each file is a service byte (0 mds, 1 mdsl,
 * 2 r2; see fuzz_rpc.cpp) followed by the frame body.
 *
 * Built with the fuzzers (tests/fuzz/CMakeLists.txt): gen_rpc_corpus DIR.
 */
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>

#include "R2.h"
#include "Storage.h"
#include "XTable.h"
#include "xt_hash.h"

using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TMemoryBuffer;
using namespace pom::rpc;

static const char *dir;

struct Out {
    std::shared_ptr<TMemoryBuffer> buf = std::make_shared<TMemoryBuffer>();
    std::shared_ptr<TBinaryProtocol> prot = std::make_shared<TBinaryProtocol>(buf);
};

static void put(const char *name, int service, Out &o)
{
    uint8_t *p;
    uint32_t n;
    o.buf->getBuffer(&p, &n);
    std::string path = std::string(dir) + "/" + name;
    FILE *f = fopen(path.c_str(), "wb");
    unsigned char svc = (unsigned char)service;
    if (!f || fwrite(&svc, 1, 1, f) != 1 || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path.c_str());
        exit(1);
    }
}

static ReqHeader hdr()
{
    ReqHeader h;
    h.req_id = 42;
    h.budget_ms = 1000;
    h.hops = 1;
    h.ring_version = 3;
    h.client_id = 5;
    return h;
}

static Row row(const std::string &name)
{
    Row r;
    r.name = name;
    r.attr.uuid = 1234;
    r.attr.type = 1;
    r.attr.mode = 0100644;
    r.attr.nlink = 1;
    r.attr.size = 5;
    r.attr.version = 1;
    Column c;
    c.id = 1;
    c.value = "hello";
    r.columns.push_back(c);
    c.id = 2;
    c.value = std::string("\0user.a\0\0\0\1v", 13);
    r.columns.push_back(c);
    return r;
}

static void gen_mds()
{
    XtReq q;
    q.hdr = hdr();
    q.table.fsid = 1;
    q.table.table = 1;
    q.table.slice_hint = 0;
    q.name = "file.txt";
    q.name_hash = (int64_t)xt_hash_name(q.name.data(), q.name.size()); /* as a client sends it */
    q.flags = 0x01 | 0x08;
    q.__set_row(row("file.txt"));
    { Out o; XTableClient(o.prot).send_create(q); put("mds-create", 0, o); }
    XtReq l = q;
    l.__isset.row = false;
    l.__set_columns({ 1, 2 });
    l.flags = 0x02;
    { Out o; XTableClient(o.prot).send_lookup(l); put("mds-lookup", 0, o); }
    XtReq u = q;
    u.flags = 0x04;
    u.__set_expect_version(1);
    u.__set_set_mask(0x3);
    u.__set_drop_columns({ 2 });
    { Out o; XTableClient(o.prot).send_update(u); put("mds-update", 0, o); }
    { Out o; XTableClient(o.prot).send_remove(l); put("mds-remove", 0, o); }
    ListReq lr;
    lr.hdr = hdr();
    lr.table = q.table;
    lr.cookie = 99;
    lr.max_entries = 16;
    lr.__set_columns({ 1 });
    lr.__set_substring("key");
    { Out o; XTableClient(o.prot).send_list_rows(lr); put("mds-list", 0, o); }
    BatchReq b;
    b.hdr = hdr();
    BatchOp op;
    op.op = XtOp::CREATE;
    op.req = q;
    b.ops.push_back(op);
    op.op = XtOp::LOOKUP;
    op.req = l;
    b.ops.push_back(op);
    { Out o; XTableClient(o.prot).send_batch(b); put("mds-batch", 0, o); }
    /* an atomic batch (field 3, flags = XT_BATCH_ATOMIC): a rename's rows */
    BatchReq ab = b;
    ab.flags = 1;
    op.op = XtOp::DELETE;
    op.req = l;
    ab.ops.push_back(op);
    { Out o; XTableClient(o.prot).send_batch(ab); put("mds-batch-atomic", 0, o); }
    /* a create's atomic batch: the new row (exclusive) + the parent's
     * times and subdirectory count as a delta (set_mask XT_SET_NLINK_ADD) */
    BatchReq cb;
    cb.hdr = hdr();
    cb.flags = 1;
    op.op = XtOp::CREATE;
    op.req = q;
    cb.ops.push_back(op);
    XtReq pu = q;
    pu.name = "parent";
    pu.name_hash = (int64_t)xt_hash_name(pu.name.data(), pu.name.size());
    pu.flags = 0x20;
    pu.__set_expect_uuid(1);
    pu.__set_set_mask(0x8000 | 0x100 | 0x200);
    pu.__isset.row = true;
    pu.row.attr.nlink = -1;
    op.op = XtOp::UPDATE;
    op.req = pu;
    cb.ops.push_back(op);
    { Out o; XTableClient(o.prot).send_batch(cb); put("mds-batch-nlink-add", 0, o); }
    SyncReq s;
    s.hdr = hdr();
    s.commit_group = 12;
    { Out o; XTableClient(o.prot).send_sync(s); put("mds-sync", 0, o); }
    PingReq p;
    p.hdr = hdr();
    p.payload = "ping";
    { Out o; XTableClient(o.prot).send_ping(p); put("mds-ping", 0, o); }
}

static void gen_mdsl()
{
    PrepareReq p;
    p.hdr = hdr();
    p.txid = 77;
    StoreRecord r;
    r.type = 1;
    r.fsid = 1;
    r.table = 2;
    r.slice = 0;
    r.version = 1;
    r.data = "image bytes";
    p.records.push_back(r);
    r.type = 3;
    r.key = 1234;
    r.group = 1;
    r.flags = 1;
    r.data = "";
    p.records.push_back(r);
    r.type = 1; /* a MOVED tombstone: an empty image */
    r.key = 0;
    r.group = 0;
    r.flags = 2;
    r.version = 2;
    p.records.push_back(r);
    { Out o; StorageClient(o.prot).send_prepare(p); put("mdsl-prepare", 1, o); }
    TxReq t;
    t.hdr = hdr();
    t.txid = 77;
    { Out o; StorageClient(o.prot).send_commit(t); put("mdsl-commit", 1, o); }
    { Out o; StorageClient(o.prot).send_abort(t); put("mdsl-abort", 1, o); }
    LoadReq l;
    l.hdr = hdr();
    l.fsid = 1;
    l.table = 2;
    l.slice = 3;
    { Out o; StorageClient(o.prot).send_load_slice(l); put("mdsl-load", 1, o); }
    ColumnReq c;
    c.hdr = hdr();
    c.fsid = 1;
    c.table = 2;
    c.slice = 0;
    c.key = 1234;
    c.group = 5;
    { Out o; StorageClient(o.prot).send_read_column(c); put("mdsl-column", 1, o); }
    MdReq m;
    m.hdr = hdr();
    m.fsid = 3;
    m.table = 2;
    m.__set_md("metadata");
    { Out o; StorageClient(o.prot).send_set_md(m); put("mdsl-set-md", 1, o); }
    { Out o; StorageClient(o.prot).send_get_md(m); put("mdsl-get-md", 1, o); }
    StoreStatReq s;
    s.hdr = hdr();
    { Out o; StorageClient(o.prot).send_stat(s); put("mdsl-stat", 1, o); }
    PingReq pg;
    pg.hdr = hdr();
    { Out o; StorageClient(o.prot).send_ping(pg); put("mdsl-ping", 1, o); }
    ListSlicesReq ls;
    ls.hdr = hdr();
    ls.cursor = std::string(16, '\x01');
    ls.max = 333;
    { Out o; StorageClient(o.prot).send_list_slices(ls); put("mdsl-list-slices", 1, o); }
    TractReq tr;
    tr.hdr = hdr();
    tr.fsid = 3;
    tr.set_id = 77;
    tr.tract = 2;
    tr.__set_data(std::string(5000, 't'));
    { Out o; StorageClient(o.prot).send_tract_put(tr); put("mdsl-tract-put", 1, o); }
    { Out o; StorageClient(o.prot).send_tract_get(tr); put("mdsl-tract-get", 1, o); }
    tr.tract_end = 9;
    { Out o; StorageClient(o.prot).send_tract_remove(tr); put("mdsl-tract-remove", 1, o); }
    { Out o; StorageClient(o.prot).send_tract_touch(tr); put("mdsl-tract-touch", 1, o); }
    TractListReq tl;
    tl.hdr = hdr();
    tl.fsid = 3;
    tl.cookie = 17;
    tl.max = 100;
    { Out o; StorageClient(o.prot).send_tract_list(tl); put("mdsl-tract-list", 1, o); }
    tl.__set_set_id(77);
    { Out o; StorageClient(o.prot).send_tract_list(tl); put("mdsl-tract-stat", 1, o); }
}

static void gen_r2()
{
    RegisterReq r;
    r.hdr = hdr();
    r.type = SiteType::MDS;
    r.address = "127.0.0.1:7000";
    r.capacity = 100;
    r.prev_id = 0;
    r.fs_name = "fs0";
    { Out o; R2Client(o.prot).send_register_site(r); put("r2-register", 2, o); }
    HeartbeatReq h;
    h.hdr = hdr();
    h.site_id = 1;
    h.view_version = 3;
    h.load = 0.5;
    FsCounter c;
    c.fsid = 1;
    c.files = 10;
    c.bytes = 100;
    h.counters.push_back(c);
    { Out o; R2Client(o.prot).send_heartbeat(h); put("r2-heartbeat", 2, o); }
    h.__set_usage_epoch(77);
    StorageReport sr;
    sr.size = 1 << 30;
    sr.avail = 1 << 29;
    sr.dev = 2049;
    h.__set_storage(sr);
    { Out o; R2Client(o.prot).send_heartbeat(h); put("r2-heartbeat-usage", 2, o); }
    ViewReq v;
    v.hdr = hdr();
    v.since_version = 0;
    { Out o; R2Client(o.prot).send_get_view(v); put("r2-view", 2, o); }
    FsReq f;
    f.hdr = hdr();
    f.name = "fs1";
    f.blob_backend = "local";
    f.blob_path = "/tmp/blobs";
    { Out o; R2Client(o.prot).send_fs_create(f); put("r2-fs-create", 2, o); }
    { Out o; R2Client(o.prot).send_fs_list(f); put("r2-fs-list", 2, o); }
    f.force = true;
    { Out o; R2Client(o.prot).send_fs_drop(f); put("r2-fs-drop", 2, o); }
    f.quota_files = 10;
    f.quota_bytes = 1 << 20;
    { Out o; R2Client(o.prot).send_fs_quota(f); put("r2-fs-quota", 2, o); }
    f.usage_files = 5;
    f.usage_bytes = 500;
    { Out o; R2Client(o.prot).send_fs_set_usage(f); put("r2-fs-set-usage", 2, o); }
    SiteReq s;
    s.hdr = hdr();
    s.site_id = 2;
    { Out o; R2Client(o.prot).send_site_drain(s); put("r2-drain", 2, o); }
    { Out o; R2Client(o.prot).send_site_remove(s); put("r2-remove", 2, o); }
    { Out o; R2Client(o.prot).send_site_leave(s); put("r2-leave", 2, o); }
    RangeReq g;
    g.hdr = hdr();
    g.site_id = 1;
    g.count = 1000;
    { Out o; R2Client(o.prot).send_alloc_uuids(g); put("r2-alloc", 2, o); }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    gen_mds();
    gen_mdsl();
    gen_r2();
    return 0;
}
