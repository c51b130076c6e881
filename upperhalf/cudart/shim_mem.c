/* shim_mem.c — memory entry points of the upper shim: crac assigns device and managed addresses
 * inside D (first fit, state in upper memory) and the backend maps memory there; pinned host
 * memory is mapped by the shim itself (so it lands in W, saved with the upper half) and only
 * registered with the backend. cudaDeviceReset also forgets the shim's own tables. */
#include "shim.h"

#include "crac_layout.h"
#include "cudart_shim_gen.h"
#include "dalloc.h"

#include <pthread.h>
#include <sys/mman.h>

enum { KIND_DEVICE = 1, KIND_MANAGED = 2, KIND_PINNED = 3 };

static struct crac_dalloc device_addrs;
static pthread_once_t device_addrs_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;

/* From libcrac-upper.so: where the lower half finds the live allocations at a checkpoint. */
extern void crac_upper_set_device_ranges(const void *ranges) __attribute__((weak));

static void init_device_addrs(void)
{
    dalloc_init(&device_addrs, CRAC_D_START, CRAC_D_END);
    if (crac_upper_set_device_ranges)
        crac_upper_set_device_ranges(&device_addrs.used); /* same layout as crac_dev_ranges */
}

/* Pinned ranges a restart registers again with the new backend. */
static struct crac_rangeset pinned;
static int reregister_pinned(void);

static struct crac_dalloc *dev(void)
{
    pthread_once(&device_addrs_once, init_device_addrs);
    return &device_addrs;
}

/* The registry is read at checkpoints: changing it inside the gate means no checkpoint ever
 * sees it half-updated. */
static uint64_t gated_alloc(size_t size, int kind)
{
    if (cross_gate_enter)
        cross_gate_enter();
    uint64_t a = dalloc_alloc(dev(), size, kind);
    if (cross_gate_leave)
        cross_gate_leave();
    return a;
}

static void gated_free(uint64_t addr)
{
    if (cross_gate_enter)
        cross_gate_enter();
    dalloc_free(dev(), addr);
    if (cross_gate_leave)
        cross_gate_leave();
}

cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
    struct crac_args_cudaMalloc a = {devPtr, size, 0};
    if (devPtr && size && !(a.crac_addr = gated_alloc(size, KIND_DEVICE)))
        return shim_fail(cudaErrorMemoryAllocation);
    cudaError_t r = (cudaError_t)crac_cross_cudaMalloc(&a);
    if (r != cudaSuccess && a.crac_addr)
        gated_free(a.crac_addr);
    return r;
}

cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    struct crac_args_cudaMallocManaged a = {devPtr, size, flags, 0};
    if (devPtr && size && !(a.crac_addr = gated_alloc(size, KIND_MANAGED)))
        return shim_fail(cudaErrorMemoryAllocation);
    cudaError_t r = (cudaError_t)crac_cross_cudaMallocManaged(&a);
    if (r != cudaSuccess && a.crac_addr)
        gated_free(a.crac_addr);
    return r;
}

cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
    struct crac_args_cudaFree a = {devPtr};
    cudaError_t r = (cudaError_t)crac_cross_cudaFree(&a);
    if (r == cudaSuccess && devPtr)
        gated_free((uint64_t)(uintptr_t)devPtr);
    return r;
}

static uint64_t page_up(uint64_t n) { return (n + 4095) & ~4095ULL; }

/* Pinned memory: an ordinary upper-half mapping (the loader places it in W). */
static uint64_t map_pinned(size_t size)
{
    void *p = mmap(NULL, page_up(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? 0 : (uint64_t)(uintptr_t)p;
}

static cudaError_t pinned_done(cudaError_t r, uint64_t addr, size_t size)
{
    if (!addr)
        return r;
    if (r == cudaSuccess) {
        pthread_mutex_lock(&pinned_lock);
        int bad = rangeset_insert(&pinned, addr, page_up(size), KIND_PINNED);
        pthread_mutex_unlock(&pinned_lock);
        if (!bad)
            return r;
        r = shim_fail(cudaErrorMemoryAllocation);
    }
    munmap((void *)(uintptr_t)addr, page_up(size));
    return r;
}

cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
    struct crac_args_cudaMallocHost a = {ptr, size, 0};
    if (ptr && size && !(a.crac_addr = map_pinned(size)))
        return shim_fail(cudaErrorMemoryAllocation);
    return pinned_done((cudaError_t)crac_cross_cudaMallocHost(&a), a.crac_addr, size);
}

cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    struct crac_args_cudaHostAlloc a = {pHost, size, flags, 0};
    if (pHost && size && !(a.crac_addr = map_pinned(size)))
        return shim_fail(cudaErrorMemoryAllocation);
    return pinned_done((cudaError_t)crac_cross_cudaHostAlloc(&a), a.crac_addr, size);
}

cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
    struct crac_args_cudaFreeHost a = {ptr};
    cudaError_t r = (cudaError_t)crac_cross_cudaFreeHost(&a);
    if (r == cudaSuccess && ptr) {
        struct crac_range_ent e;
        pthread_mutex_lock(&pinned_lock);
        int found = rangeset_remove(&pinned, (uint64_t)(uintptr_t)ptr, &e) == 0;
        pthread_mutex_unlock(&pinned_lock);
        if (found)
            munmap(ptr, e.size);
    }
    return r;
}

cudaError_t CUDARTAPI cudaDeviceReset(void)
{
    cudaError_t r = (cudaError_t)crac_cross_cudaDeviceReset();
    if (r != cudaSuccess)
        return r;
    dalloc_reset(dev());
    pthread_mutex_lock(&pinned_lock);
    for (uint32_t i = 0; i < pinned.n; i++)
        munmap((void *)(uintptr_t)pinned.v[i].start, pinned.v[i].size);
    rangeset_clear(&pinned);
    pthread_mutex_unlock(&pinned_lock);
    shim_vh_reset(SHIM_VH_STREAM);
    shim_vh_reset(SHIM_VH_EVENT);
    shim_vh_reset(SHIM_VH_GRAPH);
    shim_vh_reset(SHIM_VH_GEXEC);
    shim_registered_reset();
    return r;
}

/* Device allocations need nothing at a restart (the loader recreated them from device.img);
 * pinned ones are upper memory the new backend must be told about. */
static int reregister_pinned(void)
{
    for (uint32_t i = 0; i < pinned.n; i++) {
        void *ignored;
        struct crac_args_cudaMallocHost a = {&ignored, pinned.v[i].size, pinned.v[i].start};
        if ((cudaError_t)crac_cross_cudaMallocHost(&a) != cudaSuccess)
            return -1;
    }
    return 0;
}

int shim_pinned_restore(void) { return reregister_pinned(); }

int32_t shim_pinned_count(void) { return (int32_t)pinned.n; }

/* Device memory for nvcc's __device__/__constant__/__managed__ variables (shim_fatbin.c): an
 * ordinary D allocation, so device.img saves it like any other. */
uint64_t shim_dev_alloc(size_t size, int managed)
{
    return gated_alloc(size, managed ? KIND_MANAGED : KIND_DEVICE);
}

void shim_dev_free(uint64_t addr) { gated_free(addr); }
