/*
 * test_pom_links.c -- hard links, atomic rename and RENAME_EXCHANGE of
 * libpomegranate against real pom-mdsl + pom-mds processes:
 *   - the atomic batch RPC itself: creates into new tables, a failing op
 *     (index, -ECANCELED for the others, nothing applied), LOOKUP checks,
 *     CREATE + XT_F_IF_VER as a conditional replace, XT_F_IF_UUID (a
 *     name created again has version 0 again), the same row twice,
 *     0 and 17 ops, 16 creates at once;
 *   - a link keeps the file's data and xattrs, nlink is right from every
 *     name, from getattr, from readdirplus and from a second connection;
 *     writes through one name are read through the other;
 *   - random sequences (seeded) of link / unlink / rename (also over an
 *     existing name, also of a stub) checked against a model after every
 *     step: every name shows the file's content and nlink = its names;
 *   - errors: link of a directory (EPERM), onto an existing name (EEXIST),
 *     EXCHANGE|NOREPLACE (EINVAL), EXCHANGE with a missing name (ENOENT), a
 *     directory exchanged into its own subtree (EINVAL);
 *   - exchange file <-> directory across directories (the directory keeps
 *     its entries and its parent), of two links of one file (nothing);
 *   - RENAME_WHITEOUT of a plain file and of a link stub: the target is the
 *     file, the old name a new character device 0:0 of mode 0 owned by the
 *     cred given, also for a second client; NOREPLACE onto a name
 *     (EEXIST, nothing changed), EXCHANGE (EINVAL);
 *   - by-inode calls of a client whose map names the plain row after
 *     ANOTHER client linked the file (a stub found late): xattrs get, list,
 *     set, remove, getattr, setattr, open/read/write reach the ILT row;
 *   - SIGKILL of pom-mds during a loop of cross-directory renames, links
 *     and unlinks, then restart: what pom_sync acknowledged is there, and
 *     every uuid has exactly as many names as its nlink (no name lost or
 *     doubled, no batch torn). It found the (uuid, version) rule of
 *     pom_link.c invariant 2.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "pom_cluster.h"
#include "pom_proc.h"
#include "pomegranate.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_rpc_mds.h"

#define FSID 9

static struct pom_cluster C;
static uint64_t g_seed;

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static int group_setup(void **state)
{
    (void)state;
    const char *e = getenv("POM_TEST_SEED");
    g_seed = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL);
    fprintf(stderr, "test_pom_links: seed %llu (POM_TEST_SEED to replay)\n",
            (unsigned long long)g_seed);
    if (pom_cluster_up(&C, "links", POM_MDSL_BIN, POM_MDS_BIN))
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

static pom_ino mkdir_in(pom_fs *fs, pom_ino parent, const char *name)
{
    struct stat st;
    assert_int_equal(pom_mkdir(fs, parent, name, 0755, NULL, &st), 0);
    return st.st_ino;
}

/* A file of n bytes (content from seed); returns its inode (no ref kept). */
static pom_ino mkfile(pom_fs *fs, pom_ino dir, const char *name, size_t n, unsigned seed)
{
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, name, 0644, O_RDWR | O_CREAT | O_EXCL, NULL, &st, &f),
                     0);
    char buf[512];
    for (size_t i = 0; i < n && i < sizeof buf; i++)
        buf[i] = (char)('a' + (i * 7 + seed) % 26);
    if (n)
        assert_int_equal(pom_write(f, buf, n, 0), (ssize_t)n);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, st.st_ino, 1);
    return st.st_ino;
}

/* Lookup (no ref kept): 0 and *st, or -errno. */
static int look(pom_fs *fs, pom_ino dir, const char *name, struct stat *st)
{
    int rc = pom_lookup(fs, dir, name, st);
    if (rc == 0)
        pom_forget(fs, st->st_ino, 1);
    return rc;
}

/* The whole content of the file named (dir, name) into buf. */
static ssize_t slurp(pom_fs *fs, pom_ino dir, const char *name, char *buf, size_t cap)
{
    struct stat st;
    int rc = pom_lookup(fs, dir, name, &st);
    if (rc < 0)
        return rc;
    pom_file *f;
    assert_int_equal(pom_file_open(fs, st.st_ino, O_RDONLY, &f), 0);
    ssize_t n = pom_read(f, buf, cap, 0);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, st.st_ino, 1);
    return n;
}

