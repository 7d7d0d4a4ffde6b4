/*
 * r2_mgr.c -- the calls of the site manager (r2_mgr.h): registration,
 * heartbeats, failure detection, drain/remove, fs instances, uuid ranges;
 * each change written to the store as one transaction with the view
 * version (invariant 1 of r2_mgr.h).
 *
 * How a change is made (all under m->wmu):
 *   1. ensure_loaded(): this R2 leads and m->st is the store's state (a new
 *      leadership, or a write whose outcome is unknown, reloads it);
 *   2. the new records are built beside m->st (rings are changed on copies);
 *   3. r2_txn_commit() (r2_mgr_txn.c) writes them and /r2/view in one r2_store_multi;
 *   4. only on success are they installed into m->st, under m->mu.
 * So m->st never holds a change the store refused, and readers (under mu)
 * never wait for the store.
 */
#include "r2_mgr_i.h"

#include "xt_bitmap.h"
#include "xt_common.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t default_clock(void)
{
    return xt_mono_ns();
}

/* REQUIRES: m->mu. Whether m->st is the current leader's state. */
static bool st_current(const r2_mgr *m)
{
    assert(xt_mutex_held(&m->mu));
    return m->leader && m->st_valid && m->loaded_epoch == m->epoch && !m->need_reload;
}

/* ---- leadership and loading -------------------------------------------------- */

void r2_mgr_set_self(r2_mgr *m, const char *addr)
{
    pthread_mutex_lock(&m->mu);
    snprintf(m->self, sizeof m->self, "%s", addr);
    pthread_mutex_unlock(&m->mu);
}

void r2_mgr_leader_cb(void *arg, bool leader)
{
    r2_mgr *m = arg;
    pthread_mutex_lock(&m->mu);
    if (m->leader != leader) {
        m->leader = leader;
        m->epoch++;
    }
    if (m->monitor)
        xt_worker_wake(m->monitor); /* tick now: a new leader starts the clocks */
    pthread_mutex_unlock(&m->mu);
    XT_INFO("%s", leader ? "now leading" : "not leading");
}

/* REQUIRES: m->wmu. Makes m->st the store's state, if this R2 leads. A new
 * leadership starts every site's failure clock now (r2_mgr.h (5)); a reload
 * within one leadership keeps the runtime of the sites. */
static int ensure_loaded(r2_mgr *m)
{
    assert(xt_mutex_held(&m->wmu));
    if (!r2_store_is_leader(m->store))
        return -EREMOTE;
    pthread_mutex_lock(&m->mu);
    uint64_t epoch = m->epoch;
    bool ok = st_current(m), leader = m->leader;
    bool fresh = !m->st_valid || m->loaded_epoch != epoch;
    pthread_mutex_unlock(&m->mu);
    if (ok)
        return 0;
    if (!leader)
        return -EREMOTE;
    struct r2_state st;
    int rc = r2_state_load(m->store, m->vnodes, &st);
    if (rc < 0) {
        XT_WARN("cannot load the state: %s", strerror(-rc));
        return rc;
    }
    uint64_t now = m->clock();
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < st.nsites; i++) {
        struct r2_site_ent *e = &st.sites[i];
        struct r2_site_ent *old = fresh ? NULL : r2_state_site(&m->st, e->s.id);
        if (old) {
            e->last_hb_mono = old->last_hb_mono;
            e->s.last_hb_ns = old->s.last_hb_ns;
            e->s.load = old->s.load;
            e->has_storage = old->has_storage;
            e->storage = old->storage;
            e->has_repl = old->has_repl;
            e->under_replicated = old->under_replicated;
            e->r1 = old->r1;
        } else {
            e->last_hb_mono = now;
        }
    }
    if (!fresh) {
        /* Memory holds usage newer than /r2/usage (r2_usage_flush) */
        struct r2_usage *u = st.usage;
        size_t nu = st.nusage;
        st.usage = m->st.usage;
        st.nusage = m->st.nusage;
        m->st.usage = u;
        m->st.nusage = nu;
    }
    r2_state_clear(&m->st);
    m->st = st;
    m->st_valid = true;
    m->loaded_epoch = epoch;
    m->need_reload = false;
    pthread_mutex_unlock(&m->mu);
    if (fresh)
        XT_INFO("leading with view %llu: %zu sites, %zu fs, rings v%llu/v%llu",
                (unsigned long long)st.meta.version, st.nsites, st.nfs,
                (unsigned long long)xt_ring_version(st.ring[0]),
                (unsigned long long)xt_ring_version(st.ring[1]));
    return 0;
}

/* Locks m->wmu and makes sure the state is loaded; on error unlocks it. */
static int begin(r2_mgr *m)
{
    pthread_mutex_lock(&m->wmu);
    int rc = ensure_loaded(m);
    if (rc < 0)
        pthread_mutex_unlock(&m->wmu);
    return rc;
}

static void end(r2_mgr *m)
{
    pthread_mutex_unlock(&m->wmu);
}

