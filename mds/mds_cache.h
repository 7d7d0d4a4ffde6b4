/*
 * mds_cache.h -- the MDS slice cache: (fsid, table, slice) -> loaded slice
 * (docs/architecture.md "MDS"). A hash table cut into stripes (one mutex each), slices loaded
 * on demand from their MDSL through mds_store, LRU eviction under a memory
 * bound.
 *
 * Entry states (the stripe mutex protects the state and the pin count):
 *
 *   (absent) --mds_cache_get(): first getter--> LOADING --load ok--> READY
 *                                                  \--load fails--> (absent)
 *   (absent) --mds_cache_add()--> READY --evict (unpinned)--> (absent)
 *
 * Invariants:
 *  (1) At most one entry per key; concurrent getters of a LOADING entry wait
 *      for the one load and share its outcome (load-once).
 *  (2) A pinned entry (mds_cache_get/add/ref without the matching put) is
 *      never evicted and its slice pointer stays valid.
 *  (3) Dirty entries are always pinned: mds_group holds one pin per dirty
 *      list that holds the entry, and drops it only once the entry's changes
 *      are durable. So everything eviction may drop is clean, and a dropped
 *      slice reloads from its MDSL with the same rows.
 *  (4) Eviction drops unpinned entries, least recently unpinned first, while
 *      the accounted bytes exceed the bound. When the bound is exceeded and
 *      nothing is unpinned, the cache calls opts.pressure (no lock held):
 *      the commit group closes early, its commit unpins the dirty slices,
 *      and the next put evicts them. That is how eviction "writes back".
 *  (5) bytes/rows of the info are the sum of each entry's last measurement
 *      (at load, add and mds_cache_resize); rows leaves out system rows
 *      (xt_slice_sys_count: transaction state, not users' rows).
 *  (6) Many MDS (docs/mds-dist.md, stage 2): every load first calls
 *      opts.before_load, which asks the MDS that may still hold the slice
 *      to write it back and let it go. A load it "fences" (an earlier
 *      holder could not be asked: it died, and a commit of its may still
 *      land) starts the slice's versions MDS_CACHE_FENCE_GAP higher and
 *      makes its next record an image: the MDSL then ignores every record
 *      of the earlier holder (mdsl_apply.c rules 1 and 2).
 *  (7) Ring 1 may change (docs/mdsl-scale.md "Placement with history"): a load tries the
 *      current placement, then the previous one, and takes the first live
 *      copy; the entry remembers where (cm.site). No live copy but a MOVED
 *      tombstone (-ESTALE) answers -EAGAIN (a move in flight, or this MDS's
 *      view is behind); nothing at either place answers -ENOENT.
 *
 * Lock order: stripe mutex -> LRU mutex. A slice lock is never taken under
 * either, and no lock is held across a store call.
 */
#ifndef MDS_CACHE_H
#define MDS_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mds_place.h"
#include "mds_stats.h"
#include "mds_store.h"
#include "xt_slice.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mds_key {
    uint32_t fsid;
    uint32_t slice;
    uint64_t table;
};

/* cm.site of a slice with no record stored anywhere yet (a new table's
 * first slice, a split child): its first record goes to the current
 * placement and leaves no tombstone. */
#define MDS_SITE_NONE UINT32_MAX

/* Commit-group bookkeeping of one cached slice. Owned by mds_group; lives in
 * the entry so that it goes with the slice. Every field is protected by the
 * slice's write lock (xt_slice_wrlock). Set at load: version, image_bytes,
 * delta_bytes, site, durable_mem, image_mem; mds_cache_add sets site to
 * MDS_SITE_NONE; everything else starts at 0. */
