/*
 * test_mdsl_store.c -- the MDSL engine: 2PC commit/abort/restart matrix,
 * countdown -EIO/-ENOSPC at every I/O step of a commit, index rebuild,
 * corrupted and truncated records, metadata, real files through liburing,
 * ENOSPC on a real small tmpfs, MOVED tombstones (-ESTALE loads, the DELTA
 * guard, moving back, GC and rebuild of them) and the slice listing.
 */
#include "mdsl_test_util.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#define FS 3

static uint8_t bufs[16][70000];

/* ---- matrix ---------------------------------------------------------- */

enum action { ACT_COMMIT, ACT_ABORT, ACT_NONE };

static void matrix_case(enum action act, bool crash, bool rebuild)
{
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 1, 1u << 16);
    mdsl_io_fault_powerloss(e.fault, true);
    assert_int_equal(tu_open(&e), 0);

    /* tx 1: base state over two tables */
    struct xt_store_rec r1[3] = {
        tu_rec(XT_STORE_IMAGE, FS, 7, 0, 0, 0, 1, bufs[0], 300),
        tu_rec(XT_STORE_COLUMN, FS, 7, 0, 100, 1, 1, bufs[1], 50),
        tu_rec(XT_STORE_IMAGE, FS, 8, 2, 0, 0, 1, bufs[2], 10),
    };
    assert_int_equal(mdsl_store_prepare(e.s, 1, r1, 3), 0);
    assert_int_equal(mdsl_store_commit(e.s, 1), 0);
    tu_model_add(&m, r1, 3);

    /* tx 2: new versions in both tables */
    struct xt_store_rec r2[4] = {
        tu_rec(XT_STORE_DELTA, FS, 7, 0, 0, 0, 2, bufs[3], 40),
        tu_rec(XT_STORE_COLUMN, FS, 7, 0, 100, 1, 2, bufs[4], 60),
        tu_rec(XT_STORE_IMAGE, FS, 8, 2, 0, 0, 2, bufs[5], 20),
        tu_rec(XT_STORE_COLUMN, FS, 8, 2, 5, 0, 2, bufs[6], 0),
    };
    r2[3].flags = XT_STORE_F_TOMBSTONE;
    assert_int_equal(mdsl_store_prepare(e.s, 2, r2, 4), 0);
    assert_int_equal(mdsl_store_prepare(e.s, 2, r2, 4), -EEXIST);
    /* prepared data is invisible */
    tu_check_slice(e.s, FS, &m, 7, 0);
    tu_check_column(e.s, FS, &m, 7, 0, 100, 1);
    tu_check_slice(e.s, FS, &m, 8, 2);

    if (act == ACT_COMMIT) {
        assert_int_equal(mdsl_store_commit(e.s, 2), 0);
        assert_int_equal(mdsl_store_commit(e.s, 2), 0); /* idempotent retry */
        assert_int_equal(mdsl_store_abort(e.s, 2), -EINVAL);
        tu_model_add(&m, r2, 4);
    } else if (act == ACT_ABORT) {
        assert_int_equal(mdsl_store_abort(e.s, 2), 0);
        assert_int_equal(mdsl_store_commit(e.s, 2), -EINVAL);
    }
    assert_int_equal(mdsl_store_commit(e.s, 99), -ENOENT);
    if (crash)
        mdsl_io_fault_crash(e.fault);
    tu_close(&e);
    mdsl_io_fault_reset(e.fault);
    if (rebuild)
        assert_int_equal(mdsl_index_destroy(e.index), 0);
    assert_int_equal(tu_open(&e), 0);

    uint64_t *tx;
    size_t ntx;
    assert_int_equal(mdsl_store_prepared(e.s, &tx, &ntx), 0);
    assert_int_equal(ntx, act == ACT_NONE ? 1 : 0);
    if (ntx)
        assert_int_equal(tx[0], 2);
    xt_free(tx);
    tu_check_slice(e.s, FS, &m, 7, 0);
    tu_check_column(e.s, FS, &m, 7, 0, 100, 1);
    tu_check_slice(e.s, FS, &m, 8, 2);
    tu_check_column(e.s, FS, &m, 8, 2, 5, 0);
    if (act == ACT_NONE) {
        /* the coordinator decides after the restart */
        assert_int_equal(mdsl_store_commit(e.s, 2), 0);
        tu_model_add(&m, r2, 4);
        tu_close(&e);
        assert_int_equal(tu_open(&e), 0);
        tu_check_slice(e.s, FS, &m, 7, 0);
        tu_check_column(e.s, FS, &m, 7, 0, 100, 1);
        tu_check_slice(e.s, FS, &m, 8, 2);
        tu_check_column(e.s, FS, &m, 8, 2, 5, 0);
    }
    tu_env_free(&e);
}

static void test_matrix(void **state)
{
    (void)state;
    for (int act = ACT_COMMIT; act <= ACT_NONE; act++)
        for (int crash = 0; crash < 2; crash++)
            for (int rebuild = 0; rebuild < 2; rebuild++)
                matrix_case((enum action)act, crash, rebuild);
}

/* ---- countdown faults ------------------------------------------------ */

static int commit_one(mdsl_store *s, uint64_t txid, uint64_t ver, struct xt_store_rec *r, bool *prepared)
{
    r[0] = tu_rec(XT_STORE_IMAGE, FS, 1, 0, 0, 0, ver, bufs[0], 900);
    r[1] = tu_rec(XT_STORE_COLUMN, FS, 1, 0, 42, 2, ver, bufs[1], 333);
    r[2] = tu_rec(XT_STORE_DELTA, FS, 2, 1, 0, 0, ver, bufs[2], 100);
    *prepared = false;
    int rc = mdsl_store_prepare(s, txid, r, 3);
    if (rc < 0)
        return rc;
    *prepared = true;
    return mdsl_store_commit(s, txid);
}

static void check_all(mdsl_store *s, const struct tu_model *m)
{
    tu_check_slice(s, FS, m, 1, 0);
    tu_check_column(s, FS, m, 1, 0, 42, 2);
    tu_check_slice(s, FS, m, 2, 1);
}

