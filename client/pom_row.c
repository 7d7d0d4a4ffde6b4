/*
 * pom_row.c -- floor 2 of libpomegranate, rows: a row fetched by name, the
 * one conversion of a row's fixed columns to struct stat (pom_row_stat),
 * the uuid allocator, nonces and the tracts id a row names. Calls only
 * the transport (pom_call.c) and xtable/.
 *
 * Invariants:
 *  (1) uuids: the counter row XT_NS_ALLOC_ROW of the super table holds in
 *      `size` the first uuid never handed out. A client claims [size, size
 *      + CHUNK) with an update conditional on the row's version and with
 *      XT_F_SYNC, so a claim is durable before any uuid of it is used, and
 *      two claims never overlap (the loser of a race gets -ESTALE and reads
 *      again). A range a client did not use up is lost, never reused.
 *  (2) pom_row_stat is the only place a row's attributes become a struct
 *      stat; pom_stat_row the only way back (the fields setattr may set).
 */
#include "pom_row_i.h"
#include "xt_hash.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

int pom_row_get(pom_fs *fs, uint64_t table, const char *name, int group,
                struct xt_resp *resp, xt_row *row)
{
    assert(name && group >= POM_ROW_ALL && group <= UINT16_MAX);
    uint16_t want[1] = { (uint16_t)(group > 0 ? group : 0) };
    bool with_groups = group != POM_ROW_META;
    struct xt_req q = { .op = XT_OP_LOOKUP, .t = { .table = table }, .name = name,
                        .name_len = (uint32_t)strlen(name), .flags = XT_F_INLINE,
                        .cols = group == POM_ROW_ALL ? NULL : want,
                        .ncols = group > 0 ? 1 : 0 };
    int rc = pom_call(fs, &q, resp, NULL);
    if (rc < 0) {
        xt_resp_free(resp); /* (an answer may carry a bitmap: -ENOENT does) */
        return rc;
    }
    if (!resp->row) {
        xt_resp_free(resp);
        return -EPROTO;
    }
    rc = with_groups ? xt_row_decode(resp->row, resp->row_len, row)
                     : xt_row_decode_meta(resp->row, resp->row_len, row);
    if (rc < 0) {
        XT_ERR("row %s of table %llu does not decode: %s", name,
               (unsigned long long)table, xt_row_last_error());
        xt_resp_free(resp);
        return -EIO;
    }
    return 0;
}

static mode_t type_bits(uint8_t type)
{
    switch (type) {
    case XT_ROW_DIR: return S_IFDIR;
    case XT_ROW_SYMLINK: return S_IFLNK;
    case XT_ROW_CHR: return S_IFCHR;
    case XT_ROW_BLK: return S_IFBLK;
    case XT_ROW_FIFO: return S_IFIFO;
    case XT_ROW_SOCK: return S_IFSOCK;
    default: return S_IFREG;
    }
}

/* A row's times are signed nanoseconds since 1970 (two's complement in the
 * row's u64): times before 1970 are negative, from 1677 to 2262. */
void pom_ns_ts(uint64_t ns, struct timespec *ts)
{
    int64_t s = (int64_t)ns, sec = s / 1000000000, rem = s % 1000000000;
    if (rem < 0) { /* floor: -0.5 s is second -1, nanosecond 500000000 */
        rem += 1000000000;
        sec--;
    }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)rem;
    assert(ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000);
}

