/*
 * dist_driver.c -- the client side of the many-MDS test (tests/dist/
 * test_dist_mds.sh, docs/mds-dist.md): libpomegranate through R2, T
 * threads creating N files in ONE directory, then checks.
 *
 *   dist_driver R2ADDR FSNAME N THREADS SYNC_DIR
 *
 *   1. mkdir /DIR (a fresh name per run), T threads create f<i> for
 *      i = thread, thread + T, ... < N (pom_mknod), timed;
 *   2. lookup pass 1: every name found, with the uuid it was created with;
 *   3. a full listing (pom_readdir from the start): every name exactly once,
 *      no other;
 *   4. writes SYNC_DIR/ready and waits for SYNC_DIR/go (the script snapshots
 *      the MDS counters), then lookup pass 2 (the bitmaps have converged),
 *      timed;
 *   5. stale clients: during the creates, STALE more clients (their own
 *      pom_fs, so their own bitmap caches) were opened one after another
 *      and each learnt the table's bitmap as it was then (a few lookups);
 *      after SYNC_DIR/ready2 .. SYNC_DIR/go2 each looks up STALE_LOOKUPS
 *      random names with that old bitmap: their requests reach MDS that
 *      only gossip (or luck) told of later splits, which is where looped
 *      forwards come from. Writes SYNC_DIR/done.
 *
 * Prints one "result: key value" line per number. Exit 0 when every check
 * held, 1 otherwise (the failing check is printed).
 */
#include "pomegranate.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct run {
    pom_fs *fs;
    pom_ino dir;
    long n;
    int threads;
    uint64_t *uuid;          /* per file: what create returned */
    _Atomic long failures;
    _Atomic long created;    /* creates done (the stale clients' clock) */
    int (*op)(struct run *r, long i);
};

struct worker {
    struct run *r;
    int k;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void name_of(long i, char *buf, size_t cap)
{
    snprintf(buf, cap, "f%ld", i);
}

static int do_create(struct run *r, long i)
{
    char name[32];
    name_of(i, name, sizeof name);
    struct stat st;
    int rc = pom_mknod(r->fs, r->dir, name, S_IFREG | 0644, 0, NULL, &st);
    if (rc == 0) {
        r->uuid[i] = st.st_ino;
        pom_forget(r->fs, st.st_ino, 1);
        atomic_fetch_add(&r->created, 1);
    } else if (atomic_fetch_add(&r->failures, 1) < 5) {
        fprintf(stderr, "create %s: %s\n", name, strerror(-rc));
    }
    return rc;
}

static int do_lookup(struct run *r, long i)
{
    char name[32];
    name_of(i, name, sizeof name);
    struct stat st;
    int rc = pom_lookup(r->fs, r->dir, name, &st);
    if (rc == 0) {
        pom_forget(r->fs, st.st_ino, 1);
        if (st.st_ino != r->uuid[i])
            rc = -ESTALE;
    }
    if (rc < 0 && atomic_fetch_add(&r->failures, 1) < 5)
        fprintf(stderr, "lookup %s: %s\n", name, strerror(-rc));
    return rc;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (long i = w->k; i < w->r->n; i += w->r->threads)
        w->r->op(w->r, i);
    return NULL;
}

/* Runs op over every file on r->threads threads; returns the seconds. */
static double phase(struct run *r, int (*op)(struct run *, long))
{
    r->op = op;
    pthread_t th[64];
    struct worker w[64];
    double t0 = now_s();
    for (int k = 0; k < r->threads; k++) {
        w[k] = (struct worker){ r, k };
        pthread_create(&th[k], NULL, worker_main, &w[k]);
    }
    for (int k = 0; k < r->threads; k++)
        pthread_join(th[k], NULL);
    return now_s() - t0;
}

struct listing {
    uint8_t *seen;
    long n, total, dup, stray;
};

static int list_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    (void)st;
    (void)next;
    struct listing *l = arg;
    l->total++;
    char *end;
    long i = name[0] == 'f' ? strtol(name + 1, &end, 10) : -1;
    if (i < 0 || i >= l->n || *end) {
        l->stray++;
        return 0;
    }
    if (l->seen[i]++)
        l->dup++;
    return 0;
}

/* Resumes after the last entry taken: pom_readdir calls fn with the cookie
 * of the entry after it. */
struct resume {
    struct listing *l;
    uint64_t next;
};

static int resume_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    struct resume *rs = arg;
    rs->next = next;
    return list_cb(rs->l, name, st, next);
}

#define STALE 16
#define STALE_LEARN 20
#define STALE_LOOKUPS 500

/* The stale clients (step 5). */
struct stale {
    struct run *r;
    const char *r2, *fsname;
    pom_fs *fs[STALE];
    pom_ino dir[STALE];
    long bad;
};

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* Opens client k once (k+1)/(STALE+1) of the files exist and lets it learn
 * the bitmap of that moment through a few lookups of files that exist. */
static void *stale_main(void *arg)
{
    struct stale *st = arg;
    struct run *r = st->r;
    uint64_t seed = (uint64_t)getpid();
    for (int k = 0; k < STALE; k++) {
        long when = r->n / (STALE + 1) * (k + 1);
        while (atomic_load(&r->created) < when)
            usleep(2000);
        if (pom_open(st->r2, st->fsname, &st->fs[k]) < 0) {
            st->bad++;
            continue;
        }
        char dname[64];
        snprintf(dname, sizeof dname, "d%ld", (long)getpid());
        struct stat sb;
        if (pom_lookup(st->fs[k], POM_ROOT_INO, dname, &sb) < 0) {
            st->bad++;
            continue;
        }
        st->dir[k] = sb.st_ino;
        for (int j = 0; j < STALE_LEARN; j++) {
            /* Half of what exists by then: created, whatever the threads'
             * pace (a miss only teaches nothing). */
            long i = (long)(mix(&seed) % (uint64_t)(when / 2 + 1));
            char name[32];
            name_of(i, name, sizeof name);
            if (pom_lookup(st->fs[k], st->dir[k], name, &sb) == 0)
                pom_forget(st->fs[k], sb.st_ino, 1);
        }
    }
    return NULL;
}

