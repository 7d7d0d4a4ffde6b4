/*
 * test_pom_blob_client.c -- large files through libpomegranate against real
 * pom-mdsl + pom-mds processes (tests/common/pom_cluster) and a local blob
 * tier in the test's folder:
 *   - migration: 64 KiB inline, one more byte moves the file to tracts; the
 *     bytes read back from a fresh connection (a "remount"); a connection
 *     without a blob tier gets -EFBIG for it;
 *   - truncate up across 64 KiB (inline -> blob, zeros) and down below it
 *     (stays blob, bytes kept), O_TRUNC of a blob file;
 *   - a sparse 1 GiB file: the middle reads zeros, st_blocks stays small;
 *     writes at 2^40 work, at POM_FILE_MAX answer -EFBIG;
 *   - fallocate: mode 0 migrates and extends, KEEP_SIZE keeps the size,
 *     PUNCH_HOLE zeros, unknown modes -EOPNOTSUPP;
 *   - ZERO_RANGE, COLLAPSE_RANGE and INSERT_RANGE (which the kernel does
 *     not pass to FUSE, so only the library can test them) in a seeded mix
 *     with writes, truncates and the other modes on a file around 64 KiB
 *     and on one of several tracts, the same calls on a host file
 *     (ext4/xfs under /tmp) as reference: the same answer and bytes after
 *     every call; collapse/insert write a new set of tracts and the old
 *     one goes once the row naming the new one is committed; a failed
 *     collapse (the store's fault hook) changes nothing and leaves no set
 *     (test_shift_copy_on_write);
 *   - unlink removes the tracts once the removal is committed (the next
 *     sync; for an open file after its last release), and so does a rename
 *     over a blob file;
 *   - fsync of a blob file, then SIGKILL of pom-mds and a restart: size and
 *     bytes are there;
 *   - a rewrite from size 0 (O_TRUNC) goes to new tracts (copy-on-write):
 *     SIGKILL of pom-mds before its commit gives the old bytes back whole;
 *     once a rewrite is committed the old tracts are gone;
 *   - a migration whose tract write fails (the store's fault hook) leaves
 *     no set behind (no row would ever name it) and the file inline;
 *   - writes of a blob file racing cuts to size 0 of the same file (xfstests
 *     generic/464: O_TRUNC opens beside writers): the size is the last
 *     write's or 0, the bytes are that write's, and no flush finds an
 *     inline file with a length but no buffer (pomfs died in memcpy from
 *     NULL there).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pom_blob.h"
#include "pom_ns_i.h"
#include "pom_cluster.h"
#include "pom_proc.h"
#include "pom_rand.h"
#include "pomegranate.h"
#include "xt_common.h"

#define FSID 9

static struct pom_cluster C;
static char blobdir[PATH_MAX];

static int group_setup(void **state)
{
    (void)state;
    if (pom_cluster_up(&C, "blobc", POM_MDSL_BIN, POM_MDS_BIN))
        return -1;
    snprintf(blobdir, sizeof blobdir, "%s/blobs-a:%s/blobs-b", C.base, C.base);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    pom_cluster_destroy(&C);
    return 0;
}

static pom_fs *conn(bool blob)
{
    pom_fs *fs = NULL;
    assert_int_equal(pom_connect_mds(C.mds_addr, FSID, &fs), 0);
    if (blob)
        assert_int_equal(pom_set_blob(fs, "local", blobdir), 0);
    return fs;
}

/* The id naming ino's tracts (pom_file.c (3)): the open buffer's, else
 * the row's. 0 for an inline file. */
static uint64_t tid(pom_fs *fs, pom_ino ino)
{
    uint64_t id = 0;
    struct pom_inode *i = pom_ino_pin_open(fs, ino);
    if (i) {
        pthread_mutex_lock(&i->data->mu);
        id = i->data->blob ? i->data->tracts : 0;
        pthread_mutex_unlock(&i->data->mu);
        pom_ino_close(fs, i);
        return id;
    }
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    struct xt_resp r;
    xt_row row;
    assert_int_equal(pom_ino_row(fs, ino, POM_ROW_META, &table, name, &r, &row), 0);
    if (row.attr.flags & XT_ROW_F_BLOB)
        id = pom_tracts_id(&row.attr);
    xt_resp_free(&r);
    return id;
}

