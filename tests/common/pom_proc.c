/*
 * pom_proc.c -- spawning, watching and stopping test daemons; see
 * pom_proc.h for the invariants (no child outlives the test; pids only).
 */
#include "pom_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHILDREN 64

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t children[MAX_CHILDREN]; /* protected by reg_mu; 0 = free */
static bool atexit_done;             /* protected by reg_mu */

static void kill_all_children(void)
{
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] > 0) {
            kill(children[i], SIGKILL);
            waitpid(children[i], NULL, 0);
            children[i] = 0;
        }
    }
    pthread_mutex_unlock(&reg_mu);
}

static void reg_add(pid_t pid)
{
    pthread_mutex_lock(&reg_mu);
    if (!atexit_done) {
        atexit(kill_all_children);
        atexit_done = true;
    }
    for (int i = 0; i < MAX_CHILDREN; i++) {
        if (children[i] == 0) {
            children[i] = pid;
            break;
        }
    }
    pthread_mutex_unlock(&reg_mu);
}

static void reg_del(pid_t pid)
{
    pthread_mutex_lock(&reg_mu);
    for (int i = 0; i < MAX_CHILDREN; i++)
        if (children[i] == pid)
            children[i] = 0;
    pthread_mutex_unlock(&reg_mu);
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

pid_t pom_proc_spawn(char *const argv[], const char *logfile)
{
    if (argv == NULL || argv[0] == NULL)
        return -EINVAL;
    int errpipe[2];
    if (pipe2(errpipe, O_CLOEXEC) < 0)
        return -errno;
    int out = open(logfile != NULL ? logfile : "/dev/null",
                   O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (out < 0 || in < 0) {
        int e = errno;
        if (out >= 0)
            close(out);
        if (in >= 0)
            close(in);
        close(errpipe[0]);
        close(errpipe[1]);
        return -e;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(out);
        close(in);
        close(errpipe[0]);
        close(errpipe[1]);
        return -e;
    }
    if (pid == 0) {
        /* Child: only async-signal-safe calls until exec. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* the parent died before prctl */
        setpgid(0, 0);
        dup2(in, 0);
        dup2(out, 1);
        dup2(out, 2);
        execvp(argv[0], argv);
        int e = errno;
        ssize_t w = write(errpipe[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(out);
    close(in);
    close(errpipe[1]);
    int e = 0;
    ssize_t r;
    do {
        r = read(errpipe[0], &e, sizeof e);
    } while (r < 0 && errno == EINTR);
    close(errpipe[0]);
    if (r == (ssize_t)sizeof e) {
        waitpid(pid, NULL, 0);
        return -e;
    }
    reg_add(pid);
    return pid;
}

int pom_proc_kill(pid_t pid, int sig)
{
    if (pid <= 0)
        return -EINVAL;
    return kill(pid, sig) < 0 ? -errno : 0;
}

int pom_proc_wait(pid_t pid, int timeout_ms, int *status)
{
    long end = now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            reg_del(pid);
            if (status != NULL)
                *status = st;
            return 0;
        }
        if (r < 0)
            return -errno;
        if (now_ms() >= end)
            return -ETIMEDOUT;
        usleep(10000);
    }
}

int pom_proc_stop(pid_t pid, int grace_ms)
{
    if (pid <= 0)
        return -EINVAL;
    kill(pid, SIGCONT); /* a stopped process cannot act on SIGTERM */
    if (kill(pid, SIGTERM) < 0 && errno != ESRCH)
        return -errno;
    if (pom_proc_wait(pid, grace_ms, NULL) == 0)
        return 0;
    kill(pid, SIGKILL);
    return pom_proc_wait(pid, 10000, NULL);
}

bool pom_proc_alive(pid_t pid)
{
    if (pid <= 0)
        return false;
    int st;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
        reg_del(pid);
        return false;
    }
    if (r < 0 && errno == ECHILD)
        return kill(pid, 0) == 0; /* not our child: ask the kernel */
    return r == 0;
}

int pom_proc_wait_port(const char *host, int port, int timeout_ms)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || port <= 0 || port > 65535)
        return -EINVAL;
    long end = now_ms() + timeout_ms;
    do {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -errno;
        int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
        close(fd);
        if (rc == 0)
            return 0;
        usleep(20000);
    } while (now_ms() < end);
    return -ETIMEDOUT;
}

int pom_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in sa = { .sin_family = AF_INET };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    int rc = 0;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        rc = -errno;
    close(fd);
    return rc < 0 ? rc : ntohs(sa.sin_port);
}

int pom_tmpdir(const char *tag, char *buf, size_t len)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    int n = snprintf(buf, len, "%s/pom-%s-XXXXXX", base, tag);
    if (n < 0 || (size_t)n >= len)
        return -ENAMETOOLONG;
    return mkdtemp(buf) != NULL ? 0 : -errno;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
    return rc < 0 && errno != ENOENT ? -errno : 0;
}

int pom_rm_rf(const char *path)
{
    int rc = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (rc < 0 && errno == ENOENT)
        return 0;
    return rc;
}

int pom_send_garbage(int port, unsigned seed, int rounds, const char *method)
{
    size_t mlen = strlen(method);
    if (mlen > 64)
        return -EINVAL;
    for (int round = 0; round < rounds; round++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            int err = -errno;
            if (fd >= 0)
                close(fd);
            return err;
        }
        unsigned char b[400];
        size_t n = 4 + (size_t)(rand_r(&seed) % 250);
        for (size_t i = 0; i < n; i++)
            b[i] = (unsigned char)rand_r(&seed);
        uint32_t l;
        switch (round % 4) {
        case 0: /* plausible length, garbage body */
            l = htonl((uint32_t)(n - 4));
            memcpy(b, &l, 4);
            break;
        case 1: { /* a valid call header (binary protocol, strict), then garbage */
            size_t h = 4;
            static const unsigned char ver[] = { 0x80, 0x01, 0x00, 0x01 };
            memcpy(b + h, ver, 4);
            h += 4;
            l = htonl((uint32_t)mlen);
            memcpy(b + h, &l, 4);
            h += 4;
            memcpy(b + h, method, mlen);
            h += mlen;
            l = htonl(1); /* seqid */
            memcpy(b + h, &l, 4);
            h += 4;
            if (n < h)
                n = h;
            l = htonl((uint32_t)(n - 4));
            memcpy(b, &l, 4);
            break;
        }
        case 2: /* a huge length */
            l = htonl(0x7fffff00u + (uint32_t)(rand_r(&seed) % 255));
            memcpy(b, &l, 4);
            break;
        default: /* random bytes, random length field */
            break;
        }
        ssize_t w = write(fd, b, n);
        (void)w;
        close(fd);
    }
    return 0;
}
