/*
 * r2_rec.c -- codecs of R2's store records and the checks on names and
 * addresses (layouts in r2_rec.h and docs/r2.md).
 *
 * Invariants:
 *  (1) Every encoder writes exactly the bytes its decoder accepts, and a
 *      decoder accepts nothing an encoder could not have written (lengths,
 *      enums, text classes and the checksum are all checked), so a record
 *      damaged in the store is reported, never half-used.
 *  (2) Decoders read only inside [buf, buf+len).
 */
#include "r2_rec.h"

#include "xt_common.h"
#include "xt_hash.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static uint64_t csum(const uint8_t *p, size_t n)
{
    return xt_hash_bytes(p, n, R2_REC_SEED);
}

static bool csum_ok(const uint8_t *p, size_t len)
{
    return len >= R2_REC_CSUM && csum(p, len - R2_REC_CSUM) == xt_get_u64(p + len - R2_REC_CSUM);
}

/* Printable ASCII without space: what a label or address may hold. */
static bool graph_text(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return false;
    return true;
}

static bool fs_name_bytes_valid(const char *s, size_t n)
{
    if (n < 1 || n > XT_FSNAME_MAX)
        return false;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        if (!ok)
            return false;
    }
    return true;
}

bool r2_rec_fs_name_valid(const char *name)
{
    return name && fs_name_bytes_valid(name, strnlen(name, XT_FSNAME_MAX + 1));
}

bool r2_rec_addr_valid(int type, const char *addr)
{
    if (!addr)
        return false;
    size_t n = strnlen(addr, XT_ADDR_MAX);
    if (n == 0 || n >= XT_ADDR_MAX || !graph_text(addr, n))
        return false;
    if (type == XT_SITE_CLIENT)
        return true;
    char host[XT_ADDR_MAX];
    int port = 0;
    return xt_rpc_parse_addr(addr, host, sizeof host, &port) == 0 && port > 0 && port < 65536 &&
           host[0] != '\0';
}

bool r2_rec_backend_valid(const char *b)
{
    return b && (!strcmp(b, "local") || !strcmp(b, "mdsl") || !strcmp(b, "rados"));
}

bool r2_rec_path_valid(const char *path)
{
    if (!path)
        return false;
    size_t n = strnlen(path, XT_PATH_MAX);
    if (n >= XT_PATH_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)path[i] < 0x20 || (unsigned char)path[i] > 0x7e)
            return false;
    return true;
}

void r2_rec_site_key(char *key, uint32_t id)
{
    snprintf(key, R2_KEY_LEN, R2_KEY_SITES "/%u", id);
}

void r2_rec_removed_key(char *key, uint32_t id)
{
    snprintf(key, R2_KEY_LEN, R2_KEY_REMOVED "/%u", id);
}

void r2_rec_fs_key(char *key, uint32_t fsid)
{
    snprintf(key, R2_KEY_LEN, R2_KEY_FS "/%u", fsid);
}

void r2_rec_ring_key(char *key, uint32_t ring)
{
    snprintf(key, R2_KEY_LEN, R2_KEY_RINGS "/%u", ring);
}

/* ---- meta ----------------------------------------------------------------- */

void r2_rec_meta_encode(const struct r2_rec_meta *m, uint8_t buf[R2_REC_META_SIZE])
{
    xt_put_u32(buf, R2_REC_META_MAGIC);
    xt_put_u32(buf + 4, R2_REC_FORMAT);
    xt_put_u64(buf + 8, m->version);
    xt_put_u64(buf + 16, m->sites_ver);
    xt_put_u64(buf + 24, m->rings_ver);
    xt_put_u64(buf + 32, m->fs_ver);
    xt_put_u64(buf + 40, csum(buf, 40));
}

int r2_rec_meta_decode(const void *buf, size_t len, struct r2_rec_meta *m)
{
    const uint8_t *p = buf;
    if (len != R2_REC_META_SIZE || !csum_ok(p, len) || xt_get_u32(p) != R2_REC_META_MAGIC ||
        xt_get_u32(p + 4) != R2_REC_FORMAT)
        return -EBADMSG;
    m->version = xt_get_u64(p + 8);
    m->sites_ver = xt_get_u64(p + 16);
    m->rings_ver = xt_get_u64(p + 24);
    m->fs_ver = xt_get_u64(p + 32);
    if (m->sites_ver > m->version || m->rings_ver > m->version || m->fs_ver > m->version)
        return -EBADMSG;
    return 0;
}

/* ---- sites ---------------------------------------------------------------- */

