/* confine_exe.c — the program's /proc/self/exe names crac-loader, which cannot be changed without
 * CAP_SYS_RESOURCE; readlink and exec of it from W are redirected to the real program instead;
 * exec goes through crac's loader (tree_exec.c); close_range spares the lower half's fds.
 * TLS-free: runs in the SIGSYS handler with the upper fs live; raw syscalls only, no errno. */
#include "confine.h"

#include "ckpt.h"
#include "crac_rawsys.h"
#include "lower_fds.h"
#include "tree.h"
#include "upper_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#define PATH_PEEK 40 /* longer than any spelling of the program's own exe link */

/* Copy between the program's memory and ours without faulting on a bad pointer: the kernel
 * answers EFAULT as it would for the real call. Where process_vm_* is refused (a container's
 * seccomp profile), the pointer is trusted as the real call would dereference it anyway. */
static long copy_mem(long nr, void *local, const void *remote, uint64_t len)
{
    struct iovec l = {local, len}, r = {(void *)remote, len};
    long n = raw_syscall6(nr, raw_syscall0(SYS_getpid), (long)&l, 1, (long)&r, 1, 0);
    if (n == -ENOSYS || n == -EPERM) {
        char *dst = nr == SYS_process_vm_readv ? local : (char *)remote;
        const char *src = nr == SYS_process_vm_readv ? remote : local;
        for (uint64_t i = 0; i < len; i++)
            dst[i] = src[i];
        return (long)len;
    }
    return n;
}

static int same(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* Reads a decimal number; *end points after it. -1 when there is none. */
static long number(const char *s, const char **end)
{
    long v = 0;
    const char *p = s;
    while (*p >= '0' && *p <= '9' && p - s < 10)
        v = v * 10 + (*p++ - '0');
    *end = p;
    return p == s ? -1 : v;
}

static int memchr_nul(const char *p, long n)
{
    for (long i = 0; i < n; i++)
        if (!p[i])
            return 1;
    return 0;
}

/* /proc/self/exe, /proc/thread-self/exe, or /proc/<pid>/exe with this process's pid as the
 * kernel or the program knows it. Returns 0 when it is not (or unreadable: the real call then
 * gives the real answer, EFAULT included). */
static int names_own_exe(const char *user_path)
{
    char p[PATH_PEEK + 1];
    /* What lies before the page end first: the string may end there, next to unmapped memory. */
    uint64_t room = 4096 - ((uint64_t)user_path & 4095);
    long n = copy_mem(SYS_process_vm_readv, p, user_path, room < PATH_PEEK ? room : PATH_PEEK);
    if (n > 0 && (uint64_t)n == room && room < PATH_PEEK && !memchr_nul(p, n)) {
        long more = copy_mem(SYS_process_vm_readv, p, user_path, PATH_PEEK);
        n = more > n ? more : n;
    }
    if (n <= 0)
        return 0;
    p[n] = '\0';
    if (same(p, "/proc/self/exe") || same(p, "/proc/thread-self/exe"))
        return 1;
    const char *prefix = "/proc/", *s = p;
    while (*prefix && *s == *prefix)
        s++, prefix++;
    if (*prefix)
        return 0;
    const char *end;
    long pid = number(s, &end);
    int32_t real = (int32_t)raw_syscall0(SYS_getpid);
    return pid > 0 && same(end, "/exe") && (pid == real || pid == vid_from_real(crac_ctrl(), real));
}

static uint64_t length(const char *s)
{
    uint64_t n = 0;
    while (s[n])
        n++;
    return n;
}

long emu_readlink(long nr, long a1, long a2, long a3, long a4)
{
    /* readlink(path, buf, size) or readlinkat(dirfd, path, buf, size). */
    const char *path = (const char *)(nr == SYS_readlink ? a1 : a2);
    char *buf = (char *)(nr == SYS_readlink ? a2 : a3);
    long size = nr == SYS_readlink ? a3 : a4;
    if (!ckpt_cfg.program[0] || !names_own_exe(path)) {
        char real[PROC_PATH_MAX]; /* /proc/<vpid>/... after a restart (confine_procpath.c) */
        long p = (long)confine_proc_path(nr == SYS_readlink ? AT_FDCWD : a1, path, real);
        return nr == SYS_readlink ? raw_syscall3(nr, p, a2, a3) : raw_syscall4(nr, a1, p, a3, a4);
    }
    if (size <= 0)
        return -EINVAL;
    uint64_t len = length(ckpt_cfg.program);
    if (len > (uint64_t)size)
        len = (uint64_t)size; /* truncated without a NUL, as readlink does */
    return copy_mem(SYS_process_vm_writev, ckpt_cfg.program, buf, len) == (long)len ? (long)len
                                                                                    : -EFAULT;
}

long emu_execve(const uint64_t *program_mask, long nr, long a1, long a2, long a3, long a4, long a5)
{
    /* execve(path, argv, envp) or execveat(dirfd, path, argv, envp, flags). */
    int at = nr == SYS_execveat;
    const char *path = (const char *)(at ? a2 : a1);
    if (ckpt_cfg.program[0] && names_own_exe(path)) {
        path = ckpt_cfg.program;
        if (at)
            a1 = AT_FDCWD;
    }
    /* Through crac's loader again, or outside crac for what it cannot run (tree_exec.c). */
    if (confine_lower_exec) {
        struct tree_exec_call x = {at,
                                   a1,
                                   a5,
                                   path,
                                   (char *const *)(at ? a3 : a2),
                                   (char *const *)(at ? a4 : a3),
                                   *program_mask};
        return confine_on_lower(confine_lower_exec, &x);
    }
    /* The new program starts with the mask the calling thread had, not the handler's. */
    uint64_t saved;
    raw_syscall4(SYS_rt_sigprocmask, 2 /* SIG_SETMASK */, program_mask, &saved, 8);
    long r =
        at ? raw_syscall6(nr, a1, (long)path, a3, a4, a5, 0) : raw_syscall3(nr, (long)path, a2, a3);
    raw_syscall4(SYS_rt_sigprocmask, 2, &saved, 0, 8);
    return r;
}

/* close_range(first, last, flags) from the program (Python closes every descriptor before its
 * exec): the lower half's own (the coordinator connection, which keeps a forked child in the job
 * until its exec'd loader has joined; the manager's wake-up) stay open. */
/* The smallest lower-half fd >= from, or -1. */
static long lower_fd_next(long from)
{
    long best = -1;
    int32_t n = __atomic_load_n(&lower_fd_count, __ATOMIC_SEQ_CST);
    for (int32_t i = 0; i < n && i < MAX_LOWER_FDS; i++)
        if (lower_fd_slots[i] >= from && (best < 0 || lower_fd_slots[i] < best))
            best = lower_fd_slots[i];
    return best;
}

static long close_ranges(long a1, long a2, long a3)
{
    uint64_t cur = (uint32_t)a1, last = (uint32_t)a2;
    if ((a3 & 4 /* CLOSE_RANGE_CLOEXEC: ours are close-on-exec already */) || cur > last)
        return raw_syscall3(SYS_close_range, a1, a2, a3);
    while (cur <= last) {
        long ours = lower_fd_next((long)cur);
        uint64_t end = ours < 0 || (uint64_t)ours > last ? last : (uint64_t)ours - 1;
        if (ours < 0 || (uint64_t)ours != cur) {
            long r = raw_syscall3(SYS_close_range, (long)cur, (long)end, a3);
            if (r != 0)
                return r;
        }
        if (ours < 0 || (uint64_t)ours > last)
            break;
        cur = (uint64_t)ours + 1;
    }
    return 0;
}

/* The manager's short-lived descriptors are not in lower_fd_slots: a close waits while it holds
 * them (lower_fds_hold), or a checkpoint's image file could be closed, its number reused by the
 * program and written into (docs/DECISIONS.md "Known open races in trees that exec"). Counted in
 * as a closer first, so a hold that begins meanwhile waits for this close instead. */
static void closer_enter(void)
{
    for (;;) {
        __atomic_add_fetch(&lower_fd_closers, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&lower_fd_busy, __ATOMIC_SEQ_CST) == 0)
            return;
        if (__atomic_sub_fetch(&lower_fd_closers, 1, __ATOMIC_SEQ_CST) == 0)
            raw_futex_wake(&lower_fd_closers, 1);
        int32_t busy = __atomic_load_n(&lower_fd_busy, __ATOMIC_SEQ_CST);
        if (busy)
            raw_futex_wait(&lower_fd_busy, busy, NULL);
    }
}

