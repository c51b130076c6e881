/* image_proc.c — process-wide state saved beside memory: signal dispositions, interval timers and
 * POSIX timers (from /proc/self/timers), resource limits, and restoring them at restart. */
#include "ckpt.h"

#include "confine.h"
#include "crac_layout.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>

#define MAX_POSIX_TIMERS 256
#define PR_TIMER_CREATE_RESTORE_IDS 77 /* Linux 6.15+, not in older headers */
#define PR_TIMER_CREATE_RESTORE_IDS_ON 1

static int reserved(int sig)
{
    return (crac_ctrl()->reserved_sigs >> (sig - 1)) & 1;
}

int proc_capture_signals(void **out, size_t *len)
{
    struct crac_signal_rec *recs = calloc(65, sizeof(*recs));
    if (!recs)
        return -1;
    /* Reserved signals are kept virtually in the control block (upper memory) already. */
    for (int sig = 1; sig <= 64; sig++)
        if (sig != SIGKILL && sig != SIGSTOP && !reserved(sig))
            raw_syscall4(SYS_rt_sigaction, sig, 0, &recs[sig], 8);
    *out = recs;
    *len = 65 * sizeof(*recs);
    return 0;
}

/* glibc keeps signals 32 (SIGCANCEL: pthread_cancel) and 33 (SIGSETXID: setuid and friends in
 * a multi-threaded program) for itself and installs their handlers once, lazily. The program's
 * glibc never installs them again after a restart, so what it had installed is put back; where it
 * had installed nothing, the restart's own disposition stays (the loader's glibc may use them). */
static int glibc_internal(int sig) { return sig == 32 || sig == 33; }

int proc_restore_signals(const struct crac_signal_rec *recs)
{
    for (int sig = 1; sig <= 64; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP || reserved(sig))
            continue;
        if (glibc_internal(sig) && recs[sig].handler == (uint64_t)SIG_DFL)
            continue;
        long r = raw_syscall4(SYS_rt_sigaction, sig, &recs[sig], 0, 8);
        if (r < 0)
            return (int)r;
    }
    return 0;
}

static int64_t cpu_ns(clockid_t clk)
{
    struct timespec t;
    if (clock_gettime(clk, &t) != 0)
        return 0;
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

#define THREAD_SCHED 6 /* the low bits of a thread's CPU clock that counts its run time */

/* The program's CPU time, the process's and each thread's, goes on from where it stood at the
 * checkpoint, not from 0 (the trap handler adds the offsets to what it reads). The control
 * block is saved with the image. */
void proc_capture_cputime(const struct parked_thread *ts, int n)
{
    static struct crac_tcpu next[CRAC_MAX_TCPU];
    struct crac_ctrl *c = crac_ctrl();
    c->cpu_ckpt_ns = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) + c->cpu_offset_ns;
    int k = 0;
    for (int i = 0; i < n && k < CRAC_MAX_TCPU; i++) {
        int32_t tid = ts[i].rec->tid;
        int64_t off = cpu_thread_offset(c, tid); /* the process that goes on keeps it */
        int64_t ns = cpu_ns(cpuclock_with_id(THREAD_SCHED, ts[i].tid)) + off;
        next[k++] = (struct crac_tcpu){tid, 0, ns, off};
    }
    memcpy(c->tcpu, next, (size_t)k * sizeof(next[0]));
    c->n_tcpu = (uint32_t)k;
}

void proc_restore_cputime(tid_map_fn map_tid)
{
    struct crac_ctrl *c = crac_ctrl();
    c->cpu_offset_ns = c->cpu_ckpt_ns - cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (uint32_t k = 0; k < c->n_tcpu && k < CRAC_MAX_TCPU; k++) {
        int32_t now = map_tid(c->tcpu[k].tid);
        c->tcpu[k].offset_ns =
            now ? c->tcpu[k].ckpt_ns - cpu_ns(cpuclock_with_id(THREAD_SCHED, now)) : 0;
    }
}

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

int proc_capture_pending(const struct parked_thread *ts, int n, void **out, size_t *len)
{
    size_t size = sizeof(struct crac_pending_rec) + (size_t)n * sizeof(struct crac_pending_thread);
    struct crac_pending_rec *p = calloc(1, size);
    if (!p)
        return -1;
    uint64_t reserved = crac_ctrl()->reserved_sigs;
    p->shared = status_mask("/proc/self/status", "ShdPnd") & ~reserved;
    struct crac_pending_thread *t = (struct crac_pending_thread *)(p + 1);
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/task/%d/status", ts[i].tid);
        t[i].tid = ts[i].rec->tid;
        t[i].mask = status_mask(path, "SigPnd") & ~reserved;
    }
    p->n_threads = (uint32_t)n;
    *out = p;
    *len = size;
    return 0;
}

