/*
 * xt_ring.h -- versioned consistent-hash rings: (table, slice) -> site.
 *
 * Ring 0 (XT_RING_MDS) maps slices to MDS sites, ring 1 (XT_RING_MDSL) to
 * MDSL sites; R2 builds both with this code and publishes them encoded.
 * Each site owns `vnodes` points on a 64-bit circle; a key belongs to the
 * site of the first point at or after it (wrapping). Vnodes per site are
 * vnodes_per_site * weight / XT_RING_WEIGHT_UNIT (at least 1).
 *
 * Placement. With points placed by a plain hash, a site's share has a
 * relative spread of about 1/sqrt(vnodes): 128 vnodes give 16 sites a
 * heaviest share ~18% over the ideal. So each vnode has XT_RING_CANDIDATES
 * candidate points, hash(ring id, site, vnode, candidate); when a site
 * joins, each of its vnodes takes the candidate that best moves the ring
 * toward every site holding its weighted ideal share (greedy on the sum of
 * squared excess shares), then a few refinement passes re-choose each of
 * the new site's vnodes given all the others. Measured: every site within
 * ~1% of its ideal share for 2..16 sites. A removal hands the removed arcs
 * to their successors, which costs up to ~12-16% on the heaviest site;
 * the next join takes preferentially from the heaviest sites and repairs
 * it. The chosen candidate numbers are part of the ring's state and of its
 * encoding, so any holder of the encoding computes the same points.
 *
 * Invariants:
 *  (1) Adding a site adds only its points; removing one removes only its
 *      points. Hence a join moves keys only TO the new site, a removal moves
 *      only the removed site's keys, and no other key ever changes owner.
 *  (2) Every change of membership bumps the version by one; rings compare
 *      by version (a holder replaces its ring only by a higher version).
 *  (3) Points are sorted by (position, site id, vnode): the owner of a key
 *      is a pure function of the encoding.
 *
 * Not thread-safe: R2 mutates a private copy and publishes it; readers hold
 * immutable rings (swap a pointer under the owner's lock).
 *
 * Wire format (little-endian; docs/format-ring.md):
 *
 *   off  size  field
 *   0    4     magic XT_RING_MAGIC ("XTRG")
 *   4    2     format version (1)
 *   6    2     flags (0)
 *   8    4     ring id (0 MDS, 1 MDSL, ...)
 *   12   4     vnodes_per_site (1 .. XT_RING_VNODES_MAX)
 *   16   8     version
 *   24   4     nsites (0 .. XT_RING_MAX_SITES)
 *   28   ...   per site, ids strictly ascending:
 *                u32 site id, u32 weight (1 .. XT_RING_WEIGHT_MAX),
 *                v bytes: the candidate (< XT_RING_CANDIDATES) chosen by
 *                each vnode 0..v-1, v = xt_ring_vnodes(vnodes_per_site, weight)
 *   end  8     checksum: xt_hash_bytes(all preceding bytes, XT_RING_CSUM_SEED)
 */
#ifndef XT_RING_H
#define XT_RING_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XT_RING_MDS  0
#define XT_RING_MDSL 1

#define XT_RING_VNODES_DEFAULT 128
#define XT_RING_VNODES_MAX     4096
#define XT_RING_WEIGHT_UNIT    100    /* weight of a standard site */
#define XT_RING_WEIGHT_MAX     10000  /* 100 x a standard site */
#define XT_RING_MAX_SITES      65536
#define XT_RING_MAX_POINTS     (UINT32_C(1) << 22)
#define XT_RING_CANDIDATES     32

#define XT_RING_MAGIC     UINT32_C(0x47525458) /* "XTRG" little-endian */
#define XT_RING_FORMAT_V1 1
#define XT_RING_HDR_SIZE  28
#define XT_RING_CSUM_SIZE 8
#define XT_RING_CSUM_SEED  UINT64_C(0x72696e67636b7331) /* "ringcks1" */
#define XT_RING_POINT_SEED UINT64_C(0x72696e67706f7331) /* "ringpos1" */
#define XT_RING_KEY_SEED   UINT64_C(0x72696e676b657931) /* "ringkey1" */

typedef struct xt_ring xt_ring;

/* An empty ring (version 0). vnodes_per_site 0 means the default; more than
 * XT_RING_VNODES_MAX is clamped. Caller frees with xt_ring_free. NULL on
 * ENOMEM. */
xt_ring *xt_ring_new(uint32_t ring_id, unsigned vnodes_per_site);
void xt_ring_free(xt_ring *r); /* NULL is a no-op */
/* A deep copy; caller frees. NULL on ENOMEM. */
xt_ring *xt_ring_dup(const xt_ring *r);

