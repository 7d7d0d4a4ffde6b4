/*
 * mdsl_main.c -- pom-mdsl, the storage server: opens the store under
 * --dir (liburing I/O, recovery of torn tails and prepared transactions),
 * serves the Storage RPC service, and on SIGTERM/SIGINT stops serving and
 * closes the store (SIGHUP logs its counters). With --r2 it registers,
 * heartbeats, and reports its ring-1 counts (mdsl_ring1.h); with
 * --mdsl-replicas above 1 it also catches up from its peers what its
 * replica sets give it (mdsl_catchup.h) and heartbeats how many slices it
 * still lacks. SIGKILL at any moment is safe: that is what the store's
 * recovery is for.
 *
 * TEST ONLY (docs/testing-faults.md): `--fault SPEC` injects faults from
 * the start: a comma-separated list of "io:eio:after=N", "io:enospc:after=N"
 * (the fault backend of mdsl_io_fault.c wraps liburing; append ":sticky" to
 * fail every later op too) and "alloc:after=N" (xt_alloc_fail_after(N),
 * armed once serving: every allocation after the N-th fails).
 * `--crash-point NAME[:N]` arms a crash point (xt_crash.h) of the store.
 */
#include "mdsl_catchup.h"
#include "mdsl_ring1.h"
#include "mdsl_service.h"
#include "mdsl_store.h"
#include "r2_agent.h"

#include "xt_common.h"
#include "xt_daemon.h"
#include "xt_metrics.h"
#include "xt_rpc.h"

#include <getopt.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

/* The storage this MDSL reports to R2 in its heartbeats (docs/r2.md
 * "Capacity and quotas"): the statvfs of its folder and its segment bytes. */
struct storage_src {
    mdsl_store *store;
    const char *dir;
    mdsl_catchup *catchup;  /* NULL: no replicas */
};

static void report_storage(void *arg, struct xt_r2_hb_usage *u)
{
    const struct storage_src *ss = arg;
    struct statvfs sv;
    struct stat st;
    struct mdsl_stat ms;
    if (statvfs(ss->dir, &sv) < 0 || stat(ss->dir, &st) < 0)
        return; /* none this time: R2 keeps no stale figure for long */
    u->has_storage = true;
    u->storage.size = (uint64_t)sv.f_blocks * sv.f_frsize;
    u->storage.avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    u->storage.dev = (uint64_t)st.st_dev;
    if (mdsl_store_stat(ss->store, &ms) == 0)
        u->storage.used = ms.bytes;
    struct mdsl_catchup_stat cs;
    mdsl_catchup_stat(ss->catchup, &cs);
    u->has_repl = cs.under_replicated >= 0;
    u->under_replicated = u->has_repl ? (uint64_t)cs.under_replicated : 0;
}

/* /metrics (docs/metrics.md "pom-mdsl"): the store's counters
 * (mdsl_store_stat, in memory under the store's lock) and the RPC server. */
struct metrics_src {
    mdsl_store *store;
    mdsl_catchup *catchup;      /* NULL: no replicas */
    const struct mdsl_service *svc;
    xt_rpc_server *srv;
    mdsl_ring1 *_Atomic ring1;  /* set once the reporter runs, NULL before */
};

