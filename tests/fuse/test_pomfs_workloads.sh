#!/bin/bash
# test_pomfs_workloads.sh POMCTL POMFS SRCDIR -- application workloads on one
# mount of a `pomctl up` cluster, each printed as
# "WORKLOAD name: PASS|FAIL (checks) in S s":
#   1. build: this repository's sources (git ls-files -co of SRCDIR) copied
#      onto the mount, configured with cmake + ninja in a build folder on the
#      mount, targets xt_row xt_hash xt_slice test_xt_row built there, and the
#      unit test binary run from the mount;
#   2. git: a repository of ~5,000 files (from /usr/include, two commits) made
#      in the host's temporary folder, cloned onto the mount (git transport),
#      git fsck --full, status clean, checkout of the first commit equal to
#      `git archive` of it, cloned back off the mount and compared;
#   3. rsync: a tree with symlinks (relative, absolute, dangling), modes,
#      mtimes, files over 64 KiB (blob tier) and hard links, rsync -aH into the
#      mount and back out; rsync -c --dry-run --itemize-changes reports
#      nothing, sha256sum listings are equal, hard links share an inode;
#   4. sqlite3: thousands of small transactions with journal_mode DELETE and
#      with WAL (shared mmap of the -shm file; a reader process beside the
#      writer), results equal to the same script run on the host's disk,
#      PRAGMA integrity_check ok -- and again after a remount (with the rsync
#      dry run);
#   5. fsstress: test_pomfs_workloads_fsstress.py, ~20,000 random operations
#      from 2 processes, every result checked against an in-memory model
#      (seed printed; XT_SEED=S repeats it, XT_FSSTRESS_OPS=N changes the count);
#      then the tree is listed (types, modes, sizes, nlink, inodes, sha256,
#      xattrs, link targets), remounted and listed again: the same; then a
#      third as many operations through two mounts (worker K on mount K mod 2).
# Environment: XT_SQLITE_TXNS (default 2000 per journal mode), XT_SQLITE_SYNCED
# (default 300: DELETE-mode transactions run with synchronous=FULL; the rest OFF).
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
SRC=$(realpath "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
M=$T/m
pl_mount "$M"

W_NAME="" W_T0=0 W_FAIL0=0 W_PASS0=0
workload() { # name: starts a workload (ends the previous one)
    workload_end
    W_NAME=$1 W_T0=$EPOCHREALTIME W_FAIL0=$FAIL W_PASS0=$PASS
    echo "--- $W_NAME"
}
workload_end() {
    [ -n "$W_NAME" ] || return 0
    local s; s=$(awk -v a="$W_T0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
    local verdict=PASS
    [ "$FAIL" -gt "$W_FAIL0" ] && verdict=FAIL
    echo "WORKLOAD $W_NAME: $verdict ($((PASS - W_PASS0)) passed, $((FAIL - W_FAIL0)) failed) in $s s"
    W_NAME=""
}
step() { # description command...: like ok, and prints the step's time
    local t0=$EPOCHREALTIME d=$1
    ok "$@"
    echo "  $d: $(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s"
}
G="git -c user.name=pom -c user.email=pom@example.invalid -c init.defaultBranch=main -c advice.detachedHead=false"

# ---- 1. build a C project on the mount -------------------------------------
workload build
mkdir -p "$M/src"
(cd "$SRC" && git ls-files -coz --exclude-standard 2>/dev/null) >"$T/files"
if [ -s "$T/files" ]; then
    step "copy $(tr -cd '\0' <"$T/files" | wc -c) source files onto the mount" \
        bash -c "cd '$SRC' && xargs -0r cp -a --parents -t '$M/src' <'$T/files' 2>'$T/cp.err'; ! grep -v 'No such file' '$T/cp.err'"
    step "cmake configure (source and build folder on the mount)" \
        cmake -S "$M/src" -B "$M/build" -G Ninja -DCMAKE_BUILD_TYPE=Release
    step "ninja xt_row xt_hash xt_slice test_xt_row" \
        cmake --build "$M/build" -j2 --target xt_row xt_hash xt_slice test_xt_row
    step "run test_xt_row from the mount" "$M/build/tests/xtable/test_xt_row"
    ok "no-op rebuild finds nothing to do" bash -c \
        "cmake --build '$M/build' -j2 --target test_xt_row -- -n -d explain 2>&1 | grep -q 'no work to do'"
else
    echo "SKIP build: $SRC is not a git work tree"
fi

# ---- 2. git clone of a large repository ------------------------------------
workload git
HR=$T/hostrepo
mkdir -p "$HR"
(cd /usr/include && find . -type f -size -200k -print0 | sort -z | head -zn 5000 |
    xargs -0r cp --parents -t "$HR")
ln -s stdio.h "$HR/link-to-stdio.h"
echo "repository: $(find "$HR" -type f | wc -l) files, $(du -sh "$HR" | cut -f1)"
$G -C "$HR" init -q && $G -C "$HR" add -A && $G -C "$HR" commit -qm first
# second commit: 50 files changed, 20 removed, 20 added
(cd "$HR" && git ls-files | awk 'NR % 97 == 0' | head -50 | while read -r f; do echo "/* changed */" >>"$f"; done
 git ls-files | awk 'NR % 89 == 1' | head -20 | xargs rm -f
 mkdir -p added && for i in $(seq 20); do seq "$i" 500 >"added/f$i"; done)
$G -C "$HR" add -A && $G -C "$HR" commit -qm second
step "git clone (git transport) onto the mount" $G clone -q --no-local "$HR" "$M/clone"
step "git fsck --full on the mount" $G -C "$M/clone" fsck --full
eq "git status clean after clone" "$($G -C "$M/clone" status --porcelain | wc -l)" "0"
eq "HEAD is the host's" "$($G -C "$M/clone" rev-parse HEAD)" "$($G -C "$HR" rev-parse HEAD)"
step "checkout of the first commit" $G -C "$M/clone" checkout -q HEAD~1
eq "git status clean after checkout" "$($G -C "$M/clone" status --porcelain | wc -l)" "0"
mkdir "$T/first"; $G -C "$HR" archive HEAD~1 | tar -C "$T/first" -xf -
ok "work tree of the first commit = git archive of it" diff -r --no-dereference -x .git "$T/first" "$M/clone"
ok "back to main" $G -C "$M/clone" checkout -q main
step "git clone back off the mount" $G clone -q --no-local "$M/clone" "$T/back"
ok "cloned-back tree = the host's" diff -r --no-dereference -x .git "$HR" "$T/back"
eq "cloned-back HEAD" "$($G -C "$T/back" rev-parse HEAD)" "$($G -C "$HR" rev-parse HEAD)"
ok "git fsck --full of the clone back" $G -C "$T/back" fsck --full

# ---- 3. rsync in and out ---------------------------------------------------
workload rsync
if command -v rsync >/dev/null; then
    RT=$T/rtree
    mkdir -p "$RT/src" "$RT/bin" "$RT/private" "$RT/empty/deeper" "$RT/links" "$RT/big"
    cp -r "$SRC/xtable" "$RT/src/"
    head -c 70000 /dev/urandom >"$RT/big/70k"
    head -c $((1 << 20)) /dev/urandom >"$RT/big/1m"
    head -c 300000 /dev/urandom >"$RT/big/300k"
    head -c 65536 /dev/urandom >"$RT/big/exactly-64k"
    : >"$RT/empty-file"
    echo '#!/bin/sh' >"$RT/bin/tool"; chmod 0755 "$RT/bin/tool"
    echo secret >"$RT/private/key"; chmod 0600 "$RT/private/key"; chmod 0700 "$RT/private"
    echo ro >"$RT/ro"; chmod 0444 "$RT/ro"
    chmod 2755 "$RT/bin"; chmod 1777 "$RT/empty"
    ln -s ../src/xtable "$RT/links/dir"; ln -s /nonexistent/target "$RT/links/dangling"
    ln -s ../big/1m "$RT/links/big"; ln -s "$(printf 'x%.0s' $(seq 200))" "$RT/links/long"
    ln "$RT/big/300k" "$RT/links/hard-300k"; ln "$RT/big/300k" "$RT/src/hard-300k"
    ln "$RT/ro" "$RT/links/hard-ro"
    touch -d '2001-02-03 04:05:06.123456789' "$RT/big/1m" "$RT/empty/deeper"
    touch -h -d '1999-12-31 23:59:59' "$RT/links/dangling"
    touch -d '2020-01-01' "$RT/private"
    echo "tree: $(find "$RT" -type f | wc -l) files, $(find "$RT" -type l | wc -l) symlinks, $(du -sh "$RT" | cut -f1)"
    rlisting() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0r sha256sum
                  find . -printf '%p %y %m %s %n %TY-%Tm-%Td_%TH:%TM:%.2TS [%l]\n' | grep -v '^\. ' |
                      awk '$2 == "d" { $4 = "-"; $5 = "-" } 1' | sort); }
    step "rsync -aH into the mount" rsync -aH "$RT/" "$M/rtree/"
    eq "rsync -c --dry-run -i to the mount: no difference" \
        "$(rsync -aHc --dry-run --itemize-changes "$RT/" "$M/rtree/" 2>&1)" ""
    step "rsync -aH out of the mount" rsync -aH "$M/rtree/" "$T/rback/"
    eq "rsync -c --dry-run -i back: no difference" \
        "$(rsync -aHc --dry-run --itemize-changes "$RT/" "$T/rback/" 2>&1)" ""
    rlisting "$RT" >"$T/r.want"
    rlisting "$M/rtree" >"$T/r.mount"
    rlisting "$T/rback" >"$T/r.back"
    ok "listing (sha256, type, mode, size, link, nlink, mtime) on the mount" diff "$T/r.want" "$T/r.mount"
    ok "listing after the round trip" diff "$T/r.want" "$T/r.back"
    eq "hard links share one inode on the mount" \
        "$(stat -c %i "$M/rtree/big/300k" "$M/rtree/links/hard-300k" "$M/rtree/src/hard-300k" | sort -u | wc -l)" "1"
    echo more >>"$RT/src/xtable/xt_row.c"; touch -d '2010-01-01' "$RT/ro"; rm "$RT/links/dangling"
    step "incremental rsync -aH --delete" rsync -aH --delete "$RT/" "$M/rtree/"
    eq "no difference after the incremental run" \
        "$(rsync -aHc --dry-run --itemize-changes --delete "$RT/" "$M/rtree/" 2>&1)" ""
