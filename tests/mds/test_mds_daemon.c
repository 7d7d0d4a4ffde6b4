/*
 * test_mds_daemon.c -- pom-mds and pom-mdsl as real processes on loopback,
 * driven through the xTable RPC service (issue: MDS):
 *   - one directory grows to N entries (2,000,000 by default) through the
 *     API; every entry is found afterwards, `list` returns each exactly once,
 *     also after the MDS restarts and reloads every slice from the MDSL;
 *   - SIGKILL of the MDS at random moments of a create storm: after restart
 *     every create acknowledged by a `sync` before the kill is there, and
 *     every row present decodes whole (nothing torn);
 *   - a small memory bound forces evictions and every row stays reachable;
 *   - mds_store_rpc against a real pom-mdsl: a MOVED tombstone (len 0)
 *     travels through prepare/commit, loads then answer -ESTALE, and
 *     list_slices pages every slice with the tombstone flagged.
 * Sizes scale with POM_TEST_SCALE (0 < s <= 1) and grow with POM_TEST_LONG.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mds_store_rpc.h"
#include "pom_cluster.h"
#include "pom_proc.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_rpc_mds.h"

#define BATCH 256

struct cluster {
    struct pom_cluster pc;     /* the daemons */
    xt_rpc_pool *pool;         /* to the MDS */
};

static double scale(void)
{
    const char *s = getenv("POM_TEST_SCALE");
    double v = s ? atof(s) : 1.0;
    if (getenv("POM_TEST_LONG") && atoi(getenv("POM_TEST_LONG")))
        v *= 4;
    return v > 0 ? v : 1.0;
}

/* extra: NULL-terminated extra arguments for pom-mds. */
static void start_mds(struct cluster *c, const char *const *extra)
{
    const char *args[16];
    int n = 0;
    for (int i = 0; extra && extra[i] && n < 14; i++)
        args[n++] = extra[i];
    if (getenv("POM_TEST_DAEMON_DEBUG"))
        args[n++] = "--verbose";
    args[n] = NULL;
    assert_int_equal(pom_cluster_start_mds(&c->pc, POM_MDS_BIN, 300, args), 0);
    if (!c->pool) {
        struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = c->pc.mds_port,
                                       .call_timeout_ms = 60000, .backoff_min_ms = 10,
                                       .backoff_max_ms = 100 };
        assert_int_equal(xt_rpc_pool_new(&po, &c->pool), 0);
    }
}

static void cluster_up(struct cluster *c, const char *tag, const char *const *extra)
{
    memset(c, 0, sizeof *c);
    assert_int_equal(pom_cluster_init(&c->pc, tag), 0);
    assert_int_equal(pom_cluster_start_mdsl(&c->pc, POM_MDSL_BIN), 0);
    start_mds(c, extra);
}

static void cluster_down(struct cluster *c)
{
    pom_cluster_destroy(&c->pc);
    xt_rpc_pool_free(c->pool);
}

static void name_of(char *buf, size_t cap, uint64_t i)
{
    snprintf(buf, cap, "file-%08llu.dat", (unsigned long long)i);
}

/* A row whose content is a function of i, so a reader can check it. */
static void row_of(xt_row *r, const char *name, uint64_t i, char *data, uint32_t dlen)
{
    xt_row_init(r);
    r->attr.uuid = 1000 + i;
    r->attr.type = XT_ROW_REG;
    r->attr.mode = 0100644;
    r->attr.nlink = 1;
    r->attr.size = dlen;
    r->attr.mtime_ns = i * 7;
    r->name = (const uint8_t *)name;
    r->name_len = (uint32_t)strlen(name);
    for (uint32_t k = 0; k < dlen; k++)
        data[k] = (char)('a' + (i + k) % 26);
    if (dlen)
        xt_row_view_set_group(r, XT_CG_DATA, data, dlen);
}

/* Creates [from, to) in batches; flags as given. Returns the count created
 * before the first error (*err gets it). */
static uint64_t create_range(struct cluster *c, uint64_t table, uint64_t from, uint64_t to,
                             uint32_t dlen, uint32_t flags, int *err)
{
    static char names[BATCH][32];
    static char data[BATCH][128];
    static xt_row rows[BATCH];
    struct xt_req q[BATCH];
    struct xt_resp r[BATCH];
    *err = 0;
    for (uint64_t i = from; i < to;) {
        size_t n = 0;
        for (; n < BATCH && i + n < to; n++) {
            name_of(names[n], sizeof names[n], i + n);
            row_of(&rows[n], names[n], i + n, data[n], dlen);
            q[n] = (struct xt_req){ .op = XT_OP_CREATE,
                                    .t = { 1, table, -1 },
                                    .name = names[n],
                                    .name_len = (uint32_t)strlen(names[n]),
                                    .name_hash = xt_hash_name(names[n], strlen(names[n])),
                                    .flags = flags,
                                    .row = &rows[n] };
        }
        int rc = xt_mds_batch(c->pool, NULL, q, n, r);
        if (rc) {
            *err = rc;
            return i - from;
        }
        for (size_t k = 0; k < n; k++) {
            int st = r[k].status;
            xt_resp_free(&r[k]);
            if (st) {
                *err = st;
                return i + k - from;
            }
        }
        i += n;
    }
    return to - from;
}

