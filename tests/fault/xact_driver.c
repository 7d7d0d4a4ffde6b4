/*
 * xact_driver.c -- the client of tests/fault/test_xact_crash.sh: a real
 * libpomegranate client (through R2) whose hard links, renames and
 * exchanges between directories are atomic batches with rows at several
 * MDS, coordinated by the MDS that receives them (docs/mds-xact.md), while
 * the script SIGKILLs the MDS at a transaction's crash point.
 *
 *   xact_driver R2ADDR FSNAME populate DIRS FILES LIST
 *       mkdir /x<k> for k < DIRS, mknod f<i> for i < FILES in each, then
 *       pom_sync; writes "<k> f<i> <uuid>" per file to LIST.
 *   xact_driver R2ADDR FSNAME churn SECONDS THREADS LIST OPLOG [STOPFILE]
 *       THREADS threads, for SECONDS or until STOPFILE exists, pick names
 *       from a shared pool (seeded with LIST; a name is used by one thread
 *       at a time) and do, between two different directories:
 *         link      a new name for the file (pom_link),
 *         rename    the name moves to a new name (POM_RENAME_NOREPLACE),
 *         exchange  two names swap (POM_RENAME_EXCHANGE),
 *       and in one directory:
 *         mkdir     a new subdirectory, rmdir  one this thread made (the
 *                   parent's nlink is a count delta at the MDS of the
 *                   parent's row: a transaction when that is another MDS).
 *       No op removes a file, so every file of LIST must keep a name. Every
 *       op's answer is written to OPLOG ("+S.mmm thread op args rc") and
 *       counted per op and errno. Links stop at 3 names per file on
 *       average (renames instead). Errors are tolerated (a killed MDS makes
 *       calls fail or retry): a name found gone leaves the pool. At the
 *       end, if STOPFILE holds a wall-clock time (the script's last MDS
 *       restart), every name an op answered 0 for after it must exist
 *       ("result: acked_names_lost"; the script fails on it).
 *   xact_driver R2ADDR FSNAME check DIRS LIST PASSES GAP_MS
 *       walks every /x<k>: each name listed once, each resolves (a link
 *       stub to its ILT row), with the inode it is listed with; for every
 *       uuid, nlink == the names found for it (subdirectories aside); every
 *       /x<k>'s nlink is 2 + the subdirectories listed in it; every file of
 *       LIST still has a name; the root's nlink is 2 + DIRS. A pass that finds a violation
 *       is repeated after GAP_MS (a pending row is visible until its
 *       resolver settled it: docs/mds-xact.md "Failure model"), up to PASSES; the
 *       last pass is the verdict. Exit 1 on any violation in it.
 *
 *   xact_driver R2ADDR FSNAME visible DIRS ROUNDS
 *       one thread, in each /x<k>: ROUNDS times mkdir v<r> then stat
 *       /x<k>, then rmdir each v<r> then stat /x<k>; every stat must show
 *       the count of that moment (2 + subdirectories) at once, also when
 *       /x<k>'s row sits at another MDS than the new entry (the count is
 *       an RMU then, shown before its delivery: mds/mds_soft.h). Exit 1 on
 *       any stat that shows another count.
 *   xact_driver R2ADDR FSNAME mkdirs DIRS N
 *       mkdir m<r> for r < N in each /x<k>, then pom_sync.
 *   xact_driver R2ADDR FSNAME nlinks DIRS WANT SECONDS
 *       stats every /x<k> (its row only: no slice of its own table is
 *       read) until each shows nlink WANT, for SECONDS at most; exit 1 if
 *       one does not (test_rmu_reload.sh).
 *   xact_driver R2ADDR FSNAME nest N
 *       mkdir /y<k>, /y<k>/a<k>, /y<k>/b<k>, rmdir /y<k>/a<k> for k < N, pom_sync,
 *       then rmdir /y<k> must answer -ENOTEMPTY for each (its table may
 *       hold a's outbox rows before b); exit 1 otherwise.
 *
 * The seed of the churn is printed (POM_XACT_SEED sets it). Prints
 * "result: KEY VALUE" lines.
 */
#include "pomegranate.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_DIRS 64
#define NAME_LEN 48
#define MAX_ERRNO 160
#define SHOWN 20

enum op { OP_LINK, OP_RENAME, OP_EXCHANGE, OP_MKDIR, OP_RMDIR, OP_MVDIR, OP__N };
static const char *const op_names[OP__N] = { "link",  "rename", "exchange",
                                             "mkdir", "rmdir",  "mvdir" };
#define MAX_SUBDIRS 64 /* per thread: mkdir waits for rmdir past it */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* splitmix64: the per-thread random stream. */
static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* The inodes of /x<k>, k < ndirs. */
static int find_dirs(pom_fs *fs, long ndirs, pom_ino *dir)
{
    for (long k = 0; k < ndirs; k++) {
        char dn[32];
        struct stat st;
        snprintf(dn, sizeof dn, "x%ld", k);
        int rc = pom_lookup(fs, POM_ROOT_INO, dn, &st);
        if (rc < 0) {
            fprintf(stderr, "lookup /%s: %s\n", dn, strerror(-rc));
            return rc;
        }
        dir[k] = st.st_ino;
    }
    return 0;
}

/* ---- visible ------------------------------------------------------------ */

