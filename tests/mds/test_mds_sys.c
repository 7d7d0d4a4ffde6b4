/*
 * test_mds_sys.c -- system rows at a real pom-mds (+ pom-mdsl) on loopback
 * (docs/mds-xact.md "System rows", mds_service.c):
 *   - a request naming a system row (00 FF ...: pending, decision, other
 *     tags, a 3-byte one) without XT_F_SYS answers -EINVAL: single ops of
 *     every kind, a plain batch (only that op fails), an atomic batch
 *     (nothing applied, *failed is its index);
 *   - with XT_F_SYS the same requests pass: create, lookup, update, delete,
 *     an atomic batch mixing an ordinary and a system row;
 *   - lists skip system rows (full listing, small pages, a substring search
 *     for 00 FF), an XT_F_SYS listing shows them; the same after an MDS
 *     restart (the rows reload from the MDSL).
 *   - test_bad_hash: a request whose name_hash is not its name's answers
 *     -EINVAL (single ops of every kind, a plain batch: only that op, an
 *     atomic batch: nothing applied) and changes nothing: no row placed
 *     under the wrong hash, the existing row as it was.
 * The rows created here use tag 'T', which no transaction code reads, so
 * the MDS's resolver leaves them alone.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pom_cluster.h"
#include "pom_proc.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_row.h"
#include "xt_rpc_mds.h"

#define FSID  1
#define TABLE 4242
#define NORD  300     /* ordinary rows */

struct cluster {
    struct pom_cluster pc;
    xt_rpc_pool *pool;
};

static void cluster_up(struct cluster *c)
{
    memset(c, 0, sizeof *c);
    assert_int_equal(pom_cluster_up(&c->pc, "mdssys", POM_MDSL_BIN, POM_MDS_BIN), 0);
    struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = c->pc.mds_port,
                                   .call_timeout_ms = 60000, .backoff_min_ms = 10,
                                   .backoff_max_ms = 100 };
    assert_int_equal(xt_rpc_pool_new(&po, &c->pool), 0);
}

static void cluster_down(struct cluster *c)
{
    pom_cluster_destroy(&c->pc);
    xt_rpc_pool_free(c->pool);
}

static void kv_row(xt_row *r, const void *name, size_t len, uint64_t uuid)
{
    xt_row_init(r);
    r->attr.type = XT_ROW_KV;
    r->attr.uuid = uuid;
    r->name = name;
    r->name_len = (uint32_t)len;
}

static struct xt_req req_of(int op, const void *name, size_t len, const xt_row *row,
                            uint32_t flags)
{
    return (struct xt_req){ .op = op, .t = { FSID, TABLE, -1 }, .name = name,
                            .name_len = (uint32_t)len, .name_hash = xt_hash_name(name, len),
                            .row = row, .flags = flags };
}

static int one(struct cluster *c, int op, const void *name, size_t len, uint32_t flags)
{
    xt_row row;
    kv_row(&row, name, len, 7);
    if (op == XT_OP_UPDATE)
        row.attr.size = 99;
    struct xt_req q = req_of(op, name, len, op == XT_OP_CREATE || op == XT_OP_UPDATE ? &row
                                                                                    : NULL,
                             flags);
    if (op == XT_OP_UPDATE)
        q.set_mask = XT_ROW_SET_SIZE;
    struct xt_resp r;
    int rc = xt_mds_call(c->pool, NULL, &q, &r);
    xt_resp_free(&r);
    return rc;
}

/* An atomic batch of q[0], q[1] that op 1 fails with -EINVAL: nothing
 * applied, the failing index reported. */
static void atomic_refused_at_1(struct cluster *c, const struct xt_req q[2])
{
    struct xt_resp r[2];
    size_t failed = 99;
    assert_int_equal(xt_mds_batch_atomic(c->pool, NULL, q, 2, r, &failed), -EINVAL);
    assert_int_equal(failed, 1);
    for (int i = 0; i < 2; i++)
        xt_resp_free(&r[i]);
}

/* Lists TABLE in pages of `page` with flags (substring when sub): counts
 * the ordinary rows (each once) and the system rows. */
