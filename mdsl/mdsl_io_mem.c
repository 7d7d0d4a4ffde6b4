/*
 * mdsl_io_mem.c -- the in-memory backend of mdsl_io (LevelDB's memenv):
 * files and directories in a list under one mutex, for fast unit tests.
 *
 * Invariants:
 *  (1) Every op takes m->mu for its whole (memory-only) duration.
 *  (2) A node lives while it is in the list or an open handle refers to it:
 *      unlink takes it off the list; the last close frees it (POSIX
 *      semantics: an open file survives its unlink).
 *  (3) Everything is durable at once; power loss is the fault backend's job.
 *  (4) With a capacity (mdsl_io_mem_set_capacity), a write that would make
 *      the files' bytes pass it answers -ENOSPC, as a small device would.
 */
#include "mdsl_io.h"

#include <pthread.h>
#include <string.h>

struct mem_node {
    struct mem_node *next;
    char *path;
    bool is_dir;
    bool linked;      /* in the list */
    int refs;         /* open handles */
    uint8_t *data;
    uint64_t size, cap;
};

struct mdsl_file {
    struct mem_node *n;
};

struct mem_io {
    struct mdsl_io base;
    pthread_mutex_t mu;
    struct mem_node *nodes; /* protected by mu */
    uint64_t capacity;      /* 0: unbounded (mu) */
};

/* Bytes held by every file, unlinked ones still open included. REQUIRES:
 * m->mu held. Unlinked open files are off the list: a device holds their
 * bytes too, so this undercounts them (tests close what they unlink). */
static uint64_t used_bytes(const struct mem_io *m)
{
    uint64_t u = 0;
    for (const struct mem_node *n = m->nodes; n; n = n->next)
        u += n->size;
    return u;
}

static struct mem_node *find(struct mem_io *m, const char *path)
{
    for (struct mem_node *n = m->nodes; n; n = n->next)
        if (!strcmp(n->path, path))
            return n;
    return NULL;
}

static struct mem_node *node_new(struct mem_io *m, const char *path, bool is_dir)
{
    struct mem_node *n = xt_calloc(1, sizeof *n);
    if (!n)
        return NULL;
    n->path = xt_strdup(path);
    if (!n->path) {
        xt_free(n);
        return NULL;
    }
    n->is_dir = is_dir;
    n->linked = true;
    n->next = m->nodes;
    m->nodes = n;
    return n;
}

static void node_free(struct mem_node *n)
{
    xt_free(n->data);
    xt_free(n->path);
    xt_free(n);
}

static void unlink_node(struct mem_io *m, struct mem_node *n)
{
    for (struct mem_node **pp = &m->nodes; *pp; pp = &(*pp)->next)
        if (*pp == n) {
            *pp = n->next;
            break;
        }
    n->linked = false;
    if (n->refs == 0)
        node_free(n);
}

static int mem_open(mdsl_io *io, const char *path, bool create, mdsl_file **out)
{
    struct mem_io *m = (struct mem_io *)io;
    mdsl_file *f = xt_malloc(sizeof *f);
    if (!f)
        return -ENOMEM;
    pthread_mutex_lock(&m->mu);
    struct mem_node *n = find(m, path);
    int rc = 0;
    if (n && n->is_dir)
        rc = -EISDIR;
    else if (!n && !create)
        rc = -ENOENT;
    else if (!n && !(n = node_new(m, path, false)))
        rc = -ENOMEM;
    if (rc == 0) {
        n->refs++;
        f->n = n;
    }
    pthread_mutex_unlock(&m->mu);
    if (rc < 0) {
        xt_free(f);
        return rc;
    }
    *out = f;
    return 0;
}

static void mem_close(mdsl_io *io, mdsl_file *f)
{
    struct mem_io *m = (struct mem_io *)io;
    pthread_mutex_lock(&m->mu);
    struct mem_node *n = f->n;
    if (--n->refs == 0 && !n->linked)
        node_free(n);
    pthread_mutex_unlock(&m->mu);
    xt_free(f);
}

static int grow(struct mem_node *n, uint64_t size)
{
    if (size <= n->cap)
        return 0;
    uint64_t cap = n->cap ? n->cap : 4096;
    while (cap < size)
        cap *= 2;
    uint8_t *d = xt_realloc(n->data, cap);
    if (!d)
        return -ENOMEM;
    memset(d + n->cap, 0, cap - n->cap);
    n->data = d;
    n->cap = cap;
    return 0;
}

