/*
 * bench_mdsl.c -- commit rate, bandwidth and write amplification of the MDSL
 * storage engine (mdsl/mdsl_store.h over liburing), side by side with the
 * same rows written as values into a plain LevelDB, in one run.
 *
 * What one MDSL commit is here (the MDS's commit group, docs/mds-commit.md): a
 * batch of B new rows of one directory table (fsid 1, table 1) spread by
 * name hash over NSLICES slices. Each dirty slice gets one record: a DELTA
 * holding its changed rows concatenated, or an IMAGE of the whole slice
 * when its deltas since the last image would pass `image_frac` (default
 * 50%, docs/mds-commit.md) of the slice's size. Then mdsl_store_prepare() and
 * mdsl_store_commit() (each fsyncs). Two layouts are measured:
 *   delta  : row = lens + fixed columns + name + inline data, all in the
 *            DELTA/IMAGE records;
 *   column : the DELTA/IMAGE rows carry fixed columns + name only; each
 *            row's inline data is one COLUMN record (group 1) in CS.1.<n>.
 *
 * LevelDB: key = name, value = fixed columns + data, one leveldb_writebatch
 * of the same B rows per commit, written with sync = true.
 *
 * Payload = per row: 60 fixed bytes + name + data (the same for both).
 * Write amplification (WA) = bytes written / payload, three ways:
 *   io    : /proc/self/io write_bytes - cancelled_write_bytes over the phase
 *           (data pages this process dirtied, io_uring workers included --
 *           checked by a calibration at start; file-system journal not
 *           included);
 *   disk  : sectors written on the block device of the folder
 *           (/proc/diskstats) after syncfs; includes the journal AND any
 *           other activity on the machine at the time;
 *   files : bytes in the phase's files at the end / payload (MDSL: the
 *           segments plus its LevelDB pointer index; "segs": segments only).
 * MDSL figures are taken after mdsl_store_close() (its index's running
 * compaction included); no MDSL GC pass runs. LevelDB is reported three
 * times: at the end of the writes, after its background compactions have
 * settled, and after a full leveldb_compact_range().
 *
 * Invariants:
 *  (1) Both systems see the same rows: each phase regenerates them from the
 *      same seed.
 *  (2) Throughput timers cover only the storage calls (row generation is
 *      outside); LevelDB's wait for background compaction is not timed.
 *  (3) Every phase runs in a fresh folder under one temporary root that is
 *      removed at exit (also on SIGINT/SIGTERM).
 *
 * usage: bench_mdsl [--quick] [--dir DIR] [--mb N] [--small-commits N]
 *                   [--slices N] [--image-frac F] [--case N] [--seed S]
 */
#include "mdsl_io.h"
#include "mdsl_store.h"
#include "xt_common.h"
#include "xt_hash.h"

#include <fcntl.h>
#include <ftw.h>
#include <leveldb/c.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define FIXED_LEN 60    /* fixed columns of a row (uuid, mode, times, ...) */
#define NAME_LEN 17     /* "f" + 16 hex digits */
#define COL_GROUP_DATA 1

/* ---- command line ----------------------------------------------------- */

static struct {
    bool quick;
    const char *dir;
    uint64_t mb;            /* payload per large-batch phase */
    unsigned small_commits; /* commits per small-batch phase */
    unsigned nslices;
    double image_frac;
    uint64_t seed;
    int only_case; /* 0 = all four */
} opt = { .mb = 256, .small_commits = 3000, .nslices = 16, .image_frac = 0.5,
          .seed = 0x5eed };

/* ---- temporary root, cleaned at exit (invariant 3) -------------------- */

static char root[4096];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(p);
    return 0;
}

static void rm_rf(const char *p)
{
    nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void cleanup(void)
{
    if (root[0])
        rm_rf(root);
    root[0] = 0;
}

static void on_signal(int sig)
{
    cleanup();
    signal(sig, SIG_DFL);
    raise(sig);
}

static uint64_t dir_bytes_acc;
static int du_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)p, (void)ftw;
    if (flag == FTW_F)
        dir_bytes_acc += (uint64_t)sb->st_size;
    return 0;
}