/* Whether /x<k> shows nlink `want` now; prints the first misses. */
static bool shows(pom_fs *fs, pom_ino dir, long k, long want, long *shown)
{
    struct stat st;
    int rc = pom_getattr(fs, dir, &st);
    if (rc == 0 && (long)st.st_nlink == want)
        return true;
    if ((*shown)++ < SHOWN)
        printf("violation: /x%ld nlink %ld (rc %d), want %ld\n", k,
               rc < 0 ? -1L : (long)st.st_nlink, rc, want);
    return false;
}

static int visible(pom_fs *fs, long ndirs, long rounds)
{
    pom_ino dir[MAX_DIRS];
    if (ndirs < 1 || ndirs > MAX_DIRS || rounds < 1 || rounds > 1000 ||
        find_dirs(fs, ndirs, dir) < 0)
        return 2;
    long checks = 0, bad = 0, shown = 0;
    for (long k = 0; k < ndirs; k++) {
        struct stat st;
        if (pom_getattr(fs, dir[k], &st) < 0)
            return 1;
        long base = (long)st.st_nlink;
        for (long r = 0; r < rounds; r++) {
            char nn[NAME_LEN];
            snprintf(nn, sizeof nn, "v%ld", r);
            int rc = pom_mkdir(fs, dir[k], nn, 0755, NULL, &st);
            if (rc < 0) {
                printf("mkdir /x%ld/%s: %s\n", k, nn, strerror(-rc));
                return 1;
            }
            pom_forget(fs, st.st_ino, 1);
            checks++;
            bad += !shows(fs, dir[k], k, base + r + 1, &shown);
        }
        for (long r = 0; r < rounds; r++) {
            char nn[NAME_LEN];
            snprintf(nn, sizeof nn, "v%ld", r);
            int rc = pom_rmdir(fs, dir[k], nn);
            if (rc < 0) {
                printf("rmdir /x%ld/%s: %s\n", k, nn, strerror(-rc));
                return 1;
            }
            checks++;
            bad += !shows(fs, dir[k], k, base + rounds - r - 1, &shown);
        }
    }
    printf("result: visible_checks %ld\nresult: visible_violations %ld\n", checks, bad);
    return bad ? 1 : 0;
}

/* ---- mkdirs / nlinks (test_rmu_reload.sh) ---------------------------- */

/* n subdirectories m<r> in each /x<k>, then one sync: their parents'
 * counts are RMU outbox rows wherever a parent's row sits at the other
 * MDS. */
static int mkdirs(pom_fs *fs, long ndirs, long n)
{
    pom_ino dir[MAX_DIRS];
    if (ndirs < 1 || ndirs > MAX_DIRS || n < 1 || find_dirs(fs, ndirs, dir) < 0)
        return 2;
    for (long k = 0; k < ndirs; k++)
        for (long r = 0; r < n; r++) {
            char nn[NAME_LEN];
            struct stat st;
            snprintf(nn, sizeof nn, "m%ld", r);
            int rc = pom_mkdir(fs, dir[k], nn, 0755, NULL, &st);
            if (rc < 0) {
                printf("mkdir /x%ld/%s: %s\n", k, nn, strerror(-rc));
                return 1;
            }
            pom_forget(fs, st.st_ino, 1);
        }
    int rc = pom_sync(fs);
    printf("result: mkdirs %ld\nresult: sync %d\n", ndirs * n, rc);
    return rc < 0 ? 1 : 0;
}

/* Waits up to `seconds` until every /x<k> shows nlink `want`, by stat only
 * (nothing here loads a slice of /x<k>'s own table). */
static int nlinks(pom_fs *fs, long ndirs, long want, double seconds)
{
    pom_ino dir[MAX_DIRS];
    if (ndirs < 1 || ndirs > MAX_DIRS || find_dirs(fs, ndirs, dir) < 0)
        return 2;
    double t0 = now_s();
    long bad;
    for (;;) {
        long shown = SHOWN; /* quiet until the last try */
        bool last = now_s() - t0 >= seconds;
        if (last)
            shown = 0;
        bad = 0;
        for (long k = 0; k < ndirs; k++)
            bad += !shows(fs, dir[k], k, want, &shown);
        if (bad == 0 || last)
            break;
        sleep_ms(200);
    }
    printf("result: nlinks_s %.1f\nresult: nlinks_wrong %ld\n", now_s() - t0, bad);
    return bad ? 1 : 0;
}

/* /y<k> for k < n with subdirectories a<k> and b<k>, a<k> removed again,
 * then one sync: where /y<k>'s row sits at the other MDS, y<k>'s table keeps a's
 * RMU outbox rows (system rows placed by a's name) next to b, before it in
 * cookie order about half the time. Then every rmdir /y<k> must answer
 * -ENOTEMPTY: the emptiness check once read one page of one row, which a
 * system row first in order left empty. */
