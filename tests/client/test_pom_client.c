/*
 * test_pom_client.c -- the public API of libpomegranate (client/include/
 * pomegranate.h) against real pom-mdsl + pom-mds processes on loopback,
 * as LevelDB's c_test.c tests its C API:
 *   - root, mkdir/mknod/symlink/lookup/getattr, name limits (255/256);
 *   - tiny files: 0 B, 1 B, 4 KiB, 64 KiB written, read back from a fresh
 *     connection; 64 KiB + 1 -> a short write, then -EFBIG; O_TRUNC,
 *     O_APPEND, shared buffer of two handles, an unlinked open file;
 *   - setattr (chmod, chown, utimens, truncate down/up with zero fill);
 *   - unlink/rmdir errors (EISDIR, ENOTDIR, ENOTEMPTY), link -> EPERM;
 *   - rename within and across directories, over a file, NOREPLACE,
 *     EXCHANGE with NOREPLACE -> EINVAL, a directory under itself -> EINVAL, file over
 *     directory -> EISDIR, over a non-empty directory -> ENOTEMPTY;
 *   - xattrs (create/replace/list/remove, unknown namespace, CREATE|REPLACE);
 *   - inode flags: immutable and append-only refuse (EPERM) what chattr(1)
 *     says, on a file open before the flag too, on every name of a
 *     hard-linked file, on a directory's name; kept for a fresh connection;
 *   - POSIX ACLs: malformed values -EINVAL, a default ACL on a file
 *     -EACCES; the access ACL sets the mode (not stored when the mode says
 *     it all); chmod changes its mask; a default ACL is inherited by new
 *     entries (files: access ACL; directories: both) and masks the mode
 *     instead of cred.umask, which applies without one;
 *   - a file open here whose last name was unlinked: truncate, chmod,
 *     chown, utimens and the four xattr calls work on it (xattrs set before,
 *     by another client too, are kept), a failed truncate changes nothing,
 *     nothing is visible to another client, -ENOENT after the last
 *     release; a blob-tier file truncated down and up while unlinked, its
 *     tracts gone at the last release;
 *   - readdir of 1,500 entries resumed at random points (seeded): every
 *     entry exactly once, references taken in plus mode;
 *   - two connections creating at once never share a uuid;
 *   - a create (file, directory, symlink, open-create) in a directory
 *     another client removed answers -ENOENT and leaves nothing behind (the
 *     create and the parent's row are one batch); in a directory another
 *     client moved: creates answer -ENOENT (this client's map is stale),
 *     unlink, link and the unlink of a link stub still do their job (only
 *     the parent's time update is dropped), and after a fresh lookup
 *     creates work again;
 *   - SIGKILL of pom-mds: what pom_fsync acknowledged is there after the
 *     restart, and the same handle goes on working (it waits for the MDS);
 *     changes acknowledged and lost with it answer -EIO once to every
 *     handle covering them (files, directory, keyspace, pom_sync), 0 to
 *     the others (test_lost_changes);
 *   - countdown allocation failure over create/write/release/unlink: every
 *     call returns 0 or -ENOMEM, never crashes or leaks (ASan).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h> /* makedev */
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "pom_cluster.h"
#include "pom_proc.h"
#include "pomegranate.h"
#include "xt_common.h"

#define FSID 7

static struct pom_cluster C;

static int group_setup(void **state)
{
    (void)state;
    if (pom_cluster_up(&C, "client", POM_MDSL_BIN, POM_MDS_BIN))
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    pom_cluster_destroy(&C);
    return 0;
}

static pom_fs *conn(void)
{
    pom_fs *fs = NULL;
    assert_int_equal(pom_connect_mds(C.mds_addr, FSID, &fs), 0);
    return fs;
}

/* A fresh directory under the root for one test. */
static pom_ino fresh_dir(pom_fs *fs, const char *name)
{
    struct stat st;
    assert_int_equal(pom_mkdir(fs, POM_ROOT_INO, name, 0755, NULL, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    return st.st_ino;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 8)) & 0xff);
}

static void write_file(pom_fs *fs, pom_ino dir, const char *name, const uint8_t *data, size_t n)
{
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, name, 0644, O_WRONLY | O_CREAT | O_EXCL, NULL, &st, &f),
                     0);
    if (n)
        assert_int_equal(pom_write(f, data, n, 0), (ssize_t)n);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, st.st_ino, 1);
}

static void check_file(pom_fs *fs, pom_ino dir, const char *name, const uint8_t *data, size_t n)
{
    struct stat st;
    assert_int_equal(pom_lookup(fs, dir, name, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, n);
    pom_file *f;
    assert_int_equal(pom_file_open(fs, st.st_ino, O_RDONLY, &f), 0);
    uint8_t *buf = malloc(n + 16);
    assert_int_equal(pom_read(f, buf, n + 16, 0), (ssize_t)n);
    if (n)
        assert_memory_equal(buf, data, n);
    assert_int_equal(pom_read(f, buf, 16, (off_t)n), 0);
    free(buf);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, st.st_ino, 1);
}

static void test_root_and_names(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    struct stat st;
    assert_int_equal(pom_getattr(fs, POM_ROOT_INO, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_ino, POM_ROOT_INO);
    pom_ino d = fresh_dir(fs, "names");
    char n255[256], n256[257];
    memset(n255, 'a', 255);
    n255[255] = 0;
    memset(n256, 'b', 256);
    n256[256] = 0;
    assert_int_equal(pom_mknod(fs, d, n255, S_IFREG | 0644, 0, NULL, &st), 0);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_lookup(fs, d, n255, &st), 0);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_mknod(fs, d, n256, S_IFREG | 0644, 0, NULL, &st), -ENAMETOOLONG);
    assert_int_equal(pom_lookup(fs, d, n256, &st), -ENAMETOOLONG);
    assert_int_equal(pom_mknod(fs, d, "", S_IFREG | 0644, 0, NULL, &st), -EINVAL);
    assert_int_equal(pom_mknod(fs, d, "a/b", S_IFREG | 0644, 0, NULL, &st), -EINVAL);
    assert_int_equal(pom_lookup(fs, d, "missing", &st), -ENOENT);
    assert_int_equal(pom_mknod(fs, d, n255, S_IFREG | 0644, 0, NULL, &st), -EEXIST);
    /* A file is no directory. */
    assert_int_equal(pom_mknod(fs, d, "f", S_IFREG | 0600, 0, NULL, &st), 0);
    pom_ino f = st.st_ino;
    assert_int_equal(pom_lookup(fs, f, "x", &st), -ENOTDIR);
    assert_int_equal(pom_mkdir(fs, f, "x", 0755, NULL, &st), -ENOTDIR);
    pom_forget(fs, f, 1);
    assert_int_equal(pom_getattr(fs, UINT64_C(0xdead0000dead), &st), -ESTALE);
    /* fifos, sockets, devices, and what mknod refuses */
    assert_int_equal(pom_mknod(fs, d, "fifo", S_IFIFO | 0600, 0, NULL, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_mknod(fs, d, "dir", S_IFDIR | 0755, 0, NULL, &st), -EINVAL);
    /* A device's number is in its row's attributes: a lookup gives it. */
    assert_int_equal(pom_mknod(fs, d, "null", S_IFCHR | 0666, makedev(1, 3), NULL, &st), 0);
    assert_true(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_mknod(fs, d, "loop", S_IFBLK | 0600, makedev(7, 300), NULL, &st), 0);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_lookup(fs, d, "null", &st), 0);
    assert_int_equal(st.st_rdev, makedev(1, 3));
    assert_int_equal(st.st_size, 0);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_lookup(fs, d, "loop", &st), 0);
    assert_true(S_ISBLK(st.st_mode) && st.st_rdev == makedev(7, 300));
    pom_forget(fs, st.st_ino, 1);
    struct pom_cred cr = { 1234, 5678, 0 };
    assert_int_equal(pom_mkdir(fs, d, "owned", 0750, &cr, &st), 0);
    assert_int_equal(st.st_uid, 1234);
    assert_int_equal(st.st_gid, 5678);
    assert_int_equal(st.st_mode, S_IFDIR | 0750);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_link(fs, d, POM_ROOT_INO, "hard", &st), -EPERM);
    /* No R2 listens there: the error says so. */
    assert_int_equal(pom_open("127.0.0.1:1", "x", &(pom_fs *){ NULL }), -ECONNREFUSED);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

