/*
 * mdsl_md.c -- table metadata (mdsl_store.h set_md/get_md): opaque MD
 * records appended to the folder's `md` file, the last valid one wins.
 * Writes hold the writer token (md_size is the token's); reads pin the
 * folder (a drop may remove it meanwhile, mdsl_space.c) and scan the file.
 */
#include "mdsl_handle_i.h"

#include <string.h>

int mdsl_store_set_md(mdsl_store *s, uint32_t fsid, uint64_t table, const void *md, uint32_t len)
{
    if (len > MDSL_MAX_PAYLOAD - 1 || (len && !md))
        return -EINVAL;
    uint8_t *buf = xt_malloc(MDSL_HDR_SIZE + len);
    if (!buf)
        return -ENOMEM;
    mdsl_st_token_take(s);
    pthread_mutex_lock(&s->mu);
    int rc = s->failed;
    pthread_mutex_unlock(&s->mu);
    struct folder *fo = NULL;
    if (rc == 0)
        rc = mdsl_st_folder_get(s, fsid, table, true, &fo);
    if (rc == 0) {
        struct mdsl_rec_hdr h = { .type = MDSL_REC_MD, .fsid = fsid, .table = table,
                                  .payload_len = len };
        mdsl_seg_encode(&h, md, buf);
        struct mdsl_io_wr w = { fo->md, fo->md_size, buf, MDSL_HDR_SIZE + len };
        bool sync_failed = false;
        rc = mdsl_io_write(s->io, &w, 1, &fo->md, 1, &sync_failed);
        if (rc == 0)
            fo->md_size += w.len;
        else if (sync_failed)
            mdsl_st_fail(s, rc, "fsync of md");
        else if (mdsl_io_truncate(s->io, fo->md, fo->md_size) < 0)
            mdsl_st_fail(s, rc, "cutting back md");
    }
    mdsl_st_token_put(s);
    xt_free(buf);
    return rc;
}

struct md_last {
    uint8_t *data;
    uint32_t len;
    bool found;
};

static int md_keep(const struct mdsl_rec_hdr *h, const uint8_t *rec, uint64_t off, void *arg)
{
    (void)off;
    struct md_last *m = arg;
    if (h->type != MDSL_REC_MD)
        return 0;
    uint8_t *d = xt_malloc(h->payload_len ? h->payload_len : 1);
    if (!d)
        return -ENOMEM;
    memcpy(d, rec + MDSL_HDR_SIZE, h->payload_len);
    xt_free(m->data);
    m->data = d;
    m->len = h->payload_len;
    m->found = true;
    return 0;
}

int mdsl_store_get_md(mdsl_store *s, uint32_t fsid, uint64_t table, void **md, uint32_t *len)
{
    struct folder *fo = mdsl_st_folder_pin(s, fsid, table);
    if (!fo)
        return -ENOENT;
    struct md_last m = { 0 };
    struct mdsl_scan_res res;
    int rc = mdsl_seg_scan(s->io, fo->md, 0, md_keep, &m, &res);
    mdsl_st_folder_unpin(s, fo);
    if (rc == 0 && !m.found)
        rc = -ENOENT;
    if (rc < 0) {
        xt_free(m.data);
        return rc;
    }
    *md = m.data;
    *len = m.len;
    return 0;
}