static int mem_write(mdsl_io *io, const struct mdsl_io_wr *w, size_t nw,
                     mdsl_file *const *sync, size_t nsync, bool *sync_failed)
{
    (void)sync, (void)nsync, (void)sync_failed;
    struct mem_io *m = (struct mem_io *)io;
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < nw && rc == 0; i++) {
        struct mem_node *n = w[i].f->n;
        uint64_t end = w[i].off + w[i].len;
        if (m->capacity && end > n->size && used_bytes(m) + (end - n->size) > m->capacity) {
            rc = -ENOSPC; /* invariant 4 */
            break;
        }
        rc = grow(n, end);
        if (rc == 0) {
            memcpy(n->data + w[i].off, w[i].buf, w[i].len);
            if (end > n->size)
                n->size = end;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static long mem_read(mdsl_io *io, mdsl_file *f, uint64_t off, void *buf, size_t len)
{
    struct mem_io *m = (struct mem_io *)io;
    pthread_mutex_lock(&m->mu);
    struct mem_node *n = f->n;
    size_t k = off >= n->size ? 0 : (size_t)XT_MIN((uint64_t)len, n->size - off);
    if (k)
        memcpy(buf, n->data + off, k);
    pthread_mutex_unlock(&m->mu);
    return (long)k;
}

static int mem_sync(mdsl_io *io, mdsl_file *f)
{
    (void)io, (void)f;
    return 0;
}

static int mem_truncate(mdsl_io *io, mdsl_file *f, uint64_t size)
{
    struct mem_io *m = (struct mem_io *)io;
    pthread_mutex_lock(&m->mu);
    struct mem_node *n = f->n;
    int rc = grow(n, size);
    if (rc == 0) {
        if (size < n->size)
            memset(n->data + size, 0, n->size - size);
        n->size = size;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static int mem_size(mdsl_io *io, mdsl_file *f, uint64_t *out)
{
    struct mem_io *m = (struct mem_io *)io;
    pthread_mutex_lock(&m->mu);
    *out = f->n->size;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

static int mem_unlink(mdsl_io *io, const char *path)
{
    struct mem_io *m = (struct mem_io *)io;
    pthread_mutex_lock(&m->mu);
    struct mem_node *n = find(m, path);
    int rc = !n ? -ENOENT : n->is_dir ? -EISDIR : 0;
    if (rc == 0)
        unlink_node(m, n);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static int mem_mkdir(mdsl_io *io, const char *path)
{
    struct mem_io *m = (struct mem_io *)io;
    pthread_mutex_lock(&m->mu);
    struct mem_node *n = find(m, path);
    int rc = n ? (n->is_dir ? 0 : -EEXIST) : (node_new(m, path, true) ? 0 : -ENOMEM);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* `path` is `dir` itself or lies under it. */
static bool under(const char *path, const char *dir, size_t dl)
{
    return !strncmp(path, dir, dl) && (path[dl] == '\0' || path[dl] == '/');
}

/* Every node at or under `from` takes the `to` prefix; open handles follow
 * their nodes. The new names are built first so a failure changes nothing. */
static int mem_rename(mdsl_io *io, const char *from, const char *to)
{
    struct mem_io *m = (struct mem_io *)io;
    size_t fl = strlen(from), tl = strlen(to);
    pthread_mutex_lock(&m->mu);
    struct mem_node *src = find(m, from), *dst = find(m, to);
    int rc = !src ? -ENOENT : dst && (dst->is_dir || src->is_dir) ? -EEXIST : 0;
    size_t n = 0;
    for (struct mem_node *x = m->nodes; x && rc == 0; x = x->next)
        n += under(x->path, from, fl);
    char **names = rc == 0 ? xt_calloc(n, sizeof *names) : NULL;
    if (rc == 0 && !names)
        rc = -ENOMEM;
    size_t k = 0;
    for (struct mem_node *x = m->nodes; x && rc == 0; x = x->next) {
        if (!under(x->path, from, fl))
            continue;
        size_t rest = strlen(x->path) - fl;
        if (!(names[k] = xt_malloc(tl + rest + 1))) {
            rc = -ENOMEM;
            break;
        }
        memcpy(names[k], to, tl);
        memcpy(names[k] + tl, x->path + fl, rest + 1);
        k++;
    }
    if (rc == 0) {
        if (dst) /* a file over a file replaces it, as rename(2) */
            unlink_node(m, dst);
        k = 0;
        for (struct mem_node *x = m->nodes; x; x = x->next)
            if (under(x->path, from, fl)) {
                xt_free(x->path);
                x->path = names[k];
                names[k++] = NULL;
            }
    }
    for (size_t i = 0; names && i < n; i++)
        xt_free(names[i]);
    xt_free(names);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static int mem_rmdir(mdsl_io *io, const char *path)
{
    struct mem_io *m = (struct mem_io *)io;
    size_t pl = strlen(path);
    pthread_mutex_lock(&m->mu);
    struct mem_node *n = find(m, path);
    int rc = !n ? -ENOENT : !n->is_dir ? -ENOTDIR : 0;
    for (struct mem_node *x = m->nodes; x && rc == 0; x = x->next)
        if (x != n && under(x->path, path, pl))
            rc = -ENOTEMPTY;
    if (rc == 0)
        unlink_node(m, n);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* Children are copied out first so the callback runs without the lock. */
static int mem_list(mdsl_io *io, const char *dir, mdsl_io_list_cb cb, void *arg)
{
    struct mem_io *m = (struct mem_io *)io;
    size_t dl = strlen(dir);
    char **names = NULL;
    bool *dirs = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    struct mem_node *d = find(m, dir);
    if (!d || !d->is_dir)
        rc = -ENOENT;
    for (struct mem_node *x = m->nodes; x && rc == 0; x = x->next) {
        if (strncmp(x->path, dir, dl) || x->path[dl] != '/' || strchr(x->path + dl + 1, '/'))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = xt_realloc(names, cap * sizeof *nn);
            bool *nd = nn ? xt_realloc(dirs, cap * sizeof *nd) : NULL;
            if (nn)
                names = nn;
            if (nd)
                dirs = nd;
            if (!nn || !nd) {
                rc = -ENOMEM;
                break;
            }
        }
        if (!(names[n] = xt_strdup(x->path + dl + 1))) {
            rc = -ENOMEM;
            break;
        }
        dirs[n++] = x->is_dir;
    }
    pthread_mutex_unlock(&m->mu);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0)
            rc = cb(names[i], dirs[i], arg);
        xt_free(names[i]);
    }
    xt_free(names);
    xt_free(dirs);
    return rc;
}

static void mem_destroy(mdsl_io *io)
{
    struct mem_io *m = (struct mem_io *)io;
    while (m->nodes) {
        struct mem_node *n = m->nodes;
        m->nodes = n->next;
        node_free(n);
    }
    pthread_mutex_destroy(&m->mu);
    xt_free(m);
}

static int mem_space(mdsl_io *io, const char *path, uint64_t *avail, uint64_t *total)
{
    (void)path;
    struct mem_io *m = (struct mem_io *)io;
    pthread_mutex_lock(&m->mu);
    uint64_t cap = m->capacity, used = used_bytes(m);
    pthread_mutex_unlock(&m->mu);
    if (!cap)
        return -ENOTSUP;
    *total = cap;
    *avail = used < cap ? cap - used : 0;
    return 0;
}

void mdsl_io_mem_set_capacity(mdsl_io *io, uint64_t bytes)
{
    struct mem_io *m = (struct mem_io *)io;
    pthread_mutex_lock(&m->mu);
    m->capacity = bytes;
    pthread_mutex_unlock(&m->mu);
}

static const struct mdsl_io_ops mem_ops = {
    .name = "mem",
    .open = mem_open,
    .close = mem_close,
    .write = mem_write,
    .read = mem_read,
    .sync = mem_sync,
    .truncate = mem_truncate,
    .size = mem_size,
    .unlink = mem_unlink,
    .mkdir = mem_mkdir,
    .rename = mem_rename,
    .rmdir = mem_rmdir,
    .list = mem_list,
    .destroy = mem_destroy,
    .space = mem_space,
};

int mdsl_io_mem_new(mdsl_io **out)
{
    struct mem_io *m = xt_calloc(1, sizeof *m);
    if (!m)
        return -ENOMEM;
    m->base.ops = &mem_ops;
    pthread_mutex_init(&m->mu, NULL);
    *out = &m->base;
    return 0;
}
