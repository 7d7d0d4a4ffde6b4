/*
 * test_mds_ring1.c -- ring 1 (slice -> MDSL) changes under one MDS
 * (docs/mdsl-scale.md "Rules"): placement with history, moves inside a
 * commit group, grown participants, decision records read everywhere. Three
 * MDSL sites (1 = A, the home; 2 = B; 3 = C) in one mds_store_local; ring 1
 * is a seeded rendezvous map over a set of sites (struct pmap), so a change
 * moves only the slices of the sites that joined or left, as a ring would.
 * The background mover's index walk (mds_mover.c, test_mds_mover.c) is
 * stood in for by move_pass: every cached slice through mds_group_move,
 * then a sync.
 *
 * Checked, seeds printed:
 *   test_mem_tombstone: mds_store_local's MOVED tombstone and index rules.
 *   test_load_history: a load finds a slice at the previous placement and
 *     remembers where; once the change is finished it is not looked for
 *     there; a slice whose only copy is a tombstone answers -EAGAIN.
 *   test_change_while_creating: 4 threads create rows in 12 tables while
 *     ring 1 goes A,B -> A,B,C -> A,B -> B,C (A drained); after each change
 *     the mover pass moves every slice; at the end every slice is live at
 *     exactly one site, the one the last placement names, and a restarted
 *     MDS that knows only that placement finds every row.
 *   test_crash_sweep: the MDS dies between any two store calls of a moving
 *     group (mds_store_local_sever: the "A killed" rows of the crash table);
 *     after recovery the rows synced before are there, the group's own rows
 *     are all there or all gone (all when its sync said so), every slice is
 *     live at exactly one site, nothing is left prepared.
 *   test_participant_down: the old (X) or new (Y) MDSL stops answering
 *     commits after voting, then restarts (mds_store_local_crash), with the
 *     MDS running or restarted meanwhile: while Y is out the moved slice
 *     loads -EAGAIN (X holds the tombstone), while X is out it loads from
 *     Y; afterwards every row is there and each slice live at one site.
 *   test_move_aborts: the new MDSL refuses prepares; the moving groups
 *     abort and count in move_aborts, not moves; then they land.
 *   test_decision_everywhere: settle lists prepared txids at a participant
 *     added at run time, and decides by the newest decision record found at
 *     any participant (not only the home's).
 *   test_settle_running_again: another MDS settles MDS 7 while it runs
 *     again (mds_group.h invariant 10): a transaction of it committed at
 *     the home after the settler read its decision record is committed,
 *     not aborted, at B; one prepared at both is aborted at the home
 *     first (so MDS 7's commit point fails); one not yet prepared at the
 *     home is left to MDS 7. Without the home first each case ends
 *     committed at one site and aborted at the other.
 *   test_recover_commit_in_flight: MDS 7 was killed while the home still
 *     served its commit, which lands after the restarted MDS read its
 *     decision record: recovery commits the txid at B too.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "mds_test_ring1.h"

/* The mover's marking ("The mover", minus the index walk): every cached
 * slice the current placement puts elsewhere moves with the next commit.
 * Returns how many were marked; *last: the newest group to sync on. */
static unsigned mark_moves(struct env *v, uint64_t *last)
{
    struct mds_key *keys;
    size_t n;
    assert_int_equal(mds_cache_keys(v->c, &keys, &n), 0);
    unsigned marked = 0;
    *last = 0;
    for (size_t i = 0; i < n; i++) {
        mds_cent *e;
        if (mds_cache_peek(v->c, &keys[i], &e) < 0)
            continue;
        uint64_t gen;
        assert_int_equal(mds_group_move(v->g, e, &gen), 0);
        mds_cache_put(v->c, e);
        if (gen) {
            marked++;
            *last = gen > *last ? gen : *last;
        }
    }
    xt_free(keys);
    return marked;
}

/* A pass of the mover: mark, then wait for the commit. */
static unsigned move_pass(struct env *v)
{
    uint64_t last;
    unsigned marked = mark_moves(v, &last);
    if (last)
        assert_int_equal(mds_group_sync(v->g, last, 10000), 0);
    return marked;
}


/* ---- the in-memory store's tombstones ------------------------------------ */

static struct xt_store_rec rec(uint64_t table, uint64_t version, bool image, const char *bytes)
{
    return (struct xt_store_rec){ .id = { .fsid = 1, .slice = 0, .table = table }, .version = version,
                             .type = image ? XT_STORE_IMAGE : XT_STORE_DELTA, .data = bytes, .len = strlen(bytes) };
}

static struct xt_store_rec tombstone(uint64_t table, uint64_t version)
{
    return (struct xt_store_rec){ .id = { .fsid = 1, .slice = 0, .table = table }, .version = version,
                             .type = XT_STORE_IMAGE, .data = "", .len = 0, .flags = XT_STORE_F_MOVED };
}

