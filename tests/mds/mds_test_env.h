/*
 * mds_test_env.h -- one MDS (cache + commit group + tables) over an
 * in-memory store that outlives it, so a test can crash and restart it.
 */
#ifndef MDS_TEST_ENV_H
#define MDS_TEST_ENV_H

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_store_local.h"
#include "mds_table.h"
#include "mds_test_util.h"

struct tenv {
    mds_store_local *mem;  /* survives crashes */
    mds_store st;
    mds_stats *stats;
    mds_cache *c;
    mds_group *g;
    mds_table *t;
    unsigned interval_ms;
    uint32_t split;
    size_t split_bytes;  /* 0: the MDS's default */
    size_t mem_bound, dirty_bound;
    mds_usage *usage;    /* NULL: none (mds_usage.h) */
};

static const uint32_t tenv_parts[] = { 1, 2 };

static inline int tenv_start(struct tenv *v)
{
    if (!v->mem) {
        v->mem = mds_store_local_new();
        mds_store_local_bind(v->mem, &v->st);
        v->stats = mds_stats_new();
    }
    struct mds_cache_opts co = { .store = &v->st, .place = tu_place2(),
                                 .mem_bound = v->mem_bound, .stats = v->stats };
    int rc = mds_cache_new(&co, &v->c);
    if (rc < 0)
        return rc;
    struct mds_group_opts go = {
        .store = &v->st, .cache = v->c, .place = tu_place2(), .site_id = 7,
        .home_site = 1, .participants = tenv_parts, .nparticipants = 2,
        .commit_interval_ms = v->interval_ms, .dirty_bytes_bound = v->dirty_bound,
        .retry_ms = 2, .stats = v->stats,
    };
    if ((rc = mds_group_open(&go, &v->g)) < 0) {
        mds_cache_free(v->c);
        v->c = NULL;
        return rc;
    }
    mds_cache_set_pressure(v->c, mds_group_kick, v->g);
    struct mds_table_opts to = { .cache = v->c, .group = v->g, .stats = v->stats,
                                 .usage = v->usage, .split_threshold = v->split,
                                 .split_bytes = v->split_bytes };
    return mds_table_new(&to, &v->t);
}

/* Drop the whole MDS state as a SIGKILL would (nothing more is written). */
static inline void tenv_crash(struct tenv *v)
{
    mds_table_free(v->t);
    mds_group_close(v->g, false);
    mds_cache_free(v->c);
    v->t = NULL;
    v->g = NULL;
    v->c = NULL;
}

static inline void tenv_fini(struct tenv *v)
{
    if (v->g)
        tenv_crash(v);
    mds_store_local_free(v->mem);
    mds_stats_free(v->stats);
    v->mem = NULL;
    v->stats = NULL;
}

/* Row of name -> (id, seq). 1 present and whole, 0 absent; fails on torn. */
static inline int tenv_get(struct tenv *v, uint64_t table, const char *name, uint64_t *id,
                           uint64_t *seq)
{
    uint8_t *row;
    size_t len;
    int rc = mds_table_lookup(v->t, 1, table, name, strlen(name), xt_hash_name(name, strlen(name)),
                              &row, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc != 0) {
        fprintf(stderr, "lookup %s: %d\n", name, rc);
        return -1;
    }
    int ok = tu_row_ok(row, len, id, seq);
    xt_free(row);
    return ok ? 1 : -1;
}

static inline int tenv_put(struct tenv *v, uint64_t table, const char *name, uint64_t id,
                           uint64_t seq, uint64_t *gen)
{
    size_t len;
    uint8_t *r = tu_row(id, seq, (size_t)(seq % 50), &len);
    int rc = mds_table_create(v->t, 1, table, name, strlen(name), xt_hash_name(name, strlen(name)),
                              r, len, 0, gen);
    free(r);
    return rc;
}

#endif
