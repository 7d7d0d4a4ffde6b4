#!/bin/bash
# test_pomfs_reclaim.sh POMCTL POMFS -- orphan tract sets reclaimed online by
# the cluster's own mounts (client/pom_reclaim.c, docs/format-blob.md
# "Reclaiming orphans") on a `pomctl up` cluster:
#   - orphans as crashes leave them: a mount SIGKILLed while it holds a
#     large file it wrote but never flushed (a migration no row names), and
#     one made by hand at the path docs/format-blob.md gives, aged an hour;
#   - a reclaiming mount R (reclaim=1, reclaim_grace=3) and a writer mount
#     W (reclaim=0: leases only, same grace) holding, for longer than
#     several grace ages, an unflushed large file and an unlinked open one
#     (no row names either set), plus a flushed file and a hard-linked one
#     (its set named by its ILT row only) whose sets are old;
#   - the orphans go, W's in-flight files read back whole (byte for byte)
#     and then close, the flushed and the linked files are untouched,
#     `pomctl fsck` counts 0 orphans and is clean.
# Fails without the reclaimer (the orphans stay) and without the leases
# (W's in-flight sets go and read back wrong).
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
PC() { "$POMCTL" --data "$T/data" "$@"; }
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
FSID=$(PC --json fs stat pomfs | python3 -c 'import json,sys; print(json.load(sys.stdin)["fs"]["fsid"])')
B=$T/data/blobs/$(printf %08x "$FSID")
nsets() { find "$B" -mindepth 3 -maxdepth 3 -type d 2>/dev/null | wc -l; }

# ---- a crash's orphan: SIGKILL of a mount holding an unflushed big file
C=$T/c
pl_mount "$C" reclaim=0
head -c 300000 /dev/urandom >"$T/keep.data"
cp "$T/keep.data" "$C/keep"                      # flushed at close: named
cp "$T/keep.data" "$C/linked"; ln "$C/linked" "$C/linked2" # named by its ILT row only
python3 - "$C/crashed" "$T/ready" <<'EOF' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, os.urandom(500000))                 # migrated, row not flushed
open(sys.argv[2], "w").close()
time.sleep(600)
EOF
HOLDER=$!
within "the crashing writer wrote" 30 test -e "$T/ready"
kill -9 "${PL_PID[$C]}"; wait "${PL_PID[$C]}" 2>/dev/null
kill -9 "$HOLDER"; wait "$HOLDER" 2>/dev/null
fusermount3 -u -z "$C"
unset "PL_PID[$C]"
eq "sets after the crash: keep, linked + the orphan" "$(nsets)" 3
# Every set an hour old (the orphan's and keep's): only the rows and the
# leases keep a set.
find "$B" -mindepth 1 -exec touch -d '1 hour ago' {} +
# ---- an orphan by hand (a fresh id, bit 63 set) at its hashed place
HID=$(printf '%016x' $(( (RANDOM << 48 | RANDOM << 32 | RANDOM << 16 | RANDOM) | (1 << 63) )))
HD=$B/$(python3 "$(dirname "$0")/pom_blobpath.py" "$HID")
mkdir -p "$HD/000000"
head -c 100000 /dev/urandom >"$HD/000000/00000000"
touch -d '1 hour ago' "$HD" "$HD/000000" "$HD/000000/00000000"
eq "sets before reclaim: keep, linked + 2 orphans" "$(nsets)" 4
PC --json fsck >"$T/f0.json" 2>/dev/null
eq "fsck counts 2 orphans" "$(jget orphan_sets <"$T/f0.json")" 2

# ---- in-flight writers on W, then the reclaiming mount R
W=$T/w R=$T/r
pl_mount "$W" reclaim=0,reclaim_grace=3
python3 - "$W" "$T/w.ready" "$T/w.go" "$T/w.result" <<'EOF' &
import hashlib, os, sys, time
w, ready, go, result = sys.argv[1:]
a = os.urandom(700000); b = os.urandom(300000)
fa = os.open(w + '/inflight', os.O_RDWR | os.O_CREAT, 0o644)
os.write(fa, a)                                  # migrated; no flush until close
fb = os.open(w + '/unlinked', os.O_RDWR | os.O_CREAT, 0o644)
os.write(fb, b)
os.fsync(fb)
os.unlink(w + '/unlinked')                       # no name: only W holds its set
open(ready, 'w').close()
while not os.path.exists(go):
    time.sleep(0.1)
ok = os.pread(fa, len(a), 0) == a and os.pread(fb, len(b), 0) == b
os.write(fa, b'tail')                            # still writable
os.close(fa); os.close(fb)
with open(w + '/inflight', 'rb') as f:
    ok = ok and f.read() == a + b'tail'
fd = os.open(w + '/inflight', os.O_RDONLY)
os.fsync(fd)                                     # W's queued removals run (a sync)
os.close(fd)
open(result, 'w').write('ok' if ok else 'bad')
EOF
WRITER=$!
within "W's writer holds its files" 30 test -e "$T/w.ready"
pl_mount "$R" reclaim=1,reclaim_grace=3,verbose   # verbose: the reclaimer's INFO lines
orphans_gone() { [ "$(nsets)" = 4 ] && [ ! -e "$HD" ]; }
within "the orphans go (4 sets left: keep, linked, inflight, unlinked)" 60 orphans_gone
sleep 8                                          # more passes, past 2 grace ages
eq "W's sets stay through more passes" "$(nsets)" 4
touch "$T/w.go"
wait "$WRITER"
eq "W's in-flight files read back whole" "$(cat "$T/w.result" 2>/dev/null)" ok
ok "keep unchanged (its set is named)" cmp "$T/keep.data" "$R/keep"
ok "the hard-linked file unchanged (its ILT row names its set)" cmp "$T/keep.data" "$R/linked2"
ok "the crashed file is still a file (empty: its row never named the set)" test -f "$R/crashed"
eq "sets: keep, linked, inflight (unlinked's went at W's sync after its close)" "$(nsets)" 3
PC --json fsck >"$T/f1.json" 2>/dev/null
eq "fsck exits 0" "$?" 0
eq "fsck counts 0 orphans" "$(jget orphan_sets <"$T/f1.json")" 0
eq "fsck clean" "$(jget problems <"$T/f1.json")" 0
grep -q 'reclaim: .* removed [1-9]' "$T/pomfs.log"
eq "R logged its removals" "$?" 0
pl_umount "$R"
pl_umount "$W"
pl_done
