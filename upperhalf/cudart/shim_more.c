/* shim_more.c — the shim's hand-written cudaapi entries (registered host memory, stream capture,
 * graph host nodes) and their part of a checkpoint and a restart: stream priorities, graphs (saved
 * as bytes in upper memory, rebuilt on the new backend) and registered host ranges. */
#include "shim.h"

#include "cudart_args.h"
#include "cudart_shim_gen.h"
#include "crac_hooks.h"
#include "dalloc.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

extern int crac_upper_hook_register(const char *name, enum crac_event event, int order,
                                    unsigned flags, crac_hook_fn fn, void *arg)
    __attribute__((weak));

int32_t shim_captures;

/* ---- registered host memory: remembered for the restart ---- */

static struct crac_rangeset registered; /* kind: the cudaHostRegister flags */
static pthread_mutex_t registered_lock = PTHREAD_MUTEX_INITIALIZER;

cudaError_t CUDARTAPI cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    struct crac_args_cudaHostRegister a = {ptr, size, flags};
    shim_gate_enter(); /* the range list and the backend change together */
    cudaError_t r = (cudaError_t)crac_cross_cudaHostRegister(&a);
    if (r == cudaSuccess) {
        pthread_mutex_lock(&registered_lock);
        int bad = rangeset_insert(&registered, (uint64_t)(uintptr_t)ptr, size, (int)flags);
        pthread_mutex_unlock(&registered_lock);
        if (bad) {
            struct crac_args_cudaHostUnregister u = {ptr};
            crac_cross_cudaHostUnregister(&u);
            r = shim_fail(cudaErrorMemoryAllocation);
        }
    }
    shim_gate_leave();
    return r;
}

cudaError_t CUDARTAPI cudaHostUnregister(void *ptr)
{
    struct crac_args_cudaHostUnregister a = {ptr};
    shim_gate_enter();
    cudaError_t r = (cudaError_t)crac_cross_cudaHostUnregister(&a);
    if (r == cudaSuccess) {
        struct crac_range_ent e;
        pthread_mutex_lock(&registered_lock);
        rangeset_remove(&registered, (uint64_t)(uintptr_t)ptr, &e);
        pthread_mutex_unlock(&registered_lock);
    }
    shim_gate_leave();
    return r;
}

/* cudaDeviceReset: the backend forgot every registration. */
void shim_registered_reset(void)
{
    pthread_mutex_lock(&registered_lock);
    rangeset_clear(&registered);
    pthread_mutex_unlock(&registered_lock);
}

/* ---- stream capture and graph host nodes ---- */

static cudaStream_t backend_stream(cudaStream_t s)
{
    return (cudaStream_t)(uintptr_t)shim_vh_backend(SHIM_VH_STREAM, (uint64_t)(uintptr_t)s);
}

/* A capture in progress is state of the lower half that a checkpoint does not save: the thread
 * that began it keeps the checkpoint gate until it ends the capture, so a checkpoint requested
 * meanwhile waits for the end of the capture (captures are short; docs/SIM.md). */
static __thread int captures_held;

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode)
{
    shim_gate_enter();
    struct crac_args_cudaStreamBeginCapture a = {backend_stream(stream), mode};
    cudaError_t r = (cudaError_t)crac_cross_cudaStreamBeginCapture(&a);
    if (r == cudaSuccess) {
        __atomic_add_fetch(&shim_captures, 1, __ATOMIC_RELAXED);
        captures_held++;
        return r; /* the gate stays entered until cudaStreamEndCapture */
    }
    shim_gate_leave();
    return r;
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    shim_gate_enter();
    cudaGraph_t g = 0;
    struct crac_args_cudaStreamEndCapture a = {backend_stream(stream), pGraph ? &g : NULL};
    cudaError_t r = (cudaError_t)crac_cross_cudaStreamEndCapture(&a);
    /* The capture is over even when it failed (invalidated). */
    int ended = r == cudaSuccess || r == cudaErrorStreamCaptureInvalidated;
    if (ended && __atomic_load_n(&shim_captures, __ATOMIC_RELAXED) > 0)
        __atomic_sub_fetch(&shim_captures, 1, __ATOMIC_RELAXED);
    if (r == cudaSuccess)
        r = shim_vh_wrap(SHIM_VH_GRAPH, (uint64_t)(uintptr_t)g, (uint64_t *)pGraph);
    if (ended && captures_held > 0) {
        captures_held--;
        shim_gate_leave(); /* the one cudaStreamBeginCapture kept */
    }
    shim_gate_leave();
    return r;
}

/* The node's callback runs on the shim's executor (as cudaLaunchHostFunc's), through a
 * trampoline that stays valid for every launch of the graph. */
cudaError_t CUDARTAPI cudaGraphAddHostNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                           const cudaGraphNode_t *pDependencies,
                                           size_t numDependencies,
                                           const struct cudaHostNodeParams *pNodeParams)
{
    struct cudaHostNodeParams p = {0, 0};
    if (pNodeParams && pNodeParams->fn &&
        shim_hostfn_persistent(pNodeParams->fn, pNodeParams->userData, &p.fn, &p.userData) !=
            cudaSuccess)
        return shim_fail(cudaErrorMemoryAllocation);
    shim_gate_enter();
    struct crac_args_cudaGraphAddHostNode a = {
        pGraphNode,
        (cudaGraph_t)(uintptr_t)shim_vh_backend(SHIM_VH_GRAPH, (uint64_t)(uintptr_t)graph),
        pDependencies, numDependencies, pNodeParams ? &p : NULL};
    cudaError_t r = (cudaError_t)crac_cross_cudaGraphAddHostNode(&a);
    shim_gate_leave();
    return r;
}