/* Tract files of id, counted by the store's own stat. */
static uint64_t tracts_of(uint64_t uuid, uint64_t *alloc)
{
    struct pom_blob_conf c = { .path = blobdir, .fsid = FSID };
    pom_blob *b;
    assert_int_equal(pom_blob_open(&c, &b), 0);
    struct pom_blob_stat st;
    assert_int_equal(pom_blob_stat(b, uuid, &st), 0);
    pom_blob_close(b);
    if (alloc)
        *alloc = st.alloc_bytes;
    return st.tracts;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (uint8_t)((i * 131 + seed * 7 + (i >> 9)) & 0xff);
}

static pom_ino fresh_dir(pom_fs *fs, const char *name)
{
    struct stat st;
    assert_int_equal(pom_mkdir(fs, POM_ROOT_INO, name, 0755, NULL, &st), 0);
    return st.st_ino;
}

static void read_all(pom_fs *fs, pom_ino ino, uint8_t *buf, size_t n)
{
    pom_file *f;
    assert_int_equal(pom_file_open(fs, ino, O_RDONLY, &f), 0);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pom_read(f, buf + got, XT_MIN(n - got, (size_t)(1u << 20)), (off_t)got);
        assert_true(r > 0);
        got += (size_t)r;
    }
    uint8_t extra;
    assert_int_equal(pom_read(f, &extra, 1, (off_t)n), 0);
    assert_int_equal(pom_release(f), 0);
}

static void test_migration_and_remount(void **state)
{
    (void)state;
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "mig");
    const size_t n = 10u << 20;
    uint8_t *data = malloc(n), *got = malloc(n);
    assert_non_null(data);
    assert_non_null(got);
    fill(data, n, 1);
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, "f", 0644, O_RDWR, NULL, &st, &f), 0);
    pom_ino ino = st.st_ino;
    assert_int_equal(pom_write(f, data, POM_INLINE_MAX, 0), POM_INLINE_MAX);
    assert_int_equal(pom_flush(f), 0);
    assert_int_equal(tid(fs, ino), 0); /* still inline */
    assert_int_equal(pom_write(f, data + POM_INLINE_MAX, 1, POM_INLINE_MAX), 1);
    assert_int_equal(tracts_of(tid(fs, ino), NULL), 1); /* migrated */
    for (size_t off = POM_INLINE_MAX + 1; off < n; off += 1u << 20) {
        size_t k = XT_MIN(n - off, (size_t)(1u << 20));
        assert_int_equal(pom_write(f, data + off, k, (off_t)off), (ssize_t)k);
    }
    assert_int_equal(pom_read(f, got, 100, POM_INLINE_MAX - 50), 100);
    assert_memory_equal(got, data + POM_INLINE_MAX - 50, 100);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(tracts_of(tid(fs, ino), NULL), 3); /* 10 MiB in 4 MiB tracts */
    assert_int_equal(pom_getattr(fs, ino, &st), 0);
    assert_int_equal(st.st_size, (off_t)n);
    pom_forget(fs, ino, 1);
    pom_close(fs);

    /* A fresh connection ("remount"). */
    fs = conn(true);
    assert_int_equal(pom_lookup(fs, POM_ROOT_INO, "mig", &st), 0);
    assert_int_equal(pom_lookup(fs, st.st_ino, "f", &st), 0);
    assert_int_equal(st.st_size, (off_t)n);
    read_all(fs, st.st_ino, got, n);
    assert_memory_equal(got, data, n);
    pom_close(fs);

    /* Without a blob tier the file cannot be opened, but is still listed. */
    fs = conn(false);
    assert_int_equal(pom_lookup(fs, POM_ROOT_INO, "mig", &st), 0);
    assert_int_equal(pom_lookup(fs, st.st_ino, "f", &st), 0);
    assert_int_equal(pom_file_open(fs, st.st_ino, O_RDONLY, &f), -EFBIG);
    pom_close(fs);
    free(data);
    free(got);
}

