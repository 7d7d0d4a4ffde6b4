/*
 * pom_errseq.c -- which acknowledged changes an MDS restart may have lost,
 * and which handles have been told (docs/client.md "Lost changes"): the
 * writeback-error sequence of Linux (errseq_t) for an MDS that keeps no
 * log and loses its open commit group when it dies.
 *
 *   acknowledged change --pom_es_acked----> unsynced (m, key) -> ack seq
 *   sync of m, same epoch --pom_es_committed--> dropped (committed)
 *   m restarted or FAILED --pom_es_lose-----> err key -> loss event number
 *   fsync / close / fsyncdir / kv sync --pom_es_check--> -EIO once per
 *                                            handle, then the handle's
 *                                            sample moves past it
 *
 * A key is the uuid of an inode (a file, a directory) or of a table (a
 * directory's table is its uuid; a keyspace's is above 2^62): a change of
 * row (table, name) touches its table and the inode the row is
 * (pom_call.c req_keys).
 *
 * Floor 1 (transport), below pom_call.c: calls nothing of the library but
 * fs->up.held (whether the inode map still holds a key, invariant 5).
 *
 * Invariants:
 *  (1) Everything here is protected by fs->epoch_mu (taken before fs->mu,
 *      never under it).
 *  (2) An unsynced entry (m, key, seq) exists iff MDS m acknowledged a
 *      change touching key at its ack count seq, and no sync answered by
 *      the same incarnation since covers seq. When the table is full the
 *      change is not recorded and m->over_seq says so: a loss then counts
 *      for every key ("wide").
 *  (3) Loss events are numbered 1, 2, ... (es->events), never reused. An
 *      err entry holds the number of the latest loss of its key (seq) and
 *      the latest one some handle was told (seen).
 *  (4) A handle's sample is a loss event number: it has been told of every
 *      loss of its key numbered up to it. A handle opened while a loss of
 *      its key is unseen samples below it, so an error nobody was told of
 *      reaches the next opener (as Linux's errseq_sample).
 *  (5) An err entry is dropped only once seen and its key is not in the
 *      inode map (so no handle with an older sample is open: files and
 *      directory handles pin their inode); keyspace keys are kept.
 */
#include "pom_call_i.h"
#include "pom_route.h"

#include <assert.h>

#include <string.h>

#define UNS_MAX   (1u << 16)  /* unsynced entries (invariant 2) */
#define ERR_MAX   (1u << 16)  /* keys with a loss recorded */
#define KEY_KV    (UINT64_C(1) << 62) /* keyspace tables (invariant 5) */

struct pom_uns {
    struct pom_mds *m;        /* NULL: free slot */
    uint64_t key, seq;
};

struct pom_err {
    uint64_t key;             /* 0: free slot */
    uint64_t seq, seen;       /* loss event numbers (invariant 3) */
};

struct pom_errseq {
    struct pom_uns *uns;
    size_t nuns, capuns;      /* capuns: 0 or a power of 2 */
    struct pom_err *err;
    size_t nerr, caperr;
    uint64_t events;          /* the latest loss event's number */
    uint64_t wide, wide_seen; /* latest loss not traced to keys, and told */
    uint64_t sync_seen;       /* pom_sync's sample */
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    return x;
}

static size_t uns_slot(const struct pom_uns *v, size_t cap, const struct pom_mds *m,
                       uint64_t key)
{
    size_t i = (size_t)mix(key ^ (uint64_t)(uintptr_t)m) & (cap - 1);
    while (v[i].m && !(v[i].m == m && v[i].key == key))
        i = (i + 1) & (cap - 1);
    return i;
}

static size_t err_slot(const struct pom_err *v, size_t cap, uint64_t key)
{
    size_t i = (size_t)mix(key) & (cap - 1);
    while (v[i].key && v[i].key != key)
        i = (i + 1) & (cap - 1);
    return i;
}

int pom_es_init(pom_fs *fs)
{
    fs->es = xt_calloc(1, sizeof *fs->es);
    return fs->es ? 0 : -ENOMEM;
}

void pom_es_free(pom_fs *fs)
{
    if (!fs->es)
        return;
    xt_free(fs->es->uns);
    xt_free(fs->es->err);
    xt_free(fs->es);
    fs->es = NULL;
}

/* Rebuilds the unsynced table into cap slots, leaving out the entries of
 * `drop` (NULL: none) with seq <= upto. -ENOMEM keeps the old table. */
static int uns_rebuild(struct pom_errseq *es, size_t cap, struct pom_mds *drop, uint64_t upto)
{
    struct pom_uns *v = xt_calloc(cap, sizeof *v);
    if (!v)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < es->capuns; i++) {
        struct pom_uns *u = &es->uns[i];
        if (!u->m)
            continue;
        if (u->m == drop && u->seq <= upto) {
            drop->nuns--;
            continue;
        }
        v[uns_slot(v, cap, u->m, u->key)] = *u;
        n++;
    }
    xt_free(es->uns);
    es->uns = v;
    es->capuns = cap;
    es->nuns = n;
    return 0;
}

/* The smallest table at most half full with n entries. */
static size_t cap_for(size_t n)
{
    size_t cap = 64;
    while (cap < 2 * n)
        cap *= 2;
    return cap;
}

