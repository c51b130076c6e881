/* cuda_vmm.c — device memory at the addresses crac chose inside D, through the driver's virtual
 * memory API: D is handed to the driver one granule at a time, each backed once and shared by the
 * allocations that fall in it; managed memory is host memory the device reaches through HMM. */
#include "cuda_bk.h"

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static struct {
    CUresult (*address_reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*address_free)(CUdeviceptr, size_t);
    CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                       unsigned long long);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*granularity)(size_t *, const CUmemAllocationProp *,
                            CUmemAllocationGranularity_flags);
} drv;

struct granule {
    uint64_t base;
    CUmemGenericAllocationHandle handle;
    uint32_t refs;
};

struct alloc {
    uint64_t addr, size;
    int kind;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;
static uint64_t gran; /* the driver's minimum granularity for the device, once known */
static uint64_t win_start, win_end;
static struct granule *grans;
static size_t n_grans, cap_grans;
static struct alloc *allocs;
static size_t n_allocs, cap_allocs;

int cuda_vmm_load(char *err, uint64_t errlen)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(err, errlen, "libcuda.so.1 (the NVIDIA driver) cannot be loaded: %s", dlerror());
        return -1;
    }
    struct {
        void **slot;
        const char *name;
    } want[] = {
        {(void **)&drv.address_reserve, "cuMemAddressReserve"},
        {(void **)&drv.address_free, "cuMemAddressFree"},
        {(void **)&drv.create, "cuMemCreate"},
        {(void **)&drv.release, "cuMemRelease"},
        {(void **)&drv.map, "cuMemMap"},
        {(void **)&drv.unmap, "cuMemUnmap"},
        {(void **)&drv.set_access, "cuMemSetAccess"},
        {(void **)&drv.granularity, "cuMemGetAllocationGranularity"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (!(*want[i].slot = dlsym(lib, want[i].name))) {
            snprintf(err, errlen, "the driver lacks %s (virtual memory management)", want[i].name);
            return -1;
        }
    loaded = 1;
    return 0;
}

int cuda_vmm_available(void) { return loaded; }

void cuda_vmm_window(uint64_t start, uint64_t end)
{
    win_start = start;
    win_end = end;
}

static int current_device(void)
{
    int dev = 0;
    if (cuda_real.cudaGetDevice)
        cuda_real.cudaGetDevice(&dev);
    return dev;
}

static CUmemAllocationProp device_prop(void)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof(p));
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = current_device();
    return p;
}

static struct granule *find_granule(uint64_t base)
{
    for (size_t i = 0; i < n_grans; i++)
        if (grans[i].base == base)
            return &grans[i];
    return NULL;
}

/* Gives [g, g+len) back to the loader's PROT_NONE reservation of D. */
static void rehole(uint64_t g, uint64_t len)
{
    mmap((void *)(uintptr_t)g, len, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
}

static cudaError_t granule_get(uint64_t g)
{
    struct granule *have = find_granule(g);
    if (have) {
        have->refs++;
        return cudaSuccess;
    }
    if (cuda_bk_reserve((void **)&grans, n_grans, &cap_grans, sizeof(*grans)) != 0)
        return cudaErrorMemoryAllocation;
    munmap((void *)(uintptr_t)g, gran); /* the driver must find the range free */
    CUdeviceptr got = 0;
    CUresult r = drv.address_reserve(&got, gran, gran, (CUdeviceptr)g, 0);
    if (r != CUDA_SUCCESS || got != g) {
        if (r == CUDA_SUCCESS)
            drv.address_free(got, gran);
        rehole(g, gran);
        fprintf(stderr,
                "crac: error: the CUDA driver cannot place device memory at 0x%llx (crac's "
                "device window); it offered 0x%llx (CUresult %d)\n",
                (unsigned long long)g, (unsigned long long)got, (int)r);
        return cudaErrorMemoryAllocation;
    }
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h;
    if ((r = drv.create(&h, gran, &prop, 0)) != CUDA_SUCCESS) {
        drv.address_free(g, gran);
        rehole(g, gran);
        return r == CUDA_ERROR_OUT_OF_MEMORY ? cudaErrorMemoryAllocation : cudaErrorUnknown;
    }
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, prop.location.id},
                              CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (drv.map(g, gran, 0, h, 0) != CUDA_SUCCESS ||
        drv.set_access(g, gran, &access, 1) != CUDA_SUCCESS) {
        drv.unmap(g, gran);
        drv.release(h);
        drv.address_free(g, gran);
        rehole(g, gran);
        return cudaErrorUnknown;
    }
    grans[n_grans++] = (struct granule){g, h, 1};
    return cudaSuccess;
}

static void granule_put(uint64_t g)
{
    struct granule *have = find_granule(g);
    if (!have || --have->refs)
        return;
    drv.unmap(g, gran);
    drv.release(have->handle);
    drv.address_free(g, gran);
    rehole(g, gran);
    *have = grans[--n_grans];
}

int cuda_bk_reserve(void **v, size_t n, size_t *cap, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t grown = *cap ? 2 * *cap : 64;
    void *p = realloc(*v, grown * elem);
    if (!p)
        return -1;
    *v = p;
    *cap = grown;
    return 0;
}

