/* upper_executor.h — a call handed from a lower-half thread to an upper executor thread: the
 * cudart shim's host functions (cudart/shim_hostfn.c) and the MPI shim's user operations
 * (mpi/mpi_userop.c). Header-only: each shim library keeps its own queue and executor thread, and
 * the TLS-free poster compiles into the TLS-free file that calls it (build_native.py checks it). */
#ifndef CRAC_UPPER_EXECUTOR_H
#define CRAC_UPPER_EXECUTOR_H

#include "crac_rawsys.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

/* One call, in the poster's memory (its stack or a recycled block) until done is 1. */
struct upper_job {
    struct upper_job *next;
    void (*run)(struct upper_job *); /* on the executor thread, with the upper fs */
    volatile int32_t done;           /* futex: 1 once run returned */
};

struct upper_queue {
    struct upper_job *volatile head;
    struct upper_job *tail;
    volatile int32_t lock; /* a raw futex lock: the poster may not use pthreads */
    volatile int32_t seq;  /* futex the executor sleeps on */
    pid_t executor_pid;    /* the process the executor was started in (a fork's child has none) */
};

/* Runs on a lower-half thread, with the lower half's fs: TLS-free — atomics and raw futex calls
 * only. Queues J and waits until the executor has run it (so a stream keeps its order and a
 * reduction has its result). */
static inline void upper_post_and_wait(struct upper_queue *q, struct upper_job *j)
{
    __atomic_store_n(&j->done, 0, __ATOMIC_RELAXED);
    j->next = 0;
    raw_lock(&q->lock);
    if (q->tail)
        q->tail->next = j;
    else
        q->head = j;
    q->tail = j;
    raw_unlock(&q->lock);
    __atomic_add_fetch(&q->seq, 1, __ATOMIC_RELEASE);
    raw_syscall6(SYS_futex, (long)&q->seq, 129 /* FUTEX_WAKE_PRIVATE */, 1, 0, 0, 0);
    while (!__atomic_load_n(&j->done, __ATOMIC_ACQUIRE))
        raw_syscall6(SYS_futex, (long)&j->done, 128 /* FUTEX_WAIT_PRIVATE */, 0, 0, 0, 0);
}

/* The executor thread: runs the queued jobs in order, forever. Only its poster waits on a job's
 * done, and only the one executor on seq, so waking one is enough. */
static inline void *upper_executor_main(void *arg)
{
    struct upper_queue *q = arg;
    for (;;) {
        int32_t seen = __atomic_load_n(&q->seq, __ATOMIC_ACQUIRE);
        raw_lock(&q->lock);
        struct upper_job *j = q->head;
        if (j) {
            q->head = j->next;
            if (!q->head)
                q->tail = 0;
        }
        raw_unlock(&q->lock);
        if (!j) {
            raw_syscall6(SYS_futex, (long)&q->seq, 128 /* FUTEX_WAIT_PRIVATE */, seen, 0, 0, 0);
            continue;
        }
        j->run(j);
        __atomic_store_n(&j->done, 1, __ATOMIC_RELEASE);
        raw_syscall6(SYS_futex, (long)&j->done, 129 /* FUTEX_WAKE_PRIVATE */, 1, 0, 0, 0);
    }
    return 0;
}

/* Starts Q's executor (a detached upper thread) unless this process has it already: after a
 * fork only the forking thread exists. Not TLS-free; callers serialise it with their own lock.
 * 0, or -1 where pthread_create failed. */
static inline int upper_executor_ensure(struct upper_queue *q)
{
    pid_t pid = getpid();
    if (q->executor_pid == pid)
        return 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int err = pthread_create(&t, &attr, upper_executor_main, q);
    pthread_attr_destroy(&attr);
    if (err)
        return -1;
    q->executor_pid = pid;
    return 0;
}

#endif
