/*
 * mds_group.c -- commit groups (mds_group.h has the states and invariants,
 * docs/mds-commit.md the protocol): writers, snapshots, the committer that
 * closes a group and runs its two-phase commit over the MDSL, syncs,
 * lifetime; the decision records, recovery at open, settling the
 * transactions a dead MDS left, and the participant set.
 *
 * Threads: writers call enter/touch/leave; one committer thread closes
 * groups and runs their transactions, one at a time (or open, before it
 * starts); the batch threads of one round each own their batch; syncers
 * wait on cv_done. Locks: a slice's write lock may be held when taking
 * g->mu (touch), never the reverse; the committer holds no lock across a
 * store call, and takes each slice lock alone.
 *
 * Ring-1 moves (docs/mdsl-scale.md "Moves inside a commit"): a slice's record goes
 * to cm.snap_site, the current placement read when its snapshot is taken
 * (under its write lock), so a placement change after that cannot split an
 * image from its tombstone. When snap_site differs from cm.site (where its
 * records are) the record is an image and cm.site gets a MOVED tombstone at
 * the same version in the same transaction; after the commit cm.site =
 * snap_site.
 *
 * One group's transaction: records gathered per site (struct
 * mds_group_tx), the decision record added at the home, then every
 * participant prepares in parallel, the home commits (the commit point),
 * then the others, retried until they answer; an abort is resolved at
 * every site (presumed abort). The txid counter (epochs, invariant 5) and
 * the storage-error streak syncers are told of live here too.
 *
 * Ring 1 may change (docs/mdsl-scale.md "Participants", "Decision records"): the participants
 * grow at run time (every MDSL that may hold a prepare of ours or of an MDS
 * we may settle for), and a site's decision record may sit at any of them
 * (a home that changed, a copy): records are images at version = txid, so
 * the highest txid found at any participant is the decision, and an older
 * copy elsewhere is harmless. Participants only grow: an MDSL leaves the set
 * when this MDS restarts without it.
 *
 * Recovery and settling (invariant 10): a txid after the decision record
 * read may still commit at the home after the read (a killed MDS's commit
 * the home is still serving; a settled MDS that runs again), so it is
 * probed at the home (an abort, as the coordinator probes an unknown
 * commit) before it is aborted anywhere: committed there, it is committed.
 *
 * The crash points of a transaction that moves slices (xt_crash.h, for
 * the fault tests) are passed only by such a transaction: `move.prepared`
 * after every vote, `move.decided` after the home's commit,
 * `move.x_committed` after the old sites of the moves (batches holding a
 * MOVED tombstone) committed, which phase 2 then commits first
 * (opts.move_x_first, set with that crash point).
 */
#include <assert.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "mds_group.h"
#include "xt_common.h"
#include "xt_crash.h"
#include "xt_hash.h"
#include "xt_time.h"

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

/* An idle slice whose stored image and deltas pass its size now by this
 * share, and by MDS_GROUP_FOLD_MIN bytes, gets a new image (fold_idle):
 * the MDSL then counts the old image and the deltas dead and GC gives them
 * back. The deltas alone rarely show it: removing every row of a slice is
 * a small delta that leaves the whole image live. A fold writes at most
 * one image per slice per idle period; at most MDS_GROUP_FOLD_BYTES of
 * stored records are folded a pass. */
#define MDS_GROUP_FOLD_RATIO 0.1
#define MDS_GROUP_FOLD_MIN   ((size_t)4 << 10)
#define MDS_GROUP_FOLD_BYTES ((size_t)16 << 20)

struct dlist {
    mds_cent **v;
    size_t n, cap;
    size_t resv; /* slots promised to writers between reserve and append */
};

struct mds_group {
    struct mds_group_opts o;     /* o.participants/o.nparticipants: unused after open */
    uint32_t *parts;             /* participants, home included; only grows (mu) */
    uint32_t dec_sites[MDS_REPLICAS_MAX]; /* home, then the decision copies
                                             (set at open, then read-only) */
    size_t ndec;
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
    /* The group whose commit attempt met the last storage error (mu): a
     * syncer of gen is told only of an attempt at gen or later, the ones
     * that carry its changes (a failed group's entries join the next);
     * UINT64_MAX while the committer is stuck inside an attempt. */
    uint64_t storage_err_gen;
    uint64_t attempt_gen;        /* the group commit_group writes (committer only) */
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
    /* Some cached slice may hold deltas worth folding (fold_idle); set by
     * a committed delta and at open, cleared by a pass that found none
     * left (the committer thread only, or open before it starts). */
    bool fold_owed;

    /* Owned by the committer thread (or open() before it starts); the
     * copies in info are read under mu. */
    uint32_t epoch, seq;
    uint64_t last_txid;          /* (mu for readers) */
    pthread_t thr;
    bool thr_started;
};

static inline bool mds_group_stopping(mds_group *g)
{
    return atomic_load(&g->stop);
}

/* ---- the two-phase commit over the MDSL --------------------------------- */

/* The records of one transaction bound for one MDSL site. */
struct mds_group_batch {
    mds_group *g;
    uint32_t site;
    uint64_t txid;
    struct xt_store_rec *recs; /* xt_malloc'd; the bytes they point at are the
                                  slices' snapshots, borrowed until the commit */
    size_t n, cap;
    int op, rc;
    bool moved_out; /* holds a MOVED tombstone: an old site X of a move */
    bool decision;  /* holds the decision record (the home or a copy) */
};

/* One transaction's records, by site. Zero-initialised = empty. */
struct mds_group_tx {
    struct mds_group_batch *b;
    size_t nb;
    bool reserve;           /* frees at least what it adds: every record
                               says so (XT_STORE_F_RESERVE) */
};

/* Add *r (copied; r->bytes borrowed) to site's batch; a MOVED record marks
 * the batch as an old site of a move. 0 or -ENOMEM. */
static int mds_group_tx_add(struct mds_group_tx *t, uint32_t site, const struct xt_store_rec *r);
/* Add *r to every site of its slice's replica set whose first site is
 * `site` (docs/mdsl-replicas.md "Writes"); a site that is not the first of
 * the current set (the old site of a move) gets r alone. 0 or -ENOMEM. */
static int tx_add_replicas(mds_group *g, struct mds_group_tx *t, uint32_t site,
                           const struct xt_store_rec *r);
/* Frees the batches; t is empty after (freeing an empty one is a no-op). */
static void mds_group_tx_free(struct mds_group_tx *t);
/* Commit txid with t's records plus the decision record at the home, then
 * free t. 0: committed everywhere (g->last_txid = txid); -ESHUTDOWN:
 * abandoned (maybe in doubt, recovery decides); other < 0: aborted
 * everywhere. Committer thread (or open) only. */
