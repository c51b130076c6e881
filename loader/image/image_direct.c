/* image_direct.c — the forked writer's page runs O_DIRECT by reference: vmspliced into two pipes
 * image_splicer.c's thread splices to the file; CRAC_DIRECT_WRITE=0 off (docs/DECISIONS.md). */
#include "image_direct.h"
#include "iov_step.h"

#include "image_splicer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

/* Each pipe's size: a whole write waits in one while the disk takes the one in the other (the
 * most an unprivileged process may ask for, fs.pipe-max-size, is 1 MiB by default). */
#define DIRECT_PIPE_BYTES (1 << 20)
#define SPLICER_STACK (64UL << 10)
#define PAGE_BYTES 4096UL
#define RUN_PAGES_MIN 16 /* a queue limit below this is not believed */

struct direct_io {
    int pipe_w[2];    /* write k > 0 goes through pipe (k - 1) % 2, write 0 through pipe 0 */
    size_t run_pages; /* the most pages a write should carry (direct_run_pages) */
    int proven;       /* a run went O_DIRECT: the filesystem takes them */
    uint64_t count;   /* writes taken: the first inline, write k > 0 the splicer's run k - 1 */
    void *stack;      /* the splicer's, once started */
    struct splicer s;
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

/* A number from the disk's queue (NAME under /sys/dev/block/MAJ:MIN/queue, or its parent's for
 * a partition); 0 where there is none (a filesystem without a block device of its own). */
static unsigned long queue_limit(dev_t dev, const char *name)
{
    static const char *const dirs[] = {"queue", "../queue"};
    for (int i = 0; i < 2; i++) {
        char path[96];
        snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/%s/%s", major(dev), minor(dev), dirs[i],
                 name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        unsigned long v = 0;
        int ok = fscanf(f, "%lu", &v) == 1;
        fclose(f);
        if (ok)
            return v;
    }
    return 0;
}

/* The pages of one write, so that the disk gets it as whole requests: each page of the forked
 * copy is a segment of its own (they are seldom neighbours in physical memory), and a write of
 * more segments than the queue's max_segments, or of more than max_sectors_kb, is split. A
 * virtio disk's 254 segments made each 1 MiB write two requests, 254 pages and 2; a write is now
 * as many whole requests as fit in MOST pages (254 there; 254 for 127 segments, 231 for 33),
 * each splice still one write whose requests go to the disk together (docs/DECISIONS.md
 * "Direct writes by reference, the default"). */
static size_t request_pages(int fd, size_t most)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || major(st.st_dev) == 0)
        return most;
    size_t request = most;
    unsigned long segments = queue_limit(st.st_dev, "max_segments");
    unsigned long kib = queue_limit(st.st_dev, "max_sectors_kb");
    if (segments >= RUN_PAGES_MIN && segments < request)
        request = segments;
    if (kib / 4 >= RUN_PAGES_MIN && kib / 4 < request)
        request = kib / 4;
    return most / request * request;
}

size_t direct_run_pages(const struct direct_io *d) { return d->run_pages; }

struct direct_io *direct_open(const char *path)
{
    struct direct_io *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    int fds[2][2] = {{-1, -1}, {-1, -1}};
    d->s.fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
    if (d->s.fd < 0 || pipe2(fds[0], O_CLOEXEC) != 0 || pipe2(fds[1], O_CLOEXEC) != 0) {
        int saved = errno;
        for (int i = 0; i < 4; i++)
            if (fds[i / 2][i % 2] >= 0)
                close(fds[i / 2][i % 2]);
        if (d->s.fd >= 0)
            close(d->s.fd);
        free(d);
        errno = saved;
        return NULL;
    }
    size_t pipe_bytes = DIRECT_PIPE_BYTES;
    for (int i = 0; i < 2; i++) {
        d->s.pipe_r[i] = fds[i][0];
        d->pipe_w[i] = fds[i][1];
        fcntl(d->pipe_w[i], F_SETPIPE_SZ, DIRECT_PIPE_BYTES); /* refused: the default size works */
        int size = fcntl(d->pipe_w[i], F_GETPIPE_SZ);
        if (size < (int)PAGE_BYTES)
            size = (int)PAGE_BYTES;
        if ((size_t)size < pipe_bytes)
            pipe_bytes = (size_t)size;
    }
    d->run_pages = request_pages(d->s.fd, pipe_bytes / PAGE_BYTES);
    return d;
}

/* The next LEN bytes of *IOV (*N buffers) into PIPE_W by reference, *IOV moved past them. A
 * reference is not a pin, so a page the writer shares copy-on-write with the program is not
 * copied (an O_DIRECT write from the writer's memory pins each page, and the pin copies it:
 * docs/DECISIONS.md). */
