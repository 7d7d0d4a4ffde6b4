/*
 * test_mdsl_daemon.c -- pom-mdsl as a real process on loopback, driven
 * through the Storage RPC service:
 *   - two-phase commit: prepared data invisible, commit/abort, restart
 *     keeps prepared transactions for the coordinator;
 *   - SIGKILL at random moments of a commit storm (with a small segment size
 *     so garbage collection runs all the time): after restart every
 *     acknowledged commit is there with its exact bytes, nothing else is;
 *   - malformed frames and malformed records: clear errors, server stays up;
 *   - a MOVED tombstone over the wire: -ESTALE loads, column reads and
 *     delta prepares reach the caller as -ESTALE, also after a SIGKILL;
 *     list_slices pages the stored slices;
 *   - a full disk (an 8 MiB tmpfs): -ENOSPC to the caller, no corruption.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pom_proc.h"
#include "xt_common.h"
#include "xt_rpc.h"
#include "xt_rpc_mdsl.h"

struct daemon {
    char dir[256];
    char log[300];
    int port;
    pid_t pid;
    xt_rpc_pool *pool;
};

static void d_start(struct daemon *d, const char *seg_size)
{
    char portarg[32];
    if (d->port == 0)
        d->port = pom_free_port();
    snprintf(portarg, sizeof portarg, "127.0.0.1:%d", d->port);
    char *argv[] = { (char *)POM_MDSL_BIN, (char *)"--dir", d->dir, (char *)"--listen", portarg,
                     (char *)"--seg-size", (char *)seg_size, (char *)"--gc-threshold",
                     (char *)"0.5", (char *)"--gc-rate", (char *)"0",
                     (char *)"--gc-interval", (char *)"20", NULL };
    snprintf(d->log, sizeof d->log, "%s/../%s.log", d->dir, "mdsl");
    d->pid = pom_proc_spawn(argv, d->log);
    assert_true(d->pid > 0);
    assert_int_equal(pom_proc_wait_port("127.0.0.1", d->port, 20000), 0);
    if (!d->pool) {
        struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = d->port,
                                       .call_timeout_ms = 20000, .backoff_min_ms = 10,
                                       .backoff_max_ms = 100 };
        assert_int_equal(xt_rpc_pool_new(&po, &d->pool), 0);
    }
}

static void d_kill(struct daemon *d, int sig)
{
    if (sig == SIGKILL) {
        pom_proc_kill(d->pid, SIGKILL);
        pom_proc_wait(d->pid, 10000, NULL);
    } else {
        assert_int_equal(pom_proc_stop(d->pid, 10000), 0);
    }
    d->pid = 0;
}

static void setup_dir(struct daemon *d, const char *tag)
{
    memset(d, 0, sizeof *d);
    char base[200];
    assert_int_equal(pom_tmpdir(tag, base, sizeof base), 0);
    snprintf(d->dir, sizeof d->dir, "%s/data", base);
    assert_int_equal(mkdir(d->dir, 0755), 0);
}

static void teardown(struct daemon *d)
{
    if (d->pid > 0)
        d_kill(d, SIGTERM);
    xt_rpc_pool_free(d->pool);
    char base[300];
    snprintf(base, sizeof base, "%s/..", d->dir);
    char *real = realpath(base, NULL);
    umount2(d->dir, MNT_DETACH);
    pom_rm_rf(real);
    free(real);
}

static struct xt_store_rec image(uint64_t table, uint32_t slice, uint64_t version,
                                 const void *p, uint32_t len)
{
    struct xt_store_rec r = { .type = XT_STORE_IMAGE, .id = { .fsid = 1, .slice = slice, .table = table }, .version = version, .data = p, .len = len };
    return r;
}

static void expect_image(struct daemon *d, uint64_t table, uint32_t slice, const void *p,
                         uint32_t len)
{
    struct xt_store_load l;
    assert_int_equal(xt_mdsl_load_slice(d->pool, NULL, (xt_slice_id){ .fsid = 1, .slice = slice, .table = table }, &l), 0);
    assert_true(l.has_image);
    assert_int_equal(l.image.len, len);
    assert_memory_equal(l.image.data, p, len);
    xt_store_load_free(&l);
}

static void test_two_phase(void **state)
{
    (void)state;
    struct daemon d;
    setup_dir(&d, "mdsl2pc");
    d_start(&d, "64M");
    const char a[] = "image-a", b[] = "image-b";
    struct xt_store_rec r[2] = { image(10, 0, 1, a, sizeof a),
                                 { .type = XT_STORE_COLUMN, .id = { .fsid = 1, .slice = 0, .table = 10 },
                                   .version = 1, .key = 77, .group = 1, .data = b,
                                   .len = sizeof b } };
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, 100, r, 2), 0);
    struct xt_store_load l;
    assert_int_equal(xt_mdsl_load_slice(d.pool, NULL, (xt_slice_id){ .fsid = 1, .slice = 0, .table = 10 }, &l), -ENOENT);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, 100), 0);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, 100), 0); /* idempotent retry */
    assert_int_equal(xt_mdsl_abort(d.pool, NULL, 100), -EINVAL);
    expect_image(&d, 10, 0, a, sizeof a);
    void *col = NULL;
    uint32_t clen = 0;
    assert_int_equal(xt_mdsl_read_column(d.pool, NULL, (xt_slice_id){ .fsid = 1, .slice = 0, .table = 10 }, 77, 1, &col, &clen, NULL), 0);
    assert_int_equal(clen, sizeof b);
    assert_memory_equal(col, b, sizeof b);
    xt_free(col);

    /* Aborted: invisible. Prepared and killed: listed after restart. */
    struct xt_store_rec r2 = image(10, 0, 2, b, sizeof b);
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, 101, &r2, 1), 0);
    assert_int_equal(xt_mdsl_abort(d.pool, NULL, 101), 0);
    expect_image(&d, 10, 0, a, sizeof a);
    struct xt_store_rec r3 = image(10, 0, 3, b, sizeof b);
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, 102, &r3, 1), 0);
    d_kill(&d, SIGKILL);
    d_start(&d, "64M");
    struct xt_store_stat st;
    assert_int_equal(xt_mdsl_stat(d.pool, NULL, &st), 0);
    assert_int_equal(st.nprepared, 1);
    assert_int_equal(st.prepared[0], 102);
    xt_free(st.prepared);
    expect_image(&d, 10, 0, a, sizeof a);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, 102), 0);
    expect_image(&d, 10, 0, b, sizeof b);
    /* Table metadata round trip, durable across a restart. */
    assert_int_equal(xt_mdsl_set_md(d.pool, NULL, 1, 10, "bitmap", 6), 0);
    d_kill(&d, SIGKILL);
    d_start(&d, "64M");
    void *md = NULL;
    uint32_t mdlen = 0;
    assert_int_equal(xt_mdsl_get_md(d.pool, NULL, 1, 10, &md, &mdlen), 0);
    assert_int_equal(mdlen, 6);
    assert_memory_equal(md, "bitmap", 6);
    xt_free(md);
    teardown(&d);
}