static void test_countdown(void **state)
{
    (void)state;
    static const int errs[2] = { -EIO, -ENOSPC };
    for (int ei = 0; ei < 2; ei++) {
        struct tu_env e;
        struct tu_model m = { 0 };
        tu_env_init(&e, 2, 4096); /* small segments: rollovers are steps too */
        assert_int_equal(tu_open(&e), 0);
        uint64_t txid = 1, ver = 1;
        struct xt_store_rec r[3];
        bool prep;
        assert_int_equal(commit_one(e.s, txid++, ver++, r, &prep), 0); /* creates folders */
        tu_model_add(&m, r, 3);
        long before = mdsl_io_fault_ops(e.fault);
        assert_int_equal(commit_one(e.s, txid++, ver++, r, &prep), 0);
        tu_model_add(&m, r, 3);
        long steps = mdsl_io_fault_ops(e.fault) - before;
        int failures = 0;
        for (long n = 0; n < steps + 8; n++) {
            mdsl_io_fault_countdown(e.fault, n, errs[ei], false);
            uint64_t t = txid++;
            int rc = commit_one(e.s, t, ver++, r, &prep);
            mdsl_io_fault_countdown(e.fault, -1, 0, false);
            if (rc == 0) {
                tu_model_add(&m, r, 3);
                check_all(e.s, &m);
                continue;
            }
            failures++;
            assert_true(rc == errs[ei] || rc == -EIO);
            if (mdsl_store_health(e.s) != 0) {
                /* an fsync or index failure: writes refused until reopen */
                assert_int_equal(mdsl_store_prepare(e.s, txid, r, 1), mdsl_store_health(e.s));
                tu_close(&e);
                assert_int_equal(tu_open(&e), 0);
            }
            uint64_t *tx;
            size_t ntx;
            assert_int_equal(mdsl_store_prepared(e.s, &tx, &ntx), 0);
            assert_true(ntx <= 1);
            bool pending = ntx == 1;
            if (pending)
                assert_int_equal(tx[0], t);
            xt_free(tx);
            /* unless committed by the restart, the old state is visible */
            if (pending) {
                check_all(e.s, &m);
                assert_int_equal(mdsl_store_commit(e.s, t), 0);
                tu_model_add(&m, r, 3);
            } else {
                /* either nothing happened, or a restart found the COMMIT */
                struct xt_store_load l;
                assert_int_equal(mdsl_store_load_slice(e.s, (xt_slice_id){ .fsid = FS, .slice = 0, .table = 1 }, &l), 0);
                if (l.image.version == ver - 1)
                    tu_model_add(&m, r, 3);
                xt_store_load_free(&l);
            }
            check_all(e.s, &m);
            /* later commits work */
            uint64_t t2 = txid++;
            assert_int_equal(commit_one(e.s, t2, ver++, r, &prep), 0);
            tu_model_add(&m, r, 3);
            check_all(e.s, &m);
        }
        /* segment rollovers add steps to some commits, so not every N in
         * [0, steps) hits the same step; but most must fail */
        assert_true(failures >= steps / 2);
        tu_close(&e);
        assert_int_equal(tu_open(&e), 0);
        check_all(e.s, &m);
        print_message("countdown %s: %ld I/O steps per commit, %d failures injected\n",
                      ei ? "ENOSPC" : "EIO", steps, failures);
        tu_env_free(&e);
    }
}

/* ---- allocation failures --------------------------------------------- */

static void test_alloc_countdown(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 3, 1u << 16);
    assert_int_equal(tu_open(&e), 0);
    struct xt_store_rec r[3];
    bool prep;
    uint64_t txid = 1, ver = 1;
    int ok = 0;
    for (long n = 0; n < 200; n++) {
        xt_alloc_fail_after(n);
        uint64_t t = txid++;
        int rc = commit_one(e.s, t, ver++, r, &prep);
        xt_alloc_fail_after(-1);
        if (rc == 0) {
            tu_model_add(&m, r, 3);
            ok++;
        } else if (prep) {
            if (mdsl_store_health(e.s) == 0) {
                rc = mdsl_store_commit(e.s, t);
                if (rc == 0)
                    tu_model_add(&m, r, 3);
                else
                    assert_int_equal(mdsl_store_abort(e.s, t), 0);
            }
        }
        if (mdsl_store_health(e.s) != 0) {
            tu_close(&e);
            assert_int_equal(tu_open(&e), 0);
            uint64_t *tx;
            size_t ntx;
            assert_int_equal(mdsl_store_prepared(e.s, &tx, &ntx), 0);
            for (size_t i = 0; i < ntx; i++)
                assert_int_equal(mdsl_store_abort(e.s, tx[i]), 0);
            xt_free(tx);
            /* a restart may have completed the commit */
            struct xt_store_load l;
            if (mdsl_store_load_slice(e.s, (xt_slice_id){ .fsid = FS, .slice = 0, .table = 1 }, &l) == 0) {
                if (l.image.version == ver - 1)
                    tu_model_add(&m, r, 3);
                xt_store_load_free(&l);
            }
        }
        check_all(e.s, &m);
    }
    assert_true(ok > 0);
    tu_env_free(&e);
}

/* ---- rebuild --------------------------------------------------------- */

static void random_work(mdsl_store *s, struct tu_model *m, uint64_t *seed, uint64_t *txid,
                        uint64_t *ver, int ntx, bool leave_pending)
{
    for (int i = 0; i < ntx; i++) {
        struct xt_store_rec r[6];
        size_t n = 1 + tu_rnd(seed) % 5;
        for (size_t k = 0; k < n; k++) {
            uint64_t table = 1 + tu_rnd(seed) % 3;
            uint32_t slice = (uint32_t)(tu_rnd(seed) % 4);
            uint32_t len = (uint32_t)(tu_rnd(seed) % 1500);
            int kind = (int)(tu_rnd(seed) % 3);
            uint8_t type = kind == 0 ? XT_STORE_IMAGE : kind == 1 ? XT_STORE_DELTA : XT_STORE_COLUMN;
            r[k] = tu_rec(type, FS, table, slice, tu_rnd(seed) % 4, (uint32_t)(tu_rnd(seed) % 2),
                          (*ver)++, bufs[k], len);
        }
        uint64_t t = (*txid)++;
        assert_int_equal(mdsl_store_prepare(s, t, r, n), 0);
        uint64_t c = tu_rnd(seed) % 10;
        if (c < 7 || !leave_pending) {
            assert_int_equal(mdsl_store_commit(s, t), 0);
            tu_model_add(m, r, n);
        } else if (c < 9) {
            assert_int_equal(mdsl_store_abort(s, t), 0);
        }
    }
}

