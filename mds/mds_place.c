/*
 * mds_place.c -- current and previous ring-1 placement (mds_place.h).
 *
 * A reader-writer lock rather than an atomically swapped pointer: the
 * locate functions run under the read lock, which is what lets a change
 * promise that a dropped placement is no longer in use when it returns
 * (invariant 2) without an epoch scheme. Readers never wait on each other.
 */
#include "mds_place.h"

#include <assert.h>
#include <pthread.h>

#include "xt_common.h"

struct mds_place {
    pthread_rwlock_t lk;
    mds_locate_fn cur_fn, prev_fn; /* prev_fn NULL: no change running (lk) */
    void *cur_arg, *prev_arg;      /* (lk) */
    uint64_t version;              /* (lk) */
    mds_replicas_fn rep_fn;        /* set before use, then read-only */
    uint32_t rep;                  /* 1..MDS_REPLICAS_MAX (same) */
};

int mds_place_new(mds_locate_fn fn, void *arg, mds_place **out)
{
    *out = NULL;
    if (!fn)
        return -EINVAL;
    mds_place *p = xt_calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    /* Loads and commits read all the time: without writer preference a
     * change could wait behind an endless overlap of readers. No reader
     * takes the lock twice, so the non-recursive kind is safe. */
    pthread_rwlockattr_t at;
    pthread_rwlockattr_init(&at);
#ifdef __GLIBC__
    pthread_rwlockattr_setkind_np(&at, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
    int rc = -pthread_rwlock_init(&p->lk, &at);
    pthread_rwlockattr_destroy(&at);
    if (rc < 0) {
        xt_free(p);
        return rc;
    }
    p->cur_fn = fn;
    p->cur_arg = arg;
    p->rep = 1;
    *out = p;
    return 0;
}

void mds_place_free(mds_place *p)
{
    if (!p)
        return;
    pthread_rwlock_destroy(&p->lk);
    xt_free(p);
}

uint64_t mds_place_change(mds_place *p, mds_locate_fn fn, void *arg)
{
    pthread_rwlock_wrlock(&p->lk);
    p->prev_fn = p->cur_fn;
    p->prev_arg = p->cur_arg;
    p->cur_fn = fn;
    p->cur_arg = arg;
    uint64_t v = ++p->version;
    pthread_rwlock_unlock(&p->lk);
    return v;
}

uint64_t mds_place_finish(mds_place *p)
{
    pthread_rwlock_wrlock(&p->lk);
    if (p->prev_fn) {
        p->prev_fn = NULL;
        p->prev_arg = NULL;
        p->version++;
    }
    uint64_t v = p->version;
    pthread_rwlock_unlock(&p->lk);
    return v;
}

uint64_t mds_place_locate(mds_place *p, uint32_t fsid, uint64_t table, uint32_t slice,
                          uint32_t *cur, uint32_t *prev)
{
    pthread_rwlock_rdlock(&p->lk);
    *cur = p->cur_fn(p->cur_arg, fsid, table, slice);
    *prev = p->prev_fn ? p->prev_fn(p->prev_arg, fsid, table, slice) : *cur;
    uint64_t v = p->version;
    pthread_rwlock_unlock(&p->lk);
    return v;
}

uint32_t mds_place_current(mds_place *p, uint32_t fsid, uint64_t table, uint32_t slice)
{
    pthread_rwlock_rdlock(&p->lk);
    uint32_t s = p->cur_fn(p->cur_arg, fsid, table, slice);
    pthread_rwlock_unlock(&p->lk);
    return s;
}

void mds_place_set_replicas(mds_place *p, uint32_t r, mds_replicas_fn fn)
{
    assert(r >= 1 && r <= MDS_REPLICAS_MAX); /* REQUIRES */
    p->rep = r;
    p->rep_fn = fn;
}

uint32_t mds_place_replicas(mds_place *p, uint32_t fsid, uint64_t table, uint32_t slice,
                            uint32_t *sites)
{
    pthread_rwlock_rdlock(&p->lk);
    uint32_t cur = p->cur_fn(p->cur_arg, fsid, table, slice), n = 0;
    if (p->rep > 1 && p->rep_fn)
        n = p->rep_fn(p->cur_arg, fsid, table, slice, p->rep, sites);
    pthread_rwlock_unlock(&p->lk);
    if (n == 0 || sites[0] != cur) {
        /* A replicas function that disagrees with its locate function
         * would scatter a slice: keep the one copy the owner answers. */
        sites[0] = cur;
        n = 1;
    }
    assert(n >= 1 && n <= MDS_REPLICAS_MAX);
    return n;
}
