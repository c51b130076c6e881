/* rt_pool.c — stream-ordered allocation and memory pools: bookkeeping (pools, their attributes
 * and statistics, which pool each allocation came from) over cudaMalloc/cudaFree; built into the
 * shim and the native sim. Under crac it lives in upper memory, so a restart finds it as it was. */
#include <cuda_runtime_api.h>

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef CRAC_SIM_VERSION /* the native sim */
cudaError_t sim_ret(cudaError_t e);
#define rt_fail(e) sim_ret(e)
#else
#include "shim.h"
#define rt_fail(e) shim_fail(e)
#endif

/* Freed memory goes back at once (the sim reserves nothing beyond what is allocated), so
 * reserved == used and cudaMemPoolTrimTo has nothing to release. */
struct rt_pool {
    int live;
    struct cudaMemPoolProps props;
    uint64_t release_threshold;
    int reuse[3]; /* FollowEventDependencies, AllowOpportunistic, AllowInternalDependencies */
    uint64_t used, used_high, reserved_high;
};

struct rt_alloc {
    uint64_t ptr, size;
    uint32_t pool;
};

#define MAX_POOLS 256
static struct rt_pool pools[MAX_POOLS] = {[0] = {.live = 1, .reuse = {1, 1, 1}}};
static uint32_t current_pool; /* cudaDeviceSetMemPool */
static struct rt_alloc *allocs;
static uint32_t n_allocs, cap_allocs;
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static cudaMemPool_t handle_of(uint32_t i) { return (cudaMemPool_t)(void *)&pools[i]; }

/* Index of a live pool, or -1. */
static long index_of(cudaMemPool_t h)
{
    uintptr_t p = (uintptr_t)h, base = (uintptr_t)pools;
    if (p < base || p >= base + sizeof(pools) || (p - base) % sizeof(pools[0]))
        return -1;
    long i = (long)((p - base) / sizeof(pools[0]));
    return pools[i].live ? i : -1;
}

static int device_location(const struct cudaMemLocation *l)
{
    return l && l->type == cudaMemLocationTypeDevice && l->id == 0;
}

static cudaError_t note_alloc(void *p, size_t size, uint32_t pool)
{
    pthread_mutex_lock(&pool_lock);
    if (n_allocs == cap_allocs) {
        uint32_t cap = cap_allocs ? cap_allocs * 2 : 64;
        struct rt_alloc *n = realloc(allocs, cap * sizeof(*n));
        if (!n) {
            pthread_mutex_unlock(&pool_lock);
            return cudaErrorMemoryAllocation;
        }
        allocs = n;
        cap_allocs = cap;
    }
    allocs[n_allocs++] = (struct rt_alloc){(uint64_t)(uintptr_t)p, size, pool};
    struct rt_pool *r = &pools[pool];
    r->used += size;
    if (r->used > r->used_high)
        r->used_high = r->used;
    if (r->used > r->reserved_high)
        r->reserved_high = r->used;
    pthread_mutex_unlock(&pool_lock);
    return cudaSuccess;
}

static void note_free(void *p)
{
    pthread_mutex_lock(&pool_lock);
    for (uint32_t i = 0; i < n_allocs; i++) {
        if (allocs[i].ptr != (uint64_t)(uintptr_t)p)
            continue;
        pools[allocs[i].pool].used -= allocs[i].size;
        allocs[i] = allocs[--n_allocs];
        break;
    }
    pthread_mutex_unlock(&pool_lock);
}

