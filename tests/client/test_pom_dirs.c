/*
 * test_pom_dirs.c -- directory link counts and parents' times of
 * libpomegranate against real pom-mdsl + pom-mds processes
 * (docs/client.md "nlink"; pom_ops.c invariant 5, pom_link.c invariant 5):
 *   - directory nlink = 2 + subdirectories through mkdir, rmdir (also
 *     refused), rename across parents, over an empty directory (same and
 *     other parent), exchange dir<->file and dir<->dir, from a second
 *     client; both parents' mtime/ctime set by a rename (of a directory and
 *     of a file); a directory written with nlink 1 (never counted) stays 1;
 *   - round trips (the client's RPC counter): a create of any kind (file,
 *     fifo, symlink, device, directory) is ONE atomic batch with the
 *     parent's times (and nlink) update, an unlink or rmdir the read of the
 *     entry (+ rmdir's emptiness check) and ONE batch, link and the unlink
 *     of a link stub one batch after their reads; and each moves the
 *     parent's mtime/ctime;
 *   - 4 clients (POM_MT_CLIENTS, up to 16; POM_MT_PER entries each, 100)
 *     making directories in one directory at once: no failure, an exact
 *     count; the mkdir and mknod rates are printed; then 4 clients making
 *     and removing directories in one directory at once (the MDS adds the
 *     count's deltas, XT_ROW_SET_NLINK_ADD): the count is exact, and no
 *     mkdir/rmdir took a second batch (none lost a race);
 *   - rmdir (and rename over a directory) of a directory split into many
 *     slices refuses while any slice holds a name: its files removed in
 *     listing order empty the first slices first (an MDS with
 *     --split-threshold 16). The emptiness check reads pages until a name
 *     or the end (an empty page, possible across MDS, is not the end);
 *   - creates in a directory that another thread of the same client keeps
 *     moving between two parents (xfstests generic/707) all succeed: a
 *     create whose parent moved while its batch was built is built again
 *     where the directory is now (before, it answered ENOENT).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "pom_ns_i.h" /* fs->rpcs: the round trips sent */
#include "pom_cluster.h"
#include "pomegranate.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_rpc_mds.h"

#define FSID 11

static struct pom_cluster C;

