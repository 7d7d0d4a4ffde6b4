/*
 * bench_dist.c -- aggregate create/lookup rates of a many-MDS cluster and
 * the per-operation costs the model of docs/mds-model.md needs.
 * bench/run.sh (workload `dist`) starts 1 R2, 2 MDSL and K pom-mds and runs
 * this once per K; it also runs alone against any cluster:
 *
 *   bench_dist --r2 ADDR --fs NAME [-n N] [-t T] [--dir-n M] [--probes P]
 *              [--mds-pids P1,P2,..] [--mds-logs L1,L2,..] [--mdsl-pids ..]
 *              [--label K] [--json PATH]      (K: the MDS count, a number)
 *
 * With --add-mdsl-at P it runs bench_dist_grow.c instead of the phases
 * below (an MDSL joins while files are created; workload `grow`).
 *
 * Phases (T client threads, one pom_fs, libpomegranate through R2):
 *   create      N files in ONE directory (every create also updates that
 *               directory's row: one MDS serves all of those);
 *   lookup      each of them;
 *   mkdir       N/20 subdirectories in that directory: each also adds 1 to
 *               its nlink, a count delta at the MDS of its row (a loose op,
 *               docs/mds-xact.md "RMU: a parent's subdirectory count"); the nlink is
 *               checked after the phase;
 *   create-dirs each thread mkdirs its own directory and creates M files
 *               in it (T tables, homes spread by ring 0);
 *   lookup-dirs each of those;
 *   probe-create / probe-lookup  P fresh clients one after another: each
 *               pom_open, a warm-up that opens its connections (lookups in
 *               the per-thread directories), then TWO timed operations in
 *               the big directory: the first routed with a bitmap that
 *               knows only slice 0 (goes to the home; forwarded when the
 *               name's slice lives at another MDS), the second with the
 *               bitmap the first reply taught (direct).
 * Per phase: ops/s, p50/p99, and, when the MDS pids and logs are given,
 * the deltas of the MDS counters (SIGHUP; the "dist:" and "stats:" lines
 * of each log): requests, forwards, commit groups and their mean commit
 * time, bytes written; the CPU (utime+stime of /proc/PID/stat) the MDS and
 * MDSL processes spent over the phase, per client operation.
 *
 * Invariants:
 *  (1) Counters are read between phases only, with no client request in
 *      flight, so a phase's deltas are its own (the MDS's background work
 *      -- commits of the phase before, gossip -- leaks in; it is small
 *      against thousands of operations and is stated in the doc).
 *  (2) The forward share of a probe phase comes from the MDS counters,
 *      not from guessing the ring: the forwarded latency is derived from
 *      mean(first) = f * L_fwd + (1 - f) * L_direct.
 *  (3) Every file found is checked against the uuid its create returned.
 */
#include "bench_dist.h"
#include "bench_util.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_PROCS DIST_MAX_PROCS
#define MAX_THREADS 64
#define WARM_DIRS 24     /* empty directories the probes warm up with */

/* What one MDS log says at one moment (cumulative counters). */
struct mds_snap {
    double requests, forwards, groups, commit_n, commit_sum_us, bytes;
};

/* Counters summed over every MDS, CPU in seconds. */
struct snap {
    struct mds_snap m;
    double mds_cpu, mdsl_cpu, self_cpu, load1;
};

struct dist_opt dist_opt = { .n = 20000, .dir_n = 1000, .probes = 50, .threads = 8,
                             .label = "1", .window_s = 5, .grow_wait_s = 300 };

static int split_list(char *s, const char **out, int max)
{
    int n = 0;
    for (char *save = NULL, *t = strtok_r(s, ",", &save); t && n < max;
         t = strtok_r(NULL, ",", &save))
        out[n++] = t;
    return n;
}

static int split_pids(char *s, int *out)
{
    const char *v[MAX_PROCS];
    int n = split_list(s, v, MAX_PROCS);
    for (int i = 0; i < n; i++)
        out[i] = atoi(v[i]);
    return n;
}

