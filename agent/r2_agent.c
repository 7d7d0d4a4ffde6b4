/*
 * r2_agent.c -- registration, heartbeats and the view of one site
 * (r2_agent.h). One worker thread (xt_worker) does all the talking; the
 * getters only copy what it stored under a->mu.
 *
 * Invariants:
 *  (1) Only the agent's worker touches a->targets, a->ntargets, a->cur,
 *      prev_id and the schedule (next_ns, backoff_ms, last_err) after start
 *      (no lock).
 *  (2) a->mu protects site_id, registered, view, has_view, stopping and
 *      stats; it is never held across an RPC or a callback.
 *  (3) Heartbeats are sent on a fixed schedule (next = previous + interval),
 *      not an interval after the last reply, so a slow reply does not
 *      stretch the gaps R2 measures; missed slots are skipped, not bunched.
 */
#include "r2_agent.h"

#include "xt_common.h"
#include "xt_daemon.h"
#include "xt_worker.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000
#define MAX_TARGETS (R2_AGENT_MAX_ADDRS + 4)

struct target {
    char addr[XT_ADDR_MAX];
    xt_rpc_pool *pool;
};

struct r2_agent {
    struct r2_agent_opts o;     /* strings below are owned copies */
    struct xt_auth_cred cred;   /* o.cred points here when given */
    char *fs_name, *addr, *id_file, *metrics;
    unsigned hb_ms, call_ms;

    struct target targets[MAX_TARGETS]; /* agent thread only */
    size_t ntargets, cur;

    xt_worker *worker;
    uint64_t next_ns;            /* agent worker only: the next heartbeat slot */
    unsigned backoff_ms;         /* agent worker only: the next registration retry */
    int last_err;                /* agent worker only: said once, not per retry */
    pthread_mutex_t mu;
    pthread_cond_t cv;           /* registration, stop (monotonic clock) */
    bool stopping;               /* protected by mu */
    bool registered;             /* protected by mu */
    uint32_t site_id;            /* protected by mu */
    uint32_t prev_id;            /* agent thread only */
    struct xt_view view;         /* protected by mu */
    bool has_view;               /* protected by mu */
    struct xt_capacity cap;      /* the last heartbeat reply's; protected by mu */
    bool has_cap;                /* protected by mu */
    struct r2_agent_stats st;    /* protected by mu */
};

/* ---- views ------------------------------------------------------------------- */

int r2_view_dup(const struct xt_view *src, struct xt_view *dst)
{
    assert(src && dst && src != dst);
    *dst = *src;
    dst->sites = NULL;
    dst->rings = NULL;
    dst->fs = NULL;
    dst->ring1 = NULL;
    dst->nsites = dst->nrings = dst->nfs = 0;
    if (xt_view_ring1_dup(src->ring1, &dst->ring1) < 0)
        goto nomem;
    if (src->nsites) {
        dst->sites = xt_malloc(src->nsites * sizeof *dst->sites);
        if (!dst->sites)
            goto nomem;
        memcpy(dst->sites, src->sites, src->nsites * sizeof *dst->sites);
        dst->nsites = src->nsites;
    }
    if (src->nrings) {
        dst->rings = xt_calloc(src->nrings, sizeof *dst->rings);
        if (!dst->rings)
            goto nomem;
        for (size_t i = 0; i < src->nrings; i++) {
            dst->rings[i] = src->rings[i];
            dst->rings[i].data = xt_malloc(src->rings[i].len ? src->rings[i].len : 1);
            if (!dst->rings[i].data)
                goto nomem;
            memcpy(dst->rings[i].data, src->rings[i].data, src->rings[i].len);
            dst->nrings++;
        }
    }
    if (src->nfs) {
        dst->fs = xt_calloc(src->nfs, sizeof *dst->fs);
        if (!dst->fs)
            goto nomem;
        for (size_t i = 0; i < src->nfs; i++) {
            dst->fs[i] = src->fs[i];
            dst->fs[i].root_bitmap = NULL;
            dst->nfs++;
            if (src->fs[i].root_bitmap_len) {
                dst->fs[i].root_bitmap = xt_malloc(src->fs[i].root_bitmap_len);
                if (!dst->fs[i].root_bitmap)
                    goto nomem;
                memcpy(dst->fs[i].root_bitmap, src->fs[i].root_bitmap,
                       src->fs[i].root_bitmap_len);
            }
        }
    }
    return 0;
nomem:
    xt_view_free(dst);
    return -ENOMEM;
}

