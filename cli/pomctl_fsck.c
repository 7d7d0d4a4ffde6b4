/*
 * pomctl_fsck.c -- `pomctl fsck [--fs NAME] [--data-check] [--repair-orphans]
 * [--repair-gdt] [--repair-usage] [--max-problems N]`: an online check of one file system through
 * libpomegranate, as a client sees it (docs/pomctl.md "`pomctl fsck`").
 *
 * It walks the namespace breadth-first from the root and checks:
 *  (1) every directory lists to its end, each name once, with a cookie that
 *      only grows (split-stable listing);
 *  (2) every listed name is found again by a lookup, as the same inode and
 *      type: the row sits in the slice the table's bitmap sends a lookup to
 *      (bitmap/slice consistency);
 *  (3) no directory has two names (directories are never hard-linked) and
 *      every directory's table answers a listing;
 *  (4) every non-directory's nlink equals the number of names it was found
 *      under (hard links and their ILT rows, docs/client.md);
 *  (5) a symlink's target is as long as its size says;
 *  (6) with --data-check, every regular file reads to exactly its size (the
 *      row's data checksum, or the blob tier's tracts, answer every byte);
 *  (7) when the fs has a blob tier: the tract sets in it against the rows
 *      that name them (docs/format-blob.md). Two inodes naming one tracts
 *      id is a problem. A blob row whose set is absent is not (never
 *      written: all holes) and is counted; a set no row names is an
 *      *orphan*, expected after a client crash between writing tracts and
 *      the row naming them, or before a queued removal ran: counted;
 *      the mounts reclaim them online (client/pom_reclaim.c), and
 *      --repair-orphans removes them on an unmounted fs (below);
 *  (8) every directory's nlink is 2 + the directories listed in it (rows
 *      older than that rule show 1: not counted, skipped);
 *  (9) system rows (names starting 00 FF: transaction state, xt_hash.h,
 *      docs/mds-xact.md) are not entries: the MDS does not list them, so
 *      (1)-(8) never see them. A second listing of each directory's table
 *      with XT_F_SYS and the substring 00 FF (only they travel) counts
 *      pending (and count), decision and RMU outbox rows; a pending row
 *      not XT_SYS_PEND_LEN long, a count or outbox row not XT_SYS_HEAD + 16
 *      long or a decision row shorter than that is damage. Pending rows in
 *      the ILT (hard links' table) are not scanned. While RMU outbox rows
 *      are not delivered, (8) may find a parent's nlink behind;
 * (10) every directory's GDT row (xt_ns.h (4)) names the
 *      parent and name the walk found it under. A copy held by another
 *      MDS arrives about a second after its change: a row that does not
 *      agree is read again for up to GDT_WAIT_MS before it is a problem.
 *      The GDT's rows are counted too (every inode has one; only a
 *      directory's is checked against its place): a row whose uuid is no
 *      inode the walk found is *stale* (a directory made, moved and removed
 *      within a second at several MDS can leave one; readers check a row
 *      before they trust it): counted, not a problem. --repair-gdt writes
 *      the row a directory should have (a copy stamped now: newest wins)
 *      instead of reporting it, and removes stale rows at least
 *      GDT_STALE_AGE_S old after a walk without changes (a delete copy
 *      stamped with the row's own time: it loses to any newer copy).
 *      This is how a file system made before the GDT gets its rows.
 * (11) the fs's usage (docs/r2.md "Capacity and quotas"): the inodes the walk
 *      found (directories but the root, files, symlinks, other) and their
 *      bytes (sizes of files and symlinks) against R2's totals. A drift is
 *      not a problem (the totals lag the commits by seconds, and lose what
 *      an MDS did not report before it crashed): it is printed, and with
 *      --repair-usage, when the walk saw no change and R2's totals stood
 *      still for USAGE_SETTLE_MS, R2 is told the exact figures.
 * It changes nothing but what --repair-gdt writes (above),
 * --repair-usage sets and --repair-orphans deletes: orphan sets whose newest
 * tract file or folder is at least ORPHAN_AGE_S old, only when R2 counts
 * no mount of the fs (a live client may hold a migrated file whose row it
 * has not flushed yet, or a set it is still writing: those look exactly
 * like orphans), and only after a walk without problems or changes (a row
 * the walk missed would make its set look orphan). Exit 0: clean; 1:
 * problems (each printed), the walk failed, or --repair-orphans refused
 * (fs mounted); 2: usage; 3: R2 unreachable.
 *
 * The tracts id of a row (flags, generation) is not in struct stat: check
 * (7) gets the rows naming sets from pom_tracts_named (the walk the online
 * reclaimer uses, pom_reclaim.c: one listing per table, after the
 * namespace walk) and lists the tier pom_open opened from the fs record
 * (pom_blob_of), both from pomegranate_admin.h: pomctl links
 * libpomegranate statically, and tracts ids are an internal that
 * libpomegranate.so's ABI does not carry for one maintenance tool. The
 * reserved tables and GDT rows are those of xt_ns.h.
 *
 * It sees the file system while others may change it: a name removed
 * between its listing and its lookup is counted as "changed meanwhile", not
 * as a problem. Run it on a quiet file system for a strict answer.
 */
#include "pomctl_i.h"
#include "pomctl_progress.h"

#include "pomegranate.h"
#include "pomegranate_admin.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_ns.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ino_ent {
    uint64_t ino;        /* 0: empty slot */
    uint32_t names;      /* names the walk found it under */
    uint32_t nlink;      /* as its attributes say */
    mode_t mode;
};

