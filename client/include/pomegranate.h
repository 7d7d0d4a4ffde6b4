/*
 * pomegranate.h -- libpomegranate, the client library of Pomegranate
 * (docs/client.md): connect to a file-system instance and operate on
 * its namespace by inode number, the way FUSE's low-level API does.
 *
 * Conventions of every call:
 *  (1) Returns 0 (or a non-negative count) on success, a negative errno on
 *      failure. What the library does not implement yet answers -ENOTSUP;
 *      nothing unimplemented ever reports success.
 *  (2) An inode number (pom_ino) is the file's uuid; the root is
 *      POM_ROOT_INO. The library knows an inode only while it holds a
 *      *lookup reference* on it: every call documented "+1 ref" gives one
 *      (lookup, mknod, mkdir, symlink, create, link, readdir in plus mode), and
 *      pom_forget gives them back. A call on an inode the library does not
 *      know answers -ESTALE, except pom_lookup_ino and pom_lookup_parent,
 *      which find a directory by its number alone. The root is always
 *      known.
 *  (3) Names are NUL-terminated, 1..255 bytes, without '/': -ENAMETOOLONG,
 *      -EINVAL otherwise.
 *  (4) Permissions are not checked by the library except by pom_access,
 *      against the mode bits: pomfs mounts with `default_permissions` and
 *      POSIX ACLs, so the kernel checks them, ACLs included. The library
 *      keeps the stored ACLs right: a new entry inherits its directory's
 *      default ACL, a chmod changes the access ACL, setting the access ACL
 *      changes the mode (docs/client.md "POSIX ACLs").
 *  (5) Every handle is thread-safe; a pom_file may be used by several
 *      threads at once.
 *
 * Data of regular files up to POM_INLINE_MAX bytes lives in the file's row;
 * writes are buffered in the client from open to flush/release (shared by
 * every open handle of the inode in this process) and sent with the row
 * update. A file that grows past it moves to the blob tier (pom_set_blob;
 * pom_open takes it from the fs record): its bytes go straight to tracts,
 * its size and times with the row update at flush/release/fsync. Without
 * a blob tier, larger files answer -EFBIG. See docs/client.md.
 */
#ifndef POMEGRANATE_H
#define POMEGRANATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define POM_API __attribute__((visibility("default")))

typedef uint64_t pom_ino;
typedef struct pom_fs pom_fs;
typedef struct pom_file pom_file;

#define POM_ROOT_INO    1
#define POM_INLINE_MAX  (64u << 10)   /* bytes of a file kept in its row */
#define POM_SYMLINK_MAX 4095          /* bytes of a symlink target */
#define POM_FILE_MAX    (UINT64_C(1) << 44) /* bytes of a file (16 TiB): -EFBIG past it */
#define POM_BLKSIZE     4096u         /* st_blksize, statfs f_bsize: the unit of
                                         fallocate's collapse and insert ranges */

/* Who creates or asks: owner of new entries, subject of pom_access.
 * umask: the permission bits a new entry's mode loses, unless its
 * directory has a default ACL, whose entries mask the mode instead
 * (docs/client.md "POSIX ACLs"); 0: the mode as given. */
struct pom_cred {
    uint32_t uid, gid;
    uint32_t umask;
};

/* ---- connecting ------------------------------------------------------ */

/* Waiting (docs/client.md "Waiting"): a call whose MDS does not answer
 * (down, restarting, or itself waiting on a stopped MDSL) is retried with
 * the same request id. Hard (soft_ms 0, the default): for retry_ms, then
 * the transport error (-ETIMEDOUT, -ECONNREFUSED, ...). Soft: -EIO once a
 * call has waited soft_ms; a change it carried may still be applied, and a
 * later pom_fsync/pom_sync returns 0 only once it is committed. Either way
 * a call waiting over 10 s says so in the log (then every 60 s), naming
 * the MDS site, and says when it answers again. Fields are only ever added
 * at the end; zero means the default. */
