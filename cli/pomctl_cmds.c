/*
 * pomctl_cmds.c -- the commands that talk to a running R2: status, sites,
 * site drain|remove, ring show, fs create|list|stat|drop (site stat: in
 * pomctl_stat.c).
 *
 * Each command reads the view (any R2 answers get_view) or calls the
 * leader (pomctl_i.h invariant 3), then prints either a table or one JSON
 * object. Read-only commands never retry; a change is retried only when the
 * R2 it reached turned out not to lead (-EREMOTE), which is safe because
 * that R2 did nothing.
 */
#include "pomctl_i.h"
#include "pomctl_progress.h"

#include "xt_common.h"
#include "xt_daemon.h"
#include "xt_ring.h"
#include "xt_time.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define LEADER_TRIES 3

/* One R2 call made at the leading R2: fn(ctl, call, arg) returns its result. */
typedef int (*leader_call_fn)(struct pomctl *ctl, const xt_rpc_call *call, void *arg);

/* fn at the leader; while R2 answers -EREMOTE (the leader changed between
 * finding it and the call) it is found again and fn runs again, at most
 * LEADER_TRIES times, with a growing pause. Returns fn's result or the
 * error of finding the leader. */
static int at_leader(struct pomctl *ctl, leader_call_fn fn, void *arg)
{
    for (int attempt = 1;; attempt++) {
        int rc = pomctl_r2_leader(ctl);
        if (rc < 0)
            return rc;
        xt_rpc_call call = pomctl_call(ctl);
        rc = fn(ctl, &call, arg);
        if (rc != -EREMOTE || attempt == LEADER_TRIES)
            return rc;
        xt_sleep_ms(300 * (uint64_t)attempt);
    }
}

static void json_begin(struct pomctl *ctl)
{
    pomctl_json_init(&ctl->js, stdout, true);
    pomctl_json_obj_begin(&ctl->js, NULL);
    pomctl_json_bool(&ctl->js, "ok", true);
}

static void json_end(struct pomctl *ctl)
{
    pomctl_json_obj_end(&ctl->js);
    pomctl_json_finish(&ctl->js);
}

static int oom(void)
{
    fprintf(stderr, "pomctl: out of memory\n");
    return POMCTL_EFAIL;
}

/* Reads the whole view (resolving addresses first). 0 or an exit code. */
static int get_view(struct pomctl *ctl, const char *what, struct xt_view *v)
{
    int code = pomctl_resolve_addrs(ctl);
    if (code)
        return code;
    int rc = pomctl_r2_view(ctl, false, v);
    return rc < 0 ? pomctl_fail(ctl, rc, what, NULL) : 0;
}

static const struct xt_site *find_site(const struct xt_view *v, uint32_t id)
{
    for (size_t i = 0; i < v->nsites; i++)
        if (v->sites[i].id == id)
            return &v->sites[i];
    return NULL;
}

/* ---- ring-1 change ---------------------------------------------------- */

/* Losing MDSL of the running change, and how many of them report no
 * misplaced slice. */
static void ring1_clear(const struct xt_view_ring1 *r, size_t *losing, size_t *clear)
{
    *losing = *clear = 0;
    for (size_t i = 0; i < r->nsites; i++)
        if (r->sites[i].losing) {
            (*losing)++;
            *clear += r->sites[i].has_counts && r->sites[i].misplaced == 0;
        }
}

/* "moving (ring 1 v4 -> v5, 2 of 3 MDSL clear)" into buf. */
static void ring1_line(const struct xt_view_ring1 *r, char *buf, size_t cap)
{
    size_t losing, clear;
    ring1_clear(r, &losing, &clear);
    if (r->phase == XT_RING1_STABLE)
        snprintf(buf, cap, "stable (ring 1 v%llu)", (unsigned long long)r->to_version);
    else
        snprintf(buf, cap, "%s%s (ring 1 v%llu -> v%llu, %zu of %zu MDSL clear)",
                 xt_ring1_phase_name(r->phase), r->walk ? ", walking" : "",
                 (unsigned long long)r->from_version, (unsigned long long)r->to_version, clear,
                 losing);
}

static void ring1_json_head(struct pomctl *ctl, const struct xt_view_ring1 *r)
{
    size_t losing, clear;
    ring1_clear(r, &losing, &clear);
    pomctl_json_str(&ctl->js, "phase", xt_ring1_phase_name(r->phase));
    pomctl_json_u64(&ctl->js, "seq", r->seq);
    pomctl_json_bool(&ctl->js, "walk", r->walk);
    pomctl_json_u64(&ctl->js, "from_version", r->from_version);
    pomctl_json_u64(&ctl->js, "to_version", r->to_version);
    pomctl_json_u64(&ctl->js, "losing", losing);
    pomctl_json_u64(&ctl->js, "clear", clear);
}

/* ring show 1: the change, its MDSL (role, misplaced) and MDS (acks, walks). */
static int show_ring1_change(struct pomctl *ctl, const struct xt_view *v)
{
    const struct xt_view_ring1 *r = v->ring1;
    if (ctl->json) {
        pomctl_json_obj_begin(&ctl->js, "ring1_change");
        ring1_json_head(ctl, r);
        pomctl_json_u64(&ctl->js, "started_ns", r->started_ns);
        pomctl_json_arr_begin(&ctl->js, "sites");
    } else {
        char line[160];
        ring1_line(r, line, sizeof line);
        printf("\nring-1 change: %s, seq %llu\n", line, (unsigned long long)r->seq);
        if (r->phase == XT_RING1_STABLE)
            return POMCTL_OK; /* the table tells only while a change runs */
    }
    static const char *const hdr[] = { "SITE", "TYPE", "ROLE", "ACKED", "WALKED", "MISPLACED",
                                       "PREPARED" };
    pomctl_table *t = ctl->json ? NULL : pomctl_table_new(7, hdr, "rllrlrr");
    if (!ctl->json && !t)
        return oom();
    int err = 0;
    for (size_t i = 0; i < r->nsites; i++) {
        const struct xt_ring1_site *q = &r->sites[i];
        const struct xt_site *s = find_site(v, q->id);
        bool mds = s && s->type == XT_SITE_MDS;
        const char *role = mds ? "-" : q->leaving ? "leaving" : xt_ring1_role_name(q->role);
        if (ctl->json) {
            pomctl_json_obj_begin(&ctl->js, NULL);
            pomctl_json_u64(&ctl->js, "id", q->id);
            pomctl_json_str(&ctl->js, "type", s ? xt_site_type_name(s->type) : NULL);
            pomctl_json_str(&ctl->js, "role", mds ? NULL : role);
            pomctl_json_bool(&ctl->js, "losing", q->losing);
            pomctl_json_bool(&ctl->js, "reports", q->reports);
            if (mds) {
                pomctl_json_u64(&ctl->js, "acked", q->acked);
                pomctl_json_u64(&ctl->js, "walked_ring1", q->walked_v);
                pomctl_json_u64(&ctl->js, "walked_ring0", q->walked_w);
            } else if (q->has_counts) {
                pomctl_json_u64(&ctl->js, "misplaced", q->misplaced);
                pomctl_json_u64(&ctl->js, "prepared", q->prepared);
            }
            pomctl_json_obj_end(&ctl->js);
            continue;
        }
        err |= pomctl_table_row(t);
        err |= pomctl_table_cell(t, "%u", q->id);
        err |= pomctl_table_cell(t, "%s", s ? xt_site_type_name(s->type) : "?");
        err |= pomctl_table_cell(t, "%s%s", role, q->losing ? " (losing)" : "");
        if (!q->reports) {
            for (int k = 0; k < 4; k++)
                err |= pomctl_table_cell(t, "%s", k == 0 ? "no ring-1 fields" : "-");
        } else if (mds) {
            err |= pomctl_table_cell(t, "%llu", (unsigned long long)q->acked);
            err |= pomctl_table_cell(t, "v%llu/w%llu", (unsigned long long)q->walked_v,
                                     (unsigned long long)q->walked_w);
            err |= pomctl_table_cell(t, "-");
            err |= pomctl_table_cell(t, "-");
        } else {
            err |= pomctl_table_cell(t, "-");
            err |= pomctl_table_cell(t, "-");
            err |= pomctl_table_cell(t, "%llu", (unsigned long long)q->misplaced);
            err |= pomctl_table_cell(t, "%llu", (unsigned long long)q->prepared);
        }
    }
    if (ctl->json) {
        pomctl_json_arr_end(&ctl->js);
        pomctl_json_obj_end(&ctl->js);
    } else if (!err && r->nsites) {
        pomctl_table_print(t, stdout, 2);
    }
    pomctl_table_free(t);
    return err ? oom() : POMCTL_OK;
}

