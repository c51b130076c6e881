/* thread_sched.c — each thread's nice value and scheduling policy (CRAC_NT_THREAD_SCHED), per
 * thread as Linux keeps them, given back to the restarted threads (docs/DECISIONS.md "Nice values
 * and scheduling policies"). */
#include "state.h"

#include "crac_image.h"
#include "restart.h"
#include "upper_alloc.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#ifndef SCHED_RESET_ON_FORK
#define SCHED_RESET_ON_FORK 0x40000000
#endif

int thread_sched_capture(const struct state_capture *c, void **out, size_t *len)
{
    struct crac_thread_sched_rec *recs = calloc((size_t)c->n_threads + 1, sizeof(*recs));
    if (!recs)
        return -1;
    int n = 0;
    for (int i = 0; i < c->n_threads; i++) {
        pid_t real = c->threads[i].tid;
        struct sched_param param = {0};
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t)real);
        int policy = sched_getscheduler(real);
        if ((nice == -1 && errno) || policy < 0 || sched_getparam(real, &param) != 0)
            continue; /* gone meanwhile: it is not parked, its record is not saved either */
        recs[n++] = (struct crac_thread_sched_rec){c->threads[i].rec->tid, nice, policy,
                                                   param.sched_priority};
    }
    *out = recs;
    *len = (size_t)n * sizeof(*recs);
    return 0;
}

static const char *policy_name(int policy)
{
    switch (policy & ~SCHED_RESET_ON_FORK) {
    case SCHED_FIFO: return "SCHED_FIFO";
    case SCHED_RR: return "SCHED_RR";
    case SCHED_BATCH: return "SCHED_BATCH";
    case SCHED_IDLE: return "SCHED_IDLE";
    default: return "another policy";
    }
}

/* A thread's nice value comes back when it is higher (nicer) than the one the restart gave it: a
 * lower one would need a privilege, and a restart asked to run nicer (`nice crac restart`) stays
 * so. A policy other than SCHED_OTHER comes back where the kernel allows it (SCHED_BATCH and
 * SCHED_IDLE always; the real-time ones with the privilege), else with a warning. */
int thread_sched_restore(const struct state_restore *r, const void *note, size_t len)
{
    (void)r;
    const struct crac_thread_sched_rec *recs = note;
    for (size_t i = 0; i < len / sizeof(*recs); i++) {
        struct crac_thread_sched_rec s = recs[i];
        pid_t real = vid_to_real(crac_ctrl(), s.tid);
        if ((s.policy & ~SCHED_RESET_ON_FORK) != SCHED_OTHER) {
            struct sched_param param = {.sched_priority = s.priority};
            if (sched_setscheduler(real, s.policy, &param) != 0)
                fprintf(stderr,
                        "crac: warning: thread %d ran under %s, which this restart may not give it "
                        "(%s): it runs under SCHED_OTHER\n",
                        (int)s.tid, policy_name(s.policy), strerror(errno));
        } else if (s.policy & SCHED_RESET_ON_FORK) {
            struct sched_param param = {0};
            sched_setscheduler(real, SCHED_OTHER | SCHED_RESET_ON_FORK, &param);
        }
        errno = 0;
        int now = getpriority(PRIO_PROCESS, (id_t)real);
        if (!(now == -1 && errno) && s.nice > now)
            setpriority(PRIO_PROCESS, (id_t)real, s.nice);
    }
    return 0;
}
