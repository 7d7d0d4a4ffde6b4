/*
 * bench_rpc.c -- one RPC round trip (Common.ping over Thrift, framed binary
 * protocol) against a raw TCP ping-pong of the same payload, in one run.
 *
 * Both servers live in this process on loopback; both clients send one
 * length-prefixed message and wait for the echo. Rounds of the two are
 * interleaved and the median of the rounds is reported, because this
 * machine is shared and noisy. The ratio rpc/raw is the number to watch
 * (target: <= 1.5). Then the cost of authentication and of TLS: a fresh
 * connection and calls on an open one against an open server, a keyed
 * one and a keyed one over TLS (certificates made with openssl(1)).
 *
 * Then authentication (docs/security.md): a server with a cluster key
 * beside one in open mode (both 1 thread): the cost of a new connection
 * (connect, handshake, first ping, close) and of a call on a connection
 * already made, 64-byte payload, with their ratios keyed/open.
 *
 * usage: bench_rpc [--quick] [--iters N]
 */
#include "xt_common.h"
#include "xt_rpc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int read_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

struct raw_server {
    int lfd;
    int port;
    pthread_t thr;
};

static void *raw_serve(void *arg)
{
    struct raw_server *rs = arg;
    int fd = accept(rs->lfd, NULL, NULL);
    if (fd < 0)
        return NULL;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char *buf = malloc(1 << 20);
    for (;;) {
        uint32_t len;
        if (read_all(fd, buf, 4))
            break;
        memcpy(&len, buf, 4);
        if (len > (1u << 20) - 4 || read_all(fd, buf + 4, len))
            break;
        if (write_all(fd, buf, 4 + (size_t)len)) /* one write, as a framed reply */
            break;
    }
    free(buf);
    close(fd);
    return NULL;
}

static int raw_start(struct raw_server *rs)
{
    rs->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(rs->lfd, (struct sockaddr *)&a, sizeof a) || listen(rs->lfd, 4))
        return -errno;
    socklen_t l = sizeof a;
    getsockname(rs->lfd, (struct sockaddr *)&a, &l);
    rs->port = ntohs(a.sin_port);
    return pthread_create(&rs->thr, NULL, raw_serve, rs) ? -EAGAIN : 0;
}

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (connect(fd, (struct sockaddr *)&a, sizeof a))
        return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* Mean round trip in ns over n calls. */
static double raw_round(int fd, char *buf, uint32_t size, int n)
{
    uint64_t t0 = xt_mono_ns();
    for (int i = 0; i < n; i++) {
        uint32_t len = size;
        memcpy(buf, &len, 4); /* frame header + payload in one write */
        if (write_all(fd, buf, 4 + (size_t)size) || read_all(fd, &len, 4) ||
            read_all(fd, buf + 4, len)) {
            fprintf(stderr, "raw ping-pong failed\n");
            exit(1);
        }
    }
    return (double)(xt_mono_ns() - t0) / n;
}

static double rpc_round(xt_rpc_pool *p, char *buf, uint32_t size, int n)
{
    uint64_t t0 = xt_mono_ns();
    for (int i = 0; i < n; i++) {
        size_t got;
        int rc = xt_rpc_ping(p, NULL, buf + 4, size, buf + 4, size, &got);
        if (rc || got != size) {
            fprintf(stderr, "rpc ping failed: %s\n", strerror(-rc));
            exit(1);
        }
    }
    return (double)(xt_mono_ns() - t0) / n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Mean ns of a fresh connection: pool, handshakes, one ping, close. */
static double connect_round(int port, const struct xt_auth_cred *cred, xt_rpc_tls *tls, int n)
{
    char buf[64];
    uint64_t t0 = xt_mono_ns();
    for (int i = 0; i < n; i++) {
        struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = port, .cred = cred,
                                       .tls = tls };
        xt_rpc_pool *p;
        size_t got;
        int rc = xt_rpc_pool_new(&po, &p);
        if (rc == 0)
            rc = xt_rpc_ping(p, NULL, buf, sizeof buf, buf, sizeof buf, &got);
        if (rc) {
            fprintf(stderr, "connect + ping failed: %s\n", strerror(-rc));
            exit(1);
        }
        xt_rpc_pool_free(p);
    }
    return (double)(xt_mono_ns() - t0) / n;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return v[n / 2];
}

