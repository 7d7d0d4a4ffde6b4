#!/bin/bash
# test_pomfs_badinput.sh POMFS POM_MDS POM_MDSL -- bad input through a real
# pomfs mount: the checks are in pomfs_badinput.py (names of 255/256
# bytes and with every byte 1..255, paths around PATH_MAX, O_EXCL races from
# many threads, rename loops, unlink of open files, offsets past 2^40,
# invalid flags to renameat2/fallocate/setxattr/utimensat/O_TMPFILE). Then
# pom-mds, pom-mdsl and pomfs must still be running, the mount must still
# create and read a file, and no daemon log may hold a sanitizer report.
# Daemons on free loopback ports in a fresh folder, stopped by pid; the
# mount is undone in a trap. Exit 77 (skip) when FUSE cannot be used here.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
. "$HERE/pomfs_daemons.sh" pomfs-bad "$1" "$2" "$3"
mkdir -p "$T/blob"
POMFS_OPTS="blob=$T/blob"
start_mdsl && start_mds || exit 1
mount_fs

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
