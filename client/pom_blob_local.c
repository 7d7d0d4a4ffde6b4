/*
 * pom_blob_local.c -- the `local` backend of the blob tier (pom_blob.h,
 * pom_blob_i.h struct blob_ops): tract files in host folders. Floor 3.0
 * of libpomegranate: below the generic layer (pom_blob.c), which calls it
 * through pom_blob_local_ops only; it calls nothing of the library but its
 * own listing (pom_blob_local_list.c, through the same table).
 *
 * local layout (docs/format-blob.md), for folder F of the locator table:
 *   F/<fsid %08x>/<h1 %02x>/<h2 %02x>/<uuid %016x>/<tract>>10 %06x>/<tract %08x>
 * h1, h2 = the top two bytes of pom_blob_hash(uuid): 65,536 fan-out
 * folders, and at most 1,024 tracts per group folder, so no folder grows
 * huge whatever the number or size of files.
 *
 * Invariants (beyond pom_blob.h's):
 *  (1) A tract file is created only by a write or an allocation; reads,
 *      truncates and punches never create one (a missing file is a hole).
 *  (2) A cached fd is closed only when no call uses it (slot refs == 0);
 *      a call that finds every slot busy uses a private fd it closes.
 *  (3) I/O (pread/pwrite, open, mkdir) runs without any lock held; f->mu
 *      covers only the fd slots, the dirty list and the map's flags.
 *  (4) A removed tract's cached fd is never used again (slot `stale`).
 *  (5) The set's map (<uuid folder of row hash mod rows>/map, one byte per
 *      tract, 1: written) has byte t set after tract file t is created and
 *      cleared before it is removed; its file exists from pom_blob_create
 *      or the first write until the set's removal. So a missing tract file
 *      whose byte is 1, or any missing tract of a set without a map, is
 *      lost data (-EIO); a byte 0 (or past the map's end) is a hole.
 *
 * I/O is plain pread/pwrite on cached fds, not liburing: a FUSE request
 * brings one range at a time, so there is nothing to batch; one syscall
 * per tract piece is what io_uring would cost too (docs/client.md).
 */
#include "pom_blob_i.h"

#include "xt_common.h"
#include "xt_hash.h"

#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define HASH_SEED   UINT64_C(0x504f4d424c4f4221) /* "POMBLOB!" */
#define GROUP_SHIFT 10                           /* 1,024 tracts per group folder */

uint64_t pom_blob_hash(uint64_t uuid)
{
    uint8_t le[8];
    xt_put_u64(le, uuid);
    return xt_hash_bytes(le, sizeof le, HASH_SEED);
}

/* The test hook: -err when the countdown reaches this call. */
static int fault(pom_blob *b)
{
    uint64_t n = atomic_load(&b->fault_n);
    while (n) {
        if (atomic_compare_exchange_weak(&b->fault_n, &n, n - 1))
            return n == 1 ? -atomic_load(&b->fault_err) : 0;
    }
    return 0;
}

/* ---- local backend ----------------------------------------------------- */

static const char *folder_of(const pom_blob_file *f, uint32_t t)
{
    return f->b->folders[(f->h + t) % f->b->rows]; /* invariant (1) of pom_blob.h */
}

/* "<folder>/<h1>/<h2>/<uuid>" into p (PATH_MAX). */
static int uuid_dir(const char *folder, uint64_t uuid, uint64_t h, char *p)
{
    int n = snprintf(p, PATH_MAX, "%s/%02x/%02x/%016llx", folder, (unsigned)(h >> 56),
                     (unsigned)((h >> 48) & 0xff), (unsigned long long)uuid);
    return n < 0 || n >= PATH_MAX ? -ENAMETOOLONG : 0;
}

