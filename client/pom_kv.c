/*
 * pom_kv.c -- the key/value API of libpomegranate (docs/client.md "Key/value API"):
 * keyspaces are xTable tables outside the namespace; put/get/update/delete
 * are single-row operations, list and search are table listings, search
 * with the MDS-side substring predicate so only matches travel. A batch
 * (docs/client.md "Key/value batches") sends the same single-row
 * operations through pom_multi_call, each with the single call's result.
 *
 * Invariants (docs/client.md, "Key/value API"):
 *  (1) Keyspace `name` is row "kv.<name>" (type KV) of the super table;
 *      its `uuid` is the keyspace id, taken from the uuid allocator and
 *      fixed by an exclusive, synchronous create: every client opening the
 *      name reads the winner's id. Its table is POM_KV_TABLE_BASE + id,
 *      above every uuid the namespace can use as a directory table.
 *  (2) A key of at most POM_KV_SHORT_MAX bytes is its row's name. A longer
 *      key's row name is exactly XT_NAME_MAX bytes: the key's first
 *      POM_KV_PREFIX bytes then a 32-byte digest of the whole key, and the
 *      whole key is group XT_CG_KEY. The two forms never meet (different
 *      name lengths), so a key has exactly one row name.
 *  (3) The value is group XT_CG_DATA (absent when empty); attr.size is its
 *      length, attr.generation the nonce of the last writer, so a call
 *      retried after a transport failure recognises its own earlier
 *      success (-EEXIST / -ESTALE caused by itself count as done).
 *  (4) A change creates the row only with XT_F_EXCL (a put's XT_F_UPSERT
 *      makes the MDS create exclusively too) and changes it only by
 *      update, so a row's version counts every change since its creation
 *      and conditional calls see no ABA on a live key.
 *  (5) A key starting with the bytes 00 FF is refused (-EINVAL): such row
 *      names are the MDS's system rows (xt_hash.h, docs/mds-xact.md), which
 *      the MDS refuses to clients anyway and never lists to them. Either
 *      key form keeps the key's first bytes, so one check covers both. List
 *      and search prefixes are not checked: they just never match one.
 *
 * Floor 5 of libpomegranate (pom_file_i.h): calls the transport, rows and
 * pom_gone_sync; nothing of the namespace.
 */
#include "pom_file_i.h"
#include "xt_hash.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define POM_KV_TABLE_BASE (UINT64_C(1) << 62)
#define POM_KV_ROW_PREFIX "kv."
#define POM_KV_SHORT_MAX  (XT_NAME_MAX - 1)            /* keys kept as the name */
#define POM_KV_DIGEST     32
#define POM_KV_PREFIX     (XT_NAME_MAX - POM_KV_DIGEST) /* key bytes in a long name */
#define POM_KV_LIST_PAGE  256   /* rows per list RPC (values up to 1 MiB each) */
#define POM_KV_SCAN_PAGE  1024  /* rows scanned per search RPC */

struct pom_kv {
    pom_fs *fs;                 /* borrowed: outlives kv */
    uint64_t id, table;
    _Atomic uint64_t calls, rows, bytes; /* listing statistics */
    uint64_t err_sample;        /* protected by fs->epoch_mu: lost changes of
                                   the keyspace told so far (pom_errseq.c) */
};

/* A key's row name (invariant 2). */
struct kv_name {
    uint8_t b[XT_NAME_MAX];
    uint32_t len;
};

/* Every call taking a key checks it here (invariant 5). */
static int key_check(const void *key, size_t klen)
{
    if (!key || klen == 0 || xt_hash_is_sys(key, klen))
        return -EINVAL;
    return klen > POM_KV_KEY_MAX ? -ENAMETOOLONG : 0;
}

