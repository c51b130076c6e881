/* confine.h — keeping the upper half inside W: the seccomp filter and its SIGSYS handler.
 * docs/ARCHITECTURE.md "Confinement". */
#ifndef CRAC_CONFINE_H
#define CRAC_CONFINE_H

#include <signal.h>
#include <stdint.h>
#include <ucontext.h>

struct crac_ctrl;
struct crac_peer_sig;

/* Install the SIGSYS handler (before the filter). Returns 0 or -errno. */
int confine_install_handler(void);
/* Install the seccomp filter on every thread of the process. virtual_ids: also trap getpid and
 * gettid (after a restart; the calls that take ids are always trapped). Returns 0 or -errno. */
int confine_install_filter(int virtual_ids);
/* Counts the seccomp filters present as crac's: the program's own go on top (confine_seccomp.c). */
void confine_filter_kept(void);
/* What the process's filters trap: -1 none installed by this loader, else the largest
 * virtual_ids installed (an exec'd loader inherits them: loader/ckpt/tree_exec.c). */
extern int confine_filter_ids;
/* Map [addr, addr+len) inside W as the allocator would, for the loader's own placements. */
long confine_place(unsigned long len, int prot, int flags, int fd, long off);

/* A CPU-time clock id encodes a pid or tid: ~id << 3 | type, bit 2 set for a thread's clock;
 * type 3 is a dynamic clock (~fd << 3 | 3), which names no id. */
static inline int cpuclock_names_id(int32_t clk) { return clk < 0 && (clk & 3) != 3; }
static inline int32_t cpuclock_id(int32_t clk) { return ~(clk >> 3); }
static inline int32_t cpuclock_with_id(int32_t clk, int32_t id)
{
    return (int32_t)((uint32_t)~id << 3) | (clk & 7);
}

/* What the CPU clock of thread `tid` (the program's id) reads get added since the restart. */
int64_t cpu_thread_offset(const struct crac_ctrl *c, int32_t tid);

/* The emulations themselves, TLS-free: also called directly by the upper runtime's fast path
 * (upperhalf/fastpath.c), which saves the cost of the SIGSYS delivery. -errno on failure. */
long emu_mmap(uint64_t addr, uint64_t len, long prot, long flags, long fd, long off);
long emu_munmap(uint64_t addr, uint64_t len);
long emu_mremap(uint64_t old, uint64_t oldlen, uint64_t newlen, long flags, uint64_t dest);
long emu_brk(uint64_t want);
/* getpid, gettid or getppid (the number): the id the program knows, which after a restart is not
 * the kernel's (the fast path spares these frequent calls a SIGSYS each). */
long emu_self_id(long nr);

/* Copy from the program's memory as the kernel would (-EFAULT on a bad pointer), for the other
 * emulations (confine_seccomp.c). TLS-free. */
long confine_from_user(void *dst, const void *src, unsigned long n);
long confine_to_user(void *dst, const void *src, unsigned long n);

/* readlink/readlinkat and execve/execveat of the program's own /proc/self/exe lead to the real
 * program (confine_exe.c); others are passed through. execve runs with program_mask. */
long emu_readlink(long nr, long a1, long a2, long a3, long a4);
/* After a restart: a path naming a process by the id the program knows, with the kernel's instead
 * (BUF, PROC_PATH_MAX bytes, absolute), else USER_PATH itself; open, stat and access calls given
 * such paths (confine_procpath.c). DIRFD: what a relative path is relative to (AT_FDCWD). */
#define PROC_PATH_MAX 256 /* a longer /proc path is left as it is (none of the kernel's is) */
const char *confine_proc_path(long dirfd, const char *user_path, char *buf);
/* 1 when FD is a descriptor of /proc or of a /proc/<pid>/task, its path then in PATH
 * (PROC_PATH_MAX bytes): paths relative to it name ids (confine_procview.c). */
int proc_dir_path(long fd, char *path);
long emu_path_call(ucontext_t *uc, long nr, long a1, long a2, long a3, long a4, long a5);
/* The same for the upper libc's open, stat and access entries (upperhalf/fastpath.c): called,
 * not trapped, and the call issued from the loader's text, outside W; -errno. */
long emu_path_direct(long nr, long a1, long a2, long a3, long a4, long a5);
/* The same once the call was made as given, by the upper runtime (an open, which may block: it
 * blocks in upper code, cancellable), R its result: the call again with the kernel's ids, or R. */
long emu_path_after(long nr, long r, long a1, long a2, long a3, long a4, long a5);
/* What the program reads in /proc with the ids it knows (confine_procview.c): getdents64 of the
 * /proc and /proc/<pid>/task listings; and, once an open of PATH (as the kernel got it) gave FD,
 * a stat, status or children file's text put at FD with the program's ids. */
long emu_getdents(long fd, long user_buf, long count);
long proc_view_opened(long fd, const char *path, long flags);
/* A group (session: 1) the kernel knows as REAL, as the program knows it (confine_trap.c). */
int32_t vgroup_from_real(const struct crac_ctrl *c, int32_t real, int session);
long emu_execve(const uint64_t *program_mask, long nr, long a1, long a2, long a3, long a4, long a5);
long emu_close_range(long first, long last, long flags);
long emu_close(long fd);
/* dup2/dup3 from the program: wait while the manager holds a short-lived descriptor at a low
 * number (lower_openat), which a dup2 onto that number would replace; a lower fd's number is
 * refused (EBADF). */
long emu_dup3(long oldfd, long newfd, long flags, int is_dup2);
long emu_listen(long fd, long backlog); /* confine_listen.c */
/* kill, tgkill or rt_sigqueueinfo of the checkpoint signal's number at another process that runs
 * crac's loader: sent marked (peer_signal.c); -ENOSYS where it is not such a call. */
long peer_signal_send(const struct crac_ctrl *c, long nr, long a1, long a2, long a3);
/* kill(0 or -group) of the checkpoint signal's number: to each process of the group PGRP (the
 * kernel's id), marked to those that run crac's loader; *SELF set when this process is one of them
 * (its own handler is the caller's to run). 0, -ESRCH (none), or the kernel's error for all. */
long peer_signal_group(long sig, int32_t pgrp, int *self);
/* The receiving side's record of such a signal (c->peer_sig): put by the manager when it takes
 * one, 1, or 0 when one waits already (merged); taken into SI for the program's handler, 1, or 0
 * when none waits (peer_signal.c). */
int peer_sig_put(struct crac_ctrl *c, const struct crac_peer_sig *in);
int peer_sig_take(struct crac_ctrl *c, siginfo_t *si);
/* The program's handler for the checkpoint signal, run on this thread as a delivery of SI would
 * run it (the handler's mask in force, in the program's view too). */
void confine_run_ckpt_handler(ucontext_t *uc, const siginfo_t *si);

/* The fork of a split process (loader/ckpt/tree_fork.c), called on a borrowed lower TCB; NULL:
 * forks are the kernel's plain ones. Set by main before the program runs. */
extern long (*confine_lower_fork)(void);
/* Asked before such a fork takes the allocator lock (0): non-zero, the program issues its call
 * again; told when the fork failed (1) (tree_coord_gate). NULL: never. */
extern int (*confine_fork_gate)(int failed);
/* The same for execve (tree_exec_lower, whose argument is a struct tree_exec_call). */
extern long (*confine_lower_exec)(const void *call);
/* Run fn(arg) on a borrowed shadow TCB (lower libc live), as a crossing does. */
long confine_on_lower(long (*fn)(const void *), const void *arg);

#endif
