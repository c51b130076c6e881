/* ckpt_incr [STEPS=150] [MIB=16] [MS=20]: dirties random pages (a PRNG seeded by the step) of an
   MIB MiB region each step, for --incremental: pages written by the kernel (read from a pipe),
   pages dropped with MADV_DONTNEED (zero again), a region unmapped and mapped again, a range
   made read-only and writable again; every page is checked every 10 steps, a few every step. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_incr"
#define USAGE "[STEPS] [MIB] [MS]"
#include "ckpt_common.h"

#define PG 4096UL
#define SMALL_PAGES 64
static unsigned char *big, *small;
static uint32_t *ver, *small_ver; /* the version each page holds; 0: all zeros */
static size_t npages;
static int pipefd[2];

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The contents of page p of region r at version v (zeros for version 0). */
static void expect(int r, size_t p, uint32_t v, unsigned char *out)
{
    memset(out, 0, PG);
    if (!v)
        return;
    uint64_t seed = mix(((uint64_t)r << 60) ^ ((uint64_t)p << 24) ^ v);
    for (size_t w = 0; w < PG / 8; w += 1 + (seed & 3)) {
        seed = mix(seed);
        memcpy(out + w * 8, &seed, 8);
    }
}

static void check(int r, size_t p, const char *when)
{
    static unsigned char want[PG];
    unsigned char *mem = r ? small : big;
    uint32_t v = r ? small_ver[p] : ver[p];
    expect(r, p, v, want);
    if (memcmp(want, mem + p * PG, PG) != 0)
        fail("%s: %s page %zu (version %u) differs", when, r ? "small" : "big", p, v);
}

static void check_all(const char *when)
{
    for (size_t p = 0; p < npages; p++)
        check(0, p, when);
    for (size_t p = 0; p < SMALL_PAGES; p++)
        check(1, p, when);
}

/* Page p of the big region to version v; every 5th one written by the kernel, through a pipe. */
static void put(size_t p, uint32_t v)
{
    static unsigned char page[PG];
    ver[p] = v;
    if (v % 5) {
        expect(0, p, v, big + p * PG);
        return;
    }
    expect(0, p, v, page);
    if (write(pipefd[1], page, PG) != (ssize_t)PG)
        fail("write to the pipe: %s", strerror(errno));
    for (size_t got = 0; got < PG;) {
        ssize_t n = read(pipefd[0], big + p * PG + got, PG - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fail("read from the pipe: %s", n ? strerror(errno) : "end of file");
        got += (size_t)n;
    }
}

static void map_small(void)
{
    void *want = small;
    small = mmap(want, SMALL_PAGES * PG, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | (want ? MAP_FIXED : 0), -1, 0);
    if (small == MAP_FAILED)
        fail("mmap: %s", strerror(errno));
    for (size_t p = 0; p < SMALL_PAGES; p++)
        expect(1, p, small_ver[p], small + p * PG);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 150, 1, 1000000);
    long mib = arg(argc, argv, 2, 16, 1, 1 << 16);
    long ms = arg(argc, argv, 3, 20, 0, 100000);
    npages = (size_t)mib * (1 << 20) / PG;
    big = mmap(NULL, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ver = calloc(npages, sizeof(*ver));
    small_ver = calloc(SMALL_PAGES, sizeof(*small_ver));
    if (big == MAP_FAILED || !ver || !small_ver || pipe(pipefd) != 0)
        fail("setup: %s", strerror(errno));
    for (size_t p = 0; p < SMALL_PAGES; p++)
        small_ver[p] = (uint32_t)p + 1;
    map_small();
    for (size_t p = 0; p < npages; p += 3) /* a third of the pages hold data from the start */
        put(p, 1);
    struct timespec nap = {ms / 1000, (ms % 1000) * 1000000L};
    for (long k = 1; k <= steps; k++) {
        uint64_t seed = mix((uint64_t)k);
        size_t dirty = npages / 50 + 1; /* 2 % of the pages a step */
        for (size_t i = 0; i < dirty; i++) {
            seed = mix(seed);
            put(seed % npages, (uint32_t)(k * 7 + i % 7 + 2));
        }
        if (k % 7 == 0) { /* a run of pages dropped: zeros again, whatever they held */
            seed = mix(seed);
            size_t p = seed % npages, n = 1 + (seed >> 32) % 16;
            if (p + n > npages)
                n = npages - p;
            if (madvise(big + p * PG, n * PG, MADV_DONTNEED) != 0)
                fail("madvise: %s", strerror(errno));
            memset(ver + p, 0, n * sizeof(*ver));
        }
        if (k % 11 == 0) { /* unmapped and mapped again: a new mapping at the same place */
            for (size_t p = 0; p < SMALL_PAGES; p++)
                small_ver[p] += 1;
            if (munmap(small, SMALL_PAGES * PG) != 0)
                fail("munmap: %s", strerror(errno));
            map_small();
        }
        if (k % 13 == 0) { /* split and merged again: the same mapping, the same pages */
            unsigned char *mid = big + (npages / 4) * PG;
            if (mprotect(mid, (npages / 4) * PG, PROT_READ) != 0 ||
                mprotect(mid, (npages / 4) * PG, PROT_READ | PROT_WRITE) != 0)
                fail("mprotect: %s", strerror(errno));
        }
        for (int i = 0; i < 8; i++) {
            seed = mix(seed);
            check(0, seed % npages, "spot check");
        }
        if (k % 10 == 0)
            check_all("full check");
        step_line(k);
        if (ms)
            nanosleep(&nap, NULL);
    }
    check_all("last check");
    uint64_t sum = 0;
    for (size_t p = 0; p < npages; p++)
        sum = mix(sum ^ ver[p] ^ ((uint64_t)p << 32));
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)sum, steps);
    return 0;
}
