/*
 * xt_row.c -- the row codec: xt_row views <-> checksummed byte strings,
 * row updates, and the xattr group sub-codec. The format (offset table) is
 * in xt_row.h and docs/format-row.md.
 *
 * Invariants of this file:
 *  (1) A decoder reads a byte only after checking it lies in [buf, end):
 *      every read goes through struct rd, whose checks compare remaining
 *      byte counts (never pointer + length, which could overflow).
 *  (2) Lengths read from input are checked against a limit before they are
 *      added to anything, and sums are kept in uint64_t, so no length
 *      arithmetic can wrap (limits * XT_ROW_GROUPS_MAX << 2^63).
 *  (3) Encoders validate the whole view before writing a byte: a failed
 *      encode leaves the caller's buffer untouched.
 *  (4) Every allocating function allocates at most once per output and
 *      sets its outputs (NULL, 0) on failure, so -ENOMEM never leaks.
 */
#include "xt_row.h"

#include "xt_common.h"
#include "xt_hash.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(XT_ROW_GROUPS_MAX <= 32, "update keeps a u32 mask of groups");
_Static_assert(XT_ROW_TYPE_MAX < 256, "type is one byte");
_Static_assert((uint64_t)XT_ROW_GROUPS_MAX * XT_ROW_GROUP_MAX < (UINT64_C(1) << 40),
               "group length sums cannot wrap");

/* ---- errors ---------------------------------------------------------- */

static _Thread_local const char *last_error = "no error";

const char *xt_row_last_error(void)
{
    return last_error;
}

/* Every decode failure goes through here: one place to log the reason. */
static int bad(const char *why)
{
    last_error = why;
    XT_DBG("xt_row: rejected: %s", why);
    return -EBADMSG;
}

/* ---- varints and checksums ------------------------------------------- */

static unsigned varint_len(uint64_t v)
{
    unsigned n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Zigzag of a wrapping difference: small differences of either sign are
 * small numbers, and every u64 pair round-trips exactly. */
static uint64_t zz_enc(uint64_t d)
{
    return (d << 1) ^ (0 - (d >> 63));
}

static uint64_t zz_dec(uint64_t z)
{
    return (z >> 1) ^ (0 - (z & 1));
}

static uint32_t csum32(const void *p, size_t len, uint64_t seed)
{
    return (uint32_t)xt_hash_bytes(p, len, seed);
}

/* A bounds-checked reader over [p, end). */
struct rd {
    const uint8_t *p;
    const uint8_t *end;
};

static size_t rd_left(const struct rd *r)
{
    return (size_t)(r->end - r->p);
}

/* A canonical varint of at most 10 bytes that fits 64 bits. */
static bool rd_varint_slow(struct rd *r, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p == r->end)
            return false;
        uint8_t b = *r->p++;
        if (shift == 63 && b > 1)
            return false;           /* bits past 64, or an 11th byte */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            if (b == 0 && shift != 0)
                return false;       /* overlong: not the shortest form */
            *out = v;
            return true;
        }
    }
    return false;
}

/* Most fixed columns fit one byte: keep that case inline. */
static inline bool rd_varint(struct rd *r, uint64_t *out)
{
    if (XT_LIKELY(r->p != r->end && *r->p < 0x80)) {
        *out = *r->p++;
        return true;
    }
    return rd_varint_slow(r, out);
}

static bool rd_varint_max(struct rd *r, uint64_t max, uint64_t *out)
{
    return rd_varint(r, out) && *out <= max;
}

static bool rd_u32(struct rd *r, uint32_t *out)
{
    uint64_t v;
    if (!rd_varint_max(r, UINT32_MAX, &v))
        return false;
    *out = (uint32_t)v;
    return true;
}

static bool rd_bytes(struct rd *r, size_t n, const uint8_t **out)
{
    if (rd_left(r) < n)
        return false;
    *out = r->p;
    r->p += n;
    return true;
}

/* ---- the view -------------------------------------------------------- */

void xt_row_init(xt_row *row)
{
    memset(row, 0, sizeof *row);
}

static uint32_t name_max(uint8_t type)
{
    return type == XT_ROW_KV ? XT_ROW_KEY_MAX : XT_NAME_MAX;
}

