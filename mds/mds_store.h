/*
 * mds_store.h -- how the MDS reaches its MDSLs: an ops struct called through
 * thin wrappers (STYLE: swappable backends). The daemon binds it to the
 * Storage Thrift service (pom.thrift); the tests bind it to the in-memory
 * participant of mds_store_mem.h, which injects faults.
 *
 * A participant is named by its site id (an MDSL of ring 1). Per site it is
 * a two-phase-commit participant and a slice loader:
 *
 *   (none) --prepare(txid, recs)--> PREPARED --commit(txid)--> COMMITTED
 *                                       \-------abort(txid)---> ABORTED
 *
 * Promises a participant must keep (mdsl_store.h promises the same):
 *  (1) prepare returns 0 only once its records are durable; prepared records
 *      are invisible to load until commit.
 *  (2) commit of a committed txid returns 0 (idempotent retry); commit of an
 *      unknown txid returns -ENOENT, of an aborted one -EINVAL.
 *  (3) abort of a prepared or aborted txid returns 0; of an unknown one
 *      -ENOENT; of a committed one -EINVAL (so an abort after an ambiguous
 *      commit error tells the coordinator which way it went).
 *  (4) list_prepared lists every prepared, undecided txid, also after a
 *      restart of the participant.
 *  (5) A committed transaction is all-or-nothing at that participant.
 * Any other negative errno (-ECONNRESET, -ETIMEDOUT, -EIO, ...) means "the
 * outcome of this call is unknown": the caller may retry.
 *
 * Records: the slice's image or delta bytes (xt_slice encodings, opaque
 * here), tagged with the slice's version (every commit of a slice writes
 * version + 1; the loader reports the version of the last record).
 */
#ifndef MDS_STORE_H
#define MDS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One record of a transaction. `bytes` is borrowed for the call. */
struct mds_rec {
    uint32_t fsid;
    uint64_t table;
    uint32_t slice;
    uint64_t version;
    bool full_image;    /* image: replaces everything; else a delta */
    const void *bytes;
    size_t len;
    bool moved;         /* with full_image and len 0: the MOVED tombstone
                           (docs/mdsl-scale.md "Tombstones"); loads then
                           answer -ESTALE, a delta on it is refused -ESTALE */
    bool sys;           /* the slice holds system rows after this record
                           (listed: mds_reload.h) */
    bool reserve;       /* its transaction frees at least what it adds: the
                           MDSL may take it from its space reserve (same on
                           every record of a transaction) */
};

struct mds_blob {
    uint64_t version;
    void *bytes;        /* owned by the enclosing mds_load */
    size_t len;
};

/* One stored slice of a listing (the MDSL index's `S` key). */
struct mds_slice_info {
    uint32_t fsid, slice;
    uint64_t table;
    uint64_t version; /* newest record stored */
    bool moved;       /* its head is a MOVED tombstone */
    bool sys;         /* its newest record has `sys` (struct mds_rec) */
};

#define MDS_LIST_CURSOR_MAX 64

/* One page of list_slices. Free with mds_slice_page_free. */
struct mds_slice_page {
    struct mds_slice_info *v;  /* xt_malloc'd, NULL when n is 0 */
    size_t n;
    uint8_t cursor[MDS_LIST_CURSOR_MAX]; /* opaque: pass back to go on */
    uint32_t cursor_len;       /* 0 on the first call */
    bool end;                  /* nothing follows */
};

/* Result of a load: the latest image and the deltas after it, oldest
 * first. Free with mds_load_free. */
struct mds_load {
    bool has_image;
    struct mds_blob image;
    size_t ndeltas;
    struct mds_blob *deltas;
};

struct mds_store_ops {
    /* REQUIRES: txid != 0, n >= 1. recs and their bytes are borrowed. */
    int (*prepare)(void *ctx, uint32_t site, uint64_t txid, const struct mds_rec *recs,
                   size_t n);
    int (*commit)(void *ctx, uint32_t site, uint64_t txid);
    int (*abort)(void *ctx, uint32_t site, uint64_t txid);
    /* -ENOENT when the slice has no record. On 0 *out is filled (caller
     * frees with mds_load_free); on error *out is zeroed. */
    int (*load)(void *ctx, uint32_t site, uint32_t fsid, uint64_t table, uint32_t slice,
                struct mds_load *out);
    /* *txids: a new array the caller frees with xt_free (NULL when *n == 0). */
    int (*list_prepared)(void *ctx, uint32_t site, uint64_t **txids, size_t *n);
    /* The slices `site` stores, in the site's index order, after `cursor`
     * (cursor_len 0: from the start), at most max (>= 1) of them. On 0
     * *out is filled (mds_slice_page_free), on error zeroed. Tombstones
     * are listed (moved). The store's error, -ENOMEM. */
    int (*list_slices)(void *ctx, uint32_t site, const void *cursor, uint32_t cursor_len,
                       uint32_t max, struct mds_slice_page *out);
};

/* A bound backend. The ops and ctx must outlive every user of the handle. */
typedef struct mds_store {
    const struct mds_store_ops *ops;
    void *ctx;
} mds_store;

static inline int mds_store_prepare(const mds_store *s, uint32_t site, uint64_t txid,
                                    const struct mds_rec *recs, size_t n)
{
    return s->ops->prepare(s->ctx, site, txid, recs, n);
}
static inline int mds_store_commit(const mds_store *s, uint32_t site, uint64_t txid)
{
    return s->ops->commit(s->ctx, site, txid);
}
static inline int mds_store_abort(const mds_store *s, uint32_t site, uint64_t txid)
{
    return s->ops->abort(s->ctx, site, txid);
}
static inline int mds_store_load(const mds_store *s, uint32_t site, uint32_t fsid,
                                 uint64_t table, uint32_t slice, struct mds_load *out)
{
    return s->ops->load(s->ctx, site, fsid, table, slice, out);
}
static inline int mds_store_list_prepared(const mds_store *s, uint32_t site,
                                          uint64_t **txids, size_t *n)
{
    return s->ops->list_prepared(s->ctx, site, txids, n);
}

static inline int mds_store_list_slices(const mds_store *s, uint32_t site, const void *cursor,
                                        uint32_t cursor_len, uint32_t max,
                                        struct mds_slice_page *out)
{
    return s->ops->list_slices(s->ctx, site, cursor, cursor_len, max, out);
}

/* Frees the array of p and zeroes it. NULL or zeroed: no-op. */
void mds_slice_page_free(struct mds_slice_page *p);

/* Frees the blobs of l and zeroes it. NULL or a zeroed l is a no-op. */
void mds_load_free(struct mds_load *l);

/* Which MDSL site holds (fsid, table, slice) under one placement: ring 1
 * in the daemon, a fixed function in tests. A given (fn, arg) must answer
 * alike while in use; ring 1 changes by installing another one
 * (mds_place.h). Must be quick and must not block. */
typedef uint32_t (*mds_locate_fn)(void *arg, uint32_t fsid, uint64_t table, uint32_t slice);

#ifdef __cplusplus
}
#endif
#endif /* MDS_STORE_H */
