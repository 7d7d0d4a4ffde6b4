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
#   name (ENOENT), of a directory into its own subtree (EINVAL).
# Exit 77 (skip) when FUSE cannot be used here.
set -u

POMFS=$(realpath "$1"); MDS=$(realpath "$2"); MDSL=$(realpath "$3")
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
    echo "SKIP: no /dev/fuse or no fusermount3"
    exit 77
fi
export TZ=UTC LC_ALL=C

T=$(mktemp -d "${TMPDIR:-/tmp}/pomfs-links.XXXXXX")
M=$T/mnt
mkdir -p "$M" "$T/mdsl"
MDSL_PID= MDS_PID= FS_PID=
PASS=0 FAIL=0

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
wait_port() { # port: up to 30 s
    local i
    for i in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "port $1 never opened"; return 1
}
ok() { # description command...: the command must succeed
    local d=$1; shift
    if "$@" >>"$T/cmd.log" 2>&1; then PASS=$((PASS+1)); else FAIL=$((FAIL+1)); echo "FAIL: $d"; fi
}
nok() { # description errno-text command...: must fail, saying errno-text
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
eq() { # description got want
    if [ "$2" == "$3" ]; then PASS=$((PASS+1)); else FAIL=$((FAIL+1)); echo "FAIL: $1: got '$2', want '$3'"; fi
}

P_MDSL=$(free_port); P_MDS=$(free_port)
start_mdsl() {
    "$MDSL" --dir "$T/mdsl" --listen "127.0.0.1:$P_MDSL" >>"$T/mdsl.log" 2>&1 &
    MDSL_PID=$!
    wait_port "$P_MDSL"
}
start_mds() {
    "$MDS" --mdsl "127.0.0.1:$P_MDSL" --listen "127.0.0.1:$P_MDS" --commit-interval-ms 1000 \
        >>"$T/mds.log" 2>&1 &
    MDS_PID=$!
    wait_port "$P_MDS"
}
mount_fs() {
    "$POMFS" "127.0.0.1:$P_MDS" "$M" -o fsid=1 -f >>"$T/pomfs.log" 2>&1 &
    FS_PID=$!
    local i
    for i in $(seq 300); do
        mountpoint -q "$M" && return 0
        kill -0 "$FS_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "pomfs did not mount:"; cat "$T/pomfs.log"
    if grep -qi "permission\|fuse: device not found\|Operation not permitted" "$T/pomfs.log"; then
        echo "SKIP: FUSE mounts are not allowed here"; exit 77
    fi
    exit 1
}
umount_fs() {
    fusermount3 -u "$M" || { echo "unmount failed"; return 1; }
    wait "$FS_PID"
    eq "pomfs exit status" "$?" "0"
    FS_PID=
}

# renameat2(AT_FDCWD, a, AT_FDCWD, b, flags) through ctypes; prints the
# errno name on failure (exit 1).
RENAME2='
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
flags = {"noreplace": 1, "exchange": 2, "both": 3}[sys.argv[3]]
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

echo "test_pomfs_links: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
