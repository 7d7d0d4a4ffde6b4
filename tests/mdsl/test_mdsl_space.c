/*
 * test_mdsl_space.c -- space back after ring-1 moves (mdsl_space.c,
 * docs/mdsl-scale.md "Space back"): folder drops (only all-MOVED folders
 * without pending prepares, columns or md; the index and files go; reopen
 * and rebuild agree), a fault at every I/O step of a drop then a restart
 * (and a crash between the rename and the index batch), readers racing the
 * drops (folders are pinned), the idle roll, the
 * sweep at a higher threshold, the sweep-owed mark (durable across
 * restarts, cleared only by a sweep that ran to its end), the
 * background thread doing what mdsl_store_space_request asks, and a full
 * disk (the reserve, GC under pressure, segments bounded by the device).
 */
#include "mdsl_test_util.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define FS 3

static uint8_t bufs[8][20000];

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static bool mem_exists(struct tu_env *e, const char *path)
{
    mdsl_file *f;
    if (mdsl_io_open(e->mem, path, false, &f) < 0)
        return false;
    mdsl_io_close(e->mem, f);
    return true;
}

static int count_dir(const char *name, bool is_dir, void *arg)
{
    (void)is_dir;
    int *n = arg;
    if (strstr(name, ".drop"))
        *n += 1000; /* a leftover drop folder fails the count */
    (*n)++;
    return 0;
}

/* Folders under /store (the index lives outside it), failing on a .drop. */
static int folders(struct tu_env *e)
{
    int n = 0;
    assert_int_equal(mdsl_io_list(e->mem, "/store", count_dir, &n), 0);
    assert_true(n < 1000);
    return n;
}

/* Slices of (fsid, table) in the listing. */
static size_t listed(mdsl_store *s, uint32_t fsid, uint64_t table)
{
    struct xt_store_list l;
    assert_int_equal(mdsl_store_list_slices(s, NULL, 0, MDSL_LIST_MAX, &l), 0);
    assert_true(l.end);
    size_t n = 0;
    for (size_t i = 0; i < l.n; i++)
        n += l.slices[i].id.fsid == fsid && l.slices[i].id.table == table;
    xt_store_list_free(&l);
    return n;
}

/* `nslices` slices of (fsid, table) with two images each (dead weight),
 * then tombstones on the first `moved` of them. */
static void fill_table(mdsl_store *s, struct tu_model *m, uint64_t *txid, uint32_t fsid,
                       uint64_t table, uint32_t nslices, uint32_t moved, uint32_t len)
{
    for (uint64_t v = 1; v <= 2; v++)
        for (uint32_t sl = 0; sl < nslices; sl++) {
            struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, fsid, table, sl, 0, 0, v, bufs[sl % 8], len);
            assert_int_equal(tu_commit(s, (*txid)++, &r, 1), 0);
            if (m)
                tu_model_add(m, &r, 1);
        }
    for (uint32_t sl = 0; sl < moved; sl++) {
        struct xt_store_rec r = tu_tombstone(fsid, table, sl, 3);
        assert_int_equal(tu_commit(s, (*txid)++, &r, 1), 0);
        if (m)
            tu_model_add(m, &r, 1);
    }
}

static void check_gone(struct tu_env *e, uint32_t fsid, uint64_t table, uint32_t nslices)
{
    char path[96];
    snprintf(path, sizeof path, "/store/t.%u.%016llx/md", fsid, (unsigned long long)table);
    assert_false(mem_exists(e, path));
    assert_int_equal(listed(e->s, fsid, table), 0);
    struct xt_store_load l;
    for (uint32_t sl = 0; sl < nslices; sl++)
        assert_int_equal(mdsl_store_load_slice(e->s, (xt_slice_id){ .fsid = fsid, .slice = sl, .table = table }, &l), -ENOENT);
}

/* ---- drops ------------------------------------------------------------- */

