/*
 * xt_rpc.cpp -- connection pools, the server, request ids, Common.ping.
 *
 * Pool: idle connections in a vector under p->mu (held only to push/pop).
 * A connect failure arms a back-off window (doubling from backoff_min to
 * backoff_max); calls inside the window fail at once with -ECONNREFUSED
 * instead of hammering a dead peer. A successful connect resets it.
 *
 * Every new connection runs the client side of the handshake (xt_auth.h)
 * before its first call; an authentication failure is not a connect
 * failure: it arms no back-off and is returned as -ENOKEY/-EKEYREJECTED.
 * With TLS (xt_rpc.h invariant 6) the connection is Thrift's TSSLSocket:
 * its TLS handshake runs on the first write, the HELLO, so a TLS failure
 * shows up in handshake() and is returned as -EKEYREJECTED.
 *
 * The server is in xt_rpc_server.cpp.
 */
#include "xt_rpc_i.hpp"

#include "xt_common.h"

#include <arpa/inet.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include <thrift/TApplicationException.h>
#include <thrift/TConfiguration.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/protocol/TProtocolException.h>
#include <thrift/transport/TBufferTransports.h>
#include <thrift/transport/TSSLSocket.h>
#include <thrift/transport/TSocket.h>
#include <thrift/transport/TTransportException.h>

#include <openssl/ssl.h>
#include <signal.h>

using namespace apache::thrift;
using namespace apache::thrift::transport;
using namespace apache::thrift::protocol;
using pom::glue::ProtoPtr;

namespace {

struct Conn {
    std::shared_ptr<TSocket> sock;
    std::shared_ptr<TTransport> trans;
    ProtoPtr proto;
    int timeout_ms = -1; /* last SO_RCVTIMEO/SO_SNDTIMEO set: skip 2 syscalls a call */
};

uint64_t now_ms()
{
    return xt_mono_ns() / 1000000u;
}

/* Thrift prints every dropped connection on stderr; a malformed frame is an
 * expected event for a server, so its chatter goes to our debug log. */
void thrift_to_log(const char *msg)
{
    XT_DBG("thrift: %s", msg);
}

struct ThriftLogRoute {
    ThriftLogRoute() { apache::thrift::GlobalOutput.setOutputFunction(thrift_to_log); }
} thrift_log_route;

/* Thrift's factory keeps its SSL_CTX to itself; the key check, the
 * version floor and sockets with our frame limits (TlsSocket) need it.
 * SSLTLS negotiates up to TLS 1.3 (Thrift's LATEST pins TLS 1.2); the
 * floor is TLS 1.2. The factory also keeps OpenSSL initialized. */
struct TlsFactory : public TSSLSocketFactory {
    TlsFactory() : TSSLSocketFactory(SSLTLS) {}
    SSL_CTX *raw() { return ctx_->get(); }
    const std::shared_ptr<SSLContext> &ctx() const { return ctx_; }
};

/* A client TSSLSocket with a configuration of ours: the factory's
 * createSocket takes none, and a reply may be up to XT_RPC_MAX_FRAME. */
struct TlsSocket : public TSSLSocket {
    TlsSocket(const std::shared_ptr<SSLContext> &ctx, const std::string &host, int port,
              const std::shared_ptr<TConfiguration> &cfg)
        : TSSLSocket(ctx, host, port, cfg) {}
};

} // namespace

struct xt_rpc_tls {
    std::shared_ptr<TlsFactory> f;
    /* The server's certificate must name the host dialled (a DNS or IP
     * subjectAltName): a certificate signed by the CA for another site
     * does not pass. */
    std::shared_ptr<AccessManager> names = std::make_shared<DefaultClientAccessManager>();
    std::atomic<int> refs{1};
};

struct xt_rpc_pool {
    std::string host;
    std::string addr;
    int port;
    size_t max_idle;
    int connect_timeout_ms, call_timeout_ms, backoff_min_ms, backoff_max_ms;
    bool has_cred = false;
    xt_auth_cred cred;
    xt_rpc_tls *tls = nullptr;       /* a reference, or plain TCP */