/* Why R2 answered -EBUSY to drain/remove of site id: the ring-1 phase and
 * the site's role when it is an MDSL of a ring-1 change, into buf. */
static const char *busy_hint(struct pomctl *ctl, uint32_t id, bool drain, char *buf, size_t cap)
{
    struct xt_view v;
    const char *hint = "the site cannot leave now (the last of its type?); add a site first";
    if (pomctl_r2_view(ctl, false, &v) < 0)
        return hint;
    const struct xt_site *s = find_site(&v, id);
    if (s && s->type == XT_SITE_MDSL && v.ring1 && !drain) {
        const struct xt_view_ring1 *r = v.ring1;
        const char *role = "?";
        for (size_t i = 0; i < r->nsites; i++)
            if (r->sites[i].id == id)
                role = r->sites[i].leaving ? "leaving" : xt_ring1_role_name(r->sites[i].role);
        snprintf(buf, cap,
                 "ring 1 is %s and this MDSL is %s: drain it and remove it once it is "
                 "drained (pomctl ring show 1)",
                 xt_ring1_phase_name(r->phase), role);
        hint = buf;
    }
    xt_view_free(&v);
    return hint;
}

/* ---- status ----------------------------------------------------------- */

#define NTYPES 5  /* index = enum xt_site_type */
#define NSTATES 6 /* index = enum xt_site_state */

/* A site R2 marked for its missing heartbeats (a daemon that died, hangs,
 * or is stopped): seconds since its last heartbeat into *silent_s. */
static bool not_answering(const struct xt_site *s, uint64_t now, double *silent_s)
{
    if (s->state != XT_SITE_TRANSIENT && s->state != XT_SITE_FAILED)
        return false;
    *silent_s = s->last_hb_ns && now > s->last_hb_ns ? (double)(now - s->last_hb_ns) / 1e9 : 0;
    return true;
}