static void test_mem_tombstone(void **state)
{
    (void)state;
    mds_store_local *mem = mds_store_local_new();
    mds_store st;
    mds_store_local_bind(mem, &st);
    struct xt_store_load ld;
    assert_int_equal(put_rec(&st, SA, 1, rec(5, 1, true, "img1")), 0);
    assert_int_equal(put_rec(&st, SA, 2, rec(5, 2, false, "d2")), 0);
    assert_int_equal(put_rec(&st, SA, 3, tombstone(5, 3)), 0);
    /* Loads of a MOVED head answer -ESTALE; a delta on it is refused. */
    assert_int_equal(mds_store_load(&st, SA, (xt_slice_id){ .fsid = 1, .slice = 0, .table = 5 }, &ld), -ESTALE);
    struct xt_store_rec d = rec(5, 4, false, "d4");
    assert_int_equal(mds_store_prepare(&st, SA, 4, &d, 1), -ESTALE);
    /* A tombstone is an empty image only. */
    struct xt_store_rec bad = tombstone(5, 4);
    bad.data = "x";
    bad.len = 1;
    assert_int_equal(mds_store_prepare(&st, SA, 5, &bad, 1), -EINVAL);
    bad = tombstone(7, 1);
    bad.type = XT_STORE_DELTA;
    assert_int_equal(mds_store_prepare(&st, SA, 5, &bad, 1), -EINVAL);
    /* A newer image (the slice moved back) loads normally. */
    assert_int_equal(put_rec(&st, SA, 6, rec(5, 4, true, "img4")), 0);
    assert_int_equal(mds_store_load(&st, SA, (xt_slice_id){ .fsid = 1, .slice = 0, .table = 5 }, &ld), 0);
    assert_true(ld.has_image && ld.image.version == 4 && ld.ndeltas == 0);
    xt_store_load_free(&ld);
    /* Older records committed after a newer image are ignored, as the MDSL
     * index does (a late commit of an earlier holder, fenced below). */
    struct xt_store_rec i7 = rec(5, 7, true, "img7"), i6 = rec(5, 6, true, "img6"),
                   d7 = rec(5, 7, false, "d7"), t6 = tombstone(5, 6);
    assert_int_equal(mds_store_prepare(&st, SA, 10, &i7, 1), 0);
    assert_int_equal(mds_store_prepare(&st, SA, 11, &i6, 1), 0);
    assert_int_equal(mds_store_prepare(&st, SA, 12, &d7, 1), 0);
    assert_int_equal(mds_store_prepare(&st, SA, 13, &t6, 1), 0);
    for (uint64_t tx = 10; tx <= 13; tx++)
        assert_int_equal(mds_store_commit(&st, SA, tx), 0);
    assert_int_equal(mds_store_load(&st, SA, (xt_slice_id){ .fsid = 1, .slice = 0, .table = 5 }, &ld), 0);
    assert_true(ld.has_image && ld.image.version == 7 && ld.ndeltas == 0);
    assert_memory_equal(ld.image.data, "img7", 4);
    xt_store_load_free(&ld);
    /* The listing tells live from moved. */
    assert_int_equal(put_rec(&st, SA, 14, tombstone(6, 1)), 0);
    struct xt_store_slice *v;
    size_t n;
    assert_int_equal(mds_store_local_slices(mem, SA, &v, &n), 0);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i].moved, v[i].id.table == 6);
    xt_free(v);
    mds_store_local_free(mem);
}

/* ---- loads under a changing placement ------------------------------------ */

static void test_load_history(void **state)
{
    (void)state;
    mds_store_local *mem = mds_store_local_new();
    mds_store st;
    mds_store_local_bind(mem, &st);
    xt_slice *s = xt_slice_new(0, 0, 64);
    assert_non_null(s);
    uint8_t *img;
    size_t len;
    assert_int_equal(xt_slice_encode(s, &img, &len), 0);
    xt_slice_free(s);
    struct xt_store_rec r = { .id = { .fsid = 1, .slice = 0, .table = 40 }, .version = 3, .type = XT_STORE_IMAGE,
                         .data = img, .len = len };
    assert_int_equal(put_rec(&st, SA, 1, r), 0);
    struct mds_key k = { 1, 0, 40 };

    /* Ring 1 went A -> B: the slice is still at A, the previous placement. */
    mds_place *p = place_new(&P_B, &P_A);
    struct mds_cache_opts co = { .store = &st, .place = p };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&co, &c), 0);
    mds_cent *e;
    assert_int_equal(mds_cache_get(c, &k, &e), 0);
    assert_int_equal(mds_cent_commit(e)->site, SA);
    assert_int_equal(mds_cent_commit(e)->version, 3);
    mds_cache_put(c, e);
    assert_int_equal(mds_cache_drop(c, &k), 0);
    /* Finished without moving it: not looked for at A any more. */
    mds_place_finish(p);
    assert_int_equal(mds_cache_get(c, &k, &e), -ENOENT);
    mds_cache_free(c);
    mds_place_free(p);

    /* Half a move: the tombstone at A committed, the image at B not yet
     * (B's commit outstanding): no live copy, -EAGAIN, not -ENOENT. */
    assert_int_equal(put_rec(&st, SA, 2, tombstone(40, 4)), 0);
    r.version = 4;
    assert_int_equal(mds_store_prepare(&st, SB, 2, &r, 1), 0);
    p = place_new(&P_B, &P_A);
    co.place = p;
    assert_int_equal(mds_cache_new(&co, &c), 0);
    assert_int_equal(mds_cache_get(c, &k, &e), -EAGAIN);
    /* So with only the placement that still names A. */
    mds_place_finish(p);
    mds_place_change(p, locate_map, (void *)&P_A);
    mds_place_finish(p);
    assert_int_equal(mds_cache_get(c, &k, &e), -EAGAIN);
    /* B commits: found there, at the move's version. */
    mds_place_change(p, locate_map, (void *)&P_B);
    assert_int_equal(mds_store_commit(&st, SB, 2), 0);
    assert_int_equal(mds_cache_get(c, &k, &e), 0);
    assert_int_equal(mds_cent_commit(e)->site, SB);
    assert_int_equal(mds_cent_commit(e)->version, 4);
    mds_cache_put(c, e);
    mds_cache_free(c);
    mds_place_free(p);
    xt_free(img);
    mds_store_local_free(mem);
}

