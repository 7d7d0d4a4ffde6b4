/*
 * mdsl_store.c -- the MDSL engine: lifecycle, folders and segments, staged
 * appends, the 2PC participant and statistics. Index rules are in
 * mdsl_apply.c, slice loads and column reads in mdsl_read.c, restart in
 * mdsl_recover.c, GC in mdsl_gc.c, table metadata in mdsl_md.c, folder
 * drops and rolls in mdsl_space.c; locks in mdsl_handle_i.h.
 *
 * Invariants:
 *  (1) Records of a transaction are appended before its PREPARE, which
 *      lists them (the manifest); both are fsynced before prepare returns.
 *      A PREPARE whose listed records do not all verify is not a prepare,
 *      nor is a transaction with fewer PREPAREs than the number of tables
 *      each of them names (a failed prepare lost in some of its tables).
 *  (2) A COMMIT record repeats the folder's manifest, so a COMMIT alone
 *      proves what it made visible (GC may delete the PREPARE's segment).
 *  (3) The index batch of a commit is applied only after its COMMIT records
 *      are durable, and under the writer token (mdsl_handle_i.h).
 *  (4) A failed append batch is cut back to the segments' previous sizes; a
 *      failed fsync, cut-back or index write makes the store refuse writes.
 *  (5) Appends go only to the last (active) segment of a kind; GC never
 *      collects an active segment.
 */
#include "mdsl_handle_i.h"
#include "mdsl_apply_i.h"
#include "mdsl_gc_i.h"
#include "mdsl_recover_i.h"
#include "mdsl_space_i.h"

#include "xt_time.h"

#include <stdio.h>
#include <string.h>

/* ---- errors and the writer token -------------------------------------- */

void mdsl_st_fail(mdsl_store *s, int err, const char *what)
{
    pthread_mutex_lock(&s->mu);
    if (!s->failed) {
        s->failed = err < 0 ? err : -EIO;
        XT_ERR("mdsl: %s failed (%s): the store refuses writes until reopened",
               what, strerror(-err));
    }
    pthread_mutex_unlock(&s->mu);
}

void mdsl_st_token_take(mdsl_store *s)
{
    assert(!xt_mutex_held(&s->mu));
    pthread_mutex_lock(&s->mu);
    while (s->writing)
        pthread_cond_wait(&s->wr_cv, &s->mu);
    s->writing = true;
    pthread_mutex_unlock(&s->mu);
}

void mdsl_st_token_put(mdsl_store *s)
{
    pthread_mutex_lock(&s->mu);
    assert(s->writing);
    s->writing = false;
    pthread_cond_signal(&s->wr_cv);
    pthread_mutex_unlock(&s->mu);
}

void mdsl_st_bg_take(mdsl_store *s)
{
    assert(!xt_mutex_held(&s->mu));
    pthread_mutex_lock(&s->mu);
    while (s->bg_busy)
        pthread_cond_wait(&s->bg_cv, &s->mu);
    s->bg_busy = true;
    pthread_mutex_unlock(&s->mu);
}

void mdsl_st_bg_put(mdsl_store *s)
{
    pthread_mutex_lock(&s->mu);
    assert(s->bg_busy);
    s->bg_busy = false;
    pthread_cond_signal(&s->bg_cv);
    pthread_mutex_unlock(&s->mu);
}

/* ---- folders and segments --------------------------------------------- */

static size_t folder_slot(const mdsl_store *s, uint32_t fsid, uint64_t table)
{
    assert(s->ht_cap && (s->ht_cap & (s->ht_cap - 1)) == 0);
    uint64_t h = (table ^ ((uint64_t)fsid << 32 | fsid)) * UINT64_C(0x9E3779B97F4A7C15);
    return (size_t)(h >> 17) & (s->ht_cap - 1);
}

struct folder *mdsl_st_folder_find(mdsl_store *s, uint32_t fsid, uint64_t table)
{
    assert(xt_mutex_held(&s->mu));
    for (struct folder *f = s->ht[folder_slot(s, fsid, table)]; f; f = f->hnext)
        if (f->fsid == fsid && f->table == table)
            return f;
    return NULL;
}

static int folder_insert(mdsl_store *s, struct folder *fo)
{
    assert(xt_mutex_held(&s->mu));
    assert(s->ht_cap && (s->ht_cap & (s->ht_cap - 1)) == 0);
    if (s->ht_n + 1 > s->ht_cap / 2) {
        size_t ncap = s->ht_cap * 2;
        struct folder **nt = xt_calloc(ncap, sizeof *nt);
        if (!nt)
            return -ENOMEM;
        struct folder **old = s->ht;
        size_t ocap = s->ht_cap;
        s->ht = nt;
        s->ht_cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            while (old[i]) {
                struct folder *f = old[i];
                old[i] = f->hnext;
                size_t k = folder_slot(s, f->fsid, f->table);
                f->hnext = nt[k];
                nt[k] = f;
            }
        xt_free(old);
    }
    size_t k = folder_slot(s, fo->fsid, fo->table);
    fo->hnext = s->ht[k];
    s->ht[k] = fo;
    s->ht_n++;
    return 0;
}

