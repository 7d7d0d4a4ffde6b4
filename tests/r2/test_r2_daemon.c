/*
 * test_r2_daemon.c -- pom-r2 as a real process with real pom-mdsl sites
 * (their r2_agent), driven through the R2 RPC service.
 *
 * Built twice: R2_TEST_ZK=0 (embedded store) and R2_TEST_ZK=1 (a real
 * ZooKeeper server and three pom-r2; skipped with 77 when Java or ZooKeeper
 * are not installed).
 *
 *  embedded: registration, TRANSIENT -> FAILED on SIGKILL (ring 1 does not
 *    change: an MDSL's slices wait for it), back UP with the same id after
 *    restart; fs create/list/drop, names,
 *    -EBUSY while a client mounts it; views as deltas; restart of pom-r2
 *    itself loses nothing and fails no live site; drain and remove of an
 *    MDSL of the frozen ring 1 refused, of a later MDSL (in no ring) done; uuid
 *    ranges disjoint; bad RPC arguments and malformed frames; a second
 *    pom-r2 on the same folder exits 1 with a clear message.
 *  ZooKeeper: exactly one leader, followers answer -EREMOTE; SIGKILL of the
 *    leader gives a new leader within the session timeout with all sites
 *    and fs; a killed site fails under the new leader (ring 1 unchanged)
 *    and comes back; a 20 s
 *    freeze of the ZooKeeper server gives clear errors, bounded in time,
 *    and everything works after it.
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pom_proc.h"
#include "pom_zk.h"
#include "r2_agent.h"
#include "xt_common.h"
#include "xt_ring.h"
#include "xt_rpc.h"
#include "xt_rpc_r2.h"

#ifndef R2_TEST_ZK
#define R2_TEST_ZK 0
#endif

#define HB_MS "200"
#define FAIL_AFTER "3"
#define SESSION_MS 4000

static char g_base[256];

static uint64_t now_ms(void)
{
    return xt_mono_ns() / 1000000u;
}

/* ---- processes ------------------------------------------------------------- */

struct r2d {
    int port;
    pid_t pid;
    char addr[64];
    char log[300];
    xt_rpc_pool *pool;
};

struct mdsl {
    char dir[300];
    char log[320];
    int port;
    pid_t pid;
    char addr[64];
};

static xt_rpc_pool *new_pool(int port, int timeout_ms)
{
    struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = port,
                                   .call_timeout_ms = timeout_ms, .connect_timeout_ms = 2000,
                                   .backoff_min_ms = 10, .backoff_max_ms = 100 };
    xt_rpc_pool *p = NULL;
    assert_int_equal(xt_rpc_pool_new(&po, &p), 0);
    return p;
}

/* Starts pom-r2: embedded in g_base/r2data, or on ZooKeeper zk_hosts. */
static void r2_start(struct r2d *r, const char *zk_hosts, int idx)
{
    char listen[64], data[300];
    if (r->port == 0)
        r->port = pom_free_port();
    snprintf(listen, sizeof listen, "127.0.0.1:%d", r->port);
    snprintf(r->addr, sizeof r->addr, "127.0.0.1:%d", r->port);
    snprintf(r->log, sizeof r->log, "%s/r2-%d.log", g_base, idx);
    snprintf(data, sizeof data, "%s/r2data", g_base);
    char *argv[20];
    int n = 0;
    argv[n++] = (char *)POM_R2_BIN;
    if (zk_hosts) {
        argv[n++] = (char *)"--zk";
        argv[n++] = (char *)zk_hosts;
        argv[n++] = (char *)"--zk-root";
        argv[n++] = (char *)"/pomtest";
        argv[n++] = (char *)"--session-timeout-ms";
        argv[n++] = (char *)"4000";
    } else {
        argv[n++] = (char *)"--data";
        argv[n++] = data;
    }
    argv[n++] = (char *)"--listen";
    argv[n++] = listen;
    argv[n++] = (char *)"--hb-interval-ms";
    argv[n++] = (char *)HB_MS;
    argv[n++] = (char *)"--fail-after";
    argv[n++] = (char *)FAIL_AFTER;
    argv[n++] = (char *)"--verbose";
    argv[n] = NULL;
    r->pid = pom_proc_spawn(argv, r->log);
    assert_true(r->pid > 0);
    assert_int_equal(pom_proc_wait_port("127.0.0.1", r->port, 30000), 0);
    if (!r->pool)
        r->pool = new_pool(r->port, 15000);
}

static void r2_kill(struct r2d *r)
{
    pom_proc_kill(r->pid, SIGKILL);
    pom_proc_wait(r->pid, 10000, NULL);
    r->pid = 0;
}

static void mdsl_start(struct mdsl *m, const char *r2_addrs, int idx)
{
    if (!m->dir[0]) {
        snprintf(m->dir, sizeof m->dir, "%s/mdsl%d", g_base, idx);
        assert_int_equal(mkdir(m->dir, 0755), 0);
        snprintf(m->log, sizeof m->log, "%s/mdsl%d.log", g_base, idx);
        m->port = pom_free_port();
        snprintf(m->addr, sizeof m->addr, "127.0.0.1:%d", m->port);
    }
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", m->port);
    char *argv[] = { (char *)POM_MDSL_BIN, (char *)"--dir", m->dir, (char *)"--listen", listen,
                     (char *)"--r2", (char *)r2_addrs, (char *)"--capacity", (char *)"1G",
                     (char *)"--hb-interval-ms", (char *)HB_MS, (char *)"--threads", (char *)"2",
                     NULL };
    m->pid = pom_proc_spawn(argv, m->log);
    assert_true(m->pid > 0);
    assert_int_equal(pom_proc_wait_port("127.0.0.1", m->port, 30000), 0);
}

