/*
 * r2_mgr_state.c -- the in-memory state of the site manager: loading one
 * consistent snapshot of it from the store, sorted lookups, and building
 * the views and fs listings that calls return.
 *
 * Invariants:
 *  (1) st->sites is sorted by id and st->fs by fsid, without duplicates.
 *  (2) A loaded state is one state of the store: /r2/view is read before
 *      and after the other records, and the load is retried when its store
 *      version moved in between (every writer puts /r2/view, r2_mgr.h (1)).
 *  (3) Nothing returned to a caller shares memory with the state.
 */
#include "r2_mgr_i.h"

#include "xt_common.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOAD_TRIES 10

bool r2_state_in_ring(const struct xt_site *s)
{
    return (s->type == XT_SITE_MDS || s->type == XT_SITE_MDSL) &&
           (s->state == XT_SITE_UP || s->state == XT_SITE_TRANSIENT);
}

int r2_state_ring_of(int type)
{
    return type == XT_SITE_MDS ? XT_RING_MDS : type == XT_SITE_MDSL ? XT_RING_MDSL : -1;
}

bool r2_state_ring1_stored(const struct r2_state *st)
{
    /* With no MDSL in it no slice can be stored yet (an MDS waits for one
     * before it serves): the first MDSL joins whoever came first. */
    if (!st->ring[XT_RING_MDSL] || xt_ring_nsites(st->ring[XT_RING_MDSL]) == 0)
        return false;
    if (xt_ring_version(st->ring[XT_RING_MDS]) > 0)
        return true;
    for (size_t i = 0; i < st->nsites; i++)
        if (st->sites[i].s.type == XT_SITE_MDS)
            return true;
    return false;
}

void r2_state_clear(struct r2_state *st)
{
    xt_free(st->sites);
    xt_fs_info_free_array(st->fs, st->nfs);
    r2_rec_usage_free(st->usage, st->nusage);
    xt_ring_free(st->ring[0]);
    xt_ring_free(st->ring[1]);
    xt_ring_free(st->prev1);
    xt_ring_free(st->next1);
    r2_rec_ring1_clear(&st->r1);
    memset(st, 0, sizeof *st);
    st->meta_sv = R2_VER_CREATE;
}

/* ---- lookups and edits ----------------------------------------------------- */

