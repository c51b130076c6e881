/* ckpt_tid_calls [STEPS=100]: system calls that take a pid or tid, given the ids the program
   knows (getpid, gettid, a worker's tid): scheduling, affinity, priority, prlimit, io priority,
   timer_create(SIGEV_THREAD_ID), pidfd_open, process_vm_readv on itself, getpgid/getsid, the
   owner of a descriptor's SIGIO (fcntl F_SETOWN/F_GETOWN and their _EX forms). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PROG "ckpt_tid_calls"
#define USAGE "[STEPS]"
#include "ckpt_common.h"

#define IOPRIO_WHO_PROCESS 1
#define WORKER_NICE 3

static atomic_int worker_stop, worker_tid;

static void *worker(void *arg)
{
    (void)arg;
    atomic_store(&worker_tid, gettid());
    while (!atomic_load(&worker_stop)) {
        struct timespec req = {0, 2 * 1000000L};
        nanosleep(&req, NULL);
    }
    return NULL;
}

static void check_tid(long k, const char *who, pid_t tid, const cpu_set_t *all)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    if (sched_getaffinity(tid, sizeof s, &s) != 0)
        fail("step %ld: sched_getaffinity(%s %d): %s", k, who, tid, strerror(errno));
    if (!CPU_EQUAL(&s, all))
        fail("step %ld: sched_getaffinity(%s) gave another set", k, who);
    if (sched_setaffinity(tid, sizeof s, &s) != 0)
        fail("step %ld: sched_setaffinity(%s %d): %s", k, who, tid, strerror(errno));
    struct sched_param sp;
    if (sched_getparam(tid, &sp) != 0 || sp.sched_priority != 0)
        fail("step %ld: sched_getparam(%s %d): %s", k, who, tid, strerror(errno));
    if (sched_setparam(tid, &sp) != 0)
        fail("step %ld: sched_setparam(%s %d): %s", k, who, tid, strerror(errno));
    int pol = sched_getscheduler(tid);
    if (pol != SCHED_OTHER)
        fail("step %ld: sched_getscheduler(%s %d) = %d: %s", k, who, tid, pol, strerror(errno));
    if (sched_setscheduler(tid, SCHED_OTHER, &sp) != 0)
        fail("step %ld: sched_setscheduler(%s %d): %s", k, who, tid, strerror(errno));
    struct timespec rr;
    if (sched_rr_get_interval(tid, &rr) != 0)
        fail("step %ld: sched_rr_get_interval(%s %d): %s", k, who, tid, strerror(errno));
    struct rlimit rl;
    if (prlimit(tid, RLIMIT_NOFILE, NULL, &rl) != 0)
        fail("step %ld: prlimit(%s %d): %s", k, who, tid, strerror(errno));
    long io = syscall(SYS_ioprio_get, IOPRIO_WHO_PROCESS, tid);
    if (io < 0)
        fail("step %ld: ioprio_get(%s %d): %s", k, who, tid, strerror(errno));
    if (syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, tid, io) != 0)
        fail("step %ld: ioprio_set(%s %d): %s", k, who, tid, strerror(errno));
}

int main(int argc, char **argv)
{
    long steps = arg(argc, argv, 1, 100, 1, 1000000);
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0)
        fail("sched_getaffinity(0): %s", strerror(errno));
    pthread_t w;
    int rc = pthread_create(&w, NULL, worker, NULL);
    if (rc != 0)
        fail("pthread_create: %s", strerror(rc));
    struct watchdog wd;
    wd_start(&wd);
    while (!atomic_load(&worker_tid)) {
        struct timespec req = {0, 1000000L};
        nanosleep(&req, NULL);
        if (wd_expired(&wd, 30))
            fail("the worker never started");
    }
    pid_t wtid = atomic_load(&worker_tid);
    pid_t pgid0 = getpgid(0), sid0 = getsid(0);
    static volatile uint64_t secret = 0x5ec12e7;
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0)
        fail("pipe: %s", strerror(errno));
    for (long k = 1; k <= steps; k++) {
        pid_t pid = getpid(), tid = gettid();
        check_tid(k, "the main thread", tid, &all);
        check_tid(k, "the process", pid, &all);
        check_tid(k, "the worker", wtid, &all);
        cpu_set_t s;
        if ((rc = pthread_getaffinity_np(w, sizeof s, &s)) != 0)
            fail("step %ld: pthread_getaffinity_np(worker): %s", k, strerror(rc));
        if ((rc = pthread_setaffinity_np(w, sizeof s, &s)) != 0)
            fail("step %ld: pthread_setaffinity_np(worker): %s", k, strerror(rc));
        struct sched_param sp = {0};
        int pol;
        if ((rc = pthread_setschedparam(w, SCHED_OTHER, &sp)) != 0 ||
            (rc = pthread_getschedparam(w, &pol, &sp)) != 0)
            fail("step %ld: pthread_{set,get}schedparam(worker): %s", k, strerror(rc));
        /* The worker's nice value, set and read back by its tid. */
        if (setpriority(PRIO_PROCESS, (id_t)wtid, WORKER_NICE) != 0)
            fail("step %ld: setpriority(worker %d): %s", k, wtid, strerror(errno));
        errno = 0;
        int nice = getpriority(PRIO_PROCESS, (id_t)wtid);
        if (errno != 0 || nice != WORKER_NICE)
            fail("step %ld: getpriority(worker %d) = %d: %s", k, wtid, nice, strerror(errno));
        errno = 0;
        getpriority(PRIO_PROCESS, (id_t)pid);
        if (errno != 0)
            fail("step %ld: getpriority(getpid() %d): %s", k, pid, strerror(errno));
        /* A POSIX timer aimed at the worker thread. */
        struct sigevent ev;
        memset(&ev, 0, sizeof ev);
        ev.sigev_notify = SIGEV_THREAD_ID;
        ev.sigev_signo = SIGUSR1;
        ev._sigev_un._tid = wtid;
        timer_t t;
        if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0)
            fail("step %ld: timer_create(SIGEV_THREAD_ID worker %d): %s", k, wtid, strerror(errno));
        timer_delete(t);
        int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pfd < 0)
            fail("step %ld: pidfd_open(getpid() %d): %s", k, pid, strerror(errno));
        close(pfd);
        uint64_t got = 0;
        struct iovec local = {&got, sizeof got}, remote = {(void *)&secret, sizeof secret};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n != (ssize_t)sizeof got || got != secret)
            fail("step %ld: process_vm_readv(getpid() %d) = %zd: %s", k, pid, n, strerror(errno));
        if (getpgid(pid) != pgid0 && getpgid(pid) != getpgid(0))
            fail("step %ld: getpgid(getpid() %d): %s", k, pid, strerror(errno));
        if (getsid(pid) != sid0 && getsid(pid) != getsid(0))
            fail("step %ld: getsid(getpid() %d): %s", k, pid, strerror(errno));
        /* Who gets SIGIO for a descriptor: the process, then the worker thread. */
        if (fcntl(pipe_fds[0], F_SETOWN, pid) != 0)
            fail("step %ld: fcntl(F_SETOWN, getpid() %d): %s", k, pid, strerror(errno));
        if (fcntl(pipe_fds[0], F_GETOWN) != pid)
            fail("step %ld: fcntl(F_GETOWN) = %d, not getpid() %d", k, fcntl(pipe_fds[0], F_GETOWN),
                 pid);
        struct f_owner_ex owner = {F_OWNER_TID, wtid};
        if (fcntl(pipe_fds[0], F_SETOWN_EX, &owner) != 0)
            fail("step %ld: fcntl(F_SETOWN_EX, worker %d): %s", k, wtid, strerror(errno));
        memset(&owner, 0, sizeof owner);
        if (fcntl(pipe_fds[0], F_GETOWN_EX, &owner) != 0 || owner.type != F_OWNER_TID ||
            owner.pid != wtid)
            fail("step %ld: fcntl(F_GETOWN_EX) gave type %d pid %d, not the worker %d", k,
                 owner.type, owner.pid, wtid);
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
