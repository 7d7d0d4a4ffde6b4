/*
 * test_mdsl_seg.c -- mdsl_io backends (memory, fault, liburing) and the
 * record codec / segment scan: round trips, torn tails, corruption in the
 * middle (random corruption corpus, seeded), power-loss behaviour of the
 * fault backend.
 */
#include "mdsl_test_util.h"

#include "mdsl_seg.h"

#include <time.h>

static int list_cb(const char *name, bool is_dir, void *arg)
{
    assert_string_equal(name, "f");
    assert_false(is_dir);
    (*(int *)arg)++;
    return 0;
}

static void io_basics(mdsl_io *io, const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/f", dir);
    assert_int_equal(mdsl_io_mkdir(io, dir), 0);
    assert_int_equal(mdsl_io_mkdir(io, dir), 0);
    mdsl_file *f;
    assert_int_equal(mdsl_io_open(io, path, false, &f), -ENOENT);
    assert_int_equal(mdsl_io_open(io, path, true, &f), 0);
    static uint8_t a[300000], b[300000];
    tu_fill(a, sizeof a, 1, 2, 3);
    struct mdsl_io_wr w[3] = { { f, 0, a, 1000 }, { f, 1000, a + 1000, 299000 }, { f, 400000, "x", 1 } };
    assert_int_equal(mdsl_io_write(io, w, 3, &f, 1, NULL), 0);
    uint64_t size;
    assert_int_equal(mdsl_io_size(io, f, &size), 0);
    assert_int_equal(size, 400001);
    assert_int_equal(mdsl_io_pread_full(io, f, 0, b, sizeof b), 0);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(mdsl_io_read(io, f, 400000, b, 10), 1);
    assert_int_equal(mdsl_io_truncate(io, f, 10), 0);
    assert_int_equal(mdsl_io_pread_full(io, f, 0, b, 11), -EIO);
    assert_int_equal(mdsl_io_sync(io, f), 0);
    mdsl_io_close(io, f);
    int count = 0;
    assert_int_equal(mdsl_io_list(io, dir, list_cb, &count), 0);
    assert_int_equal(count, 1);
    assert_int_equal(mdsl_io_unlink(io, path), 0);
    assert_int_equal(mdsl_io_unlink(io, path), -ENOENT);
}

static void test_io_mem(void **state)
{
    (void)state;
    mdsl_io *io;
    assert_int_equal(mdsl_io_mem_new(&io), 0);
    io_basics(io, "/d");
    mdsl_io_destroy(io);
}

static void test_io_uring(void **state)
{
    (void)state;
    char tmp[] = "/tmp/mdsl_io.XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char dir[64];
    snprintf(dir, sizeof dir, "%s/d", tmp);
    mdsl_io *io;
    assert_int_equal(mdsl_io_uring_new(4, &io), 0); /* small ring: chunked batches */
    io_basics(io, dir);
    /* a batch larger than the ring */
    char path[128];
    snprintf(path, sizeof path, "%s/g", dir);
    mdsl_file *f;
    assert_int_equal(mdsl_io_open(io, path, true, &f), 0);
    struct mdsl_io_wr w[50];
    char data[50];
    for (int i = 0; i < 50; i++) {
        data[i] = (char)('a' + i % 26);
        w[i] = (struct mdsl_io_wr){ f, (uint64_t)i, &data[i], 1 };
    }
    assert_int_equal(mdsl_io_write(io, w, 50, &f, 1, NULL), 0);
    char back[50];
    assert_int_equal(mdsl_io_pread_full(io, f, 0, back, 50), 0);
    assert_memory_equal(back, data, 50);
    mdsl_io_close(io, f);
    unlink(path);
    rmdir(dir);
    rmdir(tmp);
    mdsl_io_destroy(io);
}

