/*
 * pom_rand.h -- the seeded generator of the property tests: splitmix64 over
 * one state per test file, a base seed from $XT_SEED (printed, so a failing
 * run can be replayed) or the clock.
 */
#ifndef POM_RAND_H
#define POM_RAND_H

#include <stdint.h>
#include <stdlib.h>

#include "xt_common.h"

static uint64_t rng_state;

static inline uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (rng_state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline uint64_t base_seed(void)
{
    const char *s = getenv("XT_SEED");
    static uint64_t seed;
    if (!seed)
        seed = s ? strtoull(s, NULL, 0) : (uint64_t)xt_now_ns();
    return seed;
}

#endif