/* Checks that row bytes are exactly row_of(i) (and its name). */
static void check_row(const uint8_t *buf, size_t len, uint64_t i, uint32_t dlen)
{
    xt_row got;
    assert_int_equal(xt_row_decode(buf, len, &got), 0);
    char name[32], data[128];
    name_of(name, sizeof name, i);
    assert_int_equal(got.name_len, strlen(name));
    assert_memory_equal(got.name, name, got.name_len);
    assert_int_equal(got.attr.uuid, 1000 + i);
    assert_int_equal(got.attr.mtime_ns, i * 7);
    xt_row want;
    row_of(&want, name, i, data, dlen);
    if (dlen) {
        const xt_row_group *g = xt_row_view_group(&got, XT_CG_DATA);
        assert_non_null(g);
        assert_int_equal(g->len, dlen);
        assert_memory_equal(g->ptr, data, dlen);
    }
}

static void lookup_all(struct cluster *c, uint64_t table, uint64_t n, uint32_t dlen)
{
    static char names[BATCH][32];
    struct xt_req q[BATCH];
    struct xt_resp r[BATCH];
    for (uint64_t i = 0; i < n;) {
        size_t k = 0;
        for (; k < BATCH && i + k < n; k++) {
            name_of(names[k], sizeof names[k], i + k);
            q[k] = (struct xt_req){ .op = XT_OP_LOOKUP,
                                    .t = { 1, table, -1 },
                                    .name = names[k],
                                    .name_len = (uint32_t)strlen(names[k]),
                                    .name_hash = xt_hash_name(names[k], strlen(names[k])) };
        }
        assert_int_equal(xt_mds_batch(c->pool, NULL, q, k, r), 0);
        for (size_t j = 0; j < k; j++) {
            if (r[j].status != 0)
                fail_msg("entry %llu: lookup %d", (unsigned long long)(i + j), r[j].status);
            check_row(r[j].row, r[j].row_len, i + j, dlen);
            xt_resp_free(&r[j]);
        }
        i += k;
    }
}

/* Lists the whole table; every index in [0, n) exactly once, nothing else. */
static void list_all(struct cluster *c, uint64_t table, uint64_t n)
{
    uint8_t *seen = calloc(n, 1);
    uint64_t cookie = 0, total = 0, prev = 0;
    int first = 1;
    for (;;) {
        struct xt_list_req lr = { .t = { 1, table, -1 }, .cookie = cookie, .max = 4096 };
        uint16_t none[1];
        lr.cols = none; /* fixed columns only: a readdir */
        lr.ncols = 0;
        struct xt_list_resp lp;
        assert_int_equal(xt_mds_list(c->pool, NULL, &lr, &lp), 0);
        for (size_t k = 0; k < lp.n; k++) {
            xt_row got;
            assert_int_equal(xt_row_decode(lp.rows[k], lp.lens[k], &got), 0);
            assert_int_equal(got.ngroups, 0);
            uint64_t i = got.attr.uuid - 1000;
            assert_true(i < n);
            if (seen[i])
                fail_msg("entry %llu listed twice", (unsigned long long)i);
            seen[i] = 1;
            assert_true(first || lp.cookies[k] > prev);
            prev = lp.cookies[k];
            first = 0;
            total++;
        }
        cookie = lp.next_cookie;
        xt_list_resp_free(&lp);
        if (cookie == XT_COOKIE_END)
            break;
    }
    assert_int_equal(total, n);
    free(seen);
}

