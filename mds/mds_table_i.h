/*
 * mds_table_i.h -- internals shared by mds_table.c (row operations,
 * splits), mds_table_atomic.c (atomic batches) and mds_table_dist.c (what
 * many MDS add: merges, the repair at load, picks). Not for callers
 * outside those files; the invariants are mds_table.h's.
 */
#ifndef MDS_TABLE_I_H
#define MDS_TABLE_I_H

#include <pthread.h>
#include <stdbool.h>

#include "mds_table.h"
#include "xt_bitmap.h"

#define META_CAPACITY 16u
#define MAP_BUCKETS   256u

struct mtab {
    struct mtab *next;   /* (t->mu) */
    uint32_t fsid;
    uint64_t table;
    mds_cent *meta;      /* pinned for the life of t (invariant 4) */
    xt_bitmap *bm;       /* protected by the meta slice's lock */
    xt_bitmap *said;     /* (same lock) the bits other MDS may learn
                          * (invariant 9); NULL with one MDS: bm */
    bool home;           /* this MDS writes the meta slice (invariant 6) */
};

struct mds_table {
    struct mds_table_opts o;
    pthread_mutex_t mu;
    struct mtab *bucket[MAP_BUCKETS]; /* (mu) */
    size_t ntabs;                     /* (mu) */
};

static inline unsigned mds_table_bucket(uint32_t fsid, uint64_t table)
{
    return (unsigned)(((table * UINT64_C(0x9e3779b97f4a7c15)) ^ fsid) >> 40) % MAP_BUCKETS;
}

static inline bool mds_table_owns(mds_table *t, uint32_t fsid, uint64_t table, uint32_t slice)
{
    return !t->o.owns || t->o.owns(t->o.route_arg, fsid, table, slice);
}

/* The bits of m others may learn (invariant 9): said, or bm with one MDS.
 * REQUIRES: the meta slice's lock. */
static inline const xt_bitmap *mds_table_told_bm(const struct mtab *m)
{
    return m->said ? m->said : m->bm;
}

/* Tells the route about slice `slice` (on_bit); owned: this MDS keeps and
 * serves it (false: a handover, dropped after its commit). */
static inline void mds_table_note_bit(mds_table *t, struct mtab *m, uint32_t slice, uint64_t gen,
                                      bool owned)
{
    if (t->o.on_bit)
        t->o.on_bit(t->o.route_arg, m->fsid, m->table, slice, gen, owned, m->home);
}

/* -EINVAL unless 0 < len <= XT_NAME_MAX. */
int mds_table_check_name(size_t len);
/* Invariant 9: -EAGAIN when name (not a system row) has a pending row in
 * s, else 0. Costs nothing in a slice without system rows.
 * REQUIRES: s locked, and owning name's hash. */
int mds_table_pend_check(const xt_slice *s, const void *name, size_t len);
/* Pin the slice of m that holds hash h (mds_table.c's slice_get): 0,
 * -EREMOTE (another MDS owns it), -EAGAIN (not on its MDSL yet, or to be
 * loaded again), a load error. The caller puts *e. */
int mds_table_slice_get(mds_table *t, struct mtab *m, uint64_t h, mds_cent **e);
/* Split the slice holding h once, as an ordinary create would (own group,
 * no other lock held), when it lacks room for `need` new names or holds
 * more than split_bytes (mds_table_big). */
int mds_table_make_room(mds_table *t, struct mtab *m, uint64_t h, uint32_t need);
/* Whether slice s holds more than split_bytes (and can be split). REQUIRES:
 * s locked. */
bool mds_table_big(const mds_table *t, const xt_slice *s);

/* The open table (fsid, table), or NULL: never opens one. */
struct mtab *mds_table_tab_find(mds_table *t, uint32_t fsid, uint64_t table);
/* The bitmap stored in meta slice ms (*bm: xt_bitmap_free). -EBADMSG (no
 * bitmap row, or it does not decode), -ENOMEM. REQUIRES: ms locked or
 * unpublished. */
int mds_table_meta_decode(const xt_slice *ms, xt_bitmap **bm);
/* The open table (fsid, table), loading its meta slice on first use (a
 * volatile one at a non-home MDS whose home has committed none yet).
 * -ENOENT (the home does not know the table), a load error, -ENOMEM. */
int mds_table_tab_get(mds_table *t, uint32_t fsid, uint64_t table, struct mtab **out);
/* Store bm in the meta slice, stamped gen. REQUIRES: meta write-locked and
 * touched for gen (so only at the home, invariant 6). */
int mds_table_meta_write(mds_table *t, mds_cent *meta, const xt_bitmap *bm, uint64_t gen);
/* OR other into m's bitmap (the home persists new bits). Returns the new
 * bits or -errno. REQUIRES: no slice lock of the table held. */
int mds_table_merge_bits(mds_table *t, struct mtab *m, const xt_bitmap *other);
/* Invariant 7: slice idx found at `depth`, deeper than the bitmap says.
 * Returns the bits added or -errno. REQUIRES: no slice lock held. */
int mds_table_repair(mds_table *t, struct mtab *m, uint32_t idx, unsigned depth);

#endif /* MDS_TABLE_I_H */
