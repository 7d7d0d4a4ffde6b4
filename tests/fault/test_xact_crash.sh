#!/bin/bash
# test_xact_crash.sh -- atomic batches across MDS survive a SIGKILL at each
# step of their transaction (docs/mds-xact.md). For each crash point of
# pom-mds (--crash-point xact.POINT: `prepared` = the coordinator after every
# participant prepared, before deciding; `decided` = after the decision,
# before answering; `participant` = a participant after its prepare
# applied, before answering), a fresh cluster: 1 pom-r2 (--fail-after 60:
# the restarted MDS keeps its slices, ring 0 never changes), 1 pom-mdsl,
# 2 pom-mds (--split-threshold 16: every directory's table spreads over
# both, so most links/renames between two directories are transactions
# across MDS; --commit-interval-ms 500; --xact-resolve-ms 300).
#   1. xact_driver populate: DIRS directories of FILES files, synced, with
#      no crash point (a create is a batch with its parent's row, which may
#      sit at the other MDS); then xact_driver visible: a stat right after
#      each mkdir/rmdir shows the new count (an RMU's delta shown before its
#      delivery when the parent's row sits at the other MDS);
#   2. both MDS restarted (SIGTERM: they commit first) with the crash
#      point armed: whichever plays the role first dies;
#   3. xact_driver churn: THREADS threads link, rename and exchange names
#      between random pairs of directories, and make and remove
#      subdirectories (the parent's count is an RMU when the parent's row
#      sits at the other MDS: an outbox row with the entry, delivered as a
#      transaction with a count row at the parent), and move them to
#      other directories (both parents' counts and the directory's GDT
#      row change: copies, docs/mds-xact.md), recording every answer;
#   4. an MDS must die at the crash point within 30 s (none: no cross-MDS
#      transaction reached it, a failure); each MDS that dies is restarted
#      at once WITHOUT the crash point (same folder and port), the other
#      may still die at its first transaction and is restarted likewise;
#      the churn goes on AFTER_S seconds after the last restart, and
#      until every kind of op succeeded once (30 s at most);
#   5. a few resolve periods later, xact_driver check from a fresh client:
#      every listed name resolves (no stub without its ILT row), nlink ==
#      names for every uuid, every directory's nlink == 2 + its
#      subdirectories, no file lost, no name listed twice, root nlink
#      right. A pending row stays visible until its slice is loaded and
#      its resolver ran, so a pass that finds a violation is repeated (up
#      to 4 passes, 1 s apart): the last is the verdict, the first is
#      printed ("visible before settling"). Then `pomctl fsck` must be
#      clean, its check (10) included: every directory's GDT row names
#      where it is.
#      And from the churn itself: every name an op made (answered 0) after
#      the last restart must still be there (no MDS died since: an
#      acknowledged link or rename may not vanish).
#   6. counters (SIGHUP reports, summed over each MDS's incarnations):
#      xact_commits > 0; xact_aborts_dropped > 0 when any transaction
#      aborted (the coordinator removes its own ABORT rows); for
#      `prepared`, xact_aborts_gc > 0 (--abort-gc-ms 1000: the
#      resolvers' ABORT rows for the killed coordinator are removed once
#      its new incarnation answers) and xact_rollbacks > 0 (the prepared
#      parts of the killed coordinator's transaction were rolled back);
#      xact_op_by_op == 0: no batch was left to the client's op-by-op
#      fallback, which is not atomic (a split child not told yet answers
#      -EAGAIN, and tiny rows always fit a pending row's pre-image).
#
#   test_xact_crash.sh POM_R2 POM_MDSL POM_MDS POMCTL XACT_DRIVER
#   XACT_POINTS="prepared ..."   the crash points to run (default: all 3)
#   XACT_KEEP=1                  keep the folder (logs, op logs) and say where
#   POM_XACT_SEED=N              the churn's seed (else printed)
#   XACT_VERBOSE=1               MDS debug logs (each pending row settled)
#   XACT_POINTS=none             a run with no crash point (a baseline: what
#                                the transactions do without a SIGKILL)
# Daemons run on free ports in a mktemp folder and are stopped by pid.
set -u
R2BIN=$(realpath "$1"); MDSLBIN=$(realpath "$2"); MDSBIN=$(realpath "$3")
POMCTL=$(realpath "$4"); DRIVER=$(realpath "$5")
. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
export TZ=UTC LC_ALL=C
POINTS=${XACT_POINTS:-"prepared decided participant"}
DIRS=${XACT_DIRS:-8}
FILES=${XACT_FILES:-40}
THREADS=${XACT_THREADS:-4}
RESOLVE_MS=300
SOFT_MS=3000 # a count shown before its RMU's delivery (mds/mds_soft.h)
AFTER_S=${XACT_AFTER_S:-5}
pid_folder xact_crash XACT_KEEP
stamp() { echo "[$(date +%T)] $*"; }

