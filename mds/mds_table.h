/*
 * mds_table.h -- the row operations of the MDS over its cache and commit
 * groups (docs/architecture.md "The xTable API"): create (optionally exclusive), lookup, update
 * (through a caller function, so a conditional update on the row version
 * is the caller's check), delete, list with split-stable cookies, and
 * splits of full slices. Rows are opaque bytes here (xt_row at the edge).
 *
 * The table's GIGA+ bitmap is persisted in the table's *meta slice*: a
 * one-slice-wide xt_slice stored under slice id MDS_META_SLICE of the same
 * (fsid, table), holding the row "bitmap" = xt_bitmap encoding. A split
 * changes the parent slice, the new child slice and the meta slice in ONE
 * commit group (so one 2PC transaction): a crash never shows a split slice
 * without the bitmap that names it, nor the reverse. The GDT copy of the
 * bitmap to other MDSs (gossip, forwards: docs/mds-dist.md) is the daemon's business
 * (RMU); mds_table_bitmap gives the bytes to send.
 *
 * Invariants:
 *  (1) Every row of a table is in the slice xt_bitmap_lookup names for its
 *      hash; an operation that finds its slice no longer owning the hash
 *      (a split ran meanwhile) looks up again.
 *  (2) The in-memory bitmap is only changed with the meta slice's write
 *      lock held and in the same group as the split it records; readers
 *      take the meta slice's read lock. Lock order: data slice -> meta
 *      slice. A split's new child is filled before any bitmap names it,
 *      under no lock of its own (see split_slice).
 *  (3) Every modifying call returns the commit generation holding its
 *      change in *gen: mds_group_sync(g, *gen) makes it durable.
 *  (4) The meta slice of every table this MDS opened stays pinned in the
 *      cache until mds_table_free.
 *  (6) Many MDS (docs/mds-dist.md): with opts.owns set, this MDS serves
 *      only the slices owns() names; an operation whose slice is owned
 *      elsewhere answers -EREMOTE (mds_table_pick tells which slice), an
 *      atomic batch touching one -EREMOTE too. Only the table's *home*
 *      (the owner of slice 0) writes its meta slice; every other MDS keeps
 *      its bitmap in memory only (loaded read-only from the MDSL when it
 *      is there) and reports the bits it learns through opts.on_bit. A
 *      split's child owned elsewhere is never changed after the split.
 *  (7) Bits are only added (OR), by a split, by mds_table_merge, or by the
 *      repair at load: a slice found at depth D deeper than the bitmap
 *      says implies the bits i + 2^k for every k < D with 2^k > i.
 *  (8) Ring 0 changes (docs/mds-dist.md, stage 2): ownership is checked
 *      again with the slice write-locked, so once mds_table_let_go has held
 *      a slice's write lock no change reaches it here any more; a slice
 *      whose load raced with the change is dropped when it turns out not to
 *      be ours. The home role follows slice 0 (mds_table_rehome): given up
 *      under the meta write lock; taken only with the meta slice clean,
 *      after the old home let go (the cache's before_load), with the stored
 *      bitmap merged in and the versions continued from the store.
 *      A clean cached slice that was not ours under some ring since it was
 *      loaded or made (we lost it and got it back), or a split child made
 *      here for another MDS (MDS_CENT_FOREIGN), may be older than what its
 *      owner meanwhile committed: it is dropped and loaded again
 *      (opts.owned_since). A dirty one is always the newest state: nobody
 *      else loads a slice before its holder released it. A split makes a
 *      slice without a load, so without the release round: a child that an
 *      MDS still on an older ring could take as its own (it would load it
 *      once committed, not asking us) is made MDS_CENT_FOREIGN too
 *      (opts.ring_unsettled): committed, dropped, and loaded again through
 *      the round, which waits until that MDS has our ring.
 *  (9) Only committed bits leave this MDS (mds_table_bitmap): a split's bit
 *      is told once the group holding the split committed (the route's
 *      pending list calls mds_table_settle_bit); bits learnt from peers,
 *      from the store or by the repair at load are committed already. A
 *      peer that learnt a bit whose split a crash undid would keep it (the
 *      home even persists it): the child never reaches the MDSL and its
 *      hash range answers -EAGAIN for good.
 *  (5) An atomic batch (mds_table_atomic) applies all of its ops or none,
 *      and all of them carry one generation: it locks every data slice it
 *      touches in one global order (fsid, table, slice index), so two
 *      batches never deadlock; a single-row op holds one data slice, so it
 *      cannot close a cycle with a batch. Lock order: data slices (in that
 *      order) -> meta slice; a batch never takes a meta slice (it splits a
 *      full slice with no lock held, then starts over).
 */
#ifndef MDS_TABLE_H
#define MDS_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_stats.h"
#include "mds_usage.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MDS_META_SLICE  UINT32_C(0xffffffff)
#define MDS_META_BITMAP "bitmap"

