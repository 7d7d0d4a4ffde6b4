/*
 * test_r2_mgr.c -- the site manager without a network: r2_mgr over the
 * embedded store with a hand-driven clock, and the record codecs.
 *
 *  - codecs: round trips; every single-byte corruption and every truncation
 *    of a record is refused (-EBADMSG), never half-read;
 *  - fs names and addresses: the accepted classes, and their edges;
 *  - states: UP -> TRANSIENT -> FAILED on the clock, ring 0 follows (an
 *    MDS leaves it), ring 1 does not (an MDSL stays; invariant 2 of
 *    r2_mgr.h), a heartbeat or re-registration brings a site back;
 *  - ring 1 open before the first MDS, frozen after it (a new MDSL stays
 *    out, drain/remove of its sites refused, prev_id keeps a place, also
 *    after a reload); random histories never change a frozen ring 1;
 *  - clients: a site leave deletes the record at once (servers may not
 *    leave); a silent client goes TRANSIENT, never FAILED, and is deleted
 *    after the client expiry; mounts count only the clients in the view;
 *  - views: deltas carry exactly the sections changed after `since`;
 *  - leadership: -EREMOTE when not leading; a lost compare-and-set on
 *    /r2/view (another R2 wrote) gives -EREMOTE, then a reload, then work;
 *    a new leadership gives every site a fresh grace period;
 *  - a pause of R2 itself (r2_mgr_tick_after): past the threshold every
 *    failure clock restarts and no site fails for R2's own silence; under
 *    it, or once the clocks restarted, silent sites fail as before;
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
                             .fail_after = 3, .client_expire_ms = 1000, .no_thread = true,
                             .clock = test_clock, .vnodes = 16 };
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

/* Every one-bit flip and every truncation of a site record is refused. */
static void site_rec_strict(void *buf, size_t len)
{
    unsigned char *p = buf;
    struct xt_site d;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            p[i] ^= (unsigned char)(1u << bit);
            assert_int_equal(r2_rec_site_decode(p, len, &d), -EBADMSG);
            p[i] ^= (unsigned char)(1u << bit);
        }
    for (size_t l = 0; l < len; l++)
        assert_int_equal(r2_rec_site_decode(p, l, &d), -EBADMSG);
}

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
    site_rec_strict(buf, len);
    xt_free(buf);

    /* With a metrics address (flag bit 0 and its field), and without one
     * the record is the old layout (byte 3 zero). */
    size_t old_len = len;
    strcpy(s.metrics, "127.0.0.1:9100");
    assert_int_equal(r2_rec_site_encode(&s, &buf, &len), 0);
    assert_int_equal(len, old_len + 2 + strlen(s.metrics));
    assert_int_equal(((unsigned char *)buf)[3], R2_REC_SITE_METRICS);
    assert_int_equal(r2_rec_site_decode(buf, len, &d), 0);
    assert_string_equal(d.metrics, "127.0.0.1:9100");
    assert_string_equal(d.fs_name, "home.fs-1");
    site_rec_strict(buf, len);
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
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        p[i] ^= 0x41;
        assert_int_equal(r2_rec_fs_decode(p, len, &g), -EBADMSG);
        assert_null(g.root_bitmap);
        p[i] ^= 0x41;
    }
    for (size_t l = 0; l < len; l++)
        assert_int_equal(r2_rec_fs_decode(p, l, &g), -EBADMSG);
    xt_free(buf);
    /* A rotated client key: the generation rides behind flag bit 0. */
    fs.key_gen = 0x123456789;
    assert_int_equal(r2_rec_fs_encode(&fs, &buf, &len), 0);
    assert_int_equal(((unsigned char *)buf)[3], R2_REC_FS_KEYGEN);
    assert_int_equal(r2_rec_fs_decode(buf, len, &g), 0);
    assert_int_equal(g.key_gen, 0x123456789);
    assert_string_equal(g.blob_path, "/x/y");
    assert_memory_equal(g.root_bitmap, bm, 5);
    xt_free(g.root_bitmap);
    for (size_t l = 0; l < len; l++)
        assert_int_equal(r2_rec_fs_decode(buf, l, &g), -EBADMSG);
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
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:10", 0, 0, NULL, NULL, &id, NULL),
                     -EREMOTE);
    lead(f);
    uint32_t a, b, c, d;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:10", 1, 0, NULL, NULL, &a, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:11", 1, 0, NULL, NULL, &b, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:12", 1, 0, NULL, NULL, &c, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:13", 1, 0, NULL, NULL, &d, NULL), 0);
    assert_true(in_ring(f->m, 1, a, NULL) && in_ring(f->m, 1, b, NULL));
    assert_true(in_ring(f->m, 0, c, NULL) && !in_ring(f->m, 1, c, NULL));
    assert_true(in_ring(f->m, 0, d, NULL));

    /* b and c keep beating; a (MDSL) and d (MDS) go silent. transient =
     * 100 + 50 ms, failed = 300 + 50 ms. Ring 0 follows the failure of d;
     * ring 1 does not follow a's: its slices wait for it. */
    bool has;
    struct xt_view v;
    uint64_t ring1 = 0, ring0 = 0;
    in_ring(f->m, 1, a, &ring1);
    in_ring(f->m, 0, c, &ring0);
    for (int step = 1; step <= 8; step++) {
        g_clock += 50 * MS;
        assert_int_equal(r2_mgr_heartbeat(f->m, b, 0, 0.5, NULL, 0, NULL, NULL, &has, &v, NULL), 0);
        xt_view_free(&v);
        assert_int_equal(r2_mgr_heartbeat(f->m, c, 0, 0.5, NULL, 0, NULL, NULL, &has, &v, NULL), 0);
        xt_view_free(&v);
        r2_mgr_tick(f->m);
        int st = state_of(f->m, a);
        if (step <= 3)
            assert_int_equal(st, XT_SITE_UP);
        else if (step <= 7)
            assert_int_equal(st, XT_SITE_TRANSIENT);
        else
            assert_int_equal(st, XT_SITE_FAILED);
        assert_int_equal(state_of(f->m, d), st);
        assert_true(in_ring(f->m, 1, a, NULL));
        assert_int_equal(in_ring(f->m, 0, d, NULL), st != XT_SITE_FAILED);
    }
    uint64_t v1 = 0, v0 = 0;
    in_ring(f->m, 1, b, &v1);
    in_ring(f->m, 0, c, &v0);
    assert_int_equal(v1, ring1);
    assert_int_equal(v0, ring0 + 1);
    assert_int_equal(state_of(f->m, b), XT_SITE_UP);

    /* A heartbeat brings a back: UP, ring 1 unchanged; d rejoins ring 0. */
    assert_int_equal(r2_mgr_heartbeat(f->m, a, 0, 0, NULL, 0, NULL, NULL, &has, &v, NULL), 0);
    assert_true(has);
    xt_view_free(&v);
    assert_int_equal(state_of(f->m, a), XT_SITE_UP);
    assert_true(in_ring(f->m, 1, a, &v1));
    assert_int_equal(v1, ring1);
    assert_int_equal(r2_mgr_heartbeat(f->m, d, 0, 0, NULL, 0, NULL, NULL, &has, &v, NULL), 0);
    xt_view_free(&v);
    assert_true(in_ring(f->m, 0, d, NULL));

    /* Re-registration with prev_id keeps the id and the place in ring 1;
     * with a wrong type it does not keep the id. */
    uint32_t again = 0;
    assert_int_equal(
        r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:20", 1, a, NULL, NULL, &again, NULL), 0);
    assert_int_equal(again, a);
    assert_true(in_ring(f->m, 1, a, &v1));
    assert_int_equal(v1, ring1);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:21", 1, a, NULL, NULL, &again, NULL),
                     0);
    assert_int_not_equal(again, a);

    /* Drain and remove of an MDSL in the frozen ring 1: refused, nothing
     * changes (its slices would have no place). */
    uint64_t ver = 0;
    assert_int_equal(r2_mgr_get_view(f->m, 0, &has, &v), 0);
    ver = v.version;
    xt_view_free(&v);
    assert_int_equal(r2_mgr_site_drain(f->m, b), -EOPNOTSUPP);
    assert_int_equal(r2_mgr_site_remove(f->m, b), -EOPNOTSUPP);
    assert_int_equal(r2_mgr_site_drain(f->m, a), -EOPNOTSUPP);
    assert_true(in_ring(f->m, 1, b, &v1));
    assert_int_equal(v1, ring1);
    assert_int_equal(state_of(f->m, b), XT_SITE_UP);
    assert_int_equal(r2_mgr_get_view(f->m, ver, &has, &v), 0);
    assert_false(has);

    /* A new MDSL after an MDS registered: UP, in the view, in no ring. */
    uint32_t e;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:30", 1, 0, NULL, NULL, &e, NULL), 0);
    assert_int_equal(state_of(f->m, e), XT_SITE_UP);
    assert_false(in_ring(f->m, 1, e, &v1));
    assert_int_equal(v1, ring1);
    /* ... and stays out when it fails and comes back, or re-registers. */
    g_clock += 1000 * MS;
    r2_mgr_tick(f->m);
    assert_int_equal(state_of(f->m, e), XT_SITE_FAILED);
    assert_int_equal(r2_mgr_heartbeat(f->m, e, 0, 0, NULL, 0, NULL, NULL, &has, &v, NULL), 0);
    xt_view_free(&v);
    assert_int_equal(state_of(f->m, e), XT_SITE_UP);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:31", 1, e, NULL, NULL, &again, NULL),
                     0);
    assert_int_equal(again, e);
    assert_false(in_ring(f->m, 1, e, &v1));
    assert_int_equal(v1, ring1);
    /* It holds nothing: drain and remove work. */
    assert_int_equal(r2_mgr_site_drain(f->m, e), 0);
    assert_int_equal(state_of(f->m, e), XT_SITE_DRAINING);
    g_clock += 10000 * MS;
    r2_mgr_tick(f->m);
    assert_int_equal(state_of(f->m, e), XT_SITE_DRAINING);
    assert_int_equal(state_of(f->m, a), XT_SITE_FAILED);
    assert_true(in_ring(f->m, 1, a, NULL));
    /* Remove: gone; its heartbeats get -ENOENT. */
    assert_int_equal(r2_mgr_site_remove(f->m, e), 0);
    assert_int_equal(state_of(f->m, e), 0);
    assert_int_equal(r2_mgr_heartbeat(f->m, e, 0, 0, NULL, 0, NULL, NULL, &has, &v, NULL), -ENOENT);
    assert_int_equal(r2_mgr_site_remove(f->m, e), -ENOENT);
    /* Its daemon, still running, re-registers with its id: refused, so it
     * never rejoins on its own; with no id (an empty folder) it is a new
     * site. The tombstone outlives a new leadership. */
    again = 0;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:30", 1, e, NULL, NULL, &again, NULL),
                     -EIDRM);
    assert_int_equal(again, 0);
    fx_close(f);
    fx_open(f);
    lead(f);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:30", 1, e, NULL, NULL, &again, NULL),
                     -EIDRM);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:30", 1, 0, NULL, NULL, &again, NULL),
                     0);
    assert_true(again != e);
    assert_int_equal(state_of(f->m, again), XT_SITE_UP);
    /* MDS sites drain and leave ring 0 as before. */
    assert_int_equal(r2_mgr_site_drain(f->m, d), 0);
    assert_false(in_ring(f->m, 0, d, NULL));
    in_ring(f->m, 1, a, &v1);
    assert_int_equal(v1, ring1);
}