static void test_truncate_both_ways(void **state)
{
    (void)state;
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "trunc");
    uint8_t data[5000], got[200000];
    fill(data, sizeof data, 2);
    struct stat st, in;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, "t", 0644, O_RDWR, NULL, &st, &f), 0);
    pom_ino ino = st.st_ino;
    assert_int_equal(pom_write(f, data, sizeof data, 0), (ssize_t)sizeof data);
    assert_int_equal(pom_release(f), 0);
    /* Up across 64 KiB (not open): inline -> blob, zeros after the data. */
    memset(&in, 0, sizeof in);
    in.st_size = 200000;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_SIZE, &st), 0);
    assert_int_equal(st.st_size, 200000);
    read_all(fs, ino, got, 200000);
    assert_memory_equal(got, data, sizeof data);
    for (size_t i = sizeof data; i < 200000; i++)
        assert_int_equal(got[i], 0);
    assert_int_equal(tracts_of(tid(fs, ino), NULL), 1);
    /* Down below 64 KiB while open: stays in tracts, bytes kept. */
    assert_int_equal(pom_file_open(fs, ino, O_RDWR, &f), 0);
    in.st_size = 3000;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_SIZE, &st), 0);
    assert_int_equal(st.st_size, 3000);
    assert_int_equal(pom_read(f, got, sizeof got, 0), 3000);
    assert_memory_equal(got, data, 3000);
    assert_int_equal(pom_release(f), 0);
    read_all(fs, ino, got, 3000);
    assert_memory_equal(got, data, 3000);
    /* Up again: the cut bytes are zeros, not the old ones. */
    in.st_size = 5000;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_SIZE, &st), 0);
    read_all(fs, ino, got, 5000);
    assert_memory_equal(got, data, 3000);
    for (size_t i = 3000; i < 5000; i++)
        assert_int_equal(got[i], 0);
    /* O_TRUNC of a blob file, then a small write. */
    assert_int_equal(pom_file_open(fs, ino, O_RDWR | O_TRUNC, &f), 0);
    assert_int_equal(pom_write(f, "hello", 5, 0), 5);
    assert_int_equal(pom_release(f), 0);
    read_all(fs, ino, got, 5);
    assert_memory_equal(got, "hello", 5);
    /* Past the limits. */
    in.st_size = (off_t)POM_FILE_MAX + 1;
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_SIZE, NULL), -EFBIG);
    pom_forget(fs, ino, 1);
    pom_close(fs);
}

static void test_sparse_and_limits(void **state)
{
    (void)state;
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "sparse");
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, "s", 0644, O_RDWR, NULL, &st, &f), 0);
    pom_ino ino = st.st_ino;
    struct stat in = { .st_size = 1 << 30 };
    assert_int_equal(pom_setattr(fs, ino, &in, POM_SET_SIZE, NULL), 0);
    assert_int_equal(pom_write(f, "end", 3, (1 << 30) - 3), 3);
    uint8_t buf[65536], z[65536] = { 0 };
    assert_int_equal(pom_read(f, buf, sizeof buf, 500 << 20), (ssize_t)sizeof buf);
    assert_memory_equal(buf, z, sizeof buf);
    assert_int_equal(pom_read(f, buf, 10, (1 << 30) - 3), 3);
    assert_memory_equal(buf, "end", 3);
    assert_int_equal(pom_flush(f), 0);
    assert_int_equal(pom_getattr(fs, ino, &st), 0);
    assert_int_equal(st.st_size, 1 << 30);
    assert_true(st.st_blocks < 2048); /* under 1 MiB really allocated */
    /* 2^40 works (sparse); POM_FILE_MAX is the end. */
    assert_int_equal(pom_write(f, "far", 3, (off_t)1 << 40), 3);
    assert_int_equal(pom_read(f, buf, 3, (off_t)1 << 40), 3);
    assert_memory_equal(buf, "far", 3);
    assert_int_equal(pom_write(f, "x", 1, (off_t)POM_FILE_MAX), -EFBIG);
    assert_int_equal(pom_write(f, "xy", 2, (off_t)POM_FILE_MAX - 1), 1);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(pom_getattr(fs, ino, &st), 0);
    assert_int_equal(st.st_size, (off_t)POM_FILE_MAX);
    uint64_t id = tid(fs, ino);
    assert_true(tracts_of(id, NULL) > 0);
    assert_int_equal(pom_unlink(fs, dir, "s"), 0);
    assert_int_equal(tracts_of(id, NULL), 3); /* until the removal commits */
    assert_int_equal(pom_sync(fs), 0);
    assert_int_equal(tracts_of(id, NULL), 0);
    pom_forget(fs, ino, 1);
    pom_close(fs);
}

