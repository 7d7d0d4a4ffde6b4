#!/bin/bash
# test_dist_mds.sh -- many MDS on loopback (docs/mds-dist.md "What the test
# shows"): 1 R2, 2 MDSL, 4 MDS; 8 client threads (dist_driver, through
# libpomegranate and R2) create N files in ONE directory, find each again,
# list them (each exactly once), and look them all up again once the
# bitmaps converged; then 16 "stale" clients, opened one by one during the
# creates (each knows the bitmap of its moment), look up 500 random names
# each. Run twice: gossip on, then gossip off, the looped forward counts
# (whole run and stale clients) printed side by side.
#
#   test_dist_mds.sh POM_R2 POM_MDSL POM_MDS POMCTL DIST_DRIVER
#   POM_TEST_SCALE=K   N = 200,000 * K (CI: 1; the `long` run: 10)
#   DIST_N=...         N outright (quick manual runs)
#   DIST_NMDS=K        K MDS instead of 4 (K = 1: the spread checks are off)
#
# Checks, per run: the driver's own (every file found, listing exact); the
# table's slices and rows spread over all 4 MDS (none holds more than 40%,
# from each MDS's "dist:" counters); forwards during the second lookup pass
# < 1% of the requests the clients sent. Daemons run on free ports and are
# stopped by pid; the folder is removed.
set -u
R2BIN=$(realpath "$1"); MDSLBIN=$(realpath "$2"); MDSBIN=$(realpath "$3")
POMCTL=$(realpath "$4"); DRIVER=$(realpath "$5")
. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
export TZ=UTC LC_ALL=C
SCALE=${POM_TEST_SCALE:-1}
N=${DIST_N:-$((200000 * SCALE))}
NMDS=${DIST_NMDS:-4}   # DIST_NMDS=1: the same run on one MDS (numbers only)
SPLIT=${DIST_SPLIT:-2048}
pid_folder dist_mds DIST_KEEP

# The last "dist:" line of an MDS log, as "key value" pairs on one line.
dist_line() { grep -a 'dist: site' "$1" | tail -1 | sed 's/.*dist: //'; }
field() { # line key
    echo "$1" | awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i+1); exit } }'
}

