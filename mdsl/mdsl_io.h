/*
 * mdsl_io.h -- block I/O of the MDSL behind one ops struct (SQLite's
 * sqlite3_io_methods, LevelDB's Env). The store calls only the mdsl_io_*
 * wrappers below; tests swap the backend.
 *
 * Backends:
 *   - liburing  (mdsl_io_uring_new, mdsl_io.c): real files; a batch of writes
 *     is submitted at once, followed by IORING_OP_FSYNC SQEs flagged
 *     IOSQE_IO_DRAIN so each fsync starts only after every write before it
 *     completed. Reads go through io_uring too.
 *   - in-memory (mdsl_io_mem_new, mdsl_io_mem.c): fast unit tests.
 *   - fault     (mdsl_io_fault_new, mdsl_io_fault.c): wraps another backend;
 *     countdown failures (-EIO/-ENOSPC on the N-th op) and power-loss
 *     simulation (unsynced writes dropped or corrupted at a simulated crash,
 *     as SQLite's test6.c and LevelDB's fault-injection env).
 *
 * Invariants:
 *  (1) Every function returns 0 (or a byte count for reads) or -errno.
 *  (2) After mdsl_io_write() returns 0, every write of the batch is complete
 *      and every file of `sync` is durable up to those writes. On error, any
 *      subset of the writes may have reached the file (callers truncate back).
 *  (3) Backends are thread-safe: several threads may call any op at once,
 *      also on the same file (the store serialises appends itself).
 *  (4) Directory operations (create, unlink, mkdir, rename, rmdir) are durable
 *      at once: the power-loss model does not simulate lost directory entries.
 */
#ifndef MDSL_IO_H
#define MDSL_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xt_common.h"

typedef struct mdsl_io mdsl_io;
typedef struct mdsl_file mdsl_file; /* backend-defined */

/* One write of a batch. `buf` is borrowed for the duration of the call. */
struct mdsl_io_wr {
    mdsl_file *f;
    uint64_t off;
    const void *buf;
    size_t len;
};

/* Called once per directory entry name ("." and ".." excluded); a non-zero
 * return stops the listing and is returned by mdsl_io_list(). */
typedef int (*mdsl_io_list_cb)(const char *name, bool is_dir, void *arg);

struct mdsl_io_ops {
    const char *name;
    int (*open)(mdsl_io *io, const char *path, bool create, mdsl_file **out);
    void (*close)(mdsl_io *io, mdsl_file *f);
    /* *sync_failed is set when the error came from a sync, not a write */
    int (*write)(mdsl_io *io, const struct mdsl_io_wr *w, size_t n,
                 mdsl_file *const *sync, size_t nsync, bool *sync_failed);
    long (*read)(mdsl_io *io, mdsl_file *f, uint64_t off, void *buf, size_t len);
    int (*sync)(mdsl_io *io, mdsl_file *f);
    int (*truncate)(mdsl_io *io, mdsl_file *f, uint64_t size);
    int (*size)(mdsl_io *io, mdsl_file *f, uint64_t *out);
    int (*unlink)(mdsl_io *io, const char *path);
    int (*mkdir)(mdsl_io *io, const char *path);
    int (*rename)(mdsl_io *io, const char *from, const char *to);
    int (*rmdir)(mdsl_io *io, const char *path);
    int (*list)(mdsl_io *io, const char *dir, mdsl_io_list_cb cb, void *arg);
    void (*destroy)(mdsl_io *io);
    /* Bytes free to an unprivileged writer and the size of the device
     * holding `path`; NULL: unknown (no space reserve is kept). */
    int (*space)(mdsl_io *io, const char *path, uint64_t *avail, uint64_t *total);
};

/* Every backend's handle starts with this. */
struct mdsl_io {
    const struct mdsl_io_ops *ops;
};

/* ---- wrappers (the only way the store does I/O) ---------------------- */

/* Open `path`; create it (empty) if `create` and missing. *out is owned by
 * the caller until mdsl_io_close(). -ENOENT if missing and !create. */
static inline int mdsl_io_open(mdsl_io *io, const char *path, bool create, mdsl_file **out)
{ return io->ops->open(io, path, create, out); }
static inline void mdsl_io_close(mdsl_io *io, mdsl_file *f)
{ if (f) io->ops->close(io, f); }
/* Batch: perform the n writes, then make every file of sync[] durable.
 * *sync_failed (may be NULL) tells a failed sync from a failed write: after
 * a failed sync the state of the data is unknown (the caller stops). */