static void test_grow_one_directory(void **state)
{
    (void)state;
    struct cluster c;
    const char *extra[] = { "--split-threshold", "8192", NULL };
    cluster_up(&c, "mdsgrow", extra);
    uint64_t n = (uint64_t)(2000000 * scale());
    if (n < 50000)
        n = 50000;
    uint64_t t0 = xt_mono_ns();
    int err;
    assert_int_equal(create_range(&c, 77, 0, n, 0, XT_F_EXCL, &err), n);
    double secs = (double)(xt_mono_ns() - t0) / 1e9;
    print_message("created %llu entries in one directory in %.1f s (%.0f/s)\n",
                  (unsigned long long)n, secs, (double)n / secs);
    /* Exclusive create of an existing name fails; the table is unchanged. */
    assert_int_equal(create_range(&c, 77, 5, 6, 0, XT_F_EXCL, &err), 0);
    assert_int_equal(err, -EEXIST);
    lookup_all(&c, 77, n, 0);
    list_all(&c, 77, n);
    uint64_t committed;
    uint32_t epoch0 = 0, epoch1 = 0;
    assert_int_equal(xt_mds_sync(c.pool, NULL, 0, &committed, &epoch0), 0);
    assert_true(epoch0 != 0);

    /* A clean restart: every slice is loaded again from the MDSL. */
    assert_int_equal(pom_proc_stop(c.pc.mds, 60000), 0);
    start_mds(&c, extra);
    list_all(&c, 77, n);
    /* A new incarnation: a sync no longer vouches for what the old one
     * acknowledged (clients compare epochs, docs/mds-commit.md). */
    assert_int_equal(xt_mds_sync(c.pool, NULL, 0, &committed, &epoch1), 0);
    assert_true(epoch1 != 0 && epoch1 != epoch0);
    lookup_all(&c, 77, n / 10, 0);
    cluster_down(&c);
}

static void test_sigkill_create_storm(void **state)
{
    (void)state;
    struct cluster c;
    const char *extra[] = { "--split-threshold", "1024", NULL };
    cluster_up(&c, "mdskill", extra);
    unsigned seed = (unsigned)time(NULL);
    if (getenv("POM_TEST_SEED"))
        seed = (unsigned)atoi(getenv("POM_TEST_SEED"));
    print_message("seed %u\n", seed);
    int kills = getenv("POM_TEST_LONG") && atoi(getenv("POM_TEST_LONG")) ? 12 : 4;
    uint64_t synced = 0, next = 0; /* [0, synced) acknowledged by a sync */
    for (int k = 0; k < kills; k++) {
        pid_t victim = c.pc.mds;
        int delay_ms = 100 + (int)(rand_r(&seed) % 900);
        pid_t killer = fork();
        if (killer == 0) {
            usleep((useconds_t)delay_ms * 1000);
            kill(victim, SIGKILL);
            _exit(0);
        }
        for (;;) {
            int err;
            uint64_t made = create_range(&c, 88, next, next + 2048, 64, 0, &err);
            next += made;
            if (err)
                break;
            uint64_t committed;
            if (xt_mds_sync(c.pool, NULL, 0, &committed, NULL) != 0)
                break;
            synced = next;
        }
        waitpid(killer, NULL, 0);
        pom_proc_wait(c.pc.mds, 10000, NULL);
        start_mds(&c, extra);
        /* Everything synced is there with its exact bytes. */
        lookup_all(&c, 88, synced, 64);
        /* Past it, each row is either whole or absent: up to the end of the
         * batch in flight at the kill too, which the MDS may have applied
         * and committed with its reply lost. */
        uint64_t end = next + BATCH;
        for (uint64_t i = synced; i < end; i++) {
            char name[32];
            name_of(name, sizeof name, i);
            struct xt_req q = { .op = XT_OP_LOOKUP,
                                .t = { 1, 88, -1 },
                                .name = name,
                                .name_len = (uint32_t)strlen(name),
                                .name_hash = xt_hash_name(name, strlen(name)) };
            struct xt_resp r;
            int rc = xt_mds_call(c.pool, NULL, &q, &r);
            assert_true(rc == 0 || rc == -ENOENT);
            if (rc == 0)
                check_row(r.row, r.row_len, i, 64);
            xt_resp_free(&r);
        }
        /* Go on from `synced`: rows past it may or may not exist. */
        for (uint64_t i = synced; i < end; i++) {
            char name[32];
            name_of(name, sizeof name, i);
            struct xt_req q = { .op = XT_OP_DELETE,
                                .t = { 1, 88, -1 },
                                .name = name,
                                .name_len = (uint32_t)strlen(name),
                                .name_hash = xt_hash_name(name, strlen(name)) };
            struct xt_resp r;
            int rc = xt_mds_call(c.pool, NULL, &q, &r);
            assert_true(rc == 0 || rc == -ENOENT);
            xt_resp_free(&r);
        }
        next = synced;
    }
    print_message("kills: %d, synced entries: %llu, lost: 0\n", kills,
                  (unsigned long long)synced);
    list_all(&c, 88, synced);
    cluster_down(&c);
}

