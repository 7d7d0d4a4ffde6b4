/*
 * pom_file.c -- open files of libpomegranate: tiny-file bytes buffered in
 * the client and written with the row update (docs/client.md "Files"), and files that
 * grew past POM_INLINE_MAX, whose bytes live in the blob tier (docs/client.md,
 * pom_blob.h, docs/format-blob.md).
 *
 *   pom_file_open/pom_create --(first open: row read with its data)--> buffer
 *   pom_write ----------------> inline: buffer changed, dirty
 *                               blob:   pwrite to the tracts, size/mtime
 *                                       changed in memory, dirty
 *   pom_flush/pom_release ----> one row update: size, mtime, ctime, flags,
 *                               data group (inline; dropped when empty or
 *                               blob); clean (pom_flush: the blob file's
 *                               cached tracts handed over first)
 *   pom_fsync ----------------> fsync of the written tracts, flush, then
 *                               xt_mds_sync (commit group durable); -EIO
 *                               once when an MDS restart lost changes of
 *                               the file (pom_errseq.c), also at close
 *
 * Invariants:
 *  (1) Every open handle of one inode in this process shares one buffer
 *      (struct pom_data), so readers see the writers' bytes at once.
 *  (2) The buffer never exceeds POM_INLINE_MAX bytes. A write or size
 *      change past it *migrates* the file: the buffer's bytes are written
 *      to tracts (after clearing any tract a crashed earlier migration
 *      left), then d->blob is set; the row gets XT_ROW_F_BLOB (and loses
 *      its data group) at the next flush; a migration that fails removes
 *      what it wrote (no row would name it). Without a blob tier the old
 *      limit stays: a write writes what fits, or answers -EFBIG.
 *  (3) Tracts are copy-on-write per rewrite: a blob file cut to size 0
 *      (O_TRUNC, truncate(0)) goes back to an empty inline buffer, and a
 *      later migration writes a NEW set of tracts, named by a fresh id that
 *      the flush stores in the row's generation (pom_tracts_id). The old
 *      set stays intact until the row naming the new one is committed
 *      (pom_tracts_drop), so a crash before that commit finds the old bytes
 *      under the old row, never a mix. A collapse or insert range rewrites
 *      the file into a new set the same way (shift_blob). Other overwrites,
 *      cuts, punches and zero ranges of a blob file change its tracts in
 *      place (an unsynced one may show old and new bytes after a crash, as
 *      on a local file system). A blob file cut to a non-zero size below
 *      POM_INLINE_MAX stays blob.
 *  (4) A flush writes a snapshot (buffer, or size for a blob file) to the
 *      row, conditional on the version read with the row's uuid; it clears
 *      `dirty` only when no change came in since the snapshot (wgen).
 *      Flushes of one inode are ordered by flush_mu.
 *  (5) fsync orders durability: tracts first, then the row (so a row never
 *      names bytes a crash could lose after fsync returned).
 *  (6) A file whose name was removed (by this client) keeps its buffer and
 *      tracts until the last release, is never written back, and its
 *      tracts are removed at that release (by whoever unpins last: a
 *      release, or a setattr/xattr call on it, pom_data_unpin). Its size
 *      still changes (truncate: the buffer or the tracts), its other
 *      attributes and xattrs change in its pom_data (pom_ino.c (4)).
 *  (7) Blob reads and writes run without d->mu (requests on one file
 *      proceed in parallel); d->mu covers the size and the switch to blob.
 *      It is held across tract I/O only where the I/O must be atomic with
 *      the size: O_APPEND writes (appends never overlap), the migration
 *      (at most 64 KiB), truncate and fallocate (rare, and a concurrent
 *      write must not land between the cut and the new size; collapse and
 *      insert copy the whole file under it).
 *  (8) The inode flags (d->iflags, pom_ops.c pom_setflags) are checked at
 *      open for writing and at every write and fallocate: immutable takes
 *      none, append-only only appends (O_APPEND) and growing fallocates.
 *
 * Floor 3.2 of libpomegranate (pom_file_i.h): calls floors 1-2 and the blob
 * tier (pom_blob.h); creates are the namespace's (pom_ops.c pom_create).
 */
#include "pom_file_i.h"

#include <assert.h>

#include <fcntl.h>
#include <linux/falloc.h>
#include <string.h>

#define MAX_TRIES 64

/* REQUIRES: d->mu held. Makes room for len (<= POM_INLINE_MAX) bytes. */
static int reserve(struct pom_data *d, uint32_t len)
{
    assert(xt_mutex_held(&d->mu));
    assert(len <= POM_INLINE_MAX);
    if (len <= d->cap)
        return 0;
    uint32_t cap = d->cap ? d->cap : 4096;
    while (cap < len)
        cap = cap * 2 > POM_INLINE_MAX ? POM_INLINE_MAX : cap * 2;
    uint8_t *nb = xt_realloc(d->buf, cap);
    if (!nb)
        return -ENOMEM;
    d->buf = nb;
    d->cap = cap;
    return 0;
}

/* REQUIRES: d->mu held, !d->blob, len <= POM_INLINE_MAX. */
static int set_len(struct pom_data *d, uint32_t len)
{
    assert(xt_mutex_held(&d->mu));
    assert(!d->blob && len <= POM_INLINE_MAX); /* invariant (2) */
    int rc = reserve(d, len);
    if (rc < 0)
        return rc;
    if (len > d->len)
        memset(d->buf + d->len, 0, len - (uint32_t)d->len);
    d->len = len;
    return 0;
}