static bool site_type_valid(int t)
{
    return t == XT_SITE_MDS || t == XT_SITE_MDSL || t == XT_SITE_CLIENT || t == XT_SITE_R2;
}

static bool site_state_stored(int s)
{
    return s >= XT_SITE_UP && s <= XT_SITE_DRAINING;
}

int r2_rec_site_encode(const struct xt_site *s, void **buf, size_t *len)
{
    size_t a = strnlen(s->addr, XT_ADDR_MAX), f = strnlen(s->fs_name, XT_FSNAME_MAX + 1);
    size_t m = strnlen(s->metrics, XT_ADDR_MAX);
    if (!site_type_valid(s->type) || !site_state_stored(s->state) || a == 0 ||
        a >= XT_ADDR_MAX || f > XT_FSNAME_MAX || m >= XT_ADDR_MAX)
        return -EINVAL;
    size_t mx = m ? 2 + m : 0; /* old records (and sites without metrics): none */
    size_t n = R2_REC_SITE_HDR + a + f + mx + R2_REC_CSUM;
    uint8_t *p = xt_calloc(1, n);
    if (!p)
        return -ENOMEM;
    p[0] = R2_REC_FORMAT;
    p[1] = (uint8_t)s->type;
    p[2] = (uint8_t)s->state;
    p[3] = m ? R2_REC_SITE_METRICS : 0;
    xt_put_u32(p + 4, s->id);
    xt_put_u64(p + 8, s->capacity);
    xt_put_u64(p + 16, s->uuid_lo);
    xt_put_u64(p + 24, s->uuid_hi);
    xt_put_u16(p + 32, (uint16_t)a);
    xt_put_u16(p + 34, (uint16_t)f);
    memcpy(p + R2_REC_SITE_HDR, s->addr, a);
    memcpy(p + R2_REC_SITE_HDR + a, s->fs_name, f);
    if (m) {
        xt_put_u16(p + R2_REC_SITE_HDR + a + f, (uint16_t)m);
        memcpy(p + R2_REC_SITE_HDR + a + f + 2, s->metrics, m);
    }
    xt_put_u64(p + n - R2_REC_CSUM, csum(p, n - R2_REC_CSUM));
    *buf = p;
    *len = n;
    return 0;
}

int r2_rec_site_decode(const void *buf, size_t len, struct xt_site *s)
{
    const uint8_t *p = buf;
    memset(s, 0, sizeof *s);
    if (len < R2_REC_SITE_HDR + R2_REC_CSUM || !csum_ok(p, len) || p[0] != R2_REC_FORMAT ||
        (p[3] & ~R2_REC_SITE_METRICS))
        return -EBADMSG;
    size_t a = xt_get_u16(p + 32), f = xt_get_u16(p + 34), m = 0;
    if (len < R2_REC_SITE_HDR + a + f + R2_REC_CSUM)
        return -EBADMSG;
    if (p[3] & R2_REC_SITE_METRICS) {
        if (len < R2_REC_SITE_HDR + a + f + 2 + R2_REC_CSUM)
            return -EBADMSG;
        m = xt_get_u16(p + R2_REC_SITE_HDR + a + f);
        if (m == 0 || m >= XT_ADDR_MAX)
            return -EBADMSG;
    }
    size_t mx = m ? 2 + m : 0;
    if (len != R2_REC_SITE_HDR + a + f + mx + R2_REC_CSUM || a == 0 || a >= XT_ADDR_MAX ||
        f > XT_FSNAME_MAX || !site_type_valid(p[1]) || !site_state_stored(p[2]))
        return -EBADMSG;
    const char *addr = (const char *)p + R2_REC_SITE_HDR, *fs = addr + a, *met = fs + f + 2;
    if (!graph_text(addr, a) || (f && !fs_name_bytes_valid(fs, f)) ||
        (m && !graph_text(met, m)))
        return -EBADMSG;
    memcpy(s->metrics, m ? met : "", m);
    s->type = p[1];
    s->state = p[2];
    s->id = xt_get_u32(p + 4);
    s->capacity = xt_get_u64(p + 8);
    s->uuid_lo = xt_get_u64(p + 16);
    s->uuid_hi = xt_get_u64(p + 24);
    memcpy(s->addr, addr, a);
    memcpy(s->fs_name, fs, f);
    if (s->id == 0 || s->uuid_lo > s->uuid_hi)
        return -EBADMSG;
    return 0;
}

/* ---- file systems --------------------------------------------------------- */

