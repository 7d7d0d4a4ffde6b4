/*
 * xt_rpc_server.cpp -- the RPC server: a fixed pool of threads over one
 * epoll set, each thread reading a request frame, running the Thrift
 * processor on it and writing the reply (leader/follower style).
 *
 * Why not Thrift's TNonblockingServer: it moves every call between its
 * libevent io thread and a worker queue and re-registers the socket for
 * write readiness, 4 epoll_ctl and 2 thread wake-ups a call; on loopback
 * that doubled the round trip against raw TCP (bench_rpc). Here a call
 * that can be answered at once costs epoll_wait + recv + send + one
 * epoll_ctl re-arm, and the same thread that read the frame answers it.
 *
 * Invariants:
 *  (1) A connection is registered EPOLLONESHOT: at most one thread works on
 *      it at a time, so its buffers need no lock. The thread re-arms it
 *      when done, or closes it.
 *  (2) Frames are a 4-byte big-endian length and a body; a length of 0 or
 *      over max_frame closes the connection (framed transport).
 *  (3) Requests land in the serving thread's scratch buffer; a connection
 *      owns input memory only for an unfinished frame, grown by doubling
 *      with the bytes that came (never to the length a header claims) and
 *      counted in in_bytes. An idle connection owns no buffer. A connection
 *      that would take in_bytes past in_budget is closed.
 *  (4) A reply the socket does not take at once is queued on its connection
 *      (out_bytes, bounded by out_budget) and the connection is re-armed for
 *      EPOLLOUT only: no further request of it is read until the reply is
 *      gone. So no thread ever waits for a slow reader, and a connection's
 *      backlog is one reply.
 *  (5) The timer (timerfd, every kTickMs, EPOLLONESHOT like a connection)
 *      keeps s->now, resumes accepting after a descriptor shortage, and
 *      every kSweepNs shuts down (shutdown(2), under s->mu) connections idle
 *      past idle_ns or with a frame or reply pending past req_ns; the thread
 *      that next serves such a connection sees the end and closes it. A
 *      connection being served (kBusy) is never timed out: handlers may
 *      block.
 *  (6) s->mu protects s->conns and SConn::doomed; a connection leaves
 *      s->conns before its descriptor is closed, so the sweeper never shuts
 *      down a descriptor number that was reused.
 *  (7) A processor exception (malformed request) closes that connection
 *      only. The server never exits on bad input.
 *  (8) With a key (opts.key), a connection is served in three states:
 *      kAuthHello -> handle_auth (HELLO) -> kAuthProof -> handle_auth
 *      (PROOF verified) -> kAuthDone; only kAuthDone frames reach the
 *      processor, any other frame, or one over kAuthMaxFrame before
 *      kAuthDone, closes the connection (xt_auth.h invariant 1). An
 *      unauthenticated connection counts as kPartial for the sweeper, so a
 *      slow handshake is closed after request_ns like a slow frame.
 *  (9) Handlers may block (slice loads, sync): that occupies one thread;
 *      the pool is sized by io_threads + workers. A stretch with no thread
 *      in epoll_wait (s->waiting == 0) is a stall: requests wait in their
 *      sockets; its length is what xt_rpc_server_stall_ns reports.
 * (10) With TLS (s->tls), a connection's first byte decides: a TLS record
 *      (0x16) gets an SSL in accept state (tls_start), anything else a
 *      plain CHALLENGE with -EPROTONOSUPPORT and the close. Every byte of
 *      a connection with an SSL goes through conn_recv/conn_send
 *      (SSL_read/SSL_write, nonblocking); a connection without one pays one
 *      branch. An SSL call that wants the other direction records it in
 *      tls_want and rearm waits for that (EPOLLIN or EPOLLOUT) instead of
 *      what invariant 4 names, so no thread waits on a socket. The TLS
 *      handshake counts as kPartial for the sweeper, as the key handshake.
 */
#include "xt_rpc_i.hpp"

#include "xt_auth.h"
#include "xt_common.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <thrift/TConfiguration.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>

using apache::thrift::TProcessor;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TMemoryBuffer;

namespace {

constexpr size_t kScratch = 256 * 1024;     /* per thread: where requests land */
constexpr size_t kMinBuf = 4 * 1024;        /* a connection's first own buffer */
constexpr uint32_t kBigReply = 1u << 20;    /* replies past this get a fresh buffer */
constexpr int kTickMs = 100;
constexpr uint64_t kSweepNs = 1000000000u;
constexpr uint64_t kAcceptPauseNs = 100000000u; /* after EMFILE/ENFILE */
constexpr int kTrimAfter = 256;             /* closed connections before a trim */
constexpr size_t kTrimBytes = 64u << 20;    /* or buffer bytes freed before a trim */
constexpr int kDefaultClients = 10000;
constexpr size_t kDefaultBudget = 256u << 20;
constexpr int kDefaultIdleMs = 300000;
constexpr int kDefaultRequestMs = 30000;
constexpr uint32_t kAuthMaxFrame = 64;      /* the largest handshake frame */

enum AuthState : uint8_t { kAuthHello, kAuthProof, kAuthDone };

/* What a connection waits for, for the sweeper (invariant 5). */
enum Phase : int { kIdle, kPartial, kOutput, kBusy };

struct SConn {
    int fd = -1;
    uint8_t *in = nullptr;               /* unfinished frame(s); malloc'd, cap counted in in_bytes */
    size_t cap = 0, have = 0;
    std::shared_ptr<TMemoryBuffer> out;  /* a reply not yet taken by the socket */
    size_t out_off = 0, out_charged = 0; /* out_charged counted in out_bytes */
    uint64_t part_since = 0, out_since = 0;
    std::atomic<int> phase{kIdle};       /* published at re-arm, read by the sweeper */
    std::atomic<uint64_t> since{0};
    bool doomed = false;                 /* protected by s->mu */
    uint8_t auth = kAuthHello;           /* invariant 8 */
    int role = XT_AUTH_NONE;             /* proved by the handshake */
    int32_t fsid = 0;
    uint8_t hello[XT_AUTH_HELLO_LEN];    /* kAuthProof: what the proofs cover */
    uint8_t snonce[XT_AUTH_NONCE_LEN];
    uint8_t key[XT_AUTH_KEY_LEN];        /* kAuthProof: the key to prove */
    SSL *ssl = nullptr;                  /* invariant 10: set once, by tls_start */
    uint32_t tls_want = 0;               /* EPOLLIN/EPOLLOUT an SSL call waits for */
};

/* One per thread: what serving a request needs besides its connection. */
struct Worker {
    std::vector<uint8_t> scratch;
    std::shared_ptr<TMemoryBuffer> ibuf, obuf;
    std::shared_ptr<TBinaryProtocol> iprot, oprot;
};

} // namespace