static void key_name(const void *key, size_t klen, struct kv_name *n)
{
    if (klen <= POM_KV_SHORT_MAX) {
        memcpy(n->b, key, klen);
        n->len = (uint32_t)klen;
        return;
    }
    memcpy(n->b, key, POM_KV_PREFIX);
    for (unsigned i = 0; i < POM_KV_DIGEST / 8; i++)
        xt_put_u64(n->b + POM_KV_PREFIX + 8 * i,
                   xt_hash_bytes(key, klen, UINT64_C(0x706f6d6b76000000) + i));
    n->len = XT_NAME_MAX;
}

/* A nonce for invariant (3): never 0. */
static uint64_t nonce(void)
{
    return pom_nonce() | 1;
}

void pom_free(void *p)
{
    xt_free(p);
}

/* ---- keyspaces --------------------------------------------------------- */

int pom_kv_open(pom_fs *fs, const char *keyspace, pom_kv **out)
{
    *out = NULL;
    if (!fs || !keyspace || !keyspace[0])
        return -EINVAL;
    if (strlen(keyspace) > POM_KV_KEYSPACE_MAX)
        return -ENAMETOOLONG;
    char name[sizeof POM_KV_ROW_PREFIX + POM_KV_KEYSPACE_MAX];
    strcpy(name, POM_KV_ROW_PREFIX);
    strcat(name, keyspace);
    uint64_t id = 0;
    int rc = -EAGAIN;
    for (int attempt = 0; attempt < 100 && rc == -EAGAIN; attempt++) {
        struct xt_resp r;
        xt_row row;
        rc = pom_row_get(fs, XT_NS_TABLE_SUPER, name, POM_ROW_META, &r, &row);
        if (rc == 0) {
            id = row.attr.uuid;
            xt_resp_free(&r);
            break;
        }
        if (rc != -ENOENT)
            return rc;
        /* Absent: propose an id; the exclusive create picks one winner. */
        if ((rc = pom_uuid_alloc(fs, &id)) < 0)
            return rc;
        xt_row reg;
        xt_row_init(&reg);
        reg.attr.type = XT_ROW_KV;
        reg.attr.uuid = id;
        reg.attr.ctime_ns = reg.attr.mtime_ns = xt_now_ns();
        struct xt_req q = { .op = XT_OP_CREATE, .t = { .table = XT_NS_TABLE_SUPER },
                            .name = name, .name_len = (uint32_t)strlen(name),
                            .flags = XT_F_EXCL | XT_F_SYNC, .row = &reg };
        rc = pom_call(fs, &q, &r, NULL);
        xt_resp_free(&r);
        if (rc == -EEXIST)
            rc = -EAGAIN; /* another client (or our lost reply): read the winner */
    }
    if (rc < 0)
        return rc;
    if (id == 0 || id >= POM_KV_TABLE_BASE) {
        XT_ERR("keyspace %s has id %llu: out of range", keyspace, (unsigned long long)id);
        return -EIO;
    }
    pom_kv *kv = xt_calloc(1, sizeof *kv);
    if (!kv)
        return -ENOMEM;
    kv->fs = fs;
    kv->id = id;
    kv->table = POM_KV_TABLE_BASE + id;
    kv->err_sample = pom_es_sample(fs, kv->table);
    *out = kv;
    return 0;
}

void pom_kv_close(pom_kv *kv)
{
    xt_free(kv);
}

void pom_kv_get_stats(pom_kv *kv, struct pom_kv_stats *st)
{
    st->list_calls = atomic_load(&kv->calls);
    st->rows_received = atomic_load(&kv->rows);
    st->bytes_received = atomic_load(&kv->bytes);
}

/* ---- single keys ------------------------------------------------------- */

static int read_check(const void *key, size_t klen, struct xt_resp *r, xt_row *row);

/* Reads the row of key (all groups). *r holds it (xt_resp_free). A long
 * key whose stored whole key differs (a digest collision) is -ENOENT. */
static int kv_read(pom_kv *kv, const void *key, size_t klen, const struct kv_name *n,
                   struct xt_resp *r, xt_row *row)
{
    struct xt_req q = { .op = XT_OP_LOOKUP, .t = { .table = kv->table }, .name = n->b,
                        .name_len = n->len, .flags = XT_F_INLINE };
    int rc = pom_call(kv->fs, &q, r, NULL);
    return rc < 0 ? rc : read_check(key, klen, r, row);
}

