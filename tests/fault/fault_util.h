/*
 * fault_util.h -- helpers shared by the fault tests (tests/fault/): a
 * pom-mdsl + pom-mds pair started with extra arguments and an optional
 * --fault spec, stopped with the exit status checked (a
 * crash is a signal other than the SIGTERM/SIGKILL we sent), a tmpfs of a
 * given size (skip 77 when mounting is not permitted), and small file
 * helpers over libpomegranate.
 *
 * Invariants:
 *  (1) Daemons are addressed by the pid pom_proc_spawn returned, never by
 *      name; pom_proc's atexit handler kills any left behind.
 *  (2) A tmpfs mounted here is unmounted (lazily) by fault_umount() and by
 *      an atexit handler, so a failing assertion leaves no mount behind.
 */
#ifndef FAULT_UTIL_H
#define FAULT_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pomegranate.h"

struct fault_cluster {
    char base[256];        /* folder: mdsl/ (data), mdsl.log, mds.log */
    int mdsl_port, mds_port;
    pid_t mdsl, mds;       /* 0 when not running */
    char mds_addr[64];
    const char *mdsl_bin, *mds_bin;
    int start_wait_ms;     /* how long a start waits for the port (0: 30000) */
};

/* Makes a sanitizer report in a daemon exit with 66 (not 1, which a daemon
 * uses for a clean start-up failure): appends exitcode=66 to ASAN_OPTIONS
 * and UBSAN_OPTIONS of the children. Call once at the start of main. */
void fault_env_init(void);

/* Mounts a tmpfs of `size` ("32m") on dir (created). 0, or -EPERM/-errno
 * when mounting is not permitted (the caller skips with 77). */
int fault_mount_tmpfs(const char *dir, const char *size);
/* Remounts the tmpfs at dir (mounted by fault_mount_tmpfs) with a new
 * size, keeping its files: a volume the operator grows. */
int fault_grow_tmpfs(const char *dir, const char *size);
/* Unmounts dir if fault_mount_tmpfs mounted it. */
void fault_umount(const char *dir);

/* Zeroes c, makes its folder "$TMPDIR/pom-<tag>-XXXXXX" and its mdsl/. */
int fault_cluster_init(struct fault_cluster *c, const char *tag, const char *mdsl_bin,
                       const char *mds_bin);
/* Starts pom-mdsl on <base>/mdsl with the NULL-terminated extra arguments
 * and `--fault fault` (NULL: none); waits until it listens. The port stays
 * the same across restarts. 0 or -errno (-ECHILD: it exited at start;
 * -ETIMEDOUT: still not listening after start_wait_ms, left running). */
int fault_start_mdsl(struct fault_cluster *c, const char *fault, const char *const *extra);
/* Same for pom-mds (commit interval in ms), against the MDSL; fault
 * (NULL: none) is passed as --fault. */
int fault_start_mds(struct fault_cluster *c, const char *fault, int interval_ms);
/* Stops *pid with SIGTERM (SIGKILL after grace_ms) and reaps it. Returns 1
 * when the process had died of a signal we did not send (a crash) or exited
 * with a status other than 0/1 (ASan/UBSan report with exit code), else 0.
 * Sets *pid to 0. */
int fault_stop(pid_t *pid, int grace_ms);
/* Stops both daemons; returns the number of crashes seen. */
int fault_cluster_stop(struct fault_cluster *c);
/* Stops both daemons and removes the folder (kept, and named on stderr,
 * when POM_FAULT_KEEP is set). */
void fault_cluster_destroy(struct fault_cluster *c);

/* The byte at offset off of file number i (a deterministic pattern). */
static inline uint8_t fault_pattern(uint32_t i, uint64_t off)
{
    uint64_t x = (off + 1) * UINT64_C(0x9E3779B97F4A7C15) ^ ((uint64_t)i << 29);
    return (uint8_t)(x >> 56);
}

/* Creates parent/name with len bytes of pattern i (O_EXCL), releases it.
 * 0 or the first -errno (of create, write or release). */
int fault_write_file(pom_fs *fs, pom_ino parent, const char *name, uint32_t i, size_t len);
/* Reads parent/name and checks it is exactly len bytes of pattern i.
 * 0, -EBADMSG (different bytes or size) or -errno. */
int fault_check_file(pom_fs *fs, pom_ino parent, const char *name, uint32_t i, size_t len);

#endif /* FAULT_UTIL_H */