# One cluster run with gossip interval $1 (0: off); leaves its numbers in
# $T/run-$1.txt. Returns non-zero on a failed check.
run() {
    local gossip=$1 D=$T/g$1 fail=0
    mkdir -p "$D/sync"
    local pr2; pr2=$(free_port)
    # Heartbeats every second (as the clients' agents send them), a site
    # failed only after 30 missed: on a loaded 2-core machine a false
    # failure would change ring 0 under the test, and ring changes move no
    # slices in this stage (docs/mds-dist.md).
    "$R2BIN" --data "$D" --listen "127.0.0.1:$pr2" --fail-after 30 >"$D/r2.log" 2>&1 &
    PIDS="$PIDS $!"
    wait_port "$pr2" || return 1
    local R2="127.0.0.1:$pr2" k
    for k in 1 2; do
        local p; p=$(free_port)
        mkdir -p "$D/mdsl$k"
        "$MDSLBIN" --dir "$D/mdsl$k" --listen "127.0.0.1:$p" --r2 "$R2" >"$D/mdsl$k.log" 2>&1 &
        PIDS="$PIDS $!"
        wait_port "$p" && wait_registered "$D/mdsl$k" || return 1
    done
    MDS_PIDS=()
    for k in $(seq $NMDS); do
        local p; p=$(free_port)
        mkdir -p "$D/mds$k"
        "$MDSBIN" --r2 "$R2" --dir "$D/mds$k" --listen "127.0.0.1:$p" --gossip-ms "$gossip" --split-threshold "$SPLIT" --commit-interval-ms 1000 \
            --threads 4 >"$D/mds$k.log" 2>&1 &
        MDS_PIDS+=($!)
        PIDS="$PIDS $!"
        wait_port "$p" || return 1
    done
    # Every MDS must hold the final ring 0 before the clients come: they
    # registered one after the other; the next heartbeat brings the last.
    sleep 2.5
    POM_R2=$R2 "$POMCTL" fs create distfs >"$D/pomctl.log" 2>&1 || { echo "fs create failed"; return 1; }

    "$DRIVER" "$R2" distfs "$N" 8 "$D/sync" >"$D/driver.out" 2>"$D/driver.err" &
    local dpid=$!
    PIDS="$PIDS $dpid"
    for i in $(seq 36000); do
        [ -e "$D/sync/ready" ] && break
        kill -0 "$dpid" 2>/dev/null || break
        sleep 0.1
    done
    for p in "${MDS_PIDS[@]}"; do kill -HUP "$p"; done
    sleep 0.5
    local before=() mid=()
    for k in $(seq $NMDS); do before+=("$(dist_line "$D/mds$k.log")"); done
    touch "$D/sync/go"
    for i in $(seq 36000); do
        [ -e "$D/sync/ready2" ] && break
        kill -0 "$dpid" 2>/dev/null || break
        sleep 0.1
    done
    for p in "${MDS_PIDS[@]}"; do kill -HUP "$p"; done
    sleep 0.5
    for k in $(seq $NMDS); do mid+=("$(dist_line "$D/mds$k.log")"); done
    touch "$D/sync/go2"
    wait "$dpid"
    local drc=$?
    for p in "${MDS_PIDS[@]}"; do kill -HUP "$p"; done
    sleep 0.5
    cat "$D/driver.out"
    [ -s "$D/driver.err" ] && { echo "driver stderr:"; head -20 "$D/driver.err"; }
    ok "gossip=$gossip: the driver's checks (found, listing exact)" [ "$drc" = 0 ] || fail=1

    local fw2=0 rq2=0 ra2=0 loops=0 slices=() rows=() tot_s=0 tot_r=0 fwall=0 rqall=0
    local fw3=0 lp3=0 rq3=0 ra3=0
    for k in $(seq $NMDS); do
        local a m b; a=${before[$((k-1))]}; m=${mid[$((k-1))]}; b=$(dist_line "$D/mds$k.log")
        echo "mds$k: $b"
        fw2=$((fw2 + $(field "$m" forwards) - $(field "$a" forwards)))
        rq2=$((rq2 + $(field "$m" requests) - $(field "$a" requests)))
        ra2=$((ra2 + $(field "$m" remote_answers) - $(field "$a" remote_answers)))
        fw3=$((fw3 + $(field "$b" forwards) - $(field "$m" forwards)))
        lp3=$((lp3 + $(field "$b" looped) - $(field "$m" looped)))
        rq3=$((rq3 + $(field "$b" requests) - $(field "$m" requests)))
        ra3=$((ra3 + $(field "$b" remote_answers) - $(field "$m" remote_answers)))
        loops=$((loops + $(field "$b" looped)))
        fwall=$((fwall + $(field "$b" forwards)))
        rqall=$((rqall + $(field "$b" requests) - $(field "$b" remote_answers)))
        slices+=("$(field "$b" slices)"); rows+=("$(field "$b" rows)")
        tot_s=$((tot_s + $(field "$b" slices))); tot_r=$((tot_r + $(field "$b" rows)))
    done
    local client2=$((rq2 - ra2))
    local pct; pct=$(python3 -c "print('%.3f' % (100.0 * $fw2 / max($client2, 1)))")
    local pctall; pctall=$(python3 -c "print('%.3f' % (100.0 * $fwall / max($rqall, 1)))")
    echo "result: gossip_ms=$gossip slices per MDS: ${slices[*]} (total $tot_s); rows per MDS: ${rows[*]} (total $tot_r)"
    echo "result: gossip_ms=$gossip forwards in lookup pass 2: $fw2 of $client2 client requests ($pct%)"
    echo "result: gossip_ms=$gossip forwards over the whole run: $fwall of $rqall ($pctall%), looped forwards: $loops"
    echo "result: gossip_ms=$gossip stale clients: $fw3 forwards, $lp3 looped, for $((rq3 - ra3)) client requests"
    local s
    [ "$NMDS" -gt 1 ] && for k in $(seq $NMDS); do
        s=${slices[$((k-1))]}
        ok "gossip=$gossip: mds$k holds slices ($s of $tot_s) and at most 40%" \
            python3 -c "import sys; sys.exit(0 if 0 < $s <= 0.4 * $tot_s else 1)" || fail=1
        s=${rows[$((k-1))]}
        ok "gossip=$gossip: mds$k holds rows ($s of $tot_r) and at most 40%" \
            python3 -c "import sys; sys.exit(0 if 0 < $s <= 0.4 * $tot_r else 1)" || fail=1
    done
    ok "gossip=$gossip: forwards in the second lookup pass < 1% ($pct%)" \
        python3 -c "import sys; sys.exit(0 if $fw2 < 0.01 * max($client2, 1) else 1)" || fail=1
    ok "gossip=$gossip: ring 0 never changed under the clients (v$NMDS everywhere)" \
        sh -c "! grep -a 'dist: site' $D/mds*.log | grep -vq ' ring0 v$NMDS '" || fail=1
    ok "gossip=$gossip: no request hit the hop limit" \
        sh -c "! grep -aq 'forward loop' $D/mds*.log" || fail=1
    ok "gossip=$gossip: no sanitizer report" \
        sh -c "! grep -aqE 'Sanitizer|runtime error' $D/*.log $D/driver.err" || fail=1
    echo "$gossip $loops $fwall $rqall $lp3 $fw3" >"$T/run-$gossip.txt"
    grep -a "creates_per_s" "$D/driver.out" | awk '{print $3}' >"$T/cps-$gossip.txt"
    kill_pids
    return $fail
}

echo "== $NMDS MDS, 2 MDSL, N=$N files in one directory, 8 client threads, split threshold $SPLIT"
run 200
echo "== the same with gossip off"
run 0
read -r _ l_on f_on r_on sl_on sf_on <"$T/run-200.txt"
read -r _ l_off f_off r_off sl_off sf_off <"$T/run-0.txt"
printf "result: %-12s %12s %10s %10s %10s %14s %14s\n" "gossip" "looped fwds" "forwards" \
    "requests" "creates/s" "stale: looped" "stale: fwds"
printf "result: %-12s %12s %10s %10s %10s %14s %14s\n" "on (200 ms)" "$l_on" "$f_on" "$r_on" \
    "$(cat "$T/cps-200.txt")" "$sl_on" "$sf_on"
printf "result: %-12s %12s %10s %10s %10s %14s %14s\n" "off" "$l_off" "$f_off" "$r_off" \
    "$(cat "$T/cps-0.txt")" "$sl_off" "$sf_off"
check_done