static int tract_path(const pom_blob_file *f, uint32_t t, char *p)
{
    int rc = uuid_dir(folder_of(f, t), f->uuid, f->h, p);
    if (rc < 0)
        return rc;
    size_t l = strlen(p);
    int n = snprintf(p + l, PATH_MAX - l, "/%06x/%08x", t >> GROUP_SHIFT, t);
    return n < 0 || (size_t)n >= PATH_MAX - l ? -ENAMETOOLONG : 0;
}

/* mkdir -p of the parent folders of path (those under the fsid folder). */
static int mkdir_parents(char *path)
{
    for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        int rc = mkdir(path, 0700) < 0 && errno != EEXIST ? -errno : 0;
        *s = '/';
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Opens file p read-write: -ENOENT when missing and !create; with create,
 * makes it and its parent folders (*made set only when this call made the
 * file). A truncate of the same set removes group folders that look empty
 * (drop_in), so one may vanish between our mkdir and our open: that
 * ENOENT means "make the folders again", never "lost". */
static int open_path(pom_blob *b, char *p, bool create, bool *made)
{
    int rc = fault(b);
    if (rc < 0)
        return rc;
    for (int tries = 0;; tries++) {
        int fd = open(p, O_RDWR | O_CLOEXEC);
        if (fd >= 0 || errno != ENOENT || !create)
            return fd >= 0 ? fd : -errno;
        if ((rc = mkdir_parents(p)) < 0)
            return rc;
        fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            *made = true;
            return fd;
        }
        if ((errno != ENOENT && errno != EEXIST) || tries == 8)
            return -errno; /* EEXIST: a racing call made it; open it above */
    }
}

/* ---- the set's map (invariant (5)) ------------------------------------- */

/* "<uuid folder of the row of tract 0>/map" into p (PATH_MAX). */
static int map_path(const pom_blob *b, uint64_t uuid, uint64_t h, char *p)
{
    int rc = uuid_dir(b->folders[h % b->rows], uuid, h, p);
    size_t l = strlen(p);
    if (rc == 0 && l + sizeof "/map" > PATH_MAX)
        rc = -ENAMETOOLONG;
    if (rc == 0)
        memcpy(p + l, "/map", sizeof "/map");
    return rc;
}

/* The next fsync syncs the map (and, when made, its folders). */
static void map_changed(pom_blob_file *f, bool made)
{
    pthread_mutex_lock(&f->mu);
    f->map_dirty = true;
    f->map_made |= made;
    pthread_mutex_unlock(&f->mu);
}

/* The map of f's set, open read-write; create makes it (and its folders).
 * An fd, or -ENOENT (no map: create false), -errno. */
static int map_open(pom_blob_file *f, bool create)
{
    char p[PATH_MAX];
    int rc = map_path(f->b, f->uuid, f->h, p);
    if (rc < 0)
        return rc;
    bool made = false;
    int fd = open_path(f->b, p, create, &made);
    if (made)
        map_changed(f, true);
    return fd;
}

/* Sets byte t of the map to v (1: written, 0: dropped). Clearing never
 * creates a map, nor grows one past its end (past it reads 0). */
static int map_set(pom_blob_file *f, uint32_t t, uint8_t v)
{
    int fd = map_open(f, v != 0);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    struct stat st;
    int rc = 0;
    if (!v && (fstat(fd, &st) < 0 || (uint64_t)st.st_size <= t))
        goto out;
    ssize_t w;
    do
        w = pwrite(fd, &v, 1, (off_t)t);
    while (w < 0 && errno == EINTR);
    rc = w < 0 ? -errno : 0;
    if (rc == 0)
        map_changed(f, false);
out:
    close(fd);
    return rc;
}

/* Drops every tract >= first from the map. */
static int map_cut(pom_blob_file *f, uint32_t first)
{
    int fd = map_open(f, false);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0)
        rc = -errno;
    else if ((uint64_t)st.st_size > first && ftruncate(fd, (off_t)first) < 0)
        rc = -errno;
    if (rc == 0)
        map_changed(f, false);
    close(fd);
    return rc;
}