/* ---- ring 1 changes while threads create ---------------------------------- */

enum { NTAB = 12, NWRITER = 4, TAB0 = 300 };

struct writer {
    struct env *v;
    unsigned id;
    atomic_bool *stop;
    atomic_uint done;  /* rows created: names 0 .. done-1 */
    atomic_bool finished;
};

/* Creates rows until told to stop (so every ring change happens while all
 * writers write), paced (a pass of the mover takes a few commits) and
 * bounded. */
static void *writer_main(void *arg)
{
    struct writer *w = arg;
    char name[64];
    for (unsigned k = 0; !atomic_load(w->stop) && k < 6000; k++) {
        if (k % 8 == 7)
            tu_sleep_ms(1);
        row_name(name, "r", w->id, k);
        uint64_t gen;
        int rc = put_row(w->v, TAB0 + k % NTAB, name, (uint64_t)w->id << 32 | k, &gen);
        if (rc != 0)
            fail_msg("create %s: %d", name, rc);
        atomic_store(&w->done, k + 1);
    }
    atomic_store(&w->finished, true);
    return NULL;
}

/* Wait until every writer created `more` rows since the last call. */
static void wait_progress(struct writer *w, unsigned more)
{
    unsigned want[NWRITER];
    for (unsigned i = 0; i < NWRITER; i++)
        want[i] = atomic_load(&w[i].done) + more;
    for (unsigned i = 0; i < NWRITER; i++)
        while (atomic_load(&w[i].done) < want[i] && !atomic_load(&w[i].finished))
            tu_sleep_ms(1);
}

static void change_and_move(struct env *v, const struct pmap *to)
{
    mds_place_change(v->place, locate_map, (void *)to);
    unsigned marked = move_pass(v);
    fprintf(stderr, "ring 1 -> mask %#x: %u slices marked (%llu moves so far)\n", to->mask,
            marked, (unsigned long long)mds_stats_counter(v->stats, MDS_CTR_MOVES));
    mds_place_finish(v->place);
}

static void test_change_while_creating(void **state)
{
    (void)state;
    g_salt = tu_seed("test_change_while_creating");
    struct env v = { .interval_ms = 3 };
    env_start(&v, &P_AB, NULL, parts_ab, 2);
    for (unsigned t = 0; t < NTAB; t++)
        assert_int_equal(mds_table_mktable(v.t, 1, TAB0 + t, NULL), 0);
    struct writer w[NWRITER];
    pthread_t th[NWRITER];
    atomic_bool stop = false;
    for (unsigned i = 0; i < NWRITER; i++) {
        w[i] = (struct writer){ .v = &v, .id = i, .stop = &stop };
        atomic_init(&w[i].done, 0);
        atomic_init(&w[i].finished, false);
        assert_int_equal(pthread_create(&th[i], NULL, writer_main, &w[i]), 0);
    }
    /* R2 names C a participant before any placement names it ("Participants"). */
    wait_progress(w, 150);
    assert_int_equal(mds_group_add_participant(v.g, SC), 0);
    change_and_move(&v, &P_ABC);
    wait_progress(w, 150);
    change_and_move(&v, &P_AB);
    wait_progress(w, 150);
    change_and_move(&v, &P_BC); /* A drains */
    wait_progress(w, 150);
    atomic_store(&stop, true);
    for (unsigned i = 0; i < NWRITER; i++)
        pthread_join(th[i], NULL);
    /* Slices made or loaded during the last pass may have been missed. */
    while (move_pass(&v) > 0)
        ;
    assert_int_equal(mds_group_sync(v.g, 0, 10000), 0);
    size_t tomb;
    size_t slices = check_live_once(v.mem, &P_BC, &tomb);
    fprintf(stderr, "%zu slices, %zu tombstones, %llu moves (%llu bytes)\n", slices, tomb,
            (unsigned long long)mds_stats_counter(v.stats, MDS_CTR_MOVES),
            (unsigned long long)mds_stats_counter(v.stats, MDS_CTR_MOVE_BYTES));
    assert_true(slices > NTAB * 4 && tomb > 0);
    assert_true(mds_stats_counter(v.stats, MDS_CTR_MOVES) > 0);

    /* A restart that knows only the new placement finds every row. */
    env_crash(&v);
    env_start(&v, &P_BC, NULL, parts_abc, 3);
    char name[64];
    unsigned rows = 0;
    for (unsigned i = 0; i < NWRITER; i++)
        for (unsigned k = 0; k < atomic_load(&w[i].done); k++, rows++) {
            row_name(name, "r", i, k);
            assert_int_equal(row_state(&v, TAB0 + k % NTAB, name, (uint64_t)i << 32 | k), 1);
        }
    fprintf(stderr, "%u rows found after the restart\n", rows);
    assert_nothing_prepared(v.mem);
    env_fini(&v);
}

