/* ckpt_sched.c — threads with their own nice values and scheduling policies (Linux keeps both per
   thread): the main thread 2 nicer than it started, a worker 5 nicer under SCHED_BATCH, another
   under SCHED_IDLE; every step each thread checks its own, so a restart that gave them back the
   restarting process's fails the program. */
#define _GNU_SOURCE
#define PROG "ckpt_sched"
#define USAGE "[STEPS] [MS]"
#include "ckpt_common.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>

static int base_nice;
static atomic_long worker_step[2];
static atomic_int stop;

static int capped(int n) { return n > 19 ? 19 : n; }

static void check_self(const char *who, long k, int nice, int policy)
{
    errno = 0;
    int now = getpriority(PRIO_PROCESS, 0);
    if (now != nice || errno)
        fail("step %ld: %s: nice %d, expected %d", k, who, now, nice);
    if (sched_getscheduler(0) != policy)
        fail("step %ld: %s: policy %d, expected %d", k, who, sched_getscheduler(0), policy);
}

struct worker {
    int index, nice, policy;
    const char *name;
};

static void *worker_main(void *arg)
{
    const struct worker *w = arg;
    struct sched_param p = {0};
    if (setpriority(PRIO_PROCESS, 0, w->nice) != 0 || sched_setscheduler(0, w->policy, &p) != 0)
        fail("%s: %s", w->name, strerror(errno));
    for (long k = 1; !atomic_load(&stop); k++) {
        check_self(w->name, k, w->nice, w->policy);
        atomic_store(&worker_step[w->index], k);
        ckpt_sleep_ms(5);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 60, 1, 1000000);
    long ms = arg(argc, argv, 2, 25, 0, 100000);
    errno = 0;
    base_nice = getpriority(PRIO_PROCESS, 0);
    if (errno)
        fail("getpriority: %s", strerror(errno));
    struct worker ws[2] = {{0, capped(base_nice + 5), SCHED_BATCH, "batch worker"},
                           {1, capped(base_nice + 3), SCHED_IDLE, "idle worker"}};
    pthread_t ts[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&ts[i], NULL, worker_main, &ws[i]) != 0)
            fail("pthread_create");
    int mine = capped(base_nice + 2);
    if (setpriority(PRIO_PROCESS, 0, mine) != 0)
        fail("setpriority: %s", strerror(errno));
    for (long k = 1; k <= steps; k++) {
        check_self("main thread", k, mine, SCHED_OTHER);
        /* The workers have checked themselves since the last step (they run, and are checked). */
        long seen[2] = {atomic_load(&worker_step[0]), atomic_load(&worker_step[1])};
        struct watchdog wd;
        wd_start(&wd);
        while (atomic_load(&worker_step[0]) == seen[0] || atomic_load(&worker_step[1]) == seen[1])
            if (wd_expired(&wd, 120))
                fail("step %ld: a worker stopped checking itself", k);
            else
                ckpt_sleep_ms(1);
        step_line(k);
        ckpt_sleep_ms(ms);
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(ts[i], NULL);
    printf("DONE steps=%ld\n", steps);
    return 0;
}