struct mds_cent_commit {
    uint64_t dirty_gen;   /* last group whose dirty list holds the entry */
    uint64_t durable_gen; /* changes stamped <= this are durable: the delta base */
    uint64_t snapped_gen; /* group `snap` was taken for (0: none pending) */
    uint64_t version;     /* version of the last durable record */
    size_t image_bytes;   /* size of the last durable image */
    size_t delta_bytes;   /* durable delta bytes since that image */
    size_t durable_mem;   /* xt_slice_mem_bytes when the last durable record
                             was taken (at load: as loaded; 0: never stored) */
    size_t snap_mem;      /* xt_slice_mem_bytes when snap was taken */
    size_t image_mem;     /* xt_slice_mem_bytes when the last durable image
                             was taken (at load: as loaded): with durable_mem
                             it tells how much of the image is dead */
    uint32_t durable_rows, snap_rows; /* xt_slice_count, the same way */
    bool force_image;     /* next record must be an image */
    bool fold;            /* that image folds idle deltas (mds_group.c fold_idle):
                             it counts as growth, never uses the MDSL's reserve */
    bool snap_fold;       /* snap is such an image */
    bool removed;         /* a row was deleted or made shorter since the last
                             snapshot: a group holding it frees something,
                             even when the slice grew in all (mds_group.c
                             commit_group) */
    bool snap_removed;    /* `removed` as snap took it */
    bool snap_image;      /* snap is an image (else a delta) */
    bool snap_sys;        /* the slice held system rows at the snapshot */
    uint32_t site;        /* MDSL holding the slice's records (invariant 7) */
    uint32_t snap_site;   /* where snap goes; != site: snap is a move image
                             and site gets the MOVED tombstone */
    uint8_t *snap;        /* pending record bytes (xt_free), NULL: none/empty */
    size_t snap_len;
};

struct mds_cache_opts {
    const mds_store *store;     /* borrowed; outlives the cache */
    mds_place *place;           /* borrowed: where slices live (invariant 7) */
    size_t mem_bound;           /* accounted bytes; 0: unbounded */
    unsigned stripes;           /* 0: 64 */
    mds_stats *stats;           /* borrowed, may be NULL */
    /* Called without locks when the bound is exceeded and nothing can be
     * evicted (invariant 4). May be NULL. Must not call into the cache. */
    void (*pressure)(void *arg);
    void *pressure_arg;
    /* Invariant 6; called by the loading thread with no lock held, before
     * the store is read. Non-zero: the load fails with it. *fence: start the
     * versions above the gap. May be NULL. */
    int (*before_load)(void *arg, const struct mds_key *k, bool *fence);
    /* The ring version a load starts under (before before_load), kept in
     * the entry (mds_cent_ring_ver) so the table can tell whether the slice
     * stayed this MDS's since; mds_cache_add and mds_cache_stamp use it too.
     * Same arg. May be NULL (stamps 0). */
    uint64_t (*stamp)(void *arg);
    void *before_load_arg;
};

/* Versions a fenced load skips (invariant 6): far more than the records an
 * MDS can have in flight for one slice. */
#define MDS_CACHE_FENCE_GAP (UINT64_C(1) << 20)

typedef struct mds_cache mds_cache;
typedef struct mds_cent mds_cent;

/* *out: free with mds_cache_free. -EINVAL (no store/place), -ENOMEM. */
int mds_cache_new(const struct mds_cache_opts *o, mds_cache **out);
/* Frees every entry and its slice, pinned or not (a crash drops the MDS
 * state this way in the tests). REQUIRES: no other thread uses the cache. */
void mds_cache_free(mds_cache *c);

/* Pin the entry of k, loading it (image + deltas) when absent. On 0, *out
 * is pinned until mds_cache_put. -ENOENT (nothing stored for the slice),
 * -EAGAIN (only a MOVED tombstone found: invariant 7),
 * -EBADMSG (a record does not decode or apply), the store's error, -ENOMEM.
 * May block on I/O and on another thread's load of the same key. */
