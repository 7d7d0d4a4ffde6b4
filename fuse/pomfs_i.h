/*
 * pomfs_i.h -- internals of pomfs shared by its main (pomfs.c) and its
 * low-level operations (pomfs_ops.c).
 */
#ifndef POMFS_I_H
#define POMFS_I_H

#define FUSE_USE_VERSION FUSE_MAKE_VERSION(3, 12)
#include <fuse_lowlevel.h>

#include "pomegranate.h"

struct pomfs {
    pom_fs *fs;             /* owned; closed after the session ends */
    double attr_timeout;    /* seconds the kernel may cache attributes */
    double entry_timeout;   /* seconds the kernel may cache names */
};

/* The operations; userdata of the session is a struct pomfs. */
extern const struct fuse_lowlevel_ops pomfs_ops;

#endif /* POMFS_I_H */
