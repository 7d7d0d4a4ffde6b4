#!/bin/bash
# test_pomfs_links.sh POMFS POM_MDS POM_MDSL -- hard links and rename through
# a real FUSE mount (the daemon start/stop pattern of test_pomfs.sh: a fresh
# temporary folder, daemons on free loopback ports, every process stopped by
# its pid, the mount undone with fusermount3 -u in a trap):
#   ln keeps data and xattrs, `stat -c %h` from every name (also after a
#   remount), link of a directory refused, unlink in any order; `mv` across
#   directories of files, links and directories (inode kept, `..` follows);
#   renameat2 through python3 ctypes: RENAME_NOREPLACE (EEXIST) and
#   RENAME_EXCHANGE of file <-> directory across directories, of a missing
#   name (ENOENT), of a directory into its own subtree (EINVAL);
#   RENAME_WHITEOUT (overlayfs's upper directory) by a non-root caller with
#   CAP_MKNOD (setpriv) through an allow_other mount: the target has the
#   file's inode and bytes, the old name a character device 0:0 of mode 0
#   owned by the caller, also after a remount; of a directory (its `..`
#   follows); over an existing file (as root: root's whiteout); with
#   NOREPLACE onto a file (EEXIST, nothing changed); with EXCHANGE (EINVAL).
# Exit 77 (skip) when FUSE cannot be used here.
set -u

. "$(dirname "$0")/pomfs_daemons.sh" pomfs-links "$1" "$2" "$3"

# renameat2(AT_FDCWD, a, AT_FDCWD, b, flags) through ctypes; prints the
# errno name on failure (exit 1).
RENAME2='
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
flags = {"noreplace": 1, "exchange": 2, "both": 3, "whiteout": 4,
         "noreplace-whiteout": 5, "exchange-whiteout": 6}[sys.argv[3]]
r = libc.renameat2(-100, os.fsencode(sys.argv[1]), -100, os.fsencode(sys.argv[2]), flags)
if r != 0:
    print(errno.errorcode[ctypes.get_errno()]); sys.exit(1)
'
rename2() { python3 -c "$RENAME2" "$@"; }

start_mdsl && start_mds || exit 1
mount_fs

# ---- hard links ----------------------------------------------------------
mkdir "$M/a" "$M/b"
head -c 3000 /dev/urandom >"$T/data"
cp "$T/data" "$M/a/f"
ok "setfattr" setfattr -n user.color -v blue "$M/a/f"
eq "nlink of a new file" "$(stat -c %h "$M/a/f")" "1"
ok "ln across directories" ln "$M/a/f" "$M/b/g"
eq "nlink after ln (old name)" "$(stat -c %h "$M/a/f")" "2"
eq "nlink after ln (new name)" "$(stat -c %h "$M/b/g")" "2"
eq "same inode" "$(stat -c %i "$M/a/f")" "$(stat -c %i "$M/b/g")"
ok "data through the link" cmp "$T/data" "$M/b/g"
eq "xattr through the link" "$(getfattr --only-values -n user.color "$M/b/g" 2>/dev/null)" "blue"
ok "ln a third name" ln "$M/b/g" "$M/a/h"
eq "nlink 3" "$(stat -c %h "$M/a/f")" "3"
echo -n "tail" >>"$M/a/h"
eq "append through one name, size through another" "$(stat -c %s "$M/b/g")" "3004"
nok "link(2) of a directory" "EPERM" python3 -c '
import errno, os, sys
try: os.link(sys.argv[1], sys.argv[2])
except OSError as e: print(errno.errorcode[e.errno]); sys.exit(1)' "$M/a" "$M/b/dirlink"
nok "ln onto an existing name" "File exists" ln "$M/a/f" "$M/a/h"
ok "rm one name" rm "$M/a/f"
eq "nlink after rm" "$(stat -c %h "$M/b/g")" "2"
ok "mv a link across directories" mv "$M/a/h" "$M/b/h2"
eq "nlink after mv" "$(stat -c %h "$M/b/h2")" "2"
umount_fs
mount_fs
eq "nlink after remount" "$(stat -c %h "$M/b/g")" "2"
ok "data after remount" cmp <(head -c 3000 "$M/b/h2") "$T/data"
eq "xattr after remount" "$(getfattr --only-values -n user.color "$M/b/h2" 2>/dev/null)" "blue"
ok "rm second name" rm "$M/b/g"
eq "nlink 1" "$(stat -c %h "$M/b/h2")" "1"
ok "rm last name" rm "$M/b/h2"
nok "gone" "No such file" stat "$M/b/h2"

