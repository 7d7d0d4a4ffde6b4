#!/bin/bash
# test_install.sh BUILDDIR SRCDIR -- what `cmake --install` gives a user:
#   - installs into a temporary prefix (daemons, pomctl, pomfs,
#     libpomegranate.so, pomegranate.h, pomegranate.pc);
#   - libpomegranate.so exports the pom_* API and nothing else;
#   - the key/value example compiles against it with `pkg-config --cflags
#     --libs pomegranate` alone and runs against a cluster started by the
#     installed `pomctl up` (R2 + MDSL + MDS from the prefix);
#   - mount(8) as the README says, after the README's install
#     (`cmake --install build --prefix /usr/local`, done in a private mount
#     namespace over an empty /usr/local, so the host keeps its own): the
#     README's `mount -t fuse.pomfs pomfs@ADDR DIR` line mounts quietly
#     (nothing on stderr) through the generic helper mount.fuse3, the mount
#     (a pomfs in the background) registers with R2 and heartbeats, a file
#     written there is read back; `mount -o remount,ro` and back to rw; an
#     fstab line (`mount -T FILE DIR`) of a second fs with the standard and
#     fstab-only options; `-o ro,noatime`; findmnt tells the two fs apart by
#     their source NAME@ADDR; `pomctl fs drop` sees the background mount;
#     umount ends each pomfs process.
# Every process is stopped by pomctl down (by pid), the mounts undone in a
# trap. Exit 77 (skip) without a C compiler or pkg-config; the mount(8) part
# is skipped without root, FUSE, mount.fuse3 or unshare(1).
set -u
BUILD=$(realpath "$1"); SRC=$(realpath "$2")
command -v cc >/dev/null && command -v pkg-config >/dev/null || { echo "SKIP: no cc/pkg-config"; exit 77; }
export LC_ALL=C
# the mount(8) part runs in a private mount namespace: enter it once
if [ -z "${POM_INSTALL_NS:-}" ] && [ "$(id -u)" = 0 ] && [ -c /dev/fuse ] &&
    command -v fusermount3 >/dev/null && [ -x /sbin/mount.fuse3 ] &&
    unshare -m --propagation private true 2>/dev/null; then
    POM_INSTALL_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/pom-install.XXXXXX")