static void test_tiny_files(void **state)
{
    (void)state;
    static uint8_t data[POM_INLINE_MAX + 1];
    static const size_t sizes[] = { 0, 1, 4096, POM_INLINE_MAX };
    fill(data, sizeof data, 3);
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "tiny");
    char name[32];
    for (size_t i = 0; i < XT_ARRAY_SIZE(sizes); i++) {
        snprintf(name, sizeof name, "f%zu", sizes[i]);
        write_file(fs, d, name, data, sizes[i]);
        check_file(fs, d, name, data, sizes[i]);
    }
    /* From a second connection: the bytes came from the MDS. */
    pom_fs *fs2 = conn();
    struct stat st;
    assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "tiny", &st), 0);
    for (size_t i = 0; i < XT_ARRAY_SIZE(sizes); i++) {
        snprintf(name, sizeof name, "f%zu", sizes[i]);
        check_file(fs2, st.st_ino, name, data, sizes[i]);
    }
    pom_forget(fs2, st.st_ino, 1);
    pom_close(fs2);

    /* Past the inline limit: a short write, then EFBIG. */
    pom_file *f;
    assert_int_equal(pom_create(fs, d, "big", 0644, O_RDWR | O_CREAT, NULL, &st, &f), 0);
    assert_int_equal(pom_write(f, data, POM_INLINE_MAX + 1, 0), POM_INLINE_MAX);
    assert_int_equal(pom_write(f, data, 1, POM_INLINE_MAX), -EFBIG);
    /* Sparse write: the hole reads as zeros; getattr sees the buffer. */
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_create(fs, d, "sparse", 0644, O_RDWR | O_CREAT, NULL, &st, &f), 0);
    assert_int_equal(pom_write(f, "xy", 2, 100), 2);
    struct stat st2;
    assert_int_equal(pom_getattr(fs, st.st_ino, &st2), 0);
    assert_int_equal(st2.st_size, 102);
    uint8_t buf[128];
    assert_int_equal(pom_read(f, buf, sizeof buf, 0), 102);
    for (int i = 0; i < 100; i++)
        assert_int_equal(buf[i], 0);
    assert_memory_equal(buf + 100, "xy", 2);
    /* A second handle shares the buffer; O_APPEND appends; O_TRUNC cuts. */
    pom_file *g;
    assert_int_equal(pom_file_open(fs, st.st_ino, O_WRONLY | O_APPEND, &g), 0);
    assert_int_equal(pom_write(g, "z", 1, 0), 1);
    assert_int_equal(pom_read(f, buf, sizeof buf, 100), 3);
    assert_memory_equal(buf, "xyz", 3);
    assert_int_equal(pom_read(g, buf, 1, 0), -EBADF);
    assert_int_equal(pom_release(g), 0);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(pom_file_open(fs, st.st_ino, O_RDWR | O_TRUNC, &f), 0);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(pom_getattr(fs, st.st_ino, &st2), 0);
    assert_int_equal(st2.st_size, 0);
    /* An open file whose name goes away stays readable until release. */
    assert_int_equal(pom_file_open(fs, st.st_ino, O_RDWR, &f), 0);
    assert_int_equal(pom_write(f, "live", 4, 0), 4);
    assert_int_equal(pom_unlink(fs, d, "sparse"), 0);
    assert_int_equal(pom_read(f, buf, 4, 0), 4);
    assert_int_equal(pom_getattr(fs, st.st_ino, &st2), 0);
    assert_int_equal(st2.st_nlink, 0);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(pom_lookup(fs, d, "sparse", &st2), -ENOENT);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_getattr(fs, st.st_ino, &st2), -ESTALE);
    /* Directories and symlinks are not opened as files. */
    assert_int_equal(pom_file_open(fs, d, O_RDONLY, &f), -EISDIR);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

static void test_setattr(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "attrs");
    uint8_t data[5000];
    fill(data, sizeof data, 9);
    write_file(fs, d, "f", data, sizeof data);
    struct stat st, in, out;
    assert_int_equal(pom_lookup(fs, d, "f", &st), 0);
    memset(&in, 0, sizeof in);
    in.st_mode = 04711;
    assert_int_equal(pom_setattr(fs, st.st_ino, &in, POM_SET_MODE, &out), 0);
    assert_int_equal(out.st_mode, S_IFREG | 04711);
    in.st_uid = 42;
    in.st_gid = 43;
    assert_int_equal(pom_setattr(fs, st.st_ino, &in, POM_SET_UID | POM_SET_GID, &out), 0);
    assert_int_equal(out.st_uid, 42);
    assert_int_equal(out.st_gid, 43);
    in.st_atim.tv_sec = 1000000000;
    in.st_atim.tv_nsec = 5;
    in.st_mtim.tv_sec = 1200000000;
    in.st_mtim.tv_nsec = 7;
    assert_int_equal(pom_setattr(fs, st.st_ino, &in, POM_SET_ATIME | POM_SET_MTIME, &out), 0);
    assert_int_equal(out.st_atim.tv_sec, 1000000000);
    assert_int_equal(out.st_atim.tv_nsec, 5);
    assert_int_equal(out.st_mtim.tv_sec, 1200000000);
    assert_int_equal(out.st_mtim.tv_nsec, 7);
    assert_true(out.st_ctim.tv_sec > 1600000000);
    /* truncate down, then up: the new bytes are zeros */
    in.st_size = 100;
    assert_int_equal(pom_setattr(fs, st.st_ino, &in, POM_SET_SIZE, &out), 0);
    assert_int_equal(out.st_size, 100);
    in.st_size = 300;
    assert_int_equal(pom_setattr(fs, st.st_ino, &in, POM_SET_SIZE, &out), 0);
    uint8_t want[300];
    memcpy(want, data, 100);
    memset(want + 100, 0, 200);
    check_file(fs, d, "f", want, 300);
    in.st_size = POM_INLINE_MAX + 1;
    /* No blob tier on this connection (test_pom_blob_client has one). */
    assert_int_equal(pom_setattr(fs, st.st_ino, &in, POM_SET_SIZE, &out), -EFBIG);
    assert_int_equal(pom_setattr(fs, d, &in, POM_SET_SIZE, &out), -EISDIR); /* type first */
    in.st_size = 1;
    assert_int_equal(pom_setattr(fs, d, &in, POM_SET_SIZE, &out), -EISDIR);
    assert_int_equal(pom_setattr(fs, st.st_ino, &in, 1 << 20, &out), -ENOTSUP);
    /* truncate of an open file goes through its buffer */
    pom_file *f;
    assert_int_equal(pom_file_open(fs, st.st_ino, O_RDWR, &f), 0);
    in.st_size = 10;
    assert_int_equal(pom_setattr(fs, st.st_ino, &in, POM_SET_SIZE, &out), 0);
    assert_int_equal(out.st_size, 10);
    uint8_t buf[20];
    assert_int_equal(pom_read(f, buf, 20, 0), 10);
    assert_int_equal(pom_release(f), 0);
    check_file(fs, d, "f", want, 10);
    /* access(2) for an unprivileged credential */
    struct pom_cred owner = { 42, 43, 0 }, other = { 7, 7, 0 };
    assert_int_equal(pom_access(fs, st.st_ino, R_OK | W_OK | X_OK, &owner), 0);
    assert_int_equal(pom_access(fs, st.st_ino, R_OK, &other), -EACCES);
    assert_int_equal(pom_access(fs, st.st_ino, X_OK, &other), 0);
    pom_forget(fs, st.st_ino, 1);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

