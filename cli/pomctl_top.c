/*
 * pomctl_top.c -- `pomctl top`: per-site rates from the sites' Prometheus
 * /metrics (docs/pomctl.md "top", docs/metrics.md).
 *
 * Each round fetches R2's view, scrapes every site that reported a metrics
 * address (pomctl_scrape.h), one after the other with the invocation's
 * timeout, and prints each site's rates over the time since its previous
 * scrape: requests or operations per second, bytes per second, commit
 * groups per second and errors per second (struct top_kind says which
 * families each daemon's numbers sum). The first round is the baseline;
 * `--once` (and --json) print the second and stop.
 *
 * Invariants:
 *  (1) A rate compares two scrapes of one site (same id, same metrics
 *      address) and divides by the time between them, measured on the
 *      monotonic clock around each scrape. A counter that went back (the
 *      process restarted) counts from zero, as Prometheus's rate() does.
 *  (2) A site that did not answer or lacks a family shows no number ("-",
 *      JSON null), never a zero.
 */
#include "pomctl_i.h"
#include "pomctl_scrape.h"

#include "xt_common.h"
#include "xt_time.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum {
    Q_OPS,
    Q_BYTES,
    Q_GROUPS,
    Q_ERRORS,
    Q__COUNT
};

static const char *const q_json[Q__COUNT] = { "ops_per_s", "bytes_per_s", "groups_per_s",
                                              "errors_per_s" };

/* The families whose sum is each quantity of a site type (up to 3; NULL:
 * the type has no such number). */
struct top_kind {
    int type;
    const char *q[Q__COUNT][3];
};

static const struct top_kind kinds[] = {
    { XT_SITE_MDS,
      { { "pom_mds_requests_total" },
        { "pom_mds_image_bytes_total", "pom_mds_delta_bytes_total" },
        { "pom_mds_groups_committed_total" },
        { "pom_mds_op_errors_total", "pom_mds_rpc_client_errors_total" } } },
    { XT_SITE_MDSL,
      { { "pom_mdsl_op_duration_seconds_count" },
        { "pom_mdsl_written_bytes_total" },
        { "pom_mdsl_commits_total" },
        { "pom_mdsl_op_errors_total", "pom_mdsl_rpc_client_errors_total" } } },
    { XT_SITE_R2,
      { { "pom_r2_request_duration_seconds_count" },
        { NULL },
        { NULL },
        { "pom_r2_request_errors_total", "pom_r2_rpc_client_errors_total" } } },
    { XT_SITE_CLIENT,
      { { "pom_pomfs_op_duration_seconds_count" },
        { "pom_pomfs_blob_written_bytes_total", "pom_pomfs_blob_read_bytes_total" },
        { NULL },
        { "pom_pomfs_rpc_client_errors_total" } } },
};

/* One scrape of one site. */
struct sample {
    uint32_t id;
    int type, state;
    char addr[XT_ADDR_MAX];
    char metrics[XT_ADDR_MAX];
    int rc;        /* of the scrape */
    uint64_t t_ns; /* monotonic, the scrape's middle */
    bool has[Q__COUNT];
    double v[Q__COUNT];
    /* the rates, once compared with the previous scrape (invariant 2) */
    bool has_rate[Q__COUNT];
    double rate[Q__COUNT];
    double span_s; /* the seconds the rates are over; 0: none */
};

static const struct top_kind *kind_of(int type)
{
    for (size_t i = 0; i < XT_ARRAY_SIZE(kinds); i++)
        if (kinds[i].type == type)
            return &kinds[i];
    return NULL;
}

static void scrape(struct pomctl *ctl, struct sample *s)
{
    uint64_t t0 = xt_mono_ns();
    char *body = NULL;
    s->rc = pomctl_scrape_get(s->metrics, ctl->timeout_ms, &body);
    s->t_ns = t0 + (xt_mono_ns() - t0) / 2;
    const struct top_kind *k = kind_of(s->type);
    for (int q = 0; s->rc == 0 && k && q < Q__COUNT; q++) {
        for (int j = 0; j < 3 && k->q[q][j]; j++) {
            double x;
            if (pomctl_scrape_sum(body, k->q[q][j], &x)) {
                s->has[q] = true;
                s->v[q] += x;
            }
        }
    }
    xt_free(body);
}

