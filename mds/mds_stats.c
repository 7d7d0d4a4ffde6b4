/*
 * mds_stats.c -- lock-free counters and log-linear latency histograms.
 *
 * Every field is a relaxed atomic: a sample is a handful of independent
 * increments, and readers accept a summary that lags by the samples in
 * flight (mds_stats.h, invariant 1). Percentiles are computed from the
 * buckets, never from `count`, so a reader racing a recorder still walks a
 * self-consistent total.
 */
#include "mds_stats.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "xt_common.h"

struct mds_hist {
    _Atomic uint64_t count, errors, sum;
    _Atomic uint64_t min, max; /* min is UINT64_MAX until the first sample */
    _Atomic uint64_t bucket[MDS_STATS_BUCKETS];
};

struct mds_stats {
    struct mds_hist op[MDS_OP__COUNT];
    _Atomic uint64_t ctr[MDS_CTR__COUNT];
};

static const char *const op_names[MDS_OP__COUNT] = {
    "create", "lookup", "update", "delete", "list", "sync",
    "load", "prepare", "commit", "group", "split", "batch",
};

/* Every counter's name (the SIGHUP report, JSON, /metrics as
 * pom_mds_NAME_total) and its /metrics help, one table. */
static const struct ctr_desc {
    const char *name, *help;
} ctrs[MDS_CTR__COUNT] = {
    { "groups_committed", "Commit groups committed to the MDSLs." },
    { "groups_aborted", "Commit groups aborted." },
    { "groups_empty", "Commit groups closed with nothing to write." },
    { "records_image", "Slice image records written." },
    { "records_delta", "Slice delta records written." },
    { "image_bytes", "Bytes of slice images written." },
    { "delta_bytes", "Bytes of slice deltas written." },
    { "sync_calls", "Waits for a commit (sync)." },
    { "early_closes", "Groups closed early by a sync or the dirty-bytes bound." },
    { "lazy_snapshots", "Copy-on-write snapshots taken by a next-group writer." },
    { "cache_hits", "Slice cache hits." },
    { "cache_misses", "Slice cache misses (loads)." },
    { "cache_load_waits", "Getters that waited for another's load." },
    { "cache_evictions", "Slices evicted from the cache." },
    { "cache_pressure", "Evictions that asked the group for a commit." },
    { "recover_commits", "In-doubt transactions committed by recovery." },
    { "recover_aborts", "In-doubt transactions aborted by recovery." },
    { "requests", "xTable requests received (ops, lists)." },
    { "forwards", "Requests forwarded to the MDS owning their slice." },
    { "forwards_looped", "Requests that arrived with 2 or more hops." },
    { "forward_errors", "Forwards that failed (transport, hop limit)." },
    { "remote_answers", "Requests answered here for a forwarding MDS." },
    { "gossip_rounds", "Bitmap gossip messages sent." },
    { "gossip_useful_rounds", "Gossip rounds the peer learnt something from." },
    { "gossip_splits_learnt", "Split bits learnt from gossip." },
    { "handovers", "Split children handed to their owner." },
    { "splits_sent_home", "Split bits sent to a table's home." },
    { "releases", "Slices released to their new owner." },
    { "release_waits", "Loads told to wait: an old holder not done." },
    { "slices_moved", "Slices let go by the sweep after a ring-0 change." },
    { "xact_commits", "Cross-MDS batches committed (coordinator)." },
    { "xact_aborts", "Cross-MDS batches aborted after a prepare." },
    { "xact_prepares", "Cross-MDS prepares applied here (participant)." },
    { "xact_resolved", "Pending rows settled by the resolver." },
    { "xact_rollbacks", "Pending rows rolled back." },
    { "xact_aborts_dropped", "ABORT rows the coordinator removed again." },
    { "xact_aborts_gc", "ABORT rows of gone coordinator incarnations removed." },
    { "xact_splits", "Batches split because their parents sat elsewhere." },
    { "slice_absent", "Loads of a slice its MDSL lacks (a split not committed yet)." },
    { "moves", "Ring-1 moves committed." },
    { "move_bytes", "Image bytes of ring-1 moves." },
    { "moved_waits", "Loads told to wait: only a MOVED tombstone." },
    { "move_loads", "Slices the mover loaded to move." },
    { "walk_passes", "Full passes of the mover over the losing MDSL." },
    { "move_aborts", "Ring-1 moves in a group that aborted." },
    { "rmu_queued", "RMU outbox rows written." },
    { "rmu_delivered", "RMU outbox rows delivered." },
    { "rmu_dropped", "RMU outbox rows dropped: their parent was gone." },
    { "sys_reloads", "Slices with system rows reloaded." },
    { "reload_passes", "Reload passes over every MDSL's listing." },
    { "reload_errors", "Reload listing or load failures." },
    { "folds", "Idle slices given a fold image." },
    { "replica_fallbacks", "Slice loads answered by a later MDSL replica." },
    { "xact_op_by_op", "Batches answered -EXDEV: the client runs them op by op." },
};

