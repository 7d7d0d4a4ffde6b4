#!/bin/bash
# test_mdsl_move_crash.sh -- the crash matrix of ring-1 slice moves with real
# daemons (docs/mdsl-scale.md "Failures", the table of SIGKILLs). Each
# scenario is a fresh cluster: 1 R2 (embedded store), 2 MDSL, 2 MDS
# (following ring 1, the mover at --move-rate 64 KiB/s so its walk spans a
# second or so), storm_driver creating N files with links and renames and
# pom_sync every 500. At 25% the storm is held, mdsl3 starts, and once R2
# says MOVING the storm goes on while one fault hits:
#   mds_prepared, mds_decided, mds_x_committed: mds1 runs with
#       --crash-point move.{prepared,decided,x_committed} and SIGKILLs itself
#       at its first commit group carrying a move (after every participant
#       voted / after the home committed the decision / after the old
#       sites X committed their tombstones, before the new site Y); it is
#       restarted at once without the variable, and its recovery must
#       abort (prepared) or commit (decided, x_committed) the cut txid;
#   kill_x:    SIGKILL of mdsl2 (an old site X losing slices), restart;
#   kill_y:    SIGKILL of mdsl3 (the new site Y), restart;
#   kill_home: SIGKILL of mdsl1 (the home H of the decision records, and
#              an X too), restart;
#   kill_r2:   SIGKILL of the R2 leader, restart from its --data folder.
# An MDSL or R2 is SIGKILLed as soon as R2's log says MOVING (polling
# pomctl lagged by seconds on a loaded machine, once past DONE) and
# restarted after MOVE_CRASH_DOWN_S (2 s), same folder and port; the storm's
# commits meanwhile fail or wait.
# Checks after each: the fault came before R2 decided DONE (its log); the
# join reaches STABLE; a census of the three MDSL (slice_census) finds every
# slice live at exactly one; the driver's checks (every synced file, link
# and rename with its uuid, listing, nlink, no pom_sync over 20 s); the MDS
# moved slices; no sanitizer report.
# Scenarios run one after the other, each on its own cluster (own folder
# and ports): a fault's aftermath never blurs the next one. About 15 s each.
#
#   test_mdsl_move_crash.sh POM_R2 POM_MDSL POM_MDS POMCTL STORM_DRIVER SLICE_CENSUS
#   MOVE_CRASH_SCENARIOS="kill_x ..."  the scenarios to run (default: all 7)
#   MOVE_CRASH_N=...   files per scenario (default 6,000 * POM_TEST_SCALE,
#                      at least 3,000)
#   MOVE_CRASH_KEEP=1  keep the folder (logs) and say where
set -u
R2BIN=$(realpath "$1"); MDSLBIN=$(realpath "$2"); MDSBIN=$(realpath "$3")
POMCTL=$(realpath "$4"); DRIVER=$(realpath "$5"); CENSUS=$(realpath "$6")
. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
. "$(dirname "${BASH_SOURCE[0]}")/mdsl_ring1.sh"
export TZ=UTC LC_ALL=C
SCALE=${POM_TEST_SCALE:-1}
N=${MOVE_CRASH_N:-$(awk -v s="$SCALE" 'BEGIN { n = int(6000 * s); print (n < 3000 ? 3000 : n) }')}
SCENARIOS=${MOVE_CRASH_SCENARIOS:-"mds_prepared mds_decided mds_x_committed kill_x kill_y kill_home kill_r2"}
DOWN_S=${MOVE_CRASH_DOWN_S:-2}
pid_folder mdsl_move_crash MOVE_CRASH_KEEP

