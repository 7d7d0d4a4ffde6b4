/*
 * xt_rpc_server.cpp -- the RPC server: a fixed pool of threads over one
 * epoll set, each thread reading a request frame, running the Thrift
 * processor on it and writing the reply (leader/follower style).
 *
 * Why not Thrift's TNonblockingServer: it moves every call between its
 * libevent io thread and a worker queue and re-registers the socket for
 * write readiness, 4 epoll_ctl and 2 thread wake-ups a call; on loopback
 * that doubled the round trip against raw TCP (bench_rpc). Here a call
 * costs epoll_wait + recv + send + one epoll_ctl re-arm, and the same
 * thread that read the frame answers it.
 *
 * Invariants:
 *  (1) A connection is registered EPOLLONESHOT: at most one thread works on
 *      it at a time, so its buffers need no lock. The thread re-arms it
 *      when done, or closes it.
 *  (2) Frames are a 4-byte big-endian length and a body; a length of 0 or
 *      over max_frame closes the connection (framed transport). A partial
 *      frame waits in the connection's buffer without holding a thread;
 *      the buffer grows with the bytes received, not with the length a
 *      header claims.
 *  (3) A processor exception (malformed request) closes that connection
 *      only. The server never exits on bad input.
 *  (4) s->mu protects s->conns only; it is held to insert and erase.
 *  (5) Handlers may block (slice loads, sync): that occupies one thread;
 *      the pool is sized by io_threads + workers.
 */
#include "xt_rpc_i.hpp"

#include "xt_common.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_set>
#include <vector>

#include <thrift/TConfiguration.h>
#include <thrift/protocol/TBinaryProtocol.h>
#include <thrift/transport/TBufferTransports.h>

using apache::thrift::TProcessor;
using apache::thrift::protocol::TBinaryProtocol;
using apache::thrift::transport::TMemoryBuffer;

namespace {

constexpr size_t kInitialBuf = 64 * 1024;
constexpr size_t kKeepBuf = 1u << 20;    /* idle input buffers shrink past this */
constexpr uint32_t kBigReply = 1u << 20; /* replies past this get a fresh buffer */
constexpr int kSendTimeoutMs = 30000;

struct SConn {
    int fd = -1;
    std::vector<uint8_t> in;
    size_t have = 0;
    std::shared_ptr<TMemoryBuffer> ibuf, obuf;
    std::shared_ptr<TBinaryProtocol> iprot, oprot;
};

} // namespace

struct xt_rpc_server {
    int lfd = -1, epfd = -1, stopfd = -1;
    int port = 0;
    size_t max_frame = 0;
    std::shared_ptr<TProcessor> proc;
    std::vector<std::thread> threads;
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

static void close_conn(xt_rpc_server *s, SConn *c)
{
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, nullptr);
    close(c->fd);
    {
        std::lock_guard<std::mutex> g(s->mu);
        s->conns.erase(c);
    }
    delete c;
}

static void accept_all(xt_rpc_server *s)
{
    for (;;) {
        int fd = accept4(s->lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                XT_WARN("rpc: accept: %s", strerror(errno));
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        SConn *c = new (std::nothrow) SConn;
        if (!c) {
            close(fd);
            continue;
        }
        try {
            c->fd = fd;
            c->in.resize(kInitialBuf);
            c->ibuf = std::make_shared<TMemoryBuffer>(big_config());
            c->obuf = std::make_shared<TMemoryBuffer>(big_config());
            c->iprot = std::make_shared<TBinaryProtocol>(c->ibuf);
            c->oprot = std::make_shared<TBinaryProtocol>(c->obuf);
            std::lock_guard<std::mutex> g(s->mu);
            s->conns.insert(c);
        } catch (const std::exception &) {
            close(fd);
            delete c;
            continue;
        }
        if (arm(s, EPOLL_CTL_ADD, fd, c, EPOLLIN | EPOLLRDHUP | EPOLLONESHOT) < 0)
            close_conn(s, c);
    }
}

static int send_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pf = { fd, POLLOUT, 0 };
            int r = poll(&pf, 1, kSendTimeoutMs);
            if (r > 0)
                continue;
            return r == 0 ? -ETIMEDOUT : -errno;
        }
        return w < 0 ? -errno : -EPIPE;
    }
    return 0;
}

