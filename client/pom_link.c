/*
 * pom_link.c -- the namespace changes of libpomegranate that touch several
 * rows: hard links through the inode link table (ILT), rename,
 * RENAME_EXCHANGE and RENAME_WHITEOUT (the unlink of a link stub is
 * pom_ns.c's). Each is ONE atomic batch at the MDS
 * (xt_mds_batch_atomic: all rows change in one commit group or none does),
 * built from rows read just before and conditional on their versions
 * (docs/client.md "Hard links, rename, unlink, rmdir").
 *
 * Invariants:
 *  (1) A file with one name has its row in its directory. A file that has
 *      had a second name has its row in the ILT (XT_NS_TABLE_ILT, name
 *      xt_ns_id_name(uuid)) with nlink = the number of its names, and every
 *      name is a link stub (XT_NS_ROW_F_LINKED, same uuid and type, no data).
 *      Every batch below keeps "nlink of the ILT row == stubs of its uuid":
 *      a stub is created or deleted only together with the nlink change.
 *  (2) Every row a batch changes or replaces was read before and is named
 *      with XT_F_IF_UUID | XT_F_IF_VER at that (uuid, version) (or
 *      XT_F_EXCL when it must be absent), so a batch built from a stale
 *      read fails as a whole with -ESTALE / -EEXIST / -ENOENT and is
 *      rebuilt from a fresh read. The version alone is not enough: a name
 *      created again starts again at version 0 (found by the SIGKILL test:
 *      a batch built on reads that the crash undid, retried after the
 *      restart, replaced another file's link stub at version 0).
 *  (3) The inode map's location of a linked file is its ILT row, so every
 *      by-inode path (getattr, setattr, flush, xattrs) reads and writes the
 *      ILT row unchanged; renaming a stub never moves that location.
 *  (4) A batch retried after a transport failure may have been applied by
 *      the first attempt: a failure after a retry is checked against the
 *      names it meant to produce before it is reported.
 *  (5) rename/exchange change the parents' own rows in the same batch
 *      (pom_dir_upd_op: mtime, ctime, and nlink = 2 + subdirectories when a
 *      directory changes parent or is replaced, as a delta the MDS adds
 *      under its slice lock; conditional on the parent's uuid only, no
 *      read), so a crash never separates a move from its parents' times
 *      or counts. Link and the unlink of a stub put the parent's times
 *      in their batch too (dropped, and the batch sent again, when the
 *      parent's row is not where the map says: a name matters, a time
 *      does not). One MDS holds every table today; with several, a batch
 *      is bound to one MDS and a parent's row (in the grandparent's table)
 *      may live elsewhere: that case will need a cross-MDS step.
 *  (6) A whiteout (RENAME_WHITEOUT) is the old name's row replaced, in the
 *      move's batch and conditional on the moved row as read, by a new
 *      inode: a character device 0:0 with no permission bits (overlayfs
 *      checks exactly that), with its GDT copy. No reader ever sees the old
 *      name empty or the file under both names.
 *  (7) A rename counts in fs->moves from the send of its batch until the
 *      map follows its result, then in fs->moved: a by-inode call of this
 *      client that found no row where the map said waits on that and goes
 *      again (pom_ino_moved_since), so a move here never fails it.
 *
 * Floor 4.2 of libpomegranate (pom_ns_i.h): calls floors 1-3, pom_ns.c,
 * pom_gdt.c and pom_ops.c (pom_getattr).
 */
#include "pom_ns_i.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define MAX_TRIES 64

