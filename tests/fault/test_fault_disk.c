/*
 * test_fault_disk.c -- a full disk, end to end: real pom-mdsl and
 * pom-mds processes, libpomegranate as the client.
 *
 *   - mdsl_full: the MDSL's folder is a 32 MiB tmpfs (with a 4 MiB ballast
 *     file). The client writes 8 KiB files and syncs every batch until an
 *     error. Checks: the error is a clean -ENOSPC or -EIO (from pom_sync /
 *     pom_fsync / pom_release; never a hang past the client's retry window),
 *     neither daemon crashed, every file of an acknowledged batch reads back
 *     exactly, from a new connection and again after both daemons restarted;
 *     after space is freed (unlinks, the ballast removed, a restart so the
 *     MDSL reopens its index, the volume grown) new files write, sync and
 *     read back.
 *   - blob_full: the blob tier's folder is an 8 MiB tmpfs. A 1 MiB file is
 *     written and fsynced, then another file grows until the blob tier says
 *     -ENOSPC (from pom_write or pom_fsync). The first file and the part of
 *     the second that was fsynced before the disk filled read back intact.
 *
 * Needs root to mount tmpfs: without it the binary exits 77 (CTest: skip).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "fault_util.h"
#include "pom_proc.h"
#include "pomegranate.h"
#include "xt_common.h"

#define FSID      21
#define FILE_LEN  (8u << 10)
#define BATCH     32
#define MAX_FILES 20000
#define FILL_S    60        /* give up filling after this long */

static struct fault_cluster C;
static const char *const MDSL_ARGS[] = { "--seg-size", "1M", "--gc-interval", "200",
                                         "--gc-rate", "0", NULL };

static pom_fs *conn(void)
{
    struct pom_opts o = { .call_timeout_ms = 5000, .retry_ms = 5000 };
    pom_fs *fs = NULL;
    assert_int_equal(pom_connect_mds_opts(C.mds_addr, FSID, &o, &fs), 0);
    return fs;
}

static void restart(void)
{
    assert_int_equal(fault_cluster_stop(&C), 0);
    assert_int_equal(fault_start_mdsl(&C, NULL, MDSL_ARGS), 0);
    assert_int_equal(fault_start_mds(&C, NULL, 100), 0);
}

/* Every file of [0, n) reads back exactly; returns how many did not. */
static uint32_t check_all(pom_fs *fs, uint32_t from, uint32_t n, const bool *gone)
{
    uint32_t bad = 0;
    char name[32];
    for (uint32_t i = from; i < n; i++) {
        if (gone && gone[i])
            continue;
        snprintf(name, sizeof name, "f%05u", i);
        int rc = fault_check_file(fs, POM_ROOT_INO, name, i, FILE_LEN);
        if (rc != 0 && bad++ < 5)
            fprintf(stderr, "disk: %s: %s\n", name, strerror(-rc));
    }
    return bad;
}

/* Free KiB on the MDSL's tmpfs at dir (reported: what the recovery had
 * to work with). */
static unsigned long long free_kib(const char *dir)
{
    struct statvfs v;
    return statvfs(dir, &v) ? 0 : (unsigned long long)v.f_bavail * v.f_frsize >> 10;
}

static const char *where_name[] = { "create/write", "release", "sync" };

