#!/bin/bash
# test_pomfs_scale.sh POMCTL POMFS -- directory scale through a real mount
# of a `pomctl up` cluster:
#   - rm -rf of a tree of 100,000 files (100 folders x 1,000) leaves nothing,
#     and the MDS answers the root listing afterwards;
#   - one directory of 1,000,000 files created through the mount (2
#     processes) is listed by `ls -f` with every name exactly once, before
#     and after a remount, and a sample of names stats correctly.
# POM_TEST_SCALE scales both counts: by default 0.1 (10,000 files in the
# tree, 100,000 in one directory: about a minute), and 1 under
# `scripts/test.sh --long` (POM_TEST_LONG=1: about ten minutes on 2 cores).
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
M=$T/m
pl_mount "$M" attr_timeout=1,entry_timeout=1
if [ "${POM_TEST_LONG:-0}" = 1 ]; then S=${POM_TEST_SCALE:-1}; else S=${POM_TEST_SCALE:-0.1}; fi
scaled() { python3 -c "print(max(1, int($1 * $S)))"; }

mkfiles() { # first count dir...: creates dir/f<first>..f<first+count-1>, empty, in each dir
    python3 - "$@" <<'PY'
import os, sys
first, n = int(sys.argv[1]), int(sys.argv[2])
for d in sys.argv[3:]:
    for i in range(first, first + n):
        os.close(os.open(f"{d}/f{i}", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
PY
}

# ---- rm -rf of 100,000 files ----------------------------------------------
NDIR=100 PER=$(scaled 1000)
t0=$SECONDS
mkdir "$M/tree"
mkdir $(for d in $(seq 0 $((NDIR - 1))); do echo "$M/tree/d$d"; done)
pids=()
for half in 0 1; do
    mkfiles 0 "$PER" $(for d in $(seq $half 2 $((NDIR - 1))); do echo "$M/tree/d$d"; done) &
    pids+=($!)
done
wait "${pids[@]}"  # not a bare wait: the pomfs mounts are background jobs too
eq "files in the tree" "$(find "$M/tree" -type f | wc -l)" "$((NDIR * PER))"
t1=$SECONDS
ok "rm -rf of the tree" rm -rf "$M/tree"
echo "tree of $((NDIR * PER)) files: created in $((t1 - t0)) s, removed in $((SECONDS - t1)) s"
ok "tree gone" test ! -e "$M/tree"
eq "root empty" "$(ls -A "$M" | wc -l)" "0"

# ---- one directory of 1,000,000 files -------------------------------------
N=$(scaled 1000000)
mkdir "$M/big"
t0=$SECONDS
mkfiles 0 $((N / 2)) "$M/big" & p1=$!
mkfiles $((N / 2)) $((N - N / 2)) "$M/big" & p2=$!
wait $p1; r1=$?; wait $p2; r2=$?
eq "creators exit 0" "$r1$r2" "00"
echo "created $N files in one directory in $((SECONDS - t0)) s"
check_listing() { # when
    local t=$SECONDS
    ls -f "$M/big" >"$T/ls" 2>"$T/ls.err"
    eq "ls -f exit ($1)" "$?" "0"
    echo "ls -f of $N entries ($1): $((SECONDS - t)) s"
    eq "ls -f lines ($1)" "$(wc -l <"$T/ls")" "$((N + 2))"
    eq "no name twice ($1)" "$(sort "$T/ls" | uniq -d | wc -l)" "0"
    eq "every name there ($1)" "$(grep -c '^f[0-9]*$' "$T/ls")" "$N"
}
check_listing "fresh"
pl_umount "$M"; pl_mount "$M" attr_timeout=1,entry_timeout=1
check_listing "after a remount"
ok "sample stats" bash -c "for i in 0 1 $((N / 2)) $((N - 1)); do stat -c %s '$M/big/f'\$i | grep -qx 0 || exit 1; done"
nok "a name not created" "No such file" stat "$M/big/f$N"
pl_umount "$M"
pl_done
