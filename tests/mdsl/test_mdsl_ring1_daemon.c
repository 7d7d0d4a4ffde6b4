/*
 * test_mdsl_ring1_daemon.c -- pom-mdsl --r2 reports its ring-1 counts to a
 * real pom-r2 (docs/mdsl-scale.md "Completion"), end to end over Thrift.
 * The test itself plays the one MDS of ring 0 (it registers as an MDS and
 * heartbeats the acks and walks pom-mds will send), so R2 runs a ring-1
 * change for real:
 *   - outside a change the MDSL sends misplaced 0 and its undecided
 *     prepares (a prepare shows as 1, then 0 after its commit);
 *   - mdsl2 registers: PREPARE, MOVING, walk; mdsl1 (losing: it gives up
 *     its share) reports exactly the slices the new ring places on mdsl2
 *     (fsid 0 excluded), and R2 stays in MOVING although the MDS walked;
 *     (`pomctl ring show 1 --json` shows the count);
 *   - tombstones for those slices (what the MDS's moves write): mdsl1
 *     reports 0, R2 reaches DONE then STABLE with both MDSL in ring 1;
 *   - space back (docs/mdsl-scale.md "Space back"): mdsl1 drops the folders of the one-slice
 *     tables that moved whole and sweeps the rest at 0.6, so its segment
 *     bytes fall by about the moved share; every slice it kept still loads
 *     (its SIGHUP stats line counts the dropped folders);
 *   - the same with mdsl1 killed (SIGKILL, --crash-point mdsl.sweep) after the
 *     change ended and before its sweep: restarted, it sweeps (the mark).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pom_proc.h"
#include "xt_common.h"
#include "xt_ring.h"
#include "xt_rpc.h"
#include "xt_rpc_mdsl.h"
#include "xt_rpc_r2.h"

#define HB_MS "100"

struct proc {
    char dir[300], log[300], addr[64];
    int port;
    pid_t pid;
    xt_rpc_pool *pool;
};

static char g_base[256];

static xt_rpc_pool *new_pool(int port)
{
    struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = port,
                                   .call_timeout_ms = 15000, .connect_timeout_ms = 2000,
                                   .backoff_min_ms = 10, .backoff_max_ms = 100 };
    xt_rpc_pool *p = NULL;
    assert_int_equal(xt_rpc_pool_new(&po, &p), 0);
    return p;
}

static void start(struct proc *p, char **argv)
{
    p->pid = pom_proc_spawn(argv, p->log);
    assert_true(p->pid > 0);
    assert_int_equal(pom_proc_wait_port("127.0.0.1", p->port, 30000), 0);
    p->pool = new_pool(p->port);
}

static void init_proc(struct proc *p, const char *name)
{
    snprintf(p->dir, sizeof p->dir, "%s/%s", g_base, name);
    snprintf(p->log, sizeof p->log, "%s/%s.log", g_base, name);
    assert_int_equal(mkdir(p->dir, 0755), 0);
    p->port = pom_free_port();
    snprintf(p->addr, sizeof p->addr, "127.0.0.1:%d", p->port);
}

static void r2_start(struct proc *r)
{
    init_proc(r, "r2");
    char *argv[] = { (char *)POM_R2_BIN, (char *)"--data", r->dir, (char *)"--listen", r->addr,
                     (char *)"--hb-interval-ms", (char *)HB_MS, (char *)"--fail-after",
                     (char *)"50", (char *)"--verbose", NULL };
    start(r, argv);
}

/* Starts pom-mdsl on m's folder and port (a restart reuses both). */
/* crash_point: armed with --crash-point (NULL: none). */
static void mdsl_spawn(struct proc *m, const char *r2, const char *crash_point)
{
    char *argv[] = { (char *)POM_MDSL_BIN, (char *)"--dir", m->dir, (char *)"--listen", m->addr,
                     (char *)"--r2", (char *)r2, (char *)"--hb-interval-ms", (char *)HB_MS,
                     (char *)"--threads", (char *)"2",
                     crash_point ? (char *)"--crash-point" : NULL, (char *)crash_point, NULL };
    start(m, argv);
}

