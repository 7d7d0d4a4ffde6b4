/*
 * pom_blob_i.h -- internals of the blob tier shared by pom_blob.c (the
 * generic layer and the local backend's tract I/O) and pom_blob_list.c (the
 * listing of every tract set, pom_blob_list). Not installed; included by
 * those two files only, everyone else uses pom_blob.h.
 *
 * The store handle and the backend ops table are here; struct
 * pom_blob_file stays private to pom_blob.c. The invariants are those of
 * pom_blob.h and pom_blob.c.
 */
#ifndef POM_BLOB_I_H
#define POM_BLOB_I_H

#include "pom_blob.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NBUCKETS    64

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
    int (*allocate)(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len);
    int (*fsync)(pom_blob_file *f);
    int (*remove)(pom_blob *b, uint64_t uuid);
    int (*stat)(pom_blob *b, uint64_t uuid, struct pom_blob_stat *st);
    int (*list)(pom_blob *b, pom_blob_list_fn fn, void *arg);  /* every set, once */
    int (*touch)(pom_blob *b, uint64_t uuid);                  /* the set's age to 0 */
    int (*lock)(pom_blob *b, int *token);                      /* pom_blob_reclaim_lock */
    void (*unlock)(pom_blob *b, int token);
    void (*file_fini)(pom_blob_file *f);
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
    atomic_uint_fast64_t fault_n;         /* test hook countdown (0: off) */
    atomic_int fault_err;
};

/* The local backend's `list` op (pom_blob_list.c): every tract set under
 * b's folders, merged over them, to fn in increasing id order, as
 * pom_blob_list says. The set given to fn is valid during the call only.
 * REQUIRES: b open with the local backend. */
int pom_blob_local_list(pom_blob *b, pom_blob_list_fn fn, void *arg);

#endif /* POM_BLOB_I_H */