/* ---- the MDS dies in a moving group ---------------------------------------- */

enum { BASE_ROWS = 120, GROUP_ROWS = 6 };

/* Two tables under A,B, BASE_ROWS rows each, synced. */
static void fill_base(struct env *v)
{
    char name[64];
    uint64_t gen = 0;
    for (uint64_t t = 500; t < 502; t++) {
        assert_int_equal(mds_table_mktable(v->t, 1, t, &gen), 0);
        for (unsigned k = 0; k < BASE_ROWS; k++) {
            row_name(name, "b", (unsigned)t, k);
            assert_int_equal(put_row(v, t, name, t << 32 | k, &gen), 0);
        }
    }
    assert_int_equal(mds_group_sync(v->g, gen, 10000), 0);
}

static void check_base(struct env *v)
{
    char name[64];
    for (uint64_t t = 500; t < 502; t++)
        for (unsigned k = 0; k < BASE_ROWS; k++) {
            row_name(name, "b", (unsigned)t, k);
            assert_int_equal(row_state(v, t, name, t << 32 | k), 1);
        }
}

/* Rows written into the moving group: 1 all there, 0 all gone. */
static int group_rows_state(struct env *v)
{
    char name[64];
    int there = 0;
    for (unsigned k = 0; k < GROUP_ROWS; k++) {
        row_name(name, "g", 0, k);
        int st = row_state(v, 500 + k % 2, name, k);
        assert_true(st >= 0);
        there += st;
    }
    if (there != 0 && there != GROUP_ROWS)
        fail_msg("a moving group landed in part: %d of %d rows", there, GROUP_ROWS);
    return there ? 1 : 0;
}

/* Ring 1 goes A,B -> A,B,C; the mover marks every slice, and rows join the
 * same (open) group. Returns the group to sync on. */
static uint64_t start_moving_group(struct env *v, unsigned *marked)
{
    assert_int_equal(mds_group_add_participant(v->g, SC), 0);
    mds_place_change(v->place, locate_map, (void *)&P_ABC);
    uint64_t last;
    *marked = mark_moves(v, &last);
    char name[64];
    for (unsigned k = 0; k < GROUP_ROWS; k++) {
        row_name(name, "g", 0, k);
        uint64_t gen;
        assert_int_equal(put_row(v, 500 + k % 2, name, k, &gen), 0);
        last = gen > last ? gen : last;
    }
    return last;
}

static void test_crash_sweep(void **state)
{
    (void)state;
    g_salt = tu_seed("test_crash_sweep");
    int landed = 0, lost = 0;
    bool past_end = false;
    for (long n = 0; !past_end && n < 400; n++) {
        struct env v = { .interval_ms = 60000 };
        env_start(&v, &P_AB, NULL, parts_ab, 2);
        fill_base(&v);
        unsigned marked;
        uint64_t gen = start_moving_group(&v, &marked);
        assert_true(marked > 0);
        mds_store_local_sever(v.mem, n);
        int rc = mds_group_sync(v.g, gen, 200);
        env_crash(&v);
        mds_store_local_sever(v.mem, -1);
        past_end = rc == 0;
        /* Restart in the middle of the change: both placements known. */
        env_start(&v, &P_ABC, &P_AB, parts_abc, 3);
        assert_nothing_prepared(v.mem);
        check_live_once(v.mem, NULL, NULL);
        check_base(&v);
        int st = group_rows_state(&v);
        if (rc == 0)
            assert_int_equal(st, 1);
        landed += st;
        lost += !st;
        /* The mover finishes the change; a restart with only the new ring
         * finds everything. */
        while (move_pass(&v) > 0)
            ;
        mds_place_finish(v.place);
        check_live_once(v.mem, &P_ABC, NULL);
        env_crash(&v);
        env_start(&v, &P_ABC, NULL, parts_abc, 3);
        check_base(&v);
        assert_int_equal(group_rows_state(&v), st);
        env_fini(&v);
    }
    fprintf(stderr, "sweep: %d groups landed, %d rolled back\n", landed, lost);
    assert_true(past_end && landed > 0 && lost > 0);
}

