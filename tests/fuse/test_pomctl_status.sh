#!/bin/bash
# test_pomctl_status.sh POMCTL POMFS POM_R2 -- `pomctl status` stays a
# health check while clients come and go (docs/r2.md "Client sites",
# docs/pomctl.md "Exit codes"), on a cluster of `pomctl up`:
#   - R2 is restarted on its port with --client-expire-ms 6000 (the
#     servers find it again; status is healthy);
#   - three mounts, each writes a file; `pomctl sites` lists 3 clients and
#     `fs stat` counts 3 mounts; each is unmounted: no client is left in
#     the view at once (site leave), fs stat counts 0 mounts;
#   - after `pomctl fsck` (which opens the fs as a client) status exits 0;
#   - past the failure time of a server (5 intervals) status still exits 0;
#   - a SIGKILLed mount: status exits 0 while R2 lists it as transient,
#     and it disappears from `pomctl sites` once it expires (6 s).
R2BIN=$(realpath "$3")
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
PC() { "$POMCTL" --data "$T/data" "$@"; }
jget() { # key: a field of the JSON object on stdin
    python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[k]
print(str(v).lower() if isinstance(v,bool) else v)' "$1"
}
clients() { # client sites in R2's view
    PC --json sites | python3 -c 'import json,sys
print(sum(1 for s in json.load(sys.stdin)["sites"] if s["type"] == "client"))'
}
status_rc() { PC status >"$T/status.out" 2>&1; echo $?; }
wait_for() { # seconds command...: polls until the command succeeds
    local n=$(($1 * 10)) i; shift
    for i in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
    return 1
}

# ---- R2 again, with a short client expiry --------------------------------------
PORT=$(cat "$T/data/run/pom-r2.port")
OLD=$(head -n1 "$T/data/run/pom-r2.pid") # the pid, then the executable
kill "$OLD"
wait_for 30 bash -c "! kill -0 $OLD 2>/dev/null" || { echo "FAIL: R2 $OLD did not stop"; exit 1; }
"$R2BIN" --key-file "$KEY" --data "$T/data" --listen "127.0.0.1:$PORT" \
    --port-file "$T/data/run/pom-r2.port" --client-expire-ms 6000 >>"$T/data/logs/pom-r2.log" 2>&1 &
printf '%s\n%s\n' $! "$R2BIN" >"$T/data/run/pom-r2.pid" # `pomctl down` stops it by pid
ok "status healthy with the restarted R2" wait_for 30 bash -c "'$POMCTL' --data '$T/data' status >/dev/null 2>&1"

# ---- three mounts come and go ----------------------------------------------------
for i in 1 2 3; do
    pl_mount "$T/m$i"
    echo "client $i" >"$T/m$i/f$i"
done
eq "clients while mounted" "$(clients)" 3
eq "mounts counted" "$(PC --json fs stat pomfs | jget fs.mounts)" 3
eq "status with 3 mounts" "$(status_rc)" 0
for i in 1 2 3; do pl_umount "$T/m$i"; done
eq "clients once unmounted (they left)" "$(clients)" 0
eq "mounts counted once unmounted" "$(PC --json fs stat pomfs | jget fs.mounts)" 0
eq "status after 3 mounts and unmounts" "$(status_rc)" 0

ok "fsck" PC fsck
eq "clients after fsck" "$(clients)" 0
eq "status after fsck" "$(status_rc)" 0
sleep 7 # past a server's failure time (5 intervals + slack)
eq "status long after the unmounts" "$(status_rc)" 0
eq "status verdict" "$(PC --json status | jget verdict)" healthy

# ---- a client that vanishes -------------------------------------------------------
pl_mount "$T/m4"
cat "$T/m4/f1" >/dev/null
eq "clients with the 4th mount" "$(clients)" 1
kill -9 "${PL_PID[$T/m4]}"
wait "${PL_PID[$T/m4]}" 2>/dev/null
unset "PL_PID[$T/m4]"
fusermount3 -u -z "$T/m4"
eq "status just after the kill" "$(status_rc)" 0
gone=0 transient=0
for i in $(seq 600); do
    st=$(PC --json sites | python3 -c 'import json,sys
print(" ".join(s["state"] for s in json.load(sys.stdin)["sites"] if s["type"] == "client"))')
    [ -z "$st" ] && { gone=1; break; }
    if [ "$st" = transient ] && [ "$transient" = 0 ]; then
        transient=1
        eq "status while the killed client is transient" "$(status_rc)" 0
    fi
    sleep 0.1
done
eq "the killed client expired from the view" "$gone" 1
eq "status after the expiry" "$(status_rc)" 0
ok "R2 logged the expiry" grep -q "expired: no heartbeat" "$T/data/logs/pom-r2.log"
[ "$FAIL" = 0 ] || { cat "$T/status.out"; tail -20 "$T/data/logs/pom-r2.log"; }
pl_done
