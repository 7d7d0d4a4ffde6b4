/*
 * mds_group_recover.c -- the recovery side of the commit groups
 * (mds_group.h invariants 3-5): decision records, recovery at open, settling
 * the transactions a dead MDS left, and the participant set.
 *
 * Ring 1 may change (docs/mdsl-scale.md "Participants", "Decision records"): the participants
 * grow at run time (every MDSL that may hold a prepare of ours or of an MDS
 * we may settle for), and a site's decision record may sit at any of them
 * (a home that changed, a copy): records are images at version = txid, so
 * the highest txid found at any participant is the decision, and an older
 * copy elsewhere is harmless. Participants only grow: an MDSL leaves the set
 * when this MDS restarts without it.
 */
#include <string.h>

#include "mds_group_i.h"
#include "xt_common.h"
#include "xt_hash.h"

void mds_group_decision_encode(uint8_t *b, uint32_t site, uint32_t epoch, uint64_t txid)
{
    xt_put_u32(b + 0, MDS_DECISION_MAGIC);
    xt_put_u16(b + 4, 1);
    xt_put_u16(b + 6, 0);
    xt_put_u32(b + 8, site);
    xt_put_u32(b + 12, epoch);
    xt_put_u64(b + 16, txid);
    xt_put_u64(b + 24, xt_hash_bytes(b, 24, MDS_DECISION_SEED));
}

static int decision_decode(const uint8_t *b, size_t len, uint32_t site, uint32_t *epoch,
                           uint64_t *txid)
{
    if (len != MDS_DECISION_SIZE || xt_get_u32(b) != MDS_DECISION_MAGIC ||
        xt_get_u16(b + 4) != 1 || xt_get_u16(b + 6) != 0 ||
        xt_get_u64(b + 24) != xt_hash_bytes(b, 24, MDS_DECISION_SEED) ||
        xt_get_u32(b + 8) != site)
        return -EBADMSG;
    *epoch = xt_get_u32(b + 12);
    *txid = xt_get_u64(b + 16);
    return 0;
}

/* REQUIRES: mu held. */
static int parts_add_locked(mds_group *g, uint32_t site)
{
    for (size_t i = 0; i < g->nparts; i++)
        if (g->parts[i] == site)
            return 0;
    if (g->nparts == g->capparts) {
        size_t nc = g->capparts ? g->capparts * 2 : 8;
        uint32_t *np = xt_realloc(g->parts, nc * sizeof *np);
        if (!np)
            return -ENOMEM;
        g->parts = np;
        g->capparts = nc;
    }
    g->parts[g->nparts++] = site;
    return 0;
}

int mds_group_add_participant(mds_group *g, uint32_t site)
{
    pthread_mutex_lock(&g->mu);
    int rc = parts_add_locked(g, site);
    pthread_mutex_unlock(&g->mu);
    if (rc == 0)
        XT_DBG("group: site %u: participant %u", g->o.site_id, site);
    return rc;
}

int mds_group_drop_participant(mds_group *g, uint32_t site)
{
    if (site == g->o.home_site)
        return -EBUSY;
    pthread_mutex_lock(&g->mu);
    bool was = false;
    for (size_t i = 0; i < g->nparts && !was; i++)
        if (g->parts[i] == site) {
            g->parts[i] = g->parts[--g->nparts];
            was = true;
        }
    pthread_mutex_unlock(&g->mu);
    if (was)
        XT_INFO("group: site %u: MDSL %u drained, no longer a participant", g->o.site_id, site);
    return 0;
}

/* (A copy: no lock is held over the store calls that use it.) */
int mds_group_participants(mds_group *g, uint32_t **out, size_t *n)
{
    pthread_mutex_lock(&g->mu);
    *n = g->nparts;
    *out = xt_malloc((g->nparts ? g->nparts : 1) * sizeof **out);
    if (*out)
        memcpy(*out, g->parts, g->nparts * sizeof **out);
    pthread_mutex_unlock(&g->mu);
    return *out ? 0 : -ENOMEM;
}

