/*
 * xt_row.h -- the row codec of xTable: one directory entry (or key/value
 * key) as a compact, versioned, checksummed byte string.
 *
 * A row has fixed columns (xt_row_attr), a name (the row key) and column
 * groups (data, xattr, user columns), each a byte string under a u16 id.
 * The MDS keeps millions of encoded rows in memory and a `stat` must never
 * read file bytes, so the encoding puts everything but the group bytes in a
 * small "meta" part with its own checksum; each group has its own checksum,
 * recorded in the meta part's group directory.
 *
 * Invariants of an encoding (every decoder checks all of them):
 *  (1) It is exactly META || GROUP BYTES with nothing after: the group
 *      lengths in the directory sum to the bytes that follow the meta part.
 *  (2) The meta checksum covers every meta byte before it, including each
 *      group's checksum, so the meta checksum transitively covers the row.
 *  (3) Varints are canonical (shortest form) and u32/u16 fields fit their
 *      width, so decode(encode(r)) == r and encode(decode(b)) == b: there is
 *      exactly one encoding per row.
 *  (4) 1 <= name_len <= XT_NAME_MAX (XT_ROW_KEY_MAX for XT_ROW_KV rows).
 *  (5) Group ids are strictly increasing (no duplicates), id 0 is invalid,
 *      at most XT_ROW_GROUPS_MAX groups, each at most XT_ROW_GROUP_MAX
 *      bytes, the whole encoding at most XT_ROW_ENCODED_MAX bytes.
 *
 * Format version 1 (all integers little-endian; "varint" is LEB128, 7 bits
 * per byte, low group first, at most 10 bytes):
 *
 *   META
 *   off  size    field
 *   0    1       fmt         XT_ROW_FMT_V1 (= 1)
 *   1    1       type        enum xt_row_type (1..9)
 *   2    varint  uuid
 *   .    varint  mode        (u32)
 *   .    varint  uid         (u32)
 *   .    varint  gid         (u32)
 *   .    varint  nlink       (u32)
 *   .    varint  size
 *   .    varint  ctime_ns
 *   .    varint  zz(atime_ns - ctime_ns)  zigzag of the wrapping u64
 *   .    varint  zz(mtime_ns - ctime_ns)  difference: equal or close times
 *   .    varint  zz(btime_ns - ctime_ns)  cost one or two bytes
 *   .    varint  flags       (u32, XT_ROW_F_*; opaque to the codec)
 *   .    varint  generation
 *   .    varint  version
 *   .    varint  name_len
 *   .    name_len name       (any bytes; path rules are checked elsewhere)
 *   .    varint  ngroups
 *        ngroups times:
 *   .      varint  id        (u16, strictly increasing, != 0)
 *   .      varint  len       (<= XT_ROW_GROUP_MAX)
 *   .      4       csum      low 32 bits of xt_hash_bytes(group bytes, len,
 *                            XT_ROW_SEED_GROUP ^ id)
 *   .    4       meta_csum   low 32 bits of xt_hash_bytes(META bytes before
 *                            this field, XT_ROW_SEED_META)
 *   GROUP BYTES: the groups' bytes, concatenated in directory order.
 *
 * An empty regular file with a 20-byte name and current times encodes in
 * about 60 bytes. The 32-bit checksums miss a random corruption with
 * probability 2^-32 each, as CRC-32C does for LevelDB's log records.
 *
 * Xattr group (XT_CG_XATTR) sub-format, version 1; an empty set is the
 * empty byte string, so there is one encoding per set:
 *   0    1       fmt         XT_ROW_XATTR_FMT_V1 (= 1)
 *   1    varint  count       >= 1
 *        count times, sorted by name (bytewise, shorter first on a tie),
 *        no duplicates:
 *   .      varint  name_len  1..XT_ROW_XATTR_NAME_MAX, name has no NUL byte
 *   .      name_len name
 *   .      varint  value_len 0..XT_ROW_XATTR_VALUE_MAX
 *   .      value_len value
 *   and the whole group is at most XT_ROW_XATTR_GROUP_MAX bytes.
 *
 * Errors: decoders return -EBADMSG for any malformed input (short, long,
 * bad checksum, bad field) and say why in xt_row_last_error(); encoders
 * return -EINVAL (bad view), -ENAMETOOLONG, -E2BIG (over a size limit),
 * -ENOBUFS (caller's buffer too small), -ENOMEM.
 * See docs/format-row.md for the rationale.
 */
