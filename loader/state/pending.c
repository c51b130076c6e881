/* pending.c — signals pending at checkpoint (CRAC_NT_PENDING): process-wide ones with each queued
 * siginfo, per-thread ones as masks from /proc; queued again at restart once every thread is back. */
#include "state.h"

#include "confine.h"
#include "crac_layout.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include <signal.h>
#include <stdio.h>
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

static int requeue(pid_t pid, const struct crac_pending_info *in, uint32_t n)
{
    int bad = 0;
    for (uint32_t i = 0; i < n; i++) {
        siginfo_t si;
        memcpy(&si, in[i].info, sizeof(si));
        bad |= raw_is_err(raw_syscall3(SYS_rt_sigqueueinfo, pid, si.si_signo, &si));
    }
    return bad ? -1 : 0;
}

/* Every queued instance of the process-wide pending signals in SHARED, with its siginfo (a POSIX
 * timer's SI_TIMER and value, sigqueue()'s SI_QUEUE and value, each of several real-time
 * instances): the mask in /proc says only "pending", and kill() at restart would make each one a
 * single SI_USER. Taken with rt_sigtimedwait and put back at once, in the same order, with
 * rt_sigqueueinfo to our own pid (the kernel allows any si_code to oneself), so the program, parked
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
                    raw_syscall3(SYS_rt_sigqueueinfo, getpid(), sig, &si);
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
    if (requeue(getpid(), in, count) != 0)
        failed = 1;
    raw_syscall4(SYS_rt_sigprocmask, SIG_SETMASK, &old, 0, 8);
    if (failed) {
        free(in);
        return;
    }
    *out = in;
    *n = count;
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
    size_t size = sizeof(struct crac_pending_rec) + (size_t)n * sizeof(struct crac_pending_thread) +
                  (size_t)n_infos * sizeof(struct crac_pending_info);
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
    if (n_infos)
        memcpy(t + n, infos, n_infos * sizeof(*infos));
    free(infos);
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
            raw_syscall3(SYS_rt_sigqueueinfo, pid, sig, &si);
            queued = 1;
        }
        if (!queued)
            raw_syscall2(SYS_kill, pid, sig);
    }
    for (uint32_t i = 0; i < p->n_threads && sizeof(*p) + (i + 1) * sizeof(*t) <= len; i++)
        for (int sig = 1; sig <= 64; sig++)
            if (t[i].mask >> (sig - 1) & 1)
                raw_syscall3(SYS_tgkill, pid, r->map_tid(t[i].tid), sig);
    return 0;
}
