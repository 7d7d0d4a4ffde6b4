/*
 * mds_usage.c -- per-fs counts of this MDS's committed changes, and quota
 * checks (mds_usage.h; docs/r2.md "Capacity and quotas").
 *
 * Counts wait in `pend` (one entry per generation and fs, in generation
 * order) until the group has committed their generation; mds_usage_stats
 * moves them to `sum` (this incarnation's running sums) and snapshots what
 * it sends in `sent`; the reply's totals hold `sent` (mds_usage_capacity
 * copies it to `acked`), so the figure a quota check uses is
 * total + (sum - acked) + pend.
 */
#include "mds_usage.h"

#include "xt_common.h"
#include "xt_hash.h"
#include "xt_ns.h"
#include "xt_row.h"
#include "xt_rpc_r2.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

struct pend {
    uint64_t gen;
    uint32_t fsid;
    int64_t files, bytes;
};

/* Per fs: running sums of committed counts, what the last heartbeat sent,
 * what the last reply's totals hold, and those totals and quotas. */
struct fsu {
    uint32_t fsid;
    int64_t sum_f, sum_b, sent_f, sent_b, acked_f, acked_b;
    uint64_t tot_f, tot_b, quota_f, quota_b;
};

struct mds_usage {
    pthread_mutex_t mu;
    uint64_t epoch;
    mds_group *group;      /* protected by mu; NULL until the group opens, and
                              again before it closes (mds_usage_set_group) */
    struct pend *pend;     /* protected by mu; by generation */
    size_t npend, cpend;
    struct fsu *fs;        /* protected by mu */
    size_t nfs;
};

int mds_usage_new(mds_usage **out)
{
    mds_usage *u = xt_calloc(1, sizeof *u);
    if (!u)
        return -ENOMEM;
    if (getrandom(&u->epoch, sizeof u->epoch, 0) != (ssize_t)sizeof u->epoch)
        u->epoch = xt_now_ns();
    u->epoch |= 1; /* never 0 */
    pthread_mutex_init(&u->mu, NULL);
    *out = u;
    return 0;
}

void mds_usage_free(mds_usage *u)
{
    if (!u)
        return;
    pthread_mutex_destroy(&u->mu);
    xt_free(u->pend);
    xt_free(u->fs);
    xt_free(u);
}

void mds_usage_set_group(mds_usage *u, mds_group *g)
{
    pthread_mutex_lock(&u->mu);
    u->group = g;
    pthread_mutex_unlock(&u->mu);
}

static void row_counts(const void *row, size_t len, int64_t *files, int64_t *bytes)
{
    *files = *bytes = 0;
    xt_row r;
    /* A hard link's names (link stubs, or REF rows) are no inodes: the ILT
     * row holding the attributes is (docs/client.md "Hard links"). */
    if (!row || xt_row_decode_meta(row, len, &r) < 0 || r.attr.type == XT_ROW_REF ||
        (r.attr.flags & XT_NS_ROW_F_LINKED))
        return;
    *files = 1;
    if (r.attr.type == XT_ROW_REG || r.attr.type == XT_ROW_SYMLINK)
        *bytes = r.attr.size > INT64_MAX ? INT64_MAX : (int64_t)r.attr.size;
    else if (r.attr.type == XT_ROW_KV)
        *bytes = (int64_t)len;
}

void mds_usage_delta(uint64_t table, const void *name, size_t name_len, const void *old,
                     size_t old_len, const void *nw, size_t nw_len, int64_t *files,
                     int64_t *bytes)
{
    *files = *bytes = 0;
    if (table == XT_NS_TABLE_SUPER || table == XT_NS_TABLE_GDT || xt_hash_is_sys(name, name_len))
        return;
    int64_t of, ob, nf, nb;
    row_counts(old, old_len, &of, &ob);
    row_counts(nw, nw_len, &nf, &nb);
    *files = nf - of;
    *bytes = nb - ob;
}

/* REQUIRES: u->mu. The entry of fsid (made when absent); NULL: -ENOMEM. */
static struct fsu *fs_get(mds_usage *u, uint32_t fsid)
{
    assert(xt_mutex_held(&u->mu));
    for (size_t i = 0; i < u->nfs; i++)
        if (u->fs[i].fsid == fsid)
            return &u->fs[i];
    struct fsu *a = xt_realloc(u->fs, (u->nfs + 1) * sizeof *a);
    if (!a)
        return NULL;
    u->fs = a;
    memset(&a[u->nfs], 0, sizeof a[0]);
    a[u->nfs].fsid = fsid;
    return &a[u->nfs++];
}

