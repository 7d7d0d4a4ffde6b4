/*
 * mdsl_tmove.h -- tracts follow ring 1 (docs/format-blob.md "mdsl",
 * "Ring-1 changes"): after a ring-1 change, an MDSL that loses keys (the
 * leaver of a drain; with a join every MDSL of the old ring) walks its
 * blob index and moves each tract its new copy set (under the new ring 1:
 * xt_ring_tract_sites, the client's formula) does not hold here: it puts
 * it to the sites of the new set that the old set (under the previous
 * ring) did not name, then drops its own copy. A tract the new set keeps
 * here is not read: the sites of the old set the new one drops put it
 * (each change adds or removes one site, so each moved tract has one such
 * site, and a dead MDSL stalls the change). Without the previous ring, or
 * for a tract the old set did not place here, it is put to every other
 * site of the new set. The set's map (tract XT_TRACT_MAP) moves the same
 * way.
 *
 * The ring-1 reporter (mdsl_ring1.c) runs a pass beside its slice count
 * and adds the tracts still owed to `misplaced`, so R2 ends the change
 * (DRAINED, `site remove`) only once every tract here is where the new
 * ring places it.
 *
 * Invariants:
 *  (1) A copy is dropped only after every other site of the tract's new
 *      set answered 0 to its put (durable there): some site of the new
 *      set holds each tract at every moment.
 *  (2) A pass that returns 0 with *owed 0 left no tract here that the new
 *      ring places elsewhere without a copy there; a failed put counts the
 *      tract as owed (the next pass tries again).
 *  (3) Moves are paced to `rate` bytes a second over a pass (0: unpaced).
 */
#ifndef MDSL_TMOVE_H
#define MDSL_TMOVE_H

#include "mdsl_blob.h"
#include "xt_ring.h"
#include "xt_rpc_r2.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* An MDSL of the new ring and its address. */
struct mdsl_tmove_site {
    uint32_t id;
    char addr[XT_ADDR_MAX];
};

/* An fs of the `mdsl` backend and its copies under the new ring. */
struct mdsl_tmove_fs {
    uint32_t fsid, copies;
};

/* What a pass moves against (all borrowed for the call). */
struct mdsl_tmove_target {
    const xt_ring *ring;                /* the new ring 1 */
    const xt_ring *prev;                /* the ring before it, or NULL */
    uint32_t self;
    const struct mdsl_tmove_site *sites;
    size_t nsites;
    const struct mdsl_tmove_fs *fs;
    size_t nfs;
    bool skip_kept;     /* a finished pass already copied the tracts this
                           site keeps: only those it loses are walked */
};

/* Counters since start (read by the stat reply and /metrics). */
struct mdsl_tmove_counters {
    _Atomic uint64_t tracts, bytes;     /* puts to peers that answered 0 */
    _Atomic uint64_t dropped;           /* copies dropped here (invariant (1)) */
    _Atomic uint64_t owed;              /* the last pass's owed tracts */
};

/* The fs of the `mdsl` backend in v with their copies under ring r, into
 * *out (xt_malloc'd, caller frees; *n). The MDSL sites of v that r holds,
 * into *sites likewise. 0 or -ENOMEM. */
int mdsl_tmove_of_view(const struct xt_view *v, const xt_ring *r, struct mdsl_tmove_fs **fs,
                       size_t *nfs, struct mdsl_tmove_site **sites, size_t *nsites);

/* One pass over blob store b (invariants above): *owed the tracts not yet
 * on their whole new set. 0, -ECANCELED when *cancel became true, or
 * -ENOMEM / the walk's error. */
int mdsl_tmove_pass(mdsl_blob *b, const struct mdsl_tmove_target *t, uint64_t rate,
                    unsigned call_timeout_ms, _Atomic bool *cancel,
                    struct mdsl_tmove_counters *c, uint64_t *owed);

#endif /* MDSL_TMOVE_H */
