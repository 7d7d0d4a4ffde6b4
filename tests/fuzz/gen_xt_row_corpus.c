/*
 * gen_xt_row_corpus.c -- writes the seed corpus of fuzz_xt_row: valid
 * encoded rows of every type and shape (and two bare xattr groups) into the
 * folder given as argv[1], one file each, named after what they hold.
 *
 *   cc -I xtable tests/fuzz/gen_xt_row_corpus.c xtable/xt_row.c xtable/xt_hash.c \
 *      xtable/xt_alloc.c xtable/xt_log.c -lxxhash -o gen && ./gen tests/fuzz/corpus/xt_row
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xt_common.h"
#include "xt_row.h"

static const char *dir;

static void put_file(const char *name, const uint8_t *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void put_row(const char *name, const xt_row *r)
{
    uint8_t *buf;
    size_t len;
    int rc = xt_row_encode_alloc(r, &buf, &len);
    if (rc < 0) {
        fprintf(stderr, "%s: encode failed: %d\n", name, rc);
        exit(1);
    }
    put_file(name, buf, len);
    xt_free(buf);
}

static void base(xt_row *r, uint8_t type, const char *name)
{
    xt_row_init(r);
    uint64_t t = UINT64_C(1717000000123456789);
    r->attr = (xt_row_attr){ .type = type, .uuid = 4242, .mode = 0100644, .uid = 1000,
                             .gid = 1000, .nlink = 1, .atime_ns = t, .mtime_ns = t,
                             .ctime_ns = t, .btime_ns = t, .generation = 1, .version = 1 };
    r->name = (const uint8_t *)name;
    r->name_len = (uint32_t)strlen(name);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    xt_row r;
    static uint8_t bytes[5000];
    for (size_t i = 0; i < sizeof bytes; i++)
        bytes[i] = (uint8_t)(i * 131 + 7);

    base(&r, XT_ROW_REG, "empty-file-name-0001");
    put_row("reg-empty", &r);

    base(&r, XT_ROW_REG, "tiny.txt");
    r.attr.size = 12;
    r.attr.flags = XT_ROW_F_INLINE;
    xt_row_view_set_group(&r, XT_CG_DATA, "hello world\n", 12);
    put_row("reg-inline", &r);

    base(&r, XT_ROW_REG, "big.bin");
    r.attr.size = UINT64_C(1) << 33;
    r.attr.flags = XT_ROW_F_BLOB;
    put_row("reg-blob", &r);

    base(&r, XT_ROW_REG, "page");
    r.attr.size = 4000;
    xt_row_view_set_group(&r, XT_CG_DATA, bytes, 4000);
    put_row("reg-4k", &r);

    base(&r, XT_ROW_DIR, "subdir");
    r.attr.mode = 040755;
    r.attr.nlink = 2;
    put_row("dir", &r);

    base(&r, XT_ROW_SYMLINK, "link");
    r.attr.mode = 0120777;
    xt_row_view_set_group(&r, XT_CG_DATA, "../target/file", 14);
    put_row("symlink", &r);

    const uint8_t types[] = { XT_ROW_CHR, XT_ROW_BLK, XT_ROW_FIFO, XT_ROW_SOCK };
    const char *tnames[] = { "chr", "blk", "fifo", "sock" };
    for (int i = 0; i < 4; i++) {
        base(&r, types[i], tnames[i]);
        r.attr.size = 0x0801;               /* rdev lives in size for devices */
        put_row(tnames[i], &r);
    }

    base(&r, XT_ROW_REF, "hardlink-name");
    r.attr.uuid = UINT64_C(0x123456789a);
    put_row("ref", &r);

    /* xattrs, both as a row group and bare */
    xt_row_xattr xa[3] = {
        { (const uint8_t *)"user.mime", 9, (const uint8_t *)"text/plain", 10 },
        { (const uint8_t *)"security.selinux", 16, (const uint8_t *)"system_u:object_r", 17 },
        { (const uint8_t *)"user.empty", 10, NULL, 0 },
    };
    uint8_t *xg;
    size_t xlen;
    if (xt_row_xattr_encode(xa, 3, &xg, &xlen) < 0)
        return 1;
    base(&r, XT_ROW_REG, "with-xattrs");
    xt_row_view_set_group(&r, XT_CG_DATA, "abc", 3);
    xt_row_view_set_group(&r, XT_CG_XATTR, xg, (uint32_t)xlen);
    put_row("reg-xattr", &r);
    put_file("xattr-group-3", xg, xlen);
    xt_free(xg);
    if (xt_row_xattr_encode(xa, 1, &xg, &xlen) < 0)
        return 1;
    put_file("xattr-group-1", xg, xlen);
    xt_free(xg);

    /* key/value rows: long keys, user columns, empty columns */
    static char key[XT_ROW_KEY_MAX + 1];
    memset(key, 'k', XT_ROW_KEY_MAX);
    base(&r, XT_ROW_KV, key);
    xt_row_view_set_group(&r, XT_CG_USER0, "v0", 2);
    xt_row_view_set_group(&r, XT_CG_USER0 + 1, "", 0);
    xt_row_view_set_group(&r, 65535, "last", 4);
    put_row("kv-longkey", &r);

    base(&r, XT_ROW_KV, "k");
    for (uint16_t i = 0; i < XT_ROW_GROUPS_MAX; i++)
        xt_row_view_set_group(&r, (uint16_t)(1 + i * 7), bytes + i, i);
    put_row("kv-32-groups", &r);

    /* extreme fixed columns: every varint at full length, times apart */
    base(&r, XT_ROW_REG, "\x01\xff\x80/\\");
    r.attr = (xt_row_attr){ .type = XT_ROW_REG, .uuid = UINT64_MAX, .mode = UINT32_MAX,
                            .uid = UINT32_MAX, .gid = UINT32_MAX, .nlink = UINT32_MAX,
                            .size = UINT64_MAX, .atime_ns = 0, .mtime_ns = UINT64_MAX,
                            .ctime_ns = UINT64_C(1) << 63, .btime_ns = 1, .flags = UINT32_MAX,
                            .generation = UINT64_MAX, .version = UINT64_MAX - 1 };
    put_row("extremes", &r);

    static char name255[XT_NAME_MAX + 1];
    memset(name255, 'n', XT_NAME_MAX);
    base(&r, XT_ROW_REG, name255);
    r.attr.version = 0;
    put_row("name-255", &r);
    return 0;
}