/* REQUIRES: a->mu. Merges reply d into the full view (takes d's arrays);
 * returns the sections that changed. A full reply replaces everything. */
static int merge_view(r2_agent *a, struct xt_view *d)
{
    assert(xt_mutex_held(&a->mu));
    struct xt_view *v = &a->view;
    int all = XT_VIEW_SITES | XT_VIEW_RINGS | XT_VIEW_FS;
    if (!a->has_view || (d->sections & all) == all) {
        xt_view_free(v);
        *v = *d;
        v->sections = all;
        memset(d, 0, sizeof *d);
        a->has_view = true;
        return all;
    }
    v->version = d->version;
    memcpy(v->leader, d->leader, sizeof v->leader);
    memcpy(v->store, d->store, sizeof v->store);
    if (d->sections & XT_VIEW_SITES) {
        xt_free(v->sites);
        v->sites = d->sites;
        v->nsites = d->nsites;
        d->sites = NULL;
        d->nsites = 0;
    }
    if (d->sections & XT_VIEW_RINGS) {
        for (size_t i = 0; i < v->nrings; i++)
            xt_free(v->rings[i].data);
        xt_free(v->rings);
        v->rings = d->rings;
        v->nrings = d->nrings;
        d->rings = NULL;
        d->nrings = 0;
        xt_view_ring1_free(v->ring1);
        v->ring1 = d->ring1;
        d->ring1 = NULL;
    }
    if (d->sections & XT_VIEW_FS) {
        xt_fs_info_free_array(v->fs, v->nfs);
        v->fs = d->fs;
        v->nfs = d->nfs;
        d->fs = NULL;
        d->nfs = 0;
    }
    return d->sections & all;
}

/* Stores reply d (consumed) and tells the callback. */
static void take_view(r2_agent *a, struct xt_view *d)
{
    struct xt_view copy;
    memset(&copy, 0, sizeof copy);
    pthread_mutex_lock(&a->mu);
    int changed = merge_view(a, d);
    a->st.views++;
    bool tell = a->o.on_view && changed && r2_view_dup(&a->view, &copy) == 0;
    pthread_mutex_unlock(&a->mu);
    xt_view_free(d);
    if (tell) {
        a->o.on_view(a->o.view_arg, &copy, changed);
        xt_view_free(&copy);
    }
}

/* ---- targets ------------------------------------------------------------------- */

static int target_add(r2_agent *a, const char *addr, size_t *idx)
{
    for (size_t i = 0; i < a->ntargets; i++)
        if (!strcmp(a->targets[i].addr, addr)) {
            *idx = i;
            return 0;
        }
    assert(a->ntargets <= MAX_TARGETS);
    if (a->ntargets == MAX_TARGETS)
        return -ENOSPC;
    char host[XT_ADDR_MAX];
    int port = 0;
    if (strlen(addr) >= XT_ADDR_MAX || xt_rpc_parse_addr(addr, host, sizeof host, &port) ||
        port <= 0 || port > 65535)
        return -EINVAL;
    struct xt_rpc_pool_opts po = { .host = host, .port = port, .max_idle = 2,
                                   .connect_timeout_ms = (int)XT_MIN(a->call_ms, 2000u),
                                   .call_timeout_ms = (int)a->call_ms,
                                   .backoff_min_ms = 20, .backoff_max_ms = 500,
                                   .cred = a->o.cred, .tls = a->o.tls };
    struct target *t = &a->targets[a->ntargets];
    int rc = xt_rpc_pool_new(&po, &t->pool);
    if (rc < 0)
        return rc;
    snprintf(t->addr, sizeof t->addr, "%s", addr);
    *idx = a->ntargets++;
    assert(t->pool != NULL);
    return 0;
}

static void set_cur(r2_agent *a, size_t i)
{
    assert(i < a->ntargets);
    a->cur = i;
}

/* Asks each R2 (starting after the current one) who leads, and goes there.
 * Returns 0 (a->cur is the leader) or -errno. */