static void test_remove_and_rename(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "ren");
    struct stat st;
    assert_int_equal(pom_mkdir(fs, d, "a", 0755, NULL, &st), 0);
    pom_ino a = st.st_ino;
    assert_int_equal(pom_mkdir(fs, d, "b", 0755, NULL, &st), 0);
    pom_ino b = st.st_ino;
    uint8_t x[10] = "0123456789", y[3] = "abc";
    write_file(fs, a, "x", x, sizeof x);
    write_file(fs, a, "y", y, sizeof y);
    /* remove errors */
    assert_int_equal(pom_unlink(fs, d, "a"), -EISDIR);
    assert_int_equal(pom_rmdir(fs, a, "x"), -ENOTDIR);
    assert_int_equal(pom_rmdir(fs, d, "a"), -ENOTEMPTY);
    assert_int_equal(pom_unlink(fs, d, "nope"), -ENOENT);
    /* same directory */
    assert_int_equal(pom_rename(fs, a, "x", a, "x2", 0), 0);
    assert_int_equal(pom_lookup(fs, a, "x", &st), -ENOENT);
    check_file(fs, a, "x2", x, sizeof x);
    /* over an existing file: y is replaced by x2's content */
    assert_int_equal(pom_rename(fs, a, "x2", a, "y", POM_RENAME_NOREPLACE), -EEXIST);
    assert_int_equal(pom_rename(fs, a, "x2", a, "y", POM_RENAME_EXCHANGE | POM_RENAME_NOREPLACE),
                     -EINVAL);
    assert_int_equal(pom_rename(fs, a, "x2", a, "y", 0), 0);
    check_file(fs, a, "y", x, sizeof x);
    assert_int_equal(pom_lookup(fs, a, "x2", &st), -ENOENT);
    /* across directories, keeping the inode */
    assert_int_equal(pom_lookup(fs, a, "y", &st), 0);
    pom_ino yino = st.st_ino;
    assert_int_equal(pom_rename(fs, a, "y", b, "moved", 0), 0);
    struct stat st2;
    assert_int_equal(pom_getattr(fs, yino, &st2), 0); /* the map followed it */
    assert_int_equal(pom_lookup(fs, b, "moved", &st2), 0);
    assert_int_equal(st2.st_ino, yino);
    pom_forget(fs, yino, 2);
    check_file(fs, b, "moved", x, sizeof x);
    /* directory rules */
    assert_int_equal(pom_mkdir(fs, a, "sub", 0755, NULL, &st), 0);
    pom_ino sub = st.st_ino;
    assert_int_equal(pom_rename(fs, d, "a", sub, "loop", 0), -EINVAL);
    assert_int_equal(pom_rename(fs, b, "moved", d, "a", 0), -EISDIR);
    write_file(fs, sub, "inside", x, 1);
    assert_int_equal(pom_rename(fs, d, "b", a, "sub", 0), -ENOTEMPTY); /* target not empty */
    assert_int_equal(pom_unlink(fs, sub, "inside"), 0);
    assert_int_equal(pom_unlink(fs, b, "moved"), 0);
    assert_int_equal(pom_rename(fs, d, "b", a, "sub", 0), 0); /* empty: replaced */
    /* The replaced directory, still referenced: its last attributes, with
     * no link (fstat of an open removed directory, generic/035). */
    assert_int_equal(pom_getattr(fs, sub, &st), 0);
    assert_true(S_ISDIR(st.st_mode) && st.st_ino == sub && st.st_nlink == 0);
    assert_int_equal(pom_lookup(fs, a, "sub", &st), 0);
    assert_int_equal(st.st_ino, b);
    pom_forget(fs, b, 1);
    mode_t m = st.st_mode;
    assert_true(S_ISDIR(m));
    assert_int_equal(pom_rmdir(fs, a, "sub"), 0);
    assert_int_equal(pom_rmdir(fs, d, "a"), 0);
    assert_int_equal(pom_rmdir(fs, POM_ROOT_INO, "ren"), 0);
    assert_int_equal(pom_lookup(fs, POM_ROOT_INO, "ren", &st), -ENOENT);
    pom_forget(fs, sub, 1);
    pom_forget(fs, a, 1);
    pom_forget(fs, b, 1);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

/* Inode flags (pom_getflags/pom_setflags, chattr's FS_*_FL): immutable
 * and append-only are enforced on files (also when set while open, and
 * through a hard link's other name), on a directory's own name and on its
 * entries (no entry added to or removed from an immutable directory, none
 * removed from an append-only one); kept in the row, seen by a fresh
 * connection. */