/* ---- an MDSL of the move stops after voting -------------------------------- */

/* A slice the moving group takes from B (not the home: its commit is the
 * commit point, a different story) to C; false when none (another salt). */
static bool pick_moved(struct env *v, struct mds_key *out)
{
    struct mds_key *keys;
    size_t n;
    bool found = false;
    assert_int_equal(mds_cache_keys(v->c, &keys, &n), 0);
    for (size_t i = 0; i < n && !found; i++) {
        mds_cent *e;
        if (mds_cache_peek(v->c, &keys[i], &e) < 0)
            continue;
        const struct mds_key *k = &keys[i];
        if (mds_cent_commit(e)->site == SB && place_of(&P_ABC, k->fsid, k->table, k->slice) == SC) {
            *out = *k;
            found = true;
        }
        mds_cache_put(v->c, e);
    }
    xt_free(keys);
    return found;
}

/* A second MDS's view of the slice (a fresh cache, ring 1 mid-change). */
static int reader_load(struct env *v, const struct mds_key *k, uint32_t *site)
{
    mds_place *p = place_new(&P_ABC, &P_AB);
    struct mds_cache_opts co = { .store = &v->st, .place = p };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&co, &c), 0);
    mds_cent *e;
    int rc = mds_cache_get(c, k, &e);
    if (rc == 0) {
        *site = mds_cent_commit(e)->site;
        mds_cache_put(c, e);
    }
    mds_cache_free(c);
    mds_place_free(p);
    return rc;
}

static void test_participant_down(void **state)
{
    (void)state;
    uint64_t seed = tu_seed("test_participant_down");
    for (int victim_y = 0; victim_y < 2; victim_y++)
        for (int mds_restart = 0; mds_restart < 2; mds_restart++) {
            struct env v = { .interval_ms = 60000 };
            struct mds_key k;
            do { /* a salt under which some slice moves from B to C */
                if (v.g) {
                    env_fini(&v);
                    v.interval_ms = 60000;
                }
                g_salt = tu_rand(&seed);
                env_start(&v, &P_AB, NULL, parts_ab, 2);
                fill_base(&v);
            } while (!pick_moved(&v, &k));
            uint32_t victim = victim_y ? SC : SB;
            unsigned marked;
            uint64_t gen = start_moving_group(&v, &marked);
            /* Votes yes, then answers no commit (down after voting). */
            mds_store_local_fail(v.mem, victim, MDS_LOCAL_COMMIT, 0, -1, -ECONNRESET, false);
            assert_int_equal(mds_group_sync(v.g, gen, 150), -ETIMEDOUT);
            uint32_t site = 0;
            if (victim_y) {
                /* X (B) holds the tombstone, Y's image is not visible. */
                assert_int_equal(reader_load(&v, &k, &site), -EAGAIN);
            } else {
                /* Y committed: found there first. */
                assert_int_equal(reader_load(&v, &k, &site), 0);
                assert_int_equal(site, SC);
            }
            if (mds_restart)
                env_crash(&v);
            assert_int_equal(mds_store_local_crash(v.mem, victim), 0); /* prepare kept */
            mds_store_local_fail(v.mem, victim, 0, 0, 0, 0, false);
            if (mds_restart)
                env_start(&v, &P_ABC, &P_AB, parts_abc, 3); /* recovery commits */
            else
                assert_int_equal(mds_group_sync(v.g, gen, 10000), 0); /* phase 2 retried */
            assert_nothing_prepared(v.mem);
            assert_int_equal(reader_load(&v, &k, &site), 0);
            assert_int_equal(site, SC);
            check_live_once(v.mem, NULL, NULL);
            check_base(&v);
            assert_int_equal(group_rows_state(&v), 1);
            env_fini(&v);
        }
}

/* ---- a moving group that aborts ------------------------------------------- */

/* The new MDSL (C) refuses every prepare: each group holding moves aborts,
 * and move_aborts counts its moves (each try) while moves stays 0; once C
 * answers, the retries land and every moved slice counts once in moves. */
static void test_move_aborts(void **state)
{
    (void)state;
    g_salt = tu_seed("test_move_aborts");
    struct env v = { .interval_ms = 60000 };
    env_start(&v, &P_AB, NULL, parts_ab, 2);
    fill_base(&v);
    assert_int_equal(mds_stats_counter(v.stats, MDS_CTR_MOVE_ABORTS), 0);
    mds_store_local_fail(v.mem, SC, MDS_LOCAL_PREPARE, 0, -1, -EIO, false);
    unsigned marked;
    uint64_t gen = start_moving_group(&v, &marked);
    assert_true(marked > 0);
    assert_true(mds_group_sync(v.g, gen, 150) < 0);
    uint64_t aborted = mds_stats_counter(v.stats, MDS_CTR_MOVE_ABORTS);
    fprintf(stderr, "%u slices marked, %llu moves aborted while C refused\n", marked,
            (unsigned long long)aborted);
    assert_true(aborted >= marked);
    assert_int_equal(mds_stats_counter(v.stats, MDS_CTR_MOVES), 0);
    mds_store_local_fail(v.mem, SC, 0, 0, 0, 0, false);
    assert_int_equal(mds_group_sync(v.g, gen, 10000), 0);
    while (move_pass(&v) > 0)
        ;
    uint64_t moves = mds_stats_counter(v.stats, MDS_CTR_MOVES);
    assert_true(moves >= marked);
    /* No group aborts once C answers. */
    uint64_t after = mds_stats_counter(v.stats, MDS_CTR_MOVE_ABORTS);
    assert_int_equal(move_pass(&v), 0);
    assert_int_equal(mds_stats_counter(v.stats, MDS_CTR_MOVE_ABORTS), after);
    mds_place_finish(v.place);
    check_live_once(v.mem, &P_ABC, NULL);
    check_base(&v);
    assert_int_equal(group_rows_state(&v), 1);
    env_fini(&v);
}

