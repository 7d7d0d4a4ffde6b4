/*
 * bench_mds.c -- the MDS as a client sees it: xTable operations per second
 * and their latency through the RPC API (xt_rpc_mds.h) against a real
 * pom-mds + pom-mdsl on loopback, side by side with LevelDB's own put/get
 * of the same keys and values, in one run.
 *
 * What is measured, for 1, 4 and 16 client threads (--quick: 1 and 4):
 *   create  exclusive create (XT_F_EXCL) of an empty-file row;
 *   lookup  a random existing name (the whole row comes back);
 *   update  inline data of 0..1000 bytes (uniform) plus size/mtime/flags;
 *   delete  each thread deletes the names it created;
 * each for two layouts: "shared" (every thread in table 2, one directory)
 * and "per-thread" (thread t in table 1000 + t). Each thread has its own
 * xt_rpc_pool (one connection) and makes one call at a time: one metadata
 * operation = one round trip. One batched variant (64 creates per
 * xt_mds_batch, shared table) shows the amortised rate.
 * Reference rows in the same run: Common.ping to the same pom-mds (the RPC
 * floor: no xTable work at all) and LevelDB in this process on a temporary
 * folder: leveldb_put/get/delete of the same keys (8-byte big-endian table
 * id + name) and values (the row's xt_row encoding), with the same thread
 * counts, sync = false -- pom-mds does not sync per operation either (its
 * commit group writes to the MDSL every --commit-interval-ms). Each MDS
 * phase is followed at once by its LevelDB counterpart.
 * The machine is shared, so every phase also reports CPU per operation
 * (server = pom-mds + pom-mdsl, client = this process) and how many CPUs
 * other processes kept busy meanwhile: CPU/op is what the code costs, the
 * rate is what this run got.
 *
 * Invariants:
 *  (1) A phase's clock runs from the start barrier to the last thread's
 *      end; name and row building happen inside it for both systems alike.
 *  (2) Every latency sample is kept (one per call, per thread), merged and
 *      sorted for the mean and p99 -- no histogram buckets.
 *  (3) Each thread-count round leaves the MDS tables empty (its delete
 *      phase removes every name its create phase made), so rounds do not
 *      see each other's rows; LevelDB gets a fresh folder per round and
 *      layout.
 *  (4) The daemons are started here, addressed only by their pids, and
 *      stopped at the end, on error and on SIGINT/SIGTERM (workers stop at
 *      the next operation); the temporary folder is removed.
 *  (5) Targets are informational: a miss is printed, never an exit code.
 *
 * usage: bench_mds [--quick] [--ops N] [--mds-threads N]
 *                  [--commit-interval-ms N] [--threads 1,4,16]
 *                  [--only create,lookup,update,delete] [--no-batch]
 *                  [--no-ping] [--no-leveldb] [--seed S]
 * --ops is per phase, all threads together (default 80000, --quick 2000);
 * --only still runs create and delete (the others need the rows).
 */
#include "pom_proc.h"
#include "xt_common.h"
#include "xt_hash.h"
#include "xt_rpc_mds.h"

#include <leveldb/c.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define SHARED_TABLE 2
#define PER_THREAD_TABLE0 1000
#define BATCH 64
#define DATA_MAX 1000
#define MAX_NT 8
#define MAX_ERRORS 1000      /* a thread gives up its phase after this many */
#define DEFAULT_MDS_THREADS 4 /* pom-mds's own default (mds_main.c) */

enum wl { WL_CREATE, WL_LOOKUP, WL_UPDATE, WL_DELETE, WL_N };
enum lay { LAY_SHARED, LAY_PER_THREAD, LAY_N };

static const char *const wl_name[WL_N] = { "create", "lookup", "update", "delete" };
static const char *const ldb_name[WL_N] = { "put", "get", "put", "delete" };
static const char *const lay_name[LAY_N] = { "shared", "per-thread" };

/* ---- command line ------------------------------------------------------ */

static struct {
    bool quick;
    uint64_t ops;            /* operations per phase, all threads together */
    unsigned mds_threads;
    unsigned commit_ms;      /* 0: pom-mds default */
    int nt;                  /* thread counts to run */
    int threads[MAX_NT];
    unsigned only;           /* bit per wl; 0: all */
    bool no_batch, no_ping, no_leveldb;
    uint64_t seed;
} opt = { .ops = 80000, .mds_threads = DEFAULT_MDS_THREADS, .seed = 0x5eedu };

/* ---- results ----------------------------------------------------------- */

struct res {
    bool done;
    uint64_t ops, errors;
    int first_err;
    double ops_s, mean_us, p99_us;
    double srv_cpu_us, cli_cpu_us; /* CPU per operation: pom-mds + pom-mdsl, this process */
    double cpus_ours, cpus_other;  /* CPUs busy during the phase: with the three
                                      processes above / with anything else */
};

static struct res mds_res[LAY_N][WL_N][MAX_NT];
static struct res ldb_res[LAY_N][WL_N][MAX_NT];
static struct res bcreate_res[MAX_NT], bdelete_res[MAX_NT], ping_res[MAX_NT];

/* ---- daemons and the temporary folder (invariant 4) --------------------- */

