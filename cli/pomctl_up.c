/*
 * pomctl_up.c -- `pomctl up` and `pomctl down`: a one-machine cluster in
 * the background, all of it under one folder.
 *
 *   DIR/r2/            pom-r2's embedded store      DIR/logs/<daemon>.log
 *   DIR/mdsl/          pom-mdsl's segments          DIR/run/<daemon>.pid
 *   DIR/mds/           pom-mds's folder             DIR/run/<daemon>.port
 *   DIR/blobs/         blob tier of fs 'pomfs'      DIR/run/mount (pomfs)
 *   DIR/run/<daemon>.metrics  HOST:PORT of its Prometheus /metrics (loopback,
 *                      a free port; pomfs's too; docs/metrics.md)
 *   DIR/r2.addr        R2's HOST:PORT (the default folder's is pomctl's default)
 *   DIR/ports/<daemon> the port it listened on last: `up` asks for it again
 *
 * `up --mds N` starts N pom-mds (docs/mds-dist.md): the first is "pom-mds"
 * (DIR/mds, as with one), the others "pom-mds-2" .. "pom-mds-N" (DIR/mds-K,
 * run/pom-mds-K.pid, a sticky port each); all register with R2, which puts
 * them in ring 0. Once all are up, `up` waits two heartbeats so that every
 * MDS holds the final ring before a client arrives (ring changes move no
 * slices yet). Default: 1.
 *
 * `up --mdsl N` starts N pom-mdsl the same way: "pom-mdsl" (DIR/mdsl), then
 * "pom-mdsl-2" .. "pom-mdsl-N" (DIR/mdsl-K). They start before any MDS, so
 * each joins ring 1 as it registers (docs/r2.md "Rings: ring 0 follows
 * failures, ring 1 never does"); on a running cluster the extra ones join
 * through a ring-1 change (docs/mdsl-scale.md). Default: 1.
 *
 * `up --mdsl-replicas R` keeps every slice and decision record on R MDSL
 * (docs/mdsl-replicas.md): every pom-mds and pom-mdsl gets `--mdsl-replicas
 * R` (an MDSL catches up from its peers by it). It is a setting of the
 * cluster, kept in DIR/mdsl-replicas, so a later `up` without the option
 * starts the daemons alike. Default: 1.
 *
 * Start order R2 -> MDSL -> MDS (-> pomfs); stop order is the reverse, so
 * an MDS can still write back to its MDSL and every site can still tell R2
 * it leaves.
 *
 * Invariants:
 *  (1) `up` returns 0 only when every daemon it needs answers: R2 serves
 *      get_view and every storage/metadata daemon is in the view, UP.
 *  (2) A failed `up` stops exactly what it started itself (by pid, see
 *      pomctl_proc.h), leaving daemons that were already running alone.
 *  (3) A pid file is written right after the fork, before waiting for the
 *      daemon, so `down` can stop a daemon even if `up` was interrupted.
 *  (4) up and down on one folder exclude each other (flock on DIR/run/lock).
 */
#include "pomctl_i.h"
#include "pomctl_proc.h"

#include "xt_common.h"

#include <assert.h>
#include <dirent.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define UP_DEADLINE_MS 60000     /* per daemon: ASan builds start slowly */
#define DOWN_GRACE_MS 10000
#define DEFAULT_FS "pomfs"

#define MDS_INSTANCES_MAX 16
#define MDSL_INSTANCES_MAX 16
#define MDSL_REPLICAS_MAX 5 /* pom-mds's MDS_REPLICAS_MAX */

struct daemon {
    const char *name;        /* names its files (and is the executable's name
                                unless prog is set) */
    const char *prog;        /* executable name; NULL: name */
    int site_type;           /* what it registers as; 0: R2 itself */
    const char *data_sub;    /* its folder under DIR */
    bool required;
    bool with_dir;           /* takes --dir DIR/data_sub */
    /* filled by up */
    char exe[PATH_MAX];
    bool found, running, started;
    bool skipped;            /* found but cannot join (too old) */
    pid_t pid;
    int port;
};

struct updir {
    char dir[PATH_MAX];
    int lockfd;
    int mdsl_replicas; /* every pom-mds gets --mdsl-replicas this (> 1) */
};

static FILE *out_stream(const struct pomctl *ctl)
{
    return ctl->json ? stderr : stdout; /* --json: stdout holds only JSON */
}

/* snprintf into a PATH_MAX buffer. Paths cannot be cut: open_dir refuses
 * a folder longer than DIR_MAX, which leaves room for every name below. */
