/*
 * pomctl_scrape.h -- reading the Prometheus `/metrics` of the cluster's
 * sites (docs/metrics.md) for `pomctl top`: one HTTP/1.0 GET over a
 * socket, and a reader of the text exposition format the daemons write.
 *
 * The daemons serve with libmicrohttpd; the client side is this small GET
 * (the project has no HTTP client library): a request line and a Host
 * header out, the status line checked, the body read to EOF.
 *
 * Invariants:
 *  (1) A scrape is bounded: it ends by timeout_ms (connect and every read)
 *      and reads at most POMCTL_SCRAPE_MAX bytes (more is -EFBIG).
 *  (2) The reader never fails on a line: comments, blank lines, samples of
 *      other names and lines that do not parse are skipped.
 */
#ifndef POMCTL_SCRAPE_H
#define POMCTL_SCRAPE_H

#include <stddef.h>

#define POMCTL_SCRAPE_MAX (16u << 20)

/* GET http://addr/metrics, addr "HOST:PORT" or "[V6]:PORT". On 0, *body is
 * the NUL-terminated body (caller frees with xt_free). -EINVAL (bad
 * address), -ETIMEDOUT, -ECONNREFUSED or another connect errno, -EPROTO
 * (not an HTTP 200 answer), -EFBIG, -ENOMEM. */
int pomctl_scrape_get(const char *addr, int timeout_ms, char **body);

/* Sums the samples of metric `name` in text (every label set; a histogram's
 * count is name "X_count"). Returns how many samples matched (0: none, *sum
 * then 0). */
size_t pomctl_scrape_sum(const char *text, const char *name, double *sum);

#endif /* POMCTL_SCRAPE_H */