static void test_link_basics(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino a = mkdir_in(fs, POM_ROOT_INO, "lb-a"), b = mkdir_in(fs, POM_ROOT_INO, "lb-b");
    pom_ino ino = mkfile(fs, a, "f", 300, 1);
    struct stat st, st2;
    /* The kernel holds a reference on ino when it links. */
    assert_int_equal(pom_lookup(fs, a, "f", &st), 0);
    assert_int_equal(pom_setxattr(fs, ino, "user.k", "v1", 2, 0), 0);
    assert_int_equal(st.st_nlink, 1);
    assert_int_equal(pom_link(fs, ino, b, "g", &st), 0);
    assert_int_equal(st.st_ino, ino);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(st.st_size, 300);
    pom_forget(fs, ino, 1);
    assert_int_equal(look(fs, a, "f", &st), 0);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(st.st_ino, ino);
    assert_int_equal(st.st_size, 300);
    assert_int_equal(look(fs, b, "g", &st2), 0);
    assert_int_equal(st2.st_nlink, 2);
    assert_int_equal(st2.st_ino, ino);
    assert_int_equal(pom_getattr(fs, ino, &st), 0);
    assert_int_equal(st.st_nlink, 2);
    /* Data and xattrs came along. */
    char x[600], y[600];
    assert_int_equal(slurp(fs, a, "f", x, sizeof x), 300);
    assert_int_equal(slurp(fs, b, "g", y, sizeof y), 300);
    assert_memory_equal(x, y, 300);
    char v[16];
    assert_int_equal(pom_getxattr(fs, ino, "user.k", v, sizeof v), 2);
    assert_memory_equal(v, "v1", 2);
    /* A write through one name is read through the other. */
    assert_int_equal(pom_lookup(fs, b, "g", &st), 0);
    pom_file *f;
    assert_int_equal(pom_file_open(fs, ino, O_WRONLY, &f), 0);
    assert_int_equal(pom_write(f, "ZZ", 2, 0), 2);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, ino, 1);
    assert_int_equal(slurp(fs, a, "f", x, sizeof x), 300);
    assert_memory_equal(x, "ZZ", 2);
    /* A second client (no inode map) sees the same. */
    pom_fs *fs2 = conn();
    assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "lb-a", &st), 0);
    assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "lb-b", &st), 0);
    assert_int_equal(look(fs2, a, "f", &st), 0);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(pom_lookup(fs2, a, "f", &st), 0); /* getxattr by inode */
    assert_int_equal(slurp(fs2, b, "g", y, sizeof y), 300);
    assert_memory_equal(y, "ZZ", 2);
    assert_int_equal(pom_getxattr(fs2, ino, "user.k", v, sizeof v), 2);
    /* Third name, readdirplus shows nlink 3 for every name. */
    assert_int_equal(pom_lookup(fs, a, "f", &st), 0);
    assert_int_equal(pom_link(fs, ino, a, "h", &st), 0);
    assert_int_equal(st.st_nlink, 3);
    pom_forget(fs, ino, 2);
    /* Errors. */
    assert_int_equal(pom_lookup(fs, a, "f", &st), 0);
    assert_int_equal(pom_link(fs, ino, b, "g", &st2), -EEXIST);
    assert_int_equal(pom_link(fs, a, b, "dirlink", &st2), -EPERM);
    assert_int_equal(pom_link(fs, ino, ino, "x", &st2), -ENOTDIR);
    pom_forget(fs, ino, 1);
    /* Unlinks in turn: nlink follows; the last one removes the file. */
    assert_int_equal(pom_unlink(fs, a, "f"), 0);
    assert_int_equal(look(fs, b, "g", &st), 0);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(pom_unlink(fs, b, "g"), 0);
    assert_int_equal(look(fs2, a, "h", &st), 0);
    assert_int_equal(st.st_nlink, 1);
    assert_int_equal(slurp(fs2, a, "h", y, sizeof y), 300);
    assert_int_equal(pom_lookup(fs, a, "h", &st), 0);
    assert_int_equal(pom_unlink(fs, a, "h"), 0);
    assert_int_equal(pom_getattr(fs, ino, &st), -ENOENT);
    pom_forget(fs, ino, 1);
    assert_int_equal(look(fs2, a, "h", &st), -ENOENT);
    pom_forget(fs2, ino, 1);
    pom_forget(fs2, a, 1);
    pom_forget(fs2, b, 1);
    pom_forget(fs, a, 1);
    pom_forget(fs, b, 1);
    pom_close(fs2);
    pom_close(fs);
}

static int count_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    (void)name;
    (void)next;
    nlink_t *want = arg;
    if (S_ISREG(st->st_mode))
        assert_int_equal(st->st_nlink, *want);
    return 0;
}

static void test_readdirplus_nlink(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino d = mkdir_in(fs, POM_ROOT_INO, "rdp");
    pom_ino ino = mkfile(fs, d, "a", 10, 2);
    struct stat st;
    assert_int_equal(pom_lookup(fs, d, "a", &st), 0);
    assert_int_equal(pom_link(fs, ino, d, "b", &st), 0);
    assert_int_equal(pom_link(fs, ino, d, "c", &st), 0);
    pom_forget(fs, ino, 3);
    pom_fs *fs2 = conn();
    assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "rdp", &st), 0);
    nlink_t want = 3;
    assert_int_equal(pom_readdir(fs2, d, 0, 1, count_cb, &want), 3);
    pom_forget(fs2, ino, 3);
    pom_forget(fs2, d, 1);
    pom_forget(fs, d, 1);
    pom_close(fs2);
    pom_close(fs);
}

/* ---- random sequences against a model ---------------------------------- */

#define M_DIRS 3
#define M_NAMES 6
#define M_FILES 4

struct model {
    int file[M_DIRS][M_NAMES]; /* -1 free, else file index */
    pom_ino ino[M_FILES];
    pom_ino dir[M_DIRS];
};

static void name_of(char *buf, int n)
{
    snprintf(buf, 16, "n%d", n);
}

static int nlinks(const struct model *m, int f)
{
    int c = 0;
    for (int d = 0; d < M_DIRS; d++)
        for (int n = 0; n < M_NAMES; n++)
            c += m->file[d][n] == f;
    return c;
}

