#!/bin/bash
# test_pomfs_dist.sh POMCTL POMFS -- a pomfs mount over a 4-MDS cluster
# (`pomctl up --mds 4`, docs/mds-dist.md): the core of tests/fuse/
# test_pomfs.sh (tiny files by sha256 after a remount, trees, rename in one
# directory and across directories, hard links, symlinks, xattrs,
# attributes, truncate, names of 255/256 bytes, `ls -f` of 10,000 files
# each exactly once), a parent's nlink and mtime when its row sits at
# another MDS than its entries (and who split those batches), and entries
# refused in immutable and append-only directories there (root). The MDS
# SIGKILL part is not run here (tests/fault/test_xact_crash.sh,
# tests/dist/test_dist_scale.sh).
# Exit 77 (skip) when FUSE cannot be used here.
set -u
PL_UP_OPTS="--mds 4"
. "$(dirname "$0")/../fuse/pomfs_lib.sh" "$1" "$2"
M=$T/mnt
mkdir -p "$T/src"
pl_mount "$M"
ok "root is a directory" test -d "$M"
eq "four MDS in the view" "$("$POMCTL" --data "$T/data" status | grep -o '4 mds')" "4 mds"

# ---- tiny files --------------------------------------------------------
mkdir "$M/files"
for n in 0 1 4096 65536; do
    head -c "$n" /dev/urandom >"$T/src/f$n"
    ok "write $n B" cp "$T/src/f$n" "$M/files/f$n"
    eq "size of $n B" "$(stat -c %s "$M/files/f$n")" "$n"
done
(cd "$T/src" && sha256sum f0 f1 f4096 f65536) >"$T/sums"
ok "sha256 before remount" bash -c "cd '$M/files' && sha256sum -c --quiet '$T/sums'"
pl_umount "$M"
pl_mount "$M"
ok "sha256 after remount" bash -c "cd '$M/files' && sha256sum -c --quiet '$T/sums'"
echo -n hello >"$M/files/h"
echo -n " world" >>"$M/files/h"
eq "append" "$(cat "$M/files/h")" "hello world"

# ---- trees -------------------------------------------------------------
D="$M/deep/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p"
ok "mkdir -p" mkdir -p "$D"
echo leaf >"$D/leaf"
for i in 1 2 3; do mkdir -p "$M/deep/x$i/y"; echo "$i" >"$M/deep/x$i/y/z"; done
eq "leaf" "$(cat "$D/leaf")" "leaf"
eq "find" "$(find "$M/deep" -type f | wc -l)" "4"
nok "rmdir non-empty" "not empty" rmdir "$M/deep"
nok "rm of a directory" "Is a directory" rm "$M/deep/x1"
ok "rm -rf" rm -rf "$M/deep"
ok "deep tree gone" test ! -e "$M/deep"

# ---- rename ------------------------------------------------------------
mkdir "$M/r1" "$M/r2"
echo one >"$M/r1/a"
echo two >"$M/r2/b"
ok "rename in one dir" mv "$M/r1/a" "$M/r1/a2"
ok "old name gone" test ! -e "$M/r1/a"
ok "rename across dirs" mv "$M/r1/a2" "$M/r2/a3"
eq "moved content" "$(cat "$M/r2/a3")" "one"
ok "rename over a file" mv "$M/r2/a3" "$M/r2/b"
eq "replaced content" "$(cat "$M/r2/b")" "one"
eq "one entry left" "$(ls "$M/r2")" "b"
mkdir -p "$M/r1/sub/inner"
ok "rename a directory across" mv "$M/r1/sub" "$M/r2/sub"
ok "its subtree came along" test -d "$M/r2/sub/inner"
nok "directory into itself" "Invalid argument|subdirectory of itself" mv "$M/r2/sub" "$M/r2/sub/inner/x"
ok "hard link" ln "$M/r2/b" "$M/r2/hard"
eq "nlink 2" "$(stat -c %h "$M/r2/b")" "2"
eq "same inode" "$(stat -c %i "$M/r2/hard")" "$(stat -c %i "$M/r2/b")"
ok "unlink one name" rm "$M/r2/hard"
eq "nlink 1" "$(stat -c %h "$M/r2/b")" "1"
nok "no hard link to a directory" "not permitted|Operation not permitted|hard link not allowed" ln "$M/r2/sub" "$M/r2/dirlink"

