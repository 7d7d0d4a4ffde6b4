/*
 * pomfs.c -- the FUSE daemon of Pomegranate (docs/client.md "pomfs"):
 *
 *   pomfs NAME@R2ADDR MOUNTPOINT [-o options] [-f] [-d] [-s]
 *   pomfs R2ADDR  MOUNTPOINT -o fs=NAME[,attr_timeout=S,entry_timeout=S,blob=DIR,
 *                 rados_pool=P,ceph_conf=F,rados_id=I,rados_keyring=K,
 *                 reclaim=S,reclaim_grace=S,soft,timeout=S]
 *   pomfs MDSADDR MOUNTPOINT -o fsid=N[,...]   (one MDS, no R2)
 *
 * The first form is also how mount(8) runs it, through the generic helper
 * mount.fuse3 (`mount -t fuse.pomfs NAME@R2ADDR DIR`, fstab): so pomfs takes
 * the options only mount(8) knows (ignored), the atime options libfuse does
 * not know (ignored: relatime is the kernel's default, and the kernel
 * leaves a FUSE inode's atime to the file system), and `-o remount`
 * (the kernel changes the mount's flags; the daemon is not involved).
 *
 * (1) No thread exists before the fork to the background: without -f the
 *     process forks first, then opens the fs (the library's R2 agent thread),
 *     mounts and starts its own threads; the parent waits on a pipe and exits
 *     0 once the child has mounted, else with the child's exit status (its
 *     messages went to the same stderr), as mount(8) expects of a helper.
 * (2) Always mounts with `default_permissions`: the kernel checks POSIX
 *     permissions against the attributes pomfs returns (pomegranate.h (4)).
 * (3) The mount's source is NAME@R2ADDR (fsid=N@MDSADDR without R2), so
 *     findmnt tells two fs of one cluster apart.
 * (4) A mount prints nothing on stderr unless it fails, -o verbose (the
 *     library's INFO lines) or -d / -o debug.
 *
 * Runs with libfuse's multi-threaded session loop unless -s. The library
 * connection is made before the mount, so an unreachable MDS fails the
 * command, not the first access. Waiting on an MDS that does not answer is
 * "hard" unless -o soft: see struct pom_opts (pomegranate.h) and
 * docs/client.md "Waiting".
 */
#include "pomfs_i.h"

#include "xt_common.h"

#include <assert.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

struct conf {
    char *addr;             /* the source: R2ADDR, NAME@R2ADDR or MDSADDR */
    char *fsid;             /* -o fsid=N */
    char *fsname;           /* -o fs=NAME (R2) */
    char *blob;             /* -o blob=DIR[:DIR...] (blob tier, local backend) */
    char *rados_pool, *ceph_conf, *rados_id, *rados_keyring; /* -o (rados backend) */
    char *keyfile;          /* -o keyfile=PATH (docs/security.md) */
    char *metrics;          /* -o metrics=HOST:PORT (docs/metrics.md) */
    char *metrics_file;     /* -o metrics_file=PATH: HOST:PORT written there */
    char *tls_ca, *tls_cert, *tls_key; /* -o tls_ca=,tls_cert=,tls_key= (PEM paths) */
    double attr_timeout, entry_timeout;
    unsigned reclaim, reclaim_grace; /* -o reclaim=S,reclaim_grace=S (seconds) */
    int soft;               /* -o soft (1) / -o hard (0, the default) */
    double timeout;         /* -o timeout=S: when a soft mount answers EIO */
    int verbose;            /* -o verbose: the library's INFO lines */
    int remount;            /* -o remount: change the flags of a mount */
    unsigned long ms_flags; /* the MS_* flags the options name (for remount) */
    int help, version;
};

enum { KEY_HELP, KEY_VERSION };

