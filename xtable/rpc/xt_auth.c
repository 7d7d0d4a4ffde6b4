/*
 * xt_auth.c -- key files, key derivation and the handshake messages
 * (formats and invariants in xt_auth.h; design in docs/security.md).
 *
 * HMAC-SHA256 and RAND_bytes come from OpenSSL's libcrypto; this file only
 * lays out the bytes they work on.
 */
#include "xt_auth.h"

#include "xt_common.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

static const uint8_t kHelloMagic[4] = { 'P', 'O', 'M', 'A' };

const char *xt_auth_role_name(int role)
{
    switch (role) {
    case XT_AUTH_ADMIN: return "admin";
    case XT_AUTH_SITE: return "site";
    case XT_AUTH_CLIENT: return "client";
    default: return "none";
    }
}

int xt_auth_key_new(uint8_t key[XT_AUTH_KEY_LEN])
{
    return RAND_bytes(key, XT_AUTH_KEY_LEN) == 1 ? 0 : -EIO;
}

static void hmac(const uint8_t key[XT_AUTH_KEY_LEN], const void *a, size_t alen, const void *b,
                 size_t blen, const void *c, size_t clen, uint8_t out[32])
{
    /* The three parts are short (labels, a HELLO, a nonce): one copy. */
    uint8_t msg[128];
    assert(alen + blen + clen <= sizeof msg);
    memcpy(msg, a, alen);
    memcpy(msg + alen, b, blen);
    memcpy(msg + alen + blen, c, clen);
    unsigned int olen = 32;
    uint8_t *r = HMAC(EVP_sha256(), key, XT_AUTH_KEY_LEN, msg, alen + blen + clen, out, &olen);
    assert(r && olen == 32);
    (void)r;
}

void xt_auth_client_key(const uint8_t cluster[XT_AUTH_KEY_LEN], int32_t fsid, uint64_t gen,
                        uint8_t out[XT_AUTH_KEY_LEN])
{
    char label[64];
    int n = snprintf(label, sizeof label, "client:%" PRId32 ":%" PRIu64, fsid, gen);
    hmac(cluster, label, (size_t)n, "", 0, "", 0, out);
}

/* ---- key files ------------------------------------------------------------ */

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Exactly 64 lowercase hex digits. */
static int unhex(const char *s, uint8_t out[XT_AUTH_KEY_LEN])
{
    for (int i = 0; i < XT_AUTH_KEY_LEN; i++) {
        int hi = hexval(s[2 * i]), lo = hi < 0 ? -1 : hexval(s[2 * i + 1]);
        if (lo < 0)
            return -EINVAL;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return s[2 * XT_AUTH_KEY_LEN] == '\0' ? 0 : -EINVAL;
}

int xt_auth_load(const char *path, int cluster_role, struct xt_auth_cred *cred)
{
    assert(cluster_role == XT_AUTH_ADMIN || cluster_role == XT_AUTH_SITE);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        XT_ERR("key file %s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    char buf[256];
    ssize_t n = -1;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
    } else if (st.st_mode & 077) {
        XT_ERR("key file %s: mode %03o lets others read it; chmod 600 it", path,
               (unsigned)(st.st_mode & 0777));
        rc = -EACCES;
    } else if ((n = read(fd, buf, sizeof buf - 1)) < 0) {
        rc = -errno;
    }
    close(fd);
    if (rc)
        return rc;
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl)
        *nl = '\0';
    memset(cred, 0, sizeof *cred);
    char hex[2 * XT_AUTH_KEY_LEN + 2];
    int32_t fsid;
    uint64_t gen;
    int used = 0;
    if (strncmp(buf, "client ", 7) == 0) {
        if (sscanf(buf, "client %" SCNd32 " %" SCNu64 " %65s%n", &fsid, &gen, hex, &used) != 3 ||
            buf[used] != '\0' || fsid <= 0 || unhex(hex, cred->key))
            rc = -EINVAL;
        cred->role = XT_AUTH_CLIENT;
        cred->fsid = fsid;
        cred->gen = gen;
    } else {
        rc = unhex(buf, cred->key);
        cred->role = cluster_role;
    }
    if (rc)
        XT_ERR("key file %s: not a key (want 64 hex digits, or "
               "'client FSID GENERATION' and 64 hex digits)", path);
    return rc;
}

