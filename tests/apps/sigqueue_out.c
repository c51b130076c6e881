/* sigqueue_out PID [STEPS=100] [MS=25]: queues SIGUSR1 to process PID with sigqueue() (value: the
   step number) and prints `step N` every MS ms, then `DONE steps=STEPS`. The receiver reads the
   sender's pid from each signal's siginfo; after a restart, it must be one it can answer. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "sigqueue_out"
#define USAGE "PID [STEPS] [MS]"
#include "ckpt_common.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        fail("usage: " PROG " " USAGE);
    pid_t to = (pid_t)arg(argc, argv, 1, 0, 1, 1 << 22);
    long steps = arg(argc, argv, 2, 100, 1, 1000000), ms = arg(argc, argv, 3, 25, 0, 100000);
    for (long k = 1; k <= steps; k++) {
        union sigval v = {.sival_int = (int)k};
        if (sigqueue(to, SIGUSR1, v) != 0)
            fail("step %ld: sigqueue to %d: %s", k, (int)to, strerror(errno));
        step_line(k);
        ckpt_sleep_ms(ms);
    }
    printf("DONE steps=%ld\n", steps);
    return 0;
}
