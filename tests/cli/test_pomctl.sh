#!/bin/bash
# test_pomctl.sh POMCTL -- pomctl end to end, in a fresh temporary folder:
#   usage errors exit 2; an unreachable R2 exits 3 with the message;
#   `pomctl up` starts R2 + MDSL (+ MDS when built) and `status` says
#   healthy; sites, ring show, site stat, fs create/list/stat/drop (JSON
#   parsed with python3); `up` again is idempotent; `site drain`/`remove` of an MDSL
#   are refused while it holds the slices (the only MDSL); `site drain` of
#   the MDS makes status degraded (4); `down` leaves no process behind;
#   a pid file whose pid now runs another program is left alone; `up
#   --mount` exits 5 without pomfs; `up --mdsl 3` starts three MDSL that
#   all register and join ring 1, the fs keeps its files across a `down`
#   and `up` of them all (with pomfs: 40 directories written through the
#   mount, every MDSL then holding slices), and `down` stops them all.
# Exit 77 (skip) only when pom-r2 is not built.
set -u

POMCTL=$(realpath "$1")
BIN=$(dirname "$POMCTL")
find_exe() { # same order as pomctl: $POM_BIN_DIR, pomctl's folder, build tree
    local d
    for d in "${POM_BIN_DIR:-}" "$BIN" "$BIN/../mdsl" "$BIN/../mds" "$BIN/../r2" "$BIN/../fuse"; do
        [ -n "$d" ] && [ -x "$d/$1" ] && [ -f "$d/$1" ] && { echo "$d/$1"; return 0; }
    done
    return 1
}
if ! find_exe pom-r2 >/dev/null; then
    echo "SKIP: pom-r2 is not built (looked next to $POMCTL)"
    exit 77
fi
# pomctl starts pom-mds only once it can register with R2 (--r2).
HAVE_MDS=0
MDS=$(find_exe pom-mds) && "$MDS" --help 2>&1 | grep -q -- "--r2" && HAVE_MDS=1
HAVE_FS=0; find_exe pomfs >/dev/null && HAVE_FS=1

T=$(mktemp -d "${TMPDIR:-/tmp}/pomctl-test.XXXXXX")
export HOME=$T/home
mkdir -p "$HOME"
D=$HOME/.pomegranate # the default folder: pomctl without --data finds it
unset POM_R2
PIDS=""      # every daemon pid seen in a pid file, for the trap
SLEEPER=""

