#!/usr/bin/env python3
"""pomfs_badinput.py MOUNTDIR -- bad input through a pomfs mount.

Run by test_pomfs_badinput.sh, which mounts pomfs and checks afterwards that
pom-mds and pom-mdsl survived. Every check prints "ok: ..." or "FAIL: ...";
the exit status is the number of failures (capped at 100).

Checks (each in its own folder under MOUNTDIR):
  names      255 bytes ok, 256 ENAMETOOLONG (create, mkdir, symlink, mkfifo,
             rename target); every byte 1..255 but '/' in names, alone and
             together: listed back byte-exact, stat-able, removable
  deep       a relative path of exactly PATH_MAX-1 bytes works, PATH_MAX is
             ENAMETOOLONG; a tree deeper than PATH_MAX is walked and removed
             through directory fds
  excl       O_EXCL creates and mkdirs of one name from many threads at once:
             exactly one wins, every other gets EEXIST
  loops      rename of a directory into itself or below (EINVAL), onto its
             own ancestor (ENOTEMPTY/EINVAL)
  unlinked   an open file that is unlinked keeps reading and writing until
             close (fstat nlink 0), and then is gone; ftruncate, fchmod,
             fchown, futimens and f{set,get,list,remove}xattr on it work as on
             ext4 (inline and blob-tier file); an open directory that is
             removed reads as empty
  offsets    writes and truncates at 2^40 and near 2^63: a clear error
             (EFBIG, EINVAL, ENOSPC, EOPNOTSUPP) or success that reads back;
             never a change to bytes elsewhere in the file or in its neighbour
  flags      renameat2 with unknown flags or NOREPLACE|EXCHANGE: EINVAL;
             fallocate with an unknown mode, setxattr with CREATE|REPLACE,
             utimensat with a bad nanosecond field, O_TMPFILE: an error,
             never a crash
"""
import ctypes
import errno
import os
import shutil
import stat
import sys
import threading

M = sys.argv[1]
FAILS = 0
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100


def ok(what):
    print("ok: " + what)


def fail(what):
    global FAILS
    FAILS += 1
    print("FAIL: " + what)


def check(cond, what):
    ok(what) if cond else fail(what)


def expect_err(what, errs, fn, *args, **kw):
    """fn(*args, **kw) must raise OSError with errno in errs."""
    try:
        fn(*args, **kw)
    except OSError as e:
        if e.errno in errs:
            ok("%s -> %s" % (what, errno.errorcode.get(e.errno, e.errno)))
        else:
            fail("%s: got %s, want %s" % (what, errno.errorcode.get(e.errno, e.errno),
                                          "/".join(errno.errorcode[x] for x in errs)))
        return
    fail("%s: succeeded, want %s" % (what, "/".join(errno.errorcode[x] for x in errs)))


def folder(name):
    d = os.path.join(M, name)
    os.mkdir(d)
    return d