static size_t site_pos(const struct r2_state *st, uint32_t id)
{
    size_t lo = 0, hi = st->nsites;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->sites[mid].s.id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static size_t fs_pos(const struct r2_state *st, uint32_t fsid)
{
    size_t lo = 0, hi = st->nfs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->fs[mid].fsid < fsid)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct r2_site_ent *r2_state_site(const struct r2_state *st, uint32_t id)
{
    size_t i = site_pos(st, id);
    return i < st->nsites && st->sites[i].s.id == id ? &st->sites[i] : NULL;
}

struct xt_fs_info *r2_state_fs_by_name(const struct r2_state *st, const char *name)
{
    for (size_t i = 0; i < st->nfs; i++)
        if (!strcmp(st->fs[i].name, name))
            return &st->fs[i];
    return NULL;
}

int r2_state_site_insert(struct r2_state *st, const struct r2_site_ent *e)
{
    size_t i = site_pos(st, e->s.id);
    assert(i == st->nsites || st->sites[i].s.id != e->s.id);
    struct r2_site_ent *a = xt_realloc(st->sites, (st->nsites + 1) * sizeof *a);
    if (!a)
        return -ENOMEM;
    st->sites = a;
    memmove(&a[i + 1], &a[i], (st->nsites - i) * sizeof *a);
    a[i] = *e;
    st->nsites++;
    return 0;
}

void r2_state_site_erase(struct r2_state *st, uint32_t id)
{
    size_t i = site_pos(st, id);
    if (i == st->nsites || st->sites[i].s.id != id)
        return;
    memmove(&st->sites[i], &st->sites[i + 1], (st->nsites - i - 1) * sizeof st->sites[0]);
    st->nsites--;
}

int r2_state_fs_insert(struct r2_state *st, const struct xt_fs_info *f)
{
    size_t i = fs_pos(st, f->fsid);
    assert(i == st->nfs || st->fs[i].fsid != f->fsid);
    struct xt_fs_info *a = xt_realloc(st->fs, (st->nfs + 1) * sizeof *a);
    if (!a)
        return -ENOMEM;
    st->fs = a;
    memmove(&a[i + 1], &a[i], (st->nfs - i) * sizeof *a);
    a[i] = *f;
    st->nfs++;
    return 0;
}

void r2_state_fs_erase(struct r2_state *st, uint32_t fsid)
{
    size_t i = fs_pos(st, fsid);
    if (i == st->nfs || st->fs[i].fsid != fsid)
        return;
    xt_free(st->fs[i].root_bitmap);
    memmove(&st->fs[i], &st->fs[i + 1], (st->nfs - i - 1) * sizeof st->fs[0]);
    st->nfs--;
}

uint32_t r2_state_mounts(const struct r2_state *st, const char *fs_name)
{
    uint32_t n = 0;
    for (size_t i = 0; i < st->nsites; i++) {
        const struct xt_site *s = &st->sites[i].s;
        if (s->type == XT_SITE_CLIENT && !strcmp(s->fs_name, fs_name) &&
            (s->state == XT_SITE_UP || s->state == XT_SITE_TRANSIENT))
            n++;
    }
    return n;
}

int r2_state_fs_copy(const struct r2_state *st, const struct xt_fs_info *f,
                     struct xt_fs_info *out)
{
    *out = *f;
    out->root_bitmap = NULL;
    out->mounts = r2_state_mounts(st, f->name);
    const struct r2_usage *u = r2_usage_of(st, f->fsid);
    out->files = u && u->files > 0 ? (uint64_t)u->files : 0;
    out->bytes = u && u->bytes > 0 ? (uint64_t)u->bytes : 0;
    if (f->root_bitmap_len) {
        out->root_bitmap = xt_malloc(f->root_bitmap_len);
        if (!out->root_bitmap)
            return -ENOMEM;
        memcpy(out->root_bitmap, f->root_bitmap, f->root_bitmap_len);
    }
    return 0;
}

/* ---- views ----------------------------------------------------------------- */

int r2_state_ring_blob(const xt_ring *r, struct xt_ring_blob *b)
{
    size_t n = xt_ring_encoded_size(r);
    b->ring = xt_ring_id(r);
    b->version = xt_ring_version(r);
    b->data = xt_malloc(n);
    if (!b->data)
        return -ENOMEM;
    long w = xt_ring_encode(r, b->data, n);
    if (w < 0)
        return (int)w;
    b->len = (uint32_t)w;
    return 0;
}

int r2_state_view(const struct r2_state *st, uint64_t since, const char *leader,
                  const char *store, bool *has, struct xt_view *v)
{
    memset(v, 0, sizeof *v);
    *has = false;
    v->version = st->meta.version;
    snprintf(v->leader, sizeof v->leader, "%s", leader ? leader : "");
    snprintf(v->store, sizeof v->store, "%s", store ? store : "");
    /* A version above ours comes from another history (a lost store): the
     * caller gets everything, as for 0. */
    bool all = since == 0 || since > st->meta.version;
    if (!all && since == st->meta.version)
        return 0;
    *has = true;
    int rc = 0;
    if (all || st->meta.sites_ver > since) {
        v->sections |= XT_VIEW_SITES;
        if (st->nsites) {
            v->sites = xt_calloc(st->nsites, sizeof *v->sites);
            if (!v->sites)
                goto nomem;
            for (size_t i = 0; i < st->nsites; i++) {
                const struct r2_site_ent *e = &st->sites[i];
                v->sites[i] = e->s;
                /* runtime, as load: what the MDSL of the view report now */
                if (e->has_repl && e->s.state != XT_SITE_REMOVED) {
                    v->has_repl = true;
                    v->under_replicated += e->under_replicated;
                    v->repl_counted++;
                }
            }
            v->nsites = st->nsites;
        }
    }
    if (all || st->meta.rings_ver > since) {
        v->sections |= XT_VIEW_RINGS;
        v->rings = xt_calloc(2, sizeof *v->rings);
        if (!v->rings)
            goto nomem;
        for (int r = 0; r < 2 && rc == 0; r++) {
            rc = r2_state_ring_blob(st->ring[r], &v->rings[r]);
            v->nrings++;
        }
        if (rc == 0)
            rc = r2_ring1_view(st, v);
        if (rc)
            goto fail;
    }
    if (all || st->meta.fs_ver > since) {
        v->sections |= XT_VIEW_FS;
        if (st->nfs) {
            v->fs = xt_calloc(st->nfs, sizeof *v->fs);
            if (!v->fs)
                goto nomem;
            for (size_t i = 0; i < st->nfs && rc == 0; i++) {
                rc = r2_state_fs_copy(st, &st->fs[i], &v->fs[i]);
                v->nfs++;
            }
            if (rc)
                goto fail;
        }
    }
    return 0;
nomem:
    rc = -ENOMEM;
fail:
    xt_view_free(v);
    *has = false;
    return rc;
}

/* ---- loading ---------------------------------------------------------------- */

static int load_meta(r2_store *s, struct r2_rec_meta *m, int64_t *sv)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = r2_store_get(s, R2_KEY_VIEW, &buf, &len, sv);
    if (rc == -ENOENT) {
        memset(m, 0, sizeof *m);
        *sv = R2_VER_CREATE;
        return 0;
    }
    if (rc < 0)
        return rc;
    rc = r2_rec_meta_decode(buf, len, m);
    xt_free(buf);
    if (rc < 0) {
        XT_ERR("corrupt record %s", R2_KEY_VIEW);
        return -EIO;
    }
    return 0;
}

