/*
 * mdsl_seg.c -- record codec and sequential scan of segment files.
 *
 * The scan reads through a window (1 MiB, larger for a larger record) so a
 * segment of small records costs a few large reads, not one per record.
 */
#include "mdsl_seg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt_hash.h"

#define SCAN_WINDOW (1u << 20)

static uint64_t rec_csum(const uint8_t *hdr, const void *payload, uint32_t len)
{
    uint64_t seed = xt_hash_bytes(hdr, MDSL_HO_CSUM, MDSL_MAGIC);
    return xt_hash_bytes(payload ? payload : "", len, seed);
}

void mdsl_seg_encode(struct mdsl_rec_hdr *h, const void *payload, uint8_t *out)
{
    xt_put_u32(out + MDSL_HO_MAGIC, MDSL_MAGIC);
    out[MDSL_HO_TYPE] = h->type;
    out[MDSL_HO_FLAGS] = h->flags;
    xt_put_u16(out + MDSL_HO_FORMAT, MDSL_FORMAT_VERSION);
    xt_put_u32(out + MDSL_HO_LEN, h->payload_len);
    xt_put_u32(out + MDSL_HO_FSID, h->fsid);
    xt_put_u64(out + MDSL_HO_TXID, h->txid);
    xt_put_u64(out + MDSL_HO_TABLE, h->table);
    xt_put_u64(out + MDSL_HO_VERSION, h->version);
    xt_put_u32(out + MDSL_HO_SLICE, h->slice);
    xt_put_u32(out + MDSL_HO_GROUP, h->group);
    xt_put_u64(out + MDSL_HO_KEY, h->key);
    if (h->payload_len)
        memcpy(out + MDSL_HDR_SIZE, payload, h->payload_len);
    h->csum = rec_csum(out, out + MDSL_HDR_SIZE, h->payload_len);
    xt_put_u64(out + MDSL_HO_CSUM, h->csum);
}

int mdsl_seg_decode_hdr(const uint8_t *b, struct mdsl_rec_hdr *h)
{
    if (xt_get_u32(b + MDSL_HO_MAGIC) != MDSL_MAGIC ||
        xt_get_u16(b + MDSL_HO_FORMAT) != MDSL_FORMAT_VERSION ||
        b[MDSL_HO_TYPE] == 0 || b[MDSL_HO_TYPE] > MDSL_REC_TYPE_MAX ||
        xt_get_u32(b + MDSL_HO_LEN) > MDSL_MAX_PAYLOAD)
        return -EBADMSG;
    h->type = b[MDSL_HO_TYPE];
    h->flags = b[MDSL_HO_FLAGS];
    h->payload_len = xt_get_u32(b + MDSL_HO_LEN);
    h->fsid = xt_get_u32(b + MDSL_HO_FSID);
    h->txid = xt_get_u64(b + MDSL_HO_TXID);
    h->table = xt_get_u64(b + MDSL_HO_TABLE);
    h->version = xt_get_u64(b + MDSL_HO_VERSION);
    h->slice = xt_get_u32(b + MDSL_HO_SLICE);
    h->group = xt_get_u32(b + MDSL_HO_GROUP);
    h->key = xt_get_u64(b + MDSL_HO_KEY);
    h->csum = xt_get_u64(b + MDSL_HO_CSUM);
    return 0;
}

int mdsl_seg_verify(const uint8_t *rec, uint64_t avail, struct mdsl_rec_hdr *h)
{
    if (avail < MDSL_HDR_SIZE)
        return -ENODATA;
    int rc = mdsl_seg_decode_hdr(rec, h);
    if (rc < 0)
        return rc;
    if (avail < mdsl_rec_total(h))
        return -ENODATA;
    if (rec_csum(rec, rec + MDSL_HDR_SIZE, h->payload_len) != h->csum)
        return -EBADMSG;
    return 0;
}

