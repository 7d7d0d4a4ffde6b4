/*
 * test_mds_atomic.c -- atomic multi-row batches (mds_table_atomic,
 * mds_table.h invariant 5): argument errors with the failing index,
 * all-or-nothing under a failing precondition at a random position,
 * creates that need splits, a stress of threads running conflicting
 * batches (transfers between accounts and moves of accounts between two
 * tables, keeping the sum and "every account in exactly one table") while
 * groups close every few ms, and crashes at random points of the commit
 * protocol after which the recovered (committed) state still keeps both
 * invariants: no commit group ever holds half a batch. And invariant 9:
 * a row with a pending row is written only by a batch that also deletes
 * the pending row, and read by nobody but the resolver; a derived create
 * sees the pre-image of its op. And copies (MDS_AOP_COPY, XT_F_RMU):
 * newest wins by ctime, in either order, and a copy is undone with its
 * batch.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "mds_test_env.h"
#include "xt_hash.h"
#include "xt_row.h"

static uint64_t g_seed;

#define T1 700u
#define T2 701u

static void acct_name(char *buf, unsigned k)
{
    snprintf(buf, 32, "acct-%u", k);
}

/* Balance change of an UPDATE: fails with -ERANGE below zero. */
struct delta {
    int64_t by;
};

static int add_fn(void *arg, const void *old, size_t old_len, uint8_t **out, size_t *out_len)
{
    const struct delta *d = arg;
    uint64_t id, bal;
    if (!tu_row_ok(old, old_len, &id, &bal))
        return -EBADMSG;
    if (d->by < 0 && bal < (uint64_t)-d->by)
        return -ERANGE;
    size_t len;
    uint8_t *r = tu_row(id, bal + (uint64_t)d->by, (size_t)(bal % 13), &len);
    *out = xt_malloc(len);
    if (!*out) {
        free(r);
        return -ENOMEM;
    }
    memcpy(*out, r, len);
    *out_len = len;
    free(r);
    return 0;
}

/* Check: the row's balance must be `want`. */
static int bal_check(void *arg, const void *row, size_t len)
{
    uint64_t id, bal;
    if (!tu_row_ok(row, len, &id, &bal))
        return -EBADMSG;
    return bal == *(const uint64_t *)arg ? 0 : -ESTALE;
}

static struct mds_aop aop(int type, uint64_t table, const char *name)
{
    struct mds_aop o;
    memset(&o, 0, sizeof o);
    o.type = type;
    o.fsid = 1;
    o.table = table;
    o.name = name;
    o.name_len = strlen(name);
    o.h = xt_hash_name(name, o.name_len);
    return o;
}

static void test_args(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 5, .split = 8 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen;
    assert_int_equal(mds_table_mktable(v.t, 1, T1, &gen), 0);
    struct mds_aop ops[MDS_ATOMIC_MAX + 1];
    char names[MDS_ATOMIC_MAX + 1][32];
    size_t len;
    uint8_t *r = tu_row(1, 5, 3, &len);
    for (unsigned i = 0; i <= MDS_ATOMIC_MAX; i++) {
        acct_name(names[i], i);
        ops[i] = aop(MDS_AOP_CREATE, T1, names[i]);
        ops[i].row = r;
        ops[i].row_len = len;
    }
    size_t failed = 99;
    assert_int_equal(mds_table_atomic(v.t, ops, 0, &failed, &gen), -EINVAL);
    assert_int_equal(mds_table_atomic(v.t, ops, MDS_ATOMIC_MAX + 1, &failed, &gen), -EINVAL);
    /* The same row twice: the second is named. */
    struct mds_aop dup[3] = { ops[0], ops[1], ops[0] };
    assert_int_equal(mds_table_atomic(v.t, dup, 3, &failed, &gen), -EINVAL);
    assert_int_equal(failed, 2);
    struct mds_aop bad[2] = { ops[0], ops[1] };
    bad[1].name_len = 0;
    assert_int_equal(mds_table_atomic(v.t, bad, 2, &failed, &gen), -EINVAL);
    assert_int_equal(failed, 1);
    bad[1] = ops[1];
    bad[1].type = MDS_AOP_UPDATE; /* no fn */
    assert_int_equal(mds_table_atomic(v.t, bad, 2, &failed, &gen), -EINVAL);
    assert_int_equal(failed, 1);
    bad[1] = ops[1];
    bad[1].table = 9999; /* no such table */
    assert_int_equal(mds_table_atomic(v.t, bad, 2, &failed, &gen), -ENOENT);
    assert_int_equal(failed, 1);
    uint64_t id, seq;
    assert_int_equal(tenv_get(&v, T1, names[0], &id, &seq), 0);
    /* MDS_ATOMIC_MAX creates into a table whose slices hold 8: splits, then all in. */
    assert_int_equal(mds_table_atomic(v.t, ops, MDS_ATOMIC_MAX, &failed, &gen), 0);
    for (unsigned i = 0; i < MDS_ATOMIC_MAX; i++)
        assert_int_equal(tenv_get(&v, T1, names[i], &id, &seq), 1);
    free(r);
    tenv_fini(&v);
}

