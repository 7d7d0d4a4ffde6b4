/*
 * mdsl_store_i.h -- internals shared by the store's files: mdsl_store.c
 * (lifecycle, appends, 2PC), mdsl_read.c (reads), mdsl_apply.c (index
 * update rules, the slice-state cache), mdsl_recover.c (restart scan),
 * mdsl_gc.c (garbage collection), mdsl_md.c (table metadata),
 * mdsl_space.c (space back after ring-1 moves: folder drops, idle rolls,
 * sweeps).
 *
 * Locks:
 *   s->mu      short: the folder table, segment arrays and their counters,
 *              pending transactions, stats, the writer token flag. Never
 *              held across I/O except mdsl_io_close of an unpinned file.
 *   writer token (s->writing, waited on with s->wr_cv): one thread at a time
 *              appends to segments, fsyncs them and applies the index batch
 *              that follows (LevelDB's writer-queue front). So the order of
 *              COMMIT/GCMOVE records in a folder's TSS is exactly the order
 *              in which their index batches were applied; a rebuild that
 *              replays the TSS in order reproduces the index. Readers never
 *              take the token; GC takes it only to append a bounded chunk.
 *   background token (s->bg_busy, waited on with s->bg_cv): one GC pass,
 *              folder drop pass, roll or sweep at a time; they keep folders
 *              and pinned segments across I/O without mu. Taken before the
 *              writer token, never while holding it.
 */
#ifndef MDSL_STORE_I_H
#define MDSL_STORE_I_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>

#include "mdsl_index.h"
#include "mdsl_seg.h"
#include "mdsl_sltab.h"
#include "mdsl_store.h"
#include "xt_time.h"
#include "xt_worker.h"

/* Live-bytes charge of one pointer on its evidence (TSS) segment. */
#define MDSL_EVIDENCE_COST MDSL_ENTRY_SIZE

struct seg {
    uint32_t no;
    uint64_t size;          /* append end; protected by mu, written by token holder */
    int64_t live;           /* live bytes (mu) */
    mdsl_file *f;
    int refs;               /* readers pinning the file (mu) */
    bool dead;              /* off its array; closed at refs == 0 (mu) */
    uint64_t wrote_ns;      /* last append, xt_mono_ns; open time if none (mu) */
};

struct segarr {
    struct seg **v;         /* sorted by no; last = active (append) segment */
    size_t n, cap;
};

struct csgroup {
    uint32_t group;
    struct segarr segs;
};

struct folder {
    struct folder *hnext;
    uint32_t fsid;
    uint64_t table;
    char *path;
    struct segarr tss;      /* (mu) */
    struct csgroup *cs;     /* (mu) */
    size_t ncs;
    mdsl_file *md;          /* created with the folder */
    uint64_t md_size;       /* (token) */
    int refs;               /* readers using it without mu (mu) */
    bool dropped;           /* off the table (mdsl_space.c); freed at refs 0 (mu) */
};

/* One folder's part of a prepared transaction. */
struct ptx_part {
    struct folder *fo;
    uint32_t man_segno;     /* position of the PREPARE record */
    uint64_t man_off;
    struct mdsl_entry *e;
    size_t n;
};

struct ptx {
    struct ptx *next;
    uint64_t txid;
    struct ptx_part *parts;
    size_t nparts;
    uint64_t want_parts;    /* recovery: tables its PREPAREs name (0 = unknown) */
};

#define MDSL_DECIDED_RING 1024

struct mdsl_store {
    struct mdsl_store_opts o;
    char *dir, *index_dir;
    mdsl_io *io;
    mdsl_index *idx;
    mdsl_sltab *slices;     /* what idx holds per slice (token; mdsl_apply.c) */

    pthread_mutex_t mu;     /* "REQUIRES: mu held" is assert(xt_mutex_held(&s->mu)) */
    pthread_cond_t wr_cv;
    bool writing;           /* writer token (mu) */
    int failed;             /* sticky write error (mu) */

    struct folder **ht;     /* folder hash table (mu) */
    size_t ht_n, ht_cap;
    struct ptx *pending;    /* (mu) */
    uint64_t dec_txid[MDSL_DECIDED_RING]; /* recent decisions (mu) */
    bool dec_commit[MDSL_DECIDED_RING];
    unsigned dec_pos;

    struct mdsl_stat st;    /* counters (mu) */

    xt_worker *gc;          /* the background GC thread, NULL without one */
    bool gc_stop;           /* close began: passes cut short (mu) */
    pthread_cond_t gc_cv;   /* monotonic (xt_cond_init_mono): a throttled
                               pass waits on it for gc_stop */

