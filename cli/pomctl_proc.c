/*
 * pomctl_proc.c -- executables, pid files, detached daemons and their
 * careful stopping (see pomctl_proc.h for the invariants).
 *
 * Between fork and exec the child only makes async-signal-safe calls, and
 * everything it needs (argv, the log path) is prepared before the fork:
 * pomctl may have RPC threads.
 */
#include "pomctl_proc.h"

#include "xt_common.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- executables ------------------------------------------------------ */

static bool is_exe(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Tries dir/name (dir may be relative to self_dir when rel is set). */
static int try_dir(const char *dir, size_t dlen, const char *name, char *out, size_t cap)
{
    if (dlen == 0)
        return -ENOENT;
    int n = snprintf(out, cap, "%.*s/%s", (int)dlen, dir, name);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    return is_exe(out) ? 0 : -ENOENT;
}

int pomctl_find_exe(const char *name, const char *bin_dir, const char *self_dir,
                    const char *path_env, char *out, size_t cap)
{
    if (!name || !*name || strchr(name, '/'))
        return -EINVAL;
    int rc;
    if (bin_dir && *bin_dir && (rc = try_dir(bin_dir, strlen(bin_dir), name, out, cap)) != -ENOENT)
        return rc;
    if (self_dir && *self_dir) {
        static const char *const rel[] = { "", "/../mdsl", "/../mds", "/../r2", "/../fuse" };
        for (size_t i = 0; i < XT_ARRAY_SIZE(rel); i++) {
            char dir[PATH_MAX];
            int n = snprintf(dir, sizeof dir, "%s%s", self_dir, rel[i]);
            if (n < 0 || (size_t)n >= sizeof dir)
                return -ENAMETOOLONG;
            if ((rc = try_dir(dir, (size_t)n, name, out, cap)) != -ENOENT)
                return rc;
        }
    }
    for (const char *p = path_env; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        /* An empty PATH entry means the current folder; a daemon started
         * from wherever the user stands is a surprise, so skip it. */
        if (len && (rc = try_dir(p, len, name, out, cap)) != -ENOENT)
            return rc;
        if (!colon)
            break;
        p = colon + 1;
    }
    return -ENOENT;
}

int pomctl_self_dir(char *out, size_t cap)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return -EINVAL;
    *slash = '\0';
    if (strlen(buf) >= cap)
        return -ENAMETOOLONG;
    strcpy(out, buf);
    return 0;
}

/* ---- small files ------------------------------------------------------ */

int pomctl_write_text_file(const char *path, const char *text)
{
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            close(fd);
            unlink(tmp);
            return e;
        }
        off += (size_t)w;
    }
    if (close(fd) < 0 || rename(tmp, path) < 0) {
        int e = -errno;
        unlink(tmp);
        return e;
    }
    return 0;
}

/* Reads up to cap-1 bytes of a small file. */
static int read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t off = 0;
    for (;;) {
        ssize_t r = read(fd, buf + off, cap - 1 - off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = -errno;
            close(fd);
            return e;
        }
        if (r == 0 || (off += (size_t)r) == cap - 1)
            break;
    }
    close(fd);
    buf[off] = '\0';
    return (int)off;
}

int pomctl_read_line_file(const char *path, char *out, size_t cap)
{
    char buf[PATH_MAX + 64];
    int n = read_small(path, buf, sizeof buf);
    if (n < 0)
        return n;
    buf[strcspn(buf, "\n")] = '\0';
    if (strlen(buf) >= cap)
        return -ENAMETOOLONG;
    strcpy(out, buf);
    return 0;
}

static int parse_long(const char *s, const char **end, long *out)
{
    char *e = NULL;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (e == s || errno || v < 0)
        return -EBADMSG;
    *end = e;
    *out = v;
    return 0;
}

int pomctl_read_long_file(const char *path, long *out)
{
    char buf[64];
    int n = read_small(path, buf, sizeof buf);
    if (n < 0)
        return n;
    const char *end;
    if (parse_long(buf, &end, out) || (*end && *end != '\n'))
        return -EBADMSG;
    return 0;
}

int pomctl_pidfile_write(const char *path, pid_t pid, const char *exe)
{
    char text[PATH_MAX + 32];
    int n = snprintf(text, sizeof text, "%ld\n%s\n", (long)pid, exe);
    if (n < 0 || (size_t)n >= sizeof text)
        return -ENAMETOOLONG;
    return pomctl_write_text_file(path, text);
}

int pomctl_pidfile_read(const char *path, pid_t *pid, char *exe, size_t cap)
{
    char buf[PATH_MAX + 32];
    int n = read_small(path, buf, sizeof buf);
    if (n < 0)
        return n;
    const char *end;
    long v;
    if (parse_long(buf, &end, &v) || v <= 1 || v > INT_MAX || *end != '\n')
        return -EBADMSG;
    const char *line2 = end + 1;
    size_t len = strcspn(line2, "\n");
    if (len == 0 || line2[0] != '/' || line2[len] != '\n')
        return -EBADMSG;
    if (exe) {
        if (len >= cap)
            return -ENAMETOOLONG;
        memcpy(exe, line2, len);
        exe[len] = '\0';
    }
    *pid = (pid_t)v;
    return 0;
}