/* Index of the first group with id >= `id` (groups are sorted). */
static uint32_t group_pos(const xt_row *row, uint16_t id)
{
    uint32_t i = 0;
    while (i < row->ngroups && row->groups[i].id < id)
        i++;
    return i;
}

const xt_row_group *xt_row_view_group(const xt_row *row, uint16_t id)
{
    uint32_t i = group_pos(row, id);
    return i < row->ngroups && row->groups[i].id == id ? &row->groups[i] : NULL;
}

int xt_row_view_set_group(xt_row *row, uint16_t id, const void *ptr, uint32_t len)
{
    if (id == 0 || (ptr == NULL && len != 0))
        return -EINVAL;
    if (len > XT_ROW_GROUP_MAX)
        return -E2BIG;
    uint32_t i = group_pos(row, id);
    if (i == row->ngroups || row->groups[i].id != id) {
        if (row->ngroups == XT_ROW_GROUPS_MAX)
            return -E2BIG;
        memmove(&row->groups[i + 1], &row->groups[i],
                (row->ngroups - i) * sizeof row->groups[0]);
        row->ngroups++;
    }
    row->groups[i] = (xt_row_group){ .ptr = ptr, .len = len, .csum = 0, .id = id };
    return 0;
}

int xt_row_view_del_group(xt_row *row, uint16_t id)
{
    uint32_t i = group_pos(row, id);
    if (i == row->ngroups || row->groups[i].id != id)
        return -ENOENT;
    memmove(&row->groups[i], &row->groups[i + 1],
            (row->ngroups - i - 1) * sizeof row->groups[0]);
    row->ngroups--;
    return 0;
}

/* ---- encode ---------------------------------------------------------- */

/* Size of the meta part, or -errno if the view breaks an invariant. */
static ssize_t meta_size(const xt_row *row)
{
    const xt_row_attr *a = &row->attr;
    if (a->type == 0 || a->type > XT_ROW_TYPE_MAX)
        return -EINVAL;
    if (row->name_len == 0 || row->name == NULL)
        return -EINVAL;
    if (row->name_len > name_max(a->type))
        return -ENAMETOOLONG;
    if (row->ngroups > XT_ROW_GROUPS_MAX)
        return -E2BIG;
    size_t n = 2 + varint_len(a->uuid) + varint_len(a->mode) + varint_len(a->uid) +
               varint_len(a->gid) + varint_len(a->nlink) + varint_len(a->size) +
               varint_len(a->ctime_ns) + varint_len(zz_enc(a->atime_ns - a->ctime_ns)) +
               varint_len(zz_enc(a->mtime_ns - a->ctime_ns)) +
               varint_len(zz_enc(a->btime_ns - a->ctime_ns)) + varint_len(a->flags) +
               varint_len(a->generation) + varint_len(a->version) +
               varint_len(row->name_len) + row->name_len + varint_len(row->ngroups);
    for (uint32_t i = 0; i < row->ngroups; i++) {
        const xt_row_group *g = &row->groups[i];
        if (g->id == 0 || (i > 0 && g->id <= row->groups[i - 1].id))
            return -EINVAL;
        if (g->ptr == NULL && g->len != 0)
            return -EINVAL;
        if (g->len > XT_ROW_GROUP_MAX)
            return -E2BIG;
        n += varint_len(g->id) + varint_len(g->len) + XT_ROW_CSUM_SIZE;
    }
    return (ssize_t)(n + XT_ROW_CSUM_SIZE);
}

ssize_t xt_row_encoded_size(const xt_row *row)
{
    ssize_t meta = meta_size(row);
    if (meta < 0)
        return meta;
    uint64_t total = (uint64_t)meta;
    for (uint32_t i = 0; i < row->ngroups; i++)
        total += row->groups[i].len;
    if (total > XT_ROW_ENCODED_MAX)
        return -E2BIG;
    return (ssize_t)total;
}

/* Write a validated view. Groups whose bit is set in `trusted` keep their
 * `csum` (copied from a verified directory); the others are hashed. */