double dist_proc_cpu(int pid)
{
    char p[64], buf[1024];
    snprintf(p, sizeof p, "/proc/%d/stat", pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    /* Fields after the command (which may hold spaces) start after ')'. */
    char *s = strrchr(buf, ')');
    if (!s)
        return 0;
    unsigned long ut = 0, st = 0;
    /* state ppid pgrp session tty tpgid flags minflt cminflt majflt
     * cmajflt utime stime: fields 3..15, utime and stime are 12th, 13th. */
    if (sscanf(s + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

int dist_count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

double dist_field_after(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? strtod(p + strlen(key), NULL) : 0;
}

int dist_hup_all(const int *pid, const char *const *log, int n, const char *needle)
{
    int before[MAX_PROCS];
    n = n < MAX_PROCS ? n : MAX_PROCS;
    for (int i = 0; i < n; i++) {
        before[i] = dist_count_lines(log[i], needle);
        kill(pid[i], SIGHUP);
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 300 && dist_count_lines(log[i], needle) <= before[i]; k++)
            usleep(10000);
    return n;
}

/* Parses the last report of one MDS log into s. */
static void parse_log(const char *path, struct mds_snap *s)
{
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    char line[4096];
    double bi = 0, bd = 0, batches = 0;
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, "stats: ");
        if (p) {
            p += 7;
            unsigned long long cnt;
            double mean;
            if (sscanf(p, "batch %llu", &cnt) == 1) {
                batches = (double)cnt;
            } else if (sscanf(p, "commit %llu %*u %lf", &cnt, &mean) == 2) {
                s->commit_n = (double)cnt;
                s->commit_sum_us = (double)cnt * mean;
            } else if (strncmp(p, "groups_committed ", 17) == 0) {
                s->groups = strtod(p + 17, NULL);
            } else if (strncmp(p, "image_bytes ", 12) == 0) {
                bi = strtod(p + 12, NULL);
            } else if (strncmp(p, "delta_bytes ", 12) == 0) {
                bd = strtod(p + 12, NULL);
            }
            continue;
        }
        if (strstr(line, "dist: site")) {
            /* Atomic batches (a create and its parent's update) are not in
             * the "requests" counter: every request served is both. */
            s->requests = dist_field_after(line, " requests ") + batches;
            s->forwards = dist_field_after(line, " forwards ");
            s->bytes = bi + bd;
        }
    }
    fclose(f);
}

/* Asks every MDS for its counters (SIGHUP) and waits until each log shows
 * the new report (at most 3 s), then sums them. */
static void take(struct snap *s)
{
    memset(s, 0, sizeof *s);
    int n = dist_hup_all(dist_opt.mds_pid, dist_opt.mds_log,
                         dist_opt.nmds < dist_opt.nlogs ? dist_opt.nmds : dist_opt.nlogs,
                         "dist: site");
    for (int i = 0; i < n; i++) {
        struct mds_snap m;
        parse_log(dist_opt.mds_log[i], &m);
        s->m.requests += m.requests;
        s->m.forwards += m.forwards;
        s->m.groups += m.groups;
        s->m.commit_n += m.commit_n;
        s->m.commit_sum_us += m.commit_sum_us;
        s->m.bytes += m.bytes;
    }
    for (int i = 0; i < dist_opt.nmds; i++)
        s->mds_cpu += dist_proc_cpu(dist_opt.mds_pid[i]);
    for (int i = 0; i < dist_opt.nmdsl; i++)
        s->mdsl_cpu += dist_proc_cpu(dist_opt.mdsl_pid[i]);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    s->self_cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                  (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &s->load1) != 1)
            s->load1 = 0;
        fclose(f);
    }
}