/* A batch whose op `bad` fails changes nothing, whatever the position. */
static void test_all_or_nothing(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 2, .split = 6 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen, s = g_seed;
    assert_int_equal(mds_table_mktable(v.t, 1, T1, &gen), 0);
    enum { K = 40 };
    char names[K][32];
    uint64_t bal[K];
    for (unsigned k = 0; k < K; k++) {
        acct_name(names[k], k);
        bal[k] = k % 2 == 0 ? 100 : 0;
        if (k % 2 == 0) /* odd accounts start absent */
            assert_int_equal(tenv_put(&v, T1, names[k], k, 100, &gen), 0);
    }
    for (int iter = 0; iter < 400; iter++) {
        size_t n = 1 + tu_rand(&s) % MDS_ATOMIC_MAX;
        size_t bad = tu_rand(&s) % (n + 1); /* n: no failing op */
        struct mds_aop ops[MDS_ATOMIC_MAX];
        struct delta d[MDS_ATOMIC_MAX];
        uint64_t want[MDS_ATOMIC_MAX];
        uint8_t *rows[MDS_ATOMIC_MAX] = { 0 };
        bool used[K] = { false };
        unsigned ks[MDS_ATOMIC_MAX];
        for (size_t i = 0; i < n; i++) {
            unsigned k;
            do
                k = (unsigned)(tu_rand(&s) % K);
            while (used[k]);
            used[k] = true;
            ks[i] = k;
            uint64_t id = 0, b = 0;
            int present = tenv_get(&v, T1, names[k], &id, &b);
            assert_true(present >= 0);
            ops[i] = aop(MDS_AOP_CHECK, T1, names[k]);
            if (!present) {
                size_t len;
                rows[i] = tu_row(k, 100, 1, &len);
                ops[i].type = MDS_AOP_CREATE;
                ops[i].flags = MDS_TABLE_EXCL;
                ops[i].row = rows[i];
                ops[i].row_len = len;
                if (i == bad) /* precondition: must exist */
                    ops[i].type = MDS_AOP_DELETE;
                continue;
            }
            switch (tu_rand(&s) % 4) {
            case 0:
                ops[i].type = MDS_AOP_DELETE;
                want[i] = b;
                ops[i].check = bal_check;
                ops[i].arg = &want[i];
                if (i == bad)
                    want[i] = b + 1;
                break;
            case 1:
                if (i == bad) { /* must be absent */
                    size_t len;
                    rows[i] = tu_row(k, 1, 1, &len);
                    ops[i].type = MDS_AOP_CREATE;
                    ops[i].flags = MDS_TABLE_EXCL;
                    ops[i].row = rows[i];
                    ops[i].row_len = len;
                    break;
                }
                /* fallthrough */
            default:
                ops[i].type = MDS_AOP_UPDATE;
                ops[i].fn = add_fn;
                d[i].by = i == bad ? -(int64_t)(b + 1) : 1;
                ops[i].arg = &d[i];
                break;
            }
        }
        size_t failed = 99;
        int rc = mds_table_atomic(v.t, ops, n, &failed, &gen);
        if (bad < n) {
            assert_true(rc < 0);
            assert_int_equal(failed, bad);
        } else {
            assert_int_equal(rc, 0);
        }
        /* Compare every account with the model. */
        for (size_t i = 0; rc == 0 && i < n; i++) {
            unsigned k = ks[i];
            if (ops[i].type == MDS_AOP_DELETE)
                bal[k] = 0;
            else if (ops[i].type == MDS_AOP_CREATE)
                bal[k] = 100;
            else if (ops[i].type == MDS_AOP_UPDATE)
                bal[k] += 1;
        }
        for (unsigned k = 0; k < K; k++) {
            uint64_t id = 0, b = 0;
            int present = tenv_get(&v, T1, names[k], &id, &b);
            assert_true(present >= 0);
            assert_int_equal(present ? b : 0, bal[k]);
            if (present)
                assert_int_equal(id, k);
        }
        for (size_t i = 0; i < n; i++)
            free(rows[i]);
    }
    tenv_fini(&v);
}

