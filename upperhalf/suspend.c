/* suspend.c — where upper threads park during a checkpoint: the suspend-signal handler, its
 * resume point (a setjmp-like save) and the sigreturn restorer, all upper-half code, so every
 * return address on a saved stack stays valid whatever lower half a restart brings (docs/ARCHITECTURE.md "Checkpoint").
 * TLS-free: the handler may interrupt anything, libc included; raw syscalls only. */
#include "upper_runtime.h"

#include "crac_layout.h"

#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>

struct crac_registry crac_registry;

/* Saves callee-saved registers, the caller's rsp and return address; returns 0. A restart
 * resumes a thread by restoring them with eax = 1, so it returns twice. */
__attribute__((returns_twice)) int crac_park_save(struct crac_jmp *jmp);
__asm__(".text\n"
        ".globl crac_park_save\n"
        ".hidden crac_park_save\n"
        ".type crac_park_save, @function\n"
        "crac_park_save:\n"
        "    mov %rbx, 0(%rdi)\n"
        "    mov %rbp, 8(%rdi)\n"
        "    mov %r12, 16(%rdi)\n"
        "    mov %r13, 24(%rdi)\n"
        "    mov %r14, 32(%rdi)\n"
        "    mov %r15, 40(%rdi)\n"
        "    lea 8(%rsp), %rdx\n"
        "    mov %rdx, 48(%rdi)\n"
        "    mov (%rsp), %rdx\n"
        "    mov %rdx, 56(%rdi)\n"
        "    xor %eax, %eax\n"
        "    ret\n"
        ".size crac_park_save, .-crac_park_save\n");

/* The sa_restorer of the suspend handler: a signal frame returns here, in the upper half. */
void crac_sigreturn_restorer(void);
__asm__(".text\n"
        ".globl crac_sigreturn_restorer\n"
        ".hidden crac_sigreturn_restorer\n"
        ".type crac_sigreturn_restorer, @function\n"
        "crac_sigreturn_restorer:\n"
        "    mov $15, %eax\n"
        "    syscall\n"
        "    hlt\n"
        ".size crac_sigreturn_restorer, .-crac_sigreturn_restorer\n");

static long raw_syscall4(long nr, long a, long b, long c, long d)
{
    long ret;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
}

static struct crac_thread_rec *claim_slot(void)
{
    for (int i = 0; i < CRAC_MAX_THREADS; i++) {
        struct crac_thread_rec *rec = &crac_registry.threads[i];
        if (__sync_bool_compare_and_swap(&rec->state, CRAC_SLOT_FREE, CRAC_SLOT_PARKED))
            return rec;
    }
    return 0;
}

/* Runs on each upper thread, signalled by the manager once no thread is in the lower half.
 * Raw syscalls only: it may have interrupted anything, libc included. */
static void suspend_handler(int sig, siginfo_t *info, void *uc)
{
    (void)sig;
    if (crac_peer_sig_marked(info->si_code, info->si_errno)) {
        crac_upper.api->deliver_peer_signal(info, uc); /* not a suspension: the program's signal */
        return;
    }
    struct crac_registry *r = &crac_registry;
    volatile int32_t gen = __atomic_load_n(&r->release_gen, __ATOMIC_ACQUIRE);
    /* Before parking, not after the resume point: a restored thread gets its signals from the
     * restart (loader/state/pending.c). */
    suspend_note_pending();
    struct crac_thread_rec *rec = claim_slot();
    if (!rec)
        return; /* more than CRAC_MAX_THREADS threads: the manager times out and says so */
    rec->tid = (int32_t)raw_syscall4(SYS_gettid, 0, 0, 0, 0);
    __asm__ volatile("mov %%fs:0, %0" : "=r"(rec->fsbase));
    rec->ucontext = (uint64_t)uc;
    stack_t ss;
    raw_syscall4(SYS_sigaltstack, 0, (long)&ss, 0, 0);
    rec->altstack_sp = (uint64_t)ss.ss_sp;
    rec->altstack_size = ss.ss_size;
    rec->altstack_flags = ss.ss_flags;
    crac_park_save(&rec->park); /* a restored thread comes back here */
    __atomic_add_fetch(&r->parked, 1, __ATOMIC_SEQ_CST);
    raw_syscall4(SYS_futex, (long)&r->parked, 129 /* FUTEX_WAKE_PRIVATE */, 1, 0);
    while (__atomic_load_n(&r->release_gen, __ATOMIC_ACQUIRE) == gen)
        raw_syscall4(SYS_futex, (long)&r->release_gen, 128 /* FUTEX_WAIT_PRIVATE */, gen, 0);
    __atomic_store_n(&rec->state, CRAC_SLOT_FREE, __ATOMIC_RELEASE);
}

void suspend_register(void)
{
    crac_registry.suspend_handler = (uint64_t)suspend_handler;
    crac_registry.restorer = (uint64_t)crac_sigreturn_restorer;
    crac_registry.features |= CRAC_UPPER_PEER_SIGNAL;
}
