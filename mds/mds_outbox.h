/*
 * mds_outbox.h -- the outbox (mds_outbox.c): changes of rows at other MDS
 * that an atomic batch writes as outbox rows and the transaction thread
 * delivers later -- RMUs (a parent's count, exactly once) and copies
 * (XT_F_RMU, at least once, newest wins). The placement of copies is for
 * the service; the rest is for the transaction module (mds_xact.c).
 *
 * Outbox row: name XT_SYS_OUTBOX head (placement: the
 * hash of the row whose change it follows) || site u32 || epoch u32 ||
 * seq u64; an xt_row of type XT_ROW_KV whose group XT_CG_USER0 is:
 *
 *   off  size  field
 *   0    1     fmt        RMU_FMT (1); RMU_FMT_COPY (2): a copy's record,
 *                         laid out in mds_outbox.c
 *   1    4     tfsid      the target row's table
 *   5    8     ttable
 *   13   8     uuid       the target row's uuid (the update's condition; 0: none)
 *   21   4     delta      nlink delta, LE signed
 *   25   2     name_len   the target row's name
 *   27   n     name
 *
 * attr.ctime_ns = when it was made (by the creating MDS's clock);
 * attr.mtime_ns = the mtime the change set on the parent (0: none),
 * delivered again as the parent's mtime and ctime, max-merged.
 */
#ifndef MDS_OUTBOX_H
#define MDS_OUTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mds_xact.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_row.h"

/* Whether a batch carries a copy (XT_F_RMU). */
bool mds_outbox_has_copy(const struct xt_req *reqs, size_t n);
/* A client's atomic batch with copies, placed (mds_outbox.c, copies
 * (1)): *out gets the batch to run -- reqs itself, or a copy in *hold where each
 * copy whose row this MDS places away from op 0's is its outbox row's
 * create (pointing into *hold: free it with mds_outbox_place_free once
 * the batch ran). x NULL (one MDS): every copy stays. -EINVAL (*failed:
 * the op) for a copy on a system row, without its row (the
 * stamp) or with conditions; -EAGAIN, -ENOMEM. A copy as op 0 stays
 * (it applies at its row's MDS, with the batch). */
struct mds_outbox_place;
int mds_outbox_place(mds_xact *x, const struct xt_req *reqs, size_t n,
                     const struct xt_req **out, struct mds_outbox_place **hold,
                     size_t *failed);
void mds_outbox_place_free(struct mds_outbox_place *hold);

/* ---- for the transaction module ---- */

#define RMU_FMT     1
#define RMU_FMT_COPY 2 /* a copy's record (mds_outbox.c) */
#define RMU_OFF_NAME 27
#define RMU_NAME_LEN (XT_SYS_HEAD + 16) /* MDS_XACT_DNAME_LEN */
/* The outbox row for count op q (a loose op with NLINK_ADD), placed with
 * the row of request `near` (in its table): a create to add to the batch that
 * makes the change q follows. The request's name and row point into *buf
 * (the caller keeps it while the request is used). 0, -ENAMETOOLONG. */
struct rmu_buf {
    uint8_t name[RMU_NAME_LEN];
    uint8_t rec[RMU_OFF_NAME + XT_NAME_MAX];
    xt_row row;
};
int mds_outbox_count(mds_xact *x, const struct xt_req *q, const struct xt_req *near,
                     struct rmu_buf *buf, struct xt_req *out);
/* One delivery round, on the thread, when the group committed since the
 * last (held transactions finished, outbox rows of cached slices sent). */
void mds_outbox_round(mds_xact *x);
/* Drops the held transactions (at mds_xact_free; resolvers finish them). */
void mds_outbox_free(mds_xact *x);

#endif /* MDS_OUTBOX_H */
