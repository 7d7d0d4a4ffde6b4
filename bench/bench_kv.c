/*
 * bench_kv.c -- the key/value API of libpomegranate (pom_kv_put/get/delete
 * of 1 KB values) against LevelDB in this process, same threads, same keys,
 * in one run. Redis is measured by run.sh with redis-benchmark at the same
 * concurrency (-c THREADS, no pipelining) and joined in the report.
 * With --depth D > 1 each thread sends its operations D at a time as one
 * pom_kv_batch (docs/client.md "Key/value batches"), beside
 * redis-benchmark -P D (D commands in flight per client, sent together,
 * their replies awaited together: the same pipelining); LevelDB, which has
 * no round trip to save, is left out.
 *
 *   bench_kv [--quick] [--mds HOST:PORT --fsid N] [-t THREADS] [-n OPS]
 *            [--size BYTES] [--depth D] [--label L] [--json FILE] [--no-leveldb]
 *
 * Without --mds it starts its own pom-mdsl + pom-mds (found as bench_mds
 * finds them: $POM_BIN_DIR, or ../mdsl and ../mds next to this binary) in a
 * temporary folder and stops them by pid at the end.
 *
 * Invariants:
 *  (1) Each of the T threads owns the keys "k<thread>.<i>": phases never
 *      contend on one key, as redis-benchmark's random keys rarely do.
 *  (2) Every get checks the length of the value it got, and every
 *      operation's error fails the run (exit 1): a Pomegranate failure is a
 *      failure of the benchmark, never a slow result.
 *  (3) No operation asks for durability (no POM_KV_SYNC, LevelDB sync=false,
 *      Redis without appendfsync always): all three acknowledge from memory
 *      with a log behind.
 */
#include "bench_util.h"
#include "xt_common.h"
#include "pom_cluster.h"
#include "pom_proc.h"
#include "pomegranate.h"

#include <errno.h>
#include <getopt.h>
#include <leveldb/c.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { KP_PUT, KP_GET, KP_DEL, KP_N };
static const char *const kp_name[KP_N] = { "put", "get", "delete" };

static struct {
    const char *mds, *label, *json;
    uint32_t fsid;
    uint64_t threads, ops, size, depth;
    bool leveldb;
} opt = { .label = "pomegranate", .fsid = 1, .threads = 1, .ops = 50000, .size = 1000,
          .depth = 1, .leveldb = true };

struct worker {
    pthread_t th;
    unsigned id;
    int phase;
    pom_kv *kv;
    leveldb_t *db;
    bench_lat *lat;
    uint64_t t0, t1;
    int err;
    char msg[200];
};

static int pom_op(struct worker *w, int ph, const char *key, size_t klen, const char *val)
{
    if (ph == KP_PUT)
        return pom_kv_put(w->kv, key, klen, val, opt.size, 0);
    if (ph == KP_DEL)
        return pom_kv_delete(w->kv, key, klen, POM_KV_ANY_VERSION);
    void *v = NULL;
    size_t vlen = 0;
    uint64_t ver;
    int rc = pom_kv_get(w->kv, key, klen, &v, &vlen, &ver);
    pom_free(v);
    return rc ? rc : vlen == opt.size ? 0 : -EIO;
}

static int ldb_op(struct worker *w, int ph, const char *key, size_t klen, const char *val,
                  leveldb_writeoptions_t *wo, leveldb_readoptions_t *ro)
{
    char *err = NULL;
    if (ph == KP_PUT)
        leveldb_put(w->db, wo, key, klen, val, opt.size, &err);
    else if (ph == KP_DEL)
        leveldb_delete(w->db, wo, key, klen, &err);
    else {
        size_t vlen = 0;
        char *v = leveldb_get(w->db, ro, key, klen, &vlen, &err);
        int ok = v && vlen == opt.size;
        leveldb_free(v);
        if (!err && !ok)
            return -EIO;
    }
    if (err) {
        leveldb_free(err);
        return -EIO;
    }
    return 0;
}

/* Keys [i, i + n) of thread w as one batch of phase ph: 0 or -errno (w->msg
 * says which op failed). Latency: the batch's, once per batch. */