/* ---- commit storm with SIGKILL ------------------------------------------ */

#define SLICES 16

static void fill(unsigned char *buf, uint32_t len, uint64_t version, uint32_t slice)
{
    for (uint32_t i = 0; i < len; i++)
        buf[i] = (unsigned char)(version * 31 + slice * 7 + i);
}

static void test_sigkill_storm(void **state)
{
    (void)state;
    struct daemon d;
    setup_dir(&d, "mdslkill");
    d_start(&d, "256K"); /* small segments: GC runs all the time */
    unsigned seed = (unsigned)time(NULL);
    const char *env = getenv("POM_TEST_SEED");
    if (env)
        seed = (unsigned)atoi(env);
    print_message("seed %u\n", seed);
    int kills = getenv("POM_TEST_LONG") && atoi(getenv("POM_TEST_LONG")) ? 20 : 6;
    /* acked[s]: the version of slice s whose commit was acknowledged. */
    uint64_t acked[SLICES] = { 0 }, txid = 1000;
    uint32_t lens[SLICES];
    static unsigned char buf[64 << 10];
    for (int k = 0; k < kills; k++) {
        /* Kill after a random number of commits, at a random moment. */
        int ncommits = 20 + (int)(rand_r(&seed) % 80);
        pid_t victim = d.pid;
        int delay_us = (int)(rand_r(&seed) % 200000);
        pid_t killer = fork();
        if (killer == 0) {
            usleep((useconds_t)delay_us);
            kill(victim, SIGKILL);
            _exit(0);
        }
        for (int i = 0; i < ncommits; i++) {
            uint32_t s = (uint32_t)(rand_r(&seed) % SLICES);
            uint64_t v = acked[s] + 1 + (uint64_t)i; /* strictly newer */
            uint32_t len = 1 + (uint32_t)(rand_r(&seed) % (sizeof buf - 1));
            fill(buf, len, v, s);
            struct xt_store_rec rec = image(20, s, v, buf, len);
            if (xt_mdsl_prepare(d.pool, NULL, ++txid, &rec, 1) != 0)
                break;
            if (xt_mdsl_commit(d.pool, NULL, txid) != 0)
                break;
            acked[s] = v;
            lens[s] = len;
        }
        waitpid(killer, NULL, 0);
        pom_proc_kill(d.pid, SIGKILL);
        pom_proc_wait(d.pid, 10000, NULL);
        d_start(&d, "256K");
        /* Undecided transactions: the coordinator (this test) aborts them. */
        struct xt_store_stat st;
        assert_int_equal(xt_mdsl_stat(d.pool, NULL, &st), 0);
        for (size_t i = 0; i < st.nprepared; i++)
            assert_int_equal(xt_mdsl_abort(d.pool, NULL, st.prepared[i]), 0);
        xt_free(st.prepared);
        assert_int_equal(st.failed, 0);
        for (uint32_t s = 0; s < SLICES; s++) {
            struct xt_store_load l;
            int rc = xt_mdsl_load_slice(d.pool, NULL, (xt_slice_id){ .fsid = 1, .slice = s, .table = 20 }, &l);
            if (acked[s] == 0) {
                /* Never acknowledged: absent, or a commit that completed
                 * just as the reply was lost -- adopt it. */
                if (rc == 0) {
                    acked[s] = l.image.version;
                    lens[s] = l.image.len;
                    xt_store_load_free(&l);
                }
                continue;
            }
            assert_int_equal(rc, 0);
            assert_true(l.has_image);
            /* A newer version than acked may exist (reply lost); never older. */
            assert_true(l.image.version >= acked[s]);
            if (l.image.version == acked[s]) {
                assert_int_equal(l.image.len, lens[s]);
                fill(buf, lens[s], acked[s], s);
                assert_memory_equal(l.image.data, buf, lens[s]);
            }
            acked[s] = l.image.version;
            lens[s] = l.image.len;
            xt_store_load_free(&l);
        }
    }
    struct xt_store_stat st;
    assert_int_equal(xt_mdsl_stat(d.pool, NULL, &st), 0);
    print_message("kills: %d, lost: 0, segments %llu, gc freed %llu (since last start)\n",
                  kills, (unsigned long long)st.segments,
                  (unsigned long long)st.gc_freed_segments);
    xt_free(st.prepared);
    teardown(&d);
}