int pomctl_cmd_status(struct pomctl *ctl, int argc, char **argv)
{
    if (argc > 0)
        return pomctl_usage_err(ctl, "status", "status takes no argument ('%s')", argv[0]);
    struct xt_view v;
    int code = get_view(ctl, "status", &v);
    if (code)
        return code;
    size_t by_type[NTYPES] = { 0 }, by_state[NSTATES] = { 0 }, active = 0, not_up = 0;
    for (size_t i = 0; i < v.nsites; i++) {
        const struct xt_site *s = &v.sites[i];
        if (s->type > 0 && s->type < NTYPES)
            by_type[s->type]++;
        if (s->state > 0 && s->state < NSTATES)
            by_state[s->state]++;
        if (s->state == XT_SITE_REMOVED)
            continue; /* left by an administrator: not a fault */
        if (s->type == XT_SITE_CLIENT)
            continue; /* clients come and go: R2 expires a vanished one */
        active++;
        if (s->state != XT_SITE_UP)
            not_up++;
    }
    bool healthy = active > 0 && not_up == 0;
    char verdict[256];
    if (healthy)
        snprintf(verdict, sizeof verdict, "healthy");
    else if (active == 0)
        snprintf(verdict, sizeof verdict, "degraded: no server is registered");
    else
        snprintf(verdict, sizeof verdict, "degraded: %zu of %zu servers not up", not_up, active);
    const char *leader = v.leader[0] ? v.leader : ctl->cur;
    uint64_t now = xt_now_ns();
    double silent;

    if (ctl->json) {
        json_begin(ctl);
        pomctl_json_obj_begin(&ctl->js, "r2");
        pomctl_json_str(&ctl->js, "addr", ctl->cur);
        pomctl_json_str(&ctl->js, "leader", leader);
        pomctl_json_str(&ctl->js, "store", v.store);
        pomctl_json_obj_end(&ctl->js);
        pomctl_json_u64(&ctl->js, "view_version", v.version);
        pomctl_json_obj_begin(&ctl->js, "sites");
        pomctl_json_u64(&ctl->js, "total", v.nsites);
        pomctl_json_obj_begin(&ctl->js, "by_type");
        for (int t = 1; t < NTYPES; t++)
            pomctl_json_u64(&ctl->js, xt_site_type_name(t), by_type[t]);
        pomctl_json_obj_end(&ctl->js);
        pomctl_json_obj_begin(&ctl->js, "by_state");
        for (int s = 1; s < NSTATES; s++)
            pomctl_json_u64(&ctl->js, xt_site_state_name(s), by_state[s]);
        pomctl_json_obj_end(&ctl->js);
        pomctl_json_obj_end(&ctl->js);
        pomctl_json_arr_begin(&ctl->js, "rings");
    } else {
        printf("R2        %s (leader %s, store %s)\n", ctl->cur, leader,
               v.store[0] ? v.store : "?");
        printf("view      version %llu\n", (unsigned long long)v.version);
        if (v.nsites == 0)
            printf("sites     none registered\n");
        else
            printf("sites     %zu:", v.nsites);
        bool any = false;
        for (int t = 1; t < NTYPES && v.nsites; t++)
            if (by_type[t]) {
                printf("%s %zu %s", any ? "," : "", by_type[t], xt_site_type_name(t));
                any = true;
            }
        if (v.nsites)
            printf(" \xe2\x80\x94");
        any = false;
        for (int s = 1; s < NSTATES && v.nsites; s++)
            if (by_state[s]) {
                printf("%s %zu %s", any ? "," : "", by_state[s], xt_site_state_name(s));
                any = true;
            }
        if (v.nsites)
            printf("\n");
    }
    for (size_t i = 0; i < v.nrings; i++) {
        xt_ring *r = NULL;
        int rc = xt_ring_decode(v.rings[i].data, v.rings[i].len, &r);
        uint32_t n = rc == 0 ? xt_ring_nsites(r) : 0;
        uint64_t ver = rc == 0 ? xt_ring_version(r) : v.rings[i].version;
        if (ctl->json) {
            pomctl_json_obj_begin(&ctl->js, NULL);
            pomctl_json_u64(&ctl->js, "ring", v.rings[i].ring);
            pomctl_json_u64(&ctl->js, "version", ver);
            pomctl_json_u64(&ctl->js, "sites", n);
            pomctl_json_bool(&ctl->js, "valid", rc == 0);
            pomctl_json_obj_end(&ctl->js);
        } else {
            printf("ring %u    version %llu, %u site%s (%s)%s\n", v.rings[i].ring,
                   (unsigned long long)ver, n, n == 1 ? "" : "s",
                   v.rings[i].ring == XT_RING_MDS ? "slices -> MDS" : "slices -> MDSL",
                   rc == 0 ? "" : " [cannot decode]");
        }
        xt_ring_free(r);
    }
    if (ctl->json) {
        pomctl_json_arr_end(&ctl->js);
        if (v.ring1) {
            pomctl_json_obj_begin(&ctl->js, "ring1_change");
            ring1_json_head(ctl, v.ring1);
            pomctl_json_obj_end(&ctl->js);
        }
        if (v.has_repl) {
            pomctl_json_obj_begin(&ctl->js, "replicas");
            pomctl_json_u64(&ctl->js, "under_replicated", v.under_replicated);
            pomctl_json_u64(&ctl->js, "mdsl_counted", v.repl_counted);
            pomctl_json_obj_end(&ctl->js);
        }
        pomctl_json_u64(&ctl->js, "fs_count", v.nfs);
        pomctl_json_arr_begin(&ctl->js, "not_answering");
        for (size_t i = 0; i < v.nsites; i++)
            if (not_answering(&v.sites[i], now, &silent)) {
                pomctl_json_obj_begin(&ctl->js, NULL);
                pomctl_json_u64(&ctl->js, "id", v.sites[i].id);
                pomctl_json_str(&ctl->js, "type", xt_site_type_name(v.sites[i].type));
                pomctl_json_str(&ctl->js, "addr", v.sites[i].addr);
                pomctl_json_str(&ctl->js, "state", xt_site_state_name(v.sites[i].state));
                pomctl_json_double(&ctl->js, "silent_s", silent);
                pomctl_json_obj_end(&ctl->js);
            }
        pomctl_json_arr_end(&ctl->js);
        pomctl_json_bool(&ctl->js, "healthy", healthy);
        pomctl_json_str(&ctl->js, "verdict", verdict);
        json_end(ctl);
    } else {
        if (v.ring1 && v.ring1->phase != XT_RING1_STABLE) {
            char line[160];
            ring1_line(v.ring1, line, sizeof line);
            printf("ring 1    %s\n", line);
        }
        if (v.has_repl)
            printf("replicas  under-replicated slices: %llu (%u MDSL counted)\n",
                   (unsigned long long)v.under_replicated, v.repl_counted);
        printf("fs        %zu file system%s\n", v.nfs, v.nfs == 1 ? "" : "s");
        for (size_t i = 0; i < v.nsites && !healthy; i++) {
            const struct xt_site *s = &v.sites[i];
            if (s->state == XT_SITE_UP || s->state == XT_SITE_REMOVED)
                continue;
            printf("          site %u (%s %s) is %s", s->id, xt_site_type_name(s->type),
                   s->addr, xt_site_state_name(s->state));
            if (not_answering(s, now, &silent))
                printf(": not answering for %.0f s", silent);
            printf("\n");
        }
        printf("verdict   %s\n", verdict);
    }
    xt_view_free(&v);
    return healthy ? POMCTL_OK : POMCTL_EDEGRADED;
}

/* ---- sites ------------------------------------------------------------ */

int pomctl_cmd_sites(struct pomctl *ctl, int argc, char **argv)
{
    if (argc > 0)
        return pomctl_usage_err(ctl, "sites", "sites takes no argument ('%s')", argv[0]);
    struct xt_view v;
    int code = get_view(ctl, "sites", &v);
    if (code)
        return code;
    uint64_t now = xt_now_ns();
    if (ctl->json) {
        json_begin(ctl);
        pomctl_json_u64(&ctl->js, "view_version", v.version);
        pomctl_json_arr_begin(&ctl->js, "sites");
        for (size_t i = 0; i < v.nsites; i++) {
            const struct xt_site *s = &v.sites[i];
            pomctl_json_obj_begin(&ctl->js, NULL);
            pomctl_json_u64(&ctl->js, "id", s->id);
            pomctl_json_str(&ctl->js, "type", xt_site_type_name(s->type));
            pomctl_json_str(&ctl->js, "addr", s->addr);
            pomctl_json_str(&ctl->js, "state", xt_site_state_name(s->state));
            pomctl_json_u64(&ctl->js, "capacity", s->capacity);
            pomctl_json_double(&ctl->js, "load", s->load);
            pomctl_json_u64(&ctl->js, "last_heartbeat_ns", s->last_hb_ns);
            if (s->last_hb_ns && now >= s->last_hb_ns)
                pomctl_json_double(&ctl->js, "heartbeat_age_s",
                                   (double)(now - s->last_hb_ns) / 1e9);
            else
                pomctl_json_null(&ctl->js, "heartbeat_age_s");
            if (s->type == XT_SITE_MDS) {
                pomctl_json_u64(&ctl->js, "uuid_lo", s->uuid_lo);
                pomctl_json_u64(&ctl->js, "uuid_hi", s->uuid_hi);
            }
            if (s->fs_name[0])
                pomctl_json_str(&ctl->js, "fs", s->fs_name);
            if (s->metrics[0])
                pomctl_json_str(&ctl->js, "metrics", s->metrics);
            pomctl_json_obj_end(&ctl->js);
        }
        pomctl_json_arr_end(&ctl->js);
        json_end(ctl);
        xt_view_free(&v);
        return POMCTL_OK;
    }
    static const char *const hdr[] = { "ID",   "TYPE", "ADDRESS", "STATE",
                                       "CAPACITY", "LOAD", "HEARTBEAT", "UUIDS" };
    pomctl_table *t = pomctl_table_new(8, hdr, "rllllrrl");
    if (!t) {
        xt_view_free(&v);
        return oom();
    }
    int rc = 0;
    for (size_t i = 0; i < v.nsites && rc == 0; i++) {
        const struct xt_site *s = &v.sites[i];
        char cap[32], age[32];
        rc |= pomctl_table_row(t);
        rc |= pomctl_table_cell(t, "%u", s->id);
        rc |= pomctl_table_cell(t, "%s", xt_site_type_name(s->type));
        rc |= pomctl_table_cell(t, "%s", s->addr);
        rc |= pomctl_table_cell(t, "%s", xt_site_state_name(s->state));
        rc |= pomctl_table_cell(t, "%s",
                                s->capacity ? pomctl_fmt_bytes(s->capacity, cap, sizeof cap) : "-");
        rc |= pomctl_table_cell(t, "%.2f", s->load);
        rc |= pomctl_table_cell(t, "%s", pomctl_fmt_age(now, s->last_hb_ns, age, sizeof age));
        if (s->type == XT_SITE_MDS && s->uuid_hi > s->uuid_lo)
            rc |= pomctl_table_cell(t, "[%llu, %llu)", (unsigned long long)s->uuid_lo,
                                    (unsigned long long)s->uuid_hi);
        else
            rc |= pomctl_table_cell(t, "%s", s->fs_name[0] ? s->fs_name : "-");
    }
    if (rc) {
        pomctl_table_free(t);
        xt_view_free(&v);
        return oom();
    }
    if (v.nsites == 0)
        printf("no site is registered (view version %llu)\n", (unsigned long long)v.version);
    else
        pomctl_table_print(t, stdout, 0);
    pomctl_table_free(t);
    xt_view_free(&v);
    return POMCTL_OK;
}

