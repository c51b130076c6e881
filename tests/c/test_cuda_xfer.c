/* test_cuda_xfer.c — the cuda backend's streaming pipeline (backends/cuda/cuda_xfer.c) with a
 * copy step that runs each copy only when it is waited for, so what is in flight is exact. */
#include "ctest.h"
#include "cuda_xfer.h"

#include <stdlib.h>
#include <string.h>

#define BASE 0x300000000000ULL
#define CH 8192ULL /* the reader's chunk in these tests (XFER_BUF is the buffers' least size) */

static unsigned char *dev;
static uint64_t dev_size;

struct pending {
    int active, to_device;
    uint64_t dev, len;
    void *host;
};
static struct pending q[XFER_SLOTS];
static int started, fail_wait_at = -1, fail_start_at = -1, buffers;

static void *buffer(void *ctx, unsigned slot, uint64_t len)
{
    (void)ctx, (void)slot;
    buffers++;
    return malloc(len);
}

static int start(void *ctx, unsigned slot, int to_device, uint64_t d, void *host, uint64_t len)
{
    (void)ctx;
    if (q[slot].active)
        return 99; /* a slot's queue is reused before its copy was waited for */
    if (started++ == fail_start_at)
        return 7;
    q[slot] = (struct pending){1, to_device, d, len, host};
    return 0;
}

static int wait_(void *ctx, unsigned slot)
{
    (void)ctx;
    struct pending *c = &q[slot];
    if (!c->active)
        return 0;
    c->active = 0;
    if (fail_wait_at >= 0 && c->dev == BASE + (uint64_t)fail_wait_at * CH)
        return 9;
    if (c->to_device)
        memcpy(dev + (c->dev - BASE), c->host, c->len);
    else
        memcpy(c->host, dev + (c->dev - BASE), c->len);
    return 0;
}

static int in_flight(void)
{
    int n = 0;
    for (int i = 0; i < XFER_SLOTS; i++)
        n += q[i].active;
    return n;
}

static const struct xfer_ops ops = {NULL, buffer, start, wait_};

static void fill(uint64_t seed)
{
    for (uint64_t i = 0; i < dev_size; i++)
        dev[i] = (unsigned char)((i * 2654435761u + seed) >> 7);
}

/* A whole range read in the loader's order: every chunk right, and while the caller holds chunk
 * j the next XFER_SLOTS-1 chunks are already being copied. */
static void test_read_ahead(void)
{
    struct xfer_pipe p = {.ops = &ops};
    uint64_t size = 10 * CH + 1000; /* ten full chunks and a short one */
    fill(1);
    int ok = 1, overlap = 1;
    for (uint64_t off = 0, j = 0; off < size; off += CH, j++) {
        uint64_t n = size - off < CH ? size - off : CH;
        const unsigned char *v = xfer_view(&p, BASE + off, n, BASE + size);
        ok &= v && memcmp(v, dev + off, n) == 0;
        uint64_t left = (size - off - n + CH - 1) / CH;
        overlap &= in_flight() == (int)(left < XFER_SLOTS - 1 ? left : XFER_SLOTS - 1);
    }
    CHECK(ok);
    CHECK(overlap);
    CHECK(started == 11);
    CHECK(buffers == XFER_SLOTS);
    /* Device memory changed (a later checkpoint): nothing stale is served after a reset. */
    xfer_reset(&p);
    fill(2);
    const unsigned char *v = xfer_view(&p, BASE, CH, BASE + size);
    CHECK(v && memcmp(v, dev, CH) == 0);
    xfer_reset(&p);
    CHECK(in_flight() == 0);
    CHECK(buffers == XFER_SLOTS); /* the staging buffers are reused */
}

/* A jump (another allocation, or out of order): the pipeline starts over there. */
static void test_jump_and_bounds(void)
{
    struct xfer_pipe p = {.ops = &ops};
    fill(3);
    const unsigned char *v = xfer_view(&p, BASE, CH, BASE + 4 * CH);
    CHECK(v && memcmp(v, dev, CH) == 0);
    v = xfer_view(&p, BASE + 20 * CH, CH, BASE + 22 * CH);
    CHECK(v && memcmp(v, dev + 20 * CH, CH) == 0);
    CHECK(in_flight() == 1); /* the range ends after one more chunk */
    CHECK(xfer_view(&p, BASE + 21 * CH, CH, BASE + 21 * CH) == NULL); /* past its range */
    v = xfer_view(&p, BASE + 21 * CH, CH, BASE + 22 * CH);
    CHECK(v && memcmp(v, dev + 21 * CH, CH) == 0);
    xfer_reset(&p);
}

