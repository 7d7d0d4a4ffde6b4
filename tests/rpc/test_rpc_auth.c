/*
 * test_rpc_auth.c -- the connection handshake (xt_auth.h) against a real
 * server on loopback, and bad input before authentication.
 *
 * A server with a key must process no request of a connection before its
 * PROOF verified (xt_auth.h invariant 1). The handler counts the requests
 * it runs; each bad client below sends its bytes raw and must see the
 * connection closed with the count unchanged, and the server must go on
 * answering an authenticated pool:
 *  - a valid ping frame with no handshake (the same bytes get an answer from
 *    an open server: the frame is valid, the refusal is the key's);
 *  - garbage; a frame length far over the handshake's;
 *  - half a handshake: a HELLO, then the ping frame instead of the PROOF;
 *    a HELLO, then a wrong PROOF;
 *  - a slow handshake: two bytes, then nothing (closed by the request
 *    timeout);
 *  - a HELLO of role none: answered -ENOKEY, closed.
 * Pools: the right key works; a wrong key is -EKEYREJECTED; no key is
 * -ENOKEY; a key against an open server is -EKEYREJECTED; a client key's
 * role and fsid reach the handler's context.
 * TLS (xt_rpc.h invariant 6; certificates made by openssl(1), skipped
 * without it): a pool with the CA, a certificate and the key is served,
 * also a 4 MiB request and reply (records across reads, a reply queued on
 * a full socket); without the key -ENOKEY, without TLS -EPROTONOSUPPORT,
 * with a certificate of another CA -EKEYREJECTED; raw bytes (a plain
 * request, a TLS record header followed by garbage, a slow half record)
 * are closed with nothing served, and the server serves on.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xt_auth.h"
#include "xt_common.h"
#include "xt_rpc.h"

static atomic_int served;
static atomic_int last_role, last_fsid;

static int count_ping(void *ctx, const xt_rpc_ctx *rc, const void *in, size_t len,
                      xt_rpc_out *out)
{
    (void)ctx;
    atomic_fetch_add(&served, 1);
    atomic_store(&last_role, rc->auth_role);
    atomic_store(&last_fsid, rc->auth_fsid);
    return xt_rpc_out_set(out, in, len);
}

static const struct xt_rpc_common_ops ops = { .ping = count_ping };
static uint8_t g_key[XT_AUTH_KEY_LEN];

static xt_rpc_server *serve(const uint8_t *key)
{
    struct xt_rpc_server_opts o = { .key = key, .request_timeout_ms = 500 };
    xt_rpc_server *s = NULL;
    assert_int_equal(xt_rpc_serve_common(&o, &ops, NULL, &s), 0);
    return s;
}

static xt_rpc_pool *pool(xt_rpc_server *s, const struct xt_auth_cred *cred)
{
    struct xt_rpc_pool_opts o = { .host = "127.0.0.1", .port = xt_rpc_server_port(s),
                                  .cred = cred, .connect_timeout_ms = 500 };
    xt_rpc_pool *p = NULL;
    assert_int_equal(xt_rpc_pool_new(&o, &p), 0);
    return p;
}

static int ping(xt_rpc_pool *p)
{
    char reply[8];
    size_t n = 0;
    return xt_rpc_ping(p, NULL, "abcd", 4, reply, sizeof reply, &n);
}

static int dial(xt_rpc_server *s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(xt_rpc_server_port(s)) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

static void send_all(int fd, const void *p, size_t n)
{
    assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void send_frame(int fd, const void *body, uint32_t len)
{
    uint32_t be = htonl(len);
    send_all(fd, &be, 4);
    send_all(fd, body, len);
}

/* Reads until the peer closes (returns the bytes read before, at most cap),
 * or 10 s pass (returns -1: the server kept the connection). */
static ssize_t read_to_close(int fd, uint8_t *buf, size_t cap)
{
    size_t got = 0;
    for (int i = 0; i < 100; i++) {
        struct pollfd pf = { .fd = fd, .events = POLLIN };
        if (poll(&pf, 1, 100) <= 0)
            continue;
        uint8_t tmp[512];
        ssize_t r = recv(fd, tmp, sizeof tmp, 0);
        if (r <= 0)
            return (ssize_t)got;
        size_t take = XT_MIN((size_t)r, cap - got);
        memcpy(buf + got, tmp, take);
        got += take;
    }
    return -1;
}

/* Common.ping("abcd") in Thrift's strict binary protocol, as a client
 * would frame it. */
static const uint8_t kPing[] = {
    0x80, 0x01, 0x00, 0x01, 0, 0, 0, 4, 'p', 'i', 'n', 'g', 0, 0, 0, 1,
    0x0c, 0x00, 0x01,                   /* args.req: PingReq */
    0x0c, 0x00, 0x01, 0x00,             /*   hdr: ReqHeader, empty */
    0x0b, 0x00, 0x02, 0, 0, 0, 4, 'a', 'b', 'c', 'd', /* payload */
    0x00,                               /* end of PingReq */
    0x00,                               /* end of args */
};