static char base[256];
static pid_t mdsl_pid, mds_pid;
static int mds_port;
static atomic_int stop_flag;

static void on_signal(int sig)
{
    (void)sig;
    atomic_store(&stop_flag, 1);
}

static void cleanup(void)
{
    if (mds_pid > 0)
        pom_proc_stop(mds_pid, 30000);
    if (mdsl_pid > 0)
        pom_proc_stop(mdsl_pid, 10000);
    mds_pid = mdsl_pid = 0;
    if (base[0])
        pom_rm_rf(base);
    base[0] = 0;
}

/* Copies the end of a daemon's log to stderr (before the folder goes). */
static void dump_log(const char *name)
{
    char path[320], buf[2048];
    snprintf(path, sizeof path, "%s/%s", base, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, len > (long)sizeof buf - 1 ? len - (long)sizeof buf + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    fprintf(stderr, "--- %s (end) ---\n%s\n", name, buf);
}

/* Path of daemon `name` (in folder `sub` of the build tree) into buf. */
static int find_bin(const char *sub, const char *name, char *buf, size_t cap)
{
    const char *env = getenv("POM_BIN_DIR");
    if (env) {
        snprintf(buf, cap, "%s/%s", env, name);
        if (access(buf, X_OK) == 0)
            return 0;
        snprintf(buf, cap, "%s/%s/%s", env, sub, name);
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
    fprintf(stderr, "bench_mds: cannot find %s (set POM_BIN_DIR)\n", name);
    return -ENOENT;
}

static int start_daemons(char *mdsl_bin, char *mds_bin)
{
    char dir[300], log[300], listen[32], mdsl_addr[32], thr[16], ci[16];
    snprintf(dir, sizeof dir, "%s/mdsl", base);
    int mdsl_port = pom_free_port();
    if (mdsl_port < 0)
        return mdsl_port;
    snprintf(mdsl_addr, sizeof mdsl_addr, "127.0.0.1:%d", mdsl_port);
    snprintf(log, sizeof log, "%s/mdsl.log", base);
    char *av1[] = { mdsl_bin, (char *)"--dir", dir, (char *)"--listen", mdsl_addr, NULL };
    mdsl_pid = pom_proc_spawn(av1, log);
    if (mdsl_pid < 0)
        return mdsl_pid;
    if (pom_proc_wait_port("127.0.0.1", mdsl_port, 20000))
        return -ETIMEDOUT;

    mds_port = pom_free_port();
    if (mds_port < 0)
        return mds_port;
    snprintf(listen, sizeof listen, "127.0.0.1:%d", mds_port);
    snprintf(log, sizeof log, "%s/mds.log", base);
    snprintf(thr, sizeof thr, "%u", opt.mds_threads);
    snprintf(ci, sizeof ci, "%u", opt.commit_ms);
    char *av2[12] = { mds_bin, (char *)"--mdsl", mdsl_addr, (char *)"--listen", listen,
                      (char *)"--threads", thr };
    int n = 7;
    if (opt.commit_ms) {
        av2[n++] = (char *)"--commit-interval-ms";
        av2[n++] = ci;
    }
    av2[n] = NULL;
    mds_pid = pom_proc_spawn(av2, log);
    if (mds_pid < 0)
        return mds_pid;
    if (pom_proc_wait_port("127.0.0.1", mds_port, 30000))
        return -ETIMEDOUT;
    return 0;
}

/* ---- one thread of a phase --------------------------------------------- */

struct worker;
typedef int (*op_fn)(struct worker *w, uint64_t i);

struct worker {
    int id, nthreads;
    enum lay lay;
    uint64_t per;            /* names this thread owns: [0, per) */
    uint64_t nops;           /* calls this thread makes */
    op_fn fn;
    xt_rpc_pool *pool;       /* MDS phases; owned by the round */
    leveldb_t *db;           /* LevelDB phases; borrowed */
    uint64_t rng;
    uint64_t *lat;           /* nops samples, ns */
    uint64_t done, errors, t_start, t_end;
    int first_err;
    pthread_barrier_t *go;
    pthread_t thr;
};

static const uint8_t data_bytes[DATA_MAX] = { 1 }; /* content does not matter */

static uint64_t rnd(struct worker *w)
{
    uint64_t z = (w->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t name_of(char *buf, size_t cap, int owner, uint64_t idx)
{
    return (uint32_t)snprintf(buf, cap, "file-%02d-%08llu.dat", owner,
                              (unsigned long long)idx);
}

static uint64_t table_of(const struct worker *w, int owner)
{
    return w->lay == LAY_SHARED ? SHARED_TABLE : PER_THREAD_TABLE0 + (uint64_t)owner;
}

/* A random existing name: any thread's in the shared table, our own in
 * ours. */
static void pick(struct worker *w, int *owner, uint64_t *idx)
{
    *owner = w->lay == LAY_SHARED ? (int)(rnd(w) % (uint64_t)w->nthreads) : w->id;
    *idx = rnd(w) % w->per;
}

/* The row a create makes (an empty regular file), or an update's new state
 * (dlen > 0 or `upd`: inline data of dlen bytes). */
static void row_of(xt_row *r, const char *name, uint32_t name_len, int owner, uint64_t idx,
                   bool upd, uint32_t dlen)
{
    xt_row_init(r);
    uint64_t now = xt_now_ns();
    r->attr.uuid = ((uint64_t)owner << 40) | idx;
    r->attr.type = XT_ROW_REG;
    r->attr.mode = 0100644;
    r->attr.nlink = 1;
    r->attr.uid = r->attr.gid = 1000;
    r->attr.atime_ns = r->attr.mtime_ns = r->attr.ctime_ns = r->attr.btime_ns = now;
    r->name = (const uint8_t *)name;
    r->name_len = name_len;
    if (upd) {
        r->attr.size = dlen;
        r->attr.flags = XT_ROW_F_INLINE;
        xt_row_view_set_group(r, XT_CG_DATA, data_bytes, dlen);
    }
}

/* xt_mds_call zeroes resp first, so it is safe to free after any result. */
static int finish_call(int rc, struct xt_resp *resp)
{
    xt_resp_free(resp);
    return rc;
}

static int mds_create(struct worker *w, uint64_t i)
{
    char name[40];
    uint32_t nl = name_of(name, sizeof name, w->id, i);
    xt_row row;
    row_of(&row, name, nl, w->id, i, false, 0);
    struct xt_req q = { .op = XT_OP_CREATE,
                        .t = { 1, table_of(w, w->id), -1 },
                        .name = name,
                        .name_len = nl,
                        .name_hash = xt_hash_name(name, nl),
                        .flags = XT_F_EXCL,
                        .row = &row };
    struct xt_resp r;
    return finish_call(xt_mds_call(w->pool, NULL, &q, &r), &r);
}

static int mds_lookup(struct worker *w, uint64_t i)
{
    (void)i;
    char name[40];
    int owner;
    uint64_t idx;
    pick(w, &owner, &idx);
    uint32_t nl = name_of(name, sizeof name, owner, idx);
    struct xt_req q = { .op = XT_OP_LOOKUP,
                        .t = { 1, table_of(w, owner), -1 },
                        .name = name,
                        .name_len = nl,
                        .name_hash = xt_hash_name(name, nl) };
    struct xt_resp r;
    return finish_call(xt_mds_call(w->pool, NULL, &q, &r), &r);
}

static int mds_update(struct worker *w, uint64_t i)
{
    (void)i;
    char name[40];
    int owner;
    uint64_t idx;
    pick(w, &owner, &idx);
    uint32_t nl = name_of(name, sizeof name, owner, idx);
    xt_row row;
    row_of(&row, name, nl, owner, idx, true, (uint32_t)(rnd(w) % (DATA_MAX + 1)));
    struct xt_req q = { .op = XT_OP_UPDATE,
                        .t = { 1, table_of(w, owner), -1 },
                        .name = name,
                        .name_len = nl,
                        .name_hash = xt_hash_name(name, nl),
                        .row = &row,
                        .set_mask = XT_ROW_SET_SIZE | XT_ROW_SET_MTIME | XT_ROW_SET_FLAGS };
    struct xt_resp r;
    return finish_call(xt_mds_call(w->pool, NULL, &q, &r), &r);
}

static int mds_delete(struct worker *w, uint64_t i)
{
    char name[40];
    uint32_t nl = name_of(name, sizeof name, w->id, i);
    struct xt_req q = { .op = XT_OP_DELETE,
                        .t = { 1, table_of(w, w->id), -1 },
                        .name = name,
                        .name_len = nl,
                        .name_hash = xt_hash_name(name, nl) };
    struct xt_resp r;
    return finish_call(xt_mds_call(w->pool, NULL, &q, &r), &r);
}

/* Batch i: our names [i*BATCH, (i+1)*BATCH), created or deleted. */
static int mds_batch(struct worker *w, uint64_t i, bool create)
{
    char names[BATCH][40];
    xt_row rows[BATCH];
    struct xt_req q[BATCH];
    struct xt_resp r[BATCH];
    for (int k = 0; k < BATCH; k++) {
        uint64_t idx = i * BATCH + (uint64_t)k;
        uint32_t nl = name_of(names[k], sizeof names[k], w->id, idx);
        q[k] = (struct xt_req){ .op = create ? XT_OP_CREATE : XT_OP_DELETE,
                                .t = { 1, table_of(w, w->id), -1 },
                                .name = names[k],
                                .name_len = nl,
                                .name_hash = xt_hash_name(names[k], nl),
                                .flags = create ? XT_F_EXCL : 0 };
        if (create) {
            row_of(&rows[k], names[k], nl, w->id, idx, false, 0);
            q[k].row = &rows[k];
        }
    }
    int rc = xt_mds_batch(w->pool, NULL, q, BATCH, r);
    if (rc)
        return rc;
    for (int k = 0; k < BATCH; k++) {
        if (r[k].status && !rc)
            rc = r[k].status;
        xt_resp_free(&r[k]);
    }
    return rc;
}

static int mds_bcreate(struct worker *w, uint64_t i)
{
    return mds_batch(w, i, true);
}

static int mds_bdelete(struct worker *w, uint64_t i)
{
    return mds_batch(w, i, false);
}

static int mds_ping(struct worker *w, uint64_t i)
{
    (void)i;
    uint8_t buf[64];
    size_t got;
    return xt_rpc_ping(w->pool, NULL, data_bytes, sizeof buf, buf, sizeof buf, &got);
}

/* LevelDB key: 8-byte big-endian table id, then the name. */
static size_t ldb_key(const struct worker *w, char *key, int owner, uint64_t idx)
{
    uint64_t t = table_of(w, owner);
    for (int b = 0; b < 8; b++)
        key[b] = (char)(t >> (56 - 8 * b));
    return 8 + name_of(key + 8, 40, owner, idx);
}

static int ldb_put_row(struct worker *w, int owner, uint64_t idx, bool upd, uint32_t dlen)
{
    char key[48];
    uint8_t val[DATA_MAX + 256];
    size_t kl = ldb_key(w, key, owner, idx);
    xt_row row;
    row_of(&row, key + 8, (uint32_t)(kl - 8), owner, idx, upd, dlen);
    ssize_t vl = xt_row_encode(&row, val, sizeof val);
    if (vl < 0)
        return (int)vl;
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create(); /* sync = false */
    char *err = NULL;
    leveldb_put(w->db, wo, key, kl, (const char *)val, (size_t)vl, &err);
    leveldb_writeoptions_destroy(wo);
    if (err) {
        leveldb_free(err);
        return -EIO;
    }
    return 0;
}

static int ldb_put(struct worker *w, uint64_t i)
{
    return ldb_put_row(w, w->id, i, false, 0);
}

static int ldb_get(struct worker *w, uint64_t i)
{
    (void)i;
    char key[48];
    int owner;
    uint64_t idx;
    pick(w, &owner, &idx);
    size_t kl = ldb_key(w, key, owner, idx);
    leveldb_readoptions_t *ro = leveldb_readoptions_create();
    char *err = NULL;
    size_t vl = 0;
    char *v = leveldb_get(w->db, ro, key, kl, &vl, &err);
    leveldb_readoptions_destroy(ro);
    int rc = err ? -EIO : v ? 0 : -ENOENT;
    leveldb_free(err);
    leveldb_free(v);
    return rc;
}

static int ldb_update(struct worker *w, uint64_t i)
{
    (void)i;
    int owner;
    uint64_t idx;
    pick(w, &owner, &idx);
    return ldb_put_row(w, owner, idx, true, (uint32_t)(rnd(w) % (DATA_MAX + 1)));
}

static int ldb_delete(struct worker *w, uint64_t i)
{
    char key[48];
    size_t kl = ldb_key(w, key, w->id, i);
    leveldb_writeoptions_t *wo = leveldb_writeoptions_create();
    char *err = NULL;
    leveldb_delete(w->db, wo, key, kl, &err);
    leveldb_writeoptions_destroy(wo);
    int rc = err ? -EIO : 0;
    leveldb_free(err);
    return rc;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(w->go);
    w->t_start = xt_mono_ns();
    uint64_t prev = w->t_start;
    for (uint64_t i = 0; i < w->nops && !atomic_load(&stop_flag); i++) {
        int rc = w->fn(w, i);
        uint64_t now = xt_mono_ns();
        w->lat[w->done++] = now - prev;
        prev = now;
        if (rc) {
            if (!w->errors)
                w->first_err = rc;
            if (++w->errors >= MAX_ERRORS)
                break;
        }
    }
    w->t_end = prev;
    return NULL;
}

/* CPU time (user + system, all threads) of process pid so far in ns, from
 * /proc/PID/stat (clock-tick resolution); 0 when unreadable. */
static uint64_t proc_cpu_ns(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                     &st) != 2)
        return 0;
    return (ut + st) * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

/* Busy CPU time of the whole machine so far in ns (/proc/stat: all but idle
 * and iowait; steal included, as it is CPU this VM did not get). */
static uint64_t machine_busy_ns(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return 0;
    unsigned long long v[8] = { 0 };
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n != 8)
        return 0;
    uint64_t busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    return busy * (1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK));
}

static uint64_t self_cpu_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
           ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- one phase: nt threads, each making `calls` calls of fn ------------ */

struct round {
    int nt;
    enum lay lay;
    uint64_t per;            /* names per thread */
    xt_rpc_pool *pools[64];  /* one per thread, each one connection */
    leveldb_t *db;
};

/* Runs fn on r->nt threads, `calls` calls each; `unit` operations per call
 * (BATCH for batches) for the rate. Fills *out. */
static void run_phase(struct round *r, op_fn fn, uint64_t calls, unsigned unit, const char *what,
                      struct res *out)
{
    struct worker ws[64];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)r->nt);
    for (int t = 0; t < r->nt; t++) {
        ws[t] = (struct worker){ .id = t, .nthreads = r->nt, .lay = r->lay, .per = r->per,
                                 .nops = calls, .fn = fn, .pool = r->pools[t], .db = r->db,
                                 .rng = opt.seed * 1000003u + (uint64_t)t * 7919u + calls,
                                 .go = &go };
        ws[t].lat = xt_malloc(sizeof(uint64_t) * (calls ? calls : 1));
        if (!ws[t].lat) {
            fprintf(stderr, "bench_mds: out of memory\n");
            exit(1);
        }
    }
    uint64_t srv0 = proc_cpu_ns(mds_pid) + proc_cpu_ns(mdsl_pid), cli0 = self_cpu_ns();
    uint64_t busy0 = machine_busy_ns(), wall0 = xt_mono_ns();
    for (int t = 0; t < r->nt; t++)
        pthread_create(&ws[t].thr, NULL, worker_main, &ws[t]);
    uint64_t total = 0, errors = 0, t0 = UINT64_MAX, t1 = 0;
    int first_err = 0;
    for (int t = 0; t < r->nt; t++) {
        pthread_join(ws[t].thr, NULL);
        total += ws[t].done;
        errors += ws[t].errors;
        if (!first_err)
            first_err = ws[t].first_err;
        t0 = XT_MIN(t0, ws[t].t_start);
        t1 = XT_MAX(t1, ws[t].t_end);
    }
    double srv_cpu = (double)(proc_cpu_ns(mds_pid) + proc_cpu_ns(mdsl_pid) - srv0);
    double cli_cpu = (double)(self_cpu_ns() - cli0);
    double busy = (double)(machine_busy_ns() - busy0), wall = (double)(xt_mono_ns() - wall0);
    pthread_barrier_destroy(&go);
    uint64_t *all = xt_malloc(sizeof(uint64_t) * (total ? total : 1));
    if (!all) {
        fprintf(stderr, "bench_mds: out of memory\n");
        exit(1);
    }
    uint64_t n = 0;
    double sum = 0;
    for (int t = 0; t < r->nt; t++) {
        memcpy(all + n, ws[t].lat, sizeof(uint64_t) * ws[t].done);
        n += ws[t].done;
        xt_free(ws[t].lat);
    }
    qsort(all, n, sizeof *all, cmp_u64);
    for (uint64_t k = 0; k < n; k++)
        sum += (double)all[k];
    double secs = (double)(t1 - t0) / 1e9;
    *out = (struct res){ .done = true, .ops = n * unit, .errors = errors,
                         .first_err = first_err,
                         .ops_s = secs > 0 ? (double)(n * unit) / secs : 0,
                         .mean_us = n ? sum / (double)n / 1e3 : 0,
                         .p99_us = n ? (double)all[(n * 99 + 99) / 100 - 1] / 1e3 : 0,
                         .srv_cpu_us = n ? srv_cpu / (double)(n * unit) / 1e3 : 0,
                         .cli_cpu_us = n ? cli_cpu / (double)(n * unit) / 1e3 : 0,
                         .cpus_ours = (srv_cpu + cli_cpu) / wall,
                         .cpus_other = busy > srv_cpu + cli_cpu ? (busy - srv_cpu - cli_cpu) / wall
                                                                : 0 };
    xt_free(all);
    fprintf(stderr,
            "  %-34s %2d thr: %8.0f ops/s  mean %7.1f us  p99 %8.1f us  cpu/op srv %5.1f "
            "cli %5.1f us  CPUs ours %.2f other %.2f%s\n",
            what, r->nt, out->ops_s, out->mean_us, out->p99_us, out->srv_cpu_us,
            out->cli_cpu_us, out->cpus_ours, out->cpus_other, errors ? "  (ERRORS)" : "");
    if (errors)
        fprintf(stderr, "    %llu errors, first: %s\n", (unsigned long long)errors,
                strerror(-first_err));
}

