/*
 * xt_slice.h -- one slice of one directory table, in MDS memory.
 *
 * A slice (index i, depth d) holds the rows of a table whose name hash h has
 * (V_h mod 2^d) == i (GIGA+, docs/format-bitmap.md). Rows are opaque bytes (the row codec
 * is xt_row); the slice keys them by the full name (1..XT_NAME_MAX arbitrary
 * bytes) and the caller-supplied hash (normally xt_hash_name(name); tests may
 * pass crafted hashes, the slice only requires that the slice owns them).
 *
 * Invariants:
 *  (1) A slice never holds more than `capacity` live rows; inserting a new
 *      name into a full slice fails with -ENOSPC and changes nothing, so the
 *      caller splits (xt_slice_split) and retries.
 *  (2) Every row's hash is owned by the slice (xt_slice_owns), before and
 *      after a split; a split moves exactly the rows whose V_h bit d is 1.
 *  (3) At most one entry (live row or tombstone) exists per (hash, name).
 *  (4) Listing order is the table's split-stable order (xt_hash.h): rows
 *      sorted by (55-bit prefix of xt_hash_order(h), system row or not,
 *      xt_hash_order(h), name) -- system rows (xt_hash_is_sys) rank after
 *      every ordinary row of their prefix group, so adding or removing one
 *      never moves an ordinary row's cookie; a row's cookie is
 *      xt_hash_cookie(h, seq) with seq its rank among the live rows that share
 *      its 55-bit order prefix. More than XT_COOKIE_SEQ_MAX + 1 live rows
 *      with one prefix (system rows included) are refused with -EOVERFLOW.
 *  (5) Every modification stamps the entry with the caller's commit-group
 *      generation `gen`; a delete leaves a tombstone (name, hash, gen) until
 *      xt_slice_drop_tombstones removes it, so a delta of the rows changed
 *      after generation G (xt_slice_collect_changes, xt_slice_encode_delta)
 *      includes deletions. Tombstones use no capacity.
 *  (6) Every failing call (-ENOMEM included) leaves the slice unchanged,
 *      except xt_slice_apply_delta (see there).
 *
 * Concurrency: every slice function is single-writer and takes no lock
 * itself. Each slice carries one pthread rwlock the caller takes around calls:
 * xt_slice_rdlock for lookup/get/list/count/foreach/collect/encode, and
 * xt_slice_wrlock for everything that modifies. Readers run in parallel (list
 * sorts lazily into its own array under an internal mutex, so it is safe under
 * the read lock). The stripes of the MDS are the slices themselves (one lock
 * per <= 8192 rows); finer bucket stripes were not worth it: an insert may
 * grow the index and a delete moves another entry, so they must exclude
 * every reader of the slice anyway. See docs/format-slice.md.
 *
 * Formats (image and delta records): docs/format-slice.md; offsets are
 * defined once, in xt_slice_codec.c next to the encoder and the decoder.
 */
#ifndef XT_SLICE_H
#define XT_SLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XT_SLICE_DEFAULT_CAPACITY 8192u
#define XT_SLICE_MAX_CAPACITY     (1u << 22)
#define XT_SLICE_MAX_DEPTH        32u

/* xt_slice_insert flags. */
#define XT_SLICE_EXCL 0x1u /* fail with -EEXIST when the name is present */

typedef struct xt_slice xt_slice;

/* ---- lifetime ------------------------------------------------------- */

/* A new empty slice (index, depth) holding at most `capacity` rows
 * (0 means XT_SLICE_DEFAULT_CAPACITY). Caller frees with xt_slice_free.
 * NULL on ENOMEM or bad arguments (depth > 32, index >= 2^depth,
 * capacity > XT_SLICE_MAX_CAPACITY). A new slice needs an image (see
 * xt_slice_needs_image). */
xt_slice *xt_slice_new(uint32_t index, unsigned depth, uint32_t capacity);
/* Frees the slice, its rows and tombstones. NULL is a no-op.
 * REQUIRES: no thread holds or waits for its lock. */
void xt_slice_free(xt_slice *s);

/* ---- locking (see the file comment) ----------------------------------- */

