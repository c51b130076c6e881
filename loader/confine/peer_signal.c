/* peer_signal.c — the checkpoint signal's number sent by the program to another crac process goes
 * marked, so that process gives it to its program instead of checkpointing, and that process's
 * record of it until its handler runs (docs/DECISIONS.md "A program's checkpoint-numbered signal to
 * another process"). TLS-free: runs in the SIGSYS and suspend handlers; raw syscalls only. */
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

/* SI made the marked signal SIG of KIND from this process (its value, if any, kept). */
static void mark_signal(siginfo_t *si, long sig, int kind)
{
    si->si_signo = (int)sig;
    si->si_code = SI_QUEUE;
    si->si_errno = CRAC_PEER_SIG_MARK | kind;
    si->si_pid = (pid_t)raw_syscall0(SYS_getpid);
    si->si_uid = (uid_t)raw_syscall0(SYS_getuid);
}

/* The process group of process PID (the kernel's ids), from /proc/PID/stat; -1 when gone. */
static int32_t group_of(int32_t pid)
{
    char path[32], buf[512];
    raw_proc_path(path, pid, "/stat");
    long fd = raw_syscall4(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    long n = raw_syscall3(SYS_read, fd, (long)buf, sizeof(buf) - 1);
    raw_syscall1(SYS_close, fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *p = buf + n;
    while (p > buf && *p != ')') /* the command may hold spaces and parentheses: after the last */
        p--;
    for (int field = 0; *p && field < 3; p++) /* ") S PPID PGRP" */
        field += *p == ' ';
    int32_t pgrp = 0;
    while (*p >= '0' && *p <= '9')
        pgrp = pgrp * 10 + (*p++ - '0');
    return pgrp > 0 ? pgrp : -1;
}

/* One process of the group: marked if it runs crac's loader, as the kernel's signal otherwise. */
static long send_one(int32_t pid, long sig, const siginfo_t *marked)
{
    if (runs_our_loader(pid))
        return raw_syscall3(SYS_rt_sigqueueinfo, pid, sig, (long)marked);
    return raw_syscall2(SYS_kill, pid, sig);
}

long peer_signal_group(long sig, int32_t pgrp, int *self)
{
    int32_t me = (int32_t)raw_syscall0(SYS_getpid);
    siginfo_t si;
    __builtin_memset(&si, 0, sizeof(si));
    mark_signal(&si, sig, CRAC_PEER_KILL);
    *self = 0;
    long fd =
        raw_syscall4(SYS_openat, AT_FDCWD, (long)"/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0)
        return -ENOSYS; /* the kernel's group signal, as before */
    char buf[2048];
    int found = 0, sent = 0;
    long err = -ESRCH, n;
    while ((n = raw_syscall3(SYS_getdents64, fd, (long)buf, sizeof(buf))) > 0) {
        for (long at = 0; at < n;) {
            const struct dirent64_raw {
                uint64_t ino;
                int64_t off;
                uint16_t reclen;
                uint8_t type;
                char name[];
            } *d = (const void *)(buf + at);
            at += d->reclen;
            int32_t pid = 0;
            const char *q = d->name;
            while (*q >= '0' && *q <= '9')
                pid = pid * 10 + (*q++ - '0');
            if (*q || pid <= 0 || group_of(pid) != pgrp)
                continue;
            found = 1;
            if (pid == me) {
                *self = 1; /* the caller gives it to this process's own handler */
                continue;
            }
            long r = send_one(pid, sig, &si);
            if (r == 0)
                sent = 1;
            else
                err = r;
        }
    }
    raw_syscall1(SYS_close, fd);
    if (!found)
        return -ESRCH;
    return sent || *self ? 0 : err;
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
    mark_signal(&si, sig, kind);
    if (kind == CRAC_PEER_TGKILL) /* the thread, by the kernel's id, rides in the value */
        si.si_value.sival_int = vid_to_real(c, (int32_t)a2);
    return raw_syscall3(SYS_rt_sigqueueinfo, real, sig, (long)&si);
}

int peer_sig_put(struct crac_ctrl *c, const struct crac_peer_sig *in)
{
    struct crac_peer_sig *p = &c->peer_sig;
    for (;;) {
        int32_t seen = CRAC_PEER_FREE;
        if (__atomic_compare_exchange_n(&p->state, &seen, CRAC_PEER_FILLING, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            break;
        if (seen != CRAC_PEER_TAKING)
            return 0; /* one waits already: merged, as the kernel merges a classic signal */
        raw_syscall0(SYS_sched_yield); /* a handler is taking the last one: a few instructions */
    }
    p->code = in->code;
    p->pid = in->pid;
    p->uid = in->uid;
    p->tid = in->tid;
    p->value = in->value;
    __atomic_store_n(&p->state, CRAC_PEER_READY, __ATOMIC_RELEASE);
    return 1;
}

int peer_sig_take(struct crac_ctrl *c, siginfo_t *si)
{
    struct crac_peer_sig *p = &c->peer_sig;
    int32_t ready = CRAC_PEER_READY;
    if (!__atomic_compare_exchange_n(&p->state, &ready, CRAC_PEER_TAKING, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return 0;
    __builtin_memset(si, 0, sizeof(*si));
    si->si_signo = c->ckpt_sig;
    si->si_code = p->code;
    si->si_pid = p->pid;
    si->si_uid = p->uid;
    if (p->code == SI_QUEUE)
        si->si_value.sival_ptr = (void *)(uintptr_t)p->value;
    __atomic_store_n(&p->state, CRAC_PEER_FREE, __ATOMIC_RELEASE);
    return 1;
}
