/*
 * mdsl_index.c -- key/value encoding of the pointer index over LevelDB's C
 * API (leveldb/c.h). Layout in mdsl_index.h.
 */
#include "mdsl_index.h"

#include <leveldb/c.h>
#include <string.h>

#include "xt_common.h"
#include "xt_ldb.h"

struct mdsl_index {
    leveldb_t *db;
    leveldb_options_t *opts;
    leveldb_readoptions_t *ropts;
    leveldb_writeoptions_t *wopts, *wopts_sync;
    uint64_t reads;         /* entries returned by gets and scans (atomic) */
};

struct mdsl_index_batch {
    leveldb_writebatch_t *wb;
};

#define KEY_MAX 29

static void be32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
}
static void be64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}
static uint32_t get_be32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | p[i];
    return v;
}
static uint64_t get_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static size_t key_enc(uint8_t *p, const struct mdsl_ikey *k)
{
    p[0] = k->kind;
    be32(p + 1, k->id.fsid);
    be64(p + 5, k->id.table);
    be32(p + 13, k->id.slice);
    if (k->kind == MDSL_IK_SLICE) {
        be64(p + 17, k->version);
        return 25;
    }
    be64(p + 17, k->key);
    be32(p + 25, k->group);
    return 29;
}

static bool key_dec(const uint8_t *p, size_t n, struct mdsl_ikey *k)
{
    memset(k, 0, sizeof *k);
    if (n < 17)
        return false;
    k->kind = p[0];
    k->id.fsid = get_be32(p + 1);
    k->id.table = get_be64(p + 5);
    k->id.slice = get_be32(p + 13);
    if (k->kind == MDSL_IK_SLICE && n == 25) {
        k->version = get_be64(p + 17);
        return true;
    }
    if (k->kind == MDSL_IK_COLUMN && n == 29) {
        k->key = get_be64(p + 17);
        k->group = get_be32(p + 25);
        return true;
    }
    return false;
}

static void ptr_enc(uint8_t *p, const struct mdsl_ptr *v)
{
    memset(p, 0, MDSL_PTR_SIZE);
    xt_put_u32(p, v->segno);
    xt_put_u32(p + 4, v->len);
    xt_put_u64(p + 8, v->off);
    xt_put_u64(p + 16, v->csum);
    xt_put_u64(p + 24, v->version);
    xt_put_u32(p + 32, v->evidence);
    p[36] = v->type;
    p[37] = v->flags;
}

static bool ptr_dec(const uint8_t *p, size_t n, struct mdsl_ptr *v)
{
    if (n != MDSL_PTR_SIZE)
        return false;
    v->segno = xt_get_u32(p);
    v->len = xt_get_u32(p + 4);
    v->off = xt_get_u64(p + 8);
    v->csum = xt_get_u64(p + 16);
    v->version = xt_get_u64(p + 24);
    v->evidence = xt_get_u32(p + 32);
    v->type = p[36];
    v->flags = p[37];
    return true;
}

static int lerr(const char *what, char *err)
{
    XT_ERR("mdsl_index: %s: %s", what, err);
    leveldb_free(err);
    return -EIO;
}

int mdsl_index_open(const char *dir, mdsl_index **out)
{
    mdsl_index *idx = xt_calloc(1, sizeof *idx);
    if (!idx)
        return -ENOMEM;
    idx->opts = leveldb_options_create();
    leveldb_options_set_create_if_missing(idx->opts, 1);
    idx->ropts = leveldb_readoptions_create();
    idx->wopts = leveldb_writeoptions_create();
    idx->wopts_sync = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(idx->wopts_sync, 1);
    char *err = NULL;
    idx->db = xt_ldb_open(idx->opts, dir, 10000, &err);
    if (err) {
        int rc = lerr("open", err);
        idx->db = NULL;
        mdsl_index_close(idx);
        return rc;
    }
    *out = idx;
    return 0;
}

void mdsl_index_close(mdsl_index *idx)
{
    if (!idx)
        return;
    if (idx->db)
        leveldb_close(idx->db);
    leveldb_writeoptions_destroy(idx->wopts);
    leveldb_writeoptions_destroy(idx->wopts_sync);
    leveldb_readoptions_destroy(idx->ropts);
    leveldb_options_destroy(idx->opts);
    xt_free(idx);
}

int mdsl_index_destroy(const char *dir)
{
    leveldb_options_t *o = leveldb_options_create();
    char *err = NULL;
    leveldb_destroy_db(o, dir, &err);
    leveldb_options_destroy(o);
    return err ? lerr("destroy", err) : 0;
}

static int get_raw(mdsl_index *idx, const uint8_t *k, size_t kl, uint8_t *val, size_t vl)
{
    char *err = NULL;
    size_t n = 0;
    char *v = leveldb_get(idx->db, idx->ropts, (const char *)k, kl, &n, &err);
    if (err)
        return lerr("get", err);
    if (!v)
        return -ENOENT;
    __atomic_fetch_add(&idx->reads, 1, __ATOMIC_RELAXED);
    int rc = n == vl ? 0 : -EBADMSG;
    if (rc == 0)
        memcpy(val, v, vl);
    else
        XT_ERR("mdsl_index: value of %zu bytes, expected %zu", n, vl);
    leveldb_free(v);
    return rc;
}

