/*
 * test_mdsl_gc.c -- garbage collection racing the writers of the MDSL store.
 *
 * test_gc_vs_prepare_in_flight: a GC pass picks its candidate without the
 * writer token. A prepare in flight (token held, its write batch not yet
 * durable) has already registered the segments it rolled past, but its
 * transaction is not pending yet, so such a segment looks empty, closed and
 * unpinned. The pass must not delete it once the prepare is over: the
 * transaction's commit points the index into it. (This lost slices of
 * pom-mds's large commits at SIGTERM: "records keep moving under GC".)
 *
 * The race is made deterministic by an io wrapper that holds the first big
 * write batch until the test has seen the GC pass pick its candidate.
 */
#include "mdsl_test_util.h"

#include <pthread.h>

/* ---- an io wrapper that can hold one write batch ------------------------ */

struct hold_io {
    struct mdsl_io base;
    mdsl_io *in;            /* borrowed */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t hold_min;        /* hold the next batch of >= this many bytes; 0 = off (mu) */
    bool holding, release;  /* (mu) */
};

static int h_open(mdsl_io *io, const char *path, bool create, mdsl_file **out)
{ return mdsl_io_open(((struct hold_io *)io)->in, path, create, out); }
static void h_close(mdsl_io *io, mdsl_file *f)
{ mdsl_io_close(((struct hold_io *)io)->in, f); }
static long h_read(mdsl_io *io, mdsl_file *f, uint64_t off, void *buf, size_t len)
{ return mdsl_io_read(((struct hold_io *)io)->in, f, off, buf, len); }
static int h_sync(mdsl_io *io, mdsl_file *f)
{ return mdsl_io_sync(((struct hold_io *)io)->in, f); }
static int h_truncate(mdsl_io *io, mdsl_file *f, uint64_t size)
{ return mdsl_io_truncate(((struct hold_io *)io)->in, f, size); }
static int h_size(mdsl_io *io, mdsl_file *f, uint64_t *out)
{ return mdsl_io_size(((struct hold_io *)io)->in, f, out); }
static int h_unlink(mdsl_io *io, const char *path)
{ return mdsl_io_unlink(((struct hold_io *)io)->in, path); }
static int h_mkdir(mdsl_io *io, const char *path)
{ return mdsl_io_mkdir(((struct hold_io *)io)->in, path); }
static int h_rename(mdsl_io *io, const char *from, const char *to)
{ return mdsl_io_rename(((struct hold_io *)io)->in, from, to); }
static int h_rmdir(mdsl_io *io, const char *path)
{ return mdsl_io_rmdir(((struct hold_io *)io)->in, path); }
static int h_list(mdsl_io *io, const char *dir, mdsl_io_list_cb cb, void *arg)
{ return mdsl_io_list(((struct hold_io *)io)->in, dir, cb, arg); }
static void h_destroy(mdsl_io *io) { (void)io; }

static int h_write(mdsl_io *io, const struct mdsl_io_wr *w, size_t n, mdsl_file *const *sync,
                   size_t nsync, bool *sync_failed)
{
    struct hold_io *h = (struct hold_io *)io;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += w[i].len;
    pthread_mutex_lock(&h->mu);
    if (h->hold_min && total >= h->hold_min) {
        h->hold_min = 0;
        h->holding = true;
        pthread_cond_broadcast(&h->cv);
        while (!h->release)
            pthread_cond_wait(&h->cv, &h->mu);
        h->holding = false;
    }
    pthread_mutex_unlock(&h->mu);
    bool sf = false;
    int rc = mdsl_io_write(h->in, w, n, sync, nsync, &sf);
    *sync_failed = sf;
    return rc;
}

static const struct mdsl_io_ops hold_ops = {
    .name = "hold", .open = h_open, .close = h_close, .write = h_write, .read = h_read,
    .sync = h_sync, .truncate = h_truncate, .size = h_size, .unlink = h_unlink,
    .mkdir = h_mkdir, .rename = h_rename, .rmdir = h_rmdir, .list = h_list,
    .destroy = h_destroy,
};

/* ---- threads ------------------------------------------------------------ */

struct prep_arg {
    mdsl_store *s;
    uint64_t txid;
    const struct xt_store_rec *r;
    size_t n;
    int rc;
};