static void test_valid_frame_served_only_when_open(void **state)
{
    (void)state;
    xt_rpc_server *open = serve(NULL);
    int fd = dial(open);
    send_frame(fd, kPing, sizeof kPing);
    uint8_t buf[256];
    struct pollfd pf = { .fd = fd, .events = POLLIN };
    assert_int_equal(poll(&pf, 1, 10000), 1);
    assert_true(recv(fd, buf, sizeof buf, 0) > 8);
    assert_int_equal(atomic_load(&served), 1);
    close(fd);
    xt_rpc_server_stop(open);

    xt_rpc_server *s = serve(g_key);
    atomic_store(&served, 0);
    fd = dial(s);
    send_frame(fd, kPing, sizeof kPing);
    assert_int_equal(read_to_close(fd, buf, sizeof buf), 0);
    close(fd);
    assert_int_equal(atomic_load(&served), 0);
    xt_rpc_server_stop(s);
}

/* A HELLO of cluster role for a raw client. */
static void hello(uint8_t out[XT_AUTH_HELLO_LEN], int role)
{
    struct xt_auth_cred c = { .role = role };
    assert_int_equal(xt_auth_hello_make(role ? &c : NULL, out), 0);
}

static void test_bad_input_before_auth(void **state)
{
    (void)state;
    xt_rpc_server *s = serve(g_key);
    struct xt_auth_cred good = { .role = XT_AUTH_ADMIN };
    memcpy(good.key, g_key, sizeof g_key);
    xt_rpc_pool *p = pool(s, &good);
    atomic_store(&served, 0);
    uint8_t buf[256], h[XT_AUTH_HELLO_LEN];

    /* garbage */
    int fd = dial(s);
    send_all(fd, "GET / HTTP/1.0\r\n\r\n", 18);
    assert_int_equal(read_to_close(fd, buf, sizeof buf), 0);
    close(fd);

    /* a frame far over any handshake frame: closed before it is buffered */
    fd = dial(s);
    uint32_t big = htonl(100u << 20);
    send_all(fd, &big, 4);
    assert_int_equal(read_to_close(fd, buf, sizeof buf), 0);
    close(fd);

    /* HELLO, then a request instead of the PROOF */
    fd = dial(s);
    hello(h, XT_AUTH_ADMIN);
    send_frame(fd, h, sizeof h);
    send_frame(fd, kPing, sizeof kPing);
    assert_int_equal(read_to_close(fd, buf, sizeof buf), 4 + XT_AUTH_CHALLENGE_LEN);
    close(fd);

    /* HELLO, then a wrong PROOF, then a request */
    fd = dial(s);
    hello(h, XT_AUTH_ADMIN);
    send_frame(fd, h, sizeof h);
    uint8_t proof[XT_AUTH_PROOF_LEN] = { 'P', 'O', 'M', 'P' };
    send_frame(fd, proof, sizeof proof);
    send_frame(fd, kPing, sizeof kPing);
    assert_int_equal(read_to_close(fd, buf, sizeof buf), 4 + XT_AUTH_CHALLENGE_LEN);
    close(fd);

    /* a slow handshake: two bytes, then nothing */
    fd = dial(s);
    send_all(fd, "\0\0", 2);
    assert_int_equal(read_to_close(fd, buf, sizeof buf), 0);
    close(fd);

    /* role none: answered -ENOKEY, then closed */
    fd = dial(s);
    hello(h, XT_AUTH_NONE);
    send_frame(fd, h, sizeof h);
    assert_int_equal(read_to_close(fd, buf, sizeof buf), 4 + XT_AUTH_CHALLENGE_LEN);
    int32_t st;
    memcpy(&st, buf + 8, 4);
    assert_int_equal((int32_t)ntohl((uint32_t)st), -ENOKEY);
    close(fd);

    assert_int_equal(atomic_load(&served), 0);
    assert_int_equal(ping(p), 0); /* the server lives and serves */
    assert_int_equal(atomic_load(&served), 1);
    assert_int_equal(atomic_load(&last_role), XT_AUTH_ADMIN);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(s);
}

