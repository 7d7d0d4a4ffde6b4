/*
 * pomctl.c -- the site-management CLI: global options, help, dispatch, the
 * connection to R2 that every cluster command shares, and the opening of a
 * file system through the client library (fsck, path).
 *
 *   pomctl [--r2 ADDRS] [--data DIR] [--json] [--timeout MS] COMMAND [ARGS]
 *
 * Invariants:
 *  (1) The exit code says what happened (pomctl_i.h, docs/pomctl.md): a
 *      script can tell "R2 refused" (1) from "bad command line" (2) from
 *      "no R2 answered" (3) without reading messages.
 *  (2) Results go to stdout, messages to stderr; with --json stdout holds
 *      exactly one JSON object, also on failure ({"ok": false, ...}).
 *  (3) Calls only the leading R2 answers go to the leader the view names;
 *      a call answered -EREMOTE (leadership moved) is retried against the
 *      new leader a bounded number of times.
 */
#include "pomctl_i.h"
#include "pomctl_proc.h"

#include "pomegranate.h"
#include "xt_common.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define POMCTL_TIMEOUT_DEFAULT_MS 5000

/* ---- help ------------------------------------------------------------- */

struct cmd_help {
    const char *name;
    const char *synopsis;
    const char *text;
};

static const struct cmd_help helps[] = {
    { "status", "status",
      "Cluster health at a glance: the R2 leader and its store, the view version,\n"
      "sites by type and state, ring versions and sizes, file systems, and a\n"
      "verdict. Exit 0 when healthy (every site up), 4 when degraded.\n" },
    { "sites", "sites",
      "Every registered site: id, type, address, state, capacity, load, age of\n"
      "its last heartbeat, and the uuid range of an MDS.\n" },
    { "site", "site drain ID [--wait] | site remove ID | site stat [ID]",
      "drain ID   move the site's slices away, then let it leave the rings;\n"
      "           --wait returns once it has (an MDSL: its ring-1 change\n"
      "           marked it drained), with a progress line on a terminal\n"
      "remove ID  take the site out of the cluster now\n"
      "stat [ID]  each MDSL's store (or MDSL ID's): tables, bytes, live share,\n"
      "           prepared txids, GC, and the space given back after ring-1\n"
      "           moves (dropped folders, rolled segments, sweeps, a sweep\n"
      "           still owed); exit 1 when an MDSL does not answer\n" },
    { "ring", "ring show [0|1]",
      "Decode ring 0 (slices -> MDS) and/or ring 1 (slices -> MDSL): version,\n"
      "vnodes per site, and each site's share of the key space.\n" },
    { "fs", "fs create NAME [--blob-backend local --blob-path DIR | --copies N] |\n"
            "       fs create NAME --rados-pool POOL [--ceph-conf FILE] [--rados-id ID]\n"
            "                      [--rados-keyring FILE] | fs list |\n"
            "       fs stat NAME | fs drop NAME [--force] |\n"
            "       fs key NAME [--rotate] [--out FILE] |\n"
            "       fs quota NAME [--bytes N] [--inodes N]   (0: none)",
      "create  a new file-system instance (NAME: 1-64 of [A-Za-z0-9._-]); its\n"
      "        large files in folders (local), on the MDSL (--copies N: backend\n"
      "        mdsl, N copies of each tract; default min(3, number of MDSL)) or in\n"
      "        a Ceph pool (rados: the client's ceph.conf, cephx id and keyring;\n"
      "        docs/format-blob.md)\n"
      "list    every file system\n"
      "stat    one file system: fsid, root table, files (inodes) and bytes used\n"
      "        (docs/r2.md \"Capacity and quotas\"), quotas, mounts, blob\n"
      "        settings, creation time\n"
      "quota   set its quotas on bytes and inodes (0: none; an option not given\n"
      "        keeps its value): a change that would cross one fails EDQUOT\n"
      "drop    delete it; refused while mounted unless --force\n"
      "key     the client key of the fs (needs the cluster key): printed, or\n"
      "        written to FILE (mode 0600) with --out; pomfs -o keyfile=FILE and\n"
      "        pom_open_opts take it. It opens that fs only and administers\n"
      "        nothing. --rotate first bumps the fs's key generation: keys given\n"
      "        out before stop working for new connections\n" },
    { "up", "up [--data DIR] [--mount DIR [-o OPTS]] [--mds N] [--mdsl N] [--mdsl-replicas R]",
      "Start a one-machine cluster in the background: pom-r2, pom-mdsl and,\n"
      "when found, pom-mds, with data under DIR (default ~/.pomegranate), logs\n"
      "in DIR/logs, pids in DIR/run. Waits until every daemon answers and has\n"
      "registered, then creates the file system 'pomfs' if there is none.\n"
      "--mount DIR also mounts 'pomfs' there with the FUSE client (exit 5 when\n"
      "pomfs is not found; the cluster still runs), for every user when run\n"
      "as root (allow_other); -o OPTS adds pomfs -o options (e.g. ro or\n"
      "reclaim=5,reclaim_grace=10). --mds N starts N\n"
      "pom-mds (pom-mds, pom-mds-2, ...) sharing the tables by ring 0\n"
      "(default 1); --mdsl N starts N pom-mdsl (pom-mdsl, pom-mdsl-2, ...)\n"
      "sharing the slices by ring 1 (default 1); --mdsl-replicas R keeps every\n"
      "slice on R of them (1..5, kept in DIR/mdsl-replicas; default 1).\n"
      "Running it again on a\n"
      "running folder is harmless.\n"
      "Executables are looked up in $POM_BIN_DIR, next to pomctl, in the build\n"
      "tree folders ../mdsl ../mds ../r2 ../fuse, then in PATH.\n" },
    { "down", "down [--data DIR]",
      "Stop every daemon recorded in DIR/run (unmounting first), gently\n"
      "(SIGTERM) then firmly (SIGKILL) after a grace period. Only the recorded\n"
      "processes are signalled, and only while they still run the recorded\n"
      "executable. Exit 0 when nothing is left running.\n" },
    { "fsck", "fsck [--fs NAME] [--data-check] [--repair-orphans] [--repair-gdt]\n"
              "     [--repair-usage] [--max-problems N]",
      "Check a file system online, through the client library: every\n"
      "directory lists each name once and to its end, every listed name is\n"
      "found again by lookup as the same inode (its row sits where the\n"
      "table's bitmap says), no directory has two names, every file's nlink\n"
      "equals its names, symlink sizes match their targets, no two files\n"
      "name one set of blob tracts; sets no file names are counted as\n"
      "orphans. --data-check also reads every file to its size;\n"
      "--repair-orphans removes orphan sets older than a minute when no\n"
      "mount is registered. Every directory's GDT row (its place by uuid)\n"
      "must name where it is; --repair-gdt writes the missing or wrong ones\n"
      "and removes stale rows older than a minute (a file system made before\n"
      "the GDT gets its rows so). It counts the fs's inodes and bytes and\n"
      "prints R2's totals beside them; --repair-usage sets R2's totals to the\n"
      "walk's when they drifted (on a quiet fs: no change met, R2's figures\n"
      "still for 3 s). Those are the only changes fsck makes.\n"
      "NAME defaults to pomfs. Exit 0 clean, 1 with problems (each printed).\n" },
    { "top", "top [--interval S] [--count N] [--once]",
      "Per-site rates from each site's Prometheus /metrics (the addresses R2's\n"
      "view holds): requests or operations per second, bytes per second (an\n"
      "MDS's images and deltas, an MDSL's appends, a mount's blob tier),\n"
      "commit groups per second (MDS groups, MDSL commits) and errors per\n"
      "second, each over the time between two scrapes. Refreshed every S\n"
      "seconds (default 2) until interrupted or N tables were printed; on a\n"
      "terminal the table is redrawn in place. --once (and --json) print one\n"
      "sample, S seconds after a first scrape. Exit 1 when a site that is up\n"
      "did not answer.\n" },
    { "path", "path [--fs NAME] UUID",
      "The path of the directory whose uuid (inode number) is UUID, found by\n"
      "walking the global directory table (GDT) up to the root, each step\n"
      "checked against the directory's row. Directories only; a directory\n"
      "made, moved or removed in the last seconds may not show yet (each\n"
      "step waits up to 3 s for it). NAME defaults to pomfs. Exit 1 when it\n"
      "is not found (ESTALE: no such directory).\n" },
};

