# pomfs_lib.sh -- sourced by the mount tests that run a whole cluster:
# `pomctl up` (R2 + MDSL + MDS from the build tree, free ports, its own
# folder under a fresh temporary directory), any number of pomfs mounts of
# the default fs, checks that count, and a trap that unmounts, stops every
# pomfs by pid and the cluster with `pomctl down` (which stops by pid too),
# then removes the folder.
#
#   . pomfs_lib.sh POMCTL POMFS     sets T (scratch folder), R2 (address),
#                                   KEY (the cluster key file)
#   pl_mount DIR [OPTS]             mounts fs "pomfs" at DIR (pid recorded)
#   pl_umount DIR                   unmounts, checks pomfs exited 0
#   ok, nok, eq, within ...         the checks of pomfs_check.sh
#   pl_done                         prints "N passed, N failed", exits
#   PL_UP_OPTS="--mds 4"            extra options of `pomctl up` (set before sourcing)
# Exits 77 (skip) when FUSE cannot be used here.
set -u
POMCTL=$(realpath "$1"); POMFS=$(realpath "$2")
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
    echo "SKIP: no /dev/fuse or no fusermount3"
    exit 77
fi
export TZ=UTC LC_ALL=C
T=$(mktemp -d "${TMPDIR:-/tmp}/pomfs-test.XXXXXX")
. "$(dirname "${BASH_SOURCE[0]}")/pomfs_check.sh"
declare -A PL_PID=()

pl_cleanup() {
    local m
    for m in "${!PL_PID[@]}"; do
        mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m"; }
        kill -9 "${PL_PID[$m]}" 2>/dev/null
        wait "${PL_PID[$m]}" 2>/dev/null
    done
    "$POMCTL" down --data "$T/data" >/dev/null 2>&1
    rm -rf "$T"
}
trap pl_cleanup EXIT
trap 'exit 1' TERM INT HUP
reap_on_kill "$T" "$POMCTL" "$T/data"

pl_mount() { # dir [extra -o options]
    local m=$1 o=${2:-}
    mkdir -p "$m"
    "$POMFS" "$R2" "$m" -f -o "fs=pomfs,keyfile=$KEY${o:+,$o}" >>"$T/pomfs.log" 2>&1 &
    PL_PID[$m]=$!
    wait_mounted "$m" "${PL_PID[$m]}"
}
pl_umount() { # dir
    local m=$1
    fusermount3 -u "$m" || { echo "FAIL: unmount $m"; FAIL=$((FAIL+1)); return 1; }
    wait "${PL_PID[$m]}"
    eq "pomfs of $m exit status" "$?" "0"
    unset "PL_PID[$m]"
}
pl_same() { # mount: every file of $T/src reads back byte-exact there
    local f bad=0
    for f in "$T"/src/*; do
        cmp -s "$f" "$1/$(basename "$f")" || { echo "  differs: $1/$(basename "$f")"; bad=1; }
    done
    return $bad
}
pl_done() { check_done; }

if ! "$POMCTL" up --data "$T/data" ${PL_UP_OPTS:-} >"$T/up.log" 2>&1; then
    echo "pomctl up failed:"; cat "$T/up.log"; exit 1
fi
R2=$(cat "$T/data/r2.addr")
KEY=$T/data/cluster.key # the cluster key `pomctl up` made (docs/security.md)