static void mdsl_full(void **state)
{
    (void)state;
    char mdsl_dir[400], ballast[420];
    snprintf(mdsl_dir, sizeof mdsl_dir, "%s/mdsl", C.base);
    snprintf(ballast, sizeof ballast, "%s/ballast", mdsl_dir);
    int bfd = open(ballast, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(bfd >= 0);
    assert_int_equal(posix_fallocate(bfd, 0, 4u << 20), 0);
    close(bfd);
    assert_int_equal(fault_start_mdsl(&C, NULL, MDSL_ARGS), 0);
    assert_int_equal(fault_start_mds(&C, NULL, 100), 0);

    pom_fs *fs = conn();
    uint32_t acked = 0, i = 0;
    int err = 0, where = -1;
    uint64_t t0 = xt_mono_ns(), worst_ms = 0;
    char name[32];
    while (i < MAX_FILES && xt_mono_ns() - t0 < (uint64_t)FILL_S * 1000000000u) {
        uint64_t c0 = xt_mono_ns();
        snprintf(name, sizeof name, "f%05u", i);
        int rc = fault_write_file(fs, POM_ROOT_INO, name, i, FILE_LEN);
        if (rc < 0) {
            err = rc, where = rc == -ENOSPC || rc == -EIO ? 1 : 0;
            break;
        }
        i++;
        if (i % BATCH == 0) {
            rc = pom_sync(fs);
            uint64_t ms = (xt_mono_ns() - c0) / 1000000u;
            worst_ms = ms > worst_ms ? ms : worst_ms;
            if (rc < 0) {
                err = rc, where = 2;
                break;
            }
            acked = i;
        }
    }
    printf("disk: %u files written, %u acknowledged (synced), then %s from %s after %.1f s "
           "(slowest batch %llu ms)\n",
           i, acked, err ? strerror(-err) : "no error", where >= 0 ? where_name[where] : "-",
           (double)(xt_mono_ns() - t0) / 1e9, (unsigned long long)worst_ms);
    assert_true(err == -ENOSPC || err == -EIO);
    assert_true(acked > 0);
    assert_true(pom_proc_alive(C.mds));
    assert_true(pom_proc_alive(C.mdsl));

    /* A second sync must not hang. It fails the same way, or -- when the
     * retried commit found room since (the MDSL cuts a failed append back;
     * seen about once in 8 runs) -- succeeds: then every file written so
     * far is acknowledged and must read back below. */
    int again = pom_sync(fs);
    printf("disk: a second pom_sync answers %s\n", again ? strerror(-again) : "ok");
    assert_true(again == 0 || again == -ENOSPC || again == -EIO);
    if (again == 0)
        acked = i;
    /* One file: create and write succeed (the MDS holds them in memory);
     * fsync is where the full disk shows, and close too once the MDS knows
     * the disk is full (it refuses data it cannot store: the client sends
     * the bytes at close). */
    struct stat st;
    pom_file *f = NULL;
    assert_int_equal(pom_create(fs, POM_ROOT_INO, "late", 0644, O_RDWR | O_CREAT, NULL, &st, &f),
                     0);
    assert_int_equal(pom_write(f, "late", 4, 0), 4);
    int fs_rc = pom_fsync(f, 0);
    int rel_rc = pom_release(f);
    pom_forget(fs, st.st_ino, 1);
    printf("disk: on the full disk pom_fsync answers %s, pom_release %s\n", strerror(-fs_rc),
           rel_rc ? strerror(-rel_rc) : "ok");
    assert_true(fs_rc == -ENOSPC || fs_rc == -EIO || (again == 0 && fs_rc == 0));
    assert_true(rel_rc == 0 || rel_rc == fs_rc);
    pom_close(fs);

    fs = conn();
    assert_int_equal(check_all(fs, 0, acked, NULL), 0);
    pom_close(fs);

    restart();
    fs = conn();
    assert_int_equal(check_all(fs, 0, acked, NULL), 0);

    /* Free space: unlink half of the acknowledged files (needs a commit,
     * which may itself fail on the full disk), drop the ballast. */
    bool *gone = xt_calloc(MAX_FILES, 1);
    assert_non_null(gone);
    uint32_t unlinked = 0;
    for (uint32_t k = 0; k < acked; k += 2) {
        snprintf(name, sizeof name, "f%05u", k);
        if (pom_unlink(fs, POM_ROOT_INO, name) == 0)
            gone[k] = true, unlinked++;
    }
    int usync = pom_sync(fs);
    printf("disk: %u unlinks on the full disk, their sync answers %s\n", unlinked,
           usync ? strerror(-usync) : "ok");
    assert_int_equal(unlink(ballast), 0);
    /* Without a restart: the MDS retries its commits, the MDSL cut back
     * its failed appends; does the next sync get through? (Reported, not
     * required: a store whose fsync or index write failed needs a reopen.) */
    int rsync = -EAGAIN;
    for (int k = 0; k < 20 && rsync != 0; k++) {
        rsync = pom_sync(fs);
        if (rsync != 0)
            usleep(100000);
    }
    printf("disk: after freeing space, without a restart pom_sync answers %s (%llu KiB free)\n",
           rsync ? strerror(-rsync) : "ok", free_kib(mdsl_dir));
    pom_close(fs);
    /* The operator also grows the volume. Required from here on: writes
     * work again. Without the growth this was marginal: the freed 4 MiB
     * is less than the live rows, and a slice whose deltas pass
     * image_ratio is rewritten as a whole image (docs/mds-commit.md)
     * while GC copies live rows out of old segments -- free space after
     * the restart ranged from 3.8 to 15 MiB between runs, and CI once
     * ran out. */
    assert_int_equal(fault_grow_tmpfs(mdsl_dir, "96m"), 0);
    restart();
    fs = conn();

    /* Writes work again; what survives is intact. */
    uint32_t base = i + 1000;
    for (uint32_t k = 0; k < 4 * BATCH; k++) {
        snprintf(name, sizeof name, "f%05u", base + k);
        assert_int_equal(fault_write_file(fs, POM_ROOT_INO, name, base + k, FILE_LEN), 0);
    }
    int nsync = pom_sync(fs);
    printf("disk: %u new files after the restart, their sync answers %s (%llu KiB free)\n",
           4 * BATCH, nsync ? strerror(-nsync) : "ok", free_kib(mdsl_dir));
    assert_int_equal(nsync, 0);
    assert_int_equal(check_all(fs, base, base + 4 * BATCH, NULL), 0);
    assert_int_equal(check_all(fs, 0, acked, gone), 0);
    printf("disk: after freeing space %u new files synced and read back\n", 4 * BATCH);
    pom_close(fs);
    xt_free(gone);
    assert_int_equal(fault_cluster_stop(&C), 0);
}

/* Writes len bytes of pattern i at off through f in 64 KiB pieces. */
static int write_range(pom_file *f, uint32_t i, uint64_t off, uint64_t len)
{
    static uint8_t buf[64 << 10];
    for (uint64_t o = off; o < off + len; o += sizeof buf) {
        size_t n = off + len - o < sizeof buf ? (size_t)(off + len - o) : sizeof buf;
        for (size_t k = 0; k < n; k++)
            buf[k] = fault_pattern(i, o + k);
        ssize_t w = pom_write(f, buf, n, (off_t)o);
        if (w < 0)
            return (int)w;
        if ((size_t)w != n)
            return -EIO;
    }
    return 0;
}

/* The first len bytes of file `name` are pattern i. */
static int check_prefix(pom_fs *fs, const char *name, uint32_t i, uint64_t len)
{
    struct stat st;
    int rc = pom_lookup(fs, POM_ROOT_INO, name, &st);
    if (rc < 0)
        return rc;
    pom_file *f = NULL;
    rc = (uint64_t)st.st_size < len ? -EBADMSG : pom_file_open(fs, st.st_ino, O_RDONLY, &f);
    static uint8_t buf[64 << 10];
    for (uint64_t o = 0; rc == 0 && o < len; o += sizeof buf) {
        size_t n = len - o < sizeof buf ? (size_t)(len - o) : sizeof buf;
        if (pom_read(f, buf, n, (off_t)o) != (ssize_t)n)
            rc = -EIO;
        for (size_t k = 0; rc == 0 && k < n; k++)
            if (buf[k] != fault_pattern(i, o + k))
                rc = -EBADMSG;
    }
    if (f)
        pom_release(f);
    pom_forget(fs, st.st_ino, 1);
    return rc;
}

static void blob_full(void **state)
{
    (void)state;
    char blobdir[400];
    snprintf(blobdir, sizeof blobdir, "%s/blob", C.base);
    assert_int_equal(fault_mount_tmpfs(blobdir, "8m"), 0);
    assert_int_equal(fault_start_mdsl(&C, NULL, MDSL_ARGS), 0);
    assert_int_equal(fault_start_mds(&C, NULL, 100), 0);
    pom_fs *fs = conn();
    assert_int_equal(pom_set_blob(fs, "local", blobdir), 0);

    struct stat st;
    pom_file *f;
    assert_int_equal(pom_create(fs, POM_ROOT_INO, "one", 0644, O_RDWR | O_CREAT, NULL, &st, &f),
                     0);
    assert_int_equal(write_range(f, 1, 0, 1u << 20), 0);
    assert_int_equal(pom_fsync(f, 0), 0);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, st.st_ino, 1);

    assert_int_equal(pom_create(fs, POM_ROOT_INO, "two", 0644, O_RDWR | O_CREAT, NULL, &st, &f),
                     0);
    uint64_t synced = 0, chunk = 512u << 10;
    int err = 0;
    const char *where = "-";
    for (uint64_t off = 0; off < (64u << 20); off += chunk) {
        if ((err = write_range(f, 2, off, chunk)) < 0) {
            where = "pom_write";
            break;
        }
        if ((err = pom_fsync(f, 0)) < 0) {
            where = "pom_fsync";
            break;
        }
        synced = off + chunk;
    }
    int rel = pom_release(f);
    pom_forget(fs, st.st_ino, 1);
    printf("blob: %llu KiB fsynced, then %s from %s; release answers %s\n",
           (unsigned long long)(synced >> 10), strerror(-err), where,
           rel ? strerror(-rel) : "ok");
    assert_int_equal(err, -ENOSPC);
    assert_true(synced >= chunk);
    assert_true(pom_proc_alive(C.mds));
    pom_close(fs);

    fs = conn();
    assert_int_equal(pom_set_blob(fs, "local", blobdir), 0);
    assert_int_equal(check_prefix(fs, "one", 1, 1u << 20), 0);
    assert_int_equal(check_prefix(fs, "two", 2, synced), 0);
    pom_close(fs);
    assert_int_equal(fault_cluster_stop(&C), 0);
}

static int setup(void **state)
{
    (void)state;
    if (fault_cluster_init(&C, "fdisk", POM_MDSL_BIN, POM_MDS_BIN))
        return -1;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/mdsl", C.base);
    return fault_mount_tmpfs(dir, "32m") ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    char dir[400];
    snprintf(dir, sizeof dir, "%s/blob", C.base);
    fault_umount(dir);
    fault_cluster_destroy(&C);
    return 0;
}

int main(void)
{
    fault_env_init();
    /* Mounting needs CAP_SYS_ADMIN: probe once, skip (77) without it. */
    char probe[256];
    if (pom_tmpdir("fprobe", probe, sizeof probe) == 0) {
        int rc = fault_mount_tmpfs(probe, "1m");
        fault_umount(probe);
        pom_rm_rf(probe);
        if (rc < 0) {
            printf("skip: cannot mount tmpfs (%s)\n", strerror(-rc));
            return 77;
        }
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(mdsl_full, setup, teardown),
        cmocka_unit_test_setup_teardown(blob_full, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
