/*
 * bench_slice.c -- rates of the table slice (xtable/xt_slice.c).
 *
 * Simulates one directory table of N random names (default 1M) the way an
 * MDS holds it: slices of capacity C (default 8192) that split when full,
 * found through an extendible-hash directory (dir[V_h mod 2^global_depth]).
 * With `-C N` (capacity >= N) it is one big slice instead. Prints ops/s of
 * insert (splits included), lookup hit, lookup miss, list (cold: first
 * listing sorts; warm: sorted), encode, delete, and heap bytes per entry
 * measured with mallinfo2 against the payload (name + row bytes).
 *
 * usage: bench_slice [-n names] [-C capacity] [-r row_bytes] [-s seed]
 */
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_slice.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct bench_table {
    xt_slice **dir; /* 2^gdepth pointers; several may share one slice */
    unsigned gdepth;
    xt_slice **all;
    size_t nall, capall;
};

static uint64_t rng = 88172645463325252u;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static xt_slice *slice_of(struct bench_table *t, uint64_t h)
{
    return t->dir[xt_hash_vh(h) & ((UINT32_C(1) << t->gdepth) - 1)];
}

static void add_slice(struct bench_table *t, xt_slice *s)
{
    if (t->nall == t->capall) {
        t->capall = t->capall ? t->capall * 2 : 64;
        t->all = realloc(t->all, t->capall * sizeof(*t->all));
    }
    t->all[t->nall++] = s;
}

static void split(struct bench_table *t, xt_slice *s)
{
    xt_slice *c;
    if (xt_slice_split(s, &c) < 0) {
        fprintf(stderr, "split failed\n");
        exit(1);
    }
    unsigned d = xt_slice_depth(c);
    if (d > t->gdepth) { /* double the directory */
        size_t n = (size_t)1 << t->gdepth;
        t->dir = realloc(t->dir, 2 * n * sizeof(*t->dir));
        memcpy(t->dir + n, t->dir, n * sizeof(*t->dir));
        t->gdepth++;
    }
    for (size_t j = xt_slice_index(c); j < ((size_t)1 << t->gdepth); j += (size_t)1 << d)
        t->dir[j] = c;
    add_slice(t, c);
}

static double now_s(void)
{
    return (double)xt_mono_ns() / 1e9;
}

static int cb_count(void *arg, const xt_slice_entry *e)
{
    (void)e;
    ++*(size_t *)arg;
    return 0;
}

static void report(const char *what, size_t n, double secs)
{
    printf("%-22s %10zu ops %8.3f s %12.0f ops/s\n", what, n, secs, (double)n / secs);
}

