/*
 * auth_probe.c -- the client library as a user would call it, for
 * test_auth.sh: opens fs NAME through R2 (with a key file when given),
 * creates a file in its root and reads its attributes back.
 *
 *   auth_probe R2ADDR NAME [KEYFILE|- [TLS_CA TLS_CERT TLS_KEY]]
 *
 * Prints "ok" and exits 0, or prints the errno name of the first failure
 * ("open: ENOKEY") and exits 1.
 */
#include "pomegranate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fail(const char *what, int rc)
{
    const char *name = strerrorname_np(-rc);
    printf("%s: %s\n", what, name ? name : "?");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (argc > 4 && argc != 7)) {
        fprintf(stderr, "usage: auth_probe R2ADDR NAME [KEYFILE|- [TLS_CA TLS_CERT TLS_KEY]]\n");
        return 2;
    }
    struct pom_opts o = { .keyfile = argc >= 4 && strcmp(argv[3], "-") ? argv[3] : NULL,
                          .retry_ms = 2000 };
    if (argc == 7) {
        o.tls_ca = argv[4];
        o.tls_cert = argv[5];
        o.tls_key = argv[6];
    }
    pom_fs *fs = NULL;
    int rc = pom_open_opts(argv[1], argv[2], &o, &fs);
    if (rc < 0)
        return fail("open", rc);
    char name[64];
    snprintf(name, sizeof name, "probe-%d", (int)getpid());
    struct stat st;
    struct pom_cred cred = { (uint32_t)getuid(), (uint32_t)getgid(), 0 };
    pom_file *f = NULL;
    rc = pom_create(fs, POM_ROOT_INO, name, 0644, O_WRONLY, &cred, &st, &f);
    if (rc == 0) {
        rc = pom_getattr(fs, st.st_ino, &st);
        pom_release(f);
    }
    pom_close(fs);
    if (rc < 0)
        return fail("create", rc);
    printf("ok\n");
    return 0;
}