/* Calls one(st, key, bytes, len) for every record under dir; -ENOENT of a
 * listed child means a writer got in (the caller retries). */
static int load_dir(r2_store *s, const char *dir, struct r2_state *st,
                    int (*one)(struct r2_state *st, const char *key, const void *buf,
                               size_t len))
{
    char **names = NULL;
    size_t count = 0;
    int rc = r2_store_list(s, dir, &names, &count);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < count && rc == 0; i++) {
        char key[R2_KEY_LEN + 300];
        snprintf(key, sizeof key, "%s/%s", dir, names[i]);
        void *buf = NULL;
        size_t len = 0;
        rc = r2_store_get(s, key, &buf, &len, NULL);
        if (rc < 0)
            break;
        rc = one(st, key, buf, len);
        xt_free(buf);
    }
    r2_store_names_free(names, count);
    return rc;
}

/* A site record must decode, sit under its own key, and be unique. */
static int load_site(struct r2_state *st, const char *key, const void *buf, size_t len)
{
    struct r2_site_ent e;
    memset(&e, 0, sizeof e);
    int rc = r2_rec_site_decode(buf, len, &e.s);
    char want[R2_KEY_LEN];
    if (rc == 0)
        r2_rec_site_key(want, e.s.id);
    if (rc < 0 || strcmp(want, key) || r2_state_site(st, e.s.id)) {
        XT_ERR("corrupt site record %s", key);
        return -EIO;
    }
    return r2_state_site_insert(st, &e);
}

