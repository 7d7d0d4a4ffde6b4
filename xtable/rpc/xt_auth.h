/*
 * xt_auth.h -- keys and the connection handshake (docs/security.md).
 *
 * Every RPC connection starts with a challenge-response handshake before
 * any request is read: the client says who it is and sends a nonce, the
 * server answers with its nonce and a proof of the key, the client checks
 * it and proves the key in turn. Proofs are HMAC-SHA256 (OpenSSL's
 * libcrypto) over both nonces and the identity; MACs are compared with
 * CRYPTO_memcmp. Nothing here is hand-written cryptography.
 *
 * Keys:
 *   cluster key  32 random bytes made at the first `pomctl up` (or
 *                `pom-r2 --init-key FILE`); admin (pomctl) and site (daemon)
 *                connections prove it.
 *   client key   HMAC(cluster key, "client:" fsid ":" generation): the key
 *                of one file system, derived, so a server checks it
 *                without a key table.
 *
 * Key file (one line, mode 0600, refused when group or others may read it):
 *   cluster:  <64 hex digits>\n
 *   client:   client <fsid> <generation> <64 hex digits>\n
 *
 * Handshake frames (framed transport: 4-byte big-endian length, body;
 * integers big-endian):
 *   HELLO (client, 52 bytes)         CHALLENGE (server, 72 bytes)
 *     0  "POMA"                        0  "POMC"
 *     4  version (1)                   4  status (i32: 0 or -errno)
 *     5  role (enum xt_auth_role)      8  server nonce (32)
 *     6  flags (0)                    40  server proof (32; zero: open)
 *     8  fsid (i32)
 *    12  generation (u64)            PROOF (client, 36 bytes)
 *    20  client nonce (32)             0  "POMP"
 *                                      4  client proof (32)
 *   server proof = HMAC(K, "pom-auth-server" | HELLO body | server nonce)
 *   client proof = HMAC(K, "pom-auth-client" | HELLO body | server nonce)
 * where K is the cluster key, or the client key of the HELLO's fsid and
 * the fs's current generation for role client.
 *
 * Invariants:
 *  (1) A server with a key processes no request frame of a connection
 *      before its PROOF verified; a frame out of this order closes it.
 *  (2) A server without a key (open mode) answers a HELLO of role none
 *      with status 0 and a zero proof, and a client with a key refuses
 *      such a server: authentication is mutual or absent.
 */
#ifndef XT_AUTH_H
#define XT_AUTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XT_AUTH_KEY_LEN 32
#define XT_AUTH_NONCE_LEN 32
#define XT_AUTH_HELLO_LEN 52
#define XT_AUTH_CHALLENGE_LEN 72
#define XT_AUTH_PROOF_LEN 36
#define XT_AUTH_VERSION 1
/* The file a cluster key lives in, inside a data folder. */
#define XT_AUTH_KEY_FILE "cluster.key"

enum xt_auth_role {
    XT_AUTH_NONE = 0,    /* no key: only an open-mode server accepts it */
    XT_AUTH_ADMIN = 1,   /* pomctl with the cluster key */
    XT_AUTH_SITE = 2,    /* a daemon with the cluster key */
    XT_AUTH_CLIENT = 3,  /* a client key of one fs */
};

/* What a connection proves: a role, for role client its fs and key
 * generation, and the key itself. */
struct xt_auth_cred {
    int role;            /* enum xt_auth_role */
    int32_t fsid;        /* role client only */
    uint64_t gen;        /* role client only */
    uint8_t key[XT_AUTH_KEY_LEN];
};

/* The role's name ("none", "admin", "site", "client"). */
const char *xt_auth_role_name(int role);

/* Fills key with random bytes (RAND_bytes). Returns 0 or -EIO. */
int xt_auth_key_new(uint8_t key[XT_AUTH_KEY_LEN]);

/* Loads a key file (either format above) into *cred; a cluster key gives
 * role `cluster_role` (admin or site). Returns 0, -ENOENT, -EACCES (the
 * file is readable by group or others), -EINVAL (malformed); says why on
 * the log. */
int xt_auth_load(const char *path, int cluster_role, struct xt_auth_cred *cred);

/* Writes cred as a key file at path, mode 0600, atomically (temporary file,
 * fsync, rename). -EEXIST if path exists and `replace` is 0. */
int xt_auth_save(const char *path, const struct xt_auth_cred *cred, int replace);

/* Writes a new cluster key to path (as xt_auth_save) unless path exists.
 * Returns 0 (made, or there already) or a negative errno. */
int xt_auth_init(const char *path);

/* The client key of fsid at generation gen, from the cluster key. */
void xt_auth_client_key(const uint8_t cluster[XT_AUTH_KEY_LEN], int32_t fsid, uint64_t gen,
                        uint8_t out[XT_AUTH_KEY_LEN]);

/* ---- handshake messages -------------------------------------------------- */

/* The identity a HELLO carries. */
struct xt_auth_hello {
    int role;
    int32_t fsid;
    uint64_t gen;
    uint8_t nonce[XT_AUTH_NONCE_LEN];
};

/* Encodes a HELLO for cred (role none if cred is NULL) with a fresh nonce
 * into out. Returns 0 or -EIO (no randomness). */
int xt_auth_hello_make(const struct xt_auth_cred *cred, uint8_t out[XT_AUTH_HELLO_LEN]);
/* Decodes a HELLO body; -EPROTO if it is not one (wrong length, magic,
 * version or role). */
int xt_auth_hello_parse(const uint8_t *body, size_t len, struct xt_auth_hello *h);

/* proof = HMAC(key, label | hello | server nonce); `server` picks the label. */
void xt_auth_proof(const uint8_t key[XT_AUTH_KEY_LEN], int server,
                   const uint8_t hello[XT_AUTH_HELLO_LEN],
                   const uint8_t snonce[XT_AUTH_NONCE_LEN], uint8_t out[32]);
/* 1 if the proof matches, in constant time (CRYPTO_memcmp). */
int xt_auth_proof_ok(const uint8_t key[XT_AUTH_KEY_LEN], int server,
                     const uint8_t hello[XT_AUTH_HELLO_LEN],
                     const uint8_t snonce[XT_AUTH_NONCE_LEN], const uint8_t proof[32]);

#ifdef __cplusplus
}
#endif
#endif /* XT_AUTH_H */
