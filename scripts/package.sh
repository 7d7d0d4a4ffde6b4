#!/usr/bin/env bash
# package.sh [BUILD [OUTDIR]] -- builds the Debian packages of Pomegranate
# (docs/deploy.md "Packages") from the build tree BUILD (default build/,
# configured and built first if needed) into OUTDIR (default BUILD/packages):
# pom-r2, pom-mds, pom-mdsl, pomctl, pomfs, libpomegranate0,
# libpomegranate-dev and python3-pomegranate, each VERSION_ARCH.deb, their
# Depends from dpkg-shlibdeps. Then, as root: apt-get install ./OUTDIR/*.deb
#
# A sanitizer build (POM_SANITIZE) is refused: its binaries need the
# sanitizer runtimes and are not what a user runs.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$BUILD/packages}
for t in cpack dpkg-deb dpkg-shlibdeps; do
    command -v "$t" >/dev/null || { echo "package.sh: $t missing (apt-get install cmake dpkg-dev)" >&2; exit 1; }
done
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
if grep -q '^POM_SANITIZE:STRING=.' "$BUILD/CMakeCache.txt"; then
    echo "package.sh: $BUILD is a sanitizer build (POM_SANITIZE); package an optimised one" >&2
    exit 1
fi
cmake --build "$BUILD" -j"$(nproc 2>/dev/null || echo 2)"
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
rm -f "$OUT"/*.deb
# cpack stages every component under OUT/_CPack_Packages and leaves the .debs in OUT
(cd "$BUILD" && cpack -G DEB -B "$OUT" >"$OUT/cpack.log" 2>&1) || {
    cat "$OUT/cpack.log" >&2; echo "package.sh: cpack failed" >&2; exit 1; }
rm -rf "$OUT/_CPack_Packages"
ls -1 "$OUT"/*.deb