/* A full view of m->st into *view (may be NULL). REQUIRES: m->wmu. */
static int full_view(r2_mgr *m, struct xt_view *view)
{
    assert(xt_mutex_held(&m->wmu));
    if (!view)
        return 0;
    bool has = false;
    pthread_mutex_lock(&m->mu);
    int rc = r2_state_view(&m->st, 0, m->self, m->backend, &has, view);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* A copy of ring r with site added or removed, into *out (NULL when it
 * needs no change). */
static int ring_change(const r2_mgr *m, int r, uint32_t site, bool add, xt_ring **out)
{
    *out = NULL;
    assert(r < (int)XT_ARRAY_SIZE(m->st.ring));
    if (r < 0 || (xt_ring_has_site(m->st.ring[r], site) ? add : !add))
        return 0;
    xt_ring *c = xt_ring_dup(m->st.ring[r]);
    if (!c)
        return -ENOMEM;
    int rc = add ? xt_ring_add_site(c, site, XT_RING_WEIGHT_UNIT) : xt_ring_remove_site(c, site);
    if (rc < 0) {
        xt_ring_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* REQUIRES: m->wmu, state loaded. A copy of the ring of site s with s added
 * into *out (NULL: no change): an MDS always joins ring 0; an MDSL joins
 * ring 1 at once only while it is OPEN (r2_ring1_mode; *kept_out, may be
 * NULL, is then set to the mode that keeps it out: FROZEN, or PHASED where
 * it joins with the next ring-1 change; 0 when it is not kept out). */
static int ring_join(r2_mgr *m, const struct xt_site *s, xt_ring **out, int *kept_out)
{
    assert(xt_mutex_held(&m->wmu) && m->st_valid);
    *out = NULL;
    if (kept_out)
        *kept_out = 0;
    int r = r2_state_ring_of(s->type);
    int mode = r == XT_RING_MDSL ? r2_ring1_mode_of(m) : R2_RING1_OPEN;
    if (mode != R2_RING1_OPEN && !xt_ring_has_site(m->st.ring[r], s->id)) {
        if (kept_out)
            *kept_out = mode;
        return 0;
    }
    return ring_change(m, r, s->id, true, out);
}

/* REQUIRES: m->mu. Installs a changed ring. */
static void ring_install(r2_mgr *m, xt_ring *nr)
{
    assert(xt_mutex_held(&m->mu));
    uint32_t r = xt_ring_id(nr);
    assert(r < XT_ARRAY_SIZE(m->st.ring) && m->st.ring[r] != nr);
    xt_ring_free(m->st.ring[r]);
    m->st.ring[r] = nr;
}

/* Sections a change of site s touches besides SITES: FS when it is a client
 * of an fs (mount counts). */
static int site_sections(const struct xt_site *s)
{
    return XT_VIEW_SITES | (s->type == XT_SITE_CLIENT && s->fs_name[0] ? XT_VIEW_FS : 0);
}

/* ---- registration and heartbeats --------------------------------------------- */

/* REQUIRES: leading (between begin and end). 1 when the operator removed
 * server site id (its tombstone, r2_rec.h /r2/removed), 0 when not, or a
 * negative errno from the store. */
static int was_removed(r2_mgr *m, uint32_t id)
{
    char key[R2_KEY_LEN];
    r2_rec_removed_key(key, id);
    void *buf = NULL;
    size_t len = 0;
    int rc = r2_store_get(m->store, key, &buf, &len, NULL);
    xt_free(buf);
    return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

int r2_mgr_register(r2_mgr *m, int type, const char *addr, uint64_t capacity, uint32_t prev_id,
                    const char *fs_name, const char *metrics, uint32_t *site_id,
                    struct xt_view *view)
{
    if (view)
        memset(view, 0, sizeof *view);
    *site_id = 0;
    if (!fs_name)
        fs_name = "";
    if (!metrics)
        metrics = "";
    if ((metrics[0] && !r2_rec_addr_valid(XT_SITE_MDS, metrics)) || (type != XT_SITE_MDS && type != XT_SITE_MDSL && type != XT_SITE_CLIENT &&
         type != XT_SITE_R2) ||
        !r2_rec_addr_valid(type, addr) ||
        (fs_name[0] && (type != XT_SITE_CLIENT || !r2_rec_fs_name_valid(fs_name))))
        return -EINVAL;
    int rc = begin(m);
    if (rc < 0)
        return rc;
    const struct r2_site_ent *old = prev_id ? r2_state_site(&m->st, prev_id) : NULL;
    if (old && old->s.type != type)
        old = NULL; /* another site's id: this one gets a new id */
    struct r2_txn t = { .n = 0 };
    xt_ring *nr = NULL;
    struct xt_site s;
    if (prev_id && !old && type != XT_SITE_CLIENT && (rc = was_removed(m, prev_id)) != 0) {
        if (rc > 0) {
            XT_WARN("site %u (%s %s) was removed: its registration is refused", prev_id,
                    xt_site_type_name(type), addr);
            rc = -EIDRM;
        }
        goto out;
    }
    if (fs_name[0] && !r2_state_fs_by_name(&m->st, fs_name)) {
        rc = -ENOENT;
        goto out;
    }
    if (old) {
        s = old->s;
        s.state = old->s.state == XT_SITE_DRAINING ? XT_SITE_DRAINING : XT_SITE_UP;
    } else {
        if (m->st.nsites >= R2_MGR_MAX_SITES) {
            rc = -ENOSPC;
            goto out;
        }
        uint64_t id = 0;
        rc = r2_store_alloc_id(m->store, R2_KEY_ID_SITES, 1, &id);
        if (rc == 0 && id > UINT32_MAX)
            rc = -EOVERFLOW;
        if (rc < 0)
            goto out;
        memset(&s, 0, sizeof s);
        s.id = (uint32_t)id;
        s.state = XT_SITE_UP;
    }
    s.type = type;
    snprintf(s.addr, sizeof s.addr, "%s", addr);
    snprintf(s.fs_name, sizeof s.fs_name, "%s", fs_name);
    snprintf(s.metrics, sizeof s.metrics, "%s", metrics);
    s.capacity = capacity;
    if (type == XT_SITE_MDS) {
        /* Every registration gets a fresh range: the MDS may have used any
         * part of its old one before it went away. */
        uint64_t first = 0;
        rc = r2_store_alloc_id(m->store, R2_KEY_ID_UUIDS, 1, &first);
        if (rc == 0 && first >= UINT64_MAX / m->uuid_range)
            rc = -EOVERFLOW;
        if (rc < 0)
            goto out;
        s.uuid_lo = first * m->uuid_range;
        s.uuid_hi = s.uuid_lo + m->uuid_range;
    }
    int kept_out = 0;
    if ((rc = r2_txn_site(&t, &s)) < 0)
        goto out;
    if (r2_state_in_ring(&s) &&
        ((rc = ring_join(m, &s, &nr, &kept_out)) < 0 || (nr && (rc = r2_txn_ring(&t, nr)) < 0)))
        goto out;
    rc = r2_txn_commit(m, &t, site_sections(&s) | (nr ? XT_VIEW_RINGS : 0) |
                               (old && old->s.fs_name[0] ? XT_VIEW_FS : 0));
    if (rc < 0)
        goto out;
    s.last_hb_ns = xt_now_ns();
    s.load = 0;
    pthread_mutex_lock(&m->mu);
    struct r2_site_ent *e = r2_state_site(&m->st, s.id);
    if (e) {
        e->s = s;
        e->last_hb_mono = m->clock();
    } else {
        struct r2_site_ent ne = { .s = s, .last_hb_mono = m->clock() };
        rc = r2_state_site_insert(&m->st, &ne);
        if (rc < 0)
            m->need_reload = true; /* the store has it; memory does not */
    }
    if (nr) {
        ring_install(m, nr);
        nr = NULL;
    }
    pthread_mutex_unlock(&m->mu);
    if (rc == 0) {
        XT_INFO("site %u registered: %s %s%s%s (%s)", s.id, xt_site_type_name(type), addr,
                fs_name[0] ? " fs " : "", fs_name, old ? "rejoined" : "new");
        if (kept_out == R2_RING1_FROZEN)
            XT_WARN("site %u (mdsl %s) is up but NOT in ring 1: ring 1 is frozen while it "
                    "holds slices and not every MDS of ring 0 follows ring-1 changes "
                    "(docs/mdsl-scale.md); it holds no slices",
                    s.id, addr);
        else if (kept_out == R2_RING1_PHASED)
            XT_INFO("site %u (mdsl %s) waits out of ring 1: it joins with the next ring-1 "
                    "change",
                    s.id, addr);
        *site_id = s.id;
        rc = full_view(m, view);
    }
out:
    xt_ring_free(nr);
    r2_txn_free(&t);
    end(m);
    return rc;
}

/* REQUIRES: m->mu. Records a heartbeat's runtime data: load, ring-1
 * fields, an MDSL's storage, an MDS's usage counts (docs/r2.md "Capacity
 * and quotas"); fills *cap (may be NULL) with the capacity to reply. */
static int beat(r2_mgr *m, struct r2_site_ent *e, double load, const struct xt_fs_counter *c,
                size_t n, const struct xt_r2_hb_ring1 *r1, const struct xt_r2_hb_usage *u,
                struct xt_capacity *cap)
{
    assert(xt_mutex_held(&m->mu));
    assert(n == 0 || c != NULL);
    e->last_hb_mono = m->clock();
    r2_ring1_beat(m, e, r1);
    e->s.last_hb_ns = xt_now_ns();
    e->s.load = load;
    e->has_storage = u && u->has_storage && e->s.type == XT_SITE_MDSL;
    if (e->has_storage)
        e->storage = u->storage;
    e->has_repl = u && u->has_repl && e->s.type == XT_SITE_MDSL;
    e->under_replicated = e->has_repl ? u->under_replicated : 0;
    int rc = 0;
    if (u && u->has_epoch && e->s.type == XT_SITE_MDS)
        rc = r2_usage_beat(m, e->s.id, u->epoch, c, n);
    if (rc == 0 && cap)
        rc = r2_usage_capacity(&m->st, e, cap);
    return rc;
}

int r2_mgr_heartbeat(r2_mgr *m, uint32_t site_id, uint64_t view_version, double load,
                     const struct xt_fs_counter *c, size_t n, const struct xt_r2_hb_ring1 *r1,
                     const struct xt_r2_hb_usage *u, bool *has_view, struct xt_view *view,
                     struct xt_capacity *cap)
{
    *has_view = false;
    memset(view, 0, sizeof *view);
    if (cap)
        memset(cap, 0, sizeof *cap);
    if (n > R2_MGR_MAX_COUNTERS || (n && !c) || !(load >= 0 && load < 1e12))
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if (c[i].fsid == 0)
            return -EINVAL;
    int rc;
    /* Fast path: no state change, no store I/O. */
    pthread_mutex_lock(&m->mu);
    if (st_current(m)) {
        struct r2_site_ent *e = r2_state_site(&m->st, site_id);
        if (!e) {
            pthread_mutex_unlock(&m->mu);
            return -ENOENT;
        }
        if (e->s.state == XT_SITE_UP || e->s.state == XT_SITE_DRAINING) {
            rc = beat(m, e, load, c, n, r1, u, cap);
            if (rc == 0)
                rc = r2_state_view(&m->st, view_version, m->self, m->backend, has_view, view);
            pthread_mutex_unlock(&m->mu);
            if (rc < 0 && cap)
                xt_capacity_free(cap);
            return rc;
        }
    }
    pthread_mutex_unlock(&m->mu);

    /* Slow path: a TRANSIENT or FAILED site comes back (or state to load). */
    rc = begin(m);
    if (rc < 0)
        return rc;
    struct r2_txn t = { .n = 0 };
    xt_ring *nr = NULL;
    pthread_mutex_lock(&m->mu);
    struct r2_site_ent *e = r2_state_site(&m->st, site_id);
    struct xt_site s;
    if (e) {
        rc = beat(m, e, load, c, n, r1, u, cap);
        s = e->s;
    }
    pthread_mutex_unlock(&m->mu);
    if (!e)
        rc = -ENOENT;
    if (rc < 0)
        goto out;
    if (s.state == XT_SITE_TRANSIENT || s.state == XT_SITE_FAILED) {
        int was = s.state;
        s.state = XT_SITE_UP;
        if ((rc = r2_txn_site(&t, &s)) < 0 ||
            (rc = ring_join(m, &s, &nr, NULL)) < 0 ||
            (nr && (rc = r2_txn_ring(&t, nr)) < 0) ||
            (rc = r2_txn_commit(m, &t, site_sections(&s) | (nr ? XT_VIEW_RINGS : 0))) < 0)
            goto out;
        pthread_mutex_lock(&m->mu);
        e = r2_state_site(&m->st, site_id);
        e->s.state = XT_SITE_UP;
        if (nr) {
            ring_install(m, nr);
            nr = NULL;
        }
        pthread_mutex_unlock(&m->mu);
        XT_INFO("site %u (%s %s) is up again after %s", s.id, xt_site_type_name(s.type),
                s.addr, xt_site_state_name(was));
    }
    pthread_mutex_lock(&m->mu);
    rc = r2_state_view(&m->st, view_version, m->self, m->backend, has_view, view);
    pthread_mutex_unlock(&m->mu);
out:
    xt_ring_free(nr);
    r2_txn_free(&t);
    end(m);
    if (rc < 0 && cap)
        xt_capacity_free(cap);
    return rc;
}

int r2_mgr_view_local(r2_mgr *m, struct xt_view *view)
{
    bool has = false;
    int rc = -EREMOTE;
    memset(view, 0, sizeof *view);
    pthread_mutex_lock(&m->mu);
    if (st_current(m))
        rc = r2_state_view(&m->st, 0, m->self, m->backend, &has, view);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int r2_mgr_get_view(r2_mgr *m, uint64_t since, bool *has_view, struct xt_view *view)
{
    *has_view = false;
    memset(view, 0, sizeof *view);
    pthread_mutex_lock(&m->mu);
    bool leader = m->leader;
    if (st_current(m)) {
        int rc = r2_state_view(&m->st, since, m->self, m->backend, has_view, view);
        pthread_mutex_unlock(&m->mu);
        return rc;
    }
    pthread_mutex_unlock(&m->mu);
    if (leader) {
        int rc = begin(m);
        if (rc == 0) {
            pthread_mutex_lock(&m->mu);
            rc = r2_state_view(&m->st, since, m->self, m->backend, has_view, view);
            pthread_mutex_unlock(&m->mu);
            end(m);
        }
        if (rc != -EREMOTE)
            return rc;
    }
    /* A follower reads the store and names the leader. */
    struct r2_state st;
    int rc = r2_state_load(m->store, m->vnodes, &st);
    if (rc < 0)
        return rc;
    char name[XT_ADDR_MAX] = "";
    void *id = NULL;
    size_t len = 0;
    if (r2_store_leader(m->store, &id, &len) == 0 && len < sizeof name)
        memcpy(name, id, len), name[len] = '\0';
    xt_free(id);
    rc = r2_state_view(&st, since, name, m->backend, has_view, view);
    r2_state_clear(&st);
    return rc;
}

/* ---- failure detection ---------------------------------------------------------- */

struct change {
    struct xt_site s;
    int from;
    uint64_t silent_ms;
    bool expire; /* a silent client: its record is deleted */
};

void r2_mgr_tick(r2_mgr *m)
{
    r2_mgr_tick_after(m, 0);
}

void r2_mgr_tick_after(r2_mgr *m, uint64_t paused_ns)
{
    pthread_mutex_lock(&m->mu);
    bool leader = m->leader;
    pthread_mutex_unlock(&m->mu);
    if (!leader || begin(m) < 0)
        return;
    uint64_t now = m->clock();
    /* Room for the site records and both rings. */
    struct change ch[R2_TXN_ROOM - 2];
    size_t nch = 0;
    pthread_mutex_lock(&m->mu);
    /* While this R2 stood still (stopped, swapped out, starved of CPU) the
     * heartbeats waited in its sockets: silence measured across the pause
     * is this R2's, not the sites'. */
    bool paused = paused_ns > m->pause_ns;
    for (size_t i = 0; paused && i < m->st.nsites; i++)
        m->st.sites[i].last_hb_mono = now;
    for (size_t i = 0; i < m->st.nsites && nch < XT_ARRAY_SIZE(ch); i++) {
        const struct r2_site_ent *e = &m->st.sites[i];
        int st = e->s.state;
        bool client = e->s.type == XT_SITE_CLIENT;
        /* A client FAILED by an older R2 expires like a silent one. */
        if (st != XT_SITE_UP && st != XT_SITE_TRANSIENT && !(client && st == XT_SITE_FAILED))
            continue;
        uint64_t silent = now > e->last_hb_mono ? now - e->last_hb_mono : 0;
        bool expire = client && silent > m->client_expire_ns;
        int to = !client && silent > m->fail_ns                 ? XT_SITE_FAILED
                 : silent > m->transient_ns && st == XT_SITE_UP ? XT_SITE_TRANSIENT
                                                                  : st;
        if (to == st && !expire)
            continue;
        ch[nch] = (struct change){ .s = e->s, .from = st, .silent_ms = silent / 1000000,
                                   .expire = expire };
        ch[nch].s.state = to;
        nch++;
    }
    pthread_mutex_unlock(&m->mu);
    if (paused)
        XT_WARN("failure detector: this R2 did not run, or took no requests, for %llu ms; "
                "every site's failure clock restarts", (unsigned long long)(paused_ns / 1000000u));
    if (nch == 0) {
        r2_ring1_tick(m);
        r2_usage_flush(m, now);
        end(m);
        return;
    }
    struct r2_txn t = { .n = 0 };
    xt_ring *nr[2] = { NULL, NULL };
    int rc = 0, sections = 0;
    for (size_t i = 0; i < nch && rc == 0; i++) {
        struct xt_site *s = &ch[i].s;
        sections |= site_sections(s);
        if (ch[i].expire) {
            char key[R2_KEY_LEN];
            r2_rec_site_key(key, s->id);
            rc = r2_txn_del(&t, key);
            continue; /* in no ring */
        }
        rc = r2_txn_site(&t, s);
        int r = r2_state_ring_of(s->type);
        /* Only ring 0 follows failures: an MDS's slices reload from the
         * MDSL anywhere, an MDSL's slices are on its disk and wait for it. */
        if (rc == 0 && s->state == XT_SITE_FAILED && r == XT_RING_MDS) {
            const xt_ring *cur = nr[r] ? nr[r] : m->st.ring[r];
            if (xt_ring_has_site(cur, s->id)) {
                if (!nr[r] && !(nr[r] = xt_ring_dup(cur)))
                    rc = -ENOMEM;
                if (rc == 0)
                    rc = xt_ring_remove_site(nr[r], s->id);
            }
        }
    }
    for (int r = 0; r < 2 && rc == 0; r++)
        if (nr[r]) {
            rc = r2_txn_ring(&t, nr[r]);
            sections |= XT_VIEW_RINGS;
        }
    if (rc == 0)
        rc = r2_txn_commit(m, &t, sections);
    if (rc == 0) {
        pthread_mutex_lock(&m->mu);
        for (size_t i = 0; i < nch; i++) {
            if (ch[i].expire) {
                r2_state_site_erase(&m->st, ch[i].s.id);
                continue;
            }
            struct r2_site_ent *e = r2_state_site(&m->st, ch[i].s.id);
            e->s.state = ch[i].s.state;
        }
        for (int r = 0; r < 2; r++)
            if (nr[r]) {
                ring_install(m, nr[r]);
                nr[r] = NULL;
            }
        pthread_mutex_unlock(&m->mu);
        for (size_t i = 0; i < nch; i++) {
            const struct xt_site *s = &ch[i].s;
            if (ch[i].expire) {
                XT_INFO("site %u (client %s%s%s) expired: no heartbeat for %llu ms, removed",
                        s->id, s->addr, s->fs_name[0] ? " fs " : "", s->fs_name,
                        (unsigned long long)ch[i].silent_ms);
                continue;
            }
            const char *ring = "";
            if (s->state == XT_SITE_FAILED && s->type == XT_SITE_MDS)
                ring = ", out of ring 0";
            else if (s->state == XT_SITE_FAILED && s->type == XT_SITE_MDSL)
                ring = ", stays in ring 1 (its slices wait for it)";
            XT_WARN("site %u (%s %s) %s: no heartbeat for %llu ms%s", s->id,
                    xt_site_type_name(s->type), s->addr, xt_site_state_name(s->state),
                    (unsigned long long)ch[i].silent_ms, ring);
        }
    }
    xt_ring_free(nr[0]);
    xt_ring_free(nr[1]);
    r2_txn_free(&t);
    if (rc == 0)
        r2_ring1_tick(m);
    r2_usage_flush(m, now);
    end(m);
}

/* ---- administration ------------------------------------------------------------- */

enum site_op { SITE_DRAIN, SITE_REMOVE, SITE_LEAVE };

/* Drain or remove one site, or let a client site leave. */
static int site_admin(r2_mgr *m, uint32_t site_id, enum site_op op)
{
    bool remove = op != SITE_DRAIN;
    int rc = begin(m);
    if (rc < 0)
        return rc;
    struct r2_txn t = { .n = 0 };
    xt_ring *nr = NULL;
    const struct r2_site_ent *e = r2_state_site(&m->st, site_id);
    if (!e) {
        rc = -ENOENT;
        goto out;
    }
    struct xt_site s = e->s;
    bool client = s.type == XT_SITE_CLIENT;
    if ((op == SITE_DRAIN && client) || (op == SITE_LEAVE && !client)) {
        rc = -EINVAL; /* clients are not drained; servers do not leave */
        goto out;
    }
    if (!remove && s.state == XT_SITE_DRAINING)
        goto out;
    /* Once slices may be stored, ring 1 changes only through ring-1
     * changes (r2_mgr_ring1.c): the record alone changes here. */
    bool ring1_kept = s.type == XT_SITE_MDSL && r2_ring1_mode_of(m) != R2_RING1_OPEN;
    if (ring1_kept && (rc = r2_ring1_admin(m, &s, remove)) <= 0)
        goto out;
    rc = 0;
    if (!ring1_kept && ((rc = ring_change(m, r2_state_ring_of(s.type), s.id, false, &nr)) < 0 ||
                        (nr && (rc = r2_txn_ring(&t, nr)) < 0)))
        goto out;
    char key[R2_KEY_LEN];
    r2_rec_site_key(key, s.id);
    s.state = XT_SITE_DRAINING;
    if ((rc = remove ? r2_txn_del(&t, key) : r2_txn_site(&t, &s)) < 0)
        goto out;
    if (op == SITE_REMOVE && !client) {
        /* The tombstone: a removed server never registers again with its
         * id (r2_mgr_register), so a daemon still running, whose next
         * heartbeat meets -ENOENT, cannot rejoin the ring it was drained
         * from. */
        uint8_t *tomb = xt_malloc(1);
        if (!tomb) {
            rc = -ENOMEM;
            goto out;
        }
        tomb[0] = (uint8_t)s.type;
        r2_rec_removed_key(key, s.id);
        if ((rc = r2_txn_put(&t, key, tomb, 1)) < 0)
            goto out;
    }
    if ((rc = r2_txn_commit(m, &t, site_sections(&s) | (nr ? XT_VIEW_RINGS : 0))) < 0)
        goto out;
    pthread_mutex_lock(&m->mu);
    if (remove)
        r2_state_site_erase(&m->st, site_id);
    else
        r2_state_site(&m->st, site_id)->s.state = XT_SITE_DRAINING;
    if (nr) {
        ring_install(m, nr);
        nr = NULL;
    }
    pthread_mutex_unlock(&m->mu);
    XT_INFO("site %u (%s %s) %s", s.id, xt_site_type_name(s.type), s.addr,
            op == SITE_LEAVE ? "left" : remove ? "removed" : "draining");
out:
    xt_ring_free(nr);
    r2_txn_free(&t);
    end(m);
    return rc;
}

int r2_mgr_site_drain(r2_mgr *m, uint32_t site_id)
{
    return site_admin(m, site_id, SITE_DRAIN);
}

int r2_mgr_site_remove(r2_mgr *m, uint32_t site_id)
{
    return site_admin(m, site_id, SITE_REMOVE);
}

int r2_mgr_site_leave(r2_mgr *m, uint32_t site_id)
{
    return site_admin(m, site_id, SITE_LEAVE);
}

int r2_mgr_alloc_uuids(r2_mgr *m, uint32_t site_id, uint64_t count, uint64_t *lo,
                       uint64_t *hi)
{
    *lo = *hi = 0;
    if (count == 0 || count > (UINT64_C(1) << 40))
        return -EINVAL;
    int rc = begin(m);
    if (rc < 0)
        return rc;
    struct r2_txn t = { .n = 0 };
    const struct r2_site_ent *e = r2_state_site(&m->st, site_id);
    if (!e || e->s.type != XT_SITE_MDS) {
        rc = e ? -EINVAL : -ENOENT;
        goto out;
    }
    uint64_t n = (count + m->uuid_range - 1) / m->uuid_range, first = 0;
    rc = r2_store_alloc_id(m->store, R2_KEY_ID_UUIDS, n, &first);
    if (rc == 0 && first + n >= UINT64_MAX / m->uuid_range)
        rc = -EOVERFLOW;
    if (rc < 0)
        goto out;
    struct xt_site s = e->s;
    s.uuid_lo = first * m->uuid_range;
    s.uuid_hi = (first + n) * m->uuid_range;
    if ((rc = r2_txn_site(&t, &s)) < 0 || (rc = r2_txn_commit(m, &t, XT_VIEW_SITES)) < 0)
        goto out;
    pthread_mutex_lock(&m->mu);
    struct r2_site_ent *w = r2_state_site(&m->st, site_id);
    w->s.uuid_lo = s.uuid_lo;
    w->s.uuid_hi = s.uuid_hi;
    pthread_mutex_unlock(&m->mu);
    *lo = s.uuid_lo;
    *hi = s.uuid_hi;
out:
    r2_txn_free(&t);
    end(m);
    return rc;
}

/* ---- file systems -------------------------------------------------------------- */

int r2_mgr_fs_create(r2_mgr *m, const char *name, const char *backend, const char *path,
                     struct xt_fs_info *out)
{
    if (out)
        memset(out, 0, sizeof *out);
    if (!backend || !backend[0])
        backend = "local";
    if (!path)
        path = "";
    if (!r2_rec_fs_name_valid(name) || !r2_rec_backend_valid(backend) || !r2_rec_path_valid(path))
        return -EINVAL;
    int rc = begin(m);
    if (rc < 0)
        return rc;
    struct r2_txn t = { .n = 0 };
    struct xt_fs_info f;
    memset(&f, 0, sizeof f);
    if (r2_state_fs_by_name(&m->st, name)) {
        rc = -EEXIST;
        goto out;
    }
    if (m->st.nfs >= R2_MGR_MAX_FS) {
        rc = -ENOSPC;
        goto out;
    }
    uint64_t fsid = 0;
    rc = r2_store_alloc_id(m->store, R2_KEY_ID_FSIDS, 1, &fsid);
    if (rc == 0 && fsid > UINT32_MAX)
        rc = -EOVERFLOW;
    if (rc < 0)
        goto out;
    f.fsid = (uint32_t)fsid;
    snprintf(f.name, sizeof f.name, "%s", name);
    snprintf(f.blob_backend, sizeof f.blob_backend, "%s", backend);
    snprintf(f.blob_path, sizeof f.blob_path, "%s", path);
    f.root_table = R2_ROOT_UUID;
    f.created_ns = xt_now_ns();
    xt_bitmap *b = xt_bitmap_new();
    if (!b) {
        rc = -ENOMEM;
        goto out;
    }
    size_t blen = xt_bitmap_encoded_size(b);
    f.root_bitmap = xt_malloc(blen);
    long w = f.root_bitmap ? xt_bitmap_encode(b, f.root_bitmap, blen) : -ENOMEM;
    xt_bitmap_free(b);
    if (w < 0) {
        rc = (int)w;
        goto out;
    }
    f.root_bitmap_len = (uint32_t)w;
    if ((rc = r2_txn_fs(&t, &f)) < 0 || (rc = r2_txn_commit(m, &t, XT_VIEW_FS)) < 0)
        goto out;
    pthread_mutex_lock(&m->mu);
    rc = r2_state_fs_insert(&m->st, &f);
    if (rc == 0) {
        f.root_bitmap = NULL; /* now the state's */
        if (out)
            rc = r2_state_fs_copy(&m->st, r2_state_fs_by_name(&m->st, name), out);
    } else {
        m->need_reload = true;
    }
    pthread_mutex_unlock(&m->mu);
    XT_INFO("fs %s created: fsid %u, blob %s%s%s", name, f.fsid, backend,
            path[0] ? " " : "", path);
out:
    xt_free(f.root_bitmap);
    r2_txn_free(&t);
    end(m);
    return rc;
}

int r2_mgr_fs_list(r2_mgr *m, const char *name, struct xt_fs_info **fs, size_t *n)
{
    *fs = NULL;
    *n = 0;
    if (name && name[0] && !r2_rec_fs_name_valid(name))
        return -EINVAL;
    int rc = begin(m);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&m->mu);
    const struct xt_fs_info *one = name && name[0] ? r2_state_fs_by_name(&m->st, name) : NULL;
    size_t cnt = name && name[0] ? (one ? 1 : 0) : m->st.nfs;
    if (name && name[0] && !one) {
        rc = -ENOENT;
    } else if (cnt) {
        struct xt_fs_info *a = xt_calloc(cnt, sizeof *a);
        if (!a)
            rc = -ENOMEM;
        for (size_t i = 0; a && i < cnt && rc == 0; i++)
            rc = r2_state_fs_copy(&m->st, one ? one : &m->st.fs[i], &a[i]);
        if (rc == 0) {
            *fs = a;
            *n = cnt;
        } else {
            xt_fs_info_free_array(a, cnt);
        }
    }
    pthread_mutex_unlock(&m->mu);
    end(m);
    return rc;
}

int r2_mgr_fs_drop(r2_mgr *m, const char *name, bool force)
{
    if (!r2_rec_fs_name_valid(name))
        return -EINVAL;
    int rc = begin(m);
    if (rc < 0)
        return rc;
    struct r2_txn t = { .n = 0 };
    const struct xt_fs_info *f = r2_state_fs_by_name(&m->st, name);
    uint32_t mounts = f ? r2_state_mounts(&m->st, name) : 0;
    if (!f)
        rc = -ENOENT;
    else if (mounts && !force)
        rc = -EBUSY;
    if (rc < 0)
        goto out;
    uint32_t fsid = f->fsid;
    char key[R2_KEY_LEN];
    r2_rec_fs_key(key, fsid);
    if ((rc = r2_txn_del(&t, key)) < 0 || (rc = r2_txn_commit(m, &t, XT_VIEW_FS)) < 0)
        goto out;
    pthread_mutex_lock(&m->mu);
    r2_state_fs_erase(&m->st, fsid);
    r2_usage_drop(&m->st, fsid);
    m->usage_dirty = true;
    pthread_mutex_unlock(&m->mu);
    XT_INFO("fs %s (fsid %u) dropped%s", name, fsid,
            mounts ? " while mounted (forced)" : "");
out:
    r2_txn_free(&t);
    end(m);
    return rc;
}

/* Changes one fs record: edit(f, arg) on a copy of fs name's, written
 * with a new view version (FS section), then installed; *out gets the
 * record. 0, -EINVAL, -ENOENT or the store's error. */
typedef void (*fs_edit_fn)(struct xt_fs_info *f, const void *arg);

static int fs_update(r2_mgr *m, const char *name, fs_edit_fn edit, const void *arg,
                     struct xt_fs_info *out)
{
    memset(out, 0, sizeof *out);
    if (!r2_rec_fs_name_valid(name))
        return -EINVAL;
    int rc = begin(m);
    if (rc < 0)
        return rc;
    struct r2_txn t = { .n = 0 };
    /* begin() makes this the only writer: st changes only below, under mu. */
    struct xt_fs_info *cur = r2_state_fs_by_name(&m->st, name);
    if (!cur) {
        rc = -ENOENT;
        goto out;
    }
    struct xt_fs_info f = *cur; /* shares cur's bitmap */
    edit(&f, arg);
    assert(f.root_bitmap == cur->root_bitmap && f.fsid == cur->fsid);
    if ((rc = r2_txn_fs(&t, &f)) < 0 || (rc = r2_txn_commit(m, &t, XT_VIEW_FS)) < 0)
        goto out;
    pthread_mutex_lock(&m->mu);
    *cur = f;
    rc = r2_state_fs_copy(&m->st, cur, out);
    pthread_mutex_unlock(&m->mu);
out:
    r2_txn_free(&t);
    end(m);
    return rc;
}

static void next_key_gen(struct xt_fs_info *f, const void *arg)
{
    (void)arg;
    f->key_gen++;
}

int r2_mgr_fs_rotate_key(r2_mgr *m, const char *name, struct xt_fs_info *out)
{
    int rc = fs_update(m, name, next_key_gen, NULL, out);
    if (rc == 0)
        XT_INFO("fs %s: client key generation %llu: older client keys are refused", name,
                (unsigned long long)out->key_gen);
    return rc;
}

static void set_quota(struct xt_fs_info *f, const void *arg)
{
    const uint64_t *q = arg;
    f->quota_files = q[0];
    f->quota_bytes = q[1];
}

int r2_mgr_fs_quota(r2_mgr *m, const char *name, uint64_t quota_files, uint64_t quota_bytes,
                    struct xt_fs_info *out)
{
    if (quota_files > INT64_MAX || quota_bytes > INT64_MAX) {
        memset(out, 0, sizeof *out);
        return -EINVAL;
    }
    const uint64_t q[2] = { quota_files, quota_bytes };
    int rc = fs_update(m, name, set_quota, q, out);
    if (rc == 0)
        XT_INFO("fs %s: quota %llu inodes, %llu bytes (0: none)", name,
                (unsigned long long)quota_files, (unsigned long long)quota_bytes);
    return rc;
}

int r2_mgr_fs_set_usage(r2_mgr *m, const char *name, uint64_t files, uint64_t bytes)
{
    if (!r2_rec_fs_name_valid(name) || files > INT64_MAX || bytes > INT64_MAX)
        return -EINVAL;
    int rc = begin(m);
    if (rc < 0)
        return rc;
    const struct xt_fs_info *f = r2_state_fs_by_name(&m->st, name);
    if (!f) {
        end(m);
        return -ENOENT;
    }
    pthread_mutex_lock(&m->mu);
    const struct r2_usage *u = r2_usage_of(&m->st, f->fsid);
    long long was_f = u ? (long long)u->files : 0, was_b = u ? (long long)u->bytes : 0;
    rc = r2_usage_set(m, f->fsid, (int64_t)files, (int64_t)bytes);
    pthread_mutex_unlock(&m->mu);
    if (rc == 0) {
        uint64_t now = m->clock();
        m->last_flush = now - m->flush_ns; /* written now */
        r2_usage_flush(m, now);
        XT_INFO("fs %s: usage set to %llu inodes, %llu bytes (was %lld, %lld)", name,
                (unsigned long long)files, (unsigned long long)bytes, was_f, was_b);
    }
    end(m);
    return rc;
}

int r2_mgr_fs_key_gen(void *arg, int32_t fsid, uint64_t *gen)
{
    r2_mgr *m = arg;
    int rc = -ENOENT;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->st.nfs; i++)
        if (m->st.fs[i].fsid == (uint32_t)fsid) {
            *gen = m->st.fs[i].key_gen;
            rc = 0;
        }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* ---- lifetime ------------------------------------------------------------------- */

/* The monitor's period: a quarter of the heartbeat interval, >= 5 ms. */
static uint64_t monitor_period_ms(const r2_mgr *m)
{
    return XT_MAX(m->hb_ns / 4 / 1000000u, UINT64_C(5));
}

/* One tick of the failure detector (an xt_worker step). */
static uint64_t monitor_step(xt_worker *w, void *arg)
{
    r2_mgr *m = arg;
    (void)w;
    /* Woken this late (real time, whatever m->clock is): this R2 did not
     * run meanwhile; or its server had no thread free to take heartbeats.
     * A wake-up before the due time (a leadership change) is no pause. */
    uint64_t woke = xt_mono_ns();
    uint64_t paused = woke > m->monitor_due_ns ? woke - m->monitor_due_ns : 0;
    pthread_mutex_lock(&m->mu);
    if (m->stall)
        paused = XT_MAX(paused, m->stall(m->stall_arg));
    pthread_mutex_unlock(&m->mu);
    r2_mgr_tick_after(m, paused);
    uint64_t period = monitor_period_ms(m);
    m->monitor_due_ns = xt_deadline_ms(period);
    return period;
}

int r2_mgr_new(const struct r2_mgr_opts *o, r2_mgr **out)
{
    *out = NULL;
    if (!o || !o->store || !o->self_addr || strlen(o->self_addr) >= XT_ADDR_MAX ||
        o->fail_after > 1000000 || o->hb_interval_ms > 3600000 ||
        o->client_expire_ms > 86400000u)
        return -EINVAL;
    r2_mgr *m = xt_calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->store = o->store;
    snprintf(m->self, sizeof m->self, "%s", o->self_addr);
    snprintf(m->backend, sizeof m->backend, "%s", r2_store_backend(o->store));
    m->hb_ns = (uint64_t)(o->hb_interval_ms ? o->hb_interval_ms : 1000) * 1000000u;
    unsigned fail_after = o->fail_after ? o->fail_after : 5;
    /* Slack: half an interval, at least 50 ms, for scheduling and RPC delay. */
    uint64_t slack = XT_MAX(m->hb_ns / 2, UINT64_C(50000000));
    m->transient_ns = m->hb_ns + slack;
    m->fail_ns = XT_MAX(m->hb_ns * fail_after, m->transient_ns) + slack;
    m->pause_ns = XT_MAX(m->transient_ns, m->fail_ns / 2);
    /* Never before the client could have been TRANSIENT: one missed
     * heartbeat is no departure. */
    m->client_expire_ns = XT_MAX(
        (uint64_t)(o->client_expire_ms ? o->client_expire_ms : R2_MGR_CLIENT_EXPIRE_MS) * 1000000u,
        m->transient_ns + slack);
    m->flush_ns = XT_MAX(10 * m->hb_ns, UINT64_C(5000000000));
    m->vnodes = o->vnodes;
    m->uuid_range = o->uuid_range ? o->uuid_range : R2_MGR_UUID_RANGE;
    m->clock = o->clock ? o->clock : default_clock;
    m->st.meta_sv = R2_VER_CREATE;
    pthread_mutex_init(&m->wmu, NULL);
    pthread_mutex_init(&m->mu, NULL);
    if (!o->no_thread) {
        uint64_t period = monitor_period_ms(m);
        m->monitor_due_ns = xt_deadline_ms(period);
        struct xt_worker_opts wo = { .name = "r2-monitor", .step = monitor_step, .arg = m,
                                     .first_ms = period };
        xt_worker *w = NULL;
        int rc = xt_worker_start(&wo, &w);
        if (rc < 0) {
            r2_mgr_free(m);
            return rc;
        }
        pthread_mutex_lock(&m->mu);
        m->monitor = w;
        pthread_mutex_unlock(&m->mu);
    }
    *out = m;
    return 0;
}

void r2_mgr_set_stall_probe(r2_mgr *m, uint64_t (*stall)(void *arg), void *arg)
{
    pthread_mutex_lock(&m->mu);
    m->stall = stall;
    m->stall_arg = arg;
    pthread_mutex_unlock(&m->mu);
}

void r2_mgr_stop(r2_mgr *m)
{
    if (!m)
        return;
    /* Taken out under mu, so r2_mgr_leader_cb wakes it or sees NULL. */
    pthread_mutex_lock(&m->mu);
    xt_worker *w = m->monitor;
    m->monitor = NULL;
    pthread_mutex_unlock(&m->mu);
    xt_worker_stop(w);
}

void r2_mgr_free(r2_mgr *m)
{
    if (!m)
        return;
    r2_mgr_stop(m);
    r2_state_clear(&m->st);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->wmu);
    xt_free(m);
}
