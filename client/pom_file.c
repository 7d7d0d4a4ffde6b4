/*
 * pom_file.c -- open files of libpomegranate: tiny-file bytes buffered in
 * the client and written with the row update (DESIGN 9).
 *
 *   pom_file_open/pom_create --(first open: row read with its data)--> buffer
 *   pom_write ----------------> buffer changed, dirty
 *   pom_flush/pom_release ----> one row update: size, mtime, ctime, flags,
 *                               data group (dropped when empty); clean
 *   pom_fsync ----------------> flush + xt_mds_sync (commit group durable)
 *
 * Invariants:
 *  (1) Every open handle of one inode in this process shares one buffer
 *      (struct pom_data), so readers see the writers' bytes at once.
 *  (2) The buffer never exceeds POM_INLINE_MAX bytes; a write past it
 *      writes what fits, or answers -EFBIG when nothing fits.
 *  (3) A flush writes a snapshot of the buffer to the row, conditional on
 *      the version read with the row's uuid; it clears `dirty` only when no
 *      change came in since the snapshot (wgen). Flushes of one inode are
 *      ordered by flush_mu.
 *  (4) A file whose name was removed (by this client) keeps its buffer
 *      until the last release and is never written back.
 */
#include "pom_client_i.h"

#include <fcntl.h>
#include <string.h>

#define MAX_TRIES 64

/* REQUIRES: d->mu held. Makes room for len bytes. */
static int reserve(struct pom_data *d, uint32_t len)
{
    if (len <= d->cap)
        return 0;
    uint32_t cap = d->cap;
    while (cap < len)
        cap = cap * 2 > POM_INLINE_MAX ? POM_INLINE_MAX : cap * 2;
    uint8_t *nb = xt_realloc(d->buf, cap);
    if (!nb)
        return -ENOMEM;
    d->buf = nb;
    d->cap = cap;
    return 0;
}

