/* ckpt_outside_w MAPS_FILE ADDR [STEPS=60] [fixed|noreplace]: maps two pages at ADDR (hex; 0:
   none) with MAP_FIXED (or MAP_FIXED_NOREPLACE), outside crac's window, and keeps a count in them
   that every step checks and advances; every step copies /proc/self/maps to MAPS_FILE (a test
   picks an address the restarted lower half uses from it). Exits 3 when ADDR is taken. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>

#define PROG "ckpt_outside_w"
#define USAGE "MAPS_FILE ADDR [STEPS] [fixed|noreplace]"
#include "ckpt_common.h"

#define WORDS (2 * 4096 / sizeof(uint64_t))

static void copy_maps(const char *to)
{
    char tmp[4096 + 8], buf[65536];
    snprintf(tmp, sizeof(tmp), "%s.tmp", to);
    int in = open("/proc/self/maps", O_RDONLY), out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || out < 0)
        fail("open /proc/self/maps or %s: %s", tmp, strerror(errno));
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n)
            fail("write %s: %s", tmp, strerror(errno));
    close(in);
    close(out);
    if (rename(tmp, to) != 0)
        fail("rename %s: %s", tmp, strerror(errno));
}

int main(int argc, char **argv)
{
    if (argc < 3)
        fail("usage: " PROG " " USAGE);
    uintptr_t addr = (uintptr_t)strtoull(argv[2], NULL, 16);
    long steps = arg(argc, argv, 3, 60, 1, 100000);
    int fixed = argc > 4 && strcmp(argv[4], "fixed") == 0 ? MAP_FIXED : MAP_FIXED_NOREPLACE;
    uint64_t *w = NULL;
    if (addr) {
        /* Under crac a MAP_FIXED outside the window never replaces the lower half's memory. */
        w = mmap((void *)addr, WORDS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | fixed, -1, 0);
        if (w != (void *)addr) {
            printf("0x%lx is taken\n", (unsigned long)addr);
            return 3;
        }
        for (size_t i = 1; i < WORDS; i++)
            w[i] = ckpt_fnv(CKPT_FNV_BASIS, i);
    }
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        if (w) {
            if (w[0] != (uint64_t)(k - 1))
                fail("step %ld: the count outside the window is %llu", k, (unsigned long long)w[0]);
            for (size_t i = 1; i < WORDS; i++)
                if (w[i] != ckpt_fnv(CKPT_FNV_BASIS, i))
                    fail("step %ld: word %zu outside the window changed", k, i);
            w[0] = (uint64_t)k;
        }
        copy_maps(argv[1]);
        h = ckpt_fnv(h, (uint64_t)k);
        step_line(k);
        ckpt_sleep_ms(30);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return 0;
}
