/*
 * pom_client_i.h -- internals of libpomegranate shared by its modules:
 * the fs handle, the inode map (pom_ino.c), the RPC helpers and row
 * helpers (pom_fs.c), open-file buffers (pom_file.c).
 *
 * Namespace model (docs/client.md):
 *  (1) Every directory is the xTable table named by its uuid; an entry is
 *      the row keyed by its name in its parent's table and carries the
 *      entry's attributes (a directory's row carries the directory's).
 *  (2) The root's row is "root" in the reserved super table
 *      POM_TABLE_SUPER, which also holds the uuid counter row "alloc".
 *  (3) The inode map knows, for each inode the kernel (or a library user)
 *      holds references on, where its row is: (table, name). Rows are
 *      always re-read and their uuid compared before use, so a map entry
 *      that went stale (another client renamed or removed it) answers
 *      -ENOENT instead of touching another file's row.
 *  (4) A uuid is handed out once: the counter row is advanced with a
 *      version-conditional, synchronous update before any uuid of the
 *      claimed range is used.
 *  (5) A sync vouches only for changes acknowledged by the MDS incarnation
 *      (epoch) that answers it: an MDS killed before a commit group
 *      committed loses that group, and a sync retried against its restarted
 *      successor must not vouch for it. The changes a gone incarnation
 *      acknowledged and no sync covered are recorded by what they touched
 *      (pom_errseq.c), and every handle on those files, directories and
 *      keyspaces answers -EIO once at its next fsync, close or sync.
 *      Kept per MDS (struct pom_mds, pom_route.h): with many MDS a sync
 *      syncs every MDS of the view, each as its site state says (pom_fs.c
 *      sync_one): a FAILED MDS is not called and counts as a restart (-EIO
 *      once if it acknowledged unsynced changes); a DRAINING or removed one
 *      gets one short attempt, and finding it gone is no error.
 */
#ifndef POM_CLIENT_I_H
#define POM_CLIENT_I_H

#include "pomegranate.h"
#include "xt_common.h"
#include "xt_row.h"
#include "xt_rpc_mds.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define POM_TABLE_SUPER   UINT64_C(2)          /* reserved: root row, counters */
#define POM_ROOT_ROW      "root"
#define POM_ALLOC_ROW     "alloc"
/* Client-allocated uuids start here, far above the ranges R2 hands out
 * (R2_MGR_UUID_RANGE-sized ranges counted from 1), so an fs can later move
 * to R2 allocation without a collision. */
#define POM_UUID_BASE     (UINT64_C(1) << 56)
#define POM_UUID_CHUNK    1024u
#define POM_CHG_RING      1024u   /* flushes remembered (struct pom_fs) */
/* Hard links (docs/client.md "Hard links"): the reserved inode link table
 * holds, for a file with more than one name, its row (attributes, data,
 * xattrs, nlink) under the name pom_ilt_name(uuid); each of its names is a
 * *link stub* in its directory: same uuid and type, POM_ROW_F_LINKED set,
 * no data or xattrs. */
#define POM_TABLE_ILT     UINT64_C(3)
#define POM_ROW_F_LINKED  0x100u  /* attr flag: the attributes are in the ILT */
#define POM_ILT_NAME_LEN  16      /* the uuid in lowercase hex, zero-padded */
/* The global directory table (docs/client.md "The GDT"): one row
 * per directory, named pom_ilt_name(uuid), telling where the directory's
 * own row is, so a directory is found by its uuid alone (file handles
 * that outlive a mount). A *copy*: written by RMU (XT_F_RMU ops in the
 * batches of mkdir, rmdir and directory renames, delivered by the MDS
 * after the batch, newest stamp wins), so it may lag the truth by about
 * a second and, after races, point at a name that no longer holds the
 * directory: readers check the row it points at (uuid) before use. The
 * row: type XT_ROW_KV, attr.uuid = the directory, attr.ctime_ns = the
 * stamp of the change it copies (set by the delivering MDS), group
 * XT_CG_USER0 = POM_GDT_FMT (1) || parent uuid (8, LE) || name_len (2,
 * LE) || name (no NUL). */
