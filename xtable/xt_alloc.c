/*
 * xt_alloc.c -- the one allocation wrapper of the C modules.
 *
 * It exists so that tests can fail the N-th allocation and check that every
 * caller turns it into -ENOMEM without leaking or corrupting (countdown
 * fault injection). The countdown is a process-wide atomic; when disarmed
 * (the normal case) the cost is one relaxed load.
 */
#include "xt_common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic long fail_countdown = -1;  /* -1: disarmed */
static _Atomic long fail_count;

static bool should_fail(void)
{
    long c = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (XT_LIKELY(c < 0))
        return false;
    while (c > 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &c, c - 1))
            return false;
        if (c < 0)
            return false;
    }
    atomic_fetch_add(&fail_count, 1);
    return true;
}

long xt_alloc_fail_after(long countdown)
{
    long failed = atomic_exchange(&fail_count, 0);
    atomic_store(&fail_countdown, countdown < 0 ? -1 : countdown);
    return failed;
}

void *xt_malloc(size_t n)
{
    return should_fail() ? NULL : malloc(n ? n : 1);
}

void *xt_calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : calloc(n ? n : 1, size ? size : 1);
}

void *xt_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : realloc(p, n ? n : 1);
}

char *xt_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = xt_malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

void xt_free(void *p)
{
    free(p);
}
