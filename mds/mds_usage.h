/*
 * mds_usage.h -- what this MDS's changes add to each fs's inodes and bytes,
 * told to R2 once committed, and the quotas checked against it
 * (docs/r2.md "Capacity and quotas").
 *
 * The table (mds_table.c, mds_table_atomic.c) measures every row change
 * (mds_usage_delta), asks mds_usage_check before one that grows an fs, and
 * notes it with the commit generation holding it (mds_usage_note). The
 * counts of a generation move to the incarnation's running sums once the
 * group has committed it; each heartbeat sends those sums with the
 * incarnation (random at start), and its reply brings the cluster's totals
 * and the quotas back.
 *
 * Invariants:
 *  (1) The sums sent hold only committed changes: counts follow durable
 *      state (a crash loses nothing R2 counted that the MDSL lacks).
 *  (2) A change that would take an fs past a quota it has is refused with
 *      -EDQUOT; the figure checked is R2's last total plus what this MDS
 *      changed since the counts that total holds. Other MDS's changes of
 *      the last heartbeat interval are unseen: the overshoot bound.
 *  (3) Removals and shrinks are never refused.
 *
 * Thread-safe (one short mutex); the table calls it under slice locks, so
 * it never blocks nor calls out while holding it.
 */
#ifndef MDS_USAGE_H
#define MDS_USAGE_H

#include "mds_group.h"

#include <stddef.h>
#include <stdint.h>

/* xt_rpc_r2.h's, for the agent callbacks: mds_core needs no RPC. */
struct xt_fs_counter;
struct xt_r2_hb_usage;
struct xt_capacity;

typedef struct mds_usage mds_usage;

/* *out freed by mds_usage_free. 0 or -ENOMEM. */
int mds_usage_new(mds_usage **out);
void mds_usage_free(mds_usage *u);
/* The group whose committed generation releases counts (borrowed; set once
 * it exists, before the table writes). */
void mds_usage_set_group(mds_usage *u, mds_group *g);

/* The inodes and bytes a row change in `table` adds (negative: removes):
 * old (NULL: none) becomes nw (NULL: removed). System rows and the
 * reserved tables count nothing; an inode is a row of any type but a
 * hard link's name (a link stub, XT_NS_ROW_F_LINKED, or a REF row: its ILT
 * row counts); bytes are the size of regular
 * files and symlinks and the encoded length of key/value rows. */
void mds_usage_delta(uint64_t table, const void *name, size_t name_len, const void *old,
                     size_t old_len, const void *nw, size_t nw_len, int64_t *files,
                     int64_t *bytes);
/* Invariants 2, 3: 0, or -EDQUOT when files > 0 (bytes > 0) would take
 * fsid past its inode (byte) quota. u may be NULL (0). */
int mds_usage_check(mds_usage *u, uint32_t fsid, int64_t files, int64_t bytes);
/* A change of generation gen was applied. u may be NULL. */
void mds_usage_note(mds_usage *u, uint32_t fsid, uint64_t gen, int64_t files, int64_t bytes);

/* r2_agent callbacks (arg: the mds_usage): the committed sums of this
 * incarnation (stats), the incarnation (usage), the reply's totals and
 * quotas (capacity). */
size_t mds_usage_stats(void *arg, double *load, struct xt_fs_counter *c, size_t cap);
void mds_usage_hb(void *arg, struct xt_r2_hb_usage *hu);
void mds_usage_capacity(void *arg, const struct xt_capacity *c);

#endif /* MDS_USAGE_H */