P=$T/prefix M=$T/mnt M2=$T/mnt2 M3=$T/mnt3 D=$T/data
PASS=0 FAIL=0
cleanup() {
    local m
    for m in "$M" "$M2" "$M3"; do
        mountpoint -q "$m" 2>/dev/null && { umount "$m" 2>/dev/null || umount -l "$m"; }
    done
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
for f in bin/pom-r2 bin/pom-mds bin/pom-mdsl bin/pomctl bin/pomfs include/pomegranate.h; do
    check "installed $f" test -e "$P/$f"
done
check "pomegranate.pc installed" test -f "$LIBDIR/pkgconfig/pomegranate.pc"
# The systemd units of docs/deploy.md name the installed executables and
# pass `systemd-analyze verify` (where systemd is installed).
U=$P/lib/systemd/system
for u in pom-r2.service pom-mds@.service pom-mdsl@.service pomfs@.service; do
    check "installed lib/systemd/system/$u" test -f "$U/$u"
done
check "installed share/pomegranate/systemd/pomegranate.env" \
    test -f "$P/share/pomegranate/systemd/pomegranate.env"
check "the Python binding is not part of a plain install" \
    bash -c "! find '$P' -path '*dist-packages/pomegranate*' | grep -q ."
check "the units start the installed daemons" grep -q "^ExecStart=$P/bin/pom-mdsl " "$U/pom-mdsl@.service"
if command -v systemd-analyze >/dev/null; then
    mkdir -p "$T/units"
    cp "$U/pom-r2.service" "$T/units/"
    for u in pom-mds@7100 pom-mdsl@7200 pomfs@mnt-pom; do cp "$U/${u%%@*}@.service" "$T/units/$u.service"; done
    check "systemd-analyze verify of the units" bash -c "cd '$T/units' && systemd-analyze verify --man=no ./*.service >'$T/verify.log' 2>&1; rc=\$?; ! grep -i 'pom' '$T/verify.log' && [ \$rc = 0 ]"
    cat "$T/verify.log"
else
    echo "systemd-analyze not installed: the units are not verified"
fi

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

check "pomfs refuses a bad source with exit 2" bash -c "'$P/bin/pomfs' @$R2 '$T' -f 2>'$T/bad.err'; [ \$? = 2 ] && grep -q 'NAME@R2ADDR' '$T/bad.err'"

# client_pid FS: waits (30 s) until R2 has a client site of FS that is up,
# has heartbeated and is a running pomfs (the site is named client-PID: a
# pomfs that forked after registering is not); prints that pid.
client_pid() {
    local end=$((SECONDS + 30)) pid
    while [ $SECONDS -lt $end ]; do
        for pid in $("$P/bin/pomctl" --data "$D" --json sites | python3 -c '
import json, sys
for s in json.load(sys.stdin)["sites"]:
    if s["type"] == "client" and s.get("fs") == sys.argv[1] and s["state"] == "up" \
            and s["last_heartbeat_ns"] > 0 and s["addr"].startswith("client-"):
        print(s["addr"][7:])' "$1"); do
            [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = pomfs ] && { echo "$pid"; return 0; }
        done
        sleep 0.5
    done
    return 1
}
# gone PID...: waits (30 s) until every PID has exited
gone() {
    local end=$((SECONDS + 30)) p left
    while [ $SECONDS -lt $end ]; do
        left=0
        for p; do kill -0 "$p" 2>/dev/null && left=1; done
        [ $left = 0 ] && return 0
        sleep 0.2
    done
    return 1
}

if [ "${POM_INSTALL_NS:-}" = 1 ]; then
    mkdir -p "$T/usrlocal" "$M" "$M2" "$M3"
    mount --bind "$T/usrlocal" /usr/local
    check "README install: cmake --install build --prefix /usr/local" \
        cmake --install "$BUILD" --prefix /usr/local
    # The README's line, as written (with this cluster's R2 address).
    check "README: mount -t fuse.pomfs pomfs@$R2 DIR -o keyfile=KEY, nothing on stderr" \
        bash -c "mount -t fuse.pomfs pomfs@$R2 '$M' -o keyfile='$D/cluster.key' 2>'$T/mount.err' && [ ! -s '$T/mount.err' ]"
    cat "$T/mount.err" 2>/dev/null
    check "mounted as fuse.pomfs with source pomfs@$R2" \
        bash -c "[ \"\$(findmnt -n -o FSTYPE,SOURCE '$M')\" = 'fuse.pomfs pomfs@$R2' ]"
    PID1=$(client_pid pomfs)
    check "the background mount registers with R2 and heartbeats" test -n "$PID1"
    check "write through the README's mount" bash -c "printf 'installed\n' >'$M/hello' && sync '$M/hello'"
    check "read back" bash -c "[ \"\$(cat '$M/hello')\" = installed ]"
    check "mount -o remount,ro" bash -c "mount -o remount,ro '$M' && findmnt -n -o OPTIONS '$M' | tr , '\n' | grep -qx ro"
    check "read-only after remount,ro" bash -c "! touch '$M/ro' 2>'$T/ro.err' && grep -q 'Read-only' '$T/ro.err'"
    check "mount -o remount,rw" bash -c "mount -o remount,rw '$M' && touch '$M/rw'"

    # An fstab line of a second fs, with the standard and fstab-only options.
    check "fs create other" "$P/bin/pomctl" --data "$D" fs create other --blob-backend local \
        --blob-path "$T/blob-other"
    printf 'other@%s  %s  fuse.pomfs  %s  0 0\n' "$R2" "$M2" \
        defaults,_netdev,nofail,noauto,user,rw,relatime,nodev,nosuid,x-systemd.automount,comment=pom,allow_other,keyfile=$D/cluster.key \
        >"$T/fstab"
    check "fstab line: mount -T FILE DIR, nothing on stderr" \
        bash -c "mount -T '$T/fstab' '$M2' 2>'$T/fstab.err' && [ ! -s '$T/fstab.err' ]"
    cat "$T/fstab.err" 2>/dev/null
    check "findmnt tells the two fs apart" \
        bash -c "[ \"\$(findmnt -n -o SOURCE '$M2')\" = other@$R2 ]"
    for o in nodev nosuid allow_other default_permissions; do
        check "fstab mount has $o" bash -c "findmnt -n -o OPTIONS '$M2' | tr , '\n' | grep -qx $o"
    done
    PID2=$(client_pid other)
    check "the fstab mount heartbeats" test -n "$PID2"
    check "fs drop refuses the fstab-mounted fs" bash -c "! '$P/bin/pomctl' --data '$D' fs drop other >/dev/null 2>&1"
    check "the fstab mount is its own fs" bash -c "[ ! -e '$M2/hello' ] && echo two >'$M2/two' && [ ! -e '$M/two' ]"
    check "mount -o ro,noatime" bash -c "mount -t fuse.pomfs -o ro,noatime,keyfile='$D/cluster.key' pomfs@$R2 '$M3' 2>'$T/m3.err' && [ ! -s '$T/m3.err' ]"
    for o in ro noatime; do
        check "mount has $o" bash -c "findmnt -n -o OPTIONS '$M3' | tr , '\n' | grep -qx $o"
    done
    check "umount all three" bash -c "umount '$M3' && umount '$M2' && umount '$M'"
    check "each pomfs process ends after umount" gone ${PID1:-} ${PID2:-}
else
    echo "SKIP: mount(8) part (needs root, /dev/fuse, fusermount3, /sbin/mount.fuse3, unshare)"
fi
check "installed pomctl down" "$P/bin/pomctl" down --data "$D"

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
