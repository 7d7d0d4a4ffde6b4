/*
 * mds_group_tx.c -- one commit group's transaction over the MDSL: records
 * gathered per site (mds_group_i.h struct mds_group_tx), the decision
 * record added at the home, then the two-phase commit: every participant
 * prepares in parallel, the home commits (the commit point), then the
 * others, retried until they answer; an abort is resolved at every site
 * (presumed abort). Also the txid counter (epochs, invariant 5) and the
 * storage-error streak syncers are told of. Split from mds_group.c, which
 * closes groups and snapshots their slices (mds_group.h has the states and
 * invariants, docs/mds-commit.md the protocol).
 *
 * The fault tests' POM_MDS_MOVE_CRASH kills the MDS inside the 2PC of the
 * first transaction that moves a slice (move_crash_point): `prepared` after
 * every vote, `decided` after the home's commit, `x_committed` after the
 * old sites of the moves (batches holding a MOVED tombstone) committed,
 * which phase 2 then commits first (only while the variable says so).
 *
 * Threads: only the committer thread (or open, before it starts) runs a
 * transaction; the batch threads of one round each own their batch. No
 * lock is held across a store call.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "mds_group_i.h"
#include "xt_common.h"

enum { OP_PREPARE, OP_COMMIT, OP_ABORT };

static int batch_add(struct mds_group_batch *b, const struct xt_store_rec *r)
{
    if (b->n == b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 8;
        struct xt_store_rec *nr = xt_realloc(b->recs, nc * sizeof *nr);
        if (!nr)
            return -ENOMEM;
        b->recs = nr;
        b->cap = nc;
    }
    b->recs[b->n++] = *r;
    return 0;
}

static void *batch_run(void *arg)
{
    struct mds_group_batch *b = arg;
    mds_group *g = b->g;
    uint64_t t0 = xt_mono_ns();
    switch (b->op) {
    case OP_PREPARE:
        b->rc = mds_store_prepare(g->o.store, b->site, b->txid, b->recs, b->n);
        mds_stats_record(g->o.stats, MDS_OP_PREPARE, xt_mono_ns() - t0, b->rc);
        break;
    case OP_COMMIT:
        b->rc = mds_store_commit(g->o.store, b->site, b->txid);
        if (b->rc == -ENOENT) {
            /* The participant lost its prepare (it had not made it durable):
             * we still hold the records, so prepare again and commit. */
            XT_WARN("group: site %u lost prepared txid %llx; preparing again", b->site,
                    (unsigned long long)b->txid);
            b->rc = mds_store_prepare(g->o.store, b->site, b->txid, b->recs, b->n);
            if (b->rc == 0)
                b->rc = mds_store_commit(g->o.store, b->site, b->txid);
        }
        mds_stats_record(g->o.stats, MDS_OP_COMMIT, xt_mono_ns() - t0, b->rc);
        break;
    case OP_ABORT:
        b->rc = mds_store_abort(g->o.store, b->site, b->txid);
        break;
    }
    return NULL;
}

/* Run op on the batches whose `sel` flag is set, in parallel unless
 * serial_prepare (threads cost little next to a network round trip). */
static void run_batches(mds_group *g, struct mds_group_batch *b, size_t nb, const bool *sel, int op)
{
    pthread_t tid[nb ? nb : 1];
    bool started[nb ? nb : 1];
    memset(tid, 0, sizeof tid);
    memset(started, 0, sizeof started);
    size_t first = nb;
    for (size_t i = 0; i < nb; i++) {
        started[i] = false;
        if (!sel[i])
            continue;
        b[i].op = op;
        if (first == nb) {
            first = i; /* run by this thread */
            continue;
        }
        if (!g->o.serial_prepare && pthread_create(&tid[i], NULL, batch_run, &b[i]) == 0)
            started[i] = true;
    }
    if (first < nb)
        batch_run(&b[first]);
    for (size_t i = first + 1; i < nb; i++) {
        if (!sel[i])
            continue;
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            batch_run(&b[i]);
    }
}

/* An error a commit cannot get past by retrying at once: the MDSL's
 * storage (full disk, failed device, a store that refuses writes after a
 * failed fsync until restarted) or memory (at the MDSL or here). Syncers
 * are told at once instead of waiting out their timeout (the commits are
 * still retried). Transport errors (an MDSL restarting) are not among them:
 * syncers keep waiting for those. */
static bool storage_error(int rc)
{
    return rc == -ENOSPC || rc == -EDQUOT || rc == -EIO || rc == -EROFS || rc == -ENOMEM;
}

void mds_group_note_storage_error(mds_group *g, int rc)
{
    if (!storage_error(rc))
        return;
    if (rc == -ENOSPC)
        atomic_store(&g->enospc_until, xt_mono_ns() + MDS_GROUP_ENOSPC_HOLD_NS);
    pthread_mutex_lock(&g->mu);
    g->storage_err = rc;
    g->storage_errs++;
    if (++g->storage_streak >= MDS_GROUP_STORAGE_ERR_TRIES)
        pthread_cond_broadcast(&g->cv_done);
    pthread_mutex_unlock(&g->mu);
}

