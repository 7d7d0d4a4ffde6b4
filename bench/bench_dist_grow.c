/*
 * bench_dist_grow.c -- bench_dist --add-mdsl-at P: what adding an MDSL
 * under load costs (docs/mdsl-scale.md "Costs").
 * bench/run.sh (workload `grow`) starts 1 R2, 2 MDSL and K pom-mds; this
 * creates files in one directory on T threads, and once P% of the N
 * creates are done it starts a third pom-mdsl (--add-mdsl-cmd, run by
 * sh -c; it registers and R2 starts the ring-1 join by itself). The creates
 * go on past N until the change is STABLE and one whole window after it
 * was measured (at most --grow-wait seconds after the start of the MDSL),
 * so "after" is measured under the same load as "before".
 *
 * Reported per window (--window, 5 s): creates/s, commit-group p50/p99
 * (MDS_OP_GROUP over every MDS), moves, move_bytes, move_loads,
 * move_aborts, the ring-1 phase, and whether the window lies before,
 * during or after the change. At the end: the time from the start of the
 * new MDSL to each phase of the change, the bytes moved against 1/3 of the
 * live bytes the two MDSL held when it started (`live_bytes` of their
 * SIGHUP report), and every MDSL's disk use (du of its folder) and live
 * bytes before and after.
 *
 * Invariants:
 *  (1) Counters are read while the creates run (bench_dist.c reads them
 *      between phases): a commit in flight at a window's edge falls in one
 *      window or the next, never in both and never in none.
 *  (2) A window's group percentiles come from the difference of two bucket
 *      dumps ("hist: group" lines, mds_stats_dump_hist) summed over every
 *      MDS; the value printed is the lower bound of the bucket holding that
 *      rank, at most 1/16 below the true sample.
 *  (3) The change is finished when `pomctl ring show 1 --json` says stable
 *      with a ring-1 version above the one read before the MDSL started.
 *  (4) Every file created is looked up once the change is over and must
 *      carry the uuid its create returned: a move that lost a row fails
 *      the run.
 */
#include "bench_dist.h"
#include "bench_util.h"

#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HIST_MAX 1024       /* distinct bucket bounds kept (960 exist) */
#define PHASES 6            /* names of ring-1 phases remembered */
#define POLL_NS 1000000000u /* pomctl at most once a second */

/* A latency histogram as the MDS dump it: bucket lower bound -> count. */
struct hist {
    int n;
    uint64_t lo[HIST_MAX]; /* ascending */
    double cnt[HIST_MAX];
};

/* The MDS side at one moment, summed over every MDS (cumulative). */
struct msnap {
    uint64_t at_ns;
    long created;
    double moves, move_bytes, move_loads, move_aborts, groups_aborted;
    struct hist group;
};

/* One MDSL at one moment. */
struct lsnap {
    double bytes, live_bytes, du;
};

struct ring1 {
    char phase[24];
    unsigned long long version; /* of ring 1 (published) */
};

struct grow {
    pom_fs *fs;
    pom_ino big;
    uint64_t *uuid; /* per file index; 0: its create failed */
    long cap;
    _Atomic long next, done, failures;
    atomic_bool stop;
    bool lookups;   /* the workers look up instead of creating */
};

static void hist_add(struct hist *h, uint64_t lo, double c)
{
    int i = 0;
    while (i < h->n && h->lo[i] < lo)
        i++;
    if (i < h->n && h->lo[i] == lo) {
        h->cnt[i] += c;
        return;
    }
    if (h->n == HIST_MAX)
        return;
    memmove(&h->lo[i + 1], &h->lo[i], (size_t)(h->n - i) * sizeof h->lo[0]);
    memmove(&h->cnt[i + 1], &h->cnt[i], (size_t)(h->n - i) * sizeof h->cnt[0]);
    h->lo[i] = lo;
    h->cnt[i] = c;
    h->n++;
}

static double hist_total(const struct hist *h)
{
    double t = 0;
    for (int i = 0; i < h->n; i++)
        t += h->cnt[i];
    return t;
}

/* d = b - a (a's bounds are all in b: the counts only grow). */
static void hist_diff(const struct hist *b, const struct hist *a, struct hist *d)
{
    *d = *b;
    for (int i = 0; i < a->n; i++)
        hist_add(d, a->lo[i], -a->cnt[i]);
}

/* Invariant 2: the lower bound of the bucket of rank ceil(q * total), in
 * microseconds; 0 when empty. */