/* Before the first MDS (cluster bring-up) ring 1 is open: MDSL join it,
 * drain and remove take them out. Once an MDS registered it is frozen,
 * even after every MDS record is removed (ring 0 changed once), across a
 * reload of the state, and prev_id re-registration keeps a place. */
static void test_ring1_open_then_frozen(void **state)
{
    struct fixture *f = *state;
    lead(f);
    uint32_t a, b, x, mds;
    uint64_t v1 = 0, v1b = 0;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:10", 1, 0, NULL, NULL, &a, NULL), 0);
    assert_true(in_ring(f->m, 1, a, &v1));
    assert_int_equal(v1, 1);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:11", 1, 0, NULL, NULL, &x, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:12", 1, 0, NULL, NULL, &b, NULL), 0);
    assert_true(in_ring(f->m, 1, b, &v1));
    assert_int_equal(v1, 3);
    /* Open: a drain takes x out of ring 1, a remove too. */
    assert_int_equal(r2_mgr_site_drain(f->m, x), 0);
    assert_false(in_ring(f->m, 1, x, &v1));
    assert_int_equal(v1, 4);
    assert_int_equal(r2_mgr_site_remove(f->m, x), 0);
    /* Open: a FAILED MDSL stays in ring 1 all the same. */
    g_clock += 1000 * MS;
    r2_mgr_tick(f->m);
    assert_int_equal(state_of(f->m, a), XT_SITE_FAILED);
    assert_true(in_ring(f->m, 1, a, &v1));
    assert_int_equal(v1, 4);

    /* The first MDS registers: frozen. */
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:20", 1, 0, NULL, NULL, &mds, NULL),
                     0);
    uint32_t late;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:13", 1, 0, NULL, NULL, &late, NULL),
                     0);
    assert_false(in_ring(f->m, 1, late, &v1b));
    assert_int_equal(v1b, v1);
    assert_int_equal(r2_mgr_site_drain(f->m, a), -EOPNOTSUPP);

    /* Every MDS record removed: still frozen (ring 0 changed once). */
    assert_int_equal(r2_mgr_site_remove(f->m, mds), 0);
    uint32_t later;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:14", 1, 0, NULL, NULL, &later, NULL),
                     0);
    assert_false(in_ring(f->m, 1, later, NULL));
    assert_int_equal(r2_mgr_site_remove(f->m, b), -EOPNOTSUPP);

    /* A new leadership (state reloaded from the store): the same rules. */
    fx_close(f);
    fx_open(f);
    lead(f);
    assert_int_equal(r2_mgr_site_drain(f->m, b), -EOPNOTSUPP);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:15", 1, a, NULL, NULL, &x, NULL), 0);
    assert_int_equal(x, a);
    assert_int_equal(state_of(f->m, a), XT_SITE_UP);
    assert_true(in_ring(f->m, 1, a, &v1b));
    assert_true(in_ring(f->m, 1, b, NULL));
    assert_int_equal(v1b, v1);
    assert_int_equal(r2_mgr_site_drain(f->m, late), 0);
    assert_int_equal(r2_mgr_site_remove(f->m, later), 0);
}

