/*
 * pom_ns_i.h -- floor 4 of libpomegranate, the namespace operations:
 * helpers shared by them (pom_ns.c, pom_gdt.c), then create, lookup,
 * getattr/setattr, unlink, mkdir, readdir, directory handles (pom_ops.c)
 * and xattrs (pom_xattr.c), then link, rename (pom_link.c) and lookup by
 * uuid (pom_gdt_read.c). Includes floors 1-3 (pom_file_i.h). The rows
 * they write are those of the namespace model, xtable/xt_ns.h.
 */
#ifndef POM_NS_I_H
#define POM_NS_I_H

#include "pom_file_i.h"

/* ---- pom_ns.c: shared by the namespace operations ------------------- */

/* Whether a batch's failing parent-row op (pom_dir_upd_op) says the row is
 * not where the inode map says (removed, or moved by another client):
 * -ENOENT or -ESTALE (its uuid condition). Anything else (-ENOMEM, -EIO)
 * is an error of the call, passed on as it is. */
static inline bool pom_parent_missing(int rc)
{
    return rc == -ENOENT || rc == -ESTALE;
}

/* 0 when dir is a known directory; -ENOTDIR, -ESTALE, -ENOENT. */
int pom_dir_check(pom_fs *fs, pom_ino dir);
/* 1 when table dir has no entry (never created counts as empty), 0, -errno. */
int pom_dir_empty(pom_fs *fs, uint64_t dir);
/* The change of directory dir's own row that goes into an atomic batch
 * changing dir's entries (docs/client.md "nlink", "times"): `entry` says
 * how (XT_ROW_SET_ENTRY_ADD: an entry made or moved in; _DEL: one removed,
 * moved out or replaced; both for an exchange), and the MDS answers -EPERM
 * when dir's inode flags forbid it (immutable, append-only); mtime = ctime
 * = now, and nlink + delta (delta = subdirectories gained) added by the
 * MDS (XT_ROW_SET_NLINK_ADD: only rows that count, xt_row_count_of; directories
 * made before the count was kept report 1, "unknown", forever). No read:
 * the op is conditional on dir's uuid alone, so its failure in the batch
 * (-ENOENT, -ESTALE) means the row is not where the map says (dir removed
 * or moved by another client). `u` holds what *q points at: it must
 * outlive q. -ENOTDIR, -ESTALE (dir unknown), -ENOENT (marked unlinked). */
struct pom_dir_upd {
    uint64_t table;             /* where dir's row is */
    char name[XT_NAME_MAX + 1];
    xt_row row;                 /* the new values */
};
int pom_dir_upd_op(pom_fs *fs, pom_ino dir, int delta, uint32_t entry, uint64_t now,
                   struct pom_dir_upd *u, struct xt_req *q);
/* Removes the link stub (parent, name) whose attributes are *stub, with
 * its ILT nlink change, atomically. -ESTALE: read again. */
int pom_unlink_stub(pom_fs *fs, pom_ino parent, const char *name, const xt_row_attr *stub);
/* Makes q conditional on the row being (uuid, version) as read: a name
 * created again restarts at version 0, so the uuid is checked too, and a
 * batch built from an older read never lands on another file. */
void pom_ns_cond(struct xt_req *q, uint64_t uuid, uint64_t version);
/* -EPERM when the inode whose row (or link stub) has attributes *a is
 * immutable or append-only (xt_ns.h XT_NS_ROW_F_FIXED): its names may not
 * be renamed or replaced (rename). A stub's flags are read from its ILT row
 * (one more read; unlink checks the ILT row pom_unlink_stub reads anyway).
 * 0, or -errno. */
int pom_ns_fixed(pom_fs *fs, const xt_row_attr *a);
/* A request for (table, name) with flags; the rest zero. name must outlive
 * the request. */
struct xt_req pom_ns_req(int op, uint64_t table, const char *name, uint32_t flags);
/* The ops that drop one name of the linked file uuid from its ILT row:
 * nlink - 1, or the row's delete at the last name. Fills *q (one op;
 * `in` and `upd` must outlive it). *gone: this was the last name. *file:
 * the ILT row's attributes, which name the file's tracts. */
int pom_ns_ilt_drop(pom_fs *fs, uint64_t uuid, char *in, xt_row *upd, struct xt_req *q,
                    bool *gone, xt_row_attr *file);

/* ---- pom_ops.c: shared with pom_link.c ----------------------------- */

/* *out = *cred, or the calling process's effective ids and umask 0 when
 * cred is NULL (the owner of what a call makes). */
void pom_cred_or_self(const struct pom_cred *cred, struct pom_cred *out);

/* ---- pom_gdt.c: the GDT's writer ------------------------------------ */

/* The copy op (XT_F_RMU) into *q saying inode dir's row is now `name`
 * in table `parent` (name NULL: dir is gone), as of stamp (the change's
 * xt_now_ns); *b holds what q points at and must outlive it. -EINVAL
 * (name empty or too long). pom_gdt_put (pomegranate_admin.h) sends one. */
int pom_gdt_op(uint64_t dir, uint64_t parent, const char *name, uint64_t stamp,
               struct xt_ns_gdt *b, struct xt_req *q);

/* ---- pom_gdt_read.c: inodes found by uuid ---------------------------- */

/* xt_ns_gdt_parse and what a reader checks before following the hint: row
 * is directory uuid's GDT row (its uuid, type KV), the name is a valid
 * entry name, the parent neither 0 nor uuid. 0, or -EIO with a log line
 * saying why. */
int pom_gdt_read_hint(const xt_row *row, uint64_t uuid, uint64_t *parent, char *name);

#endif /* POM_NS_I_H */
