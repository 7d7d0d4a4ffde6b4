/*
 * mdsl_tmove.c -- tracts follow ring 1 (mdsl_tmove.h has the role and the
 * invariants). A pass walks the blob index a page of buckets at a time
 * (mdsl_blob_keys: no lock held across the puts), reads each tract here
 * and puts it to the sites of its new set that are not this one.
 */
#include "mdsl_tmove.h"

#include "xt_common.h"
#include "xt_rpc_mdsl.h"
#include "xt_time.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#define TMOVE_PAGE 1024 /* tracts a walk page holds, about */

int mdsl_tmove_of_view(const struct xt_view *v, const xt_ring *r, struct mdsl_tmove_fs **fs,
                       size_t *nfs, struct mdsl_tmove_site **sites, size_t *nsites)
{
    *fs = xt_calloc(v->nfs ? v->nfs : 1, sizeof **fs);
    *sites = xt_calloc(v->nsites ? v->nsites : 1, sizeof **sites);
    *nfs = *nsites = 0;
    if (!*fs || !*sites) {
        xt_free(*fs);
        xt_free(*sites);
        *fs = NULL;
        *sites = NULL;
        return -ENOMEM;
    }
    for (size_t i = 0; i < v->nfs; i++) {
        uint32_t copies;
        if (strcmp(v->fs[i].blob_backend, "mdsl") ||
            xt_ring_tract_copies(r, v->fs[i].blob_path, &copies) < 0)
            continue;
        (*fs)[(*nfs)++] = (struct mdsl_tmove_fs){ v->fs[i].fsid, copies };
    }
    for (size_t i = 0; i < v->nsites; i++) {
        const struct xt_site *s = &v->sites[i];
        if (s->type != XT_SITE_MDSL || !xt_ring_has_site(r, s->id))
            continue;
        struct mdsl_tmove_site *d = &(*sites)[(*nsites)++];
        d->id = s->id;
        snprintf(d->addr, sizeof d->addr, "%s", s->addr);
    }
    return 0;
}

static uint32_t copies_of(const struct mdsl_tmove_target *t, uint32_t fsid)
{
    for (size_t i = 0; i < t->nfs; i++)
        if (t->fs[i].fsid == fsid)
            return t->fs[i].copies;
    return 0;
}

struct peer {
    uint32_t id;
    xt_rpc_pool *pool;  /* NULL: no address */
};

static xt_rpc_pool *peer_pool(const struct peer *p, size_t n, uint32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (p[i].id == id)
            return p[i].pool;
    return NULL;
}

static bool has(const uint32_t *v, uint32_t n, uint32_t id)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == id)
            return true;
    return false;
}

