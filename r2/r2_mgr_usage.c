/*
 * r2_mgr_usage.c -- capacity at R2 (docs/r2.md "Capacity and quotas"): the
 * storage the MDSL report, and the inodes and bytes of every fs, rolled up
 * from the counts the MDS heartbeat.
 *
 * An MDS counts what its committed changes add to each fs since its
 * incarnation began (mds/mds_usage.h) and sends the running sums, with the
 * incarnation, in every heartbeat. R2 keeps per fs the totals and, per MDS,
 * the sums of its incarnation that the totals include:
 *
 *   same incarnation as recorded:  totals += sums - recorded; recorded = sums
 *   another (or none recorded):    totals += sums;            recorded = sums
 *
 * Invariants:
 *  (1) A heartbeat's sums replace what they supersede: a lost or repeated
 *      heartbeat changes nothing once a later one arrives, so the totals
 *      are exact while every MDS incarnation's last committed changes were
 *      reported.
 *  (2) /r2/usage holds totals and recorded sums together, written as one
 *      record (r2_usage_flush): a new leader that loads it and hears the
 *      same incarnations again is exact. Lost are only the changes an
 *      incarnation reported after the last flush and before it ended, when
 *      R2 lost its memory in between (a leader change or restart within
 *      the flush interval, together with an MDS restart).
 *  (3) st->usage is sorted by fsid, each entry's sites by id; it holds
 *      only fs of st->fs (r2_usage_drop when one is dropped).
 */
#include "r2_mgr_i.h"

#include "xt_common.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

const struct r2_usage *r2_usage_of(const struct r2_state *st, uint32_t fsid)
{
    for (size_t i = 0; i < st->nusage; i++)
        if (st->usage[i].fsid == fsid)
            return &st->usage[i];
    return NULL;
}

static bool fs_known(const struct r2_state *st, uint32_t fsid)
{
    for (size_t i = 0; i < st->nfs; i++)
        if (st->fs[i].fsid == fsid)
            return true;
    return false;
}

/* The entry of fsid, made (zero) when absent. NULL: -ENOMEM. */
static struct r2_usage *usage_get(struct r2_state *st, uint32_t fsid)
{
    size_t i = 0;
    while (i < st->nusage && st->usage[i].fsid < fsid)
        i++;
    if (i < st->nusage && st->usage[i].fsid == fsid)
        return &st->usage[i];
    struct r2_usage *a = xt_realloc(st->usage, (st->nusage + 1) * sizeof *a);
    if (!a)
        return NULL;
    st->usage = a;
    memmove(&a[i + 1], &a[i], (st->nusage - i) * sizeof *a);
    memset(&a[i], 0, sizeof a[i]);
    a[i].fsid = fsid;
    st->nusage++;
    return &a[i];
}

/* The record of site in u, made (zero, epoch 0) when absent. NULL: -ENOMEM. */
static struct r2_usage_site *site_get(struct r2_usage *u, uint32_t site, bool *made)
{
    size_t i = 0;
    *made = false;
    while (i < u->ns && u->s[i].site < site)
        i++;
    if (i < u->ns && u->s[i].site == site)
        return &u->s[i];
    struct r2_usage_site *a = xt_realloc(u->s, (u->ns + 1) * sizeof *a);
    if (!a)
        return NULL;
    u->s = a;
    memmove(&a[i + 1], &a[i], (u->ns - i) * sizeof *a);
    memset(&a[i], 0, sizeof a[i]);
    a[i].site = site;
    u->ns++;
    *made = true;
    return &a[i];
}

int r2_usage_beat(r2_mgr *m, uint32_t site, uint64_t epoch, const struct xt_fs_counter *c,
                  size_t n)
{
    assert(xt_mutex_held(&m->mu));
    for (size_t i = 0; i < n; i++) {
        if (!fs_known(&m->st, c[i].fsid))
            continue; /* dropped, or not yet in this state */
        struct r2_usage *u = usage_get(&m->st, c[i].fsid);
        bool made = false;
        struct r2_usage_site *e = u ? site_get(u, site, &made) : NULL;
        if (!e)
            return -ENOMEM;
        bool same = !made && e->epoch == epoch;
        int64_t df = c[i].files - (same ? e->files : 0);
        int64_t db = c[i].bytes - (same ? e->bytes : 0);
        if (same && df == 0 && db == 0)
            continue;
        u->files += df;
        u->bytes += db;
        *e = (struct r2_usage_site){ .site = site, .epoch = epoch, .files = c[i].files,
                                     .bytes = c[i].bytes };
        m->usage_dirty = true;
    }
    return 0;
}

int r2_usage_set(r2_mgr *m, uint32_t fsid, int64_t files, int64_t bytes)
{
    assert(xt_mutex_held(&m->mu));
    struct r2_usage *u = usage_get(&m->st, fsid);
    if (!u)
        return -ENOMEM;
    u->files = files;
    u->bytes = bytes;
    m->usage_dirty = true;
    return 0;
}

