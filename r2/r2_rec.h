/*
 * r2_rec.h -- the records R2 keeps in its state store (r2_store.h): their
 * keys, their byte layouts, and the checks on names and addresses that
 * come from the network. Written once here and in docs/r2.md; r2_mgr.c is
 * the only writer and reader.
 *
 * Keys (all under /r2):
 *   /r2/view            meta: view version + per-section versions (below).
 *                       Every change of R2 state is one r2_store_multi that
 *                       also puts this record with a compare-and-set on its
 *                       store version, so two R2s that both believe they
 *                       lead can never both write (the second gets -ESTALE).
 *   /r2/sites/<id>      one site (decimal id), persistent
 *   /r2/fs/<fsid>       one file-system instance (decimal fsid)
 *   /r2/rings/<n>       ring n (0: MDS, 1: MDSL), the xt_ring encoding
 *   /r2/rings/1p        the previous ring 1 while a ring-1 change is MOVING
 *                       (absent otherwise), the xt_ring encoding
 *   /r2/ring1           the ring-1 change state (below; absent: STABLE,
 *                       nothing joining, leaving or drained)
 *   /r2/removed/<id>    an MDS or MDSL site the operator removed (one
 *                       byte: its type). Its daemon, still running or
 *                       started again on its old folder, may not register
 *                       with that id again (r2_mgr_register: -EIDRM): a
 *                       removed site never rejoins a ring on its own.
 *   /r2/usage           inodes and bytes of every fs, with the MDS
 *                       incarnation counts they include (below; absent: none)
 *   /r2/ids/sites       id counters (r2_store_alloc_id; never reused)
 *   /r2/ids/fsids
 *   /r2/ids/uuid_ranges counter of uuid ranges: range k is
 *                       [k * range, (k+1) * range); k starts at 1, so range 0
 *                       (uuid 1 = every fs's root, and other reserved ids)
 *                       is never handed out.
 *
 * Meta record (/r2/view), R2_REC_META_SIZE bytes, little-endian:
 *   off size field
 *   0   4    magic R2_REC_META_MAGIC ("R2VW")
 *   4   4    format (1)
 *   8   8    view version (0 = nothing written yet)
 *   16  8    sites section: view version of its last change
 *   24  8    rings section: idem
 *   32  8    fs section: idem
 *   40  8    checksum: xt_hash_bytes(bytes 0..39, R2_REC_SEED)
 *
 * Site record (/r2/sites/<id>):
 *   off size field
 *   0   1    format (1)
 *   1   1    type  (enum xt_site_type)
 *   2   1    state (enum xt_site_state; never REMOVED: removal deletes)
 *   3   1    flags: R2_REC_SITE_METRICS (else 0)
 *   4   4    id
 *   8   8    capacity (bytes)
 *   16  8    uuid_lo  (MDS: latest range handed out; else 0)
 *   24  8    uuid_hi
 *   32  2    address length a (1..XT_ADDR_MAX-1)
 *   34  2    fs name length f (0..XT_FSNAME_MAX)
 *   36  a    address bytes
 *   36+a f   fs name bytes (clients: the fs they mount)
 *   with R2_REC_SITE_METRICS:
 *   +0  2    metrics address length m (1..XT_ADDR_MAX-1)
 *   +2  m    metrics address bytes (HOST:PORT of the site's /metrics)
 *   end 8    checksum: xt_hash_bytes(all preceding bytes, R2_REC_SEED)
 *
 * File-system record (/r2/fs/<fsid>):
 *   off size field
 *   0   1    format (1)
 *   1   1    name length n (1..XT_FSNAME_MAX)
 *   2   1    blob backend length b (1..15)
 *   3   1    flags: R2_REC_FS_KEYGEN, R2_REC_FS_QUOTA
 *   4   4    fsid
 *   8   8    root table uuid (1)
 *   16  8    created, wall clock ns
 *   24  8    reserved (written 0, ignored: usage is /r2/usage)
 *   32  8    reserved (idem)
 *   40  2    blob path length p (0..XT_PATH_MAX-1; 0 = client's default)
 *   42  4    root bitmap length m (xt_bitmap encoding; 0 = none)
 *   46  8    with R2_REC_FS_KEYGEN: key generation
 *   +0  16   with R2_REC_FS_QUOTA: quota on inodes, quota on bytes (0: none)
 *   +0  n    name, then b backend bytes, p path bytes, m bitmap bytes
 *   end 8    checksum: xt_hash_bytes(all preceding bytes, R2_REC_SEED)
 *
 * Ring-1 change record (/r2/ring1; docs/mdsl-scale.md "R2 and pomctl"):
 *   off size field
 *   0   1    format (1)
 *   1   1    phase (enum xt_ring1_phase)
 *   2   1    flags: bit 0 walk (MOVING acked by every MDS of ring 0)
 *   3   1    reserved 0
 *   4   4    entry count n (0..R2_REC_RING1_MAX)
 *   8   8    seq (grows at every phase change)
 *   16  8    ring-1 version before the change
 *   24  8    ring-1 version after it (equal when STABLE)
 *   32  8    started, wall clock ns (0 when STABLE)
 *   40  8*n  entries by increasing site id: id (4), role (1: JOINING or
 *            DRAINED, else OUT), leaving (1: 0/1), reserved 0 (2). Only
 *            MDSL that are JOINING, leaving or DRAINED are listed: IN and
 *            OUT follow from ring 1 itself.
 *   end 8    checksum: xt_hash_bytes(all preceding bytes, R2_REC_SEED)
 *
 * Usage record (/r2/usage; docs/r2.md "Capacity and quotas"):
 *   off size field
 *   0   1    format (1)
 *   1   3    reserved 0
 *   4   4    fs count n (0..R2_MGR_MAX_FS)
 *   8        n fs, by increasing fsid: fsid (4), site count k (4), inodes
 *            (8, signed), bytes (8, signed), then k sites by increasing id:
 *            site id (4), incarnation (8), inodes (8, signed), bytes (8,
 *            signed) -- the counts of that incarnation the totals include
 *   end 8    checksum: xt_hash_bytes(all preceding bytes, R2_REC_SEED)
 *
 * Decoders never read outside [buf, buf+len) and reject (-EBADMSG) any
 * record whose lengths, checksum, enums or text do not check out.
 */
