# mh_lib.sh -- a cluster of "hosts" on one machine, for the multi-host tests
# (docs/testing.md "Multi-host tests"). Sourced; needs root, ip(8),
# unshare(1) and nsenter(1), else it exits 77 (skip).
#
# A host is a Linux network namespace of its own, joined by a veth pair to
# a bridge in one more namespace the test makes (nothing is added to the
# root namespace's interfaces), with the address 10.213.0.K/24, plus a
# mount namespace of its own, held open by one "holder" process, in which
#   /tmp  is the host's private folder   ($MH_ROOT/hK/tmp outside)
#   /srv  is the host's data folder      ($MH_ROOT/hK/srv outside)
# so no two hosts share a file through the local disk by accident: what a
# host needs from another (a key, a list of checksums) the test copies
# between the outside folders, as an operator copies files between
# machines. A mount made inside a host (pomfs) exists in that host only.
#
#   . mh_lib.sh BINDIR...        checks root and tools, makes MH_ROOT; each
#                                BINDIR (the daemons' folders) stays visible
#                                inside the hosts even if it is under /tmp
#   mh_setup N                   makes hosts 1..N (h1 .. hN)
#   mh_ip K                      prints 10.213.0.K
#   mh_exec K CMD...             runs CMD inside host K (foreground)
#   mh_spawn K NAME CMD...       starts CMD inside host K in the background,
#                                output to $MH_ROOT/hK/NAME.log; its pid is
#                                in MH_PID[K:NAME]
#   mh_kill K NAME [SIG]         signals (default KILL) and reaps that pid
#   mh_kill_host K               SIGKILLs every process of host K but its
#                                holder (a power cut of its daemons; the
#                                data folders stay)
#   mh_path K PATH               the outside path of PATH of host K (PATH
#                                under /tmp or /srv)
#   mh_cleanup                   run by the EXIT trap (or, after a
#                                SIGKILL of the test, by a watcher):
#                                SIGKILLs every process in the test's
#                                namespaces (their pids, from `ip netns
#                                pids`) until none is left, which ends the
#                                mounts with their mount namespaces,
#                                deletes the namespaces (and so the veths),
#                                removes MH_ROOT unless MH_KEEP is set
#
# Invariants:
#  (1) Every process the harness starts runs in a namespace the harness
#      made, so the cleanup finds each by pid without names or patterns.
#  (2) Nothing is mounted in the root mount namespace but the files of
#      /run/netns that `ip netns add` makes (`ip netns del` removes them):
#      each host's mount namespace is private (unshare's --propagation
#      private), so its binds and pomfs mounts stay inside it.
#  (3) Namespace names carry the test's pid (pommh<PID>-...): concurrent
#      tests never touch each other's hosts.
set -u
if [ "$(id -u)" != 0 ]; then
    echo "SKIP: the multi-host harness needs root (network and mount namespaces)"
    exit 77
fi
for t in ip unshare nsenter; do
    command -v "$t" >/dev/null || { echo "SKIP: $t is not installed"; exit 77; }
done
MH_TAG=pommh$$
MH_ROOT=$(mktemp -d "${TMPDIR:-/tmp}/$MH_TAG.XXXXXX")
MH_NS=()          # every namespace made, the bridge's first
MH_HOLDER=()      # MH_HOLDER[K]: the process holding host K's mount namespace
MH_BINDS=("$@")   # folders the hosts must see at the same path
declare -A MH_PID=()

mh_cleanup() {
    local ns p i left
    disown -a # bash reaps them still, without a "Killed" line for each
    for i in $(seq 100); do
        left=0
        for ns in "${MH_NS[@]}"; do
            for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; left=1; done
        done
        [ $left = 0 ] && break
        sleep 0.1
    done
    for ns in "${MH_NS[@]}"; do ip netns del "$ns" 2>/dev/null; done
    if [ -n "${MH_KEEP:-}" ]; then echo "kept $MH_ROOT"; else rm -rf "$MH_ROOT"; fi
}
trap mh_cleanup EXIT
trap 'exit 1' TERM INT HUP
# When the test dies by SIGKILL (ctest's timeout), no trap runs: a watcher
# outside its process tree then does what mh_cleanup does, for the
# namespaces named after this test's pid (invariant 3), and ends quietly
# when the test ended normally (MH_ROOT removed by the trap).
setsid -f bash -c '
    while kill -0 "$1" 2>/dev/null; do sleep 1; done
    [ -d "$2" ] || exit 0
    nss=$(ip netns list | awk "{ print \$1 }" | grep "^$3-")
    for i in 1 2 3 4 5; do
        for ns in $nss; do for p in $(ip netns pids "$ns"); do kill -9 "$p"; done; done
        sleep 0.2
    done
    for ns in $nss; do ip netns del "$ns"; done
    [ -n "$4" ] || rm -rf "$2"' mh-reaper "$$" "$MH_ROOT" "$MH_TAG" "${MH_KEEP:-}" \
    </dev/null >/dev/null 2>&1