/* A lookup of key answered 0 with *r: its row decoded into *row (a view of
 * r), or -errno and r freed; a long key's row must hold this whole key. */
static int read_check(const void *key, size_t klen, struct xt_resp *r, xt_row *row)
{
    int rc;
    if (!r->row || xt_row_decode(r->row, r->row_len, row) < 0) {
        rc = r->row ? -EIO : -EPROTO;
        xt_resp_free(r);
        return rc;
    }
    if (klen > POM_KV_SHORT_MAX) {
        const xt_row_group *g = xt_row_view_group(row, XT_CG_KEY);
        if (!g || g->len != klen || memcmp(g->ptr, key, klen)) {
            xt_resp_free(r);
            return -ENOENT;
        }
    }
    return 0;
}

/* After a retried call answered `rc`: whether the row now carries our
 * nonce, i.e. an earlier attempt of ours was applied (invariant 3). */
static bool was_ours(pom_kv *kv, const void *key, size_t klen, const struct kv_name *n,
                     uint64_t gen)
{
    struct xt_resp r;
    xt_row row;
    if (kv_read(kv, key, klen, n, &r, &row) < 0)
        return false;
    bool ours = row.attr.generation == gen;
    xt_resp_free(&r);
    return ours;
}

/* The row and request of a put (invariants 3 and 4): with
 * POM_KV_CREATE_ONLY an exclusive create, else an upsert (an update that
 * creates the row when absent, XT_F_UPSERT). q borrows row, n, key, val. */
static void put_req(pom_kv *kv, const void *key, size_t klen, const struct kv_name *n,
                    const void *val, size_t vlen, unsigned flags, xt_row *row,
                    struct xt_req *q)
{
    static const uint16_t drop_data[1] = { XT_CG_DATA };
    xt_row_init(row);
    row->attr.type = XT_ROW_KV;
    row->attr.size = vlen;
    row->attr.ctime_ns = row->attr.mtime_ns = xt_now_ns();
    row->attr.generation = nonce();
    if (vlen)
        xt_row_view_set_group(row, XT_CG_DATA, val, (uint32_t)vlen);
    if (klen > POM_KV_SHORT_MAX)
        xt_row_view_set_group(row, XT_CG_KEY, key, (uint32_t)klen);
    bool create = (flags & POM_KV_CREATE_ONLY) != 0;
    *q = (struct xt_req){ .op = create ? XT_OP_CREATE : XT_OP_UPDATE,
                          .t = { .table = kv->table }, .name = n->b, .name_len = n->len,
                          .row = row,
                          .flags = (create ? XT_F_EXCL : XT_F_UPSERT) |
                                   ((flags & POM_KV_SYNC) ? XT_F_SYNC : 0) };
    if (!create) {
        q->set_mask = XT_ROW_SET_SIZE | XT_ROW_SET_MTIME | XT_ROW_SET_GENERATION;
        q->drop = vlen ? NULL : drop_data;
        q->ndrop = vlen ? 0 : 1;
    }
}

/* A put's answer rc, sent more than once when retried: an exclusive
 * create that finds the row its own earlier attempt made is done. An
 * upsert sent twice sets the same value twice. */
static int put_done(pom_kv *kv, const void *key, size_t klen, const struct kv_name *n,
                    const xt_row *row, int rc, bool retried)
{
    if (rc == -EEXIST && retried && was_ours(kv, key, klen, n, row->attr.generation))
        return 0;
    return rc;
}

