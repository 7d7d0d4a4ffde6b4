/*
 * mds_group_i.h -- internals shared by mds_group.c (writers, snapshots, the
 * committer), mds_group_tx.c (one group's two-phase commit, txids) and
 * mds_group_recover.c (decision records, recovery, settling another MDS's
 * transactions, participants).
 * Not for callers outside those files; the invariants are mds_group.h's.
 */
#ifndef MDS_GROUP_I_H
#define MDS_GROUP_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "mds_group.h"

#define MDS_GROUP_RETRY_MS 20u        /* default pause before a retry */
#define MDS_GROUP_STORAGE_ERR_TRIES 5u /* attempts in a row before syncers hear of it */
/* After a commit answered -ENOSPC, writes that add data are refused this
 * long (mds_group_space_short): a liveness bound for writes to resume once
 * space is back, not a speed. */
#define MDS_GROUP_ENOSPC_HOLD_NS (UINT64_C(1000) * 1000000u)
/* On a full disk, at most this many bytes of images of shrunk slices per
 * group (each slice under it): they must fit the MDSL's reserve, at least
 * 1 MiB (mds_group.c shrink_image). */
#define MDS_GROUP_SHRINK_IMAGE_BYTES ((size_t)1 << 20)
/* What a group that removes something may add and still use the MDSL's
 * reserve (mds_group.c commit_group). */
#define MDS_GROUP_RESERVE_SLACK ((size_t)64 << 10)

/* Per-group budget of move images made from delta snapshots
 * (docs/mdsl-scale.md "When a cached slice moves"): a move starts while the group has made
 * fewer than this many and this many bytes (so one image may pass it). */
#define MDS_GROUP_MOVE_SLICES 8u
#define MDS_GROUP_MOVE_BYTES  ((size_t)4 << 20)

struct dlist {
    mds_cent **v;
    size_t n, cap;
    size_t resv; /* slots promised to writers between reserve and append */
};

struct mds_group {
    struct mds_group_opts o;     /* o.participants/o.nparticipants: unused after open */
    uint32_t *parts;             /* participants, home included; only grows (mu) */
    size_t nparts, capparts;     /* (mu) */

    _Atomic uint64_t open_gen;   /* written by the committer under mu */
    _Atomic uint64_t inflight[2]; /* writers per generation parity */
    _Atomic size_t dirty_bytes;  /* noted by writers since the last close */
    _Atomic bool stop;

    pthread_mutex_t mu;
    pthread_cond_t cv_commit;    /* committer: kicks, syncs, stop (mu) */
    pthread_cond_t cv_done;      /* syncers: committed_gen moved (mu) */
    struct dlist list[2];        /* dirty lists by gen parity (mu) */
    uint64_t committed_gen;      /* (mu) */
    uint64_t want_gen;           /* close up to this early (mu) */
    bool kicked;                 /* (mu) */
    uint64_t commits, aborts, empty, syncs; /* (mu) */
    int storage_err;             /* last storage error of a commit, 0 after a commit (mu) */
    uint64_t storage_errs;       /* how many commit attempts met one (mu) */
    unsigned storage_streak;     /* attempts in a row that met one, 0 after a commit (mu) */
    /* A full MDSL disk: until this time (xt_mono_ns) a commit answered
     * -ENOSPC; writes that add data are refused meanwhile
     * (mds_group_space_short) so the groups that follow shrink and may use
     * the MDSL's reserve. */
    _Atomic uint64_t enospc_until;
    /* Bytes of images of shrunk slices (on a full disk) that group
     * shrink_gen made so far (mu; mds_group.c shrink_image). */
    uint64_t shrink_gen;
    size_t shrink_bytes;
    /* The move budget of group move_gen: only one group is snapshotted at
     * a time (invariant 1), so a newer gen simply starts afresh (mu). */
    uint64_t move_gen;
    unsigned move_slices;
    size_t move_bytes;
    /* $POM_MDS_MOVE_CRASH (read once at open, fault tests): prepared,
     * decided or x_committed; NULL when unset. */
    const char *move_crash;

    /* Owned by the committer thread (or open() before it starts); the
     * copies in info are read under mu. */
    uint32_t epoch, seq;
    uint64_t last_txid;          /* (mu for readers) */
    pthread_t thr;
    bool thr_started;
};

static inline void mds_group_sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static inline bool mds_group_stopping(mds_group *g)
{
    return atomic_load(&g->stop);
}

/* ---- mds_group_tx.c ---------------------------------------------------- */

/* The records of one transaction bound for one MDSL site. */
struct mds_group_batch {
    mds_group *g;
    uint32_t site;
    uint64_t txid;
    struct mds_rec *recs;   /* xt_malloc'd; the bytes they point at are the
                               slices' snapshots, borrowed until the commit */
    size_t n, cap;
    int op, rc;
    bool moved_out; /* holds a MOVED tombstone: an old site X of a move */
};

/* One transaction's records, by site. Zero-initialised = empty. */
struct mds_group_tx {
    struct mds_group_batch *b;
    size_t nb;
    bool reserve;           /* frees at least what it adds: every record
                               says so (struct mds_rec `reserve`) */
};

/* Add *r (copied; r->bytes borrowed) to site's batch; a MOVED record marks
 * the batch as an old site of a move. 0 or -ENOMEM. */
int mds_group_tx_add(struct mds_group_tx *t, uint32_t site, const struct mds_rec *r);
/* Frees the batches; t is empty after (freeing an empty one is a no-op). */
void mds_group_tx_free(struct mds_group_tx *t);
/* Commit txid with t's records plus the decision record at the home, then
 * free t. 0: committed everywhere (g->last_txid = txid); -ESHUTDOWN:
 * abandoned (maybe in doubt, recovery decides); other < 0: aborted
 * everywhere. Committer thread (or open) only. */
int mds_group_tx_commit(mds_group *g, uint64_t txid, struct mds_group_tx *t);
/* Commit a decision record alone with epoch prev_epoch + 1 (invariant 5). */
int mds_group_claim_epoch(mds_group *g, uint32_t prev_epoch);
/* The next txid of this MDS, claiming a new epoch when the seq runs out. */
int mds_group_next_txid(mds_group *g, uint64_t *txid);
/* Counts a commit attempt that met a storage error (else does nothing);
 * once MDS_GROUP_STORAGE_ERR_TRIES attempts in a row met one, waiting
 * syncers are told. A one-off error (a retry gets past it) is never
 * reported. */
void mds_group_note_storage_error(mds_group *g, int rc);

/* ---- mds_group_recover.c ------------------------------------------------ */

/* The decision record of txid (mds_group.h) into b[MDS_DECISION_SIZE]. */
void mds_group_decision_encode(uint8_t *b, uint32_t site, uint32_t epoch, uint64_t txid);
/* Invariant 4 for this MDS at open: settles its prepared txids, sets
 * g->last_txid, *epoch_out the epoch to claim after. */
int mds_group_recover(mds_group *g, uint32_t *epoch_out);

#endif /* MDS_GROUP_I_H */
