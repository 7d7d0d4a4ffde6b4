/*
 * pom_blob_local_list.c -- the local backend's listing of every tract set
 * of a blob store (the `list` op behind pom_blob_list, pom_blob.h): a walk
 * of its layout (pom_blob_local.c, docs/format-blob.md),
 *   F/<fsid %08x>/<h1 %02x>/<h2 %02x>/<uuid %016x>/<group>/<tract>,
 * over every folder F of the locator table. pomctl fsck finds orphan tract
 * sets with it.
 *
 * Invariants:
 *  (1) Only names of exactly the layout's hex widths are walked; anything
 *      else in the tree is not ours and is left alone. An id folder under
 *      hash folders its id does not hash to is skipped and logged
 *      (pom_blob_delete could not reach it).
 *  (2) The walk takes no lock: a folder removed meanwhile counts as absent
 *      or empty, not as an error.
 *  (3) Each set reaches fn once: the parts of a set striped over several
 *      folders are sorted next to each other and merged first.
 */
#include "pom_blob_i.h"

#include "xt_common.h"

#include <dirent.h>
#include <assert.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- local: listing every set (pom_blob_list) ---------------------------- */

struct set_vec {
    struct pom_blob_set *v;  /* xt_malloc'd; one entry per (folder, id) */
    size_t n, cap;
};

/* Whether name is exactly len lowercase hex digits (the layout's %0Nx);
 * *out gets its value. Anything else in the tree is not ours. */
static bool hex_name(const char *name, size_t len, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;
    for (; name[i] && i < len; i++) {
        char c = name[i];
        if (c >= '0' && c <= '9')
            v = v << 4 | (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v << 4 | (uint64_t)(c - 'a' + 10);
        else
            return false;
    }
    *out = v;
    return i == len && !name[i];
}

static int64_t mtime_of(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Opens sub-folder name of d; NULL with errno set. */
static DIR *open_sub(DIR *d, const char *name)
{
    int fd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *s = fdopendir(fd);
    if (!s) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return s;
}

/* Adds up id folder `ud` (its group folders and their tract files, as
 * local_stat counts them) into *s. A folder removed meanwhile counts as
 * empty. */
static void sum_id_folder(DIR *ud, struct pom_blob_set *s)
{
    struct stat st;
    if (fstat(dirfd(ud), &st) == 0)
        s->mtime_ns = mtime_of(&st);
    struct dirent *e;
    while ((e = readdir(ud))) {
        if (e->d_name[0] == '.')
            continue;
        DIR *g = open_sub(ud, e->d_name);
        if (!g)
            continue;
        if (fstat(dirfd(g), &st) == 0)
            s->mtime_ns = XT_MAX(s->mtime_ns, mtime_of(&st));
        struct dirent *te;
        while ((te = readdir(g))) {
            if (te->d_name[0] == '.' || fstatat(dirfd(g), te->d_name, &st, 0) < 0)
                continue;
            s->tracts++;
            s->bytes += (uint64_t)st.st_size;
            s->alloc_bytes += (uint64_t)st.st_blocks * 512u;
            s->mtime_ns = XT_MAX(s->mtime_ns, mtime_of(&st));
        }
        closedir(g);
    }
}

static int set_push(struct set_vec *v, const struct pom_blob_set *s)
{
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256;
        struct pom_blob_set *nv = xt_realloc(v->v, cap * sizeof *nv);
        if (!nv)
            return -ENOMEM;
        v->v = nv;
        v->cap = cap;
    }
    v->v[v->n++] = *s;
    return 0;
}

/* The id folders under hash folder h1/h2 (`d`) into v. */
static int list_hash_folder(DIR *d, unsigned h1, unsigned h2, struct set_vec *v)
{
    struct dirent *e;
    while ((e = readdir(d))) {
        uint64_t id;
        if (!hex_name(e->d_name, 16, &id))
            continue;
        uint64_t h = pom_blob_hash(id);
        if (h >> 56 != h1 || ((h >> 48) & 0xff) != h2) {
            XT_WARN("blob: %02x/%02x/%s is not where its id hashes to: not a set, skipped",
                    h1, h2, e->d_name);
            continue;
        }
        DIR *ud = open_sub(d, e->d_name);
        if (!ud) {
            if (errno == ENOENT)
                continue; /* removed meanwhile */
            return -errno;
        }
        struct pom_blob_set s = { .id = id };
        sum_id_folder(ud, &s);
        closedir(ud);
        int rc = set_push(v, &s);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* Every set of one row folder ("F/<fsid>") into v. */
static int list_row(const char *folder, struct set_vec *v)
{
    DIR *top = opendir(folder);
    if (!top)
        return errno == ENOENT ? 0 : -errno;
    int rc = 0;
    struct dirent *e1;
    while (rc == 0 && (e1 = readdir(top))) {
        uint64_t h1;
        if (!hex_name(e1->d_name, 2, &h1))
            continue;
        DIR *l1 = open_sub(top, e1->d_name);
        if (!l1) {
            rc = errno == ENOENT ? 0 : -errno;
            continue;
        }
        struct dirent *e2;
        while (rc == 0 && (e2 = readdir(l1))) {
            uint64_t h2;
            if (!hex_name(e2->d_name, 2, &h2))
                continue;
            DIR *l2 = open_sub(l1, e2->d_name);
            if (!l2) {
                rc = errno == ENOENT ? 0 : -errno;
                continue;
            }
            rc = list_hash_folder(l2, (unsigned)h1, (unsigned)h2, v);
            closedir(l2);
        }
        closedir(l1);
    }
    closedir(top);
    return rc;
}

static int cmp_set(const void *a, const void *b)
{
    uint64_t x = ((const struct pom_blob_set *)a)->id, y = ((const struct pom_blob_set *)b)->id;
    return x < y ? -1 : x > y;
}

/* Collects (folder, id) entries of every row, then sorts them so the
 * parts of a set striped over several folders are adjacent and merges
 * them: each set reaches fn once. */
int pom_blob_local_list(pom_blob *b, pom_blob_list_fn fn, void *arg)
{
    assert(b->ops == &pom_blob_local_ops); /* REQUIRES */
    struct set_vec v = { 0 };
    int rc = 0;
    for (size_t r = 0; r < b->rows && rc == 0; r++)
        rc = list_row(b->folders[r], &v);
    if (rc == 0 && v.n > 1)
        qsort(v.v, v.n, sizeof *v.v, cmp_set);
    for (size_t i = 0; rc == 0 && i < v.n;) {
        struct pom_blob_set s = v.v[i++];
        for (; i < v.n && v.v[i].id == s.id; i++) {
            s.tracts += v.v[i].tracts;
            s.bytes += v.v[i].bytes;
            s.alloc_bytes += v.v[i].alloc_bytes;
            s.mtime_ns = XT_MAX(s.mtime_ns, v.v[i].mtime_ns);
        }
        rc = fn(arg, &s);
    }
    xt_free(v.v);
    return rc;
}
