#!/usr/bin/env bash
# test_pomfs_acl.sh POMCTL POMFS -- POSIX ACLs on a pomfs mount
# (docs/client.md "POSIX ACLs"; xfstests generic/053, 105, 237, 307, 318,
# 529) and set-group-ID rules with umask and ACLs (generic/696, 697),
# checked as root and as `nobody` (setpriv) on one cluster (pomfs_lib.sh):
# an ACL grants a user what the mode denies and denies what it grants; the
# mode's group bits are the mask; an ACL the mode says all of is not
# stored; chmod changes the mask; a directory's default ACL is inherited
# by files and subdirectories, masking the mode instead of the umask;
# everything survives a remount; a new file of a non-member in a
# set-group-ID directory loses S_ISGID.
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
if ! command -v setfacl >/dev/null || ! command -v getfacl >/dev/null; then
    echo "SKIP: no setfacl/getfacl (Debian package acl)"
    exit 77
fi
M=$T/m
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
acl() { getfacl -cp "$@" | grep -v '^$' | tr '\n' ' '; }
chmod 755 "$T" # (nobody walks to the mount)
pl_mount "$M" allow_other,attr_timeout=0
chmod 755 "$M"

# An ACL grants what the mode denies; the mode's group bits show the mask.
echo secret >"$M/grant"
chmod 600 "$M/grant"
nok "nobody reads a 600 file" "Permission denied" "${NOBODY[@]}" cat "$M/grant"
ok "setfacl -m u:nobody:r" setfacl -m u:nobody:r "$M/grant"
eq "nobody reads through the ACL" "$("${NOBODY[@]}" cat "$M/grant" 2>&1)" "secret"
eq "the mode's group bits are the mask" "$(stat -c %a "$M/grant")" "640"
eq "getfacl" "$(acl "$M/grant")" \
    "user::rw- user:nobody:r-- group::--- mask::r-- other::--- "

# Only the owner sets an ACL; setting one moves the ctime.
nok "nobody's setfacl on root's file" "Operation not permitted" \
    "${NOBODY[@]}" setfacl -m u:nobody:rw "$M/grant"
touch "$M/ct"
c0=$(stat -c %z "$M/ct")
setfacl -m u:nobody:r "$M/ct"
eq "setfacl moves the ctime" "$([ "$(stat -c %z "$M/ct")" != "$c0" ] && echo yes)" "yes"

# Setting an access ACL outside the file's group drops S_ISGID (generic/375).
touch "$M/sgacl"
chown 65534:4321 "$M/sgacl"
chmod 2770 "$M/sgacl"
ok "nobody sets an ACL on its own file" "${NOBODY[@]}" setfacl -m u:daemon:r "$M/sgacl"
eq "S_ISGID dropped (nobody is not in group 4321)" "$(stat -c %a "$M/sgacl")" "770"
chmod 2770 "$M/sgacl"
ok "root sets one" setfacl -m u:bin:r "$M/sgacl"
eq "S_ISGID kept for root" "$(stat -c %a "$M/sgacl")" "2770"

# An ACL denies what the mode grants.
echo open >"$M/deny"
chmod 644 "$M/deny"
eq "nobody reads a 644 file" "$("${NOBODY[@]}" cat "$M/deny" 2>&1)" "open"
ok "setfacl -m u:nobody:-" setfacl -m u:nobody:- "$M/deny"
nok "the ACL denies nobody" "Permission denied" "${NOBODY[@]}" cat "$M/deny"

# An access ACL of the three base entries is the mode: not stored.
touch "$M/equiv"
ok "set an ACL the mode says all of" setfattr -n system.posix_acl_access \
    -v 0x02000000010007000000000004000500000000002000000000000000 "$M/equiv"
eq "its mode" "$(stat -c %a "$M/equiv")" "750"
eq "no ACL stored" "$(getfattr -m - -d "$M/equiv" 2>&1 | grep -c posix_acl)" "0"

# chmod changes the mask (and owner and other entries).
ok "chmod 600 of a file with an ACL" chmod 600 "$M/grant"
eq "the mask follows" "$(acl "$M/grant")" \
    "user::rw- user:nobody:r--	#effective:--- group::--- mask::--- other::--- "