/* What the map says of tract t: 1 written, 0 never written (a hole),
 * -ENOENT the set has no map, -errno. */
static int map_get(pom_blob_file *f, uint32_t t)
{
    int fd = map_open(f, false);
    if (fd < 0)
        return fd;
    uint8_t v = 0;
    ssize_t r;
    do
        r = pread(fd, &v, 1, (off_t)t);
    while (r < 0 && errno == EINTR);
    int rc = r < 0 ? -errno : v != 0;
    close(fd);
    return rc;
}

static int local_create(pom_blob_file *f)
{
    int fd = map_open(f, true);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

/* Opens tract t: create false gives -ENOENT for a hole (invariant (1)). */
static int open_tract(pom_blob_file *f, uint32_t t, bool create, bool *made)
{
    char p[PATH_MAX];
    int rc = tract_path(f, t, p);
    return rc < 0 ? rc : open_path(f->b, p, create, made);
}

/* REQUIRES: f->mu held. The slot caching tract t, or -1. */
static int slot_find(pom_blob_file *f, uint32_t t)
{
    assert(xt_mutex_held(&f->mu));
    for (int i = 0; i < FD_SLOTS; i++)
        if (f->slots[i].fd >= 0 && !f->slots[i].stale && f->slots[i].tract == t)
            return i;
    return -1;
}

/* An fd on tract t, pinned in a slot (*slot >= 0) or private (*slot -1).
 * The open runs without f->mu (it may mkdir); a racing open of the same
 * tract is resolved by keeping the first one cached. Invariant (2). */
static int get_fd(pom_blob_file *f, uint32_t t, bool create, int *slot, bool *made_out)
{
    pthread_mutex_lock(&f->mu);
    int i = slot_find(f, t);
    if (i >= 0) {
        f->slots[i].refs++;
        f->slots[i].used = ++f->tick;
        *slot = i;
        pthread_mutex_unlock(&f->mu);
        return f->slots[i].fd;
    }
    pthread_mutex_unlock(&f->mu);
    bool made = false;
    int fd = open_tract(f, t, create, &made);
    if (made) {
        int mrc = map_set(f, t, 1); /* invariant (5): after the file exists */
        if (mrc < 0) {
            close(fd);
            fd = mrc;
        }
    }
    pthread_mutex_lock(&f->mu);
    if (made)
        f->created = true;
    if (made_out)
        *made_out = made;
    *slot = -1;
    if (fd >= 0 && (i = slot_find(f, t)) >= 0) {
        close(fd); /* another call cached it meanwhile */
        fd = f->slots[i].fd;
        f->slots[i].refs++;
        *slot = i;
    } else if (fd >= 0) {
        int victim = -1;
        for (i = 0; i < FD_SLOTS; i++) {
            struct slot *s = &f->slots[i];
            if (s->refs == 0 && (victim < 0 || s->fd < 0 ||
                                 (f->slots[victim].fd >= 0 && s->used < f->slots[victim].used)))
                victim = i;
        }
        if (victim >= 0) {
            struct slot *s = &f->slots[victim];
            if (s->fd >= 0)
                close(s->fd);
            *s = (struct slot){ .tract = t, .fd = fd, .refs = 1, .used = ++f->tick };
            *slot = victim;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return fd;
}

static void put_fd(pom_blob_file *f, int fd, int slot)
{
    if (slot < 0) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&f->mu);
    struct slot *s = &f->slots[slot];
    if (--s->refs == 0 && s->stale) {
        close(s->fd);
        s->fd = -1;
        s->stale = false;
    }
    pthread_mutex_unlock(&f->mu);
}

/* Forgets cached fds of tracts in [first, last] (about to be removed):
 * idle ones are closed, busy ones closed by their last put_fd, and none is
 * found again (a later write must create a new file, not write into the
 * unlinked one). */
static void forget_fds(pom_blob_file *f, uint32_t first, uint32_t last)
{
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < FD_SLOTS; i++) {
        struct slot *s = &f->slots[i];
        if (s->fd < 0 || s->tract < first || s->tract > last)
            continue;
        if (s->refs == 0) {
            close(s->fd);
            s->fd = -1;
        } else {
            s->stale = true;
        }
    }
    pthread_mutex_unlock(&f->mu);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* REQUIRES: f->mu held. Sorts the dirty list and drops duplicates. */
static void dirty_compact(pom_blob_file *f)
{
    assert(xt_mutex_held(&f->mu));
    if (f->ndirty < 2)
        return;
    qsort(f->dirty, f->ndirty, sizeof *f->dirty, cmp_u32);
    size_t w = 1;
    for (size_t r = 1; r < f->ndirty; r++)
        if (f->dirty[r] != f->dirty[w - 1])
            f->dirty[w++] = f->dirty[r];
    f->ndirty = w;
}

/* REQUIRES: f->mu held. Adds t to the dirty list. 0 or -ENOMEM. */
static int dirty_push(pom_blob_file *f, uint32_t t)
{
    assert(xt_mutex_held(&f->mu));
    if (f->ndirty && f->dirty[f->ndirty - 1] == t)
        return 0; /* the sequential case: already there */
    if (f->ndirty == f->capdirty && f->capdirty >= 4096)
        dirty_compact(f);
    if (f->ndirty == f->capdirty) {
        size_t cap = f->capdirty ? f->capdirty * 2 : 16;
        uint32_t *nd = xt_realloc(f->dirty, cap * sizeof *nd);
        if (!nd)
            return -ENOMEM;
        f->dirty = nd;
        f->capdirty = cap;
    }
    f->dirty[f->ndirty++] = t;
    return 0;
}

/* REQUIRES: f->mu held. As dirty_push, but a failure is remembered. */
static void dirty_add(pom_blob_file *f, uint32_t t)
{
    assert(xt_mutex_held(&f->mu));
    if (dirty_push(f, t) < 0)
        f->lost = true;
}

static int mark_dirty(pom_blob_file *f, uint32_t t)
{
    pthread_mutex_lock(&f->mu);
    dirty_add(f, t);
    pthread_mutex_unlock(&f->mu);
    return 0;
}

static ssize_t local_pread(pom_blob_file *f, uint32_t t, void *buf, size_t n, uint64_t toff)
{
    int slot;
    int fd = get_fd(f, t, false, &slot, NULL);
    if (fd == -ENOENT) {
        int w = map_get(f, t);
        if (w == 1) /* a write may have made it since our open */
            fd = get_fd(f, t, false, &slot, NULL);
        if (w == 0) {
            memset(buf, 0, n); /* a hole */
            return (ssize_t)n;
        }
        if (w == -ENOENT || (w == 1 && fd == -ENOENT)) {
            XT_ERR("blob: tract %u of set %016llx in %s is lost (%s): EIO, not zeros",
                   (unsigned)t, (unsigned long long)f->uuid, folder_of(f, t),
                   w == -ENOENT ? "the set has no map here: another host's folder?"
                                : "written, its file is missing");
            return -EIO;
        }
        if (w < 0)
            return w;
    }
    if (fd < 0)
        return fd;
    size_t got = 0;
    int rc = 0;
    while (got < n) {
        if ((rc = fault(f->b)) < 0)
            break;
        ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(toff + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0)
            break; /* past the tract file's end: zeros */
        got += (size_t)r;
    }
    put_fd(f, fd, slot);
    if (rc < 0)
        return rc;
    memset((char *)buf + got, 0, n - got);
    return (ssize_t)n;
}

/* The device's last bytes are for what frees space (xt_disk_reserve): the
 * blob tier often shares its disk with the MDSL (`pomctl up`), whose
 * reserve must still be there for the unlinks that give tracts back. */
static int local_room(int fd, size_t n)
{
    struct statvfs sv;
    if (fstatvfs(fd, &sv) < 0)
        return 0;
    uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    uint64_t keep = xt_disk_reserve((uint64_t)sv.f_blocks * sv.f_frsize);
    return avail < keep || avail - keep < n ? -ENOSPC : 0;
}

static ssize_t local_pwrite(pom_blob_file *f, uint32_t t, const void *buf, size_t n,
                            uint64_t toff)
{
    int slot;
    int fd = get_fd(f, t, true, &slot, NULL);
    if (fd < 0)
        return fd;
    size_t done = 0;
    int rc = local_room(fd, n);
    if (rc < 0) {
        put_fd(f, fd, slot);
        return rc;
    }
    while (done < n) {
        if ((rc = fault(f->b)) < 0)
            break;
        ssize_t w = pwrite(fd, (const char *)buf + done, n - done, (off_t)(toff + done));
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = -errno;
            break;
        }
        done += (size_t)w;
    }
    put_fd(f, fd, slot);
    int mrc = done ? mark_dirty(f, t) : 0;
    if (rc < 0 && done == 0)
        return rc;
    return mrc < 0 ? mrc : (ssize_t)done;
}

/* fn(fd, a, b) on tract t when it exists (an absent tract holds nothing
 * to cut or punch: 0), then t is marked dirty. 0 or -errno. */
static int on_tract(pom_blob_file *f, uint32_t t, int (*fn)(int fd, uint64_t a, uint64_t b),
                    uint64_t a, uint64_t b)
{
    int slot;
    int fd = get_fd(f, t, false, &slot, NULL);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    int rc = fault(f->b);
    if (rc == 0)
        rc = fn(fd, a, b);
    put_fd(f, fd, slot);
    return rc < 0 ? rc : mark_dirty(f, t);
}

static int cut_fd(int fd, uint64_t len, uint64_t unused)
{
    (void)unused;
    struct stat st;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size > len && ftruncate(fd, (off_t)len) < 0)
        return -errno;
    return 0;
}

