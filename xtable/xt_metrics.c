/*
 * xt_metrics.c -- /metrics over libmicrohttpd, and the text format writer.
 *
 * The listen socket is made here (so a port of 0 is resolved before the
 * server starts, and IPv4 and IPv6 are alike) and handed to libmicrohttpd,
 * which owns it from then on. Limits (xt_metrics.h invariant 1): the
 * connection count, an idle timeout, and a per-connection memory pool that
 * caps the request line and headers (a larger request is answered with an
 * error by libmicrohttpd and closed).
 */
#include "xt_metrics.h"

#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONN_MEMORY (32 * 1024) /* request line + headers of one connection */
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct xt_metrics {
    struct MHD_Daemon *d;
    xt_metrics_collect_fn collect;
    void *arg;
    int port;
    char addr[300];
};

struct xt_metrics_buf {
    char *p;
    size_t len, cap;
    bool failed; /* an allocation failed: the scrape answers 500 */
};

/* 1-2.5-5 steps from 1 us to 10 s (docs/metrics.md "Conventions"). */
const uint64_t xt_metrics_le_ns[XT_METRICS_NLE] = {
    1000,       2500,       5000,                               /* us */
    10000,      25000,      50000,
    100000,     250000,     500000,
    1000000,    2500000,    5000000,                            /* ms */
    10000000,   25000000,   50000000,
    100000000,  250000000,  500000000,
    1000000000, 2500000000, 5000000000, 10000000000,            /* s */
};

/* ---- the daemons' flags ------------------------------------------------- */

int xt_metrics_flag(int code, const char *arg, struct xt_metrics_opts *o)
{
    if (code == XT_METRICS_FLAG_BASE + 0)
        o->listen = arg;
    else if (code == XT_METRICS_FLAG_BASE + 1)
        o->addr_file = arg;
    else
        return 0;
    return 1;
}

void xt_metrics_flags_usage(FILE *f)
{
    fprintf(f, "  --metrics-listen HOST:PORT  serve Prometheus /metrics there (port 0: a free\n"
               "                          one; a bare PORT binds 127.0.0.1; docs/metrics.md)\n"
               "  --metrics-file FILE     write the metrics HOST:PORT to FILE once listening\n");
}

/* ---- the text format ---------------------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void put(xt_metrics_buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 16384;
        while (cap - b->len <= (size_t)n)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

__attribute__((unused)) static bool valid_name(const char *s)
{
    if (!*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '_' || *s == ':'))
            return false;
    return true;
}

void xt_metrics_put_family(xt_metrics_buf *b, const char *name, const char *type,
                           const char *help)
{
    assert(valid_name(name));
    put(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void xt_metrics_put_u64(xt_metrics_buf *b, const char *name, const char *labels, uint64_t v)
{
    put(b, "%s%s%s%s %llu\n", name, labels ? "{" : "", labels ? labels : "",
        labels ? "}" : "", (unsigned long long)v);
}

void xt_metrics_put_double(xt_metrics_buf *b, const char *name, const char *labels, double v)
{
    put(b, "%s%s%s%s %.17g\n", name, labels ? "{" : "", labels ? labels : "",
        labels ? "}" : "", v);
}

void xt_metrics_put_counter(xt_metrics_buf *b, const char *name, const char *help, uint64_t v)
{
    xt_metrics_put_family(b, name, "counter", help);
    xt_metrics_put_u64(b, name, NULL, v);
}

void xt_metrics_put_gauge(xt_metrics_buf *b, const char *name, const char *help, double v)
{
    xt_metrics_put_family(b, name, "gauge", help);
    xt_metrics_put_double(b, name, NULL, v);
}

void xt_metrics_put_hist_cum(xt_metrics_buf *b, const char *name, const char *labels,
                             const uint64_t cum[XT_METRICS_NLE], uint64_t count,
                             uint64_t sum_ns)
{
    const char *sep = labels ? "," : "";
    labels = labels ? labels : "";
    for (unsigned i = 0; i < XT_METRICS_NLE; i++) {
        assert(i == 0 || cum[i - 1] <= cum[i]);
        put(b, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep,
            (double)xt_metrics_le_ns[i] / 1e9, (unsigned long long)cum[i]);
    }
    assert(cum[XT_METRICS_NLE - 1] <= count);
    put(b, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep, (unsigned long long)count);
    put(b, "%s_sum%s%s%s %.9f\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
        (double)sum_ns / 1e9);
    put(b, "%s_count%s%s%s %llu\n", name, *labels ? "{" : "", labels, *labels ? "}" : "",
        (unsigned long long)count);
}

void xt_metrics_hist_record(struct xt_metrics_hist *h, uint64_t ns)
{
    unsigned i = 0;
    while (i < XT_METRICS_NLE && ns > xt_metrics_le_ns[i])
        i++;
    atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void xt_metrics_put_hist(xt_metrics_buf *b, const char *name, const char *labels,
                         const struct xt_metrics_hist *h)
{
    uint64_t cum[XT_METRICS_NLE], n = 0;
    struct xt_metrics_hist *hh = (struct xt_metrics_hist *)h; /* atomic loads */
    for (unsigned i = 0; i < XT_METRICS_NLE; i++) {
        n += atomic_load_explicit(&hh->bucket[i], memory_order_relaxed);
        cum[i] = n;
    }
    n += atomic_load_explicit(&hh->bucket[XT_METRICS_NLE], memory_order_relaxed);
    xt_metrics_put_hist_cum(b, name, labels, cum, n,
                            atomic_load_explicit(&hh->sum_ns, memory_order_relaxed));
}