static void segarr_free(mdsl_store *s, struct segarr *a)
{
    for (size_t i = 0; i < a->n; i++) {
        mdsl_io_close(s->io, a->v[i]->f);
        xt_free(a->v[i]);
    }
    xt_free(a->v);
}

static void folder_free(mdsl_store *s, struct folder *fo)
{
    segarr_free(s, &fo->tss);
    for (size_t i = 0; i < fo->ncs; i++)
        segarr_free(s, &fo->cs[i].segs);
    xt_free(fo->cs);
    mdsl_io_close(s->io, fo->md);
    xt_free(fo->path);
    xt_free(fo);
}

struct folder *mdsl_st_folder_pin(mdsl_store *s, uint32_t fsid, uint64_t table)
{
    pthread_mutex_lock(&s->mu);
    struct folder *fo = mdsl_st_folder_find(s, fsid, table);
    if (fo)
        fo->refs++;
    pthread_mutex_unlock(&s->mu);
    return fo;
}

void mdsl_st_folder_unpin(mdsl_store *s, struct folder *fo)
{
    pthread_mutex_lock(&s->mu);
    assert(fo->refs > 0);
    if (--fo->refs == 0 && fo->dropped)
        folder_free(s, fo); /* closes files nobody pins: allowed under mu */
    pthread_mutex_unlock(&s->mu);
}

static void segarr_forget(mdsl_store *s, struct segarr *a)
{
    for (size_t i = 0; i < a->n; i++) {
        a->v[i]->dead = true;
        if (a->v[i]->refs == 0) {
            mdsl_io_close(s->io, a->v[i]->f);
            xt_free(a->v[i]);
        }
    }
    a->n = 0;
}

void mdsl_st_folder_forget(mdsl_store *s, struct folder *fo)
{
    assert(xt_mutex_held(&s->mu));
    assert(s->writing);
    assert(!fo->dropped);
    for (struct folder **pp = &s->ht[folder_slot(s, fo->fsid, fo->table)]; *pp;
         pp = &(*pp)->hnext)
        if (*pp == fo) {
            *pp = fo->hnext;
            s->ht_n--;
            break;
        }
    segarr_forget(s, &fo->tss);
    for (size_t i = 0; i < fo->ncs; i++)
        segarr_forget(s, &fo->cs[i].segs);
    fo->dropped = true;
    if (fo->refs == 0)
        folder_free(s, fo);
}

int mdsl_st_folder_get(mdsl_store *s, uint32_t fsid, uint64_t table, bool create,
                       struct folder **out)
{
    assert(!xt_mutex_held(&s->mu)); /* it does I/O */
    pthread_mutex_lock(&s->mu);
    struct folder *fo = mdsl_st_folder_find(s, fsid, table);
    pthread_mutex_unlock(&s->mu);
    if (fo || !create) {
        *out = fo;
        return fo ? 0 : -ENOENT;
    }
    size_t pl = strlen(s->dir) + 40;
    fo = xt_calloc(1, sizeof *fo);
    char *path = xt_malloc(pl);
    char *mdp = xt_malloc(pl + 4);
    int rc = fo && path && mdp ? 0 : -ENOMEM;
    if (rc == 0) {
        snprintf(path, pl, "%s/t.%u.%016llx", s->dir, fsid, (unsigned long long)table);
        snprintf(mdp, pl + 4, "%s/md", path);
        fo->fsid = fsid;
        fo->table = table;
        fo->path = path;
        path = NULL;
        rc = mdsl_io_mkdir(s->io, fo->path);
    }
    if (rc == 0)
        rc = mdsl_io_open(s->io, mdp, true, &fo->md);
    if (rc == 0)
        rc = mdsl_io_size(s->io, fo->md, &fo->md_size);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        rc = folder_insert(s, fo);
        pthread_mutex_unlock(&s->mu);
    }
    xt_free(path);
    xt_free(mdp);
    if (rc < 0) {
        if (fo)
            folder_free(s, fo);
        return rc;
    }
    *out = fo;
    return 0;
}

struct segarr *mdsl_st_segarr(struct folder *fo, bool is_cs, uint32_t group, bool create)
{
    if (!is_cs)
        return &fo->tss;
    for (size_t i = 0; i < fo->ncs; i++)
        if (fo->cs[i].group == group)
            return &fo->cs[i].segs;
    if (!create)
        return NULL;
    struct csgroup *n = xt_realloc(fo->cs, (fo->ncs + 1) * sizeof *n);
    if (!n)
        return NULL;
    fo->cs = n;
    memset(&n[fo->ncs], 0, sizeof *n);
    n[fo->ncs].group = group;
    return &n[fo->ncs++].segs;
}

struct seg *mdsl_st_seg_find(struct segarr *a, uint32_t no)
{
    size_t lo = 0, hi = a ? a->n : 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a->v[mid]->no == no)
            return a->v[mid];
        if (a->v[mid]->no < no)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

