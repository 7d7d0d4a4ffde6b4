#!/bin/bash
# test_pomfs_leaks.sh POMCTL POMFS -- no path of a large file (> 64 KiB,
# blob tier) leaves a tract set that no row names, on a `pomctl up` cluster
# with one mount (docs/format-blob.md "Crash behaviour", docs/client.md
# "Hard links"). For each path the tract sets in the blob folder are counted
# after the client's queued removals ran (an fsync of a scratch file):
#   ln a b; rm a b / rm b a; a link renamed, then both names removed; a
#   linked file rewritten (O_TRUNC: a new set the ILT row names), then its
#   names removed; rename over a big file, over a big file's last link
#   name; O_TRUNC rewrite to inline size; truncate to 0; rewrite big to
#   big, then cut to 1,000 bytes (stays in its set); unlink of an open big
#   file (also a hard-linked one), then close; a failed fallocate (EFBIG) on a small file.
# Then `pomctl fsck` counts no orphan and the fs is clean. Every mount runs
# with its reclaimer's passes off (reclaim=0): the counts are the paths'
# own doing.
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
M=$T/m
PC() { "$POMCTL" --data "$T/data" "$@"; }
jget() { # key: a field of the JSON object on stdin
    python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}
pl_mount "$M" reclaim=0
FSID=$(PC --json fs stat pomfs | python3 -c 'import json,sys; print(json.load(sys.stdin)["fs"]["fsid"])')
B=$T/data/blobs/$(printf %08x "$FSID")
# The sets on disk once the client ran its queued removals (they wait for
# a sync: pom_tracts_drop).
sets() {
    python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT); os.fsync(fd); os.close(fd)' \
        "$M/.scratch"
    find "$B" -mindepth 3 -maxdepth 3 -type d 2>/dev/null | wc -l
}
big() { head -c "${2:-200000}" /dev/urandom >"$1"; }
base=$(sets)
eq "no set at the start" "$base" 0

big "$M/a"; ln "$M/a" "$M/b"; rm "$M/a" "$M/b"
eq "ln a b; rm a b" "$(sets)" 0
big "$M/a"; ln "$M/a" "$M/b"; rm "$M/b"; rm "$M/a"
eq "ln a b; rm b; rm a" "$(sets)" 0
big "$M/a"; ln "$M/a" "$M/b"; ln "$M/a" "$M/c"; rm "$M/c" "$M/a" "$M/b"
eq "three names removed" "$(sets)" 0
mkdir "$M/d"
big "$M/a"; ln "$M/a" "$M/b"; mv "$M/b" "$M/d/b2"; rm "$M/a"; rm "$M/d/b2"
eq "a link renamed, then both names removed" "$(sets)" 0
big "$M/a"; ln "$M/a" "$M/b"; big "$M/a" 300000
eq "linked file rewritten: one set" "$(sets)" 1
cmp -s "$M/a" "$M/b"; eq "both names read the rewrite" "$?" 0
rm "$M/a" "$M/b"
eq "linked, rewritten, removed" "$(sets)" 0

big "$M/x"; big "$M/y"; mv "$M/y" "$M/x"
eq "rename over a big file: one set" "$(sets)" 1
big "$M/a"; ln "$M/a" "$M/b"; rm "$M/a"; mv "$M/x" "$M/b"
eq "rename over a big file's last link name: one set" "$(sets)" 1
rm "$M/b"
eq "all removed" "$(sets)" 0

big "$M/t"; head -c 1000 /dev/urandom >"$M/t"
eq "O_TRUNC rewrite to inline size" "$(sets)" 0
big "$M/t"; truncate -s 0 "$M/t"
eq "truncate to 0" "$(sets)" 0
big "$M/t"; big "$M/t" 400000
eq "rewrite big to big: one set" "$(sets)" 1
truncate -s 1000 "$M/t"
eq "truncate to a small non-zero size: the file keeps its set" "$(sets)" 1
rm "$M/t"
eq "removed" "$(sets)" 0

python3 - "$M/o" "$M/o2" <<'EOF'
import os, sys
for link in (False, True):
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
    data = os.urandom(300000)
    os.write(fd, data)
    if link:
        os.link(sys.argv[1], sys.argv[2])
        os.unlink(sys.argv[2])
    os.unlink(sys.argv[1])
    os.fsync(fd)
    assert os.pread(fd, len(data), 0) == data
    os.close(fd)
EOF
eq "unlink of an open big file (also a linked one), then close: it read back" "$?" 0
eq "unlink of an open big file (also a linked one), then close" "$(sets)" 0

head -c 1000 /dev/urandom >"$M/f"
nok "fallocate past the largest file" "" fallocate -o 0 -l 20T "$M/f"
rm "$M/f"
eq "a failed fallocate" "$(sets)" 0

rm -f "$M/.scratch"
pl_umount "$M"
within "R2 sees no mount" 60 bash -c "[ \"\$(\"$POMCTL\" --data \"$T/data\" --json fs stat pomfs | \
    python3 -c 'import json,sys; print(json.load(sys.stdin)[\"fs\"][\"mounts\"])')\" = 0 ]"
PC --json fsck >"$T/f.json" 2>"$T/f.err"
eq "fsck exits 0" "$?" 0
eq "no orphan tract set" "$(jget orphan_sets <"$T/f.json")" 0
eq "no tract set" "$(jget tract_sets <"$T/f.json")" 0
pl_done
