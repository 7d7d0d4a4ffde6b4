#!/bin/bash
# test_mdsl_catchup.sh POMCTL CENSUS -- a returning MDSL catches up from its
# peers without any new write (docs/mdsl-replicas.md "Catch-up of a
# returning MDSL"). One cluster of `pomctl up --mdsl 3 --mdsl-replicas 3
# --mount M` (every MDSL holds every slice and every decision record):
#   1. DIRS directories x FILES files through the mount (sizes both sides of
#      64 KiB), each fsynced, a copy kept here; slice_census --same: every
#      slice whole at all three MDSL; `pomctl status` under-replicated 0;
#   2. the home MDSL (lowest id) SIGKILLed by pid, its folder wiped (its
#      site_id put back), `pomctl up` starts it empty; nothing is written:
#      its catch-up alone must bring it to every slice at the peers'
#      version (slice_census --same, status under-replicated 0 with the
#      three MDSL counted); the time to repair is printed;
#   3. the strong check: the mount unmounted, pom-mds and the two OTHER
#      MDSL SIGKILLed and their folders wiped, `pomctl up` again: every file
#      reads back byte-exact through the one caught-up copy; then the two
#      catch up from it (census --same, status 0) and `pomctl fsck
#      --data-check` is clean.
# Without the catch-up step 2 never converges (the victim stays empty) and
# step 3 loses every file. Exit 77 (skip) without pom-r2, pomfs or FUSE.
#
#   RECOVER_KEEP=1  keep the folder (logs) and say where
set -u
POMCTL=$(realpath "$1")
CENSUS=$(realpath "$2")
BIN=$(dirname "$POMCTL")
if [ ! -x "$BIN/../r2/pom-r2" ] || [ ! -x "$BIN/../fuse/pomfs" ]; then
    echo "SKIP: pom-r2 / pomfs not built"; exit 77
fi
for t in python3 fusermount3 mountpoint; do
    command -v "$t" >/dev/null || { echo "SKIP: $t missing"; exit 77; }
done
[ -c /dev/fuse ] || { echo "SKIP: no /dev/fuse"; exit 77; }
DIRS=${CATCHUP_DIRS:-12}
FILES=${CATCHUP_FILES:-20}
[ -n "${POM_TEST_LONG:-}" ] && { DIRS=50; FILES=40; }

. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/catchup.XXXXXX")
export HOME=$T/home
mkdir -p "$HOME"
unset POM_R2 POM_BIN_DIR
export TZ=UTC LC_ALL=C
C=$T/c
D=$C/data
mkdir -p "$C"
cleanup() {
    mountpoint -q "$C/m" 2>/dev/null && fusermount3 -u -z "$C/m"
    "$POMCTL" down --data "$D" >/dev/null 2>&1
    if [ -n "${RECOVER_KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 1' TERM INT HUP
stamp() { echo "[$(date +%T)] $*"; }
[ -n "${RECOVER_KEEP:-}" ] || reap_on_kill "$C" "$POMCTL" "$D"

. "$(dirname "${BASH_SOURCE[0]}")/replica_files.sh"

pid_of() { awk '{ print $1; exit }' "$D/run/$1.pid"; }
SUBS="mdsl mdsl-2 mdsl-3"
site_of() { cat "$D/$1/site_id"; }
name_of() { echo "pom-$1"; }
addrs() {
    local s
    for s in $SUBS; do echo "127.0.0.1:$(cat "$D/run/$(name_of "$s").port")"; done
}
# same: every slice whole at all three MDSL at the newest version.
same() {
    # shellcheck disable=SC2046
    "$CENSUS" --key-file "$D/cluster.key" --same $(addrs) >"$C/census.txt" 2>&1
}
# under_zero: `pomctl status` counts 0 under-replicated slices at 3 MDSL.
under_zero() {
    "$POMCTL" --data "$D" status --json 2>/dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin).get("replicas") or {}
sys.exit(0 if r.get("under_replicated") == 0 and r.get("mdsl_counted") == 3 else 1)'
}
# copy_time NAME: from the last "serving" line of the daemon's log to its
# last "catch-up: copied" line (the MDSL's own view of its repair).
copy_time() {
    python3 - "$D/logs/$1.log" <<'EOF'
import re, sys
def sec(l):
    h, m, s = l[:12].split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)
serving = copied = None
for l in open(sys.argv[1], errors="replace"):
    if " serving " in l:
        serving, copied = sec(l), None
    elif "catch-up: copied" in l and serving is not None:
        copied = (sec(l), re.search(r"copied (\d+) of \d+ slices \((\d+) bytes\)", l))
if copied:
    print("serving to copied %.2f s, %s slices, %s bytes" % (copied[0] - serving,
          copied[1].group(1), copied[1].group(2)))
else:
    print("no copy logged")
EOF
}
# wait_repaired SECS: until census --same and status both say repaired.
wait_repaired() {
    local end=$(($(date +%s) + $1))
    while [ "$(date +%s)" -lt "$end" ]; do
        same && under_zero && return 0
        sleep 0.5
    done
    return 1
}

