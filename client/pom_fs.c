/*
 * pom_fs.c -- the top of libpomegranate: a handle made (pom_connect_mds,
 * pom_open: R2 lookup, routes, the root row, the blob tier of the fs
 * record, the mount's R2 registration) and closed, pom_sync and statfs.
 * It assembles the floors (pom_call_i.h) and may call any of them; it
 * hands the transport its two upcalls (fs->up).
 *
 * Invariants:
 *  (1) The root row is created (exclusively) at the first connect, by
 *      whichever client gets there first.
 *  (2) pom_close stops what uses the lower floors before they go: the R2
 *      agent, the reclaimer (it uses the blob tier and the inode map), the
 *      queued tract sets (a sync), then routes, inode map, errseq, blob.
 */
#include "pom_file_i.h"
#include "pom_ns_i.h"
#include "pom_route.h"
#include "r2_agent.h"
#include "xt_rpc_r2.h"
#include "xt_time.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The transport's upcalls (pom_call_i.h struct pom_up). */
static void up_restarted(pom_fs *fs)
{
    pom_ino_mark_stale(fs);
}

static bool up_held(pom_fs *fs, uint64_t key)
{
    return pom_ino_known(fs, key);
}

/* Creates the root row unless it exists (invariant 1). */
static int ensure_root(pom_fs *fs)
{
    struct xt_resp r;
    xt_row row;
    int rc = pom_row_get(fs, XT_NS_TABLE_SUPER, XT_NS_ROOT_ROW, POM_ROW_META, &r, &row);
    if (rc == 0) {
        xt_resp_free(&r);
        return 0;
    }
    if (rc != -ENOENT)
        return rc;
    xt_row root;
    xt_row_init(&root);
    uint64_t now = xt_now_ns();
    root.attr.uuid = POM_ROOT_INO;
    root.attr.type = XT_ROW_DIR;
    root.attr.mode = 0755;
    root.attr.uid = (uint32_t)geteuid();
    root.attr.gid = (uint32_t)getegid();
    root.attr.nlink = 2; /* 2 + subdirectories (docs/client.md "nlink") */
    root.attr.atime_ns = root.attr.mtime_ns = root.attr.ctime_ns = root.attr.btime_ns = now;
    struct xt_req q = { .op = XT_OP_CREATE, .t = { .table = XT_NS_TABLE_SUPER },
                        .name = XT_NS_ROOT_ROW, .name_len = 4, .flags = XT_F_EXCL | XT_F_SYNC,
                        .row = &root };
    rc = pom_call(fs, &q, &r, NULL);
    xt_resp_free(&r);
    return rc == -EEXIST ? 0 : rc;
}

/* The key of opts->keyfile into *cred; 1 if there is one, 0 if none. */
static int load_cred(const struct pom_opts *opts, struct xt_auth_cred *cred)
{
    if (!opts || !opts->keyfile)
        return 0;
    int rc = xt_auth_load(opts->keyfile, XT_AUTH_ADMIN, cred);
    return rc < 0 ? rc : 1;
}

/* The TLS context of opts into *tls (NULL: none; xt_rpc_tls_free). */
static int load_tls(const struct pom_opts *opts, xt_rpc_tls **tls)
{
    struct xt_rpc_tls_opts to = { 0 };
    if (opts)
        to = (struct xt_rpc_tls_opts){ .ca = opts->tls_ca, .cert = opts->tls_cert,
                                       .key = opts->tls_key };
    return xt_rpc_tls_new(&to, tls);
}

static struct xt_rpc_pool_opts pool_opts(const struct pom_opts *opts,
                                         const struct xt_auth_cred *cred, xt_rpc_tls *tls)
{
    return (struct xt_rpc_pool_opts){
        .cred = cred,
        .tls = tls,
        .max_idle = 32,
        .call_timeout_ms = opts && opts->call_timeout_ms > 0 ? opts->call_timeout_ms : 10000,
        .backoff_min_ms = 10, .backoff_max_ms = 500,
    };
}

