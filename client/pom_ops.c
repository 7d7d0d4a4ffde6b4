/*
 * pom_ops.c -- namespace operations of libpomegranate over xTable rows:
 * lookup, getattr, setattr, mknod/mkdir/symlink, readlink, unlink, rmdir,
 * readdir, access, create and directory handles (docs/client.md); link
 * and rename are in pom_link.c.
 * A link stub met by lookup, readdir or a by-inode read is resolved to its
 * ILT row (pom_link.c invariant 1).
 *
 * Invariants:
 *  (1) A row is changed only under a version condition taken from a read
 *      that also checked its uuid, so a change never lands on a row that
 *      another client replaced in between; -ESTALE re-reads and retries.
 *  (2) A new entry is created exclusively (XT_F_EXCL); a retried create
 *      that finds a row with our own new uuid counts as done.
 *  (3) unlink/rmdir remove with the version read. Link, rename and the
 *      unlink of a link stub change several rows: they are one atomic
 *      batch each, in pom_link.c.
 *  (4) The parent's mtime/ctime follow every change of its entries: every
 *      create (file, fifo, socket, device, symlink, directory), unlink,
 *      rmdir and rename is ONE atomic batch with the parent's row update
 *      (pom_dir_upd_op, conditional on the parent's uuid, no read), so one
 *      round trip does both and a create into a removed directory fails
 *      -ENOENT having created nothing. Link and the unlink of a link stub
 *      carry it in their batches too (pom_link.c).
 *  (5) A directory's nlink is 2 + its subdirectories (directories made
 *      before this count was kept show 1, "not counted", and stay so).
 *      mkdir and rmdir carry nlink +-1 in that batch as a delta the MDS
 *      adds under its slice lock (XT_ROW_SET_NLINK_ADD), so a crash never
 *      leaves a count off and concurrent mkdirs never race on a version.
 *  (6) A regular file unlinked here while open here has no row: setattr
 *      (and the xattr calls, pom_xattr.c) change its open state instead
 *      (pom_ino.c (4)). Its xattrs are re-read at the unlink, with the
 *      version its delete is conditional on, so the copy is exact. A
 *      directory removed here (rmdir, a rename over it) keeps its last
 *      attributes in the inode map while the kernel holds it, so fstat of
 *      an open one answers them with nlink 0 (pom_ino_open_stat).
 *  (7) Set-group-ID directories (what a local file system's
 *      inode_init_owner does, which FUSE leaves to the file system): a new
 *      entry takes its parent's group when the parent has S_ISGID, and a
 *      new directory the bit too. The parent's mode and gid are those of
 *      its last read here (the kernel reads a directory's attributes at
 *      least every attr_timeout while it walks it), else read once
 *      (parent_attr, with its default ACL: invariant 8). The
 *      kernel strips S_ISGID from the mode a non-member asks for, and
 *      clears S_ISUID/S_ISGID on write, truncate, chown, fallocate and
 *      punch itself (a SETATTR of the mode: FUSE_HANDLE_KILLPRIV is not
 *      asked for).
 *  (8) POSIX ACLs (docs/client.md "POSIX ACLs"): a new entry (not a
 *      symlink) in a directory with a default ACL gets an access ACL made
 *      from it, its mode masked by that ACL instead of the umask
 *      (cred->umask applies only without one), and a new directory the
 *      default ACL too, in the row it is created with. The parent's
 *      default ACL is that of its last read here while the parent's ctime
 *      is the same or for POM_DACL_FRESH_NS, else read once with its mode
 *      and gid (pom_ino_dir_attr). A chmod changes
 *      the access ACL's owner, mask (or group) and other entries in the
 *      same row update.
 *
 * Floor 4.1 of libpomegranate (pom_ns_i.h): calls floors 1-3, pom_ns.c and
 * pom_gdt.c; pom_link.c and pom_gdt_read.c sit above it.
 */
#include "pom_acl_i.h"
#include "pom_ns_i.h"

#include <assert.h>
#include <fcntl.h>
#include <linux/fs.h> /* FS_*_FL */
#include <string.h>
#include <unistd.h>

#define MAX_TRIES 64
/* Reads of a row again after a flush here ended meanwhile (pom_ino_stat_fix):
 * few, as more than POM_CHG_RING flushes during one RPC answer "maybe" for
 * every file; then the last read stands. */
#define STAT_TRIES 3

void pom_cred_or_self(const struct pom_cred *cred, struct pom_cred *out)
{
    if (cred) {
        *out = *cred;
    } else {
        out->uid = (uint32_t)geteuid();
        out->gid = (uint32_t)getegid();
        out->umask = 0;
    }
}

/* Which row holds a name's attributes: its own, or a linked file's ILT
 * row. `name` points at the name asked or at `in`. */
struct named {
    uint64_t table;
    const char *name;
    char in[XT_NS_ID_LEN + 1];
    uint8_t type;
};

/* The attributes of `name` in directory parent, as of a read that began
 * after every flush of this client that the row could predate
 * (pom_ino_stat_fix). */
static int stat_named(pom_fs *fs, pom_ino parent, const char *name, struct stat *st,
                      struct named *at)
{
    for (int tries = 0;; tries++) {
        struct xt_resp r;
        xt_row row;
        uint64_t since = pom_ino_seq(fs);
        int rc = pom_row_get(fs, parent, name, POM_ROW_META, &r, &row);
        if (rc < 0)
            return rc;
        at->table = parent;
        at->name = name;
        if (row.attr.flags & XT_NS_ROW_F_LINKED) {
            uint64_t uuid = row.attr.uuid;
            if ((rc = pom_stub_follow(fs, uuid, POM_ROW_META, &r, &row)) < 0)
                return rc;
            xt_ns_id_name(uuid, at->in);
            at->table = XT_NS_TABLE_ILT;
            at->name = at->in;
        }
        pom_row_stat(&row.attr, st);
        at->type = row.attr.type;
        xt_resp_free(&r);
        if (pom_ino_stat_fix(fs, st->st_ino, st, since) != -EAGAIN || tries == STAT_TRIES)
            return 0;
    }
}

