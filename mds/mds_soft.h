/*
 * mds_soft.h -- the eager half of an RMU (docs/mds-xact.md "RMU: a
 * parent's subdirectory count"): a parent's subdirectory-count deltas that another MDS made
 * (mkdir, rmdir of an entry whose parent row is here) and has not
 * delivered yet, kept in memory and added to the parent row's nlink when
 * the row is read, so `mkdir a/b; stat a` shows the new count at once.
 *
 * It is a view, never the truth: the row's stored nlink changes only by
 * the delivery (a transaction, exact under SIGKILL), which takes its
 * deltas back out of here. Each delta is named by the id of the outbox row
 * that delivers it (mds_soft_id), so the eager half and the delivery may
 * arrive in either order, and either twice. Invariants:
 *  (1) A delta is shown at most ttl after its add, and a tombstone kept
 *      at most ttl after its take: a delta whose sender lost its group
 *      (the entry was never made) is shown for that long, then never
 *      again. A restart of this MDS or a move
 *      of the row's slice loses the shown deltas until their delivery
 *      (the count shows its stored value meanwhile).
 *  (2) Shown = the deltas added whose id no delivery took. A take of an
 *      id not added (yet) leaves a tombstone that swallows its add when
 *      that comes later; adds and takes of an id seen already change
 *      nothing. So a delivery that overtakes its eager half, or a
 *      delivery prepared twice (the first transaction aborted), never
 *      leaves a delta shown on top of the stored count.
 *  (3) A delivery takes its ids when it is prepared here: a transaction
 *      that aborts after that hides its deltas until it is delivered
 *      again (one outbox round).
 */
#ifndef MDS_SOFT_H
#define MDS_SOFT_H

#include <stddef.h>
#include <stdint.h>

#include "xt_row.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mds_soft mds_soft;

/* ttl_ms 0: 30,000. *out: mds_soft_free. -ENOMEM. */
int mds_soft_new(unsigned ttl_ms, mds_soft **out);
void mds_soft_free(mds_soft *s); /* NULL is a no-op */

/* The id of the delta an outbox row delivers (its name, len bytes):
 * never 0. */
uint64_t mds_soft_id(const uint8_t *outbox_name, size_t len);
/* Eager delta d, named id (!= 0), on row (fsid, table, name) (name
 * copied). -EINVAL (id 0), -ENOMEM. */
int mds_soft_add(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                 uint64_t id, int32_t d);
/* A delivery of the deltas ids[0..n) (u64 little-endian each, as the
 * XT_CG_RMU_IDS group carries them) reached the stored row: taken out of
 * the shown deltas (2). -ENOMEM: a tombstone could not be kept. */
int mds_soft_take(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                  const uint8_t *ids, size_t n);
/* The ids group of an RMU's count op (XT_CG_RMU_IDS): *ids points into
 * row, *n ids. -ENOENT when absent, -EBADMSG when not whole ids. */
int mds_soft_ids(const xt_row *row, const uint8_t **ids, size_t *n);
/* The delta shown now (0: none, or expired). */
int32_t mds_soft_get(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len);
/* Shows the delta in the encoded row *row (a counted directory row,
 * xt_row_count_of: its count + the delta, XT_ROW_F_NLINK_LOW when that is
 * below 2): replaces *row (xt_malloc'd; the old buffer freed) when it
 * changes it. Same version: it is a view. 0, -ENOMEM, -EBADMSG. */
int mds_soft_show(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                  uint8_t **row, size_t *row_len);
/* Entries held (tests, stats). */
size_t mds_soft_count(mds_soft *s);

#ifdef __cplusplus
}
#endif
#endif /* MDS_SOFT_H */
