/*
 * mdsl_recover_i.h -- the store's restart scan (mdsl_recover.c),
 * run by mdsl_store_open before anything else touches the store.
 */
#ifndef MDSL_RECOVER_I_H
#define MDSL_RECOVER_I_H

#include "mdsl_store.h"

/* Load folders and segments, cut torn tails, replay TSS tails into the
 * index, rebuild pending transactions, compute live bytes. */
int mdsl_recover(mdsl_store *s);

#endif /* MDSL_RECOVER_I_H */
