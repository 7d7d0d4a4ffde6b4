/*
 * mdsl_sltab.h -- an in-memory cache of what the pointer index holds for
 * each slice (fsid, table, slice), so that a commit does not read every
 * pointer of the slices it touches (mdsl_apply.c).
 *
 * It is a cache only: an entry may be dropped at any time (memory bound,
 * allocation failure, an index write that failed) and is then reloaded from
 * the index by one scan of the slice. Nothing of it is on disk.
 *
 * Invariants (each kept by mdsl_apply.c, which alone writes entries):
 *  (1) An entry describes the index as last written: no SLICE pointer of
 *      the slice has a version below `lo` or above `hi` (bounds, maybe not
 *      tight), and when `has_img` the newest IMAGE pointer is exactly at
 *      `img` (never a bound).
 *  (2) `any` is false only if the slice has no pointer at all.
 *  (3) `img_moved` is the XT_STORE_F_MOVED flag of that newest image (the
 *      prepare-time DELTA guard of a moved slice, mdsl_store.h).
 *
 * Threads: not thread-safe; the store's writer token protects the table.
 */
#ifndef MDSL_SLTAB_H
#define MDSL_SLTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xt_store.h"

struct mdsl_slstate {
    bool any;       /* the slice may have pointers (lo, hi valid) */
    bool has_img;
    uint64_t lo, hi;
    uint64_t img;   /* newest IMAGE version when has_img */
    bool img_moved; /* that image is a MOVED tombstone */
};

typedef struct mdsl_sltab mdsl_sltab;

/* At most `max` entries (0 = 1M); past it the table is emptied and refills
 * lazily. *out: mdsl_sltab_free(). -ENOMEM. */
int mdsl_sltab_new(size_t max, mdsl_sltab **out);
void mdsl_sltab_free(mdsl_sltab *t); /* NULL-able */

/* true and *out if cached. */
bool mdsl_sltab_get(const mdsl_sltab *t, xt_slice_id id, struct mdsl_slstate *out);
/* Insert or replace. On -ENOMEM the slice is left uncached (never stale). */
int mdsl_sltab_put(mdsl_sltab *t, xt_slice_id id, const struct mdsl_slstate *st);
void mdsl_sltab_del(mdsl_sltab *t, xt_slice_id id);
void mdsl_sltab_clear(mdsl_sltab *t);

#endif /* MDSL_SLTAB_H */