#define DIR_MAX (PATH_MAX - 256)
static void joinf(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void joinf(char *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
}

static void pathf(char *out, const struct updir *d, const char *sub, const char *name,
                  const char *ext)
{
    joinf(out, "%s/%s/%s%s", d->dir, sub, name, ext);
}


#define MOUNT_OPTS_MAX 400

/* Parses "--OPT N" or "--OPT=N" at argv[*i] (advancing *i past N) into
 * *out within 1..max. -ENOENT: not this option; 0: parsed; else an exit
 * code. */
static int parse_count(struct pomctl *ctl, const char *cmd, const char *opt, int max, int argc,
                       char **argv, int *i, int *out)
{
    const char *a = argv[*i];
    size_t n = strlen(opt);
    if (strncmp(a, opt, n) || (a[n] != '=' && a[n] != '\0'))
        return -ENOENT;
    const char *v = a[n] == '=' ? a + n + 1 : *i + 1 < argc ? argv[++*i] : "";
    char *end = NULL;
    long k = strtol(v, &end, 10);
    if (!*v || *end || k < 1 || k > max)
        return pomctl_usage_err(ctl, cmd, "%s wants a number in 1..%d", opt, max);
    *out = (int)k;
    return 0;
}

/* Parses "--data DIR", "--mount DIR" and "-o OPTS" (mount NULL: not
 * accepted) and "--mds N", "--mdsl N", "--mdsl-replicas R" (nmds NULL:
 * none accepted; *replicas stays 0 unless given). */
static int parse_dirs(struct pomctl *ctl, const char *cmd, int argc, char **argv, const char **data,
                      const char **mount, const char **mopts, int *nmds, int *nmdsl,
                      int *replicas)
{
    assert(!nmds == !nmdsl && !nmds == !replicas);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], **dst = NULL;
        size_t n = 0;
        if (mount && !strcmp(a, "-o")) {
            if (i + 1 >= argc || !*argv[i + 1] || strchr(argv[i + 1], ' ') ||
                strlen(argv[i + 1]) > MOUNT_OPTS_MAX)
                return pomctl_usage_err(ctl, cmd, "-o wants pomfs -o options "
                                                  "(at most %d characters)", MOUNT_OPTS_MAX);
            *mopts = argv[++i];
            continue;
        }
        int rc = -ENOENT;
        if (nmds && (rc = parse_count(ctl, cmd, "--mds", MDS_INSTANCES_MAX, argc, argv, &i,
                                      nmds)) == -ENOENT)
            rc = parse_count(ctl, cmd, "--mdsl", MDSL_INSTANCES_MAX, argc, argv, &i, nmdsl);
        if (nmds && rc == -ENOENT)
            rc = parse_count(ctl, cmd, "--mdsl-replicas", MDSL_REPLICAS_MAX, argc, argv, &i,
                             replicas);
        if (rc != -ENOENT) {
            if (rc)
                return rc;
            continue;
        }
        if (!strncmp(a, "--data", n = 6))
            dst = data;
        else if (mount && !strncmp(a, "--mount", n = 7))
            dst = mount;
        if (dst && a[n] == '=')
            *dst = a + n + 1;
        else if (dst && a[n] == '\0' && i + 1 < argc)
            *dst = argv[++i];
        else if (dst && a[n] == '\0')
            return pomctl_usage_err(ctl, cmd, "%s wants a folder", a);
        else
            return pomctl_usage_err(ctl, cmd, "unexpected argument '%s' for %s", a, cmd);
        if (!**dst)
            return pomctl_usage_err(ctl, cmd, "%s wants a folder", a);
    }
    return 0;
}

/* d->mdsl_replicas: `given` (> 0), saved in DIR/mdsl-replicas, or what
 * that file says, or 1. 0 or an exit code. */
static int mdsl_replicas_setting(struct updir *d, int given)
{
    char f[PATH_MAX];
    joinf(f, "%s/mdsl-replicas", d->dir);
    d->mdsl_replicas = 1;
    if (given > 0) {
        FILE *o = fopen(f, "we");
        if (!o || fprintf(o, "%d\n", given) < 0 || fclose(o) != 0) {
            fprintf(stderr, "pomctl: cannot write %s: %s\n", f, strerror(errno));
            return POMCTL_EFAIL;
        }
        d->mdsl_replicas = given;
        return 0;
    }
    FILE *i = fopen(f, "re");
    if (!i)
        return 0;
    int v = 0;
    bool ok = fscanf(i, "%d", &v) == 1 && v >= 1 && v <= MDSL_REPLICAS_MAX;
    fclose(i);
    if (!ok) {
        fprintf(stderr, "pomctl: %s does not hold a number in 1..%d\n", f, MDSL_REPLICAS_MAX);
        return POMCTL_EFAIL;
    }
    d->mdsl_replicas = v;
    return 0;
}

/* Resolves DIR (command option, global --data, ~/.pomegranate), creates it
 * when `create`, makes it absolute, takes the lock. 0 or an exit code;
 * -ENOENT (as 1) when !create and it does not exist. */
static int open_dir(struct pomctl *ctl, const char *data, bool create, struct updir *d)
{
    char want[PATH_MAX];
    d->lockfd = -1;
    if (!data)
        data = ctl->data_dir;
    if (!data) {
        if (pomctl_default_data_dir(want, sizeof want) < 0) {
            fprintf(stderr, "pomctl: HOME is not set; give --data DIR\n");
            return POMCTL_EUSAGE;
        }
        data = want;
    }
    if (strlen(data) > DIR_MAX) {
        fprintf(stderr, "pomctl: the folder %s is too long a path\n", data);
        return POMCTL_EUSAGE;
    }
    int rc = 0;
    if (create) {
        char sub[PATH_MAX];
        static const char *const subs[] = { "run", "logs", "ports" };
        for (size_t i = 0; i < XT_ARRAY_SIZE(subs) && rc == 0; i++) {
            joinf(sub, "%s/%s", data, subs[i]);
            rc = pomctl_mkdirs(sub);
        }
        if (rc < 0) {
            fprintf(stderr, "pomctl: cannot create %s: %s\n", data, strerror(-rc));
            return POMCTL_EFAIL;
        }
    }
    if (!realpath(data, d->dir)) {
        if (errno == ENOENT && !create)
            return -ENOENT;
        fprintf(stderr, "pomctl: cannot use %s: %s\n", data, strerror(errno));
        return POMCTL_EFAIL;
    }
    if (strlen(d->dir) > DIR_MAX) {
        fprintf(stderr, "pomctl: the folder %s is too long a path\n", data);
        return POMCTL_EUSAGE;
    }
    char lock[PATH_MAX];
    pathf(lock, d, "run", "lock", "");
    d->lockfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (d->lockfd < 0 && !create && errno == ENOENT)
        return -ENOENT;
    if (d->lockfd < 0 || flock(d->lockfd, LOCK_EX) < 0) {
        fprintf(stderr, "pomctl: cannot lock %s: %s\n", lock, strerror(errno));
        return POMCTL_EFAIL;
    }
    return 0;
}

