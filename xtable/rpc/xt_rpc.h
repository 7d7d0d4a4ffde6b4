/*
 * xt_rpc.h -- the C face of the RPC layer (Thrift C++ runtime underneath).
 *
 * Every service of pom.thrift extends Common, so this header gives what all
 * of them share: servers, client connection pools, request contexts, the
 * errno mapping, and Common.ping. Each service adds its own calls and handler
 * ops in its own glue header (xt_rpc_mds.h, ...), built on xt_rpc_i.hpp.
 *
 * Invariants:
 *  (1) A call returns 0 or a negative errno: -ETIMEDOUT when the reply did
 *      not come within the call's timeout, -ECONNREFUSED while the peer cannot
 *      be reached (connects are retried with exponential back-off, never
 *      faster), -EPROTO for a malformed or unexpected reply, and the server's
 *      own negative errno when the handler failed; -ENOKEY / -EKEYREJECTED
 *      when the connection's key handshake fails (xt_auth.h), -EKEYREJECTED
 *      also when its TLS handshake fails, -EPROTONOSUPPORT when a plain
 *      connection reaches a TLS server (invariant 6).
 *  (2) A pool never holds its lock across a connect, a send or a receive.
 *  (3) A connection that saw any transport error is closed, never reused.
 *  (4) A server serves many connections with a fixed pool of
 *      io_threads + workers threads; each reads a frame (framed transport,
 *      frames over max_frame_bytes are refused), runs its handler and writes
 *      the reply (xt_rpc_server.cpp). A handler that blocks occupies one
 *      thread; a client that does not read its replies occupies none (the
 *      reply waits on its connection). A malformed frame closes that one
 *      connection; the server stays up.
 *  (5) A server bounds its connections, the bytes it buffers for them and
 *      how long one may idle or take over a request (the limits of
 *      struct xt_rpc_server_opts; docs/rpc.md "Limits").
 *  (6) With TLS (docs/security.md "TLS"), both ends present a certificate
 *      signed by the one CA and verify the other's; a client also checks
 *      that the server's certificate names the host it dialled. The key
 *      handshake still runs, inside TLS: the key authorizes, TLS encrypts
 *      and proves the server's identity. A TLS server refuses plain
 *      connections (-EPROTONOSUPPORT at the client) and the reverse.
 */
#ifndef XT_RPC_H
#define XT_RPC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "xt_auth.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest frame a client accepts and the default a server accepts: a commit
 * group's prepare carries whole slice images. */
#define XT_RPC_MAX_FRAME (1 << 30)
#define XT_RPC_DEFAULT_SERVER_FRAME (256 << 20)

/* What a handler learns about the request it serves. */
typedef struct xt_rpc_ctx {
    int64_t req_id;        /* the caller's id, equal across retries */
    uint64_t deadline_ns;  /* xt_mono_ns() after which the caller gave up */
    int hops;              /* forwarding hops so far */
    int64_t ring_version;  /* caller's ring version */
    int32_t client_id;     /* caller's R2 site id, 0 if unregistered */
    int auth_role;         /* what the connection proved (enum xt_auth_role);
                              XT_AUTH_NONE only on an open-mode server */
    int32_t auth_fsid;     /* role client: the only fs it may touch */
} xt_rpc_ctx;

/* How a client identifies one call: the same id on every retry. */
typedef struct xt_rpc_call {
    int64_t req_id;        /* 0: a new id is drawn */
    int timeout_ms;        /* 0: the pool's call_timeout_ms */
    int hops;
    int64_t ring_version;
} xt_rpc_call;

/* A fresh, process-unique, non-zero request id. */
int64_t xt_rpc_new_req_id(void);

/* ---- server ----------------------------------------------------------- */

typedef struct xt_rpc_server xt_rpc_server;

struct xt_rpc_server_opts {
    const char *host;        /* bind address; NULL: 127.0.0.1 */
    int port;                /* 0: a free port, see xt_rpc_server_port() */
    int io_threads;          /* 0: 2 */
    int workers;             /* extra threads for servers whose handlers
                                block (slice loads, sync); the pool is
                                io_threads + workers */
    int default_budget_ms;   /* deadline of requests without a budget; 0: 30000 */
    int max_frame_bytes;     /* 0: XT_RPC_DEFAULT_SERVER_FRAME */
    /* Limits against slow, idle or hostile clients (xt_rpc_server.cpp;
     * docs/rpc.md "Limits"). 0 takes the default, < 0 turns a limit off. */
    int max_clients;         /* connections served at once; more are accepted
                                and closed at once. 0: 10000, at most the
                                descriptor limit less a reserve */
    int64_t input_budget;    /* bytes of unfinished request frames buffered
                                across all connections; a connection that
                                would pass it is closed. 0: the larger of
                                256 MiB and max_frame_bytes */
    int64_t output_budget;   /* bytes of replies queued for slow readers
                                across all connections; 0: as input_budget */
    int idle_timeout_ms;     /* a connection idle this long is closed; 0: 300000 */
    int request_timeout_ms;  /* a request frame not received, or a reply not
                                taken, within this is closed, and so is a
                                handshake not done within it; 0: 30000 */
    /* The cluster key (XT_AUTH_KEY_LEN bytes, copied): every connection
     * proves it, or a client key derived from it, before any request is
     * read (xt_auth.h). NULL: open mode, no authentication. */
    const uint8_t *key;
    /* Role client: the current key generation of fsid into *gen; returns 0
     * or -ENOENT (no such fs: the connection is refused). NULL: 0 for
     * every fsid. Called at connect only, from a server thread. */
    int (*key_gen)(void *key_ctx, int32_t fsid, uint64_t *gen);
    void *key_ctx;
    /* --key-file / --init-key, read by xt_rpc_server_flags_done. */
    const char *key_file;
    int init_key;            /* create key_file with a new key if absent */
    /* TLS (invariant 6): PEM files of this server's certificate (a chain
     * may follow it), its private key, and the CA that signs every peer's
     * certificate. All three or none (NULL: plain TCP). Read at start. */
    const char *tls_cert, *tls_key, *tls_ca;
};

