/*
 * pom_ino.c -- the inode map of libpomegranate: uuid -> (table, name) of
 * the row, lookup count, open count and the shared open-file buffer.
 *
 * The kernel names files by inode number only (getattr, setattr, open), but
 * a row is found by (parent table, name); this map bridges the two for
 * exactly the inodes someone holds a reference on (docs/client.md "Invariants").
 *
 * Invariants:
 *  (1) An entry exists while nlookup > 0 or opens > 0; the root's entry is
 *      created at connect with one reference that is never given back.
 *  (2) Every field of an entry but uuid and type is protected by fs->mu;
 *      data->mu is taken only after fs->mu or alone (lock order fs->mu ->
 *      data->mu), and never held across an RPC.
 *  (3) data != NULL iff opens > 0.
 *  (4) An inode that is unlinked and open here has no row anywhere: its
 *      data (attributes in st, xattrs in xattr) is the file until the last
 *      close, and setattr/xattr calls change it there (pom_ino_pin_orphan).
 *
 * Floor 2.1 of libpomegranate (pom_row_i.h): calls the transport and pom_row.c.
 */
#include "pom_row_i.h"

#include <assert.h>

#include <string.h>

static size_t slot(const pom_fs *fs, uint64_t uuid)
{
    /* Multiplicative hash: uuids are dense ranges. */
    return (size_t)((uuid * UINT64_C(0x9e3779b97f4a7c15)) >> 20) & (fs->nbuckets - 1);
}

/* REQUIRES: fs->mu held. */
static struct pom_inode *find(pom_fs *fs, uint64_t uuid)
{
    assert(xt_mutex_held(&fs->mu));
    for (struct pom_inode *i = fs->buckets[slot(fs, uuid)]; i; i = i->next)
        if (i->uuid == uuid)
            return i;
    return NULL;
}

int pom_ino_init(pom_fs *fs)
{
    fs->nbuckets = 1024;
    fs->ninodes = 0;
    fs->buckets = xt_calloc(fs->nbuckets, sizeof *fs->buckets);
    return fs->buckets ? 0 : -ENOMEM;
}

static void data_free(struct pom_data *d)
{
    if (!d)
        return;
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->flush_mu);
    xt_free(d->buf);
    xt_free(d->xattr);
    xt_free(d);
}

static void ino_free(struct pom_inode *i)
{
    data_free(i->data);
    xt_free(i->gone_dir);
    xt_free(i->dacl);
    xt_free(i->name);
    xt_free(i);
}

void pom_ino_destroy(pom_fs *fs)
{
    for (size_t b = 0; fs->buckets && b < fs->nbuckets; b++) {
        struct pom_inode *i = fs->buckets[b];
        while (i) {
            struct pom_inode *n = i->next;
            ino_free(i);
            i = n;
        }
    }
    xt_free(fs->buckets);
    fs->buckets = NULL;
}

/* REQUIRES: fs->mu held. Doubles the table when it is full; a failed
 * allocation keeps the old (longer chains, still correct). */
static void maybe_grow(pom_fs *fs)
{
    assert(xt_mutex_held(&fs->mu));
    if (fs->ninodes < fs->nbuckets)
        return;
    size_t nb = fs->nbuckets * 2;
    struct pom_inode **nt = xt_calloc(nb, sizeof *nt);
    if (!nt)
        return;
    struct pom_inode **old = fs->buckets;
    size_t ob = fs->nbuckets;
    fs->buckets = nt;
    fs->nbuckets = nb;
    for (size_t b = 0; b < ob; b++) {
        struct pom_inode *i = old[b];
        while (i) {
            struct pom_inode *n = i->next;
            size_t s = slot(fs, i->uuid);
            i->next = nt[s];
            nt[s] = i;
            i = n;
        }
    }
    xt_free(old);
}