static int mds_group_tx_commit(mds_group *g, uint64_t txid, struct mds_group_tx *t);
/* Commit a decision record alone with epoch prev_epoch + 1 (invariant 5). */
static int mds_group_claim_epoch(mds_group *g, uint32_t prev_epoch);
/* The next txid of this MDS, claiming a new epoch when the seq runs out. */
static int mds_group_next_txid(mds_group *g, uint64_t *txid);
/* Counts a commit attempt that met a storage error (else does nothing);
 * once MDS_GROUP_STORAGE_ERR_TRIES attempts in a row met one, waiting
 * syncers are told. A one-off error (a retry gets past it) is never
 * reported. */
static void mds_group_note_storage_error(mds_group *g, int rc, bool stuck);

/* ---- recovery -------------------------------------------------------------- */

/* Invariant 4 for this MDS at open: settles its prepared txids, sets
 * g->last_txid, *epoch_out the epoch to claim after. */
static int mds_group_recover(mds_group *g, uint32_t *epoch_out);

#define DEFAULT_INTERVAL_MS 5000u
#define DEFAULT_DIRTY_BOUND ((size_t)64 << 20)
#define FLUSH_TIMEOUT_MS    10000u

/* ---- small helpers ---------------------------------------------------- */

/* Promise `more` appends (dlist_append) to g's list l that cannot fail.
 * REQUIRES: g->mu held. */
