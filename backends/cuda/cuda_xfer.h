/* cuda_xfer.h — device memory to and from the image through pinned staging buffers on several
 * copy queues, overlapping the copies with the loader's file I/O (docs/CUDA.md "Streaming"). */
#ifndef CRAC_CUDA_XFER_H
#define CRAC_CUDA_XFER_H

#include <stdint.h>

#define XFER_SLOTS 4          /* staging buffers, each with its own copy queue (a CUDA stream) */
#define XFER_BUF (8ULL << 20) /* a staging buffer's size at least: the loader's chunk */

/* The copy step, the backend's: generic code drives it, so the pipeline is tested with host
 * copies on threads (tests/c/test_cuda_xfer.c) and runs on CUDA streams in the backend. */
struct xfer_ops {
    void *ctx;
    /* A staging buffer of len bytes for slot (pinned host memory), or NULL. */
    void *(*buffer)(void *ctx, unsigned slot, uint64_t len);
    /* Starts copying len bytes on slot's queue, device -> host (to_device 0) or host -> device;
     * 0, or an error code. */
    int (*start)(void *ctx, unsigned slot, int to_device, uint64_t dev, void *host, uint64_t len);
    /* Waits for slot's copy; 0, or its error code. */
    int (*wait)(void *ctx, unsigned slot);
};

enum { XFER_FREE, XFER_BUSY, XFER_VIEWED };

struct xfer_slot {
    void *buf;
    uint64_t cap;
    uint64_t dev, len;
    int state, to_device;
};

struct xfer_pipe {
    const struct xfer_ops *ops;
    struct xfer_slot slot[XFER_SLOTS];
    unsigned next_write;       /* write-behind: the slot the next write takes */
    uint64_t ahead, ahead_end; /* read-ahead: the next chunk to start, the end of its range */
    uint64_t step;             /* read-ahead: the chunk size the reader asks for */
    int err;                   /* a write-behind copy that failed, until xfer_flush reports it */
};

/* Device memory at [addr, addr+len) as host memory, valid until the next call on p; NULL where
 * the pipeline cannot (then the caller reads synchronously). Each call starts copies of the
 * chunks that follow (same size, up to end: the allocation's end) on the free slots, so they
 * are in flight while the caller writes this one to the file. */
const void *xfer_view(struct xfer_pipe *p, uint64_t addr, uint64_t len, uint64_t end);
/* Copies src to the device at addr through a staging buffer and returns once the copy has
 * started; the caller reuses src at once. 0, or the error of an earlier copy. */
int xfer_write(struct xfer_pipe *p, uint64_t addr, const void *src, uint64_t len);
/* Waits for every copy started; 0, or the first error since the last flush. */
int xfer_flush(struct xfer_pipe *p);
/* Forgets every chunk read ahead (waiting for the copies still in flight): device memory may
 * change from here on. */
void xfer_reset(struct xfer_pipe *p);

#endif