int pom_lookup(pom_fs *fs, pom_ino parent, const char *name, struct stat *st)
{
    int rc = xt_ns_name_check(name);
    if (rc == -EINVAL && name && (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)) {
        pom_ino target = parent;
        if (strcmp(name, "..") == 0 && (rc = pom_parent(fs, parent, &target)) < 0)
            return rc;
        if ((rc = pom_getattr(fs, target, st)) < 0)
            return rc;
        uint64_t table;
        char nm[XT_NAME_MAX + 1];
        uint8_t type;
        if ((rc = pom_ino_where(fs, target, &table, nm, &type)) < 0)
            return rc;
        return pom_ino_ref(fs, target, table, nm, type, 1);
    }
    if (rc < 0)
        return rc;
    if ((rc = pom_dir_check(fs, parent)) < 0)
        return rc;
    struct named at;
    if ((rc = stat_named(fs, parent, name, st, &at)) < 0)
        return rc;
    return pom_ino_ref(fs, st->st_ino, at.table, at.name, at.type, 1);
}

void pom_forget(pom_fs *fs, pom_ino ino, uint64_t n)
{
    pom_ino_forget(fs, ino, n);
}

int pom_parent(pom_fs *fs, pom_ino ino, pom_ino *parent)
{
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    int rc = pom_ino_where(fs, ino, &table, name, NULL);
    if (rc < 0)
        return rc;
    *parent = ino == POM_ROOT_INO ? POM_ROOT_INO : table;
    return 0;
}

int pom_getattr(pom_fs *fs, pom_ino ino, struct stat *st)
{
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    struct xt_resp r;
    xt_row row;
    for (int tries = 0;; tries++) {
        uint64_t since = pom_ino_seq(fs);
        int rc = pom_ino_row(fs, ino, POM_ROW_META, &table, name, &r, &row);
        if (rc == -ENOENT && pom_ino_open_stat(fs, ino, st)) {
            st->st_nlink = 0; /* open but unlinked */
            return 0;
        }
        if (rc < 0)
            return rc;
        pom_row_stat(&row.attr, st);
        xt_resp_free(&r);
        if (pom_ino_stat_fix(fs, ino, st, since) != -EAGAIN || tries == STAT_TRIES)
            break;
    }
    pom_data_fix_blocks(fs, &row.attr, st); /* sparse blob files (pom_file.c) */
    return 0;
}

_Static_assert(XT_NS_ROW_F_IFLAGS == POM_IFLAGS << XT_NS_IFLAGS_SHIFT &&
                   XT_NS_ROW_F_IMMUTABLE == FS_IMMUTABLE_FL << XT_NS_IFLAGS_SHIFT &&
                   XT_NS_ROW_F_APPEND == FS_APPEND_FL << XT_NS_IFLAGS_SHIFT &&
                   XT_NS_ROW_F_NODUMP == FS_NODUMP_FL << XT_NS_IFLAGS_SHIFT &&
                   XT_NS_ROW_F_NOATIME == FS_NOATIME_FL << XT_NS_IFLAGS_SHIFT,
               "inode flags are FS_*_FL in the row (xt_ns.h)");

int pom_getflags(pom_fs *fs, pom_ino ino, unsigned *flags)
{
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    struct xt_resp r;
    xt_row row;
    int rc = pom_ino_row(fs, ino, POM_ROW_META, &table, name, &r, &row);
    struct pom_inode *orphan;
    if (rc == -ENOENT && (orphan = pom_ino_pin_orphan(fs, ino))) {
        pthread_mutex_lock(&orphan->data->mu);
        *flags = orphan->data->iflags >> XT_NS_IFLAGS_SHIFT;
        pthread_mutex_unlock(&orphan->data->mu);
        pom_data_unpin(fs, orphan);
        return 0;
    }
    if (rc < 0)
        return rc;
    *flags = (row.attr.flags & XT_NS_ROW_F_IFLAGS) >> XT_NS_IFLAGS_SHIFT;
    xt_resp_free(&r);
    return 0;
}

/* set_attrs's to_set bit for the inode flags (pom_setflags), beside the
 * POM_SET_* bits. */
#define SET_IFLAGS (1 << 30)
_Static_assert((SET_IFLAGS & POM_SET_SUPPORTED) == 0, "SET_IFLAGS is no POM_SET_* bit");

/* The open state of ino, if open here, takes iflags (pom_file.c checks). */
static void iflags_open(pom_fs *fs, pom_ino ino, uint32_t iflags)
{
    struct pom_inode *i = pom_ino_pin_open(fs, ino);
    if (!i)
        return;
    pthread_mutex_lock(&i->data->mu);
    i->data->iflags = iflags;
    pthread_mutex_unlock(&i->data->mu);
    pom_data_unpin(fs, i);
}

/* setattr under the inode flags (as a local file system's notify_change):
 * an immutable inode takes no change, an append-only one only times set
 * to now (its size is refused by the open of pom_data_setsize). */
static int setattr_denied(uint32_t iflags, int to_set)
{
    if (to_set & SET_IFLAGS)
        return 0; /* (chattr -i) */
    /* utime(NULL) comes as ATIME with ATIME_NOW (and MTIME with
     * MTIME_NOW): a time set to now, whatever value rides along. */
    if (to_set & POM_SET_ATIME_NOW)
        to_set &= ~POM_SET_ATIME;
    if (to_set & POM_SET_MTIME_NOW)
        to_set &= ~POM_SET_MTIME;
    if (iflags & XT_NS_ROW_F_IMMUTABLE)
        return -EPERM;
    if ((iflags & XT_NS_ROW_F_APPEND) &&
        (to_set & ~(POM_SET_ATIME_NOW | POM_SET_MTIME_NOW | POM_SET_CTIME | POM_SET_SIZE)))
        return -EPERM;
    return 0;
}

