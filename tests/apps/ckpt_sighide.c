/* ckpt_sighide [STEPS=80]: blocks SIGUSR2 (crac's checkpoint signal) and checks, many times per
   step, that it never shows: sigpending, sigtimedwait with a zero timeout, a fresh signalfd for it,
   /proc/self/status SigPnd; a second thread waits for it with sigtimedwait all along. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_sighide"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

static sigset_t usr2;
static volatile int done;

static uint64_t status_mask(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        fail("open /proc/self/status: %s", strerror(errno));
    char line[256];
    size_t n = strlen(field);
    uint64_t v = 0;
    int found = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            v = strtoull(line + n + 1, NULL, 16);
            found = 1;
        }
    fclose(f);
    if (!found)
        fail("/proc/self/status has no %s", field);
    return v;
}

static void check_hidden(long k)
{
    sigset_t pend;
    sigemptyset(&pend);
    if (sigpending(&pend) != 0)
        fail("sigpending: %s", strerror(errno));
    if (sigismember(&pend, SIGUSR2))
        fail("step %ld: sigpending shows SIGUSR2", k);

    struct timespec zero = {0, 0};
    siginfo_t si;
    int r = sigtimedwait(&usr2, &si, &zero);
    if (r == SIGUSR2)
        fail("step %ld: sigtimedwait took a SIGUSR2 (si_pid %d, si_code %d)", k, si.si_pid, si.si_code);
    if (r != -1 || errno != EAGAIN)
        fail("step %ld: sigtimedwait with a zero timeout: %d (%s)", k, r, strerror(errno));

    int fd = signalfd(-1, &usr2, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        fail("signalfd: %s", strerror(errno));
    struct signalfd_siginfo ssi;
    ssize_t got = read(fd, &ssi, sizeof ssi);
    if (got >= 0)
        fail("step %ld: the signalfd for SIGUSR2 gave %zd bytes (signal %u)", k, got, ssi.ssi_signo);
    if (errno != EAGAIN)
        fail("step %ld: read(signalfd): %s", k, strerror(errno));
    close(fd);

    if (status_mask("SigPnd") & (1ULL << (SIGUSR2 - 1)))
        fail("step %ld: /proc/self/status SigPnd shows SIGUSR2", k);
}

static void *waiter(void *arg)
{
    (void)arg;
    while (!done) {
        struct timespec t = {0, 20 * 1000000L};
        siginfo_t si;
        int r = sigtimedwait(&usr2, &si, &t);
        if (r == SIGUSR2)
            fail("the waiting thread took a SIGUSR2 (si_pid %d, si_code %d)", si.si_pid, si.si_code);
        if (r != -1 || (errno != EAGAIN && errno != EINTR))
            fail("sigtimedwait in the waiting thread: %d (%s)", r, strerror(errno));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 80, 1, 1000000);
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    /* A program that waits for a signal blocks it first; SIGUSR2 is that signal here. */
    if (sigprocmask(SIG_BLOCK, &usr2, NULL) != 0)
        fail("sigprocmask: %s", strerror(errno));
    pthread_t t;
    if (pthread_create(&t, NULL, waiter, NULL) != 0)
        fail("pthread_create");
    for (long k = 1; k <= steps; k++) {
        /* About 25 ms of checks per step, so a checkpoint signal arrives during them. */
        double end = now_mono() + 0.025;
        do {
            check_hidden(k);
            struct timespec pause = {0, 1000000L};
            while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
                ;
        } while (now_mono() < end);
        step_line(k);
    }
    done = 1;
    pthread_join(t, NULL);
    printf("DONE steps=%ld\n", steps);
    return 0;
}