static void test_fallocate(void **state)
{
    (void)state;
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "falloc");
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, "a", 0644, O_RDWR, NULL, &st, &f), 0);
    pom_ino ino = st.st_ino;
    assert_int_equal(pom_fallocate(f, FALLOC_FL_UNSHARE_RANGE, 0, 4096), -EOPNOTSUPP);
    assert_int_equal(pom_fallocate(f, FALLOC_FL_COLLAPSE_RANGE, 0, 4096), -EINVAL); /* at EOF */
    assert_int_equal(pom_fallocate(f, FALLOC_FL_PUNCH_HOLE, 0, 4096), -EOPNOTSUPP);
    assert_int_equal(pom_fallocate(f, 0, 0, 1000), 0); /* inline: extends */
    assert_int_equal(pom_flush(f), 0);
    assert_int_equal(pom_getattr(fs, ino, &st), 0);
    assert_int_equal(st.st_size, 1000);
    assert_int_equal(tid(fs, ino), 0);
    assert_int_equal(pom_write(f, "abcdefgh", 8, 100), 8);
    assert_int_equal(pom_fallocate(f, 0, 0, 5 << 20), 0); /* migrates */
    uint64_t alloc;
    uint64_t id = tid(fs, ino);
    assert_int_equal(tracts_of(id, &alloc), 2);
    assert_true(alloc >= (5u << 20));
    assert_int_equal(pom_fallocate(f, FALLOC_FL_KEEP_SIZE, 5 << 20, 1 << 20), 0);
    assert_int_equal(pom_fallocate(f, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 102, 2), 0);
    assert_int_equal(pom_flush(f), 0);
    assert_int_equal(pom_getattr(fs, ino, &st), 0);
    assert_int_equal(st.st_size, 5 << 20);
    uint8_t buf[8];
    assert_int_equal(pom_read(f, buf, 8, 100), 8);
    assert_memory_equal(buf, "ab\0\0efgh", 8);
    /* Unlinked while open: the tracts stay until the last release. */
    assert_int_equal(pom_unlink(fs, dir, "a"), 0);
    assert_int_equal(tracts_of(id, NULL), 2);
    assert_int_equal(pom_read(f, buf, 8, 100), 8);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(pom_sync(fs), 0); /* the removal commits, then the tracts go */
    assert_int_equal(tracts_of(id, NULL), 0);
    pom_forget(fs, ino, 1);
    pom_close(fs);
}

static void test_rename_over_and_fsync_crash(void **state)
{
    (void)state;
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "ren");
    const size_t n = 3u << 20;
    uint8_t *data = malloc(n), *got = malloc(n);
    assert_non_null(data);
    assert_non_null(got);
    fill(data, n, 3);
    struct stat st, st2;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, "victim", 0644, O_RDWR, NULL, &st, &f), 0);
    assert_int_equal(pom_write(f, data, n, 0), (ssize_t)n);
    assert_int_equal(pom_release(f), 0);
    uint64_t victim = tid(fs, st.st_ino);
    assert_int_equal(tracts_of(victim, NULL), 1);
    assert_int_equal(pom_create(fs, dir, "new", 0644, O_RDWR, NULL, &st2, &f), 0);
    fill(data, n, 4);
    assert_int_equal(pom_write(f, data, n, 0), (ssize_t)n);
    assert_int_equal(pom_fsync(f, 0), 0);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(pom_rename(fs, dir, "new", dir, "victim", 0), 0);
    assert_int_equal(pom_sync(fs), 0);
    assert_int_equal(tracts_of(victim, NULL), 0); /* the replaced file's */
    assert_int_equal(tracts_of(tid(fs, st2.st_ino), NULL), 1);
    pom_forget(fs, st.st_ino, 1);
    pom_forget(fs, st2.st_ino, 1);
    /* What fsync acknowledged survives an MDS SIGKILL. */
    assert_int_equal(pom_create(fs, dir, "synced", 0644, O_RDWR, NULL, &st, &f), 0);
    assert_int_equal(pom_write(f, data, n, 0), (ssize_t)n);
    assert_int_equal(pom_fsync(f, 0), 0);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, st.st_ino, 1);
    pom_close(fs);
    assert_int_equal(pom_cluster_restart_mds(&C, POM_MDS_BIN, 200), 0);
    fs = conn(true);
    assert_int_equal(pom_lookup(fs, POM_ROOT_INO, "ren", &st), 0);
    pom_ino d2 = st.st_ino;
    assert_int_equal(pom_lookup(fs, d2, "synced", &st), 0);
    assert_int_equal(st.st_size, (off_t)n);
    read_all(fs, st.st_ino, got, n);
    assert_memory_equal(got, data, n);
    assert_int_equal(pom_lookup(fs, d2, "victim", &st), 0);
    read_all(fs, st.st_ino, got, n);
    assert_memory_equal(got, data, n);
    pom_close(fs);
    free(data);
    free(got);
}

