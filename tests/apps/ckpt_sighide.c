/* ckpt_sighide [STEPS=80]: blocks SIGUSR2 (crac's checkpoint signal) and checks, many times per
   step, that it never shows: sigpending, sigtimedwait with a zero timeout, a fresh signalfd for it,
   /proc/self/status SigPnd; a second thread waits for it with sigtimedwait all along. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

/* SigPnd of /proc/self/status, read with the file open as briefly as possible: a checkpoint that
   caught it open could not reopen /proc/<old pid>/status at restart. */
static uint64_t sigpnd(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        fail("open /proc/self/status: %s", strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        fail("read /proc/self/status: %s", n < 0 ? strerror(errno) : "empty");
    buf[n] = '\0';
    const char *at = strstr(buf, "\nSigPnd:");
    if (!at)
        fail("/proc/self/status has no SigPnd");
    return strtoull(at + 8, NULL, 16);
}

static void check_hidden(long k, int with_status)
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
        fail("step %ld: sigtimedwait took a SIGUSR2 (si_pid %d, si_code %d)", k, si.si_pid,
             si.si_code);
    if (r != -1 || errno != EAGAIN)
        fail("step %ld: sigtimedwait with a zero timeout: %d (%s)", k, r, strerror(errno));

    int fd = signalfd(-1, &usr2, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        fail("signalfd: %s", strerror(errno));
    struct signalfd_siginfo ssi;
    ssize_t got = read(fd, &ssi, sizeof ssi);
    /* 0: a checkpoint came between signalfd() and read(), and the restart made the descriptor
     * /dev/null (docs/DECISIONS.md); a signalfd itself never reads 0 bytes. */
    if (got > 0)
        fail("step %ld: the signalfd for SIGUSR2 gave %zd bytes (signal %u)", k, got,
             ssi.ssi_signo);
    if (got < 0 && errno != EAGAIN)
        fail("step %ld: read(signalfd): %s", k, strerror(errno));
    close(fd);

    if (with_status && (sigpnd() & (1ULL << (SIGUSR2 - 1))))
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
            fail("the waiting thread took a SIGUSR2 (si_pid %d, si_code %d)", si.si_pid,
                 si.si_code);
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
        /* 25 ms of back-to-back checks per step: a checkpoint signal arrives during them, and
         * one that showed for a moment only (queued, not yet taken by crac) is seen. */
        double start = now_mono();
        int status_checked = 0;
        do {
            int with_status = !status_checked && now_mono() - start > 0.012;
            check_hidden(k, with_status);
            status_checked |= with_status;
        } while (now_mono() - start < 0.025);
        step_line(k);
    }
    done = 1;
    pthread_join(t, NULL);
    printf("DONE steps=%ld\n", steps);
    return 0;
}