/* Runs one request frame through the processor and sends the reply. */
static int handle_frame(xt_rpc_server *s, SConn *c, uint8_t *body, uint32_t len)
{
    try {
        c->ibuf->resetBuffer(body, len, TMemoryBuffer::OBSERVE);
        c->ibuf->updateKnownMessageSize(len);
        /* No string or list in a frame can be longer than the frame: without
         * these limits a 60-byte frame claiming a 2 GB method name makes
         * Thrift allocate and clear 2 GB before it notices. */
        c->iprot->setStringSizeLimit((int32_t)len);
        c->iprot->setContainerSizeLimit((int32_t)len);
        c->obuf->resetBuffer();
        static const uint8_t zero[4] = { 0, 0, 0, 0 };
        c->obuf->write(zero, 4); /* frame length, patched below */
        s->proc->process(c->iprot, c->oprot, nullptr);
    } catch (const std::exception &e) {
        XT_DBG("rpc: dropping connection on malformed request: %s", e.what());
        return -EPROTO;
    }
    uint8_t *out;
    uint32_t olen;
    c->obuf->getBuffer(&out, &olen);
    if (olen <= 4) /* oneway call: no reply */
        return 0;
    uint32_t blen = htonl(olen - 4);
    memcpy(out, &blen, 4);
    int rc = send_all(c->fd, out, olen);
    if (olen > kBigReply) {
        c->obuf = std::make_shared<TMemoryBuffer>(big_config());
        c->oprot = std::make_shared<TBinaryProtocol>(c->obuf);
    }
    return rc;
}

/* Reads what the socket has, serves every complete frame. Returns 0 to
 * re-arm the connection, < 0 to close it. */
static int serve_conn(xt_rpc_server *s, SConn *c)
{
    for (;;) {
        size_t space = c->in.size() - c->have;
        ssize_t r = recv(c->fd, c->in.data() + c->have, space, MSG_DONTWAIT);
        if (r == 0)
            return -ECONNRESET;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            return -errno;
        }
        c->have += (size_t)r;
        size_t off = 0;
        while (c->have - off >= 4) {
            uint32_t len;
            memcpy(&len, c->in.data() + off, 4);
            len = ntohl(len);
            if (len == 0 || len > s->max_frame) {
                XT_DBG("rpc: bad frame length %u, closing connection", len);
                return -EPROTO;
            }
            if (c->have - off - 4 < len) {
                /* The frame's start to the front; once the buffer is full,
                 * room grows by doubling, never to the claimed length at
                 * once: a 4-byte header claiming 1 GiB made every such
                 * connection allocate and zero 1 GiB (300 garbage
                 * connections kept the test's MDSL busy past a client's
                 * 20 s timeout). Memory follows the bytes that came. */
                if (off) {
                    memmove(c->in.data(), c->in.data() + off, c->have - off);
                    c->have -= off;
                    off = 0;
                }
                if (c->have == c->in.size()) {
                    try {
                        c->in.resize(std::min((size_t)len + 4, c->in.size() * 2));
                    } catch (const std::bad_alloc &) {
                        return -ENOMEM;
                    }
                }
                break;
            }
            int rc = handle_frame(s, c, c->in.data() + off + 4, len);
            if (rc < 0)
                return rc;
            off += 4 + (size_t)len;
        }
        if (off) {
            memmove(c->in.data(), c->in.data() + off, c->have - off);
            c->have -= off;
        }
        if (c->have == 0 && c->in.size() > kKeepBuf) {
            c->in.resize(kInitialBuf);
            c->in.shrink_to_fit();
        }
        if ((size_t)r < space)
            return 0; /* drained; EPOLLONESHOT re-arm reports anything newer */
    }
}

static void worker_loop(xt_rpc_server *s)
{
    for (;;) {
        struct epoll_event ev;
        int n = epoll_wait(s->epfd, &ev, 1, -1);
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
            accept_all(s);
            arm(s, EPOLL_CTL_MOD, s->lfd, &s->lfd, EPOLLIN | EPOLLONESHOT);
            continue;
        }
        SConn *c = static_cast<SConn *>(ev.data.ptr);
        if (serve_conn(s, c) < 0 ||
            arm(s, EPOLL_CTL_MOD, c->fd, c, EPOLLIN | EPOLLRDHUP | EPOLLONESHOT) < 0)
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
    s->max_frame = o && o->max_frame_bytes > 0 ? (size_t)o->max_frame_bytes
                                                : (size_t)XT_RPC_DEFAULT_SERVER_FRAME;
    int rc = listen_on(host, port, &s->lfd, &s->port);
    if (rc < 0) {
        XT_ERR("rpc: cannot listen on %s:%d: %s", host, port, strerror(-rc));
        delete s;
        return rc;
    }
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->epfd < 0 || s->stopfd < 0 ||
        arm(s, EPOLL_CTL_ADD, s->stopfd, &s->stopfd, EPOLLIN) < 0 ||
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
        close(c->fd);
        delete c;
    }
    s->conns.clear();
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->epfd >= 0)
        close(s->epfd);
    if (s->stopfd >= 0)
        close(s->stopfd);
    delete s;
}
