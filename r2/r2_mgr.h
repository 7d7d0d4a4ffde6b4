/*
 * r2_mgr.h -- the site manager of R2 (docs/r2.md): sites and their
 * failure states, ring 0 (slices -> MDS) and ring 1 (slices -> MDSL),
 * file-system instances, uuid ranges, and the versioned view of all of it,
 * kept in an r2_store (records: r2_rec.h, docs/r2.md).
 *
 * Site states and the function behind each transition:
 *
 *   register ----> UP <------------------------------+
 *                  |  no heartbeat for one interval   | heartbeat or
 *                  v  + slack (r2_mgr_tick)           | re-register
 *              TRANSIENT                              | (prev_id):
 *                  |  none for fail_after intervals   | rejoins ring 0
 *                  v  (r2_mgr_tick): an MDS leaves    | (an MDSL never
 *                  |  ring 0, an MDSL stays in ring 1 | left ring 1)
 *                FAILED ------------------------------+
 *
 *   any --r2_mgr_site_drain--> DRAINING (leaves its ring at once; failure
 *                              detection no longer applies)
 *   any --r2_mgr_site_remove-> record deleted, out of its ring
 *   (for an MDSL once ring 1 may hold slices: see invariant 2)
 *
 * A client site never FAILS (clients come and go; a vanished one is no
 * fault of the cluster):
 *
 *   register --> UP --silent one interval + slack--> TRANSIENT
 *                 |                                      |
 *                 +--r2_mgr_site_leave (clean unmount)---+--silent client_expire
 *                 v                                      v   (r2_mgr_tick)
 *              record deleted <--------------------------+
 *
 * Invariants:
 *  (1) Only the leader changes state, and every change is one
 *      r2_store_multi that also puts /r2/view with a compare-and-set on its
 *      store version and a view version one higher: a view version names
 *      exactly one state, and a deposed leader's write fails (-ESTALE).
 *  (2) An MDS is in ring 0 iff its state is UP or TRANSIENT: ring 0 (the
 *      caches) follows failures. Ring 1 (where slices are stored) follows
 *      none: an MDSL joins it when it registers while ring 1 is open and
 *      leaves it only by drain or remove. Once an MDS has registered (an
 *      MDS site in the table, or ring 0 version > 0) while ring 1 holds an
 *      MDSL, slices may be stored and ring 1 changes only through ring-1
 *      changes (r2_mgr_ring1.c): a new MDSL is UP but OUT, drain of an
 *      MDSL of ring 1 queues it, remove waits until it is DRAINED (-EBUSY).
 *      While some MDS of ring 0 does not send the ring-1 heartbeat fields
 *      (it would not follow a change) ring 1 is FROZEN: no change starts,
 *      drain and remove of an MDSL in use are refused (-EOPNOTSUPP).
 *      Clients and R2 sites are in no ring.
 *  (3) Each view section (sites, rings, fs) remembers the view version of
 *      its last change; a view "since v" carries exactly the sections
 *      changed after v (all of them when v is 0 or from another history,
 *      i.e. above the current version; none when v is current).
 *  (4) Ids (sites, fsids, uuid ranges) come from store counters and are
 *      never handed out twice, across restarts and leader changes. Uuid
 *      range 0 is reserved (uuid 1 is every fs's root).
 *  (5) A new leader loads everything from the store and starts every site's
 *      failure clock afresh, so a leader change never fails a live site.
 *  (6) Heartbeats that change no state never touch the store; per-fs
 *      usage is kept in memory and flushed to /r2/usage now and then
 *      (without a view version change; r2_mgr_usage.c).
 *
 * Every call returns 0 or -errno: -EREMOTE when this R2 does not lead (all
 * calls but r2_mgr_get_view), -EINVAL bad argument, -ENOENT unknown site or
 * fs, -EEXIST duplicate fs name, -EBUSY fs mounted, and the store's errors
 * (-ENOTCONN, -ETIMEDOUT, -EIO) when it cannot be reached or read.
 * Thread-safe.
 */
#ifndef R2_MGR_H
#define R2_MGR_H

#include "r2_store.h"
#include "xt_rpc_r2.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct r2_mgr r2_mgr;

#define R2_MGR_UUID_RANGE  (UINT64_C(1) << 20)
#define R2_MGR_MAX_SITES   65536
#define R2_MGR_MAX_FS      65536
#define R2_MGR_MAX_COUNTERS 4096  /* per heartbeat */
#define R2_MGR_CLIENT_EXPIRE_MS 60000

