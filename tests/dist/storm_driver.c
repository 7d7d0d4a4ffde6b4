/*
 * storm_driver.c -- the client side of the online-scaling test (tests/dist/
 * test_dist_scale.sh, docs/mds-dist.md): libpomegranate through
 * R2, T threads creating N files in ONE directory while the script adds an
 * MDS, drains one and SIGKILLs (and restarts) another; then what was
 * synced must be there and every file's nlink must match its names.
 *
 *   storm_driver R2ADDR FSNAME N THREADS SYNC_DIR
 *
 * Thread k creates f<i> for i = k, k + T, ... < N in /s<pid> (pom_mknod);
 * for i % 50 == 0 it also links the file as l<i> in /links<pid>
 * (pom_link), and for i % 100 == 0 renames that l<i> to r<i> there. Every
 * 500 creates the thread calls pom_sync:
 *   0    -> every op it finished before the call is "synced": it must
 *           hold at the end (the file exists with its uuid, the link or
 *           renamed name too);
 *   -EIO -> the ops since its last good sync are "not guaranteed" (the
 *           MDS that acknowledged them failed or restarted first): counted,
 *           and checked afterwards only for how many exist.
 * pom_sync says -EIO once per pom_fs (to whichever sync sees the loss
 * first), so the driver runs its syncs one at a time (sync_mu) and counts
 * every -EIO: a 0 that follows someone else's -EIO since this thread's
 * last good sync is treated as -EIO too.
 *
 * Errors: -ETIMEDOUT (the library's retry window ran out) is retried and
 * counted ("retried timeouts"); -EEXIST on a create or link the thread
 * already tried is its own earlier attempt that landed (the uuid is then
 * read back); -ENOENT on a rename retried after a timeout whose target
 * holds the file, the same; -ENOENT from a first link (or its lookup) of
 * a file not synced yet, or from a first rename of a link not synced yet,
 * is that file or link lost with an MDS killed before its commit: the sync
 * that covers it must then say -EIO, or the run fails. Anything else
 * from any call is printed (op, name, errno) and fails the run.
 *
 * Progress: when the files created (all threads) reach 25%, 50%, 75% of N
 * the driver touches SYNC_DIR/p25 (p50, p75), holds every thread and waits
 * for SYNC_DIR/go25 (go50, go75; at most 300 s): the script starts each
 * event, then lets the storm go on. After the threads finished it waits for
 * SYNC_DIR/events_done (at most 600 s), makes one last sync, and checks:
 *   1. every synced file (and link / renamed name) is there, same uuid;
 *   2. how many of the not-guaranteed files exist (printed only);
 *   3. a listing of /s<pid>: each name at most once, every synced one in it;
 *   4. nlink: both directories walked, every name looked up (following
 *      links), names counted per uuid; each uuid's nlink must equal its
 *      names, synced or not (mismatches printed, up to 20; walked again
 *      up to 5 times, 2 s apart, while the resolvers settle transactions
 *      cut by the kill).
 * Each pom_sync's time is written to SYNC_DIR/syncs.log; a sync over 20 s
 * fails the run (a stopped MDS must not stall pom_sync). Prints "result:"
 * lines and "check: ... ok|FAILED" lines. Exit 0 when every check held.
 */
#include "pomegranate.h"

#include <errno.h>
#include <fcntl.h>
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

#define SYNC_EVERY 500
#define LINK_EVERY 50
#define RENAME_EVERY 100
#define SYNC_SLOW_S 20.0
#define ATTEMPTS 5       /* tries of one op that timed out */
#define ERRS_PRINTED 200

/* Per-file op bits (state, synced). */
/* F_DEP_GONE: a link or rename found what it works on (unsynced) gone. */
enum { F_CREATED = 1, F_LINKED = 2, F_RENAMED = 4, F_DEP_GONE = 8 };

