/*
 * mdsl_list.c -- the slice listing (mdsl_store.h "listing"): what the index
 * stores, one entry per slice, for the background mover that walks every
 * losing MDSL (docs/mdsl-scale.md "The mover").
 *
 * Invariants:
 *  (1) Entries come in index key order (fsid, table, slice), each slice
 *      once per call; the cursor is the last slice returned, so a walk of
 *      successive calls lists every slice stored throughout it exactly once.
 *  (2) An entry's version is the newest SLICE key of the slice, `sys` the
 *      SYS flag of that record, `moved` the MOVED flag of its newest
 *      image and `image` whether it has one: all read from the index, never from a cache, under one
 *      LevelDB iterator (a consistent snapshot).
 *  (3) No lock is taken: the index is thread-safe and the listing is a read.
 *  (4) The misplaced count reads only through the listing, one page per
 *      snapshot: slices a pass has not reached yet are counted as they are
 *      when it reaches them (a slice moved meanwhile is not counted).
 */
#include "mdsl_handle_i.h"

#include "xt_ring.h"
#include "xt_time.h"

#include <stdatomic.h>
#include <string.h>

#define LIST_FULL 1 /* stops the scan past the last entry that fits */

struct list_walk {
    struct xt_store_slice *v;
    size_t n, max;
    bool full;      /* a slice past the max-th exists */
};

static int list_cb(const struct mdsl_ikey *k, const struct mdsl_ptr *p, void *arg)
{
    struct list_walk *w = arg;
    bool image = p->type == XT_STORE_IMAGE;
    struct xt_store_slice *last = w->n ? &w->v[w->n - 1] : NULL;
    if (!last || !xt_slice_id_eq(last->id, k->id)) {
        if (w->n == w->max) {
            w->full = true;
            return LIST_FULL;
        }
        last = &w->v[w->n++];
        *last = (struct xt_store_slice){ .id = k->id };
    }
    last->version = k->version; /* keys ascend within a slice */
    last->sys = (p->flags & XT_STORE_F_SYS) != 0;
    if (image) {
        last->moved = (p->flags & XT_STORE_F_MOVED) != 0;
        last->image = true;
    }
    return 0;
}

/* The cursor is opaque to callers: the last slice returned, little-endian. */
static void cursor_put(uint8_t *c, const struct xt_store_slice *e)
{
    xt_put_u32(c, e->id.fsid);
    xt_put_u64(c + 4, e->id.table);
    xt_put_u32(c + 12, e->id.slice);
}

static void cursor_get(const uint8_t *c, struct mdsl_ikey *k)
{
    *k = (struct mdsl_ikey){ .kind = MDSL_IK_SLICE,
                             .id = { .fsid = xt_get_u32(c), .slice = xt_get_u32(c + 12),
                                     .table = xt_get_u64(c + 4) } };
}

int mdsl_store_list_slices(mdsl_store *s, const void *cursor, uint32_t cursor_len, uint32_t max,
                           struct xt_store_list *out)
{
    memset(out, 0, sizeof *out);
    if (max == 0 || (cursor_len != 0 && cursor_len != MDSL_LIST_CURSOR) ||
        (cursor_len && !cursor))
        return -EINVAL;
    struct list_walk w = { .max = XT_MIN(max, (uint32_t)MDSL_LIST_MAX) };
    if (!(w.v = xt_malloc(w.max * sizeof *w.v)))
        return -ENOMEM;
    struct mdsl_ikey after;
    if (cursor_len)
        cursor_get(cursor, &after);
    int rc = mdsl_index_scan_slices_after(s->idx, cursor_len ? &after : NULL, list_cb, &w);
    if (rc < 0) {
        xt_free(w.v);
        return rc;
    }
    out->n = w.n;
    out->end = !w.full;
    if (w.n) {
        cursor_put(out->cursor, &w.v[w.n - 1]);
        out->cursor_len = MDSL_LIST_CURSOR;
        out->slices = w.v;
    } else {
        if (cursor_len)
            memcpy(out->cursor, cursor, cursor_len);
        out->cursor_len = cursor_len;
        xt_free(w.v);
    }
    return 0;
}

int mdsl_store_count_misplaced(mdsl_store *s, const struct xt_ring *ring, uint32_t self,
                               uint32_t page, unsigned pause_ms, const _Atomic bool *stop,
                               uint64_t *misplaced)
{
    *misplaced = 0;
    if (page == 0 || page > MDSL_LIST_MAX)
        return -EINVAL;
    if (xt_ring_nsites(ring) == 0)
        return -ENOENT;
    uint8_t cursor[MDSL_LIST_CURSOR];
    uint32_t cursor_len = 0;
    uint64_t n = 0;
    for (;;) {
        if (stop && atomic_load(stop))
            return -ECANCELED;
        struct xt_store_list l;
        int rc = mdsl_store_list_slices(s, cursor, cursor_len, page, &l);
        if (rc < 0)
            return rc;
        for (size_t i = 0; i < l.n; i++) {
            const struct xt_store_slice *e = &l.slices[i];
            uint32_t site = self;
            if (e->id.fsid == 0 || e->moved)
                continue;
            xt_ring_lookup(ring, xt_ring_key(e->id.fsid, e->id.table, e->id.slice), &site);
            n += site != self;
        }
        bool end = l.end;
        memcpy(cursor, l.cursor, l.cursor_len);
        cursor_len = l.cursor_len;
        xt_store_list_free(&l);
        if (end)
            break;
        if (pause_ms)
            xt_sleep_ms(pause_ms);
    }
    *misplaced = n;
    return 0;
}