# ctr LOG NAME: NAME's value summed over the incarnations of one MDS (the
# last SIGHUP report of each; a restart writes "--- restarted" first).
ctr() {
    awk -v n="$2" '
        /^--- restarted/ { s += last; last = 0; next }
        index($0, "stats: " n " ") { last = $NF }
        END { print s + last + 0 }' "$1"
}

run_point() {
    local point=$1 D=$T/$point
    mkdir -p "$D"
    local t_start=$SECONDS
    declare -A MPID MPORT DEATHS
    local pr2; pr2=$(free_port)
    "$R2BIN" --data "$D/r2" --listen "127.0.0.1:$pr2" --fail-after 60 >"$D/r2.log" 2>&1 &
    PIDS="$PIDS $!"
    wait_port "$pr2" || return 1
    local R2="127.0.0.1:$pr2"
    local pl; pl=$(free_port)
    mkdir -p "$D/mdsl"
    "$MDSLBIN" --dir "$D/mdsl" --listen "127.0.0.1:$pl" --r2 "$R2" >"$D/mdsl.log" 2>&1 &
    PIDS="$PIDS $!"
    wait_port "$pl" && wait_registered "$D/mdsl" || return 1

    # start_mds K CRASH: pom-mds K in $D/mdsK on MPORT[K]; CRASH empty:
    # no crash point. Returns once its port serves.
    start_mds() {
        local k=$1 crash=$2
        [ -n "${MPORT[$k]:-}" ] || MPORT[$k]=$(free_port)
        mkdir -p "$D/mds$k"
        "$MDSBIN" ${crash:+--crash-point "xact.$crash"} ${XACT_VERBOSE:+--verbose} \
            --xact-resolve-ms "$RESOLVE_MS" --abort-gc-ms 1000 --rmu-soft-ms "$SOFT_MS" \
            --r2 "$R2" --dir "$D/mds$k" --listen "127.0.0.1:${MPORT[$k]}" \
            --split-threshold 16 --commit-interval-ms 500 --threads 4 >>"$D/mds$k.log" 2>&1 &
        MPID[$k]=$!
        PIDS="$PIDS $!"
        local i
        for i in $(seq 300); do
            (exec 3<>"/dev/tcp/127.0.0.1/${MPORT[$k]}") 2>/dev/null && return 0
            kill -0 "${MPID[$k]}" 2>/dev/null || break
            sleep 0.1
        done
        echo "mds$k does not serve (port ${MPORT[$k]}):"; tail -5 "$D/mds$k.log"
        return 1
    }
    alive() { kill -0 "${MPID[$1]}" 2>/dev/null; }
    # enough S: every kind of op the checks below count has succeeded once
    # (a loaded machine may run few ops in AFTER_S), or S >= 30.
    enough() {
        [ "$1" -ge 30 ] && return 0
        local o
        for o in link rename exchange mkdir rmdir mvdir; do
            grep -aqE "^\+[0-9.]+ t[0-9]+ $o .* rc 0 \(" "$D/ops.log" 2>/dev/null || return 1
        done
    }
    hup_all() { local k; for k in 1 2; do alive $k && kill -HUP "${MPID[$k]}"; done; }

    start_mds 1 "" && start_mds 2 "" || return 1
    sleep 2.5 # both MDS hold the final ring 0 before the client comes
    POM_R2=$R2 "$POMCTL" fs create xfs >"$D/pomctl.log" 2>&1 ||
        { echo "fs create failed"; cat "$D/pomctl.log"; return 1; }
    "$DRIVER" "$R2" xfs populate "$DIRS" "$FILES" "$D/list" >"$D/populate.out" 2>&1
    local prc=$?
    ok "$point: populated $DIRS x $FILES files (synced)" [ $prc = 0 ]
    [ $prc = 0 ] || { cat "$D/populate.out"; return 1; }
    # A parent's count shows a mkdir/rmdir at once, also when its row sits
    # at the other MDS (an RMU, shown before its delivery).
    "$DRIVER" "$R2" xfs visible "$DIRS" 6 >"$D/visible.out" 2>&1
    local vrc=$?
    grep -a '^violation\|^result\|^mkdir\|^rmdir' "$D/visible.out" | head -8 | sed "s/^/$point: /"
    ok "$point: every stat after a mkdir or rmdir shows the new count (exit $vrc)" [ $vrc = 0 ]

    # Both MDS again, now with the crash point ("none": a run without one,
    # to tell what the crashes do from what the transactions do alone).
    local k
    [ "$point" = none ] || for k in 1 2; do
        kill -TERM "${MPID[$k]}"
        for i in $(seq 300); do alive $k || break; sleep 0.1; done
        alive $k && { echo "mds$k still runs 30 s after SIGTERM: SIGKILL"; kill -9 "${MPID[$k]}"; }
        wait "${MPID[$k]}" 2>/dev/null
        echo "--- restarted (--crash-point xact.$point)" >>"$D/mds$k.log"
        start_mds $k "$point" || return 1
    done
    sleep 1 # both registered again (same sites, same ring 0)

    stamp "$point: churn starts"
    rm -f "$D/stop"
    CHURN_RT=$(date +%s.%N)
    "$DRIVER" "$R2" xfs churn 120 "$THREADS" "$D/list" "$D/ops.log" "$D/stop" \
        >"$D/churn.out" 2>&1 &
    local cpid=$!
    PIDS="$PIDS $cpid"
    local t0=$SECONDS last=0 deaths=0 first_s=- hup_at=$SECONDS calm=0
    while kill -0 "$cpid" 2>/dev/null; do
        for k in 1 2; do
            alive $k && continue
            wait "${MPID[$k]}" 2>/dev/null
            local rc=$?
            deaths=$((deaths + 1))
            DEATHS[$k]=$(( ${DEATHS[$k]:-0} + 1 ))
            [ "$first_s" = - ] && first_s=$((SECONDS - t0))
            stamp "$point: mds$k died (exit $rc) after $((SECONDS - t0)) s of churn; restarting it without the crash point"
            echo "--- restarted (no crash point)" >>"$D/mds$k.log"
            start_mds $k "" || echo "mds$k did not serve again"
            last=$SECONDS
            calm=$(date +%s.%N)
        done
        if [ $deaths = 0 ] && [ $((SECONDS - t0)) -ge 30 ]; then
            break
        fi
        [ "$point" = none ] && [ $((SECONDS - t0)) -ge "$AFTER_S" ] && enough $((SECONDS - t0)) &&
            break
        [ $deaths -gt 0 ] && [ $((SECONDS - last)) -ge "$AFTER_S" ] && enough $((SECONDS - last)) &&
            break
        # Counters of an incarnation that may die: reported every second.
        if [ $((SECONDS - hup_at)) -ge 1 ]; then hup_all; hup_at=$SECONDS; fi
        sleep 0.1
    done
    if [ "$point" = none ]; then
        ok "$point: no MDS died" [ $deaths = 0 ]
        calm=$CHURN_RT
    else
        ok "$point: an MDS died at the crash point within 30 s of churn (deaths $deaths, first after ${first_s} s)" \
            [ $deaths -gt 0 ]
    fi
    for k in 1 2; do
        local want=0
        [ "${DEATHS[$k]:-0}" -gt 0 ] && want=1
        # Incarnations that logged the crash point (several threads may
        # reach it at once: one line each before the process dies).
        local said; said=$(awk -v p="crash point xact.$point reached" '
            /^--- restarted/ { n += hit; hit = 0; next }
            index($0, p) { hit = 1 }
            END { print n + hit }' "$D/mds$k.log")
        ok "$point: mds$k died ${DEATHS[$k]:-0} time(s), each at the crash point ($said incarnations said so)" \
            [ "$said" = "${DEATHS[$k]:-0}" ]
        ok "$point: mds$k died at most once (never without the crash point)" [ "${DEATHS[$k]:-0}" -le "$want" ]
    done
    echo "$calm" >"$D/stop" # the churn checks what it made after the last restart
    local w=0
    while kill -0 "$cpid" 2>/dev/null && [ $w -lt 600 ]; do sleep 0.1; w=$((w + 1)); done
    kill -0 "$cpid" 2>/dev/null && { echo "churn still runs 60 s after its stop file: SIGKILL"; kill -9 "$cpid"; }
    wait "$cpid"
    local crc=$?
    stamp "$point: churn exited $crc"
    grep -a '^result\|^churn' "$D/churn.out" | sed "s/^/$point: /"
    ok "$point: churn ran (exit $crc)" [ $crc = 0 ]
    local lost
    lost=$(awk '$2 == "acked_names_lost" {print $3}' "$D/churn.out")
    grep -a '^lost:' "$D/churn.out" | head -5 | sed "s/^/$point: /"
    ok "$point: no name made by an op answered 0 after the last restart is lost (${lost:-?})" \
        [ "${lost:-1}" = 0 ]
    local linked renamed xchg
    linked=$(awk '$2 == "link_ok" {print $3}' "$D/churn.out")
    renamed=$(awk '$2 == "rename_ok" {print $3}' "$D/churn.out")
    xchg=$(awk '$2 == "exchange_ok" {print $3}' "$D/churn.out")
    ok "$point: links, renames and exchanges succeeded (${linked:-0}, ${renamed:-0}, ${xchg:-0})" \
        [ "${linked:-0}" -gt 0 -a "${renamed:-0}" -gt 0 -a "${xchg:-0}" -gt 0 ]
    local made removed
    made=$(awk '$2 == "mkdir_ok" {print $3}' "$D/churn.out")
    removed=$(awk '$2 == "rmdir_ok" {print $3}' "$D/churn.out")
    ok "$point: mkdirs and rmdirs succeeded (${made:-0}, ${removed:-0})" \
        [ "${made:-0}" -gt 0 -a "${removed:-0}" -gt 0 ]
    local moved
    moved=$(awk '$2 == "mvdir_ok" {print $3}' "$D/churn.out")
    ok "$point: directories moved across directories (${moved:-0})" [ "${moved:-0}" -gt 0 ]

    sleep $(( (RESOLVE_MS * 4 + 999) / 1000 )) # a few resolve periods
    stamp "$point: check from a fresh client"
    timeout 120 "$DRIVER" "$R2" xfs check "$DIRS" "$D/list" 4 1000 >"$D/check.out" 2>&1
    local krc=$?
    grep -a '^check pass\|^result\|^violation' "$D/check.out" | head -40 | sed "s/^/$point: /"
    ok "$point: check: every name resolves, nlink == names, no file lost (exit $krc)" [ $krc = 0 ]
    local first_bad
    first_bad=$(grep -a -m1 '^check pass 1:' "$D/check.out" | sed 's/.* \([0-9]*\) violations.*/\1/')
    echo "result: $point: violations visible before settling (check pass 1): ${first_bad:-?}"

    # pomctl fsck: the same tree as a client sees it, and every directory's
    # GDT row names where it is (copies, delivered across the crash).
    POM_R2=$R2 "$POMCTL" --json fsck --fs xfs >"$D/fsck.json" 2>"$D/fsck.err"
    local frc=$?
    head -5 "$D/fsck.err" | sed "s/^/$point: fsck: /"
    local gdt
    gdt=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["gdt_rows_checked"], j["directories"])' "$D/fsck.json" 2>/dev/null)
    echo "result: $point: fsck exit $frc, GDT rows checked / directories: ${gdt:-?}"
    ok "$point: pomctl fsck is clean, GDT included (exit $frc)" [ $frc = 0 ]

    sleep 1 # whatever the check's loads found, resolved
    hup_all
    sleep 0.5
    local c p r res ab drop gc dec
    c=$(( $(ctr "$D/mds1.log" xact_commits) + $(ctr "$D/mds2.log" xact_commits) ))
    ab=$(( $(ctr "$D/mds1.log" xact_aborts) + $(ctr "$D/mds2.log" xact_aborts) ))
    drop=$(( $(ctr "$D/mds1.log" xact_aborts_dropped) + $(ctr "$D/mds2.log" xact_aborts_dropped) ))
    gc=$(( $(ctr "$D/mds1.log" xact_aborts_gc) + $(ctr "$D/mds2.log" xact_aborts_gc) ))
    dec=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["decision_rows"])' "$D/fsck.json" 2>/dev/null)
    p=$(( $(ctr "$D/mds1.log" xact_prepares) + $(ctr "$D/mds2.log" xact_prepares) ))
    res=$(( $(ctr "$D/mds1.log" xact_resolved) + $(ctr "$D/mds2.log" xact_resolved) ))
    r=$(( $(ctr "$D/mds1.log" xact_rollbacks) + $(ctr "$D/mds2.log" xact_rollbacks) ))
    echo "result: $point: xact_commits $c xact_aborts $ab xact_prepares $p xact_resolved $res xact_rollbacks $r"
    echo "result: $point: ABORT rows removed by their coordinator $drop, of gone incarnations $gc, decision rows left (fsck) ${dec:-?}"
    ok "$point: xact_commits > 0 ($c)" [ "$c" -gt 0 ]
    # A coordinator's own ABORT row goes once nothing can COMMIT over it
    # (docs/mds-xact.md "ABORT rows"): every run aborts some transactions.
    [ "$ab" -gt 0 ] && ok "$point: ABORT rows removed by their coordinator ($drop of $ab aborts)" [ "$drop" -gt 0 ]
    [ "$point" = prepared ] && ok "$point: xact_rollbacks > 0 ($r)" [ "$r" -gt 0 ]
    # The killed coordinator's transactions were aborted by resolvers; its
    # incarnation is gone, so their ABORT rows are removed (age 1 s here).
    [ "$point" = prepared ] && ok "$point: ABORT rows of the killed incarnation removed ($gc)" [ "$gc" -gt 0 ]
    local obo
    obo=$(( $(ctr "$D/mds1.log" xact_op_by_op) + $(ctr "$D/mds2.log" xact_op_by_op) ))
    ok "$point: no batch answered -EXDEV, run op by op without atomicity ($obo)" [ "$obo" = 0 ]
    ok "$point: no sanitizer report" sh -c "! grep -aqE 'Sanitizer|runtime error' $D/*.log $D/*.out"
    if [ "$FAIL" != 0 ]; then
        for k in 1 2; do
            echo "--- $point: mds$k.log (warnings and errors, tail; counters)"
            grep -aE '^[0-9:.]+ [WE] ' "$D/mds$k.log" | tail -12
            grep -a 'dist: site' "$D/mds$k.log" | tail -1
            echo "--- $point: mds$k.log (last lines)"
            grep -av 'stats: ' "$D/mds$k.log" | tail -15
        done
    fi
    kill_pids
    echo "result: $point: $((SECONDS - t_start)) s"
    return 0
}

T_ALL=$SECONDS
for point in $POINTS; do
    stamp "== crash point $point"
    run_point "$point" || { FAIL=$((FAIL + 1)); echo "FAIL: $point: the cluster did not come up"; kill_pids; }
done
echo "result: total $((SECONDS - T_ALL)) s"
check_done