else
    FAIL=$((FAIL+1)); echo "FAIL: rsync is not installed (scripts/install-deps.sh installs it)"
fi

# ---- 4. sqlite3 ------------------------------------------------------------
workload sqlite
NTX=${XT_SQLITE_TXNS:-2000}
sql_script() { # journal-mode transactions synced-transactions: schema + one transaction per line
    echo "PRAGMA journal_mode=$1;"
    echo "PRAGMA synchronous=FULL;"
    echo "CREATE TABLE t(id INTEGER PRIMARY KEY, k INT, n INT DEFAULT 0, v TEXT); CREATE INDEX tk ON t(k);"
    awk -v n="$2" -v nsync="$3" 'BEGIN { for (i = 1; i <= n; i++) {
        if (i == nsync + 1) print "PRAGMA synchronous=OFF;"
        printf "BEGIN; INSERT INTO t(id, k, v) VALUES(%d, %d, printf(\"%%0%dd\", %d));", i, (i * 7919) % 1000, 50 + i % 200, i
        printf " UPDATE t SET n = n + 1 WHERE id = %d;", int((i + 1) / 2)
        if (i % 5 == 0) printf " DELETE FROM t WHERE id = %d;", i - 3
        print " COMMIT;" } }'
}
sql_check() { # db: integrity and the numbers the script must give
    sqlite3 "$1" "PRAGMA integrity_check; SELECT count(*), sum(k), sum(n), sum(length(v)), max(id) FROM t;"
}
if command -v sqlite3 >/dev/null; then
    mkdir -p "$M/db" "$T/hostdb"
    for mode in delete wal; do
        # DELETE: every transaction creates, writes and removes the journal, but
        # only the first XT_SQLITE_SYNCED of them fsync (each fsync waits for
        # an MDS commit group: ~40 ms here, too slow for thousands in CI)
        nsync=$NTX; [ $mode = delete ] && nsync=${XT_SQLITE_SYNCED:-300}
        sql_script $mode "$NTX" "$nsync" >"$T/$mode.sql"
        # the reference on the host's disk, without fsync (only the result matters)
        sed 's/synchronous=FULL/synchronous=OFF/' "$T/$mode.sql" |
            sqlite3 "$T/hostdb/$mode.db" >"$T/$mode.host.out" 2>&1
        sql_check "$T/hostdb/$mode.db" >"$T/$mode.want"
        step "$NTX transactions, journal_mode=$mode" bash -c "sqlite3 '$M/db/$mode.db' <'$T/$mode.sql' >'$T/$mode.out' 2>&1"
        ok "journal_mode=$mode was accepted and nothing failed" diff "$T/$mode.host.out" "$T/$mode.out"
        sql_check "$M/db/$mode.db" >"$T/$mode.got" 2>&1
        ok "$mode: integrity_check ok, counts and sums as on the host" diff "$T/$mode.want" "$T/$mode.got"
    done
    # WAL's -shm index is a MAP_SHARED mmap: stores through one mapping must
    # reach read() and a second mapping (FUSE allows it without direct_io)
    ok "shared writable mmap on the mount" python3 -c "
