/*
 * xt_store.h -- the storage contract between an MDS and its MDSLs, spelled
 * once: the slice identity, the record a transaction writes, the result of
 * a slice load and a page of the slice listing. The MDS's store backends
 * (mds/mds_store.h), the Storage Thrift glue (xtable/rpc/xt_rpc_mdsl.h) and
 * the MDSL engine (mdsl/mdsl_store.h) all pass these types through without
 * reshaping; mdsl/mdsl_format.h writes the record types and flags below to
 * disk as they are.
 *
 * Invariants:
 *  (1) The XT_STORE_* type and XT_STORE_F_* flag values are on-disk values
 *      (mdsl_format.h header bytes 4 and 5): never renumbered.
 *  (2) XT_STORE_F_RESERVE is a prepare-time flag only and never stored.
 *  (3) Blobs of a load and the slices of a list are xt_malloc'd and owned by
 *      the enclosing result until its free function runs.
 */
#ifndef XT_STORE_H
#define XT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One slice of one table of one file system. 16 bytes, no padding, so it
 * may be compared and hashed as bytes once zero-initialised. */
typedef struct xt_slice_id {
    uint32_t fsid;
    uint32_t slice;
    uint64_t table;
} xt_slice_id;

static inline bool xt_slice_id_eq(xt_slice_id a, xt_slice_id b)
{
    return a.fsid == b.fsid && a.slice == b.slice && a.table == b.table;
}

/* Record types (the MDSL's own transaction records follow, mdsl_format.h). */
enum xt_store_type {
    XT_STORE_IMAGE = 1,  /* full slice image (opaque bytes): replaces the slice */
    XT_STORE_DELTA = 2,  /* slice delta: changed rows since version - 1 */
    XT_STORE_COLUMN = 3, /* one row's column-group bytes */
};

#define XT_STORE_F_TOMBSTONE 0x01 /* COLUMN, empty: the row's group is deleted */
#define XT_STORE_F_MOVED 0x02     /* IMAGE, empty: the slice moved to another MDSL
                                     (docs/mdsl-scale.md); loads
                                     then answer -ESTALE, a delta on it is refused
                                     with -ESTALE */
#define XT_STORE_F_SYS 0x04       /* IMAGE/DELTA: the slice holds system rows after
                                     this record (RMU outbox, pending, count or
                                     decision rows): a restarted MDS loads it to
                                     finish them (docs/mds-xact.md "Reload") */
#define XT_STORE_F_RESERVE 0x80   /* prepare only, never stored: on every record
                                     of a transaction that frees at least what it
                                     adds; it may use the MDSL's space reserve
                                     (docs/format-mdsl.md "A full disk") */

/* One record of a transaction. Pointers are borrowed for the call. */
struct xt_store_rec {
    uint8_t type;      /* XT_STORE_IMAGE, _DELTA or _COLUMN */
    uint8_t flags;     /* XT_STORE_F_* */
    xt_slice_id id;
    uint64_t version;  /* slice version (every commit of a slice writes
                          version + 1); COLUMN: the row's */
    uint64_t key;      /* COLUMN: row uuid */
    uint32_t group;    /* COLUMN: column group */
    const void *data;
    uint32_t len;
};

struct xt_store_blob {
    uint64_t version;
    void *data;        /* xt_malloc'd, owned by the enclosing load */
    uint32_t len;
    uint8_t flags;     /* XT_STORE_F_* the record was stored with */
};

/* The latest image of a slice and the deltas after it, oldest first; the
 * reader replays them. Free with xt_store_load_free. */
struct xt_store_load {
    bool has_image;
    struct xt_store_blob image;
    size_t ndeltas;
    struct xt_store_blob *deltas; /* xt_malloc'd array, NULL when ndeltas is 0 */
};
/* Frees the blobs and the array and zeroes *l. NULL or zeroed: no-op. */
void xt_store_load_free(struct xt_store_load *l);

/* One stored slice of a listing (the MDSL index's slice key). */
struct xt_store_slice {
    xt_slice_id id;
    uint64_t version;  /* newest version stored (image or delta) */
    bool moved;        /* its newest image is a MOVED tombstone */
    bool sys;          /* its newest record has XT_STORE_F_SYS */
    bool image;        /* an image is stored: the slice is whole there */
};

#define XT_STORE_CURSOR_MAX 64 /* bytes of a listing cursor, at most */

/* One page of a listing, in the MDSL's index order. Free with
 * xt_store_list_free. */
struct xt_store_list {
    struct xt_store_slice *slices; /* xt_malloc'd, NULL when n is 0 */
    size_t n;
    uint8_t cursor[XT_STORE_CURSOR_MAX]; /* opaque: pass back to go on */
    uint32_t cursor_len;               /* 0: nothing returned from the start */
    bool end;                          /* nothing follows slices[n-1] */
};
/* Frees the array and zeroes *l. NULL or zeroed: no-op. */
void xt_store_list_free(struct xt_store_list *l);

/* One tract set of the mdsl blob backend as one MDSL holds it (tract_list,
 * docs/format-blob.md "mdsl"): the tracts it stores there (the set's map
 * included) and their payload bytes, and the wall-clock ns of the set's
 * last put or lease there (the MDSL's start for a set it only replayed). */
struct xt_tract_set {
    uint64_t set, tracts, bytes;
    int64_t mtime_ns;
};
/* A page of them: pass cookie back to go on until end. */
struct xt_tract_list {
    struct xt_tract_set *sets;         /* xt_malloc'd, NULL when n is 0 */
    size_t n;
    uint64_t cookie;                   /* opaque; 0: from the first */
    bool end;                          /* nothing follows sets[n-1] */
};

#ifdef __cplusplus
}
#endif
#endif /* XT_STORE_H */