/* One phase's result: printed as a row and, with --json, one JSON line. */
static void report(const char *phase, long ops, double secs, bench_lat *lat, const struct snap *a,
                   const struct snap *b, const char *more)
{
    double rate = secs > 0 ? (double)ops / secs : 0;
    double p50 = lat ? bench_lat_pct_us(lat, 50) : 0, p99 = lat ? bench_lat_pct_us(lat, 99) : 0;
    double req = b->m.requests - a->m.requests, fwd = b->m.forwards - a->m.forwards;
    double grp = b->m.groups - a->m.groups, cn = b->m.commit_n - a->m.commit_n;
    double csum = b->m.commit_sum_us - a->m.commit_sum_us, bytes = b->m.bytes - a->m.bytes;
    double mcpu = b->mds_cpu - a->mds_cpu, lcpu = b->mdsl_cpu - a->mdsl_cpu;
    double scpu = b->self_cpu - a->self_cpu;
    double per = ops > 0 ? 1e6 / (double)ops : 0;
    printf("%-12s K=%-2s %8ld ops %7.2f s %9.0f ops/s p50 %7.1f us p99 %8.1f us | "
           "requests %.0f (%.2f/op) forwards %.0f (%.3f%%) | MDS CPU %.1f us/op, MDSL %.1f us/op, "
           "client %.1f us/op | groups %.0f, commit mean %.0f us, %.0f B/op | load %.2f%s%s\n",
           phase, dist_opt.label, ops, secs, rate, p50, p99, req, ops ? req / (double)ops : 0, fwd,
           req > 0 ? 100.0 * fwd / req : 0, mcpu * per, lcpu * per, scpu * per, grp,
           cn > 0 ? csum / cn : 0, ops ? bytes / (double)ops : 0, b->load1, more ? " | " : "",
           more ? more : "");
    fflush(stdout);
    if (!dist_opt.json)
        return;
    FILE *f = fopen(dist_opt.json, "a");
    if (!f)
        return;
    fprintf(f,
            "{\"bench\":\"dist\",\"target\":\"pomegranate\",\"phase\":\"%s\",\"param\":\"mds=%s\","
            "\"procs\":%d,\"mds\":%s,\"ops\":%ld,\"secs\":%.4f,\"ops_per_s\":%.1f,\"p50_us\":%.1f,"
            "\"p99_us\":%.1f,\"requests\":%.0f,\"forwards\":%.0f,\"mds_cpu_us_per_op\":%.2f,"
            "\"mdsl_cpu_us_per_op\":%.2f,\"client_cpu_us_per_op\":%.2f,\"groups\":%.0f,"
            "\"commit_mean_us\":%.1f,\"bytes_per_op\":%.1f,\"load1\":%.2f}\n",
            phase, dist_opt.label, dist_opt.threads, dist_opt.label, ops, secs, rate, p50, p99, req,
            fwd,
            mcpu * per, lcpu * per, scpu * per, grp, cn > 0 ? csum / cn : 0,
            ops ? bytes / (double)ops : 0, b->load1);
    fclose(f);
}

/* ---- the workers ------------------------------------------------------ */

struct run {
    pom_fs *fs;
    pom_ino big;              /* the one directory */
    pom_ino dirs[MAX_THREADS]; /* one per thread */
    uint64_t *uuid;           /* big directory: per file */
    uint64_t *duuid;          /* per-thread directories: [thread * dir_n + i] */
    bench_lat *lat;
    _Atomic long failures;
    int (*op)(struct run *r, int k, long i);
    long count;               /* ops per thread (dirs) or total (big) */
    int per_thread;           /* 1: i in [0,count) of thread k's own directory */
};

static void fail(struct run *r, const char *what, const char *name, int rc)
{
    if (atomic_fetch_add(&r->failures, 1) < 5)
        fprintf(stderr, "bench_dist: %s %s: %s\n", what, name, strerror(rc < 0 ? -rc : rc));
}

static int op_create(struct run *r, int k, long i)
{
    char name[32];
    snprintf(name, sizeof name, "f%ld", i);
    struct stat st;
    pom_ino dir = r->per_thread ? r->dirs[k] : r->big;
    int rc = pom_mknod(r->fs, dir, name, S_IFREG | 0644, 0, NULL, &st);
    if (rc < 0) {
        fail(r, "create", name, rc);
        return rc;
    }
    if (r->per_thread)
        r->duuid[(long)k * dist_opt.dir_n + i] = st.st_ino;
    else
        r->uuid[i] = st.st_ino;
    pom_forget(r->fs, st.st_ino, 1);
    return 0;
}

static int op_mkdir(struct run *r, int k, long i)
{
    (void)k;
    char name[32];
    snprintf(name, sizeof name, "d%ld", i);
    struct stat st;
    int rc = pom_mkdir(r->fs, r->big, name, 0755, NULL, &st);
    if (rc < 0) {
        fail(r, "mkdir", name, rc);
        return rc;
    }
    pom_forget(r->fs, st.st_ino, 1);
    return 0;
}