void mdsl_st_seg_path(const struct folder *fo, bool is_cs, uint32_t group, uint32_t no,
                      char *buf, size_t n)
{
    char name[48];
    mdsl_seg_name(name, sizeof name, is_cs, group, no);
    snprintf(buf, n, "%s/%s", fo->path, name);
}

int mdsl_st_seg_add(mdsl_store *s, struct folder *fo, bool is_cs, uint32_t group,
                    uint32_t no, bool create, struct seg **out)
{
    char path[4096];
    mdsl_st_seg_path(fo, is_cs, group, no, path, sizeof path);
    struct seg *sg = xt_calloc(1, sizeof *sg);
    if (!sg)
        return -ENOMEM;
    sg->no = no;
    sg->wrote_ns = xt_mono_ns(); /* a loaded segment counts as written at open */
    int rc = mdsl_io_open(s->io, path, create, &sg->f);
    if (rc == 0)
        rc = mdsl_io_size(s->io, sg->f, &sg->size);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        struct segarr *a = mdsl_st_segarr(fo, is_cs, group, true);
        if (!a)
            rc = -ENOMEM;
        if (rc == 0 && a->n == a->cap) {
            size_t nc = a->cap ? a->cap * 2 : 8;
            struct seg **nv = xt_realloc(a->v, nc * sizeof *nv);
            if (nv) {
                a->v = nv;
                a->cap = nc;
            } else {
                rc = -ENOMEM;
            }
        }
        if (rc == 0) {
            size_t i = a->n;
            while (i > 0 && a->v[i - 1]->no > no) {
                a->v[i] = a->v[i - 1];
                i--;
            }
            a->v[i] = sg;
            a->n++;
        }
        pthread_mutex_unlock(&s->mu);
    }
    if (rc < 0) {
        mdsl_io_close(s->io, sg->f);
        xt_free(sg);
        return rc;
    }
    *out = sg;
    return 0;
}

void mdsl_st_seg_unpin(mdsl_store *s, struct seg *sg)
{
    assert(xt_mutex_held(&s->mu));
    assert(sg->refs > 0);
    if (--sg->refs == 0 && sg->dead) {
        mdsl_io_close(s->io, sg->f);
        xt_free(sg);
    }
}

/* ---- staged appends --------------------------------------------------- */

/* Reserve `total` bytes at the end of (fo, kind) in the batch, rolling to a
 * new segment when the active one is full; *dst is where to put them. */
static int stage_reserve(mdsl_store *s, struct wbatch *wb, struct folder *fo, bool is_cs,
                         uint32_t group, uint64_t total, uint8_t **dst, uint32_t *segno,
                         uint64_t *off)
{
    pthread_mutex_lock(&s->mu);
    struct segarr *a = mdsl_st_segarr(fo, is_cs, group, true);
    struct seg *act = a && a->n ? a->v[a->n - 1] : NULL;
    pthread_mutex_unlock(&s->mu);
    if (!a)
        return -ENOMEM;
    size_t si = wb->n;
    for (size_t i = 0; act && i < wb->n; i++)
        if (wb->v[i].seg == act)
            si = i;
    uint64_t end = si < wb->n ? wb->v[si].start + wb->v[si].len : act ? act->size : 0;
    if (!act || (end > 0 && end + total > s->o.seg_size)) {
        int rc = mdsl_st_seg_add(s, fo, is_cs, group, act ? act->no + 1 : 1, true, &act);
        if (rc < 0)
            return rc;
        si = wb->n;
    }
    if (si == wb->n) {
        if (wb->n == wb->cap) {
            size_t nc = wb->cap ? wb->cap * 2 : 8;
            struct stage *nv = xt_realloc(wb->v, nc * sizeof *nv);
            if (!nv)
                return -ENOMEM;
            wb->v = nv;
            wb->cap = nc;
        }
        wb->v[si] = (struct stage){ .fo = fo, .seg = act, .is_cs = is_cs, .group = group,
                                    .start = act->size };
        wb->n++;
    }
    struct stage *st = &wb->v[si];
    if (st->len + total > st->cap) {
        size_t nc = XT_MAX(st->cap * 2, st->len + total);
        uint8_t *nb = xt_realloc(st->buf, nc);
        if (!nb)
            return -ENOMEM;
        st->buf = nb;
        st->cap = nc;
    }
    *dst = st->buf + st->len;
    *segno = act->no;
    *off = st->start + st->len;
    st->len += total;
    return 0;
}

int mdsl_st_stage(mdsl_store *s, struct wbatch *wb, struct folder *fo, bool is_cs,
                  uint32_t group, struct mdsl_rec_hdr *h, const void *payload,
                  uint32_t *segno, uint64_t *off)
{
    uint8_t *dst;
    int rc = stage_reserve(s, wb, fo, is_cs, group, mdsl_rec_total(h), &dst, segno, off);
    if (rc == 0)
        mdsl_seg_encode(h, payload, dst);
    return rc;
}

