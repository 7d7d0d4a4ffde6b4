#!/usr/bin/env python3
"""fsstress-style random operations on a mounted folder, every result checked
against an in-memory model (used by test_pomfs_workloads.sh).

    test_pomfs_workloads_fsstress.py ROOT[:ROOT2...] [--ops N] [--workers W] [--seed S]
    test_pomfs_workloads_fsstress.py --listing ROOT   (canonical text of a tree)

Each of W worker processes owns the subtree ROOT/wK and runs ~N/W operations
drawn by random.Random(seed*1000+K): create, write at offsets (inline and past
64 KiB, i.e. the blob tier), truncate, read, mkdir, rmdir, rename (files and
folders, over existing names, renameat2 RENAME_NOREPLACE / RENAME_EXCHANGE
through ctypes), link, unlink, symlink/readlink, chmod, setxattr/getxattr/
listxattr/removexattr, readdir, I/O through a descriptor whose name is renamed or
unlinked while open. Every call's outcome (success or the exact
errno Linux gives) and every byte read are compared with the model; after each
change the touched names are lstat'ed and compared (type, mode, size, nlink,
inode number shared by hard links and kept by rename).

Invariants the model holds the file system to:
 (1) A worker's subtree is changed by that worker only, so its model is exact.
 (2) ROOT/shared is used by all workers, only with operations whose result does
     not depend on the interleaving: a worker creates, writes, renames, unlinks
     names carrying its own prefix; mkdir of the common folders may answer 0 or
     EEXIST but afterwards the folder must exist; a listing must hold every
     name the worker owns and nothing that no worker could have made.
 (3) At the end the parent walks the whole tree and compares it, contents
     included, with the union of the workers' models.

ROOT:ROOT2 names one folder through two mounts: worker K works through
mount K mod 2 (the shared folder is then changed by two clients at once).

The seed is printed; XT_SEED=S (or --seed S) repeats a run. On the first
mismatch a worker prints the seed, the operation number, the last operations
and exits 1.
"""
import argparse
import ctypes
import errno
import multiprocessing as mp
import os
import queue
import random
import stat
import sys
import time

INLINE_MAX = 64 * 1024
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2
AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)
_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                            ctypes.c_uint]


def renameat2(src, dst, flags):
    if _libc.renameat2(AT_FDCWD, os.fsencode(src), AT_FDCWD, os.fsencode(dst), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), src)


class Inode:
    """A file, folder or symlink of the model; hard links share one Inode."""
    def __init__(self, kind, mode, data=b"", target=""):
        self.kind = kind            # 'f', 'd' or 'l'
        self.mode = mode            # permission bits
        self.data = bytearray(data)  # file bytes
        self.target = target        # symlink target
        self.xattrs = {}
        self.ino = None             # st_ino seen at creation
        self.nlink = 1


class Mismatch(Exception):
    pass