struct storm {
    pom_fs *fs;
    pom_ino dir, links;
    long n;
    int threads;
    const char *sync_dir;
    /* Per file; written only by the file's thread (i % threads), read by
     * main after the join. */
    uint64_t *uuid;
    uint8_t *state;      /* F_* done */
    uint8_t *synced;     /* F_* covered by a good sync */
    uint8_t *noguar;     /* 1: an -EIO sync concerned it */
    uint32_t *done_ms;   /* when its ops finished, ms since t0 (reports) */
    double t0;
    _Atomic long created, errors, timeouts, eexist_own;
    /* The storm's gate at 25/50/75%: -1 open, else the mark being held. */
    _Atomic int held;
    _Atomic int next_mark;
    /* One sync at a time (see the head comment); the fields below too. */
    pthread_mutex_t sync_mu;
    long eio_events, syncs, syncs_slow, syncs_eio, syncs_err;
    double sync_max, sync_total;
    FILE *synclog;
};

struct worker {
    struct storm *s;
    int k;
    long pend_from;      /* the first of its files not yet covered by a sync */
    long eio_seen;       /* s->eio_events at its last good sync */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void unexpected(struct storm *s, const char *op, const char *name, int rc)
{
    if (atomic_fetch_add(&s->errors, 1) < ERRS_PRINTED)
        fprintf(stderr, "unexpected: %s %s: errno %d (%s)\n", op, name, -rc, strerror(-rc));
}

static void touch(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0)
        close(fd);
}

static bool wait_file(const char *dir, const char *name, int timeout_s)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    for (int i = 0; i < timeout_s * 20; i++) {
        if (access(p, F_OK) == 0)
            return true;
        usleep(50000);
    }
    return false;
}

/* Counts a finished create; the thread that crosses a mark holds the storm
 * until the script's go file. */
static void progress(struct storm *s)
{
    static const int pct[3] = { 25, 50, 75 };
    long c = atomic_fetch_add(&s->created, 1) + 1;
    int m = atomic_load(&s->next_mark);
    if (m >= 3 || c < s->n * pct[m] / 100 ||
        !atomic_compare_exchange_strong(&s->next_mark, &m, m + 1))
        return;
    atomic_store(&s->held, m);
    char p[16], g[16];
    snprintf(p, sizeof p, "p%d", pct[m]);
    snprintf(g, sizeof g, "go%d", pct[m]);
    printf("progress: %d%% (%ld files)\n", pct[m], c);
    fflush(stdout);
    touch(s->sync_dir, p);
    if (!wait_file(s->sync_dir, g, 300))
        fprintf(stderr, "no %s from the script within 300 s: going on\n", g);
    atomic_store(&s->held, -1);
}

static void wait_gate(struct storm *s)
{
    while (atomic_load(&s->held) >= 0)
        usleep(10000);
}

static bool timed_out(struct storm *s, int rc, int attempt)
{
    if (rc != -ETIMEDOUT || attempt + 1 >= ATTEMPTS)
        return false;
    atomic_fetch_add(&s->timeouts, 1);
    return true;
}

/* f<i>: 0 when it exists (uuid recorded), -1 when not. */
static int do_create(struct storm *s, long i)
{
    char name[32];
    snprintf(name, sizeof name, "f%ld", i);
    for (int attempt = 0;; attempt++) {
        struct stat st;
        int rc = pom_mknod(s->fs, s->dir, name, S_IFREG | 0644, 0, NULL, &st);
        if (rc == -EEXIST && attempt > 0) { /* our timed-out attempt landed */
            atomic_fetch_add(&s->eexist_own, 1);
            rc = pom_lookup(s->fs, s->dir, name, &st);
            if (rc < 0) {
                unexpected(s, "lookup (after -EEXIST)", name, rc);
                return -1;
            }
        }
        if (rc == 0) {
            s->uuid[i] = (uint64_t)st.st_ino;
            s->state[i] |= F_CREATED;
            pom_forget(s->fs, st.st_ino, 1);
            return 0;
        }
        if (!timed_out(s, rc, attempt)) {
            unexpected(s, "create", name, rc);
            return -1;
        }
    }
}