static void write_all(pom_file *f, const uint8_t *b, size_t n)
{
    for (size_t off = 0; off < n; off += 1u << 20) {
        size_t k = XT_MIN(n - off, (size_t)(1u << 20));
        assert_int_equal(pom_write(f, b + off, k, (off_t)off), (ssize_t)k);
    }
}

static void test_rewrite_is_copy_on_write(void **state)
{
    (void)state;
    assert_int_equal(pom_cluster_restart_mds(&C, POM_MDS_BIN, 60000), 0); /* nothing commits but what a sync asks for */
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "cow");
    const size_t na = 300000, nb = 200000;
    uint8_t *a = malloc(na), *b = malloc(nb), *got = malloc(na);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(got);
    fill(a, na, 5);
    fill(b, nb, 6);
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, "f", 0644, O_RDWR, NULL, &st, &f), 0);
    pom_ino ino = st.st_ino;
    write_all(f, a, na);
    assert_int_equal(pom_fsync(f, 0), 0);
    assert_int_equal(pom_release(f), 0);
    uint64_t ida = tid(fs, ino);
    assert_int_equal(tracts_of(ida, NULL), 1);
    /* Rewritten and flushed, not committed: both sets of tracts exist. */
    assert_int_equal(pom_file_open(fs, ino, O_RDWR | O_TRUNC, &f), 0);
    write_all(f, b, nb);
    uint64_t idb = tid(fs, ino);
    assert_true(idb != ida && idb != 0);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(tracts_of(ida, NULL), 1);
    assert_int_equal(tracts_of(idb, NULL), 1);
    /* The MDS dies before the commit: the old row, and its bytes, whole
     * (this client's queued removal of the old set is dropped at close:
     * the sync then comes from another MDS epoch). */
    assert_int_equal(pom_cluster_restart_mds(&C, POM_MDS_BIN, 200), 0);
    pom_forget(fs, ino, 1);
    pom_close(fs);
    assert_int_equal(tracts_of(ida, NULL), 1);
    fs = conn(true);
    assert_int_equal(pom_lookup(fs, POM_ROOT_INO, "cow", &st), 0);
    dir = st.st_ino;
    assert_int_equal(pom_lookup(fs, dir, "f", &st), 0);
    assert_int_equal(st.st_size, (off_t)na);
    read_all(fs, ino, got, na);
    assert_memory_equal(got, a, na);
    /* A committed rewrite (here to a small inline file) removes them. */
    assert_int_equal(pom_file_open(fs, ino, O_RDWR | O_TRUNC, &f), 0);
    assert_int_equal(pom_write(f, "small", 5, 0), 5);
    assert_int_equal(pom_fsync(f, 0), 0);
    assert_int_equal(pom_release(f), 0);
    assert_int_equal(tracts_of(ida, NULL), 0);
    assert_int_equal(tid(fs, ino), 0); /* inline again */
    read_all(fs, ino, got, 5);
    assert_memory_equal(got, "small", 5);
    pom_forget(fs, ino, 1);
    pom_close(fs);
    free(a);
    free(b);
    free(got);
}

/* ---- collapse, insert and zero ranges against a host file ------------- */

struct pair {
    pom_fs *fs;
    pom_file *f;
    pom_ino ino;
    int ref;              /* the reference file on the host */
    uint8_t *a, *b;       /* read buffers */
    size_t cap;
};

/* The host file's answer: 0 or -errno. */
static int ref_rc(int r)
{
    return r < 0 ? -errno : 0;
}

/* Both files hold the same bytes. */
static void pair_same(struct pair *p, const char *what)
{
    struct stat st;
    assert_int_equal(fstat(p->ref, &st), 0);
    size_t n = (size_t)st.st_size;
    assert_true(n <= p->cap);
    assert_int_equal(pread(p->ref, p->b, n, 0), (ssize_t)n);
    size_t got = 0;
    while (got < n) {
        ssize_t r = pom_read(p->f, p->a + got, XT_MIN(n - got, (size_t)(1u << 20)), (off_t)got);
        assert_true(r > 0);
        got += (size_t)r;
    }
    uint8_t extra;
    if (pom_read(p->f, &extra, 1, (off_t)n) != 0 || memcmp(p->a, p->b, n) != 0)
        fail_msg("%s: the bytes differ from the reference (size %zu)", what, n);
}

