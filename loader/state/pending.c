/* pending.c — signals pending at checkpoint (CRAC_NT_PENDING): process-wide ones and each thread's
 * own, with each queued siginfo; queued again at restart once every thread is back. */
#include "state.h"

#include "confine.h"
#include "crac_layout.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

/* "Name:\t<hex mask>" from a /proc status file. */
static uint64_t status_mask(const char *path, const char *name)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char line[256];
    uint64_t mask = 0;
    size_t n = strlen(name);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, name, n) == 0 && line[n] == ':')
            mask = strtoull(line + n + 1, NULL, 16);
    fclose(f);
    return mask;
}

/* Signals rt_sigtimedwait cannot take (and so none of their instances is queued by us). */
#define UNWAITABLE ((1ULL << (SIGKILL - 1)) | (1ULL << (SIGSTOP - 1)))

/* One instance back on the process's queue, siginfo and all. The kernel takes a siginfo with
 * si_code >= 0 (kill()'s SI_USER, SIGCHLD's CLD_*) only when it is addressed to the caller's own
 * tid: addressed so, rt_sigqueueinfo still queues it process-wide. This runs on a thread that is
 * not the leader, so getpid() would be refused and the signal lost; if even our tid is refused
 * the signal goes again as a plain kill(), pending at least. */
static int queue_shared(const siginfo_t *si)
{
    long self = raw_syscall0(SYS_gettid);
    if (!raw_is_err(raw_syscall3(SYS_rt_sigqueueinfo, self, si->si_signo, si)))
        return 0;
    return raw_is_err(raw_syscall2(SYS_kill, raw_syscall0(SYS_getpid), si->si_signo)) ? -1 : 0;
}

static int requeue(const struct crac_pending_info *in, uint32_t n)
{
    int bad = 0;
    for (uint32_t i = 0; i < n; i++) {
        siginfo_t si;
        memcpy(&si, in[i].info, sizeof(si));
        bad |= queue_shared(&si);
    }
    return bad ? -1 : 0;
}

/* Every queued instance of the process-wide pending signals in SHARED, with its siginfo (a POSIX
 * timer's SI_TIMER and value, sigqueue()'s SI_QUEUE and value, each of several real-time
 * instances): the mask in /proc says only "pending", and kill() at restart would make each one a
 * single SI_USER. Taken with rt_sigtimedwait and put back at once, in the same order, with
 * rt_sigqueueinfo to our own tid (queue_shared), so the program, parked
 * meanwhile, finds them as they were. Runs on the manager thread, a thread of the program's thread
 * group (so it may take them) that blocks every signal (boot/main.c; blocked here again so none is
 * delivered to it while it holds them). One signal at a time: the kernel takes a set's lowest
 * first, and per signal the order of the queue is what must be kept. 0 with *n = 0 when anything
 * fails: everything taken is put back and restart raises the mask with kill() as before. */
static void take_infos(uint64_t shared, struct crac_pending_info **out, uint32_t *n)
{
    *out = NULL;
    *n = 0;
    uint64_t all = ~0ULL, old = 0;
    raw_syscall4(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
    struct crac_pending_info *in = NULL;
    uint32_t count = 0, cap = 0;
    int failed = 0;
    for (int sig = 1; sig <= 64 && !failed; sig++) {
        if (!(shared >> (sig - 1) & 1) || (UNWAITABLE >> (sig - 1) & 1))
            continue;
        uint64_t one = 1ULL << (sig - 1);
        struct timespec zero = {0, 0};
        for (;;) {
            siginfo_t si;
            long r = raw_syscall4(SYS_rt_sigtimedwait, &one, &si, &zero, 8);
            if (r != sig) /* -EAGAIN: no instance left */
                break;
            if (count == cap) {
                uint32_t ncap = cap ? cap * 2 : 16;
                void *grown = realloc(in, ncap * sizeof(*in));
                if (!grown) {
                    queue_shared(&si);
                    failed = 1;
                    break;
                }
                in = grown;
                cap = ncap;
            }
            memset(&in[count], 0, sizeof(in[count]));
            memcpy(in[count].info, &si, sizeof(si));
            count++;
        }
    }
    /* Put back before restoring the mask: a signal this thread did not block before must not be
     * delivered to it in between. */
    if (requeue(in, count) != 0)
        failed = 1;
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &old, 0, 8);
    if (failed) {
        free(in);
        return;
    }
    *out = in;
    *n = count;
}