/* ---- stress + crash --------------------------------------------------- */

#define ACCTS 48
#define INIT_BAL 1000u
#define THREADS 6

struct worker {
    struct tenv *v;
    atomic_bool *stop;
    uint64_t seed;
    unsigned done, conflicts;
};

/* Where account k is now and its balance: 1 found, 0 not (moving), -1. */
static int find_acct(struct tenv *v, unsigned k, uint64_t *table, uint64_t *bal)
{
    char nm[32];
    acct_name(nm, k);
    uint64_t id;
    for (int i = 0; i < 2; i++) {
        *table = i ? T2 : T1;
        int p = tenv_get(v, *table, nm, &id, bal);
        if (p != 0)
            return p < 0 || id != k ? -1 : 1;
    }
    return 0;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    while (!atomic_load(w->stop)) {
        unsigned a = (unsigned)(tu_rand(&w->seed) % ACCTS);
        unsigned b = (unsigned)(tu_rand(&w->seed) % ACCTS);
        char na[32], nb[32];
        acct_name(na, a);
        acct_name(nb, b);
        uint64_t ta, tb, ba, bb;
        if (find_acct(w->v, a, &ta, &ba) != 1 || find_acct(w->v, b, &tb, &bb) != 1) {
            w->conflicts++;
            continue;
        }
        struct mds_aop ops[4];
        size_t n = 0, failed;
        struct delta da, db;
        uint64_t want_a = ba;
        uint8_t *row = NULL;
        if (a != b && tu_rand(&w->seed) % 3) {
            /* Transfer: a -> b. */
            da.by = -(int64_t)(tu_rand(&w->seed) % 50);
            db.by = -da.by;
            ops[n] = aop(MDS_AOP_UPDATE, ta, na);
            ops[n].fn = add_fn;
            ops[n++].arg = &da;
            ops[n] = aop(MDS_AOP_UPDATE, tb, nb);
            ops[n].fn = add_fn;
            ops[n++].arg = &db;
        } else {
            /* Move a to the other table (a rename across directories). */
            size_t len;
            row = tu_row(a, ba, (size_t)(ba % 13), &len);
            ops[n] = aop(MDS_AOP_DELETE, ta, na);
            ops[n].check = bal_check;
            ops[n++].arg = &want_a;
            ops[n] = aop(MDS_AOP_CREATE, ta == T1 ? T2 : T1, na);
            ops[n].flags = MDS_TABLE_EXCL;
            ops[n].row = row;
            ops[n++].row_len = len;
        }
        uint64_t gen;
        int rc = mds_table_atomic(w->v->t, ops, n, &failed, &gen);
        free(row);
        if (rc == 0)
            w->done++;
        else if (rc == -ESTALE || rc == -ENOENT || rc == -ERANGE || rc == -EEXIST)
            w->conflicts++;
        else
            fail_msg("atomic batch: %d at op %zu", rc, failed);
    }
    return NULL;
}

/* Both invariants on what the MDS shows now. */
static void check_accounts(struct tenv *v)
{
    uint64_t sum = 0;
    for (unsigned k = 0; k < ACCTS; k++) {
        char nm[32];
        acct_name(nm, k);
        uint64_t id1 = 0, id2 = 0, b1 = 0, b2 = 0;
        int p1 = tenv_get(v, T1, nm, &id1, &b1), p2 = tenv_get(v, T2, nm, &id2, &b2);
        assert_true(p1 >= 0 && p2 >= 0);
        if (p1 + p2 != 1)
            fail_msg("account %u is in %d tables", k, p1 + p2);
        sum += p1 ? b1 : b2;
    }
    assert_int_equal(sum, (uint64_t)ACCTS * INIT_BAL);
}

