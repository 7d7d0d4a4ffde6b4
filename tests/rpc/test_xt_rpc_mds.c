/*
 * test_xt_rpc_mds.c -- the xTable service glue over a real loopback
 * server: every field of a request reaches the handler as sent, every field
 * of a reply reaches the caller, rows survive the Row <-> xt_row conversion
 * byte for byte, and malformed requests are refused at the edge.
 *
 * The handler is a table of at most 64 rows in an array: enough to observe
 * the glue, not an MDS.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"
#include "xt_rpc_mds.h"

struct toy {
    int n;
    char names[64][64];
    uint8_t *rows[64];
    size_t lens[64];
    struct xt_req last;        /* the last request as the handler saw it */
    uint32_t last_ncols;
    int last_cols_null;
};

static int find(struct toy *t, const void *name, uint32_t len)
{
    for (int i = 0; i < t->n; i++)
        if (strlen(t->names[i]) == len && !memcmp(t->names[i], name, len))
            return i;
    return -1;
}

static int toy_op(void *ctx, const xt_rpc_ctx *rc, const struct xt_req *req, struct xt_resp *resp)
{
    (void)rc;
    struct toy *t = ctx;
    t->last = *req;
    t->last_ncols = req->ncols;
    t->last_cols_null = req->cols == NULL;
    int i = find(t, req->name, req->name_len);
    resp->commit_group = 7;
    switch (req->op) {
    case XT_OP_CREATE: {
        if (i >= 0 && (req->flags & XT_F_EXCL))
            return -EEXIST;
        if (!req->row || req->name_len >= 64)
            return -EINVAL;
        if (i < 0) {
            i = t->n++;
            memcpy(t->names[i], req->name, req->name_len);
            t->names[i][req->name_len] = 0;
        } else {
            xt_free(t->rows[i]);
        }
        int r = xt_row_encode_alloc(req->row, &t->rows[i], &t->lens[i]);
        if (r)
            return r;
        if (req->flags & XT_F_BITMAP) {
            resp->bitmap = xt_malloc(3);
            memcpy(resp->bitmap, "bmp", 3);
            resp->bitmap_len = 3;
            resp->ring_version = 42;
        }
        return 0;
    }
    case XT_OP_LOOKUP:
        if (i < 0)
            return -ENOENT;
        resp->row = xt_malloc(t->lens[i]);
        memcpy(resp->row, t->rows[i], t->lens[i]);
        resp->row_len = t->lens[i];
        return 0;
    case XT_OP_UPDATE: {
        if (i < 0)
            return -ENOENT;
        xt_row_patch p;
        memset(&p, 0, sizeof p);
        p.set = req->set_mask;
        if (req->row) {
            p.attr = req->row->attr;
            p.nput = req->row->ngroups;
            memcpy(p.put, req->row->groups, sizeof(xt_row_group) * p.nput);
        }
        p.ndel = req->ndrop;
        memcpy(p.del, req->drop, sizeof(uint16_t) * req->ndrop);
        if (req->flags & XT_F_IF_VER) {
            p.set |= XT_ROW_SET_IF_VERSION;
            p.if_version = req->expect_version;
        }
        uint8_t *out;
        size_t olen;
        int r = xt_row_update(t->rows[i], t->lens[i], &p, &out, &olen);
        if (r)
            return r;
        xt_free(t->rows[i]);
        t->rows[i] = out;
        t->lens[i] = olen;
        return 0;
    }
    case XT_OP_DELETE:
        if (i < 0)
            return -ENOENT;
        xt_free(t->rows[i]);
        t->n--;
        memmove(&t->names[i], &t->names[i + 1], sizeof t->names[0] * (size_t)(t->n - i));
        memmove(&t->rows[i], &t->rows[i + 1], sizeof t->rows[0] * (size_t)(t->n - i));
        memmove(&t->lens[i], &t->lens[i + 1], sizeof t->lens[0] * (size_t)(t->n - i));
        return 0;
    }
    return -EINVAL;
}

