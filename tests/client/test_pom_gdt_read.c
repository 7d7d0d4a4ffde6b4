/*
 * test_pom_gdt_read.c -- the GDT's read side (client/pom_gdt_read.c;
 * docs/client.md "Lookup by uuid"):
 *   - the reader's row checks (pom_gdt_read_hint over xt_ns_gdt_parse) on
 *     encoded rows: a good row, and every kind of damage
 *     (uuid, type, missing or short group, format, name length, name,
 *     parent) answering -EIO;
 *   - against real pom-mdsl + pom-mds, with GDT rows made by hand (the
 *     reader alone): a damaged row is -EIO at once, a hint whose target
 *     does not hold is -ESTALE at once (one MDS: no copy is in flight, so
 *     nothing is waited for), a hint to a regular file finds it, a row
 *     made after a miss is found by the next lookup, 8 lookups of one
 *     directory at once take 8 references;
 *   - with the writer (mkdir/rename/rmdir's RMU): a SECOND client, whose
 *     inode map is empty, finds a deep directory by uuid alone, its ".."
 *     and "." too; after a rename to another parent it finds it at the new
 *     place (fresh client, and the first client's stale map); a regular
 *     file is found, a hard-linked one by its ILT row after the name it
 *     was made under is gone; after rmdir, unlink and for a bogus uuid
 *     -ESTALE; references are those of pom_lookup.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pom_ns_i.h" /* pom_gdt_read_hint, pom_call: rows made by hand */
#include "pom_cluster.h"
#include "pomegranate.h"
#include "xt_common.h"
#include "xt_row.h"

#define FSID 12
#define UUID_A (XT_NS_UUID_BASE - 1000) /* uuids no client hands out */

static struct pom_cluster C;

/* ---- the parser --------------------------------------------------------- */

/* The USER0 group of a GDT row: fmt, parent, name_len, name. */
static uint32_t gdt_group(uint8_t *g, uint8_t fmt, uint64_t parent, uint16_t nlen,
                          const void *name, size_t name_bytes)
{
    g[0] = fmt;
    xt_put_u64(g + 1, parent);
    xt_put_u16(g + 9, nlen);
    memcpy(g + XT_NS_GDT_HEAD, name, name_bytes);
    return (uint32_t)(XT_NS_GDT_HEAD + name_bytes);
}

/* What a GDT row says. */
struct hint {
    uint64_t parent;
    char name[XT_NAME_MAX + 1];
};

/* Encodes then decodes a GDT row (as a lookup returns it) and reads it. */
static int parse(uint64_t row_uuid, uint8_t type, const uint8_t *g, uint32_t glen,
                 uint64_t uuid, struct hint *h)
{
    char id[XT_NS_ID_LEN + 1];
    xt_ns_id_name(row_uuid, id);
    xt_row row;
    xt_row_init(&row);
    row.attr.uuid = row_uuid;
    row.attr.type = type;
    row.attr.ctime_ns = 12345;
    row.name = (const uint8_t *)id;
    row.name_len = XT_NS_ID_LEN;
    if (g)
        assert_int_equal(xt_row_view_set_group(&row, XT_CG_USER0, g, glen), 0);
    uint8_t *enc;
    size_t len;
    assert_int_equal(xt_row_encode_alloc(&row, &enc, &len), 0);
    xt_row dec;
    assert_int_equal(xt_row_decode(enc, len, &dec), 0);
    int rc = pom_gdt_read_hint(&dec, uuid, &h->parent, h->name);
    xt_free(enc);
    return rc;
}

static void test_parse_good(void **state)
{
    (void)state;
    uint8_t g[XT_NS_GDT_HEAD + XT_NAME_MAX];
    struct hint h;
    uint32_t n = gdt_group(g, XT_NS_GDT_FMT, 77, 5, "dir-1", 5);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), 0);
    assert_int_equal(h.parent, 77);
    assert_string_equal(h.name, "dir-1");
    /* The longest name. */
    char longest[XT_NAME_MAX];
    memset(longest, 'n', sizeof longest);
    n = gdt_group(g, XT_NS_GDT_FMT, POM_ROOT_INO, XT_NAME_MAX, longest, sizeof longest);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), 0);
    assert_int_equal(h.parent, POM_ROOT_INO);
    assert_int_equal(strlen(h.name), XT_NAME_MAX);
}