/* Moves one tract (invariant (1)). 0: nothing owed; 1: owed. */
static int move_one(mdsl_blob *b, const struct mdsl_tmove_target *t, const struct peer *peers,
                    size_t np, const struct mdsl_blob_key *k, struct mdsl_tmove_counters *c,
                    uint64_t *bytes)
{
    uint32_t copies = copies_of(t, k->fsid);
    if (!copies)
        return 0; /* an fs removed (or not on mdsl): its reclaim is not ours */
    uint32_t sites[XT_TRACT_COPIES_MAX], old[XT_TRACT_COPIES_MAX];
    uint32_t n = xt_ring_tract_sites(t->ring, k->set, k->tract, copies, sites);
    uint32_t no = t->prev ? xt_ring_tract_sites(t->prev, k->set, k->tract, copies, old) : 0;
    bool kept = has(sites, n, t->self), was = has(old, no, t->self);
    if (kept && (was || t->skip_kept || n == 1))
        return 0; /* the old set's leaving sites put it (mdsl_tmove.h) */
    void *data = NULL;
    uint32_t len = 0;
    int rc = mdsl_blob_get(b, k->fsid, k->set, k->tract, &data, &len);
    if (rc == -ENOENT)
        return 0; /* removed meanwhile */
    if (rc < 0) {
        /* a copy here that does not read cannot be moved: the others must */
        XT_WARN_RL(1000, "tract move: tract %" PRIu32 " of set %016" PRIx64 " (fs %" PRIu32
                   ") does not read here: %s; not moved", k->tract, k->set, k->fsid,
                   strerror(-rc));
        return 0;
    }
    bool ok = true;
    for (uint32_t i = 0; i < n; i++) {
        if (sites[i] == t->self || (was && has(old, no, sites[i])))
            continue; /* the old set's sites hold it already */
        xt_rpc_pool *p = peer_pool(peers, np, sites[i]);
        rc = p ? xt_mdsl_tract_put(p, NULL, k->fsid, k->set, k->tract, data, len)
               : -EHOSTUNREACH;
        if (rc < 0) {
            XT_WARN_RL(1000, "tract move: tract %" PRIu32 " of set %016" PRIx64 " to MDSL %"
                       PRIu32 ": %s; owed", k->tract, k->set, sites[i], strerror(-rc));
            ok = false;
            continue;
        }
        atomic_fetch_add(&c->tracts, 1);
        atomic_fetch_add(&c->bytes, len);
        *bytes += len;
    }
    xt_free(data);
    if (ok && !kept) {
        /* invariant (1): every other site of the new set holds it now */
        rc = mdsl_blob_remove(b, k->fsid, k->set, k->tract, k->tract + 1);
        if (rc == 0)
            atomic_fetch_add(&c->dropped, 1);
        else
            XT_WARN_RL(1000, "tract move: copy of tract %" PRIu32 " of set %016" PRIx64
                       " not dropped: %s", k->tract, k->set, strerror(-rc));
    }
    return ok ? 0 : 1;
}

int mdsl_tmove_pass(mdsl_blob *b, const struct mdsl_tmove_target *t, uint64_t rate,
                    unsigned call_timeout_ms, _Atomic bool *cancel,
                    struct mdsl_tmove_counters *c, uint64_t *owed)
{
    *owed = 0;
    struct peer *peers = xt_calloc(t->nsites ? t->nsites : 1, sizeof *peers);
    if (!peers)
        return -ENOMEM;
    size_t np = 0;
    for (size_t i = 0; i < t->nsites; i++) {
        if (t->sites[i].id == t->self)
            continue;
        char host[XT_ADDR_MAX];
        int port;
        peers[np].id = t->sites[i].id;
        struct xt_rpc_pool_opts po = { .host = host, .max_idle = 1,
                                       .call_timeout_ms = (int)call_timeout_ms };
        if (xt_rpc_parse_addr(t->sites[i].addr, host, sizeof host, &port) == 0) {
            po.port = port;
            if (xt_rpc_pool_new(&po, &peers[np].pool) < 0)
                peers[np].pool = NULL;
        }
        np++;
    }
    uint64_t t0 = xt_mono_ns(), bytes = 0;
    uint32_t cookie = 0;
    int rc = 1;
    while (rc == 1) {
        struct mdsl_blob_key *keys;
        size_t n;
        if ((rc = mdsl_blob_keys(b, &cookie, TMOVE_PAGE, &keys, &n)) < 0)
            break;
        for (size_t i = 0; i < n; i++) {
            if (atomic_load(cancel)) {
                rc = -ECANCELED;
                break;
            }
            *owed += (uint64_t)move_one(b, t, peers, np, &keys[i], c, &bytes);
            if (rate) /* invariant (3): the pass's bytes at `rate` */
                xt_sleep_until(t0 + bytes * UINT64_C(1000000000) / rate);
        }
        xt_free(keys);
    }
    for (size_t i = 0; i < np; i++)
        xt_rpc_pool_free(peers[i].pool);
    xt_free(peers);
    if (rc == 0)
        atomic_store(&c->owed, *owed);
    return rc;
}
