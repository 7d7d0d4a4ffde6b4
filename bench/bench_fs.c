/*
 * bench_fs.c -- small-file throughput and directory scale through the
 * POSIX calls, on any mounted file system (run.sh points it at pomfs and
 * at the references).
 *
 *   bench_fs small -d DIR --size S|LO-HI [-n N] [-p P] [--label L] [--json F]
 *       N files per process (P forked processes, one folder each) of size
 *       S, or uniform in [LO,HI] (seeded, seed printed). Phases:
 *       "create+write" (open O_CREAT|O_TRUNC, write, close), "open+read"
 *       (open, read to the end, close), "remove" (unlink). A write that
 *       answers EFBIG (pomfs before the blob tier) yields the result
 *       "n/a (EFBIG)" and exit status 0: a known limit, not a failure.
 *   bench_fs dirscale -d DIR -n TOTAL [--step S] [--pid PID] [--ls A,B,..]
 *       grows one directory DIR/scale to TOTAL empty files, reporting the
 *       create rate of each step of S files (default: of each interval
 *       between the points 1000, 2000, 5000, 10000, 20000, ...), and, with --pid, the resident
 *       memory of that process (pom-mds) per entry created: all of it / N
 *       (an upper bound: it counts the daemon's base) and its growth since
 *       the start / N (a lower bound when the daemon reuses memory freed by
 *       earlier workloads); at each count
 *       of --ls, times a full readdir (what `ls -f` does) and checks it
 *       lists exactly that many names. Leaves the files (the caller drops
 *       the whole file system; removing millions one by one is not what is
 *       measured).
 *   bench_fs --quick   both, small sizes, on a folder of /tmp (CI check).
 *
 * Invariants:
 *  (1) Every operation's latency is measured alone (clock before the open,
 *      after the close); the phase rate is total ops / wall time from the
 *      earliest process start to the latest end.
 *  (2) Content is checked on read: the length read equals the size written,
 *      so a file system cannot look fast by losing data.
 */
#include "bench_util.h"
#include "xt_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct opts {
    const char *dir, *label, *json, *ls;
    uint64_t n, lo, hi, procs, step;
    int pid;
    uint64_t seed;
};

struct shared {
    int failed;
    char msg[512];
    uint64_t t0[64], t1[64], bytes;
};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static uint64_t file_size(const struct opts *o, uint64_t rank, uint64_t i)
{
    if (o->lo == o->hi)
        return o->lo;
    uint64_t s = o->seed ^ (rank << 40) ^ (i * 0x9e3779b97f4a7c15ull);
    for (int k = 0; k < 3; k++)
        rnd(&s);
    return o->lo + rnd(&s) % (o->hi - o->lo + 1);
}

static void note(struct shared *sh, int err, const char *what, const char *path)
{
    if (__sync_bool_compare_and_swap(&sh->failed, 0, err))
        snprintf(sh->msg, sizeof sh->msg, "%s %.400s: %s", what, path, strerror(err));
}

enum { SP_WRITE, SP_READ, SP_REMOVE, SP_N };
static const char *const sp_name[SP_N] = { "create+write", "open+read", "remove" };

