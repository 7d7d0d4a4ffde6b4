#!/bin/bash
# test_pomfs_posix.sh POMCTL POMFS POM_DIO -- POSIX semantics xfstests found
# wrong, on one mount of a `pomctl up` cluster (docs/testing.md
# "test_pomfs_posix"):
#   asynchronous O_DIRECT writes read back by buffered reads that raced
#   with them (generic/451; pom_dio), and buffered writes while a thread
#   turns O_DIRECT on and off return (generic/036: no deadlock on the
#   pages such a write holds; a writer still waiting after 120 s, many
#   times what the writes take, is the failure); times before 1970, also after a
#   remount (generic/258); device numbers of device nodes after a remount,
#   and a device opened through the mount (generic/306); fstat of an open
#   directory after rmdir and after a rename over it, and of an open file
#   after a rename over it: nlink 0, still usable (generic/035); entries
#   made in a set-group-ID directory take its group, subdirectories the
#   bit, also for a directory this mount had not read (generic/314, 633);
#   fallocate and punch by a non-root caller drop the set-ID bits
#   (generic/683, 684); the atime mount options (generic/003).
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
DIO=$(realpath "$3")
M=$T/m
pl_mount "$M"

"$DIO" "$M/dio" 300 >"$T/dio.out" 2>&1; rc=$?
cat "$T/dio.out"
[ "$rc" = 77 ] || eq "aio O_DIRECT writes, then buffered reads" "$rc" 0
"$DIO" --toggle "$M/toggle" 2000 >"$T/toggle.out" 2>&1 &
dio=$!
for _ in $(seq 600); do kill -0 "$dio" 2>/dev/null || break; sleep 0.2; done
if kill -0 "$dio" 2>/dev/null; then
    # A writer waits for pomfs, whose thread waits in the kernel for that
    # writer's page: not even SIGKILL ends pomfs then. Abort the FUSE
    # connection (fusectl, in a mount namespace of its own), which ends both.
    echo "FAIL: writes while O_DIRECT is turned on and off hung (connection aborted)"
    conn=$(awk -v m="$M" '$5 == m { split($3, d, ":"); print d[2] }' /proc/self/mountinfo)
    unshare -m sh -c "mount -t fusectl none /sys/fs/fuse/connections &&
        echo 1 >/sys/fs/fuse/connections/$conn/abort"
    wait "$dio"
    fusermount3 -u "$M"
    FAIL=$((FAIL+1))
    pl_done
fi
wait "$dio"; rc=$?
cat "$T/toggle.out"
eq "writes while O_DIRECT is turned on and off" "$rc" 0

touch -m -d "1960-01-01 00:00:00.5" "$M/old"
touch -a -d "1969-12-31 23:59:59" "$M/old"
eq "mtime before 1970" "$(stat -c %.1Y "$M/old")" "-315619199.5"
eq "atime before 1970" "$(stat -c %X "$M/old")" "-1"
mknod "$M/null" c 1 3
mknod "$M/blk" b 7 300
eq "device number of a new node" "$(stat -c %t:%T "$M/null")" "1:3"
pl_umount "$M"
# (attr_timeout=0: every fstat below asks pomfs, none is the kernel's cache)
pl_mount "$M" dev,attr_timeout=0,allow_other
eq "char device number after a remount" "$(stat -c %F:%t:%T "$M/null")" "character special file:1:3"
eq "block device number after a remount" "$(stat -c %F:%t:%T "$M/blk")" "block special file:7:12c"
ok "write to the char device after a remount" sh -c "echo x >'$M/null'"
eq "mtime before 1970 after a remount" "$(stat -c %.1Y "$M/old")" "-315619199.5"
eq "atime before 1970 after a remount" "$(stat -c %X "$M/old")" "-1"

