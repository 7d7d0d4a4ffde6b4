/*
 * test_r2_store.c -- tests of r2/r2_store*.c. This one source is built
 * twice: R2_TEST_ZK=0 runs the cases against the embedded (LevelDB) store,
 * R2_TEST_ZK=1 against a real ZooKeeper server started for the test
 * (tests/common/pom_zk.h). The shared cases must pass unchanged on both, so
 * the two backends cannot drift apart; each backend adds its own cases.
 *
 * A random model test (seed printed; R2_TEST_SEED=n replays it) drives
 * single and multi ops against a reference model of the r2_store.h rules.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "pom_proc.h"
#include "pom_zk.h"
#include "r2_store.h"
#include "r2_store_embedded.h"
#include "r2_store_zk.h"
#include "xt_common.h"

#include <leveldb/c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <time.h>
#include <unistd.h>

#ifndef R2_TEST_ZK
#define R2_TEST_ZK 0
#endif

#define SESSION_MS 2000
#define CALL_MS 3000

#if R2_TEST_ZK
static pom_zk zk;             /* the server of the whole run */
#endif
static char tmpdir[256];      /* embedded: the folder of the current test */
static char root[64];         /* zk: the root prefix of the current test */
static int test_no;

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Opens a session on the current test's data. */
static int open_store(r2_store **s)
{
#if R2_TEST_ZK
    r2_store_zk_options o = { .hosts = zk.hosts, .root = root,
                              .session_timeout_ms = SESSION_MS,
                              .call_timeout_ms = CALL_MS };
    return r2_store_zk_open(&o, s);
#else
    return r2_store_embedded_open(tmpdir, s);
#endif
}

static r2_store *must_open(void)
{
    r2_store *s = NULL;
    int rc = open_store(&s);
    assert_int_equal(rc, 0);
    return s;
}

static int setup(void **state)
{
    (void)state;
    test_no++;
    snprintf(root, sizeof root, "/t%d-%d", (int)getpid(), test_no);
    return pom_tmpdir("r2store", tmpdir, sizeof tmpdir) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    pom_rm_rf(tmpdir);
    return 0;
}

static bool wait_until(bool (*cond)(void *), void *arg, int timeout_ms)
{
    long end = now_ms() + timeout_ms;
    do {
        if (cond(arg))
            return true;
        usleep(20000);
    } while (now_ms() < end);
    return cond(arg);
}

static void put_str(r2_store *s, const char *key, const char *v, int64_t exp,
                    int64_t want_ver)
{
    int64_t ver = -9;
    assert_int_equal(r2_store_put(s, key, v, strlen(v), exp, 0, &ver), 0);
    assert_int_equal(ver, want_ver);
}

static void get_str(r2_store *s, const char *key, const char *want, int64_t want_ver)
{
    void *val = NULL;
    size_t len = 0;
    int64_t ver = -9;
    assert_int_equal(r2_store_get(s, key, &val, &len, &ver), 0);
    assert_int_equal(len, strlen(want));
    assert_string_equal((char *)val, want);
    assert_int_equal(ver, want_ver);
    xt_free(val);
}

/* Leadership callback: counts calls, keeps the last value. */
static _Atomic int leader_calls;
static _Atomic bool leader_last;

static void leader_fn(void *arg, bool leader)
{
    (void)arg;
    leader_calls++;
    leader_last = leader;
}

/* ---- shared cases ------------------------------------------------------- */

static void test_crud_and_cas(void **state)
{
    (void)state;
    r2_store *s = must_open();
    put_str(s, "/fs/myfs", "one", R2_VER_CREATE, 0);
    get_str(s, "/fs/myfs", "one", 0);
    assert_int_equal(r2_store_put(s, "/fs/myfs", "x", 1, R2_VER_CREATE, 0, NULL), -EEXIST);
    put_str(s, "/fs/myfs", "two", 0, 1);
    assert_int_equal(r2_store_put(s, "/fs/myfs", "x", 1, 0, 0, NULL), -ESTALE);
    assert_int_equal(r2_store_put(s, "/fs/myfs", "x", 1, 7, 0, NULL), -ESTALE);
    get_str(s, "/fs/myfs", "two", 1);
    put_str(s, "/fs/myfs", "three", R2_VER_ANY, 2);
    put_str(s, "/fs/other", "new", R2_VER_ANY, 0);
    assert_int_equal(r2_store_put(s, "/fs/none", "x", 1, 0, 0, NULL), -ENOENT);
    assert_int_equal(r2_store_get(s, "/fs/none", NULL, NULL, NULL), -ENOENT);

    /* version only; empty and binary values */
    int64_t ver = -9;
    assert_int_equal(r2_store_get(s, "/fs/myfs", NULL, NULL, &ver), 0);
    assert_int_equal(ver, 2);
    put_str(s, "/empty", "", R2_VER_CREATE, 0);
    get_str(s, "/empty", "", 0);
    uint8_t bin[300];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (uint8_t)(i * 7);
    assert_int_equal(r2_store_put(s, "/bin", bin, sizeof bin, R2_VER_ANY, 0, NULL), 0);
    void *val = NULL;
    size_t len = 0;
    assert_int_equal(r2_store_get(s, "/bin", &val, &len, NULL), 0);
    assert_int_equal(len, sizeof bin);
    assert_memory_equal(val, bin, sizeof bin);
    xt_free(val);

    /* the largest value, and one byte more */
    size_t big = R2_STORE_VALUE_MAX;
    char *b = malloc(big + 1);
    assert_non_null(b);
    memset(b, 'z', big + 1);
    assert_int_equal(r2_store_put(s, "/big", b, big + 1, R2_VER_ANY, 0, NULL), -EFBIG);
    assert_int_equal(r2_store_put(s, "/big", b, big, R2_VER_ANY, 0, NULL), 0);
    assert_int_equal(r2_store_get(s, "/big", &val, &len, NULL), 0);
    assert_int_equal(len, big);
    assert_memory_equal(val, b, big);
    xt_free(val);
    free(b);

    /* delete: CAS, then gone */
    assert_int_equal(r2_store_delete(s, "/fs/myfs", 1), -ESTALE);
    assert_int_equal(r2_store_delete(s, "/fs/myfs", 2), 0);
    assert_int_equal(r2_store_get(s, "/fs/myfs", NULL, NULL, NULL), -ENOENT);
    assert_int_equal(r2_store_delete(s, "/fs/myfs", R2_VER_ANY), -ENOENT);
    assert_int_equal(r2_store_delete(s, "/fs/other", R2_VER_ANY), 0);
    /* re-created at version 0 */
    put_str(s, "/fs/myfs", "again", R2_VER_CREATE, 0);
    r2_store_close(s);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    r2_store *s = must_open();
    static const char *bad[] = { "", "a", "/", "//", "/a/", "/a//b", "/a/./b",
                                 "/..", "/a b", "/a\tb", "/\x7f", "/\xc3\xa9" };
    for (size_t i = 0; i < XT_ARRAY_SIZE(bad); i++) {
        assert_int_equal(r2_store_put(s, bad[i], "x", 1, R2_VER_ANY, 0, NULL), -EINVAL);
        assert_int_equal(r2_store_get(s, bad[i], NULL, NULL, NULL), -EINVAL);
        assert_int_equal(r2_store_delete(s, bad[i], R2_VER_ANY), -EINVAL);
    }
    char longkey[R2_STORE_KEY_MAX + 2];
    memset(longkey, 'k', sizeof longkey);
    longkey[0] = '/';
    for (size_t i = 200; i < sizeof longkey; i += 200)
        longkey[i] = '/';
    longkey[R2_STORE_KEY_MAX + 1] = '\0';
    assert_false(r2_store_key_valid(longkey));
    longkey[R2_STORE_KEY_MAX] = '\0';
    assert_true(r2_store_key_valid(longkey));
    char comp[300];
    memset(comp, 'c', sizeof comp);
    comp[0] = '/';
    comp[257] = '\0';
    assert_false(r2_store_key_valid(comp)); /* a 256-byte component */
    comp[256] = '\0';
    assert_true(r2_store_key_valid(comp));
    assert_int_equal(r2_store_put(s, "/a", "x", 1, -3, 0, NULL), -EINVAL);
    assert_int_equal(r2_store_put(s, "/a", "x", 1, R2_VER_ANY, 0x80, NULL), -EINVAL);
    assert_int_equal(r2_store_delete(s, "/a", R2_VER_CREATE), -EINVAL);
    assert_int_equal(r2_store_alloc_id(s, "/ids", 0, NULL), -EINVAL);
    r2_store_close(s);
}