static void closer_leave(void)
{
    if (__atomic_sub_fetch(&lower_fd_closers, 1, __ATOMIC_SEQ_CST) == 0 &&
        __atomic_load_n(&lower_fd_busy, __ATOMIC_SEQ_CST))
        raw_futex_wake(&lower_fd_closers, 1);
}

/* lower_fd_is_ours for this TLS-free file (lower_fds.c is outside the group). */
static int is_lower_fd(long fd)
{
    int32_t n = __atomic_load_n(&lower_fd_count, __ATOMIC_SEQ_CST);
    for (int32_t i = 0; i < n && i < MAX_LOWER_FDS; i++)
        if (lower_fd_slots[i] == (int32_t)fd)
            return 1;
    return 0;
}

/* close(fd) from the program at the numbers the lower half keeps its own at (the filter traps
 * only those): EBADF for one of them, as if it were not open; the manager's short-lived ones
 * (lower_openat) are there too, and the close waits until they are closed; the program's close
 * as usual. */
long emu_close(long fd)
{
    if (is_lower_fd(fd))
        return -EBADF;
    closer_enter();
    long r = raw_syscall1(SYS_close, fd);
    closer_leave();
    return r;
}

/* The program's dup2 onto a number the manager holds for a moment (lower_openat opened it there,
 * and moves it up): EBUSY while the kernel installs it, or, once installed, the manager's file
 * replaced and then closed as the manager's, leaving the program without the descriptor it made
 * and the manager writing into the program's file (a shell's `cmd >&2` under a checkpoint lost
 * its stdout so). Counted as a closer: it waits while the manager holds. */
long emu_dup3(long oldfd, long newfd, long flags, int is_dup2)
{
    if (is_lower_fd(oldfd) || is_lower_fd(newfd))
        return -EBADF;
    closer_enter();
    long r = is_dup2 ? raw_syscall2(SYS_dup2, oldfd, newfd)
                     : raw_syscall3(SYS_dup3, oldfd, newfd, flags);
    closer_leave();
    return r;
}

long emu_close_range(long a1, long a2, long a3)
{
    closer_enter();
    long r = close_ranges(a1, a2, a3);
    closer_leave();
    return r;
}
