/*
 * pom.thrift -- every RPC of Pomegranate, in one place (docs/architecture.md "Components").
 *
 * Conventions:
 *  (1) Every request starts with a ReqHeader: a request id (kept across
 *      retries of the same call, so a server can answer a retry from its reply
 *      cache instead of applying the change twice), the caller's remaining
 *      time budget, and the forwarding hop count.
 *  (2) Application errors travel in the reply's `status` as a negative errno;
 *      Thrift exceptions are reserved for transport failure. A reply with
 *      status != 0 carries no other meaningful field.
 *  (3) Field ids are never reused; new fields are optional with defaults, so
 *      a newer and an older peer still understand each other.
 *  (4) Rows travel as Row structs (fixed columns + column groups); the MDS and
 *      MDSL convert them to the xt_row codec at the edge.
 */
namespace cpp pom.rpc

struct ReqHeader {
  1: i64 req_id = 0,
  2: i32 budget_ms = 0,      // 0: the server's default deadline
  3: i16 hops = 0,           // MDS forwarding count; bounded by a hop limit
  4: i64 ring_version = 0,   // the caller's ring version (stale -> piggyback)
  5: i32 client_id = 0,      // R2 site id of the caller (0: unregistered)
}

/* ---------------- common to every service ---------------- */

struct PingReq {
  1: ReqHeader hdr,
  2: binary payload,
}
struct PingResp {
  1: i32 status = 0,
  2: binary payload,
  3: i64 server_time_ns = 0,
}

service Common {
  PingResp ping(1: PingReq req),
}

/* ---------------- xTable on MDS (docs/architecture.md "The xTable API") ---------------- */

struct Attr {
  1: i64 uuid = 0,
  2: i8 type = 0,
  3: i32 mode = 0,
  4: i32 uid = 0,
  5: i32 gid = 0,
  6: i32 nlink = 0,
  7: i64 size = 0,
  8: i64 atime_ns = 0,
  9: i64 mtime_ns = 0,
  10: i64 ctime_ns = 0,
  11: i64 btime_ns = 0,
  12: i32 flags = 0,
  13: i64 generation = 0,
  14: i64 version = 0,
}

struct Column {
  1: i16 id,
  2: binary value,
}

struct Row {
  1: binary name,
  2: Attr attr,
  3: list<Column> columns,
}

/* Which table a request addresses and what the caller believes of it. */
struct TableRef {
  1: i32 fsid,
  2: i64 table,              // directory uuid (GDT/ILT/kv tables: reserved ids)
  3: i32 slice_hint = -1,    // slice the caller's bitmap picked (-1: unknown)
}

/* Bitmap bits and ring version the caller lacked, piggybacked on replies. */
struct Piggyback {
  1: optional binary bitmap,       // xt_bitmap encoding of the table
  2: optional i64 ring_version,
}

const i32 XT_F_EXCL      = 0x01    // create: fail with -EEXIST if present
const i32 XT_F_INLINE    = 0x02    // include inline data in the reply
const i32 XT_F_IF_VER    = 0x04    // update/delete: only if version matches
const i32 XT_F_BITMAP    = 0x08    // reply carries the table's bitmap
const i32 XT_F_SYNC      = 0x10    // reply after the change is committed
const i32 XT_F_IF_UUID   = 0x20    // update/delete (and create/lookup in an atomic
                                   // batch): only if the row's uuid is expect_uuid
const i32 XT_F_SYS       = 0x40    // the request may name system rows (names
                                   // starting 00 FF, docs/mds-xact.md); set only
                                   // by MDS-to-MDS calls, else such a name: -EINVAL
const i32 XT_F_SOFT      = 0x80    // update, with XT_F_SYS: an eager count delta of
                                   // an RMU, shown until delivered (mds/mds_soft.h)
const i32 XT_F_RMU       = 0x100   // a copy op, applied newest-wins by ctime; in a
                                   // client's atomic batch it may be delivered later
                                   // (RMU): xt_rpc_mds.h, docs/mds-xact.md "RMU: copies (the GDT)"
