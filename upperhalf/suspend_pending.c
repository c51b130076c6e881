/* suspend_pending.c — a suspending thread notes its own queued thread-directed signals (siginfo,
 * count, order) where the manager lent room, and puts them back as they were (docs/IMAGE.md PENDING).
 * TLS-free: runs in the suspend handler, which may have interrupted anything; raw syscalls only. */
#include "upper_runtime.h"

#include "crac_rawsys.h"
#include "crac_lh_api.h"

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>

/* A marker instance this thread queues to itself behind its own ones: si_errno is 0 in every
 * signal the kernel or a sender makes, so no real instance looks like it. */
#define MARK_ERRNO 0x43524143 /* "CRAC" */
#define MARK_VALUE 0x70656e64696e67UL

/* Only this thread can take its private instances: the kernel gives a thread's own queue first,
 * then the process's. Job-control signals are left to the mask: queuing one flushes others. */
#define JOB_CONTROL                                                                                \
    ((1ULL << (SIGCONT - 1)) | (1ULL << (SIGTSTP - 1)) | (1ULL << (SIGTTIN - 1)) |                 \
     (1ULL << (SIGTTOU - 1)) | (1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1)))

static void zero(void *p, unsigned long n)
{
    volatile unsigned char *c = p;
    while (n--)
        *c++ = 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* This thread's own pending set ("SigPnd:" of /proc/thread-self/status), 0 if unreadable. Read
 * in small pieces: the handler may be on a small alternate stack. */
static uint64_t own_pending(void)
{
    static const char key[] = "\nSigPnd:\t";
    long fd = raw_syscall3(SYS_open, "/proc/thread-self/status", O_RDONLY | O_CLOEXEC, 0);
    if (raw_is_err(fd))
        return 0;
    char buf[128];
    unsigned matched = 1; /* the file's start counts as a line start */
    int in_value = 0, done = 0;
    uint64_t mask = 0;
    for (long n; !done && (n = raw_syscall3(SYS_read, fd, buf, sizeof(buf))) > 0;) {
        for (long i = 0; i < n && !done; i++) {
            char c = buf[i];
            if (in_value) {
                int v = hexval(c);
                if (v < 0)
                    done = 1;
                else
                    mask = mask << 4 | (uint64_t)v;
            } else if (c == key[matched]) {
                if (++matched == sizeof(key) - 1)
                    in_value = 1;
            } else {
                matched = c == '\n' ? 1 : 0;
            }
        }
    }
    raw_syscall1(SYS_close, fd);
    return mask;
}

static int is_marker(const siginfo_t *si)
{
    return si->si_errno == MARK_ERRNO && (uint64_t)(uintptr_t)si->si_value.sival_ptr == MARK_VALUE;
}

static void note(struct crac_pending_buf *b, int32_t tid, const siginfo_t *si)
{
    int32_t at = __atomic_fetch_add(&b->used, 1, __ATOMIC_ACQ_REL);
    if (at >= b->cap) {
        __atomic_store_n(&b->lost, 1, __ATOMIC_RELEASE);
        return;
    }
    b->slot[at].tid = tid;
    raw_memcpy(b->slot[at].info, si, sizeof(*si));
}

/* Take one instance of sig (the handler's mask blocks it), 0 when none is left. */
static int take(int sig, siginfo_t *si)
{
    uint64_t one = 1ULL << (sig - 1);
    struct timespec now = {0, 0};
    return raw_syscall6(SYS_rt_sigtimedwait, (long)&one, (long)si, (long)&now, 8,
                        (long)CRAC_SIGWAIT_KERNEL_IDS, 0) == sig;
}

/* Back at the tail of this thread's queue; if the kernel refuses the siginfo, at least pending. */
static void put_back(struct crac_pending_buf *b, long pid, long tid, int sig, siginfo_t *si)
{
    if (raw_is_err(raw_syscall4(SYS_rt_tgsigqueueinfo, pid, tid, sig, si))) {
        __atomic_store_n(&b->lost, 1, __ATOMIC_RELEASE);
        raw_syscall3(SYS_tgkill, pid, tid, sig);
    }
}

/* A real-time signal may have any number of instances: a marker goes behind them, and each one
 * taken before it is noted and queued again behind it, so after the round the queue is as it
 * was. The marker keeps this thread's queue non-empty for sig the whole time, so no take ever
 * reaches the process's queue. */
static void rotate_rt(struct crac_pending_buf *b, long pid, long tid, int sig)
{
    siginfo_t mark, si;
    zero(&mark, sizeof(mark));
    mark.si_signo = sig;
    mark.si_errno = MARK_ERRNO;
    mark.si_code = SI_QUEUE;
    mark.si_value.sival_ptr = (void *)MARK_VALUE;
    if (raw_is_err(raw_syscall4(SYS_rt_tgsigqueueinfo, pid, tid, sig, &mark)))
        return; /* no room to queue even that: the mask alone says it is pending */
    while (take(sig, &si)) {
        if (is_marker(&si))
            return;
        note(b, (int32_t)tid, &si);
        put_back(b, pid, tid, sig, &si);
    }
    __atomic_store_n(&b->lost, 1, __ATOMIC_RELEASE); /* the marker vanished */
}

void suspend_note_pending(void)
{
    struct crac_pending_buf *b = (struct crac_pending_buf *)(uintptr_t)crac_registry.pending_buf;
    if (!b)
        return;
    uint64_t any = 0;
    /* Emulated (the SIGSYS handler): crac's own signals are left out. Ids are the program's. */
    if (raw_is_err(raw_syscall2(SYS_rt_sigpending, &any, 8)))
        return;
    any &= ~(b->skip | JOB_CONTROL);
    if (!any)
        return;
    long pid = raw_syscall0(SYS_getpid), tid = raw_syscall0(SYS_gettid);
    uint64_t own = (any & 0xffffffffULL) ? own_pending() : 0;
    for (int sig = 1; sig <= 64; sig++) {
        if (!(any >> (sig - 1) & 1))
            continue;
        if (sig >= 32) {
            rotate_rt(b, pid, tid, sig);
            continue;
        }
        /* A classic signal is pending once at most per queue: if this thread's own set has it,
         * the one take is that one. */
        siginfo_t si;
        if ((own >> (sig - 1) & 1) && take(sig, &si)) {
            note(b, (int32_t)tid, &si);
            put_back(b, pid, tid, sig, &si);
        }
    }
}