int r2_rec_fs_encode(const struct xt_fs_info *f, void **buf, size_t *len)
{
    size_t nn = strnlen(f->name, XT_FSNAME_MAX + 1);
    size_t nb = strnlen(f->blob_backend, sizeof f->blob_backend);
    size_t np = strnlen(f->blob_path, XT_PATH_MAX);
    if (!fs_name_bytes_valid(f->name, nn) || nb == 0 || nb >= sizeof f->blob_backend ||
        np >= XT_PATH_MAX || (f->root_bitmap_len && !f->root_bitmap) ||
        f->root_bitmap_len > R2_REC_BITMAP_MAX)
        return -EINVAL;
    size_t ng = f->key_gen ? 8 : 0; /* flag bit 0: a key generation follows the header */
    size_t nq = f->quota_files || f->quota_bytes ? 16 : 0;
    size_t n = R2_REC_FS_HDR + ng + nq + nn + nb + np + f->root_bitmap_len + R2_REC_CSUM;
    uint8_t *p = xt_calloc(1, n);
    if (!p)
        return -ENOMEM;
    p[0] = R2_REC_FORMAT;
    p[1] = (uint8_t)nn;
    p[2] = (uint8_t)nb;
    p[3] = (ng ? R2_REC_FS_KEYGEN : 0) | (nq ? R2_REC_FS_QUOTA : 0);
    xt_put_u32(p + 4, f->fsid);
    xt_put_u64(p + 8, f->root_table);
    xt_put_u64(p + 16, f->created_ns);
    xt_put_u16(p + 40, (uint16_t)np);
    xt_put_u32(p + 42, f->root_bitmap_len);
    if (ng)
        xt_put_u64(p + R2_REC_FS_HDR, f->key_gen);
    if (nq) {
        xt_put_u64(p + R2_REC_FS_HDR + ng, f->quota_files);
        xt_put_u64(p + R2_REC_FS_HDR + ng + 8, f->quota_bytes);
    }
    uint8_t *q = p + R2_REC_FS_HDR + ng + nq;
    memcpy(q, f->name, nn);
    q += nn;
    memcpy(q, f->blob_backend, nb);
    q += nb;
    memcpy(q, f->blob_path, np);
    q += np;
    if (f->root_bitmap_len)
        memcpy(q, f->root_bitmap, f->root_bitmap_len);
    xt_put_u64(p + n - R2_REC_CSUM, csum(p, n - R2_REC_CSUM));
    *buf = p;
    *len = n;
    return 0;
}

int r2_rec_fs_decode(const void *buf, size_t len, struct xt_fs_info *f)
{
    const uint8_t *p = buf;
    memset(f, 0, sizeof *f);
    if (len < R2_REC_FS_HDR + R2_REC_CSUM || !csum_ok(p, len) || p[0] != R2_REC_FORMAT ||
        (p[3] & ~(R2_REC_FS_KEYGEN | R2_REC_FS_QUOTA)))
        return -EBADMSG;
    size_t ng = p[3] & R2_REC_FS_KEYGEN ? 8 : 0;
    size_t nq = p[3] & R2_REC_FS_QUOTA ? 16 : 0;
    size_t nn = p[1], nb = p[2], np = xt_get_u16(p + 40);
    uint32_t nm = xt_get_u32(p + 42);
    if (nb == 0 || nb >= sizeof f->blob_backend || np >= XT_PATH_MAX ||
        nm > R2_REC_BITMAP_MAX ||
        len != R2_REC_FS_HDR + ng + nq + nn + nb + np + (size_t)nm + R2_REC_CSUM)
        return -EBADMSG;
    const char *q = (const char *)p + R2_REC_FS_HDR + ng + nq;
    f->key_gen = ng ? xt_get_u64(p + R2_REC_FS_HDR) : 0;
    f->quota_files = nq ? xt_get_u64(p + R2_REC_FS_HDR + ng) : 0;
    f->quota_bytes = nq ? xt_get_u64(p + R2_REC_FS_HDR + ng + 8) : 0;
    if (!fs_name_bytes_valid(q, nn) || !graph_text(q + nn, nb))
        return -EBADMSG;
    memcpy(f->name, q, nn);
    memcpy(f->blob_backend, q + nn, nb);
    memcpy(f->blob_path, q + nn + nb, np);
    if (!r2_rec_backend_valid(f->blob_backend) || !r2_rec_path_valid(f->blob_path))
        return -EBADMSG;
    f->fsid = xt_get_u32(p + 4);
    f->root_table = xt_get_u64(p + 8);
    f->created_ns = xt_get_u64(p + 16);
    if (f->fsid == 0)
        return -EBADMSG;
    if (nm) {
        f->root_bitmap = xt_malloc(nm);
        if (!f->root_bitmap)
            return -ENOMEM;
        memcpy(f->root_bitmap, q + nn + nb + np, nm);
        f->root_bitmap_len = nm;
    }
    return 0;
}

