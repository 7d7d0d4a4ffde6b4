#!/bin/bash
# test_rmu_reload.sh -- RMU outbox rows are delivered after a restart of
# every MDS even when nobody reads their slices again (mds/mds_reload.h,
# docs/mds-xact.md "Reload"). 1 pom-r2 (--fail-after 60: ring 0 stays), 1
# pom-mdsl, 2 pom-mds (--split-threshold 16: the tables spread over both,
# so many parents' rows sit at the other MDS than their new entries).
#   1. both MDS run with --rmu-hold (test-only: no delivery);
#      xact_driver populate makes DIRS directories x<k> of FILES files,
#      mkdirs makes N subdirectories in each and syncs: the parents'
#      counts (and the new directories' GDT copies) whose rows sit at the
#      other MDS are outbox rows, committed, undelivered (rmu_queued > 0,
#      rmu_delivered = 0 in the MDS counters); xact_driver nest: 24
#      directories y<k> with a subdirectory b (and a made and removed),
#      and rmdir of each must answer ENOTEMPTY (a's outbox rows first in a
#      table's cookie order made the emptiness check see an empty page);
#   2. both MDS SIGKILLed (the shown deltas die with them) and restarted
#      without the hold;
#   3. xact_driver nlinks: every x<k> must show nlink 2 + N within 30 s by
#      stat alone -- no client reads a slice of x<k>'s table, so only the
#      reload (slices whose records say they hold system rows, loaded
#      from the MDSL listings) can bring the outbox rows to a round;
#   4. the counters say slices were reloaded and rows delivered;
#   5. both MDS stopped cleanly and started again: their reload passes
#      find nothing flagged (the flag cleared with the rows), and
#      `pomctl fsck` is clean (the GDT copies arrived too).
#
#   test_rmu_reload.sh POM_R2 POM_MDSL POM_MDS POMCTL XACT_DRIVER
#   RMU_KEEP=1  keep the folder (logs) and say where
# Daemons run on free ports in a mktemp folder and are stopped by pid.
set -u
R2BIN=$(realpath "$1"); MDSLBIN=$(realpath "$2"); MDSBIN=$(realpath "$3")
POMCTL=$(realpath "$4"); DRIVER=$(realpath "$5")
. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
export TZ=UTC LC_ALL=C
DIRS=8
FILES=20
N=5
pid_folder rmu_reload RMU_KEEP
D=$T

pr2=$(free_port)
"$R2BIN" --data "$D/r2" --listen "127.0.0.1:$pr2" --fail-after 60 >"$D/r2.log" 2>&1 &
PIDS="$PIDS $!"
wait_port "$pr2" || exit 1
R2="127.0.0.1:$pr2"
pl=$(free_port)
mkdir -p "$D/mdsl"
"$MDSLBIN" --dir "$D/mdsl" --listen "127.0.0.1:$pl" --r2 "$R2" >"$D/mdsl.log" 2>&1 &
PIDS="$PIDS $!"
wait_port "$pl" && wait_registered "$D/mdsl" || exit 1

