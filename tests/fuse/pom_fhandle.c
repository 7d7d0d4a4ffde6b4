/*
 * pom_fhandle.c -- test helper: file handles through a mount
 * (name_to_handle_at / open_by_handle_at, which python3's os module lacks),
 * for test_pomfs_export.sh: a handle kept across an unmount must open the
 * same directory or file on the next mount (pomfs export support, docs/client.md
 * "Lookup by uuid").
 *
 *   pom_fhandle save PATH FILE   writes PATH's handle to FILE (binary)
 *   pom_fhandle open MOUNT FILE  opens FILE's handle on the mount at MOUNT;
 *                                prints "ino=N parent=P path=PATH" (P: st_ino
 *                                of openat(fd, ".."); PATH: where the kernel
 *                                put the reconnected dentry) for a
 *                                directory, "ino=N data=LINE" (its first
 *                                line) for a file
 *
 * Exit 0, or 1 with the errno's name (ESTALE, ...) or a message on stdout.
 * Opening a handle needs CAP_DAC_READ_SEARCH (the tests run as root).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* name_to_handle_at, open_by_handle_at */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HANDLE_MAX 128 /* MAX_HANDLE_SZ */

/* A handle with room for the largest one the kernel makes. */
union handle {
    struct file_handle fh;
    char room[sizeof(struct file_handle) + HANDLE_MAX];
};

static int fail(const char *what)
{
    int e = errno;
    if (e == ESTALE)
        printf("ESTALE\n");
    else
        printf("%s: %s\n", what, strerror(e));
    return 1;
}

static int save(const char *path, const char *file)
{
    union handle h;
    h.fh.handle_bytes = HANDLE_MAX;
    int mount_id;
    if (name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0) != 0)
        return fail("name_to_handle_at");
    FILE *f = fopen(file, "wb");
    size_t n = sizeof h.fh + h.fh.handle_bytes;
    if (!f || fwrite(&h, 1, n, f) != n || fclose(f) != 0)
        return fail(file);
    return 0;
}

static int open_handle(const char *mount, const char *file)
{
    union handle h;
    FILE *f = fopen(file, "rb");
    if (!f)
        return fail(file);
    size_t n = fread(&h, 1, sizeof h, f);
    fclose(f);
    if (n < sizeof h.fh || h.fh.handle_bytes > HANDLE_MAX ||
        n != sizeof h.fh + h.fh.handle_bytes) {
        printf("%s: not a saved handle\n", file);
        return 1;
    }
    int mfd = open(mount, O_RDONLY | O_DIRECTORY);
    if (mfd < 0)
        return fail(mount);
    int fd = open_by_handle_at(mfd, &h.fh, O_RDONLY);
    if (fd < 0)
        return fail("open_by_handle_at");
    struct stat st, pst;
    if (fstat(fd, &st) != 0)
        return fail("fstat");
    if (!S_ISDIR(st.st_mode)) {
        /* A file: no ".." to reconnect; its first bytes show it is it. */
        char data[64];
        ssize_t got = read(fd, data, sizeof data - 1);
        if (got < 0)
            return fail("read");
        data[got] = '\0';
        data[strcspn(data, "\n")] = '\0';
        printf("ino=%llu data=%s\n", (unsigned long long)st.st_ino, data);
        close(fd);
        close(mfd);
        return 0;
    }
    int pfd = openat(fd, "..", O_RDONLY | O_DIRECTORY);
    if (pfd < 0 || fstat(pfd, &pst) != 0)
        return fail("openat ..");
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (len < 0)
        return fail("readlink");
    path[len] = '\0';
    printf("ino=%llu parent=%llu path=%s\n", (unsigned long long)st.st_ino,
           (unsigned long long)pst.st_ino, path);
    close(pfd);
    close(fd);
    close(mfd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "save") == 0)
        return save(argv[2], argv[3]);
    if (argc == 4 && strcmp(argv[1], "open") == 0)
        return open_handle(argv[2], argv[3]);
    fprintf(stderr, "usage: pom_fhandle save PATH FILE | open MOUNT FILE\n");
    return 2;
}
