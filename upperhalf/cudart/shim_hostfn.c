/* shim_hostfn.c — cudaLaunchHostFunc under crac: the lower half's stream worker must not run the
 * program's callback (it would run with the lower half's fs), so it hands the callback to an
 * upper-half executor thread owned by the shim and waits for it, which keeps stream order. */
#include "shim.h"

#include "crac_rawsys.h"
#include "cudart_shim_gen.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

struct upcall {
    struct upcall *next;      /* in the executor's queue */
    struct upcall *free_next; /* in the free stack */
    cudaHostFn_t fn;
    void *data;
    volatile int32_t done; /* futex: 1 once fn returned */
    int persistent;        /* may run again (a graph's): never recycled */
};

static struct upcall *q_head, *q_tail;
static volatile int32_t q_lock; /* a futex lock: the poster may not use pthreads */
static volatile int32_t q_seq;  /* futex the executor sleeps on */
static struct upcall *free_top; /* lock-free pushes (poster), pops under get_lock */
static pthread_mutex_t get_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t executor_pid; /* the process the executor was started in (fork) */

static void futex_wait(volatile int32_t *w, int32_t val)
{
    raw_syscall6(SYS_futex, (long)w, 128 /* FUTEX_WAIT_PRIVATE */, val, 0, 0, 0);
}

static void futex_wake(volatile int32_t *w)
{
    raw_syscall6(SYS_futex, (long)w, 129 /* FUTEX_WAKE_PRIVATE */, 0x7fffffff, 0, 0, 0);
}

/* Lock-free push; TLS-free. */
static void put_upcall(struct upcall *u)
{
    struct upcall *top = __atomic_load_n(&free_top, __ATOMIC_RELAXED);
    do
        u->free_next = top;
    while (!__atomic_compare_exchange_n(&free_top, &top, u, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
}

/* Runs on a lower-half stream worker, with the lower half's fs: TLS-free — atomics and raw
 * futex calls only, no libc (the shim is built with -fno-stack-protector). */
static void upcall_post_and_wait(void *arg)
{
    struct upcall *u = arg;
    __atomic_store_n(&u->done, 0, __ATOMIC_RELAXED);
    u->next = NULL;
    raw_lock(&q_lock);
    if (q_tail)
        q_tail->next = u;
    else
        q_head = u;
    q_tail = u;
    raw_unlock(&q_lock);
    __atomic_add_fetch(&q_seq, 1, __ATOMIC_RELEASE);
    futex_wake(&q_seq);
    while (!__atomic_load_n(&u->done, __ATOMIC_ACQUIRE))
        futex_wait(&u->done, 0);
    if (!u->persistent)
        put_upcall(u); /* the executor no longer touches u */
}

static void *executor_main(void *arg)
{
    (void)arg;
    for (;;) {
        int32_t seen = __atomic_load_n(&q_seq, __ATOMIC_ACQUIRE);
        raw_lock(&q_lock);
        struct upcall *u = q_head;
        if (u) {
            q_head = u->next;
            if (!q_head)
                q_tail = NULL;
        }
        raw_unlock(&q_lock);
        if (!u) {
            futex_wait(&q_seq, seen);
            continue;
        }
        u->fn(u->data);
        __atomic_store_n(&u->done, 1, __ATOMIC_RELEASE);
        futex_wake(&u->done);
    }
    return NULL;
}

/* Under get_lock. Pops are serialised, so the free stack has no ABA problem. */
static struct upcall *get_upcall(void)
{
    struct upcall *top = __atomic_load_n(&free_top, __ATOMIC_ACQUIRE);
    while (top && !__atomic_compare_exchange_n(&free_top, &top, top->free_next, 1, __ATOMIC_ACQUIRE,
                                               __ATOMIC_ACQUIRE))
        ;
    return top ? top : calloc(1, sizeof(struct upcall));
}

static int ensure_executor(void)
{
    pid_t pid = getpid();
    if (executor_pid == pid)
        return 0;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int err = pthread_create(&t, &attr, executor_main, NULL);
    pthread_attr_destroy(&attr);
    if (err)
        return -1;
    executor_pid = pid;
    return 0;
}

cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    struct crac_args_cudaLaunchHostFunc a = {NULL, NULL, NULL};
    struct upcall *u = NULL;
    if (fn) {
        pthread_mutex_lock(&get_lock);
        int ok = ensure_executor() == 0 && (u = get_upcall()) != NULL;
        pthread_mutex_unlock(&get_lock);
        if (!ok)
            return shim_fail(cudaErrorMemoryAllocation);
        u->fn = fn;
        u->data = userData;
        /* Work queued while a capture is going on may become a graph's, run many times. */
        u->persistent = __atomic_load_n(&shim_captures, __ATOMIC_RELAXED) > 0;
        a.fn = upcall_post_and_wait;
        a.userData = u;
    }
    /* Translated inside the gate: a restart in between would change the backend's handle. */
    shim_gate_enter();
    a.stream =
        (cudaStream_t)(uintptr_t)shim_vh_backend(SHIM_VH_STREAM, (uint64_t)(uintptr_t)stream);
    cudaError_t r = (cudaError_t)crac_cross_cudaLaunchHostFunc(&a);
    shim_gate_leave();
    if (r != cudaSuccess && u)
        put_upcall(u);
    return r;
}

/* cudaapi: a host function a graph node runs, possibly many times: the TLS-free trampoline and
 * its argument (never recycled: it lives as long as the process; a graph must not be launched
 * again while a launch of it is still running its host node). */
cudaError_t shim_hostfn_persistent(cudaHostFn_t fn, void *data, cudaHostFn_t *tramp, void **arg)
{
    pthread_mutex_lock(&get_lock);
    struct upcall *u = ensure_executor() == 0 ? calloc(1, sizeof(*u)) : NULL;
    pthread_mutex_unlock(&get_lock);
    if (!u)
        return cudaErrorMemoryAllocation;
    u->fn = fn;
    u->data = data;
    u->persistent = 1;
    *tramp = upcall_post_and_wait;
    *arg = u;
    return cudaSuccess;
}
