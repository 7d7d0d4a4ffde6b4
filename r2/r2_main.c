/*
 * r2_main.c -- pom-r2, the site manager daemon: opens the state store
 * (embedded LevelDB under --data, or ZooKeeper with --zk), serves the R2
 * RPC service, and joins the leader election with its service address as
 * its id, so followers can name the leader. SIGTERM/SIGINT: stop serving,
 * leave the election, close the store (SIGHUP is logged and ignored).
 * SIGKILL at any moment is safe: every change is one atomic store
 * transaction.
 */
#include "r2_mgr.h"
#include "r2_service.h"
#include "r2_store.h"
#include "r2_store_embedded.h"
#include "r2_agent.h"
#include "r2_store_zk.h"

#include "xt_common.h"
#include "xt_daemon.h"
#include "xt_metrics.h"
#include "xt_rpc.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* /metrics (docs/metrics.md "pom-r2"): the view as this R2 holds it in
 * memory (only the leader has one), its requests, and the RPC server. */
struct metrics_src {
    r2_mgr *mgr;
    const struct r2_service *svc;
    xt_rpc_server *srv;
};

static void collect(void *arg, xt_metrics_buf *b)
{
    const struct metrics_src *m = arg;
    struct xt_view v;
    bool leads = r2_mgr_view_local(m->mgr, &v) == 0;
    xt_metrics_put_gauge(b, "pom_r2_leader", "1 while this R2 leads with its state loaded.",
                         leads ? 1 : 0);
    if (leads) {
        xt_metrics_put_gauge(b, "pom_r2_view_version", "Version of the cluster view.",
                             (double)v.version);
        xt_metrics_put_family(b, "pom_r2_sites", "gauge", "Registered sites by type and state.");
        char labels[64];
        for (int t = XT_SITE_MDS; t <= XT_SITE_R2; t++)
            for (int st = XT_SITE_UP; st <= XT_SITE_REMOVED; st++) {
                uint64_t n = 0;
                for (size_t i = 0; i < v.nsites; i++)
                    n += v.sites[i].type == t && v.sites[i].state == st;
                snprintf(labels, sizeof labels, "type=\"%s\",state=\"%s\"",
                         xt_site_type_name(t), xt_site_state_name(st));
                xt_metrics_put_u64(b, "pom_r2_sites", labels, n);
            }
        xt_metrics_put_gauge(b, "pom_r2_filesystems", "File systems.", (double)v.nfs);
        xt_view_free(&v);
    }
    xt_metrics_put_hist_family(b, "pom_r2_request_duration_seconds",
                               "Latency of R2 requests, from the handler's call to its return.",
                               "request", r2_service_request_names, m->svc->req, R2_SVC__COUNT);
    xt_metrics_put_family(b, "pom_r2_request_errors_total", "counter",
                          "R2 requests answered with an error (a follower's \"not the "
                          "leader\" among them).");
    char labels[48];
    for (unsigned i = 0; i < R2_SVC__COUNT; i++) {
        snprintf(labels, sizeof labels, "request=\"%s\"", r2_service_request_names[i]);
        xt_metrics_put_u64(b, "pom_r2_request_errors_total", labels,
                           atomic_load_explicit(&m->svc->errors[i], memory_order_relaxed));
    }
    xt_rpc_metrics_put(b, "pom_r2", m->srv);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: pom-r2 (--data DIR | --zk HOST:PORT,...) [options]\n"
            "  --data DIR               embedded store in DIR/r2 (one-machine cluster)\n"
            "  --zk HOSTS               ZooKeeper servers, HOST:PORT[,HOST:PORT...]\n"
            "  --zk-root PATH           znode prefix (default /pomegranate)\n"
            "  --session-timeout-ms N   ZooKeeper session timeout (default 10000)\n"
            "  --listen HOST:PORT       address to serve on (default 127.0.0.1:0, a free port)\n"
            "  --port-file FILE         write the port served on to FILE once serving\n"
            "  --hb-interval-ms N       expected heartbeat interval of sites (default 1000)\n"
            "  --fail-after N           missed intervals before a site fails (default 5)\n"
            "  --client-expire-ms N     a client site silent this long is removed (default 60000)\n"
            "  --threads N              handler threads (default 4)\n"
            "  --verbose                debug log\n");
    xt_rpc_server_flags_usage(f);
    xt_metrics_flags_usage(f);
}

struct args {
    const char *data, *zk, *zk_root, *listen, *port_file;
    uint64_t session_ms, hb_ms, fail_after, threads, client_expire_ms;
    struct xt_rpc_server_opts rpc; /* the limits of XT_RPC_SERVER_FLAGS */
    struct xt_metrics_opts metrics; /* XT_METRICS_FLAGS */
};

