#!/bin/bash
# test_dist_scale.sh -- online MDS scaling under a create storm
# (docs/mds-dist.md): 1 R2 (--fail-after 3: a killed MDS silent ~3 s is
# declared failed and its slices move), 2 MDSL, 3 MDS at first. 8 client
# threads (storm_driver, libpomegranate through R2) create N files in one
# directory, link every 50th into links/ and rename every 100th link there,
# pom_sync every 500 creates. During the storm:
#   25%: a 4th MDS starts (R2 adds it to ring 0);
#   50%: `pomctl site drain` of mds2; its "drained (ring 0 v" line within
#        120 s, then SIGTERM (it commits before exiting);
#   75%: SIGKILL of mds3, 6 s down (declared failed), restarted with the
#        same folder and port.
# Then the driver checks (storm_driver.c): every synced file, link and
# rename there; listing without duplicates; nlink == names for every uuid;
# no error but retried timeouts; no pom_sync over 20 s.
#
#   test_dist_scale.sh POM_R2 POM_MDSL POM_MDS POMCTL STORM_DRIVER
#   POM_TEST_SCALE=K   N = 200,000 * K (CI: 1; the `long` run: 10)
#   DIST_N=...         N outright (quick runs: DIST_N=40000)
#   DIST_KEEP=1        keep the folder (logs) and say where
#   DIST_VERBOSE=1     MDS debug logs (slice loads, splits, releases)
#
# Script checks: the driver's exit status; mds2 drained in time and exited;
# mds3 declared failed by R2 (the failure path ran); every remaining MDS
# ended with slices (its "dist:" line after SIGHUP); no `forward loop`; no
# sanitizer report in any log. Daemons run on free ports, stopped by pid.
set -u
R2BIN=$(realpath "$1"); MDSLBIN=$(realpath "$2"); MDSBIN=$(realpath "$3")
POMCTL=$(realpath "$4"); DRIVER=$(realpath "$5")
. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
export TZ=UTC LC_ALL=C
SCALE=${POM_TEST_SCALE:-1}
N=${DIST_N:-$((200000 * SCALE))}
SPLIT=${DIST_SPLIT:-2048}
pid_folder dist_scale DIST_KEEP

dist_line() { grep -a 'dist: site' "$1" | tail -1 | sed 's/.*dist: //'; }
field() { # line key
    echo "$1" | awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i+1); exit } }'
}
stamp() { echo "[$(date +%T)] $*"; }

D=$T/c
mkdir -p "$D/sync"
declare -A MPID MPORT
PR2=$(free_port)
"$R2BIN" --data "$D" --listen "127.0.0.1:$PR2" --fail-after 3 >"$D/r2.log" 2>&1 &
PIDS="$PIDS $!"
wait_port "$PR2" || exit 1
R2="127.0.0.1:$PR2"
for k in 1 2; do
    p=$(free_port)
    mkdir -p "$D/mdsl$k"
    "$MDSLBIN" --dir "$D/mdsl$k" --listen "127.0.0.1:$p" --r2 "$R2" >"$D/mdsl$k.log" 2>&1 &
    PIDS="$PIDS $!"
    wait_port "$p" && wait_registered "$D/mdsl$k" || exit 1
done

# start_mds K: pom-mds K in $D/mdsK on MPORT[K] (a free port the first
# time), its log appended to $D/mdsK.log.
start_mds() {
    local k=$1
    [ -n "${MPORT[$k]:-}" ] || MPORT[$k]=$(free_port)
    mkdir -p "$D/mds$k"
    "$MDSBIN" ${DIST_VERBOSE:+--verbose} --r2 "$R2" --dir "$D/mds$k" --listen "127.0.0.1:${MPORT[$k]}" --gossip-ms 200 \
        --split-threshold "$SPLIT" --commit-interval-ms 1000 --threads 4 >>"$D/mds$k.log" 2>&1 &
    MPID[$k]=$!
    PIDS="$PIDS $!"
    wait_port "${MPORT[$k]}"
}
for k in 1 2 3; do start_mds $k || exit 1; done
sleep 2.5 # every MDS holds the final ring 0 before the clients come
POM_R2=$R2 "$POMCTL" fs create scalefs >"$D/pomctl.log" 2>&1 || { echo "fs create failed"; exit 1; }

echo "== 3 MDS (+1, -1 drained, 1 killed), 2 MDSL, N=$N files, 8 client threads, split $SPLIT"
stamp "storm starts"
"$DRIVER" "$R2" scalefs "$N" 8 "$D/sync" >"$D/driver.out" 2>"$D/driver.err" &
DPID=$!
PIDS="$PIDS $DPID"