static int dlist_reserve(mds_group *g, struct dlist *l, size_t more)
{
    assert(xt_mutex_held(&g->mu));
    assert(l == &g->list[0] || l == &g->list[1]);
    size_t need = l->n + l->resv + more;
    if (need > l->cap) {
        size_t nc = l->cap ? l->cap : 16;
        while (nc < need)
            nc *= 2;
        mds_cent **nv = xt_realloc(l->v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        l->cap = nc;
    }
    l->resv += more;
    return 0;
}

/* REQUIRES: g->mu held; a slot reserved. */
static void dlist_append(mds_group *g, struct dlist *l, mds_cent *e)
{
    assert(xt_mutex_held(&g->mu));
    assert(l->resv > 0 && l->n < l->cap);
    l->resv--;
    l->v[l->n++] = e;
}

/* ---- snapshots (invariant 2) ------------------------------------------ */

static int first_change(void *arg, const xt_slice_entry *e)
{
    (void)e;
    *(bool *)arg = true;
    return 1;
}

/* May group gen turn one more delta snapshot into a move image? Counts it
 * when so (docs/mdsl-scale.md "When a cached slice moves"). */
static bool move_budget(mds_group *g, uint64_t gen)
{
    pthread_mutex_lock(&g->mu);
    if (g->move_gen != gen) {
        g->move_gen = gen;
        g->move_slices = 0;
        g->move_bytes = 0;
    }
    bool ok = g->move_slices < MDS_GROUP_MOVE_SLICES && g->move_bytes < MDS_GROUP_MOVE_BYTES;
    if (ok)
        g->move_slices++;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

static void move_budget_bytes(mds_group *g, uint64_t gen, size_t len)
{
    pthread_mutex_lock(&g->mu);
    if (g->move_gen == gen)
        g->move_bytes += len;
    pthread_mutex_unlock(&g->mu);
}

/* On a full disk a shrunk slice is written whole: the image makes its
 * older records garbage that the MDSL's GC gives back, a delta would not.
 * Only small slices, and a bounded amount per group, so the images fit in
 * the MDSL's reserve (at least 1 MiB); a bigger slice writes deltas and
 * gives its space back at its next image. */
static bool shrink_image(mds_group *g, const struct mds_cent_commit *cm, const xt_slice *s,
                         uint64_t gen)
{
    size_t mem = xt_slice_mem_bytes(s);
    if (mem >= cm->durable_mem || mem > MDS_GROUP_SHRINK_IMAGE_BYTES ||
        !mds_group_space_short(g))
        return false;
    pthread_mutex_lock(&g->mu);
    if (g->shrink_gen != gen) {
        g->shrink_gen = gen;
        g->shrink_bytes = 0;
    }
    bool ok = g->shrink_bytes + mem <= MDS_GROUP_SHRINK_IMAGE_BYTES;
    if (ok)
        g->shrink_bytes += mem;
    pthread_mutex_unlock(&g->mu);
    return ok;
}

/* Take e's record for group gen: the changes since durable_gen as a delta,
 * or an image when one is due, and where it goes (snap_site: the current
 * placement when the slice moves now, else cm.site). REQUIRES: e's slice
 * write-locked; no snapshot pending. On -ENOMEM nothing changed. */
static int take_snapshot(mds_group *g, mds_cent *e, uint64_t gen)
{
    struct mds_cent_commit *cm = mds_cent_commit(e);
    assert(!cm->snap && cm->snapped_gen < gen); /* REQUIRES: none pending */
    xt_slice *s = mds_cent_slice(e);
    const struct mds_key *k = mds_cent_key(e);
    uint32_t to = mds_place_current(g->o.place, k->fsid, k->table, k->slice);
    if (cm->site == MDS_SITE_NONE)
        cm->site = to; /* nothing stored yet: a new slice starts at current */
    bool image = cm->force_image || xt_slice_needs_image(s) || cm->image_bytes == 0 ||
                 shrink_image(g, cm, s, gen);
    bool budgeted = false; /* a delta turned into a move image */
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc;
    if (!image) {
        bool any = false;
        xt_slice_collect_changes(s, cm->durable_gen, first_change, &any);
        if (!any) {
            cm->snapped_gen = gen; /* nothing to write */
            return 0;
        }
        if (to != cm->site && move_budget(g, gen))
            image = budgeted = true;
    }
    if (!image) {
        if ((rc = xt_slice_encode_delta(s, cm->durable_gen, &buf, &len)) < 0)
            return rc;
        double ratio = g->o.image_ratio > 0 ? g->o.image_ratio : 0.5;
        if ((double)(cm->delta_bytes + len) > ratio * (double)cm->image_bytes) {
            xt_free(buf);
            buf = NULL;
            image = true;
        }
    }
    cm->snap_fold = false;
    if (image) {
        if ((rc = xt_slice_encode(s, &buf, &len)) < 0)
            return rc;
        xt_slice_clear_needs_image(s);
        cm->force_image = false;
        cm->snap_fold = cm->fold;
        cm->fold = false;
        if (budgeted)
            move_budget_bytes(g, gen, len);
    }
    cm->snap_removed = cm->removed;
    cm->removed = false;
    cm->snap = buf;
    cm->snap_len = len;
    cm->snap_image = image;
    cm->snap_mem = xt_slice_mem_bytes(s);
    cm->snap_rows = xt_slice_count(s);
    /* Listed by the MDSL, so that a restarted MDS (or a new owner) loads
     * the slice to finish its outbox and pending rows (mds_reload.h). */
    cm->snap_sys = xt_slice_sys_count(s) > 0;
    /* A delta stays where the image it applies to is; an image may move. */
    cm->snap_site = image ? to : cm->site;
    cm->snapped_gen = gen;
    mds_cache_resize(g->o.cache, e);
    return 0;
}

/* ---- writers ------------------------------------------------------------ */

uint64_t mds_group_enter(mds_group *g)
{
    for (;;) {
        uint64_t gen = atomic_load(&g->open_gen);
        atomic_fetch_add(&g->inflight[gen & 1], 1);
        /* Seen open after counting: the committer's drain wait will see us. */
        if (atomic_load(&g->open_gen) == gen)
            return gen;
        atomic_fetch_sub(&g->inflight[gen & 1], 1);
    }
}

void mds_group_leave(mds_group *g, uint64_t g0, size_t bytes)
{
    /* REQUIRES: g0 from mds_group_enter, not left yet; at most the open
     * group and the one closing have writers (invariant 1). */
    assert(atomic_load(&g->inflight[g0 & 1]) > 0);
    assert(g0 + 1 >= atomic_load(&g->open_gen));
    if (bytes) {
        size_t bound = g->o.dirty_bytes_bound ? g->o.dirty_bytes_bound : DEFAULT_DIRTY_BOUND;
        size_t before = atomic_fetch_add(&g->dirty_bytes, bytes);
        if (before < bound && before + bytes >= bound)
            mds_group_kick(g);
    }
    atomic_fetch_sub(&g->inflight[g0 & 1], 1);
}

int mds_group_touch(mds_group *g, mds_cent *e, uint64_t *gen)
{
    struct mds_cent_commit *cm = mds_cent_commit(e);
    uint64_t want = *gen;
    if (cm->dirty_gen >= want) {
        /* Already on the list of this group or of a newer one (a late
         * writer of an older group: it joins the newer one, invariant 2). */
        *gen = cm->dirty_gen;
        return 0;
    }
    pthread_mutex_lock(&g->mu);
    int rc = dlist_reserve(g, &g->list[want & 1], 1);
    pthread_mutex_unlock(&g->mu);
    if (rc < 0)
        return rc;
    bool pending = cm->dirty_gen > cm->durable_gen && cm->snapped_gen < cm->dirty_gen;
    if (pending) {
        /* Copy-on-write: the closed group's view must not see our change. */
        uint64_t closed = cm->dirty_gen;
        if ((rc = take_snapshot(g, e, closed)) < 0) {
            pthread_mutex_lock(&g->mu);
            g->list[want & 1].resv--;
            pthread_mutex_unlock(&g->mu);
            return rc;
        }
        assert(cm->snapped_gen == closed); /* invariant 2: the closed group's view */
        mds_stats_add(g->o.stats, MDS_CTR_LAZY_SNAPSHOTS, 1);
    } else if (cm->dirty_gen <= cm->durable_gen && cm->durable_gen < want - 1) {
        /* Clean: everything in the slice is durable, and what comes is
         * stamped >= want, so the next delta may start just below it. */
        cm->durable_gen = want - 1;
    }
    mds_cache_ref(g->o.cache, e);
    pthread_mutex_lock(&g->mu);
    /* The list of `want` is not swapped out meanwhile: that needs want's
     * group drained, and we (or a writer of want-1 < want) are inside. */
    dlist_append(g, &g->list[want & 1], e);
    pthread_mutex_unlock(&g->mu);
    cm->dirty_gen = want;
    return 0;
}

int mds_group_move(mds_group *g, mds_cent *e, uint64_t *gen)
{
    struct mds_cent_commit *cm = mds_cent_commit(e);
    const struct mds_key *k = mds_cent_key(e);
    xt_slice *s = mds_cent_slice(e);
    uint64_t g0 = mds_group_enter(g), at = g0;
    int rc = 0;
    *gen = 0;
    xt_slice_wrlock(s);
    uint32_t to = mds_place_current(g->o.place, k->fsid, k->table, k->slice);
    if (cm->site != MDS_SITE_NONE && cm->site != to) {
        /* A touch with no row change; the image makes it a move. */
        rc = mds_group_touch(g, e, &at);
        if (rc == 0) {
            cm->force_image = true;
            *gen = at;
        }
    }
    xt_slice_unlock(s);
    mds_group_leave(g, g0, 0);
    return rc;
}

/* ---- folding idle deltas ---------------------------------------------------- */

/* Whether cm's stored records pass the slice's size now (the image scaled
 * by the memory the slice had then and has now) by the fold share.
 * REQUIRES: the slice's write lock. */
static bool fold_due(const struct mds_cent_commit *cm)
{
    double stored = (double)cm->image_bytes + (double)cm->delta_bytes;
    double now = cm->image_mem ? (double)cm->image_bytes * (double)cm->durable_mem /
                                     (double)cm->image_mem
                               : (double)cm->image_bytes;
    return stored > (1.0 + MDS_GROUP_FOLD_RATIO) * now &&
           stored - now >= (double)MDS_GROUP_FOLD_MIN;
}

/* Give each idle cached slice that fold_due a new image (docs/mds-commit.md
 * "Folding idle deltas"): the slice joins the open group as a writer's
 * would, marked force_image, and the ordinary two-phase commit writes it;
 * the MDSL then counts the old image and its deltas dead. Idle: no change
 * in group `before` or later (an empty group does not close: at a deadline
 * with nothing dirty, the open group; after a timed close, the group just
 * committed). Only slices this MDS owns (a handed-over copy may stay
 * cached, pinned by a reader: it is never written). Runs on the committer
 * thread between two groups (it enters the open group as a writer, which
 * it may do only while it is not waiting for a drain), and not while the
 * MDSL's disk is full: a fold adds before GC frees. Returns whether it
 * touched a slice. */
static bool fold_idle(mds_group *g, uint64_t before)
{
    struct mds_key *keys = NULL;
    size_t n = 0, bytes = 0;
    bool owed = false, any = false;
    if (mds_group_space_short(g) || mds_cache_keys(g->o.cache, &keys, &n) < 0)
        return false; /* still owed */
    for (size_t i = 0; i < n && !mds_group_stopping(g); i++) {
        const struct mds_key *k = &keys[i];
        mds_cent *e;
        if (g->o.owns && !g->o.owns(g->o.owns_arg, k->fsid, k->table, k->slice))
            continue;
        if (mds_cache_peek(g->o.cache, k, &e) < 0)
            continue; /* loading or gone: its load counts the deltas again */
        struct mds_cent_commit *cm = mds_cent_commit(e);
        xt_slice *s = mds_cent_slice(e);
        uint64_t g0 = mds_group_enter(g), at = g0;
        xt_slice_wrlock(s);
        bool due = cm->delta_bytes > 0 && cm->site != MDS_SITE_NONE && !cm->force_image &&
                   fold_due(cm);
        bool idle = cm->dirty_gen < before && cm->dirty_gen <= cm->durable_gen;
        if (due && idle && bytes < MDS_GROUP_FOLD_BYTES && mds_group_touch(g, e, &at) == 0) {
            cm->force_image = true;
            cm->fold = true;
            bytes += cm->image_bytes + cm->delta_bytes;
            any = true;
            mds_stats_add(g->o.stats, MDS_CTR_FOLDS, 1);
        } else if (due) {
            owed = true; /* busy, over this pass's bytes, or out of memory */
        }
        xt_slice_unlock(s);
        mds_group_leave(g, g0, 0);
        mds_cache_put(g->o.cache, e);
    }
    xt_free(keys);
    g->fold_owed = owed || mds_group_stopping(g);
    return any;
}

/* ---- the committer --------------------------------------------------------- */

/* Write group gen's dirty slices (list l, pins owned) and settle them. */
static void commit_group(mds_group *g, uint64_t gen, struct dlist *l)
{
    uint64_t t0 = xt_mono_ns();
    struct mds_group_tx t = { 0 };
    size_t nrec = 0;
    int64_t grow = 0;  /* what the group's slices grew since stored */
    bool frees = false; /* some slice lost rows or bytes since stored, or a row
                           was deleted or shortened (mds_cent_commit.removed) */
    int rc = 0;
    /* Attempts go up (invariant 1): storage_err_gen >= gen means an
     * attempt that carried gen's changes met the error. */
    assert(g->attempt_gen < gen);
    g->attempt_gen = gen;
    for (size_t i = 0; i < l->n; i++) {
        mds_cent *e = l->v[i];
        struct mds_cent_commit *cm = mds_cent_commit(e);
        xt_slice *s = mds_cent_slice(e);
        xt_slice_wrlock(s);
        if (cm->snapped_gen < gen && rc == 0) {
            /* Invariant 2: only an entry still stamped gen may be
             * snapshotted now; a newer writer would have copied it. A
             * snapshot of an entry restamped without its copy would carry
             * a later group's changes into this one: the group fails
             * instead, and its entries commit with the open group. */
            assert(cm->dirty_gen == gen);
            if (cm->dirty_gen != gen) {
                XT_ERR("group: slice %u of table %llu lost its copy-on-write: group %llu fails",
                       mds_cent_key(e)->slice, (unsigned long long)mds_cent_key(e)->table,
                       (unsigned long long)gen);
                rc = -EPROTO;
            } else {
                rc = take_snapshot(g, e, gen);
            }
        }
        if (rc == 0 && cm->snap) {
            const struct mds_key *k = mds_cent_key(e);
            xt_slice_id id = { .fsid = k->fsid, .slice = k->slice, .table = k->table };
            struct xt_store_rec r = {
                .type = cm->snap_image ? XT_STORE_IMAGE : XT_STORE_DELTA,
                .flags = cm->snap_sys ? XT_STORE_F_SYS : 0, .id = id,
                .version = cm->version + 1, .data = cm->snap, .len = (uint32_t)cm->snap_len,
            };
            rc = cm->snap_len > UINT32_MAX ? -E2BIG : tx_add_replicas(g, &t, cm->snap_site, &r);
            if (rc == 0 && cm->snap_site != cm->site) {
                /* The move's other half: same txid, same version. */
                static const uint8_t none[1];
                struct xt_store_rec tomb = {
                    .type = XT_STORE_IMAGE, .flags = XT_STORE_F_MOVED, .id = id,
                    .version = r.version, .data = none, .len = 0,
                };
                rc = tx_add_replicas(g, &t, cm->site, &tomb);
            }
            nrec++;
            grow += (int64_t)cm->snap_mem - (int64_t)cm->durable_mem;
            if (cm->snap_fold) /* adds its bytes before GC frees the old */
                grow += (int64_t)cm->snap_len;
            frees |= cm->snap_mem < cm->durable_mem || cm->snap_rows < cm->durable_rows ||
                     cm->snap_removed;
            mds_stats_add(g->o.stats, cm->snap_image ? MDS_CTR_RECORDS_IMAGE
                                                     : MDS_CTR_RECORDS_DELTA, 1);
            mds_stats_add(g->o.stats, cm->snap_image ? MDS_CTR_BYTES_IMAGE
                                                     : MDS_CTR_BYTES_DELTA, cm->snap_len);
        }
        xt_slice_unlock(s);
    }
    /* A group that frees at least what it adds may use the MDSL's reserve:
     * deletes, truncates and rmdirs commit on a full disk, together with
     * the writes of the group (kept whole: it is one atomic unit). Rows
     * are not the same size (a name, a counter): a group that removes
     * something may add MDS_GROUP_RESERVE_SLACK more, e.g. a truncate
     * together with a write refused at its fsync and still dirty. New
     * writes cannot follow (mds_group_space_short), so the slack is not
     * taken again and again. */
    t.reserve = grow <= 0 || (frees && grow <= (int64_t)MDS_GROUP_RESERVE_SLACK);
    bool grows = !t.reserve;
    uint64_t txid = 0;
    if (rc == 0 && nrec > 0 && (rc = mds_group_next_txid(g, &txid)) == 0)
        rc = mds_group_tx_commit(g, txid, &t); /* frees t */
    mds_group_tx_free(&t);
    if (rc == -ESHUTDOWN)
        return; /* abandoned: close() drops the list */

    uint64_t open = atomic_load(&g->open_gen);
    mds_group_note_storage_error(g, rc, false);
    if (rc < 0) {
        /* Keep everything dirty: the entries still stamped gen join the
         * open group (their pin moves with them). */
        pthread_mutex_lock(&g->mu);
        while (dlist_reserve(g, &g->list[open & 1], l->n) < 0) {
            pthread_mutex_unlock(&g->mu);
            if (mds_group_stopping(g))
                return; /* out of memory at a stop: abandoned as above */
            mds_group_note_storage_error(g, -ENOMEM, true); /* stuck here */
            xt_sleep_ms(MDS_GROUP_RETRY_MS);
            pthread_mutex_lock(&g->mu);
        }
        pthread_mutex_unlock(&g->mu);
    }
    size_t moved = 0, reserved = rc < 0 ? l->n : 0;
    bool fold_owed = false;
    for (size_t i = 0; i < l->n; i++) {
        mds_cent *e = l->v[i];
        struct mds_cent_commit *cm = mds_cent_commit(e);
        xt_slice *s = mds_cent_slice(e);
        bool keep_pin = false;
        xt_slice_wrlock(s);
        /* Invariant 1: no later group is snapshotted before gen is done. */
        assert(cm->snapped_gen <= gen);
        if (rc == 0) {
            if (cm->snapped_gen == gen && cm->snap && cm->snap_site != cm->site) {
                XT_DBG("group: fs %u table %llu slice %u moved from site %u to %u at v%llu",
                       mds_cent_key(e)->fsid, (unsigned long long)mds_cent_key(e)->table,
                       mds_cent_key(e)->slice, cm->site, cm->snap_site,
                       (unsigned long long)cm->version + 1);
                mds_stats_add(g->o.stats, MDS_CTR_MOVES, 1);
                mds_stats_add(g->o.stats, MDS_CTR_MOVE_BYTES, cm->snap_len);
                cm->site = cm->snap_site;
            }
            if (cm->snapped_gen == gen && cm->snap) {
                cm->version++;
                cm->durable_mem = cm->snap_mem;
                cm->durable_rows = cm->snap_rows;
                if (cm->snap_image) {
                    cm->image_bytes = cm->snap_len;
                    cm->image_mem = cm->snap_mem;
                    cm->delta_bytes = 0;
                } else {
                    cm->delta_bytes += cm->snap_len;
                    fold_owed = true;
                }
            }
            if (cm->durable_gen < gen)
                cm->durable_gen = gen;
            /* The tombstones it drops were in the record: what they held
             * is not there any more for the next group's growth either. */
            size_t mem0 = xt_slice_mem_bytes(s);
            xt_slice_drop_tombstones(s, gen);
            size_t dropped = mem0 - XT_MIN(mem0, xt_slice_mem_bytes(s));
            cm->durable_mem -= XT_MIN(cm->durable_mem, dropped);
        } else {
            if (cm->snapped_gen == gen && cm->snap && cm->snap_site != cm->site)
                mds_stats_add(g->o.stats, MDS_CTR_MOVE_ABORTS, 1);
            /* An image must be retried as one; so must any record after a
             * participant said the slice's head there is a tombstone (a
             * delta on it is refused: docs/mdsl-scale.md "Tombstones"). */
            if (cm->snapped_gen == gen && (cm->snap_image || rc == -ESTALE))
                cm->force_image = true;
            if (cm->snapped_gen == gen) {
                cm->fold |= cm->snap_fold;
                cm->removed |= cm->snap_removed; /* still in the retried group */
            }
            cm->snapped_gen = 0;
            if (cm->dirty_gen == gen) {
                pthread_mutex_lock(&g->mu);
                dlist_append(g, &g->list[open & 1], e);
                pthread_mutex_unlock(&g->mu);
                cm->dirty_gen = open;
                keep_pin = true;
                moved++;
            }
        }
        xt_free(cm->snap);
        cm->snap = NULL;
        cm->snap_len = 0;
        mds_cache_resize(g->o.cache, e);
        xt_slice_unlock(s);
        if (!keep_pin)
            mds_cache_put(g->o.cache, e);
    }
    l->n = 0;

    pthread_mutex_lock(&g->mu);
    if (rc < 0)
        g->list[open & 1].resv -= reserved - moved;
    if (rc == 0 && nrec && grows)
        atomic_store(&g->enospc_until, 0); /* data fit again */
    g->fold_owed |= fold_owed;
    if (rc == 0) {
        assert(gen > g->committed_gen); /* invariant 1: in order */
        g->committed_gen = gen;
        g->storage_err = 0;
        g->storage_streak = 0;
        if (nrec)
            g->commits++;
        else
            g->empty++;
        pthread_cond_broadcast(&g->cv_done);
    } else {
        g->aborts++;
        /* Syncers of gen now wait for the open group: close it soon. */
        if (g->want_gen >= gen && g->want_gen < open)
            g->want_gen = open;
    }
    pthread_mutex_unlock(&g->mu);
    mds_stats_add(g->o.stats, rc == 0 ? (nrec ? MDS_CTR_GROUPS_COMMITTED : MDS_CTR_GROUPS_EMPTY)
                                      : MDS_CTR_GROUPS_ABORTED, 1);
    mds_stats_record(g->o.stats, MDS_OP_GROUP, xt_mono_ns() - t0, rc);
    if (rc < 0)
        xt_sleep_ms(g->o.retry_ms ? g->o.retry_ms : MDS_GROUP_RETRY_MS);
}

static void *committer(void *arg)
{
    mds_group *g = arg;
    unsigned interval = g->o.commit_interval_ms ? g->o.commit_interval_ms : DEFAULT_INTERVAL_MS;
    uint64_t deadline = xt_deadline_ms(interval);
    struct dlist work = { 0 };
    pthread_mutex_lock(&g->mu);
    while (!mds_group_stopping(g)) {
        uint64_t open = atomic_load(&g->open_gen);
        assert(g->committed_gen < open); /* invariant 1 */
        bool timeup = xt_deadline_passed(deadline);
        bool early = g->want_gen >= open || g->kicked;
        if (!early && !(timeup && g->list[open & 1].n > 0)) {
            if (timeup && g->fold_owed) {
                pthread_mutex_unlock(&g->mu);
                bool folded = fold_idle(g, open);
                pthread_mutex_lock(&g->mu);
                if (folded)
                    continue; /* commit the folds now: the deadline has passed */
            }
            if (timeup)
                deadline = xt_deadline_ms(interval);
            (void)xt_cond_wait_until(&g->cv_commit, &g->mu, deadline);
            continue;
        }
        if (early && !timeup)
            mds_stats_add(g->o.stats, MDS_CTR_EARLY_CLOSES, 1);
        g->kicked = false;
        /* Close: from here new writers join open + 1 (invariant 1). */
        atomic_store(&g->open_gen, open + 1);
        atomic_store(&g->dirty_bytes, 0);
        pthread_mutex_unlock(&g->mu);

        /* Writers of `open` leave within one slice op: yield, then nap
         * if one is held up longer (a slice lock waited for). */
        for (unsigned spins = 0; atomic_load(&g->inflight[open & 1]) != 0; spins++) {
            if (spins < 1000)
                sched_yield();
            else
                xt_sleep_ms(1);
        }

        pthread_mutex_lock(&g->mu);
        struct dlist tmp = g->list[open & 1];
        g->list[open & 1] = work; /* recycle the array */
        work = tmp;
        pthread_mutex_unlock(&g->mu);

        commit_group(g, open, &work);
        deadline = xt_deadline_ms(interval);
        /* Under steady writes the open group is never empty at a
         * deadline: fold the slices that rest after a timed close too
         * (they commit with the open group). */
        if (timeup && g->fold_owed && work.n == 0)
            (void)fold_idle(g, open);
        pthread_mutex_lock(&g->mu);
        if (work.n) { /* abandoned by a stop: give the pins back to a list */
            struct dlist *l = &g->list[open & 1];
            if (dlist_reserve(g, l, work.n) == 0) {
                memcpy(l->v + l->n, work.v, work.n * sizeof *work.v);
                l->n += work.n;
                work.n = 0;
            }
        }
    }
    pthread_mutex_unlock(&g->mu);
    for (size_t i = 0; i < work.n; i++) {
        struct mds_cent_commit *cm = mds_cent_commit(work.v[i]);
        xt_free(cm->snap);
        cm->snap = NULL;
        cm->snap_len = 0;
        mds_cache_put(g->o.cache, work.v[i]);
    }
    xt_free(work.v);
    return NULL;
}

bool mds_group_space_short(mds_group *g)
{
    return xt_mono_ns() < atomic_load(&g->enospc_until);
}

void mds_group_kick(void *arg)
{
    mds_group *g = arg;
    pthread_mutex_lock(&g->mu);
    g->kicked = true;
    pthread_cond_signal(&g->cv_commit);
    pthread_mutex_unlock(&g->mu);
}

int mds_group_sync(mds_group *g, uint64_t gen, unsigned timeout_ms)
{
    uint64_t t0 = xt_mono_ns();
    uint64_t deadline = timeout_ms ? xt_deadline_ms(timeout_ms) : 0;
    int rc = 0;
    pthread_mutex_lock(&g->mu);
    g->syncs++;
    uint64_t open = atomic_load(&g->open_gen), errs0 = g->storage_errs;
    if (gen == 0 || gen > open)
        gen = open;
    while (g->committed_gen < gen) {
        if (mds_group_stopping(g)) {
            rc = -ESHUTDOWN;
            break;
        }
        /* Commits keep failing on the storage, once more after this sync
         * began (aborted, or in doubt at the home participant) and in an
         * attempt that carried gen's changes (group gen or later): the
         * changes stay dirty or undecided (a later attempt may still make
         * them durable) but the caller learns now, as fsync(2) reports a
         * failed write, instead of at its timeout. The failures of an older
         * group do not count: on a full disk a group that only grows keeps
         * failing while the next one, which carries a truncate or a
         * delete with it, commits from the MDSL's reserve. */
        if (g->storage_errs != errs0 && g->storage_streak >= MDS_GROUP_STORAGE_ERR_TRIES &&
            g->storage_err && g->storage_err_gen >= gen) {
            rc = g->storage_err;
            break;
        }
        if (g->want_gen < gen) {
            g->want_gen = gen;
            pthread_cond_signal(&g->cv_commit);
        }
        if (timeout_ms) {
            if (xt_cond_wait_until(&g->cv_done, &g->mu, deadline) == -ETIMEDOUT &&
                g->committed_gen < gen) {
                rc = -ETIMEDOUT;
                break;
            }
        } else {
            pthread_cond_wait(&g->cv_done, &g->mu);
        }
    }
    pthread_mutex_unlock(&g->mu);
    mds_stats_add(g->o.stats, MDS_CTR_SYNC_CALLS, 1);
    mds_stats_record(g->o.stats, MDS_OP_SYNC, xt_mono_ns() - t0, rc);
    return rc;
}

/* ---- lifetime ------------------------------------------------------------ */

static void group_free(mds_group *g)
{
    for (int i = 0; i < 2; i++) {
        for (size_t j = 0; j < g->list[i].n; j++) {
            struct mds_cent_commit *cm = mds_cent_commit(g->list[i].v[j]);
            xt_free(cm->snap);
            cm->snap = NULL;
            cm->snap_len = 0;
            mds_cache_put(g->o.cache, g->list[i].v[j]);
        }
        xt_free(g->list[i].v);
    }
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv_commit);
    pthread_cond_destroy(&g->cv_done);
    xt_free(g->parts);
    xt_free(g);
}

int mds_group_open(const struct mds_group_opts *o, mds_group **out)
{
    *out = NULL;
    if (!o || !o->store || !o->cache || !o->place || o->site_id == 0 ||
        o->site_id > MDS_SITE_MAX || (o->nparticipants && !o->participants) ||
        o->ndecision_copies >= MDS_REPLICAS_MAX || (o->ndecision_copies && !o->decision_copies))
        return -EINVAL;
    for (size_t i = 0; i < o->ndecision_copies; i++)
        if (o->decision_copies[i] == o->home_site)
            return -EINVAL;
    mds_group *g = xt_calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->o = *o;
    g->capparts = o->nparticipants + 1;
    g->parts = xt_calloc(g->capparts, sizeof *g->parts);
    if (!g->parts) {
        xt_free(g);
        return -ENOMEM;
    }
    bool home_in = false;
    for (size_t i = 0; i < o->nparticipants; i++) {
        g->parts[g->nparts++] = o->participants[i];
        home_in |= o->participants[i] == o->home_site;
    }
    if (!home_in)
        g->parts[g->nparts++] = o->home_site;
    g->dec_sites[g->ndec++] = o->home_site;
    for (size_t i = 0; i < o->ndecision_copies; i++)
        g->dec_sites[g->ndec++] = o->decision_copies[i];
    g->o.participants = NULL; /* the caller's array: g->parts from here */
    g->o.nparticipants = 0;
    g->o.decision_copies = NULL;
    g->o.ndecision_copies = 0;
    pthread_mutex_init(&g->mu, NULL);
    xt_cond_init_mono(&g->cv_commit);
    xt_cond_init_mono(&g->cv_done);
    atomic_store(&g->open_gen, 1);
    g->fold_owed = true; /* slices loaded with deltas */

    uint32_t epoch;
    int rc = 0;
    for (size_t i = 1; i < g->ndec && rc == 0; i++)
        rc = mds_group_add_participant(g, g->dec_sites[i]);
    if (rc == 0)
        rc = mds_group_recover(g, &epoch);
    if (rc == 0)
        rc = mds_group_claim_epoch(g, epoch);
    if (rc == 0) {
        rc = -pthread_create(&g->thr, NULL, committer, g);
        g->thr_started = rc == 0;
    }
    if (rc < 0) {
        XT_ERR("group: site %u failed to start: %d", o->site_id, rc);
        group_free(g);
        return rc;
    }
    XT_INFO("group: site %u epoch %u (last txid %llx)", o->site_id, g->epoch,
            (unsigned long long)g->last_txid);
    *out = g;
    return 0;
}

void mds_group_close(mds_group *g, bool flush)
{
    if (!g)
        return;
    if (flush)
        mds_group_sync(g, 0, FLUSH_TIMEOUT_MS);
    pthread_mutex_lock(&g->mu);
    atomic_store(&g->stop, true);
    pthread_cond_broadcast(&g->cv_commit);
    pthread_cond_broadcast(&g->cv_done);
    pthread_mutex_unlock(&g->mu);
    if (g->thr_started)
        pthread_join(g->thr, NULL);
    /* REQUIRES: no writer inside the group. Checked once the committer
     * has stopped: its fold pass (fold_idle) is a writer too. */
    assert(atomic_load(&g->inflight[0]) == 0 && atomic_load(&g->inflight[1]) == 0);
    group_free(g);
}

void mds_group_info(mds_group *g, struct mds_group_info *out)
{
    pthread_mutex_lock(&g->mu);
    out->open_gen = atomic_load(&g->open_gen);
    out->committed_gen = g->committed_gen;
    out->epoch = g->epoch;
    out->last_txid = g->last_txid;
    out->commits = g->commits;
    out->aborts = g->aborts;
    out->empty = g->empty;
    out->syncs = g->syncs;
    out->dirty_bytes = atomic_load(&g->dirty_bytes);
    pthread_mutex_unlock(&g->mu);
}

/* ==== one group's transaction over the MDSL ============================== */

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

/* A commit attempt met storage error rc. `stuck`: the committer retries
 * inside the attempt (a txid in doubt, an abort or a commit that keeps
 * failing at a participant, no memory to requeue) and reaches no later
 * group meanwhile, so every syncer hears of it; otherwise the attempt's
 * entries join the next group and only syncers of the attempt's group or
 * an earlier one do (mds_group_sync). */
static void mds_group_note_storage_error(mds_group *g, int rc, bool stuck)
{
    if (!storage_error(rc))
        return;
    if (rc == -ENOSPC)
        atomic_store(&g->enospc_until, xt_mono_ns() + MDS_GROUP_ENOSPC_HOLD_NS);
    pthread_mutex_lock(&g->mu);
    g->storage_err = rc;
    g->storage_err_gen = stuck ? UINT64_MAX : g->attempt_gen;
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
                mds_group_note_storage_error(g, b[i].rc, true);
        xt_sleep_ms(g->o.retry_ms ? g->o.retry_ms : MDS_GROUP_RETRY_MS);
    }
}

