#!/usr/bin/env bash
# ceph-single.sh -- a single-node Ceph cluster for tests: one ceph-mon and one
# ceph-osd with the memstore object store (nothing on disk but logs and keys),
# optionally one ceph-mgr, on loopback, in a folder of the caller's choosing.
#
#   ceph-single.sh start DIR [POOL]   starts the cluster under DIR (made; must
#                                     not hold one), creates POOL (size 1) when
#                                     given, writes DIR/ceph.conf and
#                                     DIR/keyring (client.admin and the
#                                     daemons' cephx keys), and returns once a
#                                     write to the cluster succeeds
#   ceph-single.sh stop DIR           stops what start started, by the pids in
#                                     DIR/run/*.pid (SIGTERM, then SIGKILL)
#
# CEPH_MGR=1 also starts a ceph-mgr (not needed for RADOS I/O; `ceph -s`
# then reports placement groups). CEPH_MEM_MB sets the OSD's memstore size
# (default 1024). Needs the Debian packages ceph-mon and ceph-osd (and
# ceph-mgr with CEPH_MGR=1); exits 3 when they are missing. The monitor
# listens on a free loopback port (msgr2 only); the OSD on free ports of
# Ceph's own range. Exit status 0 when the cluster answers, else non-zero
# with the last log lines on stderr (and what started is stopped).
set -euo pipefail

die() { echo "ceph-single: $*" >&2; exit 1; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

stop() {
    local d=$1 f pid
    for f in "$d"/run/mgr.pid "$d"/run/osd.pid "$d"/run/mon.pid; do
        [ -f "$f" ] || continue
        pid=$(cat "$f")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$f"
    done
}

# Runs a daemon in the foreground of a background job: its pid is ours to stop.
spawn() { # name cmd...
    local name=$1; shift
    setsid "$@" -f >"$D/log/$name.out" 2>&1 </dev/null &
    echo $! >"$D/run/$name.pid"
}

fail() {
    echo "ceph-single: $*" >&2
    tail -n 20 "$D"/log/*.log "$D"/log/*.out >&2 2>/dev/null || true
    stop "$D"
    exit 1
}

cmd=${1:-}; D=${2:-}
[ -n "$cmd" ] && [ -n "$D" ] || die "usage: ceph-single.sh start|stop DIR [POOL]"
case $cmd in
stop) stop "$D"; exit 0 ;;
start) ;;
*) die "unknown command '$cmd' (start, stop)" ;;
esac
POOL=${3:-}
need=(ceph-mon ceph-osd ceph-authtool monmaptool ceph)
[ "${CEPH_MGR:-0}" = 1 ] && need+=(ceph-mgr)
for p in "${need[@]}"; do
    command -v "$p" >/dev/null || { echo "ceph-single: $p not found (Debian: ceph-mon ceph-osd ceph-mgr)" >&2; exit 3; }
done
mkdir -p "$D"
D=$(realpath "$D")
[ -e "$D/ceph.conf" ] && die "$D already holds a cluster"
mkdir -p "$D/run" "$D/log" "$D/mon-a" "$D/osd-0"

FSID=$(python3 -c 'import uuid; print(uuid.uuid4())')
OSD_UUID=$(python3 -c 'import uuid; print(uuid.uuid4())')
PORT=$(free_port)
cat >"$D/ceph.conf" <<EOF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$PORT]
public addr = 127.0.0.1
ms bind msgr1 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
keyring = $D/keyring
run dir = $D/run
admin socket = $D/run/\$name.asok
log file = $D/log/\$name.log
log to stderr = false
err to stderr = false
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
auth allow insecure global id reclaim = false
[mon]
mon data = $D/mon-\$id
[osd]
osd data = $D/osd-\$id
osd objectstore = memstore
memstore device bytes = $(( ${CEPH_MEM_MB:-1024} << 20 ))
osd max object name len = 256
osd max object namespace len = 64
[mgr]
mgr data = $D/mgr-\$id
EOF
export CEPH_CONF=$D/ceph.conf

K=$D/keyring
ceph-authtool --create-keyring "$K" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-authtool "$K" --gen-key -n client.admin --cap mon 'allow *' --cap osd 'allow *' \
    --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
ceph-authtool "$K" --gen-key -n osd.0 --cap mon 'allow profile osd' --cap osd 'allow *' \
    --cap mgr 'allow profile osd' >/dev/null
ceph-authtool "$K" --gen-key -n mgr.x --cap mon 'allow profile mgr' --cap osd 'allow *' \
    --cap mds 'allow *' >/dev/null
monmaptool --create --addv a "[v2:127.0.0.1:$PORT]" --fsid "$FSID" "$D/monmap" >/dev/null
ceph-mon --mkfs -i a --monmap "$D/monmap" --keyring "$K" >"$D/log/mon-mkfs.out" 2>&1 ||
    fail "ceph-mon --mkfs failed"
spawn mon ceph-mon -i a

C=(ceph --connect-timeout 10)
ok=0
for _ in $(seq 60); do
    if "${C[@]}" mon stat >/dev/null 2>&1; then ok=1; break; fi
    sleep 0.5
done
[ $ok = 1 ] || fail "the monitor does not answer on 127.0.0.1:$PORT"

# The OSD: registered with its uuid as osd.0, its key already in the keyring.
"${C[@]}" auth import -i "$K" >/dev/null 2>&1 || fail "auth import failed"
id=$("${C[@]}" osd new "$OSD_UUID" 2>/dev/null) || fail "osd new failed"
[ "$id" = 0 ] || fail "osd new gave id '$id', not 0"
ceph-osd -i 0 --mkfs --osd-uuid "$OSD_UUID" >"$D/log/osd-mkfs.out" 2>&1 || fail "ceph-osd --mkfs failed"
spawn osd ceph-osd -i 0
if [ "${CEPH_MGR:-0}" = 1 ]; then
    mkdir -p "$D/mgr-x"
    spawn mgr ceph-mgr -i x
fi

ok=0
for _ in $(seq 120); do
    if "${C[@]}" osd dump 2>/dev/null | grep -q '^osd.0 up'; then ok=1; break; fi
    sleep 0.5
done
[ $ok = 1 ] || fail "osd.0 did not come up"

if [ -n "$POOL" ]; then
    "${C[@]}" osd pool create "$POOL" 8 8 replicated >/dev/null 2>&1 || fail "pool create $POOL failed"
    "${C[@]}" osd pool set "$POOL" size 1 --yes-i-really-mean-it >/dev/null 2>&1 || true
    "${C[@]}" osd pool application enable "$POOL" rados >/dev/null 2>&1 || true
    # The placement groups peer in the background: the cluster is ready when
    # a write goes through.
    ok=0
    for _ in $(seq 120); do
        if echo ready | timeout 10 rados -p "$POOL" put ceph-single.ready - 2>/dev/null; then
            rados -p "$POOL" rm ceph-single.ready >/dev/null 2>&1 || true
            ok=1; break
        fi
        sleep 0.5
    done
    [ $ok = 1 ] || fail "pool $POOL does not take writes"
fi
echo "ceph-single: up in $D (mon 127.0.0.1:$PORT, CEPH_CONF=$D/ceph.conf)"