    std::mutex mu;
    std::vector<Conn> idle;          /* protected by mu */
    uint64_t retry_at_ms = 0;        /* protected by mu: back-off window end */
    int backoff_ms = 0;              /* protected by mu */

    std::atomic<uint64_t> calls{0}, errors{0}, timeouts{0}, connects{0},
        connect_failures{0}, retries{0};
};

/* The counters of every pool of the process together (xt_rpc_pool_totals):
 * each pool counter is bumped with its twin here. */
static struct {
    std::atomic<uint64_t> calls{0}, errors{0}, timeouts{0}, connects{0},
        connect_failures{0}, retries{0};
} g_all;

/* The process's credential (xt_rpc_set_cred): set before any pool. */
static bool g_has_cred;
static xt_auth_cred g_cred;

void xt_rpc_set_cred(const struct xt_auth_cred *cred)
{
    g_has_cred = cred != nullptr;
    if (cred)
        g_cred = *cred;
}

/* ---- TLS contexts -------------------------------------------------------- */

static xt_rpc_tls *g_tls; /* xt_rpc_set_tls: set before any pool */

int xt_rpc_tls_new(const struct xt_rpc_tls_opts *o, xt_rpc_tls **out)
{
    *out = nullptr;
    if (!o || (!o->ca && !o->cert && !o->key))
        return 0;
    if (!o->ca || !o->cert || !o->key) {
        fprintf(stderr, "TLS wants all three: the CA, a certificate and its key\n");
        return -EINVAL;
    }
    struct sigaction sa;
    if (sigaction(SIGPIPE, nullptr, &sa) == 0 && sa.sa_handler == SIG_DFL)
        signal(SIGPIPE, SIG_IGN);
    const char *what = o->cert;
    try {
        auto f = std::make_shared<TlsFactory>();
        SSL_CTX_set_min_proto_version(f->raw(), TLS1_2_VERSION);
        f->loadCertificate(o->cert);
        what = o->key;
        f->loadPrivateKey(o->key);
        if (SSL_CTX_check_private_key(f->raw()) != 1)
            throw TSSLException("the key does not match the certificate " +
                                std::string(o->cert));
        what = o->ca;
        f->loadTrustedCertificates(o->ca);
        f->authenticate(true);
        xt_rpc_tls *t = new xt_rpc_tls;
        t->f = std::move(f);
        *out = t;
        return 0;
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (const std::exception &e) {
        fprintf(stderr, "TLS: cannot use %s: %s\n", what, e.what());
        return -EKEYREJECTED;
    }
}

xt_rpc_tls *xt_rpc_tls_ref(xt_rpc_tls *t)
{
    if (t)
        t->refs.fetch_add(1);
    return t;
}

void xt_rpc_tls_free(xt_rpc_tls *t)
{
    if (t && t->refs.fetch_sub(1) == 1)
        delete t;
}

void xt_rpc_set_tls(xt_rpc_tls *t)
{
    xt_rpc_tls_free(g_tls);
    g_tls = xt_rpc_tls_ref(t);
}

/* ---- request ids -------------------------------------------------------- */

int64_t xt_rpc_new_req_id(void)
{
    /* High bits: a per-process random-ish base so ids of two clients differ;
     * low bits: a counter. Never 0. */
    static std::atomic<uint64_t> counter{0};
    static const uint64_t base =
        (xt_now_ns() ^ ((uint64_t)getpid() << 32)) & 0x7fffffff00000000ull;
    uint64_t c = counter.fetch_add(1, std::memory_order_relaxed) + 1;
    return (int64_t)((base + (c << 1)) & 0x7fffffffffffffffull) | 1;
}

static int parse_host_port(const char *addr, char *host, size_t cap, int *port, long min_port)
{
    if (!addr || !*addr)
        return -EINVAL;
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr)
        return -EINVAL;
    const char *h = addr;
    size_t hlen = (size_t)(colon - addr);
    if (h[0] == '[') {
        if (hlen < 2 || h[hlen - 1] != ']')
            return -EINVAL;
        h++;
        hlen -= 2;
    }
    if (hlen == 0 || hlen + 1 > cap)
        return -EINVAL;
    char *end = nullptr;
    errno = 0;
    long v = strtol(colon + 1, &end, 10);
    if (errno || !end || *end || end == colon + 1 || v < min_port || v > 65535)
        return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (int)v;
    return 0;
}

