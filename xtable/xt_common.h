/*
 * xt_common.h -- what every module of Pomegranate shares: the error
 * convention, allocation through one wrapper, logging and small helpers.
 *
 * Invariants:
 *  (1) Every function that can fail returns 0 (or a non-negative count) on
 *      success and a negative errno on failure. Detail that errno loses goes
 *      into the log line at the failure site.
 *  (2) All heap memory of the C modules comes from xt_malloc/xt_calloc/
 *      xt_realloc/xt_strdup, so a test can make the N-th allocation fail
 *      (countdown fault injection, as SQLite's faultsimStep).
 */
#ifndef XT_COMMON_H
#define XT_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <unistd.h>

#include "xt_time.h" /* clocks: every module measures time */

#ifdef __cplusplus
extern "C" {
#endif

#define XT_LIKELY(x)   __builtin_expect(!!(x), 1)
#define XT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define XT_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define XT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define XT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define XT_EXPORT __attribute__((visibility("default")))

/* Limits shared by every layer (POSIX NAME_MAX; FUSE's 63-bit offsets). */
#define XT_NAME_MAX 255

/* ---- allocation (xt_alloc.c) ---------------------------------------- */

/* Same contracts as malloc/calloc/realloc/strdup; free with xt_free. */
void *xt_malloc(size_t n);
void *xt_calloc(size_t n, size_t size);
void *xt_realloc(void *p, size_t n);
char *xt_strdup(const char *s);
void xt_free(void *p);

/* Fault injection: after `countdown` more successful allocations, every
 * allocation fails (returns NULL) until xt_alloc_fail_after(-1) disarms it.
 * Returns the number of allocations that failed since the last arm. */
long xt_alloc_fail_after(long countdown);

/* ---- logging (xt_log.c) ---------------------------------------------- */

enum xt_log_level { XT_LOG_ERROR = 0, XT_LOG_WARN, XT_LOG_INFO, XT_LOG_DEBUG };
void xt_log_set_level(enum xt_log_level level);
void xt_log_set_prefix(const char *prefix); /* copied; e.g. "mds[3]" */
/* Lines dropped (stderr's disk had no room for them) and not yet said. */
uint64_t xt_log_dropped(void);
void xt_log(enum xt_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define XT_ERR(...)  xt_log(XT_LOG_ERROR, __VA_ARGS__)
#define XT_WARN(...) xt_log(XT_LOG_WARN, __VA_ARGS__)
#define XT_INFO(...) xt_log(XT_LOG_INFO, __VA_ARGS__)
#define XT_DBG(...)  xt_log(XT_LOG_DEBUG, __VA_ARGS__)

/* Rate limit of one call site (static, zeroed; fields used atomically). */
struct xt_log_limit {
    uint64_t next_ns;   /* xt_mono_ns() before which lines are dropped */
    uint64_t dropped;   /* lines dropped since the last one written */
};
/* xt_log, at most one line per interval_ms from one call site; the line
 * written after drops says how many were dropped. Thread-safe. */
void xt_log_limited(struct xt_log_limit *lim, unsigned interval_ms, enum xt_log_level level,
                    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* For errors a peer can repeat at will (one per connection, per accept). */
#define XT_WARN_RL(interval_ms, ...)                                          \
    do {                                                                      \
        static struct xt_log_limit xt_lim_;                                   \
        xt_log_limited(&xt_lim_, (interval_ms), XT_LOG_WARN, __VA_ARGS__);    \
    } while (0)
#define XT_INFO_RL(interval_ms, ...)                                          \
    do {                                                                      \
        static struct xt_log_limit xt_lim_;                                   \
        xt_log_limited(&xt_lim_, (interval_ms), XT_LOG_INFO, __VA_ARGS__);    \
    } while (0)

/* ---- lock ownership, for asserts ------------------------------------- */

/* True when the calling thread holds mu, for assert(xt_mutex_held(&x->mu))
 * where a comment says "REQUIRES: mu held" or "protected by mu". glibc
 * records the owner of every mutex type; elsewhere this is always true, so
 * the assert only stays quiet. No side effect. */
static inline bool xt_mutex_held(const pthread_mutex_t *mu)
{
#ifdef __GLIBC__
    return mu->__data.__owner == gettid();
#else
    (void)mu;
    return true;
#endif
}
/* The same for the write side of a rwlock. */
static inline bool xt_rwlock_wrheld(const pthread_rwlock_t *rw)
{
#ifdef __GLIBC__
    return rw->__data.__cur_writer == gettid();
#else
    (void)rw;
    return true;
#endif
}
/* True when someone holds rw in either mode: a read hold records no owner,
 * so "REQUIRES: lk held" (shared or exclusive) can check only that much.
 * Leaves rw as it found it. */
static inline bool xt_rwlock_held(pthread_rwlock_t *rw)
{
    if (pthread_rwlock_trywrlock(rw) != 0)
        return true;
    pthread_rwlock_unlock(rw);
    return false;
}

/* ---- space -------------------------------------------------------- */

/* A full disk (docs/format-mdsl.md "A full disk"): the bytes of a device
 * of `total` bytes kept for what frees space (deletes, GC), as ext4 keeps
 * blocks for root; the MDSL's default reserve, which the blob tier's local
 * backend keeps too (they share a disk under `pomctl up`). */
static inline uint64_t xt_disk_reserve(uint64_t total)
{
    uint64_t r = total / 16;
    return r < (UINT64_C(1) << 20) ? UINT64_C(1) << 20
           : r > (UINT64_C(256) << 20) ? UINT64_C(256) << 20 : r;
}

/* ---- little-endian fixed-width encoding (on-disk and codec formats) -- */

static inline void xt_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8);
}
static inline void xt_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void xt_put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t xt_get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t xt_get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t xt_get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

#ifdef __cplusplus
}
#endif
#endif /* XT_COMMON_H */