static void collect(void *arg, xt_metrics_buf *b)
{
    const struct metrics_src *m = arg;
    struct mdsl_stat st;
    if (mdsl_store_stat(m->store, &st) == 0) {
        xt_metrics_put_gauge(b, "pom_mdsl_tables", "Table folders stored.", (double)st.tables);
        xt_metrics_put_gauge(b, "pom_mdsl_segments", "Segment files.", (double)st.segments);
        xt_metrics_put_gauge(b, "pom_mdsl_segment_bytes", "Bytes in segment files.",
                             (double)st.bytes);
        xt_metrics_put_gauge(b, "pom_mdsl_live_bytes",
                             "Bytes of the records the index points at.",
                             (double)st.live_bytes);
        xt_metrics_put_gauge(b, "pom_mdsl_live_ratio", "live_bytes / segment_bytes.",
                             st.live_ratio);
        xt_metrics_put_counter(b, "pom_mdsl_written_bytes_total",
                               "Record bytes appended by prepares.", st.written_bytes);
        xt_metrics_put_gauge(b, "pom_mdsl_prepared", "Prepared transactions undecided.",
                             (double)st.prepared);
        xt_metrics_put_counter(b, "pom_mdsl_commits_total", "Transactions committed.",
                               st.commits);
        xt_metrics_put_counter(b, "pom_mdsl_aborts_total", "Transactions aborted.", st.aborts);
        xt_metrics_put_counter(b, "pom_mdsl_gc_passes_total", "GC passes.", st.gc_passes);
        xt_metrics_put_counter(b, "pom_mdsl_gc_moved_bytes_total",
                               "Live bytes GC copied out of old segments.", st.gc_moved_bytes);
        xt_metrics_put_counter(b, "pom_mdsl_gc_freed_segments_total", "Segments GC freed.",
                               st.gc_freed_segments);
        xt_metrics_put_counter(b, "pom_mdsl_gc_freed_bytes_total", "Segment bytes GC freed.",
                               st.gc_freed_bytes);
        if (m->svc->blob) {
            struct mdsl_blob_stat bs;
            mdsl_blob_stat(m->svc->blob, &bs);
            xt_metrics_put_counter(b, "pom_mdsl_blob_gc_segments_total",
                                   "Blob segments GC rewrote.", bs.gc_segments);
            xt_metrics_put_counter(b, "pom_mdsl_blob_gc_freed_bytes_total",
                                   "Blob segment bytes GC freed.", bs.gc_bytes);
        }
        xt_metrics_put_counter(b, "pom_mdsl_dropped_folders_total",
                               "Folders dropped whole after their slices moved.",
                               st.dropped_folders);
        xt_metrics_put_counter(b, "pom_mdsl_dropped_bytes_total", "Bytes of dropped folders.",
                               st.dropped_bytes);
        xt_metrics_put_counter(b, "pom_mdsl_rolled_segments_total", "Active segments rolled.",
                               st.rolled_segments);
        xt_metrics_put_counter(b, "pom_mdsl_sweeps_total", "Sweeps run to their end.",
                               st.sweeps);
        xt_metrics_put_counter(b, "pom_mdsl_corrupt_records_total",
                               "Checksum failures seen by reads and scans.",
                               st.corrupt_records);
        xt_metrics_put_gauge(b, "pom_mdsl_failed",
                             "1 once a write error stopped the store's writes.",
                             st.failed ? 1 : 0);
    }
    {
        /* Served without a catch-up too (one replica: -1 and zeros), so
         * every MDSL serves the same families. */
        struct mdsl_catchup_stat cs;
        mdsl_catchup_stat(m->catchup, &cs);
        xt_metrics_put_gauge(b, "pom_mdsl_under_replicated",
                             "Slices this MDSL should hold and does not yet (-1: not counted).",
                             (double)cs.under_replicated);
        xt_metrics_put_counter(b, "pom_mdsl_catchup_slices_total",
                               "Slices copied from peers by the catch-up.", cs.pulled_slices);
        xt_metrics_put_counter(b, "pom_mdsl_catchup_bytes_total",
                               "Record bytes copied from peers by the catch-up.",
                               cs.pulled_bytes);
    }
    {
        uint64_t moved, bytes, dropped, owed;
        mdsl_ring1_tracts(atomic_load(&m->ring1), &moved, &bytes, &dropped, &owed);
        xt_metrics_put_counter(b, "pom_mdsl_tracts_moved_total",
                               "Tract copies put to peers after ring-1 changes.", moved);
        xt_metrics_put_counter(b, "pom_mdsl_tract_moved_bytes_total",
                               "Bytes of the tract copies put to peers.", bytes);
        xt_metrics_put_counter(b, "pom_mdsl_tracts_dropped_total",
                               "Tract copies dropped here once their new set held them.",
                               dropped);
        xt_metrics_put_gauge(b, "pom_mdsl_tracts_owed",
                             "Tracts the last ring-1 pass could not yet place.", (double)owed);
    }
    char labels[48];
    xt_metrics_put_hist_family(b, "pom_mdsl_op_duration_seconds",
                               "Latency of Storage requests, from the handler's call to its "
                               "return.", "op", mdsl_service_op_names, m->svc->op,
                               MDSL_SVC__COUNT);
    xt_metrics_put_family(b, "pom_mdsl_op_errors_total", "counter",
                          "Storage requests that returned an error.");
    for (unsigned i = 0; i < MDSL_SVC__COUNT; i++) {
        snprintf(labels, sizeof labels, "op=\"%s\"", mdsl_service_op_names[i]);
        xt_metrics_put_u64(b, "pom_mdsl_op_errors_total", labels,
                           atomic_load_explicit(&m->svc->errors[i], memory_order_relaxed));
    }
    xt_rpc_metrics_put(b, "pom_mdsl", m->srv);
}