/* REQUIRES: fs->mu held. */
static int set_where(struct pom_inode *i, uint64_t table, const char *name)
{
    assert(name && name[0]);
    if (i->name && i->table == table && strcmp(i->name, name) == 0)
        return 0;
    char *n = xt_strdup(name);
    if (!n)
        return -ENOMEM;
    xt_free(i->name);
    i->name = n;
    i->table = table;
    return 0;
}

int pom_ino_ref(pom_fs *fs, uint64_t uuid, uint64_t table, const char *name, uint8_t type,
                uint64_t n)
{
    int rc = 0;
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (!i) {
        i = xt_calloc(1, sizeof *i);
        if (!i) {
            rc = -ENOMEM;
            goto out;
        }
        i->uuid = uuid;
        i->type = type;
        if ((rc = set_where(i, table, name)) < 0) {
            xt_free(i);
            goto out;
        }
        maybe_grow(fs);
        size_t s = slot(fs, uuid);
        i->next = fs->buckets[s];
        fs->buckets[s] = i;
        fs->ninodes++;
    } else if (uuid != POM_ROOT_INO) {
        /* Found again under a name: that is where it lives now (another
         * client may have renamed it). */
        if ((rc = set_where(i, table, name)) < 0)
            goto out;
        i->unlinked = false;
    }
    i->nlookup += n;
out:
    pthread_mutex_unlock(&fs->mu);
    return rc;
}

/* REQUIRES: fs->mu held. Unlinks and frees i if nothing holds it. */
static void maybe_drop(pom_fs *fs, struct pom_inode *i)
{
    assert(xt_mutex_held(&fs->mu));
    if (i->nlookup > 0 || i->opens > 0)
        return;
    struct pom_inode **pp = &fs->buckets[slot(fs, i->uuid)];
    while (*pp != i)
        pp = &(*pp)->next;
    *pp = i->next;
    fs->ninodes--;
    ino_free(i);
}

void pom_ino_forget(pom_fs *fs, uint64_t uuid, uint64_t n)
{
    if (uuid == POM_ROOT_INO)
        return; /* invariant (1) */
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (i) {
        i->nlookup = n > i->nlookup ? 0 : i->nlookup - n;
        maybe_drop(fs, i);
    }
    pthread_mutex_unlock(&fs->mu);
}

int pom_ino_where(pom_fs *fs, uint64_t uuid, uint64_t *table, char *name, uint8_t *type)
{
    int rc = 0;
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (!i) {
        rc = -ESTALE;
    } else if (i->unlinked) {
        rc = -ENOENT;
    } else {
        *table = i->table;
        memcpy(name, i->name, strlen(i->name) + 1);
        if (type)
            *type = i->type;
    }
    pthread_mutex_unlock(&fs->mu);
    return rc;
}

void pom_ino_moved(pom_fs *fs, uint64_t uuid, uint64_t table, const char *name)
{
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (i && set_where(i, table, name) < 0) {
        /* Out of memory: forget where it is rather than keep a wrong
         * location; the next lookup records it again. */
        i->unlinked = true;
    }
    pthread_mutex_unlock(&fs->mu);
}

void pom_ino_unlinked(pom_fs *fs, const xt_row_attr *a)
{
    uint64_t mark = pom_restart_count(fs); /* taken alone: no epoch_mu under mu */
    /* An open removed directory stays fstat-able (nlink 0) until the kernel
     * forgets it; allocated before the lock, dropped if not needed. */
    xt_row_attr *dir = a->type == XT_ROW_DIR ? xt_malloc(sizeof *dir) : NULL;
    if (dir)
        *dir = *a;
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, a->uuid);
    if (i && dir && !i->gone_dir) {
        i->gone_dir = dir;
        dir = NULL;
    }
    if (i) {
        i->unlinked = true;
        i->gone_mark = mark;
        if (i->data) {
            pthread_mutex_lock(&i->data->mu);
            i->data->st.st_nlink = 0;
            pthread_mutex_unlock(&i->data->mu);
        }
    }
    pthread_mutex_unlock(&fs->mu);
    xt_free(dir);
}