/* REQUIRES: d->mu held. Records a change. */
static void changed(struct pom_data *d)
{
    assert(xt_mutex_held(&d->mu));
    d->dirty = true;
    d->wgen++;
    d->mtime_ns = xt_now_ns();
}

/* REQUIRES: d->mu held. -EPERM when the inode flags forbid a change of the
 * bytes: immutable, or append-only and not an append (at_end false). */
static int iflags_deny(const struct pom_data *d, bool at_end)
{
    assert(xt_mutex_held(&d->mu));
    if (d->iflags & XT_NS_ROW_F_IMMUTABLE)
        return -EPERM;
    return (d->iflags & XT_NS_ROW_F_APPEND) && !at_end ? -EPERM : 0;
}

/* REQUIRES: f->ino->data->mu held, the file is blob. This handle's
 * reference on the file's tracts (taken once). */
static int handle_bf(pom_file *f, pom_blob_file **out)
{
    assert(xt_mutex_held(&f->ino->data->mu));
    assert(f->ino->data->blob || f->ino->data->tracts);
    uint64_t id = f->ino->data->tracts;
    if (f->bf && f->bf_id != id) { /* another handle rewrote the file (3) */
        pom_blob_file_close(f->bf);
        f->bf = NULL;
    }
    if (!f->bf) {
        if (!f->fs->blob)
            return -EFBIG;
        int rc = pom_blob_file_open(f->fs->blob, id, &f->bf);
        if (rc < 0)
            return rc;
        f->bf_id = id;
    }
    *out = f->bf;
    return 0;
}

/* A fresh tracts id (invariant (3)): random with bit 63 set, so it never
 * names another file's tracts (uuids have bit 63 clear) and two ids meet
 * with probability 2^-63. No lock and no RPC: it is taken under d->mu. */
static uint64_t new_tracts_id(void)
{
    return pom_nonce() | (UINT64_C(1) << 63);
}

/* REQUIRES: d->mu held, !d->blob. Invariant (2). */
/* REQUIRES: d->mu held; d->tracts was made by a migration under this hold
 * of d->mu. No row will ever name it: what it holds (a created tract file, a
 * prefix, an allocation) goes now, not as an orphan. The id is open only
 * through f (it was made under d->mu just now). */
static void drop_new_tracts(pom_file *f)
{
    struct pom_data *d = f->ino->data;
    assert(xt_mutex_held(&d->mu));
    assert(d->tracts != 0 && d->tracts != d->row_tracts);
    if (f->bf && f->bf_id == d->tracts) {
        pom_blob_file_close(f->bf);
        f->bf = NULL;
    }
    int e = pom_blob_delete(f->fs->blob, d->tracts);
    if (e < 0)
        XT_WARN("file %llu: a failed migration's tracts stay behind: %s",
                (unsigned long long)f->ino->uuid, strerror(-e));
    d->tracts = 0;
}

static int migrate(pom_file *f)
{
    assert(xt_mutex_held(&f->ino->data->mu));
    assert(!f->ino->data->blob);
    assert(f->ino->data->len <= POM_INLINE_MAX); /* invariant (2) */
    struct pom_data *d = f->ino->data;
    if (!f->fs->blob) {
        XT_DBG("file %llu: past %u bytes and no blob tier (pom_set_blob, pomfs -o blob=DIR)",
               (unsigned long long)f->ino->uuid, POM_INLINE_MAX);
        return -EFBIG;
    }
    /* New bytes get new tracts (3): the row's may still be the truth. */
    d->tracts = new_tracts_id();
    pom_blob_file *bf;
    int rc = handle_bf(f, &bf);
    if (rc == 0)
        rc = pom_blob_create(bf); /* its holes read as zeros (EIO never zeros) */
    if (rc == 0 && d->len) {
        ssize_t w = pom_blob_pwrite(bf, d->buf, (size_t)d->len, 0);
        rc = w < 0 ? (int)w : (uint64_t)w < d->len ? -EIO : 0;
    }
    if (rc < 0) {
        drop_new_tracts(f);
        return rc;
    }
    d->blob = true;
    xt_free(d->buf);
    d->buf = NULL;
    d->cap = 0;
    changed(d);
    return 0;
}

/* Remembers (size, mtime) as this client's last view of ino's row. */
static void seen(pom_fs *fs, struct pom_inode *ino, uint64_t size, uint64_t mtime)
{
    pthread_mutex_lock(&fs->mu);
    ino->seen_size = size;
    ino->seen_mtime = mtime;
    pthread_mutex_unlock(&fs->mu);
}

