#!/usr/bin/env bash
# Sets up and runs a one-machine Pomegranate cluster (R2 with the embedded
# store, an MDSL, an MDS; data, logs and pids under DATA_DIR) and mounts it
# at MOUNT_DIR: installs what is missing and builds on first use, then runs
# `pomctl up --data DATA_DIR --mount MOUNT_DIR`. Stop it with scripts/down.sh.
#
# usage: scripts/up.sh [DATA_DIR] [MOUNT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-$HOME/.pomegranate}
MNT=${2:-/tmp/pomfs}

if [ ! -x build/cli/pomctl ] || [ ! -x build/mds/pom-mds ] || [ ! -x build/mdsl/pom-mdsl ]; then
  bash scripts/install-deps.sh
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j"$(nproc)"
fi
mkdir -p "$MNT"
set +e
build/cli/pomctl up --data "$DATA" --mount "$MNT"
rc=$?
set -e
if [ $rc -eq 5 ]; then
  cat >&2 <<MSG
up.sh: the cluster runs (see: build/cli/pomctl --data $DATA status), but the
FUSE client pomfs is not built yet, so nothing is mounted at $MNT.
Stop the cluster with: scripts/down.sh $DATA
MSG
fi
exit $rc
