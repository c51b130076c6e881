/* cuda_xfer.c — the streaming pipeline between device memory and the image: read-ahead for a
 * checkpoint, write-behind for a restart, over XFER_SLOTS staging buffers. Generic: the copy
 * step is the backend's (struct xfer_ops). */
#include "cuda_xfer.h"

#include <string.h>

static int slot_wait(struct xfer_pipe *p, struct xfer_slot *s)
{
    int e = 0;
    if (s->state == XFER_BUSY)
        e = p->ops->wait(p->ops->ctx, (unsigned)(s - p->slot));
    s->state = XFER_FREE;
    return e;
}

static void drain(struct xfer_pipe *p)
{
    for (unsigned i = 0; i < XFER_SLOTS; i++) {
        int e = slot_wait(p, &p->slot[i]);
        if (e && !p->err)
            p->err = e;
    }
}

static int ensure_buffer(struct xfer_pipe *p, struct xfer_slot *s, uint64_t len)
{
    if (s->buf && s->cap >= len)
        return 0;
    if (s->buf)
        return -1; /* buffers are sized once: a larger request is not staged */
    /* The loader's chunk (image_device.c), so a small first allocation does not size them. */
    uint64_t cap = len > XFER_BUF ? len : XFER_BUF;
    s->buf = p->ops->buffer(p->ops->ctx, (unsigned)(s - p->slot), cap);
    s->cap = s->buf ? cap : 0;
    return s->buf ? 0 : -1;
}

/* Starts read-ahead copies on the free slots, in address order. */
static void read_ahead(struct xfer_pipe *p)
{
    for (unsigned i = 0; i < XFER_SLOTS && p->ahead < p->ahead_end; i++) {
        struct xfer_slot *s = &p->slot[i];
        if (s->state != XFER_FREE)
            continue;
        uint64_t n = p->ahead_end - p->ahead < p->step ? p->ahead_end - p->ahead : p->step;
        if (ensure_buffer(p, s, n) != 0 ||
            p->ops->start(p->ops->ctx, i, 0, p->ahead, s->buf, n) != 0) {
            p->ahead_end = p->ahead; /* stop: the reader falls back to synchronous reads */
            return;
        }
        *s = (struct xfer_slot){s->buf, s->cap, p->ahead, n, XFER_BUSY, 0};
        p->ahead += n;
    }
}

const void *xfer_view(struct xfer_pipe *p, uint64_t addr, uint64_t len, uint64_t end)
{
    if (!len || end < addr + len)
        return NULL;
    struct xfer_slot *hit = NULL;
    for (unsigned i = 0; i < XFER_SLOTS; i++) {
        struct xfer_slot *s = &p->slot[i];
        if (s->state == XFER_VIEWED || (s->state == XFER_BUSY && s->to_device))
            slot_wait(p, s); /* the previous view is over; writes finish before reads */
        else if (s->state == XFER_BUSY && s->dev == addr && s->len == len)
            hit = s;
    }
    if (!hit) {
        /* Not the chunk read ahead (the first of a range, or the reader jumped): start over. */
        drain(p);
        p->err = 0;
        p->ahead = addr;
        p->ahead_end = end;
        p->step = len;
    }
    read_ahead(p);
    if (!hit)
        for (unsigned i = 0; i < XFER_SLOTS && !hit; i++)
            if (p->slot[i].state == XFER_BUSY && p->slot[i].dev == addr && p->slot[i].len == len)
                hit = &p->slot[i];
    if (!hit)
        return NULL;
    if (p->ops->wait(p->ops->ctx, (unsigned)(hit - p->slot)) != 0) {
        hit->state = XFER_FREE;
        drain(p);
        p->ahead_end = p->ahead;
        return NULL;
    }
    hit->state = XFER_VIEWED;
    /* Refill behind it now: the slot just viewed stays the caller's until its next call. */
    read_ahead(p);
    return hit->buf;
}

int xfer_write(struct xfer_pipe *p, uint64_t addr, const void *src, uint64_t len)
{
    for (unsigned i = 0; i < XFER_SLOTS; i++)
        if (p->slot[i].state != XFER_FREE && !p->slot[i].to_device)
            slot_wait(p, &p->slot[i]); /* read-ahead left over: nothing to keep */
    p->ahead = p->ahead_end = 0;
    const unsigned char *from = src;
    while (len) {
        struct xfer_slot *s = &p->slot[p->next_write];
        int e = slot_wait(p, s);
        if (e && !p->err)
            p->err = e;
        uint64_t n = len;
        if (s->buf && s->cap < n)
            n = s->cap;
        if (ensure_buffer(p, s, n) != 0)
            return p->err ? p->err : -1;
        memcpy(s->buf, from, n);
        if ((e = p->ops->start(p->ops->ctx, p->next_write, 1, addr, s->buf, n)) != 0)
            return e;
        *s = (struct xfer_slot){s->buf, s->cap, addr, n, XFER_BUSY, 1};
        p->next_write = (p->next_write + 1) % XFER_SLOTS;
        addr += n;
        from += n;
        len -= n;
    }
    return p->err;
}

int xfer_flush(struct xfer_pipe *p)
{
    drain(p);
    int e = p->err;
    p->err = 0;
    return e;
}

void xfer_reset(struct xfer_pipe *p)
{
    drain(p);
    p->err = 0;
    p->ahead = p->ahead_end = 0;
}
