/*
 * xt_slice_codec.c -- a slice's image and delta records: encoding
 * (xt_slice_encode, xt_slice_encode_delta) and decoding (xt_slice_decode,
 * xt_slice_apply_delta). The offset table below is the authoritative one;
 * docs/format-slice.md repeats it. The slice internals it reads and writes
 * (struct xt_slice, invariants (1)..(4)) are in xt_slice_i.h.
 *
 * Invariants (besides those of xt_slice_i.h):
 *  (1) A record is validated whole (checksum, header, every record's bounds,
 *      kind and ownership, exact length) before decoding builds or changes
 *      a slice, so the get_rec calls of the decoders cannot fail.
 *  (2) An image holds the live rows only; a delta every entry with
 *      gen > since, tombstones as REC_DELETE records.
 *  (3) A slice decoded or changed by a delta distrusts its change list
 *      (chg_distrust): loaded gens are not this process's commits.
 */
#include "xt_slice_i.h"

#include "xt_common.h"
#include "xt_hash.h"

#include <assert.h>
#include <string.h>

/* ---- serialisation -------------------------------------------------------
 *
 * Image and delta share one layout (docs/format-slice.md), little-endian:
 *
 *   header, HDR_SIZE = 40 bytes
 *     0  u32 magic        IMAGE_MAGIC "XSLI" or DELTA_MAGIC "XSLD"
 *     4  u16 version      FORMAT_VERSION
 *     6  u8  depth        0..32
 *     7  u8  reserved     0
 *     8  u32 index        < 2^depth
 *    12  u32 count        records that follow
 *    16  u32 capacity     image: slice capacity; delta: 0
 *    20  u32 reserved     0
 *    24  u64 gen_a        image: last_gen; delta: since_gen
 *    32  u64 gen_b        image: 0;        delta: upto_gen (last_gen at encode)
 *   records, `count` of them, each REC_FIXED = 22 bytes + name + row
 *     0  u8  kind         REC_ROW (image: always) or REC_DELETE (delta only)
 *     1  u64 hash         owned by (index, depth)
 *     9  u64 gen
 *    17  u32 row_len      0 for REC_DELETE
 *    21  u8  name_len     1..255
 *    22  name[name_len], row[row_len]
 *   trailer
 *     0  u64 checksum     xt_hash_bytes(everything before it, SUM_SEED)
 */
#define IMAGE_MAGIC    0x494C5358u /* "XSLI" */
#define DELTA_MAGIC    0x444C5358u /* "XSLD" */
#define FORMAT_VERSION 1u
#define HDR_SIZE       40u
#define REC_FIXED      22u
#define TRAILER_SIZE   8u
#define SUM_SEED       UINT64_C(0x536c696365763031) /* "Slicev01" */
#define REC_ROW        1u
#define REC_DELETE     2u

static size_t rec_size(const struct xt_ent *e)
{
    return REC_FIXED + e->name_len + (ent_live(e) ? e->row_len : 0);
}

static uint8_t *put_rec(uint8_t *p, const struct xt_ent *e)
{
    uint32_t rl = ent_live(e) ? e->row_len : 0;
    p[0] = ent_live(e) ? REC_ROW : REC_DELETE;
    xt_put_u64(p + 1, e->hash);
    xt_put_u64(p + 9, e->gen);
    xt_put_u32(p + 17, rl);
    p[21] = e->name_len;
    memcpy(p + REC_FIXED, ent_name(e), e->name_len);
    if (rl)
        memcpy(p + REC_FIXED + e->name_len, ent_row(e), rl);
    return p + REC_FIXED + e->name_len + rl;
}

/* Encode the entries selected by (delta, since): image = live rows,
 * delta = every entry with gen > since. */