static void check_model(mdsl_store *s, const struct tu_model *m)
{
    for (uint64_t t = 1; t <= 3; t++)
        for (uint32_t sl = 0; sl < 4; sl++) {
            tu_check_slice(s, FS, m, t, sl);
            for (uint64_t k = 0; k < 4; k++)
                for (uint32_t g = 0; g < 2; g++)
                    tu_check_column(s, FS, m, t, sl, k, g);
        }
}

static void test_rebuild(void **state)
{
    (void)state;
    for (uint64_t seed0 = 1; seed0 <= 6; seed0++) {
        uint64_t seed = seed0 * 0x9E3779B97F4A7C15ull;
        struct tu_env e;
        struct tu_model m = { 0 };
        tu_env_init(&e, seed, 8192);
        e.o.gc_threshold = 0.5;
        assert_int_equal(tu_open(&e), 0);
        uint64_t txid = 1, ver = 1;
        random_work(e.s, &m, &seed, &txid, &ver, 60, true);
        if (seed0 % 2)
            assert_true(mdsl_store_gc(e.s, 100) >= 0);
        random_work(e.s, &m, &seed, &txid, &ver, 30, true);
        uint64_t *tx1, *tx2;
        size_t n1, n2;
        assert_int_equal(mdsl_store_prepared(e.s, &tx1, &n1), 0);
        tu_close(&e);
        struct tu_dump d1, d2;
        tu_dump_index(e.index, &d1);
        assert_int_equal(mdsl_index_destroy(e.index), 0);
        assert_int_equal(tu_open(&e), 0);
        assert_int_equal(mdsl_store_prepared(e.s, &tx2, &n2), 0);
        assert_int_equal(n1, n2);
        for (size_t i = 0; i < n1; i++) {
            bool found = false;
            for (size_t j = 0; j < n2; j++)
                found |= tx1[i] == tx2[j];
            assert_true(found);
        }
        check_model(e.s, &m);
        tu_close(&e);
        tu_dump_index(e.index, &d2);
        if (d1.n != d2.n || memcmp(d1.b, d2.b, d1.n))
            fail_msg("seed %llu: rebuilt index differs:\n--- original\n%.*s--- rebuilt\n%.*s",
                     (unsigned long long)seed0, (int)d1.n, d1.b, (int)d2.n, d2.b);
        free(d1.b);
        free(d2.b);
        xt_free(tx1);
        xt_free(tx2);
        tu_env_free(&e);
    }
}

/* ---- corruption ------------------------------------------------------ */

static void poke(mdsl_io *io, const char *path, uint64_t off, int delta_or_trunc, bool trunc)
{
    mdsl_file *f;
    assert_int_equal(mdsl_io_open(io, path, false, &f), 0);
    if (trunc) {
        assert_int_equal(mdsl_io_truncate(io, f, off), 0);
    } else {
        uint8_t b;
        assert_int_equal(mdsl_io_pread_full(io, f, off, &b, 1), 0);
        b = (uint8_t)(b + delta_or_trunc);
        struct mdsl_io_wr w = { f, off, &b, 1 };
        assert_int_equal(mdsl_io_write(io, &w, 1, NULL, 0, NULL), 0);
    }
    mdsl_io_close(io, f);
}

static void test_corruption(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 4, 1u << 20);
    assert_int_equal(tu_open(&e), 0);
    /* tx1: slice 0 image (first record of TSS.1 at offset 0) + a column */
    struct xt_store_rec r[2] = {
        tu_rec(XT_STORE_IMAGE, FS, 9, 0, 0, 0, 1, bufs[0], 500),
        tu_rec(XT_STORE_COLUMN, FS, 9, 0, 77, 3, 1, bufs[1], 200),
    };
    assert_int_equal(mdsl_store_prepare(e.s, 1, r, 2), 0);
    assert_int_equal(mdsl_store_commit(e.s, 1), 0);
    struct xt_store_rec r2 = tu_rec(XT_STORE_IMAGE, FS, 9, 1, 0, 0, 1, bufs[2], 100);
    assert_int_equal(mdsl_store_prepare(e.s, 2, &r2, 1), 0);
    assert_int_equal(mdsl_store_commit(e.s, 2), 0);
    tu_model_add(&m, &r2, 1);

    const char *tss = "/store/t.3.0000000000000009/TSS.1";
    const char *cs = "/store/t.3.0000000000000009/CS.3.1";
    poke(e.mem, tss, MDSL_HDR_SIZE + 17, 1, false); /* payload byte of slice 0's image */
    struct xt_store_load l;
    assert_int_equal(mdsl_store_load_slice(e.s, (xt_slice_id){ .fsid = FS, .slice = 0, .table = 9 }, &l), -EBADMSG);
    poke(e.mem, cs, 150, 0, true); /* cut the column record short */
    void *d;
    uint32_t len;
    assert_int_equal(mdsl_store_read_column(e.s, (xt_slice_id){ .fsid = FS, .slice = 0, .table = 9 }, 77, 3, &d, &len, NULL), -EBADMSG);
    /* the rest is intact and the store keeps working */
    tu_check_slice(e.s, FS, &m, 9, 1);
    struct xt_store_rec r3[2] = {
        tu_rec(XT_STORE_IMAGE, FS, 9, 0, 0, 0, 2, bufs[3], 300),
        tu_rec(XT_STORE_COLUMN, FS, 9, 0, 77, 3, 2, bufs[4], 10),
    };
    assert_int_equal(mdsl_store_prepare(e.s, 3, r3, 2), 0);
    assert_int_equal(mdsl_store_commit(e.s, 3), 0);
    tu_model_add(&m, r3, 2);
    tu_check_slice(e.s, FS, &m, 9, 0);
    tu_check_column(e.s, FS, &m, 9, 0, 77, 3);
    struct mdsl_stat st;
    mdsl_store_stat(e.s, &st);
    assert_true(st.corrupt_records >= 2);
    /* a rebuild scans over the corrupt record and loses nothing else */
    tu_close(&e);
    assert_int_equal(mdsl_index_destroy(e.index), 0);
    assert_int_equal(tu_open(&e), 0);
    tu_check_slice(e.s, FS, &m, 9, 0);
    tu_check_slice(e.s, FS, &m, 9, 1);
    tu_check_column(e.s, FS, &m, 9, 0, 77, 3);
    /* garbage at the tail of the active TSS is cut at open */
    tu_close(&e);
    mdsl_file *f;
    assert_int_equal(mdsl_io_open(e.mem, tss, false, &f), 0);
    uint64_t size;
    assert_int_equal(mdsl_io_size(e.mem, f, &size), 0);
    uint8_t junk[100];
    memset(junk, 0xAB, sizeof junk);
    struct mdsl_io_wr w = { f, size, junk, sizeof junk };
    assert_int_equal(mdsl_io_write(e.mem, &w, 1, NULL, 0, NULL), 0);
    mdsl_io_close(e.mem, f);
    assert_int_equal(tu_open(&e), 0);
    tu_check_slice(e.s, FS, &m, 9, 0);
    struct xt_store_rec r4 = tu_rec(XT_STORE_DELTA, FS, 9, 0, 0, 0, 3, bufs[5], 30);
    assert_int_equal(mdsl_store_prepare(e.s, 4, &r4, 1), 0);
    assert_int_equal(mdsl_store_commit(e.s, 4), 0);
    tu_model_add(&m, &r4, 1);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    tu_check_slice(e.s, FS, &m, 9, 0);
    tu_env_free(&e);
}

