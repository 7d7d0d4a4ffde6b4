#!/bin/bash
# test_metrics_prom.sh POMCTL SRCDIR -- a real Prometheus server scrapes a
# `pomctl up --mount` cluster (docs/metrics.md): prometheus runs on a free
# loopback port with its data in a temporary folder and a config naming the
# four targets of DIR/run/*.metrics (scraped every second); the test waits
# until all four are up in its HTTP API, does work on the mount, and asks
# the API for series of each daemon (a counter that grew, a histogram
# quantile), and runs every query of the Grafana dashboard
# (docs/grafana-pomegranate.json): each must be valid PromQL naming only
# series Prometheus has. Prometheus is stopped by pid. Exit 77 (skip) when pom-r2,
# pomfs, prometheus, curl or FUSE is not there.
set -u

POMCTL=$(realpath "$1")
DASHBOARD=$(realpath "$2")/docs/grafana-pomegranate.json
BIN=$(dirname "$POMCTL")
if [ ! -x "$BIN/../r2/pom-r2" ] || [ ! -x "$BIN/../fuse/pomfs" ]; then
    echo "SKIP: pom-r2 / pomfs not built"
    exit 77
fi
for t in prometheus curl python3 fusermount3; do
    command -v $t >/dev/null || { echo "SKIP: $t missing (scripts/install-deps.sh)"; exit 77; }
done
[ -c /dev/fuse ] || { echo "SKIP: no /dev/fuse"; exit 77; }

T=$(mktemp -d "${TMPDIR:-/tmp}/pom-prom.XXXXXX")
D=$T/data
M=$T/m
export HOME=$T/home
mkdir -p "$HOME"
unset POM_R2 POM_BIN_DIR
. "$(dirname "$0")/../fuse/pomfs_check.sh"
PROM_PID=""
cleanup() {
    if [ -n "$PROM_PID" ]; then kill "$PROM_PID" 2>/dev/null; wait "$PROM_PID" 2>/dev/null; fi
    mountpoint -q "$M" 2>/dev/null && fusermount3 -u -z "$M"
    "$POMCTL" down --data "$D" >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' TERM INT HUP
reap_on_kill "$T" "$POMCTL" "$D"

if ! "$POMCTL" up --data "$D" --mount "$M" >"$T/up.log" 2>&1; then
    if grep -qi "permission\|fuse: device not found\|Operation not permitted" \
        "$D/logs/pomfs.log" 2>/dev/null; then
        echo "SKIP: FUSE mounts are not allowed here"; exit 77
    fi
    echo "pomctl up --mount failed:"; cat "$T/up.log"; exit 1
fi

targets=""
for d in pom-r2 pom-mds pom-mdsl pomfs; do
    targets="$targets    - targets: ['$(cat "$D/run/$d.metrics")']
      labels: {daemon: '$d'}
"
done
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: pomegranate
    static_configs:
$targets
EOF
PORT=$(free_port)
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
    --web.listen-address="127.0.0.1:$PORT" >"$T/prometheus.log" 2>&1 &
PROM_PID=$!
API=http://127.0.0.1:$PORT/api/v1

# query PROMQL -> the number of series in the answer, and their values
query() {
    curl -sf --max-time 5 "$API/query" --data-urlencode "query=$1" |
        python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(len(r), " ".join(s["value"][1] for s in r))'
}
up_all() { [ "$(query 'sum(up{job="pomegranate"})' | awk '{print $2}')" = 4 ]; }
within "prometheus scrapes all four targets" 60 up_all

mkdir "$M/dir"
for i in $(seq 1 200); do echo "file $i" >"$M/dir/f$i"; done
head -c 307200 /dev/urandom >"$M/big"
cat "$M/big" >/dev/null
sync "$M/dir/f1"
sleep 3 # three scrapes

grew() { # desc promql
    local r
    r=$(query "$2")
    if [ "${r%% *}" -ge 1 ] 2>/dev/null &&
        python3 -c "import sys; sys.exit(0 if all(float(v) > 0 for v in sys.argv[1:]) else 1)" ${r#* }; then
        PASS=$((PASS+1))
    else
        FAIL=$((FAIL+1)); echo "FAIL: $1: '$2' gave '$r'"
    fi
}
grew "MDS requests grew" 'increase(pom_mds_requests_total[1m])'
grew "MDS lookup latency p99" \
    'histogram_quantile(0.99, sum by (le) (rate(pom_mds_op_duration_seconds_bucket{op="lookup"}[1m])))'
grew "MDSL bytes written grew" 'increase(pom_mdsl_written_bytes_total[1m])'
grew "R2 sees the MDS up" 'pom_r2_sites{type="mds",state="up"}'
grew "pomfs creates grew" 'increase(pom_pomfs_op_duration_seconds_count{op="create"}[1m])'
grew "pomfs blob bytes" 'pom_pomfs_blob_written_bytes_total'
eq "one series per daemon for its RPC connections" \
    "$(query 'count(pom_r2_rpc_connections or pom_mds_rpc_connections or pom_mdsl_rpc_connections)' | awk '{print $2}')" 3

# Every query of the dashboard: valid, and every pom_ name in it is a series.
ok "the Grafana dashboard's queries" python3 - "$DASHBOARD" "$API" <<'PY'
import json, re, sys, urllib.parse, urllib.request
dash, api = sys.argv[1], sys.argv[2]
def get(path, **q):
    with urllib.request.urlopen(api + path + "?" + urllib.parse.urlencode(q), timeout=10) as r:
        return json.load(r)
names = set(get("/label/__name__/values")["data"])
base = {re.sub(r"_(bucket|count|sum)$", "", n) for n in names}
bad = 0
for p in json.load(open(dash))["panels"]:
    for t in p.get("targets", []):
        expr = t["expr"].replace("$__rate_interval", "1m")
        r = get("/query", query=expr)
        missing = [n for n in re.findall(r"\bpom_[a-z0-9_]+", expr)
                   if n not in names and n not in base]
        if r["status"] != "success" or missing:
            print("bad query in %r: %s (missing %s)" % (p["title"], expr, missing))
            bad += 1
print(bad, "bad queries")
sys.exit(1 if bad else 0)
PY

kill "$PROM_PID"
wait "$PROM_PID"
eq "prometheus stopped cleanly" "$?" 0
PROM_PID=""
check_done
