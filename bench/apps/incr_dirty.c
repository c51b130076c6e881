/* incr_dirty MIB PERCENT: MIB MiB of random bytes, then "tick N" every 20 ms; each SIGUSR1
   rewrites PERCENT % of the pages, picked at random, and prints "dirtied N" (bench/incremental.py
   checkpoints after each; it times a restart to the first tick). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static volatile sig_atomic_t requested;

static void on_usr1(int sig)
{
    (void)sig;
    requested++;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    size_t len = (size_t)atol(argv[1]) << 20, pages = len / 4096;
    long percent = atol(argv[2]);
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    uint64_t x = 88172645463325252ULL;
    for (size_t o = 0; o < len; o += 8) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(m + o, &x, 8);
    }
    signal(SIGUSR1, on_usr1);
    struct timespec nap = {0, 20 * 1000000L};
    long done = 0;
    for (long tick = 1;; tick++) {
        while (done < requested) {
            for (size_t i = 0; i < pages * (size_t)percent / 100; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                size_t p = x % pages;
                for (size_t w = 0; w < 4096; w += 64) /* every cache line of the page */
                    memcpy(m + p * 4096 + w, &x, 8);
            }
            printf("dirtied %ld\n", ++done);
            fflush(stdout);
        }
        printf("tick %ld\n", tick);
        fflush(stdout);
        nanosleep(&nap, NULL);
    }
}