const char *mds_stats_op_name(enum mds_op op)
{
    return (unsigned)op < MDS_OP__COUNT ? op_names[op] : "?";
}

const char *mds_stats_ctr_name(enum mds_ctr ctr)
{
    return (unsigned)ctr < MDS_CTR__COUNT ? ctrs[ctr].name : "?";
}

const char *mds_stats_ctr_help(enum mds_ctr ctr)
{
    return (unsigned)ctr < MDS_CTR__COUNT ? ctrs[ctr].help : "?";
}

mds_stats *mds_stats_new(void)
{
    mds_stats *st = xt_calloc(1, sizeof *st);
    if (st)
        mds_stats_reset(st);
    return st;
}

void mds_stats_free(mds_stats *st)
{
    xt_free(st);
}

void mds_stats_reset(mds_stats *st)
{
    for (unsigned i = 0; i < MDS_OP__COUNT; i++) {
        struct mds_hist *h = &st->op[i];
        atomic_store_explicit(&h->count, 0, memory_order_relaxed);
        atomic_store_explicit(&h->errors, 0, memory_order_relaxed);
        atomic_store_explicit(&h->sum, 0, memory_order_relaxed);
        atomic_store_explicit(&h->min, UINT64_MAX, memory_order_relaxed);
        atomic_store_explicit(&h->max, 0, memory_order_relaxed);
        for (unsigned b = 0; b < MDS_STATS_BUCKETS; b++)
            atomic_store_explicit(&h->bucket[b], 0, memory_order_relaxed);
    }
    for (unsigned i = 0; i < MDS_CTR__COUNT; i++)
        atomic_store_explicit(&st->ctr[i], 0, memory_order_relaxed);
}

unsigned mds_stats_bucket(uint64_t v)
{
    if (v < MDS_STATS_SUB)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= SUB_BITS */
    unsigned shift = e - MDS_STATS_SUB_BITS;
    unsigned sub = (unsigned)(v >> shift) & (MDS_STATS_SUB - 1);
    return MDS_STATS_SUB + shift * MDS_STATS_SUB + sub;
}

void mds_stats_bucket_range(unsigned b, uint64_t *lo, uint64_t *hi)
{
    if (b < MDS_STATS_SUB) {
        *lo = *hi = b;
        return;
    }
    unsigned shift = (b - MDS_STATS_SUB) / MDS_STATS_SUB;
    unsigned sub = (b - MDS_STATS_SUB) % MDS_STATS_SUB;
    *lo = (uint64_t)(MDS_STATS_SUB + sub) << shift;
    *hi = *lo + ((UINT64_C(1) << shift) - 1);
}