/* A chmod's change of the access ACL in xattr group grp (invariant 8), in
 * place: its entries' permission bits only, so the group's encoding keeps
 * its length. Returns whether there was one. */
static bool acl_chmod(uint8_t *grp, uint32_t glen, mode_t mode)
{
    const uint8_t *v;
    uint32_t vlen;
    if (!glen ||
        xt_row_xattr_get(grp, glen, POM_ACL_ACCESS, strlen(POM_ACL_ACCESS), &v, &vlen) < 0 ||
        pom_acl_check(v, vlen) != 0)
        return false;
    pom_acl_chmod(grp + (v - grp), vlen, mode);
    return true;
}

/* setattr of a file unlinked here and still open here (invariant 6): no
 * row to update, its attributes are those of its open state. The size is
 * changed first (the only part that can fail), so a failed call changes
 * nothing. */
static int orphan_setattr(pom_fs *fs, struct pom_inode *i, const struct stat *in, int to_set,
                          uint32_t iflags)
{
    pthread_mutex_lock(&i->data->mu);
    int rc = setattr_denied(i->data->iflags, to_set);
    pthread_mutex_unlock(&i->data->mu);
    if (rc < 0)
        return rc;
    if ((to_set & POM_SET_SIZE) && (rc = pom_data_setsize(fs, i->uuid, (uint64_t)in->st_size)) < 0)
        return rc;
    struct pom_data *d = i->data;
    uint64_t now = xt_now_ns();
    struct timespec tnow;
    pom_ns_ts(now, &tnow);
    pthread_mutex_lock(&d->mu);
    if (to_set & POM_SET_MODE) {
        d->st.st_mode = (d->st.st_mode & S_IFMT) | (in->st_mode & 07777);
        acl_chmod(d->xattr, d->xattr_len, in->st_mode); /* invariant (8) */
    }
    if (to_set & POM_SET_UID)
        d->st.st_uid = in->st_uid;
    if (to_set & POM_SET_GID)
        d->st.st_gid = in->st_gid;
    if (to_set & (POM_SET_ATIME | POM_SET_ATIME_NOW))
        d->st.st_atim = (to_set & POM_SET_ATIME_NOW) ? tnow : in->st_atim;
    if (to_set & (POM_SET_MTIME | POM_SET_MTIME_NOW)) /* getattr's mtime is mtime_ns */
        d->mtime_ns = (to_set & POM_SET_MTIME_NOW) ? now : pom_ts_ns(&in->st_mtim);
    if (to_set & SET_IFLAGS)
        d->iflags = iflags;
    d->st.st_ctim = (to_set & POM_SET_CTIME) ? in->st_ctim : tnow;
    pthread_mutex_unlock(&d->mu);
    return 0;
}

/* pom_setattr, and the inode flags (iflags, XT_NS_ROW_F_IFLAGS) with
 * SET_IFLAGS. */
static int set_attrs(pom_fs *fs, pom_ino ino, const struct stat *in, int to_set, uint32_t iflags,
                     struct stat *out)
{
    int rc;
    struct pom_inode *orphan = pom_ino_pin_orphan(fs, ino);
    if (orphan) {
        rc = orphan_setattr(fs, orphan, in, to_set, iflags);
        pom_data_unpin(fs, orphan);
        return rc < 0 ? rc : out ? pom_getattr(fs, ino, out) : 0;
    }
    if (to_set & POM_SET_SIZE) {
        /* Sizes are pom_file.c's (inline or blob tier, engineer A): it
         * writes size, mtime and ctime; the other bits follow below. */
        if ((rc = pom_data_setsize(fs, ino, (uint64_t)in->st_size)) < 0)
            return rc;
        to_set &= ~POM_SET_SIZE;
    }
    /* Bytes written before an explicit mtime (tar, cp -p, rsync set it on
     * the open fd) must not bring the write's own mtime back when their
     * buffer is flushed at close: flush them first. */
    if ((to_set & (POM_SET_MTIME | POM_SET_MTIME_NOW)) &&
        (rc = pom_data_flush_ino(fs, ino)) < 0)
        return rc;
    for (int attempt = 0; attempt < MAX_TRIES; attempt++) {
        pom_conflict_pause(attempt);
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        struct xt_resp r;
        xt_row row;
        /* A chmod changes the access ACL too (invariant 8). */
        rc = pom_ino_row(fs, ino, (to_set & POM_SET_MODE) ? XT_CG_XATTR : POM_ROW_META, &table,
                         name, &r, &row);
        if (rc == -ENOENT && (orphan = pom_ino_pin_orphan(fs, ino))) {
            /* Unlinked here meanwhile (the size, if any, is done) */
            rc = orphan_setattr(fs, orphan, in, to_set, iflags);
            pom_data_unpin(fs, orphan);
            return rc < 0 ? rc : out ? pom_getattr(fs, ino, out) : 0;
        }
        if (rc < 0)
            return rc;
        if ((rc = setattr_denied(row.attr.flags, to_set)) < 0) {
            xt_resp_free(&r);
            return rc;
        }
        xt_row_attr a = row.attr;
        uint64_t now = xt_now_ns();
        uint32_t mask = XT_ROW_SET_CTIME;
        xt_row upd;
        xt_row_init(&upd);
        uint8_t *acl_grp = NULL;
        uint32_t acl_len = 0;
        if (to_set & POM_SET_MODE) {
            a.mode = in->st_mode & 07777;
            mask |= XT_ROW_SET_MODE;
            const xt_row_group *g = xt_row_view_group(&row, XT_CG_XATTR);
            if (g && !(acl_grp = xt_malloc(g->len))) {
                xt_resp_free(&r);
                return -ENOMEM;
            }
            if (g)
                memcpy(acl_grp, g->ptr, g->len);
            if (g && acl_chmod(acl_grp, g->len, in->st_mode)) {
                acl_len = g->len;
                xt_row_view_set_group(&upd, XT_CG_XATTR, acl_grp, acl_len);
            } else {
                xt_free(acl_grp);
                acl_grp = NULL;
            }
        }
        if (to_set & POM_SET_UID) {
            a.uid = in->st_uid;
            mask |= XT_ROW_SET_UID;
        }
        if (to_set & POM_SET_GID) {
            a.gid = in->st_gid;
            mask |= XT_ROW_SET_GID;
        }
        if (to_set & (POM_SET_ATIME | POM_SET_ATIME_NOW)) {
            a.atime_ns = (to_set & POM_SET_ATIME_NOW) ? now : pom_ts_ns(&in->st_atim);
            mask |= XT_ROW_SET_ATIME;
        }
        if (to_set & (POM_SET_MTIME | POM_SET_MTIME_NOW)) {
            a.mtime_ns = (to_set & POM_SET_MTIME_NOW) ? now : pom_ts_ns(&in->st_mtim);
            mask |= XT_ROW_SET_MTIME;
        }
        if (to_set & SET_IFLAGS) {
            a.flags = (a.flags & ~XT_NS_ROW_F_IFLAGS) | iflags;
            mask |= XT_ROW_SET_FLAGS;
        }
        a.ctime_ns = (to_set & POM_SET_CTIME) ? pom_ts_ns(&in->st_ctim) : now;
        upd.attr = a;
        struct xt_req q = { .op = XT_OP_UPDATE, .t = { .table = table }, .name = name,
                            .name_len = (uint32_t)strlen(name),
                            .flags = XT_F_IF_VER | XT_F_IF_UUID,
                            .row = &upd, .set_mask = mask,
                            .expect_version = row.attr.version, .expect_uuid = ino };
        xt_resp_free(&r);
        struct xt_resp ur;
        rc = pom_call(fs, &q, &ur, NULL);
        xt_resp_free(&ur);
        if (rc == 0 && acl_grp) {
            pom_ino_keep_xattrs(fs, ino, acl_grp, acl_len); /* takes acl_grp */
            acl_grp = NULL;
        }
        xt_free(acl_grp);
        if (rc == -ESTALE)
            continue;
        if (rc < 0)
            return rc;
        if (to_set & SET_IFLAGS)
            iflags_open(fs, ino, iflags);
        return out ? pom_getattr(fs, ino, out) : 0;
    }
    return -EAGAIN;
}

