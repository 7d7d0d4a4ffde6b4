/*
 * mds_xact_i.h -- internals shared by mds_xact.c (coordinator, finish,
 * the thread), mds_xact_part.c (participant: prepare, resolver) and
 * mds_outbox.c: the pending and decision rows' formats, the transaction
 * record and the module's state. Not for other callers; invariants are
 * mds_xact.h's.
 *
 * Decision row: name XT_SYS_DECISION head (placement: op 0's hash) ||
 * txid, where txid = coordinator site u32 || its epoch u32 || seq u64 (LE);
 * an xt_row of type XT_ROW_KV whose group XT_CG_USER0 is one byte, 'C' or
 * 'A'; attr.uuid = mds_xact_tag(name).
 *
 * Pending row: name xt_hash_pend_name(row name) (fmt PEND_FMT), or for a
 * parent's subdirectory count delivered by an RMU (a commutative delta,
 * which blocks nobody) mds_xact_pend_row_name(row name, count, dname)
 * (fmt PEND_FMT_COUNT); an xt_row of type
 * XT_ROW_KV, attr.uuid = the tag of its transaction, attr.ctime_ns = when
 * it was prepared, whose groups XT_CG_USER0, +1, ... (each at most
 * XT_ROW_GROUP_MAX bytes) concatenate to this record:
 *
 *   off  size  field
 *   0    1     fmt        PEND_FMT (1)
 *   1    1     existed    1: the row was there before the op (pre-image follows)
 *   2    4     dfsid      the decision row's table
 *   6    8     dtable
 *   14   1     dlen       MDS_XACT_DNAME_LEN
 *   15   27    dname      the decision row's name
 *   42   2     name_len   the row's name
 *   44   n     name
 *   44+n ...   pre-image  the row's encoding before the op (existed only);
 *                         PEND_FMT_COUNT: the delta applied, 4 bytes LE
 *                         signed (existed 0), undone by its inverse
 */
#ifndef MDS_XACT_I_H
#define MDS_XACT_I_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "mds_xact.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_row.h"
#include "xt_worker.h"

#define MDS_XACT_DNAME_LEN (XT_SYS_HEAD + 16)
#define MDS_XACT_COMMIT    'C'
#define MDS_XACT_ABORT     'A'

#define PEND_FMT         1
#define PEND_FMT_COUNT   2
#define PEND_NAME_MAX    MDS_XACT_DNAME_LEN /* the longer of the two names */
#define PEND_OFF_FMT     0
#define PEND_OFF_EXISTED 1
#define PEND_OFF_DFSID   2
#define PEND_OFF_DTABLE  6
#define PEND_OFF_DLEN    14
#define PEND_OFF_DNAME   15
#define PEND_OFF_NLEN    (PEND_OFF_DNAME + MDS_XACT_DNAME_LEN)
#define PEND_OFF_NAME    (PEND_OFF_NLEN + 2)

/* A parsed pending row; views into the row (or into buf). */
struct mds_xact_pend {
    uint8_t fmt;             /* PEND_FMT, PEND_FMT_COUNT */
    bool existed;
    int32_t delta;           /* PEND_FMT_COUNT: the nlink change applied */
    uint32_t dfsid;
    uint64_t dtable;
    uint8_t dname[MDS_XACT_DNAME_LEN];
    const uint8_t *name;
    size_t name_len;
    const uint8_t *old;      /* the pre-image (existed) */
    size_t old_len;
    uint64_t uuid, ctime_ns;
    uint8_t *buf;            /* the record when it spans groups (xt_free) */
};

/* What a prepare's derive needs (one per op). */
struct pend_arg {
    uint32_t dfsid;
    uint64_t dtable;
    uint8_t dname[MDS_XACT_DNAME_LEN];
    const void *name;
    size_t name_len;
    bool count;              /* a commutative count delta (PEND_FMT_COUNT) */
    int32_t delta;           /* its requested delta */
    unsigned char pname[PEND_NAME_MAX];
    size_t pname_len;
};