static void test_inode_flags(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "iflags");
    struct stat st, in;
    memset(&in, 0, sizeof in);
    pom_file *f, *w;
    uint8_t x[4] = "data";
    write_file(fs, d, "imm", x, sizeof x);
    assert_int_equal(pom_lookup(fs, d, "imm", &st), 0);
    pom_ino imm = st.st_ino;
    assert_int_equal(pom_file_open(fs, imm, O_WRONLY, &w), 0); /* a writer before +i */
    unsigned fl = 1;
    assert_int_equal(pom_getflags(fs, imm, &fl), 0);
    assert_int_equal(fl, 0);
    assert_int_equal(pom_setflags(fs, imm, 0x1000), -EOPNOTSUPP); /* FS_DIRSYNC_FL */
    assert_int_equal(pom_setflags(fs, imm, 0x10 | 0x40), 0);      /* i, d */
    assert_int_equal(pom_getflags(fs, imm, &fl), 0);
    assert_int_equal(fl, 0x50);
    assert_int_equal(pom_write(w, "x", 1, 0), -EPERM);
    assert_int_equal(pom_fallocate(w, 0, 0, 100), -EPERM);
    assert_int_equal(pom_release(w), 0);
    assert_int_equal(pom_file_open(fs, imm, O_RDWR, &f), -EPERM);
    assert_int_equal(pom_file_open(fs, imm, O_RDONLY, &f), 0);
    assert_int_equal(pom_release(f), 0);
    in.st_mode = 0600;
    assert_int_equal(pom_setattr(fs, imm, &in, POM_SET_MODE, NULL), -EPERM);
    assert_int_equal(pom_setattr(fs, imm, &in, POM_SET_SIZE, NULL), -EPERM);
    assert_int_equal(pom_setattr(fs, imm, &in, POM_SET_MTIME_NOW, NULL), -EPERM);
    assert_int_equal(pom_setxattr(fs, imm, "user.a", "1", 1, 0), -EPERM);
    assert_int_equal(pom_unlink(fs, d, "imm"), -EPERM);
    assert_int_equal(pom_rename(fs, d, "imm", d, "other", 0), -EPERM);
    assert_int_equal(pom_link(fs, imm, d, "imm2", &st), -EPERM);
    write_file(fs, d, "victim", x, sizeof x);
    assert_int_equal(pom_rename(fs, d, "victim", d, "imm", 0), -EPERM); /* over it */
    /* A hard-linked file: the flags are its ILT row's, every name obeys. */
    write_file(fs, d, "lnk", x, sizeof x);
    assert_int_equal(pom_lookup(fs, d, "lnk", &st), 0);
    pom_ino lnk = st.st_ino;
    assert_int_equal(pom_link(fs, lnk, d, "lnk2", &st), 0);
    assert_int_equal(pom_setflags(fs, lnk, 0x20), 0); /* a */
    assert_int_equal(pom_unlink(fs, d, "lnk2"), -EPERM);
    assert_int_equal(pom_rename(fs, d, "lnk", d, "moved", 0), -EPERM);
    assert_int_equal(pom_file_open(fs, lnk, O_WRONLY, &f), -EPERM);
    assert_int_equal(pom_file_open(fs, lnk, O_WRONLY | O_APPEND | O_TRUNC, &f), -EPERM);
    assert_int_equal(pom_file_open(fs, lnk, O_WRONLY | O_APPEND, &f), 0);
    assert_int_equal(pom_write(f, "more", 4, 0), 4); /* at the end */
    assert_int_equal(pom_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1), -EPERM);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(pom_setattr(fs, lnk, &in, POM_SET_ATIME_NOW | POM_SET_MTIME_NOW, NULL), 0);
    /* utime(NULL) through FUSE: each time with its _NOW bit */
    assert_int_equal(pom_setattr(fs, lnk, &in,
                                 POM_SET_ATIME | POM_SET_ATIME_NOW | POM_SET_MTIME |
                                     POM_SET_MTIME_NOW,
                                 NULL),
                     0);
    assert_int_equal(pom_setattr(fs, lnk, &in, POM_SET_MTIME, NULL), -EPERM);
    assert_int_equal(pom_setattr(fs, lnk, &in, POM_SET_MODE, NULL), -EPERM);
    /* A directory's own name, and its entries (generic/079: the MDS
     * checks the directory's flags, so another connection obeys too). */
    assert_int_equal(pom_mkdir(fs, d, "sub", 0755, NULL, &st), 0);
    pom_ino sub = st.st_ino;
    assert_int_equal(pom_mkdir(fs, sub, "dd", 0755, NULL, &st), 0);
    pom_ino dd = st.st_ino;
    write_file(fs, sub, "f", x, sizeof x);
    assert_int_equal(pom_lookup(fs, d, "victim", &st), 0);
    pom_ino victim = st.st_ino;
    assert_int_equal(pom_setflags(fs, sub, 0x10), 0);
    assert_int_equal(pom_rmdir(fs, d, "sub"), -EPERM);
    assert_int_equal(pom_mknod(fs, sub, "n", S_IFREG | 0644, 0, NULL, &st), -EPERM);
    assert_int_equal(pom_mkdir(fs, sub, "n", 0755, NULL, &st), -EPERM);
    assert_int_equal(pom_symlink(fs, sub, "n", "f", NULL, &st), -EPERM);
    assert_int_equal(pom_link(fs, victim, sub, "n", &st), -EPERM);
    assert_int_equal(pom_rename(fs, d, "victim", sub, "n", 0), -EPERM);
    assert_int_equal(pom_unlink(fs, sub, "f"), -EPERM);
    assert_int_equal(pom_rmdir(fs, sub, "dd"), -EPERM);
    write_file(fs, dd, "in", x, sizeof x); /* (dd itself has no flag) */
    assert_int_equal(pom_rmdir(fs, sub, "dd"), -EPERM); /* EPERM before ENOTEMPTY */
    assert_int_equal(pom_rename(fs, sub, "f", d, "n", 0), -EPERM);
    assert_int_equal(pom_rename(fs, sub, "f", sub, "n", 0), -EPERM);
    assert_int_equal(pom_lookup(fs, sub, "n", &st), -ENOENT);
    assert_int_equal(pom_lookup(fs, d, "n", &st), -ENOENT);
    assert_int_equal(pom_setflags(fs, sub, 0x20), 0); /* a: additions only */
    assert_int_equal(pom_mknod(fs, sub, "n", S_IFREG | 0644, 0, NULL, &st), 0);
    pom_ino n = st.st_ino;
    assert_int_equal(pom_unlink(fs, sub, "n"), -EPERM);
    assert_int_equal(pom_unlink(fs, sub, "f"), -EPERM);
    assert_int_equal(pom_rmdir(fs, sub, "dd"), -EPERM);
    assert_int_equal(pom_rename(fs, sub, "f", sub, "g", 0), -EPERM);
    assert_int_equal(pom_rename(fs, sub, "n", sub, "f", 0), -EPERM); /* over f */
    assert_int_equal(pom_rename(fs, sub, "f", d, "g", 0), -EPERM);
    /* Kept in the rows: a fresh connection sees and obeys them. */
    pom_fs *fs2 = conn();
    assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "iflags", &st), 0);
    pom_ino d2 = st.st_ino;
    assert_int_equal(pom_lookup(fs2, d2, "imm", &st), 0);
    assert_int_equal(pom_getflags(fs2, imm, &fl), 0);
    assert_int_equal(fl, 0x50);
    assert_int_equal(pom_unlink(fs2, d2, "imm"), -EPERM);
    assert_int_equal(pom_lookup(fs2, d2, "sub", &st), 0);
    pom_ino sub2 = st.st_ino;
    assert_int_equal(pom_unlink(fs2, sub2, "n"), -EPERM);
    assert_int_equal(pom_setflags(fs, sub, 0x10), 0); /* i, through the other connection */
    assert_int_equal(pom_mknod(fs2, sub2, "n2", S_IFREG | 0644, 0, NULL, &st), -EPERM);
    assert_int_equal(pom_lookup(fs2, d2, "lnk2", &st), 0);
    assert_int_equal(pom_getflags(fs2, lnk, &fl), 0);
    assert_int_equal(fl, 0x20);
    /* Cleared: everything works again. */
    assert_int_equal(pom_setflags(fs2, imm, 0), 0);
    assert_int_equal(pom_setflags(fs2, lnk, 0), 0);
    assert_int_equal(pom_setflags(fs, sub, 0), 0);
    assert_int_equal(pom_unlink(fs2, d2, "imm"), 0);
    assert_int_equal(pom_unlink(fs2, d2, "lnk2"), 0);
    assert_int_equal(pom_unlink(fs, sub, "n"), 0);
    assert_int_equal(pom_unlink(fs, sub, "f"), 0);
    assert_int_equal(pom_unlink(fs, dd, "in"), 0);
    assert_int_equal(pom_rmdir(fs, sub, "dd"), 0);
    assert_int_equal(pom_rmdir(fs, d, "sub"), 0);
    pom_forget(fs2, sub2, 1);
    pom_forget(fs, n, 1);
    pom_forget(fs, dd, 1);
    pom_forget(fs, victim, 1);
    pom_forget(fs2, imm, 1);
    pom_forget(fs2, lnk, 1);
    pom_forget(fs2, d2, 1);
    pom_close(fs2);
    pom_forget(fs, imm, 1);
    pom_forget(fs, lnk, 2);
    pom_forget(fs, sub, 1);
    pom_close(fs);
}

