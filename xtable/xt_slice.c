/*
 * xt_slice.c -- one table slice: rows keyed by name, an in-slice hash index,
 * ordered listing, commit-group deltas, images and splits.
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
 *      a group costs one probe walk (invariant 4 of the header).
 *  (3) sorted_valid implies nsorted == nlive and sorted[] lists exactly the
 *      positions of the live rows in (xt_hash_order, name) order; every
 *      change that adds, removes or moves a live row updates it or clears
 *      sorted_valid. (order, name) is unique per entry since order is a
 *      bijection of the hash.
 *  (4) Unless chg_all, chg holds every entry whose gen is greater than the
 *      upto_gen of the last xt_slice_drop_tombstones (and maybe some older),
 *      each once, exactly the entries flagged ENT_CHG; a replaced or
 *      reallocated entry takes its place there, a freed one leaves.
 *
 * Locking: slice functions take no lock; the caller holds s->lock (see
 * xt_slice.h). sorted, nsorted, sorted_cap, sorted_valid and list_mods are
 * written under the write lock, or under the read lock plus s->sort_mu (the
 * lazy sort of xt_slice_list); everything else only under the write lock.
 */
#include "xt_slice.h"

#include "xt_common.h"
#include "xt_hash.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define ENT_DEAD       0x1u
#define ENT_CHG        0x2u               /* in chg[] (invariant 4) */
#define SLOT_POS_MAX   0xFFFFFEu          /* pos + 1 must fit 24 bits */
#define SLOTS_MIN      16u
#define GROUP_MAX      (XT_COOKIE_SEQ_MAX + 1u)
#define TOMB_SHRINK_MIN 256u              /* row bytes freed at delete time */

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

static bool name_eq(const struct xt_ent *e, const void *name, size_t len, uint64_t h)
{
    return e->hash == h && e->name_len == len && memcmp(ent_name(e), name, len) == 0;
}

/* ---- the change list (invariant 4) ---------------------------------- */

static void chg_note(xt_slice *s, struct xt_ent *e)
{
    if (s->chg_all || (e->flags & ENT_CHG))
        return;
    if (s->nchg == s->chg_cap) {
        uint32_t cap = s->chg_cap ? s->chg_cap * 2 : 16;
        struct xt_ent **v = xt_realloc(s->chg, cap * sizeof *v);
        if (!v) {
            s->chg_all = true; /* correct, only slower until rebuilt */
            return;
        }
        s->chg = v;
        s->chg_cap = cap;
    }
    s->chg[s->nchg++] = e;
    e->flags |= ENT_CHG;
}

/* The entry at address `old` (maybe freed already: only the address is
 * compared) became `e`. Searched from the end: a row changed again is
 * usually a recent one. */
static void chg_swap(xt_slice *s, uintptr_t old, struct xt_ent *e)
{
    if (s->chg_all)
        return;
    for (uint32_t k = s->nchg; k-- > 0;)
        if ((uintptr_t)s->chg[k] == old) {
            s->chg[k] = e;
            e->flags |= ENT_CHG;
            return;
        }
    s->chg_all = true; /* not found: cannot happen (invariant 4); stay correct */
}

static void chg_forget(xt_slice *s, const struct xt_ent *e)
{
    if (s->chg_all || !(e->flags & ENT_CHG))
        return;
    for (uint32_t k = s->nchg; k-- > 0;)
        if (s->chg[k] == e) {
            s->chg[k] = s->chg[--s->nchg];
            return;
        }
    s->chg_all = true;
}

/* The list is no longer trusted (invariant 4): freed until rebuilt. */
static void chg_distrust(xt_slice *s)
{
    s->chg_all = true;
    xt_free(s->chg);
    s->chg = NULL;
    s->nchg = s->chg_cap = 0;
}

/* Stamp e with gen and note it changed. */
static void stamp(xt_slice *s, struct xt_ent *e, uint64_t gen)
{
    e->gen = gen;
    chg_note(s, e);
}

static void changed(xt_slice *s, uint64_t gen)
{
    s->mods++;
    if (gen > s->last_gen)
        s->last_gen = gen;
}

/* ---- lifetime, locking, properties ------------------------------------- */