/* l<i> in links/ for file i (known: looked up for the ref pom_link needs). */
static void do_link(struct storm *s, long i)
{
    char name[32], lname[32];
    snprintf(name, sizeof name, "f%ld", i);
    snprintf(lname, sizeof lname, "l%ld", i);
    struct stat st;
    int rc = pom_lookup(s->fs, s->dir, name, &st);
    if (rc == -ENOENT && !(s->synced[i] & F_CREATED)) {
        s->state[i] |= F_DEP_GONE; /* checked by the sync that covers it */
        return;
    }
    if (rc < 0) {
        unexpected(s, "lookup (to link)", name, rc);
        return;
    }
    for (int attempt = 0;; attempt++) {
        struct stat lst;
        rc = pom_link(s->fs, st.st_ino, s->links, lname, &lst);
        if (rc == -EEXIST && attempt > 0) {
            atomic_fetch_add(&s->eexist_own, 1);
            rc = pom_lookup(s->fs, s->links, lname, &lst);
            if (rc == 0 && (uint64_t)lst.st_ino != s->uuid[i]) {
                pom_forget(s->fs, lst.st_ino, 1);
                rc = -EEXIST;
            }
        }
        if (rc == 0) {
            pom_forget(s->fs, lst.st_ino, 1);
            s->state[i] |= F_LINKED;
            break;
        }
        if (rc == -ENOENT && attempt == 0 && !(s->synced[i] & F_CREATED)) {
            s->state[i] |= F_DEP_GONE; /* checked by the sync that covers it */
            break;
        }
        if (!timed_out(s, rc, attempt)) {
            unexpected(s, "link", lname, rc);
            break;
        }
    }
    pom_forget(s->fs, st.st_ino, 1);
}

/* Whether name in dir holds uuid now. */
static bool holds(struct storm *s, pom_ino dir, const char *name, uint64_t uuid)
{
    struct stat st;
    if (pom_lookup(s->fs, dir, name, &st) < 0)
        return false;
    pom_forget(s->fs, st.st_ino, 1);
    return (uint64_t)st.st_ino == uuid;
}

/* links/l<i> -> links/r<i>. */
static void do_rename(struct storm *s, long i)
{
    char from[32], to[32];
    snprintf(from, sizeof from, "l%ld", i);
    snprintf(to, sizeof to, "r%ld", i);
    for (int attempt = 0;; attempt++) {
        int rc = pom_rename(s->fs, s->links, from, s->links, to, POM_RENAME_NOREPLACE);
        if ((rc == -ENOENT || rc == -EEXIST) && attempt > 0 &&
            holds(s, s->links, to, s->uuid[i])) {
            atomic_fetch_add(&s->eexist_own, 1);
            rc = 0;
        }
        if (rc == 0) {
            s->state[i] |= F_RENAMED;
            return;
        }
        if (rc == -ENOENT && attempt == 0 && !(s->synced[i] & F_LINKED)) {
            s->state[i] |= F_DEP_GONE; /* checked by the sync that covers it */
            return;
        }
        if (!timed_out(s, rc, attempt)) {
            unexpected(s, "rename", from, rc);
            return;
        }
    }
}

/* One pom_sync for worker w (w NULL: main's last one, for every thread):
 * files [pend_from, upto) of the worker become synced or not guaranteed.
 * REQUIRES: the workers are joined when w is NULL. */
