/*
 * xt_slice_i.h -- the internals of the slice module, shared by its two
 * halves: xt_slice.c (rows, the index, the listing order, the change list,
 * splits) and xt_slice_codec.c (image and delta records). Not installed and
 * included by those two files only; everyone else uses xt_slice.h. Here is
 * the struct, its layout and its invariants, which both halves keep.
 *
 * Layout (all heap memory from xt_malloc & co.):
 *
 *   ents[0..nents)   dense array of entry pointers, live rows and tombstones
 *                    in no order; a delete of position p moves the last
 *                    entry into p (swap-remove) so the array stays dense.
 *   slots[0..nslots) open-addressing index, linear probing, power-of-two
 *                    size, load <= 3/4. A slot is a u32: 0 = empty, else
 *                    (tag << 24) | (pos + 1) with pos an index into ents and
 *                    tag = bits 9..16 of the hash (part of the cookie prefix),
 *                    so most mismatching probes never touch the entry. Deletion shifts the following run back
 *                    (no index tombstones, probe runs stay short).
 *   sorted[0..nsorted) the live rows in listing order, as (key, pos) pairs:
 *                    key = 32 bits of xt_hash_order just below the slice's
 *                    own `depth` fixed bits, so a binary search rarely
 *                    touches an entry (ties compare in full). Built by
 *                    the first xt_slice_list (O(n log n)), then kept up to
 *                    date by every change (binary search + memmove of pairs)
 *                    as long as listings keep coming: after more than
 *                    64 * log2(nlive) changes without a listing it is dropped
 *                    and freed (sorted_valid = false) so a slice nobody lists
 *                    pays neither time nor memory, and the next listing
 *                    sorts again. A sorted array suits slices of up to some
 *                    10^4..10^5 rows (the default capacity is 8192); with a
 *                    million rows each maintained change moves megabytes.
 *
 * An entry is ONE allocation: a 22-byte header (hash, gen, row_len, name_len,
 * flags) followed by the name and then the row bytes.
 *
 *   chg[0..nchg)     the entries changed since the last xt_slice_drop_tombstones
 *                    (flag ENT_CHG), so that a commit's delta costs the changes,
 *                    not the slice: with names hashed over ~1,000 slices of a
 *                    big directory every slice is dirty at every commit, and
 *                    scanning them all made the create rate fall with the
 *                    directory's size (perf: encode + visit + drop_tombstones
 *                    were 66% of pom-mds at 5M entries). When the list cannot
 *                    be trusted (chg_all: a new image or delta was loaded, a
 *                    split, no memory to grow it) every scan is a full one
 *                    until the next drop_tombstones rebuilds it.
 *
 * Invariants (besides those of xt_slice.h):
 *  (1) nents == nlive + ndead <= SLOT_POS_MAX, and every ents[p] is referred
 *      to by exactly one slot, reachable from its home slot without crossing
 *      an empty slot.
 *  (2) The home slot is a function of h >> 9 only (the 55-bit cookie prefix),
 *      so every row of one collision group lies in one probe run: counting
 *      a group costs one probe walk (invariant 4 of xt_slice.h).
 *  (3) sorted_valid implies nsorted == nlive and sorted[] lists exactly the
 *      positions of the live rows in listing order (xt_slice.h invariant 4:
 *      55-bit order prefix, system rows last, xt_hash_order, name); every
 *      change that adds, removes or moves a live row updates it or clears
 *      sorted_valid. (order, name) is unique per entry since order is a
 *      bijection of the hash. The key holds no order bit below the prefix.
 *  (4) Unless chg_all, chg holds every entry whose gen is greater than the
 *      upto_gen of the last xt_slice_drop_tombstones (and maybe some older),
 *      each once, exactly the entries flagged ENT_CHG; a replaced or
 *      reallocated entry takes its place there, a freed one leaves.
 *  (5) nsys is the number of live entries whose name is a system row's
 *      (ent_sys): every change of nlive (insert, revive, delete, split,
 *      the codec's purge; decode and apply_delta go through insert) changes
 *      nsys by ent_sys of the same entry.
 *
 * Locking: slice functions take no lock; the caller holds s->lock (see
 * xt_slice.h). sorted, nsorted, sorted_cap, sorted_valid and list_mods are
 * written under the write lock, or under the read lock plus s->sort_mu (the
 * lazy sort of xt_slice_list); everything else only under the write lock.
 */
#ifndef XT_SLICE_I_H
#define XT_SLICE_I_H

#include "xt_slice.h"

#include "xt_common.h"
#include "xt_hash.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENT_DEAD       0x1u
#define ENT_CHG        0x2u               /* in chg[] (invariant 4) */
#define SLOT_POS_MAX   0xFFFFFEu          /* pos + 1 must fit 24 bits */
#define SLOTS_MIN      16u