/* Room for the threads' own queued signals (upperhalf/suspend_pending.c notes them there while
 * it suspends): the real-time queue is bounded by RLIMIT_SIGPENDING per user, the classic signals
 * by 31 a thread. Reserved once, touched only as far as used, and dropped after each capture. */
#define PENDING_SLOTS (1 << 17)
static struct crac_pending_buf *lent;

void pending_lend(struct crac_registry *r)
{
    size_t bytes = sizeof(*lent) + (size_t)PENDING_SLOTS * sizeof(lent->slot[0]);
    if (!lent) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return; /* the threads note nothing: their masks are saved as before */
        lent = p;
        lent->cap = PENDING_SLOTS;
    }
    /* The synchronous signals stay deliverable in the suspend handler (ckpt_run.c): not taken. */
    uint64_t sync = (1ULL << (SIGSYS - 1)) | (1ULL << (SIGSEGV - 1)) | (1ULL << (SIGBUS - 1)) |
                    (1ULL << (SIGILL - 1)) | (1ULL << (SIGFPE - 1)) | (1ULL << (SIGTRAP - 1));
    lent->skip = crac_ctrl()->reserved_sigs | sync;
    __atomic_store_n(&lent->lost, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&lent->used, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&r->pending_buf, (uint64_t)(uintptr_t)lent, __ATOMIC_SEQ_CST);
}

/* The slots thread TID noted, in its order; 0 when they cannot be trusted (none were lent, or a
 * thread ran out of room or could not put one back). */
static uint32_t thread_infos(int32_t tid, struct crac_pending_info *out)
{
    if (!lent || __atomic_load_n(&lent->lost, __ATOMIC_ACQUIRE))
        return 0;
    int32_t used = __atomic_load_n(&lent->used, __ATOMIC_ACQUIRE);
    uint32_t n = 0;
    for (int32_t i = 0; i < used && i < lent->cap; i++)
        if (lent->slot[i].tid == tid) {
            if (out)
                memcpy(out[n].info, lent->slot[i].info, sizeof(out[n].info));
            n++;
        }
    return n;
}

int pending_capture(const struct state_capture *c, void **out, size_t *len)
{
    const struct parked_thread *ts = c->threads;
    int n = c->n_threads;
    uint64_t reserved = crac_ctrl()->reserved_sigs;
    uint64_t shared = status_mask("/proc/self/status", "ShdPnd") & ~reserved;
    struct crac_pending_info *infos;
    uint32_t n_infos;
    take_infos(shared, &infos, &n_infos);
    /* Each thread's own instances follow the shared ones, thread by thread. */
    size_t n_own = 0;
    for (int i = 0; i < n; i++)
        n_own += thread_infos(ts[i].rec->tid, NULL);
    size_t size = sizeof(struct crac_pending_rec) + (size_t)n * sizeof(struct crac_pending_thread) +
                  ((size_t)n_infos + n_own) * sizeof(struct crac_pending_info);
    struct crac_pending_rec *p = calloc(1, size);
    if (!p) {
        free(infos);
        return -1;
    }
    p->shared = shared;
    struct crac_pending_thread *t = (struct crac_pending_thread *)(p + 1);
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/task/%d/status", ts[i].tid);
        t[i].tid = ts[i].rec->tid;
        t[i].mask = status_mask(path, "SigPnd") & ~reserved;
    }
    p->n_threads = (uint32_t)n;
    p->n_infos = n_infos;
    struct crac_pending_info *at = (struct crac_pending_info *)(t + n);
    if (n_infos)
        memcpy(at, infos, n_infos * sizeof(*infos));
    free(infos);
    at += n_infos;
    for (int i = 0; i < n; i++) {
        t[i].n_infos = thread_infos(ts[i].rec->tid, at);
        at += t[i].n_infos;
    }
    /* A saved siginfo names its sender (or SIGCHLD's child) as the program knows it: the kernel's
     * pid of this run is not the next run's, and the handler there translates only its own
     * run's pids (a restarted child saw its parent's pid of the run before, not getppid()). The
     * restart turns it into its own kernel pid where known already (the process, its threads,
     * its tree's parent and children), and the handler turns it back. */
    struct crac_pending_info *saved = (struct crac_pending_info *)(t + n);
    for (struct crac_pending_info *i = saved; i < at; i++) {
        siginfo_t si;
        memcpy(&si, i->info, sizeof(si));
        siginfo_pid_to_program(crac_ctrl(), &si);
        memcpy(i->info, &si, sizeof(si));
    }
    /* Not in the image (it is lower memory); the next checkpoint lends it again. */
    __atomic_store_n(&ckpt_registry->pending_buf, 0, __ATOMIC_SEQ_CST);
    if (lent) {
        size_t touched = sizeof(*lent) + (size_t)lent->used * sizeof(lent->slot[0]);
        long page = sysconf(_SC_PAGESIZE);
        size_t from = ((sizeof(*lent) + (size_t)page - 1) / (size_t)page) * (size_t)page;
        if (lent->used > 0 && touched > from)
            madvise((char *)lent + from, touched - from, MADV_DONTNEED);
    }
    *out = p;
    *len = size;
    return 0;
}