/* Replaces the value of an existing row; if_version as pom_kv_update. */
static int kv_change(pom_kv *kv, const void *key, size_t klen, const struct kv_name *n,
                     const void *val, size_t vlen, uint64_t if_version, unsigned flags)
{
    xt_row row;
    xt_row_init(&row);
    row.attr.size = vlen;
    row.attr.mtime_ns = xt_now_ns();
    row.attr.generation = nonce();
    static const uint16_t drop_data[1] = { XT_CG_DATA };
    if (vlen)
        xt_row_view_set_group(&row, XT_CG_DATA, val, (uint32_t)vlen);
    struct xt_req q = { .op = XT_OP_UPDATE, .t = { .table = kv->table }, .name = n->b,
                        .name_len = n->len, .row = &row,
                        .set_mask = XT_ROW_SET_SIZE | XT_ROW_SET_MTIME | XT_ROW_SET_GENERATION,
                        .drop = vlen ? NULL : drop_data, .ndrop = vlen ? 0 : 1,
                        .flags = (flags & POM_KV_SYNC) ? XT_F_SYNC : 0 };
    if (if_version != POM_KV_ANY_VERSION) {
        q.flags |= XT_F_IF_VER;
        q.expect_version = if_version;
    }
    struct xt_resp r;
    bool retried = false;
    int rc = pom_call(kv->fs, &q, &r, &retried);
    xt_resp_free(&r);
    if (rc == -ESTALE && retried && was_ours(kv, key, klen, n, row.attr.generation))
        return 0;
    return rc;
}

static int value_check(const void *val, size_t vlen)
{
    if (vlen > POM_KV_VALUE_MAX)
        return -EFBIG;
    return vlen && !val ? -EINVAL : 0;
}

/* A put's flags and value: 0 or pom_kv_put's error. */
static int put_check(const void *key, size_t klen, const void *val, size_t vlen, unsigned flags)
{
    int rc = key_check(key, klen);
    if (rc == 0)
        rc = value_check(val, vlen);
    if (rc == 0 && (flags & ~(POM_KV_CREATE_ONLY | POM_KV_SYNC)))
        rc = -EINVAL;
    return rc;
}

int pom_kv_put(pom_kv *kv, const void *key, size_t klen, const void *val, size_t vlen,
               unsigned flags)
{
    int rc = put_check(key, klen, val, vlen, flags);
    if (rc < 0)
        return rc;
    struct kv_name n;
    key_name(key, klen, &n);
    xt_row row;
    struct xt_req q;
    put_req(kv, key, klen, &n, val, vlen, flags, &row, &q);
    struct xt_resp r;
    bool retried = false;
    rc = pom_call(kv->fs, &q, &r, &retried);
    xt_resp_free(&r);
    rc = put_done(kv, key, klen, &n, &row, rc, retried);
    /* A durable put says, as an O_SYNC write, that earlier changes of the
     * keyspace were lost (its own value is committed). */
    if (rc == 0 && (flags & POM_KV_SYNC))
        rc = pom_es_check(kv->fs, kv->table, &kv->err_sample);
    return rc;
}

int pom_kv_sync(pom_kv *kv)
{
    int rc = pom_gone_sync(kv->fs);
    return rc < 0 ? rc : pom_es_check(kv->fs, kv->table, &kv->err_sample);
}

int pom_kv_get(pom_kv *kv, const void *key, size_t klen, void **val, size_t *vlen,
               uint64_t *version)
{
    *val = NULL;
    *vlen = 0;
    int rc = key_check(key, klen);
    if (rc < 0)
        return rc;
    struct kv_name n;
    key_name(key, klen, &n);
    struct xt_resp r;
    xt_row row;
    if ((rc = kv_read(kv, key, klen, &n, &r, &row)) < 0)
        return rc;
    const xt_row_group *g = xt_row_view_group(&row, XT_CG_DATA);
    size_t len = g ? g->len : 0;
    uint8_t *buf = xt_malloc(len ? len : 1);
    if (!buf) {
        xt_resp_free(&r);
        return -ENOMEM;
    }
    if (len)
        memcpy(buf, g->ptr, len);
    if (version)
        *version = row.attr.version;
    xt_resp_free(&r);
    *val = buf;
    *vlen = len;
    return 0;
}