static int vmsplice_take(int pipe_w, struct iovec **iov, int *n, size_t len)
{
    while (len) {
        struct iovec v[DIRECT_IOV_MAX];
        int k = 0;
        for (size_t in = 0; k < *n && in < len; k++) {
            v[k] = (*iov)[k];
            if (v[k].iov_len > len - in)
                v[k].iov_len = len - in;
            in += v[k].iov_len;
        }
        ssize_t w = vmsplice(pipe_w, v, (unsigned long)k, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        iov_step(iov, n, (size_t)w);
        len -= (size_t)w;
    }
    return 0;
}

/* The bytes of the next write of a LEN-byte direct_writev: at most direct_run_pages. */
static size_t write_step(const struct direct_io *d, size_t len)
{
    return len < d->run_pages * PAGE_BYTES ? len : d->run_pages * PAGE_BYTES;
}

/* The first write inline, a write's worth at a time: a filesystem that refuses O_DIRECT writes
 * says so here (EINVAL), while the caller can still write every run through the page cache. */
static int write_inline(struct direct_io *d, struct iovec *iov, int n, uint64_t off, size_t len)
{
    volatile int32_t failed = 0;
    while (len && !failed) {
        size_t step = write_step(d, len);
        if (vmsplice_take(d->pipe_w[0], &iov, &n, step) != 0 ||
            splicer_move(d->s.pipe_r[0], d->s.fd, off, step, &failed) != 0)
            return -1;
        off += step;
        len -= step;
    }
    if (failed) {
        errno = failed;
        return -1;
    }
    return 0;
}

uint64_t direct_count(const struct direct_io *d) { return d->count; }

int direct_wait(struct direct_io *d, uint64_t n)
{
    int32_t tail;
    /* Write n > 0 is run n - 1, done once the splicer's tail passed it. */
    while (n > 0 && (uint64_t)(tail = __atomic_load_n(&d->s.tail, __ATOMIC_ACQUIRE)) < n &&
           !__atomic_load_n(&d->s.failed, __ATOMIC_ACQUIRE))
        splicer_wait(&d->s.tail, tail);
    int32_t failed = __atomic_load_n(&d->s.failed, __ATOMIC_ACQUIRE);
    if (failed) {
        errno = failed;
        return -1;
    }
    return 0;
}

int direct_overlap_sum(struct direct_io *d)
{
    return d->count >= 2 ? direct_wait(d, d->count - 2) : 0;
}

int direct_write(struct direct_io *d, const void *src, size_t len, uint64_t off)
{
    struct iovec iov = {(void *)src, len};
    return direct_writev(d, &iov, 1, off);
}

int direct_writev(struct direct_io *d, const struct iovec *iov, int n, uint64_t off)
{
    struct iovec v[DIRECT_IOV_MAX], *at = v;
    size_t len = 0;
    if (n > DIRECT_IOV_MAX) {
        errno = EINVAL;
        return -1;
    }
    memcpy(v, iov, (size_t)n * sizeof(*v));
    for (int i = 0; i < n; i++)
        len += iov[i].iov_len;
    if (!d->proven) {
        if (write_inline(d, at, n, off, len) != 0)
            return -1;
        d->proven = direct_write_used = 1;
        d->count = 1;
        return 0;
    }
    if (!d->stack) { /* the splicer, from the second write on */
        void *stack = mmap(NULL, SPLICER_STACK, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (stack == MAP_FAILED)
            return -1;
        int r = splicer_start(&d->s, stack, SPLICER_STACK);
        if (r < 0) {
            munmap(stack, SPLICER_STACK);
            errno = -r;
            return -1;
        }
        d->stack = stack;
    }
    while (len) {
        size_t step = write_step(d, len);
        /* A place in the queue: the run SPLICER_QUEUE before this one done (and no write
         * failed). */
        int32_t head = d->s.head;
        if (direct_wait(d, head >= SPLICER_QUEUE ? (uint64_t)(head - SPLICER_QUEUE + 1) : 0) != 0)
            return -1;
        /* Queued once all its bytes are in its pipe: a splicer that found part of a write
         * there wrote it as two requests (docs/DECISIONS.md). The pipe's run before (head - 2)
         * leaves it when its write ends; vmsplice waits for that. */
        if (vmsplice_take(d->pipe_w[(uint32_t)head % 2], &at, &n, step) != 0)
            return -1;
        d->s.queue[(uint32_t)head % SPLICER_QUEUE] = (struct splicer_run){off, step};
        __atomic_store_n(&d->s.head, head + 1, __ATOMIC_RELEASE);
        d->count++;
        splicer_kick(&d->s);
        off += step;
        len -= step;
    }
    return 0;
}

int direct_finish(struct direct_io *d)
{
    if (!d)
        return 0;
    if (d->stack) {
        __atomic_store_n(&d->s.ending, 1, __ATOMIC_RELEASE);
        splicer_kick(&d->s);
        /* A splicer still in a write has all its bytes: the join waits for it alone. */
        splicer_join(&d->s);
        munmap(d->stack, SPLICER_STACK);
    }
    int failed = d->s.failed;
    if (!failed && d->s.head != d->s.tail)
        failed = EIO;
    for (int i = 0; i < 2; i++) {
        close(d->pipe_w[i]);
        close(d->s.pipe_r[i]);
    }
    close(d->s.fd);
    free(d);
    if (failed) {
        errno = failed;
        return -1;
    }
    return 0;
}
