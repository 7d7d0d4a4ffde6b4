/*
 * pom_xattr.c -- extended attributes of libpomegranate: the XT_CG_XATTR
 * group of the inode's row in the xattr sub-format of xt_row.h.
 *
 * Invariants:
 *  (1) A change reads the group with the row's uuid and version and writes
 *      the new group conditional on that version (-ESTALE: read again), so
 *      concurrent changes of different names never lose one another.
 *  (2) Only the user., trusted. and security. namespaces and the two
 *      POSIX ACLs (system.posix_acl_access, system.posix_acl_default) are
 *      stored; other system.* names and unknown prefixes answer -ENOTSUP
 *      rather than being stored as plain bytes nobody enforces.
 *  (3) The group is that of the inode's attribute row: for a linked file
 *      its ILT row, never a link stub (stubs carry no xattrs; pom_ino_row
 *      follows a stub met late and moves the map there). The write is
 *      conditional on the (uuid, version) read, so a stub that another
 *      client makes of the row in between fails it (-ESTALE: read again,
 *      now through the stub).
 *  (4) A file unlinked here and still open here has no row: its group is
 *      the copy in its open state (pom_ino.c (4)), read and changed there
 *      by the same code (get_in, list_in, edit) as a row's. Every change
 *      of a row's group is also given to the open state, so the copy is
 *      current when the last name goes through another path (rename over
 *      it, a link stub removed; pom_ops.c re-reads it at a plain unlink).
 *  (5) An ACL is stored only once pom_acl_check accepted it (-EINVAL),
 *      a default ACL only on a directory (-EACCES). Setting the access
 *      ACL sets the mode's permission bits from it in the same row update
 *      (so the two always agree), and an ACL the mode says all of is
 *      removed rather than stored, as a local file system does
 *      (docs/client.md "POSIX ACLs").
 *
 * Floor 4.2 of libpomegranate (pom_ns_i.h): calls floors 1-3.
 */
#include "pom_acl_i.h"
#include "pom_ns_i.h"

#include <string.h>
#include <sys/xattr.h>

#define MAX_TRIES 64

static int name_check(const char *name)
{
    if (!name || !name[0])
        return -EINVAL;
    if (strlen(name) > XT_ROW_XATTR_NAME_MAX)
        return -ERANGE;
    if (strncmp(name, "user.", 5) && strncmp(name, "trusted.", 8) &&
        strncmp(name, "security.", 9) && !pom_acl_name(name))
        return -ENOTSUP;
    return 0;
}

/* The current xattr group of ino (with the row's version): pom_ino_row
 * reads where the inode map points and follows a link stub to the ILT row
 * (invariant 3), so a file another client linked after our lookup is not
 * read or written as its stub. */
static int read_group(pom_fs *fs, pom_ino ino, uint64_t *table, char *name, struct xt_resp *r,
                      xt_row *row, const uint8_t **grp, uint32_t *glen)
{
    int rc = pom_ino_row(fs, ino, XT_CG_XATTR, table, name, r, row);
    if (rc < 0)
        return rc;
    const xt_row_group *g = xt_row_view_group(row, XT_CG_XATTR);
    *grp = g ? g->ptr : NULL;
    *glen = g ? g->len : 0;
    return 0;
}

/* The new group of a change, from (grp, glen): remove false sets xname to
 * (value, size) with `how` (XT_ROW_XATTR_CREATE / _REPLACE / 0), remove
 * true removes it. *ng is xt_malloc'd (NULL: empty group). *mode (the
 * permission bits of a file, a directory when dir) takes an access ACL's
 * (invariant 5). */
static int edit(const uint8_t *grp, uint32_t glen, const char *xname, const void *value,
                size_t size, int how, bool remove, bool dir, uint32_t *mode, uint8_t **ng,
                size_t *nlen)
{
    *ng = NULL;
    *nlen = 0;
    bool absent_ok = false; /* an ACL the mode says all of, or none at all */
    if (!remove && pom_acl_name(xname)) {
        int rc = pom_acl_check(value, size);
        bool access = strcmp(xname, POM_ACL_ACCESS) == 0;
        if (rc < 0)
            return rc;
        if (!access && !dir)
            return -EACCES;
        mode_t m = *mode;
        if (rc == 0 && access && pom_acl_equiv_mode(value, size, &m) == 1)
            rc = 1;
        *mode = (uint32_t)m;
        remove = absent_ok = rc == 1;
    }
    int rc = remove ? xt_row_xattr_remove(grp, glen, xname, strlen(xname), ng, nlen)
                    : xt_row_xattr_set(grp, glen, xname, strlen(xname), value, size, how, ng,
                                       nlen);
    if (rc == -ENODATA && absent_ok) {
        if (glen && !(*ng = xt_malloc(glen)))
            return -ENOMEM;
        if (glen)
            memcpy(*ng, grp, glen);
        *nlen = glen;
        rc = 0;
    }
    return rc == -EBADMSG ? -EIO : rc;
}

