/*
 * mds_table.c -- row operations over the slice cache and the commit groups
 * (see mds_table.h for the invariants and the meta slice).
 *
 * Every modification follows mds_group.h's writer protocol: find the slice
 * (bitmap under the meta slice's read lock), pin it, enter the group, take
 * the slice's write lock, recheck ownership (a split may have run), touch,
 * modify stamping the touched generation, unlock, leave. Atomic batches
 * (up to 16 rows at once) are in mds_table_atomic.c.
 */
#include "mds_table.h"
#include "mds_table_i.h"

#include <assert.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "xt_bitmap.h"
#include "xt_common.h"
#include "xt_hash.h"

static uint64_t meta_hash(void)
{
    return xt_hash_name(MDS_META_BITMAP, sizeof MDS_META_BITMAP - 1);
}

int mds_table_new(const struct mds_table_opts *o, mds_table **out)
{
    *out = NULL;
    if (!o || !o->cache || !o->group)
        return -EINVAL;
    mds_table *t = xt_calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->o = *o;
    if (!t->o.split_threshold)
        t->o.split_threshold = XT_SLICE_DEFAULT_CAPACITY;
    if (!t->o.split_bytes)
        t->o.split_bytes = MDS_SPLIT_BYTES;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return 0;
}

void mds_table_free(mds_table *t)
{
    if (!t)
        return;
    for (unsigned b = 0; b < MAP_BUCKETS; b++)
        while (t->bucket[b]) {
            struct mtab *m = t->bucket[b];
            t->bucket[b] = m->next;
            xt_bitmap_free(m->bm);
            xt_bitmap_free(m->said);
            mds_cache_put(t->o.cache, m->meta);
            xt_free(m);
        }
    pthread_mutex_destroy(&t->mu);
    xt_free(t);
}

int mds_table_meta_decode(const xt_slice *ms, xt_bitmap **bm)
{
    const void *row;
    size_t len;
    int rc = xt_slice_lookup(ms, MDS_META_BITMAP, sizeof MDS_META_BITMAP - 1, meta_hash(), &row,
                             &len);
    if (rc == 0)
        rc = xt_bitmap_decode(row, len, bm);
    return rc == -ENOENT ? -EBADMSG : rc;
}

/* Store the bitmap in the meta slice, stamped gen. REQUIRES: meta
 * write-locked and touched for gen. */
int mds_table_meta_write(mds_table *t, mds_cent *meta, const xt_bitmap *bm, uint64_t gen)
{
    assert(mds_cent_commit(meta)->dirty_gen >= gen); /* REQUIRES: touched for gen */
    size_t len = xt_bitmap_encoded_size(bm);
    uint8_t *buf = xt_malloc(len);
    if (!buf)
        return -ENOMEM;
    long n = xt_bitmap_encode(bm, buf, len);
    int rc = n < 0 ? (int)n
                   : xt_slice_insert(mds_cent_slice(meta), MDS_META_BITMAP,
                                     sizeof MDS_META_BITMAP - 1, meta_hash(), buf, (size_t)n,
                                     0, gen);
    xt_free(buf);
    if (rc >= 0)
        mds_cache_resize(t->o.cache, meta);
    return rc < 0 ? rc : 0;
}

/* A non-home MDS's meta slice for a table whose meta slice is not on the
 * MDSL yet: in memory only, never touched into a group, so never written
 * (invariant 6). It starts with slice 0; merges add the rest. */
static int meta_volatile(mds_table *t, const struct mds_key *k, mds_cent **out)
{
    for (;;) {
        xt_slice *ms = xt_slice_new(0, 0, META_CAPACITY);
        xt_bitmap *bm = xt_bitmap_new();
        int rc = ms && bm ? 0 : -ENOMEM;
        if (rc == 0) {
            size_t len = xt_bitmap_encoded_size(bm);
            uint8_t buf[64];
            long n = len <= sizeof buf ? xt_bitmap_encode(bm, buf, sizeof buf) : -ENOSPC;
            rc = n < 0 ? (int)n
                       : xt_slice_insert(ms, MDS_META_BITMAP, sizeof MDS_META_BITMAP - 1,
                                         meta_hash(), buf, (size_t)n, 0, 0);
        }
        xt_bitmap_free(bm);
        if (rc >= 0 && (rc = mds_cache_add(t->o.cache, k, ms, out)) == 0)
            return 0;
        xt_slice_free(ms);
        if (rc != -EEXIST)
            return rc < 0 ? rc : -EIO;
        /* Someone added or is loading it: take theirs. */
        rc = mds_cache_get(t->o.cache, k, out);
        if (rc != -ENOENT)
            return rc;
    }
}

struct mtab *mds_table_tab_find(mds_table *t, uint32_t fsid, uint64_t table)
{
    pthread_mutex_lock(&t->mu);
    struct mtab *m = t->bucket[mds_table_bucket(fsid, table)];
    while (m && (m->fsid != fsid || m->table != table))
        m = m->next;
    pthread_mutex_unlock(&t->mu);
    return m; /* tables live until mds_table_free */
}