static double hist_pct_us(const struct hist *h, double q)
{
    double total = hist_total(h), cum = 0, rank = q * total;
    if (total <= 0)
        return 0;
    for (int i = 0; i < h->n; i++) {
        cum += h->cnt[i];
        if (cum >= rank && h->cnt[i] > 0)
            return (double)h->lo[i] / 1000.0;
    }
    return (double)h->lo[h->n - 1] / 1000.0;
}

/* Adds the last report of one MDS log to s: its "hist: group" lines (an
 * empty one opens a report) and the counters of its "dist: site" line. */
static void parse_mds(const char *path, struct msnap *s)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    static struct hist cur; /* main thread only */
    memset(&cur, 0, sizeof cur);
    char line[4096], dist[4096] = "", aborted[4096] = "";
    while (fgets(line, sizeof line, f)) {
        char *p = strstr(line, "hist: group");
        if (p) {
            p += strlen("hist: group");
            if (*p != ' ') {
                cur.n = 0;
                continue;
            }
            for (char *q = p; *q == ' ';) {
                char *end;
                unsigned long long lo = strtoull(q + 1, &end, 10), n;
                if (*end != ':')
                    break;
                n = strtoull(end + 1, &end, 10);
                hist_add(&cur, lo, (double)n);
                q = end;
            }
        } else if (strstr(line, "dist: site")) {
            snprintf(dist, sizeof dist, "%s", line);
        } else if (strstr(line, "stats: groups_aborted ")) {
            snprintf(aborted, sizeof aborted, "%s", line);
        }
    }
    fclose(f);
    for (int i = 0; i < cur.n; i++)
        hist_add(&s->group, cur.lo[i], cur.cnt[i]);
    s->moves += dist_field_after(dist, " moves ");
    s->move_bytes += dist_field_after(dist, " move_bytes ");
    s->move_loads += dist_field_after(dist, " move_loads ");
    s->move_aborts += dist_field_after(dist, " move_aborts ");
    s->groups_aborted += dist_field_after(aborted, "groups_aborted ");
}

/* Every MDS reports (SIGHUP, all at once, as for take() in bench_dist.c). */
static void take_mds(struct grow *g, struct msnap *s)
{
    memset(s, 0, sizeof *s);
    int n = dist_hup_all(dist_opt.mds_pid, dist_opt.mds_log,
                         dist_opt.nmds < dist_opt.nlogs ? dist_opt.nmds : dist_opt.nlogs,
                         "dist: site");
    for (int i = 0; i < n; i++)
        parse_mds(dist_opt.mds_log[i], s);
    s->at_ns = xt_mono_ns();
    s->created = atomic_load(&g->done);
}

static long long du_sum; /* nftw passes no argument: main thread only */

static int du_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (flag == FTW_F)
        du_sum += (long long)st->st_blocks * 512;
    return 0;
}

/* MDSL i reports (SIGHUP) and its folder is measured. */
static void take_mdsl(int i, struct lsnap *l)
{
    memset(l, 0, sizeof *l);
    if (i < dist_opt.nmdsl)
        dist_hup_all(&dist_opt.mdsl_pid[i], &dist_opt.mdsl_log[i], 1, "stats: tables");
    FILE *f = fopen(dist_opt.mdsl_log[i], "r");
    if (f) {
        char line[4096], last[4096] = "";
        while (fgets(line, sizeof line, f))
            if (strstr(line, "stats: tables"))
                snprintf(last, sizeof last, "%s", line);
        fclose(f);
        l->bytes = dist_field_after(last, " bytes ");
        l->live_bytes = dist_field_after(last, " live_bytes ");
    }
    du_sum = 0;
    nftw(dist_opt.mdsl_dir[i], du_one, 16, FTW_PHYS);
    l->du = (double)du_sum;
}

/* The value of "key" at or after from in pomctl's JSON (pretty-printed:
 * spaces around the colon), or NULL. */
static const char *json_value(const char *from, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\"", key);
    const char *p = from ? strstr(from, k) : NULL;
    if (!p)
        return NULL;
    p += strlen(k);
    p += strspn(p, " \t\n");
    if (*p != ':')
        return NULL;
    p++;
    return p + strspn(p, " \t\n");
}

/* Invariant 3's source: `pomctl ring show 1 --json`. 0, or -1 when pomctl
 * gave nothing readable. */