static int flush_inode(pom_fs *fs, struct pom_inode *ino)
{
    struct pom_data *d = ino->data;
    pthread_mutex_lock(&d->flush_mu);
    pthread_mutex_lock(&d->mu);
    if (!d->dirty) {
        pthread_mutex_unlock(&d->mu);
        pthread_mutex_unlock(&d->flush_mu);
        return 0;
    }
    uint64_t len = d->len;
    bool blob = d->blob;
    uint64_t gen = d->wgen, mtime = d->mtime_ns;
    uint64_t tracts = blob ? d->tracts : 0, old_tracts = d->row_tracts;
    uint64_t mark = 0;
    assert(blob || len <= POM_INLINE_MAX); /* invariant (2) */
    assert(blob || len == 0 || d->buf);
    uint8_t *snap = !blob && len ? xt_malloc((size_t)len) : NULL;
    if (snap)
        memcpy(snap, d->buf, (size_t)len);
    pthread_mutex_unlock(&d->mu);
    int rc = !blob && len && !snap ? -ENOMEM : 0;
    bool gone = false;
    for (int attempt = 0; rc == 0 && attempt < MAX_TRIES; attempt++) {
        pom_conflict_pause(attempt);
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        struct xt_resp r;
        xt_row row;
        rc = pom_ino_row(fs, ino->uuid, POM_ROW_META, &table, name, &r, &row);
        if (rc == -ENOENT) {
            /* Removed here (invariant (6)), renamed meanwhile (the map then
             * moved: try there) or removed by another client (nothing to
             * write back to). */
            char again[XT_NAME_MAX + 1];
            uint64_t t2;
            int wrc = pom_ino_where(fs, ino->uuid, &t2, again, NULL);
            if (wrc == 0 && (t2 != table || strcmp(again, name) != 0)) {
                rc = 0;
                continue;
            }
            gone = true;
            rc = 0;
            break;
        }
        if (rc < 0)
            break;
        uint64_t ver = row.attr.version;
        xt_resp_free(&r);
        xt_row upd;
        xt_row_init(&upd);
        upd.attr.size = len;
        upd.attr.mtime_ns = mtime;
        upd.attr.ctime_ns = xt_now_ns() > mtime ? xt_now_ns() : mtime;
        upd.attr.flags = (row.attr.flags & ~(XT_ROW_F_INLINE | XT_ROW_F_BLOB)) |
                         (blob ? XT_ROW_F_BLOB : XT_ROW_F_INLINE);
        upd.attr.generation = tracts; /* which tracts (3); 0 when inline */
        uint16_t drop[1] = { XT_CG_DATA };
        if (snap)
            xt_row_view_set_group(&upd, XT_CG_DATA, snap, (uint32_t)len);
        struct xt_req q = { .op = XT_OP_UPDATE, .t = { .table = table }, .name = name,
                            .name_len = (uint32_t)strlen(name),
                            .flags = XT_F_IF_VER | XT_F_IF_UUID, /* (the uuid: pom_errseq.c) */
                            .row = &upd, .expect_version = ver, .expect_uuid = ino->uuid,
                            .set_mask = XT_ROW_SET_SIZE | XT_ROW_SET_MTIME | XT_ROW_SET_CTIME |
                                        XT_ROW_SET_FLAGS | XT_ROW_SET_GENERATION,
                            .drop = snap ? NULL : drop, .ndrop = snap ? 0 : 1 };
        rc = pom_call(fs, &q, &r, NULL);
        mark = pom_restart_count(fs); /* after the reply: it may be a restart's */
        xt_resp_free(&r);
        if (rc == -ESTALE) {
            rc = 0;
            continue;
        }
        break;
    }
    if (rc == 0) {
        /* Before the buffer turns clean: pom_ino_stat_fix must see it
         * dirty or flushed, never neither. */
        if (!gone) {
            seen(fs, ino, len, mtime);
            pom_ino_flushed(fs, ino->uuid);
        }
        pthread_mutex_lock(&d->mu);
        assert(xt_mutex_held(&d->flush_mu)); /* invariant (4): flushes in order */
        assert(d->wgen >= gen);
        if (d->wgen == gen)
            d->dirty = false;
        if (!gone)
            d->row_tracts = tracts;
        if (!gone) {
            d->st.st_size = (off_t)len;
            pom_ns_ts(mtime, &d->st.st_mtim);
        }
        pthread_mutex_unlock(&d->mu);
    }
    pthread_mutex_unlock(&d->flush_mu);
    xt_free(snap);
    /* The row names other tracts now (3): the old go once that commits. */
    if (rc == 0 && !gone && old_tracts && old_tracts != tracts && fs->blob)
        pom_tracts_drop(fs, old_tracts, mark);
    return rc;
}

/* ---- tracts no row names any more (pom_file_i.h pom_tracts_drop) ----- */

#define GONE_BATCH 64

/* Queues one set; true when the queue is full. */
static bool gone_add(pom_fs *fs, uint64_t id, uint64_t mark)
{
    pthread_mutex_lock(&fs->gone_mu);
    if (fs->ngone == fs->capgone) {
        size_t cap = fs->capgone ? fs->capgone * 2 : GONE_BATCH;
        struct pom_gone *v = xt_realloc(fs->gone, cap * sizeof *v);
        if (v) {
            fs->gone = v;
            fs->capgone = cap;
        }
    }
    if (fs->ngone < fs->capgone)
        fs->gone[fs->ngone++] = (struct pom_gone){ id, mark };
    else
        XT_WARN("tracts %llu stay behind: out of memory", (unsigned long long)id);
    bool full = fs->ngone >= GONE_BATCH;
    pthread_mutex_unlock(&fs->gone_mu);
    return full;
}

void pom_tracts_drop(pom_fs *fs, uint64_t id, uint64_t mark)
{
    if (fs->blob && id && gone_add(fs, id, mark))
        pom_tracts_reap(fs);
}

/* Takes the queue before a sync; gone_finish after it. */
static size_t gone_take(pom_fs *fs, struct pom_gone **out)
{
    pthread_mutex_lock(&fs->gone_mu);
    size_t n = fs->ngone;
    *out = fs->gone;
    fs->gone = NULL;
    fs->ngone = fs->capgone = 0;
    pthread_mutex_unlock(&fs->gone_mu);
    return n;
}

/* sync_rc < 0 puts the sets back, else removes those marked `mark` (no
 * restart since) and forgets the rest. */