/* Whether the transaction moves a slice (a batch holds a MOVED tombstone). */
static bool moves_slice(const struct mds_group_batch *b, size_t nb)
{
    for (size_t i = 0; i < nb; i++)
        if (b[i].moved_out)
            return true;
    return false;
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
    bool moving = moves_slice(b, nb);
    if (moving) {
        /* One line per group that moves (rare: ring-1 changes), naming the
         * txid a crash point of its 2PC leaves to recovery. */
        XT_INFO("group: txid %llx moves slices", (unsigned long long)txid);
        XT_CRASH_POINT("move.prepared");
    }
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
        mds_group_note_storage_error(g, storage_error(rc) ? rc : b[home].rc, true);
        if (tries % 500 == 0) /* about every 10 s: an operator must act */
            XT_WARN("group: txid %llx in doubt: site %u answers %d to commit, %d to abort; "
                    "retrying", (unsigned long long)txid, b[home].site, b[home].rc, rc);
        xt_sleep_ms(g->o.retry_ms ? g->o.retry_ms : MDS_GROUP_RETRY_MS);
    }

    if (moving)
        XT_CRASH_POINT("move.decided");
    /* Phase 2: decided. Every other participant must commit; retry. In
     * stages: the decision record's copies first (mds_group.h "Decision
     * record"), then under move_x_first the old sites of moves
     * (tombstones), then the rest. */
    bool x_first = moving && g->o.move_x_first;
    bool done[nb ? nb : 1];
    memset(done, 0, sizeof done);
    done[home] = true;
    enum { STAGE_COPIES, STAGE_MOVED_OUT, STAGE_REST };
    for (int stage = STAGE_COPIES; stage <= STAGE_REST; stage++) {
        if (stage == STAGE_MOVED_OUT && !x_first)
            continue;
        for (size_t i = 0; i < nb; i++)
            sel[i] = !done[i] && (stage == STAGE_REST ||
                                  (stage == STAGE_COPIES ? b[i].decision : b[i].moved_out));
        for (;;) {
            run_batches(g, b, nb, sel, OP_COMMIT);
            bool more = false;
            for (size_t i = 0; i < nb; i++) {
                if (!sel[i])
                    continue;
                if (b[i].rc == 0) {
                    sel[i] = false;
                    done[i] = true;
                } else if (b[i].rc == -EINVAL) {
                    XT_ERR("group: site %u aborted txid %llx after voting yes", b[i].site,
                           (unsigned long long)txid);
                    sel[i] = false;
                    done[i] = true;
                } else {
                    more = true;
                }
            }
            if (!more)
                break;
            if (mds_group_stopping(g))
                return -ESHUTDOWN; /* committed at home: recovery finishes it */
            for (size_t i = 0; i < nb; i++)
                if (sel[i])
                    mds_group_note_storage_error(g, b[i].rc, true);
            xt_sleep_ms(g->o.retry_ms ? g->o.retry_ms : MDS_GROUP_RETRY_MS);
        }
        if (stage == STAGE_MOVED_OUT)
            XT_CRASH_POINT("move.x_committed");
    }
    return 0;
}

