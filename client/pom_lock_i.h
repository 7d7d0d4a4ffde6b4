/*
 * pom_lock_i.h -- lock checks for the asserts of libpomegranate: where a
 * comment says "REQUIRES: mu held" or a field is "protected by mu", the
 * function asserts pom_locked(&mu).
 *
 * A default pthread mutex keeps no owner, so the check is that *someone*
 * holds the lock: it catches a caller that took nothing (the usual bug),
 * not one relying on another thread's hold. It leaves the lock as it found
 * it, so it may sit inside assert() (compiled out under NDEBUG).
 */
#ifndef POM_LOCK_I_H
#define POM_LOCK_I_H

#include <pthread.h>
#include <stdbool.h>

static inline bool pom_locked(pthread_mutex_t *mu)
{
    if (pthread_mutex_trylock(mu) != 0)
        return true;
    pthread_mutex_unlock(mu);
    return false;
}

/* The same for a rwlock held in either mode. */
static inline bool pom_rw_locked(pthread_rwlock_t *lk)
{
    if (pthread_rwlock_trywrlock(lk) != 0)
        return true;
    pthread_rwlock_unlock(lk);
    return false;
}

#endif /* POM_LOCK_I_H */