static void small_child(const struct opts *o, uint64_t rank, int ph, struct shared *sh,
                        bench_lat *lat, char *buf)
{
    char path[4096];
    uint64_t bytes = 0;
    sh->t0[rank] = xt_mono_ns();
    for (uint64_t i = 0; i < o->n && !sh->failed; i++) {
        snprintf(path, sizeof path, "%s/small.%llu/f%llu", o->dir, (unsigned long long)rank,
                 (unsigned long long)i);
        uint64_t sz = file_size(o, rank, i), t0 = xt_mono_ns();
        int fd, e = 0;
        if (ph == SP_WRITE) {
            if ((fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644)) < 0) {
                note(sh, errno, "create", path);
                break;
            }
            for (uint64_t off = 0; off < sz && !e;) {
                ssize_t w = write(fd, buf, sz - off > (1u << 20) ? 1u << 20 : sz - off);
                e = w < 0 ? errno : w == 0 ? EIO : 0;
                off += w > 0 ? (uint64_t)w : 0;
            }
            if (close(fd) && !e)
                e = errno;
        } else if (ph == SP_READ) {
            if ((fd = open(path, O_RDONLY)) < 0) {
                note(sh, errno, "open", path);
                break;
            }
            uint64_t got = 0;
            for (;;) {
                ssize_t r = read(fd, buf, 1u << 20);
                if (r <= 0) {
                    e = r < 0 ? errno : 0;
                    break;
                }
                got += (uint64_t)r;
            }
            close(fd);
            if (!e && got != sz)
                e = EIO;
        } else if (unlink(path)) {
            e = errno;
        }
        if (e) {
            note(sh, e, sp_name[ph], path);
            break;
        }
        bench_lat_add(lat, xt_mono_ns() - t0);
        bytes += sz;
    }
    sh->t1[rank] = xt_mono_ns();
    __sync_fetch_and_add(&sh->bytes, bytes);
}

static int run_small(const struct opts *o)
{
    struct shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    bench_lat *lat = bench_lat_new(o->n * o->procs);
    char *buf = xt_malloc(1u << 20);
    if (sh == MAP_FAILED || !lat || !buf) {
        fprintf(stderr, "bench_fs: out of memory\n");
        return 1;
    }
    memset(buf, 'y', 1u << 20);
    char path[4096], param[64];
    for (uint64_t r = 0; r < o->procs; r++) {
        snprintf(path, sizeof path, "%s/small.%llu", o->dir, (unsigned long long)r);
        if (mkdir(path, 0755) && errno != EEXIST) {
            fprintf(stderr, "bench_fs: mkdir %s: %s\n", path, strerror(errno));
            return 1;
        }
    }
    if (o->lo == o->hi)
        snprintf(param, sizeof param, "size=%llu", (unsigned long long)o->lo);
    else
        snprintf(param, sizeof param, "size=%llu-%llu", (unsigned long long)o->lo,
                 (unsigned long long)o->hi);
    int status = 0;
    for (int ph = 0; ph < SP_N; ph++) {
        memset(sh, 0, sizeof *sh);
        bench_lat_reset(lat);
        pid_t kids[64];
        for (uint64_t r = 0; r < o->procs; r++)
            if ((kids[r] = fork()) == 0) {
                small_child(o, r, ph, sh, lat, buf);
                _exit(0);
            }
        for (uint64_t r = 0; r < o->procs; r++)
            waitpid(kids[r], NULL, 0);
        if (sh->failed == EFBIG && ph == SP_WRITE) {
            struct bench_result res = { .bench = "small-files", .target = o->label,
                                        .phase = sp_name[ph], .param = param,
                                        .procs = (unsigned)o->procs, .na = "EFBIG" };
            bench_util_json(o->json, &res);
            memset(sh, 0, sizeof *sh);
            for (uint64_t r = 0; r < o->procs; r++)
                for (uint64_t i = 0; i < o->n; i++) {
                    snprintf(path, sizeof path, "%s/small.%llu/f%llu", o->dir,
                             (unsigned long long)r, (unsigned long long)i);
                    unlink(path);
                }
            break;
        }
        if (sh->failed) {
            fprintf(stderr, "bench_fs: %s: %s\n", o->label, sh->msg);
            status = 1;
            break;
        }
        uint64_t t0 = UINT64_MAX, t1 = 0;
        for (uint64_t r = 0; r < o->procs; r++) {
            t0 = sh->t0[r] < t0 ? sh->t0[r] : t0;
            t1 = sh->t1[r] > t1 ? sh->t1[r] : t1;
        }
        double secs = (double)(t1 - t0) / 1e9;
        struct bench_result res = {
            .bench = "small-files", .target = o->label, .phase = sp_name[ph], .param = param,
            .procs = (unsigned)o->procs, .ops = o->n * o->procs, .secs = secs,
            .p50_us = bench_lat_pct_us(lat, 50), .p99_us = bench_lat_pct_us(lat, 99),
            .extra = ph == SP_REMOVE ? -1 : (double)sh->bytes / secs / 1e6, .extra_name = "MB_s",
        };
        bench_util_json(o->json, &res);
    }
    for (uint64_t r = 0; r < o->procs; r++) {
        snprintf(path, sizeof path, "%s/small.%llu", o->dir, (unsigned long long)r);
        rmdir(path);
    }
    xt_free(buf);
    bench_lat_free(lat);
    munmap(sh, sizeof *sh);
    return status;
}

