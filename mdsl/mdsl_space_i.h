/*
 * mdsl_space_i.h -- the store's space accounting (mdsl_space.c):
 * the reserve of a full disk, admission of prepares, the GC threshold and
 * copy room that free space sets, and space back after ring-1 moves
 * (folder drops, idle rolls, sweeps).
 */
#ifndef MDSL_SPACE_I_H
#define MDSL_SPACE_I_H

#include <stdbool.h>
#include <stdint.h>

#include "mdsl_store.h"

/* Recovery, before anything else: finish the drops a crash interrupted,
 * load the sweep-owed mark. */
int mdsl_space_recover(mdsl_store *s);
/* The GC thread's share of space back, after each GC pass: requested drop
 * passes and sweeps, idle rolls. REQUIRES: the background token held. */
void mdsl_space_tick(mdsl_store *s);
/* At open: the reserve and the segment size bound from the device size. */
void mdsl_space_size(mdsl_store *s);
/* May a prepare append `need` more bytes? 0, or -ENOSPC when the free
 * space would fall under the reserve and !may_reserve. Unknown free space
 * never refuses. */
int mdsl_space_admit(mdsl_store *s, uint64_t need, bool may_reserve);
/* The GC threshold now: gc_threshold, or the share of the device in use
 * when higher (up to MDSL_GC_USED_THRESHOLD), rising to
 * MDSL_GC_FULL_THRESHOLD as free space falls to the reserve (*pressed:
 * within 4 reserves of it). */
#define MDSL_GC_USED_THRESHOLD 0.5
#define MDSL_GC_FULL_THRESHOLD 0.8
double mdsl_space_gc_threshold(mdsl_store *s, bool *pressed);
/* How many bytes GC may copy to collect one segment: three quarters of the
 * free space (reserve included; at least 64 KiB left over) once it is under 4 reserves (a segment whose copies do not fit would eat
 * the reserve and free nothing: GC takes an emptier one or waits), else
 * no bound (UINT64_MAX, also when free space is unknown). */
uint64_t mdsl_space_gc_room(mdsl_store *s);
/* Roll every active segment under threshold with dead bytes, idle or not
 * (under pressure). Rolled, or -errno. REQUIRES: the background token. */
int mdsl_space_roll(mdsl_store *s, double threshold);

#endif /* MDSL_SPACE_I_H */