struct pom_opts {
    int call_timeout_ms;  /* one RPC; 0: 10000 */
    int retry_ms;         /* keep retrying an unreachable MDS this long; 0: 30000 */
    int soft_ms;          /* > 0: soft, -EIO after this long waiting; 0: hard */
    const char *keyfile;  /* the key connections prove: a client key of the fs
                             (pomctl fs key) or the cluster key; NULL: none,
                             only an unauthenticated cluster is reachable.
                             A wrong key fails the open with -EKEYREJECTED, a
                             missing one with -ENOKEY (docs/security.md). */
    /* TLS (docs/security.md "TLS"): PEM files of the CA that signs the
     * cluster's certificates, and this client's certificate and key; all
     * three or none (NULL: plain TCP). The paths are read during the open
     * only: the caller keeps ownership. A TLS failure fails the open with
     * -EKEYREJECTED, a TLS cluster reached without them -EPROTONOSUPPORT. */
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
    /* "HOST:PORT" of this client's Prometheus /metrics (pomfs -o metrics=),
     * reported to R2 as the mount registers so `pomctl sites` and `pomctl
     * top` find it (docs/metrics.md); read during the open only. NULL: none. */
    const char *metrics_addr;
};

/* Connects to one MDS at "host:port" serving file system `fsid`; creates
 * the root directory if the file system has none yet. opts may be NULL.
 * *out: close with pom_close. -EINVAL (bad address), -ECONNREFUSED /
 * -ETIMEDOUT (MDS unreachable), -ENOMEM. */
POM_API int pom_connect_mds(const char *mds_addr, uint32_t fsid, pom_fs **out);
POM_API int pom_connect_mds_opts(const char *mds_addr, uint32_t fsid,
                                 const struct pom_opts *opts, pom_fs **out);

/* Opens file system `fsname` through R2 at r2_addrs ("host:port[,...]").
 * Asks R2 (addresses "host:port[,host:port...]") for the fs and an MDS, and
 * registers the mount with R2. -ENOENT: no such fs; -EHOSTUNREACH: no MDS up. */
POM_API int pom_open(const char *r2_addrs, const char *fsname, pom_fs **out);
/* pom_open with options (NULL: the defaults, as pom_open). */
POM_API int pom_open_opts(const char *r2_addrs, const char *fsname,
                          const struct pom_opts *opts, pom_fs **out);

/* Sets the blob tier of fs (large files), replacing the fs record's (pom_open).
 * backend "local" (NULL: local) with path = folders separated by ':' (the
 * tract locator table, docs/format-blob.md); "rados" with path =
 * "pool=P[,conf=FILE][,id=NAME][,keyring=FILE]" (a Ceph pool; docs/
 * format-blob.md "rados"); "mdsl" answers -ENOTSUP (not built). Call
 * before any file is opened. -EINVAL, -EBUSY (files open), -errno of
 * creating the folders or of connecting to Ceph. */
POM_API int pom_set_blob(pom_fs *fs, const char *backend, const char *path);

/* Starts fs's orphan tract-set reclaimer (docs/format-blob.md "Reclaiming
 * orphans"), a thread stopped by pom_close. Every min(interval_s,
 * grace_s / 4) seconds it renews the lease of the tract sets of files open
 * here (any process that writes large files into a blob tier other mounts
 * reclaim must run it, interval_s 0: lease only); every interval_s seconds
 * (0: never) it walks the namespace and removes the tract sets no row
 * names, untouched for grace_s seconds, that the previous pass found
 * orphan too (one reclaimer per blob tier at a time, a lock in it).
 * Call after pom_set_blob (or pom_open with a blob tier). -ENOENT: no
 * blob tier; -EINVAL (grace_s 0, or started already); -ENOMEM. */
POM_API int pom_reclaim_start(pom_fs *fs, unsigned interval_s, unsigned grace_s);

/* Called when a reply comes from a new incarnation of the MDS (it
 * restarted): changes its predecessor acknowledged but had not committed
 * may be gone, so a cache kept above the library (the kernel's names,
 * attributes and pages under FUSE) may show state that no longer exists.
 * The library itself reloads clean open-file buffers at their next open.
 * Runs on the thread whose call saw the new epoch, with no library lock
 * held: it must not block nor call into the library (pomfs wakes a thread
 * that invalidates the kernel's caches, using pom_inodes). */
