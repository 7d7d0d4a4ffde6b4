/*
 * mds_table_atomic.c -- atomic batches (mds_table.h invariant 5): up to
 * MDS_ATOMIC_MAX row operations that apply all or none, with one
 * generation. The writer protocol of mds_table.c, for many rows: one
 * group enter, every slice pinned and write-locked in key order (fsid,
 * table, slice index) so two batches never deadlock, each op's
 * precondition checked before the first change, an undo list for the
 * changes made when a later one fails. A batch never takes a meta slice:
 * a full slice is split with no batch lock held (mds_table_make_room),
 * then the batch starts over.
 */
#include "mds_table.h"
#include "mds_table_i.h"

#include <string.h>

#include "xt_common.h"
#include "xt_hash.h"
#include "xt_row.h"

/* What one op of a batch found and will do, for one round. */
struct aslot {
    struct mtab *m;
    uint64_t h;
    mds_cent *e;       /* pinned for the round */
    bool existed;      /* the row was there before the batch */
    uint8_t *old;      /* a copy of it (undo), xt_malloc'd */
    size_t old_len;
    uint8_t *nrow;     /* UPDATE: fn's result, xt_malloc'd */
    size_t nlen;
    int eff;           /* what the op does this round: its type, or for a
                          COPY the CREATE, DELETE or CHECK (nothing) its
                          stamp against the row's ctime comes to */
};

struct abatch {
    const struct mds_aop *ops;
    size_t n;
    struct aslot s[MDS_ATOMIC_MAX];
    mds_cent *lk[MDS_ATOMIC_MAX]; /* distinct slices in lock order */
    size_t nlk;
    uint64_t g0, gen;
};

static bool key_less(const struct mds_key *a, const struct mds_key *b)
{
    if (a->fsid != b->fsid)
        return a->fsid < b->fsid;
    if (a->table != b->table)
        return a->table < b->table;
    return a->slice < b->slice;
}

/* Checks that need no slice: sizes, types, the same row twice. */
static int atomic_validate(const struct mds_aop *ops, size_t n, size_t *failed)
{
    *failed = 0;
    if (n == 0 || n > MDS_ATOMIC_MAX)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        *failed = i;
        const struct mds_aop *o = &ops[i];
        if (mds_table_check_name(o->name_len) < 0 || o->type < MDS_AOP_CREATE ||
            o->type > MDS_AOP_COPY || (o->type == MDS_AOP_UPDATE && !o->fn) ||
            (o->type == MDS_AOP_COPY && (o->check || o->derive || (!o->row && o->row_len))) ||
            (o->type == MDS_AOP_CREATE && !o->row && o->row_len) ||
            (o->derive && (o->type != MDS_AOP_CREATE || o->of >= i)))
            return -EINVAL;
        for (size_t j = 0; j < i; j++)
            if (ops[j].fsid == o->fsid && ops[j].table == o->table &&
                ops[j].name_len == o->name_len && memcmp(ops[j].name, o->name, o->name_len) == 0)
                return -EINVAL;
    }
    return 0;
}

/* Drop what one round took: locks, the group, pins, and the per-op copies. */
static void round_end(mds_table *t, struct abatch *b, bool locked, size_t bytes)
{
    for (size_t k = b->nlk; locked && k-- > 0;) {
        mds_cache_resize(t->o.cache, b->lk[k]);
        xt_slice_unlock(mds_cent_slice(b->lk[k]));
    }
    if (locked)
        mds_group_leave(t->o.group, b->g0, bytes);
    for (size_t i = 0; i < b->n; i++) {
        struct aslot *s = &b->s[i];
        if (s->e)
            mds_cache_put(t->o.cache, s->e);
        xt_free(s->old);
        xt_free(s->nrow);
        s->e = NULL;
        s->old = s->nrow = NULL;
        s->existed = false;
    }
    b->nlk = 0;
}

/* Pin every op's slice, enter the group, lock the distinct slices in key
 * order, check that each still owns its hashes and touch them all into one
 * generation. 0: locked and entered; 1: start over (nothing held); < 0. */
