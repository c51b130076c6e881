/* image_direct.c — O_DIRECT + Linux AIO (raw io_setup/io_submit/io_getevents, no libaio) for the
 * forked writer's page runs: no copy into the page cache, no write-back to drive, the disk busy
 * while the writer checks the next pages (CRAC_DIRECT_WRITE=1; docs/DECISIONS.md). */
#include "image_direct.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Writes in flight at once: with runs of up to 2 MiB (a page-map batch), 16 MiB queued, enough
 * to keep a disk busy while the writer produces the next run. */
#define DIRECT_DEPTH 8

struct direct_io {
    int fd;
    aio_context_t ctx;
    struct iocb cbs[DIRECT_DEPTH];
    int busy[DIRECT_DEPTH];
    int in_flight;
    int failed; /* first error (an errno value), 0 while every write went well */
};

int direct_write_used;

int direct_write_requested(void)
{
    static int requested = -1;
    if (requested < 0) {
        const char *v = getenv("CRAC_DIRECT_WRITE");
        requested = v && v[0] && strcmp(v, "0") != 0;
    }
    return requested;
}

struct direct_io *direct_open(const char *path)
{
    struct direct_io *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (d->fd < 0) {
        int saved = errno;
        free(d);
        errno = saved;
        return NULL;
    }
    if (syscall(SYS_io_setup, DIRECT_DEPTH, &d->ctx) != 0) {
        int saved = errno;
        close(d->fd);
        free(d);
        errno = saved;
        return NULL;
    }
    return d;
}

/* Reaps at least MIN finished writes; a write that failed or came back short (a full disk) is
 * remembered: its pages may be gone from the writer's memory by now, so it is not retried. */
static void reap(struct direct_io *d, long min)
{
    struct io_event ev[DIRECT_DEPTH];
    while (d->in_flight && min > 0) {
        long got = syscall(SYS_io_getevents, d->ctx, min, DIRECT_DEPTH, ev, NULL);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            if (!d->failed)
                d->failed = errno;
            return;
        }
        for (long k = 0; k < got; k++) {
            int slot = (int)ev[k].data;
            if (ev[k].res < 0 && !d->failed)
                d->failed = (int)-ev[k].res;
            else if ((uint64_t)ev[k].res != d->cbs[slot].aio_nbytes && !d->failed)
                d->failed = ENOSPC;
            d->busy[slot] = 0;
            d->in_flight--;
        }
        min -= got;
    }
}

int direct_write(struct direct_io *d, const void *src, size_t len, uint64_t off)
{
    if (d->in_flight == DIRECT_DEPTH)
        reap(d, 1);
    if (d->failed) {
        errno = d->failed;
        return -1;
    }
    int slot = 0;
    while (d->busy[slot])
        slot++;
    struct iocb *cb = &d->cbs[slot];
    memset(cb, 0, sizeof(*cb));
    cb->aio_data = (uint64_t)slot;
    cb->aio_lio_opcode = IOCB_CMD_PWRITE;
    cb->aio_fildes = (uint32_t)d->fd;
    cb->aio_buf = (uint64_t)(uintptr_t)src;
    cb->aio_nbytes = len;
    cb->aio_offset = (int64_t)off;
    struct iocb *list[1] = {cb};
    long r;
    do
        r = syscall(SYS_io_submit, d->ctx, 1, list);
    while (r < 0 && (errno == EINTR || errno == EAGAIN));
    if (r != 1)
        return -1;
    d->busy[slot] = 1;
    d->in_flight++;
    direct_write_used = 1;
    return 0;
}

int direct_finish(struct direct_io *d)
{
    if (!d)
        return 0;
    reap(d, d->in_flight);
    int failed = d->failed;
    if (d->in_flight) /* io_getevents itself failed: destroying the context waits for them */
        failed = failed ? failed : EIO;
    syscall(SYS_io_destroy, d->ctx);
    close(d->fd);
    free(d);
    if (failed) {
        errno = failed;
        return -1;
    }
    return 0;
}
