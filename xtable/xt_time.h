/*
 * xt_time.h -- clocks, deadlines, sleeps and timed waits, all on one clock.
 *
 * Every deadline, timeout and period in Pomegranate is measured on
 * CLOCK_MONOTONIC: a wall-clock step (NTP, an operator's `date -s`) must not
 * fire or postpone a timeout. CLOCK_REALTIME is for file times only
 * (xt_now_ns).
 *
 * Invariants:
 *  (1) A deadline is an absolute CLOCK_MONOTONIC time in ns (uint64_t), made
 *      by xt_deadline_ms; 0 is never a valid deadline (the clock starts at
 *      boot, well above 0), so a zeroed field reads "no deadline" to callers
 *      that want one.
 *  (2) A condition variable waited on with xt_cond_timedwait_ms or
 *      xt_cond_wait_until was made by xt_cond_init_mono (its clock is
 *      CLOCK_MONOTONIC); a default-initialised one would read the monotonic
 *      deadline as a wall-clock time in 1970 and time out at once.
 *  (3) Sleeps and timed waits resume after EINTR until their deadline: a
 *      signal never shortens them.
 */
#ifndef XT_TIME_H
#define XT_TIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CLOCK_REALTIME in ns: file times (st_mtime and friends), never timeouts. */
uint64_t xt_now_ns(void);
/* CLOCK_MONOTONIC in ns / ms: deadlines, periods, latency. */
uint64_t xt_mono_ns(void);
uint64_t xt_mono_ms(void);

/* The deadline `ms` from now (invariant 1); saturates instead of wrapping. */
uint64_t xt_deadline_ms(uint64_t ms);
/* True once the monotonic clock has reached `deadline`. */
bool xt_deadline_passed(uint64_t deadline);
/* Whole ms left until `deadline`, rounded up; 0 once it has passed. */
uint64_t xt_deadline_left_ms(uint64_t deadline);

/* Sleeps `ms` (invariant 3). */
void xt_sleep_ms(uint64_t ms);
/* Sleeps until the monotonic clock reaches `deadline` (invariant 3). */
void xt_sleep_until(uint64_t deadline);

/* pthread_cond_init on CLOCK_MONOTONIC (invariant 2). Returns 0 or -errno.
 * Destroy with pthread_cond_destroy. */
int xt_cond_init_mono(pthread_cond_t *cv);
/* One pthread_cond_timedwait of at most `ms`. Returns 0 when woken (maybe
 * spuriously: the caller rechecks its predicate) or -ETIMEDOUT.
 * REQUIRES: mu held by the caller; cv made by xt_cond_init_mono. */
int xt_cond_timedwait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ms);
/* The same up to an absolute deadline; -ETIMEDOUT at once if it passed.
 * The caller loops `while (!pred && xt_cond_wait_until(..) == 0)`.
 * REQUIRES: mu held by the caller; cv made by xt_cond_init_mono. */
int xt_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline);

#ifdef __cplusplus
}
#endif
#endif /* XT_TIME_H */