static void mds_group_tx_free(struct mds_group_tx *t)
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

static int mds_group_tx_add(struct mds_group_tx *t, uint32_t site, const struct xt_store_rec *r)
{
    long bi = batch_for(t, site);
    int rc = bi < 0 ? (int)bi : batch_add(&t->b[bi], r);
    if (rc == 0 && (r->flags & XT_STORE_F_MOVED))
        t->b[bi].moved_out = true;
    return rc;
}

static int tx_add_replicas(mds_group *g, struct mds_group_tx *t, uint32_t site,
                           const struct xt_store_rec *r)
{
    uint32_t rs[MDS_REPLICAS_MAX];
    uint32_t n = mds_place_replicas(g->o.place, r->id.fsid, r->id.table, r->id.slice, rs);
    if (rs[0] != site) {
        rs[0] = site;
        n = 1;
    }
    int rc = 0;
    for (uint32_t i = 0; i < n && rc == 0; i++)
        rc = mds_group_tx_add(t, rs[i], r);
    return rc;
}

static int mds_group_tx_commit(mds_group *g, uint64_t txid, struct mds_group_tx *t)
{
    uint8_t dec[MDS_DECISION_SIZE];
    mds_group_decision_encode(dec, g->o.site_id, mds_txid_epoch(txid), txid);
    struct xt_store_rec r = {
        .type = XT_STORE_IMAGE,
        .id = { .fsid = MDS_COORD_FSID, .slice = g->o.site_id, .table = MDS_COORD_TABLE },
        .version = txid, .data = dec, .len = sizeof dec,
    };
    long home = -ENOMEM;
    int rc = 0;
    assert(g->ndec >= 1 && g->dec_sites[0] == g->o.home_site);
    for (size_t i = 0; i < g->ndec && rc == 0; i++) { /* the home and its copies */
        long bi = batch_for(t, g->dec_sites[i]);
        rc = bi < 0 ? (int)bi : batch_add(&t->b[bi], &r);
        if (rc == 0)
            t->b[bi].decision = true;
        if (i == 0)
            home = bi;
    }
    for (size_t i = 0; i < t->nb && rc == 0; i++)
        for (size_t j = 0; j < t->b[i].n; j++)
            if (t->reserve)
                t->b[i].recs[j].flags |= XT_STORE_F_RESERVE;
    if (rc == 0)
        rc = tx_run(g, txid, t->b, t->nb, (size_t)home);
    mds_group_tx_free(t);
    if (rc == 0) {
        pthread_mutex_lock(&g->mu);
        assert(txid > g->last_txid); /* invariant 5: txids only grow */
        g->last_txid = txid;
        pthread_mutex_unlock(&g->mu);
    }
    return rc;
}

