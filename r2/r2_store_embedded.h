/*
 * r2_store_embedded.h -- the R2 state store in one local folder (LevelDB),
 * for a one-machine cluster: one session per folder, always the leader.
 *
 * Record format (the LevelDB value; the LevelDB key is the record's key,
 * e.g. "/sites/17", as bytes without a NUL; docs/r2-store.md):
 *
 *   offset  size  field
 *   0       1     format      R2_EMB_FORMAT (1)
 *   1       1     flags       bit 0: ephemeral; other bits 0
 *   2       2     reserved    0
 *   4       4     checksum    low 32 bits of xt_hash_bytes(bytes 8..end,
 *                             seed = xt_hash_bytes(key, keylen, 0))
 *   8       8     version     u64, little-endian
 *   16      n     value bytes (n <= R2_STORE_VALUE_MAX)
 *
 * The checksum covers the key, so a value stored under the wrong key is
 * caught as well as a flipped bit. A record that fails to decode is
 * reported as -EIO and logged; it is never silently skipped.
 */
#ifndef R2_STORE_EMBEDDED_H
#define R2_STORE_EMBEDDED_H

#include "r2_store.h"

#ifdef __cplusplus
extern "C" {
#endif

#define R2_EMB_FORMAT     1
#define R2_EMB_HDR        16
#define R2_EMB_OFF_FLAGS  1
#define R2_EMB_OFF_RSVD   2
#define R2_EMB_OFF_CSUM   4
#define R2_EMB_OFF_VER    8
#define R2_EMB_EPHEMERAL  0x01

/* Opens (creating if needed) the store in folder dir. Ephemeral records
 * left by a previous session that died are removed first. Writes are
 * synced to disk before a call returns. On success *out is the store, to
 * be closed with r2_store_close. Returns 0, -EBUSY (another session holds
 * the folder), -EIO (corrupt store; detail logged) or -errno. */
int r2_store_embedded_open(const char *dir, r2_store **out);

#ifdef __cplusplus
}
#endif
#endif /* R2_STORE_EMBEDDED_H */