# ---- rename ----------------------------------------------------------------
mkdir -p "$M/src/sub/deep" "$M/dst"
echo one >"$M/src/one"
ino=$(stat -c %i "$M/src/one")
ok "mv file across directories" mv "$M/src/one" "$M/dst/one"
eq "inode kept" "$(stat -c %i "$M/dst/one")" "$ino"
nok "old name gone" "No such file" stat "$M/src/one"
ok "mv directory across directories" mv "$M/src/sub" "$M/dst/sub"
ok "entries came along" test -d "$M/dst/sub/deep"
eq ".. follows" "$(stat -c %i "$M/dst/sub/..")" "$(stat -c %i "$M/dst")"
nok "rename(2) of a directory into its own subtree" "EINVAL" python3 -c '
import errno, os, sys
try: os.rename(sys.argv[1], sys.argv[2])
except OSError as e: print(errno.errorcode[e.errno]); sys.exit(1)' "$M/dst/sub" "$M/dst/sub/deep/x"
echo two >"$M/dst/two"
nok "RENAME_NOREPLACE onto a file" "EEXIST" rename2 "$M/dst/one" "$M/dst/two" noreplace
ok "RENAME_NOREPLACE to a free name" rename2 "$M/dst/one" "$M/src/one" noreplace
nok "EXCHANGE|NOREPLACE" "EINVAL" rename2 "$M/src/one" "$M/dst/two" both
nok "EXCHANGE with a missing name" "ENOENT" rename2 "$M/src/one" "$M/dst/none" exchange
fi_ino=$(stat -c %i "$M/src/one"); di_ino=$(stat -c %i "$M/dst/sub")
ok "EXCHANGE file <-> directory across directories" rename2 "$M/src/one" "$M/dst/sub" exchange
ok "the file is where the directory was" test -f "$M/dst/sub"
ok "the directory is where the file was" test -d "$M/src/one/deep"
eq "file inode" "$(stat -c %i "$M/dst/sub")" "$fi_ino"
eq "directory inode" "$(stat -c %i "$M/src/one")" "$di_ino"
eq "file content" "$(cat "$M/dst/sub")" "one"
eq ".. of the exchanged directory" "$(stat -c %i "$M/src/one/..")" "$(stat -c %i "$M/src")"
touch "$M/src/one/deep/x"
nok "EXCHANGE a directory into its own subtree" "EINVAL" \
    rename2 "$M/src/one" "$M/src/one/deep/x" exchange
ln "$M/dst/two" "$M/src/two-link"
ok "EXCHANGE a link with a file" rename2 "$M/src/two-link" "$M/dst/sub" exchange
eq "nlink of the exchanged link" "$(stat -c %h "$M/dst/sub")" "2"
eq "link content" "$(cat "$M/dst/sub")" "two"
eq "nlink of the other" "$(stat -c %h "$M/src/two-link")" "1"
ok "mv over a link" mv "$M/src/two-link" "$M/dst/two"
eq "nlink after the link was replaced" "$(stat -c %h "$M/dst/sub")" "1"
umount_fs
mount_fs
eq "after remount: replaced" "$(cat "$M/dst/two")" "one"
eq "after remount: nlink" "$(stat -c %h "$M/dst/sub")" "1"
umount_fs

