/*
 * kv_batch_driver.c -- key/value batches against a cluster of many MDS
 * (tests/client/test_kv_batch_dist.sh): ROUNDS batches of 1..256 random
 * puts (upserts, some create-only, some durable), gets and deletes (some
 * conditional on a version) over KEYS keys (short and long forms), each
 * result checked against a model applied in the same order. Batches
 * alternate between two connections; the second one's view of the
 * keyspace's bitmap grows stale while the first one's puts split slices,
 * so its operations meet slices that moved to other MDS. At the end every
 * key is read back one by one and the keyspace listed (each live key
 * exactly once).
 *
 *   kv_batch_driver R2ADDR FSNAME ROUNDS KEYS     (exit 0: every check held)
 * Seeded (XT_SEED; the seed is printed).
 */
#include "pom_rand.h"
#include "pomegranate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VAL_MAX 300
#define LONG_KLEN 400

struct mkey {
    char key[LONG_KLEN];
    size_t klen;
    bool live;
    uint64_t version;
    uint8_t val[VAL_MAX];
    size_t vlen;
    int listed;
};

static struct mkey *model;
static size_t nkeys;

#define CHECK(cond, ...)                                                                 \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "kv_batch_driver: " __VA_ARGS__);                            \
            fputc('\n', stderr);                                                         \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

enum { OP_PUT, OP_GET, OP_DEL };

struct op {
    int kind;
    size_t k;
    unsigned flags;
    uint64_t if_version;
    uint8_t val[VAL_MAX];
    size_t vlen;
    int want;                  /* expected result */
    uint8_t wval[VAL_MAX];     /* get: expected value */
    size_t wvlen;
    uint64_t wver;
};

/* The model's answer to op (applied to the model). */
static void model_apply(struct op *o)
{
    struct mkey *m = &model[o->k];
    switch (o->kind) {
    case OP_PUT:
        if (m->live && (o->flags & POM_KV_CREATE_ONLY)) {
            o->want = -EEXIST;
            return;
        }
        m->version = m->live ? m->version + 1 : 0;
        m->live = true;
        memcpy(m->val, o->val, o->vlen);
        m->vlen = o->vlen;
        o->want = 0;
        return;
    case OP_GET:
        o->want = m->live ? 0 : -ENOENT;
        memcpy(o->wval, m->val, m->vlen);
        o->wvlen = m->vlen;
        o->wver = m->version;
        return;
    default:
        if (!m->live)
            o->want = -ENOENT;
        else if (o->if_version != POM_KV_ANY_VERSION && o->if_version != m->version)
            o->want = -ESTALE;
        else
            o->want = 0, m->live = false;
    }
}