static int ring1_poll(struct ring1 *r)
{
    char cmd[1024], out[65536];
    snprintf(cmd, sizeof cmd, "'%s' --r2 '%s' --json ring show 1 2>/dev/null", dist_opt.pomctl,
             dist_opt.r2);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    size_t len = fread(out, 1, sizeof out - 1, p);
    pclose(p);
    out[len] = '\0';
    const char *kind = json_value(out, "kind");
    const char *v = kind && !strncmp(kind, "\"MDSL\"", 6) ? json_value(kind, "version") : NULL;
    if (!v)
        return -1;
    r->version = strtoull(v, NULL, 10);
    snprintf(r->phase, sizeof r->phase, "stable"); /* no change ever ran */
    const char *ph = json_value(strstr(out, "\"ring1_change\""), "phase");
    if (ph && *ph == '"') {
        size_t n = strcspn(ph + 1, "\"");
        snprintf(r->phase, sizeof r->phase, "%.*s", (int)n, ph + 1);
    }
    return 0;
}

static void fail(struct grow *g, const char *what, const char *name, int rc)
{
    if (atomic_fetch_add(&g->failures, 1) < 5)
        fprintf(stderr, "bench_dist: %s %s: %s\n", what, name, strerror(rc < 0 ? -rc : rc));
}

static void *worker(void *arg)
{
    struct grow *g = arg;
    char name[32];
    struct stat st;
    while (!atomic_load(&g->stop)) {
        long i = atomic_fetch_add(&g->next, 1);
        if (i >= g->cap)
            break;
        snprintf(name, sizeof name, "f%ld", i);
        if (g->lookups) {
            if (!g->uuid[i])
                continue; /* its create failed: counted then */
            int rc = pom_lookup(g->fs, g->big, name, &st);
            if (rc == 0) {
                pom_forget(g->fs, st.st_ino, 1);
                if (st.st_ino != g->uuid[i])
                    rc = -ESTALE;
            }
            if (rc < 0)
                fail(g, "lookup after the change", name, rc);
        } else {
            int rc = pom_mknod(g->fs, g->big, name, S_IFREG | 0644, 0, NULL, &st);
            if (rc < 0) {
                fail(g, "create", name, rc);
                continue;
            }
            g->uuid[i] = st.st_ino;
            pom_forget(g->fs, st.st_ino, 1);
        }
        atomic_fetch_add(&g->done, 1);
    }
    return NULL;
}

static void start(struct grow *g, pthread_t *th)
{
    for (int k = 0; k < dist_opt.threads; k++)
        pthread_create(&th[k], NULL, worker, g);
}

static void join(struct grow *g, pthread_t *th)
{
    atomic_store(&g->stop, true);
    for (int k = 0; k < dist_opt.threads; k++)
        pthread_join(th[k], NULL);
}

static const char *stage_of(double a, double b, double t_add, double t_stable)
{
    if (t_add < 0 || b <= t_add)
        return "before";
    if (t_stable >= 0 && a >= t_stable)
        return "after";
    return "during";
}

static double load1(void)
{
    double l = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = 0;
        fclose(f);
    }
    return l;
}

static FILE *json_open(void)
{
    return dist_opt.json ? fopen(dist_opt.json, "a") : NULL;
}

/* One window [a, b) (seconds since the creates started) from two MDS
 * snapshots: a row and a JSON line. */