static void touch(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0)
        close(fd);
}

static void wait_file(const char *dir, const char *name, int timeout_s)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    for (int i = 0; i < timeout_s * 20 && access(p, F_OK) != 0; i++)
        usleep(50000);
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: dist_driver R2ADDR FSNAME N THREADS SYNC_DIR\n");
        return 2;
    }
    struct run r = { .n = atol(argv[3]), .threads = atoi(argv[4]) };
    const char *sync_dir = argv[5];
    if (r.n <= 0 || r.threads <= 0 || r.threads > 64) {
        fprintf(stderr, "dist_driver: bad N or THREADS\n");
        return 2;
    }
    int rc = pom_open(argv[1], argv[2], &r.fs);
    if (rc < 0) {
        fprintf(stderr, "pom_open: %s\n", strerror(-rc));
        return 1;
    }
    char dname[64];
    snprintf(dname, sizeof dname, "d%ld", (long)getpid());
    struct stat st;
    if ((rc = pom_mkdir(r.fs, POM_ROOT_INO, dname, 0755, NULL, &st)) < 0) {
        fprintf(stderr, "mkdir %s: %s\n", dname, strerror(-rc));
        return 1;
    }
    r.dir = st.st_ino;
    r.uuid = calloc((size_t)r.n, sizeof *r.uuid);
    struct listing l = { .seen = calloc((size_t)r.n, 1), .n = r.n };
    if (!r.uuid || !l.seen)
        return 1;
    int bad = 0;

    struct stale stl = { .r = &r, .r2 = argv[1], .fsname = argv[2] };
    pthread_t stale_th;
    pthread_create(&stale_th, NULL, stale_main, &stl);
    double tc = phase(&r, do_create);
    pthread_join(stale_th, NULL);
    printf("result: creates %ld\nresult: create_s %.3f\nresult: creates_per_s %.0f\n", r.n, tc,
           (double)r.n / tc);
    long cf = atomic_exchange(&r.failures, 0);
    if (cf) {
        printf("FAIL: %ld creates failed\n", cf);
        bad = 1;
    }
    double tl = phase(&r, do_lookup);
    printf("result: lookup1_s %.3f\nresult: lookups1_per_s %.0f\n", tl, (double)r.n / tl);
    long lf = atomic_exchange(&r.failures, 0);
    if (lf) {
        printf("FAIL: %ld names not found (pass 1)\n", lf);
        bad = 1;
    }

    double t0 = now_s();
    struct resume rs = { &l, POM_COOKIE_START };
    for (;;) {
        uint64_t before = rs.next;
        rc = pom_readdir(r.fs, r.dir, rs.next, 0, resume_cb, &rs);
        if (rc < 0) {
            printf("FAIL: readdir: %s\n", strerror(-rc));
            bad = 1;
            break;
        }
        if (rc == 0 || rs.next == before)
            break;
    }
    long missing = 0;
    for (long i = 0; i < r.n; i++)
        missing += !l.seen[i];
    printf("result: list_s %.3f\nresult: listed %ld\nresult: list_dups %ld\n"
           "result: list_missing %ld\nresult: list_stray %ld\n",
           now_s() - t0, l.total, l.dup, missing, l.stray);
    if (l.dup || missing || l.stray || l.total != r.n) {
        printf("FAIL: the listing does not hold every name exactly once\n");
        bad = 1;
    }
    fflush(stdout);

    touch(sync_dir, "ready");
    wait_file(sync_dir, "go", 120);
    double t2 = phase(&r, do_lookup);
    printf("result: lookup2_s %.3f\nresult: lookups2_per_s %.0f\n", t2, (double)r.n / t2);
    lf = atomic_exchange(&r.failures, 0);
    if (lf) {
        printf("FAIL: %ld names not found (pass 2)\n", lf);
        bad = 1;
    }
    fflush(stdout);

    touch(sync_dir, "ready2");
    wait_file(sync_dir, "go2", 120);
    uint64_t seed = (uint64_t)getpid() * 7;
    long stale_bad = stl.bad;
    double t3 = now_s();
    for (int k = 0; k < STALE; k++) {
        for (int j = 0; stl.fs[k] && stl.dir[k] && j < STALE_LOOKUPS; j++) {
            long i = (long)(mix(&seed) % (uint64_t)r.n);
            char name[32];
            name_of(i, name, sizeof name);
            struct stat sb;
            int lrc = pom_lookup(stl.fs[k], stl.dir[k], name, &sb);
            if (lrc == 0 && sb.st_ino == r.uuid[i])
                pom_forget(stl.fs[k], sb.st_ino, 1);
            else if (stale_bad++ < 5)
                fprintf(stderr, "stale client %d: lookup %s: %s\n", k, name,
                        lrc ? strerror(-lrc) : "another file");
        }
        pom_close(stl.fs[k]);
    }
    printf("result: stale_clients %d\nresult: stale_lookups %d\nresult: stale_s %.3f\n", STALE,
           STALE * STALE_LOOKUPS, now_s() - t3);
    if (stale_bad) {
        printf("FAIL: %ld stale-client lookups failed\n", stale_bad);
        bad = 1;
    }
    fflush(stdout);
    touch(sync_dir, "done");
    pom_close(r.fs);
    free(r.uuid);
    free(l.seen);
    printf(bad ? "dist_driver: FAILED\n" : "dist_driver: all checks passed\n");
    return bad;
}