int pom_kv_update(pom_kv *kv, const void *key, size_t klen, const void *val, size_t vlen,
                  uint64_t if_version)
{
    int rc = key_check(key, klen);
    if (rc == 0)
        rc = value_check(val, vlen);
    if (rc < 0)
        return rc;
    struct kv_name n;
    key_name(key, klen, &n);
    return kv_change(kv, key, klen, &n, val, vlen, if_version, 0);
}

/* The request of a delete (q borrows n). */
static void del_req(pom_kv *kv, const struct kv_name *n, uint64_t if_version, struct xt_req *q)
{
    *q = (struct xt_req){ .op = XT_OP_DELETE, .t = { .table = kv->table }, .name = n->b,
                          .name_len = n->len };
    if (if_version != POM_KV_ANY_VERSION) {
        q->flags |= XT_F_IF_VER;
        q->expect_version = if_version;
    }
}

int pom_kv_delete(pom_kv *kv, const void *key, size_t klen, uint64_t if_version)
{
    int rc = key_check(key, klen);
    if (rc < 0)
        return rc;
    struct kv_name n;
    key_name(key, klen, &n);
    if (klen > POM_KV_SHORT_MAX) {
        /* Never delete another key's row on a digest collision. */
        struct xt_resp r;
        xt_row row;
        if ((rc = kv_read(kv, key, klen, &n, &r, &row)) < 0)
            return rc;
        xt_resp_free(&r);
    }
    struct xt_req q;
    del_req(kv, &n, if_version, &q);
    struct xt_resp r;
    bool retried = false;
    rc = pom_call(kv->fs, &q, &r, &retried);
    xt_resp_free(&r);
    return rc == -ENOENT && retried ? 0 : rc; /* our lost reply (pom_call.c does the same) */
}

/* ---- batches ----------------------------------------------------------- */

enum kv_bkind { KB_PUT, KB_GET, KB_DEL };

/* One operation of a batch; key and val borrowed from the caller. */
struct kv_bop {
    enum kv_bkind kind;
    const void *key, *val;
    size_t klen, vlen;
    unsigned flags;             /* put */
    uint64_t if_version;        /* delete */
    struct kv_name n;
    xt_row row;                 /* put: the row sent (put_req) */
    int rc;                     /* the result (after submit) */
    const void *out;            /* get: the value, in resps[i] */
    size_t outlen;
    uint64_t version;
};

struct pom_kv_batch {
    pom_kv *kv;                 /* borrowed: outlives the batch */
    struct kv_bop *ops;         /* n of cap */
    size_t n, cap, bytes;
    bool submitted;
    /* submit's arrays, cap long (kept across resets) */
    struct xt_req *reqs;
    struct xt_resp *resps;      /* each freed at reset */
    int *rcs;
    bool *retried;
    size_t *at;                 /* reqs[k] is ops[at[k]] */
};

int pom_kv_batch_new(pom_kv *kv, pom_kv_batch **out)
{
    *out = NULL;
    if (!kv)
        return -EINVAL;
    pom_kv_batch *b = xt_calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    b->kv = kv;
    *out = b;
    return 0;
}

void pom_kv_batch_reset(pom_kv_batch *b)
{
    if (b->submitted)
        for (size_t i = 0; i < b->n; i++)
            xt_resp_free(&b->resps[i]);
    b->n = b->bytes = 0;
    b->submitted = false;
}

void pom_kv_batch_free(pom_kv_batch *b)
{
    if (!b)
        return;
    pom_kv_batch_reset(b);
    xt_free(b->ops);
    xt_free(b->reqs);
    xt_free(b->resps);
    xt_free(b->rcs);
    xt_free(b->retried);
    xt_free(b->at);
    xt_free(b);
}

size_t pom_kv_batch_count(const pom_kv_batch *b)
{
    return b->n;
}