#define OPT(t, p) { t, offsetof(struct conf, p), 1 }
static const struct fuse_opt opt_spec[] = {
    OPT("fsid=%s", fsid),
    OPT("fs=%s", fsname),
    OPT("blob=%s", blob),
    OPT("rados_pool=%s", rados_pool),
    OPT("ceph_conf=%s", ceph_conf),
    OPT("rados_id=%s", rados_id),
    OPT("rados_keyring=%s", rados_keyring),
    OPT("keyfile=%s", keyfile),
    OPT("metrics=%s", metrics),
    OPT("metrics_file=%s", metrics_file),
    OPT("tls_ca=%s", tls_ca),
    OPT("tls_cert=%s", tls_cert),
    OPT("tls_key=%s", tls_key),
    OPT("attr_timeout=%lf", attr_timeout),
    OPT("entry_timeout=%lf", entry_timeout),
    OPT("reclaim=%u", reclaim),
    OPT("reclaim_grace=%u", reclaim_grace),
    { "soft", offsetof(struct conf, soft), 1 },
    { "hard", offsetof(struct conf, soft), 0 },
    OPT("timeout=%lf", timeout),
    OPT("verbose", verbose),
    OPT("remount", remount),
    FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP),
    FUSE_OPT_KEY("-V", KEY_VERSION),
    FUSE_OPT_KEY("--version", KEY_VERSION),
    FUSE_OPT_END
};

/* The standard mount options: the MS_* flags each sets and clears (what a
 * remount applies), and whether libfuse knows it (passed on at a mount) or
 * not (ignored there: relatime is the kernel's default for a new mount, and
 * FUSE leaves atime to the file system). */
static const struct std_opt {
    const char *name;
    unsigned long set, clear;
    int to_fuse;
} std_opts[] = {
    { "ro", MS_RDONLY, 0, 1 },           { "rw", 0, MS_RDONLY, 1 },
    { "nosuid", MS_NOSUID, 0, 1 },       { "suid", 0, MS_NOSUID, 1 },
    { "nodev", MS_NODEV, 0, 1 },         { "dev", 0, MS_NODEV, 1 },
    { "noexec", MS_NOEXEC, 0, 1 },       { "exec", 0, MS_NOEXEC, 1 },
    { "sync", MS_SYNCHRONOUS, 0, 1 },    { "async", 0, MS_SYNCHRONOUS, 1 },
    { "dirsync", MS_DIRSYNC, 0, 1 },
    { "noatime", MS_NOATIME, MS_RELATIME | MS_STRICTATIME, 1 },
    { "nodiratime", MS_NODIRATIME, 0, 0 },
    { "atime", 0, MS_NOATIME, 0 },       { "diratime", 0, MS_NODIRATIME, 0 },
    { "relatime", MS_RELATIME, MS_NOATIME | MS_STRICTATIME, 0 },
    { "norelatime", 0, MS_RELATIME, 0 },
    { "strictatime", MS_STRICTATIME, MS_NOATIME | MS_RELATIME, 0 },
    { "lazytime", MS_LAZYTIME, 0, 0 },   { "nolazytime", 0, MS_LAZYTIME, 0 },
};

/* Options only mount(8) and fstab use (mount.fuse3 drops most of them; pomfs
 * run by hand or by another helper drops them too). "x-" and "comment="
 * are prefixes. */
static const char *const fstab_only[] = {
    "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "group",
    "_netdev", "nofail", "loud", "silent", "x-", "comment=",
};