static int local_cut(pom_blob_file *f, uint32_t t, uint64_t len)
{
    return on_tract(f, t, cut_fd, len, 0);
}

static int unlink_tract(pom_blob *b, const char *path)
{
    int rc = fault(b);
    if (rc == 0 && unlink(path) < 0 && errno != ENOENT)
        rc = -errno;
    return rc;
}

/* Removes, in uuid folder `ud`, every tract >= first (all: first 0), and
 * the group folders (and `ud` itself when all) that end up empty. */
static int drop_in(pom_blob *b, const char *ud, uint32_t first, bool all)
{
    DIR *d = opendir(ud);
    if (!d)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        unsigned long g = strtoul(e->d_name, &end, 16);
        if (e->d_name[0] == '.' || *end || g > (UINT32_MAX >> GROUP_SHIFT))
            continue;
        if (((g + 1) << GROUP_SHIFT) <= first)
            continue; /* every tract of this group is kept */
        char gd[PATH_MAX];
        if (snprintf(gd, sizeof gd, "%s/%s", ud, e->d_name) >= (int)sizeof gd)
            continue;
        DIR *gdir = opendir(gd);
        if (!gdir)
            continue;
        struct dirent *te;
        while ((te = readdir(gdir))) {
            unsigned long t = strtoul(te->d_name, &end, 16);
            if (te->d_name[0] == '.' || *end || t < first)
                continue;
            char tp[PATH_MAX];
            if (snprintf(tp, sizeof tp, "%s/%s", gd, te->d_name) >= (int)sizeof tp)
                continue;
            int r = unlink_tract(b, tp);
            if (r < 0 && rc == 0)
                rc = r;
        }
        closedir(gdir);
        rmdir(gd); /* fails while tracts remain: fine */
    }
    closedir(d);
    if (all)
        rmdir(ud);
    return rc;
}

