/* ckpt_huge [STEPS=300] [MIB=24] [MS=20]: a dense region of MIB MiB plus 3 pages that starts one
   page past a 2 MiB boundary, a region of pages touched only beside each 2 MiB boundary, and an
   all-zero region that was written (zeros again); every page checked every 25 steps. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PROG "ckpt_huge"
#define USAGE "[STEPS] [MIB] [MS]"
#include "ckpt_common.h"

#define PG 4096UL
#define HUGE (2UL << 20)
enum { DENSE, EDGES, ZEROS, KINDS };
static const char *kind_name[KINDS] = {"dense", "edges", "zeros"};
static unsigned char *mem[KINDS];
static uint32_t *ver[KINDS];
static size_t npages[KINDS];

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* EDGES holds data only in the page before and the page after each 2 MiB boundary. */
static int has_data(int k, size_t p)
{
    if (k == ZEROS)
        return 0;
    if (k == DENSE)
        return 1;
    size_t in = p % (HUGE / PG);
    return in == 0 || in == HUGE / PG - 1;
}

static void expect(int k, size_t p, uint32_t v, unsigned char *out)
{
    memset(out, 0, PG);
    if (!has_data(k, p))
        return;
    uint64_t seed = mix(((uint64_t)k << 56) ^ ((uint64_t)p << 20) ^ v);
    for (size_t w = 0; w < PG / 8; w++) {
        uint64_t x = mix(seed + w);
        memcpy(out + w * 8, &x, 8);
    }
}

static void write_page(int k, size_t p)
{
    if (k == ZEROS) { /* touched, so mapped, but all zero: a hole in the image */
        mem[k][p * PG] = 1;
        mem[k][p * PG] = 0;
        return;
    }
    expect(k, p, ver[k][p], mem[k] + p * PG);
}

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
        for (size_t p = 0; p < npages[k]; p++)
            check_page(k, p, when);
}

/* len bytes at `skew` bytes past a 2 MiB boundary. */
static unsigned char *map_at(size_t len, size_t skew)
{
    unsigned char *m =
        mmap(NULL, len + 2 * HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        fail("allocating %zu bytes: %s", len, strerror(errno));
    uintptr_t at = (((uintptr_t)m + HUGE - 1) & ~(HUGE - 1)) + skew;
    return (unsigned char *)at;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 300, 1, 1000000);
    long mib = arg(argc, argv, 2, 24, 2, 4096);
    long ms = arg(argc, argv, 3, 20, 0, 100000);
    npages[DENSE] = (size_t)mib * 256 + 3; /* ends 3 pages past a boundary */
    npages[EDGES] = (size_t)mib * 256;
    npages[ZEROS] = 8 * 256;
    size_t skew[KINDS] = {PG, 0, 0};
    for (int k = 0; k < KINDS; k++) {
        mem[k] = map_at(npages[k] * PG, skew[k]);
        ver[k] = calloc(npages[k], sizeof(uint32_t));
        if (!ver[k])
            fail("allocating versions: %s", strerror(errno));
        for (size_t p = 0; p < npages[k]; p++)
            if (has_data(k, p) || k == ZEROS)
                write_page(k, p);
    }
    uint64_t h = CKPT_FNV_BASIS, rng = 12345;
    for (long s = 1; s <= steps; s++) {
        if (s % 25 == 0)
            check_all("step");
        /* A page either side of a huge-page boundary of DENSE changes, and one of EDGES. */
        rng = mix(rng);
        size_t b = 1 + (size_t)(rng % (npages[DENSE] / (HUGE / PG)));
        size_t p = b * (HUGE / PG) - 1 - (rng >> 40) % 2; /* DENSE starts a page past: skewed */
        if (p >= npages[DENSE])
            p = npages[DENSE] - 1;
        ver[DENSE][p]++;
        write_page(DENSE, p);
        size_t e = (size_t)(rng >> 20) % npages[EDGES];
        e -= e % (HUGE / PG);
        ver[EDGES][e]++;
        write_page(EDGES, e);
        rng = mix(rng);
        check_page(DENSE, (size_t)(rng % npages[DENSE]), "step");
        check_page(ZEROS, (size_t)(rng >> 32) % npages[ZEROS], "step");
        h = ckpt_fnv(ckpt_fnv(h, ver[DENSE][p] ^ p), ver[EDGES][e] ^ e);
        step_line(s);
        ckpt_sleep_ms(ms);
    }
    check_all("at the end");
    printf("DONE checksum=%016llx pages=%zu\n", (unsigned long long)h,
           npages[DENSE] + npages[EDGES] + npages[ZEROS]);
    return fflush(stdout) == 0 ? 0 : 1;
}
