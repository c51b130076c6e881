/* confine_filter.c — the seccomp-BPF program that traps address-space and signal calls made
 * from code inside W (docs/ARCHITECTURE.md "Confinement"). W is 4 GiB-aligned, so the high 32 bits of rip decide. */
#include "confine.h"
#include "confine_seccomp.h"

#include "crac_layout.h"
#include "crac_lh_api.h"
#include "lower_fds.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A tiny assembler with symbolic jump targets, so the program reads top to bottom. */
enum label {
    NEXT = -1,
    L_ALLOW,
    L_TRAP_IF_W,
    L_ENOSYS_IF_W,
    L_CLONE,
    L_MASK_ARG3,
    L_MASK_ARG4,
    L_MASK_ARG5,
    L_CPU_CLOCK,
    L_FCNTL_OWNER,
    L_IOCTL_PGRP,
    L_PRCTL,
    L_CLOSE_HIGH,
    L_MADVISE,
    L_PATH_ARG2,
    L_PATH_ARG3,
    L_OPENAT,
    L_COUNT
};

struct asm_ins {
    uint16_t code;
    int jt, jf;
    uint32_t k;
};

struct bpf_asm {
    struct asm_ins ins[256];
    int n;
    int at[L_COUNT];
};

static void stmt(struct bpf_asm *a, uint16_t code, uint32_t k)
{
    a->ins[a->n++] = (struct asm_ins){code, NEXT, NEXT, k};
}

static void jump(struct bpf_asm *a, uint16_t op, uint32_t k, int jt, int jf)
{
    a->ins[a->n++] = (struct asm_ins){BPF_JMP | op | BPF_K, jt, jf, k};
}

static void here(struct bpf_asm *a, enum label l) { a->at[l] = a->n; }

static void load(struct bpf_asm *a, uint32_t off) { stmt(a, BPF_LD | BPF_W | BPF_ABS, off); }

static uint8_t rel(const struct bpf_asm *a, int from, int label)
{
    return label == NEXT ? 0 : (uint8_t)(a->at[label] - from - 1);
}

#define ARG_LO(i) (uint32_t)(offsetof(struct seccomp_data, args) + 8 * (i))
#define ARG_HI(i) (ARG_LO(i) + 4)

/* Allow the call when the signal-mask argument i is NULL, else trap it if it comes from W. */
static void mask_arg_block(struct bpf_asm *a, enum label l, int i)
{
    here(a, l);
    load(a, ARG_LO(i));
    jump(a, BPF_JEQ, 0, NEXT, L_TRAP_IF_W);
    load(a, ARG_HI(i));
    jump(a, BPF_JEQ, 0, L_ALLOW, L_TRAP_IF_W);
}

#define COUNT(array) ((int)(sizeof(array) / sizeof((array)[0])))

/* Trap the call (if it comes from W) when argument i is one of the N VALUES, else allow it. */
static void trap_if_arg_is(struct bpf_asm *a, enum label l, int i, const uint32_t *values, int n)
{
    here(a, l);
    load(a, ARG_LO(i));
    for (int k = 0; k < n; k++)
        jump(a, BPF_JEQ, values[k], L_TRAP_IF_W, k + 1 < n ? NEXT : L_ALLOW);
}

static void ip_in_w_block(struct bpf_asm *a, enum label l, uint32_t action)
{
    here(a, l);
    load(a, (uint32_t)offsetof(struct seccomp_data, instruction_pointer) + 4);
    jump(a, BPF_JGE, (uint32_t)(CRAC_W_START >> 32), NEXT, L_ALLOW);
    jump(a, BPF_JGE, (uint32_t)(CRAC_W_END >> 32), L_ALLOW, NEXT);
    stmt(a, BPF_RET | BPF_K, action);
}

int confine_filter_ids = -1;

