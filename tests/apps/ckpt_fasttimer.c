/* ckpt_fasttimer [STEPS=100000]: a periodic timerfd of 20 us, read every 20 ms as `step N`; a step
   whose tick does not come within 10 s fails. A checkpoint often reads such a timer just after
   an expiry the kernel has not handled yet (0 time left, as for a disarmed timer). */
#define _GNU_SOURCE
#include <poll.h>
#include <stdint.h>
#include <sys/timerfd.h>

#define PROG "ckpt_fasttimer"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100000, 1, 100000000);
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    struct itimerspec every = {{0, 20000}, {0, 20000}};
    if (fd < 0 || timerfd_settime(fd, 0, &every, NULL) != 0)
        fail("timerfd: %s", strerror(errno));
    for (long k = 1; k <= steps; k++) {
        struct pollfd p = {fd, POLLIN, 0};
        int n = poll(&p, 1, 10000);
        if (n < 0 && errno == EINTR)
            n = poll(&p, 1, 10000);
        if (n != 1)
            fail("step %ld: the periodic timer did not tick in 10 s (disarmed?)", k);
        uint64_t ticks;
        if (read(fd, &ticks, sizeof(ticks)) != (ssize_t)sizeof(ticks) || ticks == 0)
            fail("step %ld: timerfd read: %s", k, strerror(errno));
        step_line(k);
        ckpt_sleep_ms(20);
    }
    printf("DONE steps=%ld\n", steps);
    return 0;
}
