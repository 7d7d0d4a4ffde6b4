/*
 * mdsl_space.c -- getting space back after ring-1 moves (docs/mdsl-scale.md
 * "Space back"): a moved slice leaves only a MOVED tombstone here, and its
 * older records wait in append-only segments that GC takes only under 25 %
 * live. Three tools:
 *
 *   drop   a folder whose every slice head is MOVED is removed whole:
 *          1. rename t.F.T to t.F.T.drop (recovery ignores the name),
 *          2. one synced index batch deletes every pointer of the table and
 *             its resume key,
 *          3. the folder leaves the table (readers that pinned it finish on
 *             the renamed files), the writer token is given back,
 *          4. its files are unlinked and the directory removed.
 *          Steps 1-3 hold the writer token (no prepare or commit can touch
 *          the folder meanwhile), step 4 holds nothing. A restart finds the
 *          .drop and does 2 (only if no live folder of the table exists:
 *          after 2 the table's keys may belong to a new folder) and 4.
 *   roll   an active segment idle roll_idle_ms under gc_threshold gets an
 *          empty successor (created under the writer token), so it is
 *          closed and GC may take it.
 *   sweep  every active segment under a threshold is rolled, then GC runs at
 *          that threshold until nothing is left under it (after a join,
 *          0.6: losing 1/N of a segment's live bytes leaves it above 25 %).
 *          The sweep a change owes is marked in the index ('W' key, synced)
 *          before this MDSL reports any count for that change, so a restart
 *          between the change's end and the sweep still sweeps (the
 *          reporter asks it at the first view past MOVING after start).
 *
 * Invariants:
 *  (1) A folder is dropped only if, under the writer token, it has no
 *      pending prepare, no COLUMN pointer, no md record, at least one slice
 *      and every slice's newest image (its first pointer, mdsl_apply.c rule
 *      1) is MOVED; the decision that the moves are final (the change is
 *      past MOVING) is the caller's.
 *  (2) The table's pointers are deleted (synced) before any of its files is
 *      unlinked; the rename comes first, so at every crash point either
 *      nothing happened or recovery finds the .drop and completes it.
 *  (3) No lock is held across I/O; the writer token is held for one drop's
 *      check, rename and index batch, or for creating the rolled segments.
 *  (4) Everything here runs under the background token (mdsl_handle_i.h),
 *      so GC never works on a folder a drop removes.
 *  (5) The sweep-owed mark is written and deleted under the writer token,
 *      so the index's 'W' key and s->sweep_owed change together and a
 *      sweep's clear never deletes the mark of a later change (it deletes
 *      only the seq it found owed when it started).
 *
 * A full disk (docs/format-mdsl.md "A full disk"), as ext4 keeps blocks
 * for root: the device's last `reserve` bytes are only for prepares that
 * free at least what they add (XT_STORE_F_RESERVE: deletes, truncates, shrinking
 * images), for commits and aborts (never checked: a prepared transaction
 * must be able to finish) and for GC. So a disk that fills with new data
 * still takes the deletes that empty it, and GC can copy live records out
 * of the segments they emptied.
 *  (6) A prepare without XT_STORE_F_RESERVE on every record is refused with
 *      -ENOSPC, before anything is written, when it would leave less than
 *      `reserve` free. Nothing else is refused for the reserve.
 *  (7) GC's threshold rises as free space falls (mdsl_space_gc_threshold),
 *      and under pressure active segments with dead bytes are rolled at
 *      once, so emptied records come back without waiting roll_idle_ms.
 *      Under pressure GC takes only a segment whose live bytes fit in
 *      three quarters of the free space, reserve included
 *      (mdsl_space_gc_room): a copy cut short by a full disk frees nothing
 *      and keeps what it wrote.
 */
#include "mdsl_handle_i.h"
#include "mdsl_gc_i.h"
#include "mdsl_space_i.h"

#include "xt_crash.h"
#include "xt_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An active segment with fewer dead bytes than this is never rolled: the
 * roll would free nothing worth a file, and a folder whose only content is
 * an empty GCMOVE would otherwise be rolled and collected forever. */
