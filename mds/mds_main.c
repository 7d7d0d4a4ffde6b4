/*
 * mds_main.c -- pom-mds, the cache server: slices in memory, commit groups
 * with two-phase commit to the MDSLs, the xTable RPC service.
 *
 * MDSL sites are given with --mdsl (repeatable; numbered 1, 2, ... in the
 * order given) and slices are placed on them by a consistent-hash ring
 * (ring 1), the same code R2 uses to publish the ring of a cluster.
 * On start the commit group recovers: undecided transactions left by a
 * crash are resolved with the MDSLs before the first request is served.
 * SIGTERM commits what is dirty, then exits; SIGKILL loses at most the open
 * commit group (DESIGN 11).
 */
#include "mds_cache.h"
#include "mds_group.h"
#include "mds_service.h"
#include "mds_stats.h"
#include "mds_store_rpc.h"
#include "mds_table.h"

#include "xt_common.h"
#include "xt_daemon.h"
#include "xt_ring.h"
#include "xt_rpc.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_MDSL 64

static uint32_t locate(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    uint32_t site = 1;
    xt_ring_lookup(arg, xt_ring_key(fsid, table, slice), &site);
    return site;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pom-mds --mdsl HOST:PORT [--mdsl HOST:PORT ...] [options]\n"
            "  --mdsl HOST:PORT        an MDSL site (repeat for several)\n"
            "  --listen HOST:PORT      address to serve on (default 127.0.0.1:0)\n"
            "  --port-file FILE        write the port served on to FILE once listening\n"
            "  --site-id N             this MDS's site id (default 1; unique per cluster)\n"
            "  --threads N             server threads (default 4)\n"
            "  --commit-interval-ms N  commit group period (default 5000)\n"
            "  --mem-bound BYTES       slice cache bound (default 1G)\n"
            "  --split-threshold N     rows per slice before it splits (default 8192)\n"
            "  --verbose               debug log\n");
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
        { "listen", required_argument, NULL, 'l' },
        { "port-file", required_argument, NULL, 'p' },
        { "site-id", required_argument, NULL, 's' },
        { "threads", required_argument, NULL, 't' },
        { "commit-interval-ms", required_argument, NULL, 'c' },
        { "mem-bound", required_argument, NULL, 'b' },
        { "split-threshold", required_argument, NULL, 'x' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *mdsl[MAX_MDSL];
    size_t nmdsl = 0;
    const char *listen = "127.0.0.1:0", *port_file = NULL;
    uint64_t site_id = 1, threads = 4, interval = 5000, mem_bound = 1ull << 30, split = 8192;
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
        case 'l': listen = optarg; break;
        case 'p': port_file = optarg; break;
        case 's': if (parse_num("--site-id", optarg, 1, MDS_SITE_MAX, &site_id)) return 2; break;
        case 't': if (parse_num("--threads", optarg, 1, 256, &threads)) return 2; break;
        case 'c': if (parse_num("--commit-interval-ms", optarg, 1, 3600000, &interval)) return 2; break;
        case 'b': if (parse_num("--mem-bound", optarg, 1 << 20, UINT64_MAX, &mem_bound)) return 2; break;
        case 'x': if (parse_num("--split-threshold", optarg, 16, 1 << 22, &split)) return 2; break;
        case 'v': xt_log_set_level(XT_LOG_DEBUG); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (nmdsl == 0 || optind != argc) {
        usage(stderr);
        return 2;
    }
    char host[256];
    int port = 0;
    if (strcmp(listen, "127.0.0.1:0") == 0) {
        strcpy(host, "127.0.0.1");
    } else if (xt_rpc_parse_addr(listen, host, sizeof host, &port)) {
        fprintf(stderr, "pom-mds: bad --listen '%s' (want HOST:PORT)\n", listen);
        return 2;
    }

    xt_daemon_block_signals();
    xt_log_set_prefix("mds");

    int rc = 1;
    mds_store_rpc *rpc = NULL;
    xt_ring *ring = xt_ring_new(1, 128);
    mds_stats *stats = mds_stats_new();
    mds_cache *cache = NULL;
    mds_group *group = NULL;
    mds_table *table = NULL;
    xt_rpc_server *srv = NULL;
    uint32_t sites[MAX_MDSL];
    if (!ring || !stats || mds_store_rpc_new(10000, &rpc)) {
        XT_ERR("out of memory");
        goto out;
    }
    for (size_t i = 0; i < nmdsl; i++) {
        sites[i] = (uint32_t)i + 1;
        if (mds_store_rpc_set_site(rpc, sites[i], mdsl[i]) || xt_ring_add_site(ring, sites[i], 100)) {
            XT_ERR("bad --mdsl '%s' (want HOST:PORT)", mdsl[i]);
            goto out;
        }
    }
    mds_store store = mds_store_rpc_handle(rpc);
    struct mds_cache_opts co = { .store = &store, .locate = locate, .locate_arg = ring,
                                 .mem_bound = mem_bound, .stats = stats };
    if ((rc = mds_cache_new(&co, &cache))) {
        XT_ERR("cannot create the slice cache: %s", strerror(-rc));
        goto out;
    }
    struct mds_group_opts go = { .store = &store, .cache = cache, .locate = locate,
                                 .locate_arg = ring, .site_id = (uint32_t)site_id,
                                 .home_site = sites[0], .participants = sites,
                                 .nparticipants = nmdsl,
                                 .commit_interval_ms = (unsigned)interval, .stats = stats };
    /* Recovery needs the MDSLs: wait for them instead of failing at once. */
    for (int attempt = 0;; attempt++) {
        rc = mds_group_open(&go, &group);
        if (rc == 0)
            break;
        if (attempt == 300 || (rc != -ECONNREFUSED && rc != -ETIMEDOUT && rc != -ECONNRESET &&
                               rc != -EHOSTUNREACH)) {
            XT_ERR("cannot recover the commit group from the MDSLs: %s", strerror(-rc));
            goto out;
        }
        if (attempt % 20 == 0)
            XT_WARN("waiting for the MDSLs (%s)", strerror(-rc));
        struct timespec ts = { 0, 100 * 1000000L };
        nanosleep(&ts, NULL);
    }
    mds_cache_set_pressure(cache, mds_group_kick, group);
    struct mds_table_opts to = { .cache = cache, .group = group, .stats = stats,
                                 .split_threshold = (uint32_t)split };
    if ((rc = mds_table_new(&to, &table))) {
        XT_ERR("cannot create the table layer: %s", strerror(-rc));
        goto out;
    }
    struct mds_service svc = { .table = table, .group = group, .stats = stats };
    struct xt_rpc_server_opts ro = { .host = host, .port = port, .io_threads = (int)threads };
    if ((rc = mds_service_start(&svc, &ro, &srv))) {
        XT_ERR("cannot serve on %s: %s", listen, strerror(-rc));
        goto out;
    }
    int bound = xt_rpc_server_port(srv);
    if (port_file && (rc = xt_daemon_write_int_file(port_file, bound)) < 0)
        XT_ERR("cannot write %s: %s", port_file, strerror(-rc));
    XT_INFO("site %llu serving on %s:%d with %zu MDSL", (unsigned long long)site_id, host,
            bound, nmdsl);

    int sig = xt_daemon_wait_signal();
    XT_INFO("signal %d: committing and stopping", sig);
    rc = 0;
out:
    xt_rpc_server_stop(srv);
    mds_table_free(table);
    if (group)
        mds_group_close(group, true);
    mds_cache_free(cache);
    mds_store_rpc_free(rpc);
    mds_stats_free(stats);
    xt_ring_free(ring);
    return rc ? 1 : 0;
}