/* An orphan set is removed only when its newest tract file (or folder)
 * is at least this old: a set being written is never removed. */
#define ORPHAN_AGE_S 60
/* Check (10): how long a GDT row may lag its directory (RMU delivery). */
#define GDT_WAIT_MS 5000
/* --repair-gdt removes a stale GDT row only when it is this old: a row
 * written for a directory made after the walk passed its parent is not. */
#define GDT_STALE_AGE_S 60
/* Check (11): R2's totals must stand still this long (two MDS heartbeats
 * and a commit interval) before --repair-usage replaces them. */
#define USAGE_SETTLE_MS 3000

/* A blob row's tracts id (check (7)). */
struct named {
    uint64_t id;
    uint64_t ino;
    bool found;          /* pom_blob_list met its set */
};

struct fsck {
    struct pomctl *ctl;
    pom_fs *fs;
    bool data_check;
    bool repair_orphans;
    bool repair_gdt;
    bool repair_usage;
    struct pom_blob *blob;  /* pom_blob_of (owned by fs), or NULL: no tier, (7) skipped */
    uint64_t max_problems;
    /* non-directories seen: open addressing on ino */
    struct ino_ent *map;
    size_t cap, used;
    /* directories still to list (a queue) */
    uint64_t *dirs;
    size_t dhead, dtail, dcap;
    /* the directory being listed */
    uint64_t cur_dir, last_cookie;
    uint32_t cur_subdirs;  /* directories listed in cur_dir, check (8) */
    char **names;        /* names of cur_dir, for the "listed twice" check */
    size_t nnames, names_cap;
    /* totals */
    uint64_t ndirs, nfiles, nlinks, nother, bytes, changed, problems;
    uint64_t link_bytes;    /* symlinks' sizes, check (11) */
    bool has_r2_usage;      /* check (11): R2's totals, as read after the walk */
    uint64_t r2_files, r2_bytes;
    bool usage_repaired;
    uint64_t pending, decisions, outbox, sys_other; /* check (9) */
    uint64_t gdt_ok, gdt_rows, gdt_stale;           /* check (10) */
    uint64_t gdt_repaired, gdt_removed;             /* --repair-gdt */
    /* check (7) */
    struct named *named;    /* blob rows, sorted by id after the walk */
    size_t nnamed, named_cap;
    uint64_t *doomed;       /* orphans old enough to remove (--repair-orphans) */
    size_t ndoomed, doomed_cap;
    int64_t now_ns;         /* when the sets were listed */
    uint64_t blob_files, no_tracts, sets, set_bytes, orphans, orphan_bytes;
    uint64_t young, removed, removed_bytes;
    bool repair_skipped;    /* orphans kept: the walk was not complete */
    uint64_t listed;        /* names listed (the progress line's rows) */
    struct pomctl_progress prog; /* on a terminal (pomctl_progress.h) */
};

static void problem(struct fsck *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(struct fsck *f, const char *fmt, ...)
{
    if (f->problems++ >= f->max_problems)
        return;
    pomctl_progress_end(&f->prog); /* the problem gets a line of its own */
    /* With --json the one JSON document goes to stdout: problems to stderr. */
    FILE *out = f->ctl->json ? stderr : stdout;
    va_list ap;
    va_start(ap, fmt);
    fputs("PROBLEM: ", out);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    va_end(ap);
}

static struct ino_ent *ino_slot(struct fsck *f, uint64_t ino)
{
    size_t i = (size_t)(ino * UINT64_C(0x9E3779B97F4A7C15) >> 17) & (f->cap - 1);
    while (f->map[i].ino && f->map[i].ino != ino)
        i = (i + 1) & (f->cap - 1);
    return &f->map[i];
}

/* The entry of ino, added if new. NULL: out of memory. */
static struct ino_ent *ino_get(struct fsck *f, uint64_t ino)
{
    if ((f->used + 1) * 4 > f->cap * 3) {
        size_t ncap = f->cap ? f->cap * 2 : 1024;
        struct ino_ent *old = f->map, *nm = xt_calloc(ncap, sizeof *nm);
        if (!nm)
            return NULL;
        size_t ocap = f->cap;
        f->map = nm;
        f->cap = ncap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].ino)
                *ino_slot(f, old[i].ino) = old[i];
        xt_free(old);
    }
    struct ino_ent *e = ino_slot(f, ino);
    if (!e->ino) {
        e->ino = ino;
        f->used++;
    }
    return e;
}

