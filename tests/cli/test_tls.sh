#!/bin/bash
# test_tls.sh POMCTL AUTH_PROBE -- TLS between hosts (docs/security.md
# "TLS") end to end: a CA and certificates made with openssl(1) in a
# temporary folder; pom-r2, pom-mdsl and pom-mds started with a cluster
# key and --tls-cert/--tls-key/--tls-ca (so MDS -> MDSL and every site ->
# R2 run over TLS too); then:
#   - pomctl and the client library (auth_probe: open, create, getattr)
#     with the CA, a client certificate and the key work;
#   - a plain client is refused with "TLS required";
#   - a client certificate of another CA is refused, and R2 logs it;
#   - a good certificate without the key is refused ("wants a key"): the
#     key handshake still runs inside TLS;
#   - a server whose certificate does not name the address dialled is
#     refused by the client (server identity), and so is a plain server;
#   - the bytes of a pomctl session through a TCP tap (tcp_tap.py) never
#     show the fs name it creates, while through the same tap to a plain
#     R2 they do;
#   - a daemon given only some of the three TLS flags refuses to start.
# Exit 77 (skip) when the daemons, openssl(1) or python3 are missing.
set -u

POMCTL=$(realpath "$1")
PROBE=$(realpath "$2")
HERE=$(dirname "$(realpath "$0")")
BIN=$(dirname "$POMCTL")
R2BIN=$BIN/../r2/pom-r2
MDSBIN=$BIN/../mds/pom-mds
MDSLBIN=$BIN/../mdsl/pom-mdsl
for x in "$R2BIN" "$MDSBIN" "$MDSLBIN"; do
    [ -x "$x" ] || { echo "SKIP: $x not built"; exit 77; }
done
command -v openssl >/dev/null && command -v python3 >/dev/null ||
    { echo "SKIP: needs openssl and python3"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/pom-tls.XXXXXX")
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
cd "$T" || exit 1

FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }

# ---- certificates --------------------------------------------------------------
mkca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$1.key" -subj "/CN=$1" -days 2 -out "$1.crt" 2>/dev/null
}
# mkcert NAME CA SUBJECTALTNAME
mkcert() {
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$1.key" -subj "/CN=$1" -out "$1.csr" 2>/dev/null &&
        printf 'subjectAltName=%s\n' "$3" >"$1.ext" &&
        openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial \
            -days 2 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}
mkca ca && mkca rogue && mkcert site ca "IP:127.0.0.1,DNS:localhost" &&
    mkcert client ca "DNS:pomctl" && mkcert other ca "DNS:elsewhere" &&
    mkcert bad rogue "IP:127.0.0.1" || { echo "FAIL: openssl could not make certificates"; exit 1; }
SITE_TLS=(--tls-ca ca.crt --tls-cert site.crt --tls-key site.key)
CLI_TLS=(--tls-ca ca.crt --tls-cert client.crt --tls-key client.key)

# start NAME CMD...: runs a daemon writing NAME.port; waits for the port.
start() {
    local name=$1
    shift
    "$@" --port-file "$name.port" >"$name.log" 2>&1 &
    PIDS+=($!)
    for i in $(seq 1 100); do [ -s "$name.port" ] && return 0; sleep 0.1; done
    echo "FAIL: $name did not start:"
    cat "$name.log"
    exit 1
}

# ---- a cluster with TLS ----------------------------------------------------------
start r2 "$R2BIN" --data r2 --init-key k.key --listen 127.0.0.1:0 "${SITE_TLS[@]}"
R2=127.0.0.1:$(cat r2.port)
start mdsl "$MDSLBIN" --dir mdsl --key-file k.key --r2 "$R2" "${SITE_TLS[@]}"
start mds "$MDSBIN" --key-file k.key --r2 "$R2" "${SITE_TLS[@]}"
CTL=("$POMCTL" --r2 "$R2" --key-file k.key)

for i in $(seq 1 100); do
    "${CTL[@]}" "${CLI_TLS[@]}" status 2>/dev/null | grep -q "1 mds, 1 mdsl" && break
    sleep 0.1
done
out=$("${CTL[@]}" "${CLI_TLS[@]}" fs create tlsfs --blob-path "$T/blobs" 2>&1) &&
    pass "pomctl over TLS: fs create" || fail "fs create over TLS: $out"
out=$("$PROBE" "$R2" tlsfs k.key ca.crt client.crt client.key 2>probe.err)
[ "$out" = ok ] && pass "library over TLS: open, create, getattr (MDS and MDSL over TLS)" ||
    fail "auth_probe over TLS: $out"
out=$("${CTL[@]}" "${CLI_TLS[@]}" fsck --fs tlsfs 2>&1) && pass "pomctl fsck over TLS" ||
    fail "fsck over TLS: $out"