static int local_drop_from(pom_blob_file *f, uint32_t first)
{
    forget_fds(f, first, UINT32_MAX);
    int rc = map_cut(f, first); /* invariant (5): before the files go */
    if (rc < 0)
        return rc;
    for (size_t r = 0; r < f->b->rows; r++) {
        char ud[PATH_MAX];
        int e = uuid_dir(f->b->folders[r], f->uuid, f->h, ud);
        if (e == 0)
            e = drop_in(f->b, ud, first, false);
        if (e < 0 && rc == 0)
            rc = e;
    }
    return rc;
}

static int local_drop(pom_blob_file *f, uint32_t t)
{
    forget_fds(f, t, t);
    char p[PATH_MAX];
    int rc = tract_path(f, t, p);
    if (rc == 0)
        rc = map_set(f, t, 0); /* invariant (5): before the file goes */
    return rc < 0 ? rc : unlink_tract(f->b, p);
}

static int punch_fd(int fd, uint64_t toff, uint64_t len)
{
    if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)toff, (off_t)len) == 0)
        return 0;
    int rc = -errno;
    if (rc != -EOPNOTSUPP)
        return rc;
    /* The host cannot punch: write zeros over what the file holds. */
    static const uint8_t zeros[65536];
    struct stat st;
    rc = fstat(fd, &st) < 0 ? -errno : 0;
    uint64_t end = XT_MIN(toff + len, (uint64_t)(rc == 0 ? st.st_size : 0));
    for (uint64_t o = toff; rc == 0 && o < end;) {
        ssize_t w = pwrite(fd, zeros, (size_t)XT_MIN(end - o, sizeof zeros), (off_t)o);
        if (w < 0 && errno != EINTR)
            rc = -errno;
        else if (w > 0)
            o += (uint64_t)w;
    }
    return rc;
}