static void test_stress_crash(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 3, .split = 8 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen, s = g_seed ^ 0x5151;
    assert_int_equal(mds_table_mktable(v.t, 1, T1, &gen), 0);
    assert_int_equal(mds_table_mktable(v.t, 1, T2, &gen), 0);
    for (unsigned k = 0; k < ACCTS; k++) {
        char nm[32];
        acct_name(nm, k);
        assert_int_equal(tenv_put(&v, T1, nm, k, INIT_BAL, &gen), 0);
    }
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    struct worker ws[THREADS];
    for (int round = 0; round < 4; round++) {
        atomic_bool stop = false;
        pthread_t th[THREADS];
        for (unsigned t = 0; t < THREADS; t++) {
            ws[t] = (struct worker){ .v = &v, .stop = &stop, .seed = g_seed * 31 + t + round };
            pthread_create(&th[t], NULL, worker_main, &ws[t]);
        }
        tu_sleep_ms(250 + (unsigned)(tu_rand(&s) % 250));
        /* A SIGKILL of the MDS at a random point of its store calls. */
        mds_store_local_sever(v.mem, (long)(tu_rand(&s) % 8));
        tu_sleep_ms(20);
        atomic_store(&stop, true);
        unsigned done = 0, conflicts = 0;
        for (unsigned t = 0; t < THREADS; t++) {
            pthread_join(th[t], NULL);
            done += ws[t].done;
            conflicts += ws[t].conflicts;
        }
        check_accounts(&v); /* memory, before the crash */
        struct mds_group_info gi;
        mds_group_info(v.g, &gi);
        tenv_crash(&v);
        mds_store_local_sever(v.mem, -1);
        assert_int_equal(tenv_start(&v), 0);
        check_accounts(&v); /* the committed state only */
        fprintf(stderr, "round %d: %u batches, %u conflicts, %llu commits, %llu aborts\n",
                round, done, conflicts, (unsigned long long)gi.commits,
                (unsigned long long)gi.aborts);
        assert_true(done > 0);
        assert_true(gi.commits > 0);
    }
    tenv_fini(&v);
}

/* What a derive saw: the pre-image of its op, copied into a fixed row. */
struct seen {
    int calls;
    bool existed;
    uint8_t old[256];
    size_t old_len;
};

static int derive_fn(void *arg, bool existed, const void *old, size_t old_len, uint8_t **out,
                     size_t *out_len)
{
    struct seen *s = arg;
    s->calls++;
    s->existed = existed;
    s->old_len = XT_MIN(old_len, sizeof s->old);
    if (existed)
        memcpy(s->old, old, s->old_len);
    size_t len;
    uint8_t *r = tu_row(999, existed ? 1 : 0, 0, &len);
    *out = xt_malloc(len);
    if (!*out) {
        free(r);
        return -ENOMEM;
    }
    memcpy(*out, r, len);
    *out_len = len;
    free(r);
    return 0;
}