xt_slice *xt_slice_new(uint32_t index, unsigned depth, uint32_t capacity)
{
    if (capacity == 0)
        capacity = XT_SLICE_DEFAULT_CAPACITY;
    if (depth > XT_SLICE_MAX_DEPTH || capacity > XT_SLICE_MAX_CAPACITY ||
        (depth < 32 && index >= (UINT32_C(1) << depth)))
        return NULL;
    xt_slice *s = xt_calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    /* Writer preference: a stream of lookups must not starve creates. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&s->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0) {
        xt_free(s);
        return NULL;
    }
    if (pthread_mutex_init(&s->sort_mu, NULL) != 0) {
        pthread_rwlock_destroy(&s->lock);
        xt_free(s);
        return NULL;
    }
    s->index = index;
    s->depth = depth;
    s->capacity = capacity;
    s->needs_image = true;
    return s;
}

void xt_slice_free(xt_slice *s)
{
    if (!s)
        return;
    for (uint32_t i = 0; i < s->nents; i++)
        xt_free(s->ents[i]);
    xt_free(s->ents);
    xt_free(s->slots);
    xt_free(s->sorted);
    xt_free(s->chg);
    pthread_mutex_destroy(&s->sort_mu);
    pthread_rwlock_destroy(&s->lock);
    xt_free(s);
}

void xt_slice_rdlock(xt_slice *s) { pthread_rwlock_rdlock(&s->lock); }
void xt_slice_wrlock(xt_slice *s) { pthread_rwlock_wrlock(&s->lock); }
void xt_slice_unlock(xt_slice *s) { pthread_rwlock_unlock(&s->lock); }

uint32_t xt_slice_index(const xt_slice *s) { return s->index; }
unsigned xt_slice_depth(const xt_slice *s) { return s->depth; }
uint32_t xt_slice_capacity(const xt_slice *s) { return s->capacity; }
uint32_t xt_slice_count(const xt_slice *s) { return s->nlive; }
uint32_t xt_slice_tombstones(const xt_slice *s) { return s->ndead; }
uint64_t xt_slice_mod_count(const xt_slice *s) { return s->mods; }
uint64_t xt_slice_last_gen(const xt_slice *s) { return s->last_gen; }
bool xt_slice_needs_image(const xt_slice *s) { return s->needs_image; }
void xt_slice_clear_needs_image(xt_slice *s) { s->needs_image = false; }

bool xt_slice_owns(const xt_slice *s, uint64_t h)
{
    if (s->depth == 0)
        return true;
    uint32_t mask = s->depth >= 32 ? UINT32_MAX : (UINT32_C(1) << s->depth) - 1;
    return (xt_hash_vh(h) & mask) == s->index;
}

size_t xt_slice_mem_bytes(const xt_slice *s)
{
    /* 16 bytes of allocator overhead per entry is glibc's typical cost. */
    return sizeof(*s) + s->ent_bytes + (size_t)s->nents * 16 +
           (size_t)s->ents_cap * sizeof(*s->ents) + (size_t)s->nslots * 4 +
           (size_t)s->sorted_cap * sizeof(*s->sorted);
}

/* ---- the index ---------------------------------------------------------- */

/* Probe for (name, hash). Returns the slot holding it, or UINT32_MAX when
 * absent. When `group` is given, the whole probe run is walked and *group
 * receives the number of live rows sharing h's cookie prefix (the row itself
 * included when live). */
static uint32_t find_slot(const xt_slice *s, const void *name, size_t len, uint64_t h,
                          unsigned *group)
{
    uint32_t found = UINT32_MAX;
    unsigned g = 0;
    if (s->nslots) {
        uint32_t mask = s->nslots - 1, tag = slot_tag(h);
        for (uint32_t i = home_of(s->slot_bits, h);; i = (i + 1) & mask) {
            uint32_t v = s->slots[i];
            if (v == 0)
                break;
            if ((v >> 24) != tag)
                continue;
            const struct xt_ent *e = s->ents[slot_pos(v)];
            if (group && ent_live(e) && (e->hash >> 9) == (h >> 9))
                g++;
            if (found == UINT32_MAX && name_eq(e, name, len, h)) {
                found = i;
                if (!group)
                    break;
            }
        }
    }
    if (group)
        *group = g;
    return found;
}

/* The slot that refers to position pos (whose entry has hash h). */
static uint32_t slot_of_pos(const xt_slice *s, uint64_t h, uint32_t pos)
{
    uint32_t mask = s->nslots - 1;
    for (uint32_t i = home_of(s->slot_bits, h);; i = (i + 1) & mask) {
        assert(s->slots[i] != 0);
        if (slot_pos(s->slots[i]) == pos)
            return i;
    }
}

static void slot_place(xt_slice *s, uint64_t h, uint32_t pos)
{
    uint32_t mask = s->nslots - 1, i = home_of(s->slot_bits, h);
    while (s->slots[i] != 0)
        i = (i + 1) & mask;
    s->slots[i] = slot_make(h, pos);
}

static void rebuild_slots(xt_slice *s)
{
    memset(s->slots, 0, (size_t)s->nslots * sizeof(*s->slots));
    for (uint32_t p = 0; p < s->nents; p++)
        slot_place(s, s->ents[p]->hash, p);
}

/* Make room for `want` entries: ents capacity and an index at load <= 3/4.
 * On -ENOMEM nothing changed. */
static int reserve(xt_slice *s, uint32_t want)
{
    if (want > SLOT_POS_MAX)
        return -ENOSPC;
    if (want > s->ents_cap) {
        uint64_t cap = s->ents_cap ? (uint64_t)s->ents_cap * 2 : 16;
        if (cap < want)
            cap = want;
        if (cap > s->capacity && want <= s->capacity)
            cap = s->capacity; /* a full slice splits rather than grows */
        if (cap > SLOT_POS_MAX)
            cap = SLOT_POS_MAX;
        struct xt_ent **ne = xt_realloc(s->ents, (size_t)cap * sizeof(*ne));
        if (!ne)
            return -ENOMEM;
        s->ents = ne;
        s->ents_cap = (uint32_t)cap;
    }
    uint64_t n = s->nslots ? s->nslots : SLOTS_MIN;
    unsigned bits = s->nslots ? s->slot_bits : 4;
    while ((uint64_t)want * 4 > n * 3) {
        n *= 2;
        bits++;
    }
    if (n != s->nslots) {
        uint32_t *ns = xt_calloc((size_t)n, sizeof(*ns));
        if (!ns)
            return -ENOMEM;
        xt_free(s->slots);
        s->slots = ns;
        s->nslots = (uint32_t)n;
        s->slot_bits = bits;
        rebuild_slots(s);
    }
    return 0;
}

