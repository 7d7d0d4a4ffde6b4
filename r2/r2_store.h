/*
 * r2_store.h -- the state store of R2: versioned records under path keys,
 * ephemeral records, atomic multi-ops, id allocation, watches and leader
 * election, behind one interface with two backends:
 *
 *   - embedded (r2_store_embedded.c): LevelDB in one folder, one session,
 *     always leader; for a one-machine cluster;
 *   - ZooKeeper (r2_store_zk.c): znodes under a root prefix, sessions,
 *     election among several R2 processes.
 *
 * Every backend implements the ops struct of r2_store_i.h; callers use only
 * the r2_store_* wrappers below, where keys are checked and where tests can
 * inject faults (as SQLite's sqlite3OsRead over sqlite3_io_methods).
 *
 * Data model (identical in both backends; docs/r2-store.md):
 *  (1) A key is an absolute path: "/" then components of 1..255 printable
 *      ASCII bytes (0x21..0x7e) except '/', no "." or ".." component, at
 *      most R2_STORE_KEY_MAX bytes in all. "/" itself names the root, which
 *      can be listed but holds no record.
 *  (2) A record has bytes (at most R2_STORE_VALUE_MAX) and a version. A
 *      record is created at version 0; every successful put adds 1.
 *  (3) Records form a tree, as znodes do: creating "/a/b/c" creates the
 *      missing ancestors "/a" and "/a/b" as persistent records with empty
 *      bytes. A record with children cannot be deleted (-ENOTEMPTY); an
 *      ephemeral record cannot have children (-ENOTDIR).
 *  (4) An ephemeral record belongs to the store session that created it and
 *      vanishes when that session ends: r2_store_close, process death (ZK:
 *      after the session timeout), or, embedded, at the next open. A ZK
 *      store that loses its session re-creates its ephemerals in the new one.
 *  (5) A write is a compare-and-set on the version (expected, below). Every
 *      call is atomic; r2_store_multi is atomic across all its ops.
 *
 * Errors (the set tests assert on): -ENOENT no record, -EEXIST record exists
 * (create only), -ESTALE version mismatch, -ENOTEMPTY, -ENOTDIR, -EINVAL bad
 * key or argument, -EFBIG value too large, -ENOMEM, -EBUSY store folder in
 * use, -EIO corrupt record / backend failure (detail in the log),
 * -ENOTCONN the ZK server is unreachable and the call was not sent,
 * -ETIMEDOUT the call was sent but no answer came within the call timeout
 * (a write's outcome is then unknown: read back before retrying).
 */
#ifndef R2_STORE_H
#define R2_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct r2_store r2_store;

#define R2_STORE_KEY_MAX   1024
#define R2_STORE_VALUE_MAX (1000 * 1000) /* under ZooKeeper's 1 MiB jute limit */
#define R2_STORE_MULTI_MAX 64

/* Expected-version values of put/delete/multi besides a version >= 0. */
#define R2_VER_ANY    (-1)  /* put: create or overwrite; delete: any version */
#define R2_VER_CREATE (-2)  /* put only: create; -EEXIST if the record exists */

/* Flags of r2_store_put: they take effect only when the put creates. */
#define R2_PUT_EPHEMERAL 0x1u

/* ---- records --------------------------------------------------------- */

/* Reads the record at key. On success *val (if val != NULL) is a fresh
 * buffer of *len bytes plus a NUL byte (so text reads as a C string), which
 * the caller frees with xt_free; *version (if not NULL) is its version.
 * Returns 0, -ENOENT, or another -errno. */
int r2_store_get(r2_store *s, const char *key, void **val, size_t *len,
                 int64_t *version);

/* Writes len bytes at key if its version is `expected` (>= 0), or under
 * R2_VER_ANY / R2_VER_CREATE as defined above; creates missing ancestors.
 * val is read during the call only. *new_version (if not NULL) receives
 * the version written. Returns 0, -ESTALE (version mismatch), -ENOENT
 * (expected >= 0 and no record), -EEXIST (R2_VER_CREATE), -ENOTDIR (an
 * ancestor is ephemeral), or another -errno. */
int r2_store_put(r2_store *s, const char *key, const void *val, size_t len,
                 int64_t expected, unsigned flags, int64_t *new_version);

/* Deletes the record at key if its version is `expected` (>= 0) or for
 * R2_VER_ANY. Returns 0, -ENOENT, -ESTALE, -ENOTEMPTY, or -errno. */
int r2_store_delete(r2_store *s, const char *key, int64_t expected);

/* Lists the names (last components, not full keys) of the direct children
 * of dir, sorted by strcmp. *names is an array of *count strings that the
 * caller frees with r2_store_names_free. Returns 0 or -ENOENT (no record
 * at dir, unless dir is "/") or -errno. */