struct xt_rpc_server {
    int lfd = -1, epfd = -1, stopfd = -1, timerfd = -1;
    int port = 0;
    size_t max_frame = 0;
    size_t max_clients = 0;
    size_t in_budget = 0, out_budget = 0;
    uint64_t idle_ns = 0, req_ns = 0; /* 0: off */
    std::shared_ptr<TProcessor> proc;
    bool has_key = false;
    uint8_t key[XT_AUTH_KEY_LEN];          /* the cluster key, if has_key */
    int (*key_gen)(void *, int32_t, uint64_t *) = nullptr;
    void *key_ctx = nullptr;
    SSL_CTX *tls = nullptr;                /* invariant 10; NULL: plain TCP */
    std::vector<std::thread> threads;
    std::atomic<size_t> in_bytes{0}, out_bytes{0};
    std::atomic<uint64_t> now{0};          /* xt_mono_ns() at the last tick */
    std::atomic<uint64_t> accept_resume{0}; /* != 0: the listen fd waits for it */
    std::atomic<int> closed{0};            /* connections closed since the last trim */
    std::atomic<size_t> freed{0};          /* buffer bytes freed since the last trim */
    std::atomic<int> waiting{0};           /* threads in epoll_wait */
    std::atomic<uint64_t> busy_since{0};   /* coarse_ns() when waiting fell to 0 */
    std::atomic<uint64_t> max_stall{0};    /* see xt_rpc_server_stall_ns */
    std::atomic<uint64_t> accepted{0}, refused{0}, requests{0}, malformed{0}; /* stats */
    uint64_t last_sweep = 0;               /* the timer's holder only (EPOLLONESHOT) */
    std::mutex mu;
    std::unordered_set<SConn *> conns; /* protected by mu */
};

/* Thrift's default message budget is 100 MB; frames are bounded by the
 * server's max_frame instead (checked before a frame is read). */
static const std::shared_ptr<apache::thrift::TConfiguration> &big_config()
{
    static const auto cfg = std::make_shared<apache::thrift::TConfiguration>(
        XT_RPC_MAX_FRAME, XT_RPC_MAX_FRAME);
    return cfg;
}

static int arm(xt_rpc_server *s, int op, int fd, void *ptr, uint32_t events)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.ptr = ptr;
    return epoll_ctl(s->epfd, op, fd, &ev) ? -errno : 0;
}

static void drop_in(xt_rpc_server *s, SConn *c)
{
    if (!c->in)
        return;
    s->in_bytes.fetch_sub(c->cap, std::memory_order_relaxed);
    s->freed.fetch_add(c->cap, std::memory_order_relaxed);
    free(c->in);
    c->in = nullptr;
    c->cap = c->have = 0;
}

static void drop_out(xt_rpc_server *s, SConn *c)
{
    s->out_bytes.fetch_sub(c->out_charged, std::memory_order_relaxed);
    s->freed.fetch_add(c->out_charged, std::memory_order_relaxed);
    c->out.reset();
    c->out_off = c->out_charged = 0;
}

static void close_conn(xt_rpc_server *s, SConn *c)
{
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, nullptr);
    {
        std::lock_guard<std::mutex> g(s->mu);
        s->conns.erase(c);
    }
    SSL_free(c->ssl);
    close(c->fd);
    drop_in(s, c);
    drop_out(s, c);
    delete c;
    s->closed.fetch_add(1, std::memory_order_relaxed);
}

/* Gives c's input buffer `want` bytes of room in all (more, within the
 * input budget; or less). */
