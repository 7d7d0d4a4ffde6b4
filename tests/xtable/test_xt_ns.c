/*
 * test_xt_ns.c -- the namespace model's rows (xtable/xt_ns.c): ILT/GDT row
 * names, entry names, link stubs, and GDT rows built, encoded, decoded and
 * parsed again (the path a row takes from the library's writer through the
 * MDS to a reader such as pomctl fsck).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "xt_common.h"
#include "xt_ns.h"
#include "xt_row.h"

#include <errno.h>
#include <string.h>

static void test_id_name(void **state)
{
    (void)state;
    char b[XT_NS_ID_LEN + 1];
    xt_ns_id_name(0x1f, b);
    assert_string_equal(b, "000000000000001f");
    xt_ns_id_name(UINT64_MAX, b);
    assert_string_equal(b, "ffffffffffffffff");
    assert_int_equal(strlen(b), XT_NS_ID_LEN);
}

static void test_name_check(void **state)
{
    (void)state;
    assert_int_equal(xt_ns_name_check("a"), 0);
    assert_int_equal(xt_ns_name_check(".a"), 0);
    assert_int_equal(xt_ns_name_check(NULL), -EINVAL);
    assert_int_equal(xt_ns_name_check(""), -EINVAL);
    assert_int_equal(xt_ns_name_check("."), -EINVAL);
    assert_int_equal(xt_ns_name_check(".."), -EINVAL);
    assert_int_equal(xt_ns_name_check("a/b"), -EINVAL);
    char n[XT_NAME_MAX + 2];
    memset(n, 'x', sizeof n);
    n[XT_NAME_MAX] = '\0';
    assert_int_equal(xt_ns_name_check(n), 0);
    n[XT_NAME_MAX] = 'x';
    n[XT_NAME_MAX + 1] = '\0';
    assert_int_equal(xt_ns_name_check(n), -ENAMETOOLONG);
}

static void test_stub(void **state)
{
    (void)state;
    xt_row_attr a = { .uuid = 99, .type = XT_ROW_REG, .mode = 0640, .uid = 7, .gid = 8,
                      .size = 12345, .nlink = 2, .btime_ns = 5, .flags = XT_ROW_F_BLOB };
    xt_row s;
    xt_ns_stub(&a, 1000, &s);
    assert_true(xt_ns_is_stub(&s.attr));
    assert_false(xt_ns_is_stub(&a));
    assert_int_equal(s.attr.uuid, 99);
    assert_int_equal(s.attr.type, XT_ROW_REG);
    assert_int_equal(s.attr.mode, 0640);
    assert_int_equal(s.attr.uid, 7);
    assert_int_equal(s.attr.gid, 8);
    assert_int_equal(s.attr.size, 0);          /* the data stays in the ILT row */
    assert_int_equal(s.attr.flags, XT_NS_ROW_F_LINKED);
    assert_int_equal(s.attr.mtime_ns, 1000);
    assert_int_equal(s.attr.btime_ns, 5);
    assert_int_equal(s.ngroups, 0);
}

/* b's row as a lookup returns it: encoded, then decoded into *dec (which
 * views *enc: xt_free it after). */
static void round_trip(const struct xt_ns_gdt *b, uint8_t **enc, xt_row *dec)
{
    xt_row r = b->row;
    r.name = (const uint8_t *)b->key;
    r.name_len = XT_NS_ID_LEN;
    size_t len;
    assert_int_equal(xt_row_encode_alloc(&r, enc, &len), 0);
    assert_int_equal(xt_row_decode(*enc, len, dec), 0);
}

static void test_gdt_round_trip(void **state)
{
    (void)state;
    struct xt_ns_gdt b;
    assert_int_equal(xt_ns_gdt_build(&b, XT_NS_UUID_BASE + 5, 1, "dir-1", 777), 0);
    char key[XT_NS_ID_LEN + 1];
    xt_ns_id_name(XT_NS_UUID_BASE + 5, key);
    assert_string_equal(b.key, key);
    uint8_t *enc;
    xt_row dec;
    round_trip(&b, &enc, &dec);
    assert_int_equal(dec.attr.type, XT_ROW_KV);
    assert_int_equal(dec.attr.ctime_ns, 777);
    uint64_t parent = 0;
    char name[XT_NAME_MAX + 1];
    assert_int_equal(xt_ns_gdt_parse(&dec, &parent, name), 0);
    assert_int_equal(parent, 1);
    assert_string_equal(name, "dir-1");
    xt_free(enc);
    /* The longest name travels whole. */
    char longest[XT_NAME_MAX + 1];
    memset(longest, 'n', XT_NAME_MAX);
    longest[XT_NAME_MAX] = '\0';
    assert_int_equal(xt_ns_gdt_build(&b, 42, 41, longest, 1), 0);
    round_trip(&b, &enc, &dec);
    assert_int_equal(xt_ns_gdt_parse(&dec, &parent, name), 0);
    assert_string_equal(name, longest);
    xt_free(enc);
}

static void test_gdt_refused(void **state)
{
    (void)state;
    struct xt_ns_gdt b;
    char big[XT_NAME_MAX + 2];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(xt_ns_gdt_build(&b, 42, 1, "", 1), -EINVAL);
    assert_int_equal(xt_ns_gdt_build(&b, 42, 1, big, 1), -EINVAL);
    /* The delete of a copy: no group, nothing a reader may follow. */
    assert_int_equal(xt_ns_gdt_build(&b, 42, 0, NULL, 9), 0);
    assert_int_equal(b.row.ngroups, 0);
    uint64_t parent;
    char name[XT_NAME_MAX + 1];
    assert_int_equal(xt_ns_gdt_parse(&b.row, &parent, name), -EIO);
    /* A row that names its own directory as parent, or a name no entry
     * has, is built (the writer copies what it is given) but never parsed. */
    assert_int_equal(xt_ns_gdt_build(&b, 42, 42, "self", 1), 0);
    assert_int_equal(xt_ns_gdt_parse(&b.row, &parent, name), -EIO);
    assert_int_equal(xt_ns_gdt_build(&b, 42, 1, "..", 1), 0);
    assert_int_equal(xt_ns_gdt_parse(&b.row, &parent, name), -EIO);
    /* Not a KV row. */
    assert_int_equal(xt_ns_gdt_build(&b, 42, 1, "d", 1), 0);
    b.row.attr.type = XT_ROW_DIR;
    assert_int_equal(xt_ns_gdt_parse(&b.row, &parent, name), -EIO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_id_name),
        cmocka_unit_test(test_name_check),
        cmocka_unit_test(test_stub),
        cmocka_unit_test(test_gdt_round_trip),
        cmocka_unit_test(test_gdt_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
