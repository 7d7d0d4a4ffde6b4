/*
 * test_xt_crash.c -- crash points: spec parsing, and (in a forked child)
 * that an armed point SIGKILLs at exactly its N-th pass, that other points
 * and an unarmed or disarmed process pass untouched.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xt_crash.h"
#include "xt_daemon.h"

static void test_spec_parse(void **state)
{
    (void)state;
    char name[XT_CRASH_NAME_MAX + 1];
    unsigned long nth = 0;
    assert_true(xt_crash_spec_parse("xact.participant", name, &nth));
    assert_string_equal(name, "xact.participant");
    assert_int_equal(nth, 1);
    assert_true(xt_crash_spec_parse("move.x_committed:12", name, &nth));
    assert_string_equal(name, "move.x_committed");
    assert_int_equal(nth, 12);
    assert_true(xt_crash_spec_parse("a-1:1", NULL, NULL));

    char longest[XT_CRASH_NAME_MAX + 2];
    memset(longest, 'a', sizeof longest);
    longest[XT_CRASH_NAME_MAX] = '\0';
    assert_true(xt_crash_spec_parse(longest, name, NULL));
    longest[XT_CRASH_NAME_MAX] = 'a';
    longest[XT_CRASH_NAME_MAX + 1] = '\0';

    const char *bad[] = { "", ":3", "Upper", "x:0", "x:", "x:-1", "x: 3", "x:+3", "x:03",
                          "x:3a", "x y", "x:1:2", "x/y",
                          "x:99999999999999999999999999", longest };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(xt_crash_spec_parse(bad[i], name, &nth));
        assert_int_equal(xt_crash_arm(bad[i]), -EINVAL);
    }
    assert_false(xt_crash_spec_parse(NULL, NULL, NULL));
    assert_int_equal(xt_crash_arm(NULL), -EINVAL);
}

static void test_daemon_option(void **state)
{
    (void)state;
    const char *const known[] = { "t.one", "t.two", NULL };
    assert_int_equal(xt_daemon_crash_option("t.three", known), -EINVAL);
    assert_int_equal(xt_daemon_crash_option("t.one:0", known), -EINVAL);
    assert_int_equal(xt_daemon_crash_option("t.two:5", known), 0);
    xt_crash_disarm();
}

/* Forks a child that arms `spec` (NULL: none; disarm: arm, then disarm),
 * passes `other` 5 times, then `point` up to 10 times, writing one byte to
 * a pipe after each pass. Returns the wait status; *passes = bytes read. */
static int run_child(const char *spec, bool disarm, const char *point, int *passes)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        if (spec && xt_crash_arm(spec) != 0)
            _exit(2);
        if (disarm)
            xt_crash_disarm();
        for (int i = 0; i < 5; i++)
            XT_CRASH_POINT("t.other");
        for (int i = 0; i < 10; i++) {
            if (i % 2)
                XT_CRASH_POINT(point);
            else
                xt_crash_point(point); /* the function and the macro count alike */
            if (write(fd[1], "p", 1) != 1)
                _exit(3);
        }
        _exit(0);
    }
    close(fd[1]);
    char buf[64];
    ssize_t n, total = 0;
    while ((n = read(fd[0], buf, sizeof buf)) > 0)
        total += n;
    close(fd[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    *passes = (int)total;
    return status;
}

static void test_armed_kills_at_nth_pass(void **state)
{
    (void)state;
    int passes = -1;
    int st = run_child("t.point:3", false, "t.point", &passes);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGKILL);
    assert_int_equal(passes, 2); /* passes 1 and 2 went by; the 3rd killed */

    st = run_child("t.point", false, "t.point", &passes);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    assert_int_equal(passes, 0);
}

static void test_unarmed_and_other_points_pass(void **state)
{
    (void)state;
    int passes = -1;
    int st = run_child(NULL, false, "t.point", &passes);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(passes, 10);

    st = run_child("t.elsewhere", false, "t.point", &passes);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(passes, 10);

    st = run_child("t.point:11", false, "t.point", &passes);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    st = run_child("t.point", true, "t.point", &passes);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(passes, 10);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spec_parse),
        cmocka_unit_test(test_daemon_option),
        cmocka_unit_test(test_armed_kills_at_nth_pass),
        cmocka_unit_test(test_unarmed_and_other_points_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