static int local_punch(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len)
{
    return on_tract(f, t, punch_fd, toff, len);
}

static int local_allocate(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len,
                          bool *made)
{
    int slot;
    int fd = get_fd(f, t, true, &slot, made);
    if (fd < 0)
        return fd;
    int rc = fault(f->b);
    if (rc == 0 && fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)toff, (off_t)len) < 0)
        rc = -errno;
    put_fd(f, fd, slot);
    return rc < 0 ? rc : mark_dirty(f, t);
}

static int fsync_path(pom_blob *b, const char *p, bool dir)
{
    int rc = fault(b);
    if (rc < 0)
        return rc;
    int fd = open(p, (dir ? O_RDONLY | O_DIRECTORY : O_RDWR) | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -errno; /* removed meanwhile: nothing to keep */
    rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

/* fsyncs the `levels` folders above path p (cut in place), none above
 * the first `stop` bytes (the fsid folder). */
static int fsync_up(pom_blob *b, char *p, size_t stop, int levels)
{
    int rc = 0;
    for (char *s = strrchr(p, '/'); rc == 0 && s && (size_t)(s - p) >= stop && levels-- > 0;
         s = strrchr(p, '/')) {
        *s = '\0';
        rc = fsync_path(b, p, true);
    }
    return rc;
}

/* fsyncs the tract's group folder and, with `upper`, the folders above it
 * up to the fsid folder (uuid, hash levels). */
static int fsync_dirs(pom_blob_file *f, uint32_t t, bool upper)
{
    char p[PATH_MAX];
    int rc = tract_path(f, t, p);
    return rc < 0 ? rc : fsync_up(f->b, p, strlen(folder_of(f, t)), upper ? 5 : 1);
}

static int local_fsync(pom_blob_file *f)
{
    pthread_mutex_lock(&f->mu);
    dirty_compact(f);
    uint32_t *list = f->dirty;
    size_t n = f->ndirty;
    bool created = f->created, lost = f->lost;
    bool map_dirty = f->map_dirty, map_made = f->map_made;
    f->dirty = NULL;
    f->ndirty = f->capdirty = 0;
    f->created = f->lost = f->map_dirty = f->map_made = false;
    pthread_mutex_unlock(&f->mu);
    int rc = 0;
    if (map_dirty) {
        /* The map, and when it is new its folders up to the fsid folder. */
        char p[PATH_MAX];
        rc = map_path(f->b, f->uuid, f->h, p);
        if (rc == 0)
            rc = fsync_path(f->b, p, false);
        if (rc == 0 && map_made)
            rc = fsync_up(f->b, p, strlen(f->b->folders[f->h % f->b->rows]), 4);
    }
    for (size_t r = 0; lost && r < f->b->rows && rc == 0; r++) {
        int fd = open(f->b->folders[r], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        rc = fd < 0 ? -errno : syncfs(fd) < 0 ? -errno : 0;
        if (fd >= 0)
            close(fd);
    }
    /* New tract files need their folder entries durable too: each (group,
     * row) folder once, the folders above once per row. The list is sorted,
     * so one group's tracts are together. */
    uint64_t upper_done = 0, group_done = 0; /* bit r: row r (rows <= 64) */
    uint32_t group = UINT32_MAX;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char p[PATH_MAX];
        if ((rc = tract_path(f, list[i], p)) < 0)
            break;
        rc = fsync_path(f->b, p, false);
        if (rc < 0 || !created)
            continue;
        if (list[i] >> GROUP_SHIFT != group) {
            group = list[i] >> GROUP_SHIFT;
            group_done = 0;
        }
        uint64_t bit = UINT64_C(1) << ((f->h + list[i]) % f->b->rows);
        if (!(group_done & bit)) {
            rc = fsync_dirs(f, list[i], !(upper_done & bit));
            group_done |= bit;
            upper_done |= bit;
        }
    }
    if (rc < 0) {
        /* The host may have dropped the pages it failed to write, so a
         * retried fsync could succeed without them: the file refuses
         * writes and fsyncs from now on (invariant (5)). */
        XT_ERR("blob: fsync of file %llu failed: %s; its writes fail until it is reopened",
               (unsigned long long)f->uuid, strerror(-rc));
        pthread_mutex_lock(&f->mu);
        f->error = rc;
        pthread_mutex_unlock(&f->mu);
    }
    xt_free(list);
    return rc;
}

static int local_stat(pom_blob *b, uint64_t uuid, struct pom_blob_stat *st)
{
    memset(st, 0, sizeof *st);
    uint64_t h = pom_blob_hash(uuid);
    for (size_t r = 0; r < b->rows; r++) {
        char ud[PATH_MAX];
        int rc = uuid_dir(b->folders[r], uuid, h, ud);
        if (rc < 0)
            return rc;
        DIR *d = opendir(ud);
        if (!d) {
            if (errno == ENOENT)
                continue;
            return -errno;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            int gfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            DIR *g = gfd >= 0 ? fdopendir(gfd) : NULL;
            if (!g) {
                if (gfd >= 0)
                    close(gfd);
                continue;
            }
            struct dirent *te;
            struct stat ts;
            while ((te = readdir(g)))
                if (te->d_name[0] != '.' && fstatat(dirfd(g), te->d_name, &ts, 0) == 0) {
                    st->tracts++;
                    st->alloc_bytes += (uint64_t)ts.st_blocks * 512u;
                }
            closedir(g);
        }
        closedir(d);
    }
    return 0;
}

static int local_remove(pom_blob *b, uint64_t uuid)
{
    uint64_t h = pom_blob_hash(uuid);
    char mp[PATH_MAX];
    int rc = map_path(b, uuid, h, mp);
    if (rc == 0)
        rc = unlink_tract(b, mp); /* the set goes: its id folder can go too */
    if (rc < 0)
        return rc;
    for (size_t r = 0; r < b->rows; r++) {
        char ud[PATH_MAX];
        int e = uuid_dir(b->folders[r], uuid, h, ud);
        if (e == 0)
            e = drop_in(b, ud, 0, true);
        if (e < 0 && rc == 0)
            rc = e;
    }
    return rc;
}

static int local_touch(pom_blob *b, uint64_t uuid)
{
    uint64_t h = pom_blob_hash(uuid);
    for (size_t r = 0; r < b->rows; r++) {
        char ud[PATH_MAX];
        int rc = uuid_dir(b->folders[r], uuid, h, ud);
        if (rc < 0)
            return rc;
        /* The id folder's mtime counts in the set's age (pom_blob_list). */
        if (utimensat(AT_FDCWD, ud, NULL, 0) < 0 && errno != ENOENT)
            return -errno;
    }
    return 0;
}

static int local_lock(pom_blob *b, int *token)
{
    char p[PATH_MAX];
    int n = snprintf(p, sizeof p, "%s/reclaim.lock", b->folders[0]);
    if (n < 0 || n >= (int)sizeof p)
        return -ENAMETOOLONG;
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(fd);
        return e == EWOULDBLOCK ? 0 : -e;
    }
    *token = fd;
    return 1;
}

static void local_unlock(pom_blob *b, int token)
{
    (void)b;
    close(token); /* drops the flock */
}

static void local_file_fini(pom_blob_file *f)
{
    for (int i = 0; i < FD_SLOTS; i++)
        if (f->slots[i].fd >= 0)
            close(f->slots[i].fd);
}

/* Splits path at ':' into folders, makes each "F/<fsid %08x>" and checks
 * it is a writable folder. */
static int local_open(pom_blob *b, const struct pom_blob_conf *c)
{
    if (!c->path || !*c->path) {
        XT_ERR("blob: backend local needs a folder (fs blob_path, or pomfs -o blob=DIR)");
        return -EINVAL;
    }
    char *list = xt_strdup(c->path);
    if (!list)
        return -ENOMEM;
    int rc = 0;
    char *save = NULL;
    for (char *f = strtok_r(list, ":", &save); f && rc == 0; f = strtok_r(NULL, ":", &save)) {
        if (b->rows == POM_BLOB_FOLDERS_MAX) {
            XT_ERR("blob: more than %d folders in '%s'", POM_BLOB_FOLDERS_MAX, c->path);
            rc = -EINVAL;
            break;
        }
        size_t n = strlen(f) + 16;
        char *dir = xt_malloc(n);
        if (!dir) {
            rc = -ENOMEM;
            break;
        }
        snprintf(dir, n, "%s/%08x", f, c->fsid);
        b->folders[b->rows++] = dir;
        if (mkdir(f, 0700) < 0 && errno != EEXIST)
            rc = -errno;
        else if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            rc = -errno;
        else if (access(dir, W_OK | X_OK) < 0)
            rc = -errno;
        if (rc < 0)
            XT_ERR("blob: folder %s is not usable: %s", dir, strerror(-rc));
    }
    xt_free(list);
    if (rc == 0 && b->rows == 0) {
        XT_ERR("blob: no folder in '%s'", c->path);
        rc = -EINVAL;
    }
    return rc;
}

static void local_close(pom_blob *b)
{
    for (size_t r = 0; r < b->rows; r++)
        xt_free(b->folders[r]);
    b->rows = 0;
}

const struct blob_ops pom_blob_local_ops = {
    .name = "local", .open = local_open, .close = local_close,
    .pread = local_pread, .pwrite = local_pwrite, .cut = local_cut,
    .drop_from = local_drop_from, .drop = local_drop, .punch = local_punch,
    .allocate = local_allocate, .fsync = local_fsync, .create = local_create,
    .remove = local_remove,
    .stat = local_stat, .file_fini = local_file_fini,
    .list = pom_blob_local_list, .touch = local_touch, .lock = local_lock,
    .unlock = local_unlock,
};
