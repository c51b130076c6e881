/* coord_counter TAG [STEPS=100] [MS=25] [DIRTY_MIB=0]: ckpt_counter with every line prefixed by
   TAG, so that the processes of a job restarted together (their output on one file) can be told
   apart: `TAG step N` per step, then `TAG DONE checksum=... steps=STEPS` (the same checksum as
   ckpt_counter). DIRTY_MIB MiB of memory written with a pattern (big, slow images), rewritten a
   chunk per step and checked a chunk per step and all at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "coord_counter"
#define CHUNK (1UL << 20)

static const char *tag = "?";

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, PROG " %s: FAIL: ", tag);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

static long arg(int argc, char **argv, int i, long def, long lo, long hi)
{
    if (argc <= i)
        return def;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end || v < lo || v > hi) {
        fprintf(stderr, "usage: " PROG " TAG [STEPS] [MS] [DIRTY_MIB]\n");
        exit(2);
    }
    return v;
}

static uint64_t *dirty;
static size_t dirty_words;
static uint32_t version[65536]; /* per chunk: how often it was rewritten */

static uint64_t pattern(size_t word, uint32_t ver)
{
    return (word * 0x9e3779b97f4a7c15ULL) ^ ((uint64_t)ver << 40) ^ 0x5a5a5a5aULL;
}

static void fill_chunk(size_t c, uint32_t ver)
{
    size_t per = CHUNK / sizeof(uint64_t);
    for (size_t w = c * per; w < (c + 1) * per && w < dirty_words; w++)
        dirty[w] = pattern(w, ver);
    version[c] = ver;
}

static void check_chunk(size_t c)
{
    size_t per = CHUNK / sizeof(uint64_t);
    for (size_t w = c * per; w < (c + 1) * per && w < dirty_words; w++)
        if (dirty[w] != pattern(w, version[c]))
            fail("dirty memory corrupted at word %zu (chunk %zu)", w, c);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " TAG [STEPS] [MS] [DIRTY_MIB]\n");
        return 2;
    }
    tag = argv[1];
    long steps = arg(argc, argv, 2, 100, 1, 10000000);
    long ms = arg(argc, argv, 3, 25, 0, 100000);
    long mib = arg(argc, argv, 4, 0, 0, 65536);
    size_t chunks = (size_t)mib;
    if (chunks) {
        dirty = malloc(chunks * CHUNK);
        if (!dirty)
            fail("malloc %ld MiB", mib);
        dirty_words = chunks * CHUNK / sizeof(uint64_t);
        for (size_t c = 0; c < chunks; c++)
            fill_chunk(c, 1);
    }
    long *squares = calloc((size_t)steps + 1, sizeof *squares);
    if (!squares)
        fail("calloc");
    volatile long counter = 0;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        counter++;
        squares[k] = k * k;
        if (counter != k)
            fail("counter diverged at step %ld: %ld", k, (long)counter);
        for (long j = k > 8 ? k - 8 : 1; j <= k; j++)
            if (squares[j] != j * j)
                fail("heap array corrupted at step %ld, index %ld", k, j);
        if (chunks) {
            check_chunk((size_t)k % chunks);
            fill_chunk((size_t)(k * 7) % chunks, version[(size_t)(k * 7) % chunks] + 1);
        }
        h = fnv(h, (uint64_t)k);
        printf("%s step %ld\n", tag, k);
        if (fflush(stdout) != 0)
            fail("fflush(stdout): %s", strerror(errno));
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
        while (nanosleep(&req, &rem) != 0) {
            if (errno != EINTR)
                fail("nanosleep: %s", strerror(errno));
            req = rem;
        }
    }
    for (size_t c = 0; c < chunks; c++)
        check_chunk(c);
    printf("%s DONE checksum=%016llx steps=%ld\n", tag, (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
