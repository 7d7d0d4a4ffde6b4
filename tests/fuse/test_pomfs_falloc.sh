#!/bin/bash
# test_pomfs_falloc.sh POMCTL POMFS -- fallocate modes and inode flags
# through a mount of a `pomctl up` cluster (docs/testing.md
# "test_pomfs_falloc"):
#   the fallocate modes FUSE passes on (ZERO_RANGE with and without
#   KEEP_SIZE, punch, allocation) and write/truncate in a seeded mix on an
#   inline file and on a blob file, compared after each call with the same
#   calls on a host file (pomfs_falloc.py), and again after a remount;
#   COLLAPSE_RANGE and INSERT_RANGE answer EOPNOTSUPP (the kernel's; the
#   library test test_pom_blob_client covers them); st_blksize 4096;
#   chattr/lsattr (root: CAP_LINUX_IMMUTABLE): +i forbids write, truncate,
#   rm, mv, ln, chmod, touch, xattrs, fallocate (EPERM), +a allows appends
#   only; a directory's +i/+a keep its own name and attributes; no entry
#   of a +i directory is made, linked, moved in or out, renamed or removed,
#   and a +a directory takes new entries but loses none (generic/079), also
#   through a second mount that read the directory before the chattr (the
#   MDS checks the flags); flags kept across a remount; an owner without the
#   capability cannot set +i; FIEMAP and O_TMPFILE answer EOPNOTSUPP (the
#   kernel answers them: docs/client.md "Not built"); FS_IOC_GETFSLABEL
#   on the mount's root and on a file answers the fs name (xfs_io's
#   `label`), FS_IOC_SETFSLABEL answers ENOTTY.
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
PY=$(dirname "$0")/pomfs_falloc.py
M=$T/m
R=$T/ref
mkdir -p "$R"
pl_mount "$M" allow_other

python3 "$PY" run "$M" "$R" "${XT_SEED:-1}" >"$T/falloc.out" 2>&1; rc=$?
cat "$T/falloc.out"
if [ "$rc" = 2 ]; then
    echo "SKIP: the host file system of $R cannot be the reference"; exit 77
fi
eq "fallocate modes on an inline and a blob file, as on the host" "$rc" 0
for f in inline blob; do
    eq "$f: zero, zero keeping the size, punch, allocation succeeded" \
        "$(grep "^$f ok" "$T/falloc.out" | tr ' ' '\n' | grep -cxE 'zero|zero_keep|punch|alloc|alloc_keep')" 5
done
eq "st_blksize (the unit of collapse and insert)" "$(stat -c %o "$M/blob")" 4096
pl_umount "$M"
pl_mount "$M" allow_other
ok "the same bytes after a remount" python3 "$PY" same "$M" "$R"

# The kernel answers FIEMAP and O_TMPFILE without asking pomfs.
eq "FIEMAP" "$(python3 - "$M/blob" <<'PY'
import fcntl, struct, sys, errno
fd = open(sys.argv[1], "rb")
try:
    fcntl.ioctl(fd, 0xC020660B, bytearray(32))  # FS_IOC_FIEMAP, no extents asked
    print("answered")
except OSError as e:
    print("EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else errno.errorcode[e.errno])
PY
)" EOPNOTSUPP
eq "O_TMPFILE" "$(python3 -c 'import os, sys, errno
try:
    os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o600); print("opened")
except OSError as e:
    print("EOPNOTSUPP" if e.errno == errno.EOPNOTSUPP else errno.errorcode[e.errno])' "$M")" EOPNOTSUPP

# The label ioctls: FS_IOC_GETFSLABEL = _IOR(0x94, 49, char[FSLABEL_MAX]).
LABEL='
import errno, fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    if sys.argv[2] == "get":
        print(fcntl.ioctl(fd, 0x81009431, bytes(256)).rstrip(b"\0").decode())
    else:
        fcntl.ioctl(fd, 0x41009432, sys.argv[3].encode().ljust(256, b"\0"))  # SETFSLABEL
        print("set")
