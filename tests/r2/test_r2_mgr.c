/*
 * test_r2_mgr.c -- the site manager without a network: r2_mgr over the
 * embedded store with a hand-driven clock, and the record codecs.
 *
 *  - codecs: round trips; every single-byte corruption and every truncation
 *    of a record is refused (-EBADMSG), never half-read;
 *  - fs names and addresses: the accepted classes, and their edges;
 *  - states: UP -> TRANSIENT -> FAILED on the clock, rings follow (invariant
 *    2 of r2_mgr.h), a heartbeat or re-registration brings a site back;
 *  - views: deltas carry exactly the sections changed after `since`;
 *  - leadership: -EREMOTE when not leading; a lost compare-and-set on
 *    /r2/view (another R2 wrote) gives -EREMOTE, then a reload, then work;
 *    a new leadership gives every site a fresh grace period;
 *  - allocation failures at every step of register / fs_create / tick: an
 *    error or success, never a crash, a leak, or memory out of step with the
 *    store (checked by reloading).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pom_proc.h"
#include "r2_mgr.h"
#include "r2_rec.h"
#include "r2_store_embedded.h"
#include "xt_common.h"
#include "xt_ring.h"

static uint64_t g_clock = 1000000000ull;
static uint64_t test_clock(void)
{
    return g_clock;
}

#define MS (1000000ull)

struct fixture {
    char dir[256];
    r2_store *store;
    r2_mgr *m;
};

static void fx_open(struct fixture *f)
{
    assert_int_equal(r2_store_embedded_open(f->dir, &f->store), 0);
    struct r2_mgr_opts o = { .store = f->store, .self_addr = "127.0.0.1:9", .hb_interval_ms = 100,
                             .fail_after = 3, .no_thread = true, .clock = test_clock,
                             .vnodes = 16 };
    assert_int_equal(r2_mgr_new(&o, &f->m), 0);
}

static void fx_close(struct fixture *f)
{
    r2_mgr_free(f->m);
    r2_store_close(f->store);
    f->m = NULL;
    f->store = NULL;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof *f);
    if (!f || pom_tmpdir("r2mgr", f->dir, sizeof f->dir) < 0)
        return -1;
    fx_open(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    fx_close(f);
    pom_rm_rf(f->dir);
    free(f);
    return 0;
}

static void lead(struct fixture *f)
{
    assert_int_equal(r2_store_elect(f->store, "127.0.0.1:9", 11, r2_mgr_leader_cb, f->m), 0);
}

static int state_of(r2_mgr *m, uint32_t id)
{
    bool has;
    struct xt_view v;
    assert_int_equal(r2_mgr_get_view(m, 0, &has, &v), 0);
    int st = 0;
    for (size_t i = 0; i < v.nsites; i++)
        if (v.sites[i].id == id)
            st = v.sites[i].state;
    xt_view_free(&v);
    return st;
}

static bool in_ring(r2_mgr *m, uint32_t r, uint32_t id, uint64_t *version)
{
    bool has;
    struct xt_view v;
    assert_int_equal(r2_mgr_get_view(m, 0, &has, &v), 0);
    assert_int_equal(v.nrings, 2);
    xt_ring *ring = NULL;
    assert_int_equal(xt_ring_decode(v.rings[r].data, v.rings[r].len, &ring), 0);
    bool in = xt_ring_has_site(ring, id) == 1;
    if (version)
        *version = xt_ring_version(ring);
    xt_ring_free(ring);
    xt_view_free(&v);
    return in;
}

/* ---- codecs --------------------------------------------------------------- */