int pom_link(pom_fs *fs, pom_ino ino, pom_ino newparent, const char *newname, struct stat *st)
{
    int rc = xt_ns_name_check(newname);
    if (rc < 0)
        return rc;
    if ((rc = pom_dir_check(fs, newparent)) < 0)
        return rc;
    /* The row about to move to the ILT must hold the open buffer's bytes. */
    if ((rc = pom_data_flush_ino(fs, ino)) < 0)
        return rc;
    char in[XT_NS_ID_LEN + 1];
    xt_ns_id_name(ino, in);
    bool with_parent = true; /* the new parent's times in the batch */
    for (int attempt = 0; attempt < MAX_TRIES; attempt++) {
        pom_conflict_pause(attempt);
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        struct xt_resp r;
        xt_row row;
        uint64_t since = pom_ino_seq(fs);
        if ((rc = pom_ino_row(fs, ino, POM_ROW_ALL, &table, name, &r, &row)) < 0)
            return rc;
        if (row.attr.type == XT_ROW_DIR || (row.attr.flags & XT_NS_ROW_F_FIXED)) {
            xt_resp_free(&r);
            return -EPERM; /* link(2): no hard links to directories, nor to
                              immutable or append-only files */
        }
        if (table == newparent && strcmp(name, newname) == 0) {
            xt_resp_free(&r);
            return -EEXIST; /* its own name (a batch names a row once) */
        }
        uint64_t now = xt_now_ns();
        xt_row stub, ilt, upd;
        xt_ns_stub(&row.attr, now, &stub);
        struct xt_req q[4];
        size_t n = 0, failed, np = SIZE_MAX;
        uint32_t nlink;
        static const uint16_t drop[2] = { XT_CG_DATA, XT_CG_XATTR };
        if (table == XT_NS_TABLE_ILT) {
            /* Linked already: one more stub, nlink + 1. */
            nlink = row.attr.nlink + 1;
            xt_row_init(&upd);
            upd.attr.nlink = nlink;
            upd.attr.ctime_ns = now;
            q[n] = pom_ns_req(XT_OP_UPDATE, XT_NS_TABLE_ILT, in, 0);
            q[n].row = &upd;
            q[n].set_mask = XT_ROW_SET_NLINK | XT_ROW_SET_CTIME;
            pom_ns_cond(&q[n++], ino, row.attr.version);
        } else {
            /* Second name: the whole row moves to the ILT, the first name
             * becomes a stub (an update, so its version moves on and a
             * stale conditional write to it fails), the new name a stub. */
            nlink = 2;
            ilt = row;
            ilt.attr.nlink = nlink;
            ilt.attr.ctime_ns = now;
            ilt.attr.flags &= ~XT_NS_ROW_F_LINKED;
            q[n] = pom_ns_req(XT_OP_CREATE, XT_NS_TABLE_ILT, in, XT_F_EXCL);
            q[n++].row = &ilt;
            xt_row_init(&upd);
            upd.attr = stub.attr;
            q[n] = pom_ns_req(XT_OP_UPDATE, table, name, 0);
            q[n].row = &upd;
            q[n].set_mask = XT_ROW_SET_FLAGS | XT_ROW_SET_SIZE | XT_ROW_SET_CTIME;
            q[n].drop = drop;
            q[n].ndrop = 2;
            pom_ns_cond(&q[n++], ino, row.attr.version);
        }
        size_t nn = n; /* the new name */
        q[n] = pom_ns_req(XT_OP_CREATE, newparent, newname, XT_F_EXCL);
        q[n++].row = &stub;
        /* The new parent's times (invariant 5), unless its row is the
         * file's own (a stale map: a batch names a row once). */
        struct pom_dir_upd pu;
        if (with_parent &&
            pom_dir_upd_op(fs, newparent, 0, XT_ROW_SET_ENTRY_ADD, now, &pu, &q[n]) == 0 &&
            !(pu.table == table && strcmp(pu.name, name) == 0))
            np = n++;
        bool retried = false;
        rc = pom_batch_call(fs, q, n, &failed, &retried);
        xt_row_attr a = row.attr;
        xt_resp_free(&r);
        if (rc < 0 && retried && pom_name_holds(fs, newparent, newname, ino) == 1)
            rc = 0; /* the first attempt was applied (invariant 4) */
        if (np != SIZE_MAX && failed == np && pom_parent_missing(rc)) {
            /* The parent's row is not where the map says (moved by
             * another client): the names matter, a time does not. */
            with_parent = false;
            continue;
        }
        if (rc == -ESTALE || (rc == -ENOENT && failed != SIZE_MAX) ||
            (rc == -EEXIST && failed < nn))
            continue; /* a row changed under us (another link?): read again */
        if (rc < 0)
            return rc;
        pom_ino_moved(fs, ino, XT_NS_TABLE_ILT, in);
        a.nlink = nlink;
        a.ctime_ns = now;
        pom_row_stat(&a, st);
        struct stat now_st; /* linked already: a failed re-read keeps the batch's view */
        if (pom_ino_stat_fix(fs, ino, st, since) == -EAGAIN && pom_getattr(fs, ino, &now_st) == 0)
            *st = now_st;
        return pom_ino_ref(fs, ino, XT_NS_TABLE_ILT, in, a.type, 1);
    }
    return -EAGAIN;
}