/* The open table (fsid, table), loading its meta slice on first use. */
int mds_table_tab_get(mds_table *t, uint32_t fsid, uint64_t table, struct mtab **out)
{
    if ((*out = mds_table_tab_find(t, fsid, table)))
        return 0;

    /* Load without the map lock (I/O), then insert unless someone won. */
    struct mds_key k = { fsid, MDS_META_SLICE, table };
    mds_cent *meta;
    bool home = mds_table_owns(t, fsid, table, 0);
    int rc = mds_cache_get(t->o.cache, &k, &meta);
    if (rc == -ENOENT && !home)
        rc = meta_volatile(t, &k, &meta);
    if (rc < 0)
        return rc;
    struct mtab *m = xt_calloc(1, sizeof *m);
    if (!m) {
        mds_cache_put(t->o.cache, meta);
        return -ENOMEM;
    }
    xt_slice_rdlock(mds_cent_slice(meta));
    rc = mds_table_meta_decode(mds_cent_slice(meta), &m->bm);
    xt_slice_unlock(mds_cent_slice(meta));
    if (rc < 0)
        XT_ERR("table: fs %u table %llu: bad bitmap in meta slice (%d)", fsid,
               (unsigned long long)table, rc);
    /* What the store holds is committed: peers may learn all of it. */
    if (rc == 0 && t->o.on_bit && !(m->said = xt_bitmap_dup(m->bm))) {
        xt_bitmap_free(m->bm);
        rc = -ENOMEM;
    }
    if (rc < 0) {
        mds_cache_put(t->o.cache, meta);
        xt_free(m);
        return rc;
    }
    m->fsid = fsid;
    m->table = table;
    m->meta = meta;
    m->home = home;
    unsigned b = mds_table_bucket(fsid, table);
    pthread_mutex_lock(&t->mu);
    for (struct mtab *x = t->bucket[b]; x; x = x->next)
        if (x->fsid == fsid && x->table == table) {
            pthread_mutex_unlock(&t->mu);
            xt_bitmap_free(m->bm);
            xt_bitmap_free(m->said);
            mds_cache_put(t->o.cache, meta);
            xt_free(m);
            *out = x;
            return 0;
        }
    m->next = t->bucket[b];
    t->bucket[b] = m;
    t->ntabs++;
    pthread_mutex_unlock(&t->mu);
    *out = m;
    return 0;
}


/* Pin the slice that holds hash h: -EREMOTE when another MDS owns it
 * (invariant 6), -EAGAIN when it is in the bitmap but not on its MDSL yet
 * (a split child whose splitter has not committed: a transient state). */
int mds_table_slice_get(mds_table *t, struct mtab *m, uint64_t h, mds_cent **e)
{
    xt_slice *ms = mds_cent_slice(m->meta);
    for (int round = 0;; round++) {
        xt_slice_rdlock(ms);
        uint32_t idx = xt_bitmap_lookup(m->bm, xt_hash_vh(h));
        xt_slice_unlock(ms);
        if (!mds_table_owns(t, m->fsid, m->table, idx))
            return -EREMOTE;
        struct mds_key k = { m->fsid, idx, m->table };
        int rc = mds_cache_get(t->o.cache, &k, e);
        if (rc == -ENOENT) {
            mds_stats_add(t->o.stats, MDS_CTR_SLICE_ABSENT, 1);
            XT_DBG("table: fs %u table %llu: slice %u is not on its MDSL yet", m->fsid,
                   (unsigned long long)m->table, idx);
            return -EAGAIN;
        }
        if (rc < 0 || !t->o.owns || round > 32)
            return rc;
        if (!mds_table_owns(t, m->fsid, m->table, idx)) {
            /* Ring 0 changed during the load: the new owner has it now
             * (mds_table.h invariant 8). A clean copy goes at once. */
            mds_cache_put(t->o.cache, *e);
            *e = NULL;
            mds_cache_drop(t->o.cache, &k);
            return -EREMOTE;
        }
        uint64_t now, since = mds_cent_ring_ver(*e);
        if (t->o.owned_since && (since == MDS_CENT_FOREIGN ||
                                 !t->o.owned_since(t->o.route_arg, &k, since, &now))) {
            /* Lost and regained since it was loaded, or a split child made
             * here for another MDS (invariant 8): the owner of the
             * meantime may have committed newer rows. Drop and load again
             * (asking it first); a copy in use or dirty waits a moment
             * (the client retries). */
            XT_DBG("table: fs %u table %llu: slice %u cached since ring v%llu: reloaded",
                   m->fsid, (unsigned long long)m->table, idx, (unsigned long long)since);
            mds_cache_put(t->o.cache, *e);
            *e = NULL;
            if (mds_cache_drop(t->o.cache, &k) < 0)
                return -EAGAIN; /* in use or dirty: a moment later */
            continue;
        }
        if (t->o.owned_since)
            mds_cent_set_ring_ver(*e, now);
        xt_slice *s = mds_cent_slice(*e);
        xt_slice_rdlock(s);
        unsigned d = xt_slice_depth(s);
        xt_slice_unlock(s);
        xt_slice_rdlock(ms);
        unsigned bd = xt_bitmap_test(m->bm, idx) ? xt_bitmap_depth(m->bm, idx) : d;
        xt_slice_unlock(ms);
        if (d <= bd)
            return 0;
        mds_cache_put(t->o.cache, *e);
        *e = NULL;
        if ((rc = mds_table_repair(t, m, idx, d)) < 0)
            return rc;
    }
}