/* Scrapes every site of the view with a metrics address into *out (caller
 * frees with xt_free). 0 or -ENOMEM. */
static int scrape_all(struct pomctl *ctl, const struct xt_view *v, struct sample **out, size_t *n)
{
    *out = xt_calloc(v->nsites ? v->nsites : 1, sizeof **out);
    *n = 0;
    if (!*out)
        return -ENOMEM;
    for (size_t i = 0; i < v->nsites; i++) {
        const struct xt_site *site = &v->sites[i];
        if (!site->metrics[0] || site->state == XT_SITE_REMOVED)
            continue;
        struct sample *s = &(*out)[(*n)++];
        s->id = site->id;
        s->type = site->type;
        s->state = site->state;
        snprintf(s->addr, sizeof s->addr, "%s", site->addr);
        snprintf(s->metrics, sizeof s->metrics, "%s", site->metrics);
        scrape(ctl, s);
    }
    return 0;
}

/* Fills cur's rates from the scrape of the same site in prev (invariant 1). */
static void rates(const struct sample *prev, size_t np, struct sample *cur, size_t nc)
{
    for (size_t i = 0; i < nc; i++) {
        struct sample *c = &cur[i];
        const struct sample *p = NULL;
        for (size_t j = 0; j < np && !p; j++)
            if (prev[j].id == c->id && !strcmp(prev[j].metrics, c->metrics))
                p = &prev[j];
        if (!p || p->rc || c->rc || c->t_ns <= p->t_ns)
            continue;
        double dt = (double)(c->t_ns - p->t_ns) / 1e9;
        c->span_s = dt;
        for (int q = 0; q < Q__COUNT; q++) {
            if (!p->has[q] || !c->has[q])
                continue;
            double d = c->v[q] - p->v[q];
            c->rate[q] = (d < 0 ? c->v[q] : d) / dt;
            c->has_rate[q] = true;
        }
    }
}

static void print_json(struct pomctl *ctl, const struct sample *s, size_t n, double interval,
                       bool all_ok)
{
    pomctl_json *j = &ctl->js;
    pomctl_json_init(j, stdout, true);
    pomctl_json_obj_begin(j, NULL);
    pomctl_json_bool(j, "ok", all_ok);
    if (!all_ok)
        pomctl_json_u64(j, "exit", POMCTL_EFAIL);
    pomctl_json_double(j, "interval_s", interval);
    pomctl_json_arr_begin(j, "sites");
    for (size_t i = 0; i < n; i++) {
        pomctl_json_obj_begin(j, NULL);
        pomctl_json_u64(j, "id", s[i].id);
        pomctl_json_str(j, "type", xt_site_type_name(s[i].type));
        pomctl_json_str(j, "addr", s[i].addr);
        pomctl_json_str(j, "state", xt_site_state_name(s[i].state));
        pomctl_json_str(j, "metrics", s[i].metrics);
        pomctl_json_bool(j, "reached", s[i].rc == 0);
        if (s[i].rc)
            pomctl_json_str(j, "error", strerror(-s[i].rc));
        for (int q = 0; q < Q__COUNT; q++) {
            if (s[i].has_rate[q])
                pomctl_json_double(j, q_json[q], s[i].rate[q]);
            else
                pomctl_json_null(j, q_json[q]);
        }
        /* The site's own span: its two scrapes' middles, which differ
         * from the interval by how long each round took to reach it. */
        if (s[i].span_s > 0)
            pomctl_json_double(j, "span_s", s[i].span_s);
        else
            pomctl_json_null(j, "span_s");
        pomctl_json_obj_end(j);
    }
    pomctl_json_arr_end(j);
    pomctl_json_obj_end(j);
    pomctl_json_finish(j);
}

