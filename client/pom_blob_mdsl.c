/*
 * pom_blob_mdsl.c -- the `mdsl` backend of the blob tier (docs/format-blob.md
 * "mdsl"): tracts stored on the MDSL sites (mdsl/mdsl_blob.c) through the
 * Storage service's tract calls, `copies` replicas each.
 *
 * Placement is computed, never stored (FDS's tract locator): tract t of set
 * S lives on the first `copies` distinct sites of ring 1 at or after
 * hash(S, t) (xt_ring_tract_sites, the one formula the MDSL moves tracts
 * by too). The store follows the views of the fs's R2 agent
 * (pom_blob_view): ring 1 is the newest it saw, `prev` the one before it,
 * where a tract not yet moved by the MDSL (mdsl/mdsl_tmove.c) still is.
 * The set's map (one byte per tract, 1 = written, as local's) is the tract
 * numbered XT_TRACT_MAP of the set, placed and replicated the same way.
 *
 * An open file keeps one tract in memory (`cur`): writes land there and a
 * whole tract is put when the file moves to another tract, at fsync and at
 * the last close; reads of the cached tract are served from it. A read
 * that starts a tract or goes on where the previous read ended fetches the
 * whole tract into `cur` (sequential reads then cost one get per tract);
 * any other read gets only its own range (a 4 KiB random read moves 4 KiB,
 * not a tract; the MDSL still checks the whole tract's XXH3). Calls on
 * one file serialise on its lock, which is held across the RPCs of that
 * file (other files go on).
 *
 * Invariants:
 *  (1) A put is acknowledged when every copy answered 0; a copy that fails
 *      fails the call (the tract stays cached and dirty).
 *  (2) A map byte is set only after its tract was put to every copy, and
 *      cleared (the map put) before the tract is removed.
 *  (3) A read answers the bytes of the first copy that has the tract (each
 *      copy checks its XXH3; a mismatch there is -EBADMSG and the next copy
 *      is asked); when none has it, zeros only if the set's map says the
 *      tract was never written, else EIO (pom_blob.h invariant (5)).
 *  (4) fsync puts the cached tract and then the map: after it returns 0,
 *      every byte written before it is on every copy. The application's
 *      close does the same (pom_blob_flush, before the row's flush), so an
 *      open after it reads what was written: the last close's file_fini
 *      runs after the file left the table, too late for an open racing it.
 *  (5) list, stat and touch ask every MDSL of the store's ring 1 (a set's
 *      tracts lie on many) and of the ring before it: list merges their
 *      answers by set id, and fails when one of ring 1 cannot answer, so a
 *      set is never reported absent because its MDSL was unreachable.
 *  (6) Puts go to the placement of the current ring only; a read that no
 *      copy there answers asks the other sites of the previous ring's
 *      placement. Removals, list, stat and touch reach both rings' sites.
 *      A site only the previous ring holds may have left the cluster: its
 *      failures fail nothing and do not make a tract look lost.
 */
#include "pom_blob_i.h"

#include "xt_common.h"
#include "xt_ring.h"
#include "xt_rpc_mdsl.h"
#include "xt_rpc_r2.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POM_MDSL_MAP_TRACT  XT_TRACT_MAP                 /* the set's map */
#define NO_TRACT            UINT32_MAX                   /* cur: none cached */
#define MDSL_COPIES_MAX     XT_TRACT_COPIES_MAX
#define MDSL_TRACT_MAX      (16u << 20)                  /* mdsl_blob.h's limit */
#define MDSL_LIST_PAGE      4096                         /* sets per tract_list */

struct msite {
    uint32_t id;
    xt_rpc_pool *pool;
};

struct mdsl_be {
    pthread_mutex_t mu;     /* brief: never held across an RPC */
    xt_ring *ring;          /* protected by mu: ring 1 of the newest view */
    xt_ring *prev;          /* protected by mu: the ring before it, or NULL */
    uint32_t copies;        /* immutable */
    struct msite *sites;    /* protected by mu: every MDSL of a view with an
                               address (pools live until close) */
    size_t nsites, capsites; /* protected by mu */
    struct xt_rpc_pool_opts po; /* immutable: how to reach a site (host/port set per site) */
    struct xt_auth_cred cred;   /* po.cred points here when the conf had one */
};

