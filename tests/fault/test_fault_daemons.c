/*
 * test_fault_daemons.c -- countdown faults in the real daemons.
 *
 * Each run starts pom-mdsl + pom-mds with one fault switched on through
 * the test-only --fault option (docs/testing-faults.md), chosen from a
 * seeded generator:
 *   - pom-mdsl "io:eio:after=N"          one I/O op fails with -EIO,
 *   - pom-mdsl "io:enospc:after=N:sticky" every I/O op from the N-th fails,
 *   - pom-mdsl "alloc:after=N"           every allocation from the N-th fails,
 *   - pom-mds  "alloc:after=N"           the same in the MDS,
 * (a pom-mdsl that exits at start, or a pom-mds that waits at start for
 * a store refusing writes and is then killed, are clean outcomes too),
 * runs a small workload through libpomegranate (files created, written and
 * synced in batches; the files of a batch whose pom_sync answered 0 are
 * "acknowledged"), and checks that every call ends with 0 or a clean
 * -errno within a bound (no hang) and that no daemon crashed (died on its
 * own, or exited with a sanitizer's code 66). Then both daemons restart
 * without faults and the whole tree is checked through the library: every
 * acknowledged file of every run so far reads back exactly, every entry of
 * the root can be looked up and read (a dangling entry counts as lost).
 * The data folder is kept across runs, so later runs recover what earlier
 * faulted runs left behind.
 *
 * Environment: XT_SEED (default: the clock), POM_FAULT_RUNS (default 40),
 * POM_FAULT_KIND (0..3: only that kind of fault, in the order above).
 * Prints "fault runs: N, crashes: C, lost: L".
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fault_util.h"
#include "pom_proc.h"
#include "pom_rand.h"
#include "pomegranate.h"
#include "xt_common.h"

#define FSID       23
#define FILE_LEN   2048
#define PER_RUN    48      /* files a run tries to create */
#define BATCH      8       /* files per pom_sync */
#define MAX_ACKED  4096
#define CALL_MAX_S 40      /* a library call over this long is a hang */
#define FAILS_IN_ROW 4     /* a run stops after this many failed calls in a row */
/* Countdown ranges, sized so most runs trip inside the workload (pom-mdsl
 * logs "--fault: N I/O ops counted" at exit: ~105 per run). */
#define IO_RANGE          120
#define MDSL_ALLOC_RANGE  300
#define MDS_ALLOC_RANGE   1000

static struct fault_cluster C;
static const char *const MDSL_ARGS[] = { "--seg-size", "256K", "--gc-interval", "100",
                                         "--gc-rate", "0", NULL };

/* Acknowledged files: name index (run << 8 | k). */
static uint32_t acked[MAX_ACKED];
static size_t nacked;

static uint64_t seed;
static unsigned runs = 40;
static int only_kind = -1; /* POM_FAULT_KIND: run only this kind */

enum kind { K_MDSL_EIO, K_MDSL_ENOSPC, K_MDSL_ALLOC, K_MDS_ALLOC, K_COUNT };
static const char *kind_name[] = { "mdsl io:eio", "mdsl io:enospc:sticky", "mdsl alloc",
                                   "mds alloc" };

static uint64_t slowest_ms;

/* Watchdog: a run that does not finish in RUN_MAX_S is a hang (a call that
 * never returns is not caught by TIMED). The daemons die with the test
 * (PR_SET_PDEATHSIG). */
#define RUN_MAX_S 150
static volatile sig_atomic_t cur_run;

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "fault: HANG: a run did not finish in time\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(3);
}

