/* ckpt_suspend.c — quiesce (no thread inside the lower half, new crossings wait) and suspend every
 * upper thread in the upper runtime's handler; undo the EINTR the suspension caused (docs/ARCHITECTURE.md "Checkpoint", "Traps"). */
#include "ckpt.h"

#include "crac_layout.h"
#include "crac_rawsys.h"
#include "image_device.h"
#include "upper_alloc.h"
#include "vdso_proxy.h"

#include "lh_api.h"
#include "lower_fds.h"
#include "lower_threads.h"
#include "state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#define SUSPEND_TIMEOUT_MS 30000
#define QUIESCE_TIMEOUT_MS 30000

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static int task_exists(int32_t tid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/self/task/%d", tid);
    return stat(path, &st) == 0;
}

/* "/proc/self/task/T/syscall": "nr a1 .. a6 sp pc" while blocked, "running" otherwise. */
static void read_blocked_syscall(struct parked_thread *t)
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", t->tid);
    t->blocked_nr = -1;
    int fd = lower_open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    long nr;
    unsigned long a[6], sp, pc;
    if (sscanf(buf, "%ld %lx %lx %lx %lx %lx %lx %lx %lx", &nr, &a[0], &a[1], &a[2], &a[3], &a[4],
               &a[5], &sp, &pc) == 9 &&
        nr >= 0) {
        t->blocked_nr = nr;
        t->blocked_pc = pc;
    }
}

static int known(const struct parked_thread *ts, int n, int32_t tid)
{
    for (int i = 0; i < n; i++)
        if (ts[i].tid == tid)
            return 1;
    return 0;
}

/* Signal every upper thread not yet signalled; returns how many were added. */
static int signal_new_threads_held(struct parked_thread *ts, int *n, int max);

static int signal_new_threads(struct parked_thread *ts, int *n, int max)
{
    /* Threads not yet signalled still run: the scan's descriptors are held from their
     * close_range (lower_fds.h). */
    lower_fds_hold();
    int added = signal_new_threads_held(ts, n, max);
    lower_fds_release();
    return added;
}

static int signal_new_threads_held(struct parked_thread *ts, int *n, int max)
{
    int added = 0;
    pid_t pid = getpid();
    DIR *d = lower_opendir("/proc/self/task");
    if (!d)
        return -1;
    struct dirent *de;
    while ((de = readdir(d))) {
        int32_t tid = atoi(de->d_name);
        if (tid <= 0 || lower_threads_contains(tid) || known(ts, *n, tid))
            continue;
        if (*n >= max) {
            closedir(d);
            return -1;
        }
        struct parked_thread *t = &ts[*n];
        memset(t, 0, sizeof(*t));
        t->tid = tid;
        read_blocked_syscall(t);
        if (raw_syscall3(SYS_tgkill, pid, tid, CRAC_SIG_SUSPEND) == 0) {
            (*n)++;
            added++;
        }
    }
    closedir(d);
    return added;
}

static int wait_parked(struct parked_thread *ts, int *n)
{
    struct crac_registry *r = ckpt_registry;
    for (int waited = 0;; waited += 10) {
        int32_t parked = __atomic_load_n(&r->parked, __ATOMIC_ACQUIRE);
        if (parked >= *n)
            return 0;
        if (waited >= SUSPEND_TIMEOUT_MS) {
            fprintf(stderr,
                    "crac: error: checkpoint abandoned: %d of %d threads did not suspend "
                    "within %d s\n",
                    *n - parked, *n, SUSPEND_TIMEOUT_MS / 1000);
            return -1;
        }
        struct timespec t = {0, 10 * 1000000L};
        raw_futex_wait(&r->parked, parked, &t);
        /* Threads that exited before they could park are dropped, and so are threads a lower-
         * half library was starting when they were signalled (loader/cross/lower_spawn.c). */
        for (int i = 0; i < *n; i++)
            if (!task_exists(ts[i].tid) || lower_threads_contains(ts[i].tid))
                ts[i--] = ts[--*n];
    }
}

