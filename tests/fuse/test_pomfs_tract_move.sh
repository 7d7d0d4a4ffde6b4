#!/bin/bash
# test_pomfs_tract_move.sh POMCTL POMFS POM_MDSL -- tracts of the `mdsl`
# blob backend follow ring-1 changes (docs/format-blob.md "mdsl", "Ring-1
# changes"; mdsl/mdsl_tmove.c): `pomctl up --mdsl 3` (slice replicas 1), an
# fs with `--copies 2`:
#   1. mount A writes 8 files of 0.2..3 MB, each fsynced, and keeps running;
#   2. a 4th pom-mdsl starts; R2 runs the join to STABLE (every MDSL of the
#      old ring moves the tracts the new ring gives the joiner);
#   3. `pomctl site drain --wait` of the 2nd MDSL (its tracts are put to the
#      sites the ring without it names before it is DRAINED), `site
#      remove`, SIGKILL of it by pid;
#   4. every file reads back byte-equal through mount A (it followed both
#      changes) and through a fresh mount B; `pomctl fsck` finds no problem
#      and the MDSL /metrics count tracts moved and copies dropped;
#   5. the 3rd MDSL SIGKILLed: a fresh mount C still reads every file, as
#      every tract has its 2 copies on the sites the final ring names.
# Without the tract moves a tract whose copies were on the 2nd and 3rd
# MDSL is left on the 3rd alone, and step 5 answers EIO (checked on the
# code before the moves). Exits 77 (skip) without FUSE.
PL_UP_OPTS="--mdsl 3"
. "$(dirname "${BASH_SOURCE[0]}")/pomfs_lib.sh" "$1" "$2"
MDSLBIN=$(realpath "$3")
PC() { "$POMCTL" --data "$T/data" "$@"; }
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

ok "fs create mfs --copies 2" PC fs create mfs --copies 2
ok "its client key" PC fs key mfs --out "$T/mfs.key"
mnt() { # dir
    mkdir -p "$1"
    "$POMFS" "$R2" "$1" -f -o "fs=mfs,keyfile=$T/mfs.key" >>"$T/pomfs.log" 2>&1 &
    PL_PID[$1]=$!
    wait_mounted "$1" "${PL_PID[$1]}"
}
A=$T/a
mnt "$A"
python3 - "$A" "$T/src" <<'PY' || { echo "FAIL: writing"; FAIL=$((FAIL+1)); }
import os, random, sys
m, src = sys.argv[1], sys.argv[2]
os.makedirs(src)
rnd = random.Random(23)
for i, n in enumerate((200000, 300001, 1048576, 1048577, 1500000, 2097152, 2500000, 3000000)):
    data = rnd.randbytes(n)
    for root in (m, src):
        fd = os.open(os.path.join(root, "f%d" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
PY
ok "mount A reads its files" pl_same "$A"

# ring1 EXPR: a python expression over c (`ring show 1 --json`'s
# ring1_change) and j (the whole answer).
ring1() {
    PC --json ring show 1 2>/dev/null | python3 -c "
import json, sys
try:
    j = json.load(sys.stdin)
except Exception:
    print(''); sys.exit(0)
c = j.get('ring1_change') or {}
print($1)"
}
stable_with() { # N: ring 1 STABLE with N MDSL
    [ "$(ring1 "c.get('phase') == 'stable' and len([s for s in c.get('sites', []) if s.get('type') == 'mdsl' and s.get('role') == 'in']) == $1")" = True ]
}

mkdir -p "$T/mdsl4"
"$MDSLBIN" --key-file "$KEY" --dir "$T/mdsl4" --listen 127.0.0.1:0 --port-file "$T/mdsl4.port" \
    --metrics-listen 127.0.0.1:0 --metrics-file "$T/mdsl4.metrics" --r2 "$R2" \
    >"$T/mdsl4.log" 2>&1 &
M4=$!
within "the 4th MDSL joins ring 1 (STABLE with 4)" 60 stable_with 4
ok "after the join mount A reads every file" pl_same "$A"

S2=$(cat "$T/data/mdsl-2/site_id")
ok "site drain $S2 --wait" timeout 120 "$POMCTL" --data "$T/data" site drain "$S2" --wait
ok "site remove $S2" PC site remove "$S2"
V=$(awk '{ print $1; exit }' "$T/data/run/pom-mdsl-2.pid")
kill -9 "$V"
while kill -0 "$V" 2>/dev/null; do sleep 0.1; done
ok "after the drain mount A (up all along) reads every file" pl_same "$A"
B=$T/b
mnt "$B"
ok "a fresh mount B reads every file" pl_same "$B"
PC --json fsck --fs mfs >"$T/fsck.json" 2>"$T/fsck.err"
eq "fsck exits 0" "$?" 0
eq "fsck finds no problem" "$(jget problems <"$T/fsck.json")" 0
eq "fsck: 8 tract sets" "$(jget tract_sets <"$T/fsck.json")" 8
moved=0 dropped=0
for f in "$T"/data/run/pom-mdsl*.metrics "$T/mdsl4.metrics"; do
    [ -s "$f" ] || continue
    curl -s "http://$(cat "$f")/metrics" >"$T/m.txt" 2>/dev/null
    n=$(awk '$1 == "pom_mdsl_tracts_moved_total" { print $2 }' "$T/m.txt")
    d=$(awk '$1 == "pom_mdsl_tracts_dropped_total" { print $2 }' "$T/m.txt")
    moved=$((moved + ${n:-0})) dropped=$((dropped + ${d:-0}))
done
ok "the MDSL count tracts moved ($moved)" [ "$moved" -gt 0 ]
ok "the MDSL count copies dropped ($dropped)" [ "$dropped" -gt 0 ]
V=$(awk '{ print $1; exit }' "$T/data/run/pom-mdsl-3.pid")
kill -9 "$V"
while kill -0 "$V" 2>/dev/null; do sleep 0.1; done
C=$T/c
mnt "$C"
ok "the 3rd MDSL SIGKILLed: a fresh mount C reads every file from the other copy" pl_same "$C"
for m in "$A" "$B" "$C"; do pl_umount "$m"; done
kill "$M4"
wait "$M4"
eq "the 4th MDSL exits 0 on SIGTERM" "$?" 0
pl_done