static int resize_in(xt_rpc_server *s, SConn *c, size_t want)
{
    assert(want >= c->have);
    if (want <= c->cap) {
        void *p = realloc(c->in, want);
        if (p) { /* else the larger buffer stays, still counted */
            s->in_bytes.fetch_sub(c->cap - want, std::memory_order_relaxed);
            s->freed.fetch_add(c->cap - want, std::memory_order_relaxed);
            c->in = static_cast<uint8_t *>(p);
            c->cap = want;
        }
        return 0;
    }
    size_t delta = want - c->cap;
    size_t total = s->in_bytes.fetch_add(delta, std::memory_order_relaxed) + delta;
    if (total > s->in_budget) {
        s->in_bytes.fetch_sub(delta, std::memory_order_relaxed);
        XT_WARN_RL(1000, "rpc: %zu bytes of unfinished requests buffered (--input-budget "
                   "%zu): closing a connection that sent %zu bytes of a frame",
                   total - delta, s->in_budget, c->have);
        return -ENOBUFS;
    }
    void *p = realloc(c->in, want);
    if (!p) {
        s->in_bytes.fetch_sub(delta, std::memory_order_relaxed);
        return -ENOMEM;
    }
    c->in = static_cast<uint8_t *>(p);
    c->cap = want;
    return 0;
}

static bool accept_all(xt_rpc_server *s)
{
    for (;;) {
        int fd = accept4(s->lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED)
                continue;
            if (e == EAGAIN || e == EWOULDBLOCK)
                return true;
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                /* The pending connection stays in the backlog and the listen
                 * fd stays readable: polling it now would spin. */
                XT_WARN_RL(1000, "rpc: accept: %s: not accepting for %llu ms", strerror(e),
                           (unsigned long long)(kAcceptPauseNs / 1000000u));
                s->accept_resume.store(xt_mono_ns() + kAcceptPauseNs);
                return false;
            }
            XT_WARN_RL(1000, "rpc: accept: %s", strerror(e));
            return true;
        }
        size_t n;
        {
            std::lock_guard<std::mutex> g(s->mu);
            n = s->conns.size();
        }
        if (n >= s->max_clients) {
            close(fd);
            s->refused.fetch_add(1, std::memory_order_relaxed);
            XT_WARN_RL(1000, "rpc: %zu connections, the most served (--max-clients): "
                       "closing new ones", n);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        SConn *c = new (std::nothrow) SConn;
        if (!c) {
            close(fd);
            continue;
        }
        c->fd = fd;
        c->since.store(s->now.load(std::memory_order_relaxed), std::memory_order_relaxed);
        try {
            std::lock_guard<std::mutex> g(s->mu);
            s->conns.insert(c);
        } catch (const std::exception &) {
            close(fd);
            delete c;
            continue;
        }
        s->accepted.fetch_add(1, std::memory_order_relaxed);
        if (arm(s, EPOLL_CTL_ADD, fd, c, EPOLLIN | EPOLLRDHUP | EPOLLONESHOT) < 0)
            close_conn(s, c);
    }
}

/* "host:port" of c's peer, for log lines. */
static void peer_name(const SConn *c, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t l = sizeof ss;
    char h[INET6_ADDRSTRLEN] = "?", p[16] = "?";
    if (getpeername(c->fd, (struct sockaddr *)&ss, &l) == 0)
        getnameinfo((struct sockaddr *)&ss, l, h, sizeof h, p, sizeof p,
                    NI_NUMERICHOST | NI_NUMERICSERV);
    snprintf(buf, cap, "%s:%s", h, p);
}

/* The result n of SSL_read/SSL_write on c as recv(2)/send(2) would give
 * it: > 0 bytes, 0 at the end, -1 with errno (EAGAIN with c->tls_want
 * set when the SSL waits for the socket; invariant 10). */
static ssize_t tls_result(SConn *c, int n)
{
    if (n > 0) {
        c->tls_want = 0;
        return n;
    }
    int e = SSL_get_error(c->ssl, n);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        c->tls_want = e == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT;
        errno = EAGAIN;
        return -1;
    }
    if (e == SSL_ERROR_ZERO_RETURN)
        return 0;
    unsigned long err = ERR_get_error();
    ERR_clear_error(); /* the queue is the thread's: the next connection starts clean */
    if (e == SSL_ERROR_SYSCALL && !err)
        return errno ? -1 : 0; /* errno says why; 0: the peer closed */
    if (!SSL_is_init_finished(c->ssl)) {
        char peer[80], why[256];
        peer_name(c, peer, sizeof peer);
        ERR_error_string_n(err, why, sizeof why);
        XT_WARN_RL(1000, "rpc: TLS handshake with %s failed: %s", peer, why);
    } else {
        XT_DBG("rpc: TLS error on a connection: %s", ERR_reason_error_string(err));
    }
    errno = EPROTO;
    return -1;
}

static ssize_t conn_recv(SConn *c, void *buf, size_t len)
{
    if (!c->ssl)
        return recv(c->fd, buf, len, MSG_DONTWAIT);
    return tls_result(c, SSL_read(c->ssl, buf, (int)std::min(len, (size_t)INT_MAX)));
}