static void test_md(void **state)
{
    (void)state;
    struct tu_env e;
    tu_env_init(&e, 5, 1u << 16);
    assert_int_equal(tu_open(&e), 0);
    void *md;
    uint32_t len;
    assert_int_equal(mdsl_store_get_md(e.s, FS, 5, &md, &len), -ENOENT);
    assert_int_equal(mdsl_store_set_md(e.s, FS, 5, "one", 3), 0);
    assert_int_equal(mdsl_store_set_md(e.s, FS, 5, "second", 6), 0);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(mdsl_store_get_md(e.s, FS, 5, &md, &len), 0);
    assert_int_equal(len, 6);
    assert_memory_equal(md, "second", 6);
    xt_free(md);
    tu_env_free(&e);
}

/* ---- real files through liburing -------------------------------------- */

static void rm_rf(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_uring(void **state)
{
    (void)state;
    char tmp[] = "/tmp/mdsl_uring.XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char dir[128], index[128];
    snprintf(dir, sizeof dir, "%s/store", tmp);
    snprintf(index, sizeof index, "%s/index", tmp);
    mdsl_io *io;
    int rc = mdsl_io_uring_new(64, &io);
    if (rc < 0) {
        rm_rf(tmp);
        skip();
    }
    struct mdsl_store_opts o = { .io = io, .dir = dir, .index_dir = index, .seg_size = 16384,
                                 .gc_threshold = 0.5 };
    mdsl_store *s;
    struct tu_model m = { 0 };
    assert_int_equal(mdsl_store_open(&o, &s), 0);
    uint64_t seed = 77, txid = 1, ver = 1;
    random_work(s, &m, &seed, &txid, &ver, 80, false);
    check_model(s, &m);
    assert_true(mdsl_store_gc(s, 100) >= 0);
    check_model(s, &m);
    mdsl_store_close(s);
    assert_int_equal(mdsl_store_open(&o, &s), 0);
    check_model(s, &m);
    mdsl_store_close(s);
    assert_int_equal(mdsl_index_destroy(index), 0);
    assert_int_equal(mdsl_store_open(&o, &s), 0);
    check_model(s, &m);
    mdsl_store_close(s);
    mdsl_io_destroy(io);
    rm_rf(tmp);
}

/* ---- ENOSPC on a real tmpfs ------------------------------------------- */

static void test_tmpfs_enospc(void **state)
{
    (void)state;
    char tmp[] = "/tmp/mdsl_tmpfs.XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char dir[128], index[128], ballast[128];
    snprintf(dir, sizeof dir, "%s/store", tmp);
    snprintf(index, sizeof index, "/tmp/mdsl_tmpfs_index.%d", (int)getpid());
    snprintf(ballast, sizeof ballast, "%s/ballast", tmp);
    if (mount("tmpfs", tmp, "tmpfs", 0, "size=8m") < 0) {
        print_message("tmpfs ENOSPC test skipped: mount failed (%s)\n", strerror(errno));
        rmdir(tmp);
        skip();
    }
    /* 1 MiB of ballast to free later */
    int fd = open(ballast, O_CREAT | O_WRONLY, 0644);
    assert_true(fd >= 0);
    static uint8_t mb[1 << 20];
    assert_int_equal(write(fd, mb, sizeof mb), (ssize_t)sizeof mb);
    close(fd);
    mdsl_io *io;
    assert_int_equal(mdsl_io_uring_new(0, &io), 0);
    struct mdsl_store_opts o = { .io = io, .dir = dir, .index_dir = index, .seg_size = 1u << 20 };
    mdsl_store *s;
    struct tu_model m = { 0 };
    assert_int_equal(mdsl_store_open(&o, &s), 0);
    uint64_t txid = 1;
    int rc = 0;
    for (int i = 0; i < 400 && rc == 0; i++) {
        struct xt_store_rec r[2] = {
            tu_rec(XT_STORE_IMAGE, FS, 1, (uint32_t)(i % 8), 0, 0, (uint64_t)i + 1, bufs[0], 65536),
            tu_rec(XT_STORE_COLUMN, FS, 1, (uint32_t)(i % 8), 9, 0, (uint64_t)i + 1, bufs[1], 3000),
        };
        uint64_t t = txid++;
        rc = mdsl_store_prepare(s, t, r, 2);
        if (rc == 0) {
            assert_int_equal(mdsl_store_commit(s, t), 0);
            tu_model_add(&m, r, 2);
        }
    }
    assert_int_equal(rc, -ENOSPC);
    assert_int_equal(mdsl_store_health(s), 0);
    uint64_t *tx;
    size_t ntx;
    assert_int_equal(mdsl_store_prepared(s, &tx, &ntx), 0);
    assert_int_equal(ntx, 0);
    xt_free(tx);
    for (uint32_t sl = 0; sl < 8; sl++) {
        tu_check_slice(s, FS, &m, 1, sl);
        tu_check_column(s, FS, &m, 1, sl, 9, 0);
    }
    /* free space: later commits work */
    assert_int_equal(unlink(ballast), 0);
    struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, FS, 1, 0, 0, 0, 100000, bufs[0], 65536);
    assert_int_equal(mdsl_store_prepare(s, txid, &r, 1), 0);
    assert_int_equal(mdsl_store_commit(s, txid), 0);
    tu_model_add(&m, &r, 1);
    mdsl_store_close(s);
    assert_int_equal(mdsl_store_open(&o, &s), 0);
    for (uint32_t sl = 0; sl < 8; sl++)
        tu_check_slice(s, FS, &m, 1, sl);
    mdsl_store_close(s);
    mdsl_io_destroy(io);
    umount(tmp);
    rmdir(tmp);
    mdsl_index_destroy(index);
    rmdir(index);
}