void pom_es_acked(pom_fs *fs, struct pom_mds *m, const uint64_t *keys, size_t n)
{
    assert(xt_mutex_held(&fs->epoch_mu)); /* invariant (1) */
    assert(m->ack_seq > 0);            /* this change's ack count is taken */
    struct pom_errseq *es = fs->es;
    for (size_t k = 0; k < n; k++) {
        if (!keys[k])
            continue;
        if (2 * (es->nuns + 1) > es->capuns && es->nuns < UNS_MAX)
            uns_rebuild(es, cap_for(es->nuns + 1), NULL, 0);
        if (!es->capuns) {
            m->over_seq = m->ack_seq;
            continue;
        }
        size_t i = uns_slot(es->uns, es->capuns, m, keys[k]);
        if (!es->uns[i].m && 2 * (es->nuns + 1) > es->capuns) {
            m->over_seq = m->ack_seq; /* full (or out of memory): invariant (2) */
            continue;
        }
        if (!es->uns[i].m) {
            es->uns[i] = (struct pom_uns){ m, keys[k], 0 };
            es->nuns++;
            m->nuns++;
        }
        es->uns[i].seq = m->ack_seq;
    }
}

void pom_es_committed(pom_fs *fs, struct pom_mds *m, uint64_t seq0)
{
    assert(xt_mutex_held(&fs->epoch_mu));
    assert(seq0 <= m->ack_seq);
    if (m->over_seq && m->over_seq <= seq0)
        m->over_seq = 0;
    if (m->nuns)
        uns_rebuild(fs->es, cap_for(fs->es->nuns), m, seq0);
}

/* Rebuilds the err table into cap slots; `prune`: without the seen
 * entries of keys no handle can hold (invariant 5). -ENOMEM keeps it. */
static int err_rebuild(pom_fs *fs, size_t cap, bool prune)
{
    assert(xt_mutex_held(&fs->epoch_mu));
    assert(cap && (cap & (cap - 1)) == 0); /* slots are found by masking */
    struct pom_errseq *es = fs->es;
    struct pom_err *v = xt_calloc(cap, sizeof *v);
    if (!v)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < es->caperr; i++) {
        const struct pom_err *e = &es->err[i];
        if (!e->key || (prune && e->seen >= e->seq && e->key < KEY_KV &&
                        !fs->up.held(fs, e->key)))
            continue;
        v[err_slot(v, cap, e->key)] = *e;
        n++;
    }
    xt_free(es->err);
    es->err = v;
    es->caperr = cap;
    es->nerr = n;
    return 0;
}

/* Records loss event `ev` of key; false when there is no room. */
static bool err_note(pom_fs *fs, uint64_t key, uint64_t ev)
{
    assert(xt_mutex_held(&fs->epoch_mu));
    assert(key != 0 && ev == fs->es->events); /* invariant (3): the latest event */
    struct pom_errseq *es = fs->es;
    if (2 * (es->nerr + 1) > es->caperr) {
        bool prune = es->nerr + 1 > ERR_MAX;
        err_rebuild(fs, cap_for(XT_MIN(es->nerr + 1, (size_t)ERR_MAX)), prune);
    }
    if (!es->caperr)
        return false;
    size_t i = err_slot(es->err, es->caperr, key);
    if (!es->err[i].key) {
        if (2 * (es->nerr + 1) > es->caperr)
            return false;
        es->err[i] = (struct pom_err){ key, 0, 0 };
        es->nerr++;
    }
    es->err[i].seq = ev;
    return true;
}

bool pom_es_lose(pom_fs *fs, struct pom_mds *m)
{
    assert(xt_mutex_held(&fs->epoch_mu));
    struct pom_errseq *es = fs->es;
    if (!m->nuns && !m->over_seq)
        return false;
    uint64_t ev = ++es->events;
    bool wide = m->over_seq != 0;
    /* Collected first: err_note may rebuild the err table, never this one. */
    for (size_t i = 0; i < es->capuns; i++)
        if (es->uns[i].m == m && !wide && !err_note(fs, es->uns[i].key, ev))
            wide = true; /* no room: every key is told (the rest need not be noted) */
    if (wide)
        es->wide = ev;
    m->over_seq = 0;
    if (m->nuns && uns_rebuild(es, cap_for(es->nuns), m, UINT64_MAX) < 0) {
        /* Out of memory: the entries stay and are lost again with the
         * next restart (told twice, never missed). */
    }
    return true;
}

uint64_t pom_es_sample(pom_fs *fs, uint64_t key)
{
    pthread_mutex_lock(&fs->epoch_mu);
    struct pom_errseq *es = fs->es;
    uint64_t s = es->events;
    if (es->nerr) {
        const struct pom_err *e = &es->err[err_slot(es->err, es->caperr, key)];
        if (e->key && e->seq > e->seen)
            s = XT_MIN(s, e->seen); /* unseen: the new opener is told (4) */
    }
    if (es->wide > es->wide_seen)
        s = XT_MIN(s, es->wide_seen);
    pthread_mutex_unlock(&fs->epoch_mu);
    return s;
}

int pom_es_check(pom_fs *fs, uint64_t key, uint64_t *sample)
{
    int rc = 0;
    pthread_mutex_lock(&fs->epoch_mu);
    struct pom_errseq *es = fs->es;
    if (es->events > *sample) {
        struct pom_err *e = es->nerr ? &es->err[err_slot(es->err, es->caperr, key)] : NULL;
        if (e && e->key && e->seq > *sample) {
            e->seen = XT_MAX(e->seen, e->seq);
            rc = -EIO;
        }
        if (es->wide > *sample) {
            es->wide_seen = XT_MAX(es->wide_seen, es->wide);
            rc = -EIO;
        }
        if (rc)
            *sample = es->events;
        assert(*sample <= es->events); /* invariant (4) */
    }
    pthread_mutex_unlock(&fs->epoch_mu);
    return rc;
}

int pom_es_check_fs(pom_fs *fs)
{
    pthread_mutex_lock(&fs->epoch_mu);
    struct pom_errseq *es = fs->es;
    int rc = es->events > es->sync_seen ? -EIO : 0;
    es->sync_seen = es->events;
    pthread_mutex_unlock(&fs->epoch_mu);
    return rc;
}
