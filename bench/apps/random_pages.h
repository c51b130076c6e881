/* random_pages.h — anonymous memory full of xorshift bytes for the bench programs that walk pages
 * as crac's checkpoint writer does (writer_loop.c, splice_runs.c): nothing in it compresses. */
#ifndef BENCH_RANDOM_PAGES_H
#define BENCH_RANDOM_PAGES_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

/* BYTES (a multiple of 8) of private anonymous memory, each word ORed with OR_MASK (1: no page is
 * all zeros); NULL if it cannot be mapped. */
static inline unsigned char *random_pages(size_t bytes, uint64_t or_mask)
{
    unsigned char *mem =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED)
        return NULL;
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < bytes / 8; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ((uint64_t *)mem)[i] = x | or_mask;
    }
    return mem;
}

#endif
