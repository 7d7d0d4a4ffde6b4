/*
 * pom_gdt.c -- the writer of the GDT (pom_client_i.h "GDT"; docs/client.md "The GDT"): the
 * copy op (XT_F_RMU) that mkdir, rmdir and a directory's rename add to
 * their atomic batch, telling where the directory's row now is, or that
 * it is gone.
 *
 * The copy commits with the batch (or not at all) and reaches the GDT
 * row later when that row sits at another MDS (an RMU, docs/mds-xact.md
 * "RMU: copies (the GDT)"); copies of one row converge newest-wins by their stamp, the
 * change's time. The batch never waits for the GDT, and a copy cannot
 * fail the change it follows.
 */
#include "pom_client_i.h"

#include <string.h>

#include "xt_common.h"

int pom_gdt_op(uint64_t dir, uint64_t parent, const char *name, uint64_t stamp,
               struct pom_gdt_buf *b, struct xt_req *q)
{
    pom_ilt_name(dir, b->key);
    xt_row_init(&b->row);
    b->row.attr.type = XT_ROW_KV;
    b->row.attr.uuid = dir;
    b->row.attr.ctime_ns = stamp;
    *q = (struct xt_req){ .op = name ? XT_OP_CREATE : XT_OP_DELETE,
                          .t = { .table = POM_TABLE_GDT }, .name = b->key,
                          .name_len = POM_ILT_NAME_LEN, .row = &b->row, .flags = XT_F_RMU };
    if (!name)
        return 0;
    size_t len = strlen(name);
    if (len == 0 || len > XT_NAME_MAX)
        return -EINVAL;
    b->grp[0] = POM_GDT_FMT;
    xt_put_u64(b->grp + 1, parent);
    xt_put_u16(b->grp + 9, (uint16_t)len);
    memcpy(b->grp + POM_GDT_HEAD, name, len);
    return xt_row_view_set_group(&b->row, XT_CG_USER0, b->grp, (uint32_t)(POM_GDT_HEAD + len));
}

int pom_gdt_parse(const xt_row *row, uint64_t *parent, char *name)
{
    const xt_row_group *g = xt_row_view_group(row, XT_CG_USER0);
    if (row->attr.type != XT_ROW_KV || !g || g->len < POM_GDT_HEAD ||
        g->ptr[0] != POM_GDT_FMT)
        return -EIO;
    const uint8_t *p = g->ptr;
    uint16_t len = xt_get_u16(p + 9);
    if (len == 0 || len > XT_NAME_MAX || g->len != POM_GDT_HEAD + (uint32_t)len ||
        memchr(p + POM_GDT_HEAD, '\0', len))
        return -EIO;
    *parent = xt_get_u64(p + 1);
    memcpy(name, p + POM_GDT_HEAD, len);
    name[len] = '\0';
    /* What a follower must not be sent to: no parent, itself, a name no
     * entry can have. */
    if (*parent == 0 || *parent == row->attr.uuid || pom_name_check(name) < 0)
        return -EIO;
    return 0;
}