#ifndef R2_REC_H
#define R2_REC_H

#include "xt_rpc_r2.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define R2_KEY_VIEW        "/r2/view"
#define R2_KEY_SITES       "/r2/sites"
#define R2_KEY_FS          "/r2/fs"
#define R2_KEY_RINGS       "/r2/rings"
#define R2_KEY_RING1_PREV  "/r2/rings/1p"
#define R2_KEY_RING1       "/r2/ring1"
#define R2_KEY_USAGE       "/r2/usage"
#define R2_KEY_REMOVED     "/r2/removed"
#define R2_KEY_ID_SITES    "/r2/ids/sites"
#define R2_KEY_ID_FSIDS    "/r2/ids/fsids"
#define R2_KEY_ID_UUIDS    "/r2/ids/uuid_ranges"
#define R2_KEY_LEN         64

#define R2_REC_SEED        UINT64_C(0x72327265636f7264) /* "r2record" */
#define R2_REC_META_MAGIC  UINT32_C(0x57563252)         /* "R2VW" little-endian */
#define R2_REC_FORMAT      1
#define R2_REC_META_SIZE   48
#define R2_REC_SITE_HDR    36
#define R2_REC_FS_HDR      46
#define R2_REC_FS_KEYGEN   0x01  /* fs record byte 3: an 8-byte key generation follows */
#define R2_REC_FS_QUOTA    0x02  /* fs record byte 3: 16 bytes of quotas follow */
#define R2_REC_SITE_METRICS 0x01 /* site record byte 3: a metrics address follows */
#define R2_REC_CSUM        8
#define R2_REC_RING1_HDR   40
#define R2_REC_RING1_MAX   4096
/* Bound on a stored root bitmap: records stay under R2_STORE_VALUE_MAX. */
#define R2_REC_BITMAP_MAX  (512u << 10)

/* The root table of every file system (docs/architecture.md "Identifiers"). */
#define R2_ROOT_UUID       UINT64_C(1)

struct r2_rec_meta {
    uint64_t version;  /* view version */
    uint64_t sites_ver, rings_ver, fs_ver;
};

void r2_rec_meta_encode(const struct r2_rec_meta *m, uint8_t buf[R2_REC_META_SIZE]);
/* Returns 0 or -EBADMSG. */
int r2_rec_meta_decode(const void *buf, size_t len, struct r2_rec_meta *m);

