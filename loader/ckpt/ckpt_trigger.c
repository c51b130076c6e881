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
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile int32_t requested; /* futex word the manager sleeps on */
/* The manager took a request whose checkpoint does not hold the threads yet. */
static volatile int32_t starting;
/* Futex: who may act on the checkpoint signal: the waiter while it takes one, an exec while it
 * replaces the process (no signal is taken then: it stays pending for the exec'd loader). */
enum { TAKE_IDLE, TAKE_TAKING, TAKE_EXEC };
static volatile int32_t take_state;
/* A coordinated process's: a request not yet sent to the coordinator (coord_serve). */
static volatile int32_t unsent;
static int waited_signo; /* the checkpoint signal the waiter takes (0: none) */
/* Its signalfd, kept across a tree fork: it reads the reading process's signals (-1: none). */
static int signal_fd = -1;
static volatile int32_t exit_requested;
static volatile int32_t config_ready;  /* futex: main has filled ckpt_cfg */
static volatile int32_t program_ready; /* futex: the program's threads can be checkpointed */
static int wake_fd = -1;           /* eventfd: wakes the manager while it polls the coordinator */
static volatile int32_t solo_gate; /* enum ckpt_solo_gate (ckpt.h) */

/* Only a safety net: the signal is blocked everywhere and waited for (ckpt_wait_signal), but a
 * thread that ever unblocked it must start a checkpoint, not die of the default action.
 * TLS-free: it may run on an upper thread with the upper fs live. */
static void on_checkpoint_signal(int sig)
{
    (void)sig;
    __atomic_store_n(&requested, 1, __ATOMIC_SEQ_CST);
    raw_futex_wake(&requested, 1);
    if (wake_fd >= 0) {
        __atomic_store_n(&unsent, 1, __ATOMIC_SEQ_CST);
        uint64_t one = 1;
        raw_syscall3(SYS_write, wake_fd, &one, 8);
    }
}

void ckpt_config_done(void)
{
    if (ckpt_cfg.coord_fd >= 0) {
        lower_fds_hold(); /* the program's close_range spares it once adopted, not before */
        int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        wake_fd = fd >= 0 ? lower_fd_adopt(fd) : -1;
        lower_fds_release();
        /* A request taken before there was a coordinator to send it to (a signal left pending
         * across an exec, taken at once by the exec'd loader) goes to it now. */
        if (wake_fd >= 0 && __atomic_load_n(&requested, __ATOMIC_SEQ_CST))
            on_checkpoint_signal(0);
    }
    __atomic_store_n(&config_ready, 1, __ATOMIC_RELEASE);
    raw_futex_wake(&config_ready, RAW_WAKE_ALL);
}

void ckpt_trigger_after_fork(void)
{
    /* The requests were the parent's; the eventfd is shared with it (ckpt_config_done makes
     * the child's own). */
    __atomic_store_n(&requested, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&exit_requested, 0, __ATOMIC_RELEASE);
    /* The parent's threads' too: its waiter may have been taking a signal at the fork. */
    __atomic_store_n(&starting, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&unsent, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&take_state, TAKE_IDLE, __ATOMIC_SEQ_CST);
    __atomic_store_n(&solo_gate, CKPT_GATE_FREE, __ATOMIC_SEQ_CST); /* the parent's manager's */
    if (wake_fd >= 0)
        close(wake_fd);
    wake_fd = -1;
}

int ckpt_solo_gate_try(enum ckpt_solo_gate who)
{
    int32_t free_ = CKPT_GATE_FREE;
    return __atomic_compare_exchange_n(&solo_gate, &free_, (int32_t)who, 0, __ATOMIC_SEQ_CST,
                                       __ATOMIC_SEQ_CST);
}

void ckpt_solo_gate_wait_free(void)
{
    int32_t v;
    while ((v = __atomic_load_n(&solo_gate, __ATOMIC_SEQ_CST)) != CKPT_GATE_FREE)
        raw_futex_wait(&solo_gate, v, NULL);
}

void ckpt_solo_gate_wait_free_ms(int ms)
{
    int32_t v = __atomic_load_n(&solo_gate, __ATOMIC_SEQ_CST);
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    if (v != CKPT_GATE_FREE)
        raw_futex_wait(&solo_gate, v, &t);
}