int pom_setattr(pom_fs *fs, pom_ino ino, const struct stat *in, int to_set, struct stat *out)
{
    if (to_set & ~POM_SET_SUPPORTED)
        return -ENOTSUP;
    if ((to_set & POM_SET_SIZE) && in->st_size < 0)
        return -EINVAL;
    return set_attrs(fs, ino, in, to_set, 0, out);
}

int pom_setflags(pom_fs *fs, pom_ino ino, unsigned flags)
{
    if (flags & ~POM_IFLAGS)
        return -EOPNOTSUPP;
    struct stat none;
    memset(&none, 0, sizeof none);
    return set_attrs(fs, ino, &none, SET_IFLAGS, (uint32_t)flags << XT_NS_IFLAGS_SHIFT, NULL);
}

/* A create's one atomic batch (invariants 2, 4, 5): the new row
 * (exclusive) + the parent's row (times, and nlink + 1 for a directory).
 * The parent's op fails only when its row is not where the map says: the
 * parent was moved by this client while the batch was built (the map
 * moved since: built again there; xfstests generic/707 creates in a
 * directory another process keeps moving), or removed or moved by another
 * client, and nothing is created (-ENOENT). */
static int create_batch(pom_fs *fs, pom_ino parent, const char *name, xt_row *row)
{
    bool dir = row->attr.type == XT_ROW_DIR;
    for (int attempt = 0; attempt < MAX_TRIES; attempt++) {
        struct xt_req q[3] = {
            { .op = XT_OP_CREATE, .t = { .table = parent }, .name = name,
              .name_len = (uint32_t)strlen(name), .flags = XT_F_EXCL, .row = row },
        };
        struct pom_dir_upd pu;
        struct xt_ns_gdt gb;
        uint64_t mark = pom_ino_moves(fs);
        int rc = pom_dir_upd_op(fs, parent, dir ? 1 : 0, XT_ROW_SET_ENTRY_ADD,
                                row->attr.ctime_ns, &pu, &q[1]);
        if (rc == 0) /* its GDT row (a copy: never fails the batch) */
            rc = pom_gdt_op(row->attr.uuid, parent, name, row->attr.ctime_ns, &gb, &q[2]);
        if (rc < 0)
            return rc;
        size_t failed = SIZE_MAX;
        bool retried = false;
        rc = pom_batch_call(fs, q, 3, &failed, &retried);
        if (rc < 0 && retried && pom_name_holds(fs, parent, name, row->attr.uuid) == 1)
            return 0; /* our first attempt was applied */
        if (failed == 1 && pom_parent_missing(rc)) {
            if (pom_ino_moved_since(fs, mark))
                continue;
            return -ENOENT;
        }
        return rc;
    }
    return -EAGAIN;
}

/* The parent's mode and gid (invariant 7) and default ACL (invariant 8;
 * *dacl xt_malloc'd, NULL: none) as last read here, else read once. */
