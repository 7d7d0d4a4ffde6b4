/*
 * pomctl_stat.c -- `pomctl site stat [ID]`: what each MDSL's store says
 * about itself, through the Storage `stat` call (xt_rpc_mdsl.h): tables,
 * segments, bytes and the live share, undecided prepares, GC, and the space
 * given back after ring-1 moves (folder drops, rolls, sweeps, a sweep still
 * owed; docs/mdsl-scale.md "Space back"), and with replicas the catch-up:
 * slices still to copy from the peers and what was copied
 * (docs/mdsl-replicas.md "Catch-up of a returning MDSL").
 *
 * The MDSL addresses come from R2's view; pomctl then calls each MDSL
 * directly, one after the other, with the invocation's timeout. An MDSL
 * that does not answer gets a row saying so and makes the exit code 1; the
 * others are still shown. Read-only: nothing is retried or changed.
 */
#include "pomctl_i.h"

#include "xt_common.h"
#include "xt_rpc_mdsl.h"

#include <stdlib.h>
#include <string.h>

struct one {
    const struct xt_site *site;  /* borrowed from the view */
    int rc;                      /* the call's result */
    struct xt_store_stat st;     /* st.prepared freed by stat_free */
};

static int stat_one(struct pomctl *ctl, struct one *o)
{
    char host[XT_ADDR_MAX];
    int port;
    memset(&o->st, 0, sizeof o->st);
    if (xt_rpc_parse_addr(o->site->addr, host, sizeof host, &port) < 0)
        return -EINVAL;
    struct xt_rpc_pool_opts po = {
        .host = host, .port = port, .max_idle = 1,
        .connect_timeout_ms = ctl->timeout_ms, .call_timeout_ms = ctl->timeout_ms,
    };
    xt_rpc_pool *pool = NULL;
    int rc = xt_rpc_pool_new(&po, &pool);
    if (rc < 0)
        return rc;
    xt_rpc_call call = pomctl_call(ctl);
    rc = xt_mdsl_stat(pool, &call, &o->st);
    xt_rpc_pool_free(pool);
    return rc;
}

static void stat_json(struct pomctl *ctl, const struct one *o)
{
    pomctl_json *j = &ctl->js;
    const struct xt_store_stat *s = &o->st;
    pomctl_json_obj_begin(j, NULL);
    pomctl_json_u64(j, "id", o->site->id);
    pomctl_json_str(j, "addr", o->site->addr);
    pomctl_json_str(j, "state", xt_site_state_name(o->site->state));
    pomctl_json_bool(j, "reached", o->rc == 0);
    if (o->rc < 0) {
        pomctl_json_str(j, "error", strerror(-o->rc));
        pomctl_json_obj_end(j);
        return;
    }
    pomctl_json_u64(j, "tables", s->tables);
    pomctl_json_u64(j, "segments", s->segments);
    pomctl_json_u64(j, "bytes", s->bytes);
    pomctl_json_u64(j, "live_bytes", s->live_bytes);
    pomctl_json_double(j, "live_ratio", s->bytes ? (double)s->live_bytes / (double)s->bytes : 1);
    pomctl_json_u64(j, "prepared", s->nprepared);
    pomctl_json_u64(j, "commits", s->commits);
    pomctl_json_u64(j, "aborts", s->aborts);
    pomctl_json_u64(j, "gc_passes", s->gc_passes);
    pomctl_json_u64(j, "gc_moved_bytes", s->gc_moved_bytes);
    pomctl_json_u64(j, "gc_freed_segments", s->gc_freed_segments);
    pomctl_json_u64(j, "gc_freed_bytes", s->gc_freed_bytes);
    pomctl_json_u64(j, "dropped_folders", s->dropped_folders);
    pomctl_json_u64(j, "dropped_bytes", s->dropped_bytes);
    pomctl_json_u64(j, "rolled_segments", s->rolled_segments);
    pomctl_json_u64(j, "sweeps", s->sweeps);
    pomctl_json_u64(j, "sweep_owed", s->sweep_owed);
    pomctl_json_u64(j, "corrupt_records", s->corrupt_records);
    if (s->under_replicated >= 0)
        pomctl_json_u64(j, "under_replicated", (uint64_t)s->under_replicated);
    else
        pomctl_json_null(j, "under_replicated");
    pomctl_json_u64(j, "pulled_slices", s->pulled_slices);
    pomctl_json_u64(j, "pulled_bytes", s->pulled_bytes);
    if (s->failed)
        pomctl_json_str(j, "failed", strerror(-s->failed));
    else
        pomctl_json_null(j, "failed");
    pomctl_json_obj_end(j);
}

