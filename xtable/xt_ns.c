/*
 * xt_ns.c -- builds and parses the rows of the namespace model (xt_ns.h):
 * link stubs, ILT/GDT row names, GDT rows. Pure functions of their
 * arguments: no I/O, no locks.
 */
#include "xt_ns.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

void xt_ns_id_name(uint64_t uuid, char *buf)
{
    snprintf(buf, XT_NS_ID_LEN + 1, "%016llx", (unsigned long long)uuid);
}

int xt_ns_name_check(const char *name)
{
    if (!name || !name[0] || strchr(name, '/') || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0)
        return -EINVAL;
    if (strlen(name) > XT_NAME_MAX)
        return -ENAMETOOLONG;
    return 0;
}

void xt_ns_stub(const xt_row_attr *a, uint64_t now, xt_row *stub)
{
    assert(a->type != XT_ROW_DIR); /* directories are never hard-linked */
    xt_row_init(stub);
    stub->attr.uuid = a->uuid;
    stub->attr.type = a->type;
    stub->attr.mode = a->mode;
    stub->attr.uid = a->uid;
    stub->attr.gid = a->gid;
    stub->attr.flags = XT_NS_ROW_F_LINKED;
    stub->attr.atime_ns = stub->attr.mtime_ns = stub->attr.ctime_ns = now;
    stub->attr.btime_ns = a->btime_ns;
}

int xt_ns_gdt_build(struct xt_ns_gdt *b, uint64_t dir, uint64_t parent, const char *name,
                    uint64_t stamp)
{
    assert(dir != 0);
    xt_ns_id_name(dir, b->key);
    xt_row_init(&b->row);
    b->row.attr.type = XT_ROW_KV;
    b->row.attr.uuid = dir;
    b->row.attr.ctime_ns = stamp;
    if (!name)
        return 0;
    size_t len = strlen(name);
    if (len == 0 || len > XT_NAME_MAX)
        return -EINVAL;
    b->grp[0] = XT_NS_GDT_FMT;
    xt_put_u64(b->grp + 1, parent);
    xt_put_u16(b->grp + 9, (uint16_t)len);
    memcpy(b->grp + XT_NS_GDT_HEAD, name, len);
    return xt_row_view_set_group(&b->row, XT_CG_USER0, b->grp,
                                 (uint32_t)(XT_NS_GDT_HEAD + len));
}

int xt_ns_gdt_parse(const xt_row *row, uint64_t *parent, char *name)
{
    const xt_row_group *g = xt_row_view_group(row, XT_CG_USER0);
    if (row->attr.type != XT_ROW_KV || !g || g->len < XT_NS_GDT_HEAD ||
        g->ptr[0] != XT_NS_GDT_FMT)
        return -EIO;
    const uint8_t *p = g->ptr;
    uint16_t len = xt_get_u16(p + 9);
    if (len == 0 || len > XT_NAME_MAX || g->len != XT_NS_GDT_HEAD + (uint32_t)len ||
        memchr(p + XT_NS_GDT_HEAD, '\0', len))
        return -EIO;
    *parent = xt_get_u64(p + 1);
    memcpy(name, p + XT_NS_GDT_HEAD, len);
    name[len] = '\0';
    /* What a follower must not be sent to: no parent, itself, a name no
     * entry can have. */
    if (*parent == 0 || *parent == row->attr.uuid || xt_ns_name_check(name) < 0)
        return -EIO;
    return 0;
}
