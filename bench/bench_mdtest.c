/*
 * bench_mdtest.c -- the phases of IOR's mdtest, in plain C with forked
 * processes instead of MPI (no Debian package ships IOR/mdtest; see
 * docs/bench.md). Same options and meaning:
 *
 *   -n N       items per process            -d DIR   test directory
 *   -i I       iterations (median reported) -u       a directory per process
 *   -F         files only (no dir phases)   -w B     bytes written per file
 *   -e B       bytes read per file          -N S     stat/read the items of
 *   -p P       processes (mdtest: mpirun -np P)       process (rank+S) mod P
 *   -C         the create phases only: the items stay (to measure what
 *              they cost the storage tier)
 *
 * plus --label NAME (the target's name in results), --bench NAME
 * ("mdtest-easy"), --json FILE (append one JSON line per phase) and
 * --quick (without -d: a self-check of easy and hard on a temporary folder
 * of /tmp with 2 processes, for CI).
 *
 * Phases, in mdtest's order: directory creation, directory stat, directory
 * removal (unless -F); file creation (open O_CREAT + write -w bytes +
 * close), file stat, file read (open + read -e bytes + close), file removal.
 * mdtest-easy is `-F -u -n N` (empty files, one directory per process),
 * mdtest-hard `-F -w 3901 -e 3901 -N 1 -n N` (one shared directory).
 *
 * Invariants:
 *  (1) All processes start a phase when the parent releases it (they poll
 *      a shared phase number; the parent waits for all to report done,
 *      reaping any that died); a phase's time runs from
 *      the earliest process start to the latest process end (each process
 *      stamps both itself: the parent may be scheduled late on 2 cores),
 *      and the rate is P*N / that time, as mdtest computes it.
 *  (2) A process that fails an operation records the error, does no more
 *      work, but still reports every phase done, so nothing waits forever;
 *      one that dies is noticed by the parent. The run then exits 1 naming
 *      the first error.
 *  (3) The tree (DIR/mdtest.I/[rR|shared]) is made before and removed after
 *      each iteration, untimed, as mdtest does.
 */
#include "bench_util.h"
#include "xt_common.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum { PH_DCREATE, PH_DSTAT, PH_DREMOVE, PH_FCREATE, PH_FSTAT, PH_FREAD, PH_FREMOVE, PH_N };
static const char *const phase_name[PH_N] = { "dir create",  "dir stat",  "dir remove",
                                              "file create", "file stat", "file read",
                                              "file remove" };

struct cfg {
    uint64_t n, iters, wbytes, ebytes, stride, procs;
    bool unique, files_only, create_only;
    const char *dir, *label, *bench, *json;
};

/* Shared by parent and children (a MAP_SHARED page). */
struct shared {
    int failed;           /* first errno seen, 0 if none */
    char msg[512];        /* what failed */
    uint64_t t0[256], t1[256];  /* per process: phase start and end (ns) */
    unsigned go;          /* phase number the parent released (atomic) */
    unsigned done;        /* processes finished with the current phase (atomic) */
};

static struct shared *sh;
static bench_lat *lat[PH_N];

static void fail(int err, const char *what, const char *path)
{
    if (__sync_bool_compare_and_swap(&sh->failed, 0, err))
        snprintf(sh->msg, sizeof sh->msg, "%s %.400s: %s", what, path, strerror(err));
}

static void item_path(const struct cfg *c, uint64_t iter, uint64_t owner, uint64_t i,
                      bool dir, char *buf, size_t cap)
{
    if (c->unique)
        snprintf(buf, cap, "%s/mdtest.%llu/r%llu/%s.mdtest.%llu.%llu", c->dir,
                 (unsigned long long)iter, (unsigned long long)owner, dir ? "dir" : "file",
                 (unsigned long long)owner, (unsigned long long)i);
    else
        snprintf(buf, cap, "%s/mdtest.%llu/shared/%s.mdtest.%llu.%llu", c->dir,
                 (unsigned long long)iter, dir ? "dir" : "file", (unsigned long long)owner,
                 (unsigned long long)i);
}

