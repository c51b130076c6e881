/* shim_hostfn.c — cudaLaunchHostFunc under crac: the lower half's stream worker must not run the
 * program's callback (it would run with the lower half's fs), so it hands the callback to an
 * upper-half executor thread owned by the shim and waits for it, which keeps stream order. */
#include "shim.h"

#include "../upper_executor.h"
#include "cudart_shim_gen.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct upcall {
    struct upper_job job;     /* first: the executor's job is the upcall */
    struct upcall *free_next; /* in the free stack */
    cudaHostFn_t fn;
    void *data;
    int persistent; /* may run again (a graph's): never recycled */
};

static struct upper_queue queue;
static struct upcall *free_top; /* lock-free pushes (poster), pops under get_lock */
static pthread_mutex_t get_lock = PTHREAD_MUTEX_INITIALIZER;

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
    upper_post_and_wait(&queue, &u->job);
    if (!u->persistent)
        put_upcall(u); /* the executor no longer touches u */
}

/* On the executor thread. */
static void upcall_run(struct upper_job *j)
{
    struct upcall *u = (struct upcall *)j;
    u->fn(u->data);
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

cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void *userData)
{
    struct crac_args_cudaLaunchHostFunc a = {NULL, NULL, NULL};
    struct upcall *u = NULL;
    if (fn) {
        pthread_mutex_lock(&get_lock);
        int ok = upper_executor_ensure(&queue) == 0 && (u = get_upcall()) != NULL;
        pthread_mutex_unlock(&get_lock);
        if (!ok)
            return shim_fail(cudaErrorMemoryAllocation);
        u->job.run = upcall_run;
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
    struct upcall *u = upper_executor_ensure(&queue) == 0 ? calloc(1, sizeof(*u)) : NULL;
    pthread_mutex_unlock(&get_lock);
    if (!u)
        return cudaErrorMemoryAllocation;
    u->job.run = upcall_run;
    u->fn = fn;
    u->data = data;
    u->persistent = 1;
    *tramp = upcall_post_and_wait;
    *arg = u;
    return cudaSuccess;
}
