#!/usr/bin/env python3
"""pom_crash.py -- the crash harness: kill a daemon at a random
moment under a workload on a real mount, restart it, and check that nothing
durable was lost and nothing is torn.

    pom_crash.py --pomctl build/cli/pomctl [--kills N] [--seed S] [--writers W]
                 [--targets mds,mdsl,r2,pomfs] [--big]
                 [--mdsl N] [--replicas R [--wipe]]

One `pomctl up --mount` cluster (R2, MDSL, MDS, pomfs; sticky ports, so a
restarted daemon comes back where its peers look for it) in a temporary
folder. Each round:

  1. --writers worker processes (3) run a seeded random mix on the mount,
     each in folders of its own (w<k>/d0, w<k>/d1): create or overwrite a
     file (O_TRUNC; 0 B..16 KiB, sometimes around 64 KiB, with --big up
     to 1 MiB), fsync it or not, open an existing file and fsync it,
     rename (also over an existing name, also across folders), hard
     link, unlink, fsync of a folder -- and append to a journal, before
     each operation, which paths it may touch ("intent") and, after it
     returned, what it did;
  2. after a random delay the harness SIGKILLs the chosen daemon (R2, MDS,
     one of the --mdsl MDSL chosen at random, or pomfs itself, by the pid
     `pomctl up` recorded) and marks the moment in every journal ("K");
     with --wipe (--replicas 2 or more) a killed MDSL also loses its disk:
     its folder is emptied but for its site id, so it comes back empty and
     must catch up from its peers while the writers go on
     (docs/mdsl-replicas.md "Catch-up of a returning MDSL");
  3. `pomctl up --mount` restarts what is missing (a killed pomfs leaves a
     dead mount: it is lazily unmounted first); the workers go on across
     the restart for a moment (their fsyncs after it are what an MDS
     restart used to answer wrongly), then stop;
  4. the check, against the journals: every promise an fsync that
     returned 0 made and no later operation touched holds -- a file's
     fsync: the file's bytes at every name it has; a folder's fsync: which
     of its names exist (and which file each is). A broken promise of an
     fsync that returned before the kill is "lost", of one that returned
     after it "false fsync" (it vouched for changes the restart had lost:
     docs/client.md "Lost changes"). Every file present has content that
     some write produced in full, or is empty ("torn" otherwise); no name
     appears that the workload never used ("stray").
  5. `pomctl fsck`, when pomctl has it, must report the fs clean.
  With --wipe, a round that wiped an MDSL ends once `pomctl status`
  counts 0 under-replicated slices over every MDSL (the repair finished;
  120 s at most), so the next disk lost leaves r - 1 whole copies; the
  repair times are printed.
  The state found is the next round's starting point; promises not broken
  nor touched carry over.

Prints `kills: N, lost: L, torn: T, false fsync: F, stray: S` and exits 1
unless all are 0.
Daemons and the mount are stopped by pid (`pomctl down`) on every exit.
"""
import argparse
import errno
import json
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SUBDIRS = ["d0", "d1"]
NAMES = [f"f{i}" for i in range(12)]
UNKNOWN = "?"  # Model.cur: an operation on the path may or may not have happened


def h(b):
    return hashlib.sha256(b).hexdigest()[:32]


def dirs_of(k):
    return [f"w{k}/{d}" for d in SUBDIRS]


def paths_of(k):
    return [f"{d}/{n}" for d in dirs_of(k) for n in NAMES]