/* One operation of phase ph on item i of process owner. 0 or errno. */
static int one_op(const struct cfg *c, int ph, const char *path, char *buf)
{
    struct stat st;
    int fd;
    switch (ph) {
    case PH_DCREATE:
        return mkdir(path, 0755) ? errno : 0;
    case PH_DSTAT:
    case PH_FSTAT:
        return stat(path, &st) ? errno : 0;
    case PH_DREMOVE:
        return rmdir(path) ? errno : 0;
    case PH_FREMOVE:
        return unlink(path) ? errno : 0;
    case PH_FCREATE:
        if ((fd = open(path, O_CREAT | O_WRONLY, 0644)) < 0)
            return errno;
        if (c->wbytes) {
            ssize_t w = write(fd, buf, c->wbytes);
            if (w != (ssize_t)c->wbytes) {
                int e = w < 0 ? errno : EIO;
                close(fd);
                return e;
            }
        }
        return close(fd) ? errno : 0;
    case PH_FREAD: {
        if ((fd = open(path, O_RDONLY)) < 0)
            return errno;
        uint64_t want = c->ebytes < c->wbytes ? c->ebytes : c->wbytes;
        if (c->ebytes) {
            ssize_t r = read(fd, buf, c->ebytes);
            if (r != (ssize_t)want) {
                int e = r < 0 ? errno : EIO;
                close(fd);
                return e;
            }
        }
        return close(fd) ? errno : 0;
    }
    }
    return EINVAL;
}

static bool phase_on(const struct cfg *c, int ph)
{
    if (c->create_only && ph != PH_DCREATE && ph != PH_FCREATE)
        return false;
    return ph >= PH_FCREATE || !c->files_only;
}

static void child(const struct cfg *c, uint64_t rank)
{
    char *buf = xt_malloc(c->wbytes > c->ebytes ? c->wbytes + 1 : c->ebytes + 1);
    if (!buf)
        fail(ENOMEM, "allocate", "buffer");
    else
        memset(buf, 'x', c->wbytes > c->ebytes ? c->wbytes : c->ebytes);
    unsigned seq = 0;
    for (uint64_t it = 0; it < c->iters; it++)
        for (int ph = 0; ph < PH_N; ph++) {
            if (!phase_on(c, ph))
                continue;
            seq++;
            while (__atomic_load_n(&sh->go, __ATOMIC_ACQUIRE) != seq)
                usleep(20);
            bool neighbour = ph == PH_DSTAT || ph == PH_FSTAT || ph == PH_FREAD;
            uint64_t owner = neighbour ? (rank + c->stride) % c->procs : rank;
            char path[4096];
            sh->t0[rank] = xt_mono_ns();
            for (uint64_t i = 0; i < c->n && !sh->failed; i++) {
                item_path(c, it, owner, i, ph < PH_FCREATE, path, sizeof path);
                uint64_t t0 = xt_mono_ns();
                int e = one_op(c, ph, path, buf);
                if (e) {
                    fail(e, phase_name[ph], path);
                    break;
                }
                bench_lat_add(lat[ph], xt_mono_ns() - t0);
            }
            sh->t1[rank] = xt_mono_ns();
            __atomic_fetch_add(&sh->done, 1, __ATOMIC_RELEASE);
        }
    xt_free(buf);
    _exit(0);
}

static int tree(const struct cfg *c, uint64_t it, bool make)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/mdtest.%llu", c->dir, (unsigned long long)it);
    if (make && mkdir(p, 0755) && errno != EEXIST)
        return -errno;
    for (uint64_t r = 0; r < (c->unique ? c->procs : 1); r++) {
        if (c->unique)
            snprintf(p, sizeof p, "%s/mdtest.%llu/r%llu", c->dir, (unsigned long long)it,
                     (unsigned long long)r);
        else
            snprintf(p, sizeof p, "%s/mdtest.%llu/shared", c->dir, (unsigned long long)it);
        if (make ? mkdir(p, 0755) && errno != EEXIST : rmdir(p) && errno != ENOENT)
            return -errno;
    }
    snprintf(p, sizeof p, "%s/mdtest.%llu", c->dir, (unsigned long long)it);
    if (!make && rmdir(p) && errno != ENOENT)
        return -errno;
    return 0;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Releases phase seq to the workers and waits until all are done with it.
 * A worker that died (a signal: SIGXFSZ, a crash) can never report done:
 * it is reaped here (kids[r] = 0), the others are killed, and true returned,
 * so the run fails instead of hanging. */