static void test_drop(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 1, 4096);
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    fill_table(e.s, &m, &txid, FS, 20, 3, 3, 900);  /* all moved: dropped */
    fill_table(e.s, &m, &txid, FS, 21, 3, 2, 900);  /* one live slice: kept */
    fill_table(e.s, &m, &txid, FS, 22, 2, 2, 300);  /* all moved, a prepare pending */
    fill_table(e.s, &m, &txid, FS, 23, 2, 2, 300);  /* all moved, with md: kept */
    fill_table(e.s, NULL, &txid, FS + 1, 20, 2, 2, 300); /* same table, other fs: dropped */
    assert_int_equal(mdsl_store_set_md(e.s, FS, 23, "meta", 4), 0);
    struct xt_store_rec pend = tu_tombstone(FS, 22, 0, 4);
    assert_int_equal(mdsl_store_prepare(e.s, 500, &pend, 1), 0);
    struct xt_store_rec col = tu_rec(XT_STORE_COLUMN, FS, 24, 0, 9, 1, 1, bufs[0], 50);
    assert_int_equal(tu_commit(e.s, txid++, &col, 1), 0); /* a column: never dropped */
    struct xt_store_rec colmv = tu_tombstone(FS, 24, 0, 2);
    assert_int_equal(tu_commit(e.s, txid++, &colmv, 1), 0);
    tu_model_add(&m, &col, 1);
    tu_model_add(&m, &colmv, 1);
    assert_int_equal(folders(&e), 6);

    struct mdsl_stat st0, st;
    mdsl_store_stat(e.s, &st0);
    assert_int_equal(mdsl_store_drop_moved(e.s), 2);
    mdsl_store_stat(e.s, &st);
    assert_int_equal(st.dropped_folders, 2);
    assert_true(st.dropped_bytes > 0);
    assert_int_equal(st0.bytes - st.bytes, st.dropped_bytes);
    assert_int_equal(st.tables, st0.tables - 2);
    assert_int_equal(folders(&e), 4);
    check_gone(&e, FS, 20, 3);
    check_gone(&e, FS + 1, 20, 2);
    for (uint32_t sl = 0; sl < 3; sl++)
        tu_check_slice(e.s, FS, &m, 21, sl);
    tu_check_slice(e.s, FS, &m, 22, 0);
    tu_check_slice(e.s, FS, &m, 23, 1);
    tu_check_column(e.s, FS, &m, 24, 0, 9, 1);
    void *md;
    uint32_t mdlen;
    assert_int_equal(mdsl_store_get_md(e.s, FS, 23, &md, &mdlen), 0);
    xt_free(md);

    /* nothing more until the prepare is decided; then its folder goes */
    assert_int_equal(mdsl_store_drop_moved(e.s), 0);
    assert_int_equal(mdsl_store_commit(e.s, 500), 0);
    tu_model_add(&m, &pend, 1);
    assert_int_equal(mdsl_store_drop_moved(e.s), 1);
    check_gone(&e, FS, 22, 2);

    /* a reopen and a rebuild from the segments agree: nothing comes back */
    for (int round = 0; round < 2; round++) {
        tu_close(&e);
        if (round)
            assert_int_equal(mdsl_index_destroy(e.index), 0);
        assert_int_equal(tu_open(&e), 0);
        check_gone(&e, FS, 20, 3);
        check_gone(&e, FS, 22, 2);
        for (uint32_t sl = 0; sl < 3; sl++)
            tu_check_slice(e.s, FS, &m, 21, sl);
        assert_int_equal(listed(e.s, FS, 21), 3);
        assert_int_equal(folders(&e), 3);
    }

    /* the slice moving back makes a new folder, as for a new table */
    struct xt_store_rec back = tu_rec(XT_STORE_IMAGE, FS, 20, 1, 0, 0, 9, bufs[2], 500);
    assert_int_equal(tu_commit(e.s, txid++, &back, 1), 0);
    struct tu_model mb = { 0 };
    tu_model_add(&mb, &back, 1);
    tu_check_slice(e.s, FS, &mb, 20, 1);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    tu_check_slice(e.s, FS, &mb, 20, 1);
    assert_int_equal(mdsl_store_drop_moved(e.s), 0);
    tu_env_free(&e);
}

