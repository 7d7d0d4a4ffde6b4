/*
 * pom_zk.c -- a throw-away ZooKeeper server for tests; see pom_zk.h.
 */
#include "pom_zk.h"

#include "pom_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ZK_JAR "/usr/share/java/zookeeper.jar"
#define ZK_READY_MS 30000

static const char *java_bin(void)
{
    const char *j = getenv("POM_JAVA");
    return j != NULL && j[0] != '\0' ? j : "java";
}

static const char *class_path(void)
{
    const char *cp = getenv("POM_ZK_CLASSPATH");
    return cp != NULL && cp[0] != '\0' ? cp : ZK_JAR;
}

static bool in_path(const char *prog)
{
    if (strchr(prog, '/') != NULL)
        return access(prog, X_OK) == 0;
    const char *path = getenv("PATH");
    if (path == NULL)
        return false;
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *d = strtok_r(buf, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        char f[4352];
        snprintf(f, sizeof f, "%s/%s", d, prog);
        if (access(f, X_OK) == 0)
            return true;
    }
    return false;
}

bool pom_zk_available(void)
{
    return in_path(java_bin()) &&
           (getenv("POM_ZK_CLASSPATH") != NULL || access(ZK_JAR, R_OK) == 0);
}

int pom_zk_4lw(const pom_zk *zk, const char *word, char *buf, int len)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)zk->port) };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int n = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        write(fd, word, strlen(word)) != (ssize_t)strlen(word)) {
        n = -errno;
        close(fd);
        return n;
    }
    struct pollfd pfd = { .fd = fd, .events = POLLIN };
    while (n < len - 1 && poll(&pfd, 1, 1000) == 1) {
        ssize_t r = read(fd, buf + n, (size_t)(len - 1 - n));
        if (r <= 0)
            break;
        n += (int)r;
    }
    close(fd);
    buf[n] = '\0';
    return n;
}

static void echo_log(const pom_zk *zk)
{
    char path[320], line[512];
    snprintf(path, sizeof path, "%s/zk.log", zk->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    fprintf(stderr, "---- %s ----\n", path);
    while (fgets(line, sizeof line, f) != NULL)
        fputs(line, stderr);
    fclose(f);
}

static int write_config(const pom_zk *zk)
{
    char path[320];
    snprintf(path, sizeof path, "%s/zoo.cfg", zk->dir);
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -errno;
    fprintf(f,
            "tickTime=500\n"
            "minSessionTimeout=1000\n"
            "maxSessionTimeout=10000\n"
            "dataDir=%s/data\n"
            "clientPort=%d\n"
            "clientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
            "forceSync=no\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat,cons\n",
            zk->dir, zk->port);
    return fclose(f) == 0 ? 0 : -errno;
}

/* Spawns the JVM on zk->dir and zk->port and waits for "imok". */
static int launch(pom_zk *zk)
{
    char cfg[320], log[320];
    snprintf(cfg, sizeof cfg, "%s/zoo.cfg", zk->dir);
    snprintf(log, sizeof log, "%s/zk.log", zk->dir);
    char *argv[] = {
        (char *)java_bin(), (char *)"-Xmx256m", (char *)"-XX:+UseSerialGC",
        (char *)"-XX:TieredStopAtLevel=1", (char *)"-Djava.net.preferIPv4Stack=true",
        (char *)"-cp", (char *)class_path(),
        (char *)"org.apache.zookeeper.server.ZooKeeperServerMain", cfg, NULL,
    };
    pid_t pid = pom_proc_spawn(argv, log);
    if (pid < 0)
        return (int)pid;
    zk->pid = pid;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        char buf[16];
        if (pom_zk_4lw(zk, "ruok", buf, sizeof buf) > 0 && strcmp(buf, "imok") == 0)
            return 0;
        if (!pom_proc_alive(pid)) {
            zk->pid = 0;
            echo_log(zk);
            return -ECHILD;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ZK_READY_MS) {
            pom_proc_stop(pid, 2000);
            zk->pid = 0;
            echo_log(zk);
            return -ETIMEDOUT;
        }
        usleep(50000);
    }
}

int pom_zk_start(pom_zk *zk)
{
    memset(zk, 0, sizeof *zk);
    if (!pom_zk_available())
        return -ENOENT;
    int rc = pom_tmpdir("zk", zk->dir, sizeof zk->dir);
    if (rc < 0)
        return rc;
    for (int attempt = 0; attempt < 3; attempt++) {
        zk->port = pom_free_port();
        if (zk->port < 0) {
            rc = zk->port;
            break;
        }
        snprintf(zk->hosts, sizeof zk->hosts, "127.0.0.1:%d", zk->port);
        rc = write_config(zk);
        if (rc == 0)
            rc = launch(zk);
        if (rc != -ECHILD)
            break; /* -ECHILD: it died, perhaps the port was taken: retry */
    }
    if (rc < 0) {
        pom_rm_rf(zk->dir);
        zk->dir[0] = '\0';
    }
    return rc;
}

int pom_zk_stop(pom_zk *zk)
{
    if (zk->pid <= 0)
        return 0;
    int rc = pom_proc_stop(zk->pid, 5000);
    zk->pid = 0;
    return rc;
}

int pom_zk_restart(pom_zk *zk)
{
    int rc = pom_zk_stop(zk);
    return rc < 0 ? rc : launch(zk);
}

int pom_zk_pause(pom_zk *zk)
{
    return pom_proc_kill(zk->pid, SIGSTOP);
}

int pom_zk_resume(pom_zk *zk)
{
    return pom_proc_kill(zk->pid, SIGCONT);
}

void pom_zk_destroy(pom_zk *zk)
{
    pom_zk_stop(zk);
    if (zk->dir[0] != '\0')
        pom_rm_rf(zk->dir);
    zk->dir[0] = '\0';
}