static void test_tree_and_list(void **state)
{
    (void)state;
    r2_store *s = must_open();
    put_str(s, "/a/b/c", "leaf", R2_VER_CREATE, 0);
    get_str(s, "/a", "", 0);   /* ancestors appear, empty, version 0 */
    get_str(s, "/a/b", "", 0);
    assert_int_equal(r2_store_delete(s, "/a", R2_VER_ANY), -ENOTEMPTY);
    assert_int_equal(r2_store_delete(s, "/a/b", R2_VER_ANY), -ENOTEMPTY);

    /* children in strcmp order, names only, nested ones not repeated */
    const char *names[] = { "17", "3", "a-b", "Z", "sites0", "x.y" };
    for (size_t i = 0; i < XT_ARRAY_SIZE(names); i++) {
        char key[64];
        snprintf(key, sizeof key, "/sites/%s", names[i]);
        put_str(s, key, names[i], R2_VER_CREATE, 0);
    }
    put_str(s, "/sites/3/deep", "d", R2_VER_CREATE, 0);
    put_str(s, "/sitesX", "sibling", R2_VER_CREATE, 0);
    char **v = NULL;
    size_t n = 0;
    assert_int_equal(r2_store_list(s, "/sites", &v, &n), 0);
    const char *want[] = { "17", "3", "Z", "a-b", "sites0", "x.y" };
    assert_int_equal(n, XT_ARRAY_SIZE(want));
    for (size_t i = 0; i < n; i++)
        assert_string_equal(v[i], want[i]);
    r2_store_names_free(v, n);

    assert_int_equal(r2_store_list(s, "/", &v, &n), 0);
    const char *top[] = { "a", "sites", "sitesX" };
    assert_int_equal(n, XT_ARRAY_SIZE(top));
    for (size_t i = 0; i < n; i++)
        assert_string_equal(v[i], top[i]);
    r2_store_names_free(v, n);

    assert_int_equal(r2_store_list(s, "/sites/17", &v, &n), 0);
    assert_int_equal(n, 0);
    r2_store_names_free(v, n);
    assert_int_equal(r2_store_list(s, "/nothing", &v, &n), -ENOENT);
    assert_int_equal(r2_store_list(s, "bad", &v, &n), -EINVAL);

    /* an ephemeral cannot have children */
    assert_int_equal(r2_store_put(s, "/eph", "e", 1, R2_VER_CREATE, R2_PUT_EPHEMERAL, NULL), 0);
    assert_int_equal(r2_store_put(s, "/eph/x", "x", 1, R2_VER_CREATE, 0, NULL), -ENOTDIR);
    assert_int_equal(r2_store_put(s, "/eph/x/y", "x", 1, R2_VER_ANY, 0, NULL), -ENOTDIR);

    /* deleting leaves then parents */
    assert_int_equal(r2_store_delete(s, "/a/b/c", 0), 0);
    assert_int_equal(r2_store_delete(s, "/a/b", 0), 0);
    assert_int_equal(r2_store_delete(s, "/a", 0), 0);
    assert_int_equal(r2_store_list(s, "/a", &v, &n), -ENOENT);
    r2_store_close(s);
}