static void mdsl_start(struct proc *m, const char *name, const char *r2, const char *crash_point)
{
    init_proc(m, name);
    mdsl_spawn(m, r2, crash_point);
}

/* A clean exit on SIGTERM (under the sanitizers: no leak, no report) and
 * no sanitizer line in the log. */
static void stop(struct proc *p)
{
    if (p->pid) {
        int status = 0;
        assert_int_equal(pom_proc_kill(p->pid, SIGTERM), 0);
        assert_int_equal(pom_proc_wait(p->pid, 20000, &status), 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("%s exited with status %#x (see %s)", p->dir, status, p->log);
    }
    p->pid = 0;
    FILE *f = fopen(p->log, "r");
    assert_non_null(f);
    char line[1024];
    while (fgets(line, sizeof line, f))
        if (strstr(line, "Sanitizer") || strstr(line, "runtime error"))
            fail_msg("%s: %s", p->log, line);
    fclose(f);
    xt_rpc_pool_free(p->pool);
    p->pool = NULL;
}

static void get_view(struct proc *r2, struct xt_view *v)
{
    bool has = false;
    assert_int_equal(xt_r2_get_view(r2->pool, NULL, 0, &has, v), 0);
    assert_true(has);
    assert_non_null(v->ring1);
}

/* Ring r of the view, decoded (caller frees); NULL when absent. */
static xt_ring *ring_of(const struct xt_view *v, uint32_t r)
{
    for (size_t i = 0; i < v->nrings; i++) {
        if (v->rings[i].ring != r)
            continue;
        xt_ring *ring = NULL;
        assert_int_equal(xt_ring_decode(v->rings[i].data, v->rings[i].len, &ring), 0);
        return ring;
    }
    return NULL;
}

static uint64_t ring_version(const struct xt_view *v, uint32_t r)
{
    xt_ring *ring = ring_of(v, r);
    uint64_t ver = ring ? xt_ring_version(ring) : 0;
    xt_ring_free(ring);
    return ver;
}

static uint32_t site_id(const struct xt_view *v, const char *addr)
{
    for (size_t i = 0; i < v->nsites; i++)
        if (!strcmp(v->sites[i].addr, addr))
            return v->sites[i].id;
    return 0;
}

static uint32_t placed(const xt_ring *r, uint32_t fsid, uint64_t table, uint32_t slice)
{
    uint32_t site = 0;
    assert_int_equal(xt_ring_lookup(r, xt_ring_key(fsid, table, slice), &site), 0);
    return site;
}

static const struct xt_ring1_site *r1_site(const struct xt_view *v, uint32_t id)
{
    for (size_t i = 0; i < v->ring1->nsites; i++)
        if (v->ring1->sites[i].id == id)
            return &v->ring1->sites[i];
    return NULL;
}

/* The fake MDS: what pom-mds would heartbeat given the view v (the seq
 * installed; a walk that found nothing, 500 ms after `walk` was set).
 * Why not at once: R2 takes a losing MDSL's 0 from any heartbeat later than
 * the walks, and an MDSL that has not yet received the MOVING view sends
 * the 0 of the previous state; a walk reads every losing MDSL's listing, so
 * it ends after that MDSL's next heartbeats in practice, not by protocol
 * (docs/mdsl-scale.md "Completion": counted_seq). */
static void mds_beat(struct proc *r2, uint32_t mds, const struct xt_view *v)
{
    static uint64_t walk_seq, walk_t0;
    struct xt_r2_hb_ring1 r1 = { .has_acked = true, .acked = v->ring1->seq };
    if (v->ring1->walk && walk_seq != v->ring1->seq) {
        walk_seq = v->ring1->seq;
        walk_t0 = xt_mono_ns();
    }
    if (v->ring1->walk && xt_mono_ns() - walk_t0 >= UINT64_C(500000000)) {
        r1.has_walked = true;
        r1.walked_v = ring_version(v, XT_RING_MDSL);
        r1.walked_w = ring_version(v, XT_RING_MDS);
    }
    bool has = false;
    struct xt_view d;
    memset(&d, 0, sizeof d);
    assert_int_equal(xt_r2_heartbeat_ex(r2->pool, NULL, mds, 0, 0, NULL, 0, &r1, NULL, &has, &d, NULL), 0);
    xt_view_free(&d);
}

/* `pomctl --r2 R2 ARGS --json` into out without spaces and newlines (to
 * compare without layout); it must exit 0. */
static void pomctl_json(struct proc *r2, const char *args, char *out, size_t cap)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "%s --r2 %s %s --json 2>&1", POM_CTL_BIN, r2->addr, args);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t len = 0, k;
    char buf[1024];
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < k && len + 1 < cap; i++)
            if (buf[i] != ' ' && buf[i] != '\n')
                out[len++] = buf[i];
    out[len] = 0;
    int st = pclose(f);
    if (st != 0)
        fail_msg("pomctl %s: status %#x: %s", args, st, out);
}