/* One fallocate on both: the same answer and the same bytes after it. */
static void pair_falloc(struct pair *p, int mode, uint64_t off, uint64_t len)
{
    char what[96];
    snprintf(what, sizeof what, "fallocate mode %#x off %llu len %llu", (unsigned)mode,
             (unsigned long long)off, (unsigned long long)len);
    int rb = ref_rc(fallocate(p->ref, mode, (off_t)off, (off_t)len));
    if (rb == -EOPNOTSUPP)
        skip(); /* the host file system cannot be the reference */
    int ra = pom_fallocate(p->f, mode, (off_t)off, (off_t)len);
    if (ra != rb)
        fail_msg("%s: %d, the reference %d", what, ra, rb);
    pair_same(p, what);
}

static void pair_write(struct pair *p, const uint8_t *buf, size_t n, uint64_t off)
{
    assert_int_equal(pwrite(p->ref, buf, n, (off_t)off), (ssize_t)n);
    assert_int_equal(pom_write(p->f, buf, n, (off_t)off), (ssize_t)n);
}

static void pair_truncate(struct pair *p, uint64_t size)
{
    assert_int_equal(ftruncate(p->ref, (off_t)size), 0);
    struct stat in = { .st_size = (off_t)size };
    assert_int_equal(pom_setattr(p->fs, p->ino, &in, POM_SET_SIZE, NULL), 0);
    pair_same(p, "truncate");
}

static void test_shift_ranges(void **state)
{
    (void)state;
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "shift");
    const uint64_t blk = POM_BLKSIZE;
    static const int modes[] = {
        0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
        FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
        FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE,
    };
    struct { const char *name; uint64_t start, span; } files[] = {
        { "inline", 40u << 10, 80u << 10 },
        { "blob", 6u << 20, 9u << 20 },
    };
    rng_state = base_seed();
    printf("seed %llu (XT_SEED=%llu repeats it)\n", (unsigned long long)rng_state,
           (unsigned long long)rng_state);
    for (size_t k = 0; k < 2; k++) {
        struct pair p = { .fs = fs, .cap = 64u << 20 };
        p.a = malloc(p.cap);
        p.b = malloc(p.cap);
        uint8_t *data = malloc(1u << 20);
        assert_non_null(p.a);
        assert_non_null(p.b);
        assert_non_null(data);
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/ref-%s", C.base, files[k].name);
        p.ref = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        assert_true(p.ref >= 0);
        struct stat st;
        assert_int_equal(pom_create(fs, dir, files[k].name, 0644, O_RDWR, NULL, &st, &p.f), 0);
        p.ino = st.st_ino;
        uint64_t span = files[k].span;
        for (uint64_t off = 0; off < files[k].start; off += 1u << 20) {
            size_t n = (size_t)XT_MIN(files[k].start - off, (uint64_t)(1u << 20));
            fill(data, n, (unsigned)(off >> 20) + 3);
            pair_write(&p, data, n, off);
        }
        /* Each mode where it must succeed, the alignment rules, then a mix. */
        pair_falloc(&p, FALLOC_FL_ZERO_RANGE, 3 * blk, 2 * blk + 100);
        pair_falloc(&p, FALLOC_FL_COLLAPSE_RANGE, 2 * blk, 3 * blk);
        pair_falloc(&p, FALLOC_FL_INSERT_RANGE, 5 * blk, 4 * blk);
        pair_falloc(&p, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, files[k].start, 8 * blk);
        pair_falloc(&p, FALLOC_FL_INSERT_RANGE, blk, span / 2 / blk * blk); /* past 64 KiB */
        pair_falloc(&p, FALLOC_FL_COLLAPSE_RANGE, 0, span / 4 / blk * blk);
        pair_falloc(&p, FALLOC_FL_COLLAPSE_RANGE, 3 * blk, 100);           /* EINVAL */
        pair_falloc(&p, FALLOC_FL_COLLAPSE_RANGE, 3 * blk + 1, blk);       /* EINVAL */
        pair_falloc(&p, FALLOC_FL_INSERT_RANGE, 1u << 30, blk);            /* EINVAL */
        assert_int_equal(pom_fallocate(p.f, FALLOC_FL_INSERT_RANGE, 0, (off_t)(POM_FILE_MAX - blk)),
                         -EFBIG);
        for (int step = 0; step < 60; step++) {
            assert_int_equal(fstat(p.ref, &st), 0);
            uint64_t size = (uint64_t)st.st_size;
            unsigned op = (unsigned)(rnd() % 10);
            uint64_t lim = XT_MAX(size + blk, span);
            uint64_t off, len;
            if (rnd() % 8) {
                off = rnd() % (lim / blk + 1) * blk;
                len = (rnd() % (span / blk / 4) + 1) * blk;
            } else {
                off = rnd() % lim;
                len = rnd() % (span / 4) + 1;
            }
            if (op < 7) {
                pair_falloc(&p, modes[op], off, len);
            } else if (op < 9) {
                size_t n = (size_t)XT_MIN(len, (uint64_t)(1u << 20));
                fill(data, n, (unsigned)step);
                pair_write(&p, data, n, off);
                pair_same(&p, "write");
            } else {
                pair_truncate(&p, rnd() % span);
            }
        }
        /* A fresh connection reads what the reference holds. */
        assert_int_equal(pom_release(p.f), 0);
        pom_fs *fs2 = conn(true);
        assert_int_equal(pom_lookup(fs2, POM_ROOT_INO, "shift", &st), 0);
        assert_int_equal(pom_lookup(fs2, st.st_ino, files[k].name, &st), 0);
        assert_int_equal(pom_file_open(fs2, p.ino, O_RDONLY, &p.f), 0);
        pair_same(&p, "after a fresh connection");
        assert_int_equal(pom_release(p.f), 0);
        pom_forget(fs2, p.ino, 1);
        pom_close(fs2);
        close(p.ref);
        free(p.a);
        free(p.b);
        free(data);
        pom_forget(fs, p.ino, 1);
    }
    pom_close(fs);
}