/* getxattr over a group. */
static ssize_t get_in(const uint8_t *grp, uint32_t glen, const char *name, void *buf, size_t size)
{
    const uint8_t *v;
    uint32_t vlen;
    ssize_t out = glen ? xt_row_xattr_get(grp, glen, name, strlen(name), &v, &vlen) : -ENODATA;
    if (out == 0) {
        if (size == 0) {
            out = vlen;
        } else if (size < vlen) {
            out = -ERANGE;
        } else {
            if (vlen)
                memcpy(buf, v, vlen);
            out = vlen;
        }
    } else if (out == -EBADMSG) {
        out = -EIO;
    }
    return out;
}

/* listxattr over a group. */
static ssize_t list_in(const uint8_t *grp, uint32_t glen, char *buf, size_t size)
{
    ssize_t out = glen ? xt_row_xattr_list(grp, glen, buf, size) : 0;
    return out == -EBADMSG ? -EIO : out;
}

/* The file's xattrs when it is unlinked and open here (invariant (4)), op
 * 'g': get (buf/size), 'l': list (buf/size), 's': set xname to (value,
 * size) with how, 'r': remove xname. Returns false when ino is no such
 * file (the row holds its xattrs), else true with the answer in *out. */
static bool orphan_op(pom_fs *fs, pom_ino ino, int op, const char *xname, void *buf,
                      const void *value, size_t size, int how, ssize_t *out)
{
    struct pom_inode *i = pom_ino_pin_orphan(fs, ino);
    if (!i)
        return false;
    struct pom_data *d = i->data;
    ssize_t rc;
    pthread_mutex_lock(&d->mu);
    if (op == 'g') {
        rc = get_in(d->xattr, d->xattr_len, xname, buf, size);
    } else if (op == 'l') {
        rc = list_in(d->xattr, d->xattr_len, buf, size);
    } else {
        uint8_t *ng;
        size_t nlen;
        uint32_t mode = d->st.st_mode & 07777;
        rc = d->iflags & XT_NS_ROW_F_FIXED
                 ? -EPERM
                 : edit(d->xattr, d->xattr_len, xname, value, size, how, op == 'r', false, &mode,
                        &ng, &nlen);
        if (rc == 0) {
            d->st.st_mode = (d->st.st_mode & S_IFMT) | mode;
            xt_free(d->xattr);
            d->xattr = ng;
            d->xattr_len = (uint32_t)nlen;
            uint64_t now = xt_now_ns();
            pom_ns_ts(now, &d->st.st_ctim);
        }
    }
    pthread_mutex_unlock(&d->mu);
    pom_data_unpin(fs, i);
    *out = rc;
    return true;
}

/* The one read-modify-write of the group, shared by set and remove (as
 * edit). */