static void model_check(pom_fs *fs, const struct model *m)
{
    for (int d = 0; d < M_DIRS; d++)
        for (int n = 0; n < M_NAMES; n++) {
            char nm[16];
            name_of(nm, n);
            struct stat st;
            int rc = look(fs, m->dir[d], nm, &st);
            int f = m->file[d][n];
            if (f < 0) {
                assert_int_equal(rc, -ENOENT);
                continue;
            }
            assert_int_equal(rc, 0);
            assert_int_equal(st.st_ino, m->ino[f]);
            if ((int)st.st_nlink != nlinks(m, f))
                fail_msg("dir %d name %d file %d: nlink %d, model %d", d, n, f,
                         (int)st.st_nlink, nlinks(m, f));
            assert_int_equal(st.st_size, 20 + f);
        }
}

static void test_link_sequences(void **state)
{
    (void)state;
    pom_fs *fs = conn(), *other = conn();
    uint64_t s = g_seed;
    pom_ino top = mkdir_in(fs, POM_ROOT_INO, "seq");
    struct model m;
    memset(m.file, -1, sizeof m.file);
    for (int d = 0; d < M_DIRS; d++) {
        char nm[16];
        snprintf(nm, sizeof nm, "d%d", d);
        m.dir[d] = mkdir_in(fs, top, nm);
    }
    /* The second connection knows the directories by its own lookups. */
    struct stat dst;
    assert_int_equal(pom_lookup(other, POM_ROOT_INO, "seq", &dst), 0);
    for (int d = 0; d < M_DIRS; d++) {
        char nm[16];
        snprintf(nm, sizeof nm, "d%d", d);
        assert_int_equal(pom_lookup(other, top, nm, &dst), 0);
        assert_int_equal(dst.st_ino, m.dir[d]);
    }
    for (int f = 0; f < M_FILES; f++) {
        char nm[16];
        name_of(nm, f);
        m.ino[f] = mkfile(fs, m.dir[0], nm, 20 + (size_t)f, (unsigned)f);
        m.file[0][f] = f;
    }
    for (int step = 0; step < 250; step++) {
        int d1 = (int)(rnd(&s) % M_DIRS), n1 = (int)(rnd(&s) % M_NAMES);
        int d2 = (int)(rnd(&s) % M_DIRS), n2 = (int)(rnd(&s) % M_NAMES);
        char a[16], b[16];
        name_of(a, n1);
        name_of(b, n2);
        int f = m.file[d1][n1], g = m.file[d2][n2];
        int op = (int)(rnd(&s) % 4);
        int rc;
        if (f < 0) {
            /* Recreate a file that has no name left, else skip. */
            int gone = -1;
            for (int k = 0; k < M_FILES; k++)
                if (nlinks(&m, k) == 0)
                    gone = k;
            if (gone < 0)
                continue;
            struct stat st;
            pom_file *h;
            assert_int_equal(pom_create(fs, m.dir[d1], a, 0644, O_RDWR | O_CREAT | O_EXCL, NULL,
                                        &st, &h), 0);
            char buf[64];
            memset(buf, 'q', sizeof buf);
            assert_int_equal(pom_write(h, buf, 20 + (size_t)gone, 0), 20 + gone);
            assert_int_equal(pom_release(h), 0);
            pom_forget(fs, st.st_ino, 1);
            m.ino[gone] = st.st_ino;
            m.file[d1][n1] = gone;
        } else if (op == 0) {
            struct stat st;
            assert_int_equal(pom_lookup(fs, m.dir[d1], a, &st), 0);
            rc = pom_link(fs, m.ino[f], m.dir[d2], b, &st);
            assert_int_equal(rc, g >= 0 ? -EEXIST : 0);
            pom_forget(fs, m.ino[f], rc == 0 ? 2 : 1);
            if (rc == 0)
                m.file[d2][n2] = f;
        } else if (op == 1) {
            assert_int_equal(pom_unlink(fs, m.dir[d1], a), 0);
            m.file[d1][n1] = -1;
        } else if (op == 2) {
            unsigned fl = rnd(&s) % 2 ? POM_RENAME_NOREPLACE : 0;
            rc = pom_rename(fs, m.dir[d1], a, m.dir[d2], b, fl);
            if (d1 == d2 && n1 == n2) {
                assert_int_equal(rc, 0);
            } else if (g >= 0 && (fl & POM_RENAME_NOREPLACE)) {
                assert_int_equal(rc, -EEXIST);
            } else if (g == f) {
                assert_int_equal(rc, 0); /* two names of one file: nothing */
            } else {
                assert_int_equal(rc, 0);
                m.file[d2][n2] = f;
                m.file[d1][n1] = -1;
            }
        } else {
            rc = pom_rename(fs, m.dir[d1], a, m.dir[d2], b, POM_RENAME_EXCHANGE);
            if (g < 0) {
                assert_int_equal(rc, -ENOENT);
            } else {
                assert_int_equal(rc, 0);
                m.file[d2][n2] = f;
                m.file[d1][n1] = g;
            }
        }
        model_check(step % 10 == 0 ? other : fs, &m);
    }
    model_check(other, &m);
    pom_forget(fs, top, 1);
    pom_close(other);
    pom_close(fs);
}

