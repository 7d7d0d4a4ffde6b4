/*
 * r2_mgr_i.h -- internals of the site manager shared by r2_mgr.c (calls,
 * transactions, failure detection) and r2_mgr_state.c (the in-memory state:
 * loading it from the store, lookups, building views).
 */
#ifndef R2_MGR_I_H
#define R2_MGR_I_H

#include "r2_mgr.h"
#include "r2_rec.h"
#include "xt_ring.h"
#include "xt_worker.h"

#include <pthread.h>

/* The ring-1 fields a site last heartbeated (r2_mgr.h invariant 6: memory
 * only; a new leader learns them from the next heartbeats). */
struct r2_r1_report {
    bool reports;              /* its last heartbeat carried ring-1 fields */
    struct xt_r2_hb_ring1 hb;  /* those fields */
};

/* One site: its persistent record plus what only the leader's memory
 * knows (heartbeat times, load, storage and ring-1 reports). */
struct r2_site_ent {
    struct xt_site s;          /* s.last_hb_ns: wall clock of the last heartbeat, 0: none */
    uint64_t last_hb_mono;     /* monotonic ns of the last heartbeat or of the grace start */
    bool has_storage;          /* an MDSL's last heartbeat reported its storage */
    struct xt_storage_report storage;
    bool has_repl;             /* an MDSL's last heartbeat counted its catch-up */
    uint64_t under_replicated; /* docs/mdsl-replicas.md "Catch-up" */
    struct r2_r1_report r1;
};

/* Everything R2 knows; one consistent snapshot of the store plus runtime. */
struct r2_state {
    struct r2_rec_meta meta;
    int64_t meta_sv;            /* store version of /r2/view; R2_VER_CREATE if absent */
    struct r2_site_ent *sites;  /* sorted by id */
    size_t nsites;
    struct xt_fs_info *fs;      /* sorted by fsid; files/bytes unused (usage below) */
    size_t nfs;
    struct r2_usage *usage;     /* /r2/usage, sorted by fsid (r2_mgr_usage.c) */
    size_t nusage;
    xt_ring *ring[2];           /* XT_RING_MDS, XT_RING_MDSL */
    struct r2_rec_ring1 r1;     /* /r2/ring1 (zero when absent: STABLE) */
    xt_ring *prev1;             /* /r2/rings/1p: MOVING only, else NULL */
    xt_ring *next1;             /* PREPARE only: ring 1 with the change applied
                                   (derived, never stored), else NULL */
};

struct r2_mgr {
    r2_store *store;            /* borrowed */
    char self[XT_ADDR_MAX];     /* protected by mu */
    char backend[16];           /* r2_store_backend() */
    uint64_t hb_ns, transient_ns, fail_ns, flush_ns, client_expire_ns;
    uint64_t pause_ns;          /* a pause of this R2 past it restarts failure clocks */
    unsigned vnodes;
    uint64_t uuid_range;
    uint64_t (*clock)(void);

    /* Lock order: wmu, then mu. wmu serialises every change of state,
     * store writes included; mu guards the fields below for the short
     * reads and runtime updates (heartbeats) that never wait for I/O. */
    pthread_mutex_t wmu;
    pthread_mutex_t mu;
    struct r2_state st;         /* changed under wmu + mu; read under either */
    bool st_valid;              /* protected by mu (written under wmu too) */
    bool leader;                /* as the election last told; protected by mu */
    uint64_t epoch;             /* leadership changes seen; protected by mu */
    uint64_t loaded_epoch;      /* epoch st was loaded in; protected by mu */
    bool need_reload;           /* a write's outcome is unknown; protected by mu */
    bool usage_dirty;           /* st.usage differs from /r2/usage; protected by mu */
    uint64_t last_flush;        /* protected by wmu */
    uint64_t (*stall)(void *);  /* protected by mu; r2_mgr_set_stall_probe */
    void *stall_arg;            /* protected by mu */
    xt_worker *monitor;         /* the failure detector's ticks (NULL: no_thread);
                                   protected by mu */
    uint64_t monitor_due_ns;    /* monitor only: when its wait should end */
};

/* ---- r2_mgr_txn.c: one change of state, written with the view ----------- */

/* Ops a transaction can hold besides /r2/view. */
#define R2_TXN_ROOM (R2_STORE_MULTI_MAX - 1)

