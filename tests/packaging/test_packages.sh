#!/bin/bash
# test_packages.sh BUILD SRCDIR MODE -- the Debian packages of
# scripts/package.sh (docs/deploy.md "Packages").
#
# Both modes build the packages from BUILD with scripts/package.sh into a
# temporary folder and check them with dpkg-deb: the eight packages exist,
# each holds its files (executables in /usr/bin, units in
# /usr/lib/systemd/system naming /usr/bin, libpomegranate.so.0, the header
# and .pc, the Python modules), and every shared library an executable or
# library of a package needs (readelf NEEDED, found by ldconfig) belongs to
# a Debian package its Depends names, or to one of ours it names; pomfs
# depends on fuse3 (mount.fuse3 runs it). `apt-get install --simulate`
# of the eight .debs must find every dependency.
#
#   MODE root  (label integration) unpacks every package into a throwaway
#              root (dpkg-deb -x) and runs from it: pomctl up --mount with
#              the unpacked daemons and pomfs, a file written and read
#              back, pomctl status healthy, pomctl top; kv_example built
#              with the -dev package's pkg-config file alone and run; the
#              Python package imported and used; pomctl down.
#   MODE apt   (label long; only with CI=true or POM_TEST_PACKAGES_APT=1,
#              as root, with none of the packages installed: it installs
#              into the machine's /usr) runs `apt-get install ./*.deb`,
#              starts a cluster from /usr/bin, mounts with mount(8) as the
#              README says (mount.fuse3 finds /usr/bin/pomfs), writes and
#              reads, imports the Python binding without any path, builds
#              kv_example with `pkg-config pomegranate`, then stops
#              everything and `apt-get purge`s the eight packages (also when
#              a check fails).
# Exit 77 (skip): no cpack/dpkg-deb/dpkg-shlibdeps, a sanitizer build, or
# (apt) not asked for, not root, or a package already installed.
set -u
BUILD=$(realpath "$1"); SRC=$(realpath "$2"); MODE=$3
export LC_ALL=C
for t in cpack dpkg-deb dpkg-shlibdeps readelf; do
    command -v "$t" >/dev/null || { echo "SKIP: $t missing"; exit 77; }
done
if grep -q '^POM_SANITIZE:STRING=.' "$BUILD/CMakeCache.txt"; then
    echo "SKIP: a sanitizer build is not packaged"; exit 77