static void test_codecs(void **state)
{
    (void)state;
    struct xt_site s = { .id = 7, .type = XT_SITE_CLIENT, .capacity = 12345, .state = XT_SITE_UP,
                         .uuid_lo = 1u << 20, .uuid_hi = 2u << 20 };
    strcpy(s.addr, "client-7");
    strcpy(s.fs_name, "home.fs-1");
    void *buf = NULL;
    size_t len = 0;
    assert_int_equal(r2_rec_site_encode(&s, &buf, &len), 0);
    struct xt_site d;
    assert_int_equal(r2_rec_site_decode(buf, len, &d), 0);
    assert_int_equal(d.id, 7);
    assert_string_equal(d.addr, "client-7");
    assert_string_equal(d.fs_name, "home.fs-1");
    assert_int_equal(d.uuid_hi, 2u << 20);
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            p[i] ^= (unsigned char)(1u << bit);
            assert_int_equal(r2_rec_site_decode(p, len, &d), -EBADMSG);
            p[i] ^= (unsigned char)(1u << bit);
        }
    for (size_t l = 0; l < len; l++)
        assert_int_equal(r2_rec_site_decode(p, l, &d), -EBADMSG);
    xt_free(buf);

    struct xt_fs_info fs = { .fsid = 3, .root_table = 1, .files = 10, .bytes = 20,
                             .created_ns = 99 };
    strcpy(fs.name, "alpha");
    strcpy(fs.blob_backend, "local");
    strcpy(fs.blob_path, "/x/y");
    unsigned char bm[5] = { 1, 2, 3, 4, 5 };
    fs.root_bitmap = bm;
    fs.root_bitmap_len = sizeof bm;
    assert_int_equal(r2_rec_fs_encode(&fs, &buf, &len), 0);
    struct xt_fs_info g;
    assert_int_equal(r2_rec_fs_decode(buf, len, &g), 0);
    assert_string_equal(g.name, "alpha");
    assert_string_equal(g.blob_path, "/x/y");
    assert_int_equal(g.root_bitmap_len, 5);
    assert_memory_equal(g.root_bitmap, bm, 5);
    xt_free(g.root_bitmap);
    p = buf;
    for (size_t i = 0; i < len; i++) {
        p[i] ^= 0x41;
        assert_int_equal(r2_rec_fs_decode(p, len, &g), -EBADMSG);
        assert_null(g.root_bitmap);
        p[i] ^= 0x41;
    }
    for (size_t l = 0; l < len; l++)
        assert_int_equal(r2_rec_fs_decode(p, l, &g), -EBADMSG);
    xt_free(buf);

    struct r2_rec_meta m = { 9, 3, 9, 1 }, m2;
    uint8_t mb[R2_REC_META_SIZE];
    r2_rec_meta_encode(&m, mb);
    assert_int_equal(r2_rec_meta_decode(mb, sizeof mb, &m2), 0);
    assert_memory_equal(&m, &m2, sizeof m);
    for (size_t i = 0; i < sizeof mb; i++) {
        mb[i] ^= 0x10;
        assert_int_equal(r2_rec_meta_decode(mb, sizeof mb, &m2), -EBADMSG);
        mb[i] ^= 0x10;
    }
}

static void test_names(void **state)
{
    (void)state;
    char max[XT_FSNAME_MAX + 2];
    memset(max, 'a', sizeof max);
    max[XT_FSNAME_MAX] = '\0';
    assert_true(r2_rec_fs_name_valid(max));
    max[XT_FSNAME_MAX] = 'a';
    max[XT_FSNAME_MAX + 1] = '\0';
    assert_false(r2_rec_fs_name_valid(max));
    const char *good[] = { "a", "A.b_c-9", "...x", "-" };
    const char *bad[] = { "", ".", "..", "a b", "a/b", "a\n", "\xff", "a:b", NULL };
    for (size_t i = 0; i < XT_ARRAY_SIZE(good); i++)
        assert_true(r2_rec_fs_name_valid(good[i]));
    for (size_t i = 0; i < XT_ARRAY_SIZE(bad); i++)
        assert_false(r2_rec_fs_name_valid(bad[i]));
    assert_true(r2_rec_addr_valid(XT_SITE_MDS, "127.0.0.1:1"));
    assert_true(r2_rec_addr_valid(XT_SITE_MDSL, "host.example:65535"));
    assert_false(r2_rec_addr_valid(XT_SITE_MDSL, "host:65536"));
    assert_false(r2_rec_addr_valid(XT_SITE_MDSL, "host:0"));
    assert_false(r2_rec_addr_valid(XT_SITE_MDSL, ":80"));
    assert_false(r2_rec_addr_valid(XT_SITE_MDSL, "host"));
    assert_true(r2_rec_addr_valid(XT_SITE_CLIENT, "laptop-pid-77"));
    assert_false(r2_rec_addr_valid(XT_SITE_CLIENT, "two words"));
    assert_false(r2_rec_addr_valid(XT_SITE_CLIENT, ""));
    assert_true(r2_rec_backend_valid("rados"));
    assert_false(r2_rec_backend_valid("s3"));
    assert_true(r2_rec_path_valid(""));
    assert_false(r2_rec_path_valid("a\tb"));
}