static ssize_t conn_send(SConn *c, const void *buf, size_t len)
{
    if (!c->ssl)
        return send(c->fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    return tls_result(c, SSL_write(c->ssl, buf, (int)std::min(len, (size_t)INT_MAX)));
}

/* Sends what the socket takes of c's queued reply. Returns 1 once it is
 * all gone, 0 while some is left, < 0 to close. */
static int flush_out(xt_rpc_server *s, SConn *c)
{
    uint8_t *p;
    uint32_t len;
    c->out->getBuffer(&p, &len);
    while (c->out_off < len) {
        ssize_t w = conn_send(c, p + c->out_off, len - c->out_off);
        if (w > 0) {
            c->out_off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return w < 0 ? -errno : -EPIPE;
    }
    drop_out(s, c);
    return 1;
}

/* Sends one small handshake frame whole, or fails: the socket of a
 * connection that sent only a HELLO has room for 76 bytes. */
static int send_small(SConn *c, const uint8_t *body, uint32_t len)
{
    uint8_t f[4 + XT_AUTH_CHALLENGE_LEN];
    assert(len <= XT_AUTH_CHALLENGE_LEN);
    uint32_t be = htonl(len);
    memcpy(f, &be, 4);
    memcpy(f + 4, body, len);
    ssize_t n = conn_send(c, f, 4 + len);
    return n == (ssize_t)(4 + len) ? 0 : -EPIPE;
}

/* Answers a HELLO with a CHALLENGE (status st, and with a key our proof). */
static int send_challenge(SConn *c, int32_t st, const uint8_t *key)
{
    uint8_t ch[XT_AUTH_CHALLENGE_LEN];
    memset(ch, 0, sizeof ch);
    memcpy(ch, "POMC", 4);
    uint32_t be = htonl((uint32_t)st);
    memcpy(ch + 4, &be, 4);
    if (key) {
        if (xt_auth_key_new(c->snonce) < 0) /* a nonce, as random as a key */
            return -EIO;
        memcpy(ch + 8, c->snonce, XT_AUTH_NONCE_LEN);
        xt_auth_proof(key, 1, c->hello, c->snonce, ch + 40);
    }
    return send_small(c, ch, sizeof ch);
}

/* One handshake frame of c (invariant 8). Returns 0, 1 when the frame is a
 * request an open-mode server serves as such, < 0 to close. */
static int handle_auth(xt_rpc_server *s, SConn *c, const uint8_t *body, uint32_t len)
{
    char peer[80];
    if (c->auth == kAuthHello) {
        struct xt_auth_hello h;
        if (xt_auth_hello_parse(body, len, &h) < 0) {
            if (!s->has_key) {
                c->auth = kAuthDone; /* an open server takes requests without a HELLO */
                return 1;
            }
            peer_name(c, peer, sizeof peer);
            XT_WARN_RL(1000, "rpc: closing a connection from %s: a request before "
                       "authentication", peer);
            return -EACCES;
        }
        memcpy(c->hello, body, XT_AUTH_HELLO_LEN);
        if (!s->has_key) {
            c->auth = kAuthDone;
            return send_challenge(c, 0, nullptr);
        }
        if (h.role == XT_AUTH_NONE) {
            peer_name(c, peer, sizeof peer);
            XT_WARN_RL(1000, "rpc: authentication failed: %s has no key", peer);
            send_challenge(c, -ENOKEY, nullptr);
            return -EACCES;
        }
        if (h.role == XT_AUTH_CLIENT) {
            uint64_t gen = 0;
            int grc = h.fsid <= 0 ? -ENOENT
                      : s->key_gen ? s->key_gen(s->key_ctx, h.fsid, &gen) : 0;
            if ((grc == 0 && h.gen > gen) || (grc == -ENOENT && h.fsid > 0)) {
                /* This site may not have R2's newest fs records yet: the
                 * client retries (xt_rpc.cpp pool_connect). */
                XT_DBG("rpc: client key of fs %d generation %llu unknown here yet",
                       (int)h.fsid, (unsigned long long)h.gen);
                send_challenge(c, -EAGAIN, nullptr);
                return -EACCES;
            }
            if (grc < 0) {
                peer_name(c, peer, sizeof peer);
                XT_WARN_RL(1000, "rpc: authentication failed: %s has a client key of fs %d, "
                           "which this server does not take (%s)", peer, (int)h.fsid,
                           strerror(-grc));
                send_challenge(c, grc, nullptr);
                return -EACCES;
            }
            xt_auth_client_key(s->key, h.fsid, gen, c->key);
            c->fsid = h.fsid;
        } else {
            memcpy(c->key, s->key, XT_AUTH_KEY_LEN);
        }
        c->role = h.role;
        c->auth = kAuthProof;
        return send_challenge(c, 0, c->key);
    }
    assert(c->auth == kAuthProof);
    if (len == XT_AUTH_PROOF_LEN && memcmp(body, "POMP", 4) == 0 &&
        xt_auth_proof_ok(c->key, 0, c->hello, c->snonce, body + 4)) {
        c->auth = kAuthDone;
        return 0;
    }
    peer_name(c, peer, sizeof peer);
    if (c->role == XT_AUTH_CLIENT)
        XT_WARN_RL(1000, "rpc: authentication failed: %s: wrong key for fs %d", peer,
                   (int)c->fsid);
    else
        XT_WARN_RL(1000, "rpc: authentication failed: %s: wrong cluster key (role %s)", peer,
                   xt_auth_role_name(c->role));
    return -EACCES;
}

/* Runs one request frame through the processor and sends the reply; what
 * the socket does not take at once is queued on c (invariant 4). */
static int handle_frame(xt_rpc_server *s, Worker *w, SConn *c, uint8_t *body, uint32_t len)
{
    try {
        w->ibuf->resetBuffer(body, len, TMemoryBuffer::OBSERVE);
        w->ibuf->updateKnownMessageSize(len);
        /* No string or list in a frame can be longer than the frame: without
         * these limits a 60-byte frame claiming a 2 GB method name makes
         * Thrift allocate and clear 2 GB before it notices. */
        w->iprot->setStringSizeLimit((int32_t)len);
        w->iprot->setContainerSizeLimit((int32_t)len);
        w->obuf->resetBuffer();
        static const uint8_t zero[4] = { 0, 0, 0, 0 };
        w->obuf->write(zero, 4); /* frame length, patched below */
        pom::glue::peer_role = c->role;
        pom::glue::peer_fsid = c->fsid;
        s->requests.fetch_add(1, std::memory_order_relaxed);
        s->proc->process(w->iprot, w->oprot, nullptr);
    } catch (const std::exception &e) {
        s->malformed.fetch_add(1, std::memory_order_relaxed);
        XT_DBG("rpc: dropping connection on malformed request: %s", e.what());
        /* The input transport counts the bytes of the message it failed
         * in, and only a fresh one forgets them. */
        try {
            auto ib = std::make_shared<TMemoryBuffer>(big_config());
            w->iprot = std::make_shared<TBinaryProtocol>(ib);
            w->ibuf = std::move(ib);
        } catch (const std::bad_alloc &) {
        }
        return -EPROTO;
    }
    uint8_t *out;
    uint32_t olen;
    w->obuf->getBuffer(&out, &olen);
    if (olen <= 4) /* oneway call: no reply */
        return 0;
    uint32_t blen = htonl(olen - 4);
    memcpy(out, &blen, 4);
    size_t sent = 0;
    while (sent < olen) {
        ssize_t n = conn_send(c, out + sent, olen - sent);
        if (n > 0)
            sent += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        else
            return n < 0 ? -errno : -EPIPE;
    }
    if (sent == olen && olen <= kBigReply)
        return 0;
    std::shared_ptr<TMemoryBuffer> nbuf;
    std::shared_ptr<TBinaryProtocol> nprot;
    try {
        nbuf = std::make_shared<TMemoryBuffer>(big_config());
        nprot = std::make_shared<TBinaryProtocol>(nbuf);
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    }
    if (sent < olen) {
        size_t rest = olen - sent;
        size_t total = s->out_bytes.fetch_add(rest, std::memory_order_relaxed) + rest;
        if (total > s->out_budget) {
            s->out_bytes.fetch_sub(rest, std::memory_order_relaxed);
            XT_WARN_RL(1000, "rpc: %zu bytes of replies queued for slow readers "
                       "(--output-budget %zu): closing one", total - rest, s->out_budget);
            return -ENOBUFS;
        }
        c->out = std::move(w->obuf); /* the reply's buffer moves to c: no copy */
        c->out_off = sent;
        c->out_charged = rest;
        c->out_since = s->now.load(std::memory_order_relaxed);
    }
    w->obuf = std::move(nbuf);
    w->oprot = std::move(nprot);
    return 0;
}

/* Serves the complete frames at the head of buf[0..n) until a frame is
 * unfinished or a reply is queued; *used gets the bytes served. */
static int consume(xt_rpc_server *s, Worker *w, SConn *c, uint8_t *buf, size_t n, size_t *used)
{
    size_t off = 0;
    int rc = 0;
    while (n - off >= 4 && !c->out) {
        uint32_t len;
        memcpy(&len, buf + off, 4);
        len = ntohl(len);
        bool authed = c->auth == kAuthDone;
        if (len == 0 || len > s->max_frame || (!authed && s->has_key && len > kAuthMaxFrame)) {
            XT_DBG("rpc: bad frame length %u, closing connection", len);
            rc = -EPROTO;
            break;
        }
        if (n - off - 4 < len)
            break;
        if (!authed && (rc = handle_auth(s, c, buf + off + 4, len)) < 0)
            break;
        if ((authed || rc == 1) && (rc = handle_frame(s, w, c, buf + off + 4, len)) < 0)
            break;
        off += 4 + (size_t)len;
    }
    *used = off;
    return rc;
}

/* Serves what c's own buffer holds; frees the buffer once it is empty. */
static int consume_own(xt_rpc_server *s, Worker *w, SConn *c)
{
    size_t used;
    int rc = consume(s, w, c, c->in, c->have, &used);
    if (rc < 0 || used == 0)
        return rc;
    c->have -= used;
    if (c->have == 0) {
        drop_in(s, c);
        return 0;
    }
    memmove(c->in, c->in + used, c->have);
    c->part_since = s->now.load(std::memory_order_relaxed);
    if (c->cap > kScratch && c->have < c->cap / 4)
        return resize_in(s, c, std::max(c->have, kMinBuf));
    return 0;
}

/* The first byte of a connection to a TLS server (invariant 10): a TLS
 * record gets c an SSL (returns 1); anything else is refused with a plain
 * CHALLENGE the client reads as "TLS required". 0: nothing came yet. */
static int tls_start(xt_rpc_server *s, SConn *c)
{
    assert(s->tls && !c->ssl);
    uint8_t b;
    ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0)
        return -ECONNRESET;
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
    if (b != 0x16) { /* TLS ContentType handshake */
        char peer[80];
        peer_name(c, peer, sizeof peer);
        XT_WARN_RL(1000, "rpc: closing a plain connection from %s: this server takes TLS "
                   "only", peer);
        send_challenge(c, -EPROTONOSUPPORT, nullptr);
        return -EPROTONOSUPPORT;
    }
    c->ssl = SSL_new(s->tls);
    if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
        ERR_clear_error();
        return -ENOMEM; /* close_conn frees a half-made SSL */
    }
    SSL_set_accept_state(c->ssl);
    return 1;
}

