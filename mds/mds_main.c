/*
 * mds_main.c -- pom-mds, the cache server: slices in memory, commit groups
 * with two-phase commit to the MDSLs, the xTable RPC service.
 *
 * Many MDS (docs/mds-dist.md): with --r2, the MDS sites and ring 0 come
 * from the view as ring 1 does, and are refreshed with every new view;
 * slices are owned by ring 0, requests for slices owned elsewhere are
 * forwarded (mds_service.c), bitmaps converge by gossip (mds_route.c).
 * Without --r2 this MDS is the only one and owns everything.
 *
 * MDSL sites come from R2 (--r2: the MDS registers, learns the MDSL sites
 * and ring 1 from the view, follows ring-1 changes -- mds_ring1.c, with the
 * mover of mds_mover.c moving its slices -- and heartbeats) or are given
 * with --mdsl (repeatable; numbered 1, 2, ... in the order given, placed by
 * a ring built here with the same code R2 uses).
 *
 * With --r2 the site id must be known before the commit group opens (it
 * names this MDS's transactions and its decision record), and R2 needs the
 * service address to register it: so the port is chosen first, the site
 * registers, the group recovers, and only then the server starts on the
 * chosen port.
 * On start the commit group recovers: undecided transactions left by a
 * crash are resolved with the MDSLs before the first request is served.
 * SIGTERM commits what is dirty, then exits; SIGKILL loses at most the open
 * commit group (docs/architecture.md "Daemon crashes").
 *
 * TEST ONLY: --fault alloc:after=N (docs/testing-faults.md) arms
 * xt_alloc_fail_after(N) once the service listens: every allocation after
 * the N-th then fails; --crash-point arms one of crash_points[]
 * (xt_crash.h). --rmu-hold and the short timing options exist for the
 * fault tests; all of them are in --help.
 */
#include "mds_cache.h"
#include "mds_group.h"
#include "mds_metrics.h"
#include "mds_usage.h"
#include "mds_mover.h"
#include "mds_reload.h"
#include "mds_ring1.h"
#include "mds_route.h"
#include "mds_service.h"
#include "mds_stats.h"
#include "mds_store_rpc.h"
#include "mds_table.h"
#include "mds_xact.h"

#include "xt_common.h"
#include "xt_daemon.h"
#include "xt_ring.h"
#include "xt_rpc.h"
#include "xt_rpc_r2.h"
#include "xt_time.h"

#include "r2_agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MDSL 64

/* The crash points of pom-mds (xt_crash.h; --crash-point): inside a
 * cross-MDS transaction (mds_xact.c, mds_xact_part.c) and inside the 2PC
 * of a commit group that moves a slice (mds_group.c). */
static const char *const crash_points[] = {
    "xact.prepared", "xact.decided", "xact.participant",
    "move.prepared", "move.decided", "move.x_committed", NULL,
};

/* A port that was free a moment ago on host (bound to port 0, released). */
static int pick_port(const char *host)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET };
    if (fd < 0 || inet_pton(AF_INET, host, &a.sin_addr) != 1 ||
        bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return -EADDRNOTAVAIL;
    }
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

/* Waits (up to timeout_ms) for a view with at least one MDSL that is up and
 * a ring 1; fills the store's site table and *ring, and sites[] and *n with
 * the MDSL of ring 1, in any state: they hold the slices and the
 * transactions, so they are the commit participants whether or not they
 * were up at this start (a down one makes commits and recovery wait for
 * it, as one that dies later does). While a ring-1 change runs, the MDSL
 * of its previous and next rings are participants too (mds_ring1.h): a
 * transaction of this MDS before a crash may have prepared there. */
static int mdsl_from_r2(r2_agent *agent, mds_store_rpc *rpc, mds_ring1 *follow, xt_ring **ring,
                        uint32_t *sites, size_t *n, size_t cap, int timeout_ms)
{
    uint64_t deadline = xt_deadline_ms((uint64_t)timeout_ms);
    for (int round = 0;; round++) {
        struct xt_view v;
        if (r2_agent_view_copy(agent, &v) == 0) {
            xt_ring *r = NULL;
            (void)xt_view_ring(&v, XT_RING_MDSL, &r); /* none yet: r NULL, wait */
            size_t up = 0, nring = 0;
            *n = 0;
            for (size_t i = 0; r && i < v.nsites; i++) {
                const struct xt_site *st = &v.sites[i];
                if (st->type != XT_SITE_MDSL || !xt_ring_has_site(r, st->id))
                    continue;
                nring++;
                if (*n < cap && mds_store_rpc_set_site(rpc, st->id, st->addr) == 0) {
                    sites[(*n)++] = st->id;
                    up += st->state == XT_SITE_UP;
                }
            }
            size_t ncur = *n;
            if (r)
                mds_ring1_extra_sites(follow, &v, sites, n, cap);
            xt_view_free(&v);
            if (nring > cap) {
                XT_ERR("ring 1 holds %zu MDSL, this MDS at most %zu", nring, cap);
                xt_ring_free(r);
                return -E2BIG;
            }
            /* Every site of ring 1 known by address, one of them up. */
            if (r && up > 0 && ncur == xt_ring_nsites(r)) {
                xt_ring_free(*ring);
                *ring = r;
                return 0;
            }
            xt_ring_free(r);
        }
        if (xt_deadline_passed(deadline))
            return -ETIMEDOUT;
        if (xt_daemon_stop_pending())
            return -EINTR;
        if (round % 50 == 0)
            XT_INFO("waiting for an MDSL to register with R2 (ring 1 and its sites in the "
                    "view, one of them up)");
        xt_sleep_ms(100);
    }
}