static void window(const struct msnap *x, const struct msnap *y, double a, double b,
                   const char *stage, const char *phase)
{
    struct hist *d = malloc(sizeof *d);
    if (!d)
        return;
    hist_diff(&y->group, &x->group, d);
    double secs = (double)(y->at_ns - x->at_ns) / 1e9;
    long ops = y->created - x->created;
    double rate = secs > 0 ? (double)ops / secs : 0, groups = hist_total(d);
    double p50 = hist_pct_us(d, 0.50), p99 = hist_pct_us(d, 0.99), l1 = load1();
    double mv = y->moves - x->moves, mb = y->move_bytes - x->move_bytes;
    double ml = y->move_loads - x->move_loads, ma = y->move_aborts - x->move_aborts;
    double ga = y->groups_aborted - x->groups_aborted;
    free(d);
    printf("window %6.1f-%6.1f s %-6s %8.0f creates/s | groups %5.0f p50 %8.1f us p99 %9.1f us "
           "aborted %.0f | moves %.0f move_bytes %.0f move_loads %.0f move_aborts %.0f | "
           "ring1 %s | load %.2f\n",
           a, b, stage, rate, groups, p50, p99, ga, mv, mb, ml, ma, phase, l1);
    fflush(stdout);
    FILE *f = json_open();
    if (!f)
        return;
    fprintf(f,
            "{\"bench\":\"dist-grow\",\"target\":\"pomegranate\",\"phase\":\"window\","
            "\"param\":\"mds=%s,add-at=%d\",\"procs\":%d,\"mds\":%s,\"t0_s\":%.2f,\"t1_s\":%.2f,"
            "\"stage\":\"%s\",\"ops\":%ld,\"secs\":%.3f,\"ops_per_s\":%.1f,\"groups\":%.0f,"
            "\"group_p50_us\":%.1f,\"group_p99_us\":%.1f,\"groups_aborted\":%.0f,\"moves\":%.0f,"
            "\"move_bytes\":%.0f,\"move_loads\":%.0f,\"move_aborts\":%.0f,\"ring1\":\"%s\","
            "\"load1\":%.2f}\n",
            dist_opt.label, dist_opt.add_at, dist_opt.threads, dist_opt.label, a, b, stage, ops,
            secs, rate, groups, p50, p99, ga, mv, mb, ml, ma, phase, l1);
    fclose(f);
}

/* The first time each ring-1 phase was seen, seconds after the MDSL start. */
struct seen {
    char name[PHASES][24];
    double at[PHASES];
    int n;
};

/* Notes the phase r shows (the stable before the change starts is not
 * one of its phases); true when r is the change's end (invariant 3). */
static bool seen_note(struct seen *s, const struct ring1 *r, const struct ring1 *r0, double t)
{
    bool stable = !strcmp(r->phase, "stable");
    if (stable && r->version <= r0->version)
        return false;
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->name[i], r->phase))
            return stable;
    if (s->n < PHASES) {
        snprintf(s->name[s->n], sizeof s->name[0], "%s", r->phase);
        s->at[s->n++] = t;
        printf("ring1: %s at +%.1f s after the new MDSL started\n", r->phase, t);
        fflush(stdout);
    }
    return stable;
}

/* Ends the window that began at *wstart now: reports it from w0 to a new
 * snapshot w1, which becomes w0. Returns the window's stage. */
static const char *cut(struct grow *g, struct msnap *w0, struct msnap *w1, uint64_t t0,
                       double *wstart, double t_add, double t_stable, const char *phase)
{
    take_mds(g, w1);
    double wend = (double)(w1->at_ns - t0) / 1e9;
    const char *st = stage_of(*wstart, wend, t_add, t_stable);
    window(w0, w1, *wstart, wend, st, phase);
    *w0 = *w1;
    *wstart = wend;
    return st;
}

