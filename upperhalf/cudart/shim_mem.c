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

/* The registry's ranges are read at checkpoints, and device.img is written from them: a range
 * and the backend's memory there change together, inside one hold of the gate (re-entrant: the
 * crossing inside takes it again). A checkpoint between the address and the crossing saved a
 * range the backend had not mapped yet, or had already unmapped: the writer faulted reading it
 * (SIGSEGV in device_image_write, seen with examples/threads and checkpoints at random
 * moments). Callers hold the gate. */
static uint64_t range_alloc(size_t size, int kind) { return dalloc_alloc(dev(), size, kind); }

static void range_free(uint64_t addr) { dalloc_free(dev(), addr); }

cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
    struct crac_args_cudaMalloc a = {devPtr, size, 0};
    shim_gate_enter();
    if (devPtr && size && !(a.crac_addr = range_alloc(size, KIND_DEVICE))) {
        shim_gate_leave();
        return shim_fail(cudaErrorMemoryAllocation);
    }
    cudaError_t r = (cudaError_t)crac_cross_cudaMalloc(&a);
    if (r != cudaSuccess && a.crac_addr)
        range_free(a.crac_addr);
    shim_gate_leave();
    return r;
}

cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    struct crac_args_cudaMallocManaged a = {devPtr, size, flags, 0};
    shim_gate_enter();
    if (devPtr && size && !(a.crac_addr = range_alloc(size, KIND_MANAGED))) {
        shim_gate_leave();
        return shim_fail(cudaErrorMemoryAllocation);
    }
    cudaError_t r = (cudaError_t)crac_cross_cudaMallocManaged(&a);
    if (r != cudaSuccess && a.crac_addr)
        range_free(a.crac_addr);
    shim_gate_leave();
    return r;
}

cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
    struct crac_args_cudaFree a = {devPtr};
    shim_gate_enter();
    cudaError_t r = (cudaError_t)crac_cross_cudaFree(&a);
    if (r == cudaSuccess && devPtr)
        range_free((uint64_t)(uintptr_t)devPtr);
    shim_gate_leave();
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

/* Registered with the backend and recorded in the pinned set in one hold of the gate, as device
 * ranges are: a range registered but not yet recorded would not be registered again with the
 * backend a restart brings. */
cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
    struct crac_args_cudaMallocHost a = {ptr, size, 0};
    if (ptr && size && !(a.crac_addr = map_pinned(size)))
        return shim_fail(cudaErrorMemoryAllocation);
    shim_gate_enter();
    cudaError_t r = pinned_done((cudaError_t)crac_cross_cudaMallocHost(&a), a.crac_addr, size);
    shim_gate_leave();
    return r;
}

cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    struct crac_args_cudaHostAlloc a = {pHost, size, flags, 0};
    if (pHost && size && !(a.crac_addr = map_pinned(size)))
        return shim_fail(cudaErrorMemoryAllocation);
    shim_gate_enter();
    cudaError_t r = pinned_done((cudaError_t)crac_cross_cudaHostAlloc(&a), a.crac_addr, size);
    shim_gate_leave();
    return r;
}

cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
    struct crac_args_cudaFreeHost a = {ptr};
    shim_gate_enter();
    cudaError_t r = (cudaError_t)crac_cross_cudaFreeHost(&a);
    if (r == cudaSuccess && ptr) {
        struct crac_range_ent e;
        pthread_mutex_lock(&pinned_lock);
        int found = rangeset_remove(&pinned, (uint64_t)(uintptr_t)ptr, &e) == 0;
        pthread_mutex_unlock(&pinned_lock);
        if (found)
            munmap(ptr, e.size);
    }
    shim_gate_leave();
    return r;
}

cudaError_t CUDARTAPI cudaDeviceReset(void)
{
    shim_gate_enter(); /* the backend's reset and the shim's tables together, as cudaFree */
    cudaError_t r = (cudaError_t)crac_cross_cudaDeviceReset();
    if (r != cudaSuccess) {
        shim_gate_leave();
        return r;
    }
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
    shim_gate_leave();
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
uint64_t shim_dev_alloc(size_t size, int managed) /* the caller holds the gate */
{
    return range_alloc(size, managed ? KIND_MANAGED : KIND_DEVICE);
}

void shim_dev_free(uint64_t addr) { range_free(addr); }