int r2_store_list(r2_store *s, const char *dir, char ***names, size_t *count);
void r2_store_names_free(char **names, size_t count);

/* ---- atomic multi-op -------------------------------------------------- */

enum r2_store_op_type {
    R2_OP_PUT = 1,    /* as r2_store_put (flags apply) */
    R2_OP_DELETE = 2, /* as r2_store_delete */
    R2_OP_CHECK = 3,  /* no change; the record's version must be expected */
};

typedef struct r2_store_op {
    enum r2_store_op_type type;
    const char *key;
    const void *val;  /* R2_OP_PUT */
    size_t len;       /* R2_OP_PUT */
    int64_t expected; /* a version, R2_VER_ANY, or R2_VER_CREATE (put) */
    unsigned flags;   /* R2_OP_PUT: R2_PUT_* */
} r2_store_op;

/* Applies n (1..R2_STORE_MULTI_MAX) ops atomically: all or none. Two ops on
 * one key are not allowed (-EINVAL). On success, new_versions (if not NULL,
 * n entries) gets the version written by each put and -1 for other ops. On
 * failure nothing changed, *failed (if not NULL) is the index of the op
 * that failed, and the return is that op's -errno as for the single call. */
int r2_store_multi(r2_store *s, const r2_store_op *ops, size_t n,
                   int64_t *new_versions, size_t *failed);

/* ---- id allocation ----------------------------------------------------- */

/* Allocates count (>= 1) consecutive ids from the counter record at key:
 * *first receives the first. The record holds the next free id as 8 bytes
 * little-endian; a missing record counts as 1, so ids start at 1. Every
 * allocation is a compare-and-set, so ids stay unique across threads,
 * processes and R2 leader changes. Returns 0, -EOVERFLOW, -EIO (record is
 * not 8 bytes), -EAGAIN (gave up after many conflicts) or -errno. */
int r2_store_alloc_id(r2_store *s, const char *key, uint64_t count,
                      uint64_t *first);

/* ---- watches ------------------------------------------------------------ */

/* Called when the record at key was created, changed or deleted, or when
 * its list of children changed; also (spuriously) after a ZK session was
 * replaced, when changes may have been missed. Tells that something
 * changed, not what: the caller re-reads. Runs on a store thread (ZK) or on
 * the thread whose write caused it (embedded), never under a store lock,
 * so it may call the store; it should return quickly. */
typedef void (*r2_store_watch_fn)(void *arg, const char *key);

/* Registers a persistent watch on key (which need not exist). Returns a
 * watch id > 0, or -errno. arg is passed back as is. */
int r2_store_watch(r2_store *s, const char *key, r2_store_watch_fn fn, void *arg);
/* Removes a watch: when it returns, fn is not running and will not run. */
void r2_store_unwatch(r2_store *s, int id);

/* ---- leader election ----------------------------------------------------- */

/* Called with leader = true when this store becomes the leader and with
 * false when it stops being sure it is (connection lost, session expired,
 * resigned). Same threads as watches. */
typedef void (*r2_store_leader_fn)(void *arg, bool leader);

/* Joins the election under this store's root, advertising id (copied; e.g.
 * the R2 service address, so followers can redirect clients). The embedded
 * store is at once the leader (fn runs before this returns). ZK: the
 * session with the lowest election node leads; a session that loses its
 * connection gives up leadership before its node can expire, so two stores
 * never both believe they lead for longer than the connection-loss delay.
 * Returns 0, -EALREADY if already joined, or -errno. */
int r2_store_elect(r2_store *s, const void *id, size_t id_len,
                   r2_store_leader_fn fn, void *arg);
/* Leaves the election (the next candidate takes over). */
int r2_store_resign(r2_store *s);
/* Whether this store leads now. */
bool r2_store_is_leader(r2_store *s);
/* The id the current leader advertised: *id is a fresh NUL-terminated
 * buffer (xt_free) of *len bytes. Returns 0, -ENOENT (no leader), -errno. */
int r2_store_leader(r2_store *s, void **id, size_t *len);

/* ---- lifetime ------------------------------------------------------------ */

/* Backend name, "embedded" or "zookeeper". */
const char *r2_store_backend(const r2_store *s);

/* Ends the session (its ephemerals vanish, its election node goes) and
 * frees s. REQUIRES: no other thread uses s. NULL is a no-op. */
void r2_store_close(r2_store *s);

/* True if key is valid under rule (1) (the root "/" included). */
bool r2_store_key_valid(const char *key);

#ifdef __cplusplus
}
#endif
#endif /* R2_STORE_H */
