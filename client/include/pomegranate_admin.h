/*
 * pomegranate_admin.h -- raw access to a file system's rows for the tools
 * built in this tree (pomctl fsck and path, test helpers): what a checker
 * needs beyond the POSIX-like calls of pomegranate.h. The rows' meaning is
 * the namespace model of xtable/xt_ns.h.
 *
 * Contract:
 *  (1) Not installed and not exported by libpomegranate.so: link the
 *      static `pomegranate` library. The types are xTable's (xt_row.h,
 *      xt_rpc_mds.h) and change with them; no ABI promise.
 *  (2) Every call goes through the same retries, routing and epoch
 *      accounting as the library's own (a change made here is covered by
 *      pom_sync like any other).
 *  (3) Nothing here updates the inode map or open files of the handle: a
 *      tool that changes rows behind the library's back on a handle that
 *      also has files open gets what another client's change would give.
 */
#ifndef POMEGRANATE_ADMIN_H
#define POMEGRANATE_ADMIN_H

#include "pomegranate.h"
#include "pom_blob.h"
#include "xt_row.h"
#include "xt_rpc_mds.h"

#include <stdbool.h>
#include <stdint.h>

/* One xTable call (req->t.fsid is set to the handle's, req->name_hash to the
 * name's xt_hash_name) with retries on
 * transport errors for the handle's retry window (same request id).
 * *retried (may be NULL) says whether an earlier attempt may have been
 * applied (then -EEXIST/-ENOENT may be that attempt's doing). *resp:
 * xt_resp_free, also on an error. */
int pom_call(pom_fs *fs, struct xt_req *req, struct xt_resp *resp, bool *retried);

/* One page of a table's listing (req->t.fsid is set), with pom_call's
 * retries. *resp: xt_list_resp_free. */
int pom_list_call(pom_fs *fs, const struct xt_list_req *req, struct xt_list_resp *resp);

/* Fetches the row (table, name) with `group`: POM_ROW_META (fixed columns
 * only), POM_ROW_ALL, or one group id. *resp holds the encoding
 * (xt_resp_free); *row views it (group pointers valid while resp is). On an
 * error *resp is empty. */
#define POM_ROW_META 0
#define POM_ROW_ALL  (-1)
int pom_row_get(pom_fs *fs, uint64_t table, const char *name, int group,
                struct xt_resp *resp, xt_row *row);

/* Writes inode dir's GDT row (xt_ns.h (4)) saying it is `name` in
 * `parent`, as a copy stamped `stamp` (newest wins), in a batch of its own
 * as the library's writer does; name NULL: the delete of a copy. 0,
 * -EINVAL (name), or the call's -errno. */
int pom_gdt_put(pom_fs *fs, uint64_t dir, uint64_t parent, const char *name, uint64_t stamp);

/* Where inode uuid's row is, by its GDT row (or its ILT row, for a
 * hard-linked file: *parent is then XT_NS_TABLE_ILT), verified against the
 * row it names and, with more than one MDS, waited for while an RMU may be
 * late (up to 3 s): *parent and name (XT_NAME_MAX + 1 bytes) get its
 * location, *st (may be NULL) its attributes. 0, -ESTALE (not found),
 * -EIO (a damaged GDT row), or an error of the calls. */
int pom_gdt_where(pom_fs *fs, uint64_t uuid, uint64_t *parent, char *name, struct stat *st);

/* Calls fn(arg, tracts id, uuid) for every row that names a tract set
 * (XT_ROW_F_BLOB): every directory table from the root, then the ILT (a
 * hard-linked file once, by its ILT row). A row renamed from a table not
 * listed yet into one listed already is missed. 0, fn's first non-zero
 * return, or the -errno of a table that does not list (one that is gone
 * is skipped). */
typedef int (*pom_named_fn)(void *arg, uint64_t id, uint64_t uuid);
int pom_tracts_named(pom_fs *fs, pom_named_fn fn, void *arg);

/* The handle's blob tier (owned by fs, valid until pom_close), or NULL
 * when it has none. */
pom_blob *pom_blob_of(pom_fs *fs);

#endif /* POMEGRANATE_ADMIN_H */
