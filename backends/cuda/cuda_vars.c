/* cuda_vars.c — nvcc's device variables under the cuda backend: the runtime's module owns their
 * memory, so each has a shadow at the address crac assigned in D that a checkpoint fills from it
 * and a restart copies back into it; and launches by host function. */
#include "cuda_bk.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct var {
    void **module; /* the runtime's handle (the shim translated the program's) */
    const char *host_var;
    const char *name;
    uint64_t shadow, size;
    int restored;    /* the shadow came back with the device state: copy it in at module end */
    int managed;     /* __managed__: read and written through host_ptr, where the runtime put it */
    void **host_ptr; /* __managed__: nvcc's pointer to the variable (program memory) */
};

static struct var *vars;
static size_t n_vars, cap_vars;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static cudaError_t (*launch)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
static cudaError_t (*launch_ptsz)(const void *, dim3, dim3, void **, size_t, cudaStream_t);
static char (*init_module)(void **);

void cuda_vars_resolve(void *runtime)
{
    *(void **)&launch = dlsym(runtime, "cudaLaunchKernel");
    *(void **)&launch_ptsz = dlsym(runtime, "cudaLaunchKernel_ptsz");
    *(void **)&init_module = dlsym(runtime, "__cudaInitModule");
}

static void add(struct var v)
{
    pthread_mutex_lock(&lock);
    if (cuda_bk_reserve((void **)&vars, n_vars, &cap_vars, sizeof(*vars)) == 0)
        vars[n_vars++] = v;
    pthread_mutex_unlock(&lock);
}

/* Registration runs before main: it must not create the device context (a program that never
 * touches the GPU, or one on a machine without a driver, must see what it sees natively), so the
 * shadow is mapped at the first checkpoint. */
void cudabk___cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant,
                              int global, unsigned long long crac_addr)
{
    if (!cuda_real.__cudaRegisterVar)
        return;
    cuda_real.__cudaRegisterVar(fatCubinHandle, hostVar, deviceAddress, deviceName, ext, size,
                                constant, global);
    if (crac_addr && size) /* restored: the shadow came back with the device state */
        add((struct var){fatCubinHandle, hostVar, deviceName, crac_addr, size,
                         cuda_vmm_kind_of(crac_addr) != 0, 0, NULL});
}

void cudabk___cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                     char *deviceAddress, const char *deviceName, int ext,
                                     size_t size, int constant, int global,
                                     unsigned long long crac_addr)
{
    if (cuda_real.__cudaRegisterManagedVar)
        cuda_real.__cudaRegisterManagedVar(fatCubinHandle, hostVarPtrAddress, deviceAddress,
                                           deviceName, ext, size, constant, global);
    if (crac_addr && size && hostVarPtrAddress)
        add((struct var){fatCubinHandle, NULL, deviceName, crac_addr, size,
                         cuda_vmm_kind_of(crac_addr) == CUDA_BK_MANAGED, 1, hostVarPtrAddress});
}

/* nvcc's __cudaInitModule, crossed from the shim (whose own answer serves the sim). */
uint64_t cuda_vars_init_module(uint64_t module, uint64_t a1, uint64_t a2)
{
    (void)a1, (void)a2;
    return init_module ? (uint64_t)(unsigned char)init_module((void **)(uintptr_t)module) : 0;
}

/* nvcc's pointer to a managed variable is set by the runtime when it loads the module (lazily:
 * __cudaInitModule, which nvcc's code calls before host code first touches the variable, or the
 * module's first launch). The runtime's memory, or NULL where it cannot (no device). */
static void *managed_bind(struct var *v)
{
    if (!*v->host_ptr && init_module)
        init_module(v->module);
    return *v->host_ptr;
}

void cudabk___cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    if (cuda_real.__cudaRegisterFatBinaryEnd)
        cuda_real.__cudaRegisterFatBinaryEnd(fatCubinHandle);
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_vars; i++)
        if (vars[i].module == fatCubinHandle && vars[i].restored && vars[i].managed) {
            /* The program's pointer still names the old runtime's memory: loading the module
             * on this runtime points it at the new one, which gets the saved value. */
            vars[i].restored = 0;
            *vars[i].host_ptr = NULL;
            void *at = managed_bind(&vars[i]);
            if (at)
                memcpy(at, (const void *)(uintptr_t)vars[i].shadow, vars[i].size);
            else
                fprintf(stderr, "crac: error: __managed__ variable %s could not be restored\n",
                        vars[i].name ? vars[i].name : "?");
        } else if (vars[i].module == fatCubinHandle && vars[i].restored) {
            vars[i].restored = 0;
            cudaError_t e = cuda_real.cudaMemcpyToSymbol(vars[i].host_var,
                                                         (const void *)(uintptr_t)vars[i].shadow,
                                                         vars[i].size, 0, cudaMemcpyDeviceToDevice);
            if (e != cudaSuccess)
                fprintf(stderr, "crac: error: a device variable could not be restored (error %d)\n",
                        (int)e);
        }
    pthread_mutex_unlock(&lock);
}

void cudabk___cudaUnregisterFatBinary(void **fatCubinHandle)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_vars;)
        if (vars[i].module == fatCubinHandle)
            vars[i] = vars[--n_vars];
        else
            i++;
    pthread_mutex_unlock(&lock);
    if (cuda_real.__cudaUnregisterFatBinary)
        cuda_real.__cudaUnregisterFatBinary(fatCubinHandle);
}

/* Before a checkpoint saves D: every variable's current value into its shadow (mapped at the
 * first checkpoint). */
int cuda_vars_to_shadows(void)
{
    int failed = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_vars; i++) {
        struct var *v = &vars[i];
        if (v->managed) {
            /* Its shadow is managed memory (host memory, as the shim allocated it); the value is
             * where the runtime's pointer says, host-readable after the synchronisation. */
            void *at = managed_bind(v);
            if ((!cuda_vmm_kind_of(v->shadow) &&
                 cuda_managed_map(v->shadow, v->size) != cudaSuccess) ||
                !at) {
                failed++;
                continue;
            }
            memcpy((void *)(uintptr_t)v->shadow, at, v->size);
            continue;
        }
        if (!cuda_vmm_kind_of(v->shadow) && cuda_vmm_map(v->shadow, v->size) != cudaSuccess) {
            failed++;
            continue;
        }
        if (cuda_real.cudaMemcpyFromSymbol((void *)(uintptr_t)v->shadow, v->host_var, v->size, 0,
                                           cudaMemcpyDeviceToDevice) != cudaSuccess)
            failed++;
    }
    pthread_mutex_unlock(&lock);
    return failed;
}

/* The shim's kernel handle is the host function (upperhalf/cudart/shim_fatbin.c): launch by it. */
cudaError_t cudabk___cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                      size_t sharedMem, cudaStream_t stream)
{
    if (!launch)
        return cudaErrorNotSupported;
    return launch((const void *)kernel, gridDim, blockDim, args, sharedMem, stream);
}

cudaError_t cudabk___cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                           void **args, size_t sharedMem, cudaStream_t stream)
{
    if (!launch_ptsz)
        return cudaErrorNotSupported;
    return launch_ptsz((const void *)kernel, gridDim, blockDim, args, sharedMem, stream);
}
