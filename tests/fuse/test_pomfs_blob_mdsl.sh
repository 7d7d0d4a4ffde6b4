#!/bin/bash
# test_pomfs_blob_mdsl.sh POMCTL POMFS -- files over 64 KiB on the `mdsl`
# blob backend (docs/format-blob.md "mdsl"): `pomctl up --mdsl 3`, an fs
# made with `pomctl fs create --copies 2`, four mounts of it with its client
# key (not the cluster key: the MDSL takes the client key for the tract
# calls of its fs only):
#   1. mount 1 writes a 3,000,000-byte file and files of 65,535, 65,537 and
#      200,000 bytes (and a sparse one with a hole tract), each fsynced, and
#      one appended after its fsync and only closed, read back right after
#      the close (close-to-open);
#   2. mount 2, nothing cached, first reads 300 ranges at random offsets of
#      the large and the sparse file (reads inside a tract that do not go on
#      from the previous one get only their range from the MDSL), then reads
#      everything back byte-exact; no tract file exists on the local disk
#      (the cluster's local blob folder stays empty);
#   3. one MDSL SIGKILLed: mount 3 (nothing cached) still reads every file
#      byte-exact from the other copies;
#   4. every MDSL SIGKILLed: mount 4 gets EIO for the large file, never
#      zeros; a small (inline) file still reads.
# Exits 77 (skip) without FUSE.
PL_UP_OPTS="--mdsl 3"
. "$(dirname "${BASH_SOURCE[0]}")/pomfs_lib.sh" "$1" "$2"

ok "fs create mfs --copies 2" "$POMCTL" --data "$T/data" fs create mfs --copies 2
ok "its client key" "$POMCTL" --data "$T/data" fs key mfs --out "$T/mfs.key"
grep -q "copies=2" <("$POMCTL" --data "$T/data" fs stat mfs) ||
    { echo "FAIL: fs stat mfs does not show copies=2"; FAIL=$((FAIL+1)); }

MP=()
mnt() { # dir
    mkdir -p "$1"
    "$POMFS" "$R2" "$1" -f -o "fs=mfs,keyfile=$T/mfs.key,verbose" >>"$T/pomfs.log" 2>&1 &
    PL_PID[$1]=$!
    wait_mounted "$1" "${PL_PID[$1]}"
}
for i in 1 2 3 4; do mnt "$T/m$i"; done
eq "every mount on the mdsl backend, 2 copies" \
    "$(grep -c "backend mdsl: 3 MDSL, 2 copies per tract" "$T/pomfs.log")" 4

python3 - "$T/m1" "$T/src" <<'EOF' || { echo "FAIL: writing"; FAIL=$((FAIL+1)); }
import os, random, sys
m, src = sys.argv[1], sys.argv[2]
os.makedirs(src)
rnd = random.Random(23)
for name, n in (("big", 3000000), ("b65535", 65535), ("b65537", 65537), ("b200k", 200000),
                ("small", 1000)):
    data = rnd.randbytes(n)
    for root in (m, src):
        fd = os.open(os.path.join(root, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
# a sparse file: tract 0 written, tract 1 a hole, 10 bytes in tract 2
for root in (m, src):
    fd = os.open(os.path.join(root, "sparse"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, b"a" * 100000, 0)
    os.pwrite(fd, b"z" * 10, 9 << 20)
    os.fsync(fd)
    os.close(fd)
# close-to-open: bytes written after an fsync, then only a close; an open
# right after it (the last close's release still running) reads them all
data = rnd.randbytes(300000)
for root in (m, src):
    fd = os.open(os.path.join(root, "appended"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, data)
    os.fsync(fd)
    os.write(fd, b"tail")
    os.close(fd)
    with open(os.path.join(root, "appended"), "rb") as f:
        if f.read() != data + b"tail":
            sys.exit("appended: the bytes after the fsync are lost at close")
EOF

random_reads() { # mount: ranges at random offsets equal the source's
    python3 - "$1" "$T/src" <<'EOF'
import os, random, sys
m, src = sys.argv[1], sys.argv[2]
rnd = random.Random(5)
for name in ("big", "sparse"):
    want = open(os.path.join(src, name), "rb").read()
    fd = os.open(os.path.join(m, name), os.O_RDONLY)
    for _ in range(150):
        off = rnd.randrange(len(want) + 4096)
        n = rnd.choice((1, 100, 4096, 70000))
        got = os.pread(fd, n, off)
        if got != want[off:off + n]:
            sys.exit(f"{name}: {n} bytes at {off} differ")
    os.close(fd)
EOF
}
ok "mount 2: 300 ranges at random offsets read right" random_reads "$T/m2"
ok "mount 2 reads every file back byte-exact" pl_same "$T/m2"
eq "no tract on the local disk" "$(find "$T/data/blobs" -type f | wc -l)" 0

victim=$(awk '{ print $1; exit }' "$T/data/run/pom-mdsl-2.pid")
kill -9 "$victim"
while kill -0 "$victim" 2>/dev/null; do sleep 0.1; done
ok "one MDSL SIGKILLed: mount 3 reads every file from the other copies" pl_same "$T/m3"

for d in pom-mdsl pom-mdsl-3; do
    p=$(awk '{ print $1; exit }' "$T/data/run/$d.pid")
    kill -9 "$p"
    while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
done
err=$(timeout 60 dd if="$T/m4/big" of=/dev/null bs=1M 2>&1)
ok "every MDSL down: the large file answers EIO ($err)" grep -q "Input/output error" <<<"$err"
ok "every MDSL down: a small file still reads" cmp -s "$T/src/small" "$T/m4/small"
grep -q "lost on every copy" "$T/pomfs.log" ||
    { echo "FAIL: no 'lost on every copy' line in the pomfs log"; FAIL=$((FAIL+1)); }
for i in 1 2 3 4; do
    fusermount3 -u "$T/m$i" 2>/dev/null || fusermount3 -u -z "$T/m$i"
done
pl_done
