/*
 * mds_group.h -- commit groups: how MDS memory becomes durable on MDSL
 * without an operation log (docs/architecture.md "MDS"). Protocol and formats in
 * docs/mds-commit.md.
 *
 * One group is open; every modification joins it. A background thread
 * closes the open group every commit_interval, when the dirty bytes pass a
 * bound, when a sync asks for it, or when the cache is under pressure:
 *
 *   OPEN(G) --close: new writers get G+1--> CLOSED(G) --writers of G left-->
 *   DRAINED(G) --snapshot each dirty slice--> 2PC --all committed--> COMMITTED
 *                                                \--any prepare failed--> ABORTED
 *   (an aborted group's slices join the open group; its syncers wait for it)
 *
 * Writer protocol (mds_table does this for every change):
 *
 *   g0 = mds_group_enter(g);            count the writer in the open group
 *   xt_slice_wrlock(slice);
 *   gen = g0; mds_group_touch(g, e, &gen);   copy-on-write + join a dirty list
 *   ... modify the slice stamping `gen` ...
 *   xt_slice_unlock(slice);
 *   mds_group_leave(g, g0, bytes);      `gen` is what the caller may sync on
 *
 * Invariants:
 *  (1) Groups close in order and commit one at a time; group G+1 is not
 *      closed before G committed or aborted. So at most two groups have
 *      writers: the open one and the one closing.
 *  (2) The snapshot of slice S for group G holds exactly the changes of
 *      groups <= G not yet durable: it is taken with S's write lock after
 *      G drained (the committer) or, copy-on-write, by the first writer of
 *      a later group before it changes S. A writer of G that reaches S after
 *      that stamps its change with S's newer group (mds_group_touch raises
 *      *gen), so no change of G is ever missed or torn out of a group.
 *  (3) A group is committed iff the decision record of its txid is committed
 *      at the home participant (the commit point). The coordinator commits
 *      home first, then the others; before starting the next transaction it
 *      resolves the current one at every participant (commit or abort
 *      acknowledged), so at most one txid of this MDS is ever in doubt.
 *  (4) Recovery (mds_group_open): the newest decision record of this MDS
 *      at any participant (the home's, unless it moved: invariant 9) names
 *      the last committed txid L. Every prepared txid of this MDS is
 *      committed if <= L, aborted if > L and not committed at the home
 *      (10) (by (3) only L itself can still be prepared among those <= L).
 *      This is correct for a SIGKILL at any point: before home's commit nothing is committed anywhere and
 *      everything aborts; after it, everything commits.
 *  (5) txid = site (16 bits) | epoch (24) | seq (23), bit 63 clear. Each start
 *      claims epoch = recorded epoch + 1 by committing a decision record
 *      before its first group, so txids never repeat across restarts.
 *  (6) sync(G) returns 0 only once every change stamped <= G is committed at
 *      every participant that holds it.
 *  (7) A slice in a dirty list is pinned in the cache (mds_cache.h, (3));
 *      its pin goes when its changes are durable.
 *  (8) Ring-1 moves (docs/mdsl-scale.md "Moves inside a commit"): a slice's
 *      record goes where the current placement put it when its snapshot was
 *      taken; when that is not where its records are (mds_cent_commit.site),
 *      the record is a full image there and the old site gets a MOVED
 *      tombstone, same version, same txid, so the slice is live at exactly
 *      one site whichever way the transaction goes. A delta snapshot becomes
 *      such an image only within a per-group budget (8 slices, 4 MiB); the
 *      rest keep appending deltas where they are until a later group.
 *  (9) The participants (every MDSL recovery and settling list prepared
 *      txids at, and read decision records at, taking the highest txid)
 *      grow before use: mds_group_add_participant adds an MDSL before any
 *      placement names it. They shrink only by an MDSL that R2 declared
 *      DRAINED (docs/mdsl-scale.md "Drain and remove": no live slice, nothing
 *      prepared, no placement names it), never the home.
 * (10) Recovery (4) and settling another MDS (mds_group_settle_site) abort
 *      a txid after the decision record they read at a participant only
 *      once it is aborted at the home, the commit point; one the home had
 *      committed is committed. The record may be older than a commit at
 *      the home: a SIGKILL does not stop the commit RPC the home is still
 *      serving, and the restarted MDS reads its record first; a settled
 *      MDS may be running again, its transaction in flight. A txid the
 *      home does not know cannot commit there any more by a dead
 *      coordinator: recovery aborts it; settling leaves it to its
 *      coordinator (its prepare at the home may still come).
 *
 * Decision record (the image of slice `site` of table MDS_COORD_TABLE of
 * fsid MDS_COORD_FSID at the home participant; version = txid):
 *
 *   off size field
 *   0   4    magic MDS_DECISION_MAGIC ("MDSD")
 *   4   2    format version (1)
 *   6   2    flags (0)
 *   8   4    MDS site id
 *   12  4    epoch
 *   16  8    txid: the last committed transaction (this one)
 *   24  8    checksum: xt_hash_bytes(bytes [0, 24), MDS_DECISION_SEED)
 *
 * The record is written at the home and at its copies (opts.decision_copies:
 * the next r-1 lowest ids of ring 1 when slices have r replicas,
 * docs/mdsl-replicas.md "Decision records"), all in the same transaction.
 * The home's commit is the commit point; the copies commit next, before any
 * other participant, so a home that loses its disk after the commit point
 * leaves the decision at a copy whenever any other participant committed.
 * The home does not move yet (docs/mdsl-scale.md "Decision records").
 *
 * Replicas (docs/mdsl-replicas.md): each record of a slice goes to every
 * site of its replica set (mds_place_replicas) in the same transaction, so
 * a group is committed at all of them or at none (invariant 6 covers every
 * replica: sync returns once every replica acknowledged).
 */