static void test_io_fault(void **state)
{
    (void)state;
    mdsl_io *mem, *io;
    assert_int_equal(mdsl_io_mem_new(&mem), 0);
    assert_int_equal(mdsl_io_fault_new(mem, 5, &io), 0);
    io_basics(io, "/d");
    mdsl_file *f;
    assert_int_equal(mdsl_io_open(io, "/d/p", true, &f), 0);
    /* countdown: the 2nd write of a batch fails, the first happened */
    mdsl_io_fault_countdown(io, 1, -ENOSPC, false);
    struct mdsl_io_wr w[2] = { { f, 0, "abcd", 4 }, { f, 4, "efgh", 4 } };
    bool sf = true;
    assert_int_equal(mdsl_io_write(io, w, 2, &f, 1, &sf), -ENOSPC);
    assert_false(sf);
    uint64_t size;
    assert_int_equal(mdsl_io_size(io, f, &size), 0);
    assert_int_equal(size, 4);
    /* a failing sync is reported as such */
    mdsl_io_fault_countdown(io, 2, -EIO, false);
    assert_int_equal(mdsl_io_write(io, w, 2, &f, 1, &sf), -EIO);
    assert_true(sf);
    mdsl_io_fault_countdown(io, -1, 0, false);
    /* power loss: synced data stays, unsynced may go */
    mdsl_io_fault_powerloss(io, true);
    assert_int_equal(mdsl_io_truncate(io, f, 0), 0);
    assert_int_equal(mdsl_io_write(io, w, 1, &f, 1, NULL), 0);
    int lost_total = 0;
    for (int i = 0; i < 20; i++) {
        struct mdsl_io_wr x = { f, 4, "efgh", 4 };
        assert_int_equal(mdsl_io_write(io, &x, 1, NULL, 0, NULL), 0);
        lost_total += (int)mdsl_io_fault_crash(io);
        assert_int_equal(mdsl_io_size(io, f, &size), -EIO); /* crashed */
        mdsl_io_fault_reset(io);
        char b[8] = { 0 };
        assert_int_equal(mdsl_io_size(io, f, &size), 0);
        assert_true(size == 4 || size == 8);
        assert_int_equal(mdsl_io_read(io, f, 0, b, 8), (long)size);
        assert_memory_equal(b, "abcd", 4);
        assert_int_equal(mdsl_io_truncate(io, f, 4), 0);
    }
    assert_true(lost_total > 0 && lost_total < 20);
    mdsl_io_close(io, f);
    mdsl_io_destroy(io);
    mdsl_io_destroy(mem);
}

/* ---- records and scans ---------------------------------------------- */

struct got {
    uint64_t offs[512];
    int n;
};

static int scan_cb(const struct mdsl_rec_hdr *h, const uint8_t *rec, uint64_t off, void *arg)
{
    (void)h, (void)rec;
    struct got *g = arg;
    g->offs[g->n++] = off;
    return 0;
}

static void test_scan(void **state)
{
    (void)state;
    uint64_t seed = (uint64_t)time(NULL);
    print_message("scan corpus seed %llu\n", (unsigned long long)seed);
    mdsl_io *io;
    assert_int_equal(mdsl_io_mem_new(&io), 0);
    assert_int_equal(mdsl_io_mkdir(io, "/d"), 0);
    for (int iter = 0; iter < 300; iter++) {
        mdsl_file *f;
        assert_int_equal(mdsl_io_open(io, "/d/s", true, &f), 0);
        assert_int_equal(mdsl_io_truncate(io, f, 0), 0);
        int n = 1 + (int)(tu_rnd(&seed) % 40);
        uint64_t offs[64], off = 0;
        static uint8_t buf[4096 + MDSL_HDR_SIZE], payload[4096];
        for (int i = 0; i < n; i++) {
            uint32_t len = (uint32_t)(tu_rnd(&seed) % 300);
            tu_fill(payload, len, (uint64_t)iter, (uint64_t)i, 0);
            struct mdsl_rec_hdr h = { .type = XT_STORE_IMAGE, .payload_len = len, .txid = (uint64_t)i,
                                      .table = 1, .version = (uint64_t)i };
            mdsl_seg_encode(&h, payload, buf);
            struct mdsl_rec_hdr h2;
            assert_int_equal(mdsl_seg_verify(buf, mdsl_rec_total(&h), &h2), 0);
            assert_int_equal(h2.csum, h.csum);
            assert_int_equal(h2.version, (uint64_t)i);
            struct mdsl_io_wr w = { f, off, buf, mdsl_rec_total(&h) };
            assert_int_equal(mdsl_io_write(io, &w, 1, NULL, 0, NULL), 0);
            offs[i] = off;
            off += mdsl_rec_total(&h);
        }
        offs[n] = off;
        struct got g = { .n = 0 };
        struct mdsl_scan_res res;
        int mode = (int)(tu_rnd(&seed) % 3);
        int victim = (int)(tu_rnd(&seed) % (uint64_t)n);
        uint64_t at = offs[victim] + tu_rnd(&seed) % (offs[victim + 1] - offs[victim]);
        if (mode == 1) { /* flip one byte */
            uint8_t b;
            assert_int_equal(mdsl_io_pread_full(io, f, at, &b, 1), 0);
            b ^= (uint8_t)(1 + tu_rnd(&seed) % 255);
            struct mdsl_io_wr w = { f, at, &b, 1 };
            assert_int_equal(mdsl_io_write(io, &w, 1, NULL, 0, NULL), 0);
        } else if (mode == 2) { /* torn tail */
            assert_int_equal(mdsl_io_truncate(io, f, at), 0);
        }
        assert_int_equal(mdsl_seg_scan(io, f, 0, scan_cb, &g, &res), 0);
        if (mode == 0) {
            assert_int_equal(g.n, n);
            assert_int_equal(res.valid_end, off);
        } else if (mode == 1) {
            /* every record but the victim; the victim's end is valid_end
             * only when it was the last record (torn tail) */
            assert_int_equal(g.n, n - 1);
            for (int i = 0, k = 0; i < n; i++)
                if (i != victim)
                    assert_int_equal(g.offs[k++], offs[i]);
            assert_int_equal(res.corrupt, victim == n - 1 ? 0 : 1);
            assert_int_equal(res.valid_end, victim == n - 1 ? offs[victim] : off);
        } else {
            assert_int_equal(g.n, victim);
            assert_int_equal(res.valid_end, offs[victim]);
        }
        mdsl_io_close(io, f);
    }
    mdsl_io_destroy(io);
}

