#!/bin/bash
# test_pjdfstest.sh POMCTL [PATTERN...] -- POSIX conformance: runs pjdfstest
# (the Rust edition, pinned below) against the mount `POMCTL up --mount DIR`
# makes, exactly as it makes it (a cluster of R2, MDSL, MDS and pomfs from
# POMCTL's build tree; root's mount serves every user), switching to its own
# non-root users, and, in the same run, against a tmpfs, and prints both
# totals side by side:
#
#   pjdfstest pomfs: passed P failed F skipped S | tmpfs: passed P failed F skipped S
#
# A case that fails on pomfs must be listed, with its reason, in
# pjdfstest-known-failures.txt next to this script; an unlisted failure fails
# the test (so the list only shrinks). Listed cases that now pass are printed
# ("now passes: remove it from the list") without failing, as are failures
# the tmpfs shows too (the host's doing, not pomfs's).
#
# Needs root (users, tmpfs), /dev/fuse and fusermount3, and
# pjdfstest: $POM_PJDFSTEST, else the cached build
# ~/.cache/pomegranate/pjdfstest-$VER/bin/pjdfstest, else it is built once
# into that cache with cargo (rustup's /root/.cargo/bin/cargo if present,
# else cargo on PATH; pjdfstest $VER needs Rust >= 1.85, newer than
# Debian 12's cargo 0.66/rustc 1.63). Exit 77 (skip) when any of that is
# missing. Creates the users pjdfstest switches to (nobody, tests) if they
# are missing (idempotent). The cluster runs in a fresh folder and is
# stopped by `pomctl down` (by pid, unmounting first) in a trap.
# POM_PJD_POMFS_OPTS=OPTS is given to `pomctl up` as -o OPTS.
set -u

PJD_VERSION=0.2.2
POMCTL=$(realpath "$1")
shift
PATTERNS=("$@")
HERE=$(cd "$(dirname "$0")" && pwd)
KNOWN=${POM_PJD_KNOWN:-$HERE/pjdfstest-known-failures.txt}
export TZ=UTC LC_ALL=C

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "pjdfstest needs root (user switching, tmpfs)"
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || skip "no /dev/fuse or no fusermount3"

# ---- pjdfstest itself (built once, cached) ----------------------------
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/pomegranate/pjdfstest-$PJD_VERSION
PJD=${POM_PJDFSTEST:-$CACHE/bin/pjdfstest}
if [ ! -x "$PJD" ]; then
    CARGO=
    if [ -x /root/.cargo/bin/cargo ]; then CARGO=/root/.cargo/bin/cargo
    elif command -v cargo >/dev/null; then CARGO=$(command -v cargo); fi
    [ -n "$CARGO" ] || skip "no cargo to build pjdfstest $PJD_VERSION (needs Rust >= 1.85: rustup)"
    RUSTV=$("$(dirname "$CARGO")/rustc" --version 2>/dev/null || rustc --version 2>/dev/null)
    # every published pjdfstest (0.2.0 .. 0.2.2) declares rust-version 1.85
    read -r MAJ MIN <<<"$(sed -n 's/^rustc \([0-9]*\)\.\([0-9]*\).*/\1 \2/p' <<<"$RUSTV")"
    if [ -z "${MIN:-}" ] || [ "${MAJ:-0}" -lt 1 ] || { [ "$MAJ" -eq 1 ] && [ "$MIN" -lt 85 ]; }; then
        skip "pjdfstest $PJD_VERSION needs Rust >= 1.85; $CARGO has '${RUSTV:-no rustc}' (install rustup's)"
    fi
    echo "building pjdfstest $PJD_VERSION with $CARGO ($RUSTV) into $CACHE (once)"
    if ! nice "$CARGO" install pjdfstest --version "$PJD_VERSION" --locked --root "$CACHE" \
            -j 2 >"${TMPDIR:-/tmp}/pjdfstest-build.log" 2>&1; then
        tail -5 "${TMPDIR:-/tmp}/pjdfstest-build.log"
        skip "pjdfstest $PJD_VERSION did not build (Rust >= 1.85 needed; log above)"
    fi
fi

# ---- the users it switches to (idempotent) ----------------------------
getent passwd nobody >/dev/null || useradd -r -M -d /nonexistent -s /usr/sbin/nologin nobody
NOBODY_GROUP=$(getent group "$(id -g nobody)" | cut -d: -f1)
getent group tests >/dev/null || groupadd -r tests
getent passwd tests >/dev/null ||
    useradd -r -g tests -M -d / -s /usr/sbin/nologin -c "pjdfstest dummy user" tests

