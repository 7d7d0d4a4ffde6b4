/*
 * mdsl_gc_i.h -- the store's garbage collection (mdsl_gc.c):
 * one pass over closed segments, and the background thread that runs the
 * passes and the space tasks (mdsl_space_i.h). The background token
 * (mdsl_handle_i.h) serialises them.
 */
#ifndef MDSL_GC_I_H
#define MDSL_GC_I_H

#include "mdsl_store.h"

/* Collect up to max_segments closed segments under `threshold` live ratio.
 * Segments freed, or -errno. REQUIRES: the background token held. */
int mdsl_gc_pass(mdsl_store *s, unsigned max_segments, double threshold);
int mdsl_gc_start(mdsl_store *s);
/* Ends the GC thread's wait now (no-op without one): a sweep or drop was
 * asked, or free space fell under the reserve. Any thread, any lock. */
void mdsl_gc_wake(mdsl_store *s);
void mdsl_gc_stop(mdsl_store *s);

#endif /* MDSL_GC_I_H */