int mdsl_st_stage_raw(mdsl_store *s, struct wbatch *wb, struct folder *fo, bool is_cs,
                      uint32_t group, const uint8_t *rec, uint32_t len, uint32_t *segno,
                      uint64_t *off)
{
    uint8_t *dst;
    int rc = stage_reserve(s, wb, fo, is_cs, group, len, &dst, segno, off);
    if (rc == 0)
        memcpy(dst, rec, len);
    return rc;
}

void mdsl_st_wbatch_free(struct wbatch *wb)
{
    for (size_t i = 0; i < wb->n; i++)
        xt_free(wb->v[i].buf);
    xt_free(wb->v);
    memset(wb, 0, sizeof *wb);
}

int mdsl_st_flush(mdsl_store *s, struct wbatch *wb)
{
    assert(!xt_mutex_held(&s->mu)); /* write + fsync: no lock across I/O */
    if (wb->n == 0)
        return 0;
    struct mdsl_io_wr *w = xt_malloc(wb->n * sizeof *w);
    mdsl_file **sy = xt_malloc(wb->n * sizeof *sy);
    if (!w || !sy) {
        xt_free(w);
        xt_free(sy);
        return -ENOMEM;
    }
    for (size_t i = 0; i < wb->n; i++) {
        w[i] = (struct mdsl_io_wr){ wb->v[i].seg->f, wb->v[i].start, wb->v[i].buf, wb->v[i].len };
        sy[i] = wb->v[i].seg->f;
    }
    bool sync_failed = false;
    int rc = mdsl_io_write(s->io, w, wb->n, sy, wb->n, &sync_failed);
    xt_free(w);
    xt_free(sy);
    if (rc == 0) {
        uint64_t now = xt_mono_ns();
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < wb->n; i++) {
            wb->v[i].seg->size = wb->v[i].start + wb->v[i].len;
            wb->v[i].seg->wrote_ns = now;
        }
        pthread_mutex_unlock(&s->mu);
        return 0;
    }
    if (sync_failed) {
        mdsl_st_fail(s, rc, "fsync");
        return rc;
    }
    /* invariant 4: nothing of a failed batch stays */
    for (size_t i = 0; i < wb->n; i++) {
        int trc = mdsl_io_truncate(s->io, wb->v[i].seg->f, wb->v[i].start);
        if (trc < 0) {
            mdsl_st_fail(s, trc, "cutting back a failed append");
            break;
        }
    }
    XT_WARN("mdsl: append failed: %s (cut back)", strerror(-rc));
    return rc;
}

void mdsl_st_resume_pos(mdsl_store *s, struct folder *fo, uint32_t *segno, uint64_t *off)
{
    assert(xt_mutex_held(&s->mu));
    bool found = false;
    for (struct ptx *t = s->pending; t; t = t->next)
        for (size_t i = 0; i < t->nparts; i++) {
            struct ptx_part *p = &t->parts[i];
            if (p->fo != fo)
                continue;
            if (!found || p->man_segno < *segno || (p->man_segno == *segno && p->man_off < *off)) {
                *segno = p->man_segno;
                *off = p->man_off;
                found = true;
            }
        }
    if (!found) {
        struct seg *a = fo->tss.n ? fo->tss.v[fo->tss.n - 1] : NULL;
        *segno = a ? a->no : 1;
        *off = a ? a->size : 0;
    }
}

/* ---- reads of pointed-at records -------------------------------------- */

int mdsl_st_read_ptr(mdsl_store *s, struct folder *fo, bool is_cs, uint32_t group,
                     const struct mdsl_ptr *p, struct mdsl_rec_hdr *h, uint8_t **rec)
{
    assert(!xt_mutex_held(&s->mu) && fo && p);
    pthread_mutex_lock(&s->mu);
    struct seg *sg = mdsl_st_seg_find(mdsl_st_segarr(fo, is_cs, group, false), p->segno);
    if (sg)
        sg->refs++;
    pthread_mutex_unlock(&s->mu);
    if (!sg)
        return -EAGAIN;
    int rc = mdsl_seg_read(s->io, sg->f, p->off, p->len, p->csum, h, rec);
    pthread_mutex_lock(&s->mu);
    mdsl_st_seg_unpin(s, sg);
    if (rc == -EBADMSG)
        s->st.corrupt_records++;
    pthread_mutex_unlock(&s->mu);
    if (rc == -EBADMSG) {
        char name[48];
        mdsl_seg_name(name, sizeof name, is_cs, group, p->segno);
        XT_ERR("mdsl: corrupt or missing record in %s/%s at %llu (%u bytes)", fo->path, name,
               (unsigned long long)p->off, p->len);
    }
    return rc;
}

/* ---- transactions ----------------------------------------------------- */

void mdsl_st_ptx_free(struct ptx *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->nparts; i++)
        xt_free(t->parts[i].e);
    xt_free(t->parts);
    xt_free(t);
}

void mdsl_st_decided(mdsl_store *s, uint64_t txid, bool commit)
{
    assert(xt_mutex_held(&s->mu));
    assert(txid != 0);
    s->dec_txid[s->dec_pos] = txid;
    s->dec_commit[s->dec_pos] = commit;
    s->dec_pos = (s->dec_pos + 1) % MDSL_DECIDED_RING;
}