static void gone_finish(pom_fs *fs, struct pom_gone *v, size_t n, int sync_rc, uint64_t mark)
{
    if (sync_rc < 0) { /* not known to be committed: back in the queue */
        for (size_t i = 0; i < n; i++)
            gone_add(fs, v[i].id, v[i].mark);
    } else {
        for (size_t i = 0; i < n; i++) {
            int rc = v[i].mark == mark ? pom_blob_delete(fs->blob, v[i].id) : -EAGAIN;
            if (rc < 0)
                XT_WARN("tracts %llu stay behind: %s", (unsigned long long)v[i].id,
                        rc == -EAGAIN ? "the MDS restarted before the change was committed"
                                      : strerror(-rc));
        }
    }
    xt_free(v);
}

void pom_tracts_reap(pom_fs *fs)
{
    struct pom_gone *v;
    size_t n = gone_take(fs, &v);
    if (!n) {
        xt_free(v);
        return;
    }
    int rc = pom_sync_quiet(fs);
    gone_finish(fs, v, n, rc, pom_restart_count(fs));
}

int pom_gone_sync(pom_fs *fs)
{
    struct pom_gone *gone;
    size_t ngone = gone_take(fs, &gone); /* before: these syncs cover them */
    int rc = pom_sync_call(fs);
    /* A restart (or a failed MDS) that lost changes is counted, so the sets
     * it concerns no longer match their mark and stay; an error (a soft
     * timeout's -EIO) vouches for nothing: they wait for the next sync. */
    gone_finish(fs, gone, ngone, rc, pom_restart_count(fs));
    return rc;
}

/* Unpins ino; the last release of a file whose name is gone removes its
 * tracts (invariant (6)). */
static void close_ino(pom_fs *fs, struct pom_inode *ino)
{
    pthread_mutex_lock(&fs->mu);
    bool last = ino->opens == 1 && ino->unlinked;
    uint64_t gone_mark = ino->gone_mark;
    pthread_mutex_unlock(&fs->mu);
    uint64_t tracts = 0, row_tracts = 0;
    if (last) {
        pthread_mutex_lock(&ino->data->mu);
        tracts = ino->data->blob ? ino->data->tracts : 0;
        row_tracts = ino->data->row_tracts;
        pthread_mutex_unlock(&ino->data->mu);
    }
    pom_ino_close(fs, ino);
    if (tracts && fs->blob)
        pom_tracts_drop(fs, tracts, gone_mark);
    if (row_tracts && row_tracts != tracts && fs->blob)
        pom_tracts_drop(fs, row_tracts, gone_mark);
}

void pom_data_unpin(pom_fs *fs, struct pom_inode *ino)
{
    close_ino(fs, ino);
}

int pom_data_held(pom_fs *fs, uint64_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    /* The open inodes first (fs->mu), their sets after, one pin at a time:
     * d->mu is never taken under fs->mu. */
    pthread_mutex_lock(&fs->mu);
    size_t cap = 0;
    for (size_t k = 0; k < fs->nbuckets; k++)
        for (struct pom_inode *i = fs->buckets[k]; i; i = i->next)
            cap += i->opens && i->type == XT_ROW_REG;
    uint64_t *v = cap ? xt_malloc(2 * cap * sizeof *v) : NULL;
    size_t nu = 0;
    for (size_t k = 0; v && k < fs->nbuckets; k++)
        for (struct pom_inode *i = fs->buckets[k]; i; i = i->next)
            if (i->opens && i->type == XT_ROW_REG)
                v[nu++] = i->uuid;
    pthread_mutex_unlock(&fs->mu);
    if (cap && !v)
        return -ENOMEM;
    size_t m = 0; /* ids written from the front; m <= 2 * (uuids read) */
    for (size_t k = 0; k < nu; k++) {
        struct pom_inode *i = pom_ino_pin_open(fs, v[k]);
        if (!i)
            continue;
        pthread_mutex_lock(&i->data->mu);
        uint64_t t = i->data->blob ? i->data->tracts : 0, rt = i->data->row_tracts;
        pthread_mutex_unlock(&i->data->mu);
        close_ino(fs, i);
        if (t)
            v[m++] = t;
        if (rt && rt != t)
            v[m++] = rt;
    }
    *out = v;
    *n = m;
    return 0;
}

int pom_data_flush_ino(pom_fs *fs, uint64_t uuid)
{
    struct pom_inode *i = pom_ino_pin_open(fs, uuid);
    if (!i)
        return 0;
    int rc = flush_inode(fs, i);
    close_ino(fs, i);
    return rc;
}