/* Reads what the socket has and serves every complete frame, stopping when
 * a reply is queued. Returns 0 to re-arm the connection, < 0 to close it. */
static int serve_conn(xt_rpc_server *s, Worker *w, SConn *c)
{
    int rc;
    if (s->tls && !c->ssl && (rc = tls_start(s, c)) <= 0)
        return rc;
    if (c->out && (rc = flush_out(s, c)) <= 0)
        return rc;
    if (c->have && ((rc = consume_own(s, w, c)) < 0 || c->out))
        return rc;
    for (;;) {
        bool own = c->have > 0;
        uint8_t *dst;
        size_t space;
        if (own) {
            /* One unfinished frame at the front; once the buffer is full,
             * room doubles, never to the claimed length at once: memory
             * follows the bytes that came (invariant 3). */
            if (c->have == c->cap) {
                size_t need = 4;
                if (c->have >= 4) {
                    uint32_t len;
                    memcpy(&len, c->in, 4);
                    need = 4 + (size_t)ntohl(len);
                }
                if ((rc = resize_in(s, c, std::min(need, c->cap * 2))) < 0)
                    return rc;
            }
            dst = c->in + c->have;
            space = c->cap - c->have;
        } else {
            dst = w->scratch.data();
            space = w->scratch.size();
        }
        ssize_t r = conn_recv(c, dst, space);
        if (r == 0)
            return -ECONNRESET;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -errno;
        }
        if (own) {
            c->have += (size_t)r;
            rc = consume_own(s, w, c);
        } else {
            size_t used;
            rc = consume(s, w, c, dst, (size_t)r, &used);
            if (rc == 0 && used < (size_t)r) {
                /* The unfinished rest moves to a buffer of c's own. */
                size_t rest = (size_t)r - used;
                if ((rc = resize_in(s, c, std::max(rest, kMinBuf))) == 0) {
                    memcpy(c->in, dst + used, rest);
                    c->have = rest;
                    c->part_since = s->now.load(std::memory_order_relaxed);
                }
            }
        }
        if (rc < 0 || c->out)
            return rc;
        /* Drained: the EPOLLONESHOT re-arm reports anything newer; an SSL
         * may still hold the rest of a record it decrypted. */
        if ((size_t)r < space && (!c->ssl || !SSL_pending(c->ssl)))
            return 0;
    }
}