static size_t encode_into(const xt_row *row, uint8_t *buf, uint32_t trusted)
{
    const xt_row_attr *a = &row->attr;
    uint8_t *p = buf;
    *p++ = XT_ROW_FMT_V1;
    *p++ = a->type;
    p = put_varint(p, a->uuid);
    p = put_varint(p, a->mode);
    p = put_varint(p, a->uid);
    p = put_varint(p, a->gid);
    p = put_varint(p, a->nlink);
    p = put_varint(p, a->size);
    p = put_varint(p, a->ctime_ns);
    p = put_varint(p, zz_enc(a->atime_ns - a->ctime_ns));
    p = put_varint(p, zz_enc(a->mtime_ns - a->ctime_ns));
    p = put_varint(p, zz_enc(a->btime_ns - a->ctime_ns));
    p = put_varint(p, a->flags);
    p = put_varint(p, a->generation);
    p = put_varint(p, a->version);
    p = put_varint(p, row->name_len);
    memcpy(p, row->name, row->name_len);
    p += row->name_len;
    p = put_varint(p, row->ngroups);
    for (uint32_t i = 0; i < row->ngroups; i++) {
        const xt_row_group *g = &row->groups[i];
        uint32_t c = (trusted >> i) & 1
                         ? g->csum
                         : csum32(g->len ? g->ptr : (const uint8_t *)"", g->len,
                                  XT_ROW_SEED_GROUP ^ g->id);
        p = put_varint(p, g->id);
        p = put_varint(p, g->len);
        xt_put_u32(p, c);
        p += XT_ROW_CSUM_SIZE;
    }
    xt_put_u32(p, csum32(buf, (size_t)(p - buf), XT_ROW_SEED_META));
    p += XT_ROW_CSUM_SIZE;
    for (uint32_t i = 0; i < row->ngroups; i++) {
        if (row->groups[i].len) {
            memcpy(p, row->groups[i].ptr, row->groups[i].len);
            p += row->groups[i].len;
        }
    }
    return (size_t)(p - buf);
}

ssize_t xt_row_encode(const xt_row *row, void *buf, size_t cap)
{
    ssize_t need = xt_row_encoded_size(row);
    if (need < 0)
        return need;
    if ((size_t)need > cap)
        return -ENOBUFS;
    size_t n = encode_into(row, buf, 0);
    assert(n == (size_t)need);
    return (ssize_t)n;
}

static int encode_alloc(const xt_row *row, uint32_t trusted, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    ssize_t need = xt_row_encoded_size(row);
    if (need < 0)
        return (int)need;
    uint8_t *buf = xt_malloc((size_t)need);
    if (buf == NULL)
        return -ENOMEM;
    size_t n = encode_into(row, buf, trusted);
    assert(n == (size_t)need);
    *out = buf;
    *out_len = n;
    return 0;
}

int xt_row_encode_new(const xt_row *row, const void *name, uint32_t name_len, uint8_t **out,
                      size_t *out_len)
{
    *out = NULL;
    if (row->attr.type == 0 || row->attr.type > XT_ROW_TYPE_MAX)
        return -EINVAL;
    if (row->attr.type != XT_ROW_KV && name_len > XT_NAME_MAX)
        return -ENAMETOOLONG;
    xt_row v = *row;
    v.name = name;
    v.name_len = name_len;
    v.attr.version = 0;
    int rc = xt_row_encode_alloc(&v, out, out_len);
    return rc == 0 || rc == -ENOMEM ? rc : -EINVAL;
}

int xt_row_encode_alloc(const xt_row *row, uint8_t **out, size_t *out_len)
{
    return encode_alloc(row, 0, out, out_len);
}

/* ---- decode ---------------------------------------------------------- */

enum { GROUPS_NONE, GROUPS_LOCATE, GROUPS_VERIFY };

/*
 * Parse and verify the meta part of buf[0..len) and check invariant (1).
 * `mode`: GROUPS_NONE leaves group ptrs NULL; GROUPS_LOCATE points them
 * into buf; GROUPS_VERIFY also checks every group checksum.
 */
