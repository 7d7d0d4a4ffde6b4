/*
 * mds_store_rpc.c -- mds_store over the Storage RPC service.
 *
 * Invariants:
 *  (1) r->mu protects the site table only; it is never held across an RPC.
 *      A pool, once created, lives until mds_store_rpc_free, so a caller
 *      that looked one up may use it after dropping the lock even if the
 *      site was renamed meanwhile (the old pool goes to the retired list).
 *  (2) Calls carry a fresh request id each; the participant's promises
 *      (mds_store.h) make commit/abort retries safe.
 */
#include "mds_store_rpc.h"

#include "xt_common.h"
#include "xt_rpc_mdsl.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct site_ent {
    uint32_t site;
    char addr[256];
    xt_rpc_pool *pool;
};

struct mds_store_rpc {
    pthread_mutex_t mu;
    struct site_ent *sites;    /* protected by mu */
    size_t nsites, cap;        /* protected by mu */
    xt_rpc_pool **retired;     /* protected by mu */
    size_t nretired;
    int timeout_ms;
};

static xt_rpc_pool *pool_of(mds_store_rpc *r, uint32_t site)
{
    xt_rpc_pool *p = NULL;
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->nsites; i++)
        if (r->sites[i].site == site)
            p = r->sites[i].pool;
    pthread_mutex_unlock(&r->mu);
    if (!p)
        XT_WARN("mds: no address known for MDSL site %u", site);
    return p;
}

int mds_store_rpc_set_site(mds_store_rpc *r, uint32_t site, const char *addr)
{
    char host[256];
    int port;
    if (strlen(addr) >= 256 || xt_rpc_parse_addr(addr, host, sizeof host, &port))
        return -EINVAL;
    pthread_mutex_lock(&r->mu);
    struct site_ent *e = NULL;
    for (size_t i = 0; i < r->nsites; i++)
        if (r->sites[i].site == site)
            e = &r->sites[i];
    if (e && !strcmp(e->addr, addr)) {
        pthread_mutex_unlock(&r->mu);
        return 0;
    }
    struct xt_rpc_pool_opts po = { .host = host, .port = port,
                                   .call_timeout_ms = r->timeout_ms };
    xt_rpc_pool *p = NULL;
    int rc = xt_rpc_pool_new(&po, &p);
    if (rc) {
        pthread_mutex_unlock(&r->mu);
        return rc;
    }
    if (!e) {
        if (r->nsites == r->cap) {
            size_t cap = r->cap ? r->cap * 2 : 8;
            struct site_ent *s = xt_realloc(r->sites, cap * sizeof *s);
            if (!s) {
                pthread_mutex_unlock(&r->mu);
                xt_rpc_pool_free(p);
                return -ENOMEM;
            }
            r->sites = s;
            r->cap = cap;
        }
        e = &r->sites[r->nsites++];
        e->site = site;
        e->pool = NULL;
    }
    if (e->pool) {
        xt_rpc_pool **ret = xt_realloc(r->retired, (r->nretired + 1) * sizeof *ret);
        if (!ret) {
            pthread_mutex_unlock(&r->mu);
            xt_rpc_pool_free(p);
            return -ENOMEM;
        }
        r->retired = ret;
        r->retired[r->nretired++] = e->pool;
    }
    e->pool = p;
    snprintf(e->addr, sizeof e->addr, "%s", addr);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static int rpc_prepare(void *ctx, uint32_t site, uint64_t txid, const struct xt_store_rec *recs,
                       size_t n)
{
    xt_rpc_pool *p = pool_of(ctx, site);
    return p ? xt_mdsl_prepare(p, NULL, txid, recs, n) : -EHOSTUNREACH;
}

static int rpc_commit(void *ctx, uint32_t site, uint64_t txid)
{
    xt_rpc_pool *p = pool_of(ctx, site);
    return p ? xt_mdsl_commit(p, NULL, txid) : -EHOSTUNREACH;
}

static int rpc_abort(void *ctx, uint32_t site, uint64_t txid)
{
    xt_rpc_pool *p = pool_of(ctx, site);
    return p ? xt_mdsl_abort(p, NULL, txid) : -EHOSTUNREACH;
}

static int rpc_load(void *ctx, uint32_t site, xt_slice_id id, struct xt_store_load *out)
{
    memset(out, 0, sizeof *out);
    xt_rpc_pool *p = pool_of(ctx, site);
    return p ? xt_mdsl_load_slice(p, NULL, id, out) : -EHOSTUNREACH;
}

static int rpc_list_prepared(void *ctx, uint32_t site, uint64_t **txids, size_t *n)
{
    *txids = NULL;
    *n = 0;
    xt_rpc_pool *p = pool_of(ctx, site);
    if (!p)
        return -EHOSTUNREACH;
    struct xt_store_stat st;
    int rc = xt_mdsl_stat(p, NULL, &st);
    if (rc)
        return rc;
    *txids = st.prepared;
    *n = st.nprepared;
    return 0;
}

static int rpc_list_slices(void *ctx, uint32_t site, const void *cursor, uint32_t cursor_len,
                           uint32_t max, struct xt_store_list *out)
{
    memset(out, 0, sizeof *out);
    xt_rpc_pool *p = pool_of(ctx, site);
    return p ? xt_mdsl_list_slices(p, NULL, cursor, cursor_len, max, out) : -EHOSTUNREACH;
}

static const struct mds_store_ops rpc_ops = {
    .prepare = rpc_prepare,
    .commit = rpc_commit,
    .abort = rpc_abort,
    .load = rpc_load,
    .list_prepared = rpc_list_prepared,
    .list_slices = rpc_list_slices,
};

int mds_store_rpc_new(int call_timeout_ms, mds_store_rpc **out)
{
    mds_store_rpc *r = xt_calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    pthread_mutex_init(&r->mu, NULL);
    r->timeout_ms = call_timeout_ms > 0 ? call_timeout_ms : 10000;
    *out = r;
    return 0;
}

void mds_store_rpc_free(mds_store_rpc *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nsites; i++)
        xt_rpc_pool_free(r->sites[i].pool);
    for (size_t i = 0; i < r->nretired; i++)
        xt_rpc_pool_free(r->retired[i]);
    xt_free(r->sites);
    xt_free(r->retired);
    pthread_mutex_destroy(&r->mu);
    xt_free(r);
}

mds_store mds_store_rpc_handle(mds_store_rpc *r)
{
    mds_store s = { &rpc_ops, r };
    return s;
}
