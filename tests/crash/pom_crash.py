#!/usr/bin/env python3
"""pom_crash.py -- the crash harness (issue 8): kill a daemon at a random
moment under a workload on a real mount, restart it, and check that nothing
durable was lost and nothing is torn.

    pom_crash.py --pomctl build/r2/pomctl [--kills N] [--seed S] [--targets mds,mdsl,r2,pomfs]

One `pomctl up --mount` cluster (R2, MDSL, MDS, pomfs; sticky ports, so a
restarted daemon comes back where its peers look for it) in a temporary
folder. Each round:

  1. a worker process runs a seeded random mix on the mount -- create or
     overwrite a file (0 B..16 KiB, sometimes 80..300 KiB), fsync it or not,
     rename (also over an existing name, also across folders), unlink,
     fsync of a folder -- and appends to a journal, before each operation, which paths
     it may touch ("intent") and, after it returned, what it did;
  2. after a random delay the harness SIGKILLs the chosen daemon (R2, MDS,
     MDSL or pomfs itself, by the pid `pomctl up` recorded), then the worker;
  3. `pomctl up --mount` restarts what is missing (a killed pomfs leaves a
     dead mount: it is lazily unmounted first);
  4. the check, against the journal: every path whose content was made
     durable (its fsync, or a folder's fsync, returned) and that no later operation
     touched is present with exactly that content ("lost" otherwise); every
     file present has content that some write produced in full, or is empty
     (an O_TRUNC may have landed) ("torn" otherwise); no name appears that
     the workload never used.
  5. `pomctl fsck`, when pomctl has it, must report the fs clean.
  The state found becomes the model of the next round (after a sync).

Prints `kills: N, lost: L, torn: T` and exits 1 unless both are 0.
Daemons and the mount are stopped by pid (`pomctl down`) on every exit.
"""
import argparse
import errno
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

DIRS = ["d0", "d1", "d2"]
NAMES = [f"f{i}" for i in range(24)]


def h(b):
    return hashlib.sha256(b).hexdigest()[:32]


