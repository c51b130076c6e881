/* cudart12_compat.c — the CUDA 12 entries whose ABI differs from CUDA 13's (crac_py/codegen/
 * cuda12.py TRANSLATED): translated here, then passed to the 13 library's function. */
#include <cuda_runtime_api.h>

#include "cudart12_fwd13.h"
#include "cudart12_types13.h"

#include <stddef.h>
#include <string.h>

/* The 13 library's functions that take CUDA 13's structures, by their versioned names (the 12
 * headers declare the same names with CUDA 12's types). */
cudaError_t crac13_cudaGetDeviceProperties(struct crac13_cudaDeviceProp *prop, int device);
__asm__(".symver crac13_cudaGetDeviceProperties, cudaGetDeviceProperties@libcudart.so.13");
cudaError_t crac13_cudaChooseDevice(int *device, const struct crac13_cudaDeviceProp *prop);
__asm__(".symver crac13_cudaChooseDevice, cudaChooseDevice@libcudart.so.13");
cudaError_t crac13_cudaPointerGetAttributes(struct crac13_cudaPointerAttributes *attributes,
                                            const void *ptr);
__asm__(".symver crac13_cudaPointerGetAttributes, cudaPointerGetAttributes@libcudart.so.13");
cudaError_t crac13_cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                                 struct cudaMemLocation location);
__asm__(".symver crac13_cudaMemAdvise, cudaMemAdvise@libcudart.so.13");
cudaError_t crac13_cudaMemPrefetchAsync(const void *devPtr, size_t count,
                                        struct cudaMemLocation location, unsigned int flags,
                                        cudaStream_t stream);
__asm__(".symver crac13_cudaMemPrefetchAsync, cudaMemPrefetchAsync@libcudart.so.13");
cudaError_t crac13_cudaRuntimeGetVersion(int *runtimeVersion);
__asm__(".symver crac13_cudaRuntimeGetVersion, cudaRuntimeGetVersion@libcudart.so.13");

/* cudaMemLocation kept its layout (cuda12.SAME_LAYOUT); CUDA 12's device number -1
 * (cudaCpuDeviceId) means the host. */
static struct cudaMemLocation location_of(int device)
{
    struct cudaMemLocation loc;
    memset(&loc, 0, sizeof(loc));
    loc.type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc.id = device == cudaCpuDeviceId ? 0 : device;
    return loc;
}

/* A field CUDA 13 dropped from cudaDeviceProp but still answers as an attribute; 0 where the
 * runtime has no such attribute. */
static int attribute(enum cudaDeviceAttr attr, int device)
{
    int v = 0;
    return crac13_cudaDeviceGetAttribute(&v, attr, device) == cudaSuccess ? v : 0;
}

/* cudaGetDeviceProperties in CUDA 12's headers is a macro for this name. */
cudaError_t CUDARTAPI cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    struct crac13_cudaDeviceProp p13;
    if (!prop)
        return crac13_cudaGetDeviceProperties(NULL, device);
    cudaError_t r = crac13_cudaGetDeviceProperties(&p13, device);
    if (r != cudaSuccess)
        return r;
    memset(prop, 0, sizeof(*prop));
#define COPY(f) memcpy(&prop->f, &p13.f, sizeof(prop->f));
    CRAC12_COMMON_cudaDeviceProp(COPY)
#undef COPY
        prop->clockRate = attribute(cudaDevAttrClockRate, device);
    prop->memoryClockRate = attribute(cudaDevAttrMemoryClockRate, device);
    prop->computeMode = attribute(cudaDevAttrComputeMode, device);
    prop->deviceOverlap = attribute(cudaDevAttrGpuOverlap, device);
    prop->kernelExecTimeoutEnabled = attribute(cudaDevAttrKernelExecTimeout, device);
    prop->maxTexture1DLinear = attribute(cudaDevAttrMaxTexture1DLinearWidth, device);
    prop->singleToDoublePrecisionPerfRatio =
        attribute(cudaDevAttrSingleToDoublePrecisionPerfRatio, device);
    prop->cooperativeMultiDeviceLaunch = 0; /* removed in CUDA 13: no device offers it */
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaChooseDevice(int *device, const struct cudaDeviceProp *prop)
{
    struct crac13_cudaDeviceProp p13;
    if (!prop)
        return crac13_cudaChooseDevice(device, NULL);
    memset(&p13, 0, sizeof(p13));
#define COPY(f) memcpy(&p13.f, &prop->f, sizeof(p13.f));
    CRAC12_COMMON_cudaDeviceProp(COPY)
#undef COPY
        return crac13_cudaChooseDevice(device, &p13);
}

/* CUDA 12's structure is 24 bytes: the 13 function would write 88. */
cudaError_t CUDARTAPI cudaPointerGetAttributes(struct cudaPointerAttributes *attributes,
                                               const void *ptr)
{
    struct crac13_cudaPointerAttributes a13;
    if (!attributes)
        return crac13_cudaPointerGetAttributes(NULL, ptr);
    memset(&a13, 0, sizeof(a13));
    cudaError_t r = crac13_cudaPointerGetAttributes(&a13, ptr);
#define COPY(f) memcpy(&attributes->f, &a13.f, sizeof(attributes->f));
    CRAC12_COMMON_cudaPointerAttributes(COPY)
#undef COPY
        return r;
}

cudaError_t CUDARTAPI cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice,
                                    int device)
{
    return crac13_cudaMemAdvise(devPtr, count, advice, location_of(device));
}

cudaError_t CUDARTAPI cudaMemAdvise_v2(const void *devPtr, size_t count,
                                       enum cudaMemoryAdvise advice,
                                       struct cudaMemLocation location)
{
    return crac13_cudaMemAdvise(devPtr, count, advice, location);
}

cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *devPtr, size_t count, int dstDevice,
                                           cudaStream_t stream)
{
    return crac13_cudaMemPrefetchAsync(devPtr, count, location_of(dstDevice), 0, stream);
}

cudaError_t CUDARTAPI cudaMemPrefetchAsync_v2(const void *devPtr, size_t count,
                                              struct cudaMemLocation location, unsigned int flags,
                                              cudaStream_t stream)
{
    return crac13_cudaMemPrefetchAsync(devPtr, count, location, flags, stream);
}

/* A program linked to libcudart.so.12 is told the CUDA 12 runtime version it was built against
 * (CUDART_VERSION of these headers), as NVIDIA's libcudart.so.12 would. */
cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *runtimeVersion)
{
    cudaError_t r = crac13_cudaRuntimeGetVersion(runtimeVersion);
    if (r == cudaSuccess)
        *runtimeVersion = CUDART_VERSION;
    return r;
}

cudaError_t crac13_cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t *from,
                                            const cudaGraphNode_t *to,
                                            const cudaGraphEdgeData *edgeData,
                                            size_t numDependencies);
__asm__(".symver crac13_cudaGraphAddDependencies, cudaGraphAddDependencies@libcudart.so.13");

cudaError_t CUDARTAPI cudaGraphAddDependencies(cudaGraph_t graph, const cudaGraphNode_t *from,
                                               const cudaGraphNode_t *to, size_t numDependencies)
{
    return crac13_cudaGraphAddDependencies(graph, from, to, NULL, numDependencies);
}

cudaError_t CUDARTAPI cudaGraphAddDependencies_v2(cudaGraph_t graph, const cudaGraphNode_t *from,
                                                  const cudaGraphNode_t *to,
                                                  const cudaGraphEdgeData *edgeData,
                                                  size_t numDependencies)
{
    return crac13_cudaGraphAddDependencies(graph, from, to, edgeData, numDependencies);
}
