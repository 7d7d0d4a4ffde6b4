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

#include <pthread.h>

/* One site: its persistent record plus what only the leader's memory
 * knows (heartbeat times, load, counters). */
struct r2_site_ent {
    struct xt_site s;          /* s.last_hb_ns: wall clock of the last heartbeat, 0: none */
    uint64_t last_hb_mono;     /* monotonic ns of the last heartbeat or of the grace start */
    struct xt_fs_counter *ctr; /* latest per-fs counters it reported (xt_malloc'd) */
    size_t nctr;
};

/* Everything R2 knows; one consistent snapshot of the store plus runtime. */
struct r2_state {
    struct r2_rec_meta meta;
    int64_t meta_sv;            /* store version of /r2/view; R2_VER_CREATE if absent */
    struct r2_site_ent *sites;  /* sorted by id */
    size_t nsites;
    struct xt_fs_info *fs;      /* sorted by fsid; files/bytes as last flushed */
    size_t nfs;
    xt_ring *ring[2];           /* XT_RING_MDS, XT_RING_MDSL */
    bool fs_reported;           /* some site reported counters since the load */
};

struct r2_mgr {
    r2_store *store;            /* borrowed */
    char self[XT_ADDR_MAX];     /* protected by mu */
    char backend[16];           /* r2_store_backend() */
    uint64_t hb_ns, transient_ns, fail_ns, flush_ns;
    unsigned vnodes;
    uint64_t uuid_range;
    uint64_t (*clock)(void);

    /* Lock order: wmu, then mu. wmu serialises every change of state,
     * store writes included; mu guards the fields below for the short
     * reads and runtime updates (heartbeats) that never wait for I/O. */
    pthread_mutex_t wmu;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct r2_state st;         /* changed under wmu + mu; read under either */
    bool st_valid;              /* protected by mu (written under wmu too) */
    bool leader;                /* as the election last told; protected by mu */
    uint64_t epoch;             /* leadership changes seen; protected by mu */
    uint64_t loaded_epoch;      /* epoch st was loaded in; protected by mu */
    bool need_reload;           /* a write's outcome is unknown; protected by mu */
    bool counters_dirty;        /* protected by mu */
    uint64_t last_flush;        /* protected by wmu */
    bool stopping;              /* protected by mu */
    pthread_t thread;
    bool has_thread;
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
/* Inserts a copy of e (by id; takes e->ctr); returns 0 or -ENOMEM. */
int r2_state_site_insert(struct r2_state *st, const struct r2_site_ent *e);
void r2_state_site_erase(struct r2_state *st, uint32_t id);
/* Inserts a copy of f (takes f->root_bitmap). Returns 0 or -ENOMEM. */
int r2_state_fs_insert(struct r2_state *st, const struct xt_fs_info *f);
void r2_state_fs_erase(struct r2_state *st, uint32_t fsid);

/* Clients UP or TRANSIENT with this fs name. */
uint32_t r2_state_mounts(const struct r2_state *st, const char *fs_name);
/* A copy of f with current counters and mounts; out->root_bitmap is a fresh
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
/* Whether ring 1 is frozen (r2_mgr.h invariant 2): an MDS has registered
 * (an MDS site in the table, or ring 0 changed once: removing every MDS
 * record does not thaw it) while ring 1 holds an MDSL, so the file system
 * may hold slices on the MDSL of ring 1, and moving slice images between MDSL is not built: a changed
 * ring 1 would send loads to MDSL that do not hold the slices. */
bool r2_state_ring1_frozen(const struct r2_state *st);

#endif /* R2_MGR_I_H */
