/* tree_close_fds [STEPS=60] [MS=40]: each step closes every descriptor above 2 with close_range, over
   and over for MS ms, as Python's subprocess does in each child before its exec; checks that a
   descriptor it opened itself is closed by it and that stdout still works; prints `step N`. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PROG "tree_close_fds"
#define USAGE "[STEPS] [MS]"
#include "ckpt_common.h"

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 1000000);
    long ms = arg(argc, argv, 2, 40, 1, 100000);
    uint64_t h = 0xcbf29ce484222325ULL;
    struct stat null_st;
    if (stat("/dev/null", &null_st) != 0)
        fail("stat /dev/null: %s", strerror(errno));
    const dev_t null_dev = null_st.st_rdev;
    for (long k = 1; k <= steps; k++) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0)
            fail("open /dev/null: %s", strerror(errno));
        double end = now_mono() + (double)ms / 1000.0;
        long calls = 0;
        do {
            if (syscall(SYS_close_range, 3U, ~0U, 0U) != 0)
                fail("close_range at step %ld: %s", k, strerror(errno));
            calls++;
        } while (now_mono() < end);
        /* The number may be taken again meanwhile (crac's own short-lived files open at the
           lowest free number, as any library's would): only our /dev/null must be gone. */
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == null_dev)
            fail("step %ld: close_range left fd %d (/dev/null) open", k, fd);
        if (calls < 1)
            fail("step %ld: no close_range", k);
        h = (h ^ (uint64_t)k) * 0x100000001b3ULL;
        step_line(k);
    }
    printf("DONE checksum=%016llx steps=%ld\n", (unsigned long long)h, steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