/* An MDS that registers before any MDSL (a race at bring-up) does not
 * freeze an empty ring 1: it stores nothing yet, the first MDSL joins;
 * from then on ring 1 is frozen. */
static void test_ring1_empty_not_frozen(void **state)
{
    struct fixture *f = *state;
    lead(f);
    uint32_t mds, a, b;
    uint64_t v1 = 0, v1b = 0;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:20", 1, 0, NULL, NULL, &mds, NULL),
                     0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:10", 1, 0, NULL, NULL, &a, NULL), 0);
    assert_true(in_ring(f->m, 1, a, &v1));
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:11", 1, 0, NULL, NULL, &b, NULL), 0);
    assert_false(in_ring(f->m, 1, b, &v1b));
    assert_int_equal(v1b, v1);
    assert_int_equal(r2_mgr_site_drain(f->m, a), -EOPNOTSUPP);
}

/* Random histories (seeded; the seed is printed, R2_TEST_SEED replays one):
 * MDSL and MDS register, re-register, beat, go silent, fail, come back,
 * drain and remove. From the first MDS registration on, ring 1 is the same
 * bytes after every step; ring 0 always holds exactly the MDS that are UP
 * or TRANSIENT. */
static void ring1_history(struct fixture *f, int *refused_out, int *kept_out_out)
{
    lead(f);
    /* MDS may register only after this step: a long open part first. */
    int first_mds = rand() % 120;
    enum { MAXS = 96 };
    uint32_t ids[MAXS];
    int types[MAXS];
    bool silent[MAXS];
    size_t n = 0;
    unsigned char *frozen = NULL;
    size_t frozen_len = 0;
    int refused = 0, kept_out = 0;
    bool ever_mds = false; /* ring 0 changed once: r2_state_ring1_frozen */
    for (int step = 0; step < 300; step++) {
        int op = rand() % 10;
        bool has;
        struct xt_view v;
        if ((op < 3 || n == 0) && n < MAXS) {
            /* A new site; MDS rarely, so histories have a long open part. */
            int type = step >= first_mds && rand() % 4 == 0 ? XT_SITE_MDS : XT_SITE_MDSL;
            char addr[32];
            snprintf(addr, sizeof addr, "127.0.0.1:%d", 100 + step);
            assert_int_equal(r2_mgr_register(f->m, type, addr, 1, 0, NULL, NULL, &ids[n], NULL), 0);
            types[n] = type;
            silent[n] = false;
            ever_mds |= type == XT_SITE_MDS;
            if (type == XT_SITE_MDSL && frozen && !in_ring(f->m, 1, ids[n], NULL))
                kept_out++;
            n++;
        } else if (op < 5) {
            size_t k = (size_t)rand() % n;
            silent[k] = !silent[k];
        } else if (op < 6) {
            size_t k = (size_t)rand() % n;
            uint32_t again = 0;
            bool removed = state_of(f->m, ids[k]) == 0;
            int rc = r2_mgr_register(f->m, types[k], "127.0.0.1:99", 1, ids[k], NULL, NULL, &again,
                                     NULL);
            if (removed) {
                /* Its id is refused; an empty folder registers anew. */
                assert_int_equal(rc, -EIDRM);
                rc = r2_mgr_register(f->m, types[k], "127.0.0.1:99", 1, 0, NULL, NULL, &again,
                                     NULL);
            }
            assert_int_equal(rc, 0);
            if (!removed)
                assert_int_equal(again, ids[k]);
            ids[k] = again;
            silent[k] = false;
        } else if (op < 7) {
            size_t k = (size_t)rand() % n;
            bool ring1 = types[k] == XT_SITE_MDSL && in_ring(f->m, 1, ids[k], NULL);
            int rc = rand() % 2 ? r2_mgr_site_drain(f->m, ids[k])
                                : r2_mgr_site_remove(f->m, ids[k]);
            if (rc == -EOPNOTSUPP) {
                assert_true(ring1 && frozen);
                refused++;
            } else {
                assert_true(rc == 0 || rc == -ENOENT);
                assert_false(ring1 && frozen);
            }
        } else {
            g_clock += (uint64_t)(rand() % 200) * MS;
            for (size_t k = 0; k < n; k++)
                if (!silent[k]) {
                    int rc = r2_mgr_heartbeat(f->m, ids[k], 0, 0, NULL, 0, NULL, NULL, &has, &v, NULL);
                    assert_true(rc == 0 || rc == -ENOENT);
                    if (rc == 0)
                        xt_view_free(&v);
                }
            r2_mgr_tick(f->m);
        }
        assert_int_equal(r2_mgr_get_view(f->m, 0, &has, &v), 0);
        const struct xt_ring_blob *r1 = &v.rings[XT_RING_MDSL];
        xt_ring *r0 = NULL, *r1r = NULL;
        assert_int_equal(xt_ring_decode(r1->data, r1->len, &r1r), 0);
        bool ring1_empty = xt_ring_nsites(r1r) == 0;
        xt_ring_free(r1r);
        assert_int_equal(xt_ring_decode(v.rings[XT_RING_MDS].data, v.rings[XT_RING_MDS].len, &r0),
                         0);
        for (size_t i = 0; i < v.nsites; i++) {
            const struct xt_site *s = &v.sites[i];
            if (s->type == XT_SITE_MDS)
                assert_int_equal(xt_ring_has_site(r0, s->id) == 1,
                                 s->state == XT_SITE_UP || s->state == XT_SITE_TRANSIENT);
        }
        xt_ring_free(r0);
        if (frozen) {
            assert_int_equal(r1->len, frozen_len);
            assert_memory_equal(r1->data, frozen, frozen_len);
        } else if (ever_mds && !ring1_empty) { /* an empty ring 1 stays open */
            frozen = malloc(r1->len);
            assert_non_null(frozen);
            memcpy(frozen, r1->data, r1->len);
            frozen_len = r1->len;
        }
        xt_view_free(&v);
    }
    assert_non_null(frozen);
    free(frozen);
    *refused_out += refused;
    *kept_out_out += kept_out;
}