static void test_symlink_xattr(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "sx");
    struct stat st;
    assert_int_equal(pom_symlink(fs, d, "ln", "../some/target", NULL, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(st.st_size, 14);
    char buf[64];
    assert_int_equal(pom_readlink(fs, st.st_ino, buf, sizeof buf), 14);
    assert_string_equal(buf, "../some/target");
    assert_int_equal(pom_readlink(fs, st.st_ino, buf, 14), -ERANGE);
    assert_int_equal(pom_readlink(fs, d, buf, sizeof buf), -EINVAL);
    pom_forget(fs, st.st_ino, 1);
    char longt[POM_SYMLINK_MAX + 2];
    memset(longt, 't', sizeof longt - 1);
    longt[sizeof longt - 1] = 0;
    assert_int_equal(pom_symlink(fs, d, "ln2", longt, NULL, &st), -ENAMETOOLONG);

    pom_ino x = d;
    assert_int_equal(pom_listxattr(fs, x, NULL, 0), 0);
    assert_int_equal(pom_setxattr(fs, x, "user.a", "1", 1, 0), 0);
    assert_int_equal(pom_setxattr(fs, x, "user.b", "", 0, 0), 0);
    assert_int_equal(pom_setxattr(fs, x, "user.a", "22", 2, XATTR_CREATE), -EEXIST);
    assert_int_equal(pom_setxattr(fs, x, "user.c", "3", 1, XATTR_REPLACE), -ENODATA);
    /* Both flags contradict each other: -EINVAL whether the name exists
     * or not (the library's rule; pomfs passes the kernel's flags on). */
    assert_int_equal(pom_setxattr(fs, x, "user.a", "9", 1, XATTR_CREATE | XATTR_REPLACE),
                     -EINVAL);
    assert_int_equal(pom_setxattr(fs, x, "user.c", "9", 1, XATTR_CREATE | XATTR_REPLACE),
                     -EINVAL);
    assert_int_equal(pom_getxattr(fs, x, "user.c", NULL, 0), -ENODATA);
    assert_int_equal(pom_setxattr(fs, x, "user.a", "22", 2, XATTR_REPLACE), 0);
    assert_int_equal(pom_setxattr(fs, x, "system.posix_acl_access", "x", 1, 0), -EINVAL);
    assert_int_equal(pom_setxattr(fs, x, "system.other", "x", 1, 0), -ENOTSUP);
    assert_int_equal(pom_setxattr(fs, x, "nonamespace", "x", 1, 0), -ENOTSUP);
    assert_int_equal(pom_getxattr(fs, x, "user.a", NULL, 0), 2);
    assert_int_equal(pom_getxattr(fs, x, "user.a", buf, 1), -ERANGE);
    assert_int_equal(pom_getxattr(fs, x, "user.a", buf, sizeof buf), 2);
    assert_memory_equal(buf, "22", 2);
    assert_int_equal(pom_getxattr(fs, x, "user.b", buf, sizeof buf), 0);
    assert_int_equal(pom_getxattr(fs, x, "user.zz", buf, sizeof buf), -ENODATA);
    assert_int_equal(pom_listxattr(fs, x, NULL, 0), 14);
    assert_int_equal(pom_listxattr(fs, x, buf, sizeof buf), 14);
    assert_memory_equal(buf, "user.a\0user.b\0", 14);
    assert_int_equal(pom_listxattr(fs, x, buf, 3), -ERANGE);
    static char big[(64 << 10) + 1];
    assert_int_equal(pom_setxattr(fs, x, "user.big", big, sizeof big, 0), -E2BIG);
    assert_int_equal(pom_removexattr(fs, x, "user.a"), 0);
    assert_int_equal(pom_removexattr(fs, x, "user.a"), -ENODATA);
    assert_int_equal(pom_removexattr(fs, x, "user.b"), 0);
    assert_int_equal(pom_listxattr(fs, x, NULL, 0), 0);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

struct seen {
    uint8_t *hits;
    int n, stop_after, taken;
    pom_ino last;
    uint64_t next;
};

static int count_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    struct seen *s = arg;
    if (s->stop_after >= 0 && s->taken >= s->stop_after)
        return 1;
    int i = atoi(name + 1);
    assert_true(i >= 0 && i < s->n);
    s->hits[i]++;
    s->taken++;
    s->next = next;
    s->last = st->st_ino;
    return 0;
}

/* One ACL entry of the Linux xattr format (pom_acl_i.h), little endian. */
static size_t acl_put(uint8_t *p, size_t off, unsigned tag, unsigned perm, uint32_t id)
{
    uint8_t e[8] = { (uint8_t)tag, (uint8_t)(tag >> 8), (uint8_t)perm, 0, (uint8_t)id,
                     (uint8_t)(id >> 8), (uint8_t)(id >> 16), (uint8_t)(id >> 24) };
    memcpy(p + off, e, 8);
    return off + 8;
}

/* u::rwx, u:<uid>:<uperm>, g::r-x, m::<mask>, o::--- (or the base three
 * alone when uid is 0). */
static size_t acl_make(uint8_t *p, uint32_t uid, unsigned uperm, unsigned mask)
{
    memcpy(p, "\x02\0\0\0", 4);
    size_t n = acl_put(p, 4, 0x01, 7, UINT32_MAX);
    if (uid)
        n = acl_put(p, n, 0x02, uperm, uid);
    n = acl_put(p, n, 0x04, 5, UINT32_MAX);
    if (uid)
        n = acl_put(p, n, 0x10, mask, UINT32_MAX);
    return acl_put(p, n, 0x20, 0, UINT32_MAX);
}

static void test_acl(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "acl");
    struct pom_cred cr = { 1000, 1000, 022 };
    struct stat st, fst;
    uint8_t a[64], b[64];
    assert_int_equal(pom_mknod(fs, d, "f", S_IFREG | 0666, 0, &cr, &fst), 0);
    assert_int_equal(fst.st_mode & 07777, 0644); /* no default ACL: the umask */
    pom_ino f = fst.st_ino;
    /* Malformed values: short, a bad version, a bad tag, a perm bit too
     * many, no mask with a named user, out of order. */
    size_t n = acl_make(a, 4242, 6, 6);
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_access", a, 3, 0), -EINVAL);
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_access", a, n - 1, 0), -EINVAL);
    memcpy(b, a, n);
    b[0] = 1;
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_access", b, n, 0), -EINVAL);
    memcpy(b, a, n);
    b[12] = 0x40;
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_access", b, n, 0), -EINVAL);
    memcpy(b, a, n);
    b[6] = 8;
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_access", b, n, 0), -EINVAL);
    memcpy(b, a, n);
    memcpy(b + 28, b + 36, 8); /* the mask dropped: a named user without one */
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_access", b, n - 8, 0), -EINVAL);
    memcpy(b, a, 4);
    memcpy(b + 4, a + 20, 8); /* group_obj first */
    memcpy(b + 12, a + 4, 8);
    memcpy(b + 20, a + 36, 8);
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_access", b, 28, 0), -EINVAL);
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_default", a, n, 0), -EACCES);
    assert_int_equal(pom_getxattr(fs, f, "system.posix_acl_access", NULL, 0), -ENODATA);
    /* The access ACL sets the mode: group bits from the mask. */
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_access", a, n, 0), 0);
    assert_int_equal(pom_getattr(fs, f, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0760);
    assert_int_equal(pom_getxattr(fs, f, "system.posix_acl_access", b, sizeof b), (ssize_t)n);
    assert_memory_equal(a, b, n);
    /* chmod changes owner, mask and other entries. */
    struct stat in = { .st_mode = 0741 };
    assert_int_equal(pom_setattr(fs, f, &in, POM_SET_MODE, &st), 0);
    assert_int_equal(pom_getxattr(fs, f, "system.posix_acl_access", b, sizeof b), (ssize_t)n);
    assert_int_equal(b[6], 7);  /* user_obj */
    assert_int_equal(b[14], 6); /* the named user: kept */
    assert_int_equal(b[22], 5); /* group_obj: kept (the mask stands for it) */
    assert_int_equal(b[30], 4); /* mask */
    assert_int_equal(b[38], 1); /* other */
    /* An ACL the mode says all of replaces the stored one by the mode. */
    size_t n3 = acl_make(b, 0, 0, 0);
    assert_int_equal(pom_setxattr(fs, f, "system.posix_acl_access", b, n3, 0), 0);
    assert_int_equal(pom_getattr(fs, f, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0750);
    assert_int_equal(pom_getxattr(fs, f, "system.posix_acl_access", NULL, 0), -ENODATA);
    pom_forget(fs, f, 1);

    /* Inheritance: the default ACL masks the mode, not the umask. */
    assert_int_equal(pom_setxattr(fs, d, "system.posix_acl_default", a, n, 0), 0);
    cr.umask = 077;
    assert_int_equal(pom_mknod(fs, d, "g", S_IFREG | 0666, 0, &cr, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0660);
    assert_int_equal(pom_getxattr(fs, st.st_ino, "system.posix_acl_access", b, sizeof b),
                     (ssize_t)n);
    assert_int_equal(b[6], 6);  /* user_obj rwx & rw- */
    assert_int_equal(b[30], 6); /* mask rw- & rw- */
    assert_int_equal(pom_getxattr(fs, st.st_ino, "system.posix_acl_default", NULL, 0),
                     -ENODATA);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_mkdir(fs, d, "sub", 0777, &cr, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0760);
    assert_int_equal(pom_getxattr(fs, st.st_ino, "system.posix_acl_default", b, sizeof b),
                     (ssize_t)n);
    assert_memory_equal(a, b, n);
    pom_forget(fs, st.st_ino, 1);
    pom_file *h;
    assert_int_equal(pom_create(fs, d, "h", 0640, O_WRONLY | O_CREAT, &cr, &st, &h), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    /* Its open state has the inherited ACL: renamed over while open, it
     * still answers it. */
    struct stat st2;
    assert_int_equal(pom_mknod(fs, d, "h2", S_IFREG | 0600, 0, &cr, &st2), 0);
    pom_forget(fs, st2.st_ino, 1);
    assert_int_equal(pom_rename(fs, d, "h2", d, "h", 0), 0);
    assert_int_equal(pom_getxattr(fs, st.st_ino, "system.posix_acl_access", NULL, 0),
                     (ssize_t)n);
    assert_int_equal(pom_release(h), 0);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_symlink(fs, d, "ln", "h", &cr, &st), 0);
    assert_int_equal(pom_getxattr(fs, st.st_ino, "system.posix_acl_access", NULL, 0), -ENODATA);
    pom_forget(fs, st.st_ino, 1);
    /* Removed: the umask again (the kept default ACL is not used). */
    assert_int_equal(pom_removexattr(fs, d, "system.posix_acl_default"), 0);
    assert_int_equal(pom_mknod(fs, d, "k", S_IFREG | 0666, 0, &cr, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    pom_forget(fs, st.st_ino, 1);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

static void expect_xattr(pom_fs *fs, pom_ino ino, const char *name, const char *value)
{
    char buf[64];
    size_t n = strlen(value);
    assert_int_equal(pom_getxattr(fs, ino, name, NULL, 0), (ssize_t)n);
    assert_int_equal(pom_getxattr(fs, ino, name, buf, sizeof buf), (ssize_t)n);
    assert_memory_equal(buf, value, n);
}

static int nfiles;
static int count_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)path;
    (void)sb;
    (void)ftw;
    nfiles += type == FTW_F;
    return 0;
}

/* Regular files under dir (the blob tier's tract files). */
static int files_under(const char *dir)
{
    nfiles = 0;
    assert_int_equal(nftw(dir, count_one, 16, FTW_PHYS), 0);
    return nfiles;
}

/* An open file whose last name was unlinked lives on in this client only:
 * setattr and xattr calls change it there (docs/client.md). */
static void test_unlinked_open(void **state)
{
    (void)state;
    pom_fs *fs = conn(), *fs2 = conn();
    pom_ino d = fresh_dir(fs, "orphans");
    struct stat st, st2, in;
    pom_file *f, *g;
    uint8_t data[100];
    memset(data, 'x', sizeof data);
    assert_int_equal(pom_create(fs, d, "f", 0644, O_RDWR | O_CREAT, NULL, &st, &f), 0);
    pom_ino ino = st.st_ino;
    assert_int_equal(pom_write(f, data, sizeof data, 0), 100);
    assert_int_equal(pom_setxattr(fs, ino, "user.before", "b", 1, 0), 0);
    /* Another client's xattr while open here: read again at the unlink. */
    assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "orphans", &st2), 0);
    assert_int_equal(pom_lookup(fs2, d, "f", &st2), 0);
    assert_int_equal(pom_setxattr(fs2, ino, "user.other", "o", 1, 0), 0);
    pom_forget(fs2, ino, 1);
    assert_int_equal(pom_file_open(fs, ino, O_RDONLY, &g), 0);
    assert_int_equal(pom_unlink(fs, d, "f"), 0);

    memset(&in, 0, sizeof in);
    in.st_size = 50;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_SIZE, &st2), 0);
    assert_int_equal(st2.st_size, 50);
    assert_int_equal(st2.st_nlink, 0);
    in.st_mode = 0600;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_MODE, &st2), 0);
    assert_int_equal(st2.st_mode, S_IFREG | 0600);
    in.st_uid = 1234;
    in.st_gid = 4321;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_UID | POM_SET_GID, NULL), 0);
    in.st_mtim.tv_sec = 1000000;
    in.st_mtim.tv_nsec = 5;
    in.st_atim.tv_sec = 2000000;
    in.st_atim.tv_nsec = 7;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_MTIME | POM_SET_ATIME, NULL), 0);
    assert_int_equal(pom_getattr(fs, ino, &st2), 0);
    assert_int_equal(st2.st_size, 50);
    assert_int_equal(st2.st_mode, S_IFREG | 0600);
    assert_int_equal(st2.st_uid, 1234);
    assert_int_equal(st2.st_gid, 4321);
    assert_int_equal(st2.st_mtim.tv_sec, 1000000);
    assert_int_equal(st2.st_mtim.tv_nsec, 5);
    assert_int_equal(st2.st_atim.tv_sec, 2000000);
    assert_true(st2.st_ctim.tv_sec > 2000000); /* now */
    uint8_t buf[128];
    assert_int_equal(pom_read(g, buf, sizeof buf, 0), 50);
    /* A size past the inline limit without a blob tier fails and changes
     * nothing, not even the other attributes asked for with it. */
    in.st_size = POM_INLINE_MAX + 1;
    in.st_mode = 0640;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_SIZE | POM_SET_MODE, NULL), -EFBIG);
    assert_int_equal(pom_getattr(fs, ino, &st2), 0);
    assert_int_equal(st2.st_size, 50);
    assert_int_equal(st2.st_mode, S_IFREG | 0600);

    /* xattrs: those from before (both clients'), and new ones. */
    expect_xattr(fs, ino, "user.before", "b");
    expect_xattr(fs, ino, "user.other", "o");
    assert_int_equal(pom_setxattr(fs, ino, "user.a", "1", 1, 0), 0);
    assert_int_equal(pom_setxattr(fs, ino, "user.a", "2", 1, XATTR_CREATE), -EEXIST);
    assert_int_equal(pom_setxattr(fs, ino, "user.new", "2", 1, XATTR_REPLACE), -ENODATA);
    assert_int_equal(pom_setxattr(fs, ino, "system.x", "2", 1, 0), -ENOTSUP);
    expect_xattr(fs, ino, "user.a", "1");
    char list[128];
    static const char want[] = "user.before\0user.other\0user.a";
    ssize_t n = pom_listxattr(fs, ino, NULL, 0);
    assert_int_equal(n, (ssize_t)sizeof want);
    assert_int_equal(pom_listxattr(fs, ino, list, 4), -ERANGE);
    assert_int_equal(pom_listxattr(fs, ino, list, sizeof list), n);
    for (const char *w = want; w < want + sizeof want; w += strlen(w) + 1) {
        bool found = false;
        for (const char *l = list; l < list + n; l += strlen(l) + 1)
            found |= strcmp(l, w) == 0;
        assert_true(found);
    }
    assert_int_equal(pom_removexattr(fs, ino, "user.before"), 0);
    assert_int_equal(pom_removexattr(fs, ino, "user.before"), -ENODATA);
    assert_int_equal(pom_getxattr(fs, ino, "user.before", buf, sizeof buf), -ENODATA);
    assert_int_equal(pom_getxattr(fs, ino, "user.a", buf, 0), 1);

    /* Nothing of it reaches the MDS: the other client sees no entry. */
    assert_int_equal(pom_lookup(fs2, d, "f", &st2), -ENOENT);
    /* The first handle goes; the second still has it all. */
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(pom_getattr(fs, ino, &st2), 0);
    assert_int_equal(st2.st_mode, S_IFREG | 0600);
    expect_xattr(fs, ino, "user.a", "1");
    in.st_size = 7;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_SIZE, &st2), 0);
    assert_int_equal(st2.st_size, 7);
    assert_int_equal(pom_release(g), 0);
    /* Known (a lookup reference) but no longer open: it is gone. */
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_MODE, NULL), -ENOENT);
    assert_int_equal(pom_getxattr(fs, ino, "user.a", buf, sizeof buf), -ENOENT);
    assert_int_equal(pom_setxattr(fs, ino, "user.a", "1", 1, 0), -ENOENT);
    assert_int_equal(pom_getattr(fs, ino, &st2), -ENOENT);
    pom_forget(fs, ino, 1);

    /* Its last name replaced by a rename (pom_link.c): the xattrs it had
     * at open plus this client's changes since are still there. */
    assert_int_equal(pom_create(fs, d, "v", 0644, O_RDWR | O_CREAT, NULL, &st, &f), 0);
    ino = st.st_ino;
    assert_int_equal(pom_setxattr(fs, ino, "user.v", "v", 1, 0), 0);
    assert_int_equal(pom_create(fs, d, "w", 0644, O_RDWR | O_CREAT, NULL, &st2, &g), 0);
    assert_int_equal(pom_release(g), 0);
    pom_forget(fs, st2.st_ino, 1);
    assert_int_equal(pom_rename(fs, d, "w", d, "v", 0), 0);
    expect_xattr(fs, ino, "user.v", "v");
    in.st_mode = 0604;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_MODE, &st2), 0);
    assert_int_equal(st2.st_mode, S_IFREG | 0604);
    assert_int_equal(st2.st_nlink, 0);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, ino, 1);
    assert_int_equal(pom_unlink(fs, d, "v"), 0);

    /* A large file (blob tier): truncated down and up while unlinked. */
    char blobdir[300];
    snprintf(blobdir, sizeof blobdir, "%s/orphan-blobs", C.base);
    assert_int_equal(mkdir(blobdir, 0700), 0);
    pom_fs *fb = conn();
    assert_int_equal(pom_set_blob(fb, "local", blobdir), 0);
    assert_int_equal(pom_lookup(fb, POM_ROOT_INO, "orphans", &st2), 0);
    size_t big = 200 * 1024;
    uint8_t *bd = malloc(big), *rb = malloc(big);
    fill(bd, big, 11);
    assert_int_equal(pom_create(fb, d, "big", 0644, O_RDWR | O_CREAT, NULL, &st, &f), 0);
    ino = st.st_ino;
    assert_int_equal(pom_write(f, bd, big, 0), (ssize_t)big);
    assert_int_equal(pom_setxattr(fb, ino, "user.big", "B", 1, 0), 0);
    assert_int_equal(pom_flush(f), 0);
    assert_true(files_under(blobdir) > 0);
    assert_int_equal(pom_unlink(fb, d, "big"), 0);
    assert_true(files_under(blobdir) > 0); /* kept until the last release */
    in.st_size = 100 * 1024;
    assert_int_equal(pom_setattr(fb, ino, &in, POM_SET_SIZE, &st2), 0);
    assert_int_equal(st2.st_size, 100 * 1024);
    in.st_size = 300 * 1024;
    assert_int_equal(pom_setattr(fb, ino, &in, POM_SET_SIZE, &st2), 0);
    assert_int_equal(st2.st_size, 300 * 1024);
    assert_int_equal(pom_read(f, rb, 100 * 1024, 0), 100 * 1024);
    assert_memory_equal(rb, bd, 100 * 1024);
    assert_int_equal(pom_read(f, rb, 4096, 150 * 1024), 4096);
    for (int i = 0; i < 4096; i++)
        assert_int_equal(rb[i], 0); /* cut, then zeros: not the old bytes */
    expect_xattr(fb, ino, "user.big", "B");
    assert_int_equal(pom_release(f), 0);
    assert_true(files_under(blobdir) > 0); /* until the removal is committed */
    assert_int_equal(pom_sync(fb), 0);
    assert_int_equal(files_under(blobdir), 0);
    pom_forget(fb, ino, 1);
    free(bd);
    free(rb);
    pom_close(fb);

    pom_forget(fs, d, 1);
    pom_close(fs2);
    pom_close(fs);
}