class Worker:
    def __init__(self, root, k, seed, nops, shared):
        self.root = root            # the mount folder holding wK and shared
        self.k = k
        self.rng = random.Random(seed * 1000 + k)
        self.nops = nops
        self.shared = shared
        self.ns = {f"w{k}": Inode('d', 0o755)}  # relative path -> Inode
        self.ns[f"w{k}"].ino = os.lstat(os.path.join(root, f"w{k}")).st_ino
        self.sh = {}                # own names under shared/ -> Inode
        self.counter = 0
        self.hist = []
        self.opno = 0
        self.counts = {}

    # ---- model helpers -----------------------------------------------------
    def p(self, rel):
        return os.path.join(self.root, rel)

    def children(self, rel):
        pre = rel + "/"
        return sorted(n[len(pre):] for n in self.ns if n.startswith(pre) and "/" not in n[len(pre):])

    def resolve_parent(self, rel):
        """errno of resolving rel's parent folders (0 when they are folders)."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            cur = "/".join(parts[:i])
            node = self.ns.get(cur)
            if node is None:
                return errno.ENOENT
            if node.kind != 'd':
                return errno.ENOTDIR
        return 0

    def newname(self):
        self.counter += 1
        return f"n{self.counter}" + self.rng.choice(["", "_x", ".txt", "-long-name" * 3])

    def pick(self, kinds="fdl", exist_p=0.85, allow_root=False):
        """A path: mostly an existing entry of one of the kinds, else a new
        name in an existing folder, rarely a name below a missing folder or
        below a file (ENOENT / ENOTDIR cases)."""
        r = self.rng.random()
        if r < exist_p:
            cands = [n for n, i in self.ns.items() if i.kind in kinds and (allow_root or "/" in n)]
            if cands:
                return self.rng.choice(sorted(cands))
        dirs = sorted(n for n, i in self.ns.items() if i.kind == 'd')
        if r > 0.97:
            return self.rng.choice(dirs) + "/missing-dir/" + self.newname()
        if r > 0.95:
            files = sorted(n for n, i in self.ns.items() if i.kind == 'f')
            if files:
                return self.rng.choice(files) + "/" + self.newname()
        return self.rng.choice(dirs) + "/" + self.newname()

    def rand_bytes(self, n):
        return self.rng.randbytes(n)

    def rand_offset(self):
        if self.rng.random() < 0.7:
            return self.rng.randrange(0, 16 * 1024)
        return self.rng.randrange(INLINE_MAX - 4096, 3 * INLINE_MAX)

    # ---- checking ----------------------------------------------------------
    def fail(self, what):
        raise Mismatch(what)

    def call(self, desc, want_err, fn, *args):
        """Runs fn; its errno must be want_err (0 = success; a set = any of).
        Returns fn's result (None on an expected error)."""
        self.hist.append(desc)
        if len(self.hist) > 25:
            self.hist.pop(0)
        try:
            res = fn(*args)
            got = 0
        except OSError as e:
            res, got = None, e.errno
        ok = got in want_err if isinstance(want_err, (set, frozenset)) else got == want_err
        if not ok:
            self.fail(f"{desc}: got {errno.errorcode.get(got, got) if got else 'success'}, want "
                      f"{want_err if isinstance(want_err, set) else (errno.errorcode.get(want_err) if want_err else 'success')}")
        return res

    def check_entry(self, rel, node):
        """lstat of rel matches the model's node."""
        try:
            st = os.lstat(self.p(rel))
        except OSError as e:
            self.fail(f"lstat {rel}: {e}")
        kind = {stat.S_IFREG: 'f', stat.S_IFDIR: 'd', stat.S_IFLNK: 'l'}.get(stat.S_IFMT(st.st_mode), '?')
        if kind != node.kind:
            self.fail(f"lstat {rel}: type {kind}, want {node.kind}")
        if node.ino is not None and st.st_ino != node.ino:
            self.fail(f"lstat {rel}: ino {st.st_ino}, want {node.ino}")
        if kind == 'f':
            if st.st_size != len(node.data):
                self.fail(f"lstat {rel}: size {st.st_size}, want {len(node.data)}")
            if st.st_nlink != node.nlink:
                self.fail(f"lstat {rel}: nlink {st.st_nlink}, want {node.nlink}")
        if kind != 'l' and stat.S_IMODE(st.st_mode) != node.mode:
            self.fail(f"lstat {rel}: mode {oct(stat.S_IMODE(st.st_mode))}, want {oct(node.mode)}")
        if kind == 'l':
            t = os.readlink(self.p(rel))
            if t != node.target:
                self.fail(f"readlink {rel}: {t!r}, want {node.target!r}")
        return st

    def check_absent(self, rel):
        try:
            os.lstat(self.p(rel))
        except FileNotFoundError:
            return
        except NotADirectoryError:
            return
        self.fail(f"lstat {rel}: exists, the model says it does not")

    def check_content(self, rel, node):
        with open(self.p(rel), "rb") as f:
            got = f.read()
        if got != bytes(node.data):
            i = next((j for j in range(min(len(got), len(node.data))) if got[j] != node.data[j]),
                     min(len(got), len(node.data)))
            self.fail(f"read {rel}: {len(got)} bytes, want {len(node.data)}; first difference at {i}")

    # ---- operations --------------------------------------------------------
    def op_create(self):
        rel = self.pick(exist_p=0.1)
        mode = self.rng.choice([0o644, 0o600, 0o755, 0o640])
        data = self.rand_bytes(self.rng.choice([0, 1, 100, 4000]))
        want = self.resolve_parent(rel) or (errno.EEXIST if rel in self.ns else 0)

        def create():
            fd = os.open(self.p(rel), os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode)
            try:
                if os.write(fd, data) != len(data):
                    self.fail(f"create {rel}: short write")
                return os.fstat(fd).st_ino
            finally:
                os.close(fd)
        ino = self.call(f"create {rel} {oct(mode)} +{len(data)}", want, create)
        if want == 0:
            node = Inode('f', mode, data)
            node.ino = ino
            self.ns[rel] = node
            self.check_entry(rel, node)

    def op_write(self):
        rel = self.pick("fd", exist_p=0.95)
        node = self.ns.get(rel)
        off = self.rand_offset()
        data = self.rand_bytes(self.rng.choice([1, 17, 512, 4096, 9000]))
        want = self.resolve_parent(rel) or (errno.ENOENT if node is None else
                                              errno.EISDIR if node.kind == 'd' else 0)

        def write():
            fd = os.open(self.p(rel), os.O_WRONLY)
            try:
                if os.pwrite(fd, data, off) != len(data):
                    self.fail(f"pwrite {rel}: short write")
            finally:
                os.close(fd)
        self.call(f"pwrite {rel} @{off} +{len(data)}", want, write)
        if want == 0:
            if len(node.data) < off:
                node.data.extend(b"\0" * (off - len(node.data)))
            node.data[off:off + len(data)] = data
            self.check_entry(rel, node)

    def op_truncate(self):
        rel = self.pick("fd", exist_p=0.95)
        node = self.ns.get(rel)
        size = self.rand_offset() if self.rng.random() < 0.8 else 0
        want = self.resolve_parent(rel) or (errno.ENOENT if node is None else
                                              errno.EISDIR if node.kind == 'd' else 0)
        self.call(f"truncate {rel} {size}", want, os.truncate, self.p(rel), size)
        if want == 0:
            if size < len(node.data):
                del node.data[size:]
            else:
                node.data.extend(b"\0" * (size - len(node.data)))
            self.check_entry(rel, node)

    def op_read(self):
        rel = self.pick("fd", exist_p=0.95)
        node = self.ns.get(rel)
        want = self.resolve_parent(rel) or (errno.ENOENT if node is None else
                                              errno.EISDIR if node.kind == 'd' else 0)
        off = self.rand_offset()
        n = self.rng.choice([1, 100, 5000, 70000])

        def read():
            fd = os.open(self.p(rel), os.O_RDONLY)
            try:
                return os.pread(fd, n, off)
            finally:
                os.close(fd)
        got = self.call(f"pread {rel} @{off} {n}", want, read)
        if want == 0:
            if got != bytes(node.data[off:off + n]):
                self.fail(f"pread {rel} @{off} {n}: {len(got)} bytes differ from the model's "
                          f"{len(node.data[off:off + n])}")
            if self.rng.random() < 0.3:
                self.check_content(rel, node)

    def op_mkdir(self):
        rel = self.pick(exist_p=0.1)
        mode = self.rng.choice([0o755, 0o700, 0o750])
        want = self.resolve_parent(rel) or (errno.EEXIST if rel in self.ns else 0)
        self.call(f"mkdir {rel}", want, os.mkdir, self.p(rel), mode)
        if want == 0:
            node = Inode('d', mode)
            node.ino = os.lstat(self.p(rel)).st_ino
            self.ns[rel] = node
            self.check_entry(rel, node)

    def op_rmdir(self):
        rel = self.pick("dl")
        node = self.ns.get(rel)
        want = self.resolve_parent(rel) or (errno.ENOENT if node is None else
                                              errno.ENOTDIR if node.kind != 'd' else
                                              errno.ENOTEMPTY if self.children(rel) else 0)
        self.call(f"rmdir {rel}", want, os.rmdir, self.p(rel))
        if want == 0:
            del self.ns[rel]
            self.check_absent(rel)

    def op_unlink(self):
        rel = self.pick("fld")
        node = self.ns.get(rel)
        want = self.resolve_parent(rel) or (errno.ENOENT if node is None else
                                              errno.EISDIR if node.kind == 'd' else 0)
        self.call(f"unlink {rel}", want, os.unlink, self.p(rel))
        if want == 0:
            del self.ns[rel]
            node.nlink -= 1
            self.check_absent(rel)
            for n, i in self.ns.items():
                if i is node:
                    self.check_entry(n, i)

    def op_symlink(self):
        rel = self.pick(exist_p=0.1)
        target = self.rng.choice(["/nonexistent/x", "..", "a" * self.rng.randrange(1, 300),
                                  "sub/" + self.newname()])
        want = self.resolve_parent(rel) or (errno.EEXIST if rel in self.ns else 0)
        self.call(f"symlink {rel} -> {target[:40]}", want, os.symlink, target, self.p(rel))
        if want == 0:
            node = Inode('l', 0o777, target=target)
            self.ns[rel] = node
            self.check_entry(rel, node)

    def op_readlink(self):
        rel = self.pick("lf")
        node = self.ns.get(rel)
        want = self.resolve_parent(rel) or (errno.ENOENT if node is None else
                                              errno.EINVAL if node.kind != 'l' else 0)
        got = self.call(f"readlink {rel}", want, os.readlink, self.p(rel))
        if want == 0 and got != node.target:
            self.fail(f"readlink {rel}: {got!r}, want {node.target!r}")

    def op_link(self):
        src = self.pick("fd", exist_p=0.95)
        dst = self.pick("fdl", exist_p=0.1)
        s, d = self.ns.get(src), self.ns.get(dst)
        want = (self.resolve_parent(src) or (errno.ENOENT if s is None else 0) or
                self.resolve_parent(dst) or (errno.EEXIST if d is not None else 0) or
                (errno.EPERM if s.kind == 'd' else 0))
        self.call(f"link {src} {dst}", want, os.link, self.p(src), self.p(dst))
        if want == 0:
            s.nlink += 1
            self.ns[dst] = s
            self.check_entry(src, s)
            self.check_entry(dst, s)

    def op_chmod(self):
        rel = self.pick("fd")
        node = self.ns.get(rel)
        mode = self.rng.choice([0o644, 0o600, 0o755, 0o700, 0o4755, 0o1777, 0o000])
        want = self.resolve_parent(rel) or (errno.ENOENT if node is None else 0)
        self.call(f"chmod {rel} {oct(mode)}", want, os.chmod, self.p(rel), mode)
        if want == 0:
            node.mode = mode
            self.check_entry(rel, node)

    def op_xattr(self):
        rel = self.pick("fd", exist_p=0.95)
        node = self.ns.get(rel)
        name = "user." + self.rng.choice(["a", "b", "comment", "x" * 40])
        want_path = self.resolve_parent(rel) or (errno.ENOENT if node is None else 0)
        r = self.rng.random()
        if r < 0.45:
            val = self.rand_bytes(self.rng.choice([0, 1, 30, 200]))
            flag = self.rng.choice([0, 0, os.XATTR_CREATE, os.XATTR_REPLACE])
            want = want_path or (errno.EEXIST if flag == os.XATTR_CREATE and name in node.xattrs else
                                 errno.ENODATA if flag == os.XATTR_REPLACE and name not in node.xattrs
                                 else 0)
            self.call(f"setxattr {rel} {name} {len(val)} flags={flag}", want, os.setxattr,
                      self.p(rel), name, val, flag)
            if want == 0:
                node.xattrs[name] = val
        elif r < 0.8:
            want = want_path or (errno.ENODATA if name not in node.xattrs else 0)
            got = self.call(f"getxattr {rel} {name}", want, os.getxattr, self.p(rel), name)
            if want == 0 and got != node.xattrs[name]:
                self.fail(f"getxattr {rel} {name}: {got!r}, want {node.xattrs[name]!r}")
        elif r < 0.9:
            want = want_path or (errno.ENODATA if name not in node.xattrs else 0)
            self.call(f"removexattr {rel} {name}", want, os.removexattr, self.p(rel), name)
            if want == 0:
                del node.xattrs[name]
        else:
            got = self.call(f"listxattr {rel}", want_path, os.listxattr, self.p(rel))
            if want_path == 0:
                got = sorted(x for x in got if x.startswith("user."))
                if got != sorted(node.xattrs):
                    self.fail(f"listxattr {rel}: {got}, want {sorted(node.xattrs)}")

    def op_readdir(self):
        rel = self.pick("dfl", exist_p=0.95, allow_root=True)
        node = self.ns.get(rel)
        want = self.resolve_parent(rel) or (errno.ENOENT if node is None else
                                              errno.ENOTDIR if node.kind != 'd' else 0)
        if node is not None and node.kind == 'l':
            return  # listdir would follow the link
        got = self.call(f"readdir {rel}", want, os.listdir, self.p(rel))
        if want == 0 and sorted(got) != self.children(rel):
            g, m = set(got), set(self.children(rel))
            self.fail(f"readdir {rel}: extra {sorted(g - m)[:5]}, missing {sorted(m - g)[:5]}")

    def rename_errno(self, src, dst, flags):
        """What Linux answers for renameat2(src, dst, flags) (fs/namei.c order)."""
        s, d = self.ns.get(src), self.ns.get(dst)
        e = self.resolve_parent(src) or self.resolve_parent(dst)
        if e:
            return e
        if s is None:
            return errno.ENOENT
        if flags & RENAME_NOREPLACE and d is not None:
            return errno.EEXIST
        if flags & RENAME_EXCHANGE and d is None:
            return errno.ENOENT
        if dst.startswith(src + "/"):
            return errno.EINVAL             # source is an ancestor of the target
        if src.startswith(dst + "/"):
            return errno.EINVAL if flags & RENAME_EXCHANGE else errno.ENOTEMPTY
        if d is s:
            return 0                        # same inode: nothing happens
        if d is not None and not flags & RENAME_EXCHANGE:
            if s.kind == 'd' and d.kind != 'd':
                return errno.ENOTDIR
            if s.kind != 'd' and d.kind == 'd':
                return errno.EISDIR
            if d.kind == 'd' and self.children(dst):
                return errno.ENOTEMPTY
        return 0

    def move_subtree(self, src, dst, ns_from, ns_to):
        for n in sorted(ns_from):
            if n == src or n.startswith(src + "/"):
                ns_to[dst + n[len(src):]] = ns_from[n]

    def op_rename(self):
        src = self.pick("fdl", exist_p=0.95)
        dst = self.pick("fdl", exist_p=self.rng.choice([0.2, 0.6]))
        flags = self.rng.choice([0, 0, 0, RENAME_NOREPLACE, RENAME_EXCHANGE])
        use_os = flags == 0 and self.rng.random() < 0.5
        want = self.rename_errno(src, dst, flags)
        if want == errno.ENOTEMPTY:
            want = {errno.ENOTEMPTY, errno.EEXIST}  # POSIX allows either
        fn = (lambda: os.rename(self.p(src), self.p(dst))) if use_os else \
            (lambda: renameat2(self.p(src), self.p(dst), flags))
        self.call(f"rename{'' if use_os else '2'} {src} {dst} flags={flags}", want, fn)
        if want != 0:
            return
        s, d = self.ns.get(src), self.ns.get(dst)
        if d is s:
            self.check_entry(src, s)
            self.check_entry(dst, d)
            return
        if flags & RENAME_EXCHANGE:
            a = {n: i for n, i in self.ns.items() if n == src or n.startswith(src + "/")}
            b = {n: i for n, i in self.ns.items() if n == dst or n.startswith(dst + "/")}
            for n in list(a) + list(b):
                del self.ns[n]
            self.move_subtree(src, dst, a, self.ns)
            self.move_subtree(dst, src, b, self.ns)
            self.check_entry(src, self.ns[src])
        else:
            if d is not None:
                del self.ns[dst]
                if d.kind == 'f':
                    d.nlink -= 1
            moved = {n: i for n, i in self.ns.items() if n == src or n.startswith(src + "/")}
            for n in moved:
                del self.ns[n]
            self.move_subtree(src, dst, moved, self.ns)
            self.check_absent(src)
            if d is not None and d.kind == 'f':
                for n, i in self.ns.items():
                    if i is d:
                        self.check_entry(n, i)
        self.check_entry(dst, self.ns[dst])
        if self.ns[dst].kind == 'd' and self.rng.random() < 0.3:
            got = sorted(os.listdir(self.p(dst)))
            if got != self.children(dst):
                self.fail(f"readdir {dst} after rename: {got[:5]}..., want {self.children(dst)[:5]}...")

    def op_openfd(self):
        """I/O through a descriptor whose name is renamed or unlinked while it
        is open: the bytes follow the inode, not the name."""
        files = sorted(n for n, i in self.ns.items() if i.kind == 'f')
        if not files:
            return
        rel = self.rng.choice(files)
        node = self.ns[rel]
        fd = self.call(f"open {rel} O_RDWR", 0, os.open, self.p(rel), os.O_RDWR)
        try:
            r = self.rng.random()
            if r < 0.5:
                dirs = sorted(n for n, i in self.ns.items() if i.kind == 'd')
                new = self.rng.choice(dirs) + "/" + self.newname()
                self.call(f"rename {rel} {new} (open)", 0, os.rename, self.p(rel), self.p(new))
                del self.ns[rel]
                self.ns[new] = node
                rel = new
            elif r < 0.8:
                self.call(f"unlink {rel} (open)", 0, os.unlink, self.p(rel))
                del self.ns[rel]
                node.nlink -= 1
                self.check_absent(rel)
            off = self.rand_offset()
            data = self.rand_bytes(self.rng.choice([5, 3000]))
            self.call(f"pwrite fd of {rel} @{off} +{len(data)}", 0, os.pwrite, fd, data, off)
            if len(node.data) < off:
                node.data.extend(b"\0" * (off - len(node.data)))
            node.data[off:off + len(data)] = data
            if self.rng.random() < 0.3:
                size = self.rand_offset()
                self.call(f"ftruncate fd of {rel} {size}", 0, os.ftruncate, fd, size)
                if size < len(node.data):
                    del node.data[size:]
                else:
                    node.data.extend(b"\0" * (size - len(node.data)))
            st = os.fstat(fd)
            if st.st_size != len(node.data) or st.st_nlink != node.nlink or st.st_ino != node.ino:
                self.fail(f"fstat fd of {rel}: size {st.st_size} nlink {st.st_nlink} ino {st.st_ino}, "
                          f"want {len(node.data)} {node.nlink} {node.ino}")
            got = os.pread(fd, len(node.data) + 10, 0)
            if got != bytes(node.data):
                self.fail(f"pread fd of {rel}: {len(got)} bytes differ from the model's {len(node.data)}")
        finally:
            os.close(fd)
        for n, i in self.ns.items():
            if i is node:
                self.check_entry(n, i)
                self.check_content(n, i)

    # ---- the shared folder (invariant 2) -------------------------------------
    def op_shared(self):
        own = f"w{self.k}_"
        r = self.rng.random()
        common = f"shared/common{self.rng.randrange(3)}"
        if r < 0.3 or not self.sh:
            rel = f"shared/{own}{self.newname()}" if self.rng.random() < 0.7 else \
                f"{common}/{own}{self.newname()}"
            if rel.startswith(common):
                self.call(f"mkdir {common} (shared)", {0, errno.EEXIST}, os.mkdir, self.p(common), 0o755)
            data = self.rand_bytes(self.rng.choice([10, 3000, 70000]))
            self.call(f"create {rel}", 0, lambda: open(self.p(rel), "xb").write(data))
            node = Inode('f', 0o644, data)
            self.sh[rel] = node
            self.check_content(rel, node)
        elif r < 0.5:
            rel = self.rng.choice(sorted(self.sh))
            self.call(f"unlink {rel}", 0, os.unlink, self.p(rel))
            del self.sh[rel]
            self.check_absent(rel)
        elif r < 0.65:
            rel = self.rng.choice(sorted(self.sh))
            new = f"shared/{own}{self.newname()}"
            self.call(f"rename {rel} {new}", 0, os.rename, self.p(rel), self.p(new))
            self.sh[new] = self.sh.pop(rel)
            self.check_absent(rel)
            self.check_content(new, self.sh[new])
        elif r < 0.8:
            rel = self.rng.choice(sorted(self.sh))
            val = self.rand_bytes(20)
            self.call(f"setxattr {rel}", 0, os.setxattr, self.p(rel), "user.w", val)
            got = self.call(f"getxattr {rel}", 0, os.getxattr, self.p(rel), "user.w")
            if got != val:
                self.fail(f"getxattr {rel}: {got!r}, want {val!r}")
            self.sh[rel].xattrs["user.w"] = val
        else:
            for folder in ("shared", common):
                try:
                    got = set(os.listdir(self.p(folder)))
                except FileNotFoundError:
                    if folder == common and not any(n.startswith(common + "/") for n in self.sh):
                        continue
                    raise
                mine = {n[len(folder) + 1:] for n in self.sh
                        if n.startswith(folder + "/") and "/" not in n[len(folder) + 1:]}
                if not mine <= got:
                    self.fail(f"readdir {folder}: missing own {sorted(mine - got)[:5]}")
                for n in got:
                    if n.startswith(own) and n not in mine:
                        self.fail(f"readdir {folder}: own name {n} that was removed or renamed")
                    if not (n.startswith("w") and "_" in n or n.startswith("common")):
                        self.fail(f"readdir {folder}: unexpected name {n}")

    OPS = [("create", 12), ("write", 14), ("truncate", 5), ("read", 12), ("mkdir", 6),
           ("rmdir", 4), ("unlink", 7), ("symlink", 4), ("readlink", 3), ("link", 5),
           ("chmod", 3), ("xattr", 6), ("readdir", 5), ("rename", 12), ("shared", 6),
           ("openfd", 4)]

    def run(self):
        names = [n for n, _ in self.OPS]
        weights = [w for _, w in self.OPS]
        for self.opno in range(self.nops):
            op = self.rng.choices(names, weights)[0]
            if op in ("create", "mkdir", "symlink", "link") and len(self.ns) > 400:
                op = self.rng.choice(["unlink", "rmdir", "rename"])
            self.counts[op] = self.counts.get(op, 0) + 1
            getattr(self, "op_" + op)()

    def verify_all(self):
        """Invariant 3 for this worker's subtree: walk it and compare."""
        for rel, node in sorted(self.ns.items()):
            self.check_entry(rel, node)
            if node.kind == 'f':
                self.check_content(rel, node)
                got = sorted(x for x in os.listxattr(self.p(rel)) if x.startswith("user."))
                if got != sorted(node.xattrs):
                    self.fail(f"listxattr {rel}: {got}, want {sorted(node.xattrs)}")
                for name, val in node.xattrs.items():
                    if os.getxattr(self.p(rel), name) != val:
                        self.fail(f"getxattr {rel} {name} differs")
            if node.kind == 'd':
                got = sorted(os.listdir(self.p(rel)))
                if got != self.children(rel):
                    self.fail(f"final readdir {rel}: {got[:8]}, want {self.children(rel)[:8]}")
        for rel, node in sorted(self.sh.items()):
            self.check_content(rel, node)