/* Full readdir of path: the number of names other than . and .., or -errno. */
static int64_t count_dir(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static bool in_list(const char *list, uint64_t v)
{
    for (const char *p = list; p && *p;) {
        char tok[32];
        size_t k = strcspn(p, ",");
        uint64_t x;
        snprintf(tok, sizeof tok, "%.*s", (int)(k < 31 ? k : 31), p);
        if (bench_util_size(tok, &x) && x == v)
            return true;
        p += k + (p[k] == ',');
    }
    return false;
}

/* 1000 -> 2000 -> 5000 -> 10000 -> ... */
static uint64_t next_mark(uint64_t m)
{
    uint64_t dec = 1;
    while (dec * 10 <= m)
        dec *= 10;
    return m / dec == 1 ? 2 * dec : m / dec == 2 ? 5 * dec : 10 * dec;
}

static int run_dirscale(const struct opts *o)
{
    char dir[4096], path[4200], param[64];
    snprintf(dir, sizeof dir, "%s/scale", o->dir);
    if (mkdir(dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "bench_fs: mkdir %s: %s\n", dir, strerror(errno));
        return 1;
    }
    /* Without --step, report at 1-2-5 points (1000, 2000, 5000, 10000,
     * ...): the rate "at 10K" and "at 10M" are then each one interval. */
    uint64_t cap = o->step ? o->step : o->n / 2 + 1000;
    bench_lat *lat = bench_lat_new(cap);
    if (!lat)
        return 1;
    int64_t rss0 = o->pid ? bench_util_rss(o->pid) : -1;
    uint64_t made = 0, mark = 1000;
    while (made < o->n) {
        uint64_t next = made + o->step;
        if (!o->step) {
            while (mark <= made)
                mark = next_mark(mark);
            next = mark;
        }
        uint64_t todo = (next < o->n ? next : o->n) - made;
        bench_lat_reset(lat);
        uint64_t t0 = xt_mono_ns();
        for (uint64_t i = 0; i < todo; i++, made++) {
            snprintf(path, sizeof path, "%s/f%010llu", dir, (unsigned long long)made);
            uint64_t a = xt_mono_ns();
            int fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0644);
            if (fd < 0 || close(fd)) {
                fprintf(stderr, "bench_fs: %s: create %s: %s\n", o->label, path,
                        strerror(errno));
                return 1;
            }
            bench_lat_add(lat, xt_mono_ns() - a);
        }
        double secs = (double)(xt_mono_ns() - t0) / 1e9;
        snprintf(param, sizeof param, "entries=%llu", (unsigned long long)made);
        int64_t rss = o->pid ? bench_util_rss(o->pid) : -1;
        struct bench_result res = {
            .bench = "dir-scale", .target = o->label, .phase = "create", .param = param,
            .procs = 1, .ops = todo, .secs = secs, .p50_us = bench_lat_pct_us(lat, 50),
            .p99_us = bench_lat_pct_us(lat, 99),
            .extra = rss >= 0 ? (double)rss / (double)made : -1,
            .extra_name = "rss_bytes_per_entry",
            .extra2 = rss >= 0 && rss0 >= 0 ? (double)(rss - rss0) / (double)made : -1,
            .extra2_name = "rss_growth_per_entry",
        };
        bench_util_json(o->json, &res);
        if (in_list(o->ls, made)) {
            uint64_t a = xt_mono_ns();
            int64_t got = count_dir(dir);
            double s = (double)(xt_mono_ns() - a) / 1e9;
            if (got != (int64_t)made) {
                fprintf(stderr, "bench_fs: %s: readdir of %s: %lld names, want %llu\n",
                        o->label, dir, (long long)got, (unsigned long long)made);
                return 1;
            }
            struct bench_result ls = { .bench = "dir-scale", .target = o->label,
                                       .phase = "ls -f", .param = param, .procs = 1,
                                       .ops = made, .secs = s, .extra = -1 };
            bench_util_json(o->json, &ls);
        }
    }
    bench_lat_free(lat);
    return 0;
}

