/*
 * fuzz_mdsl_seg.c -- libFuzzer target for what the MDSL reads back from its
 * disks: the record codec (mdsl/mdsl_seg.c: header decode, verify, manifest
 * entries), the sequential segment scan with its resynchronisation, and the
 * whole recovery of mdsl_store_open (mdsl/mdsl_recover.c) over a table
 * folder whose segment files are the input.
 *
 * Input layout: byte 0 is a mode, the rest is the TSS.1 segment of folder
 * t.1.0000000000000002, optionally followed by the marker FUZZ_CS_MARK and
 * the bytes of CS.1.1 (column group 1). Mode bit 0 asks this file to
 * rewrite the checksum of every record it can walk to (so mutations reach
 * the manifest and replay logic behind the checksums); bit 1 commits (else
 * aborts) the prepared transactions after recovery, bit 2 runs a GC pass,
 * bit 3 reads slices and a column back (only without bit 0), bit 4 closes
 * and reopens the store before deciding (check 3).
 *
 * Checked beyond "no sanitizer report":
 *  (1) mdsl_seg_verify accepts a record at an offset iff the scan could
 *      deliver it there; every record the scan delivers verifies, lies
 *      inside the file, in ascending order, and valid_end <= size;
 *  (2) the store opens (recovery never fails on corrupt bytes: they are
 *      skipped or cut) or fails with -EBADMSG/-EIO/-ENOMEM/-ENOSPC only, and
 *      an opened store answers stat, loads of every slice the scan saw, and
 *      a commit/abort of every transaction it lists as prepared;
 *  (3) a second open of the recovered files delivers the same prepared set
 *      (mode bit 4).
 * The LevelDB index lives in a fresh folder under $TMPDIR per input.
 *
 * Seed corpus: tests/fuzz/corpus/mdsl_seg (gen_fuzz_corpus.c writes real
 * stores: commits, aborts, undecided prepares, metadata).
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mdsl_seg.h"
#include "mdsl_store.h"
#include "xt_hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(c) do { if (!(c)) __builtin_trap(); } while (0)

#define FUZZ_CS_MARK "#CSFILE#"
#define DIR_ROOT "/fz"
#define DIR_TABLE DIR_ROOT "/t.1.0000000000000002"

static char idx_root[256];
static unsigned long idx_seq;

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw);

static void rm_idx_root(void)
{
    nftw(idx_root, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *t = getenv("TMPDIR");
    snprintf(idx_root, sizeof idx_root, "%s/fuzz_mdsl.XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(idx_root))
        abort();
    atexit(rm_idx_root);
    xt_log_set_level(XT_LOG_ERROR);
    return 0;
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p); /* best effort */
    return 0;
}

/* Rewrite the checksum of each record walkable from offset 0. */
static void fix_checksums(uint8_t *b, size_t n)
{
    size_t off = 0;
    while (n - off >= MDSL_HDR_SIZE) {
        struct mdsl_rec_hdr h;
        if (mdsl_seg_decode_hdr(b + off, &h) < 0 || mdsl_rec_total(&h) > n - off)
            return;
        mdsl_seg_encode(&h, b + off + MDSL_HDR_SIZE, b + off);
        off += mdsl_rec_total(&h);
    }
}

struct seen {
    uint64_t last_off, size;
    uint32_t slices[8];
    size_t nslices;
    const uint8_t *file;
};

static int scan_cb(const struct mdsl_rec_hdr *h, const uint8_t *rec, uint64_t off, void *arg)
{
    struct seen *s = arg;
    CHECK(off >= s->last_off && off + mdsl_rec_total(h) <= s->size);
    s->last_off = off + mdsl_rec_total(h);
    struct mdsl_rec_hdr v;
    CHECK(mdsl_seg_verify(rec, mdsl_rec_total(h), &v) == 0);
    CHECK(memcmp(rec, s->file + off, mdsl_rec_total(h)) == 0);
    if (h->type == MDSL_REC_PREPARE || h->type == MDSL_REC_COMMIT ||
        h->type == MDSL_REC_GCMOVE) {
        for (uint32_t i = 0; i + MDSL_ENTRY_SIZE <= h->payload_len; i += MDSL_ENTRY_SIZE) {
            struct mdsl_entry e;
            mdsl_seg_entry_get(rec + MDSL_HDR_SIZE + i, &e);
            uint8_t back[MDSL_ENTRY_SIZE];
            mdsl_seg_entry_put(back, &e);
            /* every field round-trips; only the reserved bytes may differ */
            const uint8_t *orig = rec + MDSL_HDR_SIZE + i;
            CHECK(memcmp(back, orig, 2) == 0 && memcmp(back + 4, orig + 4, 40) == 0 &&
                  memcmp(back + 48, orig + 48, 8) == 0);
        }
    }
    if ((h->type == XT_STORE_IMAGE || h->type == XT_STORE_DELTA) && s->nslices < 8)
        s->slices[s->nslices++] = h->slice;
    return 0;
}

static void write_file(mdsl_io *io, const char *path, const uint8_t *p, size_t n)
{
    mdsl_file *f;
    CHECK(mdsl_io_open(io, path, true, &f) == 0);
    if (n) {
        struct mdsl_io_wr w = { f, 0, p, n };
        CHECK(mdsl_io_write(io, &w, 1, NULL, 0, NULL) == 0);
    }
    mdsl_io_close(io, f);
}

