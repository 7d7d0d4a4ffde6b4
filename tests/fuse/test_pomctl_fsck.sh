#!/bin/bash
# test_pomctl_fsck.sh POMCTL POMFS [POM_SYSROW] -- `pomctl fsck` against the
# blob tier (check (7) of cli/pomctl_fsck.c, docs/pomctl.md "fsck") and the
# system rows (check (9)) on a cluster of `pomctl up` with one mount:
#   - with POM_SYSROW (tests/fuse/pom_sysrow.c): a pending and a decision
#     row in the root's table are counted, not reported, not listed; a
#     pending row of the wrong length and a short decision row are
#     reported (exit 1); all deleted again, fsck is clean;
#   - blob files (one tract, two tracts, sparse without any tract: its set
#     is its map, a rewritten one, a hard link), an inline file: fsck is
#     clean, counts 4 blob files, 4 sets, none without its set, no orphan;
#   - a real set moved away is a problem (its reads answer EIO), exit 1;
#   - an orphan set made by hand at the path docs/format-blob.md gives for
#     a fresh id (bit 63 set): fsck reports exactly 1 orphan (text and
#     JSON) and exits 0;
#   - --repair-orphans: refused (exit 1) while the fs is mounted; on the
#     unmounted fs keeps the orphan while it is younger than a minute;
#     removes it once its files (and every real set's) are set 2 minutes
#     back (touch -d), and nothing else: every real file's sha256 is the same after a remount,
#     every real set's folder is still there, fsck --data-check is clean.
SYSROW=${3:+$(realpath "$3")}
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
M=$T/m
PC() { "$POMCTL" --data "$T/data" "$@"; }
jget() { # key: a field of the JSON object on stdin
    python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1].split("."): v=v[k]
print(str(v).lower() if isinstance(v,bool) else v)' "$1"
}
# pom_blobpath.py gives where a set lives (pom_blob_hash, docs/format-blob.md),
# checked below against the sets the client wrote.
wait_unmounted_at_r2() { # R2 counts no mount of pomfs (pomfs and fsck runs end)
    [ "$(PC --json fs stat pomfs | jget fs.mounts)" = 0 ]
}

pl_mount "$M"
head -c $((200 << 10)) /dev/urandom >"$M/one"          # 1 tract
head -c $((5 << 20)) /dev/urandom >"$M/two"            # 2 tracts (4 MiB each)
truncate -s $((10 << 20)) "$M/sparse"                   # blob, no tract at all
head -c 100000 /dev/urandom >"$M/rewritten"
head -c 300000 /dev/urandom >"$M/rewritten.new"
cat "$M/rewritten.new" >"$M/rewritten"                  # O_TRUNC: a new set
rm "$M/rewritten.new"
head -c 1000 /dev/urandom >"$M/small"                  # inline
ln "$M/one" "$M/one.link"
sync
(cd "$M" && sha256sum one two sparse rewritten small one.link) >"$T/sums.before"
pl_umount "$M"