static void test_exchange(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino a = mkdir_in(fs, POM_ROOT_INO, "xa"), b = mkdir_in(fs, POM_ROOT_INO, "xb");
    pom_ino file = mkfile(fs, a, "f", 33, 3);
    pom_ino dir = mkdir_in(fs, b, "d");
    pom_ino inner = mkfile(fs, dir, "inner", 5, 4);
    pom_ino sub = mkdir_in(fs, dir, "sub");
    struct stat st;
    assert_int_equal(pom_rename(fs, a, "f", b, "d", POM_RENAME_EXCHANGE | POM_RENAME_NOREPLACE),
                     -EINVAL);
    assert_int_equal(pom_rename(fs, a, "f", b, "none", POM_RENAME_EXCHANGE), -ENOENT);
    assert_int_equal(pom_rename(fs, a, "none", b, "d", POM_RENAME_EXCHANGE), -ENOENT);
    /* A directory exchanged into its own subtree. */
    assert_int_equal(pom_rename(fs, b, "d", sub, "x", POM_RENAME_NOREPLACE), -EINVAL);
    (void)mkfile(fs, sub, "x", 1, 5);
    assert_int_equal(pom_rename(fs, sub, "x", b, "d", POM_RENAME_EXCHANGE), -EINVAL);
    /* file <-> directory across directories. */
    assert_int_equal(pom_rename(fs, a, "f", b, "d", POM_RENAME_EXCHANGE), 0);
    assert_int_equal(look(fs, a, "f", &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_ino, dir);
    assert_int_equal(look(fs, b, "d", &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_ino, file);
    assert_int_equal(st.st_size, 33);
    assert_int_equal(look(fs, dir, "inner", &st), 0);
    assert_int_equal(st.st_ino, inner);
    pom_ino parent;
    assert_int_equal(pom_parent(fs, dir, &parent), 0);
    assert_int_equal(parent, a);
    /* ".." of the moved directory is its new parent. */
    assert_int_equal(look(fs, dir, "..", &st), 0);
    assert_int_equal(st.st_ino, a);
    /* And from a client that never saw the old places. */
    pom_fs *fs2 = conn();
    assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "xa", &st), 0);
    assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "xb", &st), 0);
    assert_int_equal(look(fs2, a, "f", &st), 0);
    assert_int_equal(st.st_ino, dir);
    assert_int_equal(look(fs2, b, "d", &st), 0);
    assert_int_equal(st.st_ino, file);
    pom_close(fs2);
    /* Two names of one file: nothing changes. */
    assert_int_equal(pom_lookup(fs, b, "d", &st), 0);
    assert_int_equal(pom_link(fs, file, a, "l", &st), 0);
    pom_forget(fs, file, 2);
    assert_int_equal(pom_rename(fs, a, "l", b, "d", POM_RENAME_EXCHANGE), 0);
    assert_int_equal(pom_rename(fs, a, "l", b, "d", 0), 0);
    assert_int_equal(look(fs, a, "l", &st), 0);
    assert_int_equal(st.st_nlink, 2);
    /* A stub exchanged with a plain file: the link stays a link. */
    (void)mkfile(fs, b, "plain", 7, 6);
    assert_int_equal(pom_rename(fs, a, "l", b, "plain", POM_RENAME_EXCHANGE), 0);
    assert_int_equal(look(fs, b, "plain", &st), 0);
    assert_int_equal(st.st_ino, file);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(look(fs, a, "l", &st), 0);
    assert_int_equal(st.st_nlink, 1);
    assert_int_equal(st.st_size, 7);
    /* Replacing a stub by rename drops one link. */
    assert_int_equal(pom_rename(fs, a, "l", b, "plain", 0), 0);
    assert_int_equal(look(fs, b, "d", &st), 0);
    assert_int_equal(st.st_nlink, 1);
    pom_forget(fs, a, 1);
    pom_forget(fs, b, 1);
    pom_forget(fs, dir, 1);
    pom_forget(fs, sub, 1);
    pom_close(fs);
}

/* *st is a whiteout owned by uid:gid (pom_rename_whiteout). */
static void assert_whiteout(const struct stat *st, uid_t uid, gid_t gid)
{
    assert_int_equal(st->st_mode, S_IFCHR);
    assert_int_equal(st->st_rdev, 0);
    assert_int_equal(st->st_uid, uid);
    assert_int_equal(st->st_gid, gid);
    assert_int_equal(st->st_nlink, 1);
}

