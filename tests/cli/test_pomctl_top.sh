#!/bin/bash
# test_pomctl_top.sh POMCTL SRCDIR -- `pomctl top` and the mount's metrics
# address at R2 (docs/pomctl.md "top", docs/metrics.md) on a `pomctl up
# --mount` cluster in a temporary folder:
#   - the mount registers its metrics address: `pomctl sites --json` shows
#     it on the client site of the fs, the same as DIR/run/pomfs.metrics;
#   - with a workload running on the mount (creates, writes, fsyncs),
#     `pomctl top --once --json` gives every site with metrics nonzero
#     request rates, the MDS and MDSL nonzero bytes and commit groups per
#     second, the mount nonzero operations per second, and a number (no
#     null) of errors per second for each;
#   - the rates agree with two scrapes of the MDS taken around it by curl
#     (the MDS's requests grew by at least what top saw in one interval);
#   - the table form (`--count 2`, not a terminal) prints two tables;
#   - bad arguments exit 2; an R2 that is gone exits 3.
# Exit 77 (skip) when pom-r2 or pomfs is not built, curl is missing, or FUSE
# cannot be mounted here.
. "$(dirname "$0")/metrics_lib.sh" "$1" pom-top curl

ok "run/pomfs.metrics written" test -n "${ADDR[pomfs]}"
"$POMCTL" --data "$D" --json sites >"$T/sites.json" 2>>"$T/cmd.log"
ok "pomctl sites --json shows the mount's metrics ${ADDR[pomfs]}" python3 -c '
import json, sys
sites = json.load(open(sys.argv[1]))["sites"]
sys.exit(0 if any(s["type"] == "client" and s.get("fs") == "pomfs" and
                  s.get("metrics") == sys.argv[2] for s in sites) else 1)' "$T/sites.json" "${ADDR[pomfs]}"

# A workload that runs until told to stop: small files, each fsynced.
python3 - "$M" "$T/stop" >"$T/work.log" 2>&1 <<'PY' &
import os, sys
m, stop = sys.argv[1], sys.argv[2]
os.makedirs(os.path.join(m, "w"), exist_ok=True)
i = 0
while not os.path.exists(stop):
    p = os.path.join(m, "w", "f%d" % (i % 500))
    with open(p, "wb") as f:
        f.write(b"x" * 300)
        os.fsync(f.fileno())
    i += 1
print("files written:", i)
PY
WORK=$!
ML_STOP="touch '$T/stop'; wait $WORK"
sleep 1
curl -sf "http://${ADDR[pom-mds]}/metrics" -o "$T/mds.before"
ok "top --once --json" bash -c "'$POMCTL' --data '$D' --json top --once --interval 2 >'$T/top.json'"
curl -sf "http://${ADDR[pom-mds]}/metrics" -o "$T/mds.after"
ok "top --json names every site with metrics" python3 - "$T/top.json" "$T/sites.json" <<'PY'
import json, sys
top = json.load(open(sys.argv[1]))
want = {s["id"] for s in json.load(open(sys.argv[2]))["sites"] if s.get("metrics")}
got = {s["id"] for s in top["sites"]}
print("top:", sorted(got), "sites with metrics:", sorted(want))
sys.exit(0 if top["ok"] and want <= got else 1)
PY
rate() { # type field -> the value (sum over the sites of that type)
    python3 -c '
import json, sys
v = [s[sys.argv[3]] for s in json.load(open(sys.argv[1]))["sites"] if s["type"] == sys.argv[2]]
print("null" if not v or None in v else sum(v))' "$T/top.json" "$1" "$2"
}
positive() { # desc value
    if python3 -c "import sys; sys.exit(0 if '$2' != 'null' and float('$2') > 0 else 1)"; then
        PASS=$((PASS+1))
    else
        FAIL=$((FAIL+1)); echo "FAIL: $1: got $2"
    fi
}
for t in r2 mds mdsl client; do
    positive "$t ops_per_s" "$(rate $t ops_per_s)"
    ok "$t errors_per_s is a number" test "$(rate $t errors_per_s)" != null
done
positive "mds bytes_per_s" "$(rate mds bytes_per_s)"
positive "mds groups_per_s" "$(rate mds groups_per_s)"
positive "mdsl bytes_per_s" "$(rate mdsl bytes_per_s)"
positive "mdsl groups_per_s" "$(rate mdsl groups_per_s)"
eq "r2 has no bytes_per_s" "$(rate r2 bytes_per_s)" null
# top's MDS requests over its span (its two scrapes of the MDS, about the
# 2 s interval) fit in what curl saw over a longer span around both
ok "top's MDS rate agrees with two scrapes around it" python3 - "$T/mds.before" "$T/mds.after" "$(rate mds ops_per_s)" "$(rate mds span_s)" <<'PY'
import sys
def val(f):
    for l in open(f):
        if l.startswith("pom_mds_requests_total "):
            return float(l.split()[1])
d = val(sys.argv[2]) - val(sys.argv[1])
r, span = float(sys.argv[3]), float(sys.argv[4])
print("curl saw", d, "requests; top", r, "per s over", span, "s")
sys.exit(0 if 0 < r * span <= d * 1.05 + 1 and 1 < span < 10 else 1)
PY
ok "top --count 2 (a pipe: two tables)" bash -c "'$POMCTL' --data '$D' top --count 2 --interval 0.5 >'$T/top.txt'"
eq "two tables printed" "$(grep -c '^ *ID  TYPE' "$T/top.txt")" 2
ok "the table has the MDS row" grep -q ' mds ' "$T/top.txt"
ok "no terminal escapes into a pipe" bash -c "! grep -q $'\033' '$T/top.txt'"
touch "$T/stop"
wait $WORK
ML_STOP=""
cat "$T/work.log"

code() { "$@" >/dev/null 2>&1; echo $?; }
eq "top --interval 0 is a usage error" "$(code "$POMCTL" --data "$D" top --interval 0)" 2
eq "top --bogus is a usage error" "$(code "$POMCTL" --data "$D" top --bogus)" 2
eq "top --count x is a usage error" "$(code "$POMCTL" --data "$D" top --count x)" 2
ok "pomctl down" "$POMCTL" down --data "$D"
eq "top without R2 exits 3" "$(code "$POMCTL" --data "$D" --timeout 1000 top --once)" 3
check_done