static void test_parse_damaged(void **state)
{
    (void)state;
    uint8_t g[XT_NS_GDT_HEAD + XT_NAME_MAX + 8];
    struct hint h;
    uint32_t n = gdt_group(g, XT_NS_GDT_FMT, 77, 3, "abc", 3);
    /* Another directory's row, or not a KV row. */
    assert_int_equal(parse(UUID_A + 1, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    assert_int_equal(parse(UUID_A, XT_ROW_DIR, g, n, UUID_A, &h), -EIO);
    /* No group; a group shorter than its head (even by one byte). */
    assert_int_equal(parse(UUID_A, XT_ROW_KV, NULL, 0, UUID_A, &h), -EIO);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, XT_NS_GDT_HEAD - 1, UUID_A, &h), -EIO);
    /* A format this reader does not know. */
    n = gdt_group(g, XT_NS_GDT_FMT + 1, 77, 3, "abc", 3);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    /* name_len 0, past XT_NAME_MAX, longer and shorter than the bytes. */
    n = gdt_group(g, XT_NS_GDT_FMT, 77, 0, "", 0);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    char big[XT_NAME_MAX + 1];
    memset(big, 'b', sizeof big);
    n = gdt_group(g, XT_NS_GDT_FMT, 77, XT_NAME_MAX + 1, big, sizeof big);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    n = gdt_group(g, XT_NS_GDT_FMT, 77, 4, "abc", 3);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    n = gdt_group(g, XT_NS_GDT_FMT, 77, 2, "abc", 3);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    /* Names no directory has: '/', ".", "..", a NUL inside. */
    n = gdt_group(g, XT_NS_GDT_FMT, 77, 3, "a/b", 3);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    n = gdt_group(g, XT_NS_GDT_FMT, 77, 1, ".", 1);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    n = gdt_group(g, XT_NS_GDT_FMT, 77, 2, "..", 2);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    n = gdt_group(g, XT_NS_GDT_FMT, 77, 3, "a\0b", 3);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    /* No parent, or itself as its parent. */
    n = gdt_group(g, XT_NS_GDT_FMT, 0, 3, "abc", 3);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
    n = gdt_group(g, XT_NS_GDT_FMT, UUID_A, 3, "abc", 3);
    assert_int_equal(parse(UUID_A, XT_ROW_KV, g, n, UUID_A, &h), -EIO);
}

/* ---- against a cluster ------------------------------------------------ */

static int group_setup(void **state)
{
    (void)state;
    return pom_cluster_up(&C, "gdtread", POM_MDSL_BIN, POM_MDS_BIN) ? -1 : 0;
}

static int group_teardown(void **state)
{
    (void)state;
    pom_cluster_destroy(&C);
    return 0;
}

static pom_fs *conn(void)
{
    pom_fs *fs = NULL;
    assert_int_equal(pom_connect_mds(C.mds_addr, FSID, &fs), 0);
    return fs;
}

static double now_s(void)
{
    return (double)xt_mono_ns() / 1e9;
}

/* Writes row (table, name) by hand, replacing any. */
static void put_row(pom_fs *fs, uint64_t table, const char *name, const xt_row *row)
{
    struct xt_req q = { .op = XT_OP_CREATE, .t = { .table = table }, .name = name,
                        .name_len = (uint32_t)strlen(name), .row = row };
    struct xt_resp r;
    int rc = pom_call(fs, &q, &r, NULL);
    xt_resp_free(&r);
    if (rc == -EEXIST) {
        struct xt_req d = { .op = XT_OP_DELETE, .t = { .table = table }, .name = name,
                            .name_len = (uint32_t)strlen(name) };
        assert_int_equal(pom_call(fs, &d, &r, NULL), 0);
        xt_resp_free(&r);
        rc = pom_call(fs, &q, &r, NULL);
        xt_resp_free(&r);
    }
    assert_int_equal(rc, 0);
}

/* A GDT row for uuid with the USER0 group g, made by hand. */
static void put_gdt(pom_fs *fs, uint64_t uuid, const uint8_t *g, uint32_t glen)
{
    char id[XT_NS_ID_LEN + 1];
    xt_ns_id_name(uuid, id);
    xt_row row;
    xt_row_init(&row);
    row.attr.uuid = uuid;
    row.attr.type = XT_ROW_KV;
    row.attr.ctime_ns = xt_now_ns();
    assert_int_equal(xt_row_view_set_group(&row, XT_CG_USER0, g, glen), 0);
    put_row(fs, XT_NS_TABLE_GDT, id, &row);
}

