/*
 * pom_gdt_read.c -- the GDT's read side (docs/client.md "Lookup
 * by uuid"): finds an inode by its uuid alone, for an inode number the
 * inode map does not hold -- a FUSE file handle that outlived the kernel's
 * inode or the mount that made it (export support: the kernel's
 * LOOKUP(ino, ".") and LOOKUP(ino, "..")), an NFS re-export. The writer is
 * pom_gdt.c.
 *
 * Invariants:
 *  (1) A GDT row is a hint (xt_ns.h (4)): an inode is found only once the
 *      row it names, (parent, name), has been read and holds that uuid (a
 *      link stub there is followed to the ILT row, which must hold it too).
 *      Nothing but where to look is taken from the GDT row.
 *  (2) A hard-linked file's attributes are its ILT row, named by its uuid:
 *      when the GDT row is missing or names a name that no longer holds
 *      the uuid (that name was unlinked or renamed away), the ILT row is
 *      read before the inode is given up.
 *  (3) With more than one MDS, a GDT row that is missing, or whose hint
 *      does not hold, is read again for up to POM_GDT_WAIT_MS: the RMU
 *      copying the latest change may still be on its way (about 1-2 s).
 *      With one MDS every copy applies in its own batch (docs/mds-xact.md
 *      "RMU: copies (the GDT)", placement), so what is read is final: a
 *      gone inode answers -ESTALE at once.
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
#include "pom_route.h"

#include <string.h>

#define POM_GDT_WAIT_MS   3000  /* invariant (3) */
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

/* The ILT row of uuid (invariant 2): 0 (it holds uuid: *st filled), 1
 * (none), or a negative errno. */
static int ilt_try(pom_fs *fs, uint64_t uuid, struct stat *st, uint8_t *type)
{
    char id[XT_NS_ID_LEN + 1];
    xt_ns_id_name(uuid, id);
    struct xt_resp r;
    xt_row row;
    int rc = pom_row_get(fs, XT_NS_TABLE_ILT, id, POM_ROW_META, &r, &row);
    if (rc < 0)
        return rc == -ENOENT ? 1 : rc;
    bool holds = row.attr.uuid == uuid;
    if (holds) {
        pom_row_stat(&row.attr, st);
        *type = row.attr.type;
    }
    xt_resp_free(&r);
    return holds ? 0 : 1;
}

/* One read of uuid's GDT row and of the row it points at: 0 (found:
 * *table, name, *st and *type filled), 1 (not found yet: missing or not holding,
 * invariant 3), or a negative errno. A linked file's place is its ILT
 * row (invariant 2). */
static int gdt_try(pom_fs *fs, uint64_t uuid, uint64_t *table, char *name, struct stat *st,
                   uint8_t *type)
{
    char id[XT_NS_ID_LEN + 1];
    xt_ns_id_name(uuid, id);
    struct xt_resp r;
    xt_row row;
    int rc = pom_row_get(fs, XT_NS_TABLE_GDT, id, XT_CG_USER0, &r, &row);
    bool hint = rc == 0;
    uint64_t at = 0;
    char nm[XT_NAME_MAX + 1];
    if (hint) {
        rc = pom_gdt_read_hint(&row, uuid, &at, nm);
        xt_resp_free(&r);
        if (rc < 0)
            return rc;
        /* A removed parent's table answers -ENOENT too. */
        rc = pom_row_get(fs, at, nm, POM_ROW_META, &r, &row);
    }
    if (rc < 0 && rc != -ENOENT)
        return rc;
    bool holds = rc == 0 && row.attr.uuid == uuid;
    bool linked = holds && (row.attr.flags & XT_NS_ROW_F_LINKED);
    if (holds && !linked) {
        pom_row_stat(&row.attr, st);
        *type = row.attr.type;
    }
    if (rc == 0)
        xt_resp_free(&r);
    if (holds && !linked) {
        *table = at;
        memcpy(name, nm, strlen(nm) + 1);
        return 0;
    }
    if ((rc = ilt_try(fs, uuid, st, type)) != 0)
        return rc;
    *table = XT_NS_TABLE_ILT;
    memcpy(name, id, sizeof id);
    return 0;
}

/* pom_gdt_where, and *type gets the inode's row type. */
static int where(pom_fs *fs, uint64_t uuid, uint64_t *parent, char *name, struct stat *st,
                 uint8_t *type)
{
    if (uuid == 0)
        return -ESTALE;
    /* Invariant (3): only copies that may travel are waited for. */
    bool wait = pom_route_all(fs->route, NULL, NULL, NULL, 0) > 1;
    uint64_t deadline = xt_deadline_ms(POM_GDT_WAIT_MS);
    uint64_t pause = POM_GDT_PAUSE_MS;
    for (;;) {
        int rc = gdt_try(fs, uuid, parent, name, st, type);
        if (rc <= 0)
            return rc;
        if (!wait || xt_deadline_passed(deadline))
            return -ESTALE;
        /* The last pause ends at the deadline, then one more read. */
        xt_sleep_ms(XT_MIN(pause, xt_deadline_left_ms(deadline)));
        pause = XT_MIN(pause * 2, (uint64_t)POM_GDT_PAUSE_MAX);
    }
}

int pom_gdt_where(pom_fs *fs, uint64_t uuid, uint64_t *parent, char *name, struct stat *st)
{
    struct stat dummy;
    uint8_t type;
    return where(fs, uuid, parent, name, st ? st : &dummy, &type);
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
    if ((rc = where(fs, ino, &table, name, st, &type)) < 0)
        return rc;
    return pom_ino_ref(fs, ino, table, name, type, 1);
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
    struct stat st;
    if ((rc = where(fs, dir, parent, name, &st, &type)) < 0)
        return rc;
    if (type != XT_ROW_DIR)
        return -ENOTDIR;
    pom_ino_moved(fs, dir, *parent, name); /* a no-op when dir is unknown */
    return 0;
}

int pom_lookup_parent(pom_fs *fs, pom_ino dir, struct stat *st)
{
    uint64_t parent;
    int rc = dir_parent(fs, dir, &parent);
    return rc < 0 ? rc : pom_lookup_ino(fs, parent, st);
}