# ---- symlinks ----------------------------------------------------------
ok "symlink" ln -s b "$M/r2/lnk"
eq "readlink" "$(readlink "$M/r2/lnk")" "b"
eq "through the link" "$(cat "$M/r2/lnk")" "one"
ok "dangling symlink" ln -s /no/such/target "$M/r2/dang"
eq "dangling readlink" "$(readlink "$M/r2/dang")" "/no/such/target"

# ---- xattrs ------------------------------------------------------------
ok "setfattr" setfattr -n user.color -v red "$M/r2/b"
ok "setfattr 2" setfattr -n user.size -v 42 "$M/r2/b"
eq "getfattr" "$(getfattr --absolute-names --only-values -n user.color "$M/r2/b")" "red"
eq "getfattr -d" "$(getfattr -d --absolute-names "$M/r2/b" | grep -c '^user\.')" "2"
ok "setfattr -x" setfattr -x user.color "$M/r2/b"
nok "removed attribute" "No such attribute" getfattr --absolute-names -n user.color "$M/r2/b"
ok "xattr on a directory" setfattr -n user.d -v 1 "$M/r2"

# ---- attributes --------------------------------------------------------
ok "chmod" chmod 640 "$M/r2/b"
eq "mode" "$(stat -c %a "$M/r2/b")" "640"
ok "chown" chown 1234:5678 "$M/r2/b"
eq "owner" "$(stat -c %u:%g "$M/r2/b")" "1234:5678"
ok "touch -d" touch -d "2001-02-03 04:05:06" "$M/r2/b"
eq "mtime" "$(stat -c %Y "$M/r2/b")" "981173106"
eq "atime" "$(stat -c %X "$M/r2/b")" "981173106"
head -c 3000 /dev/urandom >"$T/src/t"
cp "$T/src/t" "$M/r2/t"
ok "truncate down" truncate -s 100 "$M/r2/t"
eq "size down" "$(stat -c %s "$M/r2/t")" "100"
ok "truncate up" truncate -s 5000 "$M/r2/t"
(head -c 100 "$T/src/t"; head -c 4900 /dev/zero) >"$T/src/t2"
eq "truncated content" "$(sha256sum <"$M/r2/t")" "$(sha256sum <"$T/src/t2")"
ok "mkfifo" mkfifo "$M/r2/fifo"
ok "fifo type" test -p "$M/r2/fifo"
ok "fallocate within the inline limit" fallocate -l 6000 "$M/r2/t"
eq "fallocate extends" "$(stat -c %s "$M/r2/t")" "6000"
nok "fallocate collapse-range unsupported" "not supported" fallocate -c -o 0 -l 4096 "$M/r2/t"

# ---- names -------------------------------------------------------------
N255=$(printf 'n%.0s' $(seq 255)); N256=$(printf 'n%.0s' $(seq 256))
ok "name of 255 bytes" touch "$M/r2/$N255"
ok "it is there" test -f "$M/r2/$N255"
nok "name of 256 bytes" "File name too long" touch "$M/r2/$N256"
nok "mkdir of 256 bytes" "File name too long" mkdir "$M/r2/$N256"

