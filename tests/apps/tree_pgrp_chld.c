/* tree_pgrp_chld TAG [STEPS=100] [MS=40]: SIGCHLD as before, across restarts. A SIGCHLD handler
   counts; each step forks a child that sleeps MS ms and exits with the step's status; the
   parent waits (sigsuspend) until the count says the child ended, then, with the child a zombie,
   sleeps MS ms (a checkpoint then often finds a zombie not yet waited for), reaps it with
   waitpid, and checks the count is exactly the number of children so far (a restart that sent
   SIGCHLD again for a recreated zombie, or lost one, breaks it), then prints `TAG step N` (then
   `TAG DONE checksum=... steps=STEPS`, ckpt_counter's checksum). Exits non-zero on a mismatch. */
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

#define PROG "tree_pgrp_chld"
#include "tree_common.h"

static volatile sig_atomic_t chld;

static void on_chld(int sig)
{
    (void)sig;
    chld++;
}

int main(int argc, char **argv)
{
    long steps, ms;
    tree_args(argc, argv, &steps, &ms);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_chld;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGCHLD, &sa, NULL);
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        pid_t pid = fork_step(k);
        if (pid == 0) {
            ckpt_sleep_ms(ms);
            _exit((int)(k % 100));
        }
        sigprocmask(SIG_BLOCK, &set, &old);
        while (chld < k)
            sigsuspend(&old);
        sigprocmask(SIG_SETMASK, &old, NULL);
        ckpt_sleep_ms(ms); /* the child is a zombie, not yet waited for */
        reap_step(k, pid);
        if (chld != k)
            fail_at(k, "SIGCHLDs received", chld, k);
        h = ckpt_fnv(h, (uint64_t)k);
        printf("%s step %ld\n", tag, k);
    }
    return tag_done_line(tag, h, steps);
}