static int usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: bench_fs small -d DIR --size S|LO-HI [-n N] [-p P] [--label L] [--json F]\n"
            "       bench_fs dirscale -d DIR -n TOTAL [--step S] [--pid PID] [--ls A,B]\n"
            "                [--label L] [--json F]\n"
            "       bench_fs --quick\n");
    return rc;
}

static bool parse_size(const char *s, struct opts *o)
{
    const char *dash = strchr(s, '-');
    if (!dash)
        return bench_util_size(s, &o->lo) && (o->hi = o->lo, true);
    char a[32];
    snprintf(a, sizeof a, "%.*s", (int)(dash - s < 31 ? dash - s : 31), s);
    return bench_util_size(a, &o->lo) && bench_util_size(dash + 1, &o->hi) && o->lo <= o->hi;
}

static int quick(void)
{
    char dir[] = "/tmp/bench_fs.XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    bench_util_header();
    struct opts o = { .dir = dir, .label = "tmp", .n = 200, .procs = 2, .lo = 0, .hi = 1000,
                      .seed = 1 };
    int rc = run_small(&o);
    o.lo = o.hi = 65536;
    rc |= run_small(&o);
    struct opts d = { .dir = dir, .label = "tmp", .n = 2000, .step = 500, .pid = getpid(),
                      .ls = "1000,2000" };
    rc |= run_dirscale(&d);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    rc |= system(cmd) != 0;
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "--quick"))
        return quick();
    if (argc < 2 || (strcmp(argv[1], "small") && strcmp(argv[1], "dirscale")))
        return usage(argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2);
    bool small = !strcmp(argv[1], "small");
    struct opts o = { .label = "fs", .n = 1000, .procs = 1, .seed = 0x5eed };
    static const struct option lo[] = { { "size", required_argument, NULL, 'S' },
                                        { "step", required_argument, NULL, 's' },
                                        { "pid", required_argument, NULL, 'P' },
                                        { "ls", required_argument, NULL, 'l' },
                                        { "label", required_argument, NULL, 'L' },
                                        { "json", required_argument, NULL, 'J' },
                                        { "seed", required_argument, NULL, 'R' },
                                        { NULL, 0, NULL, 0 } };
    int c;
    bool sized = false;
    optind = 2;
    while ((c = getopt_long(argc, argv, "d:n:p:", lo, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 'd': o.dir = optarg; break;
        case 'n': ok = bench_util_size(optarg, &o.n); break;
        case 'p': ok = bench_util_size(optarg, &o.procs) && o.procs >= 1 && o.procs <= 64; break;
        case 'S': ok = sized = parse_size(optarg, &o); break;
        case 's': ok = bench_util_size(optarg, &o.step); break;
        case 'P': o.pid = atoi(optarg); break;
        case 'l': o.ls = optarg; break;
        case 'L': o.label = optarg; break;
        case 'J': o.json = optarg; break;
        case 'R': ok = bench_util_size(optarg, &o.seed); break;
        default: return usage(2);
        }
        if (!ok) {
            fprintf(stderr, "bench_fs: bad value '%s'\n", optarg);
            return 2;
        }
    }
    if (!o.dir || optind != argc || (small && !sized))
        return usage(2);
    bench_util_header();
    if (small) {
        if (o.lo != o.hi)
            fprintf(stderr, "bench_fs: sizes uniform in [%llu,%llu], seed %llu\n",
                    (unsigned long long)o.lo, (unsigned long long)o.hi,
                    (unsigned long long)o.seed);
        return run_small(&o);
    }
    return run_dirscale(&o);
}
