/* share_signal TAG [STEPS=300] [MS=20] [SIG=12]: a parent signals its forked child with SIG, by
   default SIGUSR2, the number of crac's checkpoint signal (SIGUSR1, 10, is one crac never takes),
   once per step (rsync's generator ends its receiver with SIGUSR2): by
   kill() on odd steps, by sigqueue() with the step number on even ones. The child's handler
   (SA_SIGINFO, no SA_RESTART) counts them and checks each one's sender (its parent), si_code and
   value; between signals the child waits in a read() of a pipe nobody writes to, which each signal
   interrupts (EINTR), then answers the step number through a second pipe. Should an answer be
   500 ms late, the parent writes a byte into the idle pipe (a signal that came just before the
   read); the child fails if more than a quarter of the steps needed it (the signals did not
   interrupt its reads). The parent prints `TAG step N` per answer and, after the child's exit
   status 0, `TAG DONE checksum=... steps=STEPS`. Only the parent gets the checkpoint signal from
   outside; it has no handler for it. */
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

#define PROG "share_signal"
#define USAGE "TAG [STEPS] [MS] [SIG]"
#include "ckpt_common.h"
#include "parent_signals.h"
#include "signal_answer.h"

static void child(int idle_fd, int answer_fd, long steps)
{
    long woken = 0;
    for (long k = 1; k <= steps; k++) {
        while (received < k) {
            char c;
            ssize_t r = read(idle_fd, &c, 1);
            if (r == 1)
                woken++;
            else if (r == 0)
                fail("child: end-of-file on the idle pipe at step %ld", k);
            else if (errno != EINTR)
                fail("child: read: %s", strerror(errno));
        }
        fail_if_bad();
        if (write(answer_fd, &k, sizeof(k)) != (ssize_t)sizeof(k))
            fail("child: write: %s", strerror(errno));
    }
    if (woken > steps / 4)
        fail("child: %ld of %ld steps needed the wake byte: the signals did not interrupt read()",
             woken, steps);
    _exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: " PROG " " USAGE "\n");
        return 2;
    }
    const char *tag = argv[1];
    long steps = arg(argc, argv, 2, 300, 1, 1000000), ms = arg(argc, argv, 3, 20, 0, 10000);
    int sig = (int)arg(argc, argv, 4, SIGUSR2, 1, SIGRTMIN - 1);
    int idle[2], answer[2];
    if (pipe(idle) != 0 || pipe(answer) != 0)
        fail("pipe: %s", strerror(errno));
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO; /* no SA_RESTART: a signal ends the child's read() */
    sigemptyset(&sa.sa_mask);
    fflush(stdout);
    pid_t kid = fork();
    if (kid < 0)
        fail("fork: %s", strerror(errno));
    if (kid == 0) {
        if (sigaction(sig, &sa, NULL) != 0)
            fail("child: sigaction: %s", strerror(errno));
        close(idle[1]);
        close(answer[0]);
        if (write(answer[1], &(long){0}, sizeof(long)) != (ssize_t)sizeof(long))
            fail("child: write: %s", strerror(errno));
        child(idle[0], answer[1], steps);
    }
    close(idle[0]);
    close(answer[1]);
    uint64_t h = CKPT_FNV_BASIS;
    for (long k = 0; k <= steps; k++) { /* answer 0: the child's handler is installed */
        if (k > 0) {
            int r =
                k % 2 ? kill(kid, sig) : sigqueue(kid, sig, (union sigval){.sival_int = (int)k});
            if (r != 0)
                fail("signal %ld: %s", k, strerror(errno));
        }
        await_answer(answer[0], idle[1], k, kid);
        if (k == 0)
            continue;
        h = ckpt_fnv(h, (uint64_t)k);
        tag_step_line(tag, k);
        ckpt_sleep_ms(ms);
    }
    close(idle[1]);
    reap_ok(kid, "child");
    return tag_done_line(tag, h, steps);
}
