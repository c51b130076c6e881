/* ckpt_trigger.c — what starts a checkpoint: the checkpoint signal (from outside), a request from
 * the program (crac_checkpoint()) and the interval; the manager thread waits for them. */
#include "ckpt.h"

#include "crac_layout.h"
#include "crac_rawsys.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>

static volatile int32_t requested;       /* futex word the manager sleeps on */
static volatile int32_t exit_requested;

/* TLS-free: it may run on an upper thread with the upper fs live. */
static void on_checkpoint_signal(int sig)
{
    (void)sig;
    __atomic_store_n(&requested, 1, __ATOMIC_RELEASE);
    raw_syscall6(SYS_futex, (long)&requested, 129 /* FUTEX_WAKE_PRIVATE */, 1, 0, 0, 0);
}

void ckpt_request(int exit_after)
{
    if (exit_after)
        __atomic_store_n(&exit_requested, 1, __ATOMIC_RELEASE);
    on_checkpoint_signal(0);
}

/* The handler returns through our own restorer in the loader's fixed text, not the lower libc's:
 * a frame of it on a saved upper stack must stay valid after a restart (docs/DECISIONS.md). */
void crac_loader_restorer(void);
__asm__(".text\n"
        ".globl crac_loader_restorer\n"
        ".type crac_loader_restorer, @function\n"
        "crac_loader_restorer:\n"
        "    mov $15, %eax\n"
        "    syscall\n"
        "    hlt\n");

int ckpt_install_trigger(int signo)
{
    struct {
        uint64_t handler, flags, restorer, mask;
    } sa = {(uint64_t)on_checkpoint_signal, SA_RESTART | 0x04000000 /* SA_RESTORER */,
            (uint64_t)crac_loader_restorer, 1UL << (CRAC_SIG_SUSPEND - 1)};
    long r = raw_syscall4(SYS_rt_sigaction, signo, &sa, 0, 8);
    return r < 0 ? (int)r : 0;
}

void ckpt_serve(void)
{
    for (;;) {
        if (!__atomic_exchange_n(&requested, 0, __ATOMIC_ACQ_REL)) {
            struct timespec t = {ckpt_cfg.interval, 0};
            long r = raw_syscall6(SYS_futex, (long)&requested, 128 /* FUTEX_WAIT_PRIVATE */, 0,
                                  ckpt_cfg.interval > 0 ? (long)&t : 0, 0, 0);
            if (r == -ETIMEDOUT && ckpt_cfg.interval > 0)
                __atomic_store_n(&requested, 1, __ATOMIC_RELEASE);
            continue;
        }
        if (!ckpt_registry)
            continue; /* the upper runtime has not registered yet: nothing to checkpoint */
        int exit_after = __atomic_exchange_n(&exit_requested, 0, __ATOMIC_ACQ_REL) ||
                         ckpt_cfg.exit_after;
        ckpt_run(exit_after);
    }
}