static void test_pools(void **state)
{
    (void)state;
    xt_rpc_server *s = serve(g_key), *open = serve(NULL);
    struct xt_auth_cred good = { .role = XT_AUTH_SITE }, bad = { .role = XT_AUTH_SITE };
    memcpy(good.key, g_key, sizeof g_key);
    assert_int_equal(xt_auth_key_new(bad.key), 0);
    struct xt_auth_cred client = { .role = XT_AUTH_CLIENT, .fsid = 7, .gen = 0 };
    xt_auth_client_key(g_key, 7, 0, client.key);
    struct xt_auth_cred other = client;
    other.fsid = 8; /* fs 7's key claimed for fs 8 */

    xt_rpc_pool *p = pool(s, &good);
    assert_int_equal(ping(p), 0);
    xt_rpc_pool_free(p);
    p = pool(s, &bad);
    assert_int_equal(ping(p), -EKEYREJECTED);
    xt_rpc_pool_free(p);
    p = pool(s, NULL);
    assert_int_equal(ping(p), -ENOKEY);
    xt_rpc_pool_free(p);
    p = pool(open, &good);
    assert_int_equal(ping(p), -EKEYREJECTED);
    xt_rpc_pool_free(p);
    p = pool(open, NULL);
    assert_int_equal(ping(p), 0);
    assert_int_equal(atomic_load(&last_role), XT_AUTH_NONE);
    xt_rpc_pool_free(p);
    p = pool(s, &client);
    assert_int_equal(ping(p), 0);
    assert_int_equal(atomic_load(&last_role), XT_AUTH_CLIENT);
    assert_int_equal(atomic_load(&last_fsid), 7);
    xt_rpc_pool_free(p);
    p = pool(s, &other);
    assert_int_equal(ping(p), -EKEYREJECTED);
    xt_rpc_pool_free(p);
    xt_rpc_server_stop(open);
    xt_rpc_server_stop(s);
}

/* Makes ca, site (IP 127.0.0.1) and, from another CA, bad certificates
 * and keys in dir with openssl(1). Returns 0, or -1 without openssl. */
static int make_certs(const char *dir)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "cd %s && for c in ca rogue; do openssl req -x509 -newkey ec "
             "-pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout $c.key -subj /CN=$c "
             "-days 2 -out $c.crt || exit 1; done; "
             "for p in site:ca bad:rogue; do n=${p%%:*}; a=${p#*:}; "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
             "-keyout $n.key -subj /CN=$n -out $n.csr || exit 1; "
             "echo subjectAltName=IP:127.0.0.1 >$n.ext; "
             "openssl x509 -req -in $n.csr -CA $a.crt -CAkey $a.key -CAcreateserial -days 2 "
             "-extfile $n.ext -out $n.crt || exit 1; done",
             dir);
    char full[2100];
    snprintf(full, sizeof full, "(%s) >/dev/null 2>&1", cmd);
    return system(full) == 0 ? 0 : -1;
}

static xt_rpc_tls *tls_of(const char *dir, const char *ca, const char *who)
{
    char cap[128], cert[128], key[128];
    snprintf(cap, sizeof cap, "%s/%s.crt", dir, ca);
    snprintf(cert, sizeof cert, "%s/%s.crt", dir, who);
    snprintf(key, sizeof key, "%s/%s.key", dir, who);
    struct xt_rpc_tls_opts o = { .ca = cap, .cert = cert, .key = key };
    xt_rpc_tls *t = NULL;
    assert_int_equal(xt_rpc_tls_new(&o, &t), 0);
    return t;
}

static xt_rpc_pool *tls_pool(xt_rpc_server *s, const struct xt_auth_cred *cred, xt_rpc_tls *t)
{
    struct xt_rpc_pool_opts o = { .host = "127.0.0.1", .port = xt_rpc_server_port(s),
                                  .cred = cred, .tls = t, .connect_timeout_ms = 500 };
    xt_rpc_pool *p = NULL;
    assert_int_equal(xt_rpc_pool_new(&o, &p), 0);
    return p;
}