/* ---- site drain|remove ------------------------------------------------ */

struct site_arg {
    uint32_t id;
    bool drain;
};

static int site_call(struct pomctl *ctl, const xt_rpc_call *call, void *arg)
{
    const struct site_arg *a = arg;
    return a->drain ? xt_r2_site_drain(ctl->pool, call, a->id)
                    : xt_r2_site_remove(ctl->pool, call, a->id);
}

/* Whether the drain of site id is over, by the leader's view *v: the site
 * is gone, is an MDS (it left ring 0 at once), or an MDSL that ring 1
 * marks DRAINED or that sits outside ring 1 with no change running (it
 * held nothing). *line: the drain's state for the progress line. */
static bool drain_over(const struct xt_view *v, uint32_t id, char *line, size_t cap)
{
    const struct xt_site *s = find_site(v, id);
    snprintf(line, cap, "waiting for the ring-1 change");
    if (!s || s->state == XT_SITE_REMOVED || s->type != XT_SITE_MDSL)
        return true;
    const struct xt_view_ring1 *r = v->ring1;
    if (!r)
        return true; /* an R2 without ring-1 changes: drain took it out at once */
    const struct xt_ring1_site *me = NULL;
    for (size_t i = 0; i < r->nsites && !me; i++)
        if (r->sites[i].id == id)
            me = &r->sites[i];
    if (me && me->role == XT_RING1_DRAINED)
        return true;
    if ((!me || me->role == XT_RING1_OUT) && r->phase == XT_RING1_STABLE)
        return true;
    char change[160];
    ring1_line(r, change, sizeof change);
    if (me && me->has_counts)
        snprintf(line, cap, "%s, %llu slices to move", change,
                 (unsigned long long)me->misplaced);
    else
        snprintf(line, cap, "%s", change);
    return false;
}

/* `site drain ID --wait`: polls the leader's view every half second until
 * the drain is over (drain_over), with a progress line on a terminal.
 * 0 or -errno of the view. */
static int drain_wait(struct pomctl *ctl, uint32_t id)
{
    struct pomctl_progress p;
    pomctl_progress_begin(&p, "drain", ctl->json);
    for (;;) {
        struct xt_view v;
        int rc = pomctl_r2_view(ctl, true, &v);
        if (rc < 0) {
            pomctl_progress_end(&p);
            return rc;
        }
        char line[200];
        bool over = drain_over(&v, id, line, sizeof line);
        xt_view_free(&v);
        if (over)
            break;
        if (pomctl_progress_due(&p))
            pomctl_progress_show(&p, "site %u, %s", id, line);
        xt_sleep_ms(500);
    }
    pomctl_progress_end(&p);
    return 0;
}

int pomctl_cmd_site(struct pomctl *ctl, int argc, char **argv)
{
    if (argc >= 1 && !strcmp(argv[0], "stat"))
        return pomctl_site_stat(ctl, argc - 1, argv + 1);
    bool wait = argc == 3 && !strcmp(argv[0], "drain") && !strcmp(argv[2], "--wait");
    if (wait)
        argc = 2;
    if (argc != 2 || (strcmp(argv[0], "drain") && strcmp(argv[0], "remove")))
        return pomctl_usage_err(ctl, "site",
                                "site wants 'drain ID [--wait]', 'remove ID' or 'stat [ID]'");
    char *end = NULL;
    unsigned long id = strtoul(argv[1], &end, 10);
    if (!*argv[1] || *end || id == 0 || id > UINT32_MAX || argv[1][0] == '-')
        return pomctl_usage_err(ctl, "site", "bad site id '%s' (see: pomctl sites)", argv[1]);
    bool drain = !strcmp(argv[0], "drain");
    int code = pomctl_resolve_addrs(ctl);
    if (code)
        return code;
    struct site_arg sa = { (uint32_t)id, drain };
    int rc = at_leader(ctl, site_call, &sa);
    char what[64], busy[200];
    snprintf(what, sizeof what, "site %s %lu", argv[0], id);
    if (rc < 0) {
        const char *hint = NULL;
        if (rc == -ENOENT)
            hint = "no such site (see: pomctl sites)";
        else if (rc == -EBUSY)
            hint = busy_hint(ctl, (uint32_t)id, drain, busy, sizeof busy);
        else if (rc == -EOPNOTSUPP)
            hint = "it is an MDSL in ring 1, which is frozen: slices are stored there and "
                   "not every MDS of ring 0 follows ring-1 changes, so none can move them; "
                   "restart it instead (it keeps its place; docs/pomctl.md)";
        return pomctl_fail(ctl, rc, what, hint);
    }
    if (wait && (rc = drain_wait(ctl, (uint32_t)id)) < 0)
        return pomctl_fail(ctl, rc, what, NULL);
    if (ctl->json) {
        json_begin(ctl);
        pomctl_json_u64(&ctl->js, "site", id);
        pomctl_json_str(&ctl->js, "action", argv[0]);
        if (wait)
            pomctl_json_bool(&ctl->js, "drained", true);
        json_end(ctl);
    } else {
        printf("site %lu %s\n", id,
               wait    ? "drained: its slices moved away and it left the rings"
               : drain ? "is draining: its slices move away, then it leaves the rings"
                       : "removed");
    }
    return POMCTL_OK;
}

/* ---- ring show -------------------------------------------------------- */