/* Parses --fault (test only, see the file comment) into the I/O fault
 * (*io_after -1: none; *io_err, *io_sticky) and *alloc_after (-1: none). -EINVAL on a
 * malformed value: the daemon refuses to start rather than run unfaulted. */
static int parse_fault(const char *spec, long *io_after, int *io_err, bool *io_sticky,
                       long *alloc_after)
{
    char buf[256];
    if (strlen(spec) >= sizeof buf)
        return -EINVAL;
    strcpy(buf, spec);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char kind[16] = "";
        long n = -1;
        int used = 0;
        if (sscanf(t, "alloc:after=%ld%n", &n, &used) == 1 && !t[used] && n >= 0) {
            *alloc_after = n;
        } else if (sscanf(t, "io:%15[a-z]:after=%ld%n", kind, &n, &used) == 2 && n >= 0 &&
                   (!t[used] || !strcmp(t + used, ":sticky")) &&
                   (!strcmp(kind, "eio") || !strcmp(kind, "enospc"))) {
            *io_after = n;
            *io_err = strcmp(kind, "eio") ? -ENOSPC : -EIO;
            *io_sticky = t[used] != 0;
        } else {
            return -EINVAL;
        }
    }
    return 0;
}

/* The crash points of the store, for --crash-point. */
static const char *const crash_points[] = { MDSL_CRASH_SWEEP, NULL };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pom-mdsl --dir DIR [options]\n"
            "  --dir DIR            data folder (segments, index)\n"
            "  --listen HOST:PORT   address to serve on (default 127.0.0.1:0, any free port)\n"
            "  --port-file FILE     write the port served on to FILE once listening\n"
            "  --threads N          server threads (default 4)\n"
            "  --seg-size BYTES     segment size (default 64M; at most a 16th of the device)\n"
            "  --reserve BYTES      free space kept for deletes, truncates and GC: prepares\n"
            "                       that add data answer ENOSPC under it (default a 16th\n"
            "                       of the device, 1M..256M; 0 = none)\n"
            "  --gc-threshold F     collect segments under this live ratio (default 0.25)\n"
            "  --gc-rate BYTES      GC budget per second (default 32M; 0 = unthrottled)\n"
            "  --gc-interval MS     period of the background GC pass (default 1000)\n"
            "  --tract-move-rate BYTES  ring-1 change: blob tract bytes put to peers per\n"
            "                       second (default 16M; 0 = unthrottled)\n"
            "  --r2 ADDRS           register with R2 (HOST:PORT[,HOST:PORT...]) and heartbeat\n"
            "  --capacity BYTES     capacity announced to R2 (default 0)\n"
            "  --hb-interval-ms N   heartbeat interval, as pom-r2's (default 1000)\n"
            "  --mdsl-replicas R    the cluster's MDSL replicas, as every pom-mds's: above 1,\n"
            "                       catch up from the peers what the replica sets give\n"
            "                       this MDSL (docs/mdsl-replicas.md; default 1)\n"
            "  --verbose            debug log\n"
            "  --fault SPEC         TEST ONLY: inject faults from the start, a comma list of\n"
            "                       io:eio:after=N, io:enospc:after=N (:sticky: every later\n"
            "                       op too) and alloc:after=N (docs/testing-faults.md)\n");
    xt_daemon_crash_usage(f, crash_points);
    xt_rpc_server_flags_usage(f);
    xt_metrics_flags_usage(f);
}

