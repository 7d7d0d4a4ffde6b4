#!/usr/bin/env bash
# Installs, from Debian's packages, whatever the build and the tests need and the
# machine lacks. Idempotent: a second run installs nothing and says so.
# Needs root (or sudo) only when something is missing.
#   --long  also what only the long tests use (the single-node Ceph of
#           test_pomfs_rados: ceph-mon, ceph-osd)
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libfuse3-dev fuse3 attr acl
  libleveldb-dev
  libthrift-dev thrift-compiler libboost-dev
  libxxhash-dev
  liburing-dev
  librados-dev
  libzookeeper-mt-dev zookeeper
  libcmocka-dev libssl-dev
  clang libclang-rt-14-dev
  procps psmisc util-linux e2fsprogs python3 gdb
  python3-cffi python3-pytest python3-pip
  rsync sqlite3 curl
  libmicrohttpd-dev prometheus
  fio fsmark redis-server redis-tools gnuplot-nox
  moosefs-master moosefs-chunkserver moosefs-client
)
[ "${1:-}" = --long ] && PKGS+=(ceph-mon ceph-osd)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} Debian packages already installed"
  exit 0
fi

echo "install-deps: installing missing Debian packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-deps: error: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get update; then
  echo "install-deps: error: apt-get update failed (no network to Debian's mirrors?)" >&2
  exit 1
fi
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
  echo "install-deps: error: apt-get install failed for: ${missing[*]}" >&2
  exit 1
fi
echo "install-deps: done"