# ---- one cluster (the current scenario's; D its folder) -------------------
declare -A LPID LPORT MPID MPORT
start_r2() {
    "$R2BIN" --data "$D/r2" --listen "127.0.0.1:$PR2" >>"$D/r2.log" 2>&1 &
    R2PID=$!
    PIDS="$PIDS $!"
    wait_port "$PR2"
}
start_mds() { # k [POINT: the crash point, for this start only]
    local k=$1
    [ -n "${MPORT[$k]:-}" ] || MPORT[$k]=$(free_port)
    mkdir -p "$D/mds$k"
    "$MDSBIN" ${2:+--crash-point "$2"} --r2 "$R2" --dir "$D/mds$k" --listen "127.0.0.1:${MPORT[$k]}" \
        --split-threshold 64 --commit-interval-ms 500 --threads 2 --move-rate 65536 \
        >>"$D/mds$k.log" 2>&1 &
    MPID[$k]=$!
    PIDS="$PIDS $!"
    wait_port "${MPORT[$k]}"
}
# down_up WHAT PID RESTART...: SIGKILL (fault_at: when), the storm goes on
# (go25) while it is down, DOWN_S seconds, restart.
down_up() {
    local what=$1 pid=$2; shift 2
    kill -KILL "$pid"
    fault_at=$(date +%T.%3N)
    wait "$pid" 2>/dev/null
    touch "$D/sync/go25"
    stamp "  $SC: MOVING: SIGKILLed $what"
    sleep "$DOWN_S"
    echo "--- restarted after SIGKILL" >>"$D/$what.log"
    "$@" || echo "$SC: $what did not restart"
}

