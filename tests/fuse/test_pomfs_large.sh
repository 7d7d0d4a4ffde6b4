#!/bin/bash
# test_pomfs_large.sh POMFS POM_MDS POM_MDSL [--bench] -- large files (the
# blob tier, docs/format-blob.md) through a real pomfs mount with
# -o blob=DIR1:DIR2, daemons on free loopback ports in a fresh temporary
# folder, stopped by pid, the mount undone with fusermount3 -u in a trap:
#   files of 64 KiB, 64 KiB + 1, 10 MiB and 100 MiB written with dd/cp and
#   checked by sha256sum after an unmount/remount; EIO, never zeros, for a
#   file read through a mount with another host's blob folder and for a
#   tract file the disk lost; truncate up and down
#   across 64 KiB; a sparse 1 GiB file (write at the end, `du` small, reads
#   zeros); fallocate (allocate, keep size, punch hole, unsupported modes);
#   cp of a 10 MiB file inside the mount; rm removes the tracts; writes at
#   2^40 work, at 2^44 fail with EFBIG; a second mount changes a file (same
#   size) and the first sees the new bytes at its next open (keep_cache is
#   set only for unchanged files).
# --bench: also a 1 GiB sequential write (conv=fsync) and read through the
# mount and on the host folder, printed in MB/s.
# Exit 77 (skip) when FUSE cannot be used here.
set -u

BENCH=${4:-}
. "$(dirname "$0")/pomfs_daemons.sh" pomfs-large "$1" "$2" "$3"
mkdir -p "$T/src"
BLOBS="$T/blob-a:$T/blob-b"
POMFS_OPTS="blob=$BLOBS"
FS2_PID= FS3_PID=
pl_cleanup_hook() { # the second mounts (keep_cache check, another host's folder)
    local m
    for m in "$T/mnt2" "$T/mnt3"; do
        mountpoint -q "$m" 2>/dev/null && fusermount3 -u -z "$m"
    done
    for m in $FS2_PID $FS3_PID; do kill -9 "$m" 2>/dev/null; wait "$m" 2>/dev/null; done
}
lt() { # description got limit: got < limit
    if [ "$2" -lt "$3" ]; then PASS=$((PASS+1)); else FAIL=$((FAIL+1)); echo "FAIL: $1: $2 >= $3"; fi
}
# Tract files, not the sets' maps (docs/format-blob.md "local").
ntracts() { find "$T/blob-a" "$T/blob-b" -type f ! -name map 2>/dev/null | wc -l; }

start_mdsl && start_mds || exit 1
mount_fs
nok "a blob folder that cannot be made" "cannot use blob" \
    "$POMFS" "127.0.0.1:$P_MDS" "$T/src" -o fsid=1,blob=/proc/nope -f

# ---- sizes around inline_max and large ones, checked after a remount ---
mkdir "$M/big"
for n in 65536 65537 10485760 104857600; do
    head -c "$n" /dev/urandom >"$T/src/f$n"
done
ok "dd 64 KiB" dd if="$T/src/f65536" of="$M/big/f65536" bs=64k status=none
ok "cp 64 KiB + 1" cp "$T/src/f65537" "$M/big/f65537"
ok "dd 10 MiB" dd if="$T/src/f10485760" of="$M/big/f10485760" bs=1M status=none
ok "cp 100 MiB" cp "$T/src/f104857600" "$M/big/f104857600"
for n in 65536 65537 10485760 104857600; do
    eq "size of $n" "$(stat -c %s "$M/big/f$n")" "$n"
done
(cd "$T/src" && sha256sum f65536 f65537 f10485760 f104857600) >"$T/sums"
ok "sha256 before remount" bash -c "cd '$M/big' && sha256sum -c --quiet '$T/sums'"
eq "64 KiB stays in its row" "$(ntracts)" "$((1 + 3 + 25))"
umount_fs
mount_fs
ok "sha256 after remount" bash -c "cd '$M/big' && sha256sum -c --quiet '$T/sums'"
ok "cp 10 MiB inside the mount" cp "$M/big/f10485760" "$M/big/copy"
eq "the copy" "$(sha256sum <"$M/big/copy")" "$(sha256sum <"$T/src/f10485760")"
ok "cmp" cmp "$M/big/f104857600" "$T/src/f104857600"

