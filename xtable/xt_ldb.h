/*
 * xt_ldb.h -- opening a LevelDB the way a restarted daemon must (pom-mdsl's
 * pointer index, pom-r2's embedded store).
 *
 * A daemon restarted right after a SIGKILL can reach leveldb_open before the
 * kernel has finished tearing the old process down and released its LOCK
 * file; LevelDB then refuses at once. Waiting briefly for the lock turns
 * that race into a short delay, while a second live daemon on the same
 * folder is still refused (it never lets go).
 */
#ifndef XT_LDB_H
#define XT_LDB_H

#include <leveldb/c.h>
#include <stdbool.h>

/* leveldb_open(o, dir), retried every 50 ms for up to wait_ms while the
 * error is about the lock. Returns the db, or NULL with *err set (free it
 * with leveldb_free). */
leveldb_t *xt_ldb_open(const leveldb_options_t *o, const char *dir, int wait_ms, char **err);

/* Whether a leveldb_open error says another process holds the lock. */
bool xt_ldb_is_lock_error(const char *err);

#endif /* XT_LDB_H */
