/*
 * pom_blob.h -- the blob tier of libpomegranate (docs/format-blob.md): the
 * bytes of a file that grew out of its row, kept as tracts of tract_size
 * bytes named (fsid, uuid, tract#). One C interface over backends (an ops
 * table): `local` (folders on host file systems) and `rados` (objects in a
 * Ceph pool) are built; `mdsl` answers -ENOTSUP at pom_blob_open. Format:
 * docs/format-blob.md.
 *
 * The store knows nothing of rows or sizes: a file is a sparse array of
 * bytes. It knows which tracts of a set were written: a tract never
 * written (or dropped since: truncate, punch) and the part of a tract
 * past its end read as zeros; a tract written but not found, or any tract
 * of a set the store has no record of (pom_blob_create), answers -EIO,
 * never zeros. The size of a file is its row's business (client/pom_file.c).
 *
 * Invariants:
 *  (1) Placement is computed, never stored: on local, tract t of file u
 *      lives in folder locator[(pom_blob_hash(u) + t) mod rows] where the
 *      locator table is the configured folder list (one row per folder, in
 *      the order given). The list and tract_size are therefore part of the
 *      format: changing them moves data (not supported). On rados, CRUSH
 *      places the object named (fsid, u, t).
 *  (2) Every open pom_blob_file of one uuid is the same object (refcounted
 *      in the store), so its cached fds and its list of written, not yet
 *      fsynced tracts are shared by every user of the file in a process.
 *  (3) pom_blob_fsync makes every tract written through the file since
 *      the last fsync durable (data, and the directory entries of new
 *      tract files) before it returns 0. After it failed once, every
 *      change and fsync of that open file answers the same error until all
 *      its users closed it (the host may have dropped the unwritten pages).
 *  (4) Every call returns 0 / a byte count or -errno; an I/O error never
 *      leaves a wrong byte readable: a failed write may have written a
 *      prefix of its range (as pwrite(2)), nothing elsewhere.
 *  (5) EIO never zeros: a read answers zeros only for a tract the set's
 *      record says was never written (or was dropped); a tract the record
 *      says was written and that cannot be read, and every tract of a set
 *      without a record, answer -EIO.
 */
#ifndef POM_BLOB_H
#define POM_BLOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define POM_BLOB_TRACT_SIZE  (UINT64_C(4) << 20)   /* default tract_size */
#define POM_BLOB_FOLDERS_MAX 64                    /* rows of the locator table */
/* Largest file: 2^44 bytes (16 TiB) = 2^22 tracts of 4 MiB. Tract numbers
 * then fit 32 bits and every offset fits off_t with room to spare. */
#define POM_BLOB_FILE_MAX    (UINT64_C(1) << 44)

typedef struct pom_blob pom_blob;            /* a store for one fs */
typedef struct pom_blob_file pom_blob_file;  /* one file's tracts, shared */

struct xt_view;
struct xt_rpc_pool_opts;
struct pom_blob_conf {
    const char *backend;   /* "local" (NULL: local), "mdsl", "rados" */
    const char *path;      /* local: folders separated by ':' (1..POM_BLOB_FOLDERS_MAX);
                              mdsl: "" or "copies=N" (default min(3, MDSL in ring 1));
                              rados: "pool=P[,conf=FILE][,id=NAME][,keyring=FILE]" */
    uint32_t fsid;
    uint64_t tract_size;   /* 0: POM_BLOB_TRACT_SIZE; else a power of two, 64 KiB..1 GiB */
    /* mdsl: the cluster's view (its MDSL sites and ring 1) and how to reach
     * a site (credential, TLS, timeouts; host and port are the backend's).
     * Both borrowed during pom_blob_open only. */
    const struct xt_view *view;
    const struct xt_rpc_pool_opts *pool;
};

/* Opens the store: local creates each folder's fsid subfolder and checks
 * it is writable; rados connects to the cluster and opens the pool.
 * *out: close with pom_blob_close. -EINVAL (bad conf), -ENOTSUP (backend
 * not built; says so in the log), -errno of mkdir or of librados. */
int pom_blob_open(const struct pom_blob_conf *conf, pom_blob **out);
/* REQUIRES: every pom_blob_file of b closed. b may be NULL. */
void pom_blob_close(pom_blob *b);
uint64_t pom_blob_tract_size(const pom_blob *b);

/* The placement hash of a uuid (invariant (1)). */
uint64_t pom_blob_hash(uint64_t uuid);

/* Opens (or shares, invariant (2)) file uuid of b. Creates nothing on
 * disk. *out: give back with pom_blob_file_close. -ENOMEM. */
int pom_blob_file_open(pom_blob *b, uint64_t uuid, pom_blob_file **out);
/* Gives back one reference; the last closes the cached fds (written
 * tracts that were not fsynced stay written, not durable). f may be NULL. */
void pom_blob_file_close(pom_blob_file *f);

/* Bytes pom_blob_pwrite wrote and pom_blob_pread read through b so far. */
void pom_blob_counters(pom_blob *b, uint64_t *written, uint64_t *read);
/* Adds the statvfs of the tier's folders to *size and *avail (bytes; avail:
 * free to unprivileged writers), each disk (st_dev) once and none of
 * skip[0..nskip) (disks counted elsewhere). A folder it cannot stat adds
 * nothing. */
void pom_blob_space(pom_blob *b, const uint64_t *skip, size_t nskip, uint64_t *size,
                    uint64_t *avail);

/* Reads n bytes at off; holes read as zeros, a tract written but not
 * readable -EIO (invariant (5)). Returns n or -errno.
 * REQUIRES: off + n <= POM_BLOB_FILE_MAX. */