/* Publishes what c now waits for (invariant 5) and hands it back to epoll. */
static int rearm(xt_rpc_server *s, SConn *c)
{
    int ph = c->out ? kOutput
             : c->have || (s->has_key && c->auth != kAuthDone) ||
                     (s->tls && (!c->ssl || !SSL_is_init_finished(c->ssl)))
                 ? kPartial
                 : kIdle;
    uint64_t since = ph == kOutput    ? c->out_since
                     : c->have        ? c->part_since
                     : ph == kPartial ? c->since.load(std::memory_order_relaxed) /* accepted */
                                      : s->now.load(std::memory_order_relaxed);
    c->since.store(since, std::memory_order_relaxed);
    c->phase.store(ph, std::memory_order_release);
    /* With a reply queued only writability matters; EPOLLRDHUP would
     * report a half-closed peer again and again. */
    uint32_t dir = c->out ? EPOLLOUT : EPOLLIN;
    if (c->ssl && c->tls_want)
        dir = c->tls_want; /* invariant 10 */
    return arm(s, EPOLL_CTL_MOD, c->fd, c,
               dir == EPOLLOUT ? EPOLLOUT | EPOLLONESHOT : EPOLLIN | EPOLLRDHUP | EPOLLONESHOT);
}

/* Shuts down connections past their timeout (invariant 5). */
static void sweep(xt_rpc_server *s, uint64_t now)
{
    size_t idle = 0, slow = 0;
    {
        std::lock_guard<std::mutex> g(s->mu);
        for (SConn *c : s->conns) {
            if (c->doomed)
                continue;
            int ph = c->phase.load(std::memory_order_acquire);
            uint64_t lim = ph == kIdle ? s->idle_ns : ph == kBusy ? 0 : s->req_ns;
            uint64_t since = c->since.load(std::memory_order_relaxed);
            if (!lim || now < since || now - since <= lim)
                continue;
            shutdown(c->fd, SHUT_RDWR);
            c->doomed = true;
            (ph == kIdle ? idle : slow)++;
        }
    }
    if (idle)
        XT_DBG("rpc: closing %zu idle connections", idle);
    if (slow)
        XT_WARN_RL(10000, "rpc: closing %zu connections whose request or reply took over "
                   "%llu ms (--request-timeout-ms)", slow,
                   (unsigned long long)(s->req_ns / 1000000u));
}

static void on_tick(xt_rpc_server *s)
{
    uint64_t exp;
    ssize_t r = read(s->timerfd, &exp, sizeof exp);
    (void)r;
    uint64_t now = xt_mono_ns();
    s->now.store(now, std::memory_order_relaxed);
    uint64_t resume = s->accept_resume.load();
    if (resume && now >= resume) {
        s->accept_resume.store(0);
        arm(s, EPOLL_CTL_MOD, s->lfd, &s->lfd, EPOLLIN | EPOLLONESHOT);
    }
    if (now - s->last_sweep >= kSweepNs) {
        s->last_sweep = now;
        if (s->idle_ns || s->req_ns)
            sweep(s, now);
#ifdef __GLIBC__
        /* Connections closing by the thousand, or big frames gone, leave
         * freed memory in malloc's arenas; give it back, at most once a
         * sweep. */
        if (s->closed.load(std::memory_order_relaxed) >= kTrimAfter ||
            s->freed.load(std::memory_order_relaxed) >= kTrimBytes) {
            s->closed.store(0, std::memory_order_relaxed);
            s->freed.store(0, std::memory_order_relaxed);
            malloc_trim(0);
        }
#endif
    }
    arm(s, EPOLL_CTL_MOD, s->timerfd, &s->timerfd, EPOLLIN | EPOLLONESHOT);
}