import mmap, os, sys
p = sys.argv[1]
fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644); os.ftruncate(fd, 32768)
a = mmap.mmap(fd, 32768, mmap.MAP_SHARED); b = mmap.mmap(fd, 32768, mmap.MAP_SHARED)
a[100:105] = b'hello'; a.flush()
assert b[100:105] == b'hello', 'second mapping'
assert os.pread(fd, 5, 100) == b'hello', 'read()'
os.pwrite(fd, b'world', 200); assert a[200:205] == b'world', 'write() to mapping'
" "$M/db/mmap-probe"
    # WAL with two processes: the -shm file is shared through mmap
    awk -v n=300 -v b="$NTX" 'BEGIN { for (i = b + 1; i <= b + n; i++)
        printf "BEGIN; INSERT INTO t(id, k, v) VALUES(%d, 1, \"x\"); COMMIT;\n", i }' >"$T/wal2.sql"
    (for i in $(seq 150); do sqlite3 -cmd ".timeout 10000" "$M/db/wal.db" "SELECT count(*) FROM t WHERE k >= 0;" || exit 1; done) \
        >"$T/reader.out" 2>&1 &
    rpid=$!
    step "WAL: a writer (300 transactions) beside a reader process" bash -c "sqlite3 -cmd '.timeout 10000' '$M/db/wal.db' <'$T/wal2.sql'"
    wait "$rpid"; eq "WAL reader process exit status" "$?" "0"
    ok "WAL reader saw monotonic counts" bash -c "sort -c -n '$T/reader.out'"
    sqlite3 -cmd "PRAGMA synchronous=OFF" "$T/hostdb/wal.db" <"$T/wal2.sql"; sql_check "$T/hostdb/wal.db" >"$T/wal.want"
    sql_check "$M/db/wal.db" >"$T/wal.got" 2>&1
    ok "WAL after the two-process run" diff "$T/wal.want" "$T/wal.got"
    # remount: everything comes back from the servers
    pl_umount "$M"; pl_mount "$M"
    for mode in delete wal; do
        sql_check "$M/db/$mode.db" >"$T/$mode.got2" 2>&1
        ok "$mode after a remount" diff "$T/$mode.want" "$T/$mode.got2"
    done
    eq "rsync -c --dry-run -i after the remount: no difference" \
        "$(rsync -aHc --dry-run --itemize-changes --delete "$RT/" "$M/rtree/" 2>&1)" ""
