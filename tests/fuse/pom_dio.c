/*
 * pom_dio.c -- test helper: asynchronous O_DIRECT writes against buffered
 * reads of one file on a mount (xfstests generic/451's case), for
 * test_pomfs_posix.sh.
 *
 *   pom_dio FILE [ROUNDS]
 *
 * FILE is written buffered (SIZE bytes of 0), then each round writes one
 * block of the byte `round` with Linux AIO (io_submit on an O_DIRECT fd:
 * the kernel completes it asynchronously, so it drops no cached page at
 * completion) while a thread keeps reading the whole file buffered, which
 * caches pages during the write. After the write completes, a buffered
 * read of its block must show the new bytes, never the old ones.
 *
 * Exit 0: every round read its bytes; 1: a stale read ("stale: round R
 * offset O byte B") or an error; 77: the kernel has no AIO here.
 *
 *   pom_dio --toggle FILE [ROUNDS]
 *
 * generic/036's race: 512-byte writes at offset 512 on one fd while a
 * thread turns O_DIRECT on and off on it (fcntl F_SETFL). A write the
 * kernel began buffered holds its partly written page locked while it
 * waits for pomfs's answer, yet may carry O_DIRECT in its flags; pomfs
 * must not wait for that page then (a deadlock: the call never returns).
 * Exit 0: ROUNDS writes returned; 1: an error.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* O_DIRECT */
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define BLOCK (64 * 1024)
#define BLOCKS 4
#define SIZE (BLOCK * BLOCKS)

static atomic_int stop;
static int rfd;

static void *reader(void *arg)
{
    (void)arg;
    char *buf = malloc(SIZE);
    while (buf && !atomic_load(&stop))
        if (pread(rfd, buf, SIZE, 0) < 0)
            break;
    free(buf);
    return NULL;
}

static int die(const char *what)
{
    printf("%s: %s\n", what, strerror(errno));
    return 1;
}

/* generic/036's writes: part of a page, so a buffered one keeps the page
 * (not up to date) locked until pomfs answers; the kernel unlocks a page
 * a write fills before it sends the write. */
#define TOGGLE_LEN 512

static atomic_int toggles;

static void *toggler(void *arg)
{
    int fd = *(int *)arg;
    int fl = fcntl(fd, F_GETFL);
    while (fl >= 0 && !atomic_load(&stop)) {
        if (fcntl(fd, F_SETFL, fl | O_DIRECT) < 0 || fcntl(fd, F_SETFL, fl) < 0) {
            printf("fcntl: %s\n", strerror(errno));
            break;
        }
        atomic_fetch_add(&toggles, 1);
    }
    return NULL;
}

static int toggle_main(const char *file, int rounds)
{
    void *blk;
    if (posix_memalign(&blk, 4096, BLOCK) != 0)
        return die("malloc");
    int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return die("open");
    pthread_t th;
    if (pthread_create(&th, NULL, toggler, &fd) != 0)
        return die("pthread_create");
    int rc = 0;
    for (int r = 1; r <= rounds && rc == 0; r++) {
        memset(blk, r & 0xff, TOGGLE_LEN);
        if (pwrite(fd, blk, TOGGLE_LEN, TOGGLE_LEN) != TOGGLE_LEN)
            rc = die("pwrite");
    }
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    close(fd);
    free(blk);
    if (rc == 0)
        printf("%d writes returned, O_DIRECT turned on %d times\n", rounds,
               atomic_load(&toggles));
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: pom_dio [--toggle] FILE [ROUNDS]\n");
        return 2;
    }
    if (strcmp(argv[1], "--toggle") == 0)
        return argc < 3 ? 2 : toggle_main(argv[2], argc > 3 ? atoi(argv[3]) : 2000);
    int rounds = argc > 2 ? atoi(argv[2]) : 200;
    char *zero = calloc(1, SIZE), *got = malloc(BLOCK);
    void *blk;
    if (!zero || !got || posix_memalign(&blk, 4096, BLOCK) != 0)
        return die("malloc");
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || pwrite(fd, zero, SIZE, 0) != SIZE || fsync(fd) < 0 || close(fd) < 0)
        return die("buffered write");
    int dfd = open(argv[1], O_RDWR | O_DIRECT);
    if (dfd < 0)
        return die("open O_DIRECT");
    if ((rfd = open(argv[1], O_RDONLY)) < 0)
        return die("open");
    aio_context_t ctx = 0;
    if (syscall(SYS_io_setup, 1, &ctx) < 0) {
        printf("io_setup: %s\n", strerror(errno));
        return 77;
    }
    pthread_t th;
    if (pthread_create(&th, NULL, reader, NULL) != 0)
        return die("pthread_create");
    int rc = 0;
    for (int r = 1; r <= rounds && rc == 0; r++) {
        uint8_t v = (uint8_t)(r % 255 + 1);
        off_t off = (off_t)(r % BLOCKS) * BLOCK;
        memset(blk, v, BLOCK);
        struct iocb cb;
        memset(&cb, 0, sizeof cb);
        cb.aio_fildes = (uint32_t)dfd;
        cb.aio_lio_opcode = IOCB_CMD_PWRITE;
        cb.aio_buf = (uint64_t)(uintptr_t)blk;
        cb.aio_nbytes = BLOCK;
        cb.aio_offset = off;
        struct iocb *cbs[1] = { &cb };
        struct io_event ev;
        if (syscall(SYS_io_submit, ctx, 1, cbs) != 1) {
            rc = die("io_submit");
            break;
        }
        if (syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) != 1) {
            rc = die("io_getevents");
            break;
        }
        if (ev.res != BLOCK) {
            printf("round %d: aio write returned %lld\n", r, (long long)ev.res);
            rc = 1;
            break;
        }
        if (pread(rfd, got, BLOCK, off) != BLOCK) {
            rc = die("pread");
            break;
        }
        for (int i = 0; i < BLOCK; i++)
            if ((uint8_t)got[i] != v) {
                printf("stale: round %d offset %lld byte %u, wrote %u\n", r,
                       (long long)off + i, (unsigned)(uint8_t)got[i], (unsigned)v);
                rc = 1;
                break;
            }
    }
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    syscall(SYS_io_destroy, ctx);
    close(dfd);
    close(rfd);
    free(blk);
    free(zero);
    free(got);
    if (rc == 0)
        printf("%d rounds read back\n", rounds);
    return rc;
}
