/*
 * pom_ns.c -- floor 4.0 of libpomegranate: what the namespace operations
 * (pom_ops.c, pom_link.c) share: requests conditional on a row's identity,
 * the change of a parent directory's own row that rides in their batches,
 * directory checks, and the removal of a link stub with its ILT nlink
 * change (xt_ns.h (3)). Calls floors 1-3 only.
 *
 * Invariants:
 *  (1) Every op that changes or removes a row read earlier is conditional
 *      on that read's uuid and version (pom_ns_cond).
 *  (2) A link stub and its ILT row change in one atomic batch.
 */
#include "pom_ns_i.h"

#include <assert.h>
#include <string.h>

/* Invariant (1), pom_link.c (2): a name created again restarts at version
 * 0, so the uuid is checked too. */
void pom_ns_cond(struct xt_req *q, uint64_t uuid, uint64_t version)
{
    q->flags |= XT_F_IF_VER | XT_F_IF_UUID;
    q->expect_uuid = uuid;
    q->expect_version = version;
}

int pom_ns_fixed(pom_fs *fs, const xt_row_attr *a)
{
    uint32_t fl = a->flags;
    if (xt_ns_is_stub(a)) { /* the flags are the ILT row's */
        struct xt_resp r;
        xt_row row;
        memset(&r, 0, sizeof r);
        int rc = pom_stub_follow(fs, a->uuid, POM_ROW_META, &r, &row);
        if (rc == -ENOENT)
            return 0; /* a stray stub: nothing holds it */
        if (rc < 0)
            return rc;
        fl = row.attr.flags;
        xt_resp_free(&r);
    }
    return fl & XT_NS_ROW_F_FIXED ? -EPERM : 0;
}

struct xt_req pom_ns_req(int op, uint64_t table, const char *name, uint32_t flags)
{
    struct xt_req q;
    memset(&q, 0, sizeof q);
    q.op = op;
    q.t.table = table;
    q.name = name;
    q.name_len = (uint32_t)strlen(name);
    q.flags = flags;
    return q;
}

int pom_dir_upd_op(pom_fs *fs, pom_ino dir, int delta, uint32_t entry, uint64_t now,
                   struct pom_dir_upd *u, struct xt_req *q)
{
    assert(delta >= -1 && delta <= 1); /* one subdirectory gained or lost per change */
    assert(entry != 0 && !(entry & ~(XT_ROW_SET_ENTRY_ADD | XT_ROW_SET_ENTRY_DEL)));
    /* No read: times are last-writer-wins and the count changes by its
     * delta at the MDS, under the slice lock (XT_ROW_SET_NLINK_ADD: a
     * counted row takes the exact sum; an uncounted 1 stays 1), so
     * entry changes in one directory never race on its version. The op is
     * conditional on the uuid alone: its failure means the row is not
     * where the inode map says (removed or moved by another client). */
    uint8_t type;
    int rc = pom_ino_where(fs, dir, &u->table, u->name, &type);
    if (rc < 0)
        return rc;
    if (type != XT_ROW_DIR)
        return -ENOTDIR;
    xt_row_init(&u->row);
    u->row.attr.mtime_ns = u->row.attr.ctime_ns = now;
    /* The MDS refuses the change when dir's inode flags forbid it (the
     * flags it holds, not a copy here that another client's chattr made
     * stale). */
    uint32_t set = XT_ROW_SET_MTIME | XT_ROW_SET_CTIME | entry;
    if (delta != 0) {
        u->row.attr.nlink = (uint32_t)(int32_t)delta; /* read back as signed */
        set |= XT_ROW_SET_NLINK_ADD;
    }
    *q = pom_ns_req(XT_OP_UPDATE, u->table, u->name, XT_F_IF_UUID);
    q->row = &u->row;
    q->set_mask = set;
    q->expect_uuid = dir;
    return 0;
}

int pom_dir_check(pom_fs *fs, pom_ino dir)
{
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    uint8_t type;
    int rc = pom_ino_where(fs, dir, &table, name, &type);
    if (rc < 0)
        return rc;
    return type == XT_ROW_DIR ? 0 : -ENOTDIR;
}

int pom_dir_empty(pom_fs *fs, uint64_t dir)
{
    static const uint16_t none[1] = { 0 };
    /* An empty page is not an empty table (pom_readdir): go on to its
     * next cookie until a name or the end. */
    for (uint64_t cookie = 0; cookie < POM_COOKIE_END;) {
        struct xt_list_req lq = { .t = { .fsid = fs->fsid, .table = dir, .slice_hint = -1 },
                                  .cookie = cookie, .max = 1, .cols = none, .ncols = 0 };
        struct xt_list_resp lr;
        int rc = pom_list_call(fs, &lq, &lr);
        if (rc == -ENOENT)
            return 1;
        if (rc < 0)
            return rc;
        size_t n = lr.n;
        uint64_t next = lr.next_cookie;
        xt_list_resp_free(&lr);
        if (n > 0)
            return 0;
        if (next <= cookie)
            break;
        cookie = next;
    }
    return 1;
}