#define POM_TABLE_GDT     UINT64_C(4)
#define POM_GDT_FMT       1
#define POM_GDT_HEAD      11        /* fmt + parent + name_len */

/* Open-file state shared by every pom_file of one inode. */
struct pom_data {
    /* Orders the flushes of this inode: held across the row update so an
     * older snapshot never lands after a newer one (the one lock held
     * across an RPC; nothing else waits on it but another flush). */
    pthread_mutex_t flush_mu;
    pthread_mutex_t mu;
    uint8_t *buf;          /* protected by mu; xt_malloc'd, len bytes valid (inline) */
    uint64_t len;          /* protected by mu: the file's size */
    uint32_t cap;          /* protected by mu: bytes of buf */
    bool blob;             /* protected by mu: the bytes are in the blob tier
                              (pom_file.c; buf unused), set from the row's
                              XT_ROW_F_BLOB at open or by a migration */
    uint64_t tracts;       /* protected by mu: id naming the tracts of the
                              bytes (blob), 0 when inline (pom_tracts_id) */
    uint64_t row_tracts;   /* protected by mu: the id the row names as of
                              the last read or flush (0: inline row) */
    bool dirty;            /* protected by mu: buf differs from the row */
    bool stale;            /* protected by mu: the MDS restarted since buf was
                              read, so the row may be older (lost changes):
                              reloaded at the next open unless dirty */
    uint64_t wgen;         /* protected by mu: bumped by every change of buf */
    uint64_t mtime_ns;     /* protected by mu: of the last buffered write */
    struct stat st;        /* protected by mu: attributes as of open/flush;
                              once unlinked, the file's only attributes */
    /* The XT_CG_XATTR group (xt_malloc'd, NULL when empty), protected by
     * mu: copied at open, replaced by this client's xattr changes, re-read
     * exactly at its unlink here (pom_ops.c). Serves the xattr calls only
     * once the file is unlinked and open here (it has no row then). */
    uint8_t *xattr;
    uint32_t xattr_len;
};

struct pom_inode {
    uint64_t uuid;
    uint64_t table;        /* protected by fs->mu: table holding its row */
    char *name;            /* protected by fs->mu: its row key (xt_malloc'd) */
    uint64_t nlookup;      /* protected by fs->mu */
    uint32_t opens;        /* protected by fs->mu: pom_files on it */
    bool unlinked;         /* protected by fs->mu: its name was removed */
    uint64_t gone_mark;    /* protected by fs->mu: pom_restart_count when the
                              removal was acknowledged (pom_tracts_drop) */
    uint8_t type;          /* enum xt_row_type */
    struct pom_data *data; /* protected by fs->mu: set while opens > 0 */
    uint64_t seen_size;    /* protected by fs->mu: size and mtime of the row */
    uint64_t seen_mtime;   /*   as pom_file.c last read or wrote it (0, 0: never) */
    struct pom_inode *next;/* protected by fs->mu: hash chain */
};

