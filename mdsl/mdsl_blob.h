/*
 * mdsl_blob.h -- the MDSL's blob store: tracts of the `mdsl` blob backend
 * (docs/format-blob.md "mdsl"), kept in blob segments of their own beside
 * the slice segments, written through the same mdsl_io layer.
 *
 * A tract is named (fsid, set id, tract number) and holds up to
 * MDSL_BLOB_TRACT_MAX bytes. A put replaces the whole tract; a get answers
 * its bytes after checking their XXH3; a removal drops the tracts of a set
 * in a range of tract numbers.
 *
 * Blob segment format (DIR/blob/bseg-<segno %08u>, append-only; one
 * record after another, little-endian):
 *
 *   off  size  field
 *   0    4     magic MDSL_BLOB_MAGIC ("PTRK")
 *   4    1     type: 1 tract (payload: its bytes), 2 removal (no payload)
 *   5    3     zero
 *   8    4     fsid
 *   12   4     tract number (removal: the first tract removed)
 *   16   8     set id
 *   24   4     payload length (removal: the end of the range, exclusive;
 *              0: to the last tract)
 *   28   4     low 32 bits of XXH3_64 of bytes 0..27 (the header)
 *   32   8     XXH3_64 of the payload (removal: 0)
 *   40   ...   payload
 *
 * Invariants:
 *  (1) A put or removal is durable (its record written and fdatasync'd by
 *      mdsl_io_write) before it returns 0; the index changes only after.
 *  (2) Records are appended in one order (one appender at a time, under
 *      app_mu), and mdsl_blob_open replays them in that order: the index
 *      after a restart is the index before it, for every call that
 *      returned 0.
 *  (3) mdsl_blob_get answers the bytes of the newest put of a tract not
 *      removed since, or -EBADMSG when they do not match the XXH3 recorded
 *      at the put (never other bytes), or -ENOENT.
 *  (4) After a failed write or fdatasync every later put and removal
 *      answers that error (the store's sticky failure): the bytes on disk
 *      past the last good record are unknown.
 *  (5) GC (mdsl_blob_gc) changes what a replay reads only by dropping
 *      records it would ignore: a sealed segment is rewritten in place,
 *      keeping its indexed tract records and its removals (those of
 *      segment 0 excepted) in their order; the rewrite is fdatasync'd
 *      before it replaces the segment (a rename), so a crash at any point
 *      leaves the old file or the new one, and the index after a restart
 *      is the index before it.
 */
#ifndef MDSL_BLOB_H
#define MDSL_BLOB_H

#include <stdint.h>

#include "mdsl_io.h"
#include "xt_store.h"

#define MDSL_BLOB_MAGIC      UINT32_C(0x4b525450) /* "PTRK" little-endian */
#define MDSL_BLOB_HDR_SIZE   40
#define MDSL_BLOB_TRACT_MAX  (16u << 20)          /* 16 MiB */
#define MDSL_BLOB_REC_TRACT  1
#define MDSL_BLOB_REC_REMOVE 2

typedef struct mdsl_blob mdsl_blob;

struct mdsl_blob_opts {
    mdsl_io *io;          /* borrowed; outlives the store */
    const char *dir;      /* the blob folder (created); copied */
    uint64_t seg_size;    /* a segment is rolled past this; 0: 256 MiB */
    double gc_live_ratio; /* GC rewrites a sealed segment whose kept bytes
                             fall under this share of it; 0: 0.5 */
    unsigned gc_interval_ms; /* a GC pass this often and after removals on
                                the store's own thread; 0: none (callers run
                                mdsl_blob_gc) */
};

struct mdsl_blob_stat {
    uint64_t segments, bytes;   /* blob segment files and their bytes */
    uint64_t tracts, live_bytes; /* tracts indexed and their payload bytes */
    uint64_t dead_bytes;        /* payload bytes replaced or removed */
    int failed;                 /* sticky write error (invariant (4)) or 0 */
    uint64_t gc_segments;       /* segments GC rewrote */
    uint64_t gc_bytes;          /* segment bytes GC freed */
};

/* Opens (creates) the store in o->dir and rebuilds the index by reading
 * every record header (a torn tail of the last segment is cut). *out:
 * close with mdsl_blob_close. -errno of the I/O, -ENOMEM. */
int mdsl_blob_open(const struct mdsl_blob_opts *o, mdsl_blob **out);
void mdsl_blob_close(mdsl_blob *b); /* NULL is a no-op */

/* Stores tract (fsid, set, tract) = data[0..len), replacing what was
 * there. REQUIRES: len <= MDSL_BLOB_TRACT_MAX, data non-NULL when len.
 * 0, or -errno (the store's sticky error, -ENOSPC, -EIO). */
int mdsl_blob_put(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t tract,
                  const void *data, uint32_t len);
/* The tract's bytes into *data (xt_malloc'd, caller frees with xt_free;
 * NULL when *len is 0). -ENOENT (none), -EBADMSG (checksum mismatch,
 * logged), -EIO, -ENOMEM. */
int mdsl_blob_get(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t tract, void **data,
                  uint32_t *len);
/* Removes the tracts first..end-1 of (fsid, set) (end 0: every tract from
 * first on). Durable before it returns 0, also when nothing matched. */
int mdsl_blob_remove(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t first, uint32_t end);
void mdsl_blob_stat(mdsl_blob *b, struct mdsl_blob_stat *st);
/* One GC pass (invariant (5)): rewrites every sealed segment due. The
 * segments rewritten, -EBUSY while another pass runs, or the -errno of the
 * first rewrite that failed (that segment stays as it was). */
int mdsl_blob_gc(mdsl_blob *b);

/* Listing for orphan reclaim and fsck (client/pom_reclaim.c): a set's
 * mtime (xt_tract_set) is the wall clock of its last put or touch here,
 * kept in memory only: after a restart every set counts from the open,
 * which makes it younger, never older (a reclaimer waits longer). */
/* The set's age starts again when this MDSL holds it (else nothing). 0. */
int mdsl_blob_touch(mdsl_blob *b, uint32_t fsid, uint64_t set);
/* What this MDSL holds of (fsid, set) into *out; -ENOENT: no tract. */
int mdsl_blob_set_stat(mdsl_blob *b, uint32_t fsid, uint64_t set, struct xt_tract_set *out);
/* A page of about `max` sets of fsid from `cookie` (0: the first; else a
 * page's cookie), in no order; every set held through the whole walk is
 * answered once. out->sets: caller frees with xt_free. -EINVAL for max 0
 * or a bad cookie, -ENOMEM. */
int mdsl_blob_list(mdsl_blob *b, uint32_t fsid, uint64_t cookie, uint32_t max,
                   struct xt_tract_list *out);

/* A tract held here, as mdsl_blob_keys answers it. */
struct mdsl_blob_key {
    uint32_t fsid, tract;
    uint64_t set;
    uint32_t len;       /* payload bytes */
};
/* The tracts of every set in the index buckets from *cookie (0: the
 * first) on, whole buckets until about `max`: *out (xt_malloc'd, caller
 * frees with xt_free; *n of them), *cookie moved past them. A tract held
 * through the whole walk is answered once. 1: more buckets are left, 0:
 * the walk is done; -EINVAL (max 0, a bad cookie), -ENOMEM. */
int mdsl_blob_keys(mdsl_blob *b, uint32_t *cookie, size_t max, struct mdsl_blob_key **out,
                   size_t *n);

#endif /* MDSL_BLOB_H */