int mdsl_seg_read(mdsl_io *io, mdsl_file *f, uint64_t off, uint32_t len,
                  uint64_t expect_csum, struct mdsl_rec_hdr *h, uint8_t **rec_out)
{
    /* len comes from an index entry or a PREPARE/COMMIT/GCMOVE manifest:
     * never allocate for a record that cannot exist (a manifest entry of
     * 4 GiB made recovery malloc 4 GiB; found by fuzz_mdsl_seg). The file
     * size is asked only for large records, so small reads cost nothing. */
    if (len < MDSL_HDR_SIZE || len - MDSL_HDR_SIZE > MDSL_MAX_PAYLOAD)
        return -EBADMSG;
    if (len > SCAN_WINDOW) {
        uint64_t size;
        int src = mdsl_io_size(io, f, &size);
        if (src < 0)
            return src;
        if (off > size || len > size - off)
            return -EBADMSG;
    }
    uint8_t *buf = xt_malloc(len);
    if (!buf)
        return -ENOMEM;
    long n = mdsl_io_read(io, f, off, buf, len);
    int rc = n < 0 ? (int)n : 0;
    if (rc == 0) {
        rc = mdsl_seg_verify(buf, (uint64_t)n, h);
        if (rc == -ENODATA)
            rc = -EBADMSG; /* the record is cut short: a truncated segment */
        if (rc == 0 && (mdsl_rec_total(h) != len || (expect_csum && h->csum != expect_csum)))
            rc = -EBADMSG;
    }
    if (rc < 0) {
        xt_free(buf);
        return rc;
    }
    *rec_out = buf;
    return 0;
}

void mdsl_seg_entry_put(uint8_t *p, const struct mdsl_entry *e)
{
    memset(p, 0, MDSL_ENTRY_SIZE);
    p[MDSL_EO_TYPE] = e->type;
    p[MDSL_EO_FLAGS] = e->flags;
    xt_put_u32(p + MDSL_EO_GROUP, e->group);
    xt_put_u32(p + MDSL_EO_SEGNO, e->segno);
    xt_put_u32(p + MDSL_EO_LEN, e->len);
    xt_put_u64(p + MDSL_EO_OFF, e->off);
    xt_put_u64(p + MDSL_EO_CSUM, e->csum);
    xt_put_u64(p + MDSL_EO_VERSION, e->version);
    xt_put_u32(p + MDSL_EO_SLICE, e->slice);
    xt_put_u64(p + MDSL_EO_KEY, e->key);
}

void mdsl_seg_entry_get(const uint8_t *p, struct mdsl_entry *e)
{
    e->type = p[MDSL_EO_TYPE];
    e->flags = p[MDSL_EO_FLAGS];
    e->group = xt_get_u32(p + MDSL_EO_GROUP);
    e->segno = xt_get_u32(p + MDSL_EO_SEGNO);
    e->len = xt_get_u32(p + MDSL_EO_LEN);
    e->off = xt_get_u64(p + MDSL_EO_OFF);
    e->csum = xt_get_u64(p + MDSL_EO_CSUM);
    e->version = xt_get_u64(p + MDSL_EO_VERSION);
    e->slice = xt_get_u32(p + MDSL_EO_SLICE);
    e->key = xt_get_u64(p + MDSL_EO_KEY);
}

/* ---- scan ------------------------------------------------------------ */

struct window {
    mdsl_io *io;
    mdsl_file *f;
    uint64_t size;
    uint8_t *buf;
    size_t cap;
    uint64_t boff;  /* file offset of buf[0] */
    size_t blen;    /* valid bytes in buf */
};

/* Make [off, off+n) available; returns a pointer into the window, or NULL
 * with *err set (-ENODATA past the end of the file). */
static const uint8_t *win_get(struct window *w, uint64_t off, size_t n, int *err)
{
    if (off + n > w->size) {
        *err = -ENODATA;
        return NULL;
    }
    if (off >= w->boff && off + n <= w->boff + w->blen)
        return w->buf + (off - w->boff);
    size_t want = XT_MAX((size_t)SCAN_WINDOW, n);
    if (want > w->cap) {
        uint8_t *b = xt_realloc(w->buf, want);
        if (!b) {
            *err = -ENOMEM;
            return NULL;
        }
        w->buf = b;
        w->cap = want;
    }
    size_t len = (size_t)XT_MIN((uint64_t)want, w->size - off);
    long r = mdsl_io_read(w->io, w->f, off, w->buf, len);
    if (r < 0) {
        *err = (int)r;
        return NULL;
    }
    w->boff = off;
    w->blen = (size_t)r;
    if ((size_t)r < n) {
        *err = -ENODATA;
        return NULL;
    }
    return w->buf;
}

