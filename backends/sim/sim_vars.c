/* sim_vars.c — nvcc's device variables in the sim (__device__/__constant__/__managed__: device
 * memory at the address crac assigned, bound to the kernels library), the cudaMemcpy*Symbol
 * family, nvcc's __cudaLaunchKernel and the --default-stream per-thread (_ptsz/_ptds) entries. */
#include "sim.h"

#include <string.h>

#define SIM_MAX_VARS 4096

struct sim_var {
    const void *host_var; /* the key cudaMemcpyToSymbol gets: the host shadow's address */
    uint64_t addr, size;
    uint32_t module_index;
    int live;
};

static struct sim_var *vars;

/* The table is made on first use (programs without nvcc variables never need it). */
int sim_vars_init(void)
{
    if (!vars)
        vars = bk_alloc(SIM_MAX_VARS * sizeof(*vars));
    return vars ? 0 : -1;
}

void sim_vars_drop_module(uint32_t module_index)
{
    for (uint32_t i = 0; vars && i < SIM_MAX_VARS; i++)
        if (vars[i].live && vars[i].module_index == module_index)
            vars[i].live = 0;
}

/* Caller holds sim_lock. */
static struct sim_var *var_find(const void *host_var)
{
    for (uint32_t i = 0; vars && i < SIM_MAX_VARS; i++)
        if (vars[i].live && vars[i].host_var == host_var)
            return &vars[i];
    return NULL;
}

/* A restart finds the memory at addr restored from device.img: keep its contents. */
static void register_var(void **handle, const void *host_var, const char *name, size_t size,
                         unsigned long long addr, int kind)
{
    if (!host_var || !size || !addr)
        return;
    pthread_mutex_lock(&sim_lock);
    struct sim_alloc a;
    int restored = sim_mem_find(addr, size, &a) && a.start == addr;
    pthread_mutex_unlock(&sim_lock);
    int mapped = restored || sim_mem_map(addr, size, kind) == cudaSuccess; /* takes sim_lock */
    pthread_mutex_lock(&sim_lock);
    long mi = sim_module_index(handle);
    if (mi >= 0 && mapped && sim_vars_init() == 0) {
        sim_kernels_bind_var(name, addr, size, !restored);
        struct sim_var *v = var_find(host_var);
        for (uint32_t i = 0; !v && i < SIM_MAX_VARS; i++)
            if (!vars[i].live)
                v = &vars[i];
        if (v)
            *v = (struct sim_var){host_var, addr, size, (uint32_t)mi, 1};
    }
    pthread_mutex_unlock(&sim_lock);
}

void sim___cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                           const char *deviceName, int ext, size_t size, int constant, int global,
                           unsigned long long crac_addr)
{
    (void)deviceAddress, (void)ext, (void)constant, (void)global;
    register_var(fatCubinHandle, hostVar, deviceName, size, crac_addr, SIM_MEM_DEVICE);
}

void sim___cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                  char *deviceAddress, const char *deviceName, int ext, size_t size,
                                  int constant, int global, unsigned long long crac_addr)
{
    (void)deviceAddress, (void)ext, (void)constant, (void)global;
    register_var(fatCubinHandle, hostVarPtrAddress, deviceName, size, crac_addr, SIM_MEM_MANAGED);
    if (hostVarPtrAddress && crac_addr)
        *hostVarPtrAddress = (void *)(uintptr_t)crac_addr; /* host code reads it through this */
}

cudaError_t sim___cudaGetKernel(cudaKernel_t *kernel, const void *hostFun)
{
    if (!kernel || !hostFun)
        return sim_ret(cudaErrorInvalidValue);
    *kernel = (cudaKernel_t)(uintptr_t)hostFun; /* a kernel handle is the host function */
    return cudaSuccess;
}

char sim___cudaInitModule(void **fatCubinHandle)
{
    (void)fatCubinHandle;
    return 1;
}

cudaError_t sim___cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                   size_t sharedMem, cudaStream_t stream)
{
    return sim_cudaLaunchKernel((const void *)kernel, gridDim, blockDim, args, sharedMem, stream);
}

/* Per-thread default stream: the sim treats cudaStreamPerThread as the legacy stream
 * (docs/SIM.md), so the _ptsz/_ptds entries are the plain ones. */
cudaError_t sim___cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                        void **args, size_t sharedMem, cudaStream_t stream)
{
    return sim_cudaLaunchKernel((const void *)kernel, gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t sim_cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                      size_t sharedMem, cudaStream_t stream)
{
    return sim_cudaLaunchKernel(func, gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t sim_cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    return sim_cudaMemcpy(dst, src, count, kind);
}

cudaError_t sim_cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count,
                                     enum cudaMemcpyKind kind, cudaStream_t stream)
{
    return sim_cudaMemcpyAsync(dst, src, count, kind, stream);
}

cudaError_t sim_cudaMemset_ptds(void *devPtr, int value, size_t count)
{
    return sim_cudaMemset(devPtr, value, count);
}

cudaError_t sim_cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    return sim_cudaMemsetAsync(devPtr, value, count, stream);
}