void pom_ino_mark_stale(pom_fs *fs)
{
    pthread_mutex_lock(&fs->mu);
    for (size_t b = 0; b < fs->nbuckets; b++)
        for (struct pom_inode *i = fs->buckets[b]; i; i = i->next)
            if (i->data) {
                pthread_mutex_lock(&i->data->mu);
                i->data->stale = !i->data->dirty;
                pthread_mutex_unlock(&i->data->mu);
            }
    pthread_mutex_unlock(&fs->mu);
}

struct ino_ref {
    uint64_t uuid, table;
    char *name;
};

int pom_inodes(pom_fs *fs, pom_inode_fn fn, void *arg)
{
    pthread_mutex_lock(&fs->mu);
    size_t n = 0, cap = fs->ninodes;
    struct ino_ref *v = xt_calloc(cap ? cap : 1, sizeof *v);
    int rc = v ? 0 : -ENOMEM;
    for (size_t b = 0; rc == 0 && b < fs->nbuckets; b++)
        for (struct pom_inode *i = fs->buckets[b]; rc == 0 && i && n < cap; i = i->next) {
            if (i->uuid == POM_ROOT_INO || i->unlinked)
                continue;
            v[n] = (struct ino_ref){ i->uuid, i->table, xt_strdup(i->name) };
            rc = v[n++].name ? 0 : -ENOMEM;
        }
    pthread_mutex_unlock(&fs->mu);
    for (size_t k = 0; k < n; k++) {
        if (rc == 0)
            fn(arg, v[k].uuid, v[k].table, v[k].name);
        xt_free(v[k].name);
    }
    xt_free(v);
    return rc;
}

bool pom_ino_is_ancestor(pom_fs *fs, uint64_t ancestor, uint64_t dir)
{
    bool yes = false;
    pthread_mutex_lock(&fs->mu);
    /* Bounded walk: a stale map could in theory hold a cycle. */
    for (int depth = 0; depth < 4096; depth++) {
        if (dir == ancestor) {
            yes = true;
            break;
        }
        if (dir == POM_ROOT_INO)
            break;
        struct pom_inode *i = find(fs, dir);
        if (!i)
            break;
        dir = i->table;
    }
    pthread_mutex_unlock(&fs->mu);
    return yes;
}

/* A buffer holding row's content and attributes; NULL on ENOMEM. */
static struct pom_data *data_new(const xt_row *row)
{
    const xt_row_group *g = xt_row_view_group(row, XT_CG_DATA);
    uint32_t len = g ? g->len : 0;
    /* Built before taking the lock (no allocation under fs->mu that an
     * RPC could wait on); dropped if another open won the race. */
    struct pom_data *d = xt_calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->cap = len > 4096 ? len : 4096;
    d->buf = xt_malloc(d->cap);
    if (!d->buf) {
        xt_free(d);
        return NULL;
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->flush_mu, NULL);
    if (len)
        memcpy(d->buf, g->ptr, len);
    d->len = len;
    /* The xattrs, for the day its name goes (invariant (4)). */
    const xt_row_group *xg = xt_row_view_group(row, XT_CG_XATTR);
    if (xg && xg->len) {
        if (!(d->xattr = xt_malloc(xg->len))) {
            xt_free(d->buf);
            xt_free(d);
            return NULL;
        }
        memcpy(d->xattr, xg->ptr, xg->len);
        d->xattr_len = xg->len;
    }
    /* A blob file's bytes are in tracts; its size is the row's (pom_file.c). */
    d->blob = (row->attr.flags & XT_ROW_F_BLOB) != 0;
    if (d->blob) {
        d->len = row->attr.size;
        d->tracts = d->row_tracts = pom_tracts_id(&row->attr);
    }
    pom_row_stat(&row->attr, &d->st);
    d->mtime_ns = row->attr.mtime_ns;
    d->iflags = row->attr.flags & XT_NS_ROW_F_IFLAGS;
    return d;
}