/* Allocation and free nodes are not supported in graphs: refused while the stream captures. */
static int capturing(cudaStream_t stream)
{
    enum cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

static cudaError_t alloc_from(void **ptr, size_t size, uint32_t pool, cudaStream_t stream)
{
    if (!ptr)
        return rt_fail(cudaErrorInvalidValue);
    if (capturing(stream))
        return rt_fail(cudaErrorStreamCaptureUnsupported);
    /* The stream must be valid (the query records cudaErrorInvalidResourceHandle itself). */
    cudaError_t e = cudaStreamQuery(stream);
    if (e != cudaSuccess && e != cudaErrorNotReady)
        return e;
    /* Allocating at once is a valid stream-ordered allocation: the memory is usable by work
     * queued after this call, and by work before it too. */
    e = cudaMalloc(ptr, size);
    if (e != cudaSuccess || !size)
        return e;
    if (note_alloc(*ptr, size, pool) != cudaSuccess) {
        cudaFree(*ptr);
        return rt_fail(cudaErrorMemoryAllocation);
    }
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMallocAsync(void **devPtr, size_t size, cudaStream_t hStream)
{
    return alloc_from(devPtr, size, __atomic_load_n(&current_pool, __ATOMIC_RELAXED), hStream);
}

cudaError_t CUDARTAPI cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                              cudaStream_t stream)
{
    pthread_mutex_lock(&pool_lock);
    long i = index_of(memPool);
    pthread_mutex_unlock(&pool_lock);
    if (i < 0)
        return rt_fail(cudaErrorInvalidValue);
    return alloc_from(ptr, size, (uint32_t)i, stream);
}

/* Freed once the work queued on hStream before it is done: the stream is waited for, then the
 * memory goes. */
cudaError_t CUDARTAPI cudaFreeAsync(void *devPtr, cudaStream_t hStream)
{
    if (!devPtr)
        return cudaSuccess;
    if (capturing(hStream))
        return rt_fail(cudaErrorStreamCaptureUnsupported);
    cudaError_t e = cudaStreamSynchronize(hStream);
    if (e != cudaSuccess)
        return e;
    e = cudaFree(devPtr);
    if (e == cudaSuccess)
        note_free(devPtr);
    return e;
}

cudaError_t CUDARTAPI cudaDeviceGetDefaultMemPool(cudaMemPool_t *memPool, int device)
{
    if (!memPool)
        return rt_fail(cudaErrorInvalidValue);
    if (device != 0)
        return rt_fail(cudaErrorInvalidDevice);
    *memPool = handle_of(0);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceGetMemPool(cudaMemPool_t *memPool, int device)
{
    if (!memPool)
        return rt_fail(cudaErrorInvalidValue);
    if (device != 0)
        return rt_fail(cudaErrorInvalidDevice);
    *memPool = handle_of(__atomic_load_n(&current_pool, __ATOMIC_RELAXED));
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceSetMemPool(int device, cudaMemPool_t memPool)
{
    if (device != 0)
        return rt_fail(cudaErrorInvalidDevice);
    pthread_mutex_lock(&pool_lock);
    long i = index_of(memPool);
    if (i >= 0)
        current_pool = (uint32_t)i;
    pthread_mutex_unlock(&pool_lock);
    return i >= 0 ? cudaSuccess : rt_fail(cudaErrorInvalidValue);
}

static cudaError_t check_location(const struct cudaMemLocation *location,
                                  enum cudaMemAllocationType type)
{
    if (!location || type != cudaMemAllocationTypePinned)
        return cudaErrorInvalidValue;
    if (location->type != cudaMemLocationTypeDevice)
        return cudaErrorNotSupported; /* host pools: the sim has device memory only */
    return location->id == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t CUDARTAPI cudaMemGetDefaultMemPool(cudaMemPool_t *memPool,
                                               struct cudaMemLocation *location,
                                               enum cudaMemAllocationType type)
{
    cudaError_t e = memPool ? check_location(location, type) : cudaErrorInvalidValue;
    if (e != cudaSuccess)
        return rt_fail(e);
    *memPool = handle_of(0);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemGetMemPool(cudaMemPool_t *memPool, struct cudaMemLocation *location,
                                        enum cudaMemAllocationType type)
{
    cudaError_t e = memPool ? check_location(location, type) : cudaErrorInvalidValue;
    if (e != cudaSuccess)
        return rt_fail(e);
    return cudaDeviceGetMemPool(memPool, 0);
}

cudaError_t CUDARTAPI cudaMemSetMemPool(struct cudaMemLocation *location,
                                        enum cudaMemAllocationType type, cudaMemPool_t memPool)
{
    cudaError_t e = check_location(location, type);
    if (e != cudaSuccess)
        return rt_fail(e);
    return cudaDeviceSetMemPool(0, memPool);
}

cudaError_t CUDARTAPI cudaMemPoolCreate(cudaMemPool_t *memPool,
                                        const struct cudaMemPoolProps *poolProps)
{
    if (!memPool || !poolProps || poolProps->allocType != cudaMemAllocationTypePinned)
        return rt_fail(cudaErrorInvalidValue);
    if (!device_location(&poolProps->location))
        return rt_fail(poolProps->location.type == cudaMemLocationTypeDevice
                           ? cudaErrorInvalidDevice
                           : cudaErrorNotSupported);
    if (poolProps->handleTypes != cudaMemHandleTypeNone)
        return rt_fail(cudaErrorNotSupported); /* no IPC: one process */
    pthread_mutex_lock(&pool_lock);
    uint32_t i = 1;
    while (i < MAX_POOLS && pools[i].live)
        i++;
    if (i < MAX_POOLS) {
        memset(&pools[i], 0, sizeof(pools[i]));
        pools[i].live = 1;
        pools[i].props = *poolProps;
        pools[i].reuse[0] = pools[i].reuse[1] = pools[i].reuse[2] = 1;
    }
    pthread_mutex_unlock(&pool_lock);
    if (i == MAX_POOLS)
        return rt_fail(cudaErrorMemoryAllocation);
    *memPool = handle_of(i);
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemPoolDestroy(cudaMemPool_t memPool)
{
    pthread_mutex_lock(&pool_lock);
    long i = index_of(memPool);
    int ok = i > 0; /* the default pool cannot be destroyed */
    if (ok) {
        pools[i].live = 0;
        if (current_pool == (uint32_t)i)
            current_pool = 0;
    }
    pthread_mutex_unlock(&pool_lock);
    return ok ? cudaSuccess : rt_fail(cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI cudaMemPoolSetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                              void *value)
{
    if (!value)
        return rt_fail(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool_lock);
    long i = index_of(memPool);
    cudaError_t e = i < 0 ? cudaErrorInvalidValue : cudaSuccess;
    struct rt_pool *p = i < 0 ? NULL : &pools[i];
    if (p) {
        switch (attr) {
        case cudaMemPoolReuseFollowEventDependencies: p->reuse[0] = *(int *)value != 0; break;
        case cudaMemPoolReuseAllowOpportunistic: p->reuse[1] = *(int *)value != 0; break;
        case cudaMemPoolReuseAllowInternalDependencies: p->reuse[2] = *(int *)value != 0; break;
        case cudaMemPoolAttrReleaseThreshold: p->release_threshold = *(uint64_t *)value; break;
        case cudaMemPoolAttrReservedMemHigh:
        case cudaMemPoolAttrUsedMemHigh:
            /* Only resetting the high-water marks (to the current value) is allowed. */
            if (*(uint64_t *)value != 0)
                e = cudaErrorInvalidValue;
            else if (attr == cudaMemPoolAttrUsedMemHigh)
                p->used_high = p->used;
            else
                p->reserved_high = p->used;
            break;
        default: e = cudaErrorInvalidValue; break;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return e == cudaSuccess ? e : rt_fail(e);
}

cudaError_t CUDARTAPI cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr,
                                              void *value)
{
    if (!value)
        return rt_fail(cudaErrorInvalidValue);
    pthread_mutex_lock(&pool_lock);
    long i = index_of(memPool);
    cudaError_t e = i < 0 ? cudaErrorInvalidValue : cudaSuccess;
    const struct rt_pool *p = i < 0 ? NULL : &pools[i];
    if (p) {
        switch (attr) {
        case cudaMemPoolReuseFollowEventDependencies: *(int *)value = p->reuse[0]; break;
        case cudaMemPoolReuseAllowOpportunistic: *(int *)value = p->reuse[1]; break;
        case cudaMemPoolReuseAllowInternalDependencies: *(int *)value = p->reuse[2]; break;
        case cudaMemPoolAttrReleaseThreshold: *(uint64_t *)value = p->release_threshold; break;
        case cudaMemPoolAttrReservedMemCurrent:
        case cudaMemPoolAttrUsedMemCurrent: *(uint64_t *)value = p->used; break;
        case cudaMemPoolAttrReservedMemHigh: *(uint64_t *)value = p->reserved_high; break;
        case cudaMemPoolAttrUsedMemHigh: *(uint64_t *)value = p->used_high; break;
        default: e = cudaErrorInvalidValue; break;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return e == cudaSuccess ? e : rt_fail(e);
}

cudaError_t CUDARTAPI cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep)
{
    (void)minBytesToKeep;
    pthread_mutex_lock(&pool_lock);
    long i = index_of(memPool);
    pthread_mutex_unlock(&pool_lock);
    return i >= 0 ? cudaSuccess : rt_fail(cudaErrorInvalidValue);
}

cudaError_t CUDARTAPI cudaMemPoolSetAccess(cudaMemPool_t memPool,
                                           const struct cudaMemAccessDesc *descList, size_t count)
{
    pthread_mutex_lock(&pool_lock);
    long i = index_of(memPool);
    pthread_mutex_unlock(&pool_lock);
    if (i < 0 || (count && !descList))
        return rt_fail(cudaErrorInvalidValue);
    for (size_t k = 0; k < count; k++) {
        if (!device_location(&descList[k].location))
            return rt_fail(cudaErrorInvalidDevice);
        /* The owning device always has read-write access. */
        if (descList[k].flags != cudaMemAccessFlagsProtReadWrite)
            return rt_fail(cudaErrorInvalidValue);
    }
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemPoolGetAccess(enum cudaMemAccessFlags *flags, cudaMemPool_t memPool,
                                           struct cudaMemLocation *location)
{
    pthread_mutex_lock(&pool_lock);
    long i = index_of(memPool);
    pthread_mutex_unlock(&pool_lock);
    if (i < 0 || !flags || !location)
        return rt_fail(cudaErrorInvalidValue);
    if (!device_location(location))
        return rt_fail(cudaErrorInvalidDevice);
    *flags = cudaMemAccessFlagsProtReadWrite;
    return cudaSuccess;
}
