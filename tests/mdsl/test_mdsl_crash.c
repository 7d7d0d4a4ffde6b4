/*
 * test_mdsl_crash.c -- power-loss simulation of the MDSL engine: random
 * transactions (commit / abort / left prepared), GC passes, and crashes at
 * random points -- between operations or in the middle of one (a sticky
 * -EIO from the N-th I/O, then the power goes). Unsynced writes are dropped
 * or corrupted at random; sometimes the index is deleted as well. After
 * every restart the store must show exactly the committed model and list
 * exactly the acknowledged prepared transactions. Some images are MOVED
 * tombstones (docs/mdsl-scale.md "Tombstones"): a cut transaction's
 * tombstone is there iff its txid committed, and loads answer -ESTALE
 * exactly while the model's newest image of the slice is one. Seeds are
 * printed.
 */
#include "mdsl_test_util.h"

#define FS 4
#define MARK_GROUP 9 /* a column per transaction tells if it committed, */
#define MARK_SLICE 7 /* in a slice that is never tombstoned */

static uint8_t bufs[8][2048];

struct ptxn {
    uint64_t txid;
    struct xt_store_rec r[8];
    size_t n;
};

struct run {
    uint64_t seed;
    struct tu_env e;
    struct tu_model m;
    struct ptxn pend[64];
    size_t npend;
    uint64_t txid, ver;
    unsigned crashes, midop, rebuilds, gcfreed;
};

static size_t make_tx(struct run *R, struct xt_store_rec *r, uint64_t t)
{
    size_t n = 1 + tu_rnd(&R->seed) % 5;
    for (size_t k = 0; k < n; k++) {
        uint64_t table = 1 + tu_rnd(&R->seed) % 3;
        uint32_t slice = (uint32_t)(tu_rnd(&R->seed) % 4);
        uint32_t len = (uint32_t)(tu_rnd(&R->seed) % 1200);
        int kind = (int)(tu_rnd(&R->seed) % 3);
        uint8_t type = kind == 0 ? XT_STORE_IMAGE : kind == 1 ? XT_STORE_DELTA : XT_STORE_COLUMN;
        r[k] = tu_rec(type, FS, table, slice, tu_rnd(&R->seed) % 4,
                      (uint32_t)(tu_rnd(&R->seed) % 2), R->ver++, bufs[k], len);
        if (type == XT_STORE_COLUMN && tu_rnd(&R->seed) % 8 == 0) {
            r[k].flags = XT_STORE_F_TOMBSTONE;
            r[k].len = 0;
        }
        if (type == XT_STORE_IMAGE && tu_rnd(&R->seed) % 6 == 0) {
            r[k].flags = XT_STORE_F_MOVED;
            r[k].len = 0;
        }
        /* a delta on a committed tombstone is refused (-ESTALE): the
         * writer would send an image, the slice moving back */
        if (type == XT_STORE_DELTA && tu_model_moved(&R->m, table, slice)) {
            r[k].type = XT_STORE_IMAGE;
            tu_fill(bufs[k], r[k].len, table * 31 + slice, r[k].version, XT_STORE_IMAGE);
        }
    }
    r[n] = tu_rec(XT_STORE_COLUMN, FS, 1, MARK_SLICE, t, MARK_GROUP, 1, bufs[n], 8);
    return n + 1;
}

static void check(struct run *R)
{
    mdsl_store *s = R->e.s;
    for (uint64_t t = 1; t <= 3; t++)
        for (uint32_t sl = 0; sl < 4; sl++) {
            tu_check_slice(s, FS, &R->m, t, sl);
            for (uint64_t k = 0; k < 4; k++)
                for (uint32_t g = 0; g < 2; g++)
                    tu_check_column(s, FS, &R->m, t, sl, k, g);
        }
    uint64_t *tx;
    size_t ntx;
    assert_int_equal(mdsl_store_prepared(s, &tx, &ntx), 0);
    if (ntx != R->npend)
        fail_msg("%zu prepared listed, %zu expected", ntx, R->npend);
    for (size_t i = 0; i < R->npend; i++) {
        bool found = false;
        for (size_t j = 0; j < ntx; j++)
            found |= tx[j] == R->pend[i].txid;
        if (!found)
            fail_msg("prepared tx %llu lost", (unsigned long long)R->pend[i].txid);
    }
    xt_free(tx);
}