static void test_eviction_small_memory(void **state)
{
    (void)state;
    struct cluster c;
    const char *extra[] = { "--mem-bound", "2M", "--split-threshold", "512", NULL };
    cluster_up(&c, "mdsevict", extra);
    uint64_t n = (uint64_t)(100000 * scale());
    if (n < 20000)
        n = 20000;
    int err;
    /* Several tables so slices compete for the bound. */
    for (uint64_t t = 0; t < 4; t++)
        assert_int_equal(create_range(&c, 200 + t, 0, n / 4, 100, 0, &err), n / 4);
    for (uint64_t t = 0; t < 4; t++) {
        lookup_all(&c, 200 + t, n / 4, 100);
        list_all(&c, 200 + t, n / 4);
    }
    cluster_down(&c);
}

static int put(const mds_store *st, uint64_t txid, const struct xt_store_rec *r, size_t n)
{
    int rc = mds_store_prepare(st, 1, txid, r, n);
    return rc ? rc : mds_store_commit(st, 1, txid);
}

static void test_store_rpc_tombstone(void **state)
{
    (void)state;
    struct pom_cluster pc;
    assert_int_equal(pom_cluster_init(&pc, "mdsrpc"), 0);
    assert_int_equal(pom_cluster_start_mdsl(&pc, POM_MDSL_BIN), 0);
    mds_store_rpc *rpc;
    assert_int_equal(mds_store_rpc_new(5000, &rpc), 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", pc.mdsl_port);
    assert_int_equal(mds_store_rpc_set_site(rpc, 1, addr), 0);
    mds_store st = mds_store_rpc_handle(rpc);
    /* 40 slices of table 7 (images), one of them then tombstoned the way
     * mds_group writes it: an empty IMAGE with the MOVED flag, same txid
     * as nothing else here. */
    uint64_t txid = 100;
    for (uint32_t s = 0; s < 40; s++) {
        struct xt_store_rec r = { .type = XT_STORE_IMAGE,
                                  .id = { .fsid = 1, .slice = s, .table = 7 }, .version = 1,
                                  .data = "image", .len = 5 };
        assert_int_equal(put(&st, txid++, &r, 1), 0);
    }
    static const uint8_t none[1];
    struct xt_store_rec t = { .type = XT_STORE_IMAGE, .flags = XT_STORE_F_MOVED,
                              .id = { .fsid = 1, .slice = 5, .table = 7 }, .version = 2,
                              .data = none, .len = 0 };
    assert_int_equal(put(&st, txid++, &t, 1), 0);
    struct xt_store_load l;
    assert_int_equal(mds_store_load(&st, 1, (xt_slice_id){ .fsid = 1, .slice = 5, .table = 7 }, &l), -ESTALE);
    assert_int_equal(mds_store_load(&st, 1, (xt_slice_id){ .fsid = 1, .slice = 6, .table = 7 }, &l), 0);
    assert_true(l.has_image && l.image.len == 5 && !memcmp(l.image.data, "image", 5));
    xt_store_load_free(&l);
    /* A delta on the tombstone is refused (the group retries as an image). */
    struct xt_store_rec d = { .type = XT_STORE_DELTA, .id = { .fsid = 1, .slice = 5, .table = 7 },
                              .version = 3, .data = "d", .len = 1 };
    assert_int_equal(mds_store_prepare(&st, 1, txid++, &d, 1), -ESTALE);
    /* Listing, 7 at a time: each slice once, ascending, the tombstone flagged. */
    struct xt_store_list pg;
    uint8_t cur[XT_STORE_CURSOR_MAX];
    uint32_t clen = 0, next = 0;
    for (bool end = false; !end;) {
        assert_int_equal(mds_store_list_slices(&st, 1, cur, clen, 7, &pg), 0);
        assert_true(pg.n <= 7);
        for (size_t i = 0; i < pg.n; i++, next++) {
            assert_int_equal(pg.slices[i].id.fsid, 1);
            assert_int_equal(pg.slices[i].id.table, 7);
            assert_int_equal(pg.slices[i].id.slice, next);
            assert_int_equal(pg.slices[i].version, next == 5 ? 2 : 1);
            assert_int_equal(pg.slices[i].moved, next == 5);
        }
        end = pg.end;
        memcpy(cur, pg.cursor, pg.cursor_len);
        clen = pg.cursor_len;
        xt_store_list_free(&pg);
    }
    assert_int_equal(next, 40);
    mds_store_rpc_free(rpc);
    pom_cluster_destroy(&pc);
}

int main(void)
{
    xt_log_set_level(getenv("POM_TEST_DEBUG") ? XT_LOG_DEBUG : XT_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_rpc_tombstone),
        cmocka_unit_test(test_grow_one_directory),
        cmocka_unit_test(test_sigkill_create_storm),
        cmocka_unit_test(test_eviction_small_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