/* One table row; 0 or nonzero when out of memory. */
static int stat_row(pomctl_table *t, const struct one *o)
{
    const struct xt_store_stat *s = &o->st;
    char b1[32], b2[32], b3[32], b4[32];
    int rc = pomctl_table_row(t);
    rc |= pomctl_table_cell(t, "%u", o->site->id);
    rc |= pomctl_table_cell(t, "%s", o->site->addr);
    if (o->rc < 0) {
        for (int i = 0; i < 11; i++)
            rc |= pomctl_table_cell(t, "-");
        return rc | pomctl_table_cell(t, "unreachable: %s", strerror(-o->rc));
    }
    rc |= pomctl_table_cell(t, "%llu", (unsigned long long)s->tables);
    rc |= pomctl_table_cell(t, "%s", pomctl_fmt_bytes(s->bytes, b1, sizeof b1));
    rc |= pomctl_table_cell(t, "%.0f%%",
                            s->bytes ? 100.0 * (double)s->live_bytes / (double)s->bytes : 100.0);
    rc |= pomctl_table_cell(t, "%zu", s->nprepared);
    rc |= pomctl_table_cell(t, "%llu / %s", (unsigned long long)s->gc_freed_segments,
                            pomctl_fmt_bytes(s->gc_freed_bytes, b2, sizeof b2));
    rc |= pomctl_table_cell(t, "%llu / %s", (unsigned long long)s->dropped_folders,
                            pomctl_fmt_bytes(s->dropped_bytes, b3, sizeof b3));
    rc |= pomctl_table_cell(t, "%llu", (unsigned long long)s->rolled_segments);
    rc |= pomctl_table_cell(t, "%llu", (unsigned long long)s->sweeps);
    if (s->sweep_owed)
        rc |= pomctl_table_cell(t, "change %llu", (unsigned long long)s->sweep_owed);
    else
        rc |= pomctl_table_cell(t, "-");
    if (s->under_replicated >= 0)
        rc |= pomctl_table_cell(t, "%lld", (long long)s->under_replicated);
    else
        rc |= pomctl_table_cell(t, "-");
    rc |= pomctl_table_cell(t, "%llu / %s", (unsigned long long)s->pulled_slices,
                            pomctl_fmt_bytes(s->pulled_bytes, b4, sizeof b4));
    if (s->failed)
        return rc | pomctl_table_cell(t, "write error: %s", strerror(-s->failed));
    return rc | pomctl_table_cell(t, "%s", s->corrupt_records ? "corrupt records seen" : "ok");
}

static void print_all(struct pomctl *ctl, const struct one *v, size_t n, bool all_ok)
{
    if (ctl->json) {
        pomctl_json_init(&ctl->js, stdout, true);
        pomctl_json_obj_begin(&ctl->js, NULL);
        pomctl_json_bool(&ctl->js, "ok", all_ok);
        if (!all_ok)
            pomctl_json_u64(&ctl->js, "exit", POMCTL_EFAIL);
        pomctl_json_arr_begin(&ctl->js, "mdsl");
        for (size_t i = 0; i < n; i++)
            stat_json(ctl, &v[i]);
        pomctl_json_arr_end(&ctl->js);
        pomctl_json_obj_end(&ctl->js);
        pomctl_json_finish(&ctl->js);
        return;
    }
    static const char *const hdr[] = { "ID",     "ADDRESS", "TABLES",  "BYTES",
                                       "LIVE",   "PREPARED", "GC FREED", "DROPPED",
                                       "ROLLED", "SWEEPS",  "SWEEP OWED", "UNDER-REPL",
                                       "PULLED", "STATUS" };
    pomctl_table *t = pomctl_table_new(14, hdr, "rlrrrrrrrrlrrl");
    int rc = t ? 0 : 1;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = stat_row(t, &v[i]);
    if (rc)
        fprintf(stderr, "pomctl: out of memory\n");
    else
        pomctl_table_print(t, stdout, 0);
    pomctl_table_free(t);
}

int pomctl_site_stat(struct pomctl *ctl, int argc, char **argv)
{
    if (argc > 1)
        return pomctl_usage_err(ctl, "site", "site stat takes at most one site id");
    unsigned long id = 0;
    if (argc == 1) {
        char *end = NULL;
        id = strtoul(argv[0], &end, 10);
        if (!*argv[0] || *end || id == 0 || id > UINT32_MAX || argv[0][0] == '-')
            return pomctl_usage_err(ctl, "site", "bad site id '%s' (see: pomctl sites)",
                                    argv[0]);
    }
    int code = pomctl_resolve_addrs(ctl);
    if (code)
        return code;
    struct xt_view v;
    int rc = pomctl_r2_view(ctl, false, &v);
    if (rc < 0)
        return pomctl_fail(ctl, rc, "site stat", NULL);
    struct one *all = xt_calloc(v.nsites ? v.nsites : 1, sizeof *all);
    size_t n = 0;
    for (size_t i = 0; all && i < v.nsites; i++) {
        const struct xt_site *s = &v.sites[i];
        if (id ? s->id == id : s->type == XT_SITE_MDSL && s->state != XT_SITE_REMOVED)
            all[n++].site = s;
    }
    char msg[160] = "";
    int err = 0;
    if (!all) {
        err = -ENOMEM;
        snprintf(msg, sizeof msg, "out of memory");
    } else if (id && n == 0) {
        err = -ENOENT;
        snprintf(msg, sizeof msg, "site stat %lu: no such site (see: pomctl sites)", id);
    } else if (id && all[0].site->type != XT_SITE_MDSL) {
        err = -EINVAL;
        snprintf(msg, sizeof msg, "site stat %lu: site %lu is an %s; only an MDSL answers stat",
                 id, id, xt_site_type_name(all[0].site->type));
    }
    if (err) {
        fprintf(stderr, "pomctl: %s\n", msg);
        if (ctl->json)
            pomctl_json_error(ctl, POMCTL_EFAIL, msg, err);
        xt_free(all);
        xt_view_free(&v);
        return POMCTL_EFAIL;
    }
    bool all_ok = true;
    for (size_t i = 0; i < n; i++) {
        all[i].rc = stat_one(ctl, &all[i]);
        if (all[i].rc < 0) {
            all_ok = false;
            fprintf(stderr, "pomctl: site stat: MDSL %u at %s: %s\n", all[i].site->id,
                    all[i].site->addr, strerror(-all[i].rc));
        }
    }
    if (n == 0 && !ctl->json)
        printf("no MDSL is registered (view version %llu)\n", (unsigned long long)v.version);
    else
        print_all(ctl, all, n, all_ok);
    for (size_t i = 0; i < n; i++)
        xt_free(all[i].st.prepared);
    xt_free(all);
    xt_view_free(&v);
    return all_ok ? POMCTL_OK : POMCTL_EFAIL;
}