int mds_table_check_name(size_t len)
{
    return len == 0 || len > XT_NAME_MAX ? -EINVAL : 0;
}

int mds_table_pend_check(const xt_slice *s, const void *name, size_t len)
{
    if (xt_slice_sys_count(s) == 0 || xt_hash_is_sys(name, len))
        return 0;
    unsigned char pn[XT_SYS_PEND_LEN];
    size_t pl = xt_hash_pend_name(name, len, pn);
    const void *row;
    size_t row_len;
    return xt_slice_lookup(s, pn, pl, xt_hash_name(pn, pl), &row, &row_len) == 0 ? -EAGAIN : 0;
}

/* A write in progress (the writer protocol of mds_group.h). */
struct wctx {
    struct mtab *m;
    mds_cent *e;
    uint64_t g0, gen;
};

/* Find, pin, enter, lock and touch the slice of h. On 0 the caller holds
 * e's write lock and must call write_end. */
static int write_begin(mds_table *t, uint32_t fsid, uint64_t table, uint64_t h,
                       struct wctx *w)
{
    int rc = mds_table_tab_get(t, fsid, table, &w->m);
    if (rc < 0)
        return rc;
    for (;;) {
        if ((rc = mds_table_slice_get(t, w->m, h, &w->e)) < 0)
            return rc;
        w->g0 = mds_group_enter(t->o.group);
        xt_slice *s = mds_cent_slice(w->e);
        xt_slice_wrlock(s);
        bool ours = mds_table_owns(t, fsid, table, mds_cent_key(w->e)->slice);
        if (ours && xt_slice_owns(s, h))
            break;
        /* Split meanwhile (invariant 1): look again. Ring 0 gave the slice
         * away meanwhile (invariant 8): no change here any more. */
        xt_slice_unlock(s);
        mds_group_leave(t->o.group, w->g0, 0);
        mds_cache_put(t->o.cache, w->e);
        if (!ours)
            return -EREMOTE;
    }
    w->gen = w->g0;
    rc = mds_group_touch(t->o.group, w->e, &w->gen);
    if (rc < 0) {
        xt_slice_unlock(mds_cent_slice(w->e));
        mds_group_leave(t->o.group, w->g0, 0);
        mds_cache_put(t->o.cache, w->e);
    }
    return rc;
}

/* Returns whether the slice has grown past split_bytes (mds_table_big). */
static bool write_end(mds_table *t, struct wctx *w, size_t bytes)
{
    bool big = mds_table_big(t, mds_cent_slice(w->e));
    mds_cache_resize(t->o.cache, w->e);
    xt_slice_unlock(mds_cent_slice(w->e));
    mds_group_leave(t->o.group, w->g0, bytes);
    mds_cache_put(t->o.cache, w->e);
    return big;
}

bool mds_table_big(const mds_table *t, const xt_slice *s)
{
    return xt_slice_count(s) >= 2 && xt_slice_mem_bytes(s) > t->o.split_bytes;
}

