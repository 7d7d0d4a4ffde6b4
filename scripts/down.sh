#!/usr/bin/env bash
# Stops what scripts/up.sh started (unmounts first): `pomctl down`.
# usage: scripts/down.sh [DATA_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
exec build/cli/pomctl down --data "${1:-$HOME/.pomegranate}"
