/*
 * test_mds_group.c -- commit groups and their two-phase commit:
 *  - writers in many threads while groups commit, then a crash at a random
 *    point of a 2PC: every change a sync acknowledged is there, every row
 *    whole, listing and lookups agree (repeated over several restarts);
 *  - 2PC with failures on one of two participants: all-or-nothing, for a
 *    coordinator crash between ANY two of its store calls (sweep);
 *  - commit errors after the commit point are finished by the coordinator
 *    or by recovery; an ambiguous commit at home is resolved;
 *  - sync shares commits; the dirty-bytes bound closes groups early;
 *  - a memory bound below the dirty set: the pressure hook commits, then
 *    eviction brings memory back under the bound;
 *  - a full disk: a group that adds data is refused, one that frees more
 *    than it adds commits from the reserve, with the refused write in it;
 *  - an idle slice that lost half its rows in a delta gets a fold image
 *    through an ordinary commit, and reloads whole from it;
 *  - a close while the committer folds finds no writer inside.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "mds_test_env.h"

static uint64_t g_seed;

static void name_of(char *buf, unsigned thread, unsigned k)
{
    snprintf(buf, 64, "w%u-key-%u", thread, k);
}

static void test_commit_and_reload(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 5, .split = 32 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen = 0;
    assert_int_equal(mds_table_mktable(v.t, 1, 500, &gen), 0);
    assert_int_equal(mds_table_mktable(v.t, 1, 500, NULL), -EEXIST);
    char name[64];
    for (unsigned k = 0; k < 300; k++) {
        name_of(name, 0, k);
        assert_int_equal(tenv_put(&v, 500, name, k, 1, &gen), 0);
    }
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    struct mds_group_info gi;
    mds_group_info(v.g, &gi);
    assert_true(gi.committed_gen >= gen);
    uint32_t epoch = gi.epoch;
    tenv_crash(&v);
    assert_int_equal(tenv_start(&v), 0);
    mds_group_info(v.g, &gi);
    assert_int_equal(gi.epoch, epoch + 1);
    for (unsigned k = 0; k < 300; k++) {
        uint64_t id, seq;
        name_of(name, 0, k);
        assert_int_equal(tenv_get(&v, 500, name, &id, &seq), 1);
        assert_int_equal(id, k);
    }
    uint8_t *bm;
    size_t bmlen;
    assert_int_equal(mds_table_bitmap(v.t, 1, 500, &bm, &bmlen), 0);
    xt_free(bm);
    assert_int_equal(mds_table_mktable(v.t, 1, 500, NULL), -EEXIST);
    tenv_fini(&v);
}

/* ---- many writers, crash, check ------------------------------------------ */

enum { W_THREADS = 4, W_KEYS = 150 };

struct hist {
    uint64_t *seq; /* events: seq, 0 = deleted */
    size_t n, cap;
    long acked;    /* index of the last acknowledged event, -1: none */
};

struct writer {
    struct tenv *v;
    unsigned id;
    uint64_t seed;
    struct hist h[W_KEYS];
    uint64_t next_seq;
    atomic_bool *stop;
    unsigned syncs_ok;
};

static void hist_add(struct hist *h, uint64_t seq)
{
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 8;
        h->seq = realloc(h->seq, h->cap * sizeof *h->seq);
    }
    h->seq[h->n++] = seq;
}

static void *writer_main(void *p)
{
    struct writer *w = p;
    char name[64];
    uint64_t maxgen = 0;
    long pending[W_KEYS];
    for (int k = 0; k < W_KEYS; k++)
        pending[k] = -2;
    while (!atomic_load(w->stop)) {
        unsigned k = (unsigned)(tu_rand(&w->seed) % W_KEYS);
        name_of(name, w->id, k);
        uint64_t gen = 0;
        int rc;
        if (tu_rand(&w->seed) % 8 == 0) {
            rc = mds_table_delete(w->v->t, 1, 600, name, strlen(name),
                                  xt_hash_name(name, strlen(name)), NULL, NULL, &gen);
            if (rc == 0)
                hist_add(&w->h[k], 0);
            else if (rc != -ENOENT)
                fail_msg("delete %s: %d", name, rc);
        } else {
            uint64_t seq = ++w->next_seq;
            rc = tenv_put(w->v, 600, name, (uint64_t)w->id << 32 | k, seq, &gen);
            if (rc != 0)
                fail_msg("put %s: %d", name, rc);
            hist_add(&w->h[k], seq);
        }
        if (rc == 0) {
            pending[k] = (long)w->h[k].n - 1;
            maxgen = gen > maxgen ? gen : maxgen;
        }
        if (tu_rand(&w->seed) % 16 == 0 && maxgen) {
            if (mds_group_sync(w->v->g, maxgen, 300) == 0) {
                w->syncs_ok++;
                for (int j = 0; j < W_KEYS; j++)
                    if (pending[j] >= 0)
                        w->h[j].acked = pending[j];
            }
        }
    }
    return NULL;
}

