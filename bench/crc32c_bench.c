/* crc32c_bench.c — micro-benchmark of loader/image/crc32c.c: the table, one crc32 stream, three
 * streams, 256- and 512-bit folding (where the CPU has them), beside memcpy of the same bytes.
 *
 *   gcc -O2 -Iloader/image -o /tmp/crc32c_bench bench/crc32c_bench.c && /tmp/crc32c_bench [REPS]
 *
 * Prints a markdown table: GB/s (median of REPS, variants interleaved) and the ratio to memcpy,
 * at a page (the restart's unit, in L1), 1 MiB (cache) and 256 MiB (memory). Never asserts. */
#include "crc32c.c"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static volatile uint32_t sink;

/* Seconds to pass over TOTAL bytes as pieces of N bytes of src (dst for memcpy). */
static double run(int variant, unsigned char *src, unsigned char *dst, size_t n, size_t total)
{
    size_t span = n < (64u << 20) ? n : total; /* small pieces repeat over the same bytes */
    uint32_t c = 0;
    double t = now();
    for (size_t done = 0, off = 0; done < total; done += n, off = (off + n) % span) {
        switch (variant) {
        case 0: memcpy(dst + off, src + off, n); break;
        case 1: c = crc_table(c, src + off, n); break;
        case 2: c = crc_hw(c, src + off, n); break;
        case 3: c = crc_hw3(c, src + off, n); break;
        case 4: c = crc_fold256(c, src + off, n); break;
        case 5: c = crc_fold512(c, src + off, n); break;
        }
    }
    t = now() - t;
    sink = c + dst[0];
    return t;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1 || reps > 100)
        reps = 5;
    size_t big = 256u << 20;
    unsigned char *src = malloc(big), *dst = malloc(big);
    if (!src || !dst)
        return 1;
    for (size_t i = 0; i < big; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 13);
    memcpy(dst, src, big); /* both faulted in */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("sse4.2") || !__builtin_cpu_supports("pclmul")) {
        printf("this CPU lacks sse4.2 or pclmul: only the table path exists\n");
        return 0;
    }
    build_lane_constants();
    int variants = 4; /* the folding paths where the CPU has them (512 bits only with 256) */
    build_fold_constants();
    if (__builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("avx2"))
        variants = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") ? 6 : 5;
    const char *names[] = {"memcpy",   "table",   "crc32 x1", "crc32 x3 + pclmul",
                           "fold 256", "fold 512"};
    size_t sizes[] = {4096, 1u << 20, big};
    printf("| bytes per call |");
    for (int v = 0; v < variants; v++)
        printf(" %s |", names[v]);
    printf("\n|---|");
    for (int v = 0; v < variants; v++)
        printf("---|");
    printf("\n");
    for (size_t s = 0; s < 3; s++) {
        size_t n = sizes[s], total = big;
        double secs[6][100];
        for (int r = 0; r < reps; r++)
            for (int v = 0; v < variants; v++)
                secs[v][r] = run(v, src, dst, n, v == 1 ? total / 8 : total) * (v == 1 ? 8 : 1);
        double med[6];
        for (int v = 0; v < variants; v++) {
            qsort(secs[v], (size_t)reps, sizeof(double), cmp);
            med[v] = secs[v][reps / 2];
        }
        printf("| %zu |", n);
        for (int v = 0; v < variants; v++)
            printf(" %.1f GB/s (%.2fx memcpy) |", total / med[v] / 1e9, med[0] / med[v]);
        printf("\n");
    }
    free(src);
    free(dst);
    return 0;
}
