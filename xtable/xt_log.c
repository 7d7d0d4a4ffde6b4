/*
 * xt_log.c -- one-line log records on stderr: time, level, prefix, message;
 * and the clocks (xt_common.h "time").
 *
 * A record is formatted into a stack buffer and written with one write(2),
 * so lines from concurrent threads never interleave. No lock is taken; a
 * rate-limited call site (XT_WARN_RL) keeps its state in atomics.
 * When stderr is a file on a disk without room for the line, the line is
 * dropped whole and counted (a short write would leave half a line that the
 * next one runs into); the next line written says how many went.
 */
#include "xt_common.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static enum xt_log_level log_level = XT_LOG_INFO;
static char log_prefix[32] = "pom";
static _Atomic int log_to_file = -1;       /* stderr is a regular file; -1 unknown */
static _Atomic uint64_t log_dropped;       /* lines dropped for want of room */

/* Room for len more bytes on stderr's disk, with a page to spare (a file
 * system allocates whole blocks). Always true for pipes and terminals. */
static bool log_room(size_t len)
{
    int f = atomic_load(&log_to_file);
    if (f < 0) {
        struct stat st;
        f = fstat(STDERR_FILENO, &st) == 0 && S_ISREG(st.st_mode);
        atomic_store(&log_to_file, f);
    }
    struct statvfs sv;
    if (!f || fstatvfs(STDERR_FILENO, &sv) < 0)
        return true;
    return (uint64_t)sv.f_bavail * sv.f_frsize >= (uint64_t)len + 2 * sv.f_frsize;
}

uint64_t xt_log_dropped(void)
{
    return atomic_load(&log_dropped);
}

void xt_log_set_level(enum xt_log_level level)
{
    log_level = level;
}

void xt_log_set_prefix(const char *prefix)
{
    snprintf(log_prefix, sizeof log_prefix, "%s", prefix);
}

void xt_log(enum xt_log_level level, const char *fmt, ...)
{
    static const char *names[] = { "E", "W", "I", "D" };
    if (level > log_level)
        return;
    char buf[1024];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(buf, sizeof buf, "%02d:%02d:%02d.%03ld %s %s: ",
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                     names[level], log_prefix);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : XT_MIN((size_t)m, sizeof buf - (size_t)n - 2));
    buf[len++] = '\n';
    if (!log_room(len + 64)) {
        atomic_fetch_add(&log_dropped, 1);
        return;
    }
    uint64_t gone = atomic_exchange(&log_dropped, 0);
    if (gone) {
        char note[96];
        int k = snprintf(note, sizeof note, "%.*s%llu log lines dropped: no room on the disk\n",
                         n, buf, (unsigned long long)gone);
        ssize_t w = write(STDERR_FILENO, note, (size_t)XT_MIN(k, (int)sizeof note - 1));
        (void)w;
    }
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}

void xt_log_limited(struct xt_log_limit *lim, unsigned interval_ms, enum xt_log_level level,
                    const char *fmt, ...)
{
    if (level > log_level)
        return;
    uint64_t now = xt_mono_ns();
    uint64_t next = __atomic_load_n(&lim->next_ns, __ATOMIC_RELAXED);
    /* One thread wins the interval; the others count themselves dropped. */
    if (now < next || !__atomic_compare_exchange_n(&lim->next_ns, &next,
                                                   now + (uint64_t)interval_ms * 1000000u, false,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        __atomic_fetch_add(&lim->dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    uint64_t dropped = __atomic_exchange_n(&lim->dropped, 0, __ATOMIC_RELAXED);
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (dropped)
        xt_log(level, "%s (%llu such lines dropped before)", msg, (unsigned long long)dropped);
    else
        xt_log(level, "%s", msg);
}