static void test_multi_atomic(void **state)
{
    (void)state;
    r2_store *s = must_open();
    put_str(s, "/m/c", "c0", R2_VER_CREATE, 0);
    put_str(s, "/m/d", "d0", R2_VER_CREATE, 0);

    /* a failing check at the end undoes the puts before it */
    r2_store_op bad[] = {
        { R2_OP_PUT, "/m/a", "A", 1, R2_VER_CREATE, 0 },
        { R2_OP_PUT, "/m/b", "B", 1, R2_VER_ANY, 0 },
        { R2_OP_PUT, "/m/new/deep", "N", 1, R2_VER_ANY, 0 },
        { R2_OP_DELETE, "/m/d", NULL, 0, R2_VER_ANY, 0 },
        { R2_OP_CHECK, "/m/c", NULL, 0, 5, 0 },
    };
    size_t failed = 99;
    assert_int_equal(r2_store_multi(s, bad, 5, NULL, &failed), -ESTALE);
    assert_int_equal(failed, 4);
    assert_int_equal(r2_store_get(s, "/m/a", NULL, NULL, NULL), -ENOENT);
    assert_int_equal(r2_store_get(s, "/m/b", NULL, NULL, NULL), -ENOENT);
    assert_int_equal(r2_store_get(s, "/m/new", NULL, NULL, NULL), -ENOENT);
    get_str(s, "/m/d", "d0", 0);
    bad[4].expected = 0;
    bad[0].expected = 0; /* put on a missing record with a version */
    assert_int_equal(r2_store_multi(s, bad, 5, NULL, &failed), -ENOENT);
    assert_int_equal(failed, 0);
    bad[0].expected = R2_VER_CREATE;
    bad[1].key = "/m/c"; /* the same key twice */
    assert_int_equal(r2_store_multi(s, bad, 5, NULL, &failed), -EINVAL);
    assert_int_equal(failed, 4);
    bad[1].key = "/m/b";

    int64_t nv[5];
    assert_int_equal(r2_store_multi(s, bad, 5, nv, &failed), 0);
    assert_int_equal(nv[0], 0);
    assert_int_equal(nv[1], 0);
    assert_int_equal(nv[2], 0);
    assert_int_equal(nv[3], -1);
    assert_int_equal(nv[4], -1);
    get_str(s, "/m/a", "A", 0);
    get_str(s, "/m/new/deep", "N", 0);
    get_str(s, "/m/new", "", 0);
    assert_int_equal(r2_store_get(s, "/m/d", NULL, NULL, NULL), -ENOENT);

    /* ops see the earlier ops of the same multi */
    r2_store_op seq[] = {
        { R2_OP_PUT, "/n", "", 0, R2_VER_CREATE, 0 },
        { R2_OP_PUT, "/n/x/y", "Y", 1, R2_VER_CREATE, 0 },
        { R2_OP_PUT, "/m/a", "A1", 2, 0, 0 },
        { R2_OP_DELETE, "/m/new/deep", NULL, 0, 0, 0 },
        { R2_OP_DELETE, "/m/new", NULL, 0, 0, 0 },
    };
    assert_int_equal(r2_store_multi(s, seq, 5, nv, &failed), 0);
    assert_int_equal(nv[2], 1);
    get_str(s, "/n/x", "", 0);
    get_str(s, "/n/x/y", "Y", 0);
    get_str(s, "/m/a", "A1", 1);
    assert_int_equal(r2_store_get(s, "/m/new", NULL, NULL, NULL), -ENOENT);
    /* deleting a parent before its child fails as a whole */
    r2_store_op order[] = {
        { R2_OP_DELETE, "/n/x", NULL, 0, R2_VER_ANY, 0 },
        { R2_OP_DELETE, "/n/x/y", NULL, 0, R2_VER_ANY, 0 },
    };
    assert_int_equal(r2_store_multi(s, order, 2, NULL, &failed), -ENOTEMPTY);
    assert_int_equal(failed, 0);
    get_str(s, "/n/x/y", "Y", 0);
    order[0].key = "/n/x/y";
    order[1].key = "/n/x";
    assert_int_equal(r2_store_multi(s, order, 2, NULL, &failed), 0);
    assert_int_equal(r2_store_get(s, "/n/x", NULL, NULL, NULL), -ENOENT);
    r2_store_close(s);
}

/* ---- random model test ------------------------------------------------------ */

#define MODEL_KEYS 6

struct model_rec {
    bool exists;
    int64_t version;
    char val[16];
};

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int64_t pick_expected(const struct model_rec *r, bool allow_create)
{
    switch (rnd() % 4) {
    case 0: return R2_VER_ANY;
    case 1: return allow_create ? R2_VER_CREATE : R2_VER_ANY;
    case 2: return r->exists ? r->version : (int64_t)(rnd() % 3);
    default: return (int64_t)(rnd() % 3);
    }
}

/* What the rules of r2_store.h say op does to model m (flat keys only). */
static int model_apply(struct model_rec *m, int k, const r2_store_op *op,
                       int64_t *nv)
{
    struct model_rec *r = &m[k];
    *nv = -1;
    if (op->type == R2_OP_CHECK) {
        if (!r->exists)
            return -ENOENT;
        return r->version == op->expected ? 0 : -ESTALE;
    }
    if (op->type == R2_OP_DELETE) {
        if (!r->exists)
            return -ENOENT;
        if (op->expected >= 0 && op->expected != r->version)
            return -ESTALE;
        r->exists = false;
        return 0;
    }
    if (r->exists) {
        if (op->expected == R2_VER_CREATE)
            return -EEXIST;
        if (op->expected >= 0 && op->expected != r->version)
            return -ESTALE;
        r->version++;
    } else {
        if (op->expected >= 0)
            return -ENOENT;
        r->exists = true;
        r->version = 0;
    }
    snprintf(r->val, sizeof r->val, "%.*s", (int)op->len, (const char *)op->val);
    *nv = r->version;
    return 0;
}

