#!/bin/bash
# test_metrics.sh POMCTL SRCDIR -- Prometheus /metrics end to end (docs/metrics.md)
# on a `pomctl up --mount` cluster in a temporary folder:
#   - every daemon and pomfs writes DIR/run/<daemon>.metrics, and `pomctl
#     sites --json` shows each registered daemon's and the mount's metrics
#     address;
#   - each /metrics passes `promtool check metrics` and holds the families
#     of docs/metrics.md (ops and latency histograms, commit groups, cache,
#     forwards, MDSL bytes and GC, blob tier bytes, RPC errors, connections),
#     exactly the families docs/metrics.md lists;
#   - after work on the mount (files, a directory, a large file, fsync) the
#     counters that work drives have grown;
#   - bad HTTP (a body, a huge header, garbage, 40 idle connections, an
#     unknown path) costs the daemons nothing: each still answers a scrape;
#   - `pomctl down` removes the .metrics files.
# Exit 77 (skip) when pom-r2 or pomfs is not built, promtool or curl is
# missing, or FUSE cannot be mounted here.

DOC=$(realpath "$2")/docs/metrics.md
. "$(dirname "$0")/metrics_lib.sh" "$1" pom-metrics promtool curl
DAEMONS=$ML_DAEMONS
for d in $DAEMONS; do
    ok "$d wrote run/$d.metrics" test -n "${ADDR[$d]}"
done

scrape() { # daemon file
    curl -sf --max-time 10 "http://${ADDR[$1]}/metrics" -o "$2"
}
val() { # file sample -> its value (empty if absent)
    awk -v k="$2" '$1 == k { print $2; exit }' "$1"
}
grown() { # desc file-before file-after sample [min-growth]
    local a b
    a=$(val "$2" "$4"); b=$(val "$3" "$4")
    if [ -n "$a" ] && [ -n "$b" ] &&
        python3 -c "import sys; sys.exit(0 if float('$b') - float('$a') >= float('${5:-1}') else 1)"; then
        PASS=$((PASS+1))
    else
        FAIL=$((FAIL+1)); echo "FAIL: $1: $4 went from '${a}' to '${b}'"
    fi
}

for d in $DAEMONS; do
    ok "scrape $d before the work" scrape $d "$T/$d.before"
done

# The work: tiny files, a directory, a 300 KiB file through the blob tier,
# reads, a listing, an fsync (commits a group), removals.
mkdir "$M/dir"
for i in $(seq 1 100); do echo "file $i" >"$M/dir/f$i"; done
head -c 307200 /dev/urandom >"$M/big"
ok "large file reads back" cmp -s <(cat "$M/big") "$M/big"
ok "listing" test "$(ls "$M/dir" | wc -l)" = 100
ok "fsync" sync "$M/dir/f1"
rm -f "$M"/dir/f1?

# R2's part: a view fetched (and metrics addresses learnt at registration).
"$POMCTL" --data "$D" --json sites >"$T/sites.json" 2>>"$T/cmd.log"
# The sites' heartbeats come once a second: the work above may be quicker.
HB='pom_r2_request_duration_seconds_count{request="heartbeat"}'
for _ in $(seq 100); do
    scrape pom-r2 "$T/pom-r2.now" &&
        [ "$(val "$T/pom-r2.now" "$HB")" != "$(val "$T/pom-r2.before" "$HB")" ] && break
    sleep 0.1
done
for d in $DAEMONS; do
    ok "scrape $d after the work" scrape $d "$T/$d.after"
    ok "promtool check metrics: $d" bash -c "promtool check metrics <'$T/$d.after'"
done

# The families docs/metrics.md promises (TYPE lines).
has() { # daemon family...
    local d=$1 f; shift
    for f in "$@"; do
        ok "$d has $f" grep -q "^# TYPE $f " "$T/$d.after"
    done
}
has pom-mds pom_mds_op_duration_seconds pom_mds_op_errors_total \
    pom_mds_requests_total pom_mds_groups_committed_total pom_mds_groups_aborted_total \
    pom_mds_cache_slices pom_mds_cache_bytes pom_mds_cache_evictions_total \
    pom_mds_forwards_total pom_mds_forward_errors_total pom_mds_rpc_connections \
    pom_mds_rpc_requests_total pom_mds_rpc_client_errors_total
has pom-mdsl pom_mdsl_op_duration_seconds pom_mdsl_op_errors_total pom_mdsl_written_bytes_total pom_mdsl_live_bytes pom_mdsl_segment_bytes \
    pom_mdsl_gc_passes_total pom_mdsl_gc_freed_bytes_total pom_mdsl_commits_total \
    pom_mdsl_rpc_connections pom_mdsl_rpc_client_errors_total
has pom-r2 pom_r2_leader pom_r2_sites pom_r2_view_version pom_r2_rpc_connections \
    pom_r2_rpc_requests_total pom_r2_rpc_client_errors_total \
    pom_r2_request_duration_seconds pom_r2_request_errors_total
has pomfs pom_pomfs_op_duration_seconds pom_pomfs_blob_written_bytes_total \
    pom_pomfs_blob_read_bytes_total pom_pomfs_rpc_client_errors_total \
    pom_pomfs_rpc_client_connects_total pom_pomfs_mds_rpcs_total
# docs/metrics.md lists every family served, and serves every one it lists
# (P_rpc_... stands for each daemon's prefix).
ok "docs/metrics.md lists exactly the families served" python3 - "$DOC" \
    "$T/pom-r2.after" "$T/pom-mds.after" "$T/pom-mdsl.after" "$T/pomfs.after" <<'PY'