/* Ring 0 and the MDS addresses of a view into the route. */
static void route_from_view(mds_route *route, const struct xt_view *v)
{
    xt_ring *r0 = NULL;
    (void)xt_view_ring(v, XT_RING_MDS, &r0); /* none: r0 NULL */
    struct mds_route_site *ss = xt_calloc(v->nsites ? v->nsites : 1, sizeof *ss);
    size_t n = 0;
    for (size_t i = 0; ss && i < v->nsites; i++)
        if (v->sites[i].type == XT_SITE_MDS)
            ss[n++] = (struct mds_route_site){ v->sites[i].id, v->sites[i].addr };
    if (mds_route_update(route, r0, ss, n) < 0)
        XT_WARN("route: out of memory taking the view");
    xt_free(ss);
}

/* The client-key generation of every fs, from the view's fs records: what
 * the handshake checks a client key against (docs/security.md). */
struct fs_gen {
    uint32_t fsid;
    uint64_t gen;
};

struct view_arg {
    mds_store_rpc *rpc;
    mds_route *route;
    mds_ring1 *follow;
    pthread_mutex_t gen_mu;
    struct fs_gen *gens;       /* protected by gen_mu; xt_malloc'd */
    size_t ngens;              /* protected by gen_mu */
};

static void gens_from_view(struct view_arg *va, const struct xt_view *v)
{
    struct fs_gen *g = xt_calloc(v->nfs ? v->nfs : 1, sizeof *g);
    if (!g) {
        XT_WARN("out of memory taking the fs key generations: keeping the old ones");
        return;
    }
    for (size_t i = 0; i < v->nfs; i++)
        g[i] = (struct fs_gen){ v->fs[i].fsid, v->fs[i].key_gen };
    pthread_mutex_lock(&va->gen_mu);
    struct fs_gen *old = va->gens;
    va->gens = g;
    va->ngens = v->nfs;
    pthread_mutex_unlock(&va->gen_mu);
    xt_free(old);
}

/* xt_rpc_server_opts.key_gen: at connect, from a server thread. */
static int key_gen(void *arg, int32_t fsid, uint64_t *gen)
{
    struct view_arg *va = arg;
    int rc = -ENOENT;
    pthread_mutex_lock(&va->gen_mu);
    for (size_t i = 0; i < va->ngens; i++)
        if (va->gens[i].fsid == (uint32_t)fsid) {
            *gen = va->gens[i].gen;
            rc = 0;
        }
    pthread_mutex_unlock(&va->gen_mu);
    return rc;
}

/* Keeps MDSL addresses current as the view changes (a restarted MDSL may
 * come back on another port), ring 1 and its changes (mds_ring1.h), and
 * ring 0 with the MDS addresses; a ring 0 change re-routes at once
 * (docs/mds-dist.md). Ring 1 first: an MDS that comes back during a
 * ring-1 change must not own slices under a stale placement
 * (docs/mdsl-scale.md "Phases"). */
static void on_view(void *arg, const struct xt_view *v, int changed)
{
    struct view_arg *va = arg;
    if (changed & XT_VIEW_FS)
        gens_from_view(va, v);
    if (changed & (XT_VIEW_SITES | XT_VIEW_RINGS))
        mds_ring1_view(va->follow, v);
    if (changed & (XT_VIEW_SITES | XT_VIEW_RINGS))
        route_from_view(va->route, v);
    if (!(changed & XT_VIEW_SITES))
        return;
    for (size_t i = 0; i < v->nsites; i++)
        if (v->sites[i].type == XT_SITE_MDSL && v->sites[i].state == XT_SITE_UP)
            mds_store_rpc_set_site(va->rpc, v->sites[i].id, v->sites[i].addr);
}

/* Waits (up to timeout_ms) for ring 0 to hold this MDS. */
static int ring0_from_r2(r2_agent *agent, mds_route *route, int timeout_ms)
{
    uint64_t deadline = xt_deadline_ms((uint64_t)timeout_ms);
    for (int round = 0;; round++) {
        struct xt_view v;
        if (r2_agent_view_copy(agent, &v) == 0) {
            route_from_view(route, &v);
            xt_view_free(&v);
            if (mds_route_ring_has_self(route))
                return 0;
        }
        if (xt_deadline_passed(deadline))
            return -ETIMEDOUT;
        if (xt_daemon_stop_pending())
            return -EINTR;
        if (round % 50 == 0)
            XT_INFO("waiting for ring 0 to include this MDS");
        xt_sleep_ms(100);
    }
}