static int encode(const xt_slice *s, bool delta, uint64_t since, uint8_t **out,
                  size_t *out_len)
{
    size_t len = HDR_SIZE + TRAILER_SIZE;
    uint32_t count = 0, m;
    struct xt_ent *const *v = scan_set(s, delta, &m);
    for (uint32_t p = 0; p < m; p++) {
        const struct xt_ent *e = v[p];
        if (delta ? e->gen > since : ent_live(e)) {
            len += rec_size(e);
            count++;
        }
    }
#ifndef NDEBUG
    if (delta && !s->chg_all) { /* invariant (4): the list misses nothing */
        uint32_t full = 0;
        for (uint32_t p = 0; p < s->nents; p++)
            full += s->ents[p]->gen > since;
        assert(full == count);
    }
#endif
    uint8_t *buf = xt_malloc(len);
    if (!buf)
        return -ENOMEM;
    memset(buf, 0, HDR_SIZE);
    xt_put_u32(buf, delta ? DELTA_MAGIC : IMAGE_MAGIC);
    xt_put_u16(buf + 4, FORMAT_VERSION);
    buf[6] = (uint8_t)s->depth;
    xt_put_u32(buf + 8, s->index);
    xt_put_u32(buf + 12, count);
    xt_put_u32(buf + 16, delta ? 0 : s->capacity);
    xt_put_u64(buf + 24, delta ? since : s->last_gen);
    xt_put_u64(buf + 32, delta ? s->last_gen : 0);
    uint8_t *w = buf + HDR_SIZE;
    for (uint32_t p = 0; p < m; p++) {
        const struct xt_ent *e = v[p];
        if (delta ? e->gen > since : ent_live(e))
            w = put_rec(w, e);
    }
    assert((size_t)(w - buf) == len - TRAILER_SIZE);
    xt_put_u64(w, xt_hash_bytes(buf, len - TRAILER_SIZE, SUM_SEED));
    *out = buf;
    *out_len = len;
    return 0;
}

int xt_slice_encode(const xt_slice *s, uint8_t **out, size_t *out_len)
{
    return encode(s, false, 0, out, out_len);
}

int xt_slice_encode_delta(const xt_slice *s, uint64_t since_gen, uint8_t **out,
                          size_t *out_len)
{
    return encode(s, true, since_gen, out, out_len);
}

/* A parsed, validated header. */
struct hdr {
    uint32_t index, count, capacity;
    unsigned depth;
    uint64_t gen_a, gen_b;
};

struct rec {
    unsigned kind;
    uint64_t hash, gen;
    uint32_t row_len;
    size_t name_len;
    const uint8_t *name, *row;
};

/* Read the record at *off; -EBADMSG when it does not fit before `end`. */
static int get_rec(const uint8_t *b, size_t *off, size_t end, struct rec *r)
{
    if (end - *off < REC_FIXED)
        return -EBADMSG;
    const uint8_t *p = b + *off;
    r->kind = p[0];
    r->hash = xt_get_u64(p + 1);
    r->gen = xt_get_u64(p + 9);
    r->row_len = xt_get_u32(p + 17);
    r->name_len = p[21];
    if (r->name_len == 0 || end - *off - REC_FIXED < r->name_len + (size_t)r->row_len)
        return -EBADMSG;
    r->name = p + REC_FIXED;
    r->row = r->name + r->name_len;
    *off += REC_FIXED + r->name_len + r->row_len;
    return 0;
}

/* Check everything that can be checked without building the slice: header,
 * checksum, every record's bounds, kind and ownership, exact length. */