/* ---- usage ------------------------------------------------------------------ */

#define USAGE_HDR  8
#define USAGE_FS   24
#define USAGE_SITE 28

void r2_rec_usage_free(struct r2_usage *u, size_t n)
{
    for (size_t i = 0; u && i < n; i++)
        xt_free(u[i].s);
    xt_free(u);
}

int r2_rec_usage_encode(const struct r2_usage *u, size_t n, void **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (n > UINT32_MAX)
        return -EINVAL;
    size_t total = USAGE_HDR + R2_REC_CSUM;
    for (size_t i = 0; i < n; i++) {
        if (u[i].fsid == 0 || (i && u[i].fsid <= u[i - 1].fsid) || u[i].ns > UINT32_MAX)
            return -EINVAL;
        for (size_t k = 1; k < u[i].ns; k++)
            if (u[i].s[k].site <= u[i].s[k - 1].site)
                return -EINVAL;
        total += USAGE_FS + u[i].ns * USAGE_SITE;
    }
    uint8_t *p = xt_calloc(1, total);
    if (!p)
        return -ENOMEM;
    p[0] = R2_REC_FORMAT;
    xt_put_u32(p + 4, (uint32_t)n);
    uint8_t *q = p + USAGE_HDR;
    for (size_t i = 0; i < n; i++) {
        xt_put_u32(q, u[i].fsid);
        xt_put_u32(q + 4, (uint32_t)u[i].ns);
        xt_put_u64(q + 8, (uint64_t)u[i].files);
        xt_put_u64(q + 16, (uint64_t)u[i].bytes);
        q += USAGE_FS;
        for (size_t k = 0; k < u[i].ns; k++, q += USAGE_SITE) {
            xt_put_u32(q, u[i].s[k].site);
            xt_put_u64(q + 4, u[i].s[k].epoch);
            xt_put_u64(q + 12, (uint64_t)u[i].s[k].files);
            xt_put_u64(q + 20, (uint64_t)u[i].s[k].bytes);
        }
    }
    assert((size_t)(q - p) == total - R2_REC_CSUM);
    xt_put_u64(q, csum(p, total - R2_REC_CSUM));
    *buf = p;
    *len = total;
    return 0;
}

int r2_rec_usage_decode(const void *buf, size_t len, struct r2_usage **out, size_t *nout)
{
    const uint8_t *p = buf;
    *out = NULL;
    *nout = 0;
    if (len < USAGE_HDR + R2_REC_CSUM || !csum_ok(p, len) || p[0] != R2_REC_FORMAT || p[1] ||
        p[2] || p[3])
        return -EBADMSG;
    size_t n = xt_get_u32(p + 4), left = len - USAGE_HDR - R2_REC_CSUM;
    if (n > left / USAGE_FS)
        return -EBADMSG;
    struct r2_usage *u = n ? xt_calloc(n, sizeof *u) : NULL;
    if (n && !u)
        return -ENOMEM;
    const uint8_t *q = p + USAGE_HDR;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (left < USAGE_FS) {
            rc = -EBADMSG;
            break;
        }
        u[i].fsid = xt_get_u32(q);
        size_t ns = xt_get_u32(q + 4);
        u[i].files = (int64_t)xt_get_u64(q + 8);
        u[i].bytes = (int64_t)xt_get_u64(q + 16);
        q += USAGE_FS;
        left -= USAGE_FS;
        if (u[i].fsid == 0 || (i && u[i].fsid <= u[i - 1].fsid) || ns > left / USAGE_SITE) {
            rc = -EBADMSG;
            break;
        }
        if (ns && !(u[i].s = xt_calloc(ns, sizeof *u[i].s))) {
            rc = -ENOMEM;
            break;
        }
        u[i].ns = ns;
        for (size_t k = 0; k < ns; k++, q += USAGE_SITE) {
            struct r2_usage_site *e = &u[i].s[k];
            e->site = xt_get_u32(q);
            e->epoch = xt_get_u64(q + 4);
            e->files = (int64_t)xt_get_u64(q + 12);
            e->bytes = (int64_t)xt_get_u64(q + 20);
            if (k && e->site <= u[i].s[k - 1].site)
                rc = -EBADMSG;
        }
        left -= ns * USAGE_SITE;
    }
    if (rc == 0 && left != 0)
        rc = -EBADMSG;
    if (rc < 0) {
        r2_rec_usage_free(u, n);
        return rc;
    }
    *out = u;
    *nout = n;
    return 0;
}

