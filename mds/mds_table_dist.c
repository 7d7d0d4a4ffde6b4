/*
 * mds_table_dist.c -- what many MDS add to the table layer (mds_table.h
 * invariants 6 and 7; docs/mds-dist.md): bitmap merges (persisted only at
 * the home), the repair at load, the slice a forward goes to, and the
 * table census the routing thread and the reports use.
 */
#include "mds_table.h"
#include "mds_table_i.h"

#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"

/* OR other into m's bitmap; the home persists the new bits in the open
 * group (meta slice touched only when something is new, so a gossip round
 * that teaches nothing dirties nothing). Returns the new bits or -errno. */
int mds_table_merge_bits(mds_table *t, struct mtab *m, const xt_bitmap *other)
{
    xt_slice *ms = mds_cent_slice(m->meta);
    xt_slice_rdlock(ms);
    xt_bitmap *probe = xt_bitmap_dup(m->bm);
    int rc = probe ? xt_bitmap_merge(probe, other) : -ENOMEM;
    xt_slice_unlock(ms);
    xt_bitmap_free(probe);
    if (rc <= 0)
        return rc;
    uint64_t g0 = m->home ? mds_group_enter(t->o.group) : 0, g = g0;
    xt_slice_wrlock(ms);
    rc = m->home ? mds_group_touch(t->o.group, m->meta, &g) : 0;
    xt_bitmap *nbm = rc == 0 ? xt_bitmap_dup(m->bm) : NULL;
    if (rc == 0 && !nbm)
        rc = -ENOMEM;
    if (rc == 0)
        rc = xt_bitmap_merge(nbm, other);
    if (rc > 0 && m->home) {
        int wrc = mds_table_meta_write(t, m->meta, nbm, g);
        rc = wrc < 0 ? wrc : rc;
    }
    if (rc > 0) {
        xt_bitmap_free(m->bm);
        m->bm = nbm;
        nbm = NULL;
    }
    xt_slice_unlock(ms);
    xt_bitmap_free(nbm);
    if (m->home)
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
        for (unsigned k = 0; k < depth && k < 32; k++)
            if ((uint64_t)idx < (UINT64_C(1) << k))
                mds_table_note_bit(t, m, idx + (UINT32_C(1) << k), 0);
    }
    return rc;
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

void mds_table_each(mds_table *t, void (*fn)(void *arg, uint32_t fsid, uint64_t table),
                    void *arg)
{
    /* Tables are never closed before mds_table_free, so a snapshot of the
     * keys is enough. */
    pthread_mutex_lock(&t->mu);
    size_t n = t->ntabs, k = 0;
    struct { uint32_t fsid; uint64_t table; } *keys = xt_malloc((n ? n : 1) * sizeof *keys);
    for (unsigned b = 0; keys && b < MAP_BUCKETS; b++)
        for (struct mtab *m = t->bucket[b]; m && k < n; m = m->next) {
            keys[k].fsid = m->fsid;
            keys[k].table = m->table;
            k++;
        }
    pthread_mutex_unlock(&t->mu);
    for (size_t i = 0; keys && i < k; i++)
        fn(arg, keys[i].fsid, keys[i].table);
    xt_free(keys);
}

size_t mds_table_count(mds_table *t)
{
    pthread_mutex_lock(&t->mu);
    size_t n = t->ntabs;
    pthread_mutex_unlock(&t->mu);
    return n;
}