struct r2_mgr_opts {
    r2_store *store;          /* borrowed; must outlive the manager */
    const char *self_addr;    /* this R2's service address (copied): the
                                 leader name its views carry */
    unsigned hb_interval_ms;  /* 0: 1000 */
    unsigned fail_after;      /* intervals without heartbeat -> FAILED; 0: 5 */
    unsigned client_expire_ms; /* a client site silent this long is removed;
                                  0: R2_MGR_CLIENT_EXPIRE_MS */
    unsigned vnodes;          /* ring vnodes per site; 0: XT_RING_VNODES_DEFAULT */
    uint64_t uuid_range;      /* uuids per range; 0: R2_MGR_UUID_RANGE */
    bool no_thread;           /* tests: no monitor thread, call r2_mgr_tick */
    uint64_t (*clock)(void);  /* monotonic ns; NULL: xt_mono_ns (tests) */
};

/* Creates the manager (not leading until r2_mgr_leader_cb(true)) and, unless
 * no_thread, its monitor thread. *out is freed with r2_mgr_free. Returns 0,
 * -EINVAL or -ENOMEM. */
int r2_mgr_new(const struct r2_mgr_opts *o, r2_mgr **out);
/* Stops the monitor thread (it uses the store: call before closing the
 * store). Idempotent; calls other than ticks keep working. */
void r2_mgr_stop(r2_mgr *m);
/* Stops the monitor thread and frees m. REQUIRES: no call is running and
 * no election callback can come (the store is closed or never elected). */
void r2_mgr_free(r2_mgr *m);

/* Sets the address views name as the leader (a copy; longer than
 * XT_ADDR_MAX-1 bytes is cut). For daemons that learn their port only once
 * listening: call before joining the election. */
void r2_mgr_set_self(r2_mgr *m, const char *addr);

/* Election callback (r2_store_leader_fn): arg is the r2_mgr. Only flags
 * the change; the next call or tick loads the state from the store. */
void r2_mgr_leader_cb(void *arg, bool leader);

/* One pass of failure detection and counter flushing (the monitor thread
 * runs it every quarter interval). */
void r2_mgr_tick(r2_mgr *m);
/* The same, told that this R2 itself did not run, or took no requests, for
 * paused_ns (the monitor woke that late, or the server was stalled). A pause past the larger of one interval + slack
 * and half the failure time says nothing about the sites: every failure
 * clock restarts, as under a new leader (invariant 5), and no site changes
 * state in this pass. */
void r2_mgr_tick_after(r2_mgr *m, uint64_t paused_ns);
/* How the monitor learns that this R2 took no requests for a while: before
 * each tick it calls stall(arg) (under the manager's lock: it must be quick
 * and take no lock of the manager), the longest stretch in ns since its
 * previous call with no server thread free (xt_rpc_server_stall_ns), and
 * counts it as a pause. NULL removes it; after the call returns the old
 * probe is not called again. */
void r2_mgr_set_stall_probe(r2_mgr *m, uint64_t (*stall)(void *arg), void *arg);

/* Registers a site; prev_id != 0 rejoins under that id if it is known with
 * the same type (a new id is handed out otherwise). fs_name: clients only
 * ("" or NULL: none), must name an existing fs. MDS sites get a fresh uuid
 * range and join ring 0; an MDSL joins ring 1 only while it is open
 * (invariant 2: a new MDSL of a frozen ring 1 is UP in no ring, logged).
 * *view (may be NULL) receives the full view; the caller frees it with
 * xt_view_free. */
int r2_mgr_register(r2_mgr *m, int type, const char *addr, uint64_t capacity, uint32_t prev_id,
                    const char *fs_name, const char *metrics, uint32_t *site_id,
                    struct xt_view *view);
/* A heartbeat of site_id with its load and per-fs counters (c[0..n-1], read
 * during the call). *has_view tells whether *view (freed by the caller with
 * xt_view_free) holds the sections changed after view_version.
 * -ENOENT: the site is unknown (removed, or the store was lost): register. */
/* r1 (may be NULL): the ring-1 fields of the heartbeat, kept in memory
 * only (r2_mgr_ring1.c); a site that sends none keeps ring 1 frozen. */