static void test_readdir(void **state)
{
    (void)state;
    const int n = 1500;
    unsigned seed = (unsigned)time(NULL);
    print_message("test_readdir seed %u\n", seed);
    srand(seed);
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "many");
    struct seen s = { calloc((size_t)n, 1), n, -1, 0, 0, 0 };
    /* empty directory: nothing, not an error */
    assert_int_equal(pom_readdir(fs, d, POM_COOKIE_START, 0, count_cb, &s), 0);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "e%d", i);
        struct stat st;
        assert_int_equal(pom_mknod(fs, d, name, S_IFREG | 0644, 0, NULL, &st), 0);
        pom_forget(fs, st.st_ino, 1);
    }
    /* In pieces of random size, plain and plus. */
    for (int plus = 0; plus < 2; plus++) {
        memset(s.hits, 0, (size_t)n);
        uint64_t cookie = POM_COOKIE_START;
        int total = 0;
        for (;;) {
            s.stop_after = rand() % 300;
            s.taken = 0;
            int got = pom_readdir(fs, d, cookie, plus, count_cb, &s);
            assert_true(got >= 0);
            assert_int_equal(got, s.taken);
            if (got == 0 && s.stop_after > 0)
                break;
            if (got) {
                assert_true(s.next > cookie);
                assert_true(s.next < POM_COOKIE_END);
                cookie = s.next;
                if (plus) {
                    struct stat st;
                    assert_int_equal(pom_getattr(fs, s.last, &st), 0);
                }
            }
            total += got;
        }
        assert_int_equal(total, n);
        for (int i = 0; i < n; i++)
            assert_int_equal(s.hits[i], 1);
    }
    /* The references readdirplus gave are real: forget them all. */
    s.stop_after = -1;
    free(s.hits);
    assert_int_equal(pom_rmdir(fs, POM_ROOT_INO, "many"), -ENOTEMPTY);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

