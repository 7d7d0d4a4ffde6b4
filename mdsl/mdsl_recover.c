/*
 * mdsl_recover.c -- what mdsl_store_open does before it serves: load the
 * folders and segments, cut torn tails, replay each folder's TSS from its
 * resume position into the index, and rebuild the prepared transactions.
 * With an empty index (deleted LevelDB folder) the resume positions are
 * missing and the whole TSS is replayed: that is the index rebuild.
 *
 * Invariants:
 *  (1) TSS records are replayed in file order, segment by segment, with the
 *      same rules as live commits (mdsl_apply.c), so the result equals the
 *      live index.
 *  (2) A PREPARE becomes pending only if every record it lists verifies
 *      (mdsl_store.c invariant 1), no decision for it was found, and the
 *      PREPAREs of its transaction were found in as many tables as they
 *      name (header version; 0 in older files: not checked).
 *  (3) A GCMOVE is replayed only if every listed record that still has its
 *      segment verifies (a GCMOVE torn with its moved data is ignored; the
 *      old segment still exists because GC deletes it only afterwards). Its
 *      low-water mark (header version = TSS segno, key = offset) says every
 *      PREPARE before it was decided when it was written.
 *  (4) A transaction with a COMMIT (ABORT) in any folder is committed
 *      (aborted) in every folder: a crash between the folders' decision
 *      records is completed here.
 *  (5) Live bytes are recomputed from the index at the end.
 *  (6) A folder renamed t.F.T.drop is not loaded (add_folder's pattern);
 *      mdsl_space_recover completes its drop before anything else.
 *  (7) A local transaction (MDSL_TXID_LOCAL, mdsl_store_apply_local) left
 *      undecided is aborted: only its own MDSL could have decided it.
 */
#include "mdsl_handle_i.h"
#include "mdsl_apply_i.h"
#include "mdsl_recover_i.h"
#include "mdsl_space_i.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct decision {
    uint64_t txid;
    bool commit;
};

struct rctx {
    mdsl_store *s;
    struct folder *fo;
    uint32_t segno;              /* TSS segment being scanned */
    struct decision *dec;
    size_t ndec, capdec;
    struct folder **fos;
    size_t nfo, capfo;
};

/* ---- loading folders and segments ------------------------------------ */

static int add_folder(const char *name, bool is_dir, void *arg)
{
    struct rctx *r = arg;
    unsigned fsid;
    unsigned long long table;
    char tail;
    if (!is_dir || sscanf(name, "t.%u.%16llx%c", &fsid, &table, &tail) != 2)
        return 0;
    struct folder *fo;
    int rc = mdsl_st_folder_get(r->s, fsid, table, true, &fo);
    if (rc < 0)
        return rc;
    if (r->nfo == r->capfo) {
        size_t nc = r->capfo ? r->capfo * 2 : 16;
        struct folder **nv = xt_realloc(r->fos, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        r->fos = nv;
        r->capfo = nc;
    }
    r->fos[r->nfo++] = fo;
    return 0;
}

static int add_segment(const char *name, bool is_dir, void *arg)
{
    struct rctx *r = arg;
    bool is_cs;
    uint32_t group, segno;
    if (is_dir || !mdsl_seg_parse_name(name, &is_cs, &group, &segno))
        return 0;
    struct seg *sg;
    return mdsl_st_seg_add(r->s, r->fo, is_cs, group, segno, false, &sg);
}

/* Cut the file at the end of its last valid record. */
static int cut_tail(mdsl_store *s, struct folder *fo, struct seg *sg, const char *kind,
                    const struct mdsl_scan_res *res)
{
    if (res->valid_end >= res->size)
        return 0;
    XT_WARN("mdsl: %s/%s.%u: torn tail of %llu bytes cut at %llu", fo->path, kind, sg->no,
            (unsigned long long)(res->size - res->valid_end), (unsigned long long)res->valid_end);
    int rc = mdsl_io_truncate(s->io, sg->f, res->valid_end);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        sg->size = res->valid_end;
        pthread_mutex_unlock(&s->mu);
    }
    return rc;
}

