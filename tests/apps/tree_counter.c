/* tree_counter TAG [STEPS=100] [MS=25]: forks once, then the parent counts as `TAG.p step N` and
   the child as `TAG.c step N` (one line per step, then `... DONE checksum=... steps=STEPS`, the
   checksum of ckpt_counter), each checking its counter and heap at every step. Neither waits for
   the other, so each process's output alone is the uninterrupted run's. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char tag[256];

static void fail(const char *what)
{
    fprintf(stderr, "tree_counter %s: FAIL: %s\n", tag, what);
    exit(1);
}

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
    if (argc < 2) {
        fprintf(stderr, "usage: tree_counter TAG [STEPS] [MS]\n");
        return 2;
    }
    long steps = argc > 2 ? atol(argv[2]) : 100, ms = argc > 3 ? atol(argv[3]) : 25;
    if (steps < 1 || ms < 0) {
        fprintf(stderr, "usage: tree_counter TAG [STEPS] [MS]\n");
        return 2;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        perror("tree_counter: fork");
        return 1;
    }
    snprintf(tag, sizeof(tag), "%s.%c", argv[1], pid == 0 ? 'c' : 'p');
    long *squares = calloc((size_t)steps + 1, sizeof *squares);
    if (!squares)
        fail("calloc");
    volatile long counter = 0;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (long k = 1; k <= steps; k++) {
        counter++;
        squares[k] = k * k;
        if (counter != k)
            fail("counter diverged");
        for (long j = k > 8 ? k - 8 : 1; j <= k; j++)
            if (squares[j] != j * j)
                fail("heap array corrupted");
        h = fnv(h, (uint64_t)k);
        printf("%s step %ld\n", tag, k);
        if (fflush(stdout) != 0)
            fail("fflush(stdout)");
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
        while (nanosleep(&req, &rem) != 0) {
            if (errno != EINTR)
                fail("nanosleep");
            req = rem;
        }
    }
    printf("%s DONE checksum=%016llx steps=%ld\n", tag, (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
