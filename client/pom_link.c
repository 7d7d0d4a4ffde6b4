/*
 * pom_link.c -- the namespace changes of libpomegranate that touch several
 * rows: hard links through the inode link table (ILT), unlink of a link
 * stub, rename and RENAME_EXCHANGE. Each is ONE atomic batch at the MDS
 * (xt_mds_batch_atomic: all rows change in one commit group or none does),
 * built from rows read just before and conditional on their versions
 * (docs/client.md "Hard links, rename, unlink, rmdir").
 *
 * Invariants:
 *  (1) A file with one name has its row in its directory. A file that has
 *      had a second name has its row in the ILT (POM_TABLE_ILT, name
 *      pom_ilt_name(uuid)) with nlink = the number of its names, and every
 *      name is a link stub (POM_ROW_F_LINKED, same uuid and type, no data).
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
 */
#include "pom_client_i.h"

#include <stdio.h>
#include <string.h>

#define MAX_TRIES 64

void pom_ilt_name(uint64_t uuid, char *buf)
{
    snprintf(buf, POM_ILT_NAME_LEN + 1, "%016llx", (unsigned long long)uuid);
}

int pom_stub_follow(pom_fs *fs, uint64_t uuid, int group, struct xt_resp *r, xt_row *row)
{
    char in[POM_ILT_NAME_LEN + 1];
    pom_ilt_name(uuid, in);
    xt_resp_free(r);
    int rc = pom_row_get(fs, POM_TABLE_ILT, in, group, r, row);
    if (rc == 0 && row->attr.uuid != uuid) {
        XT_ERR("ILT row %s holds uuid %llu", in, (unsigned long long)row->attr.uuid);
        xt_resp_free(r);
        rc = -EIO;
    }
    return rc;
}

int pom_name_holds(pom_fs *fs, uint64_t table, const char *name, uint64_t uuid)
{
    struct xt_resp r;
    xt_row row;
    int rc = pom_row_get(fs, table, name, POM_ROW_META, &r, &row);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    rc = row.attr.uuid == uuid;
    xt_resp_free(&r);
    return rc;
}

/* Makes q conditional on the row being (uuid, version) as read (invariant
 * 2): a name created again restarts at version 0, so the uuid is checked
 * too, and a batch built from an older read never lands on another file. */
static void cond(struct xt_req *q, uint64_t uuid, uint64_t version)
{
    q->flags |= XT_F_IF_VER | XT_F_IF_UUID;
    q->expect_uuid = uuid;
    q->expect_version = version;
}

static struct xt_req req_of(int op, uint64_t table, const char *name, uint32_t flags)
{
    struct xt_req q;
    memset(&q, 0, sizeof q);
    q.op = op;
    q.t.table = table;
    q.name = name;
    q.name_len = (uint32_t)strlen(name);
    q.flags = flags;
    return q;
}

int pom_dir_upd_op(pom_fs *fs, pom_ino dir, int delta, uint64_t now, struct pom_dir_upd *u,
                   struct xt_req *q)
{
    /* No read: times are last-writer-wins and the count changes by its
     * delta at the MDS, under the slice lock (XT_ROW_SET_NLINK_ADD: a
     * counted row takes the exact sum; an uncounted 1 stays 1), so
     * entry changes in one directory never race on its version. The op is
     * conditional on the uuid alone: its failure means the row is not
     * where the inode map says (removed or moved by another client). */
    uint8_t type;
    int rc = pom_ino_where(fs, dir, &u->table, u->name, &type);
    if (rc < 0)
        return rc;
    if (type != XT_ROW_DIR)
        return -ENOTDIR;
    xt_row_init(&u->row);
    u->row.attr.mtime_ns = u->row.attr.ctime_ns = now;
    uint32_t set = XT_ROW_SET_MTIME | XT_ROW_SET_CTIME;
    if (delta != 0) {
        u->row.attr.nlink = (uint32_t)(int32_t)delta; /* read back as signed */
        set |= XT_ROW_SET_NLINK_ADD;
    }
    *q = req_of(XT_OP_UPDATE, u->table, u->name, XT_F_IF_UUID);
    q->row = &u->row;
    q->set_mask = set;
    q->expect_uuid = dir;
    return 0;
}

