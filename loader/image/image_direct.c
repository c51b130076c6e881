/* image_direct.c — the forked writer's page runs written O_DIRECT by reference (vmsplice into a
 * pipe, splice to the file: no copy), unless CRAC_DIRECT_WRITE=0 (docs/DECISIONS.md). */
#include "image_direct.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* Runs described ahead of the splicer, and the pipe's size: the writer goes on checking and
 * summing the next pages while the disk takes up to a pipe's worth (the most an unprivileged
 * process may ask for, fs.pipe-max-size, is 1 MiB by default). */
#define DIRECT_QUEUE 128
#define DIRECT_PIPE_BYTES (1 << 20)

struct run {
    uint64_t off, len;
};

struct direct_io {
    int fd, pipe_r, pipe_w;
    size_t pipe_bytes; /* the pipe's capacity: what one inline step may put into it */
    int proven;        /* a run went O_DIRECT: the filesystem takes them */
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct run queue[DIRECT_QUEUE];
    unsigned head, tail; /* under lock: runs queued so far, runs taken by the splicer */
    int threaded, ending;
    pthread_t splicer;
    int failed; /* first error (an errno value), 0 while every write went well */
};

int direct_write_used;

int direct_write_requested(void)
{
    static int requested = -1;
    if (requested < 0) {
        const char *v = getenv("CRAC_DIRECT_WRITE");
        requested = !v || !v[0] || strcmp(v, "0") != 0; /* the default; 0 turns it off */
    }
    return requested;
}

struct direct_io *direct_open(const char *path)
{
    struct direct_io *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    int fds[2];
    d->fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (d->fd < 0 || pipe2(fds, O_CLOEXEC) != 0) {
        int saved = errno;
        if (d->fd >= 0)
            close(d->fd);
        free(d);
        errno = saved;
        return NULL;
    }
    d->pipe_r = fds[0];
    d->pipe_w = fds[1];
    fcntl(d->pipe_w, F_SETPIPE_SZ, DIRECT_PIPE_BYTES); /* refused: the default size works */
    int size = fcntl(d->pipe_w, F_GETPIPE_SZ);
    d->pipe_bytes = size > 0 ? (size_t)size : 4096;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->changed, NULL);
    return d;
}

/* LEN bytes from the pipe into the file at OFF. After a failure the bytes are still taken out
 * of the pipe (into nothing), so a writer blocked in vmsplice is never left waiting. */
static int splice_out(struct direct_io *d, uint64_t off, uint64_t len, int *failed)
{
    while (len) {
        ssize_t n;
        if (!*failed) {
            loff_t at = (loff_t)off;
            n = splice(d->pipe_r, NULL, d->fd, &at, len, SPLICE_F_MOVE);
            if (n == 0)
                errno = ENOSPC;
        } else {
            static char sink[65536];
            n = read(d->pipe_r, sink, len < sizeof(sink) ? len : sizeof(sink));
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (*failed)
                return -1; /* the pipe itself broke: nothing more comes out of it */
            *failed = errno;
            continue;
        }
        off += (uint64_t)n;
        len -= (uint64_t)n;
    }
    return 0;
}

static void *splicer_main(void *arg)
{
    struct direct_io *d = arg;
    pthread_mutex_lock(&d->lock);
    for (;;) {
        while (d->tail == d->head && !d->ending)
            pthread_cond_wait(&d->changed, &d->lock);
        if (d->tail == d->head)
            break;
        struct run r = d->queue[d->tail % DIRECT_QUEUE];
        int failed = d->failed;
        pthread_mutex_unlock(&d->lock);
        int broken = splice_out(d, r.off, r.len, &failed);
        pthread_mutex_lock(&d->lock);
        if (failed && !d->failed)
            d->failed = failed;
        d->tail++;
        pthread_cond_broadcast(&d->changed);
        if (broken)
            break;
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

/* The pages of SRC into the pipe, by reference: a reference is not a pin, so a page the writer
 * shares copy-on-write with the program is not copied (an O_DIRECT write from the writer's
 * memory pins each page, and the pin copies it: docs/DECISIONS.md). */
static int vmsplice_all(int pipe_w, const void *src, size_t len)
{
    const char *p = src;
    while (len) {
        struct iovec iov = {(void *)p, len};
        ssize_t n = vmsplice(pipe_w, &iov, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int direct_write(struct direct_io *d, const void *src, size_t len, uint64_t off)
{
    if (!d->proven) {
        /* The first run inline, a pipe's worth at a time: a filesystem that refuses O_DIRECT
         * writes says so here (EINVAL), while the caller can still write every run through the
         * page cache. */
        int failed = 0;
        for (size_t done = 0; done < len && !failed;) {
            size_t step = len - done < d->pipe_bytes ? len - done : d->pipe_bytes;
            if (vmsplice_all(d->pipe_w, (const char *)src + done, step) != 0 ||
                splice_out(d, off + done, step, &failed) != 0)
                return -1;
            done += step;
        }
        if (failed) {
            errno = failed;
            return -1;
        }
        d->proven = direct_write_used = 1;
        return 0;
    }
    pthread_mutex_lock(&d->lock);
    if (!d->threaded && !d->failed) {
        if (pthread_create(&d->splicer, NULL, splicer_main, d) != 0)
            d->failed = EAGAIN;
        else
            d->threaded = 1;
    }
    while (d->head - d->tail == DIRECT_QUEUE && !d->failed)
        pthread_cond_wait(&d->changed, &d->lock);
    int failed = d->failed;
    if (!failed) {
        d->queue[d->head % DIRECT_QUEUE] = (struct run){off, len};
        d->head++;
        pthread_cond_broadcast(&d->changed);
    }
    pthread_mutex_unlock(&d->lock);
    if (failed) {
        errno = failed;
        return -1;
    }
    /* Queued before its bytes: the splicer, taking it, waits in splice for them. */
    return vmsplice_all(d->pipe_w, src, len);
}

int direct_finish(struct direct_io *d)
{
    if (!d)
        return 0;
    if (d->threaded) {
        pthread_mutex_lock(&d->lock);
        d->ending = 1;
        pthread_cond_broadcast(&d->changed);
        pthread_mutex_unlock(&d->lock);
        /* A writer that failed in vmsplice queued bytes it never sent: closing the pipe's write
         * end ends the splicer's wait for them. */
        close(d->pipe_w);
        d->pipe_w = -1;
        pthread_join(d->splicer, NULL);
    }
    int failed = d->failed;
    if (!failed && d->head != d->tail)
        failed = EIO;
    if (d->pipe_w >= 0)
        close(d->pipe_w);
    close(d->pipe_r);
    close(d->fd);
    pthread_mutex_destroy(&d->lock);
    pthread_cond_destroy(&d->changed);
    free(d);
    if (failed) {
        errno = failed;
        return -1;
    }
    return 0;
}