static void decide_pending(struct run *R, size_t i, bool commit)
{
    struct ptxn *p = &R->pend[i];
    if (commit) {
        assert_int_equal(mdsl_store_commit(R->e.s, p->txid), 0);
        tu_model_add(&R->m, p->r, p->n);
    } else {
        assert_int_equal(mdsl_store_abort(R->e.s, p->txid), 0);
    }
    R->pend[i] = R->pend[--R->npend];
}

static void one_op(struct run *R)
{
    uint64_t c = tu_rnd(&R->seed) % 20;
    if (c < 2 && R->npend) {
        decide_pending(R, tu_rnd(&R->seed) % R->npend, tu_rnd(&R->seed) % 2);
        return;
    }
    if (c < 4) {
        int rc = mdsl_store_gc(R->e.s, 4);
        assert_true(rc >= 0);
        R->gcfreed += (unsigned)rc;
        return;
    }
    struct xt_store_rec r[8];
    uint64_t t = R->txid++;
    size_t n = make_tx(R, r, t);
    assert_int_equal(mdsl_store_prepare(R->e.s, t, r, n), 0);
    uint64_t d = tu_rnd(&R->seed) % 10;
    if (d < 7) {
        assert_int_equal(mdsl_store_commit(R->e.s, t), 0);
        tu_model_add(&R->m, r, n);
    } else if (d < 8 || R->npend == 64) {
        assert_int_equal(mdsl_store_abort(R->e.s, t), 0);
    } else {
        R->pend[R->npend].txid = t;
        memcpy(R->pend[R->npend].r, r, sizeof r);
        R->pend[R->npend++].n = n;
    }
}

/* An operation cut by a sticky -EIO after `n` more I/O steps. Returns the
 * txid whose outcome is unknown (0 for GC). */
static uint64_t inflight_op(struct run *R, struct xt_store_rec *r, size_t *nr)
{
    long n = (long)(tu_rnd(&R->seed) % 40);
    mdsl_io_fault_countdown(R->e.fault, n, -EIO, true);
    uint64_t t = 0;
    if (tu_rnd(&R->seed) % 4 == 0) {
        (void)mdsl_store_gc(R->e.s, 4);
    } else {
        t = R->txid++;
        *nr = make_tx(R, r, t);
        if (mdsl_store_prepare(R->e.s, t, r, *nr) == 0)
            (void)mdsl_store_commit(R->e.s, t);
    }
    return t;
}

static void crash_and_restart(struct run *R, uint64_t t, struct xt_store_rec *r, size_t nr)
{
    mdsl_io_fault_crash(R->e.fault);
    tu_close(&R->e);
    mdsl_io_fault_reset(R->e.fault);
    R->crashes++;
    if (tu_rnd(&R->seed) % 4 == 0) {
        assert_int_equal(mdsl_index_destroy(R->e.index), 0);
        R->rebuilds++;
    }
    assert_int_equal(tu_open(&R->e), 0);
    if (!t)
        return;
    /* the cut transaction: committed, prepared, or nothing */
    uint64_t *tx;
    size_t ntx;
    bool pending = false;
    assert_int_equal(mdsl_store_prepared(R->e.s, &tx, &ntx), 0);
    for (size_t i = 0; i < ntx; i++)
        pending |= tx[i] == t;
    xt_free(tx);
    void *d;
    uint32_t len;
    int rc = mdsl_store_read_column(R->e.s, (xt_slice_id){ .fsid = FS, .slice = MARK_SLICE, .table = 1 }, t, MARK_GROUP, &d, &len, NULL);
    assert_true(rc == 0 || rc == -ENOENT);
    if (rc == 0) {
        xt_free(d);
        assert_false(pending);
        tu_model_add(&R->m, r, nr);
    } else if (pending) {
        R->pend[R->npend].txid = t;
        memcpy(R->pend[R->npend].r, r, nr * sizeof *r);
        R->pend[R->npend++].n = nr;
    }
}

