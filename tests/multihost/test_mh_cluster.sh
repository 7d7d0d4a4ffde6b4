#!/bin/bash
# test_mh_cluster.sh POMCTL POMFS POM_R2 POM_MDS POM_MDSL BINDIR -- one
# file system across five hosts of the multi-host harness (mh_lib.sh,
# docs/testing.md "Multi-host tests"):
#   h1: pom-r2 + pom-mds + pom-mdsl   h2, h3: pom-mds + pom-mdsl
#   h4, h5: pomfs mounts (client keys only)
# every daemon with --listen 10.213.0.K:PORT --r2 10.213.0.1:7000
# --key-file (the cluster key made on h1 and copied to h2 and h3, as
# docs/deploy.md tells an operator to). Checks:
#   - 300 small files (< 64 KiB, inline in their rows) and a directory tree
#     written and fsynced on h4 read byte-exact on h5 (sha256 lists compared
#     across, the same names listed on both);
#   - renames and removes on h4 seen on h5;
#   - h2 killed (SIGKILL of its MDS and MDSL) while h4 writes and fsyncs
#     files, then restarted with its data folder: every file whose fsync
#     returned, and the 300 files, read byte-exact on h5 and h4;
#   - h1 killed (R2, MDS, MDSL) and restarted: the same files read on h5,
#     and the mounts write and read on.
#   - a 3,000,000-byte file written and fsynced on h4 answers EIO on h5,
#     never zeros: the blob tier's only backend (`local`) keeps tracts in
#     folders of the writing client's own host (the shared blob tier is not
#     built yet: docs/deploy.md "What is not shared yet").
# Exit 77 (skip) without root, network namespaces or FUSE.
#   MH_KEEP=1   keep the harness folder (every daemon's log) and say where
set -u
POMCTL=$(realpath "$1"); POMFS=$(realpath "$2"); R2BIN=$(realpath "$3")
MDSBIN=$(realpath "$4"); MDSLBIN=$(realpath "$5"); BINDIR=$(realpath "$6")
if [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
    echo "SKIP: no /dev/fuse or no fusermount3"
    exit 77
fi
HERE=$(dirname "$(realpath "$0")")
. "$HERE/mh_lib.sh" "$BINDIR"
T=$MH_ROOT
. "$HERE/../fuse/pomfs_check.sh"
export TZ=UTC LC_ALL=C
stamp() { echo "[$(date +%T)] $*"; }

R2=$(mh_ip 1):7000
CKEY=/srv/pom/cluster.key # the cluster key, on the storage hosts only
FKEY=/srv/pom/client.key  # the client key of fs pomfs, on the client hosts
STORAGE="1 2 3" CLIENTS="4 5"
pomctl() { mh_exec 1 "$POMCTL" --r2 "$R2" --key-file "$CKEY" "$@"; }

# R2 on h1; the first start makes the cluster key (--init-key).
start_r2() { mh_spawn 1 pom-r2 "$R2BIN" --data /srv/pom --listen "$R2" --init-key "$CKEY"; }
start_mdsl() { # K
    mh_spawn "$1" pom-mdsl "$MDSLBIN" --dir /srv/pom/mdsl --listen "$(mh_ip "$1"):7200" \
        --r2 "$R2" --key-file "$CKEY"
}
start_mds() { # K
    mh_exec "$1" mkdir -p /srv/pom/mds # pom-mds keeps its site id there
    mh_spawn "$1" pom-mds "$MDSBIN" --dir /srv/pom/mds --listen "$(mh_ip "$1"):7100" \
        --r2 "$R2" --key-file "$CKEY"
}
# registered K SUB: the daemon of host K with --dir /srv/pom/SUB has its
# site id from R2.
registered() { [ -s "$(mh_path "$1" "/srv/pom/$2/site_id")" ]; }
# storage_up NMDS NMDSL: R2's view has that many MDS and MDSL, all up (the
# client sites aside: a mount's site may lag behind R2's restart).
storage_up() {
    pomctl --json sites 2>/dev/null | python3 -c "
import json, sys
s = [x for x in json.load(sys.stdin)['sites'] if x['type'] in ('mds', 'mdsl')]
up = lambda t: sum(1 for x in s if x['type'] == t and x['state'] == 'up')
sys.exit(0 if len(s) == $1 + $2 and up('mds') == $1 and up('mdsl') == $2 else 1)"
}
# R2 answers (status exits 4, degraded, while no site is registered).
r2_answers() {
    pomctl status >/dev/null 2>&1
    local rc=$?
    [ $rc = 0 ] || [ $rc = 4 ]
}
mounted() { mh_exec "$1" mountpoint -q /tmp/mnt; }
mount_client() { # K
    mh_exec "$1" mkdir -p /tmp/mnt /srv/pom/blobs
    mh_spawn "$1" pomfs "$POMFS" "$R2" /tmp/mnt -f -o "fs=pomfs,keyfile=$FKEY"
    within "h$1 mounts pomfs" 60 mounted "$1"
}
wait_or_fail() { # SECS DESC CMD...
    local s=$1 d=$2; shift 2
    within "$d" "$s" "$@"
    [ "$FAIL" = 0 ] || { echo "cannot go on"; tail -n 5 "$T"/h*/*.log; exit 1; }
}

T0=$SECONDS
mh_setup 5 || { echo "harness setup failed"; exit 1; }
for k in 1 2 3 4 5; do mh_exec "$k" mkdir -p /srv/pom /tmp/home; done

stamp "storage hosts"
start_r2
wait_or_fail 60 "R2 answers on h1" r2_answers
# Key distribution: the cluster key goes to the other storage hosts (an
# operator's scp), mode 0600 kept.
for k in 2 3; do cp -p "$(mh_path 1 "$CKEY")" "$(mh_path "$k" "$CKEY")"; done
# Every MDSL before the first MDS: each joins ring 1 as it registers.
for k in $STORAGE; do start_mdsl "$k"; done
for k in $STORAGE; do wait_or_fail 60 "MDSL of h$k registered" registered "$k" mdsl; done
for k in $STORAGE; do start_mds "$k"; done
for k in $STORAGE; do wait_or_fail 60 "MDS of h$k registered" registered "$k" mds; done
wait_or_fail 60 "3 MDS and 3 MDSL up in R2's view" storage_up 3 3
sleep 2.5 # every MDS takes the final ring 0 from a heartbeat (as pomctl up)
ok "fs create" pomctl fs create pomfs --blob-backend local --blob-path /srv/pom/blobs
ok "fs key" pomctl fs key pomfs --out "$FKEY"
for k in $CLIENTS; do cp -p "$(mh_path 1 "$FKEY")" "$(mh_path "$k" "$FKEY")"; done
eq "ring 1 holds the three MDSL" \
    "$(pomctl --json ring show 1 | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["rings"][0]["sites"]))')" 3
eq "every site registered with its host's address" \
    "$(pomctl --json sites | python3 -c '
import json, sys
print(sorted(s["addr"] for s in json.load(sys.stdin)["sites"] if s["type"] != "client"))')" \
    "['10.213.0.1:7000', '10.213.0.1:7100', '10.213.0.1:7200', '10.213.0.2:7100', '10.213.0.2:7200', '10.213.0.3:7100', '10.213.0.3:7200']"

stamp "client hosts"
for k in $CLIENTS; do mount_client "$k"; done
[ "$FAIL" = 0 ] || { echo "no mounts"; tail -n 5 "$T"/h*/*.log; exit 1; }
ok "h5 does not see h4's /tmp" mh_exec 5 test ! -e /tmp/src

stamp "300 small files and a tree, written and fsynced on h4"
mh_exec 4 python3 - <<'EOF'
import os, random
r = random.Random(23)
os.makedirs('/tmp/src/small')
for i in range(300):
    n = r.choice([0, 1, 100, 4095, 4096, 65535]) if i < 30 else r.randrange(0, 65536)
    with open('/tmp/src/small/f%03d' % i, 'wb') as f:
        f.write(r.randbytes(n))
for a in range(4):
    for b in range(3):
        d = '/tmp/src/tree/d%d/e%d' % (a, b)
        os.makedirs(d)
        for c in range(5):
            with open('%s/g%d' % (d, c), 'wb') as f:
                f.write(r.randbytes(r.randrange(1, 20000)))
os.makedirs('/tmp/src/tree/empty/deeper')
EOF
ok "cp -a to the mount" mh_exec 4 cp -a /tmp/src /tmp/mnt/w
# fsync of every file and directory (coreutils sync FILE fsyncs each).
ok "fsync all" mh_exec 4 bash -c 'find /tmp/mnt/w -print0 | xargs -0 sync'
mh_exec 4 bash -c 'cd /tmp/src && find . -type f | sort | xargs sha256sum' >"$T/sums"
mh_exec 4 bash -c 'cd /tmp/src && find . | sort' >"$T/names"
eq "360 files summed on h4" "$(wc -l <"$T/sums")" 360
cp "$T/sums" "$(mh_path 5 /tmp/sums)"
ok "h5 reads all of them byte-exact" mh_exec 5 bash -c 'cd /tmp/mnt/w && sha256sum -c --quiet /tmp/sums'
eq "h5 lists the same names" "$(mh_exec 5 bash -c 'cd /tmp/mnt/w && find . | sort' | md5sum)" \
    "$(md5sum <"$T/names")"

stamp "renames and removes on h4, seen on h5"
ok "rename a file" mh_exec 4 mv /tmp/mnt/w/small/f007 /tmp/mnt/w/tree/moved007
ok "remove a file" mh_exec 4 rm /tmp/mnt/w/small/f008
ok "rename a directory" mh_exec 4 mv /tmp/mnt/w/tree/d1 /tmp/mnt/w/d1moved
ok "remove a tree" mh_exec 4 rm -r /tmp/mnt/w/tree/d2
ok "fsync the parents" mh_exec 4 sync /tmp/mnt/w /tmp/mnt/w/small /tmp/mnt/w/tree
within "h5: the renamed file is there" 10 mh_exec 5 test -f /tmp/mnt/w/tree/moved007
within "h5: its old name is gone" 10 mh_exec 5 test ! -e /tmp/mnt/w/small/f007
within "h5: the removed file is gone" 10 mh_exec 5 test ! -e /tmp/mnt/w/small/f008
within "h5: the moved tree is there" 10 mh_exec 5 test -f /tmp/mnt/w/d1moved/e2/g4
within "h5: the removed tree is gone" 10 mh_exec 5 test ! -e /tmp/mnt/w/tree/d2
eq "h5: the moved file's content" "$(mh_exec 5 sha256sum </dev/null /tmp/mnt/w/tree/moved007 | cut -c1-64)" \
    "$(grep ' ./small/f007$' "$T/sums" | cut -c1-64)"
eq "h5: 298 small files left" "$(mh_exec 5 ls /tmp/mnt/w/small | wc -l)" 298
# The sums as they stand now, for the checks after the crash.
sed -e 's| \./small/f007$| ./tree/moved007|' -e '/ \.\/small\/f008$/d' \
    -e 's| \./tree/d1/| ./d1moved/|' -e '/ \.\/tree\/d2\//d' "$T/sums" >"$(mh_path 5 /tmp/sums2)"
cp "$(mh_path 5 /tmp/sums2)" "$(mh_path 4 /tmp/sums2)"

stamp "a large file of h4 on h5: EIO, never zeros"
# Its tracts are in h4's own blob folder (the local backend): h5's folder
# has no record of the set, so h5 answers EIO (docs/format-blob.md
# "Reading: EIO never zeros"); it read 3,000,000 zeros before.
ok "h4 writes and fsyncs 3,000,000 bytes" \
    mh_exec 4 dd if=/dev/urandom of=/tmp/mnt/w/large bs=1000000 count=3 conv=fsync status=none
large_on_h5() { [ "$(mh_exec 5 stat -c %s /tmp/mnt/w/large 2>/dev/null)" = 3000000 ]; }
within "h5 sees its size" 10 large_on_h5
nok "h5 reads EIO, not zeros" "Input/output error" mh_exec 5 cat /tmp/mnt/w/large
ok "h4 removes it" mh_exec 4 rm /tmp/mnt/w/large

stamp "h2 killed (its MDS and MDSL, SIGKILL) while h4 writes and fsyncs"
# The writer records a file once its fsync returned 0, and otherwise the
# error: a write the killed MDS held uncommitted is lost with it, and its
# fsync answers EIO (docs/client.md "Lost changes").
mh_spawn 4 writer bash -c '
    mkdir -p /tmp/mnt/c
    for i in $(seq 1 150); do
        seq "$i" $((i + 700)) >/tmp/want
        if dd if=/tmp/want of=/tmp/mnt/c/f$i conv=fsync status=none 2>/tmp/dd.err; then
            echo "$i" >>/tmp/done
        else
            echo "f$i: $(tail -n 1 /tmp/dd.err)" >>/tmp/failed
        fi
    done
    echo finished >/tmp/writer.end'
wait_or_fail 120 "the writer fsynced 20 files" bash -c "[ \$(wc -l <'$(mh_path 4 /tmp/done)' 2>/dev/null || echo 0) -ge 20 ]"
mh_kill_host 2
stamp "h2 down after $(wc -l <"$(mh_path 4 /tmp/done)") fsynced files; restarting it"
sleep 1
start_mdsl 2
start_mds 2
wait_or_fail 120 "h2 back: 3 MDS and 3 MDSL up" storage_up 3 3
within "the writer finishes" 240 test -e "$(mh_path 4 /tmp/writer.end)"
NDONE=$(wc -l <"$(mh_path 4 /tmp/done)")
stamp "the writer fsynced $NDONE of 150 files"
cat "$(mh_path 4 /tmp/failed)" 2>/dev/null
eq "the writer's last file, after the restart, was fsynced" "$(tail -n 1 "$(mh_path 4 /tmp/done)")" 150
eq "every failed write failed with EIO" \
    "$(cat "$(mh_path 4 /tmp/failed)" 2>/dev/null | grep -vc 'Input/output error')" 0
cp "$(mh_path 4 /tmp/done)" "$(mh_path 5 /tmp/done)"
ok "h5 reads every fsynced file of the writer" mh_exec 5 bash -c '
    while read -r i; do cmp -s <(seq "$i" $((i + 700))) /tmp/mnt/c/f$i || { echo "f$i differs"; exit 1; }; done </tmp/done'
ok "h5 reads the small files and the tree byte-exact after the crash" \
    mh_exec 5 bash -c 'cd /tmp/mnt/w && sha256sum -c --quiet /tmp/sums2'
ok "h4 too" mh_exec 4 bash -c 'cd /tmp/mnt/w && sha256sum -c --quiet /tmp/sums2'
ok "a new file after the restart" mh_exec 4 bash -c 'echo after >/tmp/mnt/w/after && sync /tmp/mnt/w/after'
within "h5 reads it" 10 mh_exec 5 grep -qx after /tmp/mnt/w/after

stamp "h1 killed (R2, MDS and MDSL, SIGKILL) and restarted"
mh_kill_host 1
sleep 1
start_r2
wait_or_fail 60 "R2 answers again" r2_answers
start_mdsl 1
start_mds 1
wait_or_fail 120 "h1 back: 3 MDS and 3 MDSL up" storage_up 3 3
ok "h5 reads the small files and the tree after R2's host came back" \
    mh_exec 5 bash -c 'cd /tmp/mnt/w && sha256sum -c --quiet /tmp/sums2'
ok "h5 reads the writer's files" mh_exec 5 bash -c '
    while read -r i; do cmp -s <(seq "$i" $((i + 700))) /tmp/mnt/c/f$i || { echo "f$i differs"; exit 1; }; done </tmp/done'
ok "h4 writes and fsyncs again" mh_exec 4 bash -c 'echo again >/tmp/mnt/w/again && sync /tmp/mnt/w/again'
within "h5 reads it" 10 mh_exec 5 grep -qx again /tmp/mnt/w/again

stamp "unmount and stop"
for k in $CLIENTS; do
    ok "h$k unmounts" mh_exec "$k" fusermount3 -u /tmp/mnt
    wait "${MH_PID[$k:pomfs]}"
    eq "pomfs of h$k exit status" "$?" 0
    unset "MH_PID[$k:pomfs]"
done
for k in $STORAGE; do mh_kill "$k" pom-mds TERM; done
for k in $STORAGE; do mh_kill "$k" pom-mdsl TERM; done
mh_kill 1 pom-r2 TERM
eq "no sanitizer report" "$(cat "$T"/h*/*.log | grep -c 'Sanitizer')" 0
echo "took $((SECONDS - T0)) s"
check_done
