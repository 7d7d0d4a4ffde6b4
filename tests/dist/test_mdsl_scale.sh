#!/bin/bash
# test_mdsl_scale.sh -- adding and draining an MDSL under a create storm
# (docs/mdsl-scale.md "Tests"): 1 R2, 2 MDSL, 3 MDS (each following ring 1
# and running the mover, mds/mds_ring1.c, mds/mds_mover.c). 4 client
# threads (storm_driver) create N files in one directory, with links and
# renames, pom_sync every 500 creates. During the storm:
#   25%: mdsl3 starts; R2 runs a ring-1 change (PREPARE, MOVING, walk,
#        DONE, STABLE) and the MDS move the slices ring 1 now gives it.
#   50%: once the MDS all walked (or the change is STABLE): a census of
#        the three MDSL (slice_census: every slice live at exactly one, and
#        mdsl3 holds about a third of them).
#   75%: once STABLE: `pomctl site drain` of mdsl2 (not mdsl1: the home of
#        the decision records does not move: "Decision records"; R2 refuses
#        it); while the drain runs mds2 is SIGKILLed and restarted at once;
#        wait for STABLE again, `pomctl site remove`, SIGTERM of mdsl2.
# Then the driver checks every synced file, link and rename (storm_driver.c)
# and a last census over mdsl1 and mdsl3 finds every slice live once.
# DONE needs the MDSL's `misplaced` reports ("Completion", mdsl/mdsl_ring1.c)
# as well as the MDS walks.
#
#   test_mdsl_scale.sh POM_R2 POM_MDSL POM_MDS POMCTL STORM_DRIVER SLICE_CENSUS
#   DIST_N=...    files (default 30,000 * POM_TEST_SCALE, at least 4,000)
#   DIST_KEEP=1   keep the folder (logs) and say where
set -u
R2BIN=$(realpath "$1"); MDSLBIN=$(realpath "$2"); MDSBIN=$(realpath "$3")
POMCTL=$(realpath "$4"); DRIVER=$(realpath "$5"); CENSUS=$(realpath "$6")
. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
. "$(dirname "${BASH_SOURCE[0]}")/mdsl_ring1.sh"
export TZ=UTC LC_ALL=C
SCALE=${POM_TEST_SCALE:-1}
# POM_TEST_SCALE may be a fraction (the sanitizer runs use 0.25).
N=${DIST_N:-$(awk -v s="$SCALE" 'BEGIN { n = int(30000 * s); print (n < 4000 ? 4000 : n) }')}
SPLIT=${DIST_SPLIT:-$((N >= 20000 ? 256 : 64))} # enough slices for the share check
pid_folder mdsl_scale DIST_KEEP

D=$T/c
mkdir -p "$D/sync"
declare -A LPID LPORT MPID
PR2=$(free_port)
"$R2BIN" --data "$D" --listen "127.0.0.1:$PR2" >"$D/r2.log" 2>&1 &
PIDS="$PIDS $!"
wait_port "$PR2" || exit 1
R2="127.0.0.1:$PR2"
for k in 1 2; do start_mdsl $k || exit 1; done
declare -A MPORT
start_mds() {
    local k=$1
    [ -n "${MPORT[$k]:-}" ] || MPORT[$k]=$(free_port)
    mkdir -p "$D/mds$k"
    "$MDSBIN" --r2 "$R2" --dir "$D/mds$k" --listen "127.0.0.1:${MPORT[$k]}" \
        --split-threshold "$SPLIT" --commit-interval-ms 500 --threads 2 >>"$D/mds$k.log" 2>&1 &
    MPID[$k]=$!
    PIDS="$PIDS $!"
    wait_port "${MPORT[$k]}"
}
for k in 1 2 3; do start_mds $k || exit 1; done
sleep 2 # every MDS holds the final ring 0 before the clients come
POM_R2=$R2 "$POMCTL" fs create mdslfs >"$D/pomctl.log" 2>&1 || { echo "fs create failed"; exit 1; }

# walked: the change is in MOVING with walk, and every MDS walked it.
walked() {
    [ "$(ring1 "c.get('phase') == 'moving' and c.get('walk') and all(m.get('walked_ring1') == c.get('to_version') for m in mds)")" = True ]
}
walked_or_stable() { walked || is_phase stable; }
changing() { ! is_phase stable; }
census() { # tag, MDSL numbers
    local tag=$1; shift
    local a=()
    for k in "$@"; do a+=("127.0.0.1:${LPORT[$k]}"); done
    "$CENSUS" "${a[@]}" >"$D/census_$tag.txt" 2>&1
    local rc=$?
    sed "s/^/  census $tag: /" "$D/census_$tag.txt" | tail -6
    return $rc
}
live_of() { # tag, MDSL number
    grep "^mdsl 127.0.0.1:${LPORT[$2]} " "$D/census_$1.txt" | awk '{print $4}'
}

echo "== 3 MDS, 2 MDSL (+mdsl3 at 25%, mdsl2 drained at 75%), N=$N files, 4 client threads, split $SPLIT"
stamp "storm starts"
"$DRIVER" "$R2" mdslfs "$N" 4 "$D/sync" >"$D/driver.out" 2>"$D/driver.err" &
DPID=$!
PIDS="$PIDS $DPID"

EVENTS=0 KILLED=0 SEEN_MOVING=0 WALKED=0 STABLE1=0 DRAINED=0 REMOVED=0 REFUSED=0 STOPPED2=0 SHARE=- CENSUS1=1
if wait_mark p25; then
    stamp "25%: starting mdsl3"
    start_mdsl 3 || echo "mdsl3 did not start"
    touch "$D/sync/go25"
    # R2's log, not a poll of the phase: under load a poll can miss the
    # whole of MOVING.
    wait_for 60 grep -aq "ring 1: moving" "$D/r2.log" && SEEN_MOVING=1
    stamp "ring 1 moving: $SEEN_MOVING ($(phase))"
    EVENTS=1