stamp "pomctl up --mdsl 3 --mdsl-replicas 3 --mount"
if ! "$POMCTL" up --data "$D" --mount "$C/m" --mdsl 3 --mdsl-replicas 3 >"$C/up.log" 2>&1; then
    if grep -qi "permission\|fuse: device not found\|Operation not permitted" \
        "$D/logs/pomfs.log" 2>/dev/null; then
        echo "SKIP: FUSE mounts are not allowed here"; exit 77
    fi
    echo "pomctl up failed:"; cat "$C/up.log"; exit 1
fi
stamp "writing $DIRS x $FILES files, each fsynced"
ok "files written and fsynced" write_files "$C/m" "$C/src"
eq "every file reads back before the loss" "$(missing "$C/m" "$C/src")" 0
ok "before the loss: every slice whole at all three MDSL, status under-replicated 0" \
    wait_repaired 60
tail -1 "$C/census.txt"

# The home: the lowest site id (every decision record's first copy).
HOME_SUB="" HID=""
for s in $SUBS; do
    id=$(site_of "$s")
    if [ -z "$HID" ] || [ "$id" -lt "$HID" ]; then HOME_SUB=$s; HID=$id; fi
done
VPID=$(pid_of "$(name_of "$HOME_SUB")")
stamp "SIGKILL the home MDSL $HOME_SUB (site $HID, pid $VPID); wipe its folder"
kill -9 "$VPID"
while kill -0 "$VPID" 2>/dev/null; do sleep 0.1; done
rm -rf "${D:?}/$HOME_SUB"
mkdir -p "$D/$HOME_SUB"
echo "$HID" >"$D/$HOME_SUB/site_id"
T0=$(date +%s.%N)
ok "pomctl up restarts it empty" timeout 120 "$POMCTL" up --data "$D" --mdsl 3
ok "the home caught up with no new write: every slice whole at the three MDSL, status 0" \
    wait_repaired 120
T1=$(date +%s.%N)
tail -1 "$C/census.txt"
REPAIR=$(python3 -c "print('%.1f' % ($T1 - $T0))")
stamp "time to repair the home: $REPAIR s (restart to census and status clean);" \
    "in its log: $(copy_time "$(name_of "$HOME_SUB")")"
"$POMCTL" --data "$D" site stat "$HID" | sed 's/^/  /'
PULLED=$("$POMCTL" --data "$D" --json site stat "$HID" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["mdsl"][0]["pulled_slices"])')
ok "the home copied its slices from its peers ($PULLED)" test "${PULLED:-0}" -gt 0

stamp "strong check: unmount; SIGKILL pom-mds and the two other MDSL; wipe both"
fusermount3 -u "$C/m" || fusermount3 -u -z "$C/m"
KILL=("$(pid_of pom-mds)")
for s in $SUBS; do
    [ "$s" = "$HOME_SUB" ] || KILL+=("$(pid_of "$(name_of "$s")")")
done
kill -9 "${KILL[@]}"
for p in "${KILL[@]}"; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
for s in $SUBS; do
    [ "$s" = "$HOME_SUB" ] && continue
    id=$(site_of "$s")
    rm -rf "${D:?}/$s"
    mkdir -p "$D/$s"
    echo "$id" >"$D/$s/site_id"
done
T0=$(date +%s.%N)
ok "pomctl up again (two MDSL empty, the MDS reloads)" \
    timeout 180 "$POMCTL" up --data "$D" --mount "$C/m" --mdsl 3
eq "every fsynced file is back byte-exact through the one caught-up copy" \
    "$(missing "$C/m" "$C/src")" 0
ok "the two wiped MDSL caught up: every slice whole at the three, status 0" wait_repaired 120
T1=$(date +%s.%N)
tail -1 "$C/census.txt"
stamp "time to repair two MDSL from one: $(python3 -c "print('%.1f' % ($T1 - $T0))") s" \
    "(MDS restart and mount included)"
for s in $SUBS; do
    [ "$s" = "$HOME_SUB" ] || echo "  $(name_of "$s"): $(copy_time "$(name_of "$s")")"
done
ok "pomctl fsck --data-check is clean" timeout 300 "$POMCTL" --data "$D" fsck --data-check
if [ "$FAIL" -gt 0 ]; then
    cat "$C/census.txt"
    for s in $SUBS; do grep -a "catch-up" "$D/logs/$(name_of "$s").log" | tail -5; done
fi
check_done