const i32 XT_F_UPSERT    = 0x200   // update of an absent row creates it from `row`
                                   // (version 0); unconditional updates only, never
                                   // in an atomic batch (a key/value put)

/* set_mask bits of an update: bits 0..12 are xt_row.h's XT_ROW_SET_*
 * (type, uuid, mode, uid, gid, nlink, size, atime, mtime, ctime, btime,
 * flags, generation; type and uuid are ignored: updates never change them). XT_SET_NLINK_ADD: Attr.nlink is a signed delta added to a
 * counted directory's nlink (>= 2, never taken below 2; 0 or 1 stay) under
 * the MDS's slice lock, no version needed (docs/client.md "nlink"); with
 * the nlink bit (0x20) too the update fails -EINVAL. */
const i32 XT_SET_NLINK_ADD = 0x8000
/* XT_SET_TIMES_MAX: with the atime/mtime/ctime bits, each is set only where
 * the new value is later (a max-merge: an RMU's late delivery never moves
 * a time back). */
const i32 XT_SET_TIMES_MAX = 0x10000
/* XT_SET_ENTRY_ADD, XT_SET_ENTRY_DEL: the update of a directory's own row
 * that rides with an entry made (ADD) or removed (DEL) in it fails -EPERM
 * when the directory is immutable (both) or append-only (DEL): xt_row.h. */
const i32 XT_SET_ENTRY_ADD = 0x20000
const i32 XT_SET_ENTRY_DEL = 0x40000

struct XtReq {
  1: ReqHeader hdr,
  2: TableRef table,
  3: binary name,
  4: i32 flags = 0,
  5: optional Row row,             // create/update: the new values
  6: optional list<i16> columns,   // lookup: column groups wanted
  7: optional i64 expect_version,  // with XT_F_IF_VER
  8: optional i32 set_mask,        // update: which Attr fields to set (XT_SET_*)
  9: optional list<i16> drop_columns,
  10: optional i64 expect_uuid,    // with XT_F_IF_UUID
  11: optional Piggyback pb,       // MDS -> MDS forward: the sender's bitmap
                                   // of the table (merged before routing)
  12: i64 name_hash = 0,           // xt_hash_name(name), computed once by the
                                   // sender (it routed by it); the MDS answers
                                   // -EINVAL when it is not, and uses it below
}
struct XtResp {
  1: i32 status = 0,
  2: optional Row row,
  3: optional Piggyback pb,
  4: i64 commit_group = 0,         // group holding this change (for sync)
  5: i64 epoch = 0,                // the answering MDS's incarnation (0: unknown)
  6: i32 epoch_site = 0,           // whose incarnation `epoch` is, when a
                                   // forward answered (0: the MDS called)
}

struct ListReq {
  1: ReqHeader hdr,
  2: TableRef table,
  3: i64 cookie = 0,               // resume point (docs/architecture.md "Locating a row")
  4: i32 max_entries = 256,
  5: i32 flags = 0,                // XT_F_BITMAP; XT_F_SYS: system rows listed too
  6: optional list<i16> columns,
  7: optional binary substring,    // key/value search: only matching keys
  8: optional Piggyback pb,        // MDS -> MDS forward: the sender's bitmap
}
struct ListResp {
  1: i32 status = 0,
  2: list<Row> rows,
  3: list<i64> cookies,            // cookie of each row
  4: i64 next_cookie = 0,          // XT_COOKIE_END (1<<62) at the end
  5: optional Piggyback pb,
}

enum XtOp { CREATE = 1, LOOKUP = 2, UPDATE = 3, DELETE = 4 }
struct BatchOp {
  1: XtOp op,
  2: XtReq req,
}
/* Batch flags. XT_BATCH_ATOMIC: all ops apply or none does, in one commit
 * group (docs/mds-commit.md "Atomic batches"); at most XT_BATCH_ATOMIC_MAX
 * ops, each on a different row. Inside it a CREATE with XT_F_IF_VER
 * replaces an existing row only if its version is expect_version, and a
 * LOOKUP is a check (the row exists, with XT_F_IF_VER at that version) that
 * returns no row. status/failed: the first failing op's -errno and index;
 * that result has the error, every other result -ECANCELED. */