/* The durable state of every key is one it took at or after its last
 * acknowledged change. Returns the number of present keys. */
static unsigned check_writers(struct tenv *v, struct writer *ws)
{
    unsigned present = 0;
    char name[64];
    for (unsigned t = 0; t < W_THREADS; t++)
        for (unsigned k = 0; k < W_KEYS; k++) {
            struct hist *h = &ws[t].h[k];
            uint64_t id = 0, seq = 0;
            name_of(name, t, k);
            int r = tenv_get(v, 600, name, &id, &seq);
            assert_true(r >= 0); /* never torn */
            if (r == 1) {
                present++;
                assert_int_equal(id, (uint64_t)t << 32 | k);
            }
            uint64_t durable = r == 1 ? seq : 0;
            bool ok = h->acked < 0 && durable == 0; /* initial: absent */
            for (long j = h->acked < 0 ? 0 : h->acked; j < (long)h->n && !ok; j++)
                ok = h->seq[j] == durable;
            if (!ok)
                fail_msg("key %s: durable seq %llu, acked event %ld of %zu (seq %llu)", name,
                         (unsigned long long)durable, h->acked, h->n,
                         (unsigned long long)(h->acked >= 0 ? h->seq[h->acked] : 0));
            /* What is durable now is the new baseline. */
            h->n = 0;
            hist_add(h, durable);
            h->acked = 0;
        }
    return present;
}

struct lister {
    unsigned rows;
    uint64_t last_cookie;
    bool first;
};

static int list_cb(void *arg, const xt_slice_entry *e)
{
    struct lister *l = arg;
    uint64_t id, seq;
    if (!tu_row_ok(e->row, e->row_len, &id, &seq))
        return -EBADMSG;
    if (!l->first && e->cookie <= l->last_cookie)
        return -EILSEQ;
    l->first = false;
    l->last_cookie = e->cookie;
    l->rows++;
    return 0;
}

static unsigned list_all(struct tenv *v, uint64_t table, size_t page)
{
    struct lister l = { 0, 0, true };
    uint64_t cookie = 0;
    do {
        uint64_t next;
        int n = mds_table_list(v->t, 1, table, cookie, page, list_cb, &l, &next);
        assert_true(n >= 0);
        assert_true(next > cookie || next == XT_COOKIE_END);
        cookie = next;
    } while (cookie != XT_COOKIE_END);
    return l.rows;
}