static int parse(const uint8_t *buf, size_t len, xt_row *row, int mode)
{
    if (len > XT_ROW_ENCODED_MAX)
        return bad("longer than XT_ROW_ENCODED_MAX");
    if (len < 2)
        return bad("shorter than the header");
    if (buf[0] != XT_ROW_FMT_V1)
        return bad("unknown format version");
    xt_row_attr *a = &row->attr;
    memset(a, 0, sizeof *a);
    a->type = buf[1];
    if (a->type == 0 || a->type > XT_ROW_TYPE_MAX)
        return bad("unknown row type");

    struct rd r = { buf + 2, buf + len };
    uint64_t dat, dmt, dbt, v;
    if (!rd_varint(&r, &a->uuid) || !rd_u32(&r, &a->mode) || !rd_u32(&r, &a->uid) ||
        !rd_u32(&r, &a->gid) || !rd_u32(&r, &a->nlink) || !rd_varint(&r, &a->size) ||
        !rd_varint(&r, &a->ctime_ns) || !rd_varint(&r, &dat) || !rd_varint(&r, &dmt) ||
        !rd_varint(&r, &dbt) || !rd_u32(&r, &a->flags) || !rd_varint(&r, &a->generation) ||
        !rd_varint(&r, &a->version))
        return bad("fixed columns: truncated, non-canonical or out-of-range varint");
    a->atime_ns = a->ctime_ns + zz_dec(dat);
    a->mtime_ns = a->ctime_ns + zz_dec(dmt);
    a->btime_ns = a->ctime_ns + zz_dec(dbt);

    if (!rd_varint(&r, &v))
        return bad("name length: bad varint");
    if (v == 0)
        return bad("empty name");
    if (v > name_max(a->type))
        return bad("name longer than the limit of its row type");
    row->name_len = (uint32_t)v;
    if (!rd_bytes(&r, row->name_len, &row->name))
        return bad("truncated name");

    if (!rd_varint(&r, &v))
        return bad("group count: bad varint");
    if (v > XT_ROW_GROUPS_MAX)
        return bad("more than XT_ROW_GROUPS_MAX groups");
    row->ngroups = (uint32_t)v;
    uint64_t body = 0;
    for (uint32_t i = 0; i < row->ngroups; i++) {
        xt_row_group *g = &row->groups[i];
        uint64_t id, glen;
        const uint8_t *c;
        if (!rd_varint(&r, &id) || !rd_varint(&r, &glen) || !rd_bytes(&r, XT_ROW_CSUM_SIZE, &c))
            return bad("group directory: truncated or bad varint");
        if (id == 0 || id > UINT16_MAX)
            return bad("group id out of range");
        if (i > 0 && id <= row->groups[i - 1].id)
            return bad("group ids not strictly increasing");
        if (glen > XT_ROW_GROUP_MAX)
            return bad("group longer than XT_ROW_GROUP_MAX");
        *g = (xt_row_group){ .ptr = NULL, .len = (uint32_t)glen, .csum = xt_get_u32(c),
                             .id = (uint16_t)id };
        body += glen;
    }
    const uint8_t *c;
    size_t covered = (size_t)(r.p - buf);
    if (!rd_bytes(&r, XT_ROW_CSUM_SIZE, &c))
        return bad("truncated meta checksum");
    if (xt_get_u32(c) != csum32(buf, covered, XT_ROW_SEED_META))
        return bad("meta checksum mismatch");
    if (rd_left(&r) < body)
        return bad("truncated group bytes");
    if (rd_left(&r) > body)
        return bad("trailing bytes after the row");
    if (mode == GROUPS_NONE)
        return 0;
    for (uint32_t i = 0; i < row->ngroups; i++) {
        xt_row_group *g = &row->groups[i];
        g->ptr = r.p;
        r.p += g->len;
        if (mode == GROUPS_VERIFY &&
            g->csum != csum32(g->ptr, g->len, XT_ROW_SEED_GROUP ^ g->id))
            return bad("group checksum mismatch");
    }
    return 0;
}

int xt_row_decode(const void *buf, size_t len, xt_row *row)
{
    if (buf == NULL)
        return len ? -EINVAL : bad("empty input");
    return parse(buf, len, row, GROUPS_VERIFY);
}

int xt_row_decode_meta(const void *buf, size_t len, xt_row *row)
{
    if (buf == NULL)
        return len ? -EINVAL : bad("empty input");
    return parse(buf, len, row, GROUPS_NONE);
}

