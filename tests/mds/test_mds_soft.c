/*
 * test_mds_soft.c -- the shown RMU deltas (mds/mds_soft.h): sums per row,
 * a delivery takes out exactly its ids' deltas in either order and
 * either twice, expiry after the ttl, the view
 * of an encoded row (counted rows only, signed below 2, same version),
 * and many threads adding and taking at once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mds_soft.h"
#include "xt_common.h"
#include "xt_row.h"

/* Takes the ids given (terminated by 0) out of row (1, 7, name). */
static void take(mds_soft *s, const char *name, ...)
{
    uint8_t buf[8 * 16];
    size_t n = 0;
    va_list ap;
    va_start(ap, name);
    for (uint64_t id; (id = va_arg(ap, uint64_t)) != 0 && n < 16; n++)
        xt_put_u64(buf + 8 * n, id);
    va_end(ap);
    assert_int_equal(mds_soft_take(s, 1, 7, name, strlen(name), buf, n), 0);
}

static void test_sum_and_take(void **state)
{
    (void)state;
    mds_soft *s;
    assert_int_equal(mds_soft_new(60000, &s), 0);
    assert_int_equal(mds_soft_get(s, 1, 7, "a", 1), 0);
    assert_int_equal(mds_soft_add(s, 1, 7, "a", 1, 0, 1), -EINVAL); /* ids are never 0 */
    assert_int_equal(mds_soft_add(s, 1, 7, "a", 1, 1, 1), 0);
    assert_int_equal(mds_soft_add(s, 1, 7, "a", 1, 2, 1), 0);
    assert_int_equal(mds_soft_add(s, 1, 7, "a", 1, 3, -1), 0);
    assert_int_equal(mds_soft_add(s, 1, 7, "b", 1, 4, 5), 0);
    assert_int_equal(mds_soft_add(s, 2, 7, "a", 1, 5, 3), 0); /* other fs */
    assert_int_equal(mds_soft_add(s, 1, 8, "a", 1, 6, 4), 0); /* other table */
    assert_int_equal(mds_soft_get(s, 1, 7, "a", 1), 1);
    assert_int_equal(mds_soft_get(s, 1, 7, "b", 1), 5);
    assert_int_equal(mds_soft_get(s, 2, 7, "a", 1), 3);
    assert_int_equal(mds_soft_get(s, 1, 8, "a", 1), 4);
    assert_int_equal(mds_soft_count(s), 4);
    /* A delivery takes out exactly its ids' deltas (invariant 2). */
    take(s, "a", (uint64_t)1, (uint64_t)3, (uint64_t)0);
    assert_int_equal(mds_soft_get(s, 1, 7, "a", 1), 1);
    /* An eager half sent twice (a forward retried) is shown once. */
    assert_int_equal(mds_soft_add(s, 1, 7, "a", 1, 2, 1), 0);
    assert_int_equal(mds_soft_get(s, 1, 7, "a", 1), 1);
    take(s, "a", (uint64_t)2, (uint64_t)0);
    assert_int_equal(mds_soft_get(s, 1, 7, "a", 1), 0);
    assert_int_equal(mds_soft_count(s), 3);
    mds_soft_free(s);
}

/* The delivery first, its eager half after (a sender slowed between the
 * two, or a forward delayed), and a delivery prepared twice (its first
 * transaction aborted): nothing is ever shown on top of the stored count.
 * With sums alone, the first case showed the rmdirs' -10 twice and the
 * second showed +10 that no entry owes. */