fi
PKGS="pom-r2 pom-mds pom-mdsl pomctl pomfs libpomegranate0 libpomegranate-dev python3-pomegranate"
if [ "$MODE" = apt ]; then
    if [ "${CI:-}" != true ] && [ "${POM_TEST_PACKAGES_APT:-}" != 1 ]; then
        echo "SKIP: installs into /usr: runs with CI=true or POM_TEST_PACKAGES_APT=1"; exit 77
    fi
    [ "$(id -u)" = 0 ] || { echo "SKIP: apt-get install needs root"; exit 77; }
    for p in $PKGS; do
        if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
            echo "SKIP: $p is installed on this machine already"; exit 77
        fi
    done
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/pom-packages.XXXXXX")
DEBS=$T/debs R=$T/root D=$T/data M=$T/mnt M2=$T/mnt2
. "$SRC/tests/fuse/pomfs_check.sh"
POMCTL=""
INSTALLED=0
cleanup() {
    local m
    for m in "$M2" "$M"; do
        mountpoint -q "$m" 2>/dev/null && { umount "$m" 2>/dev/null || fusermount3 -u -z "$m"; }
    done
    [ -n "$POMCTL" ] && [ -x "$POMCTL" ] && "$POMCTL" down --data "$D" >/dev/null 2>&1
    if [ "$INSTALLED" = 1 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get purge -y $PKGS >"$T/purge.log" 2>&1 ||
            cat "$T/purge.log"
    fi
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' TERM INT HUP

S=$SECONDS
ok "scripts/package.sh" bash "$SRC/scripts/package.sh" "$BUILD" "$DEBS"
echo "packages built in $((SECONDS - S)) s:"; ls -l "$DEBS"/*.deb 2>/dev/null
V=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")
deb_of() { ls "$DEBS/$1"_*.deb 2>/dev/null | head -1; }
for p in $PKGS; do
    ok "package $p built" test -n "$(deb_of "$p")"
done
ARCH=$(dpkg --print-architecture)
field() { dpkg-deb -f "$(deb_of "$1")" "$2" 2>/dev/null; }
for p in $PKGS; do
    eq "$p: Package" "$(field "$p" Package)" "$p"
    eq "$p: Version" "$(field "$p" Version)" "$V"
    ok "$p: Maintainer and Description" bash -c "[ -n \"\$(dpkg-deb -f '$(deb_of "$p")' Maintainer)\" ] && [ -n \"\$(dpkg-deb -f '$(deb_of "$p")' Description)\" ]"
done
eq "python3-pomegranate: Architecture" "$(field python3-pomegranate Architecture)" all
eq "pom-mds: Architecture" "$(field pom-mds Architecture)" "$ARCH"

has() { # package path-regex...
    local p=$1 f; shift
    dpkg-deb -c "$(deb_of "$p")" >"$T/$p.list" 2>/dev/null
    for f in "$@"; do
        ok "$p holds $f" grep -qE " \./$f( |$)" "$T/$p.list"
    done
}
has pom-r2 usr/bin/pom-r2 usr/lib/systemd/system/pom-r2.service
has pom-mds usr/bin/pom-mds 'usr/lib/systemd/system/pom-mds@\.service'
has pom-mdsl usr/bin/pom-mdsl 'usr/lib/systemd/system/pom-mdsl@\.service'
has pomctl usr/bin/pomctl usr/share/pomegranate/systemd/pomegranate.env \
    usr/share/doc/pomegranate/deploy.md
has pomfs usr/bin/pomfs 'usr/lib/systemd/system/pomfs@\.service'
has libpomegranate0 'usr/lib/(.*/)?libpomegranate\.so\.0' 'usr/lib/(.*/)?libpomegranate\.so\.0\.[0-9.]+'
has libpomegranate-dev 'usr/lib/(.*/)?libpomegranate\.so -> libpomegranate\.so\.0' \
    usr/include/pomegranate.h 'usr/lib/(.*/)?pkgconfig/pomegranate\.pc' \
    usr/share/doc/pomegranate/examples/kv_example.c
has python3-pomegranate usr/lib/python3/dist-packages/pomegranate/__init__.py \
    usr/lib/python3/dist-packages/pomegranate/_native.py
ok "no file is in two packages" bash -c "cat '$T'/*.list | awk '\$1 !~ /^d/ {print \$6}' | sort | uniq -d | grep -q . && exit 1 || exit 0"
ok "no __pycache__ in python3-pomegranate" bash -c "! grep -q __pycache__ '$T/python3-pomegranate.list'"

# Depends: each package's own, and what it runs.
for p in pom-r2 pom-mds pom-mdsl pomfs; do
    ok "$p depends on pomctl (= $V)" bash -c "dpkg-deb -f '$(deb_of "$p")' Depends | grep -q 'pomctl (= $V)'"
done
ok "pomfs depends on fuse3" bash -c "dpkg-deb -f '$(deb_of pomfs)' Depends | tr ',' '\n' | grep -qx ' *fuse3'"
ok "libpomegranate-dev depends on libpomegranate0 (= $V)" bash -c "dpkg-deb -f '$(deb_of libpomegranate-dev)' Depends | grep -q 'libpomegranate0 (= $V)'"
ok "python3-pomegranate depends on python3-cffi and libpomegranate0" bash -c "dpkg-deb -f '$(deb_of python3-pomegranate)' Depends | grep -q python3-cffi && dpkg-deb -f '$(deb_of python3-pomegranate)' Depends | grep -q libpomegranate0"
ok "libpomegranate0 has a shlibs file" bash -c "dpkg-deb -I '$(deb_of libpomegranate0)' shlibs | grep -q '^libpomegranate 0 libpomegranate0'"

# Every NEEDED library of every ELF file belongs to a package Depends names.
mkdir -p "$T/x"
for p in $PKGS; do
    dpkg-deb -x "$(deb_of "$p")" "$T/x/$p"
done
ok "every shared library needed is a dependency" python3 - "$T/x" "$DEBS" <<'PY'
import os, subprocess, sys
root, debs = sys.argv[1], sys.argv[2]
ours = {}   # soname -> our package
for p in os.listdir(root):
    for d, _, fs in os.walk(os.path.join(root, p)):
        for f in fs:
            if f.startswith("lib") and ".so." in f:
                ours[f] = p
ldc = {}
for line in subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines()[1:]:
    name, _, path = line.strip().partition(" => ")
    ldc.setdefault(name.split(" ")[0], path)
bad = 0
for p in sorted(os.listdir(root)):
    deb = [f for f in os.listdir(debs) if f.startswith(p + "_")][0]
    dep = subprocess.run(["dpkg-deb", "-f", os.path.join(debs, deb), "Depends"],
                         capture_output=True, text=True).stdout
    names = {d.strip().split(" ")[0].split(":")[0] for alt in dep.split(",") for d in alt.split("|") if d.strip()}
    for d, _, fs in os.walk(os.path.join(root, p)):
        for f in fs:
            path = os.path.join(d, f)
            if os.path.islink(path) or open(path, "rb").read(4) != b"\x7fELF":
                continue
            out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
            for line in out.splitlines():
                if "(NEEDED)" not in line:
                    continue
                so = line.split("[")[1].split("]")[0]
                if so in ours:
                    owner = ours[so]
                else:
                    lib = ldc.get(so)
                    q = subprocess.run(["dpkg", "-S", os.path.realpath(lib) if lib else so],
                                       capture_output=True, text=True) if lib else None
                    if not q or q.returncode:
                        q = subprocess.run(["dpkg", "-S", lib or so], capture_output=True, text=True)
                    owner = q.stdout.split(":")[0] if q.returncode == 0 else None
                ok = owner in names or owner == p
                print(f"{p}: {os.path.relpath(path, os.path.join(root, p))} needs {so} from {owner}: {'ok' if ok else 'NOT in Depends: ' + dep.strip()}")
                bad += not ok
sys.exit(1 if bad else 0)
PY
ok "the unit runs /usr/bin/pom-mdsl" grep -q '^ExecStart=/usr/bin/pom-mdsl ' "$T/x/pom-mdsl/usr/lib/systemd/system/pom-mdsl@.service"
ok "apt-get install --simulate finds every dependency" bash -c "apt-get install -s -o Debug::NoLocking=1 '$DEBS'/*.deb >'$T/sim.log' 2>&1 && grep -q '^Inst pomctl' '$T/sim.log'"
grep -E "^(E:|Inst)" "$T/sim.log" 2>/dev/null | head -12

# The binding is packaged for Debian's python3 (python3-cffi), not a
# python3 of pyenv or a venv that PATH may name first.
PY=/usr/bin/python3
FUSE_OK=0
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null && FUSE_OK=1

if [ "$MODE" = root ]; then
    # Everything unpacked into one throwaway root, run from there.
    mkdir -p "$R"
    for p in $PKGS; do dpkg-deb -x "$(deb_of "$p")" "$R"; done
    LIBDIR=$(dirname "$(find "$R/usr/lib" -name libpomegranate.so.0 | head -1)")
    POMCTL=$R/usr/bin/pomctl
    export HOME=$T/home; mkdir -p "$HOME"; unset POM_R2 POM_BIN_DIR
    if [ "$FUSE_OK" = 1 ]; then
        ok "pomctl up --mount from the unpacked packages" "$POMCTL" up --data "$D" --mount "$M"
        ok "the daemons run from the root" bash -c "for d in pom-r2 pom-mds pom-mdsl pomfs; do [ \"\$(readlink /proc/\$(awk '{print \$1; exit}' '$D/run/'\$d.pid)/exe)\" = '$R/usr/bin/'\$d ] || exit 1; done"
        ok "write on the mount" bash -c "echo packaged >'$M/hello' && sync '$M/hello'"
        eq "read back" "$(cat "$M/hello" 2>/dev/null)" packaged
    else
        echo "no FUSE here: the cluster runs without a mount"
        ok "pomctl up from the unpacked packages" "$POMCTL" up --data "$D"
    fi
    ok "pomctl status: healthy" "$POMCTL" --data "$D" status
    ok "pomctl top --once --json" bash -c "'$POMCTL' --data '$D' --json top --once --interval 0.5 | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)[\"ok\"] else 1)'"
    R2=$(cat "$D/r2.addr")
    ok "kv_example builds with the -dev package's pkg-config file alone" bash -c "PKG_CONFIG_PATH='$LIBDIR/pkgconfig' cc -std=c11 -Wall -Werror '$R/usr/share/doc/pomegranate/examples/kv_example.c' \$(PKG_CONFIG_PATH='$LIBDIR/pkgconfig' pkg-config --cflags --libs pomegranate) -o '$T/kv_example'"
    ok "kv_example runs against the cluster" bash -c "LD_LIBRARY_PATH='$LIBDIR' '$T/kv_example' --key-file '$D/cluster.key' '$R2' pomfs | grep -q 'get cherry -> fruit #3'"
    ok "the Python package works over libpomegranate0" env PYTHONPATH="$R/usr/lib/python3/dist-packages" \
        POMEGRANATE_LIB="$LIBDIR/libpomegranate.so.0" $PY -c "
import pomegranate, sys
with pomegranate.open(sys.argv[1], 'pomfs', keyfile=sys.argv[2]) as fs:
    with fs.keyspace('pkg') as kv:
        kv.put(b'k', b'v')
        assert kv.get(b'k') == b'v'
assert pomegranate.library_path().startswith(sys.argv[3])
" "$R2" "$D/cluster.key" "$R"
    ok "pomctl down" "$POMCTL" down --data "$D"
else
    # apt-get install, as the issue says, into this machine's /usr.
    if DEBIAN_FRONTEND=noninteractive apt-get install -y "$DEBS"/*.deb >"$T/apt.log" 2>&1; then
        INSTALLED=1; PASS=$((PASS+1))
    else
        FAIL=$((FAIL+1)); echo "FAIL: apt-get install ./*.deb"; tail -20 "$T/apt.log"
        INSTALLED=1 # purge what got in
        check_done
    fi
    for p in $PKGS; do
        ok "$p installed" bash -c "dpkg-query -W -f='\${Status}' $p | grep -q 'ok installed'"
    done
    POMCTL=/usr/bin/pomctl
    export HOME=$T/home; mkdir -p "$HOME"; unset POM_R2 POM_BIN_DIR
    if [ "$FUSE_OK" = 1 ]; then
        ok "/usr/bin/pomctl up --mount" "$POMCTL" up --data "$D" --mount "$M"
        ok "pomfs of the mount is /usr/bin/pomfs" bash -c "[ \"\$(readlink /proc/\$(awk '{print \$1; exit}' '$D/run/pomfs.pid')/exe)\" = /usr/bin/pomfs ]"
    else
        ok "/usr/bin/pomctl up" "$POMCTL" up --data "$D"
    fi
    ok "pomctl status: healthy" "$POMCTL" --data "$D" status
    R2=$(cat "$D/r2.addr")
    if [ "$FUSE_OK" = 1 ] && [ -x /sbin/mount.fuse3 ]; then
        mkdir -p "$M2"
        ok "README: mount -t fuse.pomfs pomfs@$R2 DIR" mount -t fuse.pomfs "pomfs@$R2" "$M2" -o keyfile="$D/cluster.key"
        ok "write and read through mount(8)" bash -c "echo apt >'$M2/apt' && sync '$M2/apt' && [ \"\$(cat '$M/apt')\" = apt ]"
        ok "umount" umount "$M2"
    fi
    ok "/usr/bin/python3 -c 'import pomegranate' and a put/get" $PY -c "
import pomegranate, sys
with pomegranate.open(sys.argv[1], 'pomfs', keyfile=sys.argv[2]) as fs:
    with fs.keyspace('apt') as kv:
        kv.put(b'k', b'v')
        assert kv.get(b'k') == b'v'
" "$R2" "$D/cluster.key"
    ok "kv_example builds with pkg-config pomegranate" bash -c "cc -std=c11 -Wall -Werror /usr/share/doc/pomegranate/examples/kv_example.c \$(pkg-config --cflags --libs pomegranate) -o '$T/kv_example' && '$T/kv_example' --key-file '$D/cluster.key' '$R2' pomfs | grep -q 'get cherry -> fruit #3'"
    ok "pomctl down" "$POMCTL" down --data "$D"
    POMCTL=""
    ok "apt-get purge" env DEBIAN_FRONTEND=noninteractive apt-get purge -y $PKGS
    INSTALLED=0
    ok "nothing left in /usr/bin" bash -c "! ls /usr/bin/pomctl /usr/bin/pom-mds /usr/bin/pomfs 2>/dev/null"
fi
check_done