static int show_ring(struct pomctl *ctl, const struct xt_view *v, const struct xt_ring_blob *b)
{
    xt_ring *r = NULL;
    int rc = xt_ring_decode(b->data, b->len, &r);
    if (rc < 0) {
        fprintf(stderr, "pomctl: ring %u (version %llu, %u bytes) cannot be decoded: %s\n",
                b->ring, (unsigned long long)b->version, b->len, strerror(-rc));
        if (ctl->json) {
            pomctl_json_obj_begin(&ctl->js, NULL);
            pomctl_json_u64(&ctl->js, "ring", b->ring);
            pomctl_json_str(&ctl->js, "error", strerror(-rc));
            pomctl_json_obj_end(&ctl->js);
        }
        return POMCTL_EFAIL;
    }
    uint32_t n = xt_ring_nsites(r);
    unsigned vps = xt_ring_vnodes_per_site(r);
    const char *kind = xt_ring_id(r) == XT_RING_MDS ? "MDS" : "MDSL";
    pomctl_table *t = NULL;
    if (ctl->json) {
        pomctl_json_obj_begin(&ctl->js, NULL);
        pomctl_json_u64(&ctl->js, "ring", xt_ring_id(r));
        pomctl_json_str(&ctl->js, "kind", kind);
        pomctl_json_u64(&ctl->js, "version", xt_ring_version(r));
        pomctl_json_u64(&ctl->js, "vnodes_per_site", vps);
        pomctl_json_u64(&ctl->js, "encoded_bytes", b->len);
        pomctl_json_arr_begin(&ctl->js, "sites");
    } else {
        printf("ring %u (slices -> %s): version %llu, %u site%s, %u vnodes per standard site\n",
               xt_ring_id(r), kind, (unsigned long long)xt_ring_version(r), n,
               n == 1 ? "" : "s", vps);
        static const char *const hdr[] = { "SITE", "ADDRESS", "STATE", "WEIGHT", "VNODES",
                                           "SHARE" };
        if (!(t = pomctl_table_new(6, hdr, "rllrrr"))) {
            xt_ring_free(r);
            return oom();
        }
    }
    int err = 0;
    for (uint32_t k = 0; k < n; k++) {
        uint32_t id, weight;
        xt_ring_site_at(r, k, &id, &weight);
        const struct xt_site *s = find_site(v, id);
        double share = xt_ring_share(r, id);
        unsigned vn = xt_ring_vnodes(vps, weight);
        if (ctl->json) {
            pomctl_json_obj_begin(&ctl->js, NULL);
            pomctl_json_u64(&ctl->js, "id", id);
            pomctl_json_str(&ctl->js, "addr", s ? s->addr : NULL);
            pomctl_json_str(&ctl->js, "state", s ? xt_site_state_name(s->state) : NULL);
            pomctl_json_u64(&ctl->js, "weight", weight);
            pomctl_json_u64(&ctl->js, "vnodes", vn);
            pomctl_json_double(&ctl->js, "share", share);
            pomctl_json_obj_end(&ctl->js);
        } else {
            err |= pomctl_table_row(t);
            err |= pomctl_table_cell(t, "%u", id);
            err |= pomctl_table_cell(t, "%s", s ? s->addr : "?");
            err |= pomctl_table_cell(t, "%s", s ? xt_site_state_name(s->state) : "?");
            err |= pomctl_table_cell(t, "%u", weight);
            err |= pomctl_table_cell(t, "%u", vn);
            err |= pomctl_table_cell(t, "%.2f%%", share * 100.0);
        }
    }
    if (ctl->json) {
        pomctl_json_arr_end(&ctl->js);
        pomctl_json_obj_end(&ctl->js);
    } else if (n > 0 && !err) {
        pomctl_table_print(t, stdout, 2);
    } else if (n == 0) {
        printf("  (no site: nothing can be placed on this ring)\n");
    }
    pomctl_table_free(t);
    xt_ring_free(r);
    return err ? oom() : POMCTL_OK;
}

int pomctl_cmd_ring(struct pomctl *ctl, int argc, char **argv)
{
    if (argc < 1 || strcmp(argv[0], "show") || argc > 2)
        return pomctl_usage_err(ctl, "ring", "ring wants 'show [0|1]'");
    int which = -1;
    if (argc == 2) {
        if (strcmp(argv[1], "0") && strcmp(argv[1], "1"))
            return pomctl_usage_err(ctl, "ring", "ring show wants 0 (MDS) or 1 (MDSL), got '%s'",
                                    argv[1]);
        which = argv[1][0] - '0';
    }
    struct xt_view v;
    int code = get_view(ctl, "ring show", &v);
    if (code)
        return code;
    if (ctl->json) {
        json_begin(ctl);
        pomctl_json_u64(&ctl->js, "view_version", v.version);
        pomctl_json_arr_begin(&ctl->js, "rings");
    }
    int shown = 0;
    code = POMCTL_OK;
    for (size_t i = 0; i < v.nrings; i++) {
        if (which >= 0 && v.rings[i].ring != (uint32_t)which)
            continue;
        if (shown++ && !ctl->json)
            printf("\n");
        int c = show_ring(ctl, &v, &v.rings[i]);
        if (c == 0 && v.rings[i].ring == XT_RING_MDSL && v.ring1 && !ctl->json)
            c = show_ring1_change(ctl, &v);
        if (c)
            code = c;
    }
    if (ctl->json) {
        pomctl_json_arr_end(&ctl->js);
        if (which != XT_RING_MDS && v.ring1 && show_ring1_change(ctl, &v))
            code = POMCTL_EFAIL;
        json_end(ctl);
    }
    if (!shown && !ctl->json)
        printf(which >= 0 ? "R2 has published no ring %d yet\n" : "R2 has published no ring yet\n",
               which);
    xt_view_free(&v);
    return code;
}

/* ---- fs --------------------------------------------------------------- */

bool pomctl_fs_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > XT_FSNAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

static void json_fs(pomctl_json *j, const char *key, const struct xt_fs_info *f)
{
    char when[40];
    pomctl_json_obj_begin(j, key);
    pomctl_json_u64(j, "fsid", f->fsid);
    pomctl_json_str(j, "name", f->name);
    pomctl_json_u64(j, "root_table", f->root_table);
    pomctl_json_u64(j, "files", f->files);
    pomctl_json_u64(j, "bytes", f->bytes);
    pomctl_json_u64(j, "quota_files", f->quota_files);
    pomctl_json_u64(j, "quota_bytes", f->quota_bytes);
    pomctl_json_u64(j, "mounts", f->mounts);
    pomctl_json_obj_begin(j, "blob");
    pomctl_json_str(j, "backend", f->blob_backend);
    pomctl_json_str(j, "path", f->blob_path);
    pomctl_json_obj_end(j);
    pomctl_json_u64(j, "created_ns", f->created_ns);
    pomctl_json_str(j, "created", pomctl_fmt_time(f->created_ns, when, sizeof when));
    pomctl_json_u64(j, "root_bitmap_bytes", f->root_bitmap_len);
    pomctl_json_obj_end(j);
}