static void test_pending(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 5, .split = 64 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen, id, bal;
    size_t failed, len;
    assert_int_equal(mds_table_mktable(v.t, 1, T1, &gen), 0);
    assert_int_equal(tenv_put(&v, T1, "a", 1, 10, &gen), 0);
    assert_int_equal(tenv_put(&v, T1, "b", 2, 20, &gen), 0);
    uint8_t *pre;
    size_t pre_len;
    assert_int_equal(mds_table_lookup(v.t, 1, T1, "a", 1, xt_hash_name("a", 1), &pre, &pre_len), 0);
    unsigned char pa[XT_SYS_PEND_LEN], pc[XT_SYS_PEND_LEN];
    xt_hash_pend_name("a", 1, pa);
    xt_hash_pend_name("c", 1, pc);

    /* derive must name an earlier op and be a CREATE. */
    struct seen sa = { 0 }, sc = { 0 };
    struct mds_aop bad[2] = { aop(MDS_AOP_CHECK, T1, "a"), aop(MDS_AOP_CREATE, T1, "x") };
    bad[1].derive = derive_fn;
    bad[1].arg = &sa;
    bad[1].of = 1;
    assert_int_equal(mds_table_atomic(v.t, bad, 2, &failed, &gen), -EINVAL);
    assert_int_equal(failed, 1);
    bad[1].of = 0;
    bad[1].type = MDS_AOP_DELETE;
    assert_int_equal(mds_table_atomic(v.t, bad, 2, &failed, &gen), -EINVAL);

    /* A prepare: a += 5 and its pending row from the pre-image. */
    struct delta d5 = { 5 };
    struct mds_aop prep[4] = { aop(MDS_AOP_UPDATE, T1, "a"), aop(MDS_AOP_CREATE, T1, ""),
                               aop(MDS_AOP_CREATE, T1, "c"), aop(MDS_AOP_CREATE, T1, "") };
    prep[0].fn = add_fn;
    prep[0].arg = &d5;
    prep[1].name = pa;
    prep[1].name_len = sizeof pa;
    prep[1].h = xt_hash_name(pa, sizeof pa);
    prep[1].flags = MDS_TABLE_EXCL;
    prep[1].derive = derive_fn;
    prep[1].arg = &sa;
    prep[1].of = 0;
    uint8_t *cr = tu_row(3, 30, 0, &len);
    prep[2].row = cr;
    prep[2].row_len = len;
    prep[3].name = pc;
    prep[3].name_len = sizeof pc;
    prep[3].h = xt_hash_name(pc, sizeof pc);
    prep[3].flags = MDS_TABLE_EXCL;
    prep[3].derive = derive_fn;
    prep[3].arg = &sc;
    prep[3].of = 2;
    assert_int_equal(mds_table_atomic(v.t, prep, 4, &failed, &gen), 0);
    assert_true(sa.calls >= 1 && sa.existed);
    assert_int_equal(sa.old_len, pre_len);
    assert_memory_equal(sa.old, pre, pre_len);
    assert_true(sc.calls >= 1 && !sc.existed);
    /* The undecided state is there, but only the resolver's lookup sees it. */
    uint8_t *row;
    size_t row_len;
    assert_int_equal(mds_table_lookup(v.t, 1, T1, "a", 1, xt_hash_name("a", 1), &row, &row_len),
                     -EAGAIN);
    assert_int_equal(
        mds_table_lookup_ex(v.t, 1, T1, "a", 1, xt_hash_name("a", 1), true, &row, &row_len), 0);
    assert_true(tu_row_ok(row, row_len, &id, &bal));
    assert_int_equal(bal, 15);
    xt_free(row);

    /* Invariant 9: every other write of a or c waits (-EAGAIN)... */
    assert_int_equal(mds_table_update(v.t, 1, T1, "a", 1, xt_hash_name("a", 1), add_fn, &d5, &gen),
                     -EAGAIN);
    assert_int_equal(mds_table_delete(v.t, 1, T1, "c", 1, xt_hash_name("c", 1), NULL, NULL, &gen),
                     -EAGAIN);
    assert_int_equal(mds_table_create(v.t, 1, T1, "a", 1, xt_hash_name("a", 1), cr, len, 0, &gen),
                     -EAGAIN);
    struct mds_aop one = aop(MDS_AOP_UPDATE, T1, "a");
    one.fn = add_fn;
    one.arg = &d5;
    assert_int_equal(mds_table_atomic(v.t, &one, 1, &failed, &gen), -EAGAIN);
    /* ... a second prepare of a waits too (its op, not its EXCL) ... */
    assert_int_equal(mds_table_atomic(v.t, prep, 2, &failed, &gen), -EAGAIN);
    assert_int_equal(failed, 0);
    /* ... so do lookups (invariant 9); other rows do not wait. */
    assert_int_equal(mds_table_lookup(v.t, 1, T1, "c", 1, xt_hash_name("c", 1), &row, &row_len),
                     -EAGAIN);
    assert_int_equal(tenv_get(&v, T1, "b", &id, &bal), 1);
    one.name = "b";
    one.h = xt_hash_name("b", 1);
    assert_int_equal(mds_table_atomic(v.t, &one, 1, &failed, &gen), 0);

    /* The rollback: pre-image back and the pending row gone, one batch. */
    struct mds_aop rb[4] = { aop(MDS_AOP_CREATE, T1, "a"), aop(MDS_AOP_DELETE, T1, ""),
                             aop(MDS_AOP_DELETE, T1, "c"), aop(MDS_AOP_DELETE, T1, "") };
    rb[0].row = pre;
    rb[0].row_len = pre_len;
    rb[1].name = pa;
    rb[1].name_len = sizeof pa;
    rb[1].h = xt_hash_name(pa, sizeof pa);
    rb[3].name = pc;
    rb[3].name_len = sizeof pc;
    rb[3].h = xt_hash_name(pc, sizeof pc);
    assert_int_equal(mds_table_atomic(v.t, rb, 4, &failed, &gen), 0);
    assert_int_equal(tenv_get(&v, T1, "a", &id, &bal), 1);
    assert_int_equal(bal, 10);
    assert_int_equal(tenv_get(&v, T1, "c", &id, &bal), 0);
    assert_int_equal(mds_table_update(v.t, 1, T1, "a", 1, xt_hash_name("a", 1), add_fn, &d5, &gen),
                     0);

    /* Count rows (a parent's subdirectory count in two transactions,
     * XT_SYS_COUNT): one per transaction, side by side, and they block
     * nobody -- deltas commute (docs/mds-xact.md). */
    unsigned char k1[XT_SYS_HEAD + 16], k2[XT_SYS_HEAD + 16];
    xt_hash_sys_head(k1, XT_SYS_COUNT, xt_hash_name("a", 1));
    memcpy(k2, k1, XT_SYS_HEAD);
    memset(k1 + XT_SYS_HEAD, 1, 16);
    memset(k2 + XT_SYS_HEAD, 2, 16);
    struct seen s1 = { 0 }, s2 = { 0 };
    struct mds_aop cnt[2] = { aop(MDS_AOP_UPDATE, T1, "a"), aop(MDS_AOP_CREATE, T1, "") };
    cnt[0].fn = add_fn;
    cnt[0].arg = &d5;
    cnt[1].name = k1;
    cnt[1].name_len = sizeof k1;
    cnt[1].h = xt_hash_name(k1, sizeof k1);
    cnt[1].flags = MDS_TABLE_EXCL;
    cnt[1].derive = derive_fn;
    cnt[1].arg = &s1;
    assert_int_equal(mds_table_atomic(v.t, cnt, 2, &failed, &gen), 0);
    cnt[1].name = k2;
    cnt[1].h = xt_hash_name(k2, sizeof k2);
    cnt[1].arg = &s2;
    assert_int_equal(mds_table_atomic(v.t, cnt, 2, &failed, &gen), 0);
    assert_int_equal(tenv_get(&v, T1, "a", &id, &bal), 1);
    assert_int_equal(bal, 25);
    assert_int_equal(mds_table_update(v.t, 1, T1, "a", 1, xt_hash_name("a", 1), add_fn, &d5, &gen),
                     0);
    free(cr);
    xt_free(pre);
    tenv_fini(&v);
}