    /* Background token: one GC pass or space task at a time (GC and the
     * drops hold folders and segments across I/O without mu), taken by the
     * GC thread and by the synchronous calls (mdsl_store_gc, ...). */
    bool bg_busy;           /* (mu) */
    pthread_cond_t bg_cv;
    bool want_drop, want_sweep; /* asked by mdsl_store_space_request (mu) */
    uint64_t drop_due_ns;   /* a drop pass to retry then; 0 none (mu) */
    uint64_t roll_due_ns;   /* next idle-roll check (GC thread only) */
    /* The sweep-owed mark (mdsl_space.c): the ring-1 seq whose sweep is
     * owed, 0 none; as the index's 'W' key says once written. Changed with
     * the writer token held (its index write included), read under mu. */
    uint64_t sweep_owed;    /* (mu) */
    uint64_t sweep_cleared; /* the last seq a sweep cleared (mu): a late
                               pass under it or an older one marks nothing */
    /* A full disk (mdsl_space.c): the reserve in bytes (0: the backend
     * cannot tell free space), and whether the last check found free
     * space under it (for one log line per change). */
    uint64_t reserve;       /* set at open */
    bool short_logged;      /* (mu) */
    uint64_t short_said_ns; /* when it last said so (mu) */
};

/* ---- mdsl_store.c ------------------------------------------------------ */
void mdsl_st_fail(mdsl_store *s, int err, const char *what);
void mdsl_st_token_take(mdsl_store *s);
void mdsl_st_token_put(mdsl_store *s);
/* REQUIRES: mu held. */
struct folder *mdsl_st_folder_find(mdsl_store *s, uint32_t fsid, uint64_t table);
/* Find or create (mkdir + md) a folder. REQUIRES: token held, mu not held. */
int mdsl_st_folder_get(mdsl_store *s, uint32_t fsid, uint64_t table, bool create,
                       struct folder **out);
/* Readers that use a folder without mu pin it (mdsl_read.c): a dropped
 * folder is freed at the last unpin. pin: NULL if absent. */
struct folder *mdsl_st_folder_pin(mdsl_store *s, uint32_t fsid, uint64_t table);
void mdsl_st_folder_unpin(mdsl_store *s, struct folder *fo);
/* Take fo off the folder table for good (a drop): its segments go dead
 * (closed now or at their last unpin), the folder at its last unpin.
 * REQUIRES: mu and the writer token held. */
void mdsl_st_folder_forget(mdsl_store *s, struct folder *fo);
void mdsl_st_bg_take(mdsl_store *s);
void mdsl_st_bg_put(mdsl_store *s);
/* REQUIRES: mu held. NULL if absent. */
struct segarr *mdsl_st_segarr(struct folder *fo, bool is_cs, uint32_t group, bool create);
struct seg *mdsl_st_seg_find(struct segarr *a, uint32_t no);
int mdsl_st_seg_add(mdsl_store *s, struct folder *fo, bool is_cs, uint32_t group,
                    uint32_t no, bool create, struct seg **out);
void mdsl_st_seg_unpin(mdsl_store *s, struct seg *sg); /* REQUIRES: mu held */
void mdsl_st_seg_path(const struct folder *fo, bool is_cs, uint32_t group, uint32_t no,
                      char *buf, size_t n);

/* Staged appends of one writer-token holder. */
struct stage {
    struct folder *fo;
    struct seg *seg;
    bool is_cs;
    uint32_t group;
    uint64_t start;         /* file offset of buf[0] = seg size before */
    uint8_t *buf;
    size_t len, cap;
};
struct wbatch {
    struct stage *v;
    size_t n, cap;
};
/* Append an encoded record (h filled, payload) to the active segment of
 * (fo, kind), rolling to a new segment when full. *segno, *off: its place. */
int mdsl_st_stage(mdsl_store *s, struct wbatch *wb, struct folder *fo, bool is_cs,
                  uint32_t group, struct mdsl_rec_hdr *h, const void *payload,
                  uint32_t *segno, uint64_t *off);
/* Append a complete record as it is (GC moves). */
int mdsl_st_stage_raw(mdsl_store *s, struct wbatch *wb, struct folder *fo, bool is_cs,
                      uint32_t group, const uint8_t *rec, uint32_t len, uint32_t *segno,
                      uint64_t *off);
/* Write + fsync every stage. On error the files are cut back (or the store
 * fails); nothing of the batch stays. */
int mdsl_st_flush(mdsl_store *s, struct wbatch *wb);
void mdsl_st_wbatch_free(struct wbatch *wb);
/* Resume position of a folder: the oldest pending PREPARE, else the TSS
 * end. REQUIRES: mu held. */
void mdsl_st_resume_pos(mdsl_store *s, struct folder *fo, uint32_t *segno, uint64_t *off);
/* Read and verify a pointed-at record. -EAGAIN if its segment is gone (GC
 * raced; the caller re-reads the index). *rec: xt_free. */
int mdsl_st_read_ptr(mdsl_store *s, struct folder *fo, bool is_cs, uint32_t group,
                     const struct mdsl_ptr *p, struct mdsl_rec_hdr *h, uint8_t **rec);
