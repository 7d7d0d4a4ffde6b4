/*
 * xt_metrics.h -- the Prometheus `/metrics` endpoint every daemon and pomfs
 * serve (docs/metrics.md), and the writer of the text exposition format.
 *
 * HTTP is libmicrohttpd's: one internal poll thread parses every request
 * and calls the collector for GET /metrics; nothing here parses HTTP. The
 * collector runs on that thread, once per scrape, and only reads counters
 * (relaxed atomics, or a daemon's snapshot functions that hold a lock
 * briefly): a scrape never waits on disk or the network under a daemon's
 * lock.
 *
 * The module stands alone (libc and libmicrohttpd only), so pomfs, which
 * reaches the rest of the tree through libpomegranate, links it as well.
 *
 * Invariants:
 *  (1) One thread serves every connection (libmicrohttpd's internal poll
 *      thread); at most XT_METRICS_MAX_CONN connections are open, each
 *      bounded in memory and closed after XT_METRICS_TIMEOUT_S idle:
 *      a malformed, slow or huge request costs one connection, never the
 *      daemon.
 *  (2) A scrape's text is the collector's output for that scrape only:
 *      families are written whole (HELP, TYPE, then every sample), so a
 *      family's samples are contiguous as the format requires.
 *  (3) Histogram buckets are cumulative and end with le="+Inf", whose
 *      count equals _count (xt_metrics_put_hist_cum).
 */
#ifndef XT_METRICS_H
#define XT_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XT_METRICS_MAX_CONN 32
#define XT_METRICS_TIMEOUT_S 10

typedef struct xt_metrics xt_metrics;
typedef struct xt_metrics_buf xt_metrics_buf;

/* Writes the families of one scrape into b; called on the metrics thread. */
typedef void (*xt_metrics_collect_fn)(void *arg, xt_metrics_buf *b);

struct xt_metrics_opts {
    /* "HOST:PORT", "[V6]:PORT", ":PORT" or "PORT" (the last two bind
     * 127.0.0.1); port 0 takes a free one. */
    const char *listen;
    xt_metrics_collect_fn collect; /* must outlive the server */
    void *arg;
    /* Written with "HOST:PORT\n" (the port bound) once listening; NULL: none. */
    const char *addr_file;
};

/* Starts serving. *out is freed by xt_metrics_stop. Returns 0, -EINVAL (bad
 * listen address), -EADDRINUSE or another -errno of the listen socket, or
 * -EIO when libmicrohttpd cannot start. REQUIRES: the caller's signal mask
 * is the one its threads should have (the thread inherits it). */
int xt_metrics_start(const struct xt_metrics_opts *o, xt_metrics **out);
/* The port listened on. */
int xt_metrics_port(const xt_metrics *m);
/* "HOST:PORT" listened on; valid while m lives. */
const char *xt_metrics_addr(const xt_metrics *m);
/* Stops the thread, closes every connection, frees m. NULL is a no-op. */
void xt_metrics_stop(xt_metrics *m);
/* Splits a metrics address ("HOST:PORT", "[V6]:PORT", ":PORT", "PORT"; the
 * last two name 127.0.0.1) into host (cap bytes) and port (pcap bytes), as
 * the listener and a scraper (pomctl top) read it. 0 or -EINVAL. */
int xt_metrics_split_addr(const char *s, char *host, size_t cap, char *port, size_t pcap);

/* ---- the daemons' flags ----------------------------------------------- */

/* getopt_long entries (codes clear of characters and of XT_RPC_FLAG_BASE's):
 * --metrics-listen HOST:PORT and --metrics-file FILE (o->addr_file). */
#define XT_METRICS_FLAG_BASE 0x1100
#define XT_METRICS_FLAGS                                                   \
    { "metrics-listen", required_argument, NULL, XT_METRICS_FLAG_BASE + 0 }, \
    { "metrics-file", required_argument, NULL, XT_METRICS_FLAG_BASE + 1 }
/* If code is one of XT_METRICS_FLAGS: stores arg (not copied) in *o and
 * returns 1; any other code: 0. */
int xt_metrics_flag(int code, const char *arg, struct xt_metrics_opts *o);
/* The --help lines of XT_METRICS_FLAGS. */
void xt_metrics_flags_usage(FILE *f);

/* ---- the exposition format ------------------------------------------- */

/* Opens a family: "# HELP name help" and "# TYPE name type" (type is
 * "counter", "gauge" or "histogram"). Names follow the Prometheus rules
 * ([a-zA-Z_:][a-zA-Z0-9_:]*; asserted). */
void xt_metrics_put_family(xt_metrics_buf *b, const char *name, const char *type,
                           const char *help);
/* One sample of the open family; labels: NULL, or the text between the
 * braces (`op="create"`), values already escaped. */
void xt_metrics_put_u64(xt_metrics_buf *b, const char *name, const char *labels, uint64_t v);
void xt_metrics_put_double(xt_metrics_buf *b, const char *name, const char *labels, double v);
/* A family with one unlabelled sample. */
void xt_metrics_put_counter(xt_metrics_buf *b, const char *name, const char *help, uint64_t v);
void xt_metrics_put_gauge(xt_metrics_buf *b, const char *name, const char *help, double v);

/* Latency histograms share one set of upper bounds (seconds, from 1 us to
 * 10 s); le="+Inf" is implied. */
#define XT_METRICS_NLE 22
extern const uint64_t xt_metrics_le_ns[XT_METRICS_NLE];

/* The samples of one histogram of the open family (name without the
 * _bucket/_sum/_count suffixes): cum[i] samples <= xt_metrics_le_ns[i],
 * count in all, sum_ns their sum. REQUIRES: cum ascending, cum[last] <=
 * count (invariant 3). */
void xt_metrics_put_hist_cum(xt_metrics_buf *b, const char *name, const char *labels,
                             const uint64_t cum[XT_METRICS_NLE], uint64_t count,
                             uint64_t sum_ns);

/* A lock-free histogram on xt_metrics_le_ns for callers that have none of
 * their own: zero it (memset or static storage) before use. */
struct xt_metrics_hist {
    _Atomic uint64_t bucket[XT_METRICS_NLE + 1]; /* the last: over the top bound */
    _Atomic uint64_t sum_ns;
};
void xt_metrics_hist_record(struct xt_metrics_hist *h, uint64_t ns);
void xt_metrics_put_hist(xt_metrics_buf *b, const char *name, const char *labels,
                         const struct xt_metrics_hist *h);
/* A whole histogram family: hists[i] with label="names[i]", i < n. */
void xt_metrics_put_hist_family(xt_metrics_buf *b, const char *name, const char *help,
                                const char *label, const char *const *names,
                                const struct xt_metrics_hist *hists, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* XT_METRICS_H */
