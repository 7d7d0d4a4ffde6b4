/*
 * slice_census.c -- what the MDSL of a cluster store, for the ring-1 tests
 * (tests/dist/test_mdsl_scale.sh, docs/mdsl-scale.md "Tests"): lists every
 * slice of every given MDSL (Storage.list_slices, paged) and checks the
 * placement invariant of a move: each slice of a file system (fsid != 0)
 * is live (newest image not a MOVED tombstone) at exactly one MDSL.
 *
 *   slice_census [--key-file F] [--same] HOST:PORT [HOST:PORT ...]
 *
 * Prints one line per MDSL, "mdsl ADDR live L moved M", then
 * "census: slices S live_once S1 duplicated D lost X" (lost: only
 * tombstones anywhere: a slice no load can find). Exit 0 when D and X are
 * 0, 1 otherwise, 2 on a usage or RPC error.
 *
 * --same checks replicas instead (docs/mdsl-replicas.md, every MDSL given
 * holding every slice, as with r = the number of MDSL): every slice, the
 * decision records (fsid 0) included, is held whole (an image) at every
 * MDSL at the newest version any holds. Prints "same: slices S whole_everywhere
 * W short K" (and up to 10 short slices) and exits 0 when K is 0.
 * --key-file: the cluster key (pomctl up's DIR/cluster.key).
 */
#include "xt_auth.h"
#include "xt_common.h"
#include "xt_rpc.h"
#include "xt_rpc_mdsl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ent {
    uint32_t fsid, slice;
    uint64_t table;
    unsigned live, moved;
    uint64_t version;
    bool image;
    int mdsl;        /* index of the MDSL in argv */
};

static bool same_mode;

static int ent_cmp(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    if (x->fsid != y->fsid)
        return x->fsid < y->fsid ? -1 : 1;
    if (x->table != y->table)
        return x->table < y->table ? -1 : 1;
    return x->slice < y->slice ? -1 : x->slice > y->slice;
}

/* Appends every fsid != 0 slice (--same: every slice) of the MDSL at addr
 * (number k) to *all. */
static int census_one(const char *addr, int k, struct ent **all, size_t *n, size_t *cap)
{
    char host[256];
    int port;
    if (xt_rpc_parse_addr(addr, host, sizeof host, &port))
        return -EINVAL;
    struct xt_rpc_pool_opts po = { .host = host, .port = port, .call_timeout_ms = 10000 };
    xt_rpc_pool *p;
    int rc = xt_rpc_pool_new(&po, &p);
    if (rc)
        return rc;
    uint8_t cur[XT_STORE_CURSOR_MAX];
    uint32_t clen = 0;
    size_t live = 0, moved = 0;
    for (bool end = false; !end && rc == 0;) {
        struct xt_store_list l;
        if ((rc = xt_mdsl_list_slices(p, NULL, cur, clen, 4096, &l)))
            break;
        for (size_t i = 0; i < l.n; i++) {
            if (l.slices[i].id.fsid == 0 && !same_mode)
                continue;
            if (*n == *cap) {
                *cap = *cap ? *cap * 2 : 1024;
                struct ent *g = realloc(*all, *cap * sizeof *g);
                if (!g) {
                    rc = -ENOMEM;
                    break;
                }
                *all = g;
            }
            bool m = l.slices[i].moved;
            (*all)[(*n)++] = (struct ent){ l.slices[i].id.fsid, l.slices[i].id.slice,
                                          l.slices[i].id.table, !m, m, l.slices[i].version,
                                          l.slices[i].image, k };
            live += !m;
            moved += m;
        }
        memcpy(cur, l.cursor, l.cursor_len);
        clen = l.cursor_len;
        end = l.end || l.n == 0;
        xt_store_list_free(&l);
    }
    xt_rpc_pool_free(p);
    if (rc == 0)
        printf("mdsl %s live %zu moved %zu\n", addr, live, moved);
    return rc;
}

/* --same: every slice whole at each of the nmdsl MDSL at its newest version. */
static int same_check(const struct ent *all, size_t n, int nmdsl)
{
    size_t slices = 0, whole = 0, shown = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint64_t maxv = 0;
        for (; j < n && ent_cmp(&all[i], &all[j]) == 0; j++)
            maxv = all[j].version > maxv ? all[j].version : maxv;
        int at = 0;
        for (size_t k = i; k < j; k++)
            at += all[k].image && !all[k].moved && all[k].version == maxv;
        slices++;
        whole += at == nmdsl;
        if (at != nmdsl && shown++ < 10)
            printf("slice fs %u table %llu slice %u: whole at v%llu on %d of %d MDSL\n",
                   all[i].fsid, (unsigned long long)all[i].table, all[i].slice,
                   (unsigned long long)maxv, at, nmdsl);
        i = j;
    }
    printf("same: slices %zu whole_everywhere %zu short %zu\n", slices, whole, slices - whole);
    return slices == whole ? 0 : 1;
}

int main(int argc, char **argv)
{
    int a = 1;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (!strcmp(argv[a], "--same")) {
            same_mode = true;
        } else if (!strcmp(argv[a], "--key-file") && a + 1 < argc) {
            static struct xt_auth_cred cred;
            int rc = xt_auth_load(argv[++a], XT_AUTH_ADMIN, &cred);
            if (rc < 0) {
                fprintf(stderr, "slice_census: %s: %s\n", argv[a], strerror(-rc));
                return 2;
            }
            xt_rpc_set_cred(&cred);
        } else {
            break;
        }
    }
    if (a >= argc) {
        fprintf(stderr, "usage: slice_census [--key-file F] [--same] HOST:PORT [HOST:PORT ...]\n");
        return 2;
    }
    xt_log_set_level(XT_LOG_WARN);
    struct ent *all = NULL;
    size_t n = 0, cap = 0;
    for (int i = a; i < argc; i++) {
        int rc = census_one(argv[i], i - a, &all, &n, &cap);
        if (rc) {
            fprintf(stderr, "slice_census: %s: %s\n", argv[i], strerror(-rc));
            free(all);
            return 2;
        }
    }
    if (n)
        qsort(all, n, sizeof *all, ent_cmp);
    if (same_mode) {
        int rc = same_check(all, n, argc - a);
        free(all);
        return rc;
    }
    size_t slices = 0, once = 0, dup = 0, lost = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        unsigned live = 0;
        for (; j < n && ent_cmp(&all[i], &all[j]) == 0; j++)
            live += all[j].live;
        slices++;
        once += live == 1;
        dup += live > 1;
        lost += live == 0;
        if (live != 1)
            printf("slice fs %u table %llu slice %u: live at %u MDSL\n", all[i].fsid,
                   (unsigned long long)all[i].table, all[i].slice, live);
        i = j;
    }
    printf("census: slices %zu live_once %zu duplicated %zu lost %zu\n", slices, once, dup,
           lost);
    free(all);
    return dup || lost ? 1 : 0;
}