static int nest_rmdirs(pom_fs *fs, long n)
{
    if (n < 1 || n > MAX_DIRS)
        return 2;
    for (long k = 0; k < n; k++) {
        char dn[32];
        struct stat st, sst;
        snprintf(dn, sizeof dn, "y%ld", k);
        /* Names differ per directory: their order in cookies does too. */
        char a[32], b[32];
        snprintf(a, sizeof a, "a%ld", k);
        snprintf(b, sizeof b, "b%ld", k);
        int rc = pom_mkdir(fs, POM_ROOT_INO, dn, 0755, NULL, &st);
        if (rc == 0 && (rc = pom_mkdir(fs, st.st_ino, a, 0755, NULL, &sst)) == 0)
            pom_forget(fs, sst.st_ino, 1);
        if (rc == 0 && (rc = pom_mkdir(fs, st.st_ino, b, 0755, NULL, &sst)) == 0)
            pom_forget(fs, sst.st_ino, 1);
        if (rc == 0)
            rc = pom_rmdir(fs, st.st_ino, a);
        if (rc < 0) {
            printf("mkdir /%s/%s, /%s/%s or rmdir /%s/%s: %s\n", dn, a, dn, b, dn, a,
                   strerror(-rc));
            return 1;
        }
        pom_forget(fs, st.st_ino, 1);
    }
    int rc = pom_sync(fs);
    long wrong = 0;
    for (long k = 0; k < n && rc == 0; k++) {
        char dn[32];
        snprintf(dn, sizeof dn, "y%ld", k);
        int r = pom_rmdir(fs, POM_ROOT_INO, dn);
        if (r != -ENOTEMPTY && wrong++ < SHOWN)
            printf("violation: rmdir /%s (holding b%ld) answered %d, want -ENOTEMPTY\n", dn, k,
                   r);
    }
    printf("result: nest_sync %d\nresult: nest_rmdir_wrong %ld\n", rc, wrong);
    return rc < 0 || wrong ? 1 : 0;
}

/* ---- populate --------------------------------------------------------- */

static int populate(pom_fs *fs, long ndirs, long files, const char *list)
{
    FILE *out = fopen(list, "w");
    if (!out) {
        perror(list);
        return 1;
    }
    double t0 = now_s();
    long made = 0;
    for (long k = 0; k < ndirs; k++) {
        char dn[32];
        struct stat dst;
        snprintf(dn, sizeof dn, "x%ld", k);
        int rc = pom_mkdir(fs, POM_ROOT_INO, dn, 0755, NULL, &dst);
        if (rc < 0) {
            fprintf(stderr, "mkdir /%s: %s\n", dn, strerror(-rc));
            fclose(out);
            return 1;
        }
        for (long i = 0; i < files; i++) {
            char fn[32];
            struct stat st;
            snprintf(fn, sizeof fn, "f%ld", i);
            rc = pom_mknod(fs, dst.st_ino, fn, S_IFREG | 0644, 0, NULL, &st);
            if (rc < 0) {
                fprintf(stderr, "mknod /%s/%s: %s\n", dn, fn, strerror(-rc));
                fclose(out);
                return 1;
            }
            fprintf(out, "%ld %s %" PRIu64 "\n", k, fn, (uint64_t)st.st_ino);
            pom_forget(fs, st.st_ino, 1);
            made++;
        }
        pom_forget(fs, dst.st_ino, 1);
    }
    int rc = pom_sync(fs);
    fclose(out);
    printf("result: populated %ld\nresult: populate_s %.3f\n", made, now_s() - t0);
    if (rc < 0) {
        fprintf(stderr, "pom_sync: %s\n", strerror(-rc));
        return 1;
    }
    return 0;
}

/* The files of LIST: dir index, name, uuid. */
struct entry {
    long dir;
    char name[NAME_LEN];
    uint64_t uuid;
};

static long read_list(const char *list, struct entry **out)
{
    FILE *f = fopen(list, "r");
    if (!f) {
        perror(list);
        return -1;
    }
    size_t n = 0, cap = 256;
    struct entry *v = malloc(cap * sizeof *v);
    long k;
    char nm[NAME_LEN];
    uint64_t u;
    while (v && fscanf(f, "%ld %47s %" SCNu64, &k, nm, &u) == 3) {
        if (n == cap) {
            struct entry *nv = realloc(v, (cap *= 2) * sizeof *v);
            if (!nv) {
                free(v);
                v = NULL;
                break;
            }
            v = nv;
        }
        v[n].dir = k;
        snprintf(v[n].name, NAME_LEN, "%s", nm);
        v[n].uuid = u;
        n++;
    }
    fclose(f);
    if (!v)
        return -1;
    *out = v;
    return (long)n;
}

/* ---- churn ------------------------------------------------------------ */

/* A name of the pool: (dir, name); busy while a thread works on it. */
struct slot {
    long dir;
    char name[NAME_LEN];
    bool busy, gone;
    double born;         /* wall clock when the op that made the name started
                            (0: populated) */
};

struct churn {
    pom_fs *fs;
    pom_ino dir[MAX_DIRS];
    long ndirs;
    double t0, end;
    const char *stopfile;
    pthread_mutex_t mu;  /* slots, nslots, cap, log */
    struct slot *slots;
    size_t nslots, cap, max_names; /* links stop at max_names names */
    FILE *log;
    uint64_t seed;
    _Atomic long count[OP__N][MAX_ERRNO + 1]; /* [op][errno], errno 0: success */
    _Atomic long ops;
};

/* Takes a free slot of a directory other than avoid_dir (-1: any), busy;
 * *dir and name (NAME_LEN) get a copy of it (the array may move). */
