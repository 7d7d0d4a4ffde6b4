#!/bin/bash
# test_kv_batch_dist.sh -- key/value batches across many MDS (docs/client.md
# "Key/value batches"): 1 R2, 1 MDSL, 3 MDS with a split threshold of 64
# rows, so the keyspace splits over the three while the batches run;
# kv_batch_driver checks every operation's result against a model (mixed
# puts, gets, deletes; create-only, durable and conditional ones; long
# keys; two clients, one with a stale view), then every key and the
# listing. Daemons on free ports, stopped by pid; the folder is removed.
#
#   test_kv_batch_dist.sh POM_R2 POM_MDSL POM_MDS POMCTL KV_BATCH_DRIVER
#   POM_TEST_SCALE=K   K x 300 batches over K x 3,000 keys (CI: 1; a fraction,
#                      as the sanitizer runs give, has a floor of 100 and 1,000)
set -u
R2BIN=$(realpath "$1"); MDSLBIN=$(realpath "$2"); MDSBIN=$(realpath "$3")
POMCTL=$(realpath "$4"); DRIVER=$(realpath "$5")
. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
export TZ=UTC LC_ALL=C
SCALE=${POM_TEST_SCALE:-1}
# POM_TEST_SCALE may be a fraction (the sanitizer runs use 0.25).
BATCHES=$(awk -v s="$SCALE" 'BEGIN { n = int(300 * s); print (n < 100 ? 100 : n) }')
KEYS=$(awk -v s="$SCALE" 'BEGIN { n = int(3000 * s); print (n < 1000 ? 1000 : n) }')
NMDS=3
pid_folder kv_batch_dist KV_BATCH_KEEP

pr2=$(free_port)
"$R2BIN" --data "$T" --listen "127.0.0.1:$pr2" --fail-after 30 >"$T/r2.log" 2>&1 &
PIDS="$PIDS $!"
wait_port "$pr2" || exit 1
R2="127.0.0.1:$pr2"
p=$(free_port)
mkdir -p "$T/mdsl"
"$MDSLBIN" --dir "$T/mdsl" --listen "127.0.0.1:$p" --r2 "$R2" >"$T/mdsl.log" 2>&1 &
PIDS="$PIDS $!"
{ wait_port "$p" && wait_registered "$T/mdsl"; } || exit 1
MDS_PIDS=()
for k in $(seq $NMDS); do
    p=$(free_port)
    mkdir -p "$T/mds$k"
    "$MDSBIN" --r2 "$R2" --dir "$T/mds$k" --listen "127.0.0.1:$p" --split-threshold 64 \
        --commit-interval-ms 200 >"$T/mds$k.log" 2>&1 &
    MDS_PIDS+=($!)
    PIDS="$PIDS $!"
    wait_port "$p" || exit 1
done
sleep 2.5 # every MDS holds the final ring 0 (as test_dist_mds.sh)
POM_R2=$R2 "$POMCTL" fs create kvfs >"$T/pomctl.log" 2>&1 || { cat "$T/pomctl.log"; exit 1; }

"$DRIVER" "$R2" kvfs "$BATCHES" "$KEYS" >"$T/driver.out" 2>"$T/driver.err"
drc=$?
cat "$T/driver.out"
[ -s "$T/driver.err" ] && { echo "driver stderr:"; tail -20 "$T/driver.err"; }
ok "every batch result, final get and the listing as the model says" [ "$drc" = 0 ]
for p in "${MDS_PIDS[@]}"; do kill -HUP "$p"; done
sleep 0.5
tot=0 held=0
for k in $(seq $NMDS); do
    s=$(grep -a 'dist: site' "$T/mds$k.log" | tail -1 | sed 's/.*dist: //' |
        awk '{ for (i = 1; i < NF; i++) if ($i == "slices") { print $(i+1); exit } }')
    echo "mds$k: ${s:-?} slices"
    tot=$((tot + ${s:-0}))
    [ "${s:-0}" -gt 0 ] && held=$((held + 1))
done
ok "the keyspace split ($tot slices) and every MDS holds some ($held of $NMDS)" \
    [ "$tot" -gt 8 -a "$held" = "$NMDS" ]
ok "no sanitizer report" sh -c "! grep -aqE 'Sanitizer|runtime error' $T/*.log $T/driver.err"
check_done
