/*
 * xt_crash.h -- crash points: the one way a test makes a daemon die by
 * SIGKILL at a chosen place in its code (inside a 2PC, before a sweep), to
 * check what recovery makes of the state left behind.
 *
 * A daemon arms at most one point, from its `--crash-point SPEC` option
 * (xt_daemon_crash_option) or a unit test through xt_crash_arm; the code
 * marks its places with XT_CRASH_POINT("name"). Names are lower case,
 * dotted by module ("xact.participant", "move.prepared", "mdsl.sweep").
 *
 * Invariants:
 *  (1) Unarmed, a crash point costs one relaxed atomic load and a branch.
 *  (2) Armed with "NAME:N", the N-th pass through the point named NAME
 *      (counted from arming, over all threads) logs one line and raises
 *      SIGKILL; other points and other passes do nothing.
 *  (3) No environment variable arms a point: only xt_crash_arm.
 */
#ifndef XT_CRASH_H
#define XT_CRASH_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest point name, without the NUL. */
#define XT_CRASH_NAME_MAX 63

/* Arms the point of `spec`: "NAME" (the first pass) or "NAME:N" (the N-th,
 * N >= 1). NAME is [a-z0-9_.-]{1,63}. Returns 0, or -EINVAL for a
 * malformed spec (nothing armed then). Arming again replaces the point and
 * restarts the count. Call before the threads that pass the points start. */
int xt_crash_arm(const char *spec);
/* Disarms (tests that arm in process). */
void xt_crash_disarm(void);
/* True when `spec` is well formed; `name` (XT_CRASH_NAME_MAX + 1 bytes, may
 * be NULL) gets its NAME part. For option parsers that check known names. */
bool xt_crash_spec_parse(const char *spec, char *name, unsigned long *nth);

/* Not for direct use: the armed flag and the slow path of XT_CRASH_POINT. */
extern int xt_crash_armed_;
void xt_crash_pass_(const char *name);

/* Marks a crash point (invariant 1: the name is compared only when armed). */
#define XT_CRASH_POINT(name)                                                  \
    do {                                                                      \
        if (__builtin_expect(__atomic_load_n(&xt_crash_armed_, __ATOMIC_RELAXED), 0)) \
            xt_crash_pass_(name);                                             \
    } while (0)
/* The same as a function, for a name computed at run time. */
void xt_crash_point(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* XT_CRASH_H */
