/* ckpt_compress [STEPS=200] [MIB=8] [MS=20]: MIB MiB each of text, of mostly-zero-but-not-zero
   pages, of random bytes and of a sparse region (every third page written), for --compress;
   every page is checked every 25 steps, a few at each. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_compress"
#define USAGE "[STEPS] [MIB] [MS]"
#include "ckpt_common.h"

#define PG 4096UL
enum { TEXT, SPARSE_WORDS, RANDOM, HOLES, KINDS };
static const char *kind_name[KINDS] = {"text", "mostly-zero", "random", "holey"};
static unsigned char *mem[KINDS];
static uint32_t *ver[KINDS];
static size_t npages;

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The expected contents of page p of kind k at version v, into out. */
static void expect(int k, size_t p, uint32_t v, unsigned char *out)
{
    static const char *words[] = {"checkpoint", "restart ", "the ", "memory ", "page ",
                                  "compress ",  "of ",      "and ", "zstd ",   "lz4 "};
    memset(out, 0, PG);
    uint64_t seed = mix(((uint64_t)k << 56) ^ ((uint64_t)p << 20) ^ v);
    switch (k) {
    case TEXT:
        for (size_t o = 0; o + 16 < PG;) {
            seed = mix(seed);
            const char *w = words[seed % 10];
            size_t n = strlen(w);
            memcpy(out + o, w, n);
            o += n;
        }
        break;
    case SPARSE_WORDS: /* one non-zero word per page: compresses to almost nothing */
        memcpy(out + (seed % (PG / 8)) * 8, &seed, 8);
        break;
    case RANDOM:
        for (size_t w = 0; w < PG / 8; w++) {
            uint64_t x = mix(seed + w);
            memcpy(out + w * 8, &x, 8);
        }
        break;
    case HOLES:
        if (p % 3 == 0)
            for (size_t w = 0; w < PG / 8; w += 64)
                memcpy(out + w * 8, &seed, 8);
        break;
    }
}

static void write_page(int k, size_t p) { expect(k, p, ver[k][p], mem[k] + p * PG); }

static void check_page(int k, size_t p, const char *when)
{
    static unsigned char want[PG];
    expect(k, p, ver[k][p], want);
    if (memcmp(want, mem[k] + p * PG, PG) != 0)
        fail("%s: %s page %zu (version %u) differs", when, kind_name[k], p, ver[k][p]);
}

static void check_all(const char *when)
{
    for (int k = 0; k < KINDS; k++)
        for (size_t p = 0; p < npages; p++)
            check_page(k, p, when);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 200, 1, 1000000);
    long mib = arg(argc, argv, 2, 8, 1, 4096);
    long ms = arg(argc, argv, 3, 20, 0, 100000);
    npages = (size_t)mib * 256;
    for (int k = 0; k < KINDS; k++) {
        mem[k] =
            mmap(NULL, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ver[k] = calloc(npages, sizeof(uint32_t));
        if (mem[k] == MAP_FAILED || !ver[k])
            fail("allocating %ld MiB: %s", mib, strerror(errno));
        for (size_t p = 0; p < npages; p++)
            if (k != HOLES || p % 3 == 0)
                write_page(k, p);
    }
    uint64_t h = 0xcbf29ce484222325ULL, rng = 12345;
    for (long s = 1; s <= steps; s++) {
        /* Every page now and then (a restart keeps the pid: this is how one is checked). */
        if (s % 25 == 0)
            check_all("step");
        for (int k = 0; k < KINDS; k++) {
            rng = mix(rng);
            size_t p = (size_t)(rng % npages);
            if (k == HOLES)
                p -= p % 3;
            ver[k][p]++;
            write_page(k, p);
            rng = mix(rng);
            check_page(k, (size_t)(rng % npages), "step");
            h = (h ^ ver[k][p] ^ p) * 0x100000001b3ULL;
        }
        step_line(s);
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&req, NULL);
    }
    check_all("at the end");
    printf("DONE checksum=%016llx pages=%zu\n", (unsigned long long)h, npages * KINDS);
    return fflush(stdout) == 0 ? 0 : 1;
}
