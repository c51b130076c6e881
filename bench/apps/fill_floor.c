/* fill_floor FILE MODE: the floors under a restart's memory fill, on this machine: FILE (warm in
   the page cache) read, or copied into fresh anonymous memory in 2 MiB pieces, by MODE:
     read      pread into one reused 2 MiB buffer (what `cat` does)
     small     4 KiB pages (MADV_NOHUGEPAGE), MADV_POPULATE_WRITE then pread
     huge      MADV_HUGEPAGE, MADV_POPULATE_WRITE then pread
     uffdcopy  registered with a userfaultfd (MISSING), pread into a buffer, UFFDIO_COPY
     uffdmove  the same, read into a huge-page buffer and moved with UFFDIO_MOVE (Linux 6.8)
   Prints `MODE SECONDS`. No CRC, no checks: the cost of the memory alone (bench/fill_floor.py). */
#define _GNU_SOURCE
#include "../../loader/restart/uffd_move.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define PIECE (2UL << 20)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* n bytes at a PIECE-aligned address. */
static char *aligned(size_t n)
{
    char *m = mmap(NULL, n + PIECE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        die("mmap");
    return (char *)(((unsigned long)m + PIECE - 1) & ~(PIECE - 1));
}

static void read_piece(int fd, char *to, size_t len, size_t at)
{
    if (pread(fd, to, len, (off_t)at) != (ssize_t)len)
        die("pread");
}

static int uffd_open(void)
{
    int u = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_MOVE};
    if (u < 0 || ioctl(u, UFFDIO_API, &api) != 0)
        die("userfaultfd");
    return u;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: fill_floor FILE read|small|huge|uffdcopy|uffdmove\n");
        return 2;
    }
    const char *mode = argv[2];
    int fd = open(argv[1], O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0)
        die(argv[1]);
    size_t size = (size_t)st.st_size & ~(PIECE - 1);
    double t0 = now();
    if (strcmp(mode, "read") == 0) {
        char *buf = aligned(PIECE);
        for (size_t at = 0; at < size; at += PIECE)
            read_piece(fd, buf, PIECE, at);
    } else if (strcmp(mode, "small") == 0 || strcmp(mode, "huge") == 0) {
        char *dst = aligned(size);
        madvise(dst, size, mode[0] == 'h' ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
        for (size_t at = 0; at < size; at += PIECE) {
            madvise(dst + at, PIECE, MADV_POPULATE_WRITE);
            read_piece(fd, dst + at, PIECE, at);
        }
    } else if (strcmp(mode, "uffdcopy") == 0 || strcmp(mode, "uffdmove") == 0) {
        int move = mode[4] == 'm', u = uffd_open();
        char *dst = aligned(size), *stage = aligned(PIECE);
        struct uffdio_register reg = {.range = {(unsigned long)dst, size},
                                      .mode = UFFDIO_REGISTER_MODE_MISSING};
        if (ioctl(u, UFFDIO_REGISTER, &reg) != 0)
            die("UFFDIO_REGISTER");
        madvise(stage, PIECE, MADV_HUGEPAGE);
        for (size_t at = 0; at < size; at += PIECE) {
            if (move)
                madvise(stage, PIECE, MADV_POPULATE_WRITE);
            read_piece(fd, stage, PIECE, at);
            if (move) {
                struct uffdio_move m = {
                    .dst = (unsigned long)dst + at, .src = (unsigned long)stage, .len = PIECE};
                if (ioctl(u, UFFDIO_MOVE, &m) != 0)
                    die("UFFDIO_MOVE");
            } else {
                struct uffdio_copy c = {
                    .dst = (unsigned long)dst + at, .src = (unsigned long)stage, .len = PIECE};
                if (ioctl(u, UFFDIO_COPY, &c) != 0)
                    die("UFFDIO_COPY");
            }
        }
    } else {
        fprintf(stderr, "fill_floor: unknown mode %s\n", mode);
        return 2;
    }
    printf("%s %.4f\n", mode, now() - t0);
    return 0;
}