static void test_ring1_random(void **state)
{
    struct fixture *f = *state;
    const char *env = getenv("R2_TEST_SEED");
    unsigned seed = env ? (unsigned)strtoul(env, NULL, 0) : (unsigned)time(NULL);
    print_message("ring 1 histories: seed %u (R2_TEST_SEED=%u replays)\n", seed, seed);
    srand(seed);
    int refused = 0, kept_out = 0;
    for (int h = 0; h < 12; h++) {
        ring1_history(f, &refused, &kept_out);
        /* A fresh store for the next history. */
        fx_close(f);
        pom_rm_rf(f->dir);
        assert_true(pom_tmpdir("r2mgr", f->dir, sizeof f->dir) >= 0);
        fx_open(f);
    }
    print_message("ring 1 histories: 12 x 300 steps, %d drain/remove refused, %d MDSL kept "
                  "out\n",
                  refused, kept_out);
    assert_true(refused > 0 && kept_out > 0);
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
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_CLIENT, "c0", 0, 0, NULL, NULL, &c0, NULL), 0);
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
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_CLIENT, "c1", 0, 0, NULL, NULL, &c1, NULL), 0);
    assert_int_equal(r2_mgr_get_view(f->m, v1, &has, &v), 0);
    assert_int_equal(v.sections, XT_VIEW_SITES);
    xt_view_free(&v);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:5", 0, 0, NULL, NULL, &id, NULL),
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
    assert_int_equal(r2_mgr_heartbeat(f->m, id, cur, 1.0, NULL, 0, NULL, NULL, &has, &v, NULL), 0);
    assert_false(has);
}