struct xt_ent {
    uint64_t hash;
    uint64_t gen;      /* commit group of the last change */
    uint32_t row_len;  /* for a tombstone: bytes still allocated after name */
    uint8_t name_len;  /* 1..255 */
    uint8_t flags;     /* ENT_DEAD */
    uint8_t bytes[];   /* name[name_len] then row[row_len] */
};
#define ENT_HDR offsetof(struct xt_ent, bytes)
_Static_assert(offsetof(struct xt_ent, bytes) == 22, "entry header is 22 bytes");

struct sorted_ent {
    uint32_t key; /* order bits below the slice's fixed prefix */
    uint32_t pos; /* index into ents */
};

struct xt_slice {
    pthread_rwlock_t lock;       /* the caller's lock (xt_slice_rdlock/...) */
    pthread_mutex_t sort_mu;     /* lazy sort under the read lock */
    uint32_t index;
    unsigned depth;
    uint32_t capacity;
    uint32_t nlive, ndead, nents, ents_cap;
    uint32_t nsys;               /* live system rows, <= nlive (invariant 5) */
    struct xt_ent **ents;
    uint32_t *slots;
    uint32_t nslots;             /* 0 or a power of two >= SLOTS_MIN */
    unsigned slot_bits;          /* log2(nslots) */
    struct sorted_ent *sorted;   /* see Locking */
    uint32_t nsorted, sorted_cap;
    uint32_t list_mods;          /* changes since the last listing */
    bool sorted_valid;
    bool needs_image;
    struct xt_ent **chg;         /* invariant (4) */
    uint32_t nchg, chg_cap;
    bool chg_all;                /* chg not trusted: scan ents (invariant 4) */
    uint64_t mods;
    uint64_t last_gen;
    size_t ent_bytes;            /* sum of entry allocation sizes */
};

/* ---- small helpers -------------------------------------------------- */

static inline const uint8_t *ent_name(const struct xt_ent *e) { return e->bytes; }
static inline const uint8_t *ent_row(const struct xt_ent *e) { return e->bytes + e->name_len; }
static inline bool ent_live(const struct xt_ent *e) { return !(e->flags & ENT_DEAD); }
/* A system row's entry (name starts 00 FF, xt_hash.h): 1 or 0, to count. */
static inline uint32_t ent_sys(const struct xt_ent *e)
{
    return e->name_len >= 2 && e->bytes[0] == XT_SYS_B0 && e->bytes[1] == XT_SYS_B1;
}
static inline size_t ent_size(const struct xt_ent *e)
{
    return ENT_HDR + e->name_len + e->row_len;
}

static inline uint32_t slot_pos(uint32_t v) { return (v & 0xFFFFFFu) - 1; }
static inline uint32_t slot_tag(uint64_t h) { return (uint32_t)(h >> 9) & 0xFFu; }
static inline uint32_t slot_make(uint64_t h, uint32_t pos)
{
    return (slot_tag(h) << 24) | (pos + 1);
}

/* Home slot from the 55-bit cookie prefix (invariant 2), multiplicative hash:
 * the low V_h bits are equal in a slice, so they must be mixed, not used. */
static inline uint32_t home_of(unsigned bits, uint64_t h)
{
    return (uint32_t)(((h >> 9) * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - bits));
}

/* ---- shared by xt_slice.c and xt_slice_codec.c -------------------------
 *
 * Tiny ones are static inline here; the others are defined in xt_slice.c
 * (static there until the codec moved out) and carry the module prefix.
 * REQUIRES: s->lock held as Locking above says (the write lock for those
 * that change s). */

/* The list is no longer trusted (invariant 4): freed until rebuilt. */
static inline void chg_distrust(xt_slice *s)
{
    s->chg_all = true;
    xt_free(s->chg);
    s->chg = NULL;
    s->nchg = s->chg_cap = 0;
}

/* Count a change of s made in commit group gen. */
static inline void changed(xt_slice *s, uint64_t gen)
{
    s->mods++;
    if (gen > s->last_gen)
        s->last_gen = gen;
}

/* The entries a scan for changes must look at (invariant 4). */
static inline struct xt_ent *const *scan_set(const xt_slice *s, bool changes, uint32_t *n)
{
    if (changes && !s->chg_all) {
        *n = s->nchg;
        return s->chg;
    }
    *n = s->nents;
    return s->ents;
}

/* Drops e from the change list (it is about to be freed). */
void xt_slice_chg_forget(xt_slice *s, const struct xt_ent *e);

/* The slot holding (name, hash), or UINT32_MAX when absent; with `group`,
 * *group gets the number of live rows sharing h's cookie prefix. Needs only
 * the read lock. */
uint32_t xt_slice_find_slot(const xt_slice *s, const void *name, size_t len, uint64_t h,
                            unsigned *group);

/* Room for `want` entries (ents and an index at load <= 3/4); -ENOSPC past
 * SLOT_POS_MAX, -ENOMEM with nothing changed. */
int xt_slice_reserve(xt_slice *s, uint32_t want);

/* Removes the entry at slot i from the index, ents and sorted[]; the entry
 * itself stays allocated (the caller frees it, after xt_slice_chg_forget). */
void xt_slice_remove_at(xt_slice *s, uint32_t i);

#endif /* XT_SLICE_I_H */