static bool wanted(enum wl w)
{
    return !opt.only || (opt.only & (1u << w));
}

static const op_fn mds_fns[WL_N] = { mds_create, mds_lookup, mds_update, mds_delete };
static const op_fn ldb_fns[WL_N] = { ldb_put, ldb_get, ldb_update, ldb_delete };

static int open_pools(struct round *r)
{
    for (int t = 0; t < r->nt; t++) {
        struct xt_rpc_pool_opts po = { .host = "127.0.0.1", .port = mds_port, .max_idle = 1,
                                       .call_timeout_ms = 60000 };
        int rc = xt_rpc_pool_new(&po, &r->pools[t]);
        if (rc) {
            fprintf(stderr, "bench_mds: xt_rpc_pool_new: %s\n", strerror(-rc));
            return rc;
        }
        /* Connect now so no phase times a connect. */
        uint8_t b[8];
        size_t got;
        if ((rc = xt_rpc_ping(r->pools[t], NULL, "x", 1, b, sizeof b, &got))) {
            fprintf(stderr, "bench_mds: cannot reach pom-mds: %s\n", strerror(-rc));
            return rc;
        }
    }
    return 0;
}

static void close_pools(struct round *r)
{
    for (int t = 0; t < r->nt; t++)
        xt_rpc_pool_free(r->pools[t]);
}

