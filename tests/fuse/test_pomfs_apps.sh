#!/bin/bash
# test_pomfs_apps.sh POMCTL POMFS SRCDIR -- real programs on a real mount of
# a cluster started with `pomctl up` (R2 + MDSL + MDS, free ports):
#   - tar of a source tree (this project's sources, Linux UAPI headers, a
#     few symlinks, empty folders, a 1 MiB file) into the mount and out
#     again: identical sha256sum listings and identical file modes, sizes,
#     mtimes and link targets, after a remount (bytes from the servers);
#   - git init, add, two commits, git fsck --full --strict, git gc, and a
#     git clone from the mount to the mount;
#   - two mounts of the same fs: each sees the other's creates, overwrites,
#     renames and removes within the attribute/entry timeout (1 s + slack).
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
SRC=$(realpath "$3")
M=$T/m1 M2=$T/m2
pl_mount "$M" attr_timeout=1,entry_timeout=1

listing() { # dir: content hashes + metadata of everything under it
    (cd "$1" && find . -type f -print0 | sort -z | xargs -0r sha256sum
     find . ! -type d -printf '%p %y %m %s %l\n' | sort   # a folder's size means
     find . -type d -printf '%p %y %m\n' | sort          # nothing portable
     find . ! -type l -printf '%p %TY-%Tm-%Td %TH:%TM:%.2TS\n' | sort)
}

# ---- tar in and out ------------------------------------------------------
mkdir -p "$T/tree"
(cd "$SRC" && git ls-files -z 2>/dev/null | head -zn 400 | xargs -0r cp --parents -t "$T/tree" 2>/dev/null) ||
    cp -r "$SRC/xtable" "$T/tree/"
[ -d /usr/include/linux ] && cp -r /usr/include/linux "$T/tree/uapi"
mkdir -p "$T/tree/empty/deeper" "$T/tree/links"
ln -s ../xtable "$T/tree/links/dir-link"
ln -s /nonexistent/target "$T/tree/links/dangling"
head -c $((1 << 20)) /dev/urandom >"$T/tree/one-mib.bin"
chmod 0750 "$T/tree/empty"; chmod 0600 "$T/tree/one-mib.bin"
touch -d '2001-02-03 04:05:06' "$T/tree/one-mib.bin"
nfiles=$(find "$T/tree" -type f | wc -l)
echo "tree: $nfiles files, $(du -sh "$T/tree" | cut -f1)"
tar -C "$T" -cf "$T/in.tar" tree
ok "tar x into the mount" tar -C "$M" -xpf "$T/in.tar"
listing "$T/tree" >"$T/want"
listing "$M/tree" >"$T/got.1"
ok "listing on the mount is the source's" diff "$T/want" "$T/got.1"
pl_umount "$M"; pl_mount "$M" attr_timeout=1,entry_timeout=1
listing "$M/tree" >"$T/got.2"
ok "same after a remount" diff "$T/want" "$T/got.2"
ok "tar c out of the mount" tar -C "$M" -cf "$T/out.tar" tree
mkdir "$T/back"
ok "tar x of it" tar -C "$T/back" -xpf "$T/out.tar"
listing "$T/back/tree" >"$T/got.3"
ok "round trip through the mount is exact" diff "$T/want" "$T/got.3"

# ---- git -----------------------------------------------------------------
if command -v git >/dev/null; then
    G="git -c user.name=pom -c user.email=pom@example.invalid -c init.defaultBranch=main"
    mkdir "$M/repo"
    ok "git init" $G -C "$M/repo" init -q
    ok "copy sources" cp -r "$T/tree/." "$M/repo/"
    ok "git add" $G -C "$M/repo" add -A
    ok "git commit" $G -C "$M/repo" commit -qm first
    echo change >>"$M/repo/one-mib.bin"
    ok "git mv" $G -C "$M/repo" mv links moved-links
    ok "second commit" $G -C "$M/repo" commit -qam second
    ok "git fsck --full --strict" $G -C "$M/repo" fsck --full --strict
    eq "two commits" "$($G -C "$M/repo" rev-list --count HEAD)" "2"
    eq "clean work tree" "$($G -C "$M/repo" status --porcelain | wc -l)" "0"
    ok "git gc" $G -C "$M/repo" gc -q
    ok "fsck after gc" $G -C "$M/repo" fsck --full --strict
    ok "git clone on the mount" $G clone -q "$M/repo" "$M/clone"
    # git keeps no empty folders; diff compares symlinks as links
    ok "clone has the tree" diff -r --no-dereference -x .git -x empty "$M/repo" "$M/clone"
else
    echo "SKIP: git not installed"
fi

# ---- two mounts ----------------------------------------------------------
pl_mount "$M2" attr_timeout=1,entry_timeout=1
ls "$M2" >/dev/null; stat "$M2/shared" >/dev/null 2>&1  # caches in m2, incl. a negative entry
echo v1 >"$M/shared"
within "m2 sees m1's create" 3 grep -qx v1 "$M2/shared"
echo v2-longer >"$M/shared"
within "m2 sees m1's overwrite" 3 grep -qx v2-longer "$M2/shared"
mkdir "$M2/from2"; echo x >"$M2/from2/f"
within "m1 sees m2's mkdir and file" 3 grep -qx x "$M/from2/f"
mv "$M/shared" "$M/from2/renamed"
within "m2 sees m1's rename (new name)" 3 grep -qx v2-longer "$M2/from2/renamed"
within "m2 sees m1's rename (old name gone)" 3 test ! -e "$M2/shared"
rm -r "$M2/from2"
within "m1 sees m2's rm -r" 3 test ! -e "$M/from2"
ok "tree still intact from m2" bash -c "cd '$M2/tree' && find . -type f -print0 | sort -z | xargs -0 sha256sum | diff - <(head -n $nfiles '$T/want')"
pl_umount "$M2"
pl_umount "$M"
pl_done