ssize_t pom_blob_pread(pom_blob_file *f, void *buf, size_t n, uint64_t off);
/* Writes n bytes at off, creating tract files as needed. Returns n or
 * -errno (-EFBIG past POM_BLOB_FILE_MAX, -ENOSPC, -EIO, ...). */
ssize_t pom_blob_pwrite(pom_blob_file *f, const void *buf, size_t n, uint64_t off);
/* Drops every byte at or past size: later tracts are removed, the tract
 * holding `size` is cut there. 0 or -errno. */
int pom_blob_truncate(pom_blob_file *f, uint64_t size);
/* Makes [off, off+len) a hole: whole tracts are removed, partial ones get
 * the range deallocated (FALLOC_FL_PUNCH_HOLE) and read as zeros. */
int pom_blob_punch(pom_blob_file *f, uint64_t off, uint64_t len);
/* Reserves space for [off, off+len) (fallocate KEEP_SIZE on the tracts):
 * later writes there do not fail with -ENOSPC. Reads still give zeros. */
int pom_blob_allocate(pom_blob_file *f, uint64_t off, uint64_t len);
/* Records f's set as existing, holding no tract yet (idempotent; a write
 * records it too): from now on a tract never written reads as zeros,
 * where a set without a record answers -EIO (invariant (5)). Durable at
 * the next pom_blob_fsync. 0 or -errno. */
int pom_blob_create(pom_blob_file *f);
/* Invariant (3). */
int pom_blob_fsync(pom_blob_file *f);
/* Close-to-open: hands the store what f keeps in memory (mdsl: its cached
 * tract and map), so an open after the application's close, here or on
 * another host, reads every byte written before it; durable only as the
 * backend's writes are (mdsl: yes; local: the page cache, nothing kept).
 * 0 or -errno. */
int pom_blob_flush(pom_blob_file *f);

/* Removes every tract of uuid (in every folder). Missing ones are fine.
 * REQUIRES: uuid is not open in b. 0 or the first -errno met. */
int pom_blob_delete(pom_blob *b, uint64_t uuid);
/* Whether uuid is open in b (a handle of its file may still write it). */
bool pom_blob_is_open(pom_blob *b, uint64_t uuid);

struct pom_blob_stat {
    uint64_t tracts;       /* tract files present */
    uint64_t alloc_bytes;  /* bytes the host allocated for them */
};
/* Counts the tracts of uuid. 0 or -errno. */
int pom_blob_stat(pom_blob *b, uint64_t uuid, struct pom_blob_stat *st);

/* One tract set found by pom_blob_list: every tract of `id` in every
 * folder of the locator table, merged (mdsl: over every MDSL, so the
 * counts and bytes are summed over the copies, the set's map included). */
struct pom_blob_set {
    uint64_t id;           /* the tracts id (a uuid, or a rewrite's id) */
    uint64_t tracts;       /* tract files present (0: an empty id folder) */
    uint64_t bytes;        /* sum of their lengths (holes included) */
    uint64_t alloc_bytes;  /* bytes the host allocated for them */
    int64_t mtime_ns;      /* newest mtime of its tract files and folders */
};
/* Calls fn once per tract set of the store's fsid, in increasing id
 * order, with a set that is valid during the call only. Walks every folder
 * of the locator table (fsid folder, both hash levels, id folders); an id
 * folder under hash folders that do not match its id is not a set of this
 * store (pom_blob_delete could not reach it): skipped, logged. fn must not
 * change the store (collect ids, delete after). Holds every set's entry in
 * memory (~48 bytes each, per folder it is striped over) before the first
 * call. Returns 0, fn's first non-zero return (the walk stops), -ENOMEM,
 * or the -errno of a folder that could not be read. */
typedef int (*pom_blob_list_fn)(void *arg, const struct pom_blob_set *set);
int pom_blob_list(pom_blob *b, pom_blob_list_fn fn, void *arg);
/* A new view of the cluster (the R2 agent's): the mdsl backend places by
 * its ring 1 from then on and still reads from the ring before it
 * (docs/format-blob.md "mdsl" "Ring-1 changes"); other backends ignore it.
 * v is borrowed for the call. b may be NULL. */
void pom_blob_view(pom_blob *b, const struct xt_view *v);

/* Marks the set `id` as in use now: its age (pom_blob_set.mtime_ns) starts
 * again. The lease of a set a live client holds while no row names it
 * (a migration not flushed yet, an unlinked file still open): the
 * reclaimer (pom_reclaim.c) never removes a set younger than its grace
 * age. A set with no tract yet is fine (0). 0 or -errno. */
int pom_blob_touch(pom_blob *b, uint64_t id);
/* The store's reclaimer lock, taken without waiting, so one reclaimer at
 * a time walks a store that several mounts share (local: flock on
 * "<first folder>/<fsid>/reclaim.lock"; held until pom_blob_reclaim_unlock
 * or the process ends; mdsl: none, always taken). 1: taken, *token for the unlock; 0: another
 * holder has it; -errno. */
int pom_blob_reclaim_lock(pom_blob *b, int *token);
void pom_blob_reclaim_unlock(pom_blob *b, int token);

/* Test hook: the n-th backend I/O call from now (n >= 1; open, pread,
 * pwrite, ftruncate, fallocate, fsync, unlink) fails with -err; n = 0 turns
 * it off. The local backend only (rados ignores it). */
void pom_blob_fault_after(pom_blob *b, uint64_t n, int err);

#endif /* POM_BLOB_H */
