#!/bin/bash
# test_ring1_frozen.sh -- ring 1 (slices -> MDSL) does not move under the
# data (docs/r2.md "Rings"): 1 pom-r2 (--fail-after 2), 2 pom-mdsl, 1 pom-mds
# (--r2, small slices so the files spread over both MDSL). A real client
# (ring1_driver, libpomegranate through R2) creates DIRS x FILES files and
# syncs. Then:
#   1. SIGKILL mdsl2; wait until R2 declares it FAILED (pomctl --json sites);
#   2. restart the MDS meanwhile (SIGTERM, start again with its folder/port):
#      it takes ring 1 while mdsl2 is down;
#   3. start a third MDSL (new: R2 must keep it out of ring 1, with a WARN);
#   4. restart mdsl2 (same folder and port);
#   5. a fresh client finds every file with its uuid, and `pomctl ring show 1`
#      names the same sites, at the same version, as before the kill;
#      `pomctl site drain`/`remove` of mdsl1 are refused with a message that
#      says ring 1 is frozen, and drain of the new mdsl3 works.
# The MDS runs with --ring1-frozen: it does not send the ring-1 heartbeat
# fields (docs/mdsl-scale.md "Phases"), so this checks
# R2's gate (ring 1 stays frozen while an MDS of ring 0 does not follow it);
# ring-1 changes with MDS that follow are tests/dist/test_mdsl_scale.sh.
# Old behaviour (R2 took a FAILED MDSL out of ring 1 and put new and
# returning ones in; the MDS took ring 1 once at start): the restarted MDS
# looks for mdsl2's slices on mdsl1, so files are missing and ring 1 differs.
#
#   test_ring1_frozen.sh POM_R2 POM_MDSL POM_MDS POMCTL RING1_DRIVER
#   RING1_KEEP=1   keep the folder (logs) and say where
# Daemons run on free ports in a mktemp folder and are stopped by pid.
set -u
R2BIN=$(realpath "$1"); MDSLBIN=$(realpath "$2"); MDSBIN=$(realpath "$3")
POMCTL=$(realpath "$4"); DRIVER=$(realpath "$5")
. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
export TZ=UTC LC_ALL=C
DIRS=${RING1_DIRS:-10}
FILES=${RING1_FILES:-300}
pid_folder ring1 RING1_KEEP
stamp() { echo "[$(date +%T)] $*"; }

D=$T/c
mkdir -p "$D"
declare -A LPID LPORT
PR2=$(free_port)
"$R2BIN" --data "$D/r2" --listen "127.0.0.1:$PR2" --fail-after 2 >"$D/r2.log" 2>&1 &
PIDS="$PIDS $!"
wait_port "$PR2" || exit 1
R2="127.0.0.1:$PR2"
export POM_R2=$R2

# start_mdsl K: pom-mdsl K in $D/mdslK on LPORT[K] (free the first time).
start_mdsl() {
    local k=$1
    [ -n "${LPORT[$k]:-}" ] || LPORT[$k]=$(free_port)
    mkdir -p "$D/mdsl$k"
    "$MDSLBIN" --dir "$D/mdsl$k" --listen "127.0.0.1:${LPORT[$k]}" --r2 "$R2" \
        >>"$D/mdsl$k.log" 2>&1 &
    LPID[$k]=$!
    PIDS="$PIDS $!"
    wait_port "${LPORT[$k]}"
}
MPORT=$(free_port)
start_mds() { # the port opens once the commit group recovered
    mkdir -p "$D/mds"
    "$MDSBIN" --r2 "$R2" --dir "$D/mds" --listen "127.0.0.1:$MPORT" --split-threshold 64 --ring1-frozen \
        --commit-interval-ms 500 --threads 2 >>"$D/mds.log" 2>&1 &
    MPID=$!
    PIDS="$PIDS $!"
}
# sites_json: pomctl's site table; site_state ID; ring1: "v<version>
# id:share id:share ..." of ring 1 (the share of the key space shows a
# placement change even with the same sites).
sites_json() { "$POMCTL" --json sites 2>/dev/null; }
site_state() {
    sites_json | python3 -c "import json,sys
for s in json.load(sys.stdin)['sites']:
    if s['id'] == $1: print(s['state'])"
}
ring1() {
    "$POMCTL" --json ring show 1 2>/dev/null | python3 -c "import json,sys
j = json.load(sys.stdin)
r = [x for x in j['rings'] if x['ring'] == 1][0]
print('v%s %s' % (r['version'], ' '.join('%d:%.6f' % (s['id'], s['share']) for s in r['sites'])))"
}
site_id_of() { cat "$D/mdsl$1/site_id" 2>/dev/null; }