def dirsync(path):
    """fsync of a folder: pomfs makes every acknowledged change durable
    (one commit group holds them all: docs/client.md). syncfs(2) and sync(2)
    cannot be used on a FUSE mount: the kernel sends the file system no
    request for them (only virtiofs gets FUSE_SYNCFS)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- the worker (a child process) -------------------------------------------

def worker(mnt, journal, seed, big, keep_data=None):
    rnd = random.Random(seed)
    jfd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(*f):
        os.write(jfd, (" ".join(f) + "\n").encode())

    def rpath():
        return f"{rnd.choice(DIRS)}/{rnd.choice(NAMES)}"

    while True:
        op = rnd.random()
        try:
            if op < 0.55:
                p = rpath()
                n = rnd.randint(0, 16384)
                if big and rnd.random() < 0.08:
                    n = rnd.randint(80 << 10, 300 << 10)
                data = rnd.randbytes(n)
                if keep_data:
                    with open(os.path.join(keep_data, h(data)), "wb") as kf:
                        kf.write(data)
                log("I", p, h(data), str(n))   # intent: p may now hold data
                fd = os.open(os.path.join(mnt, p), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, data)
                    if rnd.random() < 0.5:
                        os.fsync(fd)
                        log("F", p, h(data))   # durable
                    else:
                        log("W", p, h(data))
                finally:
                    os.close(fd)
            elif op < 0.75:
                a, b = rpath(), rpath()
                if a == b:
                    continue
                log("IR", a, b)
                os.rename(os.path.join(mnt, a), os.path.join(mnt, b))
                log("R", a, b)
            elif op < 0.9:
                p = rpath()
                log("IU", p)
                os.unlink(os.path.join(mnt, p))
                log("U", p)
            else:
                log("IS")
                dirsync(os.path.join(mnt, rnd.choice(DIRS)))
                log("S")
        except FileNotFoundError:
            log("E", "ENOENT")
        except OSError as e:
            log("E", e.strerror.replace(" ", "_") if e.strerror else "OSError")
            time.sleep(0.02)


# ---- the model ---------------------------------------------------------------

class Model:
    """What the mount must show after a crash.

    cur:      path -> content hash, as the acknowledged operations left it
    durable:  path -> content hash (None: durably absent), as of the last
              point each path was made durable
    touched:  paths an operation may have changed after their durable point
    seen:     every content hash ever written (plus the empty file)

    Files past the inline limit get no allowance: every write here is an
    O_TRUNC rewrite, which goes to new tracts (copy-on-write), so a crash
    shows the old or the new bytes whole, never a mix.
    """

    def __init__(self, state):
        self.cur = dict(state)
        self.durable = {p: state.get(p) for p in self.all_paths()}
        self.touched = set()
        self.seen = set(state.values()) | {h(b"")}

    @staticmethod
    def all_paths():
        return [f"{d}/{n}" for d in DIRS for n in NAMES]

    def apply(self, line):
        f = line.split()
        if not f:
            return
        k = f[0]
        if k == "I":
            self.touched.add(f[1])
            self.seen.add(f[2])
        elif k in ("W", "F"):
            self.cur[f[1]] = f[2]
            if k == "F":
                self.durable[f[1]] = f[2]
                self.touched.discard(f[1])
        elif k == "IR":
            self.touched.update((f[1], f[2]))
        elif k == "R":
            if f[1] in self.cur:
                self.cur[f[2]] = self.cur.pop(f[1])
        elif k == "IU":
            self.touched.add(f[1])
        elif k == "U":
            self.cur.pop(f[1], None)
        elif k == "S":  # a folder's fsync returned: all acknowledged is durable
            self.durable = {p: self.cur.get(p) for p in self.all_paths()}
            # an operation begun but not acknowledged before the sync
            # returned cannot be in flight: the worker is sequential
            self.touched = set()


def explain(got, data_dir):
    """Which written content a torn file is made of: the write sharing the
    longest prefix with it, and what the rest is (zeros, that write's tail)."""
    best, best_n = None, -1
    for name in os.listdir(data_dir):
        with open(os.path.join(data_dir, name), "rb") as fh:
            w = fh.read()
        n = 0
        lim = min(len(w), len(got))
        while n < lim and w[n] == got[n]:
            n += 1
        if n > best_n:
            best, best_n, best_w = name, n, w
    if best is None:
        return "no writes kept"
    rest = got[best_n:]
    what = ("zeros" if rest and not rest.strip(b"\0") else
            "empty" if not rest else f"{len(rest) - len(rest.lstrip(bytes([rest[0]])))} "
            f"bytes of 0x{rest[0]:02x} then other bytes")
    return (f"first {best_n} bytes = write {best} ({len(best_w)} bytes); "
            f"then {len(rest)} bytes: {what}")


def diagnose(path, got, data_dir, seen, tmp):
    """--explain: what a torn file is made of, and whether it is still so
    past the kernel's cache timeouts and with its caches dropped (a cache
    showing stale state heals; a torn row does not)."""
    print(f"    made of: {explain(got, data_dir)}; inode {os.stat(path).st_ino}; "
          f"folder {tmp}", flush=True)

    def again(what):
        try:
            with open(path, "rb") as fh:
                b = fh.read()
            print(f"    {what}: {len(b)} bytes, " +
                  ("same" if b == got else "a written content" if h(b) in seen else
                   "made of: " + explain(b, data_dir)), flush=True)
        except OSError as e:
            print(f"    {what}: {e}", flush=True)

    time.sleep(2.5)  # past the kernel's caches (timeouts 1 s)
    again("2.5 s later")
    try:
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3")
        again("caches dropped")
    except OSError as e:
        print(f"    cannot drop caches: {e}", flush=True)


def read_state(mnt, raw=None):
    """(path -> content hash, path -> size) of the files on the mount;
    raw (a dict), when given, gets path -> bytes."""
    st, sizes = {}, {}
    for d in DIRS:
        for n in os.listdir(os.path.join(mnt, d)):
            p = f"{d}/{n}"
            with open(os.path.join(mnt, p), "rb") as fh:
                b = fh.read()
            st[p], sizes[p] = h(b), len(b)
            if raw is not None:
                raw[p] = b
    return st, sizes


# ---- the harness -------------------------------------------------------------

class Cluster:
    def __init__(self, pomctl, tmp):
        self.pomctl = pomctl
        self.data = os.path.join(tmp, "data")
        self.mnt = os.path.join(tmp, "mnt")
        os.makedirs(self.mnt)

    def up(self):
        r = subprocess.run([self.pomctl, "up", "--data", self.data, "--mount", self.mnt],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
        if r.returncode != 0:
            raise RuntimeError(f"pomctl up failed ({r.returncode}):\n{r.stdout}")

    def down(self):
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], stderr=subprocess.DEVNULL)
        subprocess.run([self.pomctl, "down", "--data", self.data],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120)

    def pid(self, daemon):
        with open(os.path.join(self.data, "run", daemon + ".pid")) as fh:
            return int(fh.readline())

    def fsck(self):
        """(ran, clean, output) of `pomctl fsck` if pomctl has it."""
        r = subprocess.run([self.pomctl, "--data", self.data, "fsck", "--data-check"],
                           stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=300)
        if r.returncode == 2 and "unknown command" in r.stdout:
            return False, True, r.stdout
        return True, r.returncode == 0, r.stdout


