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

DASHBOARD=$(realpath "$2")/docs/grafana-pomegranate.json
. "$(dirname "$0")/metrics_lib.sh" "$1" pom-prom prometheus curl
PROM_PID=""
ML_STOP='[ -n "$PROM_PID" ] && { kill "$PROM_PID"; wait "$PROM_PID"; } 2>/dev/null'

targets=""
for d in $ML_DAEMONS; do
    targets="$targets    - targets: ['${ADDR[$d]}']
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