static void print_fs(const struct xt_fs_info *f)
{
    char b[32], when[40];
    printf("fs %s\n", f->name);
    printf("  fsid        %u\n", f->fsid);
    printf("  root table  %llu\n", (unsigned long long)f->root_table);
    printf("  files       %llu (inodes)\n", (unsigned long long)f->files);
    printf("  bytes       %llu (%s)\n", (unsigned long long)f->bytes,
           pomctl_fmt_bytes(f->bytes, b, sizeof b));
    if (f->quota_files)
        printf("  quota files %llu\n", (unsigned long long)f->quota_files);
    else
        printf("  quota files none\n");
    if (f->quota_bytes)
        printf("  quota bytes %llu (%s)\n", (unsigned long long)f->quota_bytes,
               pomctl_fmt_bytes(f->quota_bytes, b, sizeof b));
    else
        printf("  quota bytes none\n");
    printf("  mounts      %u\n", f->mounts);
    printf("  blob        %s%s%s\n", f->blob_backend[0] ? f->blob_backend : "-",
           f->blob_path[0] ? " " : "", f->blob_path);
    printf("  created     %s\n", pomctl_fmt_time(f->created_ns, when, sizeof when));
}

struct fs_create_arg {
    const char *name, *backend, *path;
    struct xt_fs_info *out;
};

static int fs_create_call(struct pomctl *ctl, const xt_rpc_call *call, void *arg)
{
    const struct fs_create_arg *a = arg;
    memset(a->out, 0, sizeof *a->out);
    return xt_r2_fs_create(ctl->pool, call, a->name, a->backend, a->path, a->out);
}

/* The rados backend's settings (--rados-pool, --ceph-conf, --rados-id,
 * --rados-keyring) as its blob path "pool=P[,conf=F][,id=I][,keyring=K]"
 * (docs/format-blob.md "rados"). 0, or a usage error. */
static int rados_settings(struct pomctl *ctl, const char *const v[4], char *out, size_t cap)
{
    static const char *const key[4] = { "pool", "conf", "id", "keyring" };
    size_t len = 0;
    out[0] = '\0';
    for (int k = 0; k < 4; k++) {
        if (!*v[k])
            continue;
        if (strchr(v[k], ','))
            return pomctl_usage_err(ctl, "fs", "rados %s '%s' must not hold a ','", key[k], v[k]);
        int n = snprintf(out + len, cap - len, "%s%s=%s", len ? "," : "", key[k], v[k]);
        if (n < 0 || (size_t)n >= cap - len)
            return pomctl_usage_err(ctl, "fs", "the rados settings are too long");
        len += (size_t)n;
    }
    if (!*v[0])
        return pomctl_usage_err(ctl, "fs", "--blob-backend rados wants --rados-pool POOL");
    return 0;
}

static int fs_create(struct pomctl *ctl, int argc, char **argv)
{
    const char *name = NULL, *backend = "", *path = "", *copies = NULL;
    const char *rados[4] = { "", "", "", "" }; /* pool, conf, id, keyring */
    char rpath[XT_PATH_MAX];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char **dst = NULL;
        size_t n = 0;
        if (!strncmp(a, "--blob-backend", n = 14))
            dst = &backend;
        else if (!strncmp(a, "--blob-path", n = 11))
            dst = &path;
        else if (!strncmp(a, "--rados-pool", n = 12))
            dst = &rados[0];
        else if (!strncmp(a, "--ceph-conf", n = 11))
            dst = &rados[1];
        else if (!strncmp(a, "--rados-id", n = 10))
            dst = &rados[2];
        else if (!strncmp(a, "--rados-keyring", n = 15))
            dst = &rados[3];
        else if (!strncmp(a, "--copies", n = 8))
            dst = &copies;
        if (dst && a[n] == '=') {
            *dst = a + n + 1;
        } else if (dst && a[n] == '\0') {
            if (i + 1 >= argc)
                return pomctl_usage_err(ctl, "fs", "%s wants a value", a);
            *dst = argv[++i];
        } else if (a[0] == '-' && a[1] == '-') {
            return pomctl_usage_err(ctl, "fs", "unknown option '%s' for fs create", a);
        } else if (!name) {
            name = a;
        } else {
            return pomctl_usage_err(ctl, "fs", "fs create takes one NAME ('%s'?)", a);
        }
    }
    if (!name)
        return pomctl_usage_err(ctl, "fs", "fs create wants a NAME");
    if (!pomctl_fs_name_ok(name))
        return pomctl_usage_err(ctl, "fs", "bad fs name '%s': 1-%d of [A-Za-z0-9._-]", name,
                                XT_FSNAME_MAX);
    if (*backend && strcmp(backend, "local") && strcmp(backend, "mdsl") &&
        strcmp(backend, "rados"))
        return pomctl_usage_err(ctl, "fs", "--blob-backend wants local, mdsl or rados, got '%s'",
                                backend);
    if (*rados[0] || *rados[1] || *rados[2] || *rados[3]) {
        if (*path || (*backend && strcmp(backend, "rados")))
            return pomctl_usage_err(ctl, "fs", "the --rados-* and --ceph-conf options make a "
                                               "rados blob tier: no --blob-path, no other backend");
        int code = rados_settings(ctl, rados, rpath, sizeof rpath);
        if (code)
            return code;
        backend = "rados";
        path = rpath;
    } else if (!strcmp(backend, "rados") && !*path) {
        return pomctl_usage_err(ctl, "fs", "--blob-backend rados wants --rados-pool POOL");
    }
    if (strlen(path) >= XT_PATH_MAX)
        return pomctl_usage_err(ctl, "fs", "--blob-path is too long");
    /* The mdsl backend's setting rides in the blob path (docs/format-blob.md
     * "mdsl"): "copies=N", or "" for min(3, MDSL in ring 1). */
    char copies_path[32];
    if (copies) {
        uint64_t nc;
        if (xt_parse_u64(copies, 1, 8, &nc))
            return pomctl_usage_err(ctl, "fs", "--copies wants 1..8, got '%s'", copies);
        if (*backend && strcmp(backend, "mdsl"))
            return pomctl_usage_err(ctl, "fs", "--copies is for --blob-backend mdsl");
        if (*path)
            return pomctl_usage_err(ctl, "fs", "--copies and --blob-path exclude each other");
        backend = "mdsl";
        snprintf(copies_path, sizeof copies_path, "copies=%llu", (unsigned long long)nc);
        path = copies_path;
    }
    int code = pomctl_resolve_addrs(ctl);
    if (code)
        return code;
    struct xt_fs_info out;
    memset(&out, 0, sizeof out);
    struct fs_create_arg fa = { name, backend, path, &out };
    int rc = at_leader(ctl, fs_create_call, &fa);
    if (rc < 0) {
        xt_free(out.root_bitmap);
        char what[128];
        snprintf(what, sizeof what, "fs create %s", name);
        return pomctl_fail(ctl, rc, what,
                           rc == -EEXIST   ? "a file system of that name exists (see: pomctl fs list)"
                           : rc == -EINVAL ? "R2 refused the name or blob settings"
                                           : NULL);
    }
    if (ctl->json) {
        json_begin(ctl);
        json_fs(&ctl->js, "fs", &out);
        json_end(ctl);
    } else {
        printf("created ");
        print_fs(&out);
    }
    xt_free(out.root_bitmap);
    return POMCTL_OK;
}

struct fs_list_arg {
    const char *name;
    struct xt_fs_info **fs;
    size_t *n;
};

static int fs_list_call(struct pomctl *ctl, const xt_rpc_call *call, void *arg)
{
    const struct fs_list_arg *a = arg;
    return xt_r2_fs_list(ctl->pool, call, a->name, a->fs, a->n);
}