int mds_table_mktable(mds_table *t, uint32_t fsid, uint64_t table, uint64_t *gen)
{
    struct mds_key mk = { fsid, MDS_META_SLICE, table }, k0 = { fsid, 0, table };
    mds_cent *meta = NULL, *s0 = NULL;
    uint64_t stamp = mds_cache_stamp(t->o.cache); /* before ownership is decided */
    if (!mds_table_owns(t, fsid, table, 0))
        return -EREMOTE; /* only the home makes tables (invariant 6) */
    xt_bitmap *bm = xt_bitmap_new();
    if (!bm)
        return -ENOMEM;
    int rc;
    /* Slice 0 first: once the meta slice is visible, slice 0 must be too.
     * Races: a concurrent creator adds the same two entries (the loser of
     * the meta finds it and answers -EEXIST); a concurrent lookup may be
     * loading the meta slice, which makes our add fail although no one
     * will create it. So slice 0 may already be in the cache, left by a
     * creator that lost to such a load (empty and clean: no meta names it,
     * so no one wrote to it): it is taken as it is, and the meta is tried
     * again once the load has finished. */
    for (int attempt = 0;; attempt++) {
        rc = mds_cache_get(t->o.cache, &mk, &meta);
        if (rc == 0) {
            mds_cache_put(t->o.cache, meta);
            meta = NULL;
            rc = -EEXIST;
            goto fail;
        }
        if (rc != -ENOENT)
            goto fail;
        if (attempt == 1000) {
            XT_ERR("table: fs %u table %llu: cannot create its meta slice", fsid,
                   (unsigned long long)table);
            rc = -EAGAIN;
            goto fail;
        }
        if (!s0) {
            xt_slice *z = xt_slice_new(0, 0, t->o.split_threshold);
            if (!z) {
                rc = -ENOMEM;
                goto fail;
            }
            rc = mds_cache_add(t->o.cache, &k0, z, &s0);
            if (rc == 0)
                mds_cent_set_ring_ver(s0, stamp);
            if (rc == -EEXIST) {
                xt_slice_free(z);
                rc = mds_cache_peek(t->o.cache, &k0, &s0);
                if (rc == -ENOENT) { /* loading or just dropped: look again */
                    s0 = NULL;
                    continue;
                }
            } else if (rc < 0) {
                xt_slice_free(z);
            }
            if (rc < 0)
                goto fail;
        }
        xt_slice *ms = xt_slice_new(0, 0, META_CAPACITY);
        if (!ms) {
            rc = -ENOMEM;
            goto fail;
        }
        rc = mds_cache_add(t->o.cache, &mk, ms, &meta);
        if (rc == 0)
            break;
        xt_slice_free(ms);
        meta = NULL;
        if (rc != -EEXIST)
            goto fail;
        /* Loading (someone's lookup) or added by another creator: the next
         * mds_cache_get waits for it and tells which. */
    }
    uint64_t g0 = mds_group_enter(t->o.group);
    uint64_t g = g0;
    xt_slice_wrlock(mds_cent_slice(s0));
    xt_slice_wrlock(mds_cent_slice(meta));
    rc = mds_group_touch(t->o.group, s0, &g);
    if (rc == 0)
        rc = mds_group_touch(t->o.group, meta, &g);
    if (rc == 0)
        rc = mds_table_meta_write(t, meta, bm, g);
    xt_slice_unlock(mds_cent_slice(meta));
    xt_slice_unlock(mds_cent_slice(s0));
    mds_group_leave(t->o.group, g0, 64);
    if (rc == 0 && gen)
        *gen = g;
fail:
    if (s0)
        mds_cache_put(t->o.cache, s0);
    if (meta)
        mds_cache_put(t->o.cache, meta);
    xt_bitmap_free(bm);
    return rc;
}

/* Split the full slice `full` (write-locked by the caller, or a child of
 * this same insert) and record it in the bitmap, all in w's group. On 0
 * *child is the new slice, pinned, in the cache and touched: the caller
 * puts it. The child takes no lock: until the caller drops the meta lock
 * no bitmap names it, and until the caller leaves the group the committer
 * cannot snapshot it (mds_group.h, invariant 1), so no one else can reach
 * it; locking it under the meta lock would invert the lock order.
 * REQUIRES: the caller holds the meta slice's write lock, touched for w->gen. */