/* Decide a pending tx (token held): decision records, fsync, index. */
int mdsl_st_decide_locked(mdsl_store *s, struct ptx *t, bool commit);
void mdsl_st_ptx_free(struct ptx *t);
void mdsl_st_decided(mdsl_store *s, uint64_t txid, bool commit); /* mu held */

/* ---- mdsl_apply.c ------------------------------------------------------ */
struct live_delta {
    struct folder *fo;
    bool is_cs;
    uint32_t group, segno;
    int64_t delta;
};
/* The slice state that a batch will leave once written (s->slices). */
struct slice_upd {
    xt_slice_id id;
    struct mdsl_slstate st;
};
struct apply_ctx {
    mdsl_store *s;
    struct folder *fo;
    mdsl_index_batch *b;
    struct live_delta *ld;  /* NULL-able growing array */
    size_t nld, capld;
    struct slice_upd *su;   /* NULL-able growing array */
    size_t nsu, capsu;
};
/* Add to ctx->b the index changes of asserting entries e[0..n) with the
 * given evidence segment (the update rules are in mdsl_apply.c).
 * REQUIRES: writer token held (or recovery); every slice appears in at most
 * one call per batch (a slice belongs to one folder, a folder is one part
 * of a transaction, one GCMOVE or one replayed record). */
int mdsl_apply_entries(struct apply_ctx *c, const struct mdsl_entry *e, size_t n,
                       uint32_t evidence);
/* The state of a slice as the index holds it: cached in s->slices, else one
 * scan of its pointers (then cached). REQUIRES: writer token held. */
int mdsl_apply_slice_state(mdsl_store *s, xt_slice_id id, struct mdsl_slstate *st);
/* Call once ctx->b was written: the slice states follow the index. A
 * context freed without it (a failed write) drops its slices' states. */
void mdsl_apply_done(struct apply_ctx *c);
/* Add the live-byte deltas to the segments. REQUIRES: mu held. */
void mdsl_apply_live(struct apply_ctx *c);
void mdsl_apply_ctx_free(struct apply_ctx *c);
/* Entries <-> payload. */
uint8_t *mdsl_entries_encode(const struct mdsl_entry *e, size_t n);
int mdsl_entries_decode(const uint8_t *payload, uint32_t len, struct mdsl_entry **e, size_t *n);

/* ---- mdsl_recover.c ---------------------------------------------------- */
/* Load folders and segments, cut torn tails, replay TSS tails into the
 * index, rebuild pending transactions, compute live bytes. */
int mdsl_recover(mdsl_store *s);

/* ---- mdsl_gc.c --------------------------------------------------------- */
/* Collect up to max_segments closed segments under `threshold` live ratio.
 * Segments freed, or -errno. REQUIRES: the background token held. */
int mdsl_gc_pass(mdsl_store *s, unsigned max_segments, double threshold);
int mdsl_gc_start(mdsl_store *s);
/* Ends the GC thread's wait now (no-op without one): a sweep or drop was
 * asked, or free space fell under the reserve. Any thread, any lock. */
void mdsl_gc_wake(mdsl_store *s);
void mdsl_gc_stop(mdsl_store *s);

/* ---- mdsl_space.c ------------------------------------------------------ */
/* Recovery, before anything else: finish the drops a crash interrupted,
 * load the sweep-owed mark. */
int mdsl_space_recover(mdsl_store *s);
/* The GC thread's share of space back, after each GC pass: requested drop
 * passes and sweeps, idle rolls. REQUIRES: the background token held. */
void mdsl_space_tick(mdsl_store *s);
/* At open: the reserve and the segment size bound from the device size. */
void mdsl_space_size(mdsl_store *s);
/* May a prepare append `need` more bytes? 0, or -ENOSPC when the free
 * space would fall under the reserve and !may_reserve. Unknown free space
 * never refuses. */
int mdsl_space_admit(mdsl_store *s, uint64_t need, bool may_reserve);
/* The GC threshold now: gc_threshold, or the share of the device in use
 * when higher (up to MDSL_GC_USED_THRESHOLD), rising to
 * MDSL_GC_FULL_THRESHOLD as free space falls to the reserve (*pressed:
 * within 4 reserves of it). */
#define MDSL_GC_USED_THRESHOLD 0.5
#define MDSL_GC_FULL_THRESHOLD 0.8
double mdsl_space_gc_threshold(mdsl_store *s, bool *pressed);
/* How many bytes GC may copy to collect one segment: three quarters of the
 * free space (reserve included; at least 64 KiB left over) once it is under 4 reserves (a segment whose copies do not fit would eat
 * the reserve and free nothing: GC takes an emptier one or waits), else
 * no bound (UINT64_MAX, also when free space is unknown). */
uint64_t mdsl_space_gc_room(mdsl_store *s);
/* Roll every active segment under threshold with dead bytes, idle or not
 * (under pressure). Rolled, or -errno. REQUIRES: the background token. */
int mdsl_space_roll(mdsl_store *s, double threshold);

#endif /* MDSL_STORE_I_H */