int xt_row_get_group(const void *buf, size_t len, uint16_t id,
                     const uint8_t **ptr, uint32_t *glen)
{
    *ptr = NULL;
    *glen = 0;
    if (buf == NULL)
        return len ? -EINVAL : bad("empty input");
    xt_row row;
    int rc = parse(buf, len, &row, GROUPS_LOCATE);
    if (rc < 0)
        return rc;
    const xt_row_group *g = xt_row_view_group(&row, id);
    if (g == NULL)
        return -ENOENT;
    if (g->csum != csum32(g->ptr, g->len, XT_ROW_SEED_GROUP ^ g->id))
        return bad("group checksum mismatch");
    *ptr = g->ptr;
    *glen = g->len;
    return 0;
}

/* ---- update ---------------------------------------------------------- */

void xt_row_patch_init(xt_row_patch *p)
{
    memset(p, 0, sizeof *p);
}

static bool id_in(const uint16_t *ids, uint32_t n, uint16_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static bool put_has(const xt_row_patch *p, uint32_t upto, uint16_t id)
{
    for (uint32_t i = 0; i < upto; i++)
        if (p->put[i].id == id)
            return true;
    return false;
}

static void apply_attr(xt_row_attr *a, const xt_row_patch *p)
{
    const xt_row_attr *n = &p->attr;
    uint32_t s = p->set;
    if (s & XT_ROW_SET_TYPE) a->type = n->type;
    if (s & XT_ROW_SET_UUID) a->uuid = n->uuid;
    if (s & XT_ROW_SET_MODE) a->mode = n->mode;
    if (s & XT_ROW_SET_UID) a->uid = n->uid;
    if (s & XT_ROW_SET_GID) a->gid = n->gid;
    if (s & XT_ROW_SET_NLINK) {
        a->nlink = n->nlink;
        a->flags &= ~XT_ROW_F_NLINK_LOW;
    }
    int64_t count = xt_row_count_of(a);
    if ((s & XT_ROW_SET_NLINK_ADD) && count != INT64_MIN)
        xt_row_count_set(a, count + (int32_t)n->nlink);
    if (s & XT_ROW_SET_SIZE) a->size = n->size;
    bool later = (s & XT_ROW_SET_TIMES_MAX) != 0; /* a max-merge */
    if ((s & XT_ROW_SET_ATIME) && (!later || n->atime_ns > a->atime_ns)) a->atime_ns = n->atime_ns;
    if ((s & XT_ROW_SET_MTIME) && (!later || n->mtime_ns > a->mtime_ns)) a->mtime_ns = n->mtime_ns;
    if ((s & XT_ROW_SET_CTIME) && (!later || n->ctime_ns > a->ctime_ns)) a->ctime_ns = n->ctime_ns;
    if (s & XT_ROW_SET_BTIME) a->btime_ns = n->btime_ns;
    if (s & XT_ROW_SET_FLAGS) /* (the count's sign is the row's own) */
        a->flags = (n->flags & ~XT_ROW_F_NLINK_LOW) | (a->flags & XT_ROW_F_NLINK_LOW);
    if (s & XT_ROW_SET_GENERATION) a->generation = n->generation;
}

int xt_row_update(const void *old, size_t old_len, const xt_row_patch *p,
                  uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (old == NULL)
        return old_len ? -EINVAL : bad("empty input");
    if (p->nput > XT_ROW_GROUPS_MAX || p->ndel > XT_ROW_GROUPS_MAX)
        return -EINVAL;
    if ((p->set & XT_ROW_SET_NLINK) && (p->set & XT_ROW_SET_NLINK_ADD))
        return -EINVAL;
    for (uint32_t i = 0; i < p->nput; i++) {
        uint16_t id = p->put[i].id;
        if (id == 0 || put_has(p, i, id) || id_in(p->del, p->ndel, id))
            return -EINVAL;
    }
    /* Kept groups are located, not verified: their checksums travel with
     * them, so reading 64 KiB of file bytes to bump an mtime is avoided. */
    xt_row o;
    int rc = parse(old, old_len, &o, GROUPS_LOCATE);
    if (rc < 0)
        return rc;
    if ((p->set & XT_ROW_SET_IF_VERSION) && o.attr.version != p->if_version)
        return -ESTALE;
    if (o.attr.version == UINT64_MAX)
        return -EOVERFLOW;

    xt_row n;
    n.attr = o.attr;
    apply_attr(&n.attr, p);
    n.attr.version = o.attr.version + 1;
    n.name = (p->set & XT_ROW_SET_NAME) ? p->name : o.name;
    n.name_len = (p->set & XT_ROW_SET_NAME) ? p->name_len : o.name_len;

    /* Merge the kept old groups (sorted) with the puts (any order) by
     * insertion; `trusted` marks the kept ones, following them as they move. */
    uint32_t trusted = 0;
    n.ngroups = 0;
    for (uint32_t i = 0; i < o.ngroups; i++) {
        uint16_t id = o.groups[i].id;
        if (id_in(p->del, p->ndel, id) || put_has(p, p->nput, id))
            continue;
        trusted |= 1u << n.ngroups;
        n.groups[n.ngroups++] = o.groups[i];
    }
    for (uint32_t i = 0; i < p->nput; i++) {
        if (n.ngroups == XT_ROW_GROUPS_MAX)
            return -E2BIG;
        uint32_t k = n.ngroups;
        while (k > 0 && n.groups[k - 1].id > p->put[i].id) {
            n.groups[k] = n.groups[k - 1];
            k--;
        }
        /* bits >= k shift up by one; bit k becomes "not trusted" */
        uint32_t low = trusted & ((1u << k) - 1);
        trusted = low | ((trusted & ~((1u << k) - 1)) << 1);
        n.groups[k] = p->put[i];
        n.ngroups++;
    }
    return encode_alloc(&n, trusted, out, out_len);
}

/* ---- xattr group sub-codec ------------------------------------------- */

static int xa_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
    int c = memcmp(a, b, XT_MIN(al, bl));
    if (c)
        return c;
    return (al > bl) - (al < bl);
}