int pomctl_fs_list(struct pomctl *ctl, const char *name, struct xt_fs_info **fs, size_t *n)
{
    *fs = NULL;
    *n = 0;
    struct fs_list_arg la = { name, fs, n };
    return at_leader(ctl, fs_list_call, &la);
}

/* fs list (name NULL) and fs stat NAME. */
static int fs_list(struct pomctl *ctl, const char *name)
{
    int code = pomctl_resolve_addrs(ctl);
    if (code)
        return code;
    struct xt_fs_info *fs;
    size_t n;
    int rc = pomctl_fs_list(ctl, name, &fs, &n);
    size_t pick = 0; /* fs stat: the entry named, whatever else R2 sent */
    if (rc == 0 && name) {
        while (pick < n && strcmp(fs[pick].name, name))
            pick++;
        if (pick == n)
            rc = -ENOENT;
    }
    if (rc < 0) {
        char what[128];
        snprintf(what, sizeof what, name ? "fs stat %s" : "fs list", name);
        xt_fs_info_free_array(fs, n);
        return pomctl_fail(ctl, rc, what,
                           rc == -ENOENT ? "no file system of that name (see: pomctl fs list)"
                                         : NULL);
    }
    if (ctl->json) {
        json_begin(ctl);
        if (name) {
            json_fs(&ctl->js, "fs", &fs[pick]);
        } else {
            pomctl_json_arr_begin(&ctl->js, "fs");
            for (size_t i = 0; i < n; i++)
                json_fs(&ctl->js, NULL, &fs[i]);
            pomctl_json_arr_end(&ctl->js);
        }
        json_end(ctl);
    } else if (name) {
        print_fs(&fs[pick]);
    } else if (n == 0) {
        printf("no file system yet (create one: pomctl fs create NAME)\n");
    } else {
        static const char *const hdr[] = { "FSID", "NAME", "FILES", "BYTES", "MOUNTS",
                                           "BLOB", "CREATED" };
        pomctl_table *t = pomctl_table_new(7, hdr, "rlrrrll");
        int err = t ? 0 : -ENOMEM;
        for (size_t i = 0; i < n && !err; i++) {
            char b[32], when[40];
            err |= pomctl_table_row(t);
            err |= pomctl_table_cell(t, "%u", fs[i].fsid);
            err |= pomctl_table_cell(t, "%s", fs[i].name);
            err |= pomctl_table_cell(t, "%llu", (unsigned long long)fs[i].files);
            err |= pomctl_table_cell(t, "%s", pomctl_fmt_bytes(fs[i].bytes, b, sizeof b));
            err |= pomctl_table_cell(t, "%u", fs[i].mounts);
            err |= pomctl_table_cell(t, "%s", fs[i].blob_backend);
            err |= pomctl_table_cell(t, "%s", pomctl_fmt_time(fs[i].created_ns, when,
                                                              sizeof when));
        }
        if (!err)
            pomctl_table_print(t, stdout, 0);
        pomctl_table_free(t);
        if (err) {
            xt_fs_info_free_array(fs, n);
            return oom();
        }
    }
    xt_fs_info_free_array(fs, n);
    return POMCTL_OK;
}

struct fs_drop_arg {
    const char *name;
    bool force;
};

static int fs_drop_call(struct pomctl *ctl, const xt_rpc_call *call, void *arg)
{
    const struct fs_drop_arg *a = arg;
    return xt_r2_fs_drop(ctl->pool, call, a->name, a->force);
}

static int fs_drop(struct pomctl *ctl, int argc, char **argv)
{
    const char *name = NULL;
    bool force = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--force"))
            force = true;
        else if (argv[i][0] == '-' && argv[i][1] == '-')
            return pomctl_usage_err(ctl, "fs", "unknown option '%s' for fs drop", argv[i]);
        else if (!name)
            name = argv[i];
        else
            return pomctl_usage_err(ctl, "fs", "fs drop takes one NAME ('%s'?)", argv[i]);
    }
    if (!name)
        return pomctl_usage_err(ctl, "fs", "fs drop wants a NAME");
    if (!pomctl_fs_name_ok(name))
        return pomctl_usage_err(ctl, "fs", "bad fs name '%s'", name);
    int code = pomctl_resolve_addrs(ctl);
    if (code)
        return code;
    struct fs_drop_arg da = { name, force };
    int rc = at_leader(ctl, fs_drop_call, &da);
    if (rc < 0) {
        char what[128];
        snprintf(what, sizeof what, "fs drop %s", name);
        return pomctl_fail(ctl, rc, what,
                           rc == -ENOENT  ? "no file system of that name (see: pomctl fs list)"
                           : rc == -EBUSY ? "it is mounted; unmount it first, or use --force"
                                          : NULL);
    }
    if (ctl->json) {
        json_begin(ctl);
        pomctl_json_str(&ctl->js, "dropped", name);
        pomctl_json_bool(&ctl->js, "force", force);
        json_end(ctl);
    } else {
        printf("dropped fs %s\n", name);
    }
    return POMCTL_OK;
}

