/*
 * pom_blob_i.h -- internals of the blob tier shared by its generic layer
 * (pom_blob.c) and its backends (pom_blob_local.c, its listing
 * pom_blob_local_list.c; pom_blob_rados.c). Not installed; everyone else
 * uses pom_blob.h.
 *
 * The store handle, an open file and the backend ops table are here. The
 * invariants are those of pom_blob.h, pom_blob.c and pom_blob_local.c.
 */
#ifndef POM_BLOB_I_H
#define POM_BLOB_I_H

#include "pom_blob.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NBUCKETS    64
#define FD_SLOTS    8      /* cached fds per open file (local) */

/* A backend. Ranges given to the per-tract calls lie inside one tract. */
struct blob_ops {
    const char *name;
    int (*open)(pom_blob *b, const struct pom_blob_conf *c);
    void (*close)(pom_blob *b);
    ssize_t (*pread)(pom_blob_file *f, uint32_t t, void *buf, size_t n, uint64_t toff);
    ssize_t (*pwrite)(pom_blob_file *f, uint32_t t, const void *buf, size_t n, uint64_t toff);
    int (*cut)(pom_blob_file *f, uint32_t t, uint64_t len);      /* ftruncate one tract */
    int (*drop_from)(pom_blob_file *f, uint32_t first);          /* remove tracts >= first */
    int (*drop)(pom_blob_file *f, uint32_t t);                   /* remove one tract */
    int (*punch)(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len);
    /* *made: the call created tract t (set also when it then fails). */
    int (*allocate)(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len, bool *made);
    int (*fsync)(pom_blob_file *f);
    int (*flush)(pom_blob_file *f);      /* pom_blob_flush; NULL: nothing kept in memory */
    int (*create)(pom_blob_file *f);                             /* pom_blob_create */
    int (*remove)(pom_blob *b, uint64_t uuid);
    int (*stat)(pom_blob *b, uint64_t uuid, struct pom_blob_stat *st);
    int (*list)(pom_blob *b, pom_blob_list_fn fn, void *arg);  /* every set, once */
    int (*touch)(pom_blob *b, uint64_t uuid);                  /* the set's age to 0 */
    int (*lock)(pom_blob *b, int *token);                      /* pom_blob_reclaim_lock */
    void (*unlock)(pom_blob *b, int token);
    void (*file_fini)(pom_blob_file *f);
    void (*view)(pom_blob *b, const struct xt_view *v); /* pom_blob_view; NULL: ignored */
};

struct pom_blob {
    const struct blob_ops *ops;
    uint32_t fsid;
    uint64_t tract_size;
    unsigned tract_shift;
    size_t rows;                          /* locator table length */
    char *folders[POM_BLOB_FOLDERS_MAX];  /* "F/<fsid>", xt_malloc'd; immutable */
    pthread_mutex_t mu;
    struct pom_blob_file *buckets[NBUCKETS]; /* protected by mu */
    atomic_uint_fast64_t written, read;   /* bytes, pom_blob_counters */
    atomic_uint_fast64_t fault_n;         /* test hook countdown (0: off) */
    atomic_int fault_err;
    void *be;                             /* the backend's own state (mdsl, rados) */
};

struct slot {
    uint32_t tract;
    int fd;          /* -1: empty */
    uint32_t refs;   /* calls using fd (invariant (2)) */
    bool stale;      /* its tract file was removed: closed at refs 0, never found */
    uint64_t used;   /* LRU tick */
};

/* One open file of a store (pom_blob.h invariant 2): the generic layer's
 * fields, then the local backend's. */
struct pom_blob_file {
    pom_blob *b;
    uint64_t uuid, h;
    uint32_t refs;                /* protected by b->mu */
    struct pom_blob_file *next;   /* protected by b->mu: bucket chain */
    pthread_mutex_t mu;
    struct slot slots[FD_SLOTS];  /* protected by mu */
    uint64_t tick;                /* protected by mu */
    uint32_t *dirty;              /* protected by mu: tracts written, not fsynced */
    size_t ndirty, capdirty;      /* protected by mu */
    bool created;                 /* protected by mu: a tract file was created since fsync */
    bool map_dirty;               /* protected by mu: the set's map changed since fsync */
    bool map_made;                /* protected by mu: the map file was created since fsync */
    bool lost;                    /* protected by mu: a dirty tract could not be listed
                                     (no memory): the next fsync syncs whole folders */
    int error;                    /* protected by mu: -errno of a failed fsync, sticky */
    void *be;                     /* protected by mu: the backend's own state (mdsl, rados) */
};

/* The local backend (pom_blob_local.c). */
extern const struct blob_ops pom_blob_local_ops;
/* The mdsl backend (pom_blob_mdsl.c). */
extern const struct blob_ops pom_blob_mdsl_ops;

/* The rados backend (pom_blob_rados.c). */
extern const struct blob_ops pom_blob_rados_ops;

/* The local backend's `list` op (pom_blob_local_list.c): every tract set under
 * b's folders, merged over them, to fn in increasing id order, as
 * pom_blob_list says. The set given to fn is valid during the call only.
 * REQUIRES: b open with the local backend. */
int pom_blob_local_list(pom_blob *b, pom_blob_list_fn fn, void *arg);

#endif /* POM_BLOB_I_H */
