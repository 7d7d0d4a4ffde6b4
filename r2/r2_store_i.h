/*
 * r2_store_i.h -- what a backend of the R2 state store implements (internal
 * to r2/). A backend embeds `struct r2_store` as the first member of its own
 * handle and points it at a static ops table; the wrappers of r2_store.c
 * check arguments (keys valid, sizes in range, multi without duplicate keys)
 * before they call an op, so ops may assume them.
 *
 * Each op has the contract of the wrapper of the same name in r2_store.h,
 * except that list need not sort (the wrapper sorts) and alloc_id is built
 * by the wrapper on get + put.
 */
#ifndef R2_STORE_I_H
#define R2_STORE_I_H

#include "r2_store.h"

typedef struct r2_store_ops {
    const char *name;
    int (*get)(r2_store *s, const char *key, void **val, size_t *len,
               int64_t *version);
    int (*put)(r2_store *s, const char *key, const void *val, size_t len,
               int64_t expected, unsigned flags, int64_t *new_version);
    int (*del)(r2_store *s, const char *key, int64_t expected);
    int (*list)(r2_store *s, const char *dir, char ***names, size_t *count);
    int (*multi)(r2_store *s, const r2_store_op *ops, size_t n,
                 int64_t *new_versions, size_t *failed);
    int (*watch)(r2_store *s, const char *key, r2_store_watch_fn fn, void *arg);
    void (*unwatch)(r2_store *s, int id);
    int (*elect)(r2_store *s, const void *id, size_t id_len,
                 r2_store_leader_fn fn, void *arg);
    int (*resign)(r2_store *s);
    bool (*is_leader)(r2_store *s);
    int (*leader)(r2_store *s, void **id, size_t *len);
    void (*close)(r2_store *s);
} r2_store_ops;

struct r2_store {
    const r2_store_ops *ops;
};

/* Shared helpers of the backends (r2_store.c). */

/* The parent key of key ("/a/b" -> "/a", "/a" -> "/") in buf of at least
 * strlen(key) + 1 bytes. REQUIRES: key valid and not "/". */
void r2_store_key_parent(const char *key, char *buf);

/* Fresh xt_malloc'd copy of len bytes plus a NUL, or NULL. */
void *r2_store_dup_bytes(const void *p, size_t len);

#endif /* R2_STORE_I_H */