static void close_dir(struct updir *d)
{
    if (d->lockfd >= 0)
        close(d->lockfd); /* releases the flock */
    d->lockfd = -1;
}

/* Prints the last lines of a log, indented, to stderr. */
static void tail_log(const char *log, int lines)
{
    FILE *f = fopen(log, "re");
    if (!f)
        return;
    char ring[16][512];
    int n = 0;
    while (fgets(ring[n % 16], sizeof ring[0], f))
        n++;
    fclose(f);
    if (lines > 16)
        lines = 16;
    for (int i = n > lines ? n - lines : 0; i < n; i++) {
        char *l = ring[i % 16];
        l[strcspn(l, "\n")] = '\0';
        fprintf(stderr, "    | %s\n", l);
    }
}

/* A daemon from this folder that still runs: its pid file names a live
 * process running the same executable. */
static bool is_running(const struct updir *d, struct daemon *dm)
{
    char pidf[PATH_MAX], exe[PATH_MAX], portf[PATH_MAX];
    pathf(pidf, d, "run", dm->name, ".pid");
    pid_t pid;
    if (pomctl_pidfile_read(pidf, &pid, exe, sizeof exe) < 0 || pomctl_proc_owns(pid, exe) != 1)
        return false;
    pathf(portf, d, "run", dm->name, ".port");
    long port;
    if (pomctl_read_long_file(portf, &port) < 0 || port <= 0 || port > 65535)
        return false;
    dm->pid = pid;
    dm->port = (int)port;
    snprintf(dm->exe, sizeof dm->exe, "%s", exe);
    return true;
}

/* Why a daemon did not come up, with its log. Returns POMCTL_EFAIL. */
static int daemon_failed(const struct updir *d, const struct daemon *dm, const char *why)
{
    char log[PATH_MAX];
    pathf(log, d, "logs", dm->name, ".log");
    fprintf(stderr, "pomctl: %s %s; see %s:\n", dm->name, why, log);
    tail_log(log, 8);
    return POMCTL_EFAIL;
}

/* Whether `exe --help` mentions `opt`: the daemons grow their options
 * while the project is built, and an option a daemon refuses would make it
 * exit at once. */
static bool exe_supports(const struct updir *d, const char *exe, const char *opt)
{
    char out[PATH_MAX];
    pathf(out, d, "run", "help", ".txt");
    unlink(out);
    char *argv[] = { (char *)exe, (char *)"--help", NULL };
    pid_t pid = pomctl_proc_spawn(argv, out);
    if (pid < 0)
        return false;
    int st;
    for (int i = 0; i < 100 && pomctl_proc_reap(pid, &st) == 0; i++)
        xt_sleep_ms(50);
    bool ok = false;
    FILE *f = fopen(out, "re");
    char line[512];
    size_t n = strlen(opt);
    while (f && !ok && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, opt);
        ok = p && (p[n] == ' ' || p[n] == '=' || p[n] == '\n');
    }
    if (f)
        fclose(f);
    unlink(out);
    bool sig;
    pomctl_proc_stop(pid, exe, 100, &sig); /* only if it hung */
    return ok;
}

#define POMCTL_RETRY_PORT (-1000) /* spawn_wait: exited at once on a sticky port */

/* Every daemon's data shares DIR's device, so a slice image (a whole slice,
 * rewritten as the slice changes) is kept a small part of it: a 32 MiB
 * slice on a 64 MiB disk leaves no room for its next image and makes the
 * deletes of a full disk free nothing until then (docs/format-mdsl.md "A
 * full disk"). A 64th of the device, within [64 KiB, 32 MiB] (the MDS's
 * default); 0 when the device is not known. */
static unsigned long long split_bytes_for(const char *dir)
{
    struct statvfs sv;
    if (statvfs(dir, &sv) < 0)
        return 0;
    unsigned long long dev = (unsigned long long)sv.f_blocks * sv.f_frsize / 64;
    return dev < (64ull << 10) ? 64ull << 10 : dev > (32ull << 20) ? 32ull << 20 : dev;
}

/* Forks the daemon listening on 127.0.0.1:port (0: any), records its pid
 * (invariant 3), waits for its port. With a sticky port, an exit while
 * starting answers POMCTL_RETRY_PORT quietly (the port may be taken). */
