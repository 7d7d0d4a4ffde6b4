/*
 * xt_store.c -- the free functions of the storage contract (xt_store.h),
 * shared by the MDS, the Thrift glue and the MDSL engine.
 */
#include "xt_store.h"

#include <string.h>

#include "xt_common.h"

void xt_store_load_free(struct xt_store_load *l)
{
    if (!l)
        return;
    xt_free(l->image.data);
    for (size_t i = 0; i < l->ndeltas; i++)
        xt_free(l->deltas[i].data);
    xt_free(l->deltas);
    memset(l, 0, sizeof *l);
}

void xt_store_list_free(struct xt_store_list *l)
{
    if (!l)
        return;
    xt_free(l->slices);
    memset(l, 0, sizeof *l);
}