/* Where a call goes: the pools of a placement (or of every MDSL). */
struct mtarget {
    uint32_t id;
    xt_rpc_pool *pool;      /* NULL: no address known */
    bool prev_only;         /* only the previous ring places it here (invariant (6)) */
};

struct mfile {
    uint32_t cur;           /* the cached tract, NO_TRACT: none */
    uint8_t *buf;           /* tract_size bytes, xt_malloc'd on first use */
    uint32_t len;           /* bytes of cur */
    bool dirty;             /* cur changed since its last put */
    uint32_t rd_tract;      /* where the last read ended: tract, */
    uint64_t rd_end;        /* and offset in it (sequential reads) */
    bool map_known;         /* map read (or made) */
    bool map_absent;        /* known: no copy holds a map (a set never recorded) */
    bool map_dirty;         /* map changed since its last put */
    uint8_t *map;           /* nmap bytes */
    uint32_t nmap;
};

static struct mdsl_be *be_of(const pom_blob *b)
{
    return b->be;
}

/* REQUIRES: m->mu held. */
static xt_rpc_pool *pool_of(const struct mdsl_be *m, uint32_t id)
{
    assert(xt_mutex_held(&m->mu));
    for (size_t i = 0; i < m->nsites; i++)
        if (m->sites[i].id == id)
            return m->sites[i].pool;
    return NULL;
}

/* The copies of tract t of set (computed, never stored) into out[], the
 * current ring's first; with `with_prev` the previous ring's other sites
 * after them (invariant (6)). Returns how many. */
static uint32_t locate(struct mdsl_be *m, uint64_t set, uint32_t t, bool with_prev,
                       struct mtarget *out)
{
    uint32_t cur[MDSL_COPIES_MAX], old[MDSL_COPIES_MAX];
    pthread_mutex_lock(&m->mu);
    uint32_t n = xt_ring_tract_sites(m->ring, set, t, m->copies, cur);
    uint32_t no = with_prev && m->prev ? xt_ring_tract_sites(m->prev, set, t, m->copies, old)
                                       : 0;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        out[k++] = (struct mtarget){ cur[i], pool_of(m, cur[i]), false };
    for (uint32_t i = 0; i < no; i++) {
        bool dup = false;
        for (uint32_t j = 0; j < n; j++)
            dup |= cur[j] == old[i];
        if (!dup)
            out[k++] = (struct mtarget){ old[i], pool_of(m, old[i]), true };
    }
    pthread_mutex_unlock(&m->mu);
    return k;
}

/* Every MDSL of the current ring, then (with_prev) those only the
 * previous ring has: *out xt_malloc'd, caller frees. -ENOMEM. */
static int every_site(struct mdsl_be *m, bool with_prev, struct mtarget **out, size_t *n)
{
    pthread_mutex_lock(&m->mu);
    struct mtarget *v = xt_calloc(m->nsites ? m->nsites : 1, sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < m->nsites; i++) {
        bool in_cur = xt_ring_has_site(m->ring, m->sites[i].id);
        bool in_prev = m->prev && xt_ring_has_site(m->prev, m->sites[i].id);
        if (in_cur || (with_prev && in_prev))
            v[k++] = (struct mtarget){ m->sites[i].id, m->sites[i].pool, !in_cur };
    }
    pthread_mutex_unlock(&m->mu);
    *out = v;
    *n = k;
    return v ? 0 : -ENOMEM;
}

/* Invariant (1): tract t of set = data[0..len) on every copy. */
static int put_all(pom_blob *b, uint64_t set, uint32_t t, const void *data, uint32_t len)
{
    struct mtarget to[2 * MDSL_COPIES_MAX];
    uint32_t n = locate(be_of(b), set, t, false, to);
    for (uint32_t i = 0; i < n; i++) {
        int rc = to[i].pool ? xt_mdsl_tract_put(to[i].pool, NULL, b->fsid, set, t, data, len)
                            : -EHOSTUNREACH;
        if (rc < 0) {
            XT_ERR("blob: tract %" PRIu32 " of set %016" PRIx64 " not stored on MDSL %" PRIu32
                   " (%s): the write fails", t, set, to[i].id, strerror(-rc));
            return rc == -ENOSPC || rc == -EFBIG ? rc : -EIO;
        }
    }
    return n ? 0 : -EIO;
}