static long take_slot(struct churn *c, uint64_t *rs, long avoid_dir, long *dir, char *name)
{
    pthread_mutex_lock(&c->mu);
    long got = -1;
    for (int tries = 0; tries < 64 && got < 0 && c->nslots > 0; tries++) {
        size_t i = (size_t)(rnd(rs) % c->nslots);
        struct slot *s = &c->slots[i];
        if (!s->busy && !s->gone && s->dir != avoid_dir) {
            s->busy = true;
            got = (long)i;
            *dir = s->dir;
            memcpy(name, s->name, NAME_LEN);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return got;
}

static void put_slot(struct churn *c, long i, bool gone)
{
    pthread_mutex_lock(&c->mu);
    c->slots[i].busy = false;
    c->slots[i].gone = c->slots[i].gone || gone;
    pthread_mutex_unlock(&c->mu);
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void add_slot(struct churn *c, long dir, const char *name, double born)
{
    pthread_mutex_lock(&c->mu);
    if (c->nslots == c->cap) {
        size_t cap = c->cap * 2;
        struct slot *v = realloc(c->slots, cap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&c->mu);
            return;
        }
        c->slots = v;
        c->cap = cap;
    }
    struct slot *s = &c->slots[c->nslots++];
    s->dir = dir;
    snprintf(s->name, NAME_LEN, "%s", name);
    s->busy = s->gone = false;
    s->born = born;
    pthread_mutex_unlock(&c->mu);
}

static void record(struct churn *c, int thread, enum op op, const char *args, int rc,
                   double started)
{
    int e = rc < 0 ? -rc : 0;
    atomic_fetch_add(&c->count[op][e > MAX_ERRNO ? MAX_ERRNO : e], 1);
    atomic_fetch_add(&c->ops, 1);
    pthread_mutex_lock(&c->mu);
    if (c->log)
        fprintf(c->log, "+%.3f t%d %s %s rc %d%s%s (%.0f ms)\n", now_s() - c->t0, thread,
                op_names[op], args, rc, rc < 0 ? " " : "", rc < 0 ? strerror(-rc) : "",
                (now_s() - started) * 1000);
    pthread_mutex_unlock(&c->mu);
}

static bool stopped(const struct churn *c)
{
    return now_s() >= c->end || (c->stopfile && access(c->stopfile, F_OK) == 0);
}

struct cworker {
    struct churn *c;
    int k;
};

/* A directory index other than d. */
static long other_dir(struct churn *c, uint64_t *rs, long d)
{
    long o = (long)(rnd(rs) % (uint64_t)(c->ndirs - 1));
    return o >= d ? o + 1 : o;
}

static void do_link(struct churn *c, int k, uint64_t *rs, long *seq)
{
    long sd;
    char sn[NAME_LEN], args[160], nn[NAME_LEN];
    long i = take_slot(c, rs, -1, &sd, sn);
    if (i < 0) {
        sleep_ms(1); /* every name busy or gone */
        return;
    }
    long td = other_dir(c, rs, sd);
    snprintf(nn, sizeof nn, "l%d_%ld", k, (*seq)++);
    snprintf(args, sizeof args, "x%ld/%s -> x%ld/%s", sd, sn, td, nn);
    double born = wall_s(), t_op = now_s();
    struct stat st;
    int rc = pom_lookup(c->fs, c->dir[sd], sn, &st);
    if (rc == 0) {
        struct stat lst;
        pom_ino ino = st.st_ino;
        rc = pom_link(c->fs, ino, c->dir[td], nn, &lst);
        if (rc == 0)
            pom_forget(c->fs, lst.st_ino, 1);
        pom_forget(c->fs, ino, 1);
        if (rc == 0)
            add_slot(c, td, nn, born);
    } else {
        strncat(args, " (its lookup)", sizeof args - strlen(args) - 1);
    }
    record(c, k, OP_LINK, args, rc, t_op);
    put_slot(c, i, rc == -ENOENT);
}

static void do_rename(struct churn *c, int k, uint64_t *rs, long *seq)
{
    long sd;
    char sn[NAME_LEN], args[160], nn[NAME_LEN];
    long i = take_slot(c, rs, -1, &sd, sn);
    if (i < 0) {
        sleep_ms(1); /* every name busy or gone */
        return;
    }
    long td = other_dir(c, rs, sd);
    snprintf(nn, sizeof nn, "r%d_%ld", k, (*seq)++);
    snprintf(args, sizeof args, "x%ld/%s -> x%ld/%s", sd, sn, td, nn);
    double born = wall_s(), t_op = now_s();
    int rc = pom_rename(c->fs, c->dir[sd], sn, c->dir[td], nn, POM_RENAME_NOREPLACE);
    if (rc == -ENOENT) {
        /* Which name is missing now: the source, or the target there? */
        struct stat st;
        int a = pom_lookup(c->fs, c->dir[sd], sn, &st);
        if (a == 0)
            pom_forget(c->fs, st.st_ino, 1);
        int b = pom_lookup(c->fs, c->dir[td], nn, &st);
        if (b == 0)
            pom_forget(c->fs, st.st_ino, 1);
        /* A source missing now that is back soon was hidden (a prepared
         * part of an aborted transaction, seen before its rollback). */
        double t1 = now_s(), back = -1;
        for (int i = 0; a == -ENOENT && i < 30 && back < 0; i++) {
            sleep_ms(50);
            if (pom_lookup(c->fs, c->dir[sd], sn, &st) == 0) {
                pom_forget(c->fs, st.st_ino, 1);
                back = now_s() - t1;
            }
        }
        char more[96];
        snprintf(more, sizeof more, " (then: source %d, target %d; source back after %.0f ms)",
                 a, b, back * 1000);
        strncat(args, more, sizeof args - strlen(args) - 1);
    }
    record(c, k, OP_RENAME, args, rc, t_op);
    if (rc == 0) {
        pthread_mutex_lock(&c->mu);
        c->slots[i].dir = td;
        c->slots[i].born = born;
        snprintf(c->slots[i].name, NAME_LEN, "%s", nn);
        pthread_mutex_unlock(&c->mu);
    }
    put_slot(c, i, rc == -ENOENT);
}

static void do_exchange(struct churn *c, int k, uint64_t *rs)
{
    char a[NAME_LEN], b[NAME_LEN], args[160];
    long ad, bd;
    long i = take_slot(c, rs, -1, &ad, a);
    if (i < 0) {
        sleep_ms(1); /* every name busy or gone */
        return;
    }
    long j = take_slot(c, rs, ad, &bd, b);
    if (j < 0) {
        put_slot(c, i, false);
        return;
    }
    snprintf(args, sizeof args, "x%ld/%s <-> x%ld/%s", ad, a, bd, b);
    double t_op = now_s();
    int rc = pom_rename(c->fs, c->dir[ad], a, c->dir[bd], b, POM_RENAME_EXCHANGE);
    record(c, k, OP_EXCHANGE, args, rc, t_op);
    /* -ENOENT: one of the two is gone, not known which: both leave. */
    put_slot(c, i, rc == -ENOENT);
    put_slot(c, j, rc == -ENOENT);
}

/* The subdirectories a thread made (and may remove). */
struct subdirs {
    long dir[MAX_SUBDIRS];
    char name[MAX_SUBDIRS][NAME_LEN];
    int n;
};

static void do_mkdir(struct churn *c, int k, uint64_t *rs, long *seq, struct subdirs *sd)
{
    if (sd->n == MAX_SUBDIRS)
        return;
    long d = (long)(rnd(rs) % (uint64_t)c->ndirs);
    char nn[NAME_LEN], args[160];
    snprintf(nn, sizeof nn, "d%d_%ld", k, (*seq)++);
    snprintf(args, sizeof args, "x%ld/%s", d, nn);
    double t_op = now_s();
    struct stat st;
    int rc = pom_mkdir(c->fs, c->dir[d], nn, 0755, NULL, &st);
    if (rc == 0)
        pom_forget(c->fs, st.st_ino, 1);
    record(c, k, OP_MKDIR, args, rc, t_op);
    /* Also after an error: it may have been made (a retried timeout); an
     * rmdir of it later answers 0 or -ENOENT. */
    sd->dir[sd->n] = d;
    snprintf(sd->name[sd->n++], NAME_LEN, "%s", nn);
}

static void do_rmdir(struct churn *c, int k, uint64_t *rs, struct subdirs *sd)
{
    if (sd->n == 0)
        return;
    int i = (int)(rnd(rs) % (uint64_t)sd->n);
    char args[160];
    snprintf(args, sizeof args, "x%ld/%s", sd->dir[i], sd->name[i]);
    double t_op = now_s();
    int rc = pom_rmdir(c->fs, c->dir[sd->dir[i]], sd->name[i]);
    record(c, k, OP_RMDIR, args, rc, t_op);
    if (rc == 0 || rc == -ENOENT) {
        sd->n--;
        sd->dir[i] = sd->dir[sd->n];
        memcpy(sd->name[i], sd->name[sd->n], NAME_LEN);
    }
}

/* A subdirectory moved to another directory under a new name: both
 * parents' counts and its GDT row change (copies, RMU), and the slices
 * it leaves may be left empty (which pom_readdir once took for the end of
 * the listing: names "lost" in a third of the runs). */
static void do_mvdir(struct churn *c, int k, uint64_t *rs, long *seq, struct subdirs *sd)
{
    if (sd->n == 0)
        return;
    int i = (int)(rnd(rs) % (uint64_t)sd->n);
    long d = other_dir(c, rs, sd->dir[i]);
    char nn[NAME_LEN], args[200];
    snprintf(nn, sizeof nn, "d%d_%ld", k, (*seq)++);
    snprintf(args, sizeof args, "x%ld/%s x%ld/%s", sd->dir[i], sd->name[i], d, nn);
    double t_op = now_s();
    int rc = pom_rename(c->fs, c->dir[sd->dir[i]], sd->name[i], c->dir[d], nn, 0);
    record(c, k, OP_MVDIR, args, rc, t_op);
    if (rc == 0) {
        sd->dir[i] = d;
        snprintf(sd->name[i], NAME_LEN, "%s", nn);
    } else if (rc != -ENOENT) {
        /* Moved or not (a retried timeout): forget it (the check walks
         * whatever is there). */
        sd->n--;
        sd->dir[i] = sd->dir[sd->n];
        memcpy(sd->name[i], sd->name[sd->n], NAME_LEN);
    }
}

static void *churn_main(void *arg)
{
    struct cworker *w = arg;
    struct churn *c = w->c;
    uint64_t rs = c->seed ^ ((uint64_t)(w->k + 1) * UINT64_C(0x632be59bd9b4e019));
    long seq = 0;
    static _Thread_local struct subdirs sd;
    while (!stopped(c)) {
        unsigned r = (unsigned)(rnd(&rs) % 13);
        pthread_mutex_lock(&c->mu);
        bool full = c->nslots >= c->max_names; /* links bounded: renames instead */
        pthread_mutex_unlock(&c->mu);
        if (r < 4 && !full)
            do_link(c, w->k, &rs, &seq);
        else if (r < 8)
            do_rename(c, w->k, &rs, &seq);
        else if (r < 10)
            do_exchange(c, w->k, &rs);
        else if (r == 10)
            do_mkdir(c, w->k, &rs, &seq, &sd);
        else if (r == 11)
            do_rmdir(c, w->k, &rs, &sd);
        else
            do_mvdir(c, w->k, &rs, &seq, &sd);
    }
    return NULL;
}

static int churn(pom_fs *fs, double seconds, int threads, const char *list, const char *oplog,
                 const char *stopfile)
{
    struct entry *e;
    long n = read_list(list, &e);
    if (n <= 0)
        return 1;
    static struct churn c; /* large (the counters): not on the stack */
    c.fs = fs;
    c.stopfile = stopfile;
    const char *seed = getenv("POM_XACT_SEED");
    c.seed = seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    printf("churn: seed %" PRIu64 " (POM_XACT_SEED), %d threads, %.0f s\n", c.seed, threads,
           seconds);
    fflush(stdout);
    for (long i = 0; i < n; i++)
        c.ndirs = e[i].dir + 1 > c.ndirs ? e[i].dir + 1 : c.ndirs;
    if (c.ndirs < 2 || c.ndirs > MAX_DIRS || find_dirs(fs, c.ndirs, c.dir) < 0) {
        free(e);
        return 1;
    }
    for (long k = 0; k < c.ndirs; k++)
        printf("churn: /x%ld is table %" PRIu64 "\n", k, (uint64_t)c.dir[k]);
    pthread_mutex_init(&c.mu, NULL);
    c.cap = (size_t)n * 4;
    c.max_names = (size_t)n * 3;
    c.slots = calloc(c.cap, sizeof *c.slots);
    if (!c.slots)
        return 1;
    for (long i = 0; i < n; i++) {
        c.slots[i].dir = e[i].dir;
        snprintf(c.slots[i].name, NAME_LEN, "%s", e[i].name);
    }
    c.nslots = (size_t)n;
    free(e);
    c.log = fopen(oplog, "w");
    if (c.log)
        setvbuf(c.log, NULL, _IOLBF, 0);
    c.t0 = now_s();
    c.end = c.t0 + seconds;
    pthread_t th[64];
    struct cworker w[64];
    if (threads < 1 || threads > 64)
        threads = 4;
    for (int k = 0; k < threads; k++) {
        w[k] = (struct cworker){ .c = &c, .k = k };
        pthread_create(&th[k], NULL, churn_main, &w[k]);
    }
    for (int k = 0; k < threads; k++)
        pthread_join(th[k], NULL);
    double dt = now_s() - c.t0;
    /* The names an op found gone (-ENOENT): there now? A name that is
     * back was hidden for a while (a prepared part seen before its
     * rollback), not lost. */
    long gone = 0, back = 0;
    for (size_t i = 0; i < c.nslots; i++) {
        if (!c.slots[i].gone)
            continue;
        gone++;
        struct stat st;
        int lrc = pom_lookup(fs, c.dir[c.slots[i].dir], c.slots[i].name, &st);
        if (lrc == 0) {
            back++;
            pom_forget(fs, st.st_ino, 1);
        }
        if (c.log)
            fprintf(c.log, "end: x%ld/%s found gone by an op: lookup now rc %d\n",
                    c.slots[i].dir, c.slots[i].name, lrc);
    }
    printf("result: names_found_gone %ld\nresult: of_them_there_at_the_end %ld\n", gone, back);
    /* The stop file holds the wall clock of the script's last MDS restart:
     * a name an op made (answered 0) after it must be there now, since no
     * MDS died since (the model follows every rename of it). */
    double calm = 0;
    FILE *sf = c.stopfile ? fopen(c.stopfile, "r") : NULL;
    if (sf) {
        if (fscanf(sf, "%lf", &calm) != 1)
            calm = 0;
        fclose(sf);
    }
    long after = 0, lost = 0;
    for (size_t i = 0; calm > 0 && i < c.nslots; i++) {
        if (c.slots[i].born <= calm)
            continue;
        after++;
        struct stat st;
        int lrc = pom_lookup(fs, c.dir[c.slots[i].dir], c.slots[i].name, &st);
        if (lrc == 0) {
            pom_forget(fs, st.st_ino, 1);
            continue;
        }
        if (lost++ < SHOWN)
            printf("lost: x%ld/%s, made by an op answered 0 that started %.3f s after the last "
                   "MDS restart: lookup now %d\n", c.slots[i].dir, c.slots[i].name,
                   c.slots[i].born - calm, lrc);
    }
    printf("result: names_made_after_restarts %ld\nresult: acked_names_lost %ld\n", after, lost);
    /* Whatever the coordinators acknowledged, made durable (an -EIO here
     * says an MDS restart lost acknowledged changes: counted, not failed). */
    int src = pom_sync(fs);
    printf("result: churn_s %.3f\nresult: churn_ops %ld\nresult: churn_ops_per_s %.0f\n"
           "result: final_sync %d\n", dt, atomic_load(&c.ops), (double)atomic_load(&c.ops) / dt,
           src);
    for (int o = 0; o < OP__N; o++) {
        printf("result: %s_ok %ld\n", op_names[o], atomic_load(&c.count[o][0]));
        for (int er = 1; er <= MAX_ERRNO; er++) {
            long v = atomic_load(&c.count[o][er]);
            if (v)
                printf("result: %s_errno_%d %ld (%s)\n", op_names[o], er, v, strerror(er));
        }
    }
    if (c.log)
        fclose(c.log);
    free(c.slots);
    return 0;
}

/* ---- check ------------------------------------------------------------ */

struct name_ent {
    char name[NAME_LEN];
    uint64_t ino;        /* as listed */
};

struct listing {
    struct name_ent *v;
    size_t n, cap;
    uint64_t next;
    bool nomem;
};

static int list_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    struct listing *l = arg;
    l->next = next;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        struct name_ent *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->nomem = true;
            return -ENOMEM;
        }
        l->v = v;
        l->cap = cap;
    }
    snprintf(l->v[l->n].name, NAME_LEN, "%s", name);
    l->v[l->n++].ino = (uint64_t)st->st_ino;
    return 0;
}

