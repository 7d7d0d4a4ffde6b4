/*
 * mdsl_test_util.h -- shared by the MDSL tests: a test environment (memory
 * io under a fault wrapper, LevelDB in a temp folder), deterministic payloads,
 * and a model of the committed state (per slice: every committed image and
 * delta; per column: every committed version) with the expected reads.
 */
#ifndef MDSL_TEST_UTIL_H
#define MDSL_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mdsl_index.h"
#include "mdsl_store.h"
#include "xt_common.h"

static inline uint64_t tu_rnd(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

/* Deterministic payload of (a, b, c). */
static inline void tu_fill(uint8_t *p, size_t n, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t s = (a * 1000003u) ^ (b * 7919u) ^ (c * 104729u) ^ 0x5bd1e995u;
    if (!s)
        s = 1;
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(tu_rnd(&s) >> 56);
}

struct tu_env {
    char tmp[128];
    char index[160];
    mdsl_io *mem, *fault;
    mdsl_store *s;
    struct mdsl_store_opts o;
};

static inline void tu_env_init(struct tu_env *e, uint64_t seed, uint64_t seg_size)
{
    memset(e, 0, sizeof *e);
    snprintf(e->tmp, sizeof e->tmp, "/tmp/mdsl_test.XXXXXX");
    assert_non_null(mkdtemp(e->tmp));
    snprintf(e->index, sizeof e->index, "%s/index", e->tmp);
    assert_int_equal(mdsl_io_mem_new(&e->mem), 0);
    assert_int_equal(mdsl_io_fault_new(e->mem, seed, &e->fault), 0);
    e->o.io = e->fault;
    e->o.dir = "/store";
    e->o.index_dir = e->index;
    e->o.seg_size = seg_size;
}

static inline int tu_open(struct tu_env *e)
{
    return mdsl_store_open(&e->o, &e->s);
}

static inline void tu_close(struct tu_env *e)
{
    mdsl_store_close(e->s);
    e->s = NULL;
}

static inline void tu_env_free(struct tu_env *e)
{
    if (e->s)
        tu_close(e);
    mdsl_io_destroy(e->fault);
    mdsl_io_destroy(e->mem);
    mdsl_index_destroy(e->index);
    rmdir(e->tmp);
}

/* ---- model ----------------------------------------------------------- */

#define TU_MAXREC 4096

struct tu_mrec {
    uint8_t type, flags;
    uint64_t table;
    uint32_t slice, group;
    uint64_t key, version;
    uint32_t len;
};

struct tu_model {
    struct tu_mrec rec[TU_MAXREC];
    size_t n;
};

static inline void tu_model_add(struct tu_model *m, const struct xt_store_rec *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        assert_true(m->n < TU_MAXREC);
        m->rec[m->n++] = (struct tu_mrec){ r[i].type, r[i].flags, r[i].id.table, r[i].id.slice,
                                           r[i].group, r[i].key, r[i].version, r[i].len };
    }
}

static inline void tu_check_payload(const void *d, uint32_t len, const struct tu_mrec *r)
{
    uint8_t *want = malloc(len ? len : 1);
    tu_fill(want, len, r->table * 31 + r->slice + r->key * 7 + r->group, r->version, r->type);
    assert_memory_equal(d, want, len);
    free(want);
}

/* The newest committed image of a slice in the model, or NULL. */
static inline const struct tu_mrec *tu_model_head(const struct tu_model *m, uint64_t table,
                                                  uint32_t slice)
{
    const struct tu_mrec *img = NULL;
    for (size_t i = 0; i < m->n; i++) {
        const struct tu_mrec *r = &m->rec[i];
        if (r->table == table && r->slice == slice && r->type == XT_STORE_IMAGE &&
            (!img || r->version > img->version))
            img = r;
    }
    return img;
}

/* The slice moved away: its newest image is a MOVED tombstone. */
static inline bool tu_model_moved(const struct tu_model *m, uint64_t table, uint32_t slice)
{
    const struct tu_mrec *img = tu_model_head(m, table, slice);
    return img && (img->flags & XT_STORE_F_MOVED);
}

/* Check one slice against the model: latest image + later deltas, or
 * -ESTALE when that image is MOVED. */