static void fs_usage(r2_mgr *m, const char *name, uint64_t *files, uint64_t *bytes)
{
    struct xt_fs_info *fs;
    size_t n;
    assert_int_equal(r2_mgr_fs_list(m, name, &fs, &n), 0);
    assert_int_equal(n, 1);
    *files = fs[0].files;
    *bytes = fs[0].bytes;
    xt_fs_info_free_array(fs, n);
}

/* One MDS heartbeat with usage counts (files, bytes) of fs 1 under epoch. */
static void usage_beat(struct fixture *f, uint32_t id, uint64_t epoch, int64_t files,
                       int64_t bytes, struct xt_capacity *cap)
{
    struct xt_fs_counter c = { .fsid = 1, .files = files, .bytes = bytes };
    struct xt_r2_hb_usage u = { .has_epoch = true, .epoch = epoch };
    bool has;
    struct xt_view v;
    assert_int_equal(r2_mgr_heartbeat(f->m, id, 0, 0, &c, 1, NULL, &u, &has, &v, cap), 0);
    xt_view_free(&v);
}

/* docs/r2.md "Capacity and quotas": an MDS's running sums replace what they
 * supersede; a new incarnation adds; the totals survive a new leader (with
 * the flush) and an R2 restart (the same incarnation reports again). */