/* ---- participants and decision records ------------------------------------- */

static void test_decision_everywhere(void **state)
{
    (void)state;
    g_salt = 1;
    struct env v = { .interval_ms = 60000 };
    env_start(&v, &P_AB, NULL, parts_ab, 2);
    struct mds_group_info gi;
    mds_group_info(v.g, &gi);
    uint64_t home_last = gi.last_txid;
    env_crash(&v);
    /* MDS 7 died with txid tp prepared at C, after committing it (its
     * decision record says so) -- at C, not at the home: a record that
     * moved with a home change ("Decision records"). The home's record is older. */
    uint64_t tp = mds_txid_make(MDS_ID, mds_txid_epoch(home_last) + 3, 1);
    assert_true(tp > home_last);
    struct xt_store_rec r = rec(77, 1, true, "prepared-at-C");
    assert_int_equal(mds_store_prepare(&v.st, SC, tp, &r, 1), 0);
    uint8_t dec[MDS_DECISION_SIZE];
    mds_group_decision_encode(dec, MDS_ID, mds_txid_epoch(tp), tp);
    struct xt_store_rec dr = { .id = { .fsid = MDS_COORD_FSID, .slice = MDS_ID, .table = MDS_COORD_TABLE },
                          .version = tp, .type = XT_STORE_IMAGE, .data = dec, .len = sizeof dec };
    assert_int_equal(put_rec(&v.st, SC, mds_txid_make(9, 1, 1), dr), 0);

    /* MDS 8 settles MDS 7: C is not among its participants yet, so tp is
     * not even listed; once C is added, it is committed (not aborted by the
     * home's older record). */
    mds_place *p = place_new(&P_AB, NULL);
    struct mds_cache_opts co = { .store = &v.st, .place = p };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&co, &c), 0);
    struct mds_group_opts go = { .store = &v.st, .cache = c, .place = p, .site_id = 8,
                                 .home_site = SA, .participants = parts_ab,
                                 .nparticipants = 2, .commit_interval_ms = 60000,
                                 .retry_ms = 2 };
    mds_group *g8;
    assert_int_equal(mds_group_open(&go, &g8), 0);
    assert_int_equal(mds_group_settle_site(g8, MDS_ID), 0);
    struct mds_store_local_counts cnt;
    mds_store_local_counts(v.mem, SC, &cnt);
    assert_int_equal(cnt.prepared_now, 1);
    assert_int_equal(mds_group_add_participant(g8, SC), 0);
    assert_int_equal(mds_group_add_participant(g8, SC), 0); /* idempotent */
    assert_int_equal(mds_group_settle_site(g8, MDS_ID), 0);
    mds_store_local_counts(v.mem, SC, &cnt);
    assert_int_equal(cnt.prepared_now, 0);
    struct xt_store_load ld;
    assert_int_equal(mds_store_load(&v.st, SC, (xt_slice_id){ .fsid = 1, .slice = 0, .table = 77 }, &ld), 0); /* committed */
    xt_store_load_free(&ld);
    mds_group_close(g8, false);
    mds_cache_free(c);
    mds_place_free(p);

    /* MDS 7 restarts: its epoch follows the newest record, not the home's
     * (an epoch from the home's would reuse tp's txids). */
    env_start(&v, &P_AB, NULL, parts_abc, 3);
    mds_group_info(v.g, &gi);
    assert_int_equal(gi.epoch, mds_txid_epoch(tp) + 1);
    env_fini(&v);
}

/* ---- settling an MDS that is running again --------------------------------- */

/* A store that runs `hook` (once) just before the next listing of
 * prepared txids at `site`: the coordinator of MDS 7, running again, moves
 * its transaction on between the settler's read of its decision record and
 * the settler's listing at that participant. */
struct hooked {
    mds_store in;
    uint32_t site;
    void (*hook)(struct hooked *h);
    uint64_t txid;
};