struct pom_fs {
    uint32_t fsid;
    struct pom_route *route;       /* the MDS and where each request goes */
    int retry_ms;                  /* hard: how long a call retries (pom_fs.c) */
    int soft_ms;                   /* > 0: soft, a call answers -EIO after it */
    int call_ms;                   /* one attempt's timeout (pom_opts) */
    pthread_mutex_t mu;            /* the inode map and the uuid range */
    struct pom_inode **buckets;    /* protected by mu */
    size_t nbuckets, ninodes;      /* protected by mu */
    uint64_t uuid_next, uuid_end;  /* protected by mu: claimed range */
    /* The last flushes of this client (pom_ino_flushed, pom_ino_stat_fix):
     * flush number chg_seq is at chg_ring[chg_seq % POM_CHG_RING]. A ring,
     * not a field of the inode: the map may drop an inode right after its
     * flush, before a listing that read its older row hands that out. */
    uint64_t chg_seq;              /* protected by mu */
    uint64_t chg_ring[POM_CHG_RING]; /* protected by mu: uuids */
    pthread_mutex_t alloc_mu;      /* serialises range claims */
    /* Which MDS incarnations acknowledged our changes (invariant 5): the
     * per-MDS fields of struct pom_mds. */
    pthread_mutex_t epoch_mu;
    uint64_t restarts;             /* epoch_mu: MDS restarts seen (new epochs) */
    struct pom_errseq *es;         /* epoch_mu: lost changes (pom_errseq.c) */
    /* Tract sets no row will name once a change commits (pom_file.c
     * pom_tracts_drop): removed after a sync of every MDS with no restart
     * seen since. */
    pthread_mutex_t gone_mu;
    struct pom_gone *gone;         /* gone_mu: xt_malloc'd */
    size_t ngone, capgone;         /* gone_mu */
    pom_restart_fn restart_cb;     /* pom_set_restart_cb; set before use */
    void *restart_arg;
    struct r2_agent *agent;        /* the mount's R2 registration, or NULL */
    struct pom_blob *blob;         /* the blob tier, or NULL (large files: -EFBIG);
                                      set by pom_set_blob before files are used */
    struct pom_reclaim *reclaim;   /* pom_reclaim_start's thread, or NULL */
    atomic_uint_fast64_t rpcs;     /* MDS round trips sent (every attempt of
                                      pom_call/batch/list/sync): tests count them */
};

struct pom_file {
    pom_fs *fs;
    struct pom_inode *ino;  /* pinned by ino->opens */
    int flags;
    bool unchanged;         /* pom_file_unchanged's answer, set at open */
    struct pom_blob_file *bf; /* protected by ino->data->mu: this handle's
                                 reference on the file's tracts, taken at
                                 first blob I/O, given back at release */
    uint64_t bf_id;           /* protected by ino->data->mu: the tracts id bf
                                 was opened for (data->tracts may move on) */
    uint64_t err_sample;      /* protected by fs->epoch_mu: the lost changes
                                 this handle was told of (pom_errseq.c (4)) */
};

/* ---- pom_fs.c: RPC and rows ------------------------------------------ */

/* One xTable call with retries on transport errors for fs->retry_ms (same
 * request id). *retried says whether an earlier attempt may have been
 * applied (then -EEXIST/-ENOENT may be our own earlier attempt's doing). */
int pom_call(pom_fs *fs, struct xt_req *req, struct xt_resp *resp, bool *retried);
/* An atomic batch (xt_mds_batch_atomic) with pom_call's retries. Returns
 * 0, the first failing op's -errno (*failed its index), or a transport
 * error (*failed SIZE_MAX). *retried as for pom_call. */
int pom_batch_call(pom_fs *fs, struct xt_req *reqs, size_t n, size_t *failed, bool *retried);
int pom_list_call(pom_fs *fs, const struct xt_list_req *req, struct xt_list_resp *resp);
/* A sync of every MDS (pom_sync without its report of lost changes, which
 * the caller makes for its handle): 0 or a transport error. */
int pom_sync_call(pom_fs *fs);
/* MDS restarts this client has seen so far (a new epoch in a reply). A
 * change acknowledged when the count was c is committed once a sync
 * returns with the count still c. */
uint64_t pom_restart_count(pom_fs *fs);
/* A sync of every MDS with one attempt each, for the library's own needs
 * (tract sets waiting for a commit): 0 or a negative errno. */
int pom_sync_quiet(pom_fs *fs);

/* Fetches the row (table, name) with `group`: POM_ROW_META (fixed columns
 * only), POM_ROW_ALL, or one group id. *resp holds the encoding
 * (xt_resp_free); *row views it (group pointers valid while resp is). On an
 * error *resp is empty. */
