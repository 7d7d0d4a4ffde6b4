#!/bin/bash
# test_pomfs_reclaim_mdsl.sh POMCTL POMFS -- orphan reclaim and `pomctl
# fsck`'s tract-set check on the `mdsl` blob backend (docs/format-blob.md
# "mdsl", "Reclaiming orphans"): `pomctl up --mdsl 3`, an fs with --copies
# 2, mounts with its client key (tract_list and tract_touch of its own fs):
#   - a crash's orphan: a mount SIGKILLed while it holds a 5,000,000-byte
#     file it wrote but never flushed (tract 0 went to its copies when the
#     writer moved on to tract 1; no row names the set);
#   - `pomctl fsck` lists the sets of every MDSL, merged: 3 sets (a flushed
#     file, a hard-linked one, the orphan), 1 orphan, no problem;
#   - a writer mount W (reclaim=0: leases only, grace 3 s) holding an
#     unflushed large file and an unlinked open one (no row names either
#     set), and a reclaiming mount R (reclaim=1, grace 3 s);
#   - the orphan goes (R logs its bytes, from `stat`), W's sets stay through
#     several grace ages and read back whole, the named files are untouched,
#     fsck counts 0 orphans and is clean.
# Fails on a backend without list (fsck errs, nothing is reclaimed) and
# without the lease (W's sets go and read back wrong). Exits 77 without FUSE.
PL_UP_OPTS="--mdsl 3"
. "$(dirname "${BASH_SOURCE[0]}")/pomfs_lib.sh" "$1" "$2"
PC() { "$POMCTL" --data "$T/data" "$@"; }
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

ok "fs create mfs --copies 2" PC fs create mfs --copies 2
ok "its client key" PC fs key mfs --out "$T/mfs.key"
mnt() { # dir options
    mkdir -p "$1"
    "$POMFS" "$R2" "$1" -f -o "fs=mfs,keyfile=$T/mfs.key,$2" >>"$T/pomfs.log" 2>&1 &
    PL_PID[$1]=$!
    wait_mounted "$1" "${PL_PID[$1]}"
}
fsck_json() { PC --json fsck --fs mfs >"$T/fsck.json" 2>>"$T/fsck.err"; }
nsets() { fsck_json && jget tract_sets <"$T/fsck.json"; }

# ---- a crash's orphan
C=$T/c
mnt "$C" reclaim=0
head -c 300000 /dev/urandom >"$T/keep.data"
cp "$T/keep.data" "$C/keep"                      # flushed at close: named
cp "$T/keep.data" "$C/linked"; ln "$C/linked" "$C/linked2" # named by its ILT row only
python3 - "$C/crashed" "$T/ready" <<'EOF' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, os.urandom(5000000))                # tract 0 put; the row not flushed
open(sys.argv[2], "w").close()
time.sleep(600)
EOF
HOLDER=$!
within "the crashing writer wrote" 30 test -e "$T/ready"
kill -9 "${PL_PID[$C]}"; wait "${PL_PID[$C]}" 2>/dev/null
kill -9 "$HOLDER"; wait "$HOLDER" 2>/dev/null
fusermount3 -u -z "$C"
unset "PL_PID[$C]"
fsck_json
eq "fsck exits 0 (the sets of every MDSL listed)" "$?" 0
eq "fsck: keep, linked + the orphan" "$(jget tract_sets <"$T/fsck.json")" 3
eq "fsck counts 1 orphan" "$(jget orphan_sets <"$T/fsck.json")" 1
eq "fsck finds no problem" "$(jget problems <"$T/fsck.json")" 0

# ---- in-flight writers on W, then the reclaiming mount R
W=$T/w R=$T/r
mnt "$W" reclaim=0,reclaim_grace=3
python3 - "$W" "$T/w.ready" "$T/w.go" "$T/w.result" <<'EOF' &
import os, sys, time
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
bad = []
if os.pread(fa, len(a), 0) != a: bad.append('inflight')
if os.pread(fb, len(b), 0) != b: bad.append('unlinked')
os.write(fa, b'tail')
os.close(fa); os.close(fb)
with open(w + '/inflight', 'rb') as f:
    got = f.read()
    if got != a + b'tail': bad.append('inflight after close: %d bytes' % len(got))
ok = not bad
fd = os.open(w + '/inflight', os.O_RDONLY)
os.fsync(fd)                                     # W's queued removals run (a sync)
os.close(fd)
open(result, 'w').write('ok' if ok else 'bad: ' + ', '.join(bad))
EOF
WRITER=$!
within "W's writer holds its files" 30 test -e "$T/w.ready"
eq "sets: keep, linked, the orphan, inflight, unlinked" "$(nsets)" 5
mnt "$R" reclaim=1,reclaim_grace=3,verbose       # verbose: the reclaimer's INFO lines
orphan_gone() { [ "$(nsets)" = 4 ]; }
within "the orphan goes (4 sets left: keep, linked, inflight, unlinked)" 60 orphan_gone
sleep 8                                          # more passes, past 2 grace ages
eq "W's sets stay through more passes" "$(nsets)" 4
touch "$T/w.go"
wait "$WRITER"
eq "W's in-flight files read back whole" "$(cat "$T/w.result" 2>/dev/null)" ok
ok "keep unchanged (its set is named)" cmp "$T/keep.data" "$R/keep"
ok "the hard-linked file unchanged (its ILT row names its set)" cmp "$T/keep.data" "$R/linked2"
eq "sets: keep, linked, inflight (unlinked's went at W's sync after its close)" "$(nsets)" 3
fsck_json
eq "fsck exits 0" "$?" 0
eq "fsck counts 0 orphans" "$(jget orphan_sets <"$T/fsck.json")" 0
eq "fsck clean" "$(jget problems <"$T/fsck.json")" 0
# The orphan's tract 0 (4 MiB) on its 2 copies, from `stat` before the removal.
grep -Eq 'reclaim: .* removed 1 \(([89][0-9]{6}|[1-9][0-9]{7,}) bytes\)' "$T/pomfs.log"
eq "R logged the removal with the orphan's bytes" "$?" 0
pl_umount "$R"
pl_umount "$W"
pl_done