/* mds_table_create flags */
#define MDS_TABLE_EXCL 0x1u /* -EEXIST when the name exists */

struct mds_table_opts {
    mds_cache *cache;          /* borrowed */
    mds_group *group;          /* borrowed */
    mds_stats *stats;          /* borrowed, may be NULL */
    mds_usage *usage;          /* borrowed, may be NULL: nothing counted, no quota */
    uint32_t split_threshold;  /* rows per slice; 0: 8192 */
    size_t split_bytes;        /* a slice holding more (xt_slice_mem_bytes)
                                  is split after the write that grew it, so
                                  its image stays far under the MDSL's record
                                  limit (8192 rows of 64 KiB inline files made
                                  a 512 MiB image no commit could carry);
                                  0: MDS_SPLIT_BYTES */
    /* Many MDS (invariant 6). NULL owns: this MDS owns every slice. Both
     * are called under slice and meta locks: they must not block nor call
     * into the table. */
    bool (*owns)(void *arg, uint32_t fsid, uint64_t table, uint32_t slice);
    /* Slice `slice` of the table exists and this MDS is not the only one
     * that must know: it was made by a split stamped with group gen (owned:
     * whether this MDS owns the child), or (gen 0) found by the repair at
     * load. Called on every split and repair when owns is set. May be NULL. */
    void (*on_bit)(void *arg, uint32_t fsid, uint64_t table, uint32_t slice, uint64_t gen,
                   bool owned, bool home);
    /* Invariant 8: whether slice k was this MDS's under every ring since
     * version `since` (0: unknown, taken as yes); *now gets the current
     * version. May be NULL (always yes). Same constraints as owns. */
    bool (*owned_since)(void *arg, const struct mds_key *k, uint64_t since, uint64_t *now);
    /* Invariant 8: whether an MDS that may still use an older ring 0 could
     * take slice k (ours) as its own. A split child made then is handled as
     * one made for another MDS: committed, dropped, loaded again after the
     * release round. May be NULL (never). Same constraints as owns. */
    bool (*ring_unsettled)(void *arg, const struct mds_key *k);
    void *route_arg;
};

#define MDS_SPLIT_BYTES (32u << 20)

typedef struct mds_table mds_table;

/* *out: free with mds_table_free (before the group and the cache).
 * -EINVAL, -ENOMEM. */
int mds_table_new(const struct mds_table_opts *o, mds_table **out);
void mds_table_free(mds_table *t);

/* Create an empty table (slice 0 and its meta slice). -EEXIST. */
int mds_table_mktable(mds_table *t, uint32_t fsid, uint64_t table, uint64_t *gen);

/* The row ops name a row by (name, name_len, h), h its xt_hash_name: the
 * caller has it already (a request carries it, xt_req.name_hash, checked at
 * the service's edge), so the table never hashes a name again. */

/* Insert (or, without MDS_TABLE_EXCL, replace) the row of name. Splits the
 * slice when it is full. row is copied. -EEXIST, -ENOENT (no such table),
 * -EINVAL (name length 0 or > XT_NAME_MAX), -ENOSPC (a slice cannot split
 * further), -EOVERFLOW (xt_slice invariant 4), -ENOMEM. */
int mds_table_create(mds_table *t, uint32_t fsid, uint64_t table, const void *name, size_t name_len,
                     uint64_t h, const void *row, size_t row_len, unsigned flags, uint64_t *gen);

/* Copy of the row: *row is a new buffer (xt_free) of *row_len bytes.
 * -ENOENT; -EAGAIN while the row has a pending row (invariant 9: a
 * reader never sees a transaction's part before it is decided). */
int mds_table_lookup(mds_table *t, uint32_t fsid, uint64_t table, const void *name, size_t name_len,
                     uint64_t h, uint8_t **row, size_t *row_len);
/* The same; with undecided, the row as it is even under a pending row
 * (the resolver's view). */
int mds_table_lookup_ex(mds_table *t, uint32_t fsid, uint64_t table, const void *name,
                        size_t name_len, uint64_t h, bool undecided, uint8_t **row,
                        size_t *row_len);

/* One lookup of mds_table_lookup_many: name, name_len, h in; row,
 * row_len (a new buffer, xt_free), slice and rc out. */
struct mds_table_get {
    const void *name;
    size_t name_len;
    uint64_t h;
    uint8_t *row;
    size_t row_len;
    uint32_t slice;   /* the slice that answered; UINT32_MAX when none did */
    int rc;           /* 0, -ENOENT, or -errno as mds_table_lookup's */
};
/* g[0..n) as n mds_table_lookup calls of table, each slice pinned and
 * read-locked once for the lookups it holds (taken in hash order, at most
 * MDS_TABLE_RUN_MAX under one lock hold). g[i].rc 0 or -ENOENT is that
 * lookup's answer, from g[i].slice; any other -errno (-EREMOTE, -EAGAIN
 * for a pending row or a split under way, ...) means the caller repeats
 * that lookup alone, through the path that forwards and waits. */