DAEMON = {"mds": "pom-mds", "mdsl": "pom-mdsl", "r2": "pom-r2", "pomfs": "pomfs"}


def wait_dead(pid, seconds=10.0):
    """SIGKILL is asynchronous: until the process is gone (or a zombie no one
    reaps: pomctl's daemons are not our children), `pomctl up` would take
    it for running and reuse it."""
    end = time.time() + seconds
    while time.time() < end:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return
        time.sleep(0.01)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pomctl", required=True)
    ap.add_argument("--kills", type=int, default=int(os.environ.get("POM_CRASH_KILLS", "50")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("XT_SEED", "0")) or None)
    ap.add_argument("--targets", default="mds,mdsl,r2,pomfs")
    ap.add_argument("--big", action="store_true", help="also files past the inline limit")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the folder of a failed run")
    ap.add_argument("--explain", action="store_true",
                    help="keep every written content and say what a torn file is made of")
    a = ap.parse_args()
    if os.environ.get("POM_TEST_LONG") == "1":
        a.kills *= 10
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        print("SKIP: no /dev/fuse or fusermount3")
        return 77
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    print(f"seed {seed} (XT_SEED={seed} to repeat)", flush=True)
    rnd = random.Random(seed)
    targets = a.targets.split(",")
    tmp = tempfile.mkdtemp(prefix="pom-crash.")
    cl = Cluster(os.path.realpath(a.pomctl), tmp)
    kills = lost = torn = stray = fsck_bad = fsck_runs = eio_after_restart = 0
    counts = {t: 0 for t in targets}
    ok = False
    try:
        cl.up()
        for d in DIRS:
            os.mkdir(os.path.join(cl.mnt, d))
        dirsync(cl.mnt)
        model = Model({})
        journal = os.path.join(tmp, "journal")
        data_dir = os.path.join(tmp, "writes") if a.explain else None
        if data_dir:
            os.mkdir(data_dir)
        t_start = time.time()
        for rnd_no in range(a.kills):
            open(journal, "w").close()
            wpid = os.fork()
            if wpid == 0:
                try:
                    worker(cl.mnt, journal, rnd.randrange(1 << 30), a.big, data_dir)
                finally:
                    os._exit(0)
            time.sleep(rnd.uniform(0.05, 0.8))
            target = rnd.choice(targets)
            victim = cl.pid(DAEMON[target])
            try:
                os.kill(victim, signal.SIGKILL)
                wait_dead(victim)
            except ProcessLookupError:
                pass
            kills += 1
            counts[target] += 1
            time.sleep(rnd.uniform(0.0, 0.3))
            # The worker may sit in a FUSE request already sent to pomfs,
            # which the kernel lets no signal interrupt: it dies once pomfs
            # answers, i.e. once the killed daemon is back. So restart first.
            os.kill(wpid, signal.SIGKILL)
            if target == "pomfs":
                subprocess.run(["fusermount3", "-u", "-z", cl.mnt], stderr=subprocess.DEVNULL)
            t_up = time.time()
            cl.up()
            t_up = time.time() - t_up
            t_w = time.time()
            os.waitpid(wpid, 0)
            t_w = time.time() - t_w
            with open(journal) as fh:
                lines = fh.readlines()
            if data_dir:  # --explain: keep every round's journal
                shutil.copy(journal, f"{journal}.{rnd_no}")
            for line in lines:
                model.apply(line)
            t_r = time.time()
            raw = {} if data_dir else None
            state, sizes = read_state(cl.mnt, raw)
            t_r = time.time() - t_r
            for p, want in model.durable.items():
                if p in model.touched:
                    continue
                got = state.get(p)
                if got != want:
                    lost += 1
                    print(f"LOST round {rnd_no} ({target} killed): {p}: want "
                          f"{want or 'absent'}, got {got or 'absent'}; this round's "
                          f"operations on it:", flush=True)
                    for line in lines:
                        if p in line.split():
                            print("    " + line.rstrip(), flush=True)
            for p, got in state.items():
                if p not in model.durable:
                    stray += 1
                    print(f"STRAY round {rnd_no}: {p} was never written", flush=True)
                elif got not in model.seen:
                    torn += 1
                    print(f"TORN round {rnd_no} ({target} killed): {p}: {got}, "
                          f"{sizes.get(p)} bytes; this round's operations on it:", flush=True)
                    if data_dir:
                        diagnose(os.path.join(cl.mnt, p), raw[p], data_dir, model.seen, tmp)
                    for line in lines:
                        if p in line.split():
                            print("    " + line.rstrip(), flush=True)
            if data_dir and torn:
                break  # --explain: stop at the first torn file, state kept
            ran, clean, out = cl.fsck()
            if ran:
                fsck_runs += 1
                if not clean:
                    fsck_bad += 1
                    print(f"FSCK round {rnd_no} ({target} killed):\n{out}", flush=True)
            t_s = time.time()
            try:
                dirsync(cl.mnt)
            except OSError as e:
                # EIO once after an MDS restart: changes the dead MDS had
                # acknowledged may be lost (the worker's, judged above)
                if e.errno != errno.EIO:
                    raise
                eio_after_restart += 1
                dirsync(cl.mnt)
            t_s = time.time() - t_s
            model = Model(state)
            if a.verbose:
                print(f"round {rnd_no}: killed {target}; up {t_up:.1f} s, then worker "
                      f"gone in {t_w:.1f} s, read {t_r:.1f} s, sync {t_s:.1f} s; {len(state)} files",
                      flush=True)
        orphans_left = reclaim_check(cl)
        took = time.time() - t_start
        print(f"kills by target: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
        print(f"fsck runs: {fsck_runs}, not clean: {fsck_bad}" if fsck_runs else
              "fsck: pomctl has no fsck command yet")
        print(f"{kills} kills in {took:.0f} s; a sync after the restart said EIO "
              f"{eio_after_restart} times (acknowledged, unsynced changes of a killed MDS)")
        print(f"kills: {kills}, lost: {lost}, torn: {torn}, stray: {stray}", flush=True)
        ok = lost == 0 and torn == 0 and stray == 0 and fsck_bad == 0 and orphans_left == 0
    except Exception as e:  # a daemon that does not come back is a failure too
        print(f"FAIL: {e}", flush=True)
        logs = os.path.join(cl.data, "logs")
        if os.path.isdir(logs):
            for f in sorted(os.listdir(logs)):
                with open(os.path.join(logs, f), errors="replace") as fh:
                    print(f"--- {f} (tail)\n" + "".join(fh.readlines()[-15:]))
    finally:
        cl.down()
        if ok or not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"kept {tmp}")
    print(f"{1 if ok else 0} passed, {0 if ok else 1} failed")
    return 0 if ok else 1