static int dir_push(struct fsck *f, uint64_t ino)
{
    if (f->dtail == f->dcap) {
        if (f->dhead > 0) { /* slide the live part down before growing */
            memmove(f->dirs, f->dirs + f->dhead, (f->dtail - f->dhead) * sizeof *f->dirs);
            f->dtail -= f->dhead;
            f->dhead = 0;
        }
        if (f->dtail == f->dcap) {
            size_t ncap = f->dcap ? f->dcap * 2 : 256;
            uint64_t *nd = xt_realloc(f->dirs, ncap * sizeof *nd);
            if (!nd)
                return -ENOMEM;
            f->dirs = nd;
            f->dcap = ncap;
        }
    }
    f->dirs[f->dtail++] = ino;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads a regular file to its end; checks it gives exactly its size. */
static void check_data(struct fsck *f, uint64_t dir, const char *name, const struct stat *st)
{
    pom_file *pf;
    int rc = pom_file_open(f->fs, st->st_ino, O_RDONLY, &pf);
    if (rc == -ENOENT || rc == -ESTALE) {
        f->changed++;
        return;
    }
    if (rc < 0) {
        problem(f, "%llu/%s (inode %llu): cannot open: %s", (unsigned long long)dir, name,
                (unsigned long long)st->st_ino, strerror(-rc));
        return;
    }
    static char buf[1 << 20];
    uint64_t total = 0;
    ssize_t n;
    while ((n = pom_read(pf, buf, sizeof buf, (off_t)total)) > 0)
        total += (uint64_t)n;
    if (n < 0)
        problem(f, "%llu/%s (inode %llu): read at %llu: %s", (unsigned long long)dir, name,
                (unsigned long long)st->st_ino, (unsigned long long)total, strerror((int)-n));
    else if (total != (uint64_t)st->st_size)
        problem(f, "%llu/%s (inode %llu): reads %llu bytes, size says %lld",
                (unsigned long long)dir, name, (unsigned long long)st->st_ino,
                (unsigned long long)total, (long long)st->st_size);
    pom_release(pf);
}

/* pom_tracts_named callback: one blob row's tracts id (check (7)). */
static int note_tracts(void *arg, uint64_t id, uint64_t ino)
{
    struct fsck *f = arg;
    if (f->nnamed == f->named_cap) {
        size_t ncap = f->named_cap ? f->named_cap * 2 : 256;
        struct named *nn = xt_realloc(f->named, ncap * sizeof *nn);
        if (!nn)
            return -ENOMEM;
        f->named = nn;
        f->named_cap = ncap;
    }
    f->named[f->nnamed++] = (struct named){ .id = id, .ino = ino };
    f->blob_files++;
    return 0;
}

/* One listed entry: checks (1), (2), (5), (6); records it for (3), (4), (7). */
/* What directory ino's GDT row says, against (f->cur_dir, name): NULL
 * when it agrees, else why not. */
static const char *gdt_says(struct fsck *f, uint64_t ino, const char *name)
{
    char key[XT_NS_ID_LEN + 1], at[XT_NAME_MAX + 1];
    xt_ns_id_name(ino, key);
    struct xt_resp r;
    xt_row row;
    int rc = pom_row_get(f->fs, XT_NS_TABLE_GDT, key, XT_CG_USER0, &r, &row);
    if (rc == -ENOENT)
        return "no GDT row";
    if (rc < 0)
        return "its GDT row does not read";
    uint64_t parent;
    const char *why = NULL;
    if (xt_ns_gdt_parse(&row, &parent, at) < 0 || row.attr.uuid != ino)
        why = "its GDT row is damaged";
    else if (parent != f->cur_dir || strcmp(at, name))
        why = "its GDT row names another place";
    xt_resp_free(&r);
    return why;
}

/* --repair-gdt: one GDT copy (a batch of its own; newest wins). */
static int gdt_write(struct fsck *f, uint64_t ino, uint64_t parent, const char *name,
                     uint64_t stamp)
{
    return pom_gdt_put(f->fs, ino, parent, name, stamp);
}

static void check_gdt(struct fsck *f, uint64_t ino, const char *name)
{
    const char *why = gdt_says(f, ino, name);
    for (int waited = 0; why && waited < GDT_WAIT_MS; waited += 100) {
        usleep(100 * 1000);
        why = gdt_says(f, ino, name);
    }
    if (!why) {
        f->gdt_ok++;
        return;
    }
    int rc = f->repair_gdt ? gdt_write(f, ino, f->cur_dir, name, xt_now_ns()) : -ENOSYS;
    if (rc == 0)
        f->gdt_repaired++;
    else
        problem(f, "directory %llu (%llu/%s): %s%s%s", (unsigned long long)ino,
                (unsigned long long)f->cur_dir, name, why, f->repair_gdt ? "; repair: " : "",
                f->repair_gdt ? strerror(-rc) : "");
}

/* The walk's progress line: "fsck: 12,345 rows, 210 dirs, 3.2 s". */
static void walk_progress(struct fsck *f)
{
    char rows[32], dirs[32];
    if (pomctl_progress_due(&f->prog))
        pomctl_progress_show(&f->prog, "%s rows, %s dirs",
                             pomctl_fmt_count(f->listed, rows, sizeof rows),
                             pomctl_fmt_count(f->ndirs, dirs, sizeof dirs));
}

static int on_entry(void *arg, const char *name, const struct stat *ls, uint64_t next)
{
    struct fsck *f = arg;
    f->listed++;
    walk_progress(f);
    if (next <= f->last_cookie)
        problem(f, "directory %llu: cookie went back from %llu to %llu at '%s'",
                (unsigned long long)f->cur_dir, (unsigned long long)f->last_cookie,
                (unsigned long long)next, name);
    f->last_cookie = next;
    if (f->nnames == f->names_cap) {
        size_t ncap = f->names_cap ? f->names_cap * 2 : 256;
        char **nn = xt_realloc(f->names, ncap * sizeof *nn);
        if (!nn)
            return -ENOMEM;
        f->names = nn;
        f->names_cap = ncap;
    }
    if (!(f->names[f->nnames] = xt_strdup(name)))
        return -ENOMEM;
    f->nnames++;

    struct stat st;
    int rc = pom_lookup(f->fs, f->cur_dir, name, &st);
    if (rc == -ENOENT) {
        f->changed++;
        return 0;
    }
    if (rc < 0) {
        problem(f, "directory %llu: '%s' is listed but its lookup fails: %s",
                (unsigned long long)f->cur_dir, name, strerror(-rc));
        return 0;
    }
    if (st.st_ino != ls->st_ino || (st.st_mode & S_IFMT) != (ls->st_mode & S_IFMT))
        problem(f, "directory %llu: '%s' is listed as inode %llu (mode %o) but found as "
                   "inode %llu (mode %o)",
                (unsigned long long)f->cur_dir, name, (unsigned long long)ls->st_ino,
                (unsigned)ls->st_mode, (unsigned long long)st.st_ino, (unsigned)st.st_mode);
    if (S_ISDIR(st.st_mode)) {
        f->ndirs++;
        f->cur_subdirs++;
        struct ino_ent *e = ino_get(f, st.st_ino);
        if (!e) {
            rc = -ENOMEM;
        } else if (e->names++ > 0) {
            problem(f, "directory inode %llu has more than one name (again as '%s' in %llu)",
                    (unsigned long long)st.st_ino, name, (unsigned long long)f->cur_dir);
        } else {
            e->mode = st.st_mode;
            check_gdt(f, st.st_ino, name);
            if ((rc = dir_push(f, st.st_ino)) == 0)
                return 0; /* keeps its lookup reference until it is listed */
        }
    } else {
        struct ino_ent *e = ino_get(f, st.st_ino);
        if (!e) {
            rc = -ENOMEM;
        } else {
            if (e->names++ == 0) {
                if (S_ISREG(st.st_mode)) {
                    f->nfiles++;
                    f->bytes += (uint64_t)st.st_size;
                } else if (S_ISLNK(st.st_mode)) {
                    f->nlinks++;
                    f->link_bytes += (uint64_t)st.st_size;
                } else {
                    f->nother++;
                }
            }
            e->nlink = (uint32_t)st.st_nlink;
            e->mode = st.st_mode;
        }
        if (S_ISLNK(st.st_mode)) {
            char target[POM_SYMLINK_MAX + 1];
            ssize_t n = pom_readlink(f->fs, st.st_ino, target, sizeof target);
            if (n < 0 && n != -ENOENT)
                problem(f, "symlink %llu/%s: readlink: %s", (unsigned long long)f->cur_dir,
                        name, strerror((int)-n));
            else if (n >= 0 && n != st.st_size)
                problem(f, "symlink %llu/%s: target of %zd bytes, size says %lld",
                        (unsigned long long)f->cur_dir, name, n, (long long)st.st_size);
        } else if (S_ISREG(st.st_mode) && e && e->names == 1) {
            if (f->data_check)
                check_data(f, f->cur_dir, name, &st);
        }
    }
    pom_forget(f->fs, st.st_ino, 1);
    return rc < 0 ? rc : 0;
}

/* Check (9) for one system row: counted by tag, its length checked. */
static void check_sys_row(struct fsck *f, uint64_t dir, const xt_row *row)
{
    int tag = row->name_len > 2 ? row->name[2] : -1;
    if (tag == XT_SYS_PENDING) {
        f->pending++;
        if (row->name_len != XT_SYS_PEND_LEN)
            problem(f, "directory %llu: a pending row (system row) of %u bytes, not %u",
                    (unsigned long long)dir, row->name_len, (unsigned)XT_SYS_PEND_LEN);
    } else if (tag == XT_SYS_COUNT) { /* an RMU's delta at the parent: a pending row too */
        f->pending++;
        if (row->name_len != XT_SYS_HEAD + 16)
            problem(f, "directory %llu: a count row (system row) of %u bytes, not %u",
                    (unsigned long long)dir, row->name_len, (unsigned)(XT_SYS_HEAD + 16));
    } else if (tag == XT_SYS_OUTBOX) { /* an RMU not delivered yet */
        f->outbox++;
        if (row->name_len != XT_SYS_HEAD + 16)
            problem(f, "directory %llu: an outbox row (system row) of %u bytes, not %u",
                    (unsigned long long)dir, row->name_len, (unsigned)(XT_SYS_HEAD + 16));
    } else if (tag == XT_SYS_DECISION) {
        f->decisions++;
        if (row->name_len < XT_SYS_HEAD + 16)
            problem(f, "directory %llu: a decision row (system row) of %u bytes, under %u",
                    (unsigned long long)dir, row->name_len, (unsigned)(XT_SYS_HEAD + 16));
    } else {
        f->sys_other++;
    }
}

/* Check (9): the system rows of dir's table (a listing that sends only
 * names containing 00 FF; ordinary names hold no NUL). 0 or -ENOMEM. */
static int scan_sys_rows(struct fsck *f, uint64_t dir)
{
    static const uint16_t none[1] = { 0 };
    uint64_t cookie = 0;
    while (cookie < POM_COOKIE_END) {
        struct xt_list_req lq = { .t = { .fsid = pom_fsid(f->fs), .table = dir, .slice_hint = -1 },
                                  .cookie = cookie, .max = 1024, .flags = XT_F_SYS,
                                  .cols = none, .ncols = 0, .substr = "\0\xff",
                                  .substr_len = 2 };
        struct xt_list_resp lr;
        int rc = pom_list_call(f->fs, &lq, &lr);
        if (rc == -ENOENT)
            return 0; /* no table: the directory never had an entry, or went away */
        if (rc < 0) {
            if (rc == -ENOMEM)
                return rc;
            problem(f, "directory %llu: its system rows do not list: %s",
                    (unsigned long long)dir, strerror(-rc));
            return 0;
        }
        for (size_t i = 0; i < lr.n; i++) {
            xt_row row;
            if (xt_row_decode_meta(lr.rows[i], lr.lens[i], &row) < 0)
                problem(f, "directory %llu: a system row does not decode: %s",
                        (unsigned long long)dir, xt_row_last_error());
            else if (xt_hash_is_sys(row.name, row.name_len))
                check_sys_row(f, dir, &row);
        }
        cookie = lr.next_cookie;
        xt_list_resp_free(&lr);
    }
    return 0;
}

static int list_dir(struct fsck *f, uint64_t dir)
{
    f->cur_dir = dir;
    f->last_cookie = POM_COOKIE_START;
    f->nnames = 0;
    f->cur_subdirs = 0;
    int rc;
    do
        rc = pom_readdir(f->fs, dir, f->last_cookie, 0, on_entry, f);
    while (rc > 0);
    struct stat ds;
    if (rc == 0 && pom_getattr(f->fs, dir, &ds) == 0 && ds.st_nlink >= 2 &&
        ds.st_nlink != 2 + (nlink_t)f->cur_subdirs)
        problem(f, "directory %llu has nlink %llu but %u subdirectories (2 + them expected)",
                (unsigned long long)dir, (unsigned long long)ds.st_nlink, f->cur_subdirs);
    if (rc == -ENOENT && dir != POM_ROOT_INO) {
        f->changed++; /* removed since it was listed in its parent */
        rc = 0;
    } else if (rc < 0 && rc != -ENOMEM) {
        problem(f, "directory %llu does not list: %s", (unsigned long long)dir, strerror(-rc));
        rc = 0;
    }
    if (rc == 0)
        rc = scan_sys_rows(f, dir);
    qsort(f->names, f->nnames, sizeof *f->names, cmp_str);
    for (size_t i = 1; i < f->nnames; i++)
        if (!strcmp(f->names[i], f->names[i - 1]))
            problem(f, "directory %llu lists '%s' twice", (unsigned long long)dir, f->names[i]);
    for (size_t i = 0; i < f->nnames; i++)
        xt_free(f->names[i]);
    f->nnames = 0;
    if (dir != POM_ROOT_INO)
        pom_forget(f->fs, dir, 1); /* the reference its lookup took (on_entry) */
    return rc;
}

/* Check (10): the GDT's rows. 0 or -ENOMEM (a listing that fails is a
 * problem). */
static int count_gdt(struct fsck *f)
{
    static const uint16_t none[1] = { 0 };
    uint64_t cookie = 0;
    char b[32];
    while (cookie < POM_COOKIE_END) {
        struct xt_list_req lq = { .t = { .fsid = pom_fsid(f->fs), .table = XT_NS_TABLE_GDT,
                                         .slice_hint = -1 },
                                  .cookie = cookie, .max = 1024, .cols = none, .ncols = 0 };
        struct xt_list_resp lr;
        int rc = pom_list_call(f->fs, &lq, &lr);
        if (rc == -ENOENT)
            return 0; /* no table: no directory was ever made */
        if (rc < 0) {
            if (rc != -ENOMEM)
                problem(f, "the GDT does not list: %s", strerror(-rc));
            return rc == -ENOMEM ? rc : 0;
        }
        for (size_t i = 0; i < lr.n; i++) {
            xt_row row;
            if (xt_row_decode_meta(lr.rows[i], lr.lens[i], &row) < 0) {
                problem(f, "a GDT row does not decode: %s", xt_row_last_error());
                continue;
            }
            f->gdt_rows++;
            if (pomctl_progress_due(&f->prog))
                pomctl_progress_show(&f->prog, "%s GDT rows",
                                     pomctl_fmt_count(f->gdt_rows, b, sizeof b));
            const struct ino_ent *e = f->cap ? ino_slot(f, row.attr.uuid) : NULL;
            if (e && e->ino)
                continue;
            f->gdt_stale++;
            uint64_t age_ns = (uint64_t)GDT_STALE_AGE_S * 1000000000u;
            if (f->repair_gdt && !f->changed && row.attr.ctime_ns + age_ns < xt_now_ns() &&
                gdt_write(f, row.attr.uuid, 0, NULL, row.attr.ctime_ns) == 0)
                f->gdt_removed++;
        }
        cookie = lr.next_cookie;
        xt_list_resp_free(&lr);
    }
    return 0;
}

static int walk(struct fsck *f)
{
    int rc = dir_push(f, POM_ROOT_INO);
    f->ndirs = 1;
    while (rc == 0 && f->dhead < f->dtail)
        rc = list_dir(f, f->dirs[f->dhead++]);
    if (rc == 0)
        rc = count_gdt(f);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < f->cap; i++) {
        const struct ino_ent *e = &f->map[i];
        if (e->ino && !S_ISDIR(e->mode) && e->nlink != e->names)
            problem(f, "inode %llu has nlink %u but %u names", (unsigned long long)e->ino,
                    e->nlink, e->names);
    }
    return 0;
}