static int change(pom_fs *fs, pom_ino ino, const char *xname, const void *value, size_t size,
                  int how, bool remove)
{
    int op = remove ? 'r' : 's';
    ssize_t orc;
    if (orphan_op(fs, ino, op, xname, NULL, value, size, how, &orc))
        return (int)orc;
    for (int attempt = 0; attempt < MAX_TRIES; attempt++) {
        pom_conflict_pause(attempt);
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        struct xt_resp r;
        xt_row row;
        const uint8_t *grp;
        uint32_t glen;
        int rc = read_group(fs, ino, &table, name, &r, &row, &grp, &glen);
        if (rc == -ENOENT && orphan_op(fs, ino, op, xname, NULL, value, size, how, &orc))
            return (int)orc; /* unlinked here meanwhile */
        if (rc < 0)
            return rc;
        if (row.attr.flags & XT_NS_ROW_F_FIXED) { /* immutable, append-only */
            xt_resp_free(&r);
            return -EPERM;
        }
        uint8_t *ng;
        size_t nlen;
        uint32_t mode = row.attr.mode;
        rc = edit(grp, glen, xname, value, size, how, remove, row.attr.type == XT_ROW_DIR, &mode,
                  &ng, &nlen);
        uint64_t ver = row.attr.version;
        bool chmod = mode != row.attr.mode;
        xt_resp_free(&r);
        if (rc < 0)
            return rc;
        xt_row upd;
        xt_row_init(&upd);
        upd.attr.ctime_ns = xt_now_ns();
        upd.attr.mode = mode;
        uint16_t drop[1] = { XT_CG_XATTR };
        if (nlen)
            xt_row_view_set_group(&upd, XT_CG_XATTR, ng, (uint32_t)nlen);
        struct xt_req q = { .op = XT_OP_UPDATE, .t = { .table = table }, .name = name,
                            .name_len = (uint32_t)strlen(name),
                            .flags = XT_F_IF_VER | XT_F_IF_UUID,
                            .row = &upd,
                            .set_mask = XT_ROW_SET_CTIME | (chmod ? XT_ROW_SET_MODE : 0),
                            .drop = nlen ? NULL : drop, .ndrop = nlen ? 0 : 1,
                            .expect_version = ver, .expect_uuid = ino };
        rc = pom_call(fs, &q, &r, NULL);
        xt_resp_free(&r);
        if (rc == 0) {
            pom_ino_keep_xattrs(fs, ino, ng, (uint32_t)nlen); /* invariant (4) */
            return 0;
        }
        xt_free(ng);
        if (rc != -ESTALE)
            return rc;
    }
    return -EAGAIN;
}

int pom_setxattr(pom_fs *fs, pom_ino ino, const char *name, const void *value, size_t size,
                 int flags)
{
    int rc = name_check(name);
    if (rc < 0)
        return rc;
    if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
        return -EINVAL;
    if ((flags & XATTR_CREATE) && (flags & XATTR_REPLACE))
        return -EINVAL; /* they contradict each other: refused for every caller */
    if (size > XT_ROW_XATTR_VALUE_MAX)
        return -E2BIG;
    int how = (flags & XATTR_CREATE) ? XT_ROW_XATTR_CREATE
            : (flags & XATTR_REPLACE) ? XT_ROW_XATTR_REPLACE : 0;
    return change(fs, ino, name, value, size, how, false);
}

ssize_t pom_getxattr(pom_fs *fs, pom_ino ino, const char *name, void *buf, size_t size)
{
    int rc = name_check(name);
    if (rc == -ENOTSUP)
        return -ENODATA; /* nothing is ever stored there */
    if (rc < 0)
        return rc;
    ssize_t out;
    if (orphan_op(fs, ino, 'g', name, buf, NULL, size, 0, &out))
        return out;
    uint64_t table;
    char rname[XT_NAME_MAX + 1];
    struct xt_resp r;
    xt_row row;
    const uint8_t *grp;
    uint32_t glen;
    rc = read_group(fs, ino, &table, rname, &r, &row, &grp, &glen);
    if (rc == -ENOENT && orphan_op(fs, ino, 'g', name, buf, NULL, size, 0, &out))
        return out; /* unlinked here meanwhile */
    if (rc < 0)
        return rc;
    out = get_in(grp, glen, name, buf, size);
    xt_resp_free(&r);
    return out;
}

ssize_t pom_listxattr(pom_fs *fs, pom_ino ino, char *buf, size_t size)
{
    ssize_t out;
    if (orphan_op(fs, ino, 'l', NULL, buf, NULL, size, 0, &out))
        return out;
    uint64_t table;
    char rname[XT_NAME_MAX + 1];
    struct xt_resp r;
    xt_row row;
    const uint8_t *grp;
    uint32_t glen;
    int rc = read_group(fs, ino, &table, rname, &r, &row, &grp, &glen);
    if (rc == -ENOENT && orphan_op(fs, ino, 'l', NULL, buf, NULL, size, 0, &out))
        return out; /* unlinked here meanwhile */
    if (rc < 0)
        return rc;
    out = list_in(grp, glen, buf, size);
    xt_resp_free(&r);
    return out;
}

int pom_removexattr(pom_fs *fs, pom_ino ino, const char *name)
{
    int rc = name_check(name);
    if (rc == -ENOTSUP)
        return -ENODATA;
    if (rc < 0)
        return rc;
    return change(fs, ino, name, NULL, 0, 0, true);
}