static void test_writers_then_crash(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 3, .split = 48 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen;
    assert_int_equal(mds_table_mktable(v.t, 1, 600, &gen), 0);
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    struct writer *ws = calloc(W_THREADS, sizeof *ws);
    uint64_t s = g_seed;
    for (unsigned t = 0; t < W_THREADS; t++) {
        ws[t].v = &v;
        ws[t].id = t;
        ws[t].seed = g_seed * 7 + t;
        for (int k = 0; k < W_KEYS; k++)
            ws[t].h[k].acked = -1;
    }
    for (int round = 0; round < 4; round++) {
        atomic_bool stop = false;
        pthread_t th[W_THREADS];
        for (unsigned t = 0; t < W_THREADS; t++) {
            ws[t].stop = &stop;
            pthread_create(&th[t], NULL, writer_main, &ws[t]);
        }
        tu_sleep_ms(300 + (unsigned)(tu_rand(&s) % 300));
        /* SIGKILL at a random point of the coordinator's store calls. */
        mds_store_local_sever(v.mem, (long)(tu_rand(&s) % 8));
        tu_sleep_ms(20);
        atomic_store(&stop, true);
        for (unsigned t = 0; t < W_THREADS; t++)
            pthread_join(th[t], NULL);
        struct mds_group_info gi;
        mds_group_info(v.g, &gi);
        tenv_crash(&v);
        mds_store_local_sever(v.mem, -1);
        assert_int_equal(tenv_start(&v), 0);
        unsigned present = check_writers(&v, ws);
        unsigned listed = list_all(&v, 600, 1 + tu_rand(&s) % 60);
        unsigned syncs = 0;
        for (unsigned t = 0; t < W_THREADS; t++)
            syncs += ws[t].syncs_ok;
        fprintf(stderr, "round %d: commits %llu aborts %llu, acked syncs %u, present %u, "
                "listed %u\n", round, (unsigned long long)gi.commits,
                (unsigned long long)gi.aborts, syncs, present, listed);
        assert_int_equal(listed, present);
        assert_true(syncs > 0);
    }
    for (unsigned t = 0; t < W_THREADS; t++)
        for (int k = 0; k < W_KEYS; k++)
            free(ws[t].h[k].seq);
    free(ws);
    char dump[4096];
    mds_stats_dump_text(v.stats, dump, sizeof dump);
    fprintf(stderr, "%s", dump);
    tenv_fini(&v);
}

/* ---- 2PC with failures ------------------------------------------------------ */

/* Tables 10 and 11: their slice 0 live on different sites (tu_locate2). */
static void two_tables(struct tenv *v)
{
    uint64_t gen;
    assert_int_equal(mds_table_mktable(v->t, 1, 10, &gen), 0);
    assert_int_equal(mds_table_mktable(v->t, 1, 11, &gen), 0);
    assert_int_equal(mds_group_sync(v->g, gen, 5000), 0);
    assert_int_not_equal(tu_locate2(NULL, 1, 10, 0), tu_locate2(NULL, 1, 11, 0));
}

/* x in table 10 and y in table 11, in one group (the interval is long). */
static uint64_t write_pair(struct tenv *v, uint64_t seq)
{
    uint64_t g1, g2;
    assert_int_equal(tenv_put(v, 10, "x", 10, seq, &g1), 0);
    assert_int_equal(tenv_put(v, 11, "y", 11, seq, &g2), 0);
    assert_int_equal(g1, g2);
    return g2;
}

/* 1 both at seq, 0 both older/absent; fails when torn. */
static int pair_state(struct tenv *v, uint64_t seq)
{
    uint64_t id, sx = 0, sy = 0;
    int rx = tenv_get(v, 10, "x", &id, &sx), ry = tenv_get(v, 11, "y", &id, &sy);
    assert_true(rx >= 0 && ry >= 0);
    bool nx = rx == 1 && sx == seq, ny = ry == 1 && sy == seq;
    if (nx != ny)
        fail_msg("torn pair: x %d/%llu y %d/%llu want %llu", rx, (unsigned long long)sx, ry,
                 (unsigned long long)sy, (unsigned long long)seq);
    return nx;
}

static void test_prepare_failure_retried(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 10000, .split = 64 };
    assert_int_equal(tenv_start(&v), 0);
    two_tables(&v);
    for (int site = 1; site <= 2; site++) {
        mds_store_local_fail(v.mem, (uint32_t)site, MDS_LOCAL_PREPARE, 0, 2, -EIO, false);
        uint64_t gen = write_pair(&v, (uint64_t)site);
        assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
        struct mds_group_info gi;
        mds_group_info(v.g, &gi);
        assert_true(gi.aborts >= 2);
        assert_int_equal(pair_state(&v, (uint64_t)site), 1);
    }
    tenv_crash(&v);
    assert_int_equal(tenv_start(&v), 0);
    assert_int_equal(pair_state(&v, 2), 1);
    struct mds_store_local_counts c1, c2;
    mds_store_local_counts(v.mem, 1, &c1);
    mds_store_local_counts(v.mem, 2, &c2);
    assert_int_equal(c1.prepared_now + c2.prepared_now, 0);
    tenv_fini(&v);
}

