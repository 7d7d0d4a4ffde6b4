# mdsl_ring1.sh -- sourced by the ring-1 tests (test_mdsl_scale.sh,
# test_mdsl_move_crash.sh): starting an MDSL of the cluster, asking R2 about
# the ring-1 change, waiting on the storm driver's marks.
# Needs (set by the caller): MDSLBIN, POMCTL, R2 (host:port), D (the
# cluster's folder), PIDS (pomfs_check.sh's pid_folder), DPID (the
# storm_driver, for wait_mark), and `declare -A LPID LPORT`.

stamp() { echo "[$(date +%T)] $*"; }
# dist_line LOG: the fields of pom-mds's last "dist:" report (SIGHUP).
dist_line() { grep -a 'dist: site' "$1" | tail -1 | sed 's/.*dist: //'; }
field() { # line key
    echo "$1" | awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i+1); exit } }'
}
# start_mdsl K: pom-mdsl K in $D/mdslK on LPORT[K] (a free port the first
# time, the same one at a restart), registered with R2.
start_mdsl() {
    local k=$1
    [ -n "${LPORT[$k]:-}" ] || LPORT[$k]=$(free_port)
    mkdir -p "$D/mdsl$k"
    "$MDSLBIN" --dir "$D/mdsl$k" --listen "127.0.0.1:${LPORT[$k]}" --r2 "$R2" \
        >>"$D/mdsl$k.log" 2>&1 &
    LPID[$k]=$!
    PIDS="$PIDS $!"
    wait_port "${LPORT[$k]}" && wait_registered "$D/mdsl$k"
}
# ring1 EXPR: a python expression over c (the ring1_change object of
# `pomctl ring show 1 --json`), mds and mdsl (its sites of each type);
# prints its value ('' when R2 does not answer).
ring1() {
    "$POMCTL" --r2 "$R2" --json ring show 1 2>/dev/null | python3 -c "
import json, sys
try:
    j = json.load(sys.stdin)
except Exception:
    print(''); sys.exit(0)
c = j.get('ring1_change') or {}
mds = [s for s in c.get('sites', []) if s.get('type') == 'mds']
mdsl = [s for s in c.get('sites', []) if s.get('type') == 'mdsl']
print($1)"
}
phase() { ring1 "c.get('phase', '')"; }
is_phase() { [ "$(phase)" = "$1" ]; }
# wait_for SECS CMD...: polls CMD every 0.2 s; 0 when it held.
wait_for() {
    local t0=$SECONDS lim=$1; shift
    while [ $((SECONDS - t0)) -lt "$lim" ]; do "$@" && return 0; sleep 0.2; done
    return 1
}
# wait_mark NAME: the driver touched $D/sync/NAME (1: it exited first).
wait_mark() {
    while [ ! -e "$D/sync/$1" ]; do
        kill -0 "$DPID" 2>/dev/null || return 1
        sleep 0.1
    done
}