/* Returns 0, or 2 after printing why the arguments are wrong. */
static int parse(int argc, char **argv, struct args *a)
{
    static const struct option longopts[] = {
        { "data", required_argument, NULL, 'd' },
        { "zk", required_argument, NULL, 'z' },
        { "zk-root", required_argument, NULL, 'r' },
        { "session-timeout-ms", required_argument, NULL, 's' },
        { "listen", required_argument, NULL, 'l' },
        { "port-file", required_argument, NULL, 'p' },
        { "hb-interval-ms", required_argument, NULL, 'i' },
        { "fail-after", required_argument, NULL, 'f' },
        { "client-expire-ms", required_argument, NULL, 'e' },
        { "threads", required_argument, NULL, 't' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        XT_RPC_SERVER_FLAGS,
        XT_METRICS_FLAGS,
        { NULL, 0, NULL, 0 },
    };
    *a = (struct args){ .listen = "127.0.0.1:0", .session_ms = 10000, .hb_ms = 1000,
                        .fail_after = 5, .threads = 4,
                        .client_expire_ms = R2_MGR_CLIENT_EXPIRE_MS };
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        const char *what = NULL;
        switch (c) {
        case 'd': a->data = optarg; break;
        case 'z': a->zk = optarg; break;
        case 'r': a->zk_root = optarg; break;
        case 'l': a->listen = optarg; break;
        case 'p': a->port_file = optarg; break;
        case 's':
            if (xt_parse_u64(optarg, 1000, 600000, &a->session_ms))
                what = "--session-timeout-ms wants 1000..600000";
            break;
        case 'i':
            if (xt_parse_u64(optarg, 10, 600000, &a->hb_ms))
                what = "--hb-interval-ms wants 10..600000";
            break;
        case 'f':
            if (xt_parse_u64(optarg, 1, 1000, &a->fail_after))
                what = "--fail-after wants 1..1000";
            break;
        case 'e':
            if (xt_parse_u64(optarg, 100, 86400000, &a->client_expire_ms))
                what = "--client-expire-ms wants 100..86400000";
            break;
        case 't':
            if (xt_parse_u64(optarg, 1, 256, &a->threads))
                what = "--threads wants 1..256";
            break;
        case 'v': xt_log_set_level(XT_LOG_DEBUG); break;
        case 'h': usage(stdout); exit(0);
        default: {
            if (xt_metrics_flag(c, optarg, &a->metrics))
                break;
            int r = xt_rpc_server_flag(c, optarg, &a->rpc, "pom-r2");
            if (r == 0)
                usage(stderr);
            if (r <= 0)
                return 2;
        }
        }
        if (what) {
            fprintf(stderr, "pom-r2: %s, got '%s'\n", what, optarg);
            return 2;
        }
    }
    if (optind != argc || (!a->data == !a->zk)) {
        fprintf(stderr, "pom-r2: give exactly one of --data DIR and --zk HOSTS\n");
        usage(stderr);
        return 2;
    }
    if (a->metrics.addr_file && !a->metrics.listen) {
        fprintf(stderr, "pom-r2: --metrics-file wants --metrics-listen\n");
        return 2;
    }
    return 0;
}

static int open_store(const struct args *a, r2_store **out)
{
    if (a->zk) {
        r2_store_zk_options zo = { .hosts = a->zk, .root = a->zk_root,
                                   .session_timeout_ms = (int)a->session_ms };
        int rc = r2_store_zk_open(&zo, out);
        if (rc < 0)
            fprintf(stderr, "pom-r2: cannot open the ZooKeeper store at %s: %s\n", a->zk,
                    rc == -ENOTCONN ? "no server answered" : strerror(-rc));
        return rc;
    }
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/r2", a->data) >= (int)sizeof dir)
        return -ENAMETOOLONG;
    if (mkdir(a->data, 0755) < 0 && errno != EEXIST) {
        int e = errno;
        fprintf(stderr, "pom-r2: cannot create %s: %s\n", a->data, strerror(e));
        return -e;
    }
    int rc = r2_store_embedded_open(dir, out);
    if (rc < 0)
        fprintf(stderr, "pom-r2: cannot open the store in %s: %s\n", dir,
                rc == -EBUSY ? "in use by another pom-r2" : strerror(-rc));
    return rc;
}

/* r2_mgr's stall probe: heartbeats wait while no server thread is free. */
static uint64_t server_stall(void *srv)
{
    return xt_rpc_server_stall_ns(srv);
}

