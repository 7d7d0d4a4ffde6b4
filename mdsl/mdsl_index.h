/*
 * mdsl_index.h -- the MDSL pointer index in LevelDB ("slim LSM": pointers
 * only, never values).
 *
 * Keys (big-endian integers, so LevelDB's bytewise order is numeric order):
 *   'S' fsid:4 table:8 slice:4 version:8          -> slice image/delta pointer
 *   'C' fsid:4 table:8 slice:4 key:8 group:4      -> column-group pointer
 *   'R' fsid:4 table:8                            -> resume position (12 B:
 *        TSS segno u32 LE, offset u64 LE): every TSS record of the folder
 *        before it has been applied to the index
 *   'W'                                           -> a sweep is owed (8 B: the
 *        ring-1 seq the MDSL counted under, u64 LE; mdsl_space.c); an
 *        index rebuilt from the segments has none (the sweep is then lost,
 *        ordinary GC takes over)
 * Pointer value (40 B, little-endian):
 *   0 segno:4  4 len:4  8 off:8  16 csum:8  24 version:8  32 evidence:4
 *   36 type:1  37 flags:1  38 reserved:2
 * `evidence` is the TSS segment holding the COMMIT or GCMOVE record that made
 * the pointer current (garbage collection must re-assert pointers whose
 * evidence lives in a segment it deletes).
 *
 * Invariants:
 *  (1) A batch is applied atomically (one LevelDB WriteBatch).
 *  (2) The index is thread-safe (LevelDB is); callers order batches.
 */
#ifndef MDSL_INDEX_H
#define MDSL_INDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "xt_store.h"

typedef struct mdsl_index mdsl_index;
typedef struct mdsl_index_batch mdsl_index_batch;

#define MDSL_PTR_SIZE 40

struct mdsl_ptr {
    uint32_t segno, len;   /* len: total record length */
    uint64_t off, csum, version;
    uint32_t evidence;
    uint8_t type, flags;   /* record type (IMAGE/DELTA/COLUMN), XT_STORE_F_* */
};

enum mdsl_ikind { MDSL_IK_SLICE = 'S', MDSL_IK_COLUMN = 'C' };

struct mdsl_ikey {
    uint8_t kind;          /* enum mdsl_ikind */
    xt_slice_id id;
    uint64_t version;      /* SLICE */
    uint64_t key;          /* COLUMN: row uuid */
    uint32_t group;        /* COLUMN */
};

/* Open (creating if missing) the LevelDB at `dir`. *out: close with
 * mdsl_index_close(). -EIO with the LevelDB message logged. */
int mdsl_index_open(const char *dir, mdsl_index **out);
void mdsl_index_close(mdsl_index *idx);
/* Delete the LevelDB folder (for an index rebuild). */
int mdsl_index_destroy(const char *dir);

/* 0 and *out, -ENOENT, or -EIO. */
int mdsl_index_get(mdsl_index *idx, const struct mdsl_ikey *k, struct mdsl_ptr *out);
int mdsl_index_get_resume(mdsl_index *idx, uint32_t fsid, uint64_t table,
                          uint32_t *segno, uint64_t *off);

/* The sweep-owed mark: get (0 and *seq, -ENOENT, -EIO); put writes it
 * (seq > 0) or deletes it (seq 0), synced. */
int mdsl_index_get_sweep_owed(mdsl_index *idx, uint64_t *seq);
int mdsl_index_put_sweep_owed(mdsl_index *idx, uint64_t seq);

/* Iteration; `k` and `p` are valid during the call only; a non-zero return
 * stops and is returned. Entries come in key order. */
typedef int (*mdsl_index_cb)(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg);
int mdsl_index_scan_slice(mdsl_index *idx, xt_slice_id id, mdsl_index_cb cb, void *arg);
/* A scan's pointers gathered in scan order, each with its key's version
 * (the key is the truth). p: xt_free. */
struct mdsl_ptr_list {
    struct mdsl_ptr *p;
    size_t n, cap;
};
/* An mdsl_index_cb appending p to the mdsl_ptr_list arg: 0 or -ENOMEM. */
int mdsl_ptr_list_add(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg);
/* The slice's pointers with from <= version <= to: one seek to `from`, so
 * deletion markers below it are never walked. cb returns 0 or -errno. */
int mdsl_index_scan_slice_from(mdsl_index *idx, xt_slice_id id, uint64_t from, uint64_t to,
                               mdsl_index_cb cb, void *arg);
int mdsl_index_scan_table(mdsl_index *idx, uint32_t fsid, uint64_t table,
                          mdsl_index_cb cb, void *arg);
int mdsl_index_scan_all(mdsl_index *idx, mdsl_index_cb cb, void *arg);
/* Every SLICE pointer of the slices after (fsid, table, slice) of `after`
 * (NULL: of every slice), in key order: one seek, then a walk. */
int mdsl_index_scan_slices_after(mdsl_index *idx, const struct mdsl_ikey *after,
                                 mdsl_index_cb cb, void *arg);

/* Entries returned by gets and scans since open (a cost counter for tests
 * and benchmarks). */
uint64_t mdsl_index_reads(mdsl_index *idx);

/* Batches. new returns NULL on allocation failure. */
mdsl_index_batch *mdsl_index_batch_new(void);
void mdsl_index_batch_put(mdsl_index_batch *b, const struct mdsl_ikey *k, const struct mdsl_ptr *p);
void mdsl_index_batch_del(mdsl_index_batch *b, const struct mdsl_ikey *k);
void mdsl_index_batch_resume(mdsl_index_batch *b, uint32_t fsid, uint64_t table,
                             uint32_t segno, uint64_t off);
/* Forget a folder's resume position (its folder is being dropped). */
void mdsl_index_batch_del_resume(mdsl_index_batch *b, uint32_t fsid, uint64_t table);
/* Apply atomically; `sync` makes LevelDB fsync its log first. */
int mdsl_index_write(mdsl_index *idx, mdsl_index_batch *b, bool sync);
void mdsl_index_batch_free(mdsl_index_batch *b);

#endif /* MDSL_INDEX_H */