int pending_restore(const struct state_restore *r, const void *note, size_t len)
{
    const struct crac_pending_rec *p = note;
    if (!p || len < sizeof(*p))
        return 0;
    pid_t pid = getpid();
    const struct crac_pending_thread *t = (const void *)(p + 1);
    size_t infos_at = sizeof(*p) + (size_t)p->n_threads * sizeof(*t);
    uint32_t n_infos = 0;
    if (p->n_threads <= CRAC_MAX_THREADS && infos_at <= len)
        n_infos = (uint32_t)((len - infos_at) / sizeof(struct crac_pending_info));
    if (p->n_infos < n_infos)
        n_infos = p->n_infos;
    const struct crac_pending_info *in = (const void *)((const char *)note + infos_at);
    /* A shared signal with saved instances gets them back, in their order, siginfo and all; one
     * without (an image from before n_infos, or a capture that could not take them) is raised
     * once with kill() as before. */
    for (int sig = 1; sig <= 64; sig++) {
        if (!(p->shared >> (sig - 1) & 1))
            continue;
        int queued = 0;
        for (uint32_t i = 0; i < n_infos; i++) {
            siginfo_t si;
            memcpy(&si, in[i].info, sizeof(si));
            if (si.si_signo != sig)
                continue;
            siginfo_pid_to_kernel(crac_ctrl(), &si);
            queue_shared(&si);
            queued = 1;
        }
        if (!queued)
            raw_syscall2(SYS_kill, pid, sig);
    }
    /* Each thread's own instances (after the shared ones), in their order, to the thread's new
     * tid; the kernel lets another thread queue any si_code but a kill()'s or tgkill()'s (which
     * tgkill gives again). A signal in a thread's mask without instances (an image from before
     * n_infos, whose pad was 0, or a capture that could not trust them) is raised once. */
    size_t own_at = infos_at + (size_t)n_infos * sizeof(struct crac_pending_info);
    for (uint32_t i = 0; i < p->n_threads && sizeof(*p) + (i + 1) * sizeof(*t) <= len; i++) {
        pid_t tid = r->map_tid(t[i].tid);
        uint64_t given = 0;
        uint32_t k = 0;
        for (; k < t[i].n_infos && own_at + sizeof(struct crac_pending_info) <= len; k++) {
            siginfo_t si;
            memcpy(&si, (const char *)note + own_at, sizeof(si));
            own_at += sizeof(struct crac_pending_info);
            if (si.si_signo < 1 || si.si_signo > 64)
                continue;
            siginfo_pid_to_kernel(crac_ctrl(), &si);
            if (raw_is_err(raw_syscall4(SYS_rt_tgsigqueueinfo, pid, tid, si.si_signo, &si)))
                raw_syscall3(SYS_tgkill, pid, tid, si.si_signo);
            given |= 1ULL << (si.si_signo - 1);
        }
        for (int sig = 1; sig <= 64; sig++)
            if ((t[i].mask & ~given) >> (sig - 1) & 1)
                raw_syscall3(SYS_tgkill, pid, tid, sig);
    }
    return 0;
}