/* Whether the existing target `dst` may be replaced by `src`. */
static int replace_check(pom_fs *fs, const xt_row_attr *src, const xt_row_attr *dst)
{
    bool sdir = src->type == XT_ROW_DIR, ddir = dst->type == XT_ROW_DIR;
    if (sdir && !ddir)
        return -ENOTDIR;
    if (!sdir && ddir)
        return -EISDIR;
    if (ddir) {
        int e = pom_dir_empty(fs, dst->uuid);
        if (e < 0)
            return e;
        if (!e)
            return -ENOTEMPTY;
    }
    return 0;
}

/* Records where the entries of a rename went (invariant 3). */
static void map_moved(pom_fs *fs, const xt_row_attr *a, uint64_t table, const char *name)
{
    if (!(a->flags & XT_NS_ROW_F_LINKED))
        pom_ino_moved(fs, a->uuid, table, name);
}

/* The whiteout row (invariant 6) for inode uuid, owned by c, made at now. */
static void whiteout_row(uint64_t uuid, const struct pom_cred *c, uint64_t now, xt_row *w)
{
    xt_row_init(w);
    w->attr.uuid = uuid;
    w->attr.type = XT_ROW_CHR;
    w->attr.uid = c->uid;
    w->attr.gid = c->gid;
    w->attr.mode = 0;
    w->attr.generation = 0; /* the device number (pom_ops.c make_entry): 0:0 */
    w->attr.nlink = 1;
    w->attr.atime_ns = w->attr.mtime_ns = w->attr.ctime_ns = w->attr.btime_ns = now;
}

/* One attempt of rename/exchange from fresh reads; wuuid: the whiteout's
 * inode (owned by *c), or 0 for none. 0 done, 1 try again, < 0 the answer. */