const i32 XT_BATCH_ATOMIC     = 0x01
const i32 XT_BATCH_ATOMIC_MAX = 16

struct BatchReq {
  1: ReqHeader hdr,
  2: list<BatchOp> ops,
  3: i32 flags = 0,                // XT_BATCH_*
}
struct BatchResp {
  1: i32 status = 0,
  2: list<XtResp> results,
  3: i32 failed = -1,              // XT_BATCH_ATOMIC: index of the failing op
}

struct SyncReq {
  1: ReqHeader hdr,
  2: i64 commit_group = 0,         // 0: everything acknowledged so far
}
struct SyncResp {
  1: i32 status = 0,
  2: i64 committed_group = 0,
  3: i64 epoch = 0,                // as XtResp.epoch: a client that saw another
                                   // epoch acknowledge its changes cannot trust
                                   // this sync for them (docs/mds-commit.md)
}

/* Bitmap gossip among MDS (docs/mds-dist.md): the full bitmaps of tables
 * whose bitmap changed recently; the receiver ORs them into its own (and,
 * for tables it is the home of, persists the new bits). */
struct TableBitmap {
  1: i32 fsid,
  2: i64 table,
  3: binary bitmap,                // xt_bitmap encoding
}
struct GossipReq {
  1: ReqHeader hdr,
  2: list<TableBitmap> tables,
  3: i32 from_site = 0,
}
struct GossipResp {
  1: i32 status = 0,
  2: i32 new_bits = 0,             // bits the receiver did not have
}

/* Slice handover on a ring-0 change (docs/mds-dist.md, stage 2): before it
 * loads a slice from the MDSL, the slice's new owner asks every MDS that may
 * still hold it to write it back and let it go. */
struct ReleaseReq {
  1: ReqHeader hdr,
  2: i32 fsid,
  3: i64 table,
  4: i32 slice,                    // -1 (MDS_META_SLICE): the table's bitmap
                                   // slice (its home moved)
  5: i64 ring_version,             // the asker's ring 0
  6: i32 from_site = 0,
}
struct ReleaseResp {
  1: i32 status = 0,               // 0: not held here (any more); -EAGAIN:
                                   // this MDS's ring 0 is older, or the
                                   // write-back has not finished
  2: i64 clean_version = 0,        // this MDS holds no slice that ring 0 of
                                   // this version gives to another MDS
}

service XTable extends Common {
  XtResp create(1: XtReq req),
  XtResp lookup(1: XtReq req),
  XtResp update(1: XtReq req),
  XtResp remove(1: XtReq req),     // "delete" is reserved in C++
  ListResp list_rows(1: ListReq req),
  BatchResp batch(1: BatchReq req),
  SyncResp sync(1: SyncReq req),
  GossipResp gossip(1: GossipReq req),
  ReleaseResp release(1: ReleaseReq req),
}

/* ---------------- storage on MDSL (docs/format-mdsl.md) ---------------- */

/* One record of a two-phase commit; the contract's xt_store_rec (xtable/xt_store.h). */
const i8 STORE_REC_IMAGE  = 1      // full slice image (xt_slice encoding)
const i8 STORE_REC_DELTA  = 2      // changed rows since the previous version
const i8 STORE_REC_COLUMN = 3      // one row's column-group bytes
const i8 STORE_F_TOMBSTONE = 1     // COLUMN: the column was deleted
const i8 STORE_F_MOVED = 2         // IMAGE, empty: the slice moved to another MDSL

