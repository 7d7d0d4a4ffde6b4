/*
 * test_xt_rpc.c -- the RPC layer against a real server on loopback:
 * round trips of every size, many concurrent connections, errno mapping,
 * timeouts, reconnect with back-off, malformed frames, request ids; the
 * server's idle and request timeouts, and a pool over a connection the
 * server closed for idleness; the stall a server reports while all its
 * threads are busy.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "xt_common.h"
#include "xt_rpc.h"

/* The test handler: the first byte of a payload selects a behaviour. */
enum { OP_ECHO = 'e', OP_FAIL = 'f', OP_SLEEP = 's', OP_ID = 'i' };

static _Atomic int64_t last_req_id;

static int test_ping(void *ctx, const xt_rpc_ctx *rc, const void *in, size_t len,
                     xt_rpc_out *out)
{
    (void)ctx;
    const unsigned char *p = in;
    atomic_store(&last_req_id, rc->req_id);
    if (len == 0)
        return 0;
    switch (p[0]) {
    case OP_FAIL:
        return -(int)p[1];
    case OP_SLEEP: {
        struct timespec ts = { 0, (long)p[1] * 10 * 1000000L };
        nanosleep(&ts, NULL);
        return xt_rpc_out_set(out, in, len);
    }
    case OP_ID:
        return xt_rpc_out_set(out, &rc->req_id, sizeof rc->req_id);
    default:
        return xt_rpc_out_set(out, in, len);
    }
}

static const struct xt_rpc_common_ops ops = { .ping = test_ping };

static xt_rpc_server *start(int port, int workers)
{
    struct xt_rpc_server_opts so = { .port = port, .workers = workers, .io_threads = 2 };
    xt_rpc_server *s = NULL;
    assert_int_equal(xt_rpc_serve_common(&so, &ops, NULL, &s), 0);
    assert_non_null(s);
    return s;
}

static xt_rpc_pool *pool_for(int port, int timeout_ms)
{
    struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = port,
                                   .call_timeout_ms = timeout_ms,
                                   .backoff_min_ms = 20, .backoff_max_ms = 200 };
    xt_rpc_pool *p = NULL;
    assert_int_equal(xt_rpc_pool_new(&po, &p), 0);
    return p;
}

static void test_echo_sizes(void **state)
{
    (void)state;
    xt_rpc_server *s = start(0, 2);
    xt_rpc_pool *p = pool_for(xt_rpc_server_port(s), 5000);
    size_t sizes[] = { 1, 7, 100, 4096, 65537, 1 << 20, 8 << 20 };
    unsigned seed = 7;
    for (size_t i = 0; i < XT_ARRAY_SIZE(sizes); i++) {
        size_t n = sizes[i];
        unsigned char *buf = malloc(n), *back = malloc(n);
        buf[0] = OP_ECHO;
        for (size_t j = 1; j < n; j++)
            buf[j] = (unsigned char)rand_r(&seed);
        size_t got = 0;
        assert_int_equal(xt_rpc_ping(p, NULL, buf, n, back, n, &got), 0);
        assert_int_equal(got, n);
        assert_memory_equal(buf, back, n);
        free(buf);
        free(back);
    }
    /* An empty payload is a valid call too. */
    size_t got = 99;
    assert_int_equal(xt_rpc_ping(p, NULL, "", 0, NULL, 0, &got), 0);
    assert_int_equal(got, 0);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(s);
}

static void test_errno_mapping(void **state)
{
    (void)state;
    xt_rpc_server *s = start(0, 0);
    xt_rpc_pool *p = pool_for(xt_rpc_server_port(s), 5000);
    int errs[] = { ENOENT, EEXIST, EIO, ENOSPC, ENAMETOOLONG, EAGAIN };
    for (size_t i = 0; i < XT_ARRAY_SIZE(errs); i++) {
        unsigned char req[2] = { OP_FAIL, (unsigned char)errs[i] };
        assert_int_equal(xt_rpc_ping(p, NULL, req, 2, NULL, 0, NULL), -errs[i]);
    }
    /* An application error leaves the connection usable. */
    struct xt_rpc_pool_stats st;
    xt_rpc_pool_stats(p, &st);
    assert_int_equal(st.connects, 1);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(s);
}

