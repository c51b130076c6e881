/* ckpt_signals [STEPS=100]: installs handlers for and blocks SIGUSR2, SIGALRM (SA_RESETHAND), SIGUSR1
   (SA_ONSTACK) and a real-time signal; every step re-checks dispositions, mask and alt stack, raises. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_signals"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

static volatile sig_atomic_t usr1_count, usr1_on_altstack, usr1_bad_info;
static volatile sig_atomic_t alrm_count, usr2_count, hup_count, rt_count, rt_bad;
static volatile int rt_last_value;
static char altstack_mem[128 * 1024];

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    char here;
    uintptr_t a = (uintptr_t)&here, lo = (uintptr_t)altstack_mem;
    if (a >= lo && a < lo + sizeof altstack_mem)
        usr1_on_altstack++;
    if (sig != SIGUSR1 || si->si_signo != SIGUSR1 || si->si_code != SI_TKILL ||
        si->si_pid != getpid())
        usr1_bad_info++;
    usr1_count++;
}

static void on_alrm(int sig)
{
    if (sig == SIGALRM)
        alrm_count++;
}

static void on_usr2(int sig)
{
    (void)sig;
    usr2_count++; /* never: SIGUSR2 stays blocked and the program never raises it */
}

static void on_hup(int sig)
{
    (void)sig;
    hup_count++; /* never raised */
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if (sig != SIGRTMIN + 3 || si->si_code != SI_QUEUE)
        rt_bad++;
    int v = si->si_value.sival_int;
    if (v != rt_last_value + 1 && rt_last_value != 0)
        rt_bad++; /* queued real-time signals arrive in order */
    rt_last_value = v;
    rt_count++;
}

#define NSIGS 7
static int sigs[NSIGS];
static struct sigaction snap[NSIGS];
static struct sigaction alrm_act;
static sigset_t blocked;
static stack_t altstack;

static void install(int sig, struct sigaction *act)
{
    if (sigaction(sig, act, NULL) != 0)
        fail("sigaction(%d): %s", sig, strerror(errno));
}

static void setup(void)
{
    struct sigaction a;

    altstack.ss_sp = altstack_mem;
    altstack.ss_size = sizeof altstack_mem;
    altstack.ss_flags = 0;
    if (sigaltstack(&altstack, NULL) != 0)
        fail("sigaltstack: %s", strerror(errno));

    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_usr1;
    a.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGALRM);
    install(SIGUSR1, &a);

    memset(&alrm_act, 0, sizeof alrm_act);
    alrm_act.sa_handler = on_alrm;
    alrm_act.sa_flags = SA_RESETHAND;
    sigemptyset(&alrm_act.sa_mask);
    sigaddset(&alrm_act.sa_mask, SIGTERM);
    install(SIGALRM, &alrm_act);

    memset(&a, 0, sizeof a);
    a.sa_handler = on_usr2;
    a.sa_flags = SA_RESTART;
    sigemptyset(&a.sa_mask);
    sigaddset(&a.sa_mask, SIGINT);
    sigaddset(&a.sa_mask, SIGQUIT);
    install(SIGUSR2, &a);

    memset(&a, 0, sizeof a);
    a.sa_sigaction = on_rt;
    a.sa_flags = SA_SIGINFO;
    sigemptyset(&a.sa_mask);
    install(SIGRTMIN + 3, &a);

    memset(&a, 0, sizeof a);
    a.sa_handler = on_hup;
    a.sa_flags = SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
    sigfillset(&a.sa_mask);
    install(SIGHUP, &a);

    memset(&a, 0, sizeof a);
    a.sa_handler = SIG_IGN;
    sigemptyset(&a.sa_mask);
    install(SIGPIPE, &a);

    memset(&a, 0, sizeof a);
    a.sa_handler = SIG_DFL;
    sigemptyset(&a.sa_mask);
    install(SIGTERM, &a);

    sigemptyset(&blocked);
    sigaddset(&blocked, SIGUSR1);
    sigaddset(&blocked, SIGUSR2);
    sigaddset(&blocked, SIGALRM);
    sigaddset(&blocked, SIGRTMIN + 3);
    if (sigprocmask(SIG_SETMASK, &blocked, NULL) != 0)
        fail("sigprocmask: %s", strerror(errno));

    int list[NSIGS] = {SIGUSR1, SIGALRM, SIGUSR2, SIGRTMIN + 3, SIGHUP, SIGPIPE, SIGTERM};
    for (int i = 0; i < NSIGS; i++) {
        sigs[i] = list[i];
        memset(&snap[i], 0, sizeof snap[i]);
        if (sigaction(sigs[i], NULL, &snap[i]) != 0)
            fail("sigaction(%d, NULL): %s", sigs[i], strerror(errno));
    }
}

static int same_set(const sigset_t *a, const sigset_t *b, int *which)
{
    for (int s = 1; s <= 64; s++) {
        if (s == 32 || s == 33)
            continue; /* glibc's internal signals */
        if (sigismember(a, s) != sigismember(b, s)) {
            *which = s;
            return 0;
        }
    }
    return 1;
}

