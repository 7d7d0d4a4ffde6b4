/*
 * pomctl_progress.c -- the progress line (see pomctl_progress.h).
 */
#include "pomctl_progress.h"

#include "xt_time.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

void pomctl_progress_begin(struct pomctl_progress *p, const char *what, bool json)
{
    memset(p, 0, sizeof *p);
    p->on = !json && isatty(STDERR_FILENO);
    struct winsize ws;
    p->cols = ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col : 80;
    p->what = what;
    const char *ms = getenv("POMCTL_PROGRESS_MS");
    long v = ms ? strtol(ms, NULL, 10) : 0;
    p->every_ns = (uint64_t)(v > 0 && v <= 60000 ? v : POMCTL_PROGRESS_EVERY_MS) * 1000000;
    p->t0_ns = p->last_ns = xt_mono_ns();
}

bool pomctl_progress_due(const struct pomctl_progress *p)
{
    return p->on && xt_mono_ns() - p->last_ns >= p->every_ns;
}

void pomctl_progress_show(struct pomctl_progress *p, const char *fmt, ...)
{
    if (!p->on)
        return;
    uint64_t now = xt_mono_ns();
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char head[256], tail[32];
    int hn = snprintf(head, sizeof head, "%s: %s", p->what, msg);
    int tn = snprintf(tail, sizeof tail, ", %.1f s", (double)(now - p->t0_ns) / 1e9);
    size_t hw = hn < 0 ? 0 : (size_t)hn < sizeof head ? (size_t)hn : sizeof head - 1;
    size_t tw = tn < 0 ? 0 : (size_t)tn < sizeof tail ? (size_t)tn : sizeof tail - 1;
    /* invariant (4): the message is cut, the elapsed time kept */
    if (hw + tw > p->cols - 1)
        head[hw = p->cols - 1 > tw ? p->cols - 1 - tw : 0] = '\0';
    char line[300];
    snprintf(line, sizeof line, "%s%s", head, tail);
    size_t w = hw + tw;
    /* spaces over the rest of a longer line before */
    fprintf(stderr, "\r%s%*s", line, p->width > w ? (int)(p->width - w) : 0, "");
    fflush(stderr);
    p->width = w;
    p->last_ns = now;
}

void pomctl_progress_end(struct pomctl_progress *p)
{
    if (p->on && p->width) {
        fprintf(stderr, "\r%*s\r", (int)p->width, "");
        fflush(stderr);
    }
    p->width = 0;
}