/* ---- copies ------------------------------------------------------------ */

/* An xt_row encoding (KV) of `name` with ctime `stamp` and group USER0
 * holding `tag` (xt_free). */
static uint8_t *copy_row(const char *name, uint64_t stamp, const char *tag, size_t *len)
{
    xt_row r;
    xt_row_init(&r);
    r.attr.type = XT_ROW_KV;
    r.attr.ctime_ns = stamp;
    r.name = (const uint8_t *)name;
    r.name_len = (uint32_t)strlen(name);
    assert_int_equal(xt_row_view_set_group(&r, XT_CG_USER0, tag, (uint32_t)strlen(tag)), 0);
    uint8_t *enc;
    assert_int_equal(xt_row_encode_alloc(&r, &enc, len), 0);
    return enc;
}

/* What row `name` of T1 holds: 0 absent, else 1 with its ctime and tag. */
static int copy_get(struct tenv *v, const char *name, uint64_t *stamp, char *tag)
{
    uint8_t *row;
    size_t len;
    int rc = mds_table_lookup(v->t, 1, T1, name, strlen(name), xt_hash_name(name, strlen(name)),
                              &row, &len);
    if (rc == -ENOENT)
        return 0;
    assert_int_equal(rc, 0);
    xt_row r;
    assert_int_equal(xt_row_decode(row, len, &r), 0);
    const xt_row_group *g = xt_row_view_group(&r, XT_CG_USER0);
    assert_non_null(g);
    memcpy(tag, g->ptr, g->len);
    tag[g->len] = '\0';
    *stamp = r.attr.ctime_ns;
    xt_free(row);
    return 1;
}

