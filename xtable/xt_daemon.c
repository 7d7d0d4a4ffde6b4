/*
 * xt_daemon.c -- signals, port/pid files and option parsing for daemons.
 */
#include "xt_daemon.h"
#include "xt_common.h"

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
