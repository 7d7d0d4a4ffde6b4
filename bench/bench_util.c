/*
 * bench_util.c -- latency samples, percentiles and JSON result lines for the file-system benchmarks (bench_util.h).
 *
 * Shared memory comes from mmap(MAP_SHARED|MAP_ANONYMOUS), not the heap:
 * it must survive fork() as one object that parent and children all see.
 */
#include "bench_util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void *shared_alloc(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static size_t lat_bytes(uint64_t cap)
{
    return sizeof(bench_lat) + (size_t)cap * sizeof(uint64_t);
}

bench_lat *bench_lat_new(uint64_t cap)
{
    bench_lat *l = shared_alloc(lat_bytes(cap));
    if (l)
        l->cap = cap;
    return l;
}

void bench_lat_free(bench_lat *l)
{
    if (l)
        munmap(l, lat_bytes(l->cap));
}

void bench_lat_reset(bench_lat *l)
{
    __atomic_store_n(&l->n, 0, __ATOMIC_SEQ_CST);
}

void bench_lat_add(bench_lat *l, uint64_t ns)
{
    uint64_t i = __atomic_fetch_add(&l->n, 1, __ATOMIC_RELAXED);
    if (i < l->cap)
        l->ns[i] = ns;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

double bench_lat_pct_us(bench_lat *l, double p)
{
    uint64_t n = l->n < l->cap ? l->n : l->cap;
    if (n == 0)
        return 0;
    qsort(l->ns, n, sizeof l->ns[0], cmp_u64);
    uint64_t i = (uint64_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return (double)l->ns[i < n ? i : n - 1] / 1000.0;
}

void bench_util_header(void)
{
    printf("%-12s %-15s %-16s %-14s %5s %10s %12s %9s %9s %s\n", "bench", "target", "phase",
           "param", "procs", "ops", "ops/s", "p50(us)", "p99(us)", "extra");
}

/* One write with O_APPEND: lines of concurrent writers never interleave. */
static int append(const char *path, const char *line, int n)
{
    if (n < 0)
        return -EINVAL;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0)
        return -errno;
    ssize_t w = write(fd, line, (size_t)n);
    int err = w == n ? 0 : -EIO;
    close(fd);
    return err;
}

int bench_util_json(const char *path, const struct bench_result *r)
{
    double rate = r->secs > 0 ? (double)r->ops / r->secs : 0;
    if (r->na) {
        printf("%-12s %-15s %-16s %-14s %5u n/a (%s)\n", r->bench, r->target, r->phase,
               r->param ? r->param : "-", r->procs, r->na);
        fflush(stdout);
        if (!path)
            return 0;
        char line[512];
        int n = snprintf(line, sizeof line,
                         "{\"bench\":\"%s\",\"target\":\"%s\",\"phase\":\"%s\","
                         "\"param\":\"%s\",\"procs\":%u,\"na\":\"%s\"}\n",
                         r->bench, r->target, r->phase, r->param ? r->param : "", r->procs,
                         r->na);
        return append(path, line, n);
    }
    char extra[128] = "";
    if (r->extra >= 0 && r->extra_name)
        snprintf(extra, sizeof extra, "%s=%.4g", r->extra_name, r->extra);
    if (r->extra2 > 0 && r->extra2_name)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " %s=%.4g",
                 r->extra2_name, r->extra2);
    printf("%-12s %-15s %-16s %-14s %5u %10llu %12.0f %9.1f %9.1f %s\n", r->bench, r->target,
           r->phase, r->param ? r->param : "-", r->procs, (unsigned long long)r->ops, rate,
           r->p50_us, r->p99_us, extra);
    fflush(stdout);
    if (!path)
        return 0;
    char line[1024];
    int n = snprintf(line, sizeof line,
                     "{\"bench\":\"%s\",\"target\":\"%s\",\"phase\":\"%s\",\"param\":\"%s\","
                     "\"procs\":%u,\"ops\":%llu,\"secs\":%.6f,\"ops_per_s\":%.1f,"
                     "\"p50_us\":%.1f,\"p99_us\":%.1f",
                     r->bench, r->target, r->phase, r->param ? r->param : "", r->procs,
                     (unsigned long long)r->ops, r->secs, rate, r->p50_us, r->p99_us);
    if (r->extra >= 0 && r->extra_name)
        n += snprintf(line + n, sizeof line - (size_t)n, ",\"%s\":%.3f", r->extra_name,
                      r->extra);
    if (r->extra2 > 0 && r->extra2_name)
        n += snprintf(line + n, sizeof line - (size_t)n, ",\"%s\":%.3f", r->extra2_name,
                      r->extra2);
    n += snprintf(line + n, sizeof line - (size_t)n, "}\n");
    return append(path, line, n);
}

int64_t bench_util_rss(int pid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    int64_t kb = -ENOENT;
    while (fgets(buf, sizeof buf, f))
        if (!strncmp(buf, "VmRSS:", 6)) {
            kb = strtoll(buf + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kb < 0 ? kb : kb * 1024;
}

bool bench_util_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    switch (tolower((unsigned char)*end)) {
    case 'k': v <<= 10; end++; break;
    case 'm': v <<= 20; end++; break;
    case 'g': v <<= 30; end++; break;
    default: break;
    }
    if (*end)
        return false;
    *out = v;
    return true;
}
