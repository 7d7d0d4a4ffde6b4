/*
 * kv_example.c -- the key/value API of libpomegranate in a few calls:
 * open a file system (through R2 by its name, or at an MDS by its id), open
 * a keyspace, put/get/update a few keys, list the keyspace page by page and
 * search it by substring (evaluated at the MDS).
 *
 *   kv_example R2ADDR FSNAME [KEYSPACE]     e.g. 127.0.0.1:7000 pomfs
 *   kv_example MDSADDR FSID [KEYSPACE]      FSID: a number
 *
 * Build it against an installed libpomegranate:
 *   cc kv_example.c $(pkg-config --cflags --libs pomegranate) -o kv_example
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pomegranate.h"

static int print_entry(void *arg, const void *key, size_t klen, const void *val, size_t vlen,
                       uint64_t version)
{
    (void)arg;
    printf("  %.*s = %.*s (version %llu)\n", (int)klen, (const char *)key, (int)vlen,
           (const char *)val, (unsigned long long)version);
    return 0;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "kv_example: %s: %s\n", what, strerror(-rc));
    return 1;
}

int main(int argc, char **argv)
{
    /* --key-file FILE: the cluster's key (DIR/cluster.key of `pomctl up`)
     * or a client key of the fs (`pomctl fs key NAME --out FILE`). */
    struct pom_opts opts = { 0 };
    if (argc > 2 && !strcmp(argv[1], "--key-file")) {
        opts.keyfile = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: kv_example [--key-file FILE] R2ADDR FSNAME [KEYSPACE]\n"
                        "       kv_example [--key-file FILE] MDSADDR FSID [KEYSPACE]\n");
        return 2;
    }
    pom_fs *fs;
    char *end;
    unsigned long fsid = strtoul(argv[2], &end, 10);
    int rc = *end == '\0' && end != argv[2]
                 ? pom_connect_mds_opts(argv[1], (uint32_t)fsid, &opts, &fs)
                 : pom_open_opts(argv[1], argv[2], &opts, &fs);
    if (rc)
        return fail("connect", rc);
    pom_kv *kv;
    if ((rc = pom_kv_open(fs, argc > 3 ? argv[3] : "example", &kv))) {
        pom_close(fs);
        return fail("open keyspace", rc);
    }
    static const char *const fruit[] = { "apple", "apricot", "banana", "cherry", "grape",
                                         "pineapple" };
    for (size_t i = 0; i < sizeof fruit / sizeof fruit[0] && rc == 0; i++) {
        char val[64];
        snprintf(val, sizeof val, "fruit #%zu", i);
        rc = pom_kv_put(kv, fruit[i], strlen(fruit[i]), val, strlen(val), 0);
    }
    void *v = NULL;
    size_t vlen = 0;
    uint64_t ver = 0;
    if (rc == 0)
        rc = pom_kv_get(kv, "cherry", 6, &v, &vlen, &ver);
    if (rc == 0) {
        printf("get cherry -> %.*s (version %llu)\n", (int)vlen, (char *)v,
               (unsigned long long)ver);
        /* A conditional update: succeeds once; the second, with the old
         * version, answers -ESTALE. */
        rc = pom_kv_update(kv, "cherry", 6, "red", 3, ver);
        int again = pom_kv_update(kv, "cherry", 6, "black", 5, ver);
        printf("update if version %llu: %d, again: %s\n", (unsigned long long)ver, rc,
               strerror(-again));
    }
    pom_free(v);
    if (rc == 0) {
        printf("list (pages of 4):\n");
        pom_kv_cursor cur = POM_KV_CURSOR_INIT;
        while (rc >= 0 && !pom_kv_cursor_done(&cur))
            rc = pom_kv_list(kv, &cur, 4, print_entry, NULL);
    }
    if (rc >= 0) {
        printf("search \"ap\":\n");
        pom_kv_cursor cur = POM_KV_CURSOR_INIT;
        while (rc >= 0 && !pom_kv_cursor_done(&cur))
            rc = pom_kv_search(kv, "ap", 2, &cur, 100, print_entry, NULL);
        struct pom_kv_stats st;
        pom_kv_get_stats(kv, &st);
        printf("listings brought %llu rows, %llu bytes in %llu calls\n",
               (unsigned long long)st.rows_received, (unsigned long long)st.bytes_received,
               (unsigned long long)st.list_calls);
    }
    pom_kv_close(kv);
    pom_close(fs);
    return rc < 0 ? fail("key/value call", rc) : 0;
}
