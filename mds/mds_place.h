/*
 * mds_place.h -- where slices live on ring 1 (slice -> MDSL), with history
 * (docs/mdsl-scale.md "Placement with history"): the current placement and, while a
 * change of ring 1 runs, the previous one. Loads try current then previous;
 * commits write to current (mds_group moves a slice found elsewhere).
 *
 * A placement is a locate function and its argument (ring 1 in the daemon,
 * a fixed function in tests). Changes come from another thread (the view
 * follower) at any time; every load and commit reads, so reads take a
 * read lock only (many readers at once) and call the locate functions
 * under it, which must therefore be quick and must not block.
 *
 * Invariants:
 *  (1) version counts changes (mds_place_change, mds_place_finish); it only
 *      grows. A locate answer is one consistent (current, previous) pair.
 *  (2) After mds_place_change or mds_place_finish returns, no thread still
 *      calls the placement it dropped: its argument may be freed then.
 */
#ifndef MDS_PLACE_H
#define MDS_PLACE_H

#include <stdbool.h>
#include <stdint.h>

#include "mds_store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mds_place mds_place;

/* Current = (fn, arg), no previous. arg is borrowed: it must outlive its
 * use (invariant 2). *out: mds_place_free. -EINVAL (no fn), -ENOMEM. */
int mds_place_new(mds_locate_fn fn, void *arg, mds_place **out);
/* REQUIRES: no other thread uses p. NULL is a no-op. */
void mds_place_free(mds_place *p);

/* A ring-1 change starts: (fn, arg) becomes current, the current becomes
 * previous (a previous still held is dropped: one change at a time,
 * docs/mdsl-scale.md "One change at a time"). Returns the new version. */
uint64_t mds_place_change(mds_place *p, mds_locate_fn fn, void *arg);
/* The change is done: the previous placement is forgotten. Returns the
 * new version (unchanged when there was no previous). */
uint64_t mds_place_finish(mds_place *p);

/* Where (fsid, table, slice) lives: *cur under the current placement,
 * *prev under the previous (== *cur when there is none). Returns the
 * version the answer belongs to. */
uint64_t mds_place_locate(mds_place *p, uint32_t fsid, uint64_t table, uint32_t slice,
                          uint32_t *cur, uint32_t *prev);
/* The current site only (what a commit writes to). */
uint32_t mds_place_current(mds_place *p, uint32_t fsid, uint64_t table, uint32_t slice);

/* Every slice has r replicas (docs/mdsl-replicas.md), found by fn under the
 * current placement's argument. r 1 (the default) or fn NULL: one copy,
 * at the current site. REQUIRES: before any other thread uses p;
 * 1 <= r <= MDS_REPLICAS_MAX. */
void mds_place_set_replicas(mds_place *p, uint32_t r, mds_replicas_fn fn);
/* The replica set of a slice under the current placement into
 * sites[MDS_REPLICAS_MAX]: sites[0] is what mds_place_current answers, the
 * others follow it. Returns how many (>= 1). */
uint32_t mds_place_replicas(mds_place *p, uint32_t fsid, uint64_t table, uint32_t slice,
                            uint32_t *sites);

#ifdef __cplusplus
}
#endif
#endif /* MDS_PLACE_H */