static int spawn_wait(struct pomctl *ctl, const struct updir *d, struct daemon *dm,
                      const char *r2addr, int port)
{
    char data[PATH_MAX], portf[PATH_MAX], pidf[PATH_MAX], log[PATH_MAX], metricsf[PATH_MAX];
    if (dm->data_sub[0])
        joinf(data, "%s/%s", d->dir, dm->data_sub);
    else
        joinf(data, "%s", d->dir); /* pom-r2 --data DIR keeps its store in DIR/r2 */
    pathf(portf, d, "run", dm->name, ".port");
    pathf(pidf, d, "run", dm->name, ".pid");
    pathf(log, d, "logs", dm->name, ".log");
    pathf(metricsf, d, "run", dm->name, ".metrics");
    int rc = pomctl_mkdirs(data);
    if (rc < 0) {
        fprintf(stderr, "pomctl: cannot create %s: %s\n", data, strerror(-rc));
        return POMCTL_EFAIL;
    }
    unlink(portf); /* a stale port must not pass for the new one */
    unlink(metricsf);
    char *argv[20], keyf[PATH_MAX];
    int a = 0;
    argv[a++] = dm->exe;
    joinf(keyf, "%s/%s", d->dir, XT_AUTH_KEY_FILE);
    argv[a++] = (char *)"--key-file";
    argv[a++] = keyf;
    if (dm->site_type == 0 || dm->with_dir) {
        argv[a++] = dm->site_type == 0 ? (char *)"--data" : (char *)"--dir";
        argv[a++] = data;
    }
    char listen[32];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    argv[a++] = (char *)"--listen";
    argv[a++] = listen;
    argv[a++] = (char *)"--port-file";
    argv[a++] = portf;
    argv[a++] = (char *)"--metrics-listen";
    argv[a++] = (char *)"127.0.0.1:0";
    argv[a++] = (char *)"--metrics-file";
    argv[a++] = metricsf;
    if (r2addr) {
        argv[a++] = (char *)"--r2";
        argv[a++] = (char *)r2addr;
    }
    char reps[16];
    if ((dm->site_type == XT_SITE_MDS || dm->site_type == XT_SITE_MDSL) &&
        d->mdsl_replicas > 1) {
        snprintf(reps, sizeof reps, "%d", d->mdsl_replicas);
        argv[a++] = (char *)"--mdsl-replicas";
        argv[a++] = reps;
    }
    char split[32];
    unsigned long long sb = dm->site_type == XT_SITE_MDS ? split_bytes_for(d->dir) : 0;
    if (sb) {
        snprintf(split, sizeof split, "%llu", sb);
        argv[a++] = (char *)"--split-bytes";
        argv[a++] = split;
    }
    argv[a] = NULL;
    assert(a < (int)(sizeof argv / sizeof argv[0]));

    FILE *lf = fopen(log, "ae");
    if (lf) {
        char when[40];
        fprintf(lf, "=== pomctl up: starting %s at %s ===\n", dm->exe,
                pomctl_fmt_time(xt_now_ns(), when, sizeof when));
        fclose(lf);
    }
    pid_t pid = pomctl_proc_spawn(argv, log);
    if (pid < 0) {
        fprintf(stderr, "pomctl: cannot start %s: %s\n", dm->exe, strerror(-pid));
        return POMCTL_EFAIL;
    }
    dm->pid = pid;
    dm->started = true;
    if ((rc = pomctl_pidfile_write(pidf, pid, dm->exe)) < 0)
        fprintf(stderr, "pomctl: warning: cannot write %s: %s\n", pidf, strerror(-rc));
    fprintf(out_stream(ctl), "started %-8s pid %ld, log %s\n", dm->name, (long)pid, log);

    for (uint64_t end = xt_deadline_ms(UP_DEADLINE_MS);; xt_sleep_ms(50)) {
        int status;
        if (pomctl_proc_reap(pid, &status) == 1) {
            char why[96];
            if (WIFEXITED(status))
                snprintf(why, sizeof why, "exited with status %d while starting",
                         WEXITSTATUS(status));
            else
                snprintf(why, sizeof why, "died (signal %d) while starting", WTERMSIG(status));
            dm->started = false;
            unlink(pidf);
            if (port)
                return POMCTL_RETRY_PORT;
            return daemon_failed(d, dm, why);
        }
        long got;
        if (pomctl_read_long_file(portf, &got) == 0 && got > 0 && got <= 65535) {
            dm->port = (int)got;
            return 0;
        }
        if (xt_deadline_passed(end))
            return daemon_failed(d, dm, "did not start listening within 60 s");
    }
}

/* Starts a daemon on the port it had the last time (DIR/ports/<daemon>,
 * kept by `down`), so a daemon restarted after a crash or a `down` is found
 * where every client, mount and peer already looks for it; a port taken
 * meanwhile falls back to a new one (then clients learn it from R2; a new
 * R2 address reaches only new clients). */
static int start_daemon(struct pomctl *ctl, const struct updir *d, struct daemon *dm,
                        const char *r2addr)
{
    char stickyf[PATH_MAX], line[16];
    pathf(stickyf, d, "ports", dm->name, "");
    long last = 0;
    if (pomctl_read_long_file(stickyf, &last) < 0 || last <= 0 || last > 65535)
        last = 0;
    int rc = spawn_wait(ctl, d, dm, r2addr, (int)last);
    if (rc == POMCTL_RETRY_PORT) {
        fprintf(out_stream(ctl), "%s could not listen on its last port %ld; using a new one\n",
                dm->name, last);
        rc = spawn_wait(ctl, d, dm, r2addr, 0);
    }
    if (rc == 0 && dm->port != last) {
        snprintf(line, sizeof line, "%d\n", dm->port);
        int w = pomctl_write_text_file(stickyf, line);
        if (w < 0)
            fprintf(stderr, "pomctl: warning: cannot write %s: %s\n", stickyf, strerror(-w));
    }
    return rc;
}

/* Waits until R2 answers get_view (site_type 0) or the daemon's site is UP
 * in the view. Checks the daemon is alive while waiting. */
static int wait_ready(struct pomctl *ctl, const struct updir *d, struct daemon *dm)
{
    char suffix[16];
    snprintf(suffix, sizeof suffix, ":%d", dm->port);
    int last_rc = 0, last_state = 0;
    for (uint64_t end = xt_deadline_ms(UP_DEADLINE_MS);; xt_sleep_ms(100)) {
        int status;
        if (dm->started && pomctl_proc_reap(dm->pid, &status) == 1) {
            dm->started = false;
            char pidf[PATH_MAX];
            pathf(pidf, d, "run", dm->name, ".pid");
            unlink(pidf);
            return daemon_failed(d, dm, "exited while starting");
        }
        if (!dm->started && !pomctl_proc_alive(dm->pid))
            return daemon_failed(d, dm, "exited");
        struct xt_view v;
        int rc = pomctl_r2_view(ctl, false, &v);
        if (rc == 0) {
            bool ok = dm->site_type == 0;
            for (size_t i = 0; i < v.nsites && !ok; i++) {
                const struct xt_site *s = &v.sites[i];
                size_t al = strlen(s->addr), sl = strlen(suffix);
                if (s->type != dm->site_type || al < sl || strcmp(s->addr + al - sl, suffix))
                    continue;
                last_state = s->state;
                ok = s->state == XT_SITE_UP;
            }
            xt_view_free(&v);
            if (ok)
                return 0;
        }
        last_rc = rc;
        if (xt_deadline_passed(end)) {
            char why[160];
            if (dm->site_type == 0)
                snprintf(why, sizeof why, "does not answer on port %d within 60 s (%s)", dm->port,
                         strerror(-last_rc));
            else if (last_rc < 0)
                snprintf(why, sizeof why, "could not be checked: R2 does not answer (%s)",
                         strerror(-last_rc));
            else
                snprintf(why, sizeof why, "did not register with R2 as up within 60 s (%s)",
                         last_state ? xt_site_state_name(last_state) : "not in the view");
            return daemon_failed(d, dm, why);
        }
    }
}