/* Room for one more operation of bytes: 0, -E2BIG, -EBUSY, -ENOMEM. */
static int batch_room(pom_kv_batch *b, size_t bytes)
{
    if (b->submitted)
        return -EBUSY;
    if (b->n >= POM_KV_BATCH_MAX || b->bytes + bytes > POM_KV_BATCH_BYTES)
        return -E2BIG;
    if (b->n < b->cap)
        return 0;
    size_t cap = b->cap ? b->cap * 2 : 64;
    struct kv_bop *ops = xt_realloc(b->ops, cap * sizeof *ops);
    if (ops)
        b->ops = ops;
    struct xt_req *reqs = xt_realloc(b->reqs, cap * sizeof *reqs);
    if (reqs)
        b->reqs = reqs;
    struct xt_resp *resps = xt_realloc(b->resps, cap * sizeof *resps);
    if (resps)
        b->resps = resps;
    int *rcs = xt_realloc(b->rcs, cap * sizeof *rcs);
    if (rcs)
        b->rcs = rcs;
    bool *retried = xt_realloc(b->retried, cap * sizeof *retried);
    if (retried)
        b->retried = retried;
    size_t *at = xt_realloc(b->at, cap * sizeof *at);
    if (at)
        b->at = at;
    if (!ops || !reqs || !resps || !rcs || !retried || !at)
        return -ENOMEM;
    b->cap = cap;
    return 0;
}

static int batch_add(pom_kv_batch *b, const struct kv_bop *op)
{
    int rc = batch_room(b, op->klen + op->vlen);
    if (rc < 0)
        return rc;
    struct kv_bop *o = &b->ops[b->n++];
    *o = *op;
    key_name(o->key, o->klen, &o->n);
    b->bytes += op->klen + op->vlen;
    return 0;
}

int pom_kv_batch_put(pom_kv_batch *b, const void *key, size_t klen, const void *val,
                     size_t vlen, unsigned flags)
{
    int rc = put_check(key, klen, val, vlen, flags);
    return rc < 0 ? rc
                  : batch_add(b, &(struct kv_bop){ .kind = KB_PUT, .key = key, .klen = klen,
                                                   .val = val, .vlen = vlen, .flags = flags });
}

int pom_kv_batch_get(pom_kv_batch *b, const void *key, size_t klen)
{
    int rc = key_check(key, klen);
    return rc < 0 ? rc
                  : batch_add(b, &(struct kv_bop){ .kind = KB_GET, .key = key, .klen = klen });
}

int pom_kv_batch_delete(pom_kv_batch *b, const void *key, size_t klen, uint64_t if_version)
{
    int rc = key_check(key, klen);
    return rc < 0 ? rc
                  : batch_add(b, &(struct kv_bop){ .kind = KB_DEL, .key = key, .klen = klen,
                                                   .if_version = if_version });
}

/* A long key's delete first reads the row, as pom_kv_delete does: a row
 * holding another key (a digest collision) is never deleted (-ENOENT). A
 * row absent now may still be made by an earlier put of the batch, so the
 * delete goes out. Reads all such keys in one pom_multi_call. */
static int batch_long_deletes(pom_kv_batch *b)
{
    size_t k = 0;
    for (size_t i = 0; i < b->n; i++)
        if (b->ops[i].kind == KB_DEL && b->ops[i].klen > POM_KV_SHORT_MAX) {
            b->reqs[k] = (struct xt_req){ .op = XT_OP_LOOKUP, .t = { .table = b->kv->table },
                                          .name = b->ops[i].n.b,
                                          .name_len = b->ops[i].n.len, .flags = XT_F_INLINE };
            b->at[k++] = i;
        }
    if (k == 0)
        return 0;
    int rc = pom_multi_call(b->kv->fs, b->reqs, k, b->resps, b->rcs, NULL);
    if (rc < 0)
        return rc;
    for (size_t j = 0; j < k; j++) {
        struct kv_bop *o = &b->ops[b->at[j]];
        xt_row row;
        int st = b->rcs[j];
        if (st == 0)
            st = read_check(o->key, o->klen, &b->resps[j], &row); /* frees on error */
        xt_resp_free(&b->resps[j]);
        if (st < 0 && st != -ENOENT)
            o->rc = st;            /* the read failed: so does the delete */
        else if (st == -ENOENT && b->rcs[j] == 0)
            o->rc = -ENOENT;       /* another key's row */
    }
    return 0;
}