/* The same for a file-system record (unique by name). */
static int load_one_fs(struct r2_state *st, const char *key, const void *buf, size_t len)
{
    struct xt_fs_info f;
    int rc = r2_rec_fs_decode(buf, len, &f);
    if (rc == -ENOMEM)
        return rc;
    char want[R2_KEY_LEN];
    if (rc == 0)
        r2_rec_fs_key(want, f.fsid);
    if (rc < 0 || strcmp(want, key) || r2_state_fs_by_name(st, f.name)) {
        XT_ERR("corrupt fs record %s", key);
        xt_free(f.root_bitmap); /* NULL unless decode got that far */
        return -EIO;
    }
    rc = r2_state_fs_insert(st, &f);
    if (rc < 0)
        xt_free(f.root_bitmap);
    return rc;
}

/* Ring id at key; absent: an empty ring (absent_ok) or NULL. */
static int load_ring_at(r2_store *s, const char *key, uint32_t id, unsigned vnodes,
                        bool absent_empty, xt_ring **out)
{
    void *buf = NULL;
    size_t len = 0;
    *out = NULL;
    int rc = r2_store_get(s, key, &buf, &len, NULL);
    if (rc == -ENOENT && !absent_empty)
        return 0;
    if (rc == -ENOENT) {
        *out = xt_ring_new(id, vnodes);
        return *out ? 0 : -ENOMEM;
    }
    if (rc < 0)
        return rc;
    rc = xt_ring_decode(buf, len, out);
    xt_free(buf);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0 || xt_ring_id(*out) != id) {
        XT_ERR("corrupt ring record %s", key);
        xt_ring_free(*out);
        *out = NULL;
        return -EIO;
    }
    return 0;
}

static int load_ring(r2_store *s, uint32_t id, unsigned vnodes, xt_ring **out)
{
    char key[R2_KEY_LEN];
    r2_rec_ring_key(key, id);
    return load_ring_at(s, key, id, vnodes, true, out);
}

/* /r2/ring1 and /r2/rings/1p, after ring 1. */
static int load_ring1(r2_store *s, unsigned vnodes, struct r2_state *st)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = r2_store_get(s, R2_KEY_RING1, &buf, &len, NULL);
    if (rc == 0) {
        rc = r2_rec_ring1_decode(buf, len, &st->r1);
        xt_free(buf);
        if (rc == -EBADMSG) {
            XT_ERR("corrupt record %s", R2_KEY_RING1);
            return -EIO;
        }
    } else if (rc == -ENOENT) {
        memset(&st->r1, 0, sizeof st->r1);
        st->r1.from_version = st->r1.to_version = xt_ring_version(st->ring[XT_RING_MDSL]);
        rc = 0;
    }
    if (rc == 0)
        rc = load_ring_at(s, R2_KEY_RING1_PREV, XT_RING_MDSL, vnodes, false, &st->prev1);
    if (rc == 0)
        rc = r2_ring1_derive(st);
    return rc;
}

int r2_state_load(r2_store *store, unsigned vnodes, struct r2_state *st)
{
    memset(st, 0, sizeof *st);
    st->meta_sv = R2_VER_CREATE;
    for (int tries = 0; tries < LOAD_TRIES; tries++) {
        struct r2_rec_meta after;
        int64_t sv_after = 0;
        int rc = load_meta(store, &st->meta, &st->meta_sv);
        if (rc == 0)
            rc = load_dir(store, R2_KEY_SITES, st, load_site);
        if (rc == 0)
            rc = load_dir(store, R2_KEY_FS, st, load_one_fs);
        if (rc == 0)
            rc = load_ring(store, XT_RING_MDS, vnodes, &st->ring[0]);
        if (rc == 0)
            rc = load_ring(store, XT_RING_MDSL, vnodes, &st->ring[1]);
        if (rc == 0)
            rc = load_ring1(store, vnodes, st);
        if (rc == 0)
            rc = r2_usage_load(store, st);
        if (rc == 0)
            rc = load_meta(store, &after, &sv_after);
        if (rc == 0 && sv_after == st->meta_sv)
            return 0;
        r2_state_clear(st);
        if (rc < 0 && rc != -ENOENT)
            return rc;
    }
    return -EAGAIN;
}
