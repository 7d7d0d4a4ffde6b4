/*
 * test_mdsl_apply.c -- the index update rules (mdsl/mdsl_apply.c) and their
 * cost:
 *  - a commit reads a bounded number of index entries however many deltas
 *    its slice has accumulated (regression: it used to read them all);
 *  - random IMAGE/DELTA sequences with repeated, older and equal versions,
 *    aborts, GC passes and restarts: the index holds exactly what an
 *    independent model of rules (1) and (2) says, the maintained live bytes
 *    equal those recomputed at restart, and a rebuilt index is identical.
 */
#include "mdsl_test_util.h"

#include "mdsl_apply_i.h"
#include "mdsl_handle_i.h" /* s->idx: the read counter */

#define FS 5

static uint8_t buf[8][2048];

/* ---- cost ------------------------------------------------------------- */

static void test_commit_reads_bounded(void **state)
{
    (void)state;
    struct tu_env e;
    tu_env_init(&e, 1, 1u << 20);
    assert_int_equal(tu_open(&e), 0);
    const int n = 2000, image_every = 700;
    uint64_t since_image = 0, worst_delta = 0, total = 0;
    for (int i = 1; i <= n; i++) {
        bool image = i % image_every == 0;
        struct xt_store_rec r = tu_rec(image ? XT_STORE_IMAGE : XT_STORE_DELTA, FS, 1, 7, 0, 0,
                                   (uint64_t)i, buf[0], 32);
        uint64_t before = mdsl_index_reads(e.s->idx);
        assert_int_equal(mdsl_store_prepare(e.s, (uint64_t)i, &r, 1), 0);
        assert_int_equal(mdsl_store_commit(e.s, (uint64_t)i), 0);
        uint64_t reads = mdsl_index_reads(e.s->idx) - before;
        total += reads;
        if (image) {
            /* an image reads what it deletes (+1: the first key past it) */
            if (reads > since_image + 2)
                fail_msg("image commit %d read %llu entries for %llu deltas", i,
                         (unsigned long long)reads, (unsigned long long)since_image);
            since_image = 0;
        } else {
            since_image++;
            if (i > 1 && reads > worst_delta)
                worst_delta = reads;
        }
    }
    print_message("%d commits: %llu index entries read in all, at most %llu by a delta "
                  "commit\n", n, (unsigned long long)total, (unsigned long long)worst_delta);
    assert_true(worst_delta <= 1);
    assert_true(total <= 2 * (uint64_t)n);
    /* a restart forgets the states: the first commit reads the slice once */
    tu_close(&e);
    assert_int_equal(tu_open(&e), 0);
    struct xt_store_rec r = tu_rec(XT_STORE_DELTA, FS, 1, 7, 0, 0, (uint64_t)n + 1, buf[0], 32);
    assert_int_equal(mdsl_store_prepare(e.s, (uint64_t)n + 1, &r, 1), 0);
    uint64_t before = mdsl_index_reads(e.s->idx);
    assert_int_equal(mdsl_store_commit(e.s, (uint64_t)n + 1), 0);
    uint64_t first = mdsl_index_reads(e.s->idx) - before;
    assert_true(first <= since_image + 2);
    before = mdsl_index_reads(e.s->idx);
    r = tu_rec(XT_STORE_DELTA, FS, 1, 7, 0, 0, (uint64_t)n + 2, buf[0], 32);
    assert_int_equal(mdsl_store_prepare(e.s, (uint64_t)n + 2, &r, 1), 0);
    assert_int_equal(mdsl_store_commit(e.s, (uint64_t)n + 2), 0);
    assert_true(mdsl_index_reads(e.s->idx) - before <= 1);
    tu_env_free(&e);
}

/* ---- rules against a model --------------------------------------------- */

#define NT 2
#define NS 3
#define MAXP 512

struct mptr {
    uint64_t version;
    uint8_t type;
    uint32_t len;
};

/* The pointers rules (1) and (2) leave per slice, ascending versions. */
struct mslice {
    struct mptr p[MAXP];
    size_t n;
};

static struct mslice model[NT][NS];

static void model_apply(struct mslice *m, const struct xt_store_rec *r)
{
    bool has_img = false;
    uint64_t img = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->p[i].type == XT_STORE_IMAGE && (!has_img || m->p[i].version > img))
            has_img = true, img = m->p[i].version;
    bool image = r->type == XT_STORE_IMAGE;
    if (has_img && (image ? img > r->version : img >= r->version))
        return;
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!(m->p[i].version == r->version || (image && m->p[i].version < r->version)))
            m->p[k++] = m->p[i];
    assert_true(k < MAXP);
    size_t at = k;
    while (at > 0 && m->p[at - 1].version > r->version)
        at--;
    memmove(&m->p[at + 1], &m->p[at], (k - at) * sizeof m->p[0]);
    m->p[at] = (struct mptr){ r->version, r->type, r->len };
    m->n = k + 1;
}

struct seen {
    struct mptr p[NT][NS][MAXP];
    size_t n[NT][NS];
};

