#!/usr/bin/env python3
"""pomfs_diskfull.py MOUNT -- the workload of test_pomfs_diskfull.sh on a
mount whose whole cluster folder sits on a small tmpfs:

  fill    an empty directory, a 2 MiB file (blob tier), then 8 KiB files,
          each fsynced, until a call answers ENOSPC (any other error, or no
          ENOSPC before MAX_FILES, fails);
  check   every acknowledged file (its fsync answered 0) reads back exactly;
  full    on the full disk: a truncate to 0 and an rmdir succeed, and the
          truncated file's fsync answers 0 (they commit from the reserve);
  free    the big file and every second small file are removed;
  resume  65 new 8 KiB files, each tried until its fsync answers 0
          (a liveness bound of RESUME_S seconds from the freeing, not a
          speed); they and the kept files read back.

Prints one line per step; exits 1 at the first failed check."""
import errno
import hashlib
import os
import sys
import time

MAX_FILES = 20000
RESUME_S = 30


def content(name, size):
    # Chained digests joined once: appending to a bytes object copies it
    # each time, which made the 2 MiB file cost minutes of CPU under load.
    out, seed = [], name.encode()
    for _ in range((size + 31) // 32):
        seed = hashlib.sha256(seed).digest()
        out.append(seed)
    return b"".join(out)[:size]


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def write_synced(path, size):
    """0 when written and fsynced, else the errno of the first failing call."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        return e.errno
    err = 0
    try:
        os.write(fd, content(os.path.basename(path), size))
        os.fsync(fd)
    except OSError as e:
        err = e.errno
    try:
        os.close(fd)
    except OSError as e:
        err = err or e.errno
    return err


def read_ok(path, size):
    with open(path, "rb") as f:
        return f.read() == content(os.path.basename(path), size)


def main():
    m = sys.argv[1]
    os.mkdir(os.path.join(m, "empty"))
    big = os.path.join(m, "big")
    if write_synced(big, 2 << 20):
        fail("the 2 MiB file did not write")
    acked, err, t0 = [], 0, time.monotonic()
    for i in range(MAX_FILES):
        p = os.path.join(m, "f%05d" % i)
        err = write_synced(p, 8192)
        if err:
            break
        acked.append(p)
    if err != errno.ENOSPC:
        fail("fill ended with %s after %d files, want ENOSPC" %
             (errno.errorcode.get(err, err) if err else "no error", len(acked)))
    print("fill: %d files of 8 KiB acknowledged, then ENOSPC (%.1f s)" %
          (len(acked), time.monotonic() - t0), flush=True)
    if len(acked) < 100:
        fail("too few files before ENOSPC")
    bad = [p for p in acked if not read_ok(p, 8192)]
    if bad or not read_ok(big, 2 << 20):
        fail("%d acknowledged files do not read back" % len(bad))
    print("check: every acknowledged file reads back", flush=True)

    # Full: these free space or add none, so they commit from the reserve.
    os.truncate(acked[1], 0)
    fd = os.open(acked[1], os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:
        fail("fsync after a truncate on the full disk: %s" % errno.errorcode[e.errno])
    finally:
        os.close(fd)
    os.rmdir(os.path.join(m, "empty"))
    print("full: truncate, its fsync and rmdir succeed", flush=True)

    os.unlink(big)
    for p in acked[0::2]:
        os.unlink(p)
    kept = acked[3::2]
    print("free: removed the big file and %d small files" % len(acked[0::2]), flush=True)

    # GC gives the freed rows' space back segment by segment: a write may
    # still meet ENOSPC until it has caught up, so each one is retried
    # until RESUME_S after the freeing (liveness, not speed).
    t0 = time.monotonic()
    new = [os.path.join(m, "n%05d" % i) for i in range(65)]
    for k, p in enumerate(new):
        while True:
            err = write_synced(p, 8192)
            if err == 0:
                break
            if err != errno.ENOSPC:
                fail("new file %s: %s" % (p, errno.errorcode.get(err, err)))
            if time.monotonic() - t0 > RESUME_S:
                fail("writes did not resume within %d s of freeing (%d of %d written)" %
                     (RESUME_S, k, len(new)))
            time.sleep(0.5)
        if k == 0:
            print("resume: a new file fsynced %.1f s after freeing" %
                  (time.monotonic() - t0), flush=True)
    print("resume: %d new files fsynced %.1f s after freeing" %
          (len(new), time.monotonic() - t0), flush=True)
    bad = [p for p in new + kept if not read_ok(p, 8192)]
    if bad:
        fail("%d files do not read back after freeing (first %s)" % (len(bad), bad[0]))
    if os.path.getsize(acked[1]) != 0 or os.path.exists(os.path.join(m, "empty")):
        fail("the truncate or the rmdir did not stay")
    print("resume: %d new and %d kept files read back" % (len(new), len(kept)), flush=True)


main()