static void test_timeout(void **state)
{
    (void)state;
    xt_rpc_server *s = start(0, 4);
    xt_rpc_pool *p = pool_for(xt_rpc_server_port(s), 100);
    unsigned char slow[2] = { OP_SLEEP, 40 }; /* 400 ms */
    uint64_t t0 = xt_mono_ns();
    assert_int_equal(xt_rpc_ping(p, NULL, slow, 2, NULL, 0, NULL), -ETIMEDOUT);
    uint64_t ms = (xt_mono_ns() - t0) / 1000000;
    assert_true(ms >= 90 && ms < 1000);
    /* A per-call timeout overrides the pool's. */
    xt_rpc_call call = { .timeout_ms = 2000 };
    assert_int_equal(xt_rpc_ping(p, &call, slow, 2, NULL, 0, NULL), 0);
    /* The server is still healthy. */
    unsigned char e[1] = { OP_ECHO };
    assert_int_equal(xt_rpc_ping(p, NULL, e, 1, NULL, 0, NULL), 0);
    struct xt_rpc_pool_stats st;
    xt_rpc_pool_stats(p, &st);
    assert_int_equal(st.timeouts, 1);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(s);
}

struct storm {
    int port;
    int calls;
    _Atomic int failures;
};

static void *storm_thread(void *arg)
{
    struct storm *st = arg;
    xt_rpc_pool *p = NULL;
    struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = st->port,
                                   .call_timeout_ms = 10000 };
    if (xt_rpc_pool_new(&po, &p) != 0) {
        atomic_fetch_add(&st->failures, 1);
        return NULL;
    }
    unsigned char buf[64], back[64];
    for (int i = 0; i < st->calls; i++) {
        buf[0] = OP_ECHO;
        memcpy(buf + 1, &i, sizeof i);
        size_t got = 0;
        if (xt_rpc_ping(p, NULL, buf, sizeof buf, back, sizeof back, &got) != 0 ||
            got != sizeof buf || memcmp(buf, back, got) != 0)
            atomic_fetch_add(&st->failures, 1);
    }
    xt_rpc_pool_free(p);
    return NULL;
}

/* 64 connections at once on a server with 2 io threads and 2 workers. */
static void test_many_connections(void **state)
{
    (void)state;
    xt_rpc_server *s = start(0, 2);
    enum { N = 64 };
    struct storm st = { .port = xt_rpc_server_port(s), .calls = 200 };
    pthread_t t[N];
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_create(&t[i], NULL, storm_thread, &st), 0);
    for (int i = 0; i < N; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&st.failures), 0);
    xt_rpc_server_stop(s);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t l = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

struct overlap {
    xt_rpc_pool *p;
    int rc;
};

static void *overlap_thread(void *arg)
{
    struct overlap *o = arg;
    unsigned char slow[2] = { OP_SLEEP, 5 }; /* 50 ms: the calls overlap */
    o->rc = xt_rpc_ping(o->p, NULL, slow, 2, NULL, 0, NULL);
    return NULL;
}