static void do_sync(struct storm *s, struct worker *ws, int nw, long upto, const char *who)
{
    pthread_mutex_lock(&s->sync_mu);
    double t0 = now_s();
    int rc = pom_sync(s->fs);
    double dt = now_s() - t0;
    s->syncs++;
    s->sync_total += dt;
    if (dt > s->sync_max)
        s->sync_max = dt;
    if (dt > SYNC_SLOW_S) {
        s->syncs_slow++;
        fprintf(stderr, "unexpected: pom_sync (%s) took %.3f s\n", who, dt);
    }
    if (s->synclog) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        fprintf(s->synclog, "%02ld:%02ld:%02ld.%03ld %s created %ld: %.3f s rc %d\n",
                (long)(ts.tv_sec / 3600 % 24), (long)(ts.tv_sec / 60 % 60),
                (long)(ts.tv_sec % 60), ts.tv_nsec / 1000000, who,
                atomic_load(&s->created), dt, rc);
    }
    if (rc == -EIO) {
        s->eio_events++;
        s->syncs_eio++;
    } else if (rc < 0) {
        s->syncs_err++;
        unexpected(s, "pom_sync", who, rc);
    }
    /* Another error: the pending ops stay pending (a later sync covers
     * them). */
    for (int k = 0; k < nw && (rc == 0 || rc == -EIO); k++) {
        struct worker *w = &ws[k];
        bool lost = rc == -EIO || w->eio_seen != s->eio_events;
        long end = upto < 0 ? s->n : upto, i = w->pend_from;
        for (; i < end; i += s->threads) {
            if (lost) {
                s->noguar[i] = s->state[i] ? 1 : 0;
            } else {
                s->synced[i] = s->state[i] & (uint8_t)~F_DEP_GONE;
                if (s->state[i] & F_DEP_GONE) {
                    char nm[32];
                    snprintf(nm, sizeof nm, "f%ld", i);
                    unexpected(s, "link/rename (its file or link gone, but no MDS lost a "
                               "change)", nm, -ENOENT);
                }
            }
        }
        w->pend_from = i;
        w->eio_seen = s->eio_events;
    }
    pthread_mutex_unlock(&s->sync_mu);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct storm *s = w->s;
    long done = 0;
    char who[32];
    snprintf(who, sizeof who, "thread %d", w->k);
    for (long i = w->k; i < s->n; i += s->threads) {
        wait_gate(s);
        if (do_create(s, i) == 0) {
            if (i % LINK_EVERY == 0)
                do_link(s, i);
            if (i % RENAME_EVERY == 0 && (s->state[i] & F_LINKED))
                do_rename(s, i);
        }
        s->done_ms[i] = (uint32_t)((now_s() - s->t0) * 1000);
        progress(s);
        if (++done % SYNC_EVERY == 0)
            do_sync(s, w, 1, i + 1, who);
    }
    return NULL;
}

/* ---- checks -------------------------------------------------------------- */

struct listing {
    struct storm *s;
    uint8_t *seen;
    long total, dup, stray;
    uint64_t next;
};

static int list_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    (void)st;
    struct listing *l = arg;
    l->next = next;
    l->total++;
    char *end;
    long i = name[0] == 'f' ? strtol(name + 1, &end, 10) : -1;
    if (i < 0 || i >= l->s->n || *end) {
        l->stray++;
        return 0;
    }
    if (l->seen[i]++)
        l->dup++;
    return 0;
}

/* Names per uuid (open addressing; uuids are never 0). */
struct names {
    uint64_t *uuid;
    uint32_t *count;
    uint32_t *nlink;
    size_t cap, used;
    long stat_errors;
    long dangling;       /* names listed whose inode is gone */
    long dangling_synced; /* of them, files whose link ops were all synced */
};

/* Whether every link/rename op of file i was covered by a good sync (told
 * in the mismatch lines: with the coordinator every uuid must agree). */
static bool links_all_synced(const struct storm *s, long i)
{
    if (i < 0 || i >= s->n)
        return false;
    uint8_t want = s->state[i] & (F_LINKED | F_RENAMED);
    return (s->synced[i] & want) == want;
}

static size_t slot_of(struct names *t, uint64_t u)
{
    size_t h = (size_t)((u * UINT64_C(0x9e3779b97f4a7c15)) >> 17) & (t->cap - 1);
    while (t->uuid[h] && t->uuid[h] != u)
        h = (h + 1) & (t->cap - 1);
    return h;
}

struct walk {
    struct storm *s;
    struct names *t;
    pom_ino dir;
    char (*names)[32];
    uint64_t *ino;       /* per name: st_ino as listed */
    size_t n, cap;
    uint64_t next;
};

static int walk_cb(void *arg, const char *name, const struct stat *st, uint64_t next)
{
    struct walk *w = arg;
    w->next = next;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 1024;
        char (*nn)[32] = realloc(w->names, cap * sizeof *nn);
        if (nn)
            w->names = nn;
        uint64_t *ni = realloc(w->ino, cap * sizeof *ni);
        if (ni)
            w->ino = ni;
        if (!nn || !ni)
            return -ENOMEM;
        w->cap = cap;
    }
    w->ino[w->n] = (uint64_t)st->st_ino;
    snprintf(w->names[w->n++], 32, "%s", name);
    return 0;
}

/* Lists dir fully (readdir from the start, resumed), then looks each name
 * up (stat following a link stub) and counts it for its uuid. */
