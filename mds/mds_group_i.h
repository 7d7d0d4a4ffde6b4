/*
 * mds_group_i.h -- internals shared by mds_group.c (writers, snapshots, the
 * two-phase commit, the committer) and mds_group_recover.c (decision
 * records, recovery, settling another MDS's transactions, participants).
 * Not for callers outside those files; the invariants are mds_group.h's.
 */
#ifndef MDS_GROUP_I_H
#define MDS_GROUP_I_H

#include <pthread.h>
#include <stdatomic.h>

#include "mds_group.h"

/* Per-group budget of move images made from delta snapshots
 * (docs/mdsl-scale.md decision 4): a move starts while the group has made
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

/* The decision record of txid (mds_group.h) into b[MDS_DECISION_SIZE]. */
void mds_group_decision_encode(uint8_t *b, uint32_t site, uint32_t epoch, uint64_t txid);
/* Invariant 4 for this MDS at open: settles its prepared txids, sets
 * g->last_txid, *epoch_out the epoch to claim after. */
int mds_group_recover(mds_group *g, uint32_t *epoch_out);

#endif /* MDS_GROUP_I_H */
