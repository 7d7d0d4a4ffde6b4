/*
 * pomfs_inval.c -- drops the kernel's caches of a mount when the MDS
 * restarted (pom_set_restart_cb).
 *
 * The MDS keeps no operation log: a restart loses the changes of its open
 * commit group (docs/architecture.md "Daemon crashes"). The kernel may still hold names, attributes
 * and pages that showed those changes, and would serve them for up to the
 * entry/attribute timeouts: a renamed name pointing at the wrong file, a
 * size no row has any more (read back as zeros past the real bytes). So
 * when the library sees a new MDS epoch, this thread tells the kernel to
 * forget every name and inode pomfs handed out.
 *
 * Invariants:
 *  (1) The kernel is told from this worker only, never from a request
 *      handler: invalidating a name takes its directory's lock, which the
 *      request that brought the new epoch (a lookup, a readdir) may hold
 *      while it waits for pomfs's reply.
 *  (2) Restarts seen while a pass runs start another pass after it (the
 *      worker's wakes are counted: xt_worker.h invariant 2), so no restart
 *      goes unhandled.
 */
#include "pomfs_i.h"

#include <assert.h>
#include <string.h>

#include "xt_common.h"
#include "xt_worker.h"

struct pomfs_inval {
    struct fuse_session *se;
    pom_fs *fs;
    xt_worker *worker;
};

/* pom_restart_fn: runs on a request thread; only wakes the worker (1). */
static void on_restart(void *arg)
{
    struct pomfs_inval *v = arg;
    xt_worker_wake(v->worker);
}

static void forget_one(void *arg, pom_ino ino, pom_ino parent, const char *name)
{
    struct pomfs_inval *v = arg;
    /* -ENOENT: the kernel had already dropped it; nothing else to do. */
    fuse_lowlevel_notify_inval_entry(v->se, parent, name, strlen(name));
    fuse_lowlevel_notify_inval_inode(v->se, ino, 0, 0);
}

/* One pass, after one or more restarts (an xt_worker step). */
static uint64_t inval_pass(xt_worker *w, void *arg)
{
    struct pomfs_inval *v = arg;
    (void)w;
    XT_INFO("pomfs: the MDS restarted; dropping the kernel's cached names and pages");
    /* The root's attributes (its mtime/nlink may be lost changes too). */
    fuse_lowlevel_notify_inval_inode(v->se, FUSE_ROOT_ID, -1, 0);
    int rc = pom_inodes(v->fs, forget_one, v);
    if (rc < 0)
        XT_WARN("pomfs: cannot list the inodes to invalidate: %s", strerror(-rc));
    return XT_WORKER_IDLE;
}

int pomfs_inval_start(pom_fs *fs, struct fuse_session *se, struct pomfs_inval **out)
{
    struct pomfs_inval *v = xt_calloc(1, sizeof *v);
    if (!v)
        return -ENOMEM;
    assert(fs && se);
    v->se = se;
    v->fs = fs;
    struct xt_worker_opts wo = { .name = "pomfs-inval", .step = inval_pass, .arg = v,
                                 .first_ms = XT_WORKER_IDLE };
    int rc = xt_worker_start(&wo, &v->worker);
    if (rc < 0) {
        xt_free(v);
        return rc;
    }
    pom_set_restart_cb(fs, on_restart, v);
    *out = v;
    return 0;
}

void pomfs_inval_stop(struct pomfs_inval *v)
{
    if (!v)
        return;
    pom_set_restart_cb(v->fs, NULL, NULL);
    xt_worker_stop(v->worker);
    xt_free(v);
}