/* Stops what this `up` started, newest first (invariant 2). */
static void undo(const struct updir *d, struct daemon *dms, size_t n)
{
    for (size_t k = n; k-- > 0;) {
        struct daemon *dm = &dms[k];
        if (!dm->started)
            continue;
        bool sig;
        pomctl_proc_stop(dm->pid, dm->exe, DOWN_GRACE_MS, &sig);
        char f[PATH_MAX];
        pathf(f, d, "run", dm->name, ".pid");
        unlink(f);
        pathf(f, d, "run", dm->name, ".port");
        unlink(f);
        pathf(f, d, "run", dm->name, ".metrics");
        unlink(f);
        fprintf(stderr, "pomctl: stopped %s (pid %ld) again\n", dm->name, (long)dm->pid);
        dm->started = false;
    }
}

/* Records where R2 is: DIR/r2.addr. Nothing outside DIR is written: the
 * default folder's r2.addr and cluster.key belong to the default cluster,
 * which another cluster's `up` must not redirect (docs/pomctl.md "pomctl
 * up"). */
static void record_addr(const struct updir *d, const char *addr)
{
    char path[PATH_MAX], line[XT_ADDR_MAX + 2];
    snprintf(line, sizeof line, "%s\n", addr);
    joinf(path, "%s/r2.addr", d->dir);
    int rc = pomctl_write_text_file(path, line);
    if (rc < 0)
        fprintf(stderr, "pomctl: warning: cannot write %s: %s\n", path, strerror(-rc));
}

/* Creates fs 'pomfs' when no fs exists. *created says whether it did. */
static int ensure_fs(struct pomctl *ctl, const struct updir *d, bool *created)
{
    *created = false;
    struct xt_fs_info *fs = NULL;
    size_t n = 0;
    int rc = pomctl_r2_leader(ctl);
    xt_rpc_call call = pomctl_call(ctl);
    if (rc == 0)
        rc = xt_r2_fs_list(ctl->pool, &call, "", &fs, &n);
    xt_fs_info_free_array(fs, n);
    if (rc < 0)
        return pomctl_fail(ctl, rc, "up: fs list", NULL);
    if (n > 0)
        return 0;
    char blobs[PATH_MAX];
    joinf(blobs, "%s/blobs", d->dir);
    if ((rc = pomctl_mkdirs(blobs)) < 0) {
        fprintf(stderr, "pomctl: cannot create %s: %s\n", blobs, strerror(-rc));
        return POMCTL_EFAIL;
    }
    struct xt_fs_info info;
    memset(&info, 0, sizeof info);
    call = pomctl_call(ctl);
    rc = xt_r2_fs_create(ctl->pool, &call, DEFAULT_FS, "local", blobs, &info);
    xt_free(info.root_bitmap);
    if (rc == -EEXIST)
        return 0; /* created meanwhile */
    if (rc < 0)
        return pomctl_fail(ctl, rc, "up: fs create " DEFAULT_FS, NULL);
    *created = true;
    return 0;
}

/* Starts pomfs on mnt unless it is mounted. 0, or an exit code (5 when
 * pomfs is not found). */