int mdsl_index_get(mdsl_index *idx, const struct mdsl_ikey *k, struct mdsl_ptr *out)
{
    uint8_t kb[KEY_MAX], vb[MDSL_PTR_SIZE];
    int rc = get_raw(idx, kb, key_enc(kb, k), vb, sizeof vb);
    if (rc == 0)
        ptr_dec(vb, sizeof vb, out);
    return rc;
}

static size_t resume_key(uint8_t *p, uint32_t fsid, uint64_t table)
{
    p[0] = 'R';
    be32(p + 1, fsid);
    be64(p + 5, table);
    return 13;
}

int mdsl_index_get_resume(mdsl_index *idx, uint32_t fsid, uint64_t table,
                          uint32_t *segno, uint64_t *off)
{
    uint8_t kb[13], vb[12];
    int rc = get_raw(idx, kb, resume_key(kb, fsid, table), vb, sizeof vb);
    if (rc == 0) {
        *segno = xt_get_u32(vb);
        *off = xt_get_u64(vb + 4);
    }
    return rc;
}

#define SWEEP_KEY "W"

int mdsl_index_get_sweep_owed(mdsl_index *idx, uint64_t *seq)
{
    uint8_t vb[8];
    int rc = get_raw(idx, (const uint8_t *)SWEEP_KEY, 1, vb, sizeof vb);
    if (rc == 0)
        *seq = xt_get_u64(vb);
    return rc;
}

int mdsl_index_put_sweep_owed(mdsl_index *idx, uint64_t seq)
{
    uint8_t vb[8];
    xt_put_u64(vb, seq);
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    if (seq)
        leveldb_writebatch_put(wb, SWEEP_KEY, 1, (const char *)vb, sizeof vb);
    else
        leveldb_writebatch_delete(wb, SWEEP_KEY, 1);
    char *err = NULL;
    leveldb_write(idx->db, idx->wopts_sync, wb, &err);
    leveldb_writebatch_destroy(wb);
    return err ? lerr("write", err) : 0;
}

/* Iterate in order the keys with the prefix pre[0..pl), from the first one
 * >= pre[0..sl) (sl >= pl: a seek inside the prefix). */
static int scan_from(mdsl_index *idx, const uint8_t *pre, size_t pl, size_t sl, mdsl_index_cb cb,
                     void *arg)
{
    leveldb_iterator_t *it = leveldb_create_iterator(idx->db, idx->ropts);
    int rc = 0;
    for (leveldb_iter_seek(it, (const char *)pre, sl); rc == 0 && leveldb_iter_valid(it);
         leveldb_iter_next(it)) {
        size_t kl, vl;
        const uint8_t *k = (const uint8_t *)leveldb_iter_key(it, &kl);
        if (kl < pl || memcmp(k, pre, pl))
            break;
        const uint8_t *v = (const uint8_t *)leveldb_iter_value(it, &vl);
        __atomic_fetch_add(&idx->reads, 1, __ATOMIC_RELAXED);
        struct mdsl_ikey key;
        struct mdsl_ptr ptr;
        if (!key_dec(k, kl, &key) || !ptr_dec(v, vl, &ptr)) {
            XT_ERR("mdsl_index: malformed entry (key %zu B, value %zu B)", kl, vl);
            rc = -EBADMSG;
            break;
        }
        rc = cb(&key, &ptr, arg);
    }
    char *err = NULL;
    leveldb_iter_get_error(it, &err);
    if (err && rc == 0)
        rc = lerr("iterate", err);
    else if (err)
        leveldb_free(err);
    leveldb_iter_destroy(it);
    return rc;
}

static int scan_prefix(mdsl_index *idx, const uint8_t *pre, size_t pl, mdsl_index_cb cb, void *arg)
{
    return scan_from(idx, pre, pl, pl, cb, arg);
}

/* A callback wrapper that stops (STOP_SCAN) past version `to`. */
#define STOP_SCAN 1
struct bound {
    uint64_t to;
    mdsl_index_cb cb;
    void *arg;
};

static int upto(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    struct bound *b = arg;
    if (k->version > b->to)
        return STOP_SCAN;
    int rc = b->cb(k, p, b->arg);
    return rc == STOP_SCAN ? -EINVAL : rc; /* callbacks return 0 or -errno */
}

int mdsl_index_scan_slice(mdsl_index *idx, xt_slice_id id, mdsl_index_cb cb, void *arg)
{
    uint8_t pre[17] = { MDSL_IK_SLICE };
    be32(pre + 1, id.fsid);
    be64(pre + 5, id.table);
    be32(pre + 13, id.slice);
    return scan_prefix(idx, pre, sizeof pre, cb, arg);
}