mh_ip() { echo "10.213.0.$1"; }

mh_setup() { # N
    local n=$1 k br=${MH_TAG}-br
    ip netns add "$br" || { echo "SKIP: cannot make a network namespace"; exit 77; }
    MH_NS+=("$br")
    ip -n "$br" link add br0 type bridge &&
        ip -n "$br" link set br0 up && ip -n "$br" link set lo up || return 1
    for k in $(seq "$n"); do
        local ns=${MH_TAG}-h$k d=$MH_ROOT/h$k
        ip netns add "$ns" || return 1
        MH_NS+=("$ns")
        # Both ends are made in the bridge's namespace and one is moved:
        # no interface ever appears in the root namespace.
        ip -n "$br" link add "v$k" type veth peer name eth0 netns "$ns" &&
            ip -n "$br" link set "v$k" master br0 &&
            ip -n "$br" link set "v$k" up &&
            ip -n "$ns" addr add "$(mh_ip "$k")/24" dev eth0 &&
            ip -n "$ns" link set eth0 up &&
            ip -n "$ns" link set lo up || return 1
        mkdir -p "$d/tmp" "$d/srv"
        chmod 1777 "$d/tmp"
        # The holder: a shell in the host's network namespace and a new,
        # private mount namespace, which binds the host's folders over
        # /tmp and /srv and then sleeps; every later command of the host
        # enters both namespaces through its pid. A BINDDIR under /tmp is
        # bound into the private /tmp first (it would be hidden otherwise).
        ip netns exec "$ns" unshare -m --propagation private bash -c '
            d=$1; shift
            for b in "$@"; do
                case $b in /tmp/*) mkdir -p "$d/tmp${b#/tmp}" &&
                    mount --bind -o ro "$b" "$d/tmp${b#/tmp}" || exit 1;; esac
            done
            mount --bind "$d/srv" /srv && mount --rbind "$d/tmp" /tmp || exit 1
            echo ready
            exec sleep infinity' holder "$d" "${MH_BINDS[@]}" >"$d/holder.log" 2>&1 &
        MH_HOLDER[$k]=$!
        local i
        for i in $(seq 100); do
            grep -qsx ready "$d/holder.log" && break
            kill -0 "${MH_HOLDER[$k]}" 2>/dev/null || break
            sleep 0.05
        done
        grep -qsx ready "$d/holder.log" ||
            { echo "host $k: no mount namespace:"; cat "$d/holder.log"; return 1; }
    done
}

mh_exec() { # K CMD...
    local k=$1; shift
    nsenter -t "${MH_HOLDER[$k]}" -m -n -- env HOME=/tmp/home "$@"
}

mh_spawn() { # K NAME CMD...
    local k=$1 name=$2; shift 2
    nsenter -t "${MH_HOLDER[$k]}" -m -n -- env HOME=/tmp/home "$@" \
        </dev/null >>"$MH_ROOT/h$k/$name.log" 2>&1 &
    MH_PID[$k:$name]=$!
}

mh_kill() { # K NAME [SIG]
    local p=${MH_PID[$1:$2]:-}
    [ -n "$p" ] || return 0
    kill "-${3:-KILL}" "$p" 2>/dev/null
    { wait "$p"; } 2>/dev/null
    unset "MH_PID[$1:$2]"
}

mh_kill_host() { # K
    local k=$1 p key
    for p in $(ip netns pids "${MH_TAG}-h$k"); do
        [ "$p" = "${MH_HOLDER[$k]}" ] || kill -9 "$p" 2>/dev/null
    done
    for key in "${!MH_PID[@]}"; do
        [ "${key%%:*}" = "$k" ] || continue
        { wait "${MH_PID[$key]}"; } 2>/dev/null
        unset "MH_PID[$key]"
    done
}

mh_path() { # K PATH
    case $2 in
    /tmp/* | /srv/*) echo "$MH_ROOT/h$1$2" ;;
    *) echo "mh_path: $2 is not a host's own path" >&2; return 1 ;;
    esac
}
