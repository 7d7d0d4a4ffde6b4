/*
 * pom_row_i.h -- floor 2 of libpomegranate, rows: a row fetched by name
 * (pom_row_get, pomegranate_admin.h), its one conversion to struct stat,
 * uuids (pom_row.c); the inode map and the open-file state it carries
 * (pom_ino.c). Includes floor 1 (pom_call_i.h) and nothing above.
 *
 * Invariants:
 *  (1) The inode map knows, for each inode the kernel (or a library user)
 *      holds references on, where its row is: (table, name). Rows are
 *      always re-read and their uuid compared before use, so a map entry
 *      that went stale (another client renamed or removed it) answers
 *      -ENOENT instead of touching another file's row.
 *  (2) A uuid is handed out once: the counter row is advanced with a
 *      version-conditional, synchronous update before any uuid of the
 *      claimed range is used (pom_row.c (1)).
 */
#ifndef POM_ROW_I_H
#define POM_ROW_I_H

#include "pom_call_i.h"

/* ---- pom_row.c ------------------------------------------------------ */

/* Builds struct stat from fixed columns: the one conversion. */
void pom_row_stat(const xt_row_attr *a, struct stat *st);
/* A timespec in signed nanoseconds (the rows' time unit, in a u64), and
 * back. */
uint64_t pom_ts_ns(const struct timespec *ts);
void pom_ns_ts(uint64_t ns, struct timespec *ts);
/* A fresh uuid. */
int pom_uuid_alloc(pom_fs *fs, uint64_t *uuid);
/* 64 random-looking bits, different at every call in practice (a counter,
 * the time and the process hashed; no lock, no RPC). */
uint64_t pom_nonce(void);
/* The id naming the tracts of a blob row: its generation, which a
 * rewrite from size 0 changes (copy-on-write, pom_file.c (3)), or its
 * uuid for rows written before generations (0). */
uint64_t pom_tracts_id(const xt_row_attr *a);

/* ---- pom_ino.c: the inode map and open-file state ------------------- */

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
    uint32_t iflags;       /* protected by mu: the row's inode flags
                              (XT_NS_ROW_F_IFLAGS) as of the last read, or
                              set here (pom_setflags); writes check them */
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
    xt_row_attr *gone_dir; /* protected by fs->mu: a removed directory's last
                              attributes (xt_malloc'd), for fstat until forget */
    bool dir_seen;         /* protected by fs->mu: a directory's mode, gid */
    uint32_t dir_mode;     /*   and ctime as its last row read here said */
    uint32_t dir_gid;      /*   (set-group-ID and default-ACL inheritance */
    uint64_t dir_ctime;    /*   of its new entries, pom_ops.c) */
    bool dacl_seen;        /* protected by fs->mu: dacl is the directory's */
    uint64_t dacl_ctime;   /*   default ACL (xt_malloc'd, NULL: none) when */
    uint64_t dacl_mono;    /*   its ctime was dacl_ctime, read at monotonic */
    uint8_t *dacl;         /*   time dacl_mono; current while that ctime is */
    uint32_t dacl_len;     /*   dir_ctime or for POM_DACL_FRESH_NS after it */
    uint8_t type;          /* enum xt_row_type */
    struct pom_data *data; /* protected by fs->mu: set while opens > 0 */
    uint64_t seen_size;    /* protected by fs->mu: size and mtime of the row */
    uint64_t seen_mtime;   /*   as pom_file.c last read or wrote it (0, 0: never) */
    struct pom_inode *next;/* protected by fs->mu: hash chain */
};


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
/* The renames of this client so far (fs->moved): taken before the map is
 * read for a call that pom_ino_moved_since may then explain. */
uint64_t pom_ino_moves(pom_fs *fs);
/* Whether a rename of this client ended since `mark` (pom_ino_moves), so
 * that a row just not found where the map said may have moved (or moved
 * and come back): the call may read the map and try again. While a rename
 * is between its batch and its map update (fs->moves) and none ended
 * since the call failed, waits for one (1 ms steps, at most 1 s). */
bool pom_ino_moved_since(pom_fs *fs, uint64_t mark);
/* Records a rename of uuid (if known) to (table, name). */
void pom_ino_moved(pom_fs *fs, uint64_t uuid, uint64_t table, const char *name);
/* Marks inode a->uuid (if known) as unlinked: getattr then answers from an
 * open buffer, a directory's attributes *a (copied), or -ENOENT. */
void pom_ino_unlinked(pom_fs *fs, const xt_row_attr *a);
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
 * case (freed at once when uuid is not open here). A directory's kept
 * default ACL (pom_ino_dir_keep) is forgotten: read again when needed. */
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
/* How long a directory's default ACL read here is used once its ctime
 * moved on (this client's own creates move it, and the kernel re-reads a
 * directory after each: without it every create would read it again);
 * another client's change of it is seen by creates here at most this late. */
#define POM_DACL_FRESH_NS 1000000000ull

/* A known directory's mode and gid as its last read here (getattr,
 * lookup, readdirplus: pom_ino_stat_fix) said, and its default ACL
 * (*dacl a copy the caller frees, NULL: none) if kept (pom_ino_dir_keep)
 * at that read's ctime or within POM_DACL_FRESH_NS: 1 if all known,
 * else 0. -ENOMEM. */
int pom_ino_dir_attr(pom_fs *fs, uint64_t uuid, uint32_t *mode, uint32_t *gid,
                     uint8_t **dacl, uint32_t *dacl_len);
/* Keeps a directory's attributes and default ACL (copied; NULL: none) as
 * one read of its row gave them. -ENOMEM (nothing kept). */
int pom_ino_dir_keep(pom_fs *fs, uint64_t uuid, const xt_row_attr *a, const uint8_t *dacl,
                     uint32_t dacl_len);
/* All of *st from the open buffer of uuid, if open here, or from the last
 * attributes of a directory removed here (pom_ino_unlinked): 1 if *st was
 * filled, else 0. For a file or directory removed here and still open. */
int pom_ino_open_stat(pom_fs *fs, uint64_t uuid, struct stat *st);
/* Corrects *st, read from a row by an RPC started when the flush counter
 * was `since`: size/mtime/ctime from the open buffer while it is dirty
 * (the row is older) or when a flush of it ended after `since`. -EAGAIN
 * when such a flush ended (or too many flushes did to tell) and the file
 * is not open here: the row may predate it -- read it again. Handing
 * the kernel such a size made it read a just-written file as empty. */
int pom_ino_stat_fix(pom_fs *fs, uint64_t uuid, struct stat *st, uint64_t since);

/* Reads the current row of a known inode (group as pom_row_get), following
 * a link stub to the ILT row (and recording that location), and checks it
 * still is that inode: *table/name get where the row is; a row a rename of
 * this client moved meanwhile is read where it went (pom_ino_moved_since).
 * 0, -ENOENT (removed or replaced), -ESTALE (unknown). */
int pom_ino_row(pom_fs *fs, pom_ino ino, int group, uint64_t *table, char *name,
                struct xt_resp *r, xt_row *row);
/* Replaces *r and *row (r freed first) by the ILT row of uuid. -ENOENT, -EIO. */
int pom_stub_follow(pom_fs *fs, uint64_t uuid, int group, struct xt_resp *r, xt_row *row);
/* 1 if the row (table, name) holds uuid now, 0 if not (or absent), < 0. */
int pom_name_holds(pom_fs *fs, uint64_t table, const char *name, uint64_t uuid);

#endif /* POM_ROW_I_H */
