#!/usr/bin/env bash
# test_pomfs_rados.sh POMCTL POMFS CEPH_SINGLE -- the blob tier's rados
# backend against a real single-node Ceph (docs/testing.md
# "test_pomfs_rados"): `pomctl up`, a Ceph started by scripts/ceph-single.sh
# (one ceph-mon, one memstore ceph-osd, on loopback, in a temporary folder),
# an fs made with `pomctl fs create --rados-pool --ceph-conf`; a 20 MiB file
# and 300 small files written and fsynced through one mount read back
# byte-exact through a second; their tracts are RADOS objects, none in the
# cluster's blob folder; an orphan set made by hand is counted by
# `pomctl fsck` and removed by a reclaiming mount (list, lease, lock); a
# tract object removed behind pomegranate's back
# (`rados rm`) reads EIO, not zeros, while a real hole reads zeros; a removed
# file's objects go; the Ceph daemons are stopped by pid.
#
# Needs the Debian packages ceph-mon and ceph-osd: installed here when
# missing and the test runs as root; exit 77 (skip) only when they cannot be.
set -u
CEPH_SINGLE=$(realpath "$3")
if ! command -v ceph-mon >/dev/null || ! command -v ceph-osd >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing ceph-mon ceph-osd (Debian)"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q >/dev/null 2>&1
        apt-get install -y -q --no-install-recommends ceph-mon ceph-osd >/dev/null 2>&1
    fi
    if ! command -v ceph-mon >/dev/null || ! command -v ceph-osd >/dev/null; then
        echo "SKIP: the Debian packages ceph-mon and ceph-osd are missing and cannot be installed"
        exit 77
    fi
fi
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
t0=$SECONDS
okrc() { eq "$1" "$2" 0; } # DESC STATUS: the status must be 0
inrange() { # DESC GOT LO HI
    eq "$1 ($2 in $3..$4)" "$([ "$2" -ge "$3" ] && [ "$2" -le "$4" ] && echo yes)" "yes"
}

# The Ceph cluster lives beside T; stopped by pid at exit, and by a watcher
# when this test is SIGKILLed (a ctest timeout), as reap_on_kill does for
# the cluster of pomctl up.
C=$(mktemp -d "${TMPDIR:-/tmp}/pomfs-ceph.XXXXXX")
rados_cleanup() {
    pl_cleanup
    bash "$CEPH_SINGLE" stop "$C/ceph"
    rm -rf "$C"
}
trap rados_cleanup EXIT
setsid -f bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done
    [ -d "$3" ] || exit 0; bash "$2" stop "$3/ceph"; rm -rf "$3"' reaper "$$" "$CEPH_SINGLE" "$C" \
    </dev/null >/dev/null 2>&1

if ! bash "$CEPH_SINGLE" start "$C/ceph" pompool >"$T/ceph.log" 2>&1; then
    echo "FAIL: the single-node Ceph did not start:"; cat "$T/ceph.log"; exit 1
fi
echo "ceph up in $((SECONDS - t0)) s: $(tail -1 "$T/ceph.log")"
CEPH_CONF_FILE=$C/ceph/ceph.conf
export CEPH_CONF=$CEPH_CONF_FILE # for the rados tool below

out=$("$POMCTL" --data "$T/data" fs create rfs --rados-pool pompool \
      --ceph-conf "$CEPH_CONF_FILE" 2>&1)
rc=$?; eq "fs create on rados" "$rc" "0"; [ $rc = 0 ] || echo "$out"
"$POMCTL" --data "$T/data" fs stat rfs | grep -q "blob *rados pool=pompool,conf=$CEPH_CONF_FILE"
okrc "fs stat shows the rados settings" $?
"$POMCTL" --data "$T/data" fs create bad --rados-pool "a,b" >/dev/null 2>&1
eq "a pool with a comma is refused (usage)" "$?" "2"