static int walk_dir(struct storm *s, struct names *t, pom_ino dir)
{
    struct walk w = { .s = s, .t = t, .dir = dir, .next = POM_COOKIE_START };
    for (;;) {
        uint64_t before = w.next;
        int rc = pom_readdir(s->fs, dir, w.next, 0, walk_cb, &w);
        if (rc < 0) {
            unexpected(s, "readdir (walk)", "", rc);
            free(w.names);
            free(w.ino);
            return rc;
        }
        if (rc == 0 || w.next == before)
            break;
    }
    for (size_t j = 0; j < w.n; j++) {
        struct stat st;
        int rc = pom_lookup(s->fs, dir, w.names[j], &st);
        if (rc == -ENOENT) {
            /* Listed, but its inode is gone: a link stub whose ILT row
             * was lost (a name with nlink 0). */
            const char *nm = w.names[j];
            long i = strtol(nm + 1, NULL, 10);
            const char *why = i < 0 || i >= s->n ? "?"
                              : (s->synced[i] & F_CREATED) ? "synced"
                              : s->noguar[i] ? "not guaranteed" : "never synced";
            t->dangling_synced += links_all_synced(s, i);
            if (t->dangling++ < 20)
                printf("nlink: %s/%s (uuid %llu, file %s, its ops done at +%.3f s): listed, "
                       "but its inode is gone (a link stub without its ILT row)\n",
                       dir == s->dir ? "s" : "links", nm, (unsigned long long)w.ino[j], why,
                       i >= 0 && i < s->n ? s->done_ms[i] / 1000.0 : -1.0);
            continue;
        }
        if (rc < 0) {
            t->stat_errors++;
            unexpected(s, "lookup (walk)", w.names[j], rc);
            continue;
        }
        pom_forget(s->fs, st.st_ino, 1);
        if (t->used * 2 >= t->cap)
            continue; /* sized for 2x the names: never */
        size_t h = slot_of(t, (uint64_t)st.st_ino);
        if (!t->uuid[h]) {
            t->uuid[h] = (uint64_t)st.st_ino;
            t->used++;
        }
        t->count[h]++;
        t->nlink[h] = (uint32_t)st.st_nlink; /* the latest stat's */
    }
    free(w.names);
    free(w.ino);
    return 0;
}

static bool check(const char *what, bool ok)
{
    printf("check: %s: %s\n", what, ok ? "ok" : "FAILED");
    return ok;
}

/* One walk of both directories: names counted per uuid against nlink.
 * Prints the "result: nlink_*" lines; true when nothing disagrees. */
static bool nlink_pass(struct storm *s)
{
    struct names t = { .cap = 1 };
    while (t.cap < (size_t)(s->n + s->n / 25 + 16) * 2)
        t.cap <<= 1;
    t.uuid = calloc(t.cap, sizeof *t.uuid);
    t.count = calloc(t.cap, sizeof *t.count);
    t.nlink = calloc(t.cap, sizeof *t.nlink);
    bool ok = false;
    if (!t.uuid || !t.count || !t.nlink)
        goto out;
    int wr = walk_dir(s, &t, s->dir);
    if (wr == 0)
        wr = walk_dir(s, &t, s->links);
    long mism = 0, mism_synced = 0, multi = 0;
    for (size_t h = 0; h < t.cap; h++) {
        if (!t.uuid[h])
            continue;
        multi += t.count[h] > 1;
        if (t.count[h] == t.nlink[h])
            continue;
        long i = 0;
        while (i < s->n && s->uuid[i] != t.uuid[h])
            i++;
        bool synced = links_all_synced(s, i);
        mism_synced += synced;
        if (mism++ < 20)
            printf("nlink: uuid %llu (file %ld, links %s) has nlink %u, %u names\n",
                   (unsigned long long)t.uuid[h], i < s->n ? i : -1L,
                   synced ? "synced" : "not synced", t.nlink[h], t.count[h]);
    }
    printf("result: nlink_uuids %zu\nresult: nlink_multi_name %ld\nresult: nlink_mismatches %ld\n"
           "result: nlink_mismatches_synced %ld\nresult: nlink_dangling_names %ld\n"
           "result: nlink_dangling_synced %ld\nresult: nlink_stat_errors %ld\n",
           t.used, multi, mism, mism_synced, t.dangling, t.dangling_synced, t.stat_errors);
    ok = wr == 0 && mism == 0 && t.dangling == 0 && t.stat_errors == 0;
out:
    free(t.uuid);
    free(t.count);
    free(t.nlink);
    return ok;
}