# A process is alive while /proc has it in a state other than zombie/dead:
# a stopped daemon stays a zombie until its new parent (init) reaps it.
alive() {
    local st
    st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

note_pids() {
    local f
    for f in "$1"/run/*.pid; do
        [ -f "$f" ] && PIDS="$PIDS $(head -n1 "$f")"
    done
    PIDS=$(echo $PIDS | tr ' ' '\n' | sort -un | tr '\n' ' ')
}

cleanup() {
    local dd p
    for dd in "$D" "$T/data2" "$T/other"; do
        [ -d "$dd" ] && note_pids "$dd" && "$POMCTL" down --data "$dd" >/dev/null 2>&1
    done
    # Leftovers: only pids we saw, and only while their command line still
    # names our folder (a reused pid is someone else's).
    for p in $PIDS $SLEEPER; do
        if alive "$p" && tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q "$T"; then
            echo "cleanup: killing leftover pid $p"
            kill -9 "$p" 2>/dev/null
        fi
    done
    [ -n "$SLEEPER" ] && kill -9 "$SLEEPER" 2>/dev/null
    mountpoint -q "$T/mnt" 2>/dev/null && fusermount3 -uz "$T/mnt"
    rm -rf "$T"
}
trap cleanup EXIT

FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
pass() { echo "ok: $*"; }

# expect CODE DESCRIPTION -- COMMAND...: runs it, keeps stdout in $OUT and
# stderr in $ERR, checks the exit code.
expect() {
    local want=$1 what=$2
    shift 3
    "$@" > "$T/out" 2> "$T/err"
    local got=$?
    OUT=$(cat "$T/out"); ERR=$(cat "$T/err")
    if [ "$got" -eq "$want" ]; then
        pass "$what (exit $got)"
    else
        fail "$what: exit $got, want $want"
        echo "--- stdout:"; cat "$T/out"; echo "--- stderr:"; cat "$T/err"
    fi
}
# py 'EXPR using j' : evaluates a Python assertion on the JSON in $T/out.
py() {
    python3 -c "import json,sys; j=json.load(open('$T/out')); $1" || fail "JSON check: $1"
}

P=$POMCTL

echo "== usage errors (2)"
expect 2 "no command" -- $P
expect 2 "unknown command" -- $P frobnicate
expect 2 "unknown global option" -- $P --bogus status
expect 2 "bad --timeout" -- $P --timeout x status
expect 2 "bad --r2" -- $P --r2 nohostport status
expect 2 "bad fs name" -- $P fs create 'bad/name'
expect 2 "fs create without name" -- $P fs create
expect 2 "bad ring" -- $P ring show 7
expect 2 "bad site id" -- $P site drain abc
expect 2 "site without action" -- $P site 3
expect 2 "up with junk" -- $P up --frob
expect 2 "up --mdsl 0" -- $P up --mdsl 0
expect 2 "up --mdsl 17" -- $P up --mdsl=17
expect 2 "down takes no --mdsl" -- $P down --mdsl 2
expect 0 "--help" -- $P --help
expect 0 "fs --help" -- $P fs --help
echo "$OUT" | grep -q "fs create NAME" || fail "fs --help does not show fs create"

echo "== unreachable R2 (3)"
expect 3 "status, nothing listening" -- $P --r2 127.0.0.1:1 status
echo "$ERR" | grep -q "cannot reach R2 at 127.0.0.1:1: Connection refused" || fail "message: $ERR"
echo "$ERR" | grep -q "try: pomctl up" || fail "no hint in: $ERR"
expect 3 "--json fs list, nothing listening" -- $P --json --r2 127.0.0.1:1 fs list
py 'assert j["ok"] is False and j["exit"] == 3 and j["errno"] == "ECONNREFUSED"'
expect 3 "status, no address known" -- $P status

echo "== up"
expect 0 "up --data" -- $P up --data "$D"
note_pids "$D"
echo "$OUT"
if [ "$FAILS" -ne 0 ] && [ ! -s "$D/r2.addr" ]; then
    echo "up failed: the remaining checks need a cluster"
    exit 1
fi
echo "$OUT" | grep -q "pomctl down --data $D" || fail "up does not say how to stop"
[ -s "$D/r2.addr" ] || fail "no $D/r2.addr"
[ -s "$HOME/.pomegranate/r2.addr" ] || fail "no ~/.pomegranate/r2.addr"
[ -f "$D/run/pom-r2.pid" ] && [ -f "$D/run/pom-mdsl.pid" ] || fail "pid files missing"
[ -s "$D/logs/pom-r2.log" ] || fail "no R2 log"
# R2 itself, the MDSL, and the MDS when it is built.
WANT_SITES=$((2 + HAVE_MDS))

echo "== status"
expect 0 "status (address from ~/.pomegranate/r2.addr)" -- $P status
echo "$OUT"
echo "$OUT" | grep -q "verdict   healthy" || fail "status not healthy"
expect 0 "--data status" -- $P --data "$D" --json status
py "assert j['healthy'] is True, j
n = j['sites']['total']; print('sites registered:', n, j['sites']['by_type'])
assert n == $WANT_SITES, n
assert j['sites']['by_type']['mdsl'] == 1 and j['sites']['by_type']['mds'] == $HAVE_MDS
assert j['sites']['by_type']['r2'] == 1
assert j['sites']['by_state']['up'] == n and j['r2']['store'] == 'embedded'
assert j['fs_count'] >= 1"

echo "== a second cluster leaves the default folder's files alone"
cp "$D/r2.addr" "$T/addr.default"; cp "$D/cluster.key" "$T/key.default"
expect 0 "up --data other" -- $P up --data "$T/other"
note_pids "$T/other"
cmp -s "$D/r2.addr" "$T/addr.default" || fail "the other up rewrote ~/.pomegranate/r2.addr"
cmp -s "$D/cluster.key" "$T/key.default" || fail "the other up rewrote ~/.pomegranate/cluster.key"
cmp -s "$T/other/r2.addr" "$T/addr.default" && fail "both clusters have one address"
expect 0 "status (the default folder)" -- $P --json status
py "assert j['r2']['addr'] == open('$T/addr.default').read().strip(), j['r2']"
expect 0 "status --data other" -- $P --data "$T/other" --json status
py "assert j['r2']['addr'] == open('$T/other/r2.addr').read().strip(), j['r2']"
expect 0 "down --data other" -- $P down --data "$T/other"
expect 0 "status (the default cluster still runs)" -- $P status

echo "== sites"
expect 0 "sites" -- $P sites
echo "$OUT"
echo "$OUT" | grep -q "^ *ID  TYPE  ADDRESS" || fail "no sites header"
echo "$OUT" | grep -q "mdsl .* up" || fail "no mdsl up row"
expect 0 "sites --json" -- $P sites --json
py "s = j['sites']; assert len(s) == $WANT_SITES and all(x['state'] == 'up' for x in s), s
assert all(x['addr'].startswith('127.0.0.1:') for x in s)"

echo "== ring show"
expect 0 "ring show" -- $P ring show
echo "$OUT"
echo "$OUT" | grep -q "ring 1 (slices -> MDSL): version" || fail "no ring 1"
expect 0 "ring show 1 --json" -- $P --json ring show 1
py "r = j['rings']; assert len(r) == 1 and r[0]['ring'] == 1 and r[0]['version'] >= 1, r
assert len(r[0]['sites']) == 1 and abs(sum(x['share'] for x in r[0]['sites']) - 1) < 1e-9, r"

echo "== site stat (each MDSL's store, through its stat call)"
expect 2 "site stat bad id" -- $P site stat x
expect 2 "site stat two ids" -- $P site stat 1 2
expect 0 "site stat" -- $P site stat
echo "$OUT"
echo "$OUT" | grep -qE "^ *ID  ADDRESS .* SWEEPS  SWEEP OWED +UNDER-REPL +PULLED +STATUS" || fail "no site stat header"
echo "$OUT" | grep -q " ok$" || fail "no ok row in site stat"
expect 0 "site stat --json" -- $P --json site stat
py "m = j['mdsl']; assert j['ok'] is True and len(m) == 1, j
x = m[0]; assert x['reached'] is True and x['state'] == 'up' and x['failed'] is None, x
assert x['bytes'] >= x['live_bytes'] and x['tables'] >= 0 and x['prepared'] == 0, x
assert x['sweeps'] == 0 and x['sweep_owed'] == 0 and x['dropped_folders'] == 0, x
assert x['under_replicated'] is None and x['pulled_slices'] == 0, x  # one copy: no catch-up"
SID=$(python3 -c "import json; print(json.load(open('$T/out'))['mdsl'][0]['id'])")
expect 0 "site stat ID --json" -- $P --json site stat "$SID"
py "assert [x['id'] for x in j['mdsl']] == [$SID], j"
expect 1 "site stat of no such site" -- $P --json site stat 9999
py 'assert j["ok"] is False and j["exit"] == 1 and j["errno"] == "ENOENT"'
R2_ID=$($P --json sites | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin)["sites"] if s["type"] == "r2"][0])')
expect 1 "site stat of the R2 site" -- $P site stat "$R2_ID"
echo "$ERR" | grep -q "only an MDSL answers stat" || fail "message: $ERR"

echo "== fs round trip"
expect 0 "fs list --json (pomfs made by up)" -- $P --json fs list
py "assert [f['name'] for f in j['fs']] == ['pomfs'], j"
expect 0 "fs create t1" -- $P fs create t1 --blob-backend local --blob-path "$T/blobs-t1"
expect 0 "fs stat t1 --json" -- $P --json fs stat t1
py "f = j['fs']; assert f['name'] == 't1' and f['fsid'] > 0 and f['root_table'] > 0, f
assert f['blob'] == {'backend': 'local', 'path': '$T/blobs-t1'} and f['mounts'] == 0, f
assert f['created_ns'] > 0 and f['files'] == 0"
expect 0 "fs list --json" -- $P --json fs list
py "names = sorted(f['name'] for f in j['fs']); assert names == ['pomfs', 't1'], names
assert len(set(f['fsid'] for f in j['fs'])) == 2"
expect 0 "fs list" -- $P fs list
echo "$OUT"
expect 1 "fs create t1 again" -- $P fs create t1
echo "$ERR" | grep -q "File exists" || fail "message: $ERR"
expect 0 "fs drop t1" -- $P fs drop t1
expect 1 "fs stat t1 after drop" -- $P fs stat t1
expect 1 "fs drop t1 again" -- $P --json fs drop t1
py 'assert j["ok"] is False and j["exit"] == 1 and j["errno"] == "ENOENT"'

echo "== up again is idempotent"
BEFORE=$(cat "$D"/run/*.pid | sort)
expect 0 "up again" -- $P up --data "$D"
echo "$OUT" | grep -q "already running" || fail "second up does not say already running: $OUT"
[ "$BEFORE" = "$(cat "$D"/run/*.pid | sort)" ] || fail "second up changed the pid files"

echo "== site drain makes status degraded"
MDSL_ID=$($P --json sites | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin)["sites"] if s["type"] == "mdsl"][0])')
if [ $HAVE_MDS -eq 1 ]; then
    # An MDS registered and follows ring 1 (docs/mdsl-scale.md): the only
    # MDSL holds every slice, so R2 refuses to drain it (nowhere to move
    # them) or remove it (not DRAINED), and says why.
    expect 1 "site drain of the only MDSL of ring 1" -- $P site drain "$MDSL_ID"
    echo "$ERR" | grep -q "last of its type" || fail "drain refusal does not say why: $ERR"
    expect 1 "site remove of an MDSL in ring 1" -- $P --json site remove "$MDSL_ID"
    py 'assert j["ok"] is False and j["errno"] == "EBUSY", j'
    expect 0 "status after the refusals (nothing changed)" -- $P status
    # Draining the MDS makes the status degraded as well.
    DRAIN_ID=$($P --json sites | python3 -c 'import json,sys; print([s["id"] for s in json.load(sys.stdin)["sites"] if s["type"] == "mds"][0])')
else
    DRAIN_ID=$MDSL_ID # no MDS: ring 1 is open, the MDSL may leave it
fi
expect 0 "site drain $DRAIN_ID" -- $P site drain "$DRAIN_ID"
expect 4 "status after draining site $DRAIN_ID" -- $P status
echo "$OUT" | grep -q "draining" || fail "status does not name the draining site"
expect 1 "site remove of an unknown id" -- $P site remove 9999

echo "== down"
note_pids "$D"
expect 0 "down" -- $P down --data "$D"
echo "$OUT"
for p in $PIDS; do
    alive "$p" && fail "pid $p still alive after down"
done
ls "$D"/run/*.pid >/dev/null 2>&1 && fail "pid files left: $(ls "$D"/run)"
if pgrep -f "$T" > "$T/pg"; then
    fail "processes left behind: $(cat "$T/pg")"
else
    pass "pgrep -f $T finds nothing"
fi
expect 3 "status after down" -- $P --data "$D" status
expect 0 "down again" -- $P down --data "$D"

echo "== down leaves a reused pid alone"
sleep 60 &
SLEEPER=$!
printf '%s\n/nonexistent/pom-r2\n' "$SLEEPER" > "$D/run/pom-r2.pid"
expect 0 "down with a stale pid file" -- $P down --data "$D"
alive "$SLEEPER" && pass "unrelated pid $SLEEPER untouched" || fail "down killed an unrelated process"
kill "$SLEEPER"; wait "$SLEEPER" 2>/dev/null; SLEEPER=""

echo "== up --mount --mdsl 3"
# mdsl3 WHAT: three MDSL up in the view and in ring 1 (not `status`'s
# verdict: the mount of the last `up` may still be listed, transient).
mdsl3() {
    expect 0 "$1: sites --json" -- $P --data "$T/data2" --json sites
    py "m = [x for x in j['sites'] if x['type'] == 'mdsl']
assert len(m) == 3 and all(x['state'] == 'up' for x in m), m"
    expect 0 "$1: ring show 1 --json" -- $P --data "$T/data2" --json ring show 1
    py "assert len(j['rings'][0]['sites']) == 3, j"
}
if [ $HAVE_FS -eq 0 ]; then
    expect 5 "up --mount without pomfs" -- $P up --data "$T/data2" --mount "$T/mnt" --mdsl 3
    echo "$ERR" | grep -q "cannot find the FUSE client" || fail "message: $ERR"
    note_pids "$T/data2"
    expect 0 "the cluster runs anyway" -- $P --data "$T/data2" status
else
    expect 2 "up -o wants options" -- $P up --data "$T/data2" --mount "$T/mnt" -o
    expect 0 "up --mount -o noatime --mdsl 3" -- $P up --data "$T/data2" --mount "$T/mnt" -o noatime --mdsl 3
    note_pids "$T/data2"
    mountpoint -q "$T/mnt" || fail "$T/mnt is not mounted"
    # -o reaches pomfs; root's mount serves every user, the kernel checking
    # permissions (docs/pomctl.md "up")
    want="noatime default_permissions"
    [ "$(id -u)" = 0 ] && want="$want allow_other"
    for o in $want; do
        findmnt -n -o OPTIONS "$T/mnt" | tr , '\n' | grep -qx "$o" &&
            pass "the mount has $o" || fail "the mount lacks $o: $(findmnt -n -o OPTIONS "$T/mnt")"
    done
fi
for k in 2 3; do
    [ -f "$T/data2/run/pom-mdsl-$k.pid" ] && [ -d "$T/data2/mdsl-$k" ] ||
        fail "no pid file or folder of pom-mdsl-$k"
done
mdsl3 "up --mdsl 3"
if [ $HAVE_FS -eq 1 ]; then
    # Forty directories (forty tables) are placed over ring 1: each MDSL
    # holds slices once they are synced.
    for i in $(seq 40); do
        mkdir -p "$T/mnt/d$i" && head -c $((i * 997)) /dev/urandom >"$T/mnt/d$i/f"
    done
    (cd "$T/mnt" && sha256sum d*/f) >"$T/mdsl3.sums"
    sync "$T"/mnt/d*/f "$T"/mnt/d* "$T/mnt"
    expect 0 "site stat --json of three MDSL" -- $P --data "$T/data2" --json site stat
    py "m = j['mdsl']; assert len(m) == 3 and all(x['reached'] for x in m), m
assert all(x['tables'] > 0 for x in m), [(x['id'], x['tables']) for x in m]"
fi
expect 0 "down of three MDSL" -- $P down --data "$T/data2"
echo "$OUT" | grep -q "pom-mdsl-3 *pid .*: stopped" || fail "down does not stop pom-mdsl-3: $OUT"
ls "$T/data2"/run/*.pid >/dev/null 2>&1 && fail "pid files left: $(ls "$T/data2/run")"
mountpoint -q "$T/mnt" 2>/dev/null && fail "$T/mnt still mounted after down"
for p in $PIDS; do
    alive "$p" && fail "pid $p still alive after down"
done
if [ $HAVE_FS -eq 1 ]; then
    expect 0 "up --mount --mdsl 3 again" -- $P up --data "$T/data2" --mount "$T/mnt" --mdsl 3
    note_pids "$T/data2"
    mdsl3 "up --mdsl 3 again"
    (cd "$T/mnt" && sha256sum -c --quiet "$T/mdsl3.sums") ||
        fail "the files written over three MDSL differ after down and up"
else
    expect 0 "up --mdsl 3 again" -- $P up --data "$T/data2" --mdsl 3
    note_pids "$T/data2"
    mdsl3 "up --mdsl 3 again"
fi
expect 0 "down (data2)" -- $P down --data "$T/data2"
mountpoint -q "$T/mnt" 2>/dev/null && fail "$T/mnt still mounted after down"
for p in $PIDS; do
    alive "$p" && fail "pid $p still alive after down"
done
pgrep -f "$T" > "$T/pg" && fail "processes left behind: $(cat "$T/pg")"

echo "sites expected: $WANT_SITES (pom-mds built: $HAVE_MDS, pomfs built: $HAVE_FS)"
if [ $FAILS -ne 0 ]; then
    echo "$FAILS check(s) failed"
    exit 1
fi
echo "all checks passed"
exit 0
