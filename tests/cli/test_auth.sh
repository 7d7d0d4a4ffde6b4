#!/bin/bash
# test_auth.sh POMCTL AUTH_PROBE -- keys and authenticated connections end
# to end (docs/security.md), on a `pomctl up` cluster in a temporary folder:
#   - as user nobody, without a key: the client library (auth_probe) and
#     `pomctl --r2 ADDR` fs list, fs drop, fsck and path are refused with
#     "authentication failed"; with a copy of the cluster key they work;
#   - a wrong cluster key is refused and the server logs it;
#   - a client key of fs A opens A, not fs B, and administers nothing;
#   - after `pomctl fs key A --rotate` the old client key is refused for new
#     connections and the new one works;
#   - pom-r2 --init-key makes its own key file (0600) and proves it;
#   - a daemon refuses --listen on a non-loopback address without a key.
# Exit 77 (skip) when pom-r2/pom-mds are not built or user nobody cannot
# be switched to.
set -u

POMCTL=$(realpath "$1")
PROBE=$(realpath "$2")
BIN=$(dirname "$POMCTL")
R2BIN=$BIN/../r2/pom-r2
if [ ! -x "$R2BIN" ] || [ ! -x "$BIN/../mds/pom-mds" ]; then
    echo "SKIP: pom-r2 / pom-mds not built"
    exit 77
fi
if [ "$(id -u)" != 0 ] || ! setpriv --reuid=nobody --regid=nogroup --clear-groups true; then
    echo "SKIP: needs root to run commands as user nobody"
    exit 77
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/pom-auth.XXXXXX")
chmod 755 "$T"
D=$T/data
export HOME=$T/home
mkdir -p "$HOME"
unset POM_R2 POM_BIN_DIR

cleanup() {
    "$POMCTL" down --data "$D" >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT

FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }

# as_nobody CMD...: runs CMD as user nobody, outside any data folder.
as_nobody() {
    (cd / && env -u POM_R2 HOME=/nonexistent setpriv --reuid=nobody --regid=nogroup \
        --clear-groups "$@")
}

# refused DESC CMD...: CMD must fail, saying "authentication failed".
refused() {
    local desc=$1
    shift
    local out
    out=$("$@" 2>&1)
    local rc=$?
    if [ $rc -ne 0 ] && echo "$out" | grep -q "authentication failed"; then
        pass "$desc refused"
    else
        fail "$desc: exit $rc, output: $out"
    fi
}

# works DESC CMD...: CMD must exit 0.
works() {
    local desc=$1
    shift
    local out
    out=$("$@" 2>&1)
    local rc=$?
    if [ $rc -eq 0 ]; then pass "$desc"; else fail "$desc: exit $rc, output: $out"; fi
}

"$POMCTL" up --data "$D" >"$T/up.log" 2>&1 || { cat "$T/up.log"; echo "FAIL: pomctl up"; exit 1; }
R2=$(cat "$D/r2.addr")
KEY=$D/cluster.key
[ "$(stat -c %a "$KEY")" = 600 ] && pass "cluster key $KEY is mode 0600" ||
    fail "cluster key mode $(stat -c %a "$KEY")"

# ---- no key, as nobody -------------------------------------------------------
refused "library open as nobody without a key" as_nobody "$PROBE" "$R2" pomfs
refused "pomctl fs list as nobody" as_nobody "$POMCTL" --r2 "$R2" fs list
refused "pomctl fs drop as nobody" as_nobody "$POMCTL" --r2 "$R2" fs drop --force pomfs
refused "pomctl fsck as nobody" as_nobody "$POMCTL" --r2 "$R2" fsck --fs pomfs
refused "pomctl path as nobody" as_nobody "$POMCTL" --r2 "$R2" path --fs pomfs 1
"$POMCTL" --data "$D" fs list | grep -q pomfs && pass "pomfs survived" || fail "pomfs is gone"
grep -q "authentication failed" "$D/logs/pom-r2.log" && pass "R2 logged the refusals" ||
    fail "no refusal in the R2 log"

# ---- the same with the key -----------------------------------------------------
install -m 600 -o nobody "$KEY" "$T/nobody.key"
works "library open as nobody with the cluster key" as_nobody "$PROBE" "$R2" pomfs "$T/nobody.key"
works "pomctl fs list as nobody with the key" \
    as_nobody "$POMCTL" --r2 "$R2" --key-file "$T/nobody.key" fs list
works "pomctl path with the key" "$POMCTL" --data "$D" path --fs pomfs 1
works "pomctl fsck with the key" "$POMCTL" --data "$D" fsck --fs pomfs

# ---- a wrong key, and a key file others may read ------------------------------------
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/wrong.key"; echo >>"$T/wrong.key")
refused "a wrong cluster key" "$POMCTL" --r2 "$R2" --key-file "$T/wrong.key" fs list
out=$("$POMCTL" --r2 "$R2" --key-file "$T/wrong.key" fs list 2>&1)
echo "$out" | grep -q "wrong cluster key at" && pass "the error names the key" ||
    fail "wrong-key message: $out"
grep -q "wrong cluster key" "$D/logs/pom-r2.log" && pass "R2 logged the wrong key" ||
    fail "R2 did not log the wrong key"