static void list_count(struct cluster *c, uint32_t page, uint32_t flags, const void *sub,
                       size_t sublen, unsigned *nord, unsigned *nsys)
{
    uint8_t seen[NORD] = { 0 };
    *nord = *nsys = 0;
    uint64_t cookie = 0;
    for (int guard = 0; guard < 100000; guard++) {
        uint16_t none[1];
        struct xt_list_req lr = { .t = { FSID, TABLE, -1 }, .cookie = cookie, .max = page,
                                  .flags = flags, .cols = none, .ncols = 0,
                                  .substr = sub, .substr_len = (uint32_t)sublen };
        struct xt_list_resp lp;
        assert_int_equal(xt_mds_list(c->pool, NULL, &lr, &lp), 0);
        for (size_t k = 0; k < lp.n; k++) {
            xt_row got;
            assert_int_equal(xt_row_decode_meta(lp.rows[k], lp.lens[k], &got), 0);
            if (xt_hash_is_sys(got.name, got.name_len)) {
                (*nsys)++;
                continue;
            }
            uint64_t i = got.attr.uuid - 1000;
            assert_true(i < NORD);
            assert_int_equal(seen[i], 0);
            seen[i] = 1;
            (*nord)++;
        }
        cookie = lp.next_cookie;
        xt_list_resp_free(&lp);
        if (cookie == XT_COOKIE_END)
            return;
    }
    fail_msg("listing does not end");
}

static void check_lists(struct cluster *c, unsigned want_sys)
{
    unsigned o, s;
    list_count(c, 4096, 0, NULL, 0, &o, &s);
    assert_int_equal(o, NORD);
    assert_int_equal(s, 0);
    list_count(c, 3, 0, NULL, 0, &o, &s);
    assert_int_equal(o, NORD);
    assert_int_equal(s, 0);
    list_count(c, 50, 0, "\0\xff", 2, &o, &s);
    assert_int_equal(o + s, 0);
    list_count(c, 7, XT_F_SYS, NULL, 0, &o, &s);
    assert_int_equal(o, NORD);
    assert_int_equal(s, want_sys);
    list_count(c, 50, XT_F_SYS, "\0\xff", 2, &o, &s);
    assert_int_equal(o, 0);
    assert_int_equal(s, want_sys);
}

