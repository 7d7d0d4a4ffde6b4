/*
 * mds_group.c -- commit groups: writers, snapshots, the committer that
 * closes a group and hands its records to the two-phase commit
 * (mds_group_tx.c), syncs, lifetime (see mds_group.h for the states and
 * invariants, and docs/mds-commit.md for the protocol).
 *
 * Threads: writers call enter/touch/leave; one committer thread closes
 * groups and runs their transactions, one at a time; syncers wait on
 * cv_done. Locks: a slice's write lock may be held when taking g->mu
 * (touch), never the reverse; the committer holds no lock across a store
 * call, and takes each slice lock alone.
 *
 * Ring-1 moves (docs/mdsl-scale.md "Moves inside a commit"): a slice's record goes
 * to cm.snap_site, the current placement read when its snapshot is taken
 * (under its write lock), so a placement change after that cannot split an
 * image from its tombstone. When snap_site differs from cm.site (where its
 * records are) the record is an image and cm.site gets a MOVED tombstone at
 * the same version in the same transaction; after the commit cm.site =
 * snap_site. Recovery, settling and the participants: mds_group_recover.c.
 * The fault tests' POM_MDS_MOVE_CRASH (read at open) acts in mds_group_tx.c.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mds_group_i.h"
#include "xt_common.h"

#define DEFAULT_INTERVAL_MS 5000u
#define DEFAULT_DIRTY_BOUND ((size_t)64 << 20)
#define FLUSH_TIMEOUT_MS    10000u

/* ---- small helpers ---------------------------------------------------- */