/* The ops that drop one name of the linked file uuid from its ILT row:
 * nlink - 1, or the row's delete at the last name. Appends to q (one op;
 * `upd` must outlive the call). *gone: this was the last name. *file: the
 * ILT row's attributes, which name the file's tracts (a stub's do not:
 * pom_data_gone needs these). */
int pom_ns_ilt_drop(pom_fs *fs, uint64_t uuid, char *in, xt_row *upd, struct xt_req *q,
                       bool *gone, xt_row_attr *file)
{
    struct xt_resp r;
    xt_row row;
    memset(&r, 0, sizeof r);
    int rc = pom_stub_follow(fs, uuid, POM_ROW_META, &r, &row);
    if (rc < 0)
        return rc;
    assert(row.attr.uuid == uuid && !xt_ns_is_stub(&row.attr)); /* the ILT row itself */
    xt_ns_id_name(uuid, in);
    *file = row.attr;
    *gone = row.attr.nlink <= 1;
    if (*gone) {
        *q = pom_ns_req(XT_OP_DELETE, XT_NS_TABLE_ILT, in, 0);
    } else {
        xt_row_init(upd);
        upd->attr.nlink = row.attr.nlink - 1;
        upd->attr.ctime_ns = xt_now_ns();
        *q = pom_ns_req(XT_OP_UPDATE, XT_NS_TABLE_ILT, in, 0);
        q->row = upd;
        q->set_mask = XT_ROW_SET_NLINK | XT_ROW_SET_CTIME;
    }
    pom_ns_cond(q, uuid, row.attr.version);
    xt_resp_free(&r);
    return 0;
}

int pom_unlink_stub(pom_fs *fs, pom_ino parent, const char *name, const xt_row_attr *stub)
{
    assert(xt_ns_is_stub(stub) && stub->type != XT_ROW_DIR); /* xt_ns.h (3) */
    char in[XT_NS_ID_LEN + 1];
    xt_row upd;
    struct xt_req q[4];
    q[0] = pom_ns_req(XT_OP_DELETE, parent, name, 0);
    pom_ns_cond(&q[0], stub->uuid, stub->version);
    bool gone = false;
    xt_row_attr file = *stub; /* the stub alone when the ILT row is missing */
    int rc = pom_ns_ilt_drop(fs, stub->uuid, in, &upd, &q[1], &gone, &file);
    size_t n = 2, failed, np = SIZE_MAX;
    if (rc == -ENOENT) {
        /* A stub without its ILT row cannot come from these batches; take
         * the stray name away alone rather than keep it forever. */
        XT_WARN("stub %s of uuid %llu has no ILT row: removing it", name,
                (unsigned long long)stub->uuid);
        n = 1;
        gone = true;
    } else if (rc < 0) {
        return rc;
    } else if (file.flags & XT_NS_ROW_F_FIXED) {
        return -EPERM; /* immutable, append-only (pom_ns_fixed) */
    }
    size_t ilt = n == 2 ? 1 : SIZE_MAX;
    uint64_t now = xt_now_ns();
    /* The last name: the file's GDT row goes too (a copy, never failing
     * the batch; before the parent's op, which a retry may leave out). */
    struct xt_ns_gdt gb;
    if (gone && (rc = pom_gdt_op(stub->uuid, 0, NULL, now, &gb, &q[n])) == 0)
        n++;
    /* The parent's times in the same batch (invariant 5). */
    struct pom_dir_upd pu;
    if (pom_dir_upd_op(fs, parent, 0, XT_ROW_SET_ENTRY_DEL, now, &pu, &q[n]) == 0 &&
        !(pu.table == parent && strcmp(pu.name, name) == 0)) /* a stale map */
        np = n++;
    bool retried = false;
    rc = pom_batch_call(fs, q, n, &failed, &retried);
    if (np != SIZE_MAX && failed == np && pom_parent_missing(rc)) {
        /* The parent's row is not where the map says (moved by another
         * client): remove the name without it, only a time is lost. */
        retried = false;
        rc = pom_batch_call(fs, q, --n, &failed, &retried);
    }
    if (rc < 0 && retried && pom_name_holds(fs, parent, name, stub->uuid) == 0)
        rc = 0;
    if (rc < 0)
        return rc == -ENOENT && ilt != SIZE_MAX && failed == ilt ? -ESTALE : rc;
    if (gone) {
        /* The file's last name went: here goes its storage too. */
        pom_ino_unlinked(fs, &file);
        pom_data_gone(fs, &file); /* tracts: the ILT row names them */
    }
    return 0;
}