static int find_leader(r2_agent *a)
{
    pthread_mutex_lock(&a->mu);
    a->st.leader_searches++;
    pthread_mutex_unlock(&a->mu);
    int rc = -EAGAIN;
    size_t n = a->ntargets; /* only the configured and known addresses */
    assert(n > 0 && a->cur < n);
    /* A short timeout: a follower cut off from the store blocks get_view,
     * and the new leader's grace period is only a few intervals. */
    xt_rpc_call call = { .timeout_ms = (int)XT_MIN(a->call_ms, XT_MAX(4 * a->hb_ms, 1000u)) };
    for (size_t k = 1; k <= n; k++) {
        size_t i = (a->cur + k) % n;
        bool has = false;
        struct xt_view v;
        call.req_id = 0;
        rc = xt_r2_get_view(a->targets[i].pool, &call, 0, &has, &v);
        XT_DBG("r2 agent: %s names leader '%s' (%s)", a->targets[i].addr,
               rc == 0 ? v.leader : "", rc == 0 ? "ok" : strerror(-rc));
        if (rc < 0)
            continue;
        char leader[XT_ADDR_MAX];
        snprintf(leader, sizeof leader, "%s", v.leader);
        xt_view_free(&v);
        if (!leader[0]) {
            rc = -EAGAIN; /* an election is under way */
            continue;
        }
        size_t idx = 0;
        rc = target_add(a, leader, &idx);
        if (rc == 0) {
            if (idx != a->cur)
                XT_INFO("r2 agent: R2 leader is %s", leader);
            set_cur(a, idx);
            return 0;
        }
    }
    /* Nobody knows: try the next address next time. */
    set_cur(a, (a->cur + 1) % a->ntargets);
    return rc;
}

/* ---- the agent thread ---------------------------------------------------------------- */

static int try_register(r2_agent *a)
{
    uint32_t id = 0;
    struct xt_view v;
    int rc = -EAGAIN;
    for (int attempt = 0; attempt < 2; attempt++) {
        rc = xt_r2_register(a->targets[a->cur].pool, NULL, a->o.type, a->addr, a->o.capacity,
                            a->prev_id, a->fs_name, a->metrics, &id, &v);
        if (rc == 0 || rc == -EINVAL || rc == -ENOENT || rc == -EIDRM)
            break; /* ENOENT: the fs to mount does not exist; EIDRM: removed */
        if (find_leader(a) < 0)
            break;
    }
    if (rc < 0)
        return rc;
    assert(id != 0); /* 0 reads "not registered" (r2_agent_site_id) */
    pthread_mutex_lock(&a->mu);
    a->site_id = id;
    a->st.registrations++;
    pthread_mutex_unlock(&a->mu);
    XT_INFO("r2 agent: registered as %s site %u at %s%s", xt_site_type_name(a->o.type), id,
            a->targets[a->cur].addr, a->prev_id && a->prev_id != id ? " (new id)" : "");
    if (a->id_file && id != a->prev_id) {
        int w = xt_daemon_write_int_file(a->id_file, id);
        if (w < 0)
            XT_WARN("r2 agent: cannot write %s: %s", a->id_file, strerror(-w));
    }
    a->prev_id = id;
    if (a->o.on_id)
        a->o.on_id(a->o.id_arg, id);
    take_view(a, &v);
    /* Announced last, so whoever r2_agent_wait_registered woke also has
     * the view the registration brought (the daemon test read it -EAGAIN
     * in the gap once, in CI). */
    pthread_mutex_lock(&a->mu);
    a->registered = true;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    return 0;
}

static int heartbeat(r2_agent *a)
{
    struct xt_fs_counter c[R2_AGENT_MAX_COUNTERS];
    double load = 0;
    size_t n = a->o.stats ? a->o.stats(a->o.stats_arg, &load, c, XT_ARRAY_SIZE(c)) : 0;
    if (n > XT_ARRAY_SIZE(c))
        n = XT_ARRAY_SIZE(c);
    pthread_mutex_lock(&a->mu);
    uint32_t id = a->site_id;
    uint64_t version = a->has_view ? a->view.version : 0;
    pthread_mutex_unlock(&a->mu);
    struct xt_r2_hb_ring1 r1;
    memset(&r1, 0, sizeof r1);
    if (a->o.ring1)
        a->o.ring1(a->o.ring1_arg, &r1);
    struct xt_r2_hb_usage u;
    memset(&u, 0, sizeof u);
    if (a->o.usage)
        a->o.usage(a->o.usage_arg, &u);
    bool has = false;
    struct xt_view v;
    struct xt_capacity cap;
    int rc = xt_r2_heartbeat_ex(a->targets[a->cur].pool, NULL, id, version, load, c, n,
                                a->o.ring1 ? &r1 : NULL, a->o.usage ? &u : NULL, &has, &v,
                                &cap);
    if (rc == 0 && cap.valid && a->o.on_capacity)
        a->o.on_capacity(a->o.capacity_arg, &cap);
    pthread_mutex_lock(&a->mu);
    a->st.heartbeats++;
    if (rc < 0)
        a->st.hb_failures++;
    if (rc == 0 && cap.valid) {
        xt_capacity_free(&a->cap);
        a->cap = cap; /* taken */
        memset(&cap, 0, sizeof cap);
        a->has_cap = true;
    }
    pthread_mutex_unlock(&a->mu);
    xt_capacity_free(&cap);
    if (rc == 0 && has)
        take_view(a, &v);
    return rc;
}

