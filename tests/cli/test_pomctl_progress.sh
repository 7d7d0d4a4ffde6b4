#!/bin/bash
# test_pomctl_progress.sh POMCTL -- the progress line of long pomctl work
# (cli/pomctl_progress.h, docs/pomctl.md "Progress") on a `pomctl up
# --mount` cluster in a temporary folder holding a few thousand files:
#   - `pomctl fsck` on a terminal (a pty from script(1)) shows
#     "fsck: N rows, M dirs, T s" lines (every 20 ms: POMCTL_PROGRESS_MS), and the
#     report after them starts on a blanked line;
#   - the same fsck with stderr not a terminal, and with --json on the
#     terminal, writes no progress line;
#   - each exits 0 (a clean fs);
#   - on a cluster of three MDSL, `site drain ID --wait` of the third
#     shows "drain: site ID, <ring-1 change>, T s" lines on the terminal
#     and returns once ring 1 has dropped it; it is then removed, fsck is
#     clean and every file is there; the drain of the second with --json
#     on the terminal shows no line and says "drained".
# Exit 77 (skip) when pom-r2 or pomfs is not built, script(1) is missing,
# or FUSE cannot be mounted here.
ML_UP_ARGS="--mdsl 3"
. "$(dirname "$0")/metrics_lib.sh" "$1" pom-progress script
N=${POM_TEST_LONG:+20000}
N=${N:-4000}
ok "make $N files in 20 directories" python3 - "$M" "$N" <<'PY'
import os, sys
m, n = sys.argv[1], int(sys.argv[2])
for d in range(20):
    os.mkdir(os.path.join(m, "d%d" % d))
for i in range(n):
    open(os.path.join(m, "d%d" % (i % 20), "f%d" % i), "wb").close()
PY

# On a terminal: script(1) runs fsck on a pty (stdout and stderr both).
# A line every 20 ms (POMCTL_PROGRESS_MS): an fsck of a few thousand files
# takes well under the default 250 ms on an idle machine.
export POMCTL_PROGRESS_MS=20
S=$SECONDS
ok "fsck on a terminal" script -qec "'$POMCTL' --data '$D' fsck" "$T/tty.out"
EL=$((SECONDS - S + 1))
lines=$(grep -ao $'\rfsck: [0-9,]* rows, [0-9,]* dirs, [0-9.]* s' "$T/tty.out" | wc -l)
echo "fsck on a terminal: $lines progress lines in about $EL s"
ok "progress lines on a terminal ($lines)" test "$lines" -ge 1
ok "at most ~50 lines a second ($lines in $EL s)" test "$lines" -le $((EL * 50 + 1))
ok "the counts reach the files ($N)" bash -c "grep -ao $'\rfsck: [0-9,]* rows' '$T/tty.out' | tr -d , | awk '{ if (\$2 > max) max = \$2 } END { exit !(max > 0 && max <= $N + 20) }'"
ok "the last progress line is blanked before the report" python3 - "$T/tty.out" <<'PY'
import re, sys
out = open(sys.argv[1], "rb").read()
lines = list(re.finditer(rb"\rfsck: [^\r\n]*, [0-9.]+ s *", out))  # any phase's line
rest = out[lines[-1].end():]
sys.exit(0 if re.match(rb"\r {20,}\r[^\r]", rest) else 1)
PY
ok "fsck with stderr to a file" bash -c "'$POMCTL' --data '$D' fsck >'$T/plain.out' 2>'$T/plain.err'"
ok "no progress when stderr is no terminal" bash -c "! grep -aq 'rows, ' '$T/plain.err' && ! grep -aq $'\r' '$T/plain.err'"
ok "fsck --json on a terminal" script -qec "'$POMCTL' --data '$D' --json fsck" "$T/json.out"
ok "no progress with --json" bash -c "! grep -aq 'rows, ' '$T/json.out'"
# `site drain ID --wait` of the third MDSL: a ring-1 change moves its
# slices to the others; the command returns once ring 1 marks it drained,
# with progress lines on the terminal.
read -r MDSL3 MDSL2 <<<"$("$POMCTL" --data "$D" --json sites | python3 -c '
import json, sys
ids = sorted(s["id"] for s in json.load(sys.stdin)["sites"] if s["type"] == "mdsl")
print(ids[-1], ids[-2])')"
# the highest first, on the terminal; the next with --json
ok "site drain $MDSL3 --wait on a terminal" script -qec "'$POMCTL' --data '$D' site drain $MDSL3 --wait" "$T/drain.out"
lines=$(grep -ao $'\rdrain: site [0-9]*, [^\r]*, [0-9.]* s' "$T/drain.out" | wc -l)
echo "site drain --wait: $lines progress lines"
ok "drain progress lines ($lines)" test "$lines" -ge 1
ok "drain says drained" grep -aq "site $MDSL3 drained" "$T/drain.out"
ok "ring 1 marks it drained" bash -c "'$POMCTL' --data '$D' --json ring show 1 | python3 -c '
import json, sys
r = json.load(sys.stdin)[\"rings\"][0]
sys.exit(0 if [s[\"id\"] for s in r[\"sites\"]] != [] and $MDSL3 not in [s[\"id\"] for s in r[\"sites\"]] else 1)'"
ok "site remove $MDSL3 after the drain" "$POMCTL" --data "$D" site remove "$MDSL3"
ok "fsck clean after the drain" bash -c "'$POMCTL' --data '$D' fsck 2>/dev/null | tail -1 | grep -qx clean"
eq "every file is still there" "$(find "$M" -type f | wc -l)" "$N"
ok "site drain $MDSL2 --wait --json on a terminal" script -qec "'$POMCTL' --data '$D' --json site drain $MDSL2 --wait" "$T/drain.json"
ok "with --json: drained, no progress line" bash -c "grep -aq '\"drained\": true' '$T/drain.json' && ! grep -aq 'drain: site' '$T/drain.json'"
ok "fsck clean after both drains" bash -c "'$POMCTL' --data '$D' fsck 2>/dev/null | tail -1 | grep -qx clean"
ok "pomctl down" "$POMCTL" down --data "$D"
check_done