static int count_set(void *arg, const struct pom_blob_set *s)
{
    (void)s;
    ++*(uint64_t *)arg;
    return 0;
}

static uint64_t sets_now(pom_fs *fs)
{
    uint64_t n = 0;
    assert_int_equal(pom_blob_list(fs->blob, count_set, &n), 0);
    return n;
}

/* A collapse rewrites into a new set; the old one goes at the commit of
 * the row naming the new one; a failed collapse leaves the file and the
 * store as they were. */
static void test_shift_copy_on_write(void **state)
{
    (void)state;
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "shiftcow");
    const size_t n = 6u << 20, cut = 1u << 20;
    uint8_t *a = malloc(n), *got = malloc(n);
    assert_non_null(a);
    assert_non_null(got);
    fill(a, n, 11);
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, "f", 0644, O_RDWR, NULL, &st, &f), 0);
    pom_ino ino = st.st_ino;
    write_all(f, a, n);
    assert_int_equal(pom_fsync(f, 0), 0);
    assert_int_equal(pom_release(f), 0);
    uint64_t ida = tid(fs, ino);
    assert_int_equal(tracts_of(ida, NULL), 2);
    assert_int_equal(pom_file_open(fs, ino, O_RDWR, &f), 0);
    assert_int_equal(pom_fallocate(f, FALLOC_FL_COLLAPSE_RANGE, (off_t)cut, (off_t)cut), 0);
    uint64_t idb = tid(fs, ino);
    assert_true(idb != ida && idb != 0);
    assert_int_equal(pom_release(f), 0); /* the row names idb, not committed yet */
    assert_int_equal(tracts_of(ida, NULL), 2);
    assert_int_equal(tracts_of(idb, NULL), 2);
    assert_int_equal(pom_sync(fs), 0);
    assert_int_equal(tracts_of(ida, NULL), 0);
    memmove(a + cut, a + 2 * cut, n - 2 * cut);
    read_all(fs, ino, got, n - cut);
    assert_memory_equal(got, a, n - cut);
    /* The copy fails part-way: nothing changes, no set stays. */
    uint64_t before = sets_now(fs);
    assert_int_equal(pom_file_open(fs, ino, O_RDWR, &f), 0);
    pom_blob_fault_after(fs->blob, 4, ENOSPC);
    assert_int_equal(pom_fallocate(f, FALLOC_FL_INSERT_RANGE, 0, (off_t)cut), -ENOSPC);
    pom_blob_fault_after(fs->blob, 0, 0);
    assert_int_equal(tid(fs, ino), idb);
    assert_int_equal(sets_now(fs), before);
    assert_int_equal(pom_release(f), 0);
    read_all(fs, ino, got, n - cut);
    assert_memory_equal(got, a, n - cut);
    pom_forget(fs, ino, 1);
    pom_close(fs);
    free(a);
    free(got);
}