except OSError as e:
    print(errno.errorcode[e.errno])
'
eq "FS_IOC_GETFSLABEL of the root: the fs name" "$(python3 -c "$LABEL" "$M" get)" pomfs
eq "FS_IOC_GETFSLABEL of a file" "$(python3 -c "$LABEL" "$M/blob" get)" pomfs
eq "FS_IOC_SETFSLABEL" "$(python3 -c "$LABEL" "$M" set other)" ENOTTY
if command -v xfs_io >/dev/null; then
    eq "xfs_io label" "$(xfs_io -c label "$M")" 'label = "pomfs"'
fi

if [ "$(id -u)" != 0 ] || ! command -v chattr >/dev/null; then
    echo "(inode flags need root, for CAP_LINUX_IMMUTABLE, and chattr: skipped)"
    pl_done
fi
flags() { lsattr -d "$1" 2>&1 | cut -d' ' -f1 | tr -d -- -; }
echo data >"$M/imm"
echo line >"$M/app"
echo x >"$M/nodump"
mkdir "$M/idir" "$M/adir" "$M/idir/sub" "$M/adir/sub"
echo in >"$M/adir/old"
echo in >"$M/idir/f"
mkdir "$M/idir/full" && echo in >"$M/idir/full/f"
M2=$T/m2 # a second client, which has read both directories before the chattr
pl_mount "$M2" allow_other
ls -l "$M2/idir" "$M2/adir" >/dev/null
ok "chattr +i" chattr +i "$M/imm"
ok "chattr +a" chattr +a "$M/app"
ok "chattr +dA" chattr +dA "$M/nodump"
ok "chattr +i on a directory" chattr +i "$M/idir"
ok "chattr +a on a directory" chattr +a "$M/adir"
eq "lsattr of the immutable file" "$(flags "$M/imm")" i
# generic/277: the kernel caches the attributes chattr's own stat read;
# the flag change must show its ctime at once.
echo c >"$M/ct"
c0=$(stat -c %z "$M/ct")
ok "chattr +d" chattr +d "$M/ct"
ok "chattr moves the ctime" test "$(stat -c %z "$M/ct")" != "$c0"
eq "lsattr of the append-only file" "$(flags "$M/app")" a
eq "lsattr of the nodump, noatime file" "$(flags "$M/nodump")" dA
eq "lsattr of the immutable directory" "$(flags "$M/idir")" i
check_fixed() { # the checks of +i and +a; $1 says when
    local w=$1 P="Operation not permitted"
    nok "$w: write to +i" "$P" sh -c "echo x >>'$M/imm'"
    nok "$w: truncate +i" "$P" truncate -s 0 "$M/imm"
    nok "$w: rm +i" "$P" rm -f "$M/imm"
    nok "$w: mv +i" "$P" mv "$M/imm" "$M/imm2"
    nok "$w: mv over +i" "$P" mv "$M/nodump" "$M/imm"
    nok "$w: ln +i" "$P" ln "$M/imm" "$M/imm3"
    nok "$w: chmod +i" "$P" chmod 600 "$M/imm"
    nok "$w: touch +i" "$P" touch "$M/imm"
    nok "$w: setxattr +i" "$P" python3 -c "import os; os.setxattr('$M/imm', 'user.a', b'1')"
    nok "$w: rmdir +i" "$P" rmdir "$M/idir"
    nok "$w: fallocate +i" "$P" fallocate -l 8192 "$M/imm"
    eq "$w: +i bytes unchanged" "$(cat "$M/imm")" data
    ok "$w: append to +a" sh -c "echo more >>'$M/app'"
    ok "$w: touch +a (times set to now)" touch "$M/app"
    nok "$w: touch -d +a" "$P" touch -d 2001-01-01 "$M/app"
    nok "$w: overwrite +a" "$P" sh -c "echo x >'$M/app'"
    nok "$w: write into +a without O_APPEND" "$P" dd if=/dev/zero of="$M/app" bs=1 count=1 conv=notrunc
    nok "$w: truncate +a" "$P" truncate -s 1 "$M/app"
    nok "$w: rm +a" "$P" rm -f "$M/app"
    nok "$w: punch +a" "$P" fallocate -p -o 0 -l 1 "$M/app"
    nok "$w: mv a +a directory" "$P" mv "$M/adir" "$M/adir2"
    ok "$w: append bytes read back" grep -q more "$M/app"
    # generic/079: the entries of +i and +a directories
    local k=$2
    nok "$w: create in +i dir" "$P" touch "$M/idir/new"
    nok "$w: mkdir in +i dir" "$P" mkdir "$M/idir/nd"
    nok "$w: mkfifo in +i dir" "$P" mkfifo "$M/idir/ff"
    nok "$w: symlink in +i dir" "$P" ln -s f "$M/idir/sl"
    nok "$w: link into +i dir" "$P" ln "$M/nodump" "$M/idir/hl"
    nok "$w: rm in +i dir" "$P" rm -f "$M/idir/f"
    nok "$w: rmdir in +i dir" "$P" rmdir "$M/idir/sub"
    nok "$w: rmdir of a non-empty dir in +i dir" "$P" rmdir "$M/idir/full"
    nok "$w: mv out of +i dir" "$P" mv "$M/idir/f" "$M/out"
    nok "$w: mv into +i dir" "$P" mv "$M/ct" "$M/idir/ct"
    nok "$w: rename in +i dir" "$P" mv "$M/idir/f" "$M/idir/g"
    eq "$w: +i dir entries unchanged" "$(ls "$M/idir" | tr '\n' ' ')" "f full sub "
    ok "$w: create in +a dir" touch "$M/adir/new$k"
    ok "$w: mkdir in +a dir" mkdir "$M/adir/nd$k"
    ok "$w: link into +a dir" ln "$M/adir/old" "$M/adir/hl$k"
    echo m >"$M/mv$k"
    ok "$w: mv into +a dir" mv "$M/mv$k" "$M/adir/mv$k"
    nok "$w: rm in +a dir" "$P" rm -f "$M/adir/old"
    nok "$w: rmdir in +a dir" "$P" rmdir "$M/adir/nd$k"
    nok "$w: mv out of +a dir" "$P" mv "$M/adir/old" "$M/out"
    nok "$w: rename in +a dir" "$P" mv "$M/adir/old" "$M/adir/g"
    nok "$w: mv over an entry of +a dir" "$P" mv "$M/adir/new$k" "$M/adir/old"
    eq "$w: +a dir kept its entry" "$(cat "$M/adir/old")" in
    nok "$w: create in +i dir, second mount" "$P" touch "$M2/idir/new2"
    nok "$w: rm in +a dir, second mount" "$P" rm -f "$M2/adir/old"
}
check_fixed "mounted" 1
pl_umount "$M"
pl_mount "$M" allow_other
eq "lsattr after a remount" "$(flags "$M/imm") $(flags "$M/app") $(flags "$M/nodump") $(flags "$M/idir")" "i a dA i"
check_fixed "after a remount" 2
# The kernel checks the capability before pomfs hears of it.
chmod 711 "$T" # (nobody walks to the mount)
echo n >"$M/owned"
chown nobody "$M/owned"
nok "chattr +i by an owner without CAP_LINUX_IMMUTABLE" "Operation not permitted" \
    setpriv --reuid nobody --regid nogroup --clear-groups --inh-caps=-all chattr +i "$M/owned"
ok "chattr +d by the owner" setpriv --reuid nobody --regid nogroup --clear-groups chattr +d "$M/owned"
eq "lsattr of the owner's file" "$(flags "$M/owned")" d
ok "chattr -ia" chattr -i -a "$M/imm" "$M/app" "$M/idir" "$M/adir"
ok "rm after chattr -i" rm "$M/imm" "$M/app"
ok "rm -r after chattr -i" rm -r "$M/idir" "$M/adir"
pl_umount "$M2"
pl_done
