/*
 * mdsl_read.c -- the store's read path (mdsl_store.h "reads"): slice loads
 * (the latest image plus the deltas after it) and column reads. Readers
 * never take the writer token; they read the index, then the pointed-at
 * records, and retry when GC moved a record meanwhile (-EAGAIN from
 * mdsl_st_read_ptr).
 */
#include "mdsl_store_i.h"

#include <string.h>

/* ---- reads ------------------------------------------------------------ */

struct slice_list {
    struct mdsl_ptr *p;
    size_t n, cap;
    int err;
};

static int collect_ptr(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    (void)k;
    struct slice_list *l = arg;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        struct mdsl_ptr *np = xt_realloc(l->p, nc * sizeof *np);
        if (!np)
            return -ENOMEM;
        l->p = np;
        l->cap = nc;
    }
    l->p[l->n++] = *p;
    return 0;
}

void mdsl_slice_load_free(struct mdsl_slice_load *l)
{
    if (!l)
        return;
    xt_free(l->image.data);
    for (size_t i = 0; i < l->ndeltas; i++)
        xt_free(l->deltas[i].data);
    xt_free(l->deltas);
    memset(l, 0, sizeof *l);
}

/* Move a record's payload to the front of its buffer: the blob owns it. */
static void *payload_of(uint8_t *rec, const struct mdsl_rec_hdr *h)
{
    memmove(rec, rec + MDSL_HDR_SIZE, h->payload_len);
    return rec;
}

static int load_once(mdsl_store *s, struct folder *fo, uint32_t slice, struct mdsl_slice_load *out)
{
    struct slice_list l = { 0 };
    int rc = mdsl_index_scan_slice(s->idx, fo->fsid, fo->table, slice, collect_ptr, &l);
    size_t first = 0;
    for (size_t i = 0; i < l.n; i++)
        if (l.p[i].type == MDSL_REC_IMAGE)
            first = i; /* ascending versions: the last image is the latest */
    if (rc == 0 && l.n == 0)
        rc = -ENOENT;
    if (rc == 0 && l.n - first > 1 &&
        !(out->deltas = xt_calloc(l.n - first, sizeof *out->deltas)))
        rc = -ENOMEM;
    for (size_t i = first; i < l.n && rc == 0; i++) {
        struct mdsl_rec_hdr h;
        uint8_t *rec;
        rc = mdsl_st_read_ptr(s, fo, false, 0, &l.p[i], &h, &rec);
        if (rc < 0)
            break;
        struct mdsl_blob b = { .version = h.version, .data = payload_of(rec, &h), .len = h.payload_len };
        if (l.p[i].type == MDSL_REC_IMAGE) {
            out->has_image = true;
            out->image = b;
        } else {
            if (!out->deltas && !(out->deltas = xt_calloc(1, sizeof *out->deltas))) {
                xt_free(rec);
                rc = -ENOMEM;
                break;
            }
            out->deltas[out->ndeltas++] = b;
        }
    }
    xt_free(l.p);
    if (rc < 0)
        mdsl_slice_load_free(out);
    return rc;
}

int mdsl_store_load_slice(mdsl_store *s, uint32_t fsid, uint64_t table, uint32_t slice,
                          struct mdsl_slice_load *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&s->mu);
    struct folder *fo = mdsl_st_folder_find(s, fsid, table);
    pthread_mutex_unlock(&s->mu);
    if (!fo)
        return -ENOENT;
    int rc = -EAGAIN;
    for (int attempt = 0; attempt < 8 && rc == -EAGAIN; attempt++)
        rc = load_once(s, fo, slice, out); /* -EAGAIN: GC moved it; re-read */
    return rc == -EAGAIN ? -EIO : rc;
}

int mdsl_store_read_column(mdsl_store *s, uint32_t fsid, uint64_t table, uint32_t slice,
                           uint64_t key, uint32_t group, void **data, uint32_t *len,
                           uint64_t *version)
{
    pthread_mutex_lock(&s->mu);
    struct folder *fo = mdsl_st_folder_find(s, fsid, table);
    pthread_mutex_unlock(&s->mu);
    if (!fo)
        return -ENOENT;
    struct mdsl_ikey k = { .kind = MDSL_IK_COLUMN, .fsid = fsid, .table = table, .slice = slice,
                           .key = key, .group = group };
    int rc = -EAGAIN;
    for (int attempt = 0; attempt < 8 && rc == -EAGAIN; attempt++) {
        struct mdsl_ptr p;
        rc = mdsl_index_get(s->idx, &k, &p);
        if (rc == 0 && (p.flags & MDSL_F_TOMBSTONE))
            rc = -ENOENT;
        if (rc < 0)
            break;
        struct mdsl_rec_hdr h;
        uint8_t *rec;
        rc = mdsl_st_read_ptr(s, fo, true, group, &p, &h, &rec);
        if (rc == 0) {
            *len = h.payload_len;
            *data = payload_of(rec, &h);
            if (version)
                *version = h.version;
        }
    }
    return rc == -EAGAIN ? -EIO : rc;
}