# ---- RENAME_WHITEOUT -------------------------------------------------------
# As overlayfs does it for a file removed from its lower layer; the caller
# is not root (the whiteout is the caller's) but has CAP_MKNOD, which the
# kernel asks for the flag.
POMFS_OPTS=allow_other
chmod 711 "$T" # (the caller walks to the mount)
mount_fs
WU=4321 WG=4322
UPY=$(PATH=/usr/bin:/bin command -v python3) # one the caller may run (not root's own)
as_user() { setpriv --reuid $WU --regid $WG --clear-groups --inh-caps=+mknod \
                --ambient-caps=+mknod "$@"; }
mkdir -p "$M/w/up" "$M/w/dir/deep" "$M/w/moved"
chmod 0777 "$M/w" "$M/w/up" "$M/w/moved"
echo white >"$M/w/up/f"
echo keep >"$M/w/up/g"
wino=$(stat -c %i "$M/w/up/f")
ok "RENAME_WHITEOUT of a file" as_user "$UPY" -c "$RENAME2" "$M/w/up/f" "$M/w/moved/f" whiteout
eq "the target is the file" "$(stat -c %i "$M/w/moved/f")" "$wino"
eq "the target's content" "$(cat "$M/w/moved/f")" "white"
eq "the whiteout: type, mode, device" "$(stat -c '%F %a %t:%T' "$M/w/up/f")" \
    "character special file 0 0:0"
eq "the whiteout's owner is the caller" "$(stat -c %u:%g "$M/w/up/f")" "$WU:$WG"
ok "the whiteout is a new inode" test "$(stat -c %i "$M/w/up/f")" != "$wino"
nok "NOREPLACE|WHITEOUT onto a file" "EEXIST" \
    as_user "$UPY" -c "$RENAME2" "$M/w/up/g" "$M/w/moved/f" noreplace-whiteout
eq "nothing changed" "$(cat "$M/w/up/g") $(cat "$M/w/moved/f")" "keep white"
ok "NOREPLACE|WHITEOUT to a free name" \
    as_user "$UPY" -c "$RENAME2" "$M/w/up/g" "$M/w/up/g2" noreplace-whiteout
eq "the second whiteout" "$(stat -c '%F %a %t:%T' "$M/w/up/g")" "character special file 0 0:0"
echo over >"$M/w/up/h"
echo old >"$M/w/up/i"
ok "RENAME_WHITEOUT over a file (as root)" rename2 "$M/w/up/h" "$M/w/up/i" whiteout
eq "the replaced name's content" "$(cat "$M/w/up/i")" "over"
eq "the whiteout over a file" "$(stat -c '%F %a %t:%T %u:%g' "$M/w/up/h")" \
    "character special file 0 0:0 0:0"
nok "EXCHANGE|WHITEOUT" "EINVAL" rename2 "$M/w/up/g2" "$M/w/moved/f" exchange-whiteout
chown -R $WU:$WG "$M/w/dir"
ok "RENAME_WHITEOUT of a directory" as_user "$UPY" -c "$RENAME2" "$M/w/dir" "$M/w/moved/dir" whiteout
eq "the directory moved, .. follows" "$(stat -c %i "$M/w/moved/dir/deep/../..")" \
    "$(stat -c %i "$M/w/moved")"
eq "its whiteout" "$(stat -c '%F %a %t:%T' "$M/w/dir")" "character special file 0 0:0"
umount_fs
mount_fs
eq "after remount: the whiteout" "$(stat -c '%F %a %t:%T %u:%g' "$M/w/up/f")" \
    "character special file 0 0:0 $WU:$WG"
eq "after remount: the target" "$(cat "$M/w/moved/f")" "white"
eq "after remount: the entries of the old directory" "$(ls "$M/w/up" | tr '\n' ' ')" "f g g2 h i "
umount_fs

check_done