void pomctl_help(FILE *f, const char *cmd)
{
    for (size_t i = 0; cmd && i < XT_ARRAY_SIZE(helps); i++) {
        if (!strcmp(cmd, helps[i].name)) {
            fprintf(f, "usage: pomctl [global options] %s\n\n%s", helps[i].synopsis,
                    helps[i].text);
            return;
        }
    }
    fprintf(f, "usage: pomctl [global options] COMMAND [ARGS]\n\ncommands:\n");
    for (size_t i = 0; i < XT_ARRAY_SIZE(helps); i++)
        fprintf(f, "  %s\n", helps[i].synopsis);
    fprintf(f,
            "  help [COMMAND]\n"
            "\nglobal options (before the command):\n"
            "  --r2 ADDRS     R2 addresses, comma-separated HOST:PORT (default: $POM_R2,\n"
            "                 else the address `pomctl up` recorded in DIR/r2.addr)\n"
            "  --data DIR     the folder of a cluster started by `pomctl up`\n"
            "                 (default ~/.pomegranate)\n"
            "  --key-file F   the key to prove (default DIR/" XT_AUTH_KEY_FILE ", the cluster\n"
            "                 key `pomctl up` made, of --data DIR or, without --r2 and\n"
            "                 $POM_R2, of ~/.pomegranate; none there: no key)\n"
            "  --tls-ca F, --tls-cert F, --tls-key F\n"
            "                 TLS to a cluster whose daemons run with TLS: the CA that\n"
            "                 signs its certificates, and pomctl's certificate and key\n"
            "                 (PEM, all three; docs/security.md \"TLS\")\n"
            "  --json         print one JSON object instead of tables\n"
            "  --timeout MS   RPC timeout (default %d)\n"
            "\nexit codes: 0 ok, 1 the operation failed, 2 usage error, 3 R2\n"
            "unreachable, 4 degraded (status), 5 partial (up without FUSE client).\n"
            "`pomctl COMMAND --help` explains one command.\n"
            "\nenvironment:\n"
            "  POM_R2         R2 addresses when --r2 is not given\n"
            "  POM_BIN_DIR    where `up` looks first for pom-r2, pom-mdsl, pom-mds, pomfs\n",
            POMCTL_TIMEOUT_DEFAULT_MS);
}