int xt_rpc_parse_addr(const char *addr, char *host, size_t cap, int *port)
{
    return parse_host_port(addr, host, cap, port, 1);
}

int xt_rpc_parse_listen(const char *addr, char *host, size_t cap, int *port)
{
    return parse_host_port(addr, host, cap, port, 0);
}

/* ---- client pool -------------------------------------------------------- */

int xt_rpc_pool_new(const struct xt_rpc_pool_opts *o, xt_rpc_pool **out)
{
    if (!o || !o->host || o->port <= 0 || o->port > 65535)
        return -EINVAL;
    xt_rpc_pool *p = new (std::nothrow) xt_rpc_pool;
    if (!p)
        return -ENOMEM;
    p->host = o->host;
    p->port = o->port;
    p->addr = p->host + ":" + std::to_string(o->port);
    p->max_idle = o->max_idle > 0 ? (size_t)o->max_idle : 8;
    p->connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 2000;
    p->call_timeout_ms = o->call_timeout_ms > 0 ? o->call_timeout_ms : 10000;
    p->backoff_min_ms = o->backoff_min_ms > 0 ? o->backoff_min_ms : 50;
    p->backoff_max_ms = o->backoff_max_ms > 0 ? o->backoff_max_ms : 2000;
    if (o->cred || g_has_cred) {
        p->has_cred = true;
        p->cred = o->cred ? *o->cred : g_cred;
    }
    p->tls = xt_rpc_tls_ref(o->tls ? o->tls : g_tls);
    *out = p;
    return 0;
}

void xt_rpc_pool_free(xt_rpc_pool *p)
{
    if (!p)
        return;
    for (auto &c : p->idle) {
        try {
            c.trans->close();
        } catch (...) {
        }
    }
    p->idle.clear(); /* sockets go before the context they were made in */
    xt_rpc_tls_free(p->tls);
    delete p;
}

const char *xt_rpc_pool_addr(const xt_rpc_pool *p)
{
    return p->addr.c_str();
}

void xt_rpc_pool_stats(const xt_rpc_pool *p, struct xt_rpc_pool_stats *st)
{
    st->calls = p->calls.load();
    st->errors = p->errors.load();
    st->timeouts = p->timeouts.load();
    st->connects = p->connects.load();
    st->connect_failures = p->connect_failures.load();
    st->retries = p->retries.load();
}

void xt_rpc_pool_totals(struct xt_rpc_pool_stats *st)
{
    st->calls = g_all.calls.load();
    st->errors = g_all.errors.load();
    st->timeouts = g_all.timeouts.load();
    st->connects = g_all.connects.load();
    st->connect_failures = g_all.connect_failures.load();
    st->retries = g_all.retries.load();
}

/* What a failed handshake says: "wrong key for fs N" for a client key,
 * else "wrong cluster key". */
static std::string wrong_key(const xt_rpc_pool *p)
{
    if (p->has_cred && p->cred.role == XT_AUTH_CLIENT)
        return "wrong key for fs " + std::to_string(p->cred.fsid);
    return "wrong cluster key";
}

/* The client side of the handshake on c's fresh socket (xt_auth.h). The
 * PROOF goes out with no wait for an answer: the first call follows it. */