static int toy_list(void *ctx, const xt_rpc_ctx *rc, const struct xt_list_req *req,
                    struct xt_list_resp *resp)
{
    (void)rc;
    struct toy *t = ctx;
    uint64_t at = req->cookie;
    for (uint64_t i = at; i < (uint64_t)t->n && resp->n < req->max; i++) {
        if (req->substr && !memmem(t->names[i], strlen(t->names[i]), req->substr,
                                   req->substr_len))
            continue;
        int r = xt_list_resp_add(resp, t->rows[i], t->lens[i], i);
        if (r)
            return r;
        at = i + 1;
    }
    resp->next_cookie = resp->n < req->max ? XT_COOKIE_END : at;
    return 0;
}

static int toy_sync(void *ctx, const xt_rpc_ctx *rc, uint64_t group, uint64_t *committed)
{
    (void)ctx;
    (void)rc;
    *committed = group + 100;
    return 0;
}

static uint32_t toy_epoch(void *ctx)
{
    (void)ctx;
    return 7;
}

static const struct xt_mds_ops toy_ops = { .op = toy_op, .list = toy_list, .sync = toy_sync,
                                           .epoch = toy_epoch };

struct fixture {
    struct toy toy;
    xt_rpc_server *srv;
    xt_rpc_pool *pool;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    struct xt_rpc_server_opts so = { .io_threads = 1 };
    if (xt_rpc_serve_mds(&so, &toy_ops, &f->toy, &f->srv))
        return -1;
    struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = xt_rpc_server_port(f->srv) };
    if (xt_rpc_pool_new(&po, &f->pool))
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    xt_rpc_pool_free(f->pool);
    xt_rpc_server_stop(f->srv);
    for (int i = 0; i < f->toy.n; i++)
        xt_free(f->toy.rows[i]);
    free(f);
    return 0;
}

static xt_row sample_row(const char *name, const char *data)
{
    xt_row r;
    xt_row_init(&r);
    r.attr.uuid = 0x1234567890ULL;
    r.attr.type = XT_ROW_REG;
    r.attr.mode = 0100644;
    r.attr.uid = 1000;
    r.attr.gid = 1001;
    r.attr.nlink = 1;
    r.attr.size = strlen(data);
    r.attr.mtime_ns = r.attr.ctime_ns = r.attr.atime_ns = r.attr.btime_ns = 1700000000123456789ULL;
    r.attr.flags = XT_ROW_F_INLINE;
    r.name = (const uint8_t *)name;
    r.name_len = (uint32_t)strlen(name);
    xt_row_view_set_group(&r, XT_CG_DATA, data, (uint32_t)strlen(data));
    xt_row_view_set_group(&r, XT_CG_USER0 + 3, "u", 1);
    return r;
}

static struct xt_req req_of(int op, const char *name)
{
    struct xt_req q = { .op = op, .t = { 1, 99, -1 }, .name = name,
                        .name_len = (uint32_t)strlen(name),
                        .name_hash = xt_hash_name(name, strlen(name)) };
    return q;
}