/* ---- states and rings --------------------------------------------------------- */

static void test_states(void **state)
{
    struct fixture *f = *state;
    uint32_t id = 0;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:10", 0, 0, NULL, &id, NULL),
                     -EREMOTE);
    lead(f);
    uint32_t a, b, c;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:10", 1, 0, NULL, &a, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:11", 1, 0, NULL, &b, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:12", 1, 0, NULL, &c, NULL), 0);
    assert_true(in_ring(f->m, 1, a, NULL) && in_ring(f->m, 1, b, NULL));
    assert_true(in_ring(f->m, 0, c, NULL) && !in_ring(f->m, 1, c, NULL));

    /* b and c keep beating; a goes silent. transient = 100 + 50 ms, failed
     * = 300 + 50 ms. */
    bool has;
    struct xt_view v;
    uint64_t ring1 = 0;
    in_ring(f->m, 1, a, &ring1);
    for (int step = 1; step <= 8; step++) {
        g_clock += 50 * MS;
        assert_int_equal(r2_mgr_heartbeat(f->m, b, 0, 0.5, NULL, 0, &has, &v), 0);
        xt_view_free(&v);
        assert_int_equal(r2_mgr_heartbeat(f->m, c, 0, 0.5, NULL, 0, &has, &v), 0);
        xt_view_free(&v);
        r2_mgr_tick(f->m);
        int st = state_of(f->m, a);
        if (step <= 3)
            assert_int_equal(st, XT_SITE_UP);
        else if (step <= 7)
            assert_int_equal(st, XT_SITE_TRANSIENT);
        else
            assert_int_equal(st, XT_SITE_FAILED);
        assert_int_equal(in_ring(f->m, 1, a, NULL), st != XT_SITE_FAILED);
    }
    uint64_t ring1b = 0;
    in_ring(f->m, 1, b, &ring1b);
    assert_int_equal(ring1b, ring1 + 1);
    assert_int_equal(state_of(f->m, b), XT_SITE_UP);

    /* A heartbeat brings a back, into the ring. */
    assert_int_equal(r2_mgr_heartbeat(f->m, a, 0, 0, NULL, 0, &has, &v), 0);
    assert_true(has);
    xt_view_free(&v);
    assert_int_equal(state_of(f->m, a), XT_SITE_UP);
    assert_true(in_ring(f->m, 1, a, NULL));

    /* Re-registration with prev_id keeps the id; with a wrong type it does not. */
    uint32_t again = 0;
    assert_int_equal(
        r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:20", 1, a, NULL, &again, NULL), 0);
    assert_int_equal(again, a);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:21", 1, a, NULL, &again, NULL),
                     0);
    assert_int_not_equal(again, a);

    /* Drain: out of the ring at once, failure detection stops. */
    assert_int_equal(r2_mgr_site_drain(f->m, b), 0);
    assert_false(in_ring(f->m, 1, b, NULL));
    g_clock += 10000 * MS;
    r2_mgr_tick(f->m);
    assert_int_equal(state_of(f->m, b), XT_SITE_DRAINING);
    assert_int_equal(state_of(f->m, a), XT_SITE_FAILED);
    /* Remove: gone; its heartbeats get -ENOENT. */
    assert_int_equal(r2_mgr_site_remove(f->m, b), 0);
    assert_int_equal(state_of(f->m, b), 0);
    assert_int_equal(r2_mgr_heartbeat(f->m, b, 0, 0, NULL, 0, &has, &v), -ENOENT);
    assert_int_equal(r2_mgr_site_remove(f->m, b), -ENOENT);
}

/* ---- views ---------------------------------------------------------------------- */

