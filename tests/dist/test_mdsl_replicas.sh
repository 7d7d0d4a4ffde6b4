#!/bin/bash
# test_mdsl_replicas.sh POMCTL -- a lost MDSL disk loses no fsynced file
# when slices have replicas (docs/mdsl-replicas.md). Two fresh clusters of
# `pomctl up --mdsl 3 --mount M`, one with --mdsl-replicas 3 and one with 1:
#   1. DIRS directories x FILES files through the mount (sizes both sides of
#      64 KiB: rows inline and blob files), each fsynced, a copy kept here;
#   2. the mount unmounted, the MDS and one MDSL SIGKILLed by pid, that
#      MDSL's folder wiped (its site_id file put back: the replaced disk
#      keeps the site's identity; a new identity is fail-over, not built);
#   3. `pomctl up` again: the MDSL starts empty, the MDS recovers and loads
#      every slice again, pomfs mounts.
# With r = 3 the victim is the home MDSL (lowest id: every decision record,
# and a third of the slices as primary): every file reads back byte-exact,
# the MDS counted loads answered by a later replica, and `pomctl fsck
# --data-check` is clean. With r = 1 the victim is another MDSL and files
# must be missing: that is what the replicas buy (and shows the test can
# fail). Exit 77 (skip) without pom-r2, pomfs or FUSE.
#
#   RECOVER_KEEP=1  keep the folders (logs) and say where
set -u
POMCTL=$(realpath "$1")
BIN=$(dirname "$POMCTL")
if [ ! -x "$BIN/../r2/pom-r2" ] || [ ! -x "$BIN/../fuse/pomfs" ]; then
    echo "SKIP: pom-r2 / pomfs not built"; exit 77
fi
for t in python3 fusermount3 mountpoint; do
    command -v "$t" >/dev/null || { echo "SKIP: $t missing"; exit 77; }
done
[ -c /dev/fuse ] || { echo "SKIP: no /dev/fuse"; exit 77; }
DIRS=${REPL_DIRS:-20}
FILES=${REPL_FILES:-25}
[ -n "${POM_TEST_LONG:-}" ] && { DIRS=50; FILES=40; }

. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/repl.XXXXXX")
export HOME=$T/home
mkdir -p "$HOME"
unset POM_R2 POM_BIN_DIR
export TZ=UTC LC_ALL=C
CLUSTERS=""
cleanup() {
    local d
    for d in $CLUSTERS; do
        mountpoint -q "$d/m" 2>/dev/null && fusermount3 -u -z "$d/m"
        "$POMCTL" down --data "$d/data" >/dev/null 2>&1
    done
    if [ -n "${RECOVER_KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 1' TERM INT HUP
stamp() { echo "[$(date +%T)] $*"; }

. "$(dirname "${BASH_SOURCE[0]}")/replica_files.sh"

# pid_of C NAME: the pid pomctl up recorded for daemon NAME of cluster C.
pid_of() { awk '{ print $1; exit }' "$1/data/run/$2.pid"; }

# site_of C SUB: the site id of the MDSL in folder SUB of cluster C.
site_of() { cat "$1/data/$2/site_id"; }

# run_case R VICTIM: a cluster with --mdsl-replicas R; VICTIM "home" (the
# lowest MDSL id) or "other" (the highest). Sets LOST (files not back),
# FALLBACKS (the MDS's replica_fallbacks) and C (the cluster folder).
run_case() {
    local r=$1 victim=$2
    C=$T/r$r
    CLUSTERS="$CLUSTERS $C"
    mkdir -p "$C"
    # (the reaper removes C when this test ends: not when keeping it)
    [ -n "${RECOVER_KEEP:-}" ] || reap_on_kill "$C" "$POMCTL" "$C/data"
    stamp "r = $r: pomctl up --mdsl 3 --mdsl-replicas $r --mount"
    if ! "$POMCTL" up --data "$C/data" --mount "$C/m" --mdsl 3 --mdsl-replicas "$r" \
        >"$C/up.log" 2>&1; then
        if grep -qi "permission\|fuse: device not found\|Operation not permitted" \
            "$C/data/logs/pomfs.log" 2>/dev/null; then
            echo "SKIP: FUSE mounts are not allowed here"; exit 77
        fi
        echo "pomctl up failed:"; cat "$C/up.log"; exit 1
    fi
    stamp "writing $DIRS x $FILES files, each fsynced"
    ok "r = $r: files written and fsynced" write_files "$C/m" "$C/src"
    eq "r = $r: every file reads back before the loss" "$(missing "$C/m" "$C/src")" 0

    # The victim: the MDSL folder with the lowest (home) or highest site id.
    local sub best="" bid=""
    for sub in mdsl mdsl-2 mdsl-3; do
        local id
        id=$(site_of "$C" "$sub")
        if [ -z "$bid" ] || { [ "$victim" = home ] && [ "$id" -lt "$bid" ]; } ||
            { [ "$victim" = other ] && [ "$id" -gt "$bid" ]; }; then
            best=$sub; bid=$id
        fi
    done
    local name=pom-${best}
    local vpid mpid
    vpid=$(pid_of "$C" "$name"); mpid=$(pid_of "$C" pom-mds)
    stamp "r = $r: unmount; SIGKILL pom-mds (pid $mpid) and $name (site $bid, pid $vpid); wipe $best"
    fusermount3 -u "$C/m" || fusermount3 -u -z "$C/m"
    kill -9 "$mpid" "$vpid"
    while kill -0 "$mpid" 2>/dev/null || kill -0 "$vpid" 2>/dev/null; do sleep 0.1; done
    rm -rf "${C:?}/data/$best"
    mkdir -p "$C/data/$best"
    echo "$bid" >"$C/data/$best/site_id"
    eq "r = $r: $best wiped" "$(ls "$C/data/$best")" site_id

    stamp "r = $r: pomctl up again (the MDSL starts empty, the MDS reloads)"
    # With one copy lost slices stay lost: a soft mount answers EIO in 3 s
    # instead of waiting for them.
    local soft=()
    [ "$r" = 1 ] && soft=(-o soft,timeout=3)
    timeout 180 "$POMCTL" up --data "$C/data" --mount "$C/m" --mdsl 3 "${soft[@]}" \
        >"$C/up2.log" 2>&1
    UPRC=$?
    LOST=$(missing "$C/m" "$C/src")
    stamp "r = $r: $LOST of $((DIRS * FILES)) files not back"
    kill -HUP "$(pid_of "$C" pom-mds)"
    sleep 1
    FALLBACKS=$(grep -ao 'replica_fallbacks [0-9]*' "$C/data/logs/pom-mds.log" | tail -1 |
        awk '{ print $2 }')
    # The wiped MDSL also copies its slices back from its peers (catch-up,
    # docs/mdsl-replicas.md): whichever comes first repairs it.
    CAUGHT=$(grep -ao 'catch-up: copied [0-9]*' "$C/data/logs/$name.log" | tail -1 |
        awk '{ print $3 }')
}

run_case 3 home
eq "r = 3: pomctl up after the loss" "$UPRC" 0
eq "r = 3: every fsynced file is back byte-exact" "$LOST" 0
ok "r = 3: the wiped replica was repaired: loads answered by another replica or catch-up (replica_fallbacks ${FALLBACKS:-none}, slices caught up ${CAUGHT:-none})" \
    test "${FALLBACKS:-0}" -gt 0 -o "${CAUGHT:-0}" -gt 0
ok "r = 3: pomctl fsck --data-check is clean" timeout 300 "$POMCTL" --data "$C/data" \
    fsck --data-check
[ "$FAIL" -gt 0 ] && tail -30 "$C/data/logs/pom-mds.log"
"$POMCTL" down --data "$C/data" >/dev/null 2>&1

run_case 1 other
ok "r = 1: files are lost with their MDSL ($LOST of $((DIRS * FILES)))" test "$LOST" -gt 0
check_done
