"""The C side of the binding: libpomegranate's declarations for cffi (ABI
mode: no compiler at install time, the library is dlopen()ed), finding the
library, and turning its negative errno returns into OSError.

Invariants:
 (1) The declarations below are copied from client/include/pomegranate.h;
     only what the Python layer calls is declared. struct stat and struct
     statvfs are spelled out per machine (ABI mode cannot ask the
     compiler), and their sizes are checked against the platform's.
 (2) The library is loaded once per process, on first use (import works
     without it, so `import pomegranate` never fails for want of a .so).
 (3) Every call returning a negative errno goes through check(), which
     raises OSError(errno, strerror[, filename]); Python maps ENOENT to
     FileNotFoundError, EEXIST to FileExistsError and so on.
"""

import ctypes.util
import os
import platform
import shutil
import subprocess
import threading

import cffi

_COMMON_CDEF = """
typedef uint32_t mode_t;   /* glibc on 64-bit Linux */
typedef int64_t off_t;
typedef uint64_t pom_ino;
typedef struct pom_fs pom_fs;
typedef struct pom_file pom_file;
typedef struct pom_kv pom_kv;

struct pom_cred { uint32_t uid, gid; uint32_t umask; };
struct pom_opts {
    int call_timeout_ms;
    int retry_ms;
    int soft_ms;
    const char *keyfile;
    const char *tls_ca;
    const char *tls_cert;
    const char *tls_key;
    const char *metrics_addr;
};

int pom_connect_mds_opts(const char *mds_addr, uint32_t fsid,
                         const struct pom_opts *opts, pom_fs **out);
int pom_open_opts(const char *r2_addrs, const char *fsname,
                  const struct pom_opts *opts, pom_fs **out);
int pom_set_blob(pom_fs *fs, const char *backend, const char *path);
void pom_close(pom_fs *fs);
uint32_t pom_fsid(const pom_fs *fs);

int pom_lookup(pom_fs *fs, pom_ino parent, const char *name, struct stat *st);
void pom_forget(pom_fs *fs, pom_ino ino, uint64_t n);
int pom_getattr(pom_fs *fs, pom_ino ino, struct stat *st);
int pom_setattr(pom_fs *fs, pom_ino ino, const struct stat *in, int to_set,
                struct stat *out);
int pom_mkdir(pom_fs *fs, pom_ino parent, const char *name, mode_t mode,
              const struct pom_cred *cred, struct stat *st);
int pom_unlink(pom_fs *fs, pom_ino parent, const char *name);
int pom_rmdir(pom_fs *fs, pom_ino parent, const char *name);
int pom_rename(pom_fs *fs, pom_ino parent, const char *name, pom_ino newparent,
               const char *newname, unsigned flags);

typedef int (*pom_dirent_fn)(void *arg, const char *name, const struct stat *st,
                             uint64_t next);
int pom_readdir(pom_fs *fs, pom_ino ino, uint64_t cookie, int plus,
                pom_dirent_fn fn, void *arg);

int pom_file_open(pom_fs *fs, pom_ino ino, int flags, pom_file **out);
int pom_create(pom_fs *fs, pom_ino parent, const char *name, mode_t mode, int flags,
               const struct pom_cred *cred, struct stat *st, pom_file **out);
ssize_t pom_read(pom_file *f, void *buf, size_t n, off_t off);
ssize_t pom_write(pom_file *f, const void *buf, size_t n, off_t off);
int pom_flush(pom_file *f);
int pom_fsync(pom_file *f, int datasync);
int pom_release(pom_file *f);
pom_ino pom_file_ino(const pom_file *f);
int pom_sync(pom_fs *fs);
int pom_statfs(pom_fs *fs, struct statvfs *sv);

typedef struct pom_kv_cursor { uint64_t pos; } pom_kv_cursor;
typedef int (*pom_kv_cb)(void *arg, const void *key, size_t klen, const void *val,
                         size_t vlen, uint64_t version);
struct pom_kv_stats {
    uint64_t list_calls;
    uint64_t rows_received;
    uint64_t bytes_received;
};
int pom_kv_open(pom_fs *fs, const char *keyspace, pom_kv **out);
void pom_kv_close(pom_kv *kv);
int pom_kv_put(pom_kv *kv, const void *key, size_t klen, const void *val, size_t vlen,
               unsigned flags);
int pom_kv_get(pom_kv *kv, const void *key, size_t klen, void **val, size_t *vlen,
               uint64_t *version);
int pom_kv_update(pom_kv *kv, const void *key, size_t klen, const void *val,
                  size_t vlen, uint64_t if_version);
int pom_kv_delete(pom_kv *kv, const void *key, size_t klen, uint64_t if_version);
int pom_kv_list(pom_kv *kv, pom_kv_cursor *cur, size_t max, pom_kv_cb cb, void *arg);
int pom_kv_search(pom_kv *kv, const void *substr, size_t slen, pom_kv_cursor *cur,
                  size_t max, pom_kv_cb cb, void *arg);
int pom_kv_cursor_done(const pom_kv_cursor *cur);
void pom_kv_get_stats(pom_kv *kv, struct pom_kv_stats *st);
int pom_kv_sync(pom_kv *kv);
typedef struct pom_kv_batch pom_kv_batch;
int pom_kv_batch_new(pom_kv *kv, pom_kv_batch **out);
void pom_kv_batch_free(pom_kv_batch *b);
int pom_kv_batch_put(pom_kv_batch *b, const void *key, size_t klen, const void *val,
                     size_t vlen, unsigned flags);
int pom_kv_batch_get(pom_kv_batch *b, const void *key, size_t klen);
int pom_kv_batch_delete(pom_kv_batch *b, const void *key, size_t klen, uint64_t if_version);
int pom_kv_batch_submit(pom_kv_batch *b);
int pom_kv_batch_result(const pom_kv_batch *b, size_t i, const void **val, size_t *vlen,
                        uint64_t *version);
void pom_free(void *p);
"""