static void test_deltas(void **state)
{
    struct fixture *f = *state;
    lead(f);
    bool has;
    struct xt_view v;
    assert_int_equal(r2_mgr_get_view(f->m, 0, &has, &v), 0);
    assert_true(has); /* since 0: always a full view, even of nothing */
    assert_int_equal(v.version, 0);
    xt_view_free(&v);
    uint32_t c0;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_CLIENT, "c0", 0, 0, NULL, &c0, NULL), 0);
    assert_int_equal(r2_mgr_get_view(f->m, 0, &has, &v), 0);
    assert_int_equal(v.sections, XT_VIEW_SITES | XT_VIEW_RINGS | XT_VIEW_FS);
    uint64_t v0 = v.version;
    xt_view_free(&v);
    assert_int_equal(r2_mgr_fs_create(f->m, "one", NULL, NULL, NULL), 0);
    assert_int_equal(r2_mgr_get_view(f->m, v0, &has, &v), 0);
    assert_int_equal(v.sections, XT_VIEW_FS);
    uint64_t v1 = v.version;
    assert_int_equal(v1, v0 + 1);
    xt_view_free(&v);
    uint32_t id, c1;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_CLIENT, "c1", 0, 0, NULL, &c1, NULL), 0);
    assert_int_equal(r2_mgr_get_view(f->m, v1, &has, &v), 0);
    assert_int_equal(v.sections, XT_VIEW_SITES);
    xt_view_free(&v);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:5", 0, 0, NULL, &id, NULL),
                     0);
    assert_int_equal(r2_mgr_get_view(f->m, v1, &has, &v), 0);
    assert_int_equal(v.sections, XT_VIEW_SITES | XT_VIEW_RINGS);
    uint64_t cur = v.version;
    xt_view_free(&v);
    assert_int_equal(r2_mgr_get_view(f->m, cur, &has, &v), 0);
    assert_false(has);
    /* A version from another history (above ours): everything. */
    assert_int_equal(r2_mgr_get_view(f->m, cur + 100, &has, &v), 0);
    assert_true(has);
    assert_int_equal(v.sections, XT_VIEW_SITES | XT_VIEW_RINGS | XT_VIEW_FS);
    xt_view_free(&v);
    /* Heartbeats with nothing new change nothing. */
    struct xt_fs_counter ctr = { .fsid = 1, .files = 5, .bytes = 50 };
    assert_int_equal(r2_mgr_heartbeat(f->m, id, cur, 1.0, &ctr, 1, &has, &v), 0);
    assert_false(has);
    struct xt_fs_info *fs;
    size_t n;
    assert_int_equal(r2_mgr_fs_list(f->m, "one", &fs, &n), 0);
    assert_int_equal(fs[0].files, 5);
    assert_int_equal(fs[0].bytes, 50);
    xt_fs_info_free_array(fs, n);
    /* Counters are flushed to the store within flush_ns (>= 5 s). */
    g_clock += 6000 * MS;
    uint32_t all[3] = { c0, c1, id };
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r2_mgr_heartbeat(f->m, all[i], cur, 1.0, &ctr, i == 2, &has, &v), 0);
        assert_false(has);
    }
    r2_mgr_tick(f->m);
    fx_close(f);
    fx_open(f);
    lead(f);
    assert_int_equal(r2_mgr_fs_list(f->m, "one", &fs, &n), 0);
    assert_int_equal(fs[0].files, 5);
    xt_fs_info_free_array(fs, n);
    assert_int_equal(r2_mgr_get_view(f->m, cur, &has, &v), 0);
    assert_false(has); /* the flush did not change the view version */
}

/* ---- leadership ----------------------------------------------------------------- */