static int checks(struct storm *s)
{
    bool good = true;
    long synced = 0, synced_missing = 0, links_synced = 0, links_missing = 0;
    long ng = 0, ng_exist = 0, pending = 0;
    for (long i = 0; i < s->n; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%ld", i);
        if (s->synced[i] & F_CREATED) {
            synced++;
            if (!holds(s, s->dir, name, s->uuid[i])) {
                if (synced_missing++ < 20)
                    printf("lost: synced file %s (uuid %llu, created at +%.3f s)\n", name,
                           (unsigned long long)s->uuid[i], s->done_ms[i] / 1000.0);
            }
            if (s->synced[i] & (F_LINKED | F_RENAMED)) {
                char ln[32], gone[32];
                bool ren = s->synced[i] & F_RENAMED;
                snprintf(ln, sizeof ln, "%c%ld", ren ? 'r' : 'l', i);
                snprintf(gone, sizeof gone, "l%ld", i);
                links_synced++;
                if (!holds(s, s->links, ln, s->uuid[i]) ||
                    (ren && holds(s, s->links, gone, s->uuid[i]))) {
                    if (links_missing++ < 20)
                        printf("lost: synced link/rename of %s (%s)\n", name, ln);
                }
            }
        } else if (s->noguar[i]) {
            ng++;
            ng_exist += holds(s, s->dir, name, s->uuid[i]);
        } else if (s->state[i]) {
            pending++;
        }
    }
    printf("result: synced_files %ld\nresult: synced_missing %ld\n"
           "result: synced_links %ld\nresult: synced_links_missing %ld\n"
           "result: not_guaranteed %ld\nresult: not_guaranteed_exist %ld\n"
           "result: never_synced %ld\n",
           synced, synced_missing, links_synced, links_missing, ng, ng_exist, pending);
    good &= check("every synced file is there with its uuid", synced_missing == 0);
    good &= check("every synced link/rename is there", links_missing == 0);

    struct listing l = { .s = s, .seen = calloc((size_t)s->n, 1), .next = POM_COOKIE_START };
    if (!l.seen)
        return 1;
    double t0 = now_s();
    int rc = 0;
    for (;;) {
        uint64_t before = l.next;
        rc = pom_readdir(s->fs, s->dir, l.next, 0, list_cb, &l);
        if (rc < 0) {
            unexpected(s, "readdir", "", rc);
            break;
        }
        if (rc == 0 || l.next == before)
            break;
    }
    long unlisted = 0;
    for (long i = 0; i < s->n; i++)
        unlisted += (s->synced[i] & F_CREATED) && !l.seen[i];
    printf("result: list_s %.3f\nresult: listed %ld\nresult: list_dups %ld\n"
           "result: list_stray %ld\nresult: list_synced_missing %ld\n",
           now_s() - t0, l.total, l.dup, l.stray, unlisted);
    good &= check("listing: each name at most once, every synced one listed",
                  rc >= 0 && l.dup == 0 && l.stray == 0 && unlisted == 0);
    free(l.seen);

    /* Strict for every uuid (docs/mds-xact.md): a link or rename whose rows
     * sit at several MDS is one transaction, whole or absent even when an
     * MDS died unsynced. A transaction cut by a kill is settled by the
     * resolver of its pending rows (--xact-resolve-ms, 2 s), so a
     * walk that finds a mismatch is repeated a few times before it counts. */
    bool nl_ok = false;
    for (int pass = 0; pass < 6 && !nl_ok; pass++) {
        if (pass > 0) {
            printf("nlink: pass %d found mismatches; walking again in 2 s\n", pass);
            sleep(2);
        }
        nl_ok = nlink_pass(s);
    }
    good &= check("nlink equals the names of every uuid (none dangling)", nl_ok);
    return good ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: storm_driver R2ADDR FSNAME N THREADS SYNC_DIR\n");
        return 2;
    }
    struct storm s = { .n = atol(argv[3]), .threads = atoi(argv[4]), .sync_dir = argv[5],
                       .held = -1 };
    if (s.n <= 0 || s.threads <= 0 || s.threads > 64) {
        fprintf(stderr, "storm_driver: bad N or THREADS\n");
        return 2;
    }
    pthread_mutex_init(&s.sync_mu, NULL);
    char p[4096];
    snprintf(p, sizeof p, "%s/syncs.log", s.sync_dir);
    s.synclog = fopen(p, "w");
    int rc = pom_open(argv[1], argv[2], &s.fs);
    if (rc < 0) {
        fprintf(stderr, "pom_open: %s\n", strerror(-rc));
        return 1;
    }
    char dname[64];
    struct stat st;
    snprintf(dname, sizeof dname, "s%ld", (long)getpid());
    if ((rc = pom_mkdir(s.fs, POM_ROOT_INO, dname, 0755, NULL, &st)) < 0) {
        fprintf(stderr, "mkdir %s: %s\n", dname, strerror(-rc));
        return 1;
    }
    s.dir = st.st_ino;
    snprintf(dname, sizeof dname, "links%ld", (long)getpid());
    if ((rc = pom_mkdir(s.fs, POM_ROOT_INO, dname, 0755, NULL, &st)) < 0) {
        fprintf(stderr, "mkdir %s: %s\n", dname, strerror(-rc));
        return 1;
    }
    s.links = st.st_ino;
    /* Made durable before the storm: the checks need both directories. */
    if ((rc = pom_sync(s.fs)) < 0) {
        fprintf(stderr, "first sync: %s\n", strerror(-rc));
        return 1;
    }
    s.uuid = calloc((size_t)s.n, sizeof *s.uuid);
    s.state = calloc((size_t)s.n, 1);
    s.synced = calloc((size_t)s.n, 1);
    s.noguar = calloc((size_t)s.n, 1);
    s.done_ms = calloc((size_t)s.n, sizeof *s.done_ms);
    if (!s.uuid || !s.state || !s.synced || !s.noguar || !s.done_ms)
        return 1;

    pthread_t th[64];
    struct worker w[64];
    double t0 = now_s();
    s.t0 = t0;
    {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        printf("storm t0 (wall clock, +0.000 s): %02ld:%02ld:%02ld.%03ld\n",
               (long)(ts.tv_sec / 3600 % 24), (long)(ts.tv_sec / 60 % 60),
               (long)(ts.tv_sec % 60), ts.tv_nsec / 1000000);
    }
    for (int k = 0; k < s.threads; k++) {
        w[k] = (struct worker){ .s = &s, .k = k, .pend_from = k };
        pthread_create(&th[k], NULL, worker_main, &w[k]);
    }
    for (int k = 0; k < s.threads; k++)
        pthread_join(th[k], NULL);
    double tc = now_s() - t0;
    printf("result: creates %ld\nresult: storm_s %.3f\nresult: creates_per_s %.0f\n",
           atomic_load(&s.created), tc, (double)atomic_load(&s.created) / tc);
    fflush(stdout);
    touch(s.sync_dir, "storm_done");
    if (!wait_file(s.sync_dir, "events_done", 600))
        fprintf(stderr, "no events_done from the script within 600 s: checking anyway\n");
    do_sync(&s, w, s.threads, -1, "final");

    printf("result: syncs %ld\nresult: sync_max_s %.3f\nresult: sync_mean_s %.3f\n"
           "result: syncs_over_20s %ld\nresult: syncs_eio %ld\nresult: syncs_failed %ld\n"
           "result: retried_timeouts %ld\nresult: own_retry_landed %ld\n",
           s.syncs, s.sync_max, s.syncs ? s.sync_total / (double)s.syncs : 0.0, s.syncs_slow,
           s.syncs_eio, s.syncs_err, atomic_load(&s.timeouts), atomic_load(&s.eexist_own));
    fflush(stdout);
    int bad = checks(&s);
    long errs = atomic_load(&s.errors);
    printf("result: unexpected_errors %ld\n", errs);
    bad |= !check("no unexpected error from any call", errs == 0);
    bad |= !check("no pom_sync took over 20 s", s.syncs_slow == 0);
    if (s.synclog)
        fclose(s.synclog);
    pom_close(s.fs);
    free(s.uuid);
    free(s.state);
    free(s.synced);
    free(s.noguar);
    free(s.done_ms);
    printf(bad ? "storm_driver: FAILED\n" : "storm_driver: all checks passed\n");
    return bad;
}