int pomctl_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (strlen(path) >= sizeof buf)
        return -ENAMETOOLONG;
    strcpy(buf, path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                return -errno;
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* ---- processes -------------------------------------------------------- */

bool pomctl_proc_alive(pid_t pid)
{
    if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
        return false;
    /* A zombie answers kill(0) but is gone: look at its state. */
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int n = read_small(path, buf, sizeof buf);
    if (n < 0)
        return n != -ENOENT;
    const char *rp = strrchr(buf, ')'); /* comm may hold spaces and ')' */
    return !(rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X'));
}

int pomctl_proc_owns(pid_t pid, const char *exe)
{
    if (!pomctl_proc_alive(pid))
        return 0;
    char path[64], target[PATH_MAX];
    snprintf(path, sizeof path, "/proc/%ld/exe", (long)pid);
    ssize_t n = readlink(path, target, sizeof target - 1);
    if (n < 0)
        return errno == ENOENT ? 0 : -errno;
    target[n] = '\0';
    static const char deleted[] = " (deleted)";
    size_t dl = sizeof deleted - 1;
    if ((size_t)n > dl && !strcmp(target + n - dl, deleted))
        target[n - dl] = '\0';
    /* The recorded path may hold symlinks or "..": compare resolved. */
    char want[PATH_MAX];
    if (!realpath(exe, want)) {
        if (strlen(exe) >= sizeof want)
            return 0;
        strcpy(want, exe);
    }
    return strcmp(target, want) == 0 ? 1 : 0;
}

pid_t pomctl_proc_spawn(char *const argv[], const char *logfile)
{
    int logfd = open(logfile, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0)
        return -errno;
    int nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullfd < 0) {
        int e = -errno;
        close(logfd);
        return e;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        int e = -errno;
        close(logfd);
        close(nullfd);
        return e;
    }
    pid_t pid = fork();
    if (pid == 0) {
        /* Child: async-signal-safe calls only. dup2 clears CLOEXEC on 0-2;
         * every other fd we own is CLOEXEC, and inherited strays are
         * closed below. */
        setsid();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (dup2(nullfd, 0) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
            goto fail;
        for (int fd = 3; fd < 1024; fd++)
            if (fd != pfd[1])
                close(fd);
        execv(argv[0], argv);
    fail:;
        int e = errno;
        ssize_t w = write(pfd[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    int e = pid < 0 ? -errno : 0;
    close(pfd[1]);
    close(logfd);
    close(nullfd);
    if (pid < 0) {
        close(pfd[0]);
        return e;
    }
    /* The pipe closes at exec (success) or carries errno (failure). */
    int child_errno = 0;
    ssize_t r;
    do
        r = read(pfd[0], &child_errno, sizeof child_errno);
    while (r < 0 && errno == EINTR);
    close(pfd[0]);
    if (r == (ssize_t)sizeof child_errno) {
        waitpid(pid, NULL, 0);
        return -(child_errno ? child_errno : EIO);
    }
    return pid;
}

int pomctl_proc_reap(pid_t pid, int *status)
{
    int st = 0;
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) {
        if (status)
            *status = st;
        return 1;
    }
    if (r < 0 && errno == ECHILD)
        return pomctl_proc_alive(pid) ? 0 : 1;
    return 0;
}

/* Waits up to ms for pid to be gone; reaps it if it is our child. */
static bool wait_gone(pid_t pid, int ms)
{
    uint64_t end = xt_deadline_ms(ms > 0 ? (uint64_t)ms : 0);
    for (;;) {
        waitpid(pid, NULL, WNOHANG);
        if (!pomctl_proc_alive(pid))
            return true;
        if (xt_deadline_passed(end))
            return false;
        xt_sleep_ms(20);
    }
}

int pomctl_proc_stop(pid_t pid, const char *exe, int grace_ms, bool *signalled)
{
    *signalled = false;
    int own = pomctl_proc_owns(pid, exe);
    if (own <= 0)
        return 0; /* gone, or not ours: invariant 1 */
    if (kill(pid, SIGTERM) < 0)
        return errno == ESRCH ? 0 : -errno;
    *signalled = true;
    if (wait_gone(pid, grace_ms))
        return 0;
    /* Re-check: between the checks the pid cannot be reused while it is
     * still alive, but it may have exited and been replaced. */
    if (pomctl_proc_owns(pid, exe) <= 0)
        return 0;
    if (kill(pid, SIGKILL) < 0 && errno != ESRCH)
        return -errno;
    return wait_gone(pid, 5000) ? 0 : -ETIMEDOUT;
}

/* ---- mounts ----------------------------------------------------------- */

/* Undoes the octal escapes of /proc/self/mountinfo ("\040" for a space). */
static void unescape_octal(char *s)
{
    char *w = s;
    for (char *r = s; *r;) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 4;
        } else {
            *w++ = *r++;
        }
    }
    *w = '\0';
}

bool pomctl_is_mounted(const char *path)
{
    char want[PATH_MAX];
    if (!realpath(path, want))
        return false;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        /* id parent major:minor root mountpoint ... */
        char *save = NULL, *tok = strtok_r(line, " ", &save);
        for (int i = 0; tok && i < 4; i++)
            tok = strtok_r(NULL, " ", &save);
        if (!tok)
            continue;
        unescape_octal(tok);
        found = strcmp(tok, want) == 0;
    }
    fclose(f);
    return found;
}
