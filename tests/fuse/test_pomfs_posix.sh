#!/bin/bash
# test_pomfs_posix.sh POMCTL POMFS POM_DIO -- POSIX semantics xfstests found
# wrong, on one mount of a `pomctl up` cluster (docs/testing.md
# "test_pomfs_posix"):
#   asynchronous O_DIRECT writes read back by buffered reads that raced
#   with them (generic/451; pom_dio).
. "$(dirname "$0")/pomfs_lib.sh" "$1" "$2"
DIO=$(realpath "$3")
M=$T/m
pl_mount "$M"

"$DIO" "$M/dio" 300 >"$T/dio.out" 2>&1; rc=$?
cat "$T/dio.out"
[ "$rc" = 77 ] || eq "aio O_DIRECT writes, then buffered reads" "$rc" 0

pl_umount "$M"
pl_done
