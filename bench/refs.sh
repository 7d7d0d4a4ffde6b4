# refs.sh -- sourced by bench/run.sh: starts and stops the systems the suite
# measures (Pomegranate and the references), each on loopback with free
# ports, recording every pid and mount so that bench_cleanup undoes all of
# it (kill by pid, fusermount3 -u), whatever happens.
#
# Every *_up function sets MNT_<name> (where to run the workloads) or prints
# "reference X unavailable: reason" and returns 1.

BENCH_PIDS=()      # daemons we started, stopped in reverse order
BENCH_MOUNTS=()    # FUSE mounts, undone before the daemons stop
BENCH_TMPFS=()     # kernel tmpfs mounts (umount)
BENCH_SHM=()       # folders of /dev/shm used instead (rm -rf)

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() { # PORT [TENTHS]: until something listens on 127.0.0.1:PORT
    local i
    for i in $(seq "${2:-300}"); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
wait_mount() { # DIR PID [TENTHS]: until DIR is a mount point, or PID died
    local i
    for i in $(seq "${3:-200}"); do
        mountpoint -q "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
bench_cleanup() {
    local m p i
    for ((i=${#BENCH_MOUNTS[@]}-1; i>=0; i--)); do
        m=${BENCH_MOUNTS[i]}
        mountpoint -q "$m" 2>/dev/null && { fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null; }
    done
    for ((i=${#BENCH_PIDS[@]}-1; i>=0; i--)); do
        p=${BENCH_PIDS[i]}
        kill -TERM "$p" 2>/dev/null
    done
    for ((i=${#BENCH_PIDS[@]}-1; i>=0; i--)); do
        p=${BENCH_PIDS[i]}
        for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    BENCH_PIDS=() BENCH_MOUNTS=()
    for ((i=${#BENCH_TMPFS[@]}-1; i>=0; i--)); do
        umount "${BENCH_TMPFS[i]}" 2>/dev/null || umount -l "${BENCH_TMPFS[i]}" 2>/dev/null
    done
    BENCH_TMPFS=()
    for m in "${BENCH_SHM[@]}"; do rm -rf "$m"; done
    BENCH_SHM=()
}
unavailable() { # NAME REASON
    echo "reference $1 unavailable: $2"
    UNAVAILABLE+=("$1: $2")
}

# Native tmpfs: a kernel tmpfs mount of our own (or a folder of /dev/shm when
# mounting is not allowed). Everything else that wants a RAM-backed store
# (passthrough_ll's source, MooseFS's chunks, pom-mdsl's segments) lives
# under it too, so all compare against the same medium.
tmpfs_up() { # BASE SIZE
    mkdir -p "$1"
    if mount -t tmpfs -o "size=$2" bench-tmpfs "$1" 2>/dev/null; then
        BENCH_TMPFS+=("$1")
    elif [ -d /dev/shm ] && [ -w /dev/shm ]; then
        local d
        d=$(mktemp -d /dev/shm/pombench.XXXXXX) || return 1
        chmod 755 "$d"
        BENCH_SHM+=("$d")
        rmdir "$1"; ln -s "$d" "$1"
    else
        return 1
    fi
}

# libfuse's passthrough_ll over a tmpfs folder; built here from Debian's
# examples with the defines docs/bench.md "What runs where" gives.
passthrough_up() { # WORK
    local src=/usr/share/doc/libfuse3-dev/examples/passthrough_ll.c bin=$1/passthrough_ll
    MNT_passthrough=
    [ -f "$src" ] || { unavailable passthrough_ll "no $src (libfuse3-dev)"; return 1; }
    if ! cc -O2 -Wall -DHAVE_UTIMENSAT -DHAVE_POSIX_FALLOCATE -DHAVE_FALLOCATE \
            -DHAVE_SETXATTR -DHAVE_COPY_FILE_RANGE "$src" -o "$bin" \
            $(pkg-config fuse3 --cflags --libs) >"$1/passthrough_build.log" 2>&1; then
        unavailable passthrough_ll "build failed ($1/passthrough_build.log)"; return 1
    fi
    mkdir -p "$1/pt_src" "$1/pt_mnt"
    local ao=
    [ "$(id -u)" = 0 ] && ao=,allow_other,dev,suid
    "$bin" -f -o "source=$1/pt_src,xattr,default_permissions$ao" \
        "$1/pt_mnt" >"$1/passthrough.log" 2>&1 &
    local pid=$!
    BENCH_PIDS+=("$pid"); BENCH_MOUNTS+=("$1/pt_mnt")
    wait_mount "$1/pt_mnt" "$pid" || { unavailable passthrough_ll "did not mount: $(tail -1 "$1/passthrough.log")"; return 1; }
    MNT_passthrough=$1/pt_mnt
}

# MooseFS from Debian on loopback (REMAP_* so master and chunkserver meet on 127/8, every
# listener on 127.0.0.1, goal 1). NICE_LEVEL = 0 so it does not renice
# itself to -19 and get an edge over the others.
moosefs_up() { # WORK
    local w=$1/mfs
    MNT_moosefs=
    for b in mfsmaster mfschunkserver mfsmount mfssetgoal; do
        command -v "$b" >/dev/null || { unavailable moosefs "no $b (moosefs-master/-chunkserver/-client)"; return 1; }
    done
    id mfs >/dev/null 2>&1 || { unavailable moosefs "no user mfs"; return 1; }
    local empty=/usr/share/doc/moosefs-master/metadata.mfs.empty
    [ -f "$empty" ] || empty=/var/lib/mfs/metadata.mfs.empty
    [ -f "$empty" ] || { unavailable moosefs "no metadata.mfs.empty"; return 1; }
    mkdir -p "$w/master" "$w/cs" "$w/hdd" "$w/mnt"
    cp "$empty" "$w/master/metadata.mfs"
    chown -R mfs:mfs "$w/master" "$w/cs" "$w/hdd"
    local pml pmc pcl pcs
    pml=$(free_port); pmc=$(free_port); pcl=$(free_port); pcs=$(free_port)
    echo "* / rw,alldirs,maproot=0" >"$w/exports.cfg"
    echo "$w/hdd" >"$w/hdd.cfg"
    cat >"$w/master.cfg" <<CFG
WORKING_USER = mfs
WORKING_GROUP = mfs
NICE_LEVEL = 0
DATA_PATH = $w/master
EXPORTS_FILENAME = $w/exports.cfg
TOPOLOGY_FILENAME = $w/topology.cfg
MATOML_LISTEN_HOST = 127.0.0.1
MATOML_LISTEN_PORT = $pml
MATOCS_LISTEN_HOST = 127.0.0.1
MATOCS_LISTEN_PORT = $pmc
MATOCL_LISTEN_HOST = 127.0.0.1
MATOCL_LISTEN_PORT = $pcl
REMAP_BITS = 32
REMAP_SOURCE_IP_CLASS = 127.0.0.1
REMAP_DESTINATION_IP_CLASS = 0.0.0.0
CFG
    : >"$w/topology.cfg"
    cat >"$w/cs.cfg" <<CFG
WORKING_USER = mfs
WORKING_GROUP = mfs
NICE_LEVEL = 0
DATA_PATH = $w/cs
HDD_CONF_FILENAME = $w/hdd.cfg
HDD_LEAVE_SPACE_DEFAULT = 64MiB
BIND_HOST = 127.0.0.1
MASTER_HOST = 0.0.0.0
MASTER_PORT = $pmc
CSSERV_LISTEN_HOST = 127.0.0.1
CSSERV_LISTEN_PORT = $pcs
CFG
    mfsmaster -f -c "$w/master.cfg" >"$w/master.log" 2>&1 &
    BENCH_PIDS+=("$!")
    wait_port "$pcl" 150 || { unavailable moosefs "mfsmaster did not listen: $(tail -1 "$w/master.log")"; return 1; }
    mfschunkserver -f -c "$w/cs.cfg" >"$w/cs.log" 2>&1 &
    BENCH_PIDS+=("$!")
    wait_port "$pcs" 150 || { unavailable moosefs "mfschunkserver did not listen: $(tail -1 "$w/cs.log")"; return 1; }
    mfsmount "$w/mnt" -f -H 127.0.0.1 -P "$pcl" >"$w/mount.log" 2>&1 &
    local pid=$!
    BENCH_PIDS+=("$pid"); BENCH_MOUNTS+=("$w/mnt")
    wait_mount "$w/mnt" "$pid" 150 || { unavailable moosefs "mfsmount did not mount: $(tail -1 "$w/mount.log")"; return 1; }
    mfssetgoal -r 1 "$w/mnt" >/dev/null 2>&1 || true
    # The chunkserver must be registered before a write can land.
    local i ok=0
    for i in $(seq 100); do
        if echo x >"$w/mnt/.probe" 2>/dev/null && [ "$(cat "$w/mnt/.probe" 2>/dev/null)" = x ]; then ok=1; break; fi
        sleep 0.2
    done
    rm -f "$w/mnt/.probe"
    [ $ok = 1 ] || { unavailable moosefs "no chunkserver took a write in 20 s ($w/cs.log)"; return 1; }
    MNT_moosefs=$w/mnt
}

# Pomegranate: pom-mdsl + pom-mds + pomfs, as tests/fuse/test_pomfs.sh
# starts them (no R2: one MDS, fsid 1, blob tier in WORK/pom/blob). POM_MDS_PID
# for memory readings.
# With NOFUSE=1 only the daemons (for the key/value workload).
pom_up() { # WORK BINDIR
    local w=$1/pom b=$2
    MNT_pomfs= POM_MDS_PID= POM_MDS_ADDR=
    mkdir -p "$w/mdsl" "$w/mnt" "$w/blob"
    local pl pm
    pl=$(free_port); pm=$(free_port)
    "$b/mdsl/pom-mdsl" --dir "$w/mdsl" --listen "127.0.0.1:$pl" >"$w/mdsl.log" 2>&1 &
    BENCH_PIDS+=("$!")
    wait_port "$pl" || { echo "pom-mdsl did not start: $(tail -3 "$w/mdsl.log")"; return 1; }
    "$b/mds/pom-mds" --mdsl "127.0.0.1:$pl" --listen "127.0.0.1:$pm" >"$w/mds.log" 2>&1 &
    POM_MDS_PID=$!
    BENCH_PIDS+=("$!")
    wait_port "$pm" || { echo "pom-mds did not start: $(tail -3 "$w/mds.log")"; return 1; }
    POM_MDS_ADDR=127.0.0.1:$pm
    [ "${NOFUSE:-0}" = 1 ] && return 0  # the key/value API needs no mount
    # allow_other (as passthrough_ll's) needs root or user_allow_other.
    local ao=
    [ "$(id -u)" = 0 ] && ao=,allow_other
    # the blob tier (files over 64 KiB) in a local folder, as `pomctl up` sets it
    "$b/fuse/pomfs" "$POM_MDS_ADDR" "$w/mnt" -o "fsid=1,blob=$w/blob$ao" -f >"$w/pomfs.log" 2>&1 &
    local pid=$!
    BENCH_PIDS+=("$pid"); BENCH_MOUNTS+=("$w/mnt")
    wait_mount "$w/mnt" "$pid" || { echo "pomfs did not mount: $(tail -3 "$w/pomfs.log")"; return 1; }
    MNT_pomfs=$w/mnt
}