static int pom_batch(struct worker *w, pom_kv_batch *b, uint64_t i, uint64_t n,
                     char (*keys)[64], const char *val)
{
    pom_kv_batch_reset(b);
    int rc = 0;
    for (uint64_t j = 0; j < n && rc == 0; j++) {
        size_t klen = (size_t)snprintf(keys[j], 64, "k%u.%llu", w->id,
                                       (unsigned long long)(i + j));
        rc = w->phase == KP_PUT   ? pom_kv_batch_put(b, keys[j], klen, val, opt.size, 0)
             : w->phase == KP_DEL ? pom_kv_batch_delete(b, keys[j], klen, POM_KV_ANY_VERSION)
                                  : pom_kv_batch_get(b, keys[j], klen);
    }
    if (rc == 0)
        rc = pom_kv_batch_submit(b);
    for (uint64_t j = 0; j < n && rc == 0; j++) {
        size_t vlen = 0;
        rc = pom_kv_batch_result(b, j, NULL, &vlen, NULL);
        if (rc == 0 && w->phase == KP_GET && vlen != opt.size)
            rc = -EIO;
        if (rc)
            snprintf(w->msg, sizeof w->msg, "%s %s: %s", kp_name[w->phase], keys[j],
                     strerror(-rc));
    }
    if (rc && !w->msg[0])
        snprintf(w->msg, sizeof w->msg, "%s batch: %s", kp_name[w->phase], strerror(-rc));
    return rc;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char key[64];
    char *val = xt_malloc(opt.size ? opt.size : 1);
    if (!val) {
        w->err = -ENOMEM;
        return NULL;
    }
    memset(val, 'v', opt.size);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    uint64_t per = opt.ops / opt.threads;
    pom_kv_batch *b = NULL;
    char (*keys)[64] = NULL;
    if (opt.depth > 1 && !w->db) {
        keys = xt_malloc(opt.depth * sizeof *keys);
        if (!keys || pom_kv_batch_new(w->kv, &b) < 0) {
            w->err = -ENOMEM;
            xt_free(keys);
            xt_free(val);
            return NULL;
        }
    }
    w->t0 = xt_mono_ns();
    for (uint64_t i = 0; b && i < per; i += opt.depth) {
        uint64_t a = xt_mono_ns();
        int rc = pom_batch(w, b, i, XT_MIN(opt.depth, per - i), keys, val);
        if (rc) {
            w->err = rc;
            break;
        }
        bench_lat_add(w->lat, xt_mono_ns() - a);
    }
    for (uint64_t i = 0; !b && i < per; i++) {
        size_t klen = (size_t)snprintf(key, sizeof key, "k%u.%llu", w->id, (unsigned long long)i);
        uint64_t a = xt_mono_ns();
        int rc = w->db ? ldb_op(w, w->phase, key, klen, val, wo, ro)
                       : pom_op(w, w->phase, key, klen, val);
        if (rc) {
            w->err = rc;
            snprintf(w->msg, sizeof w->msg, "%s %s: %s", kp_name[w->phase], key,
                     strerror(-rc));
            break;
        }
        bench_lat_add(w->lat, xt_mono_ns() - a);
    }
    w->t1 = xt_mono_ns();
    pom_kv_batch_free(b);
    xt_free(keys);
    leveldb_writeoptions_destroy(wo);
    leveldb_readoptions_destroy(ro);
    xt_free(val);
    return NULL;
}

/* The three phases on kv (or db when non-NULL). 0 or -1. */
static int run_phases(const char *target, pom_kv *kv, leveldb_t *db)
{
    struct worker *ws = xt_calloc(opt.threads, sizeof *ws);
    bench_lat *lat = bench_lat_new(opt.ops);
    if (!ws || !lat)
        return -1;
    char param[64];
    if (opt.depth > 1)
        snprintf(param, sizeof param, "value=%llu,depth=%llu", (unsigned long long)opt.size,
                 (unsigned long long)opt.depth);
    else
        snprintf(param, sizeof param, "value=%llu", (unsigned long long)opt.size);
    int status = 0;
    for (int ph = 0; ph < KP_N && !status; ph++) {
        bench_lat_reset(lat);
        for (unsigned t = 0; t < opt.threads; t++) {
            ws[t] = (struct worker){ .id = t, .phase = ph, .kv = kv, .db = db, .lat = lat };
            if (pthread_create(&ws[t].th, NULL, worker_main, &ws[t])) {
                fprintf(stderr, "bench_kv: pthread_create failed\n");
                exit(1);
            }
        }
        uint64_t t0 = UINT64_MAX, t1 = 0;
        for (unsigned t = 0; t < opt.threads; t++) {
            pthread_join(ws[t].th, NULL);
            if (ws[t].err && !status) {
                fprintf(stderr, "bench_kv: %s: %s\n", target, ws[t].msg);
                status = -1;
            }
            t0 = ws[t].t0 < t0 ? ws[t].t0 : t0;
            t1 = ws[t].t1 > t1 ? ws[t].t1 : t1;
        }
        if (status)
            break;
        struct bench_result r = {
            .bench = "kv", .target = target, .phase = kp_name[ph], .param = param,
            .procs = (unsigned)opt.threads, .ops = opt.ops / opt.threads * opt.threads,
            .secs = (double)(t1 - t0) / 1e9, .p50_us = bench_lat_pct_us(lat, 50),
            .p99_us = bench_lat_pct_us(lat, 99), .extra = -1,
        };
        bench_util_json(opt.json, &r);
    }
    bench_lat_free(lat);
    xt_free(ws);
    return status;
}

static int run_leveldb(void)
{
    char dir[] = "/tmp/bench_kv_leveldb.XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    leveldb_options_t *o = leveldb_options_create();
    leveldb_options_set_create_if_missing(o, 1);
    char *err = NULL;
    leveldb_t *db = leveldb_open(o, dir, &err);
    int rc = -1;
    if (err) {
        fprintf(stderr, "bench_kv: leveldb_open %s: %s\n", dir, err);
        leveldb_free(err);
    } else {
        rc = run_phases("leveldb", NULL, db);
        leveldb_close(db);
    }
    leveldb_destroy_db(o, dir, &err);
    leveldb_free(err);
    leveldb_options_destroy(o);
    rmdir(dir);
    return rc;
}

