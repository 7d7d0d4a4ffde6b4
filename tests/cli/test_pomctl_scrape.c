/*
 * test_pomctl_scrape.c -- cli/pomctl_scrape.c, what `pomctl top` reads:
 *   - the text-format reader: sums over label sets, exact names (a longer
 *     name with the same start is another metric), histogram _count lines,
 *     quoted label values holding '}', '"' and spaces, comments, blank and
 *     broken lines skipped, +Inf and exponents;
 *   - the GET against the project's own server (xt_metrics on a free
 *     loopback port, a collector of known values): the body round-trips
 *     and reads back; a refused port, a bad address, an HTTP error status
 *     and a server that never answers (timeout) each give their error.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pomctl_scrape.h"
#include "xt_common.h"
#include "xt_metrics.h"

static void test_sum(void **state)
{
    (void)state;
    const char *text = "# HELP pom_x_total X.\n"
                       "# TYPE pom_x_total counter\n"
                       "pom_x_total 5\n"
                       "pom_x_total_more 100\n"
                       "pom_y_total{op=\"a\"} 1.5\n"
                       "pom_y_total{op=\"b}\",k=\"q\\\"x y\"} 2.5e1\n"
                       "pom_y_total{op=\"c\"} not-a-number\n"
                       "pom_y_total{op=\"d\" 7\n"
                       "\n"
                       "pom_h_seconds_bucket{op=\"a\",le=\"+Inf\"} 9\n"
                       "pom_h_seconds_count{op=\"a\"} 9\n"
                       "pom_h_seconds_count{op=\"b\"} 3\n"
                       "pom_inf +Inf\n"
                       "pom_last 4";
    double v;
    assert_int_equal(pomctl_scrape_sum(text, "pom_x_total", &v), 1);
    assert_true(v == 5);
    assert_int_equal(pomctl_scrape_sum(text, "pom_y_total", &v), 2);
    assert_true(v == 26.5);
    assert_int_equal(pomctl_scrape_sum(text, "pom_h_seconds_count", &v), 2);
    assert_true(v == 12);
    assert_int_equal(pomctl_scrape_sum(text, "pom_inf", &v), 1);
    assert_true(isinf(v));
    assert_int_equal(pomctl_scrape_sum(text, "pom_last", &v), 1); /* no newline at the end */
    assert_true(v == 4);
    assert_int_equal(pomctl_scrape_sum(text, "pom_x", &v), 0);
    assert_true(v == 0);
    assert_int_equal(pomctl_scrape_sum(text, "# HELP", &v), 0);
    assert_int_equal(pomctl_scrape_sum("", "pom_x_total", &v), 0);
}

static void collect(void *arg, xt_metrics_buf *b)
{
    (void)arg;
    xt_metrics_put_counter(b, "pom_test_requests_total", "Requests.", 1234);
    xt_metrics_put_family(b, "pom_test_errors_total", "counter", "Errors.");
    xt_metrics_put_u64(b, "pom_test_errors_total", "op=\"a\"", 2);
    xt_metrics_put_u64(b, "pom_test_errors_total", "op=\"b\"", 3);
}

static void test_get(void **state)
{
    (void)state;
    struct xt_metrics_opts o = { .listen = "127.0.0.1:0", .collect = collect };
    xt_metrics *m;
    assert_int_equal(xt_metrics_start(&o, &m), 0);
    char *body = NULL;
    assert_int_equal(pomctl_scrape_get(xt_metrics_addr(m), 5000, &body), 0);
    assert_non_null(strstr(body, "# TYPE pom_test_requests_total counter\n"));
    assert_null(strstr(body, "HTTP/1.")); /* the headers are gone */
    double v;
    assert_int_equal(pomctl_scrape_sum(body, "pom_test_requests_total", &v), 1);
    assert_true(v == 1234);
    assert_int_equal(pomctl_scrape_sum(body, "pom_test_errors_total", &v), 2);
    assert_true(v == 5);
    xt_free(body);
    /* the same through ":PORT" (loopback) */
    char addr[32];
    snprintf(addr, sizeof addr, ":%d", xt_metrics_port(m));
    assert_int_equal(pomctl_scrape_get(addr, 5000, &body), 0);
    xt_free(body);
    int port = xt_metrics_port(m);
    xt_metrics_stop(m);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    assert_int_equal(pomctl_scrape_get(addr, 5000, &body), -ECONNREFUSED);
    assert_null(body);
    assert_int_equal(pomctl_scrape_get("no-port", 5000, &body), -EINVAL);
    assert_int_equal(pomctl_scrape_get("1:2:3:4", 5000, &body), -EINVAL);
}

/* A listener that answers each connection with `answer` (NULL: reads and
 * never answers, until the test closes it). */
struct fake {
    int lfd;
    const char *answer;
    pthread_t th;
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    int c = accept(f->lfd, NULL, NULL);
    if (c < 0)
        return NULL;
    char buf[512];
    ssize_t n = recv(c, buf, sizeof buf, 0);
    (void)n;
    if (f->answer) {
        n = send(c, f->answer, strlen(f->answer), MSG_NOSIGNAL);
        (void)n;
    } else {
        while (recv(c, buf, sizeof buf, 0) > 0) /* until the client gives up */
            ;
    }
    close(c);
    return NULL;
}

static int fake_start(struct fake *f, const char *answer, char *addr, size_t cap)
{
    f->answer = answer;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof sa;
    if (f->lfd < 0 || bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(f->lfd, 4) < 0 || getsockname(f->lfd, (struct sockaddr *)&sa, &len) < 0)
        return -1;
    snprintf(addr, cap, "127.0.0.1:%d", ntohs(sa.sin_port));
    return pthread_create(&f->th, NULL, fake_main, f);
}

static void test_bad_servers(void **state)
{
    (void)state;
    char addr[32], *body = NULL;
    struct fake f;
    assert_int_equal(fake_start(&f, "HTTP/1.0 404 Not Found\r\n\r\nno", addr, sizeof addr), 0);
    assert_int_equal(pomctl_scrape_get(addr, 5000, &body), -EPROTO);
    pthread_join(f.th, NULL);
    close(f.lfd);
    assert_int_equal(fake_start(&f, "garbage", addr, sizeof addr), 0);
    assert_int_equal(pomctl_scrape_get(addr, 5000, &body), -EPROTO);
    pthread_join(f.th, NULL);
    close(f.lfd);
    assert_int_equal(fake_start(&f, "HTTP/1.1 200 OK\r\nX: y\r\n\r\npom_a 1\n", addr, sizeof addr),
                     0);
    assert_int_equal(pomctl_scrape_get(addr, 5000, &body), 0);
    assert_string_equal(body, "pom_a 1\n");
    xt_free(body);
    body = NULL;
    pthread_join(f.th, NULL);
    close(f.lfd);
    /* a server that takes the request and never answers: the timeout ends it */
    assert_int_equal(fake_start(&f, NULL, addr, sizeof addr), 0);
    assert_int_equal(pomctl_scrape_get(addr, 300, &body), -ETIMEDOUT);
    assert_null(body);
    pthread_join(f.th, NULL);
    close(f.lfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum),
        cmocka_unit_test(test_get),
        cmocka_unit_test(test_bad_servers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