/* Abort txid at every batch's site until each answers (presumed abort). */
static int resolve_abort(mds_group *g, struct mds_group_batch *b, size_t nb)
{
    bool sel[nb ? nb : 1];
    memset(sel, 1, sizeof sel);
    for (;;) {
        run_batches(g, b, nb, sel, OP_ABORT);
        bool more = false;
        for (size_t i = 0; i < nb; i++) {
            if (!sel[i])
                continue;
            if (b[i].rc == 0 || b[i].rc == -ENOENT) {
                sel[i] = false;
            } else if (b[i].rc == -EINVAL) {
                /* Committed although we never decided commit: a participant
                 * broke its promises. Nothing here can repair it. */
                XT_ERR("group: site %u committed txid %llx that was aborted", b[i].site,
                       (unsigned long long)b[i].txid);
                sel[i] = false;
            } else {
                more = true;
            }
        }
        if (!more)
            return 0;
        if (mds_group_stopping(g))
            return -ESHUTDOWN; /* left prepared: the next recovery aborts it */
        for (size_t i = 0; i < nb; i++)
            if (sel[i])
                mds_group_note_storage_error(g, b[i].rc);
        mds_group_sleep_ms(g->o.retry_ms ? g->o.retry_ms : MDS_GROUP_RETRY_MS);
    }
}

/* The fault tests' POM_MDS_MOVE_CRASH: SIGKILL itself at `where` of the
 * first transaction that carries a move (some batch holds a tombstone). */
static void move_crash_point(const mds_group *g, const struct mds_group_batch *b, size_t nb,
                             const char *where)
{
    if (!g->move_crash || strcmp(g->move_crash, where) != 0)
        return;
    for (size_t i = 0; i < nb; i++) {
        if (b[i].moved_out) {
            XT_WARN("group: txid %llx: crash point %s (POM_MDS_MOVE_CRASH)",
                    (unsigned long long)b[i].txid, where);
            raise(SIGKILL);
        }
    }
}

/* Run one transaction. b[home] holds the decision record. 0: committed
 * everywhere; -ESHUTDOWN: abandoned (maybe in doubt, recovery decides);
 * other < 0: aborted everywhere (the first prepare error). */
static int tx_run(mds_group *g, uint64_t txid, struct mds_group_batch *b, size_t nb, size_t home)
{
    bool sel[nb ? nb : 1], only_home[nb ? nb : 1];
    memset(sel, 0, sizeof sel);
    memset(only_home, 0, sizeof only_home);
    for (size_t i = 0; i < nb; i++) {
        b[i].g = g;
        b[i].txid = txid;
        sel[i] = true;
    }
    /* Phase 1: every participant makes the records durable, invisible. */
    run_batches(g, b, nb, sel, OP_PREPARE);
    int err = 0;
    for (size_t i = 0; i < nb && !err; i++)
        err = b[i].rc;
    if (err) {
        /* A full MDSL refuses every retry of a growing group: its line
         * would fill the same disk (docs/format-mdsl.md "A full disk"). */
        if (err == -ENOSPC)
            XT_INFO_RL(10000, "group: txid %llx: prepare failed: no room on an MDSL, aborting",
                       (unsigned long long)txid);
        else
            XT_INFO("group: txid %llx: prepare failed (%d), aborting",
                    (unsigned long long)txid, err);
        int rc = resolve_abort(g, b, nb);
        return rc == -ESHUTDOWN ? rc : err;
    }
    move_crash_point(g, b, nb, "prepared");
    if (mds_group_stopping(g))
        return -ESHUTDOWN; /* before the commit point: recovery aborts */

    /* The commit point: home commits the decision record. */
    for (size_t i = 0; i < nb; i++)
        only_home[i] = i == home;
    run_batches(g, b, nb, only_home, OP_COMMIT);
    for (unsigned tries = 0; b[home].rc != 0; tries++) {
        /* Unknown outcome: an abort tells which way it went (promise 3). */
        int rc = mds_store_abort(g->o.store, b[home].site, txid);
        if (rc == -EINVAL)
            break; /* it had committed */
        if (rc == 0 || rc == -ENOENT) {
            /* Aborted at home: abort the others too. */
            for (size_t i = 0; i < nb; i++)
                if (i != home && resolve_abort(g, &b[i], 1) == -ESHUTDOWN)
                    return -ESHUTDOWN;
            return b[home].rc < 0 ? b[home].rc : -EIO;
        }
        if (mds_group_stopping(g))
            return -ESHUTDOWN;
        /* In doubt (e.g. home's store refuses writes after a failed fsync
         * until it is restarted): only home can tell, so keep asking, but
         * let the syncers go with the error meanwhile. */
        mds_group_note_storage_error(g, storage_error(rc) ? rc : b[home].rc);
        if (tries % 500 == 0) /* about every 10 s: an operator must act */
            XT_WARN("group: txid %llx in doubt: site %u answers %d to commit, %d to abort; "
                    "retrying", (unsigned long long)txid, b[home].site, b[home].rc, rc);
        mds_group_sleep_ms(g->o.retry_ms ? g->o.retry_ms : MDS_GROUP_RETRY_MS);
    }

    move_crash_point(g, b, nb, "decided");
    /* Phase 2: decided. Every other participant must commit; retry. Under
     * the x_committed crash point the old sites (tombstones) go first. */
    bool x_first = g->move_crash && strcmp(g->move_crash, "x_committed") == 0;
    for (size_t i = 0; i < nb; i++)
        sel[i] = i != home && (!x_first || b[i].moved_out);
    for (;;) {
        run_batches(g, b, nb, sel, OP_COMMIT);
        bool more = false;
        for (size_t i = 0; i < nb; i++) {
            if (!sel[i])
                continue;
            if (b[i].rc == 0) {
                sel[i] = false;
            } else if (b[i].rc == -EINVAL) {
                XT_ERR("group: site %u aborted txid %llx after voting yes", b[i].site,
                       (unsigned long long)txid);
                sel[i] = false;
            } else {
                more = true;
            }
        }
        if (!more && x_first) {
            move_crash_point(g, b, nb, "x_committed");
            x_first = false; /* no move in it: the others now */
            for (size_t i = 0; i < nb; i++)
                sel[i] = i != home && !b[i].moved_out;
            continue;
        }
        if (!more)
            return 0;
        if (mds_group_stopping(g))
            return -ESHUTDOWN; /* committed at home: recovery finishes it */
        for (size_t i = 0; i < nb; i++)
            if (sel[i])
                mds_group_note_storage_error(g, b[i].rc);
        mds_group_sleep_ms(g->o.retry_ms ? g->o.retry_ms : MDS_GROUP_RETRY_MS);
    }
}

