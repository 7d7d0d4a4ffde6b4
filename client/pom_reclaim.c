/*
 * pom_reclaim.c -- the orphan tract-set reclaimer of libpomegranate
 * (pom_reclaim_start, pomegranate.h; docs/format-blob.md "Reclaiming
 * orphans"). An *orphan* is a tract set no row names: a client or daemon
 * crash between writing a set and the flush that names it, or between a
 * row's delete and the queued removal of its set (pom_file.c). One thread
 * per pom_fs:
 *
 *   every tick (min(interval, grace / 4)) ---> lease: pom_blob_touch of
 *                                              every set open here
 *   every interval, if pom_blob_reclaim_lock -> pass: walk, list, remove
 *
 * The thread is an xt_worker: floor 3 of libpomegranate, above pom_file.c
 * (pom_data_held) and the blob tier.
 *
 * Invariants:
 *  (1) A set a live client holds is never taken: every client running
 *      this thread touches the sets of its open files (pom_data_held)
 *      every tick, and a pass removes only sets whose newest mtime is
 *      at least `grace` old (grace >= 4 ticks). A closed file's set is
 *      named by its row: pom_release flushes before it returns.
 *  (2) A set is removed only when two passes, at least one interval
 *      apart, both found no row naming it: a walk racing a rename (a file
 *      moved from a table not listed yet into one listed already) misses
 *      the row once, not twice in a row.
 *  (3) A pass that cannot list a table (other than one that is gone,
 *      -ENOENT) removes nothing: a row it did not see would make its set
 *      look orphan.
 *  (4) One reclaimer per store at a time where the backend has a lock
 *      (pom_blob_reclaim_lock: a flock in the store's first folder for
 *      `local`, a RADOS lock for `rados`); the others only lease. `mdsl`
 *      has none: every reclaiming client runs passes, each safe alone by
 *      (1)-(3).
 *  (5) Backend-neutral: it uses pom_blob_list (each set with its age),
 *      pom_blob_delete, pom_blob_touch and the lock, nothing of a layout.
 *
 * The walk lists every directory table from the root (one xTable list
 * call per 1,024 rows, fixed columns only) and then the ILT (hard-linked
 * files' rows); a row with XT_ROW_F_BLOB names pom_tracts_id. Link stubs
 * carry no tracts id: their ILT row does.
 */
#include "pom_file_i.h"
#include "pom_blob.h"
#include "xt_time.h"
#include "xt_worker.h"

#include <stdlib.h>
#include <string.h>

struct pom_reclaim {
    pom_fs *fs;
    unsigned interval_s, grace_s;
    uint64_t tick_ms;        /* immutable */
    xt_worker *w;            /* runs step() every tick_ms */
    uint64_t next_pass;      /* worker only: deadline of the next pass */
    /* Orphans old enough at the previous pass, sorted (worker only). */
    uint64_t *cand;
    size_t ncand;
};

struct ids {
    uint64_t *v;             /* xt_malloc'd */
    size_t n, cap;
};