static int parent_attr(pom_fs *fs, pom_ino parent, uint32_t *mode, uint32_t *gid,
                       uint8_t **dacl, uint32_t *dacl_len)
{
    int rc = pom_ino_dir_attr(fs, parent, mode, gid, dacl, dacl_len);
    if (rc != 0)
        return rc < 0 ? rc : 0;
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    struct xt_resp r;
    xt_row row;
    if ((rc = pom_ino_row(fs, parent, XT_CG_XATTR, &table, name, &r, &row)) < 0)
        return rc;
    const xt_row_group *g = xt_row_view_group(&row, XT_CG_XATTR);
    const uint8_t *v = NULL;
    uint32_t vlen = 0;
    if (!g ||
        xt_row_xattr_get(g->ptr, g->len, POM_ACL_DEFAULT, strlen(POM_ACL_DEFAULT), &v, &vlen) <
            0 ||
        pom_acl_check(v, vlen) != 0) {
        v = NULL; /* none (a stored one was checked: pom_xattr.c invariant 5) */
        vlen = 0;
    }
    *mode = row.attr.mode;
    *gid = row.attr.gid;
    if (vlen && !(*dacl = xt_malloc(vlen)))
        rc = -ENOMEM;
    else if (vlen)
        memcpy(*dacl, v, vlen);
    *dacl_len = *dacl ? vlen : 0;
    if (rc == 0)
        rc = pom_ino_dir_keep(fs, parent, &row.attr, v, vlen);
    xt_resp_free(&r);
    if (rc < 0) {
        xt_free(*dacl);
        *dacl = NULL;
    }
    return rc;
}

/* The XT_CG_XATTR group of a new entry (*grp xt_malloc'd, NULL: none) and
 * its mode's permission bits (*mode in and out), from the parent's default
 * ACL (consumed) as the kernel's posix_acl_create makes them (invariant
 * 8); without one the umask applies. */
static int inherit_acl(uint8_t type, uint8_t *dacl, uint32_t dacl_len, mode_t umask,
                       mode_t *mode, uint8_t **grp, size_t *glen)
{
    *grp = NULL;
    *glen = 0;
    if (type == XT_ROW_SYMLINK)
        return 0; /* always 0777, no ACL */
    if (!dacl) {
        *mode &= ~(umask & 0777);
        return 0;
    }
    int rc = 0;
    if (type == XT_ROW_DIR)
        rc = xt_row_xattr_set(NULL, 0, POM_ACL_DEFAULT, strlen(POM_ACL_DEFAULT), dacl, dacl_len,
                              0, grp, glen);
    if (rc == 0 && pom_acl_create_masq(dacl, dacl_len, mode)) {
        uint8_t *g2;
        size_t g2len;
        rc = xt_row_xattr_set(*grp, *glen, POM_ACL_ACCESS, strlen(POM_ACL_ACCESS), dacl,
                              dacl_len, 0, &g2, &g2len);
        if (rc == 0) {
            xt_free(*grp);
            *grp = g2;
            *glen = g2len;
        }
    }
    if (rc < 0) {
        xt_free(*grp);
        *grp = NULL;
        *glen = 0;
    }
    return rc;
}

/* Builds and exclusively creates a new entry (invariant 2). rdev: a
 * device's number (0 for other types), kept in the row's `generation`
 * column so that every read of the row's attributes has it. `data` is the
 * XT_CG_DATA group (a symlink's target) or NULL. On success *st is filled
 * and the new inode has one reference; *made (may be NULL) gets the row's
 * attributes and its XT_CG_XATTR group (inherited ACLs), whose bytes
 * *made_xg owns (xt_malloc'd, NULL: none; the caller frees). */
static int make_entry(pom_fs *fs, pom_ino parent, const char *name, uint8_t type, mode_t mode,
                      dev_t rdev, const void *data, uint32_t dlen,
                      const struct pom_cred *cred, struct stat *st, xt_row *made,
                      uint8_t **made_xg)
{
    assert(type >= XT_ROW_REG && type <= XT_ROW_SOCK); /* an entry, not a stub or a KV row */
    int rc = xt_ns_name_check(name);
    if (rc < 0)
        return rc;
    if ((rc = pom_dir_check(fs, parent)) < 0)
        return rc;
    struct pom_cred c;
    pom_cred_or_self(cred, &c);
    uint64_t uuid;
    if ((rc = pom_uuid_alloc(fs, &uuid)) < 0)
        return rc;
    xt_row row;
    xt_row_init(&row);
    uint64_t now = xt_now_ns();
    row.attr.uuid = uuid;
    row.attr.type = type;
    row.attr.uid = c.uid;
    row.attr.gid = c.gid;
    uint32_t pmode, pgid, dacl_len = 0;
    uint8_t *dacl = NULL, *xg;
    size_t xglen;
    if ((rc = parent_attr(fs, parent, &pmode, &pgid, &dacl, &dacl_len)) < 0)
        return rc;
    mode_t m = mode & 07777;
    rc = inherit_acl(type, dacl, dacl_len, c.umask, &m, &xg, &xglen);
    xt_free(dacl);
    if (rc < 0)
        return rc;
    row.attr.mode = m;
    /* A set-group-ID directory gives its new entries its group, and its
     * new subdirectories the bit (invariant 7). */
    if (pmode & S_ISGID) {
        row.attr.gid = pgid;
        if (type == XT_ROW_DIR)
            row.attr.mode |= S_ISGID;
    }
    assert(rdev == 0 || type == XT_ROW_CHR || type == XT_ROW_BLK);
    row.attr.generation = (uint64_t)rdev;
    /* A directory counts itself and its "." (2) + its subdirectories. */
    row.attr.nlink = type == XT_ROW_DIR ? 2 : 1;
    row.attr.atime_ns = row.attr.mtime_ns = row.attr.ctime_ns = row.attr.btime_ns = now;
    if (type == XT_ROW_REG)
        row.attr.flags = XT_ROW_F_INLINE;
    if (type == XT_ROW_SYMLINK)
        row.attr.size = dlen;
    if ((dlen && (rc = xt_row_view_set_group(&row, XT_CG_DATA, data, dlen)) < 0) ||
        (xglen && (rc = xt_row_view_set_group(&row, XT_CG_XATTR, xg, (uint32_t)xglen)) < 0) ||
        (rc = create_batch(fs, parent, name, &row)) < 0) {
        xt_free(xg);
        return rc;
    }
    pom_row_stat(&row.attr, st);
    if (made) {
        made->attr = row.attr;
        if (xglen)
            xt_row_view_set_group(made, XT_CG_XATTR, xg, (uint32_t)xglen); /* fits: row's */
        *made_xg = xg;
    } else {
        xt_free(xg);
    }
    return pom_ino_ref(fs, uuid, parent, name, type, 1);
}