static void test_random_model(void **state)
{
    (void)state;
    const char *env = getenv("R2_TEST_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
    if (seed == 0)
        seed = 1;
    printf("test_random_model: seed %llu (R2_TEST_SEED replays it)\n",
           (unsigned long long)seed);
    rng_state = seed;
    r2_store *s = must_open();
    struct model_rec m[MODEL_KEYS] = { 0 };
    char keys[MODEL_KEYS][16], vals[8][48];
    for (int k = 0; k < MODEL_KEYS; k++)
        snprintf(keys[k], sizeof keys[k], "/p/k%d", k);
    int steps = R2_TEST_ZK ? 150 : 400;
    for (int step = 0; step < steps; step++) {
        r2_store_op ops[4];
        int idx[4];
        size_t n = 1 + rnd() % 4;
        bool used[MODEL_KEYS] = { false };
        for (size_t i = 0; i < n; i++) {
            int k;
            do
                k = (int)(rnd() % MODEL_KEYS);
            while (used[k]);
            used[k] = true;
            idx[i] = k;
            snprintf(vals[i], sizeof vals[i], "v%d.%zu", step, i);
            int t = (int)(rnd() % 6);
            ops[i].key = keys[k];
            ops[i].val = vals[i];
            ops[i].len = strlen(vals[i]);
            ops[i].flags = 0;
            if (t < 3) {
                ops[i].type = R2_OP_PUT;
                ops[i].expected = pick_expected(&m[k], true);
            } else if (t < 5) {
                ops[i].type = R2_OP_DELETE;
                ops[i].expected = pick_expected(&m[k], false);
            } else {
                ops[i].type = R2_OP_CHECK;
                ops[i].expected = m[k].exists && rnd() % 2 ? m[k].version : (int64_t)(rnd() % 3);
            }
        }
        /* the model, on a copy: a failed multi changes nothing */
        struct model_rec next[MODEL_KEYS];
        memcpy(next, m, sizeof m);
        int want = 0;
        size_t want_failed = 0;
        int64_t want_nv[4];
        for (size_t i = 0; i < n && want == 0; i++) {
            want = model_apply(next, idx[i], &ops[i], &want_nv[i]);
            want_failed = i;
        }
        int64_t nv[4];
        size_t failed = 99;
        int got;
        if (n == 1 && ops[0].type != R2_OP_CHECK && rnd() % 2) {
            got = ops[0].type == R2_OP_PUT
                      ? r2_store_put(s, ops[0].key, ops[0].val, ops[0].len,
                                     ops[0].expected, 0, &nv[0])
                      : r2_store_delete(s, ops[0].key, ops[0].expected);
            failed = 0;
            if (ops[0].type == R2_OP_DELETE)
                nv[0] = -1;
        } else {
            got = r2_store_multi(s, ops, n, nv, &failed);
        }
        bool bad_versions = false;
        for (size_t i = 0; got == 0 && i < n; i++)
            bad_versions = bad_versions || (ops[i].type == R2_OP_PUT && nv[i] != want_nv[i]);
        if (got != want || (got < 0 && failed != want_failed) || bad_versions)
            for (size_t i = 0; i < n; i++)
                printf("  op %zu: type %d key %s expected %lld (model: exists %d version %lld)\n",
                       i, (int)ops[i].type, ops[i].key, (long long)ops[i].expected,
                       (int)m[idx[i]].exists, (long long)m[idx[i]].version);
        if (got != want || (got < 0 && failed != want_failed))
            fail_msg("seed %llu step %d: got %d (op %zu), model %d (op %zu)",
                     (unsigned long long)seed, step, got, failed, want, want_failed);
        if (got == 0) {
            memcpy(m, next, sizeof m);
            for (size_t i = 0; i < n; i++)
                if (ops[i].type == R2_OP_PUT && nv[i] != want_nv[i])
                    fail_msg("seed %llu step %d: op %zu version %lld, model %lld",
                             (unsigned long long)seed, step, i, (long long)nv[i],
                             (long long)want_nv[i]);
        }
        if (step % 25 == 0 || step == steps - 1) {
            for (int k = 0; k < MODEL_KEYS; k++) {
                void *val = NULL;
                size_t len = 0;
                int64_t ver = -9;
                int rc = r2_store_get(s, keys[k], &val, &len, &ver);
                assert_int_equal(rc, m[k].exists ? 0 : -ENOENT);
                if (rc == 0) {
                    assert_int_equal(ver, m[k].version);
                    assert_string_equal((char *)val, m[k].val);
                    xt_free(val);
                }
            }
        }
    }
    r2_store_close(s);
}

/* ---- ids ------------------------------------------------------------------ */

#define ID_ROUNDS 150

struct id_worker {
    r2_store *s;
    uint64_t first[ID_ROUNDS], count[ID_ROUNDS];
    int rc;
};

static void *id_thread(void *arg)
{
    struct id_worker *w = arg;
    for (int i = 0; i < ID_ROUNDS && w->rc == 0; i++) {
        w->count[i] = 1 + (uint64_t)(i % 3);
        w->rc = r2_store_alloc_id(w->s, "/ids/site", w->count[i], &w->first[i]);
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_alloc_id_unique(void **state)
{
    (void)state;
    r2_store *s = must_open();
    uint64_t first = 0;
    assert_int_equal(r2_store_alloc_id(s, "/ids/site", 1, &first), 0);
    assert_int_equal(first, 1);
    struct id_worker w[2] = { { .s = s }, { .s = s } };
    if (R2_TEST_ZK) { /* ZooKeeper: two sessions, as two R2 processes */
        w[0].s = must_open();
        w[1].s = must_open();
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, id_thread, &w[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    assert_int_equal(w[0].rc, 0);
    assert_int_equal(w[1].rc, 0);
    /* every id handed out once: the ranges tile [2, 2 + total) */
    uint64_t *all = malloc(2 * ID_ROUNDS * 3 * sizeof *all);
    size_t n = 0;
    for (int i = 0; i < 2; i++)
        for (int r = 0; r < ID_ROUNDS; r++)
            for (uint64_t j = 0; j < w[i].count[r]; j++)
                all[n++] = w[i].first[r] + j;
    qsort(all, n, sizeof *all, cmp_u64);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(all[i], 2 + i);
    assert_int_equal(r2_store_alloc_id(s, "/ids/site", 5, &first), 0);
    assert_int_equal(first, 2 + n);
    free(all);
    /* a counter that is not 8 bytes is refused, not reinterpreted */
    put_str(s, "/ids/bad", "abc", R2_VER_CREATE, 0);
    assert_int_equal(r2_store_alloc_id(s, "/ids/bad", 1, &first), -EIO);
    uint8_t top[8];
    xt_put_u64(top, UINT64_MAX - 2);
    assert_int_equal(r2_store_put(s, "/ids/top", top, 8, R2_VER_CREATE, 0, NULL), 0);
    assert_int_equal(r2_store_alloc_id(s, "/ids/top", 5, &first), -EOVERFLOW);
    assert_int_equal(r2_store_alloc_id(s, "/ids/top", 2, &first), 0);
    assert_int_equal(first, UINT64_MAX - 2);
    if (R2_TEST_ZK) {
        r2_store_close(w[0].s);
        r2_store_close(w[1].s);
    }
    r2_store_close(s);
}

/* ---- ephemerals and persistence --------------------------------------------- */

struct gone_arg {
    r2_store *s;
    const char *key;
};

static bool record_gone(void *p)
{
    struct gone_arg *g = p;
    return r2_store_get(g->s, g->key, NULL, NULL, NULL) == -ENOENT;
}

static void test_ephemeral_and_persistence(void **state)
{
    (void)state;
    r2_store *s = must_open();
    put_str(s, "/keep/fs", "persistent", R2_VER_CREATE, 0);
    put_str(s, "/keep/fs", "persistent2", 0, 1);
    assert_int_equal(r2_store_put(s, "/live/me", "here", 4, R2_VER_CREATE,
                                  R2_PUT_EPHEMERAL, NULL), 0);
    put_str(s, "/live/me", "updated", 0, 1);
    get_str(s, "/live/me", "updated", 1);
    r2_store_op op = { R2_OP_PUT, "/live/multi", "m", 1, R2_VER_ANY, R2_PUT_EPHEMERAL };
    assert_int_equal(r2_store_multi(s, &op, 1, NULL, NULL), 0);
#if R2_TEST_ZK
    /* another session sees them, then sees them vanish with the owner */
    r2_store *o = must_open();
    get_str(o, "/live/me", "updated", 1);
    r2_store_close(s);
    struct gone_arg g = { o, "/live/me" };
    assert_true(wait_until(record_gone, &g, SESSION_MS));
    g.key = "/live/multi";
    assert_true(wait_until(record_gone, &g, SESSION_MS));
    get_str(o, "/keep/fs", "persistent2", 1);
    r2_store_close(o);
#else
    r2_store *busy = NULL;
    assert_int_equal(open_store(&busy), -EBUSY); /* one session per folder */
    r2_store_close(s);
#endif
    s = must_open();
    struct gone_arg gone = { s, "/live/me" };
    assert_true(record_gone(&gone));
    assert_int_equal(r2_store_get(s, "/live/multi", NULL, NULL, NULL), -ENOENT);
    get_str(s, "/live", "", 0); /* the persistent parent stays */
    get_str(s, "/keep/fs", "persistent2", 1);
    r2_store_close(s);
}

/* ---- watches ---------------------------------------------------------------- */

struct watch_count {
    pthread_mutex_t mu;
    int n;
};

static void count_fn(void *arg, const char *key)
{
    struct watch_count *c = arg;
    (void)key;
    pthread_mutex_lock(&c->mu);
    c->n++;
    pthread_mutex_unlock(&c->mu);
}

static int count_get(struct watch_count *c)
{
    pthread_mutex_lock(&c->mu);
    int n = c->n;
    pthread_mutex_unlock(&c->mu);
    return n;
}

struct count_at_least {
    struct watch_count *c;
    int n;
};

static bool count_reached(void *p)
{
    struct count_at_least *a = p;
    return count_get(a->c) >= a->n;
}

static void test_watch(void **state)
{
    (void)state;
    r2_store *s = must_open();
    r2_store *w = R2_TEST_ZK ? must_open() : s; /* ZK: changes by another session */
    struct watch_count c = { PTHREAD_MUTEX_INITIALIZER, 0 };
    int id = r2_store_watch(s, "/w", count_fn, &c);
    assert_true(id > 0);
    usleep(R2_TEST_ZK ? 300000 : 0); /* let the keeper arm it */
    int base = count_get(&c);
    put_str(w, "/w", "1", R2_VER_CREATE, 0);
    struct count_at_least a = { &c, base + 1 };
    assert_true(wait_until(count_reached, &a, 5000));
    usleep(R2_TEST_ZK ? 200000 : 0);
    a.n = count_get(&c) + 1;
    put_str(w, "/w/child", "c", R2_VER_CREATE, 0); /* children changed */
    assert_true(wait_until(count_reached, &a, 5000));
    usleep(R2_TEST_ZK ? 200000 : 0);
    a.n = count_get(&c) + 1;
    put_str(w, "/w", "2", 0, 1); /* data changed */
    assert_true(wait_until(count_reached, &a, 5000));
    usleep(R2_TEST_ZK ? 200000 : 0);
    int before = count_get(&c);
    put_str(w, "/unrelated", "u", R2_VER_CREATE, 0);
    usleep(300000);
    assert_int_equal(count_get(&c), before);
    r2_store_unwatch(s, id);
    put_str(w, "/w", "3", 1, 2);
    usleep(300000);
    assert_int_equal(count_get(&c), before);
    if (w != s)
        r2_store_close(w);
    r2_store_close(s);
}

#if !R2_TEST_ZK
/* ---- embedded only ------------------------------------------------------------ */

static void test_embedded_election(void **state)
{
    (void)state;
    r2_store *s = must_open();
    assert_string_equal(r2_store_backend(s), "embedded");
    assert_false(r2_store_is_leader(s));
    void *id = NULL;
    size_t len = 0;
    assert_int_equal(r2_store_leader(s, &id, &len), -ENOENT);
    leader_calls = 0;
    assert_int_equal(r2_store_elect(s, "127.0.0.1:7000", 14, leader_fn, NULL), 0);
    assert_int_equal(leader_calls, 1); /* before elect returned */
    assert_true(leader_last);
    assert_true(r2_store_is_leader(s));
    assert_int_equal(r2_store_elect(s, "x", 1, leader_fn, NULL), -EALREADY);
    assert_int_equal(r2_store_leader(s, &id, &len), 0);
    assert_int_equal(len, 14);
    assert_string_equal((char *)id, "127.0.0.1:7000");
    xt_free(id);
    assert_int_equal(r2_store_resign(s), 0);
    assert_int_equal(leader_calls, 2);
    assert_false(leader_last);
    assert_false(r2_store_is_leader(s));
    r2_store_close(s);
}

/* Rewrites the stored value of key with fn, behind the store's back. */
static void tamper(const char *key, void (*fn)(char *rec, size_t *len))
{
    char *err = NULL;
    leveldb_options_t *o = leveldb_options_create();
    leveldb_t *db = leveldb_open(o, tmpdir, &err);
    assert_null(err);
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    size_t len = 0;
    char *v = leveldb_get(db, ro, key, strlen(key), &len, &err);
    assert_non_null(v);
    char buf[256];
    assert_true(len <= sizeof buf);
    memcpy(buf, v, len);
    leveldb_free(v);
    fn(buf, &len);
    leveldb_put(db, wo, key, strlen(key), buf, len, &err);
    assert_null(err);
    leveldb_writeoptions_destroy(wo);
    leveldb_readoptions_destroy(ro);
    leveldb_close(db);
    leveldb_options_destroy(o);
}

static void flip_value(char *rec, size_t *len) { rec[*len - 1] ^= 0x20; }
static void flip_version(char *rec, size_t *len) { (void)len; rec[R2_EMB_OFF_VER] ^= 1; }
static void truncate_rec(char *rec, size_t *len) { (void)rec; *len = R2_EMB_HDR - 1; }
static void bad_format(char *rec, size_t *len) { (void)len; rec[0] = 9; }
static void bad_flags(char *rec, size_t *len) { (void)len; rec[R2_EMB_OFF_FLAGS] |= 0x40; }

static void test_embedded_corruption(void **state)
{
    (void)state;
    void (*damage[])(char *, size_t *) = { flip_value, flip_version, truncate_rec,
                                           bad_format, bad_flags };
    r2_store *s = must_open();
    put_str(s, "/ok", "fine", R2_VER_CREATE, 0);
    for (size_t i = 0; i < XT_ARRAY_SIZE(damage); i++) {
        char key[16];
        snprintf(key, sizeof key, "/c%zu", i);
        put_str(s, key, "content", R2_VER_CREATE, 0);
        put_str(s, key, "content", 0, 1);
    }
    r2_store_close(s);
    for (size_t i = 0; i < XT_ARRAY_SIZE(damage); i++) {
        char key[16];
        snprintf(key, sizeof key, "/c%zu", i);
        tamper(key, damage[i]);
    }
    s = must_open();
    for (size_t i = 0; i < XT_ARRAY_SIZE(damage); i++) {
        char key[16];
        snprintf(key, sizeof key, "/c%zu", i);
        assert_int_equal(r2_store_get(s, key, NULL, NULL, NULL), -EIO);
        assert_int_equal(r2_store_put(s, key, "x", 1, R2_VER_ANY, 0, NULL), -EIO);
        assert_int_equal(r2_store_delete(s, key, R2_VER_ANY), -EIO);
    }
    get_str(s, "/ok", "fine", 0);
    r2_store_close(s);
}

/* A full disk (r2_store_embedded.c invariant 5): the store's folder on a
 * 1 MiB tmpfs that also holds a 256 KiB ballast file; 32 KiB records are
 * put until one fails. While full, calls may answer -EIO (the database
 * cannot be opened again yet). The failed put is not visible; after the ballast
 * goes, puts succeed again without reopening the store (LevelDB refuses
 * every write after a failed one until the database is opened again), and
 * everything acknowledged reads back, also after a reopen. Needs root to
 * mount; skipped otherwise. */
static void test_embedded_full_disk(void **state)
{
    (void)state;
    if (mount("tmpfs", tmpdir, "tmpfs", 0, "size=1m") < 0) {
        printf("SKIP: cannot mount a tmpfs: %s\n", strerror(errno));
        skip();
    }
    char ballast[300];
    snprintf(ballast, sizeof ballast, "%s/ballast", tmpdir);
    FILE *f = fopen(ballast, "w");
    assert_non_null(f);
    static char big[32 << 10];
    for (int i = 0; i < 8; i++)
        assert_int_equal(fwrite(big, 1, sizeof big, f), sizeof big);
    assert_int_equal(fclose(f), 0);
    r2_store *s = must_open();
    int n = 0, rc = 0;
    for (; n < 64; n++) {
        char key[16];
        snprintf(key, sizeof key, "/full%d", n);
        memset(big, 'a' + n % 26, sizeof big);
        if ((rc = r2_store_put(s, key, big, sizeof big, R2_VER_ANY, 0, NULL)) < 0)
            break;
    }
    assert_true(rc == -ENOSPC || rc == -EIO);
    assert_true(n > 4);
    assert_int_equal(unlink(ballast), 0);
    char last[16];
    snprintf(last, sizeof last, "/full%d", n);
    assert_int_equal(r2_store_get(s, last, NULL, NULL, NULL), -ENOENT);
    put_str(s, "/after", "space is back", R2_VER_CREATE, 0);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < n; i++) {
            char key[16];
            void *val = NULL;
            size_t len = 0;
            snprintf(key, sizeof key, "/full%d", i);
            assert_int_equal(r2_store_get(s, key, &val, &len, NULL), 0);
            assert_int_equal(len, sizeof big);
            assert_int_equal(((char *)val)[len - 1], 'a' + i % 26);
            xt_free(val);
        }
        get_str(s, "/after", "space is back", 0);
        r2_store_close(s);
        s = round == 0 ? must_open() : NULL;
    }
    assert_int_equal(umount2(tmpdir, MNT_DETACH), 0);
}

/* Countdown: fail the N-th allocation, for every N, on every call. */
static void test_embedded_alloc_failures(void **state)
{
    (void)state;
    r2_store *s = must_open();
    put_str(s, "/af/base", "b", R2_VER_CREATE, 0);
    r2_store_close(s);
    for (long n = 0;; n++) {
        s = NULL;
        xt_alloc_fail_after(n);
        int rc = open_store(&s);
        int step_rcs[6] = { rc, 0, 0, 0, 0, 0 };
        if (rc == 0) {
            step_rcs[1] = r2_store_put(s, "/af/k", "v", 1, R2_VER_ANY, 0, NULL);
            void *val = NULL;
            step_rcs[2] = r2_store_get(s, "/af/base", &val, NULL, NULL);
            xt_free(val);
            char **names = NULL;
            size_t cnt = 0;
            step_rcs[3] = r2_store_list(s, "/af", &names, &cnt);
            r2_store_names_free(names, cnt);
            r2_store_op ops[2] = { { R2_OP_PUT, "/af/m/x", "x", 1, R2_VER_ANY, 0 },
                                   { R2_OP_CHECK, "/af/base", NULL, 0, 0, 0 } };
            step_rcs[4] = r2_store_multi(s, ops, 2, NULL, NULL);
            int w = r2_store_watch(s, "/af", count_fn, NULL);
            step_rcs[5] = w < 0 ? w : 0;
        }
        long failures = xt_alloc_fail_after(-1);
        for (int i = 0; i < 6; i++)
            if (step_rcs[i] != 0 && step_rcs[i] != -ENOMEM)
                fail_msg("countdown %ld: step %d returned %d", n, i, step_rcs[i]);
        r2_store_close(s);
        /* the store still reads what was committed */
        s = must_open();
        get_str(s, "/af/base", "b", 0);
        r2_store_close(s);
        if (failures == 0)
            break;
        assert_true(n < 10000);
    }
}
#endif /* !R2_TEST_ZK */

#if R2_TEST_ZK
/* ---- ZooKeeper only ----------------------------------------------------------- */

#define CANDIDATES 3

static int leaders_among(r2_store **s, int n, int *which)
{
    int count = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] != NULL && r2_store_is_leader(s[i])) {
            count++;
            *which = i;
        }
    }
    return count;
}

