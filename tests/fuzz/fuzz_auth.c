/*
 * fuzz_auth.c -- libFuzzer target for the connection handshake
 * (xtable/rpc/xt_auth.h) and the key-file parser.
 *
 * Input: byte 0 picks the mode (mod 2), the rest is fed to it:
 *   0  the bytes a client sends on one connection to a real RPC server with
 *      a key (xt_rpc_serve_common on loopback, started once): the server's
 *      handshake state machine, its frame limits before authentication and
 *      everything it would do with frames after a failed or half
 *      handshake. The input's write side is shut after sending, so the
 *      server sees the end and closes; the target reads until it does.
 *      The ping handler aborts: no input can get a request processed
 *      without proving the key (xt_auth.h invariant 1), and the key is
 *      random per run, so a proof cannot be in the corpus.
 *   1  the text of a key file, through xt_auth_load, and the bytes as a
 *      HELLO body through xt_auth_hello_parse.
 * Seed corpus: tests/fuzz/corpus/auth (a HELLO, a HELLO and a request, a
 * HELLO and a wrong PROOF, garbage, a huge length, key-file lines).
 */
#include "xt_auth.h"
#include "xt_rpc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int never(void *ctx, const xt_rpc_ctx *rc, const void *in, size_t len,
                 xt_rpc_out *out)
{
    (void)ctx, (void)rc, (void)in, (void)len, (void)out;
    fprintf(stderr, "fuzz_auth: a request was processed without authentication\n");
    abort();
}

static const struct xt_rpc_common_ops ops = { .ping = never };
static xt_rpc_server *g_srv;
static uint8_t g_key[XT_AUTH_KEY_LEN];

static void to_server(const uint8_t *p, size_t n)
{
    if (!g_srv) {
        struct xt_rpc_server_opts o = { .key = g_key, .request_timeout_ms = 2000 };
        if (xt_auth_key_new(g_key) < 0 || xt_rpc_serve_common(&o, &ops, NULL, &g_srv) < 0)
            abort();
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)xt_rpc_server_port(g_srv)) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0)
        abort();
    /* The server may close mid-send (a bad frame): that is an answer too. */
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    char buf[256];
    while (recv(fd, buf, sizeof buf, 0) > 0)
        ;
    close(fd);
}

static void parse(const uint8_t *p, size_t n)
{
    struct xt_auth_hello h;
    (void)xt_auth_hello_parse(p, n, &h);
    char path[] = "/tmp/fuzz-auth-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return;
    if (write(fd, p, n) == (ssize_t)n) {
        struct xt_auth_cred c;
        (void)xt_auth_load(path, XT_AUTH_SITE, &c);
    }
    close(fd);
    unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] % 2 == 0)
        to_server(data + 1, size - 1);
    else
        parse(data + 1, size - 1);
    return 0;
}
