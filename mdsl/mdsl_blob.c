/*
 * mdsl_blob.c -- the MDSL's blob store (mdsl_blob.h has the format and the
 * invariants).
 *
 * The index lives in memory, rebuilt at open from the record headers
 * (Bitcask): a put costs one append and one fdatasync, with no second
 * durable write to an index; a restart reads one 40-byte header per record
 * (the payloads are skipped). Sets hash into buckets; each set keeps its
 * tracts in an array sorted by tract number.
 *
 * Locks: app_mu serialises appends (invariant (2): the file order is the
 * replay order; the appender holds it across the write and its fdatasync,
 * so a second put waits for the first, as the slice store's appends do).
 * mu protects the index and the segment table, held briefly and never
 * across I/O. A reader takes a reference on the segment's file (struct
 * bfile) under mu and reads after dropping it, so GC may swap the file
 * under it: the old one is closed by whoever drops its last reference.
 *
 * GC (mdsl_blob_gc, on the store's own worker) rewrites a sealed segment k
 * in place rather than into the active segment: replay order is segment
 * order, and a record copied past later records of its tract would undo
 * them (a removal copied after a newer put would remove it). The rewrite
 * keeps the live tract records of k and its removal records (those of
 * segment 0 are dropped: nothing older is left for them to remove) in
 * their order, into bseg-k.gc, fdatasync'd, renamed over bseg-k; then the
 * index is repointed under mu. A crash before the rename leaves the old
 * file (bseg-k.gc is deleted at open), after it the new one: either holds
 * every record the index needs (invariant (5)).
 */
#include "mdsl_blob.h"

#include "xt_common.h"
#include "xt_crash.h"
#include "xt_time.h"
#include "xt_worker.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define NBUCK 4096

struct tloc {
    uint32_t tract, seg, len;
    uint64_t off;    /* of the payload */
    uint64_t csum;   /* XXH3_64 of the payload */
};

struct bset {
    uint32_t fsid;
    uint64_t set;
    struct tloc *t;  /* sorted by tract */
    size_t n, cap;
    uint64_t bytes;  /* payload bytes of t[0..n) */
    int64_t mtime_ns; /* wall clock of the last put or touch (the open's at replay) */
    struct bset *next;
};

/* A segment's open file, shared by the table and the readers. */
struct bfile {
    mdsl_file *f;
    uint32_t refs;   /* protected by mu: the table's (while it points here) + readers' */
};

struct bseg {
    struct bfile *bf;   /* protected by mu; swapped by GC */
    uint64_t size;      /* protected by mu: bytes of the file */
    uint64_t live;      /* protected by mu: header + payload of the tracts indexed here */
    uint64_t tombs;     /* protected by mu: bytes of removal records */
};

struct mdsl_blob {
    mdsl_io *io;
    char *dir;
    uint64_t seg_size;
    double gc_ratio;        /* immutable */
    pthread_mutex_t app_mu;
    uint64_t tail;          /* protected by app_mu: end of the active segment */
    int failed;             /* protected by app_mu and mu (both to write) */
    pthread_mutex_t mu;
    struct bseg *segs;      /* protected by mu: by segment number */
    uint32_t nsegs, capsegs; /* protected by mu; the active segment is nsegs-1 */
    uint64_t bytes;         /* protected by mu: bytes of every segment */
    struct bset *buck[NBUCK]; /* protected by mu */
    uint64_t ntracts, live, dead; /* protected by mu */
    uint64_t gc_segments, gc_bytes; /* protected by mu: segments rewritten, bytes freed */
    int64_t opened_ns;      /* immutable after open: the mtime of replayed sets */
    atomic_bool gc_running; /* one GC pass at a time */
    xt_worker *gc;          /* NULL: no background GC */
    uint64_t gc_interval_ms; /* immutable */
};

#define REC_BYTES(len) ((uint64_t)MDSL_BLOB_HDR_SIZE + (len))

static size_t bucket_of(uint32_t fsid, uint64_t set)
{
    return (size_t)((set ^ ((uint64_t)fsid * UINT64_C(0x9e3779b97f4a7c15))) % NBUCK);
}

/* REQUIRES: b->mu held. The set, or NULL (create: a new empty one, NULL
 * on ENOMEM). */
static struct bset *set_find(mdsl_blob *b, uint32_t fsid, uint64_t set, bool create)
{
    assert(xt_mutex_held(&b->mu));
    struct bset **pp = &b->buck[bucket_of(fsid, set)];
    for (struct bset *s = *pp; s; s = s->next)
        if (s->fsid == fsid && s->set == set)
            return s;
    if (!create)
        return NULL;
    struct bset *s = xt_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->fsid = fsid;
    s->set = set;
    s->next = *pp;
    *pp = s;
    return s;
}

