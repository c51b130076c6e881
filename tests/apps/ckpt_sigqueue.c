/* ckpt_sigqueue [STEPS=100] [MS=25]: keeps queued signals pending, blocked, through its whole run
   (three sigqueue() instances of SIGRTMIN+2, a POSIX timer's SIGRTMIN+3, a sigqueue()d SIGUSR1,
   a kill()ed SIGHUP and two kill()ed SIGRTMIN+4, whose SI_USER the kernel lets only the sender's
   own thread queue again, and the SIGCHLD of a child that exited with status 7, reaped, whose
   CLD_EXITED is as restricted), then takes them with sigwaitinfo and checks each one's order, si_code and value survived. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "ckpt_sigqueue"
#define USAGE "[STEPS] [MS]"
#include "ckpt_common.h"

#define TIMER_MAGIC ((void *)(uintptr_t)0x5151c0de)
#define USR1_VALUE 77
#define CHILD_STATUS 7

/* The next pending instance of sig (blocked), taken; a failure if there is none. */
static siginfo_t take_pending(int sig, const char *what)
{
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    struct timespec zero = {0, 0};
    siginfo_t si;
    if (sigtimedwait(&one, &si, &zero) != sig)
        fail("%s: not pending at the end (%s)", what, strerror(errno));
    return si;
}

static void expect(int sig, int code, intptr_t value, const char *what)
{
    siginfo_t si = take_pending(sig, what);
    if (si.si_code != code || (intptr_t)si.si_value.sival_ptr != value)
        fail("%s: si_code %d value %#lx, want si_code %d value %#lx", what, si.si_code,
             (long)(intptr_t)si.si_value.sival_ptr, code, (long)value);
}

/* A kill()ed instance: SI_USER from our own pid (the one the program knows, after a restart too). */
static void expect_user(int sig, const char *what)
{
    siginfo_t si = take_pending(sig, what);
    if (si.si_code != SI_USER || si.si_pid != getpid())
        fail("%s: si_code %d si_pid %d, want si_code %d si_pid %d", what, si.si_code,
             (int)si.si_pid, SI_USER, (int)getpid());
}

/* The SIGCHLD of CHILD, which exited with CHILD_STATUS (its pid as the program knew it). */
static void expect_child(pid_t child)
{
    siginfo_t si = take_pending(SIGCHLD, "SIGCHLD");
    if (si.si_code != CLD_EXITED || si.si_status != CHILD_STATUS || si.si_pid != child)
        fail("SIGCHLD: si_code %d si_status %d si_pid %d, want si_code %d si_status %d si_pid %d",
             si.si_code, si.si_status, (int)si.si_pid, CLD_EXITED, CHILD_STATUS, (int)child);
}

static void expect_none(int sig, const char *what)
{
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    struct timespec zero = {0, 0};
    if (sigtimedwait(&one, NULL, &zero) == sig)
        fail("%s: one instance too many at the end", what);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 10000000);
    long ms = arg(argc, argv, 2, 25, 0, 100000);
    int rt_q = SIGRTMIN + 2, rt_t = SIGRTMIN + 3, rt_k = SIGRTMIN + 4;
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, rt_q);
    sigaddset(&block, rt_t);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, rt_k);
    sigaddset(&block, SIGCHLD);
    if (sigprocmask(SIG_BLOCK, &block, NULL) != 0)
        fail("sigprocmask: %s", strerror(errno));
    for (int v = 1; v <= 3; v++)
        if (sigqueue(getpid(), rt_q, (union sigval){.sival_int = v}) != 0)
            fail("sigqueue %d: %s", v, strerror(errno));
    if (sigqueue(getpid(), SIGUSR1, (union sigval){.sival_int = USR1_VALUE}) != 0)
        fail("sigqueue SIGUSR1: %s", strerror(errno));
    if (kill(getpid(), SIGHUP) != 0 || kill(getpid(), rt_k) != 0 || kill(getpid(), rt_k) != 0)
        fail("kill: %s", strerror(errno));
    pid_t child = fork();
    if (child < 0)
        fail("fork: %s", strerror(errno));
    if (child == 0)
        _exit(CHILD_STATUS);
    /* Reaped: its SIGCHLD stays pending all the same. */
    reap_status(child, "the child", CHILD_STATUS);
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = rt_t};
    ev.sigev_value.sival_ptr = TIMER_MAGIC;
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &ev, &timer) != 0)
        fail("timer_create: %s", strerror(errno));
    struct itimerspec once = {{0, 0}, {0, 1000000}}; /* fires once, 1 ms from now */
    if (timer_settime(timer, 0, &once, NULL) != 0)
        fail("timer_settime: %s", strerror(errno));
    struct watchdog wd;
    wd_start(&wd);
    for (;;) { /* the timer's signal is pending before the first step */
        sigset_t pend;
        sigpending(&pend);
        if (sigismember(&pend, rt_t))
            break;
        if (wd_expired(&wd, 60))
            fail("the timer's signal never became pending");
        struct timespec tick = {0, 1000000};
        nanosleep(&tick, NULL);
    }

    for (long k = 1; k <= steps; k++) {
        sigset_t pend;
        sigpending(&pend);
        if (!sigismember(&pend, rt_q) || !sigismember(&pend, rt_t) ||
            !sigismember(&pend, SIGUSR1) || !sigismember(&pend, SIGHUP) ||
            !sigismember(&pend, rt_k) || !sigismember(&pend, SIGCHLD))
            fail("step %ld: a signal is no longer pending", k);
        step_line(k);
        struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
        while (nanosleep(&req, &rem) != 0) {
            if (errno != EINTR)
                fail("nanosleep: %s", strerror(errno));
            req = rem;
        }
    }
    /* Each one as it was queued: kill() at restart would give one SI_USER with no value. */
    for (int v = 1; v <= 3; v++) {
        char what[32];
        snprintf(what, sizeof(what), "sigqueue value %d", v);
        expect(rt_q, SI_QUEUE, v, what);
    }
    expect_none(rt_q, "SIGRTMIN+2");
    expect(rt_t, SI_TIMER, (intptr_t)TIMER_MAGIC, "timer signal");
    expect_none(rt_t, "SIGRTMIN+3");
    expect(SIGUSR1, SI_QUEUE, USR1_VALUE, "SIGUSR1");
    expect_user(SIGHUP, "kill()ed SIGHUP");
    expect_user(rt_k, "first kill()ed SIGRTMIN+4");
    expect_user(rt_k, "second kill()ed SIGRTMIN+4");
    expect_none(rt_k, "SIGRTMIN+4");
    expect_child(child);
    expect_none(SIGCHLD, "SIGCHLD");
    printf("DONE steps=%ld\n", steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