void proc_restore_pending(const struct crac_pending_rec *p, size_t len, tid_map_fn map_tid)
{
    if (!p || len < sizeof(*p))
        return;
    pid_t pid = getpid();
    for (int sig = 1; sig <= 64; sig++)
        if (p->shared >> (sig - 1) & 1)
            raw_syscall2(SYS_kill, pid, sig);
    const struct crac_pending_thread *t = (const void *)(p + 1);
    for (uint32_t i = 0; i < p->n_threads && sizeof(*p) + (i + 1) * sizeof(*t) <= len; i++)
        for (int sig = 1; sig <= 64; sig++)
            if (t[i].mask >> (sig - 1) & 1)
                raw_syscall3(SYS_tgkill, pid, map_tid(t[i].tid), sig);
}

static int64_t ts_ns(const struct timespec *t) { return t->tv_sec * 1000000000LL + t->tv_nsec; }

static struct timespec ns_ts(int64_t ns)
{
    return (struct timespec){ns / 1000000000LL, ns % 1000000000LL};
}

/* /proc/self/timers: "ID: n", "signal: s/ptr", "notify: signal|thread|none/pid.N|tid.N",
 * "ClockID: c" for each POSIX timer. */
static int parse_timers(struct crac_posix_timer_rec *out, int max)
{
    FILE *f = fopen("/proc/self/timers", "re");
    if (!f)
        return 0;
    char line[256], how[32], who[16];
    int n = -1;
    while (fgets(line, sizeof(line), f)) {
        int v;
        unsigned long ptr;
        if (sscanf(line, "ID: %d", &v) == 1) {
            if (n + 1 >= max)
                break;
            memset(&out[++n], 0, sizeof(out[0]));
            out[n].id = v;
        } else if (n >= 0 && sscanf(line, "signal: %d/%lx", &v, &ptr) == 2) {
            out[n].signo = v;
            out[n].sigval = ptr;
        } else if (n >= 0 && sscanf(line, "notify: %31[a-z]/%15[a-z].%d", how, who, &v) == 3) {
            out[n].notify = strcmp(how, "none") == 0     ? SIGEV_NONE
                            : strcmp(who, "tid") == 0    ? SIGEV_THREAD_ID
                                                         : SIGEV_SIGNAL;
            out[n].notify_tid = vid_from_real(crac_ctrl(), v); /* the id the program knows */
        } else if (n >= 0 && sscanf(line, "ClockID: %d", &v) == 1) {
            /* A CPU clock names the kernel's id: keep the one the program knows. */
            out[n].clockid = cpuclock_names_id(v)
                                 ? cpuclock_with_id(v, vid_from_real(crac_ctrl(), cpuclock_id(v)))
                                 : v;
        }
    }
    fclose(f);
    return n + 1;
}

int proc_capture_timers(void **out, size_t *len)
{
    size_t size = sizeof(struct crac_timers_rec) + MAX_POSIX_TIMERS * sizeof(struct crac_posix_timer_rec);
    struct crac_timers_rec *t = calloc(1, size);
    if (!t)
        return -1;
    for (int which = 0; which < 3; which++) {
        struct itimerval v;
        getitimer(which, &v);
        t->itimer[which][0] = (uint64_t)v.it_interval.tv_sec;
        t->itimer[which][1] = (uint64_t)v.it_interval.tv_usec;
        t->itimer[which][2] = (uint64_t)v.it_value.tv_sec;
        t->itimer[which][3] = (uint64_t)v.it_value.tv_usec;
    }
    struct crac_posix_timer_rec *p = (struct crac_posix_timer_rec *)(t + 1);
    int n = parse_timers(p, MAX_POSIX_TIMERS);
    for (int i = 0; i < n; i++) {
        struct itimerspec spec;
        if (raw_syscall2(SYS_timer_gettime, p[i].id, &spec) == 0) {
            p[i].interval_ns = ts_ns(&spec.it_interval);
            p[i].value_ns = ts_ns(&spec.it_value);
        }
    }
    t->n_posix = (uint32_t)n;
    *out = t;
    *len = sizeof(*t) + (size_t)n * sizeof(*p);
    return 0;
}

