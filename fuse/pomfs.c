/*
 * pomfs.c -- the FUSE daemon of Pomegranate (docs/client.md "pomfs"):
 *
 *   pomfs R2ADDR  MOUNTPOINT -o fs=NAME[,attr_timeout=S,entry_timeout=S,blob=DIR,
 *                 reclaim=S,reclaim_grace=S,soft,timeout=S]
 *   pomfs MDSADDR MOUNTPOINT -o fsid=N[,...]   (one MDS, no R2) [-f] [-d] [-s]
 *
 * Runs in the background unless -f (as FUSE daemons do), with libfuse's
 * multi-threaded session loop unless -s. Always mounts with
 * `default_permissions`: the kernel checks POSIX permissions against the
 * attributes pomfs returns. The library connection is made before the
 * mount, so an unreachable MDS fails the command, not the first access.
 * Waiting on an MDS that does not answer is "hard" unless -o soft: see
 * struct pom_opts (pomegranate.h) and docs/client.md "Waiting".
 */
#include "pomfs_i.h"

#include "xt_common.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct conf {
    char *addr;             /* first non-option argument */
    char *fsid;             /* -o fsid=N */
    char *fsname;           /* -o fs=NAME (R2) */
    char *blob;             /* -o blob=DIR[:DIR...] (blob tier, local backend) */
    char *keyfile;          /* -o keyfile=PATH (docs/security.md) */
    double attr_timeout, entry_timeout;
    unsigned reclaim, reclaim_grace; /* -o reclaim=S,reclaim_grace=S (seconds) */
    int soft;               /* -o soft (1) / -o hard (0, the default) */
    double timeout;         /* -o timeout=S: when a soft mount answers EIO */
    int help, version;
};

enum { KEY_HELP, KEY_VERSION };

#define OPT(t, p) { t, offsetof(struct conf, p), 1 }
static const struct fuse_opt opt_spec[] = {
    OPT("fsid=%s", fsid),
    OPT("fs=%s", fsname),
    OPT("blob=%s", blob),
    OPT("keyfile=%s", keyfile),
    OPT("attr_timeout=%lf", attr_timeout),
    OPT("entry_timeout=%lf", entry_timeout),
    OPT("reclaim=%u", reclaim),
    OPT("reclaim_grace=%u", reclaim_grace),
    { "soft", offsetof(struct conf, soft), 1 },
    { "hard", offsetof(struct conf, soft), 0 },
    OPT("timeout=%lf", timeout),
    FUSE_OPT_KEY("-h", KEY_HELP),
    FUSE_OPT_KEY("--help", KEY_HELP),
    FUSE_OPT_KEY("-V", KEY_VERSION),
    FUSE_OPT_KEY("--version", KEY_VERSION),
    FUSE_OPT_END
};

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: %s R2ADDR MOUNTPOINT -o fs=NAME[,options] [-f] [-d] [-s]\n"
            "       %s MDSADDR MOUNTPOINT -o fsid=N[,options]   (one MDS, no R2)\n"
            "options:\n"
            "  -o fs=NAME            file system to mount, found through R2 at R2ADDR\n"
            "  -o fsid=N             file system id served by the MDS at MDSADDR\n"
            "  -o attr_timeout=S     seconds the kernel caches attributes (default 1)\n"
            "  -o entry_timeout=S    seconds the kernel caches names (default 1)\n"
            "  -o blob=DIR[:DIR...]  folders of the blob tier (files over 64 KiB);\n"
            "                        overrides the fs record's blob path\n"
            "  -o keyfile=PATH       the key to prove: the fs's client key (pomctl fs key)\n"
            "                        or the cluster key; none: unauthenticated clusters only\n"
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
            "  -f                    stay in the foreground\n"
            "  -d                    debug output (implies -f)\n"
            "  -s                    single-threaded\n"
            "  -o allow_other, ...   the usual FUSE mount options\n",
            prog, prog);
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

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct conf c = { .attr_timeout = 1.0, .entry_timeout = 1.0, .reclaim = 600,
                      .reclaim_grace = 3600 };
    struct fuse_cmdline_opts o;
    memset(&o, 0, sizeof o);
    int ret = 1;
    struct fuse_session *se = NULL;
    struct pomfs pf = { 0 };
    struct pomfs_inval *inval = NULL;

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
    if (c.timeout < 0 || c.timeout > 86400 || (c.timeout > 0 && !c.soft)) {
        fprintf(stderr, "pomfs: timeout=S needs soft and 0 < S <= 86400 (seconds)\n");
        ret = 2;
        goto out;
    }
    struct pom_opts popts = { .soft_ms = !c.soft ? 0
                                         : c.timeout > 0 ? XT_MAX((int)(c.timeout * 1000), 1)
                                                         : 30000,
                              .keyfile = c.keyfile };
    pf.attr_timeout = c.attr_timeout;
    pf.entry_timeout = c.entry_timeout;
    int rc;
    if (c.fsname) {
        rc = pom_open_opts(c.addr, c.fsname, &popts, &pf.fs);
        if (rc < 0) {
            fprintf(stderr, "pomfs: cannot open fs '%s' through R2 at %s: %s\n", c.fsname,
                    c.addr, strerror(-rc));
            goto out;
        }
    } else {
        uint32_t fsid;
        if (!c.fsid || parse_fsid(c.fsid, &fsid) < 0) {
            fprintf(stderr, "pomfs: need -o fsid=N (a number) with an MDS address\n");
            ret = 2;
            goto out;
        }
        rc = pom_connect_mds_opts(c.addr, fsid, &popts, &pf.fs);
        if (rc < 0) {
            fprintf(stderr, "pomfs: cannot reach fs %u at MDS %s: %s\n", fsid, c.addr,
                    strerror(-rc));
            goto out;
        }
    }
    if (c.blob && (rc = pom_set_blob(pf.fs, "local", c.blob)) < 0) {
        fprintf(stderr, "pomfs: cannot use blob folder(s) %s: %s\n", c.blob, strerror(-rc));
        goto out;
    }
    /* The kernel checks permissions (pomegranate.h (4)); names the mount. */
    char fsname_opt[300];
    snprintf(fsname_opt, sizeof fsname_opt, "-ofsname=pomfs#%s", c.addr);
    if (fuse_opt_add_arg(&args, "-odefault_permissions") || fuse_opt_add_arg(&args, fsname_opt) ||
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
    fuse_daemonize(o.foreground);
    /* After the fork of fuse_daemonize: a thread does not survive it. */
    if ((rc = pomfs_inval_start(pf.fs, se, &inval)) < 0)
        fprintf(stderr, "pomfs: no cache invalidation after MDS restarts: %s\n", strerror(-rc));
    /* Also after the fork. Without a blob tier there is nothing to reclaim. */
    if ((rc = pom_reclaim_start(pf.fs, c.reclaim, c.reclaim_grace)) < 0 && rc != -ENOENT)
        fprintf(stderr, "pomfs: no orphan tract-set reclaimer: %s\n", strerror(-rc));
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
    pom_close(pf.fs);
    free(o.mountpoint);
    free(c.addr);
    free(c.fsid);
    free(c.fsname);
    free(c.blob);
    free(c.keyfile);
    fuse_opt_free_args(&args);
    return ret;
}