static void test_whiteout(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino a = mkdir_in(fs, POM_ROOT_INO, "wa"), b = mkdir_in(fs, POM_ROOT_INO, "wb");
    pom_ino file = mkfile(fs, a, "f", 40, 7);
    (void)mkfile(fs, a, "g", 3, 8);
    const struct pom_cred cred = { .uid = 1234, .gid = 5678, .umask = 077 };
    struct stat st;
    assert_int_equal(pom_rename_whiteout(fs, a, "f", b, "f", POM_RENAME_EXCHANGE, &cred),
                     -EINVAL);
    assert_int_equal(pom_rename_whiteout(fs, a, "f", a, "g", POM_RENAME_NOREPLACE, &cred),
                     -EEXIST);
    assert_int_equal(pom_rename_whiteout(fs, a, "f", b, "f", 0, &cred), 0);
    assert_int_equal(look(fs, b, "f", &st), 0);
    assert_int_equal(st.st_ino, file);
    assert_int_equal(st.st_size, 40);
    assert_int_equal(look(fs, a, "f", &st), 0);
    assert_whiteout(&st, 1234, 5678);
    assert_true(st.st_ino != file);
    /* The source a link stub, NOREPLACE to a free name: the stub moves, the
     * file keeps both names. */
    assert_int_equal(pom_lookup(fs, b, "f", &st), 0);
    assert_int_equal(pom_link(fs, file, a, "l", &st), 0);
    pom_forget(fs, file, 2);
    assert_int_equal(pom_rename_whiteout(fs, a, "l", b, "l", POM_RENAME_NOREPLACE, NULL), 0);
    assert_int_equal(look(fs, b, "l", &st), 0);
    assert_int_equal(st.st_ino, file);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(look(fs, a, "l", &st), 0);
    assert_whiteout(&st, geteuid(), getegid());
    /* A client that never saw the old names. */
    pom_fs *fs2 = conn();
    assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "wa", &st), 0);
    assert_int_equal(look(fs2, a, "f", &st), 0);
    assert_whiteout(&st, 1234, 5678);
    assert_int_equal(look(fs2, a, "g", &st), 0);
    assert_int_equal(st.st_size, 3);
    pom_close(fs2);
    pom_forget(fs, a, 1);
    pom_forget(fs, b, 1);
    pom_close(fs);
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Latency of the batch-based calls on loopback (printed, not asserted). */
static void test_timing(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino a = mkdir_in(fs, POM_ROOT_INO, "ta"), b = mkdir_in(fs, POM_ROOT_INO, "tb");
    pom_ino ino = mkfile(fs, a, "f", 100, 1);
    enum { N = 300 };
    double t0 = now_us();
    for (int i = 0; i < N; i++)
        assert_int_equal(pom_rename(fs, i % 2 ? b : a, "f", i % 2 ? a : b, "f", 0), 0);
    double t1 = now_us();
    struct stat st;
    assert_int_equal(pom_lookup(fs, a, "f", &st), 0);
    for (int i = 0; i < N; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "l%d", i);
        assert_int_equal(pom_link(fs, ino, b, nm, &st), 0);
    }
    double t2 = now_us();
    for (int i = 0; i < N; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "l%d", i);
        assert_int_equal(pom_unlink(fs, b, nm), 0);
    }
    double t3 = now_us();
    assert_int_equal(pom_getattr(fs, ino, &st), 0);
    assert_int_equal(st.st_nlink, 1);
    fprintf(stderr, "cross-directory rename %.0f us, link %.0f us, unlink of a link %.0f us "
            "(mean of %d, loopback)\n", (t1 - t0) / N, (t2 - t1) / N, (t3 - t2) / N, N);
    pom_forget(fs, ino, 1 + N);
    pom_forget(fs, a, 1);
    pom_forget(fs, b, 1);
    pom_close(fs);
}

/* ---- SIGKILL of pom-mds during links and renames ------------------------ */

#define K_DIRS 3
#define K_FILES 8

struct churn {
    pom_fs *fs;
    pom_ino dir[K_DIRS];
    atomic_bool stop;
    uint64_t seed;
    unsigned ops, ok;
};

static void *churn_main(void *arg)
{
    struct churn *c = arg;
    while (!atomic_load(&c->stop)) {
        char a[16], b[16];
        snprintf(a, sizeof a, "c%u", (unsigned)(rnd(&c->seed) % (K_FILES * 2)));
        snprintf(b, sizeof b, "c%u", (unsigned)(rnd(&c->seed) % (K_FILES * 2)));
        pom_ino d1 = c->dir[rnd(&c->seed) % K_DIRS], d2 = c->dir[rnd(&c->seed) % K_DIRS];
        struct stat st;
        int rc = -1;
        switch (rnd(&c->seed) % 6) {
        case 0:
            if (pom_lookup(c->fs, d1, a, &st) == 0) {
                if ((rc = pom_link(c->fs, st.st_ino, d2, b, &st)) == 0)
                    pom_forget(c->fs, st.st_ino, 1);
                pom_forget(c->fs, st.st_ino, 1);
            }
            break;
        case 1:
            rc = pom_unlink(c->fs, d1, a);
            break;
        case 2:
            rc = pom_rename(c->fs, d1, a, d2, b, POM_RENAME_EXCHANGE);
            break;
        case 3: { /* keep files coming: unlinks would empty the dirs */
            pom_file *f;
            if ((rc = pom_create(c->fs, d1, a, 0644, O_RDWR | O_CREAT | O_EXCL, NULL, &st,
                                 &f)) == 0) {
                rc = pom_release(f);
                pom_forget(c->fs, st.st_ino, 1);
            }
            break;
        }
        default:
            rc = pom_rename(c->fs, d1, a, d2, b, 0);
            break;
        }
        c->ops++;
        c->ok += rc == 0;
    }
    return NULL;
}

struct census {
    pom_fs *fs;
    uint64_t uuid[256];
    unsigned names[256], nlink[256];
    size_t n;
    pom_ino dir;
};

static int census_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    (void)next;
    struct census *c = arg;
    struct stat ls;
    /* A lookup reads the attributes where they live (ILT for links). */
    assert_int_equal(look(c->fs, c->dir, name, &ls), 0);
    assert_int_equal(ls.st_ino, st->st_ino);
    size_t i = 0;
    while (i < c->n && c->uuid[i] != ls.st_ino)
        i++;
    if (i == c->n) {
        assert_true(c->n < 256);
        c->uuid[c->n++] = ls.st_ino;
    }
    c->names[i]++;
    c->nlink[i] = (unsigned)ls.st_nlink;
    return 0;
}