static void *prep_main(void *arg)
{
    struct prep_arg *a = arg;
    a->rc = mdsl_store_prepare(a->s, a->txid, a->r, a->n);
    return NULL;
}

struct gc_arg {
    mdsl_store *s;
    int rc;
};

static void *gc_main(void *arg)
{
    struct gc_arg *a = arg;
    a->rc = mdsl_store_gc(a->s, 1);
    return NULL;
}

/* ---- the test ----------------------------------------------------------- */

#define SEG_SIZE (64u << 10)
#define NSLICE 12
#define REC_LEN 20000u /* three records a segment: the prepare rolls several */

static uint8_t bufs[NSLICE][REC_LEN];

static void mk_recs(struct xt_store_rec *r, uint64_t version)
{
    for (uint32_t i = 0; i < NSLICE; i++) {
        r[i] = (struct xt_store_rec){ .type = XT_STORE_IMAGE, .id = { .fsid = 1, .slice = i, .table = 77 },
                                  .version = version, .data = bufs[i], .len = REC_LEN };
        tu_fill(bufs[i], REC_LEN, r[i].id.table * 31 + i, version, r[i].type);
    }
}

static void test_gc_vs_prepare_in_flight(void **state)
{
    (void)state;
    struct tu_env e;
    tu_env_init(&e, 1, SEG_SIZE);
    struct hold_io h = { .base = { &hold_ops }, .in = e.fault };
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    e.o.io = &h.base;
    e.o.gc_threshold = 0.25;
    assert_int_equal(tu_open(&e), 0);

    struct tu_model *m = calloc(1, sizeof *m);
    assert_non_null(m);
    struct xt_store_rec r[NSLICE];

    /* Version 1 of every slice: committed normally (segments 1-4). */
    mk_recs(r, 1);
    assert_int_equal(mdsl_store_prepare(e.s, 1, r, NSLICE), 0);
    assert_int_equal(mdsl_store_commit(e.s, 1), 0);
    tu_model_add(m, r, NSLICE);

    /* Version 2: the prepare is held in its write while a GC pass picks. */
    mk_recs(r, 2);
    pthread_mutex_lock(&h.mu);
    h.hold_min = REC_LEN * 2;
    pthread_mutex_unlock(&h.mu);
    struct prep_arg pa = { e.s, 2, r, NSLICE, -1 };
    pthread_t pt, gt;
    assert_int_equal(pthread_create(&pt, NULL, prep_main, &pa), 0);
    pthread_mutex_lock(&h.mu);
    while (!h.holding)
        pthread_cond_wait(&h.cv, &h.mu);
    pthread_mutex_unlock(&h.mu);

    struct mdsl_stat st0, st;
    assert_int_equal(mdsl_store_stat(e.s, &st0), 0);
    struct gc_arg ga = { e.s, -1 };
    assert_int_equal(pthread_create(&gt, NULL, gc_main, &ga), 0);
    /* wait until the pass picked (it then waits for the token) */
    for (int i = 0; i < 5000; i++) {
        assert_int_equal(mdsl_store_stat(e.s, &st), 0);
        if (st.gc_passes > st0.gc_passes)
            break;
        usleep(1000);
    }
    assert_true(st.gc_passes > st0.gc_passes); /* a rolled, still empty segment */

    pthread_mutex_lock(&h.mu);
    h.release = true;
    pthread_cond_broadcast(&h.cv);
    pthread_mutex_unlock(&h.mu);
    pthread_join(pt, NULL);
    pthread_join(gt, NULL);
    assert_int_equal(pa.rc, 0);
    assert_true(ga.rc >= 0);

    assert_int_equal(mdsl_store_commit(e.s, 2), 0);
    tu_model_add(m, r, NSLICE);
    for (uint32_t i = 0; i < NSLICE; i++)
        tu_check_slice(e.s, 1, m, 77, i);

    /* Now GC may collect the segments of version 1; everything stays. */
    assert_true(mdsl_store_gc(e.s, 100) >= 0);
    for (uint32_t i = 0; i < NSLICE; i++)
        tu_check_slice(e.s, 1, m, 77, i);
    /* and after a restart */
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    for (uint32_t i = 0; i < NSLICE; i++)
        tu_check_slice(e.s, 1, m, 77, i);

    free(m);
    tu_env_free(&e);
    pthread_mutex_destroy(&h.mu);
    pthread_cond_destroy(&h.cv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gc_vs_prepare_in_flight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