static int handshake(xt_rpc_pool *p, Conn *c)
{
    uint8_t hello[4 + XT_AUTH_HELLO_LEN], ch[4 + XT_AUTH_CHALLENGE_LEN];
    uint32_t be = htonl(XT_AUTH_HELLO_LEN);
    memcpy(hello, &be, 4);
    if (xt_auth_hello_make(p->has_cred ? &p->cred : nullptr, hello + 4) < 0)
        return -EIO;
    c->sock->setRecvTimeout(p->connect_timeout_ms);
    c->sock->setSendTimeout(p->connect_timeout_ms);
    c->sock->write(hello, sizeof hello);
    try {
        c->sock->readAll(ch, sizeof ch);
    } catch (const TTransportException &e) {
        if (e.getType() != TTransportException::END_OF_FILE)
            throw;
        /* Most often a peer going down; a server of another version
         * closes too. Either way the call sees a reset connection. */
        XT_DBG("rpc: %s closed the connection during the handshake", p->addr.c_str());
        return -ECONNRESET;
    }
    uint32_t st;
    memcpy(&be, ch, 4);
    memcpy(&st, ch + 8, 4);
    st = ntohl(st);
    const uint8_t *body = ch + 4, *snonce = body + 8, *sproof = body + 40;
    if (ntohl(be) != XT_AUTH_CHALLENGE_LEN || memcmp(body, "POMC", 4)) {
        XT_WARN_RL(2000, "rpc: %s: malformed handshake reply", p->addr.c_str());
        return -EPROTO;
    }
    if ((int32_t)st == -EPROTONOSUPPORT) {
        XT_ERR("TLS required: %s takes TLS connections only (--tls-ca, --tls-cert, "
               "--tls-key; docs/security.md \"TLS\")", p->addr.c_str());
        return -EPROTONOSUPPORT;
    }
    if ((int32_t)st == -ENOKEY) {
        XT_ERR("authentication failed: %s wants a key (--key-file, or --data DIR "
               "holding %s)", p->addr.c_str(), XT_AUTH_KEY_FILE);
        return -ENOKEY;
    }
    if ((int32_t)st == -EAGAIN)
        return -EAGAIN; /* the server has not seen this fs or key generation yet */
    if ((int32_t)st != 0) {
        XT_ERR("authentication failed: %s at %s (%s)", wrong_key(p).c_str(), p->addr.c_str(),
               strerror(-(int32_t)st));
        return -EKEYREJECTED;
    }
    static const uint8_t zero[32] = {};
    bool open = memcmp(sproof, zero, 32) == 0;
    if (!p->has_cred)
        return open ? 0 : -EPROTO;
    if (open) {
        XT_ERR("authentication failed: %s runs without a key, this client has one: "
               "refused", p->addr.c_str());
        return -EKEYREJECTED;
    }
    uint8_t proof[4 + XT_AUTH_PROOF_LEN];
    be = htonl(XT_AUTH_PROOF_LEN);
    memcpy(proof, &be, 4);
    memcpy(proof + 4, "POMP", 4);
    xt_auth_proof(p->cred.key, 0, hello + 4, snonce, proof + 8);
    bool ok = xt_auth_proof_ok(p->cred.key, 1, hello + 4, snonce, sproof);
    /* Sent even when the server's proof is wrong: its log then says so. */
    c->sock->write(proof, sizeof proof);
    if (!ok) {
        XT_ERR("authentication failed: %s at %s", wrong_key(p).c_str(), p->addr.c_str());
        return -EKEYREJECTED;
    }
    return 0;
}