/* Bytes [off, off + want) (want 0: to the end) of tract t of set from the
 * first copy that has it (invariant (3)): 0 and *data (xt_free; NULL when
 * *len 0); -ENOENT when every copy answered that it has none; -EIO when no
 * copy gave it and one could not answer. */
static int fetch(pom_blob *b, uint64_t set, uint32_t t, uint32_t off, uint32_t want, void **data,
                 uint32_t *len)
{
    struct mtarget from[2 * MDSL_COPIES_MAX];
    uint32_t n = locate(be_of(b), set, t, true, from);
    int rc = -EIO;
    bool all_absent = n > 0;
    for (uint32_t i = 0; i < n; i++) {
        rc = from[i].pool ? xt_mdsl_tract_get(from[i].pool, NULL, b->fsid, set, t, off, want,
                                              data, len)
                          : -EHOSTUNREACH;
        if (rc == 0)
            return 0;
        if (rc != -ENOENT && !from[i].prev_only) {
            all_absent = false;
            XT_WARN_RL(1000, "blob: tract %" PRIu32 " of set %016" PRIx64 " on MDSL %" PRIu32
                       ": %s; asking the next copy", t, set, from[i].id, strerror(-rc));
        }
    }
    return all_absent ? -ENOENT : -EIO;
}

/* Reads the set's map once per open file. REQUIRES: f->mu held. */
static int map_load(pom_blob_file *f, struct mfile *mf)
{
    assert(xt_mutex_held(&f->mu));
    if (mf->map_known)
        return 0;
    void *d = NULL;
    uint32_t len = 0;
    int rc = fetch(f->b, f->uuid, POM_MDSL_MAP_TRACT, 0, 0, &d, &len);
    if (rc == -EIO)
        return rc;
    mf->map = d;
    mf->nmap = rc == 0 ? len : 0;
    mf->map_absent = rc == -ENOENT;
    mf->map_known = true;
    return 0;
}

static bool map_has(const struct mfile *mf, uint32_t t)
{
    return t < mf->nmap && mf->map[t];
}

/* REQUIRES: f->mu held, the map known. */
static int map_set(struct mfile *mf, uint32_t t, uint8_t v)
{
    assert(mf->map_known);
    if (t >= mf->nmap) {
        if (!v)
            return 0;
        uint8_t *n = xt_realloc(mf->map, (size_t)t + 1);
        if (!n)
            return -ENOMEM;
        memset(n + mf->nmap, 0, t + 1 - mf->nmap);
        mf->map = n;
        mf->nmap = t + 1;
    }
    if (mf->map[t] != v || mf->map_absent) {
        mf->map[t] = v;
        mf->map_dirty = true;
        mf->map_absent = false;
    }
    return 0;
}

/* Puts the map when it changed. REQUIRES: f->mu held. */
static int map_flush(pom_blob_file *f, struct mfile *mf)
{
    assert(xt_mutex_held(&f->mu));
    if (!mf->map_dirty)
        return 0;
    int rc = put_all(f->b, f->uuid, POM_MDSL_MAP_TRACT, mf->map, mf->nmap);
    if (rc == 0)
        mf->map_dirty = false;
    return rc;
}

/* Puts the cached tract when dirty, then marks it written (invariant (2)).
 * REQUIRES: f->mu held. */
static int flush_cur(pom_blob_file *f, struct mfile *mf)
{
    assert(xt_mutex_held(&f->mu));
    if (!mf->dirty)
        return 0;
    assert(mf->cur != NO_TRACT);
    int rc = put_all(f->b, f->uuid, mf->cur, mf->buf, mf->len);
    if (rc == 0)
        rc = map_load(f, mf);
    if (rc == 0)
        rc = map_set(mf, mf->cur, 1);
    if (rc == 0)
        mf->dirty = false;
    return rc;
}

/* Bytes [off, off + want) of tract t (want 0: to the end) into dst (room
 * for them): *len the bytes the tract has there, 0 for a hole; -EIO for a
 * tract the map says was written that no copy gives back.
 * REQUIRES: f->mu held. */