void xt_metrics_put_hist_family(xt_metrics_buf *b, const char *name, const char *help,
                                const char *label, const char *const *names,
                                const struct xt_metrics_hist *hists, size_t n)
{
    char labels[128];
    xt_metrics_put_family(b, name, "histogram", help);
    for (size_t i = 0; i < n; i++) {
        snprintf(labels, sizeof labels, "%s=\"%s\"", label, names[i]);
        xt_metrics_put_hist(b, name, labels, &hists[i]);
    }
}

/* ---- the server --------------------------------------------------------- */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, char *body,
                              size_t len, bool owned)
{
    struct MHD_Response *r =
        owned ? MHD_create_response_from_buffer_with_free_callback(len, body, free)
              : MHD_create_response_from_buffer(len, body, MHD_RESPMEM_PERSISTENT);
    if (!r) {
        if (owned)
            free(body);
        return MHD_NO; /* closes the connection */
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    (void)upload_data;
    (void)con_cls;
    xt_metrics *m = cls;
    static char not_allowed[] = "only GET\n", not_found[] = "see /metrics\n";
    /* A body is never read: answering at once makes libmicrohttpd discard
     * it and close the connection rather than buffer it. */
    if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD)) {
        *upload_data_size = 0;
        return answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed, sizeof not_allowed - 1,
                      false);
    }
    if (strcmp(url, "/metrics"))
        return answer(c, MHD_HTTP_NOT_FOUND, not_found, sizeof not_found - 1, false);
    xt_metrics_buf b = { 0 };
    m->collect(m->arg, &b);
    if (b.failed) {
        free(b.p);
        static char oom[] = "out of memory\n";
        return answer(c, MHD_HTTP_INTERNAL_SERVER_ERROR, oom, sizeof oom - 1, false);
    }
    if (!b.p) {
        static char empty[] = "";
        return answer(c, MHD_HTTP_OK, empty, 0, false);
    }
    return answer(c, MHD_HTTP_OK, b.p, b.len, true);
}

int xt_metrics_split_addr(const char *s, char *host, size_t cap, char *port, size_t pcap)
{
    const char *colon = strrchr(s, ':');
    const char *h = "127.0.0.1", *p = s;
    size_t hlen = strlen(h);
    if (colon) {
        p = colon + 1;
        h = s;
        hlen = (size_t)(colon - s);
        if (hlen >= 2 && s[0] == '[' && s[hlen - 1] == ']') {
            h++;
            hlen -= 2;
        } else if (memchr(s, ':', hlen)) {
            return -EINVAL; /* a v6 address wants brackets */
        }
        if (hlen == 0) {
            h = "127.0.0.1";
            hlen = strlen(h);
        }
    }
    size_t plen = strlen(p);
    if (hlen >= cap || plen == 0 || plen >= pcap || strspn(p, "0123456789") != plen ||
        atol(p) > 65535)
        return -EINVAL;
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    memcpy(port, p, plen + 1);
    return 0;
}

static int listen_on(const char *host, const char *port, int *bound)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
    struct addrinfo *res;
    if (getaddrinfo(host, port, &hints, &res))
        return -EINVAL;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int rc = fd < 0 ? -errno : 0, one = 1;
    if (rc == 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 64) < 0)
            rc = -errno;
    }
    freeaddrinfo(res);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (rc == 0 && getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        rc = -errno;
    if (rc < 0) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    *bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                            : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

static int write_addr_file(const char *path, const char *addr)
{
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    FILE *f = fopen(tmp, "we");
    if (!f)
        return -errno;
    int rc = fprintf(f, "%s\n", addr) < 0 ? -EIO : 0;
    if (fclose(f) && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0)
        unlink(tmp);
    return rc;
}

int xt_metrics_start(const struct xt_metrics_opts *o, xt_metrics **out)
{
    char host[256], port[8];
    *out = NULL;
    if (!o->listen || !o->collect ||
        xt_metrics_split_addr(o->listen, host, sizeof host, port, sizeof port))
        return -EINVAL;
    xt_metrics *m = calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->collect = o->collect;
    m->arg = o->arg;
    int fd = listen_on(host, port, &m->port);
    if (fd < 0) {
        free(m);
        return fd;
    }
    snprintf(m->addr, sizeof m->addr, strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, m->port);
    m->d = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD, 0, NULL, NULL, on_request, m,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)XT_METRICS_MAX_CONN,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)XT_METRICS_TIMEOUT_S,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
                            MHD_OPTION_END);
    if (!m->d) {
        close(fd);
        free(m);
        return -EIO;
    }
    if (o->addr_file) {
        int rc = write_addr_file(o->addr_file, m->addr);
        if (rc < 0) {
            xt_metrics_stop(m);
            return rc;
        }
    }
    *out = m;
    return 0;
}

int xt_metrics_port(const xt_metrics *m)
{
    return m->port;
}

const char *xt_metrics_addr(const xt_metrics *m)
{
    return m->addr;
}

void xt_metrics_stop(xt_metrics *m)
{
    if (!m)
        return;
    /* MHD_stop_daemon closes the listen socket it was given. */
    MHD_stop_daemon(m->d);
    free(m);
}