static void test_usage(void **state)
{
    struct fixture *f = *state;
    lead(f);
    assert_int_equal(r2_mgr_fs_create(f->m, "one", NULL, NULL, NULL), 0);
    uint32_t a, b, l1, l2;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:5", 0, 0, NULL, NULL, &l1, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:7", 0, 0, NULL, NULL, &l2, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:6", 0, 0, NULL, NULL, &a, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:8", 0, 0, NULL, NULL, &b, NULL), 0);
    /* Two MDSL on one disk of one host count once; the reply says so. */
    struct xt_r2_hb_usage st = { .has_storage = true,
                                 .storage = { .size = 1000, .avail = 400, .dev = 9 } };
    bool has;
    struct xt_view v;
    struct xt_capacity cap;
    assert_int_equal(r2_mgr_heartbeat(f->m, l1, 0, 0, NULL, 0, NULL, &st, &has, &v, &cap), 0);
    xt_view_free(&v);
    xt_capacity_free(&cap);
    assert_int_equal(r2_mgr_heartbeat(f->m, l2, 0, 0, NULL, 0, NULL, &st, &has, &v, &cap), 0);
    xt_view_free(&v);
    assert_true(cap.valid);
    assert_int_equal(cap.size, 1000);
    assert_int_equal(cap.avail, 400);
    assert_int_equal(cap.ndevs, 1);
    xt_capacity_free(&cap);
    uint64_t files, bytes;
    usage_beat(f, a, 11, 5, 500, NULL);
    usage_beat(f, a, 11, 5, 500, NULL); /* repeated: nothing added */
    usage_beat(f, b, 22, 3, 30, NULL);
    fs_usage(f->m, "one", &files, &bytes);
    assert_int_equal(files, 8);
    assert_int_equal(bytes, 530);
    usage_beat(f, a, 11, 4, 400, NULL); /* a removed one file since */
    fs_usage(f->m, "one", &files, &bytes);
    assert_int_equal(files, 7);
    assert_int_equal(bytes, 430);
    /* a restarts: its new incarnation counts from 0, on top. */
    usage_beat(f, a, 12, 1, 10, &cap);
    assert_true(cap.valid);
    const struct xt_fs_usage *u = xt_capacity_fs(&cap, 1);
    assert_non_null(u);
    assert_int_equal(u->files, 8);
    assert_int_equal(u->bytes, 440);
    xt_capacity_free(&cap);
    /* A quota is kept with the fs and travels in the replies. */
    struct xt_fs_info out;
    assert_int_equal(r2_mgr_fs_quota(f->m, "one", 100, 1 << 20, &out), 0);
    xt_free(out.root_bitmap);
    usage_beat(f, a, 12, 1, 10, &cap);
    u = xt_capacity_fs(&cap, 1);
    assert_int_equal(u->quota_files, 100);
    assert_int_equal(u->quota_bytes, 1 << 20);
    xt_capacity_free(&cap);
    /* Flushed within flush_ns; a new leader loads the totals and the
     * incarnations they hold: the same ones add nothing again. */
    g_clock += 6000 * MS;
    r2_mgr_tick(f->m);
    fx_close(f);
    fx_open(f);
    lead(f);
    fs_usage(f->m, "one", &files, &bytes);
    assert_int_equal(files, 8);
    assert_int_equal(bytes, 440);
    usage_beat(f, a, 12, 2, 20, NULL);
    usage_beat(f, b, 22, 3, 30, NULL);
    fs_usage(f->m, "one", &files, &bytes);
    assert_int_equal(files, 9);
    assert_int_equal(bytes, 450);
    struct xt_fs_info *fs;
    size_t n;
    assert_int_equal(r2_mgr_fs_list(f->m, "one", &fs, &n), 0);
    assert_int_equal(fs[0].quota_files, 100);
    xt_fs_info_free_array(fs, n);
    /* Before any flush, a new leader still converges: the sums replace. */
    fx_close(f);
    fx_open(f);
    lead(f);
    fs_usage(f->m, "one", &files, &bytes);
    assert_int_equal(files, 8); /* as flushed */
    usage_beat(f, a, 12, 2, 20, NULL);
    fs_usage(f->m, "one", &files, &bytes);
    assert_int_equal(files, 9);
    assert_int_equal(bytes, 450);
    /* fsck's exact figures replace the totals; the incarnations' sums stay,
     * so only later changes add. */
    assert_int_equal(r2_mgr_fs_set_usage(f->m, "one", 100, 1000), 0);
    assert_int_equal(r2_mgr_fs_set_usage(f->m, "nope", 1, 1), -ENOENT);
    usage_beat(f, a, 12, 2, 20, NULL);
    fs_usage(f->m, "one", &files, &bytes);
    assert_int_equal(files, 100);
    assert_int_equal(bytes, 1000);
    usage_beat(f, a, 12, 3, 25, NULL);
    fs_usage(f->m, "one", &files, &bytes);
    assert_int_equal(files, 101);
    assert_int_equal(bytes, 1005);
    /* Written at once: a new leader has them. */
    fx_close(f);
    fx_open(f);
    lead(f);
    fs_usage(f->m, "one", &files, &bytes);
    assert_int_equal(files, 100);
}