static void test_leadership(void **state)
{
    struct fixture *f = *state;
    lead(f);
    uint32_t a;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:10", 0, 0, NULL, &a, NULL), 0);
    assert_int_equal(r2_mgr_fs_create(f->m, "x", NULL, NULL, NULL), 0);

    /* Another writer moves /r2/view: the next change loses its CAS. */
    void *val = NULL;
    size_t len = 0;
    int64_t ver = 0;
    assert_int_equal(r2_store_get(f->store, R2_KEY_VIEW, &val, &len, &ver), 0);
    assert_int_equal(r2_store_put(f->store, R2_KEY_VIEW, val, len, ver, 0, NULL), 0);
    xt_free(val);
    assert_int_equal(r2_mgr_fs_create(f->m, "y", NULL, NULL, NULL), -EREMOTE);
    assert_int_equal(r2_mgr_fs_create(f->m, "y", NULL, NULL, NULL), 0); /* reloaded */
    struct xt_fs_info *fs;
    size_t n;
    assert_int_equal(r2_mgr_fs_list(f->m, NULL, &fs, &n), 0);
    assert_int_equal(n, 2);
    xt_fs_info_free_array(fs, n);

    /* Not leading: -EREMOTE for all but get_view. */
    r2_mgr_leader_cb(f->m, false);
    bool has;
    struct xt_view v;
    assert_int_equal(r2_mgr_heartbeat(f->m, a, 0, 0, NULL, 0, &has, &v), -EREMOTE);
    assert_int_equal(r2_mgr_fs_list(f->m, NULL, &fs, &n), -EREMOTE);
    assert_int_equal(r2_mgr_get_view(f->m, 0, &has, &v), 0);
    assert_int_equal(v.nfs, 2);
    xt_view_free(&v);

    /* Silence while not leading, then leading again: a fresh grace period. */
    g_clock += 60000 * MS;
    r2_mgr_leader_cb(f->m, true);
    r2_mgr_tick(f->m);
    assert_int_equal(state_of(f->m, a), XT_SITE_UP);
    g_clock += 400 * MS;
    r2_mgr_tick(f->m);
    assert_int_equal(state_of(f->m, a), XT_SITE_FAILED);
}

/* ---- allocation failures ------------------------------------------------------------ */

static void test_alloc_failures(void **state)
{
    struct fixture *f = *state;
    lead(f);
    uint32_t keep;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:3", 0, 0, NULL, &keep, NULL),
                     0);
    int ok = 0, failed = 0;
    for (long n = 0; n < 1000; n += (n < 60 ? 1 : 7)) {
        char name[32], addr[48];
        snprintf(name, sizeof name, "fs%ld", n);
        snprintf(addr, sizeof addr, "127.0.0.1:%ld", 100 + n);
        uint32_t id = 0;
        struct xt_view v;
        xt_alloc_fail_after(n);
        int r1 = r2_mgr_register(f->m, XT_SITE_MDS, addr, 0, 0, NULL, &id, &v);
        int r2 = r2_mgr_fs_create(f->m, name, NULL, NULL, NULL);
        g_clock += 200 * MS;
        r2_mgr_tick(f->m);
        xt_alloc_fail_after(-1);
        if (r1 == 0)
            xt_view_free(&v);
        assert_true(r1 == 0 || r1 == -ENOMEM || r1 == -EREMOTE);
        assert_true(r2 == 0 || r2 == -ENOMEM || r2 == -EREMOTE);
        (r1 == 0 && r2 == 0) ? ok++ : failed++;
        if (getenv("R2_TEST_VERBOSE"))
            print_message("n=%ld register %d fs_create %d\n", n, r1, r2);
        /* Memory agrees with the store: a reload from it gives the same
         * view (same version, same sites and fs). */
        bool has;
        struct xt_view before, after;
        assert_int_equal(r2_mgr_get_view(f->m, 0, &has, &before), 0);
        r2_mgr_leader_cb(f->m, false);
        r2_mgr_leader_cb(f->m, true);
        assert_int_equal(r2_mgr_get_view(f->m, 0, &has, &after), 0);
        assert_int_equal(before.version, after.version);
        assert_int_equal(before.nsites, after.nsites);
        assert_int_equal(before.nfs, after.nfs);
        for (size_t i = 0; i < before.nsites; i++) {
            assert_int_equal(before.sites[i].id, after.sites[i].id);
            assert_int_equal(before.sites[i].state, after.sites[i].state);
        }
        for (size_t i = 0; i < before.nrings; i++)
            assert_memory_equal(before.rings[i].data, after.rings[i].data,
                                before.rings[i].len);
        xt_view_free(&before);
        xt_view_free(&after);
        if (ok > 5)
            break;
    }
    print_message("allocation failures: %d calls failed cleanly, %d succeeded\n", failed, ok);
    assert_true(failed > 0);
}

int main(void)
{
    xt_log_set_level(XT_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codecs),
        cmocka_unit_test(test_names),
        cmocka_unit_test_setup_teardown(test_states, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deltas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leadership, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
