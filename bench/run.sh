#!/usr/bin/env bash
# bench/run.sh -- the file-system benchmark suite in one command: Pomegranate
# (pom-mdsl + pom-mds + pomfs) side by side with native tmpfs, libfuse's
# passthrough_ll over tmpfs (the FUSE ceiling) and MooseFS from Debian, all
# started here on loopback, all stopped here by pid (trap; fusermount3 -u).
# Prints one Markdown table per workload with ops/s, p50/p99 latency and
# the ratio of pomfs to each reference; writes results.jsonl, report.md and
# PNG plots to the output folder. See docs/bench.md.
#
# usage: bench/run.sh [--quick] [--out DIR] [--build DIR] [--no-build]
#                     [--scale N] [--only W[,W...]]
#   --quick     small sizes, for CI: checks the suite runs (< 3 minutes)
#   --out DIR   results folder (default bench/results/DATE, git-ignored)
#   --build DIR build folder (default build-bench, Release)
#   --no-build  use the binaries as they are
#   --scale N   entries of the directory-scale run on pomfs (default
#               1000000, --quick 3000; 10000000 takes about an hour here)
#   --only W    workloads among mdtest,small,fsmark,fio,dirscale,kv,dist,grow,
#               replicas,blob (dist: 1, 2 and 4 pom-mds through R2,
#               docs/mds-model.md; grow: a third MDSL joins under creates,
#               docs/mdsl-scale.md; replicas: mdtest on 3 MDSL with 1 and 3
#               replicas, docs/mdsl-replicas.md; blob: fio on the local and
#               the mdsl blob backends, docs/format-blob.md)
# Exit 1 when Pomegranate fails (a daemon does not start, an operation
# errs); a reference that cannot start or run is reported as
# "reference X unavailable: reason" and skipped.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0 OUT= BUILD=$ROOT/build-bench DOBUILD=1 SCALE= ONLY=mdtest,small,fsmark,fio,dirscale,kv,dist,grow,replicas,blob
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT=$2; shift ;;
    --build) BUILD=$2; shift ;;
    --no-build) DOBUILD=0 ;;
    --scale) SCALE=$2; shift ;;
    --only) ONLY=$2; shift ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=${OUT:-$ROOT/bench/results/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
J=$OUT/results.jsonl
: >"$J"
want() { [[ ",$ONLY," == *",$1,"* ]]; }
say() { printf '\n==== %s (%s)\n' "$*" "$(date -u +%H:%M:%S)"; }
START=$(date +%s)

# ---- sizes -------------------------------------------------------------
if [ $QUICK = 1 ]; then
    MD_N=100 MD_HN=100 MD_I=1 MD_PROCS="1 2" SMALL_N=50 FSM_N=200
    FIO_SIZE=32M FIO_RT=2 BLOB_SIZE=32M DS_N=${SCALE:-3000} DS_STEP=1000 DS_LS=3000 DS_REF=3000
    KV_OPS=2000 KV_T="1 2" KV_POPS=4000 KV_DEPTHS="16 64"
    DIST_N=2000 DIST_DIR_N=100 DIST_PROBES=10 DIST_SPLIT=256
    GROW_N=40000 GROW_AT=50 GROW_WINDOW=2 GROW_WAIT=60 GROW_SPLIT=256
else
    MD_N=3000 MD_HN=2000 MD_I=3 MD_PROCS="1 2 4" SMALL_N=2000 FSM_N=5000
    # Directory scale reports at 1000, 2000, 5000, 10000, ... (DS_STEP=0).
    FIO_SIZE=1G FIO_RT=15 BLOB_SIZE=256M DS_N=${SCALE:-1000000} DS_STEP=0 DS_LS=1000000,10000000
    DS_REF=14000 KV_OPS=50000 KV_T="1 4" KV_POPS=200000 KV_DEPTHS="16 64"
    # dist: ~1 minute per MDS count here (N files in one directory, 8
    # directories of DIST_DIR_N, 2 x DIST_PROBES fresh clients).
    DIST_N=300000 DIST_DIR_N=10000 DIST_PROBES=200 DIST_SPLIT=2048
    # grow: 2 MDS, a third MDSL at GROW_AT% of GROW_N creates; the creates
    # go on until the join is STABLE (at most GROW_WAIT s after it starts).
    GROW_N=600000 GROW_AT=50 GROW_WINDOW=5 GROW_WAIT=300 GROW_SPLIT=2048
fi

# ---- build -------------------------------------------------------------
if [ $DOBUILD = 1 ]; then
    say "build ($BUILD)"
    [ -f "$BUILD/CMakeCache.txt" ] ||
        cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
    cmake --build "$BUILD" -j2 --target bench_mdtest bench_fs bench_kv bench_dist pom-mds \
        pom-mdsl pom-r2 pomctl pomfs \
        || { echo "run.sh: build failed" >&2; exit 1; }
fi
B=$BUILD/bench
NEED=()
for w in mdtest small fsmark fio dirscale kv; do
    want $w && NEED=("$B/bench_mdtest" "$B/bench_fs" "$B/bench_kv" "$BUILD/fuse/pomfs")
done
{ want dist || want grow; } && NEED+=("$B/bench_dist" "$BUILD/r2/pom-r2" "$BUILD/cli/pomctl")
for x in "${NEED[@]}"; do
    [ -x "$x" ] || { echo "run.sh: missing $x (build first)" >&2; exit 1; }
done

# ---- bring everything up -------------------------------------------------
source "$ROOT/bench/refs.sh"

# ---- the dist workload's cluster: 1 R2, 2 MDSL, K pom-mds ---------------------
# As tests/dist/test_dist_mds.sh: free loopback ports, one folder, stopped
# by pid (MDS first, so they commit, then MDSL, then R2).
dist_down() {
    local i p
    for ((i=${#DIST_PIDS[@]}-1; i>=0; i--)); do
        p=${DIST_PIDS[i]}
        kill -TERM "$p" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    DIST_PIDS=()
}
dist_up() { # DIR K [SPLIT]: sets DIST_R2 DIST_MDS_PIDS DIST_MDS_LOGS DIST_MDSL_PIDS
    local d=$1 k=$2 split=${3:-$DIST_SPLIT} p i
    mkdir -p "$d"
    p=$(free_port)
    # A site failed only after 30 missed heartbeats: a false failure on the
    # loaded 2 cores would change ring 0 under the benchmark.
    "$BUILD/r2/pom-r2" --data "$d" --listen "127.0.0.1:$p" --fail-after 30 >"$d/r2.log" 2>&1 &
    DIST_PIDS+=("$!")
    wait_port "$p" || { echo "pom-r2 did not start: $(tail -3 "$d/r2.log")"; return 1; }
    DIST_R2=127.0.0.1:$p DIST_MDS_PIDS= DIST_MDS_LOGS= DIST_MDSL_PIDS=
    for i in 1 2; do
        p=$(free_port)
        mkdir -p "$d/mdsl$i"
        "$BUILD/mdsl/pom-mdsl" --dir "$d/mdsl$i" --listen "127.0.0.1:$p" --r2 "$DIST_R2" \
            >"$d/mdsl$i.log" 2>&1 &
        DIST_PIDS+=("$!"); DIST_MDSL_PIDS+=${DIST_MDSL_PIDS:+,}$!
        wait_port "$p" || { echo "pom-mdsl did not start: $(tail -3 "$d/mdsl$i.log")"; return 1; }
        # Registered before the first MDS: R2 freezes ring 1 then (docs/r2.md).
        for _ in $(seq 300); do [ -s "$d/mdsl$i/site_id" ] && break; sleep 0.1; done
        [ -s "$d/mdsl$i/site_id" ] || { echo "pom-mdsl did not register with R2"; return 1; }
    done
    for i in $(seq "$k"); do
        p=$(free_port)
        mkdir -p "$d/mds$i"
        "$BUILD/mds/pom-mds" --r2 "$DIST_R2" --dir "$d/mds$i" --listen "127.0.0.1:$p" \
            --split-threshold "$split" >"$d/mds$i.log" 2>&1 &
        DIST_PIDS+=("$!")
        DIST_MDS_PIDS+=${DIST_MDS_PIDS:+,}$! DIST_MDS_LOGS+=${DIST_MDS_LOGS:+,}$d/mds$i.log
        wait_port "$p" || { echo "pom-mds did not start: $(tail -3 "$d/mds$i.log")"; return 1; }
    done
    # Every MDS takes the final ring 0 from its next heartbeat (as pomctl up).
    sleep 2.5
    POM_R2=$DIST_R2 "$BUILD/cli/pomctl" fs create distfs >"$d/pomctl.log" 2>&1 ||
        { echo "pomctl fs create failed: $(tail -3 "$d/pomctl.log")"; return 1; }
}
# A bench_dist run's end: shows OUT/NAME.out and OUT/NAME.err (every
# pom_open logs two lines: dropped, the rest kept), records a failure.
bench_done() { # RC NAME WHAT
    local e=$OUT/$2.err
    cat "$OUT/$2.out"
    grep -av ' pom: \(fs distfs has no blob\|r2 agent: registered\)' "$e" >"$e.1"
    mv "$e.1" "$e"
    head -20 "$e"
    if [ "$1" -ne 0 ]; then
        POM_FAILED+=("$3")
        echo "POMEGRANATE FAILED: $3 (rc $1)"
    fi
}
# The MDSL bench_dist started (grow) joins DIST_PIDS after the two others,
# so dist_down stops it after the MDS (they commit first).
grow_adopt() {
    if [ -n "$GROW_PIDFILE" ] && [ -s "$GROW_PIDFILE" ]; then
        DIST_PIDS=("${DIST_PIDS[@]:0:3}" "$(cat "$GROW_PIDFILE")" "${DIST_PIDS[@]:3}")
    fi
    GROW_PIDFILE=
}
UNAVAILABLE=() POM_FAILED=()
W=$(mktemp -d "${TMPDIR:-/tmp}/pombench.XXXXXX")
chmod 755 "$W"  # MooseFS's daemons run as user mfs
REDIS_PID=
DIST_PIDS=()   # the dist workload's cluster of the moment (dist_down)
GROW_PIDFILE=  # the MDSL bench_dist started (grow), until it joins DIST_PIDS
REP_DATA=      # the replicas or blob workload's `pomctl up` cluster of the moment
REP_MOUNTS=()  # its extra pomfs mounts (blob), as "PID DIR"
rep_down() {
    local m
    for m in "${REP_MOUNTS[@]}"; do
        fusermount3 -u -z "${m#* }" 2>/dev/null
        kill "${m%% *}" 2>/dev/null
        wait "${m%% *}" 2>/dev/null
    done
    REP_MOUNTS=()
    [ -n "$REP_DATA" ] || return 0
    "$BUILD/cli/pomctl" down --data "$REP_DATA" >/dev/null 2>&1
    REP_DATA=
}
cleanup() {
    grow_adopt
    dist_down
    rep_down
    [ -n "$REDIS_PID" ] && { kill "$REDIS_PID" 2>/dev/null; wait "$REDIS_PID" 2>/dev/null; }
    bench_cleanup
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# Only the dist workload: it starts its own clusters, no reference needed.
FSWORK=0
for w in mdtest small fsmark fio dirscale kv; do want $w && FSWORK=1; done
NOFUSE=0
[ $FSWORK = 1 ] && say "start: tmpfs, passthrough_ll, MooseFS, Pomegranate"
if [ $FSWORK = 0 ]; then
    :
elif [ ! -c /dev/fuse ] || ! command -v fusermount3 >/dev/null; then
    # As tests/fuse/test_pomfs.sh skips: no mount here, only the daemons.
    NOFUSE=1
    unavailable "FUSE (pomfs, passthrough_ll, MooseFS)" "no /dev/fuse or no fusermount3: file-system workloads skipped"
fi
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
if [ $QUICK = 1 ]; then TSIZE=2g; else TSIZE=8g; fi
tmpfs_up "$W/fs" "$TSIZE" || { echo "run.sh: no tmpfs to work in" >&2; exit 1; }
mkdir -p "$W/fs/native"
MNT_tmpfs=$W/fs/native
if [ $FSWORK = 1 ] && [ $NOFUSE = 0 ]; then
    passthrough_up "$W/fs"
    moosefs_up "$W/fs"
fi
if [ $FSWORK = 1 ]; then
    pom_up "$W/fs" "$BUILD" || { echo "run.sh: Pomegranate did not start" >&2; exit 1; }
fi
TARGETS=(pomfs)
[ $FSWORK = 0 ] && TARGETS=() MNT_tmpfs=
[ $NOFUSE = 1 ] && TARGETS=() ONLY=kv$(want dist && echo ,dist)$(want grow && echo ,grow)
for t in tmpfs passthrough moosefs; do
    eval "m=\${MNT_$t:-}"
    [ -n "$m" ] && TARGETS+=("$t")
done
echo "targets: ${TARGETS[*]}"
mnt() { eval "echo \$MNT_$1"; }

# Runs a workload command on target t; Pomegranate's failures are fatal at
# the end, a reference's make it unavailable for the rest of the run.
run_on() { # TARGET CMD...: the command's output, without table headers
    local t=$1 rc; shift
    "$@" >"$W/run_on.out" 2>&1
    rc=$?
    grep -v '^bench ' "$W/run_on.out"
    if [ $rc -ne 0 ]; then
        if [ "$t" = pomfs ]; then
            POM_FAILED+=("$*")
            echo "POMEGRANATE FAILED: $*"
        else
            unavailable "$t" "a workload failed: $*"
        fi
        return 1
    fi
}

# ---- mdtest --------------------------------------------------------------
if want mdtest; then
    say "mdtest-easy and mdtest-hard"
    for t in "${TARGETS[@]}"; do
        d=$(mnt "$t")/md
        mkdir -p "$d"
        for p in $MD_PROCS; do
            run_on "$t" "$B/bench_mdtest" -F -u -n "$MD_N" -i "$MD_I" -p "$p" -d "$d" \
                --label "$t" --bench mdtest-easy --json "$J"
            # passthrough_ll holds an fd per live file (limit 20,000): the
            # hard run keeps at most 2 x MD_HN files at once.
            [ "$p" -gt 2 ] && continue
            run_on "$t" "$B/bench_mdtest" -F -w 3901 -e 3901 -N 1 -n "$MD_HN" -i "$MD_I" \
                -p "$p" -d "$d" --label "$t" --bench mdtest-hard --json "$J"
        done
        [ "$t" = pomfs ] && "$B/bench_mdtest" -n "$((MD_N / 3))" -u -p 1 -d "$d" --label "$t" \
            --bench mdtest-dirs --json "$J"
        rm -rf "$d"
    done
fi

# ---- small files -----------------------------------------------------------
if want small; then
    say "small files: 0-1000 B, 4 KiB, 16 KiB, 64 KiB, 256 KiB"
    for t in "${TARGETS[@]}"; do
        d=$(mnt "$t")/sf
        mkdir -p "$d"
        for s in 0-1000 4k 16k 64k 256k; do
            run_on "$t" "$B/bench_fs" small -d "$d" --size "$s" -n "$SMALL_N" -p 1 \
                --label "$t" --json "$J"
        done
        rm -rf "$d"
    done
fi

# ---- fs_mark (external reference tool) -------------------------------------
if want fsmark; then
    say "fs_mark 4 KiB files, no sync"
    if command -v fs_mark >/dev/null; then
        for t in "${TARGETS[@]}"; do
            # fs_mark rejects -d paths of 40 bytes or more: a short relative name.
            (cd "$(mnt "$t")" && fs_mark -d fsm -s 4096 -n "$FSM_N" -t 1 -S 0 -L 1 -k) \
                >"$OUT/fsmark.$t.out" 2>&1
            python3 "$ROOT/bench/report.py" fsmark "$OUT/fsmark.$t.out" "$t" \
                "n=$FSM_N,size=4096" | tee -a "$J"
            rm -rf "$(mnt "$t")/fsm"
        done
    else
        unavailable fs_mark "not installed (Debian package fsmark)"
    fi
fi

# ---- large files (fio) -------------------------------------------------------
if want fio; then
    say "large files: fio sequential 1 MiB write/read of $FIO_SIZE, 4 KiB random read"
    if command -v fio >/dev/null; then
        for t in "${TARGETS[@]}"; do
            d=$(mnt "$t")
            f="--directory=$d --filename=fio.dat --size=$FIO_SIZE --ioengine=psync --output-format=json"
            fio --name=seqw --rw=write --bs=1M --end_fsync=1 $f >"$OUT/fio.$t.w.json" 2>"$OUT/fio.$t.w.err"
            python3 "$ROOT/bench/report.py" fio "$OUT/fio.$t.w.json" "$t" "seq write 1M" \
                "size=$FIO_SIZE" | tee -a "$J"
            if grep -q '"na"' <(tail -1 "$J"); then
                # Nothing to read back (pomfs before the blob tier: EFBIG).
                na=$(tail -1 "$J" | python3 -c 'import json,sys; print(json.load(sys.stdin)["na"])')
                for ph in "seq read 1M" "rand read 4k"; do
                    echo "{\"bench\":\"large-files\",\"target\":\"$t\",\"phase\":\"$ph\",\"param\":\"size=$FIO_SIZE\",\"procs\":1,\"na\":\"$na\"}" | tee -a "$J"
                done
                [ "$t" = pomfs ] || [ "$na" = EFBIG ] || unavailable "$t" "fio: $na"
                rm -f "$d/fio.dat"
                continue
            fi
            fio --name=seqr --rw=read --bs=1M $f >"$OUT/fio.$t.r.json" 2>"$OUT/fio.$t.r.err"
            python3 "$ROOT/bench/report.py" fio "$OUT/fio.$t.r.json" "$t" "seq read 1M" \
                "size=$FIO_SIZE" | tee -a "$J"
            fio --name=randr --rw=randread --bs=4k --time_based --runtime="$FIO_RT" $f \
                >"$OUT/fio.$t.rr.json" 2>"$OUT/fio.$t.rr.err"
            python3 "$ROOT/bench/report.py" fio "$OUT/fio.$t.rr.json" "$t" "rand read 4k" \
                "size=$FIO_SIZE" | tee -a "$J"
            rm -f "$d/fio.dat"
        done
    else
        unavailable fio "not installed (Debian package fio)"
    fi
fi

# ---- directory scale -----------------------------------------------------------
if want dirscale; then
    say "directory scale: pomfs to $DS_N entries, references to $DS_REF"
    for t in "${TARGETS[@]}"; do
        n=$DS_REF step=$DS_STEP extra=()
        case $t in
        pomfs) n=$DS_N extra=(--pid "$POM_MDS_PID" --ls "$DS_LS") ;;
        # tmpfs costs ~1 KiB of RAM per inode: at most a million.
        tmpfs) n=$((DS_N < 1000000 ? DS_N : 1000000)) extra=(--ls "$DS_LS") ;;
        moosefs) continue ;;  # metadata rates are in mdtest; its scale run is too slow here
        esac
        run_on "$t" "$B/bench_fs" dirscale -d "$(mnt "$t")" -n "$n" --step "$step" "${extra[@]}" \
            --label "$t" --json "$J"
        [ "$t" = pomfs ] || rm -rf "$(mnt "$t")/scale"
    done
    # The MDS's own view: counters, and the bytes its cache spends per row
    # (logged on SIGHUP; "cache: ... rows, ... bytes (X per row)").
    if [ -n "$POM_MDS_PID" ] && kill -HUP "$POM_MDS_PID" 2>/dev/null; then
        sleep 1
        tail -n 40 "$W/fs/pom/mds.log" >"$OUT/mds-counters.log"
        per=$(grep -o 'rows, [0-9]* bytes ([0-9.]* per row)' "$OUT/mds-counters.log" | tail -1)
        if [ -n "$per" ]; then
            rows=$(grep -o '[0-9]* rows, [0-9]* bytes' "$OUT/mds-counters.log" | tail -1 | cut -d' ' -f1)
            echo "{\"bench\":\"dir-scale\",\"target\":\"pomfs\",\"phase\":\"mds cache\",\"param\":\"rows=$rows\",\"procs\":1,\"ops\":0,\"secs\":0,\"ops_per_s\":0,\"p50_us\":0,\"p99_us\":0,\"mds_bytes_per_row\":$(sed 's/.*(\([0-9.]*\) per row)/\1/' <<<"$per")}" | tee -a "$J"
        fi
    fi
fi

# ---- key/value -------------------------------------------------------------------
if want kv; then
    say "key/value: pom_kv vs Redis vs LevelDB, 1000-byte values"
    RPORT=
    if command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then
        RPORT=$(free_port)
        mkdir -p "$W/fs/redis"
        # As the others: acknowledged from memory, a log written behind.
        redis-server --port "$RPORT" --bind 127.0.0.1 --dir "$W/fs/redis" --save '' \
            --appendonly yes --appendfsync everysec --daemonize no >"$OUT/redis.log" 2>&1 &
        REDIS_PID=$!
        wait_port "$RPORT" 100 || { unavailable redis "redis-server did not listen (see redis.log)"; RPORT=; }
    else
        unavailable redis "not installed (Debian packages redis-server redis-tools)"
    fi
    for th in $KV_T; do
        run_on pomfs "$B/bench_kv" --mds "$POM_MDS_ADDR" --fsid 2 -t "$th" -n "$KV_OPS" \
            --json "$J"
        if [ -n "$RPORT" ]; then
            { redis-benchmark -h 127.0.0.1 -p "$RPORT" -c "$th" -n "$KV_OPS" -d 1000 -P 1 \
                  -r 100000 --csv -t set,get
              redis-benchmark -h 127.0.0.1 -p "$RPORT" -c "$th" -n "$KV_OPS" -P 1 \
                  -r 100000 --csv del 'key:__rand_int__'
            } >"$OUT/redis.$th.csv" 2>&1
            python3 "$ROOT/bench/report.py" redis "$OUT/redis.$th.csv" "$th" | tee -a "$J"
        fi
    done
    # Pipelined, one client: pom_kv_batch of D operations beside
    # redis-benchmark -P D (docs/bench.md "Key/value pipelining").
    for d in $KV_DEPTHS; do
        run_on pomfs "$B/bench_kv" --mds "$POM_MDS_ADDR" --fsid 2 -t 1 -n "$KV_POPS" \
            --depth "$d" --no-leveldb --json "$J"
        if [ -n "$RPORT" ]; then
            { redis-benchmark -h 127.0.0.1 -p "$RPORT" -c 1 -n "$KV_POPS" -d 1000 -P "$d" \
                  -r 100000 --csv -t set,get
              redis-benchmark -h 127.0.0.1 -p "$RPORT" -c 1 -n "$KV_POPS" -P "$d" \
                  -r 100000 --csv del 'key:__rand_int__'
            } >"$OUT/redis.P$d.csv" 2>&1
            python3 "$ROOT/bench/report.py" redis "$OUT/redis.P$d.csv" 1 "$d" | tee -a "$J"
        fi
    done
fi

# ---- many MDS -------------------------------------------------------------
if want dist; then
    say "dist: 1, 2 and 4 pom-mds (2 MDSL, 1 R2), $DIST_N files in one directory, 8 threads"
    for k in 1 2 4; do
        d=$W/fs/dist/k$k
        if ! dist_up "$d" "$k"; then
            POM_FAILED+=("dist: cluster with $k MDS did not start")
            echo "POMEGRANATE FAILED: dist cluster with $k MDS did not start"
            dist_down
            continue
        fi
        "$B/bench_dist" --r2 "$DIST_R2" --fs distfs -n "$DIST_N" -t 8 --dir-n "$DIST_DIR_N" \
            --probes "$DIST_PROBES" --mds-pids "$DIST_MDS_PIDS" --mds-logs "$DIST_MDS_LOGS" \
            --mdsl-pids "$DIST_MDSL_PIDS" --label "$k" --json "$J" >"$OUT/dist.k$k.out" 2>"$OUT/dist.k$k.err"
        bench_done $? "dist.k$k" "bench_dist with $k MDS"
        grep -ahE 'dist: site|stats: (create|lookup|commit|group) ' "$d"/mds*.log \
            >"$OUT/dist.k$k.mds-counters.log"
        dist_down
    done
    python3 "$ROOT/bench/report.py" dist-table "$J"
fi

# ---- adding an MDSL under load (docs/mdsl-scale.md) ---------------------------------
if want grow; then
    say "grow: 2 pom-mds, 2 MDSL + a third at $GROW_AT% of $GROW_N creates, 8 threads"
    d=$W/fs/dist/grow
    if dist_up "$d" 2 "$GROW_SPLIT"; then
        p=$(free_port)
        mkdir -p "$d/mdsl3"
        GROW_PIDFILE=$d/mdsl3.pid
        # bench_dist runs this with sh -c at GROW_AT%: the pid it writes is
        # pom-mdsl's (exec), stopped below with the others.
        cmd="echo \$\$ >'$GROW_PIDFILE'; exec '$BUILD/mdsl/pom-mdsl' --dir '$d/mdsl3'"
        cmd+=" --listen 127.0.0.1:$p --r2 $DIST_R2 >'$d/mdsl3.log' 2>&1"
        "$B/bench_dist" --r2 "$DIST_R2" --fs distfs -n "$GROW_N" -t 8 --add-mdsl-at "$GROW_AT" \
            --add-mdsl-cmd "$cmd" --pomctl "$BUILD/cli/pomctl" --window "$GROW_WINDOW" \
            --grow-wait "$GROW_WAIT" --mds-pids "$DIST_MDS_PIDS" --mds-logs "$DIST_MDS_LOGS" \
            --mdsl-pids "$DIST_MDSL_PIDS" --mdsl-logs "$d/mdsl1.log,$d/mdsl2.log,$d/mdsl3.log" \
            --mdsl-dirs "$d/mdsl1,$d/mdsl2,$d/mdsl3" --label 2 --json "$J" \
            >"$OUT/grow.out" 2>"$OUT/grow.err"
        bench_done $? grow "bench_dist --add-mdsl-at $GROW_AT"
        grow_adopt
        grep -ahE 'dist: site|stats: (group|groups_|move)' "$d"/mds*.log >"$OUT/grow.mds-counters.log"
        grep -ahE 'stats: tables' "$d"/mdsl*.log >"$OUT/grow.mdsl-counters.log"
        grep -ahiE 'ring ?1|ring-1' "$d/r2.log" >"$OUT/grow.r2-ring1.log"
    else
        POM_FAILED+=("grow: cluster did not start")
        echo "POMEGRANATE FAILED: grow cluster did not start"
    fi
    dist_down
    python3 "$ROOT/bench/report.py" grow-table "$J"
fi

# ---- the cost of MDSL replicas (docs/mdsl-replicas.md) ------------------------------
# Two `pomctl up` clusters of 3 MDSL, one keeping each slice once and one
# three times, the same mdtest runs on each; the MDSL's own counter of
# record bytes appended (pom_mdsl_written_bytes_total, from /metrics)
# gives what each file cost the storage tier.
mdsl_written() { # DATA: the sum of pom_mdsl_written_bytes_total over its MDSL
    python3 - "$1" <<'PY'
import glob, sys, urllib.request
total = 0
for f in glob.glob(sys.argv[1] + "/run/pom-mdsl*.metrics"):
    addr = open(f).read().split()[0]
    body = urllib.request.urlopen("http://%s/metrics" % addr, timeout=10).read().decode()
    for line in body.splitlines():
        if line.startswith("pom_mdsl_written_bytes_total "):
            total += int(float(line.split()[1]))
print(total)
PY
}
if want replicas && [ $NOFUSE = 0 ]; then
    say "replicas: mdtest-easy and -hard on 3 MDSL, slices kept once and three times"
    for r in 1 3; do
        REP_DATA=$W/fs/rep$r
        if ! "$BUILD/cli/pomctl" up --data "$REP_DATA" --mdsl 3 --mdsl-replicas "$r" \
                --mount "$REP_DATA/mnt" >"$OUT/replicas-r$r.up" 2>&1; then
            POM_FAILED+=("replicas: pomctl up --mdsl-replicas $r")
            echo "POMEGRANATE FAILED: pomctl up --mdsl-replicas $r: $(tail -3 "$OUT/replicas-r$r.up")"
            rep_down
            continue
        fi
        d=$REP_DATA/mnt/md
        mkdir -p "$d"
        run_on pomfs "$B/bench_mdtest" -F -u -n "$MD_N" -i "$MD_I" -p 2 -d "$d" \
            --label "r=$r" --bench replicas-easy --json "$J"
        run_on pomfs "$B/bench_mdtest" -F -w 3901 -e 3901 -N 1 -n "$MD_HN" -i "$MD_I" -p 2 \
            -d "$d" --label "r=$r" --bench replicas-hard --json "$J"
        # What the files cost the MDSL: the hard run's files created and
        # kept (a create and its remove inside one snapshot interval never
        # reach the MDSL), made durable by an fsync of their folder.
        mkdir -p "$d/keep"
        w0=$(mdsl_written "$REP_DATA")
        run_on pomfs "$B/bench_mdtest" -F -C -w 3901 -n "$MD_HN" -i 1 -p 2 -d "$d/keep" \
            --label "r=$r" --bench replicas-keep --json "$W/replicas-keep.jsonl"
        python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' \
            "$d/keep/mdtest.0/shared"
        w1=$(mdsl_written "$REP_DATA")
        echo "{\"bench\":\"replicas-bytes\",\"target\":\"r=$r\",\"phase\":\"mdsl record bytes\",\"replicas\":$r,\"bytes\":$((w1 - w0)),\"files\":$((MD_HN * 2))}" >>"$J"
        rep_down
    done
    python3 "$ROOT/bench/report.py" replicas-table "$J"
fi

# ---- large files on the blob backends (docs/format-blob.md) -------------------------
# One `pomctl up` cluster of 3 MDSL: its default fs (backend local, a
# folder of this host) and two fs on the mdsl backend with 1 and 3 copies,
# each mounted; fio's sequential 1 MiB write (end_fsync) and read and its
# 4 KiB random reads on each, side by side.
if want blob && [ $NOFUSE = 0 ] && command -v fio >/dev/null; then
    say "blob: fio on the local backend and on mdsl with 1 and 3 copies ($BLOB_SIZE)"
    REP_DATA=$W/fs/blob
    if "$BUILD/cli/pomctl" up --data "$REP_DATA" --mdsl 3 --mount "$REP_DATA/local" \
            >"$OUT/blob.up" 2>&1; then
        for c in 1 3; do
            m=$REP_DATA/mdsl$c
            mkdir -p "$m"
            "$BUILD/cli/pomctl" --data "$REP_DATA" fs create "mb$c" --blob-backend mdsl \
                --copies "$c" >>"$OUT/blob.up" 2>&1 &&
            "$BUILD/cli/pomctl" --data "$REP_DATA" fs key "mb$c" --out "$REP_DATA/mb$c.key" \
                >>"$OUT/blob.up" 2>&1 || { POM_FAILED+=("blob: fs create mb$c"); continue; }
            "$BUILD/fuse/pomfs" "$(cat "$REP_DATA/r2.addr")" "$m" -f \
                -o "fs=mb$c,keyfile=$REP_DATA/mb$c.key" >"$OUT/blob.mb$c.log" 2>&1 &
            REP_MOUNTS+=("$! $m")
            wait_mount "$m" "$!" || POM_FAILED+=("blob: pomfs -o fs=mb$c did not mount")
        done
        for t in local:local "mdsl c=1:mdsl1" "mdsl c=3:mdsl3"; do
            label=${t%%:*} d=$REP_DATA/${t#*:}
            mountpoint -q "$d" || continue
            f="--directory=$d --filename=fio.dat --size=$BLOB_SIZE --ioengine=psync --output-format=json"
            for ph in "seq write 1M:--name=seqw --rw=write --bs=1M --end_fsync=1" \
                      "seq read 1M:--name=seqr --rw=read --bs=1M" \
                      "rand read 4k:--name=randr --rw=randread --bs=4k --time_based --runtime=$FIO_RT"; do
                # shellcheck disable=SC2086
                fio ${ph#*:} $f >"$W/blob.fio.json" 2>"$W/blob.fio.err"
                python3 "$ROOT/bench/report.py" fio "$W/blob.fio.json" "$label" "${ph%%:*}" \
                    "size=$BLOB_SIZE" blob-backends | tee -a "$J" | grep -q '"na"' &&
                    POM_FAILED+=("blob: fio ${ph%%:*} on $label: $(tail -1 "$J")")
            done
            rm -f "$d/fio.dat"
        done
    else
        POM_FAILED+=("blob: pomctl up --mdsl 3")
        echo "POMEGRANATE FAILED: blob: pomctl up: $(tail -3 "$OUT/blob.up")"
    fi
    rep_down
    python3 "$ROOT/bench/report.py" blob-table "$J"
fi

# ---- report --------------------------------------------------------------------
say "report"
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
MODE=full; [ $QUICK = 1 ] && MODE=quick
DATE="$(date -u '+%Y-%m-%d %H:%M UTC')" MODE=$MODE LOAD0=$LOAD0 LOAD1=$LOAD1 \
MACHINE="$(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, Linux $(uname -r)" \
DURATION="$(( $(date +%s) - START )) s" python3 - "$OUT/meta.json" "${UNAVAILABLE[@]}" <<'PY'
import json, os, sys
e = os.environ
json.dump({"date": e["DATE"], "mode": e["MODE"], "machine": e["MACHINE"],
           "load average (1/5/15 min) at start": e["LOAD0"], "at end": e["LOAD1"],
           "duration": e["DURATION"], "unavailable": "; ".join(sys.argv[2:]) or "none"},
          open(sys.argv[1], "w"))
PY
python3 "$ROOT/bench/report.py" "$J" "$OUT" --meta "$OUT/meta.json" ||
    POM_FAILED+=("the report (bench/report.py)")
echo "results: $OUT (results.jsonl, report.md, *.png)"
for u in "${UNAVAILABLE[@]}"; do echo "unavailable: $u"; done
if [ ${#POM_FAILED[@]} -gt 0 ]; then
    echo "run.sh: Pomegranate failed in: ${POM_FAILED[*]}" >&2
    exit 1
fi
exit 0