#ifndef MDS_GROUP_H
#define MDS_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mds_cache.h"
#include "mds_stats.h"
#include "mds_store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MDS_COORD_FSID      0u
#define MDS_COORD_TABLE     UINT64_C(0xfffffffffffffff0) /* reserved table id */
#define MDS_DECISION_MAGIC  UINT32_C(0x4453444d)         /* "MDSD" */
#define MDS_DECISION_SIZE   32
#define MDS_DECISION_SEED   UINT64_C(0x6d64732b64656331) /* "mds+dec1" */

#define MDS_TXID_SITE_BITS  16
#define MDS_TXID_EPOCH_BITS 24
#define MDS_TXID_SEQ_BITS   23
#define MDS_SITE_MAX        ((1u << MDS_TXID_SITE_BITS) - 1)

static inline uint64_t mds_txid_make(uint32_t site, uint32_t epoch, uint32_t seq)
{
    return ((uint64_t)site << (MDS_TXID_EPOCH_BITS + MDS_TXID_SEQ_BITS)) |
           ((uint64_t)epoch << MDS_TXID_SEQ_BITS) | seq;
}
static inline uint32_t mds_txid_site(uint64_t t)
{
    return (uint32_t)(t >> (MDS_TXID_EPOCH_BITS + MDS_TXID_SEQ_BITS)) & MDS_SITE_MAX;
}
static inline uint32_t mds_txid_epoch(uint64_t t)
{
    return (uint32_t)(t >> MDS_TXID_SEQ_BITS) & ((1u << MDS_TXID_EPOCH_BITS) - 1);
}

struct mds_group_opts {
    const mds_store *store;      /* borrowed */
    mds_cache *cache;            /* borrowed; the slices being committed */
    mds_place *place;            /* borrowed: ring 1 (the cache's) */
    uint32_t site_id;            /* this MDS, 1..MDS_SITE_MAX */
    uint32_t home_site;          /* participant keeping the decision record */
    const uint32_t *participants; /* every MDSL that may hold our prepares */
    size_t nparticipants;        /* (copied; home is added if missing; grows
                                    by mds_group_add_participant) */
    /* Further MDSL holding a copy of every decision record (none: the home
     * alone); copied, added to the participants. At most MDS_REPLICAS_MAX - 1,
     * none equal to the home. */
    const uint32_t *decision_copies;
    size_t ndecision_copies;
    unsigned commit_interval_ms; /* 0: 5000 */
    size_t dirty_bytes_bound;    /* close early past this; 0: 64 MiB */
    double image_ratio;          /* image when deltas pass this of it; 0: 0.5 */
    /* Whether this MDS owns the cached slice of a key by ring 0: only
     * owned slices get a fold image (mds_group.c fold_idle). NULL: every
     * cached slice is owned (one MDS). */
    bool (*owns)(void *arg, uint32_t fsid, uint64_t table, uint32_t slice);
    void *owns_arg;
    unsigned retry_ms;           /* backoff resolving an unacknowledged call; 0: 20 */
    bool move_x_first;           /* tests only (the move.x_committed crash point):
                                    phase 2 of a move commits its old sites
                                    first, the others after */
    bool serial_prepare;         /* prepare site after site (default: in parallel) */
    mds_stats *stats;            /* borrowed, may be NULL */
};

typedef struct mds_group mds_group;

/* Recover (invariant 4), claim an epoch (5) and start the commit thread.
 * *out: mds_group_close. Errors: -EINVAL (opts), a store error during
 * recovery or the epoch claim (nothing is started; retry), -EBADMSG (a
 * corrupt decision record), -ENOMEM. */
