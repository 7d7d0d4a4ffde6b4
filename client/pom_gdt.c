/*
 * pom_gdt.c -- floor 4.0 (namespace helpers): the writer of the GDT
 * (xt_ns.h (4); docs/client.md "GDT"): the
 * copy op (XT_F_RMU) that every create (mkdir, mknod, symlink, create),
 * every remove of a last name and every rename add to their atomic batch,
 * telling where the inode's row now is, or that it is gone.
 *
 * The copy commits with the batch (or not at all) and reaches the GDT
 * row later when that row sits at another MDS (an RMU, docs/mds-xact.md
 * "RMU: copies (the GDT)"); copies of one row converge newest-wins by their stamp, the
 * change's time. The batch never waits for the GDT, and a copy cannot
 * fail the change it follows. Calls the transport (pom_batch_call) and
 * xt_ns only.
 */
#include "pom_ns_i.h"

int pom_gdt_op(uint64_t dir, uint64_t parent, const char *name, uint64_t stamp,
               struct xt_ns_gdt *b, struct xt_req *q)
{
    int rc = xt_ns_gdt_build(b, dir, parent, name, stamp);
    *q = (struct xt_req){ .op = name ? XT_OP_CREATE : XT_OP_DELETE,
                          .t = { .table = XT_NS_TABLE_GDT }, .name = b->key,
                          .name_len = XT_NS_ID_LEN, .row = &b->row, .flags = XT_F_RMU };
    return rc;
}

int pom_gdt_put(pom_fs *fs, uint64_t dir, uint64_t parent, const char *name, uint64_t stamp)
{
    struct xt_ns_gdt b;
    struct xt_req q;
    size_t failed;
    int rc = pom_gdt_op(dir, parent, name, stamp, &b, &q);
    return rc < 0 ? rc : pom_batch_call(fs, &q, 1, &failed, NULL);
}