static int rename_once(pom_fs *fs, pom_ino parent, const char *name, pom_ino newparent,
                       const char *newname, unsigned flags, uint64_t wuuid,
                       const struct pom_cred *c)
{
    bool xchg = (flags & POM_RENAME_EXCHANGE) != 0;
    assert(!xchg || wuuid == 0);
    struct xt_resp sr, dr;
    xt_row src, dst;
    int rc = pom_row_get(fs, parent, name, POM_ROW_ALL, &sr, &src);
    if (rc < 0)
        return rc;
    int drc = pom_row_get(fs, newparent, newname, xchg ? POM_ROW_ALL : POM_ROW_META, &dr, &dst);
    if (drc < 0 && (drc != -ENOENT || xchg)) {
        xt_resp_free(&sr);
        return drc;
    }
    bool exists = drc == 0;
    xt_row_attr sa = src.attr, da = exists ? dst.attr : src.attr;
    /* A directory moved under itself (rename(2): EINVAL). */
    if ((sa.type == XT_ROW_DIR && pom_ino_is_ancestor(fs, sa.uuid, newparent)) ||
        (xchg && da.type == XT_ROW_DIR && pom_ino_is_ancestor(fs, da.uuid, parent)))
        rc = -EINVAL;
    else if (exists && (flags & POM_RENAME_NOREPLACE))
        rc = -EEXIST;
    else if (exists && da.uuid == sa.uuid)
        rc = 0; /* two names of one file: rename(2) does nothing */
    else if (exists && !xchg)
        rc = replace_check(fs, &sa, &da);
    /* Neither an immutable or append-only inode's name moves, nor is one
     * replaced (rename(2): EPERM). */
    if (rc == 0 && !(exists && da.uuid == sa.uuid))
        rc = pom_ns_fixed(fs, &sa);
    if (rc == 0 && exists && da.uuid != sa.uuid)
        rc = pom_ns_fixed(fs, &da);
    if (rc < 0 || (exists && da.uuid == sa.uuid)) {
        xt_resp_free(&sr);
        if (exists)
            xt_resp_free(&dr);
        return rc;
    }
    uint64_t now = xt_now_ns();
    xt_row nsrc = src, ndst;
    nsrc.attr.ctime_ns = now;
    struct xt_req q[8];
    struct pom_dir_upd pu[2];
    struct xt_ns_gdt gb[3];
    size_t n = 0, failed;
    char in[XT_NS_ID_LEN + 1];
    xt_row upd, wo;
    bool gone = false, moving = false;
    q[n] = pom_ns_req(XT_OP_CREATE, newparent, newname, exists ? 0 : XT_F_EXCL);
    q[n].row = &nsrc;
    if (exists)
        pom_ns_cond(&q[n], da.uuid, da.version);
    n++;
    if (xchg) {
        ndst = dst;
        ndst.attr.ctime_ns = now;
        q[n] = pom_ns_req(XT_OP_CREATE, parent, name, 0);
        q[n].row = &ndst;
    } else if (wuuid) {
        whiteout_row(wuuid, c, now, &wo);
        q[n] = pom_ns_req(XT_OP_CREATE, parent, name, 0);
        q[n].row = &wo;
    } else {
        q[n] = pom_ns_req(XT_OP_DELETE, parent, name, 0);
    }
    pom_ns_cond(&q[n++], sa.uuid, sa.version);
    if (exists && !xchg && (da.flags & XT_NS_ROW_F_LINKED)) {
        /* The replaced target is one name of a linked file. */
        if ((rc = pom_ns_ilt_drop(fs, da.uuid, in, &upd, &q[n], &gone, &da)) == 0)
            n++;
        else if (rc != -ENOENT)
            goto out;
    } else if (exists && !xchg) {
        gone = true;
    }
    /* The parents' own rows: times, and their subdirectory counts when a
     * directory changes parent or a directory is replaced (invariant 5). */
    int sdir = sa.type == XT_ROW_DIR, ddir = exists && da.type == XT_ROW_DIR;
    int dp = xchg ? ddir - sdir : -sdir, dn = xchg ? sdir - ddir : sdir - ddir;
    size_t first_dir = n;
    /* What each parent's inode flags must allow: the source loses a name
     * (gains one back in an exchange), the target gains one (loses the
     * one it replaces). */
    uint32_t esrc = XT_ROW_SET_ENTRY_DEL | (xchg || wuuid ? XT_ROW_SET_ENTRY_ADD : 0);
    uint32_t edst = XT_ROW_SET_ENTRY_ADD | (exists ? XT_ROW_SET_ENTRY_DEL : 0);
    if (parent == newparent) {
        rc = pom_dir_upd_op(fs, parent, dp + dn, esrc | edst, now, &pu[0], &q[n++]);
    } else {
        rc = pom_dir_upd_op(fs, parent, dp, esrc, now, &pu[0], &q[n++]);
        if (rc == 0)
            rc = pom_dir_upd_op(fs, newparent, dn, edst, now, &pu[1], &q[n++]);
    }
    if (rc < 0)
        goto out;
    for (size_t i = first_dir; i < n; i++) {
        /* A parent's row is never one of the entries moved (a directory
         * cannot be renamed under itself, checked above); a stale inode
         * map could still say so, and a batch names a row once. */
        for (size_t j = 0; j < first_dir; j++)
            if (q[j].t.table == q[i].t.table && strcmp(q[j].name, q[i].name) == 0) {
                rc = -EINVAL;
                goto out;
            }
    }
    /* The GDT rows of the inodes moved or gone (copies, after every op
     * the failure rules below index). A replaced name of a linked file
     * that keeps other names leaves its row: a reader falls back to the
     * ILT (pom_gdt_read.c invariant 2). */
    size_t nq = n;
    if (rc == 0)
        rc = pom_gdt_op(sa.uuid, newparent, newname, now, &gb[0], &q[nq++]);
    if (exists && (xchg || gone) && rc == 0)
        rc = pom_gdt_op(da.uuid, parent, xchg ? name : NULL, now, &gb[1], &q[nq++]);
    if (wuuid && rc == 0)
        rc = pom_gdt_op(wuuid, parent, name, now, &gb[2], &q[nq++]);
    if (rc < 0)
        goto out;
    assert(nq <= sizeof q / sizeof q[0]);
    bool retried = false;
    atomic_fetch_add(&fs->moves, 1); /* until the map follows (pom_ino_moved_since) */
    moving = true;
    rc = pom_batch_call(fs, q, nq, &failed, &retried);
    if (rc < 0 && retried && pom_name_holds(fs, newparent, newname, sa.uuid) == 1 &&
        pom_name_holds(fs, parent, name, xchg ? da.uuid : wuuid ? wuuid : sa.uuid) ==
            (xchg || wuuid))
        rc = 0; /* invariant 4 */
    if (rc < 0 && failed != SIZE_MAX && failed >= first_dir && failed < n) {
        /* A parent's row is not where the map says, or its inode flags
         * refuse the change (-EPERM). */
        if (pom_parent_missing(rc))
            rc = -ENOENT;
        goto out;
    }
    if (rc == -ESTALE || rc == -EEXIST || (rc == -ENOENT && failed != SIZE_MAX)) {
        rc = 1; /* something changed since the reads: again */
        goto out;
    }
    if (rc < 0)
        goto out;
    if (gone) {
        pom_ino_unlinked(fs, &da); /* the replaced file's last name */
        pom_data_gone(fs, &da); /* its tracts (da is the ILT row's for a stub) */
    }
    map_moved(fs, &sa, newparent, newname);
    if (xchg)
        map_moved(fs, &da, parent, name);
out:
    if (moving) {
        atomic_fetch_add(&fs->moved, 1); /* before moves drops: waiters see one */
        atomic_fetch_sub(&fs->moves, 1);
    }
    xt_resp_free(&sr);
    if (exists)
        xt_resp_free(&dr);
    return rc;
}