static leveldb_t *open_leveldb(const char *dir)
{
    leveldb_options_t *lo = leveldb_options_create();
    leveldb_options_set_create_if_missing(lo, 1);
    char *err = NULL;
    leveldb_t *db = leveldb_open(lo, dir, &err);
    leveldb_options_destroy(lo);
    if (err) {
        fprintf(stderr, "bench_mds: leveldb_open %s: %s\n", dir, err);
        leveldb_free(err);
        return NULL;
    }
    return db;
}

/* One thread count, everything. Each MDS workload is followed at once by
 * its LevelDB counterpart, so a ratio compares two phases that saw about
 * the same load from the rest of the machine. Returns 0, or -errno when
 * the MDS died or LevelDB would not open. */
static int run_round(int ti, int nt)
{
    struct round r = { .nt = nt, .per = opt.ops / (uint64_t)nt };
    char what[64], dir[320];
    int rc = open_pools(&r);
    for (int l = 0; l < LAY_N && !rc && !atomic_load(&stop_flag); l++) {
        r.lay = (enum lay)l;
        snprintf(dir, sizeof dir, "%s/leveldb-%d-%d", base, nt, l);
        if (!opt.no_leveldb && !(r.db = open_leveldb(dir))) {
            rc = -EIO;
            break;
        }
        for (int w = 0; w < WL_N && !atomic_load(&stop_flag); w++) {
            /* create and delete always run: the others need the rows, and
             * the next round needs empty tables (invariant 3). */
            if (!wanted((enum wl)w) && w != WL_CREATE && w != WL_DELETE)
                continue;
            struct res tmp, *out = wanted((enum wl)w) ? &mds_res[l][w][ti] : &tmp;
            snprintf(what, sizeof what, "mds %s %s", lay_name[l], wl_name[w]);
            run_phase(&r, mds_fns[w], r.per, 1, what, out);
            if (!pom_proc_alive(mds_pid)) {
                fprintf(stderr, "bench_mds: pom-mds died\n");
                dump_log("mds.log");
                rc = -EPIPE;
                break;
            }
            if (r.db && !atomic_load(&stop_flag)) {
                out = wanted((enum wl)w) ? &ldb_res[l][w][ti] : &tmp;
                snprintf(what, sizeof what, "leveldb %s %s", lay_name[l], ldb_name[w]);
                run_phase(&r, ldb_fns[w], r.per, 1, what, out);
            }
        }
        if (r.db) {
            leveldb_close(r.db);
            r.db = NULL;
            pom_rm_rf(dir);
        }
    }
    r.lay = LAY_SHARED;
    if (!rc && !opt.no_batch && !atomic_load(&stop_flag)) {
        uint64_t calls = r.per / BATCH ? r.per / BATCH : 1;
        run_phase(&r, mds_bcreate, calls, BATCH, "mds shared create, batches of 64",
                  &bcreate_res[ti]);
        run_phase(&r, mds_bdelete, calls, BATCH, "mds shared delete, batches of 64",
                  &bdelete_res[ti]);
    }
    if (!rc && !opt.no_ping && !atomic_load(&stop_flag))
        run_phase(&r, mds_ping, r.per, 1, "Common.ping to pom-mds (64 B)", &ping_res[ti]);
    if (rc == 0 && !pom_proc_alive(mds_pid))
        rc = -EPIPE;
    close_pools(&r);
    return rc;
}

