/* compress_data KIND MIB: MIB MiB of KIND data (text: words from a small vocabulary; sparse: one
   non-zero word per page; random: xorshift bytes), then "tick N" every 20 ms (bench/compress.py
   times a restart to the first tick). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    const char *kind = argv[1];
    size_t len = (size_t)atol(argv[2]) << 20;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 1;
    static const char *words[] = {"checkpoint ", "restart ", "the ", "memory ", "of ",
                                  "process ",    "and ",     "a ",   "page ",   "data\n"};
    uint64_t x = 88172645463325252ULL;
    for (size_t o = 0; o < len;) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (strcmp(kind, "random") == 0) {
            memcpy(m + o, &x, 8);
            o += 8;
        } else if (strcmp(kind, "sparse") == 0) {
            memcpy(m + o + (x % 512) * 8, &x, 8);
            o += 4096;
        } else {
            const char *w = words[x % 10];
            size_t n = strlen(w) < len - o ? strlen(w) : len - o;
            memcpy(m + o, w, n);
            o += n;
        }
    }
    for (long t = 0;; t++) {
        printf("tick %ld %u\n", t, m[len / 2]);
        fflush(stdout);
        struct timespec req = {0, 20000000L};
        nanosleep(&req, NULL);
    }
}
