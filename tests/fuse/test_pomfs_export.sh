#!/bin/bash
# test_pomfs_export.sh POMCTL POMFS POM_FHANDLE [MDS] -- file handles through
# a real mount (pomfs export support; docs/client.md "Lookup by uuid"): the
# handles of directories (deep, renamed afterwards, removed afterwards), of
# the root and of a regular file are taken (name_to_handle_at), the mount is
# undone and made again by a fresh pomfs (no inode known to the kernel nor
# to the library), then open_by_handle_at must find each directory by uuid
# through the GDT (the kernel's LOOKUP(ino, ".") and, to reconnect its path,
# LOOKUP(ino, "..")): same st_ino, ".." is the parent, the path is the
# directory's current one; regular files are found too (after a rename, and
# a hard-linked one by its ILT row after the name its handle was taken
# under is gone); the removed directory and file answer ESTALE. Then
# `pomctl path UUID` prints those directories' paths and refuses the
# removed one and the file. MDS > 1: a `pomctl up --mds MDS`
# cluster, where a GDT row usually sits at another MDS than the
# directory's entry.
# Exit 77 (skip) when FUSE cannot be used here.
set -u
FH=$(realpath "$3")
NMDS=${4:-1}
[ "$NMDS" -gt 1 ] && PL_UP_OPTS="--mds $NMDS"
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"

M=$T/m
ino() { stat -c %i "$1"; }
# open_until DESC FILE WANT: the handle in FILE opened on $M must print
# WANT within 10 s (the GDT's RMU may lag the mkdir or rename by ~2 s).
open_until() {
    local out end=$((SECONDS + 10))
    while out=$("$FH" open "$M" "$2"); [ "$out" != "$3" ] && [ $SECONDS -lt $end ]; do
        sleep 0.2
    done
    eq "$1" "$out" "$3"
}

pl_mount "$M"
mkdir -p "$M/a/b/c/d" "$M/a/x" "$M/a/gone" "$M/a/moved"
echo hello >"$M/a/b/f"
echo moving >"$M/a/fm"
echo linked >"$M/a/fl"
echo removed >"$M/a/fgone"
D=$(ino "$M/a/b/c/d"); C=$(ino "$M/a/b/c"); X=$(ino "$M/a/x"); MV=$(ino "$M/a/moved")
GONE=$(ino "$M/a/gone"); F=$(ino "$M/a/b/f"); FM=$(ino "$M/a/fm"); FL=$(ino "$M/a/fl")
ok "handle of a deep directory" "$FH" save "$M/a/b/c/d" "$T/h.d"
ok "handle of a directory to rename" "$FH" save "$M/a/moved" "$T/h.moved"
ok "handle of a directory to remove" "$FH" save "$M/a/gone" "$T/h.gone"
ok "handle of a regular file" "$FH" save "$M/a/b/f" "$T/h.f"
ok "handle of a file to rename" "$FH" save "$M/a/fm" "$T/h.fm"
ok "handle of a file to hard-link" "$FH" save "$M/a/fl" "$T/h.fl"
ok "handle of a file to remove" "$FH" save "$M/a/fgone" "$T/h.fgone"
ok "handle of the root" "$FH" save "$M" "$T/h.root"
# On the mount that made them (the kernel has the inodes).
eq "deep directory, same mount" "$("$FH" open "$M" "$T/h.d")" "ino=$D parent=$C path=$M/a/b/c/d"
ok "rename to another parent" mv "$M/a/moved" "$M/a/x/moved2"
ok "rmdir" rmdir "$M/a/gone"
ok "rename a file to another parent" mv "$M/a/fm" "$M/a/x/fm2"
# Two names, then the one the handle was taken under goes.
ok "hard link" ln "$M/a/fl" "$M/a/x/fl2"
ok "unlink the first name" rm "$M/a/fl"
ok "unlink a file" rm "$M/a/fgone"
pl_umount "$M"

# A fresh pomfs: every inode is found by uuid alone.
pl_mount "$M"
open_until "deep directory after a remount" "$T/h.d" "ino=$D parent=$C path=$M/a/b/c/d"
open_until "renamed directory after a remount" "$T/h.moved" "ino=$MV parent=$X path=$M/a/x/moved2"
# (".." of the mount's root is the folder holding the mount point.)
eq "root after a remount" "$("$FH" open "$M" "$T/h.root")" "ino=1 parent=$(ino "$T") path=$M"
eq "removed directory" "$("$FH" open "$M" "$T/h.gone")" "ESTALE"
eq "regular file after a remount" "$("$FH" open "$M" "$T/h.f")" "ino=$F data=hello"
open_until "renamed file after a remount" "$T/h.fm" "ino=$FM data=moving"
eq "hard-linked file by its ILT row" "$("$FH" open "$M" "$T/h.fl")" "ino=$FL data=linked"
eq "removed file" "$("$FH" open "$M" "$T/h.fgone")" "ESTALE"
eq "a file found by uuid keeps its name" "$(cat "$M/a/b/f")" "hello"
# The found directory is a working one.
ok "create in the found directory" touch "$M/a/b/c/d/new"
eq "listing of it" "$(ls "$M/a/b/c/d")" "new"
pl_umount "$M"

# pomctl path: a directory's path from its uuid, by the GDT alone.
pc() { "$POMCTL" --r2 "$R2" --key-file "$KEY" "$@"; }
eq "pomctl path of the deep directory" "$(pc path "$D")" "/a/b/c/d"
eq "pomctl path of the renamed directory" "$(pc path "$MV")" "/a/x/moved2"
eq "pomctl path of the root" "$(pc path 1)" "/"
ok "pomctl path exits 0 (no leak under ASan)" pc path "$D"
ok "pomctl path --json" grep -q '"path": "/a/b/c/d"' <(pc --json path "$D")
nok "pomctl path of a removed directory" "no such directory" pc path "$GONE"
nok "pomctl path of a regular file" "no such directory" pc path "$F"
nok "pomctl path without a uuid" "want a directory's uuid" pc path x12
pl_done
