/*
 * test_xt_worker.c -- the worker thread: steps on a wake, a wake during a
 * step is not lost, a period repeats the step, stop joins (a step in
 * progress finishes, sees xt_worker_stopping, and no step runs after).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>

#include "xt_time.h"
#include "xt_worker.h"

struct probe {
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* monotonic: the test waits for steps on it */
    unsigned steps;       /* (mu) steps run */
    bool gate_closed;     /* (mu) a step waits while set */
    bool in_step;         /* (mu) */
    bool saw_stopping;    /* (mu) a step saw xt_worker_stopping */
    uint64_t next_ms;     /* what each step returns */
    bool spin_to_stop;    /* a step runs until xt_worker_stopping */
};

static void probe_init(struct probe *p, uint64_t next_ms)
{
    *p = (struct probe){ .next_ms = next_ms };
    pthread_mutex_init(&p->mu, NULL);
    assert_int_equal(xt_cond_init_mono(&p->cv), 0);
}

static void probe_fini(struct probe *p)
{
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

static uint64_t step(xt_worker *w, void *arg)
{
    struct probe *p = arg;
    pthread_mutex_lock(&p->mu);
    p->in_step = true;
    p->steps++;
    pthread_cond_broadcast(&p->cv);
    while (p->gate_closed)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    while (p->spin_to_stop && !xt_worker_stopping(w))
        xt_sleep_ms(1);
    pthread_mutex_lock(&p->mu);
    if (xt_worker_stopping(w))
        p->saw_stopping = true;
    p->in_step = false;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return p->next_ms;
}

/* Waits (up to a minute: a hang, not a speed) for `n` steps, idle. */
static void wait_steps(struct probe *p, unsigned n)
{
    uint64_t dl = xt_deadline_ms(60000);
    pthread_mutex_lock(&p->mu);
    while ((p->steps < n || p->in_step) && xt_cond_wait_until(&p->cv, &p->mu, dl) == 0)
        ;
    assert_true(p->steps >= n);
    pthread_mutex_unlock(&p->mu);
}

static unsigned steps_of(struct probe *p)
{
    pthread_mutex_lock(&p->mu);
    unsigned n = p->steps;
    pthread_mutex_unlock(&p->mu);
    return n;
}

static void test_start_rejects(void **state)
{
    (void)state;
    xt_worker *w = (xt_worker *)1;
    struct xt_worker_opts o = { .name = "t" };
    assert_int_equal(xt_worker_start(&o, &w), -EINVAL);
    assert_null(w);
    assert_int_equal(xt_worker_start(NULL, &w), -EINVAL);
    xt_worker_stop(NULL); /* a no-op */
}

/* Idle: no step until a wake; one step per wake. */
static void test_wake(void **state)
{
    (void)state;
    struct probe p;
    probe_init(&p, XT_WORKER_IDLE);
    xt_worker *w;
    struct xt_worker_opts o = { .name = "t-wake", .step = step, .arg = &p,
                                .first_ms = XT_WORKER_IDLE };
    assert_int_equal(xt_worker_start(&o, &w), 0);
    xt_sleep_ms(20);
    assert_int_equal(steps_of(&p), 0);
    xt_worker_wake(w);
    wait_steps(&p, 1);
    xt_sleep_ms(20);
    assert_int_equal(steps_of(&p), 1);
    xt_worker_wake(w);
    wait_steps(&p, 2);
    xt_worker_stop(w);
    assert_int_equal(steps_of(&p), 2);
    assert_false(p.saw_stopping);
    probe_fini(&p);
}

/* Invariant 2: a wake while a step runs makes one more step after it. */
static void test_wake_during_step_not_lost(void **state)
{
    (void)state;
    struct probe p;
    probe_init(&p, XT_WORKER_IDLE);
    p.gate_closed = true;
    xt_worker *w;
    struct xt_worker_opts o = { .step = step, .arg = &p, .first_ms = 0 };
    assert_int_equal(xt_worker_start(&o, &w), 0);
    pthread_mutex_lock(&p.mu); /* the first step runs at once and blocks */
    while (!p.in_step)
        pthread_cond_wait(&p.cv, &p.mu);
    pthread_mutex_unlock(&p.mu);
    xt_worker_wake(w);
    xt_worker_wake(w); /* two wakes in one step: one more step, not two */
    pthread_mutex_lock(&p.mu);
    p.gate_closed = false;
    pthread_cond_broadcast(&p.cv);
    pthread_mutex_unlock(&p.mu);
    wait_steps(&p, 2);
    xt_sleep_ms(20);
    assert_int_equal(steps_of(&p), 2);
    xt_worker_stop(w);
    probe_fini(&p);
}

/* A period: the step runs again and again without wakes. */
static void test_period(void **state)
{
    (void)state;
    struct probe p;
    probe_init(&p, 1);
    xt_worker *w;
    struct xt_worker_opts o = { .name = "t-period", .step = step, .arg = &p, .first_ms = 1 };
    assert_int_equal(xt_worker_start(&o, &w), 0);
    wait_steps(&p, 5);
    xt_worker_stop(w);
    unsigned n = steps_of(&p);
    xt_sleep_ms(10);
    assert_int_equal(steps_of(&p), n); /* invariant 3: none after stop */
    probe_fini(&p);
}

/* Stop during a long step: the step sees xt_worker_stopping and returns;
 * stop returns after it (joined), and no step follows. */
static void test_stop_during_step(void **state)
{
    (void)state;
    struct probe p;
    probe_init(&p, 0); /* would run again at once, were it not stopped */
    p.spin_to_stop = true;
    xt_worker *w;
    struct xt_worker_opts o = { .step = step, .arg = &p, .first_ms = 0 };
    assert_int_equal(xt_worker_start(&o, &w), 0);
    pthread_mutex_lock(&p.mu);
    while (!p.in_step)
        pthread_cond_wait(&p.cv, &p.mu);
    pthread_mutex_unlock(&p.mu);
    xt_worker_stop(w);
    assert_true(p.saw_stopping);
    assert_false(p.in_step);
    assert_int_equal(p.steps, 1);
    probe_fini(&p);
}

/* A first wait of XT_WORKER_IDLE and a stop with no wake: no step at all. */
static void test_stop_idle(void **state)
{
    (void)state;
    struct probe p;
    probe_init(&p, 0);
    xt_worker *w;
    struct xt_worker_opts o = { .step = step, .arg = &p, .first_ms = XT_WORKER_IDLE };
    assert_int_equal(xt_worker_start(&o, &w), 0);
    xt_worker_stop(w);
    assert_int_equal(p.steps, 0);
    probe_fini(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_start_rejects),
        cmocka_unit_test(test_wake),
        cmocka_unit_test(test_wake_during_step_not_lost),
        cmocka_unit_test(test_period),
        cmocka_unit_test(test_stop_during_step),
        cmocka_unit_test(test_stop_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
