"""FileSystem and File: an open file system (pom_fs) with path-based
calls in the style of the os module, and regular files as io raw streams.

Invariants:
 (1) Each object owns one library handle (pom_fs, pom_file); close()
     takes it out before freeing it, so it is freed exactly once, and a
     closed object raises ValueError rather than touching freed memory.
 (2) A FileSystem closes the KeySpaces and Files still open on it before
     pom_close (the library requires it); they hold it strongly, it holds
     them weakly, so garbage collection also frees children first.
 (3) Paths are resolved from the root one name at a time with pom_lookup;
     every lookup reference taken is given back (pom_forget) before the
     call returns, except the one an open File keeps until its close.
     Symbolic links in paths are not followed.
"""

import errno
import io
import os
import weakref
from collections import namedtuple

from ._kv import KeySpace
from ._native import Handle, check, ffi, load_library

ROOT_INO = 1
_SET_SIZE = 1 << 3
_RENAME_NOREPLACE = 1 << 0
_RENAME_EXCHANGE = 1 << 1


def _stat_result(st):
    times = [st.st_atim, st.st_mtim, st.st_ctim]
    ns = [t.tv_sec * 10**9 + t.tv_nsec for t in times]
    return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid,
                           st.st_gid, st.st_size, *[t.tv_sec for t in times],
                           *[n / 1e9 for n in ns], *ns, st.st_blksize, st.st_blocks,
                           st.st_rdev))


def _names(path):
    """The components of path (str or bytes) as bytes; '' and '/' are the root."""
    return [c for c in os.fsencode(path).split(b"/") if c and c != b"."]