struct StoreRecord {
  1: i8 type,
  2: i8 flags = 0,
  3: i32 fsid,
  4: i64 table,
  5: i32 slice,
  6: i64 version,
  7: i64 key = 0,                  // COLUMN: row uuid
  8: i32 group = 0,                // COLUMN: column group id
  9: binary data,
}
struct PrepareReq {
  1: ReqHeader hdr,
  2: i64 txid,
  3: list<StoreRecord> records,
}
struct TxReq {
  1: ReqHeader hdr,
  2: i64 txid,
}
struct TxResp {
  1: i32 status = 0,
}
struct LoadReq {
  1: ReqHeader hdr,
  2: i32 fsid,
  3: i64 table,
  4: i32 slice,
}
struct Blob {
  1: i64 version,
  2: binary data,
  80: i8 flags = 0,                // STORE_F_* of the record (a catch-up keeps SYS)
}
struct LoadResp {
  1: i32 status = 0,
  2: optional Blob image,          // the latest image ...
  3: list<Blob> deltas,            // ... and the deltas after it, oldest first
}
struct ColumnReq {
  1: ReqHeader hdr,
  2: i32 fsid,
  3: i64 table,
  4: i32 slice,
  5: i64 key,
  6: i32 group,
}
struct ColumnResp {
  1: i32 status = 0,
  2: binary value,
  3: i64 version = 0,
}
struct MdReq {
  1: ReqHeader hdr,
  2: i32 fsid,
  3: i64 table,
  4: optional binary md,           // set_md: the new metadata
}
struct MdResp {
  1: i32 status = 0,
  2: binary md,
}
struct StoreStatReq {
  1: ReqHeader hdr,
}
struct StoreStatResp {
  1: i32 status = 0,
  2: i64 tables = 0,
  3: i64 segments = 0,
  4: i64 bytes = 0,
  5: i64 live_bytes = 0,
  6: i64 commits = 0,
  7: i64 aborts = 0,
  8: i64 gc_freed_segments = 0,
  9: i64 corrupt_records = 0,
  10: i32 failed = 0,              // sticky write error (negative errno) or 0
  11: list<i64> prepared_txids,    // prepared, undecided
  // Optional (an MDSL that does not send them leaves 0): GC and space back after
  // ring-1 moves (docs/mdsl-scale.md "Space back", mdsl/mdsl_space.c).
  12: i64 gc_passes = 0,
  13: i64 gc_moved_bytes = 0,
  14: i64 gc_freed_bytes = 0,
  15: i64 dropped_folders = 0,         // folders dropped whole (all slices MOVED)
  16: i64 dropped_bytes = 0,
  17: i64 rolled_segments = 0,         // active segments rolled (idle or sweep)
  18: i64 sweeps = 0,                  // sweeps run to their end
  19: i64 sweep_owed = 0,              // ring-1 seq of a sweep still owed, 0 none
  // Catch-up from the replicas (docs/mdsl-replicas.md "Catch-up"): slices this
  // MDSL should hold and does not yet hold at a peer's version (-1: not counted
  // yet), and what it pulled since it started.
  80: i64 under_replicated = -1,
  81: i64 pulled_slices = 0,
  82: i64 pulled_bytes = 0,
}
/* list_slices: what the MDSL stores, one entry per slice, in index order
 * (docs/mdsl-scale.md "The mover"). A peer without the call answers an
 * unknown-method error (the caller sees -EPROTO). */
struct ListSlicesReq {
  1: ReqHeader hdr,
  2: binary cursor,                // empty: from the first; else a reply's cursor
  3: i32 max = 0,                  // entries wanted (> 0; capped by the MDSL)
}
struct SliceInfo {
  1: i32 fsid,
  2: i64 table,
  3: i32 slice,
  4: i64 version,                  // newest version stored (image or delta)
  5: bool moved = false,           // its newest image is a MOVED tombstone
  6: bool sys = false,             // its newest record has STORE_F_SYS (system rows)
  80: bool image = false,          // an image is stored (the slice is whole here)
}
struct ListSlicesResp {
  1: i32 status = 0,
  2: list<SliceInfo> slices,
  3: binary cursor,                // resume after the last entry
  4: bool at_end = false,          // nothing follows
}

