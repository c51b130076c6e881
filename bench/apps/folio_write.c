/* folio_write MIB PIECE_KIB OFFSET FILE: the cost of a buffered write by the size of its pieces.
   Fills MIB MiB of anonymous memory with xorshift bytes, then pwrites it to FILE (created anew)
   in PIECE_KIB KiB pieces from byte OFFSET, then fdatasyncs it; prints the writing's CPU and wall
   time and the wall time to durable, and removes FILE. A long write lets ext4 put large folios in
   the page cache, a short one at an odd page offset only small ones (docs/PERFORMANCE.md "Large
   page-cache folios on this VM"). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double cpu_s(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
           (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: folio_write MIB PIECE_KIB OFFSET FILE\n");
        return 2;
    }
    size_t bytes = (size_t)atol(argv[1]) << 20, piece = (size_t)atol(argv[2]) << 10;
    off_t offset = (off_t)atoll(argv[3]);
    if (!bytes || !piece || offset < 0) {
        fprintf(stderr, "folio_write: MIB and PIECE_KIB must be positive, OFFSET not negative\n");
        return 2;
    }
    uint64_t *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        perror("folio_write: mmap");
        return 1;
    }
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < bytes / 8; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        mem[i] = x;
    }
    unlink(argv[4]);
    int fd = open(argv[4], O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        perror("folio_write: open");
        return 1;
    }
    double c0 = cpu_s(), t0 = now_s();
    for (size_t done = 0; done < bytes; done += piece) {
        size_t n = bytes - done < piece ? bytes - done : piece;
        if (pwrite(fd, (char *)mem + done, n, offset + (off_t)done) != (ssize_t)n) {
            perror("folio_write: pwrite");
            return 1;
        }
    }
    double c1 = cpu_s(), t1 = now_s();
    if (fdatasync(fd) != 0) {
        perror("folio_write: fdatasync");
        return 1;
    }
    printf("mib=%s piece_kib=%s offset=%lld write_cpu_s=%.3f write_s=%.3f durable_s=%.3f\n",
           argv[1], argv[2], (long long)offset, c1 - c0, t1 - t0, now_s() - t0);
    close(fd);
    unlink(argv[4]);
    return 0;
}