int mds_usage_check(mds_usage *u, uint32_t fsid, int64_t files, int64_t bytes)
{
    if (!u || (files <= 0 && bytes <= 0))
        return 0; /* invariant 3 */
    int rc = 0;
    pthread_mutex_lock(&u->mu);
    const struct fsu *f = NULL;
    for (size_t i = 0; i < u->nfs && !f; i++)
        if (u->fs[i].fsid == fsid)
            f = &u->fs[i];
    if (f && (f->quota_f || f->quota_b)) {
        int64_t lf = f->sum_f - f->acked_f, lb = f->sum_b - f->acked_b;
        for (size_t i = 0; i < u->npend; i++)
            if (u->pend[i].fsid == fsid) {
                lf += u->pend[i].files;
                lb += u->pend[i].bytes;
            }
        if (files > 0 && f->quota_f && (int64_t)f->tot_f + lf + files > (int64_t)f->quota_f)
            rc = -EDQUOT;
        if (bytes > 0 && f->quota_b && (int64_t)f->tot_b + lb + bytes > (int64_t)f->quota_b)
            rc = -EDQUOT;
    }
    pthread_mutex_unlock(&u->mu);
    return rc;
}

void mds_usage_note(mds_usage *u, uint32_t fsid, uint64_t gen, int64_t files, int64_t bytes)
{
    if (!u || (files == 0 && bytes == 0))
        return;
    pthread_mutex_lock(&u->mu);
    /* Writers of one generation come together: most notes extend the last
     * entry, or one of the few before it. */
    struct pend *p = NULL;
    for (size_t i = u->npend; i-- > 0 && u->pend[i].gen == gen && !p;)
        if (u->pend[i].fsid == fsid)
            p = &u->pend[i];
    if (!p) {
        if (u->npend == u->cpend) {
            size_t c = u->cpend ? 2 * u->cpend : 64;
            struct pend *a = xt_realloc(u->pend, c * sizeof *a);
            if (!a) {
                pthread_mutex_unlock(&u->mu);
                XT_WARN("usage: out of memory: a change goes uncounted (fsck corrects it)");
                return;
            }
            u->pend = a;
            u->cpend = c;
        }
        /* Generations only grow, but a writer entered in an older group
         * may note after one of a newer: keep the array in order. */
        size_t i = u->npend;
        while (i > 0 && u->pend[i - 1].gen > gen)
            i--;
        memmove(&u->pend[i + 1], &u->pend[i], (u->npend - i) * sizeof *p);
        u->npend++;
        p = &u->pend[i];
        *p = (struct pend){ .gen = gen, .fsid = fsid };
    }
    p->files += files;
    p->bytes += bytes;
    pthread_mutex_unlock(&u->mu);
}

size_t mds_usage_stats(void *arg, double *load, struct xt_fs_counter *c, size_t cap)
{
    mds_usage *u = arg;
    (void)load;
    /* The group's lock is never taken under mu: writers hold slice locks
     * when they take mu. */
    pthread_mutex_lock(&u->mu);
    mds_group *g = u->group;
    pthread_mutex_unlock(&u->mu);
    uint64_t committed = 0;
    if (g) {
        struct mds_group_info gi;
        mds_group_info(g, &gi);
        committed = gi.committed_gen;
    }
    pthread_mutex_lock(&u->mu);
    size_t k = 0;
    for (; k < u->npend && u->pend[k].gen <= committed; k++) {
        struct fsu *f = fs_get(u, u->pend[k].fsid);
        if (!f)
            break; /* kept for the next heartbeat */
        f->sum_f += u->pend[k].files;
        f->sum_b += u->pend[k].bytes;
    }
    if (k) { /* (pend may be NULL when empty: memmove wants a pointer) */
        memmove(u->pend, u->pend + k, (u->npend - k) * sizeof *u->pend);
        u->npend -= k;
    }
    size_t n = 0;
    for (size_t i = 0; i < u->nfs && n < cap; i++) {
        struct fsu *f = &u->fs[i];
        f->sent_f = f->sum_f;
        f->sent_b = f->sum_b;
        if (f->sum_f || f->sum_b)
            c[n++] = (struct xt_fs_counter){ .fsid = f->fsid, .files = f->sum_f,
                                             .bytes = f->sum_b };
    }
    pthread_mutex_unlock(&u->mu);
    return n;
}

void mds_usage_hb(void *arg, struct xt_r2_hb_usage *hu)
{
    mds_usage *u = arg;
    hu->has_epoch = true;
    hu->epoch = u->epoch; /* fixed at mds_usage_new */
}

void mds_usage_capacity(void *arg, const struct xt_capacity *c)
{
    mds_usage *u = arg;
    pthread_mutex_lock(&u->mu);
    for (size_t i = 0; i < u->nfs; i++) {
        u->fs[i].acked_f = u->fs[i].sent_f;
        u->fs[i].acked_b = u->fs[i].sent_b;
    }
    for (size_t i = 0; i < c->nfs; i++) {
        const struct xt_fs_usage *r = &c->fs[i];
        struct fsu *f = fs_get(u, r->fsid);
        if (!f)
            break;
        f->tot_f = r->files;
        f->tot_b = r->bytes;
        f->quota_f = r->quota_files;
        f->quota_b = r->quota_bytes;
    }
    pthread_mutex_unlock(&u->mu);
}