#define ROLL_MIN_DEAD 4096u
/* A drop pass that met a pending prepare tries again after this. */
#define DROP_RETRY_NS (UINT64_C(10) * 1000000000u)
/* Pause between two drops: each holds the writer token for a rename and a
 * synced index batch, so commits get the token between them (at most ~500
 * drops a second). */
#define DROP_PAUSE_MS 2

struct tabid {
    uint32_t fsid;
    uint64_t table;
};

struct tabs {
    struct tabid *v;
    size_t n, cap;
};

static int tabs_add(struct tabs *t, uint32_t fsid, uint64_t table)
{
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 16;
        struct tabid *nv = xt_realloc(t->v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        t->v = nv;
        t->cap = nc;
    }
    t->v[t->n++] = (struct tabid){ fsid, table };
    return 0;
}

/* ---- which folders: one walk of the 'S' keys --------------------------- */

struct walk {
    struct tabs cand;
    bool in_table, all_moved;
    uint32_t fsid, slice;
    uint64_t table;
};

static int walk_flush(struct walk *w)
{
    int rc = w->in_table && w->all_moved ? tabs_add(&w->cand, w->fsid, w->table) : 0;
    w->in_table = false;
    return rc;
}

static int walk_ptr(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    struct walk *w = arg;
    bool same_table = w->in_table && k->id.fsid == w->fsid && k->id.table == w->table;
    if (same_table && k->id.slice == w->slice)
        return 0; /* only a slice's first pointer is its head */
    if (!same_table) {
        int rc = walk_flush(w);
        if (rc < 0)
            return rc;
        *w = (struct walk){ .cand = w->cand, .in_table = true, .all_moved = true,
                            .fsid = k->id.fsid, .table = k->id.table };
    }
    w->slice = k->id.slice;
    w->all_moved &= p->type == XT_STORE_IMAGE && (p->flags & XT_STORE_F_MOVED);
    return 0;
}

/* ---- one folder -------------------------------------------------------- */

struct tkeys {
    struct mdsl_ikey *v;
    size_t n, cap;
    bool droppable;
    uint32_t last_slice;
    size_t nslices;
};

/* Invariant (1) for the table's pointers, collecting their keys. */
static int tkeys_add(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    struct tkeys *t = arg;
    if (k->kind == MDSL_IK_COLUMN)
        t->droppable = false;
    else if (t->n == 0 || k->id.slice != t->last_slice) {
        t->droppable &= p->type == XT_STORE_IMAGE && (p->flags & XT_STORE_F_MOVED);
        t->nslices++;
    }
    t->last_slice = k->id.slice;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 16;
        struct mdsl_ikey *nv = xt_realloc(t->v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        t->v = nv;
        t->cap = nc;
    }
    t->v[t->n++] = *k;
    return 0;
}

/* Delete every pointer of the table and its resume key, synced. */
static int unindex(mdsl_store *s, uint32_t fsid, uint64_t table, const struct tkeys *t)
{
    mdsl_index_batch *b = mdsl_index_batch_new();
    if (!b)
        return -ENOMEM;
    for (size_t i = 0; i < t->n; i++)
        mdsl_index_batch_del(b, &t->v[i]);
    mdsl_index_batch_del_resume(b, fsid, table);
    int rc = mdsl_index_write(s->idx, b, true);
    mdsl_index_batch_free(b);
    return rc;
}

struct unl {
    mdsl_store *s;
    const char *dir;
    int err;
};

static int unlink_one(const char *name, bool is_dir, void *arg)
{
    struct unl *u = arg;
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", u->dir, name);
    int rc = is_dir ? -EISDIR : mdsl_io_unlink(u->s->io, path);
    if (rc < 0 && !u->err)
        u->err = rc; /* go on: unlink what can be, a restart retries the rest */
    return 0;
}

/* Step 4: unlink what a .drop holds and remove it. */
static int remove_dir(mdsl_store *s, const char *dir)
{
    struct unl u = { s, dir, 0 };
    int rc = mdsl_io_list(s->io, dir, unlink_one, &u);
    if (rc == 0)
        rc = u.err;
    if (rc == 0)
        rc = mdsl_io_rmdir(s->io, dir);
    if (rc < 0)
        XT_WARN("mdsl: removing %s: %s (the next start retries)", dir, strerror(-rc));
    return rc;
}

