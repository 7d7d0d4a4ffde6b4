/*
 * pom_zk.h -- a real, standalone ZooKeeper server for tests, from Debian's
 * `zookeeper` package: its own folder (config, data, log), a free loopback
 * port, started as `java -cp /usr/share/java/zookeeper.jar
 * org.apache.zookeeper.server.ZooKeeperServerMain <folder>/zoo.cfg` and
 * stopped by pid (pom_proc.h: it cannot outlive the test).
 *
 * The server runs with tickTime 500 ms, so sessions may last 1..10 s, no
 * fsync (test data only), the admin HTTP server off, and the four-letter
 * word "ruok" on (readiness is "imok", not merely an open port).
 * POM_ZK_CLASSPATH overrides the class path; POM_JAVA the java binary.
 */
#ifndef POM_ZK_H
#define POM_ZK_H

#include <stdbool.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pom_zk {
    pid_t pid;        /* 0 when not running */
    int port;
    char dir[256];    /* owned folder: zoo.cfg, data/, zk.log */
    char hosts[64];   /* "127.0.0.1:<port>", for r2_store_zk_options.hosts */
} pom_zk;

/* Whether java and the ZooKeeper jar are installed (tests skip if not). */
bool pom_zk_available(void);

/* Starts a server in a fresh temporary folder on a free port and waits up
 * to 30 s until it answers "imok". On failure everything is cleaned up and
 * the log is echoed to stderr. Returns 0, -ENOENT (not installed), or
 * -errno. */
int pom_zk_start(pom_zk *zk);

/* Stops the server by pid (SIGTERM, then SIGKILL) keeping folder and port. */
int pom_zk_stop(pom_zk *zk);

/* Starts the server again on the same folder (its data) and port. */
int pom_zk_restart(pom_zk *zk);

/* SIGSTOP / SIGCONT: the server hangs without closing connections, as a
 * partitioned or frozen server would. */
int pom_zk_pause(pom_zk *zk);
int pom_zk_resume(pom_zk *zk);

/* Sends a four-letter word ("ruok", "srvr", ...) and reads the answer into
 * buf. Returns its length or -errno. */
int pom_zk_4lw(const pom_zk *zk, const char *word, char *buf, int len);

/* Stops the server (if running) and removes its folder. Safe to call twice. */
void pom_zk_destroy(pom_zk *zk);

#ifdef __cplusplus
}
#endif
#endif /* POM_ZK_H */
