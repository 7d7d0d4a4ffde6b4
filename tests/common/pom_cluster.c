/*
 * pom_cluster.c -- see pom_cluster.h.
 */
#include "pom_cluster.h"
#include "pom_proc.h"

#include <signal.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int pom_cluster_init(struct pom_cluster *c, const char *tag)
{
    memset(c, 0, sizeof *c);
    return pom_tmpdir(tag, c->base, sizeof c->base);
}

/* Spawns argv with its output in <base>/<name>.log and waits for port. */
static int spawn(struct pom_cluster *c, char *const argv[], const char *name, int port,
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
    return pom_proc_wait_port("127.0.0.1", port, 30000);
}

int pom_cluster_start_mdsl(struct pom_cluster *c, const char *bin)
{
    char dir[300], listen[32];
    snprintf(dir, sizeof dir, "%s/mdsl", c->base);
    if (mkdir(dir, 0755) && errno != EEXIST)
        return -errno;
    if (!c->mdsl_port && (c->mdsl_port = pom_free_port()) < 0)
        return c->mdsl_port;
    snprintf(listen, sizeof listen, "127.0.0.1:%d", c->mdsl_port);
    char *argv[] = { (char *)bin, (char *)"--dir", dir, (char *)"--listen", listen, NULL };
    return spawn(c, argv, "mdsl", c->mdsl_port, &c->mdsl);
}

int pom_cluster_start_mds(struct pom_cluster *c, const char *bin, int interval_ms,
                          const char *const *extra)
{
    char mdsl[32], interval[16];
    snprintf(mdsl, sizeof mdsl, "127.0.0.1:%d", c->mdsl_port);
    snprintf(interval, sizeof interval, "%d", interval_ms);
    if (!c->mds_port && (c->mds_port = pom_free_port()) < 0)
        return c->mds_port;
    snprintf(c->mds_addr, sizeof c->mds_addr, "127.0.0.1:%d", c->mds_port);
    char *argv[32] = { (char *)bin, (char *)"--mdsl", mdsl, (char *)"--listen", c->mds_addr,
                       (char *)"--commit-interval-ms", interval };
    int n = 7;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    return spawn(c, argv, "mds", c->mds_port, &c->mds);
}

int pom_cluster_kill_mds(struct pom_cluster *c)
{
    int rc = pom_proc_kill(c->mds, SIGKILL);
    int wrc = pom_proc_wait(c->mds, 10000, NULL);
    c->mds = 0;
    return rc < 0 ? rc : wrc < 0 ? wrc : 0;
}

int pom_cluster_restart_mds(struct pom_cluster *c, const char *bin, int interval_ms)
{
    int rc = pom_cluster_kill_mds(c);
    return rc < 0 ? rc : pom_cluster_start_mds(c, bin, interval_ms, NULL);
}

void pom_cluster_destroy(struct pom_cluster *c)
{
    if (c->mds > 0)
        pom_proc_stop(c->mds, 30000);
    if (c->mdsl > 0)
        pom_proc_stop(c->mdsl, 10000);
    c->mds = c->mdsl = 0;
    if (c->base[0])
        pom_rm_rf(c->base);
}

int pom_cluster_up(struct pom_cluster *c, const char *tag, const char *mdsl_bin,
                   const char *mds_bin)
{
    int rc = pom_cluster_init(c, tag);
    if (rc == 0)
        rc = pom_cluster_start_mdsl(c, mdsl_bin);
    if (rc == 0)
        rc = pom_cluster_start_mds(c, mds_bin, 200, NULL);
    return rc;
}