static uint32_t mounts_of(r2_mgr *m, const char *fs)
{
    struct xt_fs_info *fi;
    size_t n;
    assert_int_equal(r2_mgr_fs_list(m, fs, &fi, &n), 0);
    assert_int_equal(n, 1);
    uint32_t k = fi[0].mounts;
    xt_fs_info_free_array(fi, n);
    return k;
}

static void test_clients(void **state)
{
    struct fixture *f = *state;
    lead(f);
    assert_int_equal(r2_mgr_fs_create(f->m, "one", NULL, NULL, NULL), 0);
    uint32_t mds, c, d;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:12", 1, 0, NULL, NULL, &mds, NULL),
                     0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_CLIENT, "c", 0, 0, "one", NULL, &c, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_CLIENT, "d", 0, 0, "one", NULL, &d, NULL), 0);
    assert_int_equal(mounts_of(f->m, "one"), 2);

    /* A clean unmount: gone at once, its mount no longer counts. */
    assert_int_equal(r2_mgr_site_leave(f->m, c), 0);
    assert_int_equal(state_of(f->m, c), 0);
    assert_int_equal(mounts_of(f->m, "one"), 1);
    bool has;
    struct xt_view v;
    assert_int_equal(r2_mgr_heartbeat(f->m, c, 0, 0, NULL, 0, NULL, NULL, &has, &v, NULL), -ENOENT);
    assert_int_equal(r2_mgr_site_leave(f->m, c), -ENOENT);
    /* Servers do not leave: they drain. */
    assert_int_equal(r2_mgr_site_leave(f->m, mds), -EINVAL);
    assert_int_equal(state_of(f->m, mds), XT_SITE_UP);

    /* d goes silent (the MDS beats): TRANSIENT after one interval + slack
     * (150 ms), never FAILED (a server fails after 350 ms), deleted after
     * the client expiry (1000 ms). */
    int saw_transient = 0;
    for (int step = 1; step <= 25; step++) {
        g_clock += 50 * MS;
        assert_int_equal(r2_mgr_heartbeat(f->m, mds, 0, 0, NULL, 0, NULL, NULL, &has, &v, NULL), 0);
        xt_view_free(&v);
        r2_mgr_tick(f->m);
        int st = state_of(f->m, d);
        if (step <= 3)
            assert_int_equal(st, XT_SITE_UP);
        else if (step <= 20)
            assert_int_equal(st, XT_SITE_TRANSIENT);
        else
            assert_int_equal(st, 0);
        saw_transient += st == XT_SITE_TRANSIENT;
        assert_int_equal(mounts_of(f->m, "one"), step <= 20 ? 1 : 0);
        assert_int_equal(state_of(f->m, mds), XT_SITE_UP);
    }
    assert_true(saw_transient > 0);
    /* The expiry is in the store: a reload does not bring d back, and its
     * next heartbeat asks it to register again. */
    fx_close(f);
    fx_open(f);
    lead(f);
    assert_int_equal(state_of(f->m, d), 0);
    assert_int_equal(r2_mgr_heartbeat(f->m, d, 0, 0, NULL, 0, NULL, NULL, &has, &v, NULL), -ENOENT);
    assert_int_equal(mounts_of(f->m, "one"), 0);
}