/* `pomctl ring show 1 --json` names site id with `misplaced` n. */
static void pomctl_shows(struct proc *r2, uint32_t id, uint64_t n)
{
    char out[16384], want_id[64], want_n[64];
    pomctl_json(r2, "ring show 1", out, sizeof out);
    snprintf(want_id, sizeof want_id, "\"id\":%u,", id);
    snprintf(want_n, sizeof want_n, "\"misplaced\":%llu,", (unsigned long long)n);
    const char *at = strstr(out, "\"ring1_change\":");
    at = at ? strstr(at, want_id) : NULL;
    if (!at || !strstr(at, want_n) || (strchr(at, '}') && strstr(at, want_n) > strchr(at, '}')))
        fail_msg("pomctl ring show 1 --json: no %s ... %s in %s", want_id, want_n, out);
}

typedef bool (*cond_fn)(const struct xt_view *v, const void *arg);

/* Beats as the MDS every 50 ms until cond holds on R2's view (20 s at
 * most); *v is that view (caller frees). */
static void beat_until(struct proc *r2, uint32_t mds, cond_fn cond, const void *arg,
                       struct xt_view *v, const char *what)
{
    for (int i = 0; i < 400; i++) {
        get_view(r2, v);
        if (cond(v, arg))
            return;
        if (mds)
            mds_beat(r2, mds, v);
        if (i == 399) {
            fprintf(stderr, "phase %d seq %llu walk %d; sites:\n", v->ring1->phase,
                    (unsigned long long)v->ring1->seq, v->ring1->walk);
            for (size_t k = 0; k < v->ring1->nsites; k++) {
                const struct xt_ring1_site *q = &v->ring1->sites[k];
                fprintf(stderr, "  %u role %d losing %d reports %d counts %d misplaced %llu "
                        "prepared %llu\n", q->id, q->role, q->losing, q->reports,
                        q->has_counts, (unsigned long long)q->misplaced,
                        (unsigned long long)q->prepared);
            }
        }
        xt_view_free(v);
        usleep(50000);
    }
    fail_msg("timed out waiting for %s", what);
}

struct counts {
    uint32_t id;
    uint64_t misplaced, prepared;
    bool losing;
};

static bool counts_are(const struct xt_view *v, const void *arg)
{
    const struct counts *c = arg;
    const struct xt_ring1_site *s = r1_site(v, c->id);
    return s && s->reports && s->has_counts && s->misplaced == c->misplaced &&
           s->prepared == c->prepared && s->losing == c->losing;
}

static bool registered(const struct xt_view *v, const void *arg)
{
    uint32_t id = site_id(v, arg);
    xt_ring *r1 = ring_of(v, XT_RING_MDSL);
    bool in = id && r1 && xt_ring_has_site(r1, id) == 1;
    xt_ring_free(r1);
    return in;
}