static void test_any_order(void **state)
{
    (void)state;
    mds_soft *s;
    assert_int_equal(mds_soft_new(60000, &s), 0);
    take(s, "p", (uint64_t)11, (uint64_t)12, (uint64_t)0); /* delivered, not yet shown */
    assert_int_equal(mds_soft_get(s, 1, 7, "p", 1), 0);
    assert_int_equal(mds_soft_add(s, 1, 7, "p", 1, 11, -1), 0);
    assert_int_equal(mds_soft_add(s, 1, 7, "p", 1, 12, -1), 0);
    assert_int_equal(mds_soft_get(s, 1, 7, "p", 1), 0);
    assert_int_equal(mds_soft_count(s), 0); /* tombstones met their adds */
    /* Shown, taken twice, then a new delta: only the new one shows. */
    assert_int_equal(mds_soft_add(s, 1, 7, "p", 1, 13, -1), 0);
    take(s, "p", (uint64_t)13, (uint64_t)0);
    take(s, "p", (uint64_t)13, (uint64_t)0);
    assert_int_equal(mds_soft_add(s, 1, 7, "p", 1, 14, 1), 0);
    assert_int_equal(mds_soft_get(s, 1, 7, "p", 1), 1);
    /* The ids group of a count op. */
    xt_row r;
    xt_row_init(&r);
    const uint8_t *ids;
    size_t n;
    assert_int_equal(mds_soft_ids(&r, &ids, &n), -ENOENT);
    uint8_t two[16];
    xt_put_u64(two, 11);
    xt_put_u64(two + 8, 12);
    assert_int_equal(xt_row_view_set_group(&r, XT_CG_RMU_IDS, two, 16), 0);
    assert_int_equal(mds_soft_ids(&r, &ids, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(xt_get_u64(ids + 8), 12);
    assert_int_equal(xt_row_view_set_group(&r, XT_CG_RMU_IDS, two, 12), 0);
    assert_int_equal(mds_soft_ids(&r, &ids, &n), -EBADMSG);
    mds_soft_free(s);
}

static void test_expiry(void **state)
{
    (void)state;
    mds_soft *s;
    assert_int_equal(mds_soft_new(50, &s), 0);
    assert_int_equal(mds_soft_add(s, 1, 7, "a", 1, 1, 1), 0);
    assert_int_equal(mds_soft_get(s, 1, 7, "a", 1), 1);
    struct timespec ts = { 0, 80 * 1000000L };
    nanosleep(&ts, NULL);
    /* Past the ttl since the last eager delta: never shown again. */
    assert_int_equal(mds_soft_get(s, 1, 7, "a", 1), 0);
    assert_int_equal(mds_soft_count(s), 0);
    /* Each delta on its own: a parent kept busy forgets the old ones. */
    assert_int_equal(mds_soft_add(s, 1, 7, "a", 1, 2, 1), 0);
    take(s, "a", (uint64_t)3, (uint64_t)0); /* a tombstone */
    nanosleep(&ts, NULL);
    assert_int_equal(mds_soft_add(s, 1, 7, "a", 1, 4, 1), 0);
    assert_int_equal(mds_soft_get(s, 1, 7, "a", 1), 1);
    assert_int_equal(mds_soft_add(s, 1, 7, "a", 1, 3, 1), 0); /* its tombstone expired */
    assert_int_equal(mds_soft_get(s, 1, 7, "a", 1), 2);
    mds_soft_free(s);
}

static void encode_dir(uint32_t nlink, uint64_t version, uint8_t **out, size_t *len)
{
    xt_row v;
    xt_row_init(&v);
    v.attr.type = XT_ROW_DIR;
    v.attr.uuid = 42;
    v.attr.nlink = nlink;
    v.attr.version = version;
    v.name = (const uint8_t *)"d";
    v.name_len = 1;
    assert_int_equal(xt_row_encode_alloc(&v, out, len), 0);
}

static uint32_t nlink_of(const uint8_t *row, size_t len, uint64_t *version)
{
    xt_row v;
    assert_int_equal(xt_row_decode_meta(row, len, &v), 0);
    *version = v.attr.version;
    return v.attr.nlink;
}

static void test_show(void **state)
{
    (void)state;
    mds_soft *s;
    assert_int_equal(mds_soft_new(60000, &s), 0);
    uint8_t *row;
    size_t len;
    uint64_t ver;
    encode_dir(5, 9, &row, &len);
    /* Nothing shown: the row as it is (same buffer). */
    uint8_t *same = row;
    assert_int_equal(mds_soft_show(s, 1, 7, "d", 1, &row, &len), 0);
    assert_ptr_equal(row, same);
    assert_int_equal(mds_soft_add(s, 1, 7, "d", 1, 1, 2), 0);
    assert_int_equal(mds_soft_show(s, 1, 7, "d", 1, &row, &len), 0);
    assert_int_equal(nlink_of(row, len, &ver), 7);
    assert_int_equal(ver, 9); /* a view: the version is the row's */
    xt_free(row);
    /* Below 2 (deltas out of order): kept signed, as NLINK_ADD would
     * store it, and shown as 2. */
    encode_dir(3, 1, &row, &len);
    assert_int_equal(mds_soft_add(s, 1, 7, "d", 1, 2, -6), 0); /* shown: -4 */
    assert_int_equal(mds_soft_show(s, 1, 7, "d", 1, &row, &len), 0);
    xt_row v;
    assert_int_equal(xt_row_decode_meta(row, len, &v), 0);
    assert_int_equal(xt_row_count_of(&v.attr), -1);
    assert_int_equal(xt_row_nlink_shown(&v.attr), 2);
    xt_free(row);
    /* A row that is not counted (nlink 1) is never changed. */
    encode_dir(1, 1, &row, &len);
    assert_int_equal(mds_soft_show(s, 1, 7, "d", 1, &row, &len), 0);
    assert_int_equal(nlink_of(row, len, &ver), 1);
    xt_free(row);
    /* Bytes that are not a row: an error, the buffer left to the caller. */
    uint8_t junk[4] = { 1, 2, 3, 4 };
    uint8_t *jp = xt_malloc(sizeof junk);
    memcpy(jp, junk, sizeof junk);
    size_t jl = sizeof junk;
    assert_int_equal(mds_soft_show(s, 1, 7, "d", 1, &jp, &jl), -EBADMSG);
    xt_free(jp);
    mds_soft_free(s);
}

struct worker {
    mds_soft *s;
    int k;
};

/* Each thread adds 1,000 to its own row and to a shared one, and takes
 * 400 back from both, half of them before their adds: the sums are exact. */
static void *work(void *arg)
{
    struct worker *w = arg;
    char own[16];
    snprintf(own, sizeof own, "own%d", w->k);
    for (int i = 0; i < 1000; i++) {
        uint64_t id = (uint64_t)w->k << 32 | (uint64_t)(i + 1);
        uint8_t b[8];
        xt_put_u64(b, id);
        bool early = i % 5 == 0, late = i % 5 == 1;
        if (early) {
            mds_soft_take(w->s, 1, 7, own, strlen(own), b, 1);
            mds_soft_take(w->s, 1, 7, "shared", 6, b, 1);
        }
        mds_soft_add(w->s, 1, 7, own, strlen(own), id, 1);
        mds_soft_add(w->s, 1, 7, "shared", 6, id, 1);
        if (late) {
            mds_soft_take(w->s, 1, 7, own, strlen(own), b, 1);
            mds_soft_take(w->s, 1, 7, "shared", 6, b, 1);
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    mds_soft *s;
    assert_int_equal(mds_soft_new(60000, &s), 0);
    pthread_t t[8];
    struct worker w[8];
    for (int k = 0; k < 8; k++) {
        w[k] = (struct worker){ s, k };
        assert_int_equal(pthread_create(&t[k], NULL, work, &w[k]), 0);
    }
    for (int k = 0; k < 8; k++)
        pthread_join(t[k], NULL);
    for (int k = 0; k < 8; k++) {
        char own[16];
        snprintf(own, sizeof own, "own%d", k);
        assert_int_equal(mds_soft_get(s, 1, 7, own, strlen(own)), 600);
    }
    assert_int_equal(mds_soft_get(s, 1, 7, "shared", 6), 8 * 600);
    mds_soft_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_and_take),
        cmocka_unit_test(test_any_order),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_show),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