static void test_two_clients_uuids(void **state)
{
    (void)state;
    pom_fs *a = conn(), *b = conn();
    pom_ino d = fresh_dir(a, "uuids");
    struct stat st;
    assert_int_equal(pom_lookup(b, POM_ROOT_INO, "uuids", &st), 0);
    enum { N = 300 };
    static uint64_t ino[2 * N];
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "a%d", i);
        assert_int_equal(pom_mknod(a, d, name, S_IFREG | 0644, 0, NULL, &st), 0);
        ino[2 * i] = st.st_ino;
        snprintf(name, sizeof name, "b%d", i);
        assert_int_equal(pom_mknod(b, d, name, S_IFREG | 0644, 0, NULL, &st), 0);
        ino[2 * i + 1] = st.st_ino;
    }
    for (int i = 0; i < 2 * N; i++)
        for (int j = i + 1; j < 2 * N; j++)
            assert_true(ino[i] != ino[j]);
    /* A name removed by one client is gone for the other (no stale row). */
    assert_int_equal(pom_unlink(a, d, "b0"), 0);
    assert_int_equal(pom_getattr(b, ino[1], &st), -ENOENT);
    pom_close(a);
    pom_close(b);
}

static int never_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    (void)arg;
    (void)st;
    (void)next;
    fail_msg("unexpected entry %s", name);
    return 1;
}

static void test_removed_parent(void **state)
{
    (void)state;
    pom_fs *a = conn(), *b = conn();
    struct stat st;
    pom_file *f;
    /* Removed by b: nothing can be created in it by a. */
    pom_ino d = fresh_dir(a, "gone");
    assert_int_equal(pom_rmdir(b, POM_ROOT_INO, "gone"), 0);
    assert_int_equal(pom_mknod(a, d, "f", S_IFREG | 0644, 0, NULL, &st), -ENOENT);
    assert_int_equal(pom_mkdir(a, d, "sub", 0755, NULL, &st), -ENOENT);
    assert_int_equal(pom_symlink(a, d, "l", "f", NULL, &st), -ENOENT);
    assert_int_equal(pom_create(a, d, "c", 0644, O_RDWR | O_CREAT | O_EXCL, NULL, &st, &f),
                     -ENOENT);
    assert_int_equal(pom_readdir(a, d, POM_COOKIE_START, 0, never_cb, NULL), 0);
    assert_int_equal(pom_readdir(a, d, POM_COOKIE_START, 1, never_cb, NULL), 0);
    assert_int_equal(pom_lookup(b, POM_ROOT_INO, "gone", &st), -ENOENT);
    pom_forget(a, d, 1);
    /* Moved by b: a's map still has the old place. */
    pom_ino m = fresh_dir(a, "moved");
    write_file(a, m, "x", NULL, 0);
    write_file(a, m, "y", NULL, 0);
    assert_int_equal(pom_rename(b, POM_ROOT_INO, "moved", POM_ROOT_INO, "moved2", 0), 0);
    assert_int_equal(pom_mknod(a, m, "z", S_IFREG | 0644, 0, NULL, &st), -ENOENT);
    assert_int_equal(pom_unlink(a, m, "x"), 0);
    assert_int_equal(pom_lookup(a, m, "y", &st), 0);
    pom_ino y = st.st_ino;
    assert_int_equal(pom_link(a, y, m, "y2", &st), 0);
    assert_int_equal(st.st_nlink, 2);
    pom_forget(a, y, 2);
    assert_int_equal(pom_unlink(a, m, "y"), 0); /* a stub now */
    assert_int_equal(pom_lookup(b, POM_ROOT_INO, "moved2", &st), 0);
    pom_ino m2 = st.st_ino;
    assert_int_equal(m2, m);
    assert_int_equal(pom_lookup(b, m2, "x", &st), -ENOENT);
    assert_int_equal(pom_lookup(b, m2, "y", &st), -ENOENT);
    assert_int_equal(pom_lookup(b, m2, "z", &st), -ENOENT);
    assert_int_equal(pom_lookup(b, m2, "y2", &st), 0);
    assert_int_equal(st.st_nlink, 1);
    pom_forget(b, st.st_ino, 1);
    /* A fresh lookup tells a where it is. */
    assert_int_equal(pom_lookup(a, POM_ROOT_INO, "moved2", &st), 0);
    pom_forget(a, m, 1);
    assert_int_equal(pom_mknod(a, m, "z", S_IFREG | 0644, 0, NULL, &st), 0);
    pom_forget(a, st.st_ino, 1);
    assert_int_equal(pom_lookup(b, m2, "z", &st), 0);
    pom_forget(b, st.st_ino, 1);
    pom_forget(b, m2, 1);
    pom_forget(a, m, 1);
    pom_close(a);
    pom_close(b);
}

