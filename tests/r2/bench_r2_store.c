/*
 * bench_r2_store.c -- latency of the R2 state store calls, for the numbers
 * in reports: `bench_r2_store [N]` (embedded, in a temporary folder) or
 * `bench_r2_store --zk HOST:PORT [N]`. Not a test: it is built, not run.
 */
#include "pom_proc.h"
#include "r2_store.h"
#include "r2_store_embedded.h"
#include "r2_store_zk.h"
#include "xt_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double us_per_op(uint64_t t0, int n)
{
    return (double)(xt_mono_ns() - t0) / 1000.0 / n;
}

int main(int argc, char **argv)
{
    const char *hosts = NULL;
    int n = 2000, a = 1;
    if (a + 1 < argc && strcmp(argv[a], "--zk") == 0) {
        hosts = argv[a + 1];
        a += 2;
    }
    if (a < argc)
        n = atoi(argv[a]);
    char dir[256] = "";
    r2_store *s = NULL;
    int rc;
    if (hosts != NULL) {
        char root[64];
        snprintf(root, sizeof root, "/bench-%d", (int)xt_mono_ns() & 0xffff);
        r2_store_zk_options o = { .hosts = hosts, .root = root };
        rc = r2_store_zk_open(&o, &s);
    } else {
        rc = pom_tmpdir("r2bench", dir, sizeof dir);
        if (rc == 0)
            rc = r2_store_embedded_open(dir, &s);
    }
    if (rc < 0) {
        fprintf(stderr, "open: %s\n", strerror(-rc));
        return 1;
    }
    char key[64], val[128];
    memset(val, 'v', sizeof val);
    uint64_t t0 = xt_mono_ns();
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "/sites/%d", i);
        if (r2_store_put(s, key, val, sizeof val, R2_VER_CREATE, 0, NULL) < 0)
            return 1;
    }
    printf("%s: put (create, 128 B)   %8.1f us/op\n", r2_store_backend(s), us_per_op(t0, n));
    t0 = xt_mono_ns();
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "/sites/%d", i);
        if (r2_store_put(s, key, val, sizeof val, 0, 0, NULL) < 0)
            return 1;
    }
    printf("%s: put (CAS update)      %8.1f us/op\n", r2_store_backend(s), us_per_op(t0, n));
    t0 = xt_mono_ns();
    for (int i = 0; i < n; i++) {
        void *v = NULL;
        snprintf(key, sizeof key, "/sites/%d", i);
        if (r2_store_get(s, key, &v, NULL, NULL) < 0)
            return 1;
        xt_free(v);
    }
    printf("%s: get                   %8.1f us/op\n", r2_store_backend(s), us_per_op(t0, n));
    t0 = xt_mono_ns();
    for (int i = 0; i < n; i++) {
        uint64_t first;
        if (r2_store_alloc_id(s, "/ids/uuid", 1024, &first) < 0)
            return 1;
    }
    printf("%s: alloc_id              %8.1f us/op\n", r2_store_backend(s), us_per_op(t0, n));
    t0 = xt_mono_ns();
    for (int i = 0; i < n / 4; i++) {
        r2_store_op ops[4];
        char keys[4][64];
        for (int j = 0; j < 4; j++) {
            snprintf(keys[j], sizeof keys[j], "/sites/%d", 4 * i + j);
            ops[j] = (r2_store_op){ R2_OP_PUT, keys[j], val, sizeof val, R2_VER_ANY, 0 };
        }
        if (r2_store_multi(s, ops, 4, NULL, NULL) < 0)
            return 1;
    }
    printf("%s: multi of 4 puts       %8.1f us/op\n", r2_store_backend(s), us_per_op(t0, n / 4));
    char **names;
    size_t count;
    t0 = xt_mono_ns();
    if (r2_store_list(s, "/sites", &names, &count) < 0)
        return 1;
    printf("%s: list of %zu children   %8.1f us\n", r2_store_backend(s), count, us_per_op(t0, 1));
    r2_store_names_free(names, count);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "/sites/%d", i);
        r2_store_delete(s, key, R2_VER_ANY);
    }
    r2_store_close(s);
    if (dir[0] != '\0')
        pom_rm_rf(dir);
    return 0;
}
