/*
 * xt_ldb.c -- see xt_ldb.h. LevelDB reports a held lock as an IO error
 * whose text names the LOCK file ("lock .../LOCK: Resource temporarily
 * unavailable"); that text is the only signal its C API gives.
 */
#include "xt_ldb.h"

#include "xt_common.h"

#include <string.h>

bool xt_ldb_is_lock_error(const char *err)
{
    return err && (strstr(err, "lock") || strstr(err, "LOCK"));
}

leveldb_t *xt_ldb_open(const leveldb_options_t *o, const char *dir, int wait_ms, char **err)
{
    for (int waited = 0;; waited += 50) {
        *err = NULL;
        leveldb_t *db = leveldb_open(o, dir, err);
        /* "already held by process": this very process has it open: no wait
         * can help. Otherwise another process holds it, maybe one dying. */
        if (db || !xt_ldb_is_lock_error(*err) || strstr(*err, "already held") ||
            waited >= wait_ms)
            return db;
        if (waited == 0)
            XT_WARN("%s is locked (a previous process still exiting?); waiting up to %d ms",
                    dir, wait_ms);
        leveldb_free(*err);
        xt_sleep_ms(50);
    }
}