/* ---- MOVED tombstones (docs/mdsl-scale.md "Tombstones") ---------------- */

/* The answers a slice moved away must give, and those of its neighbour. */
static void check_moved(mdsl_store *s, const struct tu_model *m)
{
    tu_check_slice(s, FS, m, 20, 0);
    tu_check_column(s, FS, m, 20, 0, 5, 1);
    tu_check_slice(s, FS, m, 20, 1);
    tu_check_column(s, FS, m, 20, 1, 5, 1);
    struct xt_store_load l;
    assert_int_equal(mdsl_store_load_slice(s, (xt_slice_id){ .fsid = FS, .slice = 0, .table = 20 }, &l), -ESTALE);
    void *d;
    uint32_t len;
    assert_int_equal(mdsl_store_read_column(s, (xt_slice_id){ .fsid = FS, .slice = 0, .table = 20 }, 5, 1, &d, &len, NULL), -ESTALE);
    /* a delta on top of the tombstone is refused, before and after a
     * restart (the guard's slice state is then read from the index) */
    struct xt_store_rec dl = tu_rec(XT_STORE_DELTA, FS, 20, 0, 0, 0, 5, bufs[9], 30);
    assert_int_equal(mdsl_store_prepare(s, 900, &dl, 1), -ESTALE);
    uint64_t *tx;
    size_t ntx;
    assert_int_equal(mdsl_store_prepared(s, &tx, &ntx), 0);
    assert_int_equal(ntx, 0);
    xt_free(tx);
}

static void test_moved(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 6, 1u << 16);
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    /* slice 0: image v1, deltas v2 v3, a column; slice 1 untouched by the move */
    struct xt_store_rec r[4] = {
        tu_rec(XT_STORE_IMAGE, FS, 20, 0, 0, 0, 1, bufs[0], 400),
        tu_rec(XT_STORE_COLUMN, FS, 20, 0, 5, 1, 1, bufs[1], 60),
        tu_rec(XT_STORE_IMAGE, FS, 20, 1, 0, 0, 1, bufs[2], 200),
        tu_rec(XT_STORE_COLUMN, FS, 20, 1, 5, 1, 1, bufs[3], 70),
    };
    assert_int_equal(tu_commit(e.s, txid++, r, 4), 0);
    tu_model_add(&m, r, 4);
    for (uint64_t v = 2; v <= 3; v++) {
        struct xt_store_rec d = tu_rec(XT_STORE_DELTA, FS, 20, 0, 0, 0, v, bufs[4], 50);
        assert_int_equal(tu_commit(e.s, txid++, &d, 1), 0);
        tu_model_add(&m, &d, 1);
    }
    /* the move: the tombstone at v4 (its image went elsewhere in the txid) */
    struct xt_store_rec t = tu_tombstone(FS, 20, 0, 4);
    assert_int_equal(mdsl_store_prepare(e.s, txid, &t, 1), 0);
    tu_check_slice(e.s, FS, &m, 20, 0); /* prepared: invisible */
    assert_int_equal(mdsl_store_commit(e.s, txid++), 0);
    tu_model_add(&m, &t, 1);
    check_moved(e.s, &m);

    /* late records under the tombstone are ignored (rules 1, 2) */
    struct xt_store_rec late[2] = {
        tu_rec(XT_STORE_DELTA, FS, 20, 0, 0, 0, 3, bufs[5], 10),
        tu_rec(XT_STORE_IMAGE, FS, 20, 0, 0, 0, 2, bufs[6], 10),
    };
    assert_int_equal(tu_commit(e.s, txid++, late, 1), 0);
    assert_int_equal(tu_commit(e.s, txid++, late + 1, 1), 0);
    tu_model_add(&m, late, 2);
    check_moved(e.s, &m);

    /* index rule 1: the tombstone is the only pointer of the slice left */
    struct xt_store_list sl;
    assert_int_equal(mdsl_store_list_slices(e.s, NULL, 0, 10, &sl), 0);
    assert_int_equal(sl.n, 2);
    assert_true(sl.end);
    assert_int_equal(sl.slices[0].id.slice, 0);
    assert_int_equal(sl.slices[0].version, 4);
    assert_true(sl.slices[0].moved);
    assert_int_equal(sl.slices[1].id.slice, 1);
    assert_int_equal(sl.slices[1].version, 1);
    assert_false(sl.slices[1].moved);
    xt_store_list_free(&sl);

    /* restart, then rebuild: the same index and the same answers */
    tu_close(&e);
    struct tu_dump d1, d2;
    tu_dump_index(e.index, &d1);
    assert_int_equal(tu_open(&e), 0);
    check_moved(e.s, &m);
    tu_close(&e);
    assert_int_equal(mdsl_index_destroy(e.index), 0);
    assert_int_equal(tu_open(&e), 0);
    check_moved(e.s, &m);
    tu_close(&e);
    tu_dump_index(e.index, &d2);
    assert_int_equal(d1.n, d2.n);
    assert_memory_equal(d1.b, d2.b, d1.n);
    free(d1.b);
    free(d2.b);
    assert_int_equal(tu_open(&e), 0);

    /* the slice moves back: an image at a higher version loads normally,
     * and deltas on it are accepted again */
    struct xt_store_rec back = tu_rec(XT_STORE_IMAGE, FS, 20, 0, 0, 0, 6, bufs[7], 300);
    assert_int_equal(tu_commit(e.s, txid++, &back, 1), 0);
    tu_model_add(&m, &back, 1);
    struct xt_store_rec d7 = tu_rec(XT_STORE_DELTA, FS, 20, 0, 0, 0, 7, bufs[8], 40);
    assert_int_equal(tu_commit(e.s, txid++, &d7, 1), 0);
    tu_model_add(&m, &d7, 1);
    tu_check_slice(e.s, FS, &m, 20, 0);
    struct xt_store_load l;
    assert_int_equal(mdsl_store_load_slice(e.s, (xt_slice_id){ .fsid = FS, .slice = 0, .table = 20 }, &l), 0);
    assert_int_equal(l.image.version, 6);
    assert_int_equal(l.ndeltas, 1);
    xt_store_load_free(&l);
    tu_close(&e);
    assert_int_equal(mdsl_index_destroy(e.index), 0);
    assert_int_equal(tu_open(&e), 0);
    tu_check_slice(e.s, FS, &m, 20, 0);
    tu_check_slice(e.s, FS, &m, 20, 1);
    tu_env_free(&e);
}