# generic/035: an open removed directory or file answers fstat (nlink 0).
mkdir "$M/d1" "$M/d2" "$M/d3"
echo first >"$M/f1"
echo second >"$M/f2"
eq "fstat of open removed directories and files" "$(python3 - "$M" <<'PY'
import os, stat, sys
m = sys.argv[1]
d1 = os.open(m + "/d1", os.O_RDONLY | os.O_DIRECTORY)
d2 = os.open(m + "/d2", os.O_RDONLY | os.O_DIRECTORY)
f1 = os.open(m + "/f1", os.O_RDONLY)
os.rmdir(m + "/d1")
os.rename(m + "/d3", m + "/d2")
os.rename(m + "/f2", m + "/f1")
for what, fd in (("rmdir", d1), ("dir renamed over", d2), ("file renamed over", f1)):
    try:
        st = os.fstat(fd)
        print(what, "dir" if stat.S_ISDIR(st.st_mode) else "file", st.st_nlink)
    except OSError as e:
        print(what, e.strerror)
print("read", os.read(f1, 5).decode(), "list", os.listdir(d1))
PY
)" "rmdir dir 0
dir renamed over dir 0
file renamed over file 0
read first list []"

# generic/683, 684, 685: fallocate and punch by a non-root caller drop
# S_ISUID, and S_ISGID when the group may execute or the caller is outside
# the file's group.
chmod 755 "$T" # (nobody walks to the mount)
touch "$M/priv"
chmod 6777 "$M/priv"
ok "fallocate as nobody" setpriv --reuid=65534 --regid=65534 --clear-groups \
    fallocate -l 8192 "$M/priv"
eq "fallocate drops the set-ID bits" "$(stat -c %a "$M/priv")" "777"
chmod 6777 "$M/priv"
ok "punch as nobody" setpriv --reuid=65534 --regid=65534 --clear-groups \
    fallocate -p -o 0 -l 4096 "$M/priv"
eq "punch drops the set-ID bits" "$(stat -c %a "$M/priv")" "777"
chmod 6767 "$M/priv"
setpriv --reuid=65534 --regid=65534 --clear-groups fallocate -l 16384 "$M/priv"
eq "S_ISGID without group execute dropped for a caller outside the group" \
    "$(stat -c %a "$M/priv")" "767"
chmod 6767 "$M/priv"
setpriv --reuid=65534 --regid=65534 --groups=0 fallocate -l 20480 "$M/priv"
eq "S_ISGID without group execute stays for a caller in the group" \
    "$(stat -c %a "$M/priv")" "2767"
chmod 6767 "$M/priv"
fallocate -l 24576 "$M/priv"
eq "root's fallocate keeps both" "$(stat -c %a "$M/priv")" "6767"

# generic/314, 633: set-group-ID directories.
mkdir "$M/sg"
chown 0:4321 "$M/sg"
chmod 2775 "$M/sg"
touch "$M/sg/f"
mkdir "$M/sg/sub" "$M/sg/sub/deeper"
mkfifo "$M/sg/fifo"
eq "a file in a setgid directory" "$(stat -c %g:%a "$M/sg/f")" "4321:644"
eq "a fifo in a setgid directory" "$(stat -c %g "$M/sg/fifo")" "4321"
eq "a subdirectory inherits the bit" "$(stat -c %g:%a "$M/sg/sub")" "4321:2755"
eq "and passes it on" "$(stat -c %g:%a "$M/sg/sub/deeper")" "4321:2755"
pl_umount "$M"
pl_mount "$M"
touch "$M/sg/sub/after"
eq "after a remount (parent not read yet)" "$(stat -c %g "$M/sg/sub/after")" "4321"
mkdir "$M/plain"
touch "$M/plain/f"
eq "no inheritance without the bit" "$(stat -c %g "$M/plain/f")" "0"
pl_umount "$M"

# generic/003: the atime options mount(8) passes, nodiratime too (libfuse
# 3.14 does not know it).
pl_mount "$M" nodiratime,relatime,strictatime
ok "mounted with nodiratime" mountpoint -q "$M"
pl_umount "$M"
pl_done