/* A fault at I/O op k of the drop (every later op failing too, as after a
 * crash), then a restart: the drop is either not done (and a later pass
 * does it) or finished by recovery; the live table never changes. When the
 * files outlive the drop, a new folder of the same table made before the
 * restart keeps its records (recovery must not unindex it). */
static void drop_with_fault(long k, long *ops_out)
{
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 2, 4096);
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    fill_table(e.s, &m, &txid, FS, 30, 4, 4, 700);
    fill_table(e.s, &m, &txid, FS, 31, 2, 1, 700);
    long ops0 = mdsl_io_fault_ops(e.fault);
    if (k >= 0)
        mdsl_io_fault_countdown(e.fault, k, -EIO, true);
    int rc = mdsl_store_drop_moved(e.s);
    if (ops_out)
        *ops_out = mdsl_io_fault_ops(e.fault) - ops0;
    mdsl_io_fault_reset(e.fault);
    bool renamed = !mem_exists(&e, "/store/t.3.000000000000001e/md");
    assert_int_equal(rc, renamed ? 1 : -EIO);
    struct tu_model mb = { 0 };
    if (renamed) { /* the table is gone from the index: a new folder may come */
        struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, FS, 30, 2, 0, 0, 7, bufs[3], 400);
        assert_int_equal(tu_commit(e.s, txid++, &r, 1), 0);
        tu_model_add(&mb, &r, 1);
    }
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(mdsl_store_drop_moved(e.s), renamed ? 0 : 1);
    assert_int_equal(folders(&e), renamed ? 2 : 1);
    assert_int_equal(listed(e.s, FS, 30), renamed ? 1 : 0);
    if (renamed)
        tu_check_slice(e.s, FS, &mb, 30, 2);
    else
        check_gone(&e, FS, 30, 4);
    for (uint32_t sl = 0; sl < 2; sl++)
        tu_check_slice(e.s, FS, &m, 31, sl);
    tu_env_free(&e);
}

static void test_drop_faults(void **state)
{
    (void)state;
    long ops = 0;
    drop_with_fault(-1, &ops);
    assert_true(ops >= 3); /* rename, unlinks, rmdir */
    for (long k = 0; k < ops; k++)
        drop_with_fault(k, NULL);
}

/* Killed between the rename and the index batch: the index still names
 * the table, its folder is a .drop. Recovery unindexes it and removes it. */
static void test_drop_crash_after_rename(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 3, 4096);
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    fill_table(e.s, &m, &txid, FS, 40, 3, 3, 700);
    fill_table(e.s, &m, &txid, FS, 41, 2, 0, 700);
    tu_close(&e);
    assert_int_equal(mdsl_io_rename(e.fault, "/store/t.3.0000000000000028",
                                    "/store/t.3.0000000000000028.drop"), 0);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(folders(&e), 1);
    check_gone(&e, FS, 40, 3);
    for (uint32_t sl = 0; sl < 2; sl++)
        tu_check_slice(e.s, FS, &m, 41, sl);
    struct mdsl_stat st;
    mdsl_store_stat(e.s, &st);
    assert_int_equal(st.tables, 1);
    tu_close(&e);
    assert_int_equal(mdsl_index_destroy(e.index), 0);
    assert_int_equal(tu_open(&e), 0);
    check_gone(&e, FS, 40, 3);
    tu_check_slice(e.s, FS, &m, 41, 1);
    tu_env_free(&e);
}

/* Readers of the tables being dropped (loads, column reads, md reads) get
 * -ESTALE before and -ENOENT after, never a freed folder (ASan would tell):
 * they pin it. */
#define RD_TABLES 120

struct rd_arg {
    mdsl_store *s;
    _Atomic bool stop;
    unsigned seed;
    long reads;
    int bad;                /* the first unexpected answer (cmocka asserts in
                               the main thread only) */
};