static void mdsl_kill(struct mdsl *m)
{
    pom_proc_kill(m->pid, SIGKILL);
    pom_proc_wait(m->pid, 10000, NULL);
    m->pid = 0;
}

/* The id the site stored in its folder (0: none yet). */
static uint32_t mdsl_site_id(const struct mdsl *m)
{
    char path[400];
    snprintf(path, sizeof path, "%s/site_id", m->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    unsigned id = 0;
    if (fscanf(f, "%u", &id) != 1)
        id = 0;
    fclose(f);
    return id;
}

/* ---- views ------------------------------------------------------------------ */

static int get_full(xt_rpc_pool *p, struct xt_view *v)
{
    bool has = false;
    int rc = xt_r2_get_view(p, NULL, 0, &has, v);
    if (rc == 0 && !has)
        rc = -EPROTO;
    return rc;
}

static const struct xt_site *site_by_id(const struct xt_view *v, uint32_t id)
{
    for (size_t i = 0; i < v->nsites; i++)
        if (v->sites[i].id == id)
            return &v->sites[i];
    return NULL;
}

static const struct xt_site *site_by_addr(const struct xt_view *v, const char *addr)
{
    for (size_t i = 0; i < v->nsites; i++)
        if (!strcmp(v->sites[i].addr, addr))
            return &v->sites[i];
    return NULL;
}

static int site_state(const struct xt_view *v, uint32_t id)
{
    const struct xt_site *s = site_by_id(v, id);
    return s ? s->state : 0;
}

/* Whether ring r of v holds site; *version gets the ring's version. */
static bool ring_has(const struct xt_view *v, uint32_t r, uint32_t site, uint64_t *version)
{
    for (size_t i = 0; i < v->nrings; i++) {
        if (v->rings[i].ring != r)
            continue;
        xt_ring *ring = NULL;
        assert_int_equal(xt_ring_decode(v->rings[i].data, v->rings[i].len, &ring), 0);
        if (version)
            *version = xt_ring_version(ring);
        bool has = xt_ring_has_site(ring, site) == 1;
        xt_ring_free(ring);
        return has;
    }
    fail_msg("view without ring %u", r);
    return false;
}

/* UP and heard from since this R2 loaded its state (last heartbeat known). */
static bool beating(const struct xt_view *v, uint32_t id)
{
    const struct xt_site *s = site_by_id(v, id);
    return s && s->state == XT_SITE_UP && s->last_hb_ns != 0;
}

/* For ms milliseconds, none of the sites ids[0..n-1] is FAILED. */
static void never_failed(xt_rpc_pool *p, const uint32_t *ids, int n, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    while (now_ms() < end) {
        struct xt_view v;
        assert_int_equal(get_full(p, &v), 0);
        for (int i = 0; i < n; i++)
            if (site_state(&v, ids[i]) == XT_SITE_FAILED)
                fail_msg("site %u failed spuriously", ids[i]);
        xt_view_free(&v);
        usleep(50000);
    }
}

static uint64_t ring_version(const struct xt_view *v, uint32_t r)
{
    uint64_t ver = 0;
    ring_has(v, r, 0, &ver);
    return ver;
}

static bool fs_in(const struct xt_view *v, const char *name)
{
    for (size_t i = 0; i < v->nfs; i++)
        if (!strcmp(v->fs[i].name, name))
            return true;
    return false;
}

/* Polls the full view of pool p until cond holds (v is the latest view). */
#define WAIT_VIEW(p, v, timeout_ms, cond)                                                 \
    do {                                                                                  \
        uint64_t dl_ = now_ms() + (timeout_ms);                                           \
        bool ok_ = false;                                                                 \
        for (;;) {                                                                        \
            xt_view_free(&(v));                                                           \
            if (get_full((p), &(v)) == 0 && (cond)) {                                     \
                ok_ = true;                                                               \
                break;                                                                    \
            }                                                                             \
            if (now_ms() > dl_)                                                           \
                break;                                                                    \
            usleep(20000);                                                                \
        }                                                                                 \
        if (!ok_)                                                                         \
            fail_msg("%s:%d: timed out waiting for %s", __FILE__, __LINE__, #cond);       \
    } while (0)

/* ---- malformed frames ------------------------------------------------------ */

/* Sends register_site with a raw type (any i32) in a hand-made Thrift frame
 * (binary protocol, framed) and returns the reply's status, or -EPROTO. */
static int raw_register(int port, int32_t type)
{
    unsigned char b[256];
    size_t n = 4;
#define PUT8(v) (b[n++] = (unsigned char)(v))
#define PUT16(v) (PUT8((v) >> 8), PUT8(v))
#define PUT32(v) (PUT16((uint32_t)(v) >> 16), PUT16((uint32_t)(v) & 0xffff))
    static const char name[] = "register_site", addr[] = "127.0.0.1:5";
    PUT8(0x80), PUT8(0x01), PUT8(0x00), PUT8(0x01); /* version 1, CALL */
    PUT32(sizeof name - 1);
    memcpy(b + n, name, sizeof name - 1);
    n += sizeof name - 1;
    PUT32(1);                  /* seqid */
    PUT8(12), PUT16(1);        /* args.req: struct, id 1 */
    PUT8(12), PUT16(1), PUT8(0); /* req.hdr: empty struct */
    PUT8(8), PUT16(2), PUT32(type); /* req.type: i32 */
    PUT8(11), PUT16(3), PUT32(sizeof addr - 1); /* req.address */
    memcpy(b + n, addr, sizeof addr - 1);
    n += sizeof addr - 1;
    PUT8(0);                   /* end of req */
    PUT8(0);                   /* end of args */
    uint32_t len = htonl((uint32_t)(n - 4));
    memcpy(b, &len, 4);
#undef PUT8
#undef PUT16
#undef PUT32
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(write(fd, b, n), (ssize_t)n);
    /* Reply: frame, message header, then RegisterResp with status (id 1,
     * i32) first. Read what comes and find the status field. */
    unsigned char r[512];
    size_t got = 0;
    ssize_t k;
    while (got < sizeof r && (k = read(fd, r + got, sizeof r - got)) > 0) {
        got += (size_t)k;
        uint32_t fl;
        memcpy(&fl, r, 4);
        if (got >= 4 && got >= 4 + (size_t)ntohl(fl))
            break;
    }
    close(fd);
    /* 4 frame + 4 version + 4 + name + 4 seqid + 3 (success: struct id 0)
     * + 3 (status: i32 id 1) + 4 value */
    size_t off = 4 + 4 + 4 + (sizeof name - 1) + 4 + 3;
    if (got < off + 7 || r[off] != 8 || r[off + 1] != 0 || r[off + 2] != 1)
        return -EPROTO;
    uint32_t st;
    memcpy(&st, r + off + 3, 4);
    return (int32_t)ntohl(st);
}

/* ---- embedded store ---------------------------------------------------------- */
#if !R2_TEST_ZK

static void test_embedded(void **state)
{
    (void)state;
    uint64_t t0 = now_ms();
    struct r2d r = { 0 };
    r2_start(&r, NULL, 0);
    struct mdsl a = { .pid = 0 }, b = { .pid = 0 };
    mdsl_start(&a, r.addr, 1);
    mdsl_start(&b, r.addr, 2);
    struct xt_view v = { 0 };

    /* Both registered UP and in ring 1. */
    WAIT_VIEW(r.pool, v, 15000, mdsl_site_id(&a) && mdsl_site_id(&b));
    uint32_t ida = mdsl_site_id(&a), idb = mdsl_site_id(&b);
    assert_int_not_equal(ida, idb);
    WAIT_VIEW(r.pool, v, 15000,
              site_state(&v, ida) == XT_SITE_UP && site_state(&v, idb) == XT_SITE_UP &&
                  ring_has(&v, XT_RING_MDSL, ida, NULL) && ring_has(&v, XT_RING_MDSL, idb, NULL));
    assert_string_equal(site_by_id(&v, ida)->addr, a.addr);
    assert_int_equal(site_by_id(&v, ida)->type, XT_SITE_MDSL);
    assert_int_equal(site_by_id(&v, ida)->capacity, 1ull << 30);
    assert_string_equal(v.store, "embedded");
    assert_string_equal(v.leader, r.addr);
    uint64_t ring1 = ring_version(&v, XT_RING_MDSL);

    /* SIGKILL a: TRANSIENT, then FAILED, still in ring 1 (same version):
     * ring 1 follows no failure. */
    uint64_t tk = now_ms();
    mdsl_kill(&a);
    WAIT_VIEW(r.pool, v, 5000, site_state(&v, ida) == XT_SITE_TRANSIENT);
    uint64_t t_transient = now_ms() - tk;
    WAIT_VIEW(r.pool, v, 5000, site_state(&v, ida) == XT_SITE_FAILED);
    uint64_t t_failed = now_ms() - tk;
    assert_true(ring_has(&v, XT_RING_MDSL, ida, NULL));
    assert_int_equal(ring_version(&v, XT_RING_MDSL), ring1);
    /* b stays (or, on a loaded machine whose heartbeats ran late, comes
     * back) UP while a fails. */
    WAIT_VIEW(r.pool, v, 5000, site_state(&v, idb) == XT_SITE_UP);
    print_message("killed mdsl: transient after %llu ms, failed after %llu ms\n",
                  (unsigned long long)t_transient, (unsigned long long)t_failed);

    /* Restart: same id (from its folder), UP, ring 1 unchanged. */
    mdsl_start(&a, r.addr, 1);
    WAIT_VIEW(r.pool, v, 10000,
              site_state(&v, ida) == XT_SITE_UP && ring_has(&v, XT_RING_MDSL, ida, NULL));
    assert_int_equal(mdsl_site_id(&a), ida);
    assert_int_equal(ring_version(&v, XT_RING_MDSL), ring1);

    /* Views as deltas. */
    bool has = true;
    struct xt_view d;
    assert_int_equal(xt_r2_get_view(r.pool, NULL, v.version, &has, &d), 0);
    assert_false(has);
    uint64_t before = v.version;

    /* File systems. */
    struct xt_fs_info fi;
    assert_int_equal(xt_r2_fs_create(r.pool, NULL, "alpha", "", "", &fi), 0);
    assert_true(fi.fsid > 0);
    assert_int_equal(fi.root_table, 1);
    assert_string_equal(fi.blob_backend, "local");
    assert_string_equal(fi.blob_path, "");
    assert_non_null(fi.root_bitmap);
    xt_free(fi.root_bitmap);
    assert_int_equal(xt_r2_get_view(r.pool, NULL, before, &has, &d), 0);
    assert_true(has);
    assert_int_equal(d.sections, XT_VIEW_FS);
    assert_true(fs_in(&d, "alpha"));
    xt_view_free(&d);
    assert_int_equal(xt_r2_fs_create(r.pool, NULL, "alpha", "", "", NULL), -EEXIST);
    const char *bad[] = { "", "a/b", "bad name", "..", ".", "caf\xc3\xa9", "x*",
                          "0123456789012345678901234567890123456789012345678901234567890123x" };
    for (size_t i = 0; i < XT_ARRAY_SIZE(bad); i++)
        assert_int_equal(xt_r2_fs_create(r.pool, NULL, bad[i], "", "", NULL), -EINVAL);
    assert_int_equal(xt_r2_fs_create(r.pool, NULL, "ok-name_1.x", "nosuch", "", NULL), -EINVAL);
    assert_int_equal(xt_r2_fs_create(r.pool, NULL, "beta", "mdsl", "/blobs/b", &fi), 0);
    assert_string_equal(fi.blob_backend, "mdsl");
    uint32_t beta_fsid = fi.fsid;
    xt_free(fi.root_bitmap);
    struct xt_fs_info *list = NULL;
    size_t nlist = 0;
    assert_int_equal(xt_r2_fs_list(r.pool, NULL, "", &list, &nlist), 0);
    assert_int_equal(nlist, 2);
    assert_string_equal(list[0].name, "alpha");
    assert_string_equal(list[1].name, "beta");
    xt_fs_info_free_array(list, nlist);
    assert_int_equal(xt_r2_fs_list(r.pool, NULL, "nosuch", &list, &nlist), -ENOENT);

    /* A client mounting alpha: drop refused unless forced. */
    uint32_t cid = 0;
    assert_int_equal(xt_r2_register(r.pool, NULL, XT_SITE_CLIENT, "client-x", 0, 0, "nosuch", NULL,
                                    &cid, NULL),
                     -ENOENT);
    struct r2_agent_opts ao = { .r2_addrs = r.addr, .type = XT_SITE_CLIENT,
                                .addr = "client-1", .fs_name = "alpha", .hb_interval_ms = 200 };
    r2_agent *client = NULL;
    assert_int_equal(r2_agent_start(&ao, &client), 0);
    assert_int_equal(r2_agent_wait_registered(client, 10000), 0);
    cid = r2_agent_site_id(client);
    assert_int_equal(xt_r2_fs_list(r.pool, NULL, "alpha", &list, &nlist), 0);
    assert_int_equal(nlist, 1);
    assert_int_equal(list[0].mounts, 1);
    xt_fs_info_free_array(list, nlist);
    assert_int_equal(xt_r2_fs_drop(r.pool, NULL, "alpha", false), -EBUSY);
    assert_int_equal(xt_r2_fs_drop(r.pool, NULL, "alpha", true), 0);
    assert_int_equal(xt_r2_fs_list(r.pool, NULL, "alpha", &list, &nlist), -ENOENT);
    assert_int_equal(xt_r2_fs_drop(r.pool, NULL, "alpha", true), -ENOENT);
    assert_int_equal(xt_r2_site_drain(r.pool, NULL, cid), -EINVAL);

    /* The agent's own view follows. */
    struct xt_view av;
    WAIT_VIEW(r.pool, v, 5000, true);
    uint64_t dl = now_ms() + 5000;
    for (;;) {
        assert_int_equal(r2_agent_view_copy(client, &av), 0);
        bool done = av.version == v.version;
        if (done) {
            assert_false(fs_in(&av, "alpha"));
            assert_true(fs_in(&av, "beta"));
            assert_non_null(site_by_id(&av, ida));
        }
        xt_view_free(&av);
        if (done)
            break;
        assert_true(now_ms() < dl);
        usleep(20000);
    }

    /* uuid ranges: disjoint, above the reserved range 0. */
    uint64_t lo[4], hi[4];
    uint32_t mds[3];
    for (int i = 0; i < 3; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "127.0.0.1:%d", 1 + i);
        struct xt_view rv;
        assert_int_equal(
            xt_r2_register(r.pool, NULL, XT_SITE_MDS, addr, 0, 0, NULL, NULL, &mds[i], &rv), 0);
        const struct xt_site *s = site_by_id(&rv, mds[i]);
        assert_non_null(s);
        lo[i] = s->uuid_lo;
        hi[i] = s->uuid_hi;
        assert_true(ring_has(&rv, XT_RING_MDS, mds[i], NULL));
        xt_view_free(&rv);
    }
    assert_int_equal(xt_r2_alloc_uuids(r.pool, NULL, mds[0], 3u << 20, &lo[3], &hi[3]), 0);
    assert_true(hi[3] - lo[3] >= (3u << 20));
    for (int i = 0; i < 4; i++) {
        assert_true(lo[i] >= (1u << 20) && lo[i] < hi[i]);
        for (int k = 0; k < i; k++)
            assert_true(hi[i] <= lo[k] || hi[k] <= lo[i]);
    }
    assert_int_equal(xt_r2_alloc_uuids(r.pool, NULL, ida, 10, &lo[0], &hi[0]), -EINVAL);
    assert_int_equal(xt_r2_alloc_uuids(r.pool, NULL, mds[1], 0, &lo[0], &hi[0]), -EINVAL);
    assert_int_equal(xt_r2_alloc_uuids(r.pool, NULL, 99999, 10, &lo[0], &hi[0]), -ENOENT);
    /* The fake MDS sites send no heartbeats: they fail and leave ring 0. */
    WAIT_VIEW(r.pool, v, 5000,
              site_state(&v, mds[0]) == XT_SITE_FAILED &&
                  site_state(&v, mds[2]) == XT_SITE_FAILED &&
                  !ring_has(&v, XT_RING_MDS, mds[1], NULL));

    /* Restart pom-r2 itself: nothing lost, no live site failed. */
    uint64_t version = v.version;
    r2_kill(&r);
    uint64_t tr = now_ms();
    r2_start(&r, NULL, 0);
    assert_int_equal(get_full(r.pool, &d), 0);
    /* R2's own site may re-register (a change), never lose anything. */
    assert_true(d.version >= version);
    assert_int_equal(d.nsites, v.nsites);
    assert_true(fs_in(&d, "beta") && !fs_in(&d, "alpha"));
    assert_true(ring_has(&d, XT_RING_MDSL, ida, NULL) && ring_has(&d, XT_RING_MDSL, idb, NULL));
    xt_view_free(&d);
    /* The live sites come back to it and, for more than two failure
     * periods, never fail. */
    WAIT_VIEW(r.pool, v, 5000, beating(&v, ida) && beating(&v, idb) && beating(&v, cid));
    print_message("pom-r2 restart: sites heartbeating again after %llu ms\n",
                  (unsigned long long)(now_ms() - tr));
    uint32_t live[3] = { ida, idb, cid };
    never_failed(r.pool, live, 3, 2000);
    assert_int_equal(get_full(r.pool, &d), 0);
    assert_true(ring_has(&d, XT_RING_MDSL, ida, NULL));
    xt_view_free(&d);
    assert_int_equal(xt_r2_fs_list(r.pool, NULL, "beta", &list, &nlist), 0);
    assert_int_equal(list[0].fsid, beta_fsid);
    xt_fs_info_free_array(list, nlist);

    /* MDS sites registered: ring 1 is frozen. Drain and remove of b (in
     * ring 1) are refused over RPC; nothing changes. */
    assert_int_equal(xt_r2_site_drain(r.pool, NULL, idb), -EOPNOTSUPP);
    assert_int_equal(xt_r2_site_remove(r.pool, NULL, idb), -EOPNOTSUPP);
    assert_int_equal(get_full(r.pool, &d), 0);
    assert_int_not_equal(site_state(&d, idb), XT_SITE_DRAINING);
    assert_true(ring_has(&d, XT_RING_MDSL, idb, NULL));
    assert_int_equal(ring_version(&d, XT_RING_MDSL), ring1);
    xt_view_free(&d);
    assert_int_equal(xt_r2_site_drain(r.pool, NULL, 99999), -ENOENT);

    /* A third MDSL now: UP, in no ring. Drain: DRAINING at once; it keeps
     * beating and stays so. */
    struct mdsl c = { .pid = 0 };
    mdsl_start(&c, r.addr, 3);
    WAIT_VIEW(r.pool, v, 15000,
              mdsl_site_id(&c) && site_state(&v, mdsl_site_id(&c)) == XT_SITE_UP);
    uint32_t idc = mdsl_site_id(&c);
    assert_false(ring_has(&v, XT_RING_MDSL, idc, NULL));
    assert_int_equal(ring_version(&v, XT_RING_MDSL), ring1);
    assert_int_equal(xt_r2_site_drain(r.pool, NULL, idc), 0);
    assert_int_equal(get_full(r.pool, &d), 0);
    assert_int_equal(site_state(&d, idc), XT_SITE_DRAINING);
    xt_view_free(&d);
    assert_int_equal(xt_r2_site_drain(r.pool, NULL, idc), 0); /* idempotent */
    usleep(1200 * 1000);
    assert_int_equal(get_full(r.pool, &d), 0);
    assert_int_equal(site_state(&d, idc), XT_SITE_DRAINING);
    xt_view_free(&d);

    /* Remove c: the record goes and a tombstone stays (docs/r2.md "Removing
     * a site"). Its agent, still running, learns -ENOENT, registers again
     * with its id and is refused: it never comes back on its own. */
    assert_int_equal(xt_r2_site_remove(r.pool, NULL, idc), 0);
    assert_int_equal(xt_r2_site_remove(r.pool, NULL, idc), -ENOENT);
    usleep(2000 * 1000); /* ten heartbeats of its agent */
    assert_int_equal(get_full(r.pool, &d), 0);
    assert_null(site_by_addr(&d, c.addr));
    assert_null(site_by_id(&d, idc));
    assert_int_equal(ring_version(&d, XT_RING_MDSL), ring1);
    xt_view_free(&d);
    for (int i = 0; i < 3; i++)
        assert_int_equal(xt_r2_site_remove(r.pool, NULL, mds[i]), 0);

    /* Bad arguments. */
    uint32_t id = 0;
    /* (Types outside 0..7 cannot even be sent through the C++ glue; a raw
     * frame carries them below.) */
    assert_int_equal(xt_r2_register(r.pool, NULL, 7, "127.0.0.1:5", 0, 0, NULL, NULL, &id, NULL),
                     -EINVAL);
    assert_int_equal(xt_r2_register(r.pool, NULL, 0, "127.0.0.1:5", 0, 0, NULL, NULL, &id, NULL),
                     -EINVAL);
    assert_int_equal(raw_register(r.port, 9), -EINVAL);
    assert_int_equal(raw_register(r.port, -5), -EINVAL);
    /* An R2 registers with a service address like any server... */
    assert_int_equal(xt_r2_register(r.pool, NULL, XT_SITE_R2, "nocolon", 0, 0, NULL, NULL, &id, NULL),
                     -EINVAL);
    /* ... and never joins a ring or mounts a file system. */
    assert_int_equal(xt_r2_register(r.pool, NULL, XT_SITE_R2, "127.0.0.1:5", 0, 0, "beta", NULL, &id,
                                    NULL),
                     -EINVAL);
    const char *bad_addr[] = { "", "nocolon", "127.0.0.1:0", "127.0.0.1:70000", "a b:1",
                               "127.0.0.1:-1" };
    for (size_t i = 0; i < XT_ARRAY_SIZE(bad_addr); i++)
        assert_int_equal(xt_r2_register(r.pool, NULL, XT_SITE_MDSL, bad_addr[i], 0, 0, NULL, NULL,
                                        &id, NULL),
                         -EINVAL);
    assert_int_equal(xt_r2_register(r.pool, NULL, XT_SITE_MDSL, "127.0.0.1:5", 0, 0, "beta", NULL,
                                    &id, NULL),
                     -EINVAL); /* fs names are for clients */
    struct xt_fs_counter c0 = { .fsid = 0, .files = 1 };
    assert_int_equal(xt_r2_heartbeat(r.pool, NULL, ida, 0, 0, &c0, 1, &has, &d), -EINVAL);
    assert_int_equal(xt_r2_heartbeat(r.pool, NULL, 99999, 0, 0, NULL, 0, &has, &d), -ENOENT);
    assert_int_equal(xt_r2_heartbeat(r.pool, NULL, ida, 0, -1.0, NULL, 0, &has, &d), -EINVAL);
    assert_int_equal(xt_r2_site_remove(r.pool, NULL, 0), -EINVAL);

    /* The ring-1 heartbeat fields cross the wire, are kept, and come back
     * in the view's ring-1 state; negative values are refused. */
    uint32_t r1id = 0;
    assert_int_equal(xt_r2_register(r.pool, NULL, XT_SITE_MDSL, "127.0.0.1:7", 0, 0, NULL, NULL,
                                    &r1id, NULL),
                     0);
    struct xt_r2_hb_ring1 f1 = { .has_counts = true, .misplaced = 5, .prepared = 2 };
    assert_int_equal(xt_r2_heartbeat_ex(r.pool, NULL, r1id, 0, 0, NULL, 0, &f1, NULL, &has, &d, NULL), 0);
    xt_view_free(&d);
    assert_int_equal(get_full(r.pool, &d), 0);
    assert_non_null(d.ring1);
    bool seen = false;
    for (size_t i = 0; i < d.ring1->nsites; i++)
        if (d.ring1->sites[i].id == r1id) {
            seen = true;
            assert_true(d.ring1->sites[i].reports && d.ring1->sites[i].has_counts);
            assert_int_equal(d.ring1->sites[i].misplaced, 5);
            assert_int_equal(d.ring1->sites[i].prepared, 2);
        }
    assert_true(seen);
    xt_view_free(&d);
    f1.misplaced = UINT64_MAX;
    assert_int_equal(xt_r2_heartbeat_ex(r.pool, NULL, r1id, 0, 0, NULL, 0, &f1, NULL, &has, &d, NULL),
                     -EINVAL);
    assert_int_equal(xt_r2_site_remove(r.pool, NULL, r1id), 0);

    /* Malformed frames: R2 stays up and answers. */
    assert_int_equal(pom_send_garbage(r.port, 7, 200, "register_site"), 0);
    assert_true(pom_proc_alive(r.pid));
    assert_int_equal(get_full(r.pool, &d), 0);
    xt_view_free(&d);
    assert_int_equal(xt_r2_fs_create(r.pool, NULL, "after-garbage", NULL, NULL, NULL), 0);

    /* Latency: heartbeats of a current site (no store I/O) and fs creates
     * (one synced store transaction each). */
    assert_int_equal(get_full(r.pool, &d), 0);
    uint64_t cur = d.version;
    xt_view_free(&d);
    uint64_t tb = xt_mono_ns();
    for (int i = 0; i < 2000; i++) {
        assert_int_equal(xt_r2_heartbeat(r.pool, NULL, cid, cur, 0, NULL, 0, &has, &d), 0);
        if (has) {
            cur = d.version;
            xt_view_free(&d);
        }
    }
    uint64_t hb_ns = (xt_mono_ns() - tb) / 2000;
    tb = xt_mono_ns();
    for (int i = 0; i < 20; i++) {
        char name[32];
        snprintf(name, sizeof name, "lat%d", i);
        assert_int_equal(xt_r2_fs_create(r.pool, NULL, name, NULL, NULL, NULL), 0);
    }
    print_message("latency: heartbeat %.1f us, fs create %.2f ms (embedded, synced)\n",
                  hb_ns / 1000.0, (xt_mono_ns() - tb) / 20 / 1e6);

    /* A second pom-r2 on the same folder: exit 1, clear message (after
     * waiting up to 10 s for the lock: xt_ldb.h). */
    struct r2d r2b = { 0 };
    r2b.port = pom_free_port();
    char listen[64], data[300];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", r2b.port);
    snprintf(data, sizeof data, "%s/r2data", g_base);
    snprintf(r2b.log, sizeof r2b.log, "%s/r2-second.log", g_base);
    char *argv[] = { (char *)POM_R2_BIN, (char *)"--data", data, (char *)"--listen", listen,
                     NULL };
    pid_t p2 = pom_proc_spawn(argv, r2b.log);
    assert_true(p2 > 0);
    int status = 0;
    assert_int_equal(pom_proc_wait(p2, 30000, &status), 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);

    r2_agent_stop(client);
    xt_view_free(&v);
    pom_proc_stop(a.pid, 5000);
    pom_proc_stop(b.pid, 5000);
    pom_proc_stop(c.pid, 5000);
    pom_proc_stop(r.pid, 5000);
    xt_rpc_pool_free(r.pool);
    print_message("embedded: %llu ms\n", (unsigned long long)(now_ms() - t0));
}

#endif /* !R2_TEST_ZK */

/* ---- ZooKeeper --------------------------------------------------------------- */
#if R2_TEST_ZK

#define NR2 3

/* The leader all live R2s name, or -1 when they disagree or none leads. */
static int common_leader(struct r2d *r)
{
    int leader = -2;
    for (int i = 0; i < NR2; i++) {
        if (r[i].pid <= 0)
            continue;
        struct xt_view v;
        if (get_full(r[i].pool, &v) < 0)
            return -1;
        int who = -1;
        for (int k = 0; k < NR2; k++)
            if (!strcmp(v.leader, r[k].addr) && r[k].pid > 0)
                who = k;
        xt_view_free(&v);
        if (who < 0 || (leader >= 0 && who != leader))
            return -1;
        leader = who;
    }
    return leader < 0 ? -1 : leader;
}

static int wait_leader(struct r2d *r, int timeout_ms)
{
    uint64_t dl = now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        int l = common_leader(r);
        if (l >= 0)
            return l;
        if (now_ms() > dl)
            fail_msg("no common leader within %d ms", timeout_ms);
        usleep(50000);
    }
}