static void test_names_entries(void **state)
{
    (void)state;
    bool cs;
    uint32_t g, n;
    char buf[64];
    mdsl_seg_name(buf, sizeof buf, true, 7, 12);
    assert_string_equal(buf, "CS.7.12");
    assert_true(mdsl_seg_parse_name(buf, &cs, &g, &n) && cs && g == 7 && n == 12);
    mdsl_seg_name(buf, sizeof buf, false, 0, 3);
    assert_true(mdsl_seg_parse_name(buf, &cs, &g, &n) && !cs && n == 3);
    assert_false(mdsl_seg_parse_name("TSS.", &cs, &g, &n));
    assert_false(mdsl_seg_parse_name("TSS.0", &cs, &g, &n));
    assert_false(mdsl_seg_parse_name("CS.1", &cs, &g, &n));
    assert_false(mdsl_seg_parse_name("TSS.1x", &cs, &g, &n));
    assert_false(mdsl_seg_parse_name("md", &cs, &g, &n));
    struct mdsl_entry e = { XT_STORE_COLUMN, 1, 5, 6, 200, 77, 0xdeadbeef, 9, 3, 44 }, e2;
    uint8_t p[MDSL_ENTRY_SIZE];
    mdsl_seg_entry_put(p, &e);
    mdsl_seg_entry_get(p, &e2);
    assert_memory_equal(&e, &e2, sizeof e);
    /* headers: garbage never decodes as a valid record */
    uint64_t seed = 99;
    uint8_t junk[256];
    struct mdsl_rec_hdr h;
    for (int i = 0; i < 10000; i++) {
        for (size_t k = 0; k < sizeof junk; k++)
            junk[k] = (uint8_t)tu_rnd(&seed);
        if (i % 2)
            xt_put_u32(junk, MDSL_MAGIC);
        assert_int_not_equal(mdsl_seg_verify(junk, sizeof junk, &h), 0);
    }
}

/* Regression (fuzz_mdsl_seg): a manifest entry claiming a 4 GiB record made
 * recovery malloc 4 GiB before reading. Lengths no record can have, or that
 * run past the end of the file, are -EBADMSG without the allocation. */
static void test_read_bad_len(void **state)
{
    (void)state;
    mdsl_io *io;
    assert_int_equal(mdsl_io_mem_new(&io), 0);
    assert_int_equal(mdsl_io_mkdir(io, "/d"), 0);
    mdsl_file *f;
    assert_int_equal(mdsl_io_open(io, "/d/s", true, &f), 0);
    static uint8_t buf[MDSL_HDR_SIZE + 10];
    struct mdsl_rec_hdr h = { .type = XT_STORE_IMAGE, .payload_len = 10 };
    mdsl_seg_encode(&h, "0123456789", buf);
    struct mdsl_io_wr w = { f, 0, buf, sizeof buf };
    assert_int_equal(mdsl_io_write(io, &w, 1, NULL, 0, NULL), 0);
    struct mdsl_rec_hdr got;
    uint8_t *rec = NULL;
    assert_int_equal(mdsl_seg_read(io, f, 0, sizeof buf, 0, &got, &rec), 0);
    xt_free(rec);
    xt_alloc_fail_after(0); /* any allocation now fails: none may happen */
    assert_int_equal(mdsl_seg_read(io, f, 0, UINT32_MAX - 2490, 0, &got, &rec), -EBADMSG);
    assert_int_equal(mdsl_seg_read(io, f, 0, MDSL_HDR_SIZE + MDSL_MAX_PAYLOAD + 1, 0, &got,
                                   &rec), -EBADMSG);
    assert_int_equal(mdsl_seg_read(io, f, 0, 64u << 20, 0, &got, &rec), -EBADMSG);
    assert_int_equal(mdsl_seg_read(io, f, 1u << 30, 2u << 20, 0, &got, &rec), -EBADMSG);
    xt_alloc_fail_after(-1);
    mdsl_io_close(io, f);
    mdsl_io_destroy(io);
}

int main(void)
{
    xt_log_set_level(XT_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_mem),
        cmocka_unit_test(test_io_uring),
        cmocka_unit_test(test_io_fault),
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_names_entries),
        cmocka_unit_test(test_read_bad_len),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