static int round_begin(mds_table *t, struct abatch *b, size_t *failed)
{
    int rc;
    for (size_t i = 0; i < b->n; i++) {
        *failed = i;
        if ((rc = mds_table_slice_get(t, b->s[i].m, b->s[i].h, &b->s[i].e)) < 0) {
            round_end(t, b, false, 0);
            return rc;
        }
        size_t k = 0;
        while (k < b->nlk && b->lk[k] != b->s[i].e)
            k++;
        if (k < b->nlk)
            continue;
        /* Insertion into the sorted distinct list. */
        const struct mds_key *key = mds_cent_key(b->s[i].e);
        k = b->nlk++;
        while (k > 0 && key_less(key, mds_cent_key(b->lk[k - 1]))) {
            b->lk[k] = b->lk[k - 1];
            k--;
        }
        b->lk[k] = b->s[i].e;
    }
    b->g0 = mds_group_enter(t->o.group);
    for (size_t k = 0; k < b->nlk; k++)
        xt_slice_wrlock(mds_cent_slice(b->lk[k]));
    for (size_t i = 0; i < b->n; i++) {
        const struct mds_key *key = mds_cent_key(b->s[i].e);
        if (!mds_table_owns(t, key->fsid, key->table, key->slice)) {
            *failed = i;
            round_end(t, b, true, 0); /* ring 0 moved it meanwhile (invariant 8) */
            return -EREMOTE;
        }
        if (!xt_slice_owns(mds_cent_slice(b->s[i].e), b->s[i].h)) {
            round_end(t, b, true, 0); /* a split ran meanwhile (invariant 1) */
            return 1;
        }
    }
    /* One generation for all: a slice already copied by a newer group
     * raises it; then every slice is touched again for the newest one
     * (copy-on-write of the older group's view), as a split does with its
     * meta slice. At most two groups have writers (mds_group.h (1)), so the
     * second pass cannot raise it again; if it did, start over. */
    b->gen = b->g0;
    for (int pass = 0; pass < 2; pass++) {
        uint64_t want = b->gen;
        bool same = true;
        for (size_t k = 0; k < b->nlk; k++) {
            uint64_t g = want;
            if ((rc = mds_group_touch(t->o.group, b->lk[k], &g)) < 0) {
                round_end(t, b, true, 0);
                return rc;
            }
            same = same && g == want;
            b->gen = XT_MAX(b->gen, g);
        }
        if (same)
            return 0;
    }
    round_end(t, b, true, 0);
    return 1;
}

/* Invariant 9: op i's row may have a pending row only if the batch
 * deletes that pending row (a finish or rollback). A second prepare of
 * the row waits (-EAGAIN) like any other writer: its checks must not run
 * against a state that is not decided. REQUIRES: op i's slice locked. */
static int pend_check(const struct abatch *b, size_t i)
{
    const struct mds_aop *o = &b->ops[i];
    int rc = mds_table_pend_check(mds_cent_slice(b->s[i].e), o->name, o->name_len);
    if (rc == 0)
        return 0;
    unsigned char pn[XT_SYS_PEND_LEN];
    size_t pl = xt_hash_pend_name(o->name, o->name_len, pn);
    for (size_t j = 0; j < b->n; j++)
        if (b->ops[j].type == MDS_AOP_DELETE && b->ops[j].fsid == o->fsid &&
            b->ops[j].table == o->table &&
            b->ops[j].name_len == pl && memcmp(b->ops[j].name, pn, pl) == 0)
            return 0;
    return rc;
}

/* With every slice locked: check each op's precondition and prepare what
 * it writes. Returns 0, the first failure (*failed), or 1 with *full =
 * an op whose slice has no room for the batch's new names. */