static void check_state(long k, const char *when)
{
    int which;
    for (int i = 0; i < NSIGS; i++) {
        struct sigaction cur;
        memset(&cur, 0, sizeof cur);
        if (sigaction(sigs[i], NULL, &cur) != 0)
            fail("sigaction(%d, NULL): %s", sigs[i], strerror(errno));
        if ((void *)cur.sa_sigaction != (void *)snap[i].sa_sigaction)
            fail("step %ld (%s): handler of signal %d changed: %p, was %p", k, when, sigs[i],
                 (void *)cur.sa_sigaction, (void *)snap[i].sa_sigaction);
        if (cur.sa_flags != snap[i].sa_flags)
            fail("step %ld (%s): flags of signal %d changed: %#x, were %#x", k, when, sigs[i],
                 (unsigned)cur.sa_flags, (unsigned)snap[i].sa_flags);
        if (!same_set(&cur.sa_mask, &snap[i].sa_mask, &which))
            fail("step %ld (%s): sa_mask of signal %d changed at signal %d", k, when, sigs[i],
                 which);
    }
    sigset_t cur;
    sigemptyset(&cur);
    if (sigprocmask(SIG_BLOCK, NULL, &cur) != 0)
        fail("sigprocmask(query): %s", strerror(errno));
    if (!same_set(&cur, &blocked, &which))
        fail("step %ld (%s): the blocked mask changed at signal %d (%s)", k, when, which,
             sigismember(&cur, which) ? "now blocked" : "now unblocked");
    sigset_t pend;
    sigemptyset(&pend);
    if (sigpending(&pend) != 0)
        fail("sigpending: %s", strerror(errno));
    int list[] = {SIGUSR1, SIGUSR2, SIGALRM, SIGRTMIN + 3, SIGHUP};
    for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)
        if (sigismember(&pend, list[i]))
            fail("step %ld (%s): signal %d is pending", k, when, list[i]);
    stack_t ss;
    memset(&ss, 0, sizeof ss);
    if (sigaltstack(NULL, &ss) != 0)
        fail("sigaltstack(query): %s", strerror(errno));
    if (ss.ss_sp != altstack.ss_sp || ss.ss_size != altstack.ss_size || ss.ss_flags != 0)
        fail("step %ld (%s): the alternate signal stack changed: sp=%p size=%zu flags=%d", k, when,
             ss.ss_sp, ss.ss_size, ss.ss_flags);
    if (usr2_count != 0 || hup_count != 0)
        fail("step %ld (%s): the SIGUSR2/SIGHUP handler ran (%d/%d times)", k, when,
             (int)usr2_count, (int)hup_count);
}

static int is_pending(int sig)
{
    sigset_t pend;
    sigemptyset(&pend);
    if (sigpending(&pend) != 0)
        fail("sigpending: %s", strerror(errno));
    return sigismember(&pend, sig);
}

static void unblock_one(int sig)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    if (sigprocmask(SIG_UNBLOCK, &s, NULL) != 0)
        fail("sigprocmask(SIG_UNBLOCK): %s", strerror(errno));
}

static void block_one(int sig)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    if (sigprocmask(SIG_BLOCK, &s, NULL) != 0)
        fail("sigprocmask(SIG_BLOCK): %s", strerror(errno));
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    setup();
    for (long k = 1; k <= steps; k++) {
        check_state(k, "start of step");

        /* SIGUSR1: raised while blocked, runs on the alternate stack when unblocked. */
        if (raise(SIGUSR1) != 0)
            fail("raise(SIGUSR1)");
        if (!is_pending(SIGUSR1) || usr1_count != k - 1)
            fail("step %ld: blocked SIGUSR1 not pending (count %d)", k, (int)usr1_count);
        unblock_one(SIGUSR1);
        if (usr1_count != k || usr1_on_altstack != k || usr1_bad_info != 0)
            fail("step %ld: SIGUSR1 handler: count %d, on alt stack %d, bad siginfo %d", k,
                 (int)usr1_count, (int)usr1_on_altstack, (int)usr1_bad_info);
        block_one(SIGUSR1);

        /* SIGALRM: SA_RESETHAND, so the disposition is SIG_DFL after one delivery; reinstalled. */
        if (raise(SIGALRM) != 0)
            fail("raise(SIGALRM)");
        if (!is_pending(SIGALRM) || alrm_count != k - 1)
            fail("step %ld: blocked SIGALRM not pending (count %d)", k, (int)alrm_count);
        unblock_one(SIGALRM);
        if (alrm_count != k)
            fail("step %ld: SIGALRM handler ran %d times", k, (int)alrm_count);
        struct sigaction cur;
        memset(&cur, 0, sizeof cur);
        sigaction(SIGALRM, NULL, &cur);
        if (cur.sa_handler != SIG_DFL)
            fail("step %ld: SA_RESETHAND did not reset SIGALRM to SIG_DFL (%p)", k,
                 (void *)cur.sa_sigaction);
        block_one(SIGALRM);
        install(SIGALRM, &alrm_act);

        /* A real-time signal queued twice with values: both delivered, in order. */
        for (int j = 0; j < 2; j++) {
            union sigval v = {.sival_int = (int)(2 * k - 1 + j)};
            int rc = pthread_sigqueue(pthread_self(), SIGRTMIN + 3, v);
            if (rc != 0)
                fail("pthread_sigqueue: %s", strerror(rc));
        }
        unblock_one(SIGRTMIN + 3);
        if (rt_count != 2 * k || rt_last_value != 2 * k || rt_bad)
            fail("step %ld: real-time handler count %d, last value %d, bad %d", k, (int)rt_count,
                 rt_last_value, (int)rt_bad);
        block_one(SIGRTMIN + 3);

        check_state(k, "end of step");
        step_line(k);
        struct timespec req = {0, 20 * 1000000L};
        nanosleep(&req, NULL); /* an interrupted sleep is simply shorter */
    }
    printf("DONE usr1=%d alrm=%d rt=%d usr2=%d\n", (int)usr1_count, (int)alrm_count, (int)rt_count,
           (int)usr2_count);
    return fflush(stdout) == 0 ? 0 : 1;
}
