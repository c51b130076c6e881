/* rt_compose.c — runtime calls made of other runtime calls (pitched allocations, 2D/3D copies and
 * sets as rows, peer copies, stream callbacks, cooperative launches); built into both the shim
 * and the native sim, so under crac they cross through the shim's own entries. */
#include <cuda_runtime_api.h>

#include <stdint.h>
#include <stdlib.h>

#ifdef CRAC_SIM_VERSION /* the native sim: errors are recorded by the sim directly */
cudaError_t sim_ret(cudaError_t e);
#define rt_fail(e) sim_ret(e)
#else
#include "shim.h"
#define rt_fail(e) shim_fail(e)
#endif

/* Row pitch of cudaMallocPitch: rows start 512-byte aligned, as on NVIDIA GPUs. */
#define PITCH_ALIGN 512

cudaError_t CUDARTAPI cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height)
{
    if (!devPtr || !pitch)
        return rt_fail(cudaErrorInvalidValue);
    size_t p = (width + PITCH_ALIGN - 1) / PITCH_ALIGN * PITCH_ALIGN;
    if (height && p > SIZE_MAX / height)
        return rt_fail(cudaErrorMemoryAllocation);
    cudaError_t e = cudaMalloc(devPtr, p * height);
    if (e == cudaSuccess)
        *pitch = p;
    return e;
}

cudaError_t CUDARTAPI cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent)
{
    if (!pitchedDevPtr)
        return rt_fail(cudaErrorInvalidValue);
    size_t pitch = 0;
    void *p = NULL;
    size_t rows = extent.height * extent.depth;
    if (extent.depth && rows / extent.depth != extent.height)
        return rt_fail(cudaErrorMemoryAllocation);
    cudaError_t e = cudaMallocPitch(&p, &pitch, extent.width, rows);
    if (e == cudaSuccess)
        *pitchedDevPtr = (struct cudaPitchedPtr){p, pitch, extent.width, extent.height};
    return e;
}

/* Copies `rows` rows of `width` bytes, each queued on stream as one copy (a capturing stream
 * records each as a node); sync: cudaMemcpy's semantics, done when it returns. */
static cudaError_t copy_rows(char *dst, size_t dpitch, const char *src, size_t spitch, size_t width,
                             size_t rows, enum cudaMemcpyKind kind, cudaStream_t stream, int sync)
{
    if (!width || !rows)
        return cudaSuccess;
    if (width > dpitch || width > spitch)
        return rt_fail(cudaErrorInvalidPitchValue);
    if (dpitch == width && spitch == width) /* contiguous: one copy */
        return sync ? cudaMemcpy(dst, src, width * rows, kind)
                    : cudaMemcpyAsync(dst, src, width * rows, kind, stream);
    for (size_t r = 0; r < rows; r++) {
        cudaError_t e =
            cudaMemcpyAsync(dst + r * dpitch, src + r * spitch, width, kind, sync ? NULL : stream);
        if (e != cudaSuccess)
            return e;
    }
    return sync ? cudaStreamSynchronize(NULL) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch,
                                   size_t width, size_t height, enum cudaMemcpyKind kind)
{
    return copy_rows(dst, dpitch, src, spitch, width, height, kind, NULL, 1);
}

cudaError_t CUDARTAPI cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch,
                                        size_t width, size_t height, enum cudaMemcpyKind kind,
                                        cudaStream_t stream)
{
    return copy_rows(dst, dpitch, src, spitch, width, height, kind, stream, 0);
}