static int round_check(struct abatch *b, size_t *failed, size_t *full)
{
    int rc = 0;
    for (size_t i = 0; i < b->n && rc == 0; i++) {
        const struct mds_aop *o = &b->ops[i];
        struct aslot *s = &b->s[i];
        *failed = i;
        const void *old = NULL;
        size_t old_len = 0;
        rc = xt_slice_lookup(mds_cent_slice(s->e), o->name, o->name_len, s->h, &old, &old_len);
        if (rc < 0 && rc != -ENOENT)
            break;
        s->existed = rc == 0;
        rc = 0;
        if (s->existed) {
            if (!(s->old = xt_malloc(old_len ? old_len : 1))) {
                rc = -ENOMEM;
                break;
            }
            memcpy(s->old, old, old_len);
            s->old_len = old_len;
        }
        if ((rc = pend_check(b, i)) < 0)
            break;
        s->eff = o->type;
        if (o->type == MDS_AOP_COPY) {
            xt_row v;
            if (s->existed && xt_row_decode_meta(s->old, s->old_len, &v) < 0) {
                rc = -EIO;
                break;
            }
            bool newer = s->existed && (o->row ? v.attr.ctime_ns >= o->stamp
                                               : v.attr.ctime_ns > o->stamp);
            s->eff = newer ? MDS_AOP_CHECK
                     : o->row ? MDS_AOP_CREATE
                     : s->existed ? MDS_AOP_DELETE : MDS_AOP_CHECK;
            continue;
        }
        bool need = o->type != MDS_AOP_CREATE || o->check;
        if (need && !s->existed)
            rc = -ENOENT;
        else if (o->type == MDS_AOP_CREATE && s->existed && (o->flags & MDS_TABLE_EXCL))
            rc = -EEXIST;
        else if (o->type == MDS_AOP_UPDATE)
            rc = o->fn(o->arg, s->old, s->old_len, &s->nrow, &s->nlen);
        else if (o->check && s->existed)
            rc = o->check(o->arg, s->old, s->old_len);
        if (rc == 0 && o->derive)
            rc = o->derive(o->arg, b->s[o->of].existed, b->s[o->of].old, b->s[o->of].old_len,
                           &s->nrow, &s->nlen);
        if (rc > 0)
            rc = -EIO; /* a callback must return 0 or -errno */
    }
    if (rc < 0)
        return rc;
    /* Room: the new names of each slice must fit under its capacity. */
    for (size_t k = 0; k < b->nlk; k++) {
        xt_slice *sl = mds_cent_slice(b->lk[k]);
        uint32_t fresh = 0;
        size_t first = 0;
        for (size_t i = 0; i < b->n; i++)
            if (b->s[i].e == b->lk[k] && b->s[i].eff == MDS_AOP_CREATE && !b->s[i].existed) {
                if (fresh++ == 0)
                    first = i;
            }
        if (fresh && xt_slice_count(sl) + fresh > xt_slice_capacity(sl)) {
            *full = first;
            return 1;
        }
    }
    return 0;
}

/* Apply op i (checked). 0 or -errno (only -ENOMEM/-EOVERFLOW can happen). */
static int aop_apply(struct abatch *b, size_t i)
{
    const struct mds_aop *o = &b->ops[i];
    struct aslot *s = &b->s[i];
    xt_slice *sl = mds_cent_slice(s->e);
    int rc;
    switch (s->eff) {
    case MDS_AOP_CREATE:
        rc = o->derive ? xt_slice_insert(sl, o->name, o->name_len, s->h, s->nrow, s->nlen, 0,
                                         b->gen)
                       : xt_slice_insert(sl, o->name, o->name_len, s->h, o->row, o->row_len, 0,
                                         b->gen);
        return rc > 0 ? 0 : rc;
    case MDS_AOP_UPDATE:
        return xt_slice_update(sl, o->name, o->name_len, s->h, s->nrow, s->nlen, b->gen);
    case MDS_AOP_DELETE:
        rc = xt_slice_delete(sl, o->name, o->name_len, s->h, b->gen);
        if (rc == 0) /* its group frees (mds_cent_commit.removed; an undo
                        keeps the mark: at most the slack more) */
            mds_cent_commit(s->e)->removed = true;
        return rc;
    default:
        return 0;
    }
}

/* What op i adds to its fs (mds_usage_delta) into df[i], db[i], checked
 * against the quotas with the ops before it of the same fs (df, db[0..i)
 * already filled): 0 or -EDQUOT. */
static int aop_usage(mds_table *t, const struct abatch *b, size_t i, int64_t *df, int64_t *db)
{
    const struct mds_aop *o = &b->ops[i];
    const struct aslot *s = &b->s[i];
    df[i] = db[i] = 0;
    if (!t->o.usage || s->eff == MDS_AOP_CHECK)
        return 0;
    const void *nw = NULL;
    size_t nlen = 0;
    if (s->eff == MDS_AOP_CREATE) {
        nw = o->derive ? (const void *)s->nrow : o->row;
        nlen = o->derive ? s->nlen : o->row_len;
    } else if (s->eff == MDS_AOP_UPDATE) {
        nw = s->nrow;
        nlen = s->nlen;
    }
    mds_usage_delta(o->table, o->name, o->name_len, s->existed ? s->old : NULL,
                    s->existed ? s->old_len : 0, nw, nlen, &df[i], &db[i]);
    int64_t sf = df[i], sb = db[i];
    for (size_t k = 0; k < i; k++)
        if (b->ops[k].fsid == o->fsid) {
            sf += df[k];
            sb += db[k];
        }
    /* Only a growth this op brings is refused (mds_usage.h (3)). */
    return mds_usage_check(t->o.usage, o->fsid, df[i] > 0 ? sf : 0, db[i] > 0 ? sb : 0);
}

/* Put op i's row back as it was before the batch (undo after a failure
 * of a later op). */
