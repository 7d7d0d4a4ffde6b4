/*
 * pom_file_i.h -- floor 3 of libpomegranate, files and the blob tier: open
 * files and their buffers (pom_file.c), the blob tier's generic layer
 * (pom_blob.c, pom_blob.h) over its backends (pom_blob_local.c), the
 * queue of tract sets waiting for a commit, and the orphan reclaimer
 * (pom_reclaim.c). Includes floors 1-2 (pom_row_i.h) and nothing above.
 */
#ifndef POM_FILE_I_H
#define POM_FILE_I_H

#include "pom_row_i.h"
#include "pom_blob.h"

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

/* ---- pom_file.c ------------------------------------------------------ */

/* pom_set_blob with a whole store configuration (c and what it points to
 * borrowed during the call): pom_open's way to the mdsl backend. */
int pom_set_blob_conf(pom_fs *fs, const struct pom_blob_conf *c);

/* Opens known inode ino; fresh (may be NULL) is its row as just written by
 * this client (a create), saving the read. As pom_file_open otherwise. */
int pom_file_open_row(pom_fs *fs, pom_ino ino, int flags, const xt_row *fresh, pom_file **out);

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
 * of a rewrite). Done at the next sync of this client (pom_gone_sync), at
 * pom_close, or at once (one extra sync) past 64 queued sets. If the MDS
 * restarted meanwhile the change may be lost and the row still name them:
 * they stay (an orphan for fsck, never a file reading zeros). */
void pom_tracts_drop(pom_fs *fs, uint64_t id, uint64_t mark);
/* A quiet sync now, then the queued sets it covers go (pom_close, a full
 * queue). */
void pom_tracts_reap(pom_fs *fs);
/* A sync of every MDS (pom_gone_sync), then the queued tract sets it
 * covers are removed: what every caller above floor 1 uses to sync. 0 or
 * a transport error. */
int pom_gone_sync(pom_fs *fs);
/* Call when the last name of a file is gone (its row, attributes a, was
 * deleted): removes its tracts once that is committed, or at the last
 * release if it is open here. A no-op for files without tracts. */
void pom_data_gone(pom_fs *fs, const xt_row_attr *a);
/* For getattr: st_blocks of a blob file from the tracts it really has
 * (holes are free), one fstatat per present tract. */
void pom_data_fix_blocks(pom_fs *fs, const xt_row_attr *a, struct stat *st);

/* ---- pom_reclaim.c ---------------------------------------------------- */

/* pom_tracts_named: pomegranate_admin.h. */
/* Stops and frees fs->reclaim (pom_close, before the blob tier goes). */
void pom_reclaim_stop(pom_fs *fs);

#endif /* POM_FILE_I_H */