/* Output buffer of a handler: the reply payload is copied in. */
typedef struct xt_rpc_out xt_rpc_out;
/* Copies len bytes as the reply payload. Returns 0 or -ENOMEM. */
int xt_rpc_out_set(xt_rpc_out *out, const void *p, size_t len);

struct xt_rpc_common_ops {
    /* Answer a ping: may write a payload with xt_rpc_out_set. Returns 0 or a
     * negative errno that the caller receives as the call's result. `in` is
     * valid only during the call. NULL ops->ping echoes the payload. */
    int (*ping)(void *ctx, const xt_rpc_ctx *rc, const void *in, size_t len,
                xt_rpc_out *out);
};

/* Starts a server of the Common service only (tests, benchmarks, probes).
 * Returns once it listens; *out is freed by xt_rpc_server_stop. `ops` and
 * `ctx` must outlive the server. -EADDRINUSE, -EINVAL, -ENOMEM. */
int xt_rpc_serve_common(const struct xt_rpc_server_opts *opts,
                        const struct xt_rpc_common_ops *ops, void *ctx,
                        xt_rpc_server **out);
/* The port the server listens on. */
int xt_rpc_server_port(const xt_rpc_server *s);
/* The longest stretch (ns) since the previous call during which every
 * thread of s was busy, none waiting for events, so requests waited in
 * their sockets; a stretch still running counts. For a caller that must
 * tell its own stall from its peers' silence (R2's failure detector). */
uint64_t xt_rpc_server_stall_ns(xt_rpc_server *s);
/* Counters of a server since it started (relaxed atomics: a reader may
 * lag by the events in flight). */
struct xt_rpc_server_stats {
    uint64_t connections;   /* open now */
    uint64_t accepted;      /* connections accepted and served */
    uint64_t refused;       /* closed at once: --max-clients reached */
    uint64_t requests;      /* request frames run through the service */
    uint64_t malformed;     /* frames that closed their connection */
};
void xt_rpc_server_stats(xt_rpc_server *s, struct xt_rpc_server_stats *st);
/* Writes the families of the server s (NULL: none) and of the process's
 * pools, named prefix_rpc_... (prefix "pom_mds" and so on; docs/metrics.md),
 * into b. */
struct xt_metrics_buf;
void xt_rpc_metrics_put(struct xt_metrics_buf *b, const char *prefix, xt_rpc_server *s);
/* Stops accepting, lets running handlers finish, joins every thread and
 * frees the server. Safe to call from any thread but a handler's. */
void xt_rpc_server_stop(xt_rpc_server *s);

/* ---- the daemons' flags for the server limits -------------------------- */

/* getopt_long entries a daemon adds to its option table (codes from
 * XT_RPC_FLAG_BASE on, clear of any character code). */
#define XT_RPC_FLAG_BASE 0x1000
#define XT_RPC_SERVER_FLAGS                                                   \
    { "max-clients", required_argument, NULL, XT_RPC_FLAG_BASE + 0 },         \
    { "input-budget", required_argument, NULL, XT_RPC_FLAG_BASE + 1 },        \
    { "output-budget", required_argument, NULL, XT_RPC_FLAG_BASE + 2 },       \
    { "idle-timeout-ms", required_argument, NULL, XT_RPC_FLAG_BASE + 3 },     \
    { "request-timeout-ms", required_argument, NULL, XT_RPC_FLAG_BASE + 4 },   \
    { "key-file", required_argument, NULL, XT_RPC_FLAG_BASE + 5 },            \
    { "init-key", required_argument, NULL, XT_RPC_FLAG_BASE + 6 },            \
    { "tls-cert", required_argument, NULL, XT_RPC_FLAG_BASE + 7 },            \
    { "tls-key", required_argument, NULL, XT_RPC_FLAG_BASE + 8 },             \
    { "tls-ca", required_argument, NULL, XT_RPC_FLAG_BASE + 9 }

/* If code is one of XT_RPC_SERVER_FLAGS: parses arg into *o and returns 1,
 * or prints why arg is wrong (after "prog: ") and returns -EINVAL. Any
 * other code: returns 0. On the command line 0 turns a limit off. */
