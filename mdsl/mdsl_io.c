/*
 * mdsl_io.c -- the liburing backend of mdsl_io (real files), and the small
 * helpers shared by all backends.
 *
 * Ring ownership: one io_uring per thread, in thread-local storage, created
 * on the thread's first I/O and destroyed by a pthread key destructor when
 * the thread exits (or by mdsl_io_uring_thread_exit()). So no lock guards a
 * ring, and no thread ever waits for another thread's completions. A ring
 * does not belong to a backend instance: it holds no per-backend state, only
 * SQEs naming file descriptors.
 *
 * Invariants:
 *  (1) A write batch is submitted as: the writes (chunks of at most
 *      queue_depth SQEs), then one IORING_OP_FSYNC (DATASYNC) per file to
 *      sync, the first flagged IOSQE_IO_DRAIN, so it starts only after every
 *      write submitted before it has completed.
 *  (2) A short write (legal, rare on regular files) is completed with
 *      pwrite(2) and the files are synced again before the batch returns.
 *  (3) Only directory operations, truncate and size use plain syscalls.
 */
#include "mdsl_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

int mdsl_io_pread_full(mdsl_io *io, mdsl_file *f, uint64_t off, void *buf, size_t len)
{
    long n = mdsl_io_read(io, f, off, buf, len);
    if (n < 0)
        return (int)n;
    return (size_t)n == len ? 0 : -EIO;
}

/* ---- per-thread ring ---------------------------------------------------- */

struct tl_ring {
    struct io_uring ring;
    unsigned depth; /* SQ entries of this thread's ring */
    bool ready;
};
static __thread struct tl_ring tl;
static pthread_key_t ring_key;
static pthread_once_t ring_once = PTHREAD_ONCE_INIT;
static _Atomic unsigned ring_depth = 128;

static void ring_destructor(void *arg)
{
    (void)arg;
    mdsl_io_uring_thread_exit();
}

static void ring_key_init(void)
{
    (void)pthread_key_create(&ring_key, ring_destructor);
}

void mdsl_io_uring_thread_exit(void)
{
    if (tl.ready) {
        io_uring_queue_exit(&tl.ring);
        tl.ready = false;
    }
}

static int ring_get(struct io_uring **out)
{
    if (XT_UNLIKELY(!tl.ready)) {
        pthread_once(&ring_once, ring_key_init);
        int rc = io_uring_queue_init(ring_depth, &tl.ring, 0);
        if (rc < 0) {
            XT_ERR("mdsl_io: io_uring_queue_init: %s", strerror(-rc));
            return rc;
        }
        tl.depth = ring_depth;
        tl.ready = true;
        /* any non-NULL value makes the destructor run at thread exit */
        (void)pthread_setspecific(ring_key, &tl);
    }
    *out = &tl.ring;
    return 0;
}

/* Submit what is queued and reap `n` completions into res[user_data]. */
static int ring_run(struct io_uring *r, unsigned n, int *res)
{
    int rc = io_uring_submit_and_wait(r, n);
    if (rc < 0)
        return rc;
    for (unsigned i = 0; i < n; i++) {
        struct io_uring_cqe *cqe;
        rc = io_uring_wait_cqe(r, &cqe);
        if (rc < 0)
            return rc;
        res[cqe->user_data] = cqe->res;
        io_uring_cqe_seen(r, cqe);
    }
    return 0;
}

/* ---- the backend ------------------------------------------------------- */

struct mdsl_file {
    int fd;
};

struct uring_io {
    struct mdsl_io base;
    unsigned depth;
};

static int ur_open(mdsl_io *io, const char *path, bool create, mdsl_file **out)
{
    (void)io;
    int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    if (fd < 0)
        return -errno;
    mdsl_file *f = xt_malloc(sizeof *f);
    if (!f) {
        close(fd);
        return -ENOMEM;
    }
    f->fd = fd;
    *out = f;
    return 0;
}

static void ur_close(mdsl_io *io, mdsl_file *f)
{
    (void)io;
    close(f->fd);
    xt_free(f);
}

static int fsync_plain(mdsl_file *const *sync, size_t nsync)
{
    for (size_t i = 0; i < nsync; i++)
        if (fdatasync(sync[i]->fd) < 0)
            return -errno;
    return 0;
}

