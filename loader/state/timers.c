/* timers.c — interval timers (setitimer) and POSIX timers (CRAC_NT_TIMERS): read from getitimer
 * and /proc/self/timers at checkpoint, recreated with their ids and notify targets at restart. */
#include "state.h"

#include "confine.h"
#include "crac_layout.h"
#include "crac_rawsys.h"
#include "upper_alloc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>

#define MAX_POSIX_TIMERS 256
#define PR_TIMER_CREATE_RESTORE_IDS 77 /* Linux 6.15+, not in older headers */
#define PR_TIMER_CREATE_RESTORE_IDS_ON 1

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
            out[n].notify = strcmp(how, "none") == 0  ? SIGEV_NONE
                            : strcmp(who, "tid") == 0 ? SIGEV_THREAD_ID
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

int timers_capture(const struct state_capture *c, void **out, size_t *len)
{
    (void)c;
    size_t size =
        sizeof(struct crac_timers_rec) + MAX_POSIX_TIMERS * sizeof(struct crac_posix_timer_rec);
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

int timers_restore(const struct state_restore *r, const void *note, size_t len)
{
    (void)len; /* the table's min_len: at least the fixed part */
    const struct crac_timers_rec *t = note;
    tid_map_fn map_tid = r->map_tid;
    for (int which = 0; which < 3; which++) {
        struct itimerval v = {{(time_t)t->itimer[which][0], (suseconds_t)t->itimer[which][1]},
                              {(time_t)t->itimer[which][2], (suseconds_t)t->itimer[which][3]}};
        if (v.it_value.tv_sec || v.it_value.tv_usec)
            setitimer(which, &v, NULL);
    }
    if (!t->n_posix)
        return 0;
    /* Timer ids are what the program holds: ask the kernel to hand out the recorded ones. */
    int restore_ids =
        prctl(PR_TIMER_CREATE_RESTORE_IDS, PR_TIMER_CREATE_RESTORE_IDS_ON, 0, 0, 0) == 0;
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
        long made = raw_syscall3(SYS_timer_create, clk, &ev, &id);
        if (made != 0 || id != p[i].id) {
            snprintf(r->err, r->errlen, "cannot recreate POSIX timer %d (%s)", p[i].id,
                     restore_ids ? "the kernel refused it"
                                 : "kernel lacks PR_TIMER_CREATE_RESTORE_IDS");
            return -1;
        }
        struct itimerspec spec = {ns_ts(p[i].interval_ns), ns_ts(p[i].value_ns)};
        if (p[i].value_ns)
            raw_syscall4(SYS_timer_settime, id, 0, &spec, 0);
    }
    prctl(PR_TIMER_CREATE_RESTORE_IDS, 0, 0, 0, 0);
    return 0;
}
