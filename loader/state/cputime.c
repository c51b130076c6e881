/* cputime.c — the CPU clocks the program reads (the process's and each thread's) go on from their
 * checkpoint values across a restart: the offsets the trap handler adds, kept in the control block. */
#include "state.h"

#include "confine.h"
#include "crac_layout.h"
#include "upper_alloc.h"

#include <string.h>
#include <time.h>

#define THREAD_SCHED 6 /* the low bits of a thread's CPU clock that counts its run time */

static int64_t cpu_ns(clockid_t clk)
{
    struct timespec t;
    if (clock_gettime(clk, &t) != 0)
        return 0;
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The control block is saved with the image (upper memory): no note of its own. */
int cputime_capture(const struct state_capture *cap, void **blob, size_t *len)
{
    static struct crac_tcpu next[CRAC_MAX_TCPU];
    const struct parked_thread *ts = cap->threads;
    struct crac_ctrl *c = crac_ctrl();
    c->cpu_ckpt_ns = cpu_ns(CLOCK_PROCESS_CPUTIME_ID) + c->cpu_offset_ns;
    int k = 0;
    for (int i = 0; i < cap->n_threads && k < CRAC_MAX_TCPU; i++) {
        int32_t tid = ts[i].rec->tid;
        int64_t off = cpu_thread_offset(c, tid); /* the process that goes on keeps it */
        int64_t ns = cpu_ns(cpuclock_with_id(THREAD_SCHED, ts[i].tid)) + off;
        next[k++] = (struct crac_tcpu){tid, 0, ns, off};
    }
    memcpy(c->tcpu, next, (size_t)k * sizeof(next[0]));
    c->n_tcpu = (uint32_t)k;
    *blob = NULL;
    *len = 0;
    return 0;
}

int cputime_restore(const struct state_restore *r, const void *note, size_t len)
{
    (void)note, (void)len;
    struct crac_ctrl *c = crac_ctrl();
    c->cpu_offset_ns = c->cpu_ckpt_ns - cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    for (uint32_t k = 0; k < c->n_tcpu && k < CRAC_MAX_TCPU; k++) {
        int32_t now = r->map_tid(c->tcpu[k].tid);
        c->tcpu[k].offset_ns =
            now ? c->tcpu[k].ckpt_ns - cpu_ns(cpuclock_with_id(THREAD_SCHED, now)) : 0;
    }
    return 0;
}