/* The stub of a file: its identity and mode (for readdir), nothing else. */
static void stub_of(const xt_row_attr *a, uint64_t now, xt_row *stub)
{
    xt_row_init(stub);
    stub->attr.uuid = a->uuid;
    stub->attr.type = a->type;
    stub->attr.mode = a->mode;
    stub->attr.uid = a->uid;
    stub->attr.gid = a->gid;
    stub->attr.flags = POM_ROW_F_LINKED;
    stub->attr.atime_ns = stub->attr.mtime_ns = stub->attr.ctime_ns = now;
    stub->attr.btime_ns = a->btime_ns;
}

int pom_link(pom_fs *fs, pom_ino ino, pom_ino newparent, const char *newname, struct stat *st)
{
    int rc = pom_name_check(newname);
    if (rc < 0)
        return rc;
    if ((rc = pom_dir_check(fs, newparent)) < 0)
        return rc;
    /* The row about to move to the ILT must hold the open buffer's bytes. */
    if ((rc = pom_data_flush_ino(fs, ino)) < 0)
        return rc;
    char in[POM_ILT_NAME_LEN + 1];
    pom_ilt_name(ino, in);
    bool with_parent = true; /* the new parent's times in the batch */
    for (int attempt = 0; attempt < MAX_TRIES; attempt++) {
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        struct xt_resp r;
        xt_row row;
        uint64_t since = pom_ino_seq(fs);
        if ((rc = pom_ino_row(fs, ino, POM_ROW_ALL, &table, name, &r, &row)) < 0)
            return rc;
        if (row.attr.type == XT_ROW_DIR) {
            xt_resp_free(&r);
            return -EPERM; /* link(2): no hard links to directories */
        }
        if (table == newparent && strcmp(name, newname) == 0) {
            xt_resp_free(&r);
            return -EEXIST; /* its own name (a batch names a row once) */
        }
        uint64_t now = xt_now_ns();
        xt_row stub, ilt, upd;
        stub_of(&row.attr, now, &stub);
        struct xt_req q[4];
        size_t n = 0, failed, np = SIZE_MAX;
        uint32_t nlink;
        static const uint16_t drop[2] = { XT_CG_DATA, XT_CG_XATTR };
        if (table == POM_TABLE_ILT) {
            /* Linked already: one more stub, nlink + 1. */
            nlink = row.attr.nlink + 1;
            xt_row_init(&upd);
            upd.attr.nlink = nlink;
            upd.attr.ctime_ns = now;
            q[n] = req_of(XT_OP_UPDATE, POM_TABLE_ILT, in, 0);
            q[n].row = &upd;
            q[n].set_mask = XT_ROW_SET_NLINK | XT_ROW_SET_CTIME;
            cond(&q[n++], ino, row.attr.version);
        } else {
            /* Second name: the whole row moves to the ILT, the first name
             * becomes a stub (an update, so its version moves on and a
             * stale conditional write to it fails), the new name a stub. */
            nlink = 2;
            ilt = row;
            ilt.attr.nlink = nlink;
            ilt.attr.ctime_ns = now;
            ilt.attr.flags &= ~POM_ROW_F_LINKED;
            q[n] = req_of(XT_OP_CREATE, POM_TABLE_ILT, in, XT_F_EXCL);
            q[n++].row = &ilt;
            xt_row_init(&upd);
            upd.attr = stub.attr;
            q[n] = req_of(XT_OP_UPDATE, table, name, 0);
            q[n].row = &upd;
            q[n].set_mask = XT_ROW_SET_FLAGS | XT_ROW_SET_SIZE | XT_ROW_SET_CTIME;
            q[n].drop = drop;
            q[n].ndrop = 2;
            cond(&q[n++], ino, row.attr.version);
        }
        size_t nn = n; /* the new name */
        q[n] = req_of(XT_OP_CREATE, newparent, newname, XT_F_EXCL);
        q[n++].row = &stub;
        /* The new parent's times (invariant 5), unless its row is the
         * file's own (a stale map: a batch names a row once). */
        struct pom_dir_upd pu;
        if (with_parent && pom_dir_upd_op(fs, newparent, 0, now, &pu, &q[n]) == 0 &&
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
        pom_ino_moved(fs, ino, POM_TABLE_ILT, in);
        a.nlink = nlink;
        a.ctime_ns = now;
        pom_row_stat(&a, st);
        struct stat now_st; /* linked already: a failed re-read keeps the batch's view */
        if (pom_ino_stat_fix(fs, ino, st, since) == -EAGAIN && pom_getattr(fs, ino, &now_st) == 0)
            *st = now_st;
        return pom_ino_ref(fs, ino, POM_TABLE_ILT, in, a.type, 1);
    }
    return -EAGAIN;
}

/* The ops that drop one name of the linked file uuid from its ILT row:
 * nlink - 1, or the row's delete at the last name. Appends to q (one op;
 * `upd` must outlive the call). *gone: this was the last name. *file: the
 * ILT row's attributes, which name the file's tracts (a stub's do not:
 * pom_data_gone needs these). */
static int ilt_drop_op(pom_fs *fs, uint64_t uuid, char *in, xt_row *upd, struct xt_req *q,
                       bool *gone, xt_row_attr *file)
{
    struct xt_resp r;
    xt_row row;
    memset(&r, 0, sizeof r);
    int rc = pom_stub_follow(fs, uuid, POM_ROW_META, &r, &row);
    if (rc < 0)
        return rc;
    pom_ilt_name(uuid, in);
    *file = row.attr;
    *gone = row.attr.nlink <= 1;
    if (*gone) {
        *q = req_of(XT_OP_DELETE, POM_TABLE_ILT, in, 0);
    } else {
        xt_row_init(upd);
        upd->attr.nlink = row.attr.nlink - 1;
        upd->attr.ctime_ns = xt_now_ns();
        *q = req_of(XT_OP_UPDATE, POM_TABLE_ILT, in, 0);
        q->row = upd;
        q->set_mask = XT_ROW_SET_NLINK | XT_ROW_SET_CTIME;
    }
    cond(q, uuid, row.attr.version);
    xt_resp_free(&r);
    return 0;
}

int pom_unlink_stub(pom_fs *fs, pom_ino parent, const char *name, const xt_row_attr *stub)
{
    char in[POM_ILT_NAME_LEN + 1];
    xt_row upd;
    struct xt_req q[3];
    q[0] = req_of(XT_OP_DELETE, parent, name, 0);
    cond(&q[0], stub->uuid, stub->version);
    bool gone = false;
    xt_row_attr file = *stub; /* the stub alone when the ILT row is missing */
    int rc = ilt_drop_op(fs, stub->uuid, in, &upd, &q[1], &gone, &file);
    size_t n = 2, failed, np = SIZE_MAX;
    if (rc == -ENOENT) {
        /* A stub without its ILT row cannot come from these batches; take
         * the stray name away alone rather than keep it forever. */
        XT_WARN("stub %s of uuid %llu has no ILT row: removing it", name,
                (unsigned long long)stub->uuid);
        n = 1;
        gone = true;
    } else if (rc < 0) {
        return rc;
    }
    size_t ilt = n == 2 ? 1 : SIZE_MAX;
    /* The parent's times in the same batch (invariant 5). */
    struct pom_dir_upd pu;
    if (pom_dir_upd_op(fs, parent, 0, xt_now_ns(), &pu, &q[n]) == 0 &&
        !(pu.table == parent && strcmp(pu.name, name) == 0)) /* a stale map */
        np = n++;
    bool retried = false;
    rc = pom_batch_call(fs, q, n, &failed, &retried);
    if (np != SIZE_MAX && failed == np && pom_parent_missing(rc)) {
        /* The parent's row is not where the map says (moved by another
         * client): remove the name without it, only a time is lost. */
        retried = false;
        rc = pom_batch_call(fs, q, --n, &failed, &retried);
    }
    if (rc < 0 && retried && pom_name_holds(fs, parent, name, stub->uuid) == 0)
        rc = 0;
    if (rc < 0)
        return rc == -ENOENT && ilt != SIZE_MAX && failed == ilt ? -ESTALE : rc;
    if (gone) {
        /* The file's last name went: here goes its storage too. */
        pom_ino_unlinked(fs, stub->uuid);
        pom_data_gone(fs, &file); /* tracts: the ILT row names them */
    }
    return 0;
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
    if (!(a->flags & POM_ROW_F_LINKED))
        pom_ino_moved(fs, a->uuid, table, name);
}

/* One attempt of rename/exchange from fresh reads. 0 done, 1 try again,
 * < 0 the answer. */
static int rename_once(pom_fs *fs, pom_ino parent, const char *name, pom_ino newparent,
                       const char *newname, unsigned flags)
{
    bool xchg = (flags & POM_RENAME_EXCHANGE) != 0;
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
    struct pom_gdt_buf gb[2];
    size_t n = 0, failed;
    char in[POM_ILT_NAME_LEN + 1];
    xt_row upd;
    bool gone = false;
    q[n] = req_of(XT_OP_CREATE, newparent, newname, exists ? 0 : XT_F_EXCL);
    q[n].row = &nsrc;
    if (exists)
        cond(&q[n], da.uuid, da.version);
    n++;
    if (xchg) {
        ndst = dst;
        ndst.attr.ctime_ns = now;
        q[n] = req_of(XT_OP_CREATE, parent, name, 0);
        q[n].row = &ndst;
    } else {
        q[n] = req_of(XT_OP_DELETE, parent, name, 0);
    }
    cond(&q[n++], sa.uuid, sa.version);
    if (exists && !xchg && (da.flags & POM_ROW_F_LINKED)) {
        /* The replaced target is one name of a linked file. */
        if ((rc = ilt_drop_op(fs, da.uuid, in, &upd, &q[n], &gone, &da)) == 0)
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
    if (parent == newparent) {
        rc = pom_dir_upd_op(fs, parent, dp + dn, now, &pu[0], &q[n++]);
    } else {
        rc = pom_dir_upd_op(fs, parent, dp, now, &pu[0], &q[n++]);
        if (rc == 0)
            rc = pom_dir_upd_op(fs, newparent, dn, now, &pu[1], &q[n++]);
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
    /* The GDT rows of the directories moved or replaced (copies, after
     * every op the failure rules below index). */
    size_t nq = n;
    if (sdir && rc == 0)
        rc = pom_gdt_op(sa.uuid, newparent, newname, now, &gb[0], &q[nq++]);
    if (ddir && rc == 0)
        rc = pom_gdt_op(da.uuid, parent, xchg ? name : NULL, now, &gb[1], &q[nq++]);
    if (rc < 0)
        goto out;
    bool retried = false;
    rc = pom_batch_call(fs, q, nq, &failed, &retried);
    if (rc < 0 && retried && pom_name_holds(fs, newparent, newname, sa.uuid) == 1 &&
        pom_name_holds(fs, parent, name, xchg ? da.uuid : sa.uuid) == xchg)
        rc = 0; /* invariant 4 */
    if (rc < 0 && failed != SIZE_MAX && failed >= first_dir && failed < n) {
        rc = -ENOENT; /* a parent's row is not where the map says */
        goto out;
    }
    if (rc == -ESTALE || rc == -EEXIST || (rc == -ENOENT && failed != SIZE_MAX)) {
        rc = 1; /* something changed since the reads: again */
        goto out;
    }
    if (rc < 0)
        goto out;
    if (gone) {
        pom_ino_unlinked(fs, da.uuid); /* the replaced file's last name */
        pom_data_gone(fs, &da); /* its tracts (da is the ILT row's for a stub) */
    }
    map_moved(fs, &sa, newparent, newname);
    if (xchg)
        map_moved(fs, &da, parent, name);
out:
    xt_resp_free(&sr);
    if (exists)
        xt_resp_free(&dr);
    return rc;
}

int pom_rename(pom_fs *fs, pom_ino parent, const char *name, pom_ino newparent,
               const char *newname, unsigned flags)
{
    if (flags & ~(unsigned)(POM_RENAME_NOREPLACE | POM_RENAME_EXCHANGE))
        return -EINVAL;
    if ((flags & POM_RENAME_NOREPLACE) && (flags & POM_RENAME_EXCHANGE))
        return -EINVAL; /* renameat2(2) */
    int rc = pom_name_check(name);
    if (rc == 0)
        rc = pom_name_check(newname);
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
        rc = rename_once(fs, parent, name, newparent, newname, flags);
        if (rc == 1)
            continue;
        return rc;
    }
    return -EAGAIN;
}