/* A connected fs over route (taken over, also on error). */
static int fs_new(uint32_t fsid, const struct pom_opts *opts, pom_route *route, pom_fs **out)
{
    pom_fs *fs = xt_calloc(1, sizeof *fs);
    if (!fs) {
        pom_route_free(route);
        return -ENOMEM;
    }
    fs->fsid = fsid;
    fs->route = route;
    fs->retry_ms = opts && opts->retry_ms > 0 ? opts->retry_ms : 30000;
    fs->soft_ms = opts && opts->soft_ms > 0 ? opts->soft_ms : 0;
    fs->call_ms = pool_opts(opts, NULL, NULL).call_timeout_ms;
    fs->up = (struct pom_up){ .restarted = up_restarted, .held = up_held };
    pthread_mutex_init(&fs->mu, NULL);
    pthread_mutex_init(&fs->alloc_mu, NULL);
    pthread_mutex_init(&fs->epoch_mu, NULL);
    pthread_mutex_init(&fs->gone_mu, NULL);
    int rc = pom_ino_init(fs);
    if (rc == 0)
        rc = pom_es_init(fs);
    if (rc == 0)
        rc = ensure_root(fs);
    if (rc == 0)
        rc = pom_ino_ref(fs, POM_ROOT_INO, XT_NS_TABLE_SUPER, XT_NS_ROOT_ROW, XT_ROW_DIR, 1);
    if (rc < 0) {
        pom_close(fs);
        return rc;
    }
    *out = fs;
    return 0;
}

int pom_connect_mds_opts(const char *mds_addr, uint32_t fsid, const struct pom_opts *opts,
                         pom_fs **out)
{
    *out = NULL;
    if (!mds_addr)
        return -EINVAL;
    struct xt_auth_cred cred;
    int has = load_cred(opts, &cred);
    if (has < 0)
        return has;
    xt_rpc_tls *tls;
    int rc = load_tls(opts, &tls);
    if (rc < 0)
        return rc;
    struct xt_rpc_pool_opts po = pool_opts(opts, has ? &cred : NULL, tls);
    pom_route *route;
    rc = pom_route_new_single(mds_addr, &po, &route);
    xt_rpc_tls_free(tls); /* the route holds its own reference */
    return rc < 0 ? rc : fs_new(fsid, opts, route, out);
}

int pom_connect_mds(const char *mds_addr, uint32_t fsid, pom_fs **out)
{
    return pom_connect_mds_opts(mds_addr, fsid, NULL, out);
}

/* Asks the R2s in r2_addrs (comma-separated) for fs `fsname` and for the
 * view (MDS sites, ring 0): *v (xt_view_free) when 0. Followers answer
 * get_view and fs_list too, so any R2 will do. */