nok "nobody is masked out" "Permission denied" "${NOBODY[@]}" cat "$M/grant"
ok "chmod 640" chmod 640 "$M/grant"

# Default ACLs: inherited by files (access ACL) and subdirectories (both),
# the mode masked by the ACL, not by the umask.
mkdir "$M/d"
ok "setfacl -d" setfacl -d -m u:nobody:rwx,g::rx,o::- "$M/d"
ok "setfacl nobody may write d" setfacl -m u:nobody:rwx "$M/d"
(umask 077 && echo x >"$M/d/f" && mkdir "$M/d/sub" && mknod "$M/d/fifo" p)
eq "a file's mode masked by the default ACL" "$(stat -c %a "$M/d/f")" "660"
eq "a file's inherited ACL" "$(acl "$M/d/f")" \
    "user::rw- user:nobody:rwx	#effective:rw- group::r-x	#effective:r-- mask::rw- other::--- "
eq "a fifo inherits too" "$(getfacl -cp "$M/d/fifo" | grep -c nobody)" "1"
eq "a subdirectory's mode" "$(stat -c %a "$M/d/sub")" "770"
eq "a subdirectory's default ACL" "$(acl -d "$M/d/sub")" \
    "user::rwx user:nobody:rwx group::r-x mask::rwx other::--- "
ok "nobody writes the inherited file" "${NOBODY[@]}" sh -c "echo y >>'$M/d/f'"
ok "nobody creates in the subdirectory" "${NOBODY[@]}" touch "$M/d/sub/n"
eq "and that file inherits in turn" "$(getfacl -cp "$M/d/sub/n" | grep -c '^user:nobody')" "1"
(umask 077 && mkdir "$M/plain" && touch "$M/plain/f")
eq "without a default ACL the umask applies" "$(stat -c %a "$M/plain/f")" "600"
ok "setfacl -k removes the default ACL" setfacl -k "$M/d"
(umask 022 && touch "$M/d/after")
eq "no inheritance once removed" "$(getfacl -cp "$M/d/after" | grep -c nobody):$(stat -c %a "$M/d/after")" "0:644"

# generic/696, 697: a non-member's new file in a set-group-ID directory
# loses S_ISGID (the umask, or a default ACL, masks the rest).
mkdir "$M/sg"
chown 0:4321 "$M/sg"
chmod 2777 "$M/sg"
cat >"$T/mk.py" <<'PY'
import os, sys
os.umask(int(sys.argv[2], 8))
os.close(os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o2775))
os.mkdir(sys.argv[1] + ".d", 0o2775)
PY
"${NOBODY[@]}" /usr/bin/python3 "$T/mk.py" "$M/sg/f" 010
eq "a non-member's file: no S_ISGID, umask" "$(stat -c %g:%a "$M/sg/f")" "4321:765"
eq "its directory keeps the bit" "$(stat -c %g:%a "$M/sg/f.d")" "4321:2765"
ok "a default ACL on the set-group-ID directory" setfacl -d -m u::rwx,g::rwx,o::rwx "$M/sg"
"${NOBODY[@]}" /usr/bin/python3 "$T/mk.py" "$M/sg/a" 077
eq "with a default ACL: no S_ISGID, no umask" "$(stat -c %g:%a "$M/sg/a")" "4321:775"

# Everything above survives a remount.
pl_umount "$M"
pl_mount "$M" allow_other,attr_timeout=0
eq "the ACL after a remount" "$("${NOBODY[@]}" cat "$M/grant" 2>&1)" "secret"
nok "the deny after a remount" "Permission denied" "${NOBODY[@]}" cat "$M/deny"
eq "the default ACL after a remount" "$(getfacl -cpd "$M/d/sub" | grep -c nobody)" "1"
(umask 077 && touch "$M/d/sub/late")
eq "inherited after a remount (directory not read yet)" "$(stat -c %a "$M/d/sub/late")" "660"
pl_umount "$M"
pl_done