static bool release(const struct cfg *c, pid_t *kids, unsigned seq)
{
    __atomic_store_n(&sh->done, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sh->go, seq, __ATOMIC_RELEASE);
    while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) != c->procs) {
        usleep(200);
        for (uint64_t r = 0; r < c->procs; r++) {
            int st;
            if (kids[r] > 0 && waitpid(kids[r], &st, WNOHANG) == kids[r]) {
                kids[r] = 0;
                /* Exit 0 comes only after the last phase: not a death. */
                if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
                    continue;
                fail(EPIPE, "worker", WIFSIGNALED(st) ? strsignal(WTERMSIG(st)) : "exited early");
                for (uint64_t k = 0; k < c->procs; k++)
                    if (kids[k] > 0)
                        kill(kids[k], SIGKILL);
                return true;
            }
        }
    }
    return false;
}

/* Runs configuration c; 0 or -1 (message printed). */
static int run(const struct cfg *c)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        fprintf(stderr, "bench_mdtest: out of memory\n");
        return -1;
    }
    memset(sh, 0, sizeof *sh);
    for (int ph = 0; ph < PH_N; ph++)
        if (!(lat[ph] = bench_lat_new(c->n * c->procs * c->iters))) {
            fprintf(stderr, "bench_mdtest: out of memory\n");
            return -1;
        }
    double *secs = xt_calloc(PH_N * c->iters, sizeof *secs);
    pid_t *kids = xt_calloc(c->procs, sizeof *kids);
    if (!secs || !kids)
        return -1;
    for (uint64_t it = 0; it < c->iters; it++) {
        int rc = tree(c, it, true);
        if (rc) {
            fprintf(stderr, "bench_mdtest: make tree in %s: %s\n", c->dir, strerror(-rc));
            return -1;
        }
    }
    fflush(stdout);
    for (uint64_t r = 0; r < c->procs; r++) {
        kids[r] = fork();
        if (kids[r] == 0)
            child(c, r);
        if (kids[r] < 0) {
            /* Stop the workers already started: they wait for a release. */
            perror("bench_mdtest: fork");
            for (uint64_t k = 0; k < r; k++)
                kill(kids[k], SIGKILL);
            return -1;
        }
    }
    unsigned seq = 0;
    bool dead = false;
    for (uint64_t it = 0; it < c->iters && !dead; it++)
        for (int ph = 0; ph < PH_N && !dead; ph++) {
            if (!phase_on(c, ph))
                continue;
            if (release(c, kids, ++seq))
                dead = true;
            uint64_t t0 = UINT64_MAX, t1 = 0;
            for (uint64_t r = 0; r < c->procs; r++) {
                t0 = sh->t0[r] < t0 ? sh->t0[r] : t0;
                t1 = sh->t1[r] > t1 ? sh->t1[r] : t1;
            }
            secs[ph * c->iters + it] = (double)(t1 - t0) / 1e9;
        }
    int bad = dead;
    for (uint64_t r = 0; r < c->procs; r++) {
        int st;
        if (kids[r] > 0 && waitpid(kids[r], &st, 0) == kids[r])
            bad |= !WIFEXITED(st) || WEXITSTATUS(st);
    }
    for (uint64_t it = 0; it < c->iters && !c->create_only; it++)
        tree(c, it, false);
    if (sh->failed || bad) {
        fprintf(stderr, "bench_mdtest: %s: %s\n", c->label,
                sh->failed ? sh->msg : "a worker died");
        return -1;
    }
    char param[64];
    if (c->wbytes)
        snprintf(param, sizeof param, "n=%llu,w=%llu", (unsigned long long)c->n,
                 (unsigned long long)c->wbytes);
    else
        snprintf(param, sizeof param, "n=%llu", (unsigned long long)c->n);
    for (int ph = 0; ph < PH_N; ph++) {
        if (!phase_on(c, ph))
            continue;
        double *s = secs + ph * c->iters;
        qsort(s, c->iters, sizeof *s, cmp_d);
        struct bench_result res = {
            .bench = c->bench, .target = c->label, .phase = phase_name[ph], .param = param,
            .procs = (unsigned)c->procs, .ops = c->n * c->procs, .secs = s[c->iters / 2],
            .p50_us = bench_lat_pct_us(lat[ph], 50), .p99_us = bench_lat_pct_us(lat[ph], 99),
            .extra = -1,
        };
        if (bench_util_json(c->json, &res))
            fprintf(stderr, "bench_mdtest: cannot append to %s\n", c->json);
        bench_lat_free(lat[ph]);
    }
    xt_free(secs);
    xt_free(kids);
    munmap(sh, sizeof *sh);
    return 0;
}