/* A directory row (table, name) holding uuid, made by hand (not mkdir:
 * so no RMU writes its GDT row). */
static void put_dir(pom_fs *fs, uint64_t table, const char *name, uint64_t uuid)
{
    xt_row row;
    xt_row_init(&row);
    row.attr.uuid = uuid;
    row.attr.type = XT_ROW_DIR;
    row.attr.mode = 0755;
    row.attr.nlink = 2;
    row.attr.ctime_ns = row.attr.mtime_ns = xt_now_ns();
    put_row(fs, table, name, &row);
}

static void test_hand_made_rows(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    uint8_t g[XT_NS_GDT_HEAD + 16];
    struct stat st;

    /* Damaged: -EIO at once (no retry window). */
    uint32_t n = gdt_group(g, XT_NS_GDT_FMT + 7, POM_ROOT_INO, 3, "abc", 3);
    put_gdt(fs, UUID_A, g, n);
    double t0 = now_s();
    assert_int_equal(pom_lookup_ino(fs, UUID_A, &st), -EIO);
    assert_true(now_s() - t0 < 1.0);

    /* A hint whose target holds another uuid: -ESTALE, at once with one
     * MDS (every copy applies in its batch; nothing to wait for). */
    put_dir(fs, POM_ROOT_INO, "other", UUID_A + 100);
    n = gdt_group(g, XT_NS_GDT_FMT, POM_ROOT_INO, 5, "other", 5);
    put_gdt(fs, UUID_A + 1, g, n);
    t0 = now_s();
    assert_int_equal(pom_lookup_ino(fs, UUID_A + 1, &st), -ESTALE);
    assert_true(now_s() - t0 < 1.0);
    /* ... and a target that is a regular file: found. */
    xt_row reg;
    xt_row_init(&reg);
    reg.attr.uuid = UUID_A + 2;
    reg.attr.type = XT_ROW_REG;
    reg.attr.mode = 0644;
    reg.attr.nlink = 1;
    put_row(fs, POM_ROOT_INO, "plain", &reg);
    n = gdt_group(g, XT_NS_GDT_FMT, POM_ROOT_INO, 5, "plain", 5);
    put_gdt(fs, UUID_A + 2, g, n);
    assert_int_equal(pom_lookup_ino(fs, UUID_A + 2, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(pom_lookup_parent(fs, UUID_A + 2, &st), -ENOTDIR);
    pom_forget(fs, UUID_A + 2, 1);

    /* A hint that holds: found, with one reference, its parent by "..". */
    put_dir(fs, POM_ROOT_INO, "handmade", UUID_A + 3);
    n = gdt_group(g, XT_NS_GDT_FMT, POM_ROOT_INO, 8, "handmade", 8);
    put_gdt(fs, UUID_A + 3, g, n);
    assert_int_equal(pom_getattr(fs, UUID_A + 3, &st), -ESTALE); /* unknown */
    assert_int_equal(pom_lookup_ino(fs, UUID_A + 3, &st), 0);
    assert_int_equal(st.st_ino, UUID_A + 3);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(pom_getattr(fs, UUID_A + 3, &st), 0);
    assert_int_equal(pom_lookup(fs, UUID_A + 3, "..", &st), 0);
    assert_int_equal(st.st_ino, POM_ROOT_INO);
    pom_forget(fs, UUID_A + 3, 1);
    assert_int_equal(pom_getattr(fs, UUID_A + 3, &st), -ESTALE); /* given back */
    pom_close(fs);
}

struct late {
    pom_fs *fs;
    uint64_t uuid;
    atomic_int started;  /* the lookup is about to begin */
    int rc;
    struct stat st;
    double took;
};

static void *lookup_thread(void *arg)
{
    struct late *l = arg;
    double t0 = now_s();
    atomic_store(&l->started, 1);
    l->rc = pom_lookup_ino(l->fs, l->uuid, &l->st);
    l->took = now_s() - t0;
    return NULL;
}

/* One MDS: a missing GDT row is -ESTALE at once (no copy can be in
 * flight), and a row made afterwards is found by the next lookup. */
static void test_late_row(void **state)
{
    (void)state;
    pom_fs *fs = conn(), *writer = conn();
    uint64_t uuid = UUID_A + 4;
    put_dir(writer, POM_ROOT_INO, "late", uuid);
    struct late l = { .fs = fs, .uuid = uuid, .rc = 1 };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, lookup_thread, &l), 0);
    pthread_join(th, NULL);
    assert_true(atomic_load(&l.started));
    assert_int_equal(l.rc, -ESTALE);
    assert_true(l.took < 1.0);
    uint8_t g[XT_NS_GDT_HEAD + 8];
    uint32_t n = gdt_group(g, XT_NS_GDT_FMT, POM_ROOT_INO, 4, "late", 4);
    put_gdt(writer, uuid, g, n);
    assert_int_equal(pom_lookup_ino(fs, uuid, &l.st), 0);
    assert_int_equal(l.st.st_ino, uuid);
    pom_forget(fs, uuid, 1);
    pom_close(writer);
    pom_close(fs);
}

