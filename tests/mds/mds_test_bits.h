/*
 * mds_test_bits.h -- for the many-MDS unit tests without mds_route: what
 * its pending list does for mds_table.h invariant 9. An MDS's on_bit hook
 * notes each split bit with its group (tu_bits_note, called under slice
 * locks: it only takes the list's mutex); tu_bits_tell later tells the
 * table every bit whose group committed (mds_table_settle_bit), outside
 * any table lock. Until then mds_table_bitmap -- what a forward carries --
 * does not name the bit, and mds_table_told says so.
 */
#ifndef MDS_TEST_BITS_H
#define MDS_TEST_BITS_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "mds_group.h"
#include "mds_table.h"

struct tu_bit {
    uint32_t fsid, slice;
    uint64_t table, gen;
};

struct tu_bits {
    pthread_mutex_t mu;
    struct tu_bit *v; /* (mu) */
    size_t n, cap;    /* (mu) */
};

static inline void tu_bits_init(struct tu_bits *b)
{
    pthread_mutex_init(&b->mu, NULL);
    b->v = NULL;
    b->n = b->cap = 0;
}

/* Forgets the untold bits (a crash loses them with the route). */
static inline void tu_bits_fini(struct tu_bits *b)
{
    free(b->v);
    b->v = NULL;
    b->n = b->cap = 0;
    pthread_mutex_destroy(&b->mu);
}

static inline void tu_bits_note(struct tu_bits *b, uint32_t fsid, uint64_t table,
                                uint32_t slice, uint64_t gen)
{
    pthread_mutex_lock(&b->mu);
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->v = realloc(b->v, b->cap * sizeof *b->v);
        if (!b->v)
            abort();
    }
    b->v[b->n++] = (struct tu_bit){ fsid, slice, table, gen };
    pthread_mutex_unlock(&b->mu);
}

/* The group of the untold bit `slice` (0: none): what to sync before it
 * can be told. */
static inline uint64_t tu_bits_gen(struct tu_bits *b, uint32_t slice)
{
    uint64_t gen = 0;
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i].slice == slice && b->v[i].gen > gen)
            gen = b->v[i].gen;
    pthread_mutex_unlock(&b->mu);
    return gen;
}

/* Tells t every noted bit whose group g committed. */
static inline void tu_bits_tell(struct tu_bits *b, mds_table *t, mds_group *g)
{
    struct mds_group_info gi;
    mds_group_info(g, &gi);
    struct tu_bit ready[64];
    for (;;) {
        size_t k = 0;
        pthread_mutex_lock(&b->mu);
        for (size_t i = 0; i < b->n && k < 64;)
            if (b->v[i].gen <= gi.committed_gen) {
                ready[k++] = b->v[i];
                b->v[i] = b->v[--b->n];
            } else {
                i++;
            }
        pthread_mutex_unlock(&b->mu);
        for (size_t i = 0; i < k; i++) {
            int rc = mds_table_settle_bit(t, ready[i].fsid, ready[i].table, ready[i].slice);
            if (rc < 0 && rc != -ENOENT)
                abort();
        }
        if (k < 64)
            return;
    }
}

#endif /* MDS_TEST_BITS_H */