/* Op o answered rc (result r, sent more than once when retried): its
 * result as the single call's. */
static int batch_done(pom_kv_batch *b, struct kv_bop *o, struct xt_resp *r, int rc,
                      bool retried)
{
    if (o->kind == KB_PUT)
        return put_done(b->kv, o->key, o->klen, &o->n, &o->row, rc, retried);
    if (o->kind == KB_DEL)
        return rc == -ENOENT && retried ? 0 : rc;
    if (rc < 0)
        return rc;
    xt_row row;
    if ((rc = read_check(o->key, o->klen, r, &row)) < 0)
        return rc;
    const xt_row_group *g = xt_row_view_group(&row, XT_CG_DATA);
    static const uint8_t empty[1];
    o->out = g ? (const void *)g->ptr : (const void *)empty;
    o->outlen = g ? g->len : 0;
    o->version = row.attr.version;
    return 0;
}

int pom_kv_batch_submit(pom_kv_batch *b)
{
    if (b->submitted)
        return -EBUSY;
    for (size_t i = 0; i < b->n; i++)
        b->ops[i].rc = 1; /* not decided */
    int rc = batch_long_deletes(b);
    if (rc < 0)
        return rc;
    size_t k = 0;
    bool sync = false;
    for (size_t i = 0; i < b->n; i++) {
        struct kv_bop *o = &b->ops[i];
        if (o->rc != 1)
            continue;
        if (o->kind == KB_PUT)
            put_req(b->kv, o->key, o->klen, &o->n, o->val, o->vlen, o->flags, &o->row,
                    &b->reqs[k]);
        else if (o->kind == KB_DEL)
            del_req(b->kv, &o->n, o->if_version, &b->reqs[k]);
        else
            b->reqs[k] = (struct xt_req){ .op = XT_OP_LOOKUP, .t = { .table = b->kv->table },
                                          .name = o->n.b, .name_len = o->n.len,
                                          .flags = XT_F_INLINE };
        sync = sync || (o->kind == KB_PUT && (o->flags & POM_KV_SYNC));
        b->at[k++] = i;
    }
    if ((rc = pom_multi_call(b->kv->fs, b->reqs, k, b->resps, b->rcs, b->retried)) < 0)
        return rc;
    /* resps[j] belongs to ops[at[j]] from here: moved to index at[j]
     * (at[j] >= j, so walking down never overwrites one still needed). */
    for (size_t j = k; j-- > 0;) {
        size_t i = b->at[j];
        struct xt_resp r = b->resps[j];
        b->ops[i].rc = batch_done(b, &b->ops[i], &r, b->rcs[j], b->retried[j]);
        b->resps[i] = r;
    }
    for (size_t i = 0, j = 0; i < b->n; i++) /* the ops decided before sending */
        if (j < k && b->at[j] == i)
            j++;
        else
            memset(&b->resps[i], 0, sizeof b->resps[i]);
    /* A durable put says, as pom_kv_put's does, that earlier changes of
     * the keyspace were lost: every durable put of the batch says so. */
    if (sync && pom_es_check(b->kv->fs, b->kv->table, &b->kv->err_sample) < 0)
        for (size_t i = 0; i < b->n; i++)
            if (b->ops[i].kind == KB_PUT && (b->ops[i].flags & POM_KV_SYNC) && b->ops[i].rc == 0)
                b->ops[i].rc = -EIO;
    b->submitted = true;
    return 0;
}

int pom_kv_batch_result(const pom_kv_batch *b, size_t i, const void **val, size_t *vlen,
                        uint64_t *version)
{
    if (!b->submitted)
        return -EBUSY;
    if (i >= b->n)
        return -ERANGE;
    const struct kv_bop *o = &b->ops[i];
    if (o->rc == 0 && o->kind == KB_GET) {
        if (val)
            *val = o->out;
        if (vlen)
            *vlen = o->outlen;
        if (version)
            *version = o->version;
    }
    return o->rc;
}