static int connect_once(xt_rpc_pool *p, Conn *c)
{
    {
        std::lock_guard<std::mutex> g(p->mu);
        if (p->retry_at_ms && now_ms() < p->retry_at_ms)
            return -ECONNREFUSED;
    }
    try {
        /* Replies such as slice loads can be large: the default 16 MB frame
         * limit of the C++ runtime would cut them. */
        static const auto cfg = std::make_shared<apache::thrift::TConfiguration>(
            XT_RPC_MAX_FRAME, XT_RPC_MAX_FRAME);
        if (p->tls) {
            auto ts = std::make_shared<TlsSocket>(p->tls->f->ctx(), p->host, p->port, cfg);
            ts->access(p->tls->names);
            c->sock = std::move(ts);
        } else {
            c->sock = std::make_shared<TSocket>(p->host, p->port, cfg);
        }
        c->sock->setConnTimeout(p->connect_timeout_ms);
        c->sock->setNoDelay(true);
        c->sock->setLinger(false, 0);
        c->trans = std::make_shared<TFramedTransport>(c->sock, cfg); /* its own frame limit too */
        c->proto = std::make_shared<TBinaryProtocol>(c->trans);
        c->trans->open();
    } catch (const std::exception &e) {
        c->sock.reset();
        p->connect_failures++, g_all.connect_failures++;
        std::lock_guard<std::mutex> g(p->mu);
        p->backoff_ms = p->backoff_ms ? std::min(p->backoff_ms * 2, p->backoff_max_ms)
                                      : p->backoff_min_ms;
        p->retry_at_ms = now_ms() + (uint64_t)p->backoff_ms;
        XT_DBG("rpc: connect %s failed: %s (retry in %d ms)", p->addr.c_str(), e.what(),
               p->backoff_ms);
        return -ECONNREFUSED;
    }
    int rc;
    try {
        rc = handshake(p, c);
    } catch (const TSSLException &e) {
        XT_ERR("TLS with %s failed: %s", p->addr.c_str(), e.what());
        rc = -EKEYREJECTED;
    } catch (const std::exception &e) {
        XT_WARN_RL(2000, "rpc: %s: handshake: %s", p->addr.c_str(), e.what());
        rc = -ECONNRESET;
    }
    if (rc < 0) {
        try {
            c->trans->close();
        } catch (...) {
        }
        return rc;
    }
    p->connects++, g_all.connects++;
    std::lock_guard<std::mutex> g(p->mu);
    p->backoff_ms = 0;
    p->retry_at_ms = 0;
    return 0;
}

/* A site learns a new fs or key generation from R2 within a heartbeat:
 * a client key newer than the server's knowledge is retried that long. */
static int pool_connect(xt_rpc_pool *p, Conn *c)
{
    uint64_t give_up = now_ms() + (uint64_t)std::max(p->connect_timeout_ms, 3000);
    for (;;) {
        int rc = connect_once(p, c);
        if (rc != -EAGAIN)
            return rc;
        if (now_ms() >= give_up) {
            XT_ERR("authentication failed: %s at %s (the server knows no such fs, or an "
                   "older key generation)", wrong_key(p).c_str(), p->addr.c_str());
            return -EKEYREJECTED;
        }
        xt_sleep_ms(100);
    }
}