/* Sets the size of an open file (migrating past POM_INLINE_MAX). */
static int file_setsize(pom_file *f, uint64_t size)
{
    if (size > POM_FILE_MAX)
        return -EFBIG;
    struct pom_data *d = f->ino->data;
    pthread_mutex_lock(&d->mu);
    int rc = 0;
    if (d->blob && size == 0) {
        /* A rewrite from nothing: back to inline; the tracts the row names
         * stay until a flush names others (3). Tracts no row ever named
         * (an earlier rewrite not yet flushed) can go now, unless a write
         * of another handle is still in them (d->mu released for its I/O,
         * write_blob): then they are an orphan for reclaim to remove
         * (pom_reclaim.c), never a set deleted under a writer. */
        if (d->tracts != d->row_tracts && f->fs->blob &&
            !pom_blob_is_open(f->fs->blob, d->tracts) &&
            (rc = pom_blob_delete(f->fs->blob, d->tracts)) < 0)
            XT_WARN("file %llu: unnamed tracts stay behind: %s",
                    (unsigned long long)f->ino->uuid, strerror(-rc));
        d->blob = false;
        d->tracts = 0;
        d->len = 0;
        changed(d);
        pthread_mutex_unlock(&d->mu);
        return 0;
    }
    if (!d->blob && size > POM_INLINE_MAX)
        rc = migrate(f);
    if (rc == 0 && !d->blob) {
        rc = set_len(d, (uint32_t)size);
    } else if (rc == 0) {
        pom_blob_file *bf;
        if ((rc = handle_bf(f, &bf)) == 0)
            rc = pom_blob_truncate(bf, size);
        if (rc == 0)
            d->len = size;
    }
    if (rc == 0)
        changed(d);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

static int release_file(pom_file *f, bool report);

/* Opens the known regular file ino (its row re-read unless already open).
 * `fresh` (may be NULL): the row of a file this client has just created,
 * so its first open needs no read of it. */
int pom_file_open_row(pom_fs *fs, pom_ino ino, int flags, const xt_row *fresh, pom_file **out)
{
    *out = NULL;
    pom_file *f = xt_calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->fs = fs;
    f->flags = flags;
    struct pom_inode *i = pom_ino_pin_open(fs, ino);
    bool shared = i != NULL; /* open here already: its buffer is reused */
    int rc = 0;
    if (!i && fresh) {
        rc = pom_ino_open(fs, ino, fresh, &i);
    } else if (!i) {
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        struct xt_resp r;
        xt_row row;
        rc = pom_ino_row(fs, ino, POM_ROW_ALL, &table, name, &r, &row);
        if (rc == 0) {
            if (row.attr.type == XT_ROW_DIR)
                rc = -EISDIR;
            else if (row.attr.type != XT_ROW_REG)
                rc = -EINVAL;
            else if ((row.attr.flags & XT_ROW_F_BLOB) && !fs->blob)
                rc = -EFBIG; /* its bytes are in a blob tier we cannot reach */
            else if (!(row.attr.flags & XT_ROW_F_BLOB) && row.attr.size > POM_INLINE_MAX)
                rc = -EIO; /* neither inline nor blob: a broken row */
            if (rc == 0)
                rc = pom_ino_open(fs, ino, &row, &i);
            xt_resp_free(&r);
        }
    }
    if (rc < 0) {
        xt_free(f);
        return rc;
    }
    f->ino = i;
    if (shared) {
        /* Close-to-open: the shared buffer may be older than the row
         * (another client wrote) or newer (the MDS restarted and lost
         * changes it had acknowledged, pom_data.stale); a clean one is
         * replaced by the row (pom_ino_reload), a dirty one wins. */
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        struct xt_resp r;
        xt_row row;
        if (pom_ino_row(fs, ino, POM_ROW_ALL, &table, name, &r, &row) == 0) {
            pom_ino_reload(i, &row);
            xt_resp_free(&r);
        }
    }
    f->err_sample = pom_es_sample(fs, ino);
    pthread_mutex_lock(&i->data->mu);
    uint64_t size = i->data->len, mtime = i->data->mtime_ns;
    /* Inode flags as open(2) on a local file system: no writer of an
     * immutable file, an append-only one only with O_APPEND, never O_TRUNC. */
    if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
        rc = iflags_deny(i->data, (flags & O_APPEND) && !(flags & O_TRUNC));
    pthread_mutex_unlock(&i->data->mu);
    if (rc < 0) {
        release_file(f, false);
        return rc;
    }
    pthread_mutex_lock(&fs->mu);
    f->unchanged = i->seen_mtime != 0 && i->seen_size == size && i->seen_mtime == mtime;
    i->seen_size = size;
    i->seen_mtime = mtime;
    pthread_mutex_unlock(&fs->mu);
    if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY && size &&
        (rc = file_setsize(f, 0)) < 0) {
        release_file(f, false);
        return rc;
    }
    *out = f;
    return 0;
}

int pom_data_setsize(pom_fs *fs, uint64_t ino, uint64_t size)
{
    if (size > POM_FILE_MAX)
        return -EFBIG;
    pom_file *f;
    int rc = pom_file_open_row(fs, ino, O_WRONLY, NULL, &f);
    if (rc < 0)
        return rc;
    rc = file_setsize(f, size);
    int frc = release_file(f, false); /* (a truncate reports no lost changes) */
    return rc < 0 ? rc : frc;
}

void pom_data_gone(pom_fs *fs, const xt_row_attr *a)
{
    if (!fs->blob)
        return;
    struct pom_inode *i = pom_ino_pin_open(fs, a->uuid);
    if (i) {
        /* Open here: its last release removes the tracts (it sees the
         * inode unlinked), unless that was this unpin. */
        close_ino(fs, i);
        return;
    }
    /* A link stub's flags are not the file's (those are in the ILT row):
     * it may have tracts. */
    if (a->flags & (XT_ROW_F_BLOB | XT_NS_ROW_F_LINKED))
        pom_tracts_drop(fs, pom_tracts_id(a), pom_restart_count(fs));
}

void pom_data_fix_blocks(pom_fs *fs, const xt_row_attr *a, struct stat *st)
{
    /* No bound on the size: the listing costs one fstatat per tract
     * present, whatever the file's size (a 1 TiB file holding one tract
     * answers its 4 KiB, not 2^31 blocks). */
    if (!fs->blob || !(a->flags & XT_ROW_F_BLOB))
        return;
    struct pom_blob_stat bs;
    if (pom_blob_stat(fs->blob, pom_tracts_id(a), &bs) == 0)
        st->st_blocks = (blkcnt_t)(bs.alloc_bytes / 512);
}