/* ---- ring-1 change -------------------------------------------------------- */

void r2_rec_ring1_clear(struct r2_rec_ring1 *r)
{
    xt_free(r->ent);
    memset(r, 0, sizeof *r);
}

/* What both directions check: the phase and its flags, and entries that
 * are listed for a reason, by strictly increasing id. */
static bool ring1_valid(const struct r2_rec_ring1 *r)
{
    if (r->phase < XT_RING1_STABLE || r->phase > XT_RING1_DONE || r->n > R2_REC_RING1_MAX ||
        (r->n && !r->ent) || (r->walk && r->phase != XT_RING1_MOVING))
        return false;
    bool stable = r->phase == XT_RING1_STABLE;
    if (stable ? (r->from_version != r->to_version || r->started_ns != 0)
               : r->to_version <= r->from_version)
        return false;
    for (size_t i = 0; i < r->n; i++) {
        const struct r2_rec_ring1_ent *e = &r->ent[i];
        bool role_ok = e->role == XT_RING1_OUT || e->role == XT_RING1_JOINING ||
                       e->role == XT_RING1_DRAINED;
        if (e->id == 0 || (i && e->id <= r->ent[i - 1].id) || !role_ok ||
            (e->role == XT_RING1_DRAINED && e->leaving) ||
            (e->role == XT_RING1_OUT && !e->leaving) ||
            (stable && e->role != XT_RING1_DRAINED))
            return false;
    }
    return true;
}

int r2_rec_ring1_encode(const struct r2_rec_ring1 *r, void **buf, size_t *len)
{
    if (!ring1_valid(r))
        return -EINVAL;
    size_t n = R2_REC_RING1_HDR + 8 * r->n + R2_REC_CSUM;
    uint8_t *p = xt_calloc(1, n);
    if (!p)
        return -ENOMEM;
    p[0] = R2_REC_FORMAT;
    p[1] = (uint8_t)r->phase;
    p[2] = r->walk ? 1 : 0;
    xt_put_u32(p + 4, (uint32_t)r->n);
    xt_put_u64(p + 8, r->seq);
    xt_put_u64(p + 16, r->from_version);
    xt_put_u64(p + 24, r->to_version);
    xt_put_u64(p + 32, r->started_ns);
    for (size_t i = 0; i < r->n; i++) {
        uint8_t *q = p + R2_REC_RING1_HDR + 8 * i;
        xt_put_u32(q, r->ent[i].id);
        q[4] = (uint8_t)r->ent[i].role;
        q[5] = r->ent[i].leaving ? 1 : 0;
    }
    xt_put_u64(p + n - R2_REC_CSUM, csum(p, n - R2_REC_CSUM));
    *buf = p;
    *len = n;
    return 0;
}

int r2_rec_ring1_decode(const void *buf, size_t len, struct r2_rec_ring1 *r)
{
    const uint8_t *p = buf;
    memset(r, 0, sizeof *r);
    if (len < R2_REC_RING1_HDR + R2_REC_CSUM || !csum_ok(p, len) || p[0] != R2_REC_FORMAT ||
        p[2] > 1 || p[3] != 0)
        return -EBADMSG;
    uint32_t n = xt_get_u32(p + 4);
    if (n > R2_REC_RING1_MAX || len != R2_REC_RING1_HDR + 8 * (size_t)n + R2_REC_CSUM)
        return -EBADMSG;
    r->phase = p[1];
    r->walk = p[2] & 1;
    r->seq = xt_get_u64(p + 8);
    r->from_version = xt_get_u64(p + 16);
    r->to_version = xt_get_u64(p + 24);
    r->started_ns = xt_get_u64(p + 32);
    if (n) {
        r->ent = xt_calloc(n, sizeof *r->ent);
        if (!r->ent)
            return -ENOMEM;
        r->n = n;
    }
    for (size_t i = 0; i < n; i++) {
        const uint8_t *q = p + R2_REC_RING1_HDR + 8 * i;
        if (q[5] > 1 || q[6] || q[7]) {
            r2_rec_ring1_clear(r);
            return -EBADMSG;
        }
        r->ent[i] = (struct r2_rec_ring1_ent){ .id = xt_get_u32(q), .role = q[4],
                                               .leaving = q[5] };
    }
    if (!ring1_valid(r)) {
        r2_rec_ring1_clear(r);
        return -EBADMSG;
    }
    return 0;
}
