/*
 * test_pomctl_out.c -- the parts of pomctl that need no R2:
 *   - JSON: escaping of every kind of byte (quotes, controls, DEL, valid
 *     and invalid UTF-8), exact compact and pretty documents, and a seeded
 *     property test: random strings built from tokens with a known decoding
 *     are escaped, decoded back by an independent mini-decoder, compared;
 *   - tables: exact aligned output (left/right, UTF-8 widths, missing
 *     cells, no trailing spaces), misuse errors, allocation failure at
 *     every step (countdown);
 *   - formatters: sizes, ages, times;
 *   - processes: pid files (round trip, malformed), executable lookup
 *     order, /proc/PID/exe ownership, zombies, detached spawn + stop.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pom_proc.h"
#include "pomctl_out.h"
#include "pomctl_proc.h"
#include "xt_common.h"

/* Runs fn(arg) with output into a string; caller frees with free(). */
static char *capture_escape(const char *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    pomctl_json_escape(f, s);
    fclose(f);
    return buf;
}

/* ---- JSON ------------------------------------------------------------- */

static void test_escape_cases(void **state)
{
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        { "", "\"\"" },
        { "plain", "\"plain\"" },
        { "a\"b", "\"a\\\"b\"" },
        { "back\\slash", "\"back\\\\slash\"" },
        { "\n\r\t\b\f", "\"\\n\\r\\t\\b\\f\"" },
        { "\x01\x1f\x7f", "\"\\u0001\\u001f\\u007f\"" },
        { "/", "\"/\"" },
        { "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"" },
        { "\xff", "\"\\ufffd\"" },
        { "a\xc3", "\"a\\ufffd\"" },                  /* truncated */
        { "\xc0\x80", "\"\\ufffd\\ufffd\"" },         /* overlong NUL */
        { "\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"" }, /* surrogate */
        { "\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"" }, /* > U+10FFFF */
        { "\xe2\x82", "\"\\ufffd\\ufffd\"" },
    };
    for (size_t i = 0; i < XT_ARRAY_SIZE(cases); i++) {
        char *got = capture_escape(cases[i].in);
        if (strcmp(got, cases[i].out))
            fail_msg("case %zu: got %s want %s", i, got, cases[i].out);
        free(got);
    }
    char *got = capture_escape(NULL);
    assert_string_equal(got, "null");
    free(got);
}

/* Independent decoder of one JSON string literal (the subset of escapes a
 * valid document may hold). Returns bytes written to out, or -1 if the
 * literal is malformed (raw control byte, bad escape, missing quote). */
static long json_decode_str(const char *s, char *out)
{
    long n = 0;
    if (*s++ != '"')
        return -1;
    for (;;) {
        unsigned char c = (unsigned char)*s++;
        if (c == '"')
            return *s == '\0' ? n : -1;
        if (c < 0x20)
            return -1; /* includes the NUL: unterminated */
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        c = (unsigned char)*s++;
        const char *simple = strchr("\"\\/bfnrt", c);
        if (c && simple) {
            static const char map[] = "\"\\/\b\f\n\r\t";
            out[n++] = map[simple - "\"\\/bfnrt"];
        } else if (c == 'u') {
            unsigned v = 0;
            for (int i = 0; i < 4; i++) {
                char h = *s++;
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
                if (d < 0)
                    return -1;
                v = v * 16 + (unsigned)d;
            }
            if (v < 0x80) {
                out[n++] = (char)v;
            } else if (v == 0xfffd) {
                memcpy(out + n, "\xef\xbf\xbd", 3);
                n += 3;
            } else {
                return -1; /* the emitter never writes other escapes */
            }
        } else {
            return -1;
        }
    }
}

static void test_escape_property(void **state)
{
    (void)state;
    /* Tokens whose concatenation decodes to the concatenation of `dec`:
     * no token starts with a continuation byte, so invalid tails never
     * join the next token into a valid sequence. */
    static const struct {
        const char *raw, *dec;
    } toks[] = {
        { "\xc3\xa9", "\xc3\xa9" },
        { "\xe2\x82\xac", "\xe2\x82\xac" },
        { "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80" },
        { "\xff", "\xef\xbf\xbd" },
        { "\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd" },
        { "\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd" },
        { "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
    };
    unsigned seed = (unsigned)time(NULL);
    if (getenv("POM_SEED"))
        seed = (unsigned)strtoul(getenv("POM_SEED"), NULL, 10);
    printf("seed %u (POM_SEED=%u reproduces)\n", seed, seed);
    srand(seed);
    char raw[1024], want[4096], got[4096];
    for (int iter = 0; iter < 20000; iter++) {
        size_t rl = 0, wl = 0;
        int ntok = rand() % 40;
        for (int t = 0; t < ntok; t++) {
            if (rand() % 2) { /* any ASCII byte 1..127 */
                char c = (char)(1 + rand() % 127);
                raw[rl++] = c;
                want[wl++] = c;
            } else {
                size_t k = (size_t)rand() % XT_ARRAY_SIZE(toks);
                size_t a = strlen(toks[k].raw), b = strlen(toks[k].dec);
                memcpy(raw + rl, toks[k].raw, a);
                memcpy(want + wl, toks[k].dec, b);
                rl += a;
                wl += b;
            }
        }
        raw[rl] = '\0';
        char *lit = capture_escape(raw);
        long n = json_decode_str(lit, got);
        if (n != (long)wl || memcmp(got, want, wl))
            fail_msg("seed %u iter %d: literal %s decodes wrong", seed, iter, lit);
        free(lit);
    }
}

static char *emit_doc(bool pretty)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pomctl_json j;
    pomctl_json_init(&j, f, pretty);
    pomctl_json_obj_begin(&j, NULL);
    pomctl_json_str(&j, "name", "po\"m");
    pomctl_json_u64(&j, "big", UINT64_MAX);
    pomctl_json_i64(&j, "neg", -5);
    pomctl_json_double(&j, "share", 0.25);
    pomctl_json_double(&j, "nan", NAN);
    pomctl_json_bool(&j, "ok", true);
    pomctl_json_null(&j, "none");
    pomctl_json_arr_begin(&j, "empty");
    pomctl_json_arr_end(&j);
    pomctl_json_arr_begin(&j, "list");
    pomctl_json_u64(&j, NULL, 1);
    pomctl_json_obj_begin(&j, NULL);
    pomctl_json_str(&j, "k", NULL);
    pomctl_json_obj_end(&j);
    pomctl_json_arr_end(&j);
    pomctl_json_obj_begin(&j, "o");
    pomctl_json_obj_end(&j);
    pomctl_json_obj_end(&j);
    pomctl_json_finish(&j);
    fclose(f);
    return buf;
}

static void test_json_documents(void **state)
{
    (void)state;
    char *c = emit_doc(false);
    assert_string_equal(c, "{\"name\":\"po\\\"m\",\"big\":18446744073709551615,\"neg\":-5,"
                           "\"share\":0.25,\"nan\":null,\"ok\":true,\"none\":null,"
                           "\"empty\":[],\"list\":[1,{\"k\":null}],\"o\":{}}\n");
    free(c);
    char *p = emit_doc(true);
    assert_string_equal(p, "{\n"
                           "  \"name\": \"po\\\"m\",\n"
                           "  \"big\": 18446744073709551615,\n"
                           "  \"neg\": -5,\n"
                           "  \"share\": 0.25,\n"
                           "  \"nan\": null,\n"
                           "  \"ok\": true,\n"
                           "  \"none\": null,\n"
                           "  \"empty\": [],\n"
                           "  \"list\": [\n"
                           "    1,\n"
                           "    {\n"
                           "      \"k\": null\n"
                           "    }\n"
                           "  ],\n"
                           "  \"o\": {}\n"
                           "}\n");
    free(p);
}

static void test_json_double_roundtrip(void **state)
{
    (void)state;
    double vals[] = { 0, 1, -1, 0.1, 1.0 / 3, 1e300, 5e-324, 123456789.125 };
    for (size_t i = 0; i < XT_ARRAY_SIZE(vals); i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        pomctl_json j;
        pomctl_json_init(&j, f, false);
        pomctl_json_double(&j, NULL, vals[i]);
        fclose(f);
        assert_true(strtod(buf, NULL) == vals[i]);
        free(buf);
    }
}

/* ---- tables ----------------------------------------------------------- */

static pomctl_table *sample_table(int *err)
{
    static const char *const hdr[] = { "ID", "NAME", "SHARE" };
    pomctl_table *t = pomctl_table_new(3, hdr, "rlr");
    if (!t) {
        *err = -ENOMEM;
        return NULL;
    }
    *err = 0;
    *err = *err ? *err : pomctl_table_row(t);
    *err = *err ? *err : pomctl_table_cell(t, "%d", 7);
    *err = *err ? *err : pomctl_table_cell(t, "%s", "caf\xc3\xa9");
    *err = *err ? *err : pomctl_table_cell(t, "%.1f%%", 50.0);
    *err = *err ? *err : pomctl_table_row(t);
    *err = *err ? *err : pomctl_table_cell(t, "%d", 12345);
    *err = *err ? *err : pomctl_table_cell(t, "%s", "a-much-longer-name");
    *err = *err ? *err : pomctl_table_cell(t, "%s", "5%");
    *err = *err ? *err : pomctl_table_row(t);
    *err = *err ? *err : pomctl_table_cell(t, "%d", 1); /* then two missing */
    return t;
}

static void test_table_layout(void **state)
{
    (void)state;
    int err;
    pomctl_table *t = sample_table(&err);
    assert_int_equal(err, 0);
    assert_int_equal(pomctl_table_nrows(t), 3);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    pomctl_table_print(t, f, 2);
    fclose(f);
    assert_string_equal(buf, "     ID  NAME                SHARE\n"
                             "      7  caf\xc3\xa9                50.0%\n"
                             "  12345  a-much-longer-name     5%\n"
                             "      1\n");
    free(buf);
    static const char *const hdr2[] = { "A", "B" };
    pomctl_table *t2 = pomctl_table_new(2, hdr2, NULL);
    assert_int_equal(pomctl_table_cell(t2, "x"), -EINVAL); /* no row yet */
    assert_int_equal(pomctl_table_row(t2), 0);
    assert_int_equal(pomctl_table_cell(t2, "longer"), 0);
    assert_int_equal(pomctl_table_cell(t2, "b"), 0);
    assert_int_equal(pomctl_table_cell(t2, "extra"), -EINVAL); /* row full */
    buf = NULL;
    f = open_memstream(&buf, &len);
    pomctl_table_print(t2, f, 0);
    fclose(f);
    assert_string_equal(buf, "A       B\nlonger  b\n");
    free(buf);
    pomctl_table_free(t2);
    pomctl_table_free(t);
    pomctl_table_free(NULL);
    assert_int_equal(pomctl_utf8_width("\xe2\x82\xac" "ab"), 3);
}

static void test_table_alloc_failures(void **state)
{
    (void)state;
    for (long n = 0;; n++) {
        xt_alloc_fail_after(n);
        int err;
        pomctl_table *t = sample_table(&err);
        long failed = xt_alloc_fail_after(-1);
        pomctl_table_free(t);
        if (failed == 0) {
            assert_int_equal(err, 0);
            printf("table: every one of %ld allocations failed once, cleanly\n", n);
            break;
        }
        assert_int_equal(err, -ENOMEM);
        assert_true(n < 1000);
    }
}

/* ---- formatters ------------------------------------------------------- */

static void test_formatters(void **state)
{
    (void)state;
    char b[64];
    assert_string_equal(pomctl_fmt_bytes(0, b, sizeof b), "0 B");
    assert_string_equal(pomctl_fmt_bytes(1023, b, sizeof b), "1023 B");
    assert_string_equal(pomctl_fmt_bytes(1536, b, sizeof b), "1.5 KiB");
    assert_string_equal(pomctl_fmt_bytes(1u << 30, b, sizeof b), "1.0 GiB");
    assert_string_equal(pomctl_fmt_bytes(UINT64_MAX, b, sizeof b), "16.0 EiB");
    const uint64_t s = 1000000000ull, now = 1000000 * s;
    assert_string_equal(pomctl_fmt_age(now, 0, b, sizeof b), "-");
    assert_string_equal(pomctl_fmt_age(now, now - s / 2, b, sizeof b), "0.5s");
    assert_string_equal(pomctl_fmt_age(now, now + s, b, sizeof b), "0.0s");
    assert_string_equal(pomctl_fmt_age(now, now - 12 * s, b, sizeof b), "12s");
    assert_string_equal(pomctl_fmt_age(now, now - 185 * s, b, sizeof b), "3m05s");
    assert_string_equal(pomctl_fmt_age(now, now - 7260 * s, b, sizeof b), "2h01m");
    assert_string_equal(pomctl_fmt_age(now, now - (4 * 86400 + 3 * 3600) * s, b, sizeof b),
                        "4d03h");
    assert_string_equal(pomctl_fmt_time(0, b, sizeof b), "-");
    assert_string_equal(pomctl_fmt_time(1714564800ull * s, b, sizeof b), "2024-05-01T12:00:00Z");
    assert_string_equal(pomctl_fmt_count(0, b, sizeof b), "0");
    assert_string_equal(pomctl_fmt_count(999, b, sizeof b), "999");
    assert_string_equal(pomctl_fmt_count(1000, b, sizeof b), "1,000");
    assert_string_equal(pomctl_fmt_count(12345, b, sizeof b), "12,345");
    assert_string_equal(pomctl_fmt_count(1234567, b, sizeof b), "1,234,567");
    assert_string_equal(pomctl_fmt_count(UINT64_MAX, b, sizeof b), "18,446,744,073,709,551,615");
    assert_string_equal(pomctl_fmt_count(12345, b, 4), "12,");
}

/* ---- processes -------------------------------------------------------- */

static char tmp[PATH_MAX];

static int setup_tmp(void **state)
{
    (void)state;
    return pom_tmpdir("pomctl", tmp, sizeof tmp) < 0 ? -1 : 0;
}

static int teardown_tmp(void **state)
{
    (void)state;
    pom_rm_rf(tmp);
    return 0;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static void test_pidfile(void **state)
{
    (void)state;
    char path[PATH_MAX + 32], exe[PATH_MAX];
    pid_t pid = 0;
    snprintf(path, sizeof path, "%s/x.pid", tmp);
    assert_int_equal(pomctl_pidfile_read(path, &pid, exe, sizeof exe), -ENOENT);
    assert_int_equal(pomctl_pidfile_write(path, 4242, "/usr/bin/pom-r2"), 0);
    assert_int_equal(pomctl_pidfile_read(path, &pid, exe, sizeof exe), 0);
    assert_int_equal(pid, 4242);
    assert_string_equal(exe, "/usr/bin/pom-r2");
    static const char *const bad[] = { "", "abc\n/x\n", "12\n", "12\nrelative\n", "0\n/x\n",
                                       "1\n/x\n", "-5\n/x\n", "99999999999\n/x\n", "12 \n/x\n",
                                       "12\n/x" };
    for (size_t i = 0; i < XT_ARRAY_SIZE(bad); i++) {
        write_file(path, bad[i], 0644);
        if (pomctl_pidfile_read(path, &pid, exe, sizeof exe) != -EBADMSG)
            fail_msg("malformed pid file %zu accepted", i);
    }
    long v;
    write_file(path, "8080\n", 0644);
    assert_int_equal(pomctl_read_long_file(path, &v), 0);
    assert_int_equal(v, 8080);
    write_file(path, "80x\n", 0644);
    assert_int_equal(pomctl_read_long_file(path, &v), -EBADMSG);
}

static void test_find_exe(void **state)
{
    (void)state;
    char self[PATH_MAX + 16], bin[PATH_MAX + 16], path1[PATH_MAX + 16], d[PATH_MAX + 64],
        out[PATH_MAX], want[PATH_MAX * 2];
    /* build/r2 (self), build/mdsl, build/bin, p1 (PATH) */
    snprintf(self, sizeof self, "%s/build/r2", tmp);
    snprintf(bin, sizeof bin, "%s/bin", tmp);
    snprintf(path1, sizeof path1, "%s/p1", tmp);
    assert_int_equal(pomctl_mkdirs(self), 0);
    snprintf(d, sizeof d, "%s/build/mdsl", tmp);
    assert_int_equal(pomctl_mkdirs(d), 0);
    assert_int_equal(pomctl_mkdirs(bin), 0);
    assert_int_equal(pomctl_mkdirs(path1), 0);
    char envpath[PATH_MAX * 2];
    snprintf(envpath, sizeof envpath, "::/nonexistent:%s", path1);

    assert_int_equal(pomctl_find_exe("pom-mdsl", bin, self, envpath, out, sizeof out), -ENOENT);
    /* PATH last */
    snprintf(d, sizeof d, "%s/pom-mdsl", path1);
    write_file(d, "#!/bin/sh\n", 0755);
    assert_int_equal(pomctl_find_exe("pom-mdsl", bin, self, envpath, out, sizeof out), 0);
    assert_string_equal(out, d);
    /* the build tree beats PATH */
    snprintf(d, sizeof d, "%s/build/mdsl/pom-mdsl", tmp);
    write_file(d, "#!/bin/sh\n", 0755);
    assert_int_equal(pomctl_find_exe("pom-mdsl", bin, self, envpath, out, sizeof out), 0);
    snprintf(want, sizeof want, "%s/../mdsl/pom-mdsl", self);
    assert_string_equal(out, want);
    /* pomctl's own folder beats ../mdsl; a non-executable file is skipped */
    snprintf(d, sizeof d, "%s/pom-mdsl", self);
    write_file(d, "data", 0644);
    assert_int_equal(pomctl_find_exe("pom-mdsl", bin, self, envpath, out, sizeof out), 0);
    assert_string_equal(out, want);
    chmod(d, 0755);
    assert_int_equal(pomctl_find_exe("pom-mdsl", bin, self, envpath, out, sizeof out), 0);
    assert_string_equal(out, d);
    /* $POM_BIN_DIR beats all */
    snprintf(d, sizeof d, "%s/pom-mdsl", bin);
    write_file(d, "#!/bin/sh\n", 0755);
    assert_int_equal(pomctl_find_exe("pom-mdsl", bin, self, envpath, out, sizeof out), 0);
    assert_string_equal(out, d);
    /* a folder of that name is not an executable */
    snprintf(d, sizeof d, "%s/pomfs", bin);
    assert_int_equal(pomctl_mkdirs(d), 0);
    assert_int_equal(pomctl_find_exe("pomfs", bin, NULL, NULL, out, sizeof out), -ENOENT);
    assert_int_equal(pomctl_find_exe("a/b", bin, self, envpath, out, sizeof out), -EINVAL);
    assert_int_equal(pomctl_find_exe("pom-mdsl", bin, self, envpath, out, 8), -ENAMETOOLONG);
}

static void test_proc_owns_and_stop(void **state)
{
    (void)state;
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0';
    assert_int_equal(pomctl_proc_owns(getpid(), self), 1);
    assert_int_equal(pomctl_proc_owns(getpid(), "/bin/true"), 0);

    /* A zombie is not alive. */
    pid_t z = fork();
    if (z == 0)
        _exit(0);
    for (int i = 0; i < 200 && pomctl_proc_alive(z); i++)
        usleep(10000);
    assert_false(pomctl_proc_alive(z));
    assert_int_equal(pomctl_proc_owns(z, self), 0);
    waitpid(z, NULL, 0);

    /* Detached spawn: own session, stdin /dev/null, output in the log. */
    char log[PATH_MAX + 16], sleep_exe[PATH_MAX];
    snprintf(log, sizeof log, "%s/sleep.log", tmp);
    assert_int_equal(pomctl_find_exe("sleep", NULL, NULL, "/usr/bin:/bin", sleep_exe,
                                     sizeof sleep_exe), 0);
    char *argv[] = { sleep_exe, (char *)"30", NULL };
    pid_t pid = pomctl_proc_spawn(argv, log);
    assert_true(pid > 0);
    assert_int_equal(getsid(pid), pid);
    assert_int_equal(pomctl_proc_reap(pid, NULL), 0);
    char real[PATH_MAX];
    assert_non_null(realpath(sleep_exe, real));
    for (int i = 0; i < 200 && pomctl_proc_owns(pid, real) != 1; i++)
        usleep(10000); /* until exec is visible in /proc */
    assert_int_equal(pomctl_proc_owns(pid, real), 1);
    bool sig = true;
    /* Not ours by executable: left alone. */
    assert_int_equal(pomctl_proc_stop(pid, "/bin/true", 100, &sig), 0);
    assert_false(sig);
    assert_true(pomctl_proc_alive(pid));
    assert_int_equal(pomctl_proc_stop(pid, real, 5000, &sig), 0);
    assert_true(sig);
    assert_false(pomctl_proc_alive(pid));
    /* Already gone: nothing signalled. */
    assert_int_equal(pomctl_proc_stop(pid, real, 100, &sig), 0);
    assert_false(sig);

    /* Exec failure is reported, not hidden in the child. */
    char *bad[] = { (char *)"/nonexistent/pom-r2", NULL };
    assert_int_equal(pomctl_proc_spawn(bad, log), -ENOENT);

    /* A child that exits at once is seen by reap. */
    char sh[PATH_MAX];
    assert_int_equal(pomctl_find_exe("sh", NULL, NULL, "/usr/bin:/bin", sh, sizeof sh), 0);
    char *ex[] = { sh, (char *)"-c", (char *)"echo hello-log; exit 3", NULL };
    pid = pomctl_proc_spawn(ex, log);
    assert_true(pid > 0);
    int st = 0;
    for (int i = 0; i < 500 && pomctl_proc_reap(pid, &st) != 1; i++)
        usleep(10000);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3);
    char line[128];
    assert_int_equal(pomctl_read_line_file(log, line, sizeof line), 0);
    assert_string_equal(line, "hello-log");
}

static void test_mounted(void **state)
{
    (void)state;
    assert_true(pomctl_is_mounted("/"));
    assert_false(pomctl_is_mounted(tmp));
    assert_false(pomctl_is_mounted("/nonexistent/x"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_cases),
        cmocka_unit_test(test_escape_property),
        cmocka_unit_test(test_json_documents),
        cmocka_unit_test(test_json_double_roundtrip),
        cmocka_unit_test(test_table_layout),
        cmocka_unit_test(test_table_alloc_failures),
        cmocka_unit_test(test_formatters),
        cmocka_unit_test_setup_teardown(test_pidfile, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_find_exe, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_proc_owns_and_stop, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_mounted, setup_tmp, teardown_tmp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