/* REQUIRES: mu held. */
static bool has_pending(mdsl_store *s, const struct folder *fo)
{
    assert(xt_mutex_held(&s->mu));
    for (struct ptx *t = s->pending; t; t = t->next)
        for (size_t i = 0; i < t->nparts; i++)
            if (t->parts[i].fo == fo)
                return true;
    return false;
}

static uint64_t segarr_bytes(const struct segarr *a)
{
    uint64_t n = 0;
    for (size_t i = 0; i < a->n; i++)
        n += a->v[i]->size;
    return n;
}

/* Steps 1-4 for one table. 1 dropped, 0 kept (not droppable now; *busy
 * when a pending prepare was the reason), or -errno. */
static int drop_folder(mdsl_store *s, uint32_t fsid, uint64_t table, bool *busy)
{
    assert(s->bg_busy && !xt_mutex_held(&s->mu));
    struct tkeys t = { .droppable = true };
    char dpath[4200] = "";
    mdsl_st_token_take(s);
    pthread_mutex_lock(&s->mu);
    struct folder *fo = mdsl_st_folder_find(s, fsid, table);
    int rc = s->failed;
    bool go = rc == 0 && fo && fo->md_size == 0;
    if (go && has_pending(s, fo)) {
        go = false;
        *busy = true;
    }
    pthread_mutex_unlock(&s->mu);
    if (go) /* the index cannot change under the token: this is final */
        rc = mdsl_index_scan_table(s->idx, fsid, table, tkeys_add, &t);
    go = go && rc == 0 && t.n > 0 && t.droppable;
    if (go) {
        snprintf(dpath, sizeof dpath, "%s.drop", fo->path);
        rc = mdsl_io_rename(s->io, fo->path, dpath);
        if (rc == -EEXIST || rc == -ENOTEMPTY) { /* an older drop's leftovers */
            (void)remove_dir(s, dpath);
            rc = mdsl_io_rename(s->io, fo->path, dpath);
        }
        if (rc == 0) {
            rc = unindex(s, fsid, table, &t);
            if (rc < 0) /* renamed, still indexed: a restart completes it */
                mdsl_st_fail(s, rc, "dropping a moved folder");
        }
    }
    if (go && rc == 0) {
        for (size_t i = 0; i < t.n; i++) /* the slice-state cache follows */
            mdsl_sltab_del(s->slices, t.v[i].id);
        pthread_mutex_lock(&s->mu);
        uint64_t bytes = segarr_bytes(&fo->tss);
        for (size_t g = 0; g < fo->ncs; g++)
            bytes += segarr_bytes(&fo->cs[g].segs);
        mdsl_st_folder_forget(s, fo);
        s->st.dropped_folders++;
        s->st.dropped_bytes += bytes;
        pthread_mutex_unlock(&s->mu);
    }
    mdsl_st_token_put(s);
    xt_free(t.v);
    if (!go || rc < 0)
        return rc;
    XT_INFO("mdsl: dropped %s: its %zu slice(s) all moved away", dpath, t.nslices);
    (void)remove_dir(s, dpath); /* a failure here is finished at restart */
    return 1;
}

static int drop_pass(mdsl_store *s, bool *busy)
{
    struct walk w = { 0 };
    int rc = mdsl_index_scan_slices_after(s->idx, NULL, walk_ptr, &w);
    if (rc == 0)
        rc = walk_flush(&w);
    int dropped = 0;
    for (size_t i = 0; i < w.cand.n && rc == 0; i++) {
        pthread_mutex_lock(&s->mu);
        bool stop = s->gc_stop;
        pthread_mutex_unlock(&s->mu);
        if (stop)
            break;
        if (i)
            xt_sleep_ms(DROP_PAUSE_MS);
        int d = drop_folder(s, w.cand.v[i].fsid, w.cand.v[i].table, busy);
        if (d < 0)
            rc = d;
        else
            dropped += d;
    }
    xt_free(w.cand.v);
    return rc < 0 ? rc : dropped;
}