/* One step of the agent's worker: registers while unregistered (retrying
 * with a doubling back-off), else sends the heartbeat of the slot that has
 * come. Returns the ms until the next step. */
static uint64_t agent_step(xt_worker *w, void *arg)
{
    r2_agent *a = arg;
    (void)w;
    uint64_t hb = (uint64_t)a->hb_ms * 1000000u;
    pthread_mutex_lock(&a->mu);
    bool registered = a->registered;
    pthread_mutex_unlock(&a->mu);
    if (!registered) {
        int rc = try_register(a);
        if (rc == 0) {
            a->backoff_ms = BACKOFF_MIN_MS;
            a->last_err = 0;
            a->next_ns = xt_mono_ns() + hb;
            return a->hb_ms;
        }
        if (rc != a->last_err && rc == -EIDRM)
            XT_ERR("r2 agent: R2 refuses site %u: the operator removed it (pomctl site "
                   "remove); this daemon stays out of the cluster (to join again as a new "
                   "site, start it on an empty folder)", a->prev_id);
        else if (rc != a->last_err)
            XT_WARN("r2 agent: cannot register with R2 (%s): %s; retrying",
                    a->targets[a->cur].addr, strerror(-rc));
        a->last_err = rc;
        unsigned wait = a->backoff_ms;
        a->backoff_ms = XT_MIN(a->backoff_ms * 2, BACKOFF_MAX_MS);
        assert(wait >= BACKOFF_MIN_MS && wait <= BACKOFF_MAX_MS);
        return wait;
    }
    a->next_ns += hb;
    uint64_t now = xt_mono_ns();
    if (a->next_ns < now)
        a->next_ns = now + hb; /* invariant 3: skip missed slots */
    int rc = heartbeat(a);
    if (rc == -ENOENT) {
        /* R2 forgot this site (removed, or the store was lost). */
        XT_WARN("r2 agent: R2 does not know site %u: registering again", a->prev_id);
        pthread_mutex_lock(&a->mu);
        a->registered = false;
        pthread_mutex_unlock(&a->mu);
        return 0;
    }
    if (rc < 0) {
        if (rc != a->last_err)
            XT_WARN("r2 agent: heartbeat to %s failed: %s; looking for the leader",
                    a->targets[a->cur].addr, strerror(-rc));
        find_leader(a);
    }
    a->last_err = rc;
    return xt_deadline_left_ms(a->next_ns);
}

/* ---- API --------------------------------------------------------------------------- */

static uint32_t read_id_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[32] = "";
    uint64_t id = 0;
    if (fgets(buf, sizeof buf, f)) {
        buf[strcspn(buf, "\n")] = '\0';
        if (xt_parse_u64(buf, 1, INT32_MAX, &id) < 0) {
            XT_WARN("r2 agent: ignoring %s: not a site id", path);
            id = 0;
        }
    }
    fclose(f);
    return (uint32_t)id;
}

static void agent_free(r2_agent *a)
{
    for (size_t i = 0; i < a->ntargets; i++)
        xt_rpc_pool_free(a->targets[i].pool);
    xt_view_free(&a->view);
    xt_capacity_free(&a->cap);
    xt_free(a->fs_name);
    xt_free(a->metrics);
    xt_free(a->addr);
    xt_free(a->id_file);
    pthread_cond_destroy(&a->cv);
    pthread_mutex_destroy(&a->mu);
    xt_rpc_tls_free(a->o.tls);
    xt_free(a);
}

