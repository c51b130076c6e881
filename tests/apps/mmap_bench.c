/* mmap_bench (bench): mmap/munmap/mremap-heavy loop (every iteration maps, touches, grows or moves,
   and unmaps a region); argv[1] = iterations (default 75000); prints a checksum. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 75000L;
    if (iters <= 0) {
        fprintf(stderr, "mmap_bench: bad iteration count\n");
        return 2;
    }
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    unsigned long sum = 0;
    for (long i = 0; i < iters; i++) {
        size_t n = pg * (1 + (size_t)(i % 8));
        unsigned char *p =
            mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap_bench: mmap");
            return 1;
        }
        p[0] = (unsigned char)i;
        p[n - 1] = 1;
        if (i % 2 == 0) {
            unsigned char *q = mremap(p, n, 2 * n, MREMAP_MAYMOVE);
            if (q == MAP_FAILED || q[0] != (unsigned char)i) {
                fprintf(stderr, "mmap_bench: mremap failed or lost data\n");
                return 1;
            }
            q[2 * n - 1] = 2;
            p = q;
            n *= 2;
        }
        sum += p[0] + p[n - 1];
        if (munmap(p, n) != 0) {
            perror("mmap_bench: munmap");
            return 1;
        }
    }
    printf("mmap_bench iters=%ld checksum=%lu\n", iters, sum);
    return 0;
}