#define POM_ROW_META 0
#define POM_ROW_ALL  (-1)
int pom_row_get(pom_fs *fs, uint64_t table, const char *name, int group,
                struct xt_resp *resp, xt_row *row);
/* Builds struct stat from fixed columns. */
void pom_row_stat(const xt_row_attr *a, struct stat *st);
/* Sleeps ms milliseconds (the pauses between retries). */
void pom_pause_ms(int ms);
/* A timespec in nanoseconds (the rows' time unit). */
uint64_t pom_ts_ns(const struct timespec *ts);
/* A fresh uuid. */
int pom_uuid_alloc(pom_fs *fs, uint64_t *uuid);
/* Checks a name (rule (3) of pomegranate.h). */
int pom_name_check(const char *name);

/* ---- pom_errseq.c: lost changes and who was told ------------------- */

struct pom_mds;
int pom_es_init(pom_fs *fs);
void pom_es_free(pom_fs *fs);
/* MDS m acknowledged (its ack_seq is this change's) a change touching
 * keys[0..n) (0 entries are skipped). REQUIRES: epoch_mu. */
void pom_es_acked(pom_fs *fs, struct pom_mds *m, const uint64_t *keys, size_t n);
/* A sync answered by the incarnation that acknowledged m's changes up to
 * ack seq seq0: they are committed. REQUIRES: epoch_mu. */
void pom_es_committed(pom_fs *fs, struct pom_mds *m, uint64_t seq0);
/* m's incarnation is gone (restart, FAILED): its unsynced changes count as
 * lost, a loss event for each key they touched. true when there were
 * some. REQUIRES: epoch_mu. */
bool pom_es_lose(pom_fs *fs, struct pom_mds *m);
/* The sample a new handle on key starts from. */
uint64_t pom_es_sample(pom_fs *fs, uint64_t key);
/* -EIO when a loss of key (or one not traced to keys) happened after
 * *sample, which then moves past it (told once); else 0. */
int pom_es_check(pom_fs *fs, uint64_t key, uint64_t *sample);
/* pom_sync's: -EIO once per loss of any key since its last -EIO. */
int pom_es_check_fs(pom_fs *fs);

/* ---- pom_ops.c, pom_link.c: shared by the namespace operations ------- */

/* Whether a batch's failing parent-row op (pom_dir_upd_op) says the row is
 * not where the inode map says (removed, or moved by another client):
 * -ENOENT or -ESTALE (its uuid condition). Anything else (-ENOMEM, -EIO)
 * is an error of the call, passed on as it is. */
static inline bool pom_parent_missing(int rc)
{
    return rc == -ENOENT || rc == -ESTALE;
}

/* 0 when dir is a known directory; -ENOTDIR, -ESTALE, -ENOENT. */
int pom_dir_check(pom_fs *fs, pom_ino dir);
/* 1 when table dir has no entry (never created counts as empty), 0, -errno. */
int pom_dir_empty(pom_fs *fs, uint64_t dir);
/* Reads the current row of a known inode (group as pom_row_get), following
 * a link stub to the ILT row (and recording that location), and checks it
 * still is that inode: *table/name get where the row is. 0, -ENOENT
 * (removed or replaced), -ESTALE (unknown). */
int pom_ino_row(pom_fs *fs, pom_ino ino, int group, uint64_t *table, char *name,
                struct xt_resp *r, xt_row *row);
/* The ILT row name of uuid into buf (POM_ILT_NAME_LEN + 1 bytes). */
void pom_ilt_name(uint64_t uuid, char *buf);
/* Replaces *r and *row (r freed first) by the ILT row of uuid. -ENOENT, -EIO. */
int pom_stub_follow(pom_fs *fs, uint64_t uuid, int group, struct xt_resp *r, xt_row *row);
/* 1 if the row (table, name) holds uuid now, 0 if not (or absent), < 0. */
int pom_name_holds(pom_fs *fs, uint64_t table, const char *name, uint64_t uuid);
/* The change of directory dir's own row that goes into an atomic batch
 * changing dir's entries (docs/client.md "nlink", "times"): mtime = ctime
 * = now, and nlink + delta (delta = subdirectories gained) added by the
 * MDS (XT_ROW_SET_NLINK_ADD: only rows that count, xt_row_count_of; directories
 * made before the count was kept report 1, "unknown", forever). No read:
 * the op is conditional on dir's uuid alone, so its failure in the batch
 * (-ENOENT, -ESTALE) means the row is not where the map says (dir removed
 * or moved by another client). `u` holds what *q points at: it must
 * outlive q. -ENOTDIR, -ESTALE (dir unknown), -ENOENT (marked unlinked). */