int pom_ino_open(pom_fs *fs, uint64_t uuid, const xt_row *row, struct pom_inode **out)
{
    struct pom_data *d = data_new(row);
    if (!d)
        return -ENOMEM;
    int rc = 0;
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (!i) {
        rc = -ESTALE;
    } else {
        if (!i->data) {
            i->data = d;
            d = NULL;
        }
        i->opens++;
        *out = i;
    }
    pthread_mutex_unlock(&fs->mu);
    data_free(d);
    return rc;
}

void pom_ino_reload(struct pom_inode *ino, const xt_row *row)
{
    struct pom_data *fresh = data_new(row), *d = ino->data;
    if (!fresh)
        return; /* out of memory: keep the old bytes, stale stays set */
    pthread_mutex_lock(&d->mu);
    bool differs = d->stale || d->len != fresh->len || d->mtime_ns != fresh->mtime_ns ||
                   d->blob != fresh->blob || d->tracts != fresh->tracts;
    if (differs && !d->dirty) {
        /* Swap the contents; the old ones go with `fresh`. */
        uint8_t *buf = d->buf, *xattr = d->xattr;
        uint32_t cap = d->cap, xattr_len = d->xattr_len;
        d->buf = fresh->buf, d->cap = fresh->cap, d->len = fresh->len;
        d->xattr = fresh->xattr, d->xattr_len = fresh->xattr_len;
        d->blob = fresh->blob, d->st = fresh->st, d->mtime_ns = fresh->mtime_ns;
        d->tracts = fresh->tracts, d->row_tracts = fresh->row_tracts;
        d->stale = false;
        fresh->buf = buf, fresh->cap = cap, fresh->xattr = xattr, fresh->xattr_len = xattr_len;
    }
    d->iflags = fresh->iflags; /* (never buffered: a chattr writes the row) */
    pthread_mutex_unlock(&d->mu);
    data_free(fresh);
}

struct pom_inode *pom_ino_pin_open(pom_fs *fs, uint64_t uuid)
{
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (i && i->data)
        i->opens++;
    else
        i = NULL;
    pthread_mutex_unlock(&fs->mu);
    return i;
}

struct pom_inode *pom_ino_pin_orphan(pom_fs *fs, uint64_t uuid)
{
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (i && i->data && i->unlinked)
        i->opens++;
    else
        i = NULL;
    pthread_mutex_unlock(&fs->mu);
    return i;
}

void pom_ino_keep_xattrs(pom_fs *fs, uint64_t uuid, uint8_t *grp, uint32_t len)
{
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (i)
        i->dacl_seen = false; /* read again at the next create in it */
    if (i && i->data) {
        pthread_mutex_lock(&i->data->mu);
        uint8_t *old = i->data->xattr;
        i->data->xattr = len ? grp : NULL;
        i->data->xattr_len = len;
        pthread_mutex_unlock(&i->data->mu);
        grp = len ? NULL : grp;
        xt_free(old);
    }
    pthread_mutex_unlock(&fs->mu);
    xt_free(grp);
}

bool pom_ino_is_open(pom_fs *fs, uint64_t uuid)
{
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    bool open = i && i->data;
    pthread_mutex_unlock(&fs->mu);
    return open;
}

bool pom_ino_known(pom_fs *fs, uint64_t uuid)
{
    pthread_mutex_lock(&fs->mu);
    bool known = find(fs, uuid) != NULL;
    pthread_mutex_unlock(&fs->mu);
    return known;
}

void pom_ino_close(pom_fs *fs, struct pom_inode *i)
{
    pthread_mutex_lock(&fs->mu);
    assert(i->opens > 0 && i->data);
    if (--i->opens == 0) {
        data_free(i->data);
        i->data = NULL;
        maybe_drop(fs, i);
    }
    pthread_mutex_unlock(&fs->mu);
}