/* ---- report ------------------------------------------------------------ */

static void print_cell(const struct res *x)
{
    if (!x->done)
        printf(" - | - | - |");
    else
        printf(" %.0f | %.1f | %.1f |", x->ops_s, x->mean_us, x->p99_us);
}

static void print_cpu(const struct res *x)
{
    if (!x->done)
        printf(" - | - | - |");
    else
        printf(" %.1f | %.1f | %.2f |", x->srv_cpu_us, x->cli_cpu_us, x->cpus_other);
}

static void print_tables(void)
{
    static const char *const what[WL_N] = {
        "create (XT_F_EXCL, empty regular file) vs leveldb_put of the row",
        "lookup (random existing name, whole row) vs leveldb_get",
        "update (inline data 0..1000 B uniform, size/mtime/flags) vs leveldb_put of the new row",
        "delete (own names) vs leveldb_delete",
    };
    for (int l = 0; l < LAY_N; l++) {
        for (int w = 0; w < WL_N; w++) {
            if (!wanted((enum wl)w))
                continue;
            printf("\n### %s -- %s\n\n", l == LAY_SHARED ? "one shared table (table 2)"
                                                         : "one table per thread",
                   what[w]);
            printf("| threads | MDS ops/s | MDS mean us | MDS p99 us | server CPU us/op | "
                   "client CPU us/op | other CPUs | LevelDB ops/s | LevelDB mean us | "
                   "LevelDB p99 us | MDS/LevelDB ops/s | errors |\n");
            printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
            for (int t = 0; t < opt.nt; t++) {
                const struct res *m = &mds_res[l][w][t], *d = &ldb_res[l][w][t];
                printf("| %d |", opt.threads[t]);
                print_cell(m);
                print_cpu(m);
                print_cell(d);
                if (m->done && d->done && d->ops_s > 0)
                    printf(" %.2f |", m->ops_s / d->ops_s);
                else
                    printf(" - |");
                printf(" %llu |\n", (unsigned long long)(m->errors + d->errors));
            }
        }
    }
    if (!opt.no_batch) {
        printf("\n### batched: xt_mds_batch of 64 rows, one shared table "
               "(latency is per batch)\n\n");
        printf("| threads | create rows/s | mean us | p99 us | delete rows/s | mean us | "
               "p99 us | vs single-call create | errors |\n");
        printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int t = 0; t < opt.nt; t++) {
            const struct res *c = &bcreate_res[t], *s = &mds_res[LAY_SHARED][WL_CREATE][t];
            printf("| %d |", opt.threads[t]);
            print_cell(c);
            print_cell(&bdelete_res[t]);
            if (c->done && s->done && s->ops_s > 0)
                printf(" %.1fx |", c->ops_s / s->ops_s);
            else
                printf(" - |");
            printf(" %llu |\n", (unsigned long long)(c->errors + bdelete_res[t].errors));
        }
    }
    if (!opt.no_ping) {
        printf("\n### RPC floor: Common.ping (64 B echo) to the same pom-mds, "
               "one connection per thread\n\n");
        printf("| threads | ops/s | mean us | p99 us | server CPU us/op | client CPU us/op | "
               "other CPUs | shared lookup / ping |\n");
        printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (int t = 0; t < opt.nt; t++) {
            const struct res *p = &ping_res[t], *lk = &mds_res[LAY_SHARED][WL_LOOKUP][t];
            printf("| %d |", opt.threads[t]);
            print_cell(p);
            print_cpu(p);
            if (p->done && lk->done && p->ops_s > 0)
                printf(" %.2f |\n", lk->ops_s / p->ops_s);
            else
                printf(" - |\n");
        }
    }
}