/* Times one library call; a call past CALL_MAX_S fails the test. */
#define TIMED(expr)                                                              \
    ({                                                                           \
        uint64_t t0_ = xt_mono_ns();                                             \
        int rc_ = (expr);                                                        \
        uint64_t ms_ = (xt_mono_ns() - t0_) / 1000000u;                          \
        if (ms_ > slowest_ms)                                                    \
            slowest_ms = ms_;                                                    \
        if (ms_ > CALL_MAX_S * 1000u)                                            \
            fail_msg("%s took %llu ms", #expr, (unsigned long long)ms_);        \
        rc_;                                                                     \
    })

/* Whether rc is a clean answer of a faulted system. */
static bool clean(int rc)
{
    return rc == 0 || rc == -EIO || rc == -ENOSPC || rc == -ENOMEM || rc == -ETIMEDOUT ||
           rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -EAGAIN || rc == -ESHUTDOWN ||
           rc == -EEXIST || rc == -EPIPE;
}

static void name_of(uint32_t id, char *buf, size_t len)
{
    snprintf(buf, len, "r%03u-%03u", id >> 8, id & 0xff);
}

/* The workload of run r; returns the number of calls that failed. */
static unsigned workload(uint32_t r, unsigned *errs_seen)
{
    struct pom_opts o = { .call_timeout_ms = 3000, .retry_ms = 3000 };
    pom_fs *fs = NULL;
    int rc = TIMED(pom_connect_mds_opts(C.mds_addr, FSID, &o, &fs));
    assert_true(clean(rc));
    if (rc < 0)
        return 1;
    unsigned failed = 0, in_row = 0;
    uint32_t pending[BATCH];
    size_t np = 0;
    for (uint32_t k = 0; k < PER_RUN; k++) {
        uint32_t id = r << 8 | k;
        char name[32];
        name_of(id, name, sizeof name);
        rc = TIMED(fault_write_file(fs, POM_ROOT_INO, name, id, FILE_LEN));
        if (!clean(rc))
            fail_msg("run %u: write %s: %s", r, name, strerror(-rc));
        if (rc < 0) {
            failed++, (*errs_seen)++;
            np = 0; /* the batch is not acknowledged */
            if (++in_row == FAILS_IN_ROW)
                break; /* the system is down (each call waits out the retry window) */
            continue;
        }
        in_row = 0;
        pending[np++] = id;
        if (np == BATCH) {
            rc = TIMED(pom_sync(fs));
            if (!clean(rc))
                fail_msg("run %u: sync: %s", r, strerror(-rc));
            if (rc == 0) {
                for (size_t i = 0; i < np && nacked < MAX_ACKED; i++)
                    acked[nacked++] = pending[i];
            } else {
                failed++, (*errs_seen)++;
                if (++in_row == FAILS_IN_ROW)
                    break;
            }
            np = 0;
        }
    }
    pom_close(fs);
    return failed;
}

struct walk {
    pom_fs *fs;
    unsigned bad, seen;
    uint64_t next;      /* cookie to resume after the last entry taken */
};

static int walk_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    struct walk *w = arg;
    w->seen++;
    w->next = next;
    unsigned rr, kk;
    if (!S_ISREG(st->st_mode) || sscanf(name, "r%3u-%3u", &rr, &kk) != 2) {
        w->bad++;
        return 0;
    }
    /* An entry that exists must be whole: either its full content (the
     * create, write and release all committed) or, for an unacknowledged
     * file, empty (the create committed, the data did not). */
    uint32_t id = rr << 8 | kk;
    struct stat a;
    if (pom_lookup(w->fs, POM_ROOT_INO, name, &a) != 0) {
        w->bad++;
        return 0;
    }
    pom_forget(w->fs, a.st_ino, 1);
    if (a.st_size != 0 && fault_check_file(w->fs, POM_ROOT_INO, name, id, FILE_LEN) != 0) {
        fprintf(stderr, "fault: %s: bad content (size %lld)\n", name, (long long)a.st_size);
        w->bad++;
    }
    return 0;
}

/* Restarted without faults: every acknowledged file is whole; the root
 * lists only well-formed entries. Returns the number lost or corrupt. */
static unsigned verify(void)
{
    struct pom_opts o = { .call_timeout_ms = 10000, .retry_ms = 20000 };
    pom_fs *fs = NULL;
    assert_int_equal(pom_connect_mds_opts(C.mds_addr, FSID, &o, &fs), 0);
    unsigned lost = 0;
    for (size_t i = 0; i < nacked; i++) {
        char name[32];
        name_of(acked[i], name, sizeof name);
        int rc = fault_check_file(fs, POM_ROOT_INO, name, acked[i], FILE_LEN);
        if (rc != 0) {
            fprintf(stderr, "fault: acknowledged %s: %s\n", name, strerror(-rc));
            lost++;
        }
    }
    struct walk w = { .fs = fs };
    for (int n = 1; n > 0;) {
        n = pom_readdir(fs, POM_ROOT_INO, w.next, 0, walk_cb, &w);
        assert_true(n >= 0);
    }
    pom_close(fs);
    return lost + w.bad;
}

