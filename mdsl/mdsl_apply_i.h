/*
 * mdsl_apply_i.h -- the index update rules of the store
 * (mdsl_apply.c): the index changes of a batch of asserted entries, the
 * live-byte deltas they charge to segments, and the per-slice state cache
 * (s->slices) that follows the index. Used by the writers of index
 * batches: mdsl_store.c (commits), mdsl_gc.c (moves), mdsl_recover.c
 * (replay).
 */
#ifndef MDSL_APPLY_I_H
#define MDSL_APPLY_I_H

#include "mdsl_handle_i.h"

/* Live-bytes charge of one pointer on its evidence (TSS) segment. */
#define MDSL_EVIDENCE_COST MDSL_ENTRY_SIZE

struct live_delta {
    struct folder *fo;
    bool is_cs;
    uint32_t group, segno;
    int64_t delta;
};
/* The slice state that a batch will leave once written (s->slices). */
struct slice_upd {
    xt_slice_id id;
    struct mdsl_slstate st;
};
struct apply_ctx {
    mdsl_store *s;
    struct folder *fo;
    mdsl_index_batch *b;
    struct live_delta *ld;  /* NULL-able growing array */
    size_t nld, capld;
    struct slice_upd *su;   /* NULL-able growing array */
    size_t nsu, capsu;
};
/* Add to ctx->b the index changes of asserting entries e[0..n) with the
 * given evidence segment (the update rules are in mdsl_apply.c).
 * REQUIRES: writer token held (or recovery); every slice appears in at most
 * one call per batch (a slice belongs to one folder, a folder is one part
 * of a transaction, one GCMOVE or one replayed record). */
int mdsl_apply_entries(struct apply_ctx *c, const struct mdsl_entry *e, size_t n,
                       uint32_t evidence);
/* The state of a slice as the index holds it: cached in s->slices, else one
 * scan of its pointers (then cached). REQUIRES: writer token held. */
int mdsl_apply_slice_state(mdsl_store *s, xt_slice_id id, struct mdsl_slstate *st);
/* Call once ctx->b was written: the slice states follow the index. A
 * context freed without it (a failed write) drops its slices' states. */
void mdsl_apply_done(struct apply_ctx *c);
/* Add the live-byte deltas to the segments. REQUIRES: mu held. */
void mdsl_apply_live(struct apply_ctx *c);
void mdsl_apply_ctx_free(struct apply_ctx *c);
/* Entries <-> payload. */
uint8_t *mdsl_entries_encode(const struct mdsl_entry *e, size_t n);
int mdsl_entries_decode(const uint8_t *payload, uint32_t len, struct mdsl_entry **e, size_t *n);

#endif /* MDSL_APPLY_I_H */