struct pom_dir_upd {
    uint64_t table;             /* where dir's row is */
    char name[XT_NAME_MAX + 1];
    xt_row row;                 /* the new values */
};
int pom_dir_upd_op(pom_fs *fs, pom_ino dir, int delta, uint64_t now, struct pom_dir_upd *u,
                   struct xt_req *q);
/* Removes the link stub (parent, name) whose attributes are *stub, with
 * its ILT nlink change, atomically. -ESTALE: read again. */
int pom_unlink_stub(pom_fs *fs, pom_ino parent, const char *name, const xt_row_attr *stub);

/* ---- pom_gdt.c: the GDT's writer ------------------------------------ */

/* What a GDT copy op points into (the caller keeps it while the op is
 * used). */
struct pom_gdt_buf {
    char key[POM_ILT_NAME_LEN + 1];
    uint8_t grp[POM_GDT_HEAD + XT_NAME_MAX];
    xt_row row;
};
/* The copy op (XT_F_RMU) into *q saying directory dir's row is now `name`
 * in table `parent` (name NULL: dir is gone), as of stamp (the change's
 * xt_now_ns). -EINVAL (name empty or too long). */
int pom_gdt_op(uint64_t dir, uint64_t parent, const char *name, uint64_t stamp,
               struct pom_gdt_buf *b, struct xt_req *q);
/* Where a GDT row (read with its XT_CG_USER0 group) says its directory
 * is: *parent and name (XT_NAME_MAX + 1 bytes, NUL-terminated). -EIO: not
 * a GDT row (type, format, lengths), or one no reader may follow (parent
 * 0 or the directory itself, a name that is no valid entry name). */
int pom_gdt_parse(const xt_row *row, uint64_t *parent, char *name);

/* ---- pom_gdt_read.c: directories found by uuid ----------------------- */

/* pom_gdt_parse and what a reader checks before following the hint: row
 * is directory uuid's GDT row (its uuid, type KV), the name is a valid
 * entry name, the parent neither 0 nor uuid. 0, or -EIO with a log line
 * saying why. */
int pom_gdt_read_hint(const xt_row *row, uint64_t uuid, uint64_t *parent, char *name);
/* Where directory uuid's row is, by its GDT row, verified and waited for
 * (pom_gdt_read.c invariants 1-4): *parent and name (XT_NAME_MAX + 1
 * bytes) get its location, *st (may be NULL) its attributes. 0, -ESTALE
 * (not found within 3 s), -EIO (a damaged GDT row), or an error of the
 * calls. The inode map is not touched. */
int pom_gdt_where(pom_fs *fs, uint64_t uuid, uint64_t *parent, char *name, struct stat *st);

/* ---- pom_ino.c: the inode map ---------------------------------------- */

int pom_ino_init(pom_fs *fs);
void pom_ino_destroy(pom_fs *fs);
/* Adds n references to uuid, created if new, and records its location
 * (table, name). -ENOMEM. */
int pom_ino_ref(pom_fs *fs, uint64_t uuid, uint64_t table, const char *name, uint8_t type,
                uint64_t n);
void pom_ino_forget(pom_fs *fs, uint64_t uuid, uint64_t n);
/* Location of a known inode: name gets its row key (XT_NAME_MAX + 1 bytes).
 * -ESTALE when unknown, -ENOENT when marked unlinked. */
