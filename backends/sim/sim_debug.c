/* sim_debug.c — debug entry points the tests use to look inside the sim: the address of a
 * thread's last-error variable, and a call that blocks until a signal handler has run. */
#include "sim.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <time.h>

/* Returns -EINTR once a signal handler ran on this thread, 0 after timeout_ms without one. */
long sim_block_until_signal(long timeout_ms)
{
    struct timespec ts = {timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
    int r = ppoll(NULL, 0, &ts, NULL);
    return r < 0 ? -errno : r;
}