static bool in_ring0(const struct xt_view *v, const void *arg)
{
    xt_ring *r0 = ring_of(v, XT_RING_MDS);
    bool in = r0 && xt_ring_has_site(r0, *(const uint32_t *)arg) == 1;
    xt_ring_free(r0);
    return in;
}

static bool walking(const struct xt_view *v, const void *arg)
{
    (void)arg;
    return v->ring1->phase == XT_RING1_MOVING && v->ring1->walk;
}

static bool stable_with(const struct xt_view *v, const void *arg)
{
    const uint32_t *ids = arg;
    xt_ring *r1 = ring_of(v, XT_RING_MDSL);
    bool ok = v->ring1->phase == XT_RING1_STABLE && r1 && xt_ring_has_site(r1, ids[0]) == 1 &&
              xt_ring_has_site(r1, ids[1]) == 1;
    xt_ring_free(r1);
    return ok;
}

enum { NTABLES = 20, NSLICES = 100, NDECISIONS = 16, NSMALL = 60, IMG = 2048 };

/* Every fsid-1 slice the test stores at mdsl1: NTABLES tables of NSLICES
 * slices, table 1000's one, and NSMALL one-slice tables (2001...). */
#define NSTORED (NTABLES * NSLICES + 1 + NSMALL)
static void stored(size_t i, uint64_t *table, uint32_t *slice)
{
    if (i < NTABLES * NSLICES) {
        *table = 1 + i / NSLICES;
        *slice = (uint32_t)(i % NSLICES);
    } else {
        *table = i == NTABLES * NSLICES ? 1000 : 2001 + (i - NTABLES * NSLICES - 1);
        *slice = 0;
    }
}

static uint64_t seg_bytes(struct proc *m, uint64_t *tables)
{
    struct xt_store_stat st;
    memset(&st, 0, sizeof st);
    assert_int_equal(xt_mdsl_stat(m->pool, NULL, &st), 0);
    xt_free(st.prepared);
    if (tables)
        *tables = st.tables;
    return st.bytes;
}

/* The value of `key` in the last "stats:" line of the log, or -1. */
static long long log_stat(const char *log, const char *key)
{
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[2048];
    long long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, " stats: ");
        for (at = at ? strstr(at, key) : NULL; at; at = strstr(at + 1, key))
            if (at[-1] == ' ' && at[kl] == ' ')
                v = atoll(at + kl + 1);
    }
    fclose(f);
    return v;
}

/* Whether the file holds `what`. */
static bool log_has(const char *log, const char *what)
{
    FILE *f = fopen(log, "r");
    assert_non_null(f);
    char line[2048];
    bool has = false;
    while (!has && fgets(line, sizeof line, f))
        has = strstr(line, what) != NULL;
    fclose(f);
    return has;
}

/* The join, its counts and its space back. kill_before_sweep: mdsl1 runs
 * with --crash-point mdsl.sweep, so it SIGKILLs itself once the change is past
 * MOVING, after its drop pass and before the sweep; it is restarted on the
 * same folder and port and must sweep then (the sweep-owed mark). */
