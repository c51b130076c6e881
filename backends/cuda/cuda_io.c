/* cuda_io.c — the cuda backend's side of device.img: managed memory is read and written in place;
 * device memory goes through the streaming pipeline (cuda_xfer.c) on XFER_SLOTS CUDA streams with
 * pinned staging buffers, so the copies overlap the loader's file I/O (docs/CUDA.md). */
#include "cuda_bk.h"
#include "cuda_xfer.h"

#include <string.h>

static cudaStream_t streams[XFER_SLOTS];

static void *buffer(void *ctx, unsigned slot, uint64_t len)
{
    (void)ctx, (void)slot;
    void *p = NULL;
    /* Pinned: an asynchronous copy from pageable memory would be staged (and serialised) by the
     * driver. Kept for the life of this lower half (XFER_SLOTS * XFER_BUF bytes). */
    if (!cuda_real.cudaHostAlloc || cuda_real.cudaHostAlloc(&p, len, cudaHostAllocPortable))
        return NULL;
    return p;
}

static int start(void *ctx, unsigned slot, int to_device, uint64_t dev, void *host, uint64_t len)
{
    (void)ctx;
    if (!streams[slot] &&
        (!cuda_real.cudaStreamCreateWithFlags ||
         cuda_real.cudaStreamCreateWithFlags(&streams[slot], cudaStreamNonBlocking) != cudaSuccess))
        return cudaErrorNotSupported;
    void *d = (void *)(uintptr_t)dev;
    return (
        int)(to_device
                 ? cuda_real.cudaMemcpyAsync(d, host, len, cudaMemcpyHostToDevice, streams[slot])
                 : cuda_real.cudaMemcpyAsync(host, d, len, cudaMemcpyDeviceToHost, streams[slot]));
}

static int wait_slot(void *ctx, unsigned slot)
{
    (void)ctx;
    return (int)cuda_real.cudaStreamSynchronize(streams[slot]);
}

static const struct xfer_ops ops = {NULL, buffer, start, wait_slot};
static struct xfer_pipe pipe_ = {.ops = &ops};

/* Streaming needs the calls it is made of; without them, plain synchronous copies. */
static int can_stream(void)
{
    return cuda_real.cudaHostAlloc && cuda_real.cudaStreamCreateWithFlags &&
           cuda_real.cudaMemcpyAsync && cuda_real.cudaStreamSynchronize;
}

int cuda_io_read(uint64_t addr, void *dst, uint64_t len)
{
    uint64_t end;
    int kind = cuda_vmm_range_of(addr, &end);
    if (!kind && cuda_bk_context() != cudaSuccess) {
        /* No device here: the shim's allocations never got memory (every call failed as it does
         * natively); what is saved for them is empty. */
        memset(dst, 0, len);
        return 0;
    }
    if (kind == CUDA_BK_MANAGED) {
        memcpy(dst, (const void *)(uintptr_t)addr, len);
        return 0;
    }
    return (int)cuda_real.cudaMemcpy(dst, (const void *)(uintptr_t)addr, len,
                                     cudaMemcpyDeviceToHost);
}

int cuda_io_write(uint64_t addr, const void *src, uint64_t len)
{
    uint64_t end;
    int kind = cuda_vmm_range_of(addr, &end);
    if (kind == CUDA_BK_MANAGED) {
        memcpy((void *)(uintptr_t)addr, src, len);
        return 0;
    }
    if (kind == CUDA_BK_DEVICE && can_stream())
        return xfer_write(&pipe_, addr, src, len); /* finished by cuda_io_flush */
    return (int)cuda_real.cudaMemcpy((void *)(uintptr_t)addr, src, len, cudaMemcpyHostToDevice);
}

const void *cuda_io_host_view(uint64_t addr, uint64_t len)
{
    uint64_t end;
    int kind = cuda_vmm_range_of(addr, &end);
    if (kind == CUDA_BK_MANAGED)
        return (const void *)(uintptr_t)addr;
    if (kind == CUDA_BK_DEVICE && can_stream())
        return xfer_view(&pipe_, addr, len, end); /* NULL: the loader calls cuda_io_read */
    return NULL;
}

int cuda_io_flush(void) { return xfer_flush(&pipe_); }

void cuda_io_reset(void) { xfer_reset(&pipe_); }