/* Applies one copy of `name`: tag NULL is a delete. */
static int copy_one(struct tenv *v, const char *name, uint64_t stamp, const char *tag)
{
    size_t len = 0, failed;
    uint64_t gen;
    uint8_t *enc = tag ? copy_row(name, stamp, tag, &len) : NULL;
    struct mds_aop o = aop(MDS_AOP_COPY, T1, name);
    o.row = enc;
    o.row_len = len;
    o.stamp = stamp;
    int rc = mds_table_atomic(v->t, &o, 1, &failed, &gen);
    xt_free(enc);
    return rc;
}

static void test_copy(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 5, .split = 8 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen, st;
    char tag[64];
    assert_int_equal(mds_table_mktable(v.t, 1, T1, &gen), 0);
    /* Absent: a delete does nothing, a create inserts. */
    assert_int_equal(copy_one(&v, "g", 100, NULL), 0);
    assert_int_equal(copy_get(&v, "g", &st, tag), 0);
    assert_int_equal(copy_one(&v, "g", 100, "a"), 0);
    assert_int_equal(copy_get(&v, "g", &st, tag), 1);
    assert_int_equal(st, 100);
    assert_string_equal(tag, "a");
    /* Older or as old: kept; newer: replaced. */
    assert_int_equal(copy_one(&v, "g", 50, "old"), 0);
    assert_int_equal(copy_one(&v, "g", 100, "same"), 0);
    assert_int_equal(copy_get(&v, "g", &st, tag), 1);
    assert_string_equal(tag, "a");
    assert_int_equal(copy_one(&v, "g", 200, "b"), 0);
    assert_int_equal(copy_get(&v, "g", &st, tag), 1);
    assert_int_equal(st, 200);
    assert_string_equal(tag, "b");
    /* A delete older than the row: kept; as old or newer: removed. */
    assert_int_equal(copy_one(&v, "g", 150, NULL), 0);
    assert_int_equal(copy_get(&v, "g", &st, tag), 1);
    assert_int_equal(copy_one(&v, "g", 200, NULL), 0);
    assert_int_equal(copy_get(&v, "g", &st, tag), 0);
    /* Undone with its batch: the second op fails (the row exists). */
    assert_int_equal(tenv_put(&v, T1, "x", 1, 1, &gen), 0);
    size_t len, xl, failed = 99;
    uint8_t *enc = copy_row("g", 400, "c", &len);
    uint8_t *rx = tu_row(2, 2, 1, &xl);
    struct mds_aop ops[2] = { aop(MDS_AOP_COPY, T1, "g"), aop(MDS_AOP_CREATE, T1, "x") };
    ops[0].row = enc;
    ops[0].row_len = len;
    ops[0].stamp = 400;
    ops[1].row = rx;
    ops[1].row_len = xl;
    ops[1].flags = MDS_TABLE_EXCL;
    assert_int_equal(mds_table_atomic(v.t, ops, 2, &failed, &gen), -EEXIST);
    assert_int_equal(failed, 1);
    assert_int_equal(copy_get(&v, "g", &st, tag), 0);
    /* A copy takes no check or derive. */
    ops[0].check = bal_check;
    assert_int_equal(mds_table_atomic(v.t, ops, 1, &failed, &gen), -EINVAL);
    xt_free(enc);
    free(rx);
    tenv_fini(&v);
}

int main(void)
{
    g_seed = tu_seed("test_mds_atomic");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_pending),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_stress_crash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