static int r2_locate(const char *r2_addrs, const char *fsname, const struct xt_auth_cred *cred,
                     xt_rpc_tls *tls, uint32_t *fsid, struct xt_view *view,
                     struct xt_fs_info *info)
{
    char list[1024];
    if (strlen(r2_addrs) >= sizeof list)
        return -EINVAL;
    strcpy(list, r2_addrs);
    int rc = -EINVAL;
    char *save = NULL;
    for (char *a = strtok_r(list, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        char host[256];
        int port;
        if (xt_rpc_parse_addr(a, host, sizeof host, &port))
            return -EINVAL;
        struct xt_rpc_pool_opts po = { .host = host, .port = port, .call_timeout_ms = 5000,
                                       .cred = cred, .tls = tls };
        xt_rpc_pool *p = NULL;
        if ((rc = xt_rpc_pool_new(&po, &p)))
            return rc;
        struct xt_fs_info *fs = NULL;
        size_t nfs = 0;
        rc = xt_r2_fs_list(p, NULL, fsname, &fs, &nfs);
        if (rc == 0) {
            rc = -ENOENT;
            for (size_t i = 0; i < nfs; i++)
                if (!strcmp(fs[i].name, fsname)) {
                    *fsid = fs[i].fsid;
                    memcpy(info->blob_backend, fs[i].blob_backend, sizeof info->blob_backend);
                    memcpy(info->blob_path, fs[i].blob_path, sizeof info->blob_path);
                    rc = 0;
                }
            xt_fs_info_free_array(fs, nfs);
        }
        if (rc == 0) {
            struct xt_view v;
            bool has = false;
            rc = xt_r2_get_view(p, NULL, 0, &has, &v);
            if (rc == 0) {
                rc = -EHOSTUNREACH;
                for (size_t i = 0; has && i < v.nsites && rc; i++)
                    if (v.sites[i].type == XT_SITE_MDS && v.sites[i].state == XT_SITE_UP)
                        rc = 0;
                if (rc == 0)
                    *view = v;
                else
                    xt_view_free(&v);
            }
        }
        xt_rpc_pool_free(p);
        if (rc == 0 || rc == -ENOENT || rc == -EHOSTUNREACH || rc == -ENOKEY ||
            rc == -EKEYREJECTED || rc == -EPROTONOSUPPORT)
            return rc;
    }
    return rc;
}

/* New views (MDS added or moved, ring 0 changed) re-route at once; while
 * R2 is unreachable the last view stays (pom_route.h (2)). The blob tier
 * follows ring 1 (pom_blob_view), under fs->mu so pom_set_blob_conf does
 * not close it meanwhile (it builds, never calls: the lock stays brief). */
static void client_view(void *arg, const struct xt_view *v, int changed)
{
    pom_fs *fs = arg;
    if (!(changed & (XT_VIEW_SITES | XT_VIEW_RINGS)))
        return;
    pom_route_update(fs->route, v);
    pthread_mutex_lock(&fs->mu);
    pom_blob_view(fs->blob, v);
    pthread_mutex_unlock(&fs->mu);
}

int pom_open(const char *r2_addrs, const char *fsname, pom_fs **out)
{
    return pom_open_opts(r2_addrs, fsname, NULL, out);
}

int pom_open_opts(const char *r2_addrs, const char *fsname, const struct pom_opts *opts,
                  pom_fs **out)
{
    *out = NULL;
    if (!r2_addrs || !fsname || !*fsname)
        return -EINVAL;
    uint32_t fsid = 0;
    struct xt_view view;
    memset(&view, 0, sizeof view);
    struct xt_fs_info *info = xt_calloc(1, sizeof *info); /* blob backend and path */
    if (!info)
        return -ENOMEM;
    struct xt_auth_cred cred;
    int has = load_cred(opts, &cred);
    xt_rpc_tls *tls = NULL;
    int rc = has < 0 ? has : load_tls(opts, &tls);
    if (rc < 0) {
        xt_free(info);
        return rc;
    }
    rc = r2_locate(r2_addrs, fsname, has ? &cred : NULL, tls, &fsid, &view, info);
    if (rc == -ENOENT)
        XT_ERR("no file system named '%s' at R2 %s (create it: pomctl fs create %s)", fsname,
               r2_addrs, fsname);
    else if (rc == -EHOSTUNREACH)
        XT_ERR("R2 %s knows no MDS that is up", r2_addrs);
    else if (rc && rc != -ENOKEY && rc != -EKEYREJECTED &&
             rc != -EPROTONOSUPPORT) /* the handshake said why */
        XT_ERR("cannot reach R2 at %s: %s", r2_addrs, strerror(-rc));
    if (rc == 0) {
        /* Every MDS of the view, requests routed by ring 0 (pom_route.h). */
        struct xt_rpc_pool_opts po = pool_opts(opts, has ? &cred : NULL, tls);
        pom_route *route;
        rc = pom_route_new_view(&view, &po, &route);
        if (rc == 0)
            rc = fs_new(fsid, opts, route, out);
        if (rc == 0 && (info->blob_path[0] || !strcmp(info->blob_backend, "mdsl"))) {
            /* The fs record's blob tier. Not reaching it leaves the small
             * files usable (large ones answer EFBIG); pomfs -o blob=DIR
             * overrides. The mdsl backend places tracts by this view. */
            struct pom_blob_conf bc = { .backend = info->blob_backend, .path = info->blob_path,
                                        .fsid = fsid, .view = &view, .pool = &po };
            int brc = pom_set_blob_conf(*out, &bc);
            if (brc < 0)
                XT_ERR("fs %s: blob tier %s %s not usable (%s): files over %u bytes answer "
                       "EFBIG", fsname, info->blob_backend, info->blob_path, strerror(-brc),
                       POM_INLINE_MAX);
        } else if (rc == 0) {
            XT_WARN("fs %s has no blob path: files over %u bytes answer EFBIG (pomfs -o "
                    "blob=DIR)", fsname, POM_INLINE_MAX);
        }
        xt_view_free(&view);
    }
    xt_free(info);
    if (rc) {
        xt_rpc_tls_free(tls);
        return rc;
    }
    /* Register the mount: R2 counts it (fs drop is refused while mounted)
     * and sees it fail when the heartbeats stop. */
    char label[64];
    snprintf(label, sizeof label, "client-%d", (int)getpid());
    struct r2_agent_opts ao = { .r2_addrs = r2_addrs, .type = XT_SITE_CLIENT, .addr = label,
                                .fs_name = fsname,
                                .metrics = opts ? opts->metrics_addr : NULL,
                                .on_view = client_view,
                                .view_arg = *out, .cred = has ? &cred : NULL,
                                .tls = tls };
    if ((rc = r2_agent_start(&ao, &(*out)->agent)))
        XT_WARN("cannot register the mount with R2: %s", strerror(-rc));
    xt_rpc_tls_free(tls); /* the route and the agent hold their own references */
    return 0;
}

void pom_close(pom_fs *fs)
{
    if (!fs)
        return;
    r2_agent_stop(fs->agent);
    pom_reclaim_stop(fs); /* before the blob tier and the inode map go */
    assert(!fs->reclaim); /* invariant (2): its thread is joined */
    if (fs->route && fs->ngone)
        pom_tracts_reap(fs);
    pom_route_free(fs->route);
    pom_ino_destroy(fs);
    pom_es_free(fs);
    pom_blob_close(fs->blob);
    pthread_mutex_destroy(&fs->mu);
    pthread_mutex_destroy(&fs->alloc_mu);
    pthread_mutex_destroy(&fs->epoch_mu);
    pthread_mutex_destroy(&fs->gone_mu);
    xt_free(fs->gone);
    xt_free(fs);
}

uint32_t pom_fsid(const pom_fs *fs)
{
    return fs->fsid;
}

int pom_sync(pom_fs *fs)
{
    int rc = pom_gone_sync(fs);
    return rc < 0 ? rc : pom_es_check_fs(fs);
}

/* Counters of this client for metrics (pomfs's /metrics): read without
 * locks, each counter on its own (docs/metrics.md). */
void pom_get_stats(pom_fs *fs, struct pom_fs_stats *st)
{
    memset(st, 0, sizeof *st);
    st->mds_rpcs = atomic_load_explicit(&fs->rpcs, memory_order_relaxed);
    struct xt_rpc_pool_stats ps;
    xt_rpc_pool_totals(&ps);
    st->rpc_calls = ps.calls;
    st->rpc_errors = ps.errors;
    st->rpc_timeouts = ps.timeouts;
    st->rpc_connects = ps.connects;
    st->rpc_connect_failures = ps.connect_failures;
    if (fs->blob)
        pom_blob_counters(fs->blob, &st->blob_bytes_written, &st->blob_bytes_read);
}

/* How long statfs waits for the first capacity R2 sends (a heartbeat
 * interval and some). */
#define STATFS_WAIT_MS 2000

int pom_statfs(pom_fs *fs, struct statvfs *sv)
{
    /* The capacity R2 sends back with every heartbeat of the mount (docs/
     * client.md "statfs"): right after the mount it may not have come yet. */
    struct xt_capacity cap;
    int rc = -EAGAIN;
    for (int waited = 0; fs->agent; waited += 50) {
        if ((rc = r2_agent_capacity(fs->agent, &cap)) != -EAGAIN || waited >= STATFS_WAIT_MS)
            break;
        xt_sleep_ms(50);
    }
    if (rc == -EAGAIN)
        memset(&cap, 0, sizeof cap); /* no R2 figure: the blob tier's disk alone */
    else if (rc < 0)
        return rc;
    uint64_t size = cap.size, avail = cap.avail;
    pom_blob *b = pom_blob_of(fs);
    if (b)
        pom_blob_space(b, cap.devs, cap.ndevs, &size, &avail);
    const struct xt_fs_usage *u = xt_capacity_fs(&cap, fs->fsid);
    uint64_t used = u ? u->bytes : 0, files = u ? u->files : 0;
    /* avail: what the storage has free, and no more than the quota leaves. */
    if (u && u->quota_bytes)
        avail = XT_MIN(avail, u->quota_bytes > used ? u->quota_bytes - used : 0);
    uint64_t ffree = UINT64_C(1) << 32; /* no inode bound but space */
    if (u && u->quota_files)
        ffree = u->quota_files > files ? u->quota_files - files : 0;
    xt_capacity_free(&cap);
    const uint64_t bs = 4096;
    memset(sv, 0, sizeof *sv);
    sv->f_bsize = bs;
    sv->f_frsize = bs;
    /* df shows size = storage size, used = blocks - bfree = this fs's bytes. */
    sv->f_blocks = XT_MAX(size, used) / bs;
    uint64_t used_blocks = (used + bs - 1) / bs;
    sv->f_bfree = sv->f_blocks > used_blocks ? sv->f_blocks - used_blocks : 0;
    sv->f_bavail = XT_MIN(avail / bs, sv->f_bfree);
    sv->f_files = files + ffree;
    sv->f_ffree = sv->f_favail = ffree;
    sv->f_fsid = fs->fsid;
    sv->f_namemax = XT_NAME_MAX;
    return 0;
}