/* CLOCK_MONOTONIC_COARSE (a few ms): cheap enough for every call. */
static uint64_t coarse_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A thread goes back to epoll_wait: a stretch with every thread busy ends. */
static void thread_free(xt_rpc_server *s)
{
    if (s->waiting.fetch_add(1) != 0)
        return;
    uint64_t since = s->busy_since.load(std::memory_order_relaxed), now = coarse_ns();
    uint64_t len = since && now > since ? now - since : 0;
    uint64_t cur = s->max_stall.load(std::memory_order_relaxed);
    while (len > cur && !s->max_stall.compare_exchange_weak(cur, len))
        ;
}

static void thread_busy(xt_rpc_server *s)
{
    if (s->waiting.fetch_sub(1) == 1)
        s->busy_since.store(coarse_ns(), std::memory_order_relaxed);
}

uint64_t xt_rpc_server_stall_ns(xt_rpc_server *s)
{
    uint64_t len = s->max_stall.exchange(0);
    uint64_t since = s->busy_since.load(std::memory_order_relaxed), now = coarse_ns();
    if (s->waiting.load() == 0 && since && now > since)
        len = std::max(len, now - since);
    return len;
}

static void worker_loop(xt_rpc_server *s)
{
    Worker w;
    try {
        w.scratch.resize(kScratch);
        w.ibuf = std::make_shared<TMemoryBuffer>(big_config());
        w.obuf = std::make_shared<TMemoryBuffer>(big_config());
        w.iprot = std::make_shared<TBinaryProtocol>(w.ibuf);
        w.oprot = std::make_shared<TBinaryProtocol>(w.obuf);
    } catch (const std::exception &) {
        XT_ERR("rpc: no memory for a server thread");
        return;
    }
    for (;;) {
        struct epoll_event ev;
        thread_free(s);
        int n = epoll_wait(s->epfd, &ev, 1, -1);
        thread_busy(s);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            XT_ERR("rpc: epoll_wait: %s", strerror(errno));
            return;
        }
        if (n == 0)
            continue;
        if (ev.data.ptr == &s->stopfd)
            return;
        if (ev.data.ptr == &s->lfd) {
            if (accept_all(s))
                arm(s, EPOLL_CTL_MOD, s->lfd, &s->lfd, EPOLLIN | EPOLLONESHOT);
            continue;
        }
        if (ev.data.ptr == &s->timerfd) {
            on_tick(s);
            continue;
        }
        SConn *c = static_cast<SConn *>(ev.data.ptr);
        c->phase.store(kBusy, std::memory_order_relaxed);
        if (serve_conn(s, &w, c) < 0 || rearm(s, c) < 0)
            close_conn(s, c);
    }
}

static int listen_on(const char *host, int port, int *out_fd, int *out_port)
{
    struct addrinfo hints, *res = nullptr;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(host, ps, &hints, &res);
    if (gai != 0) {
        XT_ERR("rpc: cannot resolve %s: %s", host, gai_strerror(gai));
        return -EINVAL;
    }
    int rc = -EADDRNOTAVAIL;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
            struct sockaddr_storage ss;
            socklen_t l = sizeof ss;
            getsockname(fd, (struct sockaddr *)&ss, &l);
            *out_port = ntohs(ss.ss_family == AF_INET6
                                  ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                  : ((struct sockaddr_in *)&ss)->sin_port);
            *out_fd = fd;
            rc = 0;
            break;
        }
        rc = -errno;
        close(fd);
    }
    freeaddrinfo(res);
    return rc;
}

/* The TLS context of o's --tls-cert/--tls-key/--tls-ca into *out (NULL
 * when o names none): peers must present a certificate the CA signed. */
static int tls_server_ctx(const xt_rpc_server_opts *o, SSL_CTX **out)
{
    *out = nullptr;
    if (!o || (!o->tls_cert && !o->tls_key && !o->tls_ca))
        return 0;
    if (!o->tls_cert || !o->tls_key || !o->tls_ca) {
        XT_ERR("rpc: TLS wants a certificate, its key and the CA, all three");
        return -EINVAL;
    }
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return -ENOMEM;
    const char *what = o->tls_cert;
    bool ok = SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) == 1 &&
              SSL_CTX_use_certificate_chain_file(ctx, o->tls_cert) == 1 &&
              (what = o->tls_key, SSL_CTX_use_PrivateKey_file(ctx, o->tls_key,
                                                              SSL_FILETYPE_PEM) == 1) &&
              SSL_CTX_check_private_key(ctx) == 1 &&
              (what = o->tls_ca, SSL_CTX_load_verify_locations(ctx, o->tls_ca, nullptr) == 1);
    if (!ok) {
        char why[256];
        ERR_error_string_n(ERR_get_error(), why, sizeof why);
        ERR_clear_error();
        XT_ERR("rpc: TLS: cannot use %s: %s", what, why);
        SSL_CTX_free(ctx);
        return -EKEYREJECTED;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
    /* A queued reply moves from the thread's buffer to the connection's
     * and is sent from its offset (invariant 4). */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_num_tickets(ctx, 0); /* clients do not resume sessions */
    *out = ctx;
    return 0;
}