static void crash_run(uint64_t seed0, struct run *R)
{
    memset(R, 0, sizeof *R);
    R->seed = seed0 * 0x9E3779B97F4A7C15ull + 1;
    R->txid = 1;
    R->ver = 1;
    tu_env_init(&R->e, R->seed, 4096 << (seed0 % 3));
    R->e.o.gc_threshold = 0.5;
    mdsl_io_fault_powerloss(R->e.fault, true);
    assert_int_equal(tu_open(&R->e), 0);
    for (int round = 0; round < 4; round++) {
        int nops = 5 + (int)(tu_rnd(&R->seed) % 25);
        for (int i = 0; i < nops; i++)
            one_op(R);
        check(R);
        struct xt_store_rec r[8];
        size_t nr = 0;
        uint64_t t = 0;
        if (tu_rnd(&R->seed) % 2) {
            t = inflight_op(R, r, &nr);
            R->midop++;
        }
        crash_and_restart(R, t, r, nr);
        if (R->npend > 48) /* keep the pending set small */
            while (R->npend)
                decide_pending(R, 0, true);
        check(R);
    }
    while (R->npend)
        decide_pending(R, R->npend - 1, tu_rnd(&R->seed) % 2);
    check(R);
    tu_close(&R->e);
    assert_int_equal(tu_open(&R->e), 0);
    check(R);
    tu_env_free(&R->e);
}

static void test_power_loss(void **state)
{
    (void)state;
    static struct run R;
    unsigned crashes = 0, midop = 0, rebuilds = 0, freed = 0;
    /* MDSL_CRASH_SEEDS: how many seeds (default 60); MDSL_CRASH_SEED_FROM:
     * the first one (default 1), e.g. FROM=106 SEEDS=1 reruns one seed.
     * Without FROM the regression seeds below run too (once each): they
     * lost a table of a failed multi-table prepare (mdsl_recover.c inv. 2). */
    static const uint64_t regress[] = { 106, 136, 288 };
    const char *env = getenv("MDSL_CRASH_SEEDS");
    const char *from = getenv("MDSL_CRASH_SEED_FROM");
    uint64_t nseeds = env ? strtoull(env, NULL, 10) : 60;
    uint64_t first = from ? strtoull(from, NULL, 10) : 1;
    size_t nreg = from ? 0 : sizeof regress / sizeof regress[0];
    for (uint64_t i = 0; i < nseeds + nreg; i++) {
        uint64_t seed = i < nseeds ? first + i : regress[i - nseeds];
        if (i >= nseeds && seed < first + nseeds)
            continue; /* already run in the range */
        print_message("power-loss seed %llu\n", (unsigned long long)seed);
        crash_run(seed, &R);
        crashes += R.crashes;
        midop += R.midop;
        rebuilds += R.rebuilds;
        freed += R.gcfreed;
    }
    print_message("%u crashes (%u inside an operation, %u with index rebuild), %u segments "
                  "freed by GC\n", crashes, midop, rebuilds, freed);
}