typedef void (*pom_restart_fn)(void *arg);
POM_API void pom_set_restart_cb(pom_fs *fs, pom_restart_fn fn, void *arg);

/* Calls fn for each inode the library holds a reference on, with the
 * directory and name it was last found under (name valid during the call
 * only; parent is not a directory inode for names kept in internal
 * tables). Works on a snapshot: fn runs with no library lock held and may
 * call into the library. 0 or -ENOMEM. */
typedef void (*pom_inode_fn)(void *arg, pom_ino ino, pom_ino parent, const char *name);
POM_API int pom_inodes(pom_fs *fs, pom_inode_fn fn, void *arg);

/* Flushes nothing (open pom_files must be released first) and frees fs. */
POM_API void pom_close(pom_fs *fs);

/* Counters of what the library did (pomfs's /metrics, tests); they only grow. */
struct pom_fs_stats {
    uint64_t mds_rpcs;             /* MDS round trips of fs (every attempt) */
    uint64_t rpc_calls;            /* RPCs of every handle of the process (MDS, R2) */
    uint64_t rpc_errors;           /* of them, answered with an error or failed */
    uint64_t rpc_timeouts;
    uint64_t rpc_connects;         /* connections opened */
    uint64_t rpc_connect_failures;
    uint64_t blob_bytes_written;   /* through fs's blob tier (large files) */
    uint64_t blob_bytes_read;
};
POM_API void pom_get_stats(pom_fs *fs, struct pom_fs_stats *st);

/* The fsid of fs. */
POM_API uint32_t pom_fsid(const pom_fs *fs);

/* ---- inodes and names ------------------------------------------------ */

/* Finds `name` in directory `parent`; *st gets its attributes (st_ino is
 * the inode). +1 ref. -ENOENT, -ENOTDIR, -ENAMETOOLONG. "." and ".." are
 * parent itself and its parent as this client knows them (-ESTALE when it
 * does not: pom_lookup_ino and pom_lookup_parent find them by uuid). */
POM_API int pom_lookup(pom_fs *fs, pom_ino parent, const char *name, struct stat *st);

/* Finds inode ino by its number alone (FUSE export support: a file handle
 * that outlived its mount; docs/client.md "Lookup by uuid"); *st gets its
 * attributes. +1 ref. An inode the library knows is answered from where it
 * was found; any other is looked up in the global directory table (GDT),
 * which holds DIRECTORIES ONLY and follows a mkdir, rmdir or directory
 * rename about 1-2 s later: what it does not show (yet) is asked again for
 * up to 3 s before the answer is -ESTALE. -ESTALE: no such directory
 * (removed, never made, or not a directory); -EIO: a damaged GDT row. */
POM_API int pom_lookup_ino(pom_fs *fs, pom_ino ino, struct stat *st);

/* The parent of directory dir (the root's is the root), found as
 * pom_lookup_ino finds inodes: dir need not be known. *st gets the
 * parent's attributes; +1 ref on the parent (none on dir). -ENOTDIR,
 * -ESTALE, -EIO as pom_lookup_ino. */
POM_API int pom_lookup_parent(pom_fs *fs, pom_ino dir, struct stat *st);

/* Gives back n lookup references of ino. */
POM_API void pom_forget(pom_fs *fs, pom_ino ino, uint64_t n);

/* Attributes of a known inode. -ENOENT when it was removed meanwhile. */
POM_API int pom_getattr(pom_fs *fs, pom_ino ino, struct stat *st);

/* pom_setattr's `to_set` bits (the same values as FUSE_SET_ATTR_*). */
#define POM_SET_MODE      (1 << 0)
#define POM_SET_UID       (1 << 1)
#define POM_SET_GID       (1 << 2)
#define POM_SET_SIZE      (1 << 3)
#define POM_SET_ATIME     (1 << 4)
#define POM_SET_MTIME     (1 << 5)
#define POM_SET_ATIME_NOW (1 << 7)
#define POM_SET_MTIME_NOW (1 << 8)
#define POM_SET_CTIME     (1 << 10)
#define POM_SET_SUPPORTED 0x5bf

