/*
 * mdsl_store.h -- the MDSL storage engine (docs/format-mdsl.md): per
 * (fsid, table) folders of append-only segments, a LevelDB pointer index,
 * a two-phase-commit participant, slice loads, column reads, statistics and
 * garbage collection. The network service (pom-mdsl) is a thin layer on this.
 *
 * Transaction states of one txid (the coordinator is the MDS):
 *
 *   (none) --mdsl_store_prepare()--> PREPARED --mdsl_store_commit()--> COMMITTED
 *                                        \------mdsl_store_abort()---> ABORTED
 *
 * Promises:
 *  (1) prepare returns 0 only once its records and the PREPARE marker are
 *      durable; prepared records are invisible to reads.
 *  (2) commit returns 0 once the COMMIT record is durable and the index
 *      points at the records; a failed prepare or commit leaves no visible
 *      partial state (readers see the state before it).
 *  (3) After a restart, every committed transaction is visible, every
 *      prepared-but-undecided one is listed by mdsl_store_prepared() and
 *      waits for the coordinator's commit/abort; torn tails are cut.
 *  (4) After an fsync or index write error the store refuses writes with
 *      -EIO until it is reopened (reads keep working); see mdsl_store_health.
 *
 * A slice moved to another MDSL (docs/mdsl-scale.md "Tombstones") keeps a
 * MOVED tombstone here: an empty IMAGE with XT_STORE_F_MOVED, indexed as any
 * image (mdsl_apply.c rule 1). While it is the slice's newest image, loads
 * and column reads of the slice answer -ESTALE and a DELTA that would apply
 * on top of it is refused at prepare with -ESTALE; an IMAGE without the flag
 * at a higher version brings the slice back.
 *
 * Error codes: -ENOENT (no such slice/column/transaction), -ESTALE (the
 * slice moved away, see above), -EBADMSG (a
 * record failed its checksum: corruption, logged with its place), -ENOSPC
 * (disk full: nothing of the call is visible; retry later), -EIO, -EINVAL,
 * -EEXIST (txid already prepared), -ENOMEM.
 *
 * Threads: every function may be called from any thread at once.
 */
#ifndef MDSL_STORE_H
#define MDSL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mdsl_format.h"
#include "mdsl_io.h"
#include "xt_store.h"

typedef struct mdsl_store mdsl_store;

struct mdsl_store_opts {
    mdsl_io *io;                /* borrowed; must outlive the store */
    const char *dir;            /* segment root, as the io backend names it */
    const char *index_dir;      /* LevelDB folder on the real file system;
                                   NULL = "<dir>/index" */
    uint64_t seg_size;          /* segment size; 0 = 64 MiB; at most a
                                   16th of the device (MDSL_SEG_DEVICE_SHARE),
                                   so GC has closed segments to take */
    double gc_threshold;        /* collect a segment under this live ratio;
                                   0 = 0.25 */
    uint64_t gc_bytes_per_sec;  /* GC read+write budget; 0 = unthrottled */
    bool gc_thread;             /* run GC in a background thread */
    unsigned gc_interval_ms;    /* background pass period; 0 = 1000 */
    unsigned roll_idle_ms;      /* an active segment idle this long under
                                   gc_threshold is rolled (GC may then take
                                   it); 0 = 60000 */
    uint64_t reserve_bytes;     /* free space kept for prepares that free
                                   at least what they add (XT_STORE_F_RESERVE),
                                   their commits and GC; 0 = a 16th of the
                                   device, within [1 MiB, 256 MiB]; UINT64_MAX
                                   = none (docs/format-mdsl.md "A full
                                   disk") */
};

/* A segment is at most the device's size / this (never under 1 MiB). */
#define MDSL_SEG_DEVICE_SHARE 16

/* Open (creating `dir` if needed) and recover. *out: mdsl_store_close(). */
int mdsl_store_open(const struct mdsl_store_opts *o, mdsl_store **out);
/* Stop GC, close files and the index. Does no writes (a crash-safe close). */
void mdsl_store_close(mdsl_store *s);

/* ---- two-phase commit ------------------------------------------------ */

/* Records (xt_store.h, borrowed) of types IMAGE, DELTA and COLUMN; flags
 * TOMBSTONE (empty COLUMN), MOVED (empty IMAGE), SYS (IMAGE/DELTA) and
 * RESERVE (prepare only: on every record of a transaction that frees at
 * least what it adds; such a prepare may use the space reserve, any other
 * is refused with -ENOSPC once free space would fall under it).
 * REQUIRES: txid != 0; n >= 1. Records may span tables. -EEXIST if txid is
 * already prepared; -EINVAL (logged) for a bad type, flag or length;
 * -ENOSPC when the device lacks the room or only the reserve is left and
 * not every record carries XT_STORE_F_RESERVE;
 * -ESTALE if a DELTA's slice has a MOVED newest image older than the delta
 * (checked against committed state only). */