static int fs_key(struct pomctl *ctl, int argc, char **argv)
{
    const char *name = NULL, *out = NULL;
    bool rotate = false;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--rotate"))
            rotate = true;
        else if (!strcmp(argv[i], "--out") && i + 1 < argc && argv[i + 1][0])
            out = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1] == '-')
            return pomctl_usage_err(ctl, "fs", "unknown option '%s' for fs key", argv[i]);
        else if (!name)
            name = argv[i];
        else
            return pomctl_usage_err(ctl, "fs", "fs key takes one NAME ('%s'?)", argv[i]);
    }
    if (!name)
        return pomctl_usage_err(ctl, "fs", "fs key wants a NAME");
    if (!pomctl_fs_name_ok(name))
        return pomctl_usage_err(ctl, "fs", "bad fs name '%s'", name);
    /* Rotating is R2's to allow; deriving needs the cluster key here. */
    if (!rotate && (!ctl->has_cred || ctl->cred.role != XT_AUTH_ADMIN)) {
        fprintf(stderr, "pomctl: fs key needs the cluster key (--data DIR or --key-file)\n");
        return POMCTL_EUSAGE;
    }
    int code = pomctl_resolve_addrs(ctl);
    if (code)
        return code;
    struct xt_fs_info f, *fs = NULL;
    size_t n = 0;
    memset(&f, 0, sizeof f);
    int rc;
    if (rotate) {
        for (int attempt = 1;; attempt++) {
            if ((rc = pomctl_r2_leader(ctl)) < 0)
                break;
            xt_rpc_call call = pomctl_call(ctl);
            rc = xt_r2_fs_rotate_key(ctl->pool, &call, name, &f);
            xt_free(f.root_bitmap);
            f.root_bitmap = NULL;
            if (rc != -EREMOTE || attempt == LEADER_TRIES)
                break;
            xt_sleep_ms(300 * attempt);
        }
    } else if ((rc = pomctl_fs_list(ctl, name, &fs, &n)) == 0) {
        rc = -ENOENT;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(fs[i].name, name)) {
                f = fs[i];
                f.root_bitmap = NULL;
                rc = 0;
            }
    }
    xt_fs_info_free_array(fs, n);
    if (rc < 0) {
        char what[128];
        snprintf(what, sizeof what, "fs key %s", name);
        return pomctl_fail(ctl, rc, what,
                           rc == -ENOENT ? "no file system of that name (see: pomctl fs list)"
                                         : NULL);
    }
    if (!ctl->has_cred || ctl->cred.role != XT_AUTH_ADMIN) {
        fprintf(stderr, "pomctl: fs key needs the cluster key (--data DIR or --key-file)\n");
        return POMCTL_EUSAGE;
    }
    struct xt_auth_cred k = { .role = XT_AUTH_CLIENT, .fsid = (int32_t)f.fsid,
                              .gen = f.key_gen };
    xt_auth_client_key(ctl->cred.key, k.fsid, k.gen, k.key);
    char hex[2 * XT_AUTH_KEY_LEN + 1];
    for (int i = 0; i < XT_AUTH_KEY_LEN; i++)
        snprintf(hex + 2 * i, 3, "%02x", k.key[i]);
    if (out && (rc = xt_auth_save(out, &k, 1)) < 0) {
        fprintf(stderr, "pomctl: cannot write %s: %s\n", out, strerror(-rc));
        return POMCTL_EFAIL;
    }
    if (ctl->json) {
        json_begin(ctl);
        pomctl_json_str(&ctl->js, "fs", name);
        pomctl_json_i64(&ctl->js, "fsid", f.fsid);
        pomctl_json_i64(&ctl->js, "generation", (int64_t)f.key_gen);
        if (out)
            pomctl_json_str(&ctl->js, "file", out);
        else
            pomctl_json_str(&ctl->js, "key", hex);
        json_end(ctl);
    } else if (out) {
        printf("client key of fs %s (fsid %u, generation %llu) written to %s\n", name, f.fsid,
               (unsigned long long)f.key_gen, out);
    } else {
        printf("client %u %llu %s\n", f.fsid, (unsigned long long)f.key_gen, hex);
    }
    return POMCTL_OK;
}

struct fs_quota_arg {
    const char *name;
    uint64_t files, bytes;
    struct xt_fs_info out;
};

static int fs_quota_call(struct pomctl *ctl, const xt_rpc_call *call, void *arg)
{
    struct fs_quota_arg *a = arg;
    xt_free(a->out.root_bitmap);
    return xt_r2_fs_quota(ctl->pool, call, a->name, a->files, a->bytes, &a->out);
}

/* A count: decimal digits, at most INT64_MAX. */
static bool parse_count(const char *s, uint64_t *v)
{
    char *end = NULL;
    if (!s[0] || s[0] < '0' || s[0] > '9')
        return false;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end || x > INT64_MAX)
        return false;
    *v = x;
    return true;
}

static int fs_quota(struct pomctl *ctl, int argc, char **argv)
{
    struct fs_quota_arg qa = { .name = NULL };
    bool has_files = false, has_bytes = false;
    for (int i = 0; i < argc; i++) {
        if ((!strcmp(argv[i], "--bytes") || !strcmp(argv[i], "--inodes")) && i + 1 < argc) {
            bool bytes = !strcmp(argv[i], "--bytes");
            if (!parse_count(argv[i + 1], bytes ? &qa.bytes : &qa.files))
                return pomctl_usage_err(ctl, "fs", "%s wants a count (0: none), not '%s'",
                                        argv[i], argv[i + 1]);
            *(bytes ? &has_bytes : &has_files) = true;
            i++;
        } else if (argv[i][0] == '-' && argv[i][1] == '-')
            return pomctl_usage_err(ctl, "fs", "unknown option '%s' for fs quota", argv[i]);
        else if (!qa.name)
            qa.name = argv[i];
        else
            return pomctl_usage_err(ctl, "fs", "fs quota takes one NAME ('%s'?)", argv[i]);
    }
    if (!qa.name)
        return pomctl_usage_err(ctl, "fs", "fs quota wants a NAME");
    if (!pomctl_fs_name_ok(qa.name))
        return pomctl_usage_err(ctl, "fs", "bad fs name '%s'", qa.name);
    int code = pomctl_resolve_addrs(ctl);
    if (code)
        return code;
    if (!has_files || !has_bytes) {
        /* One of them given: the other keeps its value. */
        struct xt_fs_info *fs = NULL;
        size_t n = 0;
        int rc = pomctl_fs_list(ctl, qa.name, &fs, &n);
        if (rc == 0 && n == 1) {
            if (!has_files)
                qa.files = fs[0].quota_files;
            if (!has_bytes)
                qa.bytes = fs[0].quota_bytes;
        }
        xt_fs_info_free_array(fs, n);
        if (rc < 0 || n != 1)
            return pomctl_fail(ctl, rc < 0 ? rc : -ENOENT, "fs quota",
                               "no file system of that name (see: pomctl fs list)");
    }
    memset(&qa.out, 0, sizeof qa.out);
    int rc = at_leader(ctl, fs_quota_call, &qa);
    xt_free(qa.out.root_bitmap);
    qa.out.root_bitmap = NULL;
    if (rc < 0) {
        char what[128];
        snprintf(what, sizeof what, "fs quota %s", qa.name);
        return pomctl_fail(ctl, rc, what,
                           rc == -ENOENT ? "no file system of that name (see: pomctl fs list)"
                                         : NULL);
    }
    if (ctl->json) {
        json_begin(ctl);
        json_fs(&ctl->js, "fs", &qa.out);
        json_end(ctl);
    } else {
        print_fs(&qa.out);
    }
    return POMCTL_OK;
}

int pomctl_cmd_fs(struct pomctl *ctl, int argc, char **argv)
{
    if (argc < 1)
        return pomctl_usage_err(ctl, "fs", "fs wants create, list, stat, quota, drop or key");
    const char *sub = argv[0];
    if (!strcmp(sub, "create"))
        return fs_create(ctl, argc - 1, argv + 1);
    if (!strcmp(sub, "drop"))
        return fs_drop(ctl, argc - 1, argv + 1);
    if (!strcmp(sub, "key"))
        return fs_key(ctl, argc - 1, argv + 1);
    if (!strcmp(sub, "quota"))
        return fs_quota(ctl, argc - 1, argv + 1);
    if (!strcmp(sub, "list")) {
        if (argc != 1)
            return pomctl_usage_err(ctl, "fs", "fs list takes no argument");
        return fs_list(ctl, NULL);
    }
    if (!strcmp(sub, "stat")) {
        if (argc != 2)
            return pomctl_usage_err(ctl, "fs", "fs stat wants one NAME");
        if (!pomctl_fs_name_ok(argv[1]))
            return pomctl_usage_err(ctl, "fs", "bad fs name '%s'", argv[1]);
        return fs_list(ctl, argv[1]);
    }
    return pomctl_usage_err(ctl, "fs", "unknown fs subcommand '%s'", sub);
}