/* The waits a thread may have entered between the look at /proc and the signal, which the
 * kernel ends with EINTR under any handler and which are the same call when issued again. */
static int waits(long nr)
{
    static const long calls[] = {SYS_poll,       SYS_ppoll,          SYS_select,       SYS_pselect6,
                                 SYS_epoll_wait, SYS_epoll_pwait,    SYS_epoll_pwait2, SYS_pause,
                                 SYS_nanosleep,  SYS_clock_nanosleep};
    for (unsigned i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
        if (calls[i] == nr)
            return 1;
    return 0;
}

/* A thread that was running when the manager looked (/proc said so) and entered a wait before
 * the signal came: its number, from the libc wrapper's `mov $NR, %eax; syscall` just before the
 * interrupted pc (util-linux `script` in its poll loop took the EINTR for an error and ended
 * the session). -1 when the code there is not that. The upper half's code is mapped (in W). */
static long entered_wait(const greg_t *g)
{
    const unsigned char *pc = (const unsigned char *)g[REG_RIP];
    uint64_t at = (uint64_t)pc;
    /* The syscall instruction was just executed: its page is mapped; the mov must share it. */
    if (g[REG_RAX] != -EINTR || at < CRAC_W_START + 7 || at > CRAC_W_END ||
        ((at - 7) ^ (at - 2)) & ~4095UL)
        return -1;
    if (pc[-2] != 0x0f || pc[-1] != 0x05 || pc[-7] != 0xb8)
        return -1;
    uint32_t nr;
    memcpy(&nr, pc - 6, sizeof(nr));
    return waits((long)nr) ? (long)nr : -1;
}

/* A thread blocked in a call the kernel does not restart (nanosleep, poll, epoll_wait...) comes
 * out of the suspension with EINTR: re-issue the call instead (rip back onto the syscall
 * instruction, rax = the number), with the remaining time for the sleeps. */
static void rewind_interrupted(struct parked_thread *t)
{
    ucontext_t *uc = (ucontext_t *)t->rec->ucontext;
    greg_t *g = uc->uc_mcontext.gregs;
    if (getenv("CRAC_DEBUG"))
        fprintf(stderr, "crac: debug: tid %d blocked in %ld at %lx; frame rax %lld rip %llx\n",
                t->tid, t->blocked_nr, (unsigned long)t->blocked_pc, (long long)g[REG_RAX],
                (unsigned long long)g[REG_RIP]);
    if (t->blocked_nr < 0 && (t->blocked_nr = entered_wait(g)) >= 0)
        t->blocked_pc = (uint64_t)g[REG_RIP];
    if (t->blocked_nr < 0 || g[REG_RAX] != -EINTR || (uint64_t)g[REG_RIP] != t->blocked_pc)
        return;
    if (t->blocked_nr == SYS_nanosleep && g[REG_RSI])
        g[REG_RDI] = g[REG_RSI];
    else if (t->blocked_nr == SYS_clock_nanosleep && !(g[REG_RSI] & TIMER_ABSTIME) && g[REG_R10])
        g[REG_RDX] = g[REG_R10];
    g[REG_RAX] = t->blocked_nr;
    g[REG_RIP] -= 2;
}

/* The program's dmtcp_disable_ckpt() sections defer a checkpoint for as long as they last, as
 * under DMTCP: no timeout, a note after a while so a stuck section is visible. */
static void wait_sections(struct crac_registry *r)
{
    __atomic_store_n(&r->holding, 1, __ATOMIC_SEQ_CST);
    int noted = 0;
    for (int waited = 0;; waited += 100) {
        int32_t open = __atomic_load_n(&r->sections, __ATOMIC_SEQ_CST);
        if (open <= 0)
            return;
        if (waited >= 10000 && !noted) {
            fprintf(stderr, "crac: note: the checkpoint waits for the program to leave its "
                            "dmtcp_disable_ckpt() section\n");
            noted = 1;
        }
        struct timespec t = {0, 100 * 1000000L};
        raw_futex_wait(&r->sections, open, &t);
    }
}

static int quiesce(void)
{
    volatile int32_t *pending = lh_gate_pending(), *inside = lh_gate_inside();
    wait_sections(ckpt_registry);
    ckpt_request_committed(); /* an exec now waits for this checkpoint (tree_exec.c) */
    __atomic_store_n(pending, 1, __ATOMIC_SEQ_CST);
    for (int waited = 0; __atomic_load_n(inside, __ATOMIC_SEQ_CST) > 0; waited++) {
        if (waited >= QUIESCE_TIMEOUT_MS) {
            fprintf(stderr,
                    "crac: error: checkpoint abandoned: a thread stayed inside the lower "
                    "half (a CUDA call) for %d s\n",
                    QUIESCE_TIMEOUT_MS / 1000);
            return -1;
        }
        sleep_ms(1);
    }
    return 0;
}

static void unquiesce(void)
{
    volatile int32_t *pending = lh_gate_pending();
    struct crac_registry *r = ckpt_registry;
    __atomic_store_n(&r->holding, 0, __ATOMIC_SEQ_CST);
    raw_futex_wake(&r->holding, RAW_WAKE_ALL);
    __atomic_store_n(pending, 0, __ATOMIC_SEQ_CST);
    raw_futex_wake_shared(pending, RAW_WAKE_ALL); /* the gate waits with plain futex */
}

int ckpt_suspend_all(struct parked_thread *ts, int max, int *count)
{
    struct crac_registry *r = ckpt_registry;
    *count = 0;
    if (quiesce() != 0) {
        unquiesce();
        return -1;
    }
    /* Drain the device while the program's threads still run (a stream may wait for a host
     * function that an upper thread executes): no kernel is ever saved mid-flight. */
    if (ckpt_backend && ckpt_backend->quiesce && ckpt_backend->quiesce() != 0) {
        fprintf(stderr, "crac: error: checkpoint abandoned: the device could not be drained\n");
        unquiesce();
        return -1;
    }
    __atomic_store_n(&r->parked, 0, __ATOMIC_SEQ_CST);
    pending_lend(r); /* each thread notes its own queued signals as it suspends */
    /* Parked threads cannot create new ones, so rescanning until nothing is new terminates. */
    for (;;) {
        int added = signal_new_threads(ts, count, max);
        if (added < 0 || wait_parked(ts, count) != 0) {
            ckpt_release_all();
            return -1;
        }
        if (added == 0)
            break;
    }
    for (int i = 0; i < *count; i++) {
        ts[i].rec = NULL;
        for (int k = 0; k < CRAC_MAX_THREADS; k++) {
            struct crac_thread_rec *rec = &r->threads[k];
            /* Records hold the tid the program knows; /proc the kernel's. */
            if (rec->state == CRAC_SLOT_PARKED && vid_to_real(crac_ctrl(), rec->tid) == ts[i].tid) {
                ts[i].rec = rec;
                break;
            }
        }
        if (!ts[i].rec) {
            fprintf(stderr,
                    "crac: error: checkpoint abandoned: thread %d parked without a record\n",
                    ts[i].tid);
            ckpt_release_all();
            return -1;
        }
        rewind_interrupted(&ts[i]);
        /* The real vDSO is not saved, and a restart's is elsewhere: its call starts again. */
        if (vdso_proxy_rollback((void *)ts[i].rec->ucontext) && getenv("CRAC_DEBUG"))
            fprintf(stderr, "crac: debug: tid %d was inside the vDSO: its call starts again\n",
                    ts[i].tid);
        struct {
            uint64_t head, len;
        } robust = {0, 0};
        raw_syscall3(SYS_get_robust_list, ts[i].tid, &robust.head, &robust.len);
        ts[i].rec->robust_head = robust.head;
        ts[i].rec->robust_len = robust.len;
    }
    return 0;
}

void ckpt_release_all(void)
{
    struct crac_registry *r = ckpt_registry;
    __atomic_add_fetch(&r->release_gen, 1, __ATOMIC_SEQ_CST);
    raw_futex_wake(&r->release_gen, RAW_WAKE_ALL);
    unquiesce();
}
