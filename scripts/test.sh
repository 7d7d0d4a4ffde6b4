#!/usr/bin/env bash
# The project's one test command (README, and CI through .ci/run):
# installs what is missing from Debian's packages, builds twice (optimised,
# and with AddressSanitizer + UndefinedBehaviorSanitizer), runs every CTest
# test on the optimised build and the unit tests on the sanitizer build,
# then checks that the benchmarks still run (--quick; speed is not judged).
#
# usage: scripts/test.sh [--long] [--no-asan] [--no-bench] [--no-fuzz]
#   --long     also run the long suites (label `long`), with bigger sizes
#   --no-fuzz  skip the short libFuzzer runs (scripts/fuzz.sh; FUZZ_SECS=25)
set -euo pipefail
cd "$(dirname "$0")/.."

LONG=0 ASAN=1 BENCH=1 FUZZ=1
for a in "$@"; do
  case "$a" in
    --long) LONG=1 ;;
    --no-asan) ASAN=0 ;;
    --no-bench) BENCH=0 ;;
    --no-fuzz) FUZZ=0 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "test.sh: unknown option $a" >&2; exit 2 ;;
  esac
done

JOBS=$(nproc 2>/dev/null || echo 2)
step() { printf '\n==== %s (%s)\n' "$*" "$(date -u +%T)"; }

step "dependencies"
if [ "$LONG" = 1 ]; then bash scripts/install-deps.sh --long; else bash scripts/install-deps.sh; fi

step "build (RelWithDebInfo) in build/"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$JOBS"

EXCLUDE=()
[ "$LONG" = 1 ] || EXCLUDE=(-LE long)
export POM_TEST_LONG=$LONG

step "tests (optimised build)"
(cd build && ctest --output-on-failure -j"$JOBS" --timeout 900 "${EXCLUDE[@]}")
# The suites' own verdict lines, which ctest keeps in its log.
grep -hE "^(pjdfstest pomfs:|kills: |fault runs: |fsck runs: |created [0-9]+ files in one|ls -f of [0-9]+ entries|WORKLOAD )" \
  build/Testing/Temporary/LastTest.log | sed 's/^/  /' || true

if [ "$ASAN" = 1 ]; then
  step "build with -fsanitize=address,undefined in build-asan/"
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
        -DPOM_SANITIZE=address,undefined >/dev/null
  cmake --build build-asan -j"$JOBS"
  step "unit tests and daemon tests under ASan + UBSan"
  # Property tests scale themselves down under the sanitizers (POM_TEST_SCALE).
  (cd build-asan && POM_TEST_SCALE=${POM_TEST_SCALE:-0.25} \
     ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
     ctest --output-on-failure -j"$JOBS" --timeout 900 -L "unit|asan")
fi

if [ "$FUZZ" = 1 ]; then
  step "fuzzing: each libFuzzer target ${FUZZ_SECS:-25} s from its seed corpus (build-fuzz/, clang)"
  bash scripts/fuzz.sh "${FUZZ_SECS:-25}"
fi

if [ "$BENCH" = 1 ]; then
  step "benchmarks still run (--quick; numbers are informative only)"
  for b in build/bench/bench_*; do
    [ -x "$b" ] || continue
    # bench_dist needs its cluster: bench/run.sh --quick (below) runs it.
    [ "${b##*/}" = bench_dist ] && continue
    echo "-- $b --quick"
    "$b" --quick
  done
  # The file-system suite against its references (docs/bench.md); a
  # reference that cannot start is reported and skipped, pomfs must work.
  echo "-- bench/run.sh --quick"
  bash bench/run.sh --quick --build build --no-build --out build/bench-results
fi

step "all tests passed"
