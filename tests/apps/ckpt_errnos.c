/* ckpt_errnos [STEPS=40]: per step, calls a wide range of system calls with invalid arguments
   (bad fds, bad pointers, bad flags, missing paths) through syscall(2) and checks each one fails
   with the errno Linux gives, and that a valid call still works; the same before and after a restart. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>

#define PROG "ckpt_errnos"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

static long checks;

static void expect(long k, const char *what, long r, int want)
{
    int e = errno;
    if (r != -1 || e != want)
        fail("step %ld: %s returned %ld errno %d (%s), expected -1 errno %d (%s)", k, what, r,
             r == -1 ? e : 0, r == -1 ? strerror(e) : "-", want, strerror(want));
    checks++;
}

#define EXPECT(k, want, ...) expect(k, #__VA_ARGS__, (errno = 0, (long)syscall(__VA_ARGS__)), want)

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 40, 1, 999999);
    /* An address that is never mapped: the top of the lower canonical half. */
    void *bad = (void *)0x7ffffffff000UL;
    const void *kbad = (const void *)0xffff800000000000UL;
    int p[2];
    if (pipe(p) != 0)
        fail("pipe: %s", strerror(errno));
    int ep = epoll_create1(0);
    if (ep < 0)
        fail("epoll_create1: %s", strerror(errno));
    for (long k = 1; k <= steps; k++) {
        char buf[64];
        struct stat st;
        /* Files and descriptors. */
        EXPECT(k, EBADF, SYS_read, -1, buf, 1);
        EXPECT(k, EBADF, SYS_write, 9999, buf, 1);
        EXPECT(k, EBADF, SYS_close, -1);
        EXPECT(k, EBADF, SYS_fstat, 9999, &st);
        EXPECT(k, EBADF, SYS_dup2, 9999, 10000);
        EXPECT(k, EBADF, SYS_fcntl, -1, F_GETFL);
        EXPECT(k, EINVAL, SYS_fcntl, p[0], 99999);
        EXPECT(k, ENOENT, SYS_openat, AT_FDCWD, "/nonexistent/crac/file", O_RDONLY);
        EXPECT(k, EFAULT, SYS_openat, AT_FDCWD, bad, O_RDONLY);
        EXPECT(k, ENOENT, SYS_newfstatat, AT_FDCWD, "/nonexistent", &st, 0);
        EXPECT(k, EFAULT, SYS_newfstatat, AT_FDCWD, "/", bad, 0);
        EXPECT(k, EFAULT, SYS_newfstatat, AT_FDCWD, kbad, &st, 0);
        EXPECT(k, ESPIPE, SYS_lseek, p[0], 0, SEEK_SET);
        EXPECT(k, ENOTTY, SYS_ioctl, p[0], TCGETS, buf);
        EXPECT(k, ERANGE, SYS_getcwd, buf, 1);
        EXPECT(k, EFAULT, SYS_getcwd, bad, 4096);
        EXPECT(k, EINVAL, SYS_pipe2, p, 0x7fffffff);
        EXPECT(k, EFAULT, SYS_pipe2, bad, 0);
        EXPECT(k, EINVAL, SYS_poll, NULL, 0x7fffffffU, 0);
        EXPECT(k, EFAULT, SYS_poll, bad, 1, 0);
        EXPECT(k, EINVAL, SYS_epoll_wait, ep, buf, 0, 0);
        EXPECT(k, EBADF, SYS_epoll_ctl, ep, EPOLL_CTL_DEL, 9999, buf);
        /* Time. */
        EXPECT(k, EINVAL, SYS_clock_gettime, 12345, buf);
        EXPECT(k, EFAULT, SYS_clock_gettime, CLOCK_MONOTONIC, bad);
        struct timespec negative = {0, -1};
        EXPECT(k, EINVAL, SYS_nanosleep, &negative, NULL);
        EXPECT(k, EFAULT, SYS_nanosleep, bad, NULL);
        EXPECT(k, EINVAL, SYS_timer_create, 12345, NULL, buf);
        EXPECT(k, EINVAL, SYS_setitimer, 99, NULL, NULL);
        EXPECT(k, EFAULT, SYS_getitimer, ITIMER_REAL, bad);
        /* Processes and signals (several are trapped and emulated under crac). */
        EXPECT(k, EINVAL, SYS_kill, getpid(), 12345);
        EXPECT(k, ESRCH, SYS_kill, 0x3ffffff0, 0);
        EXPECT(k, EINVAL, SYS_tgkill, getpid(), syscall(SYS_gettid), 12345);
        EXPECT(k, EINVAL, SYS_tgkill, -5, -5, 0);
        EXPECT(k, ESRCH, SYS_tgkill, getpid(), 0x3ffffff0, 0);
        EXPECT(k, EINVAL, SYS_tkill, -5, 0);
        EXPECT(k, EFAULT, SYS_rt_sigqueueinfo, getpid(), SIGUSR1, bad);
        EXPECT(k, EFAULT, SYS_rt_tgsigqueueinfo, getpid(), syscall(SYS_gettid), SIGUSR1, bad);
        static const char zero_info[128];
        EXPECT(k, EINVAL, SYS_rt_sigqueueinfo, getpid(), 12345, zero_info);
        EXPECT(k, EINVAL, SYS_clone, CLONE_THREAD, NULL, NULL, NULL, 0);
        EXPECT(k, EINVAL, SYS_clone, CLONE_SIGHAND, NULL, NULL, NULL, 0);
        EXPECT(k, ECHILD, SYS_wait4, -1, NULL, WNOHANG, NULL);
        EXPECT(k, EINVAL, SYS_wait4, -1, NULL, 0x7fff0000, NULL);
        EXPECT(k, EINVAL, SYS_rt_sigaction, 0, NULL, NULL, 8);
        EXPECT(k, EINVAL, SYS_rt_sigaction, 65, NULL, NULL, 8);
        EXPECT(k, EINVAL, SYS_rt_sigaction, SIGKILL, buf, NULL, 8);
        EXPECT(k, EINVAL, SYS_rt_sigaction, SIGUSR1, NULL, NULL, 4);
        EXPECT(k, EFAULT, SYS_rt_sigaction, SIGUSR1, bad, NULL, 8);
        EXPECT(k, EFAULT, SYS_rt_sigaction, SIGUSR1, NULL, bad, 8);
        EXPECT(k, EFAULT, SYS_rt_sigaction, SIGUSR2, bad, NULL, 8);
        EXPECT(k, EFAULT, SYS_rt_sigaction, SIGUSR2, NULL, bad, 8);
        EXPECT(k, EINVAL, SYS_rt_sigprocmask, 99, buf, NULL, 8);
        EXPECT(k, EINVAL, SYS_rt_sigprocmask, SIG_BLOCK, NULL, NULL, 4);
        EXPECT(k, EFAULT, SYS_rt_sigprocmask, SIG_BLOCK, bad, NULL, 8);
        EXPECT(k, EFAULT, SYS_rt_sigprocmask, SIG_BLOCK, NULL, bad, 8);
        EXPECT(k, EFAULT, SYS_rt_sigpending, bad, 8);
        EXPECT(k, EFAULT, SYS_rt_sigsuspend, bad, 8);
        EXPECT(k, EINVAL, SYS_rt_sigsuspend, buf, 4);
        EXPECT(k, EFAULT, SYS_ppoll, NULL, 0, NULL, bad, 8);
        EXPECT(k, EINVAL, SYS_ppoll, NULL, 0, NULL, buf, 4);
        EXPECT(k, EFAULT, SYS_epoll_pwait, ep, buf, 1, 0, bad, 8);
        EXPECT(k, EFAULT, SYS_pselect6, 0, NULL, NULL, NULL, NULL, bad);
        EXPECT(k, EFAULT, SYS_sigaltstack, bad, NULL);
        /* Memory (trapped and emulated under crac). */
        EXPECT(k, EINVAL, SYS_mmap, NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT(k, EBADF, SYS_mmap, NULL, 4096, PROT_READ, MAP_PRIVATE, 9999, 0);
        EXPECT(k, EINVAL, SYS_mmap, NULL, 4096, PROT_READ, MAP_ANONYMOUS, -1, 0);
        EXPECT(k, EINVAL, SYS_mmap, (void *)0x10001, 4096, PROT_READ,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        EXPECT(k, EINVAL, SYS_munmap, (void *)0x10001, 4096);
        EXPECT(k, EINVAL, SYS_munmap, NULL, 0);
        EXPECT(k, EINVAL, SYS_mremap, (void *)0x10001, 4096, 8192, MREMAP_MAYMOVE, 0);
        EXPECT(k, EINVAL, SYS_mprotect, (void *)0x10001, 4096, PROT_READ);
        EXPECT(k, EINVAL, SYS_madvise, (void *)0x10001, 4096, MADV_DONTNEED);
        EXPECT(k, EINVAL, SYS_shmat, -1, NULL, 0);
        EXPECT(k, EINVAL, SYS_shmdt, (void *)0x10001);
        EXPECT(k, EINVAL, SYS_shmget, IPC_PRIVATE, 0, 0600);
        EXPECT(k, EFAULT, SYS_uname, bad);
        EXPECT(k, EFAULT, SYS_sysinfo, bad);
        EXPECT(k, EFAULT, SYS_getrlimit, RLIMIT_NOFILE, bad);
        EXPECT(k, EINVAL, SYS_getrlimit, 9999, buf);
        EXPECT(k, EINVAL, SYS_prctl, 0x7fffffff, 0, 0, 0, 0);
        EXPECT(k, EFAULT, SYS_sched_getaffinity, 0, 128, bad);
        EXPECT(k, EFAULT, SYS_getrandom, bad, 16, 0);
        EXPECT(k, EINVAL, SYS_getrandom, buf, 16, 0x7fff0000);
        /* The libc wrappers crac redirects to its own emulation (mmap family, brk): errno set. */
        errno = 0;
        expect(k, "mmap(len 0)",
               mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED ? -1 : 0,
               EINVAL);
        errno = 0;
        expect(k, "mmap(fd 9999)",
               mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, 9999, 0) == MAP_FAILED ? -1 : 0, EBADF);
        errno = 0;
        expect(k, "mmap(1 << 47)",
               mmap(NULL, 1UL << 47, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED
                   ? -1
                   : 0,
               ENOMEM);
        errno = 0;
        expect(k, "munmap(unaligned)", munmap((void *)0x10001, 4096), EINVAL);
        errno = 0;
        expect(k, "mremap(unaligned)",
               mremap((void *)0x10001, 4096, 8192, MREMAP_MAYMOVE) == MAP_FAILED ? -1 : 0, EINVAL);
        errno = 0;
        expect(k, "sbrk(1 << 46)", sbrk((intptr_t)1 << 46) == (void *)-1 ? -1 : 0, ENOMEM);
        /* A valid call still works, and the program's own brk is intact. */
        if (syscall(SYS_getpid) != getpid() || syscall(SYS_write, p[1], "x", 1) != 1 ||
            syscall(SYS_read, p[0], buf, 1) != 1 || buf[0] != 'x')
            fail("step %ld: a valid call failed: %s", k, strerror(errno));
        step_line(k);
        struct timespec req = {0, 40 * 1000000L};
        nanosleep(&req, NULL);
    }
    printf("DONE steps=%ld checks=%ld\n", steps, checks);
    return fflush(stdout) == 0 ? 0 : 1;
}