static int list_cb(void *arg, const void *key, size_t klen, const void *val, size_t vlen,
                   uint64_t version)
{
    (void)arg;
    for (size_t k = 0; k < nkeys; k++)
        if (model[k].klen == klen && !memcmp(model[k].key, key, klen)) {
            CHECK(model[k].live, "listed key %zu is not live", k);
            CHECK(model[k].vlen == vlen && !memcmp(model[k].val, val, vlen) &&
                      model[k].version == version,
                  "listed key %zu: wrong value or version", k);
            model[k].listed++;
            return 0;
        }
    CHECK(0, "listed a key the model never had");
    return -1;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: kv_batch_driver R2ADDR FSNAME ROUNDS KEYS\n");
        return 2;
    }
    long rounds = atol(argv[3]);
    nkeys = (size_t)atol(argv[4]);
    rng_state = base_seed();
    fprintf(stderr, "kv_batch_driver: seed %llu (XT_SEED)\n", (unsigned long long)rng_state);
    model = calloc(nkeys, sizeof *model);
    CHECK(model, "out of memory");
    for (size_t k = 0; k < nkeys; k++) {
        struct mkey *m = &model[k];
        m->klen = (size_t)snprintf(m->key, sizeof m->key, "key%06zu", k);
        if (k % 50 == 7) { /* the long-key form (docs/client.md) */
            memset(m->key + m->klen, 'L', LONG_KLEN - m->klen);
            m->klen = LONG_KLEN;
        }
    }
    pom_fs *fs[2];
    pom_kv *kv[2];
    pom_kv_batch *b[2];
    for (int c = 0; c < 2; c++) {
        int rc = pom_open(argv[1], argv[2], &fs[c]);
        CHECK(rc == 0, "pom_open: %s", strerror(-rc));
        CHECK(pom_kv_open(fs[c], "batch", &kv[c]) == 0, "pom_kv_open");
        CHECK(pom_kv_batch_new(kv[c], &b[c]) == 0, "pom_kv_batch_new");
    }
    struct op *ops = calloc(256, sizeof *ops);
    CHECK(ops, "out of memory");
    uint64_t nops = 0, counts[3] = { 0 }, errs = 0;
    for (long r = 0; r < rounds; r++) {
        int c = (int)(r & 1);
        size_t n = 1 + rnd() % 256;
        pom_kv_batch_reset(b[c]);
        for (size_t i = 0; i < n; i++) {
            struct op *o = &ops[i];
            unsigned d = (unsigned)(rnd() % 100);
            /* Mostly puts early on (the keyspace grows and splits). */
            o->kind = d < (r < rounds / 3 ? 75u : 45u) ? OP_PUT : d < 80 ? OP_GET : OP_DEL;
            /* Some ops repeat the previous op's key: per-key order. */
            o->k = i > 0 && rnd() % 8 == 0 ? ops[i - 1].k : (size_t)(rnd() % nkeys);
            o->flags = 0;
            o->if_version = POM_KV_ANY_VERSION;
            struct mkey *m = &model[o->k];
            int rc;
            if (o->kind == OP_PUT) {
                o->vlen = (size_t)(rnd() % VAL_MAX);
                for (size_t j = 0; j < o->vlen; j++)
                    o->val[j] = (uint8_t)rnd();
                o->flags = rnd() % 10 == 0 ? POM_KV_CREATE_ONLY : 0;
                o->flags |= rnd() % 50 == 0 ? POM_KV_SYNC : 0;
                rc = pom_kv_batch_put(b[c], m->key, m->klen, o->val, o->vlen, o->flags);
            } else if (o->kind == OP_GET) {
                rc = pom_kv_batch_get(b[c], m->key, m->klen);
            } else {
                if (rnd() % 4 == 0)
                    o->if_version = m->version + (rnd() % 3 == 0);
                rc = pom_kv_batch_delete(b[c], m->key, m->klen, o->if_version);
            }
            CHECK(rc == 0, "add: %s", strerror(-rc));
            model_apply(o);
        }
        int rc = pom_kv_batch_submit(b[c]);
        CHECK(rc == 0, "round %ld: submit: %s", r, strerror(-rc));
        for (size_t i = 0; i < n; i++) {
            const struct op *o = &ops[i];
            const void *v = NULL;
            size_t vl = 0;
            uint64_t ver = 0;
            rc = pom_kv_batch_result(b[c], i, &v, &vl, &ver);
            CHECK(rc == o->want, "round %ld op %zu (kind %d key %zu): got %d, want %d", r, i,
                  o->kind, o->k, rc, o->want);
            if (o->kind == OP_GET && rc == 0)
                CHECK(vl == o->wvlen && !memcmp(v, o->wval, vl) && ver == o->wver,
                      "round %ld op %zu: get of key %zu: wrong value or version", r, i, o->k);
            counts[o->kind]++;
            errs += rc != 0;
        }
        nops += n;
    }
    /* Every key one by one, then the listing. */
    size_t live = 0;
    for (size_t k = 0; k < nkeys; k++) {
        struct mkey *m = &model[k];
        void *v = NULL;
        size_t vl = 0;
        uint64_t ver = 0;
        int rc = pom_kv_get(kv[k & 1], m->key, m->klen, &v, &vl, &ver);
        CHECK(rc == (m->live ? 0 : -ENOENT), "final get of key %zu: %d", k, rc);
        if (rc == 0)
            CHECK(vl == m->vlen && !memcmp(v, m->val, vl) && ver == m->version,
                  "final get of key %zu: wrong value or version", k);
        pom_free(v);
        live += m->live;
    }
    pom_kv_cursor cur = POM_KV_CURSOR_INIT;
    while (!pom_kv_cursor_done(&cur))
        CHECK(pom_kv_list(kv[0], &cur, 1000, list_cb, NULL) >= 0, "list");
    for (size_t k = 0; k < nkeys; k++)
        CHECK(model[k].listed == (model[k].live ? 1 : 0), "key %zu listed %d times", k,
              model[k].listed);
    CHECK(pom_kv_sync(kv[0]) == 0 && pom_kv_sync(kv[1]) == 0, "pom_kv_sync");
    struct pom_fs_stats st;
    pom_get_stats(fs[1], &st);
    printf("result: %llu ops in %ld batches (%llu puts, %llu gets, %llu deletes, %llu "
           "answered an error as the model said); %zu keys live; second client %llu RPCs\n",
           (unsigned long long)nops, rounds, (unsigned long long)counts[OP_PUT],
           (unsigned long long)counts[OP_GET], (unsigned long long)counts[OP_DEL],
           (unsigned long long)errs, live, (unsigned long long)st.mds_rpcs);
    for (int c = 0; c < 2; c++) {
        pom_kv_batch_free(b[c]);
        pom_kv_close(kv[c]);
        pom_close(fs[c]);
    }
    free(ops);
    free(model);
    return 0;
}
