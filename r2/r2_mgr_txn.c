/*
 * r2_mgr_txn.c -- the transactions of the site manager (r2_mgr.c, invariant
 * 1 of r2_mgr.h): records are staged in a struct r2_txn (keys and encoded
 * buffers it owns) and written by r2_txn_commit together with /r2/view in
 * one r2_store_multi, compare-and-set on the view's store version, so a
 * view version names exactly one state and a deposed leader's write fails.
 */
#include "r2_mgr_i.h"

#include "xt_common.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

void r2_txn_free(struct r2_txn *t)
{
    for (size_t i = 0; i < t->n; i++)
        xt_free(t->bufs[i]);
    t->n = 0;
}

int r2_txn_put(struct r2_txn *t, const char *key, void *buf, size_t len)
{
    assert(key && strlen(key) < R2_KEY_LEN); /* keys come from r2_rec_*_key */
    if (t->n >= R2_TXN_ROOM) {
        xt_free(buf);
        return -E2BIG;
    }
    size_t i = t->n++;
    snprintf(t->keys[i], R2_KEY_LEN, "%s", key);
    t->ops[i] = (r2_store_op){ .type = R2_OP_PUT, .key = t->keys[i], .val = buf, .len = len,
                               .expected = R2_VER_ANY };
    t->bufs[i] = buf;
    return 0;
}

int r2_txn_del(struct r2_txn *t, const char *key)
{
    assert(key && strlen(key) < R2_KEY_LEN);
    if (t->n >= R2_TXN_ROOM)
        return -E2BIG;
    size_t i = t->n++;
    snprintf(t->keys[i], R2_KEY_LEN, "%s", key);
    t->ops[i] = (r2_store_op){ .type = R2_OP_DELETE, .key = t->keys[i], .expected = R2_VER_ANY };
    t->bufs[i] = NULL;
    return 0;
}

int r2_txn_site(struct r2_txn *t, const struct xt_site *s)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = r2_rec_site_encode(s, &buf, &len);
    if (rc < 0)
        return rc;
    char key[R2_KEY_LEN];
    r2_rec_site_key(key, s->id);
    return r2_txn_put(t, key, buf, len);
}

int r2_txn_fs(struct r2_txn *t, const struct xt_fs_info *f)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = r2_rec_fs_encode(f, &buf, &len);
    if (rc < 0)
        return rc;
    char key[R2_KEY_LEN];
    r2_rec_fs_key(key, f->fsid);
    return r2_txn_put(t, key, buf, len);
}

int r2_txn_ring(struct r2_txn *t, const xt_ring *r)
{
    char key[R2_KEY_LEN];
    r2_rec_ring_key(key, xt_ring_id(r));
    return r2_txn_ring_at(t, key, r);
}

int r2_txn_ring_at(struct r2_txn *t, const char *key, const xt_ring *r)
{
    size_t n = xt_ring_encoded_size(r);
    void *buf = xt_malloc(n);
    if (!buf)
        return -ENOMEM;
    long w = xt_ring_encode(r, buf, n);
    if (w < 0) {
        xt_free(buf);
        return (int)w;
    }
    return r2_txn_put(t, key, buf, (size_t)w);
}

int r2_txn_ring1(struct r2_txn *t, const struct r2_rec_ring1 *r)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = r2_rec_ring1_encode(r, &buf, &len);
    if (rc < 0)
        return rc;
    return r2_txn_put(t, R2_KEY_RING1, buf, len);
}

/* r2_mgr_i.h. */
int r2_txn_commit(r2_mgr *m, struct r2_txn *t, int sections)
{
    assert(xt_mutex_held(&m->wmu) && m->st_valid);
    struct r2_rec_meta meta = m->st.meta;
    size_t vi = t->n;
    assert(vi < R2_STORE_MULTI_MAX);
    if (sections) {
        meta.version++;
        if (sections & XT_VIEW_SITES)
            meta.sites_ver = meta.version;
        if (sections & XT_VIEW_RINGS)
            meta.rings_ver = meta.version;
        if (sections & XT_VIEW_FS)
            meta.fs_ver = meta.version;
        r2_rec_meta_encode(&meta, t->meta);
        t->ops[vi] = (r2_store_op){ .type = R2_OP_PUT, .key = R2_KEY_VIEW, .val = t->meta,
                                    .len = sizeof t->meta, .expected = m->st.meta_sv };
    } else {
        t->ops[vi] = (r2_store_op){ .type = R2_OP_CHECK, .key = R2_KEY_VIEW,
                                    .expected = m->st.meta_sv };
    }
    int64_t nv[R2_STORE_MULTI_MAX];
    size_t failed = 0;
    int rc = r2_store_multi(m->store, t->ops, vi + 1, nv, &failed);
    if (rc < 0) {
        pthread_mutex_lock(&m->mu);
        m->need_reload = true;
        pthread_mutex_unlock(&m->mu);
        if (failed == vi && (rc == -ESTALE || rc == -EEXIST || rc == -ENOENT)) {
            XT_WARN("another R2 changed the state (%s): not leading", strerror(-rc));
            return -EREMOTE;
        }
        XT_WARN("state store write failed: %s", strerror(-rc));
        return rc;
    }
    if (sections) {
        pthread_mutex_lock(&m->mu);
        m->st.meta = meta;
        m->st.meta_sv = nv[vi];
        pthread_mutex_unlock(&m->mu);
    }
    return 0;
}