static int cmp_named(const void *a, const void *b)
{
    const struct named *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->ino < y->ino ? -1 : x->ino > y->ino;
}

/* The first entry of f->named (sorted) with tracts id `id`, or NULL. */
static struct named *named_find(struct fsck *f, uint64_t id)
{
    size_t lo = 0, hi = f->nnamed;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (f->named[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < f->nnamed && f->named[lo].id == id ? &f->named[lo] : NULL;
}

/* pom_blob_list callback: a set some row names, or an orphan. */
static int on_set(void *arg, const struct pom_blob_set *s)
{
    struct fsck *f = arg;
    f->sets++;
    f->set_bytes += s->alloc_bytes;
    char b[32];
    if (pomctl_progress_due(&f->prog))
        pomctl_progress_show(&f->prog, "%s tract sets", pomctl_fmt_count(f->sets, b, sizeof b));
    struct named *n = named_find(f, s->id);
    if (n) {
        for (; n < f->named + f->nnamed && n->id == s->id; n++)
            n->found = true;
        return 0;
    }
    f->orphans++;
    f->orphan_bytes += s->alloc_bytes;
    if (!f->repair_orphans)
        return 0;
    if (f->now_ns - s->mtime_ns < (int64_t)ORPHAN_AGE_S * 1000000000) {
        f->young++; /* maybe being written right now */
        return 0;
    }
    if (f->ndoomed == f->doomed_cap) {
        size_t ncap = f->doomed_cap ? f->doomed_cap * 2 : 64;
        uint64_t *nd = xt_realloc(f->doomed, ncap * sizeof *nd);
        if (!nd)
            return -ENOMEM;
        f->doomed = nd;
        f->doomed_cap = ncap;
    }
    f->doomed[f->ndoomed++] = s->id;
    return 0;
}

/* Check (7), after the walk: the tier's sets against f->named; with
 * --repair-orphans, removes the old orphans (after the listing: the store
 * is not changed under it). 0 or -errno of the listing. */
static int check_tracts(struct fsck *f)
{
    if (!f->blob)
        return 0;
    int rc = pom_tracts_named(f->fs, note_tracts, f);
    if (rc < 0)
        return rc;
    if (f->nnamed > 1)
        qsort(f->named, f->nnamed, sizeof *f->named, cmp_named);
    for (size_t i = 1; i < f->nnamed; i++)
        if (f->named[i].id == f->named[i - 1].id)
            problem(f, "inodes %llu and %llu name the same tracts (id %016llx): a write to "
                       "one changes the other",
                    (unsigned long long)f->named[i - 1].ino, (unsigned long long)f->named[i].ino,
                    (unsigned long long)f->named[i].id);
    f->now_ns = (int64_t)xt_now_ns();
    rc = pom_blob_list(f->blob, on_set, f);
    if (rc < 0)
        return rc;
    for (size_t i = 0; i < f->nnamed; i++)
        if (!f->named[i].found) {
            /* Every migration records its set (pom_blob_create): one the
             * tier does not hold is lost, and its reads answer EIO. */
            f->no_tracts++;
            problem(f, "inode %llu names tract set %016llx that the blob tier does not hold: "
                       "its reads answer EIO",
                    (unsigned long long)f->named[i].ino, (unsigned long long)f->named[i].id);
        }
    if (f->ndoomed && (f->problems || f->changed)) {
        /* The walk may have missed rows (a directory that does not list, a
         * name that changed): their sets would look like orphans. */
        f->repair_skipped = true;
        f->ndoomed = 0;
    }
    for (size_t i = 0; i < f->ndoomed; i++) {
        char b[32], n[32];
        if (pomctl_progress_due(&f->prog))
            pomctl_progress_show(&f->prog, "removing orphan sets, %s of %s",
                                 pomctl_fmt_count(i, b, sizeof b),
                                 pomctl_fmt_count(f->ndoomed, n, sizeof n));
        struct pom_blob_stat st;
        if (pom_blob_stat(f->blob, f->doomed[i], &st) < 0)
            st.alloc_bytes = 0;
        int e = pom_blob_delete(f->blob, f->doomed[i]);
        if (e < 0) {
            problem(f, "orphan tract set %016llx: cannot remove it: %s",
                    (unsigned long long)f->doomed[i], strerror(-e));
            continue;
        }
        f->removed++;
        f->removed_bytes += st.alloc_bytes;
    }
    return 0;
}

/* Check (11): what the walk counts as the fs's usage. */
static uint64_t usage_inodes(const struct fsck *f)
{
    /* ndirs counts the root (walk), which is the fs record's, no row's. */
    return (f->ndirs ? f->ndirs - 1 : 0) + f->nfiles + f->nlinks + f->nother;
}

static uint64_t usage_bytes(const struct fsck *f)
{
    return f->bytes + f->link_bytes;
}

/* R2's totals of fsname into *files, *bytes. 0 or -errno. */
static int r2_usage(struct fsck *f, const char *fsname, uint64_t *files, uint64_t *bytes)
{
    struct xt_fs_info *fs;
    size_t n;
    int rc = pomctl_fs_list(f->ctl, fsname, &fs, &n);
    if (rc == 0 && n != 1)
        rc = -ENOENT;
    if (rc == 0) {
        *files = fs[0].files;
        *bytes = fs[0].bytes;
    }
    xt_fs_info_free_array(fs, n);
    return rc;
}

/* Check (11), after a complete walk. */
static void check_usage(struct fsck *f, const char *fsname)
{
    if (r2_usage(f, fsname, &f->r2_files, &f->r2_bytes) < 0)
        return; /* an old R2, or unreachable now: the walk's figures alone */
    f->has_r2_usage = true;
    bool drift = f->r2_files != usage_inodes(f) || f->r2_bytes != usage_bytes(f);
    if (!drift || !f->repair_usage || f->changed || f->problems)
        return;
    /* Figures still on their way to R2 would be counted twice. */
    xt_sleep_ms(USAGE_SETTLE_MS);
    uint64_t files = 0, bytes = 0;
    if (r2_usage(f, fsname, &files, &bytes) < 0 || files != f->r2_files || bytes != f->r2_bytes)
        return;
    int rc = pomctl_r2_leader(f->ctl);
    if (rc == 0) {
        xt_rpc_call call = pomctl_call(f->ctl);
        rc = xt_r2_fs_set_usage(f->ctl->pool, &call, fsname, usage_inodes(f), usage_bytes(f));
    }
    if (rc < 0)
        problem(f, "cannot set R2's usage of %s: %s", fsname, strerror(-rc));
    else
        f->usage_repaired = true;
}

static void report(struct fsck *f, const char *fsname)
{
    if (f->ctl->json) {
        pomctl_json_init(&f->ctl->js, stdout, true);
        pomctl_json_obj_begin(&f->ctl->js, NULL);
        pomctl_json_bool(&f->ctl->js, "ok", f->problems == 0);
        pomctl_json_str(&f->ctl->js, "fs", fsname);
        pomctl_json_u64(&f->ctl->js, "directories", f->ndirs);
        pomctl_json_u64(&f->ctl->js, "files", f->nfiles);
        pomctl_json_u64(&f->ctl->js, "symlinks", f->nlinks);
        pomctl_json_u64(&f->ctl->js, "other", f->nother);
        pomctl_json_u64(&f->ctl->js, "bytes", f->bytes);
        pomctl_json_u64(&f->ctl->js, "changed_meanwhile", f->changed);
        pomctl_json_u64(&f->ctl->js, "pending_rows", f->pending);
        pomctl_json_u64(&f->ctl->js, "decision_rows", f->decisions);
        pomctl_json_u64(&f->ctl->js, "outbox_rows", f->outbox);
        pomctl_json_u64(&f->ctl->js, "other_system_rows", f->sys_other);
        pomctl_json_u64(&f->ctl->js, "gdt_rows_checked", f->gdt_ok);
        pomctl_json_u64(&f->ctl->js, "gdt_rows", f->gdt_rows);
        pomctl_json_u64(&f->ctl->js, "gdt_stale", f->gdt_stale);
        pomctl_json_u64(&f->ctl->js, "gdt_repaired", f->gdt_repaired);
        pomctl_json_u64(&f->ctl->js, "gdt_stale_removed", f->gdt_removed);
        pomctl_json_u64(&f->ctl->js, "problems", f->problems);
        pomctl_json_bool(&f->ctl->js, "data_checked", f->data_check);
        pomctl_json_bool(&f->ctl->js, "blob_checked", f->blob != NULL);
        pomctl_json_u64(&f->ctl->js, "blob_files", f->blob_files);
        pomctl_json_u64(&f->ctl->js, "blob_files_without_tracts", f->no_tracts);
        pomctl_json_u64(&f->ctl->js, "tract_sets", f->sets);
        pomctl_json_u64(&f->ctl->js, "tract_set_bytes", f->set_bytes);
        pomctl_json_u64(&f->ctl->js, "orphan_sets", f->orphans);
        pomctl_json_u64(&f->ctl->js, "orphan_bytes", f->orphan_bytes);
        pomctl_json_bool(&f->ctl->js, "repair_orphans", f->repair_orphans);
        pomctl_json_u64(&f->ctl->js, "orphans_removed", f->removed);
        pomctl_json_u64(&f->ctl->js, "orphan_bytes_removed", f->removed_bytes);
        pomctl_json_u64(&f->ctl->js, "orphans_too_new", f->young);
        pomctl_json_bool(&f->ctl->js, "repair_skipped", f->repair_skipped);
        pomctl_json_obj_begin(&f->ctl->js, "usage");
        pomctl_json_u64(&f->ctl->js, "inodes", usage_inodes(f));
        pomctl_json_u64(&f->ctl->js, "bytes", usage_bytes(f));
        if (f->has_r2_usage) {
            pomctl_json_u64(&f->ctl->js, "r2_inodes", f->r2_files);
            pomctl_json_u64(&f->ctl->js, "r2_bytes", f->r2_bytes);
        }
        pomctl_json_bool(&f->ctl->js, "repaired", f->usage_repaired);
        pomctl_json_obj_end(&f->ctl->js);
        pomctl_json_obj_end(&f->ctl->js);
        pomctl_json_finish(&f->ctl->js);
        f->ctl->json_done = true;
        return;
    }
    printf("fsck %s: %llu directories, %llu files (%llu bytes), %llu symlinks, %llu other%s\n",
           fsname, (unsigned long long)f->ndirs, (unsigned long long)f->nfiles,
           (unsigned long long)f->bytes, (unsigned long long)f->nlinks,
           (unsigned long long)f->nother, f->data_check ? "; every file read" : "");
    printf("system rows (transactions in progress): %llu pending rows, %llu decision rows, "
           "%llu RMU outbox rows, %llu other\n",
           (unsigned long long)f->pending, (unsigned long long)f->decisions,
           (unsigned long long)f->outbox, (unsigned long long)f->sys_other);
    printf("GDT: %llu rows, %llu checked against their directories, %llu stale\n",
           (unsigned long long)f->gdt_rows, (unsigned long long)f->gdt_ok,
           (unsigned long long)f->gdt_stale);
    if (f->repair_gdt)
        printf("GDT repaired: %llu rows written, %llu stale rows removed (those older than "
               "%d s, after a walk without changes)\n",
               (unsigned long long)f->gdt_repaired, (unsigned long long)f->gdt_removed,
               GDT_STALE_AGE_S);
    if (f->blob) {
        printf("blob tier: %llu tract sets (%llu bytes on disk); %llu blob files, %llu of them "
               "without their set (lost)\n",
               (unsigned long long)f->sets, (unsigned long long)f->set_bytes,
               (unsigned long long)f->blob_files, (unsigned long long)f->no_tracts);
        printf("orphan tract sets: %llu (%llu bytes)\n", (unsigned long long)f->orphans,
               (unsigned long long)f->orphan_bytes);
        if (f->repair_orphans)
            printf("removed %llu orphan tract sets (%llu bytes); kept %llu written less than "
                   "%d s ago\n",
                   (unsigned long long)f->removed, (unsigned long long)f->removed_bytes,
                   (unsigned long long)f->young, ORPHAN_AGE_S);
        if (f->repair_skipped)
            printf("orphans not removed: the walk met problems or changes, so a set may "
                   "belong to a row it did not see (run again on a quiet fs)\n");
    } else {
        printf("blob tier: none open, tract sets not checked\n");
    }
    printf("usage: %llu inodes, %llu bytes", (unsigned long long)usage_inodes(f),
           (unsigned long long)usage_bytes(f));
    if (f->has_r2_usage)
        printf("; R2's totals %llu inodes, %llu bytes%s", (unsigned long long)f->r2_files,
               (unsigned long long)f->r2_bytes,
               f->usage_repaired ? " (set to the walk's)"
               : f->r2_files != usage_inodes(f) || f->r2_bytes != usage_bytes(f)
                   ? " (drifted or behind; --repair-usage on a quiet fs sets them)"
                   : "");
    printf("\n");
    if (f->changed)
        printf("%llu names changed while it ran (not counted as problems)\n",
               (unsigned long long)f->changed);
    if (f->problems > f->max_problems)
        printf("(%llu more problems not shown)\n",
               (unsigned long long)(f->problems - f->max_problems));
    printf(f->problems ? "%llu problems\n" : "clean\n", (unsigned long long)f->problems);
}

/* --repair-orphans runs only when R2 counts no mount of fsname (UP or
 * TRANSIENT client sites): a live client's unflushed migration looks like
 * an orphan. Asked before fsck's own pom_open registers it. 0, or an exit
 * code (message printed). */
static int refuse_if_mounted(struct pomctl *ctl, const char *fsname)
{
    struct xt_fs_info *fs;
    size_t n;
    int rc = pomctl_fs_list(ctl, fsname, &fs, &n);
    uint32_t mounts = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!strcmp(fs[i].name, fsname))
            mounts = fs[i].mounts;
    xt_fs_info_free_array(fs, n);
    char what[128];
    snprintf(what, sizeof what, "fsck %s --repair-orphans", fsname);
    if (rc < 0)
        return pomctl_fail(ctl, rc, what, NULL);
    if (mounts == 0)
        return 0;
    char hint[192];
    snprintf(hint, sizeof hint,
             "R2 counts %u mount(s) of it; unmount every client first (a mount that just "
             "ended, or an fsck, counts for a few seconds)", mounts);
    return pomctl_fail(ctl, -EBUSY, what, hint);
}

int pomctl_cmd_fsck(struct pomctl *ctl, int argc, char **argv)
{
    const char *fsname = "pomfs";
    struct fsck f = { .ctl = ctl, .max_problems = 100 };
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--fs") && i + 1 < argc)
            fsname = argv[++i];
        else if (!strcmp(argv[i], "--data-check"))
            f.data_check = true;
        else if (!strcmp(argv[i], "--repair-orphans"))
            f.repair_orphans = true;
        else if (!strcmp(argv[i], "--repair-gdt"))
            f.repair_gdt = true;
        else if (!strcmp(argv[i], "--repair-usage"))
            f.repair_usage = true;
        else if (!strcmp(argv[i], "--max-problems") && i + 1 < argc)
            f.max_problems = strtoull(argv[++i], NULL, 10);
        else
            return pomctl_usage_err(ctl, "fsck", "unknown argument '%s'", argv[i]);
    }
    if (!pomctl_fs_name_ok(fsname))
        return pomctl_usage_err(ctl, "fsck", "bad fs name '%s'", fsname);
    int rc = pomctl_resolve_addrs(ctl);
    if (rc)
        return rc;
    if (f.repair_orphans && (rc = refuse_if_mounted(ctl, fsname)))
        return rc;
    char what[128];
    snprintf(what, sizeof what, "fsck %s", fsname);
    if ((rc = pomctl_fs_open(ctl, fsname, what, &f.fs)))
        return rc;
    f.blob = pom_blob_of(f.fs);
    pomctl_progress_begin(&f.prog, "fsck", ctl->json);
    rc = walk(&f);
    if (rc == 0)
        rc = check_tracts(&f);
    pomctl_progress_end(&f.prog);
    if (rc == 0)
        check_usage(&f, fsname);
    int code = POMCTL_OK;
    if (rc < 0) {
        fprintf(stderr, "pomctl: fsck %s: the walk stopped: %s\n", fsname, strerror(-rc));
        code = POMCTL_EFAIL;
    }
    report(&f, fsname);
    if (f.problems)
        code = POMCTL_EFAIL;
    pom_close(f.fs);
    xt_free(f.map);
    xt_free(f.dirs);
    xt_free(f.names);
    xt_free(f.named);
    xt_free(f.doomed);
    return code;
}