/* Logs op's histogram ("hist: group LO:N LO:N ...", mds_stats_dump_hist) in
 * lines of at most ~900 bytes, cut at spaces (a log record holds 1 KiB), so
 * a reader of two reports has the histogram of the time between them. A
 * "hist: group" line with no pairs opens it: readers start over there. */
/* The group's ownership test (mds_group_opts.owns): a meta slice goes with
 * slice 0, as in mds_route.c. */
static bool owns_key(void *route, uint32_t fsid, uint64_t table, uint32_t slice)
{
    return mds_route_owns(route, fsid, table, slice == MDS_META_SLICE ? 0 : slice);
}

static void report_hist(mds_stats *stats, enum mds_op op)
{
    const char *name = mds_stats_op_name(op);
    XT_INFO("hist: %s", name);
    size_t need = mds_stats_dump_hist(stats, op, NULL, 0);
    char *buf = xt_malloc(need + 1);
    if (!buf)
        return;
    mds_stats_dump_hist(stats, op, buf, need + 1);
    for (size_t at = 0; at < need;) {
        size_t len = need - at;
        if (len > 900) {
            len = 900;
            while (len > 0 && buf[at + len] != ' ')
                len--;
        }
        XT_INFO("hist: %s %.*s", name, (int)len, buf + at);
        at += len;
        while (at < need && buf[at] == ' ')
            at++;
    }
    xt_free(buf);
}

/* Logs every operation's count and latency histogram summary, the commit,
 * split and cache counters, and the memory a cached row costs. */
static void report(mds_stats *stats, mds_cache *cache, mds_group *group, mds_table *table,
                   mds_route *route, mds_ring1 *follow)
{
    char buf[8192];
    mds_stats_dump_text(stats, buf, sizeof buf);
    struct mds_cache_info ci;
    mds_cache_info(cache, &ci);
    struct mds_group_info gi;
    mds_group_info(group, &gi);
    char *save = NULL; /* one log record a line: records are at most 1 KiB */
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        XT_INFO("stats: %s", line);
    XT_INFO("cache: %zu slices, %zu rows, %zu bytes (%.1f per row), bound %zu, %llu loads, "
            "%llu evictions; groups: committed up to %llu, %llu commits, %llu aborts, %llu syncs",
            ci.entries, ci.rows, ci.bytes, ci.bytes_per_row, ci.bound,
            (unsigned long long)ci.loads, (unsigned long long)ci.evictions,
            (unsigned long long)gi.committed_gen, (unsigned long long)gi.commits,
            (unsigned long long)gi.aborts, (unsigned long long)gi.syncs);
    report_hist(stats, MDS_OP_GROUP);
    /* One line the many-MDS tests parse (docs/mds-dist.md); the last of a
     * report, so a reader that saw it has the whole report. */
    size_t ntab = table ? mds_table_count(table) : 0;
    uint64_t r1_acked = 0, r1_cur = 0, r1_prev = 0;
    if (follow)
        mds_ring1_state(follow, &r1_acked, &r1_cur, &r1_prev);
    XT_INFO("dist: site %u ring0 v%llu tables %zu slices %zu rows %zu requests %llu forwards "
            "%llu looped %llu fwd_errors %llu remote_answers %llu gossip_rounds %llu "
            "gossip_new_bits %llu handovers %llu bits_home %llu gossip_ms %u releases %llu "
            "release_waits %llu slices_moved %llu xact_splits %llu slice_absent %llu "
            "ring1_acked %llu ring1 v%llu prev v%llu moves %llu move_bytes %llu move_loads %llu "
            "walk_passes %llu moved_waits %llu move_aborts %llu rmu_queued %llu "
            "rmu_delivered %llu rmu_dropped %llu",
            route ? mds_route_self(route) : 0,
            (unsigned long long)(route ? mds_route_ring_version(route) : 0), ntab,
            ci.entries > ntab ? ci.entries - ntab : 0, ci.rows,
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_REQUESTS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_FORWARDS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_FORWARDS_LOOPED),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_FORWARD_ERRORS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_REMOTE_ANSWERS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_GOSSIP_ROUNDS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_GOSSIP_NEW_BITS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_HANDOVERS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_BITS_HOME),
            route ? mds_route_gossip_interval(route) : 0,
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_RELEASES),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_RELEASE_WAITS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_SLICES_MOVED),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_XACT_SPLITS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_SLICE_ABSENT),
            (unsigned long long)r1_acked, (unsigned long long)r1_cur, (unsigned long long)r1_prev,
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_MOVES),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_MOVE_BYTES),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_MOVE_LOADS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_WALK_PASSES),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_MOVED_WAITS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_MOVE_ABORTS),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_RMU_QUEUED),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_RMU_DELIVERED),
            (unsigned long long)mds_stats_counter(stats, MDS_CTR_RMU_DROPPED));
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pom-mds (--r2 HOST:PORT[,...] | --mdsl HOST:PORT [--mdsl ...]) [options]\n"
            "  --r2 ADDRS              register with R2, take MDSL sites and ring 1 from it\n"
            "  --dir DIR               data folder (keeps the R2 site id across restarts)\n"
            "  --hb-interval-ms N      heartbeat interval, as pom-r2's (default 1000)\n"
            "  --mdsl HOST:PORT        an MDSL site, without R2 (repeat for several)\n"
            "  --listen HOST:PORT      address to serve on (default 127.0.0.1:0)\n"
            "  --port-file FILE        write the port served on to FILE once listening\n"
            "  --site-id N             this MDS's site id (default 1; unique per cluster)\n"
            "  --threads N             server threads (default 4)\n"
            "  --commit-interval-ms N  commit group period (default 5000)\n"
            "  --mem-bound BYTES       slice cache bound (default 1G)\n"
            "  --split-threshold N     rows per slice before it splits (default 8192)\n"
            "  --split-bytes N         bytes a slice holds before it splits (default 32 MiB)\n"
            "  --gossip-ms N           first bitmap gossip interval, adaptive 20..2000 ms\n"
            "                          (default 200; 0: no gossip)\n"
            "  --move-rate BYTES       ring-1 change: slice images moved per second by\n"
            "                          this MDS's mover (default 16 MiB)\n"
            "  --ring1-frozen          do not follow ring-1 changes: heartbeats carry no\n"
            "                          ring-1 field, so R2 keeps ring 1 as it is\n"
            "  --mdsl-replicas N       MDSL holding each slice's records and each decision\n"
            "                          record, 1..5 (default 1; at most the MDSL of ring 1;\n"
            "                          the same on every MDS; above 1 implies --ring1-frozen:\n"
            "                          docs/mdsl-replicas.md)\n"
            "  --xact-resolve-ms N     age of a pending row before its resolver settles it\n"
            "                          (default 2000)\n"
            "  --rmu-soft-ms N         how long a count shown before its RMU is delivered\n"
            "                          lives (default max(30000, 6 commit intervals))\n"
            "  --reload-ms N           period of the reload of slices with outbox or\n"
            "                          pending rows (default 300000)\n"
            "  --abort-gc-ms N         age of the ABORT decision rows removed (default 60000)\n"
            "  --verbose               debug log\n"
            "test only (docs/testing-faults.md):\n"
            "  --fault alloc:after=N   every allocation after the N-th fails, once serving\n"
            "  --rmu-hold              outbox rows are not delivered\n");
    xt_daemon_crash_usage(f, crash_points);
    xt_rpc_server_flags_usage(f);
    xt_metrics_flags_usage(f);
    fprintf(f, "SIGHUP logs the counters (per-operation counts and latencies, commits,\n"
               "splits, cache and memory per row); SIGTERM logs them and stops.\n");
}