void r2_usage_drop(struct r2_state *st, uint32_t fsid)
{
    for (size_t i = 0; i < st->nusage; i++)
        if (st->usage[i].fsid == fsid) {
            xt_free(st->usage[i].s);
            memmove(&st->usage[i], &st->usage[i + 1],
                    (st->nusage - i - 1) * sizeof st->usage[0]);
            st->nusage--;
            return;
        }
}

/* Whether the addresses a and b name one host (the part before the last ':'). */
static bool same_host(const char *a, const char *b)
{
    const char *ca = strrchr(a, ':'), *cb = strrchr(b, ':');
    size_t la = ca ? (size_t)(ca - a) : strlen(a), lb = cb ? (size_t)(cb - b) : strlen(b);
    return la == lb && memcmp(a, b, la) == 0;
}

int r2_usage_capacity(const struct r2_state *st, const struct r2_site_ent *to,
                      struct xt_capacity *cap)
{
    memset(cap, 0, sizeof *cap);
    /* One disk counts once: MDSL of one host on one st_dev share it. */
    const struct r2_site_ent *counted[XT_CAPACITY_DEVS_MAX];
    for (size_t i = 0; i < st->nsites; i++) {
        const struct r2_site_ent *e = &st->sites[i];
        if (!e->has_storage || e->s.type != XT_SITE_MDSL || e->s.state == XT_SITE_FAILED)
            continue;
        bool seen = false;
        for (size_t k = 0; k < cap->ndevs && !seen; k++)
            seen = counted[k]->storage.dev == e->storage.dev &&
                   same_host(counted[k]->s.addr, e->s.addr);
        if (seen)
            continue;
        cap->size += e->storage.size;
        cap->avail += e->storage.avail;
        if (cap->ndevs < XT_ARRAY_SIZE(cap->devs)) {
            counted[cap->ndevs] = e;
            cap->devs[cap->ndevs++] = e->storage.dev;
        }
    }
    /* An MDS checks the quotas of every fs; a client needs its own fs's
     * figures; an MDSL none. */
    bool client = to && to->s.type == XT_SITE_CLIENT;
    if (to && to->s.type != XT_SITE_MDS && !client) {
        cap->valid = true;
        return 0;
    }
    if (st->nfs) {
        cap->fs = xt_calloc(client ? 1 : st->nfs, sizeof *cap->fs);
        if (!cap->fs)
            return -ENOMEM;
    }
    for (size_t i = 0; i < st->nfs; i++) {
        if (client && strcmp(st->fs[i].name, to->s.fs_name) != 0)
            continue;
        const struct r2_usage *u = r2_usage_of(st, st->fs[i].fsid);
        cap->fs[cap->nfs++] = (struct xt_fs_usage){
            .fsid = st->fs[i].fsid,
            .files = u && u->files > 0 ? (uint64_t)u->files : 0,
            .bytes = u && u->bytes > 0 ? (uint64_t)u->bytes : 0,
            .quota_files = st->fs[i].quota_files,
            .quota_bytes = st->fs[i].quota_bytes,
        };
        if (client)
            break;
    }
    cap->valid = true;
    return 0;
}

/* REQUIRES: mu. Forgets the recorded sums of sites no longer in st: their
 * incarnations never report again (the totals keep what they added). */
static void prune(struct r2_state *st)
{
    for (size_t i = 0; i < st->nusage; i++) {
        struct r2_usage *u = &st->usage[i];
        size_t k = 0;
        for (size_t j = 0; j < u->ns; j++)
            if (r2_state_site(st, u->s[j].site))
                u->s[k++] = u->s[j];
        u->ns = k;
    }
}

void r2_usage_flush(r2_mgr *m, uint64_t now)
{
    assert(xt_mutex_held(&m->wmu) && m->st_valid);
    if (now - m->last_flush < m->flush_ns)
        return;
    m->last_flush = now;
    void *buf = NULL;
    size_t len = 0;
    pthread_mutex_lock(&m->mu);
    bool dirty = m->usage_dirty;
    int rc = 0;
    if (dirty) {
        prune(&m->st);
        rc = r2_rec_usage_encode(m->st.usage, m->st.nusage, &buf, &len);
        m->usage_dirty = false;
    }
    pthread_mutex_unlock(&m->mu);
    if (!dirty)
        return;
    struct r2_txn t = { .n = 0 };
    if (rc == 0 && (rc = r2_txn_put(&t, R2_KEY_USAGE, buf, len)) == 0) /* takes buf */
        rc = r2_txn_commit(m, &t, 0);
    r2_txn_free(&t);
    if (rc < 0) {
        XT_WARN("cannot write %s: %s; retrying", R2_KEY_USAGE, strerror(-rc));
        pthread_mutex_lock(&m->mu);
        m->usage_dirty = true;
        pthread_mutex_unlock(&m->mu);
    }
}

int r2_usage_load(r2_store *store, struct r2_state *st)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = r2_store_get(store, R2_KEY_USAGE, &buf, &len, NULL);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    rc = r2_rec_usage_decode(buf, len, &st->usage, &st->nusage);
    xt_free(buf);
    if (rc == -EBADMSG) {
        XT_ERR("corrupt record %s", R2_KEY_USAGE);
        return -EIO;
    }
    return rc;
}