/* The newest record of slice (FS, 30, 0) as listed: version, image held. */
static void listed(mdsl_store *s, uint64_t *version, bool *image)
{
    struct xt_store_list l;
    assert_int_equal(mdsl_store_list_slices(s, NULL, 0, 10, &l), 0);
    assert_int_equal(l.n, 1);
    *version = l.slices[0].version;
    *image = l.slices[0].image;
    xt_store_list_free(&l);
}

/* Local transactions (the catch-up's, docs/mdsl-replicas.md "Catch-up of a
 * returning MDSL"): copied records race commits by the update rules, keep
 * their flags, are never listed as prepared, and one cut short by a crash is
 * aborted at the next open. */
static void test_apply_local(void **state)
{
    (void)state;
    struct tu_env e;
    tu_env_init(&e, 7, 1u << 16);
    assert_int_equal(tu_open(&e), 0);
    xt_slice_id id = { .fsid = FS, .slice = 0, .table = 30 };
    uint64_t v;
    bool img;
    /* a lost disk: the commit of delta v8 came before any copy */
    struct xt_store_rec d8 = tu_rec(XT_STORE_DELTA, FS, 30, 0, 0, 0, 8, bufs[0], 80);
    assert_int_equal(tu_commit(e.s, 1, &d8, 1), 0);
    listed(e.s, &v, &img);
    assert_int_equal(v, 8);
    assert_false(img);
    /* the peer's copy: image v5 (SYS) and deltas v6 v7 */
    struct xt_store_rec peer[3] = {
        tu_rec(XT_STORE_IMAGE, FS, 30, 0, 0, 0, 5, bufs[1], 500),
        tu_rec(XT_STORE_DELTA, FS, 30, 0, 0, 0, 6, bufs[2], 60),
        tu_rec(XT_STORE_DELTA, FS, 30, 0, 0, 0, 7, bufs[3], 70),
    };
    peer[0].flags = XT_STORE_F_SYS;
    assert_int_equal(mdsl_store_apply_local(e.s, peer, 3), 0);
    listed(e.s, &v, &img);
    assert_int_equal(v, 8);
    assert_true(img);
    struct xt_store_load l;
    assert_int_equal(mdsl_store_load_slice(e.s, id, &l), 0);
    assert_int_equal(l.image.version, 5);
    assert_int_equal(l.image.flags, XT_STORE_F_SYS);
    assert_memory_equal(l.image.data, bufs[1], 500);
    assert_int_equal(l.ndeltas, 3);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(l.deltas[i].version, 6 + i);
    assert_memory_equal(l.deltas[2].data, bufs[0], 80); /* v8: the commit's */
    xt_store_load_free(&l);
    /* a newer image committed: an older copy arriving later changes nothing */
    struct xt_store_rec i9 = tu_rec(XT_STORE_IMAGE, FS, 30, 0, 0, 0, 9, bufs[4], 90);
    assert_int_equal(tu_commit(e.s, 2, &i9, 1), 0);
    assert_int_equal(mdsl_store_apply_local(e.s, peer, 3), 0);
    assert_int_equal(mdsl_store_load_slice(e.s, id, &l), 0);
    assert_int_equal(l.image.version, 9);
    assert_int_equal(l.ndeltas, 0);
    xt_store_load_free(&l);
    /* a local transaction cut between PREPARE and COMMIT: never listed as
     * prepared, aborted by the next open */
    uint64_t local = MDSL_TXID_LOCAL | 77;
    struct xt_store_rec i10 = tu_rec(XT_STORE_IMAGE, FS, 30, 0, 0, 0, 10, bufs[5], 100);
    assert_int_equal(mdsl_store_prepare(e.s, local, &i10, 1), 0);
    uint64_t *tx;
    size_t n;
    assert_int_equal(mdsl_store_prepared(e.s, &tx, &n), 0);
    assert_int_equal(n, 0);
    xt_free(tx);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(mdsl_store_commit(e.s, local), -EINVAL); /* aborted */
    assert_int_equal(mdsl_store_load_slice(e.s, id, &l), 0);
    assert_int_equal(l.image.version, 9);
    xt_store_load_free(&l);
    /* bad input: the reserve flag is a coordinator's, never a copy's */
    i10.flags = XT_STORE_F_RESERVE;
    assert_int_equal(mdsl_store_apply_local(e.s, &i10, 1), -EINVAL);
    assert_int_equal(mdsl_store_apply_local(e.s, NULL, 0), -EINVAL);
    tu_env_free(&e);
}

