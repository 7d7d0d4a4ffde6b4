/*
 * mdsl_io_fault.c -- the fault-injecting mdsl_io backend: wraps another
 * backend and (a) fails the N-th op with -EIO/-ENOSPC (countdown, SQLite's
 * faultsimStep), (b) simulates power loss (SQLite's test6.c, LevelDB's
 * fault-injection env): it remembers, per path, every write not yet made
 * durable by a sync of that file together with the bytes it replaced; a
 * crash then keeps, drops or corrupts each of them at random.
 *
 * Invariants:
 *  (1) All fault state is protected by f->mu; the base backend is called
 *      with f->mu held, which serialises this test-only backend and keeps
 *      "bytes replaced" consistent with the write that replaced them.
 *  (2) A path's record (struct track) outlives its handles: a file closed
 *      with unsynced writes can still lose them at a crash.
 *  (3) A successful sync of a file empties its pending list and sets its
 *      synced size; a failed sync changes nothing (the data stays volatile).
 *  (4) truncate, unlink, rename and rmdir are durable at once (mdsl_io.h invariant 4);
 *      truncate clips pending writes past the new size.
 *  (5) After a crash every op fails with -EIO until mdsl_io_fault_reset().
 */
#include "mdsl_io.h"

#include <pthread.h>
#include <string.h>

struct pend {
    struct pend *next;  /* newer first */
    uint64_t off;
    size_t len;
    uint8_t *old;       /* bytes replaced (zeros past the old end) */
};

struct track {
    struct track *next;
    char *path;
    uint64_t synced_size;
    struct pend *pend;
};

struct mdsl_file {
    mdsl_file *base;
    struct track *t;
};

struct fault_io {
    struct mdsl_io base;
    mdsl_io *inner;
    pthread_mutex_t mu;
    /* all below protected by mu */
    uint64_t rng;
    long ops;
    long countdown;     /* -1 disarmed */
    int err;
    bool sticky, tripped;
    bool powerloss, crashed;
    struct track *tracks;
};

static uint64_t rnd(struct fault_io *f)
{
    uint64_t x = f->rng;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    f->rng = x;
    return x * UINT64_C(2685821657736338717);
}

/* One countable op: returns the error to inject or 0. */
static int step(struct fault_io *f)
{
    f->ops++;
    if (f->crashed)
        return -EIO;
    if (f->tripped && f->sticky)
        return f->err;
    if (f->countdown < 0)
        return 0;
    if (f->countdown-- == 0) {
        f->tripped = true;
        return f->err;
    }
    return 0;
}

static struct track *track_get(struct fault_io *f, const char *path, bool create)
{
    for (struct track *t = f->tracks; t; t = t->next)
        if (!strcmp(t->path, path))
            return t;
    if (!create)
        return NULL;
    struct track *t = xt_calloc(1, sizeof *t);
    if (!t || !(t->path = xt_strdup(path))) {
        xt_free(t);
        return NULL;
    }
    t->next = f->tracks;
    f->tracks = t;
    return t;
}

static void pend_free_all(struct track *t)
{
    while (t->pend) {
        struct pend *p = t->pend;
        t->pend = p->next;
        xt_free(p->old);
        xt_free(p);
    }
}