/* REQUIRES: d->mu held. */
static int set_len(struct pom_data *d, uint32_t len)
{
    int rc = reserve(d, len);
    if (rc < 0)
        return rc;
    if (len > d->len)
        memset(d->buf + d->len, 0, len - d->len);
    d->len = len;
    return 0;
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
    uint32_t len = d->len;
    uint64_t gen = d->wgen, mtime = d->mtime_ns;
    uint8_t *snap = len ? xt_malloc(len) : NULL;
    if (len && snap)
        memcpy(snap, d->buf, len);
    pthread_mutex_unlock(&d->mu);
    int rc = len && !snap ? -ENOMEM : 0;
    bool gone = false;
    for (int attempt = 0; rc == 0 && attempt < MAX_TRIES; attempt++) {
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        rc = pom_ino_where(fs, ino->uuid, &table, name, NULL);
        if (rc == -ENOENT) {
            gone = true; /* invariant (4) */
            rc = 0;
            break;
        }
        if (rc < 0)
            break;
        struct xt_resp r;
        xt_row row;
        rc = pom_row_get(fs, table, name, POM_ROW_META, &r, &row);
        if (rc == 0 && row.attr.uuid != ino->uuid) {
            xt_resp_free(&r);
            rc = -ENOENT;
        }
        if (rc == -ENOENT) {
            /* Renamed meanwhile (the map then moved: try there) or removed
             * by another client (nothing to write back to). */
            char again[XT_NAME_MAX + 1];
            uint64_t t2;
            if (pom_ino_where(fs, ino->uuid, &t2, again, NULL) == 0 &&
                (t2 != table || strcmp(again, name) != 0)) {
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
        upd.attr.flags = XT_ROW_F_INLINE;
        uint16_t drop[1] = { XT_CG_DATA };
        if (len)
            xt_row_view_set_group(&upd, XT_CG_DATA, snap, len);
        struct xt_req q = { .op = XT_OP_UPDATE, .t = { .table = table }, .name = name,
                            .name_len = (uint32_t)strlen(name), .flags = XT_F_IF_VER,
                            .row = &upd, .expect_version = ver,
                            .set_mask = XT_ROW_SET_SIZE | XT_ROW_SET_MTIME | XT_ROW_SET_CTIME |
                                        XT_ROW_SET_FLAGS,
                            .drop = len ? NULL : drop, .ndrop = len ? 0 : 1 };
        rc = pom_call(fs, &q, &r, NULL);
        xt_resp_free(&r);
        if (rc == -ESTALE) {
            rc = 0;
            continue;
        }
        break;
    }
    if (rc == 0) {
        pthread_mutex_lock(&d->mu);
        if (d->wgen == gen)
            d->dirty = false;
        if (!gone) {
            d->st.st_size = len;
            d->st.st_mtim.tv_sec = (time_t)(mtime / 1000000000u);
            d->st.st_mtim.tv_nsec = (long)(mtime % 1000000000u);
        }
        pthread_mutex_unlock(&d->mu);
    }
    pthread_mutex_unlock(&d->flush_mu);
    xt_free(snap);
    return rc;
}

int pom_data_flush_ino(pom_fs *fs, uint64_t uuid)
{
    struct pom_inode *i = pom_ino_pin_open(fs, uuid);
    if (!i)
        return 0;
    int rc = flush_inode(fs, i);
    pom_ino_close(fs, i);
    return rc;
}

int pom_data_truncate(pom_fs *fs, uint64_t uuid, uint64_t size)
{
    if (size > POM_INLINE_MAX)
        return -EFBIG;
    struct pom_inode *i = pom_ino_pin_open(fs, uuid);
    if (!i)
        return -ENOENT;
    struct pom_data *d = i->data;
    pthread_mutex_lock(&d->mu);
    int rc = set_len(d, (uint32_t)size);
    if (rc == 0) {
        d->dirty = true;
        d->wgen++;
        d->mtime_ns = xt_now_ns();
    }
    pthread_mutex_unlock(&d->mu);
    pom_ino_close(fs, i);
    return rc;
}

/* Opens the known regular file ino (its row re-read unless already open). */
static int open_ino(pom_fs *fs, pom_ino ino, int flags, pom_file **out)
{
    *out = NULL;
    pom_file *f = xt_calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->fs = fs;
    f->flags = flags;
    struct pom_inode *i = pom_ino_pin_open(fs, ino);
    int rc = 0;
    if (!i) {
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        uint8_t type;
        rc = pom_ino_where(fs, ino, &table, name, &type);
        struct xt_resp r;
        xt_row row;
        if (rc == 0)
            rc = pom_row_get(fs, table, name, POM_ROW_ALL, &r, &row);
        if (rc == 0) {
            if (row.attr.uuid != ino)
                rc = -ENOENT;
            else if (row.attr.type == XT_ROW_DIR)
                rc = -EISDIR;
            else if (row.attr.type != XT_ROW_REG)
                rc = -EINVAL;
            else if ((row.attr.flags & XT_ROW_F_BLOB) || row.attr.size > POM_INLINE_MAX)
                rc = -EFBIG; /* the blob tier is not reached yet */
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
    if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) {
        pthread_mutex_lock(&i->data->mu);
        if (i->data->len) {
            i->data->len = 0;
            i->data->dirty = true;
            i->data->wgen++;
            i->data->mtime_ns = xt_now_ns();
        }
        pthread_mutex_unlock(&i->data->mu);
    }
    *out = f;
    return 0;
}

int pom_file_open(pom_fs *fs, pom_ino ino, int flags, pom_file **out)
{
    return open_ino(fs, ino, flags, out);
}

int pom_create(pom_fs *fs, pom_ino parent, const char *name, mode_t mode, int flags,
               const struct pom_cred *cred, struct stat *st, pom_file **out)
{
    *out = NULL;
    int rc = pom_mknod(fs, parent, name, (mode & 07777) | S_IFREG, 0, cred, st);
    if (rc == -EEXIST && !(flags & O_EXCL)) {
        if ((rc = pom_lookup(fs, parent, name, st)) < 0)
            return rc;
        if (S_ISDIR(st->st_mode))
            rc = -EISDIR;
        else if (!S_ISREG(st->st_mode))
            rc = -EINVAL;
        if (rc < 0) {
            pom_forget(fs, st->st_ino, 1);
            return rc;
        }
    } else if (rc < 0) {
        return rc;
    }
    if ((rc = open_ino(fs, st->st_ino, flags, out)) < 0) {
        pom_forget(fs, st->st_ino, 1);
        return rc;
    }
    return 0;
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
    if ((uint64_t)off < d->len) {
        got = XT_MIN(n, d->len - (size_t)off);
        memcpy(buf, d->buf + off, got);
    }
    pthread_mutex_unlock(&d->mu);
    return (ssize_t)got;
}

ssize_t pom_write(pom_file *f, const void *buf, size_t n, off_t off)
{
    if (off < 0)
        return -EINVAL;
    if ((f->flags & O_ACCMODE) == O_RDONLY)
        return -EBADF;
    struct pom_data *d = f->ino->data;
    pthread_mutex_lock(&d->mu);
    if (f->flags & O_APPEND)
        off = d->len;
    ssize_t rc;
    if (n == 0) {
        rc = 0;
    } else if ((uint64_t)off >= POM_INLINE_MAX) {
        rc = -EFBIG; /* invariant (2) */
    } else {
        size_t fit = XT_MIN(n, POM_INLINE_MAX - (size_t)off);
        uint32_t end = (uint32_t)(off + fit);
        rc = end > d->len ? set_len(d, end) : 0;
        if (rc == 0) {
            memcpy(d->buf + off, buf, fit);
            d->dirty = true;
            d->wgen++;
            d->mtime_ns = xt_now_ns();
            rc = (ssize_t)fit;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int pom_flush(pom_file *f)
{
    return flush_inode(f->fs, f->ino);
}

int pom_fsync(pom_file *f, int datasync)
{
    (void)datasync; /* data and attributes travel in one row */
    int rc = flush_inode(f->fs, f->ino);
    return rc < 0 ? rc : pom_sync_call(f->fs);
}

int pom_release(pom_file *f)
{
    if (!f)
        return 0;
    int rc = flush_inode(f->fs, f->ino);
    pom_ino_close(f->fs, f->ino);
    xt_free(f);
    return rc;
}

pom_ino pom_file_ino(const pom_file *f)
{
    return f->ino->uuid;
}
