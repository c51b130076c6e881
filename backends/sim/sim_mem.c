/* sim_mem.c — device, managed and pinned memory of the sim: its own read-write mappings at the
 * addresses crac assigns inside the device window, a sorted registry of them, and the copy/set/
 * query calls that check pointers against it. */
#include "sim.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static struct sim_alloc *allocs; /* sorted by start, disjoint; sim_lock */
static uint32_t n_allocs, cap_allocs;
static uint64_t mem_total, mem_used;

static uint64_t parse_size(const char *s, uint64_t fallback)
{
    if (!s || !*s)
        return fallback;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k':
    case 'K':
        v <<= 10;
        end++;
        break;
    case 'm':
    case 'M':
        v <<= 20;
        end++;
        break;
    case 'g':
    case 'G':
        v <<= 30;
        end++;
        break;
    case 't':
    case 'T':
        v <<= 40;
        end++;
        break;
    default: break;
    }
    if (*end == 'i' || *end == 'B' || *end == 'b')
        end++;
    if (*end == 'B')
        end++;
    return (*end || v == 0) ? fallback : v;
}

int sim_mem_init(void)
{
    mem_total = parse_size(getenv("CRAC_SIM_MEMORY"), SIM_DEFAULT_MEMORY);
    return 0;
}

uint64_t sim_mem_total(void) { return mem_total; }
uint64_t sim_mem_used(void) { return mem_used; }

static uint64_t page_up(uint64_t n) { return (n + SIM_PAGE - 1) & ~(SIM_PAGE - 1); }

