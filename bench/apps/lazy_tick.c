/* lazy_tick MIB TICKFILE: fills MIB MiB with data, then writes an increasing tick number at the
   start of TICKFILE every 10 ms (bench/lazy.py times a restart to its first tick). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: lazy_tick MIB TICKFILE\n");
        return 2;
    }
    size_t len = (size_t)atol(argv[1]) << 20;
    uint64_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (mem == MAP_FAILED || fd < 0) {
        perror("lazy_tick");
        return 1;
    }
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < len / 8; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        mem[i] = x;
    }
    for (long tick = 1;; tick++) {
        char line[32];
        int n = snprintf(line, sizeof(line), "%ld\n", tick);
        if (pwrite(fd, line, (size_t)n, 0) != n)
            return 1;
        mem[(size_t)tick * 512 % (len / 8)] ^= (uint64_t)tick; /* touches memory as it runs */
        struct timespec req = {0, 10 * 1000000L};
        nanosleep(&req, NULL);
    }
}