/* ---- checkpoint and restart ---- */

static uint64_t lower3(const char *name, uint64_t a0, uint64_t a1, uint64_t a2)
{
    void *fn = shim_resolve(name);
    return fn ? cross_call(fn, a0, a1, a2) : 0;
}

/* A stream's `saved` holds its priority: PRIO_MARK | (uint32_t)priority, or -1 (none). */
#define PRIO_MARK (1LL << 40)

static int save_priority(struct shim_vh_view *v, void *ctx)
{
    (void)ctx;
    int prio = 0;
    struct crac_args_cudaStreamGetPriority a = {(cudaStream_t)(uintptr_t)v->backend, &prio};
    if ((cudaError_t)crac_cross_cudaStreamGetPriority(&a) == cudaSuccess && prio != 0)
        v->saved = PRIO_MARK | (uint32_t)prio;
    else
        v->saved = -1;
    return 0;
}

static int restore_priority(struct shim_vh_view *v, void *ctx)
{
    (void)ctx;
    if (v->saved < 0 || !(v->saved & PRIO_MARK))
        return 0;
    cudaStreamAttrValue val;
    __builtin_memset(&val, 0, sizeof(val));
    val.priority = (int)(uint32_t)v->saved;
    struct crac_args_cudaStreamSetAttribute a = {(cudaStream_t)(uintptr_t)v->backend,
                                                 cudaLaunchAttributePriority, &val};
    return (cudaError_t)crac_cross_cudaStreamSetAttribute(&a) == cudaSuccess ? 0 : -1;
}

/* A graph's `saved` points at its bytes (an upper mapping: saved with W), or is -1. The
 * mapping is made here, with every other thread parked: mmap, not malloc, whose lock a parked
 * thread may hold. */
struct blob_head {
    uint64_t magic, len;
};

static int save_graph(struct shim_vh_view *v, void *ctx)
{
    (void)ctx;
    if (v->saved > 0) {
        const struct blob_head *old = (const void *)(uintptr_t)v->saved;
        munmap((void *)old, (old->len + 4095) & ~4095ULL);
        v->saved = -1;
    }
    uint64_t need = lower3("crac_lh_graph_export", v->backend, 0, 0);
    if (!need)
        return -1;
    void *buf = mmap(NULL, (need + 4095) & ~4095ULL, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return -1;
    if (lower3("crac_lh_graph_export", v->backend, (uint64_t)(uintptr_t)buf, need) != need) {
        munmap(buf, (need + 4095) & ~4095ULL);
        return -1;
    }
    v->saved = (int64_t)(uintptr_t)buf;
    return 0;
}

static int restore_graph(struct shim_vh_view *v, void *ctx)
{
    (void)ctx;
    if (v->saved <= 0)
        return -1; /* created after the last checkpoint: impossible at a restart */
    const struct blob_head *b = (const void *)(uintptr_t)v->saved;
    uint64_t h = lower3("crac_lh_graph_import", (uint64_t)(uintptr_t)b, b->len, 0);
    if (!h)
        return -1;
    v->backend = h;
    return 0;
}

static int reregister_host(void)
{
    for (uint32_t i = 0; i < registered.n; i++) {
        struct crac_args_cudaHostRegister a = {(void *)(uintptr_t)registered.v[i].start,
                                               registered.v[i].size,
                                               (unsigned)registered.v[i].kind};
        if ((cudaError_t)crac_cross_cudaHostRegister(&a) != cudaSuccess)
            return -1;
    }
    return 0;
}

static int on_event(enum crac_event event, void *arg)
{
    (void)arg;
    if (event == CRAC_EV_PARKED)
        return shim_vh_foreach(SHIM_VH_STREAM, save_priority, NULL) ||
                       shim_vh_foreach(SHIM_VH_GRAPH, save_graph, NULL) ||
                       shim_vh_foreach(SHIM_VH_GEXEC, save_graph, NULL)
                   ? -1
                   : 0;
    /* Order 1: after cudart.device_state recreated the streams (order 0). */
    return shim_vh_foreach(SHIM_VH_STREAM, restore_priority, NULL) ||
                   shim_vh_foreach(SHIM_VH_GRAPH, restore_graph, NULL) ||
                   shim_vh_foreach(SHIM_VH_GEXEC, restore_graph, NULL) || reregister_host()
               ? -1
               : 0;
}

__attribute__((constructor)) static void shim_more_init(void)
{
    if (crac_upper_hook_register) {
        crac_upper_hook_register("cudart.more_state", CRAC_EV_PARKED, 1, 0, on_event, NULL);
        crac_upper_hook_register("cudart.more_state", CRAC_EV_RESTART, 1, 0, on_event, NULL);
    }
}
