/*
 * test_mdsl_blob.c -- the MDSL's blob store (mdsl/mdsl_blob.c): put and get
 * round trips, replacement, removal of ranges and sets, a flipped byte in
 * a segment answering -EBADMSG, the index rebuilt by a reopen (also after
 * segments rolled and a torn tail), and the sticky failure after a failed
 * write (fault backend), and the listing for reclaim: every set of an fs
 * once over pages, its tract count and bytes, its age (put, touch, reopen).
 * GC of blob segments: writes, replacements and removals (a removal in a
 * later segment than the puts it removes, a tract put again after its
 * removal), a pass, a reopen, every live tract's bytes checked each time;
 * a crash at every I/O of a pass (fault io, power loss) and by SIGKILL at
 * the crash points after the copy and after the rename (real files).
 * Memory io but for the real-file cases (liburing).
 */
#include "mdsl_test_util.h"

#include "mdsl_blob.h"
#include "xt_time.h"

#include "xt_crash.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>

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

/* Every set of fsid over pages of `max`, into v (sorted by set id). */
static size_t list_all(mdsl_blob *b, uint32_t fsid, uint32_t max, struct xt_tract_set *v,
                       size_t cap)
{
    size_t n = 0;
    uint64_t cookie = 0;
    for (int pages = 0;; pages++) {
        assert_true(pages < 10000);
        struct xt_tract_list l;
        assert_int_equal(mdsl_blob_list(b, fsid, cookie, max, &l), 0);
        assert_true(n + l.n <= cap);
        if (l.n) /* (l.sets may be NULL then) */
            memcpy(v + n, l.sets, l.n * sizeof *l.sets);
        n += l.n;
        xt_free(l.sets);
        if (l.end)
            break;
        cookie = l.cookie;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort: a few hundred */
        for (size_t j = i; j > 0 && v[j - 1].set > v[j].set; j--) {
            struct xt_tract_set t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n;
}

/* mdsl_blob_keys walks every tract once, whatever the page size. */
static void test_keys(void **state)
{
    (void)state;
    mdsl_io *io;
    assert_int_equal(mdsl_io_mem_new(&io), 0);
    mdsl_blob *b = open_blob(io, "/blob", 0);
    for (uint64_t s = 1; s <= 100; s++)
        for (uint32_t t = 0; t <= s % 4; t++)
            put(b, (uint32_t)(s % 2 + 1), s, t == 3 ? UINT32_MAX : t, 10 + t);
    assert_int_equal(mdsl_blob_remove(b, 1, 2, 0, 0), 0); /* gone whole */
    size_t want = 0;
    for (uint64_t s = 1; s <= 100; s++)
        want += s == 2 ? 0 : s % 4 + 1;
    for (size_t max = 1; max <= 4096; max *= 8) {
        uint8_t seen[101][5];
        memset(seen, 0, sizeof seen);
        size_t total = 0;
        uint32_t cookie = 0;
        int rc;
        do {
            struct mdsl_blob_key *k;
            size_t n;
            rc = mdsl_blob_keys(b, &cookie, max, &k, &n);
            assert_true(rc == 0 || rc == 1);
            for (size_t i = 0; i < n; i++) {
                assert_true(k[i].set >= 1 && k[i].set <= 100);
                assert_int_equal(k[i].fsid, k[i].set % 2 + 1);
                uint32_t t = k[i].tract == UINT32_MAX ? 3 : k[i].tract;
                assert_true(t <= k[i].set % 4);
                assert_int_equal(k[i].len, 10 + t);
                assert_int_equal(seen[k[i].set][t]++, 0);
            }
            total += n;
            xt_free(k);
        } while (rc == 1);
        assert_int_equal(total, want);
    }
    struct mdsl_blob_key *k;
    size_t n;
    uint32_t cookie = 0;
    assert_int_equal(mdsl_blob_keys(b, &cookie, 0, &k, &n), -EINVAL);
    cookie = UINT32_MAX;
    assert_int_equal(mdsl_blob_keys(b, &cookie, 5, &k, &n), -EINVAL);
    mdsl_blob_close(b);
    mdsl_io_destroy(io);
}

static void test_list_touch(void **state)
{
    (void)state;
    mdsl_io *io;
    assert_int_equal(mdsl_io_mem_new(&io), 0);
    mdsl_blob *b = open_blob(io, "/blob", 0);
    int64_t t0 = (int64_t)xt_now_ns();
    /* 300 sets of fs 1 (set s: s % 3 + 1 tracts of 10 + t bytes), 5 of fs 2 */
    for (uint64_t s = 1; s <= 300; s++)
        for (uint32_t t = 0; t <= s % 3; t++)
            put(b, 1, s * 1000, t, 10 + t);
    for (uint64_t s = 1; s <= 5; s++)
        put(b, 2, s, UINT32_MAX, 4);
    assert_int_equal(mdsl_blob_remove(b, 1, 300 * 1000, 0, 0), 0); /* gone whole */
    assert_int_equal(mdsl_blob_remove(b, 1, 299 * 1000, 1, 0), 0); /* 2 of 3 gone */
    int64_t t1 = (int64_t)xt_now_ns();
    struct xt_tract_set *v = calloc(400, sizeof *v);
    assert_non_null(v);
    for (uint32_t max = 1; max <= 1000; max *= 7) {
        size_t n = list_all(b, 1, max, v, 400);
        assert_int_equal(n, 299); /* each once, whatever the page size */
        for (size_t i = 0; i < n; i++) {
            uint64_t s = i + 1;
            uint64_t nt = s == 299 ? 1 : s % 3 + 1;
            assert_int_equal(v[i].set, s * 1000);
            assert_int_equal(v[i].tracts, nt);
            assert_int_equal(v[i].bytes, nt * 10 + nt * (nt - 1) / 2);
            assert_true(v[i].mtime_ns >= t0 && v[i].mtime_ns <= t1);
        }
    }
    assert_int_equal(list_all(b, 2, 2, v, 400), 5);
    assert_int_equal(list_all(b, 3, 2, v, 400), 0);
    struct xt_tract_list l;
    assert_int_equal(mdsl_blob_list(b, 1, 0, 0, &l), -EINVAL);
    assert_int_equal(mdsl_blob_list(b, 1, UINT64_MAX, 5, &l), -EINVAL);

    /* stat of one set; touch makes it younger, and only it */
    struct xt_tract_set st;
    assert_int_equal(mdsl_blob_set_stat(b, 1, 2000, &st), 0);
    assert_int_equal(st.tracts, 3);
    assert_int_equal(st.bytes, 33);
    assert_int_equal(mdsl_blob_set_stat(b, 1, 300 * 1000, &st), -ENOENT);
    assert_int_equal(mdsl_blob_set_stat(b, 2, 2000, &st), -ENOENT);
    struct timespec ms = { 0, 2000000 };
    nanosleep(&ms, NULL);
    int64_t t2 = (int64_t)xt_now_ns();
    assert_int_equal(mdsl_blob_touch(b, 1, 2000), 0);
    assert_int_equal(mdsl_blob_touch(b, 1, 777), 0); /* none: nothing made */
    assert_int_equal(mdsl_blob_set_stat(b, 1, 777, &st), -ENOENT);
    assert_int_equal(mdsl_blob_set_stat(b, 1, 2000, &st), 0);
    assert_true(st.mtime_ns >= t2);
    assert_int_equal(mdsl_blob_set_stat(b, 1, 1000, &st), 0);
    assert_true(st.mtime_ns <= t1);

    /* a reopen: the same sets, each as young as the open */
    mdsl_blob_close(b);
    int64_t t3 = (int64_t)xt_now_ns();
    b = open_blob(io, "/blob", 0);
    assert_int_equal(list_all(b, 1, 64, v, 400), 299);
    for (size_t i = 0; i < 299; i++)
        assert_true(v[i].mtime_ns >= t3);
    assert_int_equal(v[298].set, 299 * 1000);
    assert_int_equal(v[298].tracts, 1);
    free(v);
    mdsl_blob_close(b);
    mdsl_io_destroy(io);
}

/* The GC cases' model: tract t of set s of fs 1 (s < 4, t < 40) holds
 * len[s][t] bytes (0: absent; an empty tract is not used). */
struct gc_model { uint32_t len[4][40]; };

static void gc_put(mdsl_blob *b, struct gc_model *m, uint64_t s, uint32_t t, uint32_t len)
{
    put(b, 1, s, t, len);
    m->len[s][t] = len;
}

static void gc_remove(mdsl_blob *b, struct gc_model *m, uint64_t s, uint32_t first, uint32_t end)
{
    assert_int_equal(mdsl_blob_remove(b, 1, s, first, end), 0);
    for (uint32_t t = first; t < (end ? end : 40); t++)
        m->len[s][t] = 0;
}

static void gc_check(mdsl_blob *b, const struct gc_model *m)
{
    for (uint64_t s = 0; s < 4; s++)
        for (uint32_t t = 0; t < 40; t++) {
            if (m->len[s][t])
                expect(b, 1, s, t, m->len[s][t]);
            else
                absent(b, 1, s, t);
        }
}

/* Segments of 1 MiB (100,040 bytes a record of set 0, 1): segment 0 keeps
 * set 0's eight tracts live, so it is never due, and holds set 1's tracts 0
 * and 1 and set 2's first puts, which removal records in later segments
 * (3: set 1's 0..19, 4: set 2) remove: when GC rewrites those segments the
 * removals must stay, before set 2's tract 0 put again after its removal.
 * Segments 1 and 2 end all dead, 3 and 4 under half live. */
static void gc_fill(mdsl_blob *b, struct gc_model *m)
{
    memset(m, 0, sizeof *m);
    for (uint32_t t = 0; t < 8; t++)
        gc_put(b, m, 0, t, 100000);
    gc_put(b, m, 2, 0, 5000);
    gc_put(b, m, 2, 1, 6000);
    for (uint32_t t = 0; t < 30; t++)
        gc_put(b, m, 1, t, 100000 + t);
    gc_remove(b, m, 1, 0, 20);
    for (uint32_t t = 20; t < 25; t++)
        gc_put(b, m, 1, t, 50000 + t);
    gc_remove(b, m, 2, 0, 0);
    gc_put(b, m, 2, 0, 7000);
    for (uint32_t t = 0; t < 8; t++)
        gc_put(b, m, 3, t, 300000 + t);
    gc_put(b, m, 3, 0, 10);
    gc_remove(b, m, 1, 20, 27);
    gc_remove(b, m, 3, 1, 2);
}

static mdsl_blob *open_gc(mdsl_io *io, const char *dir)
{
    struct mdsl_blob_opts o = { .io = io, .dir = dir, .seg_size = 1 << 20 };
    mdsl_blob *b = NULL;
    assert_int_equal(mdsl_blob_open(&o, &b), 0);
    return b;
}

static void test_gc(void **state)
{
    (void)state;
    mdsl_io *io;
    assert_int_equal(mdsl_io_mem_new(&io), 0);
    mdsl_blob *b = open_gc(io, "/blob");
    struct gc_model m;
    gc_fill(b, &m);
    struct mdsl_blob_stat st0, st1;
    mdsl_blob_stat(b, &st0);
    assert_true(st0.segments >= 5);
    assert_true(st0.dead_bytes > 2000000);
    int n = mdsl_blob_gc(b);
    assert_int_equal(n, 4); /* segments 1 to 4 */
    mdsl_blob_stat(b, &st1);
    assert_int_equal(st1.gc_segments, (uint64_t)n);
    assert_true(st1.gc_bytes > 2000000);
    assert_int_equal(st1.bytes, st0.bytes - st1.gc_bytes);
    assert_int_equal(st1.live_bytes, st0.live_bytes);
    assert_int_equal(st1.tracts, st0.tracts);
    assert_true(st1.dead_bytes < st0.dead_bytes);
    gc_check(b, &m);
    assert_int_equal(mdsl_blob_gc(b), 0); /* nothing due any more */
    /* writes after GC, a reopen: the same index */
    gc_put(b, &m, 1, 39, 1234);
    gc_remove(b, &m, 1, 25, 27);
    mdsl_blob_close(b);
    b = open_gc(io, "/blob");
    gc_check(b, &m);
    struct mdsl_blob_stat st2;
    mdsl_blob_stat(b, &st2);
    assert_int_equal(st2.bytes, st1.bytes + 2 * MDSL_BLOB_HDR_SIZE + 1234);
    mdsl_blob_close(b);
    mdsl_io_destroy(io);
}

/* A crash at the n-th I/O of a pass, for every n: the I/O fails (sticky),
 * the power goes (unsynced writes lost or torn), the store reopens with
 * every tract as before. */
static void test_gc_crash_every_io(void **state)
{
    (void)state;
    bool finished = false;
    for (long n = 0; !finished; n++) {
        assert_true(n < 100000);
        mdsl_io *mem, *io;
        assert_int_equal(mdsl_io_mem_new(&mem), 0);
        assert_int_equal(mdsl_io_fault_new(mem, (uint64_t)n + 1, &io), 0);
        mdsl_io_fault_powerloss(io, true);
        mdsl_blob *b = open_gc(io, "/blob");
        struct gc_model m;
        gc_fill(b, &m);
        mdsl_io_fault_countdown(io, n, -EIO, true);
        int rc = mdsl_blob_gc(b);
        finished = rc > 0;
        assert_true(rc == -EIO || rc > 0);
        mdsl_io_fault_crash(io);
        mdsl_io_fault_reset(io);
        mdsl_blob_close(b);
        b = open_gc(io, "/blob");
        gc_check(b, &m);
        mdsl_blob_close(b);
        mdsl_io_destroy(io);
        mdsl_io_destroy(mem);
    }
}

/* SIGKILL at a crash point of GC in a child, on real files; the parent
 * reopens the store and finds every tract. */
static void gc_killed_at(const char *point)
{
    char tmp[] = "/tmp/mdsl_blob_gc.XXXXXX";
    assert_non_null(mkdtemp(tmp));
    char dir[64];
    snprintf(dir, sizeof dir, "%s/blob", tmp);
    mdsl_io *io;
    assert_int_equal(mdsl_io_uring_new(0, &io), 0);
    mdsl_blob *b = open_gc(io, dir);
    struct gc_model m;
    gc_fill(b, &m);
    mdsl_blob_close(b);
    /* The thread's ring would be shared with the child: none across fork. */
    mdsl_io_uring_thread_exit();
    mdsl_io_destroy(io);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        mdsl_io *cio;
        if (mdsl_io_uring_new(0, &cio) < 0 || xt_crash_arm(point) < 0)
            _exit(2);
        struct mdsl_blob_opts o = { .io = cio, .dir = dir, .seg_size = 1 << 20 };
        mdsl_blob *cb = NULL;
        if (mdsl_blob_open(&o, &cb) < 0)
            _exit(3);
        mdsl_blob_gc(cb);
        _exit(4); /* the point was not passed */
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    assert_int_equal(mdsl_io_uring_new(0, &io), 0);
    b = open_gc(io, dir);
    gc_check(b, &m);
    struct mdsl_blob_stat st;
    mdsl_blob_stat(b, &st);
    assert_int_equal(st.gc_segments, 0);
    assert_true(mdsl_blob_gc(b) >= 1); /* what the child left undone */
    gc_check(b, &m);
    mdsl_blob_close(b);
    b = open_gc(io, dir);
    gc_check(b, &m);
    mdsl_blob_close(b);
    mdsl_io_uring_thread_exit();
    mdsl_io_destroy(io);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "test ! -e %s/bseg-00000000.gc && rm -rf %s", dir, tmp);
    assert_int_equal(system(cmd), 0);
}

static void test_gc_killed(void **state)
{
    (void)state;
    gc_killed_at("mdsl.blob_gc.copied");
    gc_killed_at("mdsl.blob_gc.renamed");
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
        cmocka_unit_test(test_list_touch),
        cmocka_unit_test(test_keys),
        cmocka_unit_test(test_gc),
        cmocka_unit_test(test_gc_crash_every_io),
        cmocka_unit_test(test_gc_killed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