/* Encodes the persistent fields of s (id, type, state, capacity, uuid range,
 * addr, fs_name, metrics; not the runtime fields last_hb_ns and load) into a fresh
 * buffer *buf of *len bytes (caller xt_frees). Returns 0, -EINVAL (a field
 * out of range) or -ENOMEM. */
int r2_rec_site_encode(const struct xt_site *s, void **buf, size_t *len);
/* Fills *s (runtime fields zeroed). Returns 0 or -EBADMSG. */
int r2_rec_site_decode(const void *buf, size_t len, struct xt_site *s);

/* As for sites; f->mounts is not stored. */
int r2_rec_fs_encode(const struct xt_fs_info *f, void **buf, size_t *len);
/* Fills *f; f->root_bitmap is a fresh buffer (or NULL) that the caller
 * frees with xt_free. Returns 0, -EBADMSG or -ENOMEM. */
int r2_rec_fs_decode(const void *buf, size_t len, struct xt_fs_info *f);

/* One listed MDSL of the ring-1 record. */
struct r2_rec_ring1_ent {
    uint32_t id;
    int role;      /* XT_RING1_JOINING, XT_RING1_DRAINED or XT_RING1_OUT */
    bool leaving;  /* never with DRAINED */
};

struct r2_rec_ring1 {
    int phase;     /* enum xt_ring1_phase */
    bool walk;
    uint64_t seq, from_version, to_version, started_ns;
    struct r2_rec_ring1_ent *ent; /* xt_malloc'd, by increasing id; NULL when n is 0 */
    size_t n;
};

/* Encodes r (checked as the decoder checks it) into a fresh *buf (caller
 * xt_frees). Returns 0, -EINVAL or -ENOMEM. */
int r2_rec_ring1_encode(const struct r2_rec_ring1 *r, void **buf, size_t *len);
/* Fills *r; r->ent is a fresh array (free with r2_rec_ring1_clear).
 * Returns 0, -EBADMSG or -ENOMEM. */
int r2_rec_ring1_decode(const void *buf, size_t len, struct r2_rec_ring1 *r);
void r2_rec_ring1_clear(struct r2_rec_ring1 *r);

/* What one MDS incarnation's counts added to an fs, as the totals include. */
struct r2_usage_site {
    uint32_t site;
    uint64_t epoch;            /* the incarnation (xt_r2_hb_usage.epoch) */
    int64_t files, bytes;
};

/* The usage of one fs: totals, and the incarnations they include. */
struct r2_usage {
    uint32_t fsid;
    int64_t files, bytes;
    struct r2_usage_site *s;   /* xt_malloc'd, by increasing site id */
    size_t ns;
};

/* Encodes u[0..n) (by increasing fsid) into a fresh *buf (caller xt_frees).
 * Returns 0, -EINVAL or -ENOMEM. */
int r2_rec_usage_encode(const struct r2_usage *u, size_t n, void **buf, size_t *len);
/* Fills *u (a fresh array of *n; free with r2_rec_usage_free). Returns 0,
 * -EBADMSG or -ENOMEM. */
int r2_rec_usage_decode(const void *buf, size_t len, struct r2_usage **u, size_t *n);
void r2_rec_usage_free(struct r2_usage *u, size_t n);

/* Key of a record into key[R2_KEY_LEN]: "/r2/sites/<id>", "/r2/removed/<id>", ... */
void r2_rec_site_key(char *key, uint32_t id);
void r2_rec_removed_key(char *key, uint32_t id);
void r2_rec_fs_key(char *key, uint32_t fsid);
void r2_rec_ring_key(char *key, uint32_t ring);

/* ---- checks on input from the network ---------------------------------- */

/* fs names: 1..XT_FSNAME_MAX bytes of [A-Za-z0-9._-], not "." or "..". */
bool r2_rec_fs_name_valid(const char *name);
/* Site addresses: MDS/MDSL "host:port" that xt_rpc_parse_addr accepts with a
 * port in 1..65535; clients: a label of 1..XT_ADDR_MAX-1 printable ASCII
 * bytes without spaces. */
bool r2_rec_addr_valid(int type, const char *addr);
/* Blob backends: "local", "mdsl", "rados". */
bool r2_rec_backend_valid(const char *backend);
/* Blob paths: 0..XT_PATH_MAX-1 printable ASCII bytes (0x20..0x7e). */
bool r2_rec_path_valid(const char *path);

#endif /* R2_REC_H */