/* The coordinator dies between any two of its store calls (sever after n
 * calls), restarts, recovers: the pair is all-or-nothing, and there when
 * the sync said so. */
static void test_crash_sweep_all_or_nothing(void **state)
{
    (void)state;
    int committed = 0, lost = 0;
    for (long n = 0; n < 24; n++) {
        for (int mode = 0; mode < 2; mode++) {
            struct tenv v = { .interval_ms = 10000, .split = 64 };
            assert_int_equal(tenv_start(&v), 0);
            two_tables(&v);
            if (mode == 1) /* and site 2 refuses its first prepare */
                mds_store_local_fail(v.mem, 2, MDS_LOCAL_PREPARE, 0, 1, -EIO, false);
            uint64_t gen = write_pair(&v, 5);
            mds_store_local_sever(v.mem, n);
            int rc = mds_group_sync(v.g, gen, 150);
            tenv_crash(&v);
            mds_store_local_sever(v.mem, -1);
            mds_store_local_fail(v.mem, 2, 0, 0, 0, 0, false);
            assert_int_equal(tenv_start(&v), 0);
            int st = pair_state(&v, 5);
            if (rc == 0)
                assert_int_equal(st, 1);
            committed += st;
            lost += !st;
            struct mds_store_local_counts c1, c2;
            mds_store_local_counts(v.mem, 1, &c1);
            mds_store_local_counts(v.mem, 2, &c2);
            assert_int_equal(c1.prepared_now + c2.prepared_now, 0);
            tenv_fini(&v);
        }
    }
    fprintf(stderr, "sweep: %d committed, %d rolled back\n", committed, lost);
    assert_true(committed > 0 && lost > 0);
}

static void test_commit_failure_finished(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 10000, .split = 64 };
    assert_int_equal(tenv_start(&v), 0);
    two_tables(&v);
    /* Site 2 (not home) fails its commit 3 times: the coordinator retries. */
    mds_store_local_fail(v.mem, 2, MDS_LOCAL_COMMIT, 0, 3, -ECONNRESET, false);
    uint64_t gen = write_pair(&v, 1);
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    assert_int_equal(pair_state(&v, 1), 1);
    /* Home's commit succeeds but its reply is lost: resolved by an abort
     * probe (-EINVAL: committed). */
    mds_store_local_fail(v.mem, 1, MDS_LOCAL_COMMIT, 0, 1, -ETIMEDOUT, true);
    gen = write_pair(&v, 2);
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    /* Site 2 cannot commit at all; the MDS crashes: recovery finishes. */
    mds_store_local_fail(v.mem, 2, MDS_LOCAL_COMMIT, 0, -1, -ECONNRESET, false);
    gen = write_pair(&v, 3);
    assert_int_equal(mds_group_sync(v.g, gen, 200), -ETIMEDOUT);
    tenv_crash(&v);
    mds_store_local_fail(v.mem, 2, 0, 0, 0, 0, false);
    assert_int_equal(tenv_start(&v), 0);
    assert_int_equal(pair_state(&v, 3), 1);
    assert_true(mds_stats_counter(v.stats, MDS_CTR_RECOVER_COMMITS) >= 1);
    /* A participant that loses its undecided prepares before the commit
     * point: the group aborts, and the next one commits. */
    mds_store_local_fail(v.mem, 1, MDS_LOCAL_COMMIT, 0, 1, -ECONNRESET, false);
    gen = write_pair(&v, 4);
    assert_int_equal(mds_store_local_crash(v.mem, 1), 0); /* nothing prepared yet */
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    assert_int_equal(pair_state(&v, 4), 1);
    tenv_fini(&v);
}

struct syncer {
    struct tenv *v;
    unsigned id;
};

static void *sync_main(void *p)
{
    struct syncer *s = p;
    char name[64];
    for (unsigned i = 0; i < 40; i++) {
        uint64_t gen;
        name_of(name, s->id, i);
        if (tenv_put(s->v, 700, name, s->id, i + 1, &gen) != 0 ||
            mds_group_sync(s->v->g, gen, 5000) != 0)
            abort();
    }
    return NULL;
}