static int ur_write(mdsl_io *io, const struct mdsl_io_wr *w, size_t n,
                    mdsl_file *const *sync, size_t nsync, bool *sync_failed)
{
    struct uring_io *u = (struct uring_io *)io;
    struct io_uring *r;
    int rc = ring_get(&r);
    if (rc < 0)
        return rc;
    size_t depth = XT_MIN(u->depth, tl.depth);
    int *res = xt_malloc((n + nsync + 1) * sizeof *res);
    if (!res)
        return -ENOMEM;
    int err = 0;
    bool shorts = false;
    size_t i = 0, s = 0;
    while (i < n || s < nsync) {
        unsigned q = 0;
        size_t first = i;
        while (i < n && q < depth) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(r);
            io_uring_prep_write(sqe, w[i].f->fd, w[i].buf, (unsigned)w[i].len, w[i].off);
            sqe->user_data = i;
            i++, q++;
        }
        /* fsyncs go after the last write, drained (invariant 1) */
        bool drained = false;
        while (i == n && s < nsync && q < depth) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(r);
            io_uring_prep_fsync(sqe, sync[s]->fd, IORING_FSYNC_DATASYNC);
            if (!drained)
                io_uring_sqe_set_flags(sqe, IOSQE_IO_DRAIN);
            drained = true;
            sqe->user_data = n + s;
            s++, q++;
        }
        rc = ring_run(r, q, res);
        if (rc < 0) {
            xt_free(res);
            return rc;
        }
        for (size_t k = first; k < i; k++) {
            if (res[k] < 0) {
                if (!err)
                    err = res[k];
            } else if ((size_t)res[k] < w[k].len) {
                /* invariant 2: finish the write by hand */
                size_t done = (size_t)res[k];
                while (done < w[k].len) {
                    ssize_t m = pwrite(w[k].f->fd, (const char *)w[k].buf + done,
                                       w[k].len - done, (off_t)(w[k].off + done));
                    if (m <= 0) {
                        if (!err)
                            err = m < 0 ? -errno : -EIO;
                        break;
                    }
                    done += (size_t)m;
                }
                shorts = true;
            }
        }
    }
    for (size_t k = 0; k < nsync && !err; k++)
        if (res[n + k] < 0) {
            err = res[n + k];
            *sync_failed = true;
        }
    xt_free(res);
    if (!err && shorts && (err = fsync_plain(sync, nsync)) < 0)
        *sync_failed = true;
    return err;
}

static long ur_read(mdsl_io *io, mdsl_file *f, uint64_t off, void *buf, size_t len)
{
    (void)io;
    struct io_uring *r;
    int rc = ring_get(&r);
    if (rc < 0)
        return rc;
    size_t done = 0;
    while (done < len) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(r);
        io_uring_prep_read(sqe, f->fd, (char *)buf + done, (unsigned)(len - done), off + done);
        sqe->user_data = 0;
        int res;
        rc = ring_run(r, 1, &res);
        if (rc < 0)
            return rc;
        if (res < 0)
            return res;
        if (res == 0)
            break; /* EOF */
        done += (size_t)res;
    }
    return (long)done;
}

static int ur_sync(mdsl_io *io, mdsl_file *f)
{
    bool sf;
    return ur_write(io, NULL, 0, &f, 1, &sf);
}

static int ur_truncate(mdsl_io *io, mdsl_file *f, uint64_t size)
{
    (void)io;
    return ftruncate(f->fd, (off_t)size) < 0 ? -errno : 0;
}

static int ur_size(mdsl_io *io, mdsl_file *f, uint64_t *out)
{
    (void)io;
    struct stat st;
    if (fstat(f->fd, &st) < 0)
        return -errno;
    *out = (uint64_t)st.st_size;
    return 0;
}

static int ur_unlink(mdsl_io *io, const char *path)
{
    (void)io;
    return unlink(path) < 0 ? -errno : 0;
}

static int ur_mkdir(mdsl_io *io, const char *path)
{
    (void)io;
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int ur_rename(mdsl_io *io, const char *from, const char *to)
{
    (void)io;
    return rename(from, to) < 0 ? -errno : 0;
}

static int ur_rmdir(mdsl_io *io, const char *path)
{
    (void)io;
    return rmdir(path) < 0 ? -errno : 0;
}

static int ur_list(mdsl_io *io, const char *dir, mdsl_io_list_cb cb, void *arg)
{
    (void)io;
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        bool is_dir = de->d_type == DT_DIR;
        if (de->d_type == DT_UNKNOWN) {
            struct stat st;
            is_dir = fstatat(dirfd(d), de->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
        }
        rc = cb(de->d_name, is_dir, arg);
    }
    closedir(d);
    return rc;
}

static void ur_destroy(mdsl_io *io)
{
    xt_free(io);
}

static int ur_space(mdsl_io *io, const char *path, uint64_t *avail, uint64_t *total)
{
    (void)io;
    struct statvfs sv;
    if (statvfs(path, &sv) < 0)
        return -errno;
    *avail = (uint64_t)sv.f_bavail * sv.f_frsize;
    *total = (uint64_t)sv.f_blocks * sv.f_frsize;
    return 0;
}

static const struct mdsl_io_ops uring_ops = {
    .name = "uring",
    .open = ur_open,
    .close = ur_close,
    .write = ur_write,
    .read = ur_read,
    .sync = ur_sync,
    .truncate = ur_truncate,
    .size = ur_size,
    .unlink = ur_unlink,
    .mkdir = ur_mkdir,
    .rename = ur_rename,
    .rmdir = ur_rmdir,
    .list = ur_list,
    .destroy = ur_destroy,
    .space = ur_space,
};

int mdsl_io_uring_new(unsigned queue_depth, mdsl_io **out)
{
    struct uring_io *u = xt_calloc(1, sizeof *u);
    if (!u)
        return -ENOMEM;
    u->base.ops = &uring_ops;
    u->depth = queue_depth ? queue_depth : 128;
    ring_depth = u->depth;
    /* probe now so a kernel without io_uring fails at open, not mid-commit */
    struct io_uring *r;
    int rc = ring_get(&r);
    if (rc < 0) {
        xt_free(u);
        return rc;
    }
    *out = &u->base;
    return 0;
}
