/* ckpt_sigown [STEPS=60]: installs its own SIGUSR2 handler (crac's checkpoint signal) and sends
   SIGUSR2 to itself at every step: raise, kill(getpid()), and once while it is blocked (pending,
   then delivered at unblock). The handler runs exactly once for each, with the right siginfo, and
   never otherwise: checkpoint signals from outside do not reach it. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_sigown"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

static volatile sig_atomic_t count, last_code, last_pid, bad_signo;

static void on_usr2(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (sig != SIGUSR2 || si->si_signo != SIGUSR2)
        bad_signo++;
    last_code = si->si_code;
    last_pid = si->si_pid;
    count++;
}

static void expect(long k, const char *what, long want_count, int want_code)
{
    if (bad_signo)
        fail("step %ld (%s): the handler got another signal number", k, what);
    if (count != want_count)
        fail("step %ld (%s): the SIGUSR2 handler ran %ld times, expected %ld", k, what, (long)count,
             want_count);
    if (want_code != 1 && (last_code != want_code || last_pid != getpid()))
        fail("step %ld (%s): si_code %d si_pid %d, expected %d and %d", k, what, (int)last_code,
             (int)last_pid, want_code, (int)getpid());
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 1000000);
    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_usr2;
    a.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&a.sa_mask);
    if (sigaction(SIGUSR2, &a, NULL) != 0)
        fail("sigaction: %s", strerror(errno));
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    long n = 0;
    for (long k = 1; k <= steps; k++) {
        if (raise(SIGUSR2) != 0)
            fail("raise: %s", strerror(errno));
        expect(k, "raise", ++n, SI_TKILL);
        if (kill(getpid(), SIGUSR2) != 0)
            fail("kill: %s", strerror(errno));
        expect(k, "kill", ++n, SI_USER);

        if (sigprocmask(SIG_BLOCK, &usr2, NULL) != 0)
            fail("sigprocmask: %s", strerror(errno));
        if (raise(SIGUSR2) != 0)
            fail("raise: %s", strerror(errno));
        expect(k, "raise while blocked", n, 1);
        sigset_t pend;
        sigemptyset(&pend);
        if (sigpending(&pend) != 0 || !sigismember(&pend, SIGUSR2))
            fail("step %ld: the SIGUSR2 it raised while blocked is not pending", k);
        if (sigprocmask(SIG_UNBLOCK, &usr2, NULL) != 0)
            fail("sigprocmask: %s", strerror(errno));
        expect(k, "unblock", ++n, SI_TKILL);
        sigemptyset(&pend);
        if (sigpending(&pend) != 0 || sigismember(&pend, SIGUSR2))
            fail("step %ld: SIGUSR2 still pending after its delivery", k);

        struct timespec t = {0, 25 * 1000000L};
        while (nanosleep(&t, &t) != 0 && errno == EINTR)
            ;
        step_line(k);
    }
    printf("DONE steps=%ld signals=%ld\n", steps, n);
    return 0;
}