else
    FAIL=$((FAIL+1)); echo "FAIL: sqlite3 is not installed (scripts/install-deps.sh installs it)"
fi

# ---- 5. fsstress with a model ----------------------------------------------
workload fsstress
mkdir "$M/fss"
step "fsstress ${XT_FSSTRESS_OPS:-20000} operations" \
    python3 "$HERE/test_pomfs_workloads_fsstress.py" "$M/fss" --ops "${XT_FSSTRESS_OPS:-20000}"
grep '^fsstress:' "$T/cmd.log" | tail -4
grep -A30 'MISMATCH' "$T/cmd.log" | head -40
python3 "$HERE/test_pomfs_workloads_fsstress.py" --listing "$M/fss" >"$T/fss.1"
pl_umount "$M"; pl_mount "$M"
python3 "$HERE/test_pomfs_workloads_fsstress.py" --listing "$M/fss" >"$T/fss.2"
ok "fsstress tree after a remount (types, modes, sizes, nlink, inodes, sha256, xattrs, links)" \
    diff "$T/fss.1" "$T/fss.2"
echo "  fsstress tree: $(wc -l <"$T/fss.1") entries"
# the same mix through two mounts (two clients): worker K uses mount K mod 2
pl_mount "$T/m2"
mkdir "$M/fss2"
NOPS2=$(( ${XT_FSSTRESS_OPS:-20000} / 3 ))
nlog=$(( $(wc -l <"$T/cmd.log") + 1 ))
step "fsstress $NOPS2 operations through two mounts" \
    python3 "$HERE/test_pomfs_workloads_fsstress.py" "$M/fss2:$T/m2/fss2" --ops "$NOPS2"
tail -n +"$nlog" "$T/cmd.log" | grep -A30 '^fsstress: seed\|MISMATCH' | grep -v '^fsstress: ops' | head -40
pl_umount "$T/m2"
workload_end

pl_umount "$M"
pl_done