static pid_t spawn(const char *cmd)
{
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static double since(uint64_t t0)
{
    return (double)(xt_mono_ns() - t0) / 1e9;
}

long dist_grow(pom_fs *fs, pom_ino big)
{
    struct grow *g = calloc(1, sizeof *g);
    struct msnap *s0 = malloc(sizeof *s0), *w0 = malloc(sizeof *w0), *w1 = malloc(sizeof *w1);
    if (!g || !s0 || !w0 || !w1)
        return -1;
    g->fs = fs;
    g->big = big;
    g->cap = dist_opt.n * 8; /* room to go on until STABLE */
    g->uuid = calloc((size_t)g->cap, sizeof *g->uuid);
    if (!g->uuid)
        return -1;
    int old = dist_opt.nmdsl; /* the running MDSL; the new one is index old */
    /* Every MDSL when the new one starts, when the change is STABLE (under
     * the creates) and at the end. */
    struct lsnap before[DIST_MAX_PROCS], stable[DIST_MAX_PROCS], after[DIST_MAX_PROCS];
    struct ring1 r0 = { .phase = "?" }, r = { .phase = "?" };
    struct seen seen = { .n = 0 };
    long trigger = dist_opt.n * dist_opt.add_at / 100;
    double t_add = -1, t_stable = -1;
    const char *why = "STABLE and one window after it";
    pthread_t th[64];

    printf("grow: %d MDS, %d MDSL + 1 at %d%% of %ld creates, %d threads, %.0f s windows\n",
           dist_opt.nmds, old, dist_opt.add_at, dist_opt.n, dist_opt.threads, dist_opt.window_s);
    if (ring1_poll(&r0) < 0)
        fprintf(stderr, "bench_dist: pomctl ring show 1 gave nothing at the start\n");
    take_mds(g, s0);
    *w0 = *s0;
    uint64_t t0 = xt_mono_ns(), last_poll = 0;
    double wstart = 0;
    start(g, th);
    int after_full = 0; /* whole windows measured after STABLE */
    for (;;) {
        usleep(100000);
        long created = atomic_load(&g->done);
        if (t_add < 0 && created >= trigger) {
            /* Windows are cut at the add and at STABLE: none straddles. */
            cut(g, w0, w1, t0, &wstart, t_add, t_stable, r0.phase);
            for (int i = 0; i < old; i++)
                take_mdsl(i, &before[i]);
            if (ring1_poll(&r0) < 0)
                fprintf(stderr, "bench_dist: pomctl ring show 1 gave nothing before the add\n");
            pid_t pid = spawn(dist_opt.add_cmd);
            if (pid < 0) {
                fprintf(stderr, "bench_dist: fork: %s\n", strerror(errno));
                join(g, th);
                return -1;
            }
            dist_opt.mdsl_pid[dist_opt.nmdsl++] = (int)pid;
            t_add = since(t0);
            printf("grow: new MDSL (pid %d) started at %.1f s, %ld files created; ring 1 v%llu "
                   "%s\n", (int)pid, t_add, created, r0.version, r0.phase);
            fflush(stdout);
        }
        if (t_add >= 0 && t_stable < 0 && xt_mono_ns() - last_poll >= POLL_NS) {
            last_poll = xt_mono_ns();
            if (ring1_poll(&r) == 0 && seen_note(&seen, &r, &r0, since(t0) - t_add)) {
                t_stable = since(t0);
                cut(g, w0, w1, t0, &wstart, t_add, -1, r.phase);
                for (int i = 0; i < dist_opt.nmdsl; i++)
                    take_mdsl(i, &stable[i]);
            }
        }
        if (since(t0) - wstart >= dist_opt.window_s) {
            const char *st = cut(g, w0, w1, t0, &wstart, t_add, t_stable,
                                 t_add < 0 ? r0.phase : r.phase);
            after_full += !strcmp(st, "after");
            if (created >= dist_opt.n && after_full > 0)
                break;
        }
        if (t_add >= 0 && t_stable < 0 && since(t0) - t_add > dist_opt.grow_wait_s &&
            created >= dist_opt.n) {
            why = "--grow-wait passed before STABLE";
            break;
        }
        if (atomic_load(&g->next) >= g->cap) {
            why = "room for 8 N files used";
            break;
        }
    }
    join(g, th);
    long created = atomic_load(&g->done);
    long made = atomic_load(&g->next) < g->cap ? atomic_load(&g->next) : g->cap;
    double secs = since(t0);
    int rc = pom_sync(fs);
    if (rc < 0)
        fail(g, "pom_sync", "", rc);
    printf("grow: creates stopped at %.1f s (%s): %ld files\n", secs, why, created);
    /* Without load, the change may still finish (the doc says when). */
    while (t_stable < 0 && t_add >= 0 && since(t0) - t_add <= dist_opt.grow_wait_s) {
        if (ring1_poll(&r) == 0 && seen_note(&seen, &r, &r0, since(t0) - t_add))
            t_stable = since(t0);
        usleep(500000);
    }
    take_mds(g, w1); /* the totals: the moves after the creates count too */
    for (int i = 0; i < dist_opt.nmdsl; i++)
        take_mdsl(i, &after[i]);
    bool stable_loaded = t_stable >= 0 && t_stable <= secs;
    if (!stable_loaded)
        memcpy(stable, after, sizeof stable); /* STABLE came without load, or never */

    /* Invariant 4: every file, after the change. */
    atomic_store(&g->next, 0);
    atomic_store(&g->done, 0);
    atomic_store(&g->stop, false);
    g->cap = made;
    g->lookups = true;
    uint64_t tl = xt_mono_ns();
    start(g, th);
    for (int k = 0; k < dist_opt.threads; k++)
        pthread_join(th[k], NULL);
    long looked = atomic_load(&g->done);
    double lsecs = since(tl);
    printf("grow: %ld files looked up after the change in %.1f s (%.0f/s), uuids checked\n",
           looked, lsecs, lsecs > 0 ? (double)looked / lsecs : 0);

    /* The creates go on during the change: the live bytes it had to place
     * lie between those at the add and those at STABLE. */
    double stored = 0, at_stable = 0, live_after = 0;
    for (int i = 0; i < old; i++)
        stored += before[i].live_bytes;
    for (int i = 0; i < dist_opt.nmdsl; i++) {
        at_stable += stable[i].live_bytes;
        live_after += after[i].live_bytes;
    }
    double mb = w1->move_bytes - s0->move_bytes, third = stored / 3, third_st = at_stable / 3;
    double to_stable = t_stable >= 0 ? t_stable - t_add : -1;
    printf("grow: moves %.0f, move_bytes %.0f (%.2f x 1/3 of the %.0f live bytes at the add, "
           "%.2f x 1/3 of the %.0f at STABLE), move_loads %.0f, move_aborts %.0f; time to "
           "STABLE %s%.1f s\n",
           w1->moves - s0->moves, mb, third > 0 ? mb / third : 0, stored,
           third_st > 0 ? mb / third_st : 0, at_stable,
           w1->move_loads - s0->move_loads, w1->move_aborts - s0->move_aborts,
           to_stable < 0 ? "not reached, > " : "",
           to_stable < 0 ? dist_opt.grow_wait_s : to_stable);
    for (int i = 0; i < dist_opt.nmdsl; i++)
        printf("grow: mdsl%d disk %.1f -> %.1f -> %.1f MiB, live %.1f -> %.1f -> %.1f MiB "
               "(add -> STABLE -> end; %.0f%% of all live at the end)\n",
               i + 1, i < old ? before[i].du / 1048576 : 0, stable[i].du / 1048576,
               after[i].du / 1048576, i < old ? before[i].live_bytes / 1048576 : 0,
               stable[i].live_bytes / 1048576, after[i].live_bytes / 1048576,
               live_after > 0 ? 100 * after[i].live_bytes / live_after : 0);
    fflush(stdout);
    FILE *f = json_open();
    if (f) {
        fprintf(f,
                "{\"bench\":\"dist-grow\",\"target\":\"pomegranate\",\"phase\":\"summary\","
                "\"param\":\"mds=%s,add-at=%d\",\"procs\":%d,\"mds\":%s,\"n\":%ld,"
                "\"created\":%ld,\"secs\":%.2f,\"stopped\":\"%s\",\"add_at_s\":%.2f,"
                "\"to_stable_s\":%.2f,\"moves\":%.0f,\"move_bytes\":%.0f,\"move_loads\":%.0f,"
                "\"move_aborts\":%.0f,\"live_bytes_at_add\":%.0f,\"move_vs_third\":%.3f,"
                "\"live_bytes_at_stable\":%.0f,\"move_vs_third_stable\":%.3f,"
                "\"stable_under_load\":%s,\"looked_up\":%ld,\"lookup_secs\":%.2f,"
                "\"phases\":{",
                dist_opt.label, dist_opt.add_at, dist_opt.threads, dist_opt.label, dist_opt.n,
                created, secs, why, t_add, to_stable, w1->moves - s0->moves, mb,
                w1->move_loads - s0->move_loads, w1->move_aborts - s0->move_aborts, stored,
                third > 0 ? mb / third : 0, at_stable, third_st > 0 ? mb / third_st : 0,
                stable_loaded ? "true" : "false", looked, lsecs);
        for (int i = 0; i < seen.n; i++)
            fprintf(f, "%s\"%s\":%.2f", i ? "," : "", seen.name[i], seen.at[i]);
        fprintf(f, "},\"mdsl\":[");
        for (int i = 0; i < dist_opt.nmdsl; i++)
            fprintf(f,
                    "%s{\"du_before\":%.0f,\"du_stable\":%.0f,\"du_after\":%.0f,"
                    "\"live_before\":%.0f,\"live_stable\":%.0f,\"live_after\":%.0f,"
                    "\"bytes_after\":%.0f}",
                    i ? "," : "", i < old ? before[i].du : 0, stable[i].du, after[i].du,
                    i < old ? before[i].live_bytes : 0, stable[i].live_bytes,
                    after[i].live_bytes, after[i].bytes);
        fprintf(f, "]}\n");
        fclose(f);
    }
    long failures = atomic_load(&g->failures);
    if (to_stable < 0) {
        fprintf(stderr, "bench_dist: the join did not reach STABLE within %.0f s\n",
                dist_opt.grow_wait_s);
        failures++;
    }
    free(g->uuid);
    free(g);
    free(s0);
    free(w0);
    free(w1);
    return failures;
}