fi
if [ $EVENTS = 1 ] && wait_mark p50; then
    stamp "50%: waiting for every MDS to walk (or STABLE)"
    wait_for 150 walked_or_stable && WALKED=1
    is_phase stable && STABLE1=1
    stamp "walked: $WALKED, phase $(phase)"
    census join 1 2 3 && CENSUS1=0
    L1=$(live_of join 1); L2=$(live_of join 2); L3=$(live_of join 3)
    TOT=$(( ${L1:-0} + ${L2:-0} + ${L3:-0} ))
    [ "$TOT" -gt 0 ] && SHARE=$(( 100 * ${L3:-0} / TOT ))
    stamp "mdsl3 holds ${L3:-?} of $TOT live slices (${SHARE}%)"
    touch "$D/sync/go50"
    EVENTS=2
fi
if [ $EVENTS = 2 ] && wait_mark p75; then
    if [ $STABLE1 = 0 ]; then
        wait_for 90 is_phase stable && STABLE1=1
    fi
    if [ $STABLE1 = 1 ]; then # else the drain would only queue
        S2=$(cat "$D/mdsl2/site_id")
        stamp "75%: draining mdsl2 (site $S2)"
        "$POMCTL" --r2 "$R2" site drain "$S2" >>"$D/pomctl.log" 2>&1 || echo "site drain $S2 failed"
        touch "$D/sync/go75"
        wait_for 30 changing || true
        wait_for 30 is_phase moving || true
        # An MDS dies mid-move and comes back at once (still in ring 0):
        # its restart installs the running change before it owns anything,
        # and its recovery settles a moving group cut in the middle.
        stamp "drain running ($(phase)): SIGKILL mds2, restart"
        kill -KILL "${MPID[2]}"
        wait "${MPID[2]}" 2>/dev/null
        echo "--- mds2 restarted" >>"$D/mds2.log"
        start_mds 2 && KILLED=1 || echo "mds2 did not restart"
        wait_for 150 is_phase stable && DRAINED=1
        "$POMCTL" --r2 "$R2" site remove "$S2" >>"$D/pomctl.log" 2>&1 && REMOVED=1
        # Still running, mdsl2 meets -ENOENT at its next heartbeat: R2
        # refuses its id (docs/r2.md "Removing a site"), so it does not
        # join ring 1 again as a new site.
        wait_for 10 grep -aq "R2 refuses site $S2" "$D/mdsl2.log" && REFUSED=1
        is_phase stable || REFUSED=0
        stamp "drained: $DRAINED, removed: $REMOVED, refused: $REFUSED; SIGTERM mdsl2"
        census drain 1 2 3 || true
        kill -TERM "${LPID[2]}"
        wait_within 60 "${LPID[2]}" mdsl2 && STOPPED2=1
    else
        stamp "75%: the join never reached STABLE (phase $(phase)): no drain"
        touch "$D/sync/go75"
    fi
    EVENTS=3
fi
touch "$D/sync/events_done"
wait_within 300 "$DPID" storm_driver
DRC=$?
stamp "driver exited $DRC"
for k in 1 2 3; do kill -HUP "${MPID[$k]}" 2>/dev/null; done
sleep 1
cat "$D/driver.out"
[ -s "$D/driver.err" ] && { echo "driver stderr (head):"; head -30 "$D/driver.err"; }
"$POMCTL" --r2 "$R2" ring show 1 2>&1 | tail -12 | sed 's/^/  /'

ok "the events ran (25%, 50%, 75%: $EVENTS of 3)" [ "$EVENTS" = 3 ]
ok "the driver's checks (synced files/links/renames there, listing, nlink, sync times)" [ "$DRC" = 0 ]
ok "ring 1 reached MOVING after mdsl3 joined" [ "$SEEN_MOVING" = 1 ]
ok "every MDS walked the change (or it was STABLE) within 150 s" [ "$WALKED" = 1 ]
ok "after the join every slice is live at exactly one MDSL" [ "$CENSUS1" = 0 ]
ok "mdsl3 holds about a third of the slices (${SHARE}%, want 20..47)" \
    sh -c "[ '$SHARE' != - ] && [ '$SHARE' -ge 20 ] && [ '$SHARE' -le 47 ]"
MOVES=0
for k in 1 2 3; do
    b=$(dist_line "$D/mds$k.log")
    echo "mds$k: $(echo "$b" | grep -o 'ring1_acked.*')"
    MOVES=$((MOVES + $(field "$b" moves || echo 0)))
done
ok "the MDS moved slices ($MOVES)" [ "$MOVES" -gt 0 ]
ok "the join reached STABLE (DONE passed)" [ "$STABLE1" = 1 ]
ok "mds2 was SIGKILLed during the drain and restarted" [ "$KILLED" = 1 ]
ok "the drain of mdsl2 reached STABLE" [ "$DRAINED" = 1 ]
ok "pomctl site remove of the drained mdsl2" [ "$REMOVED" = 1 ]
ok "the removed mdsl2, still running, did not rejoin ring 1" [ "$REFUSED" = 1 ]
ok "the drained mdsl2 stopped on SIGTERM within 60 s" [ "$STOPPED2" = 1 ]
census final 1 3
ok "at the end every slice is live at mdsl1 or mdsl3, once" [ $? = 0 ]
L2=$(live_of drain 2)
ok "the drained mdsl2 held no live slice (${L2:-?})" [ "${L2:-1}" = 0 ]
ok "no sanitizer report" sh -c "! grep -aqE 'Sanitizer|runtime error' $D/*.log $D/driver.err"
check_done
