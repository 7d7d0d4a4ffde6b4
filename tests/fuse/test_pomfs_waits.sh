#!/bin/bash
# test_pomfs_waits.sh POMCTL POMFS -- no silent waits (docs/client.md
# "Waiting"): a `pomctl up` cluster, a hard mount (the default) and a soft
# one (-o soft,timeout=3), and the MDSL stopped with SIGSTOP for ~14 s while
# both mounts write and fsync:
#   hard: the fsync waits, returns 0 after SIGCONT, the bytes read back;
#         pomfs's log says the wait (naming the MDS site it waits on) and
#         that the site answers again;
#   pomctl status (human and --json) shows the MDSL "not answering for N s"
#   while it is stopped;
#   soft: the fsync answers EIO after ~3 s (bound asserted loosely: < 20 s),
#         and so does a second fsync of the same file while the MDSL is
#         still stopped (EIO is no "lost" report: the change may commit);
#         after SIGCONT an fsync of it returns 0, what was synced before the
#         stop and the change are there, and the mount keeps working;
#   pomfs -o timeout=S without soft is refused.
# Exits 77 (skip) when FUSE cannot be used here.
set -u

. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"

MDSL_PID=$(head -1 "$T/data/run/pom-mdsl.pid")
MDS_PORT=$(cat "$T/data/run/pom-mds.port")
# A stopped MDSL is continued before anything else stops: `pomctl down`
# could not stop it otherwise.
trap 'kill -CONT "$MDSL_PID" 2>/dev/null; pl_cleanup' EXIT

A=$T/hard B=$T/soft
mkdir "$T/x"
nok "timeout= without soft is refused" "timeout=S needs soft" \
    "$POMFS" "$R2" "$T/x" -f -o fs=pomfs,timeout=3
pl_mount "$A"
pl_mount "$B" soft,timeout=3
MDS_SITE=$("$POMCTL" --r2 "$R2" --key-file "$KEY" --json sites |
           python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin)["sites"] if s["type"]=="mds"][0])')

# Before the stop: a file synced on each mount (each claims its uuid range,
# a synchronous update, now: the stop is to stall the fsync, not the open).
fsync_file() { python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY); os.fsync(fd); os.close(fd)' "$1"; }
printf 'before' >"$A/before-hard"
ok "fsync on the hard mount before the stop" fsync_file "$A/before-hard"
printf 'before' >"$B/before"
ok "fsync on the soft mount before the stop" fsync_file "$B/before"

# write, then fsync N times on one fd; prints "<errno name or OK> <seconds>"
# per fsync. With a GATE fifo: after those N, waits for the fifo (written
# once the MDSL runs again), then fsyncs until one returns 0 (10 tries: a
# soft mount may answer EIO while the MDS's commit recovers) and prints
# "after <results>".
FSYNC='
import errno, os, sys, time
path, data, n, gate = sys.argv[1], sys.argv[2].encode(), int(sys.argv[3]), sys.argv[4]
fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, data)
def fsync():
    t = time.monotonic()
    try:
        os.fsync(fd); r = "OK"
    except OSError as e:
        r = errno.errorcode[e.errno]
    return r, round(time.monotonic() - t, 1)
for i in range(n):
    print(*fsync(), flush=True)
if gate != "-":
    open(gate).read()
    after = []
    while len(after) < 10 and "OK" not in after:
        after.append(fsync()[0])
    print("after", *after, flush=True)
os.close(fd)
'
mkfifo "$T/gate"
kill -STOP "$MDSL_PID"
STOP_AT=$SECONDS
python3 -c "$FSYNC" "$A/f" "hard-bytes" 1 - >"$T/hard.out" 2>&1 &
HARD=$!
python3 -c "$FSYNC" "$B/g" "soft-bytes" 2 "$T/gate" >"$T/soft.out" 2>&1 &
SOFT=$!

# While stopped: R2 misses the MDSL's heartbeats; status says so.
st_says() {
    "$POMCTL" --r2 "$R2" --key-file "$KEY" status >"$T/status.txt" 2>&1
    grep -qE "site [0-9]+ \(mdsl .*not answering for [0-9]+ s" "$T/status.txt"
}
within "pomctl status: the MDSL is not answering" 13 st_says
"$POMCTL" --r2 "$R2" --key-file "$KEY" --json status >"$T/status.json" 2>&1
ok "pomctl --json status: not_answering names the MDSL" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
n = [s for s in j["not_answering"] if s["type"] == "mdsl"]
assert n and n[0]["silent_s"] >= 1 and n[0]["state"] in ("transient", "failed"), j' "$T/status.json"
# Two soft fsyncs of ~3 s each are over by now.
soft_answered() { [ "$(grep -c . "$T/soft.out")" -ge 2 ]; }
within "two soft fsyncs answered" 12 soft_answered
eq "hard fsync still waiting while the MDSL is stopped" "$(cat "$T/hard.out")" ""
# Long enough for the hard fsync's first warning (at 10 s of waiting).
while [ $((SECONDS - STOP_AT)) -lt 14 ]; do sleep 0.2; done
kill -CONT "$MDSL_PID"
echo go >"$T/gate"
wait "$HARD"; wait "$SOFT"

read -r h_rc h_s <"$T/hard.out"
eq "hard fsync after SIGCONT" "$h_rc" "OK"
eq "hard bytes read back" "$(cat "$A/f")" "hard-bytes"
ok "pomfs logs the wait, naming the MDS site" grep -qE \
    "a sync waiting on site $MDS_SITE \(MDS [^)]*:$MDS_PORT\) for 1[0-9] s" "$T/pomfs.log"
ok "pomfs logs the answer" grep -qE \
    "site $MDS_SITE \(MDS [^)]*:$MDS_PORT\) answers again after [0-9]+ s \(a sync\)" "$T/pomfs.log"

mapfile -t soft <"$T/soft.out"
eq "soft fsync 1" "${soft[0]%% *}" "EIO"
eq "soft fsync 2, MDSL still stopped" "${soft[1]%% *}" "EIO"
ok "soft fsync answered within 20 s" python3 -c 'import sys; assert float(sys.argv[1]) < 20' \
    "${soft[0]##* }"
ok "soft fsync returns 0 after SIGCONT (${soft[2]:-})" grep -qE "^after (EIO )*OK$" "$T/soft.out"
eq "soft: the file synced before the stop" "$(cat "$B/before")" "before"
eq "hard: the file synced before the stop" "$(cat "$A/before-hard")" "before"
eq "soft: the change of the EIO fsyncs" "$(cat "$B/g")" "soft-bytes"
eq "the hard mount sees it" "$(cat "$A/g")" "soft-bytes"
printf 'after' >"$B/after"
ok "soft mount works after the stall" fsync_file "$B/after"
eq "soft: new file" "$(cat "$A/after")" "after"

[ "$FAIL" = 0 ] || { echo "hard:"; cat "$T/hard.out"; echo "soft:"; cat "$T/soft.out"; }
pl_umount "$A"
pl_umount "$B"
pl_done