# wait_mark NAME: waits for the driver's progress file (0), or its exit (1).
wait_mark() {
    while [ ! -e "$D/sync/$1" ]; do
        kill -0 "$DPID" 2>/dev/null || return 1
        sleep 0.1
    done
}
site_of() { grep -a -m1 -o 'site [0-9]* serving' "$D/mds$1.log" | awk '{print $2}'; }

DRAINED=0 DRAIN_S=- FAILED_SEEN=0 EVENTS=0
if wait_mark p25; then
    stamp "25%: starting mds4"
    start_mds 4 || echo "mds4 did not start"
    touch "$D/sync/go25"
    EVENTS=1
fi
if [ $EVENTS = 1 ] && wait_mark p50; then
    S2=$(site_of 2)
    stamp "50%: draining mds2 (site $S2)"
    "$POMCTL" --r2 "$R2" site drain "$S2" >>"$D/pomctl.log" 2>&1 || echo "pomctl site drain $S2 failed"
    touch "$D/sync/go50"
    t0=$SECONDS
    while [ $((SECONDS - t0)) -lt 120 ]; do
        grep -aq 'drained (ring 0 v' "$D/mds2.log" && { DRAINED=1; break; }
        sleep 0.2
    done
    DRAIN_S=$((SECONDS - t0))
    stamp "mds2 drained: $DRAINED after ${DRAIN_S}s; SIGTERM"
    kill -TERM "${MPID[2]}"
    wait_within 60 "${MPID[2]}" mds2; MDS2_RC=$?
    EVENTS=2
fi
if [ $EVENTS = 2 ] && wait_mark p75; then
    S3=$(site_of 3)
    stamp "75%: SIGKILL mds3 (site $S3), 6 s down"
    touch "$D/sync/go75"
    sleep 0.5 # the storm runs again: mds3 dies with changes acknowledged, not synced
    kill -9 "${MPID[3]}"
    wait "${MPID[3]}" 2>/dev/null
    sleep 6
    grep -aqE "site $S3 \(mds [^)]*\) failed" "$D/r2.log" && FAILED_SEEN=1
    echo "--- mds3 restarted" >>"$D/mds3.log"
    start_mds 3 || echo "mds3 did not restart"
    stamp "mds3 restarted (declared failed meanwhile: $FAILED_SEEN)"
    EVENTS=3
fi
touch "$D/sync/events_done"
wait_within 300 "$DPID" storm_driver
DRC=$?
stamp "driver exited $DRC"
for k in 1 3 4; do [ -n "${MPID[$k]:-}" ] && kill -HUP "${MPID[$k]}" 2>/dev/null; done
sleep 1
cat "$D/driver.out"
[ -s "$D/driver.err" ] && { echo "driver stderr (head):"; head -40 "$D/driver.err"; }
echo "pom_sync times: $(wc -l <"$D/sync/syncs.log") syncs; the slowest:"
awk '{ for (i = 2; i <= NF; i++) if ($i == "s") print $(i-1), $0 }' "$D/sync/syncs.log" |
    sort -rn | head -5 | cut -d' ' -f2- | sed 's/^/  /'
grep -a 'failed\|draining\|removed' "$D/r2.log" | grep -av client | tail -12 | sed 's/^/r2: /'

ok "the events ran (25%, 50%, 75%: $EVENTS of 3)" [ "$EVENTS" = 3 ]
ok "the driver's checks (synced files/links there, listing, nlink, errors, sync times)" [ "$DRC" = 0 ]
ok "mds2 logged 'drained (ring 0 v' within 120 s (${DRAIN_S}s)" [ "$DRAINED" = 1 ]
ok "mds2 exited 0 after SIGTERM" [ "${MDS2_RC:-1}" = 0 ]
ok "R2 declared the SIGKILLed mds3 failed (its slices moved)" [ "$FAILED_SEEN" = 1 ]
for k in 1 3 4; do
    b=$(dist_line "$D/mds$k.log")
    echo "mds$k: $b"
    s=$(field "$b" slices)
    ok "mds$k ended with slices (${s:-none})" [ "${s:-0}" -gt 0 ]
done
echo "mds2 (drained): $(dist_line "$D/mds2.log")"
ok "no request hit the hop limit" sh -c "! grep -aq 'forward loop' $D/mds*.log"
ok "no sanitizer report" sh -c "! grep -aqE 'Sanitizer|runtime error' $D/*.log $D/driver.err"
check_done