/* Changes the attributes named by to_set, taken from *in (st_mode's
 * permission bits, st_uid, st_gid, st_size, st_atim, st_mtim, st_ctim);
 * ctime becomes now unless POM_SET_CTIME gives it. *out (may be NULL)
 * gets the new attributes. A size on a non-regular file: -EISDIR/-EINVAL;
 * over POM_FILE_MAX (over POM_INLINE_MAX without a blob tier): -EFBIG;
 * unknown bits: -ENOTSUP. */
POM_API int pom_setattr(pom_fs *fs, pom_ino ino, const struct stat *in, int to_set,
                        struct stat *out);

/* Inode flags (chattr(1), FS_IOC_GETFLAGS/SETFLAGS), the FS_*_FL values of
 * linux/fs.h: FS_IMMUTABLE_FL (no change of bytes, attributes, xattrs or
 * names: -EPERM), FS_APPEND_FL (writes only at the end through O_APPEND,
 * no truncate, no removal, rename or link: -EPERM), FS_NODUMP_FL (kept,
 * for dump(8)) and FS_NOATIME_FL (kept; reads never change atime anyway).
 * Kept in the row of the inode. The caller checks who may set them (the
 * kernel asks CAP_LINUX_IMMUTABLE for the first two, ownership for all). */
#define POM_IFLAGS 0xf0u
POM_API int pom_getflags(pom_fs *fs, pom_ino ino, unsigned *flags);
/* Sets the inode flags to `flags` (others than POM_IFLAGS: -EOPNOTSUPP);
 * ctime becomes now. */
POM_API int pom_setflags(pom_fs *fs, pom_ino ino, unsigned flags);

/* Creates a regular file, fifo, socket or device node (S_IFMT of mode;
 * rdev for devices). +1 ref. -EEXIST, -ENOENT (parent gone), -ENOTDIR. */
POM_API int pom_mknod(pom_fs *fs, pom_ino parent, const char *name, mode_t mode,
                      dev_t rdev, const struct pom_cred *cred, struct stat *st);
/* +1 ref. */
POM_API int pom_mkdir(pom_fs *fs, pom_ino parent, const char *name, mode_t mode,
                      const struct pom_cred *cred, struct stat *st);
/* +1 ref. A target over POM_SYMLINK_MAX bytes: -ENAMETOOLONG. */
POM_API int pom_symlink(pom_fs *fs, pom_ino parent, const char *name, const char *target,
                        const struct pom_cred *cred, struct stat *st);
/* Copies the target (NUL-terminated when it fits) into buf; returns its
 * length. -EINVAL when ino is not a symlink, -ERANGE when cap <= length. */
POM_API ssize_t pom_readlink(pom_fs *fs, pom_ino ino, char *buf, size_t cap);

/* -EISDIR for a directory. */
POM_API int pom_unlink(pom_fs *fs, pom_ino parent, const char *name);
/* -ENOTDIR, -ENOTEMPTY, -EBUSY for the root. */
POM_API int pom_rmdir(pom_fs *fs, pom_ino parent, const char *name);

#define POM_RENAME_NOREPLACE (1 << 0)
#define POM_RENAME_EXCHANGE  (1 << 1)
/* renameat2(2) semantics (replacing an existing target of a compatible
 * type; -EISDIR, -ENOTDIR, -ENOTEMPTY, -EINVAL for a directory moved under
 * itself, -EEXIST with POM_RENAME_NOREPLACE). POM_RENAME_EXCHANGE swaps two
 * existing names (-ENOENT if one is missing; -EINVAL together with
 * NOREPLACE). Atomic: the names change together or not at all, also across
 * an MDS crash (docs/client.md "Hard links, rename, unlink, rmdir"). */
POM_API int pom_rename(pom_fs *fs, pom_ino parent, const char *name, pom_ino newparent,
                       const char *newname, unsigned flags);
