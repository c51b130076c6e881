/* dirty [SIZE_MIB=2048] [TICK_MS=10]: allocates SIZE_MIB MiB, fills every byte with pseudo-random
   (incompressible, never all-zero) data, prints `ready`, then sleeps forever in nanosleep, printing
   `tick N` (N = 1, 2, ...) every TICK_MS ms. For bench/ckpt.py: after a restart, the first `tick`
   line says the program runs again (late by at most TICK_MS). Touches nothing after the fill. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long arg(int argc, char **argv, int i, long def, long lo, long hi)
{
    if (argc <= i)
        return def;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "usage: dirty [SIZE_MIB 1..1048576] [TICK_MS 1..100000]\n");
        exit(2);
    }
    return v;
}

static void line(const char *fmt, long n)
{
    printf(fmt, n);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "dirty: fflush(stdout): %s\n", strerror(errno));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    long mib = arg(argc, argv, 1, 2048, 1, 1L << 20);
    long tick_ms = arg(argc, argv, 2, 10, 1, 100000);
    size_t words = (size_t)mib << 17; /* 1 MiB = 2^17 uint64_t */
    uint64_t *buf = malloc(words * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "dirty: cannot allocate %ld MiB\n", mib);
        return 1;
    }
    uint64_t x = 0x9e3779b97f4a7c15ULL ^ (uint64_t)time(NULL);
    for (size_t i = 0; i < words; i++) { /* xorshift64*: never 0, so no page is all zero */
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        buf[i] = x * 0x2545f4914f6cdd1dULL;
    }
    line("ready %ld\n", mib);
    struct timespec ts = {tick_ms / 1000, (tick_ms % 1000) * 1000000L};
    for (long n = 1;; n++) {
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
        ts.tv_sec = tick_ms / 1000;
        ts.tv_nsec = (tick_ms % 1000) * 1000000L;
        /* Keep the buffer live so the compiler cannot drop the fill. */
        if (buf[(size_t)n % words] == 0)
            line("zero word at tick %ld\n", n);
        line("tick %ld\n", n);
    }
}