struct one_leader {
    r2_store **s;
    int n, which, not;
};

static bool exactly_one_leader(void *p)
{
    struct one_leader *o = p;
    return leaders_among(o->s, o->n, &o->which) == 1 && o->which != o->not;
}

static void check_leader_id(r2_store *s, int which)
{
    void *id = NULL;
    size_t len = 0;
    char want[32];
    snprintf(want, sizeof want, "r2-%d", which);
    assert_int_equal(r2_store_leader(s, &id, &len), 0);
    assert_string_equal((char *)id, want);
    xt_free(id);
}

static void test_zk_election(void **state)
{
    (void)state;
    r2_store *s[CANDIDATES];
    for (int i = 0; i < CANDIDATES; i++) {
        s[i] = must_open();
        assert_string_equal(r2_store_backend(s[i]), "zookeeper");
        char id[32];
        snprintf(id, sizeof id, "r2-%d", i);
        assert_int_equal(r2_store_elect(s[i], id, strlen(id), NULL, NULL), 0);
    }
    assert_int_equal(r2_store_elect(s[0], "again", 5, NULL, NULL), -EALREADY);
    struct one_leader o = { s, CANDIDATES, -1, -1 };
    assert_true(wait_until(exactly_one_leader, &o, 5000));
    int first = o.which;
    usleep(300000); /* and it stays one */
    assert_true(exactly_one_leader(&o));
    for (int i = 0; i < CANDIDATES; i++)
        check_leader_id(s[i], first);

    /* the leader closes: another takes over well within a session timeout */
    long t0 = now_ms();
    r2_store_close(s[first]);
    s[first] = NULL;
    o.not = first;
    assert_true(wait_until(exactly_one_leader, &o, SESSION_MS));
    int second = o.which;
    printf("test_zk_election: leader %d -> %d after close in %ld ms\n", first,
           second, now_ms() - t0);
    check_leader_id(s[second], second);

    /* the leader's session dies on the server: it steps down, the other
     * candidate leads, and the old leader comes back as a follower with a
     * new session and its ephemerals re-created */
    assert_int_equal(r2_store_put(s[second], "/sites/me", "eph", 3, R2_VER_CREATE,
                                  R2_PUT_EPHEMERAL, NULL), 0);
    int64_t sid = r2_store_zk_session(s[second]);
    t0 = now_ms();
    assert_int_equal(r2_store_zk_expire_session(s[second]), 0);
    o.not = second;
    assert_true(wait_until(exactly_one_leader, &o, 2 * SESSION_MS));
    int third = o.which;
    printf("test_zk_election: leader %d -> %d after session expiry in %ld ms\n",
           second, third, now_ms() - t0);
    long end = now_ms() + 3 * SESSION_MS;
    while (now_ms() < end && (r2_store_zk_session(s[second]) == sid ||
                              r2_store_zk_session(s[second]) == 0))
        usleep(20000);
    assert_true(r2_store_zk_session(s[second]) != sid);
    struct gone_arg g = { s[third], "/sites/me" };
    end = now_ms() + 3 * SESSION_MS;
    while (now_ms() < end && record_gone(&g))
        usleep(20000);
    get_str(s[third], "/sites/me", "eph", 0);
    assert_false(r2_store_is_leader(s[second]));
    check_leader_id(s[second], third);

    /* resigning hands over too */
    assert_int_equal(r2_store_resign(s[third]), 0);
    assert_false(r2_store_is_leader(s[third]));
    o.not = third;
    assert_true(wait_until(exactly_one_leader, &o, SESSION_MS));
    assert_int_equal(o.which, second);
    for (int i = 0; i < CANDIDATES; i++)
        r2_store_close(s[i]);
}