void pomfs_metrics_collect(void *arg, xt_metrics_buf *b)
{
    struct pomfs *pf = arg;
    xt_metrics_put_hist_family(b, "pom_pomfs_op_duration_seconds",
                               "Latency of FUSE operations, from the call to the reply.", "op",
                               pomfs_op_names, pf->op_hist, POMFS_OP__COUNT);
    struct pom_fs_stats st = { 0 };
    pom_fs *fs = atomic_load_explicit(&pf->stats_fs, memory_order_acquire);
    if (fs) /* else not opened yet: nothing done */
        pom_get_stats(fs, &st);
    xt_metrics_put_counter(b, "pom_pomfs_mds_rpcs_total", "MDS round trips (every attempt).",
                           st.mds_rpcs);
    xt_metrics_put_counter(b, "pom_pomfs_rpc_client_calls_total", "RPCs to MDS and R2.",
                           st.rpc_calls);
    xt_metrics_put_counter(b, "pom_pomfs_rpc_client_errors_total",
                           "RPCs that returned an error or failed.", st.rpc_errors);
    xt_metrics_put_counter(b, "pom_pomfs_rpc_client_timeouts_total", "RPCs that timed out.",
                           st.rpc_timeouts);
    xt_metrics_put_counter(b, "pom_pomfs_rpc_client_connects_total", "Connections opened.",
                           st.rpc_connects);
    xt_metrics_put_counter(b, "pom_pomfs_rpc_client_connect_failures_total",
                           "Connections that failed.", st.rpc_connect_failures);
    xt_metrics_put_counter(b, "pom_pomfs_blob_written_bytes_total",
                           "Bytes written to the blob tier (large files).",
                           st.blob_bytes_written);
    xt_metrics_put_counter(b, "pom_pomfs_blob_read_bytes_total",
                           "Bytes read from the blob tier.", st.blob_bytes_read);
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s NAME@R2ADDR MOUNTPOINT [-o options] [-f] [-d] [-s]\n"
            "       %s R2ADDR MOUNTPOINT -o fs=NAME[,options]\n"
            "       %s MDSADDR MOUNTPOINT -o fsid=N[,options]   (one MDS, no R2)\n"
            "       mount -t fuse.pomfs NAME@R2ADDR MOUNTPOINT [-o options]\n"
            "options:\n"
            "  -o fs=NAME            file system to mount, found through R2 at R2ADDR\n"
            "  -o fsid=N             file system id served by the MDS at MDSADDR\n"
            "  -o attr_timeout=S     seconds the kernel caches attributes (default 1)\n"
            "  -o entry_timeout=S    seconds the kernel caches names (default 1)\n"
            "  -o blob=DIR[:DIR...]  folders of the blob tier (files over 64 KiB);\n"
            "                        overrides the fs record's blob path\n"
            "  -o rados_pool=P,ceph_conf=FILE,rados_id=ID,rados_keyring=FILE\n"
            "                        the blob tier in Ceph pool P (rados backend; the\n"
            "                        others optional); overrides the fs record's blob\n"
            "                        settings\n"
            "  -o keyfile=PATH       the key to prove: the fs's client key (pomctl fs key)\n"
            "                        or the cluster key; none: unauthenticated clusters only\n"
            "  -o metrics=HOST:PORT  serve Prometheus /metrics there (port 0: a free one;\n"
            "                        a bare PORT binds 127.0.0.1; docs/metrics.md)\n"
            "  -o metrics_file=PATH  write the metrics HOST:PORT to PATH once listening\n"
            "  -o tls_ca=PATH,tls_cert=PATH,tls_key=PATH\n"
            "                        TLS to a cluster whose daemons run with TLS: the CA\n"
            "                        that signs its certificates, this client's certificate\n"
            "                        and key (PEM, all three)\n"
            "  -o reclaim=S          seconds between passes of the orphan tract-set\n"
            "                        reclaimer (default 600; 0: none, leases only)\n"
            "  -o reclaim_grace=S    age an orphan tract set must reach before the\n"
            "                        reclaimer removes it (default 3600; > 0)\n"
            "  -o hard               (default) an operation whose MDS does not answer is\n"
            "                        retried for 30 s, then fails with its transport error\n"
            "  -o soft,timeout=S     an operation still waiting after S seconds (default\n"
            "                        30) fails with EIO; a change it carried may still\n"
            "                        commit (a later fsync returns 0 only once it has).\n"
            "                        Either way a wait over 10 s is logged (then every\n"
            "                        60 s) naming the MDS site, and its end too\n"
            "  -o verbose            log the library's INFO lines (default: warnings)\n"
            "  -o remount[,ro|rw...] change the flags of the mount at MOUNTPOINT\n"
            "  -f                    stay in the foreground\n"
            "  -d, -o debug          debug output (implies -f)\n"
            "  -s                    single-threaded\n"
            "  -o allow_other, ro, nosuid, ...  the usual FUSE mount options; relatime,\n"
            "                        atime, lazytime and the fstab-only options (defaults,\n"
            "                        noauto, user, _netdev, nofail, x-*, comment=) are ignored\n",
            prog, prog, prog);
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *out)
{
    struct conf *c = data;
    (void)out;
    switch (key) {
    case FUSE_OPT_KEY_NONOPT:
        if (!c->addr) {
            c->addr = strdup(arg);
            return 0;
        }
        return 1; /* the mount point: fuse_parse_cmdline takes it */
    case KEY_HELP:
        c->help = 1;
        return 0;
    case KEY_VERSION:
        c->version = 1;
        return 0;
    case FUSE_OPT_KEY_OPT:
        for (size_t i = 0; i < sizeof std_opts / sizeof std_opts[0]; i++) {
            if (!strcmp(arg, std_opts[i].name)) {
                c->ms_flags = (c->ms_flags & ~std_opts[i].clear) | std_opts[i].set;
                return std_opts[i].to_fuse;
            }
        }
        for (size_t i = 0; i < sizeof fstab_only / sizeof fstab_only[0]; i++) {
            const char *o = fstab_only[i];
            size_t n = strlen(o);
            if (o[n - 1] == '-' || o[n - 1] == '=' ? !strncmp(arg, o, n) : !strcmp(arg, o))
                return 0;
        }
        return 1;
    default:
        return 1;
    }
}