/* pom_rename and pom_rename_whiteout once the flags are checked; wuuid and
 * c as rename_once's. */
static int rename_run(pom_fs *fs, pom_ino parent, const char *name, pom_ino newparent,
                      const char *newname, unsigned flags, uint64_t wuuid,
                      const struct pom_cred *c)
{
    int rc = xt_ns_name_check(name);
    if (rc == 0)
        rc = xt_ns_name_check(newname);
    if (rc == -EINVAL && (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
                          strcmp(newname, ".") == 0 || strcmp(newname, "..") == 0))
        return -EBUSY;
    if (rc < 0)
        return rc;
    if ((rc = pom_dir_check(fs, parent)) < 0 || (rc = pom_dir_check(fs, newparent)) < 0)
        return rc;
    if (parent == newparent && strcmp(name, newname) == 0) {
        struct xt_resp r;
        xt_row row;
        if ((rc = pom_row_get(fs, parent, name, POM_ROW_META, &r, &row)) == 0)
            xt_resp_free(&r);
        return rc; /* same name: nothing to do once it exists */
    }
    for (int attempt = 0; attempt < MAX_TRIES; attempt++) {
        pom_conflict_pause(attempt);
        rc = rename_once(fs, parent, name, newparent, newname, flags, wuuid, c);
        if (rc == 1)
            continue;
        return rc;
    }
    return -EAGAIN;
}

int pom_rename(pom_fs *fs, pom_ino parent, const char *name, pom_ino newparent,
               const char *newname, unsigned flags)
{
    if (flags & ~(unsigned)(POM_RENAME_NOREPLACE | POM_RENAME_EXCHANGE))
        return -EINVAL;
    if ((flags & POM_RENAME_NOREPLACE) && (flags & POM_RENAME_EXCHANGE))
        return -EINVAL; /* renameat2(2) */
    return rename_run(fs, parent, name, newparent, newname, flags, 0, NULL);
}

int pom_rename_whiteout(pom_fs *fs, pom_ino parent, const char *name, pom_ino newparent,
                        const char *newname, unsigned flags, const struct pom_cred *cred)
{
    if (flags & ~(unsigned)POM_RENAME_NOREPLACE)
        return -EINVAL; /* renameat2(2): no EXCHANGE with WHITEOUT */
    struct pom_cred c;
    pom_cred_or_self(cred, &c);
    /* One inode for every attempt: a batch that failed made nothing. */
    uint64_t wuuid;
    int rc = pom_uuid_alloc(fs, &wuuid);
    if (rc < 0)
        return rc;
    assert(wuuid != 0); /* 0 means "no whiteout" to rename_once */
    return rename_run(fs, parent, name, newparent, newname, flags, wuuid, &c);
}
