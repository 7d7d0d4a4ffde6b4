/*
 * test_pom_blob.c -- the blob tier's local backend (client/pom_blob.h) on
 * temporary folders, no daemons:
 *   - a seeded random mix of writes, reads, truncates and punches over 3
 *     folders with 64 KiB tracts, checked byte for byte against a shadow
 *     copy (seed printed; XT_SEED=N repeats a run);
 *   - EIO never zeros: a set without a record, or a written tract whose
 *     file is gone (also seen from another store's folders), reads -EIO;
 *     punched and cut-off tracts read zeros again;
 *   - holes read as zeros and create no tract file; placement: tract t of
 *     uuid u is in folder (hash(u) + t) mod 3 under the documented path;
 *   - truncate removes later tracts and cuts the last; punch of a whole
 *     tract removes it; delete removes everything; stat counts;
 *   - two opens of one uuid share one object; fsync; allocate;
 *   - 4 threads writing and reading stripes of one shared file (more
 *     tracts than cached fds) while a fifth truncates its own range;
 *   - limits: write at 2^40 works, at POM_BLOB_FILE_MAX -EFBIG; backends
 *     mdsl without a view -EINVAL, rados settings without a pool, with an
 *     unknown key or a missing conf refused, bad tract sizes -EINVAL;
 *   - I/O errors by the fault hook come back as -EIO and leave the store
 *     usable; a failed fsync is sticky until the file is reopened;
 *     countdown allocation failure over open/write/fsync/close;
 *   - pom_blob_list: an empty tier lists nothing; seeded random sets
 *     (striped over the 3 folders, some sparse, some deleted, one cut to
 *     0) are listed exactly once each, in id order, with their tract
 *     counts, bytes and allocation as pom_blob_stat says; other fsids,
 *     junk names and an id folder under the wrong hash folders are not
 *     sets; fn's non-zero return stops the walk; allocation failures;
 *   - the reclaimer's calls: pom_blob_touch makes an aged set young again
 *     (and is fine for a set with no tract), the reclaimer lock is taken
 *     once (a second taker, even in this process, is refused) and free
 *     again after the unlock.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pom_blob.h"
#include "pom_proc.h"
#include "pom_rand.h"
#include "xt_common.h"

#define TS    (64u << 10)
#define FSID  5

static char base[PATH_MAX];
static char folders[3][PATH_MAX + 8];
static char list[3 * PATH_MAX + 32];

static int setup(void **state)
{
    (void)state;
    if (pom_tmpdir("blob", base, sizeof base) < 0)
        return -1;
    for (int i = 0; i < 3; i++)
        snprintf(folders[i], sizeof folders[i], "%s/f%d", base, i);
    snprintf(list, sizeof list, "%s:%s:%s", folders[0], folders[1], folders[2]);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pom_rm_rf(base);
    return 0;
}

static pom_blob *open_store(const char *path, uint64_t ts)
{
    struct pom_blob_conf c = { .backend = "local", .path = path, .fsid = FSID, .tract_size = ts };
    pom_blob *b = NULL;
    assert_int_equal(pom_blob_open(&c, &b), 0);
    return b;
}

/* The documented path of tract t of uuid (docs/format-blob.md). */
static void tract_file(uint64_t uuid, uint32_t t, char *p, size_t cap)
{
    uint64_t h = pom_blob_hash(uuid);
    snprintf(p, cap, "%s/%08x/%02x/%02x/%016llx/%06x/%08x", folders[(h + t) % 3], FSID,
             (unsigned)(h >> 56), (unsigned)((h >> 48) & 0xff), (unsigned long long)uuid,
             t >> 10, t);
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void check_equal(pom_blob_file *f, const uint8_t *shadow, size_t len)
{
    uint8_t *got = malloc(len + 1);
    assert_non_null(got);
    assert_int_equal(pom_blob_pread(f, got, len, 0), (ssize_t)len);
    assert_memory_equal(got, shadow, len);
    free(got);
}

static size_t below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

static void test_random_ops(void **state)
{
    (void)state;
    uint64_t seed = base_seed();
    printf("seed %llu (XT_SEED=%llu repeats it)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    rng_state = seed;
    pom_blob *b = open_store(list, TS);
    pom_blob_file *f;
    assert_int_equal(pom_blob_file_open(b, 1001, &f), 0);
    assert_int_equal(pom_blob_create(f), 0);
    const size_t max = 6 * TS + 1234;
    uint8_t *shadow = calloc(1, max), *buf = malloc(max);
    assert_non_null(shadow);
    assert_non_null(buf);
    size_t len = 0; /* bytes past it are zero in the shadow and must read 0 */
    for (int step = 0; step < 400; step++) {
        size_t off = below(max), n = below(max - off + 1);
        switch (below(6)) {
        case 0: case 1: case 2:
            for (size_t i = 0; i < n; i++)
                buf[i] = (uint8_t)rnd();
            assert_int_equal(pom_blob_pwrite(f, buf, n, off), (ssize_t)n);
            memcpy(shadow + off, buf, n);
            if (n && off + n > len)
                len = off + n;
            break;
        case 3:
            assert_int_equal(pom_blob_pread(f, buf, n, off), (ssize_t)n);
            assert_memory_equal(buf, shadow + off, n);
            break;
        case 4:
            if (below(4) == 0) {
                assert_int_equal(pom_blob_truncate(f, off), 0);
                memset(shadow + off, 0, max - off);
                len = XT_MIN(len, off);
            }
            break;
        case 5:
            assert_int_equal(pom_blob_punch(f, off, n), 0);
            memset(shadow + off, 0, n);
            break;
        }
        if (step % 50 == 0)
            assert_int_equal(pom_blob_fsync(f), 0);
    }
    check_equal(f, shadow, max);
    /* Reopened from scratch (no cached fds): the same bytes. */
    pom_blob_file_close(f);
    pom_blob_close(b);
    b = open_store(list, TS);
    assert_int_equal(pom_blob_file_open(b, 1001, &f), 0);
    check_equal(f, shadow, max);
    pom_blob_file_close(f);
    assert_int_equal(pom_blob_delete(b, 1001), 0);
    struct pom_blob_stat st;
    assert_int_equal(pom_blob_stat(b, 1001, &st), 0);
    assert_int_equal(st.tracts, 0);
    pom_blob_close(b);
    free(shadow);
    free(buf);
}

static void test_holes_placement_truncate(void **state)
{
    (void)state;
    pom_blob *b = open_store(list, TS);
    pom_blob_file *f, *g;
    const uint64_t u = 77;
    assert_int_equal(pom_blob_file_open(b, u, &f), 0);
    assert_int_equal(pom_blob_file_open(b, u, &g), 0);
    assert_ptr_equal(f, g); /* shared */
    pom_blob_file_close(g);
    uint8_t buf[100], z[100] = { 0 };
    /* A set the store has no record of answers EIO; once created, a read
     * of a never-written range gives zeros and makes no tract file. */
    assert_int_equal(pom_blob_pread(f, buf, sizeof buf, 5 * TS), -EIO);
    assert_int_equal(pom_blob_create(f), 0);
    assert_int_equal(pom_blob_create(f), 0); /* idempotent */
    assert_int_equal(pom_blob_pread(f, buf, sizeof buf, 5 * TS), (ssize_t)sizeof buf);
    assert_memory_equal(buf, z, sizeof buf);
    struct pom_blob_stat st;
    assert_int_equal(pom_blob_stat(b, u, &st), 0);
    assert_int_equal(st.tracts, 0);
    /* One byte in tracts 0, 2, 3 and 1100 (a second group folder). */
    const uint32_t ts[] = { 0, 2, 3, 1100 };
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(pom_blob_pwrite(f, "x", 1, (uint64_t)ts[i] * TS + 7), 1);
    char p[PATH_MAX + 64];
    for (uint32_t t = 0; t < 5; t++) {
        tract_file(u, t, p, sizeof p);
        assert_int_equal(exists(p), t == 0 || t == 2 || t == 3);
    }
    tract_file(u, 1100, p, sizeof p);
    assert_true(exists(p));
    assert_int_equal(pom_blob_stat(b, u, &st), 0);
    assert_int_equal(st.tracts, 4);
    assert_true(st.alloc_bytes < 4 * (uint64_t)TS); /* sparse: a block each */
    /* Truncate into tract 2: 3 and 1100 go, 2 is cut to 3 bytes. */
    assert_int_equal(pom_blob_truncate(f, 2 * (uint64_t)TS + 3), 0);
    tract_file(u, 3, p, sizeof p);
    assert_false(exists(p));
    tract_file(u, 1100, p, sizeof p);
    assert_false(exists(p));
    tract_file(u, 2, p, sizeof p);
    struct stat s;
    assert_int_equal(stat(p, &s), 0);
    assert_int_equal(s.st_size, 3);
    assert_int_equal(pom_blob_pread(f, buf, 10, 2 * (uint64_t)TS), 10);
    assert_memory_equal(buf, z, 10); /* the byte at 7 is gone */
    /* Punch of a whole tract removes it; a partial punch zeros. */
    assert_int_equal(pom_blob_pwrite(f, "abcdef", 6, 0), 6);
    assert_int_equal(pom_blob_punch(f, 1, 2), 0);
    assert_int_equal(pom_blob_pread(f, buf, 6, 0), 6);
    assert_memory_equal(buf, "a\0\0def", 6);
    assert_int_equal(pom_blob_punch(f, 2 * (uint64_t)TS, TS), 0);
    tract_file(u, 2, p, sizeof p);
    assert_false(exists(p));
    /* Allocate: space reserved, still zeros. */
    assert_int_equal(pom_blob_allocate(f, 9 * (uint64_t)TS, TS), 0);
    assert_int_equal(pom_blob_pread(f, buf, 100, 9 * (uint64_t)TS + 50), 100);
    assert_memory_equal(buf, z, 100);
    assert_int_equal(pom_blob_fsync(f), 0);
    pom_blob_file_close(f);
    assert_int_equal(pom_blob_delete(b, u), 0);
    assert_int_equal(pom_blob_stat(b, u, &st), 0);
    assert_int_equal(st.tracts, 0);
    pom_blob_close(b);
}

/* EIO never zeros (pom_blob.h invariant (5)): a tract written and then
 * lost, or any tract of a set this store has no record of (another host's
 * folder), reads -EIO; real holes (never written, punched, cut off) read
 * zeros. Before the map, every case here read zeros. */
static void test_eio_never_zeros(void **state)
{
    (void)state;
    pom_blob *b = open_store(list, TS);
    pom_blob_file *f;
    const uint64_t u = 88;
    assert_int_equal(pom_blob_file_open(b, u, &f), 0);
    uint8_t buf[100], z[100] = { 0 };
    assert_int_equal(pom_blob_pwrite(f, "a", 1, 0), 1);
    assert_int_equal(pom_blob_pwrite(f, "b", 1, 2 * (uint64_t)TS), 1);
    assert_int_equal(pom_blob_pwrite(f, "c", 1, 3 * (uint64_t)TS), 1);
    assert_int_equal(pom_blob_fsync(f), 0);
    assert_int_equal(pom_blob_pread(f, buf, 10, TS), 10); /* never written */
    assert_memory_equal(buf, z, 10);
    char p[PATH_MAX + 64];
    tract_file(u, 2, p, sizeof p);
    assert_int_equal(unlink(p), 0); /* the disk lost it */
    pom_blob_file_close(f);
    assert_int_equal(pom_blob_file_open(b, u, &f), 0); /* no cached fd */
    assert_int_equal(pom_blob_pread(f, buf, 10, 2 * (uint64_t)TS), -EIO);
    static uint8_t whole[3 * TS];
    assert_int_equal(pom_blob_pread(f, whole, sizeof whole, 0), -EIO); /* a range over it */
    assert_int_equal(pom_blob_pread(f, buf, 1, 3 * (uint64_t)TS), 1);
    assert_int_equal(buf[0], 'c');
    /* A rewrite makes it whole again; punch and truncate make real holes. */
    assert_int_equal(pom_blob_pwrite(f, "B", 1, 2 * (uint64_t)TS), 1);
    assert_int_equal(pom_blob_pread(f, buf, 1, 2 * (uint64_t)TS), 1);
    assert_int_equal(buf[0], 'B');
    assert_int_equal(pom_blob_punch(f, 2 * (uint64_t)TS, TS), 0);
    assert_int_equal(pom_blob_pread(f, buf, 10, 2 * (uint64_t)TS), 10);
    assert_memory_equal(buf, z, 10);
    assert_int_equal(pom_blob_truncate(f, TS), 0);
    assert_int_equal(pom_blob_pread(f, buf, 10, 3 * (uint64_t)TS), 10);
    assert_memory_equal(buf, z, 10);
    assert_int_equal(pom_blob_fsync(f), 0);
    pom_blob_file_close(f);
    /* Another host's view (other folders): the set is unknown there. */
    char other[PATH_MAX + 16];
    snprintf(other, sizeof other, "%s/other", base);
    pom_blob *o = open_store(other, TS);
    assert_int_equal(pom_blob_file_open(o, u, &f), 0);
    assert_int_equal(pom_blob_pread(f, buf, 1, 0), -EIO);
    assert_int_equal(pom_blob_pread(f, buf, 1, TS), -EIO);
    pom_blob_file_close(f);
    pom_blob_close(o);
    /* A deleted set is unknown again. */
    assert_int_equal(pom_blob_delete(b, u), 0);
    assert_int_equal(pom_blob_file_open(b, u, &f), 0);
    assert_int_equal(pom_blob_pread(f, buf, 1, 0), -EIO);
    pom_blob_file_close(f);
    pom_blob_close(b);
}

static void test_limits_and_backends(void **state)
{
    (void)state;
    pom_blob *b = open_store(folders[0], 0);
    assert_int_equal(pom_blob_tract_size(b), POM_BLOB_TRACT_SIZE);
    pom_blob_file *f;
    assert_int_equal(pom_blob_file_open(b, 9, &f), 0);
    uint8_t buf[8];
    assert_int_equal(pom_blob_pwrite(f, "12345678", 8, UINT64_C(1) << 40), 8);
    assert_int_equal(pom_blob_pread(f, buf, 8, UINT64_C(1) << 40), 8);
    assert_memory_equal(buf, "12345678", 8);
    assert_int_equal(pom_blob_pwrite(f, "x", 1, POM_BLOB_FILE_MAX), -EFBIG);
    assert_int_equal(pom_blob_pwrite(f, "xyz", 3, POM_BLOB_FILE_MAX - 1), 1); /* what fits */
    assert_int_equal(pom_blob_truncate(f, POM_BLOB_FILE_MAX + 1), -EFBIG);
    assert_int_equal(pom_blob_truncate(f, 0), 0);
    struct pom_blob_stat st;
    assert_int_equal(pom_blob_stat(b, 9, &st), 0);
    assert_int_equal(st.tracts, 0);
    pom_blob_file_close(f);
    pom_blob_close(b);

    /* mdsl without a cluster view (pom_set_blob's way) is refused */
    struct pom_blob_conf c = { .backend = "mdsl", .path = "", .fsid = 1 };
    pom_blob *x = (pom_blob *)&c;
    assert_int_equal(pom_blob_open(&c, &x), -EINVAL);
    assert_null(x);
    /* rados: settings checked before any connection (a running Ceph is
     * test_pomfs_rados's); a conf file that is not there fails at once. */
    c.path = base;
    c.backend = "rados";
    assert_int_equal(pom_blob_open(&c, &x), -EINVAL); /* a folder, no pool= */
    c.path = "pool=p,colour=red";
    assert_int_equal(pom_blob_open(&c, &x), -EINVAL);
    c.path = "pool=p,conf=";
    assert_int_equal(pom_blob_open(&c, &x), -EINVAL);
    c.path = "pool=p,conf=/proc/pom-no-such-ceph.conf";
    assert_true(pom_blob_open(&c, &x) < 0);
    assert_null(x);
    c.path = base;
    c.backend = "nfs";
    assert_int_equal(pom_blob_open(&c, &x), -EINVAL);
    c.backend = "local";
    c.tract_size = 3u << 20;
    assert_int_equal(pom_blob_open(&c, &x), -EINVAL);
    c.tract_size = 0;
    c.path = "";
    assert_int_equal(pom_blob_open(&c, &x), -EINVAL);
    c.path = "/proc/pom-no-such-folder";
    assert_true(pom_blob_open(&c, &x) < 0);
}

static void test_faults(void **state)
{
    (void)state;
    pom_blob *b = open_store(list, TS);
    pom_blob_file *f;
    assert_int_equal(pom_blob_file_open(b, 31, &f), 0);
    uint8_t data[3 * TS], got[3 * TS];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 13);
    assert_int_equal(pom_blob_pwrite(f, data, sizeof data, 0), (ssize_t)sizeof data);
    for (uint64_t n = 1; n <= 8; n++) {
        pom_blob_fault_after(b, n, EIO);
        ssize_t w = pom_blob_pwrite(f, data, sizeof data, 0);
        assert_true(w == -EIO || w == (ssize_t)TS || w == 2 * (ssize_t)TS ||
                    w == (ssize_t)sizeof data);
        pom_blob_fault_after(b, n, EIO);
        ssize_t r = pom_blob_pread(f, got, sizeof got, 0);
        assert_true(r == -EIO || r == (ssize_t)sizeof got);
        pom_blob_fault_after(b, n, EIO);
        int rc = pom_blob_fsync(f);
        assert_true(rc == -EIO || rc == 0);
    }
    pom_blob_fault_after(b, 0, 0);
    pom_blob_file_close(f); /* the loop's failed fsyncs made it refuse writes */
    assert_int_equal(pom_blob_file_open(b, 31, &f), 0);
    /* A failed fsync is sticky for the open file: writes and fsyncs answer
     * it (the host may have dropped the pages it could not write). */
    assert_int_equal(pom_blob_pwrite(f, data, 1, 0), 1);
    pom_blob_fault_after(b, 1, EIO);
    assert_int_equal(pom_blob_fsync(f), -EIO);
    assert_int_equal(pom_blob_pwrite(f, data, 1, 0), -EIO);
    assert_int_equal(pom_blob_truncate(f, 0), -EIO);
    assert_int_equal(pom_blob_fsync(f), -EIO);
    pom_blob_file_close(f);
    /* Reopened: the bytes are the ones written (rewrites were of the same
     * bytes) and fsync works again. */
    assert_int_equal(pom_blob_file_open(b, 31, &f), 0);
    assert_int_equal(pom_blob_pread(f, got, sizeof got, 0), (ssize_t)sizeof got);
    assert_memory_equal(got, data, sizeof data);
    assert_int_equal(pom_blob_fsync(f), 0);
    pom_blob_file_close(f);
    assert_int_equal(pom_blob_delete(b, 31), 0);
    pom_blob_close(b);
}

/* Threads writing disjoint stripes of one file through one shared handle
 * (more tracts than cached fds), then reading them back, while another
 * truncates and rewrites its own far range: the fd slots under contention. */
#define NTHREADS 4
#define STRIPE   (40 * (size_t)TS)

struct worker {
    pom_blob_file *f;
    int id;
    int bad;
    char why[96]; /* the first failure, for the report */
};

static void worker_failed(struct worker *w, const char *op, uint64_t off, long rc)
{
    if (w->bad++ == 0)
        snprintf(w->why, sizeof w->why, "%s at %llu: %ld", op, (unsigned long long)off, rc);
}

static void *worker_run(void *arg)
{
    struct worker *w = arg;
    uint8_t *buf = malloc(8192), *got = malloc(8192);
    uint64_t base = (uint64_t)w->id * STRIPE;
    for (size_t off = 0; off < STRIPE; off += 8192) {
        memset(buf, (int)(w->id * 16 + (off / TS) % 16), 8192);
        ssize_t rc = pom_blob_pwrite(w->f, buf, 8192, base + off);
        if (rc != 8192)
            worker_failed(w, "pwrite", base + off, (long)rc);
    }
    for (size_t off = 0; off < STRIPE; off += 8192) {
        memset(buf, (int)(w->id * 16 + (off / TS) % 16), 8192);
        ssize_t rc = pom_blob_pread(w->f, got, 8192, base + off);
        if (rc != 8192 || memcmp(buf, got, 8192))
            worker_failed(w, rc != 8192 ? "pread" : "pread (wrong bytes)", base + off,
                          (long)rc);
    }
    free(buf);
    free(got);
    return NULL;
}

static void *truncator_run(void *arg)
{
    struct worker *w = arg;
    uint64_t base = (uint64_t)NTHREADS * STRIPE;
    for (int round = 0; round < 50; round++) {
        uint64_t off = base + (uint64_t)round * 1000;
        ssize_t rc = pom_blob_pwrite(w->f, "abcd", 4, off);
        if (rc != 4)
            worker_failed(w, "pwrite", off, (long)rc);
        int trc = pom_blob_truncate(w->f, base);
        if (trc < 0)
            worker_failed(w, "truncate", base, trc);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    pom_blob *b = open_store(list, TS);
    pom_blob_file *f;
    assert_int_equal(pom_blob_file_open(b, 4242, &f), 0);
    pthread_t th[NTHREADS + 1];
    struct worker w[NTHREADS + 1];
    for (int i = 0; i <= NTHREADS; i++) {
        w[i] = (struct worker){ .f = f, .id = i };
        assert_int_equal(pthread_create(&th[i], NULL, i < NTHREADS ? worker_run : truncator_run,
                                        &w[i]), 0);
    }
    int bad = 0;
    for (int i = 0; i <= NTHREADS; i++) { /* every thread ends before any assert */
        pthread_join(th[i], NULL);
        if (w[i].bad)
            fprintf(stderr, "thread %d: %d failures, first %s\n", i, w[i].bad, w[i].why);
        bad += w[i].bad;
    }
    assert_int_equal(bad, 0);
    struct pom_blob_stat st;
    assert_int_equal(pom_blob_stat(b, 4242, &st), 0);
    assert_int_equal(st.tracts, NTHREADS * 40);
    assert_int_equal(pom_blob_fsync(f), 0);
    pom_blob_file_close(f);
    assert_int_equal(pom_blob_delete(b, 4242), 0);
    pom_blob_close(b);
}

static void test_alloc_failures(void **state)
{
    (void)state;
    for (int n = 1; n < 40; n++) {
        xt_alloc_fail_after(n);
        struct pom_blob_conf c = { .path = list, .fsid = FSID, .tract_size = TS };
        pom_blob *b = NULL;
        int rc = pom_blob_open(&c, &b);
        if (rc == 0) {
            pom_blob_file *f = NULL;
            rc = pom_blob_file_open(b, 555, &f);
            for (int i = 0; rc == 0 && i < 40; i++) {
                ssize_t w = pom_blob_pwrite(f, "abc", 3, (uint64_t)i * TS);
                assert_true(w == 3 || w == -ENOMEM);
            }
            if (rc == 0)
                assert_true(pom_blob_fsync(f) == 0);
            pom_blob_file_close(f);
            pom_blob_delete(b, 555);
        }
        assert_true(rc == 0 || rc == -ENOMEM);
        pom_blob_close(b);
        xt_alloc_fail_after(-1);
    }
}

/* ---- pom_blob_list ----------------------------------------------------- */

#define LFSID 9     /* the list tests' own fsid: other tests' sets are not seen */
#define LSETS 40

struct want {
    uint64_t id;
    uint64_t tracts, bytes;
    bool listed;
    bool gone;      /* deleted: must not be listed */
};

struct got {
    struct want *w;
    size_t nw;
    size_t calls;
    uint64_t last_id;
    pom_blob *b;
    int64_t t0;
    int stop_after; /* > 0: return 7 at that call */
};

static int on_set(void *arg, const struct pom_blob_set *s)
{
    struct got *g = arg;
    g->calls++;
    if (g->calls > 1)
        assert_true(s->id > g->last_id); /* increasing: each set once */
    g->last_id = s->id;
    if (g->stop_after && (int)g->calls == g->stop_after)
        return 7;
    struct want *w = NULL;
    for (size_t i = 0; i < g->nw; i++)
        if (g->w[i].id == s->id)
            w = &g->w[i];
    if (!w)
        fail_msg("listed id %016llx was never written", (unsigned long long)s->id);
    assert_false(w->gone);
    assert_false(w->listed);
    w->listed = true;
    assert_int_equal(s->tracts, w->tracts);
    assert_int_equal(s->bytes, w->bytes);
    struct pom_blob_stat st;
    assert_int_equal(pom_blob_stat(g->b, s->id, &st), 0);
    assert_int_equal(st.tracts, s->tracts);
    assert_int_equal(st.alloc_bytes, s->alloc_bytes);
    /* mtimes are the host's clock: written during this test (1 s slack) */
    assert_true(s->mtime_ns >= g->t0 - 1000000000);
    assert_true(s->mtime_ns <= (int64_t)xt_now_ns() + 1000000000);
    return 0;
}

static pom_blob *open_list_store(const char *path)
{
    struct pom_blob_conf c = { .path = path, .fsid = LFSID, .tract_size = TS };
    pom_blob *b = NULL;
    assert_int_equal(pom_blob_open(&c, &b), 0);
    return b;
}

static void test_list(void **state)
{
    (void)state;
    uint64_t seed = base_seed() ^ 0x4c495354;
    printf("list seed %llu\n", (unsigned long long)seed);
    rng_state = seed;
    char lf[3][PATH_MAX + 8], llist[3 * PATH_MAX + 32];
    for (int i = 0; i < 3; i++)
        snprintf(lf[i], sizeof lf[i], "%s/l%d", base, i);
    snprintf(llist, sizeof llist, "%s:%s:%s", lf[0], lf[1], lf[2]);
    pom_blob *b = open_list_store(llist);
    struct got g = { .b = b, .t0 = (int64_t)xt_now_ns() };

    /* An empty tier lists nothing. */
    assert_int_equal(pom_blob_list(b, on_set, &g), 0);
    assert_int_equal(g.calls, 0);

    /* Random sets: uuids (bit 63 clear) and rewrite ids (set), 1..9
     * distinct tracts each at random numbers (sparse, striped over the
     * folders), each a random length. */
    struct want w[LSETS];
    uint8_t *buf = malloc(TS);
    assert_non_null(buf);
    memset(buf, 0xab, TS);
    for (int i = 0; i < LSETS; i++) {
        w[i] = (struct want){ .id = (rnd() >> 1) | (i % 2 ? UINT64_C(1) << 63 : 0) };
        pom_blob_file *f;
        assert_int_equal(pom_blob_file_open(b, w[i].id, &f), 0);
        uint32_t used[9];
        size_t nt = 1 + below(9);
        for (size_t k = 0; k < nt; k++) {
            uint32_t t;
            bool dup;
            do {
                t = (uint32_t)below(k % 2 ? 3000 : 12); /* > 1,024: several groups */
                dup = false;
                for (size_t j = 0; j < k; j++)
                    dup |= used[j] == t;
            } while (dup);
            used[k] = t;
            size_t n = 1 + below(TS);
            assert_int_equal(pom_blob_pwrite(f, buf, n, (uint64_t)t * TS), (ssize_t)n);
            w[i].tracts++;
            w[i].bytes += n;
        }
        if (i % 7 == 3) { /* cut to 0: an empty id folder is still a set */
            assert_int_equal(pom_blob_truncate(f, 0), 0);
            w[i].tracts = w[i].bytes = 0;
        }
        pom_blob_file_close(f);
        if (i % 5 == 4) {
            assert_int_equal(pom_blob_delete(b, w[i].id), 0);
            w[i].gone = true;
        }
    }
    free(buf);

    /* Not sets: a set of another fsid, junk names at every level, an id
     * folder under hash folders its id does not hash to. */
    struct pom_blob_conf oc = { .path = llist, .fsid = LFSID + 1, .tract_size = TS };
    pom_blob *other = NULL;
    assert_int_equal(pom_blob_open(&oc, &other), 0);
    pom_blob_file *of;
    assert_int_equal(pom_blob_file_open(other, 4242, &of), 0);
    assert_int_equal(pom_blob_pwrite(of, "x", 1, 0), 1);
    pom_blob_file_close(of);
    pom_blob_close(other);
    char p[PATH_MAX + 64];
    snprintf(p, sizeof p, "%s/%08x/README", lf[0], LFSID);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fclose(fp);
    uint64_t stray = 0x1234;
    uint64_t sh = pom_blob_hash(stray);
    unsigned wrong1 = (unsigned)((sh >> 56) ^ 1);
    snprintf(p, sizeof p, "%s/%08x/%02x", lf[1], LFSID, wrong1);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/%08x/%02x/00", lf[1], LFSID, wrong1);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/%08x/%02x/00/%016llx", lf[1], LFSID, wrong1,
             (unsigned long long)stray);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/%08x/%02x/00/not-an-id", lf[1], LFSID, wrong1);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/%08x/zz", lf[2], LFSID);
    assert_int_equal(mkdir(p, 0700), 0);

    g = (struct got){ .w = w, .nw = LSETS, .b = b, .t0 = g.t0 };
    assert_int_equal(pom_blob_list(b, on_set, &g), 0);
    size_t live = 0;
    for (int i = 0; i < LSETS; i++) {
        if (!w[i].gone)
            live++;
        assert_true(w[i].listed == !w[i].gone);
    }
    assert_int_equal(g.calls, live);

    /* fn's non-zero return stops the walk and is returned. */
    for (int i = 0; i < LSETS; i++)
        w[i].listed = false;
    g = (struct got){ .w = w, .nw = LSETS, .b = b, .t0 = g.t0, .stop_after = 2 };
    assert_int_equal(pom_blob_list(b, on_set, &g), 7);
    assert_int_equal(g.calls, 2);

    /* Allocation failures: -ENOMEM and no call, or the whole list. */
    for (int n = 1; n < 4; n++) {
        for (int i = 0; i < LSETS; i++)
            w[i].listed = false;
        g = (struct got){ .w = w, .nw = LSETS, .b = b, .t0 = g.t0 };
        xt_alloc_fail_after(n);
        int rc = pom_blob_list(b, on_set, &g);
        xt_alloc_fail_after(-1);
        assert_true(rc == 0 || rc == -ENOMEM);
        assert_int_equal(g.calls, rc == 0 ? live : 0);
    }

    /* Deleting every listed set empties the tier (what fsck's repair does). */
    for (int i = 0; i < LSETS; i++)
        if (!w[i].gone)
            assert_int_equal(pom_blob_delete(b, w[i].id), 0);
    g = (struct got){ .w = w, .nw = LSETS, .b = b };
    assert_int_equal(pom_blob_list(b, on_set, &g), 0);
    assert_int_equal(g.calls, 0);
    pom_blob_close(b);
}