int pom_mknod(pom_fs *fs, pom_ino parent, const char *name, mode_t mode, dev_t rdev,
              const struct pom_cred *cred, struct stat *st)
{
    switch (mode & S_IFMT) {
    case 0:
    case S_IFREG:
        return make_entry(fs, parent, name, XT_ROW_REG, mode, 0, NULL, 0, cred, st, NULL, NULL);
    case S_IFIFO:
        return make_entry(fs, parent, name, XT_ROW_FIFO, mode, 0, NULL, 0, cred, st, NULL, NULL);
    case S_IFSOCK:
        return make_entry(fs, parent, name, XT_ROW_SOCK, mode, 0, NULL, 0, cred, st, NULL, NULL);
    case S_IFCHR:
    case S_IFBLK:
        return make_entry(fs, parent, name, S_ISCHR(mode) ? XT_ROW_CHR : XT_ROW_BLK, mode, rdev,
                          NULL, 0, cred, st, NULL, NULL);
    case S_IFDIR:
        return -EINVAL; /* mkdir's job, as mknod(2) says */
    default:
        return -EINVAL;
    }
}

int pom_create(pom_fs *fs, pom_ino parent, const char *name, mode_t mode, int flags,
               const struct pom_cred *cred, struct stat *st, pom_file **out)
{
    *out = NULL;
    xt_row fresh, *known = NULL;
    xt_row_init(&fresh);
    uint8_t *fresh_xg = NULL;
    int rc = make_entry(fs, parent, name, XT_ROW_REG, mode & 07777, 0, NULL, 0, cred, st, &fresh,
                        &fresh_xg);
    if (rc == 0) {
        known = &fresh; /* ours, empty and inline: opened from the row written */
    } else if (rc == -EEXIST && !(flags & O_EXCL)) {
        if ((rc = pom_lookup(fs, parent, name, st)) < 0)
            return rc;
        if (S_ISDIR(st->st_mode))
            rc = -EISDIR;
        else if (!S_ISREG(st->st_mode))
            rc = -EINVAL;
        if (rc < 0) {
            pom_forget(fs, st->st_ino, 1);
            return rc;
        }
    } else if (rc < 0) {
        return rc;
    }
    rc = pom_file_open_row(fs, st->st_ino, flags, known, out); /* copies fresh's groups */
    xt_free(fresh_xg);
    if (rc < 0) {
        pom_forget(fs, st->st_ino, 1);
        return rc;
    }
    return 0;
}

int pom_mkdir(pom_fs *fs, pom_ino parent, const char *name, mode_t mode,
              const struct pom_cred *cred, struct stat *st)
{
    /* The directory's table comes into being with its first entry. */
    return make_entry(fs, parent, name, XT_ROW_DIR, mode, 0, NULL, 0, cred, st, NULL, NULL);
}

int pom_symlink(pom_fs *fs, pom_ino parent, const char *name, const char *target,
                const struct pom_cred *cred, struct stat *st)
{
    if (!target || !target[0])
        return -ENOENT; /* symlink(2): an empty target */
    size_t len = strlen(target);
    if (len > POM_SYMLINK_MAX)
        return -ENAMETOOLONG;
    return make_entry(fs, parent, name, XT_ROW_SYMLINK, 0777, 0, target, (uint32_t)len, cred, st,
                      NULL, NULL);
}

ssize_t pom_readlink(pom_fs *fs, pom_ino ino, char *buf, size_t cap)
{
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    struct xt_resp r;
    xt_row row;
    int rc = pom_ino_row(fs, ino, XT_CG_DATA, &table, name, &r, &row);
    if (rc < 0)
        return rc;
    ssize_t out = -EINVAL;
    if (row.attr.type == XT_ROW_SYMLINK) {
        const xt_row_group *g = xt_row_view_group(&row, XT_CG_DATA);
        size_t len = g ? g->len : 0;
        if (cap <= len) {
            out = -ERANGE;
        } else {
            if (len)
                memcpy(buf, g->ptr, len);
            buf[len] = '\0';
            out = (ssize_t)len;
        }
    }
    xt_resp_free(&r);
    return out;
}

/* The one atomic batch of unlink and rmdir of a plain entry (invariants
 * 3-5): the delete of the row *a (conditional on its uuid and version) +
 * the parent's row (times, nlink - 1 for a directory). -ESTALE: read
 * again. When the parent's op fails (its row is not where the map says:
 * removed or moved by another client), rmdir answers -ENOENT; unlink
 * removes the name alone, as it did before the batch, losing only a
 * time (the name is what the caller asked for). */