int main(int argc, char **argv)
{
    size_t n = 1000000, row_len = 64;
    uint32_t cap = XT_SLICE_DEFAULT_CAPACITY;
    /* --quick: a short run that only checks the bench still works (CI). */
    if (argc > 1 && strcmp(argv[1], "--quick") == 0) {
        n = 50000;
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    int opt;
    while ((opt = getopt(argc, argv, "n:C:r:s:")) != -1) {
        switch (opt) {
        case 'n': n = strtoull(optarg, NULL, 0); break;
        case 'C': cap = (uint32_t)strtoul(optarg, NULL, 0); break;
        case 'r': row_len = strtoull(optarg, NULL, 0); break;
        case 's': rng = strtoull(optarg, NULL, 0) | 1; break;
        default:
            fprintf(stderr,
                    "usage: %s [--quick] [-n names] [-C capacity] [-r row_bytes] [-s seed]\n",
                    argv[0]);
            return 2;
        }
    }
    /* Names "f<random hex>" of 12..28 bytes, like generated file names. */
    char (*names)[32] = malloc(n * sizeof(*names));
    uint8_t *nlen = malloc(n);
    uint64_t *hashes = malloc(n * sizeof(*hashes));
    size_t payload = 0;
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(names[i], 32, "f%016llx%u", (unsigned long long)next_rand(),
                           (unsigned)(i % 100000000));
        nlen[i] = (uint8_t)len;
        hashes[i] = xt_hash_name(names[i], (size_t)len);
        payload += (size_t)len + row_len;
    }
    uint8_t *row = calloc(1, row_len + 1);
    memset(row, 'r', row_len);
    size_t *perm = malloc(n * sizeof(*perm)); /* random probe order */
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = next_rand() % i, tmp = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = tmp;
    }

    struct bench_table t = {0};
    t.dir = malloc(sizeof(*t.dir));
    t.dir[0] = xt_slice_new(0, 0, cap);
    add_slice(&t, t.dir[0]);
    printf("bench_slice: %zu names, capacity %u (%s), row %zu bytes\n", n, cap,
           cap >= n ? "one big slice" : "table of slices split as they fill", row_len);

    struct mallinfo2 m0 = mallinfo2();
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        for (;;) {
            xt_slice *s = slice_of(&t, hashes[i]);
            int rc = xt_slice_insert(s, names[i], nlen[i], hashes[i], row, row_len,
                                     XT_SLICE_EXCL, 1);
            if (rc == -ENOSPC) {
                split(&t, s);
                continue;
            }
            if (rc < 0) {
                fprintf(stderr, "insert: %d\n", rc);
                return 1;
            }
            break;
        }
    }
    report("insert (+splits)", n, now_s() - t0);
    struct mallinfo2 m1 = mallinfo2();
    size_t heap = m1.uordblks - m0.uordblks, est = 0;
    for (size_t i = 0; i < t.nall; i++)
        est += xt_slice_mem_bytes(t.all[i]);
    printf("slices %zu (depth %u), heap %.1f MiB, payload %.1f B/entry, "
           "overhead %.1f B/entry (heap-measured), %.1f B/entry (xt_slice_mem_bytes)\n",
           t.nall, t.gdepth, (double)heap / 1048576, (double)payload / n,
           (double)(heap - payload) / n, (double)(est - payload) / n);

    size_t found = 0;
    t0 = now_s();
    for (size_t k = 0; k < n; k++) {
        size_t i = perm[k];
        const void *r;
        size_t rl;
        found += xt_slice_lookup(slice_of(&t, hashes[i]), names[i], nlen[i], hashes[i], &r,
                                 &rl) == 0;
    }
    report("lookup hit", n, now_s() - t0);
    if (found != n)
        fprintf(stderr, "lookup: found %zu of %zu\n", found, n);

    t0 = now_s();
    found = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = perm[k];
        char miss[32];
        memcpy(miss, names[i], nlen[i]);
        miss[0] = 'g';
        uint64_t h = xt_hash_name(miss, nlen[i]);
        const void *r;
        size_t rl;
        found += xt_slice_lookup(slice_of(&t, h), miss, nlen[i], h, &r, &rl) == 0;
    }
    report("lookup miss (+hash)", n, now_s() - t0);

    for (int pass = 0; pass < 2; pass++) {
        size_t listed = 0;
        t0 = now_s();
        for (size_t i = 0; i < t.nall; i++) {
            uint64_t c = 0;
            while (c != XT_COOKIE_END) /* readdir-sized chunks */
                if (xt_slice_list(t.all[i], c, 256, cb_count, &listed, &c) < 0)
                    return 1;
        }
        report(pass ? "list (warm)" : "list (cold: sorts)", listed, now_s() - t0);
    }

    size_t bytes = 0;
    t0 = now_s();
    for (size_t i = 0; i < t.nall; i++) {
        uint8_t *img;
        size_t len;
        if (xt_slice_encode(t.all[i], &img, &len) < 0)
            return 1;
        bytes += len;
        xt_free(img);
    }
    double enc = now_s() - t0;
    report("encode (entries)", n, enc);
    printf("image %.1f MiB, %.0f MiB/s\n", (double)bytes / 1048576, bytes / enc / 1048576);

    /* Interleaved create + readdir chunk (untar while ls): incremental order. */
    t0 = now_s();
    size_t inter = 0;
    for (size_t k = 0; k < n / 4; k++) {
        size_t i = perm[k];
        xt_slice *s = slice_of(&t, hashes[i]);
        xt_slice_delete(s, names[i], nlen[i], hashes[i], 2);
        uint64_t c;
        size_t cnt = 0;
        if (k % 8 == 0)
            xt_slice_list(s, xt_hash_cookie(hashes[i], 0), 32, cb_count, &cnt, &c);
        inter++;
    }
    report("delete+list every 8th", inter, now_s() - t0);
    t0 = now_s();
    for (size_t k = n / 4; k < n; k++) {
        size_t i = perm[k];
        xt_slice_delete(slice_of(&t, hashes[i]), names[i], nlen[i], hashes[i], 2);
    }
    report("delete", n - n / 4, now_s() - t0);
    t0 = now_s();
    size_t dropped = 0;
    for (size_t i = 0; i < t.nall; i++)
        dropped += (size_t)xt_slice_drop_tombstones(t.all[i], 2);
    report("drop tombstones", dropped, now_s() - t0);

    for (size_t i = 0; i < t.nall; i++)
        xt_slice_free(t.all[i]);
    free(t.all);
    free(t.dir);
    free(names);
    free(nlen);
    free(hashes);
    free(row);
    free(perm);
    return 0;
}