int pom_ino_where(pom_fs *fs, uint64_t uuid, uint64_t *table, char *name, uint8_t *type);
/* Records a rename of uuid (if known) to (table, name). */
void pom_ino_moved(pom_fs *fs, uint64_t uuid, uint64_t table, const char *name);
/* Marks uuid (if known) as unlinked: getattr then answers from an open
 * buffer or -ENOENT. */
void pom_ino_unlinked(pom_fs *fs, uint64_t uuid);
/* Marks every clean open buffer stale (the MDS restarted: struct pom_data
 * `stale`). */
void pom_ino_mark_stale(pom_fs *fs);
/* Replaces the clean buffer of an inode open here by `row`'s content and
 * attributes when it is stale or its size/mtime/tier differ from the
 * row's; leaves a dirty one alone. */
void pom_ino_reload(struct pom_inode *ino, const xt_row *row);
/* Whether ancestor is dir or one of dir's known ancestors. */
bool pom_ino_is_ancestor(pom_fs *fs, uint64_t ancestor, uint64_t dir);
/* Pins a known inode for an open file (opens++), creating its pom_data
 * from `row` when it is the first open. -ESTALE, -ENOMEM. */
int pom_ino_open(pom_fs *fs, uint64_t uuid, const xt_row *row, struct pom_inode **out);
/* Pins uuid if it is open here (opens++) and returns it, else NULL. */
struct pom_inode *pom_ino_pin_open(pom_fs *fs, uint64_t uuid);
/* Unpins; frees the pom_data on the last close. */
void pom_ino_close(pom_fs *fs, struct pom_inode *ino);
/* Pins uuid (opens++) if it is open here AND marked unlinked: a file that
 * now lives only in this client's memory (ino->data), whose attributes and
 * xattrs are changed there. NULL otherwise. Unpin with pom_data_unpin. */
struct pom_inode *pom_ino_pin_orphan(pom_fs *fs, uint64_t uuid);
/* Gives uuid's open state (if open here) the xattr group grp (len bytes;
 * xt_malloc'd, or NULL when len is 0): it takes ownership of grp in every
 * case (freed at once when uuid is not open here). */
void pom_ino_keep_xattrs(pom_fs *fs, uint64_t uuid, uint8_t *grp, uint32_t len);
/* Whether uuid is open here. */
bool pom_ino_is_open(pom_fs *fs, uint64_t uuid);
/* Whether uuid is in the map (someone holds a reference or it is open). */
bool pom_ino_known(pom_fs *fs, uint64_t uuid);
/* The flush counter (fs->chg_seq): read it before the RPC that brings a
 * row whose attributes go to pom_ino_stat_fix. */
uint64_t pom_ino_seq(pom_fs *fs);
/* Records a flush of uuid's size/times that the MDS acknowledged. */
void pom_ino_flushed(pom_fs *fs, uint64_t uuid);
/* All of *st from the open buffer of uuid, if open here: 1 if *st was
 * filled, else 0. For a file unlinked here and still open. */
int pom_ino_open_stat(pom_fs *fs, uint64_t uuid, struct stat *st);
/* Corrects *st, read from a row by an RPC started when the flush counter
 * was `since`: size/mtime/ctime from the open buffer while it is dirty
 * (the row is older) or when a flush of it ended after `since`. -EAGAIN
 * when such a flush ended (or too many flushes did to tell) and the file
 * is not open here: the row may predate it -- read it again. Handing
 * the kernel such a size made it read a just-written file as empty. */
int pom_ino_stat_fix(pom_fs *fs, uint64_t uuid, struct stat *st, uint64_t since);

/* ---- pom_file.c: open-file buffers ---------------------------------- */

/* Unpins an inode pinned by pom_ino_pin_open/pom_ino_pin_orphan; the last
 * unpin of an unlinked blob file removes its tracts (pom_file.c (6)). */