static void test_create_lookup_roundtrip(void **state)
{
    struct fixture *f = *state;
    xt_row row = sample_row("hello.txt", "tiny file bytes");
    uint8_t *expect;
    size_t elen;
    assert_int_equal(xt_row_encode_alloc(&row, &expect, &elen), 0);

    struct xt_req q = req_of(XT_OP_CREATE, "hello.txt");
    q.row = &row;
    q.flags = XT_F_EXCL | XT_F_BITMAP;
    struct xt_resp r;
    assert_int_equal(xt_mds_call(f->pool, NULL, &q, &r), 0);
    assert_int_equal(r.commit_group, 7);
    assert_int_equal(r.bitmap_len, 3);
    assert_memory_equal(r.bitmap, "bmp", 3);
    assert_int_equal(r.ring_version, 42);
    xt_resp_free(&r);
    assert_int_equal(f->toy.last.t.fsid, 1);
    assert_int_equal(f->toy.last.t.table, 99);
    assert_int_equal(f->toy.last.t.slice_hint, -1);
    assert_int_equal(xt_mds_call(f->pool, NULL, &q, &r), -EEXIST);
    xt_resp_free(&r);

    /* The row the server stored is byte-identical to the client's encoding. */
    assert_int_equal(f->toy.lens[0], elen);
    assert_memory_equal(f->toy.rows[0], expect, elen);

    struct xt_req l = req_of(XT_OP_LOOKUP, "hello.txt");
    uint16_t cols[] = { XT_CG_DATA };
    l.cols = cols;
    l.ncols = 1;
    assert_int_equal(xt_mds_call(f->pool, NULL, &l, &r), 0);
    assert_int_equal(f->toy.last_ncols, 1);
    assert_int_equal(f->toy.last_cols_null, 0);
    assert_int_equal(r.row_len, elen);
    assert_memory_equal(r.row, expect, elen);
    assert_int_equal(r.ring_version, -1);
    xt_resp_free(&r);
    /* No column list travels as "all": the handler sees cols == NULL. */
    l.cols = NULL;
    l.ncols = 0;
    assert_int_equal(xt_mds_call(f->pool, NULL, &l, &r), 0);
    assert_int_equal(f->toy.last_cols_null, 1);
    xt_resp_free(&r);
    struct xt_req miss = req_of(XT_OP_LOOKUP, "nope");
    assert_int_equal(xt_mds_call(f->pool, NULL, &miss, &r), -ENOENT);
    assert_null(r.row);
    xt_resp_free(&r);
    xt_free(expect);
}

static void test_update_delete(void **state)
{
    struct fixture *f = *state;
    xt_row row = sample_row("f", "abc");
    struct xt_req q = req_of(XT_OP_CREATE, "f");
    q.row = &row;
    struct xt_resp r;
    assert_int_equal(xt_mds_call(f->pool, NULL, &q, &r), 0);
    xt_resp_free(&r);

    /* Set mode and size, replace data, drop the user column, if version 0. */
    xt_row vals;
    xt_row_init(&vals);
    vals.attr.mode = 0100600;
    vals.attr.size = 5;
    xt_row_view_set_group(&vals, XT_CG_DATA, "hello", 5);
    uint16_t drop[] = { XT_CG_USER0 + 3 };
    struct xt_req u = req_of(XT_OP_UPDATE, "f");
    u.row = &vals;
    u.set_mask = XT_ROW_SET_MODE | XT_ROW_SET_SIZE;
    u.drop = drop;
    u.ndrop = 1;
    u.flags = XT_F_IF_VER;
    u.expect_version = 0;
    assert_int_equal(xt_mds_call(f->pool, NULL, &u, &r), 0);
    xt_resp_free(&r);
    /* The same conditional update again: the version moved on. */
    assert_int_equal(xt_mds_call(f->pool, NULL, &u, &r), -ESTALE);
    xt_resp_free(&r);

    struct xt_req l = req_of(XT_OP_LOOKUP, "f");
    assert_int_equal(xt_mds_call(f->pool, NULL, &l, &r), 0);
    xt_row got;
    assert_int_equal(xt_row_decode(r.row, r.row_len, &got), 0);
    assert_int_equal(got.attr.mode, 0100600);
    assert_int_equal(got.attr.size, 5);
    assert_int_equal(got.attr.uid, 1000);
    assert_int_equal(got.attr.version, 1);
    assert_int_equal(got.ngroups, 1);
    assert_int_equal(got.groups[0].id, XT_CG_DATA);
    assert_memory_equal(got.groups[0].ptr, "hello", 5);
    xt_resp_free(&r);

    struct xt_req d = req_of(XT_OP_DELETE, "f");
    assert_int_equal(xt_mds_call(f->pool, NULL, &d, &r), 0);
    xt_resp_free(&r);
    assert_int_equal(xt_mds_call(f->pool, NULL, &d, &r), -ENOENT);
    xt_resp_free(&r);
}