uint64_t pom_ino_seq(pom_fs *fs)
{
    pthread_mutex_lock(&fs->mu);
    uint64_t seq = fs->chg_seq;
    pthread_mutex_unlock(&fs->mu);
    return seq;
}

/* REQUIRES: fs->mu and d->mu held. Size and times of *st from the buffer. */
static void stat_from_buffer(struct pom_data *d, struct stat *st)
{
    assert(xt_mutex_held(&d->mu));
    st->st_size = (off_t)d->len;
    st->st_blocks = (blkcnt_t)((d->len + 511) / 512);
    pom_ns_ts(d->mtime_ns, &st->st_mtim);
    if (st->st_mtim.tv_sec > st->st_ctim.tv_sec ||
        (st->st_mtim.tv_sec == st->st_ctim.tv_sec && st->st_mtim.tv_nsec > st->st_ctim.tv_nsec))
        st->st_ctim = st->st_mtim;
}

int pom_ino_open_stat(pom_fs *fs, uint64_t uuid, struct stat *st)
{
    int open = 0;
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (i && i->data) {
        pthread_mutex_lock(&i->data->mu);
        *st = i->data->st;
        stat_from_buffer(i->data, st);
        pthread_mutex_unlock(&i->data->mu);
        open = 1;
    } else if (i && i->unlinked && i->gone_dir) {
        pom_row_stat(i->gone_dir, st);
        open = 1;
    }
    pthread_mutex_unlock(&fs->mu);
    return open;
}

void pom_ino_flushed(pom_fs *fs, uint64_t uuid)
{
    pthread_mutex_lock(&fs->mu);
    fs->chg_ring[++fs->chg_seq % POM_CHG_RING] = uuid;
    pthread_mutex_unlock(&fs->mu);
}

/* REQUIRES: fs->mu held. Whether a flush of uuid ended after flush number
 * `since` -- or too many did to tell (then yes). */
static bool flushed_since(pom_fs *fs, uint64_t uuid, uint64_t since)
{
    assert(xt_mutex_held(&fs->mu));
    assert(since <= fs->chg_seq);
    if (fs->chg_seq - since >= POM_CHG_RING)
        return true;
    for (uint64_t s = since + 1; s <= fs->chg_seq; s++)
        if (fs->chg_ring[s % POM_CHG_RING] == uuid)
            return true;
    return false;
}

int pom_ino_dir_attr(pom_fs *fs, uint64_t uuid, uint32_t *mode, uint32_t *gid,
                     uint8_t **dacl, uint32_t *dacl_len)
{
    *dacl = NULL;
    *dacl_len = 0;
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    int known = i && i->dir_seen && i->dacl_seen &&
                (i->dacl_ctime == i->dir_ctime || xt_mono_ns() - i->dacl_mono < POM_DACL_FRESH_NS);
    if (known) {
        *mode = i->dir_mode;
        *gid = i->dir_gid;
        if (i->dacl_len && !(*dacl = xt_malloc(i->dacl_len)))
            known = -ENOMEM;
        else if (i->dacl_len)
            memcpy(*dacl, i->dacl, i->dacl_len);
        *dacl_len = *dacl ? i->dacl_len : 0;
    }
    pthread_mutex_unlock(&fs->mu);
    return known;
}

int pom_ino_dir_keep(pom_fs *fs, uint64_t uuid, const xt_row_attr *a, const uint8_t *dacl,
                     uint32_t dacl_len)
{
    uint8_t *copy = NULL;
    if (dacl_len && !(copy = xt_malloc(dacl_len)))
        return -ENOMEM;
    if (dacl_len)
        memcpy(copy, dacl, dacl_len);
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    if (i) {
        i->dir_seen = true;
        i->dir_mode = a->mode;
        i->dir_gid = a->gid;
        i->dir_ctime = a->ctime_ns;
        i->dacl_seen = true;
        i->dacl_ctime = a->ctime_ns;
        i->dacl_mono = xt_mono_ns();
        uint8_t *old = i->dacl;
        i->dacl = copy;
        i->dacl_len = dacl_len;
        copy = old;
    }
    pthread_mutex_unlock(&fs->mu);
    xt_free(copy);
    return 0;
}