# ---- names -----------------------------------------------------------------
def names():
    d = folder("names")
    n255, n256 = "n" * 255, "n" * 256
    p = os.path.join(d, n255)
    open(p, "w").close()
    check(os.path.exists(p), "create a 255-byte name")
    os.unlink(p)
    os.mkdir(p)
    check(os.path.isdir(p), "mkdir a 255-byte name")
    os.rmdir(p)
    q = os.path.join(d, n256)
    expect_err("create a 256-byte name", [errno.ENAMETOOLONG], os.open, q, os.O_CREAT | os.O_WRONLY)
    expect_err("mkdir a 256-byte name", [errno.ENAMETOOLONG], os.mkdir, q)
    expect_err("symlink at a 256-byte name", [errno.ENAMETOOLONG], os.symlink, "t", q)
    expect_err("mkfifo at a 256-byte name", [errno.ENAMETOOLONG], os.mkfifo, q)
    open(os.path.join(d, "src"), "w").close()
    expect_err("rename to a 256-byte name", [errno.ENAMETOOLONG], os.rename,
               os.path.join(d, "src"), q)
    check(os.path.exists(os.path.join(d, "src")), "the source of the refused rename is kept")
    os.symlink("x" * 1000, os.path.join(d, "longlink"))
    check(os.readlink(os.path.join(d, "longlink")) == "x" * 1000, "symlink target of 1000 bytes")

    # every byte 1..255 but '/' ('.' alone and '..' are not names)
    bd = os.fsencode(d)
    want = set()
    for b in range(1, 256):
        if b == ord("/"):
            continue
        for nm in (bytes([b]), b"a" + bytes([b]) + b"z"):
            if nm in (b".", b".."):
                continue
            with open(os.path.join(bd, nm), "wb") as f:
                f.write(nm)
            want.add(nm)
    allb = bytes(b for b in range(1, 256) if b != ord("/"))  # 254 bytes
    with open(os.path.join(bd, allb), "wb") as f:
        f.write(allb)
    want.add(allb)
    got = set(os.listdir(bd)) - {b"src", b"longlink"}
    check(got == want, "names with every byte 1..255 list back byte-exact (%d names)" % len(want))
    bad = [nm for nm in want if open(os.path.join(bd, nm), "rb").read() != nm]
    check(not bad, "each such file holds its own name (%d wrong)" % len(bad))
    check(all(stat.S_ISREG(os.stat(os.path.join(bd, nm)).st_mode) for nm in want),
          "each such name stats as a regular file")
    for nm in want:
        os.unlink(os.path.join(bd, nm))
    check(set(os.listdir(bd)) == {b"src", b"longlink"}, "all of them removed")