/* The newest decision record of `site` at any participant (docs/mdsl-scale.md "Decision records"):
 * *epoch and *last stay 0 when none holds one. Any participant that cannot
 * answer fails the read: the newest record may be the one it holds. */
static int read_decision(mds_group *g, const uint32_t *parts, size_t np, uint32_t site,
                         uint32_t *epoch, uint64_t *last)
{
    *epoch = 0;
    *last = 0;
    for (size_t p = 0; p < np; p++) {
        struct mds_load ld;
        int rc = mds_store_load(g->o.store, parts[p], MDS_COORD_FSID, MDS_COORD_TABLE, site,
                                &ld);
        if (rc == -ENOENT)
            continue;
        if (rc < 0)
            return rc;
        uint32_t e = 0;
        uint64_t t = 0;
        if (!ld.has_image || ld.ndeltas)
            rc = -EBADMSG;
        else
            rc = decision_decode(ld.image.bytes, ld.image.len, site, &e, &t);
        mds_load_free(&ld);
        if (rc < 0) {
            XT_ERR("group: site %u: corrupt decision record at site %u", site, parts[p]);
            return rc;
        }
        if (t > *last) {
            *last = t;
            *epoch = e;
        }
    }
    return 0;
}

/* Invariant 4: settle every prepared txid of `site` at every participant
 * by its decision record: committed up to the last txid it names, aborted
 * after. *epoch_out and *last_out: what the record says (0: no record). */
static int settle(mds_group *g, uint32_t site, uint32_t *epoch_out, uint64_t *last_out)
{
    uint32_t *parts, epoch;
    size_t np;
    uint64_t last;
    int rc = mds_group_participants(g, &parts, &np);
    if (rc < 0)
        return rc;
    if ((rc = read_decision(g, parts, np, site, &epoch, &last)) < 0)
        goto out;
    for (size_t p = 0; p < np; p++) {
        uint64_t *tx;
        size_t n;
        if ((rc = mds_store_list_prepared(g->o.store, parts[p], &tx, &n)) < 0)
            goto out;
        for (size_t i = 0; i < n && rc >= 0; i++) {
            if (mds_txid_site(tx[i]) != site)
                continue;
            bool commit = tx[i] <= last;
            rc = commit ? mds_store_commit(g->o.store, parts[p], tx[i])
                        : mds_store_abort(g->o.store, parts[p], tx[i]);
            XT_INFO("group: recovery %s txid %llx of site %u at site %u: %d",
                    commit ? "commits" : "aborts", (unsigned long long)tx[i], site, parts[p],
                    rc);
            if (rc == -ENOENT) /* decided meanwhile or lost: nothing to do */
                rc = 0;
            if (rc == -EINVAL) {
                XT_ERR("group: txid %llx at site %u already went the other way",
                       (unsigned long long)tx[i], parts[p]);
                rc = 0;
            }
            mds_stats_add(g->o.stats, commit ? MDS_CTR_RECOVER_COMMITS
                                             : MDS_CTR_RECOVER_ABORTS, 1);
        }
        xt_free(tx);
        if (rc < 0)
            goto out;
    }
    *epoch_out = epoch;
    *last_out = last;
out:
    xt_free(parts);
    return rc;
}

int mds_group_recover(mds_group *g, uint32_t *epoch_out)
{
    uint32_t epoch;
    uint64_t last;
    int rc = settle(g, g->o.site_id, &epoch, &last);
    if (rc < 0)
        return rc;
    g->last_txid = last;
    uint32_t le = mds_txid_epoch(last);
    *epoch_out = epoch > le ? epoch : le;
    return 0;
}

int mds_group_settle_site(mds_group *g, uint32_t site)
{
    uint32_t epoch;
    uint64_t last;
    return site == g->o.site_id ? -EINVAL : settle(g, site, &epoch, &last);
}