static void test_batch_list_sync(void **state)
{
    struct fixture *f = *state;
    char names[10][8];
    xt_row rows[10];
    struct xt_req q[11];
    for (int i = 0; i < 10; i++) {
        snprintf(names[i], sizeof names[i], "n%02d", i);
        rows[i] = sample_row(names[i], i % 2 ? "odd" : "even");
        q[i] = req_of(XT_OP_CREATE, names[i]);
        q[i].row = &rows[i];
    }
    q[10] = req_of(XT_OP_LOOKUP, "missing");
    struct xt_resp r[11];
    assert_int_equal(xt_mds_batch(f->pool, NULL, q, 11, r), 0);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(r[i].status, 0);
        xt_resp_free(&r[i]);
    }
    assert_int_equal(r[10].status, -ENOENT);
    xt_resp_free(&r[10]);

    /* Pages of 3 with cookies, until the end. */
    struct xt_list_req lr = { .t = { 1, 99, -1 }, .max = 3 };
    int seen = 0;
    for (int page = 0; page < 10; page++) {
        struct xt_list_resp lp;
        assert_int_equal(xt_mds_list(f->pool, NULL, &lr, &lp), 0);
        for (size_t i = 0; i < lp.n; i++) {
            xt_row got;
            assert_int_equal(xt_row_decode(lp.rows[i], lp.lens[i], &got), 0);
            assert_int_equal(got.name_len, 3);
            assert_memory_equal(got.name, names[seen], 3);
            assert_int_equal(lp.cookies[i], (uint64_t)seen);
            seen++;
        }
        lr.cookie = lp.next_cookie;
        xt_list_resp_free(&lp);
        if (lr.cookie == XT_COOKIE_END)
            break;
    }
    assert_int_equal(seen, 10);
    /* A substring travels to the handler. */
    struct xt_list_req sr = { .t = { 1, 99, -1 }, .max = 100, .substr = "n0", .substr_len = 2 };
    struct xt_list_resp sp;
    assert_int_equal(xt_mds_list(f->pool, NULL, &sr, &sp), 0);
    assert_int_equal(sp.n, 10);
    xt_list_resp_free(&sp);
    sr.substr = "7";
    sr.substr_len = 1;
    assert_int_equal(xt_mds_list(f->pool, NULL, &sr, &sp), 0);
    assert_int_equal(sp.n, 1);
    xt_list_resp_free(&sp);
    sr.max = 0;
    assert_int_equal(xt_mds_list(f->pool, NULL, &sr, &sp), -EINVAL);

    uint64_t committed = 0;
    uint32_t epoch = 0;
    assert_int_equal(xt_mds_sync(f->pool, NULL, 5, &committed, &epoch), 0);
    assert_int_equal(committed, 105);
    assert_int_equal(epoch, 7); /* the server's incarnation travels with a sync */
}

static void test_bad_requests(void **state)
{
    struct fixture *f = *state;
    struct xt_resp r;
    struct xt_req q = req_of(XT_OP_LOOKUP, "x");
    q.flags = XT_F_ALL + 1; /* an unknown flag */
    assert_int_equal(xt_mds_call(f->pool, NULL, &q, &r), -EINVAL);
    struct xt_req e = req_of(XT_OP_LOOKUP, "");
    assert_int_equal(xt_mds_call(f->pool, NULL, &e, &r), -EINVAL);
    static char big[1100];
    memset(big, 'a', sizeof big - 1);
    struct xt_req b = req_of(XT_OP_LOOKUP, big);
    assert_int_equal(xt_mds_call(f->pool, NULL, &b, &r), -ENAMETOOLONG);
    /* A column with id 0 cannot be built locally, but a peer may send one:
     * forge it by encoding a valid row and patching the view. */
    xt_row row = sample_row("c", "d");
    row.groups[0].id = 0;
    struct xt_req c = req_of(XT_OP_CREATE, "c");
    c.row = &row;
    assert_int_equal(xt_mds_call(f->pool, NULL, &c, &r), -EINVAL);
    /* A bad op number never leaves the client. */
    struct xt_req o = req_of(9, "x");
    assert_int_equal(xt_mds_batch(f->pool, NULL, &o, 1, &r), -EINVAL);
    /* The server still answers. */
    assert_int_equal(xt_rpc_ping(f->pool, NULL, "p", 1, NULL, 0, NULL), 0);
}

int main(void)
{
    xt_log_set_level(XT_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_create_lookup_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_list_sync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
