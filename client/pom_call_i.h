/*
 * pom_call_i.h -- floor 1 of libpomegranate, the transport: the handle
 * (struct pom_fs, whose fields each floor owns as marked), the calls with
 * retries and routing (pom_call.c, pom_route.c), and the MDS epochs and
 * lost changes (pom_errseq.c).
 *
 * The floors, each calling only the floors below it (checked by
 * scripts/callgraph.py client --floors client/floors.txt):
 *   1 transport   pom_route.c, pom_errseq.c, pom_call.c      pom_call_i.h
 *   2 rows        pom_row.c, pom_ino.c                       pom_row_i.h
 *   3 files, blob pom_blob_local.c, pom_blob_local_list.c,   pom_file_i.h
 *                 pom_blob.c, pom_file.c, pom_reclaim.c      (pom_blob_i.h)
 *   4 namespace   pom_ns.c, pom_gdt.c; pom_ops.c, pom_xattr.c; pom_ns_i.h
 *                 pom_link.c, pom_gdt_read.c
 *   5 key/value   pom_kv.c
 *   6 the handle  pom_fs.c (open, close, sync)
 * A lower floor learns of an event above it only through the upcalls the
 * handle sets (struct pom_up), never by calling up by name.
 *
 * Invariants:
 *  (1) Changes are acknowledged per MDS incarnation (epoch); what each MDS
 *      acknowledged lives in its struct pom_mds (pom_route.h), protected
 *      by fs->epoch_mu.
 *  (2) A sync vouches only for changes acknowledged by the MDS incarnation
 *      (epoch) that answers it: an MDS killed before a commit group
 *      committed loses that group, and a sync retried against its restarted
 *      successor must not vouch for it. The changes a gone incarnation
 *      acknowledged and no sync covered are recorded by what they touched
 *      (pom_errseq.c), and every handle on those files, directories and
 *      keyspaces answers -EIO once at its next fsync, close or sync.
 *      With many MDS a sync syncs every MDS of the view, each as its site
 *      state says (pom_call.c sync_one): a FAILED MDS is not called and
 *      counts as a restart (-EIO once if it acknowledged unsynced changes);
 *      a DRAINING or removed one gets one short attempt, and finding it
 *      gone is no error.
 *  (3) Lock order: fs->epoch_mu before fs->mu; fs->alloc_mu before fs->mu;
 *      no lock of the handle is held across an RPC but a pom_data's
 *      flush_mu (pom_row_i.h).
 */
#ifndef POM_CALL_I_H
#define POM_CALL_I_H

#include "pomegranate.h"
#include "pomegranate_admin.h"
#include "xt_common.h"
#include "xt_ns.h"
#include "xt_row.h"
#include "xt_rpc_mds.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define POM_UUID_CHUNK    1024u
#define POM_CHG_RING      1024u   /* flushes remembered (struct pom_fs) */

/* What the transport tells the floors above it (set by pom_fs.c when the
 * handle is made; both run without any lock of the handle held). */
struct pom_up {
    /* A new MDS incarnation was seen: what was read from the old one is
     * suspect (open buffers go stale, pom_ino_mark_stale). */
    void (*restarted)(pom_fs *fs);
    /* Whether the inode map still holds key (pom_errseq.c invariant 5).
     * Called under fs->epoch_mu. */
    bool (*held)(pom_fs *fs, uint64_t key);
};

struct pom_fs {
    uint32_t fsid;
    struct pom_up up;              /* immutable once the handle is made */
    struct pom_route *route;       /* the MDS and where each request goes */
    int retry_ms;                  /* hard: how long a call retries (pom_call.c) */
    int soft_ms;                   /* > 0: soft, a call answers -EIO after it */
    int call_ms;                   /* one attempt's timeout (pom_opts) */
    pthread_mutex_t mu;            /* the inode map and the uuid range */
    struct pom_inode **buckets;    /* protected by mu */
    size_t nbuckets, ninodes;      /* protected by mu */
    uint64_t uuid_next, uuid_end;  /* protected by mu: claimed range */
    /* The last flushes of this client (pom_ino_flushed, pom_ino_stat_fix):
     * flush number chg_seq is at chg_ring[chg_seq % POM_CHG_RING]. A ring,
     * not a field of the inode: the map may drop an inode right after its
     * flush, before a listing that read its older row hands that out. */
    uint64_t chg_seq;              /* protected by mu */
    uint64_t chg_ring[POM_CHG_RING]; /* protected by mu: uuids */
    pthread_mutex_t alloc_mu;      /* serialises range claims */
    /* Which MDS incarnations acknowledged our changes (invariant 2): the
     * per-MDS fields of struct pom_mds. */
    pthread_mutex_t epoch_mu;
    uint64_t restarts;             /* epoch_mu: MDS restarts seen (new epochs) */
    struct pom_errseq *es;         /* epoch_mu: lost changes (pom_errseq.c) */
    /* Tract sets no row will name once a change commits (pom_file.c
     * pom_tracts_drop): removed after a sync of every MDS with no restart
     * seen since. */
    pthread_mutex_t gone_mu;
    struct pom_gone *gone;         /* gone_mu: xt_malloc'd */
    size_t ngone, capgone;         /* gone_mu */
    pom_restart_fn restart_cb;     /* pom_set_restart_cb; set before use */
    void *restart_arg;
    struct r2_agent *agent;        /* the mount's R2 registration, or NULL */
    struct pom_blob *blob;         /* the blob tier, or NULL (large files: -EFBIG);
                                      set by pom_set_blob before files are used */
    struct pom_reclaim *reclaim;   /* pom_reclaim_start's thread, or NULL */
    atomic_uint_fast64_t rpcs;     /* MDS round trips sent (every attempt of
                                      pom_call/batch/list/sync): tests count them */
    atomic_uint_fast32_t moves;    /* renames between the send of their batch
                                      and their inode map update (pom_link.c) */
    atomic_uint_fast64_t moved;    /* renames past that point, ever */
};