/* Tracts of the `mdsl` blob backend (docs/format-blob.md "mdsl"): a whole
 * tract per put, its bytes checked against their XXH3 at every get. A client
 * key of fs N may make these calls for fs N only. */
struct TractReq {
  1: ReqHeader hdr,
  2: i32 fsid,
  3: i64 set_id,
  4: i32 tract,                    // put, get: the tract; remove: the first
  5: i32 tract_end = 0,            // remove: the end (exclusive), 0: to the last
  6: optional binary data,         // put: the bytes (at most 16 MiB)
  7: i32 offset = 0,               // get: the first byte wanted
  8: i32 length = 0,               // get: bytes wanted from offset, 0: to the end
}
struct TractResp {
  1: i32 status = 0,               // get: -ENOENT none, -EBADMSG checksum mismatch
  2: binary data,                  // get: the bytes
}
/* tract_list: the tract sets an MDSL holds for one fs, for orphan reclaim
 * and fsck (docs/format-blob.md "mdsl"), a page per call in no order; the
 * client merges the answers of every MDSL. A client key of fs N may list
 * fs N only. tract_touch (a TractReq: fsid, set_id) starts a set's age
 * again on an MDSL that holds it (the lease of an open file's set). */
struct TractListReq {
  1: ReqHeader hdr,
  2: i32 fsid,
  3: i64 cookie = 0,               // 0: from the first; else a reply's cookie
  4: i32 max = 0,                  // sets wanted (> 0; capped by the MDSL)
  5: optional i64 set_id,          // set: that set alone (-ENOENT: none here)
}
struct TractSetInfo {
  1: i64 set_id,
  2: i64 tracts,                   // tracts held here, the set's map included
  3: i64 bytes,                    // their payload bytes
  4: i64 mtime_ns,                 // wall clock of its last put or touch here
}
struct TractListResp {
  1: i32 status = 0,
  2: list<TractSetInfo> sets,
  3: i64 cookie = 0,               // resume here
  4: bool at_end = false,          // nothing follows
}

service Storage extends Common {
  TxResp prepare(1: PrepareReq req),
  TxResp commit(1: TxReq req),
  TxResp abort(1: TxReq req),
  LoadResp load_slice(1: LoadReq req),
  ColumnResp read_column(1: ColumnReq req),
  MdResp set_md(1: MdReq req),
  MdResp get_md(1: MdReq req),
  StoreStatResp stat(1: StoreStatReq req),
  ListSlicesResp list_slices(1: ListSlicesReq req),
  TractResp tract_put(1: TractReq req),
  TractResp tract_get(1: TractReq req),
  TractResp tract_remove(1: TractReq req),
  TractListResp tract_list(1: TractListReq req),
  TractResp tract_touch(1: TractReq req),
}

/* ---------------- R2 site manager (docs/r2.md) ---------------- */

enum SiteType { MDS = 1, MDSL = 2, CLIENT = 3, R2 = 4 }
enum SiteState { UP = 1, TRANSIENT = 2, FAILED = 3, DRAINING = 4, REMOVED = 5 }