/* REQUIRES: mu held. 1 committed, 0 aborted, -1 unknown. */
static int decided(mdsl_store *s, uint64_t txid)
{
    assert(xt_mutex_held(&s->mu));
    for (unsigned i = 0; i < MDSL_DECIDED_RING; i++)
        if (s->dec_txid[i] == txid)
            return s->dec_commit[i] ? 1 : 0;
    return -1;
}

static struct ptx *pending_find(mdsl_store *s, uint64_t txid, bool unlink)
{
    assert(xt_mutex_held(&s->mu));
    for (struct ptx **pp = &s->pending; *pp; pp = &(*pp)->next)
        if ((*pp)->txid == txid) {
            struct ptx *t = *pp;
            if (unlink)
                *pp = t->next;
            return t;
        }
    return NULL;
}

static int part_add_entry(struct ptx_part *p, const struct mdsl_entry *e)
{
    if ((p->n & (p->n - 1)) == 0) { /* grow at powers of two */
        struct mdsl_entry *ne = xt_realloc(p->e, (p->n ? p->n * 2 : 1) * sizeof *ne);
        if (!ne)
            return -ENOMEM;
        p->e = ne;
    }
    p->e[p->n++] = *e;
    return 0;
}

static struct ptx_part *part_get(struct ptx *t, struct folder *fo)
{
    for (size_t i = 0; i < t->nparts; i++)
        if (t->parts[i].fo == fo)
            return &t->parts[i];
    struct ptx_part *np = xt_realloc(t->parts, (t->nparts + 1) * sizeof *np);
    if (!np)
        return NULL;
    t->parts = np;
    memset(&np[t->nparts], 0, sizeof *np);
    np[t->nparts].fo = fo;
    return &np[t->nparts++];
}

/* Flags: TOMBSTONE marks a deleted column (an empty COLUMN), MOVED a slice
 * that moved to another MDSL (an empty IMAGE), SYS a slice record after
 * which the slice holds system rows (kept and listed, never interpreted);
 * nothing else is defined. */
static int rec_check(const struct xt_store_rec *r)
{
    const char *why = NULL;
    if (r->type != XT_STORE_IMAGE && r->type != XT_STORE_DELTA && r->type != XT_STORE_COLUMN)
        why = "unknown record type";
    else if (r->flags & ~(XT_STORE_F_TOMBSTONE | XT_STORE_F_MOVED | XT_STORE_F_SYS | XT_STORE_F_RESERVE))
        why = "unknown flag bits";
    else if ((r->flags & XT_STORE_F_TOMBSTONE) && (r->type != XT_STORE_COLUMN || r->len))
        why = "TOMBSTONE is allowed on an empty COLUMN only";
    else if ((r->flags & XT_STORE_F_MOVED) && (r->type != XT_STORE_IMAGE || r->len))
        why = "MOVED is allowed on an empty IMAGE only";
    else if ((r->flags & XT_STORE_F_SYS) && (r->type == XT_STORE_COLUMN || (r->flags & XT_STORE_F_MOVED)))
        why = "SYS is allowed on a slice record with rows only";
    else if (r->len > MDSL_MAX_PAYLOAD - 1 || (r->len && !r->data))
        why = "bad payload length";
    if (!why)
        return 0;
    XT_WARN("mdsl: prepare refused: %s (type %u, flags 0x%x, fs %u table %llu slice %u, "
            "%u bytes)", why, r->type, r->flags, r->id.fsid, (unsigned long long)r->id.table,
            r->id.slice, r->len);
    return -EINVAL;
}

/* A DELTA that rule 2 (mdsl_apply.c) would apply on top of a MOVED
 * tombstone belongs to the slice's new MDSL: its writer has a stale
 * placement. Refusing it makes the writer's group abort and retry with an
 * image where the slice now lives (docs/mdsl-scale.md "Tombstones"). A delta
 * at or under the tombstone's version is let through: rule 2 ignores it.
 * Checked against committed state; REQUIRES: writer token held. */
static int moved_guard(mdsl_store *s, const struct xt_store_rec *recs, size_t n)
{
    assert(s->writing);
    for (size_t i = 0; i < n; i++) {
        const struct xt_store_rec *r = &recs[i];
        if (r->type != XT_STORE_DELTA)
            continue;
        struct mdsl_slstate st;
        int rc = mdsl_apply_slice_state(s, r->id, &st);
        if (rc < 0)
            return rc;
        if (st.has_img && st.img_moved && r->version > st.img) {
            XT_INFO("mdsl: delta v%llu of fs %u table %llu slice %u refused: the slice "
                    "moved away at v%llu", (unsigned long long)r->version, r->id.fsid,
                    (unsigned long long)r->id.table, r->id.slice, (unsigned long long)st.img);
            return -ESTALE;
        }
    }
    return 0;
}