. "$HERE/../fuse/pomfs_check.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/pjdfstest.XXXXXX")
M=$T/mnt D=$T/data TMPFS=$T/tmpfs
mkdir -p "$M" "$TMPFS" "$T/second"
chmod 755 "$T"
cleanup() {
    # POM_PJD_LOGDIR=DIR keeps pjdfstest's and the daemons' logs
    [ -n "${POM_PJD_LOGDIR:-}" ] && mkdir -p "$POM_PJD_LOGDIR" &&
        cp "$T"/*.log "$D"/logs/*.log "$POM_PJD_LOGDIR"/ 2>/dev/null
    mountpoint -q "$TMPFS" 2>/dev/null && umount -l "$TMPFS"
    "$POMCTL" down --data "$D" >/dev/null 2>&1
    mountpoint -q "$M" 2>/dev/null && fusermount3 -u -z "$M"
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' TERM INT HUP
reap_on_kill "$T" "$POMCTL" "$D"

cat >"$T/pjdfstest.toml" <<EOF
# written by test_pjdfstest.sh
[features]
posix_fallocate = {}
utime_now = {}
utimensat = {}
rename_ctime = {}

[settings]
naptime = 0.02
allow_remount = false

[dummy_auth]
entries = [
  ["nobody", "$NOBODY_GROUP"],
  ["tests", "tests"],
]
EOF

# The mount exactly as `pomctl up --mount` makes it (no option added here).
"$POMCTL" up --data "$D" --mount "$M" ${POM_PJD_POMFS_OPTS:+-o "$POM_PJD_POMFS_OPTS"} \
    >"$T/up.log" 2>&1 || { cat "$T/up.log"; echo "FAIL: pomctl up --mount"; exit 1; }
PIDS=$(for f in "$D"/run/*.pid; do head -1 "$f"; done)
chmod 777 "$M"
HAVE_TMPFS=1
mount -t tmpfs -o size=512m,mode=777 pjdfstest-tmpfs "$TMPFS" 2>/dev/null || HAVE_TMPFS=0

# run NAME DIR SECONDARY: pjdfstest's per-case lines into $T/pjd-NAME.log
run() {
    (cd "$2" && RUST_BACKTRACE=0 timeout 1200 "$PJD" -c "$T/pjdfstest.toml" -p "$2" -s "$3" \
        "${PATTERNS[@]}") >"$T/pjd-$1.log" 2>&1
    local rc=$?
    [ "$rc" -eq 124 ] && echo "pjdfstest on $1 timed out (20 min)"
    grep -q '^Summary:' "$T/pjd-$1.log" ||
        { echo "pjdfstest on $1 ended early (exit $rc):"; tail -20 "$T/pjd-$1.log"; }
}
# cases NAME STATUS: the case names with that status, sorted
cases() { awk -v s="$2" 'NF >= 2 && $1 ~ /::/ && tolower($NF) == s { print $1 }' "$T/pjd-$1.log" | sort -u; }
totals() {
    printf 'passed %d failed %d skipped %d' "$(cases "$1" ok | wc -l)" \
        "$(cases "$1" failed | wc -l)" "$(cases "$1" skipped | wc -l)"
}

run pomfs "$M" "$TMPFS"
if [ "$HAVE_TMPFS" = 1 ]; then
    run tmpfs "$TMPFS" "$T/second"
    echo "pjdfstest pomfs: $(totals pomfs) | tmpfs: $(totals tmpfs)"
else
    : >"$T/pjd-tmpfs.log"
    echo "pjdfstest pomfs: $(totals pomfs) | tmpfs: not mountable here"
fi

FAIL=0
grep -q '^Summary:' "$T/pjd-pomfs.log" || FAIL=1
# the known list: "case::name   reason..." lines; '#' starts a comment
sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$KNOWN" | awk '{ print $1 }' | sort -u >"$T/known"
# cases whose reason says "flaky:" are not announced when they pass
sed -e 's/#.*//' "$KNOWN" | awk '$2 == "flaky:" { print $1 }' | sort -u >"$T/flaky"
cases pomfs failed >"$T/failed"
cases tmpfs failed >"$T/host-failed"
while read -r c; do
    [ -n "$c" ] || continue
    if grep -qxF "$c" "$T/known"; then
        continue
    elif grep -qxF "$c" "$T/host-failed"; then
        echo "fails on tmpfs too (host): $c"
    else
        echo "NEW FAILURE (not in $(basename "$KNOWN")): $c"
        awk -v c="$c" '$1 == c { p = 1; print "    " $0; next } p && /^\t/ { print "    " $0; next } { p = 0 }' \
            "$T/pjd-pomfs.log" | head -6
        FAIL=1
    fi
done <"$T/failed"
comm -23 "$T/known" "$T/failed" | comm -23 - "$T/flaky" | while read -r c; do
    grep -qxF "$c" <(cases pomfs ok) && echo "now passes (remove it from the list): $c"
done

# the daemons lived through it
for p in $PIDS; do
    kill -0 "$p" 2>/dev/null || { echo "a daemon died (pid $p)"; FAIL=1; }
done
if grep -q "Sanitizer" "$D"/logs/*.log; then
    echo "sanitizer report in a daemon log"; FAIL=1
fi
[ "$FAIL" -eq 0 ] && echo "pjdfstest: no unexpected failure" || { echo "--- pomfs.log (tail)"; tail -10 "$D/logs/pomfs.log"; }
exit "$FAIL"
