/*
 * bench_dist.h -- what bench_dist.c (the many-MDS phases) and
 * bench_dist_grow.c (--add-mdsl-at: an MDSL joins under load) share: the
 * options, and the readers of the daemons' SIGHUP reports and of /proc.
 *
 * Invariant: the options are written by main() before any thread starts
 * and only read afterwards.
 */
#ifndef BENCH_DIST_H
#define BENCH_DIST_H

#include "pomegranate.h"

#define DIST_MAX_PROCS 16

struct dist_opt {
    const char *r2, *fsname, *label, *json;
    long n, dir_n, probes;
    int threads;
    int mds_pid[DIST_MAX_PROCS], nmds;
    const char *mds_log[DIST_MAX_PROCS];
    int nlogs;
    int mdsl_pid[DIST_MAX_PROCS], nmdsl;
    /* --add-mdsl-at (bench_dist_grow.c) */
    int add_at;                              /* percent of the creates; 0: off */
    const char *add_cmd;                     /* sh -c: execs the new pom-mdsl */
    const char *mdsl_log[DIST_MAX_PROCS];    /* every MDSL's, the new one last */
    int nmdsl_logs;
    const char *mdsl_dir[DIST_MAX_PROCS];    /* same order */
    int nmdsl_dirs;
    const char *pomctl;
    double window_s;                         /* seconds per reported window */
    double grow_wait_s;                      /* at most this long for STABLE */
};
extern struct dist_opt dist_opt;

/* utime + stime of pid in seconds, 0 when unreadable. */
double dist_proc_cpu(int pid);
/* Lines of the file at path that contain needle (0 when unreadable). */
int dist_count_lines(const char *path, const char *needle);
/* The number after key in line, 0 when key is absent. */
double dist_field_after(const char *line, const char *key);
/* Sends SIGHUP to the n processes pid[] and waits until each one's log[i]
 * holds one more line containing needle (the report's last line) than
 * before, at most 3 s each. Returns n (at most DIST_MAX_PROCS). */
int dist_hup_all(const int *pid, const char *const *log, int n, const char *needle);

/* The --add-mdsl-at run in directory big of fs (both owned by the caller).
 * Returns the operations that failed (0: all checked fine), or -1 when it
 * could not run. */
long dist_grow(pom_fs *fs, pom_ino big);

#endif