static bool store_works(void *p)
{
    r2_store *s = p;
    return r2_store_put(s, "/outage/after", "ok", 2, R2_VER_ANY, 0, NULL) == 0;
}

/* Calls during an outage fail with -ENOTCONN or -ETIMEDOUT, each within
 * the call timeout; after it, the same store works again. */
static void outage_calls(r2_store *s, long outage_ms)
{
    long end = now_ms() + outage_ms;
    int failures = 0, calls = 0;
    while (now_ms() < end) {
        long t0 = now_ms();
        int rc = r2_store_put(s, "/outage/during", "x", 1, R2_VER_ANY, 0, NULL);
        long took = now_ms() - t0;
        calls++;
        if (rc != 0) {
            if (rc != -ENOTCONN && rc != -ETIMEDOUT)
                fail_msg("outage: put returned %d", rc);
            failures++;
        }
        if (took > CALL_MS + 1000)
            fail_msg("outage: a call blocked %ld ms (call timeout %d)", took, CALL_MS);
        usleep(100000);
    }
    printf("outage: %d of %d calls failed cleanly\n", failures, calls);
    assert_true(failures > 0);
}

static void test_zk_outage_pause(void **state)
{
    (void)state;
    r2_store *s = must_open();
    leader_calls = 0;
    assert_int_equal(r2_store_elect(s, "solo", 4, leader_fn, NULL), 0);
    assert_int_equal(r2_store_put(s, "/outage/eph", "e", 1, R2_VER_CREATE,
                                  R2_PUT_EPHEMERAL, NULL), 0);
    put_str(s, "/outage/keep", "k", R2_VER_CREATE, 0);
    assert_true(wait_until((bool (*)(void *))r2_store_is_leader, s, 5000));
    usleep(100000);
    assert_int_equal(leader_calls, 1); /* told once: leader */
    assert_true(leader_last);

    assert_int_equal(pom_zk_pause(&zk), 0); /* frozen, sockets open */
    outage_calls(s, 5000);
    assert_false(r2_store_is_leader(s)); /* gave up leadership (invariant 3) */
    assert_int_equal(leader_calls, 2);     /* and was told */
    assert_false(leader_last);
    assert_int_equal(pom_zk_resume(&zk), 0);

    long t0 = now_ms();
    assert_true(wait_until(store_works, s, 15000));
    printf("outage: working again %ld ms after resume\n", now_ms() - t0);
    get_str(s, "/outage/keep", "k", 0);
    /* same session or a new one: the ephemeral and the leadership return */
    struct gone_arg g = { s, "/outage/eph" };
    long end = now_ms() + 3 * SESSION_MS;
    while (now_ms() < end && record_gone(&g))
        usleep(20000);
    get_str(s, "/outage/eph", "e", 0);
    assert_true(wait_until((bool (*)(void *))r2_store_is_leader, s, 3 * SESSION_MS));
    usleep(100000);
    assert_int_equal(leader_calls, 3);
    assert_true(leader_last);
    r2_store_close(s);
}