static void *rd_main(void *arg)
{
    struct rd_arg *a = arg;
    uint64_t r = a->seed;
    while (!atomic_load(&a->stop)) {
        uint64_t t = 100 + tu_rnd(&r) % RD_TABLES;
        struct xt_store_load l;
        int rc = mdsl_store_load_slice(a->s, (xt_slice_id){ .fsid = FS, .slice = 0, .table = t }, &l);
        if (rc != -ESTALE && rc != -ENOENT && !a->bad)
            a->bad = rc ? rc : 1;
        void *d = NULL;
        uint32_t len;
        rc = mdsl_store_read_column(a->s, (xt_slice_id){ .fsid = FS, .slice = 0, .table = t }, 1, 0, &d, &len, NULL);
        if (rc != -ESTALE && rc != -ENOENT && !a->bad)
            a->bad = rc ? rc : 2;
        rc = mdsl_store_get_md(a->s, FS, t, &d, &len);
        if (rc != -ENOENT && !a->bad)
            a->bad = rc ? rc : 3;
        a->reads++;
    }
    return NULL;
}

static void test_drop_vs_readers(void **state)
{
    (void)state;
    struct tu_env e;
    tu_env_init(&e, 7, 1u << 20);
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    for (uint64_t t = 100; t < 100 + RD_TABLES; t++)
        fill_table(e.s, NULL, &txid, FS, t, 1, 1, 200);
    struct rd_arg a[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        a[i] = (struct rd_arg){ .s = e.s, .seed = 11u + (unsigned)i };
        assert_int_equal(pthread_create(&th[i], NULL, rd_main, &a[i]), 0);
    }
    sleep_ms(20);
    assert_int_equal(mdsl_store_drop_moved(e.s), RD_TABLES);
    sleep_ms(20);
    for (int i = 0; i < 3; i++) {
        atomic_store(&a[i].stop, true);
        pthread_join(th[i], NULL);
        assert_true(a[i].reads > 0);
        assert_int_equal(a[i].bad, 0);
    }
    assert_int_equal(folders(&e), 0);
    tu_env_free(&e);
}

/* ---- rolls and sweeps -------------------------------------------------- */

static void test_roll_idle(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 4, 1u << 20);
    e.o.roll_idle_ms = 500; /* the "not idle yet" check has 500 ms */
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    /* table 50: a big image then a small one: its only segment is mostly dead */
    struct xt_store_rec r[2] = { tu_rec(XT_STORE_IMAGE, FS, 50, 0, 0, 0, 1, bufs[0], 20000),
                             tu_rec(XT_STORE_IMAGE, FS, 50, 0, 0, 0, 2, bufs[1], 300) };
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tu_commit(e.s, txid++, &r[i], 1), 0);
        tu_model_add(&m, &r[i], 1);
    }
    /* table 51: all live, never rolled */
    struct xt_store_rec live = tu_rec(XT_STORE_IMAGE, FS, 51, 0, 0, 0, 1, bufs[2], 20000);
    assert_int_equal(tu_commit(e.s, txid++, &live, 1), 0);
    tu_model_add(&m, &live, 1);

    assert_int_equal(mdsl_store_roll_idle(e.s), 0); /* not idle yet */
    assert_int_equal(mdsl_store_gc(e.s, 100), 0);   /* an active segment: never GC'd */
    sleep_ms(600);
    assert_int_equal(mdsl_store_roll_idle(e.s), 1);
    assert_int_equal(mdsl_store_roll_idle(e.s), 0); /* the new one is empty */
    assert_true(mem_exists(&e, "/store/t.3.0000000000000032/TSS.2"));
    struct mdsl_stat st0, st;
    mdsl_store_stat(e.s, &st0);
    assert_int_equal(st0.rolled_segments, 1);
    assert_int_equal(mdsl_store_gc(e.s, 100), 1);
    mdsl_store_stat(e.s, &st);
    assert_true(st.bytes < st0.bytes - 19000);
    assert_true(st.gc_freed_bytes > 20000);
    assert_false(mem_exists(&e, "/store/t.3.0000000000000032/TSS.1"));
    tu_check_slice(e.s, FS, &m, 50, 0);
    tu_check_slice(e.s, FS, &m, 51, 0);
    /* the GC record alone (few dead bytes) is not rolled again */
    sleep_ms(600);
    assert_int_equal(mdsl_store_roll_idle(e.s), 0);
    for (int round = 0; round < 2; round++) {
        tu_close(&e);
        if (round)
            assert_int_equal(mdsl_index_destroy(e.index), 0);
        assert_int_equal(tu_open(&e), 0);
        tu_check_slice(e.s, FS, &m, 50, 0);
        tu_check_slice(e.s, FS, &m, 51, 0);
    }
    /* appends go on in the rolled-to segment */
    struct xt_store_rec d = tu_rec(XT_STORE_DELTA, FS, 50, 0, 0, 0, 3, bufs[3], 100);
    assert_int_equal(tu_commit(e.s, txid++, &d, 1), 0);
    tu_model_add(&m, &d, 1);
    tu_check_slice(e.s, FS, &m, 50, 0);
    tu_env_free(&e);
}

