/*
 * mds_test_util.h -- shared by the mds unit tests: a seeded PRNG, self-
 * checking rows, a placement function and a counting/slow store wrapper.
 */
#ifndef MDS_TEST_UTIL_H
#define MDS_TEST_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mds_place.h"
#include "mds_store.h"
#include "xt_common.h"
#include "xt_hash.h"

static inline uint64_t tu_rand(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Seed from MDS_TEST_SEED or the clock; printed so a failure can be replayed. */
static inline uint64_t tu_seed(const char *what)
{
    const char *e = getenv("MDS_TEST_SEED");
    uint64_t s = e ? strtoull(e, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)clock();
    fprintf(stderr, "%s: seed %llu (MDS_TEST_SEED to replay)\n", what, (unsigned long long)s);
    return s;
}

/* Row: id u64 | seq u64 | n u32 | n pattern bytes | checksum u64. */
static inline uint8_t *tu_row(uint64_t id, uint64_t seq, size_t n, size_t *len)
{
    *len = 20 + n + 8;
    uint8_t *r = malloc(*len);
    xt_put_u64(r, id);
    xt_put_u64(r + 8, seq);
    xt_put_u32(r + 16, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        r[20 + i] = (uint8_t)(id * 31 + seq * 7 + i);
    xt_put_u64(r + 20 + n, xt_hash_bytes(r, 20 + n, 42));
    return r;
}

/* 1 if the row is whole and well formed; its id and seq. */
static inline int tu_row_ok(const uint8_t *r, size_t len, uint64_t *id, uint64_t *seq)
{
    if (len < 28)
        return 0;
    uint32_t n = xt_get_u32(r + 16);
    if (len != 28 + (size_t)n || xt_get_u64(r + 20 + n) != xt_hash_bytes(r, 20 + n, 42))
        return 0;
    *id = xt_get_u64(r);
    *seq = xt_get_u64(r + 8);
    return 1;
}

/* Two participants: slices spread over sites 1 and 2; meta and the
 * decision record wherever the same rule says. */
static inline uint32_t tu_locate2(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    (void)arg;
    return 1 + (uint32_t)((table + slice + fsid) & 1);
}

static pthread_once_t tu_place2_once = PTHREAD_ONCE_INIT;
static mds_place *tu_place2_p;
static inline void tu_place2_init(void)
{
    if (mds_place_new(tu_locate2, NULL, &tu_place2_p) < 0)
        abort();
}
/* tu_locate2 as a placement, one for the process (never changed, never
 * freed: reachable until exit). */
static inline mds_place *tu_place2(void)
{
    pthread_once(&tu_place2_once, tu_place2_init);
    return tu_place2_p;
}

static inline void tu_sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* A wrapper store that counts loads and can slow them down. */
struct tu_wrap {
    mds_store inner;
    atomic_uint loads;
    unsigned load_delay_ms;
};

static int tu_w_prepare(void *c, uint32_t s, uint64_t t, const struct xt_store_rec *r, size_t n)
{
    struct tu_wrap *w = c;
    return mds_store_prepare(&w->inner, s, t, r, n);
}
static int tu_w_commit(void *c, uint32_t s, uint64_t t)
{
    struct tu_wrap *w = c;
    return mds_store_commit(&w->inner, s, t);
}
static int tu_w_abort(void *c, uint32_t s, uint64_t t)
{
    struct tu_wrap *w = c;
    return mds_store_abort(&w->inner, s, t);
}
static int tu_w_load(void *c, uint32_t site, xt_slice_id id, struct xt_store_load *o)
{
    struct tu_wrap *w = c;
    atomic_fetch_add(&w->loads, 1);
    if (w->load_delay_ms)
        tu_sleep_ms(w->load_delay_ms);
    return mds_store_load(&w->inner, site, id, o);
}
static int tu_w_list(void *c, uint32_t s, uint64_t **t, size_t *n)
{
    struct tu_wrap *w = c;
    return mds_store_list_prepared(&w->inner, s, t, n);
}
static int tu_w_slices(void *c, uint32_t s, const void *cur, uint32_t cl, uint32_t max,
                       struct xt_store_list *o)
{
    struct tu_wrap *w = c;
    return mds_store_list_slices(&w->inner, s, cur, cl, max, o);
}
static const struct mds_store_ops tu_wrap_ops = {
    tu_w_prepare, tu_w_commit, tu_w_abort, tu_w_load, tu_w_list, tu_w_slices,
};

#endif