#ifndef XT_ROW_H
#define XT_ROW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- format constants (shared by reader and writer) ------------------ */

#define XT_ROW_FMT_V1        1
#define XT_ROW_SEED_META     UINT64_C(0x58545231524f574d) /* "XTR1ROWM" */
#define XT_ROW_SEED_GROUP    UINT64_C(0x58545231475250ff) /* ^ group id */
#define XT_ROW_CSUM_SIZE     4

#define XT_ROW_KEY_MAX       1024          /* names of XT_ROW_KV rows */
#define XT_ROW_GROUPS_MAX    32            /* column groups in one row */
#define XT_ROW_GROUP_MAX     (1u << 20)    /* bytes of one group */
#define XT_ROW_ENCODED_MAX   (4u << 20)    /* bytes of one encoded row */

/* Row types (the fixed column `type`). */
enum xt_row_type {
    XT_ROW_REG = 1,
    XT_ROW_DIR = 2,
    XT_ROW_SYMLINK = 3,
    XT_ROW_CHR = 4,
    XT_ROW_BLK = 5,
    XT_ROW_FIFO = 6,
    XT_ROW_SOCK = 7,
    XT_ROW_REF = 8,      /* hard-linked name: attributes live in the ILT row `uuid` */
    XT_ROW_KV = 9,       /* key/value API row (name up to XT_ROW_KEY_MAX) */
};
#define XT_ROW_TYPE_MAX 9

/* Row flags (the fixed column `flags`); the codec carries them opaquely. */
#define XT_ROW_F_INLINE  0x1u  /* file bytes are the XT_CG_DATA group */
#define XT_ROW_F_BLOB    0x2u  /* file bytes live in the blob tier */
#define XT_ROW_F_ORPHAN  0x4u  /* unlinked but still open */
#define XT_ROW_F_NLINK_LOW 0x8u /* a counted directory row whose 2 + subdirectories
                                  is below 2 for now (deltas applied out of
                                  order, docs/mds-xact.md "RMU: a parent's subdirectory count"):
                                  nlink holds it as a signed 32-bit value */

/* Column group ids. */
#define XT_CG_DATA   1       /* inline file bytes, or the symlink target */
#define XT_CG_XATTR  2       /* the xattr sub-format below */
#define XT_CG_KEY    3       /* key/value API: the whole key of a long key
                                (its row name is a digest form, docs/client.md) */
#define XT_CG_RMU_IDS 4      /* MDS to MDS only, never stored: the ids of the
                                RMU outbox rows whose count delta an update
                                carries (mds/mds_soft.h) */
#define XT_CG_USER0  16      /* first user column of the key/value API */

/* ---- the in-memory view --------------------------------------------- */

typedef struct xt_row_attr {
    uint64_t uuid;
    uint64_t size;
    uint64_t atime_ns, mtime_ns, ctime_ns, btime_ns;
    uint64_t generation;
    uint64_t version;     /* bumped by xt_row_update; conditional updates */
    uint32_t mode, uid, gid, nlink;
    uint32_t flags;       /* XT_ROW_F_* */
    uint8_t type;         /* enum xt_row_type */
} xt_row_attr;

typedef struct xt_row_group {
    const uint8_t *ptr;   /* borrowed; may be NULL only when len == 0 */
    uint32_t len;
    uint32_t csum;        /* set by the decoders; ignored by the encoders */
    uint16_t id;
} xt_row_group;

/*
 * A row view. It owns no memory: `name` and every group `ptr` borrow the
 * caller's bytes (for a decoded row: the decoded buffer, so the view is
 * valid only while that buffer is alive and unchanged). groups[0..ngroups)
 * are sorted by strictly increasing id.
 */