struct Site {
  1: i32 id,
  2: SiteType type,
  3: string address,               // host:port (clients: a label)
  4: i64 capacity = 0,
  5: SiteState state = SiteState.UP,
  6: i64 last_heartbeat_ns = 0,    // R2's clock; 0 if none since R2 started
  7: i64 uuid_lo = 0,              // MDS: uuid range handed out by R2
  8: i64 uuid_hi = 0,
  9: string fs_name = "",          // clients: the fs they mounted
  10: double load = 0,
  11: string metrics_address = "",  // host:port of its /metrics; "": none
}
struct RingInfo {
  1: i32 ring,                     // 0: slices -> MDS, 1: slices -> MDSL
  2: i64 version,
  3: binary encoded,               // xt_ring encoding
}
struct FsInfo {
  1: i32 fsid,
  2: string name,
  3: i64 root_table,
  4: i64 files = 0,
  5: i64 bytes = 0,
  6: i32 mounts = 0,
  7: optional binary root_bitmap,
  8: string blob_backend = "local",
  9: string blob_path = "",
  10: i64 created_ns = 0,
  11: i64 key_gen = 0,             // generation of its client key (docs/security.md)
  // Quotas (docs/r2.md "Capacity and quotas"): 0 none.
  40: i64 quota_files = 0,
  41: i64 quota_bytes = 0,
}
/* A view: the sections that changed after the caller's version. */
const i32 VIEW_SITES = 1
const i32 VIEW_RINGS = 2
const i32 VIEW_FS    = 4
/* Ring-1 change state (docs/mdsl-scale.md "R2 and pomctl"); part of the
 * rings section. Not extra RingInfo entries: today's MDS take every
 * RingInfo of ring 1 as the current ring. */
struct Ring1Site {
  1: i32 id,
  2: i8 role = 0,                  // MDSL: 0 OUT, 1 JOINING, 2 IN, 3 DRAINED
  3: bool leaving = false,
  4: bool losing = false,
  5: bool reports = false,         // its heartbeats carry the ring-1 fields
  6: i64 acked = 0,
  7: i64 walked_ring1 = 0,
  8: i64 walked_ring0 = 0,
  9: bool has_counts = false,
  10: i64 misplaced = 0,
  11: i64 prepared = 0,
}
struct Ring1State {
  1: i8 phase = 0,                 // 0 STABLE, 1 PREPARE, 2 MOVING, 3 DONE
  2: i64 seq = 0,                  // grows at every phase change; MDS ack it
  3: bool walk = false,            // MOVING acked by every MDS of ring 0
  4: i64 from_version = 0,
  5: i64 to_version = 0,
  6: i64 started_ns = 0,
  7: optional RingInfo prev_ring,  // MOVING
  8: optional RingInfo next_ring,  // PREPARE
  9: list<Ring1Site> sites,
}
struct View {
  1: i64 version,
  2: i32 sections = 0,             // VIEW_* bits present in this reply
  3: list<Site> sites,
  4: list<RingInfo> rings,
  5: list<FsInfo> fs,
  6: string leader = "",           // address of the leading R2
  7: string store = "",            // "embedded" or "zookeeper"
  8: optional Ring1State ring1,    // with the rings section
  // With the sites section, from the leader (docs/mdsl-replicas.md "Catch-up"):
  // the under-replicated slices the MDSL report, summed, and how many report.
  80: optional i64 under_replicated,
  81: i32 repl_counted = 0,
}
struct RegisterReq {
  1: ReqHeader hdr,
  2: SiteType type,
  3: string address,
  4: i64 capacity = 0,
  5: i32 prev_id = 0,              // rejoin with the id it had
  6: string fs_name = "",          // clients: the fs being mounted
  7: string metrics_address = "",  // host:port of its /metrics; "": none
}
struct RegisterResp {
  1: i32 status = 0,
  2: i32 site_id = 0,
  3: optional View view,
}
struct FsCounter {
  1: i32 fsid,
  2: i64 files,
  3: i64 bytes,
}
struct StorageReport {
  1: i64 size = 0,                 // bytes of the file system holding the folder
  2: i64 avail = 0,                // bytes free to unprivileged writers
  3: i64 used = 0,                 // bytes of the site's own files
  4: i64 dev = 0,                  // st_dev of the folder (one disk counts once)
}
/* Per fs: what the cluster holds, and its quotas (0: none). */
struct FsUsage {
  1: i32 fsid,
  2: i64 files = 0,
  3: i64 bytes = 0,
  4: i64 quota_files = 0,
  5: i64 quota_bytes = 0,
}
/* The storage of the cluster, summed over distinct (host, dev) of the
 * MDSL reports, and the usage of every fs. */
