/*
 * r2_store.c -- the thin wrappers over a backend's ops (r2_store_i.h) and
 * what is built on them once for every backend: argument checks, sorted
 * listings and the id allocator.
 *
 * Invariants:
 *  (1) No op is called with an invalid key, an oversized value, or an
 *      expected version outside {>= 0, R2_VER_ANY, R2_VER_CREATE}; so the
 *      backends never see input that the model of r2_store.h forbids.
 *  (2) r2_store_alloc_id hands out each id at most once: it advances the
 *      counter only through a compare-and-set on the counter's version.
 */
#include "r2_store_i.h"

#include "xt_common.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define ALLOC_ID_TRIES 10000

bool r2_store_key_valid(const char *key)
{
    if (key == NULL || key[0] != '/')
        return false;
    size_t total = strlen(key);
    if (total > R2_STORE_KEY_MAX)
        return false;
    if (total == 1)
        return true; /* the root */
    const char *p = key;
    while (*p == '/') {
        const char *c = p + 1, *e = c;
        while (*e != '\0' && *e != '/') {
            if ((unsigned char)*e < 0x21 || (unsigned char)*e > 0x7e)
                return false;
            e++;
        }
        size_t n = (size_t)(e - c);
        if (n == 0 || n > 255)
            return false; /* "//" or a trailing "/" */
        if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return false;
        p = e;
    }
    return *p == '\0';
}

void r2_store_key_parent(const char *key, char *buf)
{
    const char *slash = strrchr(key, '/');
    assert(slash != NULL && key[1] != '\0');
    size_t n = (size_t)(slash - key);
    if (n == 0)
        n = 1; /* parent of "/a" is "/" */
    memcpy(buf, key, n);
    buf[n] = '\0';
}

void *r2_store_dup_bytes(const void *p, size_t len)
{
    char *b = xt_malloc(len + 1);
    if (b == NULL)
        return NULL;
    if (len > 0)
        memcpy(b, p, len);
    b[len] = '\0';
    return b;
}

/* A record key: valid and not the root. */
static bool record_key(const char *key)
{
    return r2_store_key_valid(key) && key[1] != '\0';
}

static bool expected_ok(int64_t expected, bool allow_create)
{
    return expected >= 0 || expected == R2_VER_ANY ||
           (allow_create && expected == R2_VER_CREATE);
}

int r2_store_get(r2_store *s, const char *key, void **val, size_t *len,
                 int64_t *version)
{
    if (!record_key(key))
        return -EINVAL;
    size_t dummy;
    return s->ops->get(s, key, val, len != NULL ? len : &dummy, version);
}

int r2_store_put(r2_store *s, const char *key, const void *val, size_t len,
                 int64_t expected, unsigned flags, int64_t *new_version)
{
    if (!record_key(key) || !expected_ok(expected, true) ||
        (flags & ~R2_PUT_EPHEMERAL) != 0 || (len > 0 && val == NULL))
        return -EINVAL;
    if (len > R2_STORE_VALUE_MAX)
        return -EFBIG;
    return s->ops->put(s, key, val, len, expected, flags, new_version);
}

