/* ckpt_sigthread [STEPS=100] [MS=25]: keeps signals queued to one thread pending, blocked, through
   its whole run (pthread_sigqueue()d SIGRTMIN+4 values 1..3 and SIGUSR1, two pthread_kill()ed
   SIGRTMIN+5, and behind them one process-wide sigqueue()d SIGRTMIN+4; and, sent by the worker,
   a process-wide kill()ed SIGHUP and the SIGCHLD of a child it forked that exited with status 9,
   whose SI_USER and CLD_EXITED the kernel lets only the sender's own thread queue again), then the
   worker takes them and checks each one's order, si_code and value survived: its own first, as
   the kernel gives. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "ckpt_sigthread"
#define USAGE "[STEPS] [MS]"
#include "ckpt_common.h"

#define USR1_VALUE 77
#define SHARED_VALUE 100
#define CHILD_STATUS 9

static int go[2];    /* main -> worker: the steps are done, check */
static int ready[2]; /* worker -> main: its kill() and its child's SIGCHLD are pending */
static pid_t child;

static void expect(int sig, int code, intptr_t value, const char *what)
{
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    struct timespec zero = {0, 0};
    siginfo_t si;
    if (sigtimedwait(&one, &si, &zero) != sig)
        fail("%s: not pending at the end (%s)", what, strerror(errno));
    /* tgkill's si_code is SI_TKILL, or SI_USER on newer kernels */
    int same = si.si_code == code || (code == SI_TKILL && si.si_code == SI_USER);
    if (!same || (code == SI_QUEUE && (intptr_t)si.si_value.sival_int != value))
        fail("%s: si_code %d value %ld, want si_code %d value %ld", what, si.si_code,
             (long)si.si_value.sival_int, code, (long)value);
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

/* Sent from this thread, to the process: SIGHUP by kill(), SIGCHLD by a child's exit. */
static void send_process_wide(void)
{
    if (kill(getpid(), SIGHUP) != 0)
        fail("kill: %s", strerror(errno));
    child = fork();
    if (child < 0)
        fail("fork: %s", strerror(errno));
    if (child == 0)
        _exit(CHILD_STATUS);
    reap_status(child, "the child", CHILD_STATUS);
    if (write(ready[1], "r", 1) != 1)
        fail("write: %s", strerror(errno));
}

static void expect_process_wide(void)
{
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, SIGHUP);
    struct timespec zero = {0, 0};
    siginfo_t si;
    if (sigtimedwait(&one, &si, &zero) != SIGHUP)
        fail("kill()ed SIGHUP: not pending at the end (%s)", strerror(errno));
    if (si.si_code != SI_USER || si.si_pid != getpid())
        fail("kill()ed SIGHUP: si_code %d si_pid %d, want si_code %d si_pid %d", si.si_code,
             (int)si.si_pid, SI_USER, (int)getpid());
    sigemptyset(&one);
    sigaddset(&one, SIGCHLD);
    if (sigtimedwait(&one, &si, &zero) != SIGCHLD)
        fail("SIGCHLD: not pending at the end (%s)", strerror(errno));
    if (si.si_code != CLD_EXITED || si.si_status != CHILD_STATUS || si.si_pid != child)
        fail("SIGCHLD: si_code %d si_status %d si_pid %d, want si_code %d si_status %d si_pid %d",
             si.si_code, si.si_status, (int)si.si_pid, CLD_EXITED, CHILD_STATUS, (int)child);
    expect_none(SIGHUP, "SIGHUP");
    expect_none(SIGCHLD, "SIGCHLD");
}

static void *worker(void *arg)
{
    (void)arg;
    send_process_wide();
    char b;
    while (read(go[0], &b, 1) < 0)
        if (errno != EINTR)
            fail("read: %s", strerror(errno));
    int rt_q = SIGRTMIN + 4, rt_k = SIGRTMIN + 5;
    /* Its own three, in order, then the process's one: a tgkill() at restart would give one
     * SI_TKILL with no value instead. */
    for (int v = 1; v <= 3; v++) {
        char what[48];
        snprintf(what, sizeof(what), "pthread_sigqueue value %d", v);
        expect(rt_q, SI_QUEUE, v, what);
    }
    expect(rt_q, SI_QUEUE, SHARED_VALUE, "the process-wide sigqueue after the thread's own");
    expect_none(rt_q, "SIGRTMIN+4");
    expect(rt_k, SI_TKILL, 0, "first pthread_kill");
    expect(rt_k, SI_TKILL, 0, "second pthread_kill");
    expect_none(rt_k, "SIGRTMIN+5");
    expect(SIGUSR1, SI_QUEUE, USR1_VALUE, "SIGUSR1");
    expect_none(SIGUSR1, "SIGUSR1");
    expect_process_wide();
    return NULL;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 10000000);
    long ms = arg(argc, argv, 2, 25, 0, 100000);
    int rt_q = SIGRTMIN + 4, rt_k = SIGRTMIN + 5;
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, rt_q);
    sigaddset(&block, rt_k);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGCHLD);
    /* Blocked in every thread (the worker inherits the mask), so each stays pending where sent. */
    if (pthread_sigmask(SIG_BLOCK, &block, NULL) != 0)
        fail("pthread_sigmask");
    if (pipe(go) != 0 || pipe(ready) != 0)
        fail("pipe: %s", strerror(errno));
    pthread_t w;
    if (pthread_create(&w, NULL, worker, NULL) != 0)
        fail("pthread_create");
    for (int v = 1; v <= 3; v++)
        if (pthread_sigqueue(w, rt_q, (union sigval){.sival_int = v}) != 0)
            fail("pthread_sigqueue %d", v);
    if (pthread_sigqueue(w, SIGUSR1, (union sigval){.sival_int = USR1_VALUE}) != 0)
        fail("pthread_sigqueue SIGUSR1");
    for (int i = 0; i < 2; i++)
        if (pthread_kill(w, rt_k) != 0)
            fail("pthread_kill");
    if (sigqueue(getpid(), rt_q, (union sigval){.sival_int = SHARED_VALUE}) != 0)
        fail("sigqueue: %s", strerror(errno));
    char b;
    while (read(ready[0], &b, 1) < 0)
        if (errno != EINTR)
            fail("read: %s", strerror(errno));

    for (long k = 1; k <= steps; k++) {
        sigset_t pend;
        sigpending(&pend); /* this thread sees the process's ones only */
        if (!sigismember(&pend, rt_q) || sigismember(&pend, rt_k) || sigismember(&pend, SIGUSR1) ||
            !sigismember(&pend, SIGHUP) || !sigismember(&pend, SIGCHLD))
            fail("step %ld: the main thread sees the wrong pending set", k);
        step_line(k);
        ckpt_sleep_ms(ms);
    }
    if (write(go[1], "g", 1) != 1)
        fail("write: %s", strerror(errno));
    if (pthread_join(w, NULL) != 0)
        fail("pthread_join");
    printf("DONE steps=%ld\n", steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
