/*
 * mds_table_dist.c -- what many MDS add to the table layer (mds_table.h
 * invariants 6 and 7; docs/mds-dist.md): bitmap merges (persisted only at
 * the home), the repair at load, the slice a forward goes to, the table
 * census the routing thread and the reports use, and what ring-0 changes
 * need (stage 2, invariant 8): letting slices go and moving the home role.
 */
#include "mds_table.h"
#include "mds_table_i.h"

#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"

/* OR other into m's bitmap; the home persists the new bits in the open
 * group (meta slice touched only when something is new, so a gossip round
 * that teaches nothing dirties nothing). Every caller's bits are committed
 * (a peer's, the store's, a repair's), so they may be told on at once
 * (invariant 9). Returns the new bits or -errno. */
int mds_table_merge_bits(mds_table *t, struct mtab *m, const xt_bitmap *other)
{
    xt_slice *ms = mds_cent_slice(m->meta);
    xt_slice_rdlock(ms);
    xt_bitmap *probe = xt_bitmap_dup(mds_table_told_bm(m));
    int rc = probe ? xt_bitmap_merge(probe, other) : -ENOMEM;
    xt_slice_unlock(ms);
    xt_bitmap_free(probe);
    if (rc <= 0)
        return rc; /* (nothing new to said, so nothing new to bm: said <= bm) */
    /* Always entered: the home role may change until the lock is held. */
    uint64_t g0 = mds_group_enter(t->o.group), g = g0;
    xt_slice_wrlock(ms);
    bool home = m->home;
    rc = home ? mds_group_touch(t->o.group, m->meta, &g) : 0;
    xt_bitmap *nbm = rc == 0 ? xt_bitmap_dup(m->bm) : NULL;
    if (rc == 0 && !nbm)
        rc = -ENOMEM;
    if (rc == 0)
        rc = xt_bitmap_merge(nbm, other);
    if (rc > 0 && home) {
        int wrc = mds_table_meta_write(t, m->meta, nbm, g);
        rc = wrc < 0 ? wrc : rc;
    }
    if (rc > 0) {
        xt_bitmap_free(m->bm);
        m->bm = nbm;
        nbm = NULL;
    }
    if (rc >= 0 && m->said) { /* (other may hold bits bm had but said had not) */
        int src = xt_bitmap_merge(m->said, other);
        rc = src < 0 ? src : rc;
    }
    xt_slice_unlock(ms);
    xt_bitmap_free(nbm);
    mds_group_leave(t->o.group, g0, rc > 0 ? 64 : 0);
    return rc;
}

/* Invariant 7: slice idx was found at depth `depth`, deeper than the
 * bitmap says: a split whose bit never reached this bitmap (the splitter
 * crashed between its commit and telling the home). Its siblings exist. */
int mds_table_repair(mds_table *t, struct mtab *m, uint32_t idx, unsigned depth)
{
    xt_bitmap *add = xt_bitmap_new();
    int rc = add ? 0 : -ENOMEM;
    for (unsigned k = 0; rc >= 0 && k < depth && k < 32; k++)
        if ((uint64_t)idx < (UINT64_C(1) << k) && (uint64_t)idx + (UINT64_C(1) << k) <= UINT32_MAX)
            rc = xt_bitmap_set(add, idx + (UINT32_C(1) << k));
    if (rc >= 0)
        rc = mds_table_merge_bits(t, m, add);
    xt_bitmap_free(add);
    if (rc > 0) {
        XT_WARN("table: fs %u table %llu: slice %u at depth %u: %d bits repaired", m->fsid,
                (unsigned long long)m->table, idx, depth, rc);
        for (unsigned k = 0; k < depth && k < 32; k++) {
            uint32_t sib = idx + (UINT32_C(1) << k);
            if ((uint64_t)idx < (UINT64_C(1) << k))
                mds_table_note_bit(t, m, sib, 0, mds_table_owns(t, m->fsid, m->table, sib));
        }
    }
    return rc;
}

int mds_table_settle_bit(mds_table *t, uint32_t fsid, uint64_t table, uint32_t slice)
{
    struct mtab *m;
    int rc = mds_table_tab_get(t, fsid, table, &m);
    if (rc < 0 || !m->said)
        return rc;
    xt_slice *ms = mds_cent_slice(m->meta);
    xt_slice_wrlock(ms);
    rc = xt_bitmap_set(m->said, slice);
    xt_slice_unlock(ms);
    return rc < 0 ? rc : 0;
}