static int add_alloc(uint64_t addr, uint64_t size, int kind)
{
    if (cuda_bk_reserve((void **)&allocs, n_allocs, &cap_allocs, sizeof(*allocs)) != 0)
        return -1;
    allocs[n_allocs++] = (struct alloc){addr, size, kind};
    return 0;
}

static struct alloc *find_alloc(uint64_t addr)
{
    for (size_t i = 0; i < n_allocs; i++)
        if (allocs[i].addr == addr)
            return &allocs[i];
    return NULL;
}

/* Device granules and managed pages must not share a granule: the driver owns a whole one. */
static int overlaps_kind(uint64_t lo, uint64_t hi, int kind)
{
    for (size_t i = 0; i < n_allocs; i++)
        if (allocs[i].kind == kind && allocs[i].addr < hi && lo < allocs[i].addr + allocs[i].size)
            return 1;
    return 0;
}

static uint64_t granularity(void)
{
    if (!gran) {
        CUmemAllocationProp prop = device_prop();
        size_t g = 0;
        if (drv.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS || !g)
            g = 2u << 20;
        gran = g;
    }
    return gran;
}

cudaError_t cuda_vmm_map(uint64_t addr, uint64_t size)
{
    if (!loaded)
        return cudaErrorNotSupported;
    if (addr < win_start || addr + size > win_end || addr + size < addr)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&lock);
    uint64_t g = granularity();
    uint64_t first = addr & ~(g - 1), end = (addr + size + g - 1) & ~(g - 1);
    cudaError_t e = cudaSuccess;
    if (overlaps_kind(first, end, CUDA_BK_MANAGED)) {
        fprintf(stderr,
                "crac: error: device memory at 0x%llx would share a %llu KiB granule with "
                "managed memory (docs/CUDA.md)\n",
                (unsigned long long)addr, (unsigned long long)(g >> 10));
        e = cudaErrorMemoryAllocation;
    }
    uint64_t at = first;
    for (; e == cudaSuccess && at < end; at += g)
        e = granule_get(at);
    if (e == cudaSuccess && add_alloc(addr, size, CUDA_BK_DEVICE) != 0)
        e = cudaErrorMemoryAllocation;
    if (e != cudaSuccess)
        for (uint64_t back = first; back < at; back += g)
            granule_put(back);
    pthread_mutex_unlock(&lock);
    return e;
}

cudaError_t cuda_managed_map(uint64_t addr, uint64_t size)
{
    if (addr < win_start || addr + size > win_end || addr + size < addr || (addr & 4095))
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&lock);
    uint64_t len = (size + 4095) & ~4095ULL;
    uint64_t g = gran ? gran : 2u << 20;
    cudaError_t e = cudaSuccess;
    if (overlaps_kind(addr & ~(g - 1), (addr + len + g - 1) & ~(g - 1), CUDA_BK_DEVICE))
        e = cudaErrorMemoryAllocation;
    else if (mmap((void *)(uintptr_t)addr, len, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        e = cudaErrorMemoryAllocation;
    else if (add_alloc(addr, len, CUDA_BK_MANAGED) != 0) {
        mmap((void *)(uintptr_t)addr, len, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        e = cudaErrorMemoryAllocation;
    }
    pthread_mutex_unlock(&lock);
    return e;
}

/* The allocation that contains addr (not only starts there): its kind and end; 0 if none. */
int cuda_vmm_range_of(uint64_t addr, uint64_t *end)
{
    int kind = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_allocs && !kind; i++)
        if (allocs[i].addr <= addr && addr - allocs[i].addr < allocs[i].size) {
            kind = allocs[i].kind;
            *end = allocs[i].addr + allocs[i].size;
        }
    pthread_mutex_unlock(&lock);
    return kind;
}

int cuda_vmm_kind_of(uint64_t addr)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find_alloc(addr);
    int kind = a ? a->kind : 0;
    pthread_mutex_unlock(&lock);
    return kind;
}

static void release(struct alloc *a)
{
    if (a->kind == CUDA_BK_MANAGED) {
        mmap((void *)(uintptr_t)a->addr, a->size, PROT_NONE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    } else {
        uint64_t first = a->addr & ~(gran - 1), end = (a->addr + a->size + gran - 1) & ~(gran - 1);
        for (uint64_t g = first; g < end; g += gran)
            granule_put(g);
    }
}

cudaError_t cuda_vmm_unmap(uint64_t addr)
{
    pthread_mutex_lock(&lock);
    struct alloc *a = find_alloc(addr);
    if (!a) {
        pthread_mutex_unlock(&lock);
        return cudaErrorInvalidValue;
    }
    release(a);
    *a = allocs[--n_allocs];
    pthread_mutex_unlock(&lock);
    return cudaSuccess;
}

void cuda_vmm_reset(void)
{
    pthread_mutex_lock(&lock);
    while (n_allocs) {
        release(&allocs[n_allocs - 1]);
        n_allocs--;
    }
    pthread_mutex_unlock(&lock);
}