/* Records staged for one r2_store_multi; starts zeroed, r2_txn_free after. */
struct r2_txn {
    r2_store_op ops[R2_STORE_MULTI_MAX];
    char keys[R2_STORE_MULTI_MAX][R2_KEY_LEN];
    void *bufs[R2_STORE_MULTI_MAX]; /* owned */
    size_t n;
    uint8_t meta[R2_REC_META_SIZE];
};

void r2_txn_free(struct r2_txn *t);
/* Stage a put of key (buf taken in every case, freed by r2_txn_free) or a
 * delete; a site, fs or ring record encoded. 0, -ENOSPC (full), -ENOMEM. */
int r2_txn_put(struct r2_txn *t, const char *key, void *buf, size_t len);
int r2_txn_del(struct r2_txn *t, const char *key);
int r2_txn_site(struct r2_txn *t, const struct xt_site *s);
int r2_txn_fs(struct r2_txn *t, const struct xt_fs_info *f);
int r2_txn_ring(struct r2_txn *t, const xt_ring *r);
/* The ring at an explicit key (/r2/rings/1p). */
int r2_txn_ring_at(struct r2_txn *t, const char *key, const xt_ring *r);
int r2_txn_ring1(struct r2_txn *t, const struct r2_rec_ring1 *r);
/* REQUIRES: m->wmu, m->st loaded. Writes t with /r2/view: a new view
 * version marking `sections` changed, or (sections 0) only a check that
 * nobody else wrote. On success m->st.meta is the new meta. On failure
 * the outcome may be unknown (-ETIMEDOUT), so the state is reloaded before
 * the next change; a compare-and-set lost to another R2 returns -EREMOTE. */
int r2_txn_commit(r2_mgr *m, struct r2_txn *t, int sections);

/* ---- r2_mgr_state.c ------------------------------------------------------- */

void r2_state_clear(struct r2_state *st);
/* Reads a consistent snapshot (meta read before and after; retried when a
 * writer got in between) into *st (runtime fields zero). Returns 0, -EIO
 * (a record does not decode: logged) or the store's -errno. */
int r2_state_load(r2_store *store, unsigned vnodes, struct r2_state *st);

struct r2_site_ent *r2_state_site(const struct r2_state *st, uint32_t id);
struct xt_fs_info *r2_state_fs_by_name(const struct r2_state *st, const char *name);
/* Inserts a copy of e (by id); returns 0 or -ENOMEM. */
int r2_state_site_insert(struct r2_state *st, const struct r2_site_ent *e);
void r2_state_site_erase(struct r2_state *st, uint32_t id);
/* Inserts a copy of f (takes f->root_bitmap). Returns 0 or -ENOMEM. */
int r2_state_fs_insert(struct r2_state *st, const struct xt_fs_info *f);
void r2_state_fs_erase(struct r2_state *st, uint32_t fsid);

/* Clients UP or TRANSIENT with this fs name. */
uint32_t r2_state_mounts(const struct r2_state *st, const char *fs_name);
/* A copy of f with its current usage and mounts; out->root_bitmap is a fresh
 * buffer. Returns 0 or -ENOMEM. */
int r2_state_fs_copy(const struct r2_state *st, const struct xt_fs_info *f,
                     struct xt_fs_info *out);
/* Invariant 3 of r2_mgr.h. Fills *v (caller frees) and *has. */
int r2_state_view(const struct r2_state *st, uint64_t since, const char *leader,
                  const char *store, bool *has, struct xt_view *v);
/* Whether a registering site with this record joins its ring (type
 * MDS/MDSL, state UP/TRANSIENT; an MDSL also needs ring 1 open: r2_mgr.c). */
bool r2_state_in_ring(const struct xt_site *s);
/* Ring of a site type, or -1 (clients). */
int r2_state_ring_of(int type);
/* Whether the MDSL of ring 1 may hold slices (r2_mgr.h invariant 2): an
 * MDS has registered (an MDS site in the table, or ring 0 changed once:
 * removing every MDS record does not reset it) while ring 1 holds an MDSL.
 * Ring 1 then changes only through ring-1 changes (r2_ring1_mode): a
 * plain change would send loads to MDSL that do not hold the slices. */