/* Index of the first allocation whose end is above p. */
static uint32_t lower_bound(uint64_t p)
{
    uint32_t lo = 0, hi = n_allocs;
    while (lo < hi) {
        uint32_t mid = (lo + hi) / 2;
        if (allocs[mid].start + allocs[mid].size <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int sim_mem_find(uint64_t p, uint64_t n, struct sim_alloc *out)
{
    uint32_t i = lower_bound(p);
    if (i >= n_allocs || allocs[i].start > p || p + n > allocs[i].start + allocs[i].size ||
        p + n < p)
        return 0;
    if (out)
        *out = allocs[i];
    return 1;
}

static int insert(uint64_t start, uint64_t size, int kind)
{
    uint32_t i = lower_bound(start);
    if (i < n_allocs && allocs[i].start < start + size)
        return -1; /* overlaps */
    if (n_allocs == cap_allocs) {
        uint32_t cap = cap_allocs ? cap_allocs * 2 : 64;
        struct sim_alloc *n = bk_alloc(cap * sizeof(*n));
        if (!n)
            return -1;
        if (allocs)
            memcpy(n, allocs, n_allocs * sizeof(*n));
        bk_free(allocs, cap_allocs * sizeof(*n));
        allocs = n;
        cap_allocs = cap;
    }
    memmove(&allocs[i + 1], &allocs[i], (n_allocs - i) * sizeof(*allocs));
    allocs[i] = (struct sim_alloc){start, size, kind};
    n_allocs++;
    return 0;
}

/* Remove the allocation starting exactly at start with one of the kinds in kind_mask. */
static int remove_at(uint64_t start, unsigned kind_mask, struct sim_alloc *out)
{
    uint32_t i = lower_bound(start);
    if (i >= n_allocs || allocs[i].start != start || !(kind_mask & (1U << allocs[i].kind)))
        return 0;
    *out = allocs[i];
    memmove(&allocs[i], &allocs[i + 1], (n_allocs - i - 1) * sizeof(*allocs));
    n_allocs--;
    return 1;
}

static void reserve_back(uint64_t addr, uint64_t size)
{
    /* Never leave a hole in the window: PROT_NONE over the range again. */
    mmap((void *)addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
         0);
}

cudaError_t sim_mem_map(uint64_t addr, size_t size, int kind)
{
    uint64_t len = page_up(size);
    if (!addr || (addr & (SIM_PAGE - 1)) || addr < sim_host.window_start ||
        addr + len > sim_host.window_end || addr + len < addr)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&sim_lock);
    cudaError_t e = cudaSuccess;
    if (mem_used + len > mem_total || mem_used + len < mem_used)
        e = cudaErrorMemoryAllocation;
    else if (insert(addr, len, kind) != 0)
        e = cudaErrorInvalidValue;
    else if (mmap((void *)addr, len, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == MAP_FAILED) {
        struct sim_alloc gone;
        remove_at(addr, ~0U, &gone);
        reserve_back(addr, len);
        e = cudaErrorMemoryAllocation;
    } else {
        mem_used += len;
    }
    pthread_mutex_unlock(&sim_lock);
    return e;
}

cudaError_t sim_mem_unmap(uint64_t addr, int kind, size_t *size_out)
{
    struct sim_alloc a;
    unsigned mask = kind ? (1U << kind) : ((1U << SIM_MEM_DEVICE) | (1U << SIM_MEM_MANAGED));
    pthread_mutex_lock(&sim_lock);
    int found = remove_at(addr, mask, &a);
    if (found) {
        reserve_back(a.start, a.size);
        mem_used -= a.size;
    }
    pthread_mutex_unlock(&sim_lock);
    if (!found)
        return cudaErrorInvalidDevicePointer;
    if (size_out)
        *size_out = a.size;
    return cudaSuccess;
}

cudaError_t sim_mem_register_pinned(uint64_t addr, size_t size)
{
    pthread_mutex_lock(&sim_lock);
    int r = insert(addr, size, SIM_MEM_PINNED);
    pthread_mutex_unlock(&sim_lock);
    return r == 0 ? cudaSuccess : cudaErrorHostMemoryAlreadyRegistered;
}

cudaError_t sim_mem_unregister_pinned(uint64_t addr, size_t *size_out)
{
    struct sim_alloc a;
    pthread_mutex_lock(&sim_lock);
    int found = remove_at(addr, 1U << SIM_MEM_PINNED, &a);
    pthread_mutex_unlock(&sim_lock);
    if (!found)
        return cudaErrorInvalidValue;
    if (size_out)
        *size_out = a.size;
    return cudaSuccess;
}

void sim_mem_reset(void)
{
    for (uint32_t i = 0; i < n_allocs; i++)
        if (allocs[i].kind != SIM_MEM_PINNED)
            reserve_back(allocs[i].start, allocs[i].size);
    n_allocs = 0;
    mem_used = 0;
}

/* ---- allocation calls: the caller (shim or native front) assigned crac_addr ---- */

static cudaError_t alloc_common(void **ptr, size_t size, unsigned long long addr, int kind)
{
    if (!ptr)
        return sim_ret(cudaErrorInvalidValue);
    if (size == 0) {
        *ptr = NULL;
        return cudaSuccess;
    }
    cudaError_t e = kind == SIM_MEM_PINNED ? sim_mem_register_pinned(addr, size)
                                           : sim_mem_map(addr, size, kind);
    if (e != cudaSuccess)
        return sim_ret(e);
    *ptr = (void *)(uintptr_t)addr;
    return cudaSuccess;
}

cudaError_t sim_cudaMalloc(void **devPtr, size_t size, unsigned long long crac_addr)
{
    SIM_ENTER();
    return alloc_common(devPtr, size, crac_addr, SIM_MEM_DEVICE);
}

cudaError_t sim_cudaMallocManaged(void **devPtr, size_t size, unsigned int flags,
                                  unsigned long long crac_addr)
{
    SIM_ENTER();
    if (size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        return sim_ret(cudaErrorInvalidValue);
    return alloc_common(devPtr, size, crac_addr, SIM_MEM_MANAGED);
}

cudaError_t sim_cudaFree(void *devPtr)
{
    SIM_ENTER();
    if (!devPtr)
        return cudaSuccess;
    /* cudaFree synchronises the device: no queued work may touch the memory afterwards. */
    pthread_mutex_lock(&sim_lock);
    sim_wait_all_idle();
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(sim_mem_unmap((uint64_t)(uintptr_t)devPtr, 0, NULL));
}

cudaError_t sim_cudaMallocHost(void **ptr, size_t size, unsigned long long crac_addr)
{
    SIM_ENTER();
    return alloc_common(ptr, size, crac_addr, SIM_MEM_PINNED);
}

cudaError_t sim_cudaHostAlloc(void **pHost, size_t size, unsigned int flags,
                              unsigned long long crac_addr)
{
    SIM_ENTER();
    if (flags &
        ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return sim_ret(cudaErrorInvalidValue);
    return alloc_common(pHost, size, crac_addr, SIM_MEM_PINNED);
}

cudaError_t sim_cudaFreeHost(void *ptr)
{
    SIM_ENTER();
    if (!ptr)
        return cudaSuccess;
    pthread_mutex_lock(&sim_lock);
    sim_wait_all_idle();
    pthread_mutex_unlock(&sim_lock);
    return sim_ret(sim_mem_unregister_pinned((uint64_t)(uintptr_t)ptr, NULL));
}

cudaError_t sim_cudaMemGetInfo(size_t *free, size_t *total)
{
    SIM_ENTER();
    if (!free || !total)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    *total = mem_total;
    *free = mem_total - mem_used;
    pthread_mutex_unlock(&sim_lock);
    return cudaSuccess;
}

cudaError_t sim_cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    SIM_ENTER();
    if (!attributes)
        return sim_ret(cudaErrorInvalidValue);
    struct sim_alloc a;
    pthread_mutex_lock(&sim_lock);
    int found = sim_mem_find((uint64_t)(uintptr_t)ptr, 1, &a);
    pthread_mutex_unlock(&sim_lock);
    memset(attributes, 0, sizeof(*attributes));
    if (!found) {
        attributes->type = cudaMemoryTypeUnregistered;
        attributes->device = -2; /* cudaInvalidDeviceId */
        return cudaSuccess;
    }
    attributes->device = 0;
    switch (a.kind) {
    case SIM_MEM_DEVICE:
        attributes->type = cudaMemoryTypeDevice;
        attributes->devicePointer = (void *)ptr;
        break;
    case SIM_MEM_MANAGED:
        attributes->type = cudaMemoryTypeManaged;
        attributes->devicePointer = attributes->hostPointer = (void *)ptr;
        break;
    default:
        attributes->type = cudaMemoryTypeHost;
        attributes->devicePointer = attributes->hostPointer = (void *)ptr;
        break;
    }
    return cudaSuccess;
}

/* ---- copies and sets ---- */

/* Device side of a copy: inside one device or managed allocation. */
static int is_device(const void *p, size_t n, int *pinned)
{
    struct sim_alloc a;
    if (!sim_mem_find((uint64_t)(uintptr_t)p, n, &a))
        return 0;
    if (a.kind == SIM_MEM_PINNED) {
        if (pinned)
            *pinned = 1;
        return 0;
    }
    return 1;
}

/* Checks a copy (sim_lock held); *host_sync: pageable host memory is involved, so the call must
 * not return before the copy is done (CUDA stages such copies synchronously). */
static cudaError_t check_copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                              int *host_sync)
{
    int dst_pinned = 0, src_pinned = 0;
    int dst_dev = is_device(dst, count, &dst_pinned);
    int src_dev = is_device(src, count, &src_pinned);
    int want_dst_dev, want_src_dev;
    switch (kind) {
    case cudaMemcpyHostToHost: want_dst_dev = 0, want_src_dev = 0; break;
    case cudaMemcpyHostToDevice: want_dst_dev = 1, want_src_dev = 0; break;
    case cudaMemcpyDeviceToHost: want_dst_dev = 0, want_src_dev = 1; break;
    case cudaMemcpyDeviceToDevice: want_dst_dev = 1, want_src_dev = 1; break;
    case cudaMemcpyDefault: want_dst_dev = dst_dev, want_src_dev = src_dev; break;
    default: return cudaErrorInvalidMemcpyDirection;
    }
    if (!dst || !src || (want_dst_dev && !dst_dev) || (want_src_dev && !src_dev))
        return cudaErrorInvalidValue;
    *host_sync = (!want_dst_dev && !dst_pinned) || (!want_src_dev && !src_pinned);
    return cudaSuccess;
}

static cudaError_t submit(struct sim_stream *s, struct sim_op *op, int wait)
{
    uint64_t seq = sim_stream_enqueue(s, op, NULL);
    if (!seq)
        return cudaErrorMemoryAllocation;
    if (wait && seq != SIM_SEQ_CAPTURED) {
        uint32_t index, gen;
        sim_stream_ident(s, &index, &gen);
        struct sim_dep d = {index, gen, seq};
        while (!sim_dep_done(&d))
            pthread_cond_wait(&sim_cv, &sim_lock);
    }
    return cudaSuccess;
}

static cudaError_t copy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                        cudaStream_t stream, int sync)
{
    SIM_ENTER();
    if (count == 0)
        return cudaSuccess;
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = sim_stream_get(stream);
    int host_sync = 0;
    cudaError_t e =
        s ? check_copy(dst, src, count, kind, &host_sync) : cudaErrorInvalidResourceHandle;
    if (e == cudaSuccess) {
        struct sim_op *op = sim_op_new(OP_COPY);
        if (!op) {
            e = cudaErrorMemoryAllocation;
        } else {
            op->u.copy.dst = dst;
            op->u.copy.src = src;
            op->u.copy.n = count;
            e = submit(s, op, sync || host_sync);
        }
    }
    pthread_mutex_unlock(&sim_lock);
    if (e == cudaSuccess && sync)
        e = sim_sticky();
    return sim_ret(e);
}

cudaError_t sim_cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return copy(dst, src, count, kind, NULL, 1);
}

cudaError_t sim_cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                cudaStream_t stream)
{
    return copy(dst, src, count, kind, stream, 0);
}