/* Sum of the sizes of the regular files under p. */
static uint64_t dir_bytes(const char *p)
{
    dir_bytes_acc = 0;
    nftw(p, du_one, 16, FTW_PHYS);
    return dir_bytes_acc;
}

/* ---- write counters ---------------------------------------------------- */

/* write_bytes - cancelled_write_bytes of this process (all its threads). */
static uint64_t proc_io_written(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    if (!f)
        return 0;
    char line[128];
    unsigned long long w = 0, c = 0, v;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "write_bytes: %llu", &v) == 1)
            w = v;
        else if (sscanf(line, "cancelled_write_bytes: %llu", &v) == 1)
            c = v;
    }
    fclose(f);
    return w > c ? w - c : 0;
}

static unsigned dev_major, dev_minor;
static char dev_name[64];
static bool have_dev;

/* Bytes written on the folder's block device so far (sectors * 512). */
static uint64_t disk_written(void)
{
    if (!have_dev)
        return 0;
    FILE *f = fopen("/proc/diskstats", "r");
    if (!f)
        return 0;
    char line[512];
    uint64_t out = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned ma, mi;
        char name[64];
        unsigned long long x[7];
        if (sscanf(line, " %u %u %63s %llu %llu %llu %llu %llu %llu %llu", &ma, &mi, name,
                   &x[0], &x[1], &x[2], &x[3], &x[4], &x[5], &x[6]) == 10 &&
            ma == dev_major && mi == dev_minor) {
            snprintf(dev_name, sizeof dev_name, "%s", name);
            out = x[6] * 512; /* sectors written */
        }
    }
    fclose(f);
    return out;
}

static void find_device(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) < 0)
        return;
    dev_major = major(st.st_dev);
    dev_minor = minor(st.st_dev);
    have_dev = true;
    disk_written();
    have_dev = dev_name[0] != 0;
}

/* Flush the file system of `dir` so the device counters include the phase. */
static void sync_fs(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        syncfs(fd);
        close(fd);
    }
}

struct counters {
    uint64_t io, disk;
};

static struct counters counters_now(void)
{
    sync_fs(root);
    return (struct counters){ proc_io_written(), disk_written() };
}

/* ---- rows --------------------------------------------------------------- */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

struct row {
    char name[NAME_LEN + 1];
    uint8_t fixed[FIXED_LEN];
    uint64_t uuid;
    uint32_t slice;
    uint32_t dlen;
    uint8_t *data; /* points into the batch's data buffer */
};

struct batch {
    struct row *rows;
    size_t n;
    uint8_t *data; /* bytes of all rows' data */
    size_t data_cap;
};

enum wl { WL_UNIFORM_0_1000, WL_3901 };
static const char *wl_name[] = { "sizes uniform 0-1000 B", "3901 B (mdtest-hard)" };

static double wl_avg(enum wl w)
{
    return w == WL_3901 ? 3901.0 : 500.0;
}

/* Generate the next batch of n rows (deterministic from rng_state). */
static void batch_gen(struct batch *b, size_t n, enum wl w)
{
    size_t need = n * (w == WL_3901 ? 3901 : 1000) + 8;
    if (need > b->data_cap) {
        xt_free(b->data);
        b->data = xt_malloc(need);
        b->data_cap = need;
        xt_free(b->rows);
        b->rows = xt_malloc(n * sizeof *b->rows);
        if (!b->data || !b->rows) {
            fprintf(stderr, "bench_mdsl: out of memory\n");
            exit(1);
        }
    }
    b->n = n;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        struct row *r = &b->rows[i];
        snprintf(r->name, sizeof r->name, "f%016llx", (unsigned long long)rnd());
        r->uuid = rnd();
        for (size_t k = 0; k < FIXED_LEN; k += 8) {
            uint64_t v = rnd();
            memcpy(r->fixed + k, &v, XT_MIN((size_t)8, FIXED_LEN - k));
        }
        memcpy(r->fixed, &r->uuid, 8);
        r->slice = (uint32_t)(xt_hash_name(r->name, NAME_LEN) % opt.nslices);
        r->dlen = w == WL_3901 ? 3901 : (uint32_t)(rnd() % 1001);
        r->data = b->data + off;
        for (size_t k = 0; k < r->dlen; k += 8) { /* incompressible */
            uint64_t v = rnd();
            memcpy(r->data + k, &v, XT_MIN((size_t)8, r->dlen - k));
        }
        off += r->dlen;
    }
}