# ---- refusals ----------------------------------------------------------------------
# refused DESC PATTERN CMD...: CMD must fail and say PATTERN.
refused() {
    local desc=$1 pat=$2
    shift 2
    local out
    out=$("$@" 2>&1)
    local rc=$?
    if [ $rc -ne 0 ] && echo "$out" | grep -q "$pat"; then
        pass "$desc refused"
    else
        fail "$desc: exit $rc, output: $out"
    fi
}
refused "a plain pomctl" "TLS required" "${CTL[@]}" fs list
refused "a plain library client" "EPROTONOSUPPORT" "$PROBE" "$R2" tlsfs k.key
refused "a certificate of another CA" "TLS with .* failed" \
    "${CTL[@]}" --tls-ca ca.crt --tls-cert bad.crt --tls-key bad.key fs list
refused "the library with a certificate of another CA" "EKEYREJECTED" \
    "$PROBE" "$R2" tlsfs k.key ca.crt bad.crt bad.key
grep -q "TLS handshake with .* failed" r2.log && pass "R2 logged the failed TLS handshake" ||
    fail "no TLS refusal in the R2 log"
refused "a good certificate without the key" "wants a key" \
    "$POMCTL" --r2 "$R2" "${CLI_TLS[@]}" fs list
refused "a client without the CA's trust" "TLS with .* failed" \
    "${CTL[@]}" --tls-ca rogue.crt --tls-cert client.crt --tls-key client.key fs list

# A server with a certificate of the CA that names another host.
start r2o "$R2BIN" --data r2o --key-file k.key --listen 127.0.0.1:0 \
    --tls-ca ca.crt --tls-cert other.crt --tls-key other.key
refused "a server whose certificate names another host" "TLS with .* failed" \
    "$POMCTL" --r2 "127.0.0.1:$(cat r2o.port)" --key-file k.key "${CLI_TLS[@]}" fs list

# ---- the wire -------------------------------------------------------------------------
# tap NAME TARGET: a tcp_tap.py in front of TARGET, capturing to NAME.cap.
tap() {
    python3 "$HERE/tcp_tap.py" "$1.port" "$2" "$1.cap" &
    PIDS+=($!)
    for i in $(seq 1 100); do [ -s "$1.port" ] && return 0; sleep 0.1; done
    echo "FAIL: tcp_tap.py did not start"
    exit 1
}
# fs list: any R2 answers it, so the call is not sent on to a leader's
# address past the tap; the reply carries the name.
NAME=canary$RANDOM$RANDOM
out=$("${CTL[@]}" "${CLI_TLS[@]}" fs create "$NAME" --blob-path "$T/blobs2" 2>&1) ||
    fail "fs create $NAME: $out"
tap tap1 "$R2"
"$POMCTL" --r2 "127.0.0.1:$(cat tap1.port)" --key-file k.key "${CLI_TLS[@]}" fs list |
    grep -q "$NAME" && pass "fs list through the tap" || fail "fs list through the tap"
[ -s tap1.cap ] && ! grep -qa "$NAME" tap1.cap &&
    pass "no plaintext on the wire ($(stat -c %s tap1.cap) bytes, no '$NAME')" ||
    fail "TLS capture: $(stat -c %s tap1.cap) bytes, name found: $(grep -ca "$NAME" tap1.cap)"
# The same through a plain R2: the check above can fail.
start r2p "$R2BIN" --data r2p --key-file k.key --listen 127.0.0.1:0
R2P=127.0.0.1:$(cat r2p.port)
"$POMCTL" --r2 "$R2P" --key-file k.key fs create "$NAME" --blob-path "$T/blobs3" >/dev/null 2>&1
tap tap2 "$R2P"
"$POMCTL" --r2 "127.0.0.1:$(cat tap2.port)" --key-file k.key fs list >/dev/null 2>&1
grep -qa "$NAME" tap2.cap && pass "without TLS the tap sees '$NAME'" ||
    fail "the tap missed the plain name"
refused "a TLS client to a plain R2" "TLS with .* failed" \
    "$POMCTL" --r2 "$R2P" --key-file k.key "${CLI_TLS[@]}" fs list

# ---- flags ---------------------------------------------------------------------------
out=$("$R2BIN" --data r2x --key-file k.key --tls-cert site.crt 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q "TLS wants all three" &&
    pass "a daemon with only --tls-cert refuses to start" || fail "partial TLS flags: $out"
out=$("$R2BIN" --data r2x --key-file k.key --tls-ca ca.crt --tls-cert site.crt \
    --tls-key client.key 2>&1)
[ $? -ne 0 ] && echo "$out" | grep -q "cannot use" &&
    pass "a daemon with a key not matching its certificate refuses to start" ||
    fail "mismatched TLS key: $out"

# The daemons stayed up over TLS (the probes' client sites may show failed:
# a library client does not leave R2 on close).
out=$("${CTL[@]}" "${CLI_TLS[@]}" status 2>&1)
echo "$out" | grep -q "1 mds, 1 mdsl" && ! echo "$out" | grep -qE "\((mds|mdsl|r2) [^)]*\) is failed" &&
    pass "R2, MDS and MDSL up over TLS" || fail "status: $out"

if [ $FAILS -ne 0 ]; then
    echo "$FAILS check(s) failed; logs:"
    tail -n 20 ./*.log
    exit 1
fi
echo "all passed"