int mdsl_store_drop_moved(mdsl_store *s)
{
    bool busy = false;
    mdsl_st_bg_take(s);
    int rc = drop_pass(s, &busy);
    mdsl_st_bg_put(s);
    return rc;
}

/* ---- rolls and sweeps -------------------------------------------------- */

struct rollc {
    struct tabid t;
    bool is_cs;
    uint32_t group, no;
};

/* REQUIRES: mu held. */
static bool roll_wanted(const struct segarr *a, double threshold, uint64_t idle_ns, uint64_t now)
{
    const struct seg *sg = a->n ? a->v[a->n - 1] : NULL;
    if (!sg || sg->size == 0)
        return false;
    int64_t live = sg->live > 0 ? sg->live : 0;
    return sg->size - (uint64_t)live >= ROLL_MIN_DEAD &&
           (double)live / (double)sg->size < threshold && sg->wrote_ns <= now &&
           now - sg->wrote_ns >= idle_ns;
}

static int roll_add(struct rollc **v, size_t *n, size_t *cap, struct rollc c)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        struct rollc *nv = xt_realloc(*v, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        *v = nv;
        *cap = nc;
    }
    (*v)[(*n)++] = c;
    return 0;
}

/* Give each active segment under `threshold`, idle idle_ns, an empty
 * successor. Rolled, or -errno. */
static int roll_active(mdsl_store *s, double threshold, uint64_t idle_ns)
{
    struct rollc *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    uint64_t now = xt_mono_ns(); /* under mu: no flush has stamped a later time */
    for (size_t i = 0; i < s->ht_cap && rc == 0; i++)
        for (struct folder *fo = s->ht[i]; fo && rc == 0; fo = fo->hnext) {
            struct tabid t = { fo->fsid, fo->table };
            if (roll_wanted(&fo->tss, threshold, idle_ns, now))
                rc = roll_add(&v, &n, &cap, (struct rollc){ t, false, 0,
                                                            fo->tss.v[fo->tss.n - 1]->no });
            for (size_t g = 0; g < fo->ncs && rc == 0; g++) {
                struct segarr *a = &fo->cs[g].segs;
                if (roll_wanted(a, threshold, idle_ns, now))
                    rc = roll_add(&v, &n, &cap, (struct rollc){ t, true, fo->cs[g].group,
                                                                a->v[a->n - 1]->no });
            }
        }
    pthread_mutex_unlock(&s->mu);
    int rolled = 0;
    if (n)
        mdsl_st_token_take(s); /* appends go to the last segment: none runs now */
    for (size_t i = 0; i < n && rc == 0; i++) {
        pthread_mutex_lock(&s->mu);
        struct folder *fo = mdsl_st_folder_find(s, v[i].t.fsid, v[i].t.table);
        struct segarr *a = fo ? mdsl_st_segarr(fo, v[i].is_cs, v[i].group, false) : NULL;
        bool still = a && a->n && a->v[a->n - 1]->no == v[i].no && !s->failed;
        pthread_mutex_unlock(&s->mu);
        struct seg *sg;
        if (still)
            rc = mdsl_st_seg_add(s, fo, v[i].is_cs, v[i].group, v[i].no + 1, true, &sg);
        rolled += still && rc == 0;
    }
    if (n)
        mdsl_st_token_put(s);
    xt_free(v);
    pthread_mutex_lock(&s->mu);
    s->st.rolled_segments += (uint64_t)rolled;
    pthread_mutex_unlock(&s->mu);
    if (rc < 0)
        XT_WARN("mdsl: rolling idle segments: %s", strerror(-rc));
    return rc < 0 ? rc : rolled;
}

int mdsl_store_roll_idle(mdsl_store *s)
{
    mdsl_st_bg_take(s);
    int rc = roll_active(s, s->o.gc_threshold, (uint64_t)s->o.roll_idle_ms * 1000000u);
    mdsl_st_bg_put(s);
    return rc;
}

/* Set the mark to `to` if it still says `from` (owe: any value but `to`;
 * clear: the seq the sweep started with). 0 or -errno. */