static int prepare_locked(mdsl_store *s, uint64_t txid, const struct xt_store_rec *recs, size_t n,
                          bool may_reserve)
{
    assert(s->writing && !xt_mutex_held(&s->mu)); /* writes without mu */
    assert(txid != 0 && n >= 1);
    struct ptx *t = xt_calloc(1, sizeof *t);
    if (!t)
        return -ENOMEM;
    t->txid = txid;
    struct wbatch wb = { 0 };
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct xt_store_rec *r = &recs[i];
        struct folder *fo;
        rc = mdsl_st_folder_get(s, r->id.fsid, r->id.table, true, &fo);
        struct ptx_part *p = rc == 0 ? part_get(t, fo) : NULL;
        if (rc == 0 && !p)
            rc = -ENOMEM;
        if (rc < 0)
            break;
        bool is_cs = r->type == XT_STORE_COLUMN;
        struct mdsl_rec_hdr h = {
            .type = r->type, .flags = r->flags & ~XT_STORE_F_RESERVE, .payload_len = r->len,
            .fsid = r->id.fsid,
            .txid = txid, .table = r->id.table, .version = r->version, .slice = r->id.slice,
            .group = is_cs ? r->group : 0, .key = is_cs ? r->key : 0,
        };
        struct mdsl_entry e = {
            .type = h.type, .flags = h.flags, .group = h.group, .version = h.version,
            .slice = h.slice, .key = h.key, .len = mdsl_rec_total(&h),
        };
        rc = mdsl_st_stage(s, &wb, fo, is_cs, h.group, &h, r->data, &e.segno, &e.off);
        e.csum = h.csum;
        if (rc == 0)
            rc = part_add_entry(p, &e);
    }
    for (size_t i = 0; i < t->nparts && rc == 0; i++) {
        struct ptx_part *p = &t->parts[i];
        uint8_t *pl = mdsl_entries_encode(p->e, p->n);
        if (!pl) {
            rc = -ENOMEM;
            break;
        }
        /* version = how many tables the transaction spans: a PREPARE lists
         * only its own table's records, so without the count a restart
         * after a failed (unacknowledged) prepare whose PREPARE was lost in
         * one table would list the others as a complete prepare, and a
         * commit of it would lose that table's records (invariant 1). */
        struct mdsl_rec_hdr h = { .type = MDSL_REC_PREPARE, .fsid = p->fo->fsid, .txid = txid,
                                  .table = p->fo->table, .version = t->nparts,
                                  .payload_len = (uint32_t)(p->n * MDSL_ENTRY_SIZE) };
        rc = mdsl_st_stage(s, &wb, p->fo, false, 0, &h, pl, &p->man_segno, &p->man_off);
        xt_free(pl);
    }
    uint64_t need = 0;
    for (size_t i = 0; i < wb.n; i++)
        need += wb.v[i].len;
    if (rc == 0)
        rc = mdsl_space_admit(s, need, may_reserve);
    if (rc == 0)
        rc = mdsl_st_flush(s, &wb);
    mdsl_st_wbatch_free(&wb);
    if (rc < 0) {
        mdsl_st_ptx_free(t);
        return rc;
    }
    pthread_mutex_lock(&s->mu);
    t->next = s->pending;
    s->pending = t;
    s->st.prepared++;
    s->st.written_bytes += need;
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int mdsl_store_prepare(mdsl_store *s, uint64_t txid, const struct xt_store_rec *recs, size_t n)
{
    if (txid == 0 || n == 0 || !recs)
        return -EINVAL;
    bool may_reserve = true;
    for (size_t i = 0; i < n; i++) {
        if (rec_check(&recs[i]) < 0)
            return -EINVAL;
        may_reserve &= (recs[i].flags & XT_STORE_F_RESERVE) != 0;
    }
    mdsl_st_token_take(s);
    pthread_mutex_lock(&s->mu);
    int rc = s->failed ? s->failed : pending_find(s, txid, false) ? -EEXIST : 0;
    pthread_mutex_unlock(&s->mu);
    if (rc == 0)
        rc = moved_guard(s, recs, n);
    if (rc == 0)
        rc = prepare_locked(s, txid, recs, n, may_reserve);
    mdsl_st_token_put(s);
    return rc;
}

/* Append one decision record (COMMIT with the manifest, or ABORT) per part;
 * segs[i] receives the TSS segment of part i's record. */
static int append_decisions(mdsl_store *s, struct ptx *t, bool commit, uint32_t *segs)
{
    struct wbatch wb = { 0 };
    int rc = 0;
    for (size_t i = 0; i < t->nparts && rc == 0; i++) {
        struct ptx_part *p = &t->parts[i];
        uint8_t *pl = commit ? mdsl_entries_encode(p->e, p->n) : NULL;
        if (commit && !pl) {
            rc = -ENOMEM;
            break;
        }
        struct mdsl_rec_hdr h = { .type = commit ? MDSL_REC_COMMIT : MDSL_REC_ABORT,
                                  .fsid = p->fo->fsid, .txid = t->txid, .table = p->fo->table,
                                  .payload_len = commit ? (uint32_t)(p->n * MDSL_ENTRY_SIZE) : 0 };
        uint64_t off;
        rc = mdsl_st_stage(s, &wb, p->fo, false, 0, &h, pl, &segs[i], &off);
        xt_free(pl);
    }
    if (rc == 0)
        rc = mdsl_st_flush(s, &wb);
    mdsl_st_wbatch_free(&wb);
    return rc;
}