/* renameat2(2) with RENAME_WHITEOUT: pom_rename (flags 0 or
 * POM_RENAME_NOREPLACE; POM_RENAME_EXCHANGE: -EINVAL) that leaves a
 * whiteout at the old name, in the same atomic change: a character device
 * 0:0 of mode S_IFCHR (no permission bits), as overlayfs expects, owned by
 * cred (NULL: the calling process; its umask is not used). The caller
 * checks the right to make device nodes (the kernel asks CAP_MKNOD). */
POM_API int pom_rename_whiteout(pom_fs *fs, pom_ino parent, const char *name,
                                pom_ino newparent, const char *newname, unsigned flags,
                                const struct pom_cred *cred);

/* link(2): a new name newname in newparent for the file ino (known).
 * *st gets its attributes (nlink counted). +1 ref. -EEXIST, -EPERM for a
 * directory, -ENOTDIR, -ESTALE. Atomic (docs/client.md "Hard links"). */
POM_API int pom_link(pom_fs *fs, pom_ino ino, pom_ino newparent, const char *newname,
                     struct stat *st);

/* access(2) against the attributes, for cred (no supplementary groups).
 * mask: F_OK or R_OK|W_OK|X_OK. -EACCES. */
POM_API int pom_access(pom_fs *fs, pom_ino ino, int mask, const struct pom_cred *cred);

/* ---- directories ----------------------------------------------------- */

#define POM_COOKIE_START 0
#define POM_COOKIE_END   (UINT64_C(1) << 62)  /* no entry has it; fits off_t */

/* Called for each entry: st has st_ino and st_mode (every attribute in plus
 * mode); `next` is the cookie to resume after this entry (always > the
 * cookie asked and < 2^62). Return 0 to take the entry and go on, 1 to
 * stop before it (the entry is not taken), < 0 to abort with that error. */
typedef int (*pom_dirent_fn)(void *arg, const char *name, const struct stat *st,
                             uint64_t next);

/* Lists directory ino from `cookie` (POM_COOKIE_START: the beginning) in
 * split-stable order: across calls no entry is returned twice or skipped,
 * whatever splits or other entries' changes happen meanwhile. `.` and `..`
 * are not listed. plus != 0: each taken entry gets +1 ref. Returns the
 * number of entries taken (0 at the end), or -errno. */
POM_API int pom_readdir(pom_fs *fs, pom_ino ino, uint64_t cookie, int plus,
                        pom_dirent_fn fn, void *arg);

/* The parent of a known directory (the root's is the root). */
POM_API int pom_parent(pom_fs *fs, pom_ino ino, pom_ino *parent);

/* ---- files ----------------------------------------------------------- */

/* Opens a regular file (flags: O_ACCMODE, O_TRUNC, O_APPEND honoured).
 * -EISDIR, -EINVAL for other types, -EFBIG for a file in the blob tier
 * when fs has none.
 * *out: give back with pom_release. */
POM_API int pom_file_open(pom_fs *fs, pom_ino ino, int flags, pom_file **out);
/* Creates and opens a regular file (O_EXCL honoured; without it an existing
 * regular file is opened). +1 ref. */
POM_API int pom_create(pom_fs *fs, pom_ino parent, const char *name, mode_t mode, int flags,
                       const struct pom_cred *cred, struct stat *st, pom_file **out);
/* Returns the bytes read (0 at or past the end). */
POM_API ssize_t pom_read(pom_file *f, void *buf, size_t n, off_t off);
/* Returns the bytes written (short only at POM_FILE_MAX, or at
 * POM_INLINE_MAX without a blob tier), -EFBIG when nothing fits, -EBADF on
 * a read-only handle, -EIO/-ENOSPC from the blob tier. */
POM_API ssize_t pom_write(pom_file *f, const void *buf, size_t n, off_t off);
/* fallocate(2) modes 0 (allocate, extending the size), FALLOC_FL_KEEP_SIZE,
 * FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE, FALLOC_FL_ZERO_RANGE (with or
 * without KEEP_SIZE), FALLOC_FL_COLLAPSE_RANGE and FALLOC_FL_INSERT_RANGE
 * (alone; offset and length multiples of POM_BLKSIZE, the range inside the
 * file, else -EINVAL); others -EOPNOTSUPP. Allocation past POM_INLINE_MAX
 * moves the file to the blob tier; collapse and insert rewrite a blob file
 * into a new set of tracts (the old one stays until the row naming the new
 * one is committed). A failed call changes nothing it allocated. */
