/*
 * test_mdsl_blob.c -- the MDSL's blob store (mdsl/mdsl_blob.c): put and get
 * round trips, replacement, removal of ranges and sets, a flipped byte in
 * a segment answering -EBADMSG, the index rebuilt by a reopen (also after
 * segments rolled and a torn tail), and the sticky failure after a failed
 * write (fault backend). Memory io; one case on real files (liburing).
 */
#include "mdsl_test_util.h"

#include "mdsl_blob.h"

static mdsl_blob *open_blob(mdsl_io *io, const char *dir, uint64_t seg_size)
{
    struct mdsl_blob_opts o = { .io = io, .dir = dir, .seg_size = seg_size };
    mdsl_blob *b = NULL;
    assert_int_equal(mdsl_blob_open(&o, &b), 0);
    return b;
}

/* Tract (fsid, set, t) holds the deterministic bytes of length len. */
static void expect(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t t, uint32_t len)
{
    void *d = NULL;
    uint32_t n = 0;
    assert_int_equal(mdsl_blob_get(b, fsid, set, t, &d, &n), 0);
    assert_int_equal(n, len);
    uint8_t *want = malloc(len ? len : 1);
    tu_fill(want, len, fsid, set, t + len);
    if (len)
        assert_memory_equal(d, want, len);
    free(want);
    xt_free(d);
}

static void put(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t t, uint32_t len)
{
    uint8_t *p = malloc(len ? len : 1);
    tu_fill(p, len, fsid, set, t + len);
    assert_int_equal(mdsl_blob_put(b, fsid, set, t, p, len), 0);
    free(p);
}

static void absent(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t t)
{
    void *d = (void *)1;
    uint32_t n = 7;
    assert_int_equal(mdsl_blob_get(b, fsid, set, t, &d, &n), -ENOENT);
    assert_null(d);
    assert_int_equal(n, 0);
}

static void test_put_get_remove_reopen(void **state)
{
    (void)state;
    mdsl_io *io;
    assert_int_equal(mdsl_io_mem_new(&io), 0);
    /* 1 MiB segments: the 300 KB tracts roll them several times */
    mdsl_blob *b = open_blob(io, "/blob", 1 << 20);
    for (uint32_t t = 0; t < 12; t++)
        put(b, 1, 0xabc, t, 300000 + t);
    put(b, 2, 0xabc, 0, 5);      /* another fs, same set id */
    put(b, 1, 0xdef, UINT32_MAX, 3); /* a set's map tract */
    put(b, 1, 0xabc, 3, 17);     /* replaces */
    put(b, 1, 0xabc, 20, 0);     /* empty tract */
    expect(b, 1, 0xabc, 3, 17);
    expect(b, 1, 0xabc, 4, 300004);
    expect(b, 1, 0xabc, 20, 0);
    expect(b, 2, 0xabc, 0, 5);
    absent(b, 1, 0xabc, 12);
    absent(b, 3, 0xabc, 0);
    assert_int_equal(mdsl_blob_remove(b, 1, 0xabc, 10, 12), 0); /* 10, 11 */
    assert_int_equal(mdsl_blob_remove(b, 1, 0x999, 0, 0), 0);   /* nothing there */
    absent(b, 1, 0xabc, 10);
    absent(b, 1, 0xabc, 11);
    expect(b, 1, 0xabc, 9, 300009);
    struct mdsl_blob_stat st;
    mdsl_blob_stat(b, &st);
    assert_true(st.segments >= 3);
    assert_int_equal(st.tracts, 12 - 2 + 1 + 1 + 1);
    assert_int_equal(st.failed, 0);
    mdsl_blob_close(b);

    /* The index after a reopen is the index before it (invariant (2)). */
    b = open_blob(io, "/blob", 1 << 20);
    struct mdsl_blob_stat st2;
    mdsl_blob_stat(b, &st2);
    assert_int_equal(st2.tracts, st.tracts);
    assert_int_equal(st2.live_bytes, st.live_bytes);
    assert_int_equal(st2.segments, st.segments);
    expect(b, 1, 0xabc, 3, 17);
    expect(b, 1, 0xabc, 0, 300000);
    expect(b, 1, 0xdef, UINT32_MAX, 3);
    absent(b, 1, 0xabc, 10);
    /* the whole set goes, the other fs's set of the same id stays */
    assert_int_equal(mdsl_blob_remove(b, 1, 0xabc, 0, 0), 0);
    for (uint32_t t = 0; t < 21; t++)
        absent(b, 1, 0xabc, t);
    expect(b, 2, 0xabc, 0, 5);
    put(b, 1, 0xabc, 2, 9);      /* writes after the removal stay */
    mdsl_blob_close(b);
    b = open_blob(io, "/blob", 1 << 20);
    absent(b, 1, 0xabc, 0);
    expect(b, 1, 0xabc, 2, 9);
    expect(b, 2, 0xabc, 0, 5);
    mdsl_blob_close(b);
    mdsl_io_destroy(io);
}

