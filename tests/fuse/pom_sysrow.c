/*
 * pom_sysrow.c -- test helper: writes or deletes a system row (name
 * starting 00 FF, xt_hash.h, docs/mds-xact.md) in the root directory's
 * table of a file system, with XT_F_SYS as only the MDS themselves do, so
 * a shell test can show `pomctl fsck` a transaction in progress or a
 * damaged one (test_pomctl_fsck.sh).
 *
 *   pom_sysrow [-k KEYFILE] R2ADDR FS put|del TAG LEN
 *   pom_sysrow [-k KEYFILE] R2ADDR FS gdt UUID PARENT NAME [AGO_S]
 *
 * The name is the head (TAG, the hash of the root's name "sysrow") then
 * 'x' bytes up to LEN (>= XT_SYS_HEAD) in all. `gdt` writes directory
 * UUID's GDT row (xt_ns.h (4)) saying it is NAME in PARENT, as
 * a copy (XT_F_RMU, stamped now or AGO_S seconds ago) in a batch of its
 * own, as the library's own writer does: a wrong or a stale one for
 * fsck's check (10). Exit 0 or 1.
 */
#include "pomegranate.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "pomegranate_admin.h"
#include "xt_ns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -k FILE before the other arguments: the key file (docs/security.md). */
static struct pom_opts g_opts;

static int gdt_put(const char *r2, const char *fsname, uint64_t uuid, uint64_t parent,
                   const char *name, uint64_t ago_s)
{
    pom_fs *fs;
    int rc = pom_open_opts(r2, fsname, &g_opts, &fs);
    if (rc < 0) {
        fprintf(stderr, "pom_sysrow: open %s: %s\n", fsname, strerror(-rc));
        return 1;
    }
    rc = pom_gdt_put(fs, uuid, parent, name, xt_now_ns() - ago_s * 1000000000u);
    pom_close(fs);
    if (rc < 0) {
        fprintf(stderr, "pom_sysrow: gdt: %s\n", strerror(-rc));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 2 && !strcmp(argv[1], "-k")) {
        g_opts.keyfile = argv[2];
        argv[2] = argv[0];
        argc -= 2;
        argv += 2;
    }
    if ((argc == 7 || argc == 8) && !strcmp(argv[3], "gdt"))
        return gdt_put(argv[1], argv[2], strtoull(argv[4], NULL, 10),
                       strtoull(argv[5], NULL, 10), argv[6],
                       argc == 8 ? strtoull(argv[7], NULL, 10) : 0);
    if (argc != 6 || (strcmp(argv[3], "put") && strcmp(argv[3], "del")) || !argv[4][0]) {
        fprintf(stderr, "usage: pom_sysrow R2ADDR FS put|del TAG LEN\n"
                        "       pom_sysrow R2ADDR FS gdt UUID PARENT NAME [AGO_S]\n");
        return 1;
    }
    size_t len = strtoul(argv[5], NULL, 10);
    if (len < XT_SYS_HEAD || len > XT_NAME_MAX) {
        fprintf(stderr, "pom_sysrow: LEN must be %d..%d\n", XT_SYS_HEAD, XT_NAME_MAX);
        return 1;
    }
    uint8_t name[XT_NAME_MAX];
    memset(name, 'x', sizeof name);
    xt_hash_sys_head(name, (unsigned char)argv[4][0], xt_hash_name("sysrow", 6));
    pom_fs *fs;
    int rc = pom_open_opts(argv[1], argv[2], &g_opts, &fs);
    if (rc < 0) {
        fprintf(stderr, "pom_sysrow: open %s: %s\n", argv[2], strerror(-rc));
        return 1;
    }
    xt_row row;
    xt_row_init(&row);
    row.attr.type = XT_ROW_KV;
    row.name = name;
    row.name_len = (uint32_t)len;
    bool put = !strcmp(argv[3], "put");
    struct xt_req q = { .op = put ? XT_OP_CREATE : XT_OP_DELETE,
                        .t = { .fsid = pom_fsid(fs), .table = POM_ROOT_INO, .slice_hint = -1 },
                        .name = name, .name_len = (uint32_t)len, .row = put ? &row : NULL,
                        .flags = XT_F_SYS | XT_F_SYNC };
    struct xt_resp r;
    memset(&r, 0, sizeof r);
    rc = pom_call(fs, &q, &r, NULL);
    xt_resp_free(&r);
    pom_close(fs);
    if (rc < 0) {
        fprintf(stderr, "pom_sysrow: %s: %s\n", argv[3], strerror(-rc));
        return 1;
    }
    return 0;
}
