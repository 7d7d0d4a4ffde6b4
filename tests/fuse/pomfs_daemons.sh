# pomfs_daemons.sh -- sourced by the mount tests that run the daemons
# directly (no R2): pom-mdsl and pom-mds on free loopback ports and a pomfs
# mount of fsid 1 at $M, all under a fresh temporary folder $T, stopped by
# pid in a trap (after unmounting), the folder removed.
#
#   . pomfs_daemons.sh NAME POMFS MDS MDSL     sets T, M, POMFS, MDS, MDSL
#   POMFS_OPTS=...       extra -o options of mount_fs (before it is called)
#   start_mdsl; start_mds; mount_fs; umount_fs; stop_mds (SIGKILL)
#   pl_cleanup_hook      defined by the test: runs first in the trap
# Exits 77 (skip) when FUSE cannot be used here.
set -u
POMFS=$(realpath "$2"); MDS=$(realpath "$3"); MDSL=$(realpath "$4")
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
    echo "SKIP: no /dev/fuse or no fusermount3"
    exit 77
fi
export TZ=UTC LC_ALL=C
T=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
M=$T/mnt
mkdir -p "$M" "$T/mdsl"
MDSL_PID= MDS_PID= FS_PID=
POMFS_OPTS=${POMFS_OPTS:-}
. "$(dirname "${BASH_SOURCE[0]}")/pomfs_check.sh"

pl_daemons_cleanup() {
    declare -F pl_cleanup_hook >/dev/null && pl_cleanup_hook
    mountpoint -q "$M" 2>/dev/null && { fusermount3 -u "$M" 2>/dev/null || fusermount3 -u -z "$M"; }
    local p
    for p in $FS_PID $MDS_PID $MDSL_PID; do
        kill -9 "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    rm -rf "$T"
}
trap pl_daemons_cleanup EXIT
trap 'exit 1' TERM INT HUP
reap_on_kill "$T"

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
stop_mds() {
    kill -9 "$MDS_PID" 2>/dev/null
    wait "$MDS_PID" 2>/dev/null
    MDS_PID=
}
mount_fs() {
    "$POMFS" "127.0.0.1:$P_MDS" "$M" -o "fsid=1${POMFS_OPTS:+,$POMFS_OPTS}" -f \
        >>"$T/pomfs.log" 2>&1 &
    FS_PID=$!
    wait_mounted "$M" "$FS_PID"
}
umount_fs() {
    fusermount3 -u "$M" || { echo "unmount failed"; return 1; }
    wait "$FS_PID"
    eq "pomfs exit status" "$?" "0"
    FS_PID=
}