static int mark_set(mdsl_store *s, bool owe, uint64_t from, uint64_t to)
{
    mdsl_st_token_take(s);
    pthread_mutex_lock(&s->mu);
    bool go = owe ? s->sweep_owed != to && to > s->sweep_cleared : s->sweep_owed == from;
    pthread_mutex_unlock(&s->mu);
    int rc = go ? mdsl_index_put_sweep_owed(s->idx, to) : 0;
    if (go && rc == 0) {
        pthread_mutex_lock(&s->mu);
        s->sweep_owed = to;
        if (!owe)
            s->sweep_cleared = from;
        pthread_mutex_unlock(&s->mu);
    }
    mdsl_st_token_put(s);
    if (rc < 0)
        XT_WARN("mdsl: %s the sweep-owed mark: %s", owe ? "writing" : "clearing",
                strerror(-rc));
    return rc;
}

int mdsl_store_sweep_owe(mdsl_store *s, uint64_t seq)
{
    if (!seq)
        return -EINVAL;
    pthread_mutex_lock(&s->mu);
    /* seqs only grow: one at or below a cleared one comes from a pass that
     * started before the sweep its change asked (nothing is owed) */
    bool have = s->sweep_owed == seq || seq <= s->sweep_cleared;
    pthread_mutex_unlock(&s->mu);
    return have ? 0 : mark_set(s, true, 0, seq);
}

uint64_t mdsl_store_sweep_owed(mdsl_store *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t seq = s->sweep_owed;
    pthread_mutex_unlock(&s->mu);
    return seq;
}

static int sweep(mdsl_store *s, double threshold)
{
    assert(s->bg_busy);
    assert(threshold > 0 && threshold < 1);
    pthread_mutex_lock(&s->mu);
    uint64_t owed = threshold >= MDSL_SWEEP_THRESHOLD ? s->sweep_owed : 0;
    pthread_mutex_unlock(&s->mu);
    int rc = roll_active(s, threshold, 0);
    int freed = 0;
    while (rc >= 0) {
        rc = mdsl_gc_pass(s, 64, threshold);
        if (rc <= 0)
            break;
        freed += rc;
    }
    pthread_mutex_lock(&s->mu);
    /* a pass also ends (0) when the store closes or failed: not the end */
    bool complete = rc == 0 && !s->gc_stop && !s->failed;
    s->st.sweeps += complete;
    pthread_mutex_unlock(&s->mu);
    XT_INFO("mdsl: sweep at %.2f freed %d segment(s)%s", threshold, freed,
            complete ? "" : " (cut short)");
    if (complete && owed)
        (void)mark_set(s, false, owed, 0); /* left set: the next start sweeps */
    return rc < 0 && !freed ? rc : freed;
}

int mdsl_store_sweep(mdsl_store *s, double threshold)
{
    if (!(threshold > 0 && threshold < 1))
        return -EINVAL;
    mdsl_st_bg_take(s);
    int rc = sweep(s, threshold);
    mdsl_st_bg_put(s);
    return rc;
}

void mdsl_store_space_request(mdsl_store *s, bool drop, bool do_sweep)
{
    pthread_mutex_lock(&s->mu);
    s->want_drop |= drop;
    s->want_sweep |= do_sweep;
    pthread_mutex_unlock(&s->mu);
    mdsl_gc_wake(s);
}

void mdsl_space_tick(mdsl_store *s)
{
    assert(s->bg_busy && !xt_mutex_held(&s->mu));
    uint64_t now = xt_mono_ns();
    pthread_mutex_lock(&s->mu);
    bool drop = s->want_drop || (s->drop_due_ns && now >= s->drop_due_ns);
    bool do_sweep = s->want_sweep;
    s->want_drop = s->want_sweep = false;
    if (drop)
        s->drop_due_ns = 0;
    pthread_mutex_unlock(&s->mu);
    if (drop) {
        bool busy = false;
        int rc = drop_pass(s, &busy);
        if (rc < 0)
            XT_WARN("mdsl: drop pass: %s", strerror(-rc));
        if (busy) { /* a prepare held a folder: look again later */
            pthread_mutex_lock(&s->mu);
            s->drop_due_ns = now + DROP_RETRY_NS;
            pthread_mutex_unlock(&s->mu);
        }
    }
    if (do_sweep) /* the restart tests' kill -9 (pom-mdsl --crash-point) */
        XT_CRASH_POINT(MDSL_CRASH_SWEEP);
    if (do_sweep) /* after the drops: they free more for less */
        (void)sweep(s, MDSL_SWEEP_THRESHOLD);
    /* idle rolls: checked six times per roll_idle_ms (the walk is under mu) */
    uint64_t idle = (uint64_t)s->o.roll_idle_ms * 1000000u;
    if (now >= s->roll_due_ns) {
        s->roll_due_ns = now + idle / 6;
        bool pressed;
        (void)roll_active(s, mdsl_space_gc_threshold(s, &pressed), idle);
    }
}

