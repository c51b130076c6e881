/* share_pending TAG [STEPS=300] [MS=20]: a parent signals its forked child once per step with a
   real-time signal the child keeps blocked until the last step (every instance stays queued, each
   with its own siginfo, through every checkpoint and restart in between): kill() on odd steps,
   sigqueue() with the step number on even ones. After the last step the parent closes a pipe;
   the child then unblocks the signal, and its handler (SA_SIGINFO) checks each instance in order:
   its si_code, its value and its sender, which must be the parent as the program knows it,
   getppid() (an instance queued in a run between two restarts was saved naming that run's kernel
   pid). The parent prints `TAG step N` per step and, after the child's exit status 0,
   `TAG DONE checksum=... steps=STEPS`. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG "share_pending"
#define USAGE "TAG [STEPS] [MS]"
#include "ckpt_common.h"
#include "parent_signals.h"

static void child(int sig, int done_fd, int ready_fd, long steps)
{
    sigset_t held;
    sigemptyset(&held);
    sigaddset(&held, sig);
    if (sigprocmask(SIG_BLOCK, &held, NULL) != 0)
        fail("child: sigprocmask: %s", strerror(errno));
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) != 0)
        fail("child: sigaction: %s", strerror(errno));
    if (write(ready_fd, "r", 1) != 1)
        fail("child: write: %s", strerror(errno));
    char c;
    ssize_t r;
    while ((r = read(done_fd, &c, 1)) != 0)
        if (r < 0 && errno != EINTR)
            fail("child: read: %s", strerror(errno));
    if (sigprocmask(SIG_UNBLOCK, &held, NULL) != 0) /* every queued instance is delivered */
        fail("child: sigprocmask: %s", strerror(errno));
    fail_if_bad();
    if (received != steps)
        fail("child: %ld of %ld signals came", (long)received, steps);
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    const char *tag = argv[1];
    long steps = arg(argc, argv, 2, 300, 1, 10000), ms = arg(argc, argv, 3, 20, 0, 10000);
    int sig = SIGRTMIN + 3;
    int done[2], ready[2];
    if (pipe(done) != 0 || pipe(ready) != 0)
        fail("pipe: %s", strerror(errno));
    fflush(stdout);
    pid_t kid = fork();
    if (kid < 0)
        fail("fork: %s", strerror(errno));
    if (kid == 0) {
        close(done[1]);
        close(ready[0]);
        child(sig, done[0], ready[1], steps);
    }
    close(done[0]);
    close(ready[1]);
    char c;
    if (read(ready[0], &c, 1) != 1) /* the child's handler is installed, the signal blocked */
        fail("the child did not start");
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 1; k <= steps; k++) {
        int r = k % 2 ? kill(kid, sig) : sigqueue(kid, sig, (union sigval){.sival_int = (int)k});
        if (r != 0)
            fail("signal %ld: %s", k, strerror(errno));
        h = ckpt_fnv(h, (uint64_t)k);
        tag_step_line(tag, k);
        ckpt_sleep_ms(ms);
    }
    close(done[1]);
    reap_ok(kid, "child");
    return tag_done_line(tag, h, steps);
}