/* Finds the payload of the tract of length len in segment 0 and flips a byte. */
static void flip_in_segment(mdsl_io *io, const char *seg, uint64_t off)
{
    mdsl_file *f;
    assert_int_equal(mdsl_io_open(io, seg, false, &f), 0);
    uint8_t c;
    assert_int_equal(mdsl_io_pread_full(io, f, off, &c, 1), 0);
    c ^= 0x40;
    struct mdsl_io_wr w = { f, off, &c, 1 };
    assert_int_equal(mdsl_io_write(io, &w, 1, &f, 1, NULL), 0);
    mdsl_io_close(io, f);
}

static void test_checksum_mismatch(void **state)
{
    (void)state;
    mdsl_io *io;
    assert_int_equal(mdsl_io_mem_new(&io), 0);
    mdsl_blob *b = open_blob(io, "/blob", 0);
    put(b, 1, 7, 0, 1000);
    put(b, 1, 7, 1, 1000);
    /* tract 1's payload: after record 0 (header + 1000) and its header */
    flip_in_segment(io, "/blob/bseg-00000000",
                    2 * MDSL_BLOB_HDR_SIZE + 1000 + 500);
    void *d = NULL;
    uint32_t n = 0;
    assert_int_equal(mdsl_blob_get(b, 1, 7, 1, &d, &n), -EBADMSG);
    assert_null(d);
    expect(b, 1, 7, 0, 1000);
    /* a put of the tract replaces the damaged bytes */
    put(b, 1, 7, 1, 1000);
    expect(b, 1, 7, 1, 1000);
    mdsl_blob_close(b);
    mdsl_io_destroy(io);
}

static void test_torn_tail(void **state)
{
    (void)state;
    mdsl_io *io;
    assert_int_equal(mdsl_io_mem_new(&io), 0);
    mdsl_blob *b = open_blob(io, "/blob", 0);
    put(b, 1, 7, 0, 1000);
    put(b, 1, 7, 1, 1000);
    mdsl_blob_close(b);
    /* a put cut short by a crash: half a record at the end */
    mdsl_file *f;
    assert_int_equal(mdsl_io_open(io, "/blob/bseg-00000000", false, &f), 0);
    uint64_t size;
    assert_int_equal(mdsl_io_size(io, f, &size), 0);
    assert_int_equal(mdsl_io_truncate(io, f, size - 400), 0);
    mdsl_io_close(io, f);
    b = open_blob(io, "/blob", 0);
    expect(b, 1, 7, 0, 1000);
    absent(b, 1, 7, 1);
    put(b, 1, 7, 2, 10); /* appends after the cut */
    mdsl_blob_close(b);
    b = open_blob(io, "/blob", 0);
    expect(b, 1, 7, 0, 1000);
    expect(b, 1, 7, 2, 10);
    mdsl_blob_close(b);
    mdsl_io_destroy(io);
}

static void test_sticky_failure(void **state)
{
    (void)state;
    mdsl_io *mem, *io;
    assert_int_equal(mdsl_io_mem_new(&mem), 0);
    assert_int_equal(mdsl_io_fault_new(mem, 1, &io), 0);
    mdsl_blob *b = open_blob(io, "/blob", 0);
    put(b, 1, 7, 0, 100);
    mdsl_io_fault_countdown(io, 0, -EIO, false);
    uint8_t x[10] = { 0 };
    assert_int_equal(mdsl_blob_put(b, 1, 7, 1, x, sizeof x), -EIO);
    /* invariant (4): the store takes no more writes, reads go on */
    assert_int_equal(mdsl_blob_put(b, 1, 7, 2, x, sizeof x), -EIO);
    assert_int_equal(mdsl_blob_remove(b, 1, 7, 0, 0), -EIO);
    expect(b, 1, 7, 0, 100);
    absent(b, 1, 7, 1);
    struct mdsl_blob_stat st;
    mdsl_blob_stat(b, &st);
    assert_int_equal(st.failed, -EIO);
    mdsl_blob_close(b);
    mdsl_io_destroy(io);
    mdsl_io_destroy(mem);
}

static void test_uring_files(void **state)
{
    (void)state;
    char tmp[] = "/tmp/mdsl_blob_test.XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char dir[64];
    snprintf(dir, sizeof dir, "%s/blob", tmp);
    mdsl_io *io;
    assert_int_equal(mdsl_io_uring_new(0, &io), 0);
    mdsl_blob *b = open_blob(io, dir, 0);
    put(b, 5, 1, 0, 4u << 20);
    put(b, 5, 1, 1, 3000000 - (4u << 20) + (4u << 20) / 2);
    mdsl_blob_close(b);
    b = open_blob(io, dir, 0);
    expect(b, 5, 1, 0, 4u << 20);
    expect(b, 5, 1, 1, 3000000 - (4u << 20) + (4u << 20) / 2);
    mdsl_blob_close(b);
    mdsl_io_uring_thread_exit();
    mdsl_io_destroy(io);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_remove_reopen),
        cmocka_unit_test(test_checksum_mismatch),
        cmocka_unit_test(test_torn_tail),
        cmocka_unit_test(test_sticky_failure),
        cmocka_unit_test(test_uring_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