static int remove_batch(pom_fs *fs, pom_ino parent, const char *name, const xt_row_attr *a)
{
    bool dir = a->type == XT_ROW_DIR;
    struct xt_req q[3] = {
        { .op = XT_OP_DELETE, .t = { .table = parent }, .name = name,
          .name_len = (uint32_t)strlen(name), .flags = XT_F_IF_VER | XT_F_IF_UUID,
          .expect_version = a->version, .expect_uuid = a->uuid },
    };
    struct pom_dir_upd pu;
    struct xt_ns_gdt gb;
    uint64_t now = xt_now_ns();
    int rc = pom_dir_upd_op(fs, parent, dir ? -1 : 0, XT_ROW_SET_ENTRY_DEL, now, &pu, &q[1]);
    if (rc == 0)
        rc = pom_gdt_op(a->uuid, 0, NULL, now, &gb, &q[2]);
    if (rc < 0)
        return rc;
    size_t failed = SIZE_MAX;
    bool retried = false;
    rc = pom_batch_call(fs, q, 3, &failed, &retried);
    if (failed == 1 && pom_parent_missing(rc) && !dir) {
        struct xt_resp r;
        retried = false;
        rc = pom_call(fs, &q[0], &r, &retried);
        xt_resp_free(&r);
        failed = 0;
    }
    if (rc < 0 && retried && pom_name_holds(fs, parent, name, a->uuid) == 0)
        return 0; /* our first attempt was applied */
    if (failed == 1 && pom_parent_missing(rc))
        return -ENOENT;
    if (rc == -ENOENT && failed == 0)
        return -ESTALE; /* removed or replaced meanwhile: look again */
    return rc;
}

/* Removes the entry `name` of parent: dir true for rmdir. */
static int remove_entry(pom_fs *fs, pom_ino parent, const char *name, bool dir)
{
    int rc = xt_ns_name_check(name);
    if (rc == -EINVAL && name && strcmp(name, ".") == 0)
        return dir ? -EINVAL : -EISDIR;
    if (rc == -EINVAL && name && strcmp(name, "..") == 0)
        return dir ? -ENOTEMPTY : -EISDIR;
    if (rc < 0)
        return rc;
    if ((rc = pom_dir_check(fs, parent)) < 0)
        return rc;
    for (int attempt = 0; attempt < MAX_TRIES; attempt++) {
        pom_conflict_pause(attempt);
        struct xt_resp r;
        xt_row row;
        if ((rc = pom_row_get(fs, parent, name, POM_ROW_META, &r, &row)) < 0)
            return rc;
        xt_row_attr a = row.attr;
        xt_resp_free(&r);
        /* A file open here lives on in memory after its last name goes
         * (invariant 6): its xattrs are taken from the row deleted, read
         * with the version the delete is conditional on. */
        uint8_t *xg = NULL;
        uint32_t xlen = 0;
        bool keep_x = false;
        if (!dir && a.type == XT_ROW_REG && !(a.flags & XT_NS_ROW_F_LINKED) &&
            pom_ino_is_open(fs, a.uuid)) {
            if ((rc = pom_row_get(fs, parent, name, XT_CG_XATTR, &r, &row)) < 0)
                return rc;
            a = row.attr; /* changed meanwhile: the checks below see it */
            const xt_row_group *g = xt_row_view_group(&row, XT_CG_XATTR);
            xlen = g ? g->len : 0;
            if (xlen && (xg = xt_malloc(xlen)))
                memcpy(xg, g->ptr, xlen);
            xt_resp_free(&r);
            if (xlen && !xg)
                return -ENOMEM;
            keep_x = a.type == XT_ROW_REG && !(a.flags & XT_NS_ROW_F_LINKED);
            if (!keep_x) {
                xt_free(xg);
                xg = NULL;
            }
        }
        if (dir && a.type != XT_ROW_DIR)
            return -ENOTDIR;
        if (!dir && a.type == XT_ROW_DIR)
            return -EISDIR;
        if (dir && a.uuid == POM_ROOT_INO)
            return -EBUSY;
        if (!xt_ns_is_stub(&a) && (a.flags & XT_NS_ROW_F_FIXED)) {
            xt_free(xg); /* immutable, append-only (a stub: pom_unlink_stub) */
            return -EPERM;
        }
        if (a.flags & XT_NS_ROW_F_LINKED) {
            rc = pom_unlink_stub(fs, parent, name, &a);
            if (rc == -ESTALE)
                continue;
            return rc;
        }
        if (dir) {
            /* Not atomic with the delete below: an entry created in
             * between by another client is orphaned (docs/client.md). */
            int e = pom_dir_empty(fs, a.uuid);
            if (e < 0)
                return e;
            if (!e) {
                /* A local file system refuses the removal for the
                 * parent's flags before it looks into the directory. */
                unsigned fl = 0;
                if ((rc = pom_getflags(fs, parent, &fl)) < 0)
                    return rc;
                return fl & (FS_IMMUTABLE_FL | FS_APPEND_FL) ? -EPERM : -ENOTEMPTY;
            }
            rc = remove_batch(fs, parent, name, &a);
            if (rc == -ESTALE)
                continue;
            if (rc < 0)
                return rc;
            pom_ino_unlinked(fs, &a);
            return 0;
        }
        rc = remove_batch(fs, parent, name, &a);
        if (rc < 0) {
            xt_free(xg);
            if (rc == -ESTALE)
                continue;
            return rc;
        }
        if (keep_x) /* before it is marked: an orphan always has its xattrs */
            pom_ino_keep_xattrs(fs, a.uuid, xg, xlen);
        pom_ino_unlinked(fs, &a); /* its only name: the file is gone */
        pom_data_gone(fs, &a); /* its tracts too (blob tier; after the row) */
        return 0;
    }
    return -EAGAIN;
}

int pom_unlink(pom_fs *fs, pom_ino parent, const char *name)
{
    return remove_entry(fs, parent, name, false);
}

int pom_rmdir(pom_fs *fs, pom_ino parent, const char *name)
{
    return remove_entry(fs, parent, name, true);
}

