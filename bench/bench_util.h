/*
 * bench_util.h -- what the file-system benchmarks (bench_mdtest, bench_fs,
 * bench_kv) share: a latency sample set (shared with forked workers),
 * percentiles, and one JSON line per result.
 *
 * Invariants:
 *  (1) A sample set never reallocates while workers record into it: its
 *      capacity is fixed at creation (shared memory when workers are
 *      processes), and a recording past the capacity is counted, not kept.
 *  (2) Every result line written by bench_util_json is one complete JSON
 *      object on one line, appended with O_APPEND so forked writers and
 *      several benchmark binaries can share one results file.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xt_time.h" /* xt_mono_ns: the benchmarks' clock */

/* Latency samples in nanoseconds; lives in MAP_SHARED memory so forked
 * children record into the parent's set. */
typedef struct bench_lat {
    uint64_t cap;      /* fixed at creation */
    uint64_t n;        /* samples recorded (may exceed cap: only cap kept) */
    uint64_t ns[];     /* ns[0..min(n,cap)) */
} bench_lat;

/* A set for cap samples, shared with forked children. Free with
 * bench_lat_free. NULL when out of memory. */
bench_lat *bench_lat_new(uint64_t cap);
void bench_lat_free(bench_lat *l);
/* Forgets the samples (keeps the memory). */
void bench_lat_reset(bench_lat *l);
/* Records one sample. Thread- and process-safe (atomic slot claim). */
void bench_lat_add(bench_lat *l, uint64_t ns);
/* p in [0,100]: the p-th percentile in microseconds (sorts the samples in
 * place); 0 when there are none. */
double bench_lat_pct_us(bench_lat *l, double p);

/* One result: appended as a JSON line to path (when path is non-NULL) and
 * printed as a table row on stdout. Strings must not need escaping. */
struct bench_result {
    const char *bench;   /* "mdtest-easy", "small-files", ... */
    const char *target;  /* "pomfs", "passthrough_ll", "tmpfs", ... */
    const char *phase;   /* "file create", ... */
    const char *param;   /* free text: "procs=2", "size=4096", may be NULL */
    unsigned procs;      /* concurrency */
    uint64_t ops;
    double secs;
    double p50_us, p99_us;
    double extra;        /* bench-specific number (MB/s, bytes/entry), <0: none */
    const char *extra_name;
    double extra2;       /* a second number, <0: none */
    const char *extra2_name;
    const char *na;      /* non-NULL: not measurable, why ("EFBIG") */
};
int bench_util_json(const char *path, const struct bench_result *r);
/* Header of the rows bench_util_json prints. */
void bench_util_header(void);

/* Resident set size of process pid in bytes, or -errno. */
int64_t bench_util_rss(int pid);

/* Strict unsigned parse of s ("12", "4k", "1m", "1g" suffixes of 1024).
 * false when s is not such a number. */
bool bench_util_size(const char *s, uint64_t *out);

#endif