static void test_sync_shares_commits(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 10000, .split = 8192 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen;
    assert_int_equal(mds_table_mktable(v.t, 1, 700, &gen), 0);
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    struct mds_group_info before, after;
    mds_group_info(v.g, &before);
    enum { N = 8 };
    pthread_t th[N];
    struct syncer s[N];
    for (unsigned i = 0; i < N; i++) {
        s[i] = (struct syncer){ &v, i };
        pthread_create(&th[i], NULL, sync_main, &s[i]);
    }
    for (unsigned i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    mds_group_info(v.g, &after);
    uint64_t commits = after.commits - before.commits, syncs = after.syncs - before.syncs;
    fprintf(stderr, "%llu syncs shared %llu commits (%.2f syncs per commit)\n",
            (unsigned long long)syncs, (unsigned long long)commits,
            (double)syncs / (double)commits);
    assert_int_equal(syncs, N * 40);
    assert_true(commits < syncs);
    assert_true(commits > 0);
    tenv_fini(&v);
}

static void test_dirty_bound_closes_early(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 100000, .split = 8192, .dirty_bound = 4096 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen;
    assert_int_equal(mds_table_mktable(v.t, 1, 800, &gen), 0);
    char name[64];
    uint64_t first = 0;
    for (unsigned i = 0; i < 400; i++) {
        name_of(name, 9, i);
        assert_int_equal(tenv_put(&v, 800, name, 9, i + 1, &gen), 0);
        if (!first)
            first = gen;
    }
    /* No sync: the bound alone must have committed the early groups. */
    struct mds_group_info gi;
    for (int i = 0; i < 500; i++) {
        mds_group_info(v.g, &gi);
        if (gi.committed_gen >= first)
            break;
        tu_sleep_ms(2);
    }
    assert_true(gi.committed_gen >= first);
    assert_true(mds_stats_counter(v.stats, MDS_CTR_EARLY_CLOSES) > 0);
    tenv_fini(&v);
}

/* Memory bound far below the data: dirty slices are pinned until committed;
 * the pressure hook closes groups; after a sync memory returns under the
 * bound and every row is reachable (reloaded from the store). */
static void test_memory_bound_with_dirty_slices(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 100000, .split = 64, .mem_bound = 64 << 10 };
    assert_int_equal(tenv_start(&v), 0);
    enum { TABLES = 12, ROWS = 400 };
    uint64_t gen = 0;
    for (unsigned t = 0; t < TABLES; t++)
        assert_int_equal(mds_table_mktable(v.t, 1, 900 + t, &gen), 0);
    char name[64];
    for (unsigned i = 0; i < ROWS; i++)
        for (unsigned t = 0; t < TABLES; t++) {
            name_of(name, t, i);
            assert_int_equal(tenv_put(&v, 900 + t, name, t, i + 1, &gen), 0);
        }
    assert_int_equal(mds_group_sync(v.g, gen, 10000), 0);
    assert_int_equal(mds_cache_evict(v.c) >= 0, 1);
    struct mds_cache_info ci;
    mds_cache_info(v.c, &ci);
    fprintf(stderr, "after sync: %zu bytes (bound %zu), %zu entries, %.1f bytes/row, "
            "%llu pressure calls, %llu evictions\n", ci.bytes, ci.bound, ci.entries,
            ci.bytes_per_row, (unsigned long long)ci.pressure_calls,
            (unsigned long long)ci.evictions);
    assert_true(ci.pressure_calls > 0);
    assert_true(ci.evictions > 0);
    for (unsigned t = 0; t < TABLES; t++)
        for (unsigned i = 0; i < ROWS; i++) {
            uint64_t id, seq;
            name_of(name, t, i);
            assert_int_equal(tenv_get(&v, 900 + t, name, &id, &seq), 1);
            assert_int_equal(seq, i + 1);
        }
    mds_cache_info(v.c, &ci);
    /* Meta slices stay pinned (mds_table invariant 4); the rest fits. */
    assert_true(ci.bytes <= ci.bound + TABLES * 2048);
    tenv_crash(&v);
    assert_int_equal(tenv_start(&v), 0);
    for (unsigned t = 0; t < TABLES; t++) {
        name_of(name, t, ROWS - 1);
        uint64_t id, seq;
        assert_int_equal(tenv_get(&v, 900 + t, name, &id, &seq), 1);
    }
    tenv_fini(&v);
}