# ---- one scenario -----------------------------------------------------------
scenario() {
    SC=$1
    D=$T/$SC
    mkdir -p "$D/sync"
    LPID=() LPORT=() MPID=() MPORT=()
    local crash="" verdict="" fault=0 stable=0 census_rc=1 drc=1
    case $SC in
        mds_prepared) crash=move.prepared verdict=aborts ;;
        mds_decided) crash=move.decided verdict=commits ;;
        mds_x_committed) crash=move.x_committed verdict=commits ;;
        kill_x|kill_y|kill_home|kill_r2) ;;
        *) echo "unknown scenario $SC"; FAIL=$((FAIL+1)); return ;;
    esac
    PR2=$(free_port)
    R2="127.0.0.1:$PR2"
    start_r2 || { FAIL=$((FAIL+1)); echo "FAIL: $SC: R2 did not start"; return; }
    for k in 1 2; do start_mdsl $k || { FAIL=$((FAIL+1)); echo "FAIL: $SC: mdsl$k"; return; }; done
    start_mds 1 "$crash" && start_mds 2 || { FAIL=$((FAIL+1)); echo "FAIL: $SC: MDS"; return; }
    sleep 2 # every MDS holds the final ring 0 before the clients come
    POM_R2=$R2 "$POMCTL" fs create crashfs >>"$D/pomctl.log" 2>&1 ||
        { FAIL=$((FAIL+1)); echo "FAIL: $SC: fs create"; return; }
    touch "$D/sync/go50" "$D/sync/go75" # the storm is held at 25% only
    stamp "$SC: storm of $N files; mdsl3 joins at 25%"
    "$DRIVER" "$R2" crashfs "$N" 4 "$D/sync" >"$D/driver.out" 2>"$D/driver.err" &
    DPID=$!
    PIDS="$PIDS $DPID"
    local fault_at=""
    if wait_mark p25; then
        start_mdsl 3 || echo "$SC: mdsl3 did not start"
        wait_for 60 grep -aq "ring 1: moving" "$D/r2.log" ||
            echo "$SC: ring 1 never MOVING ($(phase))"
        case $SC in
        mds_*)
            # The storm goes on in MOVING and mds1 dies by itself at its
            # first group that moves a slice (a storm's or the mover's).
            touch "$D/sync/go25"
            local t0=$SECONDS
            while kill -0 "${MPID[1]}" 2>/dev/null && [ $((SECONDS - t0)) -lt 90 ]; do
                sleep 0.1
            done
            if ! kill -0 "${MPID[1]}" 2>/dev/null; then
                wait "${MPID[1]}" 2>/dev/null
                stamp "  $SC: mds1 died ($(phase)); restart without the crash point"
                fault_at=$(grep -a "crash point $crash reached" "$D/mds1.log" |
                           head -1 | cut -c1-12)
                echo "--- restarted after the crash point" >>"$D/mds1.log"
                start_mds 1 || echo "$SC: mds1 did not restart"
            else
                stamp "  $SC: mds1 never reached its crash point"
            fi ;;
        kill_r2) down_up r2 "$R2PID" start_r2 ;;
        kill_x) down_up mdsl2 "${LPID[2]}" start_mdsl 2 ;;
        kill_y) down_up mdsl3 "${LPID[3]}" start_mdsl 3 ;;
        kill_home) down_up mdsl1 "${LPID[1]}" start_mdsl 1 ;;
        esac
    fi
    wait_for 120 is_phase stable && stable=1
    # The fault came before R2 decided DONE (so during MOVING).
    local done_at
    done_at=$(grep -a "ring 1: done" "$D/r2.log" | head -1 | cut -c1-12)
    [ -n "$fault_at" ] && [ -n "$done_at" ] && [[ "$fault_at" < "$done_at" ]] && fault=1
    stamp "  $SC: fault at ${fault_at:-?}, DONE at ${done_at:-?}; phase $(phase)"
    local a=()
    for k in 1 2 3; do [ -n "${LPORT[$k]:-}" ] && a+=("127.0.0.1:${LPORT[$k]}"); done
    "$CENSUS" "${a[@]}" >"$D/census.txt" 2>&1 && census_rc=0
    sed "s/^/  census: /" "$D/census.txt" | tail -4
    touch "$D/sync/events_done"
    wait_within 300 "$DPID" storm_driver
    drc=$?
    for k in 1 2; do kill -HUP "${MPID[$k]}" 2>/dev/null; done
    sleep 1
    grep -E '^check' "$D/driver.out" | grep -v ': ok$' | sed 's/^/  /'
    grep -E '^result: (synced_files|synced_missing|not_guaranteed|unexpected_errors) ' \
        "$D/driver.out" | tr '\n' ' ' | sed 's/result: //g; s/^/  driver: /; s/$/\n/'
    grep -aE 'unexpected|FAILED' "$D/driver.err" | head -10 | sed 's/^/  /'
    local moves=0 b
    for k in 1 2; do
        b=$(dist_line "$D/mds$k.log")
        moves=$((moves + $(field "$b" moves || echo 0)))
    done
    ok "$SC: the fault happened during MOVING (before DONE)" [ "$fault" = 1 ]
    ok "$SC: the join of mdsl3 reached STABLE" [ "$stable" = 1 ]
    ok "$SC: every slice live at exactly one MDSL" [ "$census_rc" = 0 ]
    ok "$SC: the driver's checks (synced files/links/renames, listing, nlink, sync times)" \
        [ "$drc" = 0 ]
    ok "$SC: the MDS moved slices ($moves)" [ "$moves" -gt 0 ]
    if [ -n "$verdict" ]; then
        local txid
        # The txid of the last group that moved before the crash point.
        txid=$(awk '/group: txid [0-9a-f]+ moves slices/ { t = $0 }
                    /crash point move\.[a-z_]* reached/ { print t; exit }' "$D/mds1.log" |
               sed 's/.*txid \([0-9a-f]*\) moves.*/\1/')
        grep -a "recovery $verdict txid $txid " "$D/mds1.log" | sed 's/^/  mds1: /'
        ok "$SC: mds1's recovery $verdict the cut txid ${txid:-?}" \
            grep -aq "recovery $verdict txid ${txid:-none} " "$D/mds1.log"
    else
        echo "  groups aborted by a failed prepare: $(cat "$D"/mds?.log | grep -ac 'prepare failed')"
    fi
    ok "$SC: no sanitizer report" \
        sh -c "! grep -aqE 'Sanitizer|runtime error' $D/*.log $D/driver.err"
    kill_pids
}

echo "== ring-1 move crash matrix: $SCENARIOS; N=$N files each, 2 MDS, 2 MDSL + mdsl3 joining"
for s in $SCENARIOS; do scenario "$s"; done
check_done
