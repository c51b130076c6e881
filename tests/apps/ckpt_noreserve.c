/* ckpt_noreserve [GIB=64] [STEPS=60]: a GIB GiB private writable MAP_NORESERVE mapping with a few
   pages touched (one more per step), each checked every step; the mapping must come back as it was. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>

#define PROG "ckpt_noreserve"
#define USAGE "[GIB] [STEPS]"
#include "ckpt_common.h"

#define PAGE 4096UL

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

/* Page k of the mapping that step k writes: spread over the whole length. */
static size_t page_of(long k, size_t pages) { return (size_t)(mix((uint64_t)k) % pages); }

int main(int argc, char **argv)
{
    long gib = arg(argc, argv, 1, 64, 1, 1024);
    long steps = arg(argc, argv, 2, 60, 1, 100000);
    size_t len = (size_t)gib << 30, pages = len / PAGE;
    unsigned char *m =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        fail("mmap of %ld GiB (MAP_NORESERVE): %s", gib, strerror(errno));
    uint64_t sum = 0;
    for (long k = 1; k <= steps; k++) {
        uint64_t *p = (uint64_t *)(m + page_of(k, pages) * PAGE);
        if (*p == 0)
            *p = mix((uint64_t)k + 1);
        else
            *p ^= mix((uint64_t)k + 1); /* two steps hit one page: still deterministic */
        p[PAGE / 8 - 1] += (uint64_t)k;
        /* Every page written so far still holds its values. */
        for (long j = 1; j <= k; j++) {
            const uint64_t *q = (const uint64_t *)(m + page_of(j, pages) * PAGE);
            uint64_t want_first = 0, want_last = 0;
            for (long i = 1; i <= k; i++)
                if (page_of(i, pages) == page_of(j, pages)) {
                    want_first =
                        want_first ? want_first ^ mix((uint64_t)i + 1) : mix((uint64_t)i + 1);
                    want_last += (uint64_t)i;
                }
            if (q[0] != want_first || q[PAGE / 8 - 1] != want_last)
                fail("step %ld: page %zu holds %016llx/%llu, expected %016llx/%llu", k,
                     page_of(j, pages), (unsigned long long)q[0],
                     (unsigned long long)q[PAGE / 8 - 1], (unsigned long long)want_first,
                     (unsigned long long)want_last);
        }
        /* An untouched page in the middle still reads as zero. */
        if (m[len / 2 + PAGE / 2] != 0 && page_of(k, pages) != len / 2 / PAGE)
            fail("step %ld: an untouched page is not zero", k);
        sum += mix((uint64_t)k) % 1000;
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    if (munmap(m, len) != 0)
        fail("munmap: %s", strerror(errno));
    printf("DONE gib=%ld steps=%ld sum=%llu\n", gib, steps, (unsigned long long)sum);
    return fflush(stdout) == 0 ? 0 : 1;
}