int pom_access(pom_fs *fs, pom_ino ino, int mask, const struct pom_cred *cred)
{
    struct stat st;
    int rc = pom_getattr(fs, ino, &st);
    if (rc < 0 || mask == F_OK)
        return rc;
    struct pom_cred c;
    pom_cred_or_self(cred, &c);
    if (c.uid == 0) {
        /* root: everything but executing a file nobody may execute */
        if ((mask & X_OK) && !S_ISDIR(st.st_mode) && !(st.st_mode & 0111))
            return -EACCES;
        return 0;
    }
    mode_t bits;
    if (c.uid == st.st_uid)
        bits = (st.st_mode >> 6) & 7;
    else if (c.gid == st.st_gid)
        bits = (st.st_mode >> 3) & 7;
    else
        bits = st.st_mode & 7;
    if (((mask & R_OK) && !(bits & 4)) || ((mask & W_OK) && !(bits & 2)) ||
        ((mask & X_OK) && !(bits & 1)))
        return -EACCES;
    return 0;
}

int pom_readdir(pom_fs *fs, pom_ino ino, uint64_t cookie, int plus, pom_dirent_fn fn,
                void *arg)
{
    static const uint16_t none[1] = { 0 };
    int rc = pom_dir_check(fs, ino);
    if (rc < 0)
        return rc;
    int taken = 0;
    while (cookie < POM_COOKIE_END) {
        struct xt_list_req lq = { .t = { .fsid = fs->fsid, .table = ino, .slice_hint = -1 },
                                  .cookie = cookie, .max = 128, .cols = none, .ncols = 0 };
        struct xt_list_resp lr;
        uint64_t since = pom_ino_seq(fs);
        rc = pom_list_call(fs, &lq, &lr);
        if (rc == -ENOENT)
            return taken; /* the table was never created: no entry yet */
        if (rc < 0)
            return rc;
        bool stop = false;
        for (size_t i = 0; i < lr.n && !stop; i++) {
            xt_row row;
            if (xt_row_decode_meta(lr.rows[i], lr.lens[i], &row) < 0 ||
                row.name_len > XT_NAME_MAX) {
                XT_ERR("readdir of %llu: a row does not decode: %s",
                       (unsigned long long)ino, xt_row_last_error());
                rc = -EIO;
                break;
            }
            char name[XT_NAME_MAX + 1];
            memcpy(name, row.name, row.name_len);
            name[row.name_len] = '\0';
            struct stat st;
            pom_row_stat(&row.attr, &st);
            uint64_t where = ino;
            const char *wname = name;
            char in[XT_NS_ID_LEN + 1];
            if (plus && (row.attr.flags & XT_NS_ROW_F_LINKED)) {
                /* A link stub: its attributes are in the ILT (one more
                 * call, for linked files only). Gone meanwhile: skip it. */
                struct xt_resp ir;
                xt_row irow;
                memset(&ir, 0, sizeof ir);
                int frc = pom_stub_follow(fs, row.attr.uuid, POM_ROW_META, &ir, &irow);
                if (frc == -ENOENT) {
                    cookie = lr.cookies[i] + 1;
                    continue;
                }
                if (frc < 0) {
                    rc = frc;
                    break;
                }
                pom_row_stat(&irow.attr, &st);
                xt_resp_free(&ir);
                xt_ns_id_name(row.attr.uuid, in);
                where = XT_NS_TABLE_ILT;
                wname = in;
            }
            /* A flush of this file here ended after the page was read:
             * its size in the row may be older; read the name again. */
            struct named at;
            if (plus && pom_ino_stat_fix(fs, st.st_ino, &st, since) == -EAGAIN) {
                if ((rc = stat_named(fs, ino, name, &st, &at)) == -ENOENT) {
                    rc = 0; /* gone meanwhile: skip it */
                    cookie = lr.cookies[i] + 1;
                    continue;
                }
                if (rc < 0)
                    break;
                where = at.table;
                wname = at.name;
                row.attr.type = at.type;
            }
            int cr = fn(arg, name, &st, lr.cookies[i] + 1);
            if (cr < 0) {
                rc = cr;
                break;
            }
            if (cr > 0) {
                stop = true;
                break;
            }
            if (plus && (rc = pom_ino_ref(fs, st.st_ino, where, wname, row.attr.type, 1)) < 0)
                break;
            taken++;
            cookie = lr.cookies[i] + 1;
        }
        uint64_t next = lr.next_cookie;
        size_t n = lr.n;
        xt_list_resp_free(&lr);
        if (rc < 0)
            return rc;
        /* A page is one slice's range: an empty one (its names moved
         * away, or only system rows left) is not the end -- the end is
         * POM_COOKIE_END. Stopping there cut listings short (names
         * missing after renames out of a split directory). */
        if (stop || (n == 0 && next <= cookie))
            break;
        cookie = next;
    }
    return taken;
}

/* ---- directory handles ------------------------------------------------ */

struct pom_dir {
    pom_fs *fs;
    pom_ino ino;        /* pinned by a lookup reference (pom_errseq.c invariant 5) */
    uint64_t sample;    /* pom_errseq.c invariant (4) */
};

int pom_opendir(pom_fs *fs, pom_ino dir, pom_dir **out)
{
    *out = NULL;
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    uint8_t type;
    int rc = pom_ino_where(fs, dir, &table, name, &type);
    if (rc == 0 && type != XT_ROW_DIR)
        rc = -ENOTDIR;
    pom_dir *d = rc == 0 ? xt_calloc(1, sizeof *d) : NULL;
    if (rc == 0 && !d)
        rc = -ENOMEM;
    if (rc == 0 && (rc = pom_ino_ref(fs, dir, table, name, type, 1)) < 0)
        xt_free(d);
    if (rc < 0)
        return rc;
    d->fs = fs;
    d->ino = dir;
    d->sample = pom_es_sample(fs, dir);
    *out = d;
    return 0;
}

int pom_fsyncdir(pom_dir *d)
{
    int rc = pom_gone_sync(d->fs);
    return rc < 0 ? rc : pom_es_check(d->fs, d->ino, &d->sample);
}

void pom_releasedir(pom_dir *d)
{
    if (!d)
        return;
    pom_ino_forget(d->fs, d->ino, 1);
    xt_free(d);
}