/* A slice image past Thrift's default 16 MB frame (a directory of
 * thousands of inline files) travels both ways: the client's framed
 * transport once kept that default and answered -EPROTO to the load,
 * which made such a directory unreadable after an MDS restart. */
static void test_big_image(void **state)
{
    (void)state;
    struct daemon d;
    setup_dir(&d, "mdslbig");
    d_start(&d, "64M");
    uint32_t len = 24u << 20;
    uint8_t *img = malloc(len);
    assert_non_null(img);
    for (uint32_t i = 0; i < len; i++)
        img[i] = (uint8_t)(i * 2654435761u >> 24);
    struct xt_store_rec r = image(40, 0, 1, img, len);
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, 300, &r, 1), 0);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, 300), 0);
    expect_image(&d, 40, 0, img, len);
    free(img);
    teardown(&d);
}

/* ---- MOVED tombstones and list_slices -------------------------------------- */

static void expect_moved(struct daemon *d)
{
    struct xt_store_load l;
    assert_int_equal(xt_mdsl_load_slice(d->pool, NULL, (xt_slice_id){ .fsid = 1, .slice = 3, .table = 50 }, &l), -ESTALE);
    void *col = NULL;
    uint32_t clen = 0;
    assert_int_equal(xt_mdsl_read_column(d->pool, NULL, (xt_slice_id){ .fsid = 1, .slice = 3, .table = 50 }, 9, 1, &col, &clen, NULL),
                     -ESTALE);
    struct xt_store_rec dl = { .type = XT_STORE_DELTA, .id = { .fsid = 1, .slice = 3, .table = 50 },
                               .version = 4, .data = "d", .len = 1 };
    assert_int_equal(xt_mdsl_prepare(d->pool, NULL, 500, &dl, 1), -ESTALE);
}