static void countdown_runs(void **state)
{
    (void)state;
    rng_state = seed;
    unsigned crashes = 0, lost = 0, start_fail = 0, start_wait = 0, errs = 0;
    unsigned per_kind[K_COUNT] = { 0 };
    assert_int_equal(fault_cluster_init(&C, "fdaemons", POM_MDSL_BIN, POM_MDS_BIN), 0);
    for (uint32_t r = 0; r < runs; r++) {
        enum kind k = only_kind >= 0 ? (enum kind)only_kind : (enum kind)(r % K_COUNT);
        long n;
        char spec[64];
        switch (k) {
        case K_MDSL_EIO:
            n = (long)(rnd() % IO_RANGE);
            snprintf(spec, sizeof spec, "io:eio:after=%ld", n);
            break;
        case K_MDSL_ENOSPC:
            n = (long)(rnd() % IO_RANGE);
            snprintf(spec, sizeof spec, "io:enospc:after=%ld:sticky", n);
            break;
        default:
            n = (long)(rnd() % (k == K_MDS_ALLOC ? MDS_ALLOC_RANGE : MDSL_ALLOC_RANGE));
            snprintf(spec, sizeof spec, "alloc:after=%ld", n);
            break;
        }
        per_kind[k]++;
        bool on_mds = k == K_MDS_ALLOC;
        cur_run = (sig_atomic_t)r;
        alarm(RUN_MAX_S);
        C.start_wait_ms = 8000;
        int rc = fault_start_mdsl(&C, on_mds ? NULL : spec, MDSL_ARGS);
        if (rc == 0)
            rc = fault_start_mds(&C, on_mds ? spec : NULL, 50);
        C.start_wait_ms = 0;
        unsigned failed = 0;
        if (rc == -ECHILD) {
            start_fail++; /* refused to start (a fault during recovery): clean */
        } else if (rc == -ETIMEDOUT && pom_proc_alive(C.mds)) {
            /* pom-mds waits at start for its storage (its epoch claim in
             * doubt at a store that refuses writes until restarted); it
             * does not take SIGTERM before serving: kill it, as an
             * operator would. */
            start_wait++;
            pom_proc_kill(C.mds, SIGKILL);
            pom_proc_wait(C.mds, 10000, NULL);
            C.mds = 0;
        } else {
            assert_int_equal(rc, 0);
            failed = workload(r, &errs);
            if (!pom_proc_alive(C.mdsl) || !pom_proc_alive(C.mds))
                fprintf(stderr, "fault: run %u (%s): a daemon died\n", r, spec);
        }
        unsigned c = (unsigned)fault_cluster_stop(&C);
        crashes += c;
        assert_int_equal(fault_start_mdsl(&C, NULL, MDSL_ARGS), 0);
        assert_int_equal(fault_start_mds(&C, NULL, 50), 0);
        unsigned l = verify();
        lost += l;
        crashes += (unsigned)fault_cluster_stop(&C);
        printf("run %2u: %-22s %-28s %2u failed calls, %zu acknowledged so far%s%s\n", r,
               kind_name[k], spec, failed, nacked, c ? ", CRASH" : "", l ? ", LOST" : "");
        fflush(stdout);
    }
    alarm(0);
    printf("fault runs: %u, crashes: %u, lost: %u (start refused %u, start waiting %u, "
           "failed calls %u, slowest call %llu ms, seed %llu)\n",
           runs, crashes, lost, start_fail, start_wait, errs, (unsigned long long)slowest_ms,
           (unsigned long long)seed);
    (void)per_kind;
    fault_cluster_destroy(&C);
    assert_int_equal(crashes, 0);
    assert_int_equal(lost, 0);
    assert_true(nacked > 0);
}

int main(void)
{
    fault_env_init();
    signal(SIGALRM, on_alarm);
    seed = base_seed();
    const char *n = getenv("POM_FAULT_RUNS");
    if (n && atoi(n) > 0)
        runs = (unsigned)atoi(n);
    const char *k = getenv("POM_FAULT_KIND");
    if (k && atoi(k) >= 0 && atoi(k) < K_COUNT)
        only_kind = atoi(k);
    printf("seed %llu (XT_SEED), %u runs (POM_FAULT_RUNS)\n", (unsigned long long)seed,
           runs);
    const struct CMUnitTest tests[] = { cmocka_unit_test(countdown_runs) };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