static size_t xa_entry_size(size_t nl, size_t vl)
{
    return varint_len(nl) + nl + varint_len(vl) + vl;
}

/* Reads the entries of a group in order; see xa_open. */
struct xa_it {
    struct rd r;
    uint64_t left;
};

static int xa_open(struct xa_it *it, const uint8_t *g, size_t len)
{
    it->r = (struct rd){ g, g };    /* g may be NULL when len == 0 */
    it->left = 0;
    if (len == 0)
        return 0;
    if (g == NULL)
        return -EINVAL;
    it->r.end = g + len;
    if (len > XT_ROW_XATTR_GROUP_MAX)
        return bad("xattr group longer than XT_ROW_XATTR_GROUP_MAX");
    it->r.p++;
    if (g[0] != XT_ROW_XATTR_FMT_V1)
        return bad("unknown xattr format version");
    if (!rd_varint(&it->r, &it->left))
        return bad("xattr count: bad varint");
    if (it->left == 0)
        return bad("xattr count 0 (the empty set is the empty group)");
    if (it->left > len / 3)
        return bad("xattr count larger than the group can hold");
    return 0;
}

/* 1 and *e on an entry, 0 at a clean end, -EBADMSG. Checks each entry
 * alone; order is checked by xa_validate. */
static int xa_next(struct xa_it *it, xt_row_xattr *e)
{
    if (it->left == 0)
        return rd_left(&it->r) == 0 ? 0 : bad("trailing bytes after the xattrs");
    uint64_t nl, vl;
    if (!rd_varint(&it->r, &nl) || nl == 0 || nl > XT_ROW_XATTR_NAME_MAX)
        return bad("xattr name length bad or out of range");
    if (!rd_bytes(&it->r, nl, &e->name))
        return bad("truncated xattr name");
    if (memchr(e->name, 0, nl) != NULL)
        return bad("NUL byte in an xattr name");
    if (!rd_varint(&it->r, &vl) || vl > XT_ROW_XATTR_VALUE_MAX)
        return bad("xattr value length bad or out of range");
    if (!rd_bytes(&it->r, vl, &e->value))
        return bad("truncated xattr value");
    e->name_len = (uint32_t)nl;
    e->value_len = (uint32_t)vl;
    it->left--;
    return 1;
}

/* Number of entries of a well-formed group, or -EBADMSG. */
static int xa_validate(const uint8_t *g, size_t len)
{
    struct xa_it it;
    int rc = xa_open(&it, g, len);
    xt_row_xattr e, prev = { 0 };
    int n = 0;
    while (rc == 0 && (rc = xa_next(&it, &e)) == 1) {
        if (n > 0 && xa_cmp(prev.name, prev.name_len, e.name, e.name_len) >= 0)
            return bad("xattr names not strictly increasing");
        prev = e;
        n++;
        rc = 0;
    }
    return rc < 0 ? rc : n;
}