static int ids_push(struct ids *s, uint64_t id)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 256;
        uint64_t *nv = xt_realloc(s->v, cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = id;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool ids_has(const uint64_t *v, size_t n, uint64_t id)
{
    return n && bsearch(&id, v, n, sizeof *v, cmp_u64) != NULL;
}

/* Lists table `t`: fn for each of its blob rows, directory uuids into
 * dirs (when not NULL). -ENOENT: no such table (never had an entry, or
 * removed meanwhile). */
static int list_table(pom_fs *fs, uint64_t t, pom_named_fn fn, void *arg, struct ids *dirs)
{
    static const uint16_t none[1] = { 0 };
    uint64_t cookie = 0;
    while (cookie < POM_COOKIE_END) {
        struct xt_list_req lq = { .t = { .fsid = fs->fsid, .table = t, .slice_hint = -1 },
                                  .cookie = cookie, .max = 1024, .cols = none, .ncols = 0 };
        struct xt_list_resp lr;
        int rc = pom_list_call(fs, &lq, &lr);
        if (rc < 0)
            return rc;
        for (size_t i = 0; rc == 0 && i < lr.n; i++) {
            xt_row row;
            if (xt_row_decode_meta(lr.rows[i], lr.lens[i], &row) < 0) {
                XT_WARN("tracts walk: a row of table %llu does not decode: %s",
                        (unsigned long long)t, xt_row_last_error());
                rc = -EIO;
            } else if (row.attr.flags & XT_ROW_F_BLOB) {
                rc = fn(arg, pom_tracts_id(&row.attr), row.attr.uuid);
            } else if (dirs && row.attr.type == XT_ROW_DIR) {
                rc = ids_push(dirs, row.attr.uuid);
            }
        }
        cookie = lr.next_cookie;
        xt_list_resp_free(&lr);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int pom_tracts_named(pom_fs *fs, pom_named_fn fn, void *arg)
{
    struct ids dirs = { 0 };
    int rc = ids_push(&dirs, POM_ROOT_INO);
    for (size_t k = 0; rc == 0 && k < dirs.n; k++) {
        rc = list_table(fs, dirs.v[k], fn, arg, &dirs);
        if (rc == -ENOENT)
            rc = 0;
    }
    xt_free(dirs.v);
    if (rc == 0) {
        rc = list_table(fs, XT_NS_TABLE_ILT, fn, arg, NULL);
        if (rc == -ENOENT)
            rc = 0;
    }
    return rc;
}

static int push_ref(void *arg, uint64_t id, uint64_t uuid)
{
    (void)uuid;
    return ids_push(arg, id);
}

/* Every tracts id a row names or this client holds into refs, sorted.
 * 0 or -errno (invariant (3)). */
static int walk(pom_fs *fs, struct ids *refs)
{
    int rc = pom_tracts_named(fs, push_ref, refs);
    uint64_t *held;
    size_t nheld;
    if (rc == 0 && (rc = pom_data_held(fs, &held, &nheld)) == 0) {
        for (size_t i = 0; rc == 0 && i < nheld; i++)
            rc = ids_push(refs, held[i]);
        xt_free(held);
    }
    if (rc == 0 && refs->n > 1)
        qsort(refs->v, refs->n, sizeof *refs->v, cmp_u64);
    return rc;
}

struct pass {
    const struct ids *refs;
    const struct pom_reclaim *r;
    int64_t now_ns;
    struct ids old;          /* orphans at least grace old (next pass's cand) */
    struct ids doomed;       /* ... that were candidates already: removed */
    uint64_t sets, orphans;
};

static int on_set(void *arg, const struct pom_blob_set *s)
{
    struct pass *p = arg;
    p->sets++;
    if (ids_has(p->refs->v, p->refs->n, s->id))
        return 0;
    p->orphans++;
    if (p->now_ns - s->mtime_ns < (int64_t)p->r->grace_s * 1000000000)
        return 0; /* maybe being written (invariant (1)) */
    int rc = ids_push(&p->old, s->id);
    if (rc == 0 && ids_has(p->r->cand, p->r->ncand, s->id))
        rc = ids_push(&p->doomed, s->id);
    return rc;
}

/* One pass (the reclaimer lock held). */
static int pass(struct pom_reclaim *r)
{
    pom_fs *fs = r->fs;
    struct ids refs = { 0 };
    struct pass p = { .refs = &refs, .r = r };
    uint64_t t0 = xt_mono_ns();
    int rc = walk(fs, &refs);
    if (rc == 0) {
        p.now_ns = (int64_t)xt_now_ns();
        rc = pom_blob_list(fs->blob, on_set, &p); /* ids in increasing order */
    }
    uint64_t removed = 0, bytes = 0;
    for (size_t i = 0; rc == 0 && i < p.doomed.n; i++) {
        struct pom_blob_stat st;
        if (pom_blob_stat(fs->blob, p.doomed.v[i], &st) < 0)
            st.alloc_bytes = 0;
        int e = pom_blob_delete(fs->blob, p.doomed.v[i]);
        if (e < 0) {
            XT_WARN("reclaim: orphan tract set %016llx stays: %s",
                    (unsigned long long)p.doomed.v[i], strerror(-e));
            continue;
        }
        removed++;
        bytes += st.alloc_bytes;
    }
    if (rc == 0) {
        xt_free(r->cand); /* the list gave ids in order: old is sorted */
        r->cand = p.old.v;
        r->ncand = p.old.n;
        p.old.v = NULL;
        XT_INFO("reclaim: %llu tract sets (%llu ids named), %llu orphans; removed %llu "
                "(%llu bytes) in %llu ms",
                (unsigned long long)p.sets, (unsigned long long)refs.n,
                (unsigned long long)p.orphans, (unsigned long long)removed,
                (unsigned long long)bytes, (unsigned long long)((xt_mono_ns() - t0) / 1000000));
    } else {
        XT_WARN("reclaim: pass stopped, nothing removed: %s", strerror(-rc));
    }
    xt_free(refs.v);
    xt_free(p.old.v);
    xt_free(p.doomed.v);
    return rc;
}

/* Invariant (1): the lease of every set open here. */
static void lease(pom_fs *fs)
{
    uint64_t *held;
    size_t n;
    if (pom_data_held(fs, &held, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++) {
        int rc = pom_blob_touch(fs->blob, held[i]);
        if (rc < 0)
            XT_WARN("reclaim: cannot renew the lease of tract set %016llx: %s",
                    (unsigned long long)held[i], strerror(-rc));
    }
    xt_free(held);
}

/* One tick of the worker: the lease, and a pass when one is due. */
static uint64_t step(xt_worker *w, void *arg)
{
    (void)w;
    struct pom_reclaim *r = arg;
    lease(r->fs);
    if (r->interval_s && xt_deadline_passed(r->next_pass)) {
        int token;
        int got = pom_blob_reclaim_lock(r->fs->blob, &token);
        if (got == 1) {
            pass(r);
            pom_blob_reclaim_unlock(r->fs->blob, token);
        } else if (got < 0) {
            XT_WARN("reclaim: cannot take the reclaimer lock: %s", strerror(-got));
        }
        r->next_pass = xt_deadline_ms((uint64_t)r->interval_s * 1000);
    }
    return r->tick_ms;
}

int pom_reclaim_start(pom_fs *fs, unsigned interval_s, unsigned grace_s)
{
    if (!fs->blob)
        return -ENOENT;
    if (fs->reclaim || grace_s == 0)
        return -EINVAL;
    struct pom_reclaim *r = xt_calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->fs = fs;
    r->interval_s = interval_s;
    r->grace_s = grace_s;
    /* A tick: a quarter of the grace age (invariant 1), at most the
     * interval, at least 100 ms. */
    r->tick_ms = (uint64_t)grace_s * 1000 / 4;
    if (interval_s && (uint64_t)interval_s * 1000 < r->tick_ms)
        r->tick_ms = (uint64_t)interval_s * 1000;
    r->tick_ms = XT_MAX(r->tick_ms, (uint64_t)100);
    r->next_pass = xt_deadline_ms((uint64_t)interval_s * 1000);
    struct xt_worker_opts o = { .name = "pom-reclaim", .step = step, .arg = r,
                                .first_ms = r->tick_ms };
    int rc = xt_worker_start(&o, &r->w);
    if (rc < 0) {
        xt_free(r);
        return rc;
    }
    fs->reclaim = r;
    return 0;
}

void pom_reclaim_stop(pom_fs *fs)
{
    struct pom_reclaim *r = fs->reclaim;
    if (!r)
        return;
    xt_worker_stop(r->w); /* a pass in progress ends first */
    xt_free(r->cand);
    xt_free(r);
    fs->reclaim = NULL;
}
