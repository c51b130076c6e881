/* ckpt_cowrite [STEPS=600] [MIB=32] [MS=2]: rewrites every page of a MIB MiB heap buffer at each
   step, so a checkpoint's forked writer (copy-on-write) races the program's stores; at each step it
   checks the whole buffer holds the previous step's pattern (a deterministic function of the step
   and the page), so a restart from an image mixing two steps' pages fails. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "ckpt_cowrite"
#define USAGE "[STEPS] [MIB] [MS]"
#include "ckpt_common.h"

#define PAGE 4096
#define WORDS_PER_PAGE 8 /* one store per 512 bytes: every page is dirtied, cheaply */

static uint64_t pattern(long step, size_t page, int w)
{
    uint64_t x = (uint64_t)step * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)page << 8 | (uint64_t)w);
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    return (x ^ (x >> 29)) | 1; /* never zero: a page of zeros would be a hole */
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 600, 1, 10000000);
    long mib = arg(argc, argv, 2, 32, 1, 65536);
    long ms = arg(argc, argv, 3, 2, 0, 100000);
    size_t pages = (size_t)mib * 1024 * 1024 / PAGE;
    uint64_t *buf = malloc(pages * PAGE);
    if (!buf)
        fail("malloc of %ld MiB", mib);
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t p = 0; p < pages; p++)
        for (int w = 0; w < WORDS_PER_PAGE; w++)
            buf[p * PAGE / 8 + (size_t)w * (PAGE / 8 / WORDS_PER_PAGE)] = pattern(0, p, w);
    for (long k = 1; k <= steps; k++) {
        for (size_t p = 0; p < pages; p++)
            for (int w = 0; w < WORDS_PER_PAGE; w++) {
                uint64_t *word = &buf[p * PAGE / 8 + (size_t)w * (PAGE / 8 / WORDS_PER_PAGE)];
                if (*word != pattern(k - 1, p, w))
                    fail("step %ld: page %zu word %d holds %016llx, not step %ld's pattern", k, p,
                         w, (unsigned long long)*word, k - 1);
                *word = pattern(k, p, w);
            }
        h = (h ^ (uint64_t)k) * 0x100000001b3ULL;
        step_line(k);
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
        while (nanosleep(&req, &rem) != 0) {
            if (errno != EINTR)
                fail("nanosleep: %s", strerror(errno));
            req = rem;
        }
    }
    printf("DONE checksum=%016llx steps=%ld mib=%ld\n", (unsigned long long)h, steps, mib);
    return fflush(stdout) == 0 ? 0 : 1;
}