/* Is there a valid record at off? 1 yes (h set), 0 no, <0 I/O error. */
static int valid_at(struct window *w, uint64_t off, struct mdsl_rec_hdr *h, const uint8_t **rec)
{
    int err = 0;
    const uint8_t *p = win_get(w, off, MDSL_HDR_SIZE, &err);
    if (!p)
        return err == -ENODATA ? 0 : err;
    if (mdsl_seg_decode_hdr(p, h) < 0)
        return 0;
    p = win_get(w, off, mdsl_rec_total(h), &err);
    if (!p)
        return err == -ENODATA ? 0 : err;
    if (mdsl_seg_verify(p, mdsl_rec_total(h), h) < 0)
        return 0;
    *rec = p;
    return 1;
}

int mdsl_seg_scan(mdsl_io *io, mdsl_file *f, uint64_t start, mdsl_scan_cb cb,
                  void *arg, struct mdsl_scan_res *res)
{
    struct window w = { .io = io, .f = f };
    memset(res, 0, sizeof *res);
    int rc = mdsl_io_size(io, f, &w.size);
    if (rc < 0)
        return rc;
    res->size = w.size;
    res->valid_end = start;
    uint64_t off = start;
    while (off + MDSL_HDR_SIZE <= w.size) {
        struct mdsl_rec_hdr h;
        const uint8_t *rec;
        int v = valid_at(&w, off, &h, &rec);
        if (v < 0) {
            rc = v;
            break;
        }
        if (v == 0) {
            /* invariant 2: resynchronise on the next valid record, if any */
            uint64_t p = off + 1;
            for (; p + MDSL_HDR_SIZE <= w.size; p++) {
                int err = 0;
                const uint8_t *m = win_get(&w, p, 4, &err);
                if (!m) {
                    if (err != -ENODATA)
                        rc = err;
                    p = w.size;
                    break;
                }
                if (xt_get_u32(m) != MDSL_MAGIC)
                    continue;
                v = valid_at(&w, p, &h, &rec);
                if (v != 0)
                    break;
            }
            if (rc < 0 || v < 0) {
                rc = rc < 0 ? rc : v;
                break;
            }
            if (v == 0)
                break; /* torn tail: nothing valid after `off` */
            XT_ERR("mdsl_seg: corrupt bytes [%llu, %llu) skipped",
                   (unsigned long long)off, (unsigned long long)p);
            res->corrupt++;
            off = p;
        }
        uint64_t total = mdsl_rec_total(&h);
        res->records++;
        if (cb && (rc = cb(&h, rec, off, arg)) != 0)
            break;
        off += total;
        res->valid_end = off;
    }
    xt_free(w.buf);
    return rc;
}

void mdsl_seg_name(char *buf, size_t n, bool is_cs, uint32_t group, uint32_t segno)
{
    if (is_cs)
        snprintf(buf, n, "CS.%u.%u", group, segno);
    else
        snprintf(buf, n, "TSS.%u", segno);
}

static bool parse_u32(const char *s, char stop, uint32_t *out, const char **end)
{
    char *e;
    if (*s < '0' || *s > '9')
        return false;
    unsigned long v = strtoul(s, &e, 10);
    if (*e != stop || v > UINT32_MAX)
        return false;
    *out = (uint32_t)v;
    *end = e;
    return true;
}

bool mdsl_seg_parse_name(const char *name, bool *is_cs, uint32_t *group, uint32_t *segno)
{
    const char *e;
    if (!strncmp(name, "TSS.", 4)) {
        *is_cs = false;
        *group = 0;
        return parse_u32(name + 4, '\0', segno, &e) && *segno > 0;
    }
    if (!strncmp(name, "CS.", 3)) {
        *is_cs = true;
        return parse_u32(name + 3, '.', group, &e) && parse_u32(e + 1, '\0', segno, &e) &&
               *segno > 0;
    }
    return false;
}