int mds_cache_get(mds_cache *c, const struct mds_key *k, mds_cent **out);
/* Pin the entry of k only if it is READY in memory; -ENOENT otherwise. */
int mds_cache_peek(mds_cache *c, const struct mds_key *k, mds_cent **out);
/* Like mds_cache_peek, but tells a LOADING entry (-EBUSY) from an absent
 * one (-ENOENT). */
int mds_cache_find(mds_cache *c, const struct mds_key *k, mds_cent **out);
/* The keys of every entry (READY or LOADING) at the time of the call, in
 * no order: *keys is a new array (xt_free; NULL when *n is 0). -ENOMEM. */
int mds_cache_keys(mds_cache *c, struct mds_key **keys, size_t *n);
/* Read k's stored records again, without touching the cache: *out gets the
 * slice they build (xt_slice_free), *version the last record's version
 * (0 and -ENOENT when nothing is stored) and *site where they were found
 * (invariant 7; unchanged on error). Calls before_load first, so
 * *fenced tells whether the caller must start its versions above the gap.
 * For an entry that stays pinned while its role changes (a table's meta
 * slice whose home moved here). */
int mds_cache_reread(mds_cache *c, const struct mds_key *k, xt_slice **out, uint64_t *version,
                     uint32_t *site, bool *fenced);
/* Insert a slice that exists only in memory (a new table's first slice, a
 * split's child). Takes ownership of s on 0 (and on error frees nothing).
 * On 0 *out is pinned. -EEXIST when the key is present (or loading). */
int mds_cache_add(mds_cache *c, const struct mds_key *k, xt_slice *s, mds_cent **out);
/* Another pin on an entry the caller has pinned. */
void mds_cache_ref(mds_cache *c, mds_cent *e);
/* Drop one pin; the last one puts the entry on the LRU and may evict. */
void mds_cache_put(mds_cache *c, mds_cent *e);

/* Re-measure e after a change. REQUIRES: the caller holds e's slice lock. */
void mds_cache_resize(mds_cache *c, mds_cent *e);
/* Set the pressure hook after creation (the commit group is created after
 * the cache). Not synchronised with eviction: call before concurrent use. */
void mds_cache_set_pressure(mds_cache *c, void (*fn)(void *arg), void *arg);
/* Drop the entry of k now if it is READY and unpinned (so clean, by
 * invariant 3): a split child handed to another MDS (docs/mds-dist.md).
 * 0, -ENOENT (absent), -EBUSY (pinned or loading). */
int mds_cache_drop(mds_cache *c, const struct mds_key *k);
/* One eviction pass (invariant 4). Returns the number of entries dropped. */
int mds_cache_evict(mds_cache *c);

/* The ring version in use now (the stamp hook; 0 without one). A caller
 * that adds an entry after deciding ownership reads it before deciding. */
uint64_t mds_cache_stamp(mds_cache *c);

/* The ring version e was loaded, added (mds_cache_add stamps the ring in
 * use) or last found ours under, and its update. MDS_CENT_FOREIGN: made
 * here for a slice ring 0 gave another MDS (a split child), so never to be
 * trusted once ours: the owner may have changed it since. Safe without
 * locks (atomic). */
#define MDS_CENT_FOREIGN UINT64_MAX
uint64_t mds_cent_ring_ver(const mds_cent *e);
void mds_cent_set_ring_ver(mds_cent *e, uint64_t v);

/* Accessors; valid while e is pinned. */
xt_slice *mds_cent_slice(mds_cent *e);
const struct mds_key *mds_cent_key(const mds_cent *e);
struct mds_cent_commit *mds_cent_commit(mds_cent *e);

struct mds_cache_info {
    size_t entries;      /* READY + LOADING */
    size_t pinned;
    size_t bytes;        /* accounted (invariant 5) */
    size_t rows;
    size_t bound;
    double bytes_per_row;
    uint64_t loads, evictions, pressure_calls;
};
void mds_cache_info(mds_cache *c, struct mds_cache_info *out);

#ifdef __cplusplus
}
#endif
#endif /* MDS_CACHE_H */