static void join_and_sweep(bool kill_before_sweep)
{
    struct proc r2 = { 0 }, m1 = { 0 }, m2 = { 0 };
    struct xt_view v;
    r2_start(&r2);
    mdsl_start(&m1, "mdsl1", r2.addr, kill_before_sweep ? "mdsl.sweep" : NULL);
    beat_until(&r2, 0, registered, m1.addr, &v, "mdsl1 in ring 1");
    uint32_t id1 = site_id(&v, m1.addr);
    xt_view_free(&v);

    /* The MDS of ring 0 (this test). */
    uint32_t mds = 0;
    assert_int_equal(xt_r2_register(r2.pool, NULL, XT_SITE_MDS, "127.0.0.1:9", 0, 0, NULL, NULL,
                                    &mds, NULL),
                     0);
    beat_until(&r2, mds, in_ring0, &mds, &v, "the MDS in ring 0");
    xt_view_free(&v);

    /* Outside a change: 0 misplaced, and the undecided prepares. */
    struct counts c = { .id = id1 };
    beat_until(&r2, mds, counts_are, &c, &v, "mdsl1's first counts");
    xt_view_free(&v);
    uint8_t data[32] = { 1, 2, 3 };
    struct xt_store_rec one = { .type = XT_STORE_IMAGE, .id = { .fsid = 1, .slice = 0, .table = 1000 },
                                .version = 1, .data = data, .len = sizeof data };
    assert_int_equal(xt_mdsl_prepare(m1.pool, NULL, 1, &one, 1), 0);
    c.prepared = 1;
    beat_until(&r2, mds, counts_are, &c, &v, "prepared 1");
    xt_view_free(&v);
    assert_int_equal(xt_mdsl_commit(m1.pool, NULL, 1), 0);
    c.prepared = 0;
    beat_until(&r2, mds, counts_are, &c, &v, "prepared 0");
    xt_view_free(&v);

    /* What mdsl1 holds: ring 1 is {mdsl1}, so every slice is there;
     * decision records too. */
    static struct xt_store_rec recs[NSLICES];
    static uint8_t img[IMG];
    for (size_t i = 0; i < IMG; i++)
        img[i] = (uint8_t)(i * 7 + 1);
    uint64_t txid = 10;
    for (uint64_t t = 1; t <= NTABLES; t++) {
        for (uint32_t s = 0; s < NSLICES; s++)
            recs[s] = (struct xt_store_rec){ .type = XT_STORE_IMAGE, .id = { .fsid = 1, .slice = s, .table = t }, .version = 3, .data = img,
                                             .len = IMG };
        assert_int_equal(xt_mdsl_prepare(m1.pool, NULL, txid, recs, NSLICES), 0);
        assert_int_equal(xt_mdsl_commit(m1.pool, NULL, txid++), 0);
    }
    for (uint64_t t = 2001; t < 2001 + NSMALL; t++) { /* small tables: one slice */
        recs[0] = (struct xt_store_rec){ .type = XT_STORE_IMAGE, .id = { .fsid = 1, .slice = 0, .table = t }, .version = 3, .data = img, .len = IMG };
        assert_int_equal(xt_mdsl_prepare(m1.pool, NULL, txid, recs, 1), 0);
        assert_int_equal(xt_mdsl_commit(m1.pool, NULL, txid++), 0);
    }
    for (uint32_t s = 0; s < NDECISIONS; s++)
        recs[s] = (struct xt_store_rec){ .type = XT_STORE_IMAGE, .id = { .fsid = 0, .slice = s + 1, .table = 1 }, .version = 5, .data = data,
                                         .len = 8 };
    assert_int_equal(xt_mdsl_prepare(m1.pool, NULL, txid, recs, NDECISIONS), 0);
    assert_int_equal(xt_mdsl_commit(m1.pool, NULL, txid++), 0);

    uint64_t tables0 = 0, bytes0 = seg_bytes(&m1, &tables0);

    /* mdsl2 joins: R2 runs the change while the MDS acks. */
    mdsl_start(&m2, "mdsl2", r2.addr, NULL);
    beat_until(&r2, mds, walking, NULL, &v, "MOVING with walk");
    uint32_t id2 = site_id(&v, m2.addr);
    xt_ring *cur = ring_of(&v, XT_RING_MDSL);
    assert_non_null(cur);
    assert_int_equal(xt_ring_has_site(cur, id2), 1);
    xt_view_free(&v);
    /* Expected: the slices the new ring places on mdsl2 (every fsid-1
     * slice stored, table 1000's included); fsid 0 never counts, even the
     * records the ring would place on mdsl2. */
    uint64_t want = 0, decisions_away = 0, whole = 0;
    for (size_t i = 0; i < NSTORED; i++) {
        uint64_t t;
        uint32_t s;
        stored(i, &t, &s);
        bool away = placed(cur, 1, t, s) != id1;
        want += away;
        whole += away && (t == 1000 || t > 2000); /* a one-slice table moved whole */
    }
    for (uint32_t s = 0; s < NDECISIONS; s++)
        decisions_away += placed(cur, 0, 1, s + 1) != id1;
    assert_true(want > 0 && decisions_away > 0);
    c = (struct counts){ .id = id1, .misplaced = want, .losing = true };
    beat_until(&r2, mds, counts_are, &c, &v, "mdsl1 reporting its misplaced slices");
    /* it counted, so the change's sweep is owed (durably), on the stat call:
     * the mark names the seq of a phase it counted under (seq grows at
     * every phase change, walk included) */
    struct xt_store_stat st;
    assert_int_equal(xt_mdsl_stat(m1.pool, NULL, &st), 0);
    xt_free(st.prepared);
    assert_true(st.sweep_owed > 0 && st.sweep_owed <= v.ring1->seq);
    assert_int_equal(st.sweeps, 0);
    xt_view_free(&v);
    pomctl_shows(&r2, id1, want);
    /* The MDS walked (it says so in its beats from 500 ms after `walk`),
     * but slices are left: R2 stays in MOVING. */
    bool walked = false;
    for (int i = 0; i < 30; i++) {
        get_view(&r2, &v);
        assert_int_equal(v.ring1->phase, XT_RING1_MOVING);
        walked = r1_site(&v, mds)->walked_v != 0;
        mds_beat(&r2, mds, &v);
        xt_view_free(&v);
        usleep(50000);
    }
    assert_true(walked);

    /* The moves' tombstones: then nothing is left, and the change ends. */
    size_t n = 0;
    for (size_t i = 0; i < NSTORED; i++) {
        uint64_t t;
        uint32_t s;
        stored(i, &t, &s);
        if (placed(cur, 1, t, s) == id1)
            continue;
        recs[n++] = (struct xt_store_rec){ .type = XT_STORE_IMAGE, .flags = XT_STORE_F_MOVED,
                                           .id = { .fsid = 1, .slice = s, .table = t }, .version = 4 };
        if (n == NSLICES) {
            assert_int_equal(xt_mdsl_prepare(m1.pool, NULL, txid, recs, n), 0);
            assert_int_equal(xt_mdsl_commit(m1.pool, NULL, txid++), 0);
            n = 0;
        }
    }
    if (n) {
        assert_int_equal(xt_mdsl_prepare(m1.pool, NULL, txid, recs, n), 0);
        assert_int_equal(xt_mdsl_commit(m1.pool, NULL, txid++), 0);
    }
    uint64_t whole_dropped = whole; /* what the SIGHUP line counts */
    uint32_t both[2] = { id1, id2 };
    beat_until(&r2, mds, stable_with, both, &v, "DONE, then STABLE with both MDSL");
    assert_int_equal(v.ring1->to_version, xt_ring_version(cur));
    xt_view_free(&v);

    if (kill_before_sweep) { /* killed between the change's end and the sweep */
        int status = 0;
        assert_int_equal(pom_proc_wait(m1.pid, 30000, &status), 0);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        assert_true(log_has(m1.log, "crash point mdsl.sweep reached"));
        assert_false(log_has(m1.log, "mdsl: sweep at"));
        xt_rpc_pool_free(m1.pool);
        snprintf(m1.log, sizeof m1.log, "%s/mdsl1-restarted.log", g_base);
        mdsl_spawn(&m1, r2.addr, NULL);
        whole_dropped = 0; /* the drops were done (and durable) before the kill */
    }

    /* Space back: without the drops and the sweep nothing falls (each
     * table's records sit in one active segment, about half live). The
     * sweep comes after the drops: once the SIGHUP stats line counts it,
     * both are done. */
    long long sweeps = -1;
    for (int i = 0; i < 300 && sweeps < 1; i++) {
        assert_int_equal(pom_proc_kill(m1.pid, SIGHUP), 0);
        usleep(100000);
        sweeps = log_stat(m1.log, "sweeps");
    }
    assert_int_equal(sweeps, 1);
    assert_int_equal(log_stat(m1.log, "dropped_folders"), (long long)whole_dropped);
    assert_int_equal(log_stat(m1.log, "sweep_owed"), 0); /* cleared at its end */
    /* the same counters on the Storage stat call and in pomctl site stat */
    assert_int_equal(xt_mdsl_stat(m1.pool, NULL, &st), 0);
    xt_free(st.prepared);
    assert_int_equal(st.sweeps, 1);
    assert_int_equal(st.sweep_owed, 0);
    assert_int_equal(st.dropped_folders, whole_dropped);
    assert_true(st.rolled_segments > 0 && st.gc_freed_bytes > 0 && st.gc_passes > 0);
    char out[8192], exp[128], args[64];
    snprintf(args, sizeof args, "site stat %u", id1);
    pomctl_json(&r2, args, out, sizeof out);
    snprintf(exp, sizeof exp, "\"id\":%u,", id1);
    const char *at = strstr(out, exp);
    snprintf(exp, sizeof exp, "\"dropped_folders\":%llu,\"dropped_bytes\":%llu,"
             "\"rolled_segments\":%llu,\"sweeps\":1,\"sweep_owed\":0,",
             (unsigned long long)st.dropped_folders, (unsigned long long)st.dropped_bytes,
             (unsigned long long)st.rolled_segments);
    if (!at || !strstr(at, exp))
        fail_msg("pomctl site stat --json: no %s in %s", exp, out);
    pomctl_json(&r2, "site stat", out, sizeof out); /* both MDSL answer */
    assert_non_null(strstr(out, "\"ok\":true"));
    assert_non_null(strstr(out, m2.addr));
    double share = (double)want / NSTORED;
    uint64_t target = bytes0 - (uint64_t)(0.7 * share * (double)bytes0), tables;
    uint64_t bytes = seg_bytes(&m1, &tables);
    fprintf(stderr, "mdsl1: %llu segment bytes before the join, %llu after (moved share %.2f, "
            "%llu one-slice tables moved whole)\n", (unsigned long long)bytes0,
            (unsigned long long)bytes, share, (unsigned long long)whole);
    assert_true(bytes <= target);
    assert_true(bytes >= (uint64_t)((1 - share) * 0.9 * (double)bytes0)); /* nothing live lost */
    assert_int_equal(tables, tables0 - whole);
    for (size_t i = 0; i < NSTORED; i++) {
        uint64_t t;
        uint32_t s;
        stored(i, &t, &s);
        struct xt_store_load l;
        memset(&l, 0, sizeof l);
        int rc = xt_mdsl_load_slice(m1.pool, NULL, (xt_slice_id){ .fsid = 1, .slice = s, .table = t }, &l);
        if (placed(cur, 1, t, s) != id1) { /* dropped whole, or a tombstone */
            assert_int_equal(rc, (t == 1000 || t > 2000) ? -ENOENT : -ESTALE);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_true(l.has_image);
        assert_int_equal(l.image.len, t == 1000 ? sizeof data : IMG);
        if (t != 1000)
            assert_memory_equal(l.image.data, img, IMG);
        xt_store_load_free(&l);
    }
    xt_ring_free(cur);
    stop(&m2);
    stop(&m1);
    stop(&r2);
}

static void test_reports(void **state)
{
    (void)state;
    join_and_sweep(false);
}

static void test_sweep_after_kill(void **state)
{
    (void)state;
    join_and_sweep(true);
}

static int setup(void **state)
{
    (void)state;
    return pom_tmpdir("mdsl-ring1", g_base, sizeof g_base);
}

static int teardown(void **state)
{
    (void)state;
    pom_rm_rf(g_base);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep_after_kill, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