bool mds_table_told(mds_table *t, uint32_t fsid, uint64_t table, uint32_t slice)
{
    struct mtab *m;
    if (mds_table_tab_get(t, fsid, table, &m) < 0)
        return false;
    xt_slice *ms = mds_cent_slice(m->meta);
    xt_slice_rdlock(ms);
    bool told = xt_bitmap_test(mds_table_told_bm(m), slice);
    xt_slice_unlock(ms);
    return told;
}

uint64_t mds_table_cookie_hash(uint64_t cookie)
{
    /* The cookie's top 32 bits are bitrev32(V_h) (xt_hash.h). */
    return (uint64_t)xt_bitrev32((uint32_t)(cookie >> 30)) << 32;
}

int mds_table_pick(mds_table *t, uint32_t fsid, uint64_t table, uint64_t h, uint32_t *slice)
{
    struct mtab *m;
    int rc = mds_table_tab_get(t, fsid, table, &m);
    if (rc < 0)
        return rc;
    xt_slice *ms = mds_cent_slice(m->meta);
    xt_slice_rdlock(ms);
    *slice = xt_bitmap_lookup(m->bm, xt_hash_vh(h));
    xt_slice_unlock(ms);
    return 0;
}

bool mds_table_is_home(mds_table *t, uint32_t fsid, uint64_t table)
{
    return mds_table_owns(t, fsid, table, 0);
}

int mds_table_merge(mds_table *t, uint32_t fsid, uint64_t table, const void *enc, size_t len)
{
    xt_bitmap *other;
    int rc = xt_bitmap_decode(enc, len, &other);
    if (rc < 0)
        return rc == -ENOMEM ? rc : -EBADMSG;
    struct mtab *m;
    if ((rc = mds_table_tab_get(t, fsid, table, &m)) == 0)
        rc = mds_table_merge_bits(t, m, other);
    xt_bitmap_free(other);
    return rc;
}

