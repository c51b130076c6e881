/* ckpt_tids [STEPS=100]: gettid()==getpid() in main; pthread_kill() of a long-lived worker must reach
   that worker; main holds an error-checking mutex throughout; the worker is joined at the end. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_tids"
#define USAGE "[STEPS]"
#include "ckpt_common.h"
#define JOIN_MAGIC 0x7a11

static pthread_t worker_handle;       /* as pthread_create returned it */
static pthread_t worker_self_initial; /* pthread_self() inside the worker, first thing */
static atomic_int worker_started, worker_stop, worker_bad;
static atomic_int worker_tid;      /* the worker's gettid(), republished every iteration */
static atomic_long worker_checked; /* handler runs the worker has verified */
static volatile sig_atomic_t handled;
static volatile pid_t handler_tid, handler_pid;
static volatile int handler_on_worker;

static void on_usr1(int sig)
{
    (void)sig;
    handler_tid = gettid();
    handler_pid = getpid();
    handler_on_worker = pthread_equal(pthread_self(), worker_self_initial);
    handled++;
}

static void *worker(void *arg)
{
    (void)arg;
    worker_self_initial = pthread_self();
    atomic_store(&worker_tid, gettid());
    sigset_t s; /* created with SIGUSR1 blocked; take it from now on */
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    atomic_store(&worker_started, 1);
    long seen = 0;
    while (!atomic_load(&worker_stop)) {
        pid_t me = gettid();
        atomic_store(&worker_tid, me);
        if (me == getpid())
            atomic_store(&worker_bad, 1); /* a worker is never the thread-group leader */
        if (!pthread_equal(pthread_self(), worker_self_initial))
            atomic_store(&worker_bad, 2);
        if (handled != seen) {
            seen = handled;
            /* (unless a restart fell between the handler and this check: ids are new then) */
            if (handler_pid == getpid() && handler_tid != gettid())
                atomic_store(&worker_bad, 3); /* the handler ran on another kernel thread */
            atomic_store(&worker_checked, seen);
        }
        struct timespec req = {0, 2 * 1000000L};
        nanosleep(&req, NULL); /* SIGUSR1 cuts it short: fine */
    }
    return (void *)(intptr_t)(JOIN_MAGIC + seen);
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    if (gettid() != getpid())
        fail("at start: gettid()=%d getpid()=%d in the main thread", gettid(), getpid());

    struct sigaction a;
    memset(&a, 0, sizeof a);
    a.sa_handler = on_usr1;
    sigemptyset(&a.sa_mask);
    if (sigaction(SIGUSR1, &a, NULL) != 0)
        fail("sigaction: %s", strerror(errno));

    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_t m;
    pthread_mutex_init(&m, &ma);
    int rc = pthread_mutex_lock(&m);
    if (rc != 0)
        fail("pthread_mutex_lock: %s", strerror(rc));

    /* The worker starts with SIGUSR1 blocked and unblocks it once its pthread_self() is recorded. */
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    if ((rc = pthread_create(&worker_handle, NULL, worker, NULL)) != 0)
        fail("pthread_create: %s", strerror(rc));
    /* main keeps SIGUSR1 blocked: pthread_kill targets the worker only */
    struct watchdog wd;
    wd_start(&wd);
    while (!atomic_load(&worker_started)) {
        struct timespec req = {0, 1000000L};
        nanosleep(&req, NULL);
        if (wd_expired(&wd, 30))
            fail("the worker never started");
    }
    if (!pthread_equal(worker_handle, worker_self_initial))
        fail("pthread_create's handle differs from the worker's pthread_self()");

    for (long k = 1; k <= steps; k++) {
        pid_t pid, tid;
        do { /* (a restart between the two calls would change both) */
            pid = getpid();
            tid = gettid();
        } while (pid != getpid());
        if (tid != pid)
            fail("step %ld: gettid()=%d getpid()=%d in the main thread", k, tid, pid);
        if (!pthread_equal(worker_handle, worker_self_initial))
            fail("step %ld: the worker's pthread_t changed", k);

        /* The mutex is still owned by this thread: relocking reports EDEADLK (it checks the owner
           tid stored in the mutex against ours), trylock EBUSY. */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        rc = pthread_mutex_timedlock(&m, &ts);
        if (rc != EDEADLK)
            fail("step %ld: relocking the owned error-checking mutex gave %s, expected EDEADLK", k,
                 rc ? strerror(rc) : "success");
        rc = pthread_mutex_trylock(&m);
        if (rc != EBUSY)
            fail("step %ld: trylock of the owned mutex gave %s, expected EBUSY", k,
                 rc ? strerror(rc) : "success");

        /* pthread_kill must reach the worker (and only the worker). */
        long before = handled;
        rc = pthread_kill(worker_handle, SIGUSR1);
        if (rc != 0)
            fail("step %ld: pthread_kill(worker, SIGUSR1): %s", k, strerror(rc));
        wd_start(&wd);
        while (atomic_load(&worker_checked) <= before) {
            if (atomic_load(&worker_bad))
                break;
            struct timespec req = {0, 500000L};
            nanosleep(&req, NULL);
            if (wd_expired(&wd, 30))
                fail("step %ld: the worker never saw its SIGUSR1 (handled %d)", k, (int)handled);
        }
        if (atomic_load(&worker_bad))
            fail("step %ld: worker check %d failed (1: worker tid is the pid, 2: pthread_self "
                 "changed, 3: the handler ran on tid %d, not the worker's %d)",
                 k, atomic_load(&worker_bad), (int)handler_tid, atomic_load(&worker_tid));
        if (handled != before + 1 || !handler_on_worker || handler_tid == pid)
            fail("step %ld: handled=%d (expected %ld), on worker=%d, handler tid=%d, pid=%d", k,
                 (int)handled, before + 1, handler_on_worker, (int)handler_tid, pid);
        step_line(k);
        struct timespec req = {0, 20 * 1000000L};
        nanosleep(&req, NULL);
    }

    atomic_store(&worker_stop, 1);
    void *ret = NULL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 60;
    rc = pthread_timedjoin_np(worker_handle, &ret, &ts);
    if (rc != 0)
        fail("pthread_join of the worker: %s", strerror(rc));
    if ((intptr_t)ret != JOIN_MAGIC + steps)
        fail("the worker returned %ld, expected %ld", (long)(intptr_t)ret,
             (long)JOIN_MAGIC + steps);
    rc = pthread_mutex_unlock(&m);
    if (rc != 0)
        fail("unlocking the error-checking mutex held since the start: %s", strerror(rc));
    if ((rc = pthread_mutex_lock(&m)) != 0 || (rc = pthread_mutex_unlock(&m)) != 0)
        fail("lock/unlock after the end: %s", strerror(rc));
    if (gettid() != getpid())
        fail("at the end: gettid()=%d getpid()=%d", gettid(), getpid());
    printf("DONE signals=%d joined=%ld\n", (int)handled, (long)(intptr_t)ret - JOIN_MAGIC);
    return fflush(stdout) == 0 ? 0 : 1;
}