typedef struct xt_row {
    xt_row_attr attr;
    const uint8_t *name;  /* borrowed, not NUL-terminated */
    uint32_t name_len;
    uint32_t ngroups;
    xt_row_group groups[XT_ROW_GROUPS_MAX];
} xt_row;

/* Zero the view (no name, no groups). */
void xt_row_init(xt_row *row);

/* The group `id` of the view, or NULL. */
const xt_row_group *xt_row_view_group(const xt_row *row, uint16_t id);

/* Add or replace group `id` of the view, keeping ids sorted. `ptr` is
 * borrowed until the view is encoded. -EINVAL (id 0, NULL ptr with len),
 * -E2BIG (len over XT_ROW_GROUP_MAX or XT_ROW_GROUPS_MAX groups). */
int xt_row_view_set_group(xt_row *row, uint16_t id, const void *ptr, uint32_t len);

/* Remove group `id` of the view; -ENOENT when absent. */
int xt_row_view_del_group(xt_row *row, uint16_t id);

/* ---- encode / decode ------------------------------------------------- */

/* Bytes xt_row_encode needs for `row`, or -EINVAL/-ENAMETOOLONG/-E2BIG
 * when the view breaks an invariant above. */
ssize_t xt_row_encoded_size(const xt_row *row);

/* Encode `row` into buf[0..cap). Returns the bytes written, or the errors
 * of xt_row_encoded_size, or -ENOBUFS when cap is too small (buf is then
 * untouched). */
ssize_t xt_row_encode(const xt_row *row, void *buf, size_t cap);

/* Encode into a new buffer: on success *out (free with xt_free) holds
 * *out_len bytes; on failure *out is NULL. Adds -ENOMEM. */
int xt_row_encode_alloc(const xt_row *row, uint8_t **out, size_t *out_len);
/* The encoding of a row about to be created under `name` (a request's
 * row, whose own name is ignored): version 0, a known type, a name within
 * XT_NAME_MAX unless a KV row (whose keys may be longer). Like
 * xt_row_encode_alloc; -EINVAL for a bad row, -ENAMETOOLONG. */
int xt_row_encode_new(const xt_row *row, const void *name, uint32_t name_len, uint8_t **out,
                      size_t *out_len);

/*
 * Decode and verify the whole encoding buf[0..len), zero-copy: row->name
 * and the group pointers point into buf and are valid while buf is.
 * Returns 0 or -EBADMSG; on failure *row is unspecified.
 */
int xt_row_decode(const void *buf, size_t len, xt_row *row);

/*
 * The `stat` path: decode and verify the fixed columns, the name and the
 * group directory (ids, lengths, checksums) but never read group bytes.
 * Group `ptr`s are set to NULL; fetch verified bytes with xt_row_get_group.
 * Invariant (1) is still checked, so buf must hold the whole encoding.
 */
int xt_row_decode_meta(const void *buf, size_t len, xt_row *row);

/* Verified bytes of group `id` of the encoding buf[0..len): *ptr points
 * into buf. -ENOENT when the row has no such group, -EBADMSG. */
int xt_row_get_group(const void *buf, size_t len, uint16_t id,
                     const uint8_t **ptr, uint32_t *glen);

/* Why the last decode on this thread failed (static string; for logs and
 * tests, never parsed). */
const char *xt_row_last_error(void);

/* ---- update: a new encoding from an old one --------------------------- */