/* ---- recovery ---------------------------------------------------------- */

struct drops {
    struct tabs t;
    mdsl_store *s;
};

static int find_drop(const char *name, bool is_dir, void *arg)
{
    struct drops *d = arg;
    unsigned fsid;
    unsigned long long table;
    int end = 0;
    if (!is_dir || sscanf(name, "t.%u.%16llx.drop%n", &fsid, &table, &end) != 2 ||
        name[end] != '\0' || end == 0)
        return 0;
    return tabs_add(&d->t, fsid, table);
}

/* Is there a live folder t.F.T next to the drop? (a new one, made after
 * the drop's index batch: the table's keys are its own). */
static bool live_exists(mdsl_store *s, const char *live)
{
    mdsl_file *f;
    char md[4300];
    snprintf(md, sizeof md, "%s/md", live);
    if (mdsl_io_open(s->io, md, false, &f) < 0)
        return false;
    mdsl_io_close(s->io, f);
    return true;
}

int mdsl_space_recover(mdsl_store *s)
{
    uint64_t owed = 0;
    int rc = mdsl_index_get_sweep_owed(s->idx, &owed);
    if (rc == 0 && owed)
        XT_INFO("mdsl: a sweep is still owed (marked under ring-1 seq %llu)",
                (unsigned long long)owed);
    if (rc == -ENOENT)
        rc = 0;
    s->sweep_owed = owed; /* no other thread runs yet */
    struct drops d = { .s = s };
    if (rc == 0)
        rc = mdsl_io_list(s->io, s->dir, find_drop, &d);
    for (size_t i = 0; i < d.t.n && rc == 0; i++) {
        char live[4200], dpath[4300];
        snprintf(live, sizeof live, "%s/t.%u.%016llx", s->dir, d.t.v[i].fsid,
                 (unsigned long long)d.t.v[i].table);
        snprintf(dpath, sizeof dpath, "%s.drop", live);
        if (!live_exists(s, live)) { /* step 2 may not have happened: do it */
            struct tkeys t = { .droppable = true };
            rc = mdsl_index_scan_table(s->idx, d.t.v[i].fsid, d.t.v[i].table, tkeys_add, &t);
            if (rc == 0)
                rc = unindex(s, d.t.v[i].fsid, d.t.v[i].table, &t);
            xt_free(t.v);
        }
        if (rc == 0) {
            XT_INFO("mdsl: finishing the drop of %s", dpath);
            (void)remove_dir(s, dpath);
        }
    }
    xt_free(d.t.v);
    return rc;
}

/* ---- a full disk: the reserve (invariants 6-7) ------------------------- */

#define SEG_MIN (UINT64_C(1) << 20)
#define SHORT_LOG_NS (UINT64_C(60) * 1000000000u)
#define GC_ROOM_SLACK (UINT64_C(64) << 10)

void mdsl_space_size(mdsl_store *s)
{
    uint64_t avail, total;
    if (mdsl_io_space(s->io, s->dir, &avail, &total) < 0 || total == 0) {
        s->reserve = 0; /* unknown: nothing is refused for the reserve */
        return;
    }
    if (s->o.reserve_bytes == UINT64_MAX)
        s->reserve = 0;
    else if (s->o.reserve_bytes)
        s->reserve = s->o.reserve_bytes;
    else
        s->reserve = xt_disk_reserve(total);
    /* One 64 MiB segment on a small device is never closed, so GC never
     * takes it: keep segments a fraction of the device. */
    uint64_t seg_max = XT_MAX(total / MDSL_SEG_DEVICE_SHARE, SEG_MIN);
    if (s->o.seg_size > seg_max) {
        XT_INFO("mdsl: segments of %llu bytes (a 1/%u of the %llu-byte device, not %llu)",
                (unsigned long long)seg_max, MDSL_SEG_DEVICE_SHARE, (unsigned long long)total,
                (unsigned long long)s->o.seg_size);
        s->o.seg_size = seg_max;
    }
    XT_INFO("mdsl: %llu bytes free of %llu; %llu kept for deletes and GC",
            (unsigned long long)avail, (unsigned long long)total,
            (unsigned long long)s->reserve);
}