/* Decide t (token held, t on the pending list). Once the decision records
 * are durable t leaves the pending list and is freed, whatever follows; if
 * applying it then fails the store refuses writes and a restart re-applies
 * it from the TSS tail. Before that, a failure leaves t pending. */
static int decide_locked(mdsl_store *s, struct ptx *t, bool commit)
{
    uint32_t *segs = xt_calloc(t->nparts, sizeof *segs);
    struct apply_ctx c = { .s = s };
    c.b = segs ? mdsl_index_batch_new() : NULL;
    int rc = c.b ? append_decisions(s, t, commit, segs) : -ENOMEM;
    if (rc < 0) {
        mdsl_apply_ctx_free(&c);
        xt_free(segs);
        return rc;
    }
    for (size_t i = 0; i < t->nparts && rc == 0 && commit; i++) {
        c.fo = t->parts[i].fo;
        rc = mdsl_apply_entries(&c, t->parts[i].e, t->parts[i].n, segs[i]);
    }
    pthread_mutex_lock(&s->mu);
    pending_find(s, t->txid, true);
    for (size_t i = 0; i < t->nparts && rc == 0; i++) {
        uint32_t sn;
        uint64_t off;
        mdsl_st_resume_pos(s, t->parts[i].fo, &sn, &off);
        mdsl_index_batch_resume(c.b, t->parts[i].fo->fsid, t->parts[i].fo->table, sn, off);
    }
    mdsl_st_decided(s, t->txid, commit);
    s->st.prepared--;
    pthread_mutex_unlock(&s->mu);
    if (rc == 0)
        rc = mdsl_index_write(s->idx, c.b, false);
    if (rc == 0)
        mdsl_apply_done(&c);
    if (rc < 0)
        mdsl_st_fail(s, rc, commit ? "applying a commit" : "applying an abort");
    pthread_mutex_lock(&s->mu);
    if (rc == 0)
        mdsl_apply_live(&c);
    if (commit)
        s->st.commits++;
    else
        s->st.aborts++;
    pthread_mutex_unlock(&s->mu);
    mdsl_st_ptx_free(t);
    mdsl_apply_ctx_free(&c);
    xt_free(segs);
    return rc < 0 ? -EIO : 0;
}

int mdsl_st_decide_locked(mdsl_store *s, struct ptx *t, bool commit)
{
    assert(!xt_mutex_held(&s->mu)); /* the token, or recovery: no other thread */
    assert(t && t->txid != 0);
    return decide_locked(s, t, commit);
}

static int decide(mdsl_store *s, uint64_t txid, bool commit)
{
    mdsl_st_token_take(s);
    pthread_mutex_lock(&s->mu);
    int rc = s->failed;
    struct ptx *t = rc ? NULL : pending_find(s, txid, false);
    if (!rc && !t) {
        int d = decided(s, txid);
        rc = d < 0 ? -ENOENT : (d == 1) == commit ? 0 : -EINVAL;
    }
    pthread_mutex_unlock(&s->mu);
    if (t)
        rc = decide_locked(s, t, commit);
    mdsl_st_token_put(s);
    return rc;
}

int mdsl_store_commit(mdsl_store *s, uint64_t txid)
{
    return decide(s, txid, true);
}

int mdsl_store_abort(mdsl_store *s, uint64_t txid)
{
    return decide(s, txid, false);
}

int mdsl_store_apply_local(mdsl_store *s, const struct xt_store_rec *recs, size_t n)
{
    if (n == 0 || !recs)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (rec_check(&recs[i]) < 0 || (recs[i].flags & XT_STORE_F_RESERVE))
            return -EINVAL;
    mdsl_st_token_take(s);
    pthread_mutex_lock(&s->mu);
    int rc = s->failed;
    /* Unique across restarts while the clock does not step back: the
     * recovery pairs a PREPARE with the decisions of its txid. */
    uint64_t now = xt_now_ns() & ~MDSL_TXID_LOCAL;
    s->local_txid = XT_MAX(s->local_txid + 1, now);
    uint64_t txid = MDSL_TXID_LOCAL | s->local_txid;
    pthread_mutex_unlock(&s->mu);
    if (rc == 0)
        rc = moved_guard(s, recs, n);
    if (rc == 0)
        rc = prepare_locked(s, txid, recs, n, false);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        struct ptx *t = pending_find(s, txid, false);
        pthread_mutex_unlock(&s->mu);
        assert(t); /* the token kept every decider away */
        rc = decide_locked(s, t, true);
    }
    mdsl_st_token_put(s);
    return rc;
}