static int mount_fs(struct pomctl *ctl, const struct updir *d, const char *self_dir,
                    const char *addr, const char *mnt, const char *mopts, struct daemon *fsd,
                    char *mnt_abs)
{
    if (pomctl_mkdirs(mnt) < 0 || !realpath(mnt, mnt_abs)) {
        fprintf(stderr, "pomctl: cannot use mount point %s: %s\n", mnt, strerror(errno));
        return POMCTL_EFAIL;
    }
    if (pomctl_find_exe("pomfs", getenv("POM_BIN_DIR"), self_dir, getenv("PATH"), fsd->exe,
                        sizeof fsd->exe) < 0) {
        fprintf(stderr, "pomctl: cannot find the FUSE client (pomfs; build it or set "
                        "POM_BIN_DIR): the cluster runs, but %s is not mounted\n",
                mnt_abs);
        return POMCTL_EPARTIAL;
    }
    fsd->found = true;
    if (pomctl_is_mounted(mnt_abs)) {
        fprintf(out_stream(ctl), "%s is already mounted\n", mnt_abs);
        return 0;
    }
    char pidf[PATH_MAX], log[PATH_MAX], mfile[PATH_MAX], metricsf[PATH_MAX];
    pathf(pidf, d, "run", fsd->name, ".pid");
    pathf(log, d, "logs", fsd->name, ".log");
    pathf(mfile, d, "run", "mount", "");
    pathf(metricsf, d, "run", fsd->name, ".metrics");
    unlink(metricsf);
    /* -f: stay in the foreground so the pid we record is the mount's. Root's
     * mount serves every user (allow_other; pomfs always adds
     * default_permissions, so the kernel checks each user's permissions);
     * another user's cannot without user_allow_other in /etc/fuse.conf. */
    char o[MOUNT_OPTS_MAX + 2 * PATH_MAX + 128];
    snprintf(o, sizeof o,
             "fs=" DEFAULT_FS ",keyfile=%s/%s,metrics=127.0.0.1:0,metrics_file=%s%s%s%s",
             d->dir, XT_AUTH_KEY_FILE, metricsf, geteuid() == 0 ? ",allow_other" : "",
             mopts ? "," : "", mopts ? mopts : "");
    char *argv[] = { fsd->exe, (char *)addr, mnt_abs, (char *)"-f", (char *)"-o", o, NULL };
    pid_t pid = pomctl_proc_spawn(argv, log);
    if (pid < 0) {
        fprintf(stderr, "pomctl: cannot start %s: %s\n", fsd->exe, strerror(-pid));
        return POMCTL_EFAIL;
    }
    fsd->pid = pid;
    fsd->started = true;
    pomctl_pidfile_write(pidf, pid, fsd->exe);
    char line[PATH_MAX + 2];
    snprintf(line, sizeof line, "%s\n", mnt_abs);
    pomctl_write_text_file(mfile, line);
    for (uint64_t end = xt_deadline_ms(UP_DEADLINE_MS);; xt_sleep_ms(100)) {
        int status;
        if (pomctl_proc_reap(pid, &status) == 1) {
            fsd->started = false;
            unlink(pidf);
            unlink(mfile);
            return daemon_failed(d, fsd, "exited before the mount appeared");
        }
        if (pomctl_is_mounted(mnt_abs)) {
            fprintf(out_stream(ctl), "mounted  %s on %s (pid %ld)\n", DEFAULT_FS, mnt_abs,
                    (long)pid);
            return 0;
        }
        if (xt_deadline_passed(end))
            return daemon_failed(d, fsd, "did not mount within 60 s");
    }
}