for k in 1 2; do start_mdsl $k || exit 1; done
within "both MDSL registered" 30 sh -c "[ -s '$D/mdsl1/site_id' ] && [ -s '$D/mdsl2/site_id' ]"
start_mds
wait_port "$MPORT" || exit 1
"$POMCTL" fs create ring1fs >"$D/pomctl.log" 2>&1 || { echo "fs create failed"; cat "$D/pomctl.log"; exit 1; }
S1=$(site_id_of 1); S2=$(site_id_of 2)
RING_BEFORE=$(ring1)
stamp "cluster up: mdsl1 = site $S1, mdsl2 = site $S2, ring 1 $RING_BEFORE"
case "$RING_BEFORE" in
    v*" $S1:"*" $S2:"* | v*" $S2:"*" $S1:"*) ;;
    *) echo "ring 1 is not {$S1, $S2} ('$RING_BEFORE')"; exit 1 ;;
esac

stamp "creating $DIRS x $FILES files"
"$DRIVER" "$R2" ring1fs create "$DIRS" "$FILES" "$D/list" >"$D/create.out" 2>"$D/create.err"
CRC=$?
cat "$D/create.out"
ok "created and synced $((DIRS * FILES)) files" [ $CRC = 0 ]
[ $CRC = 0 ] || { head -20 "$D/create.err"; check_done; }
# The files must be spread over both MDSL, or the test proves nothing:
# each holds slices of every directory (a folder per table: t.FSID.TABLE).
for k in 1 2; do
    n=$(ls "$D/mdsl$k" | grep -c '^t\.[1-9]')
    ok "mdsl$k holds slices of the file tables ($n tables)" [ "$n" -ge "$DIRS" ]
done

stamp "SIGKILL mdsl2 (site $S2)"
kill -9 "${LPID[2]}"; wait "${LPID[2]}" 2>/dev/null
T0=$SECONDS
while [ $((SECONDS - T0)) -lt 60 ] && [ "$(site_state "$S2")" != failed ]; do sleep 0.2; done
eq "R2 declared mdsl2 failed" "$(site_state "$S2")" failed
stamp "mdsl2 failed after $((SECONDS - T0)) s; ring 1 now $(ring1)"

stamp "restarting the MDS while mdsl2 is down"
kill -TERM "$MPID"
for i in $(seq 300); do kill -0 "$MPID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$MPID" 2>/dev/null && { echo "the MDS still runs 30 s after SIGTERM: SIGKILL"; kill -9 "$MPID"; }
wait "$MPID"; MRC=$?
ok "the MDS exited 0 after SIGTERM (exit $MRC)" [ $MRC = 0 ]
echo "--- restarted" >>"$D/mds.log"
start_mds
sleep 3 # it registers and takes ring 1 now, while mdsl2 is down

stamp "starting a new mdsl3"
start_mdsl 3 || exit 1
within "mdsl3 registered" 30 sh -c "[ -s '$D/mdsl3/site_id' ]"
S3=$(site_id_of 3)
within "R2 says why mdsl3 is not in ring 1" 10 grep -aq "site $S3 (mdsl .*NOT in ring 1" "$D/r2.log"

stamp "restarting mdsl2"
start_mdsl 2 || exit 1
T0=$SECONDS
while [ $((SECONDS - T0)) -lt 30 ] && [ "$(site_state "$S2")" != up ]; do sleep 0.2; done
eq "mdsl2 up again" "$(site_state "$S2")" up
eq "mdsl3 up (in the view)" "$(site_state "$S3")" up
wait_port "$MPORT" || { echo "the restarted MDS never served:"; tail -20 "$D/mds.log"; }
RING_AFTER=$(ring1)
stamp "ring 1 after: $RING_AFTER"
eq "ring 1 unchanged (version and sites)" "$RING_AFTER" "$RING_BEFORE"

stamp "checking every file from a fresh client"
timeout 200 "$DRIVER" "$R2" ring1fs check "$D/list" >"$D/check.out" 2>"$D/check.err"
KRC=$?
cat "$D/check.out"
[ -s "$D/check.err" ] && head -10 "$D/check.err"
ok "every file found with its uuid" [ $KRC = 0 ]

# Administration of a frozen ring 1.
nok "drain of mdsl1 refused" "frozen" "$POMCTL" site drain "$S1"
nok "remove of mdsl2 refused" "frozen" "$POMCTL" site remove "$S2"
ok "drain of the new mdsl3 (in no ring)" "$POMCTL" site drain "$S3"
eq "ring 1 still unchanged" "$(ring1)" "$RING_BEFORE"

grep -aE "stays in ring 1|NOT in ring 1|refused" "$D/r2.log" | sed 's/^/r2: /' | head -6
ok "no sanitizer report" sh -c "! grep -aqE 'Sanitizer|runtime error' $D/*.log $D/*.err"
check_done