/* ---- leadership ----------------------------------------------------------------- */

static void test_leadership(void **state)
{
    struct fixture *f = *state;
    lead(f);
    uint32_t a;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:10", 0, 0, NULL, NULL, &a, NULL), 0);
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
    assert_int_equal(r2_mgr_heartbeat(f->m, a, 0, 0, NULL, 0, NULL, NULL, &has, &v, NULL), -EREMOTE);
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

/* R2 stood still for 10 s (all its sites silent that long, by its clock):
 * told so, it fails nobody and starts their clocks afresh. A pause under
 * the threshold (175 ms here: the larger of 150 ms transient and half of
 * 350 ms failed) changes nothing, and real silence still fails a site. */
static void test_self_pause(void **state)
{
    struct fixture *f = *state;
    lead(f);
    uint32_t a, b;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:10", 1, 0, NULL, NULL, &a, NULL), 0);
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDS, "127.0.0.1:12", 1, 0, NULL, NULL, &b, NULL), 0);
    g_clock += 10000 * MS;
    r2_mgr_tick_after(f->m, 10000 * MS);
    assert_int_equal(state_of(f->m, a), XT_SITE_UP);
    assert_int_equal(state_of(f->m, b), XT_SITE_UP);
    assert_true(in_ring(f->m, 0, b, NULL));
    g_clock += 100 * MS;
    r2_mgr_tick_after(f->m, 100 * MS);
    assert_int_equal(state_of(f->m, b), XT_SITE_UP);
    g_clock += 300 * MS;
    r2_mgr_tick_after(f->m, 170 * MS);
    assert_int_equal(state_of(f->m, a), XT_SITE_FAILED);
    assert_int_equal(state_of(f->m, b), XT_SITE_FAILED);
    assert_false(in_ring(f->m, 0, b, NULL));
}

/* ---- allocation failures ------------------------------------------------------------ */

static void test_alloc_failures(void **state)
{
    struct fixture *f = *state;
    lead(f);
    uint32_t keep;
    assert_int_equal(r2_mgr_register(f->m, XT_SITE_MDSL, "127.0.0.1:3", 0, 0, NULL, NULL, &keep, NULL),
                     0);
    int ok = 0, failed = 0;
    for (long n = 0; n < 1000; n += (n < 60 ? 1 : 7)) {
        char name[32], addr[48];
        snprintf(name, sizeof name, "fs%ld", n);
        snprintf(addr, sizeof addr, "127.0.0.1:%ld", 100 + n);
        uint32_t id = 0;
        struct xt_view v;
        xt_alloc_fail_after(n);
        int r1 = r2_mgr_register(f->m, XT_SITE_MDS, addr, 0, 0, NULL, NULL, &id, &v);
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
        cmocka_unit_test_setup_teardown(test_ring1_open_then_frozen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ring1_empty_not_frozen, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ring1_random, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deltas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leadership, setup, teardown),
        cmocka_unit_test_setup_teardown(test_self_pause, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
