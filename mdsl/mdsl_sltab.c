/*
 * mdsl_sltab.c -- the slice-state cache (mdsl_sltab.h): a chained hash
 * table keyed by (fsid, table, slice) that doubles its bucket array at load
 * 1 and is emptied when it reaches its entry bound (a cache: refilling
 * costs one index scan per slice touched again).
 */
#include "mdsl_sltab.h"

#include "xt_common.h"

#include <assert.h>

#define SLTAB_DEFAULT_MAX (1u << 20)

struct node {
    struct node *next;
    xt_slice_id id;
    struct mdsl_slstate st;
};

struct mdsl_sltab {
    struct node **b;    /* buckets; cap is a power of two */
    size_t cap, n, max;
};

int mdsl_sltab_new(size_t max, mdsl_sltab **out)
{
    mdsl_sltab *t = xt_calloc(1, sizeof *t);
    if (t) {
        t->cap = 64;
        t->max = max ? max : SLTAB_DEFAULT_MAX;
        t->b = xt_calloc(t->cap, sizeof *t->b);
    }
    if (!t || !t->b) {
        xt_free(t);
        return -ENOMEM;
    }
    *out = t;
    return 0;
}

void mdsl_sltab_clear(mdsl_sltab *t)
{
    for (size_t i = 0; i < t->cap; i++)
        while (t->b[i]) {
            struct node *x = t->b[i];
            t->b[i] = x->next;
            xt_free(x);
        }
    t->n = 0;
}

void mdsl_sltab_free(mdsl_sltab *t)
{
    if (!t)
        return;
    mdsl_sltab_clear(t);
    xt_free(t->b);
    xt_free(t);
}

static size_t slot(size_t cap, xt_slice_id id)
{
    assert(cap && (cap & (cap - 1)) == 0);
    uint64_t h = (id.table ^ ((uint64_t)id.fsid << 32 | id.slice)) * UINT64_C(0x9E3779B97F4A7C15);
    h ^= h >> 29;
    h *= UINT64_C(0xBF58476D1CE4E5B9);
    return (size_t)(h >> 23) & (cap - 1);
}

static struct node **find(const mdsl_sltab *t, xt_slice_id id)
{
    struct node **pp = &t->b[slot(t->cap, id)];
    while (*pp && !xt_slice_id_eq((*pp)->id, id))
        pp = &(*pp)->next;
    return pp;
}

bool mdsl_sltab_get(const mdsl_sltab *t, xt_slice_id id, struct mdsl_slstate *out)
{
    struct node *x = *find(t, id);
    if (x)
        *out = x->st;
    return x != NULL;
}

static void grow(mdsl_sltab *t)
{
    size_t ncap = t->cap * 2;
    struct node **nb = xt_calloc(ncap, sizeof *nb);
    if (!nb)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < t->cap; i++)
        while (t->b[i]) {
            struct node *x = t->b[i];
            t->b[i] = x->next;
            size_t k = slot(ncap, x->id);
            x->next = nb[k];
            nb[k] = x;
        }
    xt_free(t->b);
    t->b = nb;
    t->cap = ncap;
}

int mdsl_sltab_put(mdsl_sltab *t, xt_slice_id id, const struct mdsl_slstate *st)
{
    /* invariants (1) and (2) of mdsl_sltab.h, as far as one entry shows them */
    assert(st->any || !st->has_img);
    assert(!st->has_img || !st->any || (st->lo <= st->img && st->img <= st->hi));
    struct node *x = *find(t, id);
    if (x) {
        x->st = *st;
        return 0;
    }
    if (t->n >= t->max)
        mdsl_sltab_clear(t);
    if (t->n >= t->cap)
        grow(t);
    x = xt_malloc(sizeof *x);
    if (!x)
        return -ENOMEM;
    *x = (struct node){ .id = id, .st = *st };
    struct node **head = &t->b[slot(t->cap, id)];
    x->next = *head;
    *head = x;
    t->n++;
    return 0;
}

void mdsl_sltab_del(mdsl_sltab *t, xt_slice_id id)
{
    struct node **pp = find(t, id);
    struct node *x = *pp;
    if (x) {
        assert(t->n > 0);
        *pp = x->next;
        xt_free(x);
        t->n--;
    }
}