/* One op of a decided transaction at a participant, for the finish. */
struct txn_op {
    uint32_t fsid;
    uint64_t table;
    uint8_t name[XT_NAME_MAX];
    size_t name_len;
    uint32_t site;
    bool count;              /* its pending row is a count row */
};

struct txn {
    struct txn *next;
    uint32_t dfsid, dsite;
    uint64_t dtable, dgen;   /* dgen: the local group holding the decision; 0: synced */
    uint8_t dname[MDS_XACT_DNAME_LEN];
    size_t nops;
    struct txn_op ops[XT_BATCH_ATOMIC_MAX];
};

struct mds_xact {
    struct mds_xact_opts o;
    struct mds_xact_io io;
    atomic_uint_fast64_t seq;
    pthread_mutex_t mu;
    struct txn *finish;      /* (mu) decided, to finish, newest first */
    xt_worker *worker;       /* (mu) the thread; NULL before mds_xact_start */
    uint64_t next_rmu, next_sweep; /* thread: deadlines (xt_time.h) of the next
                                      outbox round and sweep; 0: at once */
    uint64_t abort_gc_next;  /* thread: xt_mono_ns of the next abort_gc */
    /* The outbox (mds_outbox.c), on the thread: */
    atomic_uint_fast64_t rmu_seq;   /* outbox rows' names */
    uint64_t rmu_committed;  /* the group committed at the last round */
    uint64_t rmu_retry;      /* xt_mono_ns of the next round without a commit */
    struct txn *rmu_held;    /* delivered, finished once their group commits */
    struct copy_sent *csent; /* copies in flight, sorted by outbox row
                                (the struct is mds_outbox.c's) */
    size_t csent_n, csent_cap;
};

/* Parse a pending row: 0, -EBADMSG, -ENOMEM. Free p->buf with xt_free. */
int mds_xact_pend_parse(const void *row, size_t len, struct mds_xact_pend *p);
/* The tag (uuid) of the rows of the transaction whose decision is dname. */
uint64_t mds_xact_tag(const uint8_t *dname);
/* The view of a decision row (verdict: one byte, borrowed). */
void mds_xact_decision_view(xt_row *v, const uint8_t *dname, const uint8_t *verdict);
/* A decision row's verdict ('C', 'A') or -EBADMSG. */
int mds_xact_decision_parse(const void *row, size_t len);
/* Reads the decision (routed): 'C', 'A', -ENOENT (none yet), -errno.
 * *holder, *epoch (may be NULL): the site that answered, its epoch. */
int mds_xact_read_decision(mds_xact *x, uint32_t dfsid, uint64_t dtable, const uint8_t *dname,
                           uint32_t *holder, uint32_t *epoch);
/* An atomic batch to site (here: the prepare or the batch handler). */
int mds_xact_send(mds_xact *x, uint32_t site, const struct xt_req *reqs, size_t n,
                  struct xt_resp *resps, size_t *failed, uint64_t *gen);

/* "site.epoch.seq" of a decision row's name, for logs. */
static inline void mds_xact_txid_str(const uint8_t *dname, char *buf, size_t cap)
{
    snprintf(buf, cap, "%u.%u.%llu", (unsigned)xt_get_u32(dname + XT_SYS_HEAD),
             (unsigned)xt_get_u32(dname + XT_SYS_HEAD + 4),
             (unsigned long long)xt_get_u64(dname + XT_SYS_HEAD + 8));
}

/* Whether op q is a parent's subdirectory count delta sent by an RMU's
 * delivery (XT_F_SYS, NLINK_ADD and times only, and the ids of the
 * deltas, XT_CG_RMU_IDS): prepared with a count row, which does not block
 * the row. */
