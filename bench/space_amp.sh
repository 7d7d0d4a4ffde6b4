#!/bin/bash
# space_amp.sh POMCTL POMFS [DEVICE_MIB] [FILES] -- space amplification of a
# small-file workload at steady state (docs/format-mdsl.md "A full disk"):
# the whole folder of `pomctl up --mount` on a tmpfs of DEVICE_MIB (default
# 64); FILES 8 KiB files (default 3000) in 16 directories, then a quarter
# of them overwritten and another quarter removed, `sync`; then, past the
# MDSL's idle roll (60 s), the folder's bytes on disk are sampled each 10 s
# until two samples agree (GC settled, at most 400 s). Prints: logical bytes, bytes on disk, their ratio.
# Runs as root (mount). Stops the cluster and unmounts at the end.
set -eu
POMCTL=$(realpath "$1"); DEV=${3:-64}; FILES=${4:-3000}
D=$(mktemp -d /tmp/space-amp.XXXXXX)
mount -t tmpfs -o size=${DEV}m tmpfs "$D"
trap '"$POMCTL" down --data "$D/data" >/dev/null 2>&1; umount -l "$D"; rmdir "$D"' EXIT
"$POMCTL" up --data "$D/data" --mount "$D/m" >/dev/null
python3 - "$D/m" "$FILES" <<'PY'
import os, sys
m, n = sys.argv[1], int(sys.argv[2])
for d in range(16):
    os.mkdir(os.path.join(m, "d%02d" % d))
def path(i): return os.path.join(m, "d%02d" % (i % 16), "f%06d" % i)
for i in range(n):
    with open(path(i), "wb") as f:
        f.write(os.urandom(8192))
os.sync()
for i in range(0, n, 4):
    with open(path(i), "wb") as f:
        f.write(os.urandom(8192))
for i in range(1, n, 4):
    os.unlink(path(i))
os.sync()
PY
logical=$(( (FILES - (FILES + 2) / 4) * 8192 ))
prev=-1
sleep 60
for i in $(seq 34); do
    sleep 10
    now=$(du -sb "$D/data" | cut -f1)
    [ "$now" = "$prev" ] && break
    prev=$now
done
"$POMCTL" --data "$D/data" site stat | cut -c1-120
echo "device ${DEV} MiB, $FILES files: logical $logical bytes, on disk $now bytes" \
     "($(du -sb "$D/data/mdsl" | cut -f1) in mdsl), ratio $(python3 -c "print(round($now/$logical, 2))")"
