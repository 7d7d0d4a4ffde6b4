/*
 * fault_util.c -- see fault_util.h.
 */
#include "fault_util.h"
#include "pom_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

void fault_env_init(void)
{
    const char *vars[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS" };
    for (int i = 0; i < 2; i++) {
        const char *old = getenv(vars[i]);
        char buf[1024];
        snprintf(buf, sizeof buf, "%s%sexitcode=66", old ? old : "", old && *old ? ":" : "");
        setenv(vars[i], buf, 1);
    }
}

/* ---- tmpfs ------------------------------------------------------------ */

#define MAX_MOUNTS 4
static char mounts[MAX_MOUNTS][PATH_MAX]; /* "" = free slot */
static bool atexit_set;

static void umount_all(void)
{
    for (int i = 0; i < MAX_MOUNTS; i++)
        if (mounts[i][0]) {
            umount2(mounts[i], MNT_DETACH);
            mounts[i][0] = 0;
        }
}

int fault_mount_tmpfs(const char *dir, const char *size)
{
    if (mkdir(dir, 0755) && errno != EEXIST)
        return -errno;
    int slot = -1;
    for (int i = 0; i < MAX_MOUNTS && slot < 0; i++)
        if (!mounts[i][0])
            slot = i;
    if (slot < 0 || strlen(dir) >= PATH_MAX)
        return -ENOSPC;
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s,mode=0755", size);
    if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) != 0)
        return -errno;
    strcpy(mounts[slot], dir);
    if (!atexit_set) {
        atexit(umount_all);
        atexit_set = true;
    }
    return 0;
}

int fault_grow_tmpfs(const char *dir, const char *size)
{
    char opts[64];
    snprintf(opts, sizeof opts, "size=%s,mode=0755", size);
    return mount("tmpfs", dir, "tmpfs", MS_REMOUNT | MS_NOSUID | MS_NODEV, opts) ? -errno : 0;
}

void fault_umount(const char *dir)
{
    for (int i = 0; i < MAX_MOUNTS; i++)
        if (mounts[i][0] && !strcmp(mounts[i], dir)) {
            umount2(dir, MNT_DETACH);
            mounts[i][0] = 0;
        }
}

/* ---- daemons ---------------------------------------------------------- */

int fault_cluster_init(struct fault_cluster *c, const char *tag, const char *mdsl_bin,
                       const char *mds_bin)
{
    memset(c, 0, sizeof *c);
    c->mdsl_bin = mdsl_bin;
    c->mds_bin = mds_bin;
    int rc = pom_tmpdir(tag, c->base, sizeof c->base);
    if (rc < 0)
        return rc;
    char dir[300];
    snprintf(dir, sizeof dir, "%s/mdsl", c->base);
    if (mkdir(dir, 0755) && errno != EEXIST)
        return -errno;
    if ((c->mdsl_port = pom_free_port()) < 0)
        return c->mdsl_port;
    if ((c->mds_port = pom_free_port()) < 0)
        return c->mds_port;
    snprintf(c->mds_addr, sizeof c->mds_addr, "127.0.0.1:%d", c->mds_port);
    return 0;
}

/* Spawns argv and waits until it listens or exits. */
static int spawn(struct fault_cluster *c, char *const argv[], const char *name, int port,
                 pid_t *pid)
{
    char log[300];
    snprintf(log, sizeof log, "%s/%s.log", c->base, name);
    *pid = pom_proc_spawn(argv, log);
    if (*pid <= 0) {
        int rc = *pid < 0 ? *pid : -ECHILD;
        *pid = 0;
        return rc;
    }
    int wait_ms = c->start_wait_ms > 0 ? c->start_wait_ms : 30000;
    for (int waited = 0; waited < wait_ms; waited += 50) {
        if (pom_proc_wait_port("127.0.0.1", port, 50) == 0)
            return 0;
        if (!pom_proc_alive(*pid)) {
            *pid = 0;
            return -ECHILD;
        }
    }
    return -ETIMEDOUT;
}

int fault_start_mdsl(struct fault_cluster *c, const char *fault, const char *const *extra)
{
    char dir[300], listen[32];
    snprintf(dir, sizeof dir, "%s/mdsl", c->base);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", c->mdsl_port);
    char *argv[32] = { (char *)c->mdsl_bin, (char *)"--dir", dir, (char *)"--listen", listen };
    int n = 5;
    if (fault) {
        argv[n++] = (char *)"--fault";
        argv[n++] = (char *)fault;
    }
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return spawn(c, argv, "mdsl", c->mdsl_port, &c->mdsl);
}