static int newest(void *arg, const struct pom_blob_set *s)
{
    *(int64_t *)arg = s->mtime_ns;
    return 0;
}

static void test_touch_and_lock(void **state)
{
    (void)state;
    char lf[PATH_MAX + 8];
    snprintf(lf, sizeof lf, "%s/touch", base);
    pom_blob *b = open_list_store(lf);
    pom_blob_file *f;
    uint64_t id = UINT64_C(0x8000000000000123);
    assert_int_equal(pom_blob_file_open(b, id, &f), 0);
    assert_int_equal(pom_blob_pwrite(f, "x", 1, 0), 1);
    pom_blob_file_close(f);
    /* Age every folder and file of the set an hour back. */
    char cmd[2 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "find '%s' -mindepth 1 -exec touch -d '1 hour ago' {} +", lf);
    assert_int_equal(system(cmd), 0);
    int64_t m = 0, now = (int64_t)xt_now_ns();
    assert_int_equal(pom_blob_list(b, newest, &m), 0);
    assert_true(now - m > (int64_t)3000 * 1000000000);
    assert_int_equal(pom_blob_touch(b, id), 0);
    assert_int_equal(pom_blob_list(b, newest, &m), 0);
    assert_true(m >= now - 1000000000);
    assert_int_equal(pom_blob_touch(b, UINT64_C(0x8000000000000456)), 0); /* no tract */
    int t1, t2;
    assert_int_equal(pom_blob_reclaim_lock(b, &t1), 1);
    assert_int_equal(pom_blob_reclaim_lock(b, &t2), 0);
    pom_blob_reclaim_unlock(b, t1);
    assert_int_equal(pom_blob_reclaim_lock(b, &t2), 1);
    pom_blob_reclaim_unlock(b, t2);
    assert_int_equal(pom_blob_delete(b, id), 0);
    pom_blob_close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_ops),
        cmocka_unit_test(test_holes_placement_truncate),
        cmocka_unit_test(test_eio_never_zeros),
        cmocka_unit_test(test_limits_and_backends),
        cmocka_unit_test(test_faults),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_alloc_failures),
        cmocka_unit_test(test_list),
        cmocka_unit_test(test_touch_and_lock),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