static int parse_fsid(const char *s, uint32_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v > UINT32_MAX)
        return -EINVAL;
    *out = (uint32_t)v;
    return 0;
}

/* Splits a source NAME@ADDR into c->fsname and c->addr. 0, or -EINVAL
 * (said on stderr) when it contradicts -o fs= or -o fsid=. */
static int parse_source(struct conf *c)
{
    char *at = strchr(c->addr, '@');
    if (!at)
        return 0;
    *at = '\0';
    const char *name = c->addr, *addr = at + 1;
    if (!*name || !*addr || c->fsid || (c->fsname && strcmp(c->fsname, name))) {
        fprintf(stderr, "pomfs: source '%s@%s' wants NAME@R2ADDR, without another "
                        "-o fs= or -o fsid=\n", name, addr);
        return -EINVAL;
    }
    if (!c->fsname && !(c->fsname = strdup(name)))
        return -ENOMEM;
    memmove(c->addr, addr, strlen(addr) + 1);
    return 0;
}

/* mount(8) runs the helper again for `mount -o remount,OPTS DIR`, with the
 * mount's current options merged with OPTS: the kernel applies the flags
 * (FUSE has nothing else to change), the daemon keeps running. */
static int remount(const char *mnt, unsigned long flags)
{
    if (mount(NULL, mnt, NULL, MS_REMOUNT | flags, NULL) < 0) {
        fprintf(stderr, "pomfs: cannot remount %s: %s\n", mnt, strerror(errno));
        return 32; /* mount(8): mount failure */
    }
    return 0;
}

#ifndef NDEBUG
/* Threads of this process, from /proc/self/status (0: unknown). */
static int thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}
#endif

/* Goes to the background (invariant (1)): the parent waits for the child's
 * word on a pipe and exits with it; the child returns with *notify, the
 * pipe's write end for daemon_ready. The parent never returns. */
static void daemon_fork(int *notify)
{
    assert(thread_count() <= 1);
    int p[2];
    if (pipe(p) < 0) {
        fprintf(stderr, "pomfs: pipe: %s\n", strerror(errno));
        exit(1);
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "pomfs: fork: %s\n", strerror(errno));
        exit(1);
    }
    if (pid > 0) {
        close(p[1]);
        char b;
        ssize_t n;
        while ((n = read(p[0], &b, 1)) < 0 && errno == EINTR)
            ;
        if (n == 1)
            _exit(0); /* mounted */
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        _exit(WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) : 1);
    }
    close(p[0]);
    setsid();
    *notify = p[1];
}