bool pomctl_wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return true;
    return false;
}

/* ---- errors ----------------------------------------------------------- */

void pomctl_json_error(struct pomctl *ctl, int code, const char *msg, int rc)
{
    ctl->json_done = true;
    pomctl_json_init(&ctl->js, stdout, true);
    pomctl_json_obj_begin(&ctl->js, NULL);
    pomctl_json_bool(&ctl->js, "ok", false);
    pomctl_json_i64(&ctl->js, "exit", code);
    pomctl_json_str(&ctl->js, "error", msg);
    if (rc < 0) {
        const char *name = strerrorname_np(-rc);
        pomctl_json_str(&ctl->js, "errno", name ? name : "?");
    }
    pomctl_json_obj_end(&ctl->js);
    pomctl_json_finish(&ctl->js);
}

static const char *default_hint(int rc)
{
    switch (-rc) {
    case ENOKEY: return "R2 wants a key: give --data DIR or --key-file FILE";
    case EKEYREJECTED: return "the key does not match the cluster's (--key-file, --data), "
                              "or TLS failed (see above)";
    case EPROTONOSUPPORT: return "R2 takes TLS only: give --tls-ca, --tls-cert and --tls-key";
    case EACCES: return "a client key may not do this: use the cluster key";
    case EREMOTE: return "no R2 leader is elected right now; retry in a few seconds";
    case ETIMEDOUT: return "R2 did not answer in time; retry, or raise --timeout";
    case EPROTO: return "R2's reply was not understood; are pomctl and pom-r2 from one build?";
    case ENOSYS:
    case EOPNOTSUPP: return "this R2 does not support the operation";
    default: return "see the R2 log (DIR/logs/pom-r2.log for a cluster from `pomctl up`)";
    }
}