static void print_targets(void)
{
    printf("\n## Targets (informational; a miss does not fail the run)\n\n");
    static const enum wl pairs[2] = { WL_CREATE, WL_LOOKUP };
    for (int p = 0; p < 2; p++) {
        enum wl w = pairs[p];
        if (!wanted(w) || opt.no_leveldb)
            continue;
        for (int l = 0; l < LAY_N; l++) {
            for (int t = 0; t < opt.nt; t++) {
                const struct res *m = &mds_res[l][w][t], *d = &ldb_res[l][w][t];
                if (!m->done || !d->done)
                    continue;
                printf("- %s %s, %2d threads >= LevelDB %s: %.0f vs %.0f ops/s (x%.2f): %s\n",
                       wl_name[w], lay_name[l], opt.threads[t], ldb_name[w], m->ops_s,
                       d->ops_s, d->ops_s > 0 ? m->ops_s / d->ops_s : 0,
                       m->ops_s >= d->ops_s ? "MET" : "MISSED");
            }
        }
    }
    /* Why the two targets above cannot be met over RPC: LevelDB is a library
     * call in this process, the MDS a round trip; show the floor. */
    for (int t = 0; t < opt.nt && !opt.no_ping && !opt.no_leveldb; t++) {
        const struct res *p = &ping_res[t], *put = &ldb_res[LAY_SHARED][WL_CREATE][t],
                         *get = &ldb_res[LAY_SHARED][WL_LOOKUP][t], *b = &bcreate_res[t];
        if (!p->done || !put->done || !get->done)
            continue;
        printf("- RPC floor, %2d threads: Common.ping alone reaches %.0f/s (x%.2f of LevelDB "
               "put, x%.3f of get): no single-call RPC can meet the two targets above here",
               opt.threads[t], p->ops_s, p->ops_s / put->ops_s, p->ops_s / get->ops_s);
        if (b->done)
            printf("; batched creates reach %.0f rows/s (x%.2f of LevelDB put)", b->ops_s,
                   b->ops_s / put->ops_s);
        printf("\n");
    }
    int t16 = -1;
    for (int t = 0; t < opt.nt; t++)
        if (opt.threads[t] == 16)
            t16 = t;
    for (int l = 0; l < LAY_N && wanted(WL_LOOKUP); l++) {
        if (t16 < 0 || !mds_res[l][WL_LOOKUP][t16].done) {
            printf("- lookups %s, 16 threads >= 50000/s: not measured in this run\n",
                   lay_name[l]);
            continue;
        }
        const struct res *x = &mds_res[l][WL_LOOKUP][t16];
        double cpu = x->srv_cpu_us + x->cli_cpu_us;
        printf("- lookups %s, 16 threads >= 50000/s: %.0f/s: %s (CPU per lookup %.1f us "
               "server + %.1f us client: at most %.0f/s on %ld idle CPUs; this phase got "
               "%.2f CPUs, other processes %.2f)\n",
               lay_name[l], x->ops_s, x->ops_s >= 50000 ? "MET" : "MISSED", x->srv_cpu_us,
               x->cli_cpu_us, cpu > 0 ? (double)sysconf(_SC_NPROCESSORS_ONLN) * 1e6 / cpu : 0,
               sysconf(_SC_NPROCESSORS_ONLN), x->cpus_ours, x->cpus_other);
    }
}