static void test_sys_rows(void **state)
{
    (void)state;
    struct cluster c;
    cluster_up(&c);
    /* Ordinary rows, "o<i>" (uuid 1000 + i). */
    char names[NORD][16];
    for (int i = 0; i < NORD; i++) {
        snprintf(names[i], sizeof names[i], "o%d", i);
        xt_row row;
        kv_row(&row, names[i], strlen(names[i]), 1000 + (uint64_t)i);
        struct xt_req q = req_of(XT_OP_CREATE, names[i], strlen(names[i]), &row, XT_F_EXCL);
        struct xt_resp r;
        assert_int_equal(xt_mds_call(c.pool, NULL, &q, &r), 0);
        xt_resp_free(&r);
    }
    /* System names: the pending row of o0, a decision row, tag 'T' rows
     * sharing o1..o4's hashes, a 3-byte one. */
    uint8_t sys[8][XT_SYS_HEAD + 8];
    size_t slen[8];
    slen[0] = xt_hash_pend_name(names[0], strlen(names[0]), sys[0]);
    xt_hash_sys_head(sys[1], XT_SYS_DECISION, xt_hash_name(names[0], strlen(names[0])));
    memset(sys[1] + XT_SYS_HEAD, 1, 8);
    slen[1] = XT_SYS_HEAD + 8;
    for (int k = 2; k < 7; k++) {
        xt_hash_sys_head(sys[k], 'T', xt_hash_name(names[k - 1], strlen(names[k - 1])));
        memset(sys[k] + XT_SYS_HEAD, k, 8);
        slen[k] = XT_SYS_HEAD + (size_t)k;
    }
    memcpy(sys[7], "\0\xffT", 3);
    slen[7] = 3;

    /* Without XT_F_SYS: -EINVAL for every op and name. */
    static const int ops[] = { XT_OP_CREATE, XT_OP_LOOKUP, XT_OP_UPDATE, XT_OP_DELETE };
    for (int k = 0; k < 8; k++)
        for (int o = 0; o < 4; o++) {
            assert_int_equal(one(&c, ops[o], sys[k], slen[k], 0), -EINVAL);
            assert_int_equal(one(&c, ops[o], sys[k], slen[k], XT_F_EXCL | XT_F_SYNC),
                             -EINVAL);
        }
    /* A plain batch: only the system op fails. */
    {
        xt_row row;
        kv_row(&row, sys[2], slen[2], 5);
        struct xt_req q[3] = { req_of(XT_OP_LOOKUP, names[5], strlen(names[5]), NULL, 0),
                               req_of(XT_OP_CREATE, sys[2], slen[2], &row, 0),
                               req_of(XT_OP_LOOKUP, names[6], strlen(names[6]), NULL, 0) };
        struct xt_resp r[3];
        assert_int_equal(xt_mds_batch(c.pool, NULL, q, 3, r), 0);
        assert_int_equal(r[0].status, 0);
        assert_int_equal(r[1].status, -EINVAL);
        assert_int_equal(r[2].status, 0);
        for (int i = 0; i < 3; i++)
            xt_resp_free(&r[i]);
    }
    /* An atomic batch: nothing applied, the failing index reported. */
    {
        xt_row rn, rs;
        kv_row(&rn, "newrow", 6, 2000);
        kv_row(&rs, sys[3], slen[3], 6);
        struct xt_req q[2] = { req_of(XT_OP_CREATE, "newrow", 6, &rn, XT_F_EXCL),
                               req_of(XT_OP_CREATE, sys[3], slen[3], &rs, XT_F_EXCL) };
        atomic_refused_at_1(&c, q);
        assert_int_equal(one(&c, XT_OP_LOOKUP, "newrow", 6, 0), -ENOENT);
    }
    check_lists(&c, 0);

    /* With XT_F_SYS: the 'T' rows and the short one are created, read,
     * updated; one is deleted again. */
    for (int k = 2; k < 8; k++) {
        assert_int_equal(one(&c, XT_OP_CREATE, sys[k], slen[k], XT_F_SYS | XT_F_EXCL), 0);
        assert_int_equal(one(&c, XT_OP_CREATE, sys[k], slen[k], XT_F_SYS | XT_F_EXCL), -EEXIST);
        assert_int_equal(one(&c, XT_OP_LOOKUP, sys[k], slen[k], XT_F_SYS), 0);
        assert_int_equal(one(&c, XT_OP_UPDATE, sys[k], slen[k], XT_F_SYS), 0);
    }
    assert_int_equal(one(&c, XT_OP_DELETE, sys[7], slen[7], XT_F_SYS), 0);
    assert_int_equal(one(&c, XT_OP_LOOKUP, sys[7], slen[7], XT_F_SYS), -ENOENT);
    /* Still refused without the flag, existing or not. */
    assert_int_equal(one(&c, XT_OP_LOOKUP, sys[2], slen[2], 0), -EINVAL);
    assert_int_equal(one(&c, XT_OP_DELETE, sys[2], slen[2], 0), -EINVAL);
    /* An atomic batch with the flag: an ordinary and a system row. */
    {
        uint8_t t[XT_SYS_HEAD + 2];
        xt_hash_sys_head(t, 'T', xt_hash_name("newrow", 6));
        t[XT_SYS_HEAD] = 'x';
        t[XT_SYS_HEAD + 1] = 'y';
        xt_row rn, rs;
        kv_row(&rn, "newrow", 6, 2000);
        kv_row(&rs, t, sizeof t, 8);
        struct xt_req q[2] = { req_of(XT_OP_CREATE, "newrow", 6, &rn, XT_F_EXCL | XT_F_SYS),
                               req_of(XT_OP_CREATE, t, sizeof t, &rs, XT_F_EXCL | XT_F_SYS) };
        struct xt_resp r[2];
        size_t failed = 99;
        assert_int_equal(xt_mds_batch_atomic(c.pool, NULL, q, 2, r, &failed), 0);
        for (int i = 0; i < 2; i++)
            xt_resp_free(&r[i]);
        assert_int_equal(one(&c, XT_OP_LOOKUP, t, sizeof t, XT_F_SYS), 0);
        /* Out again, so the ordinary rows stay o0..o{NORD-1}. */
        struct xt_req d[2] = { req_of(XT_OP_DELETE, "newrow", 6, NULL, XT_F_SYS),
                               req_of(XT_OP_DELETE, t, sizeof t, NULL, XT_F_SYS) };
        assert_int_equal(xt_mds_batch_atomic(c.pool, NULL, d, 2, r, &failed), 0);
        for (int i = 0; i < 2; i++)
            xt_resp_free(&r[i]);
    }
    /* Five 'T' rows live: hidden from lists, shown with XT_F_SYS. */
    check_lists(&c, 5);
    /* The ordinary rows sharing their hashes are untouched. */
    for (int i = 0; i < 6; i++)
        assert_int_equal(one(&c, XT_OP_LOOKUP, names[i], strlen(names[i]), 0), 0);

    /* After a crash and restart (rows reloaded from the MDSL). */
    uint64_t committed;
    assert_int_equal(xt_mds_sync(c.pool, NULL, 0, &committed, NULL), 0);
    assert_int_equal(pom_cluster_restart_mds(&c.pc, POM_MDS_BIN, 200), 0);
    check_lists(&c, 5);
    for (int k = 2; k < 7; k++)
        assert_int_equal(one(&c, XT_OP_LOOKUP, sys[k], slen[k], XT_F_SYS), 0);
    cluster_down(&c);
}

/* One op on `name` carrying hash h instead of its own. */
static int one_hash(struct cluster *c, int op, const char *name, uint64_t h, uint32_t flags)
{
    xt_row row;
    kv_row(&row, name, strlen(name), 9);
    row.attr.size = 77;
    struct xt_req q = req_of(op, name, strlen(name),
                             op == XT_OP_CREATE || op == XT_OP_UPDATE ? &row : NULL, flags);
    q.name_hash = h;
    if (op == XT_OP_UPDATE)
        q.set_mask = XT_ROW_SET_SIZE;
    struct xt_resp r;
    int rc = xt_mds_call(c->pool, NULL, &q, &r);
    xt_resp_free(&r);
    return rc;
}

