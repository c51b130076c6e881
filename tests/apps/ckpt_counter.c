/* ckpt_counter [STEPS=100] [MS=25]: counts to STEPS, printing `step N` and sleeping MS ms in nanosleep
   per step (an interrupted sleep is resumed); checks shadow counters in .bss, stack and heap. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "ckpt_counter"
#define USAGE "[STEPS] [MS]"
#include "ckpt_common.h"

static uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= 0x100000001b3ULL;
    }
    return h;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 10000000);
    long ms = arg(argc, argv, 2, 25, 0, 100000);
    long *squares = calloc((size_t)steps + 1, sizeof *squares);
    if (!squares)
        fail("calloc");
    static volatile uint64_t shadow; /* in .bss */
    volatile long counter = 0;       /* on the stack */
    uint64_t h = 0xcbf29ce484222325ULL;

    for (long k = 1; k <= steps; k++) {
        counter++;
        shadow += 3;
        squares[k] = k * k;
        if (counter != k || shadow != 3 * (uint64_t)k)
            fail("counters diverged at step %ld: counter=%ld shadow=%llu", k, (long)counter,
                 (unsigned long long)shadow);
        for (long j = k > 8 ? k - 8 : 1; j <= k; j++)
            if (squares[j] != j * j)
                fail("heap array corrupted at step %ld, index %ld", k, j);
        h = fnv(h, (uint64_t)k);
        step_line(k);
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
        while (nanosleep(&req, &rem) != 0) {
            if (errno != EINTR)
                fail("nanosleep: %s", strerror(errno));
            req = rem; /* a well-behaved program resumes the sleep */
        }
    }
    for (long j = 1; j <= steps; j++)
        if (squares[j] != j * j)
            fail("heap array corrupted at index %ld", j);
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    free(squares);
    return fflush(stdout) == 0 ? 0 : 1;
}
