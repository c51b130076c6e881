/* splice_runs owns the measurement behind docs/PERFORMANCE.md "One request a write": a forked
   child writes its copy of MIB MiB of random pages O_DIRECT by reference (vmsplice, splice), as
   crac's checkpoint writer does, in runs of RUN pages, and says how many requests the disk got.

   splice_runs MIB RUN FILE [CRC]
     RUN   pages a write (crac's writer: at most the disk queue's max_segments)
     FILE  on the disk to measure (created, then removed)
     CRC   none (default) | before | after: each run's CRC-32C taken before its write or after
   Prints one line: seconds to durable, the child's CPU seconds, and the requests the disk
   completed meanwhile (/sys/dev/block/MAJ:MIN/stat, or its parent's for a partition) a MiB.

   gcc -O2 -Iloader/image -o /tmp/splice_runs bench/apps/splice_runs.c */
#define _GNU_SOURCE
#include "crc32c.c"
#include "random_pages.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

enum { CRC_NONE, CRC_BEFORE, CRC_AFTER };

/* Write requests the disk under FILE completed so far; -1 where it has no such counter. */
static long disk_writes(const char *file)
{
    struct stat st;
    if (stat(file, &st) != 0)
        return -1;
    static const char *const dirs[] = {"", "../"};
    for (int i = 0; i < 2; i++) {
        char path[96];
        snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%sstat", major(st.st_dev),
                 minor(st.st_dev), dirs[i]);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        long reads, reads_merged, sectors_read, ms_reading, writes = -1;
        int ok = fscanf(f, "%ld %ld %ld %ld %ld", &reads, &reads_merged, &sectors_read, &ms_reading,
                        &writes) == 5;
        fclose(f);
        if (ok)
            return writes;
    }
    return -1;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double children_cpu(void)
{
    struct rusage u;
    getrusage(RUSAGE_CHILDREN, &u);
    return (double)u.ru_utime.tv_sec + (double)u.ru_stime.tv_sec +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

/* In the forked child: the runs to FD through a pipe, each summed where CRC says. */
static void write_runs(const unsigned char *mem, size_t bytes, size_t run, int fd, int crc_at)
{
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0)
        _exit(2);
    fcntl(pipe_fds[1], F_SETPIPE_SZ, 1 << 20);
    uint32_t crc = 0;
    for (size_t off = 0; off < bytes; off += run) {
        size_t len = bytes - off < run ? bytes - off : run;
        if (crc_at == CRC_BEFORE)
            crc = crc32c_update(crc, mem + off, len);
        struct iovec iov = {(void *)(mem + off), len};
        while (iov.iov_len) {
            ssize_t in = vmsplice(pipe_fds[1], &iov, 1, 0);
            if (in <= 0)
                _exit(2);
            loff_t at = (loff_t)(off + len - iov.iov_len);
            iov.iov_base = (char *)iov.iov_base + in;
            iov.iov_len -= (size_t)in;
            while (in > 0) {
                ssize_t out = splice(pipe_fds[0], NULL, fd, &at, (size_t)in, SPLICE_F_MOVE);
                if (out <= 0)
                    _exit(2);
                in -= out;
            }
        }
        if (crc_at == CRC_AFTER)
            crc = crc32c_update(crc, mem + off, len);
    }
    _exit(fsync(fd) == 0 ? (int)(crc & 1) : 2);
}

int main(int argc, char **argv)
{
    size_t mib = argc > 3 ? strtoul(argv[1], NULL, 10) : 0;
    size_t run_pages = argc > 3 ? strtoul(argv[2], NULL, 10) : 0;
    const char *crc_name = argc > 4 ? argv[4] : "none";
    int crc_at = strcmp(crc_name, "before") == 0  ? CRC_BEFORE
                 : strcmp(crc_name, "after") == 0 ? CRC_AFTER
                 : strcmp(crc_name, "none") == 0  ? CRC_NONE
                                                  : -1;
    if (!mib || !run_pages || run_pages > 256 || crc_at < 0) {
        fprintf(stderr, "usage: splice_runs MIB RUN_PAGES(1-256) FILE [none|before|after]\n");
        return 2;
    }
    size_t bytes = mib << 20;
    unsigned char *mem = random_pages(bytes, 0);
    if (!mem)
        return perror("mmap"), 1;
    int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
        return perror(argv[3]), 1;
    long writes0 = disk_writes(argv[3]);
    double cpu0 = children_cpu(), t0 = now();
    pid_t child = fork();
    if (child == 0)
        write_runs(mem, bytes, run_pages * PAGE, fd, crc_at);
    int status;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
        WEXITSTATUS(status) > 1) {
        fprintf(stderr, "splice_runs: the writer failed\n");
        unlink(argv[3]);
        return 1;
    }
    double secs = now() - t0, cpu = children_cpu() - cpu0;
    long writes1 = disk_writes(argv[3]);
    unlink(argv[3]);
    printf("run %zu pages, crc %s: %.3f s, writer CPU %.3f s, ", run_pages, crc_name, secs, cpu);
    if (writes0 < 0 || writes1 < 0)
        printf("requests: no counter for this disk\n");
    else
        printf("requests %ld (%.2f a MiB)\n", writes1 - writes0,
               (double)(writes1 - writes0) / (double)mib);
    return 0;
}
