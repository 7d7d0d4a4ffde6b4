/*
 * xt_daemon.c -- signals, port/pid files and option parsing for daemons.
 */
#include "xt_daemon.h"
#include "xt_common.h"
#include "xt_crash.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static sigset_t stop_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    return set;
}

void xt_daemon_block_signals(void)
{
    sigset_t set = stop_signals();
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

int xt_daemon_wait_signal(void)
{
    sigset_t set = stop_signals();
    int sig = 0;
    while (sigwait(&set, &sig) != 0)
        ;
    return sig;
}

bool xt_daemon_stop_pending(void)
{
    sigset_t set;
    if (sigpending(&set) < 0)
        return false;
    return sigismember(&set, SIGINT) == 1 || sigismember(&set, SIGTERM) == 1;
}

int xt_daemon_write_int_file(const char *path, long value)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", value);
    int rc = write(fd, buf, (size_t)n) == n ? 0 : -EIO;
    if (close(fd) && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path))
        rc = -errno;
    if (rc)
        unlink(tmp);
    return rc;
}

int xt_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    if (shift) {
        end++;
        if (v > (UINT64_MAX >> shift))
            return -EINVAL;
        v <<= shift;
    }
    if (*end || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

static bool crash_known(const char *name, const char *const *known)
{
    for (size_t i = 0; known && known[i]; i++)
        if (strcmp(name, known[i]) == 0)
            return true;
    return false;
}

void xt_daemon_crash_usage(FILE *f, const char *const *known)
{
    fprintf(f, "  --crash-point NAME[:N]   (tests) SIGKILL itself at the N-th pass (default 1)\n"
               "                           of the crash point NAME, one of:");
    for (size_t i = 0; known && known[i]; i++)
        fprintf(f, " %s", known[i]);
    fputc('\n', f);
}

int xt_daemon_crash_option(const char *spec, const char *const *known)
{
    char name[XT_CRASH_NAME_MAX + 1];
    if (!xt_crash_spec_parse(spec, name, NULL) || !crash_known(name, known)) {
        fprintf(stderr, "--crash-point: bad spec '%s' (NAME or NAME:N, N >= 1; NAME one of:",
                spec ? spec : "");
        for (size_t i = 0; known && known[i]; i++)
            fprintf(stderr, " %s", known[i]);
        fprintf(stderr, ")\n");
        return -EINVAL;
    }
    return xt_crash_arm(spec);
}
