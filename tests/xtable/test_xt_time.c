/*
 * test_xt_time.c -- deadlines, sleeps and timed waits on the monotonic clock.
 *
 * No test asserts a speed: each checks a lower bound a correct clock
 * guarantees (a wait to a deadline does not end before it) or an order.
 * A timed wait on a condition variable of the wrong clock ends at once
 * (the monotonic deadline reads as a wall-clock time in 1970): the lower
 * bound catches that.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>

#include "xt_time.h"

#define MS UINT64_C(1000000)

static void test_clocks(void **state)
{
    (void)state;
    uint64_t a = xt_mono_ns(), b = xt_mono_ns();
    assert_true(a > 0 && b >= a);
    uint64_t ms = xt_mono_ms();
    assert_true(ms >= a / MS);
    /* The wall clock is past 2020 (file times); the monotonic one is not it. */
    assert_true(xt_now_ns() > UINT64_C(1577836800) * 1000000000u);
}

static void test_deadlines(void **state)
{
    (void)state;
    uint64_t far = xt_deadline_ms(60000);
    assert_false(xt_deadline_passed(far));
    uint64_t left = xt_deadline_left_ms(far);
    assert_true(left > 0 && left <= 60000);

    uint64_t now = xt_deadline_ms(0);
    assert_true(now != 0);
    assert_true(xt_deadline_passed(now));
    assert_int_equal(xt_deadline_left_ms(now), 0);

    /* Saturates instead of wrapping into the past. */
    assert_int_equal(xt_deadline_ms(UINT64_MAX), UINT64_MAX);
    assert_int_equal(xt_deadline_ms(UINT64_MAX / 1000), UINT64_MAX);
    assert_false(xt_deadline_passed(xt_deadline_ms(UINT64_MAX)));

    uint64_t soon = xt_deadline_ms(15);
    xt_sleep_until(soon);
    assert_true(xt_deadline_passed(soon));
    assert_int_equal(xt_deadline_left_ms(soon), 0);
}

static void on_alarm(int sig)
{
    (void)sig;
}

/* A signal during a sleep (EINTR) does not shorten it. */
static void test_sleep_survives_signals(void **state)
{
    (void)state;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm; /* no SA_RESTART: the sleep sees EINTR */
    struct sigaction old;
    assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
    struct itimerval it = { .it_interval = { 0, 5000 }, .it_value = { 0, 5000 } };
    assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);

    uint64_t t0 = xt_mono_ns();
    xt_sleep_ms(60);
    uint64_t slept = xt_mono_ns() - t0;

    struct itimerval off = { { 0, 0 }, { 0, 0 } };
    setitimer(ITIMER_REAL, &off, NULL);
    sigaction(SIGALRM, &old, NULL);
    assert_true(slept >= 60 * MS);
}

static void test_timedwait_is_monotonic(void **state)
{
    (void)state;
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    assert_int_equal(xt_cond_init_mono(&cv), 0);
    pthread_mutex_lock(&mu);
    uint64_t t0 = xt_mono_ns();
    int rc;
    /* Spurious wake-ups return 0: loop to the deadline as callers do. */
    uint64_t dl = xt_deadline_ms(40);
    while ((rc = xt_cond_wait_until(&cv, &mu, dl)) == 0)
        ;
    assert_int_equal(rc, -ETIMEDOUT);
    assert_true(xt_mono_ns() - t0 >= 40 * MS);

    t0 = xt_mono_ns();
    while ((rc = xt_cond_timedwait_ms(&cv, &mu, 20)) == 0 && xt_mono_ns() - t0 < 20 * MS)
        ;
    assert_true(xt_mono_ns() - t0 >= 20 * MS);

    /* A passed deadline: at once, and the mutex is still held. */
    assert_int_equal(xt_cond_wait_until(&cv, &mu, xt_deadline_ms(0)), -ETIMEDOUT);
    assert_int_equal(pthread_mutex_trylock(&mu), EBUSY);
    pthread_mutex_unlock(&mu);
    pthread_cond_destroy(&cv);
}

struct waker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int flag;
};

static void *wake_later(void *arg)
{
    struct waker *w = arg;
    xt_sleep_ms(10);
    pthread_mutex_lock(&w->mu);
    w->flag = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* A signal ends the wait well before its (one hour) deadline. */
static void test_timedwait_woken(void **state)
{
    (void)state;
    struct waker w = { .mu = PTHREAD_MUTEX_INITIALIZER };
    assert_int_equal(xt_cond_init_mono(&w.cv), 0);
    pthread_t th;
    pthread_mutex_lock(&w.mu);
    assert_int_equal(pthread_create(&th, NULL, wake_later, &w), 0);
    uint64_t dl = xt_deadline_ms(3600 * 1000);
    while (!w.flag)
        assert_int_equal(xt_cond_wait_until(&w.cv, &w.mu, dl), 0);
    pthread_mutex_unlock(&w.mu);
    pthread_join(th, NULL);
    assert_false(xt_deadline_passed(dl));
    pthread_cond_destroy(&w.cv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clocks),
        cmocka_unit_test(test_deadlines),
        cmocka_unit_test(test_sleep_survives_signals),
        cmocka_unit_test(test_timedwait_is_monotonic),
        cmocka_unit_test(test_timedwait_woken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
