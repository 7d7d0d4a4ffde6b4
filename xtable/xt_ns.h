/*
 * xt_ns.h -- the namespace model of a Pomegranate file system: which tables
 * are reserved and what their rows hold (docs/client.md "Namespace model",
 * "Hard links", "GDT"). Builds and parses those rows; knows nothing of RPC.
 * The client library writes and reads them, pomctl checks them (fsck), and
 * a tool or test that makes one by hand uses the same builders.
 *
 * The model:
 *  (1) Every directory is the xTable table named by its uuid; an entry is
 *      the row keyed by its name in its parent's table and carries the
 *      entry's attributes (a directory's row carries the directory's).
 *  (2) The super table XT_NS_TABLE_SUPER holds the root's row
 *      XT_NS_ROOT_ROW, the uuid counter row XT_NS_ALLOC_ROW (its attr.size
 *      is the next uuid not claimed) and the key/value keyspace rows.
 *  (3) A file with more than one name keeps its row (attributes, data,
 *      xattrs, nlink) in the inode link table XT_NS_TABLE_ILT under the
 *      name xt_ns_id_name(uuid); each of its names is a *link stub* in its
 *      directory: same uuid, type, mode and owner, XT_NS_ROW_F_LINKED set,
 *      no data or xattrs (xt_ns_stub).
 *  (4) The global directory table XT_NS_TABLE_GDT holds one row per
 *      inode (directory, file, symlink, device...), named
 *      xt_ns_id_name(uuid), saying where the inode's own row is (parent
 *      table, name; for a hard-linked file one of its names). It is a copy
 *      written by RMU and may lag or, after races, point at a name that no
 *      longer holds the inode: readers check the row it names before use.
 *      Row: type XT_ROW_KV, attr.uuid = the inode, attr.ctime_ns = the stamp of
 *      the change it copies (newest wins), group XT_CG_USER0 =
 *
 *        off  size      field
 *        0    1         fmt       XT_NS_GDT_FMT
 *        1    8         parent    uuid of the parent directory (LE)
 *        9    2         name_len  1..XT_NAME_MAX (LE)
 *        11   name_len  name      no NUL, a valid entry name
 *
 *  (5) Client-allocated uuids start at XT_NS_UUID_BASE, far above the
 *      ranges R2 hands out, so a file system can later move to R2
 *      allocation without a collision.
 */
#ifndef XT_NS_H
#define XT_NS_H

#include "xt_common.h"
#include "xt_row.h"

#include <stdbool.h>
#include <stdint.h>

#define XT_NS_TABLE_SUPER  UINT64_C(2)   /* (2) */
#define XT_NS_TABLE_ILT    UINT64_C(3)   /* (3) */
#define XT_NS_TABLE_GDT    UINT64_C(4)   /* (4) */
#define XT_NS_ROOT_ROW     "root"
#define XT_NS_ALLOC_ROW    "alloc"
#define XT_NS_UUID_BASE    (UINT64_C(1) << 56)
#define XT_NS_ROW_F_LINKED 0x100u        /* attr flag: the attributes are in the ILT */
/* Inode flags (chattr, FS_IOC_SETFLAGS) in the attr flags of the row that
 * holds the attributes (the ILT row of a linked file, never a stub): the
 * FS_*_FL bit << XT_NS_IFLAGS_SHIFT. */
#define XT_NS_IFLAGS_SHIFT    12
#define XT_NS_ROW_F_IMMUTABLE 0x10000u   /* FS_IMMUTABLE_FL 0x10 */
#define XT_NS_ROW_F_APPEND    0x20000u   /* FS_APPEND_FL 0x20 */
#define XT_NS_ROW_F_NODUMP    0x40000u   /* FS_NODUMP_FL 0x40 */
#define XT_NS_ROW_F_NOATIME   0x80000u   /* FS_NOATIME_FL 0x80 */
#define XT_NS_ROW_F_IFLAGS    0xf0000u
/* The flags under which an inode's names, attributes and xattrs stay as
 * they are (EPERM): immutable and append-only. */
#define XT_NS_ROW_F_FIXED     (XT_NS_ROW_F_IMMUTABLE | XT_NS_ROW_F_APPEND)
#define XT_NS_ID_LEN       16            /* an ILT/GDT row name: the uuid in lowercase hex */
#define XT_NS_GDT_FMT      1
#define XT_NS_GDT_HEAD     11            /* fmt + parent + name_len */

/* The ILT and GDT row name of uuid into buf (XT_NS_ID_LEN + 1 bytes). */
void xt_ns_id_name(uint64_t uuid, char *buf);

/* 0 when name may name an entry (pomegranate.h rule (3)): not empty, no
 * '/', not "." or "..", at most XT_NAME_MAX bytes. -EINVAL, -ENAMETOOLONG. */
int xt_ns_name_check(const char *name);

/* Whether a directory row's entry is a link stub (3). */
static inline bool xt_ns_is_stub(const xt_row_attr *a)
{
    return (a->flags & XT_NS_ROW_F_LINKED) != 0;
}

/* The link stub (3) of the file whose attributes are *a, made at now: its
 * identity, mode and owner (what readdir shows), nothing else. */
void xt_ns_stub(const xt_row_attr *a, uint64_t now, xt_row *stub);

/* A GDT row (4) being built: the row views key and grp, so the whole
 * struct lives as long as the row is used. */
struct xt_ns_gdt {
    char key[XT_NS_ID_LEN + 1];
    uint8_t grp[XT_NS_GDT_HEAD + XT_NAME_MAX];
    xt_row row;
};
/* Fills *b with directory dir's GDT row saying it is `name` in table
 * `parent`, as of stamp; name NULL: the row without a group (the delete
 * of a copy: dir is gone). -EINVAL (name empty or too long). */
int xt_ns_gdt_build(struct xt_ns_gdt *b, uint64_t dir, uint64_t parent, const char *name,
                    uint64_t stamp);
/* Where a GDT row (read with its XT_CG_USER0 group) says its directory
 * is: *parent and name (XT_NAME_MAX + 1 bytes, NUL-terminated). -EIO: not
 * a GDT row (type, format, lengths), or one no reader may follow (parent
 * 0 or the directory itself, a name that is no valid entry name). */
int xt_ns_gdt_parse(const xt_row *row, uint64_t *parent, char *name);

#endif /* XT_NS_H */