def worker_main(root, k, seed, nops, q):
    os.umask(0)
    w = Worker(root, k, seed, nops, True)
    t0 = time.monotonic()
    try:
        w.run()
        w.opno = "final"
        w.verify_all()
    except (Mismatch, OSError) as e:
        print(f"fsstress worker {k} seed {seed} op #{w.opno}: MISMATCH: {e}", flush=True)
        print("  last operations:\n    " + "\n    ".join(w.hist), flush=True)
        q.put((k, False, [], {}, 0))
        sys.exit(1)
    q.put((k, True, sorted(w.sh), w.counts, time.monotonic() - t0))


def listing(root):
    """Canonical text of everything under root: type, mode, size, nlink, inode,
    content hash, xattrs, link target; the same tree gives the same text."""
    import hashlib
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        for n in sorted(dirs + files):
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            line = f"{os.path.relpath(p, root)} {oct(st.st_mode)} ino={st.st_ino}"
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    line += f" size={st.st_size} nlink={st.st_nlink} sha256={hashlib.sha256(f.read()).hexdigest()}"
            if stat.S_ISLNK(st.st_mode):
                line += f" -> {os.readlink(p)}"
            else:
                for x in sorted(os.listxattr(p)):
                    line += f" {x}={os.getxattr(p, x).hex()}"
            out.append(line)
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--listing":
        sys.stdout.write(listing(sys.argv[2]))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=int(os.environ.get("XT_SEED", "0")) or None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1, 2**31)
    print(f"fsstress: seed {seed} (XT_SEED={seed} repeats), {a.ops} operations, {a.workers} workers",
          flush=True)
    roots = a.root.split(":")       # the same folder seen through several mounts
    a.root = roots[0]
    for k in range(a.workers):
        os.mkdir(os.path.join(a.root, f"w{k}"), 0o755)
    os.mkdir(os.path.join(a.root, "shared"), 0o755)
    q = mp.Queue()
    procs = [mp.Process(target=worker_main,
                        args=(roots[k % len(roots)], k, seed, a.ops // a.workers, q))
             for k in range(a.workers)]
    for p in procs:
        p.start()
    results = []
    while len(results) < len(procs):  # a worker killed before it reports must not hang us
        try:
            results.append(q.get(timeout=1))
        except queue.Empty:
            if not any(p.is_alive() for p in procs):
                try:
                    results.append(q.get(timeout=1))
                except queue.Empty:
                    break
    for p in procs:
        p.join()
    if (len(results) < len(procs) or not all(r[1] for r in results) or
            any(p.exitcode for p in procs)):
        print(f"fsstress: FAILED (seed {seed})")
        return 1
    # invariant 3 for the shared folder: exactly the union of the workers' names
    want = set()
    for r in results:
        want.update(r[2])
    got = set()
    for dirpath, dirs, files in os.walk(os.path.join(a.root, "shared")):
        rel = os.path.relpath(dirpath, a.root)
        got.update(f"{rel}/{f}" for f in files)
    if got != want:
        print(f"fsstress: shared folder: extra {sorted(got - want)[:5]}, missing {sorted(want - got)[:5]}")
        print(f"fsstress: FAILED (seed {seed})")
        return 1
    counts = {}
    for r in results:
        for op, n in r[3].items():
            counts[op] = counts.get(op, 0) + n
    print("fsstress: ops " + " ".join(f"{op}={n}" for op, n in sorted(counts.items())))
    print(f"fsstress: OK (seed {seed}), slowest worker {max(r[4] for r in results):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
