/*
 * mds_soft.h -- the eager half of an RMU (docs/mds-xact.md "RMU: a
 * parent's subdirectory count"): a parent's subdirectory-count deltas that another MDS made
 * (mkdir, rmdir of an entry whose parent row is here) and has not
 * delivered yet, kept in memory and added to the parent row's nlink when
 * the row is read, so `mkdir a/b; stat a` shows the new count at once.
 *
 * It is a view, never the truth: the row's stored nlink changes only by
 * the delivery (a transaction, exact under SIGKILL), which takes its delta
 * back out of here. Invariants:
 *  (1) An entry lives at most ttl after its last eager delta: a delta
 *      whose sender lost its group (the entry was never made) is shown
 *      for that long, then never again. A restart of this MDS or a move
 *      of the row's slice loses the shown deltas until their delivery
 *      (the count shows its stored value meanwhile).
 *  (2) A delivery takes out exactly its delta when an entry exists, and
 *      nothing when none does (the deltas it delivers were never shown
 *      here, or expired). The sender delivers a delta only after its eager
 *      half had time to arrive (mds_outbox.c (5)), so the take follows
 *      the add. Deltas lost before their take (a restart of this MDS, a
 *      move of the row's slice) leave the shown count off by them until
 *      the entry expires (1).
 */
#ifndef MDS_SOFT_H
#define MDS_SOFT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mds_soft mds_soft;

/* ttl_ms 0: 30,000. *out: mds_soft_free. -ENOMEM. */
int mds_soft_new(unsigned ttl_ms, mds_soft **out);
void mds_soft_free(mds_soft *s); /* NULL is a no-op */

/* An eager delta d on row (fsid, table, name) (name copied). -ENOMEM. */
int mds_soft_add(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                 int32_t d);
/* A delivery applied d to the stored row: taken out of the shown delta
 * (2). */
void mds_soft_take(mds_soft *s, uint32_t fsid, uint64_t table, const void *name, size_t len,
                   int32_t d);
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