int proc_restore_timers(const struct crac_timers_rec *t, tid_map_fn map_tid, char *err,
                        size_t errlen)
{
    for (int which = 0; which < 3; which++) {
        struct itimerval v = {{(time_t)t->itimer[which][0], (suseconds_t)t->itimer[which][1]},
                              {(time_t)t->itimer[which][2], (suseconds_t)t->itimer[which][3]}};
        if (v.it_value.tv_sec || v.it_value.tv_usec)
            setitimer(which, &v, NULL);
    }
    if (!t->n_posix)
        return 0;
    /* Timer ids are what the program holds: ask the kernel to hand out the recorded ones. */
    int restore_ids = prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_ON, 0, 0, 0) == 0;
    const struct crac_posix_timer_rec *p = (const void *)(t + 1);
    for (uint32_t i = 0; i < t->n_posix; i++) {
        struct sigevent ev;
        memset(&ev, 0, sizeof(ev));
        ev.sigev_notify = p[i].notify;
        ev.sigev_signo = p[i].signo;
        ev.sigev_value.sival_ptr = (void *)p[i].sigval;
        if (p[i].notify == SIGEV_THREAD_ID)
            ev._sigev_un._tid = map_tid(p[i].notify_tid);
        int id = restore_ids ? p[i].id : -1;
        int32_t clk = p[i].clockid, now_id; /* another process's CPU clock stays as it is */
        if (cpuclock_names_id(clk) && (now_id = map_tid(cpuclock_id(clk))) != 0)
            clk = cpuclock_with_id(clk, now_id);
        long r = raw_syscall3(SYS_timer_create, clk, &ev, &id);
        if (r != 0 || id != p[i].id) {
            snprintf(err, errlen, "cannot recreate POSIX timer %d (%s)", p[i].id,
                     restore_ids ? "the kernel refused it" : "kernel lacks PR_TIMER_CREATE_RESTORE_IDS");
            return -1;
        }
        struct itimerspec spec = {ns_ts(p[i].interval_ns), ns_ts(p[i].value_ns)};
        if (p[i].value_ns)
            raw_syscall4(SYS_timer_settime, id, 0, &spec, 0);
    }
    prctl(PR_TIMER_CREATE_RESTORE_IDS, 0, 0, 0, 0);
    return 0;
}

int proc_capture_rlimits(void **out, size_t *len)
{
    struct crac_rlimit_rec *r = calloc(CRAC_N_RLIMITS, sizeof(*r));
    if (!r)
        return -1;
    for (int res = 0; res < CRAC_N_RLIMITS; res++) {
        struct rlimit l;
        if (getrlimit(res, &l) != 0) {
            free(r);
            return -1;
        }
        r[res] = (struct crac_rlimit_rec){l.rlim_cur, l.rlim_max};
    }
    *out = r;
    *len = CRAC_N_RLIMITS * sizeof(*r);
    return 0;
}

static const char *const rlimit_names[CRAC_N_RLIMITS] = {
    "CPU", "FSIZE", "DATA", "STACK", "CORE", "RSS", "NPROC", "NOFILE",
    "MEMLOCK", "AS", "LOCKS", "SIGPENDING", "MSGQUEUE", "NICE", "RTPRIO", "RTTIME"};

static void limit_str(char *buf, size_t n, uint64_t v)
{
    if (v == (uint64_t)RLIM_INFINITY)
        snprintf(buf, n, "unlimited");
    else
        snprintf(buf, n, "%llu", (unsigned long long)v);
}

/* Lowering always works; raising a hard limit needs CAP_SYS_RESOURCE, which the restarting user
 * may lack where the checkpointing one had it or ran under higher limits. Such a limit keeps the
 * hard value it has here, its soft value capped under it, and one line says which. */
void proc_restore_rlimits(const struct crac_rlimit_rec *r, size_t len)
{
    if (!r || len < CRAC_N_RLIMITS * sizeof(*r))
        return;
    char refused[1024] = "";
    size_t used = 0;
    for (int res = 0; res < CRAC_N_RLIMITS; res++) {
        struct rlimit want = {r[res].cur, r[res].max}, now;
        if (getrlimit(res, &now) != 0 ||
            (now.rlim_cur == want.rlim_cur && now.rlim_max == want.rlim_max))
            continue;
        if (setrlimit(res, &want) == 0)
            continue;
        struct rlimit capped = {want.rlim_cur < now.rlim_max ? want.rlim_cur : now.rlim_max,
                                now.rlim_max};
        setrlimit(res, &capped);
        char a[24], b[24];
        limit_str(a, sizeof(a), want.rlim_max);
        limit_str(b, sizeof(b), now.rlim_max);
        int w = snprintf(refused + used, sizeof(refused) - used, "%s%s %s (stays %s)",
                         used ? ", " : "", rlimit_names[res], a, b);
        if (w > 0 && (size_t)w < sizeof(refused) - used)
            used += (size_t)w;
    }
    if (used)
        fprintf(stderr,
                "crac: warning: cannot raise hard resource limits back to the checkpointed "
                "values: %s\n",
                refused);
}