# ---- parents at another MDS --------------------------------------------
# A create's parent row usually sits at another MDS than the new entry:
# the client splits the batch itself (the parent's times before it:
# client/pom_fs.c batch_split), so no MDS has to split it (xact_splits,
# summed over every MDS's counters). A mkdir's or rmdir's parent count is
# left to the MDS (an RMU when the parent's row is elsewhere, not counted
# as a split). The parent's nlink and mtime must come out right at once
# either way (an RMU's delta is shown before its delivery).
splits() {
    local f s=0 v
    for f in "$T"/data/run/pom-mds.pid "$T"/data/run/pom-mds-*.pid; do kill -HUP "$(head -1 "$f")"; done
    sleep 0.5
    for f in "$T"/data/logs/pom-mds.log "$T"/data/logs/pom-mds-*.log; do
        v=$(grep -a 'dist: site' "$f" | tail -1 | awk '{ for (i = 1; i < NF; i++) if ($i == "xact_splits") print $(i+1) }')
        s=$((s + ${v:-0}))
    done
    echo "$s"
}
mkdir "$M/par"
touch -d "2001-02-03 04:05:06" "$M/par"
s0=$(splits)
for i in $(seq 40); do mkdir "$M/par/d$i"; done
for i in $(seq 160); do : >"$M/par/f$i"; done
eq "nlink after 40 mkdir" "$(stat -c %h "$M/par")" "42"
ok "mtime moved by the creates" test "$(stat -c %Y "$M/par")" -gt 981173106
for i in $(seq 10); do rmdir "$M/par/d$i"; done
for i in $(seq 60); do rm "$M/par/f$i"; done
eq "nlink after 10 rmdir" "$(stat -c %h "$M/par")" "32"
eq "entries left" "$(ls -f "$M/par" | wc -l)" "132"
s1=$(splits)
echo "  MDS-side splits for 270 creates/removals in one directory: $((s1 - s0))"
ok "the client split them (MDS-side splits < 10, $((s1 - s0)))" test $((s1 - s0)) -lt 10
# The flags of a directory whose row sits at another MDS than its entries
# (three in four here): the check rides in the parent's times, which run
# before the entry (docs/client.md "Inode flags"); a mkdir's count goes
# later as an RMU, so its times-only check must stop it too.
if [ "$(id -u)" = 0 ] && command -v chattr >/dev/null; then
    for d in par q1 q2 q3; do
        mkdir -p "$M/$d/sub"
        : >"$M/$d/old"
        ok "chattr +i $d" chattr +i "$M/$d"
        nok "$d +i: create" "Operation not permitted" touch "$M/$d/new"
        nok "$d +i: mkdir" "Operation not permitted" mkdir "$M/$d/nd"
        nok "$d +i: rm" "Operation not permitted" rm "$M/$d/old"
        nok "$d +i: rmdir" "Operation not permitted" rmdir "$M/$d/sub"
        ok "chattr -i +a $d" chattr -i +a "$M/$d"
        ok "$d +a: create" touch "$M/$d/new"
        ok "$d +a: mkdir" mkdir "$M/$d/nd"
        nok "$d +a: rm" "Operation not permitted" rm "$M/$d/old"
        nok "$d +a: rmdir" "Operation not permitted" rmdir "$M/$d/nd"
        ok "chattr -a $d" chattr -a "$M/$d"
    done
    eq "nlink of par: the +a mkdir counted, the refused ones not" "$(stat -c %h "$M/par")" "34"
fi

# ---- 10,000 files ------------------------------------------------------
mkdir "$M/many"
(cd "$M/many" && seq -f "file-%05g" 1 10000 | xargs touch) || { FAIL=$((FAIL+1)); echo "FAIL: touch 10000"; }
eq "ls -f count" "$(ls -f "$M/many" | wc -l)" "10002"
eq "ls -f no duplicates" "$(ls -f "$M/many" | sort | uniq -d | wc -l)" "0"
eq "ls -f names" "$(ls -f "$M/many" | grep -c '^file-')" "10000"

pl_umount "$M"
pl_mount "$M"
ok "sha256 after the second remount" bash -c "cd '$M/files' && sha256sum -c --quiet '$T/sums'"
eq "10,000 after remount" "$(ls -f "$M/many" | wc -l)" "10002"
ok "sync" sync "$M/files"
pl_umount "$M"
# Each MDS's counters (SIGHUP logs them): every one served requests.
for f in "$T"/data/run/pom-mds.pid "$T"/data/run/pom-mds-*.pid; do kill -HUP "$(head -1 "$f")"; done
sleep 0.5
for f in "$T"/data/logs/pom-mds.log "$T"/data/logs/pom-mds-*.log; do
    line=$(grep -a 'dist: site' "$f" | tail -1 | sed 's/.*dist: //')
    echo "$(basename "$f" .log): $line"
    ok "$(basename "$f" .log) served requests" \
        test "$(echo "$line" | awk '{ for (i = 1; i < NF; i++) if ($i == "requests") print $(i+1) }')" -gt 0
done
# The GDT (pomctl fsck check (10)): every directory's row names where it
# is, though most were written at another MDS than the entry's (copies
# delivered by RMU, docs/mds-xact.md "RMU: copies (the GDT)"); no stale row is left by the
# renames and rmdirs above.
"$POMCTL" --data "$T/data" --json fsck >"$T/fsck.json" 2>"$T/fsck.err"
eq "fsck exit" "$?" 0
head -5 "$T/fsck.err"
J() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$T/fsck.json" "$1"; }
eq "fsck problems" "$(J problems)" 0
eq "GDT rows checked = directories but the root" "$(J gdt_rows_checked)" "$(( $(J directories) - 1 ))"
eq "GDT rows: none stale (every inode has one)" "$(J gdt_stale)" 0
eq "no sanitizer report" "$(cat "$T"/data/logs/*.log "$T/pomfs.log" | grep -c 'Sanitizer')" "0"
pl_done