int pom_ino_stat_fix(pom_fs *fs, uint64_t uuid, struct stat *st, uint64_t since)
{
    int rc = 0;
    pthread_mutex_lock(&fs->mu);
    struct pom_inode *i = find(fs, uuid);
    bool flushed = flushed_since(fs, uuid, since);
    if (i && S_ISDIR(st->st_mode)) {
        i->dir_seen = true;
        i->dir_mode = (uint32_t)st->st_mode;
        i->dir_gid = (uint32_t)st->st_gid;
        i->dir_ctime = pom_ts_ns(&st->st_ctim);
    }
    if (i && i->data) {
        pthread_mutex_lock(&i->data->mu);
        if (i->data->dirty || flushed) {
            stat_from_buffer(i->data, st);
            rc = 1;
        }
        pthread_mutex_unlock(&i->data->mu);
    } else if (flushed) {
        rc = -EAGAIN;
    }
    pthread_mutex_unlock(&fs->mu);
    return rc;
}

/* ---- the current row of a known inode ------------------------------- */

int pom_stub_follow(pom_fs *fs, uint64_t uuid, int group, struct xt_resp *r, xt_row *row)
{
    char in[XT_NS_ID_LEN + 1];
    xt_ns_id_name(uuid, in);
    xt_resp_free(r);
    int rc = pom_row_get(fs, XT_NS_TABLE_ILT, in, group, r, row);
    if (rc == 0 && row->attr.uuid != uuid) {
        XT_ERR("ILT row %s holds uuid %llu", in, (unsigned long long)row->attr.uuid);
        xt_resp_free(r);
        rc = -EIO;
    }
    return rc;
}

int pom_name_holds(pom_fs *fs, uint64_t table, const char *name, uint64_t uuid)
{
    struct xt_resp r;
    xt_row row;
    int rc = pom_row_get(fs, table, name, POM_ROW_META, &r, &row);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0)
        return rc;
    rc = row.attr.uuid == uuid;
    xt_resp_free(&r);
    return rc;
}

uint64_t pom_ino_moves(pom_fs *fs)
{
    return atomic_load(&fs->moved);
}

bool pom_ino_moved_since(pom_fs *fs, uint64_t mark)
{
    uint64_t at_fail = atomic_load(&fs->moved);
    for (int waited = 0; waited < 1000 && atomic_load(&fs->moved) == at_fail &&
                         atomic_load(&fs->moves) > 0;
         waited++)
        xt_sleep_ms(1);
    return atomic_load(&fs->moved) != mark;
}

int pom_ino_row(pom_fs *fs, pom_ino ino, int group, uint64_t *table, char *name,
                struct xt_resp *r, xt_row *row)
{
    int rc;
    for (int tries = 0;; tries++) {
        uint64_t mark = pom_ino_moves(fs);
        if ((rc = pom_ino_where(fs, ino, table, name, NULL)) < 0)
            return rc;
        rc = pom_row_get(fs, *table, name, group, r, row);
        if (rc == 0 && row->attr.uuid != ino) {
            xt_resp_free(r);
            rc = -ENOENT;
        }
        /* Moved by a rename of this client meanwhile: read it there. */
        if (rc == -ENOENT && tries < 64 && pom_ino_moved_since(fs, mark))
            continue;
        if (rc < 0)
            return rc;
        break;
    }
    if (row->attr.flags & XT_NS_ROW_F_LINKED) {
        /* Linked (by another client, or the map is older than the link):
         * the row is in the ILT, and so is the map's location from now. */
        if ((rc = pom_stub_follow(fs, ino, group, r, row)) < 0)
            return rc;
        *table = XT_NS_TABLE_ILT;
        xt_ns_id_name(ino, name);
        pom_ino_moved(fs, ino, *table, name);
    }
    return 0;
}
