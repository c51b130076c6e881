/* ckpt_lazy_fork [STEPS=60] [MIB=64] [MS=20] [FORK_FROM=1] [DROP_AT=0]: MIB MiB of pattern pages;
   at every step from FORK_FROM on a forked child checks every page of its copy (a lazy restart
   with pages still missing must not hand a child zeros), then the parent rewrites one page. At
   step DROP_AT the upper half is dropped (MADV_DONTNEED): it must read as zeros, then is written
   again. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_lazy_fork"
#define USAGE "[STEPS] [MIB] [MS] [FORK_FROM] [DROP_AT]"
#include "ckpt_common.h"

#define PG 4096UL
#define WORDS 8 /* words set per page, PG / WORDS bytes apart */
static uint64_t *mem;
static uint32_t *ver;
static size_t npages;

static uint64_t word(size_t p, size_t w)
{
    uint64_t x = ((uint64_t)p << 24) ^ ((uint64_t)ver[p] << 4) ^ w;
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return (x ^ (x >> 31)) | 1; /* never zero: a page read as zeros is caught */
}

static void write_page(size_t p)
{
    for (size_t w = 0; w < WORDS; w++)
        mem[p * (PG / 8) + w * (PG / 8 / WORDS)] = word(p, w);
}

/* The first page that is not as written, or npages. */
static size_t first_bad(void)
{
    for (size_t p = 0; p < npages; p++)
        for (size_t w = 0; w < WORDS; w++)
            if (mem[p * (PG / 8) + w * (PG / 8 / WORDS)] != word(p, w))
                return p;
    return npages;
}

/* A child checks its copy of every page. */
static void fork_and_check(long s)
{
    pid_t child = fork();
    if (child < 0)
        fail("fork: %s", strerror(errno));
    if (child == 0)
        _exit(first_bad() == npages ? 0 : 3);
    int st;
    if (waitpid(child, &st, 0) != child)
        fail("waitpid: %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail("step %ld: the forked child found a page that is not as written (status %#x)", s, st);
}

/* Dropped private anonymous pages read as zeros (not as they were, nor as an image had them). */
static void drop_and_check(long s)
{
    size_t half = npages / 2;
    if (madvise(mem + half * (PG / 8), (npages - half) * PG, MADV_DONTNEED) != 0)
        fail("madvise: %s", strerror(errno));
    for (size_t p = half; p < npages; p++)
        for (size_t w = 0; w < WORDS; w++)
            if (mem[p * (PG / 8) + w * (PG / 8 / WORDS)] != 0)
                fail("step %ld: page %zu is not zero after MADV_DONTNEED", s, p);
    for (size_t p = half; p < npages; p++)
        write_page(p);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 1000000);
    long mib = arg(argc, argv, 2, 64, 1, 4096);
    long ms = arg(argc, argv, 3, 20, 0, 100000);
    long fork_from = arg(argc, argv, 4, 1, 1, 1000000);
    long drop_at = arg(argc, argv, 5, 0, 0, 1000000);
    npages = (size_t)mib * 256;
    mem = mmap(NULL, npages * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ver = mmap(NULL, npages * 4, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED || ver == MAP_FAILED)
        fail("allocating %ld MiB: %s", mib, strerror(errno));
    for (size_t p = 0; p < npages; p++)
        write_page(p);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long s = 1; s <= steps; s++) {
        if (s >= fork_from)
            fork_and_check(s);
        if (s == drop_at)
            drop_and_check(s);
        size_t p = (size_t)((uint64_t)s * 7919 % npages);
        ver[p]++;
        write_page(p);
        h = (h ^ p ^ ver[p]) * 0x100000001b3ULL;
        step_line(s);
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&req, NULL);
    }
    size_t bad = first_bad();
    if (bad != npages)
        fail("at the end: page %zu is not as written", bad);
    printf("DONE checksum=%016llx pages=%zu\n", (unsigned long long)h, npages);
    return fflush(stdout) == 0 ? 0 : 1;
}