/* Linear memory only (no CUDA arrays: the sim has none); positions and extent in bytes/rows. */
static cudaError_t copy_3d(const struct cudaMemcpy3DParms *p, cudaStream_t stream, int sync)
{
    if (!p)
        return rt_fail(cudaErrorInvalidValue);
    if (p->srcArray || p->dstArray)
        return rt_fail(cudaErrorNotSupported);
    const struct cudaPitchedPtr *s = &p->srcPtr, *d = &p->dstPtr;
    const struct cudaExtent *x = &p->extent;
    if (!x->width || !x->height || !x->depth)
        return cudaSuccess;
    size_t s_slice = s->pitch * (s->ysize ? s->ysize : x->height);
    size_t d_slice = d->pitch * (d->ysize ? d->ysize : x->height);
    for (size_t z = 0; z < x->depth; z++) {
        const char *src = (const char *)s->ptr + (p->srcPos.z + z) * s_slice +
                          p->srcPos.y * s->pitch + p->srcPos.x;
        char *dst =
            (char *)d->ptr + (p->dstPos.z + z) * d_slice + p->dstPos.y * d->pitch + p->dstPos.x;
        cudaError_t e =
            copy_rows(dst, d->pitch, src, s->pitch, x->width, x->height, p->kind, stream, 0);
        if (e != cudaSuccess)
            return e;
    }
    return sync ? cudaStreamSynchronize(NULL) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    return copy_3d(p, NULL, 1);
}

cudaError_t CUDARTAPI cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    return copy_3d(p, stream, 0);
}

static cudaError_t set_rows(char *dst, size_t pitch, int value, size_t width, size_t rows,
                            cudaStream_t stream, int sync)
{
    if (!width || !rows)
        return cudaSuccess;
    if (width > pitch && rows > 1)
        return rt_fail(cudaErrorInvalidPitchValue);
    if (pitch == width || rows == 1)
        return sync ? cudaMemset(dst, value, width * rows)
                    : cudaMemsetAsync(dst, value, width * rows, stream);
    for (size_t r = 0; r < rows; r++) {
        cudaError_t e = cudaMemsetAsync(dst + r * pitch, value, width, sync ? NULL : stream);
        if (e != cudaSuccess)
            return e;
    }
    return sync ? cudaStreamSynchronize(NULL) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemset2D(void *devPtr, size_t pitch, int value, size_t width,
                                   size_t height)
{
    return set_rows(devPtr, pitch, value, width, height, NULL, 1);
}

cudaError_t CUDARTAPI cudaMemset2DAsync(void *devPtr, size_t pitch, int value, size_t width,
                                        size_t height, cudaStream_t stream)
{
    return set_rows(devPtr, pitch, value, width, height, stream, 0);
}

static cudaError_t set_3d(struct cudaPitchedPtr p, int value, struct cudaExtent x,
                          cudaStream_t stream, int sync)
{
    if (!x.width || !x.height || !x.depth)
        return cudaSuccess;
    size_t slice = p.pitch * (p.ysize ? p.ysize : x.height);
    for (size_t z = 0; z < x.depth; z++) {
        cudaError_t e =
            set_rows((char *)p.ptr + z * slice, p.pitch, value, x.width, x.height, stream, 0);
        if (e != cudaSuccess)
            return e;
    }
    return sync ? cudaStreamSynchronize(NULL) : cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemset3D(struct cudaPitchedPtr pitchedDevPtr, int value,
                                   struct cudaExtent extent)
{
    return set_3d(pitchedDevPtr, value, extent, NULL, 1);
}

cudaError_t CUDARTAPI cudaMemset3DAsync(struct cudaPitchedPtr pitchedDevPtr, int value,
                                        struct cudaExtent extent, cudaStream_t stream)
{
    return set_3d(pitchedDevPtr, value, extent, stream, 0);
}

/* One device: a peer copy is a device-to-device copy on device 0. */
cudaError_t CUDARTAPI cudaMemcpyPeer(void *dst, int dstDevice, const void *src, int srcDevice,
                                     size_t count)
{
    if (dstDevice != 0 || srcDevice != 0)
        return rt_fail(cudaErrorInvalidDevice);
    return cudaMemcpy(dst, src, count, cudaMemcpyDeviceToDevice);
}

cudaError_t CUDARTAPI cudaMemcpyPeerAsync(void *dst, int dstDevice, const void *src, int srcDevice,
                                          size_t count, cudaStream_t stream)
{
    if (dstDevice != 0 || srcDevice != 0)
        return rt_fail(cudaErrorInvalidDevice);
    return cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, stream);
}

/* cudaStreamAddCallback is a host function that passes the program's own stream handle. */
struct callback {
    cudaStreamCallback_t fn;
    cudaStream_t stream;
    void *data;
};

static void CUDART_CB run_callback(void *arg)
{
    struct callback c = *(struct callback *)arg;
    free(arg);
    c.fn(c.stream, cudaSuccess, c.data);
}

cudaError_t CUDARTAPI cudaStreamAddCallback(cudaStream_t stream, cudaStreamCallback_t callback,
                                            void *userData, unsigned int flags)
{
    if (!callback || flags)
        return rt_fail(cudaErrorInvalidValue);
    struct callback *c = malloc(sizeof(*c));
    if (!c)
        return rt_fail(cudaErrorMemoryAllocation);
    *c = (struct callback){callback, stream, userData};
    cudaError_t e = cudaLaunchHostFunc(stream, run_callback, c);
    if (e != cudaSuccess)
        free(c);
    return e;
}

cudaError_t CUDARTAPI cudaEventRecordWithFlags(cudaEvent_t event, cudaStream_t stream,
                                               unsigned int flags)
{
    if (flags & ~(unsigned)cudaEventRecordExternal)
        return rt_fail(cudaErrorInvalidValue);
    return cudaEventRecord(event, stream);
}

/* The sim runs a grid's blocks one after another on one worker: every block of a cooperative
 * launch is resident "at once" only in the sense that grid-wide sync is not available. */
cudaError_t CUDARTAPI cudaLaunchCooperativeKernel(const void *func, dim3 gridDim, dim3 blockDim,
                                                  void **args, size_t sharedMem,
                                                  cudaStream_t stream)
{
    return cudaLaunchKernel(func, gridDim, blockDim, args, sharedMem, stream);
}

/* cudaLaunchKernelExC: a launch with attributes. Those the sim can honour are checked (cluster
 * dimensions must divide the grid); the others (priority, access policy, ...) are hints. */
cudaError_t CUDARTAPI cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func,
                                          void **args)
{
    if (!config || (config->numAttrs && !config->attrs))
        return rt_fail(cudaErrorInvalidValue);
    for (unsigned i = 0; i < config->numAttrs; i++) {
        const cudaLaunchAttribute *a = &config->attrs[i];
        if (a->id != cudaLaunchAttributeClusterDimension)
            continue;
        unsigned x = a->val.clusterDim.x, y = a->val.clusterDim.y, z = a->val.clusterDim.z;
        if (!x || !y || !z || x * y * z > 8 || config->gridDim.x % x || config->gridDim.y % y ||
            config->gridDim.z % z)
            return rt_fail(cudaErrorInvalidClusterSize);
    }
    return cudaLaunchKernel(func, config->gridDim, config->blockDim, args, config->dynamicSmemBytes,
                            config->stream);
}