# ---- EIO never zeros (docs/format-blob.md "Reading: EIO never zeros") -----
# A 3,000,000-byte file (one tract): a mount whose blob folder is another
# host's has no record of its set, and on this mount a lost tract file
# reads EIO, never 3,000,000 zeros (both read zeros before the map).
head -c 3000000 /dev/urandom >"$T/src/lost"
ok "write 3,000,000 bytes" dd if="$T/src/lost" of="$M/big/lost" bs=1M conv=fsync status=none
mkdir -p "$T/mnt3"
"$POMFS" "127.0.0.1:$P_MDS" "$T/mnt3" -o "fsid=1,blob=$T/blob-other" -f >>"$T/pomfs3.log" 2>&1 &
FS3_PID=$!
wait_mounted "$T/mnt3" "$FS3_PID"
eq "another host's folder: the size" "$(stat -c %s "$T/mnt3/big/lost")" 3000000
nok "another host's folder: EIO, not zeros" "Input/output error" cat "$T/mnt3/big/lost"
fusermount3 -u "$T/mnt3"; wait "$FS3_PID"; FS3_PID=
lost=$(find "$T/blob-a" "$T/blob-b" -type f -size 3000000c)
eq "one tract file holds it" "$(wc -w <<<"$lost")" 1
ok "the disk loses it" rm "$lost"
umount_fs
mount_fs
nok "a lost tract: EIO, not zeros" "Input/output error" cat "$M/big/lost"
ok "rm the file" rm "$M/big/lost"

# ---- truncate across 64 KiB --------------------------------------------
head -c 1000 /dev/urandom >"$T/src/small"
cp "$T/src/small" "$M/big/t"
ok "truncate up to 100000" truncate -s 100000 "$M/big/t"
eq "size 100000" "$(stat -c %s "$M/big/t")" "100000"
cp "$T/src/small" "$T/src/t"; truncate -s 100000 "$T/src/t"
eq "zeros after the data" "$(sha256sum <"$M/big/t")" "$(sha256sum <"$T/src/t")"
ok "truncate down to 500" truncate -s 500 "$M/big/t"
eq "size 500" "$(stat -c %s "$M/big/t")" "500"
eq "first 500 bytes" "$(sha256sum <"$M/big/t")" "$(head -c 500 "$T/src/small" | sha256sum)"
ok "truncate 10 MiB file to 70000" truncate -s 70000 "$M/big/copy"
eq "cut copy" "$(sha256sum <"$M/big/copy")" "$(head -c 70000 "$T/src/f10485760" | sha256sum)"
ok "truncate it to 0" truncate -s 0 "$M/big/copy"
eq "empty" "$(stat -c %s "$M/big/copy")" "0"

# ---- sparse ---------------------------------------------------------------
ok "truncate -s 1G" truncate -s 1G "$M/big/sparse"
ok "write at the end" dd if="$T/src/small" of="$M/big/sparse" bs=1000 oflag=seek_bytes \
    seek=$(( (1<<30) - 1000 )) conv=notrunc status=none
eq "sparse size" "$(stat -c %s "$M/big/sparse")" "$((1<<30))"
lt "du of the sparse file (KiB)" "$(du -k "$M/big/sparse" | cut -f1)" 1024
eq "its middle reads zeros" "$(dd if="$M/big/sparse" bs=1M skip=300 count=4 status=none | tr -d '\0' | wc -c)" "0"
eq "its end" "$(tail -c 1000 "$M/big/sparse" | sha256sum)" "$(sha256sum <"$T/src/small")"
ok "write at 2^40" dd if="$T/src/small" of="$M/big/far" bs=1 count=10 seek=$((1<<40)) status=none
eq "size 2^40 + 10" "$(stat -c %s "$M/big/far")" "$(( (1<<40) + 10 ))"
lt "du of the 1 TiB file holding 10 bytes (KiB)" "$(du -k "$M/big/far" | cut -f1)" 8192
nok "write at 2^44" "too large" dd if="$T/src/small" of="$M/big/far" bs=1 count=1 seek=$((1<<44)) \
    conv=notrunc status=none

# ---- fallocate ------------------------------------------------------------
ok "fallocate 8 MiB" fallocate -l 8M "$M/big/fa"
eq "fallocate size" "$(stat -c %s "$M/big/fa")" "8388608"
lt "fallocate allocated (du KiB > 8191)" 8191 "$(du -k "$M/big/fa" | cut -f1)"
ok "fallocate keep size" fallocate -n -o 8M -l 4M "$M/big/fa"
eq "size kept" "$(stat -c %s "$M/big/fa")" "8388608"
ok "fill it" dd if="$T/src/f10485760" of="$M/big/fa" bs=1M count=8 conv=notrunc status=none
ok "punch a hole" fallocate -p -o 1M -l 2M "$M/big/fa"
eq "hole reads zeros" "$(dd if="$M/big/fa" bs=1M skip=1 count=2 status=none | tr -d '\0' | wc -c)" "0"
eq "bytes around the hole" "$(dd if="$M/big/fa" bs=1M skip=3 count=5 status=none | sha256sum)" \
    "$(dd if="$T/src/f10485760" bs=1M skip=3 count=5 status=none | sha256sum)"