size_t mds_table_count(mds_table *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->ntabs;
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* Gives up the home role when ring 0 moved slice 0 away. The meta slice's
 * last dirty group in *gen. */
static void home_give_up(mds_table *t, struct mtab *m, uint64_t *gen)
{
    xt_slice *ms = mds_cent_slice(m->meta);
    xt_slice_wrlock(ms);
    if (m->home && !mds_table_owns(t, m->fsid, m->table, 0)) {
        m->home = false;
        XT_INFO("table: fs %u table %llu: no longer its home (ring 0 moved slice 0)",
                m->fsid, (unsigned long long)m->table);
    }
    if (gen)
        *gen = m->home ? 0 : mds_cent_commit(m->meta)->dirty_gen;
    xt_slice_unlock(ms);
}

int mds_table_let_go(mds_table *t, const struct mds_key *k, uint64_t *gen)
{
    *gen = 0;
    if (k->slice == MDS_META_SLICE) {
        struct mtab *m = mds_table_tab_find(t, k->fsid, k->table);
        if (m)
            home_give_up(t, m, gen);
        return 0;
    }
    mds_cent *e;
    int rc = mds_cache_find(t->o.cache, k, &e);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    xt_slice *s = mds_cent_slice(e);
    xt_slice_wrlock(s); /* every writer that checked ownership before is out */
    *gen = mds_cent_commit(e)->dirty_gen;
    xt_slice_unlock(s);
    mds_cache_put(t->o.cache, e);
    return 0;
}

int mds_table_drop_let_go(mds_table *t, const struct mds_key *k)
{
    for (int i = 0;; i++) {
        int rc = mds_cache_drop(t->o.cache, k);
        if (rc != -EBUSY)
            return 0;
        if (i == 200)
            return -EAGAIN;
        xt_sleep_ms(1);
    }
}

int mds_table_sweep(mds_table *t, mds_table_owns_fn owns, void *arg, size_t *dropped)
{
    *dropped = 0;
    int todo = mds_table_rehome(t);
    if (todo < 0)
        return 1;
    struct mds_key *keys;
    size_t n, let = 0;
    if (mds_cache_keys(t->o.cache, &keys, &n) < 0)
        return 1;
    uint64_t maxgen = 0;
    for (size_t i = 0; i < n; i++) {
        if (owns(arg, &keys[i]))
            continue;
        uint64_t gen;
        if (mds_table_let_go(t, &keys[i], &gen) < 0) {
            todo++;
            continue;
        }
        maxgen = XT_MAX(maxgen, gen);
        if (keys[i].slice != MDS_META_SLICE)
            keys[let++] = keys[i];
    }
    struct mds_group_info gi;
    mds_group_info(t->o.group, &gi);
    if (maxgen > gi.committed_gen && mds_group_sync(t->o.group, maxgen, 10000) < 0)
        todo++;
    for (size_t i = 0; i < let; i++) {
        if (mds_table_drop_let_go(t, &keys[i]) < 0) {
            todo++;
        } else {
            (*dropped)++;
            XT_DBG("table: fs %u table %llu slice %u: let go and dropped", keys[i].fsid,
                   (unsigned long long)keys[i].table, keys[i].slice);
        }
    }
    xt_free(keys);
    return todo;
}

/* Takes the home role of m (slice 0 is ours now). 0: done or nothing to
 * do; 1: not yet (the meta slice is still being committed from an earlier
 * home term, or the old home has not let go). */
static int home_take(mds_table *t, struct mtab *m)
{
    xt_slice *ms = mds_cent_slice(m->meta);
    struct mds_cent_commit *cm = mds_cent_commit(m->meta);
    struct mds_group_info gi;
    mds_group_info(t->o.group, &gi);
    xt_slice_rdlock(ms);
    bool busy = cm->dirty_gen > gi.committed_gen || cm->snapped_gen != 0;
    xt_slice_unlock(ms);
    if (busy)
        return 1;
    /* The old home's bitmap, once it let go (before_load asks it). */
    struct mds_key mk = { m->fsid, MDS_META_SLICE, m->table };
    xt_slice *stored = NULL;
    uint64_t version = 0;
    bool fenced = false;
    uint32_t site = MDS_SITE_NONE;
    int rc = mds_cache_reread(t->o.cache, &mk, &stored, &version, &site, &fenced);
    if (rc < 0 && rc != -ENOENT)
        return 1;
    xt_bitmap *sbm = NULL;
    if (stored) {
        if (mds_table_meta_decode(stored, &sbm) < 0)
            sbm = NULL;
        xt_slice_free(stored);
    }
    uint64_t g0 = mds_group_enter(t->o.group), g = g0;
    xt_slice_wrlock(ms);
    rc = 0;
    if (!m->home && mds_table_owns(t, m->fsid, m->table, 0) && cm->snapped_gen == 0 &&
        cm->dirty_gen <= gi.committed_gen) {
        xt_bitmap *nbm = xt_bitmap_dup(m->bm);
        rc = nbm ? 0 : -ENOMEM;
        if (rc == 0 && sbm)
            rc = xt_bitmap_merge(nbm, sbm);
        if (rc >= 0) {
            /* Continue the stored versions; the first record is an image,
             * so nothing of an earlier term's deltas is needed. */
            cm->version = version + (fenced ? MDS_CACHE_FENCE_GAP : 0);
            cm->force_image = true;
            if (site != MDS_SITE_NONE) /* the stored copy: a move tombstones it */
                cm->site = site;
            cm->image_bytes = 0;
            cm->delta_bytes = 0;
            rc = mds_group_touch(t->o.group, m->meta, &g);
        }
        if (rc >= 0)
            rc = mds_table_meta_write(t, m->meta, nbm, g);
        if (rc >= 0 && sbm && m->said) { /* the store's bits: committed */
            int mrc = xt_bitmap_merge(m->said, sbm);
            rc = mrc < 0 ? mrc : 0;
        }
        if (rc >= 0) {
            xt_bitmap_free(m->bm);
            m->bm = nbm;
            nbm = NULL;
            m->home = true;
            XT_INFO("table: fs %u table %llu: now its home (stored bitmap v%llu%s)", m->fsid,
                    (unsigned long long)m->table, (unsigned long long)version,
                    fenced ? ", fenced" : "");
        }
        xt_bitmap_free(nbm);
    } else if (!m->home && mds_table_owns(t, m->fsid, m->table, 0)) {
        rc = 1;
    }
    xt_slice_unlock(ms);
    mds_group_leave(t->o.group, g0, rc == 0 ? 64 : 0);
    xt_bitmap_free(sbm);
    return rc < 0 ? 1 : rc;
}

int mds_table_rehome(mds_table *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->ntabs, k = 0;
    struct mtab **v = xt_malloc((n ? n : 1) * sizeof *v);
    for (unsigned b = 0; v && b < MAP_BUCKETS; b++)
        for (struct mtab *m = t->bucket[b]; m && k < n; m = m->next)
            v[k++] = m; /* tables live until mds_table_free */
    pthread_mutex_unlock(&t->mu);
    if (!v)
        return -ENOMEM;
    int todo = 0;
    for (size_t i = 0; i < k; i++) {
        struct mtab *m = v[i];
        bool owner = mds_table_owns(t, m->fsid, m->table, 0);
        if (m->home && !owner)
            home_give_up(t, m, NULL);
        else if (!m->home && owner)
            todo += home_take(t, m);
    }
    xt_free(v);
    return todo;
}