/* Names per uuid (open addressing; uuids are never 0). */
struct uuids {
    uint64_t *uuid;
    uint32_t *names, *nlink;
    size_t cap, used;
};

static size_t uslot(struct uuids *t, uint64_t u)
{
    size_t h = (size_t)((u * UINT64_C(0x9e3779b97f4a7c15)) >> 20) & (t->cap - 1);
    while (t->uuid[h] && t->uuid[h] != u)
        h = (h + 1) & (t->cap - 1);
    return h;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const struct name_ent *)a)->name, ((const struct name_ent *)b)->name);
}

struct verdict {
    long names, uuids, multi, subdirs, unresolved, ino_differs, dups, mismatches, lost_files,
        list_errors, lookup_errors, root_bad, dir_nlink_bad;
};

static long violations(const struct verdict *v)
{
    return v->unresolved + v->ino_differs + v->dups + v->mismatches + v->lost_files +
           v->list_errors + v->lookup_errors + v->root_bad + v->dir_nlink_bad;
}

/* One walk of every directory; prints the first violations. */
static int check_pass(pom_fs *fs, const pom_ino *dir, long ndirs, const struct entry *e, long ne,
                      struct verdict *out, bool verbose)
{
    struct verdict v = { 0 };
    struct uuids t = { .cap = 1 };
    while (t.cap < (size_t)ne * 16 + 64)
        t.cap <<= 1;
    t.uuid = calloc(t.cap, sizeof *t.uuid);
    t.names = calloc(t.cap, sizeof *t.names);
    t.nlink = calloc(t.cap, sizeof *t.nlink);
    if (!t.uuid || !t.names || !t.nlink)
        return -ENOMEM;
    long shown = 0;
#define SHOW(...)                                                                                 \
    do {                                                                                      \
        if (verbose && shown++ < SHOWN)                                                       \
            printf(__VA_ARGS__);                                                              \
    } while (0)
    for (long k = 0; k < ndirs; k++) {
        long subdirs = 0;
        struct listing l = { .next = POM_COOKIE_START };
        for (;;) {
            uint64_t before = l.next;
            int rc = pom_readdir(fs, dir[k], l.next, 0, list_cb, &l);
            if (rc < 0) {
                v.list_errors++;
                SHOW("violation: readdir /x%ld: %s\n", k, strerror(-rc));
                break;
            }
            if (rc == 0 || l.next == before)
                break;
        }
        qsort(l.v, l.n, sizeof *l.v, cmp_name);
        for (size_t j = 0; j < l.n; j++) {
            if (j > 0 && strcmp(l.v[j].name, l.v[j - 1].name) == 0) {
                v.dups++;
                SHOW("violation: /x%ld/%s listed twice\n", k, l.v[j].name);
                continue;
            }
            v.names++;
            struct stat st;
            int rc = pom_lookup(fs, dir[k], l.v[j].name, &st);
            if (rc == -ENOENT) {
                v.unresolved++;
                SHOW("violation: /x%ld/%s (uuid %" PRIu64 ") listed but does not resolve "
                     "(a name without its ILT row)\n", k, l.v[j].name, l.v[j].ino);
                continue;
            }
            if (rc < 0) {
                v.lookup_errors++;
                SHOW("violation: lookup /x%ld/%s: %s\n", k, l.v[j].name, strerror(-rc));
                continue;
            }
            pom_forget(fs, st.st_ino, 1);
            if ((uint64_t)st.st_ino != l.v[j].ino) {
                v.ino_differs++;
                SHOW("violation: /x%ld/%s listed as uuid %" PRIu64 ", resolves to %" PRIu64
                     "\n", k, l.v[j].name, l.v[j].ino, (uint64_t)st.st_ino);
            }
            if (S_ISDIR(st.st_mode)) { /* made by mkdir: counted for its parent */
                subdirs++;
                continue;
            }
            if (t.used * 2 >= t.cap)
                continue; /* sized for 8x the files' names: never */
            size_t h = uslot(&t, (uint64_t)st.st_ino);
            if (!t.uuid[h]) {
                t.uuid[h] = (uint64_t)st.st_ino;
                t.used++;
            }
            t.names[h]++;
            t.nlink[h] = (uint32_t)st.st_nlink;
        }
        free(l.v);
        v.subdirs += subdirs;
        struct stat dst;
        int rc = pom_getattr(fs, dir[k], &dst);
        if (rc < 0 || dst.st_nlink != (nlink_t)(2 + subdirs)) {
            v.dir_nlink_bad++;
            SHOW("violation: /x%ld nlink %ld (rc %d), want 2 + %ld subdirectories\n", k,
                 rc < 0 ? -1L : (long)dst.st_nlink, rc, subdirs);
        }
    }
    for (size_t h = 0; h < t.cap; h++) {
        if (!t.uuid[h])
            continue;
        v.uuids++;
        v.multi += t.names[h] > 1;
        if (t.names[h] != t.nlink[h]) {
            v.mismatches++;
            SHOW("violation: uuid %" PRIu64 " has nlink %u, %u names\n", t.uuid[h],
                 t.nlink[h], t.names[h]);
        }
    }
    for (long i = 0; i < ne; i++) {
        size_t h = uslot(&t, e[i].uuid);
        if (!t.uuid[h]) {
            v.lost_files++;
            SHOW("violation: file uuid %" PRIu64 " (first /x%ld/%s) has no name left\n",
                 e[i].uuid, e[i].dir, e[i].name);
        }
    }
    struct stat rst;
    int rc = pom_getattr(fs, POM_ROOT_INO, &rst);
    if (rc < 0 || rst.st_nlink != (nlink_t)(2 + ndirs)) {
        v.root_bad++;
        SHOW("violation: root nlink %ld (rc %d), want %ld\n", rc < 0 ? -1L : (long)rst.st_nlink,
             rc, 2 + ndirs);
    }
#undef SHOW
    free(t.uuid);
    free(t.names);
    free(t.nlink);
    *out = v;
    return 0;
}