uint32_t xt_ring_id(const xt_ring *r);
uint64_t xt_ring_version(const xt_ring *r);
unsigned xt_ring_vnodes_per_site(const xt_ring *r);
/* Vnodes a site of this weight gets: vnodes_per_site * weight /
 * XT_RING_WEIGHT_UNIT rounded, at least 1. */
unsigned xt_ring_vnodes(unsigned vnodes_per_site, uint32_t weight);
uint32_t xt_ring_nsites(const xt_ring *r);
/* The k-th site by ascending id: 0, or -ENOENT when k >= nsites. */
int xt_ring_site_at(const xt_ring *r, uint32_t k, uint32_t *site, uint32_t *weight);
int xt_ring_has_site(const xt_ring *r, uint32_t site);

/* Adds a site and places its vnodes (see Placement). Bumps the version.
 * -EEXIST if present, -EINVAL for weight 0 or > XT_RING_WEIGHT_MAX,
 * -ENOSPC past XT_RING_MAX_SITES / XT_RING_MAX_POINTS, -ENOMEM; on error
 * the ring is unchanged. */
int xt_ring_add_site(xt_ring *r, uint32_t site, uint32_t weight);
/* Removes a site and its points. Bumps the version. -ENOENT if absent. */
int xt_ring_remove_site(xt_ring *r, uint32_t site);

/* The placement key of slice `slice` of table `table` in file system fsid. */
uint64_t xt_ring_key(uint32_t fsid, uint64_t table, uint32_t slice);
/* The site owning key: 0, or -ENOENT when the ring has no sites. */
int xt_ring_lookup(const xt_ring *r, uint64_t key, uint32_t *site);
/* The owner of key and the next distinct sites after it on the circle
 * (wrapping), at most n, into sites[]: a slice's replica set on ring 1
 * (docs/mdsl-replicas.md). Returns how many (min(n, nsites); 0 for an
 * empty ring). sites[0] is what xt_ring_lookup answers. */
uint32_t xt_ring_successors(const xt_ring *r, uint64_t key, uint32_t n, uint32_t *sites);
/* The replica set of a slice on ring 1: xt_ring_successors of its
 * xt_ring_key. The MDS writes to it (mds_ring1_replicas), an MDSL catches
 * up by it (mdsl_catchup.h): one function, so both agree. */
uint32_t xt_ring_replicas(const xt_ring *r, uint32_t fsid, uint64_t table, uint32_t slice,
                          uint32_t n, uint32_t *sites);
/* Tract t of blob set `set` of the `mdsl` backend (docs/format-blob.md
 * "mdsl"): its `copies` sites on ring 1, xt_ring_successors of
 * xt_hash_bytes(set as 8 bytes LE || t as 4 bytes LE, seed "POMTRACT").
 * The client places by it (client/pom_blob_mdsl.c) and an MDSL moves its
 * tracts by it after a ring-1 change (mdsl/mdsl_tmove.c): one function,
 * so both agree. The set's map is tract XT_TRACT_MAP. */
#define XT_TRACT_MAP        UINT32_MAX
#define XT_TRACT_COPIES_MAX 8
uint32_t xt_ring_tract_sites(const xt_ring *r, uint64_t set, uint32_t t, uint32_t copies,
                             uint32_t *sites);
/* The copies of an `mdsl` fs from its blob setting ("" or "copies=N"):
 * N, or min(3, the sites of r) for "". -EINVAL for another setting or N
 * outside 1..XT_TRACT_COPIES_MAX. */
int xt_ring_tract_copies(const xt_ring *r, const char *setting, uint32_t *copies);
/* 1 when key has a different owner in `to` than in `from` (a ring without
 * sites owns nothing), else 0: the slice must move on a ring change. */
int xt_ring_owner_changed(const xt_ring *from, const xt_ring *to, uint64_t key);

/* Exact fraction of the key space owned by site (0 when absent). */
double xt_ring_share(const xt_ring *r, uint32_t site);
/* Exact fraction of the key space whose owner differs between two rings. */
double xt_ring_moved_share(const xt_ring *from, const xt_ring *to);

/* Serialisation (format above). encode writes exactly xt_ring_encoded_size
 * bytes or returns -ENOSPC. decode returns a new ring in *out (caller frees;
 * NULL on error) or -EBADMSG for any malformed input, -ENOMEM; it never
 * reads outside [buf, buf+len), and an accepted ring encodes back to the
 * same bytes. */
size_t xt_ring_encoded_size(const xt_ring *r);
long xt_ring_encode(const xt_ring *r, void *buf, size_t cap);
int xt_ring_decode(const void *buf, size_t len, xt_ring **out);

#ifdef __cplusplus
}
#endif
#endif /* XT_RING_H */
