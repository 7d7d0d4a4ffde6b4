# metrics_lib.sh -- sourced by the /metrics tests (test_metrics.sh,
# test_metrics_prom.sh): skips (77) unless pom-r2, pomfs, FUSE and the
# given tools are there, then starts `pomctl up --mount` in a fresh
# temporary folder and stops it (and whatever the test registered in
# ML_STOP, a command run first) when the test ends, also after SIGKILL.
#
#   . metrics_lib.sh POMCTL NAME TOOL...   sets T (scratch), D (data folder),
#                                          M (the mount), ADDR[daemon] (the
#                                          address of each .metrics file)
#   ML_DAEMONS                             "pom-r2 pom-mds pom-mdsl pomfs"
#   ML_UP_ARGS (set before)                more options of `pomctl up`
set -u
POMCTL=$(realpath "$1")
ML_BIN=$(dirname "$POMCTL")
if [ ! -x "$ML_BIN/../r2/pom-r2" ] || [ ! -x "$ML_BIN/../fuse/pomfs" ]; then
    echo "SKIP: pom-r2 / pomfs not built"
    exit 77
fi
for t in "${@:3}" python3 fusermount3; do
    command -v "$t" >/dev/null || { echo "SKIP: $t missing (scripts/install-deps.sh)"; exit 77; }
done
[ -c /dev/fuse ] || { echo "SKIP: no /dev/fuse"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/$2.XXXXXX")
D=$T/data
M=$T/m
export HOME=$T/home
mkdir -p "$HOME"
unset POM_R2 POM_BIN_DIR
. "$(dirname "${BASH_SOURCE[0]}")/../fuse/pomfs_check.sh"
ML_STOP=""
ml_cleanup() {
    [ -n "$ML_STOP" ] && eval "$ML_STOP"
    mountpoint -q "$M" 2>/dev/null && fusermount3 -u -z "$M"
    "$POMCTL" down --data "$D" >/dev/null 2>&1
    rm -rf "$T"
}
trap ml_cleanup EXIT
trap 'exit 1' TERM INT HUP
reap_on_kill "$T" "$POMCTL" "$D"

# ML_UP_ARGS: more options of `pomctl up` (e.g. "--mdsl 2"), word-split.
# shellcheck disable=SC2086
if ! "$POMCTL" up --data "$D" --mount "$M" ${ML_UP_ARGS:-} >"$T/up.log" 2>&1; then
    if grep -qi "permission\|fuse: device not found\|Operation not permitted" \
        "$D/logs/pomfs.log" 2>/dev/null; then
        echo "SKIP: FUSE mounts are not allowed here"; exit 77
    fi
    echo "pomctl up --mount failed:"; cat "$T/up.log"; exit 1
fi
ML_DAEMONS="pom-r2 pom-mds pom-mdsl pomfs"
declare -A ADDR
for d in $ML_DAEMONS; do
    ADDR[$d]=$(cat "$D/run/$d.metrics" 2>/dev/null)
done