static void atomic_min(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v < cur &&
           !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

static void atomic_max(_Atomic uint64_t *a, uint64_t v)
{
    uint64_t cur = atomic_load_explicit(a, memory_order_relaxed);
    while (v > cur &&
           !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

void mds_stats_record(mds_stats *st, enum mds_op op, uint64_t ns, int rc)
{
    if (!st || (unsigned)op >= MDS_OP__COUNT)
        return;
    struct mds_hist *h = &st->op[op];
    atomic_fetch_add_explicit(&h->bucket[mds_stats_bucket(ns)], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, ns, memory_order_relaxed);
    if (rc < 0)
        atomic_fetch_add_explicit(&h->errors, 1, memory_order_relaxed);
    atomic_min(&h->min, ns);
    atomic_max(&h->max, ns);
}

void mds_stats_add(mds_stats *st, enum mds_ctr ctr, uint64_t n)
{
    if (st && (unsigned)ctr < MDS_CTR__COUNT)
        atomic_fetch_add_explicit(&st->ctr[ctr], n, memory_order_relaxed);
}

uint64_t mds_stats_counter(const mds_stats *st, enum mds_ctr ctr)
{
    if (!st || (unsigned)ctr >= MDS_CTR__COUNT)
        return 0;
    return atomic_load_explicit(&((mds_stats *)st)->ctr[ctr], memory_order_relaxed);
}

/* Quantile from a snapshot of the buckets (see invariant 2). */
static uint64_t hist_quantile(const uint64_t *snap, uint64_t total, uint64_t mn,
                              uint64_t mx, double q)
{
    if (total == 0)
        return 0;
    if (q <= 0)
        q = 1e-12;
    if (q > 1)
        q = 1;
    double r = q * (double)total;
    uint64_t rank = (uint64_t)r;
    if ((double)rank < r)
        rank++;
    if (rank < 1)
        rank = 1;
    if (rank > total)
        rank = total;
    uint64_t cum = 0;
    for (unsigned b = 0; b < MDS_STATS_BUCKETS; b++) {
        cum += snap[b];
        if (cum >= rank) {
            uint64_t lo, hi;
            mds_stats_bucket_range(b, &lo, &hi);
            uint64_t v = lo + (hi - lo) / 2;
            /* The true sample is inside [lo, hi] and inside [min, max]. */
            if (v < mn)
                v = mn;
            if (v > mx)
                v = mx;
            return v;
        }
    }
    return mx;
}

struct hist_snap {
    uint64_t b[MDS_STATS_BUCKETS];
    uint64_t total, errors, sum, min, max;
};

static void hist_take(const mds_stats *st, enum mds_op op, struct hist_snap *s)
{
    struct mds_hist *h = &((mds_stats *)st)->op[op];
    s->total = 0;
    for (unsigned b = 0; b < MDS_STATS_BUCKETS; b++) {
        s->b[b] = atomic_load_explicit(&h->bucket[b], memory_order_relaxed);
        s->total += s->b[b];
    }
    s->errors = atomic_load_explicit(&h->errors, memory_order_relaxed);
    s->sum = atomic_load_explicit(&h->sum, memory_order_relaxed);
    s->min = atomic_load_explicit(&h->min, memory_order_relaxed);
    s->max = atomic_load_explicit(&h->max, memory_order_relaxed);
    if (s->total == 0)
        s->min = s->max = 0;
}

void mds_stats_cumulative(const mds_stats *st, enum mds_op op, const uint64_t *le, size_t n,
                          uint64_t *cum, uint64_t *count, uint64_t *sum_ns)
{
    memset(cum, 0, n * sizeof *cum);
    *count = *sum_ns = 0;
    if (!st || (unsigned)op >= MDS_OP__COUNT)
        return;
    struct mds_hist *h = &((mds_stats *)st)->op[op];
    size_t i = 0;
    uint64_t total = 0;
    for (unsigned b = 0; b < MDS_STATS_BUCKETS; b++) {
        uint64_t k = atomic_load_explicit(&h->bucket[b], memory_order_relaxed);
        if (!k)
            continue;
        uint64_t lo, hi;
        mds_stats_bucket_range(b, &lo, &hi);
        for (; i < n && hi > le[i]; i++)
            cum[i] = total; /* buckets ascend: every later one is over le[i] too */
        total += k;
    }
    for (; i < n; i++)
        cum[i] = total;
    *count = total; /* from the buckets, so cum[n-1] <= count while recorders run */
    *sum_ns = atomic_load_explicit(&h->sum, memory_order_relaxed);
}

uint64_t mds_stats_errors(const mds_stats *st, enum mds_op op)
{
    if (!st || (unsigned)op >= MDS_OP__COUNT)
        return 0;
    return atomic_load_explicit(&((mds_stats *)st)->op[op].errors, memory_order_relaxed);
}

uint64_t mds_stats_percentile(const mds_stats *st, enum mds_op op, double q)
{
    if (!st || (unsigned)op >= MDS_OP__COUNT)
        return 0;
    struct hist_snap *s = xt_malloc(sizeof *s);
    if (!s)
        return 0;
    hist_take(st, op, s);
    uint64_t v = hist_quantile(s->b, s->total, s->min, s->max, q);
    xt_free(s);
    return v;
}

void mds_stats_summary(const mds_stats *st, enum mds_op op, struct mds_stats_summary *out)
{
    memset(out, 0, sizeof *out);
    if (!st || (unsigned)op >= MDS_OP__COUNT)
        return;
    struct hist_snap *s = xt_malloc(sizeof *s);
    if (!s)
        return;
    hist_take(st, op, s);
    out->count = s->total;
    out->errors = s->errors;
    out->mean_ns = s->total ? s->sum / s->total : 0;
    out->min_ns = s->min;
    out->max_ns = s->max;
    out->p50_ns = hist_quantile(s->b, s->total, s->min, s->max, 0.50);
    out->p90_ns = hist_quantile(s->b, s->total, s->min, s->max, 0.90);
    out->p99_ns = hist_quantile(s->b, s->total, s->min, s->max, 0.99);
    xt_free(s);
}

/* snprintf-style appender: counts every byte, writes what fits. */
struct out {
    char *buf;
    size_t cap, len;
};

__attribute__((format(printf, 2, 3)))
static void outf(struct out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->cap ? o->cap - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

static size_t out_end(struct out *o)
{
    if (o->cap)
        o->buf[o->len < o->cap ? o->len : o->cap - 1] = '\0';
    return o->len;
}

size_t mds_stats_dump_text(const mds_stats *st, char *buf, size_t cap)
{
    struct out o = { buf, cap, 0 };
    outf(&o, "%-8s %10s %8s %10s %10s %10s %10s %10s\n", "op", "count", "errors",
         "mean_us", "p50_us", "p90_us", "p99_us", "max_us");
    for (unsigned i = 0; i < MDS_OP__COUNT; i++) {
        struct mds_stats_summary s;
        mds_stats_summary(st, (enum mds_op)i, &s);
        if (!s.count)
            continue;
        outf(&o, "%-8s %10llu %8llu %10.1f %10.1f %10.1f %10.1f %10.1f\n", op_names[i],
             (unsigned long long)s.count, (unsigned long long)s.errors, s.mean_ns / 1e3,
             s.p50_ns / 1e3, s.p90_ns / 1e3, s.p99_ns / 1e3, s.max_ns / 1e3);
    }
    for (unsigned i = 0; i < MDS_CTR__COUNT; i++) {
        uint64_t v = mds_stats_counter(st, (enum mds_ctr)i);
        if (v)
            outf(&o, "%s %llu\n", ctrs[i].name, (unsigned long long)v);
    }
    return out_end(&o);
}

size_t mds_stats_dump_json(const mds_stats *st, char *buf, size_t cap)
{
    struct out o = { buf, cap, 0 };
    outf(&o, "{\"ops\":{");
    bool first = true;
    for (unsigned i = 0; i < MDS_OP__COUNT; i++) {
        struct mds_stats_summary s;
        mds_stats_summary(st, (enum mds_op)i, &s);
        outf(&o,
             "%s\"%s\":{\"count\":%llu,\"errors\":%llu,\"mean_ns\":%llu,\"p50_ns\":%llu,"
             "\"p90_ns\":%llu,\"p99_ns\":%llu,\"max_ns\":%llu}",
             first ? "" : ",", op_names[i], (unsigned long long)s.count,
             (unsigned long long)s.errors, (unsigned long long)s.mean_ns,
             (unsigned long long)s.p50_ns, (unsigned long long)s.p90_ns,
             (unsigned long long)s.p99_ns, (unsigned long long)s.max_ns);
        first = false;
    }
    outf(&o, "},\"counters\":{");
    for (unsigned i = 0; i < MDS_CTR__COUNT; i++)
        outf(&o, "%s\"%s\":%llu", i ? "," : "", ctrs[i].name,
             (unsigned long long)mds_stats_counter(st, (enum mds_ctr)i));
    outf(&o, "}}");
    return out_end(&o);
}

size_t mds_stats_dump_hist(const mds_stats *st, enum mds_op op, char *buf, size_t cap)
{
    struct out o = { buf, cap, 0 };
    if (st && (unsigned)op < MDS_OP__COUNT) {
        struct mds_hist *h = &((mds_stats *)st)->op[op];
        for (unsigned b = 0; b < MDS_STATS_BUCKETS; b++) {
            uint64_t n = atomic_load_explicit(&h->bucket[b], memory_order_relaxed);
            if (!n)
                continue;
            uint64_t lo, hi;
            mds_stats_bucket_range(b, &lo, &hi);
            outf(&o, "%s%llu:%llu", o.len ? " " : "", (unsigned long long)lo,
                 (unsigned long long)n);
        }
    }
    return out_end(&o);
}