/* Walks list_slices `max` at a time; returns the number of slices seen and
 * checks they ascend and that slice 3 of table 50 is the moved one. */
static size_t walk_listing(struct daemon *d, uint32_t max)
{
    uint8_t cur[XT_STORE_CURSOR_MAX];
    uint32_t curlen = 0;
    size_t seen = 0;
    uint64_t prev = 0;
    for (bool end = false; !end;) {
        struct xt_store_list l;
        assert_int_equal(xt_mdsl_list_slices(d->pool, NULL, cur, curlen, max, &l), 0);
        assert_true(l.n <= max);
        for (size_t i = 0; i < l.n; i++) {
            const struct xt_store_slice *x = &l.slices[i];
            uint64_t key = x->id.table << 32 | x->id.slice;
            assert_true(seen == 0 || key > prev);
            prev = key;
            seen++;
            assert_int_equal(x->id.fsid, 1);
            bool moved = x->id.table == 50 && x->id.slice == 3;
            assert_int_equal(x->moved, moved);
            assert_int_equal(x->version, moved ? 3 : 1);
        }
        memcpy(cur, l.cursor, l.cursor_len);
        curlen = l.cursor_len;
        end = l.end;
        xt_store_list_free(&l);
    }
    return seen;
}

static void test_moved(void **state)
{
    (void)state;
    struct daemon d;
    setup_dir(&d, "mdslmoved");
    d_start(&d, "64M");
    uint64_t tx = 1;
    /* 7 slices over two tables; slice 3 of table 50 gets a delta and a column */
    for (uint32_t i = 0; i < 7; i++) {
        struct xt_store_rec r = image(i < 4 ? 50 : 60, i, 1, "img", 3);
        assert_int_equal(xt_mdsl_prepare(d.pool, NULL, ++tx, &r, 1), 0);
        assert_int_equal(xt_mdsl_commit(d.pool, NULL, tx), 0);
    }
    struct xt_store_rec r2[2] = {
        { .type = XT_STORE_DELTA, .id = { .fsid = 1, .slice = 3, .table = 50 }, .version = 2,
          .data = "dd", .len = 2 },
        { .type = XT_STORE_COLUMN, .id = { .fsid = 1, .slice = 3, .table = 50 }, .version = 2, .key = 9,
          .group = 1, .data = "col", .len = 3 },
    };
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, ++tx, r2, 2), 0);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, tx), 0);
    /* tombstone flag combinations the wire must refuse */
    struct xt_store_rec t = { .type = XT_STORE_IMAGE, .flags = XT_STORE_F_MOVED, .id = { .fsid = 1, .slice = 3, .table = 50 }, .version = 3 };
    t.data = "x", t.len = 1;
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, ++tx, &t, 1), -EINVAL);
    t.data = NULL, t.len = 0, t.type = XT_STORE_DELTA;
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, ++tx, &t, 1), -EINVAL);
    t.type = XT_STORE_IMAGE, t.flags = XT_STORE_F_MOVED | XT_STORE_F_SYS;
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, ++tx, &t, 1), -EINVAL);
    t.flags = 0x08;
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, ++tx, &t, 1), -EINVAL);
    /* the move's tombstone, through prepare and commit */
    t.flags = XT_STORE_F_MOVED;
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, ++tx, &t, 1), 0);
    struct xt_store_load l;
    assert_int_equal(xt_mdsl_load_slice(d.pool, NULL, (xt_slice_id){ .fsid = 1, .slice = 3, .table = 50 }, &l), 0); /* not yet */
    xt_store_load_free(&l);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, tx), 0);
    expect_moved(&d);
    expect_image(&d, 50, 2, "img", 3);
    assert_int_equal(walk_listing(&d, 2), 7);
    assert_int_equal(walk_listing(&d, 1000000), 7);
    /* bad listing requests */
    struct xt_store_list ls;
    uint8_t cur[XT_STORE_CURSOR_MAX + 1] = { 0 };
    assert_int_equal(xt_mdsl_list_slices(d.pool, NULL, NULL, 0, 0, &ls), -EINVAL);
    assert_int_equal(xt_mdsl_list_slices(d.pool, NULL, cur, 5, 10, &ls), -EINVAL);
    assert_int_equal(xt_mdsl_list_slices(d.pool, NULL, cur, sizeof cur, 10, &ls), -EINVAL);
    /* the same after a SIGKILL */
    d_kill(&d, SIGKILL);
    d_start(&d, "64M");
    expect_moved(&d);
    assert_int_equal(walk_listing(&d, 3), 7);
    /* the slice moves back with a newer image */
    struct xt_store_rec back = image(50, 3, 5, "back", 4);
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, ++tx, &back, 1), 0);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, tx), 0);
    expect_image(&d, 50, 3, "back", 4);
    teardown(&d);
}

