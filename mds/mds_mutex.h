/*
 * mds_mutex.h -- a mutex that knows its owner, so that "caller holds mu"
 * and "(mu)" on a field are checked with assert(mds_mutex_held(&mu)).
 *
 * Invariants:
 *  (1) owner is the address of the holding thread's token while it holds
 *      the lock, else 0 or another thread's token: a thread writes its own
 *      token only once it holds the lock and clears it before letting go
 *      (unlock, or a condition wait), so mds_mutex_held is exact for the
 *      calling thread, whatever the others do.
 *  (2) Condition waits go through mds_cond_wait / mds_cond_wait_until (the
 *      cv made by xt_cond_init_mono), which keep (1) across the wait.
 */
#ifndef MDS_MUTEX_H
#define MDS_MUTEX_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "xt_time.h"

typedef struct {
    pthread_mutex_t mu;
    _Atomic uintptr_t owner; /* invariant 1 */
} mds_mutex;

/* One token per thread: its address names the thread. */
static inline uintptr_t mds_mutex_self_(void)
{
    static _Thread_local char token;
    return (uintptr_t)&token;
}

static inline void mds_mutex_init(mds_mutex *m)
{
    pthread_mutex_init(&m->mu, NULL);
    atomic_init(&m->owner, 0);
}

/* REQUIRES: not held by anyone. */
static inline void mds_mutex_destroy(mds_mutex *m)
{
    assert(atomic_load_explicit(&m->owner, memory_order_relaxed) == 0);
    pthread_mutex_destroy(&m->mu);
}

static inline bool mds_mutex_held(mds_mutex *m)
{
    return atomic_load_explicit(&m->owner, memory_order_relaxed) == mds_mutex_self_();
}

/* REQUIRES: not held by the caller (the mutex is not recursive). */
static inline void mds_mutex_lock(mds_mutex *m)
{
    assert(!mds_mutex_held(m));
    pthread_mutex_lock(&m->mu);
    atomic_store_explicit(&m->owner, mds_mutex_self_(), memory_order_relaxed);
}

/* REQUIRES: held by the caller. */
static inline void mds_mutex_unlock(mds_mutex *m)
{
    assert(mds_mutex_held(m));
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&m->mu);
}

/* pthread_cond_wait on m. REQUIRES: m held by the caller. */
static inline void mds_cond_wait(pthread_cond_t *cv, mds_mutex *m)
{
    assert(mds_mutex_held(m));
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
    pthread_cond_wait(cv, &m->mu);
    atomic_store_explicit(&m->owner, mds_mutex_self_(), memory_order_relaxed);
}

/* xt_cond_wait_until on m: 0 when woken, -ETIMEDOUT once deadline passed.
 * REQUIRES: m held by the caller; cv made by xt_cond_init_mono. */
static inline int mds_cond_wait_until(pthread_cond_t *cv, mds_mutex *m, uint64_t deadline)
{
    assert(mds_mutex_held(m));
    atomic_store_explicit(&m->owner, 0, memory_order_relaxed);
    int rc = xt_cond_wait_until(cv, &m->mu, deadline);
    atomic_store_explicit(&m->owner, mds_mutex_self_(), memory_order_relaxed);
    return rc;
}

#endif /* MDS_MUTEX_H */