#define MDS_TABLE_RUN_MAX 64
void mds_table_lookup_many(mds_table *t, uint32_t fsid, uint64_t table,
                           struct mds_table_get *g, size_t n);

/* Called under the slice's write lock with the current row; returns 0 and a
 * new row in *out (a buffer from xt_malloc that the table takes over) or a
 * negative errno (e.g. -ESTALE for a version mismatch) to change nothing.
 * Must not call into the MDS. */
typedef int (*mds_table_update_fn)(void *arg, const void *old, size_t old_len,
                                   uint8_t **out, size_t *out_len);
/* Replace the row of an existing name by fn's result. -ENOENT, fn's error. */
int mds_table_update(mds_table *t, uint32_t fsid, uint64_t table, const void *name, size_t name_len,
                     uint64_t h, mds_table_update_fn fn, void *arg, uint64_t *gen);

/* Delete a row. check (may be NULL) sees the row first and may refuse with
 * a negative errno. -ENOENT. */
typedef int (*mds_table_check_fn)(void *arg, const void *row, size_t row_len);
int mds_table_delete(mds_table *t, uint32_t fsid, uint64_t table, const void *name, size_t name_len,
                     uint64_t h, mds_table_check_fn check, void *arg, uint64_t *gen);

/* List rows with cookie >= cookie in split-stable order across slices:
 * cb as for xt_slice_list (0 go on, 1 stop before this entry, < 0 abort),
 * at most max_entries. *next_cookie: where to resume (XT_COOKIE_END at the
 * end). Returns the rows consumed or a negative errno. Never returns a row
 * twice nor skips one across calls, even while slices split. With many MDS
 * it stops before the first slice owned elsewhere: after some rows it
 * returns them (*next_cookie: that slice's range), before any it answers
 * -EREMOTE with *next_cookie = where the owner must resume. */
int mds_table_list(mds_table *t, uint32_t fsid, uint64_t table, uint64_t cookie,
                   size_t max_entries, xt_slice_cb cb, void *arg, uint64_t *next_cookie);

/* ---- atomic multi-row batches (invariant 5) ---------------------------- */

#define MDS_ATOMIC_MAX 32 /* ops per atomic batch (the wire allows 16: a
                             participant adds one pending row per op) */

enum mds_aop_type {
    MDS_AOP_CREATE = 1, /* insert: EXCL -> must be absent; check -> must exist
                           and pass check (a conditional replace); else upsert */
    MDS_AOP_CHECK = 2,  /* the row must exist (and pass check); changes nothing */
    MDS_AOP_UPDATE = 3, /* the row must exist; fn makes the new row */
    MDS_AOP_DELETE = 4, /* the row must exist (and pass check) */
    MDS_AOP_COPY = 5,   /* newest wins by ctime_ns (XT_F_RMU): row != NULL
                           replaces the row unless it holds ctime >= stamp;
                           row NULL deletes it unless it holds ctime > stamp
                           (absent: nothing). Never fails on the row's state */
};

/* A CREATE's row made from the pre-image of an earlier op of the same
 * batch (existed: whether that row was there; old/old_len its bytes then).
 * Returns 0 and *out (xt_malloc'd; the table takes it) or -errno. Runs
 * under the batch's locks: must not call into the MDS. */
typedef int (*mds_aop_derive_fn)(void *arg, bool existed, const void *old, size_t old_len,
                                 uint8_t **out, size_t *out_len);

/* One op of an atomic batch. Pointers are borrowed for the call. */
struct mds_aop {
    int type;                  /* enum mds_aop_type */
    uint32_t fsid;
    uint64_t table;
    const void *name;
    size_t name_len;
    uint64_t h;                /* xt_hash_name(name, name_len) */
    const void *row;           /* CREATE: the row (copied) */
    size_t row_len;
    unsigned flags;            /* CREATE: MDS_TABLE_EXCL */
    mds_table_update_fn fn;    /* UPDATE (required) */
    mds_table_check_fn check;  /* CREATE/CHECK/DELETE (may be NULL) */
    void *arg;                 /* fn's, check's or derive's */
    mds_aop_derive_fn derive;  /* CREATE (may be NULL): the row is derive's
                                  result over op `of`'s pre-image, not row */
    size_t of;                 /* with derive: an index < this op's */
    uint64_t stamp;            /* COPY: the change's ctime_ns */
};