/* Half of every segment moved away: above 25 % live, GC alone frees
 * nothing; the sweep at 0.6 frees about half of the bytes. */
static void test_sweep(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 5, 8192);
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    for (uint32_t sl = 0; sl < 32; sl++) {
        struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, FS, 60, sl, 0, 0, 1, bufs[sl % 8], 1000);
        assert_int_equal(tu_commit(e.s, txid++, &r, 1), 0);
        tu_model_add(&m, &r, 1);
    }
    for (uint32_t sl = 0; sl < 32; sl += 2) {
        struct xt_store_rec r = tu_tombstone(FS, 60, sl, 2);
        assert_int_equal(tu_commit(e.s, txid++, &r, 1), 0);
        tu_model_add(&m, &r, 1);
    }
    assert_int_equal(mdsl_store_sweep(e.s, 0), -EINVAL);
    assert_int_equal(mdsl_store_sweep(e.s, 1), -EINVAL);
    struct mdsl_stat st0, st;
    mdsl_store_stat(e.s, &st0);
    assert_int_equal(mdsl_store_gc(e.s, 1000), 0);
    assert_int_equal(mdsl_store_drop_moved(e.s), 0); /* live slices left */
    assert_true(mdsl_store_sweep(e.s, 0.6) >= 3);
    mdsl_store_stat(e.s, &st);
    assert_int_equal(st.sweeps, 1);
    assert_true(st.bytes < st0.bytes * 7 / 10);
    assert_true(st.live_ratio > 0.6);
    for (int round = 0; round < 3; round++) {
        for (uint32_t sl = 0; sl < 32; sl++)
            tu_check_slice(e.s, FS, &m, 60, sl);
        tu_close(&e);
        if (round)
            assert_int_equal(mdsl_index_destroy(e.index), 0);
        assert_int_equal(tu_open(&e), 0);
    }
    tu_env_free(&e);
}

/* The sweep-owed mark: durable across a reopen, kept by a sweep under the
 * owed threshold or one cut short by a write error, cleared by the first
 * sweep at 0.6 that ends; a later change's mark replaces an older one. An
 * index rebuilt from the segments has none (the documented loss). */