int mds_group_open(const struct mds_group_opts *o, mds_group **out);
/* Stop the commit thread and free the group. With flush, first commit
 * everything dirty (bounded: gives up after ~10 s of failures). Without it,
 * stop at once as a crash would (a transaction in progress is abandoned and
 * resolved by the next recovery). Drops the group's pins either way.
 * REQUIRES: no writer inside the group. */
void mds_group_close(mds_group *g, bool flush);

/* Settle the prepared transactions another MDS `site` left (it is dead:
 * docs/mds-dist.md "Settling a dead MDS") as its own recovery would: committed up to
 * its decision record, aborted after, at every participant. So none of its
 * commits can land after a new owner loaded its slices. Idempotent, and
 * safe against that MDS's own recovery running at the same time (both
 * decide alike) and against that MDS running again (invariant 10). 0 or
 * the store's error. */
int mds_group_settle_site(mds_group *g, uint32_t site);
/* The decision record of txid into b[MDS_DECISION_SIZE]: the format
 * recovery reads (tests write one to stage a crash's leftovers). */
void mds_group_decision_encode(uint8_t *b, uint32_t site, uint32_t epoch, uint64_t txid);
/* Invariant 9: site becomes a participant (no-op if it is one). Safe from
 * any thread. 0 or -ENOMEM. */
int mds_group_add_participant(mds_group *g, uint32_t site);
/* Invariant 9: a DRAINED site stops being a participant (so a removed MDSL
 * does not stall recovery and settling). 0 (also when it was none),
 * -EBUSY for the home or a decision copy. Safe from any thread. */
int mds_group_drop_participant(mds_group *g, uint32_t site);
/* The participants now (invariant 9: every MDSL that may hold this MDS's
 * slices), as a new array *out of *n (xt_free). Safe from any thread.
 * 0 or -ENOMEM. */
int mds_group_participants(mds_group *g, uint32_t **out, size_t *n);

/* ---- writers ----------------------------------------------------------- */

/* Count a writer in the open group; returns its generation g0. Never blocks. */
uint64_t mds_group_enter(mds_group *g);
/* REQUIRES: e pinned and its slice write-locked by the caller; the caller
 * entered with g0 <= *gen. Raises *gen to the group the change must be
 * stamped with, takes the copy-on-write snapshot of an older group when
 * due, and puts e on that group's dirty list (pinning it). A new slice that
 * no one else can see yet (a split's child) is touched the same way.
 * 0 or -ENOMEM (nothing changed: the caller must not modify the slice). */
int mds_group_touch(mds_group *g, mds_cent *e, uint64_t *gen);
/* Move e to its current placement with the next commit (invariant 8; what
 * the background mover does for each misplaced slice it owns): a touch
 * with no row change and an image forced. REQUIRES: e pinned, not
 * write-locked by the caller. *gen: the group to sync on, 0 when e is
 * already where the current placement puts it. 0 or -ENOMEM. */
int mds_group_move(mds_group *g, mds_cent *e, uint64_t *gen);
/* Leave the group entered with g0; `bytes` roughly measures what changed
 * (for the dirty-bytes bound; 0 if nothing). */
void mds_group_leave(mds_group *g, uint64_t g0, size_t bytes);

/* Block until every change stamped <= gen is committed (invariant 6),
 * closing groups early as needed; many callers share one commit. gen 0
 * means everything entered so far. 0, -ETIMEDOUT (timeout_ms elapsed, 0 =
 * wait forever), -ESHUTDOWN (the group is closing), or the error (-ENOSPC,
 * -EDQUOT, -EIO, -EROFS, -ENOMEM) of commits that keep failing on it (5
 * attempts in a row, one of them after the call began; aborted or left in
 * doubt): the changes stay dirty (or undecided) and later commits retry
 * them. A one-off failure that a retry gets past is waited through. */
int mds_group_sync(mds_group *g, uint64_t gen, unsigned timeout_ms);
/* A full MDSL disk: true while commits answer -ENOSPC, and for a second
 * after the last one. The service refuses writes that add data meanwhile
 * (-ENOSPC to the client at once), so the groups that follow free at least
 * what they add and commit from the MDSL's space reserve (a group whose
 * slices end no bigger than they were stored is marked so: docs/mds-commit.md
 * "A full disk"). */
bool mds_group_space_short(mds_group *g);
/* Ask for an early close (cache pressure). Usable as mds_cache's pressure
 * hook with the group as argument. */
void mds_group_kick(void *g);

struct mds_group_info {
    uint64_t open_gen;       /* generation new writers get */
    uint64_t committed_gen;  /* every change <= this is durable */
    uint32_t epoch;
    uint64_t last_txid;      /* last committed transaction */
    uint64_t commits, aborts, empty, syncs;
    size_t dirty_bytes;      /* of the open group */
};
void mds_group_info(mds_group *g, struct mds_group_info *out);

#ifdef __cplusplus
}
#endif
#endif /* MDS_GROUP_H */