/* Invariant 9 (docs/mds-xact.md): a row with a pending row (a prepared
 * cross-MDS transaction's) is changed only by a batch that also deletes
 * that pending row (the transaction's rollback); any other write of it,
 * single or batched (another prepare too), and any lookup of it answer
 * -EAGAIN (the client retries) until the transaction is settled. */

/* Apply ops[0..n) atomically: every precondition (exists / absent / check /
 * fn) is checked with every involved slice write-locked before anything
 * changes, then all apply, stamped with one generation (*gen), so a commit
 * group holds all of them or none (invariant 5). fn and check run under the
 * locks and must not call into the MDS; each runs at least once and may
 * run again when the batch starts over (a split, a move to a newer group).
 * A create into a full slice splits it first (in its own group, no batch
 * lock held) and starts over. Returns 0, or the first failing op's -errno
 * with *failed = its index (nothing applied): -EINVAL (n == 0, n >
 * MDS_ATOMIC_MAX, a bad name, an unknown type, the same row twice:
 * *failed = the second), -ENOENT (no such row, or no such table),
 * -EEXIST, a check's or fn's error, -ENOSPC, -EOVERFLOW, -ENOMEM. */
int mds_table_atomic(mds_table *t, const struct mds_aop *ops, size_t n, size_t *failed,
                     uint64_t *gen);

/* The slice this MDS's bitmap picks for hash h (xt_hash_name) of the
 * table: the slice to forward an -EREMOTE to. -ENOENT, -ENOMEM. */
int mds_table_pick(mds_table *t, uint32_t fsid, uint64_t table, uint64_t h, uint32_t *slice);
/* The hash mds_table_list starts from for a cookie. */
uint64_t mds_table_cookie_hash(uint64_t cookie);
/* OR the bitmap encoding enc into the table's (invariant 7); the home
 * persists new bits in the open commit group. Returns the new bits (0:
 * none), -EBADMSG (enc), -ENOENT (the home does not know the table), -ENOMEM. */
int mds_table_merge(mds_table *t, uint32_t fsid, uint64_t table, const void *enc, size_t len);
/* Whether this MDS is the table's home (always true without opts.owns). */
bool mds_table_is_home(mds_table *t, uint32_t fsid, uint64_t table);
/* Tables opened. */
size_t mds_table_count(mds_table *t);

/* Invariant 8: slice k (MDS_META_SLICE: the meta slice, whose home role is
 * then given up) is no longer this MDS's. Waits out the writers already
 * inside it (takes its write lock once) and gives its last dirty group in
 * *gen (0: clean, or not cached). The caller syncs the group to *gen and
 * drops the entry (not for the meta slice: it stays pinned, read-only).
 * 0, -EBUSY (it is loading: ask again). */
int mds_table_let_go(mds_table *t, const struct mds_key *k, uint64_t *gen);
/* Drops slice k (let go, mds_table_let_go, and committed) from the cache,
 * waiting out short pins (a reader finishing): 0, or -EAGAIN (still
 * pinned after ~200 ms). */
int mds_table_drop_let_go(mds_table *t, const struct mds_key *k);
/* Whether this MDS owns slice k under the caller's ring 0. */
typedef bool (*mds_table_owns_fn)(void *arg, const struct mds_key *k);
/* One sweep (mds_route.h invariant 6): mds_table_rehome, then every cached
 * slice owns() says is not this MDS's is let go, the group synced past
 * their last changes, and dropped. Returns the number of slices and home
 * roles still to let go (0: done; the caller sweeps again otherwise);
 * *dropped gets the slices dropped. */
int mds_table_sweep(mds_table *t, mds_table_owns_fn owns, void *arg, size_t *dropped);
/* Invariant 8 for every open table: gives up the home role where ring 0
 * moved slice 0 away, takes it where it moved here. Returns the number of
 * tables still to do (a take waits for a clean meta slice or for the old
 * home, whose release answered -EAGAIN), or -ENOMEM. */
int mds_table_rehome(mds_table *t);

/* The encoding (xt_bitmap_encode) of the table's bitmap as others may
 * learn it (invariant 9): *out a new buffer (xt_free). */
int mds_table_bitmap(mds_table *t, uint32_t fsid, uint64_t table, uint8_t **out,
                     size_t *out_len);
/* Invariant 9: the split that made `slice` committed; others may learn it.
 * 0, -ENOENT (table not open), -ENOSPC or -ENOMEM (the bit stays untold:
 * peers learn it from the repair at load). */
int mds_table_settle_bit(mds_table *t, uint32_t fsid, uint64_t table, uint32_t slice);
/* Whether `slice` is in the bitmap others may learn (invariant 9): false
 * for a split child whose group has not committed yet. */
bool mds_table_told(mds_table *t, uint32_t fsid, uint64_t table, uint32_t slice);

#ifdef __cplusplus
}
#endif
#endif /* MDS_TABLE_H */