static int group_setup(void **state)
{
    (void)state;
    if (pom_cluster_up(&C, "dirs", POM_MDSL_BIN, POM_MDS_BIN))
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

/* An empty file (no ref kept). */
static void mkfile(pom_fs *fs, pom_ino dir, const char *name)
{
    struct stat st;
    assert_int_equal(pom_mknod(fs, dir, name, S_IFREG | 0644, 0, NULL, &st), 0);
    pom_forget(fs, st.st_ino, 1);
}

/* Lookup (no ref kept): 0 and *st, or -errno. */
static int look(pom_fs *fs, pom_ino dir, const char *name, struct stat *st)
{
    int rc = pom_lookup(fs, dir, name, st);
    if (rc == 0)
        pom_forget(fs, st->st_ino, 1);
    return rc;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static nlink_t nlink_of(pom_fs *fs, pom_ino ino)
{
    struct stat st;
    assert_int_equal(pom_getattr(fs, ino, &st), 0);
    return st.st_nlink;
}

static uint64_t mtime_of(pom_fs *fs, pom_ino ino, uint64_t *ctime)
{
    struct stat st;
    assert_int_equal(pom_getattr(fs, ino, &st), 0);
    *ctime = (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
    return (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void test_dir_nlink(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    nlink_t root0 = nlink_of(fs, POM_ROOT_INO);
    assert_true(root0 >= 2); /* a fresh fs: the root counts too */
    pom_ino a = mkdir_in(fs, POM_ROOT_INO, "nl-a"), b = mkdir_in(fs, POM_ROOT_INO, "nl-b");
    assert_int_equal(nlink_of(fs, POM_ROOT_INO), root0 + 2);
    assert_int_equal(nlink_of(fs, a), 2);
    pom_ino s1 = mkdir_in(fs, a, "s1"), s2 = mkdir_in(fs, a, "s2");
    mkfile(fs, a, "file"); /* files do not count */
    assert_int_equal(nlink_of(fs, a), 4);
    assert_int_equal(nlink_of(fs, s1), 2);
    /* rmdir, and rmdir refused: no change. */
    mkfile(fs, s2, "in");
    assert_int_equal(pom_rmdir(fs, a, "s2"), -ENOTEMPTY);
    assert_int_equal(nlink_of(fs, a), 4);
    assert_int_equal(pom_unlink(fs, s2, "in"), 0);
    assert_int_equal(pom_rmdir(fs, a, "s2"), 0);
    assert_int_equal(nlink_of(fs, a), 3);
    assert_int_equal(pom_mkdir(fs, a, "s1", 0755, NULL, &(struct stat){ 0 }), -EEXIST);
    assert_int_equal(nlink_of(fs, a), 3);
    /* A directory moved across parents, with both parents' times set in
     * the same batch. */
    uint64_t t0 = wall_ns(), ac, bc;
    assert_int_equal(pom_rename(fs, a, "s1", b, "s1", 0), 0);
    assert_int_equal(nlink_of(fs, a), 2);
    assert_int_equal(nlink_of(fs, b), 3);
    assert_true(mtime_of(fs, a, &ac) >= t0 && ac >= t0);
    assert_true(mtime_of(fs, b, &bc) >= t0 && bc >= t0);
    /* A file moved: counts stay, times move. */
    t0 = wall_ns();
    assert_int_equal(pom_rename(fs, a, "file", b, "file", 0), 0);
    assert_int_equal(nlink_of(fs, a), 2);
    assert_int_equal(nlink_of(fs, b), 3);
    assert_true(mtime_of(fs, a, &ac) >= t0 && ac >= t0);
    assert_true(mtime_of(fs, b, &bc) >= t0 && bc >= t0);
    /* Within one directory: a directory over an empty directory. */
    pom_ino e = mkdir_in(fs, b, "empty");
    assert_int_equal(nlink_of(fs, b), 4);
    assert_int_equal(pom_rename(fs, b, "s1", b, "empty", 0), 0);
    assert_int_equal(nlink_of(fs, b), 3);
    /* Across: a directory over an empty directory in another parent. */
    (void)mkdir_in(fs, a, "t");
    assert_int_equal(nlink_of(fs, a), 3);
    assert_int_equal(pom_rename(fs, b, "empty", a, "t", 0), 0);
    assert_int_equal(nlink_of(fs, a), 3);
    assert_int_equal(nlink_of(fs, b), 2);
    /* Exchange directory <-> file across parents. */
    assert_int_equal(pom_rename(fs, a, "t", b, "file", POM_RENAME_EXCHANGE), 0);
    assert_int_equal(nlink_of(fs, a), 2);
    assert_int_equal(nlink_of(fs, b), 3);
    /* Exchange directory <-> directory: no change. */
    (void)mkdir_in(fs, a, "u");
    assert_int_equal(pom_rename(fs, a, "u", b, "file", POM_RENAME_EXCHANGE), 0);
    assert_int_equal(nlink_of(fs, a), 3);
    assert_int_equal(nlink_of(fs, b), 3);
    /* A second client sees the same counts. */
    pom_fs *fs2 = conn();
    struct stat st;
    assert_int_equal(look(fs2, POM_ROOT_INO, "nl-a", &st), 0);
    assert_int_equal(st.st_nlink, 3);
    assert_int_equal(look(fs2, POM_ROOT_INO, "nl-b", &st), 0);
    assert_int_equal(st.st_nlink, 3);
    pom_close(fs2);
    /* A directory that was never counted (nlink 1: made before the count
     * was kept, written here directly) stays 1 through mkdir/rmdir. */
    struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = C.mds_port,
                                   .call_timeout_ms = 30000, .backoff_min_ms = 10,
                                   .backoff_max_ms = 100 };
    xt_rpc_pool *p;
    assert_int_equal(xt_rpc_pool_new(&po, &p), 0);
    xt_row old;
    xt_row_init(&old);
    old.attr.uuid = UINT64_C(0x6000000001); /* below the client's range */
    old.attr.type = XT_ROW_DIR;
    old.attr.mode = 0755;
    old.attr.nlink = 1;
    struct xt_req q = { .op = XT_OP_CREATE, .t = { FSID, a, -1 }, .name = "legacy",
                        .name_len = 6, .name_hash = xt_hash_name("legacy", 6),
                        .flags = XT_F_EXCL, .row = &old };
    struct xt_resp r;
    assert_int_equal(xt_mds_call(p, NULL, &q, &r), 0);
    xt_resp_free(&r);
    xt_rpc_pool_free(p);
    assert_int_equal(pom_lookup(fs, a, "legacy", &st), 0);
    pom_ino lg = st.st_ino;
    assert_int_equal(st.st_nlink, 1);
    assert_int_equal(nlink_of(fs, a), 3); /* written behind the library's back */
    (void)mkdir_in(fs, lg, "x");
    assert_int_equal(nlink_of(fs, lg), 1);
    assert_int_equal(pom_rename(fs, lg, "x", a, "x", 0), 0);
    assert_int_equal(nlink_of(fs, lg), 1);
    assert_int_equal(nlink_of(fs, a), 4);
    assert_int_equal(pom_rename(fs, a, "x", lg, "x", 0), 0);
    assert_int_equal(nlink_of(fs, a), 3);
    assert_int_equal(pom_rmdir(fs, lg, "x"), 0);
    assert_int_equal(nlink_of(fs, lg), 1);
    pom_forget(fs, lg, 1);
    pom_forget(fs, s1, 1);
    pom_forget(fs, s2, 1);
    pom_forget(fs, e, 1);
    pom_forget(fs, a, 1);
    pom_forget(fs, b, 1);
    pom_close(fs);
}

/* Round trips sent by fs since *mark, and *mark moved to now. */
static uint64_t rpcs_since(pom_fs *fs, uint64_t *mark)
{
    uint64_t now = atomic_load(&fs->rpcs), d = now - *mark;
    *mark = now;
    return d;
}

/* Asserts that the parent's mtime and ctime are at least t0 (and moves t0
 * to now for the next step). */
static void parent_touched(pom_fs *fs, pom_ino dir, uint64_t *t0)
{
    uint64_t c, m = mtime_of(fs, dir, &c);
    assert_true(m >= *t0);
    assert_true(c >= *t0);
    *t0 = wall_ns();
}

static void test_round_trips(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino d = mkdir_in(fs, POM_ROOT_INO, "rt");
    mkfile(fs, d, "warm"); /* the uuid range is claimed (2 RPCs, once) */
    struct stat st;
    uint64_t mark = atomic_load(&fs->rpcs), t0 = wall_ns();
    /* Creates: one batch each (the create + the parent's row). */
    mkfile(fs, d, "f");
    assert_int_equal(rpcs_since(fs, &mark), 1);
    parent_touched(fs, d, &t0);
    mark = atomic_load(&fs->rpcs);
    assert_int_equal(pom_mknod(fs, d, "fifo", S_IFIFO | 0644, 0, NULL, &st), 0);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(rpcs_since(fs, &mark), 1);
    assert_int_equal(pom_mknod(fs, d, "chr", S_IFCHR | 0644, makedev(1, 3), NULL, &st), 0);
    assert_int_equal(st.st_rdev, makedev(1, 3));
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(rpcs_since(fs, &mark), 1);
    assert_int_equal(pom_symlink(fs, d, "ln", "f", NULL, &st), 0);
    pom_forget(fs, st.st_ino, 1);
    assert_int_equal(rpcs_since(fs, &mark), 1);
    parent_touched(fs, d, &t0);
    mark = atomic_load(&fs->rpcs);
    pom_ino sub = mkdir_in(fs, d, "sub");
    assert_int_equal(rpcs_since(fs, &mark), 1);
    parent_touched(fs, d, &t0);
    assert_int_equal(nlink_of(fs, d), 3);
    pom_file *f;
    mark = atomic_load(&fs->rpcs);
    assert_int_equal(pom_create(fs, d, "opened", 0644, O_RDWR | O_CREAT | O_EXCL, NULL, &st, &f),
                     0);
    assert_int_equal(rpcs_since(fs, &mark), 1);
    assert_int_equal(pom_release(f), 0);
    pom_forget(fs, st.st_ino, 1);
    /* A failed create costs its batch and changes nothing. */
    mark = atomic_load(&fs->rpcs);
    assert_int_equal(pom_mknod(fs, d, "f", S_IFREG | 0644, 0, NULL, &st), -EEXIST);
    assert_int_equal(pom_mkdir(fs, d, "f", 0755, NULL, &st), -EEXIST);
    assert_int_equal(rpcs_since(fs, &mark), 2);
    assert_int_equal(nlink_of(fs, d), 3);
    /* Removes: the entry's read + one batch (rmdir: + its emptiness check). */
    t0 = wall_ns();
    mark = atomic_load(&fs->rpcs);
    assert_int_equal(pom_unlink(fs, d, "f"), 0);
    assert_int_equal(rpcs_since(fs, &mark), 2);
    parent_touched(fs, d, &t0);
    mark = atomic_load(&fs->rpcs);
    assert_int_equal(pom_unlink(fs, d, "ln"), 0);
    assert_int_equal(pom_unlink(fs, d, "fifo"), 0);
    assert_int_equal(rpcs_since(fs, &mark), 4);
    assert_int_equal(pom_rmdir(fs, d, "sub"), 0);
    assert_int_equal(rpcs_since(fs, &mark), 3);
    assert_int_equal(nlink_of(fs, d), 2);
    parent_touched(fs, d, &t0);
    /* Link (the file's read + one batch) and the unlink of a stub (the
     * stub's read, the ILT row's read + one batch) set the times too. */
    assert_int_equal(pom_lookup(fs, d, "chr", &st), 0);
    mark = atomic_load(&fs->rpcs);
    assert_int_equal(pom_link(fs, st.st_ino, d, "chr2", &st), 0);
    assert_int_equal(st.st_nlink, 2);
    assert_int_equal(rpcs_since(fs, &mark), 2);
    pom_forget(fs, st.st_ino, 2);
    parent_touched(fs, d, &t0);
    mark = atomic_load(&fs->rpcs);
    assert_int_equal(pom_unlink(fs, d, "chr"), 0);
    assert_int_equal(rpcs_since(fs, &mark), 3);
    parent_touched(fs, d, &t0);
    assert_int_equal(look(fs, d, "chr2", &st), 0);
    assert_int_equal(st.st_nlink, 1);
    pom_forget(fs, sub, 1);
    pom_forget(fs, d, 1);
    pom_close(fs);
}

/* Many clients making directories in ONE directory: every mkdir's batch
 * adds 1 to the parent's count at the MDS (no version read, so no race);
 * none may fail, none may take a second batch, and the count must be
 * exact. Prints the mkdir rate against mknod's (both one batch now), one
 * client and K_MT clients, then runs mkdir and rmdir at once. */
#define K_MT 16 /* at most; POM_MT_CLIENTS (default 4) clients run */
static int g_per = 100; /* entries per client; POM_MT_PER for measurements */

struct mkd {
    const char *dir; /* under the root */
    int id;
    bool dirs;
    bool rm;         /* dirs: remove every second one again (rmdir) */
    int fails;
    int extra;       /* mkdir/rmdir calls that took more round trips than
                        one batch (+ rmdir's two reads): a lost race */
};

static void *mkd_main(void *arg)
{
    struct mkd *m = arg;
    pom_fs *fs = NULL;
    if (pom_connect_mds(C.mds_addr, FSID, &fs) < 0) {
        m->fails = g_per;
        return NULL;
    }
    struct stat st;
    if (pom_lookup(fs, POM_ROOT_INO, m->dir, &st) < 0) {
        m->fails = g_per;
        pom_close(fs);
        return NULL;
    }
    pom_ino dir = st.st_ino;
    for (int i = 0; i < g_per; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "%c%d-%d", m->dirs ? 'd' : 'n', m->id, i);
        uint64_t r0 = atomic_load(&fs->rpcs), end0 = fs->uuid_end;
        int rc = m->dirs ? pom_mkdir(fs, dir, nm, 0755, NULL, &st)
                         : pom_mknod(fs, dir, nm, S_IFREG | 0644, 0, NULL, &st);
        if (rc < 0) {
            fprintf(stderr, "%s %s: %d\n", m->dirs ? "mkdir" : "mknod", nm, rc);
            m->fails++;
            continue;
        }
        pom_forget(fs, st.st_ino, 1);
        /* One batch, unless this call claimed a uuid range. */
        if (m->dirs && fs->uuid_end == end0 && atomic_load(&fs->rpcs) - r0 != 1)
            m->extra++;
        if (m->rm && i % 2 == 1) {
            snprintf(nm, sizeof nm, "d%d-%d", m->id, i - 1);
            r0 = atomic_load(&fs->rpcs);
            if ((rc = pom_rmdir(fs, dir, nm)) < 0) {
                fprintf(stderr, "rmdir %s: %d\n", nm, rc);
                m->fails++;
            } else if (atomic_load(&fs->rpcs) - r0 != 3) {
                m->extra++; /* the entry's read, the emptiness check, the batch */
            }
        }
    }
    pom_close(fs);
    return NULL;
}

/* Seconds for nthreads clients x g_per entries in dir (under the root);
 * rm: every second directory is removed again. */
static double mkd_run_rm(const char *dir, int nthreads, bool dirs, bool rm)
{
    pthread_t th[K_MT];
    struct mkd m[K_MT];
    double t0 = now_us();
    for (int i = 0; i < nthreads; i++) {
        m[i] = (struct mkd){ .dir = dir, .id = i, .dirs = dirs, .rm = rm };
        assert_int_equal(pthread_create(&th[i], NULL, mkd_main, &m[i]), 0);
    }
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(m[i].fails, 0);
        assert_int_equal(m[i].extra, 0);
    }
    return (now_us() - t0) / 1e6;
}

static double mkd_run(const char *dir, int nthreads, bool dirs)
{
    return mkd_run_rm(dir, nthreads, dirs, false);
}

static void test_mkdir_contention(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    const char *e = getenv("POM_MT_CLIENTS");
    int k = e ? atoi(e) : 4;
    k = k < 1 ? 1 : k > K_MT ? K_MT : k;
    if ((e = getenv("POM_MT_PER")) && atoi(e) > 0)
        g_per = atoi(e);
    pom_ino d1 = mkdir_in(fs, POM_ROOT_INO, "mt1"), dn = mkdir_in(fs, POM_ROOT_INO, "mtn");
    double n1 = mkd_run("mt1", 1, false), m1 = mkd_run("mt1", 1, true);
    double nn = mkd_run("mtn", k, false), mn = mkd_run("mtn", k, true);
    assert_int_equal(nlink_of(fs, d1), 2 + g_per);
    assert_int_equal(nlink_of(fs, dn), 2 + k * g_per);
    fprintf(stderr, "entries/s in one directory: 1 client mknod %.0f mkdir %.0f; "
            "%d clients mknod %.0f mkdir %.0f\n", g_per / n1, g_per / m1, k,
            k * g_per / nn, k * g_per / mn);
    /* mkdir and rmdir at once in one directory: the deltas add up. */
    pom_ino dr = mkdir_in(fs, POM_ROOT_INO, "mtr");
    double rr = mkd_run_rm("mtr", k, true, true);
    assert_int_equal(nlink_of(fs, dr), 2 + k * (g_per - g_per / 2));
    pom_fs *fs2 = conn(); /* as another client sees it */
    struct stat st;
    assert_int_equal(look(fs2, POM_ROOT_INO, "mtr", &st), 0);
    assert_int_equal(st.st_nlink, 2 + k * (g_per - g_per / 2));
    pom_close(fs2);
    fprintf(stderr, "%d clients mkdir+rmdir in one directory: %.0f calls/s\n", k,
            k * (g_per + g_per / 2) / rr);
    pom_forget(fs, d1, 1);
    pom_forget(fs, dn, 1);
    pom_forget(fs, dr, 1);
    pom_close(fs);
}

#define SPLIT_FILES 160

struct names {
    char v[SPLIT_FILES][16];
    size_t n;
};

static int collect(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    (void)st;
    (void)next;
    struct names *l = arg;
    if (l->n == SPLIT_FILES)
        return -EOVERFLOW;
    snprintf(l->v[l->n++], sizeof l->v[0], "%s", name);
    return 0;
}

static void test_rmdir_split_dir(void **state)
{
    (void)state;
    static const char *const extra[] = { "--split-threshold", "16", NULL };
    struct pom_cluster d;
    assert_int_equal(pom_cluster_init(&d, "dirsplit"), 0);
    assert_int_equal(pom_cluster_start_mdsl(&d, POM_MDSL_BIN), 0);
    assert_int_equal(pom_cluster_start_mds(&d, POM_MDS_BIN, 200, extra), 0);
    pom_fs *fs = NULL;
    assert_int_equal(pom_connect_mds(d.mds_addr, FSID, &fs), 0);
    pom_ino big = mkdir_in(fs, POM_ROOT_INO, "big");
    pom_ino other = mkdir_in(fs, POM_ROOT_INO, "other");
    for (int i = 0; i < SPLIT_FILES; i++) {
        char n[16];
        struct stat st;
        snprintf(n, sizeof n, "f%03d", i);
        assert_int_equal(pom_mknod(fs, big, n, S_IFREG | 0644, 0, NULL, &st), 0);
        pom_forget(fs, st.st_ino, 1);
    }
    static struct names l;
    l.n = 0;
    assert_int_equal(pom_readdir(fs, big, POM_COOKIE_START, 0, collect, &l), SPLIT_FILES);
    /* Listing order: the first slices' ranges empty first. */
    for (size_t i = 0; i + 1 < l.n; i++) {
        assert_int_equal(pom_unlink(fs, big, l.v[i]), 0);
        if (pom_rmdir(fs, POM_ROOT_INO, "big") != -ENOTEMPTY)
            fail_msg("rmdir with %zu names left answered other than ENOTEMPTY", l.n - i - 1);
        if (pom_rename(fs, POM_ROOT_INO, "other", POM_ROOT_INO, "big", 0) != -ENOTEMPTY)
            fail_msg("rename over it with %zu names left answered other than ENOTEMPTY",
                     l.n - i - 1);
    }
    assert_int_equal(pom_unlink(fs, big, l.v[l.n - 1]), 0);
    assert_int_equal(pom_rmdir(fs, POM_ROOT_INO, "big"), 0);
    assert_int_equal(pom_rmdir(fs, POM_ROOT_INO, "other"), 0);
    pom_forget(fs, big, 1);
    pom_forget(fs, other, 1);
    pom_close(fs);
    pom_cluster_destroy(&d);
}

#define MOVE_ROUNDS 300

struct mover {
    pom_fs *fs;
    pom_ino p[2];
    int failed; /* renames that did not answer 0 */
};

static void *mover_main(void *arg)
{
    struct mover *m = arg;
    for (int i = 0; i < MOVE_ROUNDS; i++)
        if (pom_rename(m->fs, m->p[i % 2], "d", m->p[(i + 1) % 2], "d", 0) != 0)
            m->failed++;
    return NULL;
}

static void test_create_in_moving_dir(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    struct mover m = { .fs = fs };
    m.p[0] = mkdir_in(fs, POM_ROOT_INO, "mv0");
    m.p[1] = mkdir_in(fs, POM_ROOT_INO, "mv1");
    pom_ino d = mkdir_in(fs, m.p[0], "d");
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, mover_main, &m), 0);
    int bad = 0;
    char name[32];
    for (int i = 0; i < MOVE_ROUNDS; i++) {
        struct stat st;
        snprintf(name, sizeof name, "f%d", i);
        int rc = pom_mknod(fs, d, name, S_IFREG | 0644, 0, NULL, &st);
        if (rc == 0) {
            pom_forget(fs, st.st_ino, 1);
        } else {
            fprintf(stderr, "create %d in the moving directory: %d\n", i, rc);
            bad++;
        }
    }
    pthread_join(th, NULL);
    assert_int_equal(m.failed, 0);
    assert_int_equal(bad, 0);
    struct stat st;
    for (int i = 0; i < MOVE_ROUNDS; i++) {
        snprintf(name, sizeof name, "f%d", i);
        assert_int_equal(look(fs, d, name, &st), 0);
    }
    pom_forget(fs, d, 1);
    pom_forget(fs, m.p[0], 1);
    pom_forget(fs, m.p[1], 1);
    pom_close(fs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dir_nlink),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_mkdir_contention),
        cmocka_unit_test(test_rmdir_split_dir),
        cmocka_unit_test(test_create_in_moving_dir),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