/* Maps the exception in flight to -errno. */
static int map_exception(xt_rpc_pool *p, bool *stale)
{
    *stale = false;
    try {
        throw;
    } catch (const TTransportException &e) {
        switch (e.getType()) {
        case TTransportException::TIMED_OUT:
            p->timeouts++, g_all.timeouts++;
            return -ETIMEDOUT;
        case TTransportException::END_OF_FILE:
        case TTransportException::NOT_OPEN:
            *stale = true;
            return -ECONNRESET;
        case TTransportException::CORRUPTED_DATA:
            return -EPROTO;
        default:
            /* TSocket reports EAGAIN on SO_RCVTIMEO expiry as INTERNAL_ERROR
             * in some paths; its message names the timeout. */
            if (strstr(e.what(), "timed out") || strstr(e.what(), "EAGAIN")) {
                p->timeouts++, g_all.timeouts++;
                return -ETIMEDOUT;
            }
            XT_WARN("rpc: %s: transport error %d: %s", p->addr.c_str(), (int)e.getType(),
                    e.what());
            *stale = true;
            return -EIO;
        }
    } catch (const TApplicationException &e) {
        XT_WARN("rpc: %s: application error: %s", p->addr.c_str(), e.what());
        return -EPROTO;
    } catch (const TProtocolException &e) {
        XT_WARN("rpc: %s: protocol error: %s", p->addr.c_str(), e.what());
        return -EPROTO;
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (const std::exception &e) {
        XT_WARN("rpc: %s: %s", p->addr.c_str(), e.what());
        return -EIO;
    }
}

/* A connection of p for one call (an idle one, else a new one), its
 * timeouts set; *reused says which. 0 or -errno. */
static int conn_take(xt_rpc_pool *p, int timeout_ms, Conn *c, bool *reused)
{
    *reused = false;
    {
        std::lock_guard<std::mutex> g(p->mu);
        if (!p->idle.empty()) {
            *c = std::move(p->idle.back());
            p->idle.pop_back();
            *reused = true;
        }
    }
    if (!*reused) {
        int rc = pool_connect(p, c);
        if (rc < 0) {
            p->errors++, g_all.errors++;
            return rc;
        }
    }
    if (c->timeout_ms != timeout_ms) {
        c->sock->setRecvTimeout(timeout_ms);
        c->sock->setSendTimeout(timeout_ms);
        c->timeout_ms = timeout_ms;
    }
    return 0;
}

static void conn_close(Conn *c)
{
    try {
        c->trans->close();
    } catch (...) {
    }
    c->sock.reset();
}

/* The peer restarted or dropped us: every idle connection of p is as stale
 * as the one that failed. Closed outside p->mu (a close may block). */
static void drop_idle(xt_rpc_pool *p)
{
    std::vector<Conn> old;
    {
        std::lock_guard<std::mutex> g(p->mu);
        old.swap(p->idle);
    }
    for (auto &o : old)
        conn_close(&o);
}

int pom::glue::invoke(
    xt_rpc_pool *p, const xt_rpc_call *call,
    const std::function<int(const ProtoPtr &, const pom::rpc::ReqHeader &)> &fn)
{
    pom::rpc::ReqHeader h;
    int timeout_ms = call && call->timeout_ms > 0 ? call->timeout_ms : p->call_timeout_ms;
    h.req_id = call && call->req_id ? call->req_id : xt_rpc_new_req_id();
    h.budget_ms = timeout_ms;
    h.hops = call ? (int16_t)call->hops : 0;
    h.ring_version = call ? call->ring_version : 0;
    p->calls++, g_all.calls++;

    for (int attempt = 0;; attempt++) {
        Conn c;
        bool reused = false;
        int rc = conn_take(p, timeout_ms, &c, &reused);
        if (rc < 0)
            return rc;
        bool stale = false;
        try {
            rc = fn(c.proto, h);
        } catch (...) {
            rc = map_exception(p, &stale);
            conn_close(&c);
            /* A pooled connection the peer closed while idle: the request
             * never reached a live handler. Every idle connection is as
             * stale as this one: drop them all, and retry once on a fresh
             * one, same request id. */
            if (stale && reused && attempt == 0) {
                drop_idle(p);
                p->retries++, g_all.retries++;
                continue;
            }
            p->errors++, g_all.errors++;
            return rc;
        }
        std::lock_guard<std::mutex> g(p->mu);
        if (p->idle.size() < p->max_idle)
            p->idle.push_back(std::move(c));
        if (rc < 0)
            p->errors++, g_all.errors++;
        return rc;
    }
}

void pom::glue::invoke_each(size_t n, const Each *each, int *rcs)
{
    std::vector<Conn> conns(n);
    std::vector<pom::rpc::ReqHeader> hs(n);
    std::vector<char> reused(n, 0), sent(n, 0), again(n, 0);
    /* Inside a catch: the call's exception mapped, its connection closed;
     * a stale pooled one is tried again below (as invoke does). */
    auto failed = [&](size_t i) {
        xt_rpc_pool *p = each[i].pool;
        bool stale;
        rcs[i] = map_exception(p, &stale);
        conn_close(&conns[i]);
        again[i] = stale && reused[i];
        if (!again[i])
            p->errors++, g_all.errors++;
    };
    for (size_t i = 0; i < n; i++) {
        xt_rpc_pool *p = each[i].pool;
        const xt_rpc_call *call = each[i].call;
        int timeout_ms = call && call->timeout_ms > 0 ? call->timeout_ms : p->call_timeout_ms;
        hs[i].req_id = call && call->req_id ? call->req_id : xt_rpc_new_req_id();
        hs[i].budget_ms = timeout_ms;
        hs[i].hops = call ? (int16_t)call->hops : 0;
        hs[i].ring_version = call ? call->ring_version : 0;
        p->calls++, g_all.calls++;
        bool r = false;
        rcs[i] = conn_take(p, timeout_ms, &conns[i], &r);
        reused[i] = r;
        if (rcs[i] < 0)
            continue;
        try {
            each[i].send(conns[i].proto, hs[i]);
            sent[i] = 1;
        } catch (...) {
            failed(i);
        }
    }
    for (size_t i = 0; i < n; i++) {
        xt_rpc_pool *p = each[i].pool;
        if (sent[i]) {
            try {
                rcs[i] = each[i].recv(conns[i].proto);
                std::lock_guard<std::mutex> g(p->mu);
                if (p->idle.size() < p->max_idle)
                    p->idle.push_back(std::move(conns[i]));
                if (rcs[i] < 0)
                    p->errors++, g_all.errors++;
                continue;
            } catch (...) {
                failed(i);
            }
        }
        /* A pooled connection the peer closed while idle: as invoke does,
         * once more on a fresh connection, same request id. */
        if (again[i]) {
            xt_rpc_call call = each[i].call ? *each[i].call : xt_rpc_call{};
            call.req_id = hs[i].req_id;
            drop_idle(p);
            p->retries++, g_all.retries++;
            const Each &e = each[i];
            rcs[i] = invoke(p, &call, [&](const ProtoPtr &proto, const pom::rpc::ReqHeader &h) {
                e.send(proto, h);
                return e.recv(proto);
            });
        }
    }
}

int xt_rpc_ping(xt_rpc_pool *p, const xt_rpc_call *call, const void *payload,
                size_t len, void *reply, size_t cap, size_t *reply_len)
{
    pom::rpc::PingReq req;
    req.payload.assign(static_cast<const char *>(payload), len);
    return pom::glue::invoke(p, call, [&](const ProtoPtr &proto, const pom::rpc::ReqHeader &h) {
        pom::rpc::CommonClient cl(proto);
        pom::rpc::PingResp resp;
        req.hdr = h;
        cl.ping(resp, req);
        if (resp.status == 0) {
            if (reply_len)
                *reply_len = resp.payload.size();
            if (reply && cap)
                memcpy(reply, resp.payload.data(), std::min(cap, resp.payload.size()));
        }
        return resp.status;
    });
}

/* ---- server ------------------------------------------------------------- */

int xt_rpc_out_set(xt_rpc_out *out, const void *p, size_t len)
{
    try {
        out->s->assign(static_cast<const char *>(p), len);
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    }
    return 0;
}

thread_local int pom::glue::peer_role = XT_AUTH_NONE;
thread_local int32_t pom::glue::peer_fsid = 0;

xt_rpc_ctx pom::glue::make_ctx(const pom::rpc::ReqHeader &h, int default_budget_ms)
{
    xt_rpc_ctx c;
    int budget = h.budget_ms > 0 ? h.budget_ms : default_budget_ms;
    c.req_id = h.req_id;
    c.deadline_ns = xt_mono_ns() + (uint64_t)budget * 1000000u;
    c.hops = h.hops;
    c.ring_version = h.ring_version;
    c.client_id = h.client_id;
    c.auth_role = peer_role;
    c.auth_fsid = peer_fsid;
    return c;
}

int pom::glue::server_budget_ms(const xt_rpc_server_opts *o)
{
    return o && o->default_budget_ms > 0 ? o->default_budget_ms : 30000;
}

void pom::glue::CommonGlue::ping(pom::rpc::PingResp &resp, const pom::rpc::PingReq &req)
{
    resp.server_time_ns = (int64_t)xt_now_ns();
    if (!ops_ || !ops_->ping) {
        resp.payload = req.payload;
        return;
    }
    xt_rpc_ctx rc = make_ctx(req.hdr, budget_ms_);
    xt_rpc_out out{&resp.payload};
    resp.status = ops_->ping(ctx_, &rc, req.payload.data(), req.payload.size(), &out);
    if (resp.status > 0)
        resp.status = 0;
    if (resp.status != 0)
        resp.payload.clear();
}

int xt_rpc_serve_common(const struct xt_rpc_server_opts *opts,
                        const struct xt_rpc_common_ops *ops, void *ctx,
                        xt_rpc_server **out)
{
    try {
        auto h = std::make_shared<pom::glue::CommonGlue>(ops, ctx,
                                                         pom::glue::server_budget_ms(opts));
        auto proc = std::make_shared<pom::rpc::CommonProcessor>(h);
        return pom::glue::serve(opts, proc, out);
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    }
}
