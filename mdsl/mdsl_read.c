/*
 * mdsl_read.c -- the store's read path (mdsl_store.h "reads"): slice loads
 * (the latest image plus the deltas after it) and column reads. Readers
 * never take the writer token; they read the index, then the pointed-at
 * records, and retry when GC moved a record meanwhile (-EAGAIN from
 * mdsl_st_read_ptr). A slice whose newest image is a MOVED tombstone answers
 * -ESTALE to both (docs/mdsl-scale.md "Tombstones"), never an empty image.
 */
#include "mdsl_handle_i.h"

#include "xt_time.h"

#include <assert.h>

#include <stdbool.h>
#include <string.h>

/* Reads that lost a race with GC try again this many times (gc_retry). */
#define MDSL_READ_RETRIES 40

/* ---- reads ------------------------------------------------------------ */


/* Move a record's payload to the front of its buffer: the blob owns it. */
static void *payload_of(uint8_t *rec, const struct mdsl_rec_hdr *h)
{
    memmove(rec, rec + MDSL_HDR_SIZE, h->payload_len);
    return rec;
}

static int load_once(mdsl_store *s, struct folder *fo, uint32_t slice, struct xt_store_load *out)
{
    struct mdsl_ptr_list l = { 0 };
    int rc = mdsl_index_scan_slice(
        s->idx, (xt_slice_id){ .fsid = fo->fsid, .slice = slice, .table = fo->table },
        mdsl_ptr_list_add, &l);
    size_t first = 0;
    for (size_t i = 0; i < l.n; i++)
        if (l.p[i].type == XT_STORE_IMAGE)
            first = i; /* ascending versions: the last image is the latest */
    if (rc == 0 && l.n == 0)
        rc = -ENOENT;
    if (rc == 0 && l.p[first].type == XT_STORE_IMAGE && (l.p[first].flags & XT_STORE_F_MOVED))
        rc = -ESTALE;
    if (rc == 0 && l.n - first > 1 &&
        !(out->deltas = xt_calloc(l.n - first, sizeof *out->deltas)))
        rc = -ENOMEM;
    for (size_t i = first; i < l.n && rc == 0; i++) {
        struct mdsl_rec_hdr h;
        uint8_t *rec;
        rc = mdsl_st_read_ptr(s, fo, false, 0, &l.p[i], &h, &rec);
        if (rc < 0)
            break;
        struct xt_store_blob b = { .version = h.version, .data = payload_of(rec, &h),
                                   .len = h.payload_len, .flags = l.p[i].flags };
        if (l.p[i].type == XT_STORE_IMAGE) {
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
        xt_store_load_free(out);
    return rc;
}

/* A read that found its segment gone (-EAGAIN: GC moved the record after
 * the index was read) reads the index again. GC publishes the new pointers
 * only once its index batch is synced, which takes milliseconds, so retries
 * back off (0, 1, 2, 4 ... 64 ms; about 2 s in all) instead of spinning
 * through them in microseconds. Returns whether to try again. */
static bool gc_retry(int attempt)
{
    if (attempt >= MDSL_READ_RETRIES)
        return false;
    if (attempt > 0)
        xt_sleep_ms(UINT64_C(1) << XT_MIN(attempt - 1, 6));
    return true;
}

int mdsl_store_load_slice(mdsl_store *s, xt_slice_id id, struct xt_store_load *out)
{
    assert(out);
    memset(out, 0, sizeof *out);
    struct folder *fo = mdsl_st_folder_pin(s, id.fsid, id.table);
    if (!fo)
        return -ENOENT;
    int rc = -EAGAIN;
    for (int attempt = 0; rc == -EAGAIN && gc_retry(attempt); attempt++)
        rc = load_once(s, fo, id.slice, out); /* -EAGAIN: GC moved it; re-read */
    mdsl_st_folder_unpin(s, fo);
    if (rc == -EAGAIN)
        XT_ERR("mdsl: load of fs %u table %llu slice %u: records keep moving under GC",
               id.fsid, (unsigned long long)id.table, id.slice);
    return rc == -EAGAIN ? -EIO : rc;
}

#define FIRST_FOUND 1 /* stops the scan; callbacks otherwise return 0 or -errno */

static int first_ptr(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    (void)k;
    *(struct mdsl_ptr *)arg = *p;
    return FIRST_FOUND;
}

/* 1 if the slice's newest image is MOVED, 0 if not, or -errno. Rule 1 of
 * mdsl_apply.c leaves no pointer older than the newest image, so when the
 * slice has an image it is the first pointer: one seek, no walk. */
static int slice_moved(mdsl_store *s, xt_slice_id id)
{
    struct mdsl_ptr p;
    int rc = mdsl_index_scan_slice(s->idx, id, first_ptr, &p);
    if (rc != FIRST_FOUND)
        return rc; /* 0: no pointer at all */
    return p.type == XT_STORE_IMAGE && (p.flags & XT_STORE_F_MOVED);
}

int mdsl_store_read_column(mdsl_store *s, xt_slice_id id, uint64_t key, uint32_t group,
                           void **data, uint32_t *len, uint64_t *version)
{
    assert(data && len);
    struct folder *fo = mdsl_st_folder_pin(s, id.fsid, id.table);
    if (!fo)
        return -ENOENT;
    int moved = slice_moved(s, id);
    if (moved) {
        mdsl_st_folder_unpin(s, fo);
        return moved < 0 ? moved : -ESTALE;
    }
    struct mdsl_ikey k = { .kind = MDSL_IK_COLUMN, .id = id, .key = key, .group = group };
    int rc = -EAGAIN;
    for (int attempt = 0; rc == -EAGAIN && gc_retry(attempt); attempt++) {
        struct mdsl_ptr p;
        rc = mdsl_index_get(s->idx, &k, &p);
        if (rc == 0 && (p.flags & XT_STORE_F_TOMBSTONE))
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
    mdsl_st_folder_unpin(s, fo);
    if (rc == -EAGAIN)
        XT_ERR("mdsl: column read of fs %u table %llu: records keep moving under GC",
               id.fsid, (unsigned long long)id.table);
    return rc == -EAGAIN ? -EIO : rc;
}
