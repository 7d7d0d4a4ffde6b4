/*
 * gen_fuzz_corpus.c -- writes the seed corpora of fuzz_xt_bitmap,
 * fuzz_xt_slice and fuzz_mdsl_seg: real encodings made by the real
 * encoders (bitmaps after splits and gossip deltas; slice images and deltas
 * with rows, deletes, collisions; MDSL table folders written by a store
 * through commits, aborts, an undecided prepare, metadata and a GC pass).
 *
 *   gen_fuzz_corpus CORPUS_ROOT   (writes CORPUS_ROOT/{xt_bitmap,xt_slice,mdsl_seg}/...)
 *
 * Built with the fuzzers (tests/fuzz/CMakeLists.txt). Deterministic: the
 * same tree writes the same files (the MDSL index goes to a temporary
 * folder that is removed).
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mdsl_store.h"
#include "xt_bitmap.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_slice.h"

static const char *root;

static void put_file(const char *sub, const char *name, const void *p, size_t n,
                     const void *p2, size_t n2)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/%s", root, sub, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(p, 1, n, f) != n || (n2 && fwrite(p2, 1, n2, f) != n2) ||
        fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

#define DIE_IF(c) do { if (c) { fprintf(stderr, "gen: %s failed\n", #c); exit(1); } } while (0)

/* ---- bitmaps ---------------------------------------------------------- */

static void put_bitmap(const char *name, const xt_bitmap *b)
{
    size_t n = xt_bitmap_encoded_size(b);
    uint8_t *buf = malloc(n);
    DIE_IF(!buf || xt_bitmap_encode(b, buf, n) != (long)n);
    put_file("xt_bitmap", name, buf, n, NULL, 0);
    free(buf);
}

static void put_delta(const char *name, const xt_bitmap *b, const xt_bitmap *base)
{
    size_t n = xt_bitmap_delta_size(b, base);
    uint8_t *buf = malloc(n);
    DIE_IF(!buf || xt_bitmap_delta_encode(b, base, buf, n) != (long)n);
    put_file("xt_bitmap", name, buf, n, NULL, 0);
    free(buf);
}

static void gen_bitmaps(void)
{
    xt_bitmap *b = xt_bitmap_new();
    DIE_IF(!b);
    put_bitmap("root-only", b);
    uint32_t child;
    DIE_IF(xt_bitmap_split(b, 0, &child) < 0);
    DIE_IF(xt_bitmap_split(b, 0, &child) < 0);
    DIE_IF(xt_bitmap_split(b, 1, &child) < 0);
    put_bitmap("four", b);
    xt_bitmap *base = xt_bitmap_dup(b);
    /* a dense region (all-ones words) and a literal region */
    for (uint32_t i = 0; i < 300; i++)
        (void)xt_bitmap_split(b, i % 97, &child); /* absent slices are refused */
    put_bitmap("dense", b);
    put_delta("delta-dense", b, base);
    put_delta("delta-from-root", b, NULL);
    /* a skewed deep chain: slice 0 split again and again */
    xt_bitmap *deep = xt_bitmap_new();
    DIE_IF(!deep);
    for (int d = 0; d < 28; d++)
        DIE_IF(xt_bitmap_split(deep, 0, &child) < 0);
    put_bitmap("deep-chain", deep);
    put_delta("delta-deep", deep, NULL);
    xt_bitmap_free(deep);
    xt_bitmap_free(base);
    xt_bitmap_free(b);
}

/* ---- slices ------------------------------------------------------------ */

static void put_slice_image(const char *name, const xt_slice *s)
{
    uint8_t *buf;
    size_t n;
    DIE_IF(xt_slice_encode(s, &buf, &n) < 0);
    put_file("xt_slice", name, buf, n, NULL, 0);
    xt_free(buf);
}

static void put_slice_delta(const char *name, const xt_slice *s, uint64_t since)
{
    uint8_t *buf;
    size_t n;
    DIE_IF(xt_slice_encode_delta(s, since, &buf, &n) < 0);
    put_file("xt_slice", name, buf, n, NULL, 0);
    xt_free(buf);
}

static void gen_slices(void)
{
    xt_slice *s = xt_slice_new(0, 0, 64);
    DIE_IF(!s);
    put_slice_image("empty", s);
    char name[64];
    for (int i = 0; i < 12; i++) {
        int n = snprintf(name, sizeof name, "file-%03d", i);
        DIE_IF(xt_slice_insert(s, name, (size_t)n, xt_hash_name(name, (size_t)n), name,
                               (size_t)(i * 3), 0, 1) < 0);
    }
    put_slice_image("twelve", s);
    for (int i = 0; i < 4; i++) {
        int n = snprintf(name, sizeof name, "file-%03d", i);
        DIE_IF(xt_slice_delete(s, name, (size_t)n, xt_hash_name(name, (size_t)n), 2) < 0);
    }
    DIE_IF(xt_slice_update(s, "file-010", 8, xt_hash_name("file-010", 8), "new row", 7, 2) < 0);
    put_slice_delta("delta-deletes-update", s, 1);
    /* colliding hashes: same 55-bit order prefix, different names */
    uint64_t h = xt_hash_name("c", 1);
    for (int i = 0; i < 3; i++) {
        int n = snprintf(name, sizeof name, "collide-%d", i);
        DIE_IF(xt_slice_insert(s, name, (size_t)n, h, "r", 1, 0, 3) < 0);
    }
    put_slice_image("collisions", s);
    put_slice_delta("delta-collisions", s, 2);
    xt_slice *child;
    DIE_IF(xt_slice_split(s, &child) < 0);
    put_slice_image("split-parent", s);
    put_slice_image("split-child", child);
    xt_slice_free(child);
    xt_slice_free(s);
}