cudaError_t CUDARTAPI cudaMemRangeGetAttributes(void **data, size_t *dataSizes,
                                                enum cudaMemRangeAttribute *attributes,
                                                size_t numAttributes, const void *devPtr,
                                                size_t count)
{
    if (!numAttributes || !data || !dataSizes || !attributes)
        return rt_fail(cudaErrorInvalidValue);
    for (size_t i = 0; i < numAttributes; i++) {
        cudaError_t e =
            cudaMemRangeGetAttribute(data[i], dataSizes[i], attributes[i], devPtr, count);
        if (e != cudaSuccess)
            return e;
    }
    return cudaSuccess;
}

static cudaError_t copy_3d_peer(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream,
                                int sync)
{
    if (!p)
        return rt_fail(cudaErrorInvalidValue);
    if (p->srcDevice != 0 || p->dstDevice != 0)
        return rt_fail(cudaErrorInvalidDevice);
    struct cudaMemcpy3DParms q = {p->srcArray, p->srcPos, p->srcPtr, p->dstArray,
                                  p->dstPos,   p->dstPtr, p->extent, cudaMemcpyDeviceToDevice};
    return copy_3d(&q, stream, sync);
}

cudaError_t CUDARTAPI cudaMemcpy3DPeer(const struct cudaMemcpy3DPeerParms *p)
{
    return copy_3d_peer(p, NULL, 1);
}

cudaError_t CUDARTAPI cudaMemcpy3DPeerAsync(const struct cudaMemcpy3DPeerParms *p,
                                            cudaStream_t stream)
{
    return copy_3d_peer(p, stream, 0);
}
