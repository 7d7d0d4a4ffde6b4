/*
 * xt_time.c -- see xt_time.h. The only file that reads a clock for a
 * timeout; every other module goes through these functions.
 */
#include "xt_time.h"

#include <assert.h>
#include <errno.h>
#include <time.h>

#define NS_PER_MS UINT64_C(1000000)
#define NS_PER_S UINT64_C(1000000000)

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    int rc = clock_gettime(id, &ts);
    assert(rc == 0); /* only EINVAL/EFAULT, impossible for these clocks */
    (void)rc;
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static struct timespec to_timespec(uint64_t ns)
{
    return (struct timespec){ .tv_sec = (time_t)(ns / NS_PER_S),
                              .tv_nsec = (long)(ns % NS_PER_S) };
}

uint64_t xt_now_ns(void)
{
    return clock_ns(CLOCK_REALTIME);
}

uint64_t xt_mono_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

uint64_t xt_mono_ms(void)
{
    return xt_mono_ns() / NS_PER_MS;
}

uint64_t xt_deadline_ms(uint64_t ms)
{
    uint64_t now = xt_mono_ns();
    if (ms > (UINT64_MAX - now) / NS_PER_MS)
        return UINT64_MAX;
    uint64_t d = now + ms * NS_PER_MS;
    assert(d != 0); /* invariant 1 */
    return d;
}

bool xt_deadline_passed(uint64_t deadline)
{
    return xt_mono_ns() >= deadline;
}

uint64_t xt_deadline_left_ms(uint64_t deadline)
{
    uint64_t now = xt_mono_ns();
    return now >= deadline ? 0 : (deadline - now + NS_PER_MS - 1) / NS_PER_MS;
}

void xt_sleep_until(uint64_t deadline)
{
    struct timespec ts = to_timespec(deadline);
    /* Absolute: a signal's EINTR resumes toward the same end (invariant 3). */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

void xt_sleep_ms(uint64_t ms)
{
    xt_sleep_until(xt_deadline_ms(ms));
}

int xt_cond_init_mono(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    int rc = pthread_condattr_init(&ca);
    if (rc)
        return -rc;
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
    return -rc;
}

int xt_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t deadline)
{
    assert(cv && mu);
    if (xt_deadline_passed(deadline))
        return -ETIMEDOUT;
    struct timespec ts = to_timespec(deadline);
    int rc = pthread_cond_timedwait(cv, mu, &ts);
    /* EPERM: mu is not held by this thread (a checking mutex says so). */
    assert(rc == 0 || rc == ETIMEDOUT);
    return rc == ETIMEDOUT ? -ETIMEDOUT : 0;
}

int xt_cond_timedwait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, uint64_t ms)
{
    return xt_cond_wait_until(cv, mu, xt_deadline_ms(ms));
}
