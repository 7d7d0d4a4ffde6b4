/*
 * pom_gdt_read.c -- the GDT's read side (docs/client.md "Lookup
 * by uuid"): finds a directory by its uuid alone, for an inode
 * number the inode map does not hold -- a FUSE file handle that outlived
 * the mount that made it (export support: the kernel's LOOKUP(ino, ".")
 * and LOOKUP(ino, "..")), an NFS re-export. The writer is pom_gdt.c.
 *
 * Invariants:
 *  (1) A GDT row is a hint (xt_ns.h (4)): a directory is found
 *      only once the row it names, (parent, name), has been read and holds
 *      that uuid as a directory. Nothing but where to look is taken from
 *      the GDT row.
 *  (2) A GDT row that is missing, or whose hint does not hold, is read
 *      again for up to POM_GDT_WAIT_MS: the RMU copying the latest mkdir or
 *      rename may still be on its way (about 1-2 s). Then -ESTALE.
 *  (3) Only directories have GDT rows: any other inode the map does not
 *      hold answers -ESTALE, after the wait of (2) (a file cannot be told
 *      from a directory whose row is late).
 *  (4) A malformed GDT row is -EIO with a log line: neither retried nor
 *      followed (xt_ns_gdt_parse's checks, and the row's uuid).
 *  (5) References are those of pom_lookup: one lookup reference on the
 *      inode answered (pom_lookup_ino), none on the directory whose parent
 *      is asked (pom_lookup_parent).
 *
 * Floor 4.2 of libpomegranate (pom_ns_i.h): calls floors 1-2 and pom_ops.c
 * (pom_getattr).
 */
#include "pom_ns_i.h"

#include <string.h>

#define POM_GDT_WAIT_MS   3000  /* invariant (2) */
#define POM_GDT_PAUSE_MS  100   /* first pause between reads, doubling */
#define POM_GDT_PAUSE_MAX 800

int pom_gdt_read_hint(const xt_row *row, uint64_t uuid, uint64_t *parent, char *name)
{
    const char *why = NULL;
    if (row->attr.uuid != uuid)
        why = "not this directory's row (uuid)";
    else if (xt_ns_gdt_parse(row, parent, name) < 0)
        why = "not a GDT row (type, format, lengths, parent or name)";
    if (why) {
        char id[XT_NS_ID_LEN + 1];
        xt_ns_id_name(uuid, id);
        XT_ERR("GDT row %s is damaged: %s", id, why);
        return -EIO;
    }
    return 0;
}

/* One read of uuid's GDT row and of the row it points at: 0 (found:
 * *parent, name and *st (may be NULL) filled), 1 (not found yet: missing
 * or not holding, invariant 2), or a negative errno. */
static int gdt_try(pom_fs *fs, uint64_t uuid, uint64_t *parent, char *name, struct stat *st)
{
    char id[XT_NS_ID_LEN + 1];
    xt_ns_id_name(uuid, id);
    struct xt_resp r;
    xt_row row;
    int rc = pom_row_get(fs, XT_NS_TABLE_GDT, id, XT_CG_USER0, &r, &row);
    if (rc < 0)
        return rc == -ENOENT ? 1 : rc;
    uint64_t at;
    char nm[XT_NAME_MAX + 1];
    rc = pom_gdt_read_hint(&row, uuid, &at, nm);
    xt_resp_free(&r);
    if (rc < 0)
        return rc;
    /* A removed parent's table answers -ENOENT too. */
    if ((rc = pom_row_get(fs, at, nm, POM_ROW_META, &r, &row)) < 0)
        return rc == -ENOENT ? 1 : rc;
    bool holds = row.attr.uuid == uuid && row.attr.type == XT_ROW_DIR;
    if (holds && st)
        pom_row_stat(&row.attr, st);
    xt_resp_free(&r);
    if (!holds)
        return 1;
    *parent = at;
    memcpy(name, nm, strlen(nm) + 1);
    return 0;
}

int pom_gdt_where(pom_fs *fs, uint64_t uuid, uint64_t *parent, char *name, struct stat *st)
{
    if (uuid == 0)
        return -ESTALE;
    uint64_t deadline = xt_deadline_ms(POM_GDT_WAIT_MS);
    uint64_t pause = POM_GDT_PAUSE_MS;
    for (;;) {
        int rc = gdt_try(fs, uuid, parent, name, st);
        if (rc <= 0)
            return rc;
        if (xt_deadline_passed(deadline))
            return -ESTALE;
        /* The last pause ends at the deadline, then one more read. */
        xt_sleep_ms(XT_MIN(pause, xt_deadline_left_ms(deadline)));
        pause = XT_MIN(pause * 2, (uint64_t)POM_GDT_PAUSE_MAX);
    }
}

/* One reference on inode ino as the map knows it (getattr, then the
 * location getattr may have refreshed). *type gets its type. */
static int ref_known(pom_fs *fs, pom_ino ino, struct stat *st, uint8_t *type)
{
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    int rc = pom_getattr(fs, ino, st);
    if (rc == 0 && (rc = pom_ino_where(fs, ino, &table, name, type)) == 0)
        rc = pom_ino_ref(fs, ino, table, name, *type, 1);
    return rc;
}

int pom_lookup_ino(pom_fs *fs, pom_ino ino, struct stat *st)
{
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    uint8_t type = 0;
    int rc = pom_ino_where(fs, ino, &table, name, &type);
    if (rc == 0) {
        rc = ref_known(fs, ino, st, &type);
        /* -ENOENT from a known directory: another client moved (or
         * removed) it, so the map's location is old; the GDT knows the
         * new one. -ESTALE: forgotten meanwhile. */
        if (!(rc == -ESTALE || (rc == -ENOENT && type == XT_ROW_DIR)) || ino == POM_ROOT_INO)
            return rc;
    } else if (rc != -ESTALE) {
        return rc; /* -ENOENT: removed here */
    }
    if ((rc = pom_gdt_where(fs, ino, &table, name, st)) < 0)
        return rc;
    return pom_ino_ref(fs, ino, table, name, XT_ROW_DIR, 1);
}

/* The parent of directory dir: from the map when its location there still
 * holds dir, else from the GDT (the map then learns the new location). */
static int dir_parent(pom_fs *fs, pom_ino dir, uint64_t *parent)
{
    if (dir == POM_ROOT_INO) {
        *parent = POM_ROOT_INO;
        return 0;
    }
    uint64_t table;
    char name[XT_NAME_MAX + 1];
    uint8_t type;
    int rc = pom_ino_where(fs, dir, &table, name, &type);
    if (rc == 0) {
        if (type != XT_ROW_DIR)
            return -ENOTDIR;
        if ((rc = pom_name_holds(fs, table, name, dir)) < 0)
            return rc;
        if (rc == 1) {
            *parent = table;
            return 0;
        }
    } else if (rc != -ESTALE) {
        return rc;
    }
    if ((rc = pom_gdt_where(fs, dir, parent, name, NULL)) < 0)
        return rc;
    pom_ino_moved(fs, dir, *parent, name); /* a no-op when dir is unknown */
    return 0;
}

int pom_lookup_parent(pom_fs *fs, pom_ino dir, struct stat *st)
{
    uint64_t parent;
    int rc = dir_parent(fs, dir, &parent);
    return rc < 0 ? rc : pom_lookup_ino(fs, parent, st);
}
