#!/bin/bash
# test_pomfs_diskfull.sh POMCTL POMFS -- a full disk that deletes free
# (docs/testing-faults.md "test_pomfs_diskfull"): the whole folder of
# `pomctl up` (R2 store, MDSL segments and index, blob tier, logs) and the
# mount's scratch folder on a 32 MiB tmpfs; pomfs_diskfull.py fills it with
# a 2 MiB file and fsynced 8 KiB files until ENOSPC, checks what was
# acknowledged, truncates and removes a directory on the full disk, frees
# the big file and half the small ones, and waits (at most 30 s) for writes
# to resume without a restart; before that, a fallocate that fails part-way
# leaves no allocation behind. Then the big file's tract set is gone from
# the blob tier and the daemons' logs hold only whole lines.
# Runs as root (mount -t tmpfs); exits 77 (skip) when it cannot mount.
set -u
D=$(mktemp -d "${TMPDIR:-/tmp}/pomfs-diskfull.XXXXXX")
if ! mount -t tmpfs -o size=32m tmpfs "$D" 2>/dev/null; then
    rmdir "$D"
    echo "SKIP: cannot mount a tmpfs (not root?)"
    exit 77
fi
export TMPDIR=$D
# pomfs_lib.sh exits 77 without FUSE: the tmpfs must go then too.
trap 'umount -l "$D"; rmdir "$D"' EXIT
# Killed by ctest's timeout (no trap runs): pomfs_lib.sh's watcher stops
# the cluster (it needs the folder), then this one takes the tmpfs away.
setsid -f bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
    sleep 20; mountpoint -q "$2" && umount -l "$2" && rmdir "$2"' \
    reaper "$$" "$D" </dev/null >/dev/null 2>&1
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
trap 'pl_cleanup; umount -l "$D"; rmdir "$D"' EXIT
M=$T/m

pl_mount "$M"
# A fallocate the disk cannot hold fails part-way (ENOSPC after a few 4 MiB
# tracts) and leaves nothing it allocated (xfstests generic/103, 213): no
# tract file of a new (inline) file, no tract beyond a large file's own.
# blobs/FSID/XX/YY/UUID/GROUP/TRACT (docs/format-blob.md)
tracts() { find "$T/data/blobs" -type f ! -name map 2>/dev/null | wc -l; }
sets() { find "$T/data/blobs" -mindepth 4 -maxdepth 4 -type d 2>/dev/null | wc -l; }
echo small >"$M/fa"
nok "fallocate 64 MiB of a small file on the 32 MiB disk" "" fallocate -l 64M "$M/fa"
eq "the small file's failed fallocate left no tract" "$(tracts)" 0
eq "the small file's failed fallocate left no set" "$(sets)" 0
eq "the small file keeps its bytes" "$(cat "$M/fa")" small
head -c 100000 /dev/urandom >"$M/fb"
nok "fallocate 64 MiB of a large file on the 32 MiB disk" "" fallocate -l 64M "$M/fb"
eq "the large file's failed fallocate left its one tract" "$(tracts)" 1
eq "the large file's size is unchanged" "$(stat -c %s "$M/fb")" 100000
rm "$M/fa" "$M/fb"
ok "fill, check, full, free, resume (pomfs_diskfull.py)" \
    python3 -u "$(dirname "$0")/pomfs_diskfull.py" "$M"
cat "$T/cmd.log"
df -k "$D" | tail -1
# The blob tier gave the big file's space back: its tract set (under
# DIR/blobs/<fsid>/, docs/format-blob.md) goes after a sync that needs the
# MDSL to take the unlink on the full disk.
no_tracts() { [ -z "$(find "$T/data/blobs" -type f)" ]; }
within "the removed 2 MiB file's tract set is deleted" 10 no_tracts
# Whole lines only: a line cut by a full disk would run into the next one.
for f in "$T"/data/logs/*.log; do
    eq "no line of $(basename "$f") cut mid-line" \
        "$(grep -c -E '.[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} [EWID] [a-z]' "$f")" 0
done
pl_umount "$M"
pl_done
