/* peer_signal.c — the checkpoint signal's number sent by the program to another crac process goes
 * marked, so that process gives it to its program instead of checkpointing (docs/DECISIONS.md
 * "A program's checkpoint-numbered signal to another process"). TLS-free: runs in the SIGSYS
 * handler; raw syscalls only. */
#include "confine.h"

#include "crac_layout.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* Does process PID (the kernel's id) run the loader this process runs? */
static int runs_our_loader(int32_t pid)
{
    char path[32];
    struct stat theirs, ours;
    raw_proc_path(path, pid, "/exe");
    if (raw_syscall4(SYS_newfstatat, AT_FDCWD, (long)path, (long)&theirs, 0) != 0 ||
        raw_syscall4(SYS_newfstatat, AT_FDCWD, (long)"/proc/self/exe", (long)&ours, 0) != 0)
        return 0;
    return theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
}

long peer_signal_send(const struct crac_ctrl *c, long nr, long a1, long a2, long a3)
{
    long sig = nr == SYS_tgkill ? a3 : a2;
    int32_t target = (int32_t)a1;
    if (sig != c->ckpt_sig || target <= 0)
        return -ENOSYS; /* a group, every process, or another signal: as the kernel would */
    int32_t real = vid_to_real(c, target);
    if (real == (int32_t)raw_syscall0(SYS_getpid) || !runs_our_loader(real))
        return -ENOSYS;
    siginfo_t si;
    __builtin_memset(&si, 0, sizeof(si));
    if (nr == SYS_rt_sigqueueinfo) {
        if (confine_from_user(&si, (const void *)a3, sizeof(si)) != 0)
            return -EFAULT;
        if (si.si_code >= 0 || si.si_code == SI_TKILL)
            return -EPERM; /* the kernel's rule for a signal queued to another process */
    }
    int kind = nr == SYS_kill     ? CRAC_PEER_KILL
               : nr == SYS_tgkill ? CRAC_PEER_TGKILL
                                  : CRAC_PEER_QUEUE;
    si.si_signo = (int)sig;
    si.si_code = SI_QUEUE;
    si.si_errno = CRAC_PEER_SIG_MARK | kind;
    si.si_pid = (pid_t)raw_syscall0(SYS_getpid);
    si.si_uid = (uid_t)raw_syscall0(SYS_getuid);
    if (kind == CRAC_PEER_TGKILL) /* the thread, by the kernel's id, rides in the value */
        si.si_value.sival_int = vid_to_real(c, (int32_t)a2);
    return raw_syscall3(SYS_rt_sigqueueinfo, real, sig, (long)&si);
}
