/*
 * test_xt_log.c -- tests of the log writer in xtable/xt_log.c on a full
 * disk: stderr is a file on a 128 KiB tmpfs filled by a ballast file; lines
 * logged then are dropped whole and counted (a short write would leave half
 * a line that the next one runs into); once the ballast goes, the next line
 * says how many were dropped, and every line of the file is whole. Needs
 * root to mount; skipped otherwise.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "pom_proc.h"
#include "xt_common.h"

#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

static char dir[256];
static int saved_stderr = -1;

static void test_full_disk_whole_lines(void **state)
{
    (void)state;
    char log[300], ballast[300];
    snprintf(log, sizeof log, "%s/log", dir);
    snprintf(ballast, sizeof ballast, "%s/ballast", dir);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    assert_true(fd >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    close(fd);
    XT_WARN("first line, before the disk is full");
    int b = open(ballast, O_WRONLY | O_CREAT, 0644);
    assert_true(b >= 0);
    static char chunk[1000];
    memset(chunk, 'b', sizeof chunk);
    while (write(b, chunk, sizeof chunk) > 0)
        ;
    close(b);
    uint64_t before = xt_log_dropped();
    for (int i = 0; i < 200; i++)
        XT_WARN("line %d on a full disk %.*s", i, i * 3, chunk);
    uint64_t full = xt_log_dropped();
    int gone = unlink(ballast);
    XT_WARN("space is back");
    uint64_t after = xt_log_dropped();
    assert_int_equal(dup2(saved_stderr, STDERR_FILENO), STDERR_FILENO);
    assert_true(full > before);
    assert_int_equal(gone, 0);
    assert_int_equal(after, 0);

    FILE *f = fopen(log, "r");
    assert_non_null(f);
    regex_t re;
    assert_int_equal(regcomp(&re, "^[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} [EWID] [^ ]+: "
                                  "(first line, before the disk is full|line [0-9]+ on a full disk b*|[0-9]+ log "
                                  "lines dropped: no room on the disk|space is back)\n$",
                             REG_EXTENDED | REG_NOSUB), 0);
    char line[2048];
    int n = 0, notes = 0, back = 0;
    while (fgets(line, sizeof line, f)) {
        if (regexec(&re, line, 0, NULL, 0) != 0)
            fail_msg("a line cut or run into another: %s", line);
        notes += strstr(line, "log lines dropped") != NULL;
        back += strstr(line, "space is back") != NULL;
        n++;
    }
    fclose(f);
    regfree(&re);
    assert_int_equal(notes, 1);
    assert_int_equal(back, 1);
    print_message("%d whole lines in the log\n", n);
}

int main(void)
{
    /* Before any log line: xt_log looks at stderr's kind once. */
    if (pom_tmpdir("xtlog", dir, sizeof dir) < 0)
        return 1;
    if (mount("tmpfs", dir, "tmpfs", 0, "size=128k") < 0) {
        printf("SKIP: cannot mount a tmpfs: %s\n", strerror(errno));
        rmdir(dir);
        return 77;
    }
    saved_stderr = dup(STDERR_FILENO);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_disk_whole_lines),
    };
    int failed = cmocka_run_group_tests_name("xt_log", tests, NULL, NULL);
    umount2(dir, MNT_DETACH);
    rmdir(dir);
    return failed;
}
