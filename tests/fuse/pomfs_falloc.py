#!/usr/bin/env python3
"""pomfs_falloc.py -- fallocate(2) modes on a pomfs mount against a reference.

  pomfs_falloc.py run DIR REFDIR SEED   random operations on DIR/{inline,blob}
                                        and the same on REFDIR/{inline,blob}
  pomfs_falloc.py same DIR REFDIR       the files hold the same bytes

Every operation (write, truncate, fallocate modes 0, KEEP_SIZE,
PUNCH_HOLE|KEEP_SIZE, ZERO_RANGE with and without KEEP_SIZE) runs on the
pomfs file and on the reference file; both must answer the same (success
or the same errno) and hold the same bytes after it. COLLAPSE_RANGE and
INSERT_RANGE must answer EOPNOTSUPP: the kernel does not pass them to a
FUSE file system (the library's own test, test_pom_blob_client, covers
them); a kernel that starts passing them fails this check. The reference is a file on the host file system of
REFDIR (ext4 and xfs do every mode with 4 KiB blocks); if it refuses a mode
the script stops with exit 2 (no reference, no test). "inline" stays around
64 KiB (the row) and crosses it; "blob" lives in tracts (4 MiB) from the
first operation. Offsets are mostly block-aligned (collapse and insert want
that) and sometimes not (EINVAL both sides).
"""
import ctypes
import errno
import os
import random
import sys

KEEP, PUNCH, COLLAPSE, ZERO, INSERT = 0x01, 0x02, 0x08, 0x10, 0x20
MODES = {
    "alloc": 0, "alloc_keep": KEEP, "punch": PUNCH | KEEP, "zero": ZERO,
    "zero_keep": ZERO | KEEP,
}
BLK = 4096
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]


def fallocate(fd, mode, off, length):
    """0 or the errno."""
    if libc.fallocate(fd, mode, off, length) == 0:
        return 0
    return ctypes.get_errno()


def call(fn):
    try:
        fn()
        return 0
    except OSError as e:
        return e.errno


def content(path):
    with open(path, "rb") as f:
        return f.read()


def pick(rng, size, span):
    """An offset and a length: block-aligned 7 times in 8."""
    if rng.random() < 0.875:
        off = rng.randrange(0, max(size + BLK, span) // BLK + 1) * BLK
        return off, rng.randrange(1, max(2, span // BLK // 4)) * BLK
    return rng.randrange(0, max(size, span)), rng.randrange(1, span // 4)


def run(mnt, ref, seed):
    rng = random.Random(seed)
    for name, span, start in (("inline", 80 << 10, 40 << 10), ("blob", 9 << 20, 6 << 20)):
        a, b = os.path.join(mnt, name), os.path.join(ref, name)
        fa = os.open(a, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        fb = os.open(b, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        data = rng.randbytes(start)
        os.pwrite(fa, data, 0)
        os.pwrite(fb, data, 0)
        seen = set()
        # Each mode once where it must succeed, then a random mix.
        fixed = [("zero", 3 * BLK, 2 * BLK + 100), ("punch", 1000, 9000),
                 ("zero_keep", start - BLK, 8 * BLK), ("zero", start, 3 * BLK),
                 ("zero", 100, span), ("alloc", span, BLK), ("alloc_keep", 2 * span, BLK)]
        for mode in (COLLAPSE, INSERT):
            if fallocate(fa, mode, BLK, BLK) != errno.EOPNOTSUPP:
                print(f"FAIL {name}: mode {mode:#x} reached pomfs: add it to the mix")
                return 1
        for step in range(len(fixed) + 60):
            size = os.fstat(fb).st_size
            if step < len(fixed):
                op, off, length = fixed[step]
            else:
                op = rng.choice(list(MODES) + ["write", "write", "truncate"])
                off, length = pick(rng, size, span)
            if op == "write":
                buf = rng.randbytes(min(length, 256 << 10))
                ra = call(lambda: os.pwrite(fa, buf, off))
                rb = call(lambda: os.pwrite(fb, buf, off))
            elif op == "truncate":
                n = rng.randrange(0, span)
                ra = call(lambda: os.ftruncate(fa, n))
                rb = call(lambda: os.ftruncate(fb, n))
            else:
                rb = fallocate(fb, MODES[op], off, length)
                if rb == errno.EOPNOTSUPP:
                    print(f"reference {ref} refuses {op}: no reference")
                    sys.exit(2)
                ra = fallocate(fa, MODES[op], off, length)
            what = f"{name} step {step}: {op} {off} {length} (size {size})"
            if ra != rb:
                print(f"FAIL {what}: pomfs {errno.errorcode.get(ra, ra)}, "
                      f"reference {errno.errorcode.get(rb, rb)}")
                return 1
            if os.fstat(fa).st_size != os.fstat(fb).st_size or content(a) != content(b):
                print(f"FAIL {what}: the bytes differ (sizes {os.fstat(fa).st_size}, "
                      f"{os.fstat(fb).st_size})")
                return 1
            seen.add(op if rb == 0 else op + ":" + errno.errorcode.get(rb, str(rb)))
        os.fsync(fa)
        os.close(fa)
        os.close(fb)
        print(name, "ok, size", os.path.getsize(b), "ops", " ".join(sorted(seen)))
    return 0


def same(mnt, ref):
    for name in ("inline", "blob"):
        if content(os.path.join(mnt, name)) != content(os.path.join(ref, name)):
            print(f"FAIL {name}: differs from the reference after a remount")
            return 1
    print("same after a remount")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "run":
        sys.exit(run(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    sys.exit(same(sys.argv[2], sys.argv[3]))