# glibc's layouts (ABI mode cannot ask the compiler). statvfs is the same on
# every 64-bit Linux; stat differs between x86_64 and the generic layout.
_STATVFS_CDEF = """
struct statvfs {
    unsigned long f_bsize, f_frsize;
    uint64_t f_blocks, f_bfree, f_bavail, f_files, f_ffree, f_favail;
    unsigned long f_fsid, f_flag, f_namemax;
    int __f_spare[6];
};
"""
_STAT_CDEF = {
    "x86_64": ("""
struct timespec { long tv_sec; long tv_nsec; };
struct stat {
    uint64_t st_dev; uint64_t st_ino; uint64_t st_nlink;
    uint32_t st_mode; uint32_t st_uid; uint32_t st_gid; int __pad0;
    uint64_t st_rdev; int64_t st_size; int64_t st_blksize; int64_t st_blocks;
    struct timespec st_atim, st_mtim, st_ctim;
    long __unused[3];
};
""", 144),
    "aarch64": ("""
struct timespec { long tv_sec; long tv_nsec; };
struct stat {
    uint64_t st_dev; uint64_t st_ino;
    uint32_t st_mode; uint32_t st_nlink; uint32_t st_uid; uint32_t st_gid;
    uint64_t st_rdev; uint64_t __pad1; int64_t st_size;
    int32_t st_blksize; int __pad2; int64_t st_blocks;
    struct timespec st_atim, st_mtim, st_ctim;
    int __unused[2];
};
""", 128),
}

ffi = cffi.FFI()
_machine = platform.machine()
if _machine not in _STAT_CDEF:
    raise ImportError(f"pomegranate: struct stat of {_machine} is not known to the binding")
ffi.cdef(_STAT_CDEF[_machine][0] + _STATVFS_CDEF + _COMMON_CDEF)
assert ffi.sizeof("struct stat") == _STAT_CDEF[_machine][1]
assert ffi.sizeof("struct statvfs") == 112

SONAME = "libpomegranate.so.0"
_lib = None
_lib_path = None
_lib_mu = threading.Lock()


def _pkgconfig_libdir():
    """The libdir of an installed pomegranate.pc, or None."""
    if shutil.which("pkg-config") is None:
        return None
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "pomegranate"],
                             capture_output=True, text=True, timeout=10)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def _candidates(path):
    if path:
        yield path
        return
    env = os.environ.get("POMEGRANATE_LIB")
    if env:
        yield env
        return
    libdir = _pkgconfig_libdir()
    if libdir:
        yield os.path.join(libdir, SONAME)
    found = ctypes.util.find_library("pomegranate")
    if found:
        yield found
    yield SONAME  # the dynamic loader's own search (ld.so.cache, LD_LIBRARY_PATH)


def load_library(path=None):
    """Loads libpomegranate (once per process) and returns its cffi handle.

    Where from, in order: `path`; the POMEGRANATE_LIB environment variable;
    the libdir of the pkg-config file `pomegranate`; ctypes.util.find_library;
    the dynamic loader's search for libpomegranate.so.0. A second call with
    another path than the loaded one raises ValueError.
    """
    global _lib, _lib_path
    with _lib_mu:
        if _lib is not None:
            if path and os.path.realpath(path) != os.path.realpath(_lib_path):
                raise ValueError(f"libpomegranate is already loaded from {_lib_path}")
            return _lib
        tried = []
        for cand in _candidates(path):
            try:
                _lib = ffi.dlopen(cand)
            except OSError as e:
                tried.append(f"{cand}: {e}")
                continue
            _lib_path = cand
            return _lib
        raise OSError("cannot load libpomegranate (set POMEGRANATE_LIB or install it: "
                      "cmake --install build); tried: " + "; ".join(tried))


def library_path():
    """Where the loaded library came from (None before the first use)."""
    return _lib_path


def check(rc, filename=None):
    """Returns rc when it is >= 0; raises OSError(-rc, strerror) otherwise."""
    if rc < 0:
        if filename is None:
            raise OSError(-rc, os.strerror(-rc))
        raise OSError(-rc, os.strerror(-rc), filename)
    return rc


class Handle:
    """An object owning one library handle in self._h (None once closed):
    a context manager, closed when collected; close() is the subclass's."""

    _h = None

    @property
    def closed(self):
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
