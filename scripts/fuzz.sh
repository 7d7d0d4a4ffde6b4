#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz in build-fuzz/ with clang
# (ASan + UBSan + coverage) and runs each for a short while, starting from
# its committed seed corpus (tests/fuzz/corpus/<target>; new inputs go to
# build-fuzz/fuzz-work/<target>, never into the tree).
#
# usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 25)
#
# Prints, per target, the executions it ran and "no crash"; on a crash,
# timeout or leak the input is kept in build-fuzz/fuzz-crashes/<target>/
# (replay: build-fuzz/tests/fuzz/<target> FILE) and the script exits 1
# after running the other targets.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS=${1:-25}
JOBS=$(nproc 2>/dev/null || echo 2)
[ "$JOBS" -gt 2 ] || JOBS=2
if ! command -v clang >/dev/null || ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang is missing (scripts/install-deps.sh installs it)" >&2
  exit 1
fi

if [ ! -f build-fuzz/CMakeCache.txt ]; then
  CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPOM_FUZZ=ON -DPOM_SANITIZE=address,undefined >/dev/null
fi
cmake --build build-fuzz -j"$JOBS" --target fuzz_all

# The MDSL target opens a LevelDB index per input: keep it in memory.
FUZZ_TMP=${TMPDIR:-/tmp}
[ -w /dev/shm ] && FUZZ_TMP=/dev/shm
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}

failed=0
total=0
for bin in build-fuzz/tests/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  t=$(basename "$bin")
  corpus=tests/fuzz/corpus/${t#fuzz_}
  [ -d "$corpus" ] || corpus=${corpus%_svc} # fuzz_rpc_svc shares rpc's seeds
  work=build-fuzz/fuzz-work/$t
  crashes=build-fuzz/fuzz-crashes/$t
  log=build-fuzz/fuzz-work/$t.log
  mkdir -p "$work" "$crashes"
  [ -d "$corpus" ] && cp -n "$corpus"/* "$work"/ 2>/dev/null || true
  rc=0
  # -close_fd_mask=2: the daemons' own error logs (corrupt records are
  # logged) would drown the output; sanitizer reports still get through.
  TMPDIR=$FUZZ_TMP "$bin" -max_total_time="$SECS" -timeout=20 -print_final_stats=1 \
    -close_fd_mask=2 -artifact_prefix="$crashes/" "$work" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  total=$((total + ${execs:-0}))
  if [ "$rc" -eq 0 ]; then
    printf '%-16s %10s executions in %ss, no crash\n' "$t" "${execs:-?}" "$SECS"
  else
    failed=1
    printf '%-16s CRASH (exit %s) after %s executions; input kept in %s:\n' \
      "$t" "$rc" "${execs:-?}" "$crashes"
    ls -1 "$crashes" | sed 's/^/    /'
    grep -E 'ERROR|SUMMARY|runtime error|Deadly|timeout' "$log" | head -5 | sed 's/^/    /'
  fi
done
echo "fuzz: $total executions in all"
exit "$failed"