/* Index of the first tract >= t in s. */
static size_t lower(const struct bset *s, uint32_t t)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->t[mid].tract < t)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* REQUIRES: b->mu held. Records loc in the index (replacing the tract's
 * older place); the set's mtime becomes now. -ENOMEM. */
static int index_put(mdsl_blob *b, uint32_t fsid, uint64_t set, const struct tloc *loc,
                     int64_t now)
{
    assert(xt_mutex_held(&b->mu));
    struct bset *s = set_find(b, fsid, set, true);
    if (!s)
        return -ENOMEM;
    s->mtime_ns = XT_MAX(s->mtime_ns, now);
    size_t i = lower(s, loc->tract);
    assert(loc->seg < b->nsegs);
    if (i < s->n && s->t[i].tract == loc->tract) {
        b->dead += s->t[i].len;
        b->live -= s->t[i].len;
        s->bytes -= s->t[i].len;
        b->segs[s->t[i].seg].live -= REC_BYTES(s->t[i].len);
        s->t[i] = *loc;
        b->live += loc->len;
        s->bytes += loc->len;
        b->segs[loc->seg].live += REC_BYTES(loc->len);
        return 0;
    }
    if (s->n == s->cap) {
        size_t c = s->cap ? 2 * s->cap : 4;
        struct tloc *nt = xt_realloc(s->t, c * sizeof *nt);
        if (!nt)
            return -ENOMEM;
        s->t = nt;
        s->cap = c;
    }
    memmove(&s->t[i + 1], &s->t[i], (s->n - i) * sizeof *s->t);
    s->t[i] = *loc;
    s->n++;
    s->bytes += loc->len;
    b->segs[loc->seg].live += REC_BYTES(loc->len);
    b->ntracts++;
    b->live += loc->len;
    return 0;
}

/* REQUIRES: b->mu held. Drops tracts [first, end) of the set (end 0: all
 * from first); an emptied set goes. */