/* Bits of xt_row_patch.set: which fixed columns to take from patch.attr. */
#define XT_ROW_SET_TYPE       (1u << 0)
#define XT_ROW_SET_UUID       (1u << 1)
#define XT_ROW_SET_MODE       (1u << 2)
#define XT_ROW_SET_UID        (1u << 3)
#define XT_ROW_SET_GID        (1u << 4)
#define XT_ROW_SET_NLINK      (1u << 5)
#define XT_ROW_SET_SIZE       (1u << 6)
#define XT_ROW_SET_ATIME      (1u << 7)
#define XT_ROW_SET_MTIME      (1u << 8)
#define XT_ROW_SET_CTIME      (1u << 9)
#define XT_ROW_SET_BTIME      (1u << 10)
#define XT_ROW_SET_FLAGS      (1u << 11)
#define XT_ROW_SET_GENERATION (1u << 12)
#define XT_ROW_SET_NAME       (1u << 13)  /* take name/name_len */
#define XT_ROW_SET_IF_VERSION (1u << 14)  /* fail unless old version == if_version */
#define XT_ROW_SET_ALL_ATTR   0x1fffu
/* A directory's subdirectory count changed in place (docs/client.md
 * "nlink"): attr.nlink is read as a signed 32-bit delta d. A counted row
 * (xt_row_count_of) gets its count + d exactly, so deltas commute: one
 * that arrives before another it depended on (an RMU's, docs/mds-xact.md)
 * may take the count below 2 for a while, kept signed with
 * XT_ROW_F_NLINK_LOW (readers show 2: xt_row_nlink_shown); a row showing
 * 0 or 1 without that flag ("not counted") keeps it. The result is kept in
 * [INT32_MIN, UINT32_MAX]. With XT_ROW_SET_NLINK too: -EINVAL. Lets many
 * writers change one count under the slice lock without reading the row's
 * version first. */
#define XT_ROW_SET_NLINK_ADD  (1u << 15)
/* With XT_ROW_SET_ATIME/MTIME/CTIME: each is set only where the new value
 * is later (a max-merge), so an update that arrives late (an RMU's
 * delivery) never moves a time back. */
#define XT_ROW_SET_TIMES_MAX  (1u << 16)
/* Conditions of a directory's own row update that rides with a change of
 * its entries (docs/client.md "Inode flags"); xt_row_update ignores them,
 * the MDS checks them against the row's inode flags (xt_ns.h) before the
 * update: ENTRY_ADD (an entry made or moved in) answers -EPERM when the
 * directory is immutable, ENTRY_DEL (an entry removed, moved out or
 * replaced) when it is immutable or append-only. */
#define XT_ROW_SET_ENTRY_ADD  (1u << 17)
#define XT_ROW_SET_ENTRY_DEL  (1u << 18)

/* The signed count (2 + subdirectories) of a counted row, or INT64_MIN for
 * one not counted (nlink 0 or 1 without XT_ROW_F_NLINK_LOW). */
static inline int64_t xt_row_count_of(const xt_row_attr *a)
{
    if (a->flags & XT_ROW_F_NLINK_LOW)
        return (int32_t)a->nlink;
    return a->nlink >= 2 ? (int64_t)a->nlink : INT64_MIN;
}
/* Sets a counted row's count to v (clamped to [INT32_MIN, UINT32_MAX]). */
static inline void xt_row_count_set(xt_row_attr *a, int64_t v)
{
    v = v < INT32_MIN ? INT32_MIN : v > UINT32_MAX ? UINT32_MAX : v;
    if (v < 2) {
        a->nlink = (uint32_t)(int32_t)v;
        a->flags |= XT_ROW_F_NLINK_LOW;
    } else {
        a->nlink = (uint32_t)v;
        a->flags &= ~XT_ROW_F_NLINK_LOW;
    }
}
/* The nlink to show for a row: a count below 2 shows 2. */
static inline uint32_t xt_row_nlink_shown(const xt_row_attr *a)
{
    return (a->flags & XT_ROW_F_NLINK_LOW) ? 2 : a->nlink;
}

typedef struct xt_row_patch {
    uint32_t set;                 /* XT_ROW_SET_* */
    xt_row_attr attr;             /* new values of the columns in `set` */
    const uint8_t *name;          /* borrowed; with XT_ROW_SET_NAME */
    uint32_t name_len;
    uint64_t if_version;          /* with XT_ROW_SET_IF_VERSION */
    uint32_t nput;                /* groups to add or replace (any order) */
    xt_row_group put[XT_ROW_GROUPS_MAX];
    uint32_t ndel;                /* group ids to remove (absent: ignored) */
    uint16_t del[XT_ROW_GROUPS_MAX];
} xt_row_patch;