install -m 644 "$KEY" "$T/open.key"
out=$("$POMCTL" --r2 "$R2" --key-file "$T/open.key" fs list 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "chmod 600" && pass "a key file others may read is refused" ||
    fail "mode 0644 key file: $out"

# ---- client keys -------------------------------------------------------------------
works "fs create other" "$POMCTL" --data "$D" fs create other --blob-path "$T/blobs-other"
works "fs key pomfs" "$POMCTL" --data "$D" fs key pomfs --out "$T/a.key"
grep -q "^client 1 0 [0-9a-f]\{64\}$" "$T/a.key" && pass "client key file format" ||
    fail "client key file: $(cat "$T/a.key")"
works "client key of pomfs opens pomfs" "$PROBE" "$R2" pomfs "$T/a.key"
out=$("$PROBE" "$R2" other "$T/a.key" 2>&1)
echo "$out" | grep -q "EACCES" && pass "client key of pomfs cannot open other" ||
    fail "client key of pomfs on other: $out"
for cmd in "fs drop --force other" "fs create third" "fs key pomfs --rotate"; do
    out=$("$POMCTL" --r2 "$R2" --key-file "$T/a.key" $cmd 2>&1)
    if [ $? -ne 0 ] && echo "$out" | grep -q "Permission denied"; then
        pass "client key cannot $cmd"
    else
        fail "client key ran $cmd: $out"
    fi
done

# ---- rotation ----------------------------------------------------------------------
works "fs key pomfs --rotate" "$POMCTL" --data "$D" fs key pomfs --rotate --out "$T/b.key"
grep -q "^client 1 1 " "$T/b.key" && pass "rotation bumped the generation" ||
    fail "rotated key file: $(cat "$T/b.key")"
# The MDS learns the generation from R2's view within a heartbeat or so:
# wait (bounded) for the old key to stop working, then it must stay refused.
for i in $(seq 1 100); do
    "$PROBE" "$R2" pomfs "$T/a.key" >/dev/null 2>&1 || break
    sleep 0.1
done
refused "the rotated-out key" "$PROBE" "$R2" pomfs "$T/a.key"
works "the new key" "$PROBE" "$R2" pomfs "$T/b.key"

# ---- a daemon that makes its own key ------------------------------------------------
"$R2BIN" --data "$T/r2y" --init-key "$T/y.key" --listen 127.0.0.1:0 --port-file "$T/y.port" \
    >"$T/r2y.log" 2>&1 &
YPID=$!
for i in $(seq 1 100); do [ -s "$T/y.port" ] && break; sleep 0.1; done
if [ -s "$T/y.port" ]; then
    YADDR=127.0.0.1:$(cat "$T/y.port")
    [ "$(stat -c %a "$T/y.key")" = 600 ] && pass "--init-key wrote a 0600 key" ||
        fail "--init-key key mode $(stat -c %a "$T/y.key")"
    works "pomctl with the --init-key key" "$POMCTL" --r2 "$YADDR" --key-file "$T/y.key" fs list
    refused "pomctl with another cluster's key" "$POMCTL" --r2 "$YADDR" --key-file "$KEY" fs list
else
    fail "pom-r2 --init-key did not start: $(cat "$T/r2y.log")"
fi
kill "$YPID" 2>/dev/null
wait "$YPID" 2>/dev/null

# ---- the mount `pomctl up --mount` makes, as nobody ---------------------------------
# Root's mount serves every user (allow_other, default_permissions): nobody
# works with POSIX permissions and nothing more.
M=$T/m
if [ -c /dev/fuse ] && "$POMCTL" up --data "$D" --mount "$M" >"$T/upm.log" 2>&1; then
    mkdir "$M/pub" && chmod 1777 "$M/pub"
    echo secret >"$M/secret" && chmod 600 "$M/secret"
    echo root >"$M/pub/root" && chmod 644 "$M/pub/root"
    works "nobody writes into a 1777 folder of the mount" \
        as_nobody bash -c "echo n >'$M/pub/n' && [ \"\$(cat '$M/pub/n')\" = n ]"
    [ "$(stat -c %U "$M/pub/n" 2>/dev/null)" = nobody ] && pass "the file is nobody's" ||
        fail "owner of pub/n: $(stat -c %U "$M/pub/n" 2>&1)"
    out=$(as_nobody cat "$M/secret" 2>&1)
    [ $? -ne 0 ] && echo "$out" | grep -q "Permission denied" &&
        pass "nobody gets EACCES on root's 0600 file" || fail "nobody read root's 0600 file: $out"
    out=$(as_nobody rm -f "$M/pub/root" 2>&1)
    [ -e "$M/pub/root" ] && pass "nobody cannot remove root's file from the sticky folder" ||
        fail "nobody removed root's file: $out"
    out=$(as_nobody bash -c "echo x >>'$M/pub/root'" 2>&1)
    [ "$(cat "$M/pub/root")" = root ] && pass "nobody cannot write root's 0644 file" ||
        fail "nobody wrote root's 0644 file: $out"
else
    echo "SKIP: the mount part (no /dev/fuse or pomctl up --mount failed: $(tail -n 3 "$T/upm.log" 2>/dev/null))"
fi

# ---- binding ---------------------------------------------------------------------
out=$("$R2BIN" --data "$T/r2x" --listen 0.0.0.0:0 2>&1)
[ $? -eq 2 ] && echo "$out" | grep -q "without a key" &&
    pass "pom-r2 refuses a non-loopback --listen without a key" || fail "pom-r2 --listen 0.0.0.0: $out"

if [ $FAILS -ne 0 ]; then
    echo "$FAILS check(s) failed; logs:"
    tail -n 20 "$D"/logs/*.log
    exit 1
fi
echo "all passed"
