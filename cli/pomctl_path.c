/*
 * pomctl_path.c -- `pomctl path [--fs NAME] UUID`: the path of a directory
 * from its uuid (inode number) alone, for an operator holding a number
 * from a log, a file handle or `stat -c %i`. It walks the GDT up to the
 * root through the client library (pom_gdt_where: each step checked
 * against the row it names, and waited for up to 3 s while an RMU may be
 * late; docs/client.md "Lookup by uuid").
 *
 * Invariants:
 *  (1) Each component is one that held its directory when it was read; a
 *      rename racing the walk can still give a path that was never whole
 *      at one instant (no snapshot across directories).
 *  (2) The walk ends: past PATH_DEPTH_MAX levels (renames racing it into
 *      a cycle) it stops with ELOOP.
 */
#include "pomctl_i.h"

#include "pomegranate.h"
#include "pomegranate_admin.h"
#include "xt_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PATH_DEPTH_MAX 4096

/* *out (xt_free) gets dir's path, "/" for the root. 0, -ELOOP, -ENOMEM, or
 * pom_gdt_where's errors (-ESTALE: not a directory that exists). */
static int dir_path(pom_fs *fs, uint64_t dir, char **out)
{
    char *path = xt_strdup("");
    if (!path)
        return -ENOMEM;
    int rc = 0;
    for (int depth = 0; rc == 0 && dir != POM_ROOT_INO; depth++) {
        char name[XT_NAME_MAX + 1];
        uint64_t parent;
        struct stat st;
        if (depth == PATH_DEPTH_MAX) {
            rc = -ELOOP;
        } else if ((rc = pom_gdt_where(fs, dir, &parent, name, &st)) == 0 &&
                   !S_ISDIR(st.st_mode)) {
            rc = -ESTALE; /* every inode has a GDT row; a path names a directory */
        } else if (rc == 0) {
            size_t len = strlen(name) + 1 + strlen(path) + 1;
            char *p = xt_malloc(len);
            if (!p) {
                rc = -ENOMEM;
                break;
            }
            snprintf(p, len, "/%s%s", name, path);
            xt_free(path);
            path = p;
            dir = parent;
        }
    }
    if (rc == 0 && !path[0]) {
        xt_free(path);
        path = xt_strdup("/");
        rc = path ? 0 : -ENOMEM;
    }
    if (rc < 0) {
        xt_free(path);
        path = NULL;
    }
    *out = path;
    return rc;
}

int pomctl_cmd_path(struct pomctl *ctl, int argc, char **argv)
{
    const char *fsname = "pomfs", *arg = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--fs") && i + 1 < argc)
            fsname = argv[++i];
        else if (!arg && argv[i][0] != '-')
            arg = argv[i];
        else
            return pomctl_usage_err(ctl, "path", "unknown argument '%s'", argv[i]);
    }
    if (!pomctl_fs_name_ok(fsname))
        return pomctl_usage_err(ctl, "path", "bad fs name '%s'", fsname);
    char *end = NULL;
    errno = 0;
    unsigned long long uuid = arg ? strtoull(arg, &end, 0) : 0;
    if (!arg || !*arg || *end || errno || uuid == 0)
        return pomctl_usage_err(ctl, "path", "want a directory's uuid (inode number), got '%s'",
                                arg ? arg : "");
    char what[160];
    snprintf(what, sizeof what, "path %llu in %s", uuid, fsname);
    pom_fs *fs;
    int code = pomctl_fs_open(ctl, fsname, what, &fs);
    if (code)
        return code;
    char *path;
    int rc = dir_path(fs, uuid, &path);
    pom_close(fs);
    if (rc < 0)
        return pomctl_fail(ctl, rc, what,
                           rc == -ESTALE ? "no such directory (removed, never made, or not a "
                                           "directory: only directories have GDT rows)"
                                         : NULL);
    if (ctl->json) {
        pomctl_json_init(&ctl->js, stdout, true);
        pomctl_json_obj_begin(&ctl->js, NULL);
        pomctl_json_bool(&ctl->js, "ok", true);
        pomctl_json_str(&ctl->js, "fs", fsname);
        pomctl_json_u64(&ctl->js, "uuid", uuid);
        pomctl_json_str(&ctl->js, "path", path);
        pomctl_json_obj_end(&ctl->js);
        pomctl_json_finish(&ctl->js);
        ctl->json_done = true;
    } else {
        printf("%s\n", path);
    }
    xt_free(path);
    return POMCTL_OK;
}