static inline void tu_check_slice(mdsl_store *s, uint32_t fsid, const struct tu_model *m,
                                  uint64_t table, uint32_t slice)
{
    const struct tu_mrec *img = tu_model_head(m, table, slice);
    struct xt_store_load l;
    if (img && (img->flags & XT_STORE_F_MOVED)) {
        assert_int_equal(mdsl_store_load_slice(s, (xt_slice_id){ .fsid = fsid, .slice = slice, .table = table }, &l), -ESTALE);
        return;
    }
    const struct tu_mrec *d[TU_MAXREC];
    size_t nd = 0;
    for (size_t i = 0; i < m->n; i++) {
        const struct tu_mrec *r = &m->rec[i];
        if (r->table == table && r->slice == slice && r->type == XT_STORE_DELTA &&
            (!img || r->version > img->version))
            d[nd++] = r;
    }
    for (size_t i = 1; i < nd; i++) /* sort by version */
        for (size_t j = i; j > 0 && d[j - 1]->version > d[j]->version; j--) {
            const struct tu_mrec *t = d[j];
            d[j] = d[j - 1];
            d[j - 1] = t;
        }
    int rc = mdsl_store_load_slice(s, (xt_slice_id){ .fsid = fsid, .slice = slice, .table = table }, &l);
    if (!img && nd == 0) {
        assert_int_equal(rc, -ENOENT);
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(l.has_image, img != NULL);
    if (img) {
        assert_int_equal(l.image.version, img->version);
        assert_int_equal(l.image.len, img->len);
        tu_check_payload(l.image.data, l.image.len, img);
    }
    assert_int_equal(l.ndeltas, nd);
    for (size_t i = 0; i < nd; i++) {
        assert_int_equal(l.deltas[i].version, d[i]->version);
        assert_int_equal(l.deltas[i].len, d[i]->len);
        tu_check_payload(l.deltas[i].data, l.deltas[i].len, d[i]);
    }
    xt_store_load_free(&l);
}

static inline void tu_check_column(mdsl_store *s, uint32_t fsid, const struct tu_model *m,
                                   uint64_t table, uint32_t slice, uint64_t key, uint32_t group)
{
    const struct tu_mrec *best = NULL;
    for (size_t i = 0; i < m->n; i++) {
        const struct tu_mrec *r = &m->rec[i];
        if (r->type == XT_STORE_COLUMN && r->table == table && r->slice == slice &&
            r->key == key && r->group == group && (!best || r->version >= best->version))
            best = r;
    }
    void *d = NULL;
    uint32_t len = 0;
    uint64_t ver = 0;
    int rc = mdsl_store_read_column(s, (xt_slice_id){ .fsid = fsid, .slice = slice, .table = table }, key, group, &d, &len, &ver);
    if (tu_model_moved(m, table, slice)) {
        assert_int_equal(rc, -ESTALE);
        return;
    }
    if (!best || (best->flags & XT_STORE_F_TOMBSTONE)) {
        assert_int_equal(rc, -ENOENT);
        return;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(ver, best->version);
    assert_int_equal(len, best->len);
    tu_check_payload(d, len, best);
    xt_free(d);
}

/* Build a record with its deterministic payload in buf (>= len bytes). */
static inline struct xt_store_rec tu_rec(uint8_t type, uint32_t fsid, uint64_t table, uint32_t slice,
                                     uint64_t key, uint32_t group, uint64_t version,
                                     uint8_t *buf, uint32_t len)
{
    struct xt_store_rec r = { .type = type, .id = { .fsid = fsid, .slice = slice, .table = table },
                          .version = version, .data = buf, .len = len };
    if (type == XT_STORE_COLUMN) {
        r.key = key;
        r.group = group;
    }
    tu_fill(buf, len, table * 31 + slice + r.key * 7 + r.group, version, type);
    return r;
}

/* Prepare and commit records in one go. */
static inline int tu_commit(mdsl_store *s, uint64_t txid, struct xt_store_rec *r, size_t n)
{
    int rc = mdsl_store_prepare(s, txid, r, n);
    return rc ? rc : mdsl_store_commit(s, txid);
}

/* A MOVED tombstone (docs/mdsl-scale.md "Tombstones"). */
static inline struct xt_store_rec tu_tombstone(uint32_t fsid, uint64_t table, uint32_t slice,
                                           uint64_t version)
{
    return (struct xt_store_rec){ .type = XT_STORE_IMAGE, .flags = XT_STORE_F_MOVED, .id = { .fsid = fsid, .slice = slice, .table = table }, .version = version };
}

/* Dump all S and C index entries as one string-ish blob for comparisons. */
struct tu_dump {
    uint8_t *b;
    size_t n, cap;
};

static inline int tu_dump_cb(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    struct tu_dump *d = arg;
    if (d->n + 128 > d->cap) {
        d->cap = d->cap ? d->cap * 2 : 4096;
        d->b = realloc(d->b, d->cap);
    }
    int n = snprintf((char *)d->b + d->n, 128, "%c %u %llx %u %llu %llu %u|%u %u %llu %llx %u %u %u\n",
                     k->kind, k->id.fsid, (unsigned long long)k->id.table, k->id.slice,
                     (unsigned long long)k->version, (unsigned long long)k->key, k->group,
                     p->segno, p->len, (unsigned long long)p->off, (unsigned long long)p->csum,
                     p->evidence, p->type, p->flags);
    d->n += (size_t)n;
    return 0;
}

static inline void tu_dump_index(const char *dir, struct tu_dump *d)
{
    mdsl_index *idx;
    memset(d, 0, sizeof *d);
    assert_int_equal(mdsl_index_open(dir, &idx), 0);
    assert_int_equal(mdsl_index_scan_all(idx, tu_dump_cb, d), 0);
    mdsl_index_close(idx);
}

#endif /* MDSL_TEST_UTIL_H */