static int split_slice(mds_table *t, struct wctx *w, mds_cent *full, mds_cent **child)
{
    uint64_t t0 = xt_mono_ns(), stamp = mds_cache_stamp(t->o.cache);
    xt_slice *s = mds_cent_slice(full), *cs = NULL;
    uint32_t idx = xt_slice_index(s), cidx;
    xt_bitmap *nbm = xt_bitmap_dup(w->m->bm);
    if (!nbm)
        return -ENOMEM;
    int rc = xt_bitmap_split(nbm, idx, &cidx);
    if (rc == 0)
        rc = xt_slice_split(s, &cs);
    if (rc < 0) {
        xt_bitmap_free(nbm);
        return rc == -ERANGE ? -ENOSPC : rc;
    }
    /* The new slice is unreachable until the bitmap names it (we hold the
     * meta write lock), so publishing it first is safe. */
    struct mds_key ck = { w->m->fsid, xt_slice_index(cs), w->m->table };
    mds_cent *ce = NULL;
    if (xt_slice_index(cs) != cidx) {
        XT_ERR("table: split of slice %u: child %u but bitmap says %u", idx,
               xt_slice_index(cs), cidx);
        rc = -EIO;
    } else {
        rc = mds_cache_add(t->o.cache, &ck, cs, &ce);
    }
    if (rc == 0) {
        cs = NULL;
        uint64_t g = w->gen;
        rc = mds_group_touch(t->o.group, ce, &g); /* new: never raises g */
        if (rc == 0 && w->m->home)
            rc = mds_table_meta_write(t, w->m->meta, nbm, w->gen);
        if (rc < 0)
            mds_cache_put(t->o.cache, ce);
    }
    if (rc < 0) {
        /* Cannot happen short of ENOMEM; the slice is split in memory but not
         * in the bitmap: its moved rows would be lost. Refuse loudly. */
        XT_ERR("table: fs %u table %llu: split of slice %u failed after the fact (%d)",
               w->m->fsid, (unsigned long long)w->m->table, idx, rc);
        xt_slice_free(cs);
        xt_bitmap_free(nbm);
        return rc;
    }
    /* A child that ring 0 gives another MDS -- or that an MDS still on an
     * older ring could take as its own -- only waits here for its first
     * commit; its owner loads it (after the release round) and changes it
     * from then on, so this copy must never serve again, even once ring 0
     * gives the slice to us (mds_table.h invariant 8). A kept one counts
     * from `stamp`, read before ownership was decided. */
    bool mine = !t->o.owns || mds_table_owns(t, w->m->fsid, w->m->table, cidx);
    bool unsettled = mine && t->o.ring_unsettled && t->o.ring_unsettled(t->o.route_arg, &ck);
    mds_cent_set_ring_ver(ce, mine && !unsettled ? stamp : MDS_CENT_FOREIGN);
    XT_DBG("table: fs %u table %llu: slice %u split, child %u%s", w->m->fsid,
           (unsigned long long)w->m->table, idx, cidx,
           !mine ? " (another MDS's)" : unsettled ? " (ours, reloaded: ring 0 unsettled)" : "");
    xt_bitmap_free(w->m->bm);
    w->m->bm = nbm;
    mds_cache_resize(t->o.cache, full);
    mds_cache_resize(t->o.cache, ce);
    *child = ce;
    if (t->o.owns)
        mds_table_note_bit(t, w->m, cidx, w->gen, mine && !unsettled);
    mds_stats_record(t->o.stats, MDS_OP_SPLIT, xt_mono_ns() - t0, 0);
    return 0;
}

/* Write-lock the meta slice and touch it in w's group (raising w to the
 * meta slice's group when that is newer, copy-on-write for the older one,
 * so a split is atomic). The caller unlocks the meta slice, also on error.
 * REQUIRES: w from write_begin. */
static int meta_join(mds_table *t, struct wctx *w)
{
    assert(w->m && w->e && w->gen >= w->g0); /* REQUIRES: w from write_begin */
    xt_slice_wrlock(mds_cent_slice(w->m->meta));
    if (!w->m->home)
        return 0; /* the bitmap changes in memory only (invariant 6) */
    uint64_t g = w->gen;
    int rc = mds_group_touch(t->o.group, w->m->meta, &g);
    if (rc == 0 && g != w->gen) {
        w->gen = g;
        rc = mds_group_touch(t->o.group, w->e, &w->gen);
    }
    return rc;
}

/* Insert into the write-locked slice of w, splitting (repeatedly) when it is
 * full. REQUIRES: w from write_begin. */
static int insert_split(mds_table *t, struct wctx *w, const void *name, size_t name_len,
                        uint64_t h, const void *row, size_t row_len, unsigned flags)
{
    assert(w->m && w->e && w->gen >= w->g0); /* REQUIRES: w from write_begin */
    unsigned xf = (flags & MDS_TABLE_EXCL) ? XT_SLICE_EXCL : 0;
    int rc = xt_slice_insert(mds_cent_slice(w->e), name, name_len, h, row, row_len, xf,
                             w->gen);
    if (rc != -ENOSPC)
        return rc;
    /* Full: join the meta slice to this write, in the same group. */
    xt_slice *ms = mds_cent_slice(w->m->meta);
    rc = meta_join(t, w);
    mds_cent *kids[XT_SLICE_MAX_DEPTH + 1];
    size_t nkids = 0;
    mds_cent *target = w->e;
    while (rc == 0) { /* rc is 0 here; a full target loops via `continue` */
        mds_cent *child;
        if ((rc = split_slice(t, w, target, &child)) < 0)
            break;
        kids[nkids++] = child;
        if (xt_slice_owns(mds_cent_slice(child), h)) {
            uint32_t cidx = xt_slice_index(mds_cent_slice(child));
            if (!mds_table_owns(t, w->m->fsid, w->m->table, cidx)) {
                rc = -EREMOTE; /* the child is another MDS's: never changed here */
                break;
            }
            if (mds_cent_ring_ver(child) == MDS_CENT_FOREIGN) {
                rc = -EAGAIN; /* ours, but loaded again before use (split_slice) */
                break;
            }
            target = child;
        }
        rc = xt_slice_insert(mds_cent_slice(target), name, name_len, h, row, row_len, xf,
                             w->gen);
        if (rc != -ENOSPC || nkids == XT_SLICE_MAX_DEPTH)
            break;
        rc = 0; /* every row stayed on the target's side: split it again */
    }
    for (size_t i = nkids; i-- > 0;)
        mds_cache_put(t->o.cache, kids[i]);
    xt_slice_unlock(ms);
    return rc;
}