/* Every directory /kill/NAME of names[0..nd): names per uuid == nlink.
 * fs is a fresh connection (it looks the directories up itself). */
static void census_check(pom_fs *fs, const char *const *names, size_t nd)
{
    struct census c;
    memset(&c, 0, sizeof c);
    c.fs = fs;
    struct stat st;
    assert_int_equal(look(fs, POM_ROOT_INO, "kill", &st), 0);
    pom_ino top = st.st_ino;
    assert_int_equal(pom_lookup(fs, POM_ROOT_INO, "kill", &st), 0);
    for (size_t d = 0; d < nd; d++) {
        assert_int_equal(pom_lookup(fs, top, names[d], &st), 0);
        c.dir = st.st_ino;
        assert_true(pom_readdir(fs, c.dir, 0, 0, census_cb, &c) >= 0);
        pom_forget(fs, c.dir, 1);
    }
    pom_forget(fs, top, 1);
    for (size_t i = 0; i < c.n; i++)
        if (c.names[i] != c.nlink[i])
            fail_msg("uuid %llu: %u names, nlink %u", (unsigned long long)c.uuid[i],
                     c.names[i], c.nlink[i]);
}

static void test_kill_during_links(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino top = mkdir_in(fs, POM_ROOT_INO, "kill");
    pom_ino keep = mkdir_in(fs, top, "keep");
    struct churn c = { .fs = fs, .seed = g_seed ^ 0x77 };
    for (int d = 0; d < K_DIRS; d++) {
        char nm[16];
        snprintf(nm, sizeof nm, "k%d", d);
        c.dir[d] = mkdir_in(fs, top, nm);
    }
    /* The part that must survive: a linked file, then a sync. */
    pom_ino kf = mkfile(fs, keep, "one", 40, 9);
    struct stat st;
    assert_int_equal(pom_lookup(fs, keep, "one", &st), 0);
    assert_int_equal(pom_link(fs, kf, keep, "two", &st), 0);
    pom_forget(fs, kf, 2);
    for (int f = 0; f < K_FILES; f++) {
        char nm[16];
        snprintf(nm, sizeof nm, "c%d", f);
        (void)mkfile(fs, c.dir[f % K_DIRS], nm, (size_t)f, (unsigned)f);
    }
    assert_int_equal(pom_sync(fs), 0);
    uint64_t s = g_seed;
    for (int round = 0; round < 3; round++) {
        atomic_store(&c.stop, false);
        c.ops = c.ok = 0;
        pthread_t th;
        pthread_create(&th, NULL, churn_main, &c);
        /* Several commit groups (200 ms) pass, then SIGKILL. */
        usleep(300000 + (useconds_t)(rnd(&s) % 700) * 1000);
        assert_int_equal(pom_cluster_kill_mds(&C), 0);
        atomic_store(&c.stop, true);
        assert_int_equal(pom_cluster_start_mds(&C, POM_MDS_BIN, 200, NULL), 0);
        pthread_join(th, NULL); /* its call in flight waited for the restart */
        pom_fs *check = conn();
        static const char *const all[] = { "k0", "k1", "k2", "keep" };
        census_check(check, all, 4);
        assert_int_equal(look(fs, keep, "one", &st), 0);
        assert_int_equal(st.st_nlink, 2);
        assert_int_equal(st.st_size, 40);
        assert_int_equal(look(fs, keep, "two", &st), 0);
        fprintf(stderr, "round %d: %u operations (%u succeeded) before the kill\n", round,
                c.ops, c.ok);
        pom_close(check);
    }
    pom_forget(fs, top, 1);
    pom_forget(fs, keep, 1);
    for (int d = 0; d < K_DIRS; d++)
        pom_forget(fs, c.dir[d], 1);
    pom_close(fs);
}

/* ---- the RPC of atomic batches (xt_mds_batch_atomic) ------------------- */

static xt_row mkrow(uint64_t uuid)
{
    xt_row r;
    xt_row_init(&r);
    r.attr.uuid = uuid;
    r.attr.type = XT_ROW_REG;
    r.attr.nlink = 1;
    return r;
}

static struct xt_req rq(int op, uint64_t table, const char *name, uint32_t flags,
                        const xt_row *row)
{
    return (struct xt_req){ .op = op, .t = { FSID, table, -1 }, .name = name,
                            .name_len = (uint32_t)strlen(name),
                            .name_hash = xt_hash_name(name, strlen(name)), .flags = flags,
                            .row = row };
}

/* The uuid of row (table, name), or 0 when absent. */
static uint64_t uuid_at(xt_rpc_pool *p, uint64_t table, const char *name, uint64_t *version)
{
    struct xt_req q = rq(XT_OP_LOOKUP, table, name, 0, NULL);
    struct xt_resp r;
    int rc = xt_mds_call(p, NULL, &q, &r);
    if (rc == -ENOENT)
        return 0;
    assert_int_equal(rc, 0);
    xt_row v;
    assert_int_equal(xt_row_decode_meta(r.row, r.row_len, &v), 0);
    xt_resp_free(&r);
    if (version)
        *version = v.attr.version;
    return v.attr.uuid;
}