static int cut_cs_tails(mdsl_store *s, struct folder *fo)
{
    for (size_t g = 0; g < fo->ncs; g++) {
        struct segarr *a = &fo->cs[g].segs;
        if (!a->n)
            continue;
        struct seg *sg = a->v[a->n - 1];
        struct mdsl_scan_res res;
        int rc = mdsl_seg_scan(s->io, sg->f, 0, NULL, NULL, &res);
        if (rc == 0)
            rc = cut_tail(s, fo, sg, "CS", &res);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* ---- pending parts --------------------------------------------------- */

static struct ptx *ptx_get(mdsl_store *s, uint64_t txid)
{
    for (struct ptx *t = s->pending; t; t = t->next)
        if (t->txid == txid)
            return t;
    struct ptx *t = xt_calloc(1, sizeof *t);
    if (t) {
        t->txid = txid;
        t->next = s->pending;
        s->pending = t;
    }
    return t;
}

/* Remove the parts of folder fo matching (txid, or any with a PREPARE
 * before the low-water mark when txid == 0). */
static void parts_drop(mdsl_store *s, struct folder *fo, uint64_t txid, uint32_t lw_seg, uint64_t lw_off)
{
    for (struct ptx **pp = &s->pending; *pp;) {
        struct ptx *t = *pp;
        size_t k = 0;
        for (size_t i = 0; i < t->nparts; i++) {
            struct ptx_part *p = &t->parts[i];
            bool drop = p->fo == fo &&
                        (txid ? t->txid == txid
                              : (p->man_segno < lw_seg || (p->man_segno == lw_seg && p->man_off < lw_off)));
            if (drop)
                xt_free(p->e);
            else
                t->parts[k++] = *p;
        }
        t->nparts = k;
        if (k == 0) {
            *pp = t->next;
            mdsl_st_ptx_free(t);
        } else {
            pp = &t->next;
        }
    }
}

static int note_decision(struct rctx *r, uint64_t txid, bool commit)
{
    if (r->ndec == r->capdec) {
        size_t nc = r->capdec ? r->capdec * 2 : 32;
        struct decision *nv = xt_realloc(r->dec, nc * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        r->dec = nv;
        r->capdec = nc;
    }
    r->dec[r->ndec++] = (struct decision){ txid, commit };
    return 0;
}

/* Verify every record an entry list names; missing segments count as valid
 * only if `missing_ok`. 0, -EBADMSG, or another error. */
static int verify_entries(mdsl_store *s, struct folder *fo, const struct mdsl_entry *e, size_t n,
                          bool missing_ok)
{
    for (size_t i = 0; i < n; i++) {
        struct mdsl_ptr p = { .segno = e[i].segno, .len = e[i].len, .off = e[i].off,
                              .csum = e[i].csum };
        struct mdsl_rec_hdr h;
        uint8_t *rec;
        int rc = mdsl_st_read_ptr(s, fo, e[i].type == XT_STORE_COLUMN, e[i].group, &p, &h, &rec);
        if (rc == -EAGAIN && missing_ok)
            continue;
        if (rc == -EAGAIN)
            rc = -EBADMSG;
        if (rc < 0)
            return rc;
        xt_free(rec);
    }
    return 0;
}

static int apply_now(mdsl_store *s, struct folder *fo, const struct mdsl_entry *e, size_t n,
                     uint32_t evidence)
{
    struct apply_ctx c = { .s = s, .fo = fo, .b = mdsl_index_batch_new() };
    int rc = c.b ? mdsl_apply_entries(&c, e, n, evidence) : -ENOMEM;
    if (rc == 0)
        rc = mdsl_index_write(s->idx, c.b, false);
    if (rc == 0)
        mdsl_apply_done(&c);
    mdsl_apply_ctx_free(&c);
    return rc;
}

static int on_record(const struct mdsl_rec_hdr *h, const uint8_t *rec, uint64_t off, void *arg)
{
    struct rctx *r = arg;
    mdsl_store *s = r->s;
    struct folder *fo = r->fo;
    if (h->type != MDSL_REC_PREPARE && h->type != MDSL_REC_COMMIT && h->type != MDSL_REC_ABORT &&
        h->type != MDSL_REC_GCMOVE)
        return 0;
    if (h->fsid != fo->fsid || h->table != fo->table) {
        XT_ERR("mdsl: %s/TSS.%u@%llu belongs to another table; ignored", fo->path, r->segno,
               (unsigned long long)off);
        return 0;
    }
    struct mdsl_entry *e = NULL;
    size_t n = 0;
    int rc = 0;
    if (h->type != MDSL_REC_ABORT) {
        rc = mdsl_entries_decode(rec + MDSL_HDR_SIZE, h->payload_len, &e, &n);
        if (rc == -EBADMSG) {
            XT_ERR("mdsl: %s/TSS.%u@%llu: malformed manifest; ignored", fo->path, r->segno,
                   (unsigned long long)off);
            return 0;
        }
        if (rc < 0)
            return rc;
    }
    switch (h->type) {
    case MDSL_REC_PREPARE: {
        struct ptx *t = ptx_get(s, h->txid);
        bool dup = false;
        for (size_t i = 0; t && i < t->nparts; i++)
            dup |= t->parts[i].fo == fo;
        struct ptx_part *np = t && !dup ? xt_realloc(t->parts, (t->nparts + 1) * sizeof *np) : NULL;
        if (!t || (!dup && !np)) {
            rc = -ENOMEM;
            break;
        }
        if (h->version > t->want_parts)
            t->want_parts = h->version;
        if (dup)
            break;
        t->parts = np;
        t->parts[t->nparts++] = (struct ptx_part){ fo, r->segno, off, e, n };
        e = NULL;
        break;
    }
    case MDSL_REC_COMMIT:
        rc = apply_now(s, fo, e, n, r->segno);
        if (rc == 0)
            rc = note_decision(r, h->txid, true);
        parts_drop(s, fo, h->txid, 0, 0);
        break;
    case MDSL_REC_ABORT:
        rc = note_decision(r, h->txid, false);
        parts_drop(s, fo, h->txid, 0, 0);
        break;
    case MDSL_REC_GCMOVE:
        rc = verify_entries(s, fo, e, n, true);
        if (rc == -EBADMSG) {
            XT_WARN("mdsl: %s/TSS.%u@%llu: GC move with torn data; ignored", fo->path, r->segno,
                    (unsigned long long)off);
            rc = 0;
            break;
        }
        if (rc == 0)
            rc = apply_now(s, fo, e, n, r->segno);
        parts_drop(s, fo, 0, (uint32_t)h->version, h->key);
        break;
    }
    xt_free(e);
    return rc;
}

static int replay_folder(struct rctx *r, struct folder *fo)
{
    mdsl_store *s = r->s;
    r->fo = fo;
    int rc = cut_cs_tails(s, fo);
    if (rc < 0)
        return rc;
    uint32_t rseg = 0;
    uint64_t roff = 0;
    rc = mdsl_index_get_resume(s->idx, fo->fsid, fo->table, &rseg, &roff);
    if (rc == -ENOENT)
        rseg = 0, roff = 0, rc = 0;
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < fo->tss.n && rc == 0; i++) {
        struct seg *sg = fo->tss.v[i];
        if (sg->no < rseg)
            continue;
        r->segno = sg->no;
        struct mdsl_scan_res res;
        rc = mdsl_seg_scan(s->io, sg->f, sg->no == rseg ? roff : 0, on_record, r, &res);
        if (rc == 0)
            rc = cut_tail(s, fo, sg, "TSS", &res);
        if (res.corrupt) {
            pthread_mutex_lock(&s->mu);
            s->st.corrupt_records += res.corrupt;
            pthread_mutex_unlock(&s->mu);
        }
    }
    return rc;
}

/* Invariant 4, then invariant 2 for what is left undecided. */
static int resolve_pending(struct rctx *r)
{
    mdsl_store *s = r->s;
    int rc = 0;
    for (struct ptx *t = s->pending, *next; t && rc == 0; t = next) {
        next = t->next;
        int d = -1;
        for (size_t i = 0; i < r->ndec; i++)
            if (r->dec[i].txid == t->txid)
                d = r->dec[i].commit;
        if (d >= 0) {
            XT_INFO("mdsl: completing the %s of tx %llu in %zu more table(s)",
                    d ? "commit" : "abort", (unsigned long long)t->txid, t->nparts);
            rc = mdsl_st_decide_locked(s, t, d == 1);
            continue;
        }
        if (t->txid & MDSL_TXID_LOCAL) {
            /* invariant 7: no coordinator would ever decide it */
            XT_INFO("mdsl: aborting local tx %llx cut short by the restart",
                    (unsigned long long)t->txid);
            rc = mdsl_st_decide_locked(s, t, false);
            continue;
        }
        /* Undecided, so never acknowledged if a table's PREPARE is missing:
         * an acknowledged prepare had every PREPARE durable, and those of
         * an undecided transaction lie after their resume positions (GC
         * and the low-water marks leave them alone). */
        if (t->want_parts && t->nparts < t->want_parts)
            rc = -EBADMSG;
        for (size_t i = 0; i < t->nparts && rc == 0; i++)
            rc = verify_entries(s, t->parts[i].fo, t->parts[i].e, t->parts[i].n, false);
        if (rc == -EBADMSG) {
            XT_WARN("mdsl: prepare of tx %llu is incomplete (torn); dropped",
                    (unsigned long long)t->txid);
            for (struct ptx **pp = &s->pending; *pp; pp = &(*pp)->next)
                if (*pp == t) {
                    *pp = t->next;
                    break;
                }
            mdsl_st_ptx_free(t);
            rc = 0;
        }
    }
    return rc;
}

static int charge_ptr(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    mdsl_store *s = arg;
    struct folder *fo = mdsl_st_folder_find(s, k->id.fsid, k->id.table);
    if (!fo) {
        XT_WARN("mdsl: index entry for a missing table %u/%llx", k->id.fsid,
                (unsigned long long)k->id.table);
        return 0;
    }
    bool cs = k->kind == MDSL_IK_COLUMN;
    struct seg *sg = mdsl_st_seg_find(mdsl_st_segarr(fo, cs, k->group, false), p->segno);
    if (sg)
        sg->live += p->len;
    struct seg *ev = mdsl_st_seg_find(&fo->tss, p->evidence);
    if (ev)
        ev->live += MDSL_EVIDENCE_COST;
    return 0;
}

int mdsl_recover(mdsl_store *s)
{
    struct rctx r = { .s = s };
    /* first: a drop's index keys must go before anything reads the index */
    int rc = mdsl_space_recover(s);
    if (rc == 0)
        rc = mdsl_io_list(s->io, s->dir, add_folder, &r);
    for (size_t i = 0; i < r.nfo && rc == 0; i++) {
        r.fo = r.fos[i];
        rc = mdsl_io_list(s->io, r.fo->path, add_segment, &r);
    }
    for (size_t i = 0; i < r.nfo && rc == 0; i++)
        rc = replay_folder(&r, r.fos[i]);
    if (rc == 0) {
        s->writing = true; /* decide_locked expects the writer token */
        rc = resolve_pending(&r);
        s->writing = false;
    }
    mdsl_index_batch *b = rc == 0 ? mdsl_index_batch_new() : NULL;
    if (rc == 0 && !b)
        rc = -ENOMEM;
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        s->st.prepared = 0;
        for (struct ptx *t = s->pending; t; t = t->next)
            s->st.prepared++;
        for (size_t i = 0; i < r.nfo; i++) {
            uint32_t sn;
            uint64_t off;
            mdsl_st_resume_pos(s, r.fos[i], &sn, &off);
            mdsl_index_batch_resume(b, r.fos[i]->fsid, r.fos[i]->table, sn, off);
        }
        pthread_mutex_unlock(&s->mu);
        rc = mdsl_index_write(s->idx, b, true);
    }
    mdsl_index_batch_free(b);
    if (rc == 0) {
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < r.nfo; i++) {
            struct folder *fo = r.fos[i];
            for (size_t k = 0; k < fo->tss.n; k++)
                fo->tss.v[k]->live = 0;
            for (size_t g = 0; g < fo->ncs; g++)
                for (size_t k = 0; k < fo->cs[g].segs.n; k++)
                    fo->cs[g].segs.v[k]->live = 0;
        }
        rc = mdsl_index_scan_all(s->idx, charge_ptr, s);
        pthread_mutex_unlock(&s->mu);
    }
    if (rc == 0 && s->st.prepared)
        XT_INFO("mdsl: %llu prepared transaction(s) wait for their coordinator",
                (unsigned long long)s->st.prepared);
    xt_free(r.dec);
    xt_free(r.fos);
    return rc;
}