static void test_zk_server_restart(void **state)
{
    (void)state;
    r2_store *s = must_open();
    put_str(s, "/restart/keep", "k", R2_VER_CREATE, 0);
    put_str(s, "/restart/keep", "k2", 0, 1);
    assert_int_equal(pom_zk_stop(&zk), 0);
    long t0 = now_ms();
    int rc = r2_store_get(s, "/restart/keep", NULL, NULL, NULL);
    assert_true(rc == -ENOTCONN || rc == -ETIMEDOUT);
    assert_true(now_ms() - t0 <= CALL_MS + 1000);
    outage_calls(s, 1000);
    assert_int_equal(pom_zk_restart(&zk), 0); /* same data folder and port */
    assert_true(wait_until(store_works, s, 15000));
    get_str(s, "/restart/keep", "k2", 1);
    r2_store_close(s);
    /* a new session reads the same */
    s = must_open();
    get_str(s, "/restart/keep", "k2", 1);
    r2_store_close(s);
}

static void test_zk_open_errors(void **state)
{
    (void)state;
    r2_store *s = NULL;
    r2_store_zk_options o = { .hosts = NULL };
    assert_int_equal(r2_store_zk_open(&o, &s), -EINVAL);
    o.hosts = zk.hosts;
    o.root = "no-slash";
    assert_int_equal(r2_store_zk_open(&o, &s), -EINVAL);
    o.root = "/";
    assert_int_equal(r2_store_zk_open(&o, &s), -EINVAL);
    /* nobody listens there: a clear error within the call timeout */
    int port = pom_free_port();
    char hosts[64];
    snprintf(hosts, sizeof hosts, "127.0.0.1:%d", port);
    o.hosts = hosts;
    o.root = "/x";
    o.call_timeout_ms = 1000;
    long t0 = now_ms();
    assert_int_equal(r2_store_zk_open(&o, &s), -ENOTCONN);
    assert_true(now_ms() - t0 < 3000);
}
#endif /* R2_TEST_ZK */

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    xt_log_set_level(XT_LOG_WARN);
    const struct CMUnitTest tests[] = {
        T(test_crud_and_cas),
        T(test_bad_arguments),
        T(test_tree_and_list),
        T(test_multi_atomic),
        T(test_random_model),
        T(test_alloc_id_unique),
        T(test_ephemeral_and_persistence),
        T(test_watch),
#if R2_TEST_ZK
        T(test_zk_election),
        T(test_zk_outage_pause),
        T(test_zk_server_restart),
        T(test_zk_open_errors),
#else
        T(test_embedded_election),
        T(test_embedded_corruption),
        T(test_embedded_alloc_failures),
        T(test_embedded_full_disk),
#endif
    };
#if R2_TEST_ZK
    if (!pom_zk_available()) {
        printf("SKIP: java or /usr/share/java/zookeeper.jar missing "
               "(apt-get install zookeeper)\n");
        return 77;
    }
    int rc = pom_zk_start(&zk);
    if (rc < 0) {
        fprintf(stderr, "cannot start ZooKeeper: %s\n", strerror(-rc));
        return 1;
    }
    printf("ZooKeeper pid %d on %s, folder %s\n", (int)zk.pid, zk.hosts, zk.dir);
    int failed = cmocka_run_group_tests_name("r2_store_zk", tests, NULL, NULL);
    pom_zk_destroy(&zk);
    return failed;
#else
    return cmocka_run_group_tests_name("r2_store_embedded", tests, NULL, NULL);
#endif
}