void mds_group_tx_free(struct mds_group_tx *t)
{
    for (size_t i = 0; i < t->nb; i++)
        xt_free(t->b[i].recs);
    xt_free(t->b);
    t->b = NULL;
    t->nb = 0;
}

/* Index of site's batch, adding one if needed; -ENOMEM. */
static long batch_for(struct mds_group_tx *t, uint32_t site)
{
    for (size_t i = 0; i < t->nb; i++)
        if (t->b[i].site == site)
            return (long)i;
    struct mds_group_batch *n = xt_realloc(t->b, (t->nb + 1) * sizeof *n);
    if (!n)
        return -ENOMEM;
    memset(&n[t->nb], 0, sizeof n[t->nb]);
    n[t->nb].site = site;
    t->b = n;
    return (long)t->nb++;
}

int mds_group_tx_add(struct mds_group_tx *t, uint32_t site, const struct xt_store_rec *r)
{
    long bi = batch_for(t, site);
    int rc = bi < 0 ? (int)bi : batch_add(&t->b[bi], r);
    if (rc == 0 && (r->flags & XT_STORE_F_MOVED))
        t->b[bi].moved_out = true;
    return rc;
}

int mds_group_tx_commit(mds_group *g, uint64_t txid, struct mds_group_tx *t)
{
    uint8_t dec[MDS_DECISION_SIZE];
    mds_group_decision_encode(dec, g->o.site_id, mds_txid_epoch(txid), txid);
    struct xt_store_rec r = {
        .type = XT_STORE_IMAGE,
        .id = { .fsid = MDS_COORD_FSID, .slice = g->o.site_id, .table = MDS_COORD_TABLE },
        .version = txid, .data = dec, .len = sizeof dec,
    };
    long home = batch_for(t, g->o.home_site);
    int rc = home < 0 ? (int)home : batch_add(&t->b[home], &r);
    for (size_t i = 0; i < t->nb && rc == 0; i++)
        for (size_t j = 0; j < t->b[i].n; j++)
            if (t->reserve)
                t->b[i].recs[j].flags |= XT_STORE_F_RESERVE;
    if (rc == 0)
        rc = tx_run(g, txid, t->b, t->nb, (size_t)home);
    mds_group_tx_free(t);
    if (rc == 0) {
        pthread_mutex_lock(&g->mu);
        g->last_txid = txid;
        pthread_mutex_unlock(&g->mu);
    }
    return rc;
}

int mds_group_claim_epoch(mds_group *g, uint32_t prev_epoch)
{
    uint32_t epoch = prev_epoch + 1;
    if (epoch >= (1u << MDS_TXID_EPOCH_BITS)) {
        XT_ERR("group: site %u exhausted its txid epochs", g->o.site_id);
        return -EOVERFLOW;
    }
    /* Only the decision record, which replaces the last one: it adds
     * nothing, so an MDS starts on a full disk too. */
    struct mds_group_tx none = { .reserve = true };
    int rc = mds_group_tx_commit(g, mds_txid_make(g->o.site_id, epoch, 0), &none);
    if (rc == 0) {
        g->epoch = epoch;
        g->seq = 0;
    }
    return rc;
}

int mds_group_next_txid(mds_group *g, uint64_t *txid)
{
    if (g->seq + 1 >= (1u << MDS_TXID_SEQ_BITS)) {
        int rc = mds_group_claim_epoch(g, g->epoch);
        if (rc < 0)
            return rc;
    }
    *txid = mds_txid_make(g->o.site_id, g->epoch, ++g->seq);
    return 0;
}
