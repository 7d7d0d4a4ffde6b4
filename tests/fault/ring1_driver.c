/*
 * ring1_driver.c -- the client of tests/fault/test_ring1_frozen.sh: a real
 * libpomegranate client (through R2) that creates files, and later, from a
 * fresh process, checks that every one of them is still found.
 *
 *   ring1_driver R2ADDR FSNAME create DIRS FILES LIST
 *       mkdir /d<k> for k < DIRS, mknod f<i> for i < FILES in each, then
 *       pom_sync; writes "d<k>/f<i> <uuid>" per file to LIST. Exit 0 when
 *       every create and the sync succeeded.
 *   ring1_driver R2ADDR FSNAME check LIST
 *       looks up every name of LIST: found, with the uuid it was created
 *       with. Stops after MAX_BAD failures (a lost slice fails slowly: each
 *       lookup may wait out the client's retries). Exit 0 when all found.
 *
 * Prints "result: KEY VALUE" lines; the first failures are printed.
 */
#include "pomegranate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_BAD 10

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int create(pom_fs *fs, long dirs, long files, const char *list)
{
    FILE *out = fopen(list, "w");
    if (!out) {
        perror(list);
        return 1;
    }
    long bad = 0, made = 0;
    double t0 = now_s();
    for (long k = 0; k < dirs && bad < MAX_BAD; k++) {
        char dname[32];
        snprintf(dname, sizeof dname, "d%ld", k);
        struct stat dst;
        int rc = pom_mkdir(fs, POM_ROOT_INO, dname, 0755, NULL, &dst);
        if (rc < 0) {
            fprintf(stderr, "mkdir /%s: %s\n", dname, strerror(-rc));
            bad++;
            continue;
        }
        for (long i = 0; i < files && bad < MAX_BAD; i++) {
            char name[32];
            snprintf(name, sizeof name, "f%ld", i);
            struct stat st;
            rc = pom_mknod(fs, dst.st_ino, name, S_IFREG | 0644, 0, NULL, &st);
            if (rc < 0) {
                fprintf(stderr, "create /%s/%s: %s\n", dname, name, strerror(-rc));
                bad++;
                continue;
            }
            fprintf(out, "%s/%s %" PRIu64 "\n", dname, name, (uint64_t)st.st_ino);
            pom_forget(fs, st.st_ino, 1);
            made++;
        }
        pom_forget(fs, dst.st_ino, 1);
    }
    int rc = pom_sync(fs);
    if (rc < 0) {
        fprintf(stderr, "pom_sync: %s\n", strerror(-rc));
        bad++;
    }
    if (fclose(out) != 0) {
        perror(list);
        bad++;
    }
    printf("result: created %ld\nresult: create_s %.2f\nresult: failures %ld\n", made,
           now_s() - t0, bad);
    return bad ? 1 : 0;
}

static int check(pom_fs *fs, const char *list)
{
    FILE *in = fopen(list, "r");
    if (!in) {
        perror(list);
        return 1;
    }
    char line[128], cur[32] = "";
    pom_ino dir = 0;
    long total = 0, found = 0, bad = 0;
    double t0 = now_s();
    while (bad < MAX_BAD && fgets(line, sizeof line, in)) {
        char dname[32], name[32];
        uint64_t uuid = 0;
        if (sscanf(line, "%31[^/]/%31s %" SCNu64, dname, name, &uuid) != 3) {
            fprintf(stderr, "bad list line: %s", line);
            bad++;
            continue;
        }
        total++;
        struct stat st;
        if (strcmp(dname, cur) != 0) {
            if (dir)
                pom_forget(fs, dir, 1);
            dir = 0;
            snprintf(cur, sizeof cur, "%s", dname);
            int rc = pom_lookup(fs, POM_ROOT_INO, dname, &st);
            if (rc < 0) {
                fprintf(stderr, "lookup /%s: %s\n", dname, strerror(-rc));
                bad++;
                continue;
            }
            dir = st.st_ino;
        }
        if (!dir) {
            bad++;
            continue;
        }
        int rc = pom_lookup(fs, dir, name, &st);
        if (rc < 0) {
            fprintf(stderr, "lookup /%s/%s: %s\n", dname, name, strerror(-rc));
            bad++;
        } else if ((uint64_t)st.st_ino != uuid) {
            fprintf(stderr, "lookup /%s/%s: uuid %" PRIu64 ", created as %" PRIu64 "\n", dname,
                    name, (uint64_t)st.st_ino, uuid);
            pom_forget(fs, st.st_ino, 1);
            bad++;
        } else {
            pom_forget(fs, st.st_ino, 1);
            found++;
        }
    }
    if (dir)
        pom_forget(fs, dir, 1);
    fclose(in);
    printf("result: checked %ld\nresult: found %ld\nresult: check_s %.2f\n", total, found,
           now_s() - t0);
    if (bad >= MAX_BAD)
        printf("result: stopped after %d failures\n", MAX_BAD);
    return bad || total == 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    bool is_create = argc == 7 && strcmp(argv[3], "create") == 0;
    bool is_check = argc == 5 && strcmp(argv[3], "check") == 0;
    if (!is_create && !is_check) {
        fprintf(stderr, "usage: ring1_driver R2ADDR FSNAME create DIRS FILES LIST\n"
                        "       ring1_driver R2ADDR FSNAME check LIST\n");
        return 2;
    }
    pom_fs *fs = NULL;
    int rc = pom_open(argv[1], argv[2], &fs);
    if (rc < 0) {
        fprintf(stderr, "pom_open %s %s: %s\n", argv[1], argv[2], strerror(-rc));
        return 1;
    }
    int code = is_create ? create(fs, atol(argv[4]), atol(argv[5]), argv[6])
                         : check(fs, argv[4]);
    pom_close(fs);
    return code;
}