class FileSystem(Handle):
    """An open file system (pomegranate.open). Use as a context manager or
    close() it. Path arguments are str or bytes, absolute from the fs root.
    Errors raise OSError with the library's errno."""

    def __init__(self, addrs, fs="pomfs", *, keyfile=None, call_timeout_ms=0, retry_ms=0,
                 soft_ms=0, tls_ca=None, tls_cert=None, tls_key=None, lib=None):
        self._children = weakref.WeakSet()
        self._lib = load_library(lib)
        opts = ffi.new("struct pom_opts *", {"call_timeout_ms": call_timeout_ms,
                                             "retry_ms": retry_ms, "soft_ms": soft_ms})
        if keyfile is not None:
            keyfile = os.path.expanduser(keyfile)
            os.stat(keyfile)  # a missing key file: FileNotFoundError naming it
            kf = ffi.new("char[]", os.fsencode(keyfile))
            opts.keyfile = kf
        keep = []  # the TLS paths live until the open returns
        for field, path in (("tls_ca", tls_ca), ("tls_cert", tls_cert), ("tls_key", tls_key)):
            if path is not None:
                keep.append(ffi.new("char[]", os.fsencode(os.path.expanduser(path))))
                setattr(opts, field, keep[-1])
        out = ffi.new("pom_fs **")
        if isinstance(fs, int):  # an fsid, at one MDS
            rc = self._lib.pom_connect_mds_opts(addrs.encode(), fs, opts, out)
        else:  # a name, through R2
            rc = self._lib.pom_open_opts(addrs.encode(), os.fsencode(fs), opts, out)
        if rc < 0:
            # Name the key when the key is what failed (wrong or not allowed).
            check(rc, keyfile if keyfile is not None and -rc in _KEY_ERRNOS else
                  f"fs {fs!r} at {addrs}")
        self._h = out[0]
        self._cred = ffi.new("struct pom_cred *", {"uid": os.getuid(), "gid": os.getgid()})

    def _handle(self):
        if self._h is None:
            raise ValueError("operation on a closed FileSystem")
        return self._h

    def close(self):
        """Closes every KeySpace and File still open on it, then the fs
        (idempotent)."""
        if self._h is None:
            return
        for child in list(self._children):
            child.close()
        h, self._h = self._h, None
        self._lib.pom_close(h)

    @property
    def fsid(self):
        return self._lib.pom_fsid(self._handle())

    def keyspace(self, name):
        """Opens (creating if absent) the keyspace `name` (str or bytes,
        1..200 bytes): a KeySpace."""
        kv = KeySpace(self, name)
        self._children.add(kv)
        return kv

    def set_blob(self, backend, path):
        """Sets the blob tier of large files (backend "local", path folders
        separated by ':'), replacing the fs record's; before any open."""
        check(self._lib.pom_set_blob(self._handle(), backend.encode(), os.fsencode(path)))

    def sync(self):
        """Waits until everything this client sent is committed (syncfs)."""
        check(self._lib.pom_sync(self._handle()))

    def statvfs(self):
        sv = ffi.new("struct statvfs *")
        check(self._lib.pom_statfs(self._handle(), sv))
        return os.statvfs_result((sv.f_bsize, sv.f_frsize, sv.f_blocks, sv.f_bfree,
                                  sv.f_bavail, sv.f_files, sv.f_ffree, sv.f_favail,
                                  sv.f_flag, sv.f_namemax))

    # ---- paths -------------------------------------------------------------

    def _lookup(self, names, path):
        """The inode at names with one lookup reference (the caller gives it
        back with _forget), and its struct stat."""
        h = self._handle()
        ino, st = ROOT_INO, ffi.new("struct stat *")
        if not names:
            check(self._lib.pom_getattr(h, ROOT_INO, st), path)
        held = False
        for name in names:
            rc = self._lib.pom_lookup(h, ino, name, st)
            if held:
                self._lib.pom_forget(h, ino, 1)
            held = rc == 0
            check(rc, path)
            ino = st.st_ino
        if not held:
            ino = ROOT_INO  # the root is always known and needs no reference
        return ino, held, st

    def _forget(self, ino, held):
        if held and self._h is not None:
            self._lib.pom_forget(self._h, ino, 1)

    def _in_parent(self, path, fn):
        """fn(parent_ino, name) for the last name of path in its directory."""
        names = _names(path)
        if not names:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), path)  # the root itself
        ino, held, _ = self._lookup(names[:-1], path)
        try:
            return fn(ino, names[-1])
        finally:
            self._forget(ino, held)

    def stat(self, path):
        """An os.stat_result of path (not following a final symlink)."""
        ino, held, st = self._lookup(_names(path), path)
        self._forget(ino, held)
        return _stat_result(st)

    def exists(self, path):
        try:
            self.stat(path)
        except FileNotFoundError:
            return False
        return True

    def mkdir(self, path, mode=0o777):
        def do(parent, name):
            st = ffi.new("struct stat *")
            check(self._lib.pom_mkdir(self._h, parent, name, mode, self._cred, st), path)
            self._lib.pom_forget(self._h, st.st_ino, 1)
        self._in_parent(path, do)

    def rmdir(self, path):
        self._in_parent(path, lambda p, n: check(self._lib.pom_rmdir(self._h, p, n), path))

    def unlink(self, path):
        self._in_parent(path, lambda p, n: check(self._lib.pom_unlink(self._h, p, n), path))

    remove = unlink

    def rename(self, src, dst, *, noreplace=False, exchange=False):
        """renameat2(2): replaces dst (FileExistsError with noreplace);
        exchange swaps two existing names. Atomic."""
        flags = (_RENAME_NOREPLACE if noreplace else 0) | (_RENAME_EXCHANGE if exchange else 0)

        def outer(sp, sn):
            return self._in_parent(dst, lambda dp, dn: check(
                self._lib.pom_rename(self._h, sp, sn, dp, dn, flags), src))
        self._in_parent(src, outer)

    def scandir(self, path="/"):
        """A list of DirEntry (name, ino, mode type bits) of the directory's
        entries ('.' and '..' left out); names of path's type (str or bytes)."""
        ino, held, _ = self._lookup(_names(path), path)
        out = []
        handle = ffi.new_handle(out)
        try:
            cookie = 0
            while True:
                # Plain mode (plus 0): no references taken; the stat has
                # st_ino and st_mode.
                n = check(self._lib.pom_readdir(self._h, ino, cookie, 0, _take_dirent, handle),
                          path)
                if n == 0:
                    break
                cookie = out[-1][3]
        finally:
            self._forget(ino, held)
        as_str = isinstance(path, str)
        return [DirEntry(os.fsdecode(n) if as_str else n, ino, mode)
                for n, ino, mode, _ in out]

    def listdir(self, path="/"):
        """The names in the directory, as os.listdir."""
        return [e.name for e in self.scandir(path)]

    def truncate(self, path, length):
        ino, held, _ = self._lookup(_names(path), path)
        try:
            st = ffi.new("struct stat *", {"st_size": length})
            check(self._lib.pom_setattr(self._h, ino, st, _SET_SIZE, ffi.NULL), path)
        finally:
            self._forget(ino, held)

    def open(self, path, mode="rb", perm=0o666):
        """A File (binary only): mode r, w, a, x, each with optional +
        (and b, implied). Creates with permission bits perm."""
        return File(self, path, mode, perm)

    def read_bytes(self, path):
        with self.open(path, "rb") as f:
            return f.read()

    def write_bytes(self, path, data):
        with self.open(path, "wb") as f:
            f.write(data)


# What a key that is wrong, missing or unreadable fails an open with (docs/security.md).
_KEY_ERRNOS = {errno.ENOKEY, errno.EKEYREJECTED, errno.EACCES}

DirEntry = namedtuple("DirEntry", "name ino mode")
DirEntry.__doc__ = "An entry of FileSystem.scandir: name, inode and type bits (S_IFMT)."


@ffi.callback("int(void *, const char *, const struct stat *, uint64_t)",
              error=-errno.ENOMEM)  # as _kv._collect