void xt_slice_rdlock(xt_slice *s);
void xt_slice_wrlock(xt_slice *s);
void xt_slice_unlock(xt_slice *s);

/* ---- properties --------------------------------------------------------- */

uint32_t xt_slice_index(const xt_slice *s);
unsigned xt_slice_depth(const xt_slice *s);
uint32_t xt_slice_capacity(const xt_slice *s);
uint32_t xt_slice_count(const xt_slice *s);      /* live rows */
uint32_t xt_slice_tombstones(const xt_slice *s); /* remembered deletions */
/* Live system rows (names starting 00 FF, xt_hash.h), included in
 * xt_slice_count: the MDS skips pending-row checks and resolver scans in
 * slices where it is 0, and subtracts it from the counts users see. */
uint32_t xt_slice_sys_count(const xt_slice *s);
/* Does this slice own hash h, i.e. (V_h mod 2^depth) == index? */
bool xt_slice_owns(const xt_slice *s, uint64_t h);
/* Number of modifications ever applied (insert/update/delete/split/apply):
 * a reader can compare two values to know if anything changed. */
uint64_t xt_slice_mod_count(const xt_slice *s);
/* Highest generation stamped on any change (0 when none): the slice is dirty
 * for commit group G when xt_slice_last_gen(s) >= G. */
uint64_t xt_slice_last_gen(const xt_slice *s);
/* True after xt_slice_new and xt_slice_split: deltas cannot describe what
 * happened, the next write to MDSL must be a full image. Cleared by the
 * caller once that image is durable. */
bool xt_slice_needs_image(const xt_slice *s);
void xt_slice_clear_needs_image(xt_slice *s);
/* Approximate heap bytes held by the slice (entries, index, arrays). */
size_t xt_slice_mem_bytes(const xt_slice *s);

/* ---- rows ----------------------------------------------------------------- */

/* Insert or replace the row of `name` (name_len bytes, 1..XT_NAME_MAX) with
 * a copy of row[0..row_len). `gen` is the open commit group.
 * Returns 0 when the name was new, 1 when an existing row was replaced.
 * -EEXIST (XT_SLICE_EXCL and present), -ENOSPC (new name, slice full),
 * -EOVERFLOW (cookie prefix collision group full, invariant 4),
 * -EINVAL (bad name length, row_len > UINT32_MAX, hash not owned), -ENOMEM.
 * Invalidates pointers returned by xt_slice_lookup for this name. */
int xt_slice_insert(xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                    const void *row, size_t row_len, unsigned flags, uint64_t gen);

/* Replace the row of an existing name. 0, -ENOENT, -EINVAL, -ENOMEM.
 * Invalidates pointers returned by xt_slice_lookup for this name. */
int xt_slice_update(xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                    const void *row, size_t row_len, uint64_t gen);

/* Delete a row, leaving a tombstone stamped `gen` (it keeps the name, not the
 * row bytes). 0, -ENOENT or -EINVAL; never -ENOMEM. */
int xt_slice_delete(xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                    uint64_t gen);

/* Find a row. On 0, *row and *row_len point into the slice: valid only while the
 * caller holds the slice lock and until the next modification of this name
 * (insert/update/delete, split, apply_delta or free), whichever comes first.
 * -ENOENT when absent (tombstones are absent). */
int xt_slice_lookup(const xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                    const void **row, size_t *row_len);

/* Copy-out lookup: copies the row into buf[0..buf_size) and sets *row_len.
 * -ENOENT, or -ERANGE when buf_size < row length (*row_len says how much is
 * needed, nothing copied). */
int xt_slice_get(const xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                 void *buf, size_t buf_size, size_t *row_len);

/* ---- iteration -------------------------------------------------------- */

/* One entry given to a callback. Pointers are valid during the call only. */
typedef struct xt_slice_entry {
    const void *name;
    size_t name_len;
    uint64_t hash;
    const void *row;     /* NULL for a tombstone */
    size_t row_len;      /* 0 for a tombstone */
    uint64_t gen;        /* generation of the last change */
    uint64_t cookie;     /* list cookie (xt_slice_list only, else 0) */
    bool deleted;        /* tombstone (xt_slice_collect_changes only) */
} xt_slice_entry;