static int get_tract(pom_blob_file *f, struct mfile *mf, uint32_t t, uint32_t off, uint32_t want,
                     uint8_t *dst, uint32_t *len)
{
    assert(xt_mutex_held(&f->mu));
    assert(off < f->b->tract_size && want <= f->b->tract_size - off);
    void *d = NULL;
    uint32_t n = 0;
    int rc = fetch(f->b, f->uuid, t, off, want, &d, &n);
    if (rc == 0) {
        if (n > f->b->tract_size - off) {
            XT_ERR("blob: tract %" PRIu32 " of set %016" PRIx64 " holds %" PRIu32
                   " bytes, more than a tract: EIO", t, f->uuid, n);
            xt_free(d);
            return -EIO;
        }
        if (n)
            memcpy(dst, d, n);
        xt_free(d);
        *len = n;
        return 0;
    }
    int mrc = map_load(f, mf);
    if (mrc == 0 && !mf->map_absent && !map_has(mf, t)) {
        *len = 0; /* a real hole */
        return 0;
    }
    XT_ERR("blob: tract %" PRIu32 " of set %016" PRIx64 " is lost on every copy (%s): EIO, "
           "not zeros", t, f->uuid,
           mrc < 0 ? "its map is unreachable too" : mf->map_absent ? "the set has no map"
           : rc == -ENOENT ? "no copy has it" : "no copy answered");
    return -EIO;
}

/* Makes t the cached tract: the old one put when dirty; t's bytes read
 * unless `whole` (the caller overwrites all of it). REQUIRES: f->mu held. */
static int load(pom_blob_file *f, struct mfile *mf, uint32_t t, bool whole)
{
    assert(xt_mutex_held(&f->mu));
    if (mf->cur == t)
        return 0;
    int rc = flush_cur(f, mf);
    if (rc < 0)
        return rc;
    if (!mf->buf && !(mf->buf = xt_malloc(f->b->tract_size)))
        return -ENOMEM;
    mf->cur = NO_TRACT;
    uint32_t len = 0;
    if (!whole && (rc = get_tract(f, mf, t, 0, 0, mf->buf, &len)) < 0)
        return rc;
    mf->cur = t;
    mf->len = len;
    return 0;
}

static struct mfile *mf_of(pom_blob_file *f)
{
    if (!f->be) {
        struct mfile *mf = xt_calloc(1, sizeof *mf);
        if (mf)
            mf->cur = mf->rd_tract = NO_TRACT;
        f->be = mf;
    }
    return f->be;
}

/* Copies [toff, toff+n) of a tract of len bytes at src into dst. */
static void copy_out(void *dst, const uint8_t *src, uint32_t len, uint64_t toff, size_t n)
{
    size_t have = toff < len ? (size_t)XT_MIN((uint64_t)n, len - toff) : 0;
    if (have)
        memcpy(dst, src + toff, have);
    memset((char *)dst + have, 0, n - have);
}

static ssize_t m_pread(pom_blob_file *f, uint32_t t, void *buf, size_t n, uint64_t toff)
{
    assert(toff + n <= f->b->tract_size);
    pthread_mutex_lock(&f->mu);
    struct mfile *mf = mf_of(f);
    int rc = mf ? 0 : -ENOMEM;
    bool sequential = rc == 0 && (toff == 0 || (mf->rd_tract == t && mf->rd_end == toff));
    if (rc == 0 && mf->cur != t && !mf->dirty && sequential)
        rc = load(f, mf, t, false); /* cached: sequential reads fetch once */
    if (rc == 0 && mf->cur == t) {
        copy_out(buf, mf->buf, mf->len, toff, n);
    } else if (rc == 0 && n) {
        uint32_t len = 0;
        rc = get_tract(f, mf, t, (uint32_t)toff, (uint32_t)n, buf, &len);
        if (rc == 0)
            memset((char *)buf + len, 0, n - len); /* past the tract's end, or a hole */
    }
    if (rc == 0) {
        mf->rd_tract = t;
        mf->rd_end = toff + n;
    }
    pthread_mutex_unlock(&f->mu);
    return rc < 0 ? rc : (ssize_t)n;
}

static ssize_t m_pwrite(pom_blob_file *f, uint32_t t, const void *buf, size_t n, uint64_t toff)
{
    pthread_mutex_lock(&f->mu);
    struct mfile *mf = mf_of(f);
    int rc = mf ? load(f, mf, t, toff == 0 && n == f->b->tract_size) : -ENOMEM;
    if (rc == 0) {
        if (toff > mf->len)
            memset(mf->buf + mf->len, 0, toff - mf->len);
        memcpy(mf->buf + toff, buf, n);
        mf->len = (uint32_t)XT_MAX((uint64_t)mf->len, toff + n);
        mf->dirty = true;
    }
    pthread_mutex_unlock(&f->mu);
    return rc < 0 ? rc : (ssize_t)n;
}