pom_blob *pom_blob_of(pom_fs *fs)
{
    pthread_mutex_lock(&fs->mu);
    pom_blob *b = fs->blob;
    pthread_mutex_unlock(&fs->mu);
    return b;
}

int pom_set_blob(pom_fs *fs, const char *backend, const char *path)
{
    struct pom_blob_conf c = { .backend = backend, .path = path, .fsid = fs->fsid };
    return pom_set_blob_conf(fs, &c);
}

int pom_set_blob_conf(pom_fs *fs, const struct pom_blob_conf *c)
{
    pom_blob *b = NULL;
    int rc = pom_blob_open(c, &b);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&fs->mu);
    if (fs->reclaim)
        rc = -EBUSY; /* its thread uses fs->blob */
    for (size_t k = 0; k < fs->nbuckets && rc == 0; k++)
        for (struct pom_inode *i = fs->buckets[k]; i && rc == 0; i = i->next)
            if (i->opens)
                rc = -EBUSY;
    pom_blob *old = NULL;
    if (rc == 0) {
        old = fs->blob;
        fs->blob = b;
        b = NULL;
    }
    pthread_mutex_unlock(&fs->mu);
    pom_blob_close(b);
    pom_blob_close(old);
    return rc;
}

int pom_file_open(pom_fs *fs, pom_ino ino, int flags, pom_file **out)
{
    return pom_file_open_row(fs, ino, flags, NULL, out);
}

ssize_t pom_read(pom_file *f, void *buf, size_t n, off_t off)
{
    if (off < 0)
        return -EINVAL;
    if ((f->flags & O_ACCMODE) == O_WRONLY)
        return -EBADF;
    struct pom_data *d = f->ino->data;
    pthread_mutex_lock(&d->mu);
    size_t got = 0;
    if ((uint64_t)off < d->len)
        got = (size_t)XT_MIN((uint64_t)n, d->len - (uint64_t)off);
    if (!d->blob || got == 0) {
        if (got)
            memcpy(buf, d->buf + off, got);
        pthread_mutex_unlock(&d->mu);
        return (ssize_t)got;
    }
    pom_blob_file *bf;
    int rc = handle_bf(f, &bf);
    pthread_mutex_unlock(&d->mu);
    if (rc < 0)
        return rc;
    return pom_blob_pread(bf, buf, got, (uint64_t)off); /* invariant (7) */
}

/* REQUIRES: d->mu held, d->blob. Writes to the tracts; releases d->mu
 * during the I/O unless `append` (invariant (7)). A cut to size 0 (O_TRUNC)
 * during the I/O makes the file inline again, maybe blob again with other
 * tracts: the write then counts as done before the cut, and the size is
 * left alone (else an inline file would get a length without a buffer). */
static ssize_t write_blob(pom_file *f, const void *buf, size_t n, uint64_t off, bool append)
{
    assert(xt_mutex_held(&f->ino->data->mu));
    assert(f->ino->data->blob);
    struct pom_data *d = f->ino->data;
    if (off >= POM_FILE_MAX)
        return -EFBIG;
    n = (size_t)XT_MIN((uint64_t)n, POM_FILE_MAX - off);
    pom_blob_file *bf;
    int rc = handle_bf(f, &bf);
    if (rc < 0)
        return rc;
    uint64_t tracts = d->tracts;
    if (!append)
        pthread_mutex_unlock(&d->mu);
    ssize_t w = pom_blob_pwrite(bf, buf, n, off);
    if (!append)
        pthread_mutex_lock(&d->mu);
    if (w > 0 && d->blob && d->tracts == tracts) {
        if (off + (uint64_t)w > d->len)
            d->len = off + (uint64_t)w;
        changed(d);
    }
    return w;
}