static int hk_prepare(void *ctx, uint32_t site, uint64_t txid, const struct xt_store_rec *recs,
                      size_t n)
{
    return mds_store_prepare(&((struct hooked *)ctx)->in, site, txid, recs, n);
}
static int hk_commit(void *ctx, uint32_t site, uint64_t txid)
{
    return mds_store_commit(&((struct hooked *)ctx)->in, site, txid);
}
static int hk_abort(void *ctx, uint32_t site, uint64_t txid)
{
    return mds_store_abort(&((struct hooked *)ctx)->in, site, txid);
}
static int hk_load(void *ctx, uint32_t site, xt_slice_id id, struct xt_store_load *out)
{
    return mds_store_load(&((struct hooked *)ctx)->in, site, id, out);
}
static int hk_list_prepared(void *ctx, uint32_t site, uint64_t **txids, size_t *n)
{
    struct hooked *h = ctx;
    void (*hook)(struct hooked *) = h->hook;
    if (hook && site == h->site) {
        h->hook = NULL;
        hook(h);
    }
    return mds_store_list_prepared(&h->in, site, txids, n);
}
static int hk_list_slices(void *ctx, uint32_t site, const void *cursor, uint32_t cursor_len,
                          uint32_t max, struct xt_store_list *out)
{
    return mds_store_list_slices(&((struct hooked *)ctx)->in, site, cursor, cursor_len, max, out);
}
static const struct mds_store_ops hooked_ops = { hk_prepare, hk_commit, hk_abort, hk_load,
                                                 hk_list_prepared, hk_list_slices };

/* MDS 7's transaction h->txid: a slice image for B, the decision record
 * for the home A. */
static uint64_t t7_table(uint64_t txid) /* one table per txid */
{
    return 100 + 16 * mds_txid_epoch(txid) + (txid & 0xf);
}
static struct xt_store_rec t7_rec(uint64_t txid)
{
    return rec(t7_table(txid), 1, true, "of-a-running-mds");
}
static void t7_prepare_b(struct hooked *h)
{
    struct xt_store_rec r = t7_rec(h->txid);
    assert_int_equal(mds_store_prepare(&h->in, SB, h->txid, &r, 1), 0);
}
static void t7_prepare_a(struct hooked *h)
{
    static uint8_t dec[MDS_DECISION_SIZE];
    mds_group_decision_encode(dec, MDS_ID, mds_txid_epoch(h->txid), h->txid);
    struct xt_store_rec dr = { .id = { .fsid = MDS_COORD_FSID, .slice = MDS_ID, .table = MDS_COORD_TABLE },
                               .version = h->txid, .type = XT_STORE_IMAGE, .data = dec,
                               .len = sizeof dec };
    assert_int_equal(mds_store_prepare(&h->in, SA, h->txid, &dr, 1), 0);
}
static void hook_committed(struct hooked *h) /* prepared at A and B, committed at A */
{
    t7_prepare_b(h);
    t7_prepare_a(h);
    assert_int_equal(mds_store_commit(&h->in, SA, h->txid), 0);
}
static void hook_commit_a(struct hooked *h) /* committed at A */
{
    assert_int_equal(mds_store_commit(&h->in, SA, h->txid), 0);
}
static void hook_prepared(struct hooked *h) /* prepared at A and B */
{
    t7_prepare_b(h);
    t7_prepare_a(h);
}
static void hook_prepared_b(struct hooked *h) /* prepared at B, A's prepare to come */
{
    t7_prepare_b(h);
}

static int t7_load(mds_store *st, uint64_t txid)
{
    struct xt_store_load ld;
    int rc = mds_store_load(st, SB, (xt_slice_id){ .fsid = 1, .slice = 0, .table = t7_table(txid) }, &ld);
    if (rc == 0)
        xt_store_load_free(&ld);
    return rc;
}

