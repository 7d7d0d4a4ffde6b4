/*
 * mds_xact_i.h -- internals shared by mds_xact.c (coordinator, prepare)
 * and mds_xact_bg.c (finish, resolver): the rows' formats and the
 * transaction record. Not for other callers; invariants are mds_xact.h's.
 *
 * Decision row: name XT_SYS_DECISION head (placement: op 0's hash) ||
 * txid, where txid = coordinator site u32 || its epoch u32 || seq u64 (LE);
 * an xt_row of type XT_ROW_KV whose group XT_CG_USER0 is one byte, 'C' or
 * 'A'; attr.uuid = mds_xact_tag(name).
 *
 * Pending row: name xt_hash_pend_name(row name); an xt_row of type
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
 *   44+n ...   pre-image  the row's encoding before the op (existed only)
 */
#ifndef MDS_XACT_I_H
#define MDS_XACT_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>

#include "mds_xact.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_row.h"

#define MDS_XACT_DNAME_LEN (XT_SYS_HEAD + 16)
#define MDS_XACT_COMMIT    'C'
#define MDS_XACT_ABORT     'A'

#define PEND_FMT         1
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
    bool existed;
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
    unsigned char pname[XT_SYS_PEND_LEN];
};

/* One op of a decided transaction at a participant, for the finish. */
struct txn_op {
    uint32_t fsid;
    uint64_t table;
    uint8_t name[XT_NAME_MAX];
    size_t name_len;
    uint32_t site;
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
    pthread_cond_t cv;
    struct txn *finish;      /* (mu) decided, to finish, newest first */
    bool stop, started;      /* (mu) */
    const char *crash;       /* $POM_MDS_XACT_CRASH, or NULL */
    pthread_t thread;
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
/* SIGKILL itself when POM_MDS_XACT_CRASH (read once, at mds_xact_new)
 * names this point (fault tests). */
void mds_xact_crash_point(const mds_xact *x, const char *where);

/* "site.epoch.seq" of a decision row's name, for logs. */
static inline void mds_xact_txid_str(const uint8_t *dname, char *buf, size_t cap)
{
    snprintf(buf, cap, "%u.%u.%llu", (unsigned)xt_get_u32(dname + XT_SYS_HEAD),
             (unsigned)xt_get_u32(dname + XT_SYS_HEAD + 4),
             (unsigned long long)xt_get_u64(dname + XT_SYS_HEAD + 8));
}

/* Adds op req (at site) to t. */
void txn_add_op(struct txn *t, const struct xt_req *req, uint32_t site);
void txn_free(struct txn *t);
/* Takes t over: finished on the thread. */
void mds_xact_queue_finish(mds_xact *x, struct txn *t);

#endif /* MDS_XACT_I_H */