static void addr_list(const struct pomctl *ctl, char *buf, size_t cap)
{
    buf[0] = '\0';
    size_t off = 0;
    for (size_t i = 0; i < ctl->naddrs && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? ", " : "", ctl->addrs[i]);
}

int pomctl_fail(struct pomctl *ctl, int rc, const char *what, const char *hint)
{
    char msg[1024];
    int code;
    if (rc == -ECONNREFUSED || ctl->unreachable) {
        char addrs[512];
        addr_list(ctl, addrs, sizeof addrs);
        snprintf(msg, sizeof msg,
                 "cannot reach R2 at %s: %s \xe2\x80\x94 is the cluster up? try: pomctl up",
                 addrs, strerror(-rc));
        code = POMCTL_EUNREACH;
    } else {
        snprintf(msg, sizeof msg, "%s: %s (R2 at %s) \xe2\x80\x94 %s", what, strerror(-rc),
                 ctl->cur[0] ? ctl->cur : "?", hint ? hint : default_hint(rc));
        code = POMCTL_EFAIL;
    }
    fprintf(stderr, "pomctl: %s\n", msg);
    if (ctl->json)
        pomctl_json_error(ctl, code, msg, rc);
    return code;
}

int pomctl_usage_err(struct pomctl *ctl, const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "pomctl: %s\n", msg);
    const char *syn = NULL;
    for (size_t i = 0; cmd && i < XT_ARRAY_SIZE(helps); i++)
        if (!strcmp(cmd, helps[i].name))
            syn = helps[i].synopsis;
    if (syn)
        fprintf(stderr, "usage: pomctl [global options] %s\n(pomctl %s --help explains it)\n",
                syn, cmd);
    else
        fprintf(stderr, "usage: pomctl [--r2 ADDRS] [--data DIR] [--json] [--timeout MS] "
                        "COMMAND [ARGS]\n(pomctl --help lists the commands)\n");
    if (ctl && ctl->json)
        pomctl_json_error(ctl, POMCTL_EUSAGE, msg, 0);
    return POMCTL_EUSAGE;
}

/* ---- addresses -------------------------------------------------------- */

int pomctl_default_data_dir(char *out, size_t cap)
{
    const char *home = getenv("HOME");
    if (!home || !*home)
        return -ENOENT;
    int n = snprintf(out, cap, "%s/.pomegranate", home);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Splits a comma-separated list into ctl->addrs, checking each. */
static int set_addrs(struct pomctl *ctl, const char *list, const char *source)
{
    for (size_t i = 0; i < ctl->naddrs; i++)
        xt_free(ctl->addrs[i]);
    ctl->naddrs = 0;
    ctl->addr_source = source;
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        char one[XT_ADDR_MAX], host[XT_ADDR_MAX];
        int port;
        if (len == 0 || len >= sizeof one)
            return -EINVAL;
        memcpy(one, p, len);
        one[len] = '\0';
        if (xt_rpc_parse_addr(one, host, sizeof host, &port) < 0 || port <= 0 || port > 65535)
            return -EINVAL;
        if (ctl->naddrs == POMCTL_MAX_ADDRS)
            return -E2BIG;
        if (!(ctl->addrs[ctl->naddrs] = xt_strdup(one)))
            return -ENOMEM;
        ctl->naddrs++;
        p += len;
        if (*p == ',')
            p++;
    }
    return ctl->naddrs ? 0 : -EINVAL;
}

