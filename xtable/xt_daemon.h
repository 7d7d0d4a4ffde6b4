/*
 * xt_daemon.h -- what every Pomegranate daemon's main() shares: signal
 * handling for a clean shutdown, port and pid files for the tools and tests
 * that start daemons on free ports, strict number parsing for options, and
 * the `--crash-point` option every daemon shares (xt_crash.h).
 */
#ifndef XT_DAEMON_H
#define XT_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Blocks SIGINT, SIGTERM and SIGHUP in the calling thread, so every thread
 * started afterwards inherits the mask and only xt_daemon_wait_signal sees
 * them; ignores SIGPIPE. Call first in main(). */
void xt_daemon_block_signals(void);
/* Waits for SIGINT/SIGTERM/SIGHUP; returns the signal number. */
int xt_daemon_wait_signal(void);
/* Whether SIGINT or SIGTERM is pending (blocked, not yet waited for): the
 * waits of a daemon's start poll it, so a stop is not held up until they
 * time out. The signal stays pending. */
bool xt_daemon_stop_pending(void);

/* Writes "port\n" (or "pid\n") atomically (temp file + rename) so a reader
 * never sees a partial number. Returns 0 or -errno. */
int xt_daemon_write_int_file(const char *path, long value);

/* Parses a whole decimal number with an optional K/M/G suffix (powers of
 * 1024) into *out, within [min, max]. Returns 0 or -EINVAL. */
int xt_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* `--crash-point NAME[:N]`: checks that NAME is one of `known` (the
 * daemon's points, NULL-terminated) and arms it (xt_crash_arm). On a bad
 * spec or an unknown name, says so on stderr with the known names and
 * returns -EINVAL (nothing armed). */
int xt_daemon_crash_option(const char *spec, const char *const *known);
/* The option's line for --help, listing `known`. */
void xt_daemon_crash_usage(FILE *f, const char *const *known);

#ifdef __cplusplus
}
#endif
#endif /* XT_DAEMON_H */
