/*
 * pomfs_ops.c -- the FUSE low-level operations of pomfs, each a thin call
 * into libpomegranate; errors are converted once here
 * (fuse_reply_err(req, -rc)).
 *
 * Invariants:
 *  (1) Every request is replied to exactly once, on the thread that runs it.
 *  (2) Lookup counts: every entry reply (lookup, mknod, mkdir, symlink,
 *      create) and every non-dot readdirplus entry that fits the reply
 *      buffer carries one library reference; forget gives them back. A
 *      failed entry reply gives its reference back at once.
 *  (3) readdir offsets: 0 is the start, 1 follows `.`, 2 follows `..`, and
 *      an entry's offset is its library cookie (< 2^62) + 2, so offsets
 *      fit off_t and resume exactly after the entry.
 *  (4) Locks (flock, POSIX) are not implemented here on purpose: the kernel
 *      then keeps them locally on this mount (docs/client.md).
 *  (5) Export support: a file handle is (inode, generation). Inodes are
 *      uuids, never reused, so the generation is a constant (1; the root's
 *      0). A handle whose inode the kernel no longer has comes back as
 *      LOOKUP(ino, ".") and its parent as LOOKUP(ino, ".."), answered by
 *      pom_lookup_ino / pom_lookup_parent through the GDT: every inode
 *      that still has a name is found again (also after a remount); a
 *      removed one answers ESTALE (docs/client.md "Lookup by uuid").
 *  (6) An O_DIRECT write drops the kernel's cached pages of its range after
 *      the bytes are stored and before it is answered: a buffered read that
 *      raced with it (an asynchronous direct write gets no invalidation
 *      from the kernel when it completes) cannot keep the old bytes. Only
 *      a write the kernel sent from its direct path, which holds no page
 *      lock: the flags of a write are the file's at sending time, so a
 *      buffered write (its pages locked until the answer) carries O_DIRECT
 *      when fcntl set it meanwhile, and dropping its pages would wait for
 *      itself (generic/036). The direct path names a lock owner
 *      (FUSE_WRITE_LOCKOWNER, fi->lock_owner != 0), the buffered one none.
 *  (7) POSIX ACLs (docs/client.md "POSIX ACLs"): with FUSE_CAP_POSIX_ACL
 *      the kernel checks permissions against the ACL xattrs it reads
 *      through getxattr (and caches), and hands setfacl's changes over
 *      as setxattr/removexattr; the library keeps the mode and the
 *      access ACL in agreement and gives new entries their directory's
 *      default ACL. FUSE_CAP_DONT_MASK goes with it: the kernel passes
 *      the umask on, which the library applies only where no default
 *      ACL masks the mode. Setting an access ACL by a caller outside the
 *      file's group clears S_ISGID (acl_kill_sgid).
 */
#include "pomfs_i.h"

#include "xt_common.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h> /* FS_IOC_*FLAGS, FS_IOC_FS*XATTR, FS_IOC_GETFSLABEL */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h> /* RENAME_NOREPLACE, RENAME_EXCHANGE, RENAME_WHITEOUT */
#include <string.h>
#include <time.h>

#define DOTS 2

#define POMFS_OP_NAME(name) #name,
const char *const pomfs_op_names[POMFS_OP__COUNT] = { POMFS_OPS(POMFS_OP_NAME) };
#undef POMFS_OP_NAME

/* TIMED(req, op) opens an operation: its latency is recorded when the
 * function returns (the cleanup attribute), after its reply. The struct
 * pomfs is taken first: req is gone once replied to. */
struct op_timer {
    struct xt_metrics_hist *h;
    uint64_t t0;
};

/* The monotonic clock in ns (xt_time's is private to libpomegranate). */
static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void op_timer_done(struct op_timer *t)
{
    xt_metrics_hist_record(t->h, mono_ns() - t->t0);
}