/* A failed copy: NULL (the caller reads synchronously), and the pipeline recovers. */
static void test_read_error(void)
{
    struct xfer_pipe p = {.ops = &ops};
    fill(4);
    fail_wait_at = 2;
    const unsigned char *v = xfer_view(&p, BASE, CH, BASE + 6 * CH);
    CHECK(v != NULL);
    v = xfer_view(&p, BASE + CH, CH, BASE + 6 * CH);
    CHECK(v != NULL);
    CHECK(xfer_view(&p, BASE + 2 * CH, CH, BASE + 6 * CH) == NULL);
    fail_wait_at = -1;
    v = xfer_view(&p, BASE + 3 * CH, CH, BASE + 6 * CH);
    CHECK(v && memcmp(v, dev + 3 * CH, CH) == 0);
    xfer_reset(&p);
    fail_start_at = started + 1; /* the second read-ahead copy cannot start */
    v = xfer_view(&p, BASE, CH, BASE + 6 * CH);
    CHECK(v && memcmp(v, dev, CH) == 0);
    CHECK(xfer_view(&p, BASE + CH, CH, BASE + 6 * CH) == NULL ||
          memcmp(xfer_view(&p, BASE + CH, CH, BASE + 6 * CH), dev + CH, CH) == 0);
    fail_start_at = -1;
    xfer_reset(&p);
    CHECK(in_flight() == 0);
}

/* Write-behind: each write returns with its copy in flight (the caller's buffer is free at
 * once); the data is on the device after the flush. */
static void test_write_behind(void)
{
    struct xfer_pipe p = {.ops = &ops};
    memset(dev, 0, dev_size);
    unsigned char *src = malloc(CH), *want = malloc(12 * CH);
    int ok = 1, behind = 1;
    for (uint64_t j = 0; j < 12; j++) {
        for (uint64_t i = 0; i < CH; i++)
            src[i] = (unsigned char)(i * 31 + j * 7 + 1);
        memcpy(want + j * CH, src, CH);
        ok &= xfer_write(&p, BASE + j * CH, src, CH) == 0;
        behind &= in_flight() == (int)(j + 1 < XFER_SLOTS ? j + 1 : XFER_SLOTS);
        memset(src, 0xee, CH); /* reused at once, as the loader reuses its bounce buffer */
    }
    CHECK(ok);
    CHECK(behind);
    CHECK(xfer_flush(&p) == 0);
    CHECK(in_flight() == 0);
    CHECK(memcmp(dev, want, 12 * CH) == 0);
    /* A copy that fails is reported, by a later write or by the flush. */
    fail_wait_at = 1;
    int e = 0;
    for (uint64_t j = 0; j < 3; j++)
        e |= xfer_write(&p, BASE + j * CH, src, CH);
    e |= xfer_flush(&p);
    CHECK(e != 0);
    fail_wait_at = -1;
    CHECK(xfer_flush(&p) == 0);
    /* A write larger than a staging buffer is split. */
    unsigned char *big = malloc(XFER_BUF + 3 * CH);
    for (uint64_t i = 0; i < XFER_BUF + 3 * CH; i++)
        big[i] = (unsigned char)(i % 251);
    CHECK(xfer_write(&p, BASE, big, XFER_BUF + 3 * CH) == 0);
    CHECK(xfer_flush(&p) == 0);
    CHECK(memcmp(dev, big, XFER_BUF + 3 * CH) == 0);
    free(big);
    free(src);
    free(want);
}

int main(void)
{
    dev_size = XFER_BUF + 64 * CH;
    dev = malloc(dev_size);
    if (!dev)
        return 2;
    test_read_ahead();
    test_jump_and_bounds();
    test_read_error();
    test_write_behind();
    free(dev);
    return ctest_done();
}
