#!/bin/bash
# test_install.sh BUILDDIR SRCDIR -- what `cmake --install` gives a user:
#   - installs into a temporary prefix (daemons, pomctl, pomfs,
#     sbin/mount.fuse.pomfs, libpomegranate.so, pomegranate.h, pomegranate.pc);
#   - libpomegranate.so exports the pom_* API and nothing else;
#   - the key/value example compiles against it with `pkg-config --cflags
#     --libs pomegranate` alone and runs against a cluster started by the
#     installed `pomctl up` (R2 + MDSL + MDS from the prefix);
#   - the installed mount(8) helper mounts the default fs the way mount(8)
#     calls it (NAME@ADDR spec, fstab-only options dropped), a file written
#     there is read back, and it refuses a bad invocation with mount's exit 1.
# Every process is stopped by pomctl down (by pid), the mount undone in a trap.
# Exit 77 (skip) without a C compiler or pkg-config; the mount part is
# skipped when FUSE cannot be used here.
set -u
BUILD=$(realpath "$1"); SRC=$(realpath "$2")
command -v cc >/dev/null && command -v pkg-config >/dev/null || { echo "SKIP: no cc/pkg-config"; exit 77; }
export LC_ALL=C

T=$(mktemp -d "${TMPDIR:-/tmp}/pom-install.XXXXXX")
P=$T/prefix M=$T/mnt D=$T/data
PASS=0 FAIL=0
cleanup() {
    mountpoint -q "$M" 2>/dev/null && { fusermount3 -u "$M" 2>/dev/null || fusermount3 -u -z "$M"; }
    [ -x "$P/bin/pomctl" ] && "$P/bin/pomctl" down --data "$D" >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' TERM INT HUP
check() { # description command...
    local d=$1; shift
    if "$@" >>"$T/log" 2>&1; then PASS=$((PASS+1)); else FAIL=$((FAIL+1)); echo "FAIL: $d"; tail -5 "$T/log"; fi
}

cmake --install "$BUILD" --prefix "$P" >"$T/install.log" 2>&1 || { cat "$T/install.log"; echo "FAIL: cmake --install"; exit 1; }
LIBDIR=$(dirname "$(find "$P" -name libpomegranate.so | head -1)")
for f in bin/pom-r2 bin/pom-mds bin/pom-mdsl bin/pomctl bin/pomfs sbin/mount.fuse.pomfs include/pomegranate.h; do
    check "installed $f" test -e "$P/$f"
done
check "pomegranate.pc installed" test -f "$LIBDIR/pkgconfig/pomegranate.pc"

# Only pom_* leaves the library (plus the version node itself).
extra=$(nm -D --defined-only "$LIBDIR/libpomegranate.so" | awk '{print $3}' | grep -v '^pom_' | grep -v '^POMEGRANATE_' || true)
check "libpomegranate.so exports only pom_* (extra: ${extra:-none})" test -z "$extra"
check "exports pom_open and pom_kv_put" bash -c "nm -D --defined-only '$LIBDIR/libpomegranate.so' | grep -qw pom_open && nm -D --defined-only '$LIBDIR/libpomegranate.so' | grep -qw pom_kv_put"

export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
check "kv_example builds with pkg-config alone" \
    bash -c "cc -std=c11 -Wall -Werror '$P/share/doc/pomegranate/examples/kv_example.c' \$(pkg-config --cflags --libs pomegranate) -o '$T/kv_example'"

check "installed pomctl up" "$P/bin/pomctl" up --data "$D"
R2=$(cat "$D/r2.addr" 2>/dev/null)
check "kv_example runs against the cluster" bash -c "LD_LIBRARY_PATH='$LIBDIR' '$T/kv_example' --key-file '$D/cluster.key' '$R2' pomfs >'$T/kv.out' 2>&1 && grep -q 'get cherry -> fruit #3' '$T/kv.out' && grep -q 'search \"ap\"' '$T/kv.out'"
grep -q "apricot" "$T/kv.out" 2>/dev/null || { echo "kv_example said:"; cat "$T/kv.out"; }

# The mount(8) helper, called as mount(8) calls it.
H=$P/sbin/mount.fuse.pomfs
check "helper refuses a bad invocation with exit 1" bash -c "'$H' onlyone; [ \$? = 1 ]"
check "helper -f (fake) prints and mounts nothing" bash -c "'$H' pomfs@$R2 '$T' -fv -o rw,_netdev 2>&1 | grep -q 'fs=pomfs' && ! mountpoint -q '$T'"
if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
    mkdir -p "$M"
    check "mount.fuse.pomfs mounts (spec pomfs@R2, fstab options)" "$H" "pomfs@$R2" "$M" -o rw,noauto,_netdev,nofail,x-systemd.automount,keyfile=$D/cluster.key
    check "mounted as fuse.pomfs" bash -c "grep -q ' fuse.pomfs ' /proc/self/mounts && mountpoint -q '$M'"
    check "write through the helper's mount" bash -c "printf 'installed\n' >'$M/hello' && sync '$M/hello'"
    check "read back" bash -c "[ \"\$(cat '$M/hello')\" = installed ]"
    check "unmount" fusermount3 -u "$M"
else
    echo "SKIP: mount part (no /dev/fuse or fusermount3)"
fi
check "installed pomctl down" "$P/bin/pomctl" down --data "$D"

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