int fault_start_mds(struct fault_cluster *c, const char *fault, int interval_ms)
{
    char mdsl[32], interval[16];
    snprintf(mdsl, sizeof mdsl, "127.0.0.1:%d", c->mdsl_port);
    snprintf(interval, sizeof interval, "%d", interval_ms);
    char *argv[] = { (char *)c->mds_bin, (char *)"--mdsl", mdsl, (char *)"--listen",
                     c->mds_addr, (char *)"--commit-interval-ms", interval,
                     fault ? (char *)"--fault" : NULL, (char *)fault, NULL };
    return spawn(c, argv, "mds", c->mds_port, &c->mds);
}

int fault_stop(pid_t *pid, int grace_ms)
{
    if (*pid <= 0)
        return 0;
    pid_t p = *pid;
    *pid = 0;
    int st = 0;
    bool killed = false;
    if (!pom_proc_alive(p)) {
        /* It died before we asked: a crash, whatever the status. */
        fprintf(stderr, "fault: pid %d died on its own\n", (int)p);
        return 1;
    }
    kill(p, SIGTERM);
    if (pom_proc_wait(p, grace_ms, &st) != 0) {
        fprintf(stderr, "fault: pid %d ignored SIGTERM for %d ms: SIGKILL\n", (int)p, grace_ms);
        kill(p, SIGKILL);
        killed = true;
        pom_proc_wait(p, 10000, &st);
    }
    if (WIFSIGNALED(st) && !(killed && WTERMSIG(st) == SIGKILL) && WTERMSIG(st) != SIGTERM) {
        fprintf(stderr, "fault: pid %d died of signal %d\n", (int)p, WTERMSIG(st));
        return 1;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) > 1) {
        fprintf(stderr, "fault: pid %d exited %d (sanitizer report?)\n", (int)p,
                WEXITSTATUS(st));
        return 1;
    }
    return 0;
}

int fault_cluster_stop(struct fault_cluster *c)
{
    /* MDS first: its SIGTERM commits what is dirty (bounded ~10 s). */
    return fault_stop(&c->mds, 30000) + fault_stop(&c->mdsl, 15000);
}

void fault_cluster_destroy(struct fault_cluster *c)
{
    fault_cluster_stop(c);
    if (c->base[0]) {
        char dir[300];
        snprintf(dir, sizeof dir, "%s/mdsl", c->base);
        fault_umount(dir);
        if (getenv("POM_FAULT_KEEP"))
            fprintf(stderr, "fault: kept %s (POM_FAULT_KEEP)\n", c->base);
        else
            pom_rm_rf(c->base);
        c->base[0] = 0;
    }
}

/* ---- files ------------------------------------------------------------ */

int fault_write_file(pom_fs *fs, pom_ino parent, const char *name, uint32_t i, size_t len)
{
    struct stat st;
    pom_file *f = NULL;
    int rc = pom_create(fs, parent, name, 0644, O_WRONLY | O_CREAT | O_EXCL, NULL, &st, &f);
    if (rc < 0)
        return rc;
    uint8_t buf[4096];
    for (size_t off = 0; off < len && rc >= 0; off += sizeof buf) {
        size_t n = len - off < sizeof buf ? len - off : sizeof buf;
        for (size_t k = 0; k < n; k++)
            buf[k] = fault_pattern(i, off + k);
        ssize_t w = pom_write(f, buf, n, (off_t)off);
        if (w < 0)
            rc = (int)w;
        else if ((size_t)w != n)
            rc = -EIO;
    }
    int rr = pom_release(f);
    pom_forget(fs, st.st_ino, 1);
    return rc < 0 ? rc : rr;
}

int fault_check_file(pom_fs *fs, pom_ino parent, const char *name, uint32_t i, size_t len)
{
    struct stat st;
    int rc = pom_lookup(fs, parent, name, &st);
    if (rc < 0)
        return rc;
    pom_file *f = NULL;
    if ((size_t)st.st_size != len)
        rc = -EBADMSG;
    else
        rc = pom_file_open(fs, st.st_ino, O_RDONLY, &f);
    uint8_t buf[4096];
    for (size_t off = 0; rc == 0 && off < len; off += sizeof buf) {
        size_t n = len - off < sizeof buf ? len - off : sizeof buf;
        ssize_t r = pom_read(f, buf, n, (off_t)off);
        if (r < 0) {
            rc = (int)r;
            break;
        }
        if ((size_t)r != n)
            rc = -EBADMSG;
        for (size_t k = 0; rc == 0 && k < n; k++)
            if (buf[k] != fault_pattern(i, off + k))
                rc = -EBADMSG;
    }
    if (f)
        pom_release(f);
    pom_forget(fs, st.st_ino, 1);
    return rc;
}