/* ---- main -------------------------------------------------------------- */

static void print_loadavg(const char *when)
{
    double l1 = 0, l5 = 0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf %lf", &l1, &l5) != 2)
            l1 = l5 = 0;
        fclose(f);
    }
    printf("load average %s: %.2f (1 min), %.2f (5 min) -- other work on this machine "
           "shows here\n", when, l1, l5);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: bench_mds [--quick] [--ops N] [--mds-threads N] "
               "[--commit-interval-ms N]\n"
               "                 [--threads 1,4,16] [--only create,lookup,update,delete]\n"
               "                 [--no-batch] [--no-ping] [--no-leveldb] [--seed S]\n");
}

static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        int v = atoi(tok);
        if (v < 1 || v > 64 || n == max)
            return -1;
        out[n++] = v;
    }
    return n;
}

static int parse_args(int argc, char **argv)
{
    bool ops_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            opt.quick = true;
        } else if (!strcmp(a, "--no-batch")) {
            opt.no_batch = true;
        } else if (!strcmp(a, "--no-ping")) {
            opt.no_ping = true;
        } else if (!strcmp(a, "--no-leveldb")) {
            opt.no_leveldb = true;
        } else if (v && !strcmp(a, "--ops")) {
            opt.ops = strtoull(v, NULL, 10), ops_set = true, i++;
        } else if (v && !strcmp(a, "--mds-threads")) {
            opt.mds_threads = (unsigned)atoi(v), i++;
        } else if (v && !strcmp(a, "--commit-interval-ms")) {
            opt.commit_ms = (unsigned)atoi(v), i++;
        } else if (v && !strcmp(a, "--seed")) {
            opt.seed = strtoull(v, NULL, 0), i++;
        } else if (v && !strcmp(a, "--threads")) {
            if ((opt.nt = parse_list(v, opt.threads, MAX_NT)) <= 0)
                return -1;
            i++;
        } else if (v && !strcmp(a, "--only")) {
            for (int w = 0; w < WL_N; w++)
                if (strstr(v, wl_name[w]))
                    opt.only |= 1u << w;
            if (!opt.only)
                return -1;
            i++;
        } else if (!strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else {
            return -1;
        }
    }
    if (opt.mds_threads < 1 || opt.mds_threads > 256)
        return -1;
    if (opt.quick && !ops_set)
        opt.ops = 2000;
    if (!opt.nt) {
        static const int full[] = { 1, 4, 16 };
        opt.nt = opt.quick ? 2 : 3;
        memcpy(opt.threads, full, sizeof(int) * (size_t)opt.nt);
    }
    for (int t = 0; t < opt.nt; t++)
        if (opt.ops / (uint64_t)opt.threads[t] < BATCH)
            return -1;
    return 0;
}