/* A CA and one certificate for 127.0.0.1 (ca.crt, site.crt, site.key) in
 * dir, by openssl(1). Returns 0, or -1 when openssl failed. */
static int make_cert(const char *dir)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "(cd %s && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
             "-nodes -keyout ca.key -subj /CN=ca -days 2 -out ca.crt && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout site.key -subj /CN=site -out site.csr && "
             "echo subjectAltName=IP:127.0.0.1 >site.ext && "
             "openssl x509 -req -in site.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
             "-days 2 -extfile site.ext -out site.crt) >/dev/null 2>&1",
             dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Servers and pools of one kind (open, keyed, keyed over TLS). */
struct kind {
    xt_rpc_server *s;
    xt_rpc_pool *p;
    const struct xt_auth_cred *cred;
    xt_rpc_tls *tls;
    double conn[16], call[16], big[16];
};

static void kind_start(struct kind *k, struct xt_rpc_server_opts *so,
                       const struct xt_auth_cred *cred, xt_rpc_tls *tls)
{
    if (xt_rpc_serve_common(so, NULL, NULL, &k->s)) {
        fprintf(stderr, "cannot start an rpc server\n");
        exit(1);
    }
    k->cred = cred;
    k->tls = tls;
    struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = xt_rpc_server_port(k->s),
                                   .cred = cred, .tls = tls };
    xt_rpc_pool_new(&po, &k->p);
}