static void test_failed_migration_leaves_no_set(void **state)
{
    (void)state;
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "failmig");
    uint8_t *a = malloc(POM_INLINE_MAX + 1), *got = malloc(POM_INLINE_MAX);
    assert_non_null(a);
    assert_non_null(got);
    fill(a, POM_INLINE_MAX + 1, 9);
    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, dir, "f", 0644, O_RDWR, NULL, &st, &f), 0);
    write_all(f, a, POM_INLINE_MAX);
    uint64_t before = sets_now(fs);
    /* The migration opens (creates) its tract file, then its write fails:
     * a set exists on disk that no row will name. */
    pom_blob_fault_after(fs->blob, 2, ENOSPC);
    assert_int_equal(pom_write(f, a + POM_INLINE_MAX, 1, POM_INLINE_MAX), -ENOSPC);
    pom_blob_fault_after(fs->blob, 0, 0);
    assert_int_equal(sets_now(fs), before);
    assert_int_equal(tid(fs, st.st_ino), 0); /* still inline */
    assert_int_equal(pom_release(f), 0);
    read_all(fs, st.st_ino, got, POM_INLINE_MAX);
    assert_memory_equal(got, a, POM_INLINE_MAX);
    pom_forget(fs, st.st_ino, 1);
    pom_close(fs);
    free(a);
    free(got);
}

struct trunc_race {
    pom_fs *fs;
    pom_file *f;
    const uint8_t *data;
    size_t n;
    int rounds;
};

static void *race_writer(void *arg)
{
    struct trunc_race *r = arg;
    for (int i = 0; i < r->rounds; i++)
        if (pom_write(r->f, r->data, r->n, 0) != (ssize_t)r->n)
            return (void *)1;
    return NULL;
}

static void test_write_races_trunc(void **state)
{
    (void)state;
    pom_fs *fs = conn(true);
    pom_ino dir = fresh_dir(fs, "wtrunc");
    size_t n = 4 * POM_INLINE_MAX; /* a blob file at every write */
    uint8_t *a = malloc(n), *got = malloc(n);
    assert_non_null(a);
    assert_non_null(got);
    fill(a, n, 11);
    struct stat st, in;
    pom_file *w, *t;
    assert_int_equal(pom_create(fs, dir, "f", 0644, O_RDWR, NULL, &st, &w), 0);
    assert_int_equal(pom_file_open(fs, st.st_ino, O_RDWR, &t), 0);
    struct trunc_race r = { fs, w, a, n, 200 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, race_writer, &r), 0);
    memset(&in, 0, sizeof in);
    for (int i = 0; i < 200; i++) {
        assert_int_equal(pom_setattr(fs, st.st_ino, &in, POM_SET_SIZE, NULL), 0);
        assert_int_equal(pom_flush(t), 0);
    }
    void *wrc;
    assert_int_equal(pthread_join(th, &wrc), 0);
    assert_null(wrc);
    assert_int_equal(pom_flush(w), 0);
    assert_int_equal(pom_release(t), 0);
    assert_int_equal(pom_release(w), 0);
    assert_int_equal(pom_getattr(fs, st.st_ino, &st), 0);
    assert_true(st.st_size == 0 || st.st_size == (off_t)n);
    if (st.st_size) {
        read_all(fs, st.st_ino, got, n);
        assert_memory_equal(got, a, n);
    }
    pom_forget(fs, st.st_ino, 1);
    pom_close(fs);
    free(a);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migration_and_remount),
        cmocka_unit_test(test_truncate_both_ways),
        cmocka_unit_test(test_sparse_and_limits),
        cmocka_unit_test(test_fallocate),
        cmocka_unit_test(test_shift_ranges),
        cmocka_unit_test(test_rename_over_and_fsync_crash),
        cmocka_unit_test(test_rewrite_is_copy_on_write),
        cmocka_unit_test(test_failed_migration_leaves_no_set),
        cmocka_unit_test(test_shift_copy_on_write),
        cmocka_unit_test(test_write_races_trunc),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
