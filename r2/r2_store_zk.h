/*
 * r2_store_zk.h -- the R2 state store in ZooKeeper (`pom-r2 --zk HOST:PORT,...`).
 *
 * Layout under the root prefix (docs/r2-store.md):
 *   <root>/data<key>         the record of key, e.g. /pomegranate/data/sites/17;
 *                            its znode data is the value, its data version
 *                            is the record's version
 *   <root>/election/<sid>-n_<seq>  one ephemeral sequential node per
 *                            candidate (sid = its session id in hex, so a
 *                            candidate finds its own node after a lost reply);
 *                            the data is the candidate's advertised id
 */
#ifndef R2_STORE_ZK_H
#define R2_STORE_ZK_H

#include "r2_store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct r2_store_zk_options {
    const char *hosts;       /* "host:port,host:port"; required */
    const char *root;        /* znode prefix; NULL = "/pomegranate" */
    int session_timeout_ms;  /* 0 = 10000; the server clamps it to
                                [2, 20] x its tickTime */
    int call_timeout_ms;     /* 0 = 5000: the longest any call blocks,
                                waiting for a connection included */
} r2_store_zk_options;

/* Connects (waiting up to call_timeout_ms for the first session) and
 * creates the root layout if missing. A session that expires later is
 * replaced by a store thread: ephemerals are re-created and the election
 * re-entered. On success *out is the store (r2_store_close). Returns 0,
 * -EINVAL (bad options), -ENOTCONN (no server answered in time) or -errno. */
int r2_store_zk_open(const r2_store_zk_options *opt, r2_store **out);

/* For tests: ends the current session from the server side (by opening a
 * second connection with the same session id and closing it), as a long
 * network partition would. The store notices, loses its ephemerals and
 * leadership, and recovers with a new session. Returns 0 or -errno. */
int r2_store_zk_expire_session(r2_store *s);

/* The current session id (0 when none); changes when a session is replaced. */
int64_t r2_store_zk_session(r2_store *s);

#ifdef __cplusplus
}
#endif
#endif /* R2_STORE_ZK_H */