static int validate(const void *buf, size_t len, uint32_t magic, struct hdr *h)
{
    const uint8_t *b = buf;
    if (!buf || len < HDR_SIZE + TRAILER_SIZE)
        return -EBADMSG;
    if (xt_get_u32(b) != magic || xt_get_u16(b + 4) != FORMAT_VERSION || b[7] != 0 ||
        xt_get_u32(b + 20) != 0)
        return -EBADMSG;
    size_t end = len - TRAILER_SIZE;
    if (xt_get_u64(b + end) != xt_hash_bytes(b, end, SUM_SEED))
        return -EBADMSG;
    h->depth = b[6];
    h->index = xt_get_u32(b + 8);
    h->count = xt_get_u32(b + 12);
    h->capacity = xt_get_u32(b + 16);
    h->gen_a = xt_get_u64(b + 24);
    h->gen_b = xt_get_u64(b + 32);
    if (h->depth > XT_SLICE_MAX_DEPTH || (h->depth < 32 && h->index >> h->depth))
        return -EBADMSG;
    if (magic == IMAGE_MAGIC
            ? (h->capacity == 0 || h->capacity > XT_SLICE_MAX_CAPACITY ||
               h->count > h->capacity || h->gen_b != 0)
            : (h->capacity != 0 || h->count > SLOT_POS_MAX))
        return -EBADMSG;
    uint32_t mask = h->depth >= 32 ? UINT32_MAX : (UINT32_C(1) << h->depth) - 1;
    size_t off = HDR_SIZE;
    for (uint32_t i = 0; i < h->count; i++) {
        struct rec r;
        if (get_rec(b, &off, end, &r) < 0)
            return -EBADMSG;
        if ((xt_hash_vh(r.hash) & mask) != h->index)
            return -EBADMSG;
        if (magic == IMAGE_MAGIC ? (r.kind != REC_ROW || r.gen > h->gen_a)
                                 : (r.kind == REC_DELETE ? r.row_len != 0
                                                         : r.kind != REC_ROW))
            return -EBADMSG;
    }
    return off == end ? 0 : -EBADMSG;
}

int xt_slice_decode(const void *buf, size_t len, xt_slice **out)
{
    struct hdr h;
    int rc = validate(buf, len, IMAGE_MAGIC, &h);
    if (rc < 0)
        return rc;
    xt_slice *s = xt_slice_new(h.index, h.depth, h.capacity);
    if (!s)
        return -ENOMEM;
    if (h.count && (rc = xt_slice_reserve(s, h.count)) < 0)
        goto fail;
    size_t off = HDR_SIZE;
    for (uint32_t i = 0; i < h.count; i++) {
        struct rec r;
        get_rec(buf, &off, len - TRAILER_SIZE, &r); /* validated */
        rc = xt_slice_insert(s, r.name, r.name_len, r.hash, r.row, r.row_len,
                             XT_SLICE_EXCL, r.gen);
        if (rc < 0) {
            /* A duplicate or an oversized collision group: not our output. */
            if (rc != -ENOMEM)
                rc = -EBADMSG;
            goto fail;
        }
    }
    s->last_gen = h.gen_a;
    s->mods = 0;
    s->needs_image = false;
    chg_distrust(s); /* loaded, not changed: no list until the first drop */
    *out = s;
    return 0;
fail:
    xt_slice_free(s);
    return rc;
}

/* Remove the entry of (name, hash) outright, live or tombstone. */
static void purge(xt_slice *s, const void *name, size_t len, uint64_t h)
{
    uint32_t i = xt_slice_find_slot(s, name, len, h, NULL);
    if (i == UINT32_MAX)
        return;
    struct xt_ent *e = s->ents[slot_pos(s->slots[i])];
    xt_slice_remove_at(s, i);
    xt_slice_chg_forget(s, e);
    s->ent_bytes -= ent_size(e);
    if (ent_live(e)) {
        s->nlive--;
        s->nsys -= ent_sys(e);
    } else {
        s->ndead--;
    }
    xt_free(e);
}

int xt_slice_apply_delta(xt_slice *s, const void *buf, size_t len)
{
    struct hdr h;
    int rc = validate(buf, len, DELTA_MAGIC, &h);
    if (rc < 0)
        return rc;
    if (h.index != s->index || h.depth != s->depth)
        return -EINVAL;
    /* Deletes first so that upserts never overrun the capacity needlessly. */
    for (int pass = 0; pass < 2; pass++) {
        size_t off = HDR_SIZE;
        for (uint32_t i = 0; i < h.count; i++) {
            struct rec r;
            get_rec(buf, &off, len - TRAILER_SIZE, &r); /* validated */
            if (pass == 0 && r.kind == REC_DELETE) {
                purge(s, r.name, r.name_len, r.hash);
            } else if (pass == 1 && r.kind == REC_ROW) {
                rc = xt_slice_insert(s, r.name, r.name_len, r.hash, r.row, r.row_len, 0,
                                     r.gen);
                if (rc < 0)
                    return rc;
            }
        }
    }
    changed(s, h.gen_b);
    chg_distrust(s); /* loaded gens, not this process's commits */
    return 0;
}