int mdsl_space_admit(mdsl_store *s, uint64_t need, bool may_reserve)
{
    assert(!xt_mutex_held(&s->mu));
    uint64_t avail, total;
    if (may_reserve || s->reserve == 0 || mdsl_io_space(s->io, s->dir, &avail, &total) < 0)
        return 0;
    bool is_short = avail < s->reserve || avail - s->reserve < need;
    uint64_t now = xt_mono_ns();
    pthread_mutex_lock(&s->mu);
    /* one line when the state changes, at most one a minute while it flaps */
    bool say = is_short != s->short_logged &&
               (!is_short || !s->short_said_ns || now - s->short_said_ns >= SHORT_LOG_NS);
    if (say) {
        s->short_logged = is_short;
        if (is_short)
            s->short_said_ns = now;
    }
    pthread_mutex_unlock(&s->mu);
    if (is_short) /* GC may find more now that the threshold is up (invariant 7) */
        mdsl_gc_wake(s);
    if (say && is_short)
        XT_WARN("mdsl: %llu bytes free, %llu kept for deletes and GC: prepares that add "
                "data answer ENOSPC", (unsigned long long)avail,
                (unsigned long long)s->reserve);
    else if (say)
        XT_INFO("mdsl: %llu bytes free again: prepares that add data are taken",
                (unsigned long long)avail);
    return is_short ? -ENOSPC : 0;
}

double mdsl_space_gc_threshold(mdsl_store *s, bool *pressed)
{
    double base = s->o.gc_threshold;
    uint64_t avail, total;
    *pressed = false;
    if (s->reserve == 0 || mdsl_io_space(s->io, s->dir, &avail, &total) < 0 || total == 0)
        return base;
    /* The fuller the device, the less garbage it may hold: at least the
     * share of it in use, up to MDSL_GC_USED_THRESHOLD (other programs' data
     * counts too: a disk full of it must not make GC copy all the time),
     * and MDSL_GC_FULL_THRESHOLD once only the reserve is left. */
    double used = 1.0 - (double)avail / (double)total;
    if (used > MDSL_GC_USED_THRESHOLD)
        used = MDSL_GC_USED_THRESHOLD;
    double thr = used > base ? used : base;
    /* thr with 4 reserves free or more, MDSL_GC_FULL_THRESHOLD at one */
    double room = ((double)avail - (double)s->reserve) / (3.0 * (double)s->reserve);
    room = room < 0 ? 0 : room > 1 ? 1 : room;
    if (room >= 1.0)
        return thr;
    *pressed = true;
    return MDSL_GC_FULL_THRESHOLD - (MDSL_GC_FULL_THRESHOLD - thr) * room;
}

uint64_t mdsl_space_gc_room(mdsl_store *s)
{
    uint64_t avail, total;
    if (s->reserve == 0 || mdsl_io_space(s->io, s->dir, &avail, &total) < 0 ||
        avail >= 4 * s->reserve)
        return UINT64_MAX;
    /* The reserve is GC's too: a segment 60-75 % live (what a disk filled
     * with small files and half emptied holds) never fits in half of a
     * reserve, and with none taken nothing comes back. A quarter of the
     * free space, at least GC_ROOM_SLACK, stays for the index and the
     * copies' headers. */
    uint64_t slack = XT_MAX(avail / 4, GC_ROOM_SLACK);
    return avail > slack ? avail - slack : 0;
}

int mdsl_space_roll(mdsl_store *s, double threshold)
{
    assert(s->bg_busy);
    return roll_active(s, threshold, 0);
}