/* ---- the listing order (invariant 3) ------------------------------------ */

static int key_cmp(uint64_t ha, const uint8_t *na, size_t la, const struct xt_ent *b)
{
    uint64_t oa = xt_hash_order(ha), ob = xt_hash_order(b->hash);
    if (oa != ob)
        return oa < ob ? -1 : 1;
    int c = memcmp(na, ent_name(b), XT_MIN(la, (size_t)b->name_len));
    if (c)
        return c;
    return la < b->name_len ? -1 : la > b->name_len;
}

static inline uint32_t sort_key(const xt_slice *s, uint64_t h)
{
    return (uint32_t)((xt_hash_order(h) << s->depth) >> 32);
}

/* Total order of sorted[] elements a and b (invariant 3). */
static int sorted_cmp(const xt_slice *s, const struct sorted_ent *a, const struct sorted_ent *b)
{
    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    const struct xt_ent *x = s->ents[a->pos];
    return key_cmp(x->hash, ent_name(x), x->name_len, s->ents[b->pos]);
}

/* First k in sorted[] whose element is not below `want`. */
static uint32_t sorted_lower(const xt_slice *s, const struct sorted_ent *want)
{
    uint32_t lo = 0, hi = s->nsorted;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (sorted_cmp(s, want, &s->sorted[mid]) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void sorted_drop(xt_slice *s)
{
    s->sorted_valid = false;
    xt_free(s->sorted);
    s->sorted = NULL;
    s->nsorted = s->sorted_cap = 0;
}

/* Count a change against the listing; false when sorted[] is not kept. */
static bool sorted_keep(xt_slice *s)
{
    if (!s->sorted_valid)
        return false;
    /* Keeping costs a memmove of ~nsorted/2 elements per change; a re-sort
     * costs ~n log n comparisons (10x dearer each): keep for ~64 log n. */
    if (++s->list_mods > 64u * (32u - (unsigned)__builtin_clz(s->nlive | 1u)))
        sorted_drop(s);
    return s->sorted_valid;
}

/* The entry at ents[pos] became live. */
static void sorted_add(xt_slice *s, uint32_t pos)
{
    if (!sorted_keep(s))
        return;
    if (s->nsorted == s->sorted_cap) {
        uint32_t cap = s->sorted_cap + s->sorted_cap / 4 + 16;
        struct sorted_ent *n = xt_realloc(s->sorted, (size_t)cap * sizeof(*n));
        if (!n) { /* no error: the next listing sorts again */
            sorted_drop(s);
            return;
        }
        s->sorted = n;
        s->sorted_cap = cap;
    }
    struct sorted_ent want = {sort_key(s, s->ents[pos]->hash), pos};
    uint32_t k = sorted_lower(s, &want);
    memmove(s->sorted + k + 1, s->sorted + k, (size_t)(s->nsorted - k) * sizeof(*s->sorted));
    s->sorted[k] = want;
    s->nsorted++;
}

/* The live entry at ents[pos] is leaving the listing. */
static void sorted_del(xt_slice *s, uint32_t pos)
{
    if (!sorted_keep(s))
        return;
    struct sorted_ent want = {sort_key(s, s->ents[pos]->hash), pos};
    uint32_t k = sorted_lower(s, &want);
    assert(k < s->nsorted && s->sorted[k].pos == pos);
    memmove(s->sorted + k, s->sorted + k + 1,
            (size_t)(s->nsorted - k - 1) * sizeof(*s->sorted));
    s->nsorted--;
}

/* Remove the entry at slot i from the index and ents (the entry itself is
 * not freed). Backward-shift deletion, then the last entry moves into the
 * freed position. */
static void remove_at(xt_slice *s, uint32_t i)
{
    uint32_t mask = s->nslots - 1, pos = slot_pos(s->slots[i]);
    for (uint32_t k = (i + 1) & mask; s->slots[k] != 0; k = (k + 1) & mask) {
        uint32_t home = home_of(s->slot_bits, s->ents[slot_pos(s->slots[k])]->hash);
        /* k's entry may fill the hole i unless its home lies in (i, k]. */
        if (((k - home) & mask) >= ((k - i) & mask)) {
            s->slots[i] = s->slots[k];
            i = k;
        }
    }
    s->slots[i] = 0;
    if (ent_live(s->ents[pos]))
        sorted_del(s, pos);
    uint32_t last = s->nents - 1;
    if (pos != last) {
        struct xt_ent *m = s->ents[last];
        uint32_t j = slot_of_pos(s, m->hash, last);
        s->slots[j] = slot_make(m->hash, pos);
        if (s->sorted_valid && ent_live(m)) {
            struct sorted_ent want = {sort_key(s, m->hash), last};
            s->sorted[sorted_lower(s, &want)].pos = pos;
        }
        s->ents[pos] = m;
    }
    s->nents--;
}

static struct xt_ent *ent_new(const void *name, size_t len, uint64_t h, const void *row,
                              size_t row_len, uint64_t gen)
{
    struct xt_ent *e = xt_malloc(ENT_HDR + len + row_len);
    if (!e)
        return NULL;
    e->hash = h;
    e->gen = gen;
    e->row_len = (uint32_t)row_len;
    e->name_len = (uint8_t)len;
    e->flags = 0;
    memcpy(e->bytes, name, len);
    if (row_len)
        memcpy(e->bytes + len, row, row_len);
    return e;
}

/* ---- rows ----------------------------------------------------------------- */

static int check_key(const xt_slice *s, size_t len, uint64_t h)
{
    if (len == 0 || len > XT_NAME_MAX || !xt_slice_owns(s, h))
        return -EINVAL;
    return 0;
}

int xt_slice_insert(xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                    const void *row, size_t row_len, unsigned flags, uint64_t gen)
{
    int rc = check_key(s, name_len, hash);
    if (rc < 0 || row_len > UINT32_MAX - ENT_HDR - XT_NAME_MAX)
        return rc < 0 ? rc : -EINVAL;
    assert(row || row_len == 0);
    unsigned group;
    uint32_t i = find_slot(s, name, name_len, hash, &group);
    struct xt_ent *old = i == UINT32_MAX ? NULL : s->ents[slot_pos(s->slots[i])];

    if (old && ent_live(old) && (flags & XT_SLICE_EXCL))
        return -EEXIST;
    if (!old || !ent_live(old)) {
        if (s->nlive >= s->capacity)
            return -ENOSPC;
        if (group >= GROUP_MAX)
            return -EOVERFLOW;
    }
    struct xt_ent *e = ent_new(name, name_len, hash, row, row_len, gen);
    if (!e)
        return -ENOMEM;
    if (old) {
        /* Same position: sorted[] is unchanged unless a tombstone revives. */
        uint32_t pos = slot_pos(s->slots[i]);
        s->ents[pos] = e;
        s->ent_bytes += ent_size(e) - ent_size(old);
        bool was_live = ent_live(old);
        if (old->flags & ENT_CHG)
            chg_swap(s, (uintptr_t)old, e);
        else
            chg_note(s, e);
        xt_free(old);
        changed(s, gen);
        if (was_live)
            return 1;
        s->ndead--;
        s->nlive++;
        sorted_add(s, pos);
        return 0;
    }
    rc = reserve(s, s->nents + 1);
    if (rc < 0) {
        xt_free(e);
        return rc;
    }
    s->ents[s->nents] = e;
    slot_place(s, hash, s->nents);
    s->nents++;
    s->nlive++;
    s->ent_bytes += ent_size(e);
    sorted_add(s, s->nents - 1);
    chg_note(s, e);
    changed(s, gen);
    return 0;
}

int xt_slice_update(xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                    const void *row, size_t row_len, uint64_t gen)
{
    int rc = check_key(s, name_len, hash);
    if (rc < 0)
        return rc;
    uint32_t i = find_slot(s, name, name_len, hash, NULL);
    if (i == UINT32_MAX || !ent_live(s->ents[slot_pos(s->slots[i])]))
        return -ENOENT;
    rc = xt_slice_insert(s, name, name_len, hash, row, row_len, 0, gen);
    return rc < 0 ? rc : 0;
}

int xt_slice_delete(xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                    uint64_t gen)
{
    int rc = check_key(s, name_len, hash);
    if (rc < 0)
        return rc;
    uint32_t i = find_slot(s, name, name_len, hash, NULL);
    if (i == UINT32_MAX)
        return -ENOENT;
    uint32_t pos = slot_pos(s->slots[i]);
    struct xt_ent *e = s->ents[pos];
    if (!ent_live(e))
        return -ENOENT;
    sorted_del(s, pos);
    /* The tombstone keeps the name for the delta. Large rows (inline file
     * data) are given back now; small ones stay until the tombstone is
     * dropped at the next commit, because the shrinking realloc doubled the
     * cost of a delete (bench_slice). When the shrink fails the tombstone
     * just keeps the larger block. */
    uintptr_t was = (uintptr_t)e;
    struct xt_ent *t = e->row_len >= TOMB_SHRINK_MIN
                           ? xt_realloc(e, ENT_HDR + e->name_len) : NULL;
    if (t) {
        if ((uintptr_t)t != was && (t->flags & ENT_CHG))
            chg_swap(s, was, t);
        s->ent_bytes -= t->row_len;
        t->row_len = 0;
        e = t;
        s->ents[pos] = e;
    }
    e->flags |= ENT_DEAD;
    stamp(s, e, gen);
    s->nlive--;
    s->ndead++;
    changed(s, gen);
    return 0;
}

int xt_slice_lookup(const xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                    const void **row, size_t *row_len)
{
    if (name_len == 0 || name_len > XT_NAME_MAX)
        return -EINVAL;
    uint32_t i = find_slot(s, name, name_len, hash, NULL);
    if (i == UINT32_MAX)
        return -ENOENT;
    const struct xt_ent *e = s->ents[slot_pos(s->slots[i])];
    if (!ent_live(e))
        return -ENOENT;
    *row = ent_row(e);
    *row_len = e->row_len;
    return 0;
}

int xt_slice_get(const xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                 void *buf, size_t buf_size, size_t *row_len)
{
    const void *row;
    int rc = xt_slice_lookup(s, name, name_len, hash, &row, row_len);
    if (rc < 0)
        return rc;
    if (buf_size < *row_len)
        return -ERANGE;
    if (*row_len)
        memcpy(buf, row, *row_len);
    return 0;
}

/* ---- iteration -------------------------------------------------------- */

static void fill_entry(xt_slice_entry *o, const struct xt_ent *e)
{
    o->name = ent_name(e);
    o->name_len = e->name_len;
    o->hash = e->hash;
    o->deleted = !ent_live(e);
    o->row = o->deleted ? NULL : ent_row(e);
    o->row_len = o->deleted ? 0 : e->row_len;
    o->gen = e->gen;
    o->cookie = 0;
}

static int cmp_listing(const void *a, const void *b, void *arg)
{
    return sorted_cmp(arg, a, b);
}

/* Build sorted[] if a change invalidated it. REQUIRES: read or write lock. */
static int ensure_sorted(xt_slice *s)
{
    int rc = 0;
    pthread_mutex_lock(&s->sort_mu);
    if (!s->sorted_valid) {
        if (s->sorted_cap < s->nlive) {
            struct sorted_ent *n = xt_realloc(s->sorted, (size_t)s->nlive * sizeof(*n));
            if (!n) {
                rc = -ENOMEM;
                goto out;
            }
            s->sorted = n;
            s->sorted_cap = s->nlive;
        }
        uint32_t k = 0;
        for (uint32_t p = 0; p < s->nents; p++)
            if (ent_live(s->ents[p]))
                s->sorted[k++] = (struct sorted_ent){sort_key(s, s->ents[p]->hash), p};
        assert(k == s->nlive);
        if (k > 1)
            qsort_r(s->sorted, k, sizeof(*s->sorted), cmp_listing, s);
        s->nsorted = k;
        s->sorted_valid = true;
    }
    assert(s->nsorted == s->nlive);
    s->list_mods = 0;
out:
    pthread_mutex_unlock(&s->sort_mu);
    return rc;
}

static inline uint64_t prefix_at(const xt_slice *s, uint32_t k)
{
    return xt_hash_order(s->ents[s->sorted[k].pos]->hash) >> 9;
}

int xt_slice_list(xt_slice *s, uint64_t cookie_from, size_t max_entries,
                  xt_slice_cb cb, void *arg, uint64_t *next_cookie)
{
    *next_cookie = XT_COOKIE_END;
    if (cookie_from >= XT_COOKIE_END)
        return 0;
    int rc = ensure_sorted(s);
    if (rc < 0)
        return rc;
    uint64_t want = cookie_from >> XT_COOKIE_SEQ_BITS;
    unsigned seq = 0;
    uint32_t lo = 0, hi = s->nsorted;
    while (lo < hi) { /* first row with prefix >= want */
        uint32_t mid = lo + (hi - lo) / 2;
        if (prefix_at(s, mid) < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint32_t k = lo;
    uint64_t cur = want;
    while (k < s->nsorted && seq < (cookie_from & XT_COOKIE_SEQ_MAX) && prefix_at(s, k) == want) {
        k++;
        seq++;
    }
    int done = 0;
    for (; k < s->nsorted; k++, seq++) {
        uint64_t p = prefix_at(s, k);
        if (p != cur) {
            cur = p;
            seq = 0;
        }
        uint64_t cookie = (cur << XT_COOKIE_SEQ_BITS) | seq;
        if ((size_t)done >= max_entries) {
            *next_cookie = cookie;
            return done;
        }
        xt_slice_entry e;
        fill_entry(&e, s->ents[s->sorted[k].pos]);
        e.cookie = cookie;
        rc = cb(arg, &e);
        if (rc < 0)
            return rc;
        if (rc > 0) {
            *next_cookie = cookie;
            return done;
        }
        done++;
    }
    return done;
}

/* The entries a scan for changes must look at (invariant 4). */
static struct xt_ent *const *scan_set(const xt_slice *s, bool changes, uint32_t *n)
{
    if (changes && !s->chg_all) {
        *n = s->nchg;
        return s->chg;
    }
    *n = s->nents;
    return s->ents;
}

/* Visit entries: live rows only, or every change with gen > since. */
static int visit(const xt_slice *s, bool changes, uint64_t since, xt_slice_cb cb, void *arg)
{
    int n = 0;
    uint32_t m;
    struct xt_ent *const *v = scan_set(s, changes, &m);
    for (uint32_t p = 0; p < m; p++) {
        const struct xt_ent *e = v[p];
        if (changes ? e->gen <= since : !ent_live(e))
            continue;
        xt_slice_entry o;
        fill_entry(&o, e);
        int rc = cb(arg, &o);
        if (rc < 0)
            return rc;
        if (rc > 0)
            break;
        n++;
    }
    return n;
}

int xt_slice_foreach(const xt_slice *s, xt_slice_cb cb, void *arg)
{
    return visit(s, false, 0, cb, arg);
}

int xt_slice_collect_changes(const xt_slice *s, uint64_t since_gen, xt_slice_cb cb,
                             void *arg)
{
    return visit(s, true, since_gen, cb, arg);
}

/* Removes tombstone e (at position pos) for good. */
static void drop_dead(xt_slice *s, struct xt_ent *e, uint32_t pos)
{
    remove_at(s, slot_of_pos(s, e->hash, pos));
    s->ent_bytes -= ent_size(e);
    s->ndead--;
    xt_free(e);
}

/* Position of entry e in ents (it is there). */
static uint32_t pos_of(const xt_slice *s, const struct xt_ent *e)
{
    uint32_t mask = s->nslots - 1;
    for (uint32_t k = home_of(s->slot_bits, e->hash);; k = (k + 1) & mask)
        if (s->slots[k] && s->ents[slot_pos(s->slots[k])] == e)
            return slot_pos(s->slots[k]);
}

int xt_slice_drop_tombstones(xt_slice *s, uint64_t upto_gen)
{
    int n = 0;
    if (s->chg_all) {
        /* Downwards: remove_at moves the last entry (already visited) into
         * p. Then the change list is rebuilt from what is left. */
        for (uint32_t p = s->nents; p-- > 0;) {
            struct xt_ent *e = s->ents[p];
            if (!ent_live(e) && e->gen <= upto_gen) {
                drop_dead(s, e, p);
                n++;
            }
        }
        s->chg_all = false;
        s->nchg = 0;
        for (uint32_t p = 0; p < s->nents; p++) {
            s->ents[p]->flags &= (uint8_t)~ENT_CHG;
            if (s->ents[p]->gen > upto_gen)
                chg_note(s, s->ents[p]);
        }
        return n;
    }
    /* Every tombstone stamped <= upto_gen is in chg (invariant 4): older
     * ones were dropped by an earlier call. */
    uint32_t w = 0;
    for (uint32_t k = 0; k < s->nchg; k++) {
        struct xt_ent *e = s->chg[k];
        if (e->gen > upto_gen) {
            s->chg[w++] = e;
            continue;
        }
        e->flags &= (uint8_t)~ENT_CHG;
        if (!ent_live(e)) {
            drop_dead(s, e, pos_of(s, e));
            n++;
        }
    }
    s->nchg = w;
    return n;
}

/* ---- split ------------------------------------------------------------- */

int xt_slice_split(xt_slice *s, xt_slice **child)
{
    if (s->depth >= XT_SLICE_MAX_DEPTH)
        return -ERANGE;
    uint32_t bit = UINT32_C(1) << s->depth, moved = 0;
    for (uint32_t p = 0; p < s->nents; p++)
        if (ent_live(s->ents[p]) && (xt_hash_vh(s->ents[p]->hash) & bit))
            moved++;
    xt_slice *c = xt_slice_new(s->index + bit, s->depth + 1, s->capacity);
    if (!c)
        return -ENOMEM;
    if (moved && reserve(c, moved) < 0) {
        xt_slice_free(c);
        return -ENOMEM;
    }
    /* Nothing can fail from here on. */
    uint32_t w = 0;
    for (uint32_t p = 0; p < s->nents; p++) {
        struct xt_ent *e = s->ents[p];
        if (!(xt_hash_vh(e->hash) & bit)) {
            s->ents[w++] = e;
            continue;
        }
        s->ent_bytes -= ent_size(e);
        if (ent_live(e)) {
            c->ents[c->nents] = e;
            slot_place(c, e->hash, c->nents);
            c->nents++;
            c->nlive++;
            c->ent_bytes += ent_size(e);
            s->nlive--;
        } else {
            s->ndead--;
            xt_free(e);
        }
    }
    s->nents = w;
    s->depth++;
    if (s->nslots)
        rebuild_slots(s);
    sorted_drop(s);
    chg_distrust(s); /* entries moved: rebuilt at the next drop */
    chg_distrust(c);
    s->needs_image = true;
    s->mods++;
    c->last_gen = s->last_gen;
    c->mods = 1;
    *child = c;
    return 0;
}

/* ---- serialisation -------------------------------------------------------
 *
 * Image and delta share one layout (docs/format-slice.md), little-endian:
 *
 *   header, HDR_SIZE = 40 bytes
 *     0  u32 magic        IMAGE_MAGIC "XSLI" or DELTA_MAGIC "XSLD"
 *     4  u16 version      FORMAT_VERSION
 *     6  u8  depth        0..32
 *     7  u8  reserved     0
 *     8  u32 index        < 2^depth
 *    12  u32 count        records that follow
 *    16  u32 capacity     image: slice capacity; delta: 0
 *    20  u32 reserved     0
 *    24  u64 gen_a        image: last_gen; delta: since_gen
 *    32  u64 gen_b        image: 0;        delta: upto_gen (last_gen at encode)
 *   records, `count` of them, each REC_FIXED = 22 bytes + name + row
 *     0  u8  kind         REC_ROW (image: always) or REC_DELETE (delta only)
 *     1  u64 hash         owned by (index, depth)
 *     9  u64 gen
 *    17  u32 row_len      0 for REC_DELETE
 *    21  u8  name_len     1..255
 *    22  name[name_len], row[row_len]
 *   trailer
 *     0  u64 checksum     xt_hash_bytes(everything before it, SUM_SEED)
 */
#define IMAGE_MAGIC    0x494C5358u /* "XSLI" */
#define DELTA_MAGIC    0x444C5358u /* "XSLD" */
#define FORMAT_VERSION 1u
#define HDR_SIZE       40u
#define REC_FIXED      22u
#define TRAILER_SIZE   8u
#define SUM_SEED       UINT64_C(0x536c696365763031) /* "Slicev01" */
#define REC_ROW        1u
#define REC_DELETE     2u

static size_t rec_size(const struct xt_ent *e)
{
    return REC_FIXED + e->name_len + (ent_live(e) ? e->row_len : 0);
}

static uint8_t *put_rec(uint8_t *p, const struct xt_ent *e)
{
    uint32_t rl = ent_live(e) ? e->row_len : 0;
    p[0] = ent_live(e) ? REC_ROW : REC_DELETE;
    xt_put_u64(p + 1, e->hash);
    xt_put_u64(p + 9, e->gen);
    xt_put_u32(p + 17, rl);
    p[21] = e->name_len;
    memcpy(p + REC_FIXED, ent_name(e), e->name_len);
    if (rl)
        memcpy(p + REC_FIXED + e->name_len, ent_row(e), rl);
    return p + REC_FIXED + e->name_len + rl;
}

/* Encode the entries selected by (delta, since): image = live rows,
 * delta = every entry with gen > since. */
static int encode(const xt_slice *s, bool delta, uint64_t since, uint8_t **out,
                  size_t *out_len)
{
    size_t len = HDR_SIZE + TRAILER_SIZE;
    uint32_t count = 0, m;
    struct xt_ent *const *v = scan_set(s, delta, &m);
    for (uint32_t p = 0; p < m; p++) {
        const struct xt_ent *e = v[p];
        if (delta ? e->gen > since : ent_live(e)) {
            len += rec_size(e);
            count++;
        }
    }
#ifndef NDEBUG
    if (delta && !s->chg_all) { /* invariant (4): the list misses nothing */
        uint32_t full = 0;
        for (uint32_t p = 0; p < s->nents; p++)
            full += s->ents[p]->gen > since;
        assert(full == count);
    }
#endif
    uint8_t *buf = xt_malloc(len);
    if (!buf)
        return -ENOMEM;
    memset(buf, 0, HDR_SIZE);
    xt_put_u32(buf, delta ? DELTA_MAGIC : IMAGE_MAGIC);
    xt_put_u16(buf + 4, FORMAT_VERSION);
    buf[6] = (uint8_t)s->depth;
    xt_put_u32(buf + 8, s->index);
    xt_put_u32(buf + 12, count);
    xt_put_u32(buf + 16, delta ? 0 : s->capacity);
    xt_put_u64(buf + 24, delta ? since : s->last_gen);
    xt_put_u64(buf + 32, delta ? s->last_gen : 0);
    uint8_t *w = buf + HDR_SIZE;
    for (uint32_t p = 0; p < m; p++) {
        const struct xt_ent *e = v[p];
        if (delta ? e->gen > since : ent_live(e))
            w = put_rec(w, e);
    }
    assert((size_t)(w - buf) == len - TRAILER_SIZE);
    xt_put_u64(w, xt_hash_bytes(buf, len - TRAILER_SIZE, SUM_SEED));
    *out = buf;
    *out_len = len;
    return 0;
}

int xt_slice_encode(const xt_slice *s, uint8_t **out, size_t *out_len)
{
    return encode(s, false, 0, out, out_len);
}

int xt_slice_encode_delta(const xt_slice *s, uint64_t since_gen, uint8_t **out,
                          size_t *out_len)
{
    return encode(s, true, since_gen, out, out_len);
}

/* A parsed, validated header. */
struct hdr {
    uint32_t index, count, capacity;
    unsigned depth;
    uint64_t gen_a, gen_b;
};

struct rec {
    unsigned kind;
    uint64_t hash, gen;
    uint32_t row_len;
    size_t name_len;
    const uint8_t *name, *row;
};

/* Read the record at *off; -EBADMSG when it does not fit before `end`. */
static int get_rec(const uint8_t *b, size_t *off, size_t end, struct rec *r)
{
    if (end - *off < REC_FIXED)
        return -EBADMSG;
    const uint8_t *p = b + *off;
    r->kind = p[0];
    r->hash = xt_get_u64(p + 1);
    r->gen = xt_get_u64(p + 9);
    r->row_len = xt_get_u32(p + 17);
    r->name_len = p[21];
    if (r->name_len == 0 || end - *off - REC_FIXED < r->name_len + (size_t)r->row_len)
        return -EBADMSG;
    r->name = p + REC_FIXED;
    r->row = r->name + r->name_len;
    *off += REC_FIXED + r->name_len + r->row_len;
    return 0;
}

/* Check everything that can be checked without building the slice: header,
 * checksum, every record's bounds, kind and ownership, exact length. */
static int validate(const void *buf, size_t len, uint32_t magic, struct hdr *h)
{
    const uint8_t *b = buf;
    if (!buf || len < HDR_SIZE + TRAILER_SIZE)
        return -EBADMSG;
    if (xt_get_u32(b) != magic || xt_get_u16(b + 4) != FORMAT_VERSION || b[7] != 0 ||
        xt_get_u32(b + 20) != 0)
        return -EBADMSG;
    size_t end = len - TRAILER_SIZE;
    if (xt_get_u64(b + end) != xt_hash_bytes(b, end, SUM_SEED))
        return -EBADMSG;
    h->depth = b[6];
    h->index = xt_get_u32(b + 8);
    h->count = xt_get_u32(b + 12);
    h->capacity = xt_get_u32(b + 16);
    h->gen_a = xt_get_u64(b + 24);
    h->gen_b = xt_get_u64(b + 32);
    if (h->depth > XT_SLICE_MAX_DEPTH || (h->depth < 32 && h->index >> h->depth))
        return -EBADMSG;
    if (magic == IMAGE_MAGIC
            ? (h->capacity == 0 || h->capacity > XT_SLICE_MAX_CAPACITY ||
               h->count > h->capacity || h->gen_b != 0)
            : (h->capacity != 0 || h->count > SLOT_POS_MAX))
        return -EBADMSG;
    uint32_t mask = h->depth >= 32 ? UINT32_MAX : (UINT32_C(1) << h->depth) - 1;
    size_t off = HDR_SIZE;
    for (uint32_t i = 0; i < h->count; i++) {
        struct rec r;
        if (get_rec(b, &off, end, &r) < 0)
            return -EBADMSG;
        if ((xt_hash_vh(r.hash) & mask) != h->index)
            return -EBADMSG;
        if (magic == IMAGE_MAGIC ? (r.kind != REC_ROW || r.gen > h->gen_a)
                                 : (r.kind == REC_DELETE ? r.row_len != 0
                                                         : r.kind != REC_ROW))
            return -EBADMSG;
    }
    return off == end ? 0 : -EBADMSG;
}

int xt_slice_decode(const void *buf, size_t len, xt_slice **out)
{
    struct hdr h;
    int rc = validate(buf, len, IMAGE_MAGIC, &h);
    if (rc < 0)
        return rc;
    xt_slice *s = xt_slice_new(h.index, h.depth, h.capacity);
    if (!s)
        return -ENOMEM;
    if (h.count && (rc = reserve(s, h.count)) < 0)
        goto fail;
    size_t off = HDR_SIZE;
    for (uint32_t i = 0; i < h.count; i++) {
        struct rec r;
        get_rec(buf, &off, len - TRAILER_SIZE, &r); /* validated */
        rc = xt_slice_insert(s, r.name, r.name_len, r.hash, r.row, r.row_len,
                             XT_SLICE_EXCL, r.gen);
        if (rc < 0) {
            /* A duplicate or an oversized collision group: not our output. */
            if (rc != -ENOMEM)
                rc = -EBADMSG;
            goto fail;
        }
    }
    s->last_gen = h.gen_a;
    s->mods = 0;
    s->needs_image = false;
    chg_distrust(s); /* loaded, not changed: no list until the first drop */
    *out = s;
    return 0;
fail:
    xt_slice_free(s);
    return rc;
}

/* Remove the entry of (name, hash) outright, live or tombstone. */
static void purge(xt_slice *s, const void *name, size_t len, uint64_t h)
{
    uint32_t i = find_slot(s, name, len, h, NULL);
    if (i == UINT32_MAX)
        return;
    struct xt_ent *e = s->ents[slot_pos(s->slots[i])];
    remove_at(s, i);
    chg_forget(s, e);
    s->ent_bytes -= ent_size(e);
    if (ent_live(e))
        s->nlive--;
    else
        s->ndead--;
    xt_free(e);
}

int xt_slice_apply_delta(xt_slice *s, const void *buf, size_t len)
{
    struct hdr h;
    int rc = validate(buf, len, DELTA_MAGIC, &h);
    if (rc < 0)
        return rc;
    if (h.index != s->index || h.depth != s->depth)
        return -EINVAL;
    /* Deletes first so that upserts never overrun the capacity needlessly. */
    for (int pass = 0; pass < 2; pass++) {
        size_t off = HDR_SIZE;
        for (uint32_t i = 0; i < h.count; i++) {
            struct rec r;
            get_rec(buf, &off, len - TRAILER_SIZE, &r); /* validated */
            if (pass == 0 && r.kind == REC_DELETE) {
                purge(s, r.name, r.name_len, r.hash);
            } else if (pass == 1 && r.kind == REC_ROW) {
                rc = xt_slice_insert(s, r.name, r.name_len, r.hash, r.row, r.row_len, 0,
                                     r.gen);
                if (rc < 0)
                    return rc;
            }
        }
    }
    changed(s, h.gen_b);
    chg_distrust(s); /* loaded gens, not this process's commits */
    return 0;
}
