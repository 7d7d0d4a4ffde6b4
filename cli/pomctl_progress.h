/*
 * pomctl_progress.h -- the progress line of long pomctl work (fsck over
 * many files, its tract check and repairs): on a terminal, one line on
 * stderr rewritten in place ("fsck: 12,345 rows, 210 dirs, 3.2 s").
 *
 * Invariants:
 *  (1) Nothing is written unless stderr is a terminal and the output is
 *      not JSON: scripts and logs never see a progress line.
 *  (2) At most one line per POMCTL_PROGRESS_EVERY_MS, the first that long
 *      after the start: quick work prints none.
 *  (3) pomctl_progress_end blanks a line it printed, so what follows (the
 *      report, an error) starts on a clean line.
 *  (4) A line never reaches the terminal's last column (it is cut), so it
 *      never wraps and \r always returns to its start.
 *
 * Usage, in a loop:
 *
 *     if (pomctl_progress_due(&p))
 *         pomctl_progress_show(&p, "%s rows", pomctl_fmt_count(n, b, sizeof b));
 */
#ifndef POMCTL_PROGRESS_H
#define POMCTL_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POMCTL_PROGRESS_EVERY_MS 250

/* Plain struct: lives with the work it reports on. */
struct pomctl_progress {
    bool on;          /* invariant (1) */
    const char *what; /* the line's prefix ("fsck"); borrowed */
    uint64_t t0_ns;   /* start, monotonic */
    uint64_t last_ns; /* the last line (t0_ns before the first) */
    size_t width;     /* columns of the last line printed (0: none shown) */
    size_t cols;      /* the terminal's width: longer lines are cut */
    uint64_t every_ns; /* invariant (2): POMCTL_PROGRESS_EVERY_MS, or
                          $POMCTL_PROGRESS_MS (tests: work that is quick on
                          an idle machine still shows lines) */
};

/* Starts the clock of `what` (a static string). json: the command prints
 * JSON (then, or when stderr is no terminal, the line stays off). */
void pomctl_progress_begin(struct pomctl_progress *p, const char *what, bool json);
/* Whether a line is due now (invariant 2); cheap enough for every row. */
bool pomctl_progress_due(const struct pomctl_progress *p);
/* Writes "\r<what>: <fmt...>, <elapsed> s", blanking what a longer line
 * before left. Call when pomctl_progress_due said so. */
void pomctl_progress_show(struct pomctl_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Blanks the line if one was shown (invariant 3). */
void pomctl_progress_end(struct pomctl_progress *p);

#endif /* POMCTL_PROGRESS_H */