int mds_table_create(mds_table *t, uint32_t fsid, uint64_t table, const void *name, size_t name_len,
                     uint64_t h, const void *row, size_t row_len, unsigned flags, uint64_t *gen)
{
    uint64_t t0 = xt_mono_ns();
    int rc = mds_table_check_name(name_len);
    struct wctx w;
    if (rc == 0 && (rc = write_begin(t, fsid, table, h, &w)) == 0) {
        rc = mds_table_pend_check(mds_cent_slice(w.e), name, name_len);
        int64_t df = 0, db = 0;
        if (rc == 0 && t->o.usage) {
            const void *old = NULL;
            size_t old_len = 0;
            if (xt_slice_lookup(mds_cent_slice(w.e), name, name_len, h, &old, &old_len) < 0)
                old = NULL;
            /* With EXCL and the name there the insert fails -EEXIST: no count. */
            if (!(old && (flags & MDS_TABLE_EXCL))) {
                mds_usage_delta(table, name, name_len, old, old_len, row, row_len, &df, &db);
                rc = mds_usage_check(t->o.usage, fsid, df, db);
            }
        }
        if (rc == 0)
            rc = insert_split(t, &w, name, name_len, h, row, row_len, flags);
        if (rc >= 0)
            mds_usage_note(t->o.usage, fsid, w.gen, df, db);
        bool big = write_end(t, &w, rc >= 0 ? name_len + row_len : 0);
        if (rc >= 0 && gen)
            *gen = w.gen;
        if (rc >= 0 && big)
            (void)mds_table_make_room(t, w.m, h, 0);
    }
    rc = rc > 0 ? 0 : rc;
    mds_stats_record(t->o.stats, MDS_OP_CREATE, xt_mono_ns() - t0, rc);
    return rc;
}

int mds_table_update(mds_table *t, uint32_t fsid, uint64_t table, const void *name, size_t name_len,
                     uint64_t h, mds_table_update_fn fn, void *arg, uint64_t *gen)
{
    uint64_t t0 = xt_mono_ns();
    int rc = mds_table_check_name(name_len);
    struct wctx w;
    size_t bytes = 0;
    if (rc == 0 && (rc = write_begin(t, fsid, table, h, &w)) == 0) {
        xt_slice *s = mds_cent_slice(w.e);
        const void *old;
        size_t old_len;
        rc = mds_table_pend_check(s, name, name_len);
        if (rc == 0)
            rc = xt_slice_lookup(s, name, name_len, h, &old, &old_len);
        uint8_t *nr = NULL;
        size_t nlen = 0;
        if (rc == 0)
            rc = fn(arg, old, old_len, &nr, &nlen);
        int64_t df = 0, db = 0;
        if (rc == 0 && t->o.usage) {
            mds_usage_delta(table, name, name_len, old, old_len, nr, nlen, &df, &db);
            rc = mds_usage_check(t->o.usage, fsid, df, db);
        }
        if (rc == 0)
            rc = xt_slice_update(s, name, name_len, h, nr, nlen, w.gen);
        if (rc == 0 && nlen < old_len)
            mds_cent_commit(w.e)->removed = true; /* a truncate: its group frees */
        if (rc == 0)
            mds_usage_note(t->o.usage, fsid, w.gen, df, db);
        xt_free(nr);
        bytes = rc == 0 ? name_len + nlen : 0;
        bool big = write_end(t, &w, bytes);
        if (rc == 0 && gen)
            *gen = w.gen;
        /* Rows grow by updates (a file's bytes are written after its
         * create): the split that keeps the slice small comes after. */
        if (rc == 0 && big)
            (void)mds_table_make_room(t, w.m, h, 0);
    }
    mds_stats_record(t->o.stats, MDS_OP_UPDATE, xt_mono_ns() - t0, rc);
    return rc;
}

int mds_table_delete(mds_table *t, uint32_t fsid, uint64_t table, const void *name, size_t name_len,
                     uint64_t h, mds_table_check_fn check, void *arg, uint64_t *gen)
{
    uint64_t t0 = xt_mono_ns();
    int rc = mds_table_check_name(name_len);
    struct wctx w;
    if (rc == 0 && (rc = write_begin(t, fsid, table, h, &w)) == 0) {
        xt_slice *s = mds_cent_slice(w.e);
        rc = mds_table_pend_check(s, name, name_len);
        int64_t df = 0, db = 0;
        if (rc == 0 && (check || t->o.usage)) {
            const void *old;
            size_t old_len;
            rc = xt_slice_lookup(s, name, name_len, h, &old, &old_len);
            if (rc == 0 && check)
                rc = check(arg, old, old_len);
            if (rc == 0)
                mds_usage_delta(table, name, name_len, old, old_len, NULL, 0, &df, &db);
        }
        if (rc == 0)
            rc = xt_slice_delete(s, name, name_len, h, w.gen);
        if (rc == 0)
            mds_cent_commit(w.e)->removed = true;
        if (rc == 0)
            mds_usage_note(t->o.usage, fsid, w.gen, df, db);
        write_end(t, &w, rc == 0 ? name_len + 16 : 0);
        if (rc == 0 && gen)
            *gen = w.gen;
    }
    mds_stats_record(t->o.stats, MDS_OP_DELETE, xt_mono_ns() - t0, rc);
    return rc;
}

