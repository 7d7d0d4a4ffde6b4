#!/bin/bash
# test_pomfs_df.sh POMCTL POMFS -- capacity and quotas through a mount
# (docs/testing.md "test_pomfs_df"; docs/r2.md "Capacity and quotas"): the
# whole folder of `pomctl up` on a 256 MiB tmpfs, so the storage is known.
#   - df of the mount: size is the tmpfs's; writing 64 MiB makes "used"
#     grow by 64 MiB (polled until the MDS's report reaches R2 and the
#     mount's heartbeat brings it back); df -i counts 10 new files;
#   - `pomctl fs stat --json` says the same;
#   - a byte quota refuses the write that crosses it with EDQUOT, an inode
#     quota the create past it; raising them lets both go on;
#   - the usage is the same after pom-mds restarts and after pom-r2 restarts.
# Runs as root (mount -t tmpfs); exits 77 (skip) when it cannot mount.
set -u
D=$(mktemp -d "${TMPDIR:-/tmp}/pomfs-df.XXXXXX")
if ! mount -t tmpfs -o size=256m tmpfs "$D" 2>/dev/null; then
    rmdir "$D"
    echo "SKIP: cannot mount a tmpfs (not root?)"
    exit 77
fi
export TMPDIR=$D
trap 'umount -l "$D"; rmdir "$D"' EXIT
setsid -f bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
    sleep 20; mountpoint -q "$2" && umount -l "$2" && rmdir "$2"' \
    reaper "$$" "$D" </dev/null >/dev/null 2>&1
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
trap 'pl_cleanup; umount -l "$D"; rmdir "$D"' EXIT
M=$T/m
MiB=$((1 << 20))

pl_mount "$M"
df_field() { df -B1 --output="$1" "$2" | tail -1 | tr -d ' '; }
used() { df_field used "$M"; }
iused() { df --output=iused "$M" | tail -1 | tr -d ' '; }
fs_json() { # field of `pomctl fs stat pomfs --json`
    "$POMCTL" --data "$T/data" --json fs stat pomfs | python3 -c '
import json, sys; print(json.load(sys.stdin)["fs"][sys.argv[1]])' "$1"
}
between() { # value lo hi
    [ "$1" -ge "$2" ] && [ "$1" -le "$3" ]
}
# Polls (bounded) until `used` is within [lo, hi].
used_in() { between "$(used)" "$1" "$2"; }
iused_is() { [ "$(iused)" -eq "$1" ]; }
# Restarts a daemon `pomctl up` started, with its own command line.
restart() { # pom-mds | pom-r2
    local pidf=$T/data/run/$1.pid pid args
    pid=$(head -n1 "$pidf")
    mapfile -d '' args <"/proc/$pid/cmdline"
    kill "$pid"
    local i
    for i in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$T/data/run/$1.port" # written again once it serves
    "${args[@]}" >>"$T/data/logs/$1.log" 2>&1 &
    printf '%s\n%s\n' $! "${args[0]}" >"$pidf" # `pomctl down` stops it by pid
    within "$1 serves again" 60 test -s "$T/data/run/$1.port"
}

# ---- size and used ------------------------------------------------------------
SIZE=$(df_field size "$D")
size_is() { [ "$(df_field size "$M")" -eq "$1" ]; }
within "df size is the storage's ($SIZE)" 10 size_is "$SIZE"
U0=$(used)
ok "used starts under 1 MiB ($U0)" between "$U0" 0 "$MiB"
ok "write 64 MiB" dd if=/dev/urandom of="$M/big" bs=1M count=64 conv=fsync status=none
within "used grows by 64 MiB" 15 used_in $((U0 + 64 * MiB)) $((U0 + 65 * MiB))
U1=$(used)
# The mount's avail is the MDSL's statvfs of its last heartbeat: the
# MDSL may have written since (commits, LevelDB), so it is asked again.
avail_within_tmpfs() { between "$(df_field avail "$M")" 0 "$(df_field avail "$D")"; }
within "avail is what the tmpfs has free ($(df_field avail "$M"))" 10 avail_within_tmpfs
eq "pomctl fs stat: bytes" "$(fs_json bytes)" "$U1"

# ---- inodes -------------------------------------------------------------------
I0=$(iused)
mkdir "$M/d"
for i in $(seq 9); do echo "$i" >"$M/d/f$i"; done
within "df -i counts the 10 new inodes" 15 iused_is $((I0 + 10))
eq "pomctl fs stat: files" "$(fs_json files)" $((I0 + 10))