int xt_auth_save(const char *path, const struct xt_auth_cred *c, int replace)
{
    char tmp[4096], line[160];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int n = 0;
    if (c->role == XT_AUTH_CLIENT)
        n = snprintf(line, sizeof line, "client %" PRId32 " %" PRIu64 " ", c->fsid, c->gen);
    for (int i = 0; i < XT_AUTH_KEY_LEN; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%02x", c->key[i]);
    line[n++] = '\n';
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int rc = write(fd, line, (size_t)n) == n ? 0 : -EIO;
    if (!rc && fsync(fd))
        rc = -errno;
    if (close(fd) && !rc)
        rc = -errno;
    if (!rc && !replace)
        rc = link(tmp, path) ? -errno : 0;
    else if (!rc)
        rc = rename(tmp, path) ? -errno : 0;
    if (rc || !replace)
        unlink(tmp);
    return rc;
}

int xt_auth_init(const char *path)
{
    struct xt_auth_cred c = { .role = XT_AUTH_SITE };
    int rc = xt_auth_key_new(c.key);
    if (rc == 0)
        rc = xt_auth_save(path, &c, 0);
    return rc == -EEXIST ? 0 : rc;
}

/* ---- handshake messages ---------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int xt_auth_hello_make(const struct xt_auth_cred *cred, uint8_t out[XT_AUTH_HELLO_LEN])
{
    memset(out, 0, XT_AUTH_HELLO_LEN);
    memcpy(out, kHelloMagic, 4);
    out[4] = XT_AUTH_VERSION;
    out[5] = (uint8_t)(cred ? cred->role : XT_AUTH_NONE);
    if (cred && cred->role == XT_AUTH_CLIENT) {
        put32(out + 8, (uint32_t)cred->fsid);
        put32(out + 12, (uint32_t)(cred->gen >> 32));
        put32(out + 16, (uint32_t)cred->gen);
    }
    return RAND_bytes(out + 20, XT_AUTH_NONCE_LEN) == 1 ? 0 : -EIO;
}

int xt_auth_hello_parse(const uint8_t *b, size_t len, struct xt_auth_hello *h)
{
    if (len != XT_AUTH_HELLO_LEN || memcmp(b, kHelloMagic, 4) || b[4] != XT_AUTH_VERSION ||
        b[5] > XT_AUTH_CLIENT || b[6] || b[7])
        return -EPROTO;
    h->role = b[5];
    h->fsid = (int32_t)get32(b + 8);
    h->gen = (uint64_t)get32(b + 12) << 32 | get32(b + 16);
    memcpy(h->nonce, b + 20, XT_AUTH_NONCE_LEN);
    return 0;
}

void xt_auth_proof(const uint8_t key[XT_AUTH_KEY_LEN], int server,
                   const uint8_t hello[XT_AUTH_HELLO_LEN],
                   const uint8_t snonce[XT_AUTH_NONCE_LEN], uint8_t out[32])
{
    const char *label = server ? "pom-auth-server" : "pom-auth-client";
    hmac(key, label, strlen(label), hello, XT_AUTH_HELLO_LEN, snonce, XT_AUTH_NONCE_LEN, out);
}

int xt_auth_proof_ok(const uint8_t key[XT_AUTH_KEY_LEN], int server,
                     const uint8_t hello[XT_AUTH_HELLO_LEN],
                     const uint8_t snonce[XT_AUTH_NONCE_LEN], const uint8_t proof[32])
{
    uint8_t want[32];
    xt_auth_proof(key, server, hello, snonce, want);
    return CRYPTO_memcmp(want, proof, 32) == 0;
}
