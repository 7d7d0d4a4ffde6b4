/*
 * pomfs_i.h -- internals of pomfs shared by its main (pomfs.c) and its
 * low-level operations (pomfs_ops.c).
 */
#ifndef POMFS_I_H
#define POMFS_I_H

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 12)
#include <fuse_lowlevel.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "pomegranate.h"
#include "xt_metrics.h"

struct pomfs_inval;

/* The FUSE operations pomfs times (pomfs_ops.c; /metrics label op=). */
#define POMFS_OPS(X)                                                               \
    X(lookup) X(forget) X(getattr) X(setattr) X(readlink) X(mknod) X(mkdir)        \
    X(symlink) X(unlink) X(rmdir) X(rename) X(link) X(open) X(create) X(read)      \
    X(write) X(flush) X(release) X(fsync) X(opendir) X(readdir) X(readdirplus)     \
    X(releasedir) X(fsyncdir) X(statfs) X(setxattr) X(getxattr) X(listxattr)       \
    X(removexattr) X(access) X(fallocate) X(ioctl)
#define POMFS_OP_ENUM(name) POMFS_OP_##name,
enum pomfs_op { POMFS_OPS(POMFS_OP_ENUM) POMFS_OP__COUNT };
#undef POMFS_OP_ENUM
extern const char *const pomfs_op_names[POMFS_OP__COUNT];

struct pomfs {
    pom_fs *fs;             /* owned; closed after the session ends */
    /* fs once opened, for the metrics thread, which serves from before the
     * open (the mount reports its metrics address to R2 as it registers). */
    _Atomic(pom_fs *) stats_fs;
    struct fuse_session *se; /* the mounted session (kernel notifications) */
    double attr_timeout;    /* seconds the kernel may cache attributes */
    double entry_timeout;   /* seconds the kernel may cache names */
    bool threaded;          /* the multi-threaded loop (false with -s) */
    /* FS_IOC_GETFSLABEL's answer: the fs name, "" when mounted by fsid
     * (not owned; outlives the session). */
    const char *label;
    /* Latency of each operation, from its call to its reply (invariant 1
     * of pomfs_ops.c: the reply is sent on the calling thread). */
    struct xt_metrics_hist op_hist[POMFS_OP__COUNT];
};

/* pomfs.c: pomfs's /metrics families; arg is the struct pomfs. */
void pomfs_metrics_collect(void *arg, xt_metrics_buf *b);

/* pomfs_inval.c: a thread that drops the kernel's caches of the mount when
 * the MDS restarts (registered with pom_set_restart_cb). Start after the
 * session is mounted; stop before it is unmounted (before pom_close).
 * -ENOMEM, -errno of pthread_create. */
int pomfs_inval_start(pom_fs *fs, struct fuse_session *se, struct pomfs_inval **out);
void pomfs_inval_stop(struct pomfs_inval *v);

/* The operations; userdata of the session is a struct pomfs. */
extern const struct fuse_lowlevel_ops pomfs_ops;

#endif /* POMFS_I_H */