/* The row of name (hash h) in slice s, read-locked and owning h, copied
 * into *row (xt_malloc'd); a row of an undecided transaction answers as
 * mds_table_pend_check says unless `undecided`. */
static int slice_read(const xt_slice *s, const void *name, size_t name_len, uint64_t h,
                      bool undecided, uint8_t **row, size_t *row_len)
{
    const void *p;
    size_t len;
    int rc = undecided ? 0 : mds_table_pend_check(s, name, name_len);
    if (rc == 0)
        rc = xt_slice_lookup(s, name, name_len, h, &p, &len);
    if (rc == 0 && !(*row = xt_malloc(len ? len : 1)))
        rc = -ENOMEM;
    if (rc == 0) {
        memcpy(*row, p, len);
        *row_len = len;
    }
    return rc;
}

int mds_table_lookup(mds_table *t, uint32_t fsid, uint64_t table, const void *name, size_t name_len,
                     uint64_t h, uint8_t **row, size_t *row_len)
{
    return mds_table_lookup_ex(t, fsid, table, name, name_len, h, false, row, row_len);
}

int mds_table_lookup_ex(mds_table *t, uint32_t fsid, uint64_t table, const void *name,
                        size_t name_len, uint64_t h, bool undecided, uint8_t **row, size_t *row_len)
{
    uint64_t t0 = xt_mono_ns();
    *row = NULL;
    *row_len = 0;
    int rc = mds_table_check_name(name_len);
    struct mtab *m;
    if (rc == 0)
        rc = mds_table_tab_get(t, fsid, table, &m);
    while (rc == 0) {
        mds_cent *e;
        if ((rc = mds_table_slice_get(t, m, h, &e)) < 0)
            break;
        xt_slice *s = mds_cent_slice(e);
        xt_slice_rdlock(s);
        bool owns = xt_slice_owns(s, h);
        if (owns)
            rc = slice_read(s, name, name_len, h, undecided, row, row_len);
        xt_slice_unlock(s);
        mds_cache_put(t->o.cache, e);
        if (owns)
            break;
    }
    mds_stats_record(t->o.stats, MDS_OP_LOOKUP, xt_mono_ns() - t0, rc);
    return rc;
}

/* An index of mds_table_lookup_many's g, by the hash the bitmap reads. */
struct get_ord {
    uint64_t vh;
    size_t i;
};

static int get_ord_cmp(const void *a, const void *b)
{
    const struct get_ord *x = a, *y = b;
    return x->vh < y->vh ? -1 : x->vh > y->vh ? 1 : (x->i > y->i) - (x->i < y->i);
}

void mds_table_lookup_many(mds_table *t, uint32_t fsid, uint64_t table,
                           struct mds_table_get *g, size_t n)
{
    uint64_t t0 = xt_mono_ns();
    for (size_t i = 0; i < n; i++) {
        g[i].row = NULL;
        g[i].row_len = 0;
        g[i].slice = UINT32_MAX;
        g[i].rc = mds_table_check_name(g[i].name_len);
    }
    struct mtab *m;
    int trc = mds_table_tab_get(t, fsid, table, &m);
    /* Hash order puts the lookups of one slice side by side; without the
     * index (no memory) they go in their own order, still correct. */
    struct get_ord *ord = trc == 0 && n > 1 ? xt_malloc(n * sizeof *ord) : NULL;
    for (size_t i = 0; ord && i < n; i++)
        ord[i] = (struct get_ord){ xt_hash_vh(g[i].h), i };
    if (ord)
        qsort(ord, n, sizeof *ord, get_ord_cmp);
    mds_cent *e = NULL; /* pinned and read-locked while held > 0 */
    size_t held = 0;
    for (size_t k = 0; k < n; k++) {
        struct mds_table_get *q = &g[ord ? ord[k].i : k];
        if (q->rc < 0)
            continue;
        if (trc < 0) {
            q->rc = trc;
            continue;
        }
        if (e && (held >= MDS_TABLE_RUN_MAX || !xt_slice_owns(mds_cent_slice(e), q->h))) {
            xt_slice_unlock(mds_cent_slice(e));
            mds_cache_put(t->o.cache, e);
            e = NULL;
        }
        if (!e) {
            int rc = mds_table_slice_get(t, m, q->h, &e);
            if (rc < 0) {
                e = NULL;
                q->rc = rc;
                continue;
            }
            xt_slice_rdlock(mds_cent_slice(e));
            held = 0;
            if (!xt_slice_owns(mds_cent_slice(e), q->h)) {
                /* Split between the bitmap read and the lock: the caller's
                 * single lookup finds the child. */
                xt_slice_unlock(mds_cent_slice(e));
                mds_cache_put(t->o.cache, e);
                e = NULL;
                q->rc = -EAGAIN;
                continue;
            }
        }
        q->slice = mds_cent_key(e)->slice;
        q->rc = slice_read(mds_cent_slice(e), q->name, q->name_len, q->h, false, &q->row,
                           &q->row_len);
        held++;
    }
    if (e) {
        xt_slice_unlock(mds_cent_slice(e));
        mds_cache_put(t->o.cache, e);
    }
    xt_free(ord);
    uint64_t each = n ? (xt_mono_ns() - t0) / n : 0;
    for (size_t i = 0; i < n; i++) /* the rest are counted when repeated */
        if (g[i].rc == 0 || g[i].rc == -ENOENT)
            mds_stats_record(t->o.stats, MDS_OP_LOOKUP, each, g[i].rc);
}

