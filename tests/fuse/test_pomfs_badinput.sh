#!/bin/bash
# test_pomfs_badinput.sh POMFS POM_MDS POM_MDSL -- bad input through a real
# pomfs mount (issue 8): the checks are in pomfs_badinput.py (names of 255/256
# bytes and with every byte 1..255, paths around PATH_MAX, O_EXCL races from
# many threads, rename loops, unlink of open files, offsets past 2^40,
# invalid flags to renameat2/fallocate/setxattr/utimensat/O_TMPFILE). Then
# pom-mds, pom-mdsl and pomfs must still be running, the mount must still
# create and read a file, and no daemon log may hold a sanitizer report.
# Daemons on free loopback ports in a fresh folder, stopped by pid; the
# mount is undone in a trap. Exit 77 (skip) when FUSE cannot be used here.
set -u

POMFS=$(realpath "$1"); MDS=$(realpath "$2"); MDSL=$(realpath "$3")
HERE=$(cd "$(dirname "$0")" && pwd)
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
    echo "SKIP: no /dev/fuse or no fusermount3"
    exit 77
fi
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
export TZ=UTC LC_ALL=C

T=$(mktemp -d "${TMPDIR:-/tmp}/pomfs-bad.XXXXXX")
M=$T/mnt
mkdir -p "$M" "$T/mdsl" "$T/blob"
MDSL_PID= MDS_PID= FS_PID=

cleanup() {
    mountpoint -q "$M" 2>/dev/null && { fusermount3 -u "$M" 2>/dev/null || fusermount3 -u -z "$M"; }
    local p
    for p in $FS_PID $MDS_PID $MDSL_PID; do
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' TERM INT HUP

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

P_MDSL=$(free_port); P_MDS=$(free_port)
"$MDSL" --dir "$T/mdsl" --listen "127.0.0.1:$P_MDSL" >>"$T/mdsl.log" 2>&1 &
MDSL_PID=$!
wait_port "$P_MDSL" || exit 1
"$MDS" --mdsl "127.0.0.1:$P_MDSL" --listen "127.0.0.1:$P_MDS" >>"$T/mds.log" 2>&1 &
MDS_PID=$!
wait_port "$P_MDS" || exit 1
OPTS=fsid=1
"$POMFS" --help 2>&1 | grep -q "blob=" && OPTS=$OPTS,blob=$T/blob
"$POMFS" "127.0.0.1:$P_MDS" "$M" -o "$OPTS" -f >>"$T/pomfs.log" 2>&1 &
FS_PID=$!
for i in $(seq 300); do
    mountpoint -q "$M" && break
    kill -0 "$FS_PID" 2>/dev/null || break
    sleep 0.1
done
if ! mountpoint -q "$M"; then
    echo "pomfs did not mount:"; cat "$T/pomfs.log"
    if grep -qi "permission\|fuse: device not found\|Operation not permitted" "$T/pomfs.log"; then
        echo "SKIP: FUSE mounts are not allowed here"; exit 77
    fi
    exit 1
fi

FAIL=0
timeout 600 python3 "$HERE/pomfs_badinput.py" "$M" || FAIL=1

# the daemons survived, and the mount still works
for p in "$MDSL_PID:pom-mdsl" "$MDS_PID:pom-mds" "$FS_PID:pomfs"; do
    if kill -0 "${p%%:*}" 2>/dev/null; then echo "ok: ${p#*:} is still running"
    else echo "FAIL: ${p#*:} died"; FAIL=1; fi
done
if echo after >"$M/after" && [ "$(cat "$M/after")" = after ]; then
    echo "ok: the mount still creates and reads files"
else
    echo "FAIL: the mount no longer works"; FAIL=1
fi
fusermount3 -u "$M" && wait "$FS_PID"; rc=$?
FS_PID=
[ "$rc" -eq 0 ] && echo "ok: pomfs exits 0 on unmount" || { echo "FAIL: pomfs exit $rc"; FAIL=1; }
if grep -l "Sanitizer" "$T"/*.log; then
    echo "FAIL: sanitizer report in a daemon log"; FAIL=1
fi
[ "$FAIL" -eq 0 ] || { echo "--- pomfs.log (tail)"; tail -20 "$T/pomfs.log"; }
exit "$FAIL"
