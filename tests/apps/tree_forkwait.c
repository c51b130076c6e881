/* tree_forkwait TAG [STEPS=100] [MS=40]: a fork-and-wait loop. Each step forks a child that checks
   getppid() is its parent's getpid(), sleeps MS ms and exits with the step's status (step % 100);
   the parent waits for it with waitpid and checks the pid and status it gets, then prints
   `TAG step N` (then `TAG DONE checksum=... steps=STEPS`, ckpt_counter's checksum). A checkpoint
   mostly finds the parent blocked in waitpid and a child asleep. Exits non-zero on a mismatch. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROG "tree_forkwait"
#include "tree_common.h"

int main(int argc, char **argv)
{
    long steps, ms;
    tree_args(argc, argv, &steps, &ms);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        pid_t me = getpid();
        pid_t pid = fork_step(k);
        if (pid == 0) {
            pid_t pp = getppid();
            if (pp != me) {
                fprintf(stderr, "tree_forkwait %s: child of step %ld: getppid %d, parent %d\n", tag,
                        k, (int)pp, (int)me);
                _exit(200);
            }
            ckpt_sleep_ms(ms);
            if (getppid() != me) {
                fprintf(stderr,
                        "tree_forkwait %s: child of step %ld: getppid %d after sleep, "
                        "parent %d\n",
                        tag, k, (int)getppid(), (int)me);
                _exit(201);
            }
            _exit((int)(k % 100));
        }
        reap_step(k, pid);
        if (getpid() != me)
            fail_at(k, "getpid changed", getpid(), me);
        h = ckpt_fnv(h, (uint64_t)k);
        printf("%s step %ld\n", tag, k);
    }
    return tag_done_line(tag, h, steps);
}
