/* crc32c.h — CRC-32C (Castagnoli), hardware-accelerated where SSE4.2, PCLMULQDQ or VPCLMULQDQ is
 * present (crc32c.c picks the best the CPU has). */
#ifndef CRAC_CRC32C_H
#define CRAC_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC (start with 0). */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);

/* Asks for the LEN bytes at P into the CPU's second-level cache, a line at a time, to be summed
 * next. The hardware prefetcher stops at a page's end, so memory no cache holds (a forked
 * writer's pages) summed a page at a time waited for every page's first lines: asked for one
 * page ahead, the direct writer's page loop took 0.11 s of CPU a GiB instead of 0.21
 * (docs/PERFORMANCE.md "Summing cold pages").
 * A hint only: it never faults, whatever P is. */
static inline void crc32c_prefetch(const void *p, size_t len)
{
    for (size_t o = 0; o < len; o += 64)
        __builtin_prefetch((const char *)p + o, 0, 2);
}

#endif
