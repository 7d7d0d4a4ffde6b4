/*
 * mdsl_handle_i.h -- the store handle the engine's files share: struct
 * mdsl_store, its folders, segments and prepared transactions, the locks
 * below, and what mdsl_store.c (lifecycle, appends, 2PC) offers the other
 * files: folder and segment lookup and pinning, the tokens, staged appends,
 * pointed-at reads. The engine's other concepts have their own headers:
 * mdsl_apply_i.h (index update rules, live-byte deltas, the slice-state
 * cache), mdsl_recover_i.h (restart scan), mdsl_gc_i.h (garbage
 * collection), mdsl_space_i.h (space accounting: reserve, admission, GC
 * thresholds, space back after ring-1 moves). mdsl_read.c, mdsl_list.c and
 * mdsl_md.c need this header alone.
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
#ifndef MDSL_HANDLE_I_H
#define MDSL_HANDLE_I_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>

#include "mdsl_index.h"
#include "mdsl_seg.h"
#include "mdsl_sltab.h"
#include "mdsl_store.h"
#include "xt_time.h"
#include "xt_worker.h"

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
    uint64_t local_txid;        /* last local txid, without MDSL_TXID_LOCAL (mu) */
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

#endif /* MDSL_HANDLE_I_H */