def _take_dirent(arg, name, st, next_cookie):
    out = ffi.from_handle(arg)
    out.append((ffi.string(name), st.st_ino, st.st_mode & 0o170000, next_cookie))
    return 0


def _flags(mode):
    m = set(mode)
    if not m <= set("rwaxb+") or len(m) != len(mode) or len(m & set("rwax")) != 1:
        raise ValueError(f"invalid mode {mode!r}")
    rw = os.O_RDWR if "+" in m else (os.O_RDONLY if "r" in m else os.O_WRONLY)
    if "w" in m:
        return rw | os.O_CREAT | os.O_TRUNC
    if "a" in m:
        return rw | os.O_CREAT | os.O_APPEND
    if "x" in m:
        return rw | os.O_CREAT | os.O_EXCL
    return rw


class File(io.RawIOBase):
    """A regular file open on a FileSystem (FileSystem.open): an unbuffered
    binary stream (read, readinto, write, seek, tell, truncate, readline,
    ...) with fsync(). Writes are buffered by the library until flush(),
    fsync() or close(); fsync() returning means the bytes are committed."""

    def __init__(self, fs, path, mode, perm):
        super().__init__()
        self._f = None
        flags = _flags(mode)
        self._fs, self._lib, self.name, self.mode = fs, fs._lib, path, mode
        self._append = bool(flags & os.O_APPEND)
        out = ffi.new("pom_file **")
        h = fs._handle()
        if flags & os.O_CREAT:
            def create(parent, name):
                st = ffi.new("struct stat *")
                check(self._lib.pom_create(h, parent, name, perm, flags & ~os.O_CREAT,
                                           fs._cred, st, out), path)
                return st.st_ino
            self._ino = fs._in_parent(path, create)
        else:
            ino, held, _ = fs._lookup(_names(path), path)
            rc = self._lib.pom_file_open(h, ino, flags, out)
            if rc < 0:
                fs._forget(ino, held)
                check(rc, path)
            assert held, "the root is a directory: pom_file_open refuses it"
            self._ino = ino
        # The File keeps the lookup reference of its inode until close().
        self._f = out[0]
        self._pos = 0
        self._readable = "r" in mode or "+" in mode
        self._writable = not ("r" in mode) or "+" in mode
        fs._children.add(self)

    def _handle(self):
        if self._f is None:
            raise ValueError("I/O operation on a closed file")
        return self._f

    def readable(self):
        self._handle()
        return self._readable

    def writable(self):
        self._handle()
        return self._writable

    def seekable(self):
        return True

    def readinto(self, b):
        if not self._readable:
            raise io.UnsupportedOperation("not readable")
        with memoryview(b) as m:
            n = check(self._lib.pom_read(self._handle(), ffi.from_buffer(m), m.nbytes, self._pos),
                      self.name)
        self._pos += n
        return n

    def write(self, b):
        if not self._writable:
            raise io.UnsupportedOperation("not writable")
        with memoryview(b) as m:
            n = check(self._lib.pom_write(self._handle(), ffi.from_buffer(m), m.nbytes,
                                          self._pos), self.name)
        self._pos = self._size() if self._append else self._pos + n
        return n

    def _size(self):
        st = ffi.new("struct stat *")
        check(self._lib.pom_getattr(self._fs._handle(), self._ino, st), self.name)
        return st.st_size

    def seek(self, offset, whence=os.SEEK_SET):
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos}.get(whence)
        if base is None:
            if whence != os.SEEK_END:
                raise ValueError(f"invalid whence {whence}")
            base = self._size()
        if base + offset < 0:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), self.name)
        self._pos = base + offset
        return self._pos

    def tell(self):
        self._handle()
        return self._pos

    def truncate(self, size=None):
        size = self._pos if size is None else size
        self.flush()
        st = ffi.new("struct stat *", {"st_size": size})
        check(self._lib.pom_setattr(self._fs._handle(), self._ino, st, _SET_SIZE, ffi.NULL),
              self.name)
        return size

    def stat(self):
        st = ffi.new("struct stat *")
        check(self._lib.pom_getattr(self._fs._handle(), self._ino, st), self.name)
        return _stat_result(st)

    def flush(self):
        """Sends buffered changes to the MDS."""
        if self._f is not None:
            check(self._lib.pom_flush(self._f), self.name)

    def fsync(self, datasync=False):
        """Returns once every change of the file made here is committed."""
        check(self._lib.pom_fsync(self._handle(), 1 if datasync else 0), self.name)

    @property
    def closed(self):
        return self._f is None

    def close(self):
        """Flushes and frees the handle (idempotent); raises the flush's
        error, the handle freed all the same."""
        f, self._f = self._f, None
        if f is None:
            return
        self._fs._children.discard(self)
        rc = self._lib.pom_release(f)
        self._fs._forget(self._ino, True)
        super().close()
        check(rc, self.name)

    def __del__(self):
        try:
            self.close()
        except OSError:
            pass