static int seen_cb(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    struct seen *s = arg;
    if (k->kind != MDSL_IK_SLICE || k->id.fsid != FS)
        return 0;
    assert_true(k->id.table >= 1 && k->id.table <= NT && k->id.slice < NS);
    size_t *n = &s->n[k->id.table - 1][k->id.slice];
    assert_true(*n < MAXP);
    s->p[k->id.table - 1][k->id.slice][(*n)++] = (struct mptr){ k->version, p->type, p->len - MDSL_HDR_SIZE };
    return 0;
}

static void check_index(mdsl_store *st, uint64_t seed)
{
    static struct seen s;
    memset(&s, 0, sizeof s);
    assert_int_equal(mdsl_index_scan_all(st->idx, seen_cb, &s), 0);
    for (int t = 0; t < NT; t++)
        for (int sl = 0; sl < NS; sl++) {
            const struct mslice *m = &model[t][sl];
            bool same = s.n[t][sl] == m->n;
            for (size_t i = 0; same && i < m->n; i++)
                same = s.p[t][sl][i].version == m->p[i].version &&
                       s.p[t][sl][i].type == m->p[i].type && s.p[t][sl][i].len == m->p[i].len;
            if (!same)
                fail_msg("seed %llu: table %d slice %d: index has %zu pointers, model %zu",
                         (unsigned long long)seed, t + 1, sl, s.n[t][sl], m->n);
        }
}

static uint64_t live_bytes(mdsl_store *s)
{
    struct mdsl_stat st;
    assert_int_equal(mdsl_store_stat(s, &st), 0);
    return st.live_bytes;
}

static void test_rules_model(void **state)
{
    (void)state;
    for (uint64_t seed0 = 1; seed0 <= 8; seed0++) {
        uint64_t seed = seed0 * 0x9E3779B97F4A7C15ull;
        print_message("seed %llu\n", (unsigned long long)seed0);
        memset(model, 0, sizeof model);
        uint64_t base[NT][NS] = { { 0 } };
        struct tu_env e;
        tu_env_init(&e, seed, 16384);
        e.o.gc_threshold = 0.6;
        assert_int_equal(tu_open(&e), 0);
        for (uint64_t txid = 1; txid <= 400; txid++) {
            struct xt_store_rec r[4];
            size_t n = 1 + tu_rnd(&seed) % 4;
            for (size_t k = 0; k < n; k++) {
                int t = (int)(tu_rnd(&seed) % NT), sl = (int)(tu_rnd(&seed) % NS);
                /* mostly new versions; sometimes repeated or older ones */
                uint64_t x = tu_rnd(&seed) % 10;
                uint64_t v = x < 6 ? ++base[t][sl] : base[t][sl] - tu_rnd(&seed) % 6;
                if (v == 0 || v > base[t][sl])
                    v = ++base[t][sl];
                uint8_t type = tu_rnd(&seed) % 7 == 0 ? XT_STORE_IMAGE : XT_STORE_DELTA;
                uint32_t len = 1 + (uint32_t)(tu_rnd(&seed) % 2000);
                r[k] = tu_rec(type, FS, (uint64_t)t + 1, (uint32_t)sl, 0, 0, v, buf[k], len);
            }
            assert_int_equal(mdsl_store_prepare(e.s, txid, r, n), 0);
            if (tu_rnd(&seed) % 8 == 0) {
                assert_int_equal(mdsl_store_abort(e.s, txid), 0);
            } else {
                assert_int_equal(mdsl_store_commit(e.s, txid), 0);
                for (size_t k = 0; k < n; k++)
                    model_apply(&model[r[k].id.table - 1][r[k].id.slice], &r[k]);
            }
            uint64_t c = tu_rnd(&seed) % 40;
            if (c == 0)
                assert_true(mdsl_store_gc(e.s, 8) >= 0);
            if (c == 1) {
                uint64_t lb = live_bytes(e.s);
                tu_close(&e);
                assert_int_equal(tu_open(&e), 0);
                assert_int_equal(live_bytes(e.s), lb); /* recomputed = maintained */
            }
            if (txid % 10 == 0)
                check_index(e.s, seed0);
        }
        check_index(e.s, seed0);
        uint64_t lb = live_bytes(e.s);
        tu_close(&e);
        struct tu_dump d1, d2;
        tu_dump_index(e.index, &d1);
        assert_int_equal(mdsl_index_destroy(e.index), 0);
        assert_int_equal(tu_open(&e), 0);
        check_index(e.s, seed0);
        assert_int_equal(live_bytes(e.s), lb);
        tu_close(&e);
        tu_dump_index(e.index, &d2);
        if (d1.n != d2.n || memcmp(d1.b, d2.b, d1.n))
            fail_msg("seed %llu: rebuilt index differs", (unsigned long long)seed0);
        free(d1.b);
        free(d2.b);
        tu_env_free(&e);
    }
}

int main(void)
{
    xt_log_set_level(XT_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commit_reads_bounded),
        cmocka_unit_test(test_rules_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