int mdsl_store_prepared(mdsl_store *s, uint64_t **txids, size_t *n)
{
    pthread_mutex_lock(&s->mu);
    size_t k = 0;
    for (struct ptx *t = s->pending; t; t = t->next)
        k += !(t->txid & MDSL_TXID_LOCAL);
    uint64_t *v = xt_malloc((k ? k : 1) * sizeof *v);
    if (v) {
        k = 0;
        for (struct ptx *t = s->pending; t; t = t->next)
            if (!(t->txid & MDSL_TXID_LOCAL))
                v[k++] = t->txid;
    }
    pthread_mutex_unlock(&s->mu);
    if (!v)
        return -ENOMEM;
    *txids = v;
    *n = k;
    return 0;
}

/* ---- stat, lifecycle -------------------------------------------------- */

static void stat_arr(struct segarr *a, struct mdsl_stat *st)
{
    for (size_t i = 0; i < a->n; i++) {
        st->segments++;
        st->bytes += a->v[i]->size;
        st->live_bytes += a->v[i]->live > 0 ? (uint64_t)a->v[i]->live : 0;
    }
}

int mdsl_store_stat(mdsl_store *s, struct mdsl_stat *st)
{
    pthread_mutex_lock(&s->mu);
    *st = s->st;
    st->tables = s->ht_n;
    st->segments = st->bytes = st->live_bytes = 0;
    for (size_t i = 0; i < s->ht_cap; i++)
        for (struct folder *fo = s->ht[i]; fo; fo = fo->hnext) {
            stat_arr(&fo->tss, st);
            for (size_t g = 0; g < fo->ncs; g++)
                stat_arr(&fo->cs[g].segs, st);
        }
    st->failed = s->failed;
    st->sweep_owed = s->sweep_owed;
    pthread_mutex_unlock(&s->mu);
    st->live_ratio = st->bytes ? (double)st->live_bytes / (double)st->bytes : 1.0;
    return 0;
}

int mdsl_store_health(mdsl_store *s)
{
    pthread_mutex_lock(&s->mu);
    int rc = s->failed;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int mdsl_store_gc(mdsl_store *s, unsigned max_segments)
{
    mdsl_st_bg_take(s);
    int rc = mdsl_gc_pass(s, max_segments, s->o.gc_threshold);
    mdsl_st_bg_put(s);
    return rc;
}

static void store_free(mdsl_store *s)
{
    while (s->pending) {
        struct ptx *t = s->pending;
        s->pending = t->next;
        mdsl_st_ptx_free(t);
    }
    for (size_t i = 0; s->ht && i < s->ht_cap; i++)
        while (s->ht[i]) {
            struct folder *fo = s->ht[i];
            s->ht[i] = fo->hnext;
            folder_free(s, fo);
        }
    xt_free(s->ht);
    mdsl_index_close(s->idx);
    mdsl_sltab_free(s->slices);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->wr_cv);
    pthread_cond_destroy(&s->gc_cv);
    pthread_cond_destroy(&s->bg_cv);
    xt_free(s->dir);
    xt_free(s->index_dir);
    xt_free(s);
}

int mdsl_store_open(const struct mdsl_store_opts *o, mdsl_store **out)
{
    if (!o || !o->io || !o->dir)
        return -EINVAL;
    mdsl_store *s = xt_calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->wr_cv, NULL);
    xt_cond_init_mono(&s->gc_cv);
    pthread_cond_init(&s->bg_cv, NULL);
    s->o = *o;
    s->io = o->io;
    if (!s->o.seg_size)
        s->o.seg_size = UINT64_C(64) << 20;
    if (s->o.gc_threshold <= 0)
        s->o.gc_threshold = 0.25;
    if (!s->o.gc_interval_ms)
        s->o.gc_interval_ms = 1000;
    if (!s->o.roll_idle_ms)
        s->o.roll_idle_ms = 60000;
    s->dir = xt_strdup(o->dir);
    size_t il = strlen(o->dir) + 8;
    s->index_dir = o->index_dir ? xt_strdup(o->index_dir) : xt_malloc(il);
    s->ht_cap = 64;
    s->ht = xt_calloc(s->ht_cap, sizeof *s->ht);
    int rc = s->dir && s->index_dir && s->ht ? 0 : -ENOMEM;
    if (rc == 0 && !o->index_dir)
        snprintf(s->index_dir, il, "%s/index", o->dir);
    s->o.dir = s->dir;
    s->o.index_dir = s->index_dir;
    if (rc == 0)
        rc = mdsl_io_mkdir(s->io, s->dir);
    if (rc == 0)
        mdsl_space_size(s);
    if (rc == 0)
        rc = mdsl_sltab_new(0, &s->slices);
    if (rc == 0)
        rc = mdsl_index_open(s->index_dir, &s->idx);
    if (rc == 0)
        rc = mdsl_recover(s);
    if (rc == 0 && s->o.gc_thread)
        rc = mdsl_gc_start(s);
    if (rc < 0) {
        XT_ERR("mdsl: open %s failed: %s", o->dir, strerror(-rc));
        store_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void mdsl_store_close(mdsl_store *s)
{
    if (!s)
        return;
    mdsl_gc_stop(s);
    store_free(s);
}
