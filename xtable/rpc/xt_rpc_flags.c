/*
 * xt_rpc_flags.c -- the command-line flags of the server limits, shared by
 * pom-r2, pom-mds and pom-mdsl so the three spell and check them alike.
 *
 * On the command line 0 turns a limit off; in struct xt_rpc_server_opts 0
 * means the default and < 0 off, so a flag's 0 is stored as -1.
 */
#include "xt_rpc.h"

#include "xt_common.h"
#include "xt_daemon.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <string.h>

int xt_rpc_server_flag(int code, const char *arg, struct xt_rpc_server_opts *o,
                       const char *prog)
{
    static const struct {
        const char *name;
        uint64_t max;
    } flags[] = {
        { "--max-clients", 1000000 },
        { "--input-budget", UINT64_C(1) << 40 },
        { "--output-budget", UINT64_C(1) << 40 },
        { "--idle-timeout-ms", 86400000 },
        { "--request-timeout-ms", 86400000 },
    };
    int i = code - XT_RPC_FLAG_BASE;
    if (i == 5 || i == 6) {
        o->key_file = arg;
        o->init_key = i == 6;
        return 1;
    }
    if (i >= 7 && i <= 9) {
        *(i == 7 ? &o->tls_cert : i == 8 ? &o->tls_key : &o->tls_ca) = arg;
        return 1;
    }
    if (i < 0 || i >= (int)(sizeof flags / sizeof flags[0]))
        return 0;
    uint64_t v;
    if (xt_parse_u64(arg, 0, flags[i].max, &v)) {
        fprintf(stderr, "%s: %s wants 0..%llu (0: no limit), got '%s'\n", prog, flags[i].name,
                (unsigned long long)flags[i].max, arg);
        return -EINVAL;
    }
    int64_t x = v ? (int64_t)v : -1;
    switch (i) {
    case 0: o->max_clients = (int)x; break;
    case 1: o->input_budget = x; break;
    case 2: o->output_budget = x; break;
    case 3: o->idle_timeout_ms = (int)x; break;
    default: o->request_timeout_ms = (int)x; break;
    }
    return 1;
}

/* Loopback: 127.0.0.0/8, ::1, localhost. */
static bool is_loopback(const char *host)
{
    return !strncmp(host, "127.", 4) || !strcmp(host, "::1") || !strcmp(host, "localhost");
}

/* --tls-cert/--tls-key/--tls-ca: all three or none; the daemon's own pools
 * present the same certificate. */
static int tls_flags_done(const struct xt_rpc_server_opts *o, const char *prog)
{
    struct xt_rpc_tls_opts to = { .ca = o->tls_ca, .cert = o->tls_cert, .key = o->tls_key };
    xt_rpc_tls *t;
    int rc = xt_rpc_tls_new(&to, &t);
    if (rc < 0) {
        fprintf(stderr, "%s: --tls-cert, --tls-key, --tls-ca: see above\n", prog);
        return rc;
    }
    xt_rpc_set_tls(t);
    xt_rpc_tls_free(t);
    return 0;
}

int xt_rpc_server_flags_done(struct xt_rpc_server_opts *o, const char *host, const char *prog)
{
    static struct xt_auth_cred cred; /* one daemon, one key; read by o->key */
    int trc = tls_flags_done(o, prog);
    if (trc < 0)
        return trc;
    if (!o->key_file) {
        if (!is_loopback(host)) {
            fprintf(stderr, "%s: refusing to serve on %s without a key: a non-loopback "
                    "address needs --key-file (docs/security.md)\n", prog, host);
            return -EINVAL;
        }
        XT_WARN("no --key-file: serving on %s without authentication (loopback only)", host);
        return 0;
    }
    int rc = o->init_key ? xt_auth_init(o->key_file) : 0;
    if (rc < 0) {
        fprintf(stderr, "%s: cannot write a key to %s: %s\n", prog, o->key_file, strerror(-rc));
        return rc;
    }
    rc = xt_auth_load(o->key_file, XT_AUTH_SITE, &cred);
    if (rc < 0) {
        fprintf(stderr, "%s: cannot use key file %s: %s\n", prog, o->key_file, strerror(-rc));
        return rc;
    }
    if (cred.role != XT_AUTH_SITE) {
        fprintf(stderr, "%s: %s holds a client key; a daemon needs the cluster key\n", prog,
                o->key_file);
        return -EINVAL;
    }
    o->key = cred.key;
    xt_rpc_set_cred(&cred);
    return 0;
}

void xt_rpc_server_flags_usage(FILE *f)
{
    fprintf(f,
            "  --max-clients N          connections served at once; more are closed at once\n"
            "                           (default 10000, at most the descriptor limit less 256)\n"
            "  --input-budget BYTES     unfinished requests buffered over all connections; a\n"
            "                           connection that would pass it is closed (default the\n"
            "                           larger of 256M and the largest frame)\n"
            "  --output-budget BYTES    replies queued for slow readers over all connections\n"
            "                           (default as --input-budget)\n"
            "  --idle-timeout-ms N      close connections idle this long (default 300000)\n"
            "  --request-timeout-ms N   close a connection whose request or reply is not through\n"
            "                           within N (default 30000); 0 turns any of these off\n"
            "  --key-file FILE          the cluster key (64 hex digits, mode 0600): every\n"
            "                           connection proves it; without one the daemon serves\n"
            "                           loopback only, unauthenticated\n"
            "  --init-key FILE          as --key-file, writing a new key to FILE first if it\n"
            "                           does not exist\n"
            "  --tls-cert FILE          TLS on every connection, served and made: this site's\n"
            "  --tls-key FILE           certificate (PEM, signed by the --tls-ca CA) and key;\n"
            "  --tls-ca FILE            peers must present a certificate the CA signed. All\n"
            "                           three or none (default none: plain TCP)\n");
}