static int mds_group_claim_epoch(mds_group *g, uint32_t prev_epoch)
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

static int mds_group_next_txid(mds_group *g, uint64_t *txid)
{
    if (g->seq + 1 >= (1u << MDS_TXID_SEQ_BITS)) {
        int rc = mds_group_claim_epoch(g, g->epoch);
        if (rc < 0)
            return rc;
    }
    *txid = mds_txid_make(g->o.site_id, g->epoch, ++g->seq);
    /* Invariant 5: bit 63 clear, this MDS's site on top. */
    assert(!(*txid >> 63) && mds_txid_site(*txid) == g->o.site_id);
    return 0;
}

/* ==== decision records, recovery, participants ========================== */

void mds_group_decision_encode(uint8_t *b, uint32_t site, uint32_t epoch, uint64_t txid)
{
    assert(site >= 1 && site <= MDS_SITE_MAX && epoch < (1u << MDS_TXID_EPOCH_BITS));
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
    assert(xt_mutex_held(&g->mu));
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
    for (size_t i = 1; i < g->ndec; i++)
        if (site == g->dec_sites[i])
            return -EBUSY; /* holds decision records, as the home does */
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
 * *epoch and *last stay 0 when none holds one; *at is the lowest participant
 * holding that record (its home: the copies have higher ids), `home` when
 * none holds one. Any participant that cannot answer fails the read: the
 * newest record may be the one it holds. */
static int read_decision(mds_group *g, const uint32_t *parts, size_t np, uint32_t site,
                         uint32_t home, uint32_t *epoch, uint64_t *last, uint32_t *at)
{
    *epoch = 0;
    *last = 0;
    *at = home;
    for (size_t p = 0; p < np; p++) {
        struct xt_store_load ld;
        xt_slice_id id = { .fsid = MDS_COORD_FSID, .slice = site, .table = MDS_COORD_TABLE };
        int rc = mds_store_load(g->o.store, parts[p], id, &ld);
        if (rc == -ENOENT)
            continue;
        if (rc < 0)
            return rc;
        uint32_t e = 0;
        uint64_t t = 0;
        if (!ld.has_image || ld.ndeltas)
            rc = -EBADMSG;
        else
            rc = decision_decode(ld.image.data, ld.image.len, site, &e, &t);
        xt_store_load_free(&ld);
        if (rc < 0) {
            XT_ERR("group: site %u: corrupt decision record at site %u", site, parts[p]);
            return rc;
        }
        if (t > *last || (t == *last && parts[p] < *at)) {
            *last = t;
            *epoch = e;
            *at = parts[p];
        }
    }
    return 0;
}

/* How recovery and settling decide a txid t after the decision record
 * they read (invariant 10): t may still commit at its home after that read
 * -- the commit of a killed MDS that the home is still serving, or the
 * transaction in flight of a settled MDS that runs again -- so t is
 * aborted anywhere only once it is aborted at the home, the commit point;
 * the probe is the one the coordinator uses (mds_store.h promise 3).
 * 1: commit (t committed at home); 0: abort (aborted at home now, so it
 * never commits); -ENOENT: home does not know t (no commit of it can be in
 * flight there; a prepare may, so another site's t is left to its
 * coordinator); other < 0: the probe's error. */
static int probe_home(mds_group *g, uint32_t home, uint64_t t)
{
    int rc = mds_store_abort(g->o.store, home, t);
    return rc == -EINVAL ? 1 : rc;
}

/* Invariant 4: settle every prepared txid of `site` at every participant
 * by its decision record: committed up to the last txid it names, aborted
 * after (once aborted at the home: probe_home). *epoch_out and *last_out:
 * what the record says (0: no record). `own`: this MDS's recovery, before
 * its first transaction (its coordinator is gone); otherwise the site may
 * be running again. */
static int settle(mds_group *g, uint32_t site, bool own, uint32_t *epoch_out,
                  uint64_t *last_out)
{
    uint32_t *parts, epoch, home;
    size_t np;
    uint64_t last;
    int rc = mds_group_participants(g, &parts, &np);
    if (rc < 0)
        return rc;
    if ((rc = read_decision(g, parts, np, site, g->o.home_site, &epoch, &last, &home)) < 0)
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
            if (!commit) {
                int v = probe_home(g, home, tx[i]);
                if (v == -ENOENT && !own) {
                    XT_INFO("group: settle leaves txid %llx of site %u at site %u to its "
                            "coordinator: home %u does not know it",
                            (unsigned long long)tx[i], site, parts[p], home);
                    continue;
                }
                if (v < 0 && v != -ENOENT) {
                    rc = v;
                    break;
                }
                /* Invariant 10: aborted here only once aborted at the home
                 * (v 0) or, at recovery, unknown there (v -ENOENT). */
                assert(v == 1 || v == 0 || (own && v == -ENOENT));
                commit = v == 1;
            }
            rc = commit ? mds_store_commit(g->o.store, parts[p], tx[i])
                        : mds_store_abort(g->o.store, parts[p], tx[i]);
            XT_INFO("group: %s %s txid %llx of site %u at site %u: %d",
                    own ? "recovery" : "settle", commit ? "commits" : "aborts",
                    (unsigned long long)tx[i], site, parts[p], rc);
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

static int mds_group_recover(mds_group *g, uint32_t *epoch_out)
{
    uint32_t epoch;
    uint64_t last;
    int rc = settle(g, g->o.site_id, true, &epoch, &last);
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
    return site == g->o.site_id ? -EINVAL : settle(g, site, false, &epoch, &last);
}