uint64_t pom_ts_ns(const struct timespec *ts)
{
    /* Outside what int64 nanoseconds hold: the nearest time that fits. */
    if (ts->tv_sec >= INT64_MAX / 1000000000)
        return (uint64_t)INT64_MAX;
    if (ts->tv_sec <= INT64_MIN / 1000000000)
        return (uint64_t)INT64_MIN;
    return (uint64_t)((int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec);
}

void pom_row_stat(const xt_row_attr *a, struct stat *st)
{
    memset(st, 0, sizeof *st);
    st->st_ino = a->uuid;
    st->st_mode = type_bits(a->type) | (a->mode & 07777);
    st->st_nlink = xt_row_nlink_shown(a); /* (a count below 2 for now shows 2) */
    st->st_uid = a->uid;
    st->st_gid = a->gid;
    if (a->type == XT_ROW_CHR || a->type == XT_ROW_BLK)
        st->st_rdev = (dev_t)a->generation; /* (make_entry, pom_ops.c) */
    st->st_size = (off_t)a->size;
    st->st_blksize = POM_BLKSIZE;
    st->st_blocks = (blkcnt_t)((a->size + 511) / 512);
    pom_ns_ts(a->atime_ns, &st->st_atim);
    pom_ns_ts(a->mtime_ns, &st->st_mtim);
    pom_ns_ts(a->ctime_ns, &st->st_ctim);
}

/* Claims a new range (invariant 2). REQUIRES: fs->alloc_mu held. */
static int claim_range(pom_fs *fs, uint64_t *lo)
{
    assert(xt_mutex_held(&fs->alloc_mu));
    /* A claim that needed retries (the MDS failing to commit, e.g. on a
     * full disk) answers -ESTALE to its retry, which would loop here: past
     * the retry window, give up as pom_call does. */
    uint64_t deadline = pom_call_deadline(fs);
    for (int attempt = 0; attempt < 1000; attempt++) {
        struct xt_resp r;
        xt_row row;
        int rc = pom_row_get(fs, XT_NS_TABLE_SUPER, XT_NS_ALLOC_ROW, POM_ROW_META, &r, &row);
        if (rc == -ENOENT) {
            /* First claim of this fs: create the counter past our range. */
            xt_row init;
            xt_row_init(&init);
            init.attr.type = XT_ROW_KV;
            init.attr.size = XT_NS_UUID_BASE + POM_UUID_CHUNK;
            struct xt_req q = { .op = XT_OP_CREATE, .t = { .table = XT_NS_TABLE_SUPER },
                                .name = XT_NS_ALLOC_ROW, .name_len = 5,
                                .flags = XT_F_EXCL | XT_F_SYNC, .row = &init };
            bool retried = false;
            rc = pom_call(fs, &q, &r, &retried);
            xt_resp_free(&r);
            if (rc == 0) {
                *lo = XT_NS_UUID_BASE;
                return 0;
            }
            if (rc == -EEXIST)
                continue; /* someone else (or a lost reply of ours): read again */
            return rc;
        }
        if (rc < 0)
            return rc;
        uint64_t next = row.attr.size, ver = row.attr.version;
        xt_resp_free(&r);
        if (next < XT_NS_UUID_BASE || next > UINT64_MAX - POM_UUID_CHUNK) {
            XT_ERR("uuid counter holds %llu: out of range", (unsigned long long)next);
            return -EOVERFLOW;
        }
        xt_row upd;
        xt_row_init(&upd);
        upd.attr.size = next + POM_UUID_CHUNK;
        struct xt_req q = { .op = XT_OP_UPDATE, .t = { .table = XT_NS_TABLE_SUPER },
                            .name = XT_NS_ALLOC_ROW, .name_len = 5,
                            .flags = XT_F_IF_VER | XT_F_SYNC, .row = &upd,
                            .set_mask = XT_ROW_SET_SIZE, .expect_version = ver };
        bool retried = false;
        rc = pom_call(fs, &q, &r, &retried);
        xt_resp_free(&r);
        if (rc == 0 && !retried) {
            *lo = next;
            return 0;
        }
        /* -ESTALE: lost a race. After a retry we cannot tell whether our
         * first attempt won, so that range is abandoned (never reused). */
        if (rc < 0 && rc != -ESTALE)
            return rc;
        if (retried && xt_deadline_passed(deadline))
            return -EIO;
    }
    return -EAGAIN;
}

int pom_uuid_alloc(pom_fs *fs, uint64_t *uuid)
{
    pthread_mutex_lock(&fs->mu);
    if (fs->uuid_next < fs->uuid_end) {
        *uuid = fs->uuid_next++;
        pthread_mutex_unlock(&fs->mu);
        assert(*uuid >= XT_NS_UUID_BASE); /* xt_ns.h (5) */
        return 0;
    }
    pthread_mutex_unlock(&fs->mu);

    pthread_mutex_lock(&fs->alloc_mu);
    int rc = 0;
    pthread_mutex_lock(&fs->mu);
    bool have = fs->uuid_next < fs->uuid_end; /* another thread claimed */
    pthread_mutex_unlock(&fs->mu);
    if (!have) {
        uint64_t lo = 0;
        rc = claim_range(fs, &lo);
        if (rc == 0) {
            pthread_mutex_lock(&fs->mu);
            fs->uuid_next = lo;
            fs->uuid_end = lo + POM_UUID_CHUNK;
            pthread_mutex_unlock(&fs->mu);
        }
    }
    pthread_mutex_unlock(&fs->alloc_mu);
    if (rc < 0)
        return rc;
    return pom_uuid_alloc(fs, uuid);
}

uint64_t pom_nonce(void)
{
    static _Atomic uint64_t ctr;
    uint64_t c = atomic_fetch_add(&ctr, 1) + 1, t = xt_now_ns();
    uint8_t b[24];
    xt_put_u64(b, c);
    xt_put_u64(b + 8, t);
    xt_put_u64(b + 16, (uint64_t)(uintptr_t)&ctr ^ (uint64_t)getpid());
    return xt_hash_bytes(b, sizeof b, 0x6e6f6e6365);
}

uint64_t pom_tracts_id(const xt_row_attr *a)
{
    return (a->flags & XT_ROW_F_BLOB) && a->generation ? a->generation : a->uuid;
}
