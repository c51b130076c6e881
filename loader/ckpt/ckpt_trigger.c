/* ckpt_trigger.c — what starts a checkpoint: the checkpoint signal (from outside), a request from
 * the program (crac_checkpoint()) and the interval; the manager thread waits for them. */

/* The checkpoint signal is blocked in every thread from crac's first instruction (the `crac`
 * command's entry point; it stays blocked across its execs, and main() blocks it again): one
 * arriving early stays pending, never fatal, and a lower thread takes it with sigwaitinfo
 * (docs/DECISIONS.md). A request made before
 * the program can be checkpointed is kept until ckpt_set_ready(). */
#include "ckpt.h"

#include "crac_layout.h"
#include "coord_client.h"
#include "crac_rawsys.h"

#include "lower_fds.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int32_t requested; /* futex word the manager sleeps on */
static volatile int32_t exit_requested;
static volatile int32_t config_ready;  /* futex: main has filled ckpt_cfg */
static volatile int32_t program_ready; /* futex: the program's threads can be checkpointed */
static int wake_fd = -1; /* eventfd: wakes the manager while it polls the coordinator */

/* Only a safety net: the signal is blocked everywhere and waited for (ckpt_wait_signal), but a
 * thread that ever unblocked it must start a checkpoint, not die of the default action.
 * TLS-free: it may run on an upper thread with the upper fs live. */
static void on_checkpoint_signal(int sig)
{
    (void)sig;
    __atomic_store_n(&requested, 1, __ATOMIC_RELEASE);
    raw_syscall6(SYS_futex, (long)&requested, 129 /* FUTEX_WAKE_PRIVATE */, 1, 0, 0, 0);
    if (wake_fd >= 0) {
        uint64_t one = 1;
        raw_syscall3(SYS_write, wake_fd, &one, 8);
    }
}

void ckpt_config_done(void)
{
    if (ckpt_cfg.coord_fd >= 0) {
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        wake_fd = fd >= 0 ? lower_fd_adopt(fd) : -1;
    }
    __atomic_store_n(&config_ready, 1, __ATOMIC_RELEASE);
    raw_syscall6(SYS_futex, (long)&config_ready, 129, 0x7fffffff, 0, 0, 0);
}

void ckpt_trigger_after_fork(void)
{
    /* The requests were the parent's; the eventfd is shared with it (ckpt_config_done makes
     * the child's own). */
    __atomic_store_n(&requested, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&exit_requested, 0, __ATOMIC_RELEASE);
    if (wake_fd >= 0)
        close(wake_fd);
    wake_fd = -1;
}

void ckpt_manager_wake(void)
{
    raw_syscall6(SYS_futex, (long)&requested, 129 /* FUTEX_WAKE_PRIVATE */, 1, 0, 0, 0);
}

void ckpt_set_ready(void)
{
    __atomic_store_n(&program_ready, 1, __ATOMIC_RELEASE);
    raw_syscall6(SYS_futex, (long)&program_ready, 129, 0x7fffffff, 0, 0, 0);
}

int ckpt_wait_ready(int timeout_ms)
{
    struct timespec now, end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += timeout_ms / 1000;
    end.tv_nsec += (timeout_ms % 1000) * 1000000L;
    while (!__atomic_load_n(&program_ready, __ATOMIC_ACQUIRE)) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long left_ms = (end.tv_sec - now.tv_sec) * 1000 + (end.tv_nsec - now.tv_nsec) / 1000000;
        if (left_ms <= 0)
            return 0;
        struct timespec t = {left_ms / 1000, (left_ms % 1000) * 1000000L};
        raw_syscall6(SYS_futex, (long)&program_ready, 128, 0, (long)&t, 0, 0);
    }
    return 1;
}

void ckpt_block_signal(int signo)
{
    uint64_t set = 1UL << (signo - 1);
    raw_syscall4(SYS_rt_sigprocmask, SIG_BLOCK, &set, 0, 8);
}

void ckpt_wait_signal(int signo)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    for (;;)
        if (sigwaitinfo(&set, NULL) == signo)
            ckpt_request(0);
}

void ckpt_request(int exit_after)
{
    if (exit_after)
        __atomic_store_n(&exit_requested, 1, __ATOMIC_RELEASE);
    on_checkpoint_signal(0);
}

/* The handler returns through our own restorer in the loader's fixed text (restorer.c). */
void crac_loader_restorer(void);

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
    while (!__atomic_load_n(&config_ready, __ATOMIC_ACQUIRE))
        raw_syscall6(SYS_futex, (long)&config_ready, 128, 0, 0, 0, 0);
    for (;;) {
        if (ckpt_cfg.coord_fd >= 0 && wake_fd >= 0) {
            coord_serve(ckpt_cfg.coord_fd, wake_fd);
            __atomic_store_n(&requested, 0, __ATOMIC_RELEASE);
            continue;
        }
        if (!__atomic_exchange_n(&requested, 0, __ATOMIC_ACQ_REL)) {
            struct timespec t = {ckpt_cfg.interval, 0};
            long r = raw_syscall6(SYS_futex, (long)&requested, 128 /* FUTEX_WAIT_PRIVATE */, 0,
                                  ckpt_cfg.interval > 0 ? (long)&t : 0, 0, 0);
            if (r == -ETIMEDOUT && ckpt_cfg.interval > 0)
                __atomic_store_n(&requested, 1, __ATOMIC_RELEASE);
            continue;
        }
        if (!__atomic_load_n(&program_ready, __ATOMIC_ACQUIRE)) {
            /* The program has not started (or its threads are not back) yet: keep the request
             * and take it as soon as it can be. */
            __atomic_store_n(&requested, 1, __ATOMIC_RELEASE);
            ckpt_wait_ready(1000);
            continue;
        }
        int exit_after =
            __atomic_exchange_n(&exit_requested, 0, __ATOMIC_ACQ_REL) || ckpt_cfg.exit_after;
        ckpt_run(exit_after, NULL);
    }
}