/* ---- bad input ------------------------------------------------------------ */

static void test_bad_input(void **state)
{
    (void)state;
    struct daemon d;
    setup_dir(&d, "mdslbad");
    d_start(&d, "64M");
    /* Malformed records: clear errors. */
    struct xt_store_rec bad = image(1, 0, 1, "x", 1);
    bad.type = 9;
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, 5, &bad, 1), -EINVAL);
    bad.type = XT_STORE_IMAGE;
    bad.flags = XT_STORE_F_TOMBSTONE;
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, 5, &bad, 1), -EINVAL);
    struct xt_store_rec ok = image(1, 0, 1, "x", 1);
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, 0, &ok, 1), -EINVAL);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, 0), -EINVAL);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, 999), -ENOENT);
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, 6, &ok, 1), 0);
    assert_int_equal(xt_mdsl_prepare(d.pool, NULL, 6, &ok, 1), -EEXIST);
    assert_int_equal(xt_mdsl_commit(d.pool, NULL, 6), 0);

    /* Malformed frames: garbage, huge lengths, truncated messages. */
    assert_int_equal(pom_send_garbage(d.port, 3, 300, "prepare"), 0);
    assert_true(pom_proc_alive(d.pid));
    /* Served at once: headers claiming up to 1 GiB once made the server
     * allocate and zero that much per connection, and this load timed out
     * (20 s) in CI (xt_rpc_server.cpp invariant 2). */
    expect_image(&d, 1, 0, "x", 1);
    teardown(&d);
}

static int write_file(const char *path, size_t bytes)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    static char z[65536];
    size_t done = 0;
    while (done < bytes && fwrite(z, 1, sizeof z, f) == sizeof z)
        done += sizeof z;
    return fclose(f) ? -errno : 0;
}

static void test_disk_full(void **state)
{
    (void)state;
    struct daemon d;
    setup_dir(&d, "mdslfull");
    if (mount("tmpfs", d.dir, "tmpfs", 0, "size=8m") != 0) {
        print_message("skipped: cannot mount a tmpfs here (%s)\n", strerror(errno));
        teardown(&d);
        skip();
    }
    d_start(&d, "1M");
    static unsigned char buf[512 << 10];
    uint64_t committed = 0;
    int rc = 0;
    uint64_t tx = 1;
    for (int i = 0; i < 64 && rc == 0; i++) {
        fill(buf, sizeof buf, (uint64_t)i + 1, (uint32_t)i);
        struct xt_store_rec r = image(30, (uint32_t)i, 1, buf, sizeof buf);
        rc = xt_mdsl_prepare(d.pool, NULL, ++tx, &r, 1);
        if (rc == 0) {
            assert_int_equal(xt_mdsl_commit(d.pool, NULL, tx), 0);
            committed++;
        }
    }
    assert_int_equal(rc, -ENOSPC);
    assert_true(committed > 0);
    assert_true(pom_proc_alive(d.pid));
    /* Nothing committed is damaged; the store still serves. */
    for (uint64_t i = 0; i < committed; i++) {
        fill(buf, sizeof buf, i + 1, (uint32_t)i);
        expect_image(&d, 30, (uint32_t)i, buf, sizeof buf);
    }
    /* After a restart too. */
    d_kill(&d, SIGKILL);
    d_start(&d, "1M");
    for (uint64_t i = 0; i < committed; i++) {
        fill(buf, sizeof buf, i + 1, (uint32_t)i);
        expect_image(&d, 30, (uint32_t)i, buf, sizeof buf);
    }
    (void)write_file;
    print_message("committed %llu x 512 KiB before ENOSPC\n", (unsigned long long)committed);
    teardown(&d);
}

int main(void)
{
    xt_log_set_level(XT_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_phase),
        cmocka_unit_test(test_big_image),
        cmocka_unit_test(test_sigkill_storm),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_moved),
        cmocka_unit_test(test_disk_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