# ---- deep paths ----------------------------------------------------------------
def deep():
    d = folder("deep")
    comp = "d" * 200
    old = os.getcwd()
    os.chdir(d)
    try:
        rel = "/".join([comp] * 20)          # 20 * 201 - 1 = 4019 bytes
        os.makedirs(rel)
        exact = rel + "/" + "f" * 75         # 4095 bytes: PATH_MAX - 1
        assert len(exact) == 4095
        with open(exact, "w") as f:
            f.write("deep")
        check(open(exact).read() == "deep", "a relative path of PATH_MAX-1 bytes works")
        over = rel + "/" + "f" * 76          # 4096 bytes
        expect_err("a path of PATH_MAX bytes", [errno.ENAMETOOLONG], os.open, over,
                   os.O_CREAT | os.O_WRONLY)
        # deeper than PATH_MAX from the mount root, through directory fds
        fd = os.open(rel, os.O_RDONLY | os.O_DIRECTORY)
        for i in range(12):
            os.mkdir(comp, dir_fd=fd)
            nfd = os.open(comp, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        leaf = os.open("leaf", os.O_CREAT | os.O_RDWR, 0o644, dir_fd=fd)
        os.write(leaf, b"bottom")
        os.close(leaf)
        leaf = os.open("leaf", os.O_RDONLY, dir_fd=fd)
        check(os.read(leaf, 100) == b"bottom", "a file 32 levels (6.4 KB of path) deep")
        os.close(leaf)
        os.close(fd)
        expect_err("its absolute path", [errno.ENAMETOOLONG], os.stat,
                   os.path.join(d, rel, *([comp] * 12), "leaf"))
    finally:
        os.chdir(old)
    shutil.rmtree(d)
    check(not os.path.exists(d), "rm -rf of a tree deeper than PATH_MAX")


# ---- O_EXCL races ----------------------------------------------------------------
def race(make, nthreads, what):
    d = folder("excl-" + what)
    rounds, lost = 20, []
    for r in range(rounds):
        path = os.path.join(d, "contended-%d" % r)
        barrier = threading.Barrier(nthreads)
        res = [None] * nthreads

        def run(i):
            barrier.wait()
            try:
                make(path)
                res[i] = 0
            except OSError as e:
                res[i] = e.errno

        ts = [threading.Thread(target=run, args=(i,)) for i in range(nthreads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wins = res.count(0)
        others = [e for e in res if e != 0]
        if wins != 1 or any(e != errno.EEXIST for e in others):
            lost.append((r, wins, sorted(set(others))))
    check(not lost, "%s of one name from %d threads, %d rounds: exactly one wins, the rest "
          "EEXIST%s" % (what, nthreads, rounds, "" if not lost else " (bad rounds: %s)" % lost[:3]))
    check(len(os.listdir(d)) == rounds, "%s: one entry per round" % what)


def excl():
    def create(p):
        os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    race(create, 16, "O_EXCL create")
    race(os.mkdir, 16, "mkdir")
    race(lambda p: os.symlink("target", p), 8, "symlink")


# ---- rename loops -----------------------------------------------------------------
def loops():
    d = folder("loops")
    a = os.path.join(d, "a")
    os.makedirs(os.path.join(a, "b", "c", "d"))
    expect_err("rename a into a/b", [errno.EINVAL], os.rename, a, os.path.join(a, "b"))
    expect_err("rename a to a/x (new name below itself)", [errno.EINVAL], os.rename, a,
               os.path.join(a, "x"))
    expect_err("rename a to a/b/c/d/e (deep below itself)", [errno.EINVAL], os.rename, a,
               os.path.join(a, "b", "c", "d", "e"))
    expect_err("rename a/b onto its ancestor a", [errno.ENOTEMPTY, errno.EINVAL, errno.EEXIST],
               os.rename, os.path.join(a, "b"), a)
    check(os.path.isdir(os.path.join(a, "b", "c", "d")), "the tree is intact after the refusals")
    os.rename(a, a)  # same name: a no-op that succeeds
    check(os.path.isdir(os.path.join(a, "b")), "rename a to a is a no-op")
    f = os.path.join(d, "f")
    open(f, "w").close()
    expect_err("rename a file over a directory", [errno.EISDIR], os.rename, f, a)
    expect_err("rename a directory over a file", [errno.ENOTDIR], os.rename, a, f)
    expect_err("a file used as a directory", [errno.ENOTDIR], os.rename, f, os.path.join(f, "x"))


# ---- unlink of open files ------------------------------------------------------------
def unlinked():
    d = folder("unlinked")
    p = os.path.join(d, "open-file")
    with open(p, "wb") as f:
        f.write(b"0123456789" * 100)
    fd = os.open(p, os.O_RDWR)
    other = os.open(p, os.O_RDONLY)
    os.unlink(p)
    check(not os.path.exists(p), "the name is gone at once")
    check(os.pread(fd, 10, 0) == b"0123456789", "reads keep working after unlink")
    check(os.fstat(fd).st_nlink == 0, "fstat says nlink 0")
    os.pwrite(fd, b"abc", 1000)
    check(os.pread(fd, 3, 1000) == b"abc", "writes keep working after unlink")
    check(os.pread(other, 10, 990) == b"0123456789", "a second descriptor reads too")
    os.close(fd)
    check(os.pread(other, 3, 0) == b"012", "the last descriptor still reads after the first closed")
    os.close(other)
    check(os.listdir(d) == [], "nothing left after close")
    # attributes and xattrs of an unlinked open file (the fsstress bug)
    for size, cut in ((100, 50), (200 * 1024, 100 * 1024)):  # inline, blob tier
        what = "unlinked %d-byte file: " % size
        with open(p, "wb") as f:
            f.write(b"x" * size)
        os.setxattr(p, "user.before", b"b")
        fd = os.open(p, os.O_RDWR)
        os.unlink(p)
        try:
            os.ftruncate(fd, cut)
            os.fchmod(fd, 0o600)
            os.fchown(fd, os.getuid(), os.getgid())
            os.utime(fd, ns=(2000000 * 10**9, 1000000 * 10**9 + 5))
            os.setxattr(fd, "user.a", b"1")
            st = os.fstat(fd)
            check((st.st_size, oct(st.st_mode), os.getxattr(fd, "user.a")) ==
                  (cut, "0o100600", b"1"), what + "ftruncate/fchmod/fsetxattr work")
            check(st.st_mtime_ns == 1000000 * 10**9 + 5 and st.st_nlink == 0,
                  what + "futimens works, nlink 0")
            check(os.getxattr(fd, "user.before") == b"b", what + "xattrs from before kept")
            check(sorted(os.listxattr(fd)) == ["user.a", "user.before"], what + "flistxattr")
            os.removexattr(fd, "user.before")
            expect_err(what + "fremovexattr removed it", [errno.ENODATA], os.getxattr, fd,
                       "user.before")
            check(os.pread(fd, 10, 0) == b"x" * 10 and os.pread(fd, 10, cut) == b"",
                  what + "the bytes follow the truncate")
            os.ftruncate(fd, cut + 4096)
            check(os.pread(fd, 4096, cut) == bytes(4096), what + "truncate up reads zeros")
        except OSError as e:
            fail(what + "a call failed: %s" % e)
        os.close(fd)
        check(os.listdir(d) == [], what + "nothing left after close")
    # the name can be reused at once, independent of the old file
    with open(p, "wb") as f:
        f.write(b"new")
    check(open(p, "rb").read() == b"new", "the name is reused by a new file")
    # an open directory removed under its reader
    sub = os.path.join(d, "dir")
    os.mkdir(sub)
    dfd = os.open(sub, os.O_RDONLY | os.O_DIRECTORY)
    os.rmdir(sub)
    try:
        left = os.listdir(dfd)
        check(left == [], "a removed directory lists as empty")
    except OSError as e:
        check(e.errno == errno.ENOENT, "a removed directory: listing it says ENOENT")
    expect_err("create in a removed directory", [errno.ENOENT], os.open, "x",
               os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=dfd)
    os.close(dfd)


# ---- offsets past 2^40 ---------------------------------------------------------------
def offsets():
    d = folder("offsets")
    p, n = os.path.join(d, "big"), os.path.join(d, "neighbour")
    with open(p, "wb") as f:
        f.write(b"head")
    with open(n, "wb") as f:
        f.write(b"neighbour bytes")
    clear = [errno.EFBIG, errno.EINVAL, errno.ENOSPC, errno.EOPNOTSUPP, errno.EOVERFLOW]
    fd = os.open(p, os.O_RDWR)
    for off, what in ((1 << 40, "2^40"), ((1 << 63) - 2, "2^63-2")):
        try:
            os.pwrite(fd, b"X", off)
            wrote = True
        except OSError as e:
            wrote = False
            check(e.errno in clear, "write at %s: a clear error (%s)" %
                  (what, errno.errorcode.get(e.errno, e.errno)))
        if wrote:
            st = os.fstat(fd)
            check(st.st_size == off + 1 and os.pread(fd, 1, off) == b"X",
                  "write at %s works and reads back (size %d)" % (what, st.st_size))
            os.ftruncate(fd, 4)
        check(os.pread(fd, 4, 0) == b"head", "after the write at %s the head is intact" % what)
    for size, what in ((1 << 40, "2^40"), ((1 << 63) - 1, "2^63-1")):
        try:
            os.ftruncate(fd, size)
            check(os.fstat(fd).st_size == size, "ftruncate to %s works" % what)
            os.ftruncate(fd, 4)
        except OSError as e:
            check(e.errno in clear, "ftruncate to %s: a clear error (%s)" %
                  (what, errno.errorcode.get(e.errno, e.errno)))
        check(os.pread(fd, 4, 0) == b"head" and os.fstat(fd).st_size == 4,
              "after ftruncate to %s the file is unchanged" % what)
    expect_err("ftruncate to -1", [errno.EINVAL], os.ftruncate, fd, -1)
    os.close(fd)
    check(open(n, "rb").read() == b"neighbour bytes", "the neighbouring file is untouched")


# ---- invalid flags ---------------------------------------------------------------------
def renameat2(a, b, flags):
    libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                               ctypes.c_uint]
    if libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def utimensat_raw(path, nsec):
    ts = (ctypes.c_long * 4)(0, nsec, 0, nsec)
    libc.utimensat.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int]
    if libc.utimensat(AT_FDCWD, os.fsencode(path), ts, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def flags():
    d = folder("flags")
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    for p in (a, b):
        with open(p, "w") as f:
            f.write(p)
    expect_err("renameat2 with an unknown flag (1<<10)", [errno.EINVAL], renameat2, a, b, 1 << 10)
    expect_err("renameat2 with flag 1<<31", [errno.EINVAL], renameat2, a, b, 1 << 31)
    expect_err("renameat2 NOREPLACE|EXCHANGE", [errno.EINVAL], renameat2, a, b, 1 | 2)
    expect_err("renameat2 NOREPLACE onto an existing name", [errno.EEXIST], renameat2, a, b, 1)
    expect_err("renameat2 EXCHANGE with a missing name", [errno.ENOENT, errno.EINVAL],
               renameat2, a, os.path.join(d, "missing"), 2)
    check(open(a).read() == a and open(b).read() == b, "both files unchanged after the refusals")

    fd = os.open(a, os.O_RDWR)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    rc = libc.fallocate(fd, 0x4000, 0, 10)
    e = ctypes.get_errno()
    check(rc != 0 and e in (errno.EINVAL, errno.EOPNOTSUPP),
          "fallocate with an unknown mode: EINVAL/EOPNOTSUPP (got %s)" %
          ("success" if rc == 0 else errno.errorcode.get(e, e)))
    rc = libc.fallocate(fd, 0, -1, 10)
    e = ctypes.get_errno()
    check(rc != 0 and e == errno.EINVAL, "fallocate at a negative offset: EINVAL")
    os.close(fd)
    expect_err("setxattr with CREATE|REPLACE", [errno.EINVAL, errno.ENODATA, errno.EEXIST],
               os.setxattr, a, "user.x", b"v",
               os.XATTR_CREATE | os.XATTR_REPLACE)
    expect_err("setxattr with an unknown flag", [errno.EINVAL], os.setxattr, a, "user.x", b"v", 8)
    expect_err("setxattr with an empty name", [errno.ERANGE, errno.EINVAL], os.setxattr, a, "",
               b"v")
    expect_err("setxattr with a 256-byte name", [errno.ERANGE], os.setxattr, a,
               "user." + "x" * 251, b"v")
    expect_err("utimensat with tv_nsec = 2*10^9", [errno.EINVAL], utimensat_raw, a, 2000000000)
    expect_err("utimensat with tv_nsec = -5", [errno.EINVAL], utimensat_raw, a, -5)
    try:
        t = os.open(d, os.O_TMPFILE | os.O_RDWR, 0o600)
        os.write(t, b"tmp")
        check(os.pread(t, 3, 0) == b"tmp", "O_TMPFILE works")
        os.close(t)
    except OSError as e:
        check(e.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.EISDIR),
              "O_TMPFILE: a clear error (%s)" % errno.errorcode.get(e.errno, e.errno))
    expect_err("open with O_DIRECTORY on a file", [errno.ENOTDIR], os.open, a, os.O_DIRECTORY)
    expect_err("mknod of an unknown type", [errno.EINVAL, errno.EPERM], os.mknod,
               os.path.join(d, "odd"), 0o170000 | 0o644)
    expect_err("mkdir of an existing name", [errno.EEXIST], os.mkdir, a)
    check(sorted(os.listdir(d)) == ["a", "b"], "nothing stray was created")
    # RENAME_WHITEOUT (4) is for overlay file systems: a clear refusal, or
    # (tmpfs as root) the rename plus a whiteout device at the old name
    try:
        renameat2(a, os.path.join(d, "w"), 4)
        check(os.path.exists(os.path.join(d, "w")), "renameat2 WHITEOUT works")
    except OSError as e:
        check(e.errno in (errno.EINVAL, errno.EOPNOTSUPP, errno.EPERM),
              "renameat2 WHITEOUT: a clear error (%s)" % errno.errorcode.get(e.errno, e.errno))


def main():
    for t in (names, deep, excl, loops, unlinked, offsets, flags):
        try:
            t()
        except Exception as e:  # a check that could not even run is a failure
            fail("%s: unexpected %s: %s" % (t.__name__, type(e).__name__, e))
    print("%d failed" % FAILS)
    return min(FAILS, 100)


if __name__ == "__main__":
    sys.exit(main())