int mds_table_list(mds_table *t, uint32_t fsid, uint64_t table, uint64_t cookie,
                   size_t max_entries, xt_slice_cb cb, void *arg, uint64_t *next_cookie)
{
    uint64_t t0 = xt_mono_ns();
    *next_cookie = cookie;
    struct mtab *m;
    int rc = mds_table_tab_get(t, fsid, table, &m);
    size_t done = 0;
    while (rc == 0 && done < max_entries && cookie < XT_COOKIE_END) {
        uint64_t h = mds_table_cookie_hash(cookie);
        mds_cent *e;
        if ((rc = mds_table_slice_get(t, m, h, &e)) < 0) {
            if (rc == -EREMOTE && done > 0)
                rc = 0; /* the next range is another MDS's: resume there */
            break;
        }
        xt_slice *s = mds_cent_slice(e);
        xt_slice_rdlock(s);
        uint32_t idx = xt_slice_index(s);
        unsigned d = xt_slice_depth(s);
        uint64_t lo = xt_hash_slice_cookie_lo(idx, d), hi = xt_hash_slice_cookie_hi(idx, d);
        if (cookie < lo || cookie >= hi) {
            /* Split after our bitmap lookup: look again. */
            xt_slice_unlock(s);
            mds_cache_put(t->o.cache, e);
            continue;
        }
        uint64_t next;
        int n = xt_slice_list(s, cookie, max_entries - done, cb, arg, &next);
        xt_slice_unlock(s);
        mds_cache_put(t->o.cache, e);
        if (n < 0) {
            rc = n;
            break;
        }
        done += (size_t)n;
        if (next != XT_COOKIE_END) {
            cookie = next;
            if (done < max_entries)
                break; /* the callback stopped */
        } else {
            cookie = hi; /* this slice is done: the next range */
        }
    }
    if (rc == 0 || rc == -EREMOTE)
        *next_cookie = cookie; /* -EREMOTE: where the other MDS resumes */
    mds_stats_record(t->o.stats, MDS_OP_LIST, xt_mono_ns() - t0, rc);
    return rc < 0 ? rc : (int)done;
}








int mds_table_bitmap(mds_table *t, uint32_t fsid, uint64_t table, uint8_t **out,
                     size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    struct mtab *m;
    int rc = mds_table_tab_get(t, fsid, table, &m);
    if (rc < 0)
        return rc;
    xt_slice *ms = mds_cent_slice(m->meta);
    xt_slice_rdlock(ms);
    const xt_bitmap *bm = mds_table_told_bm(m);
    size_t len = xt_bitmap_encoded_size(bm);
    uint8_t *buf = xt_malloc(len);
    long n = buf ? xt_bitmap_encode(bm, buf, len) : -ENOMEM;
    xt_slice_unlock(ms);
    if (n < 0) {
        xt_free(buf);
        return (int)n;
    }
    *out = buf;
    *out_len = (size_t)n;
    return 0;
}

/* Split the slice holding h once, as an ordinary create would (own group,
 * no batch lock held), when it still lacks room for `need` new names or
 * holds more than split_bytes. */
int mds_table_make_room(mds_table *t, struct mtab *m, uint64_t h, uint32_t need)
{
    struct wctx w;
    int rc = write_begin(t, m->fsid, m->table, h, &w);
    if (rc < 0)
        return rc;
    xt_slice *s = mds_cent_slice(w.e);
    if (xt_slice_count(s) + need > xt_slice_capacity(s) || mds_table_big(t, s)) {
        if ((rc = meta_join(t, &w)) == 0) {
            mds_cent *child;
            if ((rc = split_slice(t, &w, w.e, &child)) == 0)
                mds_cache_put(t->o.cache, child);
        }
        xt_slice_unlock(mds_cent_slice(w.m->meta));
    }
    write_end(t, &w, rc == 0 ? 64 : 0);
    return rc;
}
