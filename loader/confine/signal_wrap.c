/* signal_wrap.c — every handler the program installs runs with the upper half's fs: the kernel
 * gets a lower-half wrapper that switches to the interrupted thread's upper fs when the signal
 * arrives inside a crossing, calls the program's handler, and switches back; outside one it jumps
 * to the handler (docs/ARCHITECTURE.md "Crossing").
 * TLS-free: runs with whichever fs was live; raw syscalls only, no errno, no libc. */
#include "signal_wrap.h"

#include "confine.h"
#include "fsgsbase.h"
#include "crac_layout.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"
#include "vdso_proxy.h"

#include "shadow_pool.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <ucontext.h>

#define ARCH_SET_FS 0x1002

/* The program's own actions, in a page at the top of W: it is upper memory, so a checkpoint saves
 * it and a restart brings it back at the same address, where the wrapper (whose address is fixed:
 * the loader is not PIE) finds it. It is created the first time a handler is wrapped. */
#define TABLE_ADDR (CRAC_W_END - CRAC_PAGE)

struct sigwrap_table {
    volatile int32_t lock;
    int32_t pad;
    struct crac_ksigaction app[65];
};

_Static_assert(sizeof(struct sigwrap_table) <= CRAC_PAGE, "the table fits in one page");

static struct sigwrap_table *table_get(void)
{
    long r = emu_mmap(TABLE_ADDR, CRAC_PAGE, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (r != (long)TABLE_ADDR && r != -EEXIST)
        return 0;
    return (struct sigwrap_table *)TABLE_ADDR;
}

/* fs:0 is the TCB's own address in glibc (both halves). */
static inline uint64_t current_fs(void)
{
    uint64_t self;
    __asm__ volatile("mov %%fs:0, %0" : "=r"(self));
    return self;
}

static inline void set_fs(uint64_t fs)
{
    if (crac_fsgsbase)
        __asm__ volatile("wrfsbase %0" : : "r"(fs) : "memory");
    else
        raw_syscall2(SYS_arch_prctl, ARCH_SET_FS, fs);
}

static inline int in_w(uint64_t a) { return a >= CRAC_W_START && a < CRAC_W_END; }

typedef void (*plain_handler)(int);
typedef void (*info_handler)(int, siginfo_t *, void *);

/* What the kernel runs (sigwrap_entry, below) asks this first: the program's handler to jump to
 * with the kernel's signal frame as it is, or 0 when there is nothing more to do (the signal is
 * passed on or ignored, or it came inside a crossing and the handler ran here). */
__attribute__((used)) uint64_t crac_sigwrap_prepare(int sig, siginfo_t *info, void *uc)
{
    struct sigwrap_table *t = (struct sigwrap_table *)TABLE_ADDR;
    struct crac_ksigaction act = t->app[sig];
    uint64_t cur = current_fs(), upper = 0;
    if (!in_w(cur)) {
        upper = shadow_pool_owner(cur, (int32_t)raw_syscall0(SYS_gettid));
        if (!upper) {
            /* A lower-half thread outside any crossing got a process-directed signal: the
             * program's handler cannot run here. Block the signal in this thread from now on
             * (the mask restored at sigreturn) and queue it to the process again, so that the
             * kernel gives it to a thread of the program. */
            ((ucontext_t *)uc)->uc_sigmask.__val[0] |= 1UL << (sig - 1);
            long pid = raw_syscall0(SYS_getpid);
            /* The kernel refuses a siginfo with si_code >= 0 from a thread that is not the
             * leader: then the signal goes again as a plain kill (si_code SI_USER). */
            if (raw_syscall3(SYS_rt_sigqueueinfo, pid, sig, info) != 0)
                raw_syscall2(SYS_kill, pid, sig);
            return 0;
        }
    }
    /* After a restart the program knows its own pid, and those of its tree's processes, as they
     * were at its first launch: the sender of a signal a process sent (the codes whose si_pid is
     * one: a timer's or SIGIO's fields lie there instead), and the child a SIGCHLD tells of, are
     * named by those ids (a restarted child's parent compared si_pid with getppid()). */
    siginfo_pid_to_program(crac_ctrl(), info);
    if (act.flags & SA_RESETHAND) /* the kernel reset it to SIG_DFL on delivery */
        t->app[sig].handler = (uint64_t)SIG_DFL;
    if (act.handler == (uint64_t)SIG_DFL || act.handler == (uint64_t)SIG_IGN)
        return 0; /* changed while this signal was on its way */
    if (upper)
        set_fs(upper);
    else /* the program's code, maybe inside the real vDSO: resume from the stub instead */
        vdso_proxy_rollback(uc);
    /* Held off until here (sigwrap_rt_sigaction): pending with this signal, the checkpoint's
     * suspend signal was delivered at this handler's first instruction, and the thread was
     * saved with this frame still inside the real vDSO, which the restart does not have. */
    uint64_t suspend = 1UL << (CRAC_SIG_SUSPEND - 1);
    raw_syscall4(SYS_rt_sigprocmask, SIG_UNBLOCK, (long)&suspend, 0, 8);
    if (!upper)
        return act.handler;
    /* Inside a crossing the lower fs must come back after the handler: it is called from here. */
    if (act.flags & SA_SIGINFO)
        ((info_handler)act.handler)(sig, info, uc);
    else
        ((plain_handler)act.handler)(sig);
    set_fs(cur);
    return 0;
}

/* The handler the kernel runs for every program handler. The program's is jumped to, not called,
 * so that its return address is the signal frame's restorer (glibc's): an unwinder walking up
 * from the handler (pthread_cancel's forced unwind running C++ destructors, backtrace() in a
 * crash handler) crosses the signal frame into the interrupted code, as without crac, instead of
 * stopping at a frame of the loader it knows nothing of. Entered with rsp 8 mod 16 (as after a
 * call): the three pushes leave it aligned for the call. */
void sigwrap_entry(int sig, siginfo_t *info, void *uc);
__asm__(".text\n"
        ".type sigwrap_entry, @function\n"
        "sigwrap_entry:\n"
        "    push %rdi\n"
        "    push %rsi\n"
        "    push %rdx\n"
        "    call crac_sigwrap_prepare\n"
        "    pop %rdx\n"
        "    pop %rsi\n"
        "    pop %rdi\n"
        "    test %rax, %rax\n"
        "    jz 1f\n"
        "    jmp *%rax\n"
        "1:  ret\n"
        ".size sigwrap_entry, .-sigwrap_entry\n");

static int is_function(uint64_t handler)
{
    return handler != (uint64_t)SIG_DFL && handler != (uint64_t)SIG_IGN;
}

long sigwrap_rt_sigaction(long sig, const struct crac_ksigaction *act, struct crac_ksigaction *oact)
{
    struct sigwrap_table *t = 0;
    struct crac_ksigaction wrapped, old;
    const struct crac_ksigaction *pass = act;
    if (act && is_function(act->handler) && (t = table_get())) {
        wrapped = *act;
        wrapped.handler = (uint64_t)sigwrap_entry;
        wrapped.flags |= SA_SIGINFO;
        wrapped.mask |= 1UL << (CRAC_SIG_SUSPEND - 1); /* unblocked by the wrapper */
        pass = &wrapped;
    }
    int wrapping = pass != act;
    if (!wrapping)
        t = (struct sigwrap_table *)TABLE_ADDR; /* touched below only if a wrapper was live */
    else
        raw_lock(&t->lock);
    long r = raw_syscall4(SYS_rt_sigaction, sig, pass, &old, 8);
    int was_wrapped = r == 0 && old.handler == (uint64_t)sigwrap_entry;
    if (was_wrapped && !wrapping)
        raw_lock(&t->lock);
    if (r == 0 && oact)
        *oact = was_wrapped ? t->app[sig] : old;
    /* A vfork child (posix_spawn) shares this memory: only the owner process records. */
    if (r == 0 && wrapping && (int32_t)raw_syscall0(SYS_getpid) == crac_ctrl()->pid)
        t->app[sig] = *act;
    if (wrapping || was_wrapped)
        raw_unlock(&t->lock);
    return r;
}

/* Bytes of the syscall instruction, as read at an interrupted rip. */
#define SYSCALL_INSN 0x050f

/* The checkpoint signal's number from another crac process's program, recorded in W and passed on
 * to this thread as CRAC_SIG_SUSPEND (loader/ckpt/ckpt_sig_pass.c): the program's handler runs here,
 * with the upper fs, as the kernel would have run it. The carrier has SA_RESTART; a handler
 * without it gets the EINTR the kernel would have given the program's own interrupted syscall. */
void sigwrap_deliver_peer_signal(void *info, void *ucv)
{
    (void)info; /* what was sent is in the record */
    ucontext_t *uc = ucv;
    struct crac_ctrl *c = crac_ctrl();
    int sig = c->ckpt_sig;
    uint64_t bit = 1UL << (sig - 1);
    int32_t tid = (int32_t)raw_syscall0(SYS_gettid);
    uint64_t cur = current_fs(), upper = 0;
    if (!in_w(cur))
        upper = shadow_pool_owner(cur, tid);
    if ((vmask_get(c, tid) & bit) || (!in_w(cur) && !upper)) {
        /* Blocked in the program's view since the manager chose this thread, or not one of
         * the program's threads: pending, given when the program unblocks it. */
        __atomic_or_fetch(&c->virt_pending, bit, __ATOMIC_ACQ_REL);
        return;
    }
    siginfo_t si;
    if (!peer_sig_take(c, &si))
        return; /* taken meanwhile (an unblock, a sigwaitinfo): nothing waits */
    greg_t *g = uc->uc_mcontext.gregs;
    if (upper) {
        set_fs(upper);
    } else {
        vdso_proxy_rollback(uc);
        uint64_t rip = (uint64_t)g[REG_RIP];
        if (!(c->virt_act[sig].flags & SA_RESTART) && in_w(rip) &&
            *(const uint16_t *)rip == SYSCALL_INSN) {
            g[REG_RAX] = -EINTR; /* the kernel had set it up to run again */
            g[REG_RIP] = (greg_t)(rip + 2);
        }
    }
    confine_run_ckpt_handler(uc, &si);
    if (upper)
        set_fs(cur);
}
