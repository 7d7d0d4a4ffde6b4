/*
 * pomctl_scrape.c -- one GET of a site's /metrics and a reader of the
 * Prometheus text format (see pomctl_scrape.h for the invariants).
 */
#include "pomctl_scrape.h"

#include "xt_common.h"
#include "xt_metrics.h"
#include "xt_time.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Waits until fd is ready for events or the deadline passes. 0, -ETIMEDOUT
 * or -errno. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = xt_mono_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

/* A non-blocking connect to host:port by the deadline. The fd, or -errno. */
static int connect_to(const char *host, const char *port, uint64_t deadline)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC,
                              .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV };
    struct addrinfo *res;
    if (getaddrinfo(host, port, &hints, &res))
        return -EINVAL;
    int rc = -ECONNREFUSED;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            rc = -errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ||
            (errno == EINPROGRESS && (rc = wait_fd(fd, POLLOUT, deadline)) == 0)) {
            int err = 0;
            socklen_t len = sizeof err;
            if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
                freeaddrinfo(res);
                return fd;
            }
            rc = -(err ? err : ECONNREFUSED);
        } else if (errno != EINPROGRESS) {
            rc = -errno;
        }
        close(fd);
    }
    freeaddrinfo(res);
    return rc;
}

static int send_all(int fd, const char *p, size_t n, uint64_t deadline)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            if (rc < 0)
                return rc;
        } else if (w < 0 && errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

/* Reads to EOF into *buf (NUL-terminated, *len bytes). 0 or -errno. */
static int recv_all(int fd, uint64_t deadline, char **buf, size_t *len)
{
    size_t cap = 64 << 10, n = 0;
    char *b = xt_malloc(cap + 1);
    if (!b)
        return -ENOMEM;
    for (;;) {
        if (n == cap) {
            if (cap >= POMCTL_SCRAPE_MAX) {
                xt_free(b);
                return -EFBIG; /* invariant (1) */
            }
            char *nb = xt_realloc(b, cap * 2 + 1);
            if (!nb) {
                xt_free(b);
                return -ENOMEM;
            }
            b = nb;
            cap *= 2;
        }
        ssize_t r = recv(fd, b + n, cap - n, 0);
        if (r > 0) {
            n += (size_t)r;
        } else if (r == 0) {
            break;
        } else if (errno == EAGAIN) {
            int rc = wait_fd(fd, POLLIN, deadline);
            if (rc < 0) {
                xt_free(b);
                return rc;
            }
        } else if (errno != EINTR) {
            int rc = -errno;
            xt_free(b);
            return rc;
        }
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return 0;
}

int pomctl_scrape_get(const char *addr, int timeout_ms, char **body)
{
    *body = NULL;
    char host[256], port[8];
    if (xt_metrics_split_addr(addr, host, sizeof host, port, sizeof port) < 0)
        return -EINVAL;
    uint64_t deadline = xt_mono_ns() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000;
    int fd = connect_to(host, port, deadline);
    if (fd < 0)
        return fd;
    char req[512];
    /* HTTP/1.0: the server closes after the answer, so the body ends at EOF. */
    int reqlen = snprintf(req, sizeof req,
                          "GET /metrics HTTP/1.0\r\nHost: %s\r\nAccept: text/plain\r\n\r\n", addr);
    char *resp = NULL;
    size_t len = 0;
    int rc = reqlen > 0 && (size_t)reqlen < sizeof req ? 0 : -EINVAL;
    if (rc == 0)
        rc = send_all(fd, req, (size_t)reqlen, deadline);
    if (rc == 0)
        rc = recv_all(fd, deadline, &resp, &len);
    close(fd);
    if (rc < 0)
        return rc;
    /* "HTTP/1.x 200 ...", headers, an empty line, the body */
    const char *end = strstr(resp, "\r\n\r\n");
    if (strncmp(resp, "HTTP/1.", 7) != 0 || len < 12 || strncmp(resp + 8, " 200", 4) != 0 || !end) {
        xt_free(resp);
        return -EPROTO;
    }
    size_t off = (size_t)(end + 4 - resp);
    memmove(resp, resp + off, len - off + 1);
    *body = resp;
    return 0;
}

size_t pomctl_scrape_sum(const char *text, const char *name, double *sum)
{
    size_t nlen = strlen(name), matched = 0;
    *sum = 0;
    for (const char *line = text, *nl; *line; line = nl ? nl + 1 : line + strlen(line)) {
        nl = strchr(line, '\n');
        if (strncmp(line, name, nlen) != 0 || (line[nlen] != ' ' && line[nlen] != '{'))
            continue; /* comments, other names: invariant (2) */
        const char *v = line + nlen;
        if (*v == '{') {
            /* label values are quoted and may hold '}' escaped or not */
            bool quoted = false;
            for (v++; *v && *v != '\n' && (quoted || *v != '}'); v++) {
                if (*v == '\\' && quoted && v[1])
                    v++;
                else if (*v == '"')
                    quoted = !quoted;
            }
            if (*v != '}')
                continue;
            v++;
        }
        char *e;
        double x = strtod(v, &e);
        if (e == v || (*e != ' ' && *e != '\n' && *e != '\0') || isnan(x))
            continue;
        *sum += x;
        matched++;
    }
    return matched;
}