/* ---- MDSL folders -------------------------------------------------------- */

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

static size_t read_all(mdsl_io *io, const char *path, uint8_t **out)
{
    mdsl_file *f;
    *out = NULL;
    if (mdsl_io_open(io, path, false, &f) < 0)
        return 0;
    uint64_t size;
    DIE_IF(mdsl_io_size(io, f, &size) < 0);
    *out = malloc(size ? size : 1);
    DIE_IF(!*out || mdsl_io_pread_full(io, f, 0, *out, size) < 0);
    mdsl_io_close(io, f);
    return size;
}

/* Writes "<mode><TSS.1>[#CSFILE#<CS.1.1>]" for fuzz_mdsl_seg. */
static void put_folder(const char *name, mdsl_io *io, uint8_t mode, bool with_cs)
{
    uint8_t *tss, *cs = NULL;
    size_t n = read_all(io, "/fz/t.1.0000000000000002/TSS.1", &tss);
    size_t cn = with_cs ? read_all(io, "/fz/t.1.0000000000000002/CS.1.1", &cs) : 0;
    uint8_t *buf = malloc(1 + n + 8 + cn);
    DIE_IF(!buf);
    buf[0] = mode;
    memcpy(buf + 1, tss, n);
    size_t len = 1 + n;
    if (cs) {
        memcpy(buf + len, "#CSFILE#", 8);
        memcpy(buf + len + 8, cs, cn);
        len += 8 + cn;
    }
    put_file("mdsl_seg", name, buf, len, NULL, 0);
    free(buf);
    free(tss);
    free(cs);
}

static void gen_mdsl(void)
{
    char idx[] = "/tmp/gen_fuzz_corpus.XXXXXX";
    DIE_IF(!mkdtemp(idx));
    mdsl_io *io;
    DIE_IF(mdsl_io_mem_new(&io) < 0);
    struct mdsl_store_opts o = { .io = io, .dir = "/fz", .index_dir = idx,
                                 .seg_size = 1u << 20 };
    mdsl_store *s;
    DIE_IF(mdsl_store_open(&o, &s) < 0);
    struct xt_store_rec r[3] = {
        { .type = XT_STORE_IMAGE, .id = { .fsid = 1, .slice = 0, .table = 2 }, .version = 1,
          .data = "image-0", .len = 7 },
        { .type = XT_STORE_COLUMN, .id = { .fsid = 1, .slice = 0, .table = 2 }, .version = 1,
          .key = 7, .group = 1, .data = "file bytes", .len = 10 },
        { .type = XT_STORE_IMAGE, .id = { .fsid = 1, .slice = 1, .table = 2 }, .version = 1,
          .data = "image-1", .len = 7 },
    };
    DIE_IF(mdsl_store_prepare(s, 1, r, 3) < 0 || mdsl_store_commit(s, 1) < 0);
    put_folder("commit-1", io, 8 | 16, true);
    put_folder("commit-1-fix", io, 9, true);
    struct xt_store_rec d[2] = {
        { .type = XT_STORE_DELTA, .id = { .fsid = 1, .slice = 0, .table = 2 }, .version = 2,
          .data = "delta", .len = 5 },
        { .type = XT_STORE_COLUMN, .flags = XT_STORE_F_TOMBSTONE, .id = { .fsid = 1, .slice = 0, .table = 2 }, .version = 2, .key = 7, .group = 1, .data = "", .len = 0 },
    };
    DIE_IF(mdsl_store_prepare(s, 2, d, 2) < 0 || mdsl_store_commit(s, 2) < 0);
    d[0].version = 3;
    DIE_IF(mdsl_store_prepare(s, 3, d, 1) < 0 || mdsl_store_abort(s, 3) < 0);
    DIE_IF(mdsl_store_set_md(s, 1, 2, "md", 2) < 0);
    put_folder("commit-delta-abort", io, 11, true);
    d[0].version = 4;
    DIE_IF(mdsl_store_prepare(s, 4, d, 1) < 0); /* left undecided */
    put_folder("undecided", io, 3 | 16, false);
    (void)mdsl_store_gc(s, 4);
    put_folder("after-gc", io, 13, true);
    mdsl_store_close(s);
    mdsl_io_destroy(io);
    nftw(idx, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_ROOT\n", argv[0]);
        return 2;
    }
    root = argv[1];
    xt_log_set_level(XT_LOG_ERROR);
    gen_bitmaps();
    gen_slices();
    gen_mdsl();
    return 0;
}
