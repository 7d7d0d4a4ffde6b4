/*
 * test_mds_usage.c -- mds/mds_usage.c through the table (docs/r2.md
 * "Capacity and quotas"): what a row change counts, that counts leave for
 * R2 only once their group committed, and that quotas refuse creates and
 * growths past them (single ops and atomic batches) but never removals.
 */
#include "mds_test_env.h"
#include "mds_usage.h"
#include "xt_hash.h"
#include "xt_ns.h"
#include "xt_row.h"
#include "xt_rpc_r2.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#define FS 3u
#define T1 900u

#define LINKED 0x1000 /* row_of: a link stub of that type */

static uint8_t *row_of(int type, uint64_t size, const char *name, size_t nlen, size_t *len)
{
    xt_row r;
    xt_row_init(&r);
    r.attr.type = (uint8_t)(type & 0xff);
    r.attr.flags = type & LINKED ? XT_NS_ROW_F_LINKED : 0;
    r.attr.uuid = 77;
    r.attr.size = size;
    r.attr.mode = 0100644;
    r.attr.nlink = 1;
    uint8_t *out = NULL;
    assert_int_equal(xt_row_encode_new(&r, name, (uint32_t)nlen, &out, len), 0);
    return out;
}

static void delta_n(uint64_t table, const char *name, size_t nlen, int otype, uint64_t osize,
                    int ntype, uint64_t nsize, int64_t want_f, int64_t want_b)
{
    size_t ol = 0, nl = 0;
    uint8_t *o = otype ? row_of(otype, osize, name, nlen, &ol) : NULL;
    uint8_t *n = ntype ? row_of(ntype, nsize, name, nlen, &nl) : NULL;
    int64_t f, b;
    mds_usage_delta(table, name, nlen, o, ol, n, nl, &f, &b);
    assert_int_equal(f, want_f);
    assert_int_equal(b, want_b);
    xt_free(o);
    xt_free(n);
}

static void delta(uint64_t table, const char *name, int otype, uint64_t osize, int ntype,
                  uint64_t nsize, int64_t want_f, int64_t want_b)
{
    delta_n(table, name, strlen(name), otype, osize, ntype, nsize, want_f, want_b);
}

static void test_delta_rules(void **state)
{
    (void)state;
    delta(T1, "f", 0, 0, XT_ROW_REG, 100, 1, 100);         /* create */
    delta(T1, "f", XT_ROW_REG, 100, XT_ROW_REG, 4096, 0, 3996); /* growth */
    delta(T1, "f", XT_ROW_REG, 4096, 0, 0, -1, -4096);     /* removal */
    delta(T1, "d", 0, 0, XT_ROW_DIR, 0, 1, 0);             /* directories: inodes only */
    delta(T1, "l", 0, 0, XT_ROW_SYMLINK, 12, 1, 12);
    /* A hard link's name is no inode (its ILT row is): REG -> REF gives it back. */
    delta(T1, "f", XT_ROW_REG, 50, XT_ROW_REF, 0, -1, -50);
    delta(T1, "f", XT_ROW_REG, 50, XT_ROW_REG | LINKED, 50, -1, -50);
    delta(T1, "g", 0, 0, XT_ROW_REG | LINKED, 50, 0, 0);
    delta(XT_NS_TABLE_ILT, "0000000000000077", 0, 0, XT_ROW_REG, 50, 1, 50);
    /* The GDT's copies and the super table count nothing. */
    delta(XT_NS_TABLE_GDT, "0000000000000077", 0, 0, XT_ROW_DIR, 0, 0, 0);
    delta(XT_NS_TABLE_SUPER, "root", 0, 0, XT_ROW_DIR, 0, 0, 0);
    /* Nor do system rows. */
    const char sys[] = { (char)XT_SYS_B0, (char)XT_SYS_B1, 'x' };
    delta_n(T1, sys, sizeof sys, 0, 0, XT_ROW_REG, 10, 0, 0);
}

struct grow {
    uint64_t size;
};

static int grow_fn(void *arg, const void *old, size_t old_len, uint8_t **out, size_t *out_len)
{
    const struct grow *g = arg;
    xt_row r;
    assert_int_equal(xt_row_decode(old, old_len, &r), 0);
    r.attr.size = g->size;
    return xt_row_encode_alloc(&r, out, out_len);
}

static int create(struct tenv *v, const char *name, uint64_t size, uint64_t *gen)
{
    size_t len;
    uint8_t *r = row_of(XT_ROW_REG, size, name, strlen(name), &len);
    int rc = mds_table_create(v->t, FS, T1, name, strlen(name), xt_hash_name(name, strlen(name)),
                              r, len, MDS_TABLE_EXCL, gen);
    xt_free(r);
    return rc;
}

static int resize(struct tenv *v, const char *name, uint64_t size, uint64_t *gen)
{
    struct grow g = { size };
    return mds_table_update(v->t, FS, T1, name, strlen(name), xt_hash_name(name, strlen(name)),
                            grow_fn, &g, gen);
}

/* What the next heartbeat would send for FS (0, 0 when nothing). */
static void sent(mds_usage *u, int64_t *files, int64_t *bytes)
{
    struct xt_fs_counter c[4];
    double load = 0;
    size_t n = mds_usage_stats(u, &load, c, 4);
    *files = *bytes = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].fsid == FS) {
            *files = c[i].files;
            *bytes = c[i].bytes;
        }
}