static int find_bin(const char *sub, const char *name, char *buf, size_t cap)
{
    const char *env = getenv("POM_BIN_DIR");
    if (env) {
        snprintf(buf, cap, "%s/%s/%s", env, sub, name);
        if (access(buf, X_OK) == 0)
            return 0;
        snprintf(buf, cap, "%s/%s", env, name);
        if (access(buf, X_OK) == 0)
            return 0;
    }
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        snprintf(buf, cap, "%s/../%s/%s", dirname(self), sub, name);
        if (access(buf, X_OK) == 0)
            return 0;
    }
    fprintf(stderr, "bench_kv: cannot find %s (set POM_BIN_DIR)\n", name);
    return -ENOENT;
}

static int run_pom(void)
{
    struct pom_cluster cl;
    bool own = !opt.mds;
    if (own) {
        char mdsl[1100], mds[1100];
        int rc = find_bin("mdsl", "pom-mdsl", mdsl, sizeof mdsl);
        if (!rc)
            rc = find_bin("mds", "pom-mds", mds, sizeof mds);
        if (!rc)
            rc = pom_cluster_init(&cl, "bench-kv");
        if (!rc && (rc = pom_cluster_start_mdsl(&cl, mdsl)) == 0)
            rc = pom_cluster_start_mds(&cl, mds, 1000, NULL);
        if (rc) {
            fprintf(stderr, "bench_kv: cannot start pom-mdsl + pom-mds: %s\n", strerror(-rc));
            if (rc != -ENOENT)
                pom_cluster_destroy(&cl);
            return -1;
        }
        opt.mds = cl.mds_addr;
    }
    pom_fs *fs = NULL;
    pom_kv *kv = NULL;
    int rc = pom_connect_mds(opt.mds, opt.fsid, &fs);
    if (rc)
        fprintf(stderr, "bench_kv: connect %s: %s\n", opt.mds, strerror(-rc));
    else if ((rc = pom_kv_open(fs, "bench_kv", &kv)))
        fprintf(stderr, "bench_kv: pom_kv_open: %s\n", strerror(-rc));
    if (!rc)
        rc = run_phases(opt.label, kv, NULL);
    if (kv)
        pom_kv_close(kv);
    if (fs)
        pom_close(fs);
    if (own)
        pom_cluster_destroy(&cl);
    return rc ? -1 : 0;
}

static int usage(int rc)
{
    fprintf(rc ? stderr : stdout,
            "usage: bench_kv [--quick] [--mds HOST:PORT --fsid N] [-t THREADS] [-n OPS]\n"
            "                [--size BYTES] [--depth D] [--label L] [--json FILE]\n"
            "                [--no-leveldb]\n");
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = { { "quick", no_argument, NULL, 'Q' },
                                        { "mds", required_argument, NULL, 'M' },
                                        { "fsid", required_argument, NULL, 'F' },
                                        { "size", required_argument, NULL, 'S' },
                                        { "label", required_argument, NULL, 'L' },
                                        { "json", required_argument, NULL, 'J' },
                                        { "no-leveldb", no_argument, NULL, 'N' },
                                        { "depth", required_argument, NULL, 'D' },
                                        { "help", no_argument, NULL, 'h' },
                                        { NULL, 0, NULL, 0 } };
    bool quick = false, ops_set = false;
    int c;
    while ((c = getopt_long(argc, argv, "t:n:h", lo, NULL)) != -1) {
        bool ok = true;
        uint64_t v = 0;
        switch (c) {
        case 'Q': quick = true; break;
        case 'M': opt.mds = optarg; break;
        case 'F': ok = bench_util_size(optarg, &v) && v <= UINT32_MAX; opt.fsid = (uint32_t)v; break;
        case 'S': ok = bench_util_size(optarg, &opt.size) && opt.size <= POM_KV_VALUE_MAX; break;
        case 't': ok = bench_util_size(optarg, &opt.threads) && opt.threads >= 1 && opt.threads <= 256; break;
        case 'n': ok = bench_util_size(optarg, &opt.ops) && opt.ops >= 1; ops_set = true; break;
        case 'L': opt.label = optarg; break;
        case 'J': opt.json = optarg; break;
        case 'N': opt.leveldb = false; break;
        case 'D': ok = bench_util_size(optarg, &opt.depth) && opt.depth >= 1 && opt.depth <= POM_KV_BATCH_MAX; break;
        case 'h': return usage(0);
        default: return usage(2);
        }
        if (!ok) {
            fprintf(stderr, "bench_kv: bad value '%s'\n", optarg);
            return 2;
        }
    }
    if (optind != argc)
        return usage(2);
    if (quick && !ops_set)
        opt.ops = 2000;
    if (opt.ops < opt.threads)
        opt.ops = opt.threads;
    bench_util_header();
    int rc = run_pom();
    if (!rc && opt.leveldb && opt.depth == 1)
        rc = run_leveldb();
    return rc ? 1 : 0;
}