static int cmp_site(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int parse_num(const char *opt, const char *s, uint64_t min, uint64_t max, uint64_t *v)
{
    if (xt_parse_u64(s, min, max, v)) {
        fprintf(stderr, "pom-mds: %s wants a number in %llu..%llu, got '%s'\n", opt,
                (unsigned long long)min, (unsigned long long)max, s);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "mdsl", required_argument, NULL, 'm' },
        { "r2", required_argument, NULL, 'R' },
        { "dir", required_argument, NULL, 'd' },
        { "hb-interval-ms", required_argument, NULL, 'H' },
        { "listen", required_argument, NULL, 'l' },
        { "port-file", required_argument, NULL, 'p' },
        { "site-id", required_argument, NULL, 's' },
        { "threads", required_argument, NULL, 't' },
        { "commit-interval-ms", required_argument, NULL, 'c' },
        { "mem-bound", required_argument, NULL, 'b' },
        { "split-threshold", required_argument, NULL, 'x' },
        { "split-bytes", required_argument, NULL, 'X' },
        { "gossip-ms", required_argument, NULL, 'g' },
        { "move-rate", required_argument, NULL, 'M' },
        { "ring1-frozen", no_argument, NULL, 'F' },
        { "mdsl-replicas", required_argument, NULL, 'Q' },
        { "xact-resolve-ms", required_argument, NULL, 'r' },
        { "rmu-soft-ms", required_argument, NULL, 'S' },
        { "reload-ms", required_argument, NULL, 'L' },
        { "abort-gc-ms", required_argument, NULL, 'A' },
        { "fault", required_argument, NULL, 'f' },
        { "rmu-hold", no_argument, NULL, 'P' },
        { "crash-point", required_argument, NULL, 'C' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        XT_RPC_SERVER_FLAGS,
        XT_METRICS_FLAGS,
        { NULL, 0, NULL, 0 },
    };
    struct xt_rpc_server_opts limits = { .host = NULL }; /* XT_RPC_SERVER_FLAGS */
    struct xt_metrics_opts metrics_opts = { .collect = mds_metrics_collect }; /* XT_METRICS_FLAGS */
    const char *mdsl[MAX_MDSL];
    size_t nmdsl = 0;
    const char *listen = "127.0.0.1:0", *port_file = NULL, *r2_addrs = NULL, *dir = NULL;
    uint64_t hb_interval = 1000;
    bool site_given = false, ring1_frozen = false;
    uint64_t site_id = 1, threads = 4, interval = 5000, mem_bound = 1ull << 30, split = 8192;
    uint64_t split_bytes = MDS_SPLIT_BYTES;
    uint64_t gossip_ms = 200, move_rate = MDS_MOVE_RATE_DEFAULT, replicas = 1;
    uint64_t resolve_ms = 0, soft_ms = 0, reload_ms = 0, abort_gc_ms = 0; /* 0: default */
    bool rmu_hold = false, move_x_first = false;
    const char *fault = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (nmdsl == MAX_MDSL) {
                fprintf(stderr, "pom-mds: at most %d --mdsl\n", MAX_MDSL);
                return 2;
            }
            mdsl[nmdsl++] = optarg;
            break;
        case 'R': r2_addrs = optarg; break;
        case 'd': dir = optarg; break;
        case 'H': if (parse_num("--hb-interval-ms", optarg, 10, 600000, &hb_interval)) return 2; break;
        case 'l': listen = optarg; break;
        case 'p': port_file = optarg; break;
        case 's':
            if (parse_num("--site-id", optarg, 1, MDS_SITE_MAX, &site_id))
                return 2;
            site_given = true;
            break;
        case 't': if (parse_num("--threads", optarg, 1, 256, &threads)) return 2; break;
        case 'c': if (parse_num("--commit-interval-ms", optarg, 1, 3600000, &interval)) return 2; break;
        case 'b': if (parse_num("--mem-bound", optarg, 1 << 20, UINT64_MAX, &mem_bound)) return 2; break;
        case 'x': if (parse_num("--split-threshold", optarg, 16, 1 << 22, &split)) return 2; break;
        case 'X': if (parse_num("--split-bytes", optarg, 1 << 16, 1u << 30, &split_bytes)) return 2; break;
        case 'g': if (parse_num("--gossip-ms", optarg, 0, 60000, &gossip_ms)) return 2; break;
        case 'M': if (parse_num("--move-rate", optarg, 4096, UINT64_MAX / 2, &move_rate)) return 2; break;
        case 'F': ring1_frozen = true; break;
        case 'Q': if (parse_num("--mdsl-replicas", optarg, 1, MDS_REPLICAS_MAX, &replicas)) return 2; break;
        case 'r': if (parse_num("--xact-resolve-ms", optarg, 1, 3600000, &resolve_ms)) return 2; break;
        case 'S': if (parse_num("--rmu-soft-ms", optarg, 1, 3600000, &soft_ms)) return 2; break;
        case 'L': if (parse_num("--reload-ms", optarg, 1, 3600000, &reload_ms)) return 2; break;
        case 'A': if (parse_num("--abort-gc-ms", optarg, 1, 3600000, &abort_gc_ms)) return 2; break;
        case 'f': fault = optarg; break;
        case 'P': rmu_hold = true; break;
        case 'C':
            if (xt_daemon_crash_option(optarg, crash_points))
                return 2;
            /* Its state exists only when phase 2 commits the old sites first. */
            move_x_first = strncmp(optarg, "move.x_committed", 16) == 0;
            break;
        case 'v': xt_log_set_level(XT_LOG_DEBUG); break;
        case 'h': usage(stdout); return 0;
        default: {
            if (xt_metrics_flag(c, optarg, &metrics_opts))
                break;
            int r = xt_rpc_server_flag(c, optarg, &limits, "pom-mds");
            if (r == 0)
                usage(stderr);
            if (r <= 0)
                return 2;
        }
        }
    }
    if ((nmdsl == 0) == (r2_addrs == NULL) || optind != argc || (r2_addrs && site_given) ||
        (metrics_opts.addr_file && !metrics_opts.listen)) {
        usage(stderr);
        return 2;
    }
    char host[256];
    int port = 0;
    if (xt_rpc_parse_listen(listen, host, sizeof host, &port)) {
        fprintf(stderr, "pom-mds: bad --listen '%s' (want HOST:PORT)\n", listen);
        return 2;
    }
    if (xt_rpc_server_flags_done(&limits, host, "pom-mds") < 0)
        return 2;

    long fault_alloc_after = -1;
    if (fault) {
        int used = 0;
        if (sscanf(fault, "alloc:after=%ld%n", &fault_alloc_after, &used) != 1 ||
            fault[used] || fault_alloc_after < 0) {
            fprintf(stderr, "pom-mds: bad --fault '%s' (see docs/testing-faults.md)\n",
                    fault);
            return 2;
        }
    }

    xt_daemon_block_signals();
    xt_log_set_prefix("mds");

    int rc = 1;
    mds_store_rpc *rpc = NULL;
    xt_ring *ring = xt_ring_new(1, 128);
    mds_stats *stats = mds_stats_new();
    mds_usage *usage = NULL;
    mds_cache *cache = NULL;
    mds_group *group = NULL;
    mds_place *place = NULL;
    mds_table *table = NULL;
    xt_rpc_server *srv = NULL;
    xt_metrics *metrics = NULL;
    struct mds_metrics_src msrc = { .stats = stats };
    r2_agent *agent = NULL;
    mds_route *route = NULL;
    mds_xact *xact = NULL;
    mds_soft *soft = NULL;
    mds_ring1 *follow = NULL;
    mds_mover *mover = NULL;
    mds_reload *reload = NULL;
    struct view_arg va = { .gen_mu = PTHREAD_MUTEX_INITIALIZER };
    uint32_t sites[MAX_MDSL];
    if (!ring || !stats || mds_usage_new(&usage) || mds_store_rpc_new(10000, &rpc)) {
        XT_ERR("out of memory");
        goto out;
    }
    /* Metrics first, so R2 learns their address at registration; scrapes
     * are empty until everything they read exists (msrc.ready). */
    metrics_opts.arg = &msrc;
    if (metrics_opts.listen && (rc = xt_metrics_start(&metrics_opts, &metrics))) {
        XT_ERR("cannot serve metrics on %s: %s", metrics_opts.listen, strerror(-rc));
        goto out;
    }
    if (metrics)
        XT_INFO("metrics on http://%s/metrics", xt_metrics_addr(metrics));
    for (size_t i = 0; i < nmdsl; i++) {
        sites[i] = (uint32_t)i + 1;
        if (mds_store_rpc_set_site(rpc, sites[i], mdsl[i]) || xt_ring_add_site(ring, sites[i], 100)) {
            XT_ERR("bad --mdsl '%s' (want HOST:PORT)", mdsl[i]);
            goto out;
        }
    }
    if (r2_addrs) {
        if (port == 0 && (port = pick_port(host)) < 0) {
            XT_ERR("cannot find a free port on %s", host);
            goto out;
        }
        char self[300], idfile[4200];
        snprintf(self, sizeof self, "%s:%d", host, port);
        if (dir) {
            /* The folder keeps the site id: made here, as pom-r2 and pom-mdsl
             * make theirs, so a restart finds the id it wrote. */
            if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                XT_ERR("cannot create --dir %s: %s", dir, strerror(errno));
                goto out;
            }
            snprintf(idfile, sizeof idfile, "%s/site_id", dir);
        } else
            XT_WARN("no --dir: the site id will not survive a restart");
        struct r2_agent_opts ao = { .r2_addrs = r2_addrs, .type = XT_SITE_MDS, .addr = self,
                                    .id_file = dir ? idfile : NULL,
                                    .hb_interval_ms = (unsigned)hb_interval,
                                    .on_view = on_view, .view_arg = &va,
                                    .metrics = metrics ? xt_metrics_addr(metrics) : NULL,
                                    .stats = mds_usage_stats, .stats_arg = usage,
                                    .usage = mds_usage_hb, .usage_arg = usage,
                                    .on_capacity = mds_usage_capacity, .capacity_arg = usage };
        if ((rc = mds_route_new(0, stats, &route)) || (rc = mds_ring1_new(rpc, &follow))) {
            XT_ERR("out of memory");
            goto out;
        }
        va.rpc = rpc;
        va.route = route;
        va.follow = follow;
        /* Without the callback this MDS looks like one from before ring-1
         * changes, and R2 keeps ring 1 frozen (docs/r2.md). */
        ao.ring1 = ring1_frozen || replicas > 1 ? NULL : mds_ring1_heartbeat;
        ao.ring1_arg = follow;
        if ((rc = r2_agent_start(&ao, &agent))) {
            XT_ERR("bad --r2 '%s': %s", r2_addrs, strerror(-rc));
            goto out;
        }
        for (int waited = 0; (rc = r2_agent_wait_registered(agent, 500)) == -ETIMEDOUT &&
                             waited < 60000 && !xt_daemon_stop_pending();
             waited += 500)
            ;
        if (rc) {
            XT_ERR("R2 at %s did not register this MDS: %s", r2_addrs,
                   xt_daemon_stop_pending() ? "stopped by a signal" : strerror(-rc));
            goto out;
        }
        site_id = r2_agent_site_id(agent);
        if (site_id > MDS_SITE_MAX) {
            XT_ERR("R2 gave site id %llu, over this MDS's limit %u",
                   (unsigned long long)site_id, MDS_SITE_MAX);
            goto out;
        }
        mds_route_set_self(route, (uint32_t)site_id);
        if ((rc = mdsl_from_r2(agent, rpc, follow, &ring, sites, &nmdsl, MAX_MDSL, 120000))) {
            XT_ERR("no MDSL registered with R2: %s",
                   rc == -EINTR ? "stopped by a signal" : strerror(-rc));
            goto out;
        }
        if ((rc = ring0_from_r2(agent, route, 120000))) {
            XT_ERR("ring 0 of R2 never included this MDS: %s",
                   rc == -EINTR ? "stopped by a signal" : strerror(-rc));
            goto out;
        }
        /* The home of the decision records must not move between restarts:
         * the lowest MDSL id of the participants. Ids only grow, so a join
         * keeps it; a drain of the home is not handled ("Decision records" of
         * docs/mdsl-scale.md: the records would have to be copied). The
         * copies (docs/mdsl-replicas.md) go to the next lowest ids. */
        qsort(sites, nmdsl, sizeof sites[0], cmp_site);
    }
    /* r replicas: at most the MDSL of ring 1 (with one MDSL, one copy). */
    uint32_t r = (uint32_t)XT_MIN((uint64_t)xt_ring_nsites(ring), replicas);
    if (r < replicas)
        XT_WARN("--mdsl-replicas %llu: ring 1 holds %u MDSL, so %u replicas",
                (unsigned long long)replicas, xt_ring_nsites(ring), r);
    if (r > 1)
        XT_INFO("%u MDSL replicas of every slice; decision records at MDSL %u and %u more "
                "(docs/mdsl-replicas.md); ring 1 frozen", r, sites[0], r - 1);
    mds_store store = mds_store_rpc_handle(rpc);
    /* Ring 1 as fetched; with R2 the follower installs a change in flight
     * (previous kept) once the group is open, before anything is served. */
    if ((rc = mds_place_new(mds_ring1_locate, ring, &place))) {
        XT_ERR("out of memory");
        goto out;
    }
    mds_place_set_replicas(place, r ? r : 1, mds_ring1_replicas);
    struct mds_cache_opts co = { .store = &store, .place = place,
                                 .mem_bound = mem_bound, .stats = stats,
                                 .before_load = route ? mds_route_before_load : NULL,
                                 .stamp = route ? mds_route_stamp : NULL,
                                 .before_load_arg = route };
    if ((rc = mds_cache_new(&co, &cache))) {
        XT_ERR("cannot create the slice cache: %s", strerror(-rc));
        goto out;
    }
    struct mds_group_opts go = { .store = &store, .cache = cache, .place = place,
                                 .site_id = (uint32_t)site_id,
                                 .home_site = sites[0], .participants = sites,
                                 .nparticipants = nmdsl,
                                 .decision_copies = sites + 1,
                                 .ndecision_copies = r > 1 ? r - 1 : 0,
                                 .commit_interval_ms = (unsigned)interval, .stats = stats,
                                 .move_x_first = move_x_first,
                                 .owns = route ? owns_key : NULL, .owns_arg = route };
    /* Recovery needs every participant (every MDSL of ring 1, up or not):
     * wait for them instead of failing at once -- up to 10 minutes, so an
     * MDSL being restarted or replaced does not stop this MDS. */
    uint64_t recover_until = xt_deadline_ms(600000);
    for (int attempt = 0;; attempt++) {
        rc = mds_group_open(&go, &group);
        if (rc == 0)
            break;
        if (xt_deadline_passed(recover_until) || xt_daemon_stop_pending() ||
            (rc != -ECONNREFUSED && rc != -ETIMEDOUT && rc != -ECONNRESET &&
             rc != -EHOSTUNREACH)) {
            XT_ERR("cannot recover the commit group from the MDSLs: %s", strerror(-rc));
            goto out;
        }
        if (attempt % 20 == 0)
            XT_WARN("waiting for the MDSLs (%s)", strerror(-rc));
        xt_sleep_ms(100);
    }
    mds_cache_set_pressure(cache, mds_group_kick, group);
    mds_usage_set_group(usage, group);
    if (follow) {
        mds_ring1_attach(follow, place, ring, group, NULL); /* ring now follow's */
        ring = NULL;
    }
    struct mds_table_opts to = { .cache = cache, .group = group, .stats = stats,
                                 .usage = usage, .split_threshold = (uint32_t)split,
                                 .split_bytes = (size_t)split_bytes,
                                 .owns = route ? mds_route_owns : NULL,
                                 .on_bit = route ? mds_route_on_bit : NULL,
                                 .owned_since = route ? mds_route_owned_since : NULL,
                                 .ring_unsettled = route ? mds_route_unsettled : NULL,
                                 .route_arg = route };
    if ((rc = mds_table_new(&to, &table))) {
        XT_ERR("cannot create the table layer: %s", strerror(-rc));
        goto out;
    }
    if (route && (rc = mds_route_start(route, table, group, cache, (unsigned)gossip_ms))) {
        XT_ERR("cannot start the routing thread: %s", strerror(-rc));
        goto out;
    }
    if (route) {
        /* Atomic batches across MDS (docs/mds-xact.md). */
        struct mds_group_info gi;
        mds_group_info(group, &gi);
        /* A count shown before its RMU is delivered lives at most this long
         * (mds_soft.h (1)): well past a commit of the sender's group. */
        if (!soft_ms)
            soft_ms = XT_MAX(30000, 6 * interval);
        if ((rc = mds_soft_new((unsigned)soft_ms, &soft))) {
            XT_ERR("cannot create the RMU view: %s", strerror(-rc));
            goto out;
        }
        struct mds_xact_opts xo = { .table = table, .group = group, .cache = cache,
                                    .route = route, .stats = stats, .soft = soft,
                                    .epoch = gi.epoch, .resolve_ms = (unsigned)resolve_ms,
                                    .abort_gc_ms = (unsigned)abort_gc_ms,
                                    .rmu_hold = rmu_hold };
        if ((rc = mds_xact_new(&xo, &xact))) {
            XT_ERR("cannot create the transaction layer: %s", strerror(-rc));
            goto out;
        }
    }
    struct mds_service svc = { .table = table, .group = group, .stats = stats, .route = route,
                               .xact = xact, .soft = soft };
    /* Forwarding blocks a server thread on another MDS, which may be
     * forwarding back: extra workers keep two MDS forwarding to each other
     * from exhausting both pools (the hop limit and timeouts bound it). */
    struct xt_rpc_server_opts ro = limits;
    ro.host = host;
    ro.port = port;
    ro.io_threads = (int)threads;
    ro.workers = route ? 4 * (int)threads : 0;
    if (r2_addrs) { /* else no fs records: generation 0 for every fs */
        ro.key_gen = key_gen;
        ro.key_ctx = &va;
    }
    if ((rc = mds_service_start(&svc, &ro, &srv))) {
        XT_ERR("cannot serve on %s: %s", listen, strerror(-rc));
        goto out;
    }
    if (xact && (rc = mds_xact_start(xact))) {
        XT_ERR("cannot start the transaction thread: %s", strerror(-rc));
        goto out;
    }
    if (xact) {
        /* Slices with outbox or pending rows nobody would load again
         * (mds_reload.h). */
        struct mds_reload_opts lo = { .store = &store, .cache = cache, .stats = stats,
                                      .group = group, .owns = mds_route_owns,
                                      .ring0_version = mds_route_stamp, .route_arg = route,
                                      .period_ms = (unsigned)reload_ms };
        if ((rc = mds_reload_start(&lo, &reload))) {
            XT_ERR("cannot start the reload thread: %s", strerror(-rc));
            goto out;
        }
    }
    if (follow) {
        struct mds_mover_opts mo = { .store = &store, .cache = cache, .group = group,
                                     .place = place, .stats = stats, .owns = mds_route_owns,
                                     .ring0_version = mds_route_stamp, .route_arg = route,
                                     .rate = move_rate };
        if ((rc = mds_mover_start(&mo, &mover))) {
            XT_ERR("cannot start the mover: %s", strerror(-rc));
            goto out;
        }
        mds_ring1_set_mover(follow, mover);
    }
    msrc.cache = cache;
    msrc.group = group;
    msrc.srv = srv;
    atomic_store_explicit(&msrc.ready, true, memory_order_release);
    int bound = xt_rpc_server_port(srv);
    if (port_file && (rc = xt_daemon_write_int_file(port_file, bound)) < 0)
        XT_ERR("cannot write %s: %s", port_file, strerror(-rc));
    XT_INFO("site %llu serving on %s:%d with %zu MDSL", (unsigned long long)site_id, host,
            bound, nmdsl);
    if (fault_alloc_after >= 0) {
        XT_WARN("--fault '%s': TEST-ONLY allocation failures are on", fault);
        xt_alloc_fail_after(fault_alloc_after);
    }

    /* SIGHUP: report the counters and go on; SIGINT/SIGTERM: report and stop. */
    int sig;
    while ((sig = xt_daemon_wait_signal()) == SIGHUP)
        report(stats, cache, group, table, route, follow);
    XT_INFO("signal %d: committing and stopping", sig);
    report(stats, cache, group, table, route, follow);
    rc = 0;