/* GC moves live data and frees segments, and the moved data survives. */
static void test_gc(void **state)
{
    (void)state;
    struct tu_env e;
    struct tu_model m = { 0 };
    tu_env_init(&e, 11, 8192);
    assert_int_equal(tu_open(&e), 0);
    uint64_t txid = 1;
    /* slice 0 is rewritten many times; slice 1 is written once (live) */
    struct xt_store_rec keep[2] = {
        tu_rec(XT_STORE_IMAGE, FS, 1, 1, 0, 0, 1, bufs[0], 700),
        tu_rec(XT_STORE_COLUMN, FS, 1, 1, 3, 1, 1, bufs[1], 900),
    };
    assert_int_equal(mdsl_store_prepare(e.s, txid, keep, 2), 0);
    assert_int_equal(mdsl_store_commit(e.s, txid++), 0);
    tu_model_add(&m, keep, 2);
    for (uint64_t v = 1; v <= 200; v++) {
        struct xt_store_rec r[2] = {
            tu_rec(XT_STORE_IMAGE, FS, 1, 0, 0, 0, v, bufs[0], 1000),
            tu_rec(XT_STORE_COLUMN, FS, 1, 0, 3, 1, v, bufs[1], 500),
        };
        assert_int_equal(mdsl_store_prepare(e.s, txid, r, 2), 0);
        assert_int_equal(mdsl_store_commit(e.s, txid++), 0);
        tu_model_add(&m, r, 2);
    }
    struct mdsl_stat a, b;
    mdsl_store_stat(e.s, &a);
    int freed = mdsl_store_gc(e.s, 1000);
    mdsl_store_stat(e.s, &b);
    print_message("gc: %d segments freed; %llu -> %llu bytes, %llu -> %llu segments, live "
                  "ratio %.2f -> %.2f, %llu bytes moved\n", freed,
                  (unsigned long long)a.bytes, (unsigned long long)b.bytes,
                  (unsigned long long)a.segments, (unsigned long long)b.segments, a.live_ratio,
                  b.live_ratio, (unsigned long long)b.gc_moved_bytes);
    assert_true(freed > 10);
    assert_true(b.bytes < a.bytes / 4);
    assert_true(b.gc_moved_bytes > 0);
    tu_check_slice(e.s, FS, &m, 1, 0);
    tu_check_slice(e.s, FS, &m, 1, 1);
    tu_check_column(e.s, FS, &m, 1, 0, 3, 1);
    tu_check_column(e.s, FS, &m, 1, 1, 3, 1);
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    tu_check_slice(e.s, FS, &m, 1, 1);
    tu_check_column(e.s, FS, &m, 1, 1, 3, 1);
    struct mdsl_stat c;
    mdsl_store_stat(e.s, &c);
    assert_int_equal(c.live_bytes, b.live_bytes); /* recomputed = maintained */
    tu_close(&e);
    assert_int_equal(mdsl_index_destroy(e.index), 0);
    assert_int_equal(tu_open(&e), 0);
    tu_check_slice(e.s, FS, &m, 1, 0);
    tu_check_slice(e.s, FS, &m, 1, 1);
    tu_check_column(e.s, FS, &m, 1, 1, 3, 1);
    tu_check_column(e.s, FS, &m, 1, 0, 3, 1);
    /* background GC thread with a throttle */
    tu_close(&e);
    e.o.gc_thread = true;
    e.o.gc_interval_ms = 10;
    e.o.gc_bytes_per_sec = 50u << 20;
    assert_int_equal(tu_open(&e), 0);
    for (uint64_t v = 201; v <= 300; v++) {
        struct xt_store_rec r = tu_rec(XT_STORE_IMAGE, FS, 1, 0, 0, 0, v, bufs[0], 1000);
        assert_int_equal(mdsl_store_prepare(e.s, txid, &r, 1), 0);
        assert_int_equal(mdsl_store_commit(e.s, txid++), 0);
        tu_model_add(&m, &r, 1);
    }
    for (int i = 0; i < 200; i++) {
        mdsl_store_stat(e.s, &c);
        if (c.gc_freed_segments > 5)
            break;
        usleep(10000);
    }
    assert_true(c.gc_freed_segments > 5);
    tu_check_slice(e.s, FS, &m, 1, 0);
    tu_check_slice(e.s, FS, &m, 1, 1);
    tu_env_free(&e);
}

int main(void)
{
    xt_log_set_level(XT_LOG_ERROR + (getenv("MDSL_LOG") ? 3 : 0));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gc),
        cmocka_unit_test(test_power_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