static int open_store(mdsl_io *io, const char *idx, mdsl_store **out)
{
    struct mdsl_store_opts o = { .io = io, .dir = DIR_ROOT, .index_dir = idx,
                                 .seg_size = 1u << 20 };
    return mdsl_store_open(&o, out);
}

static void exercise(mdsl_store *s, const struct seen *seen, uint8_t mode)
{
    struct mdsl_stat st;
    CHECK(mdsl_store_stat(s, &st) == 0);
    /* Reads only when asked and when checksums were not rewritten: an index
     * entry that points at a missing segment (possible only in a
     * checksum-valid but inconsistent folder, e.g. a COMMIT manifest naming
     * a segment that is not there) makes each read retry for ~2 s
     * (mdsl_read.c gc_retry) before -EIO, which would bring the run down to
     * a few inputs per second. */
    if ((mode & 9) != 8)
        return;
    for (size_t i = 0; i < seen->nslices; i++) {
        struct xt_store_load l;
        int rc = mdsl_store_load_slice(s, (xt_slice_id){ .fsid = 1, .slice = seen->slices[i], .table = 2 }, &l);
        CHECK(rc == 0 || rc == -ENOENT || rc == -EBADMSG || rc == -EIO || rc == -ENOMEM);
        if (rc == 0)
            xt_store_load_free(&l);
    }
    void *md;
    uint32_t mdlen;
    if (mdsl_store_get_md(s, 1, 2, &md, &mdlen) == 0)
        xt_free(md);
    void *col;
    uint32_t clen;
    uint64_t ver;
    if (mdsl_store_read_column(s, (xt_slice_id){ .fsid = 1, .slice = 0, .table = 2 }, 7, 1, &col, &clen, &ver) == 0)
        xt_free(col);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (4u << 20))
        return 0;
    uint8_t mode = data[0];
    size_t n = size - 1;
    uint8_t *tss = malloc(n ? n : 1);
    CHECK(tss != NULL);
    memcpy(tss, data + 1, n);
    size_t tss_len = n;
    const uint8_t *cs = NULL;
    size_t cs_len = 0;
    uint8_t *mark = memmem(tss, n, FUZZ_CS_MARK, strlen(FUZZ_CS_MARK));
    if (mark) {
        tss_len = (size_t)(mark - tss);
        cs = mark + strlen(FUZZ_CS_MARK);
        cs_len = n - tss_len - strlen(FUZZ_CS_MARK);
    }
    if (mode & 1) {
        fix_checksums(tss, tss_len);
        fix_checksums((uint8_t *)cs, cs_len);
    }

    mdsl_io *io;
    CHECK(mdsl_io_mem_new(&io) == 0);
    CHECK(mdsl_io_mkdir(io, DIR_ROOT) == 0 && mdsl_io_mkdir(io, DIR_TABLE) == 0);
    write_file(io, DIR_TABLE "/TSS.1", tss, tss_len);
    if (cs)
        write_file(io, DIR_TABLE "/CS.1.1", cs, cs_len);

    /* (1) the scan over the raw segment */
    mdsl_file *f;
    CHECK(mdsl_io_open(io, DIR_TABLE "/TSS.1", false, &f) == 0);
    struct seen seen = { .size = tss_len, .file = tss };
    struct mdsl_scan_res res;
    CHECK(mdsl_seg_scan(io, f, 0, scan_cb, &seen, &res) == 0);
    CHECK(res.valid_end <= res.size && res.size == tss_len);
    CHECK(res.valid_end >= seen.last_off);
    mdsl_io_close(io, f);
    if (tss_len >= MDSL_HDR_SIZE) {
        struct mdsl_rec_hdr h;
        int rc = mdsl_seg_verify(tss, tss_len, &h);
        CHECK(rc == 0 || rc == -EBADMSG || rc == -ENODATA);
        if (rc == 0)
            CHECK(res.records >= 1);
    }

    /* (2) recovery over it */
    char idx[300];
    snprintf(idx, sizeof idx, "%s/%lu", idx_root, idx_seq++);
    mdsl_store *s;
    int rc = open_store(io, idx, &s);
    CHECK(rc == 0 || rc == -EBADMSG || rc == -EIO || rc == -ENOMEM || rc == -ENOSPC);
    if (rc == 0) {
        exercise(s, &seen, mode);
        uint64_t *tx = NULL;
        size_t ntx = 0;
        CHECK(mdsl_store_prepared(s, &tx, &ntx) == 0);
        if (mode & 16) {
            /* (3) recovery is repeatable on what it left behind (a second
             * LevelDB open doubles the cost: every other input) */
            mdsl_store_close(s);
            CHECK(open_store(io, idx, &s) == 0);
        }
        uint64_t *tx2 = NULL;
        size_t ntx2 = 0;
        CHECK(mdsl_store_prepared(s, &tx2, &ntx2) == 0);
        CHECK(ntx2 == ntx);
        for (size_t i = 0; i < ntx2; i++) {
            int d = (mode & 2) ? mdsl_store_commit(s, tx2[i]) : mdsl_store_abort(s, tx2[i]);
            CHECK(d == 0 || d == -EBADMSG || d == -EIO || d == -ENOMEM || d == -ENOSPC);
        }
        if (mode & 4)
            (void)mdsl_store_gc(s, 4);
        exercise(s, &seen, mode);
        xt_free(tx);
        xt_free(tx2);
        mdsl_store_close(s);
    }
    nftw(idx, rm_one, 8, FTW_DEPTH | FTW_PHYS);
    mdsl_io_destroy(io);
    free(tss);
    return 0;
}