int pomctl_resolve_addrs(struct pomctl *ctl)
{
    if (ctl->naddrs)
        return 0; /* --r2 */
    char path[PATH_MAX], line[1024];
    const char *list = NULL, *source = NULL;
    if (ctl->data_dir) {
        snprintf(path, sizeof path, "%s/r2.addr", ctl->data_dir);
        if (pomctl_read_line_file(path, line, sizeof line) < 0) {
            fprintf(stderr,
                    "pomctl: cannot reach R2: no address recorded in %s \xe2\x80\x94 is the "
                    "cluster up? try: pomctl up --data %s\n",
                    path, ctl->data_dir);
            return POMCTL_EUNREACH;
        }
        list = line;
        source = "--data";
    } else if (getenv("POM_R2") && *getenv("POM_R2")) {
        list = getenv("POM_R2");
        source = "$POM_R2";
    } else {
        char dir[PATH_MAX];
        if (pomctl_default_data_dir(dir, sizeof dir) == 0 &&
            snprintf(path, sizeof path, "%s/r2.addr", dir) < (int)sizeof path &&
            pomctl_read_line_file(path, line, sizeof line) == 0) {
            list = line;
            source = "~/.pomegranate/r2.addr";
        }
    }
    if (!list) {
        fprintf(stderr, "pomctl: cannot reach R2: no address known (give --r2 ADDR or set "
                        "POM_R2) \xe2\x80\x94 is the cluster up? try: pomctl up\n");
        if (ctl->json)
            pomctl_json_error(ctl, POMCTL_EUNREACH, "no R2 address known", 0);
        return POMCTL_EUNREACH;
    }
    int rc = set_addrs(ctl, list, source);
    if (rc < 0)
        return pomctl_usage_err(ctl, NULL, "bad R2 address list '%s' (from %s): want "
                                           "HOST:PORT[,HOST:PORT...]",
                                list, source);
    return 0;
}

/* ---- R2 connection ---------------------------------------------------- */

xt_rpc_call pomctl_call(const struct pomctl *ctl)
{
    xt_rpc_call c = { .timeout_ms = ctl->timeout_ms };
    return c;
}

void pomctl_r2_close(struct pomctl *ctl)
{
    xt_rpc_pool_free(ctl->pool);
    ctl->pool = NULL;
    ctl->cur[0] = '\0';
}

static int open_pool(struct pomctl *ctl, const char *addr)
{
    if (ctl->pool && !strcmp(ctl->cur, addr))
        return 0;
    pomctl_r2_close(ctl);
    char host[XT_ADDR_MAX];
    int port;
    if (xt_rpc_parse_addr(addr, host, sizeof host, &port) < 0)
        return -EINVAL;
    struct xt_rpc_pool_opts o = {
        .host = host, .port = port, .max_idle = 1,
        .connect_timeout_ms = ctl->timeout_ms, .call_timeout_ms = ctl->timeout_ms,
    };
    int rc = xt_rpc_pool_new(&o, &ctl->pool);
    if (rc < 0)
        return rc;
    snprintf(ctl->cur, sizeof ctl->cur, "%s", addr);
    return 0;
}

int pomctl_r2_view(struct pomctl *ctl, bool want_leader, struct xt_view *view)
{
    memset(view, 0, sizeof *view);
    int rc = -ECONNREFUSED;
    ctl->unreachable = false;
    for (size_t i = 0; i < ctl->naddrs; i++) {
        if ((rc = open_pool(ctl, ctl->addrs[i])) < 0)
            return rc;
        xt_rpc_call call = pomctl_call(ctl);
        bool has = false;
        rc = xt_r2_get_view(ctl->pool, &call, 0, &has, view);
        if (rc == -ECONNREFUSED || rc == -ETIMEDOUT)
            continue; /* try the next R2 */
        if (rc < 0)
            return rc;
        if (want_leader && view->leader[0] && strcmp(view->leader, ctl->cur) &&
            (rc = open_pool(ctl, view->leader)) < 0) {
            xt_view_free(view);
            return rc;
        }
        return 0;
    }
    ctl->unreachable = true;
    return rc;
}

