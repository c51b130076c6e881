/* shim_module.c — nvcc's fat-binary registration entry points in the shim: the backend's module
 * handle is kept behind a virtual handle, like streams and events. */
#include "shim.h"

#include "cudart_shim_gen.h"
#include "cudart_sim_api.h"

#include <stddef.h>

void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin)
{
    struct crac_args___cudaRegisterFatBinary a = {fatCubin};
    uint64_t backend = crac_cross___cudaRegisterFatBinary(&a);
    uint64_t v = 0;
    if (!backend || shim_vh_wrap(SHIM_VH_MODULE, backend, &v) != cudaSuccess)
        return NULL;
    return (void **)(uintptr_t)v;
}

static void **backend_module(void **handle)
{
    return (void **)(uintptr_t)shim_vh_backend(SHIM_VH_MODULE, (uint64_t)(uintptr_t)handle);
}

void CUDARTAPI __cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    struct crac_args___cudaRegisterFatBinaryEnd a = {backend_module(fatCubinHandle)};
    crac_cross___cudaRegisterFatBinaryEnd(&a);
}

void CUDARTAPI __cudaUnregisterFatBinary(void **fatCubinHandle)
{
    struct crac_args___cudaUnregisterFatBinary a = {backend_module(fatCubinHandle)};
    crac_cross___cudaUnregisterFatBinary(&a);
    shim_vh_release(SHIM_VH_MODULE, (uint64_t)(uintptr_t)fatCubinHandle);
}

void CUDARTAPI __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun,
                                      char *deviceFun, const char *deviceName, int thread_limit,
                                      uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    struct crac_args___cudaRegisterFunction a = {
        backend_module(fatCubinHandle), hostFun, deviceFun, deviceName, thread_limit, tid, bid,
        bDim, gDim, wSize};
    crac_cross___cudaRegisterFunction(&a);
}
