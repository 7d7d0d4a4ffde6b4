/*
 * test_xt_metrics.c -- xtable/xt_metrics.c: the text format (families,
 * cumulative histograms ending in +Inf), the listen address rules, and the
 * HTTP server over a real loopback socket: 200 with the collector's text,
 * 404, 405, the address file, and scrapes answered again after more idle
 * connections than the limit were opened and closed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "xt_metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct xt_metrics_hist hist;

static void collect(void *arg, xt_metrics_buf *b)
{
    (*(int *)arg)++;
    xt_metrics_put_counter(b, "pom_test_things_total", "Things.", 42);
    xt_metrics_put_gauge(b, "pom_test_ratio", "A ratio.", 0.5);
    static const char *const ops[] = { "x" };
    xt_metrics_put_hist_family(b, "pom_test_op_duration_seconds", "Latency.", "op", ops, &hist, 1);
}

/* One HTTP/1.0 exchange with 127.0.0.1:port: the whole answer, malloc'd. */
static char *http(int port, const char *request)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(send(fd, request, strlen(request), 0), (ssize_t)strlen(request));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    ssize_t n;
    while ((n = recv(fd, buf + len, cap - 1 - len, 0)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
    close(fd);
    return buf;
}

static void test_serve(void **state)
{
    (void)state;
    memset(&hist, 0, sizeof hist);
    xt_metrics_hist_record(&hist, 500);          /* <= 1 us */
    xt_metrics_hist_record(&hist, 1000);         /* exactly 1 us: in le="1e-06" */
    xt_metrics_hist_record(&hist, 3000000);      /* 3 ms */
    xt_metrics_hist_record(&hist, 20000000000u); /* 20 s: over the top bound */
    char file[] = "/tmp/test_xt_metrics.XXXXXX";
    int tfd = mkstemp(file);
    assert_true(tfd >= 0);
    close(tfd);
    int scrapes = 0;
    struct xt_metrics_opts o = { .listen = "127.0.0.1:0", .collect = collect, .arg = &scrapes,
                                 .addr_file = file };
    xt_metrics *m;
    assert_int_equal(xt_metrics_start(&o, &m), 0);
    int port = xt_metrics_port(m);
    assert_true(port > 0);
    char want[64], got[64] = "";
    snprintf(want, sizeof want, "127.0.0.1:%d\n", port);
    FILE *f = fopen(file, "r");
    assert_non_null(f);
    assert_non_null(fgets(got, sizeof got, f));
    fclose(f);
    unlink(file);
    assert_string_equal(got, want);

    char *r = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
    assert_non_null(strstr(r, "HTTP/1.0 200") ? r : strstr(r, "HTTP/1.1 200"));
    assert_non_null(strstr(r, "text/plain; version=0.0.4"));
    assert_non_null(strstr(r, "# TYPE pom_test_things_total counter\npom_test_things_total 42\n"));
    assert_non_null(strstr(r, "pom_test_ratio 0.5\n"));
    assert_non_null(strstr(r, "# TYPE pom_test_op_duration_seconds histogram\n"));
    assert_non_null(strstr(r, "pom_test_op_duration_seconds_bucket{op=\"x\",le=\"1e-06\"} 2\n"));
    assert_non_null(strstr(r, "pom_test_op_duration_seconds_bucket{op=\"x\",le=\"0.0025\"} 2\n"));
    assert_non_null(strstr(r, "pom_test_op_duration_seconds_bucket{op=\"x\",le=\"0.005\"} 3\n"));
    assert_non_null(strstr(r, "pom_test_op_duration_seconds_bucket{op=\"x\",le=\"10\"} 3\n"));
    assert_non_null(strstr(r, "pom_test_op_duration_seconds_bucket{op=\"x\",le=\"+Inf\"} 4\n"));
    assert_non_null(strstr(r, "pom_test_op_duration_seconds_count{op=\"x\"} 4\n"));
    assert_non_null(strstr(r, "pom_test_op_duration_seconds_sum{op=\"x\"} 20.003001500\n"));
    free(r);
    assert_int_equal(scrapes, 1);

    r = http(port, "GET /other HTTP/1.0\r\n\r\n");
    assert_non_null(strstr(r, " 404 "));
    free(r);
    r = http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello");
    assert_non_null(strstr(r, " 405 "));
    free(r);
    r = http(port, "\x01\x02 garbage\r\n\r\n");
    assert_null(strstr(r, " 200 "));
    free(r);
    assert_int_equal(scrapes, 1); /* none of them reached the collector */

    /* More idle connections than the limit: the extra ones are refused or
     * wait, and once they close a scrape is answered again. */
    int fds[XT_METRICS_MAX_CONN + 8];
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fds[i], (struct sockaddr *)&a, sizeof a), 0);
    }
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(fds[i]);
    usleep(100000);
    r = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
    assert_non_null(strstr(r, " 200 "));
    free(r);
    xt_metrics_stop(m);
}

static void test_bad_listen(void **state)
{
    (void)state;
    static const char *const bad[] = { "", "127.0.0.1:", "127.0.0.1:99999", "::1:80",
                                       "127.0.0.1:8x", "[::1:80", "host name:80",
                                       "127.0.0.1:-1" };
    int n = 0;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct xt_metrics_opts o = { .listen = bad[i], .collect = collect, .arg = &n };
        xt_metrics *m = (xt_metrics *)&n;
        assert_int_equal(xt_metrics_start(&o, &m), -EINVAL);
        assert_null(m);
    }
    /* A bare port binds loopback; the address says so. */
    struct xt_metrics_opts o = { .listen = "0", .collect = collect, .arg = &n };
    xt_metrics *m;
    assert_int_equal(xt_metrics_start(&o, &m), 0);
    char want[32];
    snprintf(want, sizeof want, "127.0.0.1:%d", xt_metrics_port(m));
    assert_string_equal(xt_metrics_addr(m), want);
    /* Its port again: taken. */
    struct xt_metrics_opts o2 = { .listen = want, .collect = collect, .arg = &n };
    xt_metrics *m2;
    assert_int_equal(xt_metrics_start(&o2, &m2), -EADDRINUSE);
    xt_metrics_stop(m);
    xt_metrics_stop(NULL);
    /* IPv6 in brackets, where the host has it. */
    struct xt_metrics_opts o6 = { .listen = "[::1]:0", .collect = collect, .arg = &n };
    int rc = xt_metrics_start(&o6, &m);
    if (rc == 0) {
        snprintf(want, sizeof want, "[::1]:%d", xt_metrics_port(m));
        assert_string_equal(xt_metrics_addr(m), want);
        xt_metrics_stop(m);
    } else {
        assert_true(rc == -EADDRNOTAVAIL || rc == -EAFNOSUPPORT || rc == -EINVAL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve),
        cmocka_unit_test(test_bad_listen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