int pomctl_r2_leader(struct pomctl *ctl)
{
    struct xt_view v;
    int rc = pomctl_r2_view(ctl, true, &v);
    if (rc == 0)
        xt_view_free(&v);
    return rc;
}

/* ---- a file system through the client library -------------------------- */

int pomctl_fs_open(struct pomctl *ctl, const char *fsname, const char *what, pom_fs **out)
{
    int rc = pomctl_resolve_addrs(ctl);
    if (rc)
        return rc;
    char addrs[POMCTL_MAX_ADDRS * XT_ADDR_MAX];
    size_t off = 0;
    for (size_t i = 0; i < ctl->naddrs; i++)
        off += (size_t)snprintf(addrs + off, sizeof addrs - off, "%s%s", i ? "," : "",
                                ctl->addrs[i]);
    if ((rc = pom_open(addrs, fsname, out)) == 0)
        return POMCTL_OK;
    if (rc == -ECONNREFUSED || rc == -ETIMEDOUT || rc == -EHOSTUNREACH)
        return pomctl_fail(ctl, rc, what, "is the cluster up? try: pomctl status");
    return pomctl_fail(ctl, rc, what, NULL);
}

/* ---- main ------------------------------------------------------------- */

struct cmd {
    const char *name;
    int (*fn)(struct pomctl *ctl, int argc, char **argv);
};

static const struct cmd cmds[] = {
    { "status", pomctl_cmd_status }, { "sites", pomctl_cmd_sites },
    { "site", pomctl_cmd_site },     { "ring", pomctl_cmd_ring },
    { "fs", pomctl_cmd_fs },         { "up", pomctl_cmd_up },
    { "down", pomctl_cmd_down },     { "fsck", pomctl_cmd_fsck },
    { "path", pomctl_cmd_path },     { "top", pomctl_cmd_top },
};

/* Value of option `name` at argv[*i] ("--name V" or "--name=V"); advances
 * *i past it. NULL when argv[*i] is not that option; *missing when it is
 * but has no value. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *missing)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n))
        return NULL;
    if (a[n] == '=')
        return a + n + 1;
    if (a[n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*i];
}

int pomctl_use_key(struct pomctl *ctl, const char *path, bool create)
{
    int rc = create ? xt_auth_init(path) : 0;
    if (rc < 0) {
        fprintf(stderr, "pomctl: cannot write the cluster key %s: %s\n", path, strerror(-rc));
        return POMCTL_EFAIL;
    }
    if (xt_auth_load(path, XT_AUTH_ADMIN, &ctl->cred) < 0) {
        fprintf(stderr, "pomctl: cannot use key file %s (see above)\n", path);
        return POMCTL_EUSAGE;
    }
    ctl->has_cred = true;
    xt_rpc_set_cred(&ctl->cred);
    return 0;
}

/* --key-file, else the key beside the address: DIR/cluster.key of --data,
 * or of the default folder when the address comes from there too (no --r2,
 * no $POM_R2: a cluster named by address alone gets its key by --key-file),
 * when that file exists; else no key. */
static int default_key(struct pomctl *ctl)
{
    if (ctl->key_file)
        return pomctl_use_key(ctl, ctl->key_file, false);
    char dir[PATH_MAX], path[PATH_MAX + 32];
    if (ctl->data_dir)
        snprintf(dir, sizeof dir, "%s", ctl->data_dir);
    else if (ctl->naddrs || (getenv("POM_R2") && *getenv("POM_R2")) ||
             pomctl_default_data_dir(dir, sizeof dir) < 0)
        return 0;
    snprintf(path, sizeof path, "%s/%s", dir, XT_AUTH_KEY_FILE);
    return access(path, F_OK) == 0 ? pomctl_use_key(ctl, path, false) : 0;
}

/* --tls-ca/--tls-cert/--tls-key: the TLS context of every connection. */
static int use_tls(struct pomctl *ctl)
{
    struct xt_rpc_tls_opts to = { .ca = ctl->tls_ca, .cert = ctl->tls_cert,
                                  .key = ctl->tls_key };
    xt_rpc_tls *t;
    if (xt_rpc_tls_new(&to, &t) < 0)
        return POMCTL_EUSAGE; /* said why on stderr: --tls-ca, --tls-cert, --tls-key */
    xt_rpc_set_tls(t);
    xt_rpc_tls_free(t);
    return 0;
}