int pomctl_cmd_up(struct pomctl *ctl, int argc, char **argv)
{
    const char *data = NULL, *mnt = NULL, *mopts = NULL;
    int nmds = 1, nmdsl = 1, replicas = 0;
    int code = parse_dirs(ctl, "up", argc, argv, &data, &mnt, &mopts, &nmds, &nmdsl, &replicas);
    if (code)
        return code;
    struct updir d;
    code = open_dir(ctl, data, true, &d);
    if (code)
        return code < 0 ? POMCTL_EFAIL : code;
    if ((code = mdsl_replicas_setting(&d, replicas)))
        return code;
    /* The cluster key, made once: every daemon, mount and pomctl proves it. */
    char keyf[PATH_MAX];
    joinf(keyf, "%s/%s", d.dir, XT_AUTH_KEY_FILE);
    if ((code = pomctl_use_key(ctl, keyf, true)))
        return code;

    /* In start order: R2, the MDSL, the MDS. Instances 2..N of a daemon
     * have their own names, folders, pid files and ports. */
    struct daemon dms[1 + MDSL_INSTANCES_MAX + MDS_INSTANCES_MAX] = {
        { .name = "pom-r2", .site_type = 0, .data_sub = "", .required = true },
    };
    char inst_name[MDSL_INSTANCES_MAX + MDS_INSTANCES_MAX][24]; /* any int fits */
    char inst_sub[MDSL_INSTANCES_MAX + MDS_INSTANCES_MAX][24];
    size_t ndms = 1;
    for (int k = 1; k <= nmdsl; k++, ndms++) {
        snprintf(inst_name[ndms], sizeof inst_name[0], k == 1 ? "pom-mdsl" : "pom-mdsl-%d", k);
        snprintf(inst_sub[ndms], sizeof inst_sub[0], k == 1 ? "mdsl" : "mdsl-%d", k);
        dms[ndms] = (struct daemon){ .name = inst_name[ndms],
                                     .prog = "pom-mdsl",
                                     .site_type = XT_SITE_MDSL,
                                     .data_sub = inst_sub[ndms],
                                     .required = true,
                                     .with_dir = true };
    }
    const size_t first_mds = ndms;
    for (int k = 1; k <= nmds; k++, ndms++) {
        snprintf(inst_name[ndms], sizeof inst_name[0], k == 1 ? "pom-mds" : "pom-mds-%d", k);
        snprintf(inst_sub[ndms], sizeof inst_sub[0], k == 1 ? "mds" : "mds-%d", k);
        dms[ndms] = (struct daemon){ .name = inst_name[ndms],
                                     .prog = "pom-mds",
                                     .site_type = XT_SITE_MDS,
                                     .data_sub = inst_sub[ndms] };
    }
    assert(ndms <= XT_ARRAY_SIZE(dms));
    struct daemon fsd = { .name = "pomfs", .site_type = XT_SITE_CLIENT };
    char self_dir[PATH_MAX] = "";
    pomctl_self_dir(self_dir, sizeof self_dir);
    for (size_t k = 0; k < ndms; k++) {
        struct daemon *dm = &dms[k];
        dm->running = is_running(&d, dm);
        if (dm->running) {
            dm->found = true;
            continue;
        }
        char path[PATH_MAX];
        const char *prog = dm->prog ? dm->prog : dm->name;
        if (pomctl_find_exe(prog, getenv("POM_BIN_DIR"), self_dir, getenv("PATH"), path,
                            sizeof path) == 0 &&
            realpath(path, dm->exe))
            dm->found = true;
        if (dm->found && !dm->required) {
            /* pom-mds joins only when it can register with R2; it keeps
             * no data of its own unless it says so (--dir). */
            if (!exe_supports(&d, dm->exe, "--r2")) {
                fprintf(stderr, "pomctl: note: %s does not take --r2; starting the "
                                "cluster without an MDS\n", dm->exe);
                dm->found = false;
                dm->skipped = true;
            } else {
                dm->with_dir = exe_supports(&d, dm->exe, "--dir");
            }
        }
        if (!dm->found && dm->required) {
            fprintf(stderr,
                    "pomctl: cannot find the %s executable (looked in $POM_BIN_DIR, %s and its "
                    "../mdsl ../mds ../r2 ../fuse, then PATH) \xe2\x80\x94 build it first "
                    "(cmake --build BUILD --target %s) or set POM_BIN_DIR\n",
                    prog, self_dir[0] ? self_dir : "pomctl's folder", prog);
            close_dir(&d);
            return POMCTL_EFAIL;
        }
    }

    char addr[XT_ADDR_MAX] = "";
    bool fs_created = false;
    code = 0;
    for (size_t k = 0; k < ndms && code == 0; k++) {
        struct daemon *dm = &dms[k];
        if (!dm->found)
            continue;
        if (!dm->running)
            code = start_daemon(ctl, &d, dm, k == 0 ? NULL : addr);
        if (code == 0 && k == 0) {
            /* Every later call goes to this R2 alone. */
            snprintf(addr, sizeof addr, "127.0.0.1:%d", dm->port);
            for (size_t i = 0; i < ctl->naddrs; i++)
                xt_free(ctl->addrs[i]);
            ctl->naddrs = 0;
            if (!(ctl->addrs[0] = xt_strdup(addr)))
                code = POMCTL_EFAIL;
            else
                ctl->naddrs = 1;
        }
        if (code == 0)
            code = wait_ready(ctl, &d, dm);
        if (code == 0 && k == 0)
            record_addr(&d, addr);
    }
    bool any_started = false;
    for (size_t k = first_mds; k < ndms; k++)
        any_started |= dms[k].started;
    if (code == 0 && nmds > 1 && any_started)
        xt_sleep_ms(2500); /* every MDS takes the final ring 0 from a heartbeat */
    if (code == 0)
        code = ensure_fs(ctl, &d, &fs_created);
    if (code) {
        undo(&d, dms, ndms);
        close_dir(&d);
        if (ctl->json && !ctl->json_done)
            pomctl_json_error(ctl, code, "up failed; see the messages on stderr", 0);
        return code;
    }
    bool already = true;
    for (size_t k = 0; k < ndms; k++)
        already &= !dms[k].started;
    char mnt_abs[PATH_MAX] = "";
    if (mnt) {
        code = mount_fs(ctl, &d, self_dir, addr, mnt, mopts, &fsd, mnt_abs);
        if (code == POMCTL_EFAIL) {
            undo(&d, &fsd, 1);
            undo(&d, dms, ndms);
            close_dir(&d);
            if (ctl->json)
                pomctl_json_error(ctl, code, "up --mount failed; see the messages on stderr", 0);
            return code;
        }
    }
    FILE *o = out_stream(ctl);
    if (already)
        fprintf(o, "the cluster in %s is already running (R2 at %s)\n", d.dir, addr);
    else
        fprintf(o, "cluster up in %s: R2 at %s%s\n", d.dir, addr,
                dms[first_mds].found     ? ""
                : dms[first_mds].skipped ? " (this pom-mds takes no --r2: no metadata server)"
                                         : " (pom-mds not found: no metadata server)");
    if (fs_created)
        fprintf(o, "created file system '%s'\n", DEFAULT_FS);
    fprintf(o, "stop it with: pomctl down --data %s\n", d.dir);

    if (ctl->json) {
        pomctl_json *j = &ctl->js;
        pomctl_json_init(j, stdout, true);
        pomctl_json_obj_begin(j, NULL);
        pomctl_json_bool(j, "ok", code == 0);
        pomctl_json_i64(j, "exit", code);
        pomctl_json_str(j, "data", d.dir);
        pomctl_json_str(j, "r2", addr);
        pomctl_json_bool(j, "already_running", already);
        pomctl_json_arr_begin(j, "daemons");
        for (size_t k = 0; k < ndms + 1; k++) {
            const struct daemon *dm = k < ndms ? &dms[k] : &fsd;
            if (!dm->found || (k == ndms && !fsd.pid))
                continue;
            char log[PATH_MAX], a[32];
            pathf(log, &d, "logs", dm->name, ".log");
            pomctl_json_obj_begin(j, NULL);
            pomctl_json_str(j, "name", dm->name);
            pomctl_json_i64(j, "pid", dm->pid);
            snprintf(a, sizeof a, "127.0.0.1:%d", dm->port);
            pomctl_json_str(j, "addr", dm->port ? a : NULL);
            pomctl_json_bool(j, "started", dm->started);
            pomctl_json_str(j, "log", log);
            pomctl_json_obj_end(j);
        }
        pomctl_json_arr_end(j);
        pomctl_json_bool(j, "fs_created", fs_created);
        if (mnt_abs[0])
            pomctl_json_str(j, "mount", mnt_abs);
        else
            pomctl_json_null(j, "mount");
        pomctl_json_obj_end(j);
        pomctl_json_finish(j);
    }
    close_dir(&d);
    return code;
}

/* ---- down ------------------------------------------------------------- */

/* Stop order: the client, then the reverse of the start order, then
 * whatever else was recorded (alphabetically). */
static int down_rank(const char *name)
{
    static const char *const order[] = { "pomfs", "pom-mds", "pom-mdsl", "pom-r2" };
    if (!strncmp(name, "pom-mds-", 8))
        return 1; /* the other MDS instances stop with the first */
    if (!strncmp(name, "pom-mdsl-", 9))
        return 2; /* so do the other MDSL */
    for (size_t i = 0; i < XT_ARRAY_SIZE(order); i++)
        if (!strcmp(name, order[i]))
            return (int)i;
    return (int)XT_ARRAY_SIZE(order);
}