out:
    xt_metrics_stop(metrics); /* first: it reads everything below */
    r2_agent_stop(agent);
    if (follow)
        mds_ring1_detach(follow);
    mds_mover_stop(mover); /* loads through the route, moves through the group */
    mds_reload_stop(reload); /* loads through the route */
    xt_rpc_server_stop(srv);
    mds_xact_free(xact); /* its thread calls the (stopped) service's handlers */
    mds_soft_free(soft);
    if (rc == 0 && route && group) {
        /* A clean stop: everything committed, then every split told home. */
        if (mds_group_sync(group, 0, 10000) == 0)
            mds_route_flush(route);
    }
    mds_route_free(route); /* its thread uses the table, group and cache */
    mds_table_free(table);
    if (usage)
        mds_usage_set_group(usage, NULL); /* the agent that read it is stopped */
    if (group)
        mds_group_close(group, true);
    mds_cache_free(cache);
    mds_place_free(place);
    mds_ring1_free(follow); /* the rings the placement used */
    mds_store_rpc_free(rpc);
    mds_stats_free(stats);
    mds_usage_free(usage);
    xt_ring_free(ring);
    xt_free(va.gens); /* the agent and server that read it are stopped */
    if (fault_alloc_after >= 0) /* for sizing the tests' countdown ranges */
        XT_WARN("--fault: %ld allocations failed", xt_alloc_fail_after(-1));
    return rc ? 1 : 0;
}
