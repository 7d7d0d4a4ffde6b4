/*
 * mdsl_format.h -- the on-disk format of the MDSL, written once (reader and
 * writer both include this file; docs/format-mdsl.md says the same in prose).
 *
 * Folder layout under the store root (one folder per (fsid, table)):
 *
 *   <root>/t.<fsid>.<table:016x>/md          table metadata records (MD)
 *   <root>/t.<fsid>.<table:016x>/TSS.<n>     slice images, deltas, and the
 *                                            transaction records (PREPARE,
 *                                            COMMIT, ABORT, GCMOVE)
 *   <root>/t.<fsid>.<table:016x>/CS.<g>.<n>  column-group g bytes (COLUMN)
 *
 * <n> is the segment number (decimal, growing from 1). A segment is an
 * append-only sequence of records; it is closed once the next record does not
 * fit in `seg_size` bytes (a record larger than seg_size gets a segment of
 * its own).
 *
 * Record = 64-byte header + payload (no padding between records).
 *
 *   off size field
 *     0   4  magic        MDSL_MAGIC ("MDSL" read as little-endian bytes)
 *     4   1  type         enum mdsl_rec_type
 *     5   1  flags        MDSL_F_* (TOMBSTONE on empty COLUMN records,
 *                         MOVED on empty IMAGE records)
 *     6   2  format       MDSL_FORMAT_VERSION
 *     8   4  payload_len  bytes after the header
 *    12   4  fsid
 *    16   8  txid         transaction that wrote it (0 for GCMOVE, MD)
 *    24   8  table
 *    32   8  version      slice version (IMAGE, DELTA) / row column version;
 *                         PREPARE: number of tables the transaction spans
 *                         (0 = unknown); GCMOVE: low-water TSS segno
 *    40   4  slice
 *    44   4  group        column group (COLUMN), 0 otherwise
 *    48   8  key          row uuid (COLUMN), 0 otherwise
 *    56   8  checksum     xt_hash_bytes(payload, payload_len,
 *                           xt_hash_bytes(header[0..56), 56, MDSL_MAGIC))
 *
 * All integers little-endian. The checksum covers the header and the
 * payload, so a torn or corrupt record of any kind is detected.
 *
 * PREPARE and GCMOVE payloads are arrays of 56-byte entries, each naming one
 * data record of the same folder and its index key:
 *
 *   off size field
 *     0   1  type         IMAGE, DELTA or COLUMN
 *     1   1  flags        the record's flags
 *     2   2  reserved     0
 *     4   4  group        column group (COLUMN) -> file CS.<group>.<segno>;
 *                         IMAGE/DELTA live in TSS.<segno>
 *     8   4  segno
 *    12   4  len          total record length (header + payload)
 *    16   8  offset       of the record in its segment
 *    24   8  checksum     the record's header checksum field
 *    32   8  version
 *    40   4  slice
 *    44   4  reserved     0
 *    48   8  key          row uuid (COLUMN)
 *
 * PREPARE, COMMIT and GCMOVE payloads are arrays of the entries above: a
 * COMMIT repeats its PREPARE's manifest, so it proves what it made visible
 * even after GC deleted the PREPARE's segment. ABORT carries no payload
 * (txid in the header). MD carries the table's opaque metadata bytes; the
 * last valid MD record of `md` wins.
 */
#ifndef MDSL_FORMAT_H
#define MDSL_FORMAT_H

#include <stdint.h>

#define MDSL_MAGIC          UINT32_C(0x4C53444D) /* 'M' 'D' 'S' 'L' */
#define MDSL_FORMAT_VERSION 1
#define MDSL_HDR_SIZE       64
#define MDSL_ENTRY_SIZE     56
/* A payload larger than this is corrupt (also bounds a scan's allocation). */
#define MDSL_MAX_PAYLOAD    (UINT32_C(1) << 30)

/* header field offsets */
enum {
    MDSL_HO_MAGIC = 0,
    MDSL_HO_TYPE = 4,
    MDSL_HO_FLAGS = 5,
    MDSL_HO_FORMAT = 6,
    MDSL_HO_LEN = 8,
    MDSL_HO_FSID = 12,
    MDSL_HO_TXID = 16,
    MDSL_HO_TABLE = 24,
    MDSL_HO_VERSION = 32,
    MDSL_HO_SLICE = 40,
    MDSL_HO_GROUP = 44,
    MDSL_HO_KEY = 48,
    MDSL_HO_CSUM = 56,
};

/* manifest entry field offsets */
enum {
    MDSL_EO_TYPE = 0,
    MDSL_EO_FLAGS = 1,
    MDSL_EO_GROUP = 4,
    MDSL_EO_SEGNO = 8,
    MDSL_EO_LEN = 12,
    MDSL_EO_OFF = 16,
    MDSL_EO_CSUM = 24,
    MDSL_EO_VERSION = 32,
    MDSL_EO_SLICE = 40,
    MDSL_EO_KEY = 48,
};

enum mdsl_rec_type {
    MDSL_REC_IMAGE = 1,   /* full slice image (opaque bytes) */
    MDSL_REC_DELTA = 2,   /* slice delta: changed rows since version-1 */
    MDSL_REC_COLUMN = 3,  /* one row's column-group bytes */
    MDSL_REC_PREPARE = 4, /* manifest of a prepared transaction */
    MDSL_REC_COMMIT = 5,
    MDSL_REC_ABORT = 6,
    MDSL_REC_GCMOVE = 7,  /* manifest of records re-asserted by GC */
    MDSL_REC_MD = 8,      /* table metadata (in `md`) */
};
#define MDSL_REC_TYPE_MAX 8

#define MDSL_F_TOMBSTONE 0x01 /* COLUMN: the row's group is deleted */
#define MDSL_F_MOVED 0x02     /* IMAGE, empty: the slice moved to another MDSL
                                 (docs/mdsl-scale.md "Tombstones") */
#define MDSL_F_SYS 0x04       /* IMAGE/DELTA: the slice holds system rows after
                                 this record (XT_STORE_F_SYS; listed) */

#endif /* MDSL_FORMAT_H */