ssize_t pom_write(pom_file *f, const void *buf, size_t n, off_t off)
{
    if (off < 0)
        return -EINVAL;
    if ((f->flags & O_ACCMODE) == O_RDONLY)
        return -EBADF;
    if (n == 0)
        return 0;
    struct pom_data *d = f->ino->data;
    bool append = (f->flags & O_APPEND) != 0;
    pthread_mutex_lock(&d->mu);
    uint64_t o = append ? d->len : (uint64_t)off;
    ssize_t rc = iflags_deny(d, append); /* (flags set after the open) */
    if (rc < 0) {
        pthread_mutex_unlock(&d->mu);
        return rc;
    }
    if (!d->blob && o + n > POM_INLINE_MAX) {
        rc = migrate(f);
        if (rc == -EFBIG && o < POM_INLINE_MAX)
            n = POM_INLINE_MAX - (size_t)o; /* no blob tier: what fits */
        else if (rc < 0) {
            pthread_mutex_unlock(&d->mu);
            return rc;
        }
    }
    if (d->blob) {
        rc = write_blob(f, buf, n, o, append);
    } else {
        uint32_t end = (uint32_t)(o + n);
        rc = end > d->len ? set_len(d, end) : 0;
        if (rc == 0) {
            memcpy(d->buf + o, buf, n);
            changed(d);
            rc = (ssize_t)n;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

#define SHIFT_CHUNK (1u << 20) /* bytes a collapse or insert copies per step */

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

/* REQUIRES: d->mu held; o + del <= d->len; del == 0 or ins == 0; the
 * result fits POM_FILE_MAX. Rewrites the file into a new set of tracts
 * (invariant (3)): [0, o) stays, [o + del, len) moves to o + ins, and
 * [o, o + ins) reads as zeros. All-zero chunks are not written (holes
 * stay holes). The set the row names stays whole until a flush names the
 * new one (then pom_tracts_drop); a set no row named (an unflushed
 * migration or rewrite) goes at once. On failure the new set is removed
 * and the file is unchanged. */
static int shift_blob(pom_file *f, uint64_t o, uint64_t del, uint64_t ins)
{
    struct pom_data *d = f->ino->data;
    assert(xt_mutex_held(&d->mu));
    assert(del == 0 || ins == 0);
    assert(o + del <= d->len);
    assert(d->len - del + ins <= POM_FILE_MAX);
    if (!f->fs->blob)
        return -EFBIG;
    uint64_t len = d->len, old = d->tracts;
    bool was_blob = d->blob;
    pom_blob_file *src = NULL, *dst;
    /* Its own reference on the old set: handle_bf moves f->bf to the new. */
    int rc = was_blob ? pom_blob_file_open(f->fs->blob, old, &src) : 0;
    uint8_t *chunk = rc == 0 ? xt_malloc(SHIFT_CHUNK) : NULL;
    if (rc == 0 && !chunk)
        rc = -ENOMEM;
    if (rc < 0) {
        pom_blob_file_close(src);
        return rc;
    }
    d->tracts = new_tracts_id();
    rc = handle_bf(f, &dst);
    if (rc == 0)
        rc = pom_blob_create(dst); /* its holes read as zeros (EIO never zeros) */
    const struct { uint64_t from, to, n; } part[2] = {
        { 0, 0, o }, { o + del, o + ins, len - o - del },
    };
    for (int k = 0; k < 2 && rc == 0; k++) {
        for (uint64_t done = 0; done < part[k].n && rc == 0;) {
            size_t n = (size_t)XT_MIN((uint64_t)SHIFT_CHUNK, part[k].n - done);
            if (was_blob) {
                ssize_t r = pom_blob_pread(src, chunk, n, part[k].from + done);
                rc = r < 0 ? (int)r : 0;
            } else {
                memcpy(chunk, d->buf + part[k].from + done, n);
            }
            if (rc == 0 && !all_zero(chunk, n)) {
                ssize_t w = pom_blob_pwrite(dst, chunk, n, part[k].to + done);
                rc = w < 0 ? (int)w : (size_t)w < n ? -EIO : 0;
            }
            done += n;
        }
    }
    xt_free(chunk);
    pom_blob_file_close(src);
    if (rc < 0) {
        drop_new_tracts(f);
        d->tracts = old;
        return rc;
    }
    if (was_blob && old != d->row_tracts) { /* named by no row: nothing to keep */
        int e = pom_blob_delete(f->fs->blob, old);
        if (e < 0)
            XT_WARN("file %llu: unnamed tracts stay behind: %s",
                    (unsigned long long)f->ino->uuid, strerror(-e));
    }
    if (!was_blob) {
        d->blob = true;
        xt_free(d->buf);
        d->buf = NULL;
        d->cap = 0;
    }
    d->len = len - del + ins;
    changed(d);
    return 0;
}

/* FALLOC_FL_COLLAPSE_RANGE (collapse) or FALLOC_FL_INSERT_RANGE of
 * [o, o + l): block-aligned, inside the file (fallocate(2)). An inline
 * result moves the bytes in the buffer; anything else is shift_blob. */
static int shift_range(pom_file *f, bool collapse, uint64_t o, uint64_t l)
{
    if (o % POM_BLKSIZE || l % POM_BLKSIZE)
        return -EINVAL;
    struct pom_data *d = f->ino->data;
    pthread_mutex_lock(&d->mu);
    uint64_t len = d->len;
    int rc = 0;
    if (collapse ? o + l >= len : o >= len)
        rc = -EINVAL; /* (use ftruncate to cut or extend at the end) */
    else if (!collapse && l > POM_FILE_MAX - len)
        rc = -EFBIG;
    else if (d->blob || (!collapse && len + l > POM_INLINE_MAX))
        rc = shift_blob(f, o, collapse ? l : 0, collapse ? 0 : l);
    else if (collapse) {
        memmove(d->buf + o, d->buf + o + l, (size_t)(len - o - l));
        d->len = len - l;
        changed(d);
    } else if ((rc = set_len(d, (uint32_t)(len + l))) == 0) {
        memmove(d->buf + o + l, d->buf + o, (size_t)(len - o));
        memset(d->buf + o, 0, (size_t)l);
        changed(d);
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int pom_fallocate(pom_file *f, int mode, off_t off, off_t len)
{
    const int keep_ = FALLOC_FL_KEEP_SIZE, zero_ = FALLOC_FL_ZERO_RANGE;
    if (mode != 0 && mode != keep_ && mode != (FALLOC_FL_PUNCH_HOLE | keep_) &&
        mode != zero_ && mode != (zero_ | keep_) && mode != FALLOC_FL_COLLAPSE_RANGE &&
        mode != FALLOC_FL_INSERT_RANGE)
        return -EOPNOTSUPP;
    if (off < 0 || len <= 0)
        return -EINVAL;
    if ((f->flags & O_ACCMODE) == O_RDONLY)
        return -EBADF;
    uint64_t o = (uint64_t)off, end = o + (uint64_t)len;
    if (end > POM_FILE_MAX || end < o)
        return -EFBIG;
    struct pom_data *d = f->ino->data;
    pthread_mutex_lock(&d->mu);
    /* An append-only file may only grow (fallocate(2): mode 0 or KEEP_SIZE). */
    int rc = iflags_deny(d, (mode & ~FALLOC_FL_KEEP_SIZE) == 0);
    pthread_mutex_unlock(&d->mu);
    if (rc < 0)
        return rc;
    if (mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE))
        return shift_range(f, (mode & FALLOC_FL_COLLAPSE_RANGE) != 0, o, (uint64_t)len);
    bool punch = (mode & FALLOC_FL_PUNCH_HOLE) != 0, keep = (mode & keep_) != 0;
    bool zero = (mode & zero_) != 0;
    pthread_mutex_lock(&d->mu);
    if (!d->blob && (punch || (zero && end <= POM_INLINE_MAX))) {
        /* A hole or zeros in an inline file: its bytes become zeros. */
        if (o < d->len)
            memset(d->buf + o, 0, (size_t)(XT_MIN(end, d->len) - o));
        if (zero && !keep && end > d->len)
            rc = set_len(d, (uint32_t)end);
        if (rc == 0)
            changed(d);
        pthread_mutex_unlock(&d->mu);
        return rc;
    }
    if (!d->blob && end <= POM_INLINE_MAX) {
        /* The row has room already: allocating is extending (mode 0). */
        if (!keep && end > d->len)
            rc = set_len(d, (uint32_t)end);
        if (rc == 0 && !keep)
            changed(d);
        pthread_mutex_unlock(&d->mu);
        return rc;
    }
    /* An inline file stays inline when the call fails: its bytes are kept
     * until the allocation is done, and the set made for it goes. */
    uint8_t *was = NULL;
    bool migrated = false;
    if (!d->blob) {
        was = d->len ? xt_malloc((size_t)d->len) : NULL;
        if (d->len && !was)
            rc = -ENOMEM;
        else if (d->len)
            memcpy(was, d->buf, (size_t)d->len);
        if (rc == 0)
            migrated = (rc = migrate(f)) == 0;
    }
    pom_blob_file *bf;
    if (rc == 0)
        rc = handle_bf(f, &bf);
    /* Zeros: the range punched out, then allocated again. */
    if (rc == 0 && (punch || zero))
        rc = pom_blob_punch(bf, o, end - o);
    if (rc == 0 && !punch)
        rc = pom_blob_allocate(bf, o, end - o);
    if (rc == 0 && !keep && end > d->len)
        d->len = end;
    if (rc == 0 && (punch || zero || !keep))
        changed(d);
    if (rc < 0 && migrated) {
        drop_new_tracts(f);
        d->blob = false;
        d->buf = was;
        d->cap = (uint32_t)d->len;
        was = NULL;
        changed(d);
    }
    xt_free(was);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* Whether close reports lost changes to f: only a handle open for writing
 * (as NFS: a reader's close says nothing of write-back). */
static bool writer(const pom_file *f)
{
    return (f->flags & O_ACCMODE) != O_RDONLY;
}

int pom_flush(pom_file *f)
{
    /* Close-to-open: the tracts a backend keeps in memory reach the store
     * before the row that gives their size (pom_blob_flush). */
    struct pom_data *d = f->ino->data;
    pom_blob_file *bf = NULL;
    int rc = 0;
    pthread_mutex_lock(&d->mu);
    if (d->blob && f->bf)
        rc = handle_bf(f, &bf);
    pthread_mutex_unlock(&d->mu);
    if (rc == 0 && bf)
        rc = pom_blob_flush(bf);
    if (rc == 0)
        rc = flush_inode(f->fs, f->ino);
    if (rc == 0 && writer(f))
        rc = pom_es_check(f->fs, f->ino->uuid, &f->err_sample);
    return rc;
}

int pom_fsync(pom_file *f, int datasync)
{
    (void)datasync; /* size and times travel in one row with the flags */
    struct pom_data *d = f->ino->data;
    pom_blob_file *bf = NULL;
    int rc = 0;
    pthread_mutex_lock(&d->mu);
    if (d->blob)
        rc = handle_bf(f, &bf);
    pthread_mutex_unlock(&d->mu);
    if (rc == 0 && bf)
        rc = pom_blob_fsync(bf); /* invariant (5): tracts before the row */
    if (rc == 0)
        rc = flush_inode(f->fs, f->ino);
    if (rc == 0)
        rc = pom_gone_sync(f->fs);
    return rc < 0 ? rc : pom_es_check(f->fs, f->ino->uuid, &f->err_sample);
}

/* report: the application's close (lost changes said once). */
static int release_file(pom_file *f, bool report)
{
    int rc = flush_inode(f->fs, f->ino);
    if (rc == 0 && report && writer(f))
        rc = pom_es_check(f->fs, f->ino->uuid, &f->err_sample);
    pthread_mutex_lock(&f->ino->data->mu);
    pom_blob_file *bf = f->bf;
    f->bf = NULL;
    pthread_mutex_unlock(&f->ino->data->mu);
    pom_blob_file_close(bf);
    close_ino(f->fs, f->ino);
    xt_free(f);
    return rc;
}

int pom_release(pom_file *f)
{
    return f ? release_file(f, true) : 0;
}

pom_ino pom_file_ino(const pom_file *f)
{
    return f->ino->uuid;
}

int pom_file_unchanged(const pom_file *f)
{
    return f->unchanged;
}