/* Zero the patch (changes nothing but the version). */
void xt_row_patch_init(xt_row_patch *p);

/*
 * Build the encoding of old[0..old_len) with patch `p` applied and its
 * version bumped by one; kept groups are copied with their checksums (not
 * re-hashed, so old corruption stays detectable). On success *out (free
 * with xt_free) holds *out_len bytes. Errors: -EBADMSG (old), -ESTALE
 * (if_version mismatch), -EINVAL (an id both put and deleted, twice put,
 * id 0, NLINK with NLINK_ADD), -EOVERFLOW (version at UINT64_MAX), the
 * encoder's errors, -ENOMEM.
 */
int xt_row_update(const void *old, size_t old_len, const xt_row_patch *p,
                  uint8_t **out, size_t *out_len);

/* ---- xattr group sub-codec ------------------------------------------ */

#define XT_ROW_XATTR_FMT_V1      1
#define XT_ROW_XATTR_NAME_MAX    255
#define XT_ROW_XATTR_VALUE_MAX   (64u << 10)
#define XT_ROW_XATTR_GROUP_MAX   ((64u << 10) + (4u << 10))

/* xt_row_xattr_set's `how` (same meaning as setxattr's flags). */
#define XT_ROW_XATTR_CREATE  1   /* fail with -EEXIST if present */
#define XT_ROW_XATTR_REPLACE 2   /* fail with -ENODATA if absent */

typedef struct xt_row_xattr {
    const uint8_t *name;   /* borrowed; not NUL-terminated */
    uint32_t name_len;
    const uint8_t *value;  /* borrowed; may be NULL when value_len == 0 */
    uint32_t value_len;
} xt_row_xattr;

/* Validate an xattr group; returns the number of names or -EBADMSG. */
int xt_row_xattr_count(const void *grp, size_t len);

/* Decode up to `cap` entries into arr (pointers into grp, valid while grp
 * is). Returns the number of names, -ERANGE when cap is too small, or
 * -EBADMSG. */
int xt_row_xattr_decode(const void *grp, size_t len, xt_row_xattr *arr, size_t cap);

/* Encode n entries (any order) into a new buffer *out (xt_free) of
 * *out_len bytes; n == 0 gives *out NULL, *out_len 0. Errors: -EINVAL
 * (duplicate name, empty name or a NUL byte in it), -ERANGE (name too long),
 * -E2BIG (value or group too large), -ENOMEM. */
int xt_row_xattr_encode(const xt_row_xattr *arr, size_t n,
                        uint8_t **out, size_t *out_len);

/* Value of `name` in the group: *value points into grp. -ENODATA when
 * absent, -EBADMSG. */
int xt_row_xattr_get(const void *grp, size_t len, const void *name, size_t name_len,
                     const uint8_t **value, uint32_t *value_len);

/* listxattr(2) output: the names, each followed by a NUL. With cap == 0
 * returns the size needed; -ERANGE when cap is too small; -EBADMSG. */
ssize_t xt_row_xattr_list(const void *grp, size_t len, char *buf, size_t cap);

/* A new group with `name` set to `value` (how: 0 or XT_ROW_XATTR_CREATE/
 * REPLACE). Output as xt_row_xattr_encode. Errors: -EEXIST, -ENODATA,
 * -EINVAL (empty name or NUL in it), -ERANGE (name too long), -E2BIG
 * (value too large), -ENOSPC (group would pass XT_ROW_XATTR_GROUP_MAX),
 * -EBADMSG, -ENOMEM. */
int xt_row_xattr_set(const void *grp, size_t len, const void *name, size_t name_len,
                     const void *value, size_t value_len, int how,
                     uint8_t **out, size_t *out_len);

/* A new group without `name`; removing the last name gives *out NULL,
 * *out_len 0 (drop the group). -ENODATA when absent, -EBADMSG, -ENOMEM. */
int xt_row_xattr_remove(const void *grp, size_t len, const void *name, size_t name_len,
                        uint8_t **out, size_t *out_len);

#ifdef __cplusplus
}
#endif
#endif /* XT_ROW_H */
