/* tree_fill [N=1] [MIB=8]: the root forks N-1 children; each of the N processes fills MIB MiB with
   pseudo-random bytes (incompressible, its own), prints `ready`, then sleeps until killed. For
   bench/tree.py: a tree of N processes vs N independent ones (N=1 each). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 1, mib = argc > 2 ? atol(argv[2]) : 8;
    if (n < 1 || n > 4096 || mib < 0 || mib > 65536) {
        fprintf(stderr, "usage: tree_fill [N 1..4096] [MIB]\n");
        return 2;
    }
    long me = 0;
    for (long i = 1; i < n; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("tree_fill: fork");
            return 1;
        }
        if (pid == 0) {
            me = i;
            break;
        }
    }
    size_t words = (size_t)mib << 17;
    uint64_t *buf = malloc(words * sizeof *buf + 1);
    if (!buf) {
        perror("tree_fill: malloc");
        return 1;
    }
    uint64_t x = 0x9e3779b97f4a7c15ULL * (uint64_t)(me + 1);
    for (size_t i = 0; i < words; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = x;
    }
    printf("ready %ld\n", me);
    fflush(stdout);
    for (;;)
        pause();
}