static void test_sweep_owed(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 7, 8192);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(mdsl_store_sweep_owed(e.s), 0);
    assert_int_equal(mdsl_store_sweep_owe(e.s, 0), -EINVAL);
    uint64_t txid = 1;
    for (uint32_t sl = 0; sl < 32; sl++) {
        struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, FS, 80, sl, 0, 0, 1, bufs[sl % 8], 1000);
        assert_int_equal(tu_commit(e.s, txid++, &r, 1), 0);
        tu_model_add(&m, &r, 1);
    }
    assert_int_equal(mdsl_store_sweep_owe(e.s, 4), 0);
    assert_int_equal(mdsl_store_sweep_owe(e.s, 4), 0); /* already: no write */
    struct mdsl_stat st;
    mdsl_store_stat(e.s, &st);
    assert_int_equal(st.sweep_owed, 4);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(mdsl_store_sweep_owed(e.s), 4); /* the restart case */

    /* a sweep below the owed threshold is not the owed sweep */
    assert_true(mdsl_store_sweep(e.s, 0.3) >= 0);
    assert_int_equal(mdsl_store_sweep_owed(e.s), 4);
    /* a later change owes its own (it replaces the mark) */
    assert_int_equal(mdsl_store_sweep_owe(e.s, 9), 0);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(mdsl_store_sweep_owed(e.s), 9);

    /* a sweep cut short (every write fails): the mark stays */
    for (uint32_t sl = 0; sl < 32; sl += 2) {
        struct xt_store_rec r = tu_tombstone(FS, 80, sl, 2);
        assert_int_equal(tu_commit(e.s, txid++, &r, 1), 0);
        tu_model_add(&m, &r, 1);
    }
    mdsl_io_fault_countdown(e.fault, 0, -EIO, true);
    (void)mdsl_store_sweep(e.s, MDSL_SWEEP_THRESHOLD);
    mdsl_io_fault_reset(e.fault);
    mdsl_store_stat(e.s, &st);
    assert_int_equal(st.sweeps, 0);
    assert_int_equal(st.sweep_owed, 9);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(mdsl_store_sweep_owed(e.s), 9);

    /* the owed sweep runs to its end: cleared, durably */
    mdsl_store_stat(e.s, &st);
    uint64_t bytes0 = st.bytes;
    assert_true(mdsl_store_sweep(e.s, MDSL_SWEEP_THRESHOLD) >= 1);
    mdsl_store_stat(e.s, &st);
    assert_int_equal(st.sweeps, 1);
    assert_int_equal(st.sweep_owed, 0);
    assert_true(st.bytes < bytes0 * 7 / 10);
    /* a late pass under the swept seq (or an older one) marks nothing */
    assert_int_equal(mdsl_store_sweep_owe(e.s, 9), 0);
    assert_int_equal(mdsl_store_sweep_owe(e.s, 4), 0);
    assert_int_equal(mdsl_store_sweep_owed(e.s), 0);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(mdsl_store_sweep_owed(e.s), 0);
    for (uint32_t sl = 0; sl < 32; sl++)
        tu_check_slice(e.s, FS, &m, 80, sl);

    /* a rebuilt index has no mark */
    assert_int_equal(mdsl_store_sweep_owe(e.s, 12), 0);
    tu_close(&e);
    assert_int_equal(mdsl_index_destroy(e.index), 0);
    assert_int_equal(tu_open(&e), 0);
    assert_int_equal(mdsl_store_sweep_owed(e.s), 0);
    tu_env_free(&e);
}

/* The GC thread does what is asked: a drop pass, a sweep. */
static void test_background(void **state)
{
    (void)state;
    struct tu_env e;
    tu_env_init(&e, 6, 4096);
    e.o.gc_thread = true;
    e.o.gc_interval_ms = 10;
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    fill_table(e.s, NULL, &txid, FS, 70, 4, 4, 700);
    struct mdsl_stat st;
    sleep_ms(50);
    mdsl_store_stat(e.s, &st);
    assert_int_equal(st.dropped_folders, 0); /* never without being asked */
    mdsl_store_space_request(e.s, true, true);
    for (int i = 0; i < 500; i++) {
        mdsl_store_stat(e.s, &st);
        if (st.dropped_folders == 1 && st.sweeps == 1)
            break;
        sleep_ms(10);
    }
    assert_int_equal(st.dropped_folders, 1);
    assert_int_equal(st.sweeps, 1);
    assert_int_equal(folders(&e), 0);
    tu_env_free(&e);
}

