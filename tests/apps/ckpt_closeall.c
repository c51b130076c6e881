/* ckpt_closeall [STEPS=100] [MS=25] [MODE=once|busy]: closes every descriptor from 3 up to its
   limit one by one with close(), as a daemon or a close_fds child without close_range does: at
   the start, and again at the next step each time it gets SIGUSR1; and keeps counting. busy: it
   does nothing else, over and over, for the MS of each step, so its closes run while checkpoints
   are taken and published. The descriptors crac's lower half holds, long-lived or the manager's
   short-lived ones, must survive it (close answers EBADF for them, as if they were not open) and
   checkpoints go on working. */
#define _GNU_SOURCE
#include <signal.h>

#define PROG "ckpt_closeall"
#define USAGE "[STEPS] [MS] [once|busy]"
#include "ckpt_common.h"

static volatile sig_atomic_t again;

static void on_usr1(int sig)
{
    (void)sig;
    again = 1;
}

static void close_up_to(long max)
{
    for (long fd = 3; fd < max; fd++)
        close((int)fd);
}

static void close_all(void)
{
    long max = sysconf(_SC_OPEN_MAX);
    close_up_to(max < 0 || max > 1 << 20 ? 1 << 20 : max);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 10000000);
    long ms = arg(argc, argv, 2, 25, 0, 100000);
    int busy = argc > 3 && strcmp(argv[3], "busy") == 0;
    if (argc > 3 && !busy && strcmp(argv[3], "once") != 0)
        fail("usage: " PROG " " USAGE);
    struct sigaction sa = {.sa_handler = on_usr1};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        fail("sigaction: %s", strerror(errno));
    close_all();
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        if (again) {
            again = 0;
            close_all();
        }
        h = ckpt_fnv(h, (uint64_t)k);
        step_line(k);
        if (!busy) {
            ckpt_sleep_ms(ms);
            continue;
        }
        /* Everything once, then over and over the numbers open() gives first, where a
         * descriptor opened meanwhile is most likely to be. */
        close_all();
        for (double until = now_mono() + (double)ms / 1000; now_mono() < until;)
            close_up_to(256);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
