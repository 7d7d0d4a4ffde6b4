/*
 * xt_worker.c -- see xt_worker.h. The wait is a condition variable on the
 * monotonic clock (xt_time.h invariant 2); `wakes` counts every
 * xt_worker_wake, `seen` how many of them a wait has consumed.
 */
#include "xt_worker.h"

#include "xt_common.h"
#include "xt_time.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct xt_worker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t wakes;  /* protected by mu: xt_worker_wake calls, ever */
    uint64_t seen;   /* protected by mu: wakes a wait has consumed (<= wakes) */
    bool stop;       /* protected by mu; also read relaxed by xt_worker_stopping */
    xt_worker_step_fn step;
    void *arg;
    uint64_t first_ms;
    char name[16];
    pthread_t thr;
};

/* Waits up to `ms` for a wake or the stop. Returns true on stop.
 * REQUIRES: w->mu held. */
static bool wait_locked(xt_worker *w, uint64_t ms)
{
    assert(w->seen <= w->wakes);
    uint64_t deadline = ms == XT_WORKER_IDLE ? 0 : xt_deadline_ms(ms);
    while (!w->stop && w->seen == w->wakes) {
        if (ms == XT_WORKER_IDLE)
            pthread_cond_wait(&w->cv, &w->mu);
        else if (xt_cond_wait_until(&w->cv, &w->mu, deadline) == -ETIMEDOUT)
            break;
    }
    w->seen = w->wakes; /* the step about to run sees what they published (2) */
    return w->stop;
}

static void *worker_main(void *arg)
{
    xt_worker *w = arg;
    if (w->name[0])
        pthread_setname_np(pthread_self(), w->name);
    uint64_t ms = w->first_ms;
    pthread_mutex_lock(&w->mu);
    while (!wait_locked(w, ms)) {
        pthread_mutex_unlock(&w->mu); /* invariant 1 */
        ms = w->step(w, w->arg);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int xt_worker_start(const struct xt_worker_opts *o, xt_worker **out)
{
    *out = NULL;
    if (!o || !o->step)
        return -EINVAL;
    xt_worker *w = xt_calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->step = o->step;
    w->arg = o->arg;
    w->first_ms = o->first_ms;
    snprintf(w->name, sizeof w->name, "%s", o->name ? o->name : "");
    pthread_mutex_init(&w->mu, NULL);
    int rc = xt_cond_init_mono(&w->cv);
    if (rc == 0) {
        rc = -pthread_create(&w->thr, NULL, worker_main, w);
        if (rc)
            pthread_cond_destroy(&w->cv);
    }
    if (rc) {
        pthread_mutex_destroy(&w->mu);
        xt_free(w);
        return rc;
    }
    *out = w;
    return 0;
}

void xt_worker_wake(xt_worker *w)
{
    assert(w);
    pthread_mutex_lock(&w->mu);
    w->wakes++;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

bool xt_worker_stopping(xt_worker *w)
{
    assert(w);
    return __atomic_load_n(&w->stop, __ATOMIC_RELAXED);
}

void xt_worker_stop(xt_worker *w)
{
    if (!w)
        return;
    assert(!pthread_equal(pthread_self(), w->thr)); /* a step cannot join itself */
    pthread_mutex_lock(&w->mu);
    __atomic_store_n(&w->stop, true, __ATOMIC_RELAXED);
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thr, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    xt_free(w);
}
