/*
 * pom_cluster.h -- a pom-mdsl + pom-mds pair for integration tests: one
 * temporary folder (data and logs), free loopback ports, stop by pid. The
 * ports are kept across restarts, so a client's address stays valid.
 */
#ifndef POM_CLUSTER_H
#define POM_CLUSTER_H

#include <sys/types.h>

struct pom_cluster {
    char base[256];        /* folder: mdsl/ (data), mdsl.log, mds.log */
    int mdsl_port, mds_port;
    pid_t mdsl, mds;       /* 0 when not running */
    char mds_addr[64];     /* "127.0.0.1:PORT" of the MDS */
};

/* Zeroes c and makes its folder "$TMPDIR/pom-<tag>-XXXXXX". 0 or -errno. */
int pom_cluster_init(struct pom_cluster *c, const char *tag);
/* Starts bin (pom-mdsl) on c's folder and waits until it listens. */
int pom_cluster_start_mdsl(struct pom_cluster *c, const char *bin);
/* Starts bin (pom-mds) against the MDSL with --commit-interval-ms interval
 * and the NULL-terminated extra arguments (may be NULL); waits until it
 * listens. */
int pom_cluster_start_mds(struct pom_cluster *c, const char *bin, int interval_ms,
                          const char *const *extra);
/* SIGKILL of the MDS, waited for (c->mds becomes 0): 0 or -errno. */
int pom_cluster_kill_mds(struct pom_cluster *c);
/* kill_mds, then start_mds(bin, interval_ms, no extra arguments) on the
 * same port: an MDS crash and restart. 0 or -errno. */
int pom_cluster_restart_mds(struct pom_cluster *c, const char *bin, int interval_ms);
/* init + start_mdsl + start_mds (commit interval 200 ms): the usual
 * fixture of a client test. 0 or -errno. */
int pom_cluster_up(struct pom_cluster *c, const char *tag, const char *mdsl_bin,
                   const char *mds_bin);
/* Stops both daemons (SIGTERM, then SIGKILL) and removes the folder. */
void pom_cluster_destroy(struct pom_cluster *c);

#endif
