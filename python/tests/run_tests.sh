#!/bin/bash
# run_tests.sh pytest BUILD  -- the binding's pytest suite (python/tests)
#     against a `pomctl up` cluster, with the package of the source tree and
#     BUILD's libpomegranate (no install needed).
# run_tests.sh install BUILD -- `pip install --target` of python/ (offline,
#     no build isolation, no dependencies fetched) and `cmake --install` of
#     BUILD into a temporary prefix; then `import pomegranate` from the
#     installed package must load the installed library, found through its
#     pkg-config file.
# The interpreter is the first of /usr/bin/python3 (Debian's python3-cffi,
# python3-pytest, python3-pip: scripts/install-deps.sh) and python3 on PATH
# that has the modules the mode needs.
set -u
MODE=$1
BUILD=$(realpath "$2")
SRC=$(cd "$(dirname "$0")/.." && pwd)

case "$MODE" in
    pytest) need="cffi pytest" ;;
    install) need="cffi pip setuptools wheel" ;;
    *) echo "usage: run_tests.sh pytest|install BUILD" >&2; exit 2 ;;
esac
PY=
for p in /usr/bin/python3 "$(command -v python3)"; do
    [ -x "$p" ] || continue
    # find_spec, not import: setuptools refuses to be imported after pip.
    if "$p" -c 'import importlib.util as u, sys
sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))' $need 2>/dev/null; then
        PY=$p
        break
    fi
done
if [ -z "$PY" ]; then
    echo "FAIL: no python3 with $need: run scripts/install-deps.sh"
    exit 1
fi
echo "python: $PY ($("$PY" --version 2>&1))"

if [ "$MODE" = pytest ]; then
    export POMCTL=$BUILD/cli/pomctl POMEGRANATE_LIB=$BUILD/client/libpomegranate.so.0
    export PYTHONDONTWRITEBYTECODE=1
    # -p no:cacheprovider: nothing written into the source tree; an exception
    # in a finaliser (__del__ closing a handle) fails the run.
    exec "$PY" -m pytest -p no:cacheprovider -v -W error::pytest.PytestUnraisableExceptionWarning \
        "$SRC/tests"
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/pom-pyinst.XXXXXX")
trap 'rm -rf "$T"' EXIT
# A copy: setuptools builds in the source folder (build/, *.egg-info).
cp -r "$SRC" "$T/src"
rm -rf "$T/src/tests"
if ! PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip install --quiet --root-user-action=ignore \
        --no-deps --no-build-isolation --no-index --target "$T/site" "$T/src"; then
    echo "FAIL: pip install --target of python/"
    exit 1
fi
if ! cmake --install "$BUILD" --prefix "$T/prefix" >"$T/install.log" 2>&1; then
    cat "$T/install.log"
    echo "FAIL: cmake --install $BUILD"
    exit 1
fi
PC=$(find "$T/prefix" -name pomegranate.pc)
out=$(cd / && env -u POMEGRANATE_LIB PYTHONPATH="$T/site" PKG_CONFIG_PATH="$(dirname "$PC")" \
    "$PY" -c 'import pomegranate; pomegranate.load_library(); print(pomegranate.__file__); print(pomegranate.library_path())' 2>&1)
echo "$out"
fails=0
echo "$out" | sed -n 1p | grep -q "^$T/site/pomegranate/__init__.py$" &&
    echo "ok: import pomegranate from the pip --target folder" ||
    { echo "FAIL: the package did not come from $T/site"; fails=1; }
echo "$out" | sed -n 2p | grep -q "^$T/prefix/.*libpomegranate.so.0$" &&
    echo "ok: the installed library found through pkg-config" ||
    { echo "FAIL: the library did not come from $T/prefix"; fails=1; }
exit $fails
