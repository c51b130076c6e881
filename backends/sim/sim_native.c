/* sim_native.c — the sim as a plain libcudart.so.13 (no split process, the overhead baseline):
 * device addresses come from a simple allocator over a window of its own, pinned memory is mapped
 * here, and the crac_sim_debug_* entries answer directly. */
#include "sim.h"

#include "crac_layout.h"
#include "dalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define WINDOW_SIZE (CRAC_D_END - CRAC_D_START)

static struct crac_dalloc device_addrs;
static struct crac_rangeset pinned;
static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;

/* Reserve the device window where crac puts D (so addresses match a run under crac), else
 * wherever the kernel likes. */
__attribute__((constructor)) static void native_init(void)
{
    void *w = mmap((void *)CRAC_D_START, WINDOW_SIZE, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (w == MAP_FAILED)
        w = mmap(NULL, WINDOW_SIZE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (w == MAP_FAILED) {
        fprintf(stderr, "libcudart (crac sim): cannot reserve the device window\n");
        abort();
    }
    uint64_t start = (uint64_t)(uintptr_t)w;
    dalloc_init(&device_addrs, start, start + WINDOW_SIZE);
    struct sim_host host = {start, start + WINDOW_SIZE, NULL, NULL};
    if (sim_init(&host) != 0) {
        fprintf(stderr, "libcudart (crac sim): cannot initialise the sim\n");
        abort();
    }
}

static cudaError_t device_alloc(void **p, size_t size, unsigned flags, int kind)
{
    unsigned long long addr = 0;
    if (p && size && !(addr = dalloc_alloc(&device_addrs, size, kind)))
        return sim_ret(cudaErrorMemoryAllocation);
    cudaError_t r = kind == SIM_MEM_DEVICE ? sim_cudaMalloc(p, size, addr)
                                           : sim_cudaMallocManaged(p, size, flags, addr);
    if (r != cudaSuccess && addr)
        dalloc_free(&device_addrs, addr);
    return r;
}

cudaError_t CUDARTAPI cudaMalloc(void **devPtr, size_t size)
{
    return device_alloc(devPtr, size, 0, SIM_MEM_DEVICE);
}

cudaError_t CUDARTAPI cudaMallocManaged(void **devPtr, size_t size, unsigned int flags)
{
    return device_alloc(devPtr, size, flags, SIM_MEM_MANAGED);
}

cudaError_t CUDARTAPI cudaFree(void *devPtr)
{
    cudaError_t r = sim_cudaFree(devPtr);
    if (r == cudaSuccess && devPtr)
        dalloc_free(&device_addrs, (uint64_t)(uintptr_t)devPtr);
    return r;
}

static uint64_t page_up(uint64_t n) { return (n + SIM_PAGE - 1) & ~(SIM_PAGE - 1); }

static cudaError_t host_alloc(void **p, size_t size, unsigned flags, int plain)
{
    uint64_t addr = 0;
    if (p && size) {
        void *m =
            mmap(NULL, page_up(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return sim_ret(cudaErrorMemoryAllocation);
        addr = (uint64_t)(uintptr_t)m;
    }
    cudaError_t r =
        plain ? sim_cudaMallocHost(p, size, addr) : sim_cudaHostAlloc(p, size, flags, addr);
    if (addr) {
        pthread_mutex_lock(&pinned_lock);
        if (r == cudaSuccess && rangeset_insert(&pinned, addr, page_up(size), SIM_MEM_PINNED))
            r = sim_ret(cudaErrorMemoryAllocation);
        pthread_mutex_unlock(&pinned_lock);
        if (r != cudaSuccess)
            munmap((void *)(uintptr_t)addr, page_up(size));
    }
    return r;
}

cudaError_t CUDARTAPI cudaMallocHost(void **ptr, size_t size)
{
    return host_alloc(ptr, size, 0, 1);
}

cudaError_t CUDARTAPI cudaHostAlloc(void **pHost, size_t size, unsigned int flags)
{
    return host_alloc(pHost, size, flags, 0);
}

cudaError_t CUDARTAPI cudaFreeHost(void *ptr)
{
    cudaError_t r = sim_cudaFreeHost(ptr);
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
    cudaError_t r = sim_cudaDeviceReset();
    dalloc_reset(&device_addrs);
    pthread_mutex_lock(&pinned_lock);
    for (uint32_t i = 0; i < pinned.n; i++)
        munmap((void *)(uintptr_t)pinned.v[i].start, pinned.v[i].size);
    rangeset_clear(&pinned);
    pthread_mutex_unlock(&pinned_lock);
    return r;
}

/* ---- the debug entries, answered directly ---- */

void *crac_sim_debug_tls(void);
void *crac_sim_debug_tls(void) { return sim_last_error_slot(); }

long crac_sim_debug_block_signal(long timeout_ms);
long crac_sim_debug_block_signal(long timeout_ms) { return sim_block_until_signal(timeout_ms); }

int crac_sim_version(void);
int crac_sim_version(void) { return 0; } /* 0: not under crac */

/* For nvcc's device variables (sim_native_vars.c). */
uint64_t sim_native_dev_alloc(size_t size, int kind);
uint64_t sim_native_dev_alloc(size_t size, int kind)
{
    return dalloc_alloc(&device_addrs, size, kind);
}