int xt_row_xattr_count(const void *grp, size_t len)
{
    return xa_validate(grp, len);
}

int xt_row_xattr_decode(const void *grp, size_t len, xt_row_xattr *arr, size_t cap)
{
    int n = xa_validate(grp, len);
    if (n < 0)
        return n;
    if ((size_t)n > cap)
        return -ERANGE;
    struct xa_it it;
    xa_open(&it, grp, len);
    for (int i = 0; i < n; i++)
        xa_next(&it, &arr[i]);
    return n;
}

int xt_row_xattr_get(const void *grp, size_t len, const void *name, size_t name_len,
                     const uint8_t **value, uint32_t *value_len)
{
    *value = NULL;
    *value_len = 0;
    if (name == NULL && name_len != 0)
        return -EINVAL;
    int n = xa_validate(grp, len);
    if (n < 0)
        return n;
    struct xa_it it;
    xt_row_xattr e;
    xa_open(&it, grp, len);
    while (xa_next(&it, &e) == 1) {
        if (e.name_len == name_len && memcmp(e.name, name, name_len) == 0) {
            *value = e.value;
            *value_len = e.value_len;
            return 0;
        }
    }
    return -ENODATA;
}

ssize_t xt_row_xattr_list(const void *grp, size_t len, char *buf, size_t cap)
{
    int n = xa_validate(grp, len);
    if (n < 0)
        return n;
    struct xa_it it;
    xt_row_xattr e;
    size_t need = 0;
    xa_open(&it, grp, len);
    while (xa_next(&it, &e) == 1)
        need += e.name_len + 1u;
    if (cap == 0)
        return (ssize_t)need;
    if (cap < need)
        return -ERANGE;
    xa_open(&it, grp, len);
    while (xa_next(&it, &e) == 1) {
        memcpy(buf, e.name, e.name_len);
        buf[e.name_len] = '\0';
        buf += e.name_len + 1u;
    }
    return (ssize_t)need;
}

static int xa_check_entry(const xt_row_xattr *e)
{
    if (e->name_len == 0 || e->name == NULL)
        return -EINVAL;
    if (e->name_len > XT_ROW_XATTR_NAME_MAX)
        return -ERANGE;
    if (memchr(e->name, 0, e->name_len) != NULL)
        return -EINVAL;
    if (e->value_len > XT_ROW_XATTR_VALUE_MAX)
        return -E2BIG;
    if (e->value == NULL && e->value_len != 0)
        return -EINVAL;
    return 0;
}

static uint8_t *xa_put_entry(uint8_t *p, const xt_row_xattr *e)
{
    p = put_varint(p, e->name_len);
    memcpy(p, e->name, e->name_len);
    p += e->name_len;
    p = put_varint(p, e->value_len);
    if (e->value_len)
        memcpy(p, e->value, e->value_len);
    return p + e->value_len;
}

static int xa_sort_cmp(const void *x, const void *y)
{
    const xt_row_xattr *a = *(const xt_row_xattr *const *)x;
    const xt_row_xattr *b = *(const xt_row_xattr *const *)y;
    return xa_cmp(a->name, a->name_len, b->name, b->name_len);
}

int xt_row_xattr_encode(const xt_row_xattr *arr, size_t n, uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (n == 0)
        return 0;
    if (n > XT_ROW_XATTR_GROUP_MAX / 3)
        return -E2BIG;
    uint64_t size = 1 + varint_len(n);
    for (size_t i = 0; i < n; i++) {
        int rc = xa_check_entry(&arr[i]);
        if (rc < 0)
            return rc;
        size += xa_entry_size(arr[i].name_len, arr[i].value_len);
    }
    if (size > XT_ROW_XATTR_GROUP_MAX)
        return -E2BIG;
    const xt_row_xattr **ord = xt_malloc(n * sizeof *ord);
    if (ord == NULL)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        ord[i] = &arr[i];
    qsort(ord, n, sizeof *ord, xa_sort_cmp);
    int rc = 0;
    for (size_t i = 1; i < n && rc == 0; i++)
        if (xa_sort_cmp(&ord[i - 1], &ord[i]) == 0)
            rc = -EINVAL;
    uint8_t *buf = rc == 0 ? xt_malloc((size_t)size) : NULL;
    if (rc == 0 && buf == NULL)
        rc = -ENOMEM;
    if (rc == 0) {
        uint8_t *p = buf;
        *p++ = XT_ROW_XATTR_FMT_V1;
        p = put_varint(p, n);
        for (size_t i = 0; i < n; i++)
            p = xa_put_entry(p, ord[i]);
        assert((size_t)(p - buf) == size);
        *out = buf;
        *out_len = (size_t)size;
    }
    xt_free(ord);
    return rc;
}