int r2_agent_start(const struct r2_agent_opts *o, r2_agent **out)
{
    *out = NULL;
    if (!o || !o->r2_addrs || !o->addr ||
        (o->type != XT_SITE_MDS && o->type != XT_SITE_MDSL && o->type != XT_SITE_CLIENT &&
         o->type != XT_SITE_R2) ||
        o->hb_interval_ms > 3600000)
        return -EINVAL;
    r2_agent *a = xt_calloc(1, sizeof *a);
    if (!a)
        return -ENOMEM;
    a->o = *o;
    a->o.tls = xt_rpc_tls_ref(o->tls);
    if (o->cred) {
        a->cred = *o->cred;
        a->o.cred = &a->cred;
    }
    pthread_mutex_init(&a->mu, NULL);
    xt_cond_init_mono(&a->cv);
    a->backoff_ms = BACKOFF_MIN_MS;
    a->hb_ms = o->hb_interval_ms ? o->hb_interval_ms : 1000;
    a->call_ms = o->call_timeout_ms ? o->call_timeout_ms : XT_MAX(3 * a->hb_ms, 2000u);
    a->addr = xt_strdup(o->addr);
    a->fs_name = xt_strdup(o->fs_name ? o->fs_name : "");
    a->metrics = xt_strdup(o->metrics ? o->metrics : "");
    a->id_file = o->id_file ? xt_strdup(o->id_file) : NULL;
    int rc = 0;
    if (!a->addr || !a->fs_name || !a->metrics || (o->id_file && !a->id_file))
        rc = -ENOMEM;
    /* Addresses: "a:1,b:2". */
    const char *p = o->r2_addrs;
    while (rc == 0 && *p) {
        size_t len = strcspn(p, ",");
        char one[XT_ADDR_MAX];
        size_t idx = 0;
        if (len == 0 || len >= sizeof one || a->ntargets >= R2_AGENT_MAX_ADDRS) {
            rc = -EINVAL;
            break;
        }
        memcpy(one, p, len);
        one[len] = '\0';
        rc = target_add(a, one, &idx);
        p += len;
        if (*p == ',')
            p++;
    }
    if (rc == 0 && a->ntargets == 0)
        rc = -EINVAL;
    if (rc < 0) {
        agent_free(a);
        return rc;
    }
    a->o.r2_addrs = NULL; /* not kept */
    a->prev_id = o->prev_id ? o->prev_id : a->id_file ? read_id_file(a->id_file) : 0;
    set_cur(a, 0);
    struct xt_worker_opts wo = { .name = "r2-agent", .step = agent_step, .arg = a };
    rc = xt_worker_start(&wo, &a->worker);
    if (rc < 0) {
        agent_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void r2_agent_stop(r2_agent *a)
{
    if (!a)
        return;
    pthread_mutex_lock(&a->mu);
    a->stopping = true;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    xt_worker_stop(a->worker);
    /* The worker is gone: this thread owns the targets (invariant 1). */
    pthread_mutex_lock(&a->mu);
    uint32_t id = a->registered ? a->site_id : 0;
    pthread_mutex_unlock(&a->mu);
    if (id && a->o.type == XT_SITE_CLIENT) {
        /* Short: an unmount must not wait long for an R2 that is down. */
        xt_rpc_call call = { .timeout_ms = (int)XT_MIN(a->call_ms, 1000u) };
        int rc = xt_r2_site_leave(a->targets[a->cur].pool, &call, id);
        if (rc == -EREMOTE && find_leader(a) == 0) {
            call.req_id = 0;
            rc = xt_r2_site_leave(a->targets[a->cur].pool, &call, id);
        }
        if (rc < 0 && rc != -ENOENT)
            XT_WARN("r2 agent: site %u could not leave R2's view (%s): it expires there",
                    id, strerror(-rc));
    }
    agent_free(a);
}

int r2_agent_wait_registered(r2_agent *a, int timeout_ms)
{
    uint64_t at = xt_deadline_ms(timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
    pthread_mutex_lock(&a->mu);
    while (!a->registered && !a->stopping && xt_cond_wait_until(&a->cv, &a->mu, at) == 0)
        ;
    bool ok = a->registered;
    pthread_mutex_unlock(&a->mu);
    return ok ? 0 : -ETIMEDOUT;
}

uint32_t r2_agent_site_id(r2_agent *a)
{
    pthread_mutex_lock(&a->mu);
    uint32_t id = a->registered ? a->site_id : 0;
    pthread_mutex_unlock(&a->mu);
    return id;
}

int r2_agent_view_copy(r2_agent *a, struct xt_view *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&a->mu);
    int rc = a->has_view ? r2_view_dup(&a->view, out) : -EAGAIN;
    pthread_mutex_unlock(&a->mu);
    return rc;
}

int r2_agent_capacity(r2_agent *a, struct xt_capacity *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&a->mu);
    int rc = a->has_cap ? xt_capacity_dup(&a->cap, out) : -EAGAIN;
    pthread_mutex_unlock(&a->mu);
    return rc;
}

void r2_agent_stats(r2_agent *a, struct r2_agent_stats *st)
{
    pthread_mutex_lock(&a->mu);
    *st = a->st;
    pthread_mutex_unlock(&a->mu);
}
