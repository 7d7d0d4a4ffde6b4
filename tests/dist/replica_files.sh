# replica_files.sh -- sourced by the MDSL replica tests (test_mdsl_replicas.sh,
# test_mdsl_catchup.sh): a deterministic tree of files both sides of 64 KiB
# written through a mount with a reference copy beside it, and the count of
# files that do not read back. Needs DIRS and FILES from the caller.

# write_files M SRC: the files under M and a copy under SRC; every file and
# directory fsynced.
write_files() {
    python3 - "$1" "$2" "$DIRS" "$FILES" <<'EOF'
import os, random, sys
m, src, dirs, files = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(24)
for d in range(dirs):
    for root in (m, src):
        os.makedirs(os.path.join(root, "d%02d" % d), exist_ok=True)
    for f in range(files):
        # Every 10th file is a blob file (> 64 KiB); the rest stay inline.
        n = rnd.randint(70000, 100000) if f % 10 == 9 else rnd.randint(1, 4000)
        data = rnd.randbytes(n)
        for root in (m, src):
            fd = os.open(os.path.join(root, "d%02d" % d, "f%03d" % f),
                         os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, data)
            if root == m:
                os.fsync(fd)
            os.close(fd)
    fd = os.open(os.path.join(m, "d%02d" % d), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
EOF
}

# missing M SRC: prints how many files of SRC do not read back byte-exact
# under M (absent, short, other bytes, or an error; a directory that does
# not list loses all its files).
missing() {
    timeout 600 python3 - "$1" "$2" <<'EOF'
import os, sys
m, src = sys.argv[1], sys.argv[2]
bad = 0
for d in sorted(os.listdir(src)):
    names = sorted(os.listdir(os.path.join(src, d)))
    try:
        os.listdir(os.path.join(m, d))
    except OSError:
        bad += len(names)
        continue
    for f in names:
        want = open(os.path.join(src, d, f), "rb").read()
        try:
            got = open(os.path.join(m, d, f), "rb").read()
        except OSError:
            got = None
        bad += got != want
print(bad)
EOF
}