nok "collapse range" "not supported" fallocate -c -o 0 -l 4M "$M/big/fa"
ok "fallocate of a small file migrates it" bash -c "cp '$T/src/small' '$M/big/fs' && fallocate -l 1M '$M/big/fs'"
eq "it kept its bytes" "$(head -c 1000 "$M/big/fs" | sha256sum)" "$(sha256sum <"$T/src/small")"

# ---- page cache across two mounts (keep_cache only when unchanged) --------
mkdir -p "$T/mnt2"
"$POMFS" "127.0.0.1:$P_MDS" "$T/mnt2" -o "fsid=1,blob=$BLOBS" -f >>"$T/pomfs2.log" 2>&1 &
FS2_PID=$!
for i in $(seq 300); do mountpoint -q "$T/mnt2" && break; sleep 0.1; done
for n in 3000 300000; do # an inline and a blob file
    head -c "$n" /dev/urandom >"$T/src/v1"; head -c "$n" /dev/urandom >"$T/src/v2"
    cp "$T/src/v1" "$M/big/cache$n"
    eq "$n B: first read" "$(sha256sum <"$M/big/cache$n")" "$(sha256sum <"$T/src/v1")"
    eq "$n B: cached read" "$(sha256sum <"$M/big/cache$n")" "$(sha256sum <"$T/src/v1")"
    ok "$n B: same size, new bytes through mount 2" dd if="$T/src/v2" of="$T/mnt2/big/cache$n" \
        conv=notrunc status=none
    eq "$n B: mount 1 sees them at its next open" "$(sha256sum <"$M/big/cache$n")" \
        "$(sha256sum <"$T/src/v2")"
done
fusermount3 -u "$T/mnt2"; wait "$FS2_PID"; FS2_PID=

# ---- removal --------------------------------------------------------------
# Tracts go once the removal is committed: at the mount's next sync (an
# fsync of any file or folder), past 64 queued files, or at unmount.
msync() { python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$M"; }
before=$(ntracts)
ok "rm the 100 MiB file" rm "$M/big/f104857600"
eq "its 25 tracts wait for the commit" "$(ntracts)" "$before"
ok "a sync of the mount" msync
eq "its 25 tracts are gone" "$(ntracts)" "$((before - 25))"
ok "rm -rf the rest" rm -rf "$M/big"
ok "a sync of the mount" msync
eq "no tract left" "$(ntracts)" "0"

if [ "$BENCH" == "--bench" ]; then
    mbs() { # bytes seconds
        python3 -c "import sys; print('%.0f' % (int(sys.argv[1]) / float(sys.argv[2]) / 1e6))" "$1" "$2"
    }
    run() { # label command...
        local label=$1 t0 t1
        shift
        t0=$(date +%s.%N)
        "$@" >/dev/null 2>>"$T/cmd.log" || { FAIL=$((FAIL+1)); echo "FAIL: $label"; }
        t1=$(date +%s.%N)
        echo "$label: $(mbs $((1<<30)) "$(python3 -c "print($t1 - $t0)")") MB/s"
    }
    mkdir -p "$T/host"
    # Cold reads where the host lets us drop its caches (root); the mount is
    # remounted before its read either way, so the kernel's FUSE cache is empty.
    drop() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }
    drop
    run "pomfs write 1 GiB (dd bs=1M conv=fsync)" dd if=/dev/zero of="$M/bench" bs=1M count=1024 conv=fsync
    umount_fs; mount_fs; drop
    run "pomfs read 1 GiB (dd bs=1M, remounted, caches dropped)" dd if="$M/bench" of=/dev/null bs=1M
    drop
    run "host write 1 GiB (dd bs=1M conv=fsync)" dd if=/dev/zero of="$T/host/bench" bs=1M count=1024 conv=fsync
    drop
    run "host read 1 GiB (dd bs=1M, caches dropped)" dd if="$T/host/bench" of=/dev/null bs=1M
    rm -f "$M/bench" "$T/host/bench"
fi
umount_fs

eq "no sanitizer report" "$(grep -c 'Sanitizer' "$T/pomfs.log" "$T/mds.log" | grep -vc ':0$')" "0"
check_done