static int cmp_names(const void *a, const void *b)
{
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int rx = down_rank(x), ry = down_rank(y);
    return rx != ry ? rx - ry : strcmp(x, y);
}

static void unmount(struct pomctl *ctl, const struct updir *d)
{
    char mfile[PATH_MAX], mnt[PATH_MAX];
    pathf(mfile, d, "run", "mount", "");
    if (pomctl_read_line_file(mfile, mnt, sizeof mnt) < 0)
        return;
    if (pomctl_is_mounted(mnt)) {
        char exe[PATH_MAX], log[PATH_MAX];
        pathf(log, d, "logs", "pomfs", ".log");
        if (pomctl_find_exe("fusermount3", NULL, NULL, getenv("PATH"), exe, sizeof exe) < 0) {
            fprintf(stderr, "pomctl: fusermount3 not found; stopping pomfs unmounts %s\n", mnt);
        } else {
            char *argv[] = { exe, (char *)"-u", mnt, NULL };
            pid_t pid = pomctl_proc_spawn(argv, log);
            int st = -1;
            if (pid > 0)
                waitpid(pid, &st, 0);
            if (pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
                fprintf(out_stream(ctl), "unmounted %s\n", mnt);
            else
                fprintf(stderr, "pomctl: fusermount3 -u %s failed (busy?); see %s\n", mnt, log);
        }
    }
    unlink(mfile);
}

int pomctl_cmd_down(struct pomctl *ctl, int argc, char **argv)
{
    const char *data = NULL;
    int code = parse_dirs(ctl, "down", argc, argv, &data, NULL, NULL, NULL, NULL, NULL);
    if (code)
        return code;
    struct updir d;
    code = open_dir(ctl, data, false, &d);
    if (code == -ENOENT) {
        fprintf(out_stream(ctl), "nothing to stop: %s has no cluster\n",
                data ? data : ctl->data_dir ? ctl->data_dir : "~/.pomegranate");
        if (ctl->json) {
            pomctl_json_init(&ctl->js, stdout, true);
            pomctl_json_obj_begin(&ctl->js, NULL);
            pomctl_json_bool(&ctl->js, "ok", true);
            pomctl_json_arr_begin(&ctl->js, "stopped");
            pomctl_json_arr_end(&ctl->js);
            pomctl_json_obj_end(&ctl->js);
            pomctl_json_finish(&ctl->js);
        }
        return POMCTL_OK;
    }
    if (code)
        return code;
    unmount(ctl, &d);

    char run[PATH_MAX];
    joinf(run, "%s/run", d.dir);
    char *names[64];
    size_t n = 0;
    DIR *dir = opendir(run);
    for (struct dirent *e; dir && (e = readdir(dir)) && n < XT_ARRAY_SIZE(names);) {
        size_t len = strlen(e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".pid") && e->d_name[0] != '.') {
            if (!(names[n] = xt_strdup(e->d_name)))
                break;
            names[n][len - 4] = '\0';
            n++;
        }
    }
    if (dir)
        closedir(dir);
    qsort(names, n, sizeof names[0], cmp_names);

    if (ctl->json) {
        pomctl_json_init(&ctl->js, stdout, true);
        pomctl_json_obj_begin(&ctl->js, NULL);
        pomctl_json_str(&ctl->js, "data", d.dir);
        pomctl_json_arr_begin(&ctl->js, "stopped");
    }
    FILE *o = out_stream(ctl);
    size_t left = 0;
    for (size_t i = 0; i < n; i++) {
        char pidf[PATH_MAX], portf[PATH_MAX], metricsf[PATH_MAX], exe[PATH_MAX];
        pathf(pidf, &d, "run", names[i], ".pid");
        pathf(portf, &d, "run", names[i], ".port");
        pathf(metricsf, &d, "run", names[i], ".metrics");
        pid_t pid = 0;
        int rc = pomctl_pidfile_read(pidf, &pid, exe, sizeof exe);
        const char *what;
        bool gone = true, sig = false;
        if (rc < 0) {
            fprintf(stderr, "pomctl: ignoring unreadable %s: %s\n", pidf, strerror(-rc));
            what = "bad pid file";
        } else if ((rc = pomctl_proc_owns(pid, exe)) != 1) {
            what = pomctl_proc_alive(pid) ? "pid reused by another program: left alone"
                                          : "was not running";
        } else if ((rc = pomctl_proc_stop(pid, exe, DOWN_GRACE_MS, &sig)) < 0) {
            what = "survived SIGKILL";
            gone = false;
        } else {
            what = "stopped";
        }
        if (gone) {
            unlink(pidf);
            unlink(portf);
            unlink(metricsf);
        } else {
            left++;
        }
        fprintf(gone ? o : stderr, "%s%-8s pid %ld: %s\n", gone ? "" : "pomctl: ", names[i],
                (long)pid, what);
        if (ctl->json) {
            pomctl_json_obj_begin(&ctl->js, NULL);
            pomctl_json_str(&ctl->js, "name", names[i]);
            pomctl_json_i64(&ctl->js, "pid", pid);
            pomctl_json_str(&ctl->js, "result", what);
            pomctl_json_bool(&ctl->js, "signalled", sig);
            pomctl_json_bool(&ctl->js, "gone", gone);
            pomctl_json_obj_end(&ctl->js);
        }
        xt_free(names[i]);
    }
    if (n == 0)
        fprintf(o, "nothing was running in %s\n", d.dir);
    if (ctl->json) {
        pomctl_json_arr_end(&ctl->js);
        pomctl_json_bool(&ctl->js, "ok", left == 0);
        pomctl_json_obj_end(&ctl->js);
        pomctl_json_finish(&ctl->js);
    }
    close_dir(&d);
    return left ? POMCTL_EFAIL : POMCTL_OK;
}
