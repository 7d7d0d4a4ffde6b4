/*
 * mds_store.c -- helpers shared by every mds_store backend.
 */
#include "mds_store.h"

#include <string.h>

#include "xt_common.h"

void mds_load_free(struct mds_load *l)
{
    if (!l)
        return;
    xt_free(l->image.bytes);
    for (size_t i = 0; i < l->ndeltas; i++)
        xt_free(l->deltas[i].bytes);
    xt_free(l->deltas);
    memset(l, 0, sizeof *l);
}

void mds_slice_page_free(struct mds_slice_page *p)
{
    if (!p)
        return;
    xt_free(p->v);
    memset(p, 0, sizeof *p);
}