static void test_kill_mds(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "durable");
    uint8_t data[3000];
    fill(data, sizeof data, 11);
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, d, "synced", 0644, O_RDWR | O_CREAT, NULL, &st, &f), 0);
    assert_int_equal(pom_write(f, data, sizeof data, 0), (ssize_t)sizeof data);
    assert_int_equal(pom_fsync(f, 0), 0);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(pom_sync(fs), 0);
    assert_int_equal(pom_cluster_restart_mds(&C, POM_MDS_BIN, 200), 0);
    /* The same connection: its calls wait for the new MDS. */
    check_file(fs, d, "synced", data, sizeof data);
    write_file(fs, d, "after", data, 10);
    check_file(fs, d, "after", data, 10);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

/* Creates `name` in dir, writes n bytes of seed and flushes them
 * (acknowledged, not synced); the handle stays open. */
static pom_file *acked_file(pom_fs *fs, pom_ino dir, const char *name, unsigned seed,
                            pom_ino *ino)
{
    uint8_t data[1000];
    fill(data, sizeof data, seed);
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, name, 0644, O_RDWR | O_CREAT | O_EXCL, NULL, &st, &f),
                     0);
    assert_int_equal(pom_write(f, data, sizeof data, 0), (ssize_t)sizeof data);
    assert_int_equal(pom_flush(f), 0);
    *ino = st.st_ino;
    return f;
}

/* docs/client.md "Lost changes": an MDS SIGKILLed before committing
 * changes it acknowledged, restarted; every handle covering them answers
 * -EIO once (files, a second handle of one, a file closed and opened
 * again, the directory, the keyspace, pom_sync), handles on untouched or
 * new files answer 0. Before the per-handle report only the first sync
 * after the restart said -EIO and every later one 0. */
static void test_lost_changes(void **state)
{
    (void)state;
    /* Nothing commits but what a sync asks for. */
    assert_int_equal(pom_cluster_restart_mds(&C, POM_MDS_BIN, 60000), 0);
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "lost"), a, b, w, s;
    uint8_t old[1000], data[1000];
    fill(old, sizeof old, 21);
    write_file(fs, d, "w", old, sizeof old);
    pom_kv *kv, *kv2;
    assert_int_equal(pom_kv_open(fs, "lostkv", &kv), 0);
    assert_int_equal(pom_kv_put(kv, "k0", 2, "v0", 2, 0), 0);
    pom_file *fsyn = acked_file(fs, d, "s", 22, &s);
    assert_int_equal(pom_fsync(fsyn, 0), 0);
    assert_int_equal(pom_sync(fs), 0);
    assert_int_equal(pom_kv_sync(kv), 0);

    /* Acknowledged, not synced: a, b created and written; w rewritten and
     * closed; a key put. */
    pom_dir *dh;
    assert_int_equal(pom_opendir(fs, d, &dh), 0);
    assert_int_equal(pom_kv_open(fs, "lostkv", &kv2), 0);
    pom_file *fa = acked_file(fs, d, "a", 23, &a), *fb = acked_file(fs, d, "b", 24, &b);
    pom_file *fa2, *fw;
    assert_int_equal(pom_file_open(fs, a, O_RDONLY, &fa2), 0);
    struct stat st;
    assert_int_equal(pom_lookup(fs, d, "w", &st), 0);
    w = st.st_ino;
    assert_int_equal(pom_file_open(fs, w, O_WRONLY | O_TRUNC, &fw), 0);
    fill(data, sizeof data, 25);
    assert_int_equal(pom_write(fw, data, sizeof data, 0), (ssize_t)sizeof data);
    assert_int_equal(pom_release(fw), 0);
    assert_int_equal(pom_kv_put(kv, "k1", 2, "v1", 2, 0), 0);

    assert_int_equal(pom_cluster_restart_mds(&C, POM_MDS_BIN, 200), 0);
    assert_int_equal(pom_fsync(fa, 0), -EIO);
    assert_int_equal(pom_fsync(fa, 0), 0); /* said once per handle */
    assert_int_equal(pom_fsync(fa2, 0), -EIO); /* every handle open before */
    assert_int_equal(pom_fsync(fb, 1), -EIO);
    assert_int_equal(pom_fsync(fsyn, 0), 0); /* untouched since its fsync */
    /* Closed before the restart, opened after: nobody was told yet. */
    assert_int_equal(pom_file_open(fs, w, O_RDONLY, &fw), 0);
    assert_int_equal(pom_fsync(fw, 0), -EIO);
    assert_int_equal(pom_release(fw), 0);
    check_file(fs, d, "w", old, sizeof old);
    assert_int_equal(pom_lookup(fs, d, "a", &st), -ENOENT);
    assert_int_equal(pom_lookup(fs, d, "b", &st), -ENOENT);
    assert_int_equal(pom_fsyncdir(dh), -EIO);
    assert_int_equal(pom_fsyncdir(dh), 0);
    pom_releasedir(dh);
    assert_int_equal(pom_opendir(fs, d, &dh), 0); /* opened after it was said */
    assert_int_equal(pom_fsyncdir(dh), 0);
    pom_releasedir(dh);
    assert_int_equal(pom_kv_sync(kv), -EIO);
    assert_int_equal(pom_kv_sync(kv), 0);
    assert_int_equal(pom_kv_put(kv2, "k2", 2, "v2", 2, POM_KV_SYNC), -EIO); /* as O_SYNC */
    assert_int_equal(pom_kv_put(kv2, "k3", 2, "v3", 2, POM_KV_SYNC), 0);
    void *v;
    size_t vlen;
    assert_int_equal(pom_kv_get(kv, "k1", 2, &v, &vlen, NULL), -ENOENT);
    assert_int_equal(pom_kv_get(kv, "k2", 2, &v, &vlen, NULL), 0); /* its own value is in */
    pom_free(v);
    assert_int_equal(pom_sync(fs), -EIO);
    assert_int_equal(pom_sync(fs), 0);
    /* A file made after the restart. */
    pom_ino c;
    pom_file *fc = acked_file(fs, d, "c", 26, &c);
    assert_int_equal(pom_fsync(fc, 0), 0);
    assert_int_equal(pom_release(fc), 0);
    fill(data, sizeof data, 26);
    check_file(fs, d, "c", data, sizeof data);
    assert_int_equal(pom_release(fa), 0); /* told already */
    assert_int_equal(pom_release(fa2), 0);
    assert_int_equal(pom_release(fb), 0);
    assert_int_equal(pom_release(fsyn), 0);
    pom_kv_close(kv);
    pom_kv_close(kv2);
    pom_forget(fs, a, 1);
    pom_forget(fs, b, 1);
    pom_forget(fs, c, 1);
    pom_forget(fs, s, 1);
    pom_forget(fs, w, 1);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino d = fresh_dir(fs, "oom");
    long failed = 1;
    for (long n = 0; failed && n < 2000; n++) {
        xt_alloc_fail_after(n);
        struct stat st;
        pom_file *f = NULL;
        int rc = pom_create(fs, d, "f", 0644, O_RDWR | O_CREAT, NULL, &st, &f);
        assert_true(rc == 0 || rc == -ENOMEM || rc == -EEXIST);
        if (rc == 0) {
            ssize_t w = pom_write(f, "hello", 5, 0);
            assert_true(w == 5 || w == -ENOMEM);
            rc = pom_release(f);
            assert_true(rc == 0 || rc == -ENOMEM);
            pom_forget(fs, st.st_ino, 1);
        }
        rc = pom_unlink(fs, d, "f");
        assert_true(rc == 0 || rc == -ENOMEM || rc == -ENOENT);
        failed = xt_alloc_fail_after(-1);
        pom_unlink(fs, d, "f");
    }
    assert_int_equal(failed, 0);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_root_and_names),
        cmocka_unit_test(test_tiny_files),
        cmocka_unit_test(test_setattr),
        cmocka_unit_test(test_remove_and_rename),
        cmocka_unit_test(test_symlink_xattr),
        cmocka_unit_test(test_inode_flags),
        cmocka_unit_test(test_acl),
        cmocka_unit_test(test_unlinked_open),
        cmocka_unit_test(test_readdir),
        cmocka_unit_test(test_two_clients_uuids),
        cmocka_unit_test(test_removed_parent),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_lost_changes),
        cmocka_unit_test(test_kill_mds),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
