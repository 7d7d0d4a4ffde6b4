/*
 * pomctl_i.h -- what the parts of pomctl share: global options, the
 * connection to R2 (following the leader), exit codes and error reporting.
 *
 *   pomctl.c       main, global options, help, dispatch, R2 connection
 *   pomctl_cmds.c  status, sites, site, ring, fs
 *   pomctl_stat.c  site stat (each MDSL's store counters)
 *   pomctl_up.c    up, down
 *   pomctl_fsck.c  fsck
 *   pomctl_path.c  path
 *   pomctl_top.c   top (rates from the sites' /metrics, pomctl_scrape.c)
 *   pomctl_progress.c  progress lines of long work on a terminal
 *   pomctl_out.c   tables, JSON, formatters
 *   pomctl_proc.c  executables, pid files, detached daemons
 *
 * Exit codes (docs/pomctl.md); scripts rely on them, never change one:
 */
#ifndef POMCTL_I_H
#define POMCTL_I_H

#include "pomctl_out.h"

#include "xt_rpc_r2.h"

#include <stdbool.h>
#include <stdio.h>

enum {
    POMCTL_OK = 0,
    POMCTL_EFAIL = 1,        /* the operation failed (at R2, or locally) */
    POMCTL_EUSAGE = 2,       /* bad command line */
    POMCTL_EUNREACH = 3,     /* no R2 could be reached */
    POMCTL_EDEGRADED = 4,    /* status: some site is not up */
    POMCTL_EPARTIAL = 5,     /* up: cluster started, FUSE client missing */
};

#define POMCTL_MAX_ADDRS 16

/* One invocation. Owned by main(); commands borrow it. */
struct pomctl {
    /* global options */
    char *addrs[POMCTL_MAX_ADDRS];   /* R2 addresses (xt_malloc'd) */
    size_t naddrs;
    const char *addr_source;         /* where the addresses came from */
    const char *data_dir;            /* --data given before the command */
    const char *key_file;            /* --key-file given before the command */
    const char *tls_ca, *tls_cert, *tls_key; /* --tls-* given before the command */
    bool has_cred;                   /* a key was loaded (pomctl_use_key) */
    struct xt_auth_cred cred;        /* the key every connection proves */
    bool json;
    int timeout_ms;
    /* connection (pomctl_r2_*) */
    xt_rpc_pool *pool;               /* to `cur` */
    char cur[XT_ADDR_MAX];           /* address pool talks to */
    bool unreachable;                /* the last pomctl_r2_view reached nobody */
    /* output */
    pomctl_json js;
    bool json_done;                  /* the one JSON object was printed */
};

/* ---- R2 connection (pomctl.c) ----------------------------------------- */

/* Makes the key file at path the credential of every connection of this
 * pomctl (role admin; a client key stays role client), first writing a new
 * cluster key there if `create` and it does not exist. 0, or an exit code
 * (message printed). */
int pomctl_use_key(struct pomctl *ctl, const char *path, bool create);

/* Resolves the R2 addresses (--r2, --data DIR/r2.addr, $POM_R2,
 * ~/.pomegranate/r2.addr) into ctl->addrs. 0, or an exit code (message
 * printed). */
int pomctl_resolve_addrs(struct pomctl *ctl);
/* Fetches the full view from the first reachable R2 (in ctl->addrs order)
 * and keeps the pool to it. When want_leader, moves to the leader the view
 * names. 0 or -errno (-ECONNREFUSED: nobody answered). *view freed by the
 * caller with xt_view_free. */
int pomctl_r2_view(struct pomctl *ctl, bool want_leader, struct xt_view *view);
/* Connects to the leader (pomctl_r2_view) for a call that only the leader
 * answers. 0 or -errno. */
int pomctl_r2_leader(struct pomctl *ctl);
/* R2's fs records (name NULL: all; else that one, maybe among others),
 * asking the leader and retrying while R2 answers "not the leader".
 * *fs: free with xt_fs_info_free_array(*fs, *n) also on error. */
int pomctl_fs_list(struct pomctl *ctl, const char *name, struct xt_fs_info **fs, size_t *n);
/* The call options of this invocation (timeout). */
xt_rpc_call pomctl_call(const struct pomctl *ctl);
/* Closes the pool. */
void pomctl_r2_close(struct pomctl *ctl);

/* Reports a failed R2 operation `what` (e.g. "fs drop pomfs") with rc on
 * stderr (and as JSON with --json) and returns the exit code: 3 when R2
 * could not be reached, else 1. hint: what to do (may be NULL: a default
 * for rc is used). */
int pomctl_fail(struct pomctl *ctl, int rc, const char *what, const char *hint);
/* With --json: prints {"ok": false, "exit": code, "error": msg, "errno"}
 * (errno only when rc < 0). */
void pomctl_json_error(struct pomctl *ctl, int code, const char *msg, int rc);
/* Usage error: prints msg and the command's usage; returns 2. */
int pomctl_usage_err(struct pomctl *ctl, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prints a command's help to f. cmd NULL: the whole help. */
void pomctl_help(FILE *f, const char *cmd);
/* Whether argv (after the command) asks for help. */
bool pomctl_wants_help(int argc, char **argv);

/* Opens file system fsname through the R2 addresses (pom_open) into *out
 * (pom_close it). POMCTL_OK, or an exit code with the failure of `what`
 * (e.g. "fsck pomfs") reported. */
struct pom_fs;
int pomctl_fs_open(struct pomctl *ctl, const char *fsname, const char *what,
                   struct pom_fs **out);

/* ---- commands: argc/argv start after the command word; return an exit code */

int pomctl_cmd_status(struct pomctl *ctl, int argc, char **argv);
int pomctl_cmd_sites(struct pomctl *ctl, int argc, char **argv);
int pomctl_cmd_site(struct pomctl *ctl, int argc, char **argv);
int pomctl_cmd_ring(struct pomctl *ctl, int argc, char **argv);
int pomctl_cmd_fs(struct pomctl *ctl, int argc, char **argv);
int pomctl_cmd_up(struct pomctl *ctl, int argc, char **argv);
int pomctl_cmd_down(struct pomctl *ctl, int argc, char **argv);
int pomctl_cmd_fsck(struct pomctl *ctl, int argc, char **argv);
int pomctl_cmd_path(struct pomctl *ctl, int argc, char **argv);
int pomctl_cmd_top(struct pomctl *ctl, int argc, char **argv);
/* `site stat [ID]` (pomctl_stat.c); argv starts after "stat". */
int pomctl_site_stat(struct pomctl *ctl, int argc, char **argv);

/* Valid fs name: 1..XT_FSNAME_MAX bytes of [A-Za-z0-9._-]. */
bool pomctl_fs_name_ok(const char *name);
/* Default data folder: $HOME/.pomegranate. 0 or -ENOENT (no HOME). */
int pomctl_default_data_dir(char *out, size_t cap);

#endif /* POMCTL_I_H */