/* A full disk (docs/format-mdsl.md "A full disk") on a 16 MiB in-memory
 * device: segments are bounded to 1 MiB though 64 MiB are asked for, and
 * 1 MiB is kept. 20000-byte images of new slices are committed until a
 * prepare answers -ENOSPC (with more than half the reserve still free);
 * then half the slices shrink to 100-byte images flagged XT_STORE_F_RESERVE,
 * which commit on the full disk, into the reserve (one more without the
 * flag is refused). Reopened with the background GC, whose
 * threshold rises under pressure (the emptied segments stay about half
 * live, above the 0.25 default), gives the space back: a 20000-byte image
 * commits again within 10 s. Every slice reads back as last committed,
 * also after a reopen. */
static void test_full_disk(void **state)
{
    (void)state;
    struct tu_env e;
    tu_env_init(&e, 8, UINT64_C(64) << 20);
    mdsl_io_mem_set_capacity(e.mem, UINT64_C(16) << 20);
    e.o.gc_interval_ms = 20;
    assert_int_equal(tu_open(&e), 0); /* no GC thread yet: the reserve alone */
    static struct tu_model m;
    memset(&m, 0, sizeof m);
    uint64_t txid = 1, avail, total;
    uint32_t n = 0;
    int rc = 0;
    for (; n < 2000; n++) {
        struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, FS, 90, n, 0, 0, 1, bufs[0], 20000);
        if ((rc = tu_commit(e.s, txid++, &r, 1)) < 0)
            break;
        tu_model_add(&m, &r, 1);
    }
    assert_int_equal(rc, -ENOSPC);
    assert_int_equal(mdsl_io_space(e.mem, "/store", &avail, &total), 0);
    assert_true(avail > (UINT64_C(1) << 19) && avail < (UINT64_C(3) << 20));
    struct mdsl_stat st;
    mdsl_store_stat(e.s, &st);
    assert_true(st.segments >= 12); /* at most 1 MiB each */
    for (uint32_t i = 0; i < n; i += 2) {
        struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, FS, 90, i, 0, 0, 2, bufs[1], 100);
        r.flags = XT_STORE_F_RESERVE;
        assert_int_equal(tu_commit(e.s, txid++, &r, 1), 0);
        r.flags = 0;
        tu_model_add(&m, &r, 1);
    }
    /* they went into the reserve: the same without the flag is refused */
    struct xt_store_rec small = tu_rec(XT_STORE_IMAGE, FS, 90, 0, 0, 0, 3, bufs[1], 100);
    assert_int_equal(mdsl_store_prepare(e.s, txid, &small, 1), -ENOSPC);
    tu_close(&e);
    e.o.gc_thread = true;
    assert_int_equal(tu_open(&e), 0);
    rc = -ENOSPC;
    for (int k = 0; k < 500 && rc == -ENOSPC; k++) {
        struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, FS, 90, n, 0, 0, 1, bufs[0], 20000);
        if ((rc = tu_commit(e.s, txid++, &r, 1)) == 0)
            tu_model_add(&m, &r, 1);
        else
            sleep_ms(20);
    }
    assert_int_equal(rc, 0);
    mdsl_store_stat(e.s, &st);
    assert_true(st.gc_freed_segments > 0);
    for (int round = 0; round < 2; round++) {
        for (uint32_t i = 0; i <= n; i++)
            tu_check_slice(e.s, FS, &m, 90, i);
        tu_close(&e);
        assert_int_equal(tu_open(&e), 0);
    }
    tu_env_free(&e);
}

int main(void)
{
    xt_log_set_level(XT_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drop),
        cmocka_unit_test(test_drop_faults),
        cmocka_unit_test(test_drop_crash_after_rename),
        cmocka_unit_test(test_drop_vs_readers),
        cmocka_unit_test(test_roll_idle),
        cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_sweep_owed),
        cmocka_unit_test(test_background),
        cmocka_unit_test(test_full_disk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
