/* ckpt_cpuclock [STEPS=100]: the CPU-time clocks of the process and of its threads, by the ids
   clock_getcpuclockid/pthread_getcpuclockid give (they encode the pid/tid), keep working across
   restarts: clock_gettime, clock_getres, clock_nanosleep, timer_create on them, timers made on
   them before a checkpoint; and the process's CPU time (CLOCK_PROCESS_CPUTIME_ID, clock()) never
   goes backwards, nor does any thread's. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_cpuclock"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

static atomic_int worker_stop, worker_started;

static void *worker(void *arg)
{
    (void)arg;
    atomic_store(&worker_started, 1);
    while (!atomic_load(&worker_stop)) {
        struct timespec req = {0, 2 * 1000000L};
        nanosleep(&req, NULL);
    }
    return NULL;
}

static int64_t ns_of(const struct timespec *t) { return t->tv_sec * 1000000000LL + t->tv_nsec; }

static int64_t read_clock(long k, const char *what, clockid_t id)
{
    struct timespec t;
    if (clock_gettime(id, &t) != 0)
        fail("step %ld: clock_gettime(%s, clock id %d): %s", k, what, (int)id, strerror(errno));
    return ns_of(&t);
}

/* A little CPU time, so the process clock moves between steps. */
static volatile uint64_t sink;
static void burn(void)
{
    uint64_t h = 1;
    for (int i = 0; i < 200000; i++)
        h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = h;
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    pthread_t w;
    int rc = pthread_create(&w, NULL, worker, NULL);
    if (rc != 0)
        fail("pthread_create: %s", strerror(rc));
    struct watchdog wd;
    wd_start(&wd);
    while (!atomic_load(&worker_started)) {
        struct timespec req = {0, 1000000L};
        nanosleep(&req, NULL);
        if (wd_expired(&wd, 30))
            fail("the worker never started");
    }
    /* Timers on CPU clocks that live across the restarts, never firing. */
    timer_t lasting[2];
    {
        clockid_t ids[2];
        if ((rc = clock_getcpuclockid(getpid(), &ids[0])) != 0 ||
            (rc = pthread_getcpuclockid(w, &ids[1])) != 0)
            fail("getting the CPU clocks: %s", strerror(rc));
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_NONE;
        struct itimerspec far = {{0, 0}, {100000, 0}};
        for (int i = 0; i < 2; i++)
            if (timer_create(ids[i], &ev, &lasting[i]) != 0 ||
                timer_settime(lasting[i], 0, &far, NULL) != 0)
                fail("a lasting timer on CPU clock %d: %s", i, strerror(errno));
    }
    int64_t last_proc = 0, last_thread[3] = {0, 0, 0};
    clock_t last_clock = 0;
    for (long k = 1; k <= steps; k++) {
        burn();
        clockid_t pc, tc, wc;
        if ((rc = clock_getcpuclockid(getpid(), &pc)) != 0)
            fail("step %ld: clock_getcpuclockid(getpid()): %s", k, strerror(rc));
        if ((rc = pthread_getcpuclockid(pthread_self(), &tc)) != 0)
            fail("step %ld: pthread_getcpuclockid(self): %s", k, strerror(rc));
        if ((rc = pthread_getcpuclockid(w, &wc)) != 0)
            fail("step %ld: pthread_getcpuclockid(worker): %s", k, strerror(rc));
        int64_t p = read_clock(k, "process clock of getpid()", pc);
        /* Each thread's CPU time only grows, across restarts too. */
        int64_t th[3] = {read_clock(k, "main thread clock", tc),
                         read_clock(k, "CLOCK_THREAD_CPUTIME_ID", CLOCK_THREAD_CPUTIME_ID),
                         read_clock(k, "worker thread clock", wc)};
        static const char *const th_name[3] = {"the main thread's clock", "CLOCK_THREAD_CPUTIME_ID",
                                               "the worker's clock"};
        for (int i = 0; i < 3; i++) {
            if (th[i] < last_thread[i])
                fail("step %ld: %s went back from %lld to %lld ns", k, th_name[i],
                     (long long)last_thread[i], (long long)th[i]);
            last_thread[i] = th[i];
        }
        struct timespec res;
        if (clock_getres(pc, &res) != 0 || clock_getres(wc, &res) != 0)
            fail("step %ld: clock_getres on a CPU clock: %s", k, strerror(errno));
        /* An absolute time in the past: returns at once. */
        struct timespec past = {0, 1};
        if ((rc = clock_nanosleep(pc, TIMER_ABSTIME, &past, NULL)) != 0)
            fail("step %ld: clock_nanosleep(process CPU clock, past): %s", k, strerror(rc));
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_NONE;
        timer_t t1, t2;
        if (timer_create(pc, &ev, &t1) != 0)
            fail("step %ld: timer_create(process CPU clock): %s", k, strerror(errno));
        if (timer_create(wc, &ev, &t2) != 0)
            fail("step %ld: timer_create(worker CPU clock): %s", k, strerror(errno));
        timer_delete(t1);
        timer_delete(t2);
        for (int i = 0; i < 2; i++) {
            struct itimerspec left;
            if (timer_gettime(lasting[i], &left) != 0 || left.it_value.tv_sec < 90000)
                fail("step %ld: lasting CPU-clock timer %d: %s (%lld s left)", k, i,
                     strerror(errno), (long long)left.it_value.tv_sec);
        }
        /* The process's CPU time only grows, across restarts too. */
        int64_t q = read_clock(k, "CLOCK_PROCESS_CPUTIME_ID", CLOCK_PROCESS_CPUTIME_ID);
        if (q < last_proc)
            fail("step %ld: CLOCK_PROCESS_CPUTIME_ID went back from %lld to %lld ns", k,
                 (long long)last_proc, (long long)q);
        if (p < last_proc)
            fail("step %ld: the process CPU clock of getpid() went back from %lld to %lld ns", k,
                 (long long)last_proc, (long long)p);
        last_proc = q > p ? q : p;
        clock_t c = clock();
        if (c == (clock_t)-1 || c < last_clock)
            fail("step %ld: clock() went back from %ld to %ld", k, (long)last_clock, (long)c);
        last_clock = c;
        step_line(k);
        struct timespec req = {0, 20 * 1000000L};
        nanosleep(&req, NULL);
    }
    atomic_store(&worker_stop, 1);
    if ((rc = pthread_join(w, NULL)) != 0)
        fail("pthread_join: %s", strerror(rc));
    printf("DONE steps=%ld\n", steps);
    return fflush(stdout) == 0 ? 0 : 1;
}