static void index_remove(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t first, uint32_t end)
{
    assert(xt_mutex_held(&b->mu));
    struct bset **pp = &b->buck[bucket_of(fsid, set)];
    while (*pp && !((*pp)->fsid == fsid && (*pp)->set == set))
        pp = &(*pp)->next;
    struct bset *s = *pp;
    if (!s)
        return;
    size_t i = lower(s, first), j = end ? lower(s, end) : s->n;
    for (size_t k = i; k < j; k++) {
        b->dead += s->t[k].len;
        b->live -= s->t[k].len;
        s->bytes -= s->t[k].len;
        b->segs[s->t[k].seg].live -= REC_BYTES(s->t[k].len);
        b->ntracts--;
    }
    memmove(&s->t[i], &s->t[j], (s->n - j) * sizeof *s->t);
    s->n -= j - i;
    if (s->n == 0) {
        *pp = s->next;
        xt_free(s->t);
        xt_free(s);
    }
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void seg_path(const mdsl_blob *b, uint32_t segno, char *out, size_t cap)
{
    snprintf(out, cap, "%s/bseg-%08" PRIu32, b->dir, segno);
}

static void hdr_encode(uint8_t *p, uint8_t type, uint32_t fsid, uint32_t tract, uint64_t set,
                       uint32_t len, uint64_t csum)
{
    memset(p, 0, MDSL_BLOB_HDR_SIZE);
    put32(p, MDSL_BLOB_MAGIC);
    p[4] = type;
    put32(p + 8, fsid);
    put32(p + 12, tract);
    put64(p + 16, set);
    put32(p + 24, len);
    put32(p + 28, (uint32_t)XXH3_64bits(p, 28));
    put64(p + 32, csum);
}

struct rec {
    uint8_t type;
    uint32_t fsid, tract, len;
    uint64_t set, csum;
};

/* 0, or -EBADMSG for bytes that are no header. */
static int hdr_decode(const uint8_t *p, struct rec *r)
{
    if (get32(p) != MDSL_BLOB_MAGIC || get32(p + 28) != (uint32_t)XXH3_64bits(p, 28))
        return -EBADMSG;
    r->type = p[4];
    r->fsid = get32(p + 8);
    r->tract = get32(p + 12);
    r->set = get64(p + 16);
    r->len = get32(p + 24);
    r->csum = get64(p + 32);
    if (r->type == MDSL_BLOB_REC_TRACT && r->len > MDSL_BLOB_TRACT_MAX)
        return -EBADMSG;
    if (r->type != MDSL_BLOB_REC_TRACT && r->type != MDSL_BLOB_REC_REMOVE)
        return -EBADMSG;
    return 0;
}

/* REQUIRES: b->mu held. Appends an open file to the segment table. */
static int segs_push(mdsl_blob *b, mdsl_file *f)
{
    assert(xt_mutex_held(&b->mu));
    if (b->nsegs == b->capsegs) {
        uint32_t c = b->capsegs ? 2 * b->capsegs : 16;
        struct bseg *n = xt_realloc(b->segs, c * sizeof *n);
        if (!n)
            return -ENOMEM;
        b->segs = n;
        b->capsegs = c;
    }
    struct bfile *bf = xt_calloc(1, sizeof *bf);
    if (!bf)
        return -ENOMEM;
    bf->f = f;
    bf->refs = 1;
    b->segs[b->nsegs++] = (struct bseg){ .bf = bf };
    return 0;
}

/* REQUIRES: b->mu held. Drops a reference; the file when it was the last
 * (the caller closes it with bf_close after dropping mu), else NULL. */
static struct bfile *bf_unref(mdsl_blob *b, struct bfile *bf)
{
    assert(xt_mutex_held(&b->mu) && bf->refs > 0);
    return --bf->refs == 0 ? bf : NULL;
}

static void bf_close(mdsl_blob *b, struct bfile *bf)
{
    if (!bf)
        return;
    mdsl_io_close(b->io, bf->f);
    xt_free(bf);
}

/* Replays segment segno (open as f) into the index; a bad header or a
 * record cut short ends it: the last segment is cut there (a torn append,
 * invariant (2): none of it was acknowledged), an earlier one is logged. */
static int replay(mdsl_blob *b, uint32_t segno, mdsl_file *f, bool last)
{
    uint64_t size = 0, off = 0;
    int rc = mdsl_io_size(b->io, f, &size);
    if (rc < 0)
        return rc;
    while (off + MDSL_BLOB_HDR_SIZE <= size) {
        uint8_t h[MDSL_BLOB_HDR_SIZE];
        struct rec r;
        if ((rc = mdsl_io_pread_full(b->io, f, off, h, sizeof h)) < 0)
            return rc;
        if (hdr_decode(h, &r) < 0)
            break;
        uint64_t plen = r.type == MDSL_BLOB_REC_TRACT ? r.len : 0;
        if (off + MDSL_BLOB_HDR_SIZE + plen > size)
            break;
        pthread_mutex_lock(&b->mu);
        if (r.type == MDSL_BLOB_REC_TRACT) {
            struct tloc loc = { r.tract, segno, r.len, off + MDSL_BLOB_HDR_SIZE, r.csum };
            rc = index_put(b, r.fsid, r.set, &loc, b->opened_ns);
        } else {
            index_remove(b, r.fsid, r.set, r.tract, r.len);
            b->segs[segno].tombs += MDSL_BLOB_HDR_SIZE;
        }
        pthread_mutex_unlock(&b->mu);
        if (rc < 0)
            return rc;
        off += MDSL_BLOB_HDR_SIZE + plen;
    }
    if (off < size) {
        if (!last) {
            XT_ERR("blob: segment %" PRIu32 " has %" PRIu64 " unreadable bytes at %" PRIu64
                   ": the tracts there are lost", segno, size - off, off);
        } else {
            XT_WARN("blob: cutting the torn tail of segment %" PRIu32 " at %" PRIu64
                    " (%" PRIu64 " bytes)", segno, off, size - off);
            if ((rc = mdsl_io_truncate(b->io, f, off)) < 0)
                return rc;
        }
    }
    if (last)
        b->tail = off;
    pthread_mutex_lock(&b->mu);
    b->bytes += last ? off : size;
    b->segs[segno].size = last ? off : size;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

struct scan { uint32_t max; bool any; bool gc_left; };

static int scan_cb(const char *name, bool is_dir, void *arg)
{
    struct scan *s = arg;
    unsigned n;
    char tail;
    if (!is_dir && sscanf(name, "bseg-%8u%c", &n, &tail) == 1 && strlen(name) == 13) {
        if (!s->any || n > s->max)
            s->max = n;
        s->any = true;
    } else if (!is_dir && sscanf(name, "bseg-%8u%c", &n, &tail) == 2 && tail == '.' &&
               strlen(name) == 16 && !strcmp(name + 13, ".gc")) {
        s->gc_left = true;
    }
    return 0;
}

static void gc_path(const mdsl_blob *b, uint32_t segno, char *out, size_t cap)
{
    snprintf(out, cap, "%s/bseg-%08" PRIu32 ".gc", b->dir, segno);
}

/* Opens (create) segment segno and adds it to the table. */
static int seg_open(mdsl_blob *b, uint32_t segno, bool create, mdsl_file **out)
{
    char p[4200];
    seg_path(b, segno, p, sizeof p);
    int rc = mdsl_io_open(b->io, p, create, out);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&b->mu);
    assert(b->nsegs == segno);
    rc = segs_push(b, *out);
    pthread_mutex_unlock(&b->mu);
    if (rc < 0)
        mdsl_io_close(b->io, *out);
    return rc;
}

/* ---- GC ---------------------------------------------------------------- */

struct moved {
    uint32_t fsid, tract;
    uint64_t set, from, to; /* payload offsets in the old and the new file */
};

/* REQUIRES: b->mu held. The index entry of the tract whose payload is at
 * (seg, off), or NULL when the index points elsewhere (the record is dead). */
static struct tloc *live_at(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t tract,
                            uint32_t seg, uint64_t off)
{
    assert(xt_mutex_held(&b->mu));
    struct bset *s = set_find(b, fsid, set, false);
    size_t i = s ? lower(s, tract) : 0;
    bool live = s && i < s->n && s->t[i].tract == tract && s->t[i].seg == seg &&
                s->t[i].off == off;
    return live ? &s->t[i] : NULL;
}

/* Copies what segment k must keep (the file comment) from old (size bytes)
 * into nf. *mv, *nmv: the tract records copied (xt_malloc'd); *nsize: the
 * new file's bytes; *dropped: payload bytes left behind. The copies are
 * fdatasync'd when it returns 0. */
static int copy_live(mdsl_blob *b, uint32_t k, mdsl_file *old, uint64_t size, mdsl_file *nf,
                     struct moved **mv, size_t *nmv, uint64_t *nsize, uint64_t *dropped)
{
    size_t cap = 0;
    uint64_t off = 0, noff = 0;
    int rc = 0;
    while (rc == 0 && off + MDSL_BLOB_HDR_SIZE <= size) {
        uint8_t h[MDSL_BLOB_HDR_SIZE];
        struct rec r;
        if ((rc = mdsl_io_pread_full(b->io, old, off, h, sizeof h)) < 0)
            break;
        if (hdr_decode(h, &r) < 0) {
            /* Unreadable bytes in a sealed segment (replay logged them):
             * leave the segment as it is rather than guess. */
            XT_WARN_RL(60000, "blob: GC of segment %" PRIu32 " stops at %" PRIu64
                       ": no record there", k, off);
            rc = -EBADMSG;
            break;
        }
        bool tract = r.type == MDSL_BLOB_REC_TRACT;
        uint64_t plen = tract ? r.len : 0;
        if (off + MDSL_BLOB_HDR_SIZE + plen > size) {
            rc = -EBADMSG;
            break;
        }
        pthread_mutex_lock(&b->mu);
        bool keep = tract ? live_at(b, r.fsid, r.set, r.tract, k, off + MDSL_BLOB_HDR_SIZE) != NULL
                          : k > 0;
        pthread_mutex_unlock(&b->mu);
        if (!keep) {
            *dropped += plen;
            off += MDSL_BLOB_HDR_SIZE + plen;
            continue;
        }
        void *p = plen ? xt_malloc(plen) : NULL;
        if (plen && !p) {
            rc = -ENOMEM;
            break;
        }
        if (plen)
            rc = mdsl_io_pread_full(b->io, old, off + MDSL_BLOB_HDR_SIZE, p, plen);
        if (rc == 0) {
            struct mdsl_io_wr w[2] = { { nf, noff, h, MDSL_BLOB_HDR_SIZE },
                                       { nf, noff + MDSL_BLOB_HDR_SIZE, p, (uint32_t)plen } };
            rc = mdsl_io_write(b->io, w, plen ? 2 : 1, NULL, 0, NULL);
        }
        xt_free(p);
        if (rc == 0 && tract && *nmv == cap) {
            size_t c = cap ? 2 * cap : 256;
            struct moved *n = xt_realloc(*mv, c * sizeof *n);
            if (!n)
                rc = -ENOMEM;
            else
                *mv = n, cap = c;
        }
        if (rc < 0)
            break;
        if (tract)
            (*mv)[(*nmv)++] = (struct moved){ r.fsid, r.tract, r.set, off + MDSL_BLOB_HDR_SIZE,
                                              noff + MDSL_BLOB_HDR_SIZE };
        off += MDSL_BLOB_HDR_SIZE + plen;
        noff += MDSL_BLOB_HDR_SIZE + plen;
    }
    if (rc == 0)
        rc = mdsl_io_sync(b->io, nf);
    *nsize = noff;
    return rc;
}

/* Rewrites sealed segment k (the file comment). 0, or -errno with the
 * segment left as it was. */
static int compact(mdsl_blob *b, uint32_t k)
{
    pthread_mutex_lock(&b->mu);
    assert(k + 1 < b->nsegs); /* sealed: nothing appends to it */
    struct bfile *old = b->segs[k].bf;
    old->refs++;
    uint64_t size = b->segs[k].size;
    pthread_mutex_unlock(&b->mu);

    char p[4200], tmp[4200];
    seg_path(b, k, p, sizeof p);
    gc_path(b, k, tmp, sizeof tmp);
    struct moved *mv = NULL;
    size_t nmv = 0;
    uint64_t nsize = 0, dropped = 0;
    mdsl_file *nf = NULL;
    struct bfile *nbf = NULL;
    int rc = mdsl_io_unlink(b->io, tmp);
    rc = rc == -ENOENT ? 0 : rc;
    if (rc == 0)
        rc = mdsl_io_open(b->io, tmp, true, &nf);
    if (rc == 0)
        rc = copy_live(b, k, old->f, size, nf, &mv, &nmv, &nsize, &dropped);
    if (rc == 0 && !(nbf = xt_calloc(1, sizeof *nbf)))
        rc = -ENOMEM;
    XT_CRASH_POINT("mdsl.blob_gc.copied");
    if (rc == 0)
        rc = mdsl_io_rename(b->io, tmp, p); /* the old file goes with its last fd */
    XT_CRASH_POINT("mdsl.blob_gc.renamed");
    if (rc < 0) {
        XT_WARN_RL(60000, "blob: GC of segment %" PRIu32 " failed (%s): the segment stays", k,
                   strerror(-rc));
        mdsl_io_close(b->io, nf);
        if (nf)
            (void)mdsl_io_unlink(b->io, tmp);
        xt_free(nbf);
        xt_free(mv);
        pthread_mutex_lock(&b->mu);
        struct bfile *last = bf_unref(b, old);
        pthread_mutex_unlock(&b->mu);
        bf_close(b, last);
        return rc;
    }
    nbf->f = nf;
    nbf->refs = 1;
    pthread_mutex_lock(&b->mu);
    for (size_t i = 0; i < nmv; i++) {
        /* A tract replaced or removed during the copy points elsewhere:
         * its copy is dead in the new file, as the original was. */
        struct tloc *l = live_at(b, mv[i].fsid, mv[i].set, mv[i].tract, k, mv[i].from);
        if (l)
            l->off = mv[i].to;
    }
    b->segs[k].bf = nbf;
    b->segs[k].size = nsize;
    if (k == 0)
        b->segs[k].tombs = 0;
    b->bytes -= size - nsize;
    b->dead -= XT_MIN(b->dead, dropped);
    b->gc_segments++;
    b->gc_bytes += size - nsize;
    assert(old->refs >= 2); /* the table's and ours */
    old->refs--;            /* the table's */
    struct bfile *last = bf_unref(b, old);
    pthread_mutex_unlock(&b->mu);
    bf_close(b, last);
    xt_free(mv);
    XT_INFO("blob: GC rewrote segment %" PRIu32 ": %" PRIu64 " -> %" PRIu64 " bytes", k, size,
            nsize);
    return 0;
}

int mdsl_blob_gc(mdsl_blob *b)
{
    bool idle = false;
    if (!atomic_compare_exchange_strong(&b->gc_running, &idle, true))
        return -EBUSY;
    int done = 0, rc = 0;
    pthread_mutex_lock(&b->mu);
    uint32_t sealed = b->nsegs - 1;
    pthread_mutex_unlock(&b->mu);
    for (uint32_t k = 0; k < sealed; k++) {
        if (b->gc && xt_worker_stopping(b->gc))
            break;
        pthread_mutex_lock(&b->mu);
        const struct bseg *g = &b->segs[k];
        uint64_t keep = g->live + (k > 0 ? g->tombs : 0);
        bool due = keep < g->size && (double)keep < b->gc_ratio * (double)g->size;
        pthread_mutex_unlock(&b->mu);
        int e = due ? compact(b, k) : 1;
        if (e == 0)
            done++;
        else if (e < 0 && rc == 0)
            rc = e; /* the others still go */
    }
    atomic_store(&b->gc_running, false);
    return rc < 0 ? rc : done;
}

static uint64_t gc_step(xt_worker *w, void *arg)
{
    (void)w;
    mdsl_blob *b = arg;
    int rc = mdsl_blob_gc(b);
    if (rc < 0 && rc != -EBUSY)
        XT_WARN_RL(60000, "blob: GC pass stopped: %s", strerror(-rc));
    return b->gc_interval_ms;
}

int mdsl_blob_open(const struct mdsl_blob_opts *o, mdsl_blob **out)
{
    *out = NULL;
    mdsl_blob *b = xt_calloc(1, sizeof *b);
    if (!b)
        return -ENOMEM;
    b->io = o->io;
    b->seg_size = o->seg_size ? o->seg_size : (UINT64_C(256) << 20);
    b->opened_ns = (int64_t)xt_now_ns();
    pthread_mutex_init(&b->app_mu, NULL);
    pthread_mutex_init(&b->mu, NULL);
    int rc = (b->dir = xt_strdup(o->dir)) ? mdsl_io_mkdir(b->io, b->dir) : -ENOMEM;
    b->gc_ratio = o->gc_live_ratio > 0 ? o->gc_live_ratio : 0.5;
    struct scan s = { 0, false, false };
    if (rc == 0)
        rc = mdsl_io_list(b->io, b->dir, scan_cb, &s);
    /* Segment numbers are dense from 0: a missing one is an error. */
    uint32_t n = s.any ? s.max + 1 : 1;
    /* A rewrite a crash cut before its rename: the segment itself is whole. */
    for (uint32_t i = 0; i < n && rc == 0 && s.gc_left; i++) {
        char p[4200];
        gc_path(b, i, p, sizeof p);
        int u = mdsl_io_unlink(b->io, p);
        if (u == 0)
            XT_WARN("blob: removed %s, a GC rewrite cut short", p);
        else if (u != -ENOENT)
            rc = u;
    }
    for (uint32_t i = 0; i < n && rc == 0; i++) {
        mdsl_file *f = NULL;
        rc = seg_open(b, i, i + 1 == n, &f);
        if (rc == -ENOENT)
            XT_ERR("blob: segment %" PRIu32 " of %s is missing", i, b->dir);
        if (rc == 0)
            rc = replay(b, i, f, i + 1 == n);
    }
    if (rc < 0) {
        XT_ERR("blob: cannot open the blob store in %s: %s", o->dir, strerror(-rc));
        mdsl_blob_close(b);
        return rc;
    }
    if (o->gc_interval_ms) {
        struct xt_worker_opts wo = { .name = "mdsl-blob-gc", .step = gc_step, .arg = b,
                                     .first_ms = o->gc_interval_ms };
        b->gc_interval_ms = o->gc_interval_ms;
        if ((rc = xt_worker_start(&wo, &b->gc)) < 0) {
            mdsl_blob_close(b);
            return rc;
        }
    }
    XT_INFO("blob: %" PRIu64 " tracts (%" PRIu64 " bytes) in %" PRIu32 " segments of %s",
            b->ntracts, b->live, b->nsegs, b->dir);
    *out = b;
    return 0;
}

void mdsl_blob_close(mdsl_blob *b)
{
    if (!b)
        return;
    xt_worker_stop(b->gc);
    for (uint32_t i = 0; i < b->nsegs; i++) {
        assert(b->segs[i].bf->refs == 1); /* no reader left */
        bf_close(b, b->segs[i].bf);
    }
    for (size_t k = 0; k < NBUCK; k++)
        for (struct bset *s = b->buck[k], *nx; s; s = nx) {
            nx = s->next;
            xt_free(s->t);
            xt_free(s);
        }
    xt_free(b->segs);
    xt_free(b->dir);
    pthread_mutex_destroy(&b->mu);
    pthread_mutex_destroy(&b->app_mu);
    xt_free(b);
}

/* Appends one record (header h, payload p of plen bytes) durably.
 * *segno, *off: where its payload went. REQUIRES: b->app_mu held. */
static int append(mdsl_blob *b, const uint8_t *h, const void *p, uint32_t plen, uint32_t *segno,
                  uint64_t *off)
{
    assert(xt_mutex_held(&b->app_mu));
    if (b->failed)
        return b->failed;
    uint64_t total = MDSL_BLOB_HDR_SIZE + (uint64_t)plen;
    pthread_mutex_lock(&b->mu);
    uint32_t cur = b->nsegs - 1;
    mdsl_file *f = b->segs[cur].bf->f; /* the active segment: GC never swaps it */
    pthread_mutex_unlock(&b->mu);
    int rc = 0;
    if (b->tail > 0 && b->tail + total > b->seg_size) {
        if ((rc = seg_open(b, cur + 1, true, &f)) < 0)
            return rc;
        cur++;
        b->tail = 0;
    }
    struct mdsl_io_wr w[2] = { { f, b->tail, h, MDSL_BLOB_HDR_SIZE },
                               { f, b->tail + MDSL_BLOB_HDR_SIZE, p, plen } };
    bool sync_failed = false;
    rc = mdsl_io_write(b->io, w, plen ? 2 : 1, &f, 1, &sync_failed);
    if (rc < 0) {
        /* Invariant (4). A failed write leaves bytes a replay may take
         * for a torn tail; a failed fdatasync leaves the file unknown. */
        XT_ERR("blob: %s of segment %" PRIu32 " failed: %s; the blob store takes no more "
               "writes", sync_failed ? "fdatasync" : "append", cur, strerror(-rc));
        pthread_mutex_lock(&b->mu);
        b->failed = rc;
        pthread_mutex_unlock(&b->mu);
        return rc;
    }
    *segno = cur;
    *off = b->tail + MDSL_BLOB_HDR_SIZE;
    b->tail += total;
    pthread_mutex_lock(&b->mu);
    b->bytes += total;
    b->segs[cur].size += total;
    pthread_mutex_unlock(&b->mu);
    return 0;
}

int mdsl_blob_put(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t tract, const void *data,
                  uint32_t len)
{
    assert(len <= MDSL_BLOB_TRACT_MAX && (data || !len)); /* REQUIRES */
    uint8_t h[MDSL_BLOB_HDR_SIZE];
    uint64_t csum = XXH3_64bits(data, len);
    hdr_encode(h, MDSL_BLOB_REC_TRACT, fsid, tract, set, len, csum);
    pthread_mutex_lock(&b->app_mu);
    uint32_t segno = 0;
    uint64_t off = 0;
    int rc = append(b, h, data, len, &segno, &off);
    if (rc == 0) {
        struct tloc loc = { tract, segno, len, off, csum };
        pthread_mutex_lock(&b->mu);
        rc = index_put(b, fsid, set, &loc, (int64_t)xt_now_ns());
        pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_unlock(&b->app_mu);
    return rc;
}

int mdsl_blob_get(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t tract, void **data,
                  uint32_t *len)
{
    *data = NULL;
    *len = 0;
    pthread_mutex_lock(&b->mu);
    struct bset *s = set_find(b, fsid, set, false);
    size_t i = s ? lower(s, tract) : 0;
    bool found = s && i < s->n && s->t[i].tract == tract;
    struct tloc loc = found ? s->t[i] : (struct tloc){ 0 };
    struct bfile *bf = found && loc.len ? b->segs[loc.seg].bf : NULL;
    if (bf)
        bf->refs++; /* read after mu: GC may swap the file meanwhile */
    pthread_mutex_unlock(&b->mu);
    if (!found)
        return -ENOENT;
    if (loc.len == 0)
        return XXH3_64bits(NULL, 0) == loc.csum ? 0 : -EBADMSG;
    void *buf = xt_malloc(loc.len);
    int rc = buf ? mdsl_io_pread_full(b->io, bf->f, loc.off, buf, loc.len) : -ENOMEM;
    pthread_mutex_lock(&b->mu);
    struct bfile *last = bf_unref(b, bf);
    pthread_mutex_unlock(&b->mu);
    bf_close(b, last);
    if (!buf)
        return -ENOMEM;
    if (rc == 0 && XXH3_64bits(buf, loc.len) != loc.csum) {
        XT_ERR("blob: tract %" PRIu32 " of set %016" PRIx64 " (fs %" PRIu32 ") in segment %"
               PRIu32 " at %" PRIu64 ": XXH3 mismatch, answering EBADMSG", tract, set, fsid,
               loc.seg, loc.off);
        rc = -EBADMSG;
    }
    if (rc < 0) {
        xt_free(buf);
        return rc;
    }
    *data = buf;
    *len = loc.len;
    return 0;
}

int mdsl_blob_remove(mdsl_blob *b, uint32_t fsid, uint64_t set, uint32_t first, uint32_t end)
{
    uint8_t h[MDSL_BLOB_HDR_SIZE];
    hdr_encode(h, MDSL_BLOB_REC_REMOVE, fsid, first, set, end, 0);
    pthread_mutex_lock(&b->app_mu);
    uint32_t segno = 0;
    uint64_t off = 0;
    int rc = append(b, h, NULL, 0, &segno, &off);
    if (rc == 0) {
        pthread_mutex_lock(&b->mu);
        index_remove(b, fsid, set, first, end);
        b->segs[segno].tombs += MDSL_BLOB_HDR_SIZE;
        pthread_mutex_unlock(&b->mu);
    }
    pthread_mutex_unlock(&b->app_mu);
    if (rc == 0 && b->gc)
        xt_worker_wake(b->gc); /* space may be free to take back */
    return rc;
}

void mdsl_blob_stat(mdsl_blob *b, struct mdsl_blob_stat *st)
{
    pthread_mutex_lock(&b->mu);
    *st = (struct mdsl_blob_stat){ .segments = b->nsegs, .bytes = b->bytes,
                                   .tracts = b->ntracts, .live_bytes = b->live,
                                   .dead_bytes = b->dead, .failed = b->failed,
                                   .gc_segments = b->gc_segments, .gc_bytes = b->gc_bytes };
    pthread_mutex_unlock(&b->mu);
}

static struct xt_tract_set set_info(const struct bset *s)
{
    return (struct xt_tract_set){ s->set, s->n, s->bytes, s->mtime_ns };
}

int mdsl_blob_touch(mdsl_blob *b, uint32_t fsid, uint64_t set)
{
    int64_t now = (int64_t)xt_now_ns();
    pthread_mutex_lock(&b->mu);
    struct bset *s = set_find(b, fsid, set, false);
    if (s)
        s->mtime_ns = XT_MAX(s->mtime_ns, now);
    pthread_mutex_unlock(&b->mu);
    return 0;
}

int mdsl_blob_set_stat(mdsl_blob *b, uint32_t fsid, uint64_t set, struct xt_tract_set *out)
{
    pthread_mutex_lock(&b->mu);
    struct bset *s = set_find(b, fsid, set, false);
    if (s)
        *out = set_info(s);
    pthread_mutex_unlock(&b->mu);
    return s ? 0 : -ENOENT;
}

int mdsl_blob_list(mdsl_blob *b, uint32_t fsid, uint64_t cookie, uint32_t max,
                   struct xt_tract_list *out)
{
    memset(out, 0, sizeof *out);
    if (max == 0 || cookie >= NBUCK)
        return -EINVAL;
    size_t cap = 0;
    uint64_t k = cookie;
    int rc = 0;
    pthread_mutex_lock(&b->mu);
    /* Whole buckets: the cookie is the next bucket, so a page may pass max
     * by the rest of one chain (a few sets). */
    for (; k < NBUCK && out->n < max && rc == 0; k++)
        for (struct bset *s = b->buck[k]; s && rc == 0; s = s->next) {
            if (s->fsid != fsid)
                continue;
            if (out->n == cap) {
                size_t c = cap ? 2 * cap : XT_MIN((size_t)max, (size_t)256);
                struct xt_tract_set *n = xt_realloc(out->sets, c * sizeof *n);
                if (!n) {
                    rc = -ENOMEM;
                    break;
                }
                out->sets = n;
                cap = c;
            }
            out->sets[out->n++] = set_info(s);
        }
    pthread_mutex_unlock(&b->mu);
    if (rc < 0) {
        xt_free(out->sets);
        memset(out, 0, sizeof *out);
        return rc;
    }
    out->end = k == NBUCK;
    out->cookie = out->end ? 0 : k;
    return 0;
}

int mdsl_blob_keys(mdsl_blob *b, uint32_t *cookie, size_t max, struct mdsl_blob_key **out,
                   size_t *n)
{
    *out = NULL;
    *n = 0;
    if (max == 0 || *cookie >= NBUCK)
        return -EINVAL;
    size_t cap = 0;
    uint32_t k = *cookie;
    int rc = 0;
    pthread_mutex_lock(&b->mu);
    for (; k < NBUCK && *n < max && rc == 0; k++)
        for (struct bset *s = b->buck[k]; s && rc == 0; s = s->next)
            for (size_t i = 0; i < s->n; i++) {
                if (*n == cap) {
                    size_t c = cap ? 2 * cap : 256;
                    struct mdsl_blob_key *v = xt_realloc(*out, c * sizeof *v);
                    if (!v) {
                        rc = -ENOMEM;
                        break;
                    }
                    *out = v;
                    cap = c;
                }
                (*out)[(*n)++] = (struct mdsl_blob_key){ s->fsid, s->t[i].tract, s->set,
                                                         s->t[i].len };
            }
    pthread_mutex_unlock(&b->mu);
    if (rc < 0) {
        xt_free(*out);
        *out = NULL;
        *n = 0;
        return rc;
    }
    *cookie = k;
    return k < NBUCK;
}
