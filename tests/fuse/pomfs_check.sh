# pomfs_check.sh -- sourced by the shell tests: check counters and helpers.
#   ok DESC CMD...            the command must succeed (output to $T/cmd.log)
#   nok DESC ERRTEXT CMD...   it must fail, its message matching ERRTEXT (ERE)
#   eq DESC GOT WANT          the two strings must be equal
#   within DESC SECONDS CMD   the command must succeed within the time (polled)
#   free_port                 prints a free loopback TCP port
#   wait_port PORT            waits up to 30 s for a listener on it
#   check_done                prints "N passed, N failed"; exits 0 or 1
# Needs $T (a scratch folder) before the first check.
PASS=0 FAIL=0

ok() {
    local d=$1; shift
    if "$@" >>"$T/cmd.log" 2>&1; then PASS=$((PASS+1)); else FAIL=$((FAIL+1)); echo "FAIL: $d"; tail -3 "$T/cmd.log"; fi
}
nok() {
    local d=$1 e=$2; shift 2
    local out
    if out=$("$@" 2>&1); then
        FAIL=$((FAIL+1)); echo "FAIL (succeeded): $d"
    elif [ -n "$e" ] && ! grep -qE "$e" <<<"$out"; then
        FAIL=$((FAIL+1)); echo "FAIL (wrong error '$out', want '$e'): $d"
    else
        PASS=$((PASS+1))
    fi
}
eq() {
    if [ "$2" == "$3" ]; then PASS=$((PASS+1)); else FAIL=$((FAIL+1)); echo "FAIL: $1: got '$2', want '$3'"; fi
}
within() {
    local d=$1 s=$2; shift 2
    local end=$((SECONDS + s))
    while ! "$@" >/dev/null 2>&1; do
        [ $SECONDS -ge $end ] && { FAIL=$((FAIL+1)); echo "FAIL: $d (not within ${s}s)"; return; }
        sleep 0.1
    done
    PASS=$((PASS+1))
}
# reap_on_kill DIR [POMCTL DATA]: when this test dies by SIGKILL (ctest's
# timeout kills the test's process tree; no trap runs), a watcher outside
# that tree lazily unmounts every mount under DIR, stops the cluster of
# DATA with `POMCTL down` (pomctl up's daemons are not the test's
# children: nothing else would stop them) and removes DIR. It checks once
# a second and ends quietly when the test ended normally (DIR removed by
# the test's own trap).
reap_on_kill() {
    setsid -f bash -c '
        while kill -0 "$1" 2>/dev/null; do sleep 1; done
        [ -d "$2" ] || exit 0
        grep -o " $2/[^ ]*" /proc/mounts | while read -r m; do fusermount3 -u -z "$m"; done
        [ -n "$3" ] && "$3" down --data "$4"
        rm -rf "$2"' reaper "$$" "$1" "${2:-}" "${3:-}" </dev/null >/dev/null 2>&1
}
# pid_folder NAME KEEPVAR: T = a new folder ${TMPDIR:-/tmp}/NAME.XXXXXX and
# an empty PIDS. Every pid appended to PIDS is SIGKILLed and reaped by
# kill_pids, which also runs at exit; T is then removed unless $KEEPVAR is
# set (it says "kept T"). TERM/INT/HUP exit 1 (so the exit trap runs).
pid_folder() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
    PIDS=""
    PID_FOLDER_KEEP=$2
    trap pid_folder_exit EXIT
    trap 'exit 1' TERM INT HUP
}
kill_pids() {
    local p
    for p in $PIDS; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    PIDS=""
}
pid_folder_exit() {
    kill_pids
    if [ -n "${!PID_FOLDER_KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi
}
# wait_within SECS PID NAME: waits for PID (a child of this shell) and
# returns its exit status. A child still running after SECS seconds is a
# hang: its threads' stacks (gdb, when installed) go to $T/NAME.stacks and
# are shown, it is killed with SIGKILL, and the status is 124 (as
# timeout(1)). A test that waits on a daemon or driver uses it, so a hang
# fails with the evidence instead of running into CTest's timeout.
wait_within() {
    local lim=$1 pid=$2 name=$3 t0=$SECONDS
    while kill -0 "$pid" 2>/dev/null; do
        if [ $((SECONDS - t0)) -ge "$lim" ]; then
            echo "$name (pid $pid) still runs after $lim s: its stacks, then SIGKILL"
            if command -v gdb >/dev/null; then
                gdb -p "$pid" -batch -ex "thread apply all bt" >"$T/$name.stacks" 2>&1
                grep -aE '^(Thread |#[0-9])' "$T/$name.stacks" | head -200
            fi
            kill -KILL "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            return 124
        fi
        sleep 0.2
    done
    wait "$pid" 2>/dev/null
}
# wait_registered DIR: a daemon started with --r2 and --dir DIR has
# registered (DIR/site_id written; 30 s at most). Start every MDSL of a
# cluster this way before its first MDS: once an MDS registered, R2 keeps
# ring 1 as it is (docs/r2.md), and a late MDSL stays out of it.
wait_registered() {
    local i
    for i in $(seq 300); do
        [ -s "$1/site_id" ] && return 0
        sleep 0.1
    done
    echo "$1: no site_id after 30 s (not registered with R2)"
    return 1
}
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() {
    local i
    for i in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "port $1 never opened"; return 1
}
# A pomfs started in the background (pid $2) has mounted $1, or the test
# ends: exit 77 when FUSE mounts are not allowed here, 1 otherwise.
wait_mounted() {
    local i
    for i in $(seq 300); do
        mountpoint -q "$1" && return 0
        kill -0 "$2" 2>/dev/null || break
        sleep 0.1
    done
    echo "pomfs did not mount $1:"; tail -20 "$T/pomfs.log"
    if grep -qi "permission\|fuse: device not found\|Operation not permitted" "$T/pomfs.log"; then
        echo "SKIP: FUSE mounts are not allowed here"; exit 77
    fi
    exit 1
}
check_done() {
    echo "$PASS passed, $FAIL failed"
    [ "$FAIL" = 0 ] && exit 0
    echo "--- pomfs log (tail)"; tail -20 "$T/pomfs.log" 2>/dev/null
    exit 1
}