static int run(struct pomctl *ctl, int argc, char **argv)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i], *v;
        bool missing = false;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            pomctl_help(stdout, NULL);
            return POMCTL_OK;
        } else if (!strcmp(a, "--json")) {
            ctl->json = true;
        } else if ((v = opt_value(argc, argv, &i, "--r2", &missing))) {
            if (set_addrs(ctl, v, "--r2") < 0)
                return pomctl_usage_err(ctl, NULL, "bad --r2 '%s': want HOST:PORT[,HOST:PORT...]",
                                        v);
        } else if ((v = opt_value(argc, argv, &i, "--data", &missing))) {
            if (!*v)
                return pomctl_usage_err(ctl, NULL, "--data wants a folder");
            ctl->data_dir = v;
        } else if ((v = opt_value(argc, argv, &i, "--key-file", &missing))) {
            if (!*v)
                return pomctl_usage_err(ctl, NULL, "--key-file wants a file");
            ctl->key_file = v;
        } else if ((v = opt_value(argc, argv, &i, "--tls-ca", &missing))) {
            ctl->tls_ca = v;
        } else if ((v = opt_value(argc, argv, &i, "--tls-cert", &missing))) {
            ctl->tls_cert = v;
        } else if ((v = opt_value(argc, argv, &i, "--tls-key", &missing))) {
            ctl->tls_key = v;
        } else if ((v = opt_value(argc, argv, &i, "--timeout", &missing))) {
            char *end = NULL;
            long ms = strtol(v, &end, 10);
            if (!*v || *end || ms < 1 || ms > 3600000)
                return pomctl_usage_err(ctl, NULL, "--timeout wants 1..3600000 ms, got '%s'", v);
            ctl->timeout_ms = (int)ms;
        } else if (missing) {
            return pomctl_usage_err(ctl, NULL, "%s wants a value", a);
        } else {
            return pomctl_usage_err(ctl, NULL, "unknown option '%s'", a);
        }
    }
    if (i >= argc)
        return pomctl_usage_err(ctl, NULL, "no command given");
    int kc = default_key(ctl);
    if (!kc)
        kc = use_tls(ctl);
    if (kc)
        return kc;
    const char *name = argv[i];
    int cargc = argc - i - 1;
    char **cargv = argv + i + 1;
    if (!strcmp(name, "help")) {
        pomctl_help(stdout, cargc > 0 ? cargv[0] : NULL);
        return POMCTL_OK;
    }
    /* --json is also accepted after the command (scripts write it there). */
    int w = 0;
    for (int k = 0; k < cargc; k++) {
        if (!strcmp(cargv[k], "--json"))
            ctl->json = true;
        else
            cargv[w++] = cargv[k];
    }
    cargc = w;
    for (size_t k = 0; k < XT_ARRAY_SIZE(cmds); k++) {
        if (strcmp(name, cmds[k].name))
            continue;
        if (pomctl_wants_help(cargc, cargv)) {
            pomctl_help(stdout, name);
            return POMCTL_OK;
        }
        return cmds[k].fn(ctl, cargc, cargv);
    }
    return pomctl_usage_err(ctl, NULL, "unknown command '%s'", name);
}

int main(int argc, char **argv)
{
    /* The RPC layer logs connection trouble at debug/warn level; pomctl
     * reports errors itself, once, in words. */
    xt_log_set_level(XT_LOG_ERROR);
    xt_log_set_prefix("pomctl");
    struct pomctl ctl = { .timeout_ms = POMCTL_TIMEOUT_DEFAULT_MS };
    int code = run(&ctl, argc, argv);
    pomctl_r2_close(&ctl);
    for (size_t i = 0; i < ctl.naddrs; i++)
        xt_free(ctl.addrs[i]);
    fflush(stdout);
    return code;
}
