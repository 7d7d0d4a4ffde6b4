/*
 * pom_proc.h -- real processes for integration tests: spawn a daemon with
 * its output in a log file, wait until it listens, signal it, stop it by
 * pid, and clean up its temporary folder (as libfuse's test/ does with its
 * mounts). Used by the ZooKeeper tests of R2 and by every daemon test.
 *
 * Invariants:
 *  (1) No spawned process outlives the test: each child gets
 *      PR_SET_PDEATHSIG(SIGKILL) (it dies with the thread that spawned it,
 *      even when the test crashes), and an atexit handler SIGKILLs and reaps
 *      every child that is still registered when the test exits.
 *  (2) Processes are addressed only by the pid that pom_proc_spawn
 *      returned; nothing is ever killed by name.
 *
 * All functions return 0 (or a non-negative value) or -errno.
 */
#ifndef POM_PROC_H
#define POM_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts argv[0] (searched in PATH) with argv (NULL-terminated), stdin from
 * /dev/null, stdout and stderr appended to logfile (NULL: /dev/null), in a
 * new process group. Returns its pid, or -errno (also when exec fails: the
 * child reports the exec error through a pipe before exiting). */
pid_t pom_proc_spawn(char *const argv[], const char *logfile);

/* Sends sig to the process pid. Returns 0 or -errno. */
int pom_proc_kill(pid_t pid, int sig);

/* Waits up to timeout_ms for pid to exit and reaps it; *status (if not
 * NULL) gets its wait status. Returns 0, or -ETIMEDOUT (still running). */
int pom_proc_wait(pid_t pid, int timeout_ms, int *status);

/* Stops pid: SIGTERM, up to grace_ms to exit, then SIGKILL; always reaps
 * (a stopped process is continued first). Returns 0 or -errno. */
int pom_proc_stop(pid_t pid, int grace_ms);

/* Whether pid is alive (not exited; a zombie counts as exited). */
bool pom_proc_alive(pid_t pid);

/* Waits up to timeout_ms until a TCP connection to host:port succeeds
 * (host is a numeric IPv4 address such as "127.0.0.1"). Returns 0 or
 * -ETIMEDOUT. */
int pom_proc_wait_port(const char *host, int port, int timeout_ms);

/* A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and
 * released). Returns the port or -errno. */
int pom_free_port(void);

/* Creates a fresh folder "$TMPDIR/pom-<tag>-XXXXXX" (TMPDIR unset: /tmp)
 * into buf of len bytes. Returns 0 or -errno. */
int pom_tmpdir(const char *tag, char *buf, size_t len);

/* Removes a folder tree (as rm -rf). Returns 0 or -errno. */
int pom_rm_rf(const char *path);

/* Bad input for a daemon's RPC port: `rounds` connections to 127.0.0.1:port,
 * each sending one malformed frame and closing: a plausible length with a
 * garbage body, a valid Thrift call header for `method` then garbage, a
 * huge length, or random bytes (in turn; seeded). Returns 0, or -errno when
 * a connection fails (the daemon died). */
int pom_send_garbage(int port, unsigned seed, int rounds, const char *method);

#ifdef __cplusplus
}
#endif
#endif /* POM_PROC_H */