POM_API int pom_fallocate(pom_file *f, int mode, off_t off, off_t len);
/* 1 when this open found the file as this client last saw it (same size
 * and mtime as at its previous open or flush here), so cached pages of it
 * are still right (FUSE keep_cache); 0 otherwise. */
POM_API int pom_file_unchanged(const pom_file *f);
/* Lost changes (docs/client.md "Lost changes"): when an MDS restarts (or
 * fails) before committing changes it acknowledged, the handles covering
 * them answer -EIO once each at their next fsync, close or sync: every
 * pom_file of a file whose changes were lost (including one opened later,
 * while nobody was told yet), every pom_dir of a directory whose entries
 * were, every pom_kv of a keyspace, and pom_sync once per loss. */

/* Sends buffered changes to the MDS (with the row update). -EIO (a handle
 * open for writing): lost changes of the file, said once. */
POM_API int pom_flush(pom_file *f);
/* Flushes, then waits until the MDS committed them. 0: every change of
 * the file this client made before the call (bytes, attributes, names) is
 * committed. -EIO: some were lost by an MDS restart (said once per
 * handle). */
POM_API int pom_fsync(pom_file *f, int datasync);
/* Flushes and frees the handle (always frees; returns the flush's error,
 * or -EIO as pom_flush). */
POM_API int pom_release(pom_file *f);
/* The inode of an open file. */
POM_API pom_ino pom_file_ino(const pom_file *f);

/* Waits until everything this client sent is committed (syncfs). -EIO
 * once for each MDS restart that lost changes since its last -EIO. */
POM_API int pom_sync(pom_fs *fs);

/* A directory handle: what fsync of a directory reports. pom_opendir takes
 * a reference on dir (given back by pom_releasedir). -ESTALE, -ENOTDIR. */
typedef struct pom_dir pom_dir;
POM_API int pom_opendir(pom_fs *fs, pom_ino dir, pom_dir **out);
/* Waits until everything this client sent is committed. 0: every change
 * of the directory's entries (names made, removed, renamed, linked) this
 * client made before the call is committed; -EIO: some were lost by an
 * MDS restart (said once per handle). */
POM_API int pom_fsyncdir(pom_dir *d);
POM_API void pom_releasedir(pom_dir *d);

/* File-system statistics (no capacity accounting yet: fixed large values,
 * see docs/client.md). */
POM_API int pom_statfs(pom_fs *fs, struct statvfs *sv);

/* ---- extended attributes (namespaces user., trusted., security., and
 *      the POSIX ACLs system.posix_acl_access and system.posix_acl_default;
 *      others: -ENOTSUP) ------------------------------------------------ */

/* flags: 0, XATTR_CREATE (-EEXIST), XATTR_REPLACE (-ENODATA); both together
 * or any other bit: -EINVAL. Names over
 * 255 bytes or values over 64 KiB: -ERANGE / -E2BIG. An ACL in the Linux
 * xattr format (version 2, valid entries; else -EINVAL; a default ACL on
 * a non-directory: -EACCES); the access ACL sets the mode's permission
 * bits too, and is not stored when the mode says all of it. */
POM_API int pom_setxattr(pom_fs *fs, pom_ino ino, const char *name, const void *value,
                         size_t size, int flags);
/* size 0: returns the value's size; else copies it, -ERANGE when it does
 * not fit. -ENODATA. */
POM_API ssize_t pom_getxattr(pom_fs *fs, pom_ino ino, const char *name, void *buf,
                             size_t size);
/* listxattr(2) output ("name\0name\0..."); size 0: the size needed. */
POM_API ssize_t pom_listxattr(pom_fs *fs, pom_ino ino, char *buf, size_t size);
POM_API int pom_removexattr(pom_fs *fs, pom_ino ino, const char *name);

