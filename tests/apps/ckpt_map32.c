/* ckpt_map32 [MAPPINGS=600] [STEPS=60]: MAPPINGS MAP_32BIT mappings of two pages (placed by the
   kernel outside crac's window, each recorded there as the program's), the second page of every
   other one unmapped again (a hole between ranges), each first page filled with its own pattern;
   every step checks them all and rewrites one. More ranges than crac's table of them once held:
   a checkpoint must save every one. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>

#define PROG "ckpt_map32"
#define USAGE "[MAPPINGS] [STEPS]"
#include "ckpt_common.h"

#define PAGE 4096
#define MAX_MAPPINGS 4000

static uint64_t *page[MAX_MAPPINGS];
static uint32_t version[MAX_MAPPINGS];

static uint64_t word(long m, size_t w) { return ckpt_page_word((uint32_t)m, version[m], 0, w, 32); }

int main(int argc, char **argv)
{
    long n = arg(argc, argv, 1, 600, 1, MAX_MAPPINGS);
    long steps = arg(argc, argv, 2, 60, 1, 100000);
    for (long m = 0; m < n; m++) {
        char *p = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
        if (p == MAP_FAILED)
            fail("mmap MAP_32BIT #%ld: %s", m, strerror(errno));
        if ((uintptr_t)p >= (1UL << 32))
            fail("mmap MAP_32BIT #%ld placed at %p", m, (void *)p);
        if (m % 2 && munmap(p + PAGE, PAGE) != 0)
            fail("munmap #%ld: %s", m, strerror(errno));
        page[m] = (uint64_t *)p;
        for (size_t w = 0; w < PAGE / 8; w++)
            page[m][w] = word(m, w);
    }
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        for (long m = 0; m < n; m++)
            for (size_t w = 0; w < PAGE / 8; w++)
                if (page[m][w] != word(m, w))
                    fail("step %ld: mapping #%ld word %zu changed", k, m, w);
        long m = (k * 7919) % n;
        version[m]++;
        for (size_t w = 0; w < PAGE / 8; w++)
            page[m][w] = word(m, w);
        h = ckpt_fnv(h, (uint64_t)page[m][k % (PAGE / 8)]);
        step_line(k);
        ckpt_sleep_ms(30);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return 0;
}