static void test_rpc_atomic_batch(void **state)
{
    (void)state;
    struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = C.mds_port,
                                   .call_timeout_ms = 30000, .backoff_min_ms = 10,
                                   .backoff_max_ms = 100 };
    xt_rpc_pool *p;
    assert_int_equal(xt_rpc_pool_new(&po, &p), 0);
    const uint64_t T = UINT64_C(0x7000000001), U = UINT64_C(0x7000000002);
    struct xt_resp rs[XT_BATCH_ATOMIC_MAX];
    size_t failed;
    xt_row r1 = mkrow(11), r2 = mkrow(12), r3 = mkrow(13);
    /* Creates in two tables that do not exist yet: both come into being. */
    struct xt_req q[XT_BATCH_ATOMIC_MAX + 1];
    q[0] = rq(XT_OP_CREATE, T, "a", XT_F_EXCL, &r1);
    q[1] = rq(XT_OP_CREATE, U, "b", XT_F_EXCL | XT_F_SYNC, &r2);
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 2, rs, &failed), 0);
    assert_true(rs[0].commit_group > 0);
    assert_int_equal(rs[0].commit_group, rs[1].commit_group);
    xt_resp_free(&rs[0]);
    xt_resp_free(&rs[1]);
    assert_int_equal(uuid_at(p, T, "a", NULL), 11);
    assert_int_equal(uuid_at(p, U, "b", NULL), 12);
    /* A failing second op: nothing applied, the index and statuses say so. */
    xt_row upd = mkrow(0);
    upd.attr.mode = 0600;
    q[0] = rq(XT_OP_UPDATE, T, "a", XT_F_IF_VER, &upd);
    q[0].set_mask = XT_ROW_SET_MODE;
    q[0].expect_version = 0;
    q[1] = rq(XT_OP_CREATE, U, "b", XT_F_EXCL, &r3);
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 2, rs, &failed), -EEXIST);
    assert_int_equal(failed, 1);
    assert_int_equal(rs[0].status, -ECANCELED);
    assert_int_equal(rs[1].status, -EEXIST);
    xt_resp_free(&rs[0]);
    xt_resp_free(&rs[1]);
    uint64_t ver = 99;
    assert_int_equal(uuid_at(p, T, "a", &ver), 11);
    assert_int_equal(ver, 0); /* the update did not happen */
    /* A LOOKUP check at the wrong version fails the batch. */
    q[1] = rq(XT_OP_LOOKUP, U, "b", XT_F_IF_VER, NULL);
    q[1].expect_version = 5;
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 2, rs, &failed), -ESTALE);
    assert_int_equal(failed, 1);
    for (int i = 0; i < 2; i++)
        xt_resp_free(&rs[i]);
    /* CREATE + IF_VER replaces at that version only (a rename over a target). */
    q[0] = rq(XT_OP_CREATE, T, "a", XT_F_IF_VER, &r3);
    q[0].expect_version = 7;
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 1, rs, &failed), -ESTALE);
    xt_resp_free(&rs[0]);
    q[0].expect_version = 0;
    q[1] = rq(XT_OP_DELETE, U, "b", XT_F_IF_VER, NULL);
    q[1].expect_version = 0;
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 2, rs, &failed), 0);
    for (int i = 0; i < 2; i++)
        xt_resp_free(&rs[i]);
    assert_int_equal(uuid_at(p, T, "a", NULL), 13);
    assert_int_equal(uuid_at(p, U, "b", NULL), 0);
    /* XT_F_IF_UUID: the same version 0 of another file does not match. */
    q[0] = rq(XT_OP_CREATE, T, "a", XT_F_IF_VER | XT_F_IF_UUID, &r1);
    q[0].expect_version = 0;
    q[0].expect_uuid = 11; /* the row is uuid 13 now, also at version 0 */
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 1, rs, &failed), -ESTALE);
    xt_resp_free(&rs[0]);
    q[0] = rq(XT_OP_DELETE, T, "a", XT_F_IF_UUID, NULL);
    q[0].expect_uuid = 11;
    struct xt_resp one;
    assert_int_equal(xt_mds_call(p, NULL, &q[0], &one), -ESTALE); /* single ops too */
    xt_resp_free(&one);
    q[0].expect_uuid = 13;
    q[0].flags |= XT_F_IF_VER;
    q[0].expect_version = 0;
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 1, rs, &failed), 0);
    xt_resp_free(&rs[0]);
    assert_int_equal(uuid_at(p, T, "a", NULL), 0);
    q[0] = rq(XT_OP_CREATE, T, "nope", XT_F_IF_VER, &r3);
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 1, rs, &failed), -ENOENT);
    xt_resp_free(&rs[0]);
    /* Argument errors: the same row twice, too many, none. */
    q[0] = rq(XT_OP_CREATE, T, "x", XT_F_EXCL, &r1);
    q[1] = rq(XT_OP_DELETE, T, "x", 0, NULL);
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 2, rs, &failed), -EINVAL);
    assert_int_equal(failed, 1);
    for (int i = 0; i < 2; i++)
        xt_resp_free(&rs[i]);
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, 0, rs, &failed), -EINVAL);
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, XT_BATCH_ATOMIC_MAX + 1, rs, &failed),
                     -EINVAL);
    assert_int_equal(uuid_at(p, T, "x", NULL), 0);
    /* 16 creates at once. */
    char names[XT_BATCH_ATOMIC_MAX][8];
    for (int i = 0; i < XT_BATCH_ATOMIC_MAX; i++) {
        snprintf(names[i], sizeof names[i], "m%d", i);
        q[i] = rq(XT_OP_CREATE, U, names[i], XT_F_EXCL, &r1);
    }
    assert_int_equal(xt_mds_batch_atomic(p, NULL, q, XT_BATCH_ATOMIC_MAX, rs, &failed), 0);
    for (int i = 0; i < XT_BATCH_ATOMIC_MAX; i++) {
        xt_resp_free(&rs[i]);
        assert_int_equal(uuid_at(p, U, names[i], NULL), 11);
    }
    xt_rpc_pool_free(p);
}