int r2_store_delete(r2_store *s, const char *key, int64_t expected)
{
    if (!record_key(key) || !expected_ok(expected, false))
        return -EINVAL;
    return s->ops->del(s, key, expected);
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int r2_store_list(r2_store *s, const char *dir, char ***names, size_t *count)
{
    if (!r2_store_key_valid(dir))
        return -EINVAL;
    *names = NULL;
    *count = 0;
    int rc = s->ops->list(s, dir, names, count);
    if (rc == 0 && *count > 1)
        qsort(*names, *count, sizeof(char *), cmp_names);
    return rc;
}

void r2_store_names_free(char **names, size_t count)
{
    if (names == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        xt_free(names[i]);
    xt_free(names);
}

int r2_store_multi(r2_store *s, const r2_store_op *ops, size_t n,
                   int64_t *new_versions, size_t *failed)
{
    if (n == 0 || n > R2_STORE_MULTI_MAX || ops == NULL)
        return -EINVAL;
    for (size_t i = 0; i < n; i++) {
        const r2_store_op *op = &ops[i];
        bool bad = !record_key(op->key);
        switch (op->type) {
        case R2_OP_PUT:
            bad = bad || !expected_ok(op->expected, true) ||
                  (op->flags & ~R2_PUT_EPHEMERAL) != 0 ||
                  (op->len > 0 && op->val == NULL);
            if (!bad && op->len > R2_STORE_VALUE_MAX) {
                if (failed != NULL)
                    *failed = i;
                return -EFBIG;
            }
            break;
        case R2_OP_DELETE:
            bad = bad || !expected_ok(op->expected, false);
            break;
        case R2_OP_CHECK:
            bad = bad || op->expected < 0;
            break;
        default:
            bad = true;
        }
        for (size_t j = 0; !bad && j < i; j++)
            bad = strcmp(ops[j].key, op->key) == 0;
        if (bad) {
            if (failed != NULL)
                *failed = i;
            return -EINVAL;
        }
    }
    size_t dummy;
    return s->ops->multi(s, ops, n, new_versions, failed != NULL ? failed : &dummy);
}

int r2_store_alloc_id(r2_store *s, const char *key, uint64_t count,
                      uint64_t *first)
{
    if (count == 0 || !record_key(key))
        return -EINVAL;
    for (int tries = 0; tries < ALLOC_ID_TRIES; tries++) {
        void *val = NULL;
        size_t len = 0;
        int64_t ver = R2_VER_CREATE;
        uint64_t next = 1;
        int rc = s->ops->get(s, key, &val, &len, &ver);
        if (rc == -ENOENT) {
            ver = R2_VER_CREATE;
        } else if (rc < 0) {
            return rc;
        } else {
            if (len != 8) {
                XT_ERR("r2_store: counter %s holds %zu bytes, not 8", key, len);
                xt_free(val);
                return -EIO;
            }
            next = xt_get_u64(val);
            xt_free(val);
        }
        if (next == 0 || next > UINT64_MAX - count)
            return -EOVERFLOW;
        uint8_t buf[8];
        xt_put_u64(buf, next + count);
        rc = s->ops->put(s, key, buf, sizeof buf, ver, 0, NULL);
        if (rc == 0) {
            *first = next;
            return 0;
        }
        if (rc != -ESTALE && rc != -EEXIST && rc != -ENOENT)
            return rc; /* -ENOENT: deleted under us; retry creates it */
    }
    return -EAGAIN;
}

int r2_store_watch(r2_store *s, const char *key, r2_store_watch_fn fn, void *arg)
{
    if (!r2_store_key_valid(key) || fn == NULL)
        return -EINVAL;
    return s->ops->watch(s, key, fn, arg);
}

void r2_store_unwatch(r2_store *s, int id)
{
    if (id > 0)
        s->ops->unwatch(s, id);
}

int r2_store_elect(r2_store *s, const void *id, size_t id_len,
                   r2_store_leader_fn fn, void *arg)
{
    if ((id_len > 0 && id == NULL) || id_len > R2_STORE_VALUE_MAX)
        return -EINVAL;
    return s->ops->elect(s, id, id_len, fn, arg);
}

int r2_store_resign(r2_store *s)
{
    return s->ops->resign(s);
}

bool r2_store_is_leader(r2_store *s)
{
    return s->ops->is_leader(s);
}

int r2_store_leader(r2_store *s, void **id, size_t *len)
{
    return s->ops->leader(s, id, len);
}

const char *r2_store_backend(const r2_store *s)
{
    return s->ops->name;
}

void r2_store_close(r2_store *s)
{
    if (s != NULL)
        s->ops->close(s);
}
