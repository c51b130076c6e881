/* confine_seccomp.c — records the seccomp filters and per-thread prctl settings the program makes
 * (trapped from W by confine_filter.c), then makes the real call; re-applies a thread's at restart.
 * TLS-free: runs in the SIGSYS handler or with the upper fs live; raw syscalls only, no errno. */
#include "confine_seccomp.h"

#include "confine.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

struct seccomp_table seccomp_table;
struct seccomp_resume_plan *seccomp_plans;
int seccomp_n_plans;
volatile int32_t seccomp_gate;
int seccomp_gate_used;

static int32_t my_tid(void)
{
    return vid_from_real(crac_ctrl(), (int32_t)raw_syscall0(SYS_gettid));
}

/* The handler cannot malloc from the lower libc: each program is copied into pages of its own. */
static unsigned long insn_bytes_mapped(uint32_t n)
{
    return ((unsigned long)n * sizeof(struct sock_filter) + 4095) & ~4095UL;
}

long emu_seccomp(long op, long flags, long uargs)
{
    /* Strict mode and the queries are passed through: a strict thread cannot be parked at all
     * (docs/TRUST.md), the queries change nothing. */
    if (op != SECCOMP_SET_MODE_FILTER)
        return raw_syscall3(SYS_seccomp, op, flags, uargs);
    struct sock_fprog fp;
    if (confine_from_user(&fp, (const void *)uargs, sizeof(fp)) != 0)
        return -EFAULT;
    if (fp.len == 0 || fp.len > SECCOMP_MAX_INSNS) /* the kernel's EINVAL, not ours */
        return raw_syscall3(SYS_seccomp, op, flags, uargs);
    unsigned long bytes = (unsigned long)fp.len * sizeof(struct sock_filter);
    long m = raw_syscall6(SYS_mmap, 0, (long)insn_bytes_mapped(fp.len), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw_is_err(m))
        return m;
    if (confine_from_user((void *)m, fp.filter, bytes) != 0) {
        raw_syscall2(SYS_munmap, m, insn_bytes_mapped(fp.len));
        return -EFAULT;
    }
    /* The copy is what is installed: what crac saves is exactly what the kernel checked. */
    struct sock_fprog local = {fp.len, (struct sock_filter *)m};
    long r = raw_syscall3(SYS_seccomp, op, flags, (long)&local);
    /* With TSYNC a positive result is the thread that could not be synchronized (nothing was
     * installed); with NEW_LISTENER it is the notification fd. */
    int installed = r == 0 || (r > 0 && (flags & SECCOMP_FILTER_FLAG_NEW_LISTENER));
    if (!installed) {
        raw_syscall2(SYS_munmap, m, insn_bytes_mapped(fp.len));
        return r;
    }
    struct seccomp_table *t = &seccomp_table;
    raw_lock(&t->lock);
    if (t->n_filters < SECCOMP_MAX_FILTERS) {
        t->filters[t->n_filters++] =
            (struct seccomp_filter_entry){(uint32_t)flags, fp.len, my_tid(), (const void *)m};
        m = 0;
    } else {
        t->lost++;
    }
    raw_unlock(&t->lock);
    if (m)
        raw_syscall2(SYS_munmap, m, insn_bytes_mapped(fp.len));
    return r;
}

long emu_prctl(long option, long a2, long a3, long a4, long a5)
{
    if (option == PR_SET_SECCOMP && a2 == SECCOMP_MODE_FILTER)
        return emu_seccomp(SECCOMP_SET_MODE_FILTER, 0, a3);
    long r = raw_syscall6(SYS_prctl, option, a2, a3, a4, a5, 0);
    if (r != 0 || option != PR_SET_PDEATHSIG)
        return r;
    /* Per thread, and not readable from another one: kept by the thread's id. */
    struct seccomp_table *t = &seccomp_table;
    int32_t tid = my_tid();
    raw_lock(&t->lock);
    int i = 0;
    while (i < t->n_threads && t->threads[i].tid != tid)
        i++;
    if (i < SECCOMP_MAX_THREADS) {
        t->threads[i] = (struct seccomp_thread_entry){tid, (int32_t)a2};
        if (i == t->n_threads)
            t->n_threads++;
    }
    raw_unlock(&t->lock);
    return r;
}

static void say_and_exit(const char *msg, unsigned long len)
{
    raw_syscall3(SYS_write, 2, msg, len);
    raw_syscall1(SYS_exit_group, 2);
}

void seccomp_thread_resume(int32_t tid)
{
    if (!seccomp_gate_used)
        return;
    /* The filters all threads share are installed first, with TSYNC, by the main thread once
     * crac's own restore work is done (seccomp_state.c); a thread's own ones go on top. */
    while (!__atomic_load_n(&seccomp_gate, __ATOMIC_ACQUIRE))
        raw_futex_wait(&seccomp_gate, 0, NULL);
    for (int p = 0; p < seccomp_n_plans; p++) {
        const struct seccomp_resume_plan *plan = &seccomp_plans[p];
        if (plan->tid != tid)
            continue;
        if (plan->pdeathsig)
            raw_syscall2(SYS_prctl, PR_SET_PDEATHSIG, plan->pdeathsig);
        if (plan->name[0])
            raw_syscall2(SYS_prctl, PR_SET_NAME, plan->name);
        for (int i = 0; i < seccomp_table.n_filters; i++) {
            if (!(plan->filters >> i & 1))
                continue;
            const struct seccomp_filter_entry *f = &seccomp_table.filters[i];
            struct sock_fprog fp = {(unsigned short)f->n_insns, (struct sock_filter *)f->insns};
            long flags = f->flags & ~(SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_NEW_LISTENER);
            if (raw_syscall3(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, (long)&fp) < 0) {
                static const char msg[] =
                    "crac: error: cannot install a thread's own seccomp filter again\n";
                say_and_exit(msg, sizeof(msg) - 1);
            }
        }
        return;
    }
}