/* ---- by-inode calls on a file another client linked ------------------- */

/* Client A looked the file up (its map points at the plain row); client B
 * then links it, so A's location is a stub. Every by-inode call of A must
 * reach the ILT row: xattrs (get, list, set, remove), getattr, setattr,
 * open/read/write. */
static void test_late_stub(void **state)
{
    (void)state;
    pom_fs *a = conn(), *b = conn();
    pom_ino d = mkdir_in(a, POM_ROOT_INO, "late");
    pom_ino ino = mkfile(a, d, "f", 40, 7);
    struct stat st;
    char v[32];
    assert_int_equal(pom_lookup(a, d, "f", &st), 0);
    assert_int_equal(pom_setxattr(a, ino, "user.before", "b4", 2, 0), 0);
    /* B links it: the row (with user.before) moves to the ILT. */
    assert_int_equal(pom_lookup(b, POM_ROOT_INO, "late", &st), 0);
    assert_int_equal(pom_lookup(b, d, "f", &st), 0);
    assert_int_equal(pom_link(b, ino, d, "g", &st), 0);
    assert_int_equal(st.st_nlink, 2);
    /* A's xattr calls (its map still names the stub). */
    assert_int_equal(pom_getxattr(a, ino, "user.before", v, sizeof v), 2);
    assert_memory_equal(v, "b4", 2);
    assert_int_equal(pom_listxattr(a, ino, v, sizeof v), (ssize_t)sizeof "user.before");
    assert_int_equal(pom_setxattr(a, ino, "user.after", "a1", 2, XATTR_CREATE), 0);
    assert_int_equal(pom_getxattr(b, ino, "user.after", v, sizeof v), 2);
    assert_memory_equal(v, "a1", 2);
    /* B links a third name, then A removes an xattr: the ILT row again. */
    assert_int_equal(pom_link(b, ino, d, "h", &st), 0);
    assert_int_equal(pom_removexattr(a, ino, "user.before"), 0);
    assert_int_equal(pom_getxattr(b, ino, "user.before", v, sizeof v), -ENODATA);
    /* A fresh pair: getattr, setattr and open of A after B's link. */
    pom_ino i2 = mkfile(a, d, "f2", 12, 8);
    assert_int_equal(pom_lookup(a, d, "f2", &st), 0);
    assert_int_equal(pom_lookup(b, d, "f2", &st), 0);
    assert_int_equal(pom_link(b, i2, d, "g2", &st), 0);
    assert_int_equal(pom_getattr(a, i2, &st), 0);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(st.st_size, 12);
    struct stat in = { .st_mode = 0600 };
    assert_int_equal(pom_setattr(a, i2, &in, POM_SET_MODE, &st), 0);
    assert_int_equal(pom_getattr(b, i2, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(st.st_nlink, 2);
    /* Another pair for open: A opens only after B linked. */
    pom_ino i3 = mkfile(a, d, "f3", 20, 9);
    assert_int_equal(pom_lookup(a, d, "f3", &st), 0);
    assert_int_equal(pom_lookup(b, d, "f3", &st), 0);
    assert_int_equal(pom_link(b, i3, d, "g3", &st), 0);
    pom_file *f;
    char buf[64];
    assert_int_equal(pom_file_open(a, i3, O_RDWR, &f), 0);
    assert_int_equal(pom_read(f, buf, sizeof buf, 0), 20);
    assert_int_equal(pom_write(f, "QQ", 2, 0), 2);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(slurp(b, d, "g3", buf, sizeof buf), 20);
    assert_memory_equal(buf, "QQ", 2);
    /* The stubs carry no xattrs: nothing was written to them. */
    assert_int_equal(pom_getattr(a, ino, &st), 0);
    assert_int_equal(st.st_nlink, 3);
    pom_forget(a, ino, 1);
    pom_forget(a, i2, 1);
    pom_forget(a, i3, 1);
    pom_forget(a, d, 1);
    pom_forget(b, ino, 3);
    pom_forget(b, i2, 2);
    pom_forget(b, i3, 2);
    pom_forget(b, d, 1);
    pom_close(b);
    pom_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rpc_atomic_batch),
        cmocka_unit_test(test_link_basics),
        cmocka_unit_test(test_readdirplus_nlink),
        cmocka_unit_test(test_link_sequences),
        cmocka_unit_test(test_exchange),
        cmocka_unit_test(test_whiteout),
        cmocka_unit_test(test_timing),
        cmocka_unit_test(test_late_stub),
        cmocka_unit_test(test_kill_during_links),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