/* A full disk (docs/mds-commit.md "A full disk"): both sites keep only
 * their reserve (mds_store_local_full: a prepare without `reserve` on every
 * record answers -ENOSPC). A new row's sync answers -ENOSPC and the group
 * says the disk is short; removing 20 rows frees more than the refused row
 * adds, so that group commits, the refused row with it. A row added after
 * is refused again until the disk has room. All of it survives a crash. */
static void test_full_disk_frees(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 10000, .split = 1024 };
    assert_int_equal(tenv_start(&v), 0);
    two_tables(&v);
    uint64_t gen = 0, id, seq;
    char name[64];
    for (unsigned k = 0; k < 40; k++) {
        name_of(name, 0, k);
        assert_int_equal(tenv_put(&v, 10, name, k, 40 + k, &gen), 0);
    }
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    assert_false(mds_group_space_short(v.g));
    mds_store_local_full(v.mem, 1, true);
    mds_store_local_full(v.mem, 2, true);
    assert_int_equal(tenv_put(&v, 10, "late", 99, 49, &gen), 0);
    assert_int_equal(mds_group_sync(v.g, gen, 5000), -ENOSPC);
    assert_true(mds_group_space_short(v.g));
    for (unsigned k = 0; k < 40; k += 2) {
        name_of(name, 0, k);
        assert_int_equal(mds_table_delete(v.t, 1, 10, name, strlen(name),
                                          xt_hash_name(name, strlen(name)), NULL, NULL, &gen),
                         0);
    }
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    assert_int_equal(tenv_put(&v, 10, "later", 98, 48, &gen), 0);
    assert_int_equal(mds_group_sync(v.g, gen, 5000), -ENOSPC);
    tenv_crash(&v);
    assert_int_equal(tenv_start(&v), 0);
    for (unsigned k = 0; k < 40; k++) {
        name_of(name, 0, k);
        assert_int_equal(tenv_get(&v, 10, name, &id, &seq), k % 2);
    }
    assert_int_equal(tenv_get(&v, 10, "late", &id, &seq), 1);
    assert_int_equal(tenv_get(&v, 10, "later", &id, &seq), 0); /* never acknowledged */
    mds_store_local_full(v.mem, 1, false);
    mds_store_local_full(v.mem, 2, false);
    assert_int_equal(tenv_put(&v, 10, "later", 98, 48, &gen), 0);
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    tenv_fini(&v);
}

/* A full disk, one slice: a refused row and a removal of a smaller row in
 * the same slice, so the slice grows in all. The removal still makes the
 * group one that frees (mds_cent_commit.removed): it commits from the
 * reserve, the refused row with it. Before, only a slice that shrank in
 * all counted and the sync after the removal answered -ENOSPC (the fsync
 * of a truncate on a full disk, test_pomfs_diskfull). */
static void test_full_disk_frees_same_slice(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 10000, .split = 1024 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen = 0, id, seq;
    assert_int_equal(mds_table_mktable(v.t, 1, 12, &gen), 0);
    assert_int_equal(tenv_put(&v, 12, "small", 1, 1, &gen), 0); /* 1 byte */
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    mds_store_local_full(v.mem, 1, true);
    mds_store_local_full(v.mem, 2, true);
    assert_int_equal(tenv_put(&v, 12, "grown", 2, 49, &gen), 0); /* 49 bytes */
    assert_int_equal(mds_group_sync(v.g, gen, 5000), -ENOSPC);
    assert_int_equal(mds_table_delete(v.t, 1, 12, "small", 5, xt_hash_name("small", 5), NULL,
                                      NULL, &gen),
                     0);
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    tenv_crash(&v);
    assert_int_equal(tenv_start(&v), 0);
    assert_int_equal(tenv_get(&v, 12, "small", &id, &seq), 0);
    assert_int_equal(tenv_get(&v, 12, "grown", &id, &seq), 1);
    mds_store_local_full(v.mem, 1, false);
    mds_store_local_full(v.mem, 2, false);
    tenv_fini(&v);
}