static int check(pom_fs *fs, long ndirs, const char *list, int passes, long gap_ms)
{
    struct entry *e;
    long ne = read_list(list, &e);
    pom_ino dir[MAX_DIRS];
    if (ne <= 0 || ndirs < 1 || ndirs > MAX_DIRS || find_dirs(fs, ndirs, dir) < 0)
        return 1;
    struct verdict v = { 0 };
    double t0 = now_s();
    int pass = 0;
    for (pass = 1; pass <= passes; pass++) {
        bool last = pass == passes;
        if (check_pass(fs, dir, ndirs, e, ne, &v, true) < 0) {
            free(e);
            return 1;
        }
        long bad = violations(&v);
        printf("check pass %d: %ld names, %ld uuids (%ld with several names), %ld "
               "subdirectories, %ld violations: unresolved %ld, ino_differs %ld, dups %ld, "
               "nlink_mismatches %ld, lost_files %ld, list_errors %ld, lookup_errors %ld, "
               "root_bad %ld, dir_nlink_bad %ld\n",
               pass, v.names, v.uuids, v.multi, v.subdirs, bad, v.unresolved, v.ino_differs,
               v.dups, v.mismatches, v.lost_files, v.list_errors, v.lookup_errors, v.root_bad,
               v.dir_nlink_bad);
        fflush(stdout);
        if (bad == 0 || last)
            break;
        sleep_ms(gap_ms);
    }
    long bad = violations(&v);
    printf("result: check_passes %d\nresult: check_s %.3f\nresult: names %ld\nresult: uuids %ld\n"
           "result: multi_name_uuids %ld\nresult: violations %ld\n", pass > passes ? passes : pass,
           now_s() - t0, v.names, v.uuids, v.multi, bad);
    free(e);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
    usage:
        fprintf(stderr,
                "usage: xact_driver R2ADDR FSNAME populate DIRS FILES LIST\n"
                "       xact_driver R2ADDR FSNAME churn SECONDS THREADS LIST OPLOG [STOPFILE]\n"
                "       xact_driver R2ADDR FSNAME check DIRS LIST PASSES GAP_MS\n"
                "       xact_driver R2ADDR FSNAME visible DIRS ROUNDS\n"
                "       xact_driver R2ADDR FSNAME mkdirs DIRS N\n"
                "       xact_driver R2ADDR FSNAME nlinks DIRS WANT SECONDS\n"
                "       xact_driver R2ADDR FSNAME nest N\n");
        return 2;
    }
    const char *cmd = argv[3];
    bool ok = (strcmp(cmd, "populate") == 0 && argc == 7) ||
              (strcmp(cmd, "churn") == 0 && (argc == 8 || argc == 9)) ||
              (strcmp(cmd, "check") == 0 && argc == 8) ||
              (strcmp(cmd, "visible") == 0 && argc == 6) ||
              (strcmp(cmd, "mkdirs") == 0 && argc == 6) ||
              (strcmp(cmd, "nlinks") == 0 && argc == 7) ||
              (strcmp(cmd, "nest") == 0 && argc == 5);
    if (!ok)
        goto usage;
    setvbuf(stdout, NULL, _IOLBF, 0);
    pom_fs *fs;
    int rc = pom_open(argv[1], argv[2], &fs);
    if (rc < 0) {
        fprintf(stderr, "pom_open %s %s: %s\n", argv[1], argv[2], strerror(-rc));
        return 1;
    }
    int ret;
    if (strcmp(cmd, "populate") == 0) {
        long d = atol(argv[4]);
        ret = d < 2 || d > MAX_DIRS ? 2 : populate(fs, d, atol(argv[5]), argv[6]);
    } else if (strcmp(cmd, "churn") == 0) {
        ret = churn(fs, atof(argv[4]), atoi(argv[5]), argv[6], argv[7], argc == 9 ? argv[8] : NULL);
    } else if (strcmp(cmd, "visible") == 0) {
        ret = visible(fs, atol(argv[4]), atol(argv[5]));
    } else if (strcmp(cmd, "mkdirs") == 0) {
        ret = mkdirs(fs, atol(argv[4]), atol(argv[5]));
    } else if (strcmp(cmd, "nest") == 0) {
        ret = nest_rmdirs(fs, atol(argv[4]));
    } else if (strcmp(cmd, "nlinks") == 0) {
        ret = nlinks(fs, atol(argv[4]), atol(argv[5]), atof(argv[6]));
    } else {
        ret = check(fs, atol(argv[4]), argv[5], atoi(argv[6]), atol(argv[7]));
    }
    pom_close(fs);
    return ret;
}