struct racer {
    pom_fs *fs;
    uint64_t uuid;
    int rc;
};

static void *racer_thread(void *arg)
{
    struct racer *r = arg;
    struct stat st;
    r->rc = pom_lookup_ino(r->fs, r->uuid, &st);
    return NULL;
}

/* Many lookups by uuid of one unknown directory at once (the kernel's
 * LOOKUP(ino, ".") from several handles): each takes exactly one
 * reference, so as many forgets make it unknown again. */
static void test_concurrent_refs(void **state)
{
    (void)state;
    enum { N = 8 };
    pom_fs *fs = conn();
    uint64_t uuid = UUID_A + 5;
    put_dir(fs, POM_ROOT_INO, "raced", uuid);
    uint8_t g[XT_NS_GDT_HEAD + 8];
    uint32_t n = gdt_group(g, XT_NS_GDT_FMT, POM_ROOT_INO, 5, "raced", 5);
    put_gdt(fs, uuid, g, n);
    struct racer r[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        r[i] = (struct racer){ fs, uuid, 1 };
        assert_int_equal(pthread_create(&th[i], NULL, racer_thread, &r[i]), 0);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(r[i].rc, 0);
    }
    struct stat st;
    for (int i = 0; i < N; i++) {
        assert_int_equal(pom_getattr(fs, uuid, &st), 0);
        pom_forget(fs, uuid, 1);
    }
    assert_int_equal(pom_getattr(fs, uuid, &st), -ESTALE);
    pom_close(fs);
}

/* ---- with the writer -------------------------------------------------- */

static pom_ino mkdir_in(pom_fs *fs, pom_ino parent, const char *name)
{
    struct stat st;
    assert_int_equal(pom_mkdir(fs, parent, name, 0755, NULL, &st), 0);
    return st.st_ino;
}

/* pom_lookup_ino on a fresh client until it answers `want` (the RMU may
 * lag), for up to 10 s; returns its last answer. */
static int find_fresh(uint64_t ino, int want, struct stat *st, pom_ino *parent)
{
    double t0 = now_s();
    int rc;
    do {
        pom_fs *fs = conn();
        rc = pom_lookup_ino(fs, ino, st);
        if (rc == 0) {
            struct stat ps;
            assert_int_equal(pom_lookup_parent(fs, ino, &ps), 0);
            *parent = ps.st_ino;
        }
        pom_close(fs);
    } while (rc != want && now_s() - t0 < 10.0);
    return rc;
}