static int usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: bench_mdtest -d DIR [-n N] [-i I] [-u] [-F] [-C] [-w B] [-e B] [-N S] [-p P]\n"
            "                    [--label NAME] [--bench NAME] [--json FILE]\n"
            "       bench_mdtest --quick   (self-check on a folder of /tmp)\n");
    return rc;
}

static int quick(void)
{
    char dir[] = "/tmp/bench_mdtest.XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_mdtest: mkdtemp");
        return 1;
    }
    struct cfg easy = { .n = 200, .iters = 1, .procs = 2, .unique = true, .files_only = true,
                        .dir = dir, .label = "tmp", .bench = "mdtest-easy" };
    struct cfg hard = { .n = 200, .iters = 1, .procs = 2, .files_only = true, .wbytes = 3901,
                        .ebytes = 3901, .stride = 1, .dir = dir, .label = "tmp",
                        .bench = "mdtest-hard" };
    struct cfg dirs = { .n = 100, .iters = 1, .procs = 1, .unique = true, .dir = dir,
                        .label = "tmp", .bench = "mdtest-dirs" };
    bench_util_header();
    int rc = run(&easy) || run(&hard) || run(&dirs);
    /* A failed phase leaves its files: remove the whole folder. */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = 1;
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct cfg c = { .n = 1000, .iters = 1, .procs = 1, .label = "fs", .bench = "mdtest" };
    static const struct option lo[] = { { "quick", no_argument, NULL, 'Q' },
                                        { "label", required_argument, NULL, 'L' },
                                        { "bench", required_argument, NULL, 'B' },
                                        { "json", required_argument, NULL, 'J' },
                                        { "help", no_argument, NULL, 'h' },
                                        { NULL, 0, NULL, 0 } };
    bool q = false;
    int o;
    while ((o = getopt_long(argc, argv, "n:d:i:uFCw:e:N:p:h", lo, NULL)) != -1) {
        uint64_t *dst = NULL;
        switch (o) {
        case 'n': dst = &c.n; break;
        case 'i': dst = &c.iters; break;
        case 'w': dst = &c.wbytes; break;
        case 'e': dst = &c.ebytes; break;
        case 'N': dst = &c.stride; break;
        case 'p': dst = &c.procs; break;
        case 'd': c.dir = optarg; break;
        case 'u': c.unique = true; break;
        case 'F': c.files_only = true; break;
        case 'C': c.create_only = true; break;
        case 'L': c.label = optarg; break;
        case 'B': c.bench = optarg; break;
        case 'J': c.json = optarg; break;
        case 'Q': q = true; break;
        case 'h': return usage(0);
        default: return usage(2);
        }
        if (dst && !bench_util_size(optarg, dst)) {
            fprintf(stderr, "bench_mdtest: -%c wants a number, not '%s'\n", o, optarg);
            return 2;
        }
    }
    if (optind != argc)
        return usage(2);
    if (q && !c.dir)
        return quick();
    if (!c.dir || !c.n || !c.iters || !c.procs || c.procs > 256)
        return usage(2);
    bench_util_header();
    return run(&c) ? 1 : 0;
}
