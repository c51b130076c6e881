/* cuda_mem.c — the allocation calls under the cuda backend: crac chose the address (the upper
 * shim's dalloc), the driver backs it (cuda_vmm.c); pinned host memory is registered with the
 * runtime where the shim mapped it. */
#include "cuda_bk.h"

#include <dlfcn.h>
#include <stdio.h>

/* Functions of the runtime outside the spec's crossing set, used by the backend itself. */
static cudaError_t (*host_register)(void *, size_t, unsigned int);
static cudaError_t (*host_unregister)(void *);
static cudaError_t (*device_attribute)(int *, enum cudaDeviceAttr, int);

void cuda_mem_resolve(void *runtime)
{
    *(void **)&host_register = dlsym(runtime, "cudaHostRegister");
    *(void **)&host_unregister = dlsym(runtime, "cudaHostUnregister");
    *(void **)&device_attribute = dlsym(runtime, "cudaDeviceGetAttribute");
}

cudaError_t cuda_bk_context(void)
{
    /* cudaFree(NULL) is the runtime's documented way to initialise: it answers what any first
     * call would (no driver, no device, a driver too old). */
    return cuda_real.cudaFree ? cuda_real.cudaFree(NULL) : cudaErrorInitializationError;
}

cudaError_t cudabk_cudaMalloc(void **devPtr, size_t size, unsigned long long crac_addr)
{
    cudaError_t e = cuda_bk_context();
    if (e != cudaSuccess)
        return e;
    if (!devPtr)
        return cudaErrorInvalidValue;
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    if ((e = cuda_vmm_map(crac_addr, size)) == cudaSuccess)
        *devPtr = (void *)(uintptr_t)crac_addr;
    return e;
}

cudaError_t cudabk_cudaMallocManaged(void **devPtr, size_t size, unsigned int flags,
                                     unsigned long long crac_addr)
{
    cudaError_t e = cuda_bk_context();
    if (e != cudaSuccess)
        return e;
    if (!devPtr || size == 0 || (flags != cudaMemAttachGlobal && flags != cudaMemAttachHost))
        return cudaErrorInvalidValue;
    int pageable = 0, dev = 0;
    if (cuda_real.cudaGetDevice)
        cuda_real.cudaGetDevice(&dev);
    if (!device_attribute ||
        device_attribute(&pageable, cudaDevAttrPageableMemoryAccess, dev) != cudaSuccess ||
        !pageable) {
        static int said;
        if (!said++)
            fprintf(stderr, "crac: error: managed memory under crac needs a device that reaches "
                            "pageable host memory (HMM or ATS); this one does not "
                            "(docs/CUDA.md)\n");
        return cudaErrorNotSupported;
    }
    if ((e = cuda_managed_map(crac_addr, size)) == cudaSuccess)
        *devPtr = (void *)(uintptr_t)crac_addr;
    return e;
}

cudaError_t cudabk_cudaFree(void *devPtr)
{
    cudaError_t e = cuda_bk_context();
    if (e != cudaSuccess || !devPtr)
        return e;
    if (!cuda_vmm_kind_of((uint64_t)(uintptr_t)devPtr))
        return cudaErrorInvalidValue;
    /* cudaFree synchronises the device: no queued work may touch the memory afterwards. */
    if ((e = cuda_real.cudaDeviceSynchronize()) != cudaSuccess)
        return e;
    return cuda_vmm_unmap((uint64_t)(uintptr_t)devPtr);
}

static cudaError_t register_pinned(void **ptr, size_t size, unsigned int flags,
                                   unsigned long long crac_addr)
{
    cudaError_t e = cuda_bk_context();
    if (e != cudaSuccess)
        return e;
    if (!ptr)
        return cudaErrorInvalidValue;
    if (!host_register)
        return cudaErrorNotSupported;
    unsigned int reg = cudaHostRegisterPortable;
    if (flags & cudaHostAllocMapped)
        reg |= cudaHostRegisterMapped;
    if ((e = host_register((void *)(uintptr_t)crac_addr, size, reg)) == cudaSuccess)
        *ptr = (void *)(uintptr_t)crac_addr;
    return e;
}

cudaError_t cudabk_cudaMallocHost(void **ptr, size_t size, unsigned long long crac_addr)
{
    return register_pinned(ptr, size, cudaHostAllocMapped, crac_addr);
}

cudaError_t cudabk_cudaHostAlloc(void **pHost, size_t size, unsigned int flags,
                                 unsigned long long crac_addr)
{
    if (flags &
        ~(unsigned)(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))
        return cudaErrorInvalidValue;
    return register_pinned(pHost, size, flags, crac_addr);
}

cudaError_t cudabk_cudaFreeHost(void *ptr)
{
    cudaError_t e = cuda_bk_context();
    if (e != cudaSuccess || !ptr)
        return e;
    if (!host_unregister)
        return cudaErrorNotSupported;
    if ((e = cuda_real.cudaDeviceSynchronize()) != cudaSuccess)
        return e;
    return host_unregister(ptr);
}

cudaError_t cudabk_cudaDeviceReset(void)
{
    /* The reset destroys the primary context, and with it what the driver backed D with. */
    cuda_vmm_reset();
    return cuda_real.cudaDeviceReset ? cuda_real.cudaDeviceReset() : cudaErrorNotSupported;
}