declare -A MPID MPORT
# start_mds K HOLD: pom-mds K in $D/mdsK (same port at a restart); HOLD 1:
# --rmu-hold. Returns once its port serves.
start_mds() {
    local k=$1 hold=$2 i
    [ -n "${MPORT[$k]:-}" ] || MPORT[$k]=$(free_port)
    mkdir -p "$D/mds$k"
    local opt=""
    [ "$hold" = 1 ] && opt=--rmu-hold
    "$MDSBIN" $opt --rmu-soft-ms 3000 --r2 "$R2" --dir "$D/mds$k" --listen "127.0.0.1:${MPORT[$k]}" \
        --split-threshold 16 --commit-interval-ms 500 --threads 4 >>"$D/mds$k.log" 2>&1 &
    MPID[$k]=$!
    PIDS="$PIDS $!"
    for i in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/${MPORT[$k]}") 2>/dev/null && return 0
        kill -0 "${MPID[$k]}" 2>/dev/null || break
        sleep 0.1
    done
    echo "mds$k does not serve (port ${MPORT[$k]}):"; tail -5 "$D/mds$k.log"
    return 1
}
# restart_both SIG: both MDS stopped by SIG, waited for, started again
# without the hold (same folders and ports).
restart_both() {
    local k
    for k in 1 2; do kill "$1" "${MPID[$k]}"; done
    for k in 1 2; do wait "${MPID[$k]}" 2>/dev/null; echo "--- restarted" >>"$D/mds$k.log"; done
    start_mds 1 0 && start_mds 2 0 || exit 1
}
# ctr NAME: NAME summed over both MDS, from the last SIGHUP report of each
# one's current incarnation (a restart writes "--- restarted" first).
ctr() {
    local k s=0 v
    for k in 1 2; do kill -HUP "${MPID[$k]}"; done
    sleep 0.5
    for k in 1 2; do
        v=$(awk -v n="$1" '/^--- restarted/ { last = 0; next }
                           index($0, "stats: " n " ") { last = $NF }
                           END { print last + 0 }' "$D/mds$k.log")
        s=$((s + v))
    done
    echo "$s"
}

start_mds 1 1 && start_mds 2 1 || exit 1
sleep 2.5 # both MDS hold the final ring 0 before the client comes
POM_R2=$R2 "$POMCTL" fs create xfs >"$D/pomctl.log" 2>&1 || { echo "fs create failed"; cat "$D/pomctl.log"; exit 1; }
"$DRIVER" "$R2" xfs populate "$DIRS" "$FILES" "$D/list" >"$D/populate.out" 2>&1
ok "populated $DIRS x $FILES files" [ $? = 0 ]
"$DRIVER" "$R2" xfs mkdirs "$DIRS" "$N" >"$D/mkdirs.out" 2>&1
ok "$((DIRS * N)) subdirectories made and synced" [ $? = 0 ]
# rmdir of a directory holding one subdirectory while a removed one's RMU
# rows are still in its table: they (system rows) may come first in
# cookie order.
"$DRIVER" "$R2" xfs nest 24 >"$D/nest.out" 2>&1
nrc=$?
grep -a '^violation\|^result' "$D/nest.out" | head -6
ok "rmdir of a directory holding a subdirectory (and RMU rows) answers ENOTEMPTY" [ $nrc = 0 ]
queued=$(ctr rmu_queued); delivered=$(ctr rmu_delivered)
echo "  held: rmu_queued $queued, rmu_delivered $delivered"
ok "outbox rows were written (rmu_queued $queued > 0)" [ "$queued" -gt 0 ]
eq "none delivered while held" "$delivered" 0

restart_both -KILL

"$DRIVER" "$R2" xfs nlinks "$DIRS" $((2 + N)) 30 >"$D/nlinks.out" 2>&1
nrc=$?
grep -a '^violation\|^result' "$D/nlinks.out" | head -12
ok "every parent's count arrived by stat alone (no listing) within 30 s" [ $nrc = 0 ]
reloads=$(ctr sys_reloads); delivered=$(ctr rmu_delivered)
echo "  after the restart: sys_reloads $reloads, rmu_delivered $delivered"
ok "slices with system rows were reloaded ($reloads)" [ "$reloads" -gt 0 ]
ok "outbox rows delivered after the restart ($delivered)" [ "$delivered" -gt 0 ]

# The flag clears: once the rows are delivered and their transactions
# finished, a clean stop commits the slices without it, and the next
# incarnations reload nothing.
sleep 3
restart_both -TERM
sleep 3 # the reload's first pass
again=$(ctr sys_reloads); passes=$(ctr reload_passes)
echo "  after a clean restart: sys_reloads $again (passes $passes)"
ok "a pass ran in each new incarnation ($passes)" [ "$passes" -ge 2 ]
eq "nothing flagged is left to reload" "$again" 0

POM_R2=$R2 "$POMCTL" --json fsck --fs xfs >"$D/fsck.json" 2>"$D/fsck.err"
frc=$?
head -5 "$D/fsck.err"
ok "pomctl fsck is clean, GDT included (exit $frc)" [ $frc = 0 ]
eq "no sanitizer report" "$(cat "$D"/*.log | grep -c 'Sanitizer')" "0"
check_done