static void test_deep_dir_by_uuid(void **state)
{
    (void)state;
    pom_fs *fs = conn();
    pom_ino a = mkdir_in(fs, POM_ROOT_INO, "a");
    pom_ino b = mkdir_in(fs, a, "b");
    pom_ino c = mkdir_in(fs, b, "c");
    pom_ino d = mkdir_in(fs, c, "d");
    pom_ino x = mkdir_in(fs, POM_ROOT_INO, "x");
    struct stat st;
    assert_int_equal(pom_mknod(fs, d, "file", S_IFREG | 0644, 0, NULL, &st), 0);
    pom_ino file = st.st_ino;

    /* A second client with an empty map finds d, its parent chain up to
     * the root, and "." of d. */
    pom_ino parent = 0;
    assert_int_equal(find_fresh(d, 0, &st, &parent), 0);
    assert_int_equal(st.st_ino, d);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(parent, c);
    /* The kernel's LOOKUP(ino, ".") of a handle (pomfs answers it with
     * pom_lookup_ino; pom_lookup(".") knows only what the map knows): one
     * reference, as a lookup's, given back by forget. */
    pom_fs *fs2 = conn();
    assert_int_equal(pom_getattr(fs2, d, &st), -ESTALE);
    assert_int_equal(pom_lookup(fs2, d, ".", &st), -ESTALE);
    assert_int_equal(pom_lookup_ino(fs2, d, &st), 0);
    assert_int_equal(st.st_ino, d);
    assert_int_equal(pom_getattr(fs2, d, &st), 0);
    pom_forget(fs2, d, 1);
    assert_int_equal(pom_getattr(fs2, d, &st), -ESTALE);
    assert_int_equal(pom_lookup_ino(fs2, d, &st), 0);
    pom_ino chain[] = { c, b, a, POM_ROOT_INO, POM_ROOT_INO }, cur = d;
    for (size_t i = 0; i < sizeof chain / sizeof chain[0]; i++) {
        assert_int_equal(pom_lookup_parent(fs2, cur, &st), 0);
        assert_int_equal(st.st_ino, chain[i]);
        cur = st.st_ino; /* the reference taken is kept */
    }
    /* The names under the found directory work: a lookup from it. */
    assert_int_equal(pom_lookup(fs2, d, "file", &st), 0);
    assert_int_equal(st.st_ino, file);
    assert_int_equal(pom_lookup_parent(fs2, file, &st), -ENOTDIR);

    /* Renamed to another parent: a fresh client finds it at the new
     * place, and so does fs2, whose map still has the old one. */
    assert_int_equal(pom_rename(fs, c, "d", x, "d2", 0), 0);
    assert_int_equal(pom_lookup_parent(fs2, d, &st), 0); /* d known: its row moved */
    assert_int_equal(st.st_ino, x);
    assert_int_equal(find_fresh(d, 0, &st, &parent), 0);
    assert_int_equal(parent, x);
    assert_int_equal(pom_lookup_ino(fs2, d, &st), 0);
    assert_int_equal(st.st_ino, d);

    /* A regular file is found by uuid; hard-linked, by its ILT row once
     * the name its GDT row names is gone; never made, removed: -ESTALE. */
    pom_fs *fs3 = conn();
    assert_int_equal(pom_lookup_ino(fs3, file, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    pom_forget(fs3, file, 1);
    assert_int_equal(pom_mknod(fs, d, "linked", S_IFREG | 0644, 0, NULL, &st), 0);
    pom_ino linked = st.st_ino;
    assert_int_equal(pom_link(fs, linked, x, "other", &st), 0);
    assert_int_equal(pom_unlink(fs, d, "linked"), 0);
    assert_int_equal(pom_lookup_ino(fs3, linked, &st), 0);
    assert_int_equal(st.st_ino, linked);
    assert_int_equal(st.st_nlink, 1);
    pom_forget(fs3, linked, 1);
    assert_int_equal(pom_unlink(fs, x, "other"), 0);
    assert_int_equal(pom_lookup_ino(fs3, linked, &st), -ESTALE);
    assert_int_equal(pom_lookup_ino(fs3, UUID_A + 999, &st), -ESTALE);
    assert_int_equal(pom_lookup_ino(fs3, 0, &st), -ESTALE);
    assert_int_equal(pom_unlink(fs, d, "file"), 0);
    assert_int_equal(pom_lookup_ino(fs3, file, &st), -ESTALE);
    assert_int_equal(pom_rmdir(fs, x, "d2"), 0);
    assert_int_equal(find_fresh(d, -ESTALE, &st, &parent), -ESTALE);
    assert_int_equal(pom_lookup_parent(fs3, d, &st), -ESTALE);
    pom_close(fs3);
    pom_close(fs2);
    pom_close(fs);
}

int main(void)
{
    const struct CMUnitTest parser[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_damaged),
    };
    const struct CMUnitTest cluster[] = {
        cmocka_unit_test(test_hand_made_rows),
        cmocka_unit_test(test_late_row),
        cmocka_unit_test(test_concurrent_refs),
        cmocka_unit_test(test_deep_dir_by_uuid),
    };
    int rc = cmocka_run_group_tests_name("gdt_parse", parser, NULL, NULL);
    return rc + cmocka_run_group_tests_name("gdt_read", cluster, group_setup, group_teardown);
}