static int aop_undo(struct abatch *b, size_t i)
{
    const struct mds_aop *o = &b->ops[i];
    struct aslot *s = &b->s[i];
    xt_slice *sl = mds_cent_slice(s->e);
    if (s->eff == MDS_AOP_CHECK)
        return 0;
    if (!s->existed)
        return xt_slice_delete(sl, o->name, o->name_len, s->h, b->gen);
    int rc = xt_slice_insert(sl, o->name, o->name_len, s->h, s->old, s->old_len, 0, b->gen);
    return rc > 0 ? 0 : rc;
}

int mds_table_atomic(mds_table *t, const struct mds_aop *ops, size_t n, size_t *failed,
                     uint64_t *gen)
{
    uint64_t t0 = xt_mono_ns();
    size_t fdummy;
    if (!failed)
        failed = &fdummy;
    int rc = atomic_validate(ops, n, failed);
    if (rc < 0)
        return rc;
    struct abatch *b = xt_calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    b->ops = ops;
    b->n = n;
    for (size_t i = 0; i < n && rc == 0; i++) {
        *failed = i;
        b->s[i].h = ops[i].h;
        rc = mds_table_tab_get(t, ops[i].fsid, ops[i].table, &b->s[i].m);
    }
    /* Each start-over follows a split (bounded by the depth of the tables)
     * or a group change (at most once per group): bounded in practice; the
     * cap only turns a bug into an error. */
    for (int round = 0; rc == 0; round++) {
        if (round == 4096) {
            XT_ERR("table: an atomic batch started over %d times", round);
            rc = -EAGAIN;
            break;
        }
        rc = round_begin(t, b, failed);
        if (rc == 1) {
            rc = 0;
            continue;
        }
        if (rc < 0)
            break;
        size_t full = 0;
        rc = round_check(b, failed, &full);
        if (rc == 1) {
            /* A slice is full: split it unlocked, then start over. */
            uint32_t need = 0;
            for (size_t i = 0; i < n; i++)
                need += b->s[i].e == b->s[full].e && b->s[i].eff == MDS_AOP_CREATE &&
                        !b->s[i].existed;
            struct mtab *m = b->s[full].m;
            uint64_t h = b->s[full].h;
            round_end(t, b, true, 0);
            if ((rc = mds_table_make_room(t, m, h, need)) < 0) {
                *failed = full;
                rc = rc == -ERANGE ? -ENOSPC : rc;
            }
            continue;
        }
        if (rc < 0) { /* a precondition: nothing was changed */
            round_end(t, b, true, 0);
            break;
        }
        int64_t df[MDS_ATOMIC_MAX], db[MDS_ATOMIC_MAX];
        for (size_t k = 0; rc == 0 && k < n; k++) {
            *failed = k;
            rc = aop_usage(t, b, k, df, db);
        }
        if (rc < 0) { /* over a quota: nothing was changed */
            round_end(t, b, true, 0);
            break;
        }
        size_t bytes = 0, i = 0;
        for (; rc == 0 && i < n; i++) {
            *failed = i;
            rc = aop_apply(b, i);
            bytes += ops[i].name_len + ops[i].row_len + b->s[i].nlen + 16;
        }
        if (rc < 0) {
            /* Only memory or a cookie-group overflow fails here: put the
             * ops before the failing one back, newest first. */
            for (size_t j = i - 1; j-- > 0;)
                if (aop_undo(b, j) < 0)
                    XT_ERR("table: undo of atomic op %zu failed: the batch is torn", j);
            bytes = 0;
        } else {
            for (size_t k = 0; k < n; k++)
                mds_usage_note(t->o.usage, ops[k].fsid, b->gen, df[k], db[k]);
            if (gen)
                *gen = b->gen;
        }
        /* A slice the batch grew past split_bytes: split after (as a
         * create or update does), no batch lock held. */
        struct mtab *bm[MDS_ATOMIC_MAX];
        uint64_t bh[MDS_ATOMIC_MAX];
        size_t nbig = 0;
        for (size_t k = 0; rc == 0 && k < n; k++) {
            bool seen = false;
            for (size_t j = 0; j < k && !seen; j++)
                seen = b->s[j].e == b->s[k].e;
            if (!seen && mds_table_big(t, mds_cent_slice(b->s[k].e))) {
                bm[nbig] = b->s[k].m;
                bh[nbig++] = b->s[k].h;
            }
        }
        round_end(t, b, true, bytes);
        for (size_t k = 0; k < nbig; k++)
            (void)mds_table_make_room(t, bm[k], bh[k], 0);
        break;
    }
    xt_free(b);
    mds_stats_record(t->o.stats, MDS_OP_UPDATE, xt_mono_ns() - t0, rc);
    return rc;
}