/* Callback: return 0 to go on, 1 to stop before consuming this entry (e.g. a
 * full readdir buffer), or a negative errno to abort (returned as is). */
typedef int (*xt_slice_cb)(void *arg, const xt_slice_entry *e);

/* Ordered, resumable listing: calls cb for the live rows with
 * cookie >= cookie_from in increasing cookie order, at most max_entries
 * of them. *next_cookie receives the cookie of the first row not consumed,
 * or XT_COOKIE_END when no row of this slice remains past the last consumed
 * one. Returns the number of rows consumed, the callback's negative errno,
 * or -ENOMEM (a listing that must sort allocates its array).
 * Safe under the read lock. Cost: O(log n + k). The first listing sorts
 * (O(n log n)); while listings keep coming, changes keep the order up to date
 * (O(log n) + a memmove each); a slice not listed for ~64 log n changes
 * drops the order and sorts again at its next listing. */
int xt_slice_list(xt_slice *s, uint64_t cookie_from, size_t max_entries,
                  xt_slice_cb cb, void *arg, uint64_t *next_cookie);

/* Every live row, in no particular order. Returns rows visited or the
 * callback's negative errno; a callback return of 1 stops early. */
int xt_slice_foreach(const xt_slice *s, xt_slice_cb cb, void *arg);

/* ---- snapshots / commit groups ----------------------------------------- */

/* Every entry (live row or tombstone, e->deleted) whose last change has
 * gen > since_gen, in no particular order. Returns entries visited or the
 * callback's negative errno. */
int xt_slice_collect_changes(const xt_slice *s, uint64_t since_gen, xt_slice_cb cb,
                             void *arg);
/* Forget the tombstones with gen <= upto_gen (their deletion is durable).
 * Returns how many were dropped. Never fails. */
int xt_slice_drop_tombstones(xt_slice *s, uint64_t upto_gen);

/* ---- serialisation (docs/format-slice.md) -------------------------------- */

/* Full image of the live rows. On 0, *out is a new buffer of *out_len bytes
 * the caller frees with xt_free. -ENOMEM. */
int xt_slice_encode(const xt_slice *s, uint8_t **out, size_t *out_len);
/* A new slice from an image (capacity, rows; tombstones none; last_gen and
 * every row's gen as encoded; needs_image false). The buffer is only read,
 * never kept. -EBADMSG for any malformed, truncated or corrupt input
 * (never reads outside buf[0..len)), -ENOMEM. */
int xt_slice_decode(const void *buf, size_t len, xt_slice **out);

/* Delta record of every change with gen > since_gen (live rows as upserts,
 * tombstones as deletes), stamped with the slice's (index, depth). Caller
 * frees *out with xt_free. -ENOMEM. */
int xt_slice_encode_delta(const xt_slice *s, uint64_t since_gen, uint8_t **out,
                          size_t *out_len);
/* Apply a delta to a slice loaded from an older image + deltas: deletes
 * remove rows outright (no tombstone: they are already durable), upserts
 * insert or replace. The whole record is checked before anything changes:
 * -EBADMSG (malformed/corrupt), -EINVAL (another slice's (index, depth)).
 * After validation only -ENOMEM, -ENOSPC or -EOVERFLOW can fail, and then
 * the slice is partially updated: the caller must discard it. */
int xt_slice_apply_delta(xt_slice *s, const void *buf, size_t len);

/* ---- split ------------------------------------------------------------- */

/* Split s (index i, depth d) into s (i, d+1) and a new slice
 * (i + 2^d, d+1) with the same capacity that receives every row whose V_h
 * bit d is 1 (their gens preserved). Tombstones of moved names are dropped:
 * both slices need a full image afterwards (xt_slice_needs_image).
 * *child is freed by the caller. -ERANGE at depth 32, -ENOMEM (s unchanged). */
int xt_slice_split(xt_slice *s, xt_slice **child);

#ifdef __cplusplus
}
#endif
#endif /* XT_SLICE_H */