/* ---- key/value API (docs/client.md "Key/value API") ------------------- *
 * A keyspace is a table of its own, outside the namespace: no directory
 * lists it and no path reaches it. Keys are any bytes, 1..POM_KV_KEY_MAX
 * long (empty: -EINVAL, longer: -ENAMETOOLONG), except that a key may not
 * start with the bytes 00 FF (-EINVAL: reserved for the MDS's system rows,
 * docs/client.md); values 0..POM_KV_VALUE_MAX
 * bytes (-EFBIG). Every key has a version: 0 when created, +1 per change.
 * A change is applied when the call returns and durable after pom_sync
 * (or at once with POM_KV_SYNC). */

typedef struct pom_kv pom_kv;

#define POM_KV_KEY_MAX      1024
#define POM_KV_VALUE_MAX    (1u << 20)
#define POM_KV_KEYSPACE_MAX 200           /* bytes of a keyspace name */
#define POM_KV_ANY_VERSION  UINT64_MAX    /* update/delete whatever the version */

/* pom_kv_put flags. */
#define POM_KV_CREATE_ONLY  (1u << 0)     /* -EEXIST when the key exists */
#define POM_KV_SYNC         (1u << 1)     /* return once the change is durable */

/* A resumable position in a keyspace: start with POM_KV_CURSOR_INIT; a
 * cursor may be copied, kept and resumed later, even after other keys
 * changed or the table split (split-stable order: no key twice, none
 * skipped that existed all along). */
typedef struct pom_kv_cursor {
    uint64_t pos;  /* opaque */
} pom_kv_cursor;
#define POM_KV_CURSOR_INIT { 0 }

/* Opens (creating if absent) the keyspace `keyspace` (NUL-terminated,
 * 1..POM_KV_KEYSPACE_MAX bytes: -EINVAL / -ENAMETOOLONG) of fs. Every
 * client opening the same name gets the same keyspace. *out: close with
 * pom_kv_close before pom_close(fs). */
POM_API int pom_kv_open(pom_fs *fs, const char *keyspace, pom_kv **out);
POM_API void pom_kv_close(pom_kv *kv);

/* Sets key to the value (upsert). flags: POM_KV_CREATE_ONLY (-EEXIST when
 * present), POM_KV_SYNC (-EIO: as pom_kv_sync); others: -EINVAL. val may be
 * NULL when vlen is 0. */
POM_API int pom_kv_put(pom_kv *kv, const void *key, size_t klen, const void *val, size_t vlen,
                       unsigned flags);

/* The value of key: *val a new buffer of *vlen bytes (never NULL on
 * success; free with pom_free); *version (may be NULL) its version.
 * -ENOENT. */
POM_API int pom_kv_get(pom_kv *kv, const void *key, size_t klen, void **val, size_t *vlen,
                       uint64_t *version);

/* Replaces the value of an existing key, if its version is if_version
 * (POM_KV_ANY_VERSION: any). -ENOENT, -ESTALE (another version). */
POM_API int pom_kv_update(pom_kv *kv, const void *key, size_t klen, const void *val,
                          size_t vlen, uint64_t if_version);

/* Removes key, if its version is if_version (POM_KV_ANY_VERSION: any).
 * -ENOENT, -ESTALE. */
POM_API int pom_kv_delete(pom_kv *kv, const void *key, size_t klen, uint64_t if_version);

/* Called for each entry of a listing (pointers valid during the call).
 * Return 0 to take the entry and go on, 1 to stop before it (not taken:
 * the cursor stays on it), < 0 to abort with that error. */
typedef int (*pom_kv_cb)(void *arg, const void *key, size_t klen, const void *val,
                         size_t vlen, uint64_t version);

/* Lists up to max entries from *cur in split-stable order (no key order),
 * advancing *cur past each entry taken. Returns the number taken; the end
 * of the keyspace is reached when pom_kv_cursor_done(cur). */
POM_API int pom_kv_list(pom_kv *kv, pom_kv_cursor *cur, size_t max, pom_kv_cb cb, void *arg);

/* As pom_kv_list, but only keys containing substr[0..slen) (slen >= 1,
 * else -EINVAL). The predicate runs at the MDS: only matches travel. */