# ---- quotas -------------------------------------------------------------------
ok "set a byte quota 8 MiB over the usage" \
    "$POMCTL" --data "$T/data" fs quota pomfs --bytes $((U1 + 8 * MiB))
eq "pomctl fs stat: quota_bytes" "$(fs_json quota_bytes)" $((U1 + 8 * MiB))
# The MDS learns the quota with its next heartbeat: a sparse growth past it
# (changes no data) shows when.
: >"$M/probe"
grow_refused() {
    truncate -s 16M "$M/probe" 2>"$T/probe.err" && { truncate -s 0 "$M/probe"; return 1; }
    grep -q "Disk quota exceeded" "$T/probe.err"
}
within "growing past the quota is refused" 15 grow_refused
nok "the write that crosses the byte quota fails EDQUOT" "Disk quota exceeded" \
    dd if=/dev/zero of="$M/over" bs=1M count=16 conv=fsync status=none
avail_at_most() { [ "$(df_field avail "$M")" -le "$1" ]; }
within "df avail is the quota's room" 15 avail_at_most $((8 * MiB))
rm -f "$M/over"
ok "raise the byte quota" "$POMCTL" --data "$T/data" fs quota pomfs --bytes 0
grow_ok() { truncate -s 16M "$M/probe" 2>/dev/null && truncate -s 0 "$M/probe"; }
within "growing goes on under the raised quota" 15 grow_ok
ok "the 16 MiB write goes on" dd if=/dev/zero of="$M/over" bs=1M count=16 conv=fsync status=none
rm -f "$M/over" "$M/probe"
within "used is back" 15 used_in "$U1" $((U1 + 64 * 1024))

# Every inode change reported (the probe's create and removal moved no byte).
within "inodes settle" 15 iused_is $((I0 + 10))
I1=$(fs_json files)
eq "pomctl fs stat: files settled" "$I1" $((I0 + 10))
ok "set an inode quota 3 over the usage" \
    "$POMCTL" --data "$T/data" fs quota pomfs --inodes $((I1 + 3))
for i in 1 2 3; do ok "create $i under the inode quota" touch "$M/d/q$i"; done
create_refused() {
    touch "$M/d/q4" 2>"$T/q4.err" && { rm -f "$M/d/q4"; return 1; }
    grep -q "Disk quota exceeded" "$T/q4.err"
}
within "the create past the inode quota fails EDQUOT" 15 create_refused
ok "raise the inode quota" "$POMCTL" --data "$T/data" fs quota pomfs --inodes $((I1 + 10))
within "the create goes on under the raised quota" 15 touch "$M/d/q4"
ok "clear the inode quota" "$POMCTL" --data "$T/data" fs quota pomfs --inodes 0
rm -f "$M"/d/q?

# ---- fsck counts the same --------------------------------------------------------
# A hard link (its ILT row is the inode, its names are not) and a symlink.
ln "$M/d/f1" "$M/d/f1-link"
ln -s d/f2 "$M/sym"
within "the link and the symlink count one inode" 15 iused_is $((I1 + 1))
fsck_usage() { # field of `pomctl fsck --json`'s usage
    python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["usage"][sys.argv[2]])' \
        "$T/fsck.json" "$1"
}
"$POMCTL" --data "$T/data" --json fsck --repair-usage >"$T/fsck.json"
eq "fsck: clean" "$?" 0
eq "fsck counts the inodes R2 has" "$(fsck_usage inodes)" "$(fsck_usage r2_inodes)"
eq "fsck counts the bytes R2 has" "$(fsck_usage bytes)" "$(fsck_usage r2_bytes)"
eq "fsck had nothing to repair" "$(fsck_usage repaired)" False
I1=$((I1 + 1))

# ---- restarts -----------------------------------------------------------------
within "usage settles" 15 iused_is "$I1"
U2=$(used)
pl_umount "$M"
restart pom-mds
pl_mount "$M"
eq "used after the MDS restart" "$(used)" "$U2"
eq "inodes after the MDS restart" "$(iused)" "$I1"
echo more >"$M/d/after-mds"
within "a create after the MDS restart counts" 15 iused_is $((I1 + 1))
restart pom-r2
within "used after the R2 restart" 30 used_in "$U2" $((U2 + 4096))
within "inodes after the R2 restart" 30 iused_is $((I1 + 1))
pl_umount "$M"
pl_done