def reclaim_check(cl, interval=2, grace=5, seconds=90):
    """The orphan tract sets the kills left (a killed pomfs's unflushed
    migrations, removals it had queued; docs/format-blob.md "Reclaiming
    orphans") go online: pomfs restarted with a short reclaim interval and
    grace age, `pomctl fsck` must soon count none. Returns the orphans left."""
    import json
    pid = cl.pid("pomfs")
    subprocess.run(["fusermount3", "-u", cl.mnt], check=True)
    wait_dead(pid)
    r = subprocess.run([cl.pomctl, "up", "--data", cl.data, "--mount", cl.mnt, "--mount-opts",
                        f"reclaim={interval},reclaim_grace={grace}"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    if r.returncode != 0:
        raise RuntimeError(f"pomctl up --mount-opts failed ({r.returncode}):\n{r.stdout}")
    end, first = time.time() + seconds, None
    while True:
        r = subprocess.run([cl.pomctl, "--data", cl.data, "--json", "fsck"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=300)
        n = json.loads(r.stdout).get("orphan_sets", 0) if r.stdout.strip() else -1
        first = n if first is None else first
        if n == 0 or time.time() > end:
            print(f"orphan tract sets after the kills: {first}; after the reclaimer "
                  f"(interval {interval} s, grace {grace} s): {n}", flush=True)
            return n
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
