#!/usr/bin/env bash
# Sets up and runs a one-machine Pomegranate cluster with a mounted file system
# (embedded R2 store, local blob directory): builds if needed, then
# `pomctl up --mount DIR`. Stop it with `scripts/down.sh` (pomctl down).
#
# usage: scripts/up.sh [DATA_DIR] [MOUNT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-$HOME/.pomegranate}
MNT=${2:-/tmp/pomfs}

if [ ! -x build/r2/pomctl ]; then
  bash scripts/install-deps.sh
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j"$(nproc)"
fi
if [ ! -x build/r2/pomctl ] || [ ! -x build/fuse/pomfs ]; then
  cat >&2 <<MSG
up.sh: the one-machine cluster cannot start yet.
Built so far: libxtable (rows, slices, bitmaps, rings), the RPC layer and its
benchmarks. Not built yet: pom-mds, pom-mdsl, pom-r2/pomctl and the pomfs FUSE
client (issues 3-6). Run the tests with: scripts/test.sh
MSG
  exit 3
fi
exec build/r2/pomctl up --data "$DATA" --mount "$MNT"
