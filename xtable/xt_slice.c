/*
 * xt_slice.c -- one table slice: rows keyed by name, an in-slice hash index,
 * ordered listing, the change list behind commit-group deltas, and splits.
 * Images and deltas are encoded and decoded in xt_slice_codec.c.
 *
 * The layout, the invariants (1)..(4) cited below and the locking rules are
 * in xt_slice_i.h, with struct xt_slice.
 */
#include "xt_slice_i.h"

#include "xt_common.h"
#include "xt_hash.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define GROUP_MAX      (XT_COOKIE_SEQ_MAX + 1u)
#define TOMB_SHRINK_MIN 256u              /* row bytes freed at delete time */

/* ---- small helpers -------------------------------------------------- */

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

void xt_slice_chg_forget(xt_slice *s, const struct xt_ent *e)
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

/* Stamp e with gen and note it changed. */
static void stamp(xt_slice *s, struct xt_ent *e, uint64_t gen)
{
    e->gen = gen;
    chg_note(s, e);
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
uint32_t xt_slice_sys_count(const xt_slice *s) { return s->nsys; }
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
uint32_t xt_slice_find_slot(const xt_slice *s, const void *name, size_t len, uint64_t h,
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
int xt_slice_reserve(xt_slice *s, uint32_t want)
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

/* (55-bit order prefix, system rows last, full order, name): a system row
 * (a transaction's pending row) carries the hash of the name it concerns,
 * so it shares that name's prefix group; ranking it after every ordinary
 * row of the group keeps their seq, hence their cookies, unchanged when it
 * comes and goes (invariant 4 of xt_slice.h). */
static int key_cmp(uint64_t ha, const uint8_t *na, size_t la, const struct xt_ent *b)
{
    uint64_t oa = xt_hash_order(ha), ob = xt_hash_order(b->hash);
    if (oa >> 9 != ob >> 9)
        return oa < ob ? -1 : 1;
    bool sa = xt_hash_is_sys(na, la), sb = ent_sys(b);
    if (sa != sb)
        return sa ? 1 : -1;
    if (oa != ob)
        return oa < ob ? -1 : 1;
    int c = memcmp(na, ent_name(b), XT_MIN(la, (size_t)b->name_len));
    if (c)
        return c;
    return la < b->name_len ? -1 : la > b->name_len;
}

/* The low 9 order bits (below the cookie prefix) are masked: at depth > 23
 * they would reach the key and order rows of one prefix group by hash
 * before key_cmp could put the system rows last. */
static inline uint32_t sort_key(const xt_slice *s, uint64_t h)
{
    return (uint32_t)(((xt_hash_order(h) & ~UINT64_C(0x1ff)) << s->depth) >> 32);
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
void xt_slice_remove_at(xt_slice *s, uint32_t i)
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
    uint32_t i = xt_slice_find_slot(s, name, name_len, hash, &group);
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
        s->nsys += ent_sys(e);
        sorted_add(s, pos);
        return 0;
    }
    rc = xt_slice_reserve(s, s->nents + 1);
    if (rc < 0) {
        xt_free(e);
        return rc;
    }
    s->ents[s->nents] = e;
    slot_place(s, hash, s->nents);
    s->nents++;
    s->nlive++;
    s->nsys += ent_sys(e);
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
    uint32_t i = xt_slice_find_slot(s, name, name_len, hash, NULL);
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
    uint32_t i = xt_slice_find_slot(s, name, name_len, hash, NULL);
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
    s->nsys -= ent_sys(e);
    s->ndead++;
    changed(s, gen);
    return 0;
}

int xt_slice_lookup(const xt_slice *s, const void *name, size_t name_len, uint64_t hash,
                    const void **row, size_t *row_len)
{
    if (name_len == 0 || name_len > XT_NAME_MAX)
        return -EINVAL;
    uint32_t i = xt_slice_find_slot(s, name, name_len, hash, NULL);
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
    xt_slice_remove_at(s, slot_of_pos(s, e->hash, pos));
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
        /* Downwards: xt_slice_remove_at moves the last entry (already
         * visited) into p. Then the change list is rebuilt from what is left. */
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
    if (moved && xt_slice_reserve(c, moved) < 0) {
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
            c->nsys += ent_sys(e);
            c->ent_bytes += ent_size(e);
            s->nlive--;
            s->nsys -= ent_sys(e);
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