int xt_rpc_server_flag(int code, const char *arg, struct xt_rpc_server_opts *o,
                       const char *prog);
/* After the flags are parsed, with host the address to listen on: loads
 * the key (--key-file, or --init-key made first if absent), makes it the
 * server's key and, as role site, the credential of the daemon's own
 * pools (xt_rpc_set_cred); with --tls-cert/--tls-key/--tls-ca (all three
 * or none) the same files are the daemon's TLS context for its own pools
 * (xt_rpc_set_tls). Without a key: one warning line on loopback,
 * and -EINVAL (said on stderr) on any other address. `o` must outlive the
 * server's start. Returns 0 or a negative errno. */
int xt_rpc_server_flags_done(struct xt_rpc_server_opts *o, const char *host,
                             const char *prog);
/* The --help lines of XT_RPC_SERVER_FLAGS. */
void xt_rpc_server_flags_usage(FILE *f);

/* ---- client ----------------------------------------------------------- */

typedef struct xt_rpc_pool xt_rpc_pool;

struct xt_rpc_pool_opts {
    const char *host;          /* copied */
    int port;
    int max_idle;              /* idle connections kept; 0: 8 */
    int connect_timeout_ms;    /* 0: 2000 */
    int call_timeout_ms;       /* 0: 10000 */
    int backoff_min_ms;        /* first reconnect delay; 0: 50 */
    int backoff_max_ms;        /* 0: 2000 */
    const struct xt_auth_cred *cred; /* what connections prove (copied);
                                        NULL: the process's, xt_rpc_set_cred */
    struct xt_rpc_tls *tls;    /* TLS for its connections (the pool takes a
                                  reference); NULL: the process's,
                                  xt_rpc_set_tls, or plain TCP */
};

/* A client TLS context (invariant 6): the certificate and key a
 * connection presents and the CA its server's certificate must chain to. */
struct xt_rpc_tls_opts {
    const char *ca, *cert, *key; /* PEM file paths: all three, or none */
};
typedef struct xt_rpc_tls xt_rpc_tls;

/* Loads and checks the files of o into a new context (reference count 1);
 * none named (or o NULL): *out NULL, no TLS. Ignores SIGPIPE if it is at
 * its default: OpenSSL writes to sockets with write(2). Returns 0, or
 * -EINVAL (one or two paths of three) or -EKEYREJECTED (a file unreadable
 * or not matching), said on stderr. */
int xt_rpc_tls_new(const struct xt_rpc_tls_opts *o, xt_rpc_tls **out);
/* Another reference to t (returned); each is dropped by xt_rpc_tls_free. */
xt_rpc_tls *xt_rpc_tls_ref(xt_rpc_tls *t);
void xt_rpc_tls_free(xt_rpc_tls *t);
/* The TLS context of pools made without one (a daemon's, pomctl's); takes
 * a reference. NULL: plain TCP. Called at start, before any pool is made. */
void xt_rpc_set_tls(xt_rpc_tls *t);

/* The credential of pools made without one (a daemon's site key, pomctl's
 * admin key); NULL: none. Called at start, before any pool is made. A
 * connection with no credential is accepted only by an open-mode server;
 * one with a credential accepts only a server that proves the same key.
 * Connects that fail the handshake return -ENOKEY (the server wants a key)
 * or -EKEYREJECTED (wrong key) and log why. */
void xt_rpc_set_cred(const struct xt_auth_cred *cred);

/* A pool of connections to one destination; connects lazily. Thread-safe.
 * Caller frees with xt_rpc_pool_free (after every call on it returned). */
int xt_rpc_pool_new(const struct xt_rpc_pool_opts *opts, xt_rpc_pool **out);
void xt_rpc_pool_free(xt_rpc_pool *p);
/* "host:port" of the destination; valid while the pool lives. */
const char *xt_rpc_pool_addr(const xt_rpc_pool *p);

/* Counters of a pool, for tests and status pages. */
struct xt_rpc_pool_stats {
    uint64_t calls, errors, timeouts, connects, connect_failures, retries;
};
void xt_rpc_pool_stats(const xt_rpc_pool *p, struct xt_rpc_pool_stats *st);
/* The same summed over every pool the process made (freed ones included). */
void xt_rpc_pool_totals(struct xt_rpc_pool_stats *st);

/* Common.ping: sends `len` bytes, receives up to `cap` bytes into `reply`
 * (*reply_len gets the full length; bytes past cap are dropped). `call` may
 * be NULL. Returns 0 or a negative errno (see invariant 1). */
int xt_rpc_ping(xt_rpc_pool *p, const xt_rpc_call *call, const void *payload,
                size_t len, void *reply, size_t cap, size_t *reply_len);

/* Parses "host:port" (IPv4 name or [v6]) into host (cap bytes) and port
 * 1..65535. Returns 0 or -EINVAL. */
int xt_rpc_parse_addr(const char *addr, char *host, size_t cap, int *port);
/* The same for a listen address, where port 0 means "any free port". */
int xt_rpc_parse_listen(const char *addr, char *host, size_t cap, int *port);

#ifdef __cplusplus
}
#endif
#endif /* XT_RPC_H */