static void test_bad_hash(void **state)
{
    (void)state;
    struct cluster c;
    cluster_up(&c);
    xt_row keep;
    kv_row(&keep, "keep", 4, 1);
    struct xt_req q = req_of(XT_OP_CREATE, "keep", 4, &keep, XT_F_EXCL);
    struct xt_resp r;
    assert_int_equal(xt_mds_call(c.pool, NULL, &q, &r), 0);
    xt_resp_free(&r);

    /* A near miss (same slice, another bucket), another name's, none. */
    const uint64_t hk = xt_hash_name("keep", 4), hx = xt_hash_name("x", 1);
    const uint64_t bad_k[] = { hk ^ 1, hx, 0 }, bad_x[] = { hx ^ 1, hk, 0 };
    static const int ops[] = { XT_OP_CREATE, XT_OP_LOOKUP, XT_OP_UPDATE, XT_OP_DELETE };
    for (int b = 0; b < 3; b++)
        for (int o = 0; o < 4; o++) {
            assert_int_equal(one_hash(&c, ops[o], "keep", bad_k[b], 0), -EINVAL);
            assert_int_equal(one_hash(&c, ops[o], "x", bad_x[b], XT_F_SYNC), -EINVAL);
        }
    /* A system row's hash is the one its head carries: another is refused
     * even with XT_F_SYS. */
    uint8_t t[XT_SYS_HEAD + 1];
    xt_hash_sys_head(t, 'T', hk);
    t[XT_SYS_HEAD] = 'h';
    {
        xt_row rs;
        kv_row(&rs, t, sizeof t, 3);
        struct xt_req s = req_of(XT_OP_CREATE, t, sizeof t, &rs, XT_F_SYS | XT_F_EXCL);
        s.name_hash = hx;
        assert_int_equal(xt_mds_call(c.pool, NULL, &s, &r), -EINVAL);
        xt_resp_free(&r);
    }
    /* A plain batch: only the op with the wrong hash fails. */
    {
        xt_row rx;
        kv_row(&rx, "x", 1, 2);
        struct xt_req b[2] = { req_of(XT_OP_LOOKUP, "keep", 4, NULL, 0),
                               req_of(XT_OP_CREATE, "x", 1, &rx, XT_F_EXCL) };
        b[1].name_hash = hk;
        struct xt_resp br[2];
        assert_int_equal(xt_mds_batch(c.pool, NULL, b, 2, br), 0);
        assert_int_equal(br[0].status, 0);
        assert_int_equal(br[1].status, -EINVAL);
        for (int i = 0; i < 2; i++)
            xt_resp_free(&br[i]);
    }
    /* An atomic batch: nothing applied, the failing index reported. */
    {
        xt_row ry, rx;
        kv_row(&ry, "y", 1, 4);
        kv_row(&rx, "x", 1, 2);
        struct xt_req b[2] = { req_of(XT_OP_CREATE, "y", 1, &ry, XT_F_EXCL),
                               req_of(XT_OP_CREATE, "x", 1, &rx, XT_F_EXCL) };
        b[1].name_hash = hx ^ 1;
        atomic_refused_at_1(&c, b);
    }
    /* Nothing changed: "keep" as created, no other row anywhere. */
    assert_int_equal(one(&c, XT_OP_LOOKUP, "x", 1, 0), -ENOENT);
    assert_int_equal(one(&c, XT_OP_LOOKUP, "y", 1, 0), -ENOENT);
    q = req_of(XT_OP_LOOKUP, "keep", 4, NULL, 0);
    assert_int_equal(xt_mds_call(c.pool, NULL, &q, &r), 0);
    xt_row got;
    assert_int_equal(xt_row_decode_meta(r.row, r.row_len, &got), 0);
    assert_int_equal(got.attr.uuid, 1);
    assert_int_equal(got.attr.size, 0);
    xt_resp_free(&r);
    struct xt_list_req lr = { .t = { FSID, TABLE, -1 }, .max = 4096, .flags = XT_F_SYS };
    struct xt_list_resp lp;
    assert_int_equal(xt_mds_list(c.pool, NULL, &lr, &lp), 0);
    assert_int_equal(lp.n, 1);
    assert_int_equal(lp.next_cookie, XT_COOKIE_END);
    xt_list_resp_free(&lp);
    cluster_down(&c);
}

int main(void)
{
    xt_log_set_level(getenv("POM_TEST_DEBUG") ? XT_LOG_DEBUG : XT_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sys_rows),
        cmocka_unit_test(test_bad_hash),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