/* The R2 agent once it runs (NULL before): client_key_gen reads its view. */
static _Atomic(r2_agent *) key_agent;

/* xt_rpc_server_opts.key_gen: a client key of an fs R2 lists opens the
 * tract calls of that fs (mdsl_service.c "Roles"); before the agent has a
 * view, -ENOENT makes the client retry. At connect only. */
static int client_key_gen(void *ctx, int32_t fsid, uint64_t *gen)
{
    (void)ctx;
    r2_agent *a = atomic_load(&key_agent);
    struct xt_view v;
    if (!a || r2_agent_view_copy(a, &v) < 0)
        return -ENOENT;
    int rc = -ENOENT;
    for (size_t i = 0; i < v.nfs; i++)
        if (v.fs[i].fsid == (uint32_t)fsid) {
            *gen = v.fs[i].key_gen;
            rc = 0;
        }
    xt_view_free(&v);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "dir", required_argument, NULL, 'd' },
        { "listen", required_argument, NULL, 'l' },
        { "port-file", required_argument, NULL, 'p' },
        { "threads", required_argument, NULL, 't' },
        { "seg-size", required_argument, NULL, 's' },
        { "reserve", required_argument, NULL, 'S' },
        { "gc-threshold", required_argument, NULL, 'g' },
        { "gc-rate", required_argument, NULL, 'r' },
        { "gc-interval", required_argument, NULL, 'i' },
        { "tract-move-rate", required_argument, NULL, 'T' },
        { "r2", required_argument, NULL, 'R' },
        { "capacity", required_argument, NULL, 'C' },
        { "hb-interval-ms", required_argument, NULL, 'H' },
        { "mdsl-replicas", required_argument, NULL, 'Q' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { "fault", required_argument, NULL, 'F' },
        { "crash-point", required_argument, NULL, 'K' },
        XT_RPC_SERVER_FLAGS,
        XT_METRICS_FLAGS,
        { NULL, 0, NULL, 0 },
    };
    /* XT_RPC_SERVER_FLAGS; prepares carry a whole commit group's slice images. */
    struct xt_rpc_server_opts ro = { .max_frame_bytes = XT_RPC_MAX_FRAME };
    struct metrics_src msrc = { 0 };
    struct xt_metrics_opts mo = { .collect = collect, .arg = &msrc }; /* XT_METRICS_FLAGS */
    const char *dir = NULL, *listen = "127.0.0.1:0", *port_file = NULL;
    uint64_t threads = 4, seg_size = 64u << 20, gc_rate = 32u << 20, gc_interval = 1000;
    uint64_t reserve = 0; /* the store's default */
    uint64_t tract_move_rate = 16u << 20; /* as pom-mds's --move-rate */
    double gc_threshold = 0.25;
    const char *r2_addrs = NULL;
    uint64_t capacity = 0, hb_ms = 1000, replicas = 1;
    const char *fault = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'l': listen = optarg; break;
        case 'p': port_file = optarg; break;
        case 't':
            if (xt_parse_u64(optarg, 1, 256, &threads)) {
                fprintf(stderr, "pom-mdsl: --threads wants 1..256, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 's':
            if (xt_parse_u64(optarg, 64u << 10, 1ull << 32, &seg_size)) {
                fprintf(stderr, "pom-mdsl: --seg-size wants 64K..4G, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'S':
            if (xt_parse_u64(optarg, 0, UINT64_MAX - 1, &reserve)) {
                fprintf(stderr, "pom-mdsl: bad --reserve '%s'\n", optarg);
                return 2;
            }
            if (reserve == 0)
                reserve = UINT64_MAX; /* none */
            break;
        case 'g': {
            char *end = NULL;
            gc_threshold = strtod(optarg, &end);
            if (!end || *end || gc_threshold <= 0 || gc_threshold >= 1) {
                fprintf(stderr, "pom-mdsl: --gc-threshold wants a ratio in (0,1), got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        }
        case 'T':
            if (xt_parse_u64(optarg, 0, UINT64_MAX / 2, &tract_move_rate)) {
                fprintf(stderr, "pom-mdsl: bad --tract-move-rate '%s'\n", optarg);
                return 2;
            }
            break;
        case 'r':
            if (xt_parse_u64(optarg, 0, UINT64_MAX, &gc_rate)) {
                fprintf(stderr, "pom-mdsl: bad --gc-rate '%s'\n", optarg);
                return 2;
            }
            break;
        case 'i':
            if (xt_parse_u64(optarg, 1, 3600000, &gc_interval)) {
                fprintf(stderr, "pom-mdsl: --gc-interval wants 1..3600000 ms, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'R': r2_addrs = optarg; break;
        case 'C':
            if (xt_parse_u64(optarg, 0, UINT64_MAX, &capacity)) {
                fprintf(stderr, "pom-mdsl: bad --capacity '%s'\n", optarg);
                return 2;
            }
            break;
        case 'H':
            if (xt_parse_u64(optarg, 10, 600000, &hb_ms)) {
                fprintf(stderr, "pom-mdsl: --hb-interval-ms wants 10..600000, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'Q':
            if (xt_parse_u64(optarg, 1, 16, &replicas)) {
                fprintf(stderr, "pom-mdsl: --mdsl-replicas wants 1..16, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'v': xt_log_set_level(XT_LOG_DEBUG); break;
        case 'h': usage(stdout); return 0;
        case 'F': fault = optarg; break;
        case 'K':
            if (xt_daemon_crash_option(optarg, crash_points) < 0)
                return 2;
            break;
        default: {
            if (xt_metrics_flag(c, optarg, &mo))
                break;
            int r = xt_rpc_server_flag(c, optarg, &ro, "pom-mdsl");
            if (r == 0)
                usage(stderr);
            if (r <= 0)
                return 2;
        }
        }
    }
    if (!dir || optind != argc || (mo.addr_file && !mo.listen)) {
        usage(stderr);
        return 2;
    }
    char host[256];
    int port;
    if (xt_rpc_parse_listen(listen, host, sizeof host, &port)) {
        fprintf(stderr, "pom-mdsl: bad --listen '%s' (want HOST:PORT)\n", listen);
        return 2;
    }

    xt_daemon_block_signals();
    xt_log_set_prefix("mdsl");
    if (xt_rpc_server_flags_done(&ro, host, "pom-mdsl") < 0)
        return 2;

    long fault_io_after = -1, fault_alloc_after = -1;
    int fault_err = -EIO;
    bool fault_sticky = false;
    if (fault && parse_fault(fault, &fault_io_after, &fault_err, &fault_sticky,
                             &fault_alloc_after)) {
        fprintf(stderr, "pom-mdsl: bad --fault '%s' (see docs/testing-faults.md)\n", fault);
        return 2;
    }

    mdsl_io *io = NULL, *uring = NULL;
    int rc = mdsl_io_uring_new(256, &uring);
    if (rc < 0) {
        XT_ERR("cannot set up io_uring: %s", strerror(-rc));
        return 1;
    }
    io = uring;
    if (fault) {
        XT_WARN("--fault '%s': TEST-ONLY fault injection is on", fault);
        if (fault_io_after >= 0) {
            if ((rc = mdsl_io_fault_new(uring, 1, &io)) < 0) {
                XT_ERR("cannot set up the fault backend: %s", strerror(-rc));
                mdsl_io_destroy(uring);
                return 1;
            }
            mdsl_io_fault_countdown(io, fault_io_after, fault_err, fault_sticky);
        }
    }
    struct mdsl_store_opts so = {
        .io = io, .dir = dir, .seg_size = seg_size, .gc_threshold = gc_threshold,
        .gc_bytes_per_sec = gc_rate, .gc_thread = true, .gc_interval_ms = (unsigned)gc_interval,
        .reserve_bytes = reserve,
    };
    mdsl_store *store = NULL;
    rc = mdsl_store_open(&so, &store);
    if (rc < 0) {
        XT_ERR("cannot open store in %s: %s", dir, strerror(-rc));
        if (io != uring)
            mdsl_io_destroy(io);
        mdsl_io_destroy(uring);
        return 1;
    }
    char blob_dir[4200];
    snprintf(blob_dir, sizeof blob_dir, "%s/blob", dir);
    struct mdsl_blob_opts bo = { .io = io, .dir = blob_dir,
                                 .gc_interval_ms = (unsigned)gc_interval };
    mdsl_blob *blob = NULL;
    if ((rc = mdsl_blob_open(&bo, &blob)) < 0) {
        mdsl_store_close(store);
        if (io != uring)
            mdsl_io_destroy(io);
        mdsl_io_destroy(uring);
        return 1;
    }
    ro.host = host;
    ro.port = port;
    ro.io_threads = (int)threads;
    ro.key_gen = client_key_gen;
    xt_rpc_server *srv = NULL;
    /* The handlers' context outlives the server: static storage. */
    static struct mdsl_service svc;
    svc.store = store;
    /* Started before the server (its stat reads it), attached to the agent
     * once that runs: it idles until then. */
    mdsl_catchup *catchup = NULL;
    if (r2_addrs && replicas > 1) {
        struct mdsl_catchup_opts co = { .store = store, .replicas = (uint32_t)replicas };
        if ((rc = mdsl_catchup_start(&co, &catchup)) < 0) {
            XT_ERR("cannot start the catch-up: %s", strerror(-rc));
            mdsl_store_close(store);
            if (io != uring)
                mdsl_io_destroy(io);
            mdsl_io_destroy(uring);
            return 1;
        }
    }
    svc.catchup = catchup;
    svc.blob = blob;
    rc = mdsl_service_start(&svc, &ro, &srv);
    if (rc < 0) {
        XT_ERR("cannot serve on %s: %s", listen, strerror(-rc));
        mdsl_catchup_free(catchup);
        mdsl_store_close(store);
        mdsl_blob_close(blob);
        if (io != uring)
            mdsl_io_destroy(io);
        mdsl_io_destroy(uring);
        return 1;
    }
    msrc.store = store;
    msrc.catchup = catchup;
    msrc.svc = &svc;
    msrc.srv = srv;
    xt_metrics *metrics = NULL;
    if (mo.listen && (rc = xt_metrics_start(&mo, &metrics)) < 0) {
        XT_ERR("cannot serve metrics on %s: %s", mo.listen, strerror(-rc));
        xt_rpc_server_stop(srv);
        mdsl_catchup_free(catchup);
        mdsl_store_close(store);
        mdsl_blob_close(blob);
        if (io != uring)
            mdsl_io_destroy(io);
        mdsl_io_destroy(uring);
        return 1;
    }
    if (metrics)
        XT_INFO("metrics on http://%s/metrics", xt_metrics_addr(metrics));
    int bound = xt_rpc_server_port(srv);
    if (port_file && (rc = xt_daemon_write_int_file(port_file, bound)) < 0)
        XT_ERR("cannot write %s: %s", port_file, strerror(-rc));
    XT_INFO("serving %s on %s:%d", dir, host, bound);
    if (fault_alloc_after >= 0)
        xt_alloc_fail_after(fault_alloc_after);
    /* Registered only once serving; nothing is deregistered at exit: R2
     * notices the silence. The site id survives restarts in DIR/site_id. */
    r2_agent *agent = NULL;
    mdsl_ring1 *r1rep = NULL;
    struct storage_src ssrc = { .store = store, .dir = dir, .catchup = catchup };
    if (r2_addrs) {
        /* Paced so a pass of a large index yields to prepares: 1,024
         * slices, then 2 ms (~500k slices/s at most). */
        struct mdsl_ring1_opts r1o = { .store = store, .interval_ms = 1000, .page = 1024,
                                       .pause_ms = 2, .blob = blob,
                                       .tract_move_rate = tract_move_rate };
        if ((rc = mdsl_ring1_start(&r1o, &r1rep)) < 0)
            XT_ERR("cannot start the ring-1 reporter: %s", strerror(-rc));
        atomic_store(&msrc.ring1, r1rep);
        char self[300], id_file[4200];
        snprintf(self, sizeof self, "%s:%d", host, bound);
        snprintf(id_file, sizeof id_file, "%s/site_id", dir);
        struct r2_agent_opts ao = { .r2_addrs = r2_addrs, .type = XT_SITE_MDSL, .addr = self,
                                    .capacity = capacity, .id_file = id_file,
                                    .metrics = metrics ? xt_metrics_addr(metrics) : NULL,
                                    .hb_interval_ms = (unsigned)hb_ms,
                                    .usage = report_storage, .usage_arg = &ssrc };
        if (r1rep) {
            ao.on_view = mdsl_ring1_view;
            ao.view_arg = r1rep;
            ao.on_id = mdsl_ring1_id;
            ao.id_arg = r1rep;
            ao.ring1 = mdsl_ring1_fill;
            ao.ring1_arg = r1rep;
        }
        if (rc == 0 && (rc = r2_agent_start(&ao, &agent)) == 0)
            atomic_store(&key_agent, agent);
        if (rc < 0) {
            if (r1rep)
                XT_ERR("cannot start the R2 agent for --r2 '%s': %s", r2_addrs,
                       strerror(-rc));
            atomic_store(&msrc.ring1, NULL);
            mdsl_ring1_stop(r1rep);
            xt_metrics_stop(metrics);
            xt_rpc_server_stop(srv);
            mdsl_catchup_free(catchup);
            mdsl_store_close(store);
            mdsl_blob_close(blob);
            if (io != uring)
                mdsl_io_destroy(io);
            mdsl_io_destroy(uring);
            return 1;
        }
        if (catchup)
            mdsl_catchup_attach(catchup, agent);
    }

    /* SIGHUP logs the store's counters and goes on (as pom-mds does: a
     * stray hangup must not stop a storage server); SIGINT/SIGTERM stop. */
    int sig;
    while ((sig = xt_daemon_wait_signal()) == SIGHUP) {
        struct mdsl_stat st;
        if (mdsl_store_stat(store, &st) == 0)
            XT_INFO("stats: tables %llu segments %llu bytes %llu live %.2f commits %llu "
                    "aborts %llu gc_passes %llu gc_freed_segments %llu gc_freed_bytes %llu "
                    "dropped_folders %llu dropped_bytes %llu rolled_segments %llu sweeps %llu "
                    "corrupt %llu failed %d live_bytes %llu sweep_owed %llu",
                    (unsigned long long)st.tables, (unsigned long long)st.segments,
                    (unsigned long long)st.bytes, st.live_ratio,
                    (unsigned long long)st.commits, (unsigned long long)st.aborts,
                    (unsigned long long)st.gc_passes, (unsigned long long)st.gc_freed_segments,
                    (unsigned long long)st.gc_freed_bytes, (unsigned long long)st.dropped_folders,
                    (unsigned long long)st.dropped_bytes, (unsigned long long)st.rolled_segments,
                    (unsigned long long)st.sweeps, (unsigned long long)st.corrupt_records,
                    st.failed, (unsigned long long)st.live_bytes,
                    (unsigned long long)st.sweep_owed);
    }
    XT_INFO("signal %d: stopping", sig);
    xt_metrics_stop(metrics); /* it reads the store, the server and the reporter */

    atomic_store(&key_agent, NULL); /* the server still runs: no view after the stop */
    mdsl_catchup_stop(catchup); /* its thread reads the agent */
    r2_agent_stop(agent); /* then: its callbacks use the reporter and the catch-up */
    mdsl_ring1_stop(r1rep);
    xt_rpc_server_stop(srv);
    mdsl_catchup_free(catchup);
    mdsl_store_close(store);
    mdsl_blob_close(blob);
    if (fault) /* for sizing the tests' countdown ranges */
        XT_WARN("--fault: %ld I/O ops counted, %ld allocations failed",
                io != uring ? mdsl_io_fault_ops(io) : 0L, xt_alloc_fail_after(-1));
    if (io != uring)
        mdsl_io_destroy(io);
    mdsl_io_destroy(uring);
    return 0;
}