int confine_install_filter(int virtual_ids)
{
    static const int always[] = {
        SYS_mmap, SYS_munmap, SYS_mremap, SYS_brk, SYS_shmat, SYS_shmdt, SYS_rt_sigaction,
        SYS_rt_sigprocmask, SYS_rt_sigsuspend, SYS_fork, SYS_exit_group,
        /* the checkpoint signal is hidden from the program */
        SYS_rt_sigpending, SYS_rt_sigtimedwait, SYS_signalfd, SYS_signalfd4, SYS_tgkill, SYS_tkill,
        SYS_kill, SYS_rt_tgsigqueueinfo, SYS_rt_sigqueueinfo,
        /* /proc/self/exe (confine_exe.c) */
        SYS_readlink, SYS_readlinkat, SYS_execve, SYS_execveat,
        /* the program's own filters are recorded (confine_seccomp.c) */
        SYS_seccomp,
        /* a vfork child is a split process too (tree_fork.c) */
        SYS_vfork,
        /* the lower half's fds survive a program's close-everything (confine_exe.c), and its
         * dup2 onto a number the manager holds for a moment (lower_openat) waits */
        SYS_close_range, SYS_dup2, SYS_dup3,
        /* a TCP listener gets SO_REUSEADDR (confine_listen.c) */
        SYS_listen};
    /* Computed once: a later filter (a restart's, an exec'd loader's) computes its own, and
     * lower_fd_adopt never goes under the lowest. */
    int close_from = lower_fd_floor();
    if (!lower_fd_low || close_from < lower_fd_low)
        lower_fd_low = close_from;
    struct bpf_asm a = {.n = 0};
    load(&a, (uint32_t)offsetof(struct seccomp_data, arch));
    jump(&a, BPF_JEQ, AUDIT_ARCH_X86_64, NEXT, L_ALLOW);
    load(&a, (uint32_t)offsetof(struct seccomp_data, nr));
    /* the kill family is in `always`; children's ids differ in a restarted tree */
    static const int ids[] = {SYS_getpid, SYS_gettid, SYS_getppid, SYS_wait4, SYS_waitid};
    for (unsigned i = 0; i < sizeof(always) / sizeof(always[0]); i++)
        jump(&a, BPF_JEQ, (uint32_t)always[i], L_TRAP_IF_W, NEXT);
    /* Calls that name a process or thread by id, or a CPU clock (whose id encodes one). */
    static const int id_args[] = {SYS_sched_setaffinity,
                                  SYS_sched_getaffinity,
                                  SYS_sched_setparam,
                                  SYS_sched_getparam,
                                  SYS_sched_setscheduler,
                                  SYS_sched_getscheduler,
                                  SYS_sched_rr_get_interval,
                                  SYS_sched_setattr,
                                  SYS_sched_getattr,
                                  SYS_getpriority,
                                  SYS_setpriority,
                                  SYS_prlimit64,
                                  SYS_ioprio_get,
                                  SYS_ioprio_set,
                                  SYS_pidfd_open,
                                  SYS_process_vm_readv,
                                  SYS_process_vm_writev,
                                  SYS_get_robust_list,
                                  SYS_getpgid,
                                  SYS_getsid,
                                  SYS_setpgid,
                                  SYS_timer_create,
                                  SYS_clock_getres,
                                  SYS_clock_settime,
                                  SYS_clock_adjtime,
                                  SYS_migrate_pages,
                                  SYS_move_pages,
                                  SYS_getpgrp};
    for (unsigned i = 0; virtual_ids && i < sizeof(ids) / sizeof(ids[0]); i++)
        jump(&a, BPF_JEQ, (uint32_t)ids[i], L_TRAP_IF_W, NEXT);
    for (unsigned i = 0; virtual_ids && i < sizeof(id_args) / sizeof(id_args[0]); i++)
        jump(&a, BPF_JEQ, (uint32_t)id_args[i], L_TRAP_IF_W, NEXT);
    /* Calls that take a path, which may name a process by its id: /proc/<pid>/... (after a
     * restart, confine_procpath.c). fstat (newfstatat with AT_EMPTY_PATH) stays untrapped.
     * CRAC_PROC_PATHS=0 leaves them all untrapped: each costs a SIGSYS round trip (a few us). */
    const char *proc_paths = getenv("CRAC_PROC_PATHS");
    int paths = virtual_ids && !(proc_paths && proc_paths[0] == '0' && !proc_paths[1]);
    static const int path_args[] = {SYS_open,      SYS_stat,       SYS_lstat,     SYS_access,
                                    SYS_faccessat, SYS_faccessat2, SYS_getdents64};
    for (unsigned i = 0; paths && i < sizeof(path_args) / sizeof(path_args[0]); i++)
        jump(&a, BPF_JEQ, (uint32_t)path_args[i], L_TRAP_IF_W, NEXT);
    if (paths) {
        jump(&a, BPF_JEQ, SYS_openat, L_OPENAT, NEXT);
        jump(&a, BPF_JEQ, SYS_newfstatat, L_PATH_ARG3, NEXT);
        jump(&a, BPF_JEQ, SYS_statx, L_PATH_ARG2, NEXT);
    }
    if (virtual_ids) { /* the upper half has no vDSO: keep its frequent clock reads untrapped */
        jump(&a, BPF_JEQ, SYS_clock_gettime, L_CPU_CLOCK, NEXT);
        jump(&a, BPF_JEQ, SYS_clock_nanosleep, L_CPU_CLOCK, NEXT);
        jump(&a, BPF_JEQ, SYS_fcntl, L_FCNTL_OWNER, NEXT);
        jump(&a, BPF_JEQ, SYS_ioctl, L_IOCTL_PGRP, NEXT);
    }
    jump(&a, BPF_JEQ, SYS_clone3, L_ENOSYS_IF_W, NEXT); /* glibc then falls back to clone */
    jump(&a, BPF_JEQ, SYS_clone, L_CLONE, NEXT);
    jump(&a, BPF_JEQ, SYS_ppoll, L_MASK_ARG3, NEXT);
    jump(&a, BPF_JEQ, SYS_epoll_pwait, L_MASK_ARG4, NEXT);
    jump(&a, BPF_JEQ, SYS_epoll_pwait2, L_MASK_ARG4, NEXT);
    jump(&a, BPF_JEQ, SYS_pselect6, L_MASK_ARG5, NEXT);
    jump(&a, BPF_JEQ, SYS_prctl, L_PRCTL, NEXT);
    jump(&a, BPF_JEQ, SYS_close, L_CLOSE_HIGH, NEXT);
    jump(&a, BPF_JEQ, SYS_madvise, L_MADVISE, NEXT);
    jump(&a, BPF_JEQ, 0, L_ALLOW, L_ALLOW); /* BPF only jumps forward: ALLOW is last */
    /* Threads (CLONE_VM) are created by the kernel as usual; fork-like clones are emulated. */
    here(&a, L_CLONE);
    load(&a, ARG_LO(0));
    jump(&a, BPF_JSET, CLONE_VFORK, L_TRAP_IF_W, NEXT); /* posix_spawn's: a process, not a thread */
    jump(&a, BPF_JSET, CLONE_VM, L_ALLOW, L_TRAP_IF_W);
    /* A CPU clock (negative id) or the calling process's or thread's: their values go on from
     * the checkpoint. */
    here(&a, L_CPU_CLOCK);
    load(&a, ARG_LO(0));
    jump(&a, BPF_JSET, 0x80000000u, L_TRAP_IF_W, NEXT);
    jump(&a, BPF_JEQ, 2 /* CLOCK_PROCESS_CPUTIME_ID */, L_TRAP_IF_W, NEXT);
    jump(&a, BPF_JEQ, 3 /* CLOCK_THREAD_CPUTIME_ID */, L_TRAP_IF_W, L_ALLOW);
    /* fcntl only for the commands that set or get a signal owner: the others are frequent. */
    static const uint32_t owner_cmds[] = {F_SETOWN, F_GETOWN, F_SETOWN_EX, F_GETOWN_EX};
    trap_if_arg_is(&a, L_FCNTL_OWNER, 1, owner_cmds, COUNT(owner_cmds));
    /* ioctl only for a terminal's foreground group and session (tcsetpgrp, tcgetpgrp,
     * tcgetsid): a restarted tree's groups have new kernel ids. */
    static const uint32_t pgrp_ioctls[] = {TIOCSPGRP, TIOCGPGRP, TIOCGSID};
    trap_if_arg_is(&a, L_IOCTL_PGRP, 1, pgrp_ioctls, COUNT(pgrp_ioctls));
    /* prctl only for what crac records and restores (confine_seccomp.c). */
    static const uint32_t prctl_options[] = {PR_SET_SECCOMP, PR_SET_PDEATHSIG};
    trap_if_arg_is(&a, L_PRCTL, 0, prctl_options, COUNT(prctl_options));
    /* close only at the numbers the lower half keeps its descriptors at (lower_fds.c): a
     * program's close-everything loop must not close them, and its other closes (frequent) stay
     * untrapped. Negative numbers are the kernel's EBADF. */
    here(&a, L_CLOSE_HIGH);
    load(&a, ARG_LO(0));
    jump(&a, BPF_JSET, 0x80000000u, L_ALLOW, NEXT);
    jump(&a, BPF_JGE, (uint32_t)close_from, L_TRAP_IF_W, L_ALLOW);
    /* madvise only for fork advice (fork_advice.c) and MADV_DONTDUMP (the checkpoint's cue to
     * read VmFlags first: image_core.c): the others (MADV_DONTNEED of every free) stay
     * untrapped. */
    static const uint32_t recorded_advice[] = {MADV_DONTFORK, MADV_DOFORK, MADV_WIPEONFORK,
                                               MADV_KEEPONFORK, MADV_DONTDUMP};
    trap_if_arg_is(&a, L_MADVISE, 2, recorded_advice, COUNT(recorded_advice));
    /* openat, but the upper runtime's own (CRAC_OPEN_UNTRAPPED in its unused sixth argument):
     * the loader checks its path after the call. */
    here(&a, L_OPENAT);
    load(&a, ARG_LO(5));
    jump(&a, BPF_JEQ, (uint32_t)CRAC_OPEN_UNTRAPPED, NEXT, L_TRAP_IF_W);
    load(&a, ARG_HI(5));
    jump(&a, BPF_JEQ, (uint32_t)(CRAC_OPEN_UNTRAPPED >> 32), L_ALLOW, L_TRAP_IF_W);
    here(&a, L_PATH_ARG2); /* statx(dirfd, path, flags, ...) */
    load(&a, ARG_LO(2));
    jump(&a, BPF_JSET, AT_EMPTY_PATH, L_ALLOW, L_TRAP_IF_W);
    here(&a, L_PATH_ARG3); /* newfstatat(dirfd, path, buf, flags) */
    load(&a, ARG_LO(3));
    jump(&a, BPF_JSET, AT_EMPTY_PATH, L_ALLOW, L_TRAP_IF_W);
    mask_arg_block(&a, L_MASK_ARG3, 3);
    mask_arg_block(&a, L_MASK_ARG4, 4);
    mask_arg_block(&a, L_MASK_ARG5, 5);
    ip_in_w_block(&a, L_TRAP_IF_W, SECCOMP_RET_TRAP);
    ip_in_w_block(&a, L_ENOSYS_IF_W, SECCOMP_RET_ERRNO | ENOSYS);
    here(&a, L_ALLOW);
    stmt(&a, BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

    struct sock_filter prog[256];
    for (int i = 0; i < a.n; i++) {
        const struct asm_ins *in = &a.ins[i];
        prog[i] = (struct sock_filter){in->code, rel(&a, i, in->jt), rel(&a, i, in->jf), in->k};
    }
    struct sock_fprog fprog = {.len = (unsigned short)a.n, .filter = prog};
    /* Without CAP_SYS_ADMIN the kernel requires no_new_privs; try without it first so setuid
     * programs the application starts keep working where we are privileged. */
    long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog);
    if (r != 0 && errno == EACCES) {
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
            return -errno;
        r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog);
    }
    if (r != 0)
        return -errno;
    if (virtual_ids > confine_filter_ids)
        confine_filter_ids = virtual_ids;
    confine_filter_kept();
    return 0;
}

/* The program's filters go on top of crac's: a thread's count in /proc less the filters there
 * now (ours, or those an exec'd loader kept: loader/ckpt/tree_exec.c). */
void confine_filter_kept(void) { seccomp_table.base = seccomp_filters_of(0); }