/* u (may be NULL): the capacity fields (docs/r2.md "Capacity and quotas"):
 * an MDS's counts c[] since its incarnation u->epoch (ignored without
 * it), an MDSL's storage. *cap (may be NULL) gets the capacity of the
 * cluster (freed by the caller with xt_capacity_free). */
int r2_mgr_heartbeat(r2_mgr *m, uint32_t site_id, uint64_t view_version, double load,
                     const struct xt_fs_counter *c, size_t n, const struct xt_r2_hb_ring1 *r1,
                     const struct xt_r2_hb_usage *u, bool *has_view, struct xt_view *view,
                     struct xt_capacity *cap);
/* The view since `since` (invariant 3). Works on followers too (read from
 * the store); view->leader names the leader ("" if none). */
int r2_mgr_get_view(r2_mgr *m, uint64_t since, bool *has_view, struct xt_view *view);
/* The whole view from memory, without I/O (for /metrics): 0, or -EREMOTE
 * when this R2 does not lead with its state loaded (*view zeroed). Free
 * with xt_view_free. */
int r2_mgr_view_local(r2_mgr *m, struct xt_view *view);

/* backend NULL/"": "local"; path NULL/"": the client's default
 * (<data>/blobs/<fsid>). *out (may be NULL) receives the new fs; the caller
 * frees out->root_bitmap with xt_free. */
int r2_mgr_fs_create(r2_mgr *m, const char *name, const char *backend, const char *path,
                     struct xt_fs_info *out);
/* name NULL/"": all, by fsid; else that one (-ENOENT). *fs is freed with
 * xt_fs_info_free_array (NULL when *n is 0). */
int r2_mgr_fs_list(r2_mgr *m, const char *name, struct xt_fs_info **fs, size_t *n);
/* -EBUSY while a client site with this fs is UP or TRANSIENT, unless force. */
int r2_mgr_fs_drop(r2_mgr *m, const char *name, bool force);
/* Bumps the key generation of fs `name` (docs/security.md "Client keys"):
 * its current client key stops working for new connections. *out gets
 * the fs (caller frees out->root_bitmap with xt_free). */
int r2_mgr_fs_rotate_key(r2_mgr *m, const char *name, struct xt_fs_info *out);
/* Sets fs name's quotas (0: none; each <= INT64_MAX); *out gets its record
 * (out->root_bitmap freed by the caller with xt_free). */
int r2_mgr_fs_quota(r2_mgr *m, const char *name, uint64_t quota_files, uint64_t quota_bytes,
                    struct xt_fs_info *out);
/* Sets fs name's inode and byte totals (each <= INT64_MAX; what `pomctl
 * fsck` counted on a quiet fs): the recorded sums of the MDS incarnations
 * stay, so later heartbeats add only what changes after. Written to
 * /r2/usage at once. */
int r2_mgr_fs_set_usage(r2_mgr *m, const char *name, uint64_t files, uint64_t bytes);
/* The key generation of fsid into *gen; -ENOENT if no such fs. For the
 * RPC server's handshake (xt_rpc_server_opts.key_gen): never blocks on
 * the store. */
int r2_mgr_fs_key_gen(void *m, int32_t fsid, uint64_t *gen);

/* Drain: MDS and MDSL sites only (-EINVAL for clients). Idempotent.
 * For an MDSL in use by ring 1 once slices may be stored (invariant 2):
 * drain queues it for the next ring-1 change (a JOINING one's join is
 * cancelled), -EBUSY when it is the last MDSL of ring 1; remove answers
 * -EBUSY until it is DRAINED; both -EOPNOTSUPP while ring 1 is FROZEN. */
int r2_mgr_site_drain(r2_mgr *m, uint32_t site_id);
int r2_mgr_site_remove(r2_mgr *m, uint32_t site_id);
/* A client site ends its registration (a clean unmount): its record is
 * deleted, its mount no longer counts. -EINVAL for servers (they leave by
 * drain and remove), -ENOENT unknown site. */
int r2_mgr_site_leave(r2_mgr *m, uint32_t site_id);
/* A fresh range [*lo, *hi) of at least count (1..2^40) uuids for MDS
 * site_id, a whole number of uuid ranges; it becomes the site's range in
 * the view. */
int r2_mgr_alloc_uuids(r2_mgr *m, uint32_t site_id, uint64_t count, uint64_t *lo,
                       uint64_t *hi);

#ifdef __cplusplus
}
#endif
#endif /* R2_MGR_H */