def dirsync(path):
    """fsync of a folder: its names are durable (docs/client.md "Lost
    changes"). syncfs(2) and sync(2) cannot be used on a FUSE mount: the
    kernel sends the file system no request for them (only virtiofs gets
    FUSE_SYNCFS)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---- the worker (a child process) -------------------------------------------

def worker(mnt, k, journal, stop, seed, big, keep_data=None):
    """Operations on w<k>/ until the file `stop` exists. Journal lines:
    intents (I p hash, IO p, IR a b, IL a b, IU p, IS d) before, results
    (O p ino: opened, W p ino hash, F p ino hash, FO p ino, R a b, L a b,
    U p, S d, E why) after; the harness adds K at the kill."""
    rnd = random.Random(seed)
    jfd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(*f):
        os.write(jfd, (" ".join(f) + "\n").encode())

    def rpath():
        return f"{rnd.choice(dirs_of(k))}/{rnd.choice(NAMES)}"

    def size():
        r = rnd.random()
        if r < 0.15:  # both sides of the 64 KiB inline limit
            return rnd.randint(60 << 10, 70 << 10)
        if big and r < 0.27:
            return rnd.randint(80 << 10, 1 << 20)
        return rnd.randint(0, 16384)

    while not os.path.exists(stop):
        op = rnd.random()
        try:
            if op < 0.45:
                p = rpath()
                data = rnd.randbytes(size())
                if keep_data:
                    with open(os.path.join(keep_data, h(data)), "wb") as kf:
                        kf.write(data)
                log("I", p, h(data))   # intent: p (and its file's names) may now hold data
                fd = os.open(os.path.join(mnt, p), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    ino = str(os.fstat(fd).st_ino)
                    log("O", p, ino)   # its bytes change (O_TRUNC), at every name
                    os.write(fd, data)
                    log("W", p, ino, h(data))
                    if rnd.random() < 0.5:
                        os.fsync(fd)
                        log("F", p, ino, h(data))   # the file's bytes are durable
                finally:
                    os.close(fd)
            elif op < 0.53:
                p = rpath()
                log("IO", p)
                fd = os.open(os.path.join(mnt, p), os.O_RDONLY)
                try:
                    ino = str(os.fstat(fd).st_ino)
                    os.fsync(fd)
                    log("FO", p, ino)   # whatever the file holds is durable
                finally:
                    os.close(fd)
            elif op < 0.68:
                a, b = rpath(), rpath()
                if a == b:
                    continue
                log("IR", a, b)
                os.rename(os.path.join(mnt, a), os.path.join(mnt, b))
                log("R", a, b)
            elif op < 0.78:
                a, b = rpath(), rpath()
                if a == b:
                    continue
                log("IL", a, b)
                os.link(os.path.join(mnt, a), os.path.join(mnt, b))
                log("L", a, b)
            elif op < 0.9:
                p = rpath()
                log("IU", p)
                os.unlink(os.path.join(mnt, p))
                log("U", p)
            else:
                d = rnd.choice(dirs_of(k))
                log("IS", d)
                dirsync(os.path.join(mnt, d))
                log("S", d)
        except OSError as e:
            log("E", errno.errorcode.get(e.errno, "OSError"))
            if e.errno not in (errno.ENOENT, errno.EEXIST):
                time.sleep(0.02)


# ---- the model ---------------------------------------------------------------

class Model:
    """One worker's files and the promises its fsyncs made.

    cur:      path -> (inode, content hash), None (absent) or UNKNOWN, as
              the operations that returned left it
    promises: path -> (what, phase): what = ("bytes", inode, hash) from a
              file's fsync, ("name", inode or None) from a folder's fsync;
              phase "before" or "after" the kill
    seen:     every content hash ever written (plus the empty file)

    An intent makes its paths UNKNOWN and drops their promises (the
    operation may or may not happen); a rewrite does so for every name of
    the file. At the kill every value no promise backs becomes "shaky": the
    restart may have lost the change that made it (an unlink nobody
    fsynced comes back), so a rename or link after the kill that moves a
    shaky value makes its target UNKNOWN instead of copying a guess into
    another folder, whose fsync would then seem to break a promise. Files past the inline limit get no allowance: every write
    is an O_TRUNC rewrite, which goes to new tracts (copy-on-write), so a
    crash shows the old or the new bytes whole, never a mix.
    """

    def __init__(self, k, state, seen):
        self.k = k
        self.cur = {p: state.get(p) for p in paths_of(k)}
        self.promises = {}
        self.before = {}
        self.last = ("", "")
        self.seen = seen
        self.phase = "before"
        self.shaky = set()
        self.before_shaky = set()

    def names_of(self, ino):
        return [p for p, v in self.cur.items() if v not in (None, UNKNOWN) and v[0] == ino]

    def failed(self, why):
        """The last operation failed: after a write, an fsync or a close
        that failed (the bytes may not have reached the MDS: pomfs killed)
        or a folder's fsync that answered EIO (changes it covers may be
        lost), what the model holds for them is not known."""
        kind, arg = self.last
        if kind == "IS" and why == "EIO":
            self.touch(*[p for p in self.cur if p.startswith(arg + "/")])
        elif kind in ("I", "IO"):
            v = self.cur.get(arg)
            self.touch(arg, *(self.names_of(v[0]) if v not in (None, UNKNOWN) else []))

    def backed(self, p):
        """Whether a promise vouches for what cur holds at p."""
        v, pr = self.cur.get(p), self.promises.get(p)
        if v is UNKNOWN or pr is None:
            return False
        what = pr[0]
        if what[0] == "bytes":
            return v == (what[1], what[2])
        return v is None if what[1] is None else (v is not None and v[0] == what[1])

    def touch(self, *paths):
        self.before = {p: self.cur.get(p) for p in paths}
        self.before_shaky = {p for p in paths if p in self.shaky}
        self.shaky.difference_update(paths)
        for p in paths:
            self.cur[p] = UNKNOWN
            self.promises.pop(p, None)

    def apply(self, line):
        f = line.split()
        if not f:
            return
        k = f[0]
        if k[0] == "I":
            self.last = (k, f[1])
        if k == "K":
            self.phase = "after"
            self.shaky = {p for p in self.cur if not self.backed(p)}
        elif k == "E":
            self.failed(f[1])
        elif k == "I":
            self.seen.add(f[2])
            old = self.cur.get(f[1])
            self.touch(f[1], *(self.names_of(old[0]) if old not in (None, UNKNOWN) else []))
        elif k in ("IR", "IL"):
            self.touch(f[1], f[2])
        elif k == "IU":
            self.touch(f[1])
        elif k == "O":
            self.touch(*[q for q, (what, _) in self.promises.items()
                         if what[0] == "bytes" and what[1] == f[2]])
            self.touch(f[1], *self.names_of(f[2]))
        elif k in ("W", "F"):
            self.cur[f[1]] = (f[2], f[3])
            if k == "F":
                for p in self.names_of(f[2]):
                    self.promises[p] = (("bytes", f[2], f[3]), self.phase)
        elif k == "FO":
            for p in self.names_of(f[2]):
                self.promises[p] = (("bytes",) + self.cur[p], self.phase)
        elif k == "R":
            a, b = (UNKNOWN if p in self.before_shaky else self.before.get(p, UNKNOWN)
                    for p in (f[1], f[2]))
            if a is UNKNOWN or b is UNKNOWN:  # (two names of one file: rename does nothing)
                self.cur[f[2]], self.cur[f[1]] = a, UNKNOWN
            elif not (a and b and a[0] == b[0]):
                self.cur[f[2]], self.cur[f[1]] = a, None
            else:
                self.cur[f[1]], self.cur[f[2]] = a, b
        elif k == "L":
            self.cur[f[1]] = self.cur[f[2]] = (UNKNOWN if f[1] in self.before_shaky
                                               else self.before.get(f[1], UNKNOWN))
        elif k == "U":
            self.cur[f[1]] = None
        elif k == "S":
            for p, v in self.cur.items():
                if p.startswith(f[1] + "/") and v is not UNKNOWN:
                    self.promises[p] = (("name", v[0] if v else None), self.phase)
        # E: the intent's paths stay UNKNOWN until the next round reads them

    def check(self, state):
        """(lost, false fsync) lines: promises the state does not keep."""
        broken = []
        for p, (what, phase) in sorted(self.promises.items()):
            got = state.get(p)
            ok = (got == (what[1], what[2]) if what[0] == "bytes" else
                  (got is None) if what[1] is None else (got is not None and got[0] == what[1]))
            if not ok:
                broken.append((p, what, phase, got))
        for p, _, _, _ in broken:
            del self.promises[p]
        self.cur = {p: state.get(p) for p in paths_of(self.k)}
        self.phase = "before"
        self.shaky = set()
        return broken


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


def read_state(mnt, writers, raw=None):
    """(path -> (inode, content hash), path -> size) of the files on the
    mount; raw (a dict), when given, gets path -> bytes."""
    st, sizes = {}, {}
    for k in range(writers):
        for d in dirs_of(k):
            for n in os.listdir(os.path.join(mnt, d)):
                p = f"{d}/{n}"
                with open(os.path.join(mnt, p), "rb") as fh:
                    b = fh.read()
                    st[p], sizes[p] = (str(os.fstat(fh.fileno()).st_ino), h(b)), len(b)
                if raw is not None:
                    raw[p] = b
    return st, sizes


# ---- the harness -------------------------------------------------------------

class Cluster:
    def __init__(self, pomctl, tmp, nmdsl=1, replicas=1):
        self.pomctl = pomctl
        self.data = os.path.join(tmp, "data")
        self.mnt = os.path.join(tmp, "mnt")
        self.nmdsl = nmdsl
        self.shape = ["--mdsl", str(nmdsl)] + \
            (["--mdsl-replicas", str(replicas)] if replicas > 1 else [])
        os.makedirs(self.mnt)

    def up(self):
        r = subprocess.run([self.pomctl, "up", "--data", self.data, "--mount", self.mnt]
                           + self.shape,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
        if r.returncode != 0:
            raise RuntimeError(f"pomctl up failed ({r.returncode}):\n{r.stdout}")

    def wipe(self, daemon):
        """The disk of a killed MDSL lost: its folder emptied but for its
        site id (pomctl up's layout: pom-mdsl in mdsl/, pom-mdsl-K in
        mdsl-K/)."""
        sub = os.path.join(self.data, daemon[len("pom-"):])
        with open(os.path.join(sub, "site_id")) as fh:
            site_id = fh.read()
        shutil.rmtree(sub)
        os.mkdir(sub)
        with open(os.path.join(sub, "site_id"), "w") as fh:
            fh.write(site_id)

    def under_replicated(self):
        """Slices `pomctl status` counts under-replicated, None until every
        MDSL counted."""
        r = subprocess.run([self.pomctl, "--data", self.data, "--json", "status"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=60)
        try:
            rep = json.loads(r.stdout).get("replicas") or {}
        except ValueError:
            return None
        n = rep.get("under_replicated")
        return n if isinstance(n, int) and rep.get("mdsl_counted") == self.nmdsl else None

    def wait_repaired(self, seconds):
        """Under-replicated slices once they are 0, or as last seen."""
        end, n = time.time() + seconds, None
        while n != 0 and time.time() < end:
            n = self.under_replicated()
            if n != 0:
                time.sleep(0.2)
        return n

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


def wait_child(pid, seconds):
    """Reaps child pid; False if it is still running after `seconds`."""
    end = time.time() + seconds
    while time.time() < end:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
        time.sleep(0.01)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pomctl", required=True)
    ap.add_argument("--kills", type=int, default=int(os.environ.get("POM_CRASH_KILLS", "50")))
    ap.add_argument("--seed", type=int, default=int(os.environ.get("XT_SEED", "0")) or None)
    ap.add_argument("--targets", default="mds,mdsl,r2,pomfs")
    ap.add_argument("--writers", type=int, default=3, help="worker processes")
    ap.add_argument("--big", action="store_true", help="also files past the inline limit")
    ap.add_argument("--mdsl", type=int, default=1, help="MDSL sites (pomctl up --mdsl)")
    ap.add_argument("--replicas", type=int, default=1, help="pomctl up --mdsl-replicas")
    ap.add_argument("--wipe", action="store_true",
                    help="a killed MDSL loses its disk (needs --replicas 2 or more)")
    ap.add_argument("-v", "--verbose", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the folder of a failed run")
    ap.add_argument("--explain", action="store_true",
                    help="keep every written content and say what a torn file is made of")
    a = ap.parse_args()
    if a.wipe and a.replicas < 2:
        ap.error("--wipe loses the only copy of its slices: it needs --replicas 2 or more")
    if not 1 <= a.replicas <= a.mdsl:
        ap.error(f"--replicas {a.replicas} needs 1..--mdsl ({a.mdsl}) MDSL")
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
    cl = Cluster(os.path.realpath(a.pomctl), tmp, a.mdsl, a.replicas)
    kills = lost = torn = stray = false_fsync = fsck_bad = fsck_runs = wipes = unrepaired = 0
    repair_s = []
    counts = {t: 0 for t in targets}
    ok = False
    try:
        cl.up()
        for k in range(a.writers):
            os.mkdir(os.path.join(cl.mnt, f"w{k}"))
            for d in dirs_of(k):
                os.mkdir(os.path.join(cl.mnt, d))
                dirsync(os.path.join(cl.mnt, d))
            dirsync(os.path.join(cl.mnt, f"w{k}"))
        dirsync(cl.mnt)
        seen = {h(b"")}
        models = [Model(k, {}, seen) for k in range(a.writers)]
        journals = [os.path.join(tmp, f"journal.{k}") for k in range(a.writers)]
        stop = os.path.join(tmp, "stop")
        data_dir = os.path.join(tmp, "writes") if a.explain else None
        if data_dir:
            os.mkdir(data_dir)
        t_start = time.time()
        for rnd_no in range(a.kills):
            wpids = []
            for k in range(a.writers):
                open(journals[k], "w").close()
                wseed = rnd.randrange(1 << 30)
                wpid = os.fork()
                if wpid == 0:
                    try:
                        worker(cl.mnt, k, journals[k], stop, wseed, a.big, data_dir)
                    finally:
                        os._exit(0)
                wpids.append(wpid)
            time.sleep(rnd.uniform(0.05, 0.8))
            target = rnd.choice(targets)
            daemon = DAEMON[target]
            if target == "mdsl" and a.mdsl > 1:
                k = rnd.randrange(1, a.mdsl + 1)
                daemon = daemon if k == 1 else f"{daemon}-{k}"
            victim = cl.pid(daemon)
            try:
                os.kill(victim, signal.SIGKILL)
                wait_dead(victim)
            except ProcessLookupError:
                pass
            for j in journals:  # what the workers log from here on returned after the kill
                with open(j, "a") as fh:
                    fh.write("K\n")
            kills += 1
            counts[target] += 1
            wiped = target == "mdsl" and a.wipe
            if wiped:
                cl.wipe(daemon)
                wipes += 1
            time.sleep(rnd.uniform(0.0, 0.3))
            t_back = time.time()
            if target == "pomfs":
                subprocess.run(["fusermount3", "-u", "-z", cl.mnt], stderr=subprocess.DEVNULL)
            t_up = time.time()
            cl.up()
            t_up = time.time() - t_up
            # The workers go on across the restart (an fsync after it must
            # not vouch for what the restart lost), then stop between two
            # operations.
            time.sleep(rnd.uniform(0.05, 0.4))
            open(stop, "w").close()
            t_w = time.time()
            for wpid in wpids:
                if not wait_child(wpid, 120.0):
                    print(f"round {rnd_no}: a worker did not stop in 120 s: killed", flush=True)
                    os.kill(wpid, signal.SIGKILL)
                    os.waitpid(wpid, 0)
            t_w = time.time() - t_w
            os.unlink(stop)
            lines = []
            for k, j in enumerate(journals):
                with open(j) as fh:
                    wl = fh.readlines()
                lines += [f"w{k}: {x}" for x in wl]
                if data_dir:  # --explain: keep every round's journals
                    shutil.copy(j, f"{j}.{rnd_no}")
                for line in wl:
                    models[k].apply(line)
            t_r = time.time()
            raw = {} if data_dir else None
            state, sizes = read_state(cl.mnt, a.writers, raw)
            t_r = time.time() - t_r
            for m in models:
                for p, what, phase, got in m.check(state):
                    kind = "LOST" if phase == "before" else "FALSE FSYNC"
                    if phase == "before":
                        lost += 1
                    else:
                        false_fsync += 1
                    print(f"{kind} round {rnd_no} ({target} killed): {p}: an fsync "
                          f"{'before' if phase == 'before' else 'after'} the kill promised "
                          f"{what}, got {got or 'absent'}; this round's operations on it:",
                          flush=True)
                    for line in lines:
                        if p in line.split():
                            print("    " + line.rstrip(), flush=True)
            universe = {q for k in range(a.writers) for q in paths_of(k)}
            for p, got in state.items():
                if p not in universe:
                    stray += 1
                    print(f"STRAY round {rnd_no}: {p} was never written", flush=True)
                elif got[1] not in seen:
                    torn += 1
                    print(f"TORN round {rnd_no} ({target} killed): {p}: {got}, "
                          f"{sizes.get(p)} bytes; this round's operations on it:", flush=True)
                    if data_dir:
                        diagnose(os.path.join(cl.mnt, p), raw[p], data_dir, seen, tmp)
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
            if wiped:
                # The next disk may fail only once this one is whole again:
                # r copies survive r - 1 losses *with time to repair between*
                # (docs/mdsl-replicas.md "Failure model: every replica, no fail-over").
                n = cl.wait_repaired(120)
                repair_s.append(time.time() - t_back)
                if n != 0:
                    unrepaired += 1
                    print(f"UNREPAIRED round {rnd_no}: {daemon} wiped, under-replicated "
                          f"slices {n} 120 s after its restart", flush=True)
                    break
            if a.verbose:
                print(f"round {rnd_no}: killed {target}; up {t_up:.1f} s, then workers "
                      f"stopped in {t_w:.1f} s, read {t_r:.1f} s; {len(state)} files, "
                      f"{sum(len(m.promises) for m in models)} promises held", flush=True)
        orphans_left = reclaim_check(cl)
        took = time.time() - t_start
        if a.wipe:
            print(f"MDSL wiped: {wipes}; each whole again (0 under-replicated slices) "
                  f"{max(repair_s, default=0):.1f} s at most after its restart "
                  f"(median {sorted(repair_s)[len(repair_s) // 2] if repair_s else 0:.1f} s); "
                  f"not repaired: {unrepaired}", flush=True)
        print(f"kills by target: " + ", ".join(f"{t} {n}" for t, n in counts.items()))
        print(f"fsck runs: {fsck_runs}, not clean: {fsck_bad}" if fsck_runs else
              "fsck: pomctl has no fsck command yet")
        print(f"{kills} kills in {took:.0f} s, {a.writers} writers")
        print(f"kills: {kills}, lost: {lost}, torn: {torn}, false fsync: {false_fsync}, "
              f"stray: {stray}", flush=True)
        ok = lost == 0 and torn == 0 and false_fsync == 0 and stray == 0 and fsck_bad == 0 and \
            orphans_left == 0 and unrepaired == 0
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
    r = subprocess.run([cl.pomctl, "up", "--data", cl.data, "--mount", cl.mnt, "-o",
                        f"reclaim={interval},reclaim_grace={grace}"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=180)
    if r.returncode != 0:
        raise RuntimeError(f"pomctl up -o failed ({r.returncode}):\n{r.stdout}")
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