/* A heartbeat reply: R2's totals and quotas for FS. */
static void reply(mds_usage *u, uint64_t files, uint64_t bytes, uint64_t qf, uint64_t qb)
{
    struct xt_fs_usage fu = { .fsid = FS, .files = files, .bytes = bytes, .quota_files = qf,
                              .quota_bytes = qb };
    struct xt_capacity cap = { .valid = true, .fs = &fu, .nfs = 1 };
    mds_usage_capacity(u, &cap);
}

static void test_committed_counts(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 3600 * 1000 }; /* groups close on sync only */
    uint64_t gen = 0;
    assert_int_equal(mds_usage_new(&v.usage), 0);
    assert_int_equal(tenv_start(&v), 0);
    mds_usage_set_group(v.usage, v.g);
    assert_int_equal(mds_table_mktable(v.t, FS, T1, &gen), 0);
    struct xt_r2_hb_usage hu = { .has_epoch = false };
    mds_usage_hb(v.usage, &hu);
    assert_true(hu.has_epoch && hu.epoch != 0);
    assert_int_equal(create(&v, "a", 100, &gen), 0);
    assert_int_equal(create(&v, "b", 200, &gen), 0);
    assert_int_equal(create(&v, "a", 1, &gen), -EEXIST); /* no count */
    int64_t f, b;
    sent(v.usage, &f, &b);
    assert_int_equal(f, 0); /* not committed yet: invariant 1 */
    assert_int_equal(mds_group_sync(v.g, gen, 10000), 0);
    sent(v.usage, &f, &b);
    assert_int_equal(f, 2);
    assert_int_equal(b, 300);
    assert_int_equal(resize(&v, "a", 1000, &gen), 0);
    assert_int_equal(mds_table_delete(v.t, FS, T1, "b", 1, xt_hash_name("b", 1), NULL, NULL, &gen),
                     0);
    assert_int_equal(mds_group_sync(v.g, gen, 10000), 0);
    sent(v.usage, &f, &b);
    assert_int_equal(f, 1); /* running sums of the incarnation */
    assert_int_equal(b, 1000);
    tenv_fini(&v);
    mds_usage_free(v.usage);
}

static void test_quotas(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 5 };
    assert_int_equal(mds_usage_new(&v.usage), 0);
    assert_int_equal(tenv_start(&v), 0);
    mds_usage_set_group(v.usage, v.g);
    uint64_t gen = 0;
    assert_int_equal(mds_table_mktable(v.t, FS, T1, &gen), 0);
    /* R2 says 10 inodes and 1,000 bytes are used elsewhere; quotas 12, 5,000. */
    reply(v.usage, 10, 1000, 12, 5000);
    assert_int_equal(create(&v, "a", 1000, &gen), 0);
    assert_int_equal(create(&v, "b", 1000, &gen), 0);
    assert_int_equal(create(&v, "c", 0, &gen), -EDQUOT); /* the 13th inode */
    assert_int_equal(resize(&v, "a", 3500, &gen), -EDQUOT); /* 5,500 bytes */
    assert_int_equal(resize(&v, "a", 3000, &gen), 0);       /* exactly 5,000 */
    assert_int_equal(resize(&v, "a", 3001, &gen), -EDQUOT);
    assert_int_equal(resize(&v, "a", 10, &gen), 0); /* shrinks always pass */
    /* An atomic batch that would cross the inode quota changes nothing. */
    reply(v.usage, 10, 1000, 13, 0);
    size_t l1, l2;
    uint8_t *r1 = row_of(XT_ROW_REG, 1, "x", 1, &l1), *r2 = row_of(XT_ROW_REG, 1, "y", 1, &l2);
    struct mds_aop ops[2] = {
        { .type = MDS_AOP_CREATE, .fsid = FS, .table = T1, .name = "x", .name_len = 1,
          .h = xt_hash_name("x", 1), .row = r1, .row_len = l1 },
        { .type = MDS_AOP_CREATE, .fsid = FS, .table = T1, .name = "y", .name_len = 1,
          .h = xt_hash_name("y", 1), .row = r2, .row_len = l2 },
    };
    size_t failed = 99;
    assert_int_equal(mds_table_atomic(v.t, ops, 2, &failed, &gen), -EDQUOT);
    assert_int_equal(failed, 1);
    uint8_t *row = NULL;
    size_t len = 0;
    assert_int_equal(mds_table_lookup(v.t, FS, T1, "x", 1, xt_hash_name("x", 1), &row, &len),
                     -ENOENT);
    assert_int_equal(mds_table_atomic(v.t, ops, 1, &failed, &gen), 0); /* one fits */
    /* Removals pass at the quota; a removal makes room. */
    assert_int_equal(create(&v, "c", 0, &gen), -EDQUOT);
    assert_int_equal(mds_table_delete(v.t, FS, T1, "b", 1, xt_hash_name("b", 1), NULL, NULL, &gen),
                     0);
    assert_int_equal(create(&v, "c", 0, &gen), 0);
    /* Raised (0: none): anything goes. */
    reply(v.usage, 10, 1000, 0, 0);
    assert_int_equal(create(&v, "d", 1 << 20, &gen), 0);
    xt_free(r1);
    xt_free(r2);
    tenv_fini(&v);
    mds_usage_free(v.usage);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delta_rules),
        cmocka_unit_test(test_committed_counts),
        cmocka_unit_test(test_quotas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