static int op_lookup(struct run *r, int k, long i)
{
    char name[32];
    snprintf(name, sizeof name, "f%ld", i);
    struct stat st;
    pom_ino dir = r->per_thread ? r->dirs[k] : r->big;
    int rc = pom_lookup(r->fs, dir, name, &st);
    if (rc == 0) {
        pom_forget(r->fs, st.st_ino, 1);
        uint64_t want = r->per_thread ? r->duuid[(long)k * dist_opt.dir_n + i] : r->uuid[i];
        if (st.st_ino != want)
            rc = -ESTALE;
    }
    if (rc < 0)
        fail(r, "lookup", name, rc);
    return rc;
}

struct worker {
    struct run *r;
    int k;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct run *r = w->r;
    long from = r->per_thread ? 0 : w->k, step = r->per_thread ? 1 : dist_opt.threads;
    for (long i = from; i < r->count; i += step) {
        uint64_t t0 = xt_mono_ns();
        r->op(r, w->k, i);
        bench_lat_add(r->lat, xt_mono_ns() - t0);
    }
    return NULL;
}

/* Runs op on dist_opt.threads threads; returns the seconds. */
static double phase(struct run *r, int (*op)(struct run *, int, long), long count, int per_thread)
{
    r->op = op;
    r->count = count;
    r->per_thread = per_thread;
    bench_lat_reset(r->lat);
    pthread_t th[MAX_THREADS];
    struct worker w[MAX_THREADS];
    uint64_t t0 = xt_mono_ns();
    for (int k = 0; k < dist_opt.threads; k++) {
        w[k] = (struct worker){ r, k };
        pthread_create(&th[k], NULL, worker_main, &w[k]);
    }
    for (int k = 0; k < dist_opt.threads; k++)
        pthread_join(th[k], NULL);
    return (double)(xt_mono_ns() - t0) / 1e9;
}

/* After a create phase, outside its timing: commits what it changed (every
 * MDS, pom_sync), so the phase's commit groups, bytes and MDSL CPU are in
 * its own counters (invariant 1) and not in the next phase's. */
static void settle(struct run *r)
{
    int rc = pom_sync(r->fs);
    if (rc < 0)
        fail(r, "pom_sync", "", rc);
}

/* ---- probes: fresh clients ------------------------------------------- */

static double lat_mean_us(bench_lat *l)
{
    uint64_t n = l->n < l->cap ? l->n : l->cap;
    double s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += (double)l->ns[i];
    return n ? s / (double)n / 1000.0 : 0;
}

/* P fresh clients; each warms up and then times two operations in the big
 * directory (create: names "p<k>a"/"p<k>b"; lookup: existing files). */