/* ---- pom_call.c ---------------------------------------------------- */

/* pom_call, pom_list_call: pomegranate_admin.h. */
/* An atomic batch (xt_mds_batch_atomic) with pom_call's retries. Returns
 * 0, the first failing op's -errno (*failed its index), or a transport
 * error (*failed SIZE_MAX). *retried as for pom_call. */
int pom_batch_call(pom_fs *fs, struct xt_req *reqs, size_t n, size_t *failed, bool *retried);
/* reqs[0..n) as independent ops, each applied on its own row (not
 * atomic together), grouped by the MDS this client's view places each at
 * and sent as one non-atomic batch RPC per MDS (more when one passes
 * 512 ops or about 8 MiB), all MDS at once. Ops of one key are applied
 * in their order; an op answered with a transient error (a transport
 * failure, a slice in a split, a moved slice: pom_call's retries) is sent
 * again, alone for its key, in a later round with a pause, until the
 * retry window ends. rcs[i] gets op i's answer (0 or -errno), resps[i]
 * its result (xt_resp_free each); retried[i] (may be NULL) whether an
 * earlier attempt of it may have been applied (its reply was lost). Returns 0, or -ENOMEM (nothing sent). */
int pom_multi_call(pom_fs *fs, struct xt_req *reqs, size_t n, struct xt_resp *resps, int *rcs,
                   bool *retried);
/* Before attempt `attempt` (from 0) of an operation that reads rows, sends a
 * conditional batch and starts again when a row changed under it: no pause
 * for the first few (a race with another client settles at once), then one
 * doubling from 1 ms to 100 ms, so that an operation's attempts span the
 * seconds an MDS takes to restart instead of a few milliseconds. */
void pom_conflict_pause(int attempt);
/* A sync of every MDS (invariant 2), without the queued tract sets
 * (pom_gone_sync) and without the report of lost changes, which the caller
 * makes for its handle: 0 or a transport error. */
int pom_sync_call(pom_fs *fs);
/* MDS restarts this client has seen so far (a new epoch in a reply). A
 * change acknowledged when the count was c is committed once a sync
 * returns with the count still c. */
uint64_t pom_restart_count(pom_fs *fs);
/* A sync of every MDS with one attempt each, for the library's own needs
 * (tract sets waiting for a commit): 0 or a negative errno. */
int pom_sync_quiet(pom_fs *fs);
/* The monotonic time (xt_mono_ns) a call begun now gives up at: the end
 * of its retry window (hard or soft). */
uint64_t pom_call_deadline(pom_fs *fs);

/* ---- pom_errseq.c: lost changes and who was told ------------------- */

struct pom_mds;
int pom_es_init(pom_fs *fs);
void pom_es_free(pom_fs *fs);
/* MDS m acknowledged (its ack_seq is this change's) a change touching
 * keys[0..n) (0 entries are skipped). REQUIRES: fs->epoch_mu held. */
void pom_es_acked(pom_fs *fs, struct pom_mds *m, const uint64_t *keys, size_t n);
/* A sync answered by the incarnation that acknowledged m's changes up to
 * ack seq seq0: they are committed. REQUIRES: fs->epoch_mu held. */
void pom_es_committed(pom_fs *fs, struct pom_mds *m, uint64_t seq0);
/* m's incarnation is gone (restart, FAILED): its unsynced changes count as
 * lost, a loss event for each key they touched. true when there were
 * some. REQUIRES: fs->epoch_mu held. */
bool pom_es_lose(pom_fs *fs, struct pom_mds *m);
/* The sample a new handle on key starts from. */
uint64_t pom_es_sample(pom_fs *fs, uint64_t key);
/* -EIO when a loss of key (or one not traced to keys) happened after
 * *sample, which then moves past it (told once); else 0. */
int pom_es_check(pom_fs *fs, uint64_t key, uint64_t *sample);
/* pom_sync's: -EIO once per loss of any key since its last -EIO. */
int pom_es_check_fs(pom_fs *fs);

#endif /* POM_CALL_I_H */
