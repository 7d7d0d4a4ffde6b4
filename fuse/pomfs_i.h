/*
 * pomfs_i.h -- internals of pomfs shared by its main (pomfs.c) and its
 * low-level operations (pomfs_ops.c).
 */
#ifndef POMFS_I_H
#define POMFS_I_H

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 12)
#include <fuse_lowlevel.h>
#include <stdbool.h>

#include "pomegranate.h"

struct pomfs_inval;

struct pomfs {
    pom_fs *fs;             /* owned; closed after the session ends */
    struct fuse_session *se; /* the mounted session (kernel notifications) */
    double attr_timeout;    /* seconds the kernel may cache attributes */
    double entry_timeout;   /* seconds the kernel may cache names */
    bool threaded;          /* the multi-threaded loop (false with -s) */
};

/* pomfs_inval.c: a thread that drops the kernel's caches of the mount when
 * the MDS restarts (registered with pom_set_restart_cb). Start after the
 * session is mounted; stop before it is unmounted (before pom_close).
 * -ENOMEM, -errno of pthread_create. */
int pomfs_inval_start(pom_fs *fs, struct fuse_session *se, struct pomfs_inval **out);
void pomfs_inval_stop(struct pomfs_inval *v);

/* The operations; userdata of the session is a struct pomfs. */
extern const struct fuse_lowlevel_ops pomfs_ops;

#endif /* POMFS_I_H */
