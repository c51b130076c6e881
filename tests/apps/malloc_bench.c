/* malloc_bench (bench): malloc/free-heavy single-threaded loop over mixed sizes (16 B .. 256 KiB,
   so both the arena and mmap paths are used); argv[1] = iterations (default 40000000); prints a checksum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 1024

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 40000000L;
    if (iters <= 0) {
        fprintf(stderr, "malloc_bench: bad iteration count\n");
        return 2;
    }
    static unsigned char *slot[SLOTS];
    static size_t len[SLOTS];
    unsigned long s = 12345, sum = 0;
    for (long i = 0; i < iters; i++) {
        s = s * 6364136223846793005UL + 1442695040888963407UL;
        unsigned k = (unsigned)(s >> 33) % SLOTS;
        if (slot[k]) {
            if (slot[k][0] != (unsigned char)len[k] || slot[k][len[k] - 1] != (unsigned char)k) {
                fprintf(stderr, "malloc_bench: corrupted block\n");
                return 1;
            }
            sum += len[k];
            free(slot[k]);
            slot[k] = NULL;
        } else {
            unsigned r = (unsigned)(s >> 40);
            /* mostly small, some medium, rarely large (mmap threshold is 128 KiB) */
            size_t n = (r % 100) < 90   ? 16 + r % 512
                       : (r % 100) < 99 ? 1024 + r % 16384
                                        : 131072 + r % 131072;
            slot[k] = malloc(n);
            if (!slot[k]) {
                fprintf(stderr, "malloc_bench: malloc failed\n");
                return 1;
            }
            len[k] = n;
            memset(slot[k], 0, n < 64 ? n : 64);
            slot[k][0] = (unsigned char)n;
            slot[k][n - 1] = (unsigned char)k;
        }
    }
    for (unsigned k = 0; k < SLOTS; k++)
        free(slot[k]);
    printf("malloc_bench iters=%ld checksum=%lu\n", iters, sum);
    return 0;
}