static void test_settle_running_again(void **state)
{
    (void)state;
    g_salt = 1;
    struct env v = { .interval_ms = 60000 };
    env_start(&v, &P_AB, NULL, parts_ab, 2);
    struct mds_group_info gi;
    mds_group_info(v.g, &gi);
    uint32_t e = mds_txid_epoch(gi.last_txid);
    env_crash(&v);
    /* MDS 8 takes MDS 7 for dead (its calls were refused) and settles it,
     * while MDS 7 is running again: its claim (epoch e) is the newest
     * decision record, and each case below is its next transaction, in
     * flight while MDS 8 settles. */
    struct hooked h = { .in = v.st, .site = SB };
    mds_store hst = { &hooked_ops, &h };
    mds_place *p = place_new(&P_AB, NULL);
    struct mds_cache_opts co = { .store = &hst, .place = p };
    mds_cache *c;
    assert_int_equal(mds_cache_new(&co, &c), 0);
    struct mds_group_opts go = { .store = &hst, .cache = c, .place = p, .site_id = 8,
                                 .home_site = SA, .participants = parts_ab,
                                 .nparticipants = 2, .commit_interval_ms = 60000,
                                 .retry_ms = 2 };
    mds_group *g8;
    assert_int_equal(mds_group_open(&go, &g8), 0);

    /* 1. Committed at the home after MDS 8 read the record: B commits it
     *    too (MDS 8 must not abort it there). */
    h.txid = mds_txid_make(MDS_ID, e, 1);
    h.hook = hook_committed;
    assert_int_equal(mds_group_settle_site(g8, MDS_ID), 0);
    assert_null(h.hook);
    assert_int_equal(mds_store_commit(&v.st, SB, h.txid), 0); /* MDS 7's phase 2 */
    assert_int_equal(t7_load(&v.st, h.txid), 0);

    /* 2. Prepared at both: MDS 8 aborts it at the home first, so MDS 7's
     *    commit point fails and it aborts everywhere, as MDS 8 did at B. */
    h.txid = mds_txid_make(MDS_ID, e, 2);
    h.hook = hook_prepared;
    assert_int_equal(mds_group_settle_site(g8, MDS_ID), 0);
    assert_null(h.hook);
    assert_int_equal(mds_store_commit(&v.st, SA, h.txid), -EINVAL);
    assert_int_equal(mds_store_abort(&v.st, SB, h.txid), 0);
    assert_int_equal(t7_load(&v.st, h.txid), -ENOENT);

    /* 3. Prepared at B, its prepare at the home still to come: MDS 8
     *    leaves it, and MDS 7 commits it at the home and at B. */
    h.txid = mds_txid_make(MDS_ID, e, 3);
    h.hook = hook_prepared_b;
    assert_int_equal(mds_group_settle_site(g8, MDS_ID), 0);
    assert_null(h.hook);
    t7_prepare_a(&h);
    assert_int_equal(mds_store_commit(&v.st, SA, h.txid), 0);
    assert_int_equal(mds_store_commit(&v.st, SB, h.txid), 0);
    assert_int_equal(t7_load(&v.st, h.txid), 0);

    /* 4. MDS 7 died again with a transaction prepared at both: the next
     *    settle aborts it everywhere; with only B prepared, its own
     *    recovery does. */
    h.txid = mds_txid_make(MDS_ID, e, 4);
    hook_prepared(&h);
    assert_int_equal(mds_group_settle_site(g8, MDS_ID), 0);
    assert_nothing_prepared(v.mem);
    h.txid = mds_txid_make(MDS_ID, e, 5);
    hook_prepared_b(&h);
    assert_int_equal(mds_group_settle_site(g8, MDS_ID), 0);
    struct mds_store_local_counts cnt;
    mds_store_local_counts(v.mem, SB, &cnt);
    assert_int_equal(cnt.prepared_now, 1);
    mds_group_close(g8, false);
    mds_cache_free(c);
    mds_place_free(p);
    env_start(&v, &P_AB, NULL, parts_ab, 2);
    assert_nothing_prepared(v.mem);
    assert_int_equal(t7_load(&v.st, mds_txid_make(MDS_ID, e, 5)), -ENOENT);
    env_fini(&v);
}

/* MDS 7 was killed with its commit at the home still being served: the
 * home commits it after the restarted MDS 7 read its decision record (the
 * hook, before recovery lists the home's prepared txids). Recovery commits
 * it at B too (aborting it there would leave a move's image committed at
 * one MDSL and its tombstone aborted at the other). */
static void test_recover_commit_in_flight(void **state)
{
    (void)state;
    g_salt = 1;
    struct env v = { .interval_ms = 60000 };
    env_start(&v, &P_AB, NULL, parts_ab, 2);
    struct mds_group_info gi;
    mds_group_info(v.g, &gi);
    uint32_t e = mds_txid_epoch(gi.last_txid);
    env_crash(&v);
    struct hooked h = { .in = v.st, .site = SA, .txid = mds_txid_make(MDS_ID, e, 1) };
    hook_prepared(&h);
    h.hook = hook_commit_a;
    v.st = (mds_store){ &hooked_ops, &h };
    env_start(&v, &P_AB, NULL, parts_ab, 2);
    assert_null(h.hook);
    assert_nothing_prepared(v.mem);
    assert_int_equal(t7_load(&h.in, h.txid), 0);
    /* Killed again with one prepared at both and one at B only: both abort. */
    mds_group_info(v.g, &gi);
    e = mds_txid_epoch(gi.last_txid);
    env_crash(&v);
    h.txid = mds_txid_make(MDS_ID, e, 1);
    hook_prepared(&h);
    h.txid = mds_txid_make(MDS_ID, e, 2);
    hook_prepared_b(&h);
    env_start(&v, &P_AB, NULL, parts_ab, 2);
    assert_nothing_prepared(v.mem);
    assert_int_equal(t7_load(&h.in, mds_txid_make(MDS_ID, e, 1)), -ENOENT);
    assert_int_equal(t7_load(&h.in, mds_txid_make(MDS_ID, e, 2)), -ENOENT);
    env_fini(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mem_tombstone),
        cmocka_unit_test(test_load_history),
        cmocka_unit_test(test_decision_everywhere),
        cmocka_unit_test(test_settle_running_again),
        cmocka_unit_test(test_recover_commit_in_flight),
        cmocka_unit_test(test_participant_down),
        cmocka_unit_test(test_move_aborts),
        cmocka_unit_test(test_crash_sweep),
        cmocka_unit_test(test_change_while_creating),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
