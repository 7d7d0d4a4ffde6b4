/*
 * xt_worker.h -- one background thread that runs a step function again and
 * again, waiting between steps for a timeout, a wake-up or the stop.
 *
 * The shape every Pomegranate background task has (a heartbeat, a monitor,
 * a GC or reload pass, an invalidation queue):
 *
 *      start ──> [wait first_ms] ──> step ──> [wait what step returned] ──┐
 *                      ^                                                  │
 *                      └──────────────────────────────────────────────────┘
 *      xt_worker_wake: ends the current wait (or the next one, if a step is
 *                      running); xt_worker_stop: ends it for good and joins.
 *
 * Invariants:
 *  (1) Steps run one at a time, on the worker's thread, with no lock of the
 *      worker held: a step may block on I/O or an RPC.
 *  (2) A wake is never lost: a wake that comes while a step runs makes the
 *      next wait return at once (a counter, not a flag), so whatever the
 *      waker published is seen by a step that starts after the wake.
 *  (3) After xt_worker_stop returns, no step runs and the thread is joined;
 *      a step in progress is finished first (long steps poll
 *      xt_worker_stopping to cut themselves short).
 */
#ifndef XT_WORKER_H
#define XT_WORKER_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xt_worker xt_worker;

/* A wait with no timeout: until the next wake or the stop. */
#define XT_WORKER_IDLE UINT64_MAX

/* One step. Runs on the worker's thread (invariant 1); `w` is the worker
 * (for xt_worker_stopping), `arg` the opts' arg. Returns how long to wait, in
 * ms, before the next step: 0 = at once, XT_WORKER_IDLE = until a wake. */
typedef uint64_t (*xt_worker_step_fn)(xt_worker *w, void *arg);

struct xt_worker_opts {
    const char *name;       /* thread name (first 15 chars), for top/gdb; copied */
    xt_worker_step_fn step; /* required */
    void *arg;              /* borrowed: must outlive xt_worker_stop */
    uint64_t first_ms;      /* wait before the first step; XT_WORKER_IDLE allowed */
};

/* Starts the thread. Returns 0 and *out, or -EINVAL (no step), -ENOMEM, or
 * -errno of pthread_create. Stop (and free) with xt_worker_stop. */
int xt_worker_start(const struct xt_worker_opts *o, xt_worker **out);
/* Ends the current wait, or the next one if a step is running (invariant 2).
 * Any thread, even the worker's own step; cheap (a lock and a signal). */
void xt_worker_wake(xt_worker *w);
/* True once xt_worker_stop was called: a long step returns early. */
bool xt_worker_stopping(xt_worker *w);
/* Stops, joins and frees the worker (invariant 3). NULL is a no-op.
 * REQUIRES: not called from the worker's own step (it would join itself). */
void xt_worker_stop(xt_worker *w);

#ifdef __cplusplus
}
#endif
#endif /* XT_WORKER_H */