static void test_flags_refused(void **state)
{
    (void)state;
    struct tu_env e;
    tu_env_init(&e, 7, 1u << 16);
    assert_int_equal(tu_open(&e), 0);
    static const struct {
        uint8_t type, flags;
        uint32_t len;
    } bad[] = {
        { XT_STORE_DELTA, XT_STORE_F_MOVED, 0 },
        { XT_STORE_COLUMN, XT_STORE_F_MOVED, 0 },
        { XT_STORE_IMAGE, XT_STORE_F_MOVED, 10 },           /* a tombstone is empty */
        { XT_STORE_IMAGE, XT_STORE_F_TOMBSTONE, 0 },
        { XT_STORE_DELTA, XT_STORE_F_TOMBSTONE, 0 },
        { XT_STORE_COLUMN, XT_STORE_F_TOMBSTONE, 10 },
        { XT_STORE_IMAGE, XT_STORE_F_MOVED | XT_STORE_F_TOMBSTONE, 0 },
        { XT_STORE_COLUMN, XT_STORE_F_MOVED | XT_STORE_F_TOMBSTONE, 0 },
        { XT_STORE_IMAGE, 0x08, 0 },
        { XT_STORE_COLUMN, XT_STORE_F_SYS, 10 },            /* SYS: slice records only */
        { XT_STORE_IMAGE, XT_STORE_F_SYS | XT_STORE_F_MOVED, 0 }, /* ... with rows */
        { XT_STORE_IMAGE, 0x40 | XT_STORE_F_MOVED, 0 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct xt_store_rec r = tu_rec(bad[i].type, FS, 30, 0, 1, 0, 1, bufs[0], bad[i].len);
        r.flags = bad[i].flags;
        if (mdsl_store_prepare(e.s, 1, &r, 1) != -EINVAL)
            fail_msg("type %u flags 0x%x len %u accepted", bad[i].type, bad[i].flags,
                     bad[i].len);
    }
    /* the two defined ones pass; nothing of the refused is stored */
    struct xt_store_rec ok[2] = { tu_tombstone(FS, 30, 0, 1),
                              tu_rec(XT_STORE_COLUMN, FS, 30, 1, 1, 0, 1, bufs[0], 0) };
    ok[1].flags = XT_STORE_F_TOMBSTONE;
    assert_int_equal(tu_commit(e.s, 1, ok, 2), 0);
    struct xt_store_list sl;
    assert_int_equal(mdsl_store_list_slices(e.s, NULL, 0, 10, &sl), 0);
    assert_int_equal(sl.n, 1);
    assert_true(sl.slices[0].moved);
    xt_store_list_free(&sl);
    tu_env_free(&e);
}

/* GC moves a tombstone like any live record: the segment that held it is
 * freed and the slice still answers -ESTALE, also after a rebuild. */
static void test_moved_gc(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 8, 4096);
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    for (uint32_t sl = 0; sl < 4; sl++) {
        struct xt_store_rec r[2] = { tu_rec(XT_STORE_IMAGE, FS, 40, sl, 0, 0, 1, bufs[0], 300),
                                 tu_tombstone(FS, 40, sl, 2) };
        assert_int_equal(tu_commit(e.s, txid++, r, 2), 0);
        tu_model_add(&m, r, 2);
    }
    for (uint64_t v = 1; v <= 60; v++) { /* dead weight in every segment */
        struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, FS, 40, 9, 0, 0, v, bufs[1], 900);
        assert_int_equal(tu_commit(e.s, txid++, &r, 1), 0);
        tu_model_add(&m, &r, 1);
    }
    assert_true(mdsl_store_gc(e.s, 1000) > 0);
    mdsl_file *f;
    assert_int_equal(mdsl_io_open(e.mem, "/store/t.3.0000000000000028/TSS.1", false, &f),
                     -ENOENT);
    struct mdsl_stat st;
    mdsl_store_stat(e.s, &st);
    assert_true(st.gc_moved_bytes > 0);
    for (int round = 0; round < 2; round++) {
        for (uint32_t sl = 0; sl < 4; sl++)
            tu_check_slice(e.s, FS, &m, 40, sl);
        tu_check_slice(e.s, FS, &m, 40, 9);
        struct xt_store_list l;
        assert_int_equal(mdsl_store_list_slices(e.s, NULL, 0, 100, &l), 0);
        assert_int_equal(l.n, 5);
        for (size_t i = 0; i < 4; i++)
            assert_true(l.slices[i].moved && l.slices[i].version == 2);
        assert_false(l.slices[4].moved);
        xt_store_list_free(&l);
        tu_close(&e);
        assert_int_equal(mdsl_index_destroy(e.index), 0);
        assert_int_equal(tu_open(&e), 0);
    }
    tu_env_free(&e);
}

/* ---- the slice listing ------------------------------------------------ */

struct want {
    uint32_t fsid, slice;
    uint64_t table, version;
    bool moved;
    bool sys;   /* the newest record has XT_STORE_F_SYS */
};

static int cmp_want(const void *a, const void *b)
{
    const struct want *x = a, *y = b;
    if (x->fsid != y->fsid)
        return x->fsid < y->fsid ? -1 : 1;
    if (x->table != y->table)
        return x->table < y->table ? -1 : 1;
    return x->slice < y->slice ? -1 : x->slice > y->slice;
}

/* Walks the whole listing max entries at a time and compares it with w. */
static void check_listing(mdsl_store *s, const struct want *w, size_t nw, uint32_t max)
{
    uint8_t cur[MDSL_LIST_CURSOR];
    uint32_t curlen = 0;
    size_t got = 0, calls = 0, cap = XT_MIN(max, MDSL_LIST_MAX);
    for (;;) {
        struct xt_store_list l;
        assert_int_equal(mdsl_store_list_slices(s, cur, curlen, max, &l), 0);
        calls++;
        assert_true(l.n <= cap);
        assert_true(l.end || l.n == cap);
        for (size_t i = 0; i < l.n; i++, got++) {
            assert_true(got < nw);
            const struct xt_store_slice *x = &l.slices[i];
            if (x->id.fsid != w[got].fsid || x->id.table != w[got].table ||
                x->id.slice != w[got].slice || x->version != w[got].version ||
                x->moved != w[got].moved || x->sys != w[got].sys)
                fail_msg("entry %zu: fs %u table %llu slice %u v%llu moved %d sys %d, expected "
                         "fs %u table %llu slice %u v%llu moved %d sys %d", got, x->id.fsid,
                         (unsigned long long)x->id.table, x->id.slice,
                         (unsigned long long)x->version, x->moved, x->sys, w[got].fsid,
                         (unsigned long long)w[got].table, w[got].slice,
                         (unsigned long long)w[got].version, w[got].moved, w[got].sys);
        }
        assert_int_equal(l.cursor_len, l.n || curlen ? MDSL_LIST_CURSOR : 0);
        memcpy(cur, l.cursor, l.cursor_len);
        curlen = l.cursor_len;
        bool end = l.end;
        xt_store_list_free(&l);
        if (end)
            break;
    }
    assert_int_equal(got, nw);
    assert_true(calls >= (nw + cap - 1) / cap);
}