/* The child has mounted: it leaves the terminal and lets the parent exit 0. */
static void daemon_ready(int notify)
{
    if (chdir("/") < 0)
        fprintf(stderr, "pomfs: chdir /: %s\n", strerror(errno));
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, STDIN_FILENO);
        dup2(nul, STDOUT_FILENO);
        dup2(nul, STDERR_FILENO);
        if (nul > STDERR_FILENO)
            close(nul);
    }
    char ok = 0;
    while (write(notify, &ok, 1) < 0 && errno == EINTR)
        ;
    close(notify);
}

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct conf c = { .attr_timeout = 1.0, .entry_timeout = 1.0, .reclaim = 600,
                      .reclaim_grace = 3600 };
    struct fuse_cmdline_opts o;
    memset(&o, 0, sizeof o);
    int ret = 1, notify = -1;
    struct fuse_session *se = NULL;
    struct pomfs pf = { 0 };
    struct pomfs_inval *inval = NULL;
    xt_metrics *metrics = NULL;

    if (fuse_opt_parse(&args, &c, opt_spec, opt_proc) == -1)
        return 2;
    if (c.help) {
        usage(stdout, argv[0]);
        fuse_lowlevel_help();
        ret = 0;
        goto out;
    }
    if (c.version) {
        printf("pomfs %s, libfuse %s\n", "0.1.0", fuse_pkgversion());
        ret = 0;
        goto out;
    }
    if (fuse_parse_cmdline(&args, &o) != 0) {
        ret = 2;
        goto out;
    }
    if (!c.addr || !o.mountpoint) {
        usage(stderr, argv[0]);
        ret = 2;
        goto out;
    }
    if (c.remount) {
        ret = remount(o.mountpoint, c.ms_flags);
        goto out;
    }
    if (parse_source(&c) < 0) {
        ret = 2;
        goto out;
    }
    if (c.reclaim_grace == 0) {
        fprintf(stderr, "pomfs: reclaim_grace must be > 0\n");
        ret = 2;
        goto out;
    }
    if (c.attr_timeout < 0 || c.entry_timeout < 0) {
        fprintf(stderr, "pomfs: timeouts must be >= 0\n");
        ret = 2;
        goto out;
    }
    if (c.metrics_file && !c.metrics) {
        fprintf(stderr, "pomfs: metrics_file= needs metrics=HOST:PORT\n");
        ret = 2;
        goto out;
    }
    if (c.timeout < 0 || c.timeout > 86400 || (c.timeout > 0 && !c.soft)) {
        fprintf(stderr, "pomfs: timeout=S needs soft and 0 < S <= 86400 (seconds)\n");
        ret = 2;
        goto out;
    }
    uint32_t fsid = 0;
    if (!c.fsname && (!c.fsid || parse_fsid(c.fsid, &fsid) < 0)) {
        fprintf(stderr, "pomfs: need NAME@R2ADDR, -o fs=NAME with an R2 address, or "
                        "-o fsid=N (a number) with an MDS address\n");
        ret = 2;
        goto out;
    }
    xt_log_set_level(o.debug ? XT_LOG_DEBUG : c.verbose ? XT_LOG_INFO : XT_LOG_WARN);
    if (!o.foreground)
        daemon_fork(&notify); /* invariant (1): before the library's threads */
    struct pom_opts popts = { .soft_ms = !c.soft ? 0
                                         : c.timeout > 0 ? XT_MAX((int)(c.timeout * 1000), 1)
                                                         : 30000,
                              .keyfile = c.keyfile,
                              .tls_ca = c.tls_ca,
                              .tls_cert = c.tls_cert,
                              .tls_key = c.tls_key };
    pf.attr_timeout = c.attr_timeout;
    pf.entry_timeout = c.entry_timeout;
    pf.label = c.fsname ? c.fsname : ""; /* c.fsname is freed after the session */
    int rc;
    /* The listener comes first, so the mount registers with its address
     * (pomctl sites, pomctl top); it starts after the fork (invariant 1). */
    if (c.metrics) {
        struct xt_metrics_opts mo = { .listen = c.metrics, .collect = pomfs_metrics_collect,
                                      .arg = &pf, .addr_file = c.metrics_file };
        if ((rc = xt_metrics_start(&mo, &metrics)) < 0) {
            fprintf(stderr, "pomfs: cannot serve metrics on %s: %s\n", c.metrics,
                    strerror(-rc));
            goto out;
        }
        popts.metrics_addr = xt_metrics_addr(metrics);
    }
    char fsname_opt[300];
    if (c.fsname) {
        rc = pom_open_opts(c.addr, c.fsname, &popts, &pf.fs);
        if (rc < 0) {
            fprintf(stderr, "pomfs: cannot open fs '%s' through R2 at %s: %s\n", c.fsname,
                    c.addr, strerror(-rc));
            goto out;
        }
        snprintf(fsname_opt, sizeof fsname_opt, "-ofsname=%s@%s", c.fsname, c.addr);
    } else {
        rc = pom_connect_mds_opts(c.addr, fsid, &popts, &pf.fs);
        if (rc < 0) {
            fprintf(stderr, "pomfs: cannot reach fs %u at MDS %s: %s\n", fsid, c.addr,
                    strerror(-rc));
            goto out;
        }
        snprintf(fsname_opt, sizeof fsname_opt, "-ofsname=fsid=%u@%s", fsid, c.addr);
    }
    atomic_store_explicit(&pf.stats_fs, pf.fs, memory_order_release);
    if (c.blob && (rc = pom_set_blob(pf.fs, "local", c.blob)) < 0) {
        fprintf(stderr, "pomfs: cannot use blob folder(s) %s: %s\n", c.blob, strerror(-rc));
        goto out;
    }
    if (c.rados_pool) { /* the settings string of docs/format-blob.md "rados" */
        char rs[4096];
        int n = snprintf(rs, sizeof rs, "pool=%s%s%s%s%s%s%s", c.rados_pool,
                         c.ceph_conf ? ",conf=" : "", c.ceph_conf ? c.ceph_conf : "",
                         c.rados_id ? ",id=" : "", c.rados_id ? c.rados_id : "",
                         c.rados_keyring ? ",keyring=" : "",
                         c.rados_keyring ? c.rados_keyring : "");
        rc = n < 0 || (size_t)n >= sizeof rs ? -ENAMETOOLONG : pom_set_blob(pf.fs, "rados", rs);
        if (rc < 0) {
            fprintf(stderr, "pomfs: cannot use Ceph pool %s: %s\n", c.rados_pool, strerror(-rc));
            goto out;
        }
    }
    /* Invariants (2) and (3); the commas of an R2 address list escaped for
     * libfuse's option parser. */
    char esc[sizeof fsname_opt * 2], *e = esc;
    for (const char *q = fsname_opt; *q; q++) {
        if (*q == ',' || *q == '\\')
            *e++ = '\\';
        *e++ = *q;
    }
    *e = '\0';
    if (fuse_opt_add_arg(&args, "-odefault_permissions") || fuse_opt_add_arg(&args, esc) ||
        fuse_opt_add_arg(&args, "-osubtype=pomfs"))
        goto out;

    se = fuse_session_new(&args, &pomfs_ops, sizeof pomfs_ops, &pf);
    if (!se)
        goto out;
    if (fuse_set_signal_handlers(se) != 0)
        goto out;
    if (fuse_session_mount(se, o.mountpoint) != 0)
        goto out_sig;
    pf.se = se;
    pf.threaded = !o.singlethread;
    if ((rc = pomfs_inval_start(pf.fs, se, &inval)) < 0)
        fprintf(stderr, "pomfs: no cache invalidation after MDS restarts: %s\n", strerror(-rc));
    /* Without a blob tier there is nothing to reclaim. */
    if ((rc = pom_reclaim_start(pf.fs, c.reclaim, c.reclaim_grace)) < 0 && rc != -ENOENT)
        fprintf(stderr, "pomfs: no orphan tract-set reclaimer: %s\n", strerror(-rc));
    if (notify >= 0) {
        daemon_ready(notify);
        notify = -1;
    }
    if (o.singlethread) {
        ret = fuse_session_loop(se);
    } else {
        struct fuse_loop_config *lc = fuse_loop_cfg_create();
        if (!lc) {
            ret = 1;
        } else {
            fuse_loop_cfg_set_clone_fd(lc, o.clone_fd);
            if (o.max_idle_threads <= 100000) /* unset: UINT_MAX, which libfuse warns about */
                fuse_loop_cfg_set_idle_threads(lc, o.max_idle_threads);
            if (o.max_threads > 0 && o.max_threads <= 100000) /* given with -o max_threads */
                fuse_loop_cfg_set_max_threads(lc, o.max_threads);
            ret = fuse_session_loop_mt(se, lc);
            fuse_loop_cfg_destroy(lc);
        }
    }
    ret = ret != 0;
    pomfs_inval_stop(inval);
    fuse_session_unmount(se);
out_sig:
    fuse_remove_signal_handlers(se);
out:
    if (se)
        fuse_session_destroy(se);
    xt_metrics_stop(metrics); /* reads pf.stats_fs */
    pom_close(pf.fs);
    free(o.mountpoint);
    free(c.addr);
    free(c.fsid);
    free(c.fsname);
    free(c.blob);
    free(c.rados_pool);
    free(c.ceph_conf);
    free(c.rados_id);
    free(c.rados_keyring);
    free(c.keyfile);
    free(c.metrics);
    free(c.metrics_file);
    free(c.tls_ca);
    free(c.tls_cert);
    free(c.tls_key);
    fuse_opt_free_args(&args);
    /* A child that did not mount: the parent returns its exit status. */
    if (notify >= 0)
        close(notify);
    return ret;
}