static int fl_open(mdsl_io *io, const char *path, bool create, mdsl_file **out)
{
    struct fault_io *f = (struct fault_io *)io;
    mdsl_file *h = xt_calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    pthread_mutex_lock(&f->mu);
    int rc = create ? step(f) : (f->ops++, f->crashed ? -EIO : 0);
    if (rc == 0)
        rc = mdsl_io_open(f->inner, path, create, &h->base);
    if (rc == 0 && !(h->t = track_get(f, path, true))) {
        mdsl_io_close(f->inner, h->base);
        rc = -ENOMEM;
    }
    if (rc == 0 && h->t->pend == NULL)
        (void)mdsl_io_size(f->inner, h->base, &h->t->synced_size);
    pthread_mutex_unlock(&f->mu);
    if (rc < 0) {
        xt_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

static void fl_close(mdsl_io *io, mdsl_file *h)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    mdsl_io_close(f->inner, h->base);
    pthread_mutex_unlock(&f->mu);
    xt_free(h);
}

/* Remember what a write is about to replace (power-loss mode). */
static int remember(struct fault_io *f, mdsl_file *h, uint64_t off, size_t len)
{
    struct pend *p = xt_calloc(1, sizeof *p);
    uint8_t *old = xt_calloc(1, len ? len : 1);
    if (!p || !old) {
        xt_free(p);
        xt_free(old);
        return -ENOMEM;
    }
    long n = mdsl_io_read(f->inner, h->base, off, old, len);
    if (n < 0) {
        xt_free(p);
        xt_free(old);
        return (int)n;
    }
    p->off = off;
    p->len = len;
    p->old = old;
    p->next = h->t->pend;
    h->t->pend = p;
    return 0;
}

static int do_sync(struct fault_io *f, mdsl_file *h)
{
    int rc = step(f);
    if (rc == 0)
        rc = mdsl_io_sync(f->inner, h->base);
    if (rc == 0) {
        pend_free_all(h->t);
        rc = mdsl_io_size(f->inner, h->base, &h->t->synced_size);
    }
    return rc;
}

static int fl_write(mdsl_io *io, const struct mdsl_io_wr *w, size_t n,
                    mdsl_file *const *sync, size_t nsync, bool *sync_failed)
{
    struct fault_io *f = (struct fault_io *)io;
    int rc = 0;
    pthread_mutex_lock(&f->mu);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = step(f);
        if (rc == 0 && f->powerloss)
            rc = remember(f, w[i].f, w[i].off, w[i].len);
        if (rc == 0) {
            struct mdsl_io_wr bw = w[i];
            bw.f = w[i].f->base;
            rc = mdsl_io_write(f->inner, &bw, 1, NULL, 0, NULL);
        }
    }
    for (size_t i = 0; i < nsync && rc == 0; i++)
        if ((rc = do_sync(f, sync[i])) < 0)
            *sync_failed = true;
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static long fl_read(mdsl_io *io, mdsl_file *h, uint64_t off, void *buf, size_t len)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    long rc = step(f);
    if (rc == 0)
        rc = mdsl_io_read(f->inner, h->base, off, buf, len);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fl_sync(mdsl_io *io, mdsl_file *h)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    int rc = do_sync(f, h);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static void clip(struct track *t, uint64_t size)
{
    for (struct pend **pp = &t->pend; *pp;) {
        struct pend *p = *pp;
        if (p->off >= size) {
            *pp = p->next;
            xt_free(p->old);
            xt_free(p);
            continue;
        }
        if (p->off + p->len > size)
            p->len = (size_t)(size - p->off);
        pp = &p->next;
    }
    if (t->synced_size > size)
        t->synced_size = size;
}

static int fl_truncate(mdsl_io *io, mdsl_file *h, uint64_t size)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    int rc = step(f);
    if (rc == 0)
        rc = mdsl_io_truncate(f->inner, h->base, size);
    if (rc == 0)
        clip(h->t, size);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fl_size(mdsl_io *io, mdsl_file *h, uint64_t *out)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    int rc = f->crashed ? -EIO : mdsl_io_size(f->inner, h->base, out);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fl_unlink(mdsl_io *io, const char *path)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    int rc = step(f);
    if (rc == 0)
        rc = mdsl_io_unlink(f->inner, path);
    if (rc == 0) {
        struct track *t = track_get(f, path, false);
        if (t) {
            pend_free_all(t);
            t->synced_size = 0;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fl_mkdir(mdsl_io *io, const char *path)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    int rc = step(f);
    if (rc == 0)
        rc = mdsl_io_mkdir(f->inner, path);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* The tracks of the renamed paths follow them (invariant 2): a later crash
 * still finds their unsynced writes. */
static int fl_rename(mdsl_io *io, const char *from, const char *to)
{
    struct fault_io *f = (struct fault_io *)io;
    size_t fl = strlen(from), tl = strlen(to);
    pthread_mutex_lock(&f->mu);
    int rc = step(f);
    if (rc == 0)
        rc = mdsl_io_rename(f->inner, from, to);
    for (struct track *t = f->tracks; t && rc == 0; t = t->next) {
        if (strncmp(t->path, from, fl) || (t->path[fl] != '\0' && t->path[fl] != '/'))
            continue;
        size_t rest = strlen(t->path) - fl;
        char *np = xt_malloc(tl + rest + 1);
        if (!np)
            continue; /* keeps the old name: only this test backend's crash misses it */
        memcpy(np, to, tl);
        memcpy(np + tl, t->path + fl, rest + 1);
        xt_free(t->path);
        t->path = np;
    }
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fl_rmdir(mdsl_io *io, const char *path)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    int rc = step(f);
    if (rc == 0)
        rc = mdsl_io_rmdir(f->inner, path);
    pthread_mutex_unlock(&f->mu);
    return rc;
}

static int fl_list(mdsl_io *io, const char *dir, mdsl_io_list_cb cb, void *arg)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    bool crashed = f->crashed;
    pthread_mutex_unlock(&f->mu);
    return crashed ? -EIO : mdsl_io_list(f->inner, dir, cb, arg);
}

static void fl_destroy(mdsl_io *io)
{
    struct fault_io *f = (struct fault_io *)io;
    while (f->tracks) {
        struct track *t = f->tracks;
        f->tracks = t->next;
        pend_free_all(t);
        xt_free(t->path);
        xt_free(t);
    }
    pthread_mutex_destroy(&f->mu);
    xt_free(f);
}

static int fl_space(mdsl_io *io, const char *path, uint64_t *avail, uint64_t *total)
{
    return mdsl_io_space(((struct fault_io *)io)->inner, path, avail, total);
}

static const struct mdsl_io_ops fault_ops = {
    .name = "fault",
    .open = fl_open,
    .close = fl_close,
    .write = fl_write,
    .read = fl_read,
    .sync = fl_sync,
    .truncate = fl_truncate,
    .size = fl_size,
    .unlink = fl_unlink,
    .mkdir = fl_mkdir,
    .rename = fl_rename,
    .rmdir = fl_rmdir,
    .list = fl_list,
    .destroy = fl_destroy,
    .space = fl_space,
};

int mdsl_io_fault_new(mdsl_io *base, uint64_t seed, mdsl_io **out)
{
    struct fault_io *f = xt_calloc(1, sizeof *f);
    if (!f)
        return -ENOMEM;
    f->base.ops = &fault_ops;
    f->inner = base;
    f->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
    f->countdown = -1;
    pthread_mutex_init(&f->mu, NULL);
    *out = &f->base;
    return 0;
}

void mdsl_io_fault_countdown(mdsl_io *io, long n, int err, bool sticky)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    f->countdown = n < 0 ? -1 : n;
    f->err = err;
    f->sticky = sticky;
    f->tripped = false;
    pthread_mutex_unlock(&f->mu);
}

long mdsl_io_fault_ops(mdsl_io *io)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    long n = f->ops;
    pthread_mutex_unlock(&f->mu);
    return n;
}