static void test_tls(void **state)
{
    (void)state;
    char dir[] = "/tmp/auth-tls-XXXXXX", cert[64], key[64], ca[64], cmd[128];
    assert_non_null(mkdtemp(dir));
    if (make_certs(dir) < 0) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        assert_int_equal(system(cmd), 0);
        skip();
    }
    snprintf(cert, sizeof cert, "%s/site.crt", dir);
    snprintf(key, sizeof key, "%s/site.key", dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    struct xt_rpc_server_opts so = { .key = g_key, .request_timeout_ms = 500,
                                     .tls_cert = cert, .tls_key = key, .tls_ca = ca };
    xt_rpc_server *s = NULL;
    assert_int_equal(xt_rpc_serve_common(&so, &ops, NULL, &s), 0);
    struct xt_auth_cred good = { .role = XT_AUTH_ADMIN };
    memcpy(good.key, g_key, sizeof g_key);
    xt_rpc_tls *site = tls_of(dir, "ca", "site"), *bad = tls_of(dir, "ca", "bad");
    atomic_store(&served, 0);

    xt_rpc_pool *p = tls_pool(s, &good, site);
    for (int i = 0; i < 20; i++)
        assert_int_equal(ping(p), 0);
    size_t big = 4u << 20, n = 0;
    char *in = malloc(big), *out = malloc(big);
    assert_non_null(in);
    assert_non_null(out);
    for (size_t i = 0; i < big; i++)
        in[i] = (char)(i * 7 + 1);
    assert_int_equal(xt_rpc_ping(p, NULL, in, big, out, big, &n), 0);
    assert_int_equal(n, big);
    assert_memory_equal(in, out, big);
    free(in);
    free(out);
    int before = atomic_load(&served);
    assert_int_equal(before, 21);

    xt_rpc_pool *q = tls_pool(s, NULL, site); /* TLS without the key */
    assert_int_equal(ping(q), -ENOKEY);
    xt_rpc_pool_free(q);
    q = tls_pool(s, &good, NULL); /* the key without TLS */
    assert_int_equal(ping(q), -EPROTONOSUPPORT);
    xt_rpc_pool_free(q);
    q = tls_pool(s, &good, bad); /* a certificate of another CA */
    assert_int_equal(ping(q), -EKEYREJECTED);
    xt_rpc_pool_free(q);

    uint8_t buf[256];
    int fd = dial(s); /* a plain request: a plain CHALLENGE saying why, then closed */
    uint8_t frame[4 + sizeof kPing]; /* one send: the server may close after a byte */
    uint32_t be = htonl(sizeof kPing);
    memcpy(frame, &be, 4);
    memcpy(frame + 4, kPing, sizeof kPing);
    send_all(fd, frame, sizeof frame);
    assert_int_equal(read_to_close(fd, buf, sizeof buf), 4 + XT_AUTH_CHALLENGE_LEN);
    int32_t st;
    memcpy(&st, buf + 8, 4);
    assert_int_equal((int32_t)ntohl((uint32_t)st), -EPROTONOSUPPORT);
    close(fd);
    static const uint8_t junk[] = { 0x16, 0x03, 0x01, 0x00, 0x20, 'n', 'o', 't', ' ', 'a',
                                    ' ', 'h', 'e', 'l', 'l', 'o', 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
    fd = dial(s); /* a TLS record header, then garbage */
    send_all(fd, junk, sizeof junk);
    assert_true(read_to_close(fd, buf, sizeof buf) >= 0);
    close(fd);
    fd = dial(s); /* a record claiming 16 KiB and more, then garbage */
    static const uint8_t huge[] = { 0x16, 0x03, 0x03, 0xff, 0xff, 1, 2, 3, 4 };
    send_all(fd, huge, sizeof huge);
    assert_true(read_to_close(fd, buf, sizeof buf) >= 0);
    close(fd);
    fd = dial(s); /* a slow handshake: half a record header, then nothing */
    send_all(fd, junk, 2);
    assert_true(read_to_close(fd, buf, sizeof buf) >= 0);
    close(fd);

    assert_int_equal(atomic_load(&served), before);
    assert_int_equal(ping(p), 0); /* the server lives and serves */
    assert_int_equal(atomic_load(&served), before + 1);
    xt_rpc_pool_free(p);
    xt_rpc_tls_free(site);
    xt_rpc_tls_free(bad);
    xt_rpc_server_stop(s);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_key_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/auth-keys-XXXXXX", path[64], line[160];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/k", dir);
    struct xt_auth_cred c = { .role = XT_AUTH_CLIENT, .fsid = 3, .gen = 9 }, r;
    xt_auth_client_key(g_key, 3, 9, c.key);
    assert_int_equal(xt_auth_save(path, &c, 0), 0);
    assert_int_equal(xt_auth_save(path, &c, 0), -EEXIST);
    assert_int_equal(xt_auth_load(path, XT_AUTH_SITE, &r), 0);
    assert_int_equal(r.role, XT_AUTH_CLIENT);
    assert_int_equal(r.fsid, 3);
    assert_int_equal(r.gen, 9);
    assert_memory_equal(r.key, c.key, XT_AUTH_KEY_LEN);
    chmod(path, 0640);
    assert_int_equal(xt_auth_load(path, XT_AUTH_SITE, &r), -EACCES);
    FILE *f = fopen(path, "w");
    fputs("abc\n", f);
    fclose(f);
    chmod(path, 0600);
    assert_int_equal(xt_auth_load(path, XT_AUTH_SITE, &r), -EINVAL);
    f = fopen(path, "w"); /* a space for the last digit */
    for (int i = 0; i < 63; i++)
        fputc('a', f);
    fputs(" \n", f);
    fclose(f);
    assert_int_equal(xt_auth_load(path, XT_AUTH_SITE, &r), -EINVAL);
    unlink(path);
    snprintf(line, sizeof line, "%s", dir);
    rmdir(line);
}

int main(void)
{
    xt_auth_key_new(g_key);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_frame_served_only_when_open),
        cmocka_unit_test(test_bad_input_before_auth),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_key_files),
        cmocka_unit_test(test_tls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
