/* ckpt_sparse [STEPS=100] [DIRTY_MIB=0] [MS=20] [REGION_MIB=1024]: a MAP_NORESERVE region with 16 pattern
   pages, the rest holes that must read as zero, plus DIRTY_MIB MiB of written memory (big images). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_sparse"
#define USAGE "[STEPS] [DIRTY_MIB] [MS] [REGION_MIB]"
#include "ckpt_common.h"
#define NPAT 16 /* pattern pages, one per REGION / 16 */
#define CHUNK (1UL << 20)

static size_t PG, REGION, STRIDE;
static unsigned char *region;
static uint32_t pat_ver[NPAT];
static uint64_t *dirty;
static size_t dirty_chunks;
static uint32_t chunk_ver[4096];

/* Pattern page i sits at i * STRIDE + i pages (so they are not all at the same alignment). */
static uint64_t *pat_page(size_t i) { return (uint64_t *)(region + i * STRIDE + i * PG); }

static int is_pat_page(size_t pg)
{
    size_t off = pg * PG;
    size_t i = off / STRIDE;
    return off == i * STRIDE + i * PG;
}

static uint64_t pat_word(size_t i, uint32_t ver, size_t w)
{
    return 0xa5a5000000000000ULL ^ ((uint64_t)i << 40) ^ ((uint64_t)ver << 16) ^ w;
}

static uint64_t dirty_word(size_t c, uint32_t ver, size_t w)
{
    return 0x3c3c000000000000ULL ^ ((uint64_t)c << 36) ^ ((uint64_t)ver << 22) ^ w;
}

static void write_pat(size_t i)
{
    uint64_t *p = pat_page(i);
    for (size_t w = 0; w < PG / 8; w++)
        p[w] = pat_word(i, pat_ver[i], w);
}

static void check_pat(size_t i, const char *when)
{
    uint64_t *p = pat_page(i);
    for (size_t w = 0; w < PG / 8; w++)
        if (p[w] != pat_word(i, pat_ver[i], w))
            fail("%s: pattern page %zu word %zu is %#llx, expected %#llx", when, i, w,
                 (unsigned long long)p[w], (unsigned long long)pat_word(i, pat_ver[i], w));
}

static void check_hole(size_t pg, const char *when)
{
    const uint64_t *p = (const uint64_t *)(region + pg * PG);
    for (size_t w = 0; w < PG / 8; w++)
        if (p[w] != 0)
            fail("%s: hole page %zu (offset %#zx) word %zu is %#llx, not zero", when, pg, pg * PG,
                 w, (unsigned long long)p[w]);
}

static void write_chunk(size_t c)
{
    uint64_t *p = dirty + c * (CHUNK / 8);
    for (size_t w = 0; w < CHUNK / 8; w++)
        p[w] = dirty_word(c, chunk_ver[c], w);
}

static void check_chunk(size_t c, const char *when)
{
    const uint64_t *p = dirty + c * (CHUNK / 8);
    for (size_t w = 0; w < CHUNK / 8; w++)
        if (p[w] != dirty_word(c, chunk_ver[c], w))
            fail("%s: dirty chunk %zu word %zu is %#llx, expected %#llx", when, c, w,
                 (unsigned long long)p[w], (unsigned long long)dirty_word(c, chunk_ver[c], w));
}

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void full_check(const char *when)
{
    for (size_t i = 0; i < NPAT; i++)
        check_pat(i, when);
    for (size_t c = 0; c < dirty_chunks; c++)
        check_chunk(c, when);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    long dirty_mib = arg(argc, argv, 2, 0, 0, 4096);
    long ms = arg(argc, argv, 3, 20, 0, 100000);
    long region_mib = arg(argc, argv, 4, 1024, 16, 1 << 20);
    PG = (size_t)sysconf(_SC_PAGESIZE);
    REGION = (size_t)region_mib << 20;
    STRIDE = REGION / NPAT;
    region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                  -1, 0);
    if (region == MAP_FAILED)
        fail("mmap %ld MiB: %s", region_mib, strerror(errno));
    for (size_t i = 0; i < NPAT; i++)
        write_pat(i);
    dirty_chunks = (size_t)dirty_mib;
    if (dirty_chunks) {
        dirty = mmap(NULL, dirty_chunks * CHUNK, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (dirty == MAP_FAILED)
            fail("mmap %ld MiB: %s", dirty_mib, strerror(errno));
        for (size_t c = 0; c < dirty_chunks; c++)
            write_chunk(c);
    }

    pid_t pid = getpid();
    size_t npages = REGION / PG;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        if (getpid() != pid) { /* restarted: check everything once */
            pid = getpid();
            full_check("after a restart");
        }
        /* Change one pattern page and one dirty chunk per step. */
        size_t i = (size_t)k % NPAT;
        pat_ver[i]++;
        write_pat(i);
        if (dirty_chunks) {
            size_t c = (size_t)k % dirty_chunks;
            chunk_ver[c]++;
            write_chunk(c);
        }
        /* Check all pattern pages, a few dirty chunks and a few holes. */
        for (size_t j = 0; j < NPAT; j++)
            check_pat(j, "step");
        for (int n = 0; n < 2 && dirty_chunks; n++)
            check_chunk((size_t)(rnd() % dirty_chunks), "step");
        for (int n = 0; n < 4; n++) {
            size_t pg = (size_t)(rnd() % npages);
            if (!is_pat_page(pg))
                check_hole(pg, "step");
        }
        h ^= (uint64_t)i * 0x9e3779b97f4a7c15ULL + pat_ver[i];
        h *= 0x100000001b3ULL;
        step_line(k);
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&req, NULL);
    }

    full_check("at the end");
    size_t holes = 0;
    for (size_t pg = 0; pg < npages; pg++)
        if (!is_pat_page(pg)) {
            check_hole(pg, "at the end");
            holes++;
        }
    printf("DONE checksum=%016llx holes=%zu patterns=%zu\n", (unsigned long long)h, holes,
           (size_t)NPAT);
    return fflush(stdout) == 0 ? 0 : 1;
}