int mdsl_store_prepare(mdsl_store *s, uint64_t txid, const struct xt_store_rec *recs, size_t n);
/* 0 also when txid was recently committed (an idempotent retry); -ENOENT
 * if unknown; -EINVAL if it was aborted. */
int mdsl_store_commit(mdsl_store *s, uint64_t txid);
/* 0 also when txid was recently aborted; -ENOENT if unknown (never
 * prepared here, or decided too long ago to remember); -EINVAL if it was
 * committed. */
int mdsl_store_abort(mdsl_store *s, uint64_t txid);
/* Prepared, undecided txids of coordinators (local ones are never listed):
 * *txids (caller frees with xt_free), *n. */
int mdsl_store_prepared(mdsl_store *s, uint64_t **txids, size_t *n);

/* Local transactions: the MDSL's own writes of records copied from a peer
 * (mdsl_catchup.h), prepared and committed under one hold of the writer
 * token, so no coordinator ever sees them. Their txids have
 * MDSL_TXID_LOCAL set, a bit no MDS txid uses (mds_group.h: 16 + 24 + 23
 * bits); one undecided at a restart (a crash between its PREPARE and its
 * COMMIT) is aborted by the open. Records as for prepare, refused the space
 * reserve. 0 once committed (the index updated by the rules of
 * mdsl_apply.c: an older copied record never replaces a newer one), or the
 * prepare's error, or -EIO. */
#define MDSL_TXID_LOCAL (UINT64_C(1) << 63)
int mdsl_store_apply_local(mdsl_store *s, const struct xt_store_rec *recs, size_t n);

/* ---- reads ----------------------------------------------------------- */

/* -ENOENT if the slice has nothing, -ESTALE if its newest image is MOVED.
 * On 0 the caller frees *out with xt_store_load_free; on error it is zeroed.
 * The caller replays the image and the deltas (opaque bytes here). */
int mdsl_store_load_slice(mdsl_store *s, xt_slice_id id, struct xt_store_load *out);

/* *data (caller frees with xt_free; may be NULL when *len is 0). -ENOENT if
 * absent or deleted (tombstone); -ESTALE if the slice's newest image is
 * MOVED. */
int mdsl_store_read_column(mdsl_store *s, xt_slice_id id, uint64_t key, uint32_t group,
                           void **data, uint32_t *len, uint64_t *version);

/* Table metadata (opaque), kept in the folder's `md` file; durable on 0. */
int mdsl_store_set_md(mdsl_store *s, uint32_t fsid, uint64_t table, const void *md, uint32_t len);
/* *md: caller frees with xt_free. -ENOENT if none was set. */
int mdsl_store_get_md(mdsl_store *s, uint32_t fsid, uint64_t table, void **md, uint32_t *len);

/* ---- listing (mdsl_list.c) -------------------------------------------- */

/* Server-side cap on the entries of one list call, and the cursor size. */
#define MDSL_LIST_MAX 4096
#define MDSL_LIST_CURSOR 16
_Static_assert(MDSL_LIST_CURSOR <= XT_STORE_CURSOR_MAX, "a cursor fits a listing page");

/* Up to min(max, MDSL_LIST_MAX) slices in index order (fsid, table, slice)
 * after `cursor` (cursor_len 0: from the first; else a cursor a previous
 * call returned, borrowed). Each call reads one snapshot of the index;
 * slices stored between calls before the cursor are not listed. -EINVAL if
 * max is 0 or the cursor is malformed. Free *out with xt_store_list_free. Each
 * entry's version is the newest the index holds for the slice (image or
 * delta), moved whether its newest image is a MOVED tombstone. */
int mdsl_store_list_slices(mdsl_store *s, const void *cursor, uint32_t cursor_len, uint32_t max,
                           struct xt_store_list *out);

/* Ring-1 changes (docs/mdsl-scale.md "Completion"): counts into *misplaced
 * the live slices (newest image not MOVED; fsid 0, the decision records,
 * excluded) that `ring` (borrowed, an xt_ring of ring 1) places on another
 * site than `self`, by the MDS's own placement, xt_ring_lookup(xt_ring_key).
 * Reads the listing in pages of `page` slices (1..MDSL_LIST_MAX), sleeping
 * pause_ms between pages so a pass never competes with prepares for long;
 * *stop (may be NULL), read between pages, ends the pass with -ECANCELED.
 * -ENOENT if the ring has no site; errors of the listing as they are. */