static int probes(struct run *r, int create, const char *dname, bench_lat *first,
                  bench_lat *second)
{
    bench_lat_reset(first);
    bench_lat_reset(second);
    int bad = 0;
    for (long k = 0; k < dist_opt.probes; k++) {
        pom_fs *fs;
        int rc = pom_open(dist_opt.r2, dist_opt.fsname, &fs);
        if (rc < 0) {
            fail(r, "pom_open", "probe", rc);
            bad++;
            continue;
        }
        struct stat st;
        pom_ino big = 0;
        if ((rc = pom_lookup(fs, POM_ROOT_INO, dname, &st)) == 0)
            big = st.st_ino;
        /* Warm-up: one lookup in each of WARM_DIRS directories (tables
         * whose homes are spread by ring 0) opens the connections to every
         * MDS (one is missed with probability (1 - 1/K)^WARM_DIRS); a
         * create in one of them takes what a client's first create sets up
         * (so the timed create pays for routing only). */
        for (int t = 0; rc == 0 && t < WARM_DIRS; t++) {
            char n[32];
            snprintf(n, sizeof n, "w%d", t);
            struct stat ds;
            if (pom_lookup(fs, POM_ROOT_INO, n, &ds) == 0) {
                if (pom_lookup(fs, ds.st_ino, "x", &st) == 0)
                    pom_forget(fs, st.st_ino, 1);
                if (create && t == 0) {
                    snprintf(n, sizeof n, "w%ld", k);
                    if (pom_mknod(fs, ds.st_ino, n, S_IFREG | 0644, 0, NULL, &st) == 0)
                        pom_forget(fs, st.st_ino, 1);
                }
                pom_forget(fs, ds.st_ino, 1);
            }
        }
        for (int j = 0; rc == 0 && j < 2; j++) {
            char name[32];
            long i = (long)((k * 7919 + j * 104729) % dist_opt.n);
            if (create)
                snprintf(name, sizeof name, "p%ld%c", k, 'a' + j);
            else
                snprintf(name, sizeof name, "f%ld", i);
            uint64_t t0 = xt_mono_ns();
            rc = create ? pom_mknod(fs, big, name, S_IFREG | 0644, 0, NULL, &st)
                        : pom_lookup(fs, big, name, &st);
            bench_lat_add(j ? second : first, xt_mono_ns() - t0);
            if (rc == 0) {
                if (!create && st.st_ino != r->uuid[i])
                    rc = -ESTALE;
                pom_forget(fs, st.st_ino, 1);
            }
            if (rc < 0)
                fail(r, create ? "probe create" : "probe lookup", name, rc);
        }
        if (big)
            pom_forget(fs, big, 1);
        bad += rc < 0;
        pom_close(fs);
    }
    return bad;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_dist --r2 ADDR --fs NAME [-n N] [-t THREADS] [--dir-n M]\n"
               "         [--probes P] [--mds-pids P,..] [--mds-logs L,..] [--mdsl-pids P,..]\n"
               "         [--label K] [--json PATH]\n"
               "       bench_dist ... --add-mdsl-at P --add-mdsl-cmd CMD --pomctl PATH\n"
               "         --mdsl-pids P1,P2 --mdsl-logs L1,L2,L3 --mdsl-dirs D1,D2,D3\n"
               "         [--window SECS] [--grow-wait SECS]\n");
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        { "r2", 1, 0, 'r' },         { "fs", 1, 0, 'f' },           { "dir-n", 1, 0, 'm' },
        { "probes", 1, 0, 'P' },     { "mds-pids", 1, 0, 'p' },     { "mds-logs", 1, 0, 'l' },
        { "mdsl-pids", 1, 0, 'L' },  { "label", 1, 0, 'k' },        { "json", 1, 0, 'j' },
        { "add-mdsl-at", 1, 0, 'A' }, { "add-mdsl-cmd", 1, 0, 'C' }, { "mdsl-logs", 1, 0, 'G' },
        { "mdsl-dirs", 1, 0, 'D' },  { "pomctl", 1, 0, 'c' },       { "window", 1, 0, 'w' },
        { "grow-wait", 1, 0, 'W' },  { "help", 0, 0, 'h' },         { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "n:t:h", lo, NULL)) != -1) {
        switch (c) {
        case 'r': dist_opt.r2 = optarg; break;
        case 'f': dist_opt.fsname = optarg; break;
        case 'n': dist_opt.n = atol(optarg); break;
        case 't': dist_opt.threads = atoi(optarg); break;
        case 'm': dist_opt.dir_n = atol(optarg); break;
        case 'P': dist_opt.probes = atol(optarg); break;
        case 'p': dist_opt.nmds = split_pids(optarg, dist_opt.mds_pid); break;
        case 'l': dist_opt.nlogs = split_list(optarg, dist_opt.mds_log, MAX_PROCS); break;
        case 'L': dist_opt.nmdsl = split_pids(optarg, dist_opt.mdsl_pid); break;
        case 'k': dist_opt.label = optarg; break;
        case 'j': dist_opt.json = optarg; break;
        case 'A': dist_opt.add_at = atoi(optarg); break;
        case 'C': dist_opt.add_cmd = optarg; break;
        case 'G': dist_opt.nmdsl_logs = split_list(optarg, dist_opt.mdsl_log, MAX_PROCS); break;
        case 'D': dist_opt.nmdsl_dirs = split_list(optarg, dist_opt.mdsl_dir, MAX_PROCS); break;
        case 'c': dist_opt.pomctl = optarg; break;
        case 'w': dist_opt.window_s = atof(optarg); break;
        case 'W': dist_opt.grow_wait_s = atof(optarg); break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    /* The label is the MDS count: a JSON number in the results. */
    if (!dist_opt.label[0] || strspn(dist_opt.label, "0123456789") != strlen(dist_opt.label)) {
        fprintf(stderr, "bench_dist: --label must be a number (the MDS count)\n");
        return 2;
    }
    if (!dist_opt.r2 || !dist_opt.fsname || dist_opt.n <= 0 || dist_opt.dir_n <= 0 ||
        dist_opt.probes < 0 || dist_opt.threads <= 0 || dist_opt.threads > MAX_THREADS) {
        usage(stderr);
        return 2;
    }
    /* The new MDSL is the last of --mdsl-logs and --mdsl-dirs: one more
     * than the running ones of --mdsl-pids. */
    if (dist_opt.add_at &&
        (dist_opt.add_at < 1 || dist_opt.add_at > 99 || !dist_opt.add_cmd || !dist_opt.pomctl ||
         dist_opt.nmdsl_logs != dist_opt.nmdsl + 1 || dist_opt.nmdsl_dirs != dist_opt.nmdsl + 1 ||
         dist_opt.nmdsl + 1 >= MAX_PROCS || dist_opt.window_s <= 0)) {
        fprintf(stderr, "bench_dist: --add-mdsl-at P (1..99) wants --add-mdsl-cmd, --pomctl, "
                        "--mdsl-pids of the running MDSL and --mdsl-logs, --mdsl-dirs of "
                        "those and the new one (last)\n");
        return 2;
    }
    struct run r = { 0 };
    int rc = pom_open(dist_opt.r2, dist_opt.fsname, &r.fs);
    if (rc < 0) {
        fprintf(stderr, "bench_dist: pom_open %s: %s\n", dist_opt.r2, strerror(-rc));
        return 1;
    }
    char dname[64];
    snprintf(dname, sizeof dname, "big%ld", (long)getpid());
    struct stat st;
    if ((rc = pom_mkdir(r.fs, POM_ROOT_INO, dname, 0755, NULL, &st)) < 0) {
        fprintf(stderr, "bench_dist: mkdir %s: %s\n", dname, strerror(-rc));
        return 1;
    }
    r.big = st.st_ino;
    if (dist_opt.add_at) {
        long bad = dist_grow(r.fs, r.big);
        pom_forget(r.fs, r.big, 1);
        pom_close(r.fs);
        if (bad)
            printf("bench_dist: %ld operations failed\n", bad < 0 ? 0 : bad);
        return bad ? 1 : 0;
    }
    r.uuid = calloc((size_t)dist_opt.n, sizeof *r.uuid);
    r.duuid = calloc((size_t)(dist_opt.dir_n * dist_opt.threads), sizeof *r.duuid);
    long dn = dist_opt.dir_n * dist_opt.threads;
    long cap = dist_opt.n > dn ? dist_opt.n : dn;
    r.lat = bench_lat_new((uint64_t)cap);
    bench_lat *p1 = bench_lat_new((uint64_t)dist_opt.probes + 1);
    bench_lat *p2 = bench_lat_new((uint64_t)dist_opt.probes + 1);
    if (!r.uuid || !r.duuid || !r.lat || !p1 || !p2)
        return 1;

    struct snap a, b;
    take(&a);
    double s = phase(&r, op_create, dist_opt.n, 0);
    settle(&r);
    take(&b);
    report("create", dist_opt.n, s, r.lat, &a, &b, NULL);
    a = b;
    s = phase(&r, op_lookup, dist_opt.n, 0);
    take(&b);
    report("lookup", dist_opt.n, s, r.lat, &a, &b, NULL);
    long nd = dist_opt.n / 20 > 0 ? dist_opt.n / 20 : 1;
    a = b;
    s = phase(&r, op_mkdir, nd, 0);
    settle(&r);
    take(&b);
    report("mkdir", nd, s, r.lat, &a, &b, NULL);
    if ((rc = pom_getattr(r.fs, r.big, &st)) < 0 || st.st_nlink != (nlink_t)(2 + nd)) {
        fprintf(stderr, "bench_dist: %s has nlink %ld after %ld mkdirs (rc %d)\n", dname,
                rc < 0 ? -1L : (long)st.st_nlink, nd, rc);
        atomic_fetch_add(&r.failures, 1);
    }

    for (int k = 0; k < dist_opt.threads; k++) {
        char n[32];
        snprintf(n, sizeof n, "t%d", k);
        if ((rc = pom_mkdir(r.fs, POM_ROOT_INO, n, 0755, NULL, &st)) < 0) {
            fprintf(stderr, "bench_dist: mkdir %s: %s\n", n, strerror(-rc));
            return 1;
        }
        r.dirs[k] = st.st_ino;
    }
    for (int k = 0; k < WARM_DIRS; k++) {
        char n[32];
        snprintf(n, sizeof n, "w%d", k);
        if ((rc = pom_mkdir(r.fs, POM_ROOT_INO, n, 0755, NULL, &st)) < 0) {
            fprintf(stderr, "bench_dist: mkdir %s: %s\n", n, strerror(-rc));
            return 1;
        }
        pom_forget(r.fs, st.st_ino, 1);
    }
    take(&a);
    s = phase(&r, op_create, dist_opt.dir_n, 1);
    settle(&r);
    take(&b);
    report("create-dirs", dn, s, r.lat, &a, &b, NULL);
    a = b;
    s = phase(&r, op_lookup, dist_opt.dir_n, 1);
    take(&b);
    report("lookup-dirs", dn, s, r.lat, &a, &b, NULL);

    for (int create = 1; dist_opt.probes > 0 && create >= 0; create--) {
        a = b;
        uint64_t t0 = xt_mono_ns();
        int bad = probes(&r, create, dname, p1, p2);
        double ps = (double)(xt_mono_ns() - t0) / 1e9;
        if (create)
            settle(&r);
        take(&b);
        if (bad)
            atomic_fetch_add(&r.failures, bad);
        /* Invariant (2): f from the counters; the extra latency of a forward
         * from the means. */
        double f = (b.m.forwards - a.m.forwards) / (double)dist_opt.probes;
        if (f > 1)
            f = 1;
        double m1 = lat_mean_us(p1), m2 = lat_mean_us(p2);
        double lf = f > 0.05 ? (m1 - (1 - f) * m2) / f : 0;
        char more[256];
        snprintf(more, sizeof more,
                 "first op: mean %.1f us p50 %.1f us; second (direct): mean %.1f us p50 %.1f "
                 "us; forwarded share %.2f; forwarded op ~%.1f us",
                 m1, bench_lat_pct_us(p1, 50), m2, bench_lat_pct_us(p2, 50), f, lf);
        report(create ? "probe-create" : "probe-lookup", dist_opt.probes * 2, ps, NULL, &a, &b,
               more);
        if (dist_opt.json) {
            FILE *jf = fopen(dist_opt.json, "a");
            if (jf) {
                fprintf(jf,
                        "{\"bench\":\"dist\",\"target\":\"pomegranate\",\"phase\":\"%s-cost\","
                        "\"param\":\"mds=%s\",\"procs\":1,\"mds\":%s,\"probes\":%ld,"
                        "\"first_mean_us\":%.1f,\"first_p50_us\":%.1f,\"direct_mean_us\":%.1f,"
                        "\"direct_p50_us\":%.1f,\"forward_share\":%.3f,\"forwarded_us\":%.1f}\n",
                        create ? "probe-create" : "probe-lookup", dist_opt.label, dist_opt.label,
                        dist_opt.probes, m1, bench_lat_pct_us(p1, 50), m2, bench_lat_pct_us(p2, 50),
                        f, lf);
                fclose(jf);
            }
        }
    }
    long failures = atomic_load(&r.failures);
    pom_forget(r.fs, r.big, 1);
    pom_close(r.fs);
    free(r.uuid);
    free(r.duuid);
    bench_lat_free(r.lat);
    bench_lat_free(p1);
    bench_lat_free(p2);
    if (failures) {
        printf("bench_dist: %ld operations failed\n", failures);
        return 1;
    }
    return 0;
}