void pom_data_unpin(pom_fs *fs, struct pom_inode *ino);
/* The tract sets of the files open here (their current and their row's
 * ids): sets this client holds, which may have no row naming them yet (a
 * migration not flushed) or any more (unlinked, still open). *out:
 * xt_malloc'd, *n ids (the caller frees). 0 or -ENOMEM. */
int pom_data_held(pom_fs *fs, uint64_t **out, size_t *n);
/* Flushes the open buffer of uuid if it is open and dirty; 0 otherwise. */
int pom_data_flush_ino(pom_fs *fs, uint64_t uuid);
/* Sets the size of regular file ino (known) and writes the row (size,
 * mtime, ctime, flags): inline or in the blob tier, migrating when it
 * passes POM_INLINE_MAX. -EFBIG past POM_FILE_MAX (or POM_INLINE_MAX
 * without a blob tier), -EISDIR, -EINVAL (not a regular file). */
int pom_data_setsize(pom_fs *fs, uint64_t ino, uint64_t size);
/* One tract set waiting for a commit before its removal. */
struct pom_gone {
    uint64_t id;       /* tracts id (pom_tracts_id) */
    uint64_t mark;     /* pom_restart_count when the change unnaming it was
                          acknowledged */
};
/* Queues the removal of tract set id, which no row names once the change
 * acknowledged at restart count `mark` commits (a deleted file, the old set
 * of a rewrite). Done at the next sync of this client (pom_sync_call), at
 * pom_close, or at once (one extra sync) past 64 queued sets. If the MDS
 * restarted meanwhile the change may be lost and the row still name them:
 * they stay (an orphan for fsck, never a file reading zeros). */
void pom_tracts_drop(pom_fs *fs, uint64_t id, uint64_t mark);
/* Takes the queue before a sync; pom_gone_finish after it: sync_rc < 0
 * puts the sets back, else removes those marked `mark` (no restart since)
 * and forgets the rest. */
size_t pom_gone_take(pom_fs *fs, struct pom_gone **out);
void pom_gone_finish(pom_fs *fs, struct pom_gone *v, size_t n, int sync_rc, uint64_t mark);
/* A sync now, then pom_gone_finish (pom_close, a full queue). */
void pom_tracts_reap(pom_fs *fs);
/* 64 random-looking bits, different at every call in practice (a counter,
 * the time and the process hashed; no lock, no RPC). pom_kv.c. */
uint64_t pom_nonce(void);
/* The id naming the tracts of a blob row: its generation, which a
 * rewrite from size 0 changes (copy-on-write, pom_file.c (3)), or its
 * uuid for rows written before generations (0). */
uint64_t pom_tracts_id(const xt_row_attr *a);
/* Call when the last name of a file is gone (its row, attributes a, was
 * deleted): removes its tracts once that is committed, or at the last
 * release if it is open here. A no-op for files without tracts. */
void pom_data_gone(pom_fs *fs, const xt_row_attr *a);
/* For getattr: st_blocks of a blob file from the tracts it really has
 * (sparse files), when that is cheap (<= 4,096 tracts). */
void pom_data_fix_blocks(pom_fs *fs, const xt_row_attr *a, struct stat *st);

/* ---- pom_reclaim.c: the orphan tract-set reclaimer ------------------ */

/* Calls fn(arg, tracts id, uuid) for every row that names a tract set
 * (XT_ROW_F_BLOB; pom_tracts_id): every directory table from the root,
 * then the ILT (a hard-linked file once, by its ILT row). Lists tables
 * (one call per 1,024 rows); a row renamed from a table not listed yet into
 * one listed already is missed. 0, fn's first non-zero return, or the
 * -errno of a table that does not list (one that is gone is skipped). */
typedef int (*pom_named_fn)(void *arg, uint64_t id, uint64_t uuid);
int pom_tracts_named(pom_fs *fs, pom_named_fn fn, void *arg);
/* Stops and frees fs->reclaim (pom_close, before the blob tier goes). */
void pom_reclaim_stop(pom_fs *fs);

#endif /* POM_CLIENT_I_H */