int mdsl_index_scan_slice_from(mdsl_index *idx, xt_slice_id id, uint64_t from, uint64_t to,
                               mdsl_index_cb cb, void *arg)
{
    struct bound b = { .to = to, .cb = cb, .arg = arg };
    uint8_t k[25] = { MDSL_IK_SLICE };
    be32(k + 1, id.fsid);
    be64(k + 5, id.table);
    be32(k + 13, id.slice);
    be64(k + 17, from);
    int rc = scan_from(idx, k, 17, sizeof k, upto, &b);
    return rc == STOP_SCAN ? 0 : rc;
}

uint64_t mdsl_index_reads(mdsl_index *idx)
{
    return __atomic_load_n(&idx->reads, __ATOMIC_RELAXED);
}

int mdsl_index_scan_table(mdsl_index *idx, uint32_t fsid, uint64_t table,
                          mdsl_index_cb cb, void *arg)
{
    uint8_t pre[13];
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        pre[0] = i == 0 ? MDSL_IK_SLICE : MDSL_IK_COLUMN;
        be32(pre + 1, fsid);
        be64(pre + 5, table);
        rc = scan_prefix(idx, pre, sizeof pre, cb, arg);
    }
    return rc;
}

int mdsl_index_scan_all(mdsl_index *idx, mdsl_index_cb cb, void *arg)
{
    uint8_t pre[1] = { MDSL_IK_COLUMN };
    int rc = scan_prefix(idx, pre, 1, cb, arg);
    pre[0] = MDSL_IK_SLICE;
    return rc ? rc : scan_prefix(idx, pre, 1, cb, arg);
}

int mdsl_index_scan_slices_after(mdsl_index *idx, const struct mdsl_ikey *after,
                                 mdsl_index_cb cb, void *arg)
{
    uint8_t k[17] = { MDSL_IK_SLICE };
    if (!after)
        return scan_prefix(idx, k, 1, cb, arg);
    be32(k + 1, after->id.fsid);
    be64(k + 5, after->id.table);
    be32(k + 13, after->id.slice);
    /* the first key past that slice: (fsid, table, slice) + 1, big-endian */
    int i = 16;
    while (i > 0 && ++k[i] == 0)
        i--;
    if (i == 0)
        return 0; /* it was the last possible slice */
    return scan_from(idx, k, 1, sizeof k, cb, arg);
}

mdsl_index_batch *mdsl_index_batch_new(void)
{
    mdsl_index_batch *b = xt_malloc(sizeof *b);
    if (b)
        b->wb = leveldb_writebatch_create();
    return b;
}

void mdsl_index_batch_put(mdsl_index_batch *b, const struct mdsl_ikey *k, const struct mdsl_ptr *p)
{
    uint8_t kb[KEY_MAX], vb[MDSL_PTR_SIZE];
    size_t kl = key_enc(kb, k);
    ptr_enc(vb, p);
    leveldb_writebatch_put(b->wb, (const char *)kb, kl, (const char *)vb, sizeof vb);
}

void mdsl_index_batch_del(mdsl_index_batch *b, const struct mdsl_ikey *k)
{
    uint8_t kb[KEY_MAX];
    size_t kl = key_enc(kb, k);
    leveldb_writebatch_delete(b->wb, (const char *)kb, kl);
}

void mdsl_index_batch_resume(mdsl_index_batch *b, uint32_t fsid, uint64_t table,
                             uint32_t segno, uint64_t off)
{
    uint8_t kb[13], vb[12];
    size_t kl = resume_key(kb, fsid, table);
    xt_put_u32(vb, segno);
    xt_put_u64(vb + 4, off);
    leveldb_writebatch_put(b->wb, (const char *)kb, kl, (const char *)vb, sizeof vb);
}

void mdsl_index_batch_del_resume(mdsl_index_batch *b, uint32_t fsid, uint64_t table)
{
    uint8_t kb[13];
    size_t kl = resume_key(kb, fsid, table);
    leveldb_writebatch_delete(b->wb, (const char *)kb, kl);
}

int mdsl_index_write(mdsl_index *idx, mdsl_index_batch *b, bool sync)
{
    char *err = NULL;
    leveldb_write(idx->db, sync ? idx->wopts_sync : idx->wopts, b->wb, &err);
    return err ? lerr("write", err) : 0;
}

void mdsl_index_batch_free(mdsl_index_batch *b)
{
    if (!b)
        return;
    leveldb_writebatch_destroy(b->wb);
    xt_free(b);
}

int mdsl_ptr_list_add(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    struct mdsl_ptr_list *l = arg;
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 8;
        struct mdsl_ptr *np = xt_realloc(l->p, nc * sizeof *np);
        if (!np)
            return -ENOMEM;
        l->p = np;
        l->cap = nc;
    }
    l->p[l->n] = *p;
    l->p[l->n++].version = k->version;
    return 0;
}