static inline int mdsl_io_write(mdsl_io *io, const struct mdsl_io_wr *w, size_t n,
                                mdsl_file *const *sync, size_t nsync, bool *sync_failed)
{
    bool sf = false;
    int rc = io->ops->write(io, w, n, sync, nsync, &sf);
    if (sync_failed)
        *sync_failed = sf;
    return rc;
}
/* Read up to len bytes at off; returns bytes read (short only at EOF). */
static inline long mdsl_io_read(mdsl_io *io, mdsl_file *f, uint64_t off, void *buf, size_t len)
{ return io->ops->read(io, f, off, buf, len); }
static inline int mdsl_io_sync(mdsl_io *io, mdsl_file *f)
{ return io->ops->sync(io, f); }
static inline int mdsl_io_truncate(mdsl_io *io, mdsl_file *f, uint64_t size)
{ return io->ops->truncate(io, f, size); }
static inline int mdsl_io_size(mdsl_io *io, mdsl_file *f, uint64_t *out)
{ return io->ops->size(io, f, out); }
static inline int mdsl_io_unlink(mdsl_io *io, const char *path)
{ return io->ops->unlink(io, path); }
/* Create a directory; an existing one is not an error. */
static inline int mdsl_io_mkdir(mdsl_io *io, const char *path)
{ return io->ops->mkdir(io, path); }
/* Rename a file or a directory (with everything under it); open files stay
 * open. -ENOENT if `from` is missing, -EEXIST/-ENOTEMPTY if `to` is taken. */
static inline int mdsl_io_rename(mdsl_io *io, const char *from, const char *to)
{ return io->ops->rename(io, from, to); }
/* Remove an empty directory (-ENOTEMPTY otherwise). */
static inline int mdsl_io_rmdir(mdsl_io *io, const char *path)
{ return io->ops->rmdir(io, path); }
static inline int mdsl_io_list(mdsl_io *io, const char *dir, mdsl_io_list_cb cb, void *arg)
{ return io->ops->list(io, dir, cb, arg); }
static inline void mdsl_io_destroy(mdsl_io *io)
{ if (io) io->ops->destroy(io); }
/* -ENOTSUP when the backend cannot tell. */
static inline int mdsl_io_space(mdsl_io *io, const char *path, uint64_t *avail, uint64_t *total)
{ return io->ops->space ? io->ops->space(io, path, avail, total) : -ENOTSUP; }

/* Read exactly len bytes or fail (-EIO on a short read: a truncated file). */
int mdsl_io_pread_full(mdsl_io *io, mdsl_file *f, uint64_t off, void *buf, size_t len);

/* ---- backends -------------------------------------------------------- */

/* liburing on real files. Each thread that does I/O gets its own ring,
 * created on first use and torn down when the thread exits (so no lock is
 * ever held while waiting for a completion). `queue_depth` 0 = 128. */
int mdsl_io_uring_new(unsigned queue_depth, mdsl_io **out);
/* Tear down the calling thread's ring now (else it goes at thread exit). */
void mdsl_io_uring_thread_exit(void);

/* In-memory files and directories; everything is "durable" at once. */
int mdsl_io_mem_new(mdsl_io **out);
/* A device of `bytes` (0: unbounded, the default, and free space unknown):
 * writes past it answer -ENOSPC and mdsl_io_space tells what is left.
 * REQUIRES: io from mdsl_io_mem_new. */
void mdsl_io_mem_set_capacity(mdsl_io *io, uint64_t bytes);

/* Fault injection over `base` (borrowed; must outlive the wrapper). The
 * random choices of the power-loss crash come from `seed`. */
int mdsl_io_fault_new(mdsl_io *base, uint64_t seed, mdsl_io **out);
/* Countdown: after `n` more successful ops, the next data op (write batch
 * item, fsync, truncate, open-create) fails with `err` (-EIO or -ENOSPC).
 * If `sticky`, every later op fails too until re-armed; n < 0 disarms. */
void mdsl_io_fault_countdown(mdsl_io *io, long n, int err, bool sticky);
/* Ops counted since creation (to size a countdown loop). */
long mdsl_io_fault_ops(mdsl_io *io);
/* Power-loss mode: remember unsynced writes so a crash can lose them. */
void mdsl_io_fault_powerloss(mdsl_io *io, bool on);
/* Simulate a power loss now: every unsynced write is kept, dropped (its
 * bytes revert) or corrupted (random bytes in it), at random; the files are
 * cut back to their synced size plus kept writes. Afterwards every op fails
 * with -EIO until mdsl_io_fault_reset(). Returns the number of writes lost
 * or corrupted. */
long mdsl_io_fault_crash(mdsl_io *io);
/* Clear the crashed state and the countdown (power-loss mode stays). */
void mdsl_io_fault_reset(mdsl_io *io);

#endif /* MDSL_IO_H */
