/* ckpt_closeall [STEPS=100] [MS=25]: closes every descriptor from 3 up to its limit one by one
   with close(), as a daemon or a close_fds child without close_range does, at the start and at
   every step, and keeps counting. The descriptors crac's lower half holds must survive it (close
   answers EBADF for them, as if they were not open) and checkpoints go on working. */
#define _GNU_SOURCE

#define PROG "ckpt_closeall"
#define USAGE "[STEPS] [MS]"
#include "ckpt_common.h"

static void close_all(void)
{
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 1 << 20)
        max = 1 << 20;
    for (long fd = 3; fd < max; fd++)
        close((int)fd);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 10000000);
    long ms = arg(argc, argv, 2, 25, 0, 100000);
    close_all();
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        close_all();
        h = ckpt_fnv(h, (uint64_t)k);
        step_line(k);
        ckpt_sleep_ms(ms);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