struct xt_ring;
int mdsl_store_count_misplaced(mdsl_store *s, const struct xt_ring *ring, uint32_t self,
                               uint32_t page, unsigned pause_ms, const _Atomic bool *stop,
                               uint64_t *misplaced);

/* ---- management ------------------------------------------------------ */

struct mdsl_stat {
    uint64_t tables, segments;
    uint64_t bytes;             /* bytes in segment files */
    uint64_t live_bytes;        /* bytes of records the index points at (+
                                   the evidence charge, see docs) */
    double live_ratio;          /* live_bytes / bytes (1 when empty) */
    uint64_t prepared, commits, aborts;
    uint64_t written_bytes;     /* record bytes prepares appended */
    uint64_t gc_passes, gc_moved_bytes, gc_freed_segments, gc_freed_bytes;
    uint64_t dropped_folders;   /* folders dropped whole (all slices MOVED) */
    uint64_t dropped_bytes;     /* bytes of their files */
    uint64_t rolled_segments;   /* active segments rolled (idle or sweep) */
    uint64_t sweeps;            /* sweeps run to their end (after a join) */
    uint64_t sweep_owed;        /* ring-1 seq of a sweep owed, 0 none */
    uint64_t corrupt_records;   /* checksum failures seen by reads/scans */
    int failed;                 /* 0 or the sticky write error */
};
int mdsl_store_stat(mdsl_store *s, struct mdsl_stat *st);
/* 0 or the sticky write error (invariant 4). */
int mdsl_store_health(mdsl_store *s);

/* One synchronous GC pass over at most max_segments segments whose live
 * ratio is under the threshold. Returns the number of segments freed. */
int mdsl_store_gc(mdsl_store *s, unsigned max_segments);

/* ---- space back after ring-1 moves (mdsl_space.c) --------------------
 *
 * docs/mdsl-scale.md "Space back": a folder whose every slice head is a MOVED
 * tombstone, with no pending prepare and no column or md record, is dropped
 * whole (renamed to t.F.T.drop, its index and resume keys deleted in one
 * synced batch, its files unlinked; a restart finishes a drop it finds). An
 * active segment idle roll_idle_ms under gc_threshold is rolled so GC can
 * take it; a sweep rolls the active segments under its threshold and
 * collects every closed segment under it. All run without mu held during
 * I/O; a drop holds the writer token for its rename and index batch only.
 *
 * The caller decides when a drop is safe (pom-mdsl: once the ring-1 change
 * that moved the slices is past MOVING, mdsl_ring1.c). */

/* One drop pass over the whole index. Folders dropped, or -errno. */
int mdsl_store_drop_moved(mdsl_store *s);
/* Roll the active segments idle roll_idle_ms under gc_threshold. Rolled. */
int mdsl_store_roll_idle(mdsl_store *s);
/* Roll every active segment under `threshold` (0 < threshold < 1), then GC
 * at that threshold until nothing is left under it. Segments freed. */
int mdsl_store_sweep(mdsl_store *s, double threshold);
/* Ask the background GC thread (gc_thread) for a drop pass and/or a sweep
 * at MDSL_SWEEP_THRESHOLD at its next wake-up. Never blocks on I/O. */
#define MDSL_SWEEP_THRESHOLD 0.6
void mdsl_store_space_request(mdsl_store *s, bool drop, bool sweep);
/* The crash point (xt_crash.h) the background thread passes before a sweep
 * it was asked for: the restart tests arm it (pom-mdsl --crash-point). */
#define MDSL_CRASH_SWEEP "mdsl.sweep"

/* The sweep a change owes survives restarts: before this MDSL reports a
 * count for a change in which it loses slices, the ring-1 reporter records
 * the ring-1 seq it counts under (seq > 0; it grows at every phase change)
 * as owing a sweep, durably (a synced index write; nothing when that seq is
 * owed already). The first sweep at MDSL_SWEEP_THRESHOLD or more that runs
 * to its end afterwards clears it (one cut short by close or a write error
 * does not); after that, a seq at or below the cleared one marks nothing (a
 * pass that was late). 0 or -errno. */
int mdsl_store_sweep_owe(mdsl_store *s, uint64_t seq);
/* The seq whose sweep is owed, 0 none (the mark as the last open found it,
 * or as owe/sweep left it). */
uint64_t mdsl_store_sweep_owed(mdsl_store *s);

#endif /* MDSL_STORE_H */