static int m_cut(pom_blob_file *f, uint32_t t, uint64_t len)
{
    pthread_mutex_lock(&f->mu);
    struct mfile *mf = mf_of(f);
    int rc = mf ? load(f, mf, t, false) : -ENOMEM;
    if (rc == 0 && mf->len > len) {
        mf->len = (uint32_t)len;
        mf->dirty = true;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* Removes tracts [first, end) of f's set from the given sites (NULL: every
 * MDSL: the tracts of a range lie anywhere). A site only the previous ring
 * places them on is asked too; its failure fails nothing (invariant (6)). */
static int remove_on(pom_blob *b, uint64_t set, uint32_t first, uint32_t end,
                     const struct mtarget *sites, size_t n)
{
    struct mtarget *all = NULL;
    int err = sites ? 0 : every_site(be_of(b), true, &all, &n);
    if (err < 0)
        return err;
    const struct mtarget *to = sites ? sites : all;
    for (size_t i = 0; i < n; i++) {
        int rc = to[i].pool ? xt_mdsl_tract_remove(to[i].pool, NULL, b->fsid, set, first, end)
                            : -EHOSTUNREACH;
        if (rc < 0 && !to[i].prev_only) {
            XT_WARN("blob: tracts %" PRIu32 "..%" PRIu32 " of set %016" PRIx64 " stay on MDSL %"
                    PRIu32 ": %s", first, end, set, to[i].id, strerror(-rc));
            err = -EIO;
        }
    }
    xt_free(all);
    return err;
}

static int m_drop_from(pom_blob_file *f, uint32_t first)
{
    pthread_mutex_lock(&f->mu);
    struct mfile *mf = mf_of(f);
    int rc = mf ? map_load(f, mf) : -ENOMEM;
    if (rc == 0 && mf->cur != NO_TRACT && mf->cur >= first) {
        mf->cur = NO_TRACT;
        mf->dirty = false;
    }
    bool any = false;
    for (uint32_t t = first; rc == 0 && t < mf->nmap; t++)
        any |= mf->map[t] != 0;
    if (rc == 0 && any) {
        mf->nmap = first; /* invariant (2): the map first */
        mf->map_dirty = true;
        rc = map_flush(f, mf);
        if (rc == 0)
            rc = remove_on(f->b, f->uuid, first, POM_MDSL_MAP_TRACT, NULL, 0);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int m_drop(pom_blob_file *f, uint32_t t)
{
    pthread_mutex_lock(&f->mu);
    struct mfile *mf = mf_of(f);
    int rc = mf ? map_load(f, mf) : -ENOMEM;
    if (rc == 0 && mf->cur == t) {
        mf->cur = NO_TRACT;
        mf->dirty = false;
    }
    if (rc == 0 && map_has(mf, t)) {
        map_set(mf, t, 0);
        rc = map_flush(f, mf);
        struct mtarget sites[2 * MDSL_COPIES_MAX];
        uint32_t n = locate(be_of(f->b), f->uuid, t, true, sites);
        if (rc == 0)
            rc = remove_on(f->b, f->uuid, t, t + 1, sites, n);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int m_punch(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len)
{
    pthread_mutex_lock(&f->mu);
    struct mfile *mf = mf_of(f);
    int rc = mf ? load(f, mf, t, false) : -ENOMEM;
    if (rc == 0 && toff < mf->len) {
        memset(mf->buf + toff, 0, (size_t)XT_MIN(len, mf->len - toff));
        mf->dirty = true;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* No space is reserved on the MDSL: the tract is made (empty) when absent,
 * so the range reads as zeros and the set records it. */
static int m_allocate(pom_blob_file *f, uint32_t t, uint64_t toff, uint64_t len, bool *made)
{
    (void)toff, (void)len;
    pthread_mutex_lock(&f->mu);
    struct mfile *mf = mf_of(f);
    int rc = mf ? load(f, mf, t, false) : -ENOMEM;
    if (rc == 0)
        rc = map_load(f, mf);
    if (rc == 0 && !map_has(mf, t) && !mf->dirty) {
        mf->dirty = true;
        *made = true;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int m_fsync(pom_blob_file *f)
{
    pthread_mutex_lock(&f->mu);
    struct mfile *mf = mf_of(f);
    int rc = mf ? flush_cur(f, mf) : -ENOMEM;
    if (rc == 0)
        rc = map_flush(f, mf);
    if (rc < 0)
        f->error = rc; /* pom_blob.c invariant (1) */
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int m_create(pom_blob_file *f)
{
    pthread_mutex_lock(&f->mu);
    struct mfile *mf = mf_of(f);
    int rc = mf ? map_load(f, mf) : -ENOMEM;
    if (rc == 0 && mf->map_absent) {
        mf->map_absent = false;
        mf->map_dirty = true;
        rc = map_flush(f, mf);
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static void m_file_fini(pom_blob_file *f)
{
    struct mfile *mf = f->be;
    if (!mf)
        return;
    /* The last close: what was written reaches the copies (not durable
     * before an fsync, as local's page cache). No one else holds f now;
     * the lock is for flush_cur's REQUIRES. */
    pthread_mutex_lock(&f->mu);
    int rc = flush_cur(f, mf);
    if (rc == 0)
        rc = map_flush(f, mf);
    pthread_mutex_unlock(&f->mu);
    if (rc < 0)
        XT_ERR("blob: set %016" PRIx64 ": writes not stored at close: %s", f->uuid,
               strerror(-rc));
    xt_free(mf->buf);
    xt_free(mf->map);
    xt_free(mf);
    f->be = NULL;
}

static int m_remove(pom_blob *b, uint64_t uuid)
{
    return remove_on(b, uuid, 0, 0, NULL, 0);
}

/* What the MDSL hold of uuid, summed over them (so over its copies). */
static int m_stat(pom_blob *b, uint64_t uuid, struct pom_blob_stat *st)
{
    memset(st, 0, sizeof *st);
    struct mtarget *v;
    size_t n;
    int rc = every_site(be_of(b), true, &v, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct xt_tract_list l;
        rc = xt_mdsl_tract_list(v[i].pool, NULL, b->fsid, 0, 1, true, uuid, &l);
        if (rc == -ENOENT || (rc < 0 && v[i].prev_only)) {
            rc = 0;
            continue;
        }
        if (rc < 0) {
            XT_WARN("blob: set %016" PRIx64 " on MDSL %" PRIu32 ": %s", uuid, v[i].id,
                    strerror(-rc));
            break;
        }
        for (size_t k = 0; k < l.n; k++) {
            st->tracts += l.sets[k].tracts;
            st->alloc_bytes += l.sets[k].bytes;
        }
        xt_free(l.sets);
    }
    xt_free(v);
    return rc;
}

static int cmp_set(const void *a, const void *b)
{
    const struct xt_tract_set *x = a, *y = b;
    return x->set < y->set ? -1 : x->set > y->set;
}

/* Appends every set site s holds to *v (grown with xt_realloc; *n used of
 * *cap; the caller frees it). */
static int list_site(pom_blob *b, const struct mtarget *s, struct xt_tract_set **v, size_t *n,
                     size_t *cap)
{
    uint64_t cookie = 0;
    for (;;) {
        struct xt_tract_list l;
        int rc = xt_mdsl_tract_list(s->pool, NULL, b->fsid, cookie, MDSL_LIST_PAGE, false, 0,
                                    &l);
        if (rc < 0) {
            XT_WARN("blob: cannot list the tract sets of MDSL %" PRIu32 ": %s", s->id,
                    strerror(-rc));
            return rc;
        }
        if (*n + l.n > *cap) {
            size_t c = XT_MAX(*n + l.n, *cap ? 2 * *cap : (size_t)1024);
            struct xt_tract_set *nv = xt_realloc(*v, c * sizeof *nv);
            if (!nv) {
                xt_free(l.sets);
                return -ENOMEM;
            }
            *v = nv;
            *cap = c;
        }
        if (l.n)
            memcpy(*v + *n, l.sets, l.n * sizeof *l.sets);
        *n += l.n;
        xt_free(l.sets);
        if (l.end)
            return 0;
        cookie = l.cookie;
    }
}

/* Every set of the fs, merged over the MDSL of ring 1 (a set's tracts lie
 * on many: its tracts and bytes are summed over them, so over the copies;
 * its mtime is the newest). An MDSL of ring 1 that cannot answer fails the listing:
 * a set seen on none would look absent to fsck. */
static int m_list(pom_blob *b, pom_blob_list_fn fn, void *arg)
{
    struct xt_tract_set *v = NULL;
    size_t n = 0, cap = 0;
    struct mtarget *sites;
    size_t ns;
    int rc = every_site(be_of(b), true, &sites, &ns);
    for (size_t i = 0; rc == 0 && i < ns; i++)
        if ((rc = list_site(b, &sites[i], &v, &n, &cap)) < 0 && sites[i].prev_only)
            rc = 0; /* invariant (6): it may have left the cluster */
    xt_free(sites);
    if (rc == 0 && n > 1)
        qsort(v, n, sizeof *v, cmp_set);
    for (size_t i = 0; rc == 0 && i < n;) {
        struct pom_blob_set s = { .id = v[i].set, .mtime_ns = INT64_MIN };
        for (; i < n && v[i].set == s.id; i++) {
            s.tracts += v[i].tracts;
            s.bytes += v[i].bytes;
            s.mtime_ns = XT_MAX(s.mtime_ns, v[i].mtime_ns);
        }
        s.alloc_bytes = s.bytes;
        rc = fn(arg, &s);
    }
    xt_free(v);
    return rc;
}

/* The lease: every MDSL that holds a tract of the set starts its age again
 * (m_list takes the newest). 0 or the first -errno; the others go on. */
static int m_touch(pom_blob *b, uint64_t uuid)
{
    struct mtarget *v;
    size_t n;
    int err = every_site(be_of(b), true, &v, &n);
    if (err < 0)
        return err;
    for (size_t i = 0; i < n; i++) {
        int rc = xt_mdsl_tract_touch(v[i].pool, NULL, b->fsid, uuid);
        if (rc < 0 && !err && !v[i].prev_only)
            err = rc;
    }
    xt_free(v);
    return err;
}

/* No store-wide lock: every reclaiming client of the fs runs its passes.
 * Each pass is safe alone (client/pom_reclaim.c invariants (1)-(3)); two at
 * once only repeat a removal, which is idempotent. */
static int m_lock(pom_blob *b, int *token)
{
    (void)b;
    *token = 0;
    return 1;
}

static void m_unlock(pom_blob *b, int token)
{
    (void)b, (void)token;
}

static void m_close(pom_blob *b)
{
    struct mdsl_be *m = be_of(b);
    if (!m)
        return;
    for (size_t i = 0; i < m->nsites; i++)
        xt_rpc_pool_free(m->sites[i].pool);
    xt_free(m->sites);
    xt_ring_free(m->ring);
    xt_ring_free(m->prev);
    xt_rpc_tls_free(m->po.tls);
    pthread_mutex_destroy(&m->mu);
    xt_free(m);
    b->be = NULL;
}

/* Pools for the MDSL of v that ring r holds and the store has none for
 * yet. REQUIRES: m->mu held: pool_new only builds the pool (it connects at
 * the first call). 0 or -ENOMEM (the sites added so far stay). */
static int add_sites(struct mdsl_be *m, const struct xt_view *v, const xt_ring *r)
{
    assert(xt_mutex_held(&m->mu));
    for (size_t i = 0; i < v->nsites; i++) {
        const struct xt_site *s = &v->sites[i];
        if (s->type != XT_SITE_MDSL || !xt_ring_has_site(r, s->id) || pool_of(m, s->id))
            continue;
        char host[256];
        int port;
        if (xt_rpc_parse_addr(s->addr, host, sizeof host, &port))
            continue;
        if (m->nsites == m->capsites) {
            size_t c = m->capsites ? 2 * m->capsites : 8;
            struct msite *n = xt_realloc(m->sites, c * sizeof *n);
            if (!n)
                return -ENOMEM;
            m->sites = n;
            m->capsites = c;
        }
        struct xt_rpc_pool_opts po = m->po;
        po.host = host;
        po.port = port;
        int rc = xt_rpc_pool_new(&po, &m->sites[m->nsites].pool);
        if (rc < 0)
            return rc;
        m->sites[m->nsites++].id = s->id;
    }
    return 0;
}

/* A view of the R2 agent: a newer ring 1 becomes the placement, the one
 * it replaces the place reads look second (invariant (6)) until a view
 * says the change is past MOVING: the MDSL moved every tract by then (R2
 * waits for their owed tracts, docs/r2.md "Ring-1 changes"). */
static void m_view(pom_blob *b, const struct xt_view *v)
{
    struct mdsl_be *m = be_of(b);
    xt_ring *r = NULL;
    if (!m || xt_view_ring(v, XT_RING_MDSL, &r) < 0 || !r)
        return;
    pthread_mutex_lock(&m->mu);
    bool newer = xt_ring_nsites(r) > 0 && xt_ring_version(r) > xt_ring_version(m->ring);
    int rc = newer ? add_sites(m, v, r) : 0;
    xt_ring *drop = r, *settled = NULL;
    if (newer && rc == 0) {
        drop = m->prev;
        m->prev = m->ring;
        m->ring = r;
    }
    if (v->ring1 && (v->ring1->phase == XT_RING1_DONE || v->ring1->phase == XT_RING1_STABLE)) {
        settled = m->prev;
        m->prev = NULL;
    }
    uint64_t ver = xt_ring_version(r);
    uint32_t nring = xt_ring_nsites(r);
    pthread_mutex_unlock(&m->mu);
    xt_ring_free(drop);
    xt_ring_free(settled);
    if (newer && rc == 0)
        XT_INFO("blob: backend mdsl: tracts placed by ring 1 v%" PRIu64 " (%" PRIu32 " MDSL)",
                ver, nring);
    else if (rc < 0)
        XT_WARN("blob: backend mdsl: ring 1 v%" PRIu64 " not followed: %s", ver,
                strerror(-rc));
}

/* conf->path: "" or "copies=N". */
static int m_open(pom_blob *b, const struct pom_blob_conf *c)
{
    if (!c->view || !c->pool) {
        XT_ERR("blob: backend mdsl needs the cluster's view (open the fs through R2)");
        return -EINVAL;
    }
    if (b->tract_size > MDSL_TRACT_MAX) {
        XT_ERR("blob: backend mdsl takes tracts up to %u bytes", MDSL_TRACT_MAX);
        return -EINVAL;
    }
    struct mdsl_be *m = xt_calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    pthread_mutex_init(&m->mu, NULL);
    m->po = *c->pool;
    if (c->pool->cred) {
        m->cred = *c->pool->cred;
        m->po.cred = &m->cred;
    }
    if (m->po.tls)
        m->po.tls = xt_rpc_tls_ref(m->po.tls);
    b->be = m;
    int rc = xt_view_ring(c->view, XT_RING_MDSL, &m->ring);
    if (rc < 0 || !m->ring || xt_ring_nsites(m->ring) == 0) {
        XT_ERR("blob: backend mdsl: the view has no ring 1 with MDSL sites");
        return rc < 0 && rc != -ENOENT ? rc : -EHOSTUNREACH;
    }
    uint32_t nring = xt_ring_nsites(m->ring);
    if (xt_ring_tract_copies(m->ring, c->path, &m->copies) < 0) {
        XT_ERR("blob: backend mdsl: bad setting '%s' (want copies=N, N 1..%d)", c->path,
               MDSL_COPIES_MAX);
        return -EINVAL;
    }
    if (m->copies > nring) {
        XT_ERR("blob: backend mdsl: %u copies wanted, ring 1 has %u MDSL", m->copies, nring);
        return -EINVAL;
    }
    pthread_mutex_lock(&m->mu);
    rc = add_sites(m, c->view, m->ring);
    pthread_mutex_unlock(&m->mu);
    if (rc < 0)
        return rc;
    XT_INFO("blob: backend mdsl: %zu MDSL, %u copies per tract", m->nsites, m->copies);
    return 0;
}

const struct blob_ops pom_blob_mdsl_ops = {
    .name = "mdsl",
    .open = m_open,
    .close = m_close,
    .pread = m_pread,
    .pwrite = m_pwrite,
    .cut = m_cut,
    .drop_from = m_drop_from,
    .drop = m_drop,
    .punch = m_punch,
    .allocate = m_allocate,
    .fsync = m_fsync,
    .flush = m_fsync, /* a put is durable: the flush is the fsync */
    .create = m_create,
    .remove = m_remove,
    .stat = m_stat,
    .list = m_list,
    .touch = m_touch,
    .lock = m_lock,
    .unlock = m_unlock,
    .file_fini = m_file_fini,
    .view = m_view,
};