void mdsl_io_fault_powerloss(mdsl_io *io, bool on)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    f->powerloss = on;
    pthread_mutex_unlock(&f->mu);
}

/* Undo, keep or corrupt one file's unsynced writes, newest first so that
 * restoring "bytes replaced" composes for overlapping writes. */
static long crash_file(struct fault_io *f, struct track *t)
{
    if (!t->pend)
        return 0;
    mdsl_file *b;
    if (mdsl_io_open(f->inner, t->path, false, &b) < 0) {
        pend_free_all(t);
        return 0;
    }
    long lost = 0;
    uint64_t keep_end = t->synced_size;
    for (struct pend *p = t->pend; p; p = p->next) {
        unsigned choice = (unsigned)(rnd(f) % 3);
        struct mdsl_io_wr w = { b, p->off, p->old, p->len };
        if (choice == 0) {            /* reached the platter */
            keep_end = XT_MAX(keep_end, p->off + p->len);
        } else if (choice == 1) {     /* never written */
            (void)mdsl_io_write(f->inner, &w, 1, NULL, 0, NULL);
            lost++;
        } else if (p->len) {          /* half-written: garbage in a range */
            size_t a = (size_t)(rnd(f) % p->len);
            size_t l = 1 + (size_t)(rnd(f) % (p->len - a));
            uint8_t *junk = xt_malloc(l);
            if (junk) {
                for (size_t i = 0; i < l; i++)
                    junk[i] = (uint8_t)rnd(f);
                struct mdsl_io_wr jw = { b, p->off + a, junk, l };
                (void)mdsl_io_write(f->inner, &jw, 1, NULL, 0, NULL);
                xt_free(junk);
            }
            keep_end = XT_MAX(keep_end, p->off + p->len);
            lost++;
        }
    }
    uint64_t size = 0;
    (void)mdsl_io_size(f->inner, b, &size);
    if (keep_end < size)
        (void)mdsl_io_truncate(f->inner, b, keep_end);
    mdsl_io_close(f->inner, b);
    pend_free_all(t);
    t->synced_size = XT_MIN(keep_end, size);
    return lost;
}

long mdsl_io_fault_crash(mdsl_io *io)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    long lost = 0;
    for (struct track *t = f->tracks; t; t = t->next)
        lost += crash_file(f, t);
    f->crashed = true;
    pthread_mutex_unlock(&f->mu);
    return lost;
}

void mdsl_io_fault_reset(mdsl_io *io)
{
    struct fault_io *f = (struct fault_io *)io;
    pthread_mutex_lock(&f->mu);
    f->crashed = false;
    f->countdown = -1;
    f->tripped = false;
    pthread_mutex_unlock(&f->mu);
}