static void test_zk(void **state)
{
    (void)state;
    uint64_t t0 = now_ms();
    pom_zk zk;
    assert_int_equal(pom_zk_start(&zk), 0);
    struct r2d r[NR2];
    memset(r, 0, sizeof r);
    char addrs[256] = "";
    for (int i = 0; i < NR2; i++) {
        r2_start(&r[i], zk.hosts, i);
        snprintf(addrs + strlen(addrs), sizeof addrs - strlen(addrs), "%s%s", i ? "," : "",
                 r[i].addr);
    }
    /* Exactly one leader: everyone names it; the others refuse changes. */
    int l = wait_leader(r, 20000);
    for (int i = 0; i < NR2; i++)
        if (i != l) {
            assert_int_equal(xt_r2_fs_create(r[i].pool, NULL, "nope", NULL, NULL, NULL),
                             -EREMOTE);
            struct xt_fs_info *fl = NULL;
            size_t fn = 0;
            assert_int_equal(xt_r2_fs_list(r[i].pool, NULL, "", &fl, &fn), -EREMOTE);
        }
    assert_int_equal(xt_r2_fs_create(r[l].pool, NULL, "zfs1", NULL, NULL, NULL), 0);
    assert_int_equal(xt_r2_fs_create(r[l].pool, NULL, "zfs2", NULL, NULL, NULL), 0);

    struct mdsl a = { .pid = 0 }, b = { .pid = 0 };
    mdsl_start(&a, addrs, 1);
    mdsl_start(&b, addrs, 2);
    struct xt_view v = { 0 };
    WAIT_VIEW(r[l].pool, v, 15000, mdsl_site_id(&a) && mdsl_site_id(&b));
    uint32_t ida = mdsl_site_id(&a), idb = mdsl_site_id(&b);
    WAIT_VIEW(r[l].pool, v, 15000,
              site_state(&v, ida) == XT_SITE_UP && site_state(&v, idb) == XT_SITE_UP &&
                  ring_has(&v, XT_RING_MDSL, ida, NULL) && ring_has(&v, XT_RING_MDSL, idb, NULL));
    assert_string_equal(v.store, "zookeeper");
    /* A follower's view (read from ZooKeeper) has the same sites and fs. */
    struct xt_view fv;
    assert_int_equal(get_full(r[(l + 1) % NR2].pool, &fv), 0);
    assert_non_null(site_by_id(&fv, ida));
    assert_true(fs_in(&fv, "zfs1"));
    assert_string_equal(fv.leader, r[l].addr);
    xt_view_free(&fv);

    /* SIGKILL the leader: a new one within the session timeout, all kept. */
    uint64_t tk = now_ms();
    r2_kill(&r[l]);
    int l2 = wait_leader(r, SESSION_MS + 10000);
    uint64_t failover = now_ms() - tk;
    assert_int_not_equal(l2, l);
    WAIT_VIEW(r[l2].pool, v, 10000, fs_in(&v, "zfs1"));
    assert_true(fs_in(&v, "zfs2"));
    assert_non_null(site_by_id(&v, ida));
    assert_non_null(site_by_id(&v, idb));
    struct xt_fs_info *fl = NULL;
    size_t fn = 0;
    uint64_t dl = now_ms() + 10000;
    int rc;
    while ((rc = xt_r2_fs_list(r[l2].pool, NULL, "", &fl, &fn)) != 0 && now_ms() < dl)
        usleep(50000);
    assert_int_equal(rc, 0);
    assert_int_equal(fn, 2);
    xt_fs_info_free_array(fl, fn);
    print_message("leader failover: %llu ms (session timeout %d ms)\n",
                  (unsigned long long)failover, SESSION_MS);
    assert_true(failover < SESSION_MS + 4000);
    /* The sites found the new leader; none failed. */
    uint32_t live[2] = { ida, idb };
    WAIT_VIEW(r[l2].pool, v, 10000, beating(&v, ida) && beating(&v, idb));
    never_failed(r[l2].pool, live, 2, 1500);

    /* Malformed frames to the new leader and a follower. */
    assert_int_equal(pom_send_garbage(r[l2].port, 11, 60, "register_site"), 0);
    assert_int_equal(pom_send_garbage(r[3 - l - l2].port, 12, 60, "register_site"), 0);
    assert_int_equal(raw_register(r[3 - l - l2].port, 9), -EINVAL);
    assert_true(pom_proc_alive(r[l2].pid) && pom_proc_alive(r[3 - l - l2].pid));

    /* A killed site fails under the new leader, ring 1 unchanged; it comes
     * back UP. */
    uint64_t ring1 = ring_version(&v, XT_RING_MDSL);
    assert_non_null(site_by_addr(&v, a.addr));
    mdsl_kill(&a);
    WAIT_VIEW(r[l2].pool, v, 10000, site_state(&v, ida) == XT_SITE_FAILED);
    assert_true(ring_has(&v, XT_RING_MDSL, ida, NULL));
    assert_int_equal(ring_version(&v, XT_RING_MDSL), ring1);
    mdsl_start(&a, addrs, 1);
    WAIT_VIEW(r[l2].pool, v, 10000,
              site_state(&v, ida) == XT_SITE_UP && ring_has(&v, XT_RING_MDSL, ida, NULL));
    assert_int_equal(mdsl_site_id(&a), ida);
    assert_int_equal(ring_version(&v, XT_RING_MDSL), ring1);

    /* ZooKeeper frozen for 20 s: calls fail with a clear error, in bounded
     * time; R2s stay up; everything works afterwards. */
    assert_int_equal(pom_zk_pause(&zk), 0);
    uint64_t tp = now_ms();
    int calls = 0, errors = 0;
    uint64_t longest = 0;
    while (now_ms() - tp < 20000) {
        for (int i = 0; i < NR2; i++) {
            if (r[i].pid <= 0)
                continue;
            char name[32];
            snprintf(name, sizeof name, "frozen%d", calls);
            uint64_t tc = now_ms();
            rc = xt_r2_fs_create(r[i].pool, NULL, name, NULL, NULL, NULL);
            uint64_t took = now_ms() - tc;
            longest = XT_MAX(longest, took);
            calls++;
            if (rc != 0) {
                errors++;
                assert_true(rc == -EREMOTE || rc == -ENOTCONN || rc == -ETIMEDOUT ||
                            rc == -EAGAIN);
            }
            if (now_ms() - tp >= 20000)
                break;
        }
        usleep(200000);
    }
    assert_int_equal(pom_zk_resume(&zk), 0);
    print_message("ZooKeeper frozen 20 s: %d calls, %d errors, longest %llu ms\n", calls, errors,
                  (unsigned long long)longest);
    assert_true(errors >= calls - 2); /* at most the calls just after the freeze */
    assert_true(longest < 12000);
    for (int i = 0; i < NR2; i++)
        if (r[i].pid > 0)
            assert_true(pom_proc_alive(r[i].pid));
    int l3 = wait_leader(r, 30000);
    dl = now_ms() + 20000;
    while ((rc = xt_r2_fs_create(r[l3].pool, NULL, "after", NULL, NULL, NULL)) != 0 &&
           now_ms() < dl) {
        usleep(100000);
        l3 = wait_leader(r, 30000);
    }
    assert_int_equal(rc, 0);
    print_message("after the freeze: leader %s answers %llu ms after resume\n", r[l3].addr,
                  (unsigned long long)(now_ms() - tp - 20000));
    WAIT_VIEW(r[l3].pool, v, 15000,
              fs_in(&v, "zfs1") && fs_in(&v, "zfs2") && fs_in(&v, "after") &&
                  beating(&v, ida) && beating(&v, idb) &&
                  ring_has(&v, XT_RING_MDSL, ida, NULL) && ring_has(&v, XT_RING_MDSL, idb, NULL));
    print_message("after the freeze: sites heartbeating %llu ms after resume\n",
                  (unsigned long long)(now_ms() - tp - 20000));
    never_failed(r[l3].pool, live, 2, 1500);

    xt_view_free(&v);
    pom_proc_stop(a.pid, 5000);
    pom_proc_stop(b.pid, 5000);
    for (int i = 0; i < NR2; i++) {
        if (r[i].pid > 0)
            pom_proc_stop(r[i].pid, 5000);
        xt_rpc_pool_free(r[i].pool);
    }
    pom_zk_destroy(&zk);
    print_message("zookeeper: %llu ms\n", (unsigned long long)(now_ms() - t0));
}

#endif /* R2_TEST_ZK */

static int setup(void **state)
{
    (void)state;
    return pom_tmpdir("r2d", g_base, sizeof g_base);
}

static int teardown(void **state)
{
    (void)state;
    if (!getenv("POM_KEEP"))
        pom_rm_rf(g_base);
    return 0;
}

int main(void)
{
    xt_log_set_level(XT_LOG_ERROR);
    if (R2_TEST_ZK && !pom_zk_available()) {
        printf("skipped: java or the ZooKeeper jar is not installed\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
#if R2_TEST_ZK
        cmocka_unit_test_setup_teardown(test_zk, setup, teardown),
#else
        cmocka_unit_test_setup_teardown(test_embedded, setup, teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