import re, sys
doc = open(sys.argv[1]).read()
listed = set()
for name in re.findall(r"^\| `((?:pom_|P_)[a-z0-9_]+)", doc, re.M):
    if name.startswith("P_"):
        listed |= {p + name[1:] for p in ("pom_r2", "pom_mds", "pom_mdsl")}
    else:
        listed.add(name)
served = set()
for f in sys.argv[2:]:
    served |= set(re.findall(r"^# TYPE (\S+) ", open(f).read(), re.M))
for n in sorted(served - listed):
    print("served, not in docs/metrics.md:", n)
for n in sorted(listed - served):
    print("in docs/metrics.md, not served:", n)
sys.exit(0 if served == listed else 1)
PY
ok "MDS histogram ends with +Inf" \
    grep -q '^pom_mds_op_duration_seconds_bucket{op="lookup",le="+Inf"}' "$T/pom-mds.after"

# What the work drove.
grown "MDS requests" "$T/pom-mds.before" "$T/pom-mds.after" pom_mds_requests_total 100
grown "MDS commit groups" "$T/pom-mds.before" "$T/pom-mds.after" pom_mds_groups_committed_total
grown "MDS lookups" "$T/pom-mds.before" "$T/pom-mds.after" \
    'pom_mds_op_duration_seconds_count{op="lookup"}'
grown "MDS RPC requests" "$T/pom-mds.before" "$T/pom-mds.after" pom_mds_rpc_requests_total 100
grown "MDSL bytes written" "$T/pom-mdsl.before" "$T/pom-mdsl.after" pom_mdsl_written_bytes_total
grown "MDSL commits" "$T/pom-mdsl.before" "$T/pom-mdsl.after" pom_mdsl_commits_total
grown "MDSL prepares timed" "$T/pom-mdsl.before" "$T/pom-mdsl.after" \
    'pom_mdsl_op_duration_seconds_count{op="prepare"}'
grown "R2 RPC requests" "$T/pom-r2.before" "$T/pom-r2.after" pom_r2_rpc_requests_total
grown "R2 heartbeats timed" "$T/pom-r2.before" "$T/pom-r2.after" "$HB"
grown "R2 views timed" "$T/pom-r2.before" "$T/pom-r2.after" \
    'pom_r2_request_duration_seconds_bucket{request="get_view",le="+Inf"}'
ok "R2 histogram ends with +Inf" \
    grep -q '^pom_r2_request_duration_seconds_bucket{request="register",le="+Inf"}' "$T/pom-r2.after"
grown "pomfs creates" "$T/pomfs.before" "$T/pomfs.after" \
    'pom_pomfs_op_duration_seconds_count{op="create"}' 100
grown "pomfs writes in the 1 s bucket" "$T/pomfs.before" "$T/pomfs.after" \
    'pom_pomfs_op_duration_seconds_bucket{op="write",le="+Inf"}' 100
grown "pomfs blob bytes written" "$T/pomfs.before" "$T/pomfs.after" \
    pom_pomfs_blob_written_bytes_total 307200
grown "pomfs blob bytes read" "$T/pomfs.before" "$T/pomfs.after" \
    pom_pomfs_blob_read_bytes_total 307200
eq "R2 sees one MDS up" "$(val "$T/pom-r2.after" 'pom_r2_sites{type="mds",state="up"}')" 1
eq "R2 leads" "$(val "$T/pom-r2.after" pom_r2_leader)" 1

# R2 learnt each registered daemon's and the mount's metrics address.
for d in pom-mds pom-mdsl pom-r2 pomfs; do
    ok "pomctl sites --json shows $d's metrics ${ADDR[$d]}" python3 -c '
import json, sys
sites = json.load(open(sys.argv[1]))["sites"]
sys.exit(0 if any(s.get("metrics") == sys.argv[2] for s in sites) else 1)' "$T/sites.json" "${ADDR[$d]}"
done

# Bad HTTP input: answered with an error or closed, the daemon unharmed.
code() { curl -s -o /dev/null --max-time 10 -w '%{http_code}' "$@"; }
{ printf 'X-Big: '; head -c 200000 /dev/zero | tr '\0' a; echo; } >"$T/big-header"
for d in $DAEMONS; do
    a=${ADDR[$d]}
    eq "$d: unknown path" "$(code "http://$a/nope")" 404
    eq "$d: POST with a 4 MiB body" \
        "$(head -c 4194304 /dev/zero | code -X POST --data-binary @- "http://$a/metrics")" 405
    c=$(code -H @"$T/big-header" "http://$a/metrics")
    ok "$d: a 200 KB header is refused (HTTP $c)" test "$c" -ge 400 -o "$c" = 000
    python3 - "$a" >>"$T/cmd.log" 2>&1 <<'EOF'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
idle = [socket.create_connection((host, int(port)), timeout=5) for _ in range(40)]
for s in idle[:5]:
    s.sendall(b"\x00\xff GARBAGE \r\n\r\n")
s = idle[5]
s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n")
for s in idle:
    s.close()
EOF
    ok "$d: scrape after bad input" scrape $d "$T/$d.bad"
    ok "$d: still valid after bad input" bash -c "promtool check metrics <'$T/$d.bad'"
done
for d in $DAEMONS; do
    pid=$(awk '{print $1; exit}' "$D/run/$d.pid")
    ok "$d still runs" kill -0 "$pid"
done

ok "pomctl down" "$POMCTL" down --data "$D"
ok "down removed the .metrics files" bash -c "! ls '$D'/run/*.metrics 2>/dev/null"
check_done