static inline bool mds_xact_is_count(const struct xt_req *q)
{
    const uint32_t ok = XT_ROW_SET_ATIME | XT_ROW_SET_MTIME | XT_ROW_SET_CTIME |
                        XT_ROW_SET_NLINK_ADD | XT_ROW_SET_TIMES_MAX;
    return q->op == XT_OP_UPDATE && (q->flags & XT_F_SYS) && !(q->flags & XT_F_IF_VER) &&
           (q->set_mask & XT_ROW_SET_NLINK_ADD) && !(q->set_mask & ~ok) && q->row &&
           (q->row->ngroups == 0 ||
            (q->row->ngroups == 1 && q->row->groups[0].id == XT_CG_RMU_IDS)) &&
           q->ndrop == 0;
}

/* The pending row's name of op (name, count) in the transaction dname
 * into out (PEND_NAME_MAX bytes); returns its length. */
static inline size_t mds_xact_pend_row_name(const void *name, size_t len, bool count,
                                            const uint8_t *dname, uint8_t *out)
{
    if (!count) {
        size_t n = xt_hash_pend_name(name, len, out);
        assert(n <= PEND_NAME_MAX);
        return n;
    }
    xt_hash_sys_head(out, XT_SYS_COUNT, xt_hash_name(name, len));
    memcpy(out + XT_SYS_HEAD, dname + XT_SYS_HEAD, MDS_XACT_DNAME_LEN - XT_SYS_HEAD);
    return MDS_XACT_DNAME_LEN;
}

/* Whether (name, len) is a pending row's or a count row's name. */
static inline bool mds_xact_pend_row_is(const uint8_t *nm, size_t len)
{
    return xt_hash_is_sys(nm, len) &&
           ((len == XT_SYS_PEND_LEN && nm[2] == XT_SYS_PENDING) ||
            (len == MDS_XACT_DNAME_LEN && nm[2] == XT_SYS_COUNT));
}

/* The transaction over reqs[0..n) (every op strict), owned by site[]
 * (mds_xact.c steps 2-4). held NULL: the finish is queued at once; else
 * *held gets the decided transaction (the caller queues its finish) or
 * NULL. 0 or the failing step's -errno (*failed: the op). */
int mds_xact_txn_run(mds_xact *x, const struct xt_req *reqs, size_t n, const uint32_t *site,
                     struct xt_resp *resps, size_t *failed, struct txn **held);
/* Teaches this MDS the owner's bitmap of q's table (a routed lookup of
 * q's row: the answer's piggyback is merged), after an -EREMOTE. */
void mds_xact_learn(mds_xact *x, const struct xt_req *q);
/* The owner of each op's slice (this MDS's bitmap and ring 0). */
int mds_xact_owners(mds_xact *x, const struct xt_req *reqs, size_t n, uint32_t *site);

/* Calls cb(arg, k, e) for each row of every cached slice of this MDS that
 * holds system rows (meta slices aside), under that slice's read lock: cb
 * must not call into the MDS. 0, or the first negative errno of the cache
 * or of cb (the walk stops there). */
typedef int (*mds_xact_sys_cb)(void *arg, const struct mds_key *k, const xt_slice_entry *e);
int mds_xact_sys_rows(mds_xact *x, mds_xact_sys_cb cb, void *arg);

/* Adds op req (at site) to t. */
void mds_xact_txn_add(struct txn *t, const struct xt_req *req, uint32_t site);
void mds_xact_txn_free(struct txn *t);
/* Takes t over: finished on the thread. */
void mds_xact_queue_finish(mds_xact *x, struct txn *t);
/* Makes group gen of MDS holder durable (this MDS: a local sync); epoch
 * non-zero: -EAGAIN when holder answers as another incarnation. */
int mds_xact_sync_holder(mds_xact *x, uint32_t holder, uint32_t epoch, uint64_t gen);
/* One sweep of the resolver over the cached slices holding system rows
 * (mds_xact_part.c); every abort_gc_ms also a pass of the ABORT rows'
 * collector. On the thread. */
void mds_xact_sweep(mds_xact *x);

#endif /* MDS_XACT_I_H */