rmount() { # dir [opts]: mounts fs rfs there (recorded for pl_cleanup)
    mkdir -p "$1"
    "$POMFS" "$R2" "$1" -f -o "fs=rfs,keyfile=$KEY${2:+,$2}" >>"$T/pomfs.log" 2>&1 &
    PL_PID[$1]=$!
    wait_mounted "$1" "${PL_PID[$1]}"
}
M1=$T/m1 M2=$T/m2 M3=$T/m3
rmount "$M1"

# ---- the round trip --------------------------------------------------------
head -c $((20 << 20)) /dev/urandom >"$T/big.src"
dd if="$T/big.src" of="$M1/big" bs=1M conv=fsync status=none
okrc "20 MiB written and fsynced" $?
mkdir -p "$T/small.src"
python3 - "$T/small.src" "$M1/small" <<'EOF'
import os, random, sys
src, dst = sys.argv[1], sys.argv[2]
os.mkdir(dst)
rnd = random.Random(23)
for i in range(300):
    # both sides of the 64 KiB inline limit: rows and tracts
    n = rnd.choice([rnd.randrange(1, 4096), rnd.randrange(4096, 65536),
                    rnd.randrange(65537, 300000)])
    b = os.urandom(n)
    open(os.path.join(src, "f%03d" % i), "wb").write(b)
    fd = os.open(os.path.join(dst, "f%03d" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b)
    os.fsync(fd)
    os.close(fd)
EOF
okrc "300 small files written and fsynced" $?
# A real hole: a file cut to 12 MiB (a blob set holding no tract yet), one
# byte written at 9 MiB (tract 2); tracts 0 and 1 are never written.
truncate -s 12M "$M1/sparse" && printf x | dd of="$M1/sparse" bs=1 seek=$((9 << 20)) \
    conv=notrunc,fsync status=none
okrc "sparse file written" $?

rmount "$M2"
cmp -s "$T/big.src" "$M2/big"
okrc "the 20 MiB file reads byte-exact through a second mount" $?
diff -r -q "$T/small.src" "$M2/small" >/dev/null
okrc "the 300 small files read byte-exact through a second mount" $?
eq "the sparse file's hole reads zeros" \
    "$(head -c $((9 << 20)) "$M2/sparse" | tr -d '\0' | wc -c)" "0"
eq "the sparse file's byte" "$(dd if="$M2/sparse" bs=1 skip=$((9 << 20)) count=1 status=none)" "x"

# The tracts are RADOS objects, none in the local blob folder of pomctl up.
objs=$(rados -p pompool ls 2>/dev/null | sort)
ntract=$(grep -c '^pom\.[0-9a-f]\{8\}\.[0-9a-f]\{16\}\.[0-9a-f]\{8\}$' <<<"$objs")
nmap=$(grep -c '^pom\.[0-9a-f]\{8\}\.[0-9a-f]\{16\}\.map$' <<<"$objs")
inrange "tract objects in the pool (5 of big, 1 of sparse, ~100 of small)" "$ntract" 60 300
inrange "map objects in the pool (one per set)" "$nmap" 40 300
eq "no tract file in the cluster's local blob folder" \
    "$(find "$T/data/blobs" -type f 2>/dev/null | grep -vc 'reclaim.lock$')" "0"

# ---- orphans: pomctl fsck counts them, a reclaiming mount removes them -------
jget() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
fsid=$(grep '\.00000004$' <<<"$objs" | cut -d. -f2)
HID=$(printf '%016x' $(( (RANDOM << 48 | RANDOM << 32 | RANDOM << 16 | RANDOM) | (1 << 63) )))
head -c 100000 /dev/urandom | rados -p pompool put "pom.$fsid.$HID.00000000" - &&
    printf '\001' | rados -p pompool put "pom.$fsid.$HID.map" -
okrc "an orphan set made by hand (a tract and its map)" $?
"$POMCTL" --data "$T/data" --json fsck --fs rfs >"$T/f0.json" 2>"$T/f0.err"
eq "fsck exits 0" "$?" 0
eq "fsck counts 1 orphan" "$(jget orphan_sets <"$T/f0.json")" 1
eq "fsck finds no problem" "$(jget problems <"$T/f0.json")" 0
mkdir -p "$T/m4"
"$POMFS" "$R2" "$T/m4" -f -o "fs=rfs,keyfile=$KEY,reclaim=1,reclaim_grace=1,verbose" \
    >>"$T/pomfs.log" 2>&1 &
PL_PID[$T/m4]=$!
wait_mounted "$T/m4" "${PL_PID[$T/m4]}"
orphan_gone() { ! rados -p pompool ls 2>/dev/null | grep -q "$HID"; }
within "the reclaiming mount removes the orphan (tract and map)" 60 orphan_gone
pl_umount "$T/m4"
eq "the named sets stay" "$(rados -p pompool ls 2>/dev/null | grep -v '\.reclaim$' | sort)" "$objs"
"$POMCTL" --data "$T/data" --json fsck --fs rfs >"$T/f1.json" 2>/dev/null
eq "fsck counts 0 orphans" "$(jget orphan_sets <"$T/f1.json")" 0

# ---- EIO never zeros ---------------------------------------------------------
big_id=$(grep '\.00000004$' <<<"$objs" | cut -d. -f3)
eq "one set has a fifth tract (the 20 MiB file)" "$(wc -w <<<"$big_id")" "1"
rados -p pompool rm "pom.$fsid.$big_id.00000002"
okrc "tract 2 of the 20 MiB file removed behind pomegranate's back" $?
# A mount with no cached page of it, its settings given by -o (as a host
# whose ceph.conf is elsewhere would).
rmount "$M3" "rados_pool=pompool,ceph_conf=$CEPH_CONF_FILE,rados_id=admin"
err=$(dd if="$M3/big" of=/dev/null bs=1M skip=8 count=4 2>&1)
eq "reading the lost tract fails" "$([ $? -ne 0 ] && echo failed)" "failed"
grep -q "Input/output error" <<<"$err"
okrc "with EIO (not zeros): $err" $?
cmp -s -n $((8 << 20)) "$T/big.src" "$M3/big"
okrc "tracts 0 and 1 of the file still read byte-exact" $?
grep -q "tract 2 of set $big_id in pool pompool is lost" "$T/pomfs.log"
okrc "the client logs the lost tract" $?

# ---- removal: a deleted file's objects go -------------------------------------
sp_id=$(grep '\.00000002$' <<<"$objs" | grep -v "$big_id" | cut -d. -f3)
eq "the sparse file's set" "$(wc -w <<<"$sp_id")" "1"
# The set goes once a later sync of the same client commits (docs/format-blob.md
# "Crash behaviour"): an fsync of a scratch file.
rm "$M1/sparse" && python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDWR|os.O_CREAT); os.fsync(fd); os.close(fd)' \
    "$M1/scratch"
okrc "sparse file removed, then an fsync" $?
left=1
for _ in $(seq 50); do
    rados -p pompool ls 2>/dev/null | grep -q "$sp_id" || { left=0; break; }
    sleep 0.2
done
eq "the removed file's objects (tract, map) are gone from the pool" "$left" "0"
rados -p pompool ls 2>/dev/null | grep -q "$big_id"
okrc "the other sets stay" $?

pl_umount "$M3"
pl_umount "$M2"
pl_umount "$M1"

# ---- stopped by pid ---------------------------------------------------------------
pids=$(cat "$C"/ceph/run/*.pid 2>/dev/null)
bash "$CEPH_SINGLE" stop "$C/ceph"
alive=0
for p in $pids; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
eq "ceph daemons left after stop (by pid: $(echo $pids))" "$alive" "0"
echo "test_pomfs_rados: $((SECONDS - t0)) s"
pl_done