static void deadline_in(struct timespec *ts, unsigned ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Promise `more` appends (dlist_append) that cannot fail. REQUIRES: mu held. */
static int dlist_reserve(struct dlist *l, size_t more)
{
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

/* REQUIRES: mu held; a slot reserved. */
static void dlist_append(struct dlist *l, mds_cent *e)
{
    l->resv--;
    l->v[l->n++] = e;
}

static void sleep_us(unsigned us)
{
    struct timespec ts = { 0, (long)us * 1000L };
    nanosleep(&ts, NULL);
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
    if (image) {
        if ((rc = xt_slice_encode(s, &buf, &len)) < 0)
            return rc;
        xt_slice_clear_needs_image(s);
        cm->force_image = false;
        if (budgeted)
            move_budget_bytes(g, gen, len);
    }
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
    int rc = dlist_reserve(&g->list[want & 1], 1);
    pthread_mutex_unlock(&g->mu);
    if (rc < 0)
        return rc;
    bool pending = cm->dirty_gen > cm->durable_gen && cm->snapped_gen < cm->dirty_gen;
    if (pending) {
        /* Copy-on-write: the closed group's view must not see our change. */
        if ((rc = take_snapshot(g, e, cm->dirty_gen)) < 0) {
            pthread_mutex_lock(&g->mu);
            g->list[want & 1].resv--;
            pthread_mutex_unlock(&g->mu);
            return rc;
        }
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
    dlist_append(&g->list[want & 1], e);
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

/* ---- the committer --------------------------------------------------------- */

/* Write group gen's dirty slices (list l, pins owned) and settle them. */
static void commit_group(mds_group *g, uint64_t gen, struct dlist *l)
{
    uint64_t t0 = xt_mono_ns();
    struct mds_group_tx t = { 0 };
    size_t nrec = 0;
    int64_t grow = 0;  /* what the group's slices grew since stored */
    bool frees = false; /* some slice lost rows or bytes since stored */
    int rc = 0;
    for (size_t i = 0; i < l->n; i++) {
        mds_cent *e = l->v[i];
        struct mds_cent_commit *cm = mds_cent_commit(e);
        xt_slice *s = mds_cent_slice(e);
        xt_slice_wrlock(s);
        if (cm->snapped_gen < gen && rc == 0) {
            /* Invariant 2: only an entry still stamped gen may be
             * snapshotted now; a newer writer would have copied it. */
            if (cm->dirty_gen != gen)
                XT_ERR("group: slice %u of table %llu lost its copy-on-write",
                       mds_cent_key(e)->slice, (unsigned long long)mds_cent_key(e)->table);
            rc = take_snapshot(g, e, gen);
        }
        if (rc == 0 && cm->snap) {
            const struct mds_key *k = mds_cent_key(e);
            struct mds_rec r = {
                .fsid = k->fsid, .table = k->table, .slice = k->slice,
                .version = cm->version + 1, .full_image = cm->snap_image,
                .bytes = cm->snap, .len = cm->snap_len, .sys = cm->snap_sys,
            };
            rc = mds_group_tx_add(&t, cm->snap_site, &r);
            if (rc == 0 && cm->snap_site != cm->site) {
                /* The move's other half: same txid, same version. */
                static const uint8_t none[1];
                struct mds_rec tomb = {
                    .fsid = k->fsid, .table = k->table, .slice = k->slice,
                    .version = r.version, .full_image = true, .bytes = none, .len = 0,
                    .moved = true,
                };
                rc = mds_group_tx_add(&t, cm->site, &tomb);
            }
            nrec++;
            grow += (int64_t)cm->snap_mem - (int64_t)cm->durable_mem;
            frees |= cm->snap_mem < cm->durable_mem || cm->snap_rows < cm->durable_rows;
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
    mds_group_note_storage_error(g, rc);
    if (rc < 0) {
        /* Keep everything dirty: the entries still stamped gen join the
         * open group (their pin moves with them). */
        pthread_mutex_lock(&g->mu);
        while (dlist_reserve(&g->list[open & 1], l->n) < 0) {
            pthread_mutex_unlock(&g->mu);
            if (mds_group_stopping(g))
                return; /* out of memory at a stop: abandoned as above */
            mds_group_note_storage_error(g, -ENOMEM); /* stuck here: syncers hear of it */
            mds_group_sleep_ms(MDS_GROUP_RETRY_MS);
            pthread_mutex_lock(&g->mu);
        }
        pthread_mutex_unlock(&g->mu);
    }
    size_t moved = 0, reserved = rc < 0 ? l->n : 0;
    for (size_t i = 0; i < l->n; i++) {
        mds_cent *e = l->v[i];
        struct mds_cent_commit *cm = mds_cent_commit(e);
        xt_slice *s = mds_cent_slice(e);
        bool keep_pin = false;
        xt_slice_wrlock(s);
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
                    cm->delta_bytes = 0;
                } else {
                    cm->delta_bytes += cm->snap_len;
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
            cm->snapped_gen = 0;
            if (cm->dirty_gen == gen) {
                pthread_mutex_lock(&g->mu);
                dlist_append(&g->list[open & 1], e);
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
    if (rc == 0) {
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
        mds_group_sleep_ms(g->o.retry_ms ? g->o.retry_ms : MDS_GROUP_RETRY_MS);
}

static void *committer(void *arg)
{
    mds_group *g = arg;
    unsigned interval = g->o.commit_interval_ms ? g->o.commit_interval_ms : DEFAULT_INTERVAL_MS;
    struct timespec deadline;
    deadline_in(&deadline, interval);
    struct dlist work = { 0 };
    pthread_mutex_lock(&g->mu);
    while (!mds_group_stopping(g)) {
        uint64_t open = atomic_load(&g->open_gen);
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        bool timeup = now.tv_sec > deadline.tv_sec ||
                      (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec);
        bool early = g->want_gen >= open || g->kicked;
        if (!early && !(timeup && g->list[open & 1].n > 0)) {
            if (timeup)
                deadline_in(&deadline, interval);
            pthread_cond_timedwait(&g->cv_commit, &g->mu, &deadline);
            continue;
        }
        if (early && !timeup)
            mds_stats_add(g->o.stats, MDS_CTR_EARLY_CLOSES, 1);
        g->kicked = false;
        /* Close: from here new writers join open + 1 (invariant 1). */
        atomic_store(&g->open_gen, open + 1);
        atomic_store(&g->dirty_bytes, 0);
        pthread_mutex_unlock(&g->mu);

        while (atomic_load(&g->inflight[open & 1]) != 0)
            sleep_us(20);

        pthread_mutex_lock(&g->mu);
        struct dlist tmp = g->list[open & 1];
        g->list[open & 1] = work; /* recycle the array */
        work = tmp;
        pthread_mutex_unlock(&g->mu);

        commit_group(g, open, &work);
        deadline_in(&deadline, interval);
        pthread_mutex_lock(&g->mu);
        if (work.n) { /* abandoned by a stop: give the pins back to a list */
            struct dlist *l = &g->list[open & 1];
            if (dlist_reserve(l, work.n) == 0) {
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
    struct timespec deadline;
    if (timeout_ms)
        deadline_in(&deadline, timeout_ms);
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
         * began (aborted, or in doubt at the home participant): the changes
         * stay dirty or undecided (a later attempt may still make them
         * durable) but the caller learns now, as fsync(2) reports a failed
         * write, instead of at its timeout. */
        if (g->storage_errs != errs0 && g->storage_streak >= MDS_GROUP_STORAGE_ERR_TRIES &&
            g->storage_err) {
            rc = g->storage_err;
            break;
        }
        if (g->want_gen < gen) {
            g->want_gen = gen;
            pthread_cond_signal(&g->cv_commit);
        }
        if (timeout_ms) {
            if (pthread_cond_timedwait(&g->cv_done, &g->mu, &deadline) == ETIMEDOUT &&
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
        o->site_id > MDS_SITE_MAX || (o->nparticipants && !o->participants))
        return -EINVAL;
    mds_group *g = xt_calloc(1, sizeof *g);
    if (!g)
        return -ENOMEM;
    g->o = *o;
    g->move_crash = getenv("POM_MDS_MOVE_CRASH");
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
    g->o.participants = NULL; /* the caller's array: g->parts from here */
    g->o.nparticipants = 0;
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&g->cv_commit, &ca);
    pthread_cond_init(&g->cv_done, &ca);
    pthread_condattr_destroy(&ca);
    atomic_store(&g->open_gen, 1);

    uint32_t epoch;
    int rc = mds_group_recover(g, &epoch);
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
