#!/usr/bin/env python3
"""test_lost_fsync.py -- changes an MDS restart lost are reported by every
fsync that covers them (docs/client.md "Lost changes"), on a real mount.

    test_lost_fsync.py POMCTL

A `pomctl up --mount` cluster in a temporary folder. Files a and b are
created and written (1,000 B each, acknowledged, not synced), a second
read-only descriptor of a is opened, file w (synced before) is rewritten
and closed, a descriptor of the folder is open; pom-mds is SIGKILLed and
`pomctl up --data DIR` restarts it. Then:
  - fsync(a), fsync(b), fsync of a's second descriptor, the folder's
    fsync, and fsync of w opened again all answer EIO, once each;
  - a, b are gone, w holds its synced bytes;
  - a file c created after the restart, written and fsynced answers 0 and
    reads back; a folder descriptor opened after answers 0.
Before the report was kept per descriptor, fsync(a) answered EIO and
fsync(b) 0 (both files gone). Exit 0 pass, 1 fail, 77 skip.
"""
import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "crash"))
from pom_crash import wait_dead  # noqa: E402 (the crash harness's: SIGKILL is asynchronous)

FAILS = []


def check(what, ok):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILS.append(what)


def fsync_rc(fd):
    """0, or the errno fsync raised."""
    try:
        os.fsync(fd)
        return 0
    except OSError as e:
        return e.errno


def up(pomctl, data, mnt=None):
    """`pomctl up` (its output shown only when it fails)."""
    cmd = [pomctl, "up", "--data", data] + (["--mount", mnt] if mnt else [])
    with tempfile.TemporaryFile(mode="w+") as out:
        r = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=180)
        if r.returncode != 0:
            out.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{out.read()}")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        print("SKIP: no /dev/fuse or fusermount3")
        return 77
    pomctl = os.path.realpath(sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="pom-lostfsync.")
    data, mnt = os.path.join(tmp, "data"), os.path.join(tmp, "mnt")
    os.makedirs(mnt)
    fds = []
    try:
        up(pomctl, data, mnt)
        d = os.path.join(mnt, "d")
        os.mkdir(d)
        old = os.urandom(1000)
        with open(os.path.join(d, "w"), "wb") as fh:
            fh.write(old)
            fh.flush()
            os.fsync(fh.fileno())
        for p in (mnt, d):
            dfd = os.open(p, os.O_RDONLY | os.O_DIRECTORY)
            os.fsync(dfd)
            os.close(dfd)

        # The kill and the restart run in a process forked before any
        # descriptor on the mount is open: a process started while they are
        # open (fork, exec) closes its copies, and each close is a FUSE
        # flush that waits for the MDS being restarted.
        go_r, go_w = os.pipe()
        done_r, done_w = os.pipe()
        killer = os.fork()
        if killer == 0:
            os.close(go_w)
            os.close(done_r)
            said = "ok"
            try:
                if os.read(go_r, 1) == b"k":
                    with open(os.path.join(data, "run", "pom-mds.pid")) as fh:
                        pid = int(fh.readline())
                    os.kill(pid, signal.SIGKILL)
                    wait_dead(pid)
                    up(pomctl, data)
            except Exception as e:
                said = repr(e)
            os.write(done_w, said.encode())
            os._exit(0)
        os.close(go_r)
        os.close(done_w)
        dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        fds.append(dfd)
        fa = os.open(os.path.join(d, "a"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        fb = os.open(os.path.join(d, "b"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        fds += [fa, fb]
        os.write(fa, os.urandom(1000))
        os.write(fb, os.urandom(1000))
        fa2 = os.open(os.path.join(d, "a"), os.O_RDONLY)
        fds.append(fa2)
        fw = os.open(os.path.join(d, "w"), os.O_WRONLY | os.O_TRUNC)
        os.write(fw, os.urandom(1000))
        os.close(fw)  # acknowledged by the MDS (the flush), not synced

        os.write(go_w, b"k")
        said = os.read(done_r, 4096).decode()
        os.waitpid(killer, 0)
        if said != "ok":
            raise RuntimeError(said)

        check("fsync(a) answers EIO", fsync_rc(fa) == errno.EIO)
        check("fsync(b) answers EIO", fsync_rc(fb) == errno.EIO)
        check("fsync(a) again answers 0 (said once)", fsync_rc(fa) == 0)
        check("fsync of a's second descriptor answers EIO", fsync_rc(fa2) == errno.EIO)
        fw = os.open(os.path.join(d, "w"), os.O_RDONLY)
        check("w closed before the kill, opened again: fsync answers EIO",
              fsync_rc(fw) == errno.EIO)
        check("w holds its synced bytes", os.read(fw, 2000) == old)
        os.close(fw)
        check("the folder's fsync answers EIO", fsync_rc(dfd) == errno.EIO)
        check("the folder's fsync again answers 0", fsync_rc(dfd) == 0)
        check("a and b are gone", sorted(os.listdir(d)) == ["w"])

        payload = os.urandom(1000)
        fc = os.open(os.path.join(d, "c"), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fc, payload)
        check("fsync of c, made after the restart, answers 0", fsync_rc(fc) == 0)
        os.close(fc)
        with open(os.path.join(d, "c"), "rb") as fh:
            check("c reads back", fh.read() == payload)
        dfd2 = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        check("a folder descriptor opened after answers 0", fsync_rc(dfd2) == 0)
        os.close(dfd2)
        for fd in fds:
            try:
                os.close(fd)
            except OSError as e:
                check(f"close after the report answers 0 (got {e})", False)
        fds = []
    except Exception as e:  # a daemon that does not come back is a failure too
        check(f"no exception ({e!r})", False)
    finally:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        subprocess.run(["fusermount3", "-u", "-z", mnt], stderr=subprocess.DEVNULL)
        subprocess.run([pomctl, "down", "--data", data], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=120)
        if not FAILS:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    print(f"{len(FAILS)} failed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