/* ---- listings ---------------------------------------------------------- */

int pom_kv_cursor_done(const pom_kv_cursor *cur)
{
    return cur->pos >= XT_COOKIE_END;
}

/* Hands one listed row to cb. Returns cb's answer or -EIO. */
static int deliver(const uint8_t *enc, size_t len, pom_kv_cb cb, void *arg)
{
    xt_row row;
    if (xt_row_decode(enc, len, &row) < 0) {
        XT_ERR("a listed key/value row does not decode: %s", xt_row_last_error());
        return -EIO;
    }
    const void *key = row.name;
    size_t klen = row.name_len;
    const xt_row_group *kg = xt_row_view_group(&row, XT_CG_KEY);
    if (kg) {
        key = kg->ptr;
        klen = kg->len;
    }
    const xt_row_group *vg = xt_row_view_group(&row, XT_CG_DATA);
    static const uint8_t empty[1];
    return cb(arg, key, klen, vg ? (const void *)vg->ptr : (const void *)empty,
              vg ? vg->len : 0, row.attr.version);
}

/* List or search (substr != NULL) from *cur, taking at most max entries. */
static int kv_scan(pom_kv *kv, const void *substr, size_t slen, pom_kv_cursor *cur, size_t max,
                   pom_kv_cb cb, void *arg)
{
    if (!cur || !cb)
        return -EINVAL;
    size_t taken = 0;
    while (taken < max && cur->pos < XT_COOKIE_END) {
        size_t want = substr ? POM_KV_SCAN_PAGE : XT_MIN(max - taken, (size_t)POM_KV_LIST_PAGE);
        struct xt_list_req q = { .t = { .fsid = kv->fs->fsid, .table = kv->table,
                                        .slice_hint = -1 },
                                 .cookie = cur->pos, .max = (uint32_t)want,
                                 .substr = substr, .substr_len = (uint32_t)slen };
        struct xt_list_resp r;
        memset(&r, 0, sizeof r);
        int rc = pom_list_call(kv->fs, &q, &r);
        if (rc == -ENOENT) { /* a keyspace never written has no table yet */
            rc = 0;
            r.next_cookie = XT_COOKIE_END;
        }
        if (rc < 0) {
            xt_list_resp_free(&r);
            return rc;
        }
        atomic_fetch_add(&kv->calls, 1);
        atomic_fetch_add(&kv->rows, r.n);
        for (size_t i = 0; i < r.n; i++)
            atomic_fetch_add(&kv->bytes, r.lens[i]);
        size_t i = 0;
        for (; i < r.n && taken < max; i++) {
            rc = deliver(r.rows[i], r.lens[i], cb, arg);
            if (rc != 0)
                break;
            taken++;
            cur->pos = r.cookies[i] + 1; /* cookies < 2^62: +1 resumes after it */
        }
        bool all = i == r.n && rc == 0;
        if (all)
            cur->pos = r.next_cookie;
        xt_list_resp_free(&r);
        if (rc < 0)
            return rc;
        if (!all)
            break; /* the callback stopped, or max taken before the page ended */
    }
    return (int)XT_MIN(taken, (size_t)INT32_MAX);
}

int pom_kv_list(pom_kv *kv, pom_kv_cursor *cur, size_t max, pom_kv_cb cb, void *arg)
{
    return kv_scan(kv, NULL, 0, cur, max, cb, arg);
}

int pom_kv_search(pom_kv *kv, const void *substr, size_t slen, pom_kv_cursor *cur, size_t max,
                  pom_kv_cb cb, void *arg)
{
    if (!substr || slen == 0)
        return -EINVAL;
    if (slen > POM_KV_KEY_MAX)
        return -ENAMETOOLONG;
    return kv_scan(kv, substr, slen, cur, max, cb, arg);
}