static void test_idle_slice_folds(void **state)
{
    (void)state;
    struct tenv v = { .interval_ms = 20, .split = 1024 };
    assert_int_equal(tenv_start(&v), 0);
    two_tables(&v);
    uint64_t gen = 0, id, seq;
    char name[64];
    for (unsigned k = 0; k < 400; k++) {
        name_of(name, 0, k);
        assert_int_equal(tenv_put(&v, 10, name, k, 1, &gen), 0);
    }
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    uint64_t images = mds_stats_counter(v.stats, MDS_CTR_RECORDS_IMAGE);
    for (unsigned k = 0; k < 400; k += 2) {
        name_of(name, 0, k);
        assert_int_equal(mds_table_delete(v.t, 1, 10, name, strlen(name),
                                          xt_hash_name(name, strlen(name)), NULL, NULL, &gen),
                         0);
    }
    assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
    /* The removals are a delta (small beside the image): the image stays
     * live until the fold. A liveness bound, not a speed. */
    assert_int_equal(mds_stats_counter(v.stats, MDS_CTR_RECORDS_IMAGE), images);
    for (int i = 0; i < 1000 && mds_stats_counter(v.stats, MDS_CTR_FOLDS) == 0; i++)
        xt_sleep_ms(10);
    assert_true(mds_stats_counter(v.stats, MDS_CTR_FOLDS) >= 1);
    assert_int_equal(mds_group_sync(v.g, 0, 5000), 0);
    assert_true(mds_stats_counter(v.stats, MDS_CTR_RECORDS_IMAGE) > images);
    tenv_crash(&v);
    assert_int_equal(tenv_start(&v), 0);
    for (unsigned k = 0; k < 400; k++) {
        name_of(name, 0, k);
        assert_int_equal(tenv_get(&v, 10, name, &id, &seq), k % 2);
    }
    tenv_fini(&v);
}

/* A close while the committer folds: fold_idle enters the open group as
 * a writer does, so mds_group_close stops the committer before it checks
 * that no writer is inside (its assert fired when test_list_while_splitting
 * closed during a fold pass under load). Each round owes folds (a delta
 * committed on every cached slice) and closes at a random moment of the
 * passes that follow. */
static void test_close_while_folding(void **state)
{
    (void)state;
    uint64_t s = g_seed;
    struct tenv v = { .interval_ms = 1, .split = 16 };
    assert_int_equal(tenv_start(&v), 0);
    uint64_t gen = 0, id, seq;
    assert_int_equal(mds_table_mktable(v.t, 1, 12, &gen), 0);
    char name[64];
    for (unsigned round = 1; round <= 60; round++) {
        for (unsigned k = 0; k < 2000; k++) {
            name_of(name, 0, k);
            assert_int_equal(tenv_put(&v, 12, name, k, round, &gen), 0);
        }
        assert_int_equal(mds_group_sync(v.g, gen, 5000), 0);
        xt_sleep_until(xt_mono_ns() + tu_rand(&s) % 2500000u);
        tenv_crash(&v);
        assert_int_equal(tenv_start(&v), 0);
        name_of(name, 0, round % 2000);
        assert_int_equal(tenv_get(&v, 12, name, &id, &seq), 1);
        assert_int_equal(seq, round); /* synced before the close */
    }
    tenv_fini(&v);
}

int main(void)
{
    g_seed = tu_seed("test_mds_group");
    xt_log_set_level(XT_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commit_and_reload),
        cmocka_unit_test(test_prepare_failure_retried),
        cmocka_unit_test(test_commit_failure_finished),
        cmocka_unit_test(test_crash_sweep_all_or_nothing),
        cmocka_unit_test(test_sync_shares_commits),
        cmocka_unit_test(test_dirty_bound_closes_early),
        cmocka_unit_test(test_memory_bound_with_dirty_slices),
        cmocka_unit_test(test_writers_then_crash),
        cmocka_unit_test(test_full_disk_frees),
        cmocka_unit_test(test_full_disk_frees_same_slice),
        cmocka_unit_test(test_idle_slice_folds),
        cmocka_unit_test(test_close_while_folding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