FSID=$(PC --json fs stat pomfs | jget fs.fsid)
B=$T/data/blobs/$(printf %08x "$FSID")
ok "the blob folder of fs $FSID exists" test -d "$B"
# The test's hash against the sets the client wrote (else the orphan below
# would sit where no set can be and prove nothing).
nsets=0
for d in "$B"/*/*/*; do
    id=${d##*/}
    eq "path of set $id" "$B/$(python3 "$(dirname "$0")/pom_blobpath.py" "$id")" "$d"
    nsets=$((nsets + 1))
done
eq "sets on disk: one, two, sparse (its map only), rewritten (its old set removed at close)" "$nsets" 4
find "$B" -mindepth 3 -maxdepth 3 | sort >"$T/sets.before"

ok "fsck clean before the orphan" PC fsck
PC --json fsck >"$T/f0.json" 2>"$T/f0.err"
eq "fsck --json exit" "$?" 0
eq "blob files (hard link once)" "$(jget blob_files <"$T/f0.json")" 4
eq "blob files without their set" "$(jget blob_files_without_tracts <"$T/f0.json")" 0
eq "tract sets" "$(jget tract_sets <"$T/f0.json")" 4
eq "no orphan" "$(jget orphan_sets <"$T/f0.json")" 0
eq "no pending row" "$(jget pending_rows <"$T/f0.json")" 0

# ---- system rows (check (9)) ------------------------------------------------
if [ -n "$SYSROW" ]; then
    SR() { "$SYSROW" -k "$KEY" "$R2" pomfs "$@"; }
    ok "a pending row written (XT_F_SYS)" SR put P 19
    ok "a decision row written (XT_F_SYS)" SR put D 27
    PC --json fsck >"$T/s1.json" 2>"$T/s1.err"
    eq "fsck with transaction rows exits 0" "$?" 0
    eq "pending rows counted" "$(jget pending_rows <"$T/s1.json")" 1
    eq "decision rows counted" "$(jget decision_rows <"$T/s1.json")" 1
    eq "no problem" "$(jget problems <"$T/s1.json")" 0
    eq "entries as before" "$(jget files <"$T/s1.json")" "$(jget files <"$T/f0.json")"
    PC fsck >"$T/s1.txt" 2>&1
    ok "text summary counts them" grep -q "1 pending rows, 1 decision rows" "$T/s1.txt"
    pl_mount "$M"
    eq "the root lists its 6 names" "$(ls -A "$M" | wc -l)" 6
    pl_umount "$M"
    ok "a pending row of 15 bytes written" SR put P 15
    ok "a decision row of 20 bytes written" SR put D 20
    PC --json fsck >"$T/s2.json" 2>"$T/s2.err"
    eq "fsck with damaged system rows exits 1" "$?" 1
    eq "two problems" "$(jget problems <"$T/s2.json")" 2
    eq "pending rows counted (2)" "$(jget pending_rows <"$T/s2.json")" 2
    ok "the bad pending row reported" grep -q "a pending row (system row) of 15 bytes" "$T/s2.err"
    ok "the short decision row reported" grep -q "a decision row (system row) of 20 bytes" \
        "$T/s2.err"
    for r in "P 19" "D 27" "P 15" "D 20"; do
        ok "system row $r deleted" SR del $r
    done
    PC --json fsck >"$T/s3.json" 2>/dev/null
    eq "clean again" "$(jget problems <"$T/s3.json")" 0
    eq "no pending row left" "$(jget pending_rows <"$T/s3.json")" 0
    within "R2 sees no mount" 60 wait_unmounted_at_r2
fi

# ---- an orphan by hand -------------------------------------------------
OID=$(printf '%016x' $(( (RANDOM << 48 | RANDOM << 32 | RANDOM << 16 | RANDOM) | (1 << 63) )))
OD=$B/$(python3 "$(dirname "$0")/pom_blobpath.py" "$OID")
mkdir -p "$OD/000000"
head -c 100000 /dev/urandom >"$OD/000000/00000000"
PC fsck >"$T/f1.txt" 2>&1
eq "fsck with an orphan exits 0" "$?" 0
cat "$T/f1.txt"
ok "fsck prints the orphan" grep -q "^orphan tract sets: 1 (" "$T/f1.txt"
ok "fsck is still clean" grep -qx clean "$T/f1.txt"
PC --json fsck >"$T/f1.json" 2>/dev/null
eq "JSON orphan_sets" "$(jget orphan_sets <"$T/f1.json")" 1
ok "JSON orphan_bytes > 0" test "$(jget orphan_bytes <"$T/f1.json")" -gt 0
eq "JSON ok" "$(jget ok <"$T/f1.json")" true
eq "JSON tract_sets" "$(jget tract_sets <"$T/f1.json")" 5

# ---- a lost set (its reads answer EIO) is a problem ----------------------
LD=$(head -n 1 "$T/sets.before")
mv "$LD" "$T/lost-set"
PC fsck >"$T/fl.txt" 2>&1
eq "fsck with a lost set exits 1" "$?" 1
ok "fsck names it" grep -q "tract set ${LD##*/} that the blob tier does not hold" "$T/fl.txt"
mv "$T/lost-set" "$LD"

# ---- --repair-orphans ----------------------------------------------------
pl_mount "$M"
nok "repair refused while mounted" "mount" PC fsck --repair-orphans
ok "orphan kept while mounted" test -f "$OD/000000/00000000"
pl_umount "$M"
within "R2 sees no mount" 60 wait_unmounted_at_r2
PC --json fsck --repair-orphans >"$T/f2.json" 2>"$T/f2.err"
eq "repair of a young orphan exits 0" "$?" 0
eq "young orphan kept" "$(jget orphans_too_new <"$T/f2.json")" 1
eq "nothing removed" "$(jget orphans_removed <"$T/f2.json")" 0
ok "young orphan still on disk" test -f "$OD/000000/00000000"

# Every set old, the real ones too: only the age guard would otherwise
# keep a real set that fsck wrongly took for an orphan.
find "$B" -mindepth 1 -exec touch -d '2 minutes ago' {} +
within "R2 sees no mount" 60 wait_unmounted_at_r2
PC fsck --repair-orphans >"$T/f3.txt" 2>&1
eq "repair exits 0" "$?" 0
cat "$T/f3.txt"
ok "repair says it removed one" grep -q "^removed 1 orphan tract sets" "$T/f3.txt"
ok "orphan folder gone" test ! -e "$OD"
find "$B" -mindepth 3 -maxdepth 3 | sort >"$T/sets.after"
ok "real sets untouched" cmp "$T/sets.before" "$T/sets.after"
PC --json fsck >"$T/f4.json" 2>/dev/null
eq "no orphan after repair" "$(jget orphan_sets <"$T/f4.json")" 0
eq "clean after repair" "$(jget problems <"$T/f4.json")" 0

pl_mount "$M"
(cd "$M" && sha256sum one two sparse rewritten small one.link) >"$T/sums.after"
ok "files unchanged (sha256)" cmp "$T/sums.before" "$T/sums.after"
pl_umount "$M"
ok "fsck --data-check clean" PC fsck --data-check

# ---- the GDT (check (10)) -----------------------------------------------------
# Directories made, moved across parents and removed: each one's GDT row
# names where the walk finds it (one MDS here: copies apply in the batch).
pl_mount "$M"
mkdir -p "$M/g1/g2/g3" "$M/g4"
mv "$M/g1/g2" "$M/g4/g2m"
rmdir "$M/g4/g2m/g3"
mv "$M/g4" "$M/g4r"
G2=$(stat -c %i "$M/g4r/g2m")
G4=$(stat -c %i "$M/g4r")
pl_umount "$M"
PC --json fsck >"$T/g0.json" 2>"$T/g0.err"
eq "fsck after directory changes exits 0" "$?" 0
eq "GDT rows checked: g1, g4r, g2m" "$(jget gdt_rows_checked <"$T/g0.json")" 3
eq "GDT rows: no stale one (g3's removed; files have rows too)" "$(jget gdt_stale <"$T/g0.json")" 0
eq "no problem" "$(jget problems <"$T/g0.json")" 0
if [ -n "$SYSROW" ]; then
    ok "g2m's GDT row made wrong (newer copy)" "$SYSROW" -k "$KEY" "$R2" pomfs gdt "$G2" "$G4" elsewhere
    PC --json fsck >"$T/g1.json" 2>"$T/g1.err"
    eq "fsck with a wrong GDT row exits 1" "$?" 1
    eq "one problem" "$(jget problems <"$T/g1.json")" 1
    ok "it names the place" grep -q "directory $G2 ($G4/g2m): its GDT row names another place" \
        "$T/g1.err"
    # --repair-gdt writes the right row (newest wins) instead of reporting it.
    PC --json fsck --repair-gdt >"$T/g2.json" 2>"$T/g2.err"
    eq "fsck --repair-gdt exits 0" "$?" 0
    eq "one GDT row repaired" "$(jget gdt_repaired <"$T/g2.json")" 1
    PC --json fsck >"$T/g3.json" 2>/dev/null
    eq "clean again" "$(jget problems <"$T/g3.json")" 0
    # Stale rows (no such directory): counted, not problems; --repair-gdt
    # removes the one older than a minute only.
    ok "a stale GDT row of 2 min ago" "$SYSROW" -k "$KEY" "$R2" pomfs gdt 999999 1 gone 120
    ok "a stale GDT row of now" "$SYSROW" -k "$KEY" "$R2" pomfs gdt 999998 1 young
    PC --json fsck >"$T/g4.json" 2>/dev/null
    eq "stale rows are no problem" "$(jget problems <"$T/g4.json")" 0
    eq "two stale rows counted" "$(jget gdt_stale <"$T/g4.json")" 2
    PC --json fsck --repair-gdt >"$T/g5.json" 2>/dev/null
    eq "the old stale row removed" "$(jget gdt_stale_removed <"$T/g5.json")" 1
    PC --json fsck >"$T/g6.json" 2>/dev/null
    eq "one stale row left (the young one)" "$(jget gdt_stale <"$T/g6.json")" 1
    eq "GDT rows: one more (the young stale one)" \
        "$(jget gdt_rows <"$T/g6.json")" "$(( $(jget gdt_rows <"$T/g0.json") + 1 ))"
fi
pl_done
