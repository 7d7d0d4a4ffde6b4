/*
 * pomctl_proc.h -- the process work behind `pomctl up` / `down`: finding
 * the daemon executables, starting them detached, recording them in pid
 * files, and stopping exactly the processes that were recorded.
 *
 * A pid file (DIR/run/<daemon>.pid) holds two lines: the pid, and the
 * absolute path of the executable that was started. Both are written
 * atomically (temp file + rename).
 *
 * Invariants:
 *  (1) A pid is signalled only while /proc/PID/exe still names the
 *      recorded executable (pomctl_proc_owns): a daemon that died and whose
 *      pid was reused by an unrelated process is never touched.
 *  (2) Nothing is ever looked up or signalled by name; only recorded pids.
 *  (3) A started daemon is detached: its own session (setsid), stdin from
 *      /dev/null, stdout+stderr appended to its log, no inherited fds
 *      beyond 0-2, so it outlives pomctl and holds no terminal.
 *
 * Functions return 0 (or a non-negative value) or -errno.
 */
#ifndef POMCTL_PROC_H
#define POMCTL_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Finds executable `name`, trying in order: bin_dir (if not NULL/empty),
 * self_dir, then self_dir/../mdsl, ../mds, ../r2, ../fuse (the build tree
 * layout), then each folder of path_env (a PATH-style list; NULL: none).
 * Writes the path into out (cap bytes). 0 or -ENOENT (-ENAMETOOLONG if a
 * path does not fit). */
int pomctl_find_exe(const char *name, const char *bin_dir, const char *self_dir,
                    const char *path_env, char *out, size_t cap);
/* The folder holding the running executable (/proc/self/exe). */
int pomctl_self_dir(char *out, size_t cap);

/* Writes/reads a pid file (format above). read: -ENOENT when absent,
 * -EBADMSG when malformed; exe may be NULL. */
int pomctl_pidfile_write(const char *path, pid_t pid, const char *exe);
int pomctl_pidfile_read(const char *path, pid_t *pid, char *exe, size_t cap);

/* Whether pid exists and is not a zombie. */
bool pomctl_proc_alive(pid_t pid);
/* 1 when pid is alive and its /proc/PID/exe is `exe` (a binary replaced on
 * disk since, shown as "PATH (deleted)", still counts), 0 when it is not
 * (gone, zombie, or another executable), -errno when /proc cannot tell
 * (e.g. -EACCES: another user's process, which is not ours either). */
int pomctl_proc_owns(pid_t pid, const char *exe);

/* Starts argv[0] (an absolute path) detached (invariant 3) with output
 * appended to logfile. The child is pomctl's child until pomctl exits, so
 * pomctl_proc_reap can tell an early death. Returns the pid, or -errno
 * (also when exec fails: reported through a close-on-exec pipe). */
pid_t pomctl_proc_spawn(char *const argv[], const char *logfile);
/* Non-blocking: 1 and *status when our child pid has exited (reaped), 0
 * when it runs. */
int pomctl_proc_reap(pid_t pid, int *status);

/* Stops pid (after checking invariant 1): SIGTERM, up to grace_ms for it to
 * exit, then SIGKILL and up to 5 s more. Returns 0 when it is gone (or was
 * not ours / not running: *signalled false), -ETIMEDOUT if it survived
 * SIGKILL. */
int pomctl_proc_stop(pid_t pid, const char *exe, int grace_ms, bool *signalled);

/* Reads a decimal number file (a daemon's --port-file): -ENOENT while it
 * does not exist, -EBADMSG if malformed. */
int pomctl_read_long_file(const char *path, long *out);
/* Writes a one-line text file atomically. */
int pomctl_write_text_file(const char *path, const char *text);
/* Reads the first line of a text file (newline stripped). */
int pomctl_read_line_file(const char *path, char *out, size_t cap);
/* mkdir -p (mode 0755). */
int pomctl_mkdirs(const char *path);
/* Whether a mount is active at path (in /proc/self/mountinfo). */
bool pomctl_is_mounted(const char *path);

#endif /* POMCTL_PROC_H */