void ckpt_solo_gate_leave(enum ckpt_solo_gate who)
{
    int32_t held = (int32_t)who;
    if (__atomic_compare_exchange_n(&solo_gate, &held, CKPT_GATE_FREE, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
        raw_futex_wake(&solo_gate, RAW_WAKE_ALL);
}

void ckpt_manager_wake(void) { raw_futex_wake(&requested, 1); }

void ckpt_set_ready(void)
{
    __atomic_store_n(&program_ready, 1, __ATOMIC_RELEASE);
    raw_futex_wake(&program_ready, RAW_WAKE_ALL);
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
        raw_futex_wait(&program_ready, 0, &t);
    }
    return 1;
}

void ckpt_block_signal(int signo)
{
    uint64_t set = 1UL << (signo - 1);
    raw_syscall4(SYS_rt_sigprocmask, SIG_BLOCK, &set, 0, 8);
}

/* Waits until take_state goes from TAKE_IDLE to TO. */
static void take_state_enter(int32_t to)
{
    for (;;) {
        int32_t idle = TAKE_IDLE;
        if (__atomic_compare_exchange_n(&take_state, &idle, to, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return;
        raw_futex_wait(&take_state, idle, NULL);
    }
}

static void take_state_leave(void)
{
    __atomic_store_n(&take_state, TAKE_IDLE, __ATOMIC_SEQ_CST);
    raw_futex_wake(&take_state, RAW_WAKE_ALL);
}

/* A signalfd for SET among the lower half's descriptors (lower_fds.h), or -1. Made while the
 * program's close_range is held back: one in a loop (Python's children, before their exec)
 * closed it at its first, low number before it was moved up, and no signal was taken again. */
static int adopted_signalfd(const sigset_t *set)
{
    for (int tries = 0; tries < 8; tries++) {
        lower_fds_hold();
        int fd = signalfd(-1, set, SFD_CLOEXEC | SFD_NONBLOCK);
        int high = fd >= 0 ? lower_fd_adopt(fd) : -1;
        lower_fds_release();
        if (high < 0)
            return -1;
        /* A plain close() of the low number is not held back: look at what we hold. */
        char link[64], path[32];
        snprintf(path, sizeof(path), "/proc/self/fd/%d", high);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n > 0 && (link[n] = '\0', strcmp(link, "anon_inode:[signalfd]") == 0))
            return high;
        lower_fd_forget(high);
    }
    return -1;
}

/* The signal is taken in two steps, through a signalfd: poll says one is pending, then it is
 * read (taken) only in TAKE_TAKING. sigwaitinfo took it in one step, so an exec could replace
 * the process between the kernel's giving it and the request it was to make: the checkpoint
 * was lost. */
void ckpt_wait_signal(int signo)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    if (signal_fd < 0)
        signal_fd = adopted_signalfd(&set);
    waited_signo = signo;
    for (;;) {
        if (signal_fd < 0) { /* no signalfd: taken in one step, as before */
            siginfo_t info;
            if (sigwaitinfo(&set, &info) == signo &&
                !ckpt_sig_pass(&(struct signalfd_siginfo){
                    .ssi_code = info.si_code,
                    .ssi_errno = info.si_errno,
                    .ssi_pid = (uint32_t)info.si_pid,
                    .ssi_uid = info.si_uid,
                    .ssi_int = info.si_value.sival_int,
                    .ssi_ptr = (uintptr_t)info.si_value.sival_ptr,
                }))
                ckpt_request(0);
            continue;
        }
        struct pollfd p = {signal_fd, POLLIN, 0};
        if (poll(&p, 1, -1) <= 0)
            continue;
        if (p.revents & POLLNVAL) {
            signal_fd = -1; /* closed under us after all */
            continue;
        }
        take_state_enter(TAKE_TAKING);
        struct signalfd_siginfo si;
        if (read(signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si) && !ckpt_sig_pass(&si))
            ckpt_request(0);
        take_state_leave();
    }
}

/* A program's signal from another crac process is either still in the kernel's queue or in the
 * record in W (ckpt_sig_pass.c), never in between, while the image is taken: the waiter, between
 * reading one and recording it, would leave it in neither, and a restart would never see it.
 * Taken after the suspension (no thread is in an exec's section then, ckpt_exec_begin). */
void ckpt_signals_hold(void)
{
    take_state_enter(TAKE_TAKING);
    struct signalfd_siginfo si;
    if (signal_fd >= 0) /* those already here go into the record, as the waiter would take them */
        while (read(signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            if (!ckpt_sig_pass(&si))
                ckpt_request(0);
}

void ckpt_signals_release(void) { take_state_leave(); }

/* Called in the exec's section (tree_exec.c), so no checkpoint can come to hold the threads
 * before the exec, and from here on no signal is taken: what was asked for is in `requested`
 * and `starting` (or, coordinated, `unsent`). A request still to be served is made pending
 * again (blocked in every thread, it stays so across the exec and the exec'd loader takes it).
 * A coordinated process's request, once sent, is its coordinator's, which has the exec'd
 * loader take the process's place in the checkpoint (docs/PROTOCOL.md). */
uint64_t ckpt_exec_begin(void)
{
    take_state_enter(TAKE_EXEC);
    if (!waited_signo)
        return 0;
    int outstanding = ckpt_cfg.coord_fd >= 0 ? __atomic_load_n(&unsent, __ATOMIC_SEQ_CST)
                                             : __atomic_load_n(&requested, __ATOMIC_SEQ_CST) ||
                                                   __atomic_load_n(&starting, __ATOMIC_SEQ_CST);
    if (outstanding)
        kill(getpid(), waited_signo);
    return 1UL << (waited_signo - 1);
}

void ckpt_exec_end(void) { take_state_leave(); }

void ckpt_request_committed(void) { __atomic_store_n(&starting, 0, __ATOMIC_SEQ_CST); }

void ckpt_request_sent(void) { __atomic_store_n(&unsent, 0, __ATOMIC_SEQ_CST); }

/* Pending ones too: a scheduler signals every process of the job at once, one process's request
 * starts the checkpoint, and another's waiter, slow under load, may not have taken its signal
 * before that process's part was over; its request would start a second checkpoint. The
 * coordinator no longer guesses such duplicates from the time a request arrives
 * (docs/DECISIONS.md "A checkpoint request is dropped where it was taken"). */
void ckpt_drop_requests_during(int wake_fd)
{
    take_state_enter(TAKE_TAKING); /* the waiter is not between reading one and recording it */
    struct signalfd_siginfo si;
    if (signal_fd >= 0)
        while (read(signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            ckpt_sig_pass(&si); /* a program's signal is passed on all the same */
    uint64_t stale;
    while (read(wake_fd, &stale, sizeof(stale)) > 0)
        ;
    __atomic_store_n(&unsent, 0, __ATOMIC_SEQ_CST);
    take_state_leave();
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
        raw_futex_wait(&config_ready, 0, NULL);
    for (;;) {
        if (ckpt_cfg.coord_fd >= 0 && wake_fd >= 0) {
            coord_serve(ckpt_cfg.coord_fd, wake_fd);
            __atomic_store_n(&requested, 0, __ATOMIC_RELEASE);
            continue;
        }
        if (!__atomic_load_n(&requested, __ATOMIC_SEQ_CST)) {
            struct timespec t = {ckpt_cfg.interval, 0};
            long r = raw_futex_wait(&requested, 0, ckpt_cfg.interval > 0 ? &t : NULL);
            if (r == -ETIMEDOUT && ckpt_cfg.interval > 0)
                __atomic_store_n(&requested, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        /* A first fork is starting the job's coordinator: the request stays, and goes to the
         * coordinator once there (ckpt_config_done), or is taken here if it did not start. */
        if (!ckpt_solo_gate_try(CKPT_GATE_SOLO)) {
            ckpt_solo_gate_wait_free();
            continue;
        }
        /* Taken: `starting` says so before `requested` stops saying it (ckpt_exec_begin). */
        __atomic_store_n(&starting, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&requested, 0, __ATOMIC_SEQ_CST);
        if (!__atomic_load_n(&program_ready, __ATOMIC_ACQUIRE)) {
            /* The program has not started (or its threads are not back) yet: keep the request
             * and take it as soon as it can be. */
            __atomic_store_n(&requested, 1, __ATOMIC_SEQ_CST);
            __atomic_store_n(&starting, 0, __ATOMIC_SEQ_CST);
            ckpt_solo_gate_leave(CKPT_GATE_SOLO);
            ckpt_wait_ready(1000);
            continue;
        }
        int exit_after =
            __atomic_exchange_n(&exit_requested, 0, __ATOMIC_ACQ_REL) || ckpt_cfg.exit_after;
        ckpt_run(exit_after, NULL); /* leaves the gate once the program runs again */
        ckpt_solo_gate_leave(CKPT_GATE_SOLO);
        __atomic_store_n(&starting, 0, __ATOMIC_SEQ_CST);
    }
}