POM_API int pom_kv_search(pom_kv *kv, const void *substr, size_t slen, pom_kv_cursor *cur,
                          size_t max, pom_kv_cb cb, void *arg);

/* Whether a listing from cur has reached the end. */
POM_API int pom_kv_cursor_done(const pom_kv_cursor *cur);

/* What listings of kv brought over the wire so far (for tests/tuning). */
struct pom_kv_stats {
    uint64_t list_calls;     /* list RPCs */
    uint64_t rows_received;  /* rows in their replies */
    uint64_t bytes_received; /* bytes of those rows' encodings */
};
POM_API void pom_kv_get_stats(pom_kv *kv, struct pom_kv_stats *st);

/* Waits until every change this client made is committed. 0: every
 * change of the keyspace made through any handle before the call is;
 * -EIO: some were lost by an MDS restart (said once per handle, as a
 * POM_KV_SYNC put also says it, its own value committed). */
POM_API int pom_kv_sync(pom_kv *kv);

/* ---- key/value batches (docs/client.md "Key/value batches") ----------- *
 * Many puts, gets and deletes in about one round trip: pom_kv_batch_submit
 * groups the operations by the MDS that owns each key and sends one RPC per
 * MDS (all MDS at once), then each operation has its own result, as if it
 * had been called alone (an -ENOENT get fails nothing else). Operations of
 * one key apply in the order they were added; operations on different keys
 * are not atomic together and may apply in any order. Durability is the
 * single calls': applied when submit returns, durable after pom_kv_sync
 * (or, per put, POM_KV_SYNC). A batch is used by one thread at a time. */

typedef struct pom_kv_batch pom_kv_batch;

#define POM_KV_BATCH_MAX    4096          /* operations in one batch */
#define POM_KV_BATCH_BYTES  (64u << 20)   /* bytes of keys and values in one batch */

/* A new empty batch on kv (which must outlive it). Free with
 * pom_kv_batch_free. -EINVAL, -ENOMEM. */
POM_API int pom_kv_batch_new(pom_kv *kv, pom_kv_batch **out);
POM_API void pom_kv_batch_free(pom_kv_batch *b);
/* Empties b (results included) for the next operations. */
POM_API void pom_kv_batch_reset(pom_kv_batch *b);

/* Adds operation number pom_kv_batch_count(b) - 1 after the call: a put
 * (flags as pom_kv_put), a get, a delete (if_version as pom_kv_delete).
 * key and val are borrowed until submit returns: not copied. Bad input is
 * refused here with pom_kv_put's errors and nothing is added; -E2BIG past
 * POM_KV_BATCH_MAX operations or POM_KV_BATCH_BYTES; -EBUSY once submitted
 * (pom_kv_batch_reset first). */
POM_API int pom_kv_batch_put(pom_kv_batch *b, const void *key, size_t klen, const void *val,
                             size_t vlen, unsigned flags);
POM_API int pom_kv_batch_get(pom_kv_batch *b, const void *key, size_t klen);
POM_API int pom_kv_batch_delete(pom_kv_batch *b, const void *key, size_t klen,
                                uint64_t if_version);
/* Operations added so far. */
POM_API size_t pom_kv_batch_count(const pom_kv_batch *b);

/* Applies every operation; returns 0 when each has its own result (read
 * them with pom_kv_batch_result), or -ENOMEM (nothing sent), -EBUSY
 * (submitted already). */
POM_API int pom_kv_batch_submit(pom_kv_batch *b);

/* The result of operation i: 0 or its -errno, as the single call's. For
 * a get that found its key, *val (may be NULL) points at the value's *vlen
 * bytes, valid until b is reset or freed, and *version (may be NULL) gets
 * its version. -ERANGE: no operation i; -EBUSY: not submitted yet. */
POM_API int pom_kv_batch_result(const pom_kv_batch *b, size_t i, const void **val,
                                size_t *vlen, uint64_t *version);

/* Frees a buffer the library handed out (pom_kv_get's value). */
POM_API void pom_free(void *p);

#ifdef __cplusplus
}
#endif
#endif /* POMEGRANATE_H */