/* The limits of o, defaults filled in (xt_rpc.h, struct xt_rpc_server_opts). */
static void resolve_limits(xt_rpc_server *s, const xt_rpc_server_opts *o)
{
    int clients = o ? o->max_clients : 0;
    s->max_clients = clients > 0 ? (size_t)clients : clients < 0 ? SIZE_MAX : kDefaultClients;
    /* Past the descriptor limit accept fails anyway; a reserve stays for the
     * files, pools and stores of the daemon itself. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        size_t lim = (size_t)rl.rlim_cur;
        size_t cap = lim - std::min(lim / 2, (size_t)256);
        s->max_clients = std::min(s->max_clients, cap);
    }
    size_t budget = std::max(kDefaultBudget, s->max_frame + 4);
    int64_t ib = o ? o->input_budget : 0, ob = o ? o->output_budget : 0;
    s->in_budget = ib > 0 ? (size_t)ib : ib < 0 ? SIZE_MAX : budget;
    s->out_budget = ob > 0 ? (size_t)ob : ob < 0 ? SIZE_MAX : budget;
    int idle = o ? o->idle_timeout_ms : 0, req = o ? o->request_timeout_ms : 0;
    s->idle_ns = (uint64_t)(idle > 0 ? idle : idle < 0 ? 0 : kDefaultIdleMs) * 1000000u;
    s->req_ns = (uint64_t)(req > 0 ? req : req < 0 ? 0 : kDefaultRequestMs) * 1000000u;
}

int pom::glue::serve(const xt_rpc_server_opts *o, const std::shared_ptr<TProcessor> &proc,
                     xt_rpc_server **out)
{
    const char *host = o && o->host ? o->host : "127.0.0.1";
    int port = o ? o->port : 0;
    if (port < 0 || port > 65535 || !proc)
        return -EINVAL;
    xt_rpc_server *s = new (std::nothrow) xt_rpc_server;
    if (!s)
        return -ENOMEM;
    s->proc = proc;
    if (o && o->key) {
        s->has_key = true;
        memcpy(s->key, o->key, XT_AUTH_KEY_LEN);
        s->key_gen = o->key_gen;
        s->key_ctx = o->key_ctx;
    }
    s->max_frame = o && o->max_frame_bytes > 0 ? (size_t)o->max_frame_bytes
                                                : (size_t)XT_RPC_DEFAULT_SERVER_FRAME;
    resolve_limits(s, o);
    int rc = tls_server_ctx(o, &s->tls);
    if (rc < 0) {
        delete s;
        return rc;
    }
    rc = listen_on(host, port, &s->lfd, &s->port);
    if (rc < 0) {
        XT_ERR("rpc: cannot listen on %s:%d: %s", host, port, strerror(-rc));
        SSL_CTX_free(s->tls);
        delete s;
        return rc;
    }
    s->now.store(xt_mono_ns());
    s->last_sweep = s->now.load();
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_interval.tv_nsec = its.it_value.tv_nsec = kTickMs * 1000000L;
    if (s->epfd < 0 || s->stopfd < 0 || s->timerfd < 0 ||
        timerfd_settime(s->timerfd, 0, &its, nullptr) < 0 ||
        arm(s, EPOLL_CTL_ADD, s->stopfd, &s->stopfd, EPOLLIN) < 0 ||
        arm(s, EPOLL_CTL_ADD, s->timerfd, &s->timerfd, EPOLLIN | EPOLLONESHOT) < 0 ||
        arm(s, EPOLL_CTL_ADD, s->lfd, &s->lfd, EPOLLIN | EPOLLONESHOT) < 0) {
        rc = -errno;
        xt_rpc_server_stop(s);
        return rc ? rc : -EIO;
    }
    int nthreads = (o && o->io_threads > 0 ? o->io_threads : 2) + (o ? XT_MAX(o->workers, 0) : 0);
    try {
        for (int i = 0; i < nthreads; i++)
            s->threads.emplace_back(worker_loop, s);
    } catch (const std::exception &) {
        xt_rpc_server_stop(s);
        return -EAGAIN;
    }
    *out = s;
    return 0;
}

int xt_rpc_server_port(const xt_rpc_server *s)
{
    return s->port;
}

void xt_rpc_server_stats(xt_rpc_server *s, struct xt_rpc_server_stats *st)
{
    {
        std::lock_guard<std::mutex> g(s->mu);
        st->connections = s->conns.size();
    }
    st->accepted = s->accepted.load(std::memory_order_relaxed);
    st->refused = s->refused.load(std::memory_order_relaxed);
    st->requests = s->requests.load(std::memory_order_relaxed);
    st->malformed = s->malformed.load(std::memory_order_relaxed);
}

void xt_rpc_server_stop(xt_rpc_server *s)
{
    if (!s)
        return;
    if (s->stopfd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(s->stopfd, &one, sizeof one); /* level-triggered: wakes all */
        (void)w;
    }
    for (auto &t : s->threads)
        t.join();
    for (SConn *c : s->conns) {
        SSL_free(c->ssl);
        close(c->fd);
        free(c->in);
        delete c;
    }
    s->conns.clear();
    if (s->timerfd >= 0)
        close(s->timerfd);
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->epfd >= 0)
        close(s->epfd);
    SSL_CTX_free(s->tls);
    if (s->stopfd >= 0)
        close(s->stopfd);
    delete s;
}