static int print_table(const struct sample *s, size_t n, double interval, bool clear)
{
    static const char *const hdr[] = { "ID",    "TYPE",    "ADDRESS",  "METRICS",
                                       "OPS/S", "BYTES/S", "GROUPS/S", "ERRORS/S" };
    pomctl_table *t = pomctl_table_new(8, hdr, "rlllrrrr");
    int rc = t ? 0 : -ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc |= pomctl_table_row(t);
        rc |= pomctl_table_cell(t, "%u", s[i].id);
        rc |= pomctl_table_cell(t, "%s", xt_site_type_name(s[i].type));
        rc |= pomctl_table_cell(t, "%s", s[i].addr);
        rc |= pomctl_table_cell(t, "%s", s[i].metrics);
        if (s[i].rc) {
            rc |= pomctl_table_cell(t, "unreachable: %s", strerror(-s[i].rc));
            continue;
        }
        for (int q = 0; q < Q__COUNT; q++) {
            char b[32];
            if (!s[i].has_rate[q])
                rc |= pomctl_table_cell(t, "-");
            else if (q == Q_BYTES)
                rc |= pomctl_table_cell(
                    t, "%s", pomctl_fmt_bytes((uint64_t)llround(s[i].rate[q]), b, sizeof b));
            else
                rc |= pomctl_table_cell(t, "%.1f", s[i].rate[q]);
        }
    }
    if (rc == 0) {
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        strftime(when, sizeof when, "%H:%M:%S", localtime_r(&now, &tm));
        if (clear)
            fputs("\033[H\033[2J", stdout); /* home, clear: the terminal shows one table */
        printf("pomctl top  %s  every %.1f s  %zu sites with metrics\n\n", when, interval, n);
        if (n)
            pomctl_table_print(t, stdout, 0);
        else
            printf("no site reported a metrics address (docs/metrics.md)\n");
        if (!clear)
            putchar('\n');
        fflush(stdout);
    }
    pomctl_table_free(t);
    return rc;
}

int pomctl_cmd_top(struct pomctl *ctl, int argc, char **argv)
{
    double interval = 2.0;
    bool once = ctl->json;
    unsigned long count = 0; /* 0: until interrupted */
    for (int i = 0; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "--interval") && i + 1 < argc) {
            interval = strtod(argv[++i], &end);
            if (!*argv[i] || *end || !(interval >= 0.1 && interval <= 3600))
                return pomctl_usage_err(ctl, "top", "bad interval '%s' (0.1 to 3600 s)", argv[i]);
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            count = strtoul(argv[++i], &end, 10);
            if (!*argv[i] || *end || count == 0 || argv[i][0] == '-')
                return pomctl_usage_err(ctl, "top", "bad count '%s'", argv[i]);
        } else if (!strcmp(argv[i], "--once")) {
            once = true;
        } else {
            return pomctl_usage_err(ctl, "top", "unknown argument '%s'", argv[i]);
        }
    }
    if (once)
        count = 1;
    int code = pomctl_resolve_addrs(ctl);
    if (code)
        return code;
    bool clear = !once && isatty(STDOUT_FILENO);
    struct sample *prev = NULL;
    size_t np = 0;
    unsigned long shown = 0;
    for (;;) {
        uint64_t start = xt_mono_ns();
        struct xt_view v;
        int rc = pomctl_r2_view(ctl, false, &v);
        if (rc < 0) {
            xt_free(prev);
            return pomctl_fail(ctl, rc, "top", NULL);
        }
        struct sample *cur;
        size_t nc;
        rc = scrape_all(ctl, &v, &cur, &nc);
        xt_view_free(&v);
        if (rc < 0) {
            xt_free(prev);
            fprintf(stderr, "pomctl: out of memory\n");
            return POMCTL_EFAIL;
        }
        if (prev) {
            rates(prev, np, cur, nc);
            bool all_ok = true;
            for (size_t i = 0; i < nc; i++) {
                if (cur[i].rc && cur[i].state == XT_SITE_UP) {
                    all_ok = false;
                    if (once)
                        fprintf(stderr, "pomctl: top: site %u at %s: %s\n", cur[i].id,
                                cur[i].metrics, strerror(-cur[i].rc));
                }
            }
            if (ctl->json) {
                print_json(ctl, cur, nc, interval, all_ok);
            } else if (print_table(cur, nc, interval, clear) < 0) {
                fprintf(stderr, "pomctl: out of memory\n");
                all_ok = false;
            }
            if (count && ++shown == count) {
                xt_free(prev);
                xt_free(cur);
                return all_ok ? POMCTL_OK : POMCTL_EFAIL;
            }
        }
        xt_free(prev);
        prev = cur;
        np = nc;
        uint64_t next = start + (uint64_t)(interval * 1e9), now = xt_mono_ns();
        if (next > now)
            xt_sleep_ms((next - now) / 1000000);
    }
}