struct Capacity {
  1: i64 size = 0,
  2: i64 avail = 0,
  3: list<FsUsage> fs,
  4: list<i64> devs,               // the devs summed (a client adds its blob
                                   // folder's disk unless it is one of them)
}
struct HeartbeatReq {
  1: ReqHeader hdr,
  2: i32 site_id,
  3: i64 view_version,
  4: double load = 0,
  5: list<FsCounter> counters,
  // Ring-1 fields (docs/mdsl-scale.md "Completion"); a site that sends none keeps
  // ring 1 frozen. MDS: the ring-1 seq installed, the last full walk.
  // MDSL: slices its index holds that the current ring places elsewhere,
  // and prepared transactions, from its last index pass.
  6: optional i64 ring1_acked,
  7: optional i64 walked_ring1,
  8: optional i64 walked_ring0,
  9: optional i64 misplaced,
  10: optional i64 prepared,
  // MDSL: the ring-1 seq of the view its reported pass counted against
  // (R2 ends a change only on a zero counted under the walk's seq or later).
  11: optional i64 counted_seq,
  // Capacity (docs/r2.md "Capacity and quotas"). MDS: `counters` are the
  // inodes and bytes its committed changes added since its incarnation
  // usage_epoch began (signed, as two's complement); without usage_epoch R2
  // ignores them. MDSL: the statvfs of the folder it stores in.
  40: optional i64 usage_epoch,
  41: optional StorageReport storage,
  // MDSL with replicas (docs/mdsl-replicas.md "Catch-up"): slices it should hold
  // and does not yet hold at a peer's version, from its last comparison.
  80: optional i64 under_replicated,
}
struct ViewResp {
  1: i32 status = 0,
  2: optional View view,           // absent when the caller is current
  40: optional Capacity capacity,  // heartbeat and get_view replies of the leader
}
struct ViewReq {
  1: ReqHeader hdr,
  2: i64 since_version = 0,
}
struct FsReq {
  1: ReqHeader hdr,
  2: string name,
  3: bool force = false,
  4: string blob_backend = "",
  5: string blob_path = "",
  40: i64 quota_files = 0,         // fs_quota: the new quotas (0: none)
  41: i64 quota_bytes = 0,
  42: i64 usage_files = 0,         // fs_set_usage: the exact figures (pomctl fsck)
  43: i64 usage_bytes = 0,
}
struct FsResp {
  1: i32 status = 0,
  2: list<FsInfo> fs,
}
struct SiteReq {
  1: ReqHeader hdr,
  2: i32 site_id,
}
struct SiteResp {
  1: i32 status = 0,
}
struct RangeReq {
  1: ReqHeader hdr,
  2: i32 site_id,
  3: i64 count,
}
struct RangeResp {
  1: i32 status = 0,
  2: i64 lo = 0,                   // [lo, hi): uuids for this MDS alone
  3: i64 hi = 0,
}

/* Only the leading R2 answers; the others reply status -EREMOTE and name
 * the leader in get_view's View.leader. */
service R2 extends Common {
  RegisterResp register_site(1: RegisterReq req),
  ViewResp heartbeat(1: HeartbeatReq req),
  ViewResp get_view(1: ViewReq req),
  FsResp fs_create(1: FsReq req),
  FsResp fs_list(1: FsReq req),
  FsResp fs_drop(1: FsReq req),
  FsResp fs_rotate_key(1: FsReq req),  // key_gen + 1: older client keys stop working
  SiteResp site_drain(1: SiteReq req),
  SiteResp site_remove(1: SiteReq req),
  SiteResp site_leave(1: SiteReq req),   // a client site ends its own registration
  RangeResp alloc_uuids(1: RangeReq req),
  FsResp fs_quota(1: FsReq req),       // sets quota_files/quota_bytes of fs `name`
  FsResp fs_set_usage(1: FsReq req),   // sets the inode and byte totals of fs `name`
}