/*
 * The validated group g[0..len) with the entry named like `ins` dropped and,
 * when `with_ins`, `ins` added in its sorted place. `present` tells whether
 * the old group had that name. One allocation.
 */
static int xa_rebuild(const uint8_t *g, size_t len, int count, bool present,
                      const xt_row_xattr *ins, bool with_ins,
                      uint8_t **out, size_t *out_len)
{
    uint64_t n = (uint64_t)count - present + with_ins;
    if (n == 0)
        return 0;
    uint64_t size = 1 + varint_len(n);
    struct xa_it it;
    xt_row_xattr e;
    xa_open(&it, g, len);
    while (xa_next(&it, &e) == 1)
        if (xa_cmp(e.name, e.name_len, ins->name, ins->name_len) != 0)
            size += xa_entry_size(e.name_len, e.value_len);
    if (with_ins)
        size += xa_entry_size(ins->name_len, ins->value_len);
    if (size > XT_ROW_XATTR_GROUP_MAX)
        return -ENOSPC;
    uint8_t *buf = xt_malloc((size_t)size);
    if (buf == NULL)
        return -ENOMEM;
    uint8_t *p = buf;
    *p++ = XT_ROW_XATTR_FMT_V1;
    p = put_varint(p, n);
    bool done = !with_ins;
    xa_open(&it, g, len);
    while (xa_next(&it, &e) == 1) {
        int c = xa_cmp(e.name, e.name_len, ins->name, ins->name_len);
        if (!done && c >= 0) {
            p = xa_put_entry(p, ins);
            done = true;
        }
        if (c != 0)
            p = xa_put_entry(p, &e);
    }
    if (!done)
        p = xa_put_entry(p, ins);
    assert((size_t)(p - buf) == size);
    *out = buf;
    *out_len = (size_t)size;
    return 0;
}

int xt_row_xattr_set(const void *grp, size_t len, const void *name, size_t name_len,
                     const void *value, size_t value_len, int how,
                     uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (name_len > XT_ROW_XATTR_NAME_MAX)
        return -ERANGE;
    if (value_len > XT_ROW_XATTR_VALUE_MAX)
        return -E2BIG;
    xt_row_xattr ins = { .name = name, .name_len = (uint32_t)name_len,
                         .value = value, .value_len = (uint32_t)value_len };
    int rc = xa_check_entry(&ins);
    if (rc < 0)
        return rc;
    if (how & ~(XT_ROW_XATTR_CREATE | XT_ROW_XATTR_REPLACE))
        return -EINVAL;
    int n = xa_validate(grp, len);
    if (n < 0)
        return n;
    const uint8_t *v;
    uint32_t vl;
    bool present = xt_row_xattr_get(grp, len, name, name_len, &v, &vl) == 0;
    if (present && (how & XT_ROW_XATTR_CREATE))
        return -EEXIST;
    if (!present && (how & XT_ROW_XATTR_REPLACE))
        return -ENODATA;
    return xa_rebuild(grp, len, n, present, &ins, true, out, out_len);
}

int xt_row_xattr_remove(const void *grp, size_t len, const void *name, size_t name_len,
                        uint8_t **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    const uint8_t *v;
    uint32_t vl;
    int rc = xt_row_xattr_get(grp, len, name, name_len, &v, &vl);
    if (rc < 0)
        return rc;
    xt_row_xattr del = { .name = name, .name_len = (uint32_t)name_len };
    return xa_rebuild(grp, len, xa_validate(grp, len), true, &del, false, out, out_len);
}