bool r2_state_ring1_stored(const struct r2_state *st);
/* The encoding of r into *b (b->data xt_malloc'd). 0 or -errno. */
int r2_state_ring_blob(const xt_ring *r, struct xt_ring_blob *b);

/* ---- r2_mgr_usage.c: capacity and per-fs usage ------------------------------ */

/* REQUIRES: m->mu. Folds an MDS heartbeat's counts c[0..n) of incarnation
 * `epoch` into m->st.usage (counts of unknown fs are ignored). 0 or -ENOMEM. */
int r2_usage_beat(r2_mgr *m, uint32_t site, uint64_t epoch, const struct xt_fs_counter *c,
                  size_t n);
/* REQUIRES: m->mu. Sets fsid's totals (the recorded sums stay). 0 or -ENOMEM. */
int r2_usage_set(r2_mgr *m, uint32_t fsid, int64_t files, int64_t bytes);
/* REQUIRES: mu (or a private st). The usage of fsid (NULL: none yet). */
const struct r2_usage *r2_usage_of(const struct r2_state *st, uint32_t fsid);
/* REQUIRES: mu (or a private st). Drops fsid's usage (the fs is dropped). */
void r2_usage_drop(struct r2_state *st, uint32_t fsid);
/* REQUIRES: mu (or a private st). The capacity a heartbeat reply to site
 * `to` carries into *cap (caller frees with xt_capacity_free): the storage,
 * and the usage and quotas of every fs for an MDS, of its fs for a client,
 * of none for an MDSL (to NULL: every fs). 0 or -ENOMEM. */
int r2_usage_capacity(const struct r2_state *st, const struct r2_site_ent *to,
                      struct xt_capacity *cap);
/* REQUIRES: m->wmu, state loaded. Writes /r2/usage when it changed, at
 * most every flush_ns, without a new view version. */
void r2_usage_flush(r2_mgr *m, uint64_t now);
/* Loads /r2/usage into st (absent: empty). 0, -EIO (corrupt), store errors. */
int r2_usage_load(r2_store *store, struct r2_state *st);

/* ---- r2_mgr_ring1.c: ring-1 changes ---------------------------------------- */

/* How ring 1 may change now:
 *  OPEN    no MDS registered yet (or ring 1 empty): MDSL join and leave at
 *          once, as before ring-1 changes existed;
 *  FROZEN  slices may be stored and some MDS of ring 0 does not send the
 *          ring-1 heartbeat fields (today's pom-mds, which would not follow
 *          a change), or ring 0 is empty: nothing changes ring 1;
 *  PHASED  every MDS of ring 0 follows ring 1: changes run in phases. */
enum r2_ring1_mode { R2_RING1_OPEN, R2_RING1_FROZEN, R2_RING1_PHASED };
int r2_ring1_mode(const struct r2_state *st); /* REQUIRES: mu, or a private st */
/* The same for m->st, taking m->mu (heartbeats change the reports under it). */
int r2_ring1_mode_of(r2_mgr *m);
/* REQUIRES: m->mu. Records the ring-1 fields of a heartbeat (r1 may be NULL). */
void r2_ring1_beat(r2_mgr *m, struct r2_site_ent *e, const struct xt_r2_hb_ring1 *r1);
/* REQUIRES: st->r1 and st->ring[1] set. Derives st->next1 in PREPARE (NULL
 * otherwise). Returns 0, -ENOMEM, or -EIO when the record does not fit the
 * rings (logged). */
int r2_ring1_derive(struct r2_state *st);
/* Fills v->ring1 from st (NULL when OPEN and no change ever ran). */
int r2_ring1_view(const struct r2_state *st, struct xt_view *v);
/* REQUIRES: m->wmu, state loaded. One step of the state machine: starts a
 * change when one may start, advances a running one when its condition
 * holds. */
void r2_ring1_tick(r2_mgr *m);
/* REQUIRES: m->wmu, state loaded; s an MDSL, mode not OPEN. Drain (remove
 * false) or remove of s as ring-1 changes allow: 1 when the caller goes on
 * with the plain site change (ring 1 is not touched), 0 when done here,
 * or -errno (-EOPNOTSUPP FROZEN, -EBUSY in use by the change or ring 1). */
int r2_ring1_admin(r2_mgr *m, const struct xt_site *s, bool remove);

#endif /* R2_MGR_I_H */
