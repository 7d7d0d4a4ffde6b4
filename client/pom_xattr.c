/*
 * pom_xattr.c -- extended attributes of libpomegranate: the XT_CG_XATTR
 * group of the inode's row in the xattr sub-format of xt_row.h.
 *
 * Invariants:
 *  (1) A change reads the group with the row's uuid and version and writes
 *      the new group conditional on that version (-ESTALE: read again), so
 *      concurrent changes of different names never lose one another.
 *  (2) Only the user., trusted. and security. namespaces are stored;
 *      system.* (POSIX ACLs and friends) and unknown prefixes answer
 *      -ENOTSUP rather than being stored as plain bytes nobody enforces.
 */
#include "pom_client_i.h"

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
        strncmp(name, "security.", 9))
        return -ENOTSUP;
    return 0;
}

/* The current xattr group of ino (with the row's version). */
static int read_group(pom_fs *fs, pom_ino ino, uint64_t *table, char *name, struct xt_resp *r,
                      xt_row *row, const uint8_t **grp, uint32_t *glen)
{
    int rc = pom_ino_where(fs, ino, table, name, NULL);
    if (rc < 0)
        return rc;
    if ((rc = pom_row_get(fs, *table, name, XT_CG_XATTR, r, row)) < 0)
        return rc;
    if (row->attr.uuid != ino) {
        xt_resp_free(r);
        return -ENOENT;
    }
    const xt_row_group *g = xt_row_view_group(row, XT_CG_XATTR);
    *grp = g ? g->ptr : NULL;
    *glen = g ? g->len : 0;
    return 0;
}

/* Replaces the group by a function of the old one (value NULL: remove). */
static int change(pom_fs *fs, pom_ino ino, const char *xname, const void *value, size_t size,
                  int how, bool remove)
{
    for (int attempt = 0; attempt < MAX_TRIES; attempt++) {
        uint64_t table;
        char name[XT_NAME_MAX + 1];
        struct xt_resp r;
        xt_row row;
        const uint8_t *grp;
        uint32_t glen;
        int rc = read_group(fs, ino, &table, name, &r, &row, &grp, &glen);
        if (rc < 0)
            return rc;
        uint8_t *ng = NULL;
        size_t nlen = 0;
        if (remove)
            rc = xt_row_xattr_remove(grp, glen, xname, strlen(xname), &ng, &nlen);
        else
            rc = xt_row_xattr_set(grp, glen, xname, strlen(xname), value, size, how, &ng,
                                  &nlen);
        uint64_t ver = row.attr.version;
        xt_resp_free(&r);
        if (rc == -EBADMSG)
            rc = -EIO;
        if (rc < 0)
            return rc;
        xt_row upd;
        xt_row_init(&upd);
        upd.attr.ctime_ns = xt_now_ns();
        uint16_t drop[1] = { XT_CG_XATTR };
        if (nlen)
            xt_row_view_set_group(&upd, XT_CG_XATTR, ng, (uint32_t)nlen);
        struct xt_req q = { .op = XT_OP_UPDATE, .t = { .table = table }, .name = name,
                            .name_len = (uint32_t)strlen(name), .flags = XT_F_IF_VER,
                            .row = &upd, .set_mask = XT_ROW_SET_CTIME,
                            .drop = nlen ? NULL : drop, .ndrop = nlen ? 0 : 1,
                            .expect_version = ver };
        rc = pom_call(fs, &q, &r, NULL);
        xt_resp_free(&r);
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
    if (size > XT_ROW_XATTR_VALUE_MAX)
        return -E2BIG;
    int how = (flags & XATTR_CREATE) ? XT_ROW_XATTR_CREATE
            : (flags & XATTR_REPLACE) ? XT_ROW_XATTR_REPLACE : 0;
    rc = change(fs, ino, name, value, size, how, false);
    return rc == -ENOSPC ? -ENOSPC : rc;
}

ssize_t pom_getxattr(pom_fs *fs, pom_ino ino, const char *name, void *buf, size_t size)
{
    int rc = name_check(name);
    if (rc == -ENOTSUP)
        return -ENODATA; /* nothing is ever stored there */
    if (rc < 0)
        return rc;
    uint64_t table;
    char rname[XT_NAME_MAX + 1];
    struct xt_resp r;
    xt_row row;
    const uint8_t *grp;
    uint32_t glen;
    if ((rc = read_group(fs, ino, &table, rname, &r, &row, &grp, &glen)) < 0)
        return rc;
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
    xt_resp_free(&r);
    return out;
}

ssize_t pom_listxattr(pom_fs *fs, pom_ino ino, char *buf, size_t size)
{
    uint64_t table;
    char rname[XT_NAME_MAX + 1];
    struct xt_resp r;
    xt_row row;
    const uint8_t *grp;
    uint32_t glen;
    int rc = read_group(fs, ino, &table, rname, &r, &row, &grp, &glen);
    if (rc < 0)
        return rc;
    ssize_t out = glen ? xt_row_xattr_list(grp, glen, buf, size) : 0;
    if (out == -EBADMSG)
        out = -EIO;
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
