/*
 * fuzz_rpc_env.c -- the real daemons' services for fuzz_rpc_svc (built from
 * fuzz_rpc.cpp with POM_FUZZ_REAL_SERVICES): the xTable service of pom-mds
 * over an mds_table whose commit groups go to an in-memory store, and the
 * Storage service of pom-mdsl over an mdsl_store on the in-memory I/O
 * backend (its LevelDB index in a temporary folder). So fuzzed frames reach
 * the handlers pom-mds and pom-mdsl really run, not stubs.
 *
 * The state lives for the whole fuzzing process (inputs build on what
 * earlier ones created; a crash input may need its predecessors, which
 * libFuzzer's -runs over the work corpus replays).
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>

#include "mds_cache.h"
#include "mds_group.h"
#include "mds_service.h"
#include "mds_stats.h"
#include "mds_store_local.h"
#include "mds_table.h"
#include "mdsl_service.h"
#include "mdsl_store.h"

int fuzz_env_start(xt_rpc_server **mds, xt_rpc_server **mdsl);

static uint32_t locate(void *arg, uint32_t fsid, uint64_t table, uint32_t slice)
{
    (void)arg;
    return 1 + (uint32_t)((table + slice + fsid) & 1);
}

static const uint32_t parts[] = { 1, 2 };
static char idx[256];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p); /* best effort */
    return 0;
}

/* The LevelDB folder goes at exit (the store itself is never closed). */
static void rm_idx(void)
{
    nftw(idx, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

/* Leaks everything on purpose: it lives until the process exits. */
int fuzz_env_start(xt_rpc_server **mds, xt_rpc_server **mdsl)
{
    static mds_store st;
    static struct mds_service svc;
    mds_store_local *mem = mds_store_local_new();
    mds_stats *stats = mds_stats_new();
    if (!mem || !stats)
        return -ENOMEM;
    mds_store_local_bind(mem, &st);
    mds_cache *c;
    mds_place *place;
    int rc = mds_place_new(locate, NULL, &place);
    if (rc < 0)
        return rc;
    struct mds_cache_opts co = { .store = &st, .place = place, .stats = stats };
    rc = mds_cache_new(&co, &c);
    if (rc < 0)
        return rc;
    struct mds_group_opts go = {
        .store = &st, .cache = c, .place = place, .site_id = 7, .home_site = 1,
        .participants = parts, .nparticipants = 2, .commit_interval_ms = 50,
        .retry_ms = 2, .stats = stats,
    };
    mds_group *g;
    if ((rc = mds_group_open(&go, &g)) < 0)
        return rc;
    mds_cache_set_pressure(c, mds_group_kick, g);
    struct mds_table_opts to = { .cache = c, .group = g, .stats = stats, .split_threshold = 16 };
    mds_table *t;
    if ((rc = mds_table_new(&to, &t)) < 0)
        return rc;
    svc = (struct mds_service){ .table = t, .group = g, .stats = stats, .sync_timeout_ms = 2000 };
    if ((rc = mds_service_start(&svc, NULL, mds)) < 0)
        return rc;

    const char *tmp = getenv("TMPDIR");
    snprintf(idx, sizeof idx, "%s/fuzz_rpc_svc.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(idx))
        return -errno;
    atexit(rm_idx);
    mdsl_io *io;
    if ((rc = mdsl_io_mem_new(&io)) < 0)
        return rc;
    struct mdsl_store_opts mo = { .io = io, .dir = "/mdsl", .index_dir = idx,
                                  .seg_size = 1u << 20 };
    mdsl_store *s;
    if ((rc = mdsl_store_open(&mo, &s)) < 0)
        return rc;
    struct mdsl_blob_opts bo = { .io = io, .dir = "/blob", .seg_size = 1u << 20 };
    mdsl_blob *b;
    if ((rc = mdsl_blob_open(&bo, &b)) < 0)
        return rc;
    static struct mdsl_service msvc; /* outlives the server */
    msvc.store = s;
    msvc.blob = b;
    return mdsl_service_start(&msvc, NULL, mdsl);
}
