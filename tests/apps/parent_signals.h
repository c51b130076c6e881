/* parent_signals.h — the child's side of share_signal.c and share_pending.c: a handler that
   counts its parent's signals, k-th one kill()ed when k is odd (SI_USER), sigqueue()d with value k
   when even (SI_QUEUE), each from getppid(), and keeps the first that is not. Include after
   ckpt_common.h. */
#ifndef PARENT_SIGNALS_H
#define PARENT_SIGNALS_H

#include <signal.h>

static volatile sig_atomic_t received, bad;
static volatile sig_atomic_t bad_code, bad_value, bad_pid;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    long k = received + 1;
    int want_code = k % 2 ? SI_USER : SI_QUEUE;
    if (!bad &&
        (si->si_code != want_code || (want_code == SI_QUEUE && si->si_value.sival_int != k) ||
         si->si_pid != getppid())) {
        bad = (sig_atomic_t)k;
        bad_code = si->si_code;
        bad_value = si->si_value.sival_int;
        bad_pid = si->si_pid;
    }
    received = (sig_atomic_t)k;
}

/* Fails the child when a signal so far was not as on_signal wants it. */
static inline void fail_if_bad(void)
{
    if (bad)
        fail("child: signal %d: si_code %d, value %d, si_pid %d (parent %d)", (int)bad,
             (int)bad_code, (int)bad_value, (int)bad_pid, (int)getppid());
}

#endif