int main(int argc, char **argv)
{
    struct args a;
    int rc = parse(argc, argv, &a);
    if (rc)
        return rc;
    char host[200];
    int port = 0;
    if (xt_rpc_parse_listen(a.listen, host, sizeof host, &port)) {
        fprintf(stderr, "pom-r2: bad --listen '%s' (want HOST:PORT)\n", a.listen);
        return 2;
    }

    xt_daemon_block_signals();
    xt_log_set_prefix("r2");
    if (xt_rpc_server_flags_done(&a.rpc, host, "pom-r2") < 0)
        return 2;

    r2_store *store = NULL;
    if (open_store(&a, &store) < 0)
        return 1;
    r2_mgr *mgr = NULL;
    struct xt_rpc_server_opts ro = a.rpc;
    ro.host = host;
    ro.port = port;
    ro.io_threads = 2;
    ro.workers = (int)a.threads;
    xt_rpc_server *srv = NULL;
    /* The manager starts without its address when the port is 0: it is
     * known once listening, and needed only from the election on. */
    struct r2_mgr_opts mo = { .store = store, .self_addr = a.listen,
                              .hb_interval_ms = (unsigned)a.hb_ms,
                              .fail_after = (unsigned)a.fail_after,
                              .client_expire_ms = (unsigned)a.client_expire_ms };
    rc = r2_mgr_new(&mo, &mgr);
    static struct r2_service svc; /* zeroed; outlives the server */
    svc.mgr = mgr;
    if (rc == 0)
        rc = r2_service_start(&svc, &ro, &srv);
    if (rc < 0) {
        XT_ERR("cannot serve on %s: %s", a.listen, strerror(-rc));
        r2_mgr_free(mgr);
        r2_store_close(store);
        return 1;
    }
    r2_mgr_set_stall_probe(mgr, server_stall, srv);
    struct metrics_src msrc = { .mgr = mgr, .svc = &svc, .srv = srv };
    xt_metrics *metrics = NULL;
    a.metrics.collect = collect;
    a.metrics.arg = &msrc;
    if (a.metrics.listen && (rc = xt_metrics_start(&a.metrics, &metrics)) < 0) {
        XT_ERR("cannot serve metrics on %s: %s", a.metrics.listen, strerror(-rc));
        r2_mgr_set_stall_probe(mgr, NULL, NULL);
        xt_rpc_server_stop(srv);
        r2_mgr_free(mgr);
        r2_store_close(store);
        return 1;
    }
    if (metrics)
        XT_INFO("metrics on http://%s/metrics", xt_metrics_addr(metrics));
    char self[XT_ADDR_MAX + 16];
    snprintf(self, sizeof self, "%s:%d", host, xt_rpc_server_port(srv));
    r2_mgr_set_self(mgr, self);
    rc = r2_store_elect(store, self, strlen(self), r2_mgr_leader_cb, mgr);
    if (rc < 0) {
        XT_ERR("cannot join the election: %s", strerror(-rc));
        xt_metrics_stop(metrics);
        r2_mgr_set_stall_probe(mgr, NULL, NULL);
        xt_rpc_server_stop(srv);
        r2_mgr_free(mgr);
        r2_store_close(store);
        return 1;
    }
    if (a.port_file && (rc = xt_daemon_write_int_file(a.port_file, xt_rpc_server_port(srv))) < 0)
        XT_ERR("cannot write %s: %s", a.port_file, strerror(-rc));
    /* Every R2 is a site of the cluster too: it registers and heartbeats
     * like the others (through its own address; a follower's agent is sent
     * on to the leader), so `pomctl status` shows a dead R2 as failed. */
    char idfile[4200];
    if (a.data)
        snprintf(idfile, sizeof idfile, "%s/r2/site_id", a.data);
    struct r2_agent_opts ao = { .r2_addrs = self, .type = XT_SITE_R2, .addr = self,
                                .id_file = a.data ? idfile : NULL,
                                .metrics = metrics ? xt_metrics_addr(metrics) : NULL,
                                .hb_interval_ms = (unsigned)a.hb_ms };
    r2_agent *agent = NULL;
    if ((rc = r2_agent_start(&ao, &agent)) < 0)
        XT_WARN("cannot register this R2 as a site: %s", strerror(-rc));
    XT_INFO("serving on %s, store %s%s%s, heartbeat %llu ms, fail after %llu", self,
            r2_store_backend(store), a.zk ? " " : "", a.zk ? a.zk : "",
            (unsigned long long)a.hb_ms, (unsigned long long)a.fail_after);

    int sig; /* SIGHUP: nothing to report yet, and a stray hangup must not stop R2 */
    while ((sig = xt_daemon_wait_signal()) == SIGHUP)
        XT_INFO("SIGHUP: still running (SIGINT or SIGTERM stop)");
    XT_INFO("signal %d: stopping", sig);
    r2_agent_stop(agent);
    xt_metrics_stop(metrics); /* it reads the manager and the server */
    r2_mgr_set_stall_probe(mgr, NULL, NULL);
    xt_rpc_server_stop(srv); /* no more calls */
    r2_mgr_stop(mgr);        /* no more ticks using the store */
    r2_store_resign(store);
    r2_store_close(store);   /* no more election callbacks */
    r2_mgr_free(mgr);
    return 0;
}