static cudaError_t set(void *devPtr, int value, size_t count, cudaStream_t stream, int sync)
{
    SIM_ENTER();
    if (count == 0)
        return cudaSuccess;
    pthread_mutex_lock(&sim_lock);
    struct sim_stream *s = sim_stream_get(stream);
    cudaError_t e = cudaSuccess;
    struct sim_alloc a;
    if (!s)
        e = cudaErrorInvalidResourceHandle;
    else if (!sim_mem_find((uint64_t)(uintptr_t)devPtr, count, &a) || a.kind == SIM_MEM_PINNED)
        e = cudaErrorInvalidValue;
    if (e == cudaSuccess) {
        struct sim_op *op = sim_op_new(OP_SET);
        if (!op) {
            e = cudaErrorMemoryAllocation;
        } else {
            op->u.set.dst = devPtr;
            op->u.set.value = value;
            op->u.set.n = count;
            e = submit(s, op, sync);
        }
    }
    pthread_mutex_unlock(&sim_lock);
    if (e == cudaSuccess && sync)
        e = sim_sticky();
    return sim_ret(e);
}

cudaError_t sim_cudaMemset(void *devPtr, int value, size_t count)
{
    return set(devPtr, value, count, NULL, 1);
}

cudaError_t sim_cudaMemsetAsync(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return set(devPtr, value, count, stream, 0);
}