static void test_reconnect_backoff(void **state)
{
    (void)state;
    int port = free_port();
    xt_rpc_pool *p = pool_for(port, 2000);
    unsigned char e[1] = { OP_ECHO };
    /* Nobody listens: refused, and inside the back-off window refused at
     * once without a connect attempt. */
    assert_int_equal(xt_rpc_ping(p, NULL, e, 1, NULL, 0, NULL), -ECONNREFUSED);
    assert_int_equal(xt_rpc_ping(p, NULL, e, 1, NULL, 0, NULL), -ECONNREFUSED);
    struct xt_rpc_pool_stats st;
    xt_rpc_pool_stats(p, &st);
    assert_int_equal(st.connect_failures, 1);

    xt_rpc_server *s = start(port, 0);
    int rc = -1;
    for (int i = 0; i < 100 && rc != 0; i++) {
        rc = xt_rpc_ping(p, NULL, e, 1, NULL, 0, NULL);
        if (rc)
            usleep(10000);
    }
    assert_int_equal(rc, 0);

    /* Four overlapping calls leave four connections in the pool. */
    pthread_t t[4];
    struct overlap ov[4];
    for (int i = 0; i < 4; i++) {
        ov[i] = (struct overlap){ p, -1 };
        assert_int_equal(pthread_create(&t[i], NULL, overlap_thread, &ov[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(ov[i].rc, 0);
    }
    /* Restart the server: every pooled connection is stale; the call is
     * retried once, on a fresh connection, with the same request id. */
    xt_rpc_server_stop(s);
    s = start(port, 0);
    xt_rpc_call call = { .req_id = 4242 };
    unsigned char idreq[1] = { OP_ID };
    int64_t seen = 0;
    assert_int_equal(xt_rpc_ping(p, &call, idreq, 1, &seen, sizeof seen, NULL), 0);
    assert_int_equal(seen, 4242);
    xt_rpc_pool_stats(p, &st);
    assert_true(st.retries >= 1);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(s);
}

static void test_request_ids(void **state)
{
    (void)state;
    int64_t prev = 0;
    for (int i = 0; i < 100000; i++) {
        int64_t id = xt_rpc_new_req_id();
        assert_true(id > 0);
        assert_true(id != prev);
        prev = id;
    }
    xt_rpc_server *s = start(0, 0);
    xt_rpc_pool *p = pool_for(xt_rpc_server_port(s), 2000);
    unsigned char idreq[1] = { OP_ID };
    int64_t a = 0, b = 0;
    assert_int_equal(xt_rpc_ping(p, NULL, idreq, 1, &a, sizeof a, NULL), 0);
    assert_int_equal(xt_rpc_ping(p, NULL, idreq, 1, &b, sizeof b, NULL), 0);
    assert_true(a != 0 && b != 0 && a != b);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(s);
}

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct timeval tv = { 2, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Garbage, truncated frames, huge lengths, wrong types: each closes its own
 * connection (or is answered with an error); the server keeps serving. */
static void test_malformed_frames(void **state)
{
    (void)state;
    xt_rpc_server *s = start(0, 2);
    int port = xt_rpc_server_port(s);
    unsigned seed = 99;
    for (int round = 0; round < 200; round++) {
        int fd = raw_connect(port);
        unsigned char buf[512];
        size_t n;
        switch (round % 5) {
        case 0: /* huge frame length */
            buf[0] = 0x7f; buf[1] = 0xff; buf[2] = 0xff; buf[3] = 0xff;
            n = 4;
            break;
        case 1: /* negative frame length */
            buf[0] = 0xff; buf[1] = 0xff; buf[2] = 0xff; buf[3] = 0x00;
            n = 4;
            break;
        case 2: /* valid length, random body */
            n = 4 + (size_t)(rand_r(&seed) % 200);
            for (size_t i = 4; i < n; i++)
                buf[i] = (unsigned char)rand_r(&seed);
            buf[0] = 0; buf[1] = 0; buf[2] = 0; buf[3] = (unsigned char)(n - 4);
            break;
        case 3: /* a truncated frame, then close */
            buf[0] = 0; buf[1] = 0; buf[2] = 1; buf[3] = 0;
            n = 4 + 10;
            memset(buf + 4, 0x80, 10);
            break;
        default: { /* a well-formed call header naming an unknown method */
            static const unsigned char msg[] = {
                0x80, 0x01, 0x00, 0x01, 0, 0, 0, 4, 'n', 'o', 'p', 'e', 0, 0, 0, 1, 0 };
            memcpy(buf + 4, msg, sizeof msg);
            buf[0] = 0; buf[1] = 0; buf[2] = 0; buf[3] = sizeof msg;
            n = 4 + sizeof msg;
        }
        }
        ssize_t w = write(fd, buf, n);
        (void)w;
        if (round % 5 == 4) {
            unsigned char r[256];
            ssize_t got = read(fd, r, sizeof r); /* a TApplicationException */
            assert_true(got > 0);
        }
        close(fd);
    }
    xt_rpc_pool *p = pool_for(port, 2000);
    unsigned char e[3] = { OP_ECHO, 1, 2 }, back[3];
    assert_int_equal(xt_rpc_ping(p, NULL, e, 3, back, 3, NULL), 0);
    assert_memory_equal(e, back, 3);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(s);
}

/* Whether the server closed fd within ms: its FIN or reset arrived (the
 * socket left ESTABLISHED), without reading what it had sent before. */
static bool closed_within(int fd, int ms)
{
    for (int waited = 0;; waited += 50) {
        struct tcp_info ti;
        socklen_t l = sizeof ti;
        if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &l) == 0 &&
            ti.tcpi_state != TCP_ESTABLISHED)
            return true;
        if (waited >= ms)
            return false;
        usleep(50000);
    }
}

/* Idle past idle_timeout_ms, a frame unfinished past request_timeout_ms, a
 * reply not taken past it: each connection is closed by the server; a
 * pool whose idle connection the server closed retries on a fresh one. */
static void test_server_timeouts(void **state)
{
    (void)state;
    struct xt_rpc_server_opts so = { .io_threads = 2, .idle_timeout_ms = 1500,
                                     .request_timeout_ms = 1000 };
    xt_rpc_server *s = NULL;
    assert_int_equal(xt_rpc_serve_common(&so, &ops, NULL, &s), 0);
    int port = xt_rpc_server_port(s);
    xt_rpc_pool *p = pool_for(port, 5000);
    unsigned char e[3] = { OP_ECHO, 1, 2 }, back[3];
    assert_int_equal(xt_rpc_ping(p, NULL, e, 3, back, 3, NULL), 0);

    int idle = raw_connect(port);
    int part = raw_connect(port);
    unsigned char head[6] = { 0, 0, 1, 0, 0x80, 0x01 }; /* 256 bytes claimed, 2 sent */
    assert_int_equal(write(part, head, sizeof head), (ssize_t)sizeof head);
    /* A slow reader: 2 MiB echo requests pipelined, no reply read. */
    int slow = raw_connect(port);
    int small = 4096;
    setsockopt(slow, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    fcntl(slow, F_SETFL, O_NONBLOCK);
    static unsigned char req[4 + 26 + (2 << 20) + 2];
    static const unsigned char call[] = { 0x80, 0x01, 0x00, 0x01, 0, 0, 0, 4, 'p', 'i', 'n',
                                          'g', 0, 0, 0, 1, 0x0c, 0x00, 0x01, 0x0c, 0x00, 0x01,
                                          0x00, 0x0b, 0x00, 0x02 };
    uint32_t body = htonl((uint32_t)(sizeof req - 4)), plen = htonl(2u << 20);
    memcpy(req, &body, 4);
    memcpy(req + 4, call, sizeof call);
    memcpy(req + 4 + sizeof call, &plen, 4);
    req[4 + sizeof call + 4] = OP_ECHO;
    for (int i = 0; i < 8; i++) {
        ssize_t w = send(slow, req, sizeof req, MSG_NOSIGNAL);
        (void)w;
    }
    /* Not before their time (a second of margin under each)... */
    assert_false(closed_within(idle, 400));
    /* ...and closed within a sweep or two after it. */
    assert_true(closed_within(part, 4000));
    assert_true(closed_within(slow, 4000));
    assert_true(closed_within(idle, 4000));
    close(idle);
    close(part);
    close(slow);
    /* The pool's connection went idle past the timeout too: closed by the
     * server, the call retries once on a fresh connection. */
    struct xt_rpc_pool_stats st0, st1;
    xt_rpc_pool_stats(p, &st0);
    assert_int_equal(xt_rpc_ping(p, NULL, e, 3, back, 3, NULL), 0);
    xt_rpc_pool_stats(p, &st1);
    assert_int_equal(st1.retries, st0.retries + 1);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(s);
}

static void *sleep_call(void *arg)
{
    unsigned char z[2] = { OP_SLEEP, 80 }; /* 800 ms in the handler */
    return (void *)(intptr_t)xt_rpc_ping(arg, NULL, z, 2, NULL, 0, NULL);
}

/* Both threads of a server in handlers for 800 ms: it reports a stall of
 * about that (R2's failure detector takes it as its own pause); with a
 * thread free, none to speak of. */
static void test_server_stall(void **state)
{
    (void)state;
    xt_rpc_server *s = start(0, 0); /* 2 threads */
    xt_rpc_pool *p = pool_for(xt_rpc_server_port(s), 5000);
    unsigned char e[3] = { OP_ECHO, 1, 2 }, back[3];
    assert_int_equal(xt_rpc_ping(p, NULL, e, 3, back, 3, NULL), 0);
    (void)xt_rpc_server_stall_ns(s);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, sleep_call, p), 0);
    for (int i = 0; i < 2; i++) {
        void *rc;
        pthread_join(t[i], &rc);
        assert_int_equal((intptr_t)rc, 0);
    }
    uint64_t stall = xt_rpc_server_stall_ns(s);
    assert_true(stall >= 300 * 1000000ull);
    assert_int_equal(xt_rpc_ping(p, NULL, e, 3, back, 3, NULL), 0);
    assert_true(xt_rpc_server_stall_ns(s) < 100 * 1000000ull);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(s);
}

static void test_bind_conflict_and_addr(void **state)
{
    (void)state;
    xt_rpc_server *s = start(0, 0);
    struct xt_rpc_server_opts so = { .port = xt_rpc_server_port(s) };
    xt_rpc_server *s2 = NULL;
    assert_int_equal(xt_rpc_serve_common(&so, &ops, NULL, &s2), -EADDRINUSE);
    assert_null(s2);
    xt_rpc_server_stop(s);

    char host[64];
    int port;
    assert_int_equal(xt_rpc_parse_addr("127.0.0.1:8080", host, sizeof host, &port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 8080);
    assert_int_equal(xt_rpc_parse_addr("[::1]:9", host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(xt_rpc_parse_addr("host", host, sizeof host, &port), -EINVAL);
    assert_int_equal(xt_rpc_parse_addr("host:0", host, sizeof host, &port), -EINVAL);
    assert_int_equal(xt_rpc_parse_addr("host:70000", host, sizeof host, &port), -EINVAL);
    assert_int_equal(xt_rpc_parse_addr(":80", host, sizeof host, &port), -EINVAL);
    assert_int_equal(xt_rpc_parse_addr("h:80x", host, sizeof host, &port), -EINVAL);
    struct xt_rpc_pool_opts bad = { .host = "127.0.0.1", .port = 0 };
    xt_rpc_pool *p = NULL;
    assert_int_equal(xt_rpc_pool_new(&bad, &p), -EINVAL);
}

int main(void)
{
    xt_log_set_level(getenv("POM_TEST_DEBUG") ? XT_LOG_DEBUG : XT_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_echo_sizes),
        cmocka_unit_test(test_errno_mapping),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_many_connections),
        cmocka_unit_test(test_reconnect_backoff),
        cmocka_unit_test(test_request_ids),
        cmocka_unit_test(test_malformed_frames),
        cmocka_unit_test(test_server_timeouts),
        cmocka_unit_test(test_server_stall),
        cmocka_unit_test(test_bind_conflict_and_addr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