#define TIMED(req, op)                                                                    \
    struct op_timer op_timer_ __attribute__((cleanup(op_timer_done))) = {                 \
        &((struct pomfs *)fuse_req_userdata(req))->op_hist[POMFS_OP_##op], mono_ns()    \
    }

static struct pomfs *P(fuse_req_t req)
{
    return fuse_req_userdata(req);
}

static struct pom_cred cred_of(fuse_req_t req)
{
    const struct fuse_ctx *c = fuse_req_ctx(req);
    /* The umask comes with mknod, mkdir and create (FUSE_CAP_DONT_MASK:
     * the library applies it unless a default ACL masks the mode). */
    struct pom_cred cr = { c->uid, c->gid, (uint32_t)c->umask };
    return cr;
}

static void reply_entry(fuse_req_t req, int rc, const struct stat *st)
{
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    assert(st->st_ino != 0); /* 0 tells the kernel "no such name" */
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = st->st_ino;
    /* Invariant (5): a uuid is never reused, so one generation serves for
     * ever; the root's is 0, as the kernel made its root inode. */
    e.generation = st->st_ino == FUSE_ROOT_ID ? 0 : 1;
    e.attr = *st;
    e.attr_timeout = P(req)->attr_timeout;
    e.entry_timeout = P(req)->entry_timeout;
    if (fuse_reply_entry(req, &e) != 0)
        pom_forget(P(req)->fs, st->st_ino, 1); /* invariant (2) */
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    /* Tiny-file bytes are buffered by the library until flush; the kernel
     * writeback cache would hide writes from it. */
    conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    if (conn->capable & FUSE_CAP_READDIRPLUS)
        conn->want |= FUSE_CAP_READDIRPLUS;
    /* File handles (name_to_handle_at, NFS re-export) that outlive the
     * kernel's inode or the mount: the kernel then asks LOOKUP(ino, ".")
     * and LOOKUP(ino, ".."), which find inodes by uuid (invariant 5). */
    if (conn->capable & FUSE_CAP_EXPORT_SUPPORT)
        conn->want |= FUSE_CAP_EXPORT_SUPPORT;
    /* Inode flags of directories too (chattr +i DIR): the kernel sends
     * FS_IOC_GETFLAGS/SETFLAGS of a directory only with this (op_ioctl). */
    if (conn->capable & FUSE_CAP_IOCTL_DIR)
        conn->want |= FUSE_CAP_IOCTL_DIR;
    /* Invariant (7). */
    if ((conn->capable & FUSE_CAP_POSIX_ACL) && (conn->capable & FUSE_CAP_DONT_MASK))
        conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
    /* Large files go straight to their tracts: 1 MiB write requests (the
     * most libfuse's buffer and the kernel's default max_pages take), an
     * eighth of the requests of 128 KiB ones. Readahead can only be
     * lowered from the kernel's offer (its bdi readahead, 128 KiB). */
    conn->max_write = 1u << 20;
    conn->max_readahead = 1u << 20;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    TIMED(req, lookup);
    struct stat st;
    pom_fs *fs = P(req)->fs;
    /* "." and ".." come only with export support (invariant 5), for an
     * inode this mount may never have seen: found by uuid (the GDT). */
    int rc = strcmp(name, ".") == 0    ? pom_lookup_ino(fs, parent, &st)
             : strcmp(name, "..") == 0 ? pom_lookup_parent(fs, parent, &st)
                                       : pom_lookup(fs, parent, name, &st);
    reply_entry(req, rc, &st);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
    TIMED(req, forget);
    pom_forget(P(req)->fs, ino, n);
    fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
    TIMED(req, forget); /* one sample per batch */
    for (size_t i = 0; i < count; i++)
        pom_forget(P(req)->fs, f[i].ino, f[i].nlookup);
    fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(req, getattr);
    (void)fi;
    struct stat st;
    int rc = pom_getattr(P(req)->fs, ino, &st);
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_attr(req, &st, P(req)->attr_timeout);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    TIMED(req, setattr);
    (void)fi; /* an open file's buffer is found by inode */
    struct stat st;
    /* A bit we do not know is refused before anything changes: never claim
     * it was done. */
    int rc = pom_setattr(P(req)->fs, ino, attr, to_set & ~FUSE_SET_ATTR_FORCE, &st);
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_attr(req, &st, P(req)->attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    TIMED(req, readlink);
    char buf[PATH_MAX + 1];
    ssize_t n = pom_readlink(P(req)->fs, ino, buf, sizeof buf);
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_readlink(req, buf);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                     dev_t rdev)
{
    TIMED(req, mknod);
    struct pom_cred c = cred_of(req);
    struct stat st;
    reply_entry(req, pom_mknod(P(req)->fs, parent, name, mode, rdev, &c, &st), &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    TIMED(req, mkdir);
    struct pom_cred c = cred_of(req);
    struct stat st;
    reply_entry(req, pom_mkdir(P(req)->fs, parent, name, mode, &c, &st), &st);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    TIMED(req, symlink);
    struct pom_cred c = cred_of(req);
    struct stat st;
    reply_entry(req, pom_symlink(P(req)->fs, parent, name, link, &c, &st), &st);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    TIMED(req, unlink);
    fuse_reply_err(req, -pom_unlink(P(req)->fs, parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    TIMED(req, rmdir);
    fuse_reply_err(req, -pom_rmdir(P(req)->fs, parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                      fuse_ino_t newparent, const char *newname, unsigned int flags)
{
    TIMED(req, rename);
    unsigned pf = 0;
    if (flags & RENAME_NOREPLACE)
        pf |= POM_RENAME_NOREPLACE;
    if (flags & RENAME_EXCHANGE)
        pf |= POM_RENAME_EXCHANGE;
    if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if (flags & RENAME_WHITEOUT) { /* the kernel asked CAP_MKNOD */
        struct pom_cred c = cred_of(req); /* the whiteout's owner */
        fuse_reply_err(req, -pom_rename_whiteout(P(req)->fs, parent, name, newparent, newname,
                                                 pf, &c));
        return;
    }
    fuse_reply_err(req, -pom_rename(P(req)->fs, parent, name, newparent, newname, pf));
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    TIMED(req, link);
    struct stat st;
    int rc = pom_link(P(req)->fs, ino, newparent, newname, &st);
    reply_entry(req, rc, &st);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(req, open);
    pom_file *f;
    int rc = pom_file_open(P(req)->fs, ino, fi->flags, &f);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    assert(f != NULL);
    fi->fh = (uintptr_t)f;
    /* Close-to-open: the open read the row again; cached pages are kept
     * only when it shows the file as this mount last saw it. */
    fi->keep_cache = pom_file_unchanged(f) ? 1 : 0;
    /* Changed: the kernel's cached size is stale too; a short read under
     * it would read as zeros. Attributes only (offset -1) take no inode
     * lock, so this is safe inside the open. */
    if (!fi->keep_cache)
        fuse_lowlevel_notify_inval_inode(P(req)->se, ino, -1, 0);
    if (fuse_reply_open(req, fi) != 0)
        pom_release(f);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                      struct fuse_file_info *fi)
{
    TIMED(req, create);
    struct pom_cred c = cred_of(req);
    struct stat st;
    pom_file *f;
    int rc = pom_create(P(req)->fs, parent, name, mode, fi->flags, &c, &st, &f);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    assert(f != NULL && st.st_ino != 0);
    fi->fh = (uintptr_t)f;
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = st.st_ino;
    e.generation = 1;
    e.attr = st;
    e.attr_timeout = P(req)->attr_timeout;
    e.entry_timeout = P(req)->entry_timeout;
    if (fuse_reply_create(req, &e, fi) != 0) {
        pom_release(f);
        pom_forget(P(req)->fs, st.st_ino, 1);
    }
}

static pom_file *FH(struct fuse_file_info *fi)
{
    assert(fi && fi->fh); /* set by op_open/op_create before any file call */
    return (pom_file *)(uintptr_t)fi->fh;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    TIMED(req, read);
    (void)ino;
    char *buf = xt_malloc(size ? size : 1);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    ssize_t n = pom_read(FH(fi), buf, size, off);
    assert(n < 0 || (size_t)n <= size);
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
    xt_free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    TIMED(req, write);
    ssize_t n = pom_write(FH(fi), buf, size, off);
    assert(n < 0 || (size_t)n <= size);
    /* Invariant (6). Dropping pages waits for reads that hold them locked,
     * which another request thread answers; the single-threaded loop (-s)
     * cannot, so there an asynchronous direct write may leave stale pages
     * (docs/client.md "pomfs"). Appends drop every page (the offset the
     * library wrote at is not known here). */
    if (n > 0 && (fi->flags & O_DIRECT) && fi->lock_owner != 0 && P(req)->threaded) {
        bool append = (fi->flags & O_APPEND) != 0;
        fuse_lowlevel_notify_inval_inode(P(req)->se, ino, append ? 0 : off,
                                         append ? 0 : (off_t)n);
    }
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else
        fuse_reply_write(req, (size_t)n);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(req, flush);
    (void)ino;
    fuse_reply_err(req, -pom_flush(FH(fi)));
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(req, release);
    (void)ino;
    fuse_reply_err(req, -pom_release(FH(fi)));
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    TIMED(req, fsync);
    (void)ino;
    fuse_reply_err(req, -pom_fsync(FH(fi), datasync));
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(req, opendir);
    struct stat st;
    int rc = pom_getattr(P(req)->fs, ino, &st);
    if (rc == 0 && !S_ISDIR(st.st_mode))
        rc = -ENOTDIR;
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    pom_dir *d;
    if ((rc = pom_opendir(P(req)->fs, ino, &d)) < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    assert(d != NULL);
    fi->fh = (uintptr_t)d; /* what its fsync reports (lost changes) */
    if (fuse_reply_open(req, fi) != 0)
        pom_releasedir(d);
}

struct dirbuf {
    fuse_req_t req;
    char *buf;
    size_t size, used;
    int plus;
};

/* Adds one entry; returns 1 (stop, not taken) when it does not fit. */
static int dir_add(struct dirbuf *b, const char *name, const struct stat *st, off_t next)
{
    assert(b->used <= b->size);
    assert(next > 0); /* invariant (3): 0 is the start, never an entry's next */
    size_t room = b->size - b->used, need;
    if (b->plus) {
        struct fuse_entry_param e;
        memset(&e, 0, sizeof e);
        e.attr = *st;
        bool dot = strcmp(name, ".") == 0 || strcmp(name, "..") == 0;
        /* Dot entries take no lookup reference (the kernel links none). */
        e.ino = dot ? 0 : st->st_ino;
        e.generation = 1;
        e.attr_timeout = P(b->req)->attr_timeout;
        e.entry_timeout = P(b->req)->entry_timeout;
        need = fuse_add_direntry_plus(b->req, b->buf + b->used, room, name, &e, next);
    } else {
        need = fuse_add_direntry(b->req, b->buf + b->used, room, name, st, next);
    }
    if (need > room)
        return 1;
    b->used += need;
    assert(b->used <= b->size);
    return 0;
}

static int dir_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    /* Invariant (3): a cookie fits off_t after the dots. */
    assert(next <= POM_COOKIE_END);
    return dir_add(arg, name, st, (off_t)(next + DOTS));
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, int plus)
{
    struct dirbuf b = { req, xt_malloc(size ? size : 1), size, 0, plus };
    if (!b.buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    pom_fs *fs = P(req)->fs;
    int rc = 0;
    struct stat st;
    memset(&st, 0, sizeof st);
    st.st_mode = S_IFDIR;
    if (off == 0) {
        if (plus && (rc = pom_getattr(fs, ino, &st)) < 0)
            goto out;
        st.st_ino = ino;
        if (dir_add(&b, ".", &st, 1))
            goto out;
        off = 1;
    }
    if (off == 1) {
        pom_ino parent = ino;
        if ((rc = pom_parent(fs, ino, &parent)) < 0)
            goto out;
        if (plus && (rc = pom_getattr(fs, parent, &st)) < 0)
            goto out;
        st.st_ino = parent;
        st.st_mode |= S_IFDIR;
        if (dir_add(&b, "..", &st, 2))
            goto out;
        off = 2;
    }
    if ((uint64_t)off - DOTS < POM_COOKIE_END)
        rc = pom_readdir(fs, ino, (uint64_t)off - DOTS, plus, dir_cb, &b);
out:
    if (rc < 0 && b.used == 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_buf(req, b.buf, b.used); /* an error after entries: return those */
    xt_free(b.buf);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    TIMED(req, readdir);
    (void)fi;
    do_readdir(req, ino, size, off, 0);
}

static void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    TIMED(req, readdirplus);
    (void)fi;
    do_readdir(req, ino, size, off, 1);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    TIMED(req, releasedir);
    (void)ino;
    assert(fi->fh); /* set by op_opendir */
    pom_releasedir((pom_dir *)(uintptr_t)fi->fh);
    fuse_reply_err(req, 0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    TIMED(req, fsyncdir);
    (void)ino;
    (void)datasync;
    fuse_reply_err(req, -pom_fsyncdir((pom_dir *)(uintptr_t)fi->fh));
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    TIMED(req, statfs);
    (void)ino;
    struct statvfs sv;
    int rc = pom_statfs(P(req)->fs, &sv);
    if (rc < 0)
        fuse_reply_err(req, -rc);
    else
        fuse_reply_statfs(req, &sv);
}

/* Whether the caller is in group gid (its own or a supplementary one). */
static bool in_group(fuse_req_t req, gid_t gid)
{
    if (fuse_req_ctx(req)->gid == gid)
        return true;
    gid_t groups[64];
    int n = fuse_req_getgroups(req, 64, groups);
    for (int i = 0; i < n && i < 64; i++)
        if (groups[i] == gid)
            return true;
    return false;
}

/* Invariant (7): setting an access ACL by a caller outside the file's group
 * clears S_ISGID, as the kernel's posix_acl_update_mode does for a local
 * file system (the kernel's flag saying so, FUSE_SETXATTR_ACL_KILL_SGID,
 * does not reach a libfuse 3.14 file system). Root counts as CAP_FSETID. */
static int acl_kill_sgid(fuse_req_t req, fuse_ino_t ino)
{
    struct stat st;
    int rc = pom_getattr(P(req)->fs, ino, &st);
    if (rc < 0 || !(st.st_mode & S_ISGID) || fuse_req_ctx(req)->uid == 0 ||
        in_group(req, st.st_gid))
        return rc;
    st.st_mode &= ~(mode_t)S_ISGID;
    return pom_setattr(P(req)->fs, ino, &st, POM_SET_MODE, NULL);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                        size_t size, int flags)
{
    TIMED(req, setxattr);
    /* The kernel passes any mix of XATTR_CREATE and XATTR_REPLACE on; the
     * library refuses both together (-EINVAL). */
    int rc = pom_setxattr(P(req)->fs, ino, name, value, size, flags);
    if (rc == 0 && strcmp(name, "system.posix_acl_access") == 0)
        rc = acl_kill_sgid(req, ino);
    fuse_reply_err(req, -rc);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    TIMED(req, getxattr);
    char *buf = size ? xt_malloc(size) : NULL;
    if (size && !buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    ssize_t n = pom_getxattr(P(req)->fs, ino, name, buf, size);
    assert(n < 0 || size == 0 || (size_t)n <= size); /* else -ERANGE */
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else if (size == 0)
        fuse_reply_xattr(req, (size_t)n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
    xt_free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    TIMED(req, listxattr);
    char *buf = size ? xt_malloc(size) : NULL;
    if (size && !buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    ssize_t n = pom_listxattr(P(req)->fs, ino, buf, size);
    assert(n < 0 || size == 0 || (size_t)n <= size); /* else -ERANGE */
    if (n < 0)
        fuse_reply_err(req, (int)-n);
    else if (size == 0)
        fuse_reply_xattr(req, (size_t)n);
    else
        fuse_reply_buf(req, buf, (size_t)n);
    xt_free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    TIMED(req, removexattr);
    fuse_reply_err(req, -pom_removexattr(P(req)->fs, ino, name));
}

static void op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    TIMED(req, access);
    struct pom_cred c = cred_of(req);
    fuse_reply_err(req, -pom_access(P(req)->fs, ino, mask, &c));
}

/* A change of a file's bytes by a caller without CAP_FSETID (root stands
 * for it) drops the set-user-ID bit, and the set-group-ID bit when the
 * group may execute or the caller is outside the file's group (the
 * kernel's setattr_should_drop_sgid; generic/683-685). The kernel does
 * this itself before a FUSE write, but before a FUSE fallocate only by the
 * older rule (the bit stays on a file its group may not execute), so the
 * rest is done here, before the change, as for a write. */
static int drop_setid(fuse_req_t req, fuse_ino_t ino)
{
    if (fuse_req_ctx(req)->uid == 0)
        return 0;
    pom_fs *fs = P(req)->fs;
    struct stat st;
    int rc = pom_getattr(fs, ino, &st);
    if (rc < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & (S_ISUID | S_ISGID)))
        return rc;
    mode_t kill = st.st_mode & S_ISUID;
    if ((st.st_mode & S_ISGID) && ((st.st_mode & S_IXGRP) || !in_group(req, st.st_gid)))
        kill |= S_ISGID;
    if (!kill)
        return 0;
    st.st_mode &= ~kill;
    rc = pom_setattr(fs, ino, &st, POM_SET_MODE, NULL);
    if (rc == 0) /* attributes only: no lock (the kernel holds the inode's) */
        fuse_lowlevel_notify_inval_inode(P(req)->se, ino, -1, 0);
    return rc;
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                         struct fuse_file_info *fi)
{
    TIMED(req, fallocate);
    int rc = drop_setid(req, ino);
    fuse_reply_err(req, -(rc < 0 ? rc : pom_fallocate(FH(fi), mode, off, len)));
}

/* FS_XFLAG_* (xfs_io's chattr) <-> FS_*_FL (chattr(1)) for the flags kept. */
static const struct { unsigned xflag, flag; } xflag_map[] = {
    { FS_XFLAG_IMMUTABLE, FS_IMMUTABLE_FL }, { FS_XFLAG_APPEND, FS_APPEND_FL },
    { FS_XFLAG_NODUMP, FS_NODUMP_FL },       { FS_XFLAG_NOATIME, FS_NOATIME_FL },
};

/* The inode flag ioctls and the label. The kernel answers
 * FS_IOC_GETFLAGS/SETFLAGS and FS_IOC_FSGETXATTR/FSSETXATTR itself
 * (fileattr) and asks the file system with these commands and 4 /
 * sizeof(struct fsxattr) bytes, after checking ownership and
 * CAP_LINUX_IMMUTABLE for the immutable and append-only flags.
 * FS_IOC_GETFSLABEL (FSLABEL_MAX bytes out, on any file or directory of
 * the mount) answers the fs name; the label cannot be set (the fs name is
 * its R2 key). Every other ioctl is ENOTTY. FS_IOC_FIEMAP never comes
 * here: the kernel answers it (docs/client.md "Not built"). */
static void op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
                     struct fuse_file_info *fi, unsigned flags, const void *in_buf,
                     size_t in_bufsz, size_t out_bufsz)
{
    TIMED(req, ioctl);
    (void)arg;
    (void)fi; /* the flags are the inode's, found by ino */
    (void)flags;
    pom_fs *fs = P(req)->fs;
    unsigned fl = 0;
    int rc;
    struct fsxattr fa;
    switch (cmd) {
    case FS_IOC_GETFSLABEL: {
        char label[FSLABEL_MAX] = { 0 };
        if (out_bufsz < sizeof label) {
            fuse_reply_err(req, EINVAL);
            return;
        }
        snprintf(label, sizeof label, "%s", P(req)->label);
        fuse_reply_ioctl(req, 0, label, sizeof label);
        return;
    }
    case FS_IOC_GETFLAGS:
    case FS_IOC_FSGETXATTR:
        if (out_bufsz < (cmd == FS_IOC_GETFLAGS ? sizeof(int) : sizeof fa)) {
            fuse_reply_err(req, EINVAL);
            return;
        }
        if ((rc = pom_getflags(fs, ino, &fl)) < 0) {
            fuse_reply_err(req, -rc);
            return;
        }
        if (cmd == FS_IOC_GETFLAGS) {
            fuse_reply_ioctl(req, 0, &fl, sizeof(int));
            return;
        }
        memset(&fa, 0, sizeof fa);
        for (size_t k = 0; k < sizeof xflag_map / sizeof xflag_map[0]; k++)
            if (fl & xflag_map[k].flag)
                fa.fsx_xflags |= xflag_map[k].xflag;
        fuse_reply_ioctl(req, 0, &fa, sizeof fa);
        return;
    case FS_IOC_SETFLAGS:
        if (in_bufsz < sizeof(int)) {
            fuse_reply_err(req, EINVAL);
            return;
        }
        memcpy(&fl, in_buf, sizeof(int));
        break;
    case FS_IOC_FSSETXATTR:
        if (in_bufsz < sizeof fa) {
            fuse_reply_err(req, EINVAL);
            return;
        }
        memcpy(&fa, in_buf, sizeof fa);
        for (size_t k = 0; k < sizeof xflag_map / sizeof xflag_map[0]; k++)
            if (fa.fsx_xflags & xflag_map[k].xflag) {
                fl |= xflag_map[k].flag;
                fa.fsx_xflags &= ~xflag_map[k].xflag;
            }
        /* Extent sizes, project ids, other flags: not kept, so refused. */
        if (fa.fsx_xflags || fa.fsx_extsize || fa.fsx_projid || fa.fsx_cowextsize) {
            fuse_reply_err(req, EOPNOTSUPP);
            return;
        }
        break;
    default:
        fuse_reply_err(req, ENOTTY);
        return;
    }
    rc = pom_setflags(fs, ino, fl);
    if (rc < 0) {
        fuse_reply_err(req, -rc);
        return;
    }
    /* The change moved the ctime; the kernel would show the cached one
     * for up to attr_timeout (generic/277). Attributes only: no lock. */
    fuse_lowlevel_notify_inval_inode(P(req)->se, ino, -1, 0);
    fuse_reply_ioctl(req, 0, NULL, 0);
}

const struct fuse_lowlevel_ops pomfs_ops = {
    .init = op_init,
    .lookup = op_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = op_mknod,
    .mkdir = op_mkdir,
    .symlink = op_symlink,
    .unlink = op_unlink,
    .rmdir = op_rmdir,
    .rename = op_rename,
    .link = op_link,
    .open = op_open,
    .create = op_create,
    .read = op_read,
    .write = op_write,
    .flush = op_flush,
    .release = op_release,
    .fsync = op_fsync,
    .opendir = op_opendir,
    .readdir = op_readdir,
    .readdirplus = op_readdirplus,
    .releasedir = op_releasedir,
    .fsyncdir = op_fsyncdir,
    .statfs = op_statfs,
    .setxattr = op_setxattr,
    .getxattr = op_getxattr,
    .listxattr = op_listxattr,
    .removexattr = op_removexattr,
    .access = op_access,
    .fallocate = op_fallocate,
    .ioctl = op_ioctl,
};