static void test_list_slices(void **state)
{
    (void)state;
    enum { NSL = 10000, BATCH = 500 };
    static struct want w[NSL];
    static const uint32_t fsids[3] = { 1, 2, 0xfffffffe };
    static const uint64_t tables[4] = { 1, 2, UINT64_C(0x100000000), UINT64_MAX };
    struct tu_env e;
    tu_env_init(&e, 9, 1u << 20);
    assert_int_equal(tu_open(&e), 0);
    struct xt_store_list l;
    assert_int_equal(mdsl_store_list_slices(e.s, NULL, 0, 333, &l), 0);
    assert_true(l.n == 0 && l.end && l.cursor_len == 0);
    xt_store_list_free(&l);
    static struct xt_store_rec r[BATCH];
    uint64_t txid = 1;
    for (size_t i = 0; i < NSL; i++) {
        /* slice numbers spread over the whole u32 range, the last one too */
        uint32_t slice = i == NSL - 1 ? UINT32_MAX : (uint32_t)(i * 2654435761u);
        w[i] = (struct want){ .fsid = fsids[i % 3], .table = tables[(i / 3) % 4], .slice = slice, .version = 10 + i % 7, .sys = i % 4 == 1 };
    }
    for (size_t b = 0; b < NSL; b += BATCH) {
        for (size_t i = 0; i < BATCH; i++) {
            const struct want *x = &w[b + i];
            r[i] = (struct xt_store_rec){ .type = XT_STORE_IMAGE, .flags = x->sys ? XT_STORE_F_SYS : 0,
                                      .id = { .fsid = x->fsid, .slice = x->slice,
                                              .table = x->table },
                                      .version = x->version, .data = bufs[0], .len = 16 };
        }
        assert_int_equal(tu_commit(e.s, txid++, r, BATCH), 0);
    }
    /* every 5th slice moves away, every 3rd other one gets a delta (with
     * SYS for every even one): the newest record's SYS is listed */
    for (size_t b = 0; b < NSL; b += BATCH) {
        size_t n = 0;
        for (size_t i = b; i < b + BATCH; i++) {
            struct want *x = &w[i];
            if (i % 5 == 0) {
                x->version++;
                x->moved = true;
                x->sys = false;
                r[n++] = tu_tombstone(x->fsid, x->table, x->slice, x->version);
            } else if (i % 3 == 0) {
                x->version += 2;
                x->sys = i % 2 == 0;
                r[n++] = (struct xt_store_rec){ .type = XT_STORE_DELTA, .flags = x->sys ? XT_STORE_F_SYS : 0,
                                            .id = { .fsid = x->fsid, .slice = x->slice,
                                                    .table = x->table },
                                            .version = x->version, .data = bufs[1], .len = 8 };
            }
        }
        assert_int_equal(tu_commit(e.s, txid++, r, n), 0);
    }
    /* a prepared, undecided tombstone is not listed */
    struct xt_store_rec pt = tu_tombstone(w[1].fsid, w[1].table, w[1].slice, 99);
    assert_int_equal(mdsl_store_prepare(e.s, txid++, &pt, 1), 0);
    qsort(w, NSL, sizeof *w, cmp_want);
    check_listing(e.s, w, NSL, 333);
    check_listing(e.s, w, NSL, 1);
    check_listing(e.s, w, NSL, NSL); /* capped at MDSL_LIST_MAX per call */
    assert_int_equal(mdsl_store_list_slices(e.s, NULL, 0, 100000, &l), 0);
    assert_int_equal(l.n, MDSL_LIST_MAX);
    assert_false(l.end);
    xt_store_list_free(&l);

    /* bad input */
    uint8_t cur[MDSL_LIST_CURSOR + 1] = { 0 };
    assert_int_equal(mdsl_store_list_slices(e.s, NULL, 0, 0, &l), -EINVAL);
    assert_int_equal(mdsl_store_list_slices(e.s, cur, 5, 10, &l), -EINVAL);
    assert_int_equal(mdsl_store_list_slices(e.s, cur, sizeof cur, 10, &l), -EINVAL);
    assert_int_equal(mdsl_store_list_slices(e.s, NULL, MDSL_LIST_CURSOR, 10, &l), -EINVAL);
    /* a cursor at the last possible slice: nothing follows */
    memset(cur, 0xff, sizeof cur);
    assert_int_equal(mdsl_store_list_slices(e.s, cur, MDSL_LIST_CURSOR, 10, &l), 0);
    assert_true(l.n == 0 && l.end);
    xt_store_list_free(&l);

    /* GC, restart and rebuild give the same listing */
    assert_true(mdsl_store_gc(e.s, 1000) >= 0);
    check_listing(e.s, w, NSL, 333);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    check_listing(e.s, w, NSL, 333);
    tu_close(&e);
    assert_int_equal(mdsl_index_destroy(e.index), 0);
    assert_int_equal(tu_open(&e), 0);
    check_listing(e.s, w, NSL, 333);
    tu_env_free(&e);
}

int main(void)
{
    xt_log_set_level(XT_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matrix),
        cmocka_unit_test(test_countdown),
        cmocka_unit_test(test_alloc_countdown),
        cmocka_unit_test(test_rebuild),
        cmocka_unit_test(test_corruption),
        cmocka_unit_test(test_md),
        cmocka_unit_test(test_moved),
        cmocka_unit_test(test_flags_refused),
        cmocka_unit_test(test_moved_gc),
        cmocka_unit_test(test_list_slices),
        cmocka_unit_test(test_apply_local),
        cmocka_unit_test(test_uring),
        cmocka_unit_test(test_tmpfs_enospc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