/* Open, keyed and keyed+TLS servers: connect cost and per-call cost. */
static void bench_auth(int iters, int rounds, char *buf)
{
    struct xt_auth_cred cred = { .role = XT_AUTH_ADMIN };
    if (xt_auth_key_new(cred.key)) {
        fprintf(stderr, "no randomness for a key\n");
        exit(1);
    }
    char dir[] = "/tmp/bench-rpc-tls-XXXXXX", ca[64], crt[64], key[64];
    if (!mkdtemp(dir) || make_cert(dir) < 0) {
        fprintf(stderr, "openssl could not make a certificate in %s\n", dir);
        exit(1);
    }
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(crt, sizeof crt, "%s/site.crt", dir);
    snprintf(key, sizeof key, "%s/site.key", dir);
    struct xt_rpc_tls_opts to = { .ca = ca, .cert = crt, .key = key };
    xt_rpc_tls *tls;
    if (xt_rpc_tls_new(&to, &tls)) {
        fprintf(stderr, "cannot load the TLS context\n");
        exit(1);
    }
    struct xt_rpc_server_opts oo = { .io_threads = 1 };
    struct xt_rpc_server_opts ok = { .io_threads = 1, .key = cred.key };
    struct xt_rpc_server_opts ot = { .io_threads = 1, .key = cred.key, .tls_cert = crt,
                                     .tls_key = key, .tls_ca = ca };
    struct kind k[3];
    memset(k, 0, sizeof k);
    kind_start(&k[0], &oo, NULL, NULL);
    kind_start(&k[1], &ok, &cred, NULL);
    kind_start(&k[2], &ot, &cred, tls);
    int nconn = iters / 20 + 1;
    for (int i = 0; i < 3; i++) { /* warm up */
        connect_round(xt_rpc_server_port(k[i].s), k[i].cred, k[i].tls, nconn / 10 + 1);
        rpc_round(k[i].p, buf, 64, iters / 10 + 1);
    }
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < 3; i++) {
            k[i].conn[r] = connect_round(xt_rpc_server_port(k[i].s), k[i].cred, k[i].tls, nconn);
            k[i].call[r] = rpc_round(k[i].p, buf, 64, iters);
            k[i].big[r] = rpc_round(k[i].p, buf, 65536, iters / 10 + 1);
        }
    printf("\n# Authentication and TLS: open, keyed (HMAC-SHA256 handshake), keyed over TLS "
           "(mutual, ECDSA P-256), 1 server thread, loopback (median of %d)\n", rounds);
    printf("| | open us | keyed us | ratio | keyed + TLS us | ratio |\n");
    printf("|---|---:|---:|---:|---:|---:|\n");
    const char *what[3] = { "new connection + first call", "call on an open connection, 64 B",
                            "call on an open connection, 64 KiB" };
    int count[3] = { nconn, iters, iters / 10 + 1 };
    for (int row = 0; row < 3; row++) {
        double m[3];
        for (int i = 0; i < 3; i++)
            m[i] = median(row == 0 ? k[i].conn : row == 1 ? k[i].call : k[i].big, rounds);
        printf("| %s (%d per round) | %.1f | %.1f | %.2f | %.1f | %.2f |\n", what[row],
               count[row], m[0] / 1e3, m[1] / 1e3, m[1] / m[0], m[2] / 1e3, m[2] / m[0]);
    }
    for (int i = 0; i < 3; i++) {
        xt_rpc_pool_free(k[i].p);
        xt_rpc_server_stop(k[i].s);
    }
    xt_rpc_tls_free(tls);
    char rm[96];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    int iters = 20000, rounds = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            iters = 2000;
            rounds = 3;
        } else if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--quick] [--iters N]\n", argv[0]);
            return 2;
        }
    }
    xt_log_set_level(XT_LOG_ERROR);
    struct raw_server rs;
    if (raw_start(&rs)) {
        perror("raw server");
        return 1;
    }
    int rfd = raw_connect(rs.port);

    /* A server with one thread and one with a pool of four. */
    struct xt_rpc_server_opts o1 = { .io_threads = 1 };
    struct xt_rpc_server_opts o2 = { .io_threads = 4 };
    xt_rpc_server *s1, *s2;
    if (xt_rpc_serve_common(&o1, NULL, NULL, &s1) || xt_rpc_serve_common(&o2, NULL, NULL, &s2)) {
        fprintf(stderr, "cannot start rpc servers\n");
        return 1;
    }
    struct xt_rpc_pool_opts po1 = { .host = "127.0.0.1", .port = xt_rpc_server_port(s1) };
    struct xt_rpc_pool_opts po2 = { .host = "127.0.0.1", .port = xt_rpc_server_port(s2) };
    xt_rpc_pool *p1, *p2;
    xt_rpc_pool_new(&po1, &p1);
    xt_rpc_pool_new(&po2, &p2);

    static char buf[(1 << 20) + 4];
    memset(buf, 'x', sizeof buf);
    uint32_t sizes[] = { 64, 1024, 4096, 65536 };
    printf("# RPC round trip vs raw TCP ping-pong, loopback, %d calls x %d rounds (median)\n",
           iters, rounds);
    printf("| payload B | raw TCP us | rpc, 1 server thread us | ratio | rpc, 4 server threads us | ratio |\n");
    printf("|---:|---:|---:|---:|---:|---:|\n");
    double worst = 0;
    for (size_t s = 0; s < XT_ARRAY_SIZE(sizes); s++) {
        double raw[16], r1[16], r2[16];
        int n = sizes[s] >= 65536 ? iters / 4 : iters;
        raw_round(rfd, buf, sizes[s], n / 10 + 1); /* warm up */
        rpc_round(p1, buf, sizes[s], n / 10 + 1);
        rpc_round(p2, buf, sizes[s], n / 10 + 1);
        for (int r = 0; r < rounds; r++) {
            raw[r] = raw_round(rfd, buf, sizes[s], n);
            r1[r] = rpc_round(p1, buf, sizes[s], n);
            r2[r] = rpc_round(p2, buf, sizes[s], n);
        }
        qsort(raw, (size_t)rounds, sizeof(double), cmp_double);
        qsort(r1, (size_t)rounds, sizeof(double), cmp_double);
        qsort(r2, (size_t)rounds, sizeof(double), cmp_double);
        double m = raw[rounds / 2], a = r1[rounds / 2], b = r2[rounds / 2];
        printf("| %u | %.1f | %.1f | %.2f | %.1f | %.2f |\n", sizes[s], m / 1e3, a / 1e3, a / m,
               b / 1e3, b / m);
        if (a / m > worst)
            worst = a / m;
    }
    printf("rpc/raw worst ratio (1 server thread): %.2f (target <= 1.5)\n", worst);
    bench_auth(iters, rounds, buf);
    xt_rpc_pool_free(p1);
    xt_rpc_pool_free(p2);
    xt_rpc_server_stop(s1);
    xt_rpc_server_stop(s2);
    close(rfd);
    pthread_join(rs.thr, NULL);
    close(rs.lfd);
    return 0;
}
