#!/bin/bash
# xfstests.sh XFSTESTS_DIR [check args...] -- runs xfstests against pomfs
# (docs/xfstests.md).
#
# Given a checkout of xfstests (https://github.com/kdave/xfstests; CI has
# none), as root:
#   1. installs the Debian packages xfstests needs to build and run when one
#      is missing (`apt-get update` once, then `apt-get install`);
#   2. builds xfstests in XFSTESTS_DIR (`make`; nothing else in it changes:
#      the configuration and the results live in the run's folder);
#   3. starts one cluster with `pomctl up` (R2, MDSL, MDS from the build tree,
#      POM_BUILD or SRC/build) and a second fs `scratch` beside its `pomfs`:
#      TEST_DEV is `pomfs@R2ADDR`, SCRATCH_DEV `scratch@R2ADDR`, both mounted
#      by mount(8) as `fuse.pomfs` through the fuse3 package's mount.fuse3,
#      which runs `pomfs` by the standard path mount(8) gives its helpers
#      (/usr/local/sbin first): the script runs in a private mount namespace
#      where a read-only overlay on /usr/local/sbin adds a link to the build
#      tree's pomfs to the host's entries, so the host keeps its own;
#   4. writes the configuration (FSTYP=fuse, FUSE_SUBTYP=.pomfs) and runs
#      `./check ARGS`; prints the passed / failed / not run counts last.
# _scratch_mkfs of FSTYP=fuse only mounts SCRATCH and runs
# `rm -rf $SCRATCH_MNT/*` (dot files stay); here the mount program of the
# configuration (xfstests' MOUNT_PROG) drops and creates the fs `scratch`
# when _scratch_mkfs mounts it, so every _scratch_mkfs gives an empty,
# fresh fs.
# Everything started is stopped at the end (mounts undone, `pomctl down`
# stops the daemons by pid). Environment: POM_BUILD (build tree),
# POM_XFSTESTS_TMP (run folder, default a new /tmp/pom-xfstests.XXXXXX; kept
# with the results, the daemons' logs and check's output).
# Exit: check's exit status; 2 usage, 77 not root or no FUSE.
set -u
[ $# -ge 1 ] && [ -d "${1:-}" ] || { echo "usage: $0 XFSTESTS_DIR [check args...]" >&2; exit 2; }
XD=$(realpath "$1"); shift
SRC=$(realpath "$(dirname "$0")/..")
BUILD=$(realpath "${POM_BUILD:-$SRC/build}")
POMCTL=$BUILD/cli/pomctl POMFS=$BUILD/fuse/pomfs
[ "$(id -u)" = 0 ] || { echo "xfstests.sh: needs root (mount(8), xfstests)" >&2; exit 77; }
[ -c /dev/fuse ] || { echo "xfstests.sh: no /dev/fuse" >&2; exit 77; }
[ -x "$POMCTL" ] && [ -x "$POMFS" ] || { echo "xfstests.sh: build pomctl and pomfs in $BUILD first" >&2; exit 2; }
[ -f "$XD/check" ] || { echo "xfstests.sh: $XD is not an xfstests checkout (no ./check)" >&2; exit 2; }
if [ -z "${POM_XFSTESTS_NS:-}" ]; then
    POM_XFSTESTS_NS=1 exec unshare -m --propagation private bash "$0" "$XD" "$@"
fi

# 1. packages: xfstests' README list for Debian (lvm2 and kernel headers are
# for block-device file systems only)
PKGS="acl attr automake autoconf bc dbench dump e2fsprogs fio gawk gcc indent
  libacl1-dev libaio-dev libcap-dev libgdbm-dev libgdbm-compat-dev libtool
  libtool-bin liburing-dev libuuid1 make psmisc python3 quota sed sqlite3
  uuid-dev uuid-runtime xfsprogs xfslibs-dev fuse3"
MISSING=
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || MISSING="$MISSING $p"
done
if [ -n "$MISSING" ]; then
    echo "xfstests.sh: installing$MISSING"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null && apt-get install -y -q $MISSING >/dev/null ||
        { echo "xfstests.sh: apt-get install$MISSING failed" >&2; exit 1; }
fi

# 2. build
make -C "$XD" -j"$(nproc)" >"${TMPDIR:-/tmp}/pom-xfstests-make.$$.log" 2>&1 ||
    { tail -20 "${TMPDIR:-/tmp}/pom-xfstests-make.$$.log"; echo "xfstests.sh: make failed" >&2; exit 1; }
rm -f "${TMPDIR:-/tmp}/pom-xfstests-make.$$.log"

# 3. cluster, TEST and SCRATCH
T=${POM_XFSTESTS_TMP:-$(mktemp -d "${TMPDIR:-/tmp}/pom-xfstests.XXXXXX")}
mkdir -p "$T" && chmod 755 "$T" && T=$(realpath "$T") # (xfstests' users reach TEST and SCRATCH)
D=$T/data
cleanup() {
    local m
    for m in "$T/test" "$T/scratch"; do
        while mountpoint -q "$m" 2>/dev/null; do umount "$m" 2>/dev/null || umount -l "$m"; done
    done
    "$POMCTL" down --data "$D" >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' TERM INT HUP
"$POMCTL" up --data "$D" >"$T/up.log" 2>&1 || { cat "$T/up.log"; echo "xfstests.sh: pomctl up failed" >&2; exit 1; }
"$POMCTL" --data "$D" fs create scratch --blob-backend local --blob-path "$T/blob-scratch" >/dev/null ||
    { echo "xfstests.sh: fs create scratch failed" >&2; exit 1; }
R2=$(cat "$D/r2.addr")
mkdir -p "$T/bin" "$T/sbin" "$T/test" "$T/scratch" "$T/results"
ln -sf "$POMFS" "$T/sbin/pomfs"
mount -t overlay pom-xfstests -o "lowerdir=$T/sbin:/usr/local/sbin" /usr/local/sbin ||
    { echo "xfstests.sh: cannot put pomfs in /usr/local/sbin (overlay)" >&2; exit 1; }
# xfstests' users and group (its README: fsgqa, fsgqa2, 123456-fsgqa), made
# where the host has none, in copies of /etc/passwd, group and shadow bound
# over the host's in this namespace only.
if ! id fsgqa >/dev/null 2>&1 || ! id fsgqa2 >/dev/null 2>&1 || ! id 123456-fsgqa >/dev/null 2>&1; then
    mkdir -p "$T/etc" "$T/home"
    cp /etc/passwd /etc/group /etc/shadow "$T/etc/"
    id=64990
    for u in fsgqa fsgqa2 123456-fsgqa; do
        id=$((id + 1))
        id "$u" >/dev/null 2>&1 && continue
        while getent passwd "$id" >/dev/null || getent group "$id" >/dev/null; do id=$((id + 1)); done
        mkdir -p "$T/home/$u" && chown "$id:$id" "$T/home/$u"
        echo "$u:x:$id:$id::$T/home/$u:/bin/bash" >>"$T/etc/passwd"
        echo "$u:x:$id:" >>"$T/etc/group"
        echo "$u:*:19000:0:99999:7:::" >>"$T/etc/shadow"
    done
    for f in passwd group shadow; do mount --bind "$T/etc/$f" "/etc/$f" || exit 1; done
fi
# The fresh SCRATCH of _scratch_mkfs: the fs is dropped (it is not mounted:
# --force only skips R2's count of a mount that just ended) and made again.
cat >"$T/bin/pom-scratch-mkfs" <<EOF
#!/bin/sh
"$POMCTL" --data "$D" fs drop scratch --force >/dev/null &&
rm -rf "$T/blob-scratch" &&
"$POMCTL" --data "$D" fs create scratch --blob-backend local --blob-path "$T/blob-scratch" >/dev/null
EOF
# xfstests checks that TEST and SCRATCH are of type $FSTYP by df's type
# column, which names pomfs's subtype (`fuse.pomfs`, as for sshfs and other
# FUSE file systems); its own _fs_type maps only fuse.glusterfs and
# fuse.ceph-fuse to their FSTYP. This df shows `fuse` instead.
cat >"$T/bin/df" <<'DF'
#!/bin/bash
set -o pipefail
command -p df "$@" | sed 's/ fuse\.pomfs / fuse /'
DF
chmod +x "$T/bin/pom-scratch-mkfs" "$T/bin/df"
OPTS="-o keyfile=$D/cluster.key,allow_other,dev,suid"
cat >"$T/local.config" <<EOF
# written by scripts/xfstests.sh of Pomegranate
export FSTYP=fuse
export FUSE_SUBTYP=.pomfs
export TEST_DEV=pomfs@$R2
export TEST_DIR=$T/test
export SCRATCH_DEV=scratch@$R2
export SCRATCH_MNT=$T/scratch
export TEST_FS_MOUNT_OPTS="$OPTS"
export MOUNT_OPTIONS="$OPTS"
export RESULT_BASE=$T/results
export DF_PROG="$T/bin/df -T -P"
# _scratch_mkfs (through _scratch_cleanup_files) mounts SCRATCH: make the
# fs fresh first
pom_xfstests_mount() {
    case " \${FUNCNAME[*]} " in
    *" _scratch_cleanup_files "*)
        mountpoint -q "$T/scratch" || "$T/bin/pom-scratch-mkfs" || return 1;;
    esac
    command mount "\$@"
}
export -f pom_xfstests_mount
export MOUNT_PROG=pom_xfstests_mount
EOF

# 4. check
V="xfstests (no git)"
[ -e "$XD/.git" ] && V="xfstests $(git -C "$XD" rev-parse HEAD)"
echo "xfstests.sh: $V, run folder $T"
cd "$XD" && HOST_OPTIONS=$T/local.config ./check "$@" 2>&1 | tee "$T/check.out"
RC=${PIPESTATUS[0]}
# check lists every test it tried after "Ran:", those that did not run
# after "Not run:", the failed after "Failures:"
count() { sed -n "s/^$1 *//p" "$T/check.out" | tail -1 | wc -w; }
RAN=$(count 'Ran:') NOTRUN=$(count 'Not run:') FAILED=$(count 'Failures:')
echo "pomfs xfstests: passed $((RAN - NOTRUN - FAILED)), failed $FAILED, not run $NOTRUN ($T/check.out)"
exit "$RC"