cudaError_t sim_cudaStreamSynchronize_ptsz(cudaStream_t stream)
{
    return sim_cudaStreamSynchronize(stream);
}

/* The device address of symbol + offset for count bytes, or an error. */
static cudaError_t symbol_at(const void *symbol, size_t count, size_t offset, void **out)
{
    pthread_mutex_lock(&sim_lock);
    struct sim_var *v = symbol ? var_find(symbol) : NULL;
    cudaError_t e = cudaSuccess;
    if (!v)
        e = cudaErrorInvalidSymbol;
    else if (offset > v->size || count > v->size - offset)
        e = cudaErrorInvalidValue;
    else
        *out = (void *)(uintptr_t)(v->addr + offset);
    pthread_mutex_unlock(&sim_lock);
    return e;
}

cudaError_t sim_cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                                   enum cudaMemcpyKind kind)
{
    SIM_ENTER();
    void *dst;
    cudaError_t e = symbol_at(symbol, count, offset, &dst);
    if (e == cudaSuccess && kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
        kind != cudaMemcpyDefault)
        e = cudaErrorInvalidMemcpyDirection;
    return e == cudaSuccess ? sim_cudaMemcpy(dst, src, count, kind) : sim_ret(e);
}

cudaError_t sim_cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                                     enum cudaMemcpyKind kind)
{
    SIM_ENTER();
    void *src;
    cudaError_t e = symbol_at(symbol, count, offset, &src);
    if (e == cudaSuccess && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
        kind != cudaMemcpyDefault)
        e = cudaErrorInvalidMemcpyDirection;
    return e == cudaSuccess ? sim_cudaMemcpy(dst, src, count, kind) : sim_ret(e);
}

cudaError_t sim_cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
                                        size_t offset, enum cudaMemcpyKind kind,
                                        cudaStream_t stream)
{
    SIM_ENTER();
    void *dst;
    cudaError_t e = symbol_at(symbol, count, offset, &dst);
    if (e == cudaSuccess && kind != cudaMemcpyHostToDevice && kind != cudaMemcpyDeviceToDevice &&
        kind != cudaMemcpyDefault)
        e = cudaErrorInvalidMemcpyDirection;
    return e == cudaSuccess ? sim_cudaMemcpyAsync(dst, src, count, kind, stream) : sim_ret(e);
}

cudaError_t sim_cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count,
                                          size_t offset, enum cudaMemcpyKind kind,
                                          cudaStream_t stream)
{
    SIM_ENTER();
    void *src;
    cudaError_t e = symbol_at(symbol, count, offset, &src);
    if (e == cudaSuccess && kind != cudaMemcpyDeviceToHost && kind != cudaMemcpyDeviceToDevice &&
        kind != cudaMemcpyDefault)
        e = cudaErrorInvalidMemcpyDirection;
    return e == cudaSuccess ? sim_cudaMemcpyAsync(dst, src, count, kind, stream) : sim_ret(e);
}

cudaError_t sim_cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count,
                                        size_t offset, enum cudaMemcpyKind kind)
{
    return sim_cudaMemcpyToSymbol(symbol, src, count, offset, kind);
}

cudaError_t sim_cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count,
                                          size_t offset, enum cudaMemcpyKind kind)
{
    return sim_cudaMemcpyFromSymbol(dst, symbol, count, offset, kind);
}

cudaError_t sim_cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    SIM_ENTER();
    if (!devPtr)
        return sim_ret(cudaErrorInvalidValue);
    void *p;
    cudaError_t e = symbol_at(symbol, 0, 0, &p);
    if (e == cudaSuccess)
        *devPtr = p;
    return sim_ret(e);
}

cudaError_t sim_cudaGetSymbolSize(size_t *size, const void *symbol)
{
    SIM_ENTER();
    if (!size)
        return sim_ret(cudaErrorInvalidValue);
    pthread_mutex_lock(&sim_lock);
    struct sim_var *v = symbol ? var_find(symbol) : NULL;
    if (v)
        *size = v->size;
    pthread_mutex_unlock(&sim_lock);
    return v ? cudaSuccess : sim_ret(cudaErrorInvalidSymbol);
}

/* Lower-half entry crac_lh_kernels_path: where the shim says the kernels library is. */
uint64_t sim_lh_kernels_path(uint64_t path, uint64_t a1, uint64_t a2)
{
    (void)a1, (void)a2;
    pthread_mutex_lock(&sim_lock);
    sim_kernels_set_path((const char *)(uintptr_t)path);
    pthread_mutex_unlock(&sim_lock);
    return 0;
}