static uint64_t row_payload(const struct row *r)
{
    return FIXED_LEN + NAME_LEN + r->dlen;
}

/* ---- growable byte buffers --------------------------------------------- */

struct buf {
    uint8_t *p;
    size_t len, cap;
};

static void buf_put(struct buf *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        size_t nc = XT_MAX(b->cap * 2, b->len + n + 4096);
        b->p = xt_realloc(b->p, nc);
        if (!b->p) {
            fprintf(stderr, "bench_mdsl: out of memory\n");
            exit(1);
        }
        b->cap = nc;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

/* Slice row encoding: namelen u16, datalen u32 (0 in the column layout),
 * fixed columns, name, data (delta layout only). */
static void row_encode(struct buf *b, const struct row *r, bool with_data)
{
    uint8_t h[6];
    xt_put_u16(h, NAME_LEN);
    xt_put_u32(h + 2, with_data ? r->dlen : 0);
    buf_put(b, h, sizeof h);
    buf_put(b, r->fixed, FIXED_LEN);
    buf_put(b, r->name, NAME_LEN);
    if (with_data)
        buf_put(b, r->data, r->dlen);
}

/* ---- results ------------------------------------------------------------ */

struct result {
    uint64_t commits, rows, payload;
    double secs;
    uint64_t io, disk, files, seg_files;
    uint64_t images, image_bytes; /* MDSL: IMAGE records written */
    uint64_t prep_ns;             /* MDSL: time in prepare (rest: commit) */
};

static void die_rc(const char *what, int rc)
{
    fprintf(stderr, "bench_mdsl: %s: %s\n", what, strerror(-rc));
    exit(1);
}

/* ---- MDSL phase --------------------------------------------------------- */

struct slice_state {
    struct buf image; /* the slice's whole content in image form */
    uint64_t delta_since_image;
    struct buf delta; /* this commit's changed rows */
};

static struct result run_mdsl(bool column, enum wl w, size_t batch, uint64_t ncommits,
                              const char *dir)
{
    struct result res = { 0 };
    mdsl_io *io;
    int rc = mdsl_io_uring_new(0, &io);
    if (rc < 0)
        die_rc("mdsl_io_uring_new", rc);
    struct mdsl_store_opts o = { .io = io, .dir = dir };
    mdsl_store *s;
    if ((rc = mdsl_store_open(&o, &s)) < 0)
        die_rc("mdsl_store_open", rc);

    struct slice_state *ss = xt_calloc(opt.nslices, sizeof *ss);
    struct xt_store_rec *recs = xt_malloc((batch + opt.nslices) * sizeof *recs);
    struct batch b = { 0 };
    rng_state = opt.seed;
    struct counters c0 = counters_now();
    uint64_t ns = 0;
    for (uint64_t c = 0; c < ncommits; c++) {
        uint64_t txid = c + 1;
        batch_gen(&b, batch, w);
        size_t n = 0;
        for (size_t i = 0; i < b.n; i++) {
            struct row *r = &b.rows[i];
            struct slice_state *sl = &ss[r->slice];
            row_encode(&sl->delta, r, !column);
            row_encode(&sl->image, r, !column);
            res.payload += row_payload(r);
            if (column && r->dlen)
                recs[n++] = (struct xt_store_rec){ .type = XT_STORE_COLUMN, .id = { .fsid = 1, .slice = r->slice, .table = 1 }, .version = txid,
                                               .key = r->uuid, .group = COL_GROUP_DATA,
                                               .data = r->data, .len = r->dlen };
        }
        for (uint32_t k = 0; k < opt.nslices; k++) {
            struct slice_state *sl = &ss[k];
            if (!sl->delta.len)
                continue;
            bool img = opt.image_frac > 0 &&
                       (double)(sl->delta_since_image + sl->delta.len) >
                           opt.image_frac * (double)sl->image.len;
            struct xt_store_rec r = { .type = img ? XT_STORE_IMAGE : XT_STORE_DELTA, .id = { .fsid = 1, .slice = k, .table = 1 }, .version = txid };
            if (img) {
                r.data = sl->image.p;
                r.len = (uint32_t)sl->image.len;
                sl->delta_since_image = 0;
                res.images++;
                res.image_bytes += sl->image.len;
            } else {
                r.data = sl->delta.p;
                r.len = (uint32_t)sl->delta.len;
                sl->delta_since_image += sl->delta.len;
            }
            recs[n++] = r;
        }
        uint64_t t0 = xt_mono_ns();
        if ((rc = mdsl_store_prepare(s, txid, recs, n)) < 0)
            die_rc("mdsl_store_prepare", rc);
        res.prep_ns += xt_mono_ns() - t0;
        if ((rc = mdsl_store_commit(s, txid)) < 0)
            die_rc("mdsl_store_commit", rc);
        ns += xt_mono_ns() - t0;
        for (uint32_t k = 0; k < opt.nslices; k++)
            ss[k].delta.len = 0;
        res.rows += b.n;
        res.commits++;
    }
    res.secs = (double)ns / 1e9;
    struct mdsl_stat st;
    if (mdsl_store_stat(s, &st) == 0)
        res.seg_files = st.bytes;
    mdsl_store_close(s); /* waits for the index's running compaction */
    struct counters c1 = counters_now();
    res.io = c1.io - c0.io;
    res.disk = c1.disk - c0.disk;
    res.files = dir_bytes(dir);
    mdsl_io_uring_thread_exit();
    mdsl_io_destroy(io);
    for (uint32_t k = 0; k < opt.nslices; k++) {
        xt_free(ss[k].image.p);
        xt_free(ss[k].delta.p);
    }
    xt_free(ss);
    xt_free(recs);
    xt_free(b.rows);
    xt_free(b.data);
    return res;
}

/* ---- LevelDB phase ------------------------------------------------------ */

static void lcheck(const char *what, char *err)
{
    if (err) {
        fprintf(stderr, "bench_mdsl: leveldb %s: %s\n", what, err);
        exit(1);
    }
}

/* Wait until LevelDB's background compactions are done: its stats and this
 * process's written bytes stay unchanged for 3 polls of 100 ms. */
static void leveldb_quiesce(leveldb_t *db)
{
    char *prev = NULL;
    uint64_t prev_io = 0;
    int still = 0;
    uint64_t deadline = xt_mono_ns() + (opt.quick ? 5 : 120) * UINT64_C(1000000000);
    while (still < 3 && xt_mono_ns() < deadline) {
        usleep(100000);
        char *cur = leveldb_property_value(db, "leveldb.stats");
        uint64_t io = proc_io_written();
        if (prev && cur && !strcmp(prev, cur) && io == prev_io)
            still++;
        else
            still = 0;
        leveldb_free(prev);
        prev = cur;
        prev_io = io;
    }
    leveldb_free(prev);
}

/* res[0]: at the end of the writes; res[1]: + background compactions
 * finished; res[2]: + a full leveldb_compact_range. */
static void run_leveldb(enum wl w, size_t batch, uint64_t ncommits, const char *dir,
                        struct result res[3])
{
    memset(res, 0, 3 * sizeof *res);
    leveldb_options_t *lo = leveldb_options_create();
    leveldb_options_set_create_if_missing(lo, 1);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_writeoptions_set_sync(wo, 1);
    char *err = NULL;
    leveldb_t *db = leveldb_open(lo, dir, &err);
    lcheck("open", err);
    leveldb_writebatch_t *wb = leveldb_writebatch_create();
    struct buf val = { 0 };
    struct batch b = { 0 };
    struct result r = { 0 };
    rng_state = opt.seed;
    struct counters c0 = counters_now();
    uint64_t ns = 0;
    for (uint64_t c = 0; c < ncommits; c++) {
        batch_gen(&b, batch, w);
        uint64_t t0 = xt_mono_ns();
        leveldb_writebatch_clear(wb);
        for (size_t i = 0; i < b.n; i++) {
            struct row *x = &b.rows[i];
            val.len = 0;
            buf_put(&val, x->fixed, FIXED_LEN);
            buf_put(&val, x->data, x->dlen);
            leveldb_writebatch_put(wb, x->name, NAME_LEN, (const char *)val.p, val.len);
            r.payload += row_payload(x);
        }
        leveldb_write(db, wo, wb, &err);
        lcheck("write", err);
        ns += xt_mono_ns() - t0;
        r.rows += b.n;
        r.commits++;
    }
    r.secs = (double)ns / 1e9;
    struct counters c1 = counters_now();
    r.io = c1.io - c0.io;
    r.disk = c1.disk - c0.disk;
    r.files = dir_bytes(dir);
    res[0] = r;

    leveldb_quiesce(db);
    c1 = counters_now();
    r.io = c1.io - c0.io;
    r.disk = c1.disk - c0.disk;
    r.files = dir_bytes(dir);
    res[1] = r;

    leveldb_compact_range(db, NULL, 0, NULL, 0);
    c1 = counters_now();
    r.io = c1.io - c0.io;
    r.disk = c1.disk - c0.disk;
    r.files = dir_bytes(dir);
    res[2] = r;

    leveldb_writebatch_destroy(wb);
    leveldb_close(db);
    leveldb_writeoptions_destroy(wo);
    leveldb_options_destroy(lo);
    xt_free(val.p);
    xt_free(b.rows);
    xt_free(b.data);
}

/* ---- calibration: does /proc/self/io see io_uring writes? -------------- */

static void calibrate(void)
{
    const size_t chunk = 128 * 1024, nchunk = 64; /* 8 MiB */
    char path[4200];
    snprintf(path, sizeof path, "%s/calibrate", root);
    mdsl_io *io;
    int rc = mdsl_io_uring_new(0, &io);
    if (rc < 0)
        die_rc("mdsl_io_uring_new", rc);
    mdsl_file *f;
    if ((rc = mdsl_io_open(io, path, true, &f)) < 0)
        die_rc("calibrate open", rc);
    uint8_t *p = xt_malloc(chunk);
    memset(p, 0xab, chunk);
    struct mdsl_io_wr wr[64];
    for (size_t i = 0; i < nchunk; i++)
        wr[i] = (struct mdsl_io_wr){ f, i * chunk, p, chunk };
    struct counters c0 = counters_now();
    uint64_t t0 = xt_mono_ns();
    if ((rc = mdsl_io_write(io, wr, nchunk, &f, 1, NULL)) < 0)
        die_rc("calibrate write", rc);
    double secs = (double)(xt_mono_ns() - t0) / 1e9;
    struct counters c1 = counters_now();
    mdsl_io_close(io, f);
    mdsl_io_uring_thread_exit();
    mdsl_io_destroy(io);
    xt_free(p);
    unlink(path);
    printf("Calibration: 8.0 MiB written through mdsl_io (io_uring) + fdatasync: "
           "/proc/self/io counted %.1f MiB, %s counted %.1f MiB; %.0f MB/s (the "
           "device's rough ceiling for one synced batch).\n",
           (double)(c1.io - c0.io) / 1048576.0, have_dev ? dev_name : "(no device)",
           (double)(c1.disk - c0.disk) / 1048576.0, (double)(chunk * nchunk) / secs / 1e6);
    if (c1.io - c0.io < chunk * nchunk * 9 / 10)
        printf("WARNING: /proc/self/io misses io_uring writes here: use the `disk` "
               "column.\n");
}

/* ---- report ------------------------------------------------------------- */

static void wa_cell(char *out, size_t n, uint64_t bytes, uint64_t payload, bool ok)
{
    if (!ok || !payload)
        snprintf(out, n, "-");
    else
        snprintf(out, n, "%.2f", (double)bytes / (double)payload);
}

static void print_row(const char *sys, const struct result *r, bool rates)
{
    char io[32], dk[32], fl[32], sg[32];
    wa_cell(io, sizeof io, r->io, r->payload, true);
    wa_cell(dk, sizeof dk, r->disk, r->payload, have_dev);
    wa_cell(fl, sizeof fl, r->files, r->payload, true);
    wa_cell(sg, sizeof sg, r->seg_files, r->payload, r->seg_files > 0);
    if (rates)
        printf("| %s | %.0f | %.0f | %.1f | %s | %s | %s | %s |\n", sys,
               (double)r->commits / r->secs, (double)r->rows / r->secs,
               (double)r->payload / r->secs / 1e6, io, dk, fl, sg);
    else
        printf("| %s | - | - | - | %s | %s | %s | %s |\n", sys, io, dk, fl, sg);
}

static void print_ratio(const char *what, const struct result *m, const struct result *l)
{
    printf("| %s | %.2fx | %.2fx | %.2fx | %.2fx | %s | %.2fx | |\n", what,
           ((double)m->commits / m->secs) / ((double)l->commits / l->secs),
           ((double)m->rows / m->secs) / ((double)l->rows / l->secs),
           ((double)m->payload / m->secs) / ((double)l->payload / l->secs),
           ((double)m->io / m->payload) / ((double)l->io / l->payload), "",
           ((double)m->files / m->payload) / ((double)l->files / l->payload));
}

static void phase_dir(char *out, size_t n, const char *what)
{
    snprintf(out, n, "%s/%s", root, what);
    if (mkdir(out, 0755) < 0) {
        perror(out);
        exit(1);
    }
}

static void run_case(enum wl w, size_t batch, uint64_t ncommits, int caseno)
{
    if (opt.only_case && opt.only_case != caseno)
        return;
    char d1[4200], d2[4200], d3[4200];
    char tag[32];
    snprintf(tag, sizeof tag, "c%d.mdsl-delta", caseno);
    phase_dir(d1, sizeof d1, tag);
    snprintf(tag, sizeof tag, "c%d.mdsl-column", caseno);
    phase_dir(d2, sizeof d2, tag);
    snprintf(tag, sizeof tag, "c%d.leveldb", caseno);
    phase_dir(d3, sizeof d3, tag);
    struct result md = run_mdsl(false, w, batch, ncommits, d1);
    struct result mc = run_mdsl(true, w, batch, ncommits, d2);
    struct result lv[3];
    run_leveldb(w, batch, ncommits, d3, lv);
    rm_rf(d1), rm_rf(d2), rm_rf(d3);

    printf("\n### %s, %zu rows per commit (%llu commits, %llu rows, %.1f MB payload)\n\n",
           wl_name[w], batch, (unsigned long long)md.commits, (unsigned long long)md.rows,
           (double)md.payload / 1e6);
    printf("| system | commits/s | rows/s | payload MB/s | WA io | WA disk | WA files "
           "| WA segs |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    print_row("MDSL, data in the delta", &md, true);
    print_row("MDSL, data as COLUMN records", &mc, true);
    print_row("LevelDB (end of writes)", &lv[0], true);
    print_row("LevelDB + background compactions", &lv[1], false);
    print_row("LevelDB + full compact_range", &lv[2], false);
    print_ratio("ratio MDSL delta / LevelDB (+bg)", &md, &lv[1]);
    print_ratio("ratio MDSL column / LevelDB (+bg)", &mc, &lv[1]);
    printf("\nMDSL IMAGE records: delta layout %llu (%.1f MB), column layout %llu (%.1f MB). "
           "MDSL time per commit, prepare + commit: delta layout %.2f + %.2f ms, column "
           "layout %.2f + %.2f ms.\n",
           (unsigned long long)md.images, (double)md.image_bytes / 1e6,
           (unsigned long long)mc.images, (double)mc.image_bytes / 1e6,
           (double)md.prep_ns / 1e6 / (double)md.commits,
           (md.secs * 1e3 - (double)md.prep_ns / 1e6) / (double)md.commits,
           (double)mc.prep_ns / 1e6 / (double)mc.commits,
           (mc.secs * 1e3 - (double)mc.prep_ns / 1e6) / (double)mc.commits);
    fflush(stdout);
}

static void usage(const char *argv0)
{
    fprintf(stderr,
            "usage: %s [--quick] [--dir DIR] [--mb N] [--small-commits N] [--slices N]\n"
            "          [--image-frac F] [--case N] [--seed S]\n"
            "  --quick            tiny sizes (CI smoke run, < 20 s)\n"
            "  --dir DIR          run in a temporary folder under DIR (default /var/tmp)\n"
            "  --mb N             payload MB per large-batch phase (default 256)\n"
            "  --small-commits N  commits per small-batch phase (default 3000)\n"
            "  --slices N         slices of the table (default 16)\n"
            "  --image-frac F     rewrite a slice image when its deltas pass F of its\n"
            "                     size (default 0.5; 0 or >= 1 = deltas only)\n"
            "  --case N           run only table N (1..4, in output order)\n"
            "  --seed S           row generator seed\n",
            argv0);
    exit(2);
}

int main(int argc, char **argv)
{
    const char *base = "/var/tmp";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick"))
            opt.quick = true;
        else if (!strcmp(a, "--dir") && v)
            base = v, i++;
        else if (!strcmp(a, "--mb") && v)
            opt.mb = strtoull(v, NULL, 0), i++;
        else if (!strcmp(a, "--small-commits") && v)
            opt.small_commits = (unsigned)strtoul(v, NULL, 0), i++;
        else if (!strcmp(a, "--slices") && v)
            opt.nslices = (unsigned)strtoul(v, NULL, 0), i++;
        else if (!strcmp(a, "--image-frac") && v)
            opt.image_frac = strtod(v, NULL), i++;
        else if (!strcmp(a, "--case") && v)
            opt.only_case = atoi(v), i++;
        else if (!strcmp(a, "--seed") && v)
            opt.seed = strtoull(v, NULL, 0) | 1, i++;
        else
            usage(argv[0]);
    }
    if (opt.quick) {
        opt.mb = 4;
        opt.small_commits = 100;
    }
    if (opt.nslices == 0 || opt.mb == 0 || opt.small_commits == 0)
        usage(argv[0]);

    printf("# bench_mdsl\n\nCommand:");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n\n");

    snprintf(root, sizeof root, "%s/bench_mdsl.XXXXXX", base);
    if (!mkdtemp(root)) {
        perror(root);
        return 1;
    }
    atexit(cleanup);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    find_device(root);
    struct statfs sf;
    bool tmpfs = statfs(root, &sf) == 0 && sf.f_type == 0x01021994; /* TMPFS_MAGIC */
    printf("Folder: %s (device %s%s). Table of %u slices; image rewrite when deltas "
           "pass %.0f%% of the slice; row = %d B fixed + %d B name + data; payload = "
           "those bytes; segments 64 MiB; seed %llu.\n",
           root, have_dev ? dev_name : "none found", tmpfs ? ", TMPFS: no device writes" : "",
           opt.nslices, opt.image_frac * 100, FIXED_LEN, NAME_LEN,
           (unsigned long long)opt.seed);
    printf("WA io = /proc/self/io (write_bytes - cancelled) / payload (no fs journal); "
           "WA disk = /proc/diskstats sectors written after syncfs / payload (journal "
           "included, and ANY other activity on the device meanwhile); WA files = "
           "bytes of all files at the end (MDSL: segments + index) / payload; WA segs = "
           "MDSL segment files only. Timers cover the storage calls only; MDSL WA is "
           "taken after closing the store.\n");
    calibrate();

    int caseno = 0;
    for (int w = WL_UNIFORM_0_1000; w <= WL_3901; w++) {
        double row = FIXED_LEN + NAME_LEN + wl_avg((enum wl)w);
        uint64_t large = (uint64_t)((double)opt.mb * 1e6 / row / 1000.0);
        run_case((enum wl)w, 1000, XT_MAX(large, (uint64_t)2), ++caseno);
        run_case((enum wl)w, 10, opt.small_commits, ++caseno);
    }
    return 0;
}