int main(int argc, char **argv)
{
    if (parse_args(argc, argv)) {
        usage(stderr);
        return 2;
    }
    printf("$");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n");
    xt_log_set_level(XT_LOG_ERROR);

    char mdsl_bin[1100], mds_bin[1100];
    if (find_bin("mdsl", "pom-mdsl", mdsl_bin, sizeof mdsl_bin) ||
        find_bin("mds", "pom-mds", mds_bin, sizeof mds_bin))
        return 1;
    struct sigaction sa = { .sa_handler = on_signal };
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (pom_tmpdir("bmds", base, sizeof base)) {
        fprintf(stderr, "bench_mds: cannot create a temporary folder\n");
        return 1;
    }
    uint64_t t_all = xt_mono_ns();
    int rc = start_daemons(mdsl_bin, mds_bin);
    if (rc) {
        fprintf(stderr, "bench_mds: cannot start the daemons: %s\n", strerror(-rc));
        dump_log("mdsl.log");
        dump_log("mds.log");
        cleanup();
        return 1;
    }

    printf("# MDS (pom-mds + 1 pom-mdsl, loopback) vs LevelDB, %ld CPUs, client and "
           "servers on this machine\n",
           sysconf(_SC_NPROCESSORS_ONLN));
    char ci[48] = "pom-mds default";
    if (opt.commit_ms)
        snprintf(ci, sizeof ci, "%u ms", opt.commit_ms);
    printf("pom-mds: --threads %u (MDS server threads), commit interval %s; pid %d, "
           "pom-mdsl pid %d\n",
           opt.mds_threads, ci, (int)mds_pid, (int)mdsl_pid);
    printf("%llu operations per phase (split over the threads); names like "
           "file-07-00001234.dat; seed %llu\n",
           (unsigned long long)opt.ops, (unsigned long long)opt.seed);
    printf("client: one xt_rpc_pool (one connection) per thread, one call at a time\n");
    printf("CPU us/op: CPU time (user + system) during the phase / operations; server = "
           "pom-mds + pom-mdsl (/proc/PID/stat, 10 ms ticks), client = this process\n");
    printf("other CPUs: CPUs kept busy during the phase by processes other than these three "
           "(/proc/stat, steal included): the share of the machine this run did not get\n");
    printf("LevelDB: in this process, default options, sync = false (the MDS does not "
           "sync per operation either: its commit group writes to the MDSL every commit "
           "interval); key = 8-byte table id + name, value = the xt_row encoding\n");
    print_loadavg("at start");
    fflush(stdout);

    for (int t = 0; t < opt.nt && !atomic_load(&stop_flag); t++) {
        fprintf(stderr, "round: %d client threads\n", opt.threads[t]);
        if ((rc = run_round(t, opt.threads[t])))
            break;
    }
    cleanup();
    if (atomic_load(&stop_flag)) {
        fprintf(stderr, "bench_mds: interrupted\n");
        return 1;
    }
    print_loadavg("at end");
    print_tables();
    print_targets();
    printf("\ntotal run time %.1f s\n", (double)(xt_mono_ns() - t_all) / 1e9);
    return rc ? 1 : 0;
}
